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

/// The suite's trials (they need no lab), run by the `offline` test binary (tests/bin/offline.rs).
pub fn suite() -> Suite {
    Suite::new(file!()).without_root(&[("the_exported_job_is_valid_kubernetes_and_a_wrong_one_is_not", || {
        the_exported_job_is_valid_kubernetes_and_a_wrong_one_is_not();
        Ok(())
    })])
}
