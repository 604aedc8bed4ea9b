//! Tasks, threads and processes. Each guest thread is a [`Task`] run by its
//! own host thread, which owns its platform context; [`Thread`] and
//! [`Process`] are the parts other threads see (signals, exit state).

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use abi::signal::*;
use abi::{Errno, KSigaction, Rlimit, SigContext, SigInfo, StackT, UContext};
use platform::{Context, Event, Interrupter, Regs};
use zerocopy::FromZeros;

use crate::kernel::auth::{CapSets, Creds};
use crate::kernel::wait::{Sleeper, WaitQueue, Waiter};
use crate::kernel::Kernel;
use crate::mm::{FaultFix, MemoryManager, PatchedSiteFault};
use crate::sync::Locked;
use crate::vfs::file::FdTable;
use crate::vfs::Location;

/// How a task (and, for now, its whole sandbox) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// `exit`/`exit_group` with this status (low 8 bits significant)
    Code(i32),
    /// killed by this signal
    Signal(i32),
}

impl ExitStatus {
    /// What a shell would report: the code, or 128 + the signal.
    pub fn shell_code(self) -> i32 {
        match self {
            ExitStatus::Code(c) => c & 0xff,
            ExitStatus::Signal(s) => 128 + s,
        }
    }

    /// The `wait` status word.
    pub fn wait_status(self) -> i32 {
        match self {
            ExitStatus::Code(c) => (c & 0xff) << 8,
            ExitStatus::Signal(s) => s | if dumps_core(s) { 0x80 } else { 0 },
        }
    }
}

pub use abi::signal::sa;

/// `si_code` values.
pub mod si {
    /// sent by `kill`
    pub const USER: i32 = 0;
    /// sent by the kernel
    pub const KERNEL: i32 = 0x80;
    /// sent by `tkill`/`tgkill`
    pub const TKILL: i32 = -6;
    /// sent by a POSIX timer
    pub const TIMER: i32 = -2;
    /// child exited
    pub const CLD_EXITED: i32 = 1;
    /// child killed
    pub const CLD_KILLED: i32 = 2;
    /// child dumped core
    pub const CLD_DUMPED: i32 = 3;
    /// child stopped
    pub const CLD_STOPPED: i32 = 5;
    /// child continued
    pub const CLD_CONTINUED: i32 = 6;
}

fn dumps_core(sig: i32) -> bool {
    matches!(
        sig,
        SIGQUIT
            | SIGILL
            | SIGTRAP
            | SIGABRT
            | SIGBUS
            | SIGFPE
            | SIGSEGV
            | SIGXCPU
            | SIGXFSZ
            | SIGSYS
    )
}

/// Whether signal `sig`'s default action is to ignore it.
pub fn ignored_by_default(sig: i32) -> bool {
    matches!(sig, SIGCHLD | SIGURG | SIGWINCH | SIGCONT)
}

/// Whether `sig` stops the process by default.
pub fn is_stop(sig: i32) -> bool {
    matches!(sig, SIGSTOP | SIGTSTP | SIGTTIN | SIGTTOU)
}

fn bit(sig: i32) -> u64 {
    1u64 << (sig - 1)
}

/// `SIGKILL` and `SIGSTOP`: the signals only the kernel acts on.
fn kernel_only(sig: i32) -> bool {
    sig == SIGKILL || sig == SIGSTOP
}

/// Signals that cannot be caught, blocked or ignored.
pub const UNBLOCKABLE: u64 = (1 << (SIGKILL - 1)) | (1 << (SIGSTOP - 1));

/// Pending signals with their information: real-time signals queue,
/// standard ones do not.
#[derive(Clone, Debug)]
pub struct SigQueue {
    /// pending signal bits
    pub bits: u64,
    info: Vec<std::collections::VecDeque<SigInfo>>,
}

/// Most queued real-time signals per queue (`RLIMIT_SIGPENDING`-like).
const MAX_QUEUED: usize = 1024;

impl Default for SigQueue {
    fn default() -> Self {
        SigQueue {
            bits: 0,
            info: vec![Default::default(); 64],
        }
    }
}

impl SigQueue {
    /// Marks `sig` pending with `info`.
    pub fn enqueue(&mut self, sig: i32, info: SigInfo) {
        if info.code == si::TIMER {
            // A timer whose last signal is still pending does not queue
            // another: the expiry counts as an overrun of the pending one.
            let id = info.fields[0] as u32;
            let missed = (info.fields[0] >> 32) + 1;
            let q = &mut self.info[sig as usize - 1];
            if let Some(p) = q
                .iter_mut()
                .find(|p| p.code == si::TIMER && p.fields[0] as u32 == id)
            {
                let overrun = ((p.fields[0] >> 32) + missed).min(i32::MAX as u64);
                p.fields[0] = u64::from(id) | (overrun << 32);
                return;
            }
        }
        if sig >= SIGRTMIN {
            if self.info.iter().map(|q| q.len()).sum::<usize>() < MAX_QUEUED {
                self.info[sig as usize - 1].push_back(info);
            }
        } else if self.info[sig as usize - 1].is_empty() {
            self.info[sig as usize - 1].push_back(info);
        }
        self.bits |= bit(sig);
    }

    /// Takes one instance of pending `sig`.
    pub fn dequeue(&mut self, sig: i32) -> SigInfo {
        let q = &mut self.info[sig as usize - 1];
        let info = q.pop_front();
        if q.is_empty() {
            self.bits &= !bit(sig);
        }
        info.unwrap_or_else(|| user_info(sig, 0, 0, si::KERNEL))
    }

    /// Discards every instance of `sig`.
    pub fn clear(&mut self, sig: i32) {
        self.info[sig as usize - 1].clear();
        self.bits &= !bit(sig);
    }

    /// Whether `sig` is pending.
    pub fn has(&self, sig: i32) -> bool {
        self.bits & bit(sig) != 0
    }

    /// Every pending instance, lowest signal first (a checkpoint's view).
    pub fn entries(&self) -> Vec<(i32, SigInfo)> {
        let mut v = Vec::new();
        for sig in 1..=64 {
            if !self.has(sig) {
                continue;
            }
            let q = &self.info[sig as usize - 1];
            if q.is_empty() {
                v.push((sig, user_info(sig, 0, 0, si::KERNEL)));
            }
            v.extend(q.iter().map(|i| (sig, *i)));
        }
        v
    }
}

/// A controlling terminal, as the kernel sees one (credentials(7),
/// "Sessions"); devpts has the terminals themselves.
pub trait Terminal: std::any::Any + Send + Sync + fmt::Debug {
    /// The session leader that holds it exited: its foreground group is
    /// hung up and the session loses it.
    fn leader_exit(&self, kernel: &Kernel);
    /// Its device's minor number.
    fn rdev_minor(&self) -> u64;
    /// Its foreground process group, if any.
    fn fg_pgrp(&self) -> Option<i32>;
    /// Becomes the controlling terminal of session `sid`, foreground group
    /// `pgrp`, unless it is some session's already.
    fn attach(&self, sid: i32, pgrp: i32) -> bool;
}

/// Whether `held` is the terminal at `t` (compared by address: two
/// terminals are the same object or different ones).
pub fn is_terminal<T>(held: &Arc<dyn Terminal>, t: &T) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(held), t as *const T)
}

