//! The cluster hooks ([`Op`]) and the request each one reads ([`Req`]): what `prepare` checks,
//! what `run` dispatches on, and what the VNFM hook's dispatch and the rebuilt-VM decision
//! (`rebuilt.rs`) branch on. Pure: names and parsed documents only.

use serde_json::{Map, Value};

use crate::request::{HealRequest, InstantiateRequest, ScaleRequest, TerminateRequest};

/// A cluster hook, as Tacker's sample Kubernetes MgmtDriver has them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    InstantiateEnd,
    HealStart,
    HealEnd,
    ScaleStart,
    ScaleEnd,
    TerminateEnd,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::InstantiateEnd => "instantiate_end",
            Op::HealStart => "heal_start",
            Op::HealEnd => "heal_end",
            Op::ScaleStart => "scale_start",
            Op::ScaleEnd => "scale_end",
            Op::TerminateEnd => "terminate_end",
        }
    }
}

/// Parsed request of any operation.
pub enum Req {
    Instantiate(InstantiateRequest),
    Heal(HealRequest),
    Scale(ScaleRequest),
    Terminate(TerminateRequest),
}

impl Req {
    pub fn additional_params(&self) -> &Map<String, Value> {
        match self {
            Req::Instantiate(r) => &r.additional_params,
            Req::Heal(r) => &r.additional_params,
            Req::Scale(r) => &r.additional_params,
            Req::Terminate(r) => &r.additional_params,
        }
    }
}
