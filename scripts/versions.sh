# The PostgreSQL majors this repository is built and tested on, and the Debian release that
# ships each one. Source this file.
#
#   supported_majors            15 17 18
#   codename_of_major MAJOR     bookworm, trixie, forky
#   major_of_codename CODENAME  the reverse; fails for a release that ships none of them
#   native_major                the major of the Debian release this system runs (15 on Debian
#                               12, 17 inside a trixie root, 18 inside a forky root)

supported_majors=(15 17 18)

codename_of_major() {
    case "$1" in
    15) echo bookworm ;;
    17) echo trixie ;;
    18) echo forky ;;
    *)
        echo "versions: PostgreSQL $1 is not supported (supported: ${supported_majors[*]})" >&2
        return 1
        ;;
    esac
}

major_of_codename() {
    case "$1" in
    bookworm) echo 15 ;;
    trixie) echo 17 ;;
    forky) echo 18 ;;
    *)
        echo "versions: Debian \"$1\" ships none of the supported majors (${supported_majors[*]})" >&2
        return 1
        ;;
    esac
}

native_major() {
    local codename
    codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
    major_of_codename "$codename"
}
