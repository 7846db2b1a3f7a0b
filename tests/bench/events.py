#!/usr/bin/env python3
"""Counts mgmt-driver's round trips from its event stream (`-o json`: one JSON event a line on
stderr, src/event.rs), for the benchmarks (scripts/bench-wan.sh and the bench-*.sh it drives).

    events.py STDERR_FILE...

Prints five tab-separated counts: execs (`command` events, one remote exec each), uploads
(`uploaded` events not skipped), connections (`connected` events, one SSH session each), the
round trips of the whole run, and the most round trips of any one host. The round trips are the
driver's own `round_trips` events (one per host and connection, when it closes: every command
and every file-transfer step is one; the handshake is not counted) when the binary emits them;
an older binary has none, and then they are execs + uploads. Lines that are not JSON are ignored.
"""
import json
import sys
from collections import Counter

execs = uploads = connections = 0
fallback, reported = Counter(), Counter()
seen_rt = False
for path in sys.argv[1:]:
    with open(path, errors="replace") as f:
        for line in f:
            if not line.startswith("{"):
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if not isinstance(ev, dict):
                continue
            kind, host = ev.get("event"), ev.get("host", "")
            if kind == "command":
                execs += 1
                fallback[host] += 1
            elif kind == "uploaded" and not ev.get("skipped"):
                uploads += 1
                fallback[host] += 1
            elif kind == "connected":
                connections += 1
            elif kind == "round_trips" and isinstance(ev.get("count"), int):
                seen_rt = True
                reported[host] += ev["count"]
per_host = reported if seen_rt else fallback
print(f"{execs}\t{uploads}\t{connections}\t{sum(per_host.values())}\t{max(per_host.values(), default=0)}")
