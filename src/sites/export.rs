//! `sites export k8s-job`: the same per-site runs as a Kubernetes Indexed Job (docs/fleet.md).
//!
//! Pure: the selected sites' rendered files and the options in, manifest text out. Nothing here
//! reads a file or talks to an API server; `cli/sites.rs` reads the rendered directory and
//! prints what this returns. The manifest is one or more ConfigMaps holding exactly the selected
//! sites' rendered files, one key per site (a bundle: the site's files as one JSON object), as
//! many ConfigMaps as keep each under the API's 1 MiB (or a reference to one the operator kept),
//! and a `batch/v1` Job with `completionMode: Indexed`, one completion per site: pod i runs
//! `mgmt-driver sites apply --bundles /config --index i --state-dir /state/store OP`, which
//! unpacks the bundles as `sites render` lays sites out; because the ConfigMaps hold only the
//! selected sites, in the order `load_rendered` sorts them (catalogue index, then name), index i
//! is the i-th site listed in the Job's annotation.
//!
//! Secrets stay references: the rendered files carry `@env:VAR` / `@file:PATH` markers, never
//! values. Each `@env:VAR` becomes an `env` entry whose value comes from a key `VAR` of the
//! Secret named by `--secret`; the same Secret is mounted read-only at `/secrets`, so a
//! `@file:/secrets/KEY` marker (or an inventory's key file there) resolves in the pod. A file
//! marker anywhere else cannot resolve in a pod and is refused here, before anything is applied,
//! and so is an inventory's path (`identity_file`, `known_hosts`, ...) that is neither in the
//! site's own rendered files nor under `/secrets` (`pod_paths.rs`).
//! The pod's driver honours exactly these (`secret_ref.rs`): the Job sets
//! `MGMT_DRIVER_SECRETS_DIR=/secrets` and `MGMT_DRIVER_SECRET_ENV` to the referenced names.
//!
//! Two things Kubernetes does to a container's words are guarded here: an env entry of the
//! Secret must not shadow one the Job sets itself (the completion index, `MGMT_DRIVER_*`,
//! `PATH`, `HOME`, the loader's `LD_*`), so such a reference is refused naming the site's file;
//! and Kubernetes expands `$(VAR)` in `command`, `args` and env values, so every `$` we write
//! from the operator's words is doubled (`$$` is Kubernetes' escape for `$`).

use serde_json::{json, Map, Value};

use crate::error::{Error, Result};

/// Where the pod finds the rendered sites (the ConfigMap's mount).
pub const CONFIG_MOUNT: &str = "/config";
/// Where the state volume (the PVC) is mounted.
pub const STATE_MOUNT: &str = "/state";
/// The state store inside it: a directory the first pod creates, 0700 and its own. The volume's
/// root cannot be the store: where the kubelet manages a volume's ownership for `fsGroup` it
/// leaves the root root's and group-writable, which the store refuses (docs/security.md); the
/// group write is what lets the pod create this directory.
pub const STATE_DIR: &str = "/state/store";
/// Where the Secret named by `--secret` is mounted (files) in the pod.
pub const SECRET_MOUNT: &str = "/secrets";
/// Where the state key Secret is mounted; outside the state volume, as the store requires.
pub const KEY_MOUNT: &str = "/etc/mgmt-driver";
/// The annotation the Job controller sets on pod i (and the env var we fill from it).
pub const INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";
/// Kubernetes refuses a ConfigMap whose data is over 1 MiB.
pub const CONFIG_MAP_MAX: usize = 1 << 20;

/// One selected site's rendered files (`OUT/<site>/...`), paths relative to the site's folder.
#[derive(Debug, Clone)]
pub struct SiteFiles {
    pub name: String,
    pub files: Vec<(String, String)>,
}

/// What the ConfigMap is: made here from the sites' files, or one the operator keeps.
#[derive(Debug, Clone)]
pub enum ConfigSource {
    /// Emit a ConfigMap with this name holding the selected sites' rendered files.
    Embed(String),
    /// Reference an existing ConfigMap holding the sites' bundles as the export writes them
    /// (`NNNNN.<site>.json`, one key per site: [`bundle`]), e.g. one kept from an earlier export.
    Existing(String),
}

/// Everything the manifest depends on besides the sites.
#[derive(Debug, Clone)]
pub struct JobOptions {
    /// The Job's name (also the prefix of the pods' names): a DNS label.
    pub name: String,
    pub namespace: Option<String>,
    /// The operation and its arguments, as `sites apply` takes them (`instantiate`,
    /// `run-script check.sh`, ...).
    pub op: Vec<String>,
    pub image: String,
    pub parallelism: u32,
    pub backoff_limit_per_index: u32,
    pub max_failed_indexes: Option<u32>,
    pub config: ConfigSource,
    /// The Secret that env markers and `/secrets` files come from.
    pub secret: Option<String>,
    /// The Secret holding the state key (key `state.key`): every pod must seal and unseal with
    /// the same key, or a later terminate could not read what instantiate recorded.
    pub state_key_secret: String,
    /// The PersistentVolumeClaim mounted at `/state` (ReadWriteMany when pods run on several
    /// nodes).
    pub state_claim: String,
    /// Where the VNF package (scripts, offline artifacts) is inside the image; written into each
    /// embedded `site.json` whose site has a package.
    pub package_dir: String,
    pub cpu_request: String,
    pub memory_request: String,
    pub memory_limit: String,
}

