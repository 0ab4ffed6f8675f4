#!/usr/bin/env bash
# Debian roots for the PostgreSQL majors that Debian 12 does not ship: trixie for 17, forky for
# 18 (and bookworm for 15, for the package and for a run that leaves the host untouched). Run as
# root.
#
#   scripts/debian-root.sh make MAJOR         make the root, or reuse it; prints its directory
#   scripts/debian-root.sh sync MAJOR         copy this working tree into it
#   scripts/debian-root.sh run MAJOR CMD...   copy this working tree into it, then run CMD
#                                             inside it, in that copy
#   scripts/debian-root.sh path MAJOR         print its directory
#   scripts/debian-root.sh source MAJOR       print where this clone's copy is, seen from here
#   scripts/debian-root.sh add-15 MAJOR       install Debian 12's PostgreSQL 15 in the root too,
#                                             beside its own major, for pg_upgrade from 15
#
# Roots live outside the clone, in $RATELIMIT_ROOTS (default /var/lib/ratelimit/roots), one
# directory per Debian codename, so that every clone and every run reuses them. A root is made
# with `debootstrap --variant=minbase` from the mirror this machine's apt sources name, under
# a temporary name, and gets its final name only when complete: a half-made root (an
# interrupted run) is never mistaken for a made one and is made again. A lock per root keeps
# two runs from making the same root at once.
#
# Each clone has its copy in the root, /usr/src/ratelimit-<clone>-<hash of its path>, with its
# own build products; the test-only sources beside a clone (../shared/vendor/) go beside the
# copies, to /usr/src/shared/vendor/. One `run` or `sync` uses a root at a time: another waits
# for it (two runs would install their builds over each other's).
#
# `run` mounts /proc, /dev, /dev/pts and /dev/shm inside the root for the command only. The
# mounts are made in a private mount namespace, so the host never sees them and they vanish
# with the command even if it is killed; a trap also unmounts them when it ends, failed or not.
set -euo pipefail
repository="$(cd "$(dirname "$0")/.." && pwd)"
source "$repository/scripts/versions.sh"

roots="${RATELIMIT_ROOTS:-/var/lib/ratelimit/roots}"
# Where this working tree is copied inside a root.
root_source="/usr/src/ratelimit-$(basename "$repository")-$(printf '%s' "$repository" | sha1sum | cut -c1-8)"
# Written last when a root is made: its presence is what "made" means.
marker=.ratelimit-root

usage() {
    sed -n '2,14s/^# \{0,1\}//p' "$0" >&2
    exit 2
}

die() {
    echo "debian-root: $*" >&2
    exit 1
}

# The Debian mirror named in this machine's apt sources (deb822 or one-line format); with
# `debian-security`, the security archive's.
debian_mirror() {
    local archive="${1:-debian}" mirror
    mirror="$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
        sed -n 's/^URIs:[[:space:]]*//p' | tr ' ' '\n' | grep -E "/$archive/?\$" | head -1 || true)"
    if [ -z "$mirror" ]; then
        mirror="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
            awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' |
            grep -E "/$archive/?\$" | head -1 || true)"
    fi
    echo "${mirror:-http://deb.debian.org/$archive}"
}

# Unmounts whatever is still mounted under DIR (deepest first); true when nothing is left.
unmount_under() {
    local dir="$1" point
    for point in $(awk -v d="$dir" '$5 == d || index($5, d "/") == 1 { print $5 }' \
        /proc/self/mountinfo | sort -r); do
        umount -l "$point" 2>/dev/null || true
    done
    ! awk -v d="$dir" '$5 == d || index($5, d "/") == 1 { found = 1 } END { exit !found }' \
        /proc/self/mountinfo
}

# Removes a half-made or stale root, refusing if anything is still mounted inside it.
remove_root_dir() {
    local dir="$1"
    [ -e "$dir" ] || return 0
    unmount_under "$dir" || die "$dir still has mounts inside; not removing it"
    rm -rf --one-file-system "$dir"
}

# The configuration every root gets after debootstrap, before it is called made.
configure_root() {
    local dir="$1" codename="$2"
    mkdir -p "$dir/etc/apt/apt.conf.d" "$dir/etc/postgresql-common/createcluster.d" "$dir/usr/sbin"
    {
        echo 'APT::Install-Recommends "false";'
        echo 'Dpkg::Use-Pty "false";'
        # The mirror's copy of a testing release can carry a Release file past its
        # Valid-Until date; its signature is still checked.
        if [ "$codename" = forky ]; then
            echo 'Acquire::Check-Valid-Until "false";'
        fi
    } >"$dir/etc/apt/apt.conf.d/99ratelimit"
    # No package starts a service inside the root: the tests start their own clusters.
    printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
    chmod 755 "$dir/usr/sbin/policy-rc.d"
    # Nor does installing postgresql-NN create the packaged "main" cluster.
    echo 'create_main_cluster = false' >"$dir/etc/postgresql-common/createcluster.d/ratelimit.conf"
    cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
    # This machine's name resolves inside the root too (make-ssl-cert and others ask for it).
    cp /etc/hosts "$dir/etc/hosts" 2>/dev/null || true
}

