//! The running sandbox's control socket: how `ferrovisor exec` starts a
//! second program inside it.
//!
//! The boot process listens on `control.sock` in the container's state
//! directory (root-only, like the directory). A client sends one message:
//! its request as a JSON line, with its standard input, output and error
//! attached (SCM_RIGHTS). The Sentry starts the process (parent: outside
//! the sandbox) with those as its descriptors 0-2, answers
//! `{"started":PID}` (the guest pid) or `{"failed":"why"}`, and, when the
//! process has ended, `{"exited":STATUS}` (a shell-style status: 128+N
//! for signal N). Meanwhile the client may send `{"signal":N}` lines: the
//! process gets signal N as from `kill(2)` outside the sandbox.
//!
//! `ferrovisor update` sends `{"update":{"memory":M,"pids":N,
//! "cpu_quota":Q,"cpu_period":P}}` instead (each field optional), with no
//! descriptors: the Sentry tells the guest of the new memory limit and CPU
//! quota and counts its tasks against the new `pids.limit`, and answers
//! `"updated"` or `{"failed":"why"}`. `"stats"` asks for the guest's
//! task count as the pids controller would count it, and its task limit:
//! `{"stats":{"tasks":N,"task_limit":L}}`. `{"signal":N}` as the request
//! itself sends signal N to the guest's first process, as `kill(2)` from
//! outside the sandbox would (`ferrovisor kill` of the signals a host
//! process cannot pass on: `SIGSTOP`, and the rest of job control), and
//! is answered `"signalled"`.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, Weak};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::sys;

/// The search path a program brought in gets when nothing gives one.
pub const DEFAULT_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The socket's name in the state directory.
pub const SOCKET: &str = "control.sock";

/// Largest request accepted (arguments and environment included).
const MAX_REQUEST: usize = 1 << 20;

/// What to run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExecRequest {
    /// the command and its arguments
    pub args: Vec<String>,
    /// environment, `NAME=VALUE`
    pub env: Vec<String>,
    /// working directory inside the sandbox
    pub cwd: String,
    /// user and group
    pub uid: u32,
    pub gid: u32,
    /// capabilities, `no_new_privs` and resource limits (an older client's
    /// request, without them, gets the defaults)
    #[serde(default)]
    pub privileges: Privileges,
    /// start from the first process's environment, `env` over it (a
    /// long-lived sandbox's execs see its secrets' placeholders)
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inherit_env: bool,
    /// descriptors the request carries past stdio, which become the
    /// process's 3, 4, ... (`exec --preserve-fds`)
    #[serde(default, skip_serializing_if = "is_zero")]
    pub preserve_fds: u32,
    /// `USER[:GROUP]`, names or numbers, found in the sandbox's own
    /// /etc/passwd and /etc/group when it runs (over `uid`, `gid` and the
    /// groups); `None`: those as given
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// the program gets a terminal of the sandbox's own, relayed to the
    /// standard input and output the request carries (the caller's
    /// terminal, raw); its standard error goes there too
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tty: bool,
    /// that terminal's rows and columns, where the caller's output is no
    /// terminal to take them from (an API client's)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<(u16, u16)>,
}

/// The most descriptors past stdio one exec request carries.
pub const MAX_PRESERVED_FDS: u32 = sys::MAX_FDS as u32 - 3;

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// `base` (`NAME=VALUE` strings joined by NULs, as `/proc/PID/environ`)
/// with each of `over` replacing the entry of its name.
pub fn merge_env(base: &[u8], over: Vec<String>) -> Vec<Vec<u8>> {
    let name = |e: &[u8]| e.split(|&b| b == b'=').next().unwrap_or_default().to_vec();
    let mut out: Vec<Vec<u8>> = base
        .split(|&b| b == 0)
        .filter(|e| !e.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    for e in over.into_iter().map(String::into_bytes) {
        let n = name(&e);
        out.retain(|o| name(o) != n);
        out.push(e);
    }
    out
}

/// What the control socket has run, for a sandbox's idle timeout: one
/// sandbox per process, so one record.
static ACTIVITY: Activity = Activity {
    running: AtomicUsize::new(0),
    last: Mutex::new(None),
};

struct Activity {
    running: AtomicUsize,
    last: Mutex<Option<Instant>>,
}

impl Activity {
    fn touch(&self) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    }

    /// How long nothing has run: `None` while something does.
    fn idle(&self, since_start: Instant) -> Option<Duration> {
        if self.running.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        Some(last.unwrap_or(since_start).elapsed())
    }
}

/// Marks one exec running while it lives.
struct Running;

