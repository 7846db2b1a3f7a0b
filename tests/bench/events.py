#!/usr/bin/env python3
"""Counts mgmt-driver's round trips from its event stream (`-o json`: one JSON event a line on
stderr, src/event.rs), for the benchmarks (scripts/bench-wan.sh and the bench-*.sh it drives).

    events.py STDERR_FILE...

Prints "execs<TAB>uploads<TAB>connections": `command` events (one remote exec each), `uploaded`
events that were not skipped (one file transfer each; a skipped upload's check is one of the
commands), and `connected` events (one SSH session each). Lines that are not JSON are ignored.
"""
import json
import sys

execs = uploads = connections = 0
for path in sys.argv[1:]:
    with open(path, errors="replace") as f:
        for line in f:
            if not line.startswith("{"):
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            kind = ev.get("event") if isinstance(ev, dict) else None
            if kind == "command":
                execs += 1
            elif kind == "uploaded" and not ev.get("skipped"):
                uploads += 1
            elif kind == "connected":
                connections += 1
print(f"{execs}\t{uploads}\t{connections}")
