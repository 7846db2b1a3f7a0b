#!/usr/bin/env bash
# wan-lab.sh - WAN-like links to a running lab: a user-space delay relay
# (examples/delay_relay.rs) in front of every primary node's sshd, because this kernel has no
# netem. See docs/lab.md "WAN-like links".
#
#   scripts/wan-lab.sh up DIR RTT_MS LABDIR   relay lab LABDIR's nodes with round-trip RTT_MS
#   scripts/wan-lab.sh down DIR               stop the relay, remove DIR's files
#   scripts/wan-lab.sh rewrite DIR < IN > OUT an inventory for the relayed lab
#   scripts/wan-lab.sh selftest [RTT_MS]      measure the relay (TCP echo) and check it
#
# `up`: node i of the lab (198.18.K.(10+i):22) is relayed at 127.K.0.(10+i):22 (all of 127/8
# is local on Linux: no host change) with a one-way delay of RTT_MS/2 each way. It writes
# DIR/known_hosts (the lab's host keys under the relay addresses, so host keys are still
# checked strictly), DIR/relay.pid, DIR/relay.table, DIR/relay.log, and checks that ssh with
# strict host keys reaches the first and the last node through the relay.
# `rewrite`: every `ssh_ip: 198.18.K.X` becomes `ssh_ip: 127.K.0.X, nic_ip: 198.18.K.X` (the
# cluster keeps its own addresses), jump hops `@198.18.K.X:` go through the relay too, and
# `known_hosts:` points at DIR/known_hosts.
# Run as root (the lab's files are root's). Only the relay this script started is stopped.
set -euo pipefail
{
export LC_ALL=C
PROG=${0##*/}
REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
readonly PROG REPO
# WAN_RELAY: another build of the relay (a debug one while developing); default the release one.
RELAY=${WAN_RELAY:-$REPO/target/release/examples/delay_relay}

usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; }
# shellcheck source=scripts/common.sh
. "$REPO/scripts/common.sh"

build_relay() {
    if [ -n "${WAN_RELAY:-}" ]; then
        [ -x "$RELAY" ] || die "WAN_RELAY=$RELAY is not an executable"
        return 0
    fi
    if [ ! -x "$RELAY" ] || [ -n "$(find "$REPO/examples/delay_relay.rs" -newer "$RELAY")" ]; then
        log "building the delay relay (cargo build --release --example delay_relay)"
        (cd "$REPO" && cargo build --release --locked --quiet --example delay_relay)
    fi
}

# start_relay DIR TABLE: starts the relay in the background on TABLE; pid in DIR/relay.pid.
start_relay() {
    local dir=$1 table=$2 i
    rm -f "$dir/relay.ready"
    setsid "$RELAY" --ready "$dir/relay.ready" "$table" </dev/null >>"$dir/relay.log" 2>&1 &
    printf '%s\n' "$!" >"$dir/relay.pid"
    for ((i = 0; i < 100; i++)); do
        [ -f "$dir/relay.ready" ] && return 0
        kill -0 "$(cat "$dir/relay.pid")" 2>/dev/null || break
        sleep 0.1
    done
    cat "$dir/relay.log" >&2
    stop_relay "$dir"
    die "the relay did not start (log above, table $table)"
}

# stop_relay DIR: ends the relay whose pid DIR/relay.pid holds, if it is still our relay.
stop_relay() {
    local dir=$1 pid
    [ -f "$dir/relay.pid" ] || return 0
    pid=$(cat "$dir/relay.pid")
    # Still our relay: a delay_relay whose --ready file is this DIR's (a pid may be reused).
    if [[ $pid =~ ^[0-9]+$ ]] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "delay_relay --ready $dir/relay.ready "; then
        kill "$pid" 2>/dev/null || true
        for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$dir/relay.pid" "$dir/relay.ready"
}

cmd_up() {
    [ $# -eq 3 ] || usage_error "up needs DIR RTT_MS LABDIR"
    local dir=$1 rtt=$2 lab=$3 net one_way name ip role x
    if ! [[ $rtt =~ ^[0-9]{1,5}$ ]] || ((10#$rtt % 2 != 0 || 10#$rtt > 20000)); then
        usage_error "RTT_MS must be an even number of milliseconds 0..20000 (got '$rtt')"
    fi
    one_way=$((10#$rtt / 2))
    if [ ! -s "$lab/lab.env" ] || [ ! -s "$lab/nodes.tsv" ] || [ ! -s "$lab/known_hosts" ]; then
        die "$lab is not a running lab (no lab.env, nodes.tsv or known_hosts; scripts/lab.sh up first)"
    fi
    net=$(sed -n 's/^LAB_NET=//p' "$lab/lab.env")
    [[ $net =~ ^[0-9]+$ ]] || die "$lab/lab.env has no LAB_NET"
    mkdir -p "$dir"
    dir=$(cd -- "$dir" && pwd -P)
    stop_relay "$dir"
    build_relay
    : >"$dir/relay.log"
    {
        printf '# written by scripts/wan-lab.sh up: round trip %s ms to lab %s\n' "$rtt" "$lab"
        while IFS=$'\t' read -r name ip role _; do
            [ "$name" = name ] || [ "$role" = hidden ] && continue
            x=${ip##*.}
            [ "$ip" = "198.18.$net.$x" ] || die "$lab/nodes.tsv: node $name has address '$ip', not in 198.18.$net.0/24"
            printf '127.%s.0.%s:22 %s:22 %s\n' "$net" "$x" "$ip" "$one_way"
        done <"$lab/nodes.tsv"
    } >"$dir/relay.table"
    # The lab's host keys under the relay's addresses: strict host key checking still holds.
    awk -v net="$net" '{ n = split($1, a, "."); if (n == 4 && a[1] == 198 && a[2] == 18 && a[3] == net) $1 = "127." net ".0." a[4]; print }' \
        "$lab/known_hosts" >"$dir/known_hosts"
    printf 'WAN_RTT_MS=%s\nWAN_NET=%s\nWAN_LAB=%s\n' "$rtt" "$net" "$lab" >"$dir/wan.env"
    start_relay "$dir" "$dir/relay.table"
    local first last
    first=$(awk 'NR == 2 { sub(":22", "", $1); print $1 }' "$dir/relay.table")
    last=$(awk 'END { sub(":22", "", $1); print $1 }' "$dir/relay.table")
    for x in $first $last; do
        ssh -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=yes -o "UserKnownHostsFile=$dir/known_hosts" \
            -o GlobalKnownHostsFile=/dev/null -i "$lab/id_ed25519" -o IdentitiesOnly=yes -o ConnectTimeout=10 \
            -o LogLevel=ERROR "root@$x" true ||
            die "ssh through the relay to $x failed (strict host keys against $dir/known_hosts)"
    done
    log "relay up: $(($(wc -l <"$dir/relay.table") - 1)) node(s) of $lab at 127.$net.0.X, round trip $rtt ms (pid $(cat "$dir/relay.pid"))"
}

cmd_down() {
    [ $# -eq 1 ] || usage_error "down needs DIR"
    [ -d "$1" ] || return 0
    local dir
    dir=$(cd -- "$1" && pwd -P)
    stop_relay "$dir"
    rm -f "$dir/relay.table" "$dir/known_hosts" "$dir/wan.env"
}

cmd_rewrite() {
    [ $# -eq 1 ] || usage_error "rewrite needs DIR"
    local dir net
    dir=$(cd -- "$1" && pwd -P)
    [ -s "$dir/wan.env" ] || die "$dir has no wan.env (wan-lab.sh up first)"
    net=$(sed -n 's/^WAN_NET=//p' "$dir/wan.env")
    sed -E -e "s/ssh_ip: 198\\.18\\.$net\\.([0-9]+)/ssh_ip: 127.$net.0.\\1, nic_ip: 198.18.$net.\\1/" \
        -e "s/@198\\.18\\.$net\\.([0-9]+):/@127.$net.0.\\1:/g" \
        -e "s|^( *)known_hosts: .*|\\1known_hosts: $dir/known_hosts|"
}

# A TCP echo through the relay: the round trip must take at least RTT_MS, and the first byte
# from the server at least 2 x RTT_MS after the connect (the handshake's round trip). Prints
# the measured figures; no lab needed.
cmd_selftest() {
    local rtt=${1:-50} dir
    if ! [[ $rtt =~ ^[0-9]{1,4}$ ]] || ((10#$rtt % 2 != 0 || 10#$rtt == 0)); then
        usage_error "selftest: RTT_MS must be even and > 0"
    fi
    build_relay
    dir=$(mktemp -d)
    # shellcheck disable=SC2064 # expand now: dir is local
    trap "stop_relay '$dir'; [ -z \"\${ECHO_PID:-}\" ] || kill \"\$ECHO_PID\" 2>/dev/null; rm -rf '$dir'" EXIT
    python3 - "$dir" <<'PY' &
import socket, sys, threading
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
open(sys.argv[1] + "/echo.port", "w").write(str(s.getsockname()[1]))
def serve(c):
    c.sendall(b"hello\n")
    while (d := c.recv(65536)):
        c.sendall(d)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
    ECHO_PID=$!
    for _ in $(seq 50); do [ -s "$dir/echo.port" ] && break; sleep 0.1; done
    [ -s "$dir/echo.port" ] || die "the echo server did not start"
    local port=$((20000 + RANDOM % 20000))
    printf '127.0.0.1:%s 127.0.0.1:%s %s\n' "$port" "$(cat "$dir/echo.port")" $((rtt / 2)) >"$dir/table"
    start_relay "$dir" "$dir/table"
    python3 - "$port" "$rtt" <<'PY'
import socket, sys, time
port, rtt = int(sys.argv[1]), float(sys.argv[2]) / 1000
t0 = time.perf_counter()
c = socket.create_connection(("127.0.0.1", port))
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
assert c.recv(6) == b"hello\n"
first = time.perf_counter() - t0
rtts = []
for i in range(20):
    msg = b"ping %d\n" % i
    t = time.perf_counter(); c.sendall(msg)
    got = b""
    while len(got) < len(msg):
        got += c.recv(64)
    rtts.append(time.perf_counter() - t)
    assert got == msg, (got, msg)
big = bytes(range(256)) * 4096  # 1 MiB, order checked
c.sendall(big); c.shutdown(socket.SHUT_WR)
back = b""
while (d := c.recv(65536)):
    back += d
ok = min(rtts) >= rtt and first >= 2 * rtt and back == big
print(f"wan-lab selftest: RTT {rtt*1000:.0f} ms: echo round trip min {min(rtts)*1000:.1f} ms, "
      f"max {max(rtts)*1000:.1f} ms (20 pings); first server byte {first*1000:.1f} ms after connect "
      f"(>= 2 x RTT); 1 MiB echoed {'intact' if back == big else 'CORRUPTED'}, end of stream passed on: "
      + ("ok" if ok else "FAILED"))
sys.exit(0 if ok else 1)
PY
}

case ${1:-} in
up) shift; [ "$(id -u)" -eq 0 ] || die "must run as root"; cmd_up "$@" ;;
down) shift; cmd_down "$@" ;;
rewrite) shift; cmd_rewrite "$@" ;;
selftest) shift; cmd_selftest "$@" ;;
-h | --help) usage ;;
*) usage_error "unknown command '${1:-}'" ;;
esac
exit 0
}