/// Shared, lock-protected state of a process (a thread group).
#[derive(Debug)]
pub struct ProcessState {
    /// parent PID (0 for the sandbox's first process)
    pub ppid: i32,
    /// process group
    pub pgid: i32,
    /// session
    pub sid: i32,
    /// signal sent to the parent at exit
    pub exit_signal: i32,
    /// `rt_sigaction` dispositions, index = signal - 1
    pub actions: [KSigaction; 64],
    /// signals sent to the process as a whole
    pub pending: SigQueue,
    /// set once the last thread has exited (a zombie until reaped)
    pub exit: Option<ExitStatus>,
    /// the whole group is exiting (`exit_group`, a fatal signal, `SIGKILL`)
    pub group_exit: Option<ExitStatus>,
    /// the stop signal while stopped
    pub stopped: Option<i32>,
    /// a stop (`Some(sig)`) or continue (`None`) not yet reported to `wait`
    pub wait_report: Option<Option<i32>>,
    /// a `vfork` parent may go on (the child exec'd or exited)
    pub vfork_done: bool,
    /// the process has called `execve` (its parent may no longer move it
    /// to another group)
    pub did_exec: bool,
    /// its address space's `membarrier` registrations (the
    /// `MEMBARRIER_CMD_REGISTER_*` bits); a new address space has none
    pub membarrier: u32,
    /// CPU time of address spaces the process has left and of threads
    /// that have exited
    pub cpu: CpuTimes,
    /// the current address space's CPU time when the process began using it
    pub as_cpu_start: std::time::Duration,
    /// CPU time of waited-for children (and theirs)
    pub children_cpu: CpuTimes,
    /// resource limits, index = `RLIMIT_*` (shared by the threads;
    /// `prlimit` may change another process's)
    pub rlimits: [Rlimit; abi::rlimit::RLIM_NLIMITS],
    /// `/proc/[pid]/oom_score_adj`, -1000..=1000 (inherited by children,
    /// kept across execve, as Linux keeps it in the signal struct)
    pub oom_score_adj: i16,
    /// the lowest `oom_score_adj` a write without `CAP_SYS_RESOURCE` may
    /// set: the last value one with it wrote (inherited the same way)
    pub oom_score_adj_min: i16,
    /// signal to receive when the parent exits (`PR_SET_PDEATHSIG`)
    pub pdeathsig: i32,
    /// orphaned descendants are reparented here rather than to init
    /// (`PR_SET_CHILD_SUBREAPER`)
    pub child_subreaper: bool,
    /// when the process started
    pub started: std::time::Instant,
    /// `ITIMER_REAL`, `ITIMER_VIRTUAL`, `ITIMER_PROF` in the timer service
    pub itimers: [Option<u64>; 3],
    /// POSIX timers: guest timer id → (service id, clock)
    pub posix_timers: std::collections::BTreeMap<i32, (u64, i32)>,
    /// live threads
    pub threads: Vec<Arc<Thread>>,
    /// what /proc shows of the process
    pub info: ProcInfo,
    /// the controlling terminal (inherited by `fork`, dropped by `setsid`)
    pub ctty: Option<Arc<dyn Terminal>>,
    /// a session leader whose terminal hung up: the foreground group then,
    /// which gets `SIGHUP` when the leader exits (Linux's `tty_old_pgrp`)
    pub tty_old_pgrp: i32,
    /// the sandbox's init (Linux's `SIGNAL_UNKILLABLE`): signals it has no
    /// handler for are dropped, see [`ProcessState::init_drops`]
    pub unkillable: bool,
    /// `PR_GET_DUMPABLE`: cleared by `execve` of a program that changes
    /// the ids or that the caller may not read, and by a change of the
    /// effective or file-system ids; set again by a plain `execve` or
    /// `PR_SET_DUMPABLE` (Linux keeps it with the address space)
    pub dumpable: bool,
    /// it has a System V undo list: Linux makes one at the first
    /// `SEM_UNDO` operation or `CLONE_SYSVSEM` clone (`kcmp(KCMP_SYSVSEM)`)
    pub sem_undo_list: bool,
    /// `personality(2)`: the execution domain (always Linux's) and its
    /// flags (`ADDR_NO_RANDOMIZE`, ...), kept across `fork` and `execve`
    pub personality: u32,
    /// threads this process traces (`ptrace(2)`), kept until their exit
    /// is collected
    pub tracees: Vec<Arc<Thread>>,
}

/// CPU time, split as `getrusage` reports it: guest code (user) and the
/// Sentry working for it (system).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// time running guest code
    pub user: std::time::Duration,
    /// time in the Sentry on the guest's behalf
    pub sys: std::time::Duration,
}

impl std::ops::Add for CpuTimes {
    type Output = CpuTimes;
    fn add(self, o: CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user + o.user,
            sys: self.sys + o.sys,
        }
    }
}

/// CPU time the calling host thread has used.
pub fn host_thread_cpu() -> std::time::Duration {
    crate::host::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| {
            std::time::Duration::new(
                t.tv_sec.max(0) as u64,
                t.tv_nsec.clamp(0, 999_999_999) as u32,
            )
        })
        .unwrap_or_default()
}

/// What `/proc/[pid]` shows of a process, kept current by `execve`,
/// `clone` and `prctl`.
#[derive(Debug, Default)]
pub struct ProcInfo {
    /// guest path of the executable
    pub exe: String,
    /// `argv` joined by NULs
    pub cmdline: Vec<u8>,
    /// `envp` joined by NULs
    pub environ: Vec<u8>,
    /// the auxiliary vector execve gave it
    pub auxv: Vec<u8>,
    /// the leader thread's name (`prctl(PR_SET_NAME)`, `comm`)
    pub comm: String,
    /// address space
    pub mm: std::sync::Weak<Mutex<MemoryManager>>,
    /// descriptor table
    pub fds: std::sync::Weak<Mutex<FdTable>>,
    /// working directory and umask
    pub fs: std::sync::Weak<Mutex<FsContext>>,
}

impl ProcessState {
    /// State of a new process.
    pub fn new(
        ppid: i32,
        pgid: i32,
        sid: i32,
        exit_signal: i32,
        actions: [KSigaction; 64],
    ) -> Self {
        ProcessState {
            ppid,
            pgid,
            sid,
            exit_signal,
            actions,
            pending: SigQueue::default(),
            exit: None,
            group_exit: None,
            stopped: None,
            wait_report: None,
            vfork_done: false,
            did_exec: false,
            membarrier: 0,
            cpu: CpuTimes::default(),
            as_cpu_start: std::time::Duration::ZERO,
            children_cpu: CpuTimes::default(),
            rlimits: [Rlimit {
                cur: u64::MAX,
                max: u64::MAX,
            }; abi::rlimit::RLIM_NLIMITS],
            oom_score_adj: 0,
            oom_score_adj_min: 0,
            pdeathsig: 0,
            child_subreaper: false,
            started: std::time::Instant::now(),
            itimers: [None; 3],
            posix_timers: Default::default(),
            threads: Vec::new(),
            info: ProcInfo::default(),
            ctty: None,
            tty_old_pgrp: 0,
            unkillable: false,
            dumpable: true,
            sem_undo_list: false,
            personality: 0,
            tracees: Vec::new(),
        }
    }

    /// What `execve` keeps of the dispositions: handled signals go back to
    /// their default action, ignored ones stay ignored.
    pub fn reset_actions_for_exec(&mut self) {
        for a in &mut self.actions {
            if a.handler != SIG_IGN {
                *a = KSigaction::new_zeroed();
            }
        }
    }

    fn disposition_ignores(&self, sig: i32) -> bool {
        let h = self.actions[sig as usize - 1].handler;
        h == SIG_IGN || (h == SIG_DFL && ignored_by_default(sig))
    }

    /// Whether `sig`, just generated, is dropped because this process is
    /// the sandbox's init and keeps the default action for it
    /// (pid_namespaces(7), Linux's `sig_task_ignored()`): init gets only
    /// the signals it has a handler for, except that `SIGKILL` and
    /// `SIGSTOP` sent from outside the sandbox (an ancestor namespace)
    /// always arrive.
    pub fn init_drops(&self, sig: i32, from_outside: bool) -> bool {
        self.unkillable
            && self.actions[sig as usize - 1].handler == SIG_DFL
            && !(from_outside && kernel_only(sig))
    }

    /// Whether every thread blocks `sig` (then an ignored signal stays
    /// pending instead of being discarded).
    fn all_block(&self, sig: i32) -> bool {
        !self.threads.is_empty() && self.threads.iter().all(|t| t.state().mask & bit(sig) != 0)
    }
}

/// A guest process (thread group) as other processes see it.
pub struct Process {
    /// process ID (thread group ID)
    pub pid: i32,
    state: Mutex<ProcessState>,
    /// woken when the process itself changes: a thread leaves, `vfork`
    /// lets the parent go, it exits (pidfds, a `vfork` parent, `execve`
    /// waiting for the other threads, the runtime waiting for its end)
    pub waiters: WaitQueue,
    /// woken when a child changes state (exits, stops, continues, or an
    /// orphaned zombie is handed over): `wait4`/`waitid` sleep here
    /// (Linux's `wait_chldexit`)
    pub wait_chld: WaitQueue,
}

impl fmt::Debug for Process {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Process({})", self.pid)
    }
}

impl Process {
    /// A new process.
    pub fn new(pid: i32, state: ProcessState) -> Arc<Process> {
        Arc::new(Process {
            pid,
            state: Mutex::new(state),
            waiters: WaitQueue::new(),
            wait_chld: WaitQueue::new(),
        })
    }

    /// CPU time of the process so far, as another process sees it: what
    /// its exited threads and left address spaces used, and the guest time
    /// of its current address space.
    pub fn cpu_times(&self) -> CpuTimes {
        let (mut cpu, start, mm) = {
            let st = self.state();
            let live = !st.threads.is_empty();
            (
                st.cpu,
                st.as_cpu_start,
                st.info.mm.upgrade().filter(|_| live),
            )
        };
        if let Some(mm) = mm {
            let space = mm.locked().address_space().cpu_time().unwrap_or_default();
            cpu.user += space.saturating_sub(start);
        }
        cpu
    }