# make_root MAJOR: makes the root of MAJOR unless it is made; prints its directory.
make_root() {
    local major="$1" codename dir mirror
    codename="$(codename_of_major "$major")"
    dir="$roots/$codename"
    mkdir -p "$roots"
    exec {lock}>"$roots/$codename.lock"
    flock -x "$lock"
    if [ -f "$dir/$marker" ]; then
        flock -u "$lock"
        echo "$dir"
        return 0
    fi
    mirror="$(debian_mirror)"
    echo "debian-root: making the $codename root for PostgreSQL $major in $dir from $mirror" >&2
    remove_root_dir "$dir"
    remove_root_dir "$dir.partial"
    local script=()
    # Debian 12's debootstrap knows no "forky": testing is made with the sid script.
    if [ ! -e "/usr/share/debootstrap/scripts/$codename" ]; then
        script=(/usr/share/debootstrap/scripts/sid)
    fi
    command -v debootstrap >/dev/null || {
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    }
    # debootstrap mounts /proc and /sys in the target while it works: in a private mount
    # namespace, an interrupted debootstrap leaves no mount behind.
    if ! unshare --mount --propagation private -- \
        debootstrap --variant=minbase "$codename" "$dir.partial" "$mirror" "${script[@]}" \
        >"$roots/$codename.debootstrap.log" 2>&1; then
        tail -20 "$roots/$codename.debootstrap.log" >&2
        die "debootstrap of $codename failed (log: $roots/$codename.debootstrap.log)"
    fi
    configure_root "$dir.partial" "$codename"
    echo "$codename $major $mirror $(date -u +%FT%TZ)" >"$dir.partial/$marker"
    mv "$dir.partial" "$dir"
    flock -u "$lock"
    echo "debian-root: $codename root made" >&2
    echo "$dir"
}

# The certificate authorities this machine adds to Debian's (/usr/local/share/ca-certificates,
# a proxy's for instance) are trusted inside the root as well, so that npm reaches its registry
# from there as it does from here.
trust_local_authorities() {
    local dir="$1" local_dir=/usr/local/share/ca-certificates
    [ -d "$local_dir" ] || return 0
    mkdir -p "$dir$local_dir"
    if ! diff -rq "$local_dir" "$dir$local_dir" >/dev/null 2>&1; then
        rm -rf "${dir:?}$local_dir"
        cp -r "$local_dir" "$dir$local_dir"
    fi
    # ca-certificates may not be installed yet: its installation then reads them itself.
    if [ -x "$dir/usr/sbin/update-ca-certificates" ] &&
        { [ ! -f "$dir/etc/ssl/certs/ca-certificates.crt" ] ||
            [ -n "$(find "$dir$local_dir" -newer "$dir/etc/ssl/certs/ca-certificates.crt" -print -quit)" ]; }; then
        chroot "$dir" /usr/sbin/update-ca-certificates >/dev/null 2>&1 || true
    fi
}

# The variables a command inside a root inherits; everything else starts clean.
passed_variables() {
    local name
    for name in $(compgen -e); do
        case "$name" in
        RATELIMIT_* | BENCH_* | FUZZ_* | RELIABILITY_* | PG_MAJOR | UPDATE | TERM)
            printf '%s=%s\0' "$name" "${!name}"
            ;;
        esac
    done
}

# Runs inside the private mount namespace: mount, run, unmount.
inside_namespace() {
    local dir="$1"
    shift
    mounted=()
    unmount_all() {
        local i
        for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
            umount -l "${mounted[$i]}" 2>/dev/null || true
        done
        mounted=()
    }
    trap unmount_all EXIT
    # A signal ends the script through its EXIT trap.
    trap 'exit 130' INT
    trap 'exit 143' TERM
    mount -t proc proc "$dir/proc" && mounted+=("$dir/proc")
    mount --bind /dev "$dir/dev" && mounted+=("$dir/dev")
    mkdir -p "$dir/dev/pts" "$dir/dev/shm"
    mount --bind /dev/pts "$dir/dev/pts" && mounted+=("$dir/dev/pts")
    # A /dev/shm of the root's own: PostgreSQL's dynamic shared memory lives there.
    mount -t tmpfs -o mode=1777,size=2g shm "$dir/dev/shm" && mounted+=("$dir/dev/shm")
    cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
    trust_local_authorities "$dir"
    local environment=()
    mapfile -d '' environment < <(passed_variables)
    local status=0
    chroot "$dir" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        "${environment[@]}" /bin/bash -c 'cd "$1" 2>/dev/null || cd /; shift; exec "$@"' \
        bash "$root_source" "$@" || status=$?
    return $status
}

# with_root_in_use MAJOR SUBCOMMAND ARGUMENTS...: this script's SUBCOMMAND, holding the root's
# lock for its whole length. The lock stays with flock (-o): a server the command leaves behind
# does not keep it.
with_root_in_use() {
    local major="$1" dir lock
    shift
    dir="$(make_root "$major")"
    lock="$roots/$(codename_of_major "$major").use.lock"
    if ! flock -n "$lock" true; then
        echo "debian-root: waiting for the $(codename_of_major "$major") root, which another run is using" >&2
    fi
    flock -o -x "$lock" "$0" "$@" "$dir"
}

