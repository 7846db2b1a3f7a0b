//! A hook's inputs settled before anything runs: the document checked (`document.rs`), and
//! the options taken from the flags, then the document, then `additionalParams.mgmt_driver`
//! (the request's, which the VNFM's API user writes, may not name where state, host keys or a
//! kubeconfig go, and its inventory must be a file of the package).

use std::time::Duration;

use crate::duration::parse_duration;
use crate::error::{Error, Result};
use crate::lifecycle::package::Package;
use crate::vnfm::document::{DurationValue, HookRequest, Options};

/// Everything the action needs, settled from the document, the options and the flags.
pub struct Call {
    pub doc: HookRequest,
    /// The document's name in messages (its file, or `<stdin>`).
    pub name: String,
    pub opts: Options,
    pub install_timeout: Duration,
    pub drain_timeout: Duration,
}

/// What the command line gives: options (they win over the document's) and the timeouts.
#[derive(Clone, Debug, Default)]
pub struct Flags {
    pub options: Options,
    pub install_timeout: Option<Duration>,
    pub drain_timeout: Option<Duration>,
}

/// Check the document `text` (named `name`) and settle the options (flags, then the document,
/// then `additionalParams.mgmt_driver`; the document's relative paths are the package's).
pub fn prepare(text: &str, name: &str, flags: Flags) -> Result<Call> {
    let doc = HookRequest::parse(text, name)?;
    let csar = doc.tmp_csar_dir.clone();
    let mut doc_opts = doc.options.clone();
    if let (Some(dir), Some(inv)) = (&csar, &doc_opts.inventory) {
        doc_opts.inventory = Some(dir.join(inv));
    }
    let opts = flags.options.or(doc_opts).or(params_options(&doc, name)?);
    let install_timeout = match (&flags.install_timeout, &opts.install_timeout) {
        (Some(d), _) => *d,
        (None, Some(v)) => duration(v, "options.install_timeout")?,
        (None, None) => Duration::from_secs(2700),
    };
    let drain_timeout = match (&flags.drain_timeout, &opts.drain_timeout) {
        (Some(d), _) => *d,
        (None, Some(v)) => duration(v, "options.drain_timeout")?,
        (None, None) => Duration::from_secs(300),
    };
    Ok(Call { doc, name: name.to_string(), opts, install_timeout, drain_timeout })
}

/// Options from `request.additionalParams.mgmt_driver`. The request comes from the VNFM's API
/// user, not the operator: it may not choose where state, host keys or a kubeconfig go, and
/// its inventory must be a file of the package (a path elsewhere could make an error message
/// quote a file of the conductor).
fn params_options(doc: &HookRequest, name: &str) -> Result<Options> {
    let mut o = doc.params_options(name)?;
    let file = format!("{name}: request");
    for (key, set) in [
        ("state_dir", o.state_dir.is_some()),
        ("known_hosts", o.known_hosts.is_some()),
        ("kubeconfig_out", o.kubeconfig_out.is_some()),
    ] {
        if set {
            return Err(Error::input(
                &file,
                format!("additionalParams.mgmt_driver.{key}"),
                "is the operator's setting: give it as a flag or in the document's options, not in the request",
            ));
        }
    }
    if let Some(inv) = &o.inventory {
        let field = "additionalParams.mgmt_driver.inventory";
        let dir = doc
            .tmp_csar_dir
            .as_ref()
            .ok_or_else(|| Error::input(&file, field, "names a file of the package, and there is no tmp_csar_dir"))?;
        let rel = inv.to_str().ok_or_else(|| Error::input(&file, field, "is not UTF-8"))?;
        o.inventory = Some(Package::open(dir)?.resolve(rel, &file, field, false)?);
    }
    Ok(o)
}

fn duration(v: &DurationValue, field: &str) -> Result<Duration> {
    parse_duration(&v.text()).map_err(|e| Error::input("hook request", field, e))
}
