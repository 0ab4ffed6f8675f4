# bench/results/policies.png: one column of panels per subject set (hot, 100k). Top row: every
# call's median calls/s over the rounds as a share of the SELECT 1 floor's median, grouped by
# call, one bar per engine. Bottom row: the ratios the policy layer is held to (check/consume,
# check_http/check, check_all/consume_all), one bar per engine: the median of the per-round
# ratios, a whisker from the lowest to the highest round (with more than one round), the
# target as a dashed segment over the bar. Called by bench/policies.sh:
#
#   gnuplot -e "datadir='...'; output='...'; keysets='hot 100k'; engines='table unlogged memory';
#               ymax_floor=1.2; ymax_ratio=1.4; rounds=3" bench/policies/plot.gp
#
# datadir/floor-<keys>.dat: one line per call, its name then one share of the floor per engine
# (in the order of engines). datadir/ratio-<keys>.dat: one line per ratio, its name, one median
# ratio per engine, one target per engine, one lowest ratio per engine, then one highest ratio
# per engine. '-' marks a call not measured on an engine, or a ratio without a target.

columns = words(keysets)
engine_count = words(engines)
set terminal pngcairo size 640 * columns, 760 font 'sans,9' noenhanced
set output output
set datafile missing '-'

colour(engine) = engine eq 'table' ? '#3b6fb6' : (engine eq 'unlogged' ? '#e08a1e' : '#4a9a4a')
# The centre of bar i (1-based) of n in a group at x, for clustered histograms with gap 1.
bar_x(x, i, n) = x + (i - (n + 1) / 2.0) / (n + 1.0)
bar_width(n) = 1.0 / (n + 1.0)
# A ratio's label goes above its bar, its target's dash and its whisker, whichever is highest.
higher(value, c) = valid(c) && column(c) > value ? column(c) : value
label_y(value, target_column, high_column) = \
    higher(higher(value, target_column), rounds > 1 ? high_column : target_column)
keys_title(keys) = keys eq 'hot' ? 'hot subject' : '100,000 subjects'

set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.95 relative
set grid ytics lc '#cccccc'
set xtics scale 0
set key top right horizontal

if (!exists('rounds')) rounds = 1
set multiplot layout 2, columns \
    title sprintf('ratelimit policy layer, medians of %d round(s): calls/s over the SELECT 1 floor (top); policy call over native call, %stargets dashed (bottom)', \
                  rounds, rounds > 1 ? 'lowest to highest round as whiskers, ' : '')
do for [k = 1:columns] {
    keys = word(keysets, k)
    file = sprintf('%s/floor-%s.dat', datadir, keys)
    # stats counts only the values inside the current ranges, which the previous panel set.
    set autoscale xy
    stats file using 0 nooutput
    set xrange [-0.6:STATS_records - 0.4]
    set yrange [0:ymax_floor]
    set ytics 0.1
    set ylabel 'calls/s / SELECT 1 calls/s'
    set title sprintf('%s: share of the floor', keys_title(keys))
    plot for [e = 1:engine_count] file using (column(e + 1)):xtic(1) \
            title word(engines, e) lc rgb colour(word(engines, e)), \
         for [e = 1:engine_count] file using (bar_x($0, e, engine_count)):(column(e + 1)): \
            (sprintf('%.2f', column(e + 1))) with labels offset 0, 0.6 font 'sans,7' notitle
}
do for [k = 1:columns] {
    keys = word(keysets, k)
    file = sprintf('%s/ratio-%s.dat', datadir, keys)
    # stats counts only the values inside the current ranges, which the previous panel set.
    set autoscale xy
    stats file using 0 nooutput
    set xrange [-0.6:STATS_records - 0.4]
    set yrange [0:ymax_ratio]
    set ytics 0.1
    set ylabel 'ratio of calls/s'
    set title sprintf('%s: policy call / native call', keys_title(keys))
    plot for [e = 1:engine_count] file using (column(e + 1)):xtic(1) \
            title word(engines, e) lc rgb colour(word(engines, e)), \
         for [e = 1:engine_count] file \
            using (rounds > 1 ? bar_x($0, e, engine_count) : NaN):(column(2 * engine_count + e + 1)): \
            (0):(column(3 * engine_count + e + 1) - column(2 * engine_count + e + 1)) \
            with vectors heads size screen 0.004, 90 lw 1 lc rgb '#333333' notitle, \
         for [e = 1:engine_count] file using (bar_x($0, e, engine_count)): \
            (label_y(column(e + 1), engine_count + e + 1, 3 * engine_count + e + 1)): \
            (sprintf('%.2f', column(e + 1))) with labels offset 0, 0.6 font 'sans,7' notitle, \
         for [e = 1:engine_count] file \
            using (bar_x($0, e, engine_count) - bar_width(engine_count) / 2):(column(engine_count + e + 1)): \
            (bar_width(engine_count)):(0) with vectors nohead dt 2 lw 2 lc rgb '#000000' notitle
}
unset multiplot
