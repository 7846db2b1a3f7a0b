#!/usr/bin/env bash
# Fan-out benchmark: mgmt-driver run-script against OpenSSH (and pyinfra and Ansible when they
# are installed) on a lab of real sshd nodes. Run `bench-fanout.sh --help` for the details.
set -euo pipefail
# The whole script is one { ... } block, so bash reads all of it before running any of it: an
# edit to this file during a run (which takes minutes) cannot change the running benchmark.
{
export LC_ALL=C

PROG=${0##*/}
REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
readonly PROG REPO
readonly JOB_BYTES=16384
LAB_NAME=bench LAB_NET=9 RTT_MS=0 TOOL_FILTER='' WORK_GIVEN=''

usage() {
    cat <<EOF
usage: $PROG [--sizes "1 10 50 100"] [--reps R] [--with-peers] [--baseline BIN] [--out FILE]
             [--name NAME] [--net K] [--rtt MS] [--tools LIST] [--work DIR]

Brings up a lab of real OpenSSH servers (scripts/lab.sh up MAX --name $LAB_NAME --net $LAB_NET,
MAX = the largest size) and, for each size N, gives the same job to the first N nodes
with every tool: upload a fresh 16 KiB shell script, make it executable, run it, collect
its stdout. The tools take turns, R repetitions each, and every run is checked (exit
code 0 and one "<node> ok <rep>" line from every node) or the benchmark stops.

Tools (one table row each per N):
  mgmt-driver   target/release/mgmt-driver run-script (built here with cargo)
  OpenSSH       one ssh connection per node, script on stdin, xargs -P N
  OpenSSH       the same with -o KexAlgorithms=curve25519-sha256
  OpenSSH       scp then ssh (two connections per node), xargs -P N
  pyinfra       server.script, --parallel N        (when installed, see below)
  Ansible       ad-hoc script module, forks N, pipelining (when installed)

pyinfra and ansible are taken from PATH, or from the venv $REPO/target/bench-venv.

Reported per tool and N: median wall seconds, median controller CPU seconds (user + sys
of the tool and all its descendant processes), CPU ms per node, peak RSS (largest single
process of the tool's process tree), and the whole machine's busy CPU time during the run
(tool + lab). Before each run the script waits for the machine to be quiet. The markdown
table goes to stdout; FILE gets it with the machine, the method and the targets.

options:
  --sizes "LIST"  node counts, ascending or not (default "1 10 50 100"); 1..240
  --reps R        repetitions per tool and N (default 5)
  --with-peers    create the venv target/bench-venv with pyinfra and ansible-core
                  (pip install) if it does not exist yet
  --baseline BIN  also run another mgmt-driver binary (an earlier commit's release build) as
                  its own row, to compare two versions in the same run on the same machine
  --out FILE      where the report goes (default docs/benchmarks.md)
  --name NAME     the lab's name (default $LAB_NAME)
  --net K         the lab's network number (default $LAB_NET)
  --rtt MS        put every node behind the delay relay with this round-trip time
                  (scripts/wan-lab.sh; default 0: direct)
  --tools LIST    only these tools, comma-separated: mgmt-driver, mgmt-driver-baseline, ssh1,
                  ssh1-x25519, scp-ssh, pyinfra, ansible (default: all that are available)
  --work DIR      work files and logs (default target/bench; emptied first); DIR/results.tsv
                  has the raw figures, DIR/round-trips.tsv mgmt-driver's counted round trips (tool, N, then
                  tests/bench/events.py's counts)
  -h, --help      this text

Must run as root (the lab uses namespaces). The lab is torn down on exit. Work files
and per-run logs stay in target/bench/.
EOF
}

# shellcheck source=scripts/common.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/common.sh"

SIZES="1 10 50 100" REPS=5 WITH_PEERS=0 OUT=docs/benchmarks.md MD_BASE=
# The command line as given, for the report ("--sizes "1 10"" keeps its quotes).
ARGS_GIVEN=
for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./=-]+$ ]]; then ARGS_GIVEN+=" $a"; else ARGS_GIVEN+=" \"$a\""; fi
done
ARGS_GIVEN=${ARGS_GIVEN# }
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help)
        usage
        exit 0
        ;;
    --sizes | --reps | --out | --baseline | --name | --net | --rtt | --tools | --work)
        [ $# -ge 2 ] || usage_error "option $1 needs a value"
        case $1 in
        --sizes) SIZES=$2 ;;
        --reps) REPS=$2 ;;
        --out) OUT=$2 ;;
        --baseline) MD_BASE=$2 ;;
        --name) LAB_NAME=$2 ;;
        --net) LAB_NET=$2 ;;
        --rtt) RTT_MS=$2 ;;
        --tools) TOOL_FILTER=$2 ;;
        --work) WORK_GIVEN=$2 ;;
        esac
        shift 2
        ;;
    --with-peers)
        WITH_PEERS=1
        shift
        ;;
    *) usage_error "unknown argument '$1'" ;;
    esac
done

