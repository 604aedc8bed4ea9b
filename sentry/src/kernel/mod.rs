//! The sandbox as a whole: platform, memory file, file system, and starting
//! the first task.

pub mod fasync;
pub mod futex;
pub mod hostsig;
pub mod ipc;
pub mod task;
pub mod timers;

use std::collections::BTreeMap;
use std::fmt;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use abi::{Errno, OpenFlags};
use platform::Platform;
use zerocopy::FromZeros;

use crate::kernel::task::{
    no_altstack, ExitStatus, FsContext, Process, ProcessState, Task, Thread,
};
use crate::loader::{self, ExecRequest};
use crate::mm::memfile::MemoryFile;
use crate::mm::MemoryManager;
use crate::vfs::file::{FdEntry, FdTable, FileDescription, FileKind};
use crate::vfs::{FileSystem, Location};

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
    /// the Sentry's own seccomp filter could not be installed
    #[error("installing the Sentry's seccomp filter: {0}")]
    HostFilter(Errno),
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

/// What to run and how.
#[derive(Debug)]
pub struct SandboxConfig<'a> {
    /// the gofer serving the host directory that becomes the guest's
    /// read-only root
    pub root: gofer::client::Client,
    /// ties the config to the caller's borrows (none today)
    pub _marker: std::marker::PhantomData<&'a ()>,
    /// writes to the root land in an in-memory overlay (else `EROFS`)
    pub writable_root: bool,
    /// the command and its arguments (`argv[0]` is looked up in PATH when
    /// it has no `/`)
    pub argv: Vec<Vec<u8>>,
    /// environment
    pub envp: Vec<Vec<u8>>,
    /// initial working directory (guest path); `/` when it does not resolve
    pub cwd: Vec<u8>,
    /// guest host name
    pub hostname: String,
    /// the network: loopback only, or with a link out and its egress policy
    pub network: netstack::StackConfig,
    /// `--network host`: the guest's `AF_INET`/`AF_INET6` TCP and UDP
    /// sockets become host sockets in the Sentry's network namespace, with
    /// no egress policy (explicitly weaker; `network` must then be
    /// loopback-only, and serves nothing)
    pub host_network: bool,
    /// What the guest sees of its network (interfaces, addresses, routes)
    /// when the runtime knows it, read before the Sentry was confined (its
    /// filter lets it ask the host nothing of the kind): with
    /// `host_network`, a snapshot of the host's network (`None`: loopback
    /// only); with the netstack's `Egress` mode in OCI mode, the
    /// container's own interface, whose addresses `network.link` gives the
    /// netstack (`None`: the `eth0` of the default link, as `do` has).
    pub interfaces: Option<crate::socket::netlink::NetTable>,
    /// called once the sandbox exists, before its first process runs (the
    /// OCI runtime serves `exec` from it)
    pub on_start: Option<StartHook>,
    /// file systems mounted over paths of the root, in order
    pub mounts: Vec<Mount>,
    /// uid and gid of the first process; the Sentry's own when `None`
    pub ids: Option<(u32, u32)>,
    /// the first process's capabilities, `no_new_privs` and resource limits
    pub privileges: Privileges,
    /// the sandbox's memory limit (an OCI `linux.resources.memory.limit`):
    /// what `/proc/meminfo` and `sysinfo` report when smaller than the
    /// host's memory, and what default tmpfs sizes are half of
    pub memory_limit: Option<u64>,
    /// what host signals forwarded to the guest's first process mean
    pub host_signals: crate::kernel::hostsig::HostSignals,
    /// most tasks (threads and processes, zombies included) the guest may
    /// hold at once: the container's `pids.limit`, counted in the Sentry
    /// so that the guest sees runc's limit, not the sandbox's host tasks
    pub max_tasks: Option<usize>,
    /// the sandbox's CPU bandwidth limit (an OCI
    /// `linux.resources.cpu.quota`/`period`): what the guest's
    /// `/sys/fs/cgroup/cpu.max` says
    pub cpu_max: CpuMax,
    /// guest paths masked (OCI `linux.maskedPaths`): a directory shows
    /// empty and read-only, anything else as the null device; a path that
    /// does not exist is skipped
    pub masked_paths: Vec<Vec<u8>>,
    /// guest paths made read-only (OCI `linux.readonlyPaths`); a path that
    /// does not exist is skipped
    pub readonly_paths: Vec<Vec<u8>>,
    /// namespaced sysctls (OCI `linux.sysctl`), each one of those
    /// [`crate::fsimpl::sysctl`] emulates
    pub sysctls: Vec<(String, String)>,
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

