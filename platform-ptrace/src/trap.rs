//! Seccomp-trap mode, Sentry side: the slot region shared with the stub and
//! the hand-off protocol with a *runner* thread's signal handler.
//!
//! A runner is an untraced stub thread that runs guest code. (A traced
//! thread would enter a ptrace signal-delivery-stop for every SIGSYS, which
//! costs what SYSEMU costs; so the runner is never traced while it runs.)
//! Every event reaches its handler: SIGSYS from the seccomp filter for a
//! guest system call, SIGSEGV/SIGBUS/SIGILL/SIGFPE/SIGTRAP for faults, and
//! [`KICK_SIGNAL`] for interrupts. The handler runs on the runner's signal
//! stack inside its *slot* (a header page + the stack, in a memfd mapped in
//! the stub and here), records the signal number and where the kernel put
//! the `ucontext`, sets the state word to EVENT and waits; the Sentry reads
//! the registers straight from that `ucontext`, writes the answer back into
//! it, sets the state word to RUN, and the handler `rt_sigreturn`s.
//!
//! Everything in a slot is writable by the guest (it runs on that thread),
//! so everything read from it is hostile input: pointers are bounds-checked
//! against the slot, bytes are copied out once (volatile) and then parsed,
//! and a slot that no real handler could have produced kills the stub.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use platform::{Access, Error, Event, Regs, Result, PAGE_SIZE};

use crate::handoff::{Chooser, Switch, Way, SPIN_WINDOW, SPIN_YIELDS, STUB_SPIN};
use crate::stub::{
    CodeLayout, F_CONVERT, F_FLAGS, F_NR, F_R10, F_R12, F_R13, F_R14, F_R15, F_R8, F_R9, F_RAX,
    F_RBP, F_RBX, F_RDI, F_RDX, F_RIP, F_RSI, F_RSP, H_FS_BASE, H_GS_BASE, H_KICK_DROPPED,
    H_NEW_FS_BASE, H_NEW_GS_BASE, H_SELF, H_SENTRY_WAITING, H_SET, H_SIGNO, H_SPIN, H_STATE,
    H_STUB_WAITING, H_UC, H_YIELDS, SET_FS, SET_GS, SLOTS_BASE, SLOTS_LEN, SLOT_INIT_UC, SLOT_SIZE,
    SLOT_STACK, STATE_EVENT, STATE_EXIT, STATE_RUN, STUB_BASE,
};
use crate::sys::{self, WaitStatus};
use crate::tracee::event_of;

/// The signal an [`platform::Interrupter`] sends a runner: caught by the
/// handler, which reports it like any event.
pub(crate) const KICK_SIGNAL: i32 = libc::SIGUSR2;

/// Signals the stub's handler takes in seccomp-trap mode.
pub(crate) const HANDLED_SIGNALS: [i32; 7] = [
    libc::SIGSYS,
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGTRAP,
    KICK_SIGNAL,
];

/// `SYS_SECCOMP`: `si_code` of a SIGSYS raised by `SECCOMP_RET_TRAP`.
const SYS_SECCOMP: i32 = 1;
/// `-ENOSYS`, what `rax` holds at a SYSEMU syscall stop (mirrored).
const ENOSYS_RAX: u64 = -(libc::ENOSYS as i64) as u64;
/// How long the Sentry sleeps on the state word before it checks that the
/// runner still lives (a dead stub wakes nobody).
const LIVENESS_PERIOD: Duration = Duration::from_millis(20);
/// How long the Sentry goes on yielding to a runner that has not posted
/// its next event (see [`crate::PtraceOptions::yields`]).
const YIELD_WINDOW: Duration = Duration::from_micros(50);
/// How long an interrupt may go unanswered before the Sentry suspects the
/// guest blocked the kick (a forged `rt_sigreturn` frame can) and unblocks
/// it under ptrace.
const KICK_GRACE: Duration = Duration::from_millis(50);
/// Unanswered kicks (each after an unblock) before the guest is deemed to
/// be hiding in the platform's own code and its stub is killed.
const MAX_ESCALATIONS: u32 = 5;
/// How long releasing a runner waits for its thread to end.
const EXIT_WAIT: Duration = Duration::from_millis(200);
/// `PTRACE_EVENT_STOP`.
const EVENT_STOP: i32 = 128;

