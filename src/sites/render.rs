//! Render every selected site into `OUT/<site>/`: `site.json` (name, index, labels, package)
//! and the templates' files. This is the contract `sites plan` / `sites apply` read (and what an
//! operator diffs): each site's folder holds exactly what its operations will use.
//!
//! All or nothing: every site is rendered in memory first; one template error stops the render
//! before anything is written. Then each site's folder is written beside the old one and swapped
//! in, so a folder never mixes two renders, and a file a template no longer produces does not
//! linger. Render never removes another site's folder: a selection (`--only`, `--selector`)
//! re-renders those sites and leaves every other folder as it was, and a site dropped from the
//! catalogue keeps its folder (its `cluster/terminate.json` is what tears it down). A site's
//! `index` is its place in the whole catalogue, not in the selection, so what a site renders does
//! not depend on which others were rendered with it, and sites rendered at different times
//! still sort as the catalogue lists them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{excerpt, Error, Result};
use crate::input_limit::{read_capped, REQUEST_MAX_BYTES};
use crate::sites::catalogue::{check_site_name, context, Catalogue};
use crate::sites::lexical_path::clean;
use crate::sites::template::Templates;

/// The name of the description every rendered site folder holds.
pub const SITE_FILE: &str = "site.json";

/// One rendered site, as `site.json` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedSite {
    pub name: String,
    pub index: usize,
    pub labels: BTreeMap<String, String>,
    /// The site's folder (`OUT/<name>`).
    pub dir: PathBuf,
    /// The VNF package folder, absolute, when the catalogue names one.
    pub package: Option<PathBuf>,
    /// The secret references the catalogue declares (`secrets`: `@env:VAR`, `@file:PATH`):
    /// the operator's own words, so `sites plan`/`apply` honour exactly these in the site's
    /// requests with no further flag (`secret_ref.rs`).
    pub secret_refs: Vec<String>,
}

impl RenderedSite {
    /// What the site's requests may reference: the declared references, and whatever the
    /// operator's flags allow (`allowed`).
    pub fn secret_policy(&self, allowed: &crate::secret_ref::Allowed) -> crate::secret_ref::Policy {
        let mut a = allowed.clone();
        a.declared.extend(self.secret_refs.iter().cloned());
        crate::secret_ref::Policy::Operator(a)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SiteFile {
    name: String,
    index: usize,
    labels: BTreeMap<String, String>,
    package: Option<PathBuf>,
    /// Absent in a render made before references were confined: none declared.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    secret_refs: Vec<String>,
}

/// Render every selected site into OUT/<site>/ (site.json + the templates' files); nothing
/// connects. Errors: a template error names site, template file and line; nothing is written for
/// any site if one fails.
pub fn render_all(
    cat: &Catalogue,
    out: &Path,
    only: &[String],
    selector: &[(String, String)],
) -> Result<Vec<RenderedSite>> {
    let selected = cat.select(only, selector)?;
    let templates = Templates::load(&cat.templates)?;
    let package = cat.package.as_deref().map(absolute);
    let secret_refs: Vec<String> =
        cat.secrets.values().map(|r| r.marker()).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    let mut rendered = Vec::with_capacity(selected.len());
    for (index, site) in &selected {
        let files = templates.render(&site.name, &context(cat, site, *index), &cat.not_secret)?;
        rendered.push((*index, *site, files));
    }
    let werr =
        |p: &Path, e: std::io::Error| Error::input(p.display().to_string(), "render", format!("cannot write: {e}"));
    std::fs::create_dir_all(out).map_err(|e| werr(out, e))?;
    // Refuse before writing anything if a site's folder exists and is not ours.
    for (_, site, _) in &rendered {
        let dir = out.join(&site.name);
        if dir.exists() && !dir.join(SITE_FILE).is_file() {
            return Err(Error::input(
                dir.display().to_string(),
                "render",
                "exists and was not written by render (no site.json); move it away or choose another output folder",
            ));
        }
    }
    let mut result = Vec::with_capacity(rendered.len());
    for (index, site, files) in rendered {
        let dir = out.join(&site.name);
        let tmp = out.join(format!(".{}.rendering", site.name));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| werr(&tmp, e))?;
        }
        for (rel, text) in &files {
            let p = tmp.join(rel);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).map_err(|e| werr(parent, e))?;
            }
            std::fs::write(&p, text).map_err(|e| werr(&p, e))?;
        }
        let desc = SiteFile {
            name: site.name.clone(),
            index,
            labels: site.labels.clone(),
            package: package.clone(),
            secret_refs: secret_refs.clone(),
        };
        let mut json = serde_json::to_string_pretty(&desc).unwrap_or_default();
        json.push('\n');
        std::fs::create_dir_all(&tmp).map_err(|e| werr(&tmp, e))?;
        std::fs::write(tmp.join(SITE_FILE), json).map_err(|e| werr(&tmp, e))?;
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| werr(&dir, e))?;
        }
        std::fs::rename(&tmp, &dir).map_err(|e| werr(&dir, e))?;
        result.push(RenderedSite {
            name: site.name.clone(),
            index,
            labels: site.labels.clone(),
            dir,
            package: package.clone(),
            secret_refs: secret_refs.clone(),
        });
    }
    Ok(result)
}