    /// Locks the shared state. Lock order: a process's state before any of
    /// its threads' states.
    pub fn state(&self) -> MutexGuard<'_, ProcessState> {
        self.state.locked()
    }

    /// Wakes every thread (blocked in the Sentry or running guest code) so
    /// it looks at its signals.
    pub fn kick_all(&self, _kernel: &Kernel) {
        let threads = self.state().threads.clone();
        for t in threads {
            t.waiter.wake();
            t.interrupt();
        }
    }

    /// Makes the whole thread group exit with `status` (the first reason
    /// wins).
    pub fn group_exit(&self, kernel: &Kernel, status: ExitStatus) {
        {
            let mut st = self.state();
            if st.group_exit.is_none() {
                st.group_exit = Some(status);
            }
            st.stopped = None;
        }
        self.kick_all(kernel);
    }

    /// Generates signal `sig` for the process, as `kill(2)` from inside the
    /// sandbox does: ignored signals are discarded, `SIGCONT` resumes a
    /// stopped process, `SIGKILL` ends it (unless it is init).
    pub fn send_signal(&self, kernel: &Kernel, sig: i32, info: SigInfo) {
        self.generate(kernel, sig, info, false);
    }

    /// Generates signal `sig` as sent from outside the sandbox (the
    /// runtime's `kill`, a container engine): for init, `SIGKILL` and
    /// `SIGSTOP` then always arrive, as from an ancestor PID namespace.
    pub fn send_signal_from_outside(&self, kernel: &Kernel, sig: i32, info: SigInfo) {
        self.generate(kernel, sig, info, true);
    }

    fn generate(&self, kernel: &Kernel, sig: i32, info: SigInfo, from_outside: bool) {
        if sig == 0 {
            return;
        }
        if sig == SIGKILL {
            let ends = {
                let st = self.state();
                st.exit.is_none() && !st.init_drops(sig, from_outside)
            };
            if ends {
                self.group_exit(kernel, ExitStatus::Signal(SIGKILL));
            }
            return;
        }
        let mut continued = false;
        {
            let mut st = self.state();
            if st.exit.is_some() || st.group_exit.is_some() {
                return;
            }
            if sig == SIGCONT {
                for s in [SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU] {
                    st.pending.clear(s);
                    for t in &st.threads {
                        t.state().pending.clear(s);
                    }
                }
                if st.stopped.take().is_some() {
                    st.wait_report = Some(None);
                    continued = true;
                }
            } else if is_stop(sig) {
                st.pending.clear(SIGCONT);
            }
            queue(&mut st, sig, info, from_outside);
        }
        if continued {
            self.notify_parent(kernel, si::CLD_CONTINUED, SIGCONT);
        }
        self.kick_all(kernel);
    }

    /// Queues an ordinary signal (not `SIGKILL`, `SIGCONT` or a stop
    /// signal) as [`Process::send_signal`] does, without waking anyone:
    /// for a caller that holds the process table's lock, which then calls
    /// [`Process::kick_all`] once it has let go.
    fn queue_quietly(&self, sig: i32, info: SigInfo) {
        let mut st = self.state();
        if st.exit.is_none() && st.group_exit.is_none() {
            queue(&mut st, sig, info, false);
        }
    }

    /// Tells the parent about a stop or continue (`SIGCHLD` unless it asked
    /// for `SA_NOCLDSTOP`).
    fn notify_parent(&self, kernel: &Kernel, code: i32, sig: i32) {
        let ppid = self.state().ppid;
        if let Some(parent) = kernel.process(ppid) {
            let nocldstop = parent.state().actions[SIGCHLD as usize - 1].flags & sa::NOCLDSTOP != 0;
            if !nocldstop {
                parent.send_signal(kernel, SIGCHLD, chld_info(self.pid, code, sig));
            }
            parent.wait_chld.notify();
        }
        self.waiters.notify();
    }
}

/// Queues `sig` for a process whose state `st` is: blocked signals are kept
/// whatever the disposition (it may change before they are unblocked,
/// Linux's sig_ignored()); others are dropped when ignored.
fn queue(st: &mut ProcessState, sig: i32, info: SigInfo, from_outside: bool) {
    let blocked = st.all_block(sig);
    if blocked || !(st.disposition_ignores(sig) || st.init_drops(sig, from_outside)) {
        st.pending.enqueue(sig, info);
    }
}

/// Per-thread signal state other threads may touch.
#[derive(Debug, Default)]
pub struct ThreadState {
    /// blocked signals
    pub mask: u64,
    /// signals sent to this thread (`tgkill`, faults)
    pub pending: SigQueue,
    /// the thread must exit on its own (another thread is in `execve`)
    pub exit_now: bool,
    /// the thread has begun to exit (Linux's `PF_EXITING`): a `TSYNC`
    /// passes over it
    pub exiting: bool,
    /// CPUs the thread may run on (`sched_setaffinity`), bit per CPU;
    /// 0 means all of them
    pub affinity: u64,
    /// nice value, -20..=19 (`setpriority`)
    pub nice: i8,
    /// scheduling policy: SCHED_OTHER (0), SCHED_BATCH (3) or SCHED_IDLE
    /// (5); the host scheduler sees none of it
    pub policy: u8,
    /// its capability sets (`capget` of another thread, /proc)
    pub caps: CapSets,
    /// its `no_new_privs` (/proc)
    pub no_new_privs: bool,
    /// its real, effective, saved and file-system user ids (who may
    /// signal it, kill(2))
    pub uid: [u32; 4],
    /// its I/O priority (`ioprio_set(2)`; 0: none set, class NONE)
    pub ioprio: i32,
    /// its NUMA policy (`set_mempolicy(2)`; `None`: the default)
    pub mempolicy: Option<crate::mm::MemPolicy>,
    /// its real, effective, saved and file-system group ids (/proc)
    pub gid: [u32; 4],
    /// its supplementary groups (/proc)
    pub groups: Vec<u32>,
    /// its seccomp mode and filters: the truth, which its task copies
    /// (see [`Task::seccomp`]) and another thread's `TSYNC` may change
    pub seccomp: crate::kernel::seccomp::Seccomp,
    /// a `TSYNC` gave it the caller's `no_new_privs` too
    pub seccomp_sets_no_new_privs: bool,
    /// its Landlock domain (ptrace's check from another thread)
    pub landlock: Option<Arc<crate::kernel::landlock::Domain>>,
    /// its tracer's link, while traced
    pub ptrace: Option<Box<crate::kernel::ptrace::Tracee>>,
}

/// A guest thread as other threads see it.
pub struct Thread {
    /// thread ID
    pub tid: i32,
    /// its thread group
    pub process: Arc<Process>,
    state: Mutex<ThreadState>,
    interrupter: Mutex<Option<Arc<dyn Interrupter>>>,
    /// where the thread sleeps in a blocking call; a signal sent to it
    /// wakes it there
    pub waiter: Arc<Waiter>,
    /// whether its calls go through seccomp, read before each call
    pub seccomp: crate::kernel::seccomp::SeccompFlags,
    /// whether it is traced and how (`kernel::ptrace::TRACED`, ...), read
    /// before each call
    pub ptrace_flags: std::sync::atomic::AtomicU8,
    /// odd while it runs guest code, and one more each time it enters or
    /// leaves it; written by its own host thread alone (see
    /// [`Thread::barrier`])
    guest_epoch: std::sync::atomic::AtomicU64,
}

impl fmt::Debug for Thread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Thread({}/{})", self.process.pid, self.tid)
    }
}

impl Thread {
    /// A new thread of `process` with signal mask `mask`.
    pub fn new(tid: i32, process: Arc<Process>, mask: u64) -> Arc<Thread> {
        Arc::new(Thread {
            tid,
            process,
            state: Mutex::new(ThreadState {
                mask,
                ..ThreadState::default()
            }),
            interrupter: Mutex::new(None),
            waiter: Waiter::new(),
            seccomp: Default::default(),
            ptrace_flags: Default::default(),
            guest_epoch: Default::default(),
        })
    }

    /// Marks the thread as entering (`true`) or leaving guest code. Plain
    /// stores: only this thread writes, and x86 keeps stores in order.
    #[inline]
    fn set_in_guest(&self, on: bool) {
        use std::sync::atomic::Ordering;
        let e = self.guest_epoch.load(Ordering::Relaxed);
        if (e & 1 == 1) != on {
            self.guest_epoch.store(e + 1, Ordering::Release);
        }
    }

    /// `membarrier(2)`'s barrier on this thread: if it runs guest code,
    /// it is interrupted and waited for until it has left it, which passes
    /// through the host kernel on its CPU (a full barrier). A thread in the
    /// Sentry meets one before its guest code runs again.
    pub fn barrier(&self) {
        use std::sync::atomic::Ordering;
        let e = self.guest_epoch.load(Ordering::SeqCst);
        if e & 1 == 0 {
            return;
        }
        self.interrupt();
        // Bounded: a thread that never leaves (its host side gone) must
        // not hold the caller forever.
        let start = std::time::Instant::now();
        while self.guest_epoch.load(Ordering::SeqCst) == e {
            if start.elapsed() > std::time::Duration::from_secs(1) {
                tracing::warn!(thread = ?self, "membarrier: thread did not leave guest code");
                return;
            }
            std::thread::yield_now();
        }
    }