impl Running {
    fn start() -> Running {
        ACTIVITY.running.fetch_add(1, Ordering::SeqCst);
        ACTIVITY.touch();
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        ACTIVITY.touch();
        ACTIVITY.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// When a sandbox ends by itself: `timeout` after it started, or `idle`
/// after its last exec ended (or its start, with none yet) while none runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timeouts {
    pub timeout: Option<Duration>,
    pub idle: Option<Duration>,
}

/// Ends the sandbox (its first process killed, as from outside) when one
/// of `t` expires, saying which on stderr.
pub fn watch_timeouts(kernel: Weak<sentry::Kernel>, t: Timeouts) {
    if t.timeout.is_none() && t.idle.is_none() {
        return;
    }
    let start = Instant::now();
    let spawned = std::thread::Builder::new()
        .name("timeouts".into())
        .spawn(move || loop {
            let idle = t
                .idle
                .filter(|&d| ACTIVITY.idle(start).is_some_and(|i| i >= d));
            let why = match (t.timeout, idle) {
                (Some(d), _) if start.elapsed() >= d => {
                    Some(format!("its --timeout of {}", show_duration(d)))
                }
                (_, Some(d)) => Some(format!(
                    "idle for its --idle-timeout of {}",
                    show_duration(d)
                )),
                _ => None,
            };
            if let Some(why) = why {
                eprintln!("ferrovisor: the sandbox ended: {why}");
                let Some(k) = kernel.upgrade() else { return };
                if let Some(init) = k.process(1) {
                    let info = sentry::user_info(libc::SIGKILL, 0, 0, sentry::si::USER);
                    init.send_signal_from_outside(&k, libc::SIGKILL, info);
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(250));
        });
    if let Err(e) = spawned {
        tracing::warn!("no timeouts: {e}");
    }
}

/// `90s`, `15m`, `8h`, as [`parse_duration`] reads them.
pub fn show_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s >= 3600 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        _ if d.subsec_millis() != 0 => format!("{}ms", d.as_millis()),
        s => format!("{s}s"),
    }
}

/// Why [`parse_duration`] refuses a text, naming it.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// not a number with `ms`, `s`, `m` or `h`
    #[error("{0:?}: give a duration like 90s, 15m or 8h")]
    NotADuration(String),
    /// more than 10^9 seconds
    #[error("{0:?}: too long")]
    TooLong(String),
}

/// A duration: a number with `ms`, `s`, `m` or `h` (a bare number is
/// seconds).
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)
        .ok_or_else(|| DurationError::NotADuration(text.to_owned()))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(DurationError::NotADuration(text.to_owned())),
    };
    if secs > 1e9 {
        return Err(DurationError::TooLong(text.to_owned()));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A process's privileges as an OCI `process` gives them (see
/// [`crate::oci::privileges`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Privileges {
    /// `process.capabilities` as bit masks; `None`: all for root, none
    /// for other users
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Capabilities>,
    /// `process.noNewPrivileges`
    #[serde(default)]
    pub no_new_privileges: bool,
    /// `process.rlimits` as (`RLIMIT_*` number, soft, hard)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rlimits: Vec<(u32, u64, u64)>,
    /// `process.user.umask`; `None`: 022
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub umask: Option<u32>,
    /// `process.user.additionalGids`, sorted, each once (runc's)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<u32>,
}

/// The five capability sets, one bit per capability.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    pub effective: u64,
    pub permitted: u64,
    pub inheritable: u64,
    pub bounding: u64,
    pub ambient: u64,
}

impl Privileges {
    /// What the Sentry gives the new process.
    pub fn to_sentry(&self) -> sentry::Privileges {
        sentry::Privileges {
            caps: self.capabilities.map(|c| sentry::CapSets {
                effective: c.effective,
                permitted: c.permitted,
                inheritable: c.inheritable,
                bounding: c.bounding,
                ambient: c.ambient,
            }),
            no_new_privs: self.no_new_privileges,
            rlimits: self
                .rlimits
                .iter()
                .map(|&(r, cur, max)| (r, abi::Rlimit { cur, max }))
                .collect(),
            umask: self.umask,
            // An OCI process has the groups its spec gives, none beyond
            // them, and runc's `HOME`.
            groups: Some(self.groups.clone()),
            default_home: true,
            oom_score_adj: None,
        }
    }
}

/// The limits the Sentry itself applies to the guest, as `update` changes
/// them: `None` leaves one as it is, -1 lifts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestLimits {
    /// memory limit in bytes (what `/proc/meminfo` reports)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<i64>,
    /// most tasks the guest may hold (`pids.limit`)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<i64>,
    /// CPU quota in microseconds per period (`cpu.quota`); the host
    /// cgroup enforces it, the guest reads it in `cpu.max`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_quota: Option<i64>,
    /// CPU period in microseconds (`cpu.period`)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_period: Option<u64>,
}

impl GuestLimits {
    /// Whether any limit is given.
    pub fn any(&self) -> bool {
        self.memory.is_some()
            || self.pids.is_some()
            || self.cpu_quota.is_some()
            || self.cpu_period.is_some()
    }

    /// These limits, then those of `newer` over them.
    pub fn merged(self, newer: GuestLimits) -> GuestLimits {
        GuestLimits {
            memory: newer.memory.or(self.memory),
            pids: newer.pids.or(self.pids),
            cpu_quota: newer.cpu_quota.or(self.cpu_quota),
            cpu_period: newer.cpu_period.or(self.cpu_period),
        }
    }

    /// `now` with this quota and period over it, as the host cgroup's
    /// `cpu.max` changes when they are written: what is not given stays,
    /// a quota of -1 (or 0) lifts the limit.
    pub fn cpu_max(&self, now: sentry::CpuMax) -> sentry::CpuMax {
        sentry::CpuMax {
            quota: match self.cpu_quota {
                Some(q) => u64::try_from(q).ok().filter(|&q| q > 0),
                None => now.quota,
            },
            period: self.cpu_period.unwrap_or(now.period),
        }
    }

