//! `sites export k8s-job` against the Kubernetes API's own schemas: sites rendered from a real
//! catalogue and templates, exported, and checked by `kubernetes-validate` (PyPI, pinned and
//! hashed; its schemas are shipped in the package, so no API server is needed) in strict mode
//! (unknown fields refused) for the oldest and newest Kubernetes versions we claim. A manifest
//! with one wrong field must fail the same check, so the check can fail. Needs python3 and the
//! network the first time (scripts/k8s-validate-venv.sh); not root.

use crate::support;

use std::process::Command;

use mgmt_driver::sites::catalogue::Catalogue;
use mgmt_driver::sites::export::{k8s_job, read_site_files, ConfigSource, JobOptions};
use mgmt_driver::sites::render::render_all;
use support::harness::Suite;
use support::k8s_validate::{validate, validator, VERSIONS};

// The Kubernetes versions the manifest must be valid for (support::k8s_validate::VERSIONS):
// `backoffLimitPerIndex` and `podFailurePolicy` are GA from 1.31 (Job API fields we use), and
// the newest shipped schema.

fn options() -> JobOptions {
    JobOptions {
        name: "edge-rollout".into(),
        namespace: Some("fleet".into()),
        op: vec!["run-script".into(), "check.sh".into(), "--fast".into()],
        image: "registry.example/mgmt-driver:0.11".into(),
        parallelism: 2,
        backoff_limit_per_index: 3,
        max_failed_indexes: Some(1),
        config: ConfigSource::Embed("edge-sites".into()),
        secret: Some("edge-secrets".into()),
        state_key_secret: "mgmt-driver-state-key".into(),
        state_claim: "mgmt-driver-state".into(),
        package_dir: "/opt/mgmt-driver/package".into(),
        cpu_request: "50m".into(),
        memory_request: "64Mi".into(),
        memory_limit: "256Mi".into(),
    }
}

fn the_exported_job_is_valid_kubernetes_and_a_wrong_one_is_not() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("tpl");
    std::fs::create_dir_all(t.join("cluster")).unwrap();
    std::fs::write(
        t.join("inventory.yaml.tera"),
        "defaults:\n  user: ubuntu\n  password: {{ secrets.node_password | json }}\ngroups:\n  master:\n    - {name: {{ site.name }}-m1, ssh_ip: {{ nth_host(cidr=network, n=10) }}}\n",
    )
    .unwrap();
    std::fs::write(t.join("cluster/instantiate.json.tera"), "{\"site\": {{ site.name | json }}}\n").unwrap();
    std::fs::create_dir_all(d.path().join("pkg")).unwrap();
    let cat = d.path().join("sites.yaml");
    std::fs::write(
        &cat,
        "apiVersion: mgmt-driver/v1\nkind: SiteCatalogue\ntemplates: tpl\npackage: pkg\n\
         secrets: {node_password: {env: EDGE_NODE_PASSWORD}}\nsites:\n\
         - {name: par1, labels: {region: eu}, vars: {network: 10.20.1.0/24}}\n\
         - {name: nyc1, labels: {region: us}, vars: {network: 10.20.2.0/24}}\n\
         - {name: ber2, labels: {region: eu}, vars: {network: 10.20.3.0/24}}\n",
    )
    .unwrap();
    let c = Catalogue::load(&cat).unwrap();
    let out = d.path().join("out");
    let rendered = render_all(&c, &out, &[], &[("region".into(), "eu".into())]).unwrap();
    let sites: Vec<_> = rendered.iter().map(|s| read_site_files(&s.dir, &s.name).unwrap()).collect();
    assert_eq!(sites.len(), 2);
    let manifest = k8s_job(&sites, &options()).unwrap();
    assert!(manifest.contains("secretKeyRef") && manifest.contains("EDGE_NODE_PASSWORD"), "{manifest}");
    assert!(manifest.contains("completions: 2"), "{manifest}");
    // The command prints the same manifest for the same selection and options.
    let cli = Command::new(env!("CARGO_BIN_EXE_mgmt-driver"))
        .args(["sites", "export", "k8s-job", "--rendered"])
        .arg(&out)
        .args(["--selector", "region=eu", "--name", "edge-rollout", "--namespace", "fleet"])
        .args(["--image", "registry.example/mgmt-driver:0.11", "--parallelism", "2", "--retries", "3"])
        .args(["--max-failed-sites", "1", "--config-map", "edge-sites", "--secret", "edge-secrets"])
        .args(["--state-claim", "mgmt-driver-state", "run-script", "check.sh", "--fast"])
        .output()
        .unwrap();
    assert!(cli.status.success(), "{}", String::from_utf8_lossy(&cli.stderr));
    assert_eq!(String::from_utf8(cli.stdout).unwrap(), manifest);
    let good = d.path().join("job.yaml");
    std::fs::write(&good, &manifest).unwrap();

    let kv = validator();
    for v in VERSIONS {
        let (ok, text) = validate(&kv, &good, v);
        assert!(ok, "the exported manifest is not valid for Kubernetes {v}:\n{text}\n{manifest}");
        assert!(
            text.contains("passed for resource job/edge-rollout")
                && text.contains("passed for resource configmap/edge-sites"),
            "both documents were checked for {v}: {text}"
        );
    }

    // The same manifest with one field of the wrong type, and one with a field the Job API has
    // not got: the check must refuse each.
    for (from, to) in [("completions: 2", "completions: two"), ("completionMode: Indexed", "completionMod: Indexed")] {
        assert!(manifest.contains(from));
        let bad = d.path().join("bad.yaml");
        std::fs::write(&bad, manifest.replacen(from, to, 1)).unwrap();
        let (ok, text) = validate(&kv, &bad, VERSIONS[1]);
        assert!(!ok, "a manifest with '{to}' passed validation:\n{text}");
    }
}