/// The one effectful helper here: read a rendered site's folder (`OUT/<site>/`, what `sites
/// render` wrote) into [`SiteFiles`], every regular file below it, each capped like a request.
pub fn read_site_files(dir: &std::path::Path, name: &str) -> Result<SiteFiles> {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<(String, String)>) -> Result<()> {
        let at = dir.display().to_string();
        let rd = std::fs::read_dir(dir).map_err(|e| Error::input(&at, "rendered", format!("cannot read: {e}")))?;
        for entry in rd {
            let entry = entry.map_err(|e| Error::input(&at, "rendered", format!("cannot read: {e}")))?;
            let p = entry.path();
            let ft = entry.file_type().map_err(|e| Error::input(&at, "rendered", e.to_string()))?;
            if ft.is_dir() {
                walk(root, &p, out)?;
            } else if ft.is_file() {
                let rel = p.strip_prefix(root).expect("below its root").to_string_lossy().to_string();
                out.push((rel, crate::input_limit::read_capped(&p, CONFIG_MAP_MAX as u64, "rendered")?));
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files)?;
    files.sort();
    Ok(SiteFiles { name: name.to_string(), files })
}

/// The manifest: the ConfigMap (when embedded) and the Job, as one multi-document YAML text.
pub fn k8s_job(sites: &[SiteFiles], o: &JobOptions) -> Result<String> {
    check(sites, o)?;
    let env_refs = env_markers(sites, o)?;
    let view = crate::sites::pod_paths::PodView { secrets: o.secret.as_ref().map(|_| SECRET_MOUNT) };
    for s in sites {
        crate::sites::pod_paths::check(&s.name, &s.files, &view)?;
    }
    let mut docs = Vec::new();
    let names = match &o.config {
        ConfigSource::Embed(cm) => {
            let maps = config_maps(cm, sites, o)?;
            let names = maps.iter().map(|m| m["metadata"]["name"].as_str().unwrap_or_default().to_string()).collect();
            docs.extend(maps);
            names
        }
        ConfigSource::Existing(n) => vec![n.clone()],
    };
    docs.push(job(sites, o, &env_refs, &names));
    let mut out = String::new();
    for d in docs {
        out.push_str("---\n");
        out.push_str(&yaml_serde::to_string(&d).expect("a manifest serializes"));
    }
    Ok(out)
}

fn bad(field: &str, message: impl Into<String>) -> Error {
    Error::input("sites export k8s-job", field, message)
}

/// A DNS-1123 label (Job, ConfigMap, Secret, PVC and container names): `[a-z0-9-]`, at most 63.
fn check_label(field: &str, v: &str) -> Result<()> {
    if crate::k8s_names::dns_label(v, crate::k8s_names::LABEL_MAX) {
        Ok(())
    } else {
        Err(bad(field, format!("'{}' is not a Kubernetes name ([a-z0-9-], at most 63)", v.escape_debug())))
    }
}

fn check(sites: &[SiteFiles], o: &JobOptions) -> Result<()> {
    if sites.is_empty() {
        return Err(bad("sites", "no site is selected: a Job of zero completions does nothing"));
    }
    // The Job's pods are named <job>-<index>-<random>; keep room for it under 63.
    if o.name.len() > 50 {
        return Err(bad("--name", format!("'{}' is longer than 50 characters (pod names add the index)", o.name)));
    }
    check_label("--name", &o.name)?;
    if let Some(ns) = &o.namespace {
        check_label("--namespace", ns)?;
    }
    match &o.config {
        ConfigSource::Embed(n) | ConfigSource::Existing(n) => check_label("--config-map", n)?,
    }
    if let Some(s) = &o.secret {
        check_label("--secret", s)?;
    }
    check_label("--state-key-secret", &o.state_key_secret)?;
    check_label("--state-claim", &o.state_claim)?;
    if o.parallelism == 0 {
        return Err(bad("--parallelism", "must be at least 1"));
    }
    if o.op.is_empty() {
        return Err(bad("--op", "is required (instantiate, terminate, run-script SCRIPT, ...)"));
    }
    if o.image.trim().is_empty() || o.image.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("--image", format!("'{}' is not an image reference", o.image.escape_debug())));
    }
    if !o.package_dir.starts_with('/') {
        return Err(bad("--package-dir", format!("'{}' must be an absolute path in the image", o.package_dir)));
    }
    for s in sites {
        check_label("site", &s.name)?;
        if !s.files.iter().any(|(p, _)| p == "site.json") {
            return Err(bad(&format!("{}/site.json", s.name), "is missing: export what `sites render` wrote"));
        }
    }
    Ok(())
}

/// The env var the completion index is read from (and `$(..)`-expanded in the args).
const INDEX_VAR: &str = "JOB_COMPLETION_INDEX";

/// The env entries the Job sets itself, name and plain value (the index has none: it comes from
/// the pod's annotation). A Secret's entry of the same name would shadow it.
fn own_env(o: &JobOptions, env_refs: &[String]) -> Vec<(&'static str, Option<String>)> {
    let mut v = vec![
        (INDEX_VAR, None),
        (crate::env_vars::STATE_KEY_FILE, Some(format!("{KEY_MOUNT}/state.key"))),
        ("HOME", Some("/tmp".to_string())),
    ];
    if o.secret.is_some() {
        v.push((crate::env_vars::SECRETS_DIR, Some(SECRET_MOUNT.to_string())));
        if !env_refs.is_empty() {
            v.push((crate::env_vars::SECRET_ENV, Some(env_refs.join(","))));
        }
    }
    v
}

