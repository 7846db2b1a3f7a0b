#!/usr/bin/env bash
# openstack-lab.sh - a real Keystone v3 and a real Neutron API on 127.0.0.1, over a private
# MariaDB server, everything (data, configuration, keys, logs, pids) under DIR.
#
#   scripts/openstack-lab.sh up DIR     # prints DIR/cloud.json (auth_url, region, neutron_url, admin)
#   scripts/openstack-lab.sh down DIR   # stops what `up` started; idempotent
#
# What is real and what is not: docs/openstack-lab.md. The services come from
# scripts/openstack-venv.sh (OPENSTACK_PYTHON overrides the venv's python). Nothing outside DIR
# is changed: the database is a fresh mariadb-install-db with its own port and socket, run
# with --no-defaults (no option file of the host), never the system's server; Keystone's fernet and credential keys live in DIR too.
set -euo pipefail
PROG=openstack-lab.sh
repo=$(cd "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
    cat <<'EOF'
usage: openstack-lab.sh up DIR | down DIR
EOF
}
# shellcheck source=scripts/common.sh
source "$repo/scripts/common.sh"

# How long each start may take before `up` gives up (seconds).
WAIT_DB=${OPENSTACK_LAB_WAIT_DB:-30}
WAIT_HTTP=${OPENSTACK_LAB_WAIT_HTTP:-90}
WAIT_STOP=15

