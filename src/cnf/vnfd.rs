//! What a CNF scale needs from the VNFD in the package, as Tacker reads it: each scaling aspect
//! (`tosca.policies.nfv.ScalingAspects`: `max_scale_level`, `step_deltas`), the VDUs it scales
//! and by how many instances per delta (`tosca.policies.nfv.VduScalingAspectDeltas`: `aspect`,
//! `deltas`, `targets`), each VDU's starting count (`tosca.policies.nfv.VduInitialDelta`) and
//! bounds (`vdu_profile` min/max_number_of_instances). With this, an unmodified Tacker body
//! (whose `vdu_mapping` only names each VDU's release) scales; `vdu_mapping`'s `aspect_id` and
//! min/max keys stay as overrides.
//!
//! The definitions are found as Tacker finds them: `TOSCA-Metadata/TOSCA.meta`'s
//! `Entry-Definitions`, and every file it imports, recursively (imports that are URLs or not in
//! the package, such as ETSI's type files left out of a package, are skipped: types hold no
//! policies). Everything here is pure: the caller reads the files (inside the package only).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// One scaling aspect of one flavour.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Aspect {
    pub max_scale_level: Option<u32>,
    /// The delta names of each step, in order (the last one repeats for higher levels).
    pub step_deltas: Vec<String>,
    /// VDU → (delta name → number_of_instances).
    pub vdu_deltas: BTreeMap<String, BTreeMap<String, u32>>,
}

/// A VDU's `vdu_profile` and initial delta.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Vdu {
    pub min: Option<u32>,
    pub max: Option<u32>,
    pub initial: Option<u32>,
}

/// The scaling data of a VNFD (one flavour's, when a flavour is given).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scaling {
    pub aspects: BTreeMap<String, Aspect>,
    pub vdus: BTreeMap<String, Vdu>,
}

impl Aspect {
    /// Instances of `vdu` added by the step that takes the aspect from `level` to `level + 1`.
    pub fn step_delta(&self, vdu: &str, level: u32) -> Option<u32> {
        let name = self.step_deltas.get(level as usize).or_else(|| self.step_deltas.last())?;
        self.vdu_deltas.get(vdu)?.get(name).copied()
    }

    /// The VDUs this aspect scales.
    pub fn vdus(&self) -> impl Iterator<Item = &String> {
        self.vdu_deltas.keys()
    }
}

/// `Entry-Definitions` of a TOSCA.meta file.
pub fn entry_definitions(meta: &str) -> Option<String> {
    meta.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "Entry-Definitions").then(|| v.trim().to_string()).filter(|v| !v.is_empty())
    })
}

/// `dir/rel` as a package path (`..` resolved against `dir`), or None when it leaves the package.
fn join(dir: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<&str> = if dir.is_empty() { vec![] } else { dir.split('/').collect() };
    for c in rel.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    Some(parts.join("/"))
}

/// Every definitions document reachable from `entry` (a package path): `read` gives a file's
/// text, or None when it is not in the package. Each document once, entry first.
pub fn load(entry: &str, read: &dyn Fn(&str) -> Option<String>) -> Result<Vec<(String, Value)>, String> {
    let mut out: Vec<(String, Value)> = Vec::new();
    let mut todo = vec![entry.to_string()];
    while let Some(path) = todo.pop() {
        if out.iter().any(|(p, _)| *p == path) || out.len() > 64 {
            continue;
        }
        let Some(text) = read(&path) else {
            if path == entry {
                return Err(format!("{path}: not in the package"));
            }
            continue;
        };
        let v = Value::deserialize(yaml_serde::Deserializer::from_str(&text)).map_err(|e| format!("{path}: {e}"))?;
        let dir = path.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
        if let Some(imports) = v.get("imports").and_then(Value::as_array) {
            for i in imports {
                // `- file.yaml`, or `- {file: file.yaml}` (TOSCA's long form).
                let f = i.as_str().or_else(|| i.get("file").and_then(Value::as_str));
                if let Some(f) = f.filter(|f| !f.contains("://")) {
                    if let Some(p) = join(dir, f) {
                        todo.push(p);
                    }
                }
            }
        }
        out.push((path, v));
    }
    Ok(out)
}

