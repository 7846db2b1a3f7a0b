//! The VNFD of a VNF package on disk, read as Tacker reads it (TOSCA-Metadata/TOSCA.meta's
//! Entry-Definitions and its imports, files of the package only), into `vnfd.rs`'s pure
//! scaling data. Shared by a CNF scale (aspects and deltas) and a cluster hook (Tacker v1
//! names a scaling aspect where its instance records VDU ids).

use crate::cnf::vnfd::{entry_definitions, hook_settings, load, scaling, Scaling};
use crate::error::{Error, Result};
use crate::lifecycle::package::Package;

const META: &str = "TOSCA-Metadata/TOSCA.meta";

/// The scaling data of the package's VNFD, of `flavour` when given; none when the package has
/// no TOSCA.meta. A VNFD that does not parse is bad input naming its file.
pub fn read_scaling(pkg: &Package, flavour: Option<&str>) -> Result<Scaling> {
    let read = |rel: &str| pkg.resolve(rel, META, rel, false).ok().and_then(|p| std::fs::read_to_string(p).ok());
    let Some(meta) = read(META) else { return Ok(Default::default()) };
    let entry = entry_definitions(&meta).ok_or_else(|| Error::input(META, "Entry-Definitions", "is missing"))?;
    let docs = load(&entry, &read).map_err(|m| Error::input(META, "Entry-Definitions", m))?;
    Ok(scaling(&docs, flavour))
}

/// The VNFD's settings for mgmt-driver (`interfaces.Vnflcm.inputs.mgmt_driver`, [`hook_settings`])
/// with the file that holds them, of `flavour` when given; none without a TOSCA.meta.
pub fn read_hook_settings(pkg: &Package, flavour: Option<&str>) -> Result<Option<(String, serde_json::Value)>> {
    let read = |rel: &str| pkg.resolve(rel, META, rel, false).ok().and_then(|p| std::fs::read_to_string(p).ok());
    let Some(meta) = read(META) else { return Ok(None) };
    let entry = entry_definitions(&meta).ok_or_else(|| Error::input(META, "Entry-Definitions", "is missing"))?;
    let docs = load(&entry, &read).map_err(|m| Error::input(META, "Entry-Definitions", m))?;
    Ok(hook_settings(&docs, flavour))
}