// struct ucontext (x86-64, the kernel's): uc_flags, uc_link, uc_stack
// (ss_sp, ss_flags, ss_size), uc_mcontext (struct sigcontext), uc_sigmask.
const UC_STACK_SP: usize = 16;
const UC_STACK_FLAGS: usize = 24;
const UC_STACK_SIZE: usize = 32;
const UC_MCONTEXT: usize = 40;
/// Where `rip` is in a `ucontext` (greg 16 of the sigcontext).
pub(crate) const UC_RIP: usize = UC_MCONTEXT + 16 * 8;
const UC_SIGMASK: usize = 296;
/// Size of `struct ucontext` with the kernel's 8-byte sigset.
const UC_LEN: usize = 304;
/// `struct siginfo` follows the ucontext in `struct rt_sigframe`.
const INFO_LEN: usize = 128;
/// Offsets in `struct sigcontext` (asm/sigcontext.h): 18 u64 registers,
/// then cs, gs, fs, ss (u16), err, trapno, oldmask, cr2, fpstate.
const SC_GREGS: [fn(&mut Regs) -> &mut u64; 18] = [
    |r| &mut r.r8,
    |r| &mut r.r9,
    |r| &mut r.r10,
    |r| &mut r.r11,
    |r| &mut r.r12,
    |r| &mut r.r13,
    |r| &mut r.r14,
    |r| &mut r.r15,
    |r| &mut r.rdi,
    |r| &mut r.rsi,
    |r| &mut r.rbp,
    |r| &mut r.rbx,
    |r| &mut r.rdx,
    |r| &mut r.rax,
    |r| &mut r.rcx,
    |r| &mut r.rsp,
    |r| &mut r.rip,
    |r| &mut r.eflags,
];
const SC_CS: usize = 144;
const SC_SS: usize = 150;
const SC_FPSTATE: usize = 184;
/// `UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS`: rt_sigreturn takes ss from
/// the frame.
const UC_FLAGS_SS: u64 = 0x6;
/// `FP_XSTATE_MAGIC1` in the `FXSAVE` area's software bytes (offset 464)
/// of a signal frame with XSAVE state.
const FP_XSTATE_MAGIC1: u32 = 0x4650_5853;
/// `FP_XSTATE_MAGIC2`, just after an XSAVE image in a signal frame.
const FP_XSTATE_MAGIC2: u32 = 0x4650_5845;
/// Where the initial frame's FP image goes: above the initial ucontext,
/// 64-byte aligned, far below where the stub's stack starts.
const SLOT_INIT_FP: u64 = SLOT_INIT_UC + 1024;
/// The largest image it takes (the stack starts at `SLOT_START_SP`).
const INIT_FP_MAX: u64 = 16 * 1024;
const FXSAVE_LEN: usize = 512;
const XSAVE_HEADER_END: usize = 576;

/// The slot region of one address space: a memfd of [`SLOTS_LEN`] bytes,
/// mapped at [`SLOTS_BASE`] in the stub and anywhere here.
#[derive(Debug)]
pub(crate) struct SlotRegion {
    fd: OwnedFd,
    base: *mut u8,
    alloc: Mutex<SlotAlloc>,
}

#[derive(Debug, Default)]
struct SlotAlloc {
    /// Slots never used yet start here.
    next: u64,
    /// Released slots and the runner thread that had each: reusable once
    /// that thread is gone.
    free: Vec<(u64, i32)>,
}

// SAFETY: `base` is a shared mapping owned by the region for its whole
// life; every access goes through atomics or volatile copies, which are
// sound under concurrent writers (other threads, the stub).
unsafe impl Send for SlotRegion {}
// SAFETY: as above.
unsafe impl Sync for SlotRegion {}

impl SlotRegion {
    pub(crate) fn new() -> Result<Self> {
        let fd = sys::memfd_of_len(c"ferrovisor-stub-slots", SLOTS_LEN)?;
        // SAFETY: a new shared mapping of the whole memfd; it replaces
        // nothing (address chosen by the kernel).
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                SLOTS_LEN as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_NORESERVE,
                std::os::fd::AsRawFd::as_raw_fd(&fd),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(Error::last_os("mmap(stub slots)"));
        }
        Ok(SlotRegion {
            fd,
            base: base.cast(),
            alloc: Mutex::default(),
        })
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// A slot for a new runner of stub `pid`, zeroed.
    fn alloc(&self, pid: i32) -> Result<u64> {
        let mut a = self.alloc.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = a.free.iter().position(|&(_, t)| !sys::thread_alive(pid, t)) {
            let (slot, _) = a.free.swap_remove(i);
            sys::punch_hole(self.fd.as_fd(), slot * SLOT_SIZE, SLOT_SIZE)?;
            return Ok(slot);
        }
        if a.next == crate::stub::MAX_SLOTS {
            return Err(Error::Host {
                op: "stub slot for a new guest thread",
                source: std::io::Error::from_raw_os_error(libc::EAGAIN),
            });
        }
        a.next += 1;
        Ok(a.next - 1)
    }

    fn free(&self, slot: u64, tid: i32) {
        let mut a = self.alloc.lock().unwrap_or_else(PoisonError::into_inner);
        a.free.push((slot, tid));
    }

    /// Pointer to `off` in `slot`; `off + len` must lie within the slot.
    fn ptr(&self, slot: u64, off: u64, len: usize) -> *mut u8 {
        assert!(slot < crate::stub::MAX_SLOTS && off + len as u64 <= SLOT_SIZE);
        // SAFETY: in bounds of the mapping (checked above).
        unsafe { self.base.add((slot * SLOT_SIZE + off) as usize) }
    }

    fn word(&self, slot: u64, off: u64) -> &AtomicU32 {
        assert!(off.is_multiple_of(4));
        // SAFETY: an aligned, in-bounds u32 of a mapping that lives as long
        // as `self`; AtomicU32 has u32's layout.
        unsafe { &*self.ptr(slot, off, 4).cast::<AtomicU32>() }
    }

    fn read(&self, slot: u64, off: u64, out: &mut [u8]) {
        let p = self.ptr(slot, off, out.len());
        for (i, b) in out.iter_mut().enumerate() {
            // SAFETY: in bounds (checked by `ptr`); volatile because the
            // stub writes concurrently.
            *b = unsafe { p.add(i).read_volatile() };
        }
    }

    fn write(&self, slot: u64, off: u64, data: &[u8]) {
        let p = self.ptr(slot, off, data.len());
        for (i, b) in data.iter().enumerate() {
            // SAFETY: as in `read`.
            unsafe { p.add(i).write_volatile(*b) };
        }
    }

    fn read_u64(&self, slot: u64, off: u64) -> u64 {
        let mut b = [0u8; 8];
        self.read(slot, off, &mut b);
        u64::from_le_bytes(b)
    }

    fn write_u64(&self, slot: u64, off: u64, v: u64) {
        self.write(slot, off, &v.to_le_bytes());
    }
}