/// Whether an `@env:` name would shadow what the Job or the driver depends on: an entry the Job
/// sets, any `MGMT_DRIVER_*` (the driver's own settings), `PATH`, or the loader's `LD_*`.
fn shadows_own_env(name: &str) -> bool {
    ["HOME", "PATH", INDEX_VAR].contains(&name) || name.starts_with("MGMT_DRIVER_") || name.starts_with("LD_")
}

/// A word for `command`, `args` or an env value, as Kubernetes will not expand it: every `$`
/// doubled (`$$` is its escape for `$`), so `$(VAR)` in an operator's word stays text.
fn k8s_literal(s: &str) -> String {
    s.replace('$', "$$")
}

/// The env var names every selected site's files reference (`@env:VAR`), sorted and distinct;
/// a `@file:` marker outside `/secrets` is refused (it cannot resolve in a pod), and so is a
/// name that would shadow the Job's own environment.
fn env_markers(sites: &[SiteFiles], o: &JobOptions) -> Result<Vec<String>> {
    let mut vars = std::collections::BTreeSet::new();
    for s in sites {
        for (path, text) in &s.files {
            for (kind, value) in markers(text) {
                let at = || format!("{}/{path}", s.name);
                match kind {
                    "env" => {
                        if o.secret.is_none() {
                            return Err(bad(
                                &at(),
                                format!("references @env:{value}: name the Secret that holds it with --secret"),
                            ));
                        }
                        if shadows_own_env(&value) {
                            return Err(bad(
                                &at(),
                                format!(
                                    "references @env:{value}, a variable the Job sets itself or the driver reads \
                                     (HOME, PATH, {INDEX_VAR}, MGMT_DRIVER_*, LD_*): a Secret entry of that name \
                                     would shadow it; use another name"
                                ),
                            ));
                        }
                        vars.insert(value);
                    }
                    _ => {
                        let inside = value.starts_with(&format!("{SECRET_MOUNT}/")) && !value.contains("/../");
                        if !inside || o.secret.is_none() {
                            return Err(bad(
                                &at(),
                                format!(
                                    "references @file:{value}, which a pod cannot read: use an env reference, or a \
                                     file under {SECRET_MOUNT}/ (the --secret Secret's keys are mounted there)"
                                ),
                            ));
                        }
                    }
                }
            }
        }
    }
    Ok(vars.into_iter().collect())
}

/// `@env:NAME` and `@file:PATH` markers in a text (NAME: `[A-Za-z_][A-Za-z0-9_]*`; PATH up to
/// a quote, whitespace or a comma, as the templates write it inside a JSON or YAML string).
fn markers(text: &str) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (kind, tag) in [("env", "@env:"), ("file", "@file:")] {
        let mut rest = text;
        while let Some(i) = rest.find(tag) {
            rest = &rest[i + tag.len()..];
            let end = rest
                .find(|c: char| c == '"' || c == '\'' || c == ',' || c.is_whitespace() || c == '}' || c == ']')
                .unwrap_or(rest.len());
            let v = &rest[..end];
            let name_ok = kind == "file"
                || (!v.is_empty()
                    && !v.starts_with(|c: char| c.is_ascii_digit())
                    && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
            if !v.is_empty() && name_ok {
                out.push((kind, v.to_string()));
            }
        }
    }
    out
}

/// A relative path with no `..`, no empty or `.` part: what a volume item may be.
fn check_rel(site: &str, path: &str) -> Result<()> {
    let ok =
        !path.is_empty() && !path.starts_with('/') && path.split('/').all(|p| !p.is_empty() && p != "." && p != "..");
    if ok {
        Ok(())
    } else {
        Err(bad(&format!("{site}/{path}"), "is not a plain relative path inside the site's folder"))
    }
}

/// `site.json` as the pod must see it: the package is where the image has it, and the index is
/// the site's place among the exported sites (`index`), so the pod's view of the ConfigMap is
/// numbered 0..n as the Job's completions are, whatever the catalogue indices of a subset were.
fn pod_site_json(site: &str, text: &str, package_dir: &str, index: usize) -> Result<String> {
    let mut v: Value = serde_json::from_str(text)
        .map_err(|e| bad(&format!("{site}/site.json"), format!("is not the JSON `sites render` writes: {e}")))?;
    match v.get_mut("index") {
        Some(i) => *i = json!(index),
        None => return Err(bad(&format!("{site}/site.json"), "has no index: export what `sites render` wrote")),
    }
    if let Some(p) = v.get_mut("package") {
        if !p.is_null() {
            *p = Value::String(package_dir.to_string());
        }
    }
    Ok(serde_json::to_string_pretty(&v).expect("json serializes") + "\n")
}

fn labels(o: &JobOptions) -> Value {
    json!({
        "app.kubernetes.io/name": "mgmt-driver",
        "app.kubernetes.io/component": "sites",
        "app.kubernetes.io/instance": o.name,
    })
}

fn metadata(name: &str, o: &JobOptions) -> Value {
    let mut m = json!({"name": name, "labels": labels(o)});
    if let Some(ns) = &o.namespace {
        m["namespace"] = json!(ns);
    }
    m
}

/// One site's bundle: its rendered files as one JSON object (path → text), the ConfigMap key
/// `NNNNN.<site>.json` (its place among the exported sites, then its name). A ConfigMap key
/// cannot hold `/`, and a volume's `items` (one per file) would put a Job of many sites over
/// the API's object size; one key per site needs no `items` at all.
pub fn bundle(index: usize, s: &SiteFiles, package_dir: &str) -> Result<(String, String)> {
    let mut files = serde_json::Map::new();
    for (path, text) in &s.files {
        check_rel(&s.name, path)?;
        let text = if path == "site.json" { pod_site_json(&s.name, text, package_dir, index)? } else { text.clone() };
        files.insert(path.clone(), Value::String(text));
    }
    Ok((format!("{index:05}.{}.json", s.name), Value::Object(files).to_string()))
}

