//! The two kinds of workload: a Deployment or a StatefulSet, with the spellings the API, kubectl
//! and a spec use for each. Pure; its own file so every pure part can name it without the
//! module that holds the steps.

/// Deployment or StatefulSet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    Deployment,
    #[value(name = "statefulset")]
    StatefulSet,
}

impl Kind {
    /// As the API spells it (`kind:`).
    pub fn api(self) -> &'static str {
        match self {
            Kind::Deployment => "Deployment",
            Kind::StatefulSet => "StatefulSet",
        }
    }

    /// As kubectl addresses it.
    pub fn resource(self) -> &'static str {
        match self {
            Kind::Deployment => "deployment.apps",
            Kind::StatefulSet => "statefulset.apps",
        }
    }

    /// A spec's `kind:` (the API's spelling, or kubectl's lowercase one).
    pub fn parse(s: &str) -> Result<Kind, String> {
        match s {
            "Deployment" | "deployment" => Ok(Kind::Deployment),
            "StatefulSet" | "statefulset" => Ok(Kind::StatefulSet),
            _ => Err(format!("'{}' is not Deployment or StatefulSet", crate::error::excerpt(s))),
        }
    }
}
