#!/usr/bin/env bash
# fixed-time-install.sh - LAB KIT: a minimal install script written to Tacker's contract
# (docs/cluster-contract.md §2) for benchmarks. It does only what the contract needs (hostname,
# kubeadm init/join through the kit's stand-ins, the main master's output lines), so a node
# costs the kit's fixed `install_delay_s` plus a few process starts: what is left over in a
# benchmark is the driver's own overhead. Not an installer; never use it outside the lab.
set -euo pipefail
M='' W='' I='' A=10.96.0.0/12 P=192.168.0.0/16 T='' S='' K=''
while getopts 'dom:w:i:a:p:t:s:k:h' o; do
    case $o in
    m) M=$OPTARG ;; w) W=$OPTARG ;; i) I=$OPTARG ;; a) A=$OPTARG ;; p) P=$OPTARG ;;
    t) T=$OPTARG ;; s) S=$OPTARG ;; k) K=$OPTARG ;; *) ;;
    esac
done
apt-get install -y kubeadm kubectl >/dev/null 2>&1
mine() { ip -4 -o addr show | awk '{split($4, a, "/"); print a[1]}' | grep -qx "$1"; }
if [ -n "$W" ]; then
    hostnamectl set-hostname "worker${W##*.}"
    port=16443
    [ "${ha_flag:-True}" != False ] || port=6443
    kubeadm join "$I:$port" --token "$T" --discovery-token-ca-cert-hash "sha256:$S" >&2
    exit 0
fi
me=''
IFS=, read -r -a ms <<<"$M"
for ip in "${ms[@]}"; do if mine "$ip"; then me=$ip; fi; done
[ -n "$me" ] || { echo "none of $M is mine" >&2; exit 1; }
hostnamectl set-hostname "master${me##*.}"
ep="$I:6443"
[ ${#ms[@]} -eq 1 ] || ep="$I:16443"
if [ "$me" != "${ms[0]}" ]; then
    kubeadm join "$ep" --token "$T" --discovery-token-ca-cert-hash "sha256:$S" --control-plane --certificate-key "$K" >&2
    exit 0
fi
kubeadm init --pod-network-cidr "$P" --service-cidr "$A" --control-plane-endpoint "$ep" --upload-certs >&2
export KUBECONFIG=/etc/kubernetes/admin.conf
echo "token:$(kubeadm token create)"
echo "server:$(kubectl config view --raw -o jsonpath='{.clusters[0].cluster.server}')"
echo "ssl_ca_cert_hash:$(openssl x509 -pubkey -noout -in /etc/kubernetes/pki/ca.crt | openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1)"
echo "certificate_key:$(kubeadm init phase upload-certs --upload-certs 2>/dev/null | tail -n 1)"
cat /etc/kubernetes/pki/ca.crt