/// Room kept in each ConfigMap for its metadata and the API's encoding of it.
const CONFIG_MAP_ROOM: usize = 16 << 10;

/// The bundles, in index order, over as few ConfigMaps as fit each under the API's 1 MiB: `NAME`
/// when one does, else `NAME-0`, `NAME-1`, ... The pod mounts them all in one projected volume.
fn config_maps(name: &str, sites: &[SiteFiles], o: &JobOptions) -> Result<Vec<Value>> {
    let budget = CONFIG_MAP_MAX - CONFIG_MAP_ROOM;
    let mut shards: Vec<Map<String, Value>> = vec![Map::new()];
    let mut size = 0;
    for (index, s) in sites.iter().enumerate() {
        let (key, text) = bundle(index, s, &o.package_dir)?;
        let n = key.len() + text.len();
        if n > budget {
            return Err(bad(
                &format!("{}/", s.name),
                format!("the site's rendered files are {n} bytes as one bundle, over a ConfigMap's 1 MiB (less {CONFIG_MAP_ROOM} for its metadata)"),
            ));
        }
        if size + n > budget {
            shards.push(Map::new());
            size = 0;
        }
        size += n;
        shards.last_mut().expect("one shard at least").insert(key, Value::String(text));
    }
    let many = shards.len() > 1;
    let longest = if many { format!("{name}-{}", shards.len() - 1) } else { name.to_string() };
    check_label("--config-map", &longest)?;
    Ok(shards
        .into_iter()
        .enumerate()
        .map(|(i, data)| {
            let n = if many { format!("{name}-{i}") } else { name.to_string() };
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata(&n, o), "data": data})
        })
        .collect())
}

/// The pod's side of [`bundle`]: every `NNNNN.<site>.json` key in `dir` (a mounted ConfigMap, or
/// several projected into one folder) written out as `out/<site>/<path>`, as `sites render`
/// writes a site, so the rest of `sites apply` is unchanged. Effectful: reads and writes files.
pub fn unpack_bundles(dir: &std::path::Path, out: &std::path::Path) -> Result<usize> {
    let at = dir.display().to_string();
    let err = |m: String| Error::input("--bundles", &at, m);
    let rd = std::fs::read_dir(dir).map_err(|e| err(format!("cannot read: {e}")))?;
    let mut keys: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        // The kubelet's own `..data` links and folders are not keys.
        .filter(|n| !n.starts_with('.') && n.ends_with(".json"))
        .collect();
    keys.sort();
    for key in &keys {
        let site = key
            .strip_suffix(".json")
            .and_then(|k| k.split_once('.'))
            .filter(|(n, _)| n.len() == 5 && n.bytes().all(|b| b.is_ascii_digit()))
            .map(|(_, site)| site)
            .ok_or_else(|| err(format!("{key} is not a site bundle (NNNNN.<site>.json)")))?;
        check_label(&format!("--bundles {key}"), site)?;
        let text = crate::input_limit::read_capped(&dir.join(key), CONFIG_MAP_MAX as u64, "--bundles")?;
        let files: serde_json::Map<String, Value> =
            serde_json::from_str(&text).map_err(|e| err(format!("{key} is not a site bundle: {e}")))?;
        for (path, v) in files {
            check_rel(site, &path)?;
            let text = v.as_str().ok_or_else(|| err(format!("{key}: {path} is not text")))?;
            let to = out.join(site).join(&path);
            let parent = to.parent().expect("below out");
            std::fs::create_dir_all(parent).map_err(|e| err(format!("cannot create {}: {e}", parent.display())))?;
            std::fs::write(&to, text).map_err(|e| err(format!("cannot write {}: {e}", to.display())))?;
        }
    }
    if keys.is_empty() {
        return Err(err("holds no site bundle".into()));
    }
    Ok(keys.len())
}

