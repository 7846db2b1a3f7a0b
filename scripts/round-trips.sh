#!/usr/bin/env bash
# Round trips per operation, computed: runs every operation's real code on the fake transport
# with one virtual second per round trip (src/round_trip_table.rs) and puts the table it prints
# into docs/benchmarks.md between the round-trips markers, replacing the one there. The counts
# are exact (no clock, no lab): re-run this after changing what an operation sends to nodes.
#
#   scripts/round-trips.sh [--check]    --check: fail if the doc's table is not current
set -euo pipefail
REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$REPO"
doc=docs/benchmarks.md
out=$(cargo test --locked --quiet --lib round_trip_table::print_round_trip_table -- --ignored --nocapture --exact 2>/dev/null |
    sed -n '/^<!-- round-trips:begin -->$/,/^<!-- round-trips:end -->$/p')
[ -n "$out" ] || { echo "round-trips.sh: the table test printed no table" >&2; exit 1; }
grep -q '^<!-- round-trips:begin -->$' "$doc" || { echo "round-trips.sh: $doc has no round-trips markers" >&2; exit 1; }
new=$(mktemp)
trap 'rm -f "$new"' EXIT
awk -v table="$out" '
    /^<!-- round-trips:begin -->$/ { print table; skip = 1; next }
    /^<!-- round-trips:end -->$/ { skip = 0; next }
    !skip { print }
' "$doc" >"$new"
if [ "${1:-}" = --check ]; then
    cmp -s "$new" "$doc" || { echo "round-trips.sh: $doc's round-trip table is not current; run scripts/round-trips.sh" >&2; exit 1; }
    echo "round-trips.sh: $doc is current"
else
    cp "$new" "$doc"
    echo "round-trips.sh: $doc updated"
fi
