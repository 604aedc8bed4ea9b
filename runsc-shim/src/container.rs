//! The container lifecycle of the OCI runtime spec: create, start, state,
//! kill, delete, plus runc's run, wait, list, ps and events.
//!
//! Process model. `create` checks the bundle, makes the state directory and
//! the `exec.fifo`, and spawns `ferrovisor boot` (in a new session unless
//! the caller stays in the foreground, as `run` does). The boot process
//! checks the bundle again, opens the root file system and tells `create`
//! "ok" over a pipe (descriptor 3); `create` records the container as
//! created with the boot process's pid and returns. The boot process then
//! blocks opening `exec.fifo` for writing; `start` opens it for reading,
//! which releases it. The boot process marks the container running, runs
//! the Sentry (`sentry::run`) to completion in its own process, records the
//! exit status and exits with it. The boot process is the container's pid:
//! signals from `kill` go to it.
//!
//! Before the boot process reports ready, `create` moves it into the
//! sandbox's own host cgroup ([`crate::cgroup`]), which holds the bundle's
//! memory, CPU and pids limits and serves `pause`/`resume`; everything it
//! starts later (the gofer, a stub per guest address space) is born inside.
//! `delete` kills what is left there and removes the cgroup.

use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cgroup::{self, Cgroup};
use crate::logging::LogFormat;
use crate::network::Network;
use crate::oci;
use crate::state::{self, Locked, Record, StateDir, Status, EXEC_FIFO};
use crate::sys;

/// The descriptor on which the boot process reports readiness to
/// `create`: the first past those it hands down (`--preserve-fds`).
fn ready_fd(preserve_fds: u32) -> i32 {
    3 + preserve_fds as i32
}

/// Fails unless descriptors 3 .. 3+`n`, which `--preserve-fds n` hands
/// down, are all open.
fn check_preserved(n: u32) -> Result<(), Error> {
    match sys::first_closed_past_stdio(n) {
        Some(fd) => Err(Error::Usage(format!(
            "--preserve-fds {n}: descriptor {fd} is not open (it passes descriptors 3 to {}, \
             which must all be open)",
            2 + n
        ))),
        None => Ok(()),
    }
}

/// The descriptors `create` hands down to the boot process.
#[derive(Clone, Copy, Debug)]
pub struct Handed {
    /// where it reports readiness
    pub ready_fd: i32,
    /// 3 .. 3+this are the first process's (`--preserve-fds`)
    pub preserve_fds: u32,
}

/// Descriptors 3 .. 3+`n` of this process (`--preserve-fds n`), taken as
/// its own.
fn take_preserved(n: u32) -> Result<Vec<OwnedFd>, Error> {
    check_preserved(n)?;
    sys::take_past_stdio(n).map_err(io("taking the descriptors --preserve-fds names"))
}

/// How long `delete` waits for a killed sandbox to go away.
const KILL_WAIT: Duration = Duration::from_secs(10);

/// Lifecycle errors, one line each.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// the state directory
    #[error(transparent)]
    State(#[from] state::Error),
    /// the bundle
    #[error(transparent)]
    Oci(#[from] oci::Error),
    /// a prestart or createRuntime hook failed
    #[error(transparent)]
    Hook(#[from] crate::hooks::Error),
    /// the sandbox's host cgroup
    #[error(transparent)]
    Cgroup(#[from] cgroup::Error),
    /// an operation that needs another status
    #[error("container {id} is {status}, not {wanted}")]
    WrongStatus {
        /// container id
        id: String,
        /// its status now
        status: Status,
        /// what the operation needs
        wanted: &'static str,
    },
    /// delete without --force of a live container
    #[error("container {0} is running (stop it with 'kill' first, or use 'delete --force')")]
    Running(String),
    /// the sandbox process went away before it could be released
    #[error("container {0}: the sandbox process exited before it was started")]
    BootDied(String),
    /// the boot process reported a failure
    #[error("{0}")]
    Boot(String),
    /// the sandbox died without recording its status
    #[error("container {0}: the sandbox died without recording an exit status")]
    NoExitStatus(String),
    /// a signal name or number that is not one
    #[error("unknown signal {0:?} (give a name like TERM or SIGKILL, or a number 0-64)")]
    BadSignal(String),
    /// a command-line option that contradicts the bundle
    #[error("{0}")]
    Usage(String),
    /// a feature this runtime lacks so far
    #[error("{0}: not supported by ferrovisor yet")]
    NotSupported(String),
    /// `update` of a container whose sandbox has no cgroup of its own
    #[error(
        "container {0} has no cgroup of its own (the host gave none at create), so its \
         limits cannot change"
    )]
    NoCgroup(String),
    /// the egress rules' log, secrets or trust store cannot be set up
    #[error(transparent)]
    Egress(#[from] crate::network::ApplyError),
    /// a checkpoint image that cannot be opened
    #[error("{}: {source} (give a directory that `do --save` or `checkpoint` wrote)", dir.display())]
    OpenImage {
        /// the image's directory
        dir: PathBuf,
        /// the host's answer
        source: std::io::Error,
    },
    /// a checkpoint image that cannot be locked shared
    #[error("{}: locking it: {source}", dir.display())]
    LockImage {
        /// the image's directory
        dir: PathBuf,
        /// the host's answer
        source: std::io::Error,
    },
    /// a checkpoint image that is not one, or is damaged
    #[error("{}: {reason}", dir.display())]
    BadImage {
        /// the image's directory
        dir: PathBuf,
        /// what is wrong with it
        reason: String,
    },
    /// a host operation failed
    #[error("{what}: {source}")]
    Io {
        /// what was being done
        what: String,
        /// the host's answer
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// Global options, as given on the command line, that the boot process
/// needs as well.
#[derive(Clone, Debug)]
pub struct Runtime {
    /// the state root
    pub state: StateDir,
    /// the `ferrovisor` binary that becomes the boot process
    pub exe: PathBuf,
    /// `--log`
    pub log: Option<PathBuf>,
    /// `--log-format`
    pub log_format: LogFormat,
    /// `--debug`
    pub debug: bool,
    /// `--network` and its allow rules. `host`: the guest's TCP and UDP
    /// sockets are host sockets in the container's network namespace (the
    /// one `linux.namespaces` makes or names), with no egress policy.
    /// `sandbox`: the netstack, whose relays reach what the rules allow
    /// from that namespace. `none`: loopback only.
    pub network: Network,
    /// `--overlay`: a writable root's writes go to an in-memory layer and
    /// the bundle's rootfs stays as it was (else they reach it, as under
    /// runc)
    pub overlay: bool,
    /// `--platform`: how containers' code runs
    pub platform: Platform,
    /// `--nvproxy` and its flags
    pub nvproxy: NvproxyFlags,
}

/// `--nvproxy` and its flags: a container whose `linux.devices` names
/// NVIDIA devices (as the NVIDIA container toolkit writes them) gets them
/// through nvproxy (docs/gpu.md); without it such a container is refused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NvproxyFlags {
    /// `--nvproxy`
    pub on: bool,
    /// `--nvproxy-capabilities`; else the container's
    /// `NVIDIA_DRIVER_CAPABILITIES`
    pub capabilities: Option<String>,
    /// `--nvproxy-driver-version`; else the host's
    pub driver_version: Option<String>,
    /// where the host's devices are (tests); else `/dev`
    pub dev_dir: Option<PathBuf>,
}

impl NvproxyFlags {
    /// The global flags that say the same, for the boot process.
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        let mut v: Vec<std::ffi::OsString> = Vec::new();
        if self.on {
            v.push("--nvproxy".into());
        }
        if let Some(c) = &self.capabilities {
            v.extend(["--nvproxy-capabilities".into(), c.into()]);
        }
        if let Some(d) = &self.driver_version {
            v.extend(["--nvproxy-driver-version".into(), d.into()]);
        }
        if let Some(d) = &self.dev_dir {
            v.extend(["--nvproxy-dev-dir".into(), d.into()]);
        }
        v
    }
}

/// How a container's code runs (the OCI runtime's `--platform`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Platform {
    /// the seccomp-trap platform, adaptive hand-off (`do`'s default)
    #[default]
    Seccomp,
    /// ring 3 of a KVM virtual machine (needs /dev/kvm)
    Kvm,
}

impl Platform {
    /// The flag's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Seccomp => "seccomp",
            Platform::Kvm => "kvm",
        }
    }

    /// From the shim's config file.
    pub fn parse(s: &str) -> Option<Platform> {
        match s {
            // (gVisor's name for its own)
            "seccomp" | "systrap" => Some(Platform::Seccomp),
            "kvm" => Some(Platform::Kvm),
            _ => None,
        }
    }
}

/// The global flags `create` hands the boot process.
#[derive(Clone, Copy, Debug)]
pub struct BootFlags<'a> {
    /// `--network` and its rules
    pub network: &'a Network,
    /// `--overlay`
    pub overlay: bool,
    /// `--platform`
    pub platform: Platform,
    /// `--nvproxy` and its flags
    pub nvproxy: &'a NvproxyFlags,
}

/// The key under which `features` lists the platforms this host can use.
pub const PLATFORMS_ANNOTATION: &str = "dev.ferrovisor.platforms";

/// How long `start` waits at most for the guest's first program to set
/// itself up (see [`Runtime::start`]).
const START_SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

/// The annotation `state` adds to say where the guest's writes to its
/// root go: `rootfs` (the bundle's, as under runc), `memory` (`--overlay`)
/// or `read-only` (`root.readonly`).
pub const ROOT_ANNOTATION: &str = "dev.ferrovisor.root-writes";

/// The log line of a container with `--network host`.
const HOST_NETWORK_WARNING: &str = "--network host: the guest's TCP and UDP sockets are host \
     sockets in the container's network namespace, with no egress policy (the guest can reach \
     and serve anything that namespace can)";

/// `create` options.
#[derive(Clone, Debug, Default)]
pub struct CreateOptions {
    /// the bundle directory
    pub bundle: PathBuf,
    /// where to send the terminal's master side when `process.terminal`
    pub console_socket: Option<PathBuf>,
    /// where to write the container's pid
    pub pid_file: Option<PathBuf>,
    /// descriptors past 2 to pass into the container
    pub preserve_fds: u32,
    /// keep the sandbox in the caller's session (for `run`) instead of
    /// detaching it
    pub foreground: bool,
    /// the sandbox's stdin, stdout and stderr; `None`: the caller's own
    /// (a containerd shim passes the task's FIFOs here)
    pub stdio: Option<Stdio>,
    /// go on from the image in this directory instead of starting the
    /// bundle's process (`restore --image-path`)
    pub restore: Option<PathBuf>,
}

