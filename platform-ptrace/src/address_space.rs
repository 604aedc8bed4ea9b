//! One guest address space = one stub process. Every host thread that runs
//! guest code in it, or changes its mappings, gets a *stub thread* of its
//! own in that process, traced by that host thread (ptrace binds a tracee
//! to one tracer thread). The stub's first thread belongs to the control
//! thread ([`crate::control`]), which makes the others. Mapping changes are
//! system calls injected through the calling thread's stub thread.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};

use platform::{AddressSpace, Error, Prot, Regs, Result, PAGE_SIZE};

use crate::control::{Control, Started};
use crate::fpu;
use crate::stub::{StubImage, TrapConfig, SLOTS_BASE, STUB_BASE, STUB_BASEFD, STUB_MEMFD};
use crate::sys::{self, WaitStatus};
use crate::tracee::{event_of, Tracee};
use crate::trap::{Runner, SlotRegion};

/// `PTRACE_EVENT_STOP`: the stop `PTRACE_INTERRUPT` produces.
const EVENT_STOP: i32 = 128;

/// Options of every seized stub thread. `EXITKILL`: if the tracer thread
/// ends while still tracing it, the kernel kills the thread — and with it
/// the whole stub process (a SIGKILL is process-wide). That is the price of
/// never letting guest code run untraced; the thread-exit hook below makes
/// it happen only when a host thread dies without unwinding.
const SEIZE_OPTIONS: libc::c_int = libc::PTRACE_O_EXITKILL | libc::PTRACE_O_TRACESYSGOOD;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A guest address space backed by a stub process; see the module docs.
#[derive(Debug)]
pub struct PtraceAddressSpace {
    shared: Arc<Shared>,
}

/// The part of an address space that stub threads' owners (contexts, the
/// thread-exit hook) may refer to weakly.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Unique for the life of the process (pointers may be reused).
    pub(crate) id: u64,
    pid: i32,
    pidfd: OwnedFd,
    /// Registers of the ready stub: the template for injected calls.
    template: Regs,
    pin: bool,
    /// Stub threads by their tracer's host tid.
    threads: Mutex<HashMap<i32, Arc<StubThread>>>,
    control: Control,
    /// A stub thread made with the stub, for the first host thread.
    parked: Mutex<Option<i32>>,
    /// Set when the address space is being torn down.
    dead: AtomicBool,
    /// Seccomp-trap mode: the handler's configuration and the slot region.
    trap: Option<(TrapConfig, Arc<SlotRegion>)>,
    /// Guest mappings end here.
    limit: u64,
    /// The image, for its patched-site tables.
    image: Arc<StubImage>,
}

/// One stub thread and the host thread that traces it.
#[derive(Debug)]
pub(crate) struct StubThread {
    /// Host tid of the stub thread.
    pub(crate) tid: i32,
    /// The stub process (for thread-directed signals).
    pub(crate) tgid: i32,
    /// The only host thread allowed to issue ptrace requests to it.
    pub(crate) tracer: i32,
    /// The CPU tracer and stub threads are pinned to, if any.
    cpu: Option<usize>,
    state: Mutex<Tracee>,
}

impl StubThread {
    /// The ptrace state, for its tracer only.
    pub(crate) fn lock(&self) -> Result<MutexGuard<'_, Tracee>> {
        if sys::gettid() != self.tracer {
            return Err(Error::Misuse(
                "stub thread used from a host thread other than its tracer",
            ));
        }
        Ok(self.lock_any())
    }

    fn lock_any(&self) -> MutexGuard<'_, Tracee> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Stub threads the current host thread traces, released when the thread
/// ends (its Rust thread-local destructors run before the kernel thread
/// exits, so `EXITKILL` never fires for a thread that ends normally or by
/// a panic that unwinds).
struct OwnedStubThreads(RefCell<Vec<(Weak<Shared>, Weak<StubThread>)>>);

impl Drop for OwnedStubThreads {
    fn drop(&mut self) {
        for (shared, thread) in self.0.take() {
            if let (Some(shared), Some(thread)) = (shared.upgrade(), thread.upgrade()) {
                shared.release(&thread);
            }
        }
    }
}

thread_local! {
    static OWNED: OwnedStubThreads = const { OwnedStubThreads(RefCell::new(Vec::new())) };
    static CLAIM: CpuClaim = const { CpuClaim(Cell::new(None)) };
}

/// The CPUs guest code may run on: those the process could use when the
/// first platform was made, before any of its threads was pinned.
pub(crate) static ALLOWED_CPUS: OnceLock<Vec<usize>> = OnceLock::new();
/// How many live host threads are pinned to each CPU (by CPU number).
static PINNED: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// The CPU the current host thread was pinned to; given back when the
/// thread ends.
struct CpuClaim(Cell<Option<usize>>);