/// A file system mounted over a guest path.
#[derive(Debug)]
pub struct Mount {
    /// absolute guest path
    pub dest: Vec<u8>,
    /// what is mounted there
    pub source: MountSource,
}

/// What a [`Mount`] puts in the tree.
#[derive(Debug)]
pub enum MountSource {
    /// a host directory or file, served by its own gofer
    Volume {
        /// the gofer
        client: gofer::client::Client,
        /// the guest's writes get `EROFS`
        read_only: bool,
    },
    /// a tmpfs of the sandbox's own
    Tmpfs {
        /// the root directory's permissions
        mode: u32,
        /// size limit in bytes; `None`: half the sandbox's memory, as
        /// Linux sizes a tmpfs mounted without `size=`
        size: Option<u64>,
    },
}

/// See [`SandboxConfig::on_start`].
pub struct StartHook(pub Box<dyn FnOnce(std::sync::Weak<Kernel>) + Send>);

impl fmt::Debug for StartHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StartHook")
    }
}

/// Sandbox-wide state shared by tasks.
/// The names `uname(2)` reports that a guest may change.
#[derive(Debug)]
pub struct UtsNames {
    /// node name (`sethostname`)
    pub host: Vec<u8>,
    /// NIS domain name (`setdomainname`)
    pub domain: Vec<u8>,
}

pub struct Kernel {
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
    /// CPUs the guest sees
    pub cpus: usize,
    /// their topology and caches, as /sys shows them
    pub cpu_topology: crate::host::cpu_topology::CpuTopology,
    /// supplementary groups the guest sees (the caller's)
    pub groups: Vec<u32>,
    /// memory the guest is told exists (bytes): the host's, or the
    /// sandbox's limit when smaller; `update` may change it
    total_memory: AtomicU64,
    /// the host's memory (bytes), which no limit raises the guest's above
    host_memory: u64,
    /// the sandbox's memory limit as set (bytes), `u64::MAX` for none:
    /// what `/sys/fs/cgroup/memory.max` says
    memory_limit: AtomicU64,
    /// the sandbox's CPU bandwidth limit as set: what
    /// `/sys/fs/cgroup/cpu.max` says; `update` may change it
    cpu_max: Mutex<CpuMax>,
    unsupported_seen: Vec<AtomicBool>,
    /// every process, by PID (zombies included until reaped)
    pub procs: Mutex<ProcTable>,
    /// wakes blocked tasks when anything they might wait for changes
    pub bus: Arc<EventBus>,
    /// interval timers of every process
    pub timers: Arc<crate::kernel::timers::TimerService>,
    /// futex wait queues
    pub futexes: crate::kernel::futex::FutexTable,
    /// abstract Unix socket names
    pub unix: Arc<crate::socket::unix::Registry>,
    /// the vDSO's time page, kept current
    pub timekeeper: crate::loader::vdso_time::TimeKeeper,
    /// TCP/IP of the sandbox
    pub net: Arc<netstack::Stack>,
    /// `--network host`: the guest's TCP and UDP sockets are host sockets
    /// the Sentry owns (the netstack then serves nothing Internet-facing)
    pub host_net: Option<Arc<crate::socket::host_inet::HostNet>>,
    /// netstack sockets with `O_ASYNC` descriptions
    pub inet_async: Arc<crate::socket::inet::AsyncSockets>,
    /// CPU time of processes that left the process table with no parent
    /// to count it (reaped without a `wait`, or started by `exec` from
    /// outside), for the cgroup's `cpu.stat`
    pub reaped_cpu: Mutex<crate::kernel::task::CpuTimes>,
    /// advisory file locks (`flock`, `fcntl` record locks)
    pub locks: Arc<crate::vfs::lock::LockTable>,
}

