//! The egress audit log (`--egress-log FILE`): one JSON line per attempt to
//! leave the sandbox, refused at once or allowed and written when it ends,
//! with what was sent each way. Secrets are counted, never written.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where the lines go: a file the runtime opened before the Sentry was
/// confined.
pub struct AuditLog {
    out: Mutex<Box<dyn Write + Send>>,
    mirrored: AtomicBool,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditLog")
    }
}

/// Which guest process made the attempt.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    pub pid: i32,
    pub command: String,
}

/// One attempt.
#[derive(Clone, Debug)]
pub struct Record {
    pub start: SystemTime,
    pub origin: Origin,
    /// `tcp` or `udp`.
    pub proto: &'static str,
    pub dest: SocketAddr,
    /// The name the decision used, and where it came from (`dns`, `sni`,
    /// `host`).
    pub name: Option<(String, &'static str)>,
    /// The rule that allowed it, or why it was refused.
    pub rule: String,
    pub allowed: bool,
    pub bytes_out: u64,
    pub bytes_in: u64,
    /// Placeholders replaced by their secrets.
    pub secrets: u64,
    /// HTTP requests seen (intercepted connections).
    pub requests: u64,
}

impl Record {
    pub fn new(origin: Origin, proto: &'static str, dest: SocketAddr) -> Record {
        Record {
            start: SystemTime::now(),
            origin,
            proto,
            dest,
            name: None,
            rule: String::new(),
            allowed: false,
            bytes_out: 0,
            bytes_in: 0,
            secrets: 0,
            requests: 0,
        }
    }

    /// The record as one JSON object, on one line.
    pub fn to_json(&self, end: SystemTime) -> String {
        let dur = end.duration_since(self.start).unwrap_or_default();
        let (name, via) = match &self.name {
            Some((n, v)) => (json_str(n), json_str(v)),
            None => ("null".into(), "null".into()),
        };
        format!(
            "{{\"time\":{},\"pid\":{},\"command\":{},\"proto\":\"{}\",\"dest\":{},\"port\":{},\
             \"name\":{},\"name_from\":{},\"decision\":\"{}\",\"rule\":{},\"bytes_out\":{},\
             \"bytes_in\":{},\"duration_ms\":{},\"requests\":{},\"secrets_substituted\":{}}}",
            json_str(&rfc3339(self.start, 3)),
            self.origin.pid,
            json_str(&self.origin.command),
            self.proto,
            json_str(&self.dest.ip().to_string()),
            self.dest.port(),
            name,
            via,
            if self.allowed { "allowed" } else { "refused" },
            json_str(&self.rule),
            self.bytes_out,
            self.bytes_in,
            dur.as_millis(),
            self.requests,
            self.secrets,
        )
    }
}

impl AuditLog {
    pub fn new(out: Box<dyn Write + Send>) -> AuditLog {
        AuditLog {
            out: Mutex::new(out),
            mirrored: AtomicBool::new(false),
        }
    }

    /// Each record also goes to the runtime's log (an OCI runtime's
    /// `--log`), where an engine collects what its runtimes say.
    pub fn mirror_to_log(&self) {
        self.mirrored.store(true, Ordering::Relaxed);
    }

    /// Writes `r` as ended now. A failing log does not stop the network
    /// (it is the debug log's to report).
    pub fn write(&self, r: &Record) {
        let mut line = r.to_json(SystemTime::now());
        if self.mirrored.load(Ordering::Relaxed) {
            tracing::info!(target: "egress", "{line}");
        }
        line.push('\n');
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = out.write_all(line.as_bytes()).and_then(|()| out.flush()) {
            tracing::warn!(error = %e, "egress log: write failed");
        }
    }
}

/// A JSON string literal.
fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// RFC 3339 in UTC with `digits` (0 to 9) of the second's fraction:
/// `2026-12-02T19:05:00.123Z`.
pub fn rfc3339(t: SystemTime, digits: u32) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days since 1970-01-01 to a civil date (Howard Hinnant's method).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let digits = digits.min(9);
    let frac = match digits {
        0 => String::new(),
        n => format!(
            ".{:0width$}",
            d.subsec_nanos() / 10u32.pow(9 - n),
            width = n as usize
        ),
    };
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}{frac}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_utc_dates() {
        assert_eq!(rfc3339(UNIX_EPOCH, 3), "1970-01-01T00:00:00.000Z");
        // date -u -d @1796238300.5
        let t = UNIX_EPOCH + Duration::from_millis(1_796_238_300_500);
        assert_eq!(rfc3339(t, 3), "2026-12-02T19:05:00.500Z");
        assert_eq!(rfc3339(t, 9), "2026-12-02T19:05:00.500000000Z");
        assert_eq!(rfc3339(t, 0), "2026-12-02T19:05:00Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap, 3), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }
}
