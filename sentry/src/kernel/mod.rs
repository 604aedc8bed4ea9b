//! The sandbox as a whole (platform, memory file, file system, processes)
//! and starting a process in it.

pub mod auth;
pub mod coredump;
pub mod cpulimit;
pub mod dirwatch;
pub mod fasync;
pub mod futex;
pub mod hostsig;
pub mod ipc;
pub mod keys;
pub mod landlock;
pub mod netdev;
pub(crate) mod oom;
pub mod ptrace;
pub mod seccomp;
pub mod task;
pub mod timers;
pub mod wait;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use abi::{Errno, OpenFlags};
use platform::Platform;
use zerocopy::FromZeros;

use crate::kernel::task::{
    no_altstack, ExitStatus, FsContext, Process, ProcessState, Task, Thread,
};
use crate::loader::{self, ExecRequest};
use crate::mm::memfile::MemoryFile;
use crate::mm::MemoryManager;
use crate::sync::Locked;
use crate::vfs::file::{FdEntry, FdTable, FileDescription, FileKind};
use crate::vfs::{FileSystem, Location, Node};

/// Errors starting a sandbox, for the person at the command line.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// the command is not in the guest's PATH
    #[error("{0}: command not found")]
    CommandNotFound(String),
    /// the program exists but cannot be executed
    #[error("{path}: cannot execute: {reason}")]
    CannotExecute {
        /// as given
        path: String,
        /// why, in words
        reason: String,
    },
    /// the program does not exist
    #[error("{0}: no such file or directory")]
    NotFound(String),
    /// the memory file could not be created
    #[error("creating the memory file: {0}")]
    MemoryFile(std::io::Error),
    /// the root directory could not be used
    #[error("opening the root directory: {0}")]
    Root(std::io::Error),
    /// a process could not be started in the running sandbox
    #[error("starting a process in the sandbox: {0}")]
    Spawn(String),
    /// the sandbox's network could not be set up
    #[error("setting up the sandbox network: {0}")]
    Network(std::io::Error),
    /// a mount could not be made
    #[error("mounting at {0}: {1}")]
    Mount(String, Errno),
    /// a sysctl the sandbox cannot apply
    #[error("{0}")]
    Sysctl(String),
    /// the platform failed
    #[error("platform: {0}")]
    Platform(#[from] platform::Error),
    /// the Sentry could not give up its capabilities
    #[error("dropping the Sentry's capabilities: {0}")]
    Capabilities(Errno),
    /// a sandbox image could not be restored
    #[error("restoring the sandbox: {0}")]
    Restore(String),
    /// the Sentry's own seccomp filter could not be installed
    #[error("installing the Sentry's seccomp filter: {0}")]
    HostFilter(Errno),
    /// the guest's seccomp program is not one Linux would load
    #[error("linux.seccomp: {0}")]
    Seccomp(String),
}

impl Error {
    /// The exit status a shell uses for this failure.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::CommandNotFound(_) | Error::NotFound(_) => 127,
            Error::CannotExecute { .. } => 126,
            _ => 125,
        }
    }
}

/// A CPU bandwidth limit as cgroup v2's `cpu.max` holds it: at most
/// `quota` microseconds of CPU time in each `period` microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuMax {
    /// microseconds per period, `None` for no limit (`max`)
    pub quota: Option<u64>,
    /// the period in microseconds
    pub period: u64,
}

impl Default for CpuMax {
    /// No limit, with Linux's default period of 100 ms.
    fn default() -> Self {
        CpuMax {
            quota: None,
            period: 100_000,
        }
    }
}

impl fmt::Display for CpuMax {
    /// `cpu.max`'s text: `QUOTA PERIOD`, or `max PERIOD`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.quota {
            Some(q) => write!(f, "{q} {}", self.period),
            None => write!(f, "max {}", self.period),
        }
    }
}

/// Sandbox-wide state shared by tasks.
/// The release `uname(2)` and /proc report.
pub const UTS_RELEASE: &str = "6.1.0-ferrovisor";
/// The version `uname(2)` reports, and /proc/sys/kernel/version: a
/// preemptible SMP kernel's, as Linux 6.x distributions build them.
/// AIO requests the sandbox's contexts may hold (`/proc/sys/fs/aio-nr`;
/// one sandbox per Sentry process).
pub static AIO_NR: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub const UTS_VERSION: &str = "#1 SMP PREEMPT_DYNAMIC ferrovisor";

/// The names `uname(2)` reports that a guest may change.
#[derive(Debug)]
pub struct UtsNames {
    /// node name (`sethostname`)
    pub host: Vec<u8>,
    /// NIS domain name (`setdomainname`)
    pub domain: Vec<u8>,
}

/// Answers system call `nr` for a task: the syscall table's dispatcher.
pub type SyscallFn = fn(&mut Task, u64, &[u64; 6]) -> Result<u64, Errno>;

/// Writes a dying task's core file (the syscalls layer's, set at boot).
pub type CoreFn = fn(&mut Task, &coredump::Image) -> Result<(), Errno>;