    /// Applies the limits to the sandbox `kernel`.
    pub fn apply(&self, kernel: &sentry::Kernel) {
        if let Some(m) = self.memory {
            kernel.set_memory_limit(u64::try_from(m).ok().filter(|m| *m > 0));
        }
        if let Some(n) = self.pids {
            let limit = (n > 0).then(|| usize::try_from(n).unwrap_or(usize::MAX));
            kernel.set_task_limit(limit);
        }
        if self.cpu_quota.is_some() || self.cpu_period.is_some() {
            kernel.set_cpu_max(self.cpu_max(kernel.cpu_max()));
        }
    }
}

/// What the Sentry counts of its guest, for `events --stats` and the
/// shim's `Stats`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestStats {
    /// live threads and unreaped processes: the tasks a pids cgroup would
    /// count for the same process tree
    pub tasks: u64,
    /// the guest's `pids.max`, `None` for none
    pub task_limit: Option<u64>,
}

/// A guest process as `ps` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestProcess {
    pub pid: i32,
    pub ppid: i32,
    /// effective user id
    pub uid: u32,
    /// controlling terminal (`pts/N`)
    pub tty: Option<String>,
    /// when it started, in seconds since the epoch
    pub started: u64,
    /// user and system time so far, in milliseconds
    pub cpu_ms: u64,
    /// its command line, or `[name]` without one
    pub cmd: String,
}

impl From<sentry::ProcessSummary> for GuestProcess {
    fn from(p: sentry::ProcessSummary) -> Self {
        GuestProcess {
            pid: p.pid,
            ppid: p.ppid,
            uid: p.uid,
            tty: p.tty,
            started: p
                .started
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            cpu_ms: p.cpu.as_millis() as u64,
            cmd: p.cmd,
        }
    }
}

/// A request that is not an `exec`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Request {
    Update(GuestLimits),
    Stats,
    Processes,
    Signal(i32),
    Egress(EgressUpdate),
    Connect(u16),
    Checkpoint(CheckpointRequest),
    /// watch a directory of the sandbox (and, recursive, the folders
    /// below it): its changes stream back
    Watch {
        path: String,
        recursive: bool,
    },
}

/// A change in a watched directory, as the watch streams it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// `create`, `write`, `remove`, `moved_from`, `moved_to`, `chmod`, or
    /// `gone` (the directory itself went: the watch ends)
    pub kind: String,
    /// the entry's name in the directory, or its path from it in a
    /// recursive watch (empty for `gone`)
    pub name: String,
    /// whether the entry is a directory
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dir: bool,
}

/// How often a watch with nothing to say looks whether its client left.
const WATCH_POLL: Duration = Duration::from_millis(500);

/// `ferrovisor checkpoint`: the image file comes with the request.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct CheckpointRequest {
    /// the sandbox runs on after the save (else it ends, as under runc)
    pub leave_running: bool,
    /// leave out the root files' images (a copy restored once, at once:
    /// `fork`), which make later restores faster but the save slower
    #[serde(default)]
    pub lean: bool,
}

/// How long a checkpoint waits for the guest to come to a point where it
/// can be saved.
const CHECKPOINT_PATIENCE: Duration = Duration::from_secs(10);

/// Host rules to add (`--allow-host`) and names to refuse from now on
/// (`--deny-host`), for new connections.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressUpdate {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

/// What a client sends after its request.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Control {
    Signal(i32),
    /// rows and columns of the program's terminal
    Resize(u16, u16),
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Reply {
    Started(i32),
    Failed(String),
    Exited(i32),
    Updated,
    Stats(GuestStats),
    Processes(Vec<GuestProcess>),
    Signalled,
    Connected,
    Saved(String),
    Watching,
    Changed(FileChange),
}

/// A socket's path in a form `bind` and `connect` accept: a Unix socket
/// address holds at most 107 bytes of path, and state directories under an
/// engine's root are longer (Docker's:
/// `/var/run/docker/runtime-runc/moby/` and a 64-digit id). A longer path is
/// reached through a descriptor of its directory, `/proc/self/fd/N/NAME`,
/// valid while `_dir` is open.
struct Address {
    _dir: Option<std::fs::File>,
    path: PathBuf,
}

/// The longest path a `sockaddr_un` holds (its 108 bytes, less the NUL).
const SUN_PATH_MAX: usize = 107;

fn address(path: &Path) -> std::io::Result<Address> {
    if path.as_os_str().len() <= SUN_PATH_MAX {
        return Ok(Address {
            _dir: None,
            path: path.to_path_buf(),
        });
    }
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    };
    let dir = std::fs::File::open(parent)?;
    let short = Path::new("/proc/self/fd")
        .join(dir.as_raw_fd().to_string())
        .join(name);
    if short.as_os_str().len() > SUN_PATH_MAX {
        return Err(std::io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    Ok(Address {
        _dir: Some(dir),
        path: short,
    })
}

/// Binds the control socket at `path` (replacing a stale one). Done by
/// the boot process before the Sentry gives up its ids: the state
/// directory is root's.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    let _ = std::fs::remove_file(path);
    let addr = address(path)?;
    UnixListener::bind(&addr.path)
}