/// 1,000 sites, past one ConfigMap's 1 MiB: rendered from a catalogue, exported by the command,
/// valid Kubernetes (every ConfigMap under the limit, one projected volume, a small Job), and a
/// pod's view of it (every ConfigMap's keys in one folder) plans the Job's last index as that
/// site: `sites plan --bundles DIR --index 999 run-script`, as the pod runs `sites apply`.
#[allow(clippy::print_stderr)] // the measured export goes to the test log
fn a_thousand_site_export_is_valid_and_each_pod_finds_its_site() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("tpl");
    std::fs::create_dir_all(t.join("cluster")).unwrap();
    // About 2 KiB per site, as the shipped templates render (inventory, requests, values).
    std::fs::write(
        t.join("inventory.yaml.tera"),
        format!(
            "# {}\ndefaults:\n  user: ubuntu\n  password: {{{{ secrets.node_password | json }}}}\ngroups:\n  master:\n    - {{name: {{{{ site.name }}}}-m1, ssh_ip: {{{{ nth_host(cidr=network, n=10) }}}}}}\n",
            "x".repeat(2000)
        ),
    )
    .unwrap();
    std::fs::write(t.join("cluster/instantiate.json.tera"), "{\"site\": {{ site.name | json }}}\n").unwrap();
    std::fs::create_dir_all(d.path().join("pkg")).unwrap();
    let mut cat = String::from(
        "apiVersion: mgmt-driver/v1\nkind: SiteCatalogue\ntemplates: tpl\npackage: pkg\n\
         secrets: {node_password: {env: EDGE_NODE_PASSWORD}}\nsites:\n",
    );
    for i in 0..1000 {
        cat.push_str(&format!("- {{name: s{i:04}, vars: {{network: 10.{}.{}.0/24}}}}\n", i / 256, i % 256));
    }
    std::fs::write(d.path().join("sites.yaml"), cat).unwrap();
    let c = Catalogue::load(&d.path().join("sites.yaml")).unwrap();
    let out = d.path().join("out");
    render_all(&c, &out, &[], &[]).unwrap();
    let started = std::time::Instant::now();
    let cli = Command::new(env!("CARGO_BIN_EXE_mgmt-driver"))
        .args(["sites", "export", "k8s-job", "--rendered"])
        .arg(&out)
        .args(["--image", "registry.example/mgmt-driver:0.11", "--config-map", "edge-sites"])
        .args(["--secret", "edge-secrets", "--state-claim", "mgmt-driver-state", "instantiate"])
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(cli.status.success(), "{}", String::from_utf8_lossy(&cli.stderr));
    let manifest = String::from_utf8(cli.stdout).unwrap();
    let docs: Vec<serde_json::Value> =
        manifest.split("---\n").filter(|x| !x.trim().is_empty()).map(|x| yaml_serde::from_str(x).unwrap()).collect();
    let maps: Vec<&serde_json::Value> = docs.iter().filter(|x| x["kind"] == "ConfigMap").collect();
    let job = docs.iter().find(|x| x["kind"] == "Job").unwrap();
    let job_bytes = yaml_serde::to_string(job).unwrap().len();
    eprintln!(
        "k8s_job: 1000 sites exported in {:.2}s: {} bytes, {} ConfigMaps, Job {} bytes",
        took.as_secs_f64(),
        manifest.len(),
        maps.len(),
        job_bytes
    );
    assert!(maps.len() > 1, "1,000 sites of ~2 KiB do not fit one ConfigMap");
    for m in &maps {
        let size: usize = m["data"].as_object().unwrap().iter().map(|(k, v)| k.len() + v.as_str().unwrap().len()).sum();
        assert!(size < 1 << 20, "{}: {size} bytes", m["metadata"]["name"]);
    }
    let file = d.path().join("job.yaml");
    std::fs::write(&file, &manifest).unwrap();
    let kv = validator();
    for v in VERSIONS {
        let (ok, text) = validate(&kv, &file, v);
        assert!(ok, "the 1,000-site manifest is not valid for Kubernetes {v}:\n{}", &text[..text.len().min(4000)]);
    }
    // The pod's /config: every ConfigMap's keys, side by side, as the projected volume has them.
    let pod = d.path().join("pod-config");
    std::fs::create_dir_all(&pod).unwrap();
    for m in &maps {
        for (k, v) in m["data"].as_object().unwrap() {
            std::fs::write(pod.join(k), v.as_str().unwrap()).unwrap();
        }
    }
    let script = d.path().join("check.sh");
    std::fs::write(&script, "true\n").unwrap();
    let plan = Command::new(env!("CARGO_BIN_EXE_mgmt-driver"))
        .args(["sites", "plan", "-o", "json", "--bundles"])
        .arg(&pod)
        .args(["--index", "999", "--state-dir"])
        .arg(d.path().join("state"))
        .arg("run-script")
        .arg(&script)
        .env("EDGE_NODE_PASSWORD", "pw-never-shown")
        .env("MGMT_DRIVER_STATE_KEY_FILE", d.path().join("state.key"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&plan.stdout);
    assert!(plan.status.success(), "{text}{}", String::from_utf8_lossy(&plan.stderr));
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(r["result"]["sites"][0]["site"], "s0999", "{text}");
    assert_eq!(r["result"]["sites"].as_array().unwrap().len(), 1, "{text}");
}

/// The suite's trials (they need no lab), run by the `offline` test binary (tests/bin/offline.rs).
pub fn suite() -> Suite {
    Suite::new(file!()).without_root(&[
        ("the_exported_job_is_valid_kubernetes_and_a_wrong_one_is_not", || {
            the_exported_job_is_valid_kubernetes_and_a_wrong_one_is_not();
            Ok(())
        }),
        ("a_thousand_site_export_is_valid_and_each_pod_finds_its_site", || {
            a_thousand_site_export_is_valid_and_each_pod_finds_its_site();
            Ok(())
        }),
    ])
}