pub struct Kernel {
    /// the system call table (the syscalls layer's, set at boot)
    pub syscalls: SyscallFn,
    /// how core files are written
    pub write_core: CoreFn,
    /// what the host's `SIGWINCH` does, when the sandbox has a terminal of
    /// its own (set at boot): its size is taken again
    pub on_winch: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
    /// how guest code runs
    pub platform: Box<dyn Platform>,
    /// where guest memory lives
    pub memory: Arc<MemoryFile>,
    /// the guest's file tree
    pub fs: FileSystem,
    /// `uname` node and domain names: the sandbox is a UTS namespace of
    /// its own, which `sethostname`/`setdomainname` change
    pub uts: Mutex<UtsNames>,
    /// System V shared memory segments (the sandbox is an IPC namespace)
    pub sysv_shm: Arc<crate::kernel::ipc::shm::Registry>,
    /// System V semaphore sets
    pub sysv_sem: Arc<crate::kernel::ipc::sem::Registry>,
    /// System V message queues
    pub sysv_msg: Arc<crate::kernel::ipc::msg::Registry>,
    /// their limits, which root's writes to /proc/sys/kernel change
    pub sysv_limits: Mutex<crate::kernel::ipc::SysvLimits>,
    /// POSIX message queues, which `/dev/mqueue` lists
    pub mqueue: Arc<crate::kernel::ipc::mqueue::Registry>,
    /// the keys of `add_key` and `keyctl`
    pub keys: crate::kernel::keys::Keys,
    /// CPUs the guest sees
    pub cpus: usize,
    /// their topology and caches, as /sys shows them
    pub cpu_topology: crate::host::cpu_topology::CpuTopology,
    /// supplementary groups the guest sees (the caller's)
    pub groups: Vec<u32>,
    /// memory the guest is told exists (bytes): the host's, or the
    /// sandbox's limit when smaller; `update` may change it
    pub(crate) total_memory: AtomicU64,
    /// the host's memory (bytes), which no limit raises the guest's above
    pub(crate) host_memory: u64,
    /// the sandbox's memory limit as set (bytes), `u64::MAX` for none:
    /// what `/sys/fs/cgroup/memory.max` says
    pub(crate) memory_limit: AtomicU64,
    /// the sandbox's CPU bandwidth limit as set: what
    /// `/sys/fs/cgroup/cpu.max` says; `update` may change it
    pub(crate) cpu_max: Mutex<CpuMax>,
    /// where guest threads wait while the Sentry holds `cpu_max` itself
    /// and this period's quota is spent ([`cpulimit`])
    pub cpu_throttle: cpulimit::Throttle,
    pub(crate) unsupported_seen: Vec<AtomicBool>,
    /// every process, by PID (zombies included until reaped)
    pub procs: Mutex<ProcTable>,
    /// interval timers of every process
    pub timers: Arc<crate::kernel::timers::TimerService>,
    /// futex wait queues
    pub futexes: crate::kernel::futex::FutexTable,
    /// the socket layer's sandbox-wide state (abstract Unix names, host
    /// networking, `O_ASYNC` netstack sockets), which the kernel keeps
    /// without knowing its type: see `crate::socket::state`
    pub sockets: Box<dyn std::any::Any + Send + Sync>,
    /// the vDSO's time page, kept current
    pub timekeeper: crate::loader::vdso_time::TimeKeeper,
    /// TCP/IP of the sandbox
    pub net: Arc<netstack::Stack>,
    /// CPU time of processes that left the process table with no parent
    /// to count it (reaped without a `wait`, or started by `exec` from
    /// outside), for the cgroup's `cpu.stat`
    pub reaped_cpu: Mutex<crate::kernel::task::CpuTimes>,
    /// the filter processes started from outside get (an OCI
    /// `linux.seccomp`)
    pub container_seccomp: Option<Arc<crate::kernel::seccomp::Filter>>,
    /// advisory file locks (`flock`, `fcntl` record locks)
    pub locks: Arc<crate::vfs::lock::LockTable>,
    /// saving the sandbox when its guest asks (`do --save`)
    pub checkpoint: Checkpointing,
}

/// Saves the sandbox at a task's boundary (the syscalls layer's, set at
/// boot).
pub type SaveFn = fn(&mut Task);

/// Saving the sandbox: when its guest asks (`do --save`: a write to
/// `/proc/ferrovisor/checkpoint`), on `SIGUSR2` to the runtime, or when
/// `ferrovisor checkpoint` hands over an image file. Each sets
/// `requested` and interrupts every thread; the first task to stand at a
/// boundary (about to run guest code, no signal to take, an interrupted
/// call rewound to restart) writes the image.
#[derive(Debug, Default)]
pub struct Checkpointing {
    /// the image file of `do --save`; `None`: the guest cannot ask
    pub target: Option<std::fs::File>,
    /// the image file of one save asked for from outside, taken by it
    pub once: Mutex<Option<std::fs::File>>,
    /// a save was asked for and not yet made
    pub requested: AtomicBool,
    /// what makes the save (see [`SaveFn`])
    pub save: Option<SaveFn>,
    /// what `/proc/ferrovisor/checkpoint` reads: how the last save went,
    /// or that this sandbox was restored
    pub status: Mutex<String>,
    /// saves ended (with `status`), under `status`'s lock
    pub rounds: AtomicU64,
    /// signalled, with `status` locked, as each save ends
    pub ended: std::sync::Condvar,
    /// the sandbox's terminal as the first process has it, which a
    /// restored copy gets its own terminal in place of
    pub console: std::sync::OnceLock<Arc<crate::vfs::file::FileDescription>>,
    /// the save asked for from outside leaves the root files' images out
    /// (a copy restored once, at once: `fork`)
    pub lean: AtomicBool,
    /// the image file a restored sandbox's memory shares pages with
    pub base: std::sync::OnceLock<std::fs::File>,
}

/// The sandbox's processes.
#[derive(Debug, Default)]
pub struct ProcTable {
    /// live and zombie processes
    pub map: BTreeMap<i32, Arc<Process>>,
    /// live threads of every process, by thread ID
    pub threads: BTreeMap<i32, Arc<Thread>>,
    pub(crate) next: i32,
    /// most tasks the guest may hold at once (the container's
    /// `pids.limit`), `None` for no limit of its own
    pub task_limit: Option<usize>,
}