    /// Locks the per-thread state (after the process state, if both).
    pub fn state(&self) -> MutexGuard<'_, ThreadState> {
        self.state.locked()
    }

    /// Sets (or clears) the handle that interrupts the running guest.
    pub fn set_interrupter(&self, i: Option<Arc<dyn Interrupter>>) {
        *self.interrupter.locked() = i;
    }

    /// Makes a running guest thread come back to the Sentry.
    pub fn interrupt(&self) {
        if let Some(i) = self.interrupter.locked().as_ref() {
            i.interrupt();
        }
    }

    /// Sends `sig` to this thread only (`tgkill`).
    pub fn send_signal(&self, kernel: &Kernel, sig: i32, info: SigInfo) {
        if sig == 0 {
            return;
        }
        if sig == SIGKILL || sig == SIGCONT || is_stop(sig) {
            // These act on the whole process.
            self.process.send_signal(kernel, sig, info);
            return;
        }
        self.queue_signal(sig, info);
    }

    /// Queues a signal that acts on this thread alone (not `SIGKILL`,
    /// `SIGCONT` or a stop signal) and wakes it.
    fn queue_signal(&self, sig: i32, info: SigInfo) {
        {
            let st = self.process.state();
            if st.exit.is_some() || st.group_exit.is_some() {
                return;
            }
            let mut t = self.state();
            if t.mask & bit(sig) != 0 || !(st.disposition_ignores(sig) || st.init_drops(sig, false))
            {
                t.pending.enqueue(sig, info);
            }
        }
        // Woken even for a blocked signal: sigtimedwait and signalfd
        // wait for those.
        self.waiter.wake();
        self.interrupt();
    }

    /// Whether a blocking call of this thread should stop waiting: an
    /// unblocked signal is pending, the thread or its group must exit, or
    /// the sandbox is to be saved.
    pub fn interrupted(&self) -> bool {
        if CHECKPOINT_ASKED.load(std::sync::atomic::Ordering::Relaxed) {
            return true;
        }
        let p = self.process.state();
        if p.group_exit.is_some() {
            return true;
        }
        let t = self.state();
        t.exit_now
            || (t.pending.bits | p.pending.bits) & !t.mask != 0
            || t.ptrace.as_ref().is_some_and(|l| l.interrupt)
    }

    /// Whether the thread must end once it takes its signals (Linux's
    /// `fatal_signal_pending()`, which sees a signal that kills by default
    /// turned into `SIGKILL`): its group exits, or an unblocked signal
    /// whose action is to terminate is pending.
    pub fn fatal_signal_pending(&self) -> bool {
        let p = self.process.state();
        if p.group_exit.is_some() {
            return true;
        }
        let t = self.state();
        if t.exit_now {
            return true;
        }
        let mut pending = (t.pending.bits | p.pending.bits) & !t.mask;
        while pending != 0 {
            let sig = pending.trailing_zeros() as i32 + 1;
            pending &= pending - 1;
            let default = p.actions[sig as usize - 1].handler == SIG_DFL;
            if default && !ignored_by_default(sig) && !is_stop(sig) && !p.unkillable {
                return true;
            }
        }
        false
    }

    /// Signals pending for the thread, its own and its process's.
    pub fn signals_pending(&self) -> u64 {
        let p = self.process.state();
        let t = self.state();
        t.pending.bits | p.pending.bits
    }
}

impl Sleeper for Thread {
    fn waiter(&self) -> &Arc<Waiter> {
        &self.waiter
    }

    fn interrupted(&self) -> bool {
        Thread::interrupted(self)
    }
}

impl crate::vfs::file::Caller for Thread {
    fn capable(&self, cap: u32) -> bool {
        self.state().caps.has(cap)
    }

    fn raise_sigpipe(&self) {
        self.queue_signal(SIGPIPE, user_info(SIGPIPE, 0, 0, si::KERNEL));
    }

    fn in_group(&self, gid: u32) -> bool {
        let t = self.state();
        t.gid[3] == gid || t.groups.contains(&gid)
    }

    fn signals_pending(&self) -> u64 {
        Thread::signals_pending(self)
    }

    fn dequeue_signals(&self, mask: u64, max: usize) -> Vec<SigInfo> {
        let mut out = Vec::new();
        let mut p = self.process.state();
        let mut t = self.state();
        while out.len() < max {
            let ready = (t.pending.bits | p.pending.bits) & mask;
            if ready == 0 {
                break;
            }
            let sig = ready.trailing_zeros() as i32 + 1;
            out.push(if t.pending.has(sig) {
                t.pending.dequeue(sig)
            } else {
                p.pending.dequeue(sig)
            });
        }
        out
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// `siginfo` of a `SIGCHLD`.
pub fn chld_info(pid: i32, code: i32, status: i32) -> SigInfo {
    let mut i = SigInfo::new_zeroed();
    i.signo = SIGCHLD;
    i.code = code;
    i.fields[0] = pid as u32 as u64;
    i.fields[1] = status as u32 as u64;
    i
}

/// `siginfo` of a signal sent by process `pid` with `kill`.
pub fn user_info(sig: i32, pid: i32, uid: u32, code: i32) -> SigInfo {
    let mut i = SigInfo::new_zeroed();
    i.signo = sig;
    i.code = code;
    i.fields[0] = (pid as u32 as u64) | (u64::from(uid) << 32);
    i
}

/// `siginfo` of a fault.
pub fn fault_info(sig: i32, code: i32, addr: u64) -> SigInfo {
    let mut i = SigInfo::new_zeroed();
    i.signo = sig;
    i.code = code;
    i.fields[0] = addr;
    i
}

/// A guest thread, owned by the host thread that runs it.
pub struct Task {
    /// its thread (shared view)
    pub thread: Arc<Thread>,
    /// its process
    pub proc_: Arc<Process>,
    /// the sandbox
    pub kernel: Arc<Kernel>,
    /// registers while stopped in the Sentry
    pub regs: Regs,
    /// address space (shared by `CLONE_VM`)
    pub mm: Arc<Mutex<MemoryManager>>,
    /// platform context
    pub ctx: Box<dyn Context>,
    /// descriptors (shared by `CLONE_FILES`)
    pub fds: Arc<Mutex<FdTable>>,
    /// working directory and umask (shared by `CLONE_FS`)
    pub fs: Arc<Mutex<FsContext>>,
    /// effective (uid, gid): file ownership and permission checks
    pub ids: (u32, u32),
    /// full credentials
    pub creds: Creds,
    /// its thread, process and session keyrings (keyrings(7))
    pub keyrings: crate::kernel::keys::TaskKeyrings,
    /// `set_tid_address` / `CLONE_CHILD_CLEARTID`
    pub clear_child_tid: u64,
    /// `set_robust_list` (head, len)
    pub robust_list: (u64, u64),
    /// guest path of the running executable
    pub exe: String,
    /// set when the task has ended
    pub exit: Option<ExitStatus>,
    /// `PR_SET_NAME` name
    pub comm: Vec<u8>,
    /// `PR_SET_NO_NEW_PRIVS`
    pub no_new_privs: bool,
    /// the last system call asked to be restarted (internal errno)
    pub restart: Option<Errno>,
    /// mask to restore after the handler that interrupted `rt_sigsuspend`,
    /// `ppoll` and friends
    pub saved_mask: Option<u64>,
    /// `sigaltstack`
    pub altstack: StackT,
    /// return address of the last call whose site was looked at for
    /// patching (calls from there again need no second look)
    pub patch_checked: u64,
    /// a fault the memory manager found already resolved, run again once
    /// (its address and `rip`)
    pub stale_fault: Option<(u64, u64)>,
    /// its copy of the thread's seccomp state, read without a lock on
    /// each call ([`Task::seccomp`] refreshes it)
    pub(crate) seccomp_copy: crate::kernel::seccomp::Seccomp,
    /// its Landlock domain (`landlock_restrict_self`), inherited by every
    /// clone and kept across `execve`; its thread's state holds the same
    pub landlock: Option<Arc<crate::kernel::landlock::Domain>>,
    /// set for the length of a `preadv2`/`pwritev2` with `RWF_NOWAIT`:
    /// what would sleep answers `EAGAIN` instead
    pub nowait: bool,
}

/// Working directory and file creation mask.
#[derive(Clone, Debug)]
pub struct FsContext {
    /// working directory
    pub cwd: Location,
    /// root directory (`chroot(2)`): where absolute paths start and `..`
    /// stops; the sandbox's root unless narrowed
    pub root: Location,
    /// file creation mask
    pub umask: u32,
}

impl fmt::Debug for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task")
            .field("tid", &self.thread.tid)
            .field("exe", &self.exe)
            .finish()
    }
}

/// A disabled alternate signal stack.
pub fn no_altstack() -> StackT {
    let mut s = StackT::new_zeroed();
    s.flags = SS_DISABLE;
    s
}

/// The part of a frame Linux calls `struct rt_sigframe`: return address,
/// ucontext, siginfo.
const FRAME_SIZE: u64 = 8 + 304 + 128;

