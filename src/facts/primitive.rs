//! What a primitive's run left on its EE: its exit status and the JSON the script wrote to
//! `$MGMT_DRIVER_RESULT` (`primitive_result.sh`, which also removes the run directory and the
//! parameters in it). The script is the package vendor's and the EE may be hostile: the status
//! must be a number or `none`, the result at most [`RESULT_MAX`] bytes of JSON.

use std::time::Duration;

use serde_json::Value;

use crate::command::RemoteCommand;
use crate::error::Result;
use crate::facts::{Fact, Wait};
use crate::redact::Redact;
use crate::remote::PRIMITIVE_RESULT;

/// The largest structured result a script may write.
pub const RESULT_MAX: usize = 64 << 10;
/// Reading the result and cleaning up.
pub const RESULT_LIMIT: Duration = Duration::from_secs(60);

/// The run's exit status (None: it never finished) and its result, from the run directory
/// `dir`; read as the user the primitive ran as (`root`: through sudo for another login).
pub struct PrimitiveResult<'a> {
    pub dir: &'a str,
    pub root: bool,
}

impl Fact for PrimitiveResult<'_> {
    type Value = (Option<u32>, Option<Value>);

    fn what(&self) -> String {
        "the primitive's result".into()
    }

    /// Its output is the raw result, which may hold secrets: parsed, never streamed as events.
    fn command(&self) -> Result<RemoteCommand> {
        Ok(RemoteCommand::new(PRIMITIVE_RESULT.command(&[self.dir.to_string(), RESULT_MAX.to_string()])?)
            .with_capture(RESULT_MAX + 64)
            .with_redact(Redact::All))
    }

    fn as_root(&self) -> bool {
        self.root
    }

    fn wait(&self) -> Wait {
        Wait::For(RESULT_LIMIT)
    }

    /// A plan assumes the run succeeded and wrote nothing.
    fn placeholder(&self) -> Self::Value {
        (Some(0), None)
    }

    fn parse(&self, out: &str) -> std::result::Result<Self::Value, String> {
        parse_result(out)
    }
}

/// Read `primitive_result.sh`'s output: the status line, then the result bytes.
pub fn parse_result(out: &str) -> std::result::Result<(Option<u32>, Option<Value>), String> {
    let (first, rest) = out.split_once('\n').unwrap_or((out, ""));
    let code = match first.trim() {
        "none" => None,
        n => Some(n.parse::<u32>().map_err(|_| format!("'{}' is not an exit status", crate::error::excerpt(n)))?),
    };
    if rest.is_empty() {
        return Ok((code, None));
    }
    if rest.len() > RESULT_MAX {
        return Err(format!("the result file is larger than {RESULT_MAX} bytes"));
    }
    let v: Value = serde_json::from_str(rest).map_err(|e| format!("the result file is not JSON: {e}"))?;
    Ok((code, Some(v)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testkit::{planned, read, unreadable};

    #[test]
    fn the_result_is_a_status_line_then_json_within_the_cap() {
        assert_eq!(parse_result("0\n").unwrap(), (Some(0), None));
        assert_eq!(parse_result("3\n{\"a\": 1}").unwrap(), (Some(3), Some(serde_json::json!({"a": 1}))));
        assert_eq!(parse_result("none\n").unwrap(), (None, None));
        assert!(parse_result("0\nnot json").unwrap_err().contains("not JSON"));
        assert!(parse_result("x\n").is_err());
        let big = format!("0\n\"{}\"", "a".repeat(RESULT_MAX));
        assert!(parse_result(&big).unwrap_err().contains("larger"));
    }

    #[tokio::test]
    async fn read_on_a_node_and_in_a_plan() {
        let f = PrimitiveResult { dir: ".mgmt-driver/primitive/r1", root: false };
        let (sent, got) = read(&f, "2\n{\"ok\": false}").await;
        assert!(sent.starts_with("primitive_result.sh") && sent.contains(".mgmt-driver/primitive/r1"), "{sent}");
        assert_eq!(got.unwrap(), (Some(2), Some(serde_json::json!({"ok": false}))));
        assert!(unreadable(&f, "$(reboot)\n").await.contains("not an exit status"));
        assert_eq!(planned(&f).await, (Some(0), None));
        assert_eq!(f.wait(), Wait::For(RESULT_LIMIT));
        assert!(!f.as_root());
    }

    /// The reader's output is the raw result (an `admin_password` in clear): never streamed.
    #[test]
    fn the_result_reader_streams_nothing() {
        assert_eq!(PrimitiveResult { dir: "d", root: true }.command().unwrap().redact, Redact::All);
    }
}
