# bench/results/native.png: the extension's TPS over the plpgsql reference's, as grouped bars,
# one group per algorithm and one bar per engine, in one panel per key set (columns) and client
# count (rows), with each panel's targets as dashed lines in the colour of their engine. Above
# 1, the extension is faster. Called by bench/native.sh:
#
#   gnuplot -e "datadir='...'; output='...'; keysets='hot 100k'; clients='1 8 32';
#               engines='table unlogged'; ymax=3.5" bench/native/plot.gp
#
# datadir/ratio-<keys>-c<clients>.dat: one line per algorithm, its name then one ratio per
# engine, in the order of engines.

rows = words(clients)
columns = words(keysets)
engine_count = words(engines)
set terminal pngcairo size 620 * columns, 330 * rows + 50 font 'sans,9' noenhanced
set output output

colour(engine) = engine eq 'table' ? '#3b6fb6' : '#e08a1e'
target(engine, keys) = keys eq 'hot' ? 1 : (engine eq 'unlogged' ? 2 : 1.5)
# The centre of bar i (1-based) of n in a group at x, for clustered histograms with gap 1.
bar_x(x, i, n) = x + (i - (n + 1) / 2.0) / (n + 1.0)

set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.95 relative
set yrange [0:ymax]
set ytics 0.5
set grid ytics lc '#cccccc'
set xtics scale 0 rotate by 15 right offset 1, 0
set ylabel 'extension TPS / plpgsql TPS'
set key top right horizontal

set multiplot layout rows, columns \
    title 'ratelimit.consume vs plpgsql reference of the same algorithm (dashed: targets)'
do for [r = 1:rows] {
    do for [k = 1:columns] {
        keys = word(keysets, k)
        c = word(clients, r)
        file = sprintf('%s/ratio-%s-c%s.dat', datadir, keys, c)
        stats file using 2 nooutput
        set xrange [-0.6:STATS_records - 0.4]
        set title sprintf('%s, %s client%s', keys eq 'hot' ? 'hot key' : '100,000 keys', c, \
            c eq '1' ? '' : 's')
        unset arrow
        do for [e = 1:engine_count] {
            set arrow e from graph 0, first target(word(engines, e), keys) \
                to graph 1, first target(word(engines, e), keys) \
                nohead dt 2 lw 1.5 lc rgb colour(word(engines, e)) front
        }
        plot for [e = 1:engine_count] file using (column(e + 1)):xtic(1) \
                title word(engines, e) lc rgb colour(word(engines, e)), \
             for [e = 1:engine_count] file using (bar_x($0, e, engine_count)):(column(e + 1)): \
                (sprintf('%.2f', column(e + 1))) with labels offset 0, 0.6 font 'sans,7' notitle
    }
}
unset multiplot
