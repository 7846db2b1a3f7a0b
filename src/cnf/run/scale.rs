//! `cnf scale`: scale an aspect by `helm upgrade --reuse-values --set <helm_replica_values
//! path>=<n>`. Its checks (the request; the VNFD's scaling data from the package; without a VNFD
//! bound, the VNF instance's own scale levels) and its steps (read the replicas, bound the
//! target, upgrade, record) side by side.

use serde_json::{json, Value};

use crate::cnf::helm_cmd as hc;
use crate::cnf::ops::{chart_ref, cmd_timeout, made_release, Ctx, Record, ReleaseState};
use crate::cnf::params::{aspect_release, aspect_vdu, ChartSource, CnfParams};
use crate::cnf::Inputs;
use crate::error::{Error, Result};
use crate::facts::helm::ReplicaCount;
use crate::lifecycle::package::Package;
use crate::redact::Redact;
use crate::request::{ScaleRequest, ScaleType, VnfInstance};

/// The scale request, and the VNF instance when one is given (`--vnf-instance`: its scale
/// levels bound an aspect the VNFD does not).
pub fn read_request(a: &Inputs) -> Result<(ScaleRequest, Option<VnfInstance>)> {
    let r: ScaleRequest = a.need_request("scale")?.load()?;
    let inst = a.vnf_instance.as_ref().map(|d| d.load::<VnfInstance>()).transpose()?;
    Ok((r, inst))
}

/// With the package, the aspects, deltas and VDU bounds of its VNFD (of the flavour the CNF was
/// instantiated with) go into `params`; then, unless the VNFD bounds the aspect, the VNF
/// instance's scale levels must allow the steps. Bad input names the request's field.
pub fn check(
    params: &mut CnfParams,
    r: &ScaleRequest,
    inst: Option<&VnfInstance>,
    pkg: Option<&Package>,
    flavour: Option<&str>,
    req_file: &str,
) -> Result<()> {
    if let Some(pkg) = pkg {
        params.scaling = crate::cnf::vnfd_read::read_scaling(pkg, flavour)?;
    }
    if let Some(inst) = inst {
        let aspect = &r.aspect_id;
        let vnfd_bound = params.scaling.aspects.get(aspect).is_some_and(|x| x.max_scale_level.is_some());
        if !vnfd_bound {
            let steps = r.number_of_steps as i64 * if r.kind == ScaleType::Out { 1 } else { -1 };
            instance_level_bound(inst, aspect, steps).map_err(|m| {
                Error::input(
                    req_file,
                    "numberOfSteps",
                    format!("The number of target replicas after scaling is out of range: {m}"),
                )
            })?;
        }
    }
    Ok(())
}

/// Scale the aspect by the request's steps (out: up, in: down) and record the release.
pub async fn run(c: &Ctx<'_>, r: &ScaleRequest, rec: &mut Record<'_>) -> Result<Value> {
    let steps = r.number_of_steps as i64;
    let delta = if r.kind == ScaleType::Out { steps } else { -steps };
    let (from, to, rs) = scale(c, &r.aspect_id, delta).await?;
    if let Some(rel) = aspect_release(c.params, &r.aspect_id) {
        rec.release(&rel.name, &rs)?;
    }
    Ok(json!({"aspectId": r.aspect_id, "from": from, "to": to, "release": rs}))
}

