#!/usr/bin/env bash
# lab.sh - a local lab of real OpenSSH servers for mgmt-driver tests and hands-on use.
#
# Every node is one sshd running as pid 1 of its own pid + mount + UTS + IPC
# namespace, inside its own network namespace. Its root filesystem is an
# overlayfs whose lower layer is the host's "/" and whose upper layer lives on a
# per-lab tmpfs, so anything a node writes (/etc, /usr/local, apt state, ...)
# stays inside the lab. See docs/lab.md for the full description.
#
# Run `lab.sh --help` for the interface. Must run as root.
set -euo pipefail
umask 022
export LC_ALL=C

PROG=${0##*/}
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
REPO_DIR=$(dirname -- "$SCRIPT_DIR")
readonly PROG SCRIPT_DIR REPO_DIR

readonly LAB_USER=mduser
readonly MAX_NODES=240 MAX_HIDDEN=20 MAX_NET=127
readonly READY_TIMEOUT_S=30

usage() {
    cat <<EOF
usage:
  $PROG up N [--name NAME] [--net K] [--hidden M] [--no-sftp LIST] [--kit [--control-plane BINDIR]] [--dir DIR]
  $PROG down [--name NAME] [--dir DIR]
  $PROG stop NODE [--name NAME] [--dir DIR]
  $PROG start NODE [--name NAME] [--dir DIR]
  $PROG rebuild NODE [--name NAME] [--dir DIR]
  $PROG exec NODE [--name NAME] [--dir DIR] -- CMD...
  $PROG status [--name NAME] [--dir DIR]

  up      tear down any previous lab NAME, create N nodes (+M hidden ones behind
          node 1), check every node over ssh, write DIR/inventory.yaml & co.
  down    remove everything of lab NAME (processes, mounts, namespaces, links);
          keeps the client keys, password and passphrase in DIR.
  stop    kill a node's sshd and every process of its pid namespace (power-off).
  start   boot a stopped node again; returns once its sshd accepts connections.
  rebuild replace a node like a VNFM heal does: power it off, wipe its disk (the
          overlay's upper layer, /root, /home) so it boots like a fresh VM, give it
          a NEW ssh host key, boot it; DIR/known_hosts gets the new key (the lab's
          own file; any other known_hosts still has the old one).
  exec    run CMD inside a node's namespaces (not over ssh); exit code of CMD.
  status  list the nodes and whether they run (exit 0 all running, 3 some
          stopped, 1 no lab).

  N       primary nodes, 1..$MAX_NODES: NAME-1..NAME-N at 198.18.K.11.. (node i: 10+i)
  NODE    i (primary node i), hJ (hidden node J) or a node name (lab-3, lab-h1)
  --name  lab name, [a-z0-9]{1,5} (default: lab)
  --net   K, 0..$MAX_NET (default: 0): networks 198.18.K.0/24 and 198.19.K.0/24
  --hidden M, 0..$MAX_HIDDEN (default: 0): nodes NAME-h1..NAME-hM on 198.19.K.0/24,
          reachable only through node 1 (the bastion)
  --no-sftp LIST  comma-separated primary node numbers whose sshd has no sftp
  --kit   add the lab kit (tests/labkit, docs/labkit.md): stand-ins for apt-get,
          systemctl, kubeadm, kubectl, ... that share one simulated cluster in
          DIR/kit (mounted at /var/lib/labkit in every node); not the real tools
  --control-plane BINDIR  with --kit: the REAL-API mode (docs/labkit.md). BINDIR is
          what scripts/build-control-plane.sh prints; it is bind-mounted read-only at
          /opt/control-plane in every node. The kit's kubeadm then runs the real etcd,
          kube-apiserver, kube-controller-manager and kube-scheduler on the masters, and
          kubectl, etcdctl and every helm verb are the real binaries
  --dir   lab directory (default: <repo>/target/lab/NAME)
EOF
}

# shellcheck source=scripts/common.sh
. "$SCRIPT_DIR/common.sh"

# Microseconds since the epoch (bash builtin, no fork).
now_us() { local t=${EPOCHREALTIME/./}; printf '%s' "$t"; }
# Seconds since $1 (microseconds), formatted as 1.234.
since() {
    local d=$(($(now_us) - $1))
    printf '%d.%03d' $((d / 1000000)) $((d / 1000 % 1000))
}

# ---------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------
CMD='' NAME=lab NET=0 HIDDEN=0 NOSFTP='' DIR='' NODE_ARG='' COUNT='' KIT=0 CP_BINDIR=''
CMD_ARGV=()

# is_int_in VALUE MIN MAX: VALUE is a decimal integer (at most 3 digits) in MIN..MAX.
is_int_in() {
    [[ $1 =~ ^[0-9]{1,3}$ ]] || return 1
    ((10#$1 >= $2 && 10#$1 <= $3))
}

parse_args() {
    [ $# -gt 0 ] || usage_error "missing command"
    CMD=$1
    shift
    case $CMD in
    up | down | stop | start | rebuild | exec | status) ;;
    -h | --help | help)
        usage
        exit 0
        ;;
    *) usage_error "unknown command '$CMD'" ;;
    esac

    local -a pos=()
    local seen_dashdash=0 opt val
    local -A given=()
    while [ $# -gt 0 ]; do
        case $1 in
        --)
            seen_dashdash=1
            shift
            CMD_ARGV=("$@")
            break
            ;;
        -h | --help)
            usage
            exit 0
            ;;
        --kit)
            given["--kit"]=1 KIT=1
            shift
            ;;
        --name | --net | --hidden | --no-sftp | --dir | --control-plane | --name=* | --net=* | --hidden=* | \
            --no-sftp=* | --dir=* | --control-plane=*)
            if [[ $1 == *=* ]]; then
                opt=${1%%=*} val=${1#*=}
                shift
            else
                [ $# -ge 2 ] || usage_error "option $1 needs a value"
                opt=$1 val=$2
                shift 2
            fi
            given[$opt]=1
            case $opt in
            --name) NAME=$val ;;
            --net) NET=$val ;;
            --hidden) HIDDEN=$val ;;
            --no-sftp) NOSFTP=$val ;;
            --dir) DIR=$val ;;
            --control-plane) CP_BINDIR=$val ;;
            esac
            ;;
        -*) usage_error "unknown option '$1'" ;;
        *)
            pos+=("$1")
            shift
            ;;
        esac
    done

    # Options that only `up` takes.
    if [ "$CMD" != up ]; then
        for opt in --net --hidden --no-sftp --kit --control-plane; do
            [ -z "${given[$opt]:-}" ] || usage_error "option $opt is only valid with 'up'"
        done
    fi
    if [ "$CMD" = exec ]; then
        if [ "$seen_dashdash" != 1 ] || [ ${#CMD_ARGV[@]} -eq 0 ]; then
            usage_error "exec needs '-- CMD...'"
        fi
    elif [ "$seen_dashdash" = 1 ]; then
        usage_error "'--' is only valid with 'exec'"
    fi

    case $CMD in
    up)
        [ ${#pos[@]} -eq 1 ] || usage_error "up needs exactly one node count N"
        COUNT=${pos[0]}
        is_int_in "$COUNT" 1 "$MAX_NODES" ||
            usage_error "N must be an integer in 1..$MAX_NODES (got '$COUNT')"
        COUNT=$((10#$COUNT))
        ;;
    stop | start | rebuild | exec)
        [ ${#pos[@]} -eq 1 ] || usage_error "$CMD needs exactly one NODE"
        NODE_ARG=${pos[0]}
        ;;
    down | status)
        [ ${#pos[@]} -eq 0 ] || usage_error "unexpected argument '${pos[0]}'"
        ;;
    esac

    [[ $NAME =~ ^[a-z0-9]{1,5}$ ]] || usage_error "NAME must match [a-z0-9]{1,5} (got '$NAME')"
    is_int_in "$NET" 0 "$MAX_NET" ||
        usage_error "K must be an integer in 0..$MAX_NET (got '$NET')"
    NET=$((10#$NET))
    is_int_in "$HIDDEN" 0 "$MAX_HIDDEN" ||
        usage_error "M must be an integer in 0..$MAX_HIDDEN (got '$HIDDEN')"
    HIDDEN=$((10#$HIDDEN))
    if [ -n "$NOSFTP" ]; then
        [[ $NOSFTP =~ ^[0-9]{1,3}(,[0-9]{1,3})*$ ]] ||
            usage_error "--no-sftp takes comma-separated node numbers (got '$NOSFTP')"
        local n
        for n in ${NOSFTP//,/ }; do
            ((10#$n >= 1 && 10#$n <= COUNT)) ||
                usage_error "--no-sftp: node $n is not one of the primary nodes 1..$COUNT"
        done
    fi

    if [ -n "$CP_BINDIR" ]; then
        [ "$KIT" = 1 ] || usage_error "--control-plane needs --kit"
        CP_BINDIR=$(realpath -e -- "$CP_BINDIR" 2>/dev/null) ||
            usage_error "--control-plane: no such directory"
        [[ $CP_BINDIR =~ ^/[A-Za-z0-9._/+-]+$ ]] ||
            usage_error "--control-plane: BINDIR may only contain letters, digits and . _ / + - (got '$CP_BINDIR')"
        local b
        for b in $CP_BINARIES; do
            [ -x "$CP_BINDIR/$b" ] || usage_error "--control-plane: $CP_BINDIR/$b is missing (run scripts/build-control-plane.sh)"
        done
    fi

    [ -n "$DIR" ] || DIR=$REPO_DIR/target/lab/$NAME
    [[ $DIR == /* ]] || DIR=$PWD/$DIR
    DIR=$(realpath -m -- "$DIR")
    # The path ends up in overlayfs options, ssh ProxyCommands and YAML: keep it plain.
    [[ $DIR =~ ^/[A-Za-z0-9._/+-]+$ ]] ||
        usage_error "DIR may only contain letters, digits and . _ / + - (got '$DIR')"
    [ "$DIR" != / ] || usage_error "DIR must not be /"
}

require_root() {
    [ "$(id -u)" -eq 0 ] || die "must run as root (it creates namespaces, mounts and network links); try: sudo $0 $CMD ..."
}

# Install what the lab needs when it is missing (fresh Debian/Ubuntu machine).
ensure_packages() {
    local -a missing=()
    local c
    [ -x /usr/sbin/sshd ] || missing+=(sshd)
    for c in ssh ssh-keygen sudo ip ps unshare nsenter setsid flock mountpoint pivot_root mount umount; do
        command -v "$c" >/dev/null 2>&1 || missing+=("$c")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    command -v apt-get >/dev/null 2>&1 ||
        die "missing ${missing[*]} and no apt-get to install them; install openssh-server sudo iproute2 procps util-linux"
    log "installing missing tools (${missing[*]}) with apt-get"
    local -a pkgs=(openssh-server sudo iproute2 procps util-linux)
    command -v mount >/dev/null 2>&1 || pkgs+=(mount)
    command -v ssh >/dev/null 2>&1 || pkgs+=(openssh-client)
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 ||
        die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2 ||
        die "apt-get install ${pkgs[*]} failed"
    for c in sshd ssh ssh-keygen sudo ip unshare nsenter; do
        if [ "$c" = sshd ]; then c=/usr/sbin/sshd; fi
        command -v "$c" >/dev/null 2>&1 || die "$c still missing after apt-get install"
    done
}

# ---------------------------------------------------------------------------
# Naming and lab description
# ---------------------------------------------------------------------------
# The --name/--dir arguments that address this lab (for messages).
lab_args() {
    if [ "$DIR" = "$REPO_DIR/target/lab/$NAME" ]; then
        printf -- '--name %s' "$NAME"
    else
        printf -- '--name %s --dir %s' "$NAME" "$DIR"
    fi
}

set_paths() {
    NODES_DIR=$DIR/nodes  # tmpfs while the lab is up
    FS_DIR=$NODES_DIR/.fs # per-node upper/work dirs, /root and /home
    LAYER_DIR=$NODES_DIR/.layer
    TMPL_DIR=$NODES_DIR/.tmpl
    SKEL_DIR=$NODES_DIR/.skel
    BR_MAIN=mdb$NAME
    BR_HIDDEN=mdh$NAME
    NS_PREFIX=mdl-$NAME-
    SSH_CFG=$DIR/ssh_config
    KIT_DIR=$DIR/kit # lab kit: shared cluster state, /var/lib/labkit in the nodes
    KIT_SRC=$REPO_DIR/tests/labkit
}

# Node tables (index 0..T-1): primary nodes first, then hidden nodes.
N_NAME=() N_IP=() N_IP2=() N_ROLE=() N_NS=() N_VETH=() N_SFTP=()

build_node_table() {
    local i j role
    local -A nosftp=()
    for i in ${NOSFTP//,/ }; do nosftp[$((10#$i))]=1; done
    for ((i = 1; i <= COUNT; i++)); do
        role=node
        if ((HIDDEN > 0 && i == 1)); then role=bastion; fi
        N_NAME+=("$NAME-$i")
        N_IP+=("198.18.$NET.$((10 + i))")
        if [ "$role" = bastion ]; then N_IP2+=("198.19.$NET.1"); else N_IP2+=(""); fi
        N_ROLE+=("$role")
        N_NS+=("$NS_PREFIX$i")
        N_VETH+=("mdv$NAME$i")
        if [ -n "${nosftp[$i]:-}" ]; then N_SFTP+=(0); else N_SFTP+=(1); fi
    done
    for ((j = 1; j <= HIDDEN; j++)); do
        N_NAME+=("$NAME-h$j")
        N_IP+=("198.19.$NET.$((10 + j))")
        N_IP2+=("")
        N_ROLE+=(hidden)
        N_NS+=("${NS_PREFIX}h$j")
        N_VETH+=("mdv${NAME}h$j")
        N_SFTP+=(1)
    done
}

# Load the node table of a running lab from DIR/nodes.tsv and DIR/lab.env.
load_lab() {
    if [ ! -f "$DIR/nodes.tsv" ] || [ ! -f "$DIR/lab.env" ]; then
        die "lab '$NAME' is not up (no $DIR/nodes.tsv); run: $PROG up N $(lab_args)"
    fi
    local name ip role ns first=1
    while IFS=$'\t' read -r name ip role ns; do
        if [ $first = 1 ]; then
            first=0
            continue
        fi
        N_NAME+=("$name") N_IP+=("$ip") N_ROLE+=("$role") N_NS+=("$ns")
    done <"$DIR/nodes.tsv"
    NET=$(sed -n 's/^LAB_NET=//p' "$DIR/lab.env")
}

# Resolve NODE_ARG (3, h2, lab-3, lab-h2) to an index into the node table.
resolve_node() {
    local want=$NODE_ARG k
    if [[ $want =~ ^[0-9]+$ ]]; then
        want=$NAME-$((10#$want))
    elif [[ $want =~ ^h[0-9]+$ ]]; then
        want=$NAME-h$((10#${want#h}))
    fi
    for k in "${!N_NAME[@]}"; do
        if [ "${N_NAME[$k]}" = "$want" ]; then
            NODE_IDX=$k
            return 0
        fi
    done
    die "no node '$NODE_ARG' in lab '$NAME' (nodes: ${N_NAME[*]})"
}

# ---------------------------------------------------------------------------
# Processes of a lab
# ---------------------------------------------------------------------------
# Print the pids of all processes whose network namespace is one of the given
# named netns (one scan of /proc for all of them).
pids_in_netns() {
    [ $# -gt 0 ] || return 0
    local -A want=()
    local -a files=()
    local ns ino line
    for ns in "$@"; do
        if [ -e "/run/netns/$ns" ]; then files+=("/run/netns/$ns"); fi
    done
    [ ${#files[@]} -gt 0 ] || return 0
    while read -r ino; do want[$ino]=1; done < <(stat -L -c %i "${files[@]}" 2>/dev/null || true)
    [ ${#want[@]} -gt 0 ] || return 0
    while read -r line; do
        if [[ $line =~ ^net:\[([0-9]+)\]\ /proc/([0-9]+)/ns/net$ ]] && [ -n "${want[${BASH_REMATCH[1]}]:-}" ]; then
            printf '%s\n' "${BASH_REMATCH[2]}"
        fi
    done < <(find /proc/[0-9]*/ns/net -maxdepth 0 -printf '%l %p\n' 2>/dev/null || true)
}

# True if pid exists and is not a zombie.
alive() {
    local st
    [ -r "/proc/$1/stat" ] || return 1
    { IFS= read -r st <"/proc/$1/stat"; } 2>/dev/null || return 1
    st=${st##*) }
    [ "${st:0:1}" != Z ] && [ "${st:0:1}" != X ]
}

# True if pid is the pid-1 helper / sshd of a lab node (guards against pid reuse).
is_node_init() {
    local -a args=()
    [ -r "/proc/$1/cmdline" ] || return 1
    { mapfile -t -d '' args <"/proc/$1/cmdline"; } 2>/dev/null || return 1
    [[ " ${args[*]} " == *" mdlab-init "* || " ${args[*]} " == *" /run/mdlab/sshd_config "* ]]
}

# Set INIT_PID to the running pid-1 of node $1 (from its state dir), or to "".
node_init_pid() {
    local f=$NODES_DIR/$1/init.pid pid
    INIT_PID=''
    [ -s "$f" ] || return 0
    { IFS= read -r pid <"$f"; } 2>/dev/null || return 0
    if [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" && is_node_init "$pid"; then
        INIT_PID=$pid
    fi
}

# SIGKILL every process of the given nodes: their pid-1 (which takes the whole
# pid namespace with it) and anything else living in their netns. Waits until
# they are gone.
kill_nodes() { # args: node names (state dirs); uses the global KILL_NS array
    local -a inits=() rest=()
    local n p tries left
    for n in "$@"; do
        node_init_pid "$n"
        [ -z "$INIT_PID" ] || inits+=("$INIT_PID")
    done
    # 1. pid 1 of each node: the kernel kills the rest of its pid namespace and
    #    the waiting unshare parent reaps it.
    if [ ${#inits[@]} -gt 0 ]; then
        kill -KILL "${inits[@]}" 2>/dev/null || true
        for ((tries = 0; tries < 200; tries++)); do
            left=0
            for p in "${inits[@]}"; do
                if alive "$p"; then left=1; fi
            done
            [ $left = 1 ] || break
            sleep 0.01
        done
    fi
    # 2. anything else still in the nodes' network namespaces.
    for ((tries = 0; tries < 200; tries++)); do
        rest=()
        while read -r p; do
            if alive "$p"; then rest+=("$p"); fi
        done < <(pids_in_netns "${KILL_NS[@]}")
        [ ${#rest[@]} -gt 0 ] || return 0
        kill -KILL "${rest[@]}" 2>/dev/null || true
        sleep 0.01
    done
    log "warning: some processes of lab '$NAME' did not die: ${rest[*]}"
}

# ---------------------------------------------------------------------------
# down
# ---------------------------------------------------------------------------
# Set LINKS to the host-side veths of this lab: enslaved to one of its bridges,
# or (half-created) unenslaved links carrying its veth names.
lab_links() {
    local name rest master
    LINKS=()
    while read -r _ name rest; do
        name=${name%:}
        name=${name%%@*}
        master=''
        if [[ $rest =~ \ master\ ([^ ]+) ]]; then master=${BASH_REMATCH[1]}; fi
        if [ "$master" = "$BR_MAIN" ] || [ "$master" = "$BR_HIDDEN" ]; then
            LINKS+=("$name")
        elif [ -z "$master" ] && [[ $name =~ ^mdv${NAME}(h?[0-9]+|b)$ ]]; then
            LINKS+=("$name")
        fi
    done < <(ip -o link show 2>/dev/null || true)
}

teardown() {
    local -a nslist=() batch=()
    local ns name k=''
    mapfile -t nslist < <(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${NS_PREFIX}h?[0-9]+\$" || true)

    # 1. processes
    local -a names=()
    if [ -d "$NODES_DIR" ]; then
        for ns in "$NODES_DIR"/*/; do
            if [ -d "$ns" ]; then ns=${ns%/}; names+=("${ns##*/}"); fi
        done
    fi
    KILL_NS=("${nslist[@]}")
    kill_nodes "${names[@]}"

    # 2. network. Deleting a namespace destroys the veth pair in it in the
    #    kernel's batched, asynchronous netns cleanup (~0.1 s for 50 nodes,
    #    where deleting the veths one by one takes >1 s), so do that first,
    #    wait for the host-side ends to vanish, then remove what is left.
    if [ -f "$DIR/lab.env" ]; then
        k=$(sed -n 's/^LAB_NET=//p' "$DIR/lab.env")
    fi
    if [ -z "$k" ]; then
        k=$(ip -4 -o addr show dev "$BR_MAIN" 2>/dev/null | sed -n 's/.* inet 198\.18\.\([0-9]*\)\.1\/.*/\1/p' | head -n1 || true)
    fi
    if [ ${#nslist[@]} -gt 0 ]; then
        printf 'netns del %s\n' "${nslist[@]}" | ip -force -batch - >/dev/null 2>&1 || true
    fi
    local tries
    for ((tries = 0; tries < 150; tries++)); do
        lab_links
        [ ${#LINKS[@]} -gt 0 ] || break
        sleep 0.02
    done
    lab_links
    for name in "${LINKS[@]}"; do batch+=("link del dev $name"); done
    for name in "$BR_MAIN" "$BR_HIDDEN"; do
        if ip link show dev "$name" >/dev/null 2>&1; then batch+=("link del dev $name"); fi
    done
    if [[ $k =~ ^[0-9]+$ ]] && ip route show type unreachable 2>/dev/null | grep -q "^unreachable 198\.19\.$k\.0/24"; then
        batch+=("route del unreachable 198.19.$k.0/24")
    fi
    if [ ${#batch[@]} -gt 0 ]; then
        printf '%s\n' "${batch[@]}" | ip -force -batch - >/dev/null 2>&1 || true
    fi
    # `ip netns add` turned /run/netns into a mount point; drop it once nobody uses it.
    if mountpoint -q /run/netns 2>/dev/null && [ -z "$(ls -A /run/netns 2>/dev/null)" ]; then
        umount /run/netns 2>/dev/null || true
    fi

    # 3. files: the lab tmpfs (also one left under another --dir) and everything
    #    generated; the client keys, password and passphrase stay.
    local -a tmpfs_dirs=("$NODES_DIR")
    local mp
    while read -r mp; do
        if [ "$mp" != "$NODES_DIR" ]; then tmpfs_dirs+=("$mp"); fi
    done < <(awk -v src="mdlab-$NAME" '{ for (i = 7; i < NF; i++) if ($i == "-") { if ($(i + 1) == "tmpfs" && $(i + 2) == src) print $5; break } }' /proc/self/mountinfo)
    for mp in "${tmpfs_dirs[@]}"; do
        for ((tries = 0; tries < 10; tries++)); do
            mountpoint -q "$mp" 2>/dev/null || break
            umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || true
        done
        if mountpoint -q "$mp" 2>/dev/null; then
            log "warning: could not unmount $mp"
        elif [ "$mp" = "$NODES_DIR" ]; then
            rm -rf --one-file-system "$NODES_DIR"
        else
            rmdir "$mp" 2>/dev/null || true
        fi
    done
    rm -f "$DIR/known_hosts" "$DIR/nodes.tsv" "$DIR/inventory.yaml" "$DIR/lab.env" "$SSH_CFG"
    rm -rf --one-file-system "$KIT_DIR"

    # 4. anything left? (report only)
    local -a left=()
    mapfile -t left < <(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${NS_PREFIX}h?[0-9]+\$" || true)
    [ ${#left[@]} -eq 0 ] || log "warning: namespaces still present: ${left[*]}"
    return 0
}

lock_dir() {
    exec 9>"$DIR/.lock"
    flock -w 120 9 || die "another $PROG run holds $DIR/.lock"
}

cmd_down() {
    require_root
    set_paths
    local t0
    t0=$(now_us)
    if [ -d "$DIR" ]; then lock_dir; fi
    teardown
    log "lab '$NAME' is down ($(since "$t0")s)"
}

# ---------------------------------------------------------------------------
# up: secrets and shared files
# ---------------------------------------------------------------------------
rand_token() { # $1 = length (<= 40)
    local s
    s=$(head -c 60 /dev/urandom | base64 -w0)
    s=${s//[^A-Za-z0-9]/}
    printf '%s' "${s:0:$1}"
}

# Client keys, password and key passphrase: generated once, kept across runs.
ensure_client_keys() {
    (
        umask 077
        [ -s "$DIR/password" ] || rand_token 20 >"$DIR/password"
        [ -s "$DIR/key_passphrase" ] || {
            rand_token 24 >"$DIR/key_passphrase"
            rm -f "$DIR/id_ed25519_pass" "$DIR/id_ed25519_pass.pub"
        }
    )
    local pass
    pass=$(<"$DIR/key_passphrase")
    local -a pids=()
    local key type bits phrase
    for key in id_ed25519 id_ecdsa id_rsa id_ed25519_pass; do
        case $key in
        id_ed25519) type=ed25519 bits='' phrase='' ;;
        id_ecdsa) type=ecdsa bits=256 phrase='' ;;
        id_rsa) type=rsa bits=3072 phrase='' ;;
        id_ed25519_pass) type=ed25519 bits='' phrase=$pass ;;
        esac
        # (a new passphrase already removed the old protected key above; checking
        # the passphrase here would cost ~0.1 s of bcrypt on every `up`)
        if [ -s "$DIR/$key" ] && [ -s "$DIR/$key.pub" ]; then
            continue
        fi
        rm -f "$DIR/$key" "$DIR/$key.pub"
        log "generating client key $DIR/$key"
        ssh-keygen -q -t "$type" ${bits:+-b "$bits"} -N "$phrase" -C "mgmt-driver-lab-$key" -f "$DIR/$key" </dev/null &
        pids+=($!)
    done
    local p
    for p in "${pids[@]}"; do wait "$p" || die "ssh-keygen failed"; done
    chmod 600 "$DIR"/id_ed25519 "$DIR"/id_ed25519.pub "$DIR"/id_ecdsa "$DIR"/id_ecdsa.pub \
        "$DIR"/id_rsa "$DIR"/id_rsa.pub "$DIR"/id_ed25519_pass "$DIR"/id_ed25519_pass.pub \
        "$DIR"/password "$DIR"/key_passphrase
}

# Refuse to clash with another lab (or anything else) using the same networks.
check_net_free() {
    local used
    used=$(ip -4 -o addr show to "198.18.$NET.0/24" 2>/dev/null | awk '{print $2}' | head -n1)
    [ -z "$used" ] || die "198.18.$NET.0/24 is already used on the host by interface '$used' (another lab? pick another --net)"
    if ((HIDDEN > 0)); then
        used=$(ip route show "198.19.$NET.0/24" 2>/dev/null | head -n1)
        [ -z "$used" ] || die "the host already has a route for 198.19.$NET.0/24 ('$used'); pick another --net"
    fi
    local k
    for k in "${!N_VETH[@]}"; do
        if ip link show dev "${N_VETH[$k]}" >/dev/null 2>&1; then
            die "interface ${N_VETH[$k]} already exists (a lab whose name is a prefix of '$NAME'?)"
        fi
    done
}

sh_quote() { printf '%q' "$1"; }

write_lab_env() {
    {
        printf '# written by scripts/lab.sh up\n'
        printf 'LAB_NAME=%s\n' "$NAME"
        printf 'LAB_DIR=%s\n' "$(sh_quote "$DIR")"
        printf 'LAB_NET=%s\n' "$NET"
        printf 'LAB_NODES=%s\n' "$COUNT"
        printf 'LAB_HIDDEN=%s\n' "$HIDDEN"
        printf 'LAB_HOST_IP=198.18.%s.1\n' "$NET"
        printf 'LAB_USER=%s\n' "$LAB_USER"
        printf 'LAB_NO_SFTP=%s\n' "$NOSFTP"
        printf 'LAB_SSH_CONFIG=%s\n' "$(sh_quote "$SSH_CFG")"
        printf 'LAB_KIT=%s\n' "$KIT"
        if [ "$KIT" = 1 ]; then printf 'LAB_KIT_DIR=%s\n' "$(sh_quote "$KIT_DIR")"; fi
        if [ -n "$CP_BINDIR" ]; then printf 'LAB_CONTROL_PLANE=%s\n' "$(sh_quote "$CP_BINDIR")"; fi
    } >"$DIR/lab.env"
}

# The lab's own tmpfs holds every node's writable state; nothing of it lives on
# (or leaks into) the host's filesystems.
mount_lab_fs() {
    mkdir -p "$NODES_DIR"
    mount -t tmpfs -o mode=0700 "mdlab-$NAME" "$NODES_DIR"
    mount --make-private "$NODES_DIR"
    mkdir -p "$FS_DIR"
}

# Shared read-only layer stacked between the host's / and each node's upper:
# the host's account files plus the lab user, and the lab user's sudoers entry.
# Copy /etc/NAME into the lab layer without any old lab-user line, then append LINE.
account_file() { # $1 = file name under /etc, $2 = the lab user's line
    local line out=
    while IFS= read -r line; do
        [[ $line == "$LAB_USER":* ]] || out+=$line$'\n'
    done <"/etc/$1"
    printf '%s%s\n' "$out" "$2" >"$L/etc/$1"
}

build_layer() {
    local L=$LAYER_DIR f
    mkdir -p "$L/etc/sudoers.d"
    chmod --reference=/etc "$L/etc"
    chown --reference=/etc "$L/etc"
    if [ -d /etc/sudoers.d ]; then
        chmod --reference=/etc/sudoers.d "$L/etc/sudoers.d"
        chown --reference=/etc/sudoers.d "$L/etc/sudoers.d"
    else
        chmod 755 "$L/etc/sudoers.d"
    fi
    for f in passwd group shadow gshadow; do
        [ -f "/etc/$f" ] || die "/etc/$f is missing on the host"
    done
    cp -p /etc/passwd /etc/group /etc/shadow /etc/gshadow "$L/etc/"

    # uid/gid: 2000 unless taken on the host.
    local -A used=()
    local user id rest
    while IFS=: read -r user _ id rest; do
        [ "$user" = "$LAB_USER" ] || used[$id]=1
    done </etc/passwd
    while IFS=: read -r user _ id rest; do
        [ "$user" = "$LAB_USER" ] || used[$id]=1
    done </etc/group
    LAB_UID=2000
    while [ -n "${used[$LAB_UID]:-}" ]; do LAB_UID=$((LAB_UID + 1)); done

    local pw salt hash today
    pw=$(<"$DIR/password")
    salt=$(rand_token 16)
    hash=$(PW=$pw SALT=$salt perl -e 'print crypt($ENV{PW}, "\$6\$$ENV{SALT}\$")')
    if [[ $hash != "\$6\$"* ]]; then
        hash=$(printf '%s' "$pw" | openssl passwd -6 -stdin 2>/dev/null) || true
    fi
    [[ $hash == "\$"* ]] || die "could not hash the lab password (need perl or openssl)"
    printf -v today '%(%s)T' -1
    today=$((today / 86400))

    local line out
    # passwd, group, gshadow: the host's entries plus the lab user
    account_file passwd "$LAB_USER:x:$LAB_UID:$LAB_UID:mgmt-driver lab user:/home/$LAB_USER:/bin/bash"
    account_file group "$LAB_USER:x:$LAB_UID:"
    account_file gshadow "$LAB_USER:!::"
    # shadow: no host password hash goes into the lab; root may only use keys
    # ('*' = no password, not locked, so key logins work with UsePAM no).
    out=
    while IFS= read -r line; do
        [[ $line == "$LAB_USER":* ]] && continue
        if [[ $line == root:* ]]; then
            line="root:*:$today:0:99999:7:::"
        elif [[ $line =~ ^([^:]*):\$[^:]*(:.*)?$ ]]; then
            line="${BASH_REMATCH[1]}:*${BASH_REMATCH[2]}"
        fi
        out+=$line$'\n'
    done <"/etc/shadow"
    out+="$LAB_USER:$hash:$today:0:99999:7:::"$'\n'
    printf '%s' "$out" >"$L/etc/shadow"

    printf '# written by scripts/lab.sh: the lab user may sudo with its password\n%s ALL=(ALL:ALL) ALL\n' \
        "$LAB_USER" >"$L/etc/sudoers.d/mdlab-$LAB_USER"
    chmod 0440 "$L/etc/sudoers.d/mdlab-$LAB_USER"
}

# Template for each node's /dev and /run (copied in by the node at boot).
build_tmpl() {
    local T=$TMPL_DIR
    mkdir -p "$T/dev" "$T/run/sshd" "$T/run/lock"
    chmod 755 "$T/dev" "$T/run" "$T/run/sshd"
    chmod 1777 "$T/run/lock"
    mknod -m 666 "$T/dev/null" c 1 3
    mknod -m 666 "$T/dev/zero" c 1 5
    mknod -m 666 "$T/dev/full" c 1 7
    mknod -m 666 "$T/dev/random" c 1 8
    mknod -m 666 "$T/dev/urandom" c 1 9
    mknod -m 666 "$T/dev/tty" c 5 0
    mknod -m 666 "$T/dev/ptmx" c 5 2
    ln -s /proc/self/fd "$T/dev/fd"
    ln -s /proc/self/fd/0 "$T/dev/stdin"
    ln -s /proc/self/fd/1 "$T/dev/stdout"
    ln -s /proc/self/fd/2 "$T/dev/stderr"
}

# Lab kit (--kit): the stand-ins go into the shared layer, so every node sees
# them at /opt/labkit and, through /usr/local/sbin (first in sshd's and sudo's
# root PATH), in place of apt-get, systemctl, ... (helm there is a wrapper: it
# runs the real /usr/local/bin/helm and simulates the cluster verbs). The host's
# swapoff and modprobe act on the whole machine, so they are masked in /usr/sbin
# (and /sbin when it is not a symlink) as well, and so is mount.nfs: mount(8) looks
# for its helpers there, not on PATH. DIR/kit, created empty here, holds the
# shared cluster state and is bind-mounted at /var/lib/labkit in every node.
readonly KIT_SHADOWED="apt-get apt-mark systemctl hostnamectl swapoff sysctl modprobe helm exportfs"
readonly KIT_MASKED="swapoff modprobe mount.nfs"
# Real-API mode (--control-plane BINDIR): the binaries it needs, and where the nodes see them.
# The nodes' /root is their own (a bind of their disk), so a BINDIR under the host's /root
# would not be visible through the overlay: it is bind-mounted read-only instead.
readonly CP_BINARIES="etcd etcdctl kube-apiserver kube-controller-manager kube-scheduler kubectl"
readonly CP_NODE_DIR=/opt/control-plane

# mkdir -p under the layer, with the host's mode and owner for each level.
layer_dirs() { # args: absolute paths
    local p d part
    for p in "$@"; do
        d=$LAYER_DIR
        local IFS=/
        for part in ${p#/}; do
            d=$d/$part
            [ -d "$d" ] && continue
            mkdir "$d"
            if [ -d "${d#"$LAYER_DIR"}" ]; then
                chmod --reference="${d#"$LAYER_DIR"}" "$d"
                chown --reference="${d#"$LAYER_DIR"}" "$d"
            else
                chmod 755 "$d"
            fi
        done
    done
}

build_kit() {
    local L=$LAYER_DIR t d
    [ -d "$KIT_SRC" ] || die "--kit: $KIT_SRC is missing"
    [ -x /usr/bin/python3 ] || die "--kit needs /usr/bin/python3 (apt-get install python3)"
    command -v openssl >/dev/null 2>&1 || die "--kit needs openssl (apt-get install openssl)"
    rm -rf --one-file-system "$KIT_DIR"
    mkdir -m 0777 "$KIT_DIR"
    chmod 0777 "$KIT_DIR"
    layer_dirs /opt /usr/local/sbin /usr/sbin /var/lib
    mkdir -m 0755 "$L/opt/labkit" "$L/var/lib/labkit"
    cp -R --preserve=mode,timestamps "$KIT_SRC/." "$L/opt/labkit/"
    rm -rf "$L/opt/labkit/__pycache__"
    chown -R 0:0 "$L/opt/labkit"
    chmod -R go-w,a+rX "$L/opt/labkit"
    /usr/bin/python3 -m compileall -q -d /opt/labkit "$L/opt/labkit" >/dev/null ||
        die "--kit: python3 could not compile $KIT_SRC"
    for t in $KIT_SHADOWED; do ln -s "/opt/labkit/$t" "$L/usr/local/sbin/$t"; done
    if [ -n "$CP_BINDIR" ]; then
        # Real-API mode: the kit records it (the stand-ins read it), etcdctl is the real one
        # on PATH (kubectl comes with `apt-get install kubectl`, linked to the real one).
        mkdir -m 0755 "$L$CP_NODE_DIR"
        printf '%s\n' "$CP_NODE_DIR" >"$KIT_DIR/control-plane"
        printf '%s\n' "$CP_BINDIR" >"$KIT_DIR/control-plane.host"
        chmod 0644 "$KIT_DIR/control-plane" "$KIT_DIR/control-plane.host"
        ln -s "$CP_NODE_DIR/etcdctl" "$L/usr/local/sbin/etcdctl"
    fi
    ln -s /opt/labkit/apt-get "$L/usr/local/sbin/apt"
    for d in /usr/sbin /sbin; do
        if [ ! -d "$d" ] || [ -L "$d" ]; then continue; fi
        layer_dirs "$d"
        for t in $KIT_MASKED; do ln -sfn "/opt/labkit/$t" "$L$d/$t"; done
    done
}

# Per-node skeleton: overlay upper/work, and the node's /root and /home.
build_skel() {
    local S=$SKEL_DIR keys k
    keys=
    for k in id_ed25519 id_ecdsa id_rsa id_ed25519_pass; do
        keys+=$(<"$DIR/$k.pub")$'\n'
    done
    mkdir -p "$S/upper/etc" "$S/work" "$S/mnt" "$S/root/.ssh" "$S/home/$LAB_USER/.ssh"
    chmod 755 "$S" "$S/upper" "$S/upper/etc" "$S/home" "$S/home/$LAB_USER"
    chmod 700 "$S/root" "$S/root/.ssh" "$S/home/$LAB_USER/.ssh"
    local h
    for h in "$S/root" "$S/home/$LAB_USER"; do
        printf '%s' "$keys" >"$h/.ssh/authorized_keys"
        chmod 600 "$h/.ssh/authorized_keys"
        cat >"$h/.profile" <<'EOF'
# ~/.profile of a lab node (kept minimal on purpose)
if [ -n "$BASH_VERSION" ] && [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc"; fi
EOF
        cat >"$h/.bashrc" <<'EOF'
# ~/.bashrc of a lab node (kept minimal on purpose)
case $- in *i*) ;; *) return ;; esac
PS1='\u@\h:\w\$ '
EOF
    done
    chown -R "$LAB_UID:$LAB_UID" "$S/home/$LAB_USER"
}

# ---------------------------------------------------------------------------
# up: network
# ---------------------------------------------------------------------------
setup_host_network() {
    local -a b=()
    local k
    b+=("link add $BR_MAIN type bridge"
        "link set dev $BR_MAIN addrgenmode none"
        "addr add 198.18.$NET.1/24 dev $BR_MAIN"
        "link set dev $BR_MAIN up")
    if ((HIDDEN > 0)); then
        # no address (no IPv6 link-local either) and an unreachable route: the
        # host can reach hidden nodes only through the bastion.
        b+=("link add $BR_HIDDEN type bridge"
            "link set dev $BR_HIDDEN addrgenmode none"
            "link set dev $BR_HIDDEN up"
            "route add unreachable 198.19.$NET.0/24")
    fi
    for k in "${!N_NAME[@]}"; do
        local br=$BR_MAIN
        if [ "${N_ROLE[$k]}" = hidden ]; then br=$BR_HIDDEN; fi
        b+=("netns add ${N_NS[$k]}"
            "link add ${N_VETH[$k]} type veth peer name eth0 netns ${N_NS[$k]}"
            "link set dev ${N_VETH[$k]} addrgenmode none"
            "link set dev ${N_VETH[$k]} master $br up")
        if [ "${N_ROLE[$k]}" = bastion ]; then
            b+=("link add mdv${NAME}b type veth peer name eth1 netns ${N_NS[$k]}"
                "link set dev mdv${NAME}b addrgenmode none"
                "link set dev mdv${NAME}b master $BR_HIDDEN up")
        fi
    done
    printf '%s\n' "${b[@]}" | ip -batch - || die "creating the lab network failed (see the ip error above)"
}

# ---------------------------------------------------------------------------
# up: nodes
# ---------------------------------------------------------------------------
# Runs as pid 1 of the node's fresh pid namespace, already inside its network,
# mount (private propagation), UTS and IPC namespaces, but still on the host's
# root. Mounts the node's root filesystem, pivots into it and becomes sshd.
# shellcheck disable=SC2016 # expanded by the node's shell, not here
NODE_INIT='
set -eu
name=$1 st=$2 fs=$3 tmpl=$4
read -r hostpid _ </proc/self/stat   # the host /proc is still mounted: host pid
printf "%s\n" "$hostpid" >"$st/init.pid"
printf "%s\n" "$name" >/proc/sys/kernel/hostname
printf "0\n" >/proc/sys/net/ipv4/ip_forward
mount --all --fstab "$st/fstab"
mount -o remount,bind,rw "$fs/mnt/proc/sys/net"   # per-netns sysctls only
if [ -e "$st/labkit-node" ] && [ -s "$fs/mnt/etc/hostname" ]; then
    # lab kit nodes boot like VMs: with the hostname their /etc/hostname has (hostnamectl)
    h=$(head -n 1 "$fs/mnt/etc/hostname")
    [ -z "$h" ] || printf "%s\n" "$h" >/proc/sys/kernel/hostname
fi
cp -a "$tmpl/dev" "$tmpl/run" "$fs/mnt/"
cd "$fs/mnt"
pivot_root . .
umount -l .
cd /
exec /usr/sbin/sshd -D -f /run/mdlab/sshd_config -E /run/mdlab/sshd.log
'

# Files of node k: state dir (bind-mounted at /run/mdlab in the node), fs dir,
# sshd config, fstab, host key, and the in-namespace network config.
prep_node() {
    local k=$1
    local name=${N_NAME[$k]} ip=${N_IP[$k]} ip2=${N_IP2[$k]}
    local st=$NODES_DIR/$name fs=$FS_DIR/$name
    node_disk "$k"

    {
        printf '# sshd of lab node %s (written by scripts/lab.sh)\n' "$name"
        printf 'ListenAddress %s:22\n' "$ip"
        [ -z "$ip2" ] || printf 'ListenAddress %s:22\n' "$ip2"
        printf '%s\n' \
            'HostKey /run/mdlab/ssh_host_ed25519_key' \
            'PidFile /run/mdlab/sshd.pid' \
            'PermitRootLogin prohibit-password' \
            'PubkeyAuthentication yes' \
            'AuthorizedKeysFile .ssh/authorized_keys' \
            'PasswordAuthentication yes' \
            'KbdInteractiveAuthentication no' \
            'UsePAM no' \
            'MaxStartups 1000:30:1000' \
            'MaxSessions 200' \
            'UseDNS no' \
            'PrintMotd no' \
            'PrintLastLog no' \
            'AllowTcpForwarding yes' \
            'X11Forwarding no' \
            'LogLevel ERROR'
        [ "${N_SFTP[$k]}" = 0 ] || printf 'Subsystem sftp internal-sftp\n'
    } >"$st/sshd_config"

    local R=$fs/mnt
    {
        printf '# mounts of lab node %s, made inside its own mount namespace\n' "$name"
        printf 'mdlab-%s %s overlay lowerdir=%s:/,upperdir=%s/upper,workdir=%s/work,index=off 0 0\n' \
            "$name" "$R" "$LAYER_DIR" "$fs" "$fs"
        printf 'proc %s/proc proc nosuid,nodev,noexec 0 0\n' "$R"
        printf '%s/proc/sys %s/proc/sys none bind,ro 0 0\n' "$R" "$R"
        printf '%s/proc/sys/net %s/proc/sys/net none bind 0 0\n' "$R" "$R"
        if [ -e /proc/sysrq-trigger ]; then
            printf '%s/proc/sysrq-trigger %s/proc/sysrq-trigger none bind,ro 0 0\n' "$R" "$R"
        fi
        printf 'sysfs %s/sys sysfs ro,nosuid,nodev,noexec 0 0\n' "$R"
        printf 'tmpfs %s/dev tmpfs mode=755,size=1m,nosuid,noexec 0 0\n' "$R"
        printf 'devpts %s/dev/pts devpts newinstance,ptmxmode=0666,mode=620,gid=%s,nosuid,noexec,X-mount.mkdir 0 0\n' "$R" "$TTY_GID"
        printf 'tmpfs %s/dev/shm tmpfs mode=1777,nosuid,nodev,X-mount.mkdir 0 0\n' "$R"
        printf 'tmpfs %s/run tmpfs mode=755,size=64m,nosuid,nodev 0 0\n' "$R"
        printf 'tmpfs %s/tmp tmpfs mode=1777,nosuid,nodev 0 0\n' "$R"
        printf '%s/root %s/root none bind 0 0\n' "$fs" "$R"
        printf '%s/home %s/home none bind 0 0\n' "$fs" "$R"
        printf '%s %s/run/mdlab none bind,X-mount.mkdir 0 0\n' "$st" "$R"
        [ "$KIT" = 0 ] || printf '%s %s/var/lib/labkit none bind 0 0\n' "$KIT_DIR" "$R"
        [ -z "$CP_BINDIR" ] || printf '%s %s%s none bind,ro 0 0\n' "$CP_BINDIR" "$R" "$CP_NODE_DIR"
    } >"$st/fstab"
    # lab kit: who am I (the stand-ins refuse to run without this file)
    [ "$KIT" = 0 ] || printf 'name=%s\nip=%s\nlab=%s\n' "$name" "$ip" "$NAME" >"$st/labkit-node"

    node_host_key "$k"

    {
        printf 'link set dev lo up\naddr add %s/24 dev eth0\nlink set dev eth0 up\n' "$ip"
        [ -z "$ip2" ] || printf 'addr add %s/24 dev eth1\nlink set dev eth1 up\n' "$ip2"
    } | ip -n "${N_NS[$k]}" -batch -
}

# A fresh disk for node k: its overlay upper layer, /root and /home from the skeleton.
node_disk() {
    local name=${N_NAME[$1]}
    local fs=$FS_DIR/$name
    cp -a "$SKEL_DIR" "$fs"
    printf '%s\n' "$name" >"$fs/upper/etc/hostname"
    printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n' \
        "$name" >"$fs/upper/etc/hosts"
}

# A new ssh host key for node k (its sshd reads it from the state dir at boot).
node_host_key() {
    local name=${N_NAME[$1]}
    local st=$NODES_DIR/$name
    rm -f "$st/ssh_host_ed25519_key" "$st/ssh_host_ed25519_key.pub"
    ssh-keygen -q -t ed25519 -N '' -C "root@$name" -f "$st/ssh_host_ed25519_key" </dev/null
}

# Boot node k in the background: network ns -> new mount/UTS/IPC/pid ns -> init.
launch_node() {
    local k=$1
    local name=${N_NAME[$k]}
    local st=$NODES_DIR/$name
    rm -f "$st/sshd.pid" "$st/init.pid"
    (
        # The caller's descriptors must not live on in the node's daemons: under
        # `flock LOCK scripts/lab.sh up`, the lock would stay held until the lab went down.
        for fd in /proc/"$BASHPID"/fd/*; do
            fd=${fd##*/}
            if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
        done
        exec setsid nsenter --net="/run/netns/${N_NS[$k]}" -- \
            unshare --mount --uts --ipc --pid --fork --propagation private -- \
            /bin/bash -c "$NODE_INIT" mdlab-init "$name" "$st" "$FS_DIR/$name" "$TMPL_DIR" \
            </dev/null >"$st/init.log" 2>&1
    ) &
    printf '%s\n' "$!" >"$st/launch.pid"
}

# Wait until sshd of the given node indexes has written its pid file (it does
# so after binding its listening sockets). Dies with the node's log on failure.
wait_ready() {
    local -a pending=("$@")
    local t0 k st lp
    local -a still failed=()
    t0=$(now_us)
    while [ ${#pending[@]} -gt 0 ]; do
        still=()
        for k in "${pending[@]}"; do
            st=$NODES_DIR/${N_NAME[$k]}
            [ -s "$st/sshd.pid" ] && continue
            { IFS= read -r lp <"$st/launch.pid"; } 2>/dev/null || lp=0
            if ! alive "$lp"; then
                failed+=("$k")
                continue
            fi
            still+=("$k")
        done
        pending=("${still[@]}")
        [ ${#pending[@]} -gt 0 ] || break
        if (($(now_us) - t0 > READY_TIMEOUT_S * 1000000)); then
            failed+=("${pending[@]}")
            break
        fi
        sleep 0.02
    done
    [ ${#failed[@]} -eq 0 ] && return 0
    for k in "${failed[@]}"; do
        st=$NODES_DIR/${N_NAME[$k]}
        log "node ${N_NAME[$k]} did not start; last lines of $st/init.log and sshd.log:"
        tail -n 5 "$st/init.log" "$st/sshd.log" 2>/dev/null | sed 's/^/    /' >&2 || true
    done
    die "${#failed[@]} node(s) failed to start"
}

write_outputs() {
    local k kt key rest
    : >"$DIR/known_hosts.tmp"
    for k in "${!N_NAME[@]}"; do
        read -r kt key rest <"$NODES_DIR/${N_NAME[$k]}/ssh_host_ed25519_key.pub"
        printf '%s %s %s\n' "${N_IP[$k]}" "$kt" "$key" >>"$DIR/known_hosts.tmp"
    done
    mv -f "$DIR/known_hosts.tmp" "$DIR/known_hosts"

    {
        printf 'name\tip\trole\tnetns\n'
        for k in "${!N_NAME[@]}"; do
            printf '%s\t%s\t%s\t%s\n' "${N_NAME[$k]}" "${N_IP[$k]}" "${N_ROLE[$k]}" "${N_NS[$k]}"
        done
    } >"$DIR/nodes.tsv"

    local bastion=${N_IP[0]}
    {
        printf '# written by scripts/lab.sh up\n'
        printf 'defaults:\n'
        printf '  user: root\n'
        printf '  port: 22\n'
        printf '  identity_file: %s/id_ed25519\n' "$DIR"
        printf '  known_hosts: %s/known_hosts\n' "$DIR"
        printf '  host_key_check: strict\n'
        printf 'groups:\n'
        printf '  nodes:\n'
        for k in "${!N_NAME[@]}"; do
            [ "${N_ROLE[$k]}" = hidden ] && continue
            printf '    - {name: %s, ssh_ip: %s}\n' "${N_NAME[$k]}" "${N_IP[$k]}"
        done
        if ((HIDDEN > 0)); then
            printf '  hidden:\n'
            for k in "${!N_NAME[@]}"; do
                [ "${N_ROLE[$k]}" = hidden ] || continue
                printf '    - {name: %s, ssh_ip: %s, jump: [root@%s:22]}\n' "${N_NAME[$k]}" "${N_IP[$k]}" "$bastion"
            done
        fi
    } >"$DIR/inventory.yaml"

    {
        printf '# written by scripts/lab.sh up; use: ssh -F %s root@<node ip>\n' "$SSH_CFG"
        printf 'Host *\n'
        printf '    User root\n'
        printf '    Port 22\n'
        printf '    IdentityFile %s/id_ed25519\n' "$DIR"
        printf '    IdentitiesOnly yes\n'
        printf '    IdentityAgent none\n'
        printf '    UserKnownHostsFile %s/known_hosts\n' "$DIR"
        printf '    GlobalKnownHostsFile /dev/null\n'
        printf '    StrictHostKeyChecking yes\n'
        printf '    UpdateHostKeys no\n'
        printf '    CheckHostIP no\n'
        printf '    ConnectTimeout 10\n'
        printf '    KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org,sntrup761x25519-sha512@openssh.com\n'
        printf '    ControlMaster no\n'
        printf '    ControlPath none\n'
        printf '    LogLevel ERROR\n'
    } >"$SSH_CFG"
    chmod 600 "$SSH_CFG"
}

# ssh to every node with the real client (strict host keys, key auth as root,
# through the bastion for hidden nodes) and compare `hostname`.
verify_nodes() {
    local -a todo=("$@") failed=() pids=()
    local attempt k out got
    for attempt in 1 2; do
        pids=()
        for k in "${todo[@]}"; do
            out=$NODES_DIR/${N_NAME[$k]}/verify.out
            if [ "${N_ROLE[$k]}" = hidden ]; then
                ssh -F "$SSH_CFG" -n -o BatchMode=yes -J "root@${N_IP[0]}" "root@${N_IP[$k]}" hostname \
                    >"$out" 2>&1 9>&- &
            else
                ssh -F "$SSH_CFG" -n -o BatchMode=yes "root@${N_IP[$k]}" hostname >"$out" 2>&1 9>&- &
            fi
            pids+=($!)
        done
        for k in "${pids[@]}"; do wait "$k" || true; done
        failed=()
        for k in "${todo[@]}"; do
            got=$(head -n1 "$NODES_DIR/${N_NAME[$k]}/verify.out" 2>/dev/null || true)
            [ "$got" = "${N_NAME[$k]}" ] || failed+=("$k")
        done
        [ ${#failed[@]} -gt 0 ] || return 0
        todo=("${failed[@]}")
        if [ $attempt = 1 ]; then sleep 0.5; fi
    done
    for k in "${failed[@]}"; do
        log "ssh check of ${N_NAME[$k]} (${N_IP[$k]}) failed, expected hostname '${N_NAME[$k]}', got:"
        sed 's/^/    /' "$NODES_DIR/${N_NAME[$k]}/verify.out" >&2 || true
    done
    die "${#failed[@]} of ${#N_NAME[@]} node(s) failed the ssh check; the lab is left up for inspection (run: $PROG down $(lab_args))"
}

cmd_up() {
    require_root
    ensure_packages
    set_paths
    build_node_table
    local t0 t1
    t0=$(now_us)
    mkdir -p "$DIR"
    lock_dir
    teardown
    check_net_free
    ensure_client_keys
    write_lab_env

    TTY_GID=$(getent group tty | cut -d: -f3) || true
    [ -n "$TTY_GID" ] || TTY_GID=5
    mount_lab_fs
    build_layer
    if [ "$KIT" = 1 ]; then build_kit; fi
    build_tmpl
    build_skel
    setup_host_network

    local k
    local -a pids=() dirs=()
    for k in "${!N_NAME[@]}"; do dirs+=("$NODES_DIR/${N_NAME[$k]}"); done
    mkdir -p "${dirs[@]}"
    for k in "${!N_NAME[@]}"; do
        prep_node "$k" 9>&- &
        pids+=($!)
    done
    local p
    for p in "${pids[@]}"; do wait "$p" || die "preparing the nodes failed (see errors above)"; done
    log "prepared ${#N_NAME[@]} node(s) ($(since "$t0")s)"

    for k in "${!N_NAME[@]}"; do launch_node "$k"; done
    write_outputs
    wait_ready "${!N_NAME[@]}"
    log "all sshd listening ($(since "$t0")s)"
    t1=$(now_us)
    verify_nodes "${!N_NAME[@]}"
    log "ssh check passed on ${#N_NAME[@]} node(s) ($(since "$t1")s)"

    printf "lab '%s' is up: %d node(s) %s..%s" "$NAME" "$COUNT" "${N_IP[0]}" "${N_IP[$((COUNT - 1))]}"
    if ((HIDDEN > 0)); then
        printf ', %d hidden node(s) on 198.19.%d.0/24 behind %s (%s)' "$HIDDEN" "$NET" "${N_NAME[0]}" "${N_IP[0]}"
    fi
    printf ' in %ss\n' "$(since "$t0")"
    printf '  inventory: %s/inventory.yaml\n' "$DIR"
    printf '  try:       mgmt-driver exec -i %s/inventory.yaml -- hostname\n' "$DIR"
    printf '  ssh:       ssh -F %s root@%s   (user %s, password in %s/password)\n' "$SSH_CFG" "${N_IP[0]}" "$LAB_USER" "$DIR"
    if [ "$KIT" = 1 ]; then
        printf '  lab kit:   %s (stand-ins, not the real tools; see docs/labkit.md)\n' "$KIT_DIR"
        printf '             %s/labkit-ctl state %s\n' "$KIT_SRC" "$KIT_DIR"
        if [ -n "$CP_BINDIR" ]; then
            printf '  real API:  %s at %s in the nodes (kubeadm runs the real control plane)\n' \
                "$CP_BINDIR" "$CP_NODE_DIR"
        fi
    fi
    printf '  down:      %s down %s\n' "$0" "$(lab_args)"
}

# ---------------------------------------------------------------------------
# stop / start / exec / status
# ---------------------------------------------------------------------------
# Load the lab, find NODE, and take the lab lock: the common start of stop/start.
open_node() {
    require_root
    set_paths
    load_lab
    resolve_node
    lock_dir
}

cmd_stop() {
    open_node
    local name=${N_NAME[$NODE_IDX]}
    KILL_NS=("${N_NS[$NODE_IDX]}")
    kill_nodes "$name"
    rm -f "$NODES_DIR/$name/sshd.pid" "$NODES_DIR/$name/init.pid"
    log "stopped $name"
}

cmd_start() {
    open_node
    local name=${N_NAME[$NODE_IDX]}
    [ -e "/run/netns/${N_NS[$NODE_IDX]}" ] || die "network namespace ${N_NS[$NODE_IDX]} is gone; run: $PROG up"
    node_init_pid "$name"
    if [ -n "$INIT_PID" ]; then
        log "$name is already running"
        return 0
    fi
    # leftovers of a node that died on its own
    KILL_NS=("${N_NS[$NODE_IDX]}")
    kill_nodes "$name"
    local t0
    t0=$(now_us)
    launch_node "$NODE_IDX"
    wait_ready "$NODE_IDX"
    log "started $name (${N_IP[$NODE_IDX]}) in $(since "$t0")s"
}

# What a VNFM heal does to a VM: a new one at the same address, with a fresh disk and a new
# host key. Only the lab's own DIR/known_hosts learns the new key.
cmd_rebuild() {
    open_node
    local k=$NODE_IDX
    local name=${N_NAME[$k]} st fs old new kt key rest
    st=$NODES_DIR/$name fs=$FS_DIR/$name
    [ -d "$fs" ] || die "$fs is missing; is lab '$NAME' up?"
    [ -e "/run/netns/${N_NS[$k]}" ] || die "network namespace ${N_NS[$k]} is gone; run: $PROG up"
    local t0
    t0=$(now_us)
    old=$(ssh-keygen -l -f "$st/ssh_host_ed25519_key.pub" | awk '{print $2}')
    KILL_NS=("${N_NS[$k]}")
    kill_nodes "$name"
    rm -f "$st/sshd.pid" "$st/init.pid"
    rm -rf --one-file-system "$fs"
    node_disk "$k"
    node_host_key "$k"
    new=$(ssh-keygen -l -f "$st/ssh_host_ed25519_key.pub" | awk '{print $2}')
    read -r kt key rest <"$st/ssh_host_ed25519_key.pub"
    awk -v ip="${N_IP[$k]}" '$1 != ip' "$DIR/known_hosts" >"$DIR/known_hosts.tmp"
    printf '%s %s %s\n' "${N_IP[$k]}" "$kt" "$key" >>"$DIR/known_hosts.tmp"
    mv -f "$DIR/known_hosts.tmp" "$DIR/known_hosts"
    launch_node "$k"
    wait_ready "$k"
    log "rebuilt $name (${N_IP[$k]}) in $(since "$t0")s: fresh disk, host key $new (was $old)"
}

cmd_exec() {
    require_root
    set_paths
    load_lab
    resolve_node
    local name=${N_NAME[$NODE_IDX]} pid
    node_init_pid "$name"
    pid=$INIT_PID
    if [ -z "$pid" ]; then
        printf '%s: error: node %s is not running (start it with: %s start %s %s)\n' \
            "$PROG" "$name" "$PROG" "$name" "$(lab_args)" >&2
        exit 125
    fi
    exec nsenter --target "$pid" --net --mount --uts --ipc --pid --root --wd -- \
        env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root USER=root LOGNAME=root SHELL=/bin/bash TERM="${TERM:-dumb}" LANG=C.UTF-8 \
        "${CMD_ARGV[@]}"
}

cmd_status() {
    require_root
    set_paths
    if [ ! -f "$DIR/nodes.tsv" ]; then
        printf "lab '%s' is not up (%s)\n" "$NAME" "$DIR"
        exit 1
    fi
    load_lab
    local k pid state stopped=0
    printf "lab '%s': dir %s, networks 198.18.%s.0/24 (host .1)%s\n" "$NAME" "$DIR" "$NET" \
        "$(grep -q $'\thidden\t' "$DIR/nodes.tsv" && printf ' + hidden 198.19.%s.0/24' "$NET")"
    printf '%-10s %-15s %-8s %-14s %-8s %s\n' NAME IP ROLE NETNS STATE PID
    for k in "${!N_NAME[@]}"; do
        node_init_pid "${N_NAME[$k]}"
        pid=$INIT_PID
        if [ -n "$pid" ]; then
            state=running
        else
            state=stopped
            pid=-
            stopped=$((stopped + 1))
        fi
        printf '%-10s %-15s %-8s %-14s %-8s %s\n' "${N_NAME[$k]}" "${N_IP[$k]}" "${N_ROLE[$k]}" "${N_NS[$k]}" "$state" "$pid"
    done
    [ $stopped -eq 0 ] || exit 3
}

main() {
    parse_args "$@"
    case $CMD in
    up) cmd_up ;;
    down) cmd_down ;;
    stop) cmd_stop ;;
    start) cmd_start ;;
    rebuild) cmd_rebuild ;;
    exec) cmd_exec ;;
    status) cmd_status ;;
    esac
}

main "$@"
