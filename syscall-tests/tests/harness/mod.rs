//! Runs one program natively and under `ferrovisor do`, and compares what a
//! user can observe: stdout and the exit status.
//!
//! Both runs get the same argv, a fixed environment, `/` as working directory,
//! `/dev/null` as stdin and only descriptors 0-2 (everything else the test
//! runner inherited is marked close-on-exec first). A native death by signal N
//! is reported as 128+N, the convention `ferrovisor do` follows.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one run may take before it is killed and reported as hung.
const TIMEOUT: Duration = Duration::from_secs(60);

/// How the native side is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Native {
    /// Directly, as the test runner's child.
    Plain,
    /// In a private mount namespace whose `/` is remounted read-only, so the
    /// native kernel answers EROFS where the sandbox's read-only root does.
    ReadOnlyRoot,
    /// In an IPC namespace of its own, as the sandbox is: System V objects
    /// get a new namespace's identifiers, and none is left on the host.
    OwnIpc,
}

/// What one run produced.
#[derive(Debug)]
pub struct Outcome {
    pub stdout: String,
    pub stderr: String,
    /// Exit code, or 128+N after death by signal N.
    pub status: i32,
}

/// The `ferrovisor` binary: `$FERROVISOR_BIN`, else next to the test
/// executable's `deps/` directory (`target/<profile>/ferrovisor`).
pub fn ferrovisor_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("FERROVISOR_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test executable lives in target/<profile>/deps");
    profile_dir.join("ferrovisor")
}

fn base_command(program: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .env("HOME", "/")
        .env("LC_ALL", "C")
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: the closure runs in the forked child before exec and makes a
    // single raw system call, which is async-signal-safe; it touches no
    // memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            // close_range(3, ~0, CLOSE_RANGE_CLOEXEC): a runner started from a
            // shell can leak descriptors (say fd 10) that would change which
            // number open() returns; exec drops them.
            let rc = libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            );
            if rc == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    cmd
}

/// Shell snippet for [`Native::ReadOnlyRoot`]: remount the namespace's `/`
/// read-only (the per-mount flag only, submounts such as /dev keep theirs),
/// refuse to go on if that failed (a guest would then write to the real
/// tree), then become the program.
const READ_ONLY_ROOT: &str = "mount -o remount,bind,ro / || { echo 'harness: cannot remount / read-only' >&2; exit 125; }; \
     if touch /.ferrovisor-rw-probe 2>/dev/null; then rm -f /.ferrovisor-rw-probe; echo 'harness: / still writable' >&2; exit 125; fi; \
     exec \"$0\" \"$@\"";

/// Runs `program args` natively.
pub fn run_native(native: Native, program: &Path, args: &[&str]) -> Outcome {
    let mut cmd = match native {
        Native::Plain => base_command(program),
        Native::ReadOnlyRoot => {
            let mut c = base_command(Path::new("/usr/bin/unshare"));
            c.args([
                "--mount",
                "--propagation",
                "private",
                "--",
                "/bin/sh",
                "-c",
                READ_ONLY_ROOT,
            ])
            .arg(program);
            c
        }
        Native::OwnIpc => {
            let mut c = base_command(Path::new("/usr/bin/unshare"));
            c.args(["--ipc", "--"]).arg(program);
            c
        }
    };
    cmd.args(args);
    let out = run(cmd, &format!("native {}", program.display()));
    if native == Native::ReadOnlyRoot && out.status == 125 {
        panic!(
            "could not prepare the read-only native run (needs root): {}",
            out.stderr
        );
    }
    out
}

/// The platforms every sandboxed check runs under: `$FERROVISOR_PLATFORM`
/// alone when set, else every platform `ferrovisor do` offers here (KVM's
/// where `/dev/kvm` can be opened, as on CI's machines).
pub fn platforms() -> Vec<String> {
    match std::env::var("FERROVISOR_PLATFORM") {
        Ok(p) if !p.is_empty() => vec![p],
        _ => {
            let mut all: Vec<String> = ["seccomp", "seccomp-spin", "ptrace"]
                .map(str::to_owned)
                .to_vec();
            let kvm = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/kvm")
                .is_ok();
            if kvm {
                all.push("kvm".into());
            }
            all
        }
    }
}

/// Runs `program args` under `ferrovisor do --platform P`. With
/// `$FERROVISOR_DEBUG_DIR` set, each run writes its debug log there as
/// `<label>-<platform>.log`.
pub fn run_sandboxed_on(platform: &str, label: &str, program: &Path, args: &[&str]) -> Outcome {
    run_sandboxed_with(platform, label, &[], program, args)
}

/// [`run_sandboxed_on`] with more options for `ferrovisor do` (`--volume`).
pub fn run_sandboxed_with(
    platform: &str,
    label: &str,
    opts: &[String],
    program: &Path,
    args: &[&str],
) -> Outcome {
    let bin = ferrovisor_bin();
    assert!(
        bin.is_file(),
        "ferrovisor binary not found at {}; build it (`cargo build -p runsc-shim`, \
         or run `cargo test --workspace`) or set FERROVISOR_BIN",
        bin.display()
    );
    let mut cmd = base_command(&bin);
    cmd.args(["do", "--platform", platform]);
    if let Some(dir) = std::env::var_os("FERROVISOR_DEBUG_DIR") {
        cmd.arg("--debug-log")
            .arg(Path::new(&dir).join(format!("{label}-{platform}.log")));
    }
    cmd.args(opts).arg("--").arg(program).args(args);
    run(cmd, &format!("sandboxed {}", program.display()))
}