impl Drop for CpuClaim {
    fn drop(&mut self) {
        if let Some(cpu) = self.0.get() {
            let mut pinned = PINNED.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(n) = pinned.get_mut(cpu) {
                *n = n.saturating_sub(1);
            }
        }
    }
}

/// Pins the calling host thread to one CPU for the rest of its life (the
/// first time; later calls return that CPU): of the allowed CPUs, the one
/// the fewest live pinned threads share, and among those the one it runs
/// on. A new host thread inherits its creator's pin, so pinning each
/// where it runs would put every task of a sandbox on the first one's
/// CPU, and a guest's processes and threads could never run in parallel.
fn claim_cpu() -> Result<usize> {
    if let Ok(Some(cpu)) = CLAIM.try_with(|c| c.0.get()) {
        return Ok(cpu);
    }
    let Some(allowed) = ALLOWED_CPUS.get().filter(|a| !a.is_empty()) else {
        return sys::pin_to_current_cpu();
    };
    let here = sys::current_cpu()?;
    let mut pinned = PINNED.lock().unwrap_or_else(PoisonError::into_inner);
    let cpu = allowed
        .iter()
        .copied()
        .min_by_key(|&c| (pinned.get(c).copied().unwrap_or(0), c != here))
        .unwrap_or(here);
    if sys::set_affinity(0, cpu).is_err() {
        // The CPU went away (a cpuset changed): stay where we are.
        drop(pinned);
        return sys::pin_to_current_cpu();
    }
    if pinned.len() <= cpu {
        pinned.resize(cpu + 1, 0);
    }
    pinned[cpu] += 1;
    drop(pinned);
    let _ = CLAIM.try_with(|c| c.0.set(Some(cpu)));
    Ok(cpu)
}

/// A CPU for a runner to spin on while its Sentry thread is on `home`:
/// of the allowed CPUs but `home`, the one the fewest pinned threads share.
pub(crate) fn spin_cpu(home: usize) -> Option<usize> {
    let allowed = ALLOWED_CPUS.get()?;
    let pinned = PINNED.lock().unwrap_or_else(PoisonError::into_inner);
    allowed
        .iter()
        .copied()
        .filter(|&c| c != home)
        .min_by_key(|&c| (pinned.get(c).copied().unwrap_or(0), c))
}

impl Shared {
    /// The calling host thread's stub thread, created (and seized) if it
    /// has none yet.
    pub(crate) fn thread_for_caller(self: &Arc<Self>) -> Result<Arc<StubThread>> {
        let me = sys::gettid();
        if self.dead.load(Ordering::Acquire) {
            return Err(Error::StubDied("address space shut down".into()));
        }
        if let Some(t) = self.lock_threads().get(&me) {
            return Ok(t.clone());
        }
        let cpu = if self.pin {
            // Tracer and stub thread on one CPU: every ptrace stop becomes a
            // same-core hand-off.
            Some(claim_cpu()?)
        } else {
            None
        };
        let parked = self
            .parked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let tid = match parked {
            Some(tid) => tid,
            None => self.control.new_thread(cpu)?,
        };
        // Until this succeeds the new thread is untraced, blocked in the
        // park loop's `pause`; on failure it stays there until the stub ends.
        sys::seize(tid, SEIZE_OPTIONS)?;
        let thread = Arc::new(StubThread {
            tid,
            tgid: self.pid,
            tracer: me,
            cpu,
            state: Mutex::new(Tracee::new(tid, self.template)),
        });
        // Registered before anything else can fail: the thread is ours to
        // reap now.
        self.lock_threads().insert(me, thread.clone());
        let _ = OWNED.try_with(|o| {
            if let Ok(mut v) = o.0.try_borrow_mut() {
                v.retain(|(s, t)| s.strong_count() > 0 && t.strong_count() > 0);
                v.push((Arc::downgrade(self), Arc::downgrade(&thread)));
            }
        });
        let mut st = thread.lock()?;
        if let Err(e) = self.prepare(&mut st, cpu) {
            st.gone.get_or_insert(crate::tracee::Gone::Died(format!(
                "stub thread setup failed: {e}"
            )));
            return Err(e);
        }
        drop(st);
        tracing::debug!(pid = self.pid, tid, tracer = me, "new stub thread");
        Ok(thread)
    }

