# TAP output for the shell test scripts (test/memory/, test/reliability/, test/security/). Source
# this file.
#
#   ok STATUS DESCRIPTION        a check: STATUS 0 passes, anything else fails
#   is GOT EXPECTED DESCRIPTION  a check that GOT equals EXPECTED, showing both when not
#   skip DESCRIPTION REASON      a check that could not be made here, and why
#
# `checks` and `failures` count them; the script prints its plan and exits on `failures`.

checks=0
failures=0
ok() {
    checks=$((checks + 1))
    if [ "$1" = 0 ]; then
        echo "ok $checks - $2"
    else
        failures=$((failures + 1))
        echo "not ok $checks - $2"
    fi
}
is() {
    local got="$1" expected="$2" what="$3"
    if [ "$got" = "$expected" ]; then
        ok 0 "$what"
    else
        ok 1 "$what"
        echo "#   got:      $got"
        echo "#   expected: $expected"
    fi
}
skip() {
    checks=$((checks + 1))
    echo "ok $checks - $1 # SKIP $2"
}