fn run(mut cmd: Command, what: &str) -> Outcome {
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: spawn failed: {e}"));
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
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what}: still running after {TIMEOUT:?}, killed");
            }
            Err(e) => panic!("{what}: wait failed: {e}"),
        }
    };
    let stdout = String::from_utf8_lossy(&t_out.join().expect("stdout reader")).into_owned();
    let stderr = String::from_utf8_lossy(&t_err.join().expect("stderr reader")).into_owned();
    let status = match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        (None, None) => panic!("{what}: neither exit code nor signal: {status:?}"),
    };
    Outcome {
        stdout,
        stderr,
        status,
    }
}

/// A line diff (longest common subsequence), `-` native, `+` sandbox.
pub fn diff(a: &str, b: &str) -> String {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    let (n, m) = (a.len(), b.len());
    // lcs[i][j] = length of the LCS of a[i..] and b[j..]
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut out = String::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push_str(&format!("  {}\n", a[i]));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("+ {}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("- {}\n", a[i]));
            i += 1;
        }
    }
    out
}

/// The whole differential check for one program.
///
/// Runs `program` natively, which must exit with `native_status`: when it
/// does not, the test itself is wrong and the message says so.
fn run_native_expecting(
    label: &str,
    native: Native,
    program: &Path,
    args: &[&str],
    native_status: i32,
) -> Outcome {
    let nat = run_native(native, program, args);
    assert!(
        nat.status == native_status,
        "{label}: the NATIVE run exited {} instead of {native_status}, so the test is wrong.\n\
         --- native stdout ---\n{}--- native stderr ---\n{}",
        nat.status,
        nat.stdout,
        nat.stderr
    );
    nat
}

/// `native_status` is what the native run must exit with: when the native run
/// disagrees, the test itself is wrong and the message says so.
pub fn compare(label: &str, native: Native, program: &Path, args: &[&str], native_status: i32) {
    let nat = run_native_expecting(label, native, program, args, native_status);
    for platform in platforms() {
        let sb = run_sandboxed_on(&platform, label, program, args);
        if nat.stdout == sb.stdout && nat.status == sb.status {
            continue;
        }
        panic!(
            "{label}: sandbox (--platform {platform}) differs from native\n\
             exit status: native {} / sandbox {}\n\
             --- diff of stdout (- native, + sandbox) ---\n{}\
             --- native stdout ---\n{}\
             --- sandbox stdout ---\n{}\
             --- sandbox stderr ---\n{}",
            nat.status,
            sb.status,
            diff(&nat.stdout, &sb.stdout),
            nat.stdout,
            sb.stdout,
            sb.stderr
        );
    }
}

/// A fresh empty directory under the host's `/tmp`, removed when dropped.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    pub fn new(label: &str) -> ScratchDir {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("ferrovisor-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir(&p).expect("create scratch directory");
        ScratchDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    fn arg(&self) -> &str {
        self.0.to_str().expect("temp paths are UTF-8")
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The regular files directly in `dir`, sorted: name, mode, contents.
pub fn files_in(dir: &Path) -> Vec<(String, u32, Vec<u8>)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| {
            let e = e.expect("entry");
            let m = e.metadata().expect("stat");
            let bytes = if m.is_file() {
                std::fs::read(e.path()).expect("read")
            } else {
                Vec::new()
            };
            (
                e.file_name().to_string_lossy().into_owned(),
                m.permissions().mode(),
                bytes,
            )
        })
        .collect();
    out.sort();
    out
}

/// The differential check for a program that works in a writable
/// directory named by its only argument: natively a scratch directory;
/// in the sandbox another one, mounted as a volume at `/vol`. Beyond
/// stdout and status, the files each run leaves in its directory (what
/// reached the host) must be the same.
pub fn compare_on_volume(label: &str, program: &Path, native_status: i32) {
    let nat_dir = ScratchDir::new(label);
    let nat = run_native_expecting(
        label,
        Native::Plain,
        program,
        &[nat_dir.arg()],
        native_status,
    );
    let nat_files = files_in(nat_dir.path());
    for platform in platforms() {
        let sb_dir = ScratchDir::new(label);
        let opts = ["--volume".to_owned(), format!("{}:/vol", sb_dir.arg())];
        let sb = run_sandboxed_with(&platform, label, &opts, program, &["/vol"]);
        assert!(
            nat.stdout == sb.stdout && nat.status == sb.status,
            "{label}: sandbox (--platform {platform}) differs from native\n\
             exit status: native {} / sandbox {}\n\
             --- diff of stdout (- native, + sandbox) ---\n{}\
             --- sandbox stderr ---\n{}",
            nat.status,
            sb.status,
            diff(&nat.stdout, &sb.stdout),
            sb.stderr
        );
        let sb_files = files_in(sb_dir.path());
        let names = |f: &[(String, u32, Vec<u8>)]| {
            f.iter()
                .map(|(n, m, b)| format!("{n} {m:o} {} bytes", b.len()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(&nat_files),
            names(&sb_files),
            "{label}: the files left on the host differ (--platform {platform})"
        );
        for ((name, _, a), (_, _, b)) in nat_files.iter().zip(&sb_files) {
            let first = a.iter().zip(b).position(|(x, y)| x != y);
            assert!(
                first.is_none(),
                "{label}: host file {name} differs at byte {first:?} (--platform {platform})"
            );
        }
    }
}
