//! Running guest code: `PTRACE_SYSEMU` round trips and the classification
//! of what stopped the stub.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use platform::{Access, AddressSpace, Context, Error, Event, Interrupter, Regs, Result};

use crate::address_space::{PtraceAddressSpace, Stub};
use crate::sys::{self, WaitStatus};

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
    /// pidfd of the stub while a switch runs it. Guarded by the mutex so the
    /// descriptor cannot be closed (the address space dropped) while an
    /// interrupter signals through it.
    running: Mutex<Option<RawFd>>,
}

impl InterruptState {
    fn set_running(&self, pidfd: Option<RawFd>) {
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) = pidfd;
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
        if let Some(pidfd) = *running {
            if let Err(e) = sys::pidfd_send_signal(pidfd, INTERRUPT_SIGNAL) {
                tracing::debug!(error = %e, "interrupt signal not sent");
            }
        }
    }
}

/// A guest thread's context; bound to the thread that created it, which must
/// also be the one that created every address space it switches into.
#[derive(Debug)]
pub struct PtraceContext {
    tid: i32,
    /// Resume with `PTRACE_POKEUSER` of rax alone when only rax changed.
    poke_rax: bool,
    interrupt: Arc<InterruptState>,
}

impl PtraceContext {
    pub(crate) fn new(poke_rax: bool) -> Self {
        PtraceContext {
            tid: sys::gettid(),
            poke_rax,
            interrupt: Arc::default(),
        }
    }

    fn run(&self, as_: &mut Stub, regs: &mut Regs) -> Result<Event> {
        let pid = as_.stub_pid();
        loop {
            // Only write what the Sentry changed since the last stop.
            match as_.cached {
                Some(c) if c == *regs => {}
                Some(c) if self.poke_rax && only_rax_differs(&c, regs) => {
                    sys::poke_rax(pid, regs.rax)?
                }
                _ => sys::set_regs(pid, regs)?,
            }
            as_.cached = None;
            // Signal 0: whatever the stub stopped with last time (a fault, the
            // interrupt) is never delivered to it.
            sys::sysemu(pid, 0)?;
            let st = as_.wait()?;
            let sig = match st {
                WaitStatus::Stopped(sig) => sig,
                dead => return Err(Error::StubDied(dead.describe())),
            };
            sys::get_regs(pid, regs)?;
            as_.cached = Some(*regs);
            if sig == SYSCALL_STOP {
                return Ok(Event::Syscall);
            }
            if sig == INTERRUPT_SIGNAL {
                if self.interrupt.pending.swap(false, Ordering::SeqCst) {
                    return Ok(Event::Interrupted);
                }
                // A kick for an interrupt already reported: drop it.
                continue;
            }
            let info = sys::get_siginfo(pid)?;
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
        let mut stub = space.stub();
        let as_: &mut Stub = &mut stub;
        if sys::gettid() != self.tid || as_.tracer() != self.tid {
            return Err(Error::Misuse(
                "ptrace context switched from a thread other than its creator's or its address space's",
            ));
        }
        as_.check_thread()?;
        self.interrupt.set_running(Some(as_.pidfd()));
        let ret = if self.interrupt.pending.swap(false, Ordering::SeqCst) {
            Ok(Event::Interrupted)
        } else {
            self.run(as_, regs)
        };
        self.interrupt.set_running(None);
        ret
    }

    fn interrupter(&self) -> Arc<dyn Interrupter> {
        Arc::new(PtraceInterrupter(self.interrupt.clone()))
    }
}
