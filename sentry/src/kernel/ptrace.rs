//! ptrace(2) inside the sandbox: a tracee's side of the link, and the stops
//! a traced task makes (syscall entry and exit, signal delivery, events).
//!
//! A stopped tracee sleeps on its own host thread with its registers
//! published in its [`Tracee`]; the tracer reads and edits that copy and
//! sets [`Tracee::resume`], which the tracee takes back when it wakes.

use std::sync::atomic::Ordering;

use abi::signal::{SIGCHLD, SIGTRAP};
use abi::SigInfo;
use platform::Regs;
use zerocopy::FromZeros;

use std::sync::Arc;

use crate::kernel::task::{chld_info, Process, Task, Thread};
use crate::kernel::Kernel;

pub use abi::ptrace::{event, opt};

/// `CLD_TRAPPED`: the `si_code` of a tracee's stop.
pub const CLD_TRAPPED: i32 = 4;

/// Bits of [`crate::kernel::task::Thread::ptrace_flags`], read on every
/// system call without a lock.
pub const TRACED: u8 = 1;
/// The tracer asked for syscall-stops (`PTRACE_SYSCALL`).
pub const SYSCALL_STOPS: u8 = 2;
/// The tracer asked for one instruction (`PTRACE_SINGLESTEP`).
pub const STEP: u8 = 4;

/// Why a tracee is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopKind {
    SyscallEnter,
    SyscallExit,
    Signal,
    Event,
    /// `PTRACE_EVENT_EXIT`: only `SIGKILL` ends it early
    Exit,
    Group,
}

/// How the tracer let a tracee go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    Cont,
    Syscall,
    Step,
    Detach,
    Listen,
}

/// A restart request: how, and the signal to deliver (0 for none).
#[derive(Clone, Copy, Debug)]
pub struct Resume {
    pub how: How,
    pub sig: i32,
}

/// A tracee's side of the link, kept in its thread state.
#[derive(Debug)]
pub struct Tracee {
    /// the tracer's thread-group ID
    pub tracer: i32,
    /// attached with `PTRACE_SEIZE`
    pub seized: bool,
    /// `PTRACE_O_*`
    pub options: u32,
    /// the stop it is in, if any
    pub stopped: Option<StopKind>,
    /// a wait status the tracer has not collected yet
    pub report: Option<i32>,
    /// the tracee has exited (its last report is its exit status)
    pub exited: bool,
    /// set by the tracer to end the stop
    pub resume: Option<Resume>,
    /// registers while stopped (the tracer's copy)
    pub regs: Regs,
    /// floating-point state while stopped (`XSAVE` or `FXSAVE` layout)
    pub fp: Vec<u8>,
    /// the tracer changed [`Tracee::fp`]
    pub fp_changed: bool,
    /// the signal of a signal-delivery-stop (`PTRACE_GETSIGINFO`)
    pub siginfo: SigInfo,
    /// `PTRACE_GETEVENTMSG`
    pub event_msg: u64,
    /// `PTRACE_INTERRUPT` (or a seized child's first stop) is pending
    pub interrupt: bool,
    /// debug registers as the tracer set them: DR0..DR3 addresses, [6] the
    /// status of the last trap (Linux's "virtual DR6"), [7] the control
    pub debugreg: [u64; 8],
}

impl Tracee {
    /// A new link to `tracer`.
    pub fn new(tracer: i32, seized: bool, options: u32) -> Tracee {
        Tracee {
            tracer,
            seized,
            options,
            stopped: None,
            report: None,
            exited: false,
            resume: None,
            regs: Regs::default(),
            fp: Vec::new(),
            fp_changed: false,
            siginfo: SigInfo::new_zeroed(),
            event_msg: 0,
            interrupt: false,
            debugreg: [0; 8],
        }
    }
}

/// The trap flag: one instruction, then `SIGTRAP`.
const TF: u64 = 0x100;
/// `si_code`s of `SIGTRAP`.
const TRAP_TRACE: i32 = 2;
const TRAP_HWBKPT: i32 = 4;
/// DR6's single-step bit.
pub const DR_STEP: u64 = 0x4000;

