# shellcheck shell=bash
# The drop-in benchmarks' cases with ratelimit.dropin_engine = unlogged or memory: the same
# pgbench scripts, run with PGOPTIONS='-c ratelimit.dropin_engine=<engine>' (as ALTER ROLE ... SET
# would give every session of the role). Sourced by bench/rpc_limits.sh, endpoint_limits.sh and
# sliding_window_limits.sh after bench/lib.sh.
#
#   engine_case ENGINE NAME SCRIPT [SPACE KEY_PATTERN COUNT]
#       case ENGINE_NAME; on unlogged, checks that COUNT (default amount) summed over the rows of
#       ratelimit.key_state_unlogged in namespace SPACE whose key is LIKE KEY_PATTERN equals the
#       calls made. Memory cases are skipped when the library is not preloaded.
#   engine_row LABEL ENGINE NAME REFERENCE
#   engine_notes

# The memory engine needs the library preloaded (bench/run.sh's shared server does not preload
# it: its memory cases are then skipped and say so).
bench_cluster_start() {
    cluster_start "shared_buffers = 512MB" "max_wal_size = 4GB" "shared_preload_libraries = 'ratelimit'"
}

memory_available() {
    [ "$(psql -X -A -t -d "$database" -c \
        "SELECT current_setting('shared_preload_libraries') ~ '(^|[ ,])ratelimit($|[ ,])'")" = t ]
}

engine_case() {
    local engine="$1" name="$2" script="$3" space="${4:-}" pattern="${5:-}" count="${6:-amount}"
    if [ "$engine" = memory ] && ! memory_available; then
        echo "$bench_name: ${engine}_$name skipped: ratelimit is not in shared_preload_libraries"
        return 0
    fi
    local options="${PGOPTIONS:-} -c ratelimit.dropin_engine=$engine"
    if [ "$engine" = unlogged ] && [ -n "$space" ]; then
        PGOPTIONS="$options" bench_case "${engine}_$name" "$script" ratelimit.key_state_unlogged \
            "$count" "policy = '$space' AND key LIKE '$pattern'"
    else
        PGOPTIONS="$options" bench_case "${engine}_$name" "$script"
    fi
}

engine_row() {
    local label="$1" engine="$2" name="$3" reference="$4"
    if [ -n "${tps[${engine}_$name]:-}" ]; then
        table_row "$label" "${engine}_$name" "$reference"
    else
        echo "| $label | skipped (not preloaded) | — | — |"
    fi
}

engine_notes() {
    echo "- \`dropin_engine\` rows: the same script with" \
        "\`PGOPTIONS='-c ratelimit.dropin_engine=unlogged'\` or \`memory\`; the counts are in the" \
        "engine, not the app's table (unlogged: checked in \`ratelimit.key_state_unlogged\`;" \
        "memory: not readable from SQL, not checked). Their last column compares with the same" \
        "plpgsql reference"
}
