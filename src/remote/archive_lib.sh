#!/bin/sh
# archive_lib.sh: functions that extract a gzip tar archive from elsewhere (a chart from a
# package, a survivor's chart root) without letting it write anywhere else. The driver sends
# this text in front of unpack_charts.sh, and of helm_prepare.sh (through chart_lib.sh), as one
# program (one exec).
#
# The archive is checked before anything is extracted, by its own listing: every member is TOP
# or under TOP/ (so no absolute name and nothing elsewhere), no member has a `..` component or
# a character tar had to escape (a backslash in the listing: a newline, a control character),
# and every member is a plain file or a directory: no symbolic link, hard link, device or FIFO,
# so nothing extracted later can be written through a link. It is then extracted into a new
# private directory, checked again there (what tar made, not what it said), and only then moved
# into place by the caller.
#
# No positional parameters of its own; each function's are below. A function that fails ends
# the whole program with exit status 1 and a message on stderr.

# check_archive ARCHIVE TOP: refuse ARCHIVE unless every member is a plain file or directory
# named TOP or TOP/..., with no `..` component.
check_archive() {
    if ! names=$(tar -tzf "$1") || ! long=$(tar -tvzf "$1"); then
        printf 'cannot list the archive %s\n' "$1" >&2
        exit 1
    fi
    bad=$(printf '%s\n' "$names" | MGMT_TOP=$2 awk '
        BEGIN { top = ENVIRON["MGMT_TOP"] }
        $0 == "" { next }
        $0 != top && $0 != (top "/") && index($0, top "/") != 1 { print "outside " top ": " $0; exit }
        ("/" $0 "/") ~ /\/\.\.\// { print "a .. component: " $0; exit }
        index($0, "\\") { print "an escaped character: " $0; exit }
    ')
    if [ -z "$bad" ]; then
        bad=$(printf '%s\n' "$long" | awk '
            $0 == "" { next }
            { t = substr($0, 1, 1) }
            t != "-" && t != "d" { print "not a plain file or directory: " $0; exit }
        ')
    fi
    if [ -n "$bad" ]; then
        printf 'refused the archive %s: member %s\n' "$1" "$bad" >&2
        exit 1
    fi
}

# extract_checked ARCHIVE DIR [TAR OPTION]...: extract ARCHIVE (already checked) into the new,
# empty directory DIR, then refuse it when DIR holds anything but plain files and directories.
extract_checked() {
    a=$1 d=$2
    shift 2
    if ! tar -xzf "$a" -C "$d" "$@"; then
        printf 'cannot extract the archive %s\n' "$a" >&2
        exit 1
    fi
    odd=$(find "$d" ! -type f ! -type d | head -n 1)
    if [ -n "$odd" ]; then
        printf 'refused the archive %s: it made %s\n' "$a" "${odd#"$d"/}" >&2
        exit 1
    fi
}