/// The breakpoints and watchpoints a tracer armed in the debug registers,
/// for one run of the guest. They are not put in the host's registers: the
/// Sentry single-steps the tracee and, after each instruction, compares the
/// program counter (execute breakpoints) and the watched bytes (data
/// watchpoints, which so fire on a change, and never on a read alone).
#[derive(Debug)]
pub struct Watch {
    /// the trap flag was set for this, not by the guest or a tracer's step
    added_tf: bool,
    /// (DR index, address, length, DR7's R/W bits, bytes before the step)
    slots: Vec<(usize, u64, usize, u64, [u8; 8])>,
}

/// The slots DR7 `dr7` enables: (index, R/W bits, length in bytes).
pub fn dr7_slots(dr7: u64) -> impl Iterator<Item = (usize, u64, usize)> {
    (0..4)
        .filter(move |i| dr7 >> (2 * i) & 3 != 0)
        .map(move |i| {
            let rw = dr7 >> (16 + 4 * i) & 3;
            let len = [1, 2, 8, 4][(dr7 >> (18 + 4 * i) & 3) as usize];
            (i, rw, len)
        })
}

/// The registers as `struct user_regs_struct`'s words, in its order (what
/// `PEEKUSER`, `GETREGS` and a core file's `NT_PRSTATUS` hold).
pub fn user_regs(r: &Regs) -> [u64; 27] {
    [
        r.r15, r.r14, r.r13, r.r12, r.rbp, r.rbx, r.r11, r.r10, r.r9, r.r8, r.rax, r.rcx, r.rdx,
        r.rsi, r.rdi, r.orig_rax, r.rip, r.cs, r.eflags, r.rsp, r.ss, r.fs_base, r.gs_base, r.ds,
        r.es, r.fs, r.gs,
    ]
}

/// The wait status of a stop for signal `sig` (`0x7f` is "stopped").
pub fn stop_status(sig: i32) -> i32 {
    (sig << 8) | 0x7f
}

/// The wait status of event stop `e`.
pub fn event_status(e: u32) -> i32 {
    stop_status(SIGTRAP | ((e as i32) << 8))
}

/// Makes `tracer` trace `th` with `link`; `sigstop` is the `SIGSTOP` an
/// attach (or a traced parent's new child) starts with, if any.
pub fn link(tracer: &Process, th: &Arc<Thread>, link: Tracee, sigstop: Option<SigInfo>) {
    {
        let mut t = th.state();
        t.ptrace = Some(Box::new(link));
        if let Some(info) = sigstop {
            t.pending.enqueue(abi::signal::SIGSTOP, info);
        }
    }
    th.ptrace_flags.store(TRACED, Ordering::Relaxed);
    tracer.state().tracees.push(th.clone());
}

/// Tells tracer `tracer` that thread `tid` has something to report.
pub fn notify_tracer(kernel: &Kernel, tracer: i32, tid: i32, code: i32, status: i32) {
    if let Some(t) = kernel.process(tracer) {
        t.send_signal(kernel, SIGCHLD, chld_info(tid, code, status));
        t.wait_chld.notify();
    }
}

impl Task {
    /// Whether the task is traced (no lock taken).
    pub fn traced(&self) -> bool {
        self.thread.ptrace_flags.load(Ordering::Relaxed) & TRACED != 0
    }

    /// The tracer's options, if traced.
    pub fn ptrace_options(&self) -> Option<(i32, bool, u32)> {
        if !self.traced() {
            return None;
        }
        let t = self.thread.state();
        t.ptrace.as_deref().map(|l| (l.tracer, l.seized, l.options))
    }

