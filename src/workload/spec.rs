//! The compact workload spec an operator writes (YAML or JSON), checked into a [`Workload`]
//! before anything connects: every name a DNS-1123 name, every port a DCAE port spec, every
//! probe, volume, label, resource quantity and interval checked, each error naming the field
//! (`ports[1]`, `volumes[0].mount`, ...) and the file. Unknown fields are refused, so a typo
//! (`replica: 3`) is never silently ignored. Pure.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::error::{excerpt, Error, Result};
use crate::workload::kind::Kind;
use crate::workload::names;
use crate::workload::ports::{self, PortSpec};

/// At most this many bytes of spec are read (a spec is a page of YAML).
pub const SPEC_MAX_BYTES: u64 = 1 << 20;

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: String,
    namespace: Option<String>,
    kind: Option<String>,
    image: String,
    container: Option<String>,
    #[serde(default)]
    command: Vec<String>,
    #[serde(default)]
    args: Vec<String>,
    replicas: Option<u32>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    env: BTreeMap<String, Scalar>,
    resources: Option<RawResources>,
    readiness: Option<RawProbe>,
    liveness: Option<RawProbe>,
    #[serde(default)]
    volumes: Vec<RawVolume>,
    #[serde(default)]
    ports: Vec<PortText>,
    /// DCAE's `always_pull_image`: `imagePullPolicy: Always`.
    always_pull: Option<bool>,
    /// Kubernetes' own words: Always, IfNotPresent or Never.
    image_pull_policy: Option<String>,
    /// Secrets (of the namespace) holding registry credentials: the pod's `imagePullSecrets`.
    #[serde(default)]
    image_pull_secrets: Vec<String>,
    /// Containers run to completion, in order, before the main one starts.
    #[serde(default)]
    init_containers: Vec<RawInit>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct RawInit {
    name: String,
    image: String,
    #[serde(default)]
    command: Vec<String>,
    #[serde(default)]
    args: Vec<String>,
}

/// A port written as `8080/udp:30080` or as a bare number (`8080`).
#[derive(Deserialize, Debug)]
#[serde(untagged)]
enum PortText {
    Text(String),
    Number(u64),
}