/// The file a sandbox image is saved in, inside its directory (`do
/// --save`, `checkpoint --image-path`).
pub const IMAGE_NAME: &str = "sandbox.img";

/// The image file in `dir` (made, mode 0700, when missing), open for the
/// Sentry to write (an earlier image stays until it does). An image that
/// a running sandbox was restored from (it holds a shared lock: its memory
/// shares the file's pages) is never written over: it is unlinked, and
/// the new image gets a file of its own.
pub fn open_image_for_save(dir: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    let path = dir.join(IMAGE_NAME);
    let open = || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
    };
    let file = open()?;
    if crate::sys::flock(file.as_fd(), libc::LOCK_EX | libc::LOCK_NB).is_ok() {
        // (only a test of the lock: writers do not hold it)
        crate::sys::flock(file.as_fd(), libc::LOCK_UN)?;
        return Ok(file);
    }
    drop(file);
    std::fs::remove_file(&path)?;
    open()
}

/// The image saved in `dir`, checked (magic, version, lengths, both
/// checksums), and locked shared for as long as it is open (a save into
/// `dir` then makes a new file); the error names `dir` and what is wrong.
/// The pages' checksum is computed once per version of the file: a stamp
/// beside it remembers the check, so restoring many sandboxes from one
/// image reads its pages only as their guests touch them.
pub fn read_image(dir: &Path) -> Result<sentry::Image, Error> {
    let path = dir.join(IMAGE_NAME);
    let file = std::fs::File::open(&path).map_err(|source| Error::OpenImage {
        dir: dir.to_path_buf(),
        source,
    })?;
    crate::sys::flock(file.as_fd(), libc::LOCK_SH).map_err(|source| Error::LockImage {
        dir: dir.to_path_buf(),
        source,
    })?;
    let image = sentry::Image::open(file).map_err(|e| Error::BadImage {
        dir: dir.to_path_buf(),
        reason: e.0,
    })?;
    let stamp = file_stamp(image.file());
    let stamp_path = dir.join(format!("{IMAGE_NAME}.checked"));
    let checked =
        !stamp.is_empty() && std::fs::read_to_string(&stamp_path).is_ok_and(|s| s.trim() == stamp);
    if !checked {
        image.check_pages().map_err(|e| Error::BadImage {
            dir: dir.to_path_buf(),
            reason: e.0,
        })?;
        // (a directory the caller may not write: checked again next time)
        let _ = std::fs::write(&stamp_path, format!("{stamp}\n"));
    }
    Ok(image)
}

/// What identifies one version of a file: device, inode, size and change
/// time (which every write moves on, and no one can set back).
fn file_stamp(file: &std::fs::File) -> String {
    use std::os::unix::fs::MetadataExt;
    match file.metadata() {
        Ok(m) => format!(
            "{} {} {} {}.{:09}",
            m.dev(),
            m.ino(),
            m.size(),
            m.ctime(),
            m.ctime_nsec()
        ),
        Err(_) => String::new(),
    }
}

/// Descriptors to become a sandbox's standard input, output and error.
#[derive(Clone, Debug)]
pub struct Stdio {
    /// standard input
    pub stdin: Arc<OwnedFd>,
    /// standard output
    pub stdout: Arc<OwnedFd>,
    /// standard error
    pub stderr: Arc<OwnedFd>,
}

impl Stdio {
    fn apply(&self, cmd: &mut Command) -> Result<(), Error> {
        let dup = |fd: &Arc<OwnedFd>| {
            fd.try_clone()
                .map(std::process::Stdio::from)
                .map_err(io("duplicating a stdio descriptor"))
        };
        cmd.stdin(dup(&self.stdin)?)
            .stdout(dup(&self.stdout)?)
            .stderr(dup(&self.stderr)?);
        Ok(())
    }
}

/// The state of a container as `state` prints it: the OCI state plus runc's
/// `rootfs`, `created` and `owner`, and where a writable root's writes go.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OciState {
    /// runtime spec version
    pub oci_version: String,
    /// container id
    pub id: String,
    /// creating, created, running, paused or stopped
    pub status: Status,
    /// the sandbox's host pid; 0 once stopped
    pub pid: i32,
    /// absolute bundle path
    pub bundle: PathBuf,
    /// absolute rootfs path
    pub rootfs: PathBuf,
    /// creation time, RFC 3339
    pub created: String,
    /// uid of the creator, as a string like runc's
    pub owner: String,
    /// `annotations` from config.json
    pub annotations: BTreeMap<String, String>,
    /// where a writable root's writes go (`rootfs`, `memory`, `read-only`)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_writes: Option<String>,
}

impl OciState {
    fn from_record(r: &Record) -> Self {
        let status = r.observed();
        OciState {
            oci_version: r.oci_version.clone(),
            id: r.id.clone(),
            status,
            pid: if status == Status::Stopped { 0 } else { r.pid },
            bundle: r.bundle.clone(),
            rootfs: r.rootfs.clone(),
            created: r.created.clone(),
            owner: r.owner.to_string(),
            annotations: r.annotations.clone(),
            root_writes: Some(r.root_writes.clone()).filter(|w| !w.is_empty()),
        }
    }

    fn creating(id: &str) -> Self {
        OciState {
            oci_version: oci_spec::runtime::VERSION.to_string(),
            id: id.to_string(),
            status: Status::Creating,
            pid: 0,
            bundle: PathBuf::new(),
            rootfs: PathBuf::new(),
            created: String::new(),
            owner: String::new(),
            annotations: BTreeMap::new(),
            root_writes: None,
        }
    }
}

/// A container `create` made.
#[derive(Debug)]
pub struct Created {
    /// the sandbox's host pid
    pub pid: i32,
    /// the boot process, when it is the caller's child to wait for
    /// (foreground creation)
    pub child: Option<Child>,
}

/// Parses `TERM`, `SIGTERM`, `sigterm` or `15`; `0` asks only whether the
/// container is there to signal, as kill(2)'s and runc's do.
pub fn parse_signal(s: &str) -> Result<i32, Error> {
    const NAMES: &[(&str, i32)] = &[
        ("HUP", libc::SIGHUP),
        ("INT", libc::SIGINT),
        ("QUIT", libc::SIGQUIT),
        ("ILL", libc::SIGILL),
        ("TRAP", libc::SIGTRAP),
        ("ABRT", libc::SIGABRT),
        ("IOT", libc::SIGIOT),
        ("BUS", libc::SIGBUS),
        ("FPE", libc::SIGFPE),
        ("KILL", libc::SIGKILL),
        ("USR1", libc::SIGUSR1),
        ("SEGV", libc::SIGSEGV),
        ("USR2", libc::SIGUSR2),
        ("PIPE", libc::SIGPIPE),
        ("ALRM", libc::SIGALRM),
        ("TERM", libc::SIGTERM),
        ("STKFLT", libc::SIGSTKFLT),
        ("CHLD", libc::SIGCHLD),
        ("CONT", libc::SIGCONT),
        ("STOP", libc::SIGSTOP),
        ("TSTP", libc::SIGTSTP),
        ("TTIN", libc::SIGTTIN),
        ("TTOU", libc::SIGTTOU),
        ("URG", libc::SIGURG),
        ("XCPU", libc::SIGXCPU),
        ("XFSZ", libc::SIGXFSZ),
        ("VTALRM", libc::SIGVTALRM),
        ("PROF", libc::SIGPROF),
        ("WINCH", libc::SIGWINCH),
        ("IO", libc::SIGIO),
        ("POLL", libc::SIGPOLL),
        ("PWR", libc::SIGPWR),
        ("SYS", libc::SIGSYS),
    ];
    if let Ok(n) = s.parse::<i32>() {
        return if (0..=64).contains(&n) {
            Ok(n)
        } else {
            Err(Error::BadSignal(s.into()))
        };
    }
    let up = s.to_ascii_uppercase();
    let name = up.strip_prefix("SIG").unwrap_or(&up);
    NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .ok_or_else(|| Error::BadSignal(s.into()))
}

