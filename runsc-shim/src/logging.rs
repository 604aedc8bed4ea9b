//! Log output for the runtime CLI: runc's `--log FILE` and `--log-format
//! text|json`. The JSON lines have runc's (logrus') shape, `{"level":
//! "error", "msg": "...", "time": "..."}`, because containerd's runc shim
//! reads the last error of a failed command from that file.

use std::fmt::Write as _;
use std::path::Path;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// How log lines look.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// human-readable lines
    #[default]
    Text,
    /// one JSON object per line, as runc writes
    Json,
}

impl LogFormat {
    /// The CLI spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        }
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    extra: serde_json::Map<String, serde_json::Value>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.extra.insert(field.name().into(), value.into());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let mut s = String::new();
        let _ = write!(s, "{value:?}");
        if field.name() == "message" {
            self.message = s;
        } else {
            self.extra.insert(field.name().into(), s.into());
        }
    }
}

/// Formats events as runc's JSON log lines.
struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let level = match *event.metadata().level() {
            Level::ERROR => "error",
            Level::WARN => "warning",
            Level::INFO => "info",
            Level::DEBUG => "debug",
            Level::TRACE => "trace",
        };
        let mut obj = fields.extra;
        obj.insert("level".into(), level.into());
        obj.insert("msg".into(), fields.message.into());
        obj.insert(
            "time".into(),
            crate::state::rfc3339(std::time::SystemTime::now()).into(),
        );
        writeln!(writer, "{}", serde_json::Value::Object(obj))
    }
}

/// Why the logger could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// the `--log` file does not open for appending
    #[error("--log {}: {source}", path.display())]
    Open {
        /// as given
        path: std::path::PathBuf,
        /// the host's answer
        source: std::io::Error,
    },
}

/// Installs the process-wide logger. With `file`, lines are appended there
/// (info and up, debug with `debug`); without, warnings go to stderr unless
/// `stderr` is false (the boot process, whose stderr is the container's).
pub fn init(
    file: Option<&Path>,
    format: LogFormat,
    debug: bool,
    stderr: bool,
) -> Result<(), Error> {
    let level = if debug { Level::DEBUG } else { Level::INFO };
    match file {
        Some(path) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|source| Error::Open {
                    path: path.to_path_buf(),
                    source,
                })?;
            let builder = tracing_subscriber::fmt()
                .with_writer(std::sync::Mutex::new(f))
                .with_ansi(false)
                .with_max_level(level);
            match format {
                LogFormat::Text => builder.init(),
                LogFormat::Json => builder.event_format(JsonLines).init(),
            }
        }
        None if stderr => {
            let level = if debug { Level::DEBUG } else { Level::WARN };
            let builder = tracing_subscriber::fmt()
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .without_time()
                .with_target(false)
                .with_max_level(level);
            match format {
                LogFormat::Text => builder.init(),
                LogFormat::Json => builder.event_format(JsonLines).init(),
            }
        }
        None => {}
    }
    Ok(())
}