    /// Enters a ptrace-stop reported as `wstatus` and sleeps until the
    /// tracer restarts it; `None` when it is no longer traced or must exit.
    /// The tracer's changes to the registers take effect here.
    pub fn ptrace_stop(&mut self, kind: StopKind, wstatus: i32, info: SigInfo) -> Option<Resume> {
        if !self.traced() {
            return None;
        }
        let fp = self.ctx.fpstate().unwrap_or_default();
        let tracer = {
            let mut t = self.thread.state();
            let l = t.ptrace.as_deref_mut()?;
            l.regs = self.regs;
            l.fp = fp;
            l.fp_changed = false;
            l.stopped = Some(kind);
            l.report = Some(wstatus);
            l.resume = None;
            l.siginfo = info;
            l.tracer
        };
        notify_tracer(&self.kernel, tracer, self.tid(), CLD_TRAPPED, wstatus >> 8);
        let w = self.thread.waiter.clone();
        let (resume, fp) = loop {
            w.prepare();
            let ends = self.proc_.state().group_exit.is_some_and(|s| {
                kind != StopKind::Exit
                    || s == crate::kernel::task::ExitStatus::Signal(abi::signal::SIGKILL)
            });
            if ends {
                let mut t = self.thread.state();
                if let Some(l) = t.ptrace.as_deref_mut() {
                    l.stopped = None;
                    l.report = None;
                }
                break (None, None);
            }
            {
                let mut t = self.thread.state();
                let Some(l) = t.ptrace.as_deref_mut() else {
                    break (None, None);
                };
                if let Some(r) = l.resume.take() {
                    l.stopped = None;
                    self.regs = l.regs;
                    let fp = l.fp_changed.then(|| std::mem::take(&mut l.fp));
                    if r.how == How::Detach {
                        t.ptrace = None;
                        self.thread.ptrace_flags.store(0, Ordering::Relaxed);
                    } else {
                        let mut flags = TRACED;
                        if r.how == How::Syscall {
                            flags |= SYSCALL_STOPS;
                        }
                        if r.how == How::Step {
                            flags |= STEP;
                        }
                        self.thread.ptrace_flags.store(flags, Ordering::Relaxed);
                    }
                    break (Some(r), fp);
                }
            }
            w.sleep(None);
        };
        if let Some(fp) = fp {
            let _ = self.ctx.set_fpstate(&fp);
        }
        // Single-stepping is the trap flag; other restarts clear it.
        if resume.is_some_and(|r| r.how == How::Step) {
            self.regs.eflags |= TF;
        } else if resume.is_some() {
            self.regs.eflags &= !TF;
        }
        resume
    }

    /// Arms the tracer's debug registers for the next run of the guest:
    /// the watched bytes now, and the trap flag.
    pub fn ptrace_watch_arm(&mut self) -> Option<Watch> {
        let dr = self.thread.state().ptrace.as_deref()?.debugreg;
        if dr[7] & 0xff == 0 {
            return None;
        }
        let slots = {
            let mm = self.mm();
            dr7_slots(dr[7])
                .map(|(i, rw, len)| {
                    let mut old = [0u8; 8];
                    if rw != 0 {
                        let _ = mm.peek(dr[i], &mut old[..len]);
                    }
                    (i, dr[i], len, rw, old)
                })
                .collect()
        };
        let added_tf = self.regs.eflags & TF == 0;
        self.regs.eflags |= TF;
        Some(Watch { added_tf, slots })
    }

    /// Checks [`Watch`] after the guest ran: a hit raises `SIGTRAP`
    /// (`TRAP_HWBKPT`, DR6 naming the slots) as the CPU's would. True when
    /// the event is dealt with: the Sentry's own step, hit or not.
    pub fn ptrace_watch_check(&mut self, w: Watch, event: &platform::Event) -> bool {
        if w.added_tf {
            self.regs.eflags &= !TF;
        }
        let stepped = matches!(
            event,
            platform::Event::Signal {
                signo: SIGTRAP,
                code: TRAP_TRACE,
                ..
            }
        );
        if !stepped {
            return false;
        }
        let mut hits = 0u64;
        {
            let mm = self.mm();
            for &(i, addr, len, rw, old) in &w.slots {
                let hit = if rw == 0 {
                    self.regs.rip == addr
                } else {
                    let mut now = [0u8; 8];
                    mm.peek(addr, &mut now[..len]).is_ok() && now[..len] != old[..len]
                };
                if hit {
                    hits |= 1 << i;
                }
            }
        }
        if hits != 0 || !w.added_tf {
            if let Some(l) = self.thread.state().ptrace.as_deref_mut() {
                l.debugreg[6] = hits | if w.added_tf { 0 } else { DR_STEP };
            }
        }
        if hits == 0 || !w.added_tf {
            // Nothing seen (run on), or the tracer's own step (reported
            // as a step, DR6 telling the rest).
            return w.added_tf;
        }
        let info = crate::kernel::task::fault_info(SIGTRAP, TRAP_HWBKPT, self.regs.rip);
        self.force_signal(SIGTRAP, info);
        true
    }