fn job(sites: &[SiteFiles], o: &JobOptions, env_refs: &[String], config_maps: &[String]) -> Value {
    let n = sites.len() as u32;
    // The flags before the operation: `run-script SCRIPT ARGS...` takes every word after it.
    let mut args: Vec<String> = vec!["sites".into(), "apply".into()];
    args.extend(
        [
            "--bundles",
            CONFIG_MOUNT,
            "--index",
            // The one word Kubernetes is meant to expand.
            &format!("$({INDEX_VAR})"),
            "--state-dir",
            STATE_DIR,
            "--max-sites",
            "1",
        ]
        .map(String::from),
    );
    args.extend(o.op.iter().map(|a| k8s_literal(a)));
    let env: Vec<Value> = own_env(o, env_refs)
        .into_iter()
        .map(|(name, value)| match value {
            Some(v) => json!({"name": name, "value": k8s_literal(&v)}),
            // Kubernetes sets it too; naming it here keeps `$(JOB_COMPLETION_INDEX)` in args
            // defined whatever the cluster's version, and says where it comes from.
            None => json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": format!("metadata.annotations['{INDEX_ANNOTATION}']")}}}),
        })
        .collect();
    let mut env = env;
    if let Some(secret) = &o.secret {
        for v in env_refs {
            env.push(json!({"name": v, "valueFrom": {"secretKeyRef": {"name": secret, "key": v}}}));
        }
    }
    // Every ConfigMap's keys (one per site) side by side in /config: no `items`, so the Job
    // stays small however many sites it has.
    let sources: Vec<Value> = config_maps.iter().map(|n| json!({"configMap": {"name": n}})).collect();
    let config_volume = json!({"name": "config", "projected": {"sources": sources}});
    let mut volumes = vec![
        config_volume,
        json!({"name": "state", "persistentVolumeClaim": {"claimName": o.state_claim}}),
        json!({"name": "state-key", "secret": {"secretName": o.state_key_secret, "defaultMode": 0o440,
            "items": [{"key": "state.key", "path": "state.key"}]}}),
        json!({"name": "tmp", "emptyDir": {}}),
    ];
    let mut mounts = vec![
        json!({"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": true}),
        json!({"name": "state", "mountPath": STATE_MOUNT}),
        json!({"name": "state-key", "mountPath": KEY_MOUNT, "readOnly": true}),
        json!({"name": "tmp", "mountPath": "/tmp"}),
    ];
    if let Some(secret) = &o.secret {
        volumes.push(json!({"name": "secrets", "secret": {"secretName": secret, "defaultMode": 0o440}}));
        mounts.push(json!({"name": "secrets", "mountPath": SECRET_MOUNT, "readOnly": true}));
    }
    let mut spec = json!({
        "completionMode": "Indexed",
        "completions": n,
        "parallelism": o.parallelism.min(n),
        "backoffLimitPerIndex": o.backoff_limit_per_index,
        "podFailurePolicy": {"rules": [
            // Exit 2 is bad input: nothing ran, and running it again cannot help.
            {"action": "FailIndex", "onExitCodes": {"containerName": "sites", "operator": "In", "values": [2]}},
            // An evicted or preempted pod is not the site's failure: run it again, uncounted.
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        ]},
        "template": {
            "metadata": {"labels": labels(o)},
            "spec": {
                // Required by backoffLimitPerIndex; a retry is a new pod, which resumes the site.
                "restartPolicy": "Never",
                "automountServiceAccountToken": false,
                "securityContext": {
                    "runAsNonRoot": true,
                    "runAsUser": 65532,
                    "runAsGroup": 65532,
                    "fsGroup": 65532,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [{
                    "name": "sites",
                    "image": o.image,
                    "command": ["mgmt-driver"],
                    "args": args,
                    "env": env,
                    "resources": {
                        "requests": {"cpu": o.cpu_request, "memory": o.memory_request},
                        "limits": {"memory": o.memory_limit},
                    },
                    "securityContext": {
                        "allowPrivilegeEscalation": false,
                        "readOnlyRootFilesystem": true,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "volumeMounts": mounts,
                }],
                "volumes": volumes,
            },
        },
    });
    if let Some(m) = o.max_failed_indexes {
        spec["maxFailedIndexes"] = json!(m);
    }
    let mut meta = metadata(&o.name, o);
    let names: Vec<&str> = sites.iter().map(|s| s.name.as_str()).collect();
    meta["annotations"] = json!({
        "mgmt-driver/op": o.op.join(" "),
        // Index i of the Job is the i-th name here.
        "mgmt-driver/sites": names.join(","),
    });
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(name: &str, index: usize, inv: &str) -> SiteFiles {
        SiteFiles {
            name: name.into(),
            files: vec![
                (
                    "site.json".into(),
                    format!(r#"{{"name":"{name}","index":{index},"labels":{{}},"package":"/home/op/pkg"}}"#),
                ),
                ("inventory.yaml".into(), inv.into()),
                ("cluster/instantiate.json".into(), r#"{"additionalParams":{}}"#.into()),
            ],
        }
    }

    fn opts() -> JobOptions {
        JobOptions {
            name: "edge-rollout".into(),
            namespace: Some("fleet".into()),
            op: vec!["instantiate".into()],
            image: "registry.example/mgmt-driver:0.11".into(),
            parallelism: 8,
            backoff_limit_per_index: 2,
            max_failed_indexes: Some(5),
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

    fn docs(text: &str) -> Vec<Value> {
        text.split("---\n").filter(|d| !d.trim().is_empty()).map(|d| yaml_serde::from_str(d).unwrap()).collect()
    }

    fn sample() -> Vec<SiteFiles> {
        vec![
            site("par1", 0, "all:\n  password: \"@env:EDGE_NODE_PASSWORD\"\n"),
            site("ber2", 1, "all:\n  password: \"@env:EDGE_NODE_PASSWORD\"\n  key_file: '@file:/secrets/id_ed25519'\n"),
            site("mad3", 2, "all: {}\n"),
        ]
    }

    #[test]
    fn an_indexed_job_of_one_completion_per_site_each_pod_running_its_index() {
        let d = docs(&k8s_job(&sample(), &opts()).unwrap());
        assert_eq!(d.len(), 2);
        let job = &d[1];
        assert_eq!(job["apiVersion"], "batch/v1");
        assert_eq!(job["kind"], "Job");
        let spec = &job["spec"];
        assert_eq!(spec["completionMode"], "Indexed");
        assert_eq!(spec["completions"], 3);
        assert_eq!(spec["parallelism"], 3, "never more pods than sites");
        assert_eq!(spec["backoffLimitPerIndex"], 2);
        assert_eq!(spec["maxFailedIndexes"], 5);
        assert_eq!(spec["template"]["spec"]["restartPolicy"], "Never");
        let c = &spec["template"]["spec"]["containers"][0];
        let args: Vec<&str> = c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        assert_eq!(
            args,
            [
                "sites",
                "apply",
                "--bundles",
                "/config",
                "--index",
                "$(JOB_COMPLETION_INDEX)",
                "--state-dir",
                "/state/store",
                "--max-sites",
                "1",
                "instantiate"
            ]
        );
        let idx = c["env"].as_array().unwrap().iter().find(|e| e["name"] == "JOB_COMPLETION_INDEX").unwrap();
        assert_eq!(
            idx["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        );
        assert_eq!(job["metadata"]["annotations"]["mgmt-driver/sites"], "par1,ber2,mad3");
        assert_eq!(job["metadata"]["namespace"], "fleet");
    }

    /// The pod's /config: every ConfigMap's data keys side by side (the projected volume).
    fn pod_config(d: &[Value]) -> tempfile::TempDir {
        let pod = tempfile::tempdir().unwrap();
        let job = d.last().unwrap();
        let sources = job["spec"]["template"]["spec"]["volumes"][0]["projected"]["sources"].as_array().unwrap();
        for src in sources {
            let cm = d.iter().find(|x| x["metadata"]["name"] == src["configMap"]["name"]).unwrap();
            assert!(src["configMap"].get("items").is_none(), "no items: the keys are the files");
            for (k, v) in cm["data"].as_object().unwrap() {
                std::fs::write(pod.path().join(k), v.as_str().unwrap()).unwrap();
            }
        }
        pod
    }

    #[test]
    fn the_config_map_holds_one_bundle_per_site_and_the_package_where_the_image_has_it() {
        let d = docs(&k8s_job(&sample(), &opts()).unwrap());
        let cm = &d[0];
        assert_eq!(cm["kind"], "ConfigMap");
        assert_eq!(cm["metadata"]["name"], "edge-sites");
        let vol = &d[1]["spec"]["template"]["spec"]["volumes"][0];
        assert_eq!(vol["projected"]["sources"], json!([{"configMap": {"name": "edge-sites"}}]));
        let keys: Vec<&String> = cm["data"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["00000.par1.json", "00001.ber2.json", "00002.mad3.json"]);
        // The pod unpacks them as `sites render` lays sites out.
        let pod = pod_config(&d);
        let out = tempfile::tempdir().unwrap();
        assert_eq!(unpack_bundles(pod.path(), out.path()).unwrap(), 3);
        let read = |p: &str| std::fs::read_to_string(out.path().join(p)).unwrap();
        assert_eq!(read("ber2/cluster/instantiate.json"), r#"{"additionalParams":{}}"#);
        let sj: Value = serde_json::from_str(&read("mad3/site.json")).unwrap();
        assert_eq!(sj["package"], "/opt/mgmt-driver/package");
        assert_eq!(sj["index"], 2);
    }

    /// A bundle whose key or paths are not what the export writes is refused, naming it, and
    /// writes nothing outside the folder it unpacks into.
    #[test]
    fn a_bundle_that_is_not_the_export_s_is_refused() {
        for (key, text) in [
            ("00000.par1.json", r#"{"../escape": "x"}"#),
            ("00000.par1.json", r#"{"/etc/x": "x"}"#),
            ("00000.Par_1.json", r#"{"site.json": "{}"}"#),
            ("par1.json", r#"{"site.json": "{}"}"#),
            ("00000.par1.json", r#"["site.json"]"#),
            ("00000.par1.json", r#"{"site.json": 1}"#),
        ] {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join(key), text).unwrap();
            let out = tempfile::tempdir().unwrap();
            let e = unpack_bundles(dir.path(), &out.path().join("in")).unwrap_err().to_string();
            assert!(e.contains(key) || e.contains("par1/") || e.contains("Par_1"), "{key} {text}: {e}");
            assert!(!out.path().join("escape").exists());
        }
        let empty = tempfile::tempdir().unwrap();
        assert!(unpack_bundles(empty.path(), empty.path()).unwrap_err().to_string().contains("no site bundle"));
    }

    /// 1,000 sites of ~3 KiB each: past one ConfigMap's 1 MiB, so the bundles are spread over
    /// several, each under it, all mounted by one projected volume; every pod finds its site.
    #[test]
    fn a_thousand_sites_are_sharded_over_config_maps_under_the_limit() {
        let inv = format!("all: {{}}\n# {}\n", "x".repeat(3000));
        let sites: Vec<SiteFiles> = (0..1000).map(|i| site(&format!("s{i:04}"), i, &inv)).collect();
        let text = k8s_job(&sites, &opts()).unwrap();
        let d = docs(&text);
        let maps: Vec<&Value> = d.iter().filter(|x| x["kind"] == "ConfigMap").collect();
        assert!(maps.len() >= 3, "{} ConfigMaps", maps.len());
        for (i, m) in maps.iter().enumerate() {
            assert_eq!(m["metadata"]["name"], format!("edge-sites-{i}"));
            let data = m["data"].as_object().unwrap();
            let size: usize = data.iter().map(|(k, v)| k.len() + v.as_str().unwrap().len()).sum();
            assert!(size <= CONFIG_MAP_MAX - CONFIG_MAP_ROOM, "{size}");
        }
        let job = d.last().unwrap();
        assert_eq!(job["spec"]["completions"], 1000);
        let sources = job["spec"]["template"]["spec"]["volumes"][0]["projected"]["sources"].as_array().unwrap();
        assert_eq!(sources.len(), maps.len());
        // The Job itself stays small: no per-file items.
        let job_size = yaml_serde::to_string(job).unwrap().len();
        assert!(job_size < 20_000, "the Job is {job_size} bytes");
        let pod = pod_config(&d);
        let out = tempfile::tempdir().unwrap();
        assert_eq!(unpack_bundles(pod.path(), out.path()).unwrap(), 1000);
        let all = crate::sites::plan::load_rendered(out.path()).unwrap();
        let one = crate::sites::plan::select(all, &[], &[], Some(999)).unwrap();
        assert_eq!((one[0].name.as_str(), one[0].index), ("s0999", 999));
    }

    /// A subset of a render (`--selector`, `--only`) keeps its catalogue indices (1 and 3 here);
    /// the bundles renumber them, so every pod reads its files back and index i runs the Job's
    /// i-th site.
    #[test]
    fn a_subset_is_renumbered_so_each_pod_finds_its_site() {
        let subset = vec![site("ber2", 1, "all: {}\n"), site("lis4", 3, "all: {}\n")];
        let d = docs(&k8s_job(&subset, &opts()).unwrap());
        let names = d[1]["metadata"]["annotations"]["mgmt-driver/sites"].as_str().unwrap().to_string();
        let pod = pod_config(&d);
        let rendered = tempfile::tempdir().unwrap();
        unpack_bundles(pod.path(), rendered.path()).unwrap();
        for (i, want) in names.split(',').enumerate() {
            let all = crate::sites::plan::load_rendered(rendered.path()).unwrap();
            let one = crate::sites::plan::select(all, &[], &[], Some(i)).unwrap();
            assert_eq!((one[0].name.as_str(), one[0].index), (want, i));
        }
    }

    #[test]
    fn secrets_are_references_to_the_named_secret_never_values() {
        let text = k8s_job(&sample(), &opts()).unwrap();
        let d = docs(&text);
        let c = &d[1]["spec"]["template"]["spec"]["containers"][0];
        let envs: Vec<&Value> =
            c["env"].as_array().unwrap().iter().filter(|e| e["valueFrom"]["secretKeyRef"].is_object()).collect();
        assert_eq!(envs.len(), 1, "one entry per distinct variable: {envs:?}");
        assert_eq!(envs[0]["name"], "EDGE_NODE_PASSWORD");
        assert_eq!(envs[0]["valueFrom"]["secretKeyRef"], json!({"name": "edge-secrets", "key": "EDGE_NODE_PASSWORD"}));
        let mounts = c["volumeMounts"].as_array().unwrap();
        assert!(mounts.iter().any(|m| m["mountPath"] == "/secrets" && m["readOnly"] == true));
        assert!(mounts.iter().any(|m| m["mountPath"] == "/etc/mgmt-driver" && m["readOnly"] == true));
        assert!(!text.contains("kind: Secret\n"), "the export never writes a Secret");
        // The pod's driver honours exactly these references (secret_ref.rs).
        let plain = |n: &str| c["env"].as_array().unwrap().iter().find(|e| e["name"] == n).map(|e| e["value"].clone());
        assert_eq!(plain("MGMT_DRIVER_SECRETS_DIR"), Some(json!("/secrets")));
        assert_eq!(plain("MGMT_DRIVER_SECRET_ENV"), Some(json!("EDGE_NODE_PASSWORD")));
    }

    #[test]
    fn a_reference_that_would_shadow_the_jobs_own_environment_is_refused_naming_the_site_file() {
        for name in [
            "JOB_COMPLETION_INDEX",
            "MGMT_DRIVER_STATE_KEY_FILE",
            "MGMT_DRIVER_SECRET_ENV",
            "PATH",
            "HOME",
            "LD_PRELOAD",
        ] {
            let mut s = sample();
            s[1].files[2].1 = format!(r#"{{"additionalParams":{{"pw":"@env:{name}"}}}}"#);
            let e = k8s_job(&s, &opts()).unwrap_err().to_string();
            assert!(e.contains("ber2/cluster/instantiate.json") && e.contains(name) && e.contains("shadow"), "{e}");
        }
    }

    #[test]
    fn kubernetes_does_not_expand_a_dollar_paren_in_the_operators_words() {
        let mut o = opts();
        o.op = vec!["run-script".into(), "check.sh".into(), "$(HOME)".into(), "a$$(X)".into()];
        let d = docs(&k8s_job(&sample(), &o).unwrap());
        let c = &d[1]["spec"]["template"]["spec"]["containers"][0];
        let args: Vec<&str> = c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        assert_eq!(args[args.len() - 2..], ["$$(HOME)", "a$$$$(X)"], "every $ doubled: Kubernetes' escape");
        assert!(args.contains(&"$(JOB_COMPLETION_INDEX)"), "the index alone is expanded: {args:?}");
        assert_eq!(k8s_literal("x$(Y)$"), "x$$(Y)$$");
    }

    #[test]
    fn a_reference_a_pod_cannot_resolve_is_refused_naming_the_site_and_file() {
        let mut s = sample();
        s[2].files[1].1 = "all:\n  password: '@file:/home/op/pw'\n".into();
        let e = k8s_job(&s, &opts()).unwrap_err().to_string();
        assert!(e.contains("mad3/inventory.yaml") && e.contains("@file:/home/op/pw"), "{e}");
        let mut o = opts();
        o.secret = None;
        let e = k8s_job(&sample(), &o).unwrap_err().to_string();
        assert!(e.contains("par1/inventory.yaml") && e.contains("--secret"), "{e}");
        s[2].files[1].1 = "all:\n  password: '@file:/secrets/../etc/shadow'\n".into();
        assert!(k8s_job(&s, &opts()).is_err());
    }

    /// The sample catalogue renders the controller's own key and known_hosts paths into every
    /// inventory: no pod can read them, so the export refuses, naming the site, the field and
    /// the path; the same site with the key in the Secret and known_hosts in its folder exports.
    #[test]
    fn the_sample_catalogue_s_controller_paths_are_refused_naming_them() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let c = crate::sites::catalogue::Catalogue::load(&root.join("samples/sites/sites.yaml")).unwrap();
        let d = tempfile::tempdir().unwrap();
        let rendered = crate::sites::render::render_all(&c, d.path(), &["par1".into()], &[]).unwrap();
        let mut s = read_site_files(&rendered[0].dir, "par1").unwrap();
        // Its password reference is a controller path too (refused as a marker already): put it
        // in the Secret, as the export's message says, and look at what is left.
        for (_, text) in s.files.iter_mut() {
            for (kind, path) in markers(text) {
                if kind == "file" && path.ends_with("/target/lab/edge1/password") {
                    *text = text.replace(&format!("@file:{path}"), "@file:/secrets/node_password");
                }
            }
        }
        let e = k8s_job(std::slice::from_ref(&s), &opts()).unwrap_err().to_string();
        assert!(e.contains("par1/inventory.yaml") && e.contains("defaults.identity_file"), "{e}");
        assert!(e.contains("target/lab/edge1/id_ed25519"), "the path is named: {e}");
        let inv = s.files.iter_mut().find(|(p, _)| p == "inventory.yaml").unwrap();
        let edited: Vec<String> = inv
            .1
            .lines()
            .map(|l| match l.trim_start() {
                t if t.starts_with("identity_file:") => "  identity_file: /secrets/id_ed25519".to_string(),
                t if t.starts_with("known_hosts:") => "  known_hosts: known_hosts".to_string(),
                _ => l.to_string(),
            })
            .collect();
        inv.1 = edited.join("\n");
        let e = k8s_job(std::slice::from_ref(&s), &opts()).unwrap_err().to_string();
        assert!(e.contains("defaults.known_hosts") && e.contains("no such file"), "{e}");
        s.files.push(("known_hosts".into(), "198.18.60.11 ssh-ed25519 AAAA\n".into()));
        k8s_job(&[s], &opts()).unwrap();
    }

    #[test]
    fn an_existing_config_map_is_referenced_not_emitted() {
        let mut o = opts();
        o.config = ConfigSource::Existing("kept".into());
        let d = docs(&k8s_job(&sample(), &o).unwrap());
        assert_eq!(d.len(), 1);
        let vol = &d[0]["spec"]["template"]["spec"]["volumes"][0];
        assert_eq!(vol["projected"]["sources"], json!([{"configMap": {"name": "kept"}}]));
    }

    #[test]
    fn bad_options_and_inputs_are_input_errors_naming_the_flag() {
        type Change = fn(&mut JobOptions);
        let cases: [(Change, &str); 8] = [
            (|o| o.parallelism = 0, "--parallelism"),
            (|o| o.name = "Edge_Rollout".into(), "--name"),
            (|o| o.name = "a".repeat(51), "--name"),
            (|o| o.state_claim = "".into(), "--state-claim"),
            (|o| o.image = "img with space".into(), "--image"),
            (|o| o.op = vec![], "--op"),
            (|o| o.package_dir = "pkg".into(), "--package-dir"),
            (|o| o.config = ConfigSource::Existing("x/y".into()), "--config-map"),
        ];
        for (f, flag) in cases {
            let mut o = opts();
            f(&mut o);
            let e = k8s_job(&sample(), &o).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains(flag), "{flag}: {e}");
        }
        assert!(k8s_job(&[], &opts()).unwrap_err().to_string().contains("no site"));
        let mut s = sample();
        s[0].files[1].0 = "../escape.yaml".into();
        assert!(k8s_job(&s, &opts()).unwrap_err().to_string().contains("par1/../escape.yaml"));
        s = sample();
        s[1].files.remove(0);
        assert!(k8s_job(&s, &opts()).unwrap_err().to_string().contains("ber2/site.json"));
    }

    #[test]
    fn a_site_too_large_for_one_config_map_is_refused_naming_it() {
        let big = "x".repeat(1 << 20);
        let s: Vec<SiteFiles> =
            (0..3).map(|i| site(&format!("s{i}"), i, if i == 1 { &big } else { "all: {}\n" })).collect();
        let e = k8s_job(&s, &opts()).unwrap_err().to_string();
        assert!(e.contains("s1/") && e.contains("1 MiB"), "{e}");
        // A name whose shards' suffixes would not be Kubernetes names is refused, naming it.
        let many: Vec<SiteFiles> = (0..3).map(|i| site(&format!("s{i}"), i, &"x".repeat(600 << 10))).collect();
        let mut o = opts();
        o.config = ConfigSource::Embed("c".repeat(62));
        assert!(k8s_job(&many, &o).unwrap_err().to_string().contains("--config-map"));
    }

    #[test]
    fn markers_are_found_where_the_templates_put_them() {
        let m = markers(r#"{"a": "@env:A_1", "b": ['@file:/secrets/k'], c: @env:9bad, d: @env:B}"#);
        assert_eq!(m, [("env", "A_1".to_string()), ("env", "B".to_string()), ("file", "/secrets/k".to_string())]);
    }
}
