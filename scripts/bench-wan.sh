#!/usr/bin/env bash
# bench-wan.sh - issue 24's figures ("Fast at the edge") at round-trip times of 0 (direct) and
# 50 ms (every node behind the delay relay, scripts/wan-lab.sh): fan-out, cluster
# instantiate_end, cnf instantiate and sites apply, each against its peer. It drives the
# existing bench scripts (bench-fanout.sh, bench-cluster.sh, bench-cnf.sh, bench-sites.sh) with
# their --rtt hook and writes one markdown report (method, tables, goals, time per part).
#
#   scripts/bench-wan.sh [--rtt "0 50"] [--reps R] [--only fanout,cluster,cnf,sites,sitest]
#                        [--quick] [--baseline BIN] [--sites-t T] [--work DIR] [--out FILE]
#
#   --rtt "LIST"    round-trip times in ms (default "0 50"; 0 = direct, no relay)
#   --reps R        repetitions per row (default 3; sites: always 1, see the report)
#   --only LIST     parts to run (default all): fanout, cluster, cnf, sites (40 sites at T = 0:
#                   at once and one after another; bound by the lab's CPU on a small machine),
#                   sitest (a single site alone and 40 at once, install time T = --sites-t)
#   --quick         reps 1 and fan-out at N = 100 only
#   --baseline BIN  the mgmt-driver binary of commit 984cc53 for the fan-out's baseline row
#                   (default target/bench/md-984cc53 when it exists; build it once with
#                   `git worktree add /work/wt/wan-base 984cc53` and a release build there)
#   --sites-t T     sitest's stand-in install time per node, seconds (default 15: a real
#                   kubeadm takes minutes, and T lets the lab's CPU work fit inside the run)
#   --work DIR      raw figures and logs (default target/bench/wan; emptied first)
#   --out FILE      the report (default target/bench/wan.md)
#
# Labs: w1..w4 on nets 116..119 (fan-out, cluster, cnf, sites), one at a time; no test suite uses those nets. Peers: pyinfra
# and Ansible in target/bench-venv (bench-fanout.sh --with-peers creates it), paramiko from the
# Tacker venv (scripts/tacker-venv.sh). Run as root. No test asserts a time; this prints them.
set -euo pipefail
{
export LC_ALL=C
PROG=${0##*/}
REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
readonly PROG REPO
usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }
# shellcheck source=scripts/common.sh
. "$REPO/scripts/common.sh"

RTTS="0 50" REPS=3 ONLY=fanout,cluster,cnf,sites,sitest QUICK=0 BASE='' OUT=target/bench/wan.md SITES_T=15
WORK=target/bench/wan
ARGS_GIVEN="$*"
while [ $# -gt 0 ]; do
    case $1 in
    --rtt | --reps | --only | --baseline | --out | --sites-t | --work)
        [ $# -ge 2 ] || usage_error "option $1 needs a value"
        case $1 in
        --rtt) RTTS=$2 ;;
        --reps) REPS=$2 ;;
        --only) ONLY=$2 ;;
        --baseline) BASE=$2 ;;
        --out) OUT=$2 ;;
        --sites-t) SITES_T=$2 ;;
        --work) WORK=$2 ;;
        esac
        shift 2
        ;;
    --quick)
        QUICK=1
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *) usage_error "unknown argument '$1'" ;;
    esac