/// Serves `listener` (from [`bind`]) for the sandbox `kernel` on a thread
/// of its own.
pub fn serve(listener: UnixListener, kernel: Weak<sentry::Kernel>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let k = kernel.clone();
                let spawned = std::thread::Builder::new()
                    .name("control-exec".into())
                    .spawn(move || {
                        if let Err(e) = handle(conn, k) {
                            tracing::warn!("exec request: {e}");
                        }
                    });
                if let Err(e) = spawned {
                    tracing::warn!("exec request dropped: {e}");
                }
            }
        })?;
    Ok(())
}

fn send(conn: &mut UnixStream, r: &Reply) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(r).map_err(std::io::Error::other)?;
    line.push(b'\n');
    conn.write_all(&line)
}

fn handle(mut conn: UnixStream, kernel: Weak<sentry::Kernel>) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 << 10];
    let (n, fds) = sys::recv_with_fds(conn.as_fd(), &mut buf)?;
    let mut data = buf[..n].to_vec();
    // The rest of the line, if it did not come in one piece.
    while !data.contains(&b'\n') {
        let mut more = [0u8; 16 << 10];
        let got = conn.read(&mut more)?;
        if got == 0 || data.len() + got > MAX_REQUEST {
            return send(&mut conn, &Reply::Failed("truncated request".into()));
        }
        data.extend_from_slice(&more[..got]);
    }
    let line = &data[..data.iter().position(|&b| b == b'\n').unwrap_or(0)];
    if let Ok(req) = serde_json::from_slice::<Request>(line) {
        let Some(kernel) = kernel.upgrade() else {
            return send(&mut conn, &Reply::Failed("the sandbox has ended".into()));
        };
        return match req {
            Request::Update(limits) => {
                limits.apply(&kernel);
                tracing::info!(?limits, "update: applied");
                send(&mut conn, &Reply::Updated)
            }
            Request::Egress(u) => {
                if !matches!(kernel.net.mode(), netstack::Mode::Egress) {
                    return send(
                        &mut conn,
                        &Reply::Failed(
                            "the sandbox's network is not `sandbox`: it has no egress rules".into(),
                        ),
                    );
                }
                let allow = u
                    .allow
                    .iter()
                    .filter_map(|h| netstack::policy::HostRule::parse(h).ok())
                    .collect();
                kernel.net.policy().update(allow, u.deny.clone());
                tracing::info!(allow = ?u.allow, deny = ?u.deny, "egress rules updated");
                send(&mut conn, &Reply::Updated)
            }
            Request::Stats => {
                let procs = kernel.procs();
                let stats = GuestStats {
                    tasks: procs.task_count() as u64,
                    task_limit: procs.task_limit.map(|n| n as u64),
                };
                drop(procs);
                send(&mut conn, &Reply::Stats(stats))
            }
            Request::Processes => {
                let list = kernel.process_list().into_iter().map(GuestProcess::from);
                send(&mut conn, &Reply::Processes(list.collect()))
            }
            Request::Connect(port) => {
                let c = match sentry::LoopbackConn::connect(&kernel, port) {
                    Ok(c) => c,
                    Err(e) => {
                        return send(
                            &mut conn,
                            &Reply::Failed(format!(
                                "nothing accepts connections on port {port} of the sandbox's loopback ({e}; with --network host its ports are the host's own)"
                            )),
                        )
                    }
                };
                drop(kernel);
                send(&mut conn, &Reply::Connected)?;
                relay_port(conn, c);
                Ok(())
            }
            Request::Checkpoint(c) => {
                let Ok([image]) = <[std::os::fd::OwnedFd; 1]>::try_from(fds) else {
                    return send(
                        &mut conn,
                        &Reply::Failed("a checkpoint request carries the image file".into()),
                    );
                };
                let saved = kernel.checkpoint_into(image.into(), CHECKPOINT_PATIENCE, c.lean);
                let reply = match saved {
                    Ok(s) => {
                        tracing::info!(leave_running = c.leave_running, "checkpoint: {s}");
                        if !c.leave_running {
                            // runc's checkpoint ends the container.
                            if let Some(init) = kernel.process(1) {
                                init.group_exit(&kernel, sentry::ExitStatus::Signal(libc::SIGKILL));
                            }
                        }
                        Reply::Saved(s)
                    }
                    Err(why) => Reply::Failed(why),
                };
                send(&mut conn, &reply)
            }
            Request::Watch { path, recursive } => {
                let watch = match sentry::DirWatch::new(&kernel, &path, recursive) {
                    Ok(w) => w,
                    Err(e) => {
                        let why = match e {
                            abi::Errno::ENOENT => "no such directory".to_string(),
                            abi::Errno::ENOTDIR => "not a directory".to_string(),
                            e => format!("{e:?}"),
                        };
                        return send(&mut conn, &Reply::Failed(format!("watch {path}: {why}")));
                    }
                };
                let weak = std::sync::Arc::downgrade(&kernel);
                drop(kernel);
                send(&mut conn, &Reply::Watching)?;
                stream_changes(conn, &watch, &weak)
            }
            Request::Signal(sig) => {
                if !(1..=64).contains(&sig) {
                    return send(&mut conn, &Reply::Failed(format!("no signal {sig}")));
                }
                let Some(init) = kernel.process(1) else {
                    return send(
                        &mut conn,
                        &Reply::Failed("the container's first process has ended".into()),
                    );
                };
                let info = sentry::user_info(sig, 0, 0, sentry::si::USER);
                init.send_signal_from_outside(&kernel, sig, info);
                tracing::info!(sig, "signal sent to the guest's first process");
                send(&mut conn, &Reply::Signalled)
            }
        };
    }
    let req: ExecRequest = match serde_json::from_slice(line) {
        Ok(r) => r,
        Err(e) => return send(&mut conn, &Reply::Failed(format!("bad request: {e}"))),
    };
    let want = 3 + req.preserve_fds as usize;
    let mut fds = fds;
    let preserved = fds.split_off(3.min(fds.len()));
    let (Ok(stdio), true) = (
        <[std::os::fd::OwnedFd; 3]>::try_from(fds),
        preserved.len() + 3 == want,
    ) else {
        return send(
            &mut conn,
            &Reply::Failed(format!("the request must carry {want} descriptors")),
        );
    };
    let kernel_weak = kernel.clone();
    let Some(kernel) = kernel.upgrade() else {
        return send(&mut conn, &Reply::Failed("the sandbox has ended".into()));
    };
    let envp = if req.inherit_env {
        let base = kernel
            .process(1)
            .map(|p| p.state().info.environ.clone())
            .unwrap_or_default();
        merge_env(&base, req.env)
    } else {
        req.env.into_iter().map(String::into_bytes).collect()
    };
    let (mut ids, mut privileges) = ((req.uid, req.gid), req.privileges.to_sentry());
    if let Some(spec) = &req.user {
        match sentry::guest_user(&kernel, spec) {
            Ok(u) => {
                ids = (u.uid, u.gid);
                privileges.groups = Some(u.groups);
            }
            Err(why) => return send(&mut conn, &Reply::Failed(why.to_string())),
        }
    }
    let running = Running::start();
    let (stdio, console) = if req.tty {
        let [input, output, _] = stdio;
        match sentry::exec_terminal(&kernel, input, output) {
            Ok((c, s)) => {
                if let Some((rows, cols)) = req.size {
                    c.set_size(rows, cols);
                }
                (s, Some(c))
            }
            Err(e) => return send(&mut conn, &Reply::Failed(e.to_string())),
        }
    } else {
        (sentry::Stdio::Owned(stdio), None)
    };
    let spec = sentry::ProcessSpec {
        argv: req.args.into_iter().map(String::into_bytes).collect(),
        envp,
        cwd: req.cwd.into_bytes(),
        ids: Some(ids),
        ppid: 0,
        stdio,
        preserved,
        privileges,
    };
    let started = sentry::spawn_process(&kernel, spec);
    drop(kernel);
    let (pid, exited) = match started {
        Ok(v) => v,
        Err(e) => return send(&mut conn, &Reply::Failed(e.to_string())),
    };
    if let Some(c) = &console {
        if let Err(e) = c.start() {
            tracing::warn!(pid, "exec: no terminal relay: {e}");
        }
    }
    tracing::info!(pid, "exec: started");
    send(&mut conn, &Reply::Started(pid))?;
    if let Ok(rd) = conn.try_clone() {
        let k = kernel_weak.clone();
        let c = console.clone();
        let _ = std::thread::Builder::new()
            .name("control-signals".into())
            .spawn(move || relay_signals(rd, &k, pid, c.as_deref()));
    }
    // The sandbox ending (its first process exits) ends this one too.
    let status = exited
        .recv()
        .map_or(128 + libc::SIGKILL, |s| s.shell_code());
    tracing::info!(pid, status, "exec: exited");
    if let Some(c) = &console {
        c.end();
    }
    drop(running);
    send(&mut conn, &Reply::Exited(status))
}