/// A guest process as `ps -ef` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessSummary {
    pub pid: i32,
    pub ppid: i32,
    /// effective user id
    pub uid: u32,
    /// controlling terminal (`pts/N`)
    pub tty: Option<String>,
    pub started: std::time::SystemTime,
    /// user and system time so far
    pub cpu: std::time::Duration,
    /// `argv` joined by spaces, or `[comm]` when it has none
    pub cmd: String,
}

/// Most processes a sandbox may hold at once (`fork` answers `EAGAIN`).
pub const MAX_PROCS: usize = 4096;
/// PIDs wrap after this, as `pid_max` does.
pub(crate) const PID_MAX: i32 = 4_194_304;

impl ProcTable {
    /// Tasks as the pids cgroup controller counts them: every live
    /// thread, and every process that has not been reaped (a zombie's
    /// task is released only by `wait`).
    pub fn task_count(&self) -> usize {
        let zombies = self
            .map
            .values()
            .filter(|p| p.state().threads.is_empty())
            .count();
        self.threads.len() + zombies
    }

    /// Makes `pid` the last one given (a restored sandbox's ids are
    /// taken; new ones come after them, as they would have).
    pub(crate) fn set_last_pid(&mut self, pid: i32) {
        self.next = pid.clamp(1, PID_MAX);
    }

    /// Allocates a free PID for a new task (process or thread). `EAGAIN`
    /// once the guest holds its `pids.limit` of tasks, as `fork(2)` and
    /// `clone(2)` answer when a pids cgroup is full.
    pub fn alloc_pid(&mut self) -> Result<i32, Errno> {
        if self.map.len() >= MAX_PROCS {
            return Err(Errno::EAGAIN);
        }
        if self.task_limit.is_some_and(|max| self.task_count() >= max) {
            return Err(Errno::EAGAIN);
        }
        loop {
            self.next = if self.next >= PID_MAX {
                2
            } else {
                self.next + 1
            };
            if !self.map.contains_key(&self.next) && !self.threads.contains_key(&self.next) {
                return Ok(self.next);
            }
        }
    }
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernel")
            .field("platform", &self.platform.name())
            .finish()
    }
}

impl Kernel {
    /// The System V IPC limits in force.
    pub fn sysv_limits(&self) -> crate::kernel::ipc::SysvLimits {
        *self.sysv_limits.locked()
    }

    /// Memory the guest is told exists (bytes): what `/proc/meminfo`'s
    /// `MemTotal` and `sysinfo(2)`'s `totalram` report.
    pub fn total_memory(&self) -> u64 {
        self.total_memory.load(Ordering::Relaxed)
    }

