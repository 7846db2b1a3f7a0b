//! Templated per-site runs (docs/fleet.md): one catalogue of sites, one set of templates, every
//! site's files rendered and checked before anything connects, then one operation run on many
//! sites at once, resumable, or as a Kubernetes Indexed Job.

pub mod apply;
pub mod catalogue;
pub mod csv_cells;
pub mod diff;
pub mod export;
pub mod inputs;
pub mod lexical_path;
pub mod plan;
pub mod pod_paths;
pub mod render;
pub mod rendered_check;
pub mod rollout;
pub mod status;
pub mod template;
pub mod template_helpers;