/// Sends `watch`'s changes to the client until it leaves, the directory
/// goes or the sandbox ends.
fn stream_changes(
    mut conn: UnixStream,
    watch: &sentry::DirWatch,
    kernel: &Weak<sentry::Kernel>,
) -> std::io::Result<()> {
    let _running = Running::start();
    loop {
        let changes = watch.next(WATCH_POLL);
        for c in &changes {
            let change = FileChange {
                kind: c.kind.into(),
                name: c.name.clone(),
                dir: c.dir,
            };
            send(&mut conn, &Reply::Changed(change))?;
        }
        if changes.iter().any(|c| c.kind == "gone") || kernel.strong_count() == 0 {
            return Ok(());
        }
        if sys::peer_left(conn.as_fd()) {
            return Ok(());
        }
    }
}

/// Changes in a watched directory, as they come ([`watch`]).
pub struct Watch(BufReader<UnixStream>);

impl Iterator for Watch {
    type Item = FileChange;

    fn next(&mut self) -> Option<FileChange> {
        match read_reply(&mut self.0).ok()? {
            Reply::Changed(c) => Some(c),
            _ => None,
        }
    }
}

/// Watches directory `path` of the sandbox behind `socket` (and the
/// folders below it, `recursive`).
pub fn watch(socket: &Path, path: &str, recursive: bool) -> Result<Watch, Error> {
    let conn = connect(socket)?;
    let req = Request::Watch {
        path: path.into(),
        recursive,
    };
    send_request(&conn, &req, "sending the request")?;
    let mut reader = BufReader::new(conn);
    match read_reply(&mut reader)? {
        Reply::Watching => Ok(Watch(reader)),
        Reply::Failed(why) => Err(Error::Refused(why)),
        _ => Err(Error::UnexpectedReply),
    }
}