impl Drop for SlotRegion {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; no reference
        // into it outlives `self`.
        unsafe { libc::munmap(self.base.cast(), SLOTS_LEN as usize) };
    }
}

/// Where the current guest `ucontext` of a runner is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Frame {
    /// Not started: the first RUN enters through the one at
    /// [`SLOT_INIT_UC`], which the Sentry writes.
    Initial,
    /// Waiting in its handler; the ucontext at this slot offset (checked).
    At(u64),
    /// Waiting in the fast path of a patched site, its registers in the
    /// slot header (`F_*`); no signal frame.
    Fast,
    /// Running guest code.
    Running,
}

/// A runner thread and its slot; owned by the host thread whose contexts
/// it runs.
#[derive(Debug)]
pub(crate) struct Runner {
    pub(crate) tid: i32,
    pub(crate) pid: i32,
    /// The traced (injection) stub thread of the same host thread.
    helper: i32,
    slot: u64,
    region: Arc<SlotRegion>,
    frame: Frame,
    /// Registers as reported by the last event (or as set at the start).
    reported: Regs,
    /// Selectors the runner has (not in the ucontext; constant).
    template: Regs,
    fsgsbase: bool,
    spin: u32,
    yields: u32,
    /// In Spin ([`crate::handoff`]): how long the Sentry polls (instead of
    /// `spin` iterations).
    spin_for: Option<Duration>,
    /// `spin` and `yields` in Yield (as configured).
    base: (u32, u32),
    /// With an adaptive hand-off: the choice, and when the runner was last
    /// let go (from then to its next event: both hand-offs, the guest's
    /// work and any preemption of the runner).
    chooser: Option<Chooser>,
    resumed: Option<Instant>,
    /// FP image fetched since the last event.
    fp: Option<Vec<u8>>,
    /// Before the first run: the FP image to start with (a forked
    /// thread's parent's), which the initial frame restores.
    init_fp: Option<Vec<u8>>,
    exited: bool,
    /// With patched sites: where the fast path's instructions are.
    fast: Option<FastIps>,
}

/// The stub's fast-path instructions a frame can stop at (absolute).
#[derive(Clone, Copy, Debug)]
pub(crate) struct FastIps {
    gs: u64,
    check: u64,
    convert: u64,
    fallback: u64,
}

impl FastIps {
    pub(crate) fn of(layout: &CodeLayout) -> Self {
        FastIps {
            gs: STUB_BASE + layout.fast_gs,
            check: STUB_BASE + layout.fast_check,
            convert: STUB_BASE + layout.fast_convert,
            fallback: STUB_BASE + layout.fast_fallback,
        }
    }
}

/// No interrupts to watch (a conversion, which the guest cannot delay).
struct NoPending;

impl Pending for NoPending {
    fn take(&self) -> bool {
        false
    }
    fn peek(&self) -> bool {
        false
    }
}

/// What a switch needs to know about interrupts.
pub(crate) trait Pending {
    /// Takes a pending interrupt request.
    fn take(&self) -> bool;
    /// Whether one is pending.
    fn peek(&self) -> bool;
}