# Copies the working tree into the root, leaving out what git ignores (build products of
# this system's major must never meet the root's) and keeping the copy's own build products
# and node_modules, so that a run there rebuilds only what changed. What changed is decided by
# content, and a file copied gets the time of the copy, not the source's: a source older than
# the object file built from an earlier version of it (a branch switched back, a file restored)
# would otherwise not be rebuilt, leaving a library made of two versions of a header.
sync_into_root() {
    local dir="$1"
    mkdir -p "$dir$root_source"
    command -v rsync >/dev/null || {
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rsync >/dev/null
    }
    rsync --recursive --links --perms --devices --specials --checksum --delete \
        --exclude=/.git --exclude=node_modules --filter=':- .gitignore' \
        "$repository/" "$dir$root_source/"
    # The test-only sources beside the clone (../shared/vendor/, never in the repository) go
    # beside its copy, where the same relative path finds them; absent here, absent there.
    local vendor
    vendor="$dir$(dirname "$root_source")/shared/vendor"
    if [ -d "$repository/../shared/vendor" ]; then
        mkdir -p "$vendor"
        rsync --recursive --times --delete "$repository/../shared/vendor/" "$vendor/"
    else
        rm -rf "$vendor"
    fi
}

# add-15: Debian 12's postgresql-15 in a newer root, beside the root's own major, so that one
# pg_upgrade there sees both (test/pg_upgrade.sh). bookworm's sources are there for this
# installation only, at a priority below the root's own release, so that bookworm gives only
# what the root lacks: postgresql-15 and the libraries it was linked with (ICU 72, LLVM 14,
# OpenLDAP 2.5; in forky also Debian 12's libxml2 and GnuTLS), never an older copy of a package
# the root has. Done once: the packages stay, and a root that has them is left as it is.
add_postgresql_15() {
    local dir="$1" log status=0
    local sources=/etc/apt/sources.list.d/ratelimit-bookworm.list pin=/etc/apt/preferences.d/ratelimit-bookworm
    [ ! -x "$dir/usr/lib/postgresql/15/bin/postgres" ] || return 0
    log="$roots/$(basename "$dir").add-15.log"
    echo "debian-root: installing Debian 12's postgresql-15 in $dir" >&2
    mkdir -p "$dir/etc/apt/sources.list.d" "$dir/etc/apt/preferences.d"
    {
        echo "deb $(debian_mirror) bookworm main"
        echo "deb $(debian_mirror debian-security) bookworm-security main"
    } >"$dir$sources"
    printf 'Package: *\nPin: release n=%s\nPin-Priority: 100\n\n' bookworm bookworm-security >"$dir$pin"
    unshare --mount --propagation private -- "$0" __inside "$dir" /bin/sh -c \
        'export DEBIAN_FRONTEND=noninteractive; apt-get update -qq &&
         apt-get install -y -qq --no-install-recommends postgresql-15' >"$log" 2>&1 || status=$?
    # bookworm's sources go, and their package lists with them.
    rm -f "$dir$sources" "$dir$pin" "$dir"/var/lib/apt/lists/*_dists_bookworm[_-]*
    if [ "$status" -ne 0 ] || [ ! -x "$dir/usr/lib/postgresql/15/bin/postgres" ]; then
        tail -20 "$log" >&2
        die "installing postgresql-15 in $dir failed (log: $log)"
    fi
}

[ "$#" -ge 1 ] || usage
[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, chroot and mount need it)"
command="$1"
shift
case "$command" in
make)
    [ "$#" -eq 1 ] || usage
    make_root "$1"
    ;;
path)
    [ "$#" -eq 1 ] || usage
    echo "$roots/$(codename_of_major "$1")"
    ;;
source)
    [ "$#" -eq 1 ] || usage
    echo "$roots/$(codename_of_major "$1")$root_source"
    ;;
sync)
    [ "$#" -eq 1 ] || usage
    with_root_in_use "$1" __sync
    ;;
add-15)
    [ "$#" -eq 1 ] || usage
    [ "$1" != 15 ] || die "PostgreSQL 15 is the bookworm root's own"
    codename_of_major "$1" >/dev/null
    with_root_in_use "$1" __add_15
    ;;
run)
    [ "$#" -ge 2 ] || usage
    major="$1"
    shift
    with_root_in_use "$major" __run "$@"
    ;;
# What the subcommands above run with the root's lock held; the root's directory comes last.
__sync)
    sync_into_root "$1"
    ;;
__add_15)
    add_postgresql_15 "$1"
    ;;
__run)
    dir="${*: -1}"
    set -- "${@:1:$#-1}"
    sync_into_root "$dir"
    unshare --mount --propagation private -- "$0" __inside "$dir" "$@"
    ;;
__inside)
    inside_namespace "$@"
    ;;
*)
    usage
    ;;
esac