impl Task {
    /// The guest thread id (the sandbox's own numbering: the first task is 1).
    pub fn tid(&self) -> i32 {
        self.thread.tid
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        self.proc_.pid
    }

    /// Locks the address space.
    pub fn mm(&self) -> MutexGuard<'_, MemoryManager> {
        self.mm.locked()
    }

    /// Locks the descriptor table.
    pub fn fds(&self) -> MutexGuard<'_, FdTable> {
        self.fds.locked()
    }

    /// The working directory.
    pub fn cwd(&self) -> Location {
        self.fs.locked().cwd.clone()
    }

    /// The root directory (`chroot(2)`).
    pub fn root(&self) -> Location {
        self.fs.locked().root.clone()
    }

    /// Walks `path` from `start` (absolute paths from this task's root).
    pub fn walk(
        &self,
        start: &Location,
        path: &[u8],
        follow: bool,
    ) -> Result<crate::vfs::Lookup, Errno> {
        self.walk_with(start, path, follow, Default::default())
    }

    /// [`Task::walk`] under `openat2`'s restrictions.
    pub fn walk_with(
        &self,
        start: &Location,
        path: &[u8],
        follow: bool,
        how: crate::vfs::Resolve<'_>,
    ) -> Result<crate::vfs::Lookup, Errno> {
        let how = crate::vfs::Resolve {
            search: Some(&self.creds),
            ..how
        };
        self.kernel
            .fs
            .walk_in(&self.root(), start, path, follow, how)
    }

    /// [`Task::walk`], a missing object being `ENOENT`.
    pub fn resolve(&self, start: &Location, path: &[u8], follow: bool) -> Result<Location, Errno> {
        match self.walk(start, path, follow)? {
            crate::vfs::Lookup::Found(l) => Ok(l),
            crate::vfs::Lookup::Missing { .. } => Err(Errno::ENOENT),
        }
    }

    /// Locks the working directory and umask.
    pub fn fs_ctx(&self) -> MutexGuard<'_, FsContext> {
        self.fs.locked()
    }

    /// What blocking file operations of this task wait with.
    pub fn blocker(&self) -> crate::vfs::file::Blocker<'_> {
        crate::vfs::file::Blocker {
            fs: &self.kernel.fs,
            caller: &*self.thread,
            nowait: self.nowait,
        }
    }

    /// `RLIMIT_NOFILE`'s soft limit.
    pub fn nofile(&self) -> u64 {
        self.proc_.state().rlimits[abi::rlimit::RLIMIT_NOFILE as usize].cur
    }

    /// Puts `file` at the lowest free descriptor (below `RLIMIT_NOFILE`).
    pub fn install_fd(
        &self,
        file: Arc<crate::vfs::file::FileDescription>,
        cloexec: bool,
    ) -> Result<u64, Errno> {
        let limit = self.nofile();
        self.fds()
            .insert_from(0, crate::vfs::file::FdEntry { file, cloexec }, limit)
            .map(|fd| fd as u64)
    }

    /// The thread's signal mask.
    pub fn sigmask(&self) -> u64 {
        self.thread.state().mask
    }

    /// Replaces the thread's signal mask (`SIGKILL`/`SIGSTOP` stay
    /// unblocked); returns the old one.
    pub fn set_sigmask(&self, mask: u64) -> u64 {
        std::mem::replace(&mut self.thread.state().mask, mask & !UNBLOCKABLE)
    }

    /// Runs the task to its end, then leaves its thread group (and, as its
    /// last thread, turns the process into a zombie).
    pub fn run_to_exit(&mut self) -> ExitStatus {
        let status = match self.run() {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("task {}: platform failure: {e}", self.tid());
                self.proc_
                    .group_exit(&self.kernel, ExitStatus::Signal(SIGKILL));
                ExitStatus::Signal(SIGKILL)
            }
        };
        self.exit_thread(status)
    }

    /// Shows the task's ids, capabilities and `no_new_privs` to other
    /// tasks and /proc (after every change).
    pub fn publish_privileges(&self) {
        let mut t = self.thread.state();
        t.caps = self.creds.caps;
        t.no_new_privs = self.no_new_privs;
        t.uid = self.creds.uid;
        t.gid = self.creds.gid;
        t.groups.clone_from(&self.creds.groups);
    }

    /// Whether `cap` is in this task's effective set.
    pub fn capable(&self, cap: u32) -> bool {
        self.creds.capable(cap)
    }

    /// Records this task's shared state where /proc finds it.
    pub fn publish_info(&self) {
        let mut p = self.proc_.state();
        p.info.mm = Arc::downgrade(&self.mm);
        p.info.fds = Arc::downgrade(&self.fds);
        p.info.fs = Arc::downgrade(&self.fs);
        p.info.exe = self.exe.clone();
        if self.tid() == self.pid() {
            p.info.comm = String::from_utf8_lossy(&self.comm).into_owned();
        }
    }

    fn run(&mut self) -> Result<ExitStatus, platform::Error> {
        set_current(self.pid(), self.tid());
        self.kernel.fs.enter_thread();
        loop {
            if self.traced() {
                self.ptrace_take_interrupt();
            }
            if let Some(status) = self.deliver_signals() {
                return Ok(status);
            }
            let watch = if self.traced() {
                self.ptrace_watch_arm()
            } else {
                None
            };
            self.kernel.cpu_throttle.pass();
            let space = self.mm().address_space();
            self.thread.set_in_guest(true);
            let event = self.ctx.switch(space.as_ref(), &mut self.regs);
            self.thread.set_in_guest(false);
            let event = event?;
            drop(space);
            if let Some(w) = watch {
                if self.ptrace_watch_check(w, &event) {
                    continue;
                }
            }
            match event {
                Event::Syscall => {
                    // (a tracer reads the guest's own code)
                    if self.regs.rip != self.patch_checked && !self.traced() {
                        self.patch_checked = self.regs.rip;
                        self.mm()
                            .patch_syscall_site(self.regs.rip, self.regs.orig_rax);
                    }
                    if let Some(status) = self.syscall() {
                        return Ok(status);
                    }
                }
                Event::Fault {
                    signo,
                    code,
                    addr,
                    access,
                } => {
                    let (fix, bus) = {
                        let mut mm = self.mm();
                        (mm.handle_fault(addr, access), mm.fault_signal(addr))
                    };
                    // A stale fault is run again once: the same fault at
                    // the same place twice is the guest's.
                    let at = (addr, self.regs.rip);
                    let handled = match fix {
                        FaultFix::Copied => true,
                        FaultFix::Stale => self.stale_fault.replace(at) != Some(at),
                        FaultFix::None => false,
                    };
                    if fix != FaultFix::Stale {
                        self.stale_fault = None;
                    }
                    if !handled {
                        tracing::debug!(
                            "guest fault at {addr:#x} (signal {signo}), rip {:#x}",
                            self.regs.rip
                        );
                        match bus {
                            // BUS_ADRERR: past the end of the mapped file.
                            Some(sig) => self.force_signal(sig, fault_info(sig, 2, addr)),
                            None => self.force_signal(signo, fault_info(signo, code, addr)),
                        }
                    }
                }
                Event::Signal { signo, code, addr } => {
                    let patched = if signo == SIGILL {
                        self.mm().patched_site_fault(self.regs.rip)
                    } else {
                        None
                    };
                    match patched {
                        Some(PatchedSiteFault::Rerun) => {}
                        Some(PatchedSiteFault::Syscall) => {
                            // What the old `syscall` instruction would have
                            // done (see `platform::write_syscall_patch`).
                            self.regs.orig_rax = self.regs.rax;
                            self.regs.rip += 2;
                            self.regs.rcx = self.regs.rip;
                            self.regs.r11 = self.regs.eflags;
                            if let Some(status) = self.syscall() {
                                return Ok(status);
                            }
                        }
                        None => {
                            tracing::debug!("guest signal {signo} at rip {:#x}", self.regs.rip);
                            self.force_signal(signo, fault_info(signo, code, addr));
                        }
                    }
                }
                Event::Interrupted => {}
            }
        }
    }

    /// Answers the system call the registers describe; `Some` when the
    /// task is to exit.
    fn syscall(&mut self) -> Option<ExitStatus> {
        let stops = self
            .thread
            .ptrace_flags
            .load(std::sync::atomic::Ordering::Relaxed)
            & crate::kernel::ptrace::SYSCALL_STOPS
            != 0;
        if stops {
            // What a tracer sees at syscall-enter-stop; it may change the
            // call, or skip it with number -1.
            self.regs.rax = Errno::ENOSYS.as_return();
            self.ptrace_syscall_stop(false);
            if self.regs.orig_rax == u64::MAX {
                self.ptrace_syscall_stop(true);
                return self.proc_.state().group_exit;
            }
        }
        let nr = self.regs.orig_rax;
        let args = self.regs.syscall_args();
        // The table lives above the kernel; boot hands it over.
        let dispatch = self.kernel.syscalls;
        let ret = dispatch(self, nr, &args);
        if let Some(status) = self.exit {
            return Some(status);
        }
        self.regs.rax = match ret {
            Ok(v) => v,
            Err(e) => {
                if e.is_restart() {
                    self.restart = Some(e);
                } else if e == Errno::EINTR
                    && CHECKPOINT_ASKED.load(std::sync::atomic::Ordering::Relaxed)
                {
                    // Ended by the save, not a signal: it restarts unless a
                    // handler runs (a sleep starts over, no shorter).
                    self.restart = Some(Errno::ERESTARTNOHAND);
                }
                e.as_return()
            }
        };
        if stops && self.traced() {
            self.ptrace_syscall_stop(true);
        }
        None
    }

    /// Delivers a synchronous signal caused by the guest's own execution:
    /// if it is blocked or ignored, Linux resets it to the default action
    /// (so the process dies rather than loop on the fault).
    pub fn force_signal(&mut self, sig: i32, info: SigInfo) {
        let mut p = self.proc_.state();
        let mut t = self.thread.state();
        let idx = sig as usize - 1;
        if t.mask & bit(sig) != 0 || p.actions[idx].handler == SIG_IGN {
            p.actions[idx] = KSigaction::new_zeroed();
            t.mask &= !bit(sig);
        }
        // A fault init does not handle kills even init (Linux's
        // force_sig_info_to_task() clears SIGNAL_UNKILLABLE).
        if p.actions[idx].handler == SIG_DFL {
            p.unkillable = false;
        }
        t.pending.enqueue(sig, info);
    }

    fn restart_syscall(&mut self) {
        self.regs.rip -= 2;
        self.regs.rax = self.regs.orig_rax;
    }

    /// Acts on pending signals before the guest runs again; `Some` when the
    /// task must end.
    fn deliver_signals(&mut self) -> Option<ExitStatus> {
        loop {
            let mut p = self.proc_.state();
            if let Some(status) = p.group_exit {
                return Some(status);
            }
            if p.stopped.is_some() {
                drop(p);
                self.wait_while_stopped();
                continue;
            }
            let mut t = self.thread.state();
            if t.exit_now {
                return Some(ExitStatus::Code(0));
            }
            let deliverable = (t.pending.bits | p.pending.bits) & !t.mask;
            if deliverable == 0 {
                if let Some(mask) = self.saved_mask.take() {
                    t.mask = mask & !UNBLOCKABLE;
                }
                drop(t);
                drop(p);
                if self.restart.take().is_some() {
                    // No handler ran: every restart code restarts.
                    self.restart_syscall();
                }
                if CHECKPOINT_ASKED.load(std::sync::atomic::Ordering::Relaxed) {
                    // A boundary: guest code runs next, nothing to take.
                    if let Some(save) = self.kernel.checkpoint.save {
                        save(self);
                    }
                }
                return None;
            }
            // Synchronous faults first, then the lowest number, as Linux does.
            let sync = deliverable
                & (bit(SIGSEGV)
                    | bit(SIGBUS)
                    | bit(SIGILL)
                    | bit(SIGFPE)
                    | bit(SIGTRAP)
                    | bit(SIGSYS));
            let pick = if sync != 0 { sync } else { deliverable };
            let sig = pick.trailing_zeros() as i32 + 1;
            let mut info = if t.pending.has(sig) {
                t.pending.dequeue(sig)
            } else {
                p.pending.dequeue(sig)
            };
            let mut sig = sig;
            if self
                .thread
                .ptrace_flags
                .load(std::sync::atomic::Ordering::Relaxed)
                != 0
            {
                // Signal-delivery-stop: the tracer may suppress the signal
                // or deliver another.
                drop(t);
                drop(p);
                let stop = crate::kernel::ptrace::stop_status(sig);
                let Some(r) = self.ptrace_stop(crate::kernel::ptrace::StopKind::Signal, stop, info)
                else {
                    continue;
                };
                if r.sig == 0 || r.sig > 64 {
                    continue;
                }
                if r.sig != sig {
                    info = user_info(r.sig, 0, 0, si::USER);
                } else if let Some(l) = self.thread.state().ptrace.as_deref() {
                    info = l.siginfo;
                }
                sig = r.sig;
                p = self.proc_.state();
                t = self.thread.state();
                if t.mask & bit(sig) != 0 {
                    t.pending.enqueue(sig, info);
                    continue;
                }
            }
            let action = p.actions[sig as usize - 1];
            match action.handler {
                SIG_IGN => continue,
                SIG_DFL => {
                    // Init drops what it does not handle at delivery too
                    // (a signal that was blocked when sent); SIGSTOP here
                    // came from outside (Linux's get_signal()).
                    if ignored_by_default(sig) || (p.unkillable && !kernel_only(sig)) {
                        continue;
                    }
                    if is_stop(sig) && self.traced() {
                        // A traced task's group-stop is a stop its tracer
                        // ends.
                        drop(t);
                        drop(p);
                        let seized = self.ptrace_options().is_some_and(|(_, s, _)| s);
                        let status = if seized {
                            crate::kernel::ptrace::stop_status(
                                sig | ((crate::kernel::ptrace::event::STOP as i32) << 8),
                            )
                        } else {
                            crate::kernel::ptrace::stop_status(sig)
                        };
                        self.ptrace_stop(crate::kernel::ptrace::StopKind::Group, status, info);
                        continue;
                    }
                    if is_stop(sig) {
                        let pgid = p.pgid;
                        drop(t);
                        drop(p);
                        // Job-control stops do nothing in an orphaned
                        // process group (no one is left to continue it);
                        // SIGSTOP always stops (signal(7), Linux's
                        // get_signal()).
                        if sig != SIGSTOP && self.kernel.pgrp_orphaned(pgid) {
                            continue;
                        }
                        let mut p = self.proc_.state();
                        if p.group_exit.is_some() {
                            continue;
                        }
                        p.stopped = Some(sig);
                        p.wait_report = Some(Some(sig));
                        drop(p);
                        self.proc_.notify_parent(&self.kernel, si::CLD_STOPPED, sig);
                        self.proc_.kick_all(&self.kernel);
                        continue;
                    }
                    drop(t);
                    drop(p);
                    if dumps_core(sig) {
                        self.dump_core(&info);
                    }
                    let status = ExitStatus::Signal(sig);
                    self.proc_.group_exit(&self.kernel, status);
                    return Some(status);
                }
                handler => {
                    let old_mask = self.saved_mask.take().unwrap_or(t.mask);
                    let mut new_mask = t.mask | action.mask;
                    if action.flags & sa::NODEFER == 0 {
                        new_mask |= bit(sig);
                    }
                    if action.flags & sa::RESETHAND != 0 {
                        // One-shot: back to the default action; the flags
                        // and mask stay as they were.
                        p.actions[sig as usize - 1].handler = SIG_DFL;
                    }
                    t.mask = new_mask & !UNBLOCKABLE;
                    drop(t);
                    drop(p);
                    if let Some(e) = self.restart.take() {
                        if e == Errno::ERESTARTNOINTR
                            || (e == Errno::ERESTARTSYS && action.flags & sa::RESTART != 0)
                        {
                            self.restart_syscall();
                        } else {
                            self.regs.rax = Errno::EINTR.as_return();
                        }
                    }
                    if self
                        .push_frame(sig, handler, &action, &info, old_mask)
                        .is_err()
                    {
                        let status = ExitStatus::Signal(SIGSEGV);
                        self.proc_.group_exit(&self.kernel, status);
                        return Some(status);
                    }
                    return None;
                }
            }
        }
    }

    /// Writes the process's core file for the fatal signal `info`, when
    /// `RLIMIT_CORE` leaves room for one and the process is dumpable.
    fn dump_core(&mut self, info: &SigInfo) {
        let (limit, dumpable) = {
            let p = self.proc_.state();
            (p.rlimits[abi::rlimit::RLIMIT_CORE as usize].cur, p.dumpable)
        };
        // Linux's minimum: one page.
        if limit < 4096 || !dumpable {
            return;
        }
        let image = crate::kernel::coredump::image(self, info, limit);
        if let Err(e) = (self.kernel.write_core)(self, &image) {
            tracing::debug!("no core file: {e:?}");
        }
    }

    /// Sleeps while the process is stopped: `SIGCONT` and `SIGKILL` wake
    /// every thread ([`Process::kick_all`]).
    fn wait_while_stopped(&self) {
        let w = &self.thread.waiter;
        loop {
            w.prepare();
            {
                let p = self.proc_.state();
                if p.stopped.is_none() || p.group_exit.is_some() {
                    return;
                }
            }
            w.sleep(None);
        }
    }

    /// Builds a Linux x86-64 signal frame on the guest stack and points the
    /// registers at the handler.
    fn push_frame(
        &mut self,
        sig: i32,
        handler: u64,
        action: &KSigaction,
        info: &SigInfo,
        old_mask: u64,
    ) -> Result<(), Errno> {
        let altstack = self.altstack;
        if action.flags & sa::RESTORER == 0 {
            // x86-64 has no default trampoline: a handler without a restorer
            // cannot return, and Linux refuses to deliver (SIGSEGV).
            return Err(Errno::EFAULT);
        }
        let rsp = self.regs.rsp;
        let on_alt = altstack.flags & SS_DISABLE == 0
            && rsp > altstack.sp
            && rsp <= altstack.sp + altstack.size;
        let mut sp = rsp - 128; // the red zone below the interrupted stack pointer
        let mut stack = altstack;
        if action.flags & sa::ONSTACK != 0 && altstack.flags & SS_DISABLE == 0 && !on_alt {
            sp = altstack.sp + altstack.size;
            stack.flags = SS_ONSTACK;
        } else if on_alt {
            stack.flags = SS_ONSTACK;
        }
        let fp = self.ctx.fpstate().ok();
        let mut fp_addr = 0;
        if let Some(fp) = &fp {
            sp = (sp - fp.len() as u64) & !63;
            self.mm().copy_out(sp, fp)?;
            fp_addr = sp;
        }
        let frame = ((sp - FRAME_SIZE) & !15) - 8;
        let r = &self.regs;
        let mc = SigContext {
            r8: r.r8,
            r9: r.r9,
            r10: r.r10,
            r11: r.r11,
            r12: r.r12,
            r13: r.r13,
            r14: r.r14,
            r15: r.r15,
            rdi: r.rdi,
            rsi: r.rsi,
            rbp: r.rbp,
            rbx: r.rbx,
            rdx: r.rdx,
            rax: r.rax,
            rcx: r.rcx,
            rsp: r.rsp,
            rip: r.rip,
            eflags: r.eflags,
            cs: r.cs as u16,
            gs: 0,
            fs: 0,
            ss: r.ss as u16,
            err: 0,
            trapno: if matches!(sig, SIGSEGV | SIGBUS) {
                14
            } else {
                0
            },
            oldmask: old_mask,
            cr2: if matches!(sig, SIGSEGV | SIGBUS) {
                info.fields[0]
            } else {
                0
            },
            fpstate: fp_addr,
            reserved: [0; 8],
        };
        let uc = UContext {
            flags: 0x6, // UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS
            link: 0,
            stack,
            mcontext: mc,
            sigmask: old_mask,
        };
        {
            let mm = self.mm();
            mm.write_obj(frame, &action.restorer)?;
            mm.write_obj(frame + 8, &uc)?;
            mm.write_obj(frame + 8 + 304, info)?;
        }
        let regs = &mut self.regs;
        regs.rsp = frame;
        regs.rip = handler;
        regs.rdi = sig as u64;
        regs.rsi = frame + 8 + 304;
        regs.rdx = frame + 8;
        regs.rax = 0;
        regs.eflags &= !(0x400 | 0x100 | 0x10000); // DF, TF, RF
        regs.orig_rax = u64::MAX;
        Ok(())
    }

    /// `rt_sigreturn`: restores what [`Task::push_frame`] saved.
    pub fn sigreturn(&mut self) -> Result<u64, Errno> {
        let uc: UContext = self.mm().read_obj(self.regs.rsp)?;
        let mc = uc.mcontext;
        let r = &mut self.regs;
        r.r8 = mc.r8;
        r.r9 = mc.r9;
        r.r10 = mc.r10;
        r.r11 = mc.r11;
        r.r12 = mc.r12;
        r.r13 = mc.r13;
        r.r14 = mc.r14;
        r.r15 = mc.r15;
        r.rdi = mc.rdi;
        r.rsi = mc.rsi;
        r.rbp = mc.rbp;
        r.rbx = mc.rbx;
        r.rdx = mc.rdx;
        r.rax = mc.rax;
        r.rcx = mc.rcx;
        r.rsp = mc.rsp;
        r.rip = mc.rip;
        // Only the flags user code may change (Linux's FIX_EFLAGS).
        const FIX_EFLAGS: u64 = 0x0004_0dd5 | 0x0000_0100 | 0x0020_0000 | 0x0001_0000;
        r.eflags = (r.eflags & !FIX_EFLAGS) | (mc.eflags & FIX_EFLAGS);
        r.orig_rax = u64::MAX;
        if mc.fpstate != 0 {
            let len = self.ctx.fpstate().map(|f| f.len()).unwrap_or(0);
            if len > 0 {
                let mut buf = vec![0u8; len];
                self.mm().copy_in(mc.fpstate, &mut buf)?;
                // A malformed FP image from the guest is refused by the host.
                if self.ctx.set_fpstate(&buf).is_err() {
                    return Err(Errno::EFAULT);
                }
            }
        }
        self.set_sigmask(uc.sigmask);
        let ss = uc.stack;
        if ss.flags & SS_DISABLE != 0 || ss.size >= MINSIGSTKSZ {
            self.altstack = StackT {
                sp: ss.sp,
                flags: ss.flags & SS_DISABLE,
                pad: 0,
                size: ss.size,
            };
        }
        Ok(self.regs.rax)
    }

    /// Ends this thread with `status` (the caller returns right after).
    pub fn exit(&mut self, status: ExitStatus) -> Result<u64, Errno> {
        self.exit = Some(status);
        Ok(0)
    }

    /// Ends the whole thread group with `status` (`exit_group`).
    pub fn exit_group(&mut self, status: ExitStatus) -> Result<u64, Errno> {
        self.proc_.group_exit(&self.kernel, status);
        self.exit = Some(status);
        Ok(0)
    }

    /// Leaves the thread group: `CLONE_CHILD_CLEARTID`, robust futexes,
    /// and, for the last thread, the process's exit. Returns the status the
    /// process ended with (or this thread's, if others live on).
    /// Raises `SIGPIPE` at this thread, as a write to a pipe or stream
    /// socket with no reader does (unless `MSG_NOSIGNAL`).
    pub fn raise_sigpipe(&self) {
        self.thread
            .send_signal(&self.kernel, SIGPIPE, user_info(SIGPIPE, 0, 0, si::KERNEL));
    }

    /// Guest CPU time of the current address space so far.
    pub fn address_space_cpu(&self) -> std::time::Duration {
        self.mm().address_space().cpu_time().unwrap_or_default()
    }

    /// CPU time of the process so far: the guest's in its address spaces,
    /// and the Sentry's for exited threads and the caller.
    pub fn cpu_times(&self) -> CpuTimes {
        let space = self.address_space_cpu();
        let p = self.proc_.state();
        CpuTimes {
            user: p.cpu.user + space.saturating_sub(p.as_cpu_start),
            sys: p.cpu.sys + self.sentry_cpu_of_this_thread(),
        }
    }

    /// The Sentry's CPU time for this thread: its host thread's, less the
    /// guest code that ran there (on a platform that runs it so).
    fn sentry_cpu_of_this_thread(&self) -> std::time::Duration {
        host_thread_cpu().saturating_sub(self.ctx.guest_cpu_of_this_thread())
    }

    /// Moves the current address space's CPU time into the process's total
    /// (before it leaves that address space).
    pub fn settle_address_space_cpu(&self) {
        let space = self.address_space_cpu();
        let mut p = self.proc_.state();
        let used = space.saturating_sub(p.as_cpu_start);
        p.cpu.user += used;
        p.as_cpu_start = space;
    }

    fn exit_thread(&mut self, status: ExitStatus) -> ExitStatus {
        if self.traced() {
            let s = self.proc_.state().group_exit.unwrap_or(status);
            self.ptrace_event(crate::kernel::ptrace::event::EXIT, s.wait_status() as u64);
        }
        self.thread.set_interrupter(None);
        // (before its tid is cleared: a joiner may act at once)
        self.thread.state().exiting = true;
        let sys = self.sentry_cpu_of_this_thread();
        self.proc_.state().cpu.sys += sys;
        crate::kernel::futex::exit_robust_list(self);
        let space = self.address_space_cpu();
        let (last, group_status) = {
            let mut p = self.proc_.state();
            let me = self.thread.tid;
            p.threads.retain(|t| t.tid != me);
            if p.threads.is_empty() {
                let used = space.saturating_sub(p.as_cpu_start);
                p.cpu.user += used;
                p.as_cpu_start = space;
            }
            (p.threads.is_empty(), p.group_exit.unwrap_or(status))
        };
        // A joiner woken here finds this thread gone from its group and
        // address space, so its `unshare(CLONE_VM | CLONE_THREAD)` works.
        self.mm().drop_user();
        if self.clear_child_tid != 0 {
            let addr = self.clear_child_tid;
            if self.mm().write_obj(addr, &0u32).is_ok() {
                let _ = crate::kernel::futex::wake(self, addr, 1, u32::MAX);
            }
        }
        self.kernel.procs().threads.remove(&self.thread.tid);
        self.ptrace_exit(
            group_status.wait_status(),
            matches!(group_status, ExitStatus::Signal(_)),
        );
        if last {
            self.ptrace_release_tracees();
            self.exit_process(group_status);
        } else {
            // `execve` in another thread waits for this one to go.
            self.proc_.waiters.notify();
        }
        group_status
    }

    /// Turns the process into a zombie: closes its files, hands its
    /// children to init, and tells its parent.
    fn exit_process(&mut self, status: ExitStatus) {
        // Drop this process's references: files close, and the address
        // space goes unless another process shares it (vfork).
        self.fds = Arc::new(Mutex::new(FdTable::default()));
        // The address space itself lives until this host thread ends, which
        // may be after the parent reaps us; what it pins in tmpfs files
        // (F_SEAL_WRITE's "no writable mapping") must go before the parent
        // hears of the exit, as Linux's exit_mm() comes before the notice.
        // So do its System V shared memory attachments.
        if Arc::strong_count(&self.mm) == 1 {
            let mut mm = self.mm();
            mm.drop_file_pins();
            crate::kernel::ipc::shm::detach_all(&self.kernel.sysv_shm, &mut mm);
        }
        let me = self.pid();
        self.kernel
            .locks
            .release_records(None, crate::vfs::lock::Owner::Process(me));
        // Its semaphore adjustments (SEM_UNDO) are applied.
        crate::kernel::ipc::sem::exit_process(&self.kernel.sysv_sem, me);
        let kernel = self.kernel.clone();
        // The controlling process's exit hangs its terminal up for the
        // foreground group (disassociate_ctty()).
        let (ctty, old_pgrp) = {
            let mut st = self.proc_.state();
            let leader = st.sid == me;
            let old = std::mem::take(&mut st.tty_old_pgrp);
            (st.ctty.take().filter(|_| leader), old)
        };
        if let Some(tty) = ctty {
            tty.leader_exit(&kernel);
        } else if old_pgrp != 0 {
            kernel.signal_pgrp(old_pgrp, SIGHUP);
            kernel.signal_pgrp(old_pgrp, SIGCONT);
        }
        let (ppid, exit_signal) = {
            let mut st = self.proc_.state();
            for id in st.itimers.iter_mut().filter_map(Option::take) {
                kernel.timers.delete(id);
            }
            for (_, (id, _)) in std::mem::take(&mut st.posix_timers) {
                kernel.timers.delete(id);
            }
            st.vfork_done = true;
            (st.ppid, st.exit_signal)
        };
        let (my_pgid, my_sid) = {
            let st = self.proc_.state();
            (st.pgid, st.sid)
        };
        // Process groups this exit may orphan: our own when our parent
        // linked it to the session, and our children's (their parent was
        // the link).
        let mut orphan_candidates = Vec::new();
        let mut reap_now = false;
        let mut orphan_zombies = false;
        let mut orphans_to_signal = Vec::new();
        let mut reaper = 1;
        let mut told_parent = None;
        {
            let mut procs = kernel.procs();
            // Orphans go to the nearest live subreaper ancestor, else init.
            let mut up = ppid;
            for _ in 0..procs.map.len() {
                let Some(a) = procs.map.get(&up) else { break };
                let st = a.state();
                if st.child_subreaper && st.exit.is_none() {
                    reaper = up;
                    break;
                }
                up = st.ppid;
            }
            for p in procs.map.values() {
                if p.pid == me {
                    continue;
                }
                let mut st = p.state();
                if st.ppid == me {
                    if st.exit.is_none() && st.pgid != my_pgid && st.sid == my_sid {
                        orphan_candidates.push(st.pgid);
                    }
                    st.ppid = reaper;
                    orphan_zombies |= st.exit.is_some();
                    if st.pdeathsig != 0 && st.exit.is_none() {
                        orphans_to_signal.push((p.clone(), st.pdeathsig));
                    }
                }
            }
            if let Some(parent) = procs.map.get(&ppid) {
                let pst = parent.state();
                if pst.pgid != my_pgid && pst.sid == my_sid {
                    orphan_candidates.push(my_pgid);
                }
                let a = pst.actions[SIGCHLD as usize - 1];
                reap_now = a.handler == SIG_IGN || a.flags & sa::NOCLDWAIT != 0;
            }
            // Becoming a zombie and, for a parent that ignores SIGCHLD,
            // going at once are one step under the table's lock, which a
            // waiting parent holds while it looks: it never gets a child
            // it should not (Linux decides both in exit_notify() under
            // tasklist_lock).
            self.proc_.state().exit = Some(status);
            if reap_now {
                procs.map.remove(&me);
            }
            // The parent's exit signal is queued in the same step, as
            // Linux's do_notify_parent() comes under tasklist_lock with
            // the zombie state: a parent that reaped us cannot then block
            // SIGCHLD and still find ours pending.
            if !reap_now && exit_signal != 0 && plain_signal(exit_signal) {
                if let Some(parent) = procs.map.get(&ppid) {
                    let (code, st) = exit_code(status);
                    parent.queue_quietly(exit_signal, chld_info(me, code, st));
                    told_parent = Some(parent.clone());
                }
            }
        }
        if let Some(parent) = told_parent.take() {
            parent.kick_all(&kernel);
        }
        kernel.hang_up_orphaned(&orphan_candidates);
        for (child, sig) in orphans_to_signal {
            child.send_signal(&kernel, sig, user_info(sig, me, 0, si::KERNEL));
        }
        if reap_now {
            kernel.note_reaped_cpu(&self.proc_);
        } else if exit_signal != 0 && !plain_signal(exit_signal) {
            // (an exit signal of a kind that acts on the whole parent,
            // which clone(2) lets a program choose)
            if let Some(parent) = kernel.process(ppid) {
                let (code, st) = exit_code(status);
                parent.send_signal(&kernel, exit_signal, chld_info(me, code, st));
            }
        }
        if orphan_zombies {
            if let Some(init) = kernel.process(reaper) {
                init.send_signal(&kernel, SIGCHLD, chld_info(0, si::CLD_EXITED, 0));
                init.wait_chld.notify();
            }
        }
        // The parent's wait (the parent now: ours may have exited
        // meanwhile), and whoever waits for this process's end (a pidfd, a
        // `vfork` parent, the runtime).
        let ppid_now = self.proc_.state().ppid;
        if let Some(parent) = kernel.process(ppid_now) {
            parent.wait_chld.notify();
        }
        self.proc_.waiters.notify();
    }
}

