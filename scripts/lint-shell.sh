#!/usr/bin/env bash
# Runs shellcheck over every shell script of the repository and fails on any finding, down to
# style level. Part of the test command (scripts/test.sh).
#
# Which files: every file git knows about (tracked, or new and not ignored; without git, every
# file outside target/ and .git/) that either
#   - is named *.sh or *.bash: the node-side programs src/remote/*.sh, scripts/*.sh,
#     samples/**/*.sh, tests/labkit/*.sh, ...; or
#   - starts with a sh/bash/dash/ksh shebang (`#!/bin/sh`, `#!/usr/bin/env bash`, ...): .ci/run.
# Left out: tests/data/, third-party documents kept as published.
# Sourced files are followed from the repository root (`# shellcheck source=scripts/common.sh`).
# A finding that is a false positive is silenced where it is, with a reason:
#   # shellcheck disable=SC2016 # expanded by the node's shell, not here
#
# Usage: scripts/lint-shell.sh [-l]
#   -l  only list the files that would be checked
# Exit status: 0 clean; 1 findings (printed) or shellcheck missing; 2 bad usage.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

list_only=0
case ${1-} in
'') ;;
-l) list_only=1 ;;
*)
    echo "usage: $0 [-l]" >&2
    exit 2
    ;;
esac

candidates() {
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git ls-files -z --cached --others --exclude-standard
    else
        find . \( -path ./target -o -path ./.git \) -prune -o -type f -printf '%P\0'
    fi
}

is_shell() {
    case $1 in
    tests/data/*) return 1 ;;
    *.sh | *.bash) return 0 ;;
    esac
    local first=''
    IFS= read -r first <"$1" 2>/dev/null || true
    [[ $first =~ ^#![[:space:]]*([^[:space:]]*/)?(env[[:space:]]+)?(sh|bash|dash|ksh)([[:space:]]|$) ]]
}

files=()
while IFS= read -r -d '' f; do
    [ -f "$f" ] && is_shell "$f" && files+=("$f")
done < <(candidates | LC_ALL=C sort -z)
[ ${#files[@]} -gt 0 ] || {
    echo "lint-shell: no shell scripts found" >&2
    exit 1
}
if [ "$list_only" = 1 ]; then
    printf '%s\n' "${files[@]}"
    exit 0
fi

if ! command -v shellcheck >/dev/null; then
    echo "lint-shell: shellcheck is not installed (scripts/install-deps.sh installs it, as root)" >&2
    exit 1
fi
if shellcheck --norc --external-sources --severity=style "${files[@]}"; then
    echo "lint-shell: ${#files[@]} files, no findings ($(shellcheck --version | sed -n 's/^version: /shellcheck /p'))"
else
    echo "lint-shell: shellcheck found problems in the files above" >&2
    exit 1
fi