/// A whole number of instances or levels, as a VNFD writes it.
fn count(v: Option<&Value>) -> Option<u32> {
    match v? {
        Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// What the vendor's VNFD says to mgmt-driver itself: `inputs.mgmt_driver` of a node
/// template's `Vnflcm` interface (interface-level inputs, shared by every hook it maps), of the
/// documents of `flavour` when one declares it, else of all. Tacker reads only the operations'
/// `implementation` there, so the key is ours. The first found; none when no VNFD has one.
pub fn hook_settings(docs: &[(String, Value)], flavour: Option<&str>) -> Option<(String, Value)> {
    let of_flavour: Vec<&(String, Value)> =
        docs.iter().filter(|(_, d)| flavour.is_some() && flavour_of(d) == flavour).collect();
    let chosen: Vec<&(String, Value)> = if of_flavour.is_empty() { docs.iter().collect() } else { of_flavour };
    chosen.into_iter().find_map(|(file, d)| {
        let nodes = d.pointer("/topology_template/node_templates")?.as_object()?;
        nodes.values().find_map(|n| {
            let v = n.pointer("/interfaces/Vnflcm/inputs/mgmt_driver")?;
            Some((file.clone(), v.clone()))
        })
    })
}

/// The flavour a definitions document describes (`substitution_mappings.properties.flavour_id`).
fn flavour_of(doc: &Value) -> Option<&str> {
    doc.pointer("/topology_template/substitution_mappings/properties/flavour_id")?.as_str()
}

/// The scaling data of `docs`: of the documents of `flavour` when one declares it, else of all.
pub fn scaling(docs: &[(String, Value)], flavour: Option<&str>) -> Scaling {
    let of_flavour: Vec<&Value> =
        docs.iter().map(|(_, d)| d).filter(|d| flavour.is_some() && flavour_of(d) == flavour).collect();
    let chosen: Vec<&Value> = if of_flavour.is_empty() { docs.iter().map(|(_, d)| d).collect() } else { of_flavour };
    let mut s = Scaling::default();
    for d in &chosen {
        let Some(tt) = d.get("topology_template") else { continue };
        if let Some(nodes) = tt.get("node_templates").and_then(Value::as_object) {
            for (name, n) in nodes {
                if n.get("type").and_then(Value::as_str) != Some("tosca.nodes.nfv.Vdu.Compute") {
                    continue;
                }
                let p = n.pointer("/properties/vdu_profile");
                let vdu = s.vdus.entry(name.clone()).or_default();
                vdu.min = count(p.and_then(|p| p.get("min_number_of_instances")));
                vdu.max = count(p.and_then(|p| p.get("max_number_of_instances")));
            }
        }
        // policies: a list of one-key maps (SOL001), or a map.
        let policies: Vec<&Value> = match tt.get("policies") {
            Some(Value::Array(a)) => {
                a.iter().flat_map(|m| m.as_object().into_iter().flat_map(|o| o.values())).collect()
            }
            Some(Value::Object(o)) => o.values().collect(),
            _ => vec![],
        };
        for p in &policies {
            let props = p.get("properties");
            let targets: Vec<String> = p
                .get("targets")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|t| t.as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            match p.get("type").and_then(Value::as_str) {
                Some("tosca.policies.nfv.ScalingAspects") => {
                    let Some(aspects) = props.and_then(|x| x.get("aspects")).and_then(Value::as_object) else {
                        continue;
                    };
                    for (id, a) in aspects {
                        let e = s.aspects.entry(id.clone()).or_default();
                        e.max_scale_level = count(a.get("max_scale_level"));
                        e.step_deltas = a
                            .get("step_deltas")
                            .and_then(Value::as_array)
                            .map(|x| x.iter().filter_map(|d| d.as_str().map(str::to_string)).collect())
                            .unwrap_or_default();
                    }
                }
                Some("tosca.policies.nfv.VduScalingAspectDeltas") => {
                    let Some(aspect) = props.and_then(|x| x.get("aspect")).and_then(Value::as_str) else { continue };
                    let deltas: BTreeMap<String, u32> = props
                        .and_then(|x| x.get("deltas"))
                        .and_then(Value::as_object)
                        .map(|m| {
                            m.iter()
                                .filter_map(|(k, v)| Some((k.clone(), count(v.get("number_of_instances"))?)))
                                .collect()
                        })
                        .unwrap_or_default();
                    let e = s.aspects.entry(aspect.to_string()).or_default();
                    for t in &targets {
                        e.vdu_deltas.insert(t.clone(), deltas.clone());
                    }
                }
                Some("tosca.policies.nfv.VduInitialDelta") => {
                    let n = count(props.and_then(|x| x.pointer("/initial_delta/number_of_instances")));
                    for t in &targets {
                        s.vdus.entry(t.clone()).or_default().initial = n;
                    }
                }
                _ => {}
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A two-VDU Helm CNF flavour shaped like Tacker's samples (written here, not copied).
    const DF: &str = r#"
tosca_definitions_version: tosca_simple_yaml_1_2
imports: [etsi_nfv_sol001_common_types.yaml, ../Definitions/types.yaml]
topology_template:
  substitution_mappings:
    node_type: x.VNF
    properties: {flavour_id: helmchart}
  node_templates:
    VDU1:
      type: tosca.nodes.nfv.Vdu.Compute
      properties: {name: VDU1, vdu_profile: {min_number_of_instances: 1, max_number_of_instances: 3}}
    VDU2:
      type: tosca.nodes.nfv.Vdu.Compute
      properties: {name: VDU2, vdu_profile: {min_number_of_instances: 2, max_number_of_instances: "5"}}
  policies:
    - scaling_aspects:
        type: tosca.policies.nfv.ScalingAspects
        properties:
          aspects:
            vdu1_aspect: {name: vdu1_aspect, max_scale_level: 2, step_deltas: [delta_1]}
            vdu2_aspect: {name: vdu2_aspect, max_scale_level: 3, step_deltas: [delta_a, delta_b]}
    - d1:
        type: tosca.policies.nfv.VduScalingAspectDeltas
        properties: {aspect: vdu1_aspect, deltas: {delta_1: {number_of_instances: 1}}}
        targets: [VDU1]
    - d2:
        type: tosca.policies.nfv.VduScalingAspectDeltas
        properties: {aspect: vdu2_aspect, deltas: {delta_a: {number_of_instances: 1}, delta_b: {number_of_instances: 2}}}
        targets: [VDU2]
    - i1:
        type: tosca.policies.nfv.VduInitialDelta
        properties: {initial_delta: {number_of_instances: 1}}
        targets: [VDU1]
"#;

    const OTHER_DF: &str = r#"
topology_template:
  substitution_mappings: {properties: {flavour_id: simple}}
  node_templates:
    VDU1: {type: tosca.nodes.nfv.Vdu.Compute, properties: {vdu_profile: {min_number_of_instances: 7, max_number_of_instances: 9}}}
"#;

    fn files(path: &str) -> Option<String> {
        match path {
            "TOSCA-Metadata/TOSCA.meta" => {
                Some("TOSCA-Meta-File-Version: 1.0\nEntry-Definitions: Definitions/top.yaml\n".into())
            }
            "Definitions/top.yaml" => {
                Some("imports:\n  - df_helm.yaml\n  - file: df_simple.yaml\n  - https://example.com/x.yaml\n".into())
            }
            "Definitions/df_helm.yaml" => Some(DF.into()),
            "Definitions/df_simple.yaml" => Some(OTHER_DF.into()),
            "Definitions/types.yaml" => Some("node_types: {}\n".into()),
            _ => None,
        }
    }

    #[test]
    fn the_entry_and_its_imports_are_read_once_each() {
        let entry = entry_definitions(&files("TOSCA-Metadata/TOSCA.meta").unwrap()).unwrap();
        assert_eq!(entry, "Definitions/top.yaml");
        let docs = load(&entry, &files).unwrap();
        let mut names: Vec<&str> = docs.iter().map(|(p, _)| p.as_str()).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "Definitions/df_helm.yaml",
                "Definitions/df_simple.yaml",
                "Definitions/top.yaml",
                "Definitions/types.yaml"
            ]
        );
        assert!(load("Definitions/none.yaml", &files).is_err());
        assert_eq!(join("Definitions", "../../etc/passwd"), None);
    }

    #[test]
    fn aspects_deltas_and_profiles_of_the_flavour() {
        let docs = load("Definitions/top.yaml", &files).unwrap();
        let s = scaling(&docs, Some("helmchart"));
        let a1 = &s.aspects["vdu1_aspect"];
        assert_eq!(a1.max_scale_level, Some(2));
        assert_eq!(a1.vdus().collect::<Vec<_>>(), ["VDU1"]);
        assert_eq!((a1.step_delta("VDU1", 0), a1.step_delta("VDU1", 5)), (Some(1), Some(1)));
        let a2 = &s.aspects["vdu2_aspect"];
        assert_eq!(
            (a2.step_delta("VDU2", 0), a2.step_delta("VDU2", 1), a2.step_delta("VDU2", 2)),
            (Some(1), Some(2), Some(2))
        );
        assert_eq!(s.vdus["VDU1"], Vdu { min: Some(1), max: Some(3), initial: Some(1) });
        assert_eq!(s.vdus["VDU2"], Vdu { min: Some(2), max: Some(5), initial: None });
        // Another flavour's VDU1 bounds are not this flavour's.
        assert_eq!(scaling(&docs, Some("simple")).vdus["VDU1"].max, Some(9));
    }
}