/// Whether `sig` is queued like any other (not `SIGKILL`, `SIGCONT` or a
/// stop signal, which act on the whole process when sent).
fn plain_signal(sig: i32) -> bool {
    sig != SIGKILL && sig != SIGCONT && !is_stop(sig)
}

/// `si_code` and `si_status` of a child's exit with `status`.
fn exit_code(status: ExitStatus) -> (i32, i32) {
    match status {
        ExitStatus::Code(c) => (si::CLD_EXITED, c & 0xff),
        ExitStatus::Signal(s) => (
            if dumps_core(s) {
                si::CLD_DUMPED
            } else {
                si::CLD_KILLED
            },
            s,
        ),
    }
}

thread_local! {
    /// The (pid, tid) of the task this host thread runs, for `/proc/self`.
    static CURRENT: std::cell::Cell<(i32, i32)> = const { std::cell::Cell::new((0, 0)) };
}

/// Set while a save of the sandbox is asked for and not yet made: every
/// blocking call gives up (and restarts), so that its task comes to a
/// boundary. (One Sentry per process: one sandbox to save.)
pub static CHECKPOINT_ASKED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Records which guest task the calling host thread runs.
pub fn set_current(pid: i32, tid: i32) {
    CURRENT.with(|c| c.set((pid, tid)));
}

