#!/bin/sh
# authorized_key.sh: add or remove one of the driver's public keys in the login user's
# ~/.ssh/authorized_keys, idempotently.
#
# add: the line is appended unless a line with the same key (type and base64) is already there;
# ~/.ssh is created 0700 and the file 0600 when absent, and a file not ending in a newline gets
# one first, so our line never runs into the last one.
# remove: every line holding that key is dropped; the file is rewritten beside itself (same
# directory, mode 0600) and renamed over the old one, so a cut connection leaves the old file or
# the new one, never half of one. Lines of other keys are kept byte for byte.
#
# Usage: authorized_key.sh add|remove KEY_TYPE KEY_BASE64 [COMMENT]
# Exit status: 0 done (also when there was nothing to do); 1 a file could not be written; 2 bad
# usage (an unknown verb, or a key part that is empty or holds a space or a newline).

verb=$1
ktype=$2
kblob=$3
comment=${4-}
for part in "$ktype" "$kblob"; do
    case $part in
    '' | *[!A-Za-z0-9+/=@.-]*)
        printf 'authorized_key.sh: not a key part: %s\n' "$part" >&2
        exit 2
        ;;
    esac
done
case $comment in
*[!A-Za-z0-9_.@-]*)
    printf 'authorized_key.sh: not a comment: %s\n' "$comment" >&2
    exit 2
    ;;
esac
umask 077
dir=$HOME/.ssh
file=$dir/authorized_keys
# has_key FILE: whether a line of FILE holds exactly this key as its type and base64 fields.
has_key() {
    awk -v t="$ktype" -v b="$kblob" '{ for (i = 1; i < NF; i++) if ($i == t && $(i + 1) == b) found = 1 } END { exit !found }' "$1"
}
case $verb in
add)
    mkdir -p -- "$dir" || exit 1
    chmod 700 -- "$dir" || exit 1
    if [ -f "$file" ] && has_key "$file"; then
        chmod 600 -- "$file"
        exit
    fi
    if [ -s "$file" ] && [ "$(tail -c 1 -- "$file" | od -An -c | tr -d ' ')" != '\n' ]; then
        printf '\n' >>"$file" || exit 1
    fi
    printf '%s %s %s\n' "$ktype" "$kblob" "$comment" >>"$file" || exit 1
    chmod 600 -- "$file" || exit 1
    ;;
remove)
    [ -f "$file" ] || exit 0
    has_key "$file" || exit 0
    tmp=$dir/.authorized_keys.mgmt-driver.$$
    trap 'rm -f -- "$tmp"' EXIT
    trap 'exit 129' HUP
    trap 'exit 130' INT
    trap 'exit 143' TERM
    awk -v t="$ktype" -v b="$kblob" '{ keep = 1; for (i = 1; i < NF; i++) if ($i == t && $(i + 1) == b) keep = 0 } keep' "$file" >"$tmp" || exit 1
    chmod 600 -- "$tmp" || exit 1
    mv -f -- "$tmp" "$file" || exit 1
    trap - EXIT
    ;;
*)
    printf 'authorized_key.sh: unknown verb: %s\n' "$verb" >&2
    exit 2
    ;;
esac