/// Carries bytes both ways between the client and a guest's connection;
/// open, it counts as activity. The guest's end closes the client's
/// connection (the Sentry's filter has no `shutdown(2)` for a half-close):
/// the reader of the client's side then stops at its next poll.
fn relay_port(conn: UnixStream, c: sentry::LoopbackConn) {
    let _running = Running::start();
    let c = std::sync::Arc::new(c);
    let Ok(mut from_client) = conn.try_clone() else {
        return;
    };
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (c2, done2) = (c.clone(), done.clone());
    let up = std::thread::Builder::new()
        .name("control-port".into())
        .spawn(move || {
            let mut buf = vec![0u8; 64 << 10];
            while !done2.load(Ordering::SeqCst) {
                match sys::poll_readable(from_client.as_fd(), 100) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(_) => break,
                }
                match from_client.read(&mut buf) {
                    Ok(0) | Err(_) => {
                        c2.shutdown_write();
                        break;
                    }
                    Ok(n) => {
                        if c2.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                }
            }
        });
    let mut to_client = conn;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to_client.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    done.store(true, Ordering::SeqCst);
    drop(to_client);
    if let Ok(t) = up {
        let _ = t.join();
    }
}

/// Delivers the signals the client asks for to process `pid`, until the
/// client closes its side.
/// Passes the signals the client sends on to process `pid`; with a
/// terminal of its own, `SIGWINCH` is the caller's terminal's new size,
/// which the terminal takes (signalling its foreground group).
fn relay_signals(
    conn: UnixStream,
    kernel: &Weak<sentry::Kernel>,
    pid: i32,
    console: Option<&sentry::Console>,
) {
    for line in BufReader::new(conn).lines() {
        let Ok(line) = line else { return };
        let sig = match serde_json::from_str(&line) {
            Ok(Control::Signal(sig)) => sig,
            Ok(Control::Resize(rows, cols)) => {
                if let Some(c) = console {
                    c.set_size(rows, cols);
                }
                continue;
            }
            Err(_) => continue,
        };
        if !(1..=64).contains(&sig) {
            continue;
        }
        if let (Some(c), libc::SIGWINCH) = (console, sig) {
            c.resize();
            continue;
        }
        let Some(k) = kernel.upgrade() else { return };
        if let Some(p) = k.process(pid) {
            let info = sentry::user_info(sig, 0, 0, sentry::si::USER);
            p.send_signal_from_outside(&k, sig, info);
        }
    }
}

/// Sends signals to a started `exec`'s process.
#[derive(Debug)]
pub struct Signaller(UnixStream);

impl Signaller {
    /// Asks the sandbox to send `sig` to the process.
    pub fn signal(&self, sig: i32) -> std::io::Result<()> {
        self.send(&Control::Signal(sig))
    }

    /// Gives the program's terminal (`tty`) a new size; the sandbox
    /// signals its foreground group with `SIGWINCH`.
    pub fn resize(&self, rows: u16, cols: u16) -> std::io::Result<()> {
        self.send(&Control::Resize(rows, cols))
    }

    fn send(&self, c: &Control) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(c).map_err(std::io::Error::other)?;
        line.push(b'\n');
        (&self.0).write_all(&line)
    }
}

/// A started `exec`: wait for it with [`Exec::wait`].
pub struct Exec {
    reader: BufReader<UnixStream>,
    /// the guest pid
    pub pid: i32,
}

fn read_reply(reader: &mut BufReader<UnixStream>) -> std::io::Result<Reply> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the sandbox closed the control connection",
        ));
    }
    serde_json::from_str(&line).map_err(std::io::Error::other)
}

/// Why a request to a sandbox failed, one line.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// the control socket could not be reached
    #[error("connecting to the sandbox ({}): {source}", socket.display())]
    Connect {
        /// its path
        socket: PathBuf,
        /// the host's answer
        source: std::io::Error,
    },
    /// a request could not be written
    #[error("{what}: {source}")]
    Send {
        /// what was being sent
        what: &'static str,
        /// the host's answer
        source: std::io::Error,
    },
    /// a request could not be encoded
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    /// the connection failed while waiting for the reply
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// the sandbox answered that it could not do it
    #[error("{0}")]
    Refused(String),
    /// an exec's process ended before the sandbox said it started
    #[error("exited ({0}) before it started")]
    ExitedEarly(i32),
    /// a reply to another request
    #[error("unexpected reply from the sandbox")]
    UnexpectedReply,
}

/// How long a request waits for the control socket of a sandbox that has
/// just started: its boot process binds it after `start` has returned.
const STARTING: std::time::Duration = std::time::Duration::from_secs(5);

