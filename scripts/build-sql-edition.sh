#!/bin/sh
# Builds the SQL edition's install script (ratelimit_sql) from the C edition's definitions, so
# that every table, type, grant, preset and signature is written once, in sql/install/:
#
#   - the sources are read in the order given, as the C edition's install script reads them;
#   - each C function (from its "LANGUAGE c" line to its "AS 'MODULE_PATHNAME', 'SYMBOL';" line)
#     gets the PL/pgSQL body of block SYMBOL of the bodies files (sql/sql_edition/bodies/):
#     what the block holds replaces those lines, after the signature and comment the C edition
#     declares. A C function without a body there gets one that raises feature_not_supported
#     (0A000), names the function and says the C edition has it: never a silent fallback;
#   - the grants are the C edition's list, given to this extension (ratelimit_sql), or with
#     MODE plain, to the objects of the schema (a plain install is no extension);
#   - with MODE plain, pg_extension_config_dump calls are left out: outside an extension
#     pg_dump dumps every row anyway;
#   - with --drop-in EXTENSION, the source is an app's drop-in script (sql/drop_ins/<app>.sql) and
#     EXTENSION the SQL edition's extension of it (ratelimit_sql_<app>): its install steps and
#     grants name EXTENSION instead of the C edition's ratelimit_<app>, and ratelimit's owner is
#     ratelimit_sql's; with MODE plain, the grants go through ratelimit.set_drop_in_privileges,
#     given the objects drop_in_install_begin was given (a plain install is no extension).
#
# A bodies file holds blocks only ("-- @begin SYMBOL" ... "-- @end SYMBOL", comments between
# them); a block no C function uses, a block written twice or text outside a block stops the
# build.
#
# @VERSION@ in a source stands for VERSION. The script has no "\echo ... \quit" line: pg_tle
# runs it as it is.
#
# Usage: sh scripts/build-sql-edition.sh extension|plain VERSION "BODY FILES" [--drop-in EXTENSION]
#            SOURCE... > OUTPUT
set -eu

usage='usage: sh scripts/build-sql-edition.sh extension|plain VERSION "BODY FILES" [--drop-in EXTENSION] SOURCE... > OUTPUT'
if [ "$#" -lt 4 ] || { [ "$1" != extension ] && [ "$1" != plain ]; }; then
    echo "$usage" >&2
    exit 2
fi
mode="$1"
version="$2"
bodies="$3"
shift 3
drop_in=""
if [ "$1" = --drop-in ]; then
    if [ "$#" -lt 3 ]; then
        echo "$usage" >&2
        exit 2
    fi
    drop_in="$2"
    shift 2
fi

exec awk -v mode="$mode" -v version="$version" -v bodies="$bodies" -v drop_in="$drop_in" '
function fail(message) {
    printf "build-sql-edition: %s\n", message > "/dev/stderr"
    failed = 1
    exit 1
}

BEGIN {
    count = split(bodies, files, " ")
    for (f = 1; f <= count; f++) {
        file = files[f]
        inside = ""
        number = 0
        while ((status = (getline line < file)) > 0) {
            number++
            if (line ~ /^-- @begin /) {
                if (inside != "") fail(file ":" number ": block " inside " does not end")
                inside = substr(line, 11)
                if (inside in body) fail(file ":" number ": block " inside " is written twice")
                body[inside] = ""
                continue
            }
            if (line ~ /^-- @end /) {
                if (substr(line, 9) != inside) fail(file ":" number ": " line " ends no open block")
                inside = ""
                continue
            }
            if (inside != "") body[inside] = body[inside] line "\n"
            else if (line !~ /^(--.*)?[[:space:]]*$/) fail(file ":" number ": text outside a block")
        }
        if (status < 0) fail("cannot read " file)
        if (inside != "") fail(file ": block " inside " does not end")
        close(file)
    }
}

FNR == 1 && NR > 1 { print "" }

/@VERSION@/ { gsub(/@VERSION@/, version) }

/^CREATE (OR REPLACE )?FUNCTION [@a-z_]+\.[a-z_]+\(/ {
    name = $0
    sub(/^CREATE (OR REPLACE )?FUNCTION /, "", name)
    sub(/\(.*/, "", name)
    sub(/^@extschema@\./, "", name)
}

/^LANGUAGE c( |$)/ {
    in_c = 1
    attributes = $0
    sub(/^LANGUAGE c/, "", attributes)
    extra = ""
    next
}

in_c && /^AS .MODULE_PATHNAME., / {
    in_c = 0
    symbol = $0
    sub(/^AS .MODULE_PATHNAME., ./, "", symbol)
    sub(/.;$/, "", symbol)
    if (symbol in body) {
        printf "%s", body[symbol]
        used[symbol] = 1
    } else {
        print "LANGUAGE plpgsql" attributes
        printf "%s", extra
        if (extra !~ /search_path/) print "SET search_path = pg_catalog, pg_temp"
        print "AS $$"
        print "BEGIN"
        print "    RAISE EXCEPTION \x27" name " is not in the SQL edition of ratelimit\x27"
        print "        USING ERRCODE = \x27feature_not_supported\x27,"
        print "              HINT = \x27The C edition (CREATE EXTENSION ratelimit) has it: docs/sql-edition.md lists what each edition holds.\x27;"
        print "END"
        print "$$;"
    }
    next
}

in_c {
    extra = extra $0 "\n"
    next
}

mode == "plain" && /^SELECT pg_catalog\.pg_extension_config_dump\(/ { next }

# A drop-in: its install steps name the extension of the SQL edition; the arguments they are
# given are kept for the grants of a plain install.
drop_in != "" && /^SELECT ratelimit\.drop_in_install_begin\(\x27ratelimit_[a-z_]+\x27, / {
    sub(/\(\x27ratelimit_[a-z_]+\x27, /, "(\x27" drop_in "\x27, ")
    in_begin = 1
    install_objects = ""
}

in_begin {
    part = $0
    sub(/^SELECT ratelimit\.drop_in_install_begin\(/, "", part)
    if (part ~ /\);$/) {
        sub(/\);$/, "", part)
        in_begin = 0
    }
    install_objects = install_objects (install_objects == "" ? "" : "\n") part
    print
    next
}

drop_in != "" && /^SELECT ratelimit\.set_member_privileges\(\x27ratelimit_[a-z_]+\x27, true, ARRAY\[$/ {
    if (mode == "plain") {
        if (install_objects == "") fail("the grants come before ratelimit.drop_in_install_begin")
        print "SELECT ratelimit.set_drop_in_privileges(" install_objects ", ARRAY["
    } else {
        print "SELECT ratelimit.set_member_privileges(\x27" drop_in "\x27, true, ARRAY["
    }
    granted = 1
    next
}

drop_in != "" && /e\.extname = \x27ratelimit\x27/ {
    gsub(/e\.extname = \x27ratelimit\x27/, "e.extname = \x27ratelimit_sql\x27")
}

/^SELECT ratelimit\.set_member_privileges\(.ratelimit., true, ARRAY\[$/ {
    print "SELECT ratelimit.set_member_privileges(" (mode == "plain" ? "NULL" : "\x27ratelimit_sql\x27") ", true, ARRAY["
    next
}

{ print }

END {
    if (failed) exit 1
    if (in_c) fail("a C function does not end with its AS line")
    if (drop_in != "" && !granted) fail("the drop-in grants nothing through ratelimit.set_member_privileges")
    for (symbol in body)
        if (!(symbol in used)) fail("block " symbol " is the body of no C function")
}
' "$@"