    /// A syscall-enter or syscall-exit stop, if the tracer asked for them;
    /// a signal the tracer restarts with is then sent to the task.
    pub fn ptrace_syscall_stop(&mut self, exit: bool) {
        let Some((_, _, options)) = self.ptrace_options() else {
            return;
        };
        let sig = SIGTRAP
            | if options & opt::TRACESYSGOOD != 0 {
                0x80
            } else {
                0
            };
        let kind = if exit {
            StopKind::SyscallExit
        } else {
            StopKind::SyscallEnter
        };
        if let Some(r) = self.ptrace_stop(kind, stop_status(sig), SigInfo::new_zeroed()) {
            self.ptrace_inject(r.sig);
        }
    }

    /// Event stop `e` with message `msg`, if the tracer asked for it.
    pub fn ptrace_event(&mut self, e: u32, msg: u64) -> bool {
        let Some((_, _, options)) = self.ptrace_options() else {
            return false;
        };
        if options & (1 << e) == 0 {
            return false;
        }
        if let Some(l) = self.thread.state().ptrace.as_deref_mut() {
            l.event_msg = msg;
        }
        let kind = if e == event::EXIT {
            StopKind::Exit
        } else {
            StopKind::Event
        };
        if let Some(r) = self.ptrace_stop(kind, event_status(e), SigInfo::new_zeroed()) {
            self.ptrace_inject(r.sig);
        }
        true
    }

    /// Sends signal `sig` (if any) to this thread, as a restart with a
    /// signal from a stop that was not a signal's does.
    fn ptrace_inject(&mut self, sig: i32) {
        if sig > 0 {
            let info = crate::kernel::task::user_info(sig, 0, 0, crate::kernel::task::si::KERNEL);
            self.thread.state().pending.enqueue(sig, info);
        }
    }

    /// After a successful `execve`: the exec event, or the `SIGTRAP` a
    /// tracee that did not ask for it gets (unless seized).
    pub fn ptrace_exec(&mut self, old_tid: i32) {
        let Some((_, seized, _)) = self.ptrace_options() else {
            return;
        };
        if !self.ptrace_event(event::EXEC, old_tid as u64) && !seized {
            let info = crate::kernel::task::user_info(SIGTRAP, 0, 0, 0);
            self.thread.state().pending.enqueue(SIGTRAP, info);
        }
    }

    /// A pending `PTRACE_INTERRUPT`: the task stops with
    /// `PTRACE_EVENT_STOP`.
    pub fn ptrace_take_interrupt(&mut self) {
        if !self.traced() {
            return;
        }
        let take = {
            let mut t = self.thread.state();
            t.ptrace
                .as_deref_mut()
                .is_some_and(|l| std::mem::take(&mut l.interrupt))
        };
        if take {
            if let Some(r) = self.ptrace_stop(
                StopKind::Event,
                event_status(event::STOP),
                SigInfo::new_zeroed(),
            ) {
                self.ptrace_inject(r.sig);
            }
        }
    }

    /// The exiting thread's last report to its tracer.
    pub fn ptrace_exit(&mut self, wstatus: i32, killed: bool) {
        if !self.traced() {
            return;
        }
        let tracer = {
            let mut t = self.thread.state();
            let Some(l) = t.ptrace.as_deref_mut() else {
                return;
            };
            l.exited = true;
            l.stopped = None;
            l.report = Some(wstatus);
            l.tracer
        };
        let code = if killed {
            crate::kernel::task::si::CLD_KILLED
        } else {
            crate::kernel::task::si::CLD_EXITED
        };
        notify_tracer(&self.kernel, tracer, self.tid(), code, wstatus);
    }

    /// The tracer's exit: each tracee goes free (or is killed, with
    /// `PTRACE_O_EXITKILL`).
    pub fn ptrace_release_tracees(&mut self) {
        let me = self.pid();
        let tracees = std::mem::take(&mut self.proc_.state().tracees);
        for th in tracees {
            let kill = {
                let mut t = th.state();
                match t.ptrace.as_deref_mut() {
                    Some(l) if l.tracer == me => {
                        let kill = l.options & opt::EXITKILL != 0;
                        if l.stopped.is_some() {
                            l.resume = Some(Resume {
                                how: How::Detach,
                                sig: 0,
                            });
                        } else {
                            t.ptrace = None;
                            th.ptrace_flags.store(0, Ordering::Relaxed);
                        }
                        kill
                    }
                    _ => false,
                }
            };
            if kill {
                th.process.send_signal(
                    &self.kernel,
                    abi::signal::SIGKILL,
                    crate::kernel::task::user_info(abi::signal::SIGKILL, me, 0, 0),
                );
            }
            th.waiter.wake();
        }
    }
}