/// Scale: current replicas from `helm get values --all` at the aspect's path, target = current
/// ± steps, bounded by the VDU's min/max, then `helm upgrade --reuse-values --set path=n`.
async fn scale(c: &Ctx<'_>, aspect: &str, delta: i64) -> Result<(u64, u64, ReleaseState)> {
    let p = c.params;
    let path = p.replica_values.get(aspect).ok_or_else(|| {
        Error::input(c.req_file, "aspectId", format!("Replica value for aspectId '{aspect}' is missing"))
    })?;
    let (vdu, r) = aspect_vdu(p, aspect).ok_or_else(|| {
        Error::input(
            c.req_file,
            "aspectId",
            format!(
                "no release scales aspect '{aspect}' (the VNFD's VduScalingAspectDeltas name no VDU of vdu_mapping; \
                 pass --package-dir, or add aspect_id to a vdu_mapping entry)"
            ),
        )
    })?;
    let s = c.s;
    let m = s.master();
    let count = ReplicaCount { helm: &s.helm, release: &r.name, namespace: &p.namespace, path };
    let current = s.rt.read(m, &count).await?;
    let target =
        scale_target(p, aspect, vdu, current, delta).map_err(|m| Error::input(c.req_file, "numberOfSteps", m))?;
    let chart = chart_ref(c.instance, r);
    let set = [format!("{path}={target}")];
    // The release's own chart version: without it Helm takes the repository's newest, and a
    // scale would upgrade the chart.
    let version = match &r.source {
        ChartSource::Local { .. } => None,
        _ => r.version.as_deref(),
    };
    let cmd = s.helm.upgrade_json(
        &hc::Chart { release: &r.name, chart: &chart, namespace: &p.namespace, version },
        &hc::Values { set: &set, ..hc::Values::default() },
        true,
        &c.opts,
    )?;
    // `-o json`: the release comes back from the upgrade itself (values inside: not streamed).
    let shown = cmd.clone();
    let out = s.run_watched(cmd, cmd_timeout(c), &r.name, &p.namespace, Redact::All).await?;
    Ok((current, target as u64, made_release(c, r, &chart, &shown, &out)?))
}

/// Without a VNFD bound for the aspect, the VNF instance's own: `instantiatedVnfInfo.scaleStatus`
/// (the aspect's level now) and `maxScaleLevels` (its highest), as SOL003 carries them. A scale
/// that leaves 0..=max is refused naming the aspect and the bound; an instance without them
/// bounds nothing.
pub fn instance_level_bound(inst: &VnfInstance, aspect: &str, steps: i64) -> std::result::Result<(), String> {
    let Some(info) = inst.instantiated_vnf_info.as_ref() else { return Ok(()) };
    let level_in = |key: &str| {
        info.rest.get(key)?.as_array()?.iter().find(|s| s["aspectId"] == aspect)?.get("scaleLevel")?.as_i64()
    };
    let (Some(now), Some(max)) = (level_in("scaleStatus"), level_in("maxScaleLevels")) else { return Ok(()) };
    let to = now + steps;
    if !(0..=max).contains(&to) {
        return Err(format!(
            "aspect '{aspect}' would go from scale level {now} to {to}, outside 0 to {max} \
             (the VNF instance's scaleStatus and maxScaleLevels)"
        ));
    }
    Ok(())
}