impl Runner {
    /// Prepares a slot for a runner of stub `pid`; `make` clones the thread
    /// with the given first stack pointer and returns its tid.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn create(
        region: &Arc<SlotRegion>,
        pid: i32,
        helper: i32,
        template: Regs,
        config: crate::stub::TrapConfig,
        fast: Option<FastIps>,
        home: Option<usize>,
        make: impl FnOnce(u64) -> Result<i32>,
    ) -> Result<Self> {
        let slot = region.alloc(pid)?;
        region.write_u64(slot, H_SELF, SLOTS_BASE + slot * SLOT_SIZE);
        region
            .word(slot, H_SPIN)
            .store(config.spin, Ordering::Relaxed);
        region
            .word(slot, H_YIELDS)
            .store(config.yields, Ordering::Relaxed);
        let cpus = crate::address_space::ALLOWED_CPUS.get().map_or(1, Vec::len);
        let chooser = home
            .filter(|_| config.adaptive)
            .map(|h| Chooser::new(cpus, h, crate::address_space::spin_cpu(h)));
        let sp = SLOTS_BASE + slot * SLOT_SIZE + crate::stub::SLOT_START_SP;
        let tid = match make(sp) {
            Ok(t) => t,
            Err(e) => {
                // Never used by a thread: free at once.
                region.free(slot, 0);
                return Err(e);
            }
        };
        Ok(Runner {
            tid,
            pid,
            helper,
            slot,
            region: region.clone(),
            frame: Frame::Initial,
            reported: template,
            template,
            fsgsbase: config.fsgsbase,
            spin: config.spin,
            yields: config.yields,
            spin_for: None,
            base: (config.spin, config.yields),
            chooser,
            resumed: None,
            fp: None,
            init_fp: None,
            exited: false,
            fast,
        })
    }

    /// The gs base the runner really has for a guest gs base: with patched
    /// sites a guest base of 0 (the usual) is the slot, which the fast path
    /// finds through `%gs`.
    fn real_gs(&self, guest: u64) -> u64 {
        if self.fast.is_some() && guest == 0 {
            self.stub_addr(0)
        } else {
            guest
        }
    }

    /// The guest's view of a real gs base (see [`Runner::real_gs`]).
    fn guest_gs(&self, real: u64) -> u64 {
        if self.fast.is_some() && real == self.stub_addr(0) {
            0
        } else {
            real
        }
    }

    fn stub_addr(&self, off: u64) -> u64 {
        SLOTS_BASE + self.slot * SLOT_SIZE + off
    }

    /// Runs the guest until an event worth reporting.
    pub(crate) fn run(&mut self, pending: &dyn Pending, regs: &mut Regs) -> Result<Event> {
        if self.exited {
            return Err(Error::StubDied("guest thread already released".into()));
        }
        loop {
            // A kick that met the fast path was dropped there (see the
            // stub's handler): honour it before the guest runs on.
            if self.frame != Frame::Initial && pending.take() {
                return Ok(Event::Interrupted);
            }
            self.resume(regs)?;
            self.wait_event(pending)?;
            if let Some(ev) = self.take_event(pending, regs)? {
                return Ok(ev);
            }
        }
    }

    /// Writes what the Sentry changed into the frame and lets the runner go.
    fn resume(&mut self, regs: &Regs) -> Result<()> {
        let r = &self.region;
        let s = self.slot;
        let mut set = 0;
        match self.frame {
            Frame::Running => return Err(Error::Misuse("runner resumed while running")),
            Frame::Fast => {
                if !only_rax_differs(&self.reported, regs) {
                    // More than the result changed: go through a frame.
                    self.convert()?;
                    return self.resume(regs);
                }
                r.write_u64(s, F_RAX, regs.rax);
            }
            Frame::Initial => {
                let mut uc = [0u8; UC_LEN];
                uc[0..8].copy_from_slice(&UC_FLAGS_SS.to_le_bytes());
                let stack = self.stub_addr(SLOT_STACK);
                uc[UC_STACK_SP..UC_STACK_SP + 8].copy_from_slice(&stack.to_le_bytes());
                uc[UC_STACK_FLAGS..UC_STACK_FLAGS + 4].copy_from_slice(&0u32.to_le_bytes());
                let size = SLOT_SIZE - SLOT_STACK;
                uc[UC_STACK_SIZE..UC_STACK_SIZE + 8].copy_from_slice(&size.to_le_bytes());
                encode_gregs(&mut uc[UC_MCONTEXT..], regs);
                // fpstate NULL: rt_sigreturn gives the thread the initial FP
                // state; else the image given, with the XSAVE frame's
                // closing magic after it. Nothing blocked in the guest.
                if let Some(fp) = self.init_fp.take() {
                    r.write(s, SLOT_INIT_FP, &fp);
                    r.write(
                        s,
                        SLOT_INIT_FP + fp.len() as u64,
                        &FP_XSTATE_MAGIC2.to_le_bytes(),
                    );
                    let at = UC_MCONTEXT + SC_FPSTATE;
                    uc[at..at + 8].copy_from_slice(&self.stub_addr(SLOT_INIT_FP).to_le_bytes());
                }
                uc[UC_SIGMASK..UC_SIGMASK + 8].copy_from_slice(&0u64.to_le_bytes());
                r.write(s, SLOT_INIT_UC, &uc);
                set = SET_FS | SET_GS;
            }
            Frame::At(uc) => {
                let old = self.reported;
                if *regs != old {
                    if only_rax_differs(&old, regs) {
                        r.write_u64(s, uc + UC_MCONTEXT as u64 + 13 * 8, regs.rax);
                    } else {
                        let mut mc = [0u8; SC_FPSTATE];
                        r.read(s, uc + UC_MCONTEXT as u64, &mut mc);
                        encode_gregs(&mut mc, regs);
                        r.write(s, uc + UC_MCONTEXT as u64, &mc);
                    }
                    if regs.fs_base != old.fs_base {
                        set |= SET_FS;
                    }
                    if regs.gs_base != old.gs_base {
                        set |= SET_GS;
                    }
                    if (regs.ds, regs.es, regs.fs, regs.gs) != (old.ds, old.es, old.fs, old.gs) {
                        tracing::debug!("segment selector change ignored in seccomp-trap mode");
                    }
                }
            }
        }
        if set != 0 {
            r.write_u64(s, H_NEW_FS_BASE, regs.fs_base);
            r.write_u64(s, H_NEW_GS_BASE, self.real_gs(regs.gs_base));
            r.write_u64(s, H_SET, set);
        }
        self.reported = *regs;
        self.fp = None;
        self.frame = Frame::Running;
        if self.chooser.is_some() {
            self.resumed = Some(Instant::now());
        }
        // Full barrier between publishing RUN and reading `stub_waiting`
        // (the handler does the mirror image: store, mfence, load).
        r.word(s, H_STATE).swap(STATE_RUN, Ordering::SeqCst);
        if r.word(s, H_STUB_WAITING).load(Ordering::SeqCst) != 0 {
            sys::futex_wake(r.word(s, H_STATE));
        }
        Ok(())
    }

    /// Waits until the handler posts an event, and lets an adaptive
    /// hand-off learn from how long that took.
    fn wait_event(&mut self, pending: &dyn Pending) -> Result<()> {
        let slept = self.wait_posted(pending)?;
        let (Some(chooser), Some(t)) = (self.chooser.as_mut(), self.resumed.take()) else {
            return Ok(());
        };
        if let Some(switch) = chooser.record(t.elapsed(), slept) {
            self.switch_way(switch);
        }
        Ok(())
    }

    /// Moves the runner to the CPU and the waits of `switch.to`.
    fn switch_way(&mut self, switch: Switch) {
        let Some(chooser) = self.chooser.as_mut() else {
            return;
        };
        let (home, away) = chooser.cpus();
        let (cpu, spin, yields, spin_for) = match (switch.to, away) {
            (Way::Spin, Some(cpu)) => (cpu, STUB_SPIN, SPIN_YIELDS, Some(SPIN_WINDOW)),
            (Way::Spin, None) => return chooser.abandon_spin(),
            (Way::Yield, _) => (home, self.base.0, self.base.1, None),
        };
        match sys::set_affinity(self.tid, cpu) {
            Err(_) if switch.to == Way::Spin => return chooser.abandon_spin(),
            // The runner stays where it is: slower, still correct.
            _ => {}
        }
        let (yield_ns, spin_ns) = chooser.means();
        self.spin = if spin_for.is_some() { 0 } else { spin };
        self.yields = yields;
        self.spin_for = spin_for;
        let r = &self.region;
        r.word(self.slot, H_SPIN).store(spin, Ordering::Relaxed);
        r.word(self.slot, H_YIELDS).store(yields, Ordering::Relaxed);
        tracing::debug!(
            tid = self.tid,
            way = ?switch.to,
            cpu,
            reason = switch.reason,
            ?yield_ns,
            ?spin_ns,
            "hand-off"
        );
    }

    /// Waits until the handler posts an event: spin, yield, then sleep on the
    /// state word, checking now and then that the runner lives and that an
    /// interrupt got through. Whether it slept.
    fn wait_posted(&mut self, pending: &dyn Pending) -> Result<bool> {
        let r = self.region.clone();
        let state = r.word(self.slot, H_STATE);
        let sleeping = r.word(self.slot, H_SENTRY_WAITING);
        for _ in 0..self.spin {
            if state.load(Ordering::Acquire) == STATE_EVENT {
                return Ok(false);
            }
            std::hint::spin_loop();
        }
        if let Some(window) = self.spin_for {
            let start = Instant::now();
            'poll: loop {
                for _ in 0..64 {
                    if state.load(Ordering::Acquire) == STATE_EVENT {
                        return Ok(false);
                    }
                    std::hint::spin_loop();
                }
                if start.elapsed() > window {
                    break 'poll;
                }
            }
        }
        // Yield to the runner (on this CPU: it runs now), but only while
        // that is quick: a guest that computes for a whole time slice is
        // better waited for asleep.
        let start = (self.yields > 0).then(Instant::now);
        for _ in 0..self.yields {
            std::thread::yield_now();
            if state.load(Ordering::Acquire) == STATE_EVENT {
                return Ok(false);
            }
            if start.is_some_and(|t| t.elapsed() > YIELD_WINDOW) {
                break;
            }
        }
        let mut kicked: Option<Instant> = None;
        let mut escalations = 0;
        loop {
            sleeping.swap(1, Ordering::SeqCst);
            let v = state.load(Ordering::SeqCst);
            if v == STATE_EVENT {
                sleeping.store(0, Ordering::Relaxed);
                return Ok(false);
            }
            // Wait on whatever the word holds (RUN normally; a guest that
            // scribbles on it must not make us spin).
            sys::futex_wait(state, v, LIVENESS_PERIOD);
            sleeping.store(0, Ordering::Relaxed);
            if state.load(Ordering::Acquire) == STATE_EVENT {
                return Ok(true);
            }
            if !sys::thread_alive(self.pid, self.tid) {
                self.exited = true;
                return Err(Error::StubDied("guest thread of the stub died".into()));
            }
            // A killed stub's last thread waits (in the pid namespace's
            // teardown) until its traced threads are reaped by their
            // tracers: ours is the injection thread, reaped here.
            if let Ok(Some(st @ (WaitStatus::Exited(_) | WaitStatus::Signaled(_)))) =
                sys::wait_nohang(self.helper)
            {
                self.exited = true;
                return Err(Error::StubDied(st.describe()));
            }
            if !pending.peek() {
                kicked = None;
                continue;
            }
            if r.word(self.slot, H_KICK_DROPPED).swap(0, Ordering::SeqCst) != 0 {
                // The handler dropped the kick in the fast path (the thread
                // may have been returning to the guest): kick again.
                let _ = sys::tgkill(self.pid, self.tid, KICK_SIGNAL);
                kicked = Some(Instant::now());
                continue;
            }
            let since = *kicked.get_or_insert_with(Instant::now);
            if since.elapsed() < KICK_GRACE {
                continue;
            }
            // The kick did not get through: the guest may have blocked it.
            escalations += 1;
            if escalations > MAX_ESCALATIONS {
                self.kill("guest thread does not take interrupts");
                return Err(Error::StubDied(
                    "guest thread stuck in the platform's handler".into(),
                ));
            }
            self.unblock_kick()?;
            kicked = Some(Instant::now());
        }
    }

    /// Under a short ptrace attachment: if the runner is in guest code,
    /// unblock the platform's signals (so the pending kick arrives).
    fn unblock_kick(&mut self) -> Result<()> {
        let tid = self.tid;
        sys::seize(tid, libc::PTRACE_O_EXITKILL)?;
        let detach_sig = loop {
            if let Err(e) = sys::interrupt(tid) {
                let _ = sys::detach(tid, 0);
                return Err(e);
            }
            match sys::wait(tid)? {
                WaitStatus::Stopped(s) if event_of(s) == EVENT_STOP => break None,
                // A signal on its way in: let it be delivered.
                WaitStatus::Stopped(s) if event_of(s) == 0 => break Some(s),
                WaitStatus::Stopped(_) => continue,
                dead => {
                    self.exited = true;
                    return Err(Error::StubDied(dead.describe()));
                }
            }
        };
        if detach_sig.is_none() {
            let mut regs = Regs::default();
            sys::get_regs(tid, &mut regs)?;
            let in_stub = (STUB_BASE..STUB_BASE + PAGE_SIZE).contains(&regs.rip);
            if !in_stub {
                let mut mask = sys::get_sigmask(tid)?;
                for sig in HANDLED_SIGNALS {
                    mask &= !(1u64 << (sig - 1));
                }
                sys::set_sigmask(tid, mask)?;
            }
        }
        sys::detach(tid, detach_sig.unwrap_or(0))?;
        // Kick again: a standard signal already pending stays pending.
        let _ = sys::tgkill(self.pid, self.tid, KICK_SIGNAL);
        Ok(())
    }

    /// Gives up on the runner; the caller kills the stub on the
    /// `StubDied` this precedes (see `PtraceContext::switch`).
    fn kill(&mut self, why: &str) {
        tracing::warn!(pid = self.pid, tid = self.tid, why, "killing stub");
        self.exited = true;
    }

    /// Lets a runner waiting in the fast path go on to a fault that gives
    /// a full frame of the same registers (the Sentry wants to change more
    /// than the result, or the FP state), and makes that frame the current
    /// one.
    fn convert(&mut self) -> Result<()> {
        let Some(fast) = self.fast else {
            return Err(Error::Misuse("fast frame without a fast path"));
        };
        let r = self.region.clone();
        let s = self.slot;
        r.word(s, F_CONVERT).store(1, Ordering::Relaxed);
        self.frame = Frame::Running;
        r.word(s, H_STATE).swap(STATE_RUN, Ordering::SeqCst);
        if r.word(s, H_STUB_WAITING).load(Ordering::SeqCst) != 0 {
            sys::futex_wake(r.word(s, H_STATE));
        }
        self.wait_event(&NoPending)?;
        let (signo, uc) = self.posted()?;
        let rip = r.read_u64(s, uc + UC_RIP as u64);
        if signo != libc::SIGILL || rip != fast.convert {
            self.kill("fast path did not convert");
            return Err(Error::StubDied("guest corrupted its platform page".into()));
        }
        let mut mc = [0u8; SC_FPSTATE];
        r.read(s, uc + UC_MCONTEXT as u64, &mut mc);
        encode_gregs(&mut mc, &self.reported);
        r.write(s, uc + UC_MCONTEXT as u64, &mc);
        self.frame = Frame::At(uc);
        self.fp = None;
        Ok(())
    }

    /// The posted signal and the slot offset of its ucontext, checked.
    fn posted(&mut self) -> Result<(i32, u64)> {
        let r = &self.region;
        let s = self.slot;
        let signo = r.word(s, H_SIGNO).load(Ordering::Relaxed) as i32;
        let uc_addr = r.read_u64(s, H_UC);
        let lo = self.stub_addr(SLOT_STACK);
        let hi = self.stub_addr(SLOT_SIZE);
        let fits = uc_addr >= lo
            && uc_addr.is_multiple_of(8)
            && uc_addr
                .checked_add((UC_LEN + INFO_LEN) as u64)
                .is_some_and(|e| e <= hi);
        if !fits || !HANDLED_SIGNALS.contains(&signo) {
            // No handler of ours wrote this.
            self.kill("guest forged its platform page");
            return Err(Error::StubDied("guest corrupted its platform page".into()));
        }
        Ok((signo, uc_addr - self.stub_addr(0)))
    }

    /// A call posted by the fast path: its registers from the slot header.
    fn take_fast(&mut self, regs: &mut Regs) -> Event {
        let r = &self.region;
        let s = self.slot;
        let mut out = self.template;
        // The record in one copy (F_NR..=F_R15), then its words.
        let mut rec = [0u8; (F_R15 + 8 - F_NR) as usize];
        r.read(s, F_NR, &mut rec);
        let get = |off: u64| {
            let at = (off - F_NR) as usize;
            u64::from_le_bytes(rec[at..at + 8].try_into().expect("8 bytes"))
        };
        out.orig_rax = get(F_NR);
        out.rax = ENOSYS_RAX;
        out.rip = get(F_RIP);
        out.rcx = out.rip;
        out.eflags = get(F_FLAGS);
        out.r11 = out.eflags;
        out.rsp = get(F_RSP);
        out.rbx = get(F_RBX);
        out.rdx = get(F_RDX);
        out.rsi = get(F_RSI);
        out.rdi = get(F_RDI);
        out.rbp = get(F_RBP);
        out.r8 = get(F_R8);
        out.r9 = get(F_R9);
        out.r10 = get(F_R10);
        out.r12 = get(F_R12);
        out.r13 = get(F_R13);
        out.r14 = get(F_R14);
        out.r15 = get(F_R15);
        self.bases_into(&mut out);
        self.frame = Frame::Fast;
        self.reported = out;
        *regs = out;
        Event::Syscall
    }

    /// The fs/gs bases the runner had at its last event.
    fn bases_into(&self, out: &mut Regs) {
        if self.fsgsbase {
            out.fs_base = self.region.read_u64(self.slot, H_FS_BASE);
            out.gs_base = self.guest_gs(self.region.read_u64(self.slot, H_GS_BASE));
        } else {
            // Without FSGSBASE the guest cannot change them but through the
            // Sentry: they are what the Sentry last set.
            out.fs_base = self.reported.fs_base;
            out.gs_base = self.reported.gs_base;
        }
    }

    /// Reads the posted event into `regs`; `None` for noise (resume).
    fn take_event(&mut self, pending: &dyn Pending, regs: &mut Regs) -> Result<Option<Event>> {
        let s = self.slot;
        if self.fast.is_some() && self.region.word(s, H_SIGNO).load(Ordering::Relaxed) == 0 {
            return Ok(Some(self.take_fast(regs)));
        }
        let (signo, uc) = self.posted()?;
        let r = &self.region;
        let mut buf = [0u8; UC_LEN + INFO_LEN];
        r.read(s, uc, &mut buf);
        fence(Ordering::Acquire);
        let mut out = self.template;
        decode_gregs(&buf[UC_MCONTEXT..], &mut out);
        let mc = &buf[UC_MCONTEXT..];
        out.cs = u64::from(u16::from_le_bytes([mc[SC_CS], mc[SC_CS + 1]]));
        out.ss = u64::from(u16::from_le_bytes([mc[SC_SS], mc[SC_SS + 1]]));
        self.bases_into(&mut out);
        let info = &buf[UC_LEN..];
        let code = i32::from_le_bytes(info[8..12].try_into().expect("4 bytes"));
        let addr = u64::from_le_bytes(info[16..24].try_into().expect("8 bytes"));
        out.orig_rax = u64::MAX;
        if let Some(fast) = self.fast {
            let stands_for_call = match signo {
                libc::SIGILL => out.rip == fast.fallback,
                libc::SIGSEGV | libc::SIGBUS => out.rip == fast.gs || out.rip == fast.check,
                _ => false,
            };
            if stands_for_call {
                // The fast path could not find its slot: the frame is the
                // call itself (ax holds nr << 16 and the saved flags, rcx
                // the return address; see the stub).
                out.orig_rax = out.rax >> 16;
                out.rax = ENOSYS_RAX;
                out.rip = out.rcx;
                out.r11 = out.eflags;
                let mut mc = [0u8; SC_FPSTATE];
                r.read(s, uc + UC_MCONTEXT as u64, &mut mc);
                encode_gregs(&mut mc, &out);
                r.write(s, uc + UC_MCONTEXT as u64, &mc);
                self.frame = Frame::At(uc);
                self.reported = out;
                *regs = out;
                return Ok(Some(Event::Syscall));
            }
        }
        let ev = match signo {
            libc::SIGSYS if code == SYS_SECCOMP => {
                // The kernel rolled rax back to the number; report it as a
                // SYSEMU stop does.
                out.orig_rax = crate::not_syscall_insn(&out).unwrap_or(out.rax);
                out.rax = ENOSYS_RAX;
                // Keep the frame equal to what is reported, so a result of
                // -ENOSYS (unchanged registers) still reaches the guest.
                r.write_u64(s, uc + UC_MCONTEXT as u64 + 13 * 8, ENOSYS_RAX);
                Some(Event::Syscall)
            }
            KICK_SIGNAL => pending.take().then_some(Event::Interrupted),
            // si_code <= 0: sent by some host process (the guest cannot
            // send host signals): noise.
            _ if code <= 0 => None,
            libc::SIGSEGV | libc::SIGBUS => Some(Event::Fault {
                signo,
                code,
                addr,
                access: (addr == out.rip).then_some(Access::Execute),
            }),
            libc::SIGILL | libc::SIGFPE | libc::SIGTRAP => {
                Some(Event::Signal { signo, code, addr })
            }
            _ => None,
        };
        self.frame = Frame::At(uc);
        self.reported = out;
        *regs = out;
        if ev.is_none() {
            tracing::debug!(signo, code, "dropping noise signal to runner");
        }
        Ok(ev)
    }

    /// The fpstate pointer of the current frame and the length of its
    /// image (XSAVE standard format, or the 512-byte FXSAVE area).
    fn fp_area(&self) -> Result<(u64, usize)> {
        let Frame::At(uc) = self.frame else {
            return Err(Error::Misuse("fpstate before the first switch"));
        };
        let r = &self.region;
        let s = self.slot;
        let ptr = r.read_u64(s, uc + (UC_MCONTEXT + SC_FPSTATE) as u64);
        let base = self.stub_addr(0);
        let bad = || Error::StubDied("guest corrupted its signal frame".into());
        let off = ptr.checked_sub(base).ok_or_else(bad)?;
        if off < SLOT_STACK || !off.is_multiple_of(64) || off + FXSAVE_LEN as u64 > SLOT_SIZE {
            return Err(bad());
        }
        let mut sw = [0u8; 8];
        r.read(s, off + 464, &mut sw);
        let magic = u32::from_le_bytes(sw[0..4].try_into().expect("4"));
        if magic != FP_XSTATE_MAGIC1 {
            return Ok((off, FXSAVE_LEN));
        }
        let mut size = [0u8; 4];
        r.read(s, off + 480, &mut size);
        let len = u32::from_le_bytes(size) as usize;
        if len < XSAVE_HEADER_END || off + len as u64 > SLOT_SIZE {
            return Err(bad());
        }
        Ok((off, len))
    }

    /// The guest's FP state as saved in the current frame, with the x87
    /// and SSE parts an XSAVE left out (init state) filled in.
    pub(crate) fn fpstate(&mut self) -> Result<Vec<u8>> {
        if let Some(fp) = &self.fp {
            return Ok(fp.clone());
        }
        if let (Frame::Initial, Some(fp)) = (self.frame, &self.init_fp) {
            return Ok(fp.clone());
        }
        if self.frame == Frame::Fast {
            self.convert()?;
        }
        let (off, len) = self.fp_area()?;
        let mut fp = vec![0u8; len];
        self.region.read(self.slot, off, &mut fp);
        if len > FXSAVE_LEN {
            let bv = u64::from_le_bytes(fp[512..520].try_into().expect("8"));
            if bv & 1 == 0 {
                // x87 init: FCW 0x37f, the rest zero.
                fp[0..2].copy_from_slice(&0x37fu16.to_le_bytes());
                fp[2..24].fill(0);
                fp[32..160].fill(0);
            }
            if bv & 2 == 0 {
                fp[160..416].fill(0);
            }
        }
        self.fp = Some(fp.clone());
        Ok(fp)
    }

    /// Replaces the FP state the frame will restore, after the checks the
    /// kernel's `rt_sigreturn` would otherwise fail on (and kill for).
    pub(crate) fn set_fpstate(&mut self, state: &[u8]) -> Result<()> {
        if self.frame == Frame::Initial {
            // Checked by rt_sigreturn of the initial frame: an image of
            // this host's format (the parent's) restores as it was taken.
            if state.len() < FXSAVE_LEN || state.len() as u64 > INIT_FP_MAX {
                return Err(Error::Misuse("set_fpstate: no image of this host's format"));
            }
            self.init_fp = Some(state.to_vec());
            return Ok(());
        }
        if self.frame == Frame::Fast {
            self.convert()?;
        }
        let (off, len) = self.fp_area()?;
        let invalid = |what: &'static str| Error::Host {
            op: what,
            source: std::io::Error::from_raw_os_error(libc::EINVAL),
        };
        if state.len() != len {
            return Err(invalid("set_fpstate: wrong length"));
        }
        let mxcsr = u32::from_le_bytes(state[24..28].try_into().expect("4"));
        if mxcsr & 0xffff_0000 != 0 {
            return Err(invalid("set_fpstate: reserved MXCSR bits"));
        }
        let mut image = state.to_vec();
        // The software bytes stay the kernel's (they describe the frame).
        self.region
            .read(self.slot, off + 464, &mut image[464..FXSAVE_LEN]);
        if len > FXSAVE_LEN {
            let xfeatures = u64::from_le_bytes(image[472..480].try_into().expect("8"));
            let mut bv = u64::from_le_bytes(image[512..520].try_into().expect("8"));
            let comp = u64::from_le_bytes(image[520..528].try_into().expect("8"));
            if comp != 0 || image[528..XSAVE_HEADER_END].iter().any(|&b| b != 0) {
                return Err(invalid("set_fpstate: bad XSAVE header"));
            }
            if bv & !xfeatures != 0 {
                return Err(invalid("set_fpstate: unknown XSAVE components"));
            }
            // x87 and SSE come from the legacy area as given.
            bv |= 3 & xfeatures;
            image[512..520].copy_from_slice(&bv.to_le_bytes());
        }
        self.region.write(self.slot, off, &image);
        self.fp = None;
        Ok(())
    }

    /// Makes the runner leave (`exit` of that thread only). Its slot is
    /// reused once the thread is gone.
    pub(crate) fn exit(&mut self) {
        if self.exited {
            return;
        }
        self.exited = true;
        let state = self.region.word(self.slot, H_STATE);
        state.swap(STATE_EXIT, Ordering::SeqCst);
        sys::futex_wake(state);
        // Wait (briefly) for it to be gone, so that a released host thread
        // leaves nothing behind; a runner busy in guest code (it only sees
        // EXIT in its handler) goes when its stub does.
        let deadline = Instant::now() + EXIT_WAIT;
        while sys::thread_alive(self.pid, self.tid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.exit();
        self.region.free(self.slot, self.tid);
    }
}