    /// Sets the sandbox's memory limit (an OCI runtime's `update
    /// --memory`), `None` for none: the guest is told of the smaller of it
    /// and the host's memory from now on. tmpfs sizes already chosen stay.
    pub fn set_memory_limit(&self, limit: Option<u64>) {
        let total = limit.map_or(self.host_memory, |l| l.min(self.host_memory));
        self.total_memory.store(total, Ordering::Relaxed);
        self.memory_limit
            .store(limit.unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// The sandbox's memory limit (bytes), `None` for none: the cgroup's
    /// `memory.max` as the guest reads it.
    pub fn memory_limit(&self) -> Option<u64> {
        Some(self.memory_limit.load(Ordering::Relaxed)).filter(|&l| l != u64::MAX)
    }

    /// The sandbox's CPU bandwidth limit: the cgroup's `cpu.max` as the
    /// guest reads it.
    pub fn cpu_max(&self) -> CpuMax {
        *self.cpu_max.locked()
    }

    /// Sets the sandbox's CPU bandwidth limit (an OCI runtime's `update
    /// --cpu-quota`/`--cpu-period`): as its host cgroup now has it, or as
    /// the Sentry holds it where no cgroup does ([`cpulimit`]).
    pub fn set_cpu_max(&self, max: CpuMax) {
        *self.cpu_max.locked() = max;
    }

    /// The most tasks the guest may hold at once, `None` for no limit of
    /// its own: the cgroup's `pids.max` as the guest reads it.
    pub fn task_limit(&self) -> Option<usize> {
        self.procs.locked().task_limit
    }

    /// Sets the most tasks the guest may hold at once (`pids.limit`),
    /// `None` for no limit of its own. Lowering it below what the guest
    /// holds kills nothing: new tasks fail with `EAGAIN` until enough have
    /// gone, as a pids cgroup whose `pids.max` is lowered behaves.
    pub fn set_task_limit(&self, limit: Option<usize>) {
        self.procs.locked().task_limit = limit;
    }

    /// The live thread `tid`, if any.
    pub fn thread(&self, tid: i32) -> Option<Arc<Thread>> {
        self.procs().threads.get(&tid).cloned()
    }

    /// The process with `pid`.
    pub fn process(&self, pid: i32) -> Option<Arc<Process>> {
        self.procs.locked().map.get(&pid).cloned()
    }

    /// Kills every process but init (when init exits).
    pub fn kill_all(&self) {
        let procs: Vec<_> = self.procs().map.values().cloned().collect();
        for p in procs {
            if p.pid != 1 {
                p.send_signal(
                    self,
                    abi::signal::SIGKILL,
                    crate::kernel::task::user_info(
                        abi::signal::SIGKILL,
                        0,
                        0,
                        crate::kernel::task::si::KERNEL,
                    ),
                );
            }
        }
    }

    /// Sends `sig` from the kernel to every live process of group `pgid`
    /// (`kill_pgrp()`: terminal signals).
    pub fn signal_pgrp(&self, pgid: i32, sig: i32) {
        let targets: Vec<_> = self
            .procs()
            .map
            .values()
            .filter(|p| {
                let st = p.state();
                st.exit.is_none() && st.pgid == pgid
            })
            .cloned()
            .collect();
        let info = crate::kernel::task::user_info(sig, 0, 0, crate::kernel::task::si::KERNEL);
        for p in targets {
            p.send_signal(self, sig, info);
        }
    }

    /// Whether process group `pgid` is orphaned (credentials(7)): no
    /// member has a parent in another group of the same session. A parent
    /// outside the sandbox counts as such a parent, as for a job started
    /// by the shell that ran `ferrovisor`.
    pub fn pgrp_orphaned(&self, pgid: i32) -> bool {
        let procs = self.procs();
        let members: Vec<(i32, i32)> = procs
            .map
            .values()
            .filter_map(|p| {
                let st = p.state();
                (st.exit.is_none() && st.pgid == pgid).then_some((st.ppid, st.sid))
            })
            .collect();
        for (ppid, sid) in members {
            if ppid == 0 {
                return false;
            }
            if let Some(parent) = procs.map.get(&ppid) {
                let pst = parent.state();
                if pst.exit.is_none() && pst.pgid != pgid && pst.sid == sid {
                    return false;
                }
            }
        }
        true
    }

    /// Whether a member of group `pgid` is stopped.
    pub fn pgrp_has_stopped(&self, pgid: i32) -> bool {
        self.procs().map.values().any(|p| {
            let st = p.state();
            st.exit.is_none() && st.pgid == pgid && st.stopped.is_some()
        })
    }

    /// After a process's exit: a process group it has just orphaned that
    /// holds stopped members gets `SIGHUP` then `SIGCONT`, so that it does
    /// not stay stopped with no one left to continue it (POSIX, Linux's
    /// kill_orphaned_pgrp()). `groups` are the candidates: the exiting
    /// process's own group and its children's.
    pub fn hang_up_orphaned(&self, groups: &[i32]) {
        let mut done = Vec::new();
        for &g in groups {
            if done.contains(&g) {
                continue;
            }
            done.push(g);
            if self.pgrp_orphaned(g) && self.pgrp_has_stopped(g) {
                self.signal_pgrp(g, abi::signal::SIGHUP);
                self.signal_pgrp(g, abi::signal::SIGCONT);
            }
        }
    }

    /// The session of process group `pgid` (of the process `pgid` when
    /// the group is empty), as `TIOCSPGRP` checks it.
    pub fn session_of_pgrp(&self, pgid: i32) -> Option<i32> {
        let procs = self.procs();
        let member = procs.map.values().find_map(|p| {
            let st = p.state();
            (st.exit.is_none() && st.pgid == pgid).then_some(st.sid)
        });
        member.or_else(|| {
            procs
                .map
                .get(&pgid)
                .map(|p| p.state())
                .filter(|st| st.exit.is_none())
                .map(|st| st.sid)
        })
    }

    /// Drops `tty` as the controlling terminal of every process.
    pub fn clear_ctty<T>(&self, tty: &T) {
        for p in self.procs().map.values() {
            let mut st = p.state();
            if st
                .ctty
                .as_ref()
                .is_some_and(|c| crate::kernel::task::is_terminal(c, tty))
            {
                st.ctty = None;
            }
        }
    }

    /// Locks the node and domain names.
    pub fn uts(&self) -> MutexGuard<'_, UtsNames> {
        self.uts.locked()
    }

    /// Asks for a save at the next boundary (see [`Checkpointing`]):
    /// blocked calls give up and restart, running guest code comes back.
    pub fn ask_checkpoint(&self) {
        self.checkpoint.requested.store(true, Ordering::Release);
        crate::kernel::task::CHECKPOINT_ASKED.store(true, Ordering::Release);
        for t in self.procs().threads.values() {
            t.waiter.wake();
            t.interrupt();
        }
    }

    /// Saves the sandbox into `image` now (`ferrovisor checkpoint`) and
    /// says how it went: the image's size, or why it was not saved. Gives
    /// up when no task comes to a boundary within `patience` (a call
    /// that cannot be interrupted).
    pub fn checkpoint_into(
        &self,
        image: std::fs::File,
        patience: std::time::Duration,
        lean: bool,
    ) -> Result<String, String> {
        let ck = &self.checkpoint;
        let mut status = ck.status.locked();
        if ck.requested.load(Ordering::Acquire) {
            return Err("a save is under way already".into());
        }
        ck.lean.store(lean, Ordering::Release);
        *ck.once.locked() = Some(image);
        let round = ck.rounds.load(Ordering::Acquire);
        self.ask_checkpoint();
        let deadline = std::time::Instant::now() + patience;
        while ck.rounds.load(Ordering::Acquire) == round {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() && ck.requested.swap(false, Ordering::AcqRel) {
                crate::kernel::task::CHECKPOINT_ASKED.store(false, Ordering::Release);
                ck.once.locked().take();
                ck.lean.store(false, Ordering::Release);
                return Err(format!(
                    "no task came to a point where it can be saved within {} s",
                    patience.as_secs()
                ));
            }
            let wait = if left.is_zero() {
                std::time::Duration::from_millis(50)
            } else {
                left
            };
            status = ck
                .ended
                .wait_timeout(status, wait)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        // (a save that failed before it encoded anything leaves it set)
        ck.lean.store(false, Ordering::Release);
        match status.strip_prefix("failed: ") {
            Some(why) => Err(why.trim_end().to_string()),
            None => Ok(status.trim_end().to_string()),
        }
    }

    /// Locks the process table.
    pub fn procs(&self) -> MutexGuard<'_, ProcTable> {
        self.procs.locked()
    }

    /// The guest's processes by PID, as `ps -ef` lists them.
    pub fn process_list(&self) -> Vec<ProcessSummary> {
        let procs: Vec<_> = self.procs().map.values().cloned().collect();
        let now = (std::time::Instant::now(), std::time::SystemTime::now());
        procs
            .into_iter()
            .map(|p| {
                let cpu = p.cpu_times();
                let st = p.state();
                // The leader's effective user (a zombie's is gone: its
                // parent's view of it is enough).
                let uid = st.threads.first().map_or(0, |t| t.state().uid[1]);
                let zombie = st.threads.is_empty();
                let cmd = if st.info.cmdline.is_empty() || zombie {
                    format!("[{}]", st.info.comm)
                } else {
                    let args = st
                        .info
                        .cmdline
                        .strip_suffix(b"\0")
                        .unwrap_or(&st.info.cmdline);
                    String::from_utf8_lossy(args).replace('\0', " ")
                };
                ProcessSummary {
                    pid: p.pid,
                    ppid: st.ppid,
                    uid,
                    tty: st.ctty.as_ref().map(|t| format!("pts/{}", t.rdev_minor())),
                    started: now.1 - now.0.saturating_duration_since(st.started),
                    cpu: cpu.user + cpu.sys,
                    cmd: if zombie {
                        format!("{cmd} <defunct>")
                    } else {
                        cmd
                    },
                }
            })
            .collect()
    }

    /// Keeps the CPU time of `p` (and of the children it waited for),
    /// which has just left the process table without a parent's `wait`.
    pub fn note_reaped_cpu(&self, p: &crate::kernel::task::Process) {
        let cpu = {
            let st = p.state();
            st.cpu + st.children_cpu
        };
        let mut total = self.reaped_cpu.locked();
        *total = *total + cpu;
    }

    /// Logs an unsupported system call the first time it is seen.
    pub fn report_unsupported(&self, nr: u64, name: &str) {
        let first = self
            .unsupported_seen
            .get(nr as usize)
            .is_none_or(|seen| !seen.swap(true, Ordering::Relaxed));
        if first {
            tracing::warn!("unsupported system call {name} ({nr}): answered ENOSYS");
        }
    }
}

const DEFAULT_PATH: &[u8] = b"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Finds `name` in the guest PATH as a shell would (first executable regular
/// file).
fn lookup_path(fs: &FileSystem, cwd: &Location, name: &[u8], envp: &[Vec<u8>]) -> Option<Vec<u8>> {
    let path = envp
        .iter()
        .find_map(|e| e.strip_prefix(b"PATH="))
        .unwrap_or(DEFAULT_PATH);
    for dir in path.split(|&b| b == b':') {
        let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
        let mut cand = dir.to_vec();
        cand.push(b'/');
        cand.extend_from_slice(name);
        if let Ok(loc) = fs.resolve(cwd, &cand, true) {
            if let Ok(st) = loc.node().stat() {
                if st.mode & abi::S_IFMT == abi::S_IFREG && st.mode & 0o111 != 0 {
                    return Some(cand);
                }
            }
        }
    }
    None
}

/// A process to start in the sandbox: the first one, or one `exec`
/// brings in from outside.
pub struct ProcessSpec {
    /// the command and its arguments (`argv[0]` looked up in PATH when it
    /// has no `/`)
    pub argv: Vec<Vec<u8>>,
    /// environment
    pub envp: Vec<Vec<u8>>,
    /// working directory (guest path); `/` when it does not resolve
    pub cwd: Vec<u8>,
    /// real = effective = saved uid and gid; the Sentry's own when `None`
    pub ids: Option<(u32, u32)>,
    /// the parent (0: outside the sandbox)
    pub ppid: i32,
    /// what becomes descriptors 0-2
    pub stdio: Stdio,
    /// host descriptors that become 3, 4, ... (runc's `--preserve-fds`);
    /// the process's own from then on, as [`Stdio::Owned`]'s are
    pub preserved: Vec<std::os::fd::OwnedFd>,
    /// capabilities, `no_new_privs` and resource limits
    pub privileges: Privileges,
}

/// What a container engine sets up of a new process's privileges before
/// it runs the program (an OCI `process`): the default leaves each as a
/// program started by `execve` as that user has it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Privileges {
    /// the capability sets given before the program is executed; the
    /// program gets them as `execve` transforms them (a root program its
    /// bounding set, as under runc). `None`: all for root, none for others
    pub caps: Option<crate::kernel::auth::CapSets>,
    /// `no_new_privs` set
    pub no_new_privs: bool,
    /// resource limits (`RLIMIT_*`, limit) replacing those the Sentry got
    /// from the host
    pub rlimits: Vec<(u32, abi::Rlimit)>,
    /// the file mode creation mask it starts with (an OCI
    /// `process.user.umask`); `None`: 022
    pub umask: Option<u32>,
    /// supplementary groups (an OCI `process.user.additionalGids`);
    /// `None`: the Sentry's own, the caller's
    pub groups: Option<Vec<u32>>,
    /// when the environment has no `HOME` (or an empty one), set it to the
    /// user's home directory in the guest's `/etc/passwd`, else `/`, as
    /// runc does for a container's processes
    pub default_home: bool,
    /// its `oom_score_adj` (an OCI `process.oomScoreAdj`, set as runc sets
    /// it, by a privileged writer: also the floor an unprivileged write
    /// may go down to); `None`: 0
    pub oom_score_adj: Option<i16>,
}