/// Where a scale of `steps` (negative: in) from `current` replicas lands, within what bounds:
/// `vdu_mapping`'s min/max (our extension) over the VNFD's vdu_profile; each step's size from
/// the aspect's deltas for the VDU (1 without a VNFD); the VNFD's `max_scale_level` bounds the
/// level above the VDU's initial delta. An out-of-bounds target is bad input (exit 2) naming
/// the aspect and the bound, with Tacker's words first.
pub fn scale_target(
    p: &CnfParams,
    aspect: &str,
    vdu: Option<&str>,
    current: u64,
    steps: i64,
) -> std::result::Result<u64, String> {
    let a = p.scaling.aspects.get(aspect);
    let prof = vdu.and_then(|v| p.scaling.vdus.get(v));
    let ext = vdu.and_then(|v| p.vdu_mapping.get(v));
    let step = |level: u32| vdu.and_then(|v| a?.step_delta(v, level)).unwrap_or(1) as i64;
    let initial = prof.and_then(|x| x.initial).map(i64::from);
    // The aspect's level now: the steps from the initial delta to `current` (0 when unknown).
    let mut level = 0u32;
    if let Some(init) = initial {
        let mut n = init;
        while n < current as i64 && level < 10_000 {
            n += step(level).max(1);
            level += 1;
        }
    }
    let mut target = current as i64;
    for _ in 0..steps.unsigned_abs().min(100_000) {
        if steps > 0 {
            target += step(level);
            level += 1;
        } else {
            level = level.saturating_sub(1);
            target -= step(level);
        }
    }
    let out = |why: String| format!("The number of target replicas after scaling [{target}] is out of range: {why}");
    let vdu_name = vdu.map(|v| format!(" ({v})")).unwrap_or_default();
    let min = ext.and_then(|v| v.min).or(prof.and_then(|x| x.min)).map(i64::from).unwrap_or(0);
    let max = ext.and_then(|v| v.max).or(prof.and_then(|x| x.max)).map(i64::from).unwrap_or(i32::MAX.into());
    if target < min || target > max {
        let from = if ext.is_some_and(|v| v.min.is_some() || v.max.is_some()) { "vdu_mapping" } else { "vdu_profile" };
        return Err(out(format!("aspect '{aspect}'{vdu_name} allows {min} to {max} instances ({from})")));
    }
    if let (Some(max_level), Some(init), Some(_)) = (a.and_then(|a| a.max_scale_level), initial, vdu) {
        let top = (0..max_level).fold(init, |n, l| n + step(l));
        if target > top {
            return Err(out(format!(
                "aspect '{aspect}'{vdu_name} is at most max_scale_level {max_level} ({top} instances)"
            )));
        }
    }
    Ok(target as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Tacker's two-release body (no extension keys) and a VNFD of its shape.
    fn tacker_two_releases() -> CnfParams {
        let ap = json!({"use_helm": "true", "namespace": "default", "using_helm_install_param": [
            {"exthelmchart": "false", "helmreleasename": "vdu1", "helmchartfile_path": "Files/kubernetes/localhelm-0.1.0.tgz"},
            {"exthelmchart": "true", "helmreleasename": "vdu2", "helmrepositoryname": "bitnami", "helmchartname": "apache",
             "exthelmrepo_url": "https://charts.bitnami.com/bitnami"}],
            "helm_replica_values": {"vdu1_aspect": "replicaCount", "vdu2_aspect": "replicaCount"},
            "vdu_mapping": {"VDU1": {"kind": "Deployment", "name": "vdu1-localhelm", "helmreleasename": "vdu1"},
                            "VDU2": {"kind": "Deployment", "name": "vdu2-apache", "helmreleasename": "vdu2"}}});
        let mut p = CnfParams::from_additional_params(ap.as_object().unwrap(), "req.json").unwrap();
        let vnfd = r#"
topology_template:
  node_templates:
    VDU1: {type: tosca.nodes.nfv.Vdu.Compute, properties: {vdu_profile: {min_number_of_instances: 1, max_number_of_instances: 3}}}
    VDU2: {type: tosca.nodes.nfv.Vdu.Compute, properties: {vdu_profile: {min_number_of_instances: 1, max_number_of_instances: 5}}}
  policies:
    - a: {type: tosca.policies.nfv.ScalingAspects, properties: {aspects: {
          vdu1_aspect: {max_scale_level: 2, step_deltas: [delta_1]}, vdu2_aspect: {max_scale_level: 2, step_deltas: [delta_1]}}}}
    - b: {type: tosca.policies.nfv.VduScalingAspectDeltas, properties: {aspect: vdu1_aspect, deltas: {delta_1: {number_of_instances: 1}}}, targets: [VDU1]}
    - c: {type: tosca.policies.nfv.VduScalingAspectDeltas, properties: {aspect: vdu2_aspect, deltas: {delta_1: {number_of_instances: 2}}}, targets: [VDU2]}
    - d: {type: tosca.policies.nfv.VduInitialDelta, properties: {initial_delta: {number_of_instances: 1}}, targets: [VDU1]}
    - e: {type: tosca.policies.nfv.VduInitialDelta, properties: {initial_delta: {number_of_instances: 1}}, targets: [VDU2]}
"#;
        let read = |f: &str| (f == "d.yaml").then(|| vnfd.to_string());
        p.scaling = crate::cnf::vnfd::scaling(&crate::cnf::vnfd::load("d.yaml", &read).unwrap(), None);
        p
    }

    #[test]
    fn an_unmodified_tacker_body_scales_by_the_vnfd() {
        let p = tacker_two_releases();
        let (vdu, r) = aspect_vdu(&p, "vdu2_aspect").unwrap();
        assert_eq!((vdu, r.name.as_str()), (Some("VDU2"), "vdu2"));
        assert_eq!(aspect_vdu(&p, "vdu1_aspect").unwrap().1.name, "vdu1");
        assert!(aspect_vdu(&p, "nope").is_none(), "two releases and no mapping: no guess");
        // VDU1: +1 per step, 1..3; VDU2: +2 per step, max_scale_level 2 → at most 5.
        assert_eq!(scale_target(&p, "vdu1_aspect", Some("VDU1"), 1, 2), Ok(3));
        assert_eq!(scale_target(&p, "vdu2_aspect", Some("VDU2"), 1, 1), Ok(3));
        assert_eq!(scale_target(&p, "vdu2_aspect", Some("VDU2"), 3, -1), Ok(1));
        let e = scale_target(&p, "vdu1_aspect", Some("VDU1"), 3, 1).unwrap_err();
        assert!(e.starts_with("The number of target replicas after scaling [4] is out of range"), "{e}");
        assert!(e.contains("aspect 'vdu1_aspect' (VDU1) allows 1 to 3 instances (vdu_profile)"), "{e}");
        let e = scale_target(&p, "vdu1_aspect", Some("VDU1"), 1, -1).unwrap_err();
        assert!(e.contains("[0]") && e.contains("allows 1 to 3"), "{e}");
    }

    #[test]
    fn max_scale_level_bounds_below_the_profile_and_extension_keys_override() {
        let mut p = tacker_two_releases();
        p.scaling.vdus.get_mut("VDU2").unwrap().max = Some(99);
        let e = scale_target(&p, "vdu2_aspect", Some("VDU2"), 5, 1).unwrap_err();
        assert!(e.contains("aspect 'vdu2_aspect' (VDU2) is at most max_scale_level 2 (5 instances)"), "{e}");
        // vdu_mapping's own bounds win over the VNFD's.
        p.vdu_mapping.get_mut("VDU1").unwrap().max = Some(2);
        let e = scale_target(&p, "vdu1_aspect", Some("VDU1"), 2, 1).unwrap_err();
        assert!(e.contains("allows 1 to 2 instances (vdu_mapping)"), "{e}");
        // No VNFD: steps of one, no bound but int32.
        let mut bare = tacker_two_releases();
        bare.scaling = Default::default();
        assert_eq!(scale_target(&bare, "vdu1_aspect", None, 4, 3), Ok(7));
    }

    #[test]
    fn without_a_vnfd_the_instances_scale_levels_bound_the_aspect() {
        let inst: crate::request::VnfInstance = crate::request::parse(
            r#"{"id": "i", "instantiatedVnfInfo": {"flavourId": "s",
                "scaleStatus": [{"aspectId": "vdu1_aspect", "scaleLevel": 1}],
                "maxScaleLevels": [{"aspectId": "vdu1_aspect", "scaleLevel": 2}]}}"#,
            "inst.json",
        )
        .unwrap();
        assert!(instance_level_bound(&inst, "vdu1_aspect", 1).is_ok());
        assert!(instance_level_bound(&inst, "vdu1_aspect", -1).is_ok());
        let e = instance_level_bound(&inst, "vdu1_aspect", 2).unwrap_err();
        assert!(e.contains("aspect 'vdu1_aspect' would go from scale level 1 to 3, outside 0 to 2"), "{e}");
        assert!(instance_level_bound(&inst, "vdu1_aspect", -2).is_err());
        assert!(instance_level_bound(&inst, "other_aspect", 9).is_ok(), "no levels for it: no bound");
    }
}