/// The sandbox's processes.
#[derive(Debug, Default)]
pub struct ProcTable {
    /// live and zombie processes
    pub map: BTreeMap<i32, Arc<Process>>,
    /// live threads of every process, by thread ID
    pub threads: BTreeMap<i32, Arc<Thread>>,
    next: i32,
    /// most tasks the guest may hold at once (the container's
    /// `pids.limit`), `None` for no limit of its own
    pub task_limit: Option<usize>,
}

/// Most processes a sandbox may hold at once (`fork` answers `EAGAIN`).
pub const MAX_PROCS: usize = 4096;
/// PIDs wrap after this, as `pid_max` does.
const PID_MAX: i32 = 4_194_304;

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

/// A kernel-wide wait/notify point. A blocked task re-checks its condition
/// under the bus lock each time anything changes; whoever changes state
/// calls [`EventBus::notify`] after releasing its own locks. One condition
/// variable for the whole sandbox is simple and cannot lose a wake-up; the
/// cost is spurious re-checks, which stay cheap at sandbox scale.
#[derive(Debug, Default)]
pub struct EventBus {
    generation: Mutex<u64>,
    cv: Condvar,
}

impl EventBus {
    /// Wakes every waiter to re-check.
    pub fn notify(&self) {
        let mut g = self.generation.lock().unwrap_or_else(|e| e.into_inner());
        *g = g.wrapping_add(1);
        drop(g);
        self.cv.notify_all();
    }

