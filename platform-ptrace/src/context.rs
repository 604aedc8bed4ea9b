//! Running guest code: `PTRACE_SYSEMU` round trips on the calling host
//! thread's stub thread, and the classification of what stopped it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use platform::{Access, AddressSpace, Context, Error, Event, Interrupter, Regs, Result};

use crate::address_space::{PtraceAddressSpace, Shared, StubThread};
use crate::fpu;
use crate::sys::{self, WaitStatus};
use crate::tracee::{event_of, Gone, Tracee};
use crate::trap;

/// The signal that kicks a running stub for [`Interrupter::interrupt`].
/// SIGSTOP cannot be blocked or caught, standard signals do not queue (a
/// burst of interrupts is one stop), and the tracer always suppresses it.
const INTERRUPT_SIGNAL: i32 = libc::SIGSTOP;

/// Syscall stop under `PTRACE_O_TRACESYSGOOD`.
const SYSCALL_STOP: i32 = libc::SIGTRAP | 0x80;

/// Shared between a context and its interrupters.
#[derive(Debug, Default)]
struct InterruptState {
    /// An interrupt was requested and not yet reported.
    pending: AtomicBool,
    /// (stub pid, stub thread tid) while a switch runs that thread. Guarded
    /// by the mutex: the thread cannot be reaped (its tid reused) before
    /// the switch clears this.
    /// The third number is the signal that kicks it.
    running: Mutex<Option<(i32, i32, i32)>>,
}

impl InterruptState {
    fn set_running(&self, thread: Option<(i32, i32, i32)>) {
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) = thread;
    }
}

impl crate::trap::Pending for InterruptState {
    fn take(&self) -> bool {
        self.pending.swap(false, Ordering::SeqCst)
    }

    fn peek(&self) -> bool {
        self.pending.load(Ordering::SeqCst)
    }
}

/// Handle that makes a running [`PtraceContext::switch`] return.
#[derive(Debug)]
pub struct PtraceInterrupter(Arc<InterruptState>);

impl Interrupter for PtraceInterrupter {
    fn interrupt(&self) {
        // Store first: a switch about to start either sees `pending`, or is
        // already registered as running and gets the signal.
        self.0.pending.store(true, Ordering::SeqCst);
        let running = self
            .0
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Thread-directed: a process-directed signal could be taken (and
        // dropped) by another stub thread of the same address space.
        if let Some((tgid, tid, sig)) = *running {
            if let Err(e) = sys::tgkill(tgid, tid, sig) {
                tracing::debug!(error = %e, "interrupt signal not sent");
            }
        }
    }
}

/// A guest thread's context. It runs the guest on the calling host thread's
/// stub thread in whatever address space it is given (made on first use),
/// so it is meant to be switched from one host thread.
#[derive(Debug)]
pub struct PtraceContext {
    /// Resume with `PTRACE_POKEUSER` of rax alone when only rax changed.
    poke_rax: bool,
    interrupt: Arc<InterruptState>,
    /// The stub thread of the last switch, and its address space's id.
    current: Option<(u64, Arc<StubThread>)>,
    /// Every stub thread this context ran on; they exit when it is dropped.
    used: Vec<(Weak<Shared>, Arc<StubThread>)>,
    /// FP state fetched since the last switch.
    fp: Option<Vec<u8>>,
    /// FP state set before the first switch (a forked thread's), given to
    /// its stub thread then.
    pending_fp: Option<Vec<u8>>,
}

impl PtraceContext {
    pub(crate) fn new(poke_rax: bool) -> Self {
        PtraceContext {
            poke_rax,
            interrupt: Arc::default(),
            current: None,
            used: Vec::new(),
            fp: None,
            pending_fp: None,
        }
    }

    /// The caller's stub thread in `shared`, remembered for the next switch.
    fn thread_in(&mut self, shared: &Arc<Shared>) -> Result<Arc<StubThread>> {
        let t = shared.thread_for_caller()?;
        if !self.used.iter().any(|(_, u)| Arc::ptr_eq(u, &t)) {
            self.used.retain(|(s, _)| s.strong_count() > 0);
            self.used.push((Arc::downgrade(shared), t.clone()));
        }
        self.current = Some((shared.id, t.clone()));
        Ok(t)
    }

    /// The stub thread of the last switch, locked, for FP state.
    fn last_thread(&self) -> Result<std::sync::MutexGuard<'_, Tracee>> {
        let (_, t) = self
            .current
            .as_ref()
            .ok_or(Error::Misuse("fpstate before the first switch"))?;
        let st = t.lock()?;
        st.check_alive()?;
        Ok(st)
    }
}

