//! The one result document every command prints with `-o json` (one line on stdout) or
//! `-o yaml`: what ran, whether it worked, its result, and the warnings and errors. Events go to
//! stderr in those modes, so stdout is exactly one document a VNFM or script can parse. The shape
//! is documented by `docs/result.schema.json`, and the tests check every JSON output against it.

use serde::Serialize;
use serde_json::{json, Value};

use crate::console;
use crate::error::Error;
use crate::render::Output;

pub const API_VERSION: &str = "mgmt-driver/v1";

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    pub api_version: &'static str,
    pub kind: &'static str,
    /// `exec`, `instantiate_end`, `cnf instantiate`, ...
    pub operation: String,
    pub ok: bool,
    pub dry_run: bool,
    /// Where it ran: the instance, the master, the Helm version, the hosts.
    pub context: Value,
    /// The operation's own result (null when it failed before producing one).
    pub result: Value,
    pub warnings: Vec<String>,
    pub errors: Vec<ErrorItem>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorItem {
    /// A short machine-readable kind (`input`, `connect`, `remote`, ...).
    pub kind: &'static str,
    pub message: String,
    /// The node it happened on, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

impl ErrorItem {
    pub fn from_error(e: &Error) -> ErrorItem {
        ErrorItem { kind: e.kind(), message: e.to_string(), node: e.node().map(str::to_string) }
    }
}

impl Envelope {
    pub fn new(operation: impl Into<String>, dry_run: bool) -> Envelope {
        Envelope {
            api_version: API_VERSION,
            kind: "Result",
            operation: operation.into(),
            ok: true,
            dry_run,
            context: json!({}),
            result: Value::Null,
            warnings: vec![],
            errors: vec![],
        }
    }

    pub fn error(mut self, e: &Error) -> Envelope {
        self.ok = false;
        self.errors.push(ErrorItem::from_error(e));
        self
    }

    /// Print the document for `-o json` / `-o yaml`; other modes print their own way.
    pub fn print(&self, output: Output) {
        match output {
            Output::Json => console::out_line(&serde_json::to_string(self).expect("envelope serializes")),
            Output::Yaml => console::out(&yaml_serde::to_string(self).expect("envelope serializes")),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schema every `-o json` document must satisfy (the integration tests check each one).
    fn validator() -> jsonschema::Validator {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/result.schema.json")).unwrap();
        jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap()
    }

    #[test]
    fn the_schema_accepts_what_we_print_and_refuses_what_we_must_not() {
        let v = validator();
        let e = Error::Skipped { node: "n1".into() };
        let mut ok = Envelope::new("exec", false);
        ok.context = json!({"hosts": 1});
        ok.result = json!({"okCount": 1, "failedCount": 0, "plannedCount": 0, "ms": 3,
                           "hosts": [{"host": "n1", "status": "ok", "ok": true, "exitCode": 0}]});
        let mut planned = Envelope::new("exec", true);
        planned.context = json!({"hosts": 1});
        planned.result = json!({"okCount": 0, "failedCount": 0, "plannedCount": 1, "ms": 3,
                                "hosts": [{"host": "n1", "status": "planned"}]});
        for doc in [
            serde_json::to_value(&ok).unwrap(),
            serde_json::to_value(&planned).unwrap(),
            serde_json::to_value(Envelope::new("mgmt-driver", true).error(&e)).unwrap(),
        ] {
            let errs: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
            assert!(errs.is_empty(), "{doc}: {errs:?}");
        }
        // ok with an error, a failure without one, an unknown error kind, a hook result without nodes.
        let mut bad = serde_json::to_value(&ok).unwrap();
        bad["errors"] = json!([{"kind": "remote", "message": "x"}]);
        let mut failed = serde_json::to_value(Envelope::new("exec", false)).unwrap();
        failed["ok"] = json!(false);
        let mut kind = serde_json::to_value(Envelope::new("exec", false).error(&e)).unwrap();
        kind["errors"][0]["kind"] = json!("oops");
        let mut hook = serde_json::to_value(Envelope::new("instantiate_end", false)).unwrap();
        hook["context"] = json!({"vnfInstanceId": "i", "state": "/s"});
        hook["result"] = json!({"vim": null, "vimConnectionInfo": []});
        // A planned host is not a succeeded one: no ok, no exit code; and only a dry run plans.
        let mut planned_ok = serde_json::to_value(&planned).unwrap();
        planned_ok["result"]["hosts"][0]["ok"] = json!(true);
        let mut planned_code = serde_json::to_value(&planned).unwrap();
        planned_code["result"]["hosts"][0]["exitCode"] = json!(0);
        let mut ran_in_plan = serde_json::to_value(&planned).unwrap();
        ran_in_plan["result"]["hosts"][0] = json!({"host": "n1", "status": "ok", "ok": true, "exitCode": 0});
        let mut planned_in_run = serde_json::to_value(&planned).unwrap();
        planned_in_run["dryRun"] = json!(false);
        for doc in [bad, failed, kind, hook, planned_ok, planned_code, ran_in_plan, planned_in_run] {
            assert!(!v.is_valid(&doc), "accepted: {doc}");
        }
    }

    #[test]
    fn an_error_names_kind_node_and_message() {
        let e = Error::Remote {
            node: "w2".into(),
            command: "x".into(),
            status: "exit code 1".into(),
            stderr_tail: String::new(),
        };
        let v = serde_json::to_value(Envelope::new("exec", false).error(&e)).unwrap();
        assert_eq!(v["ok"], false);
        assert_eq!(v["apiVersion"], API_VERSION);
        assert_eq!(v["errors"][0]["kind"], "remote");
        assert_eq!(v["errors"][0]["node"], "w2");
        let ok = serde_json::to_value(Envelope::new("exec", true)).unwrap();
        assert!(ok["errors"].as_array().unwrap().is_empty() && ok["dryRun"] == true);
    }
}