/// The standard descriptors of a new process.
#[derive(Debug)]
pub enum Stdio {
    /// the Sentry's own 0, 1 and 2
    Inherit,
    /// host descriptors handed in (`exec`); they belong to the new
    /// process's files from then on, and are closed if it cannot start
    Owned([std::os::fd::OwnedFd; 3]),
    /// a terminal of the sandbox's (`file`, an open description of it, as
    /// all three), which becomes the process's controlling terminal
    Terminal {
        /// the description
        file: Arc<FileDescription>,
        /// the terminal
        tty: Arc<dyn crate::kernel::task::Terminal>,
    },
}

/// How much of `/etc/passwd` [`passwd_home`] reads: real ones are a few
/// KiB, and a guest that writes a huge one (into a writable root, before
/// an `exec`) costs the Sentry no more than this.
const PASSWD_MAX: usize = 4 << 20;

/// The home directory of `uid` as runc finds it: the sixth field of the
/// first line of the guest's `/etc/passwd` whose third is `uid`
/// (passwd(5)); `/` when there is none. (Anything but a regular file
/// reads as none: neither the gofer nor tmpfs reads another kind.)
fn passwd_home(fs: &FileSystem, uid: u32) -> Vec<u8> {
    let data = read_etc(fs, b"/etc/passwd").unwrap_or_default();
    let home = entries(&data)
        .find(|f| field_id(f, 2) == Some(uid))
        .map_or_else(
            || b"/".to_vec(),
            |f| f.get(5).copied().unwrap_or_default().to_vec(),
        );
    home
}

