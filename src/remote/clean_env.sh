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
# Usage: clean_env.sh RUN_DIR
#   RUN_DIR  the instance's run directory (relative: in the login user's home)
# Prints the names it removed, one a line. Exit status: 0 done (also when RUN_DIR is missing);
# 1 a file could not be removed.

for f in "$1"/env.*; do
    [ -f "$f" ] || [ -L "$f" ] || continue
    rm -f -- "$f" || exit 1
    printf 'removed %s\n' "${f##*/}"
done