/// Connects to the control socket at `socket`, waiting up to [`STARTING`]
/// for it to appear and listen.
fn connect(socket: &Path) -> Result<UnixStream, Error> {
    let deadline = std::time::Instant::now() + STARTING;
    loop {
        match address(socket).and_then(|a| UnixStream::connect(&a.path)) {
            Ok(conn) => return Ok(conn),
            Err(e)
                if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ECONNREFUSED))
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(source) => {
                return Err(Error::Connect {
                    socket: socket.to_path_buf(),
                    source,
                })
            }
        }
    }
}

/// Asks the sandbox behind `socket` to run `req` with `stdio` as its
/// standard descriptors and `preserved` (`req.preserve_fds` of them) as
/// its next ones.
pub fn exec(
    socket: &Path,
    req: &ExecRequest,
    stdio: [BorrowedFd<'_>; 3],
    preserved: &[BorrowedFd<'_>],
) -> Result<Exec, Error> {
    let conn = connect(socket)?;
    let mut line = serde_json::to_vec(req)?;
    line.push(b'\n');
    let fds: Vec<BorrowedFd<'_>> = stdio.into_iter().chain(preserved.iter().copied()).collect();
    sys::send_with_fds(conn.as_fd(), &line, &fds).map_err(|source| Error::Send {
        what: "sending the request",
        source,
    })?;
    let mut reader = BufReader::new(conn);
    match read_reply(&mut reader)? {
        Reply::Started(pid) => Ok(Exec { reader, pid }),
        Reply::Failed(why) => Err(Error::Refused(why)),
        Reply::Exited(s) => Err(Error::ExitedEarly(s)),
        Reply::Updated
        | Reply::Stats(_)
        | Reply::Processes(_)
        | Reply::Signalled
        | Reply::Connected
        | Reply::Saved(_)
        | Reply::Watching
        | Reply::Changed(_) => Err(Error::UnexpectedReply),
    }
}

/// Asks the sandbox behind `socket` to save itself into `image` (opened
/// for writing by the caller) and, unless `leave_running`, to end; `lean`:
/// see [`CheckpointRequest::lean`].
pub fn checkpoint(
    socket: &Path,
    image: &std::fs::File,
    leave_running: bool,
    lean: bool,
) -> Result<String, Error> {
    let conn = connect(socket)?;
    let request = CheckpointRequest {
        leave_running,
        lean,
    };
    let mut line = serde_json::to_vec(&Request::Checkpoint(request))?;
    line.push(b'\n');
    sys::send_with_fds(conn.as_fd(), &line, &[image.as_fd()]).map_err(|source| Error::Send {
        what: "sending the checkpoint request",
        source,
    })?;
    conn.set_read_timeout(Some(CHECKPOINT_PATIENCE * 3))?;
    match read_reply(&mut BufReader::new(conn))? {
        Reply::Saved(s) => Ok(s),
        Reply::Failed(why) => Err(Error::Refused(why)),
        _ => Err(Error::UnexpectedReply),
    }
}

/// Writes `request` on `conn`; `what` names it in an error.
fn send_request(conn: &UnixStream, request: &Request, what: &'static str) -> Result<(), Error> {
    let mut line = serde_json::to_vec(request)?;
    line.push(b'\n');
    (&*conn)
        .write_all(&line)
        .map_err(|source| Error::Send { what, source })
}

/// How long `stats` waits for the Sentry's answer: a sandbox that does not
/// answer in this time (frozen, overloaded) is reported from the host's
/// counters instead.
const STATS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Sends a question to the sandbox behind `socket`, waiting at most
/// [`STATS_TIMEOUT`] for its reply.
fn ask(socket: &Path, request: &Request, what: &'static str) -> Result<Reply, Error> {
    let conn = connect(socket)?;
    conn.set_read_timeout(Some(STATS_TIMEOUT))
        .and_then(|()| conn.set_write_timeout(Some(STATS_TIMEOUT)))?;
    send_request(&conn, request, what)?;
    match read_reply(&mut BufReader::new(conn))? {
        Reply::Failed(why) => Err(Error::Refused(why)),
        r => Ok(r),
    }
}

/// Asks the sandbox behind `socket` what it counts of its guest.
pub fn stats(socket: &Path) -> Result<GuestStats, Error> {
    match ask(socket, &Request::Stats, "asking for stats")? {
        Reply::Stats(s) => Ok(s),
        _ => Err(Error::UnexpectedReply),
    }
}

/// Asks the sandbox behind `socket` for its guest's processes.
pub fn processes(socket: &Path) -> Result<Vec<GuestProcess>, Error> {
    match ask(socket, &Request::Processes, "asking for the processes")? {
        Reply::Processes(p) => Ok(p),
        _ => Err(Error::UnexpectedReply),
    }
}

/// Asks the sandbox behind `socket` to apply `limits` to its guest.
pub fn update(socket: &Path, limits: &GuestLimits) -> Result<(), Error> {
    let conn = connect(socket)?;
    send_request(&conn, &Request::Update(*limits), "sending the update")?;
    match read_reply(&mut BufReader::new(conn))? {
        Reply::Updated => Ok(()),
        Reply::Failed(why) => Err(Error::Refused(why)),
        _ => Err(Error::UnexpectedReply),
    }
}

/// A connection to `127.0.0.1:port` inside the sandbox: after this,
/// the stream's bytes are the guest connection's.
pub fn connect_port(socket: &Path, port: u16) -> Result<UnixStream, Error> {
    let mut conn = connect(socket)?;
    send_request(&conn, &Request::Connect(port), "sending the request")?;
    // Byte by byte: what follows the reply is the guest's, not ours to buffer.
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while b[0] != b'\n' {
        if conn.read(&mut b)? == 0 {
            return Err(Error::Io(std::io::ErrorKind::UnexpectedEof.into()));
        }
        line.push(b[0]);
    }
    match serde_json::from_slice(&line)? {
        Reply::Connected => Ok(conn),
        Reply::Failed(why) => Err(Error::Refused(why)),
        _ => Err(Error::UnexpectedReply),
    }
}

/// Asks the sandbox behind `socket` to change its egress rules.
pub fn update_egress(socket: &Path, update: &EgressUpdate) -> Result<(), Error> {
    let conn = connect(socket)?;
    send_request(&conn, &Request::Egress(update.clone()), "sending the rules")?;
    match read_reply(&mut BufReader::new(conn))? {
        Reply::Updated => Ok(()),
        Reply::Failed(why) => Err(Error::Refused(why)),
        _ => Err(Error::UnexpectedReply),
    }
}

/// Asks the sandbox behind `socket` to send `sig` to the guest's first
/// process. With `answer` false the request is only left in the socket
/// (for a frozen sandbox, which takes it when it thaws).
pub fn signal_init(socket: &Path, sig: i32, answer: bool) -> Result<(), Error> {
    let conn = connect(socket)?;
    send_request(&conn, &Request::Signal(sig), "sending the signal")?;
    if !answer {
        return Ok(());
    }
    match read_reply(&mut BufReader::new(conn))? {
        Reply::Signalled => Ok(()),
        Reply::Failed(why) => Err(Error::Refused(why)),
        _ => Err(Error::UnexpectedReply),
    }
}

impl Exec {
    /// A handle that signals the process while another thread waits.
    pub fn signaller(&self) -> std::io::Result<Signaller> {
        self.reader.get_ref().try_clone().map(Signaller)
    }

    /// Passes the signals a supervisor sends (those the boot process
    /// forwards too) on to the process, from a thread of its own, until the
    /// process ends. Call it before any other thread exists (and block the
    /// signals before starting the process, so none is lost meanwhile).
    pub fn forward_host_signals(&self) -> std::io::Result<()> {
        let sig = self.signaller()?;
        sentry::hostsig::block_forwarded()?;
        std::thread::Builder::new()
            .name("exec-signals".into())
            .spawn(move || loop {
                match sentry::hostsig::wait_forwarded() {
                    Some(n) => {
                        if sig.signal(n).is_err() {
                            return;
                        }
                    }
                    None => return,
                }
            })?;
        Ok(())
    }

    /// Waits for the process to end: its shell-style status. A sandbox
    /// that ends (even killed outright) takes its processes with it, as
    /// SIGKILL would: 137.
    pub fn wait(mut self) -> Result<i32, Error> {
        let reply = match read_reply(&mut self.reader) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Ok(128 + libc::SIGKILL)
            }
            Err(e) => return Err(Error::Io(e)),
        };
        match reply {
            Reply::Exited(s) => Ok(s),
            Reply::Failed(why) => Err(Error::Refused(why)),
            Reply::Started(_)
            | Reply::Updated
            | Reply::Stats(_)
            | Reply::Processes(_)
            | Reply::Signalled
            | Reply::Connected
            | Reply::Saved(_)
            | Reply::Watching
            | Reply::Changed(_) => Err(Error::UnexpectedReply),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_quota_and_period_change_cpu_max_as_the_cgroup_file_does() {
        let cpu = |quota, period| GuestLimits {
            cpu_quota: quota,
            cpu_period: period,
            ..Default::default()
        };
        let none = sentry::CpuMax::default();
        let half = cpu(Some(50_000), None).cpu_max(none);
        assert_eq!(half.to_string(), "50000 100000");
        // A new period keeps the quota; -1 (or 0) lifts it.
        assert_eq!(
            cpu(None, Some(200_000)).cpu_max(half).to_string(),
            "50000 200000"
        );
        assert_eq!(cpu(Some(-1), None).cpu_max(half).to_string(), "max 100000");
        assert_eq!(cpu(Some(0), None).cpu_max(half), none);
        assert_eq!(GuestLimits::default().cpu_max(half), half);
        // The update message carries only what is given.
        let line = serde_json::to_string(&Request::Update(cpu(Some(20_000), None))).expect("json");
        assert_eq!(line, r#"{"update":{"cpu_quota":20000}}"#);
    }

    #[test]
    fn sockets_with_long_paths() {
        let dir = std::env::temp_dir()
            .join(format!("ferrovisor-control-{}", std::process::id()))
            .join("d".repeat(120));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join(SOCKET);
        assert!(path.as_os_str().len() > SUN_PATH_MAX);
        let addr = address(&path).expect("an address");
        let listener = UnixListener::bind(&addr.path).expect("bind");
        drop(addr);
        let addr = address(&path).expect("an address");
        let _client = UnixStream::connect(&addr.path).expect("connect");
        let (_server, _) = listener.accept().expect("accept");
        assert!(path.exists(), "the socket is where it was asked");
        let _ = std::fs::remove_dir_all(dir.parent().expect("parent"));
    }
}
