# Splits a Markdown page into its SQL examples, for test/docs/run.sh.
#
# The convention (described in full at the top of test/docs/run.sh):
#   - a ```sql block is run; if the next non-blank line after it opens a ```text block, that
#     block holds exactly what `psql -X -q` prints for the SQL, and the two are compared;
#   - a ```sql block whose previous non-blank line is <!-- docs-test: skip --> is not run.
#
# Writes, into the directory `out`:
#   session.sql    every block that runs, each preceded by an \echo line naming it
#   blocks.tsv     one line per block that runs: N, first SQL line, and for a compared block the
#                  line numbers of its ```text fences (open, close), else 0 0
#   N.expected     the ```text block's lines, for compared blocks
# Line numbers are those of the page, so a failure and UPDATE=1 can point at them.

function flush_pending() {
    if (pending_n) {
        printf "%d\t%d\t0\t0\n", pending_n, pending_line >> (out "/blocks.tsv")
        pending_n = 0
    }
}

BEGIN { n = 0; state = "prose"; pending_n = 0; prev_nonblank = "" }

{
    line = $0
    if (state == "prose") {
        if (line ~ /^```sql[ \t]*$/) {
            flush_pending()
            skip = (prev_nonblank ~ /^<!-- docs-test: skip -->[ \t]*$/)
            state = "sql"
            if (!skip) {
                n++
                cur_line = NR
                printf "\\echo '@@docs-block %d@@'\n", n >> (out "/session.sql")
            }
            next
        }
        if (line ~ /^```text[ \t]*$/ && pending_n) {
            state = "text"
            text_open = NR
            text_n = pending_n
            text_first = pending_line
            pending_n = 0
            printf "" > (out "/" text_n ".expected")
            next
        }
        if (line ~ /^```/) {
            flush_pending()
            state = "other"
            next
        }
        if (line !~ /^[ \t]*$/) {
            flush_pending()
            prev_nonblank = line
        }
        next
    }
    if (state == "sql") {
        if (line ~ /^```[ \t]*$/) {
            state = "prose"
            prev_nonblank = "```"
            if (!skip) {
                pending_n = n
                pending_line = cur_line
            }
            next
        }
        if (!skip) print line >> (out "/session.sql")
        next
    }
    if (state == "text") {
        if (line ~ /^```[ \t]*$/) {
            printf "%d\t%d\t%d\t%d\n", text_n, text_first, text_open, NR >> (out "/blocks.tsv")
            state = "prose"
            prev_nonblank = "```"
            next
        }
        print line >> (out "/" text_n ".expected")
        next
    }
    if (state == "other") {
        if (line ~ /^```[ \t]*$/) {
            state = "prose"
            prev_nonblank = "```"
        }
        next
    }
}

END { flush_pending() }