if ! [[ $REPS =~ ^[0-9]{1,3}$ ]] || ((10#$REPS < 1)); then
    usage_error "--reps must be a positive integer (got '$REPS')"
fi
REPS=$((10#$REPS))
read -r -a SIZE_LIST <<<"$SIZES"
[ ${#SIZE_LIST[@]} -gt 0 ] || usage_error "--sizes is empty"
MAX_N=0
for n in "${SIZE_LIST[@]}"; do
    if ! [[ $n =~ ^[0-9]{1,3}$ ]] || ((10#$n < 1 || 10#$n > 240)); then
        usage_error "--sizes: '$n' is not a node count in 1..240"
    fi
    ((10#$n > MAX_N)) && MAX_N=$((10#$n))
done
[ "$(id -u)" -eq 0 ] || die "must run as root (the lab creates namespaces and mounts); try: sudo bash $0 $ARGS_GIVEN"

cd "$REPO"
[ -f scripts/lab.sh ] || die "scripts/lab.sh is missing"
[[ $OUT == /* ]] || OUT=$REPO/$OUT

[[ $LAB_NAME =~ ^[a-z0-9]{1,5}$ ]] || usage_error "--name must be [a-z0-9]{1,5}"
[[ $LAB_NET =~ ^[0-9]{1,3}$ ]] || usage_error "--net must be a network number"
[[ $RTT_MS =~ ^[0-9]{1,5}$ ]] || usage_error "--rtt must be milliseconds"
WORK=${WORK_GIVEN:-$REPO/target/bench}
[[ $WORK == /* ]] || WORK=$REPO/$WORK
LAB=$REPO/target/lab/$LAB_NAME
VENV=$REPO/target/bench-venv
MD=$REPO/target/release/mgmt-driver

# ---------------------------------------------------------------------------
# Set-up: packages, build, optional peers, helper
# ---------------------------------------------------------------------------
# shellcheck source=scripts/install-deps.sh
. scripts/install-deps.sh
install_deps
need=()
command -v python3 >/dev/null || need+=(python3)
[ -x /usr/bin/time ] || need+=(time)
command -v scp >/dev/null || need+=(openssh-client)
command -v xargs >/dev/null || need+=(findutils)
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
/usr/bin/time -f %M -o /dev/null true 2>/dev/null || die "/usr/bin/time is not GNU time (needed for peak RSS)"

log "building mgmt-driver (cargo build --release)"
cargo build --release --locked --quiet
# What was built (taken now: the tree may change while the benchmark runs).
COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git -C "$REPO" status --porcelain -- src Cargo.toml Cargo.lock 2>/dev/null)" ]; then
    COMMIT="$COMMIT (plus uncommitted changes in src/ or Cargo files)"
fi

if [ "$WITH_PEERS" = 1 ] && { [ ! -x "$VENV/bin/pyinfra" ] || [ ! -x "$VENV/bin/ansible" ]; }; then
    log "creating $VENV with pyinfra and ansible-core"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check pyinfra ansible-core
fi
# find_peer NAME: path of NAME on PATH, else in the venv, else empty.
find_peer() {
    if command -v "$1" >/dev/null 2>&1; then
        command -v "$1"
    elif [ -x "$VENV/bin/$1" ]; then
        printf '%s\n' "$VENV/bin/$1"
    fi
}
PYINFRA=$(find_peer pyinfra)
ANSIBLE=$(find_peer ansible)

rm -rf "$WORK"
mkdir -p "$WORK/runs" "$WORK/jobs"
RESULTS=$WORK/results.tsv
printf 'tool\tn\trep\twall_s\tcpu_s\trss_kib\tmachine_cpu_s\tbackground_cores\n' >"$RESULTS"

# The measuring helper. `measure OUT ERR -- CMD...` runs CMD with stdin from /dev/null,
# stdout/stderr to files, and prints "rc wall_s cpu_s rss_kib machine_cpu_s".
# machine_cpu_s: busy time of all cores (/proc/stat) while CMD ran, i.e. the tool plus the lab's
# sshd processes plus anything else running. CPU: user + sys from wait4 of the whole tree
# (GNU time and everything below it that was waited for). Peak RSS: GNU time's
# %M, i.e. ru_maxrss of the tree = its largest single process; GNU time is there because a
# process forked from Python starts with Python's RSS, which would put a ~10 MiB floor under
# every figure. The helper is a child subreaper, so processes that daemonize (ssh
# ControlPersist masters) are reparented to it; when the tool has exited it ends them
# (SIGTERM), reaps them and adds their CPU and RSS.
# `settle MAX_S CORES` waits (at most MAX_S) until fewer than CORES cores are busy.
# `check OUT NAMES TAG` fails unless OUT has a "<name> ok TAG" line for every name.
cat >"$WORK/helper.py" <<'PY'
import ctypes, os, re, signal, sys, time

def children_of(pid):
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read()
            except OSError:
                continue
            if int(st.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(d))
    return kids

def machine_busy():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")

def measure(out, err, cmd):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    rssfile = err + ".rss"
    fo = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    fe = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    acts = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, fo, 1), (os.POSIX_SPAWN_DUP2, fe, 2),
            (os.POSIX_SPAWN_CLOSE, fo), (os.POSIX_SPAWN_CLOSE, fe)]
    argv = ["/usr/bin/time", "-f", "%M", "-o", rssfile, "--"] + cmd
    b0, t0 = machine_busy(), time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=acts)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    busy = machine_busy() - b0
    os.close(fo); os.close(fe)
    rc = os.waitstatus_to_exitcode(status)
    cpu = ru.ru_utime + ru.ru_stime
    with open(rssfile) as f:
        rss = int(f.read().split()[-1])
    # Whatever the tool left running (reparented to us) has no more work: end it, count it.
    for k in children_of(os.getpid()):
        os.kill(k, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while True:
        try:
            p, _, r = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if p:
            cpu += r.ru_utime + r.ru_stime
            rss = max(rss, r.ru_maxrss)
        elif time.monotonic() > deadline:
            for k in children_of(os.getpid()):
                os.kill(k, signal.SIGKILL)
        else:
            time.sleep(0.02)
    print(rc, f"{wall:.4f}", f"{cpu:.4f}", rss, f"{busy:.2f}")

def settle(max_s, threshold):
    # Wait until the machine is quiet: a 0.25 s window with fewer than `threshold` cores busy
    # (the previous run's sshd processes gone, nothing else running), at most max_s seconds.
    # Prints the busy cores of the last window.
    end = time.monotonic() + max_s
    while True:
        b0 = machine_busy()
        time.sleep(0.25)
        cores = (machine_busy() - b0) / 0.25
        if cores < threshold or time.monotonic() > end:
            print(f"{cores:.2f}")
            return

def check(out, names, tag):
    with open(out, errors="replace") as f:
        text = f.read()
    with open(names) as f:
        want = f.read().split()
    missing = [n for n in want
               if not re.search(r"(^|[^\w-])" + re.escape(n) + r" ok " + re.escape(tag) + r"(\D|$)", text, re.M)]
    if missing:
        print(f"{len(missing)} of {len(want)} node(s) printed no '<node> ok {tag}' line: "
              + " ".join(missing[:20]) + (" ..." if len(missing) > 20 else ""))
        sys.exit(1)

if __name__ == "__main__":
    if sys.argv[1] == "measure":
        assert sys.argv[4] == "--"
        measure(sys.argv[2], sys.argv[3], sys.argv[5:])
    elif sys.argv[1] == "settle":
        settle(float(sys.argv[2]), float(sys.argv[3]))
    elif sys.argv[1] == "check":
        check(*sys.argv[2:5])
PY

# ---------------------------------------------------------------------------
# Lab
# ---------------------------------------------------------------------------
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "${WAN_UP:-}" ]; then
        bash scripts/wan-lab.sh down "$WORK/wan" >/dev/null 2>&1 || log "warning: 'wan-lab.sh down $WORK/wan' failed"
    fi
    if [ -n "${LAB_UP:-}" ]; then
        log "tearing the lab down"
        bash scripts/lab.sh down --name "$LAB_NAME" >/dev/null 2>&1 || log "warning: 'lab.sh down --name $LAB_NAME' failed"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

LAB_UP=1
log "bringing up $MAX_N lab node(s)"
bash scripts/lab.sh up "$MAX_N" --name "$LAB_NAME" --net "$LAB_NET" >"$WORK/lab-up.log" 2>&1 ||
    {
        cat "$WORK/lab-up.log" >&2
        die "lab.sh up failed"
    }
KEY=$LAB/id_ed25519
KH=$LAB/known_hosts
for f in "$LAB/inventory.yaml" "$LAB/nodes.tsv" "$KEY" "$KH"; do
    [ -s "$f" ] || die "lab.sh up did not write $f"
done
LAB_INVENTORY=$LAB/inventory.yaml
if ((10#$RTT_MS > 0)); then
    # WAN-like links: every tool reaches node 198.18.K.X through the delay relay at 127.K.0.X,
    # with the lab's host keys under the relay's addresses (docs/lab.md "WAN-like links").
    WAN_UP=1
    bash scripts/wan-lab.sh up "$WORK/wan" "$RTT_MS" "$LAB" >>"$WORK/lab-up.log" 2>&1 ||
        {
            cat "$WORK/lab-up.log" >&2
            die "wan-lab.sh up failed"
        }
    KH=$WORK/wan/known_hosts
    LAB_INVENTORY=$WORK/wan/inventory.yaml
    bash scripts/wan-lab.sh rewrite "$WORK/wan" <"$LAB/inventory.yaml" >"$LAB_INVENTORY"
fi
NODE_NAMES=() NODE_IPS=()
while IFS=$'\t' read -r name ip role _; do
    [ "$name" = name ] && continue
    [ "$role" = hidden ] && continue
    if ((10#$RTT_MS > 0)); then ip=127.$LAB_NET.0.${ip##*.}; fi
    NODE_NAMES+=("$name") NODE_IPS+=("$ip")
done <"$LAB/nodes.tsv"
[ ${#NODE_NAMES[@]} -ge "$MAX_N" ] || die "the lab has ${#NODE_NAMES[@]} node(s), expected $MAX_N"

# Per-N inputs: host lists and inventories for the first N nodes.
for n in "${SIZE_LIST[@]}"; do
    n=$((10#$n))
    d=$WORK/n$n
    mkdir -p "$d"
    printf '%s\n' "${NODE_NAMES[@]:0:n}" >"$d/names"
    printf '%s\n' "${NODE_IPS[@]:0:n}" >"$d/ips"
    # mgmt-driver: the lab's inventory (its defaults: root, the lab key, strict host keys against
    # the lab's known_hosts) cut to the first n hosts of group nodes.
    awk -v n="$n" '
        /^  [a-z_]+:$/ { ingroup = ($0 == "  nodes:"); print; next }
        ingroup && /^    - / { if (++k <= n) print; next }
        { print }' "$LAB_INVENTORY" >"$d/inventory.yaml"
    [ "$(grep -c '^    - {name: ' "$d/inventory.yaml")" -eq "$n" ] ||
        die "could not cut $LAB_INVENTORY to $n hosts (format changed?)"
    # pyinfra: same key, strict host key checking against the lab's known_hosts.
    {
        printf 'D = {"ssh_user": "root", "ssh_key": "%s", "ssh_known_hosts_file": "%s",\n' "$KEY" "$KH"
        printf '     "ssh_strict_host_key_checking": "yes"}\n'
        printf 'nodes = [\n'
        for ((i = 0; i < n; i++)); do
            printf '    ("%s", dict(D, ssh_hostname="%s")),\n' "${NODE_NAMES[$i]}" "${NODE_IPS[$i]}"
        done
        printf ']\n'
    } >"$d/pyinfra_inventory.py"
    # Ansible: same key; known_hosts and strictness via ssh_args in ansible.cfg.
    {
        printf '[nodes]\n'
        for ((i = 0; i < n; i++)); do
            printf '%s ansible_host=%s\n' "${NODE_NAMES[$i]}" "${NODE_IPS[$i]}"
        done
        printf '[nodes:vars]\nansible_user=root\nansible_ssh_private_key_file=%s\n' "$KEY"
    } >"$d/ansible_inventory.ini"
done

SSH_OPTS=(-F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=yes -o "UserKnownHostsFile=$KH"
    -o GlobalKnownHostsFile=/dev/null -i "$KEY" -o IdentitiesOnly=yes -o ConnectTimeout=10 -o LogLevel=ERROR)

ANSIBLE_CFG=$WORK/ansible.cfg
cat >"$ANSIBLE_CFG" <<EOF
[defaults]
host_key_checking = True
gathering = explicit
retry_files_enabled = False
interpreter_python = auto_silent
deprecation_warnings = False

[ssh_connection]
pipelining = True
# Ansible's own default ssh_args (-C, ControlMaster auto, ControlPersist 60s), plus the neutral
# client config and strict host key checking against the lab's known_hosts. The masters that
# outlive a run are ended and counted by the helper; every run gets its own ControlPath dir.
ssh_args = -F /dev/null -C -o ControlMaster=auto -o ControlPersist=60s -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile=$KH -o GlobalKnownHostsFile=/dev/null -o IdentitiesOnly=yes -o LogLevel=ERROR
EOF

# ---------------------------------------------------------------------------
# The job and the tools
# ---------------------------------------------------------------------------
# make_job FILE N REP: a shell script of exactly JOB_BYTES bytes, different for every (N, REP),
# that prints "<hostname> ok REP".
make_job() {
    local f=$1 n=$2 rep=$3 body pad='' line
    # shellcheck disable=SC2016 # $(hostname) is for the node's shell
    body=$(printf '#!/bin/sh\n# mgmt-driver fan-out benchmark job: N=%s, repetition %s\necho "$(hostname) ok %s"\n' "$n" "$rep" "$rep")
    line='# padding so that the job has the size of a real provisioning script ............'
    while ((${#body} + ${#pad} < JOB_BYTES)); do pad+=$'\n'$line; done
    body+=$pad
    printf '%s\n' "${body:0:JOB_BYTES-1}" >"$f"
    [ "$(stat -c %s "$f")" -eq "$JOB_BYTES" ] || die "job $f is not $JOB_BYTES bytes"
}

TOOLS=(mgmt-driver ssh1 ssh1-x25519 scp-ssh)
if [ -n "$MD_BASE" ]; then
    [ -x "$MD_BASE" ] || die "--baseline: '$MD_BASE' is not an executable"
    TOOLS+=(mgmt-driver-baseline)
fi
[ -z "$PYINFRA" ] || TOOLS+=(pyinfra)
[ -z "$ANSIBLE" ] || TOOLS+=(ansible)
if [ -n "$TOOL_FILTER" ]; then
    kept=()
    for tool in "${TOOLS[@]}"; do
        case ",$TOOL_FILTER," in *,"$tool",*) kept+=("$tool") ;; esac
    done
    [ ${#kept[@]} -gt 0 ] || die "--tools '$TOOL_FILTER' leaves no tool (available: ${TOOLS[*]})"
    TOOLS=("${kept[@]}")
fi

# tool_cmd TOOL N JOB: sets CMD to the command line of TOOL for N nodes and job file JOB.
tool_cmd() {
    local tool=$1 n=$2 job=$3 d=$WORK/n$2
    case $tool in
    mgmt-driver)
        CMD=("$MD" run-script -o plain -i "$d/inventory.yaml" "$job")
        ;;
    mgmt-driver-baseline)
        CMD=("$MD_BASE" run-script -o plain -i "$d/inventory.yaml" "$job")
        ;;
    ssh1 | ssh1-x25519)
        # One connection per node: the script on stdin is written to a file, chmod, run.
        # ssh1-x25519 only differs in the key exchange (OpenSSH 9.x's default is sntrup761).
        local -a kex=()
        [ "$tool" = ssh1 ] || kex=(-o KexAlgorithms=curve25519-sha256)
        # shellcheck disable=SC2016 # expanded by the sh that xargs starts
        CMD=(xargs -a "$d/ips" -P "$n" -I{} sh -c
            'ip=$1; shift; exec ssh "$@" root@"$ip" "cat > /tmp/bench-ssh1.sh && chmod 700 /tmp/bench-ssh1.sh && /tmp/bench-ssh1.sh" < "$0"'
            "$job" {} "${SSH_OPTS[@]}" "${kex[@]}")
        ;;
    scp-ssh)
        # shellcheck disable=SC2016 # expanded by the sh that xargs starts
        CMD=(xargs -a "$d/ips" -P "$n" -I{} sh -c
            'ip=$1; shift; scp -q "$@" "$0" root@"$ip":/tmp/bench-scp.sh && exec ssh "$@" root@"$ip" "chmod 700 /tmp/bench-scp.sh && /tmp/bench-scp.sh"'
            "$job" {} "${SSH_OPTS[@]}")
        ;;
    pyinfra)
        CMD=("$PYINFRA" -y -vvv --parallel "$n" "$d/pyinfra_inventory.py" server.script "src=$job")
        ;;
    ansible)
        CMD=(env LC_ALL=C.UTF-8 "ANSIBLE_CONFIG=$ANSIBLE_CFG" "ANSIBLE_HOME=$WORK/ansible-home"
            "ANSIBLE_SSH_CONTROL_PATH_DIR=$WORK/ansible-cp/$RUN_ID" "ANSIBLE_LOCAL_TEMP=$WORK/ansible-tmp"
            "$ANSIBLE" nodes -i "$d/ansible_inventory.ini" -f "$n" -o -m script -a "$job")
        ;;
    esac
}

# run_one TOOL N TAG JOB: run TOOL once on the first N nodes with job file JOB (which prints
# "<node> ok TAG"), check the result, and set RUN to "wall_s cpu_s rss_kib machine_cpu_s". Dies loudly when
# the tool fails or a node's line is missing.
run_one() {
    local tool=$1 n=$2 tag=$3 job=$4 base res rc
    base=$WORK/runs/$tool-n$n-$tag
    RUN_ID=n$n-$tag
    tool_cmd "$tool" "$n" "$job"
    printf '%q ' "${CMD[@]}" >"$base.cmd"
    res=$(python3 "$WORK/helper.py" measure "$base.out" "$base.err" -- "${CMD[@]}") ||
        die "the measuring helper failed for $tool, N=$n (command in $base.cmd)"
    read -r rc RUN <<<"$res"
    # pyinfra prints the commands' output (-vvv) on stderr; the others on stdout.
    local collected=$base.out
    [ "$tool" != pyinfra ] || collected=$base.err
    if [ "$rc" != 0 ] || ! python3 "$WORK/helper.py" check "$collected" "$WORK/n$n/names" "$tag" >"$base.check"; then
        log "$tool, N=$n, run $tag FAILED: exit code $rc; $(cat "$base.check" 2>/dev/null || true)"
        log "command: $(cat "$base.cmd")"
        log "last lines of its stderr ($base.err):"
        tail -n 15 "$base.err" | sed 's/^/    /' >&2 || true
        log "last lines of its stdout ($base.out):"
        tail -n 5 "$base.out" | sed 's/^/    /' >&2 || true
        die "benchmark stopped: $tool failed"
    fi
}

T0=$SECONDS
log "tools: ${TOOLS[*]}; sizes: ${SIZE_LIST[*]}; $REPS repetition(s) each"
first=1
for n in "${SIZE_LIST[@]}"; do
    n=$((10#$n))
    if [ $first = 1 ]; then
        # One untimed run of every tool first, so that no tool pays for a cold page cache.
        first=0
        make_job "$WORK/jobs/warm-n$n.sh" "$n" 0
        for tool in "${TOOLS[@]}"; do
            run_one "$tool" "$n" 0 "$WORK/jobs/warm-n$n.sh"
        done
        # Round trips, counted from mgmt-driver's own event stream (-o json: one event per
        # command and per upload) in one more untimed run; the timed runs print plain text.
        # Both streams: an older binary (984cc53) printed its events on stdout.
        for tool in "${TOOLS[@]}"; do
            case $tool in mgmt-driver | mgmt-driver-baseline) ;; *) continue ;; esac
            tool_cmd "$tool" "$n" "$WORK/jobs/warm-n$n.sh"
            CMD=("${CMD[0]}" "${CMD[1]}" -o json "${CMD[@]:4}")
            "${CMD[@]}" >"$WORK/runs/$tool-n$n-rt.out" 2>"$WORK/runs/$tool-n$n-rt.err" </dev/null ||
                die "the round-trip count run of $tool failed (stderr: $WORK/runs/$tool-n$n-rt.err)"
            printf '%s\t%s\t%s\n' "$tool" "$n" "$(python3 tests/bench/events.py "$WORK/runs/$tool-n$n-rt.err" "$WORK/runs/$tool-n$n-rt.out")" >>"$WORK/round-trips.tsv"
        done
    fi
    for ((rep = 1; rep <= REPS; rep++)); do
        job=$WORK/jobs/n$n-r$rep/bench-job.sh
        mkdir -p "${job%/*}"
        make_job "$job" "$n" "$rep"
        # The tools take turns; the order rotates so that none always runs first.
        for ((t = 0; t < ${#TOOLS[@]}; t++)); do
            tool=${TOOLS[$(((t + rep) % ${#TOOLS[@]}))]}
            # Let the previous run's sshd processes exit, and wait out other load if any.
            bg=$(python3 "$WORK/helper.py" settle 20 0.1)
            run_one "$tool" "$n" "$rep" "$job"
            read -r wall cpu rss busy <<<"$RUN"
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$tool" "$n" "$rep" "$wall" "$cpu" "$rss" "$busy" "$bg" >>"$RESULTS"
            log "N=$n rep $rep/$REPS $tool: ${wall}s wall, ${cpu}s CPU, $((rss / 1024)) MiB (machine: ${busy} CPU-s; ${bg} cores busy just before)"
        done
    done
done
log "measurements done in $((SECONDS - T0))s"

# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------
peer_version() { # NAME PATH: "NAME VERSION" from the first line of its --version, or "not installed"
    local v='not installed'
    [ -z "$2" ] || v=$(LC_ALL=C.UTF-8 "$2" --version 2>&1) || true
    v=${v%%$'\n'*}
    v=${v#"$1": }
    printf '%s\n' "$1 ${v#"$1" }"
}
export BENCH_DATE BENCH_CPU BENCH_NPROC BENCH_MEM BENCH_KERNEL BENCH_OS BENCH_SSH BENCH_COMMIT \
    BENCH_RUSTC BENCH_PYINFRA BENCH_ANSIBLE BENCH_PYTHON BENCH_CMDLINE BENCH_REPS BENCH_BYTES BENCH_BASELINE \
    BENCH_LAB BENCH_RTT
BENCH_LAB="--name $LAB_NAME --net $LAB_NET"
BENCH_RTT=$((10#$RTT_MS))
BENCH_BASELINE=
[ -z "$MD_BASE" ] || BENCH_BASELINE="$("$MD_BASE" --version 2>/dev/null | head -n 1), $MD_BASE"
BENCH_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
BENCH_CPU=$(sed -n '/^model name/{s/^model name[[:space:]]*: //p;q}' /proc/cpuinfo)
BENCH_NPROC=$(nproc)
BENCH_MEM=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
BENCH_KERNEL=$(uname -r)
BENCH_OS=$(sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null | tr -d '"')
BENCH_SSH=$(ssh -V 2>&1)
BENCH_COMMIT=$COMMIT
BENCH_RUSTC=$(rustc --version 2>/dev/null || echo unknown)
BENCH_PYINFRA=$(peer_version pyinfra "$PYINFRA")
BENCH_ANSIBLE=$(peer_version ansible "$ANSIBLE")
BENCH_CMDLINE="bash scripts/$PROG${ARGS_GIVEN:+ $ARGS_GIVEN}"
BENCH_REPS=$REPS
BENCH_PYTHON=$(python3 -c 'import platform; print(platform.python_version())')
BENCH_BYTES=$JOB_BYTES

cat >"$WORK/report.py" <<'PY'
import csv, os, statistics, sys

E = os.environ
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
out_path = sys.argv[2]
LABEL = {
    "mgmt-driver": "mgmt-driver run-script",
    "mgmt-driver-baseline": "mgmt-driver run-script, baseline binary (" + E.get("BENCH_BASELINE", "") + ")",
    "ssh1": "OpenSSH, 1 connection/node, xargs -P N",
    "ssh1-x25519": "OpenSSH, 1 connection/node, curve25519 kex, xargs -P N",
    "scp-ssh": "OpenSSH scp+ssh (2 connections/node), xargs -P N",
    "pyinfra": "pyinfra server.script, --parallel N",
    "ansible": "Ansible script module, forks=N, pipelining",
}
tools = [t for t in LABEL if any(r["tool"] == t for r in rows)]
sizes = sorted({int(r["n"]) for r in rows})
stats = {}
for t in tools:
    for n in sizes:
        rs = [r for r in rows if r["tool"] == t and int(r["n"]) == n]
        if not rs:
            continue
        wall = [float(r["wall_s"]) for r in rs]
        cpu = [float(r["cpu_s"]) for r in rs]
        rss = [int(r["rss_kib"]) / 1024 for r in rs]
        busy = [float(r["machine_cpu_s"]) for r in rs]
        stats[t, n] = dict(wall=statistics.median(wall), wmin=min(wall), wmax=max(wall),
                           cpu=statistics.median(cpu), cpun=statistics.median(cpu) / n * 1000,
                           rss=statistics.median(rss), rssmax=max(rss), busy=statistics.median(busy))
NPROC = int(E["BENCH_NPROC"])
bg = [float(r["background_cores"]) for r in rows]
noisy = [r for r in rows if float(r["background_cores"]) >= 0.1]

def table():
    L = ["| tool | N | wall s (median) | wall s (min-max) | CPU s | CPU ms/node | peak RSS MiB | machine CPU s |",
         "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for n in sizes:
        for t in tools:
            s = stats.get((t, n))
            if s:
                L.append(f"| {LABEL[t]} | {n} | {s['wall']:.3f} | {s['wmin']:.3f}-{s['wmax']:.3f} | "
                         f"{s['cpu']:.3f} | {s['cpun']:.1f} | {s['rss']:.1f} | {s['busy']:.2f} |")
    return L

def where():
    n = max(sizes)
    L = [f"At N={n} (medians): how busy the {NPROC} cores were while each tool ran, and how much of",
         "that CPU time was the tool itself; the rest is the lab's side (sshd, the remote shells and",
         "commands, the kernel's network work) plus anything else that ran on the machine meanwhile.",
         "",
         "| tool | wall s | machine CPU s | cores busy | tool CPU s | rest CPU s | rest ms/node |",
         "|---|---:|---:|---:|---:|---:|---:|"]
    for t in tools:
        s = stats.get((t, n))
        if s:
            rest = max(s["busy"] - s["cpu"], 0)
            L.append(f"| {LABEL[t]} | {s['wall']:.3f} | {s['busy']:.2f} | "
                     f"{100 * s['busy'] / (s['wall'] * NPROC):.0f} % | {s['cpu']:.3f} | {rest:.2f} | {rest / n * 1000:.1f} |")
    return L

def pivot():
    L = ["| tool | " + " | ".join(f"N={n}" for n in sizes) + " |", "|---|" + "---:|" * len(sizes)]
    for t in tools:
        L.append(f"| {LABEL[t]} | " + " | ".join(
            f"{stats[t, n]['wall']:.3f}" if (t, n) in stats else "-" for n in sizes) + " |")
    return L

def targets():
    md = lambda n: stats.get(("mgmt-driver", n))
    verdict = lambda ok: "**met**" if ok else "**not met**"
    L = ["| target | measured | result |", "|---|---|---|"]
    m100, p100, m1 = md(100), stats.get(("pyinfra", 100)), md(1)
    if m100 and p100:
        L.append(f"| N=100 wall under half of pyinfra's (same run) | mgmt-driver {m100['wall']:.3f} s, "
                 f"pyinfra {p100['wall']:.3f} s, half is {p100['wall'] / 2:.3f} s "
                 f"(ratio {m100['wall'] / p100['wall']:.2f}) | {verdict(m100['wall'] < p100['wall'] / 2)} |")
    else:
        why = "N=100 was not in --sizes" if not m100 else "pyinfra is not installed (see --with-peers)"
        L.append(f"| N=100 wall under half of pyinfra's (same run) | not measured: {why} | not measured |")
    if m1:
        L.append(f"| N=1 wall under 0.1 s | {m1['wall']:.3f} s | {verdict(m1['wall'] < 0.1)} |")
    else:
        L.append("| N=1 wall under 0.1 s | not measured: N=1 was not in --sizes | not measured |")
    if m100:
        L.append(f"| controller CPU at most 3 ms per node (N=100) | {m100['cpun']:.1f} ms/node "
                 f"({m100['cpu']:.3f} s for 100 nodes) | {verdict(m100['cpun'] <= 3)} |")
        L.append(f"| peak RSS at most 25 MiB at N=100 | median {m100['rss']:.1f} MiB, largest of "
                 f"{E['BENCH_REPS']} runs {m100['rssmax']:.1f} MiB | {verdict(m100['rssmax'] <= 25)} |")
    else:
        for t in ("controller CPU at most 3 ms per node (N=100)", "peak RSS at most 25 MiB at N=100"):
            L.append(f"| {t} | not measured: N=100 was not in --sizes | not measured |")
    return L

has_py, has_an = "pyinfra" in tools, "ansible" in tools
doc = [
    "# Fan-out benchmark",
    "",
    f"Written by `scripts/bench-fanout.sh` on {E['BENCH_DATE']}. Command: `{E['BENCH_CMDLINE']}`.",
    "Every figure below comes from that one run; rerun the script to reproduce them.",
    "",
    "## Machine",
    "",
    f"- CPU: {E['BENCH_CPU']}, {E['BENCH_NPROC']} cores; memory {E['BENCH_MEM']}",
    f"- OS: {E['BENCH_OS']}, kernel {E['BENCH_KERNEL']}",
    f"- OpenSSH (client and lab servers): {E['BENCH_SSH']}",
    f"- mgmt-driver: commit {E['BENCH_COMMIT']}, release build, {E['BENCH_RUSTC']}",
    f"- peers: {E['BENCH_PYINFRA']}; {E['BENCH_ANSIBLE']}; python3 {E['BENCH_PYTHON']}",
    "",
    "## Method",
    "",
    f"The lab (`scripts/lab.sh up {max(sizes)} {E['BENCH_LAB']}`) runs one real OpenSSH sshd per node, each in its",
    "own network, mount, UTS and pid namespaces on this machine, with private /tmp and /root. The sizes",
    f"N = {', '.join(map(str, sizes))} use the first N nodes of that one lab.",
    "",
    f"The job on every node: upload a {E['BENCH_BYTES']}-byte shell script, make it executable, run it, collect its",
    "stdout (one line, `<hostname> ok <rep>`). Every repetition gets a new script (its comment line",
    "names N and the repetition), so no tool can skip the upload because the remote copy is current.",
    "Every run is checked: exit code 0 and the line of every node, or the benchmark stops.",
    "All tools authenticate as root with the same ed25519 key and verify host keys strictly against",
    "the lab's known_hosts.",
] + ([
    "",
    f"WAN-like links: every node is behind the delay relay (`scripts/wan-lab.sh up DIR {E['BENCH_RTT']} LABDIR`,",
    f"docs/lab.md), {E['BENCH_RTT']} ms round trip; the tools connect to the relay's address of each node and",
    "check host keys against the lab's keys under those addresses.",
] if E['BENCH_RTT'] != "0" else []) + [
    "",
    "What each row runs:",
    "",
    "- **mgmt-driver run-script**: `mgmt-driver run-script -o plain -i INVENTORY JOB` (default",
    "  `--parallel` 256, default key exchange). One connection per node; upload over SFTP, then run.",
    "- **OpenSSH, 1 connection/node**: `xargs -P N` starts per node `sh -c 'exec ssh ... root@IP",
    "  \"cat > /tmp/f && chmod 700 /tmp/f && /tmp/f\" < JOB'`. Client options: `-F /dev/null` (no",
    "  config), BatchMode, strict host key checking, the lab key; OpenSSH's default algorithms.",
    "- **OpenSSH, 1 connection/node, curve25519 kex**: the same with `-o KexAlgorithms=curve25519-sha256`.",
    "  OpenSSH 9.2 picks sntrup761x25519-sha512 by default, which costs much more CPU on both ends;",
    "  mgmt-driver's default puts curve25519-sha256 first, so this row compares like with like.",
    "- **OpenSSH scp+ssh**: the same as the first OpenSSH row, but `scp` (SFTP protocol) uploads and",
    "  a second `ssh` runs: two connections per node.",
]
if has_py:
    doc += ["- **pyinfra**: `pyinfra -y -vvv --parallel N inventory.py server.script src=JOB`. The inventory",
            "  gives each node the lab key, the lab known_hosts and `ssh_strict_host_key_checking: yes`.",
            "  `server.script` uploads the file to a temporary name, chmods it and runs it; `-vvv` prints",
            "  the output (on stderr, where the check reads it)."]
else:
    doc += ["- **pyinfra**: not installed on this machine, so no row (`--with-peers` installs it into a venv)."]
if has_an:
    doc += ["- **Ansible**: `ansible nodes -i inventory.ini -f N -o -m script -a JOB`, `pipelining = True`,",
            "  `host_key_checking = True`, no fact gathering. ssh_args are Ansible's defaults (`-C`,",
            "  ControlMaster auto, ControlPersist 60s) plus `-F /dev/null` and strict host keys against",
            "  the lab known_hosts. Each run has its own ControlPath directory, and the master connections",
            "  left after a run are ended then (their CPU counts), so no run reuses another's connections."]
else:
    doc += ["- **Ansible**: not installed on this machine, so no row (`--with-peers` installs it into a venv)."]
doc += [
    "",
    f"Each tool runs {E['BENCH_REPS']} times per N (after one untimed warm-up run of every tool at the first N);",
    "the tools take turns within a repetition, in an order that rotates. Figures are medians.",
    "",
    "- **wall s**: from starting the tool until it exits.",
    "- **CPU s**: user + system time of the tool process and all its descendants (from `wait4`), that is",
    "  the controller's cost. The lab's sshd processes are not descendants, so node-side cost is not",
    "  in it. Ansible's ControlPersist masters detach from Ansible; the measuring helper is a child",
    "  subreaper, so they become its children: it ends them when Ansible has exited and adds their",
    "  CPU (and RSS).",
    "- **CPU ms/node**: CPU s / N.",
    "- **machine CPU s**: busy time of all cores (/proc/stat) from the tool's start to its exit: the",
    "  tool plus the lab's side (sshd, remote commands) plus anything else running on the machine.",
    "- **peak RSS MiB**: the largest maximum resident set size of any single process of the tool's",
    "  process tree (GNU time's %M). For the OpenSSH rows that is one ssh or scp process, not the sum",
    "  of the N processes running at once; the same holds for Ansible's forked workers. mgmt-driver",
    "  and pyinfra are one process each.",
    "",
    "Before every timed run the script waits (at most 20 s) for a quarter second with less than",
    "0.1 cores busy, so that the previous run's sshd processes are gone and other load is noticed.",
    f"Busy cores in that last quarter second before the runs: median {statistics.median(bg):.2f}, "
    f"largest {max(bg):.2f}; {len(noisy)} of {len(rows)} runs started with 0.1 cores or more busy"
    + ("; the machine was not quiet then, so these may be slower than they should: "
       + "; ".join(f"{LABEL[r['tool']]}: N={r['n']} rep {r['rep']} "
                   f"({float(r['background_cores']):.2f} cores, {float(r['wall_s']):.3f} s)" for r in noisy)
       + "." if noisy else "."),
    "Load that starts while a run is going on is not detected; it shows as machine CPU s beyond",
    "what the tool and the lab explain.",
    "",
    "Lab nodes and the controller share the same cores, so at larger N the wall times include the",
    "nodes' sshd work competing with the controller; CPU per node is the figure that carries over to",
    "a real fleet.",
    "",
    "## Results",
    "",
] + table() + [
    "",
    "Median wall seconds at a glance:",
    "",
] + pivot() + [
    "",
    "## Where the time goes",
    "",
] + where() + [
    "",
    "## Targets",
    "",
    "Checked against the mgmt-driver rows above (medians; for RSS the largest of the runs).",
    "",
] + targets() + [""]

text = "\n".join(doc)
with open(out_path, "w") as f:
    f.write(text)
print("\n".join(table() + [""] + targets()))
PY

mkdir -p "$(dirname -- "$OUT")"
python3 "$WORK/report.py" "$RESULTS" "$OUT"
log "report written to $OUT (raw numbers: $RESULTS, per-run logs: $WORK/runs/)"
exit 0
}