/// The first [`PASSWD_MAX`] bytes of the guest's regular file `path`;
/// `None` when there is none.
fn read_etc(fs: &FileSystem, path: &[u8]) -> Option<Vec<u8>> {
    let loc = fs.resolve(&fs.root(), path, true).ok()?;
    let host = match loc.node() {
        Node::Inode(_) => None,
        _ => Some(fs.open_host(&loc).ok()?),
    };
    let (mut data, mut chunk) = (Vec::new(), vec![0u8; 64 << 10]);
    while data.len() < PASSWD_MAX {
        let pos = data.len() as u64;
        let n = match (loc.node(), &host) {
            (Node::Inode(m), _) => m.read_at(pos, &mut chunk).ok()?,
            (_, Some(f)) => crate::host::pread(f.fd(), &mut chunk, pos).ok()?,
            (_, None) => return None,
        };
        if n == 0 {
            break;
        }
        data.extend_from_slice(&chunk[..n]);
    }
    Some(data)
}

/// The colon-separated fields of each line of a passwd(5) or group(5)
/// file.
fn entries(data: &[u8]) -> impl Iterator<Item = Vec<&[u8]>> {
    data.split(|&b| b == b'\n')
        .map(|l| l.trim_ascii().split(|&b| b == b':').collect::<Vec<_>>())
        .filter(|f| f.len() > 2 && !f[0].starts_with(b"#"))
}

/// Field `i` of an entry as a numeric id.
fn field_id(f: &[&[u8]], i: usize) -> Option<u32> {
    std::str::from_utf8(f.get(i)?).ok()?.parse().ok()
}

/// Why [`guest_user`] finds no user.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GuestUserError {
    /// not `USER[:GROUP]`
    #[error("user {0:?}: give USER[:GROUP]")]
    Syntax(String),
    /// a name the guest's /etc/passwd does not have
    #[error("no user {0:?} in the sandbox's /etc/passwd")]
    NoUser(String),
    /// its entry's uid is not a number
    #[error("user {0:?}: a bad entry in /etc/passwd")]
    BadEntry(String),
    /// a name the guest's /etc/group does not have
    #[error("no group {0:?} in the sandbox's /etc/group")]
    NoGroup(String),
}

/// A user as `docker exec --user` takes it, found in the sandbox's own
/// files: `(uid, gid, supplementary groups)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestUser {
    /// the user id
    pub uid: u32,
    /// the primary group
    pub gid: u32,
    /// the groups of `/etc/group` that list the user
    pub groups: Vec<u32>,
}

/// Finds `spec` (`USER[:GROUP]`, each a name or a number) in the
/// guest's `/etc/passwd` and `/etc/group`, as runc's user lookup does: a
/// name must be there; a number need not be, and then has group 0 and
/// no others; the user's primary group is its passwd entry's unless
/// `GROUP` says otherwise.
pub fn guest_user(kernel: &Kernel, spec: &str) -> Result<GuestUser, GuestUserError> {
    let (user, group) = match spec.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (spec, None),
    };
    if user.is_empty() || group.is_some_and(str::is_empty) {
        return Err(GuestUserError::Syntax(spec.into()));
    }
    let passwd = read_etc(&kernel.fs, b"/etc/passwd").unwrap_or_default();
    let by_uid = user.parse::<u32>().ok();
    let entry = entries(&passwd).find(|f| match by_uid {
        Some(uid) => field_id(f, 2) == Some(uid),
        None => f[0] == user.as_bytes(),
    });
    let (uid, mut gid, name) = match (entry, by_uid) {
        (Some(f), _) => (
            field_id(&f, 2).ok_or_else(|| GuestUserError::BadEntry(user.into()))?,
            field_id(&f, 3).unwrap_or(0),
            Some(f[0].to_vec()),
        ),
        (None, Some(uid)) => (uid, 0, None),
        (None, None) => return Err(GuestUserError::NoUser(user.into())),
    };
    let groups_file = read_etc(&kernel.fs, b"/etc/group").unwrap_or_default();
    if let Some(g) = group {
        gid = match g.parse::<u32>() {
            Ok(n) => n,
            Err(_) => entries(&groups_file)
                .find(|f| f[0] == g.as_bytes())
                .and_then(|f| field_id(&f, 2))
                .ok_or_else(|| GuestUserError::NoGroup(g.into()))?,
        };
    }
    let groups = match &name {
        Some(n) => entries(&groups_file)
            .filter(|f| {
                f.get(3)
                    .is_some_and(|m| m.split(|&b| b == b',').any(|m| m.trim_ascii() == n))
            })
            .filter_map(|f| field_id(&f, 2))
            .collect(),
        None => Vec::new(),
    };
    Ok(GuestUser { uid, gid, groups })
}