done
[[ $REPS =~ ^[1-9][0-9]?$ ]] || usage_error "--reps must be 1..99"
for r in $RTTS; do
    if ! [[ $r =~ ^[0-9]{1,4}$ ]] || ((10#$r % 2 != 0)); then usage_error "--rtt: '$r' is not an even number of ms"; fi
done
for p in ${ONLY//,/ }; do
    case $p in fanout | cluster | cnf | sites | sitest) ;; *) usage_error "--only: unknown part '$p'" ;; esac
done
SIZES="100 240"
if [ "$QUICK" = 1 ]; then REPS=1 SIZES=100; fi
[ "$(id -u)" -eq 0 ] || die "must run as root (the labs use namespaces)"
cd "$REPO"
[[ $OUT == /* ]] || OUT=$REPO/$OUT
[ -n "$BASE" ] || [ ! -x target/bench/md-984cc53 ] || BASE=$REPO/target/bench/md-984cc53
[[ $SITES_T =~ ^[0-9]{1,3}$ ]] || usage_error "--sites-t must be whole seconds"
[[ $WORK == /* ]] || WORK=$REPO/$WORK
rm -rf "$WORK"
mkdir -p "$WORK"
want() { case ,$ONLY, in *,"$1",*) return 0 ;; *) return 1 ;; esac; }

export CARGO_INCREMENTAL=0
log "building mgmt-driver and the delay relay (release)"
cargo build --release --locked --quiet
cargo build --release --locked --quiet --example delay_relay
TACKER_PY=''
if want cluster || want cnf; then
    TACKER_PY=$(bash scripts/tacker-venv.sh | tail -n 1)
    "$TACKER_PY" -c 'import paramiko' || die "$TACKER_PY has no paramiko (scripts/tacker-venv.sh)"
fi

# part NAME CMD...: runs one part, its output to WORK/NAME.log, its seconds to WORK/times.tsv.
part() {
    local name=$1 t0=$SECONDS
    shift
    log "$name: $*"
    "$@" >"$WORK/$name.log" 2>&1 || {
        tail -n 30 "$WORK/$name.log" >&2
        die "$name failed (log: $WORK/$name.log)"
    }
    printf '%s\t%s\n' "$name" "$((SECONDS - t0))" >>"$WORK/times.tsv"
    log "$name: done in $((SECONDS - t0)) s"
}

T_ALL=$SECONDS
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
for rtt in $RTTS; do
    if want fanout; then
        # shellcheck disable=SC2054 # the comma-separated tool list is one word
        args=(--name w1 --net 116 --rtt "$rtt" --sizes "$SIZES" --reps "$REPS" --with-peers
            --tools mgmt-driver,mgmt-driver-baseline,pyinfra,ansible
            --work "$WORK/fanout-rtt$rtt" --out "$WORK/fanout-rtt$rtt.md")
        [ -z "$BASE" ] || args+=(--baseline "$BASE")
        part "fanout-rtt$rtt" bash scripts/bench-fanout.sh "${args[@]}"
    fi
    if want cluster; then
        part "cluster-rtt$rtt" bash scripts/bench-cluster.sh --t 0 --workers 20 --reps "$REPS" --name w2 --net 117 \
            --rtt "$rtt" --tacker "$TACKER_PY" --no-seq --tsv "$WORK/cluster.tsv"
    fi
    if want cnf; then
        part "cnf-rtt$rtt" bash scripts/bench-cnf.sh --reps "$REPS" --name w3 --net 118 --rtt "$rtt" \
            --tacker "$TACKER_PY" --no-seq --tsv "$WORK/cnf.tsv"
    fi
    if want sites; then
        part "sites-rtt$rtt" bash scripts/bench-sites.sh --sizes 40 --t 0 --name w4 --net 119 --rtt "$rtt" \
            --ways atonce,inturn --tsv "$WORK/sites.tsv"
    fi
    if want sitest; then
        part "sites-t$SITES_T-rtt$rtt" bash scripts/bench-sites.sh --sizes "1 40" --t "$SITES_T" --name w4 --net 119 \
            --rtt "$rtt" --ways atonce --tsv "$WORK/sites-t.tsv"
        printf '%s\n' "$SITES_T" >"$WORK/sites-t.T"
    fi
done
log "all parts done in $((SECONDS - T_ALL)) s"

export BENCH_CMDLINE="bash scripts/$PROG${ARGS_GIVEN:+ $ARGS_GIVEN}" BENCH_REPS=$REPS BENCH_SIZES=$SIZES \
    BENCH_DATE BENCH_COMMIT BENCH_MACHINE BENCH_BASELINE BENCH_LOAD BENCH_NPROC
BENCH_LOAD="load average (1, 5, 15 min) $LOAD0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
BENCH_NPROC=$(nproc)
BENCH_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
BENCH_COMMIT=$(git rev-parse --short HEAD)
[ -z "$(git status --porcelain -- src Cargo.toml Cargo.lock)" ] || BENCH_COMMIT="$BENCH_COMMIT (plus uncommitted changes)"
BENCH_MACHINE="$(sed -n '/^model name/{s/^model name[[:space:]]*: //p;q}' /proc/cpuinfo), $(nproc) cores; $(ssh -V 2>&1)"
BENCH_BASELINE=${BASE:+$("$BASE" --version 2>/dev/null | head -n 1)}
mkdir -p "$(dirname -- "$OUT")"
python3 tests/bench/wan_report.py "$WORK" "$OUT"
log "report written to $OUT (raw figures and logs in $WORK)"
exit 0
}