    /// Locks the bus; conditions checked under this guard cannot miss a
    /// notification.
    pub fn lock(&self) -> MutexGuard<'_, u64> {
        self.generation.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for the next notification (or `deadline`).
    pub fn wait<'a>(
        &self,
        guard: MutexGuard<'a, u64>,
        deadline: Option<Instant>,
    ) -> MutexGuard<'a, u64> {
        match deadline {
            None => self.cv.wait(guard).unwrap_or_else(|e| e.into_inner()),
            Some(d) => {
                let now = Instant::now();
                let dur = d.saturating_duration_since(now);
                self.cv
                    .wait_timeout(guard, dur)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
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
        *self.cpu_max.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the sandbox's CPU bandwidth limit (an OCI runtime's `update
    /// --cpu-quota`/`--cpu-period`), as its host cgroup now has it. The
    /// Sentry does not throttle the guest itself: the host cgroup does.
    pub fn set_cpu_max(&self, max: CpuMax) {
        *self.cpu_max.lock().unwrap_or_else(|e| e.into_inner()) = max;
    }

    /// The most tasks the guest may hold at once, `None` for no limit of
    /// its own: the cgroup's `pids.max` as the guest reads it.
    pub fn task_limit(&self) -> Option<usize> {
        self.procs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .task_limit
    }

    /// Sets the most tasks the guest may hold at once (`pids.limit`),
    /// `None` for no limit of its own. Lowering it below what the guest
    /// holds kills nothing: new tasks fail with `EAGAIN` until enough have
    /// gone, as a pids cgroup whose `pids.max` is lowered behaves.
    pub fn set_task_limit(&self, limit: Option<usize>) {
        self.procs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .task_limit = limit;
    }

    /// The process with `pid`.
    pub fn process(&self, pid: i32) -> Option<Arc<Process>> {
        self.procs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map
            .get(&pid)
            .cloned()
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
    pub fn clear_ctty(&self, tty: &crate::fsimpl::devpts::Pty) {
        for p in self.procs().map.values() {
            let mut st = p.state();
            if st
                .ctty
                .as_ref()
                .is_some_and(|c| std::ptr::eq(Arc::as_ptr(c), tty))
            {
                st.ctty = None;
            }
        }
    }

    /// Locks the node and domain names.
    pub fn uts(&self) -> MutexGuard<'_, UtsNames> {
        self.uts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks the process table.
    pub fn procs(&self) -> MutexGuard<'_, ProcTable> {
        self.procs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps the CPU time of `p` (and of the children it waited for),
    /// which has just left the process table without a parent's `wait`.
    pub fn note_reaped_cpu(&self, p: &crate::kernel::task::Process) {
        let cpu = {
            let st = p.state();
            st.cpu + st.children_cpu
        };
        let mut total = self.reaped_cpu.lock().unwrap_or_else(|e| e.into_inner());
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

/// Builds a sandbox and runs `config.argv` in it to completion.
///
/// `make_platform` receives the memory file descriptor and returns the
/// platform that will run guest code (the caller picks the concrete one).
pub fn run<F>(config: SandboxConfig<'_>, make_platform: F) -> Result<ExitStatus, Error>
where
    F: FnOnce(BorrowedFd<'_>) -> platform::Result<Box<dyn Platform>>,
{
    // Counted before the platform pins threads to one CPU.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // The CPUs' /sys files, read from the host while the Sentry still may
    // (before its filter) and may still run on every CPU it was given.
    let cpu_topology = crate::host::cpu_topology::CpuTopology::from_host(cpus);
    // Before the Sentry starts any thread of its own: they all inherit it.
    let keep: &[u32] = if config.host_network {
        &[crate::host::filter::CAP_NET_BIND_SERVICE]
    } else {
        &[]
    };
    crate::host::filter::drop_capabilities(keep).map_err(Error::Capabilities)?;
    let memory = Arc::new(MemoryFile::new().map_err(Error::MemoryFile)?);
    let platform = make_platform(memory.fd())?;
    let host_memory = crate::host::total_memory();
    let total_memory = config
        .memory_limit
        .map_or(host_memory, |l| l.min(host_memory));
    let mut fs = FileSystem::new(
        config.root,
        memory.clone(),
        config.writable_root,
        total_memory,
    )
    .map_err(|e| Error::Root(std::io::Error::from_raw_os_error(e.0)))?;
    let sysctls = crate::fsimpl::sysctl::plan(&config.sysctls).map_err(Error::Sysctl)?;
    fs.mqueue
        .set_limits(sysctls.mqueue)
        .map_err(|e| Error::Sysctl(format!("message queue limits: {e}")))?;
    fs.proc.set_sysctls(sysctls);
    for m in config.mounts {
        let r = match m.source {
            MountSource::Volume { client, read_only } => {
                let kind = if read_only {
                    crate::vfs::VolumeKind::ReadOnly
                } else {
                    crate::vfs::VolumeKind::ReadWrite
                };
                fs.mount_volume(&m.dest, client, kind)
            }
            MountSource::Tmpfs { mode, size } => fs.mount_tmpfs(&m.dest, mode, size),
        };
        r.map_err(|e| Error::Mount(String::from_utf8_lossy(&m.dest).into_owned(), e))?;
    }
    let bus = Arc::new(EventBus::default());
    let host_net = if config.host_network {
        Some(crate::socket::host_inet::HostNet::new(bus.clone()).map_err(Error::Network)?)
    } else {
        None
    };
    let kernel = Arc::new(Kernel {
        sysv_shm: Arc::default(),
        sysv_sem: Arc::default(),
        sysv_msg: Arc::default(),
        platform,
        memory: memory.clone(),
        fs,
        uts: Mutex::new(UtsNames {
            host: config.hostname.into_bytes(),
            domain: b"(none)".to_vec(),
        }),
        cpus,
        cpu_topology,
        groups: crate::host::groups(),
        total_memory: AtomicU64::new(total_memory),
        host_memory,
        memory_limit: AtomicU64::new(config.memory_limit.unwrap_or(u64::MAX)),
        cpu_max: Mutex::new(config.cpu_max),
        unsupported_seen: (0..abi::MAX_SYSCALL)
            .map(|_| AtomicBool::new(false))
            .collect(),
        procs: Mutex::new(ProcTable {
            task_limit: config.max_tasks,
            ..ProcTable::default()
        }),
        locks: Arc::new(crate::vfs::lock::LockTable::new(bus.clone())),
        bus,
        timers: Default::default(),
        futexes: Default::default(),
        unix: Default::default(),
        timekeeper: crate::loader::vdso_time::TimeKeeper::new(&memory)
            .map_err(|e| Error::MemoryFile(std::io::Error::from_raw_os_error(e.0)))?,
        net: netstack::Stack::new(config.network.clone()),
        host_net,
        inet_async: Arc::default(),
        reaped_cpu: Mutex::default(),
    });
    // What the guest sees of its network (netlink, interface ioctls,
    // /sys/class/net, /proc/net): the netstack's interfaces. With
    // `--network host` the guest's sockets are host sockets, and it sees
    // the host's interfaces as the runtime found them before the Sentry
    // was confined: the Sentry cannot ask the host inside its seccomp
    // filter (no netlink socket of its own), and needs nothing live. With
    // `--network sandbox` in OCI mode it sees the container's interface
    // the same way, with the addresses the netstack owns.
    crate::socket::netlink::set_table(match (&config.network.mode, config.interfaces) {
        (_, Some(host)) if config.host_network => host,
        (netstack::Mode::Egress, Some(container)) => container,
        (netstack::Mode::Egress, None) => crate::socket::netlink::NetTable::sandbox(
            netstack::EGRESS_ADDR_V4,
            netstack::EGRESS_ADDR_V6,
        ),
        (netstack::Mode::Loopback, _) => crate::socket::netlink::NetTable::loopback(),
    });
    if matches!(config.network.mode, netstack::Mode::Egress) {
        // Names resolve only through the Sentry's DNS server, which the
        // guest's resolv.conf names; hosts is the sandbox's own.
        netstack::dns::serve(&kernel.net, netstack::dns::host_resolver())
            .map_err(|e| Error::Network(std::io::Error::from_raw_os_error(e.0)))?;
        let hosts = format!(
            "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t{}\n",
            String::from_utf8_lossy(&kernel.uts().host)
        );
        let resolv = format!(
            "# ferrovisor: names resolve through the sandbox's DNS server, which\n# answers only what --allow-host rules allow.\nnameserver {}\n",
            netstack::dns::DNS_ADDR.ip()
        );
        for (name, text) in [(&b"hosts"[..], hosts), (&b"resolv.conf"[..], resolv)] {
            kernel
                .fs
                .provide_file(b"etc", name, text.as_bytes())
                .map_err(|e| Error::Network(std::io::Error::from_raw_os_error(e.0)))?;
        }
    }
    {
        // Socket readiness changes wake blocked tasks, and what happened
        // to a socket with O_ASYNC signals its owners.
        let bus = kernel.bus.clone();
        let asyncs = kernel.inet_async.clone();
        let net = Arc::downgrade(&kernel.net);
        kernel
            .net
            .set_notifier(Arc::new(move |ids: &[netstack::SocketId]| {
                bus.notify();
                if let Some(net) = net.upgrade() {
                    asyncs.notify(&net, ids);
                }
            }));
    }
    kernel.fs.proc.attach(&kernel);
    kernel.fs.devpts.attach(&kernel);
    // Over everything mounted, with /proc and /sys able to answer.
    let skipped = kernel
        .fs
        .lock_paths(&config.masked_paths, &config.readonly_paths)
        .map_err(|e| Error::Mount("the masked and read-only paths".into(), e))?;
    for p in skipped {
        tracing::debug!(
            "masked or read-only path {} skipped: not in the sandbox",
            String::from_utf8_lossy(&p)
        );
    }
    if let Some(StartHook(hook)) = config.on_start {
        hook(Arc::downgrade(&kernel));
    }
    let host_signals = config.host_signals;
    // From here on the Sentry works on descriptors it holds: every host
    // path it needed has been opened. Its threads take the filter now;
    // those it starts later (and the stubs) inherit it.
    let egress = matches!(config.network.mode, netstack::Mode::Egress);
    // Asked of the host now: the filter leaves getuid/getgid out.
    crate::host::ids();
    crate::host::filter::install(crate::host::filter::Needs {
        host_sockets: config.host_network || egress,
        host_listen: config.host_network,
        host_resolver: egress,
        platform_clone_flags: kernel.platform.host_clone_flags(),
    })
    .map_err(Error::HostFilter)?;
    let task = start_process(
        &kernel,
        ProcessSpec {
            argv: config.argv,
            envp: config.envp,
            cwd: config.cwd,
            ids: config.ids,
            ppid: 0,
            stdio: Stdio::Inherit,
            privileges: config.privileges,
        },
    )?;
    // Only now is there a first process to hand host signals to; those that
    // came before stay pending (blocked) until the forwarder takes them.
    crate::kernel::hostsig::start_forwarder(Arc::downgrade(&kernel), host_signals);
    // Init's other threads may still run: the sandbox ends when the whole
    // process has.
    let status = run_process(&kernel, task);
    // Init has exited: like a PID namespace's init, it takes every other
    // process with it.
    kernel.kill_all();
    // The processes just killed may still hold shared mappings of volume
    // files, which would be written back when their address spaces go:
    // the Sentry may end first, so what they hold goes to the host now.
    for cache in kernel.fs.page_caches.all() {
        if let Err(e) = cache.writeback(None) {
            tracing::warn!("page cache writeback at the sandbox's end failed: {e:?}");
        }
    }
    Ok(status)
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
    pub caps: Option<crate::kernel::task::CapSets>,
    /// `no_new_privs` set
    pub no_new_privs: bool,
    /// resource limits (`RLIMIT_*`, limit) replacing those the Sentry got
    /// from the host
    pub rlimits: Vec<(u32, abi::Rlimit)>,
    /// the file mode creation mask it starts with (an OCI
    /// `process.user.umask`); `None`: 022
    pub umask: Option<u32>,
}

/// The standard descriptors of a new process.
#[derive(Debug)]
pub enum Stdio {
    /// the Sentry's own 0, 1 and 2
    Inherit,
    /// host descriptors handed in (`exec`); they belong to the new
    /// process's files from then on, and are closed if it cannot start
    Owned([std::os::fd::OwnedFd; 3]),
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
    let (argv_copy, envp_copy) = (spec.argv.clone(), spec.envp.clone());
    let sandbox_root = kernel.fs.root();
    let req = ExecRequest {
        fs: &kernel.fs,
        root: &sandbox_root,
        cwd: &cwd,
        path,
        argv: spec.argv,
        envp: spec.envp,
        creds: None,
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
    let mut creds = crate::kernel::task::Creds::new(ids.0, ids.1, kernel.groups.clone());
    let no_new_privs = spec.privileges.no_new_privs;
    if let Some(caps) = spec.privileges.caps {
        creds.caps = caps.trim_ambient();
    }
    let (creds, secure) = creds.on_exec(&prepared.exec_file(), no_new_privs);
    let aux = loader::AuxCreds::new(&creds, secure);
    let dumpable = creds.uid[1] == creds.uid[0] && creds.gid[1] == creds.gid[0];
    let ids = (creds.uid[3], creds.gid[3]);

    let space = kernel.platform.new_address_space()?;
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
    let stdio: [i32; 3] = match spec.stdio {
        Stdio::Inherit => [0, 1, 2],
        Stdio::Owned(fds) => fds.map(std::os::fd::IntoRawFd::into_raw_fd),
    };
    for (i, fd) in stdio.into_iter().enumerate() {
        // The caller's own access mode, so that e.g. a read-write terminal
        // stays read-write; a standard descriptor the caller closed stays
        // closed in the guest.
        let Ok(flags) = crate::host::getfl(FileDescription::stdio_borrow(fd)) else {
            continue;
        };
        let flags =
            flags as u32 & (abi::O_ACCMODE | OpenFlags::APPEND.bits() | OpenFlags::NONBLOCK.bits());
        let file = FileDescription::new(FileKind::Stdio(fd), None, flags);
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
    }
    {
        let mut procs = kernel.procs();
        procs.map.insert(pid, proc_.clone());
        procs.threads.insert(pid, thread.clone());
    }
    thread.set_interrupter(Some(ctx.interrupter()));
    let comm = loaded.comm;
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
        clear_child_tid: 0,
        robust_list: (0, 0),
        comm,
        exe: loaded.exe,
        exit: None,
        no_new_privs,
        restart: None,
        saved_mask: None,
        altstack: no_altstack(),
        patch_checked: 0,
        stale_fault: None,
    };
    {
        let mut p = proc_.state();
        p.info.cmdline = join_nul(&argv_copy);
        p.info.environ = join_nul(&envp_copy);
    }
    task.publish_info();
    task.publish_privileges();
    Ok(task)
}

/// Runs `task` (a process's first task) on the calling thread, then waits
/// until its whole process has ended: its exit status.
fn run_process(kernel: &Kernel, mut task: Task) -> ExitStatus {
    let proc_ = task.proc_.clone();
    task.run_to_exit();
    drop(task);
    let bus = kernel.bus.clone();
    let mut g = bus.lock();
    let status = loop {
        if let Some(s) = proc_.state().exit {
            break s;
        }
        g = bus.wait(g, None);
    };
    drop(g);
    status
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
            let status = run_process(&k, task);
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