/// Writes `contents` to `path` through a temporary file and a rename, so a
/// reader never sees half of it.
fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), Error> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, contents).map_err(io(format!("writing {}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(io(format!("writing {}", path.display())))
}

/// The terminal an exec'd process gets.
#[derive(Clone, Debug, Default)]
pub struct ExecTerminal {
    /// where to send a new terminal's master side; `None`: the caller's own
    /// terminal
    pub console_socket: Option<PathBuf>,
    /// rows and columns of a new terminal
    pub size: Option<(u16, u16)>,
}

/// Sets up a terminal for the container: a new pty whose master goes to the
/// console socket; returns the slave, to become the sandbox's stdio (`raw`:
/// carrying the bytes of a terminal of the Sentry's).
fn console(socket: &Path, size: Option<(u16, u16)>, raw: bool) -> Result<OwnedFd, Error> {
    let what = || format!("--console-socket {}", socket.display());
    let stream = UnixStream::connect(socket).map_err(io(what()))?;
    let (master, slave) = sys::open_pty().map_err(io("opening a pseudo-terminal"))?;
    if let Some((rows, cols)) = size {
        sys::set_window_size(master.as_fd(), rows, cols).map_err(io("setting the console size"))?;
    }
    // Raw: the line discipline the guest sees is the Sentry's own pty's,
    // which this one only carries bytes for.
    if raw {
        let t = sys::termios(slave.as_fd()).map(sys::raw);
        t.and_then(|t| sys::set_termios(slave.as_fd(), &t))
            .map_err(io("putting the console in raw mode"))?;
    }
    sys::send_fd(stream.as_fd(), master.as_fd(), b"/dev/ptmx").map_err(io(what()))?;
    Ok(slave)
}

impl Runtime {
    fn boot_command(
        &self,
        id: &str,
        bundle: &Path,
        restore: Option<&Path>,
        preserve_fds: u32,
    ) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.arg("--root").arg(self.state.root());
        if let Some(log) = &self.log {
            cmd.arg("--log").arg(log);
        }
        cmd.arg("--log-format").arg(self.log_format.as_str());
        if self.debug {
            cmd.arg("--debug");
        }
        // The boot process checks them again, as it does the bundle.
        cmd.args(self.network.to_args());
        if self.overlay {
            cmd.arg("--overlay");
        }
        if self.platform != Platform::Seccomp {
            cmd.arg("--platform").arg(self.platform.as_str());
        }
        cmd.args(self.nvproxy.to_args());
        cmd.arg("boot")
            .arg("--bundle")
            .arg(bundle)
            .arg("--ready-fd")
            .arg(ready_fd(preserve_fds).to_string());
        if preserve_fds > 0 {
            cmd.arg("--preserve-fds").arg(preserve_fds.to_string());
        }
        if let Some(dir) = restore {
            cmd.arg("--restore").arg(dir);
        }
        cmd.arg(id);
        cmd
    }

    /// Creates container `id` from a bundle: returns once the sandbox is
    /// ready and waiting for `start`.
    pub fn create(&self, id: &str, opts: &CreateOptions) -> Result<Created, Error> {
        state::check_id(id)?;
        let bundle = oci::load(&opts.bundle)?;
        let plan = oci::plan(&bundle, id)?;
        if let Some(d) = plan.nvidia_devices.first() {
            if !self.nvproxy.on {
                return Err(Error::Usage(format!(
                    "config.json: linux.devices names /dev/{d}: give the runtime --nvproxy to pass NVIDIA GPUs through (docs/gpu.md)"
                )));
            }
            // Refused now, in one line, rather than by the boot process.
            crate::gpu::driver_abi(self.nvproxy.driver_version.as_deref())
                .map_err(|e| Error::Usage(e.to_string()))?;
        }
        if plan.terminal && opts.console_socket.is_none() {
            return Err(Error::Usage(
                "process.terminal is true: give --console-socket (or set it to false)".into(),
            ));
        }
        if !plan.terminal && opts.console_socket.is_some() {
            return Err(Error::Usage(
                "--console-socket given but process.terminal is false".into(),
            ));
        }
        check_preserved(opts.preserve_fds)?;
        for note in &plan.notes {
            tracing::warn!("container {id}: {note}");
        }
        if self.network.is_host() {
            tracing::warn!("container {id}: {HOST_NETWORK_WARNING}");
        }
        if self.network.host_sockets()
            && !plan.network_namespace
            && plan.network_namespace_path.is_none()
        {
            // runc's meaning of a spec without a network namespace
            // (Docker's `--network host`): the runtime's own.
            tracing::warn!(
                "container {id}: config.json has no linux.namespaces network entry: the \
                 container shares the runtime's network namespace"
            );
        }
        for note in &plan.ignored {
            tracing::info!("container {id}: {note}");
        }

        let locked = self.state.create(id)?;
        let scope = crate::cgroup::scope_of(self.state.root());
        let cgroup = match sandbox_cgroup(id, &scope, &plan) {
            Ok(c) => c,
            Err(e) => {
                let _ = locked.remove();
                return Err(e);
            }
        };
        if let Some(cg) = &cgroup {
            if let Err(e) = locked.note_cgroup(cg) {
                let _ = cg.destroy();
                let _ = locked.remove();
                return Err(e.into());
            }
        }
        match self.spawn_boot(&locked, &bundle, &plan, opts, cgroup.as_ref()) {
            Ok(created) => Ok(created),
            Err(e) => {
                if let Some(cg) = &cgroup {
                    let _ = cg.destroy();
                }
                let _ = locked.remove();
                Err(e)
            }
        }
    }

    fn spawn_boot(
        &self,
        locked: &Locked,
        bundle: &oci::Bundle,
        plan: &oci::Plan,
        opts: &CreateOptions,
        cgroup: Option<&Cgroup>,
    ) -> Result<Created, Error> {
        let id = locked.id();
        sys::mkfifo(&locked.dir().join(EXEC_FIFO), 0o622).map_err(io("making exec.fifo"))?;
        let tty = match (&opts.console_socket, plan.terminal) {
            (Some(sock), true) => Some(console(sock, plan.console_size, true)?),
            _ => None,
        };
        // Both ways: the boot process says it is ready, `create` says when
        // the record is written (and its EOF, that `create` died first).
        let (mut ready_r, ready_w) =
            std::os::unix::net::UnixStream::pair().map_err(io("making a socket pair"))?;
        let mut cmd =
            self.boot_command(id, &bundle.dir, opts.restore.as_deref(), opts.preserve_fds);
        sys::keep_open(&mut cmd, 3..ready_fd(opts.preserve_fds));
        if let Some(stdio) = &opts.stdio {
            if tty.is_some() {
                return Err(Error::Usage(
                    "both a terminal and stdio descriptors given for the sandbox".into(),
                ));
            }
            stdio.apply(&mut cmd)?;
        }
        sys::prepare_child(
            &mut cmd,
            ready_w.as_raw_fd(),
            ready_fd(opts.preserve_fds),
            !opts.foreground,
            tty.as_ref().map(|t| t.as_raw_fd()),
        );
        let mut child = cmd
            .spawn()
            .map_err(io(format!("starting {}", self.exe.display())))?;
        drop(ready_w);
        drop(tty);
        let pid = child.id() as i32;
        // Into the cgroup before it reports ready, so before the guest (or
        // the gofer, which it starts later) can run: every process it
        // forks is born there.
        if let Some(cg) = cgroup {
            if let Err(e) = cg.add(pid) {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e.into());
            }
        }

        let mut msg = String::new();
        let _ = std::io::BufReader::new(&ready_r).read_line(&mut msg);
        if msg.trim_end() != "ok" {
            let _ = child.kill();
            let _ = child.wait();
            let msg = msg.trim_end();
            return Err(if msg.is_empty() {
                Error::BootDied(id.to_string())
            } else {
                Error::Boot(msg.to_string())
            });
        }
        // prestart (runc runs it at create, as the spec now says) and then
        // createRuntime, in the runtime's namespaces, once the sandbox
        // process exists; a failure ends the sandbox.
        if let Some(h) = &plan.hooks {
            let state = OciState {
                pid,
                bundle: bundle.dir.clone(),
                rootfs: plan.rootfs.clone(),
                annotations: plan.annotations.clone(),
                oci_version: bundle.spec.version().clone(),
                ..OciState::creating(id)
            };
            let state = serde_json::to_value(&state).unwrap_or_default();
            let ran = crate::hooks::run(
                "prestart",
                h.prestart().as_deref().unwrap_or_default(),
                &state,
            )
            .and_then(|()| {
                crate::hooks::run(
                    "createRuntime",
                    h.create_runtime().as_deref().unwrap_or_default(),
                    &state,
                )
            });
            if let Err(e) = ran {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e.into());
            }
        }
        let start = state::process_start_time(pid).map_or(0, |(_, t)| t);
        let record = Record {
            oci_version: bundle.spec.version().clone(),
            id: id.to_string(),
            status: Status::Created,
            pid,
            pid_start_time: start,
            bundle: bundle.dir.clone(),
            rootfs: plan.rootfs.clone(),
            created: state::rfc3339(std::time::SystemTime::now()),
            owner: sys::ids().0,
            // config.json's own, untouched: hooks and engines compare them.
            annotations: plan.annotations.clone(),
            root_writes: match (plan.readonly, self.overlay) {
                (true, _) => "read-only",
                (false, true) => "memory",
                (false, false) => "rootfs",
            }
            .into(),
            exit_status: None,
            kill_signal: None,
            cgroup: cgroup.cloned(),
            guest_limits: None,
            guest_limits_pending: false,
        };
        if let Err(e) = locked.write(&record) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e.into());
        }
        if let Some(p) = &opts.pid_file {
            if let Err(e) = write_atomic(p, pid.to_string().as_bytes()) {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        }
        if let Err(e) = ready_r.write_all(b"go\n") {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io("releasing the sandbox")(e));
        }
        tracing::info!("container {id} created, sandbox pid {pid}");
        Ok(Created {
            pid,
            child: opts.foreground.then_some(child),
        })
    }

    /// Releases a created container: its program starts running.
    pub fn start(&self, id: &str) -> Result<(), Error> {
        let locked = self.state.lock(id)?;
        let record = locked.record()?;
        let status = record.observed();
        if status != Status::Created {
            return Err(Error::WrongStatus {
                id: id.into(),
                status,
                wanted: "created",
            });
        }
        let fifo_path = locked.dir().join(EXEC_FIFO);
        // Non-blocking, so that a sandbox that died cannot leave us stuck in
        // open(); the poll below waits for its byte instead.
        let mut fifo = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&fifo_path)
            .map_err(io(format!("opening {}", fifo_path.display())))?;
        loop {
            if sys::poll_readable(fifo.as_fd(), 100).map_err(io("waiting on exec.fifo"))? {
                break;
            }
            if !record.sandbox_alive() {
                return Err(Error::BootDied(id.into()));
            }
        }
        let mut byte = [0u8; 1];
        match fifo.read(&mut byte) {
            Ok(1) => {}
            _ => return Err(Error::BootDied(id.into())),
        }
        let _ = std::fs::remove_file(&fifo_path);
        // The sandbox starts only now (the Sentry, then the guest's first
        // program): returning before that program has set itself up would
        // let a `kill` right after `start` find no handler and be dropped,
        // where under runc the program is running by then. The boot
        // process writes a second byte when the program first waits for
        // something (or ends); a program that computes without waiting
        // is left to it after a while. The boot process takes the state's
        // lock as it starts: it is let go first.
        locked.advance(Status::Running)?;
        let record = locked.record();
        drop(locked);
        let settled_by = std::time::Instant::now() + START_SETTLE;
        while let Some(left) = settled_by.checked_duration_since(std::time::Instant::now()) {
            let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX).max(1);
            match sys::poll_readable(fifo.as_fd(), ms.min(100)) {
                Ok(false) if record.as_ref().is_ok_and(Record::sandbox_alive) => {}
                _ => break,
            }
        }
        tracing::info!("container {id} started");
        // A failed poststart hook is only logged (runtime spec, "Lifecycle").
        if let Ok(record) = record {
            self.run_hooks(&record, "poststart", |h| h.poststart());
        }
        Ok(())
    }

    /// Runs the `kind` hooks of `record`'s bundle, logging a failure.
    fn run_hooks(
        &self,
        record: &Record,
        kind: &'static str,
        which: impl Fn(&oci_spec::runtime::Hooks) -> &Option<Vec<oci_spec::runtime::Hook>>,
    ) {
        let Ok(bundle) = oci::load(&record.bundle) else {
            return;
        };
        let Some(hooks) = bundle.spec.hooks().as_ref().and_then(|h| which(h).clone()) else {
            return;
        };
        let state = serde_json::to_value(OciState::from_record(record)).unwrap_or_default();
        if let Err(e) = crate::hooks::run(kind, &hooks, &state) {
            tracing::warn!("container {}: {e}", record.id);
        }
    }

    /// The state of container `id`.
    pub fn state(&self, id: &str) -> Result<OciState, Error> {
        Ok(match self.state.read(id)? {
            Some(r) => OciState::from_record(&r),
            None => OciState::creating(id),
        })
    }

    /// Every container's state, sorted by id.
    pub fn list(&self) -> Result<Vec<OciState>, Error> {
        let mut out = Vec::new();
        for id in self.state.ids()? {
            match self.state(&id) {
                Ok(s) => out.push(s),
                // Deleted meanwhile.
                Err(Error::State(state::Error::NotFound(_))) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Sends `signal` to the container's sandbox.
    ///
    /// The signal goes to the boot process, which hands it to the guest's
    /// init as `kill(2)` from outside the container's PID namespace: init's
    /// handler runs if it has one, else the signal is dropped, as with runc
    /// (pid_namespaces(7)). `SIGKILL` ends the boot process itself, and
    /// with it the sandbox; the exit status is then 128+9.
    ///
    /// The signals of job control (`SIGSTOP`, `SIGTSTP`, `SIGTTIN`,
    /// `SIGTTOU`, `SIGCONT`) go to the guest's init over the control
    /// socket instead: the boot process could not pass `SIGSTOP` on (it
    /// would only stop itself), and the guest's init is what they are
    /// for. As with runc, `STOP` stops init and `CONT` continues it, the
    /// others reach a handler or are dropped, and the container stays
    /// `running` (only `pause` freezes all of it).
    ///
    /// A paused sandbox gets the signal when it resumes, as a frozen Linux
    /// process does; `SIGKILL` thaws it so that it dies now.
    pub fn kill(&self, id: &str, signal: i32) -> Result<(), Error> {
        let locked = self.state.lock(id)?;
        let mut record = locked.record()?;
        let status = record.observed();
        if !matches!(status, Status::Created | Status::Running | Status::Paused) {
            return Err(Error::WrongStatus {
                id: id.into(),
                status,
                wanted: "created, running or paused",
            });
        }
        let job_control = matches!(
            signal,
            libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU | libc::SIGCONT
        );
        if job_control {
            if status == Status::Created {
                // No guest process yet: nothing to stop or continue.
                if signal == libc::SIGCONT {
                    return Ok(());
                }
                return Err(Error::WrongStatus {
                    id: id.into(),
                    status,
                    wanted: "running or paused (start it first)",
                });
            }
            let socket = self.state.dir(id).join(crate::control::SOCKET);
            crate::control::signal_init(&socket, signal, status != Status::Paused).map_err(
                |why| Error::Boot(format!("container {id}: signal {signal} not sent: {why}")),
            )?;
            tracing::info!("container {id}: sent signal {signal} to the guest's init");
            return Ok(());
        }
        if signal != 0 {
            record.kill_signal = Some(signal);
            locked.write(&record)?;
        }
        sys::kill(record.pid, signal).map_err(io(format!("signalling container {id}")))?;
        if status == Status::Paused && signal == libc::SIGKILL {
            if let Some(cg) = &record.cgroup {
                cg.thaw()?;
            }
        }
        tracing::info!("container {id}: sent signal {signal}");
        Ok(())
    }

    /// Removes container `id`. A created container's sandbox is killed; a
    /// running one only with `force`. With `force`, a container that does
    /// not exist is not an error (runc's behaviour).
    pub fn delete(&self, id: &str, force: bool) -> Result<(), Error> {
        let locked = match self.state.lock(id) {
            Ok(l) => l,
            Err(state::Error::NotFound(_)) if force => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let Some(mut record) = locked.read()? else {
            // A create that died half-way: its boot process ends when it
            // sees that, and what is left in its cgroup ends here.
            if let Some(cg) = locked.noted_cgroup() {
                cg.destroy()?;
            }
            return Ok(locked.remove()?);
        };
        match record.observed() {
            Status::Running if !force => return Err(Error::Running(id.into())),
            status @ Status::Paused if !force => {
                return Err(Error::WrongStatus {
                    id: id.into(),
                    status,
                    wanted: "stopped (resume and kill it, or use 'delete --force')",
                })
            }
            Status::Created | Status::Running | Status::Paused => {
                let pidfd = sys::pidfd_open(record.pid).ok();
                // Checked after opening the pidfd, so the pidfd cannot refer
                // to a process that reused the pid.
                if record.sandbox_alive() {
                    record.kill_signal = Some(libc::SIGKILL);
                    let _ = locked.write(&record);
                    let _ = sys::kill(record.pid, libc::SIGKILL);
                    // A frozen sandbox acts on SIGKILL only once thawed.
                    if let Some(cg) = &record.cgroup {
                        let _ = cg.thaw();
                    }
                    if let Some(fd) = pidfd {
                        let _ = sys::poll_readable(fd.as_fd(), KILL_WAIT.as_millis() as i32);
                    }
                }
            }
            _ => {}
        }
        // Helpers the sandbox left behind (a stub, the gofer) die with it.
        if let Some(cg) = &record.cgroup {
            cg.destroy()?;
        }
        // A failed poststop hook is only logged (runtime spec, "Lifecycle").
        self.run_hooks(&record, "poststop", |h| h.poststop());
        locked.remove()?;
        tracing::info!("container {id} deleted");
        Ok(())
    }

    /// Freezes every host process of running container `id` (Sentry, stubs,
    /// gofer) with its cgroup's freezer: the guest stops where it is and
    /// uses no CPU until `resume`.
    pub fn pause(&self, id: &str) -> Result<(), Error> {
        let locked = self.state.lock(id)?;
        let mut record = locked.record()?;
        let status = record.observed();
        require_running(id, status)?;
        // Frozen while we hold the lock, so the sandbox cannot be frozen
        // holding it itself.
        let cg = record.cgroup.clone().ok_or(cgroup::Error::NoFreezer)?;
        cg.freeze()?;
        record.status = Status::Paused;
        if let Err(e) = locked.write(&record) {
            let _ = cg.thaw();
            return Err(e.into());
        }
        tracing::info!("container {id} paused");
        Ok(())
    }

    /// Lets paused container `id` run again. Guest limits `update` changed
    /// meanwhile reach the Sentry now, as it thaws.
    pub fn resume(&self, id: &str) -> Result<(), Error> {
        let locked = self.state.lock(id)?;
        let mut record = locked.record()?;
        let status = record.observed();
        if status != Status::Paused {
            return Err(Error::WrongStatus {
                id: id.into(),
                status,
                wanted: "paused",
            });
        }
        let cg = record.cgroup.clone().ok_or(cgroup::Error::NoFreezer)?;
        cg.thaw()?;
        record.status = Status::Running;
        locked.write(&record)?;
        tracing::info!("container {id} resumed");
        if record.guest_limits_pending {
            let limits = record.guest_limits.unwrap_or_default();
            self.send_guest_limits(id, &limits)?;
            record.guest_limits_pending = false;
            locked.write(&record)?;
            tracing::info!("container {id}: limits updated while paused applied");
        }
        Ok(())
    }

    /// Tells the Sentry of running container `id` its new guest limits
    /// over the control socket (which waits a little for a sandbox that
    /// has just started to serve it).
    fn send_guest_limits(
        &self,
        id: &str,
        limits: &crate::control::GuestLimits,
    ) -> Result<(), Error> {
        let socket = self.state.dir(id).join(crate::control::SOCKET);
        crate::control::update(&socket, limits).map_err(|why| {
            Error::Boot(format!(
                "container {id}: the sandbox did not take the new limits: {why}"
            ))
        })
    }

    /// Changes the egress rules of running container `id` for its new
    /// connections (`update --allow-host/--deny-host`).
    pub fn update_egress(
        &self,
        id: &str,
        update: &crate::control::EgressUpdate,
    ) -> Result<(), Error> {
        let locked = self.state.lock(id)?;
        let status = locked.record()?.observed();
        require_running(id, status)?;
        let socket = self.state.dir(id).join(crate::control::SOCKET);
        crate::control::update_egress(&socket, update).map_err(|why| {
            Error::Boot(format!(
                "container {id}: the sandbox did not take the new rules: {why}"
            ))
        })?;
        tracing::info!(?update, "container {id}: egress rules updated");
        Ok(())
    }

    /// Saves running (or paused) container `id` into `dir` (runc's
    /// `checkpoint --image-path`), then ends it unless `leave_running`. A
    /// paused container is thawed for the save (its guest stops again at
    /// once) and frozen again after it.
    pub fn checkpoint(&self, id: &str, dir: &Path, leave_running: bool) -> Result<String, Error> {
        self.save(id, dir, leave_running, false)
    }

    /// [`Runtime::checkpoint`]; `lean`: for one restore at once (`fork`).
    fn save(&self, id: &str, dir: &Path, leave_running: bool, lean: bool) -> Result<String, Error> {
        let locked = self.state.lock(id)?;
        let record = locked.record()?;
        let status = record.observed();
        let paused = status == Status::Paused;
        if !paused {
            require_running(id, status)?;
        }
        let image = open_image_for_save(dir)
            .map_err(|e| Error::Usage(format!("--image-path {}: {e}", dir.display())))?;
        let cg = record.cgroup.clone();
        if paused {
            cg.as_ref().ok_or(crate::cgroup::Error::NoFreezer)?.thaw()?;
        }
        let socket = self.state.dir(id).join(crate::control::SOCKET);
        let saved = crate::control::checkpoint(&socket, &image, leave_running, lean);
        if paused && leave_running {
            if let Some(cg) = &cg {
                cg.freeze()?;
            }
        }
        let saved = saved.map_err(|why| {
            Error::Boot(format!("container {id} was not saved (it runs on): {why}"))
        })?;
        tracing::info!("container {id}: {saved} into {}", dir.display());
        drop(locked);
        if !leave_running {
            // As runc's: the command returns once the container has stopped
            // (the Sentry ended it after the save).
            let _ = self.wait(id);
        }
        Ok(saved)
    }

    /// Makes container `new_id` a copy of running container `id`: its
    /// state saved (it runs on) and restored with its bundle, detached,
    /// with the caller's stdio. The image is removed once read.
    pub fn fork(&self, id: &str, new_id: &str) -> Result<(), Error> {
        state::check_id(new_id)?;
        if self.state.read(new_id).is_ok_and(|r| r.is_some()) {
            return Err(Error::Usage(format!("container {new_id} exists already")));
        }
        let forks = self.state.root().join(".forks");
        std::fs::create_dir_all(&forks).map_err(io(format!("making {}", forks.display())))?;
        let dir = forks.join(new_id);
        self.save(id, &dir, true, true)?;
        let opts = CreateOptions {
            bundle: self.state(id)?.bundle,
            restore: Some(dir.clone()),
            ..CreateOptions::default()
        };
        let made = self.run(new_id, &opts, true);
        // Read whole by the copy's boot process before `create` returned.
        let _ = std::fs::remove_dir_all(&dir);
        made.map(|_| ())
    }

    /// Changes the resource limits of created, running or paused container
    /// `id` (runc's `update`): those set in `limits` are written to the
    /// sandbox's host cgroup at once (a frozen cgroup's limits change as
    /// any other's), and the memory, pids and CPU quota limits reach the
    /// guest too (`/proc/meminfo`, `/sys/fs/cgroup`, `fork` failing with
    /// `EAGAIN`):
    /// through the Sentry's control socket, or, for a sandbox not started
    /// yet or frozen, recorded in its state and applied as it starts or
    /// resumes.
    pub fn update(&self, id: &str, limits: &cgroup::Limits) -> Result<(), Error> {
        let locked = self.state.lock(id)?;
        let mut record = locked.record()?;
        let status = record.observed();
        if !matches!(status, Status::Created | Status::Running | Status::Paused) {
            return Err(Error::WrongStatus {
                id: id.into(),
                status,
                wanted: "created, running or paused",
            });
        }
        if !limits.any() {
            return Ok(());
        }
        let cg = record
            .cgroup
            .clone()
            .ok_or_else(|| Error::NoCgroup(id.into()))?;
        cg.update(limits)?;
        let guest = crate::control::GuestLimits {
            memory: limits.memory,
            pids: limits.pids,
            cpu_quota: limits.cpu_quota,
            cpu_period: limits.cpu_period,
        };
        if !guest.any() {
            tracing::info!("container {id}: limits updated");
            return Ok(());
        }
        // Recorded first: a sandbox that has not served its control socket
        // yet applies them as it does (see `boot`); a frozen one cannot
        // answer, and `resume` delivers them (the lock we hold keeps
        // `resume` from thawing it meanwhile).
        record.guest_limits = Some(record.guest_limits.unwrap_or_default().merged(guest));
        record.guest_limits_pending |= status == Status::Paused;
        locked.write(&record)?;
        if status == Status::Running {
            // Limits a failed `resume` could not deliver go along.
            let pending = record.guest_limits_pending;
            let send = if pending {
                record.guest_limits.unwrap_or_default()
            } else {
                guest
            };
            self.send_guest_limits(id, &send)?;
            if pending {
                record.guest_limits_pending = false;
                locked.write(&record)?;
            }
        }
        tracing::info!("container {id}: limits updated");
        Ok(())
    }

    /// Runs `req` inside running container `id` with the caller's standard
    /// descriptors, and returns its status. With `detach`, a process of
    /// ours stands for it (it exits with the program's status) and this
    /// returns 0 once the program has started. `pid_file` gets the pid of
    /// the host process that stands for the program.
    pub fn exec(
        &self,
        id: &str,
        req: &crate::control::ExecRequest,
        terminal: Option<&ExecTerminal>,
        detach: bool,
        pid_file: Option<&Path>,
    ) -> Result<i32, Error> {
        let status = self.state(id)?.status;
        require_running(id, status)?;
        let socket = self.state.dir(id).join(crate::control::SOCKET);
        let preserved = take_preserved(req.preserve_fds)?;
        let preserved: Vec<BorrowedFd<'_>> = preserved.iter().map(AsFd::as_fd).collect();
        let (i, o, e) = (std::io::stdin(), std::io::stdout(), std::io::stderr());
        // With a terminal: a new one whose master goes to the console
        // socket, or the caller's own.
        let slave = match terminal {
            Some(ExecTerminal {
                console_socket: Some(sock),
                size,
            }) => Some(console(sock, *size, false)?),
            Some(_) if detach => {
                return Err(Error::Usage(
                    "exec --detach --tty: give --console-socket for the terminal".into(),
                ))
            }
            Some(_) if !std::io::IsTerminal::is_terminal(&i) => {
                return Err(Error::Usage(
                    "exec --tty: standard input is not a terminal; give --console-socket".into(),
                ))
            }
            _ => None,
        };
        let stdio = match &slave {
            Some(t) => [t.as_fd(), t.as_fd(), t.as_fd()],
            None => [i.as_fd(), o.as_fd(), e.as_fd()],
        };
        // Signals for the program that arrive before it has started wait
        // (blocked) until they can be passed on.
        sentry::hostsig::block_forwarded().map_err(io("blocking signals"))?;
        if !detach {
            let started = crate::control::exec(&socket, req, stdio, &preserved)
                .map_err(|e| Error::Boot(format!("container {id}: exec {:?}: {e}", req.args)))?;
            if let Some(p) = pid_file {
                write_atomic(p, std::process::id().to_string().as_bytes())?;
            }
            // `kill` of this process (or ^C) reaches the program.
            if let Err(e) = started.forward_host_signals() {
                tracing::warn!("container {id}: exec: signals will not be forwarded: {e}");
            }
            return started
                .wait()
                .map_err(|e| Error::Boot(format!("container {id}: exec: {e}")));
        }
        let (child, started) = sys::fork_reporting(|| {
            let started = crate::control::exec(&socket, req, stdio, &preserved)?;
            // This process stands for the program: signals to it (what
            // containerd's runc shim sends to the pid file's pid) reach it.
            let _ = started.forward_host_signals();
            Ok::<_, crate::control::Error>(move || started.wait().unwrap_or(255))
        })
        .map_err(io("starting the exec process"))?;
        started.map_err(|e| Error::Boot(format!("container {id}: exec {:?}: {e}", req.args)))?;
        if let Some(p) = pid_file {
            write_atomic(p, child.to_string().as_bytes())?;
        }
        Ok(0)
    }

    /// Waits until container `id` stops and returns its exit status (0-255,
    /// 128+N after signal N).
    pub fn wait(&self, id: &str) -> Result<i32, Error> {
        loop {
            let Some(record) = self.state.read(id)? else {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            if record.observed() == Status::Stopped {
                return exit_code(&record).ok_or_else(|| Error::NoExitStatus(id.into()));
            }
            match sys::pidfd_open(record.pid) {
                Ok(fd) if record.sandbox_alive() => {
                    sys::poll_readable(fd.as_fd(), 1000).map_err(io("waiting for the sandbox"))?;
                }
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// Host processes of the container: the sandbox and its helpers (the
    /// guest's own processes live inside the Sentry and have no host pid).
    pub fn ps(&self, id: &str) -> Result<Vec<i32>, Error> {
        let Some(record) = self.state.read(id)? else {
            return Ok(Vec::new());
        };
        if !record.sandbox_alive() {
            return Ok(Vec::new());
        }
        let mut parents: Vec<(i32, i32)> = Vec::new();
        if let Ok(rd) = std::fs::read_dir("/proc") {
            for e in rd.filter_map(Result::ok) {
                let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                    continue;
                };
                let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                    continue;
                };
                let ppid = stat
                    .rfind(')')
                    .and_then(|i| stat[i + 1..].split_whitespace().nth(1))
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                parents.push((pid, ppid));
            }
        }
        let mut out = vec![record.pid];
        let mut i = 0;
        while i < out.len() {
            let p = out[i];
            out.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
            i += 1;
        }
        Ok(out)
    }

    /// The guest's own processes, from the Sentry of container `id`: none
    /// before `start` or after the end; a paused (frozen) Sentry cannot
    /// answer.
    pub fn guest_processes(&self, id: &str) -> Result<Vec<crate::control::GuestProcess>, Error> {
        let record = self
            .state
            .read(id)?
            .ok_or_else(|| state::Error::NotFound(id.into()))?;
        match record.observed() {
            Status::Running => {}
            status @ Status::Paused => {
                return Err(Error::WrongStatus {
                    id: id.into(),
                    status,
                    wanted: "running (resume it to list its processes)",
                })
            }
            _ => return Ok(Vec::new()),
        }
        let socket = self.state.dir(id).join(crate::control::SOCKET);
        crate::control::processes(&socket).map_err(|why| {
            Error::Boot(format!(
                "container {id}: the sandbox did not list its processes: {why}"
            ))
        })
    }

    /// What the container's host cgroup has counted (memory, CPU time),
    /// with the guest's tasks and task limit as the Sentry counts them
    /// (the host's `pids.current` counts the Sentry's threads and stubs,
    /// not the guest's processes; it stands in when the Sentry does not
    /// answer); `None` for a sandbox without a cgroup of its own.
    pub fn cgroup_stats(&self, id: &str) -> Result<Option<crate::cgroup::Stats>, Error> {
        let record = self
            .state
            .read(id)?
            .ok_or_else(|| state::Error::NotFound(id.into()))?;
        let Some(mut stats) = record.cgroup.as_ref().map(Cgroup::stats) else {
            return Ok(None);
        };
        if let Some(guest) = self.guest_stats(id, &record) {
            stats.pids_current = Some(guest.tasks);
            stats.pids_limit = Some(guest.task_limit.unwrap_or(0));
        }
        Ok(Some(stats))
    }

    /// The guest's task count and limit, from the Sentry of running
    /// container `id`; `None` if it does not answer (a frozen Sentry
    /// cannot, and is not asked).
    pub fn guest_stats(&self, id: &str, record: &Record) -> Option<crate::control::GuestStats> {
        if record.observed() != Status::Running {
            return None;
        }
        let socket = self.state.dir(id).join(crate::control::SOCKET);
        let mut stats = crate::control::stats(&socket)
            .map_err(|e| tracing::info!("container {id}: no task count from the sandbox: {e}"))
            .ok()?;
        // Just after `start` the Sentry may not have made the init's task
        // yet; under runc the container's init exists from `create` on
        // and is counted.
        stats.tasks = stats.tasks.max(1);
        Some(stats)
    }

    /// One `events` record: runc's `{"type": "stats", "id", "data"}` with
    /// the sandbox cgroup's counters (without a cgroup, the host-side
    /// process count and resident memory of the sandbox), or
    /// `{"type": "exit", ...}` once the container has stopped.
    pub fn event(&self, id: &str) -> Result<(serde_json::Value, bool), Error> {
        let record = self
            .state
            .read(id)?
            .ok_or_else(|| state::Error::NotFound(id.into()))?;
        if record.observed() == Status::Stopped {
            let v = serde_json::json!({
                "type": "exit",
                "id": id,
                "data": { "exitStatus": exit_code(&record) },
            });
            return Ok((v, true));
        }
        if let Some(s) = self.cgroup_stats(id)? {
            // runc's fields, from the sandbox cgroup's counters and the
            // Sentry's task count.
            let v = serde_json::json!({
                "type": "stats",
                "id": id,
                "data": {
                    "cpu": { "usage": {
                        "total": s.cpu_total_ns.unwrap_or_default(),
                        "user": s.cpu_user_ns.unwrap_or_default(),
                        "kernel": s.cpu_kernel_ns.unwrap_or_default(),
                    } },
                    "memory": { "usage": {
                        "usage": s.memory_usage.unwrap_or_default(),
                        "limit": s.memory_limit.unwrap_or(u64::MAX),
                        "max": s.memory_max_usage.unwrap_or_default(),
                    } },
                    "pids": {
                        "current": s.pids_current.unwrap_or_default(),
                        "limit": s.pids_limit.unwrap_or_default(),
                    },
                },
            });
            return Ok((v, false));
        }
        let pids = self.ps(id)?;
        let rss: u64 = pids
            .iter()
            .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok())
            .filter_map(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
            .sum::<u64>()
            * 1024;
        let tasks = self
            .guest_stats(id, &record)
            .map_or(pids.len() as u64, |g| g.tasks);
        let v = serde_json::json!({
            "type": "stats",
            "id": id,
            "data": {
                "pids": { "current": tasks },
                "memory": { "usage": { "usage": rss } },
            },
        });
        Ok((v, false))
    }

    /// `events`: prints a record every `interval` until the container stops
    /// (then its exit record), or just one with `once`.
    pub fn events(
        &self,
        id: &str,
        interval: Duration,
        once: bool,
        out: &mut dyn Write,
    ) -> Result<(), Error> {
        loop {
            let (v, stopped) = self.event(id)?;
            writeln!(out, "{v}").map_err(io("writing events"))?;
            let _ = out.flush();
            if stopped || once {
                return Ok(());
            }
            let deadline = Instant::now() + interval;
            // Poll the state often so that the exit record is prompt.
            while Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50).min(interval));
                if let Ok(Some(r)) = self.state.read(id) {
                    if r.observed() == Status::Stopped {
                        break;
                    }
                }
            }
        }
    }

    /// `run`: create, start and (unless `detach`) wait for the container,
    /// then delete it; returns its exit status.
    pub fn run(&self, id: &str, opts: &CreateOptions, detach: bool) -> Result<i32, Error> {
        let opts = CreateOptions {
            foreground: !detach,
            ..opts.clone()
        };
        let created = self.create(id, &opts)?;
        if !detach {
            // A supervisor's TERM or a terminal's ^C reaches the container
            // (today: ends its sandbox) while `run` waits and cleans up.
            sys::forward_signals(created.pid).map_err(io("installing signal handlers"))?;
        }
        if let Err(e) = self.start(id) {
            let _ = self.delete(id, true);
            return Err(e);
        }
        if detach {
            return Ok(0);
        }
        let code = match created.child {
            Some(mut child) => {
                let status = child.wait().map_err(io("waiting for the sandbox"))?;
                use std::os::unix::process::ExitStatusExt;
                match (status.code(), status.signal()) {
                    (Some(c), _) => c,
                    (None, Some(s)) => 128 + s,
                    _ => 255,
                }
            }
            None => self.wait(id)?,
        };
        self.delete(id, true)?;
        Ok(code)
    }

    /// Writes a template `config.json` into `bundle`; refuses to overwrite.
    pub fn spec(bundle: &Path) -> Result<PathBuf, Error> {
        let path = bundle.join("config.json");
        if path.exists() {
            return Err(Error::Usage(format!(
                "{} exists: remove it first",
                path.display()
            )));
        }
        let text = serde_json::to_vec_pretty(&oci::template())
            .map_err(|e| Error::Usage(format!("serializing the template: {e}")))?;
        std::fs::write(&path, text).map_err(io(format!("writing {}", path.display())))?;
        Ok(path)
    }
}

/// The boot process: runs container `id` from `bundle` and returns the exit
/// status to exit with. Reports readiness (or the reason it cannot run) to
/// `create` on `ready_fd`.
pub fn boot(
    state: &StateDir,
    id: &str,
    bundle: &Path,
    handed: Handed,
    flags: BootFlags<'_>,
    restore: Option<&Path>,
) -> i32 {
    let BootFlags {
        network,
        overlay,
        platform,
        nvproxy,
    } = flags;
    let handed = sys::inherited_fd(handed.ready_fd).and_then(|r| {
        Ok((
            std::fs::File::from(r),
            sys::take_past_stdio(handed.preserve_fds)?,
        ))
    });
    let (mut ready, preserved) = match handed {
        Ok(h) => h,
        Err(e) => {
            eprintln!("ferrovisor boot: the descriptors create hands down: {e} (boot is started by 'create')");
            return 1;
        }
    };
    // Read and checked before anything else: a bad image fails `restore`.
    let image = match restore.map(read_image).transpose() {
        Ok(i) => i,
        Err(e) => {
            let _ = writeln!(ready, "--image-path {e}");
            return 1;
        }
    };
    let prepared = prepare(id, bundle, network);
    let (plan, root, mut stack) = match prepared {
        Ok(p) => p,
        Err(e) => {
            let _ = writeln!(ready, "{e}");
            return 1;
        }
    };
    // `linux.resources.cpu.cpus`: every thread and process the sandbox
    // starts from here on inherits the affinity.
    if let Some(cpus) = &plan.cpus {
        if let Err(e) = sys::set_affinity(cpus) {
            let _ = writeln!(ready, "linux.resources.cpu.cpus: {e}");
            return 1;
        }
    }
    // `linux.memoryPolicy`, before the Sentry's threads and stubs exist:
    // they inherit it, so the guest's memory is placed by it.
    if let Some((mode, nodes)) = &plan.mempolicy {
        if let Err(e) = sys::set_mempolicy(*mode, nodes) {
            let _ = writeln!(ready, "linux.memoryPolicy: the host refused it: {e}");
            return 1;
        }
    }
    // Opened while this process may: the Sentry later runs unprivileged.
    let mut kvm = match platform {
        Platform::Kvm => match platform_kvm::Device::open() {
            Ok(d) => Some(d),
            Err(e) => {
                let _ = writeln!(ready, "--platform kvm: {e}");
                return 1;
            }
        },
        Platform::Seccomp => None,
    };
    let _ = ready.write_all(b"ok\n");
    // Nothing may outlive a `create` that dies before it wrote the record
    // (a client that gave up): `delete` could not find this process.
    let mut go = [0u8; 1];
    if !matches!(ready.read(&mut go), Ok(1) if go[0] == b'g') {
        tracing::warn!("container {id}: create ended before the container was recorded");
        return 1;
    }
    drop(ready);

    // Wait for `start`: open() of a FIFO for writing blocks until a reader
    // opens it.
    let fifo = state.dir(id).join(EXEC_FIFO);
    let released = std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .and_then(|mut f| f.write_all(b"0").map(|()| f));
    let mut released = match released {
        Ok(f) => f,
        Err(e) => {
            tracing::error!("container {id}: waiting for start: {e}");
            return 1;
        }
    };
    // From here on, `kill` reaches the guest's first process (before start
    // it ends the boot process itself).
    if let Err(e) = sentry::hostsig::block_forwarded() {
        tracing::warn!("container {id}: signals will not be forwarded: {e}");
    }
    // The control socket, bound while this process may still write the
    // state directory (the Sentry's ids will not), and as soon as `start`
    // has let it go: `exec` and `update` requests wait in its backlog until
    // the Sentry serves it.
    let control = match crate::control::bind(&state.dir(id).join(crate::control::SOCKET)) {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::warn!("container {id}: no control socket, exec will fail: {e}");
            None
        }
    };
    if let Ok(l) = state.lock(id) {
        let _ = l.advance(Status::Running);
    }

    drop(root);
    let mut mounts = Vec::new();
    for m in &plan.mounts {
        let made = match m {
            crate::oci::PlanMount::Bind {
                source,
                dest,
                read_only,
            } => crate::gofer_proc::volume_mount(source, dest, *read_only),
            crate::oci::PlanMount::Tmpfs { dest, mode, size } => Ok(sentry::Mount {
                dest: dest.as_bytes().to_vec(),
                source: sentry::MountSource::Tmpfs {
                    mode: *mode,
                    size: *size,
                },
            }),
        };
        match made {
            Ok(m) => mounts.push(m),
            Err(e) => {
                eprintln!("ferrovisor: mount: {e}");
                tracing::error!("container {id}: mount: {e}");
                return 125;
            }
        }
    }
    // A writable root is the bundle's rootfs itself, as under runc, unless
    // `--overlay` keeps the writes in memory.
    let root_writes = match (plan.readonly, overlay) {
        (true, _) => sentry::RootWrites::ReadOnly,
        (false, true) => sentry::RootWrites::Memory,
        (false, false) => sentry::RootWrites::Host,
    };
    let spawned = if root_writes == sentry::RootWrites::Host {
        crate::gofer_proc::spawn_writable(&plan.rootfs)
    } else {
        crate::gofer_proc::spawn(&plan.rootfs)
    };
    let client = match spawned {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ferrovisor: {e}");
            return 125;
        }
    };
    // With `--network host`, the interfaces, addresses and routes of the
    // container's network namespace (which `prepare` made or joined, and
    // the engine's hooks have set up by `start`), read while this process
    // may still ask the host: the guest is shown these.
    let interfaces = if network.is_host() {
        match crate::host_net::snapshot() {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("ferrovisor: --network host: listing the interfaces: {e}");
                tracing::error!("container {id}: --network host: listing the interfaces: {e}");
                return 125;
            }
        }
    } else if network.egress().is_some()
        && (plan.network_namespace || plan.network_namespace_path.is_some())
    {
        // With `--network sandbox`, the guest's link out is the interface
        // the engine put in the container's own namespace, read from the
        // same snapshot: its addresses become the netstack's own and the
        // guest sees it with its routes. The relays' host sockets are
        // opened in this namespace, so their source is that address
        // already. (A container in the host's namespace has no interface
        // of its own: it gets the default link, as `do` does, and the
        // host's addresses stay closed unless a rule names them.)
        let snapshot = match crate::host_net::snapshot() {
            Ok(t) => t,
            Err(e) => {
                eprintln!("ferrovisor: --network sandbox: listing the interfaces: {e}");
                tracing::error!("container {id}: --network sandbox: listing the interfaces: {e}");
                return 125;
            }
        };
        match crate::host_net::sandbox_link(&snapshot) {
            Some((table, link)) => {
                tracing::info!(
                    "container {id}: --network sandbox: the guest's link is {:?}",
                    link.addrs
                );
                stack.link = link;
                Some(table)
            }
            None => {
                tracing::info!(
                    "container {id}: --network sandbox: no interface with an IPv4 address in the \
                     container's network namespace: the guest gets the default link"
                );
                None
            }
        }
    } else {
        None
    };
    // The Sentry's seccomp filter leaves it no way to open or rename files
    // by path once the guest runs: the exit status goes through a file
    // opened now.
    let exit_file = match crate::state::ExitFile::create(&state.dir(id)) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("ferrovisor: {e}");
            return 125;
        }
    };
    // What `update` changed before the control socket was there to hear
    // it (read after binding: an update that found no socket recorded its
    // limits first).
    let gpu = if nvproxy.on && !plan.nvidia_devices.is_empty() {
        let dir = nvproxy
            .dev_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from("/dev"));
        match crate::gpu::oci_config(
            &plan.nvidia_devices,
            nvproxy.capabilities.as_deref(),
            &plan.env,
            nvproxy.driver_version.as_deref(),
            &dir,
        ) {
            Ok(g) => Some(g),
            Err(e) => {
                eprintln!("ferrovisor: {e}");
                tracing::error!("container {id}: {e}");
                return 125;
            }
        }
    } else {
        None
    };
    let record = state.read(id).ok().flatten();
    let no_cgroup = record.as_ref().is_some_and(|r| r.cgroup.is_none());
    let updated = record.and_then(|r| r.guest_limits);
    let config = sentry::SandboxConfig {
        root: client,
        _marker: std::marker::PhantomData,
        root_writes,
        // What config.json mounts, and only that, as under runc: `/tmp`
        // is the root's.
        tmpfs_tmp: false,
        argv: plan.argv.into_iter().map(String::into_bytes).collect(),
        envp: plan.env.into_iter().map(String::into_bytes).collect(),
        cwd: plan.cwd.into_bytes(),
        hostname: plan.hostname,
        // Loopback only, inside the Sentry, unless `--network` says
        // otherwise: with `host` TCP and UDP go through host sockets in
        // this process's network namespace, which `prepare` made or
        // joined; with `sandbox` the relays of the allow rules do.
        network: stack,
        host_network: network.is_host(),
        interfaces,
        builtin_init: false,
        // `start` waits for this second byte (or the FIFO's end).
        on_settled: Some(sentry::SettleHook(Box::new(move || {
            let _ = released.write_all(b"1");
        }))),
        on_start: Some(sentry::StartHook(Box::new({
            let id = id.to_owned();
            move |kernel| {
                if let Some(listener) = control {
                    if let Err(e) = crate::control::serve(listener, kernel.clone()) {
                        tracing::warn!("container {id}: no control socket, exec will fail: {e}");
                    }
                }
                if let (Some(limits), Some(k)) = (updated, kernel.upgrade()) {
                    limits.apply(&k);
                }
            }
        }))),
        mounts,
        seccomp: plan.seccomp,
        ids: Some((plan.uid, plan.gid)),
        privileges: sentry::Privileges {
            // Seen in the guest's /proc too, as runc's container sees it.
            oom_score_adj: plan
                .oom_score_adj
                .map(|a| i16::try_from(a.clamp(-1000, 1000)).unwrap_or(0)),
            ..plan.privileges.to_sentry()
        },
        // The cgroup holds the Sentry to this; the guest learns it too, so
        // its tmpfs fill up (ENOSPC) before the sandbox is killed.
        memory_limit: plan
            .limits
            .memory
            .filter(|&m| m > 0)
            .and_then(|m| u64::try_from(m).ok()),
        // Without a host cgroup, the Sentry holds it.
        memory_watch: if no_cgroup {
            sentry::MemoryWatch::Log
        } else {
            sentry::MemoryWatch::Off
        },
        // `kill` is kill(2) from outside the container's PID namespace, as
        // with runc: init gets only what it handles (and SIGKILL).
        host_signals: sentry::hostsig::HostSignals::FromOutside,
        // `process.terminal`: the console (raw, see `console`) carries the
        // bytes of a terminal of the sandbox's own.
        terminal: plan.terminal && std::io::IsTerminal::is_terminal(&std::io::stdin()),
        // runc's `pids.limit` counts the container's tasks; the guest's are
        // the Sentry's to count (the host cgroup holds a larger backstop).
        max_tasks: plan
            .limits
            .pids
            .filter(|n| *n > 0)
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        // The host cgroup enforces the quota (without one, the Sentry);
        // the guest reads it in `cpu.max`, as a container reads its own
        // cgroup's.
        cpu_watch: no_cgroup,
        cpu_max: crate::control::GuestLimits {
            cpu_quota: plan.limits.cpu_quota,
            cpu_period: plan.limits.cpu_period,
            ..Default::default()
        }
        .cpu_max(sentry::CpuMax::default()),
        masked_paths: plan
            .masked_paths
            .into_iter()
            .map(String::into_bytes)
            .collect(),
        readonly_paths: plan
            .readonly_paths
            .into_iter()
            .map(String::into_bytes)
            .collect(),
        sysctls: plan.sysctls,
        save: None,
        restore: image,
        preserved_fds: preserved,
        gpu,
        mempolicy: plan
            .mempolicy
            .as_ref()
            .and_then(|(mode, nodes)| sentry::NumaPolicy::new(*mode, nodes).ok())
            .unwrap_or_default(),
    };
    // Last, with the gofers started and every host path opened: the
    // Sentry's own process in new namespaces, as an unprivileged user.
    // The relays of `--network sandbox` are host sockets too: the Sentry
    // stays in the container's network namespace for them.
    let host_sockets = network.host_sockets();
    if let Err(e) = crate::confine::split(crate::confine::Confinement {
        host_sockets,
        host_network: network.is_host(),
        terminal: None,
    }) {
        eprintln!("ferrovisor: {e}");
        tracing::error!("container {id}: {e}");
        return 125;
    }
    let code = match sentry::run(config, |memfd| {
        if let Some(device) = kvm.take() {
            return platform_kvm::KvmPlatform::new(device, memfd)
                .map(|p| Box::new(p) as Box<dyn platform::Platform>);
        }
        // In a network namespace of its own the Sentry holds nothing
        // there: its stubs may share it.
        let options = platform_ptrace::PtraceOptions {
            mode: platform_ptrace::Mode::SeccompTrap,
            stub_net_ns: host_sockets,
            ..Default::default()
        };
        platform_ptrace::PtracePlatform::with_options(memfd, options)
            .map(|p| Box::new(p) as Box<dyn platform::Platform>)
    }) {
        Ok(status) => status.shell_code(),
        Err(e) => {
            eprintln!("ferrovisor: {e}");
            tracing::error!("container {id}: {e}");
            e.exit_code()
        }
    };
    // `state` reads this process's end as "stopped" and the status from
    // the file.
    if let Err(e) = exit_file.record(code) {
        tracing::error!("container {id}: recording exit status {code}: {e}");
    }
    tracing::info!("container {id} stopped with status {code}");
    code
}

