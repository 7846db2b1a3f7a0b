//! `helm get manifest`: every YAML document of a release → the resources it made
//! (apiVersion, kind, name, namespace), recorded in state and in the result.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub namespace: String,
}

pub fn parse(text: &str, default_ns: &str) -> Result<Vec<Resource>, String> {
    let mut out = Vec::new();
    for (i, doc) in yaml_serde::Deserializer::from_str(text).enumerate() {
        let v = Value::deserialize(doc).map_err(|e| format!("document {}: {e}", i + 1))?;
        if v.is_null() {
            continue;
        }
        let s = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
        let (api_version, kind, name) = (s("/apiVersion"), s("/kind"), s("/metadata/name"));
        if kind.is_empty() || name.is_empty() {
            return Err(format!("document {}: no kind or metadata.name", i + 1));
        }
        // Names read back from the master are recorded and shown: only Kubernetes' own words.
        let word = |x: &str, extra: &[u8]| {
            x.len() <= 253
                && x.starts_with(|c: char| c.is_ascii_alphanumeric())
                && x.bytes().all(|c| c.is_ascii_alphanumeric() || b"-.".contains(&c) || extra.contains(&c))
        };
        let ns = s("/metadata/namespace");
        if !word(&api_version, b"/") || !word(&kind, b"") || !word(&name, b":_") || !(ns.is_empty() || word(&ns, b"")) {
            return Err(format!("document {}: a kind, name or namespace that is not a Kubernetes name", i + 1));
        }
        out.push(Resource {
            api_version,
            kind,
            name,
            namespace: if ns.is_empty() { default_ns.to_string() } else { ns },
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_document_becomes_a_resource() {
        let m = "---\n# Source: localhelm/templates/service.yaml\napiVersion: v1\nkind: Service\nmetadata:\n  name: vdu1-localhelm\n\
---\n# Source: localhelm/templates/deployment.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: vdu1-localhelm\n  namespace: cnf\nspec:\n  replicas: 2\n---\n";
        let r = parse(m, "default").unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(
            r[0],
            Resource {
                api_version: "v1".into(),
                kind: "Service".into(),
                name: "vdu1-localhelm".into(),
                namespace: "default".into()
            }
        );
        assert_eq!(r[1].namespace, "cnf");
        assert!(parse("kind: [", "d").is_err());
        for bad in [
            "kind: Pod\nmetadata: {name: '-x'}",
            "kind: 'a b'\nmetadata: {name: x}",
            "kind: Pod\nmetadata: {name: x, namespace: '$(id)'}",
        ] {
            assert!(parse(&format!("apiVersion: v1\n{bad}"), "d").is_err(), "{bad}");
        }
    }

    #[test]
    fn tackers_sample_manifest_parses() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/tacker/v1/cnf-helm/helm_get_manifest_output.yaml"
        ))
        .unwrap();
        let r = parse(&text, "default").unwrap();
        assert!(r.iter().any(|x| x.kind == "Deployment"), "{r:?}");
    }
}