/// One `PTRACE_SYSEMU` round trip (or more, skipping noise) on `st`.
fn run(
    poke_rax: bool,
    interrupt: &InterruptState,
    st: &mut Tracee,
    regs: &mut Regs,
) -> Result<Event> {
    let tid = st.tid;
    loop {
        // Only write what the Sentry changed since the last stop.
        match st.cached {
            Some(c) if c == *regs => {}
            Some(c) if poke_rax && only_rax_differs(&c, regs) => sys::poke_rax(tid, regs.rax)?,
            _ => sys::set_regs(tid, regs)?,
        }
        st.cached = None;
        // Signal 0: whatever the thread stopped with last time (a fault, the
        // interrupt) is never delivered to it.
        sys::sysemu(tid, 0)?;
        let sig = match st.wait()? {
            WaitStatus::Stopped(sig) => sig,
            dead => return Err(Error::StubDied(dead.describe())),
        };
        sys::get_regs(tid, regs)?;
        if sig == SYSCALL_STOP {
            if let Some(nr) = crate::not_syscall_insn(regs) {
                regs.orig_rax = nr;
            }
            st.cached = Some(*regs);
            return Ok(Event::Syscall);
        }
        st.cached = Some(*regs);
        // ptrace event stops (a group stop reported as PTRACE_EVENT_STOP to
        // a seized tracee) are no guest event.
        if event_of(sig) != 0 {
            continue;
        }
        if sig == INTERRUPT_SIGNAL {
            if interrupt.pending.swap(false, Ordering::SeqCst) {
                return Ok(Event::Interrupted);
            }
            // A kick for an interrupt already reported: drop it.
            continue;
        }
        let info = sys::get_siginfo(tid)?;
        // si_code > 0: raised by the kernel for what the guest executed.
        // <= 0 (SI_USER, SI_TKILL, SI_QUEUE): sent by some host process;
        // the guest cannot send host signals, so these are noise.
        if info.code <= 0 {
            tracing::debug!(signo = info.signo, "dropping host-sent signal to stub");
            continue;
        }
        return Ok(match sig {
            libc::SIGSEGV | libc::SIGBUS => Event::Fault {
                signo: sig,
                code: info.code,
                addr: info.addr,
                // The page-fault error code is not in siginfo; only an
                // instruction fetch is recognisable (fault at rip).
                access: (info.addr == regs.rip).then_some(Access::Execute),
            },
            _ => Event::Signal {
                signo: sig,
                code: info.code,
                addr: info.addr,
            },
        });
    }
}

fn only_rax_differs(a: &Regs, b: &Regs) -> bool {
    let mut a = *a;
    a.rax = b.rax;
    a == *b
}

impl Context for PtraceContext {
    fn switch(&mut self, address_space: &dyn AddressSpace, regs: &mut Regs) -> Result<Event> {
        let space = address_space
            .as_any()
            .downcast_ref::<PtraceAddressSpace>()
            .ok_or(Error::Misuse("address space of another platform"))?;
        let shared = space.shared();
        self.fp = None;
        let me = sys::gettid();
        // At most twice: a remembered thread that was released meanwhile
        // (release_current_thread) is replaced by a new one.
        for _ in 0..2 {
            let thread = match &self.current {
                Some((id, t)) if *id == shared.id && t.tracer == me => t.clone(),
                _ => self.thread_in(shared)?,
            };
            let mut st = thread.lock()?;
            if st.gone == Some(Gone::Released) {
                self.current = None;
                continue;
            }
            st.check_alive()?;
            if shared.is_trap() {
                let runner = shared.runner(&thread, &mut st)?;
                if let Some(fp) = self.pending_fp.take() {
                    runner.set_fpstate(&fp)?;
                }
                self.interrupt
                    .set_running(Some((thread.tgid, runner.tid, trap::KICK_SIGNAL)));
                let ret = if self.interrupt.pending.swap(false, Ordering::SeqCst) {
                    Ok(Event::Interrupted)
                } else {
                    runner.run(&*self.interrupt, regs)
                };
                self.interrupt.set_running(None);
                if let Err(Error::StubDied(_)) = &ret {
                    // A runner only dies with its stub, or when its guest
                    // misbehaved (e.g. jumped to the trampoline's exit):
                    // the address space is lost either way. Make sure of
                    // it, and reap our traced thread (only we can), so
                    // the stub's first thread can be reaped too.
                    shared.kill_stub();
                    st.reap_after_kill();
                }
                return ret;
            }
            if let Some(fp) = self.pending_fp.take() {
                fpu::set(st.tid, &fp)?;
            }
            self.interrupt
                .set_running(Some((thread.tgid, thread.tid, INTERRUPT_SIGNAL)));
            let ret = if self.interrupt.pending.swap(false, Ordering::SeqCst) {
                Ok(Event::Interrupted)
            } else {
                run(self.poke_rax, &self.interrupt, &mut st, regs)
            };
            self.interrupt.set_running(None);
            return ret;
        }
        Err(Error::StubDied("stub thread released during switch".into()))
    }

    fn interrupter(&self) -> Arc<dyn Interrupter> {
        Arc::new(PtraceInterrupter(self.interrupt.clone()))
    }

    fn fpstate(&mut self) -> Result<Vec<u8>> {
        if let Some(fp) = &self.fp {
            return Ok(fp.clone());
        }
        // A forked thread saved before it first ran (a checkpoint right
        // after a fork) has the state it was given.
        if let (None, Some(fp)) = (&self.current, &self.pending_fp) {
            return Ok(fp.clone());
        }
        let mut st = self.last_thread()?;
        if let Some(runner) = st.runner.as_mut() {
            return runner.fpstate();
        }
        let fp = fpu::get(st.tid)?;
        drop(st);
        self.fp = Some(fp.clone());
        Ok(fp)
    }

    fn set_fpstate(&mut self, state: &[u8]) -> Result<()> {
        if self.current.is_none() {
            self.pending_fp = Some(state.to_vec());
            return Ok(());
        }
        let mut st = self.last_thread()?;
        if let Some(runner) = st.runner.as_mut() {
            return runner.set_fpstate(state);
        }
        let r = fpu::set(st.tid, state);
        drop(st);
        // The kernel may normalise what it took; read it back if asked.
        self.fp = None;
        r
    }
}

impl Drop for PtraceContext {
    fn drop(&mut self) {
        // The guest thread is gone: its stub threads exit (possible only on
        // their tracer thread; elsewhere they wait for that thread's end or
        // their address space's).
        self.current = None;
        for (shared, thread) in self.used.drain(..) {
            if let Some(shared) = shared.upgrade() {
                shared.release(&thread);
            }
        }
    }
}