# The --user option of the MariaDB programs: as root the server runs as `mysql` (and its files
# belong to it), otherwise as ourselves.
db_user_args() {
    if [[ $EUID -eq 0 ]]; then
        echo "--user=mysql"
    else
        echo "--user=$(id -un)"
    fi
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# A random secret of letters and digits (safe inside URLs and INI files).
secret() {
    python3 -c 'import secrets; print(secrets.token_hex(16))'
}

# phase NAME: logs how long the previous phase took (docs/openstack-lab.md quotes these).
phase() {
    local now
    now=$(date +%s.%N)
    [[ -n ${phase_name-} ]] && log "$(awk -v n="$phase_name" -v a="$phase_start" -v b="$now" 'BEGIN { printf "%s: %.1fs", n, b - a }')"
    phase_name=$1
    phase_start=$now
}

log_tail() {
    local f=$1
    [[ -f $f ]] || return 0
    printf '%s: --- last lines of %s ---\n' "$PROG" "$f" >&2
    tail -n 40 "$f" >&2
}

# wait_http URL PIDFILE LOG: waits until URL answers with a status below 500, the process is
# alive, and at most WAIT_HTTP seconds.
wait_http() {
    local url=$1 pidfile=$2 logf=$3 i
    for ((i = 0; i < WAIT_HTTP * 2; i++)); do
        if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
            log_tail "$logf"
            die "the process serving $url exited while starting (log: $logf)"
        fi
        if curl -s -o /dev/null --max-time 2 -w '%{http_code}' "$url" | grep -q '^[1-4]'; then
            return 0
        fi
        sleep 0.5
    done
    log_tail "$logf"
    die "$url did not answer within ${WAIT_HTTP}s (log: $logf)"
}

# stop_pid NAME PATTERN: TERM, bounded wait, then KILL, for a process `up` recorded in
# DIR/pids/NAME. The pid is only signalled while its command line still holds PATTERN, a fixed
# string naming our program (pids get reused).
stop_pid() {
    local pattern=$2 f=$dir/pids/$1 pid i
    [[ -f $f ]] || return 0
    pid=$(cat "$f")
    if [[ $pid =~ ^[0-9]+$ ]] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$pattern"; then
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < WAIT_STOP * 10; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
}

down() {
    # The two services at once (each takes up to 2 s to stop), then their database.
    stop_pid neutron "serve.py neutron" &
    stop_pid keystone "serve.py keystone" &
    wait
    stop_pid mariadb "--datadir=$dir/db/data"
    rm -f "$dir/cloud.json"
}

# start_mariadb PASSWORD PORT: a fresh MariaDB data directory under DIR and a server on
# 127.0.0.1:PORT with its own socket. One user, `lab`, owns the keystone and neutron databases.
start_mariadb() {
    local pw=$1 port=$2 db=$dir/db i
    local sock=$db/run/mariadb.sock
    mkdir -p "$db/run"
    [[ $EUID -eq 0 ]] && chown -R mysql: "$db"
    mariadb-install-db --no-defaults --datadir="$db/data" "$(db_user_args)" \
        --auth-root-authentication-method=socket --skip-test-db >"$dir/log/mariadb-install-db.log" 2>&1 || {
        log_tail "$dir/log/mariadb-install-db.log"
        die "mariadb-install-db failed (log: $dir/log/mariadb-install-db.log)"
    }
    # Durability is not wanted in a lab: no binary log, no flush per commit, no doublewrite.
    setsid mariadbd --no-defaults --datadir="$db/data" "$(db_user_args)" --bind-address=127.0.0.1 \
        --port="$port" --socket="$sock" --pid-file="$db/run/mariadbd.pid" \
        --log-error="$dir/log/mariadb.log" --skip-name-resolve --skip-log-bin \
        --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --character-set-server=utf8mb4 \
        >/dev/null 2>&1 </dev/null &
    echo $! >"$dir/pids/mariadb"
    for ((i = 0; i < WAIT_DB * 5; i++)); do
        mariadb-admin --no-defaults --socket="$sock" -u root ping >/dev/null 2>&1 && break
        kill -0 "$(cat "$dir/pids/mariadb")" 2>/dev/null || break
        sleep 0.2
    done
    mariadb-admin --no-defaults --socket="$sock" -u root ping >/dev/null 2>&1 || {
        log_tail "$dir/log/mariadb.log"
        die "MariaDB did not start within ${WAIT_DB}s (log: $dir/log/mariadb.log)"
    }
    # The password goes through stdin, never argv.
    mariadb --no-defaults --socket="$sock" -u root >"$dir/log/createdb.log" 2>&1 <<EOF || {
CREATE DATABASE keystone CHARACTER SET utf8mb4;
CREATE DATABASE neutron CHARACTER SET utf8mb4;
CREATE USER 'lab'@'127.0.0.1' IDENTIFIED BY '$pw';
GRANT ALL PRIVILEGES ON keystone.* TO 'lab'@'127.0.0.1';
GRANT ALL PRIVILEGES ON neutron.* TO 'lab'@'127.0.0.1';
EOF
        log_tail "$dir/log/createdb.log"
        die "creating the keystone and neutron databases failed (log: $dir/log/createdb.log)"
    }
}

start_keystone() {
    local db_url=$1 port=$2 admin_pw=$3 conf=$dir/keystone/keystone.conf
    mkdir -p "$dir/keystone"
    cat >"$conf" <<EOF
[DEFAULT]
use_stderr = true
[database]
connection = $db_url/keystone?charset=utf8mb4
[token]
provider = fernet
[fernet_tokens]
key_repository = $dir/keystone/fernet-keys
[fernet_receipts]
key_repository = $dir/keystone/fernet-keys
[credential]
key_repository = $dir/keystone/credential-keys
[cache]
enabled = false
EOF
    chmod 600 "$conf"
    local manage=("$venv_bin/keystone-manage" --config-file "$conf")
    local owner=(--keystone-user "$(id -un)" --keystone-group "$(id -gn)")
    {
        "${manage[@]}" db_sync &&
            "${manage[@]}" fernet_setup "${owner[@]}" &&
            "${manage[@]}" credential_setup "${owner[@]}" &&
            OS_BOOTSTRAP_PASSWORD=$admin_pw "${manage[@]}" bootstrap \
                --bootstrap-username admin --bootstrap-project-name admin \
                --bootstrap-role-name admin --bootstrap-region-id RegionOne \
                --bootstrap-admin-url "http://127.0.0.1:$port/v3" \
                --bootstrap-public-url "http://127.0.0.1:$port/v3" \
                --bootstrap-internal-url "http://127.0.0.1:$port/v3"
    } >"$dir/log/keystone-manage.log" 2>&1 || {
        log_tail "$dir/log/keystone-manage.log"
        die "keystone-manage failed (log: $dir/log/keystone-manage.log)"
    }
    phase "Keystone start"
    OS_KEYSTONE_CONFIG_DIR=$dir/keystone OS_KEYSTONE_CONFIG_FILES=keystone.conf \
        setsid "$py" "$repo/tests/openstack/serve.py" keystone "$port" >"$dir/log/keystone.log" 2>&1 </dev/null &
    echo $! >"$dir/pids/keystone"
    wait_http "http://127.0.0.1:$port/v3" "$dir/pids/keystone" "$dir/log/keystone.log"
}

start_neutron() {
    local db_url=$1 port=$2 kport=$3 admin_pw=$4 n=$dir/neutron
    mkdir -p "$n/lock"
    cat >"$n/neutron.conf" <<EOF
[DEFAULT]
use_stderr = true
bind_host = 127.0.0.1
bind_port = $port
# The paste pipeline the wheel installs (venv/etc/neutron): auth by keystonemiddleware.
api_paste_config = $venv_etc/neutron/api-paste.ini
core_plugin = ml2
service_plugins = router
auth_strategy = keystone
allow_overlapping_ips = true
# No message broker: the API process casts to no agent, so oslo.messaging's in-process driver.
transport_url = fake:/
notify_nova_on_port_status_changes = false
notify_nova_on_port_data_changes = false
api_workers = 0
rpc_workers = 0
[database]
connection = $db_url/neutron?charset=utf8mb4
[oslo_concurrency]
lock_path = $n/lock
[oslo_messaging_notifications]
driver = noop
[keystone_authtoken]
www_authenticate_uri = http://127.0.0.1:$kport/v3
auth_url = http://127.0.0.1:$kport/v3
auth_type = password
username = admin
password = $admin_pw
project_name = admin
user_domain_name = Default
project_domain_name = Default
region_name = RegionOne
service_token_roles_required = true
EOF
    cat >"$n/ml2_conf.ini" <<EOF
[ml2]
type_drivers = flat,vxlan
tenant_network_types = vxlan
mechanism_drivers =
extension_drivers = port_security
[ml2_type_flat]
flat_networks = *
[ml2_type_vxlan]
vni_ranges = 1:1000
EOF
    chmod 600 "$n/neutron.conf"
    "$venv_bin/neutron-db-manage" --config-file "$n/neutron.conf" --config-file "$n/ml2_conf.ini" \
        upgrade heads >"$dir/log/neutron-db-manage.log" 2>&1 || {
        log_tail "$dir/log/neutron-db-manage.log"
        die "neutron-db-manage upgrade failed (log: $dir/log/neutron-db-manage.log)"
    }
    phase "Neutron start"
    OS_NEUTRON_CONFIG_DIR=$n OS_NEUTRON_CONFIG_FILES='neutron.conf;ml2_conf.ini' \
        setsid "$py" "$repo/tests/openstack/serve.py" neutron "$port" >"$dir/log/neutron.log" 2>&1 </dev/null &
    echo $! >"$dir/pids/neutron"
    wait_http "http://127.0.0.1:$port/" "$dir/pids/neutron" "$dir/log/neutron.log"
}

# The EXIT trap of `up`: a failed start leaves nothing running.
up_failed() {
    local rc=$?
    [[ $rc -eq 0 ]] && return 0
    log "up failed; stopping what was started"
    down
}

up() {
    [[ -f $dir/pids/keystone || -f $dir/pids/neutron || -f $dir/pids/mariadb ]] &&
        die "$dir is already up; run: $PROG down $dir"
    phase "venv"
    py=${OPENSTACK_PYTHON:-$("$repo/scripts/openstack-venv.sh")}
    venv_bin=$(dirname "$py")
    venv_etc=$(dirname "$venv_bin")/etc
    rm -rf "$dir/db" "$dir/keystone" "$dir/neutron" "$dir/log" "$dir/pids" "$dir/cloud.json"
    mkdir -p "$dir/log" "$dir/pids"
    # The mysql user must reach DIR/db; nothing above DIR is touched.
    chmod 755 "$dir"
    trap up_failed EXIT

    local db_pw admin_pw db_port k_port n_port db_url
    db_pw=$(secret)
    admin_pw=$(secret)
    db_port=$(free_port)
    k_port=$(free_port)
    n_port=$(free_port)
    db_url="mysql+pymysql://lab:$db_pw@127.0.0.1:$db_port"

    phase "MariaDB install-db, start, create databases"
    start_mariadb "$db_pw" "$db_port"
    phase "Keystone db_sync, keys, bootstrap"
    start_keystone "$db_url" "$k_port" "$admin_pw"
    local json=$dir/cloud.json.part
    install -m 600 /dev/null "$json"
    python3 - "$json" "$k_port" "$n_port" "$admin_pw" <<'EOF'
import json, sys
path, kport, nport, password = sys.argv[1:]
cloud = {
    "auth_url": f"http://127.0.0.1:{kport}/v3",
    "region": "RegionOne",
    "neutron_url": f"http://127.0.0.1:{nport}",
    "admin": {
        "username": "admin",
        "password": password,
        "project_name": "admin",
        "user_domain_name": "Default",
        "project_domain_name": "Default",
    },
}
with open(path, "w") as f:
    json.dump(cloud, f, indent=2)
    f.write("\n")
EOF
    python3 "$repo/tests/openstack/cloud.py" register-network "$json" >>"$dir/log/catalogue.log" 2>&1 || {
        log_tail "$dir/log/catalogue.log"
        die "registering the network endpoint in Keystone failed (log: $dir/log/catalogue.log)"
    }
    phase "Neutron db upgrade"
    start_neutron "$db_url" "$n_port" "$k_port" "$admin_pw"
    phase ready
    mv "$json" "$dir/cloud.json"
    trap - EXIT
    log "Keystone http://127.0.0.1:$k_port/v3, Neutron http://127.0.0.1:$n_port, MariaDB 127.0.0.1:$db_port; logs in $dir/log"
    echo "$dir/cloud.json"
}

[[ $# -eq 2 ]] || usage_error "expected a command and a directory"
case $1 in
up)
    mkdir -p "$2"
    dir=$(cd "$2" && pwd)
    up
    ;;
down)
    [[ -d $2 ]] || exit 0
    dir=$(cd "$2" && pwd)
    down
    ;;
*) usage_error "unknown command: $1" ;;
esac
