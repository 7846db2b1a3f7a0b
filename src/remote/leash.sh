#!/bin/sh
# leash.sh: run one command for as long as the controller's SSH session lives, and no longer.
#
# Every command the driver runs goes through this program (see src/command.rs). The command runs
# under coreutils `timeout`, which makes itself the leader of a new process group and, when it
# gets TERM (or its duration runs out), signals that whole group and sends KILL after KILL_AFTER
# seconds. A duration of 0 means no time limit, but the group and the TERM-then-KILL still apply.
#
# The leash is the session's stdin. The controller keeps it open and writes nothing on it (after
# the sudo password line, when there is one). When the controller goes away - killed by any
# signal, the link reset, the session closed - sshd closes the session's pipes, this program
# reads end-of-file, and it sends TERM to the command, so nothing it started is left running.
# The command itself gets /dev/null as stdin: neither the leash nor the password reaches it.
#
# As root: the leash stays with the login user; it signals sudo, which relays TERM to the
# command (sudo's real uid is the login user's, so the login user may signal it).
#
# One file can come first on the same stdin (run-script: the script and its run in one exec, one
# round trip): the leash receives it with `receive` of upload_lib.sh, whose text comes before
# this one, prints `skipped` or `written` as the first line of stdout, and only then starts the
# command. A file that does not arrive whole is not put in place and the command does not run.
#
# Usage: leash.sh KILL_AFTER DURATION BECOME SCRIPT [FILE TMP SHA256 MODE SIZE]
#   KILL_AFTER  seconds between TERM and KILL (timeout -k)
#   DURATION    the command's time limit in seconds, 0 for none
#   BECOME      none | sudo (sudo -n) | sudo-password (the first stdin line is the password, for
#               sudo -S; it is handed to sudo alone)
#   SCRIPT      shell text, run by sh -c
#   FILE...     the file to receive first, SIZE bytes on stdin after the password line, as the
#               login user (see `receive` in upload_lib.sh)
# Exit status: the command's (124 when its time ran out); ended by signal N (KILL when it ignored
# TERM after its time ran out), this program ends by signal N too; 2 bad usage; 1 the file was
# not received (no `skipped` or `written` line then, and a message on stderr).

[ "$#" -eq 4 ] || [ "$#" -eq 9 ] || exit 2
k=$1 t=$2 b=$3 s=$4
exec 3<&0 </dev/null
p=
case $b in
none | sudo) ;;
sudo-password) IFS= read -r p <&3 || p= ;;
*) exit 2 ;;
esac
[ "$#" -eq 4 ] || receive "$5" "$6" "$7" "$8" "$9" <&3
case $b in
none) timeout -k "$k" "$t" sh -c "$s" & ;;
sudo) sudo -n -- timeout -k "$k" "$t" sh -c "$s" & ;;
sudo-password)
    printf '%s\n' "$p" | sudo -S -k -p '' -- timeout -k "$k" "$t" sh -c "exec </dev/null; $s" &
    p=
    ;;
esac
c=$!
{
    while IFS= read -r _; do :; done
    kill -TERM "$c"
} <&3 >/dev/null 2>&1 &
w=$!
exec 3<&-
wait "$c"
r=$?
kill "$w" 2>/dev/null
# A command ended by a signal: end the same way, so that sshd reports the signal, not 128+N.
case $r in
129 | 130 | 131 | 132 | 134 | 135 | 136 | 137 | 139 | 141 | 142 | 143)
    kill -"$((r - 128))" "$$"
    ;;
esac
exit "$r"
