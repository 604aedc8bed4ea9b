//! OCI hooks: host programs the engine names in `config.json`, run by the
//! runtime on the host (never in the sandbox) at the points of the lifecycle
//! the runtime spec defines, with the container's state on stdin. Docker,
//! for one, names its network set-up (`libnetwork-setkey`) as a prestart
//! hook.
//!
//! `createContainer` and `startContainer` hooks run inside the container's
//! namespaces, which here are the Sentry's own emulation: no host program
//! can enter them, so [`crate::oci::plan`] refuses those two kinds.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use oci_spec::runtime::Hook;

/// Why a hook failed, one line.
#[derive(Debug, thiserror::Error)]
#[error("hooks.{kind}[{index}] {path}: {reason}")]
pub struct Error {
    /// the kind, in the spec's JSON spelling (`prestart`, ...)
    pub kind: &'static str,
    /// its place in the list
    pub index: usize,
    /// the program
    pub path: String,
    /// what went wrong, with the end of what it wrote to stderr
    pub reason: Reason,
}

/// What went wrong with one hook.
#[derive(Debug, thiserror::Error)]
pub enum Reason {
    /// it could not start, or be waited for
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// it outlived its `timeout` (seconds)
    #[error("still running after its timeout of {0} s, killed")]
    Timeout(i64),
    /// it exited non-zero or died of a signal; `stderr` is the last
    /// non-blank line it wrote there, if any
    #[error("{status}{}", stderr.as_deref().map(|l| format!(": {l}")).unwrap_or_default())]
    Failed {
        /// how it ended
        status: std::process::ExitStatus,
        /// the end of its standard error, trimmed
        stderr: Option<String>,
    },
}

/// Runs `hooks` of `kind` in order, each with `state` (the runtime spec's
/// state JSON) on stdin, and stops at the first failure: a hook that cannot
/// start, exits non-zero, dies by a signal or outlives its `timeout`.
pub fn run(kind: &'static str, hooks: &[Hook], state: &serde_json::Value) -> Result<(), Error> {
    let input = state.to_string();
    for (index, hook) in hooks.iter().enumerate() {
        let fail = |reason: Reason| Error {
            kind,
            index,
            path: hook.path().display().to_string(),
            reason,
        };
        run_one(hook, input.as_bytes()).map_err(fail)?;
    }
    Ok(())
}

fn run_one(hook: &Hook, input: &[u8]) -> Result<(), Reason> {
    let mut cmd = Command::new(hook.path());
    // `args` is the whole argv, argv[0] included (execv's semantics); the
    // environment is exactly `env`.
    if let Some((arg0, rest)) = hook.args().as_deref().and_then(<[String]>::split_first) {
        std::os::unix::process::CommandExt::arg0(&mut cmd, arg0);
        cmd.args(rest);
    }
    cmd.env_clear();
    for kv in hook.env().iter().flatten() {
        if let Some((k, v)) = kv.split_once('=') {
            cmd.env(k, v);
        }
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        // A hook that does not read its state closes the pipe early.
        let _ = stdin.write_all(input);
    }
    let mut stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(e) = stderr.as_mut() {
            let _ = e.take(64 * 1024).read_to_end(&mut v);
        }
        v
    });
    let deadline = hook
        .timeout()
        .filter(|t| *t > 0)
        .map(|t| Instant::now() + Duration::from_secs(t as u64));
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if deadline.is_some_and(|d| Instant::now() >= d) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Reason::Timeout(hook.timeout().unwrap_or_default()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(Reason::Io(e)),
        }
    };
    let err = reader.join().unwrap_or_default();
    if status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&err);
    let last = err
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    Err(Reason::Failed {
        status,
        stderr: (!last.is_empty()).then(|| last.trim().to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(json: serde_json::Value) -> Hook {
        serde_json::from_value(json).expect("a hook")
    }

    #[test]
    fn state_on_stdin_args_and_env() {
        let dir = std::env::temp_dir().join(format!("ferrovisor-hooks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let out = dir.join("out");
        let h = hook(serde_json::json!({
            "path": "/bin/sh",
            "args": ["sh", "-c", "cat > \"$OUT\"; echo \"$0 $1\" >> \"$OUT\"", "zero", "one"],
            "env": [format!("OUT={}", out.display())],
        }));
        let state = serde_json::json!({"id": "c1", "pid": 7});
        run("prestart", &[h], &state).expect("the hook runs");
        let text = std::fs::read_to_string(&out).expect("hook output");
        assert_eq!(text, format!("{state}zero one\n"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn failures_name_the_hook() {
        let ok = hook(serde_json::json!({"path": "/bin/true"}));
        let bad = hook(serde_json::json!({
            "path": "/bin/sh", "args": ["sh", "-c", "echo no network >&2; exit 3"]}));
        let e = run("createRuntime", &[ok, bad], &serde_json::json!({})).expect_err("fails");
        let text = e.to_string();
        assert!(
            text.starts_with("hooks.createRuntime[1] /bin/sh: "),
            "{text}"
        );
        assert!(text.contains("3") && text.ends_with("no network"), "{text}");
        let slow =
            hook(serde_json::json!({"path": "/bin/sleep", "args": ["sleep", "10"], "timeout": 1}));
        let e = run("poststop", &[slow], &serde_json::json!({})).expect_err("times out");
        assert!(e.to_string().contains("timeout of 1 s"), "{e}");
    }
}