/// Read back a rendered dir (site.json of each subdirectory), for `--rendered DIR`; sorted by
/// catalogue index, then name. Indices need not be 0..n: a selection rendered alone, or a site
/// dropped from the catalogue, leaves gaps (`--index` counts in the sorted selection, and an
/// exported Job renumbers what it carries). Subfolders without a `site.json` are not sites and are skipped, and so are hidden
/// ones (a render cut short leaves `.NAME.rendering`).
pub fn load_rendered(dir: &Path) -> Result<Vec<RenderedSite>> {
    let at = dir.display().to_string();
    let rd = std::fs::read_dir(dir).map_err(|e| Error::input(&at, "rendered", format!("cannot read: {e}")))?;
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| Error::input(&at, "rendered", format!("cannot read: {e}")))?;
        let p = entry.path();
        let f = p.join(SITE_FILE);
        // `.NAME.rendering` is a render cut short (render_all swaps it in when done).
        if !p.is_dir() || !f.is_file() || entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let shown = f.display().to_string();
        let text = read_capped(&f, REQUEST_MAX_BYTES, "site")?;
        let de = &mut serde_json::Deserializer::from_str(&text);
        let s: SiteFile = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            Error::input(&shown, if path == "." { "site".into() } else { path }, e.into_inner().to_string())
        })?;
        check_site_name(&s.name).map_err(|m| Error::input(&shown, "name", m))?;
        let folder = entry.file_name().to_string_lossy().to_string();
        if folder != s.name {
            return Err(Error::input(
                &shown,
                "name",
                format!("'{}' but the folder is '{}'; a site's folder is its name", s.name, excerpt(&folder)),
            ));
        }
        for (i, r) in s.secret_refs.iter().enumerate() {
            if matches!(crate::secret_ref::parse(r), crate::secret_ref::Written::Literal(_)) {
                return Err(Error::input(&shown, format!("secret_refs[{i}]"), "is not a @env:/@file: reference"));
            }
        }
        out.push(RenderedSite {
            name: s.name,
            index: s.index,
            labels: s.labels,
            dir: p,
            package: s.package,
            secret_refs: s.secret_refs,
        });
    }
    out.sort_by(|a, b| (a.index, &a.name).cmp(&(b.index, &b.name)));
    if out.is_empty() {
        return Err(Error::input(&at, "rendered", "holds no rendered site (no */site.json); run sites render first"));
    }
    Ok(out)
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p)
        .unwrap_or_else(|_| clean(&std::env::current_dir().map(|d| d.join(p)).unwrap_or_else(|_| p.to_path_buf())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(extra_tpl: &[(&str, &str)], sites: &str) -> (tempfile::TempDir, Catalogue) {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("tpl");
        std::fs::create_dir_all(t.join("cluster")).unwrap();
        std::fs::write(
            t.join("inventory.yaml.tera"),
            "groups:\n  m:\n    - {name: {{ site.name }}-m1, ssh_ip: {{ nth_host(cidr=network, n=10) }}}\n",
        )
        .unwrap();
        std::fs::write(
            t.join("cluster/instantiate.json.tera"),
            "{\"pw\": {{ secrets.pw | json }}, \"i\": {{ site.index }}}\n",
        )
        .unwrap();
        for (n, text) in extra_tpl {
            std::fs::write(t.join(n), text).unwrap();
        }
        std::fs::create_dir_all(d.path().join("pkg")).unwrap();
        let f = d.path().join("sites.yaml");
        std::fs::write(
            &f,
            format!("apiVersion: mgmt-driver/v1\nkind: SiteCatalogue\ntemplates: tpl\npackage: pkg\nsecrets: {{pw: {{env: EDGE_PW}}}}\n{sites}"),
        )
        .unwrap();
        let c = Catalogue::load(&f).unwrap();
        (d, c)
    }

    const SITES: &str = "sites:\n  - {name: par1, labels: {region: eu}, vars: {network: 10.20.1.0/24}}\n  - {name: nyc1, labels: {region: us}, vars: {network: 10.20.2.0/24}}\n  - {name: ber2, labels: {region: eu}, vars: {network: 10.20.3.0/24}}\n";

    #[test]
    fn renders_every_site_and_reads_them_back() {
        let (d, c) = setup(&[], SITES);
        let out = d.path().join("out");
        let r = render_all(&c, &out, &[], &[("region".into(), "eu".into())]).unwrap();
        // Indices are the sites' places in the catalogue, not in the selection.
        assert_eq!(r.iter().map(|s| (s.name.as_str(), s.index)).collect::<Vec<_>>(), [("par1", 0), ("ber2", 2)]);
        let inv = std::fs::read_to_string(out.join("ber2/inventory.yaml")).unwrap();
        assert_eq!(inv, "groups:\n  m:\n    - {name: ber2-m1, ssh_ip: 10.20.3.10}\n");
        let req = std::fs::read_to_string(out.join("ber2/cluster/instantiate.json")).unwrap();
        assert_eq!(req, "{\"pw\": \"@env:EDGE_PW\", \"i\": 2}\n");
        let pkg = std::fs::canonicalize(d.path().join("pkg")).unwrap();
        let back = load_rendered(&out).unwrap();
        assert_eq!(back, r);
        assert_eq!(back[0].package.as_deref(), Some(pkg.as_path()));
        let sj: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("par1/site.json")).unwrap()).unwrap();
        // The catalogue's declared references are recorded: what plan/apply honour for the site.
        let want = serde_json::json!({"name": "par1", "index": 0, "labels": {"region": "eu"}, "package": pkg,
                                      "secret_refs": ["@env:EDGE_PW"]});
        assert_eq!(sj, want);
        assert!(!out.join("nyc1").exists());

        // A later render of another selection replaces its sites' folders (a stale file goes)
        // and leaves every other site's folder as it was.
        std::fs::write(out.join("par1/stale.json"), "{}").unwrap();
        let ber2 = std::fs::read_to_string(out.join("ber2/cluster/instantiate.json")).unwrap();
        let r = render_all(&c, &out, &["par1".into(), "nyc1".into()], &[]).unwrap();
        assert_eq!(r.len(), 2);
        assert!(!out.join("par1/stale.json").exists());
        assert_eq!(std::fs::read_to_string(out.join("ber2/cluster/instantiate.json")).unwrap(), ber2);
        let back: Vec<_> = load_rendered(&out).unwrap().into_iter().map(|s| (s.name, s.index)).collect();
        assert_eq!(back, [("par1".into(), 0), ("nyc1".into(), 1), ("ber2".into(), 2)]);
    }

    /// A mistyped selector is an error, and every folder rendered before is still there.
    #[test]
    fn a_selection_matching_nothing_is_refused_and_deletes_nothing() {
        let (d, c) = setup(&[], SITES);
        let out = d.path().join("out");
        render_all(&c, &out, &[], &[]).unwrap();
        let e = render_all(&c, &out, &[], &[("region".into(), "ue".into())]).unwrap_err().to_string();
        assert!(e.starts_with("--selector: region=ue: matches no site in"), "{e}");
        assert_eq!(load_rendered(&out).unwrap().len(), 3);
        // A site rendered alone keeps its catalogue index; the others keep their folders.
        let r = render_all(&c, &out, &["ber2".into()], &[]).unwrap();
        assert_eq!(r[0].index, 2);
        let back: Vec<_> = load_rendered(&out).unwrap().into_iter().map(|s| s.name).collect();
        assert_eq!(back, ["par1", "nyc1", "ber2"]);
        // Gaps (a site dropped from the catalogue, or never rendered) are not an error.
        std::fs::remove_dir_all(out.join("nyc1")).unwrap();
        let back: Vec<_> = load_rendered(&out).unwrap().into_iter().map(|s| (s.name, s.index)).collect();
        assert_eq!(back, [("par1".into(), 0), ("ber2".into(), 2)]);
    }

    #[test]
    fn one_failing_site_writes_nothing() {
        let sites = "sites:\n  - {name: par1, vars: {network: 10.20.1.0/24}}\n  - {name: bad1, vars: {network: 10.20.2.0/29}}\n";
        let (d, c) = setup(&[], sites);
        let out = d.path().join("out");
        let e = render_all(&c, &out, &[], &[]).unwrap_err().to_string();
        let tpl = d.path().join("tpl/inventory.yaml.tera");
        assert!(
            e.starts_with(&format!("site bad1: {}:3: Function call 'nth_host' failed: n=10 is past", tpl.display())),
            "{e}"
        );
        assert!(!out.exists() || std::fs::read_dir(&out).unwrap().next().is_none());
    }

    #[test]
    fn foreign_folders_are_not_overwritten_and_bad_site_files_are_refused() {
        let (d, c) = setup(&[], SITES);
        let out = d.path().join("out");
        std::fs::create_dir_all(out.join("par1")).unwrap();
        std::fs::write(out.join("par1/mine.txt"), "x").unwrap();
        let e = render_all(&c, &out, &[], &[]).unwrap_err().to_string();
        assert!(e.contains("was not written by render"), "{e}");
        assert!(out.join("par1/mine.txt").exists());
        std::fs::remove_dir_all(out.join("par1")).unwrap();
        render_all(&c, &out, &[], &[]).unwrap();
        // A render cut short between writing and swapping in is not a site.
        std::fs::create_dir_all(out.join(".par1.rendering")).unwrap();
        std::fs::copy(out.join("par1/site.json"), out.join(".par1.rendering/site.json")).unwrap();
        assert_eq!(load_rendered(&out).unwrap().len(), 3);
        render_all(&c, &out, &[], &[]).unwrap();
        assert!(!out.join(".par1.rendering").exists());
        std::fs::write(
            out.join("nyc1/site.json"),
            "{\"name\": \"par1\", \"index\": 1, \"labels\": {}, \"package\": null}",
        )
        .unwrap();
        let e = load_rendered(&out).unwrap_err().to_string();
        assert!(e.contains("name: 'par1' but the folder is 'nyc1'"), "{e}");
        std::fs::write(out.join("nyc1/site.json"), "{\"name\": \"nyc1\", \"index\": 1, \"x\": 1}").unwrap();
        let e = load_rendered(&out).unwrap_err().to_string();
        assert!(e.contains("unknown field `x`"), "{e}");
        let e = load_rendered(&d.path().join("tpl")).unwrap_err().to_string();
        assert!(e.contains("holds no rendered site"), "{e}");
    }

    #[test]
    fn the_env_secret_value_is_never_rendered() {
        std::env::set_var("EDGE_PW_RENDER_TEST", "v3ry-s3cret");
        let (d, mut c) = setup(&[], SITES);
        c.secrets.insert("pw".into(), crate::sites::catalogue::SecretRef::Env("EDGE_PW_RENDER_TEST".into()));
        let out = d.path().join("out");
        render_all(&c, &out, &[], &[]).unwrap();
        let mut n = 0;
        for s in ["par1", "nyc1", "ber2"] {
            for f in ["inventory.yaml", "cluster/instantiate.json", "site.json"] {
                let t = std::fs::read_to_string(out.join(s).join(f)).unwrap();
                assert!(!t.contains("v3ry-s3cret"), "{s}/{f}");
                n += 1;
            }
            let req = std::fs::read_to_string(out.join(s).join("cluster/instantiate.json")).unwrap();
            assert!(req.contains("@env:EDGE_PW_RENDER_TEST"), "{req}");
        }
        assert_eq!(n, 9);
    }

    /// Every file under `dir`, relative path → text.
    fn files(dir: &Path) -> BTreeMap<String, String> {
        fn walk(root: &Path, d: &Path, out: &mut BTreeMap<String, String>) {
            for e in std::fs::read_dir(d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(root, &p, out);
                } else {
                    out.insert(
                        p.strip_prefix(root).unwrap().display().to_string(),
                        std::fs::read_to_string(&p).unwrap(),
                    );
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(dir, dir, &mut out);
        out
    }

    fn shipped() -> (tempfile::TempDir, Catalogue) {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        (tempfile::tempdir().unwrap(), Catalogue::load(&repo.join("samples/sites/sites.yaml")).unwrap())
    }

    fn inventory(dir: &Path) -> crate::inventory::Inventory {
        let opts =
            crate::inventory::LoadOptions { ssh_config: crate::inventory::SshConfigSource::None, ..Default::default() };
        let f = dir.join("inventory.yaml");
        let text = std::fs::read_to_string(&f).unwrap();
        crate::inventory::Inventory::parse(&text, &f.display().to_string(), dir, &|_| None, &opts).unwrap()
    }

    /// The shipped example (samples/sites + templates/edge): every site's files go through the
    /// parsers the operations use, the CSV catalogue renders the same bytes, and each file
    /// says what the site's variables say.
    #[test]
    fn the_shipped_example_renders_what_the_operations_accept() {
        use crate::request::{self, InstantiateRequest, ScaleRequest, TerminateRequest};
        let (d, cat) = shipped();
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        let r = render_all(&cat, &d.path().join("yaml"), &[], &[]).unwrap();
        assert_eq!(r.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["par1", "ber2", "nyc1", "sfo1"]);
        assert_eq!(r[0].package.as_deref(), Some(repo.join("target/edge-package").as_path()));
        let csv = Catalogue::load(&repo.join("samples/sites/sites-from-csv.yaml")).unwrap();
        render_all(&csv, &d.path().join("csv"), &[], &[]).unwrap();
        let (a, b) = (files(&d.path().join("yaml")), files(&d.path().join("csv")));
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
        for (k, v) in &a {
            assert_eq!(v, &b[k], "{k} differs between sites.yaml and sites-from-csv.yaml");
        }
        let want_files = [
            "cluster/instantiate.json",
            "cluster/scale-in.json",
            "cluster/scale-out.json",
            "cluster/terminate.json",
            "cnf/app.json",
            "inventory.yaml",
            "site.json",
            "values/app.yaml",
        ];
        assert_eq!(files(&r[0].dir).keys().collect::<Vec<_>>(), want_files);
        let key = repo.join("target/lab/edge1/id_ed25519");
        assert!(a["par1/inventory.yaml"].contains(&format!("  identity_file: \"{}\"\n", key.display())));
        // The inventory loader wants the key file to exist: the same render with a key of ours.
        let mut cat = cat;
        let key = d.path().join("id_test");
        std::fs::write(&key, "not a real key").unwrap();
        for site in &mut cat.sites {
            site.vars.insert("identity_file".into(), key.display().to_string().into());
        }
        // The cluster params resolve a `@file:` password when they parse it: a file of ours too.
        let pw = d.path().join("node-password");
        std::fs::write(&pw, "not-a-real-password\n").unwrap();
        cat.secrets.insert("node_password".into(), crate::sites::catalogue::SecretRef::File(pw.clone()));
        let r = render_all(&cat, &d.path().join("parsed"), &[], &[]).unwrap();
        for (i, s) in r.iter().enumerate() {
            let inv = inventory(&s.dir);
            let names: Vec<_> = inv.hosts.iter().map(|h| (h.name.as_str(), h.addr.as_str(), h.user.as_str())).collect();
            let (m, w) = (format!("198.18.{}.11", 60 + i), format!("198.18.{}.12", 60 + i));
            let (mn, wn) = (format!("{}-master1", s.name), format!("{}-worker1", s.name));
            assert_eq!(names, [(mn.as_str(), m.as_str(), "root"), (wn.as_str(), w.as_str(), "root")]);
            assert_eq!(inv.hosts[0].groups, ["master_instance"]);
            assert_eq!(inv.hosts[1].groups, ["worker_instance"]);
            assert_eq!(inv.hosts[0].auth.identity_file.as_deref(), Some(key.as_path()));
            assert!(inv.cps.is_empty());

            let file = s.dir.join("cluster/instantiate.json");
            let req: InstantiateRequest = request::load(&file).unwrap();
            let p = crate::cluster::params::ClusterParams::from_additional_params(
                &req.additional_params,
                &file.display().to_string(),
                &format!("site-{}", s.name),
                &s.secret_policy(&Default::default()),
            )
            .unwrap();
            let k = &req.additional_params["k8s_cluster_installation_param"];
            assert_eq!(k["vim_name"], format!("edge-{}", s.name));
            assert_eq!(k["master_node"]["cluster_cp_name"], "masterNode_CP1");
            assert_eq!(k["master_node"]["password"], format!("@file:{}", pw.display()));
            assert_eq!(p.master.password.expose(), "not-a-real-password");
            assert_eq!(k["offline_artifacts_path"], "Files/offline");
            assert_eq!(k["helm_installation_script_path"], "Scripts/install_helm.sh");
            let env = if s.name == "sfo1" {
                serde_json::json!({"K8S_MINOR": "v1.31", "K8S_ALLOW_ANY_OS": "1"})
            } else {
                serde_json::json!({"K8S_ALLOW_ANY_OS": "1"})
            };
            assert_eq!(k["script_environment"], env);
            assert_eq!(p.script_environment.len(), env.as_object().unwrap().len());

            let t: TerminateRequest = request::load(&s.dir.join("cluster/terminate.json")).unwrap();
            assert_eq!(t.termination_type.as_deref(), Some("GRACEFUL"));
            for f in ["scale-out", "scale-in"] {
                let _: ScaleRequest = request::load(&s.dir.join(format!("cluster/{f}.json"))).unwrap();
            }
            let file = s.dir.join("cnf/app.json");
            let req: InstantiateRequest = request::load(&file).unwrap();
            let c = crate::cnf::params::CnfParams::from_additional_params(
                &req.additional_params,
                &file.display().to_string(),
            )
            .unwrap();
            assert_eq!(c.namespace, "edge");
            assert_eq!(c.releases.len(), 1);
            let values: serde_json::Value =
                yaml_serde::from_str(&std::fs::read_to_string(s.dir.join("values/app.yaml")).unwrap()).unwrap();
            assert_eq!(Some(&values), c.releases[0].values.as_ref());
            let replicas = if s.name == "ber2" { 2 } else { 1 };
            assert_eq!(values["replicaCount"], replicas, "{}", s.name);
            assert_eq!(req.additional_params["vdu_mapping"]["VDU1"]["name"], "app-samplecnf");
        }
    }

    /// 3 masters behind a VIP, 2 workers, and the lab's mduser with a password from a file: the
    /// inventory takes the password by reference (read when loaded), and no rendered file holds it.
    #[test]
    fn the_shipped_templates_for_three_masters_and_a_password_login() {
        let (d, mut cat) = shipped();
        let pw = d.path().join("password");
        std::fs::write(&pw, "Edge-Node-Pw-9").unwrap();
        cat.secrets.insert("node_password".into(), crate::sites::catalogue::SecretRef::File(pw.clone()));
        for (k, v) in [
            ("masters", serde_json::json!(3)),
            ("workers", serde_json::json!(2)),
            ("node_user", serde_json::json!("mduser")),
            ("helm", serde_json::json!(false)),
            ("offline_artifacts_path", serde_json::Value::Null),
            ("script_environment", serde_json::json!({})),
        ] {
            cat.defaults.insert(k.into(), v);
        }
        for site in &mut cat.sites {
            site.vars.remove("identity_file");
        }
        let out = d.path().join("out");
        let r = render_all(&cat, &out, &["nyc1".into()], &[]).unwrap();
        let inv = inventory(&r[0].dir);
        let hosts: Vec<_> =
            inv.hosts.iter().map(|h| (h.name.as_str(), h.addr.as_str(), h.groups[0].as_str())).collect();
        assert_eq!(
            hosts,
            [
                ("nyc1-master1", "198.18.62.11", "master_instance"),
                ("nyc1-master2", "198.18.62.12", "master_instance"),
                ("nyc1-master3", "198.18.62.13", "master_instance"),
                ("nyc1-worker1", "198.18.62.14", "worker_instance"),
                ("nyc1-worker2", "198.18.62.15", "worker_instance"),
            ]
        );
        assert_eq!(inv.cps.get("vip_CP").map(String::as_str), Some("198.18.62.100"));
        assert_eq!(inv.hosts[0].user, "mduser");
        assert_eq!(inv.hosts[0].auth.password.as_ref().map(|p| p.expose()), Some("Edge-Node-Pw-9"));
        let text = files(&out);
        assert!(text["nyc1/inventory.yaml"].contains(&format!("password_file: \"{}\"", pw.display())));
        for (f, t) in &text {
            assert!(!t.contains("Edge-Node-Pw-9"), "{f} holds the password");
        }
        let req: serde_json::Value = serde_json::from_str(&text["nyc1/cluster/instantiate.json"]).unwrap();
        let k = &req["additionalParams"]["k8s_cluster_installation_param"];
        assert_eq!(k["master_node"]["cluster_cp_name"], "vip_CP");
        assert!(k.get("helm_installation_script_path").is_none() && k.get("offline_artifacts_path").is_none());
        assert_eq!(k["script_environment"], serde_json::json!({}));
        crate::cluster::params::ClusterParams::from_additional_params(
            req["additionalParams"].as_object().unwrap(),
            "instantiate.json",
            "site-nyc1",
            &r.iter().find(|s| s.name == "nyc1").expect("rendered").secret_policy(&Default::default()),
        )
        .unwrap();

        // No workers: an empty group, still an inventory.
        cat.defaults.insert("workers".into(), serde_json::json!(0));
        let r = render_all(&cat, &out, &["nyc1".into()], &[]).unwrap();
        assert_eq!(inventory(&r[0].dir).hosts.len(), 3);
    }

    /// The shipped templates' own checks and strictness name the site, the template and the line.
    #[test]
    fn the_shipped_templates_refuse_bad_sites_by_name_file_and_line() {
        let (d, mut cat) = shipped();
        let out = d.path().join("out");
        let tpl = Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/edge");
        let at = |f: &str| format!("{}", tpl.join(f).display());
        cat.sites[1].vars.insert("masters".into(), serde_json::json!(2));
        let e = render_all(&cat, &out, &[], &[]).unwrap_err().to_string();
        assert!(e.starts_with(&format!("site ber2: {}:", at("_checks.tera"))), "{e}");
        assert!(e.contains("masters must be 1 or 3"), "{e}");
        cat.sites[1].vars.remove("masters");
        cat.sites[0].vars.remove("network");
        let e = render_all(&cat, &out, &[], &[]).unwrap_err().to_string();
        let line = std::fs::read_to_string(tpl.join("cluster/instantiate.json.tera")).unwrap();
        let _ = line;
        assert!(e.starts_with("site par1: "), "{e}");
        assert!(e.contains("Variable `network` not found"), "{e}");
        let inv = std::fs::read_to_string(tpl.join("inventory.yaml.tera")).unwrap();
        let n = inv.lines().position(|l| l.contains("cidr=network")).unwrap() + 1;
        assert!(e.contains(&format!("{}:{n}: ", at("inventory.yaml.tera"))), "{e}");
        cat.sites[0].vars.insert("network".into(), serde_json::json!("198.18.60.0/29"));
        let e = render_all(&cat, &out, &[], &[]).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "site par1: {}:{n}: Function call 'nth_host' failed: n=11 is past",
                at("inventory.yaml.tera")
            )),
            "{e}"
        );
        cat.sites[0].vars.insert("network".into(), serde_json::json!("198.18.60.0/24"));
        cat.secrets.clear();
        let e = render_all(&cat, &out, &[], &[]).unwrap_err().to_string();
        assert!(e.contains("Variable `secrets.node_password` not found"), "{e}");
        assert!(!out.exists(), "nothing is written when a site fails");
    }

    /// The shipped templates (templates/edge) quote or type-check every catalogue value: a
    /// site whose strings carry YAML or JSON structure renders files with exactly the shipped
    /// keys, and a number given as text with structure in it is refused before anything is
    /// written.
    #[test]
    fn shipped_templates_take_no_structure_from_a_value() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        let sample = std::fs::read_to_string(repo.join("samples/sites/sites.yaml")).unwrap();
        let head = sample.split("\nsites:\n").next().unwrap();
        let head = head.replace(
            "templates: ../../templates/edge",
            &format!("templates: {}", repo.join("templates/edge").display()),
        );
        let d = tempfile::tempdir().unwrap();
        let evil = "x\n  jump: evil.example\n  known_hosts: /dev/null\n#";
        let json_evil = "x\", \"evil\": {\"a\": \"";
        let site = format!(
            "sites:\n  - name: par1\n    vars: {{network: 198.18.60.0/24, node_user: {e}, \
             vim_name_prefix: {j}, flavour_id: {j}, termination_type: {j}, \
             app: {{release: {e}, namespace: {j}, chart_name: {j}}}}}\n",
            e = serde_json::to_string(evil).unwrap(),
            j = serde_json::to_string(json_evil).unwrap(),
        );
        let f = d.path().join("sites.yaml");
        std::fs::write(&f, format!("{head}\n{site}")).unwrap();
        let c = Catalogue::load(&f).unwrap();
        let out = d.path().join("out");
        render_all(&c, &out, &[], &[]).unwrap();
        let inv: serde_json::Value =
            yaml_serde::from_str(&std::fs::read_to_string(out.join("par1/inventory.yaml")).unwrap()).unwrap();
        let shipped = ["user", "port", "identity_file", "password", "password_env", "password_file", "host_key_check"];
        assert!(inv["defaults"].as_object().unwrap().keys().all(|k| shipped.contains(&k.as_str())), "{inv}");
        assert_eq!(inv["defaults"]["user"], evil);
        for f in ["cluster/instantiate.json", "cnf/app.json", "cluster/terminate.json"] {
            let text = std::fs::read_to_string(out.join("par1").join(f)).unwrap();
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert!(!has_key(&v, "evil"), "{f}: {v}");
        }
        let values = std::fs::read_to_string(out.join("par1/values/app.yaml")).unwrap();
        let v: serde_json::Value = yaml_serde::from_str(&values).unwrap();
        assert!(v.get("jump").is_none() && v.get("known_hosts").is_none(), "{values}");

        // A value the inventory types (an enum): the rendered inventory's shape refuses it.
        let site = format!(
            "sites:\n  - {{name: par1, vars: {{network: 198.18.60.0/24, host_key_check: {}}}}}\n",
            serde_json::to_string(evil).unwrap()
        );
        std::fs::write(&f, format!("{head}\n{site}")).unwrap();
        let c = Catalogue::load(&f).unwrap();
        let e = render_all(&c, &d.path().join("out2"), &[], &[]).unwrap_err().to_string();
        assert!(e.starts_with("site par1: inventory.yaml: inventory: defaults.host_key_check: unknown variant"), "{e}");

        // A port given as text: the catalogue refuses it (its default is a number).
        let site = "sites:\n  - {name: par1, vars: {network: 198.18.60.0/24, ssh_port: \"22\\n  jump: evil\"}}\n";
        std::fs::write(&f, format!("{head}\n{site}")).unwrap();
        let e = Catalogue::load(&f).unwrap_err().to_string();
        assert!(e.contains("sites[0].vars.ssh_port: is a string, but its default declares a number"), "{e}");
    }

    fn has_key(v: &serde_json::Value, key: &str) -> bool {
        match v {
            serde_json::Value::Object(m) => m.iter().any(|(k, x)| k == key || has_key(x, key)),
            serde_json::Value::Array(a) => a.iter().any(|x| has_key(x, key)),
            _ => false,
        }
    }

    /// A template that writes a value bare is caught by the rendered inventory's shape: a port
    /// that rendered as text is refused naming the site and the file.
    #[test]
    fn a_rendered_inventory_must_have_an_inventorys_shape() {
        let tpl = "defaults:\n  port: {{ port | json }}\ngroups:\n  m:\n    - {name: a, ssh_ip: 10.0.0.1}\n";
        let sites = "defaults: {port: 22}\nsites:\n  - {name: par1, vars: {network: 10.20.1.0/24}}\n  - {name: ber2, vars: {network: 10.20.2.0/24, port: 23}}\n";
        let (d, c) = setup(&[("inventory.yaml.tera", tpl)], sites);
        render_all(&c, &d.path().join("out"), &[], &[]).unwrap();
        let tpl = "defaults:\n  port: {{ port | json }}\n  jumpp: 1\n";
        let (d, c) = setup(&[("inventory.yaml.tera", tpl)], sites);
        let e = render_all(&c, &d.path().join("out"), &[], &[]).unwrap_err().to_string();
        assert!(e.starts_with("site par1: inventory.yaml: inventory: defaults: unknown field `jumpp`"), "{e}");
        assert!(!d.path().join("out/par1").exists());
    }
}