/// The Sentry's own descriptor `fd` as a guest file, with the caller's
/// access mode (so that e.g. a read-write terminal stays read-write);
/// `None` for one the caller closed, which stays closed in the guest.
pub(crate) fn stdio_file(fd: i32) -> Option<Arc<FileDescription>> {
    if fd < 0 {
        return None;
    }
    let flags = crate::host::getfl(FileDescription::stdio_borrow(fd)).ok()?;
    let flags =
        flags as u32 & (abi::O_ACCMODE | OpenFlags::APPEND.bits() | OpenFlags::NONBLOCK.bits());
    Some(FileDescription::new(FileKind::Stdio(fd), None, flags))
}

/// Creates the process `spec` describes (loaded, registered, not yet
/// running) on the calling host thread, which is the one that must run
/// it. Returns its first task.
pub fn start_process(kernel: &Arc<Kernel>, spec: ProcessSpec) -> Result<Task, Error> {
    let root = kernel.fs.root();
    let cwd = kernel
        .fs
        .resolve(&root, &spec.cwd, true)
        .ok()
        .filter(|l| l.node().is_dir())
        .unwrap_or(root);

    let name = spec.argv.first().cloned().unwrap_or_default();
    let shown = String::from_utf8_lossy(&name).into_owned();
    let path = if name.contains(&b'/') {
        name.clone()
    } else {
        lookup_path(&kernel.fs, &cwd, &name, &spec.envp)
            .ok_or_else(|| Error::CommandNotFound(shown.clone()))?
    };

    let ids = spec.ids.unwrap_or_else(crate::host::ids);
    let mut envp = spec.envp;
    // (an empty `HOME` counts as none: runc's getenv sees none either)
    if spec.privileges.default_home && !envp.iter().any(|e| e.len() > 5 && e.starts_with(b"HOME="))
    {
        envp.retain(|e| !e.starts_with(b"HOME="));
        envp.push([&b"HOME="[..], &passwd_home(&kernel.fs, ids.0)].concat());
    }
    let (argv_copy, envp_copy) = (spec.argv.clone(), envp.clone());
    let sandbox_root = kernel.fs.root();
    let space = kernel.platform.new_address_space()?;
    let req = ExecRequest {
        fs: &kernel.fs,
        root: &sandbox_root,
        cwd: &cwd,
        path,
        argv: spec.argv,
        envp,
        creds: None,
        may_exec: None,
        user_range: space.min_user_address()..kernel.platform.max_user_address(),
    };
    let prepared = loader::prepare(req).map_err(|e| match e {
        Errno::ENOENT => Error::NotFound(shown.clone()),
        Errno::ENOEXEC => Error::CannotExecute {
            path: shown.clone(),
            reason: "not an ELF executable or #! script".into(),
        },
        Errno::EACCES => Error::CannotExecute {
            path: shown.clone(),
            reason: "permission denied".into(),
        },
        e => Error::CannotExecute {
            path: shown.clone(),
            reason: format!("{e}"),
        },
    })?;

    // The process's credentials as the runtime leaves them before its
    // `execve` (the spec's capability sets, if any), then what that
    // `execve` makes of them.
    let groups = spec
        .privileges
        .groups
        .unwrap_or_else(|| kernel.groups.clone());
    let mut creds = crate::kernel::auth::Creds::new(ids.0, ids.1, groups);
    let no_new_privs = spec.privileges.no_new_privs;
    if let Some(caps) = spec.privileges.caps {
        creds.caps = caps.trim_ambient();
    }
    let (creds, secure) = creds.on_exec(&prepared.exec_file(), no_new_privs);
    let aux = loader::AuxCreds::new(&creds, secure);
    let dumpable = creds.uid[1] == creds.uid[0] && creds.gid[1] == creds.gid[0];
    let ids = (creds.uid[3], creds.gid[3]);

    let mut mm = MemoryManager::new(
        kernel.memory.clone(),
        space,
        kernel.platform.max_user_address(),
    );
    let loaded = loader::commit(&mut mm, prepared, aux, &kernel.timekeeper).map_err(|e| {
        Error::CannotExecute {
            path: shown.clone(),
            reason: format!("loading failed: {e}"),
        }
    })?;
    let ctx = kernel.platform.new_context()?;

    let mut fds = FdTable::default();
    let mut ctty = None;
    let stdio: [i32; 3] = match spec.stdio {
        Stdio::Inherit => [0, 1, 2],
        Stdio::Owned(fds) => fds.map(std::os::fd::IntoRawFd::into_raw_fd),
        Stdio::Terminal { file, tty } => {
            for i in 0..3 {
                let entry = FdEntry {
                    file: file.clone(),
                    cloexec: false,
                };
                let _ = fds.insert_at(i, entry, u64::MAX);
            }
            ctty = Some(tty);
            [-1; 3]
        }
    };
    let preserved = spec.preserved.into_iter().map(|fd| {
        // (the description closes it; if none is made, it closes here)
        let usable = crate::host::getfl(std::os::fd::AsFd::as_fd(&fd)).is_ok();
        usable.then(|| std::os::fd::IntoRawFd::into_raw_fd(fd))
    });
    let preserved: Vec<i32> = preserved.map(|fd| fd.unwrap_or(-1)).collect();
    for (i, fd) in stdio.into_iter().chain(preserved).enumerate() {
        let Some(file) = stdio_file(fd) else {
            continue;
        };
        let _ = fds.insert_at(
            i,
            FdEntry {
                file,
                cloexec: false,
            },
            u64::MAX,
        );
    }

    let mut rlimits = [abi::Rlimit {
        cur: u64::MAX,
        max: u64::MAX,
    }; abi::rlimit::RLIM_NLIMITS];
    for (i, r) in rlimits.iter_mut().enumerate() {
        *r = crate::host::getrlimit(i as u32);
    }
    for &(i, r) in &spec.privileges.rlimits {
        if let Some(slot) = rlimits.get_mut(i as usize) {
            *slot = r;
        }
    }

    let pid = kernel
        .procs()
        .alloc_pid()
        .map_err(|e| Error::Spawn(format!("no task for it ({e}: the sandbox's task limit)")))?;
    let proc_ = Process::new(
        pid,
        ProcessState::new(
            spec.ppid,
            pid,
            pid,
            abi::signal::SIGCHLD,
            [FromZeros::new_zeroed(); 64],
        ),
    );
    let thread = Thread::new(pid, proc_.clone(), 0);
    {
        let mut st = proc_.state();
        st.threads.push(thread.clone());
        st.rlimits = rlimits;
        // The first process is the init of the sandbox's PID namespace.
        st.unkillable = pid == 1;
        st.dumpable = dumpable;
        // It leads its own session: the terminal given is its controlling
        // one, foreground group its own.
        if let Some(t) = ctty {
            if t.attach(pid, pid) {
                st.ctty = Some(t);
            }
        }
    }
    {
        let mut procs = kernel.procs();
        procs.map.insert(pid, proc_.clone());
        procs.threads.insert(pid, thread.clone());
    }
    thread.set_interrupter(Some(ctx.interrupter()));
    let comm = loaded.comm;
    let auxv = loaded.auxv;
    let task = Task {
        thread,
        proc_: proc_.clone(),
        kernel: kernel.clone(),
        regs: loaded.regs,
        mm: Arc::new(Mutex::new(mm)),
        ctx,
        fds: Arc::new(Mutex::new(fds)),
        fs: Arc::new(Mutex::new(FsContext {
            cwd,
            root: kernel.fs.root(),
            umask: spec.privileges.umask.map_or(0o022, |u| u & 0o777),
        })),
        ids,
        creds,
        keyrings: Default::default(),
        clear_child_tid: 0,
        robust_list: (0, 0),
        comm,
        exe: loaded.exe,
        exit: None,
        no_new_privs,
        restart: None,
        saved_mask: None,
        nowait: false,
        altstack: no_altstack(),
        patch_checked: 0,
        stale_fault: None,
        seccomp_copy: Default::default(),
        landlock: None,
    };
    {
        let mut p = proc_.state();
        if let Some(adj) = spec.privileges.oom_score_adj {
            p.oom_score_adj = adj.clamp(-1000, 1000);
            p.oom_score_adj_min = p.oom_score_adj;
        }
        p.info.cmdline = join_nul(&argv_copy);
        p.info.environ = join_nul(&envp_copy);
        p.info.auxv = auxv;
    }
    if let Some(f) = &kernel.container_seccomp {
        let mut st = task.thread.state();
        let s = crate::kernel::seccomp::Seccomp {
            mode: crate::kernel::seccomp::Mode::Filter,
            filter: Some(f.clone()),
        };
        task.thread.set_seccomp(&mut st, s);
    }
    task.publish_info();
    task.publish_privileges();
    Ok(task)
}

