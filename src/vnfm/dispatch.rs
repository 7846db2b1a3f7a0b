//! Which of our operations a VNFM hook runs: a pure table from (operation, phase, what the VNF
//! is) to an action, so the whole mapping is in one place and unit-tested. What each action
//! does is docs/hook-protocol.md's table.

use serde_json::{Map, Value};

/// The cluster hooks under the name this table gives them beside the CNF actions.
use crate::cluster::op::Op as ClusterOp;
use crate::cluster::params::PARAM_KEY;
use crate::vnfm::document::{Lcm, Phase};

/// What the VNF is to us.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A VNF whose VMs become a Kubernetes cluster (`k8s_cluster_installation_param`).
    Cluster,
    /// A Helm CNF on a recorded cluster (`using_helm_install_param`).
    Cnf,
}

/// The CNF params' key.
pub const CNF_KEY: &str = "using_helm_install_param";

/// The request's params say what the VNF is; later hooks (whose requests carry no params)
/// go by what an earlier hook recorded.
pub fn kind(additional_params: &Map<String, Value>, cluster_recorded: bool, cnf_recorded: bool) -> Option<Kind> {
    if additional_params.contains_key(PARAM_KEY) || cluster_recorded {
        Some(Kind::Cluster)
    } else if additional_params.contains_key(CNF_KEY) || cnf_recorded {
        Some(Kind::Cnf)
    } else {
        None
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Check the params and the package; nothing connects (the VMs may not exist yet).
    Check,
    Cluster(ClusterOp),
    /// An instantiate is rolled back: forget the cluster (the VNFM deletes the VMs next).
    ClusterForget,
    /// A scale-out is rolled back: take the workers it joined out of the cluster again.
    ClusterUnjoin,
    CnfInstantiate,
    CnfScale,
    CnfHeal,
    CnfTerminate,
    /// Nothing to do; the reason goes into the warnings.
    Nothing(&'static str),
}

pub fn action(lcm: Lcm, phase: Phase, kind: Kind) -> Action {
    use Action::*;
    use Phase::*;
    match (kind, lcm, phase) {
        (_, Lcm::Instantiate, Start) => Check,
        (Kind::Cluster, Lcm::Instantiate, End) => Cluster(ClusterOp::InstantiateEnd),
        (Kind::Cluster, Lcm::Instantiate, RollbackStart) => ClusterForget,
        (Kind::Cluster, Lcm::Scale, Start) => Cluster(ClusterOp::ScaleStart),
        (Kind::Cluster, Lcm::Scale, End) => Cluster(ClusterOp::ScaleEnd),
        (Kind::Cluster, Lcm::Scale, RollbackStart) => ClusterUnjoin,
        (Kind::Cluster, Lcm::Heal, Start) => Cluster(ClusterOp::HealStart),
        (Kind::Cluster, Lcm::Heal, End) => Cluster(ClusterOp::HealEnd),
        (Kind::Cluster, Lcm::Terminate, End) => Cluster(ClusterOp::TerminateEnd),
        (Kind::Cnf, Lcm::Instantiate, End) => CnfInstantiate,
        (Kind::Cnf, Lcm::Instantiate, RollbackStart) => CnfTerminate,
        (Kind::Cnf, Lcm::Scale, End) => CnfScale,
        (Kind::Cnf, Lcm::Heal, End) => CnfHeal,
        (Kind::Cnf, Lcm::Terminate, End) => CnfTerminate,
        (_, Lcm::ModifyInformation | Lcm::ChangeExternalConnectivity | Lcm::ChangeCurrentPackage, _) => {
            Nothing("mgmt-driver has nothing to do for this operation")
        }
        _ => Nothing("mgmt-driver has nothing to do at this point of the operation"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_params_or_the_records_say_what_the_vnf_is() {
        let cluster = json!({PARAM_KEY: {}});
        let cnf = json!({CNF_KEY: []});
        assert_eq!(kind(cluster.as_object().unwrap(), false, false), Some(Kind::Cluster));
        assert_eq!(kind(cnf.as_object().unwrap(), false, false), Some(Kind::Cnf));
        assert_eq!(kind(&Map::new(), true, false), Some(Kind::Cluster));
        assert_eq!(kind(&Map::new(), false, true), Some(Kind::Cnf));
        assert_eq!(kind(&Map::new(), false, false), None);
    }

    #[test]
    fn each_hook_maps_to_one_action() {
        use Action::*;
        let c = |l, p| action(l, p, Kind::Cluster);
        let n = |l, p| action(l, p, Kind::Cnf);
        assert_eq!(c(Lcm::Instantiate, Phase::Start), Check);
        assert_eq!(c(Lcm::Instantiate, Phase::End), Cluster(ClusterOp::InstantiateEnd));
        assert_eq!(c(Lcm::Instantiate, Phase::RollbackStart), ClusterForget);
        assert_eq!(c(Lcm::Scale, Phase::Start), Cluster(ClusterOp::ScaleStart));
        assert_eq!(c(Lcm::Scale, Phase::RollbackStart), ClusterUnjoin);
        assert_eq!(c(Lcm::Heal, Phase::End), Cluster(ClusterOp::HealEnd));
        assert_eq!(c(Lcm::Terminate, Phase::End), Cluster(ClusterOp::TerminateEnd));
        assert!(matches!(c(Lcm::Terminate, Phase::Start), Nothing(_)));
        assert!(matches!(c(Lcm::ModifyInformation, Phase::End), Nothing(_)));
        assert_eq!(n(Lcm::Instantiate, Phase::End), CnfInstantiate);
        assert_eq!(n(Lcm::Scale, Phase::End), CnfScale);
        assert!(matches!(n(Lcm::Scale, Phase::Start), Nothing(_)));
        assert_eq!(n(Lcm::Terminate, Phase::End), CnfTerminate);
    }
}