/// The limits of an `update --resources` document: runtime-spec
/// `linux.resources` JSON, as runc takes it. Fields the sandbox cannot
/// apply are refused by name.
pub fn update_resources(json: &[u8]) -> Result<cgroup::Limits, Error> {
    let r: oci_spec::runtime::LinuxResources = serde_json::from_slice(json)
        .map_err(|e| Error::Usage(format!("resources: malformed: {e}")))?;
    oci::resources(&r).map_err(|e| match e {
        oci::Error::Field { field, reason } => {
            Error::Usage(format!("resources: {field}: {reason}"))
        }
        oci::Error::Unsupported { field, why } => {
            Error::Usage(format!("{field}: not supported by ferrovisor yet ({why})"))
        }
        e => e.into(),
    })
}

/// The boot process's own checks: the bundle (again: it may have changed
/// since `create` looked), the root directory, `oomScoreAdj`, and the
/// network namespace (joined when `linux.namespaces` names one, else made
/// when it asks for one). Returns the netstack's configuration too.
fn prepare(
    id: &str,
    bundle: &Path,
    network: &Network,
) -> Result<(oci::Plan, std::fs::File, netstack::StackConfig), Error> {
    let host_network = network.is_host();
    // With `--network sandbox`, "the host's own addresses", which stay
    // closed unless a rule names them, are those of the runtime's
    // namespace (the host's, where the engine runs: a bridged container
    // reaches them through its gateway) and of the container's own.
    let mut own_addresses = Vec::new();
    let mut note_addresses = || -> Result<(), Error> {
        if network.egress().is_some() {
            let found =
                host_addresses().map_err(io("--network sandbox: listing the host's addresses"))?;
            own_addresses.extend(found);
        }
        Ok(())
    };
    note_addresses()?;
    let b = oci::load(bundle)?;
    let plan = oci::plan(&b, id)?;
    let root = std::fs::File::open(&plan.rootfs)
        .map_err(io(format!("opening root {}", plan.rootfs.display())))?;
    if let Some(adj) = plan.oom_score_adj {
        std::fs::write("/proc/self/oom_score_adj", adj.to_string())
            .map_err(io(format!("process.oomScoreAdj {adj}")))?;
    }
    if let Some(ns) = &plan.network_namespace_path {
        // Before any thread of the Sentry exists: they all inherit it, and
        // so do the gofer and the stubs. Hooks that act through this
        // process's pid find the same namespace.
        sys::join_network(&ns.path).map_err(|e| {
            let why = if e.raw_os_error() == Some(libc::EINVAL) {
                "not a network namespace".to_string()
            } else {
                e.to_string()
            };
            Error::Usage(format!(
                "config.json: {}: joining network namespace {}: {why}",
                ns.field,
                ns.path.display()
            ))
        })?;
    } else if plan.network_namespace {
        // Without `--network host` the Sentry's network is its own
        // (loopback only) and needs nothing from the host's. But hooks act
        // on "the container's" network namespace through this process's
        // pid (Docker's moves interfaces into it and configures them):
        // that must be a new one, never the host's. With `--network host`
        // the guest's sockets live in it, so it must exist.
        let hooks = plan.hooks.as_ref().is_some_and(|h| {
            h.prestart().as_ref().is_some_and(|v| !v.is_empty())
                || h.create_runtime().as_ref().is_some_and(|v| !v.is_empty())
        });
        match sys::unshare_network() {
            Ok(()) => {}
            Err(e) if hooks => {
                return Err(io("a network namespace for the hooks to set up")(e));
            }
            // The guest's host sockets (or the relays) must not land in
            // the runtime's namespace when the container asked for its own.
            Err(e) if network.host_sockets() => {
                return Err(io(format!(
                    "--network {}: a network namespace for the container",
                    if host_network { "host" } else { "sandbox" }
                ))(e));
            }
            Err(e) => tracing::info!("container {id}: no network namespace of its own: {e}"),
        }
        if network.egress().is_some() && !hooks {
            // Only an engine's hooks would give it an interface.
            tracing::warn!(
                "container {id}: --network sandbox: the container's network namespace is new \
                 and no hook sets it up: the allow rules have nothing to reach"
            );
        }
        if host_network {
            // A new namespace's loopback is down; the guest's 127.0.0.1
            // and ::1 are host sockets there now.
            sys::loopback_up().map_err(io("--network host: bringing up lo"))?;
        }
    }
    note_addresses()?;
    own_addresses.sort_unstable();
    own_addresses.dedup();
    // The refusals go to the log, and as with `do` one line each on the
    // sandbox's stderr (the container's), where the user of the failing
    // program looks.
    let mut stack = network.stack_config(own_addresses, true);
    let mut plan = plan;
    if let Some(rules) = network.egress() {
        let env = rules.extras.apply(&mut stack, &plan.rootfs)?;
        if let Some(audit) = &stack.audit {
            audit.mirror_to_log();
        }
        let mut e: Vec<Vec<u8>> = plan.env.iter().map(|v| v.clone().into_bytes()).collect();
        env.edit(&mut e);
        plan.env = e
            .into_iter()
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .collect();
    }
    Ok((plan, root, stack))
}

