//! Durations as operators write them: `30` (seconds), `1.5`, `10s`, `500ms`, `5m`, `1h`. One
//! parser for every place that takes one (command-line flags, the hook document's options, the
//! intervals of a workload spec), so each accepts and refuses the same forms. Pure.

use std::time::Duration;

/// Parse a positive duration of at most 10 000 000 seconds; the message quotes the text.
pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let t = s.trim();
    let d = match t.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Duration::from_secs_f64(v.min(1e9)),
        Ok(_) => return Err(format!("'{s}' must be a positive duration")),
        Err(_) => humantime::parse_duration(t)
            .map_err(|e| format!("'{s}' is not a duration ({e}); use e.g. 30, 10s, 5m, 1h"))?,
    };
    if d.is_zero() {
        return Err(format!("'{s}' must be a positive duration"));
    }
    if d > Duration::from_secs(10_000_000) {
        return Err(format!("'{s}' is too long (at most 10000000 seconds)"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_operators_write_them() {
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        for bad in ["0", "-1", "NaN", "inf", "ten", "", "1e300", "400000000000s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
