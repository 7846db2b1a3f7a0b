#!/bin/sh
# chart_lib.sh: the functions that make a CNF instance's chart directory (owned by the login user,
# as Tacker's put_helmchart made it) and extract a chart archive into it, a fresh copy each time,
# sent in front of helm_prepare.sh (after archive_lib.sh, whose check_archive and
# extract_checked they use). Only CHART/... can change: the archive is checked (every member
# under CHART/, plain files and directories only), extracted into a new private directory beside
# it, checked again, and its CHART directory renamed into place; a refused or failed archive
# leaves the earlier copy as it was.

# chart_dir_make DIR OWNER: DIR made, owned by OWNER (a user name by POSIX rules, optionally
# :GROUP; anything else ends the program with exit status 2 before anything is made), 0755.
chart_dir_make() {
    case $2 in
    '' | [-:]* | *: | *:*:* | *[!A-Za-z0-9._:-]*)
        printf 'chart_dir_make: not a user name: %s\n' "$2" >&2
        exit 2
        ;;
    esac
    mkdir -p -- "$1" && chown -- "$2" "$1" && chmod 0755 -- "$1"
}

# chart_extract DIR ARCHIVE CHART: ARCHIVE (a file name in DIR) checked, extracted beside itself
# in a private directory, checked again, and its CHART directory renamed over any earlier copy.
# Runs in a subshell (it changes directory and sets a trap). Exit status: 0 extracted; 1 refused
# or failed (message on stderr); 2 CHART is not a plain name.
chart_extract() (
    case $3 in
    '' | . | .. | */* | -*)
        printf 'chart_extract: not a chart directory name: %s\n' "$3" >&2
        exit 2
        ;;
    esac
    cd "$1" || exit 1
    check_archive "$2" "$3"
    stage=$(mktemp -d -- ./.extract.XXXXXX) || exit 1
    trap 'rm -rf -- "$stage"' EXIT
    extract_checked "$2" "$stage" --no-same-owner
    if [ ! -d "$stage/$3" ]; then
        printf 'the archive %s has no %s directory\n' "$2" "$3" >&2
        exit 1
    fi
    rm -rf -- "./$3" && mv -- "$stage/$3" "./$3"
)