/// An environment value: YAML's `A: 1` or `B: true` is meant as the text `1` / `true`.
#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
enum Scalar {
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Scalar {
    fn text(&self) -> String {
        match self {
            Scalar::Text(s) => s.clone(),
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(f) => f.to_string(),
            Scalar::Bool(b) => b.to_string(),
        }
    }
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct RawResources {
    #[serde(default)]
    requests: BTreeMap<String, String>,
    #[serde(default)]
    limits: BTreeMap<String, String>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct RawProbe {
    /// `PATH:PORT`, e.g. `/healthz:8080`.
    http: Option<String>,
    /// `PATH:PORT` over TLS (DCAE's `https` probes; the kubelet does not verify the
    /// certificate).
    https: Option<String>,
    tcp: Option<u32>,
    exec: Option<Vec<String>>,
    initial_delay: Option<PortText>,
    period: Option<PortText>,
    timeout: Option<PortText>,
    failure_threshold: Option<u32>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct RawVolume {
    name: String,
    mount: String,
    #[serde(default)]
    read_only: bool,
    config_map: Option<String>,
    secret: Option<String>,
    host_path: Option<String>,
    empty_dir: Option<serde_json::Value>,
}

/// A checked workload: what the manifest is generated from.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub kind: Kind,
    pub name: String,
    pub namespace: String,
    pub container: String,
    pub image: String,
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub replicas: u32,
    /// The operator's labels (ours, `app.kubernetes.io/name` and `managed-by`, are added).
    pub labels: BTreeMap<String, String>,
    pub env: BTreeMap<String, String>,
    pub requests: BTreeMap<String, String>,
    pub limits: BTreeMap<String, String>,
    pub readiness: Option<Probe>,
    pub liveness: Option<Probe>,
    pub volumes: Vec<Volume>,
    pub ports: Vec<PortSpec>,
    /// `imagePullPolicy` of every container (none: Kubernetes' default for the tag).
    pub pull_policy: Option<PullPolicy>,
    pub pull_secrets: Vec<String>,
    pub init_containers: Vec<InitContainer>,
}

/// Kubernetes' `imagePullPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

impl PullPolicy {
    pub fn api(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}

/// An init container: run to completion before the workload's container starts (DCAE's
/// `init_containers`). It shares the pod's volumes and pull policy.
#[derive(Clone, Debug, PartialEq)]
pub struct InitContainer {
    pub name: String,
    pub image: String,
    pub command: Vec<String>,
    pub args: Vec<String>,
}

/// The environment variable every container gets with the pod's IP (DCAE sets it so a
/// component can announce itself); a spec may not set it.
pub const POD_IP_ENV: &str = "POD_IP";

#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// `https`: the kubelet asks over TLS (scheme HTTPS).
    Http {
        path: String,
        port: u16,
        https: bool,
    },
    Tcp {
        port: u16,
    },
    Exec {
        command: Vec<String>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    pub check: Check,
    pub initial_delay_s: Option<u32>,
    pub period_s: Option<u32>,
    pub timeout_s: Option<u32>,
    pub failure_threshold: Option<u32>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    ConfigMap(String),
    Secret(String),
    HostPath(String),
    EmptyDir,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Volume {
    pub name: String,
    pub mount: String,
    pub read_only: bool,
    pub source: Source,
}

/// The most replicas a spec or `scale` may ask for: a typo (`30000`) is refused, not scheduled.
pub const MAX_REPLICAS: u32 = 1000;

/// Read and check a spec file. `kind` and `namespace` are the command line's `--kind` and
/// `--namespace` (a spec that says otherwise is refused, naming both).
pub fn load(path: &Path, kind: Option<Kind>, namespace: Option<&str>) -> Result<Workload> {
    let at = path.display().to_string();
    let text = crate::input_limit::read_capped(path, SPEC_MAX_BYTES, "workload spec")?;
    parse(&text, &at, kind, namespace)
}

/// Check spec text (YAML, of which JSON is a subset); `at` names the file in errors.
pub fn parse(text: &str, at: &str, kind: Option<Kind>, namespace: Option<&str>) -> Result<Workload> {
    let de = yaml_serde::Deserializer::from_str(text);
    let raw: Raw = serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        let field = if field == "." { "spec".to_string() } else { field };
        Error::input(at, field, e.inner().to_string())
    })?;
    check(raw, at, kind, namespace)
}

fn check(r: Raw, at: &str, kind_flag: Option<Kind>, ns_flag: Option<&str>) -> Result<Workload> {
    let bad = |field: &str, m: String| Error::input(at, field, m);
    names::workload(&r.name).map_err(|m| bad("name", m))?;
    let spec_kind = r.kind.as_deref().map(|k| Kind::parse(k).map_err(|m| bad("kind", m))).transpose()?;
    let kind = match (spec_kind, kind_flag) {
        (Some(a), Some(b)) if a != b => {
            return Err(bad("kind", format!("the spec says {}, --kind says {}", a.api(), b.api())));
        }
        (a, b) => a.or(b).unwrap_or(Kind::Deployment),
    };
    let namespace = match (r.namespace.as_deref(), ns_flag) {
        (Some(a), Some(b)) if a != b => {
            return Err(bad("namespace", format!("the spec says '{}', --namespace says '{}'", excerpt(a), excerpt(b))));
        }
        (a, b) => a.or(b).unwrap_or("default").to_string(),
    };
    crate::cnf::names::namespace(&namespace).map_err(|m| bad("namespace", m))?;
    let container = r.container.clone().unwrap_or_else(|| r.name.clone());
    names::container(&container).map_err(|m| bad("container", m))?;
    names::image(&r.image).map_err(|m| bad("image", m))?;
    for (list, field) in [(&r.command, "command"), (&r.args, "args")] {
        words(list, field, false).map_err(|(f, m)| bad(&f, m))?;
    }
    let replicas = r.replicas.unwrap_or(1);
    if replicas > MAX_REPLICAS {
        return Err(bad("replicas", format!("{replicas} is more than {MAX_REPLICAS}")));
    }
    for (k, v) in &r.labels {
        names::label(k, v).map_err(|m| bad(&format!("labels.{}", excerpt(k)), m))?;
    }
    let mut env = BTreeMap::new();
    for (k, v) in &r.env {
        names::env_name(k).map_err(|m| bad(&format!("env.{}", excerpt(k)), m))?;
        if k == POD_IP_ENV {
            return Err(bad(&format!("env.{k}"), "is set by deploy, from the pod's own IP".into()));
        }
        let v = v.text();
        if v.contains('\0') {
            return Err(bad(&format!("env.{k}"), "contains a NUL byte".into()));
        }
        env.insert(k.clone(), v);
    }
    let res = r.resources.unwrap_or_default();
    for (m, field) in [(&res.requests, "resources.requests"), (&res.limits, "resources.limits")] {
        for (k, v) in m {
            if k != "cpu" && k != "memory" && k != "ephemeral-storage" {
                return Err(bad(&format!("{field}.{}", excerpt(k)), "cpu, memory or ephemeral-storage".into()));
            }
            names::quantity(v).map_err(|e| bad(&format!("{field}.{k}"), e))?;
        }
    }
    let readiness = r.readiness.map(|p| probe(p, "readiness")).transpose().map_err(|(f, m)| bad(&f, m))?;
    let liveness = r.liveness.map(|p| probe(p, "liveness")).transpose().map_err(|(f, m)| bad(&f, m))?;
    let mut volumes: Vec<Volume> = Vec::new();
    for (i, v) in r.volumes.into_iter().enumerate() {
        let vol = volume(v).map_err(|(f, m)| bad(&format!("volumes[{i}].{f}"), m))?;
        if volumes.iter().any(|x| x.name == vol.name) {
            return Err(bad(&format!("volumes[{i}].name"), format!("'{}' is given twice", vol.name)));
        }
        if volumes.iter().any(|x| x.mount == vol.mount) {
            return Err(bad(&format!("volumes[{i}].mount"), format!("'{}' is mounted twice", vol.mount)));
        }
        volumes.push(vol);
    }
    let mut ports: Vec<PortSpec> = Vec::new();
    for (i, p) in r.ports.iter().enumerate() {
        let field = format!("ports[{i}]");
        let text = match p {
            PortText::Text(s) => s.clone(),
            PortText::Number(n) => n.to_string(),
        };
        let p = ports::parse(&text).map_err(|m| bad(&field, m))?;
        if ports.iter().any(|x| x.port == p.port && x.protocol == p.protocol) {
            return Err(bad(&field, format!("{} is given twice", p.name())));
        }
        if let Some(n) = p.node_port.filter(|n| ports.iter().any(|x| x.node_port == Some(*n))) {
            return Err(bad(&field, format!("node port {n} is given twice")));
        }
        ports.push(p);
    }
    let pull_policy = match (r.always_pull, r.image_pull_policy.as_deref()) {
        (Some(true), Some(p)) if p != "Always" => {
            return Err(bad("image_pull_policy", format!("'{}' contradicts always_pull: true", excerpt(p))));
        }
        (Some(true), _) => Some(PullPolicy::Always),
        (_, Some(p)) => Some(match p {
            "Always" => PullPolicy::Always,
            "IfNotPresent" => PullPolicy::IfNotPresent,
            "Never" => PullPolicy::Never,
            other => {
                return Err(bad("image_pull_policy", format!("'{}': Always, IfNotPresent or Never", excerpt(other))))
            }
        }),
        (_, None) => None,
    };
    for (i, n) in r.image_pull_secrets.iter().enumerate() {
        if !crate::cnf::names::dns_subdomain(n) {
            return Err(bad(&format!("image_pull_secrets[{i}]"), format!("'{}' is not a Secret name", excerpt(n))));
        }
        if r.image_pull_secrets[..i].contains(n) {
            return Err(bad(&format!("image_pull_secrets[{i}]"), format!("'{n}' is given twice")));
        }
    }
    let mut init_containers: Vec<InitContainer> = Vec::new();
    for (i, c) in r.init_containers.into_iter().enumerate() {
        let at = |f: &str| format!("init_containers[{i}].{f}");
        names::container(&c.name).map_err(|m| bad(&at("name"), m))?;
        if c.name == container || init_containers.iter().any(|x| x.name == c.name) {
            return Err(bad(&at("name"), format!("'{}' is the name of another container", c.name)));
        }
        names::image(&c.image).map_err(|m| bad(&at("image"), m))?;
        for (list, field) in [(&c.command, "command"), (&c.args, "args")] {
            words(list, &at(field), false).map_err(|(f, m)| bad(&f, m))?;
        }
        init_containers.push(InitContainer { name: c.name, image: c.image, command: c.command, args: c.args });
    }
    Ok(Workload {
        kind,
        name: r.name,
        namespace,
        container,
        image: r.image,
        command: r.command,
        args: r.args,
        replicas,
        labels: r.labels,
        env,
        requests: res.requests,
        limits: res.limits,
        readiness,
        liveness,
        volumes,
        ports,
        pull_policy,
        pull_secrets: r.image_pull_secrets,
        init_containers,
    })
}

type FieldErr = (String, String);

/// A command's words: no NUL (a process argument cannot carry one), at most 256 of them.
fn words(list: &[String], field: &str, need_one: bool) -> std::result::Result<(), FieldErr> {
    if need_one && list.is_empty() {
        return Err((field.into(), "needs at least one word".into()));
    }
    if list.len() > 256 {
        return Err((field.into(), "more than 256 words".into()));
    }
    match list.iter().position(|w| w.contains('\0')) {
        Some(i) => Err((format!("{field}[{i}]"), "contains a NUL byte".into())),
        None => Ok(()),
    }
}

/// An interval in a probe: DCAE's specs (`10`, `10s`, `5m`, `1h`), in whole seconds.
fn seconds(v: &Option<PortText>, field: &str) -> std::result::Result<Option<u32>, FieldErr> {
    let Some(v) = v else { return Ok(None) };
    let text = match v {
        PortText::Text(s) => s.clone(),
        PortText::Number(n) => n.to_string(),
    };
    let d = crate::duration::parse_duration(&text).map_err(|m| (field.to_string(), m))?;
    whole_seconds(d).map(Some).map_err(|m| (field.to_string(), format!("'{}' {m}", excerpt(&text))))
}

/// Probe intervals are whole seconds in the Kubernetes API, at most an hour here.
pub fn whole_seconds(d: Duration) -> std::result::Result<u32, String> {
    if d.subsec_nanos() != 0 {
        return Err("is not a whole number of seconds".into());
    }
    if d > Duration::from_secs(3600) {
        return Err("is longer than 1h".into());
    }
    Ok(d.as_secs() as u32)
}

fn probe(p: RawProbe, field: &str) -> std::result::Result<Probe, FieldErr> {
    let port = |n: u32, f: &str| -> std::result::Result<u16, FieldErr> {
        if (1..=65535).contains(&n) {
            Ok(n as u16)
        } else {
            Err((format!("{field}.{f}"), format!("port {n} is not in 1..65535")))
        }
    };
    let (web, https) = match (&p.http, &p.https) {
        (Some(_), Some(_)) => return Err((field.into(), "needs exactly one of http, https, tcp, exec".into())),
        (Some(h), None) => (Some(h), false),
        (None, Some(h)) => (Some(h), true),
        (None, None) => (None, false),
    };
    let check = match (web, p.tcp, &p.exec) {
        (Some(h), None, None) => {
            let f = format!("{field}.{}", if https { "https" } else { "http" });
            let form = "PATH:PORT, e.g. /healthz:8080";
            let (path, n) = h.rsplit_once(':').ok_or_else(|| (f.clone(), format!("'{}' is not {form}", excerpt(h))))?;
            let n: u32 = n.parse().map_err(|_| (f.clone(), format!("'{}' is not {form}", excerpt(h))))?;
            let path_ok = path.starts_with('/')
                && path.len() <= 1024
                && path.bytes().all(|c| c.is_ascii_graphic() && c != b'\\' && c != b'"' && c != b'\'');
            if !path_ok {
                return Err((f, format!("'{}': the path must start with '/' and be printable ASCII", excerpt(path))));
            }
            Check::Http { path: path.to_string(), port: port(n, if https { "https" } else { "http" })?, https }
        }
        (None, Some(n), None) => Check::Tcp { port: port(n, "tcp")? },
        (None, None, Some(cmd)) => {
            words(cmd, &format!("{field}.exec"), true)?;
            Check::Exec { command: cmd.clone() }
        }
        _ => return Err((field.into(), "needs exactly one of http, https, tcp, exec".into())),
    };
    Ok(Probe {
        check,
        initial_delay_s: seconds(&p.initial_delay, &format!("{field}.initial_delay"))?,
        period_s: seconds(&p.period, &format!("{field}.period"))?,
        timeout_s: seconds(&p.timeout, &format!("{field}.timeout"))?,
        failure_threshold: match p.failure_threshold {
            Some(n) if !(1..=100).contains(&n) => {
                return Err((format!("{field}.failure_threshold"), format!("{n} is not in 1..100")));
            }
            other => other,
        },
    })
}

fn volume(v: RawVolume) -> std::result::Result<Volume, FieldErr> {
    crate::cnf::names::dns_label(&v.name, 63)
        .then_some(())
        .ok_or_else(|| ("name".to_string(), format!("'{}' is not a DNS-1123 label", excerpt(&v.name))))?;
    names::abs_path(&v.mount).map_err(|m| ("mount".to_string(), m))?;
    let source = match (v.config_map, v.secret, v.host_path, v.empty_dir) {
        (Some(c), None, None, None) => {
            crate::cnf::names::dns_subdomain(&c)
                .then_some(())
                .ok_or_else(|| ("config_map".to_string(), format!("'{}' is not a ConfigMap name", excerpt(&c))))?;
            Source::ConfigMap(c)
        }
        (None, Some(s), None, None) => {
            crate::cnf::names::dns_subdomain(&s)
                .then_some(())
                .ok_or_else(|| ("secret".to_string(), format!("'{}' is not a Secret name", excerpt(&s))))?;
            Source::Secret(s)
        }
        (None, None, Some(h), None) => {
            names::abs_path(&h).map_err(|m| ("host_path".to_string(), m))?;
            Source::HostPath(h)
        }
        (None, None, None, Some(e)) => {
            if !(e.is_null() || e.as_object().is_some_and(|m| m.is_empty())) {
                return Err(("empty_dir".into(), "takes no settings here ({} or null)".into()));
            }
            Source::EmptyDir
        }
        _ => return Err(("name".into(), "needs exactly one of config_map, secret, host_path, empty_dir".into())),
    };
    Ok(Volume { name: v.name, mount: v.mount, read_only: v.read_only, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub const SPEC: &str = r#"
name: vnf-web
image: registry.example/web:1.0
replicas: 2
labels: {tier: front}
env: {MODE: prod, RETRIES: 3}
resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {memory: 128Mi}}
readiness: {http: "/healthz:8080", period: 10s, initial_delay: 5}
liveness: {tcp: 8080, period: 1m}
volumes:
  - {name: cfg, config_map: web-config, mount: /etc/web, read_only: true}
  - {name: scratch, empty_dir: {}, mount: /scratch}
ports: ["8080/tcp", "5000/udp:30080"]
"#;

    fn err(text: &str) -> String {
        parse(text, "spec.yaml", None, None).expect_err("refused").to_string()
    }

    #[test]
    fn a_full_spec() {
        let w = parse(SPEC, "spec.yaml", None, None).unwrap();
        assert_eq!(
            (w.kind, w.namespace.as_str(), w.container.as_str(), w.replicas),
            (Kind::Deployment, "default", "vnf-web", 2)
        );
        assert_eq!(w.env["RETRIES"], "3");
        assert_eq!(w.ports.len(), 2);
        let r = w.readiness.unwrap();
        assert_eq!((r.period_s, r.initial_delay_s), (Some(10), Some(5)));
        assert_eq!(r.check, Check::Http { path: "/healthz".into(), port: 8080, https: false });
        assert_eq!(w.liveness.unwrap().period_s, Some(60));
        assert_eq!(w.volumes[1].source, Source::EmptyDir);
    }

    #[test]
    fn flags_and_spec_must_agree() {
        let deployment = SPEC.replace("name: vnf-web", "name: vnf-web\nkind: Deployment");
        let e = parse(&deployment, "s", Some(Kind::StatefulSet), Some("default")).unwrap_err().to_string();
        assert!(e.contains("kind") && e.contains("StatefulSet"), "{e}");
        assert_eq!(parse(SPEC, "s", Some(Kind::StatefulSet), None).unwrap().kind, Kind::StatefulSet);
        let ok = parse(
            &SPEC.replace("name: vnf-web", "name: vnf-web\nkind: StatefulSet"),
            "s",
            Some(Kind::StatefulSet),
            None,
        );
        assert_eq!(ok.unwrap().kind, Kind::StatefulSet);
        assert!(parse(SPEC, "s", None, Some("other")).unwrap().namespace == "other");
        let e = parse(&SPEC.replace("name: vnf-web", "name: vnf-web\nnamespace: a"), "s", None, Some("b")).unwrap_err();
        assert!(e.to_string().contains("namespace"), "{e}");
    }

    #[test]
    fn each_bad_field_is_named() {
        for (from, to, field) in [
            ("name: vnf-web", "name: Vnf_Web", "name"),
            ("name: vnf-web", "name: vnf-web\nreplica: 3", "replica"),
            ("\"8080/tcp\"", "\"8080/tcp:99999\"", "ports[0]"),
            ("\"5000/udp:30080\"", "\"5000/sctp:\"", "ports[1]"),
            ("\"5000/udp:30080\"", "\"8080/tcp\"", "ports[1]"),
            ("period: 10s", "period: 5x", "readiness.period"),
            ("period: 10s", "period: 1.5", "readiness.period"),
            ("mount: /scratch", "mount: scratch", "volumes[1].mount"),
            ("mount: /scratch", "mount: /etc/web", "volumes[1].mount"),
            ("cpu: 100m", "cpu: lots", "resources.requests.cpu"),
            ("tier: front", "tier: \"front end\"", "labels.tier"),
            ("MODE: prod", "1MODE: prod", "env.1MODE"),
            ("image: registry.example/web:1.0", "image: \"--privileged\"", "image"),
            ("{tcp: 8080, period: 1m}", "{tcp: 8080, http: \"/x:1\"}", "liveness"),
            ("replicas: 2", "replicas: 5000", "replicas"),
            ("config_map: web-config", "config_map: ../etc", "volumes[0].config_map"),
        ] {
            assert!(SPEC.contains(from), "{from}");
            let e = err(&SPEC.replacen(from, to, 1));
            assert!(e.starts_with("spec.yaml: ") && e.contains(&format!(": {field}")), "{field}: {e}");
        }
    }
}