    /// Stops a freshly seized thread and readies it for switches.
    fn prepare(&self, st: &mut Tracee, cpu: Option<usize>) -> Result<()> {
        sys::interrupt(st.tid)?;
        loop {
            match st.wait()? {
                WaitStatus::Stopped(s) if event_of(s) == EVENT_STOP => break,
                WaitStatus::Stopped(_) => sys::cont(st.tid, 0)?,
                dead => {
                    return Err(Error::StubDied(format!(
                        "new stub thread: {}",
                        dead.describe()
                    )))
                }
            }
        }
        if let Some(cpu) = cpu {
            sys::set_affinity(st.tid, cpu)?;
        }
        fpu::reset(st.tid)?;
        // The thread stopped inside the park loop's `pause`, whose restart
        // the kernel would attempt on the next resume if the registers then
        // looked like an interrupted call. Run one harmless call (munmap of
        // nothing: EINVAL) so the thread rests at the trampoline's int3.
        match st.inject(
            libc::SYS_munmap,
            [STUB_BASE, 0, 0, 0, 0, 0],
            "munmap(probe)",
        ) {
            Ok(_) | Err(Error::Host { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Whether guest code runs on seccomp-trap runners.
    pub(crate) fn is_trap(&self) -> bool {
        self.trap.is_some()
    }

    /// The runner of `thread` (whose state `st` the caller holds locked),
    /// created on first use.
    pub(crate) fn runner<'a>(
        &self,
        thread: &StubThread,
        st: &'a mut Tracee,
    ) -> Result<&'a mut Runner> {
        let (config, region) = self
            .trap
            .as_ref()
            .ok_or(Error::Misuse("runner in SYSEMU mode"))?;
        if st.runner.is_none() {
            let cpu = thread.cpu;
            let runner = Runner::create(
                region,
                self.pid,
                thread.tid,
                self.template,
                *config,
                self.image
                    .fast()
                    .map(|_| crate::trap::FastIps::of(&self.image.layout())),
                cpu,
                |sp| {
                    let tid = self.control.new_runner(cpu, sp)?;
                    if let Some(cpu) = cpu {
                        sys::set_affinity(tid, cpu)?;
                    }
                    Ok(tid)
                },
            )?;
            tracing::debug!(pid = self.pid, tid = runner.tid, "new runner thread");
            st.runner = Some(runner);
        }
        st.runner.as_mut().ok_or(Error::Misuse("runner vanished"))
    }

    fn lock_threads(&self) -> MutexGuard<'_, HashMap<i32, Arc<StubThread>>> {
        self.threads.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes `thread` exit (the stub process lives on) if the caller is its
    /// tracer and the address space is not being torn down; otherwise
    /// leaves it to its tracer or to the end of the address space.
    pub(crate) fn release(&self, thread: &Arc<StubThread>) {
        if sys::gettid() != thread.tracer || self.dead.load(Ordering::Acquire) {
            return;
        }
        {
            let mut threads = self.lock_threads();
            match threads.get(&thread.tracer) {
                Some(t) if Arc::ptr_eq(t, thread) => threads.remove(&thread.tracer),
                // Already released, or drained by a teardown that reaps it.
                _ => return,
            };
        }
        if let Err(e) = thread.lock_any().exit_thread() {
            tracing::warn!(tid = thread.tid, error = %e, "stub thread did not exit cleanly");
        }
        let _ = OWNED.try_with(|o| {
            if let Ok(mut v) = o.0.try_borrow_mut() {
                v.retain(|(_, t)| !std::ptr::eq(t.as_ptr(), Arc::as_ptr(thread)));
            }
        });
    }

    /// Kills the stub (its threads are reaped by their tracers).
    pub(crate) fn kill_stub(&self) {
        if let Err(e) = sys::pidfd_send_signal(self.pidfd.as_raw_fd(), libc::SIGKILL) {
            tracing::debug!(pid = self.pid, error = %e, "cannot kill stub");
        }
    }

    /// Kills the stub and reaps every thread of it.
    fn shutdown(&self) {
        self.dead.store(true, Ordering::Release);
        // Through the pidfd: exact even if the pid were recycled.
        if let Err(e) = sys::pidfd_send_signal(self.pidfd.as_raw_fd(), libc::SIGKILL) {
            tracing::debug!(pid = self.pid, error = %e, "cannot kill stub");
        }
        // Any thread of the tracer's process may wait for a tracee; each
        // thread's lock keeps its own tracer (releasing it concurrently)
        // out of the way.
        let threads: Vec<_> = self.lock_threads().drain().map(|(_, t)| t).collect();
        let mut guards: Vec<_> = threads.iter().map(|t| t.lock_any()).collect();
        crate::tracee::reap_all(&mut guards, |g| &mut **g);
        // The first thread last: a thread group leader is reaped only once
        // it is alone.
        self.control.shutdown();
    }
}

/// A stub ready at its control thread that no address space uses yet
/// (made ahead of time by [`crate::spare::Spares`], or on demand).
#[derive(Debug)]
pub(crate) struct Prepared {
    control: Control,
    started: Started,
    trap: Option<(TrapConfig, Arc<SlotRegion>)>,
    /// A stub thread made ahead too, parked and untraced: the first host
    /// thread to use the address space seizes it.
    parked: Option<i32>,
}

impl Prepared {
    /// Starts the control thread, which forks and prepares a stub (see
    /// [`crate::stub`]); with `thread`, also a first stub thread.
    pub(crate) fn new(
        memfd: std::os::fd::BorrowedFd<'_>,
        image: &Arc<StubImage>,
        thread: bool,
    ) -> Result<Self> {
        let trap = match image.trap() {
            Some(config) => Some((config, Arc::new(SlotRegion::new()?))),
            None => None,
        };
        let slotfd = trap.as_ref().map(|(_, r)| r.fd());
        let (control, started) = Control::spawn(memfd, slotfd, image)?;
        let parked = if thread {
            Some(control.new_thread(None)?)
        } else {
            None
        };
        Ok(Prepared {
            control,
            started,
            trap,
            parked,
        })
    }

    /// The stub's pid.
    pub(crate) fn pid(&self) -> i32 {
        self.started.pid
    }

    /// Ends the stub: its control thread kills and reaps it.
    pub(crate) fn discard(self) {
        self.control.shutdown();
    }
}

impl PtraceAddressSpace {
    /// An address space on a prepared stub.
    pub(crate) fn from_prepared(prepared: Prepared, image: &Arc<StubImage>, pin: bool) -> Self {
        let Prepared {
            control,
            started,
            trap,
            parked,
        } = prepared;
        let limit = if image.fast().is_some() {
            crate::fast::FAST_CODE
        } else if trap.is_some() {
            SLOTS_BASE
        } else {
            STUB_BASE
        };
        PtraceAddressSpace {
            shared: Arc::new(Shared {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                pid: started.pid,
                pidfd: started.pidfd,
                template: started.template,
                pin,
                threads: Mutex::new(HashMap::new()),
                control,
                parked: Mutex::new(parked),
                dead: AtomicBool::new(false),
                trap,
                limit,
                image: image.clone(),
            }),
        }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The stub's host pid (for tests and diagnostics).
    pub fn stub_pid(&self) -> i32 {
        self.shared.pid
    }

    /// Host tid of the calling thread's stub thread, if it has one.
    pub fn stub_tid_of_current_thread(&self) -> Option<i32> {
        self.shared
            .lock_threads()
            .get(&sys::gettid())
            .map(|t| t.tid)
    }

    /// Lets the calling thread's stub thread go (it exits; the stub and
    /// the other threads live on). For a host thread that only edited this
    /// address space (e.g. set up a forked child's memory) and will not run
    /// it. Harmless if it has none; a later call makes a new one.
    pub fn release_current_thread(&self) {
        let t = self.shared.lock_threads().get(&sys::gettid()).cloned();
        if let Some(t) = t {
            self.shared.release(&t);
        }
    }

    /// Resumes the caller's stub thread *without* system call emulation
    /// (`PTRACE_CONT`) until it stops or dies: only for tests proving that
    /// the seccomp filter holds when tracing does not.
    #[doc(hidden)]
    pub fn run_untraced_for_test(&self, regs: &Regs) -> Result<UntracedOutcome> {
        let t = self.shared.thread_for_caller()?;
        let mut st = t.lock()?;
        Ok(match st.run_untraced(regs)? {
            WaitStatus::Stopped(s) => UntracedOutcome::Stopped(s),
            WaitStatus::Exited(c) => UntracedOutcome::Exited(c),
            WaitStatus::Signaled(s) => UntracedOutcome::Killed(s),
        })
    }

    /// Cost probe: one injected `mprotect` of nothing (length 0, a no-op),
    /// i.e. the whole injection round trip.
    #[doc(hidden)]
    pub fn inject_nop_for_bench(&self) -> Result<()> {
        let t = self.shared.thread_for_caller()?;
        let mut st = t.lock()?;
        st.inject(
            libc::SYS_mprotect,
            [0x1000, 0, 0, 0, 0, 0],
            "mprotect(probe)",
        )?;
        Ok(())
    }

    fn with_caller<T>(&self, f: impl FnOnce(&mut Tracee) -> Result<T>) -> Result<T> {
        let t = self.shared.thread_for_caller()?;
        let mut st = t.lock()?;
        f(&mut st)
    }
}

impl Drop for PtraceAddressSpace {
    fn drop(&mut self) {
        self.shared.shutdown();
    }
}

/// How an untraced run of the stub ended ([`PtraceAddressSpace::run_untraced_for_test`]).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UntracedOutcome {
    /// ptrace stop with this `WSTOPSIG`
    Stopped(i32),
    /// exited with this status
    Exited(i32),
    /// killed by this signal
    Killed(i32),
}

/// Guest ranges must be page aligned, non-empty and below the stub's pages
/// (the slot region in seccomp-trap mode, else the stub code).
fn check_range(addr: u64, len: u64, (low, limit): (u64, u64)) -> Result<()> {
    if !addr.is_multiple_of(PAGE_SIZE) || !len.is_multiple_of(PAGE_SIZE) || len == 0 {
        return Err(Error::Misuse("guest range not page aligned or empty"));
    }
    match addr.checked_add(len) {
        Some(end) if end <= limit && (addr >= low || end <= crate::fast::FAST_TABLE) => Ok(()),
        _ => Err(Error::Misuse("guest range reaches the stub's pages")),
    }
}

impl AddressSpace for PtraceAddressSpace {
    fn map(&self, addr: u64, len: u64, prot: Prot, file_offset: u64) -> Result<()> {
        check_range(addr, len, (self.min_user_address(), self.shared.limit))?;
        if !file_offset.is_multiple_of(PAGE_SIZE) {
            return Err(Error::Misuse("memory file offset not page aligned"));
        }
        let flags = (libc::MAP_SHARED | libc::MAP_FIXED) as u64;
        let (fd, offset) = match self.shared.image.base.get() {
            Some(b) if (b.window..b.window + b.len).contains(&file_offset) => {
                match b.file_offset(file_offset, len) {
                    Some(at) if !prot.write => (STUB_BASEFD, at),
                    _ => {
                        return Err(Error::Misuse(
                            "mapping past or writably into the image's window",
                        ))
                    }
                }
            }
            _ => (STUB_MEMFD, file_offset),
        };
        let args = [addr, len, prot.bits(), flags, fd as u64, offset];
        let got = self.with_caller(|t| t.inject(libc::SYS_mmap, args, "mmap in stub"))?;
        if got != addr {
            return Err(Error::StubDied(format!(
                "stub mmap returned {got:#x}, not {addr:#x}"
            )));
        }
        Ok(())
    }

    fn unmap(&self, addr: u64, len: u64) -> Result<()> {
        check_range(addr, len, (self.min_user_address(), self.shared.limit))?;
        self.with_caller(|t| {
            t.inject(libc::SYS_munmap, [addr, len, 0, 0, 0, 0], "munmap in stub")
        })?;
        Ok(())
    }

    fn protect(&self, addr: u64, len: u64, prot: Prot) -> Result<()> {
        check_range(addr, len, (self.min_user_address(), self.shared.limit))?;
        self.with_caller(|t| {
            t.inject(
                libc::SYS_mprotect,
                [addr, len, prot.bits(), 0, 0, 0],
                "mprotect in stub",
            )
        })?;
        Ok(())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn prepare_thread(&self) -> Result<()> {
        let thread = self.shared.thread_for_caller()?;
        if self.shared.is_trap() {
            let mut st = thread.lock()?;
            self.shared.runner(&thread, &mut st)?;
        }
        Ok(())
    }

    fn cpu_time(&self) -> Option<std::time::Duration> {
        // The stub process's CPU clock: every thread that has run guest
        // code of this address space (Linux's MAKE_PROCESS_CPUCLOCK with
        // CPUCLOCK_SCHED).
        let clock = (!self.shared.pid << 3) | 2;
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid out-pointer; an unknown clock only fails.
        let r = unsafe { libc::clock_gettime(clock, &mut ts) };
        (r == 0).then(|| std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    }

    fn min_user_address(&self) -> u64 {
        match self.shared.image.fast() {
            Some(_) => crate::fast::FAST_MIN_ADDR,
            None => 0x10000,
        }
    }

    fn syscall_patch(&self, code: [u8; 7], nr: u64, ret: u64) -> Option<[u8; 7]> {
        self.shared.image.fast()?.site(code, nr, ret)
    }

    fn unpatched(&self, patch: [u8; 7]) -> Option<[u8; 7]> {
        self.shared.image.fast()?.original(patch)
    }
}