/// The (pid, tid) of the task the calling host thread runs.
pub fn current() -> (i32, i32) {
    CURRENT.with(std::cell::Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(unkillable: bool) -> ProcessState {
        let mut st = ProcessState::new(0, 1, 1, SIGCHLD, [KSigaction::new_zeroed(); 64]);
        st.unkillable = unkillable;
        st
    }

    #[test]
    fn init_drops_what_it_does_not_handle() {
        let mut init = state(true);
        // From inside: every default disposition, SIGKILL and SIGSTOP too.
        for sig in [SIGTERM, SIGINT, SIGKILL, SIGSTOP, SIGUSR1] {
            assert!(init.init_drops(sig, false), "{sig} from inside");
        }
        // From outside: SIGKILL and SIGSTOP arrive, the rest does not.
        assert!(!init.init_drops(SIGKILL, true));
        assert!(!init.init_drops(SIGSTOP, true));
        assert!(init.init_drops(SIGTERM, true));
        // A handled signal arrives from anywhere.
        init.actions[SIGTERM as usize - 1].handler = 0x1000;
        assert!(!init.init_drops(SIGTERM, false));
        assert!(!init.init_drops(SIGTERM, true));
        // Another process drops nothing for being what it is.
        let other = state(false);
        for sig in [SIGTERM, SIGKILL, SIGSTOP] {
            assert!(!other.init_drops(sig, false));
        }
    }
}