/// `WrongStatus` unless the container is running.
fn require_running(id: &str, status: Status) -> Result<(), Error> {
    if status == Status::Running {
        return Ok(());
    }
    Err(Error::WrongStatus {
        id: id.into(),
        status,
        wanted: "running",
    })
}

/// A stopped container's exit status: the recorded one, else 128+N after
/// `kill` sent signal N, else 128+SIGKILL when the host's OOM killer ended
/// the sandbox for going over its memory limit (then nothing could record
/// a status).
fn exit_code(record: &Record) -> Option<i32> {
    record.exit_code().or_else(|| {
        let oom = record.cgroup.as_ref().is_some_and(Cgroup::oom_killed);
        oom.then_some(128 + libc::SIGKILL)
    })
}

/// The sandbox's host cgroup: required when the bundle sets a
/// `linux.cgroupsPath` or a CPU limit; otherwise made where the host lets
/// us, and done without where it does not (a caller without rights on the
/// cgroup file system): then the Sentry holds the memory, pids and CPU
/// quota limits itself, and `pause` does not work.
fn sandbox_cgroup(id: &str, scope: &str, plan: &oci::Plan) -> Result<Option<Cgroup>, Error> {
    match Cgroup::create(id, scope, plan.cgroups_path.as_deref(), &plan.limits) {
        Ok(cg) => Ok(Some(cg)),
        Err(e) if plan.limits.sentry_can_hold() && plan.cgroups_path.is_none() => {
            if plan.limits.any() {
                tracing::warn!(
                    "container {id}: no cgroup of its own ({e}): the Sentry holds its memory, \
                     pids and CPU limits, and pause will not work"
                );
            } else {
                tracing::info!("container {id}: no cgroup of its own, pause will not work: {e}");
            }
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// What `features` prints: runc's features document, saying what this
/// runtime accepts (see [`oci::plan`]): the hooks that run in the runtime's
/// namespaces; memory, CPU and pids limits through a cgroupfs cgroup (v1 or
/// v2, not systemd); seccomp applied by the Sentry to the guest (x86-64
/// only, no agent); no AppArmor or SELinux; namespaces emulated by the
/// Sentry.
pub fn features(overlay: bool) -> serde_json::Value {
    // (`do` offers the ptrace and seccomp variants too)
    let platforms = if platform_kvm::Device::open().is_ok() {
        "seccomp,seccomp-yield,seccomp-spin,ptrace,kvm"
    } else {
        "seccomp,seccomp-yield,seccomp-spin,ptrace"
    };
    serde_json::json!({
        "ociVersionMin": "1.0.0",
        "ociVersionMax": oci_spec::runtime::VERSION,
        "hooks": ["prestart", "createRuntime", "poststart", "poststop"],
        "mountOptions": [],
        "linux": {
            "namespaces": ["cgroup", "ipc", "mount", "network", "pid", "user", "uts"],
            "cgroup": { "v1": true, "v2": true, "systemd": false, "systemdUser": false },
            "seccomp": {
                "enabled": true,
                "actions": [
                    "SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS",
                    "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG", "SCMP_ACT_TRACE", "SCMP_ACT_TRAP",
                ],
                "operators": [
                    "SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_LE", "SCMP_CMP_LT",
                    "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE",
                ],
                "archs": ["SCMP_ARCH_X86_64"],
            },
            "apparmor": { "enabled": false },
            "selinux": { "enabled": false },
            "intelRdt": { "enabled": false },
            // (what `oci::plan` takes; a policy naming only other nodes
            // than the guest's one is refused)
            "memoryPolicy": {
                "modes": [
                    "MPOL_DEFAULT", "MPOL_BIND", "MPOL_INTERLEAVE", "MPOL_WEIGHTED_INTERLEAVE",
                    "MPOL_PREFERRED", "MPOL_PREFERRED_MANY", "MPOL_LOCAL"
                ],
                "flags": ["MPOL_F_NUMA_BALANCING", "MPOL_F_RELATIVE_NODES", "MPOL_F_STATIC_NODES"],
            },
        },
        // Where a writable root's writes go with these global flags.
        "annotations": {
            ROOT_ANNOTATION: if overlay { "memory" } else { "rootfs" },
            PLATFORMS_ANNOTATION: platforms,
        },
    })
}

/// The host's interface addresses, which the egress policy of a
/// `--network sandbox` sandbox closes unless a rule names them.
pub fn host_addresses() -> std::io::Result<Vec<std::net::IpAddr>> {
    sys::host_addresses()
}

/// Builds `envp`-style strings from the caller's environment (for `do`).
pub fn host_env() -> Vec<Vec<u8>> {
    std::env::vars_os()
        .map(|(k, v)| {
            let mut e = k.into_vec();
            e.push(b'=');
            e.extend(v.into_vec());
            e
        })
        .collect()
}

/// The guest's processes in `ps -ef`'s layout, user names from the
/// container's own `/etc/passwd` (`rootfs`).
pub fn ps_table(procs: &[crate::control::GuestProcess], rootfs: &std::path::Path) -> String {
    let passwd = sys::read_in_root(rootfs, "/etc/passwd").unwrap_or_default();
    let name_of = |uid: u32| {
        String::from_utf8_lossy(&passwd)
            .lines()
            .map(|l| l.split(':').collect::<Vec<_>>())
            .find(|f| f.len() > 2 && f[2].parse() == Ok(uid))
            .map_or(uid.to_string(), |f| f[0].to_string())
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut out = format!(
        "{:<8} {:>5} {:>5} {:>2} {:<5} {:<8} {:>8} CMD\n",
        "UID", "PID", "PPID", "C", "STIME", "TTY", "TIME"
    );
    for p in procs {
        let secs = p.cpu_ms / 1000;
        let elapsed = now.saturating_sub(p.started).max(1);
        let c = (p.cpu_ms / 10 / elapsed).min(99);
        out.push_str(&format!(
            "{:<8} {:>5} {:>5} {:>2} {:<5} {:<8} {:>8} {}\n",
            name_of(p.uid),
            p.pid,
            p.ppid,
            c,
            stime(p.started, now),
            p.tty.as_deref().unwrap_or("?"),
            format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60),
            p.cmd
        ));
    }
    out
}

/// ps's STIME: the hour and minute for a start today (local time), else
/// the month and day.
fn stime(started: u64, now: u64) -> String {
    let local = |t: u64| {
        let t = t as libc::time_t;
        // SAFETY: `tm` is plain data that localtime_r fills in.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers are valid for the call.
        unsafe { libc::localtime_r(&t, &mut tm) };
        tm
    };
    let (s, n) = (local(started), local(now));
    if (s.tm_year, s.tm_yday) == (n.tm_year, n.tm_yday) {
        format!("{:02}:{:02}", s.tm_hour, s.tm_min)
    } else {
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        format!("{}{:02}", MONTHS[s.tm_mon.clamp(0, 11) as usize], s.tm_mday)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_parse_like_runc() {
        assert_eq!(parse_signal("TERM").ok(), Some(libc::SIGTERM));
        assert_eq!(parse_signal("SIGKILL").ok(), Some(libc::SIGKILL));
        assert_eq!(parse_signal("sigusr1").ok(), Some(libc::SIGUSR1));
        assert_eq!(parse_signal("9").ok(), Some(9));
        assert_eq!(parse_signal("0").ok(), Some(0));
        assert!(parse_signal("-1").is_err());
        assert!(parse_signal("65").is_err());
        assert!(parse_signal("NOPE").is_err());
    }
}
