#!/usr/bin/env bash
# cluster-inventory.sh LABDIR NET "MASTERS" "WORKERS" - LAB KIT: print the inventory of a
# cluster on lab nodes: groups master_instance / worker_instance (the sample requests'
# aspect_id), root key logins with strict host keys, the VIP 198.18.NET.100 as cps.vip_CP.
# MASTERS and WORKERS are lab node numbers, e.g. "1 2 3" "4 5". Nodes are named <lab>-<i>.
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: ${0##*/} LABDIR NET MASTERS WORKERS" >&2; exit 2; }
dir=$(cd -- "$1" && pwd -P) net=$2 lab=${dir##*/}
printf 'defaults:\n  user: root\n  identity_file: %s\n  known_hosts: %s\n  host_key_check: strict\n' "$dir/id_ed25519" "$dir/known_hosts"
group() { # NAME NODES
    printf '  %s:\n' "$1"
    for i in $2; do printf '    - {name: %s-%d, ssh_ip: 198.18.%d.%d}\n' "$lab" "$i" "$net" $((10 + i)); done
}
printf 'groups:\n'
group master_instance "$3"
group worker_instance "$4"
printf 'cps:\n  vip_CP: 198.18.%d.100\n' "$net"