fn only_rax_differs(a: &Regs, b: &Regs) -> bool {
    let mut a = *a;
    a.rax = b.rax;
    a == *b
}

/// `struct sigcontext`'s registers and cs/ss from `regs` (the rest of
/// `mc` is left as it is).
fn encode_gregs(mc: &mut [u8], regs: &Regs) {
    let mut r = *regs;
    for (i, f) in SC_GREGS.iter().enumerate() {
        mc[8 * i..8 * i + 8].copy_from_slice(&f(&mut r).to_le_bytes());
    }
    mc[SC_CS..SC_CS + 2].copy_from_slice(&(regs.cs as u16).to_le_bytes());
    mc[SC_SS..SC_SS + 2].copy_from_slice(&(regs.ss as u16).to_le_bytes());
}

fn decode_gregs(mc: &[u8], regs: &mut Regs) {
    for (i, f) in SC_GREGS.iter().enumerate() {
        *f(regs) = u64::from_le_bytes(mc[8 * i..8 * i + 8].try_into().expect("8 bytes"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gregs_round_trip_through_a_sigcontext() {
        let mut regs = Regs::default();
        let mut n = 1u64;
        for f in SC_GREGS {
            *f(&mut regs) = n;
            n += 0x1111;
        }
        regs.cs = 0x33;
        regs.ss = 0x2b;
        let mut mc = [0u8; SC_FPSTATE];
        encode_gregs(&mut mc, &regs);
        let mut back = Regs::default();
        decode_gregs(&mc, &mut back);
        back.cs = 0x33;
        back.ss = 0x2b;
        assert_eq!(back, regs);
        // rax is the 14th register, rip the 17th (asm/sigcontext.h).
        assert_eq!(&mc[13 * 8..14 * 8], &regs.rax.to_le_bytes());
        assert_eq!(&mc[16 * 8..17 * 8], &regs.rip.to_le_bytes());
        assert_eq!(u16::from_le_bytes([mc[SC_SS], mc[SC_SS + 1]]), 0x2b);
    }

    // The filter checks the futex word at offset 0 of a slot; the header
    // ends before the stack; the first ucontext is below the first sp.
    const _: () = {
        assert!(H_STATE == 0);
        assert!(H_NEW_GS_BASE + 8 <= SLOT_STACK);
        assert!(SLOT_INIT_UC + (UC_LEN as u64) < crate::stub::SLOT_START_SP);
        assert!(H_STUB_WAITING.is_multiple_of(4) && H_SENTRY_WAITING.is_multiple_of(4));
        assert!(H_SIGNO.is_multiple_of(4) && SLOTS_BASE.is_multiple_of(SLOT_SIZE));
    };
}
