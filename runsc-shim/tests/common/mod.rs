//! Helpers shared by the integration tests: a command with a fixed
//! environment, and a run with captured output, optional stdin and a
//! timeout.

// Each test binary compiles its own copy of this module and uses a different
// subset of it.
#![allow(dead_code)]

pub mod containerd;

use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A fresh directory under cargo's per-target temp dir (not `/tmp`, which
/// the sandbox replaces with its own tmpfs), removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "ferrovisor-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn path_str(&self) -> &str {
        self.0.to_str().expect("utf-8 temp path")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Shell lines (for `sh -c` inside `unshare -m -n`) that make an
/// "outside" network namespace joined to this one by a veth pair: the
/// outside side holds `outside` addresses (`ADDR/PREFIX`), this side
/// `inside`; `$OUT` is the outside's holder, `outside CMD` runs CMD there,
/// and `$PIDS` (killed on exit) lists background processes. `/etc/hosts`
/// becomes `$DIR/hosts`. IPv6 addresses are added without DAD.
pub fn outside_namespace(outside: &[&str], inside: &[&str]) -> String {
    let add = |who: &str, dev: &str, a: &str| {
        let nodad = if a.contains(':') { " nodad" } else { "" };
        format!("{who}ip addr add {a} dev {dev}{nodad}\n")
    };
    let mut s = String::from(
        r#"ip link set lo up
unshare -n sleep 600 &
OUT=$!
PIDS=$OUT
trap 'kill $PIDS 2>/dev/null' EXIT
while [ "$(readlink /proc/$OUT/ns/net)" = "$(readlink /proc/self/ns/net)" ]; do sleep 0.01; done
# (Background servers are started with nsenter itself, not through this
# function, so that $! is the server and the trap ends it.)
outside() { nsenter -t $OUT -n "$@"; }
ip link add fv0 type veth peer name fv1
ip link set fv0 netns $OUT
outside ip link set lo up
"#,
    );
    for a in outside {
        s += &add("outside ", "fv0", a);
    }
    s += "outside ip link set fv0 up\n";
    for a in inside {
        s += &add("", "fv1", a);
    }
    s += "ip link set fv1 up\nmount --bind \"$DIR/hosts\" /etc/hosts\n";
    s
}

/// Runs `script` with `sh -c` in mount and network namespaces of its own
/// (`unshare -m -n --propagation private`), `$FV` naming `ferrovisor` and
/// `$DIR` being `dir`.
pub fn in_namespaces(ferrovisor: &str, dir: &Path, script: &str, timeout: Duration) -> Outcome {
    let mut cmd = command("unshare", &[("FV", ferrovisor)]);
    cmd.env("DIR", dir);
    cmd.args(["-m", "-n", "--propagation", "private", "sh", "-c", script]);
    run(cmd, None, timeout)
}

/// An outcome in full, for assertion messages.
pub fn show(o: &Outcome) -> String {
    format!(
        "exit {}\n--- stdout ---\n{}--- stderr ---\n{}",
        o.status, o.stdout, o.stderr
    )
}

#[derive(Debug)]
pub struct Outcome {
    /// Stdout as text (invalid UTF-8 replaced).
    pub stdout: String,
    /// Stdout exactly as written.
    pub stdout_bytes: Vec<u8>,
    pub stderr: String,
    /// Exit code, or 128+N after death by signal N.
    pub status: i32,
}

/// A command with a fixed environment (PATH, HOME, LC_ALL, then `env`), `/`
/// as working directory, default signal dispositions, an empty signal mask,
/// and only descriptors 0-2 (a runner started from a shell may leak others).
pub fn command(program: &str, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear().current_dir("/");
    let defaults = [
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("HOME", "/"),
        ("LC_ALL", "C"),
    ];
    for (k, v) in defaults.iter().chain(env) {
        cmd.env(k, v);
    }
    // SAFETY: runs in the forked child before exec and makes only raw system
    // calls (sigaction, sigprocmask, close_range), which are
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            // A runner started in the background of a shell ignores SIGINT
            // and SIGQUIT, and ignored signals survive exec: start every run
            // from default dispositions and an empty mask, as a login shell
            // would.
            for sig in 1..32 {
                if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                    libc::signal(sig, libc::SIG_DFL);
                }
            }
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            // close_range(3, ~0, CLOSE_RANGE_CLOEXEC)
            if libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            ) == 0
            {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    cmd
}

/// Runs `cmd` with `stdin` (or `/dev/null`) as input, capturing stdout and
/// stderr; kills it and panics if it runs longer than `timeout`.
pub fn run(mut cmd: Command, stdin: Option<&[u8]>, timeout: Duration) -> Outcome {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let what = format!("{cmd:?}");
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    let writer = stdin.map(|data| {
        let mut pipe = child.stdin.take().expect("piped stdin");
        let data = data.to_vec();
        std::thread::spawn(move || {
            // A program may exit without reading everything: ignore EPIPE.
            let _ = pipe.write_all(&data);
        })
    });
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what}: still running after {timeout:?}, killed");
            }
            Err(e) => panic!("{what}: wait: {e}"),
        }
    };
    if let Some(w) = writer {
        w.join().expect("stdin writer");
    }
    let stdout_bytes = t_out.join().expect("stdout reader");
    let stdout = String::from_utf8_lossy(&stdout_bytes).into_owned();
    let stderr = String::from_utf8_lossy(&t_err.join().expect("stderr reader")).into_owned();
    let status = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        (None, None) => panic!("{what}: no exit code and no signal"),
    };
    Outcome {
        stdout,
        stdout_bytes,
        stderr,
        status,
    }
}

/// Compiles a small static C program `source` into `dir/name`.
pub fn compile_static(dir: &Path, name: &str, source: &str) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    let bin = dir.join(name);
    std::fs::write(&src, source).expect("write C source");
    let out = Command::new("gcc")
        .args(["-static", "-O1", "-Wall", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("run gcc");
    assert!(
        out.status.success(),
        "gcc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// The numbers a counter (`/bin/count` of the test images) printed, in
/// order.
pub fn counted(text: &str) -> Vec<u64> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// The platforms a comparison runs under: `$FERROVISOR_PLATFORM` alone
/// when set, else all of `do`'s, KVM's where `/dev/kvm` opens.
pub fn platforms() -> Vec<String> {
    if let Ok(p) = std::env::var("FERROVISOR_PLATFORM") {
        if !p.is_empty() {
            return vec![p];
        }
    }
    let mut all: Vec<String> = ["seccomp", "seccomp-spin", "ptrace"]
        .map(str::to_owned)
        .to_vec();
    if kvm_usable() {
        all.push("kvm".into());
    }
    all
}

/// Whether `/dev/kvm` opens here (the KVM platform's tests run where it does).
pub fn kvm_usable() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok()
}
