#!/bin/sh
# Builds an update script of the current version from its source in sql/updates/, so that a
# definition the update needs is written once, in sql/install/ or sql/router/:
#
#   -- @include FILE         stands for the whole of FILE
#   -- @include FILE BLOCK   stands for the lines between "-- @begin BLOCK" and "-- @end BLOCK"
#                            in FILE (a block is named after what it defines)
#
# FILE is a path from the top of the repository. The marker lines themselves are left out of the
# result; every other line is copied as it is. A file or block that is not there, a block that
# does not end, or a comment that starts with @include in any other form stops the build.
#
# Usage: sh scripts/build-sql.sh sql/updates/NAME.sql > build/NAME.sql (the Makefile's rule).
set -eu

if [ "$#" -ne 1 ]; then
    echo "usage: sh scripts/build-sql.sh SOURCE > OUTPUT" >&2
    exit 2
fi

exec awk -v source="$1" '
function fail(message) {
    printf "build-sql: %s\n", message > "/dev/stderr"
    failed = 1
    exit 1
}

# Prints FILE, or only its block BLOCK when one is named, without the marker lines.
function include(file, block, where,    line, status, inside, found, words) {
    inside = 0
    found = 0
    while ((status = (getline line < file)) > 0) {
        if (line ~ /^-- @(begin|end) /) {
            split(line, words, " ")
            if (block != "" && words[3] == block) {
                if (words[2] == "@begin") {
                    if (found) fail(where ": block " block " stands twice in " file)
                    inside = 1
                    found = 1
                } else {
                    if (!inside) fail(where ": block " block " ends before it begins in " file)
                    inside = 0
                }
            }
            continue
        }
        if (block == "" || inside) print line
    }
    if (status < 0) fail(where ": cannot read " file)
    close(file)
    if (block != "" && !found) fail(where ": no block " block " in " file)
    if (inside) fail(where ": block " block " does not end in " file)
}

/^[[:space:]]*--+[[:space:]]*@include/ {
    where = source ":" FNR
    if ($0 !~ /^-- @include [^ ]+( [A-Za-z0-9_]+)?$/)
        fail(where ": write -- @include FILE [BLOCK] (got: " $0 ")")
    include($3, NF == 4 ? $4 : "", where)
    next
}

{ print }
' "$1"
