//! The `real` test binary: the cluster hooks (tests/real_cluster.rs), HA with a real 3-member
//! etcd (tests/real_ha.rs), the Helm CNF operations (tests/real_cnf.rs), workloads
//! (tests/real_workload.rs) and two sites through `mgmt-driver sites` (tests/real_sites.rs) against a REAL
//! Kubernetes API in the lab: the lab kit's real-API mode
//! (`scripts/lab.sh up N --kit --control-plane BINDIR`, docs/labkit.md), where kubeadm runs the real etcd, kube-apiserver,
//! kube-controller-manager and kube-scheduler built by scripts/build-control-plane.sh, and
//! kubectl, etcdctl and helm on the nodes are the real binaries.
//!
//! Its own binary: it needs the control plane built (~10 min once per machine) and ~0.6 GB per
//! control plane, which the kit-only suites do not. Without the build, its lab trials are
//! ignored with a loud message.

// A test binary reports to the test log and exits as a harness must; the print and exit lints
// (Cargo.toml) guard the driver's own output path (src/console.rs).
#![allow(clippy::print_stdout, clippy::print_stderr, clippy::exit)]

#[path = "../support/mod.rs"]
mod support;

#[path = "../real_cluster.rs"]
mod real_cluster;

#[path = "../real_ha.rs"]
mod real_ha;

#[path = "../real_cnf.rs"]
mod real_cnf;

// Workloads, storage, labels and access on the real API (lab rw, net 92).
#[path = "../real_workload.rs"]
mod real_workload;

// Two sites, each its own real API, through `mgmt-driver sites` (labs rs1/rs2, nets 85/86).
#[path = "../real_sites.rs"]
mod real_sites;

// `cnf --kubeconfig`: Helm on the controller for a cluster known only by its kubeconfig (lab rk,
// net 93).
#[path = "../real_kubeconfig.rs"]
mod real_kubeconfig;

fn main() {
    support::harness::run(vec![
        real_cluster::suite(),
        real_ha::suite(),
        real_cnf::suite(),
        real_workload::suite(),
        real_sites::suite(),
        real_kubeconfig::suite(),
    ])
}
