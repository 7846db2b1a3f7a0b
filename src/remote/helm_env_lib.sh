#!/bin/sh
# helm_env_lib.sh: the function that makes (or refreshes) a cluster's own Helm environment on a
# master, sent in front of helm_env.sh and helm_prepare.sh (one program, one exec). See
# helm_env.sh for what the environment is.

# helm_env DIR SRC: DIR/{cache,config,data} private to root (DIR 0700) and DIR/kubeconfig a 0600
# copy of SRC, rewritten only when SRC changed; no SRC (or ''), no kubeconfig. Prints `created`
# (DIR was new) or `kept`; a failed mkdir, cp or chmod ends the program with exit status 1.
helm_env() {
    (
        umask 077
        state=kept
        [ -d "$1" ] || state=created
        mkdir -p -- "$1/cache" "$1/config" "$1/data" && chmod 0700 -- "$1" || exit 1
        if [ -f "$2" ] && ! cmp -s -- "$2" "$1/kubeconfig"; then
            # A leftover (or planted) kubeconfig.new is removed, never written through.
            rm -f -- "$1/kubeconfig.new" && cp -- "$2" "$1/kubeconfig.new" && chmod 0600 -- "$1/kubeconfig.new" &&
                mv -f -- "$1/kubeconfig.new" "$1/kubeconfig" || exit 1
        fi
        echo "$state"
    ) || exit 1
}