/// Runs `task` (a process's first task) on the calling thread, then waits
/// until its whole process has ended: its exit status.
pub(crate) fn run_process(mut task: Task) -> ExitStatus {
    let proc_ = task.proc_.clone();
    task.run_to_exit();
    drop(task);
    let me = crate::kernel::wait::Uninterruptible::default();
    let status =
        crate::kernel::wait::wait_until(&me, std::slice::from_ref(&proc_.waiters), None, || {
            proc_.state().exit
        });
    // Nothing interrupts this sleeper and there is no deadline.
    status.unwrap_or(ExitStatus::Code(0))
}

/// Starts `spec` as a new process of the running sandbox, on a host thread
/// of its own (`exec` from outside: the parent is 0). Returns its pid, and
/// a receiver that gets its exit status once it has ended (it is reaped
/// then: no process inside is its parent).
pub fn spawn_process(
    kernel: &Arc<Kernel>,
    spec: ProcessSpec,
) -> Result<(i32, std::sync::mpsc::Receiver<ExitStatus>), Error> {
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (exit_tx, exit_rx) = std::sync::mpsc::channel();
    let k = kernel.clone();
    std::thread::Builder::new()
        .name("task-exec".into())
        .spawn(move || {
            let task = match start_process(&k, spec) {
                Ok(t) => t,
                Err(e) => {
                    let _ = started_tx.send(Err(e));
                    return;
                }
            };
            let pid = task.proc_.pid;
            let _ = started_tx.send(Ok(pid));
            let status = run_process(task);
            let gone = k.procs().map.remove(&pid);
            if let Some(p) = gone {
                k.note_reaped_cpu(&p);
            }
            let _ = exit_tx.send(status);
        })
        .map_err(|e| Error::Spawn(e.to_string()))?;
    match started_rx.recv() {
        Ok(Ok(pid)) => Ok((pid, exit_rx)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(Error::Spawn("its host thread ended early".into())),
    }
}

/// `argv`/`envp` as /proc shows them: each string followed by a NUL.
pub fn join_nul(v: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for s in v {
        out.extend_from_slice(s);
        out.push(0);
    }
    out
}
