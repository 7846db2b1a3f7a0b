#!/bin/sh
# clean_env.sh: delete the env files (`env.*`, secrets such as the join token) that an earlier
# step of this instance left in its run directory because the command meant to consume them
# never started (the connection dropped, or the driver was killed, between the upload and the
# exec; run_with_env.sh removes them itself once it runs), and the temporary copies of them an
# upload that broke off left (`env.install.mgmtd-<hex>`: the same pattern).
#
# The driver runs it on a node before the node's first step of every hook run (only one run of
# an instance at a time: the instance lock), and at once after an install step failed without
# an exit status.
#
# The first step of a merged node program (src/cluster/node_program.rs) runs after that
# program's own env files were uploaded, in the same upload as the scripts: those are named as
# KEEP and stay, for the step that consumes them; everything else of the pattern goes.
#
# Usage: clean_env.sh RUN_DIR [KEEP]...
#   RUN_DIR  the instance's run directory (relative: in the login user's home)
#   KEEP     an env file's exact name (`env.install`) this run uploaded just now
# Prints the names it removed, one a line. Exit status: 0 done (also when RUN_DIR is missing);
# 1 a file could not be removed.

dir=$1
shift
for f in "$dir"/env.*; do
    [ -f "$f" ] || [ -L "$f" ] || continue
    keep=
    for k do
        [ "${f##*/}" = "$k" ] && keep=1
    done
    [ -z "$keep" ] || continue
    rm -f -- "$f" || exit 1
    printf 'removed %s\n' "${f##*/}"
done
