//! The control thread of one address space: it forks the stub, stays the
//! tracer of the stub's first thread (which never runs guest code) for the
//! stub's whole life, and creates further stub threads on request.
//!
//! Why a thread of its own: `PTRACE_TRACEME` and `PR_SET_PDEATHSIG` bind the
//! stub to the *thread* that forked it, and a new thread can only be made by
//! injecting `clone` into a thread the requester does not trace. A small
//! dedicated thread outlives any Sentry task thread that happens to create
//! the address space.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use platform::{Error, Regs, Result};

use crate::stub::{self, StubImage, CLONE_TRAMPOLINE, STUB_BASE, STUB_THREAD_CLONE_FLAGS};
use crate::sys::{self, WaitStatus};
use crate::tracee::{event_of, Tracee, TRAP_STOP};

/// `PTRACE_EVENT_CLONE`.
const EVENT_CLONE: i32 = 3;

/// What the creator learns about a ready stub.
#[derive(Debug)]
pub(crate) struct Started {
    /// The stub's pid (its first thread's id), host namespace.
    pub pid: i32,
    /// A pidfd for the stub process (a duplicate: the control thread keeps
    /// its own for the final kill).
    pub pidfd: OwnedFd,
    /// Registers of the ready stub: the template for injected calls.
    pub template: Regs,
}

enum Request {
    /// Clone a stub thread and leave it parked, untraced; reply its host tid.
    /// With a CPU, do it there (the requester's): the hand-offs between
    /// requester, control thread and stub are then same-core, and the new
    /// thread starts on the CPU it will be pinned to.
    /// With a stack pointer: a seccomp-trap runner (through the runner
    /// clone trampoline, starting on that stack in its slot).
    NewThread(Option<usize>, Option<u64>, mpsc::SyncSender<Result<i32>>),
}

/// Handle on the control thread.
#[derive(Debug)]
pub(crate) struct Control {
    /// `None` once shut down: dropping the sender tells the thread to reap
    /// the stub's first thread and end.
    requests: Mutex<Option<mpsc::Sender<Request>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NewThread")
    }
}

impl Control {
    /// Starts the control thread, which forks and prepares the stub.
    pub(crate) fn spawn(
        memfd: BorrowedFd<'_>,
        slotfd: Option<BorrowedFd<'_>>,
        image: &Arc<StubImage>,
    ) -> Result<(Self, Started)> {
        let memfd = sys::dup_cloexec(memfd)?;
        let slotfd = slotfd.map(sys::dup_cloexec).transpose()?;
        let image = image.clone();
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<Started>>(1);
        let (tx, rx) = mpsc::channel::<Request>();
        let thread = std::thread::Builder::new()
            .name("ptrace-stub-ctl".into())
            .stack_size(256 << 10)
            .spawn(move || {
                let slotfd_b = slotfd.as_ref().map(|f| f.as_fd());
                let leader = match Leader::create(memfd.as_fd(), slotfd_b, &image) {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                drop(memfd);
                drop(slotfd);
                let started = sys::dup_cloexec(leader.pidfd_borrowed()).map(|pidfd| Started {
                    pid: leader.tracee.tid,
                    pidfd,
                    template: leader.tracee.template,
                });
                let ok = started.is_ok();
                if ready_tx.send(started).is_err() || !ok {
                    return;
                }
                leader.serve(rx);
            })
            .map_err(|source| Error::Host {
                op: "spawn(stub control thread)",
                source,
            })?;
        let started = ready_rx
            .recv()
            .map_err(|_| Error::StubDied("stub control thread ended during setup".into()))
            .and_then(|r| r);
        match started {
            Ok(s) => Ok((
                Control {
                    requests: Mutex::new(Some(tx)),
                    thread: Mutex::new(Some(thread)),
                },
                s,
            )),
            Err(e) => {
                drop(tx);
                let _ = thread.join();
                Err(e)
            }
        }
    }

    /// Asks the control thread for a new stub thread, parked and untraced;
    /// returns its host tid.
    pub(crate) fn new_thread(&self, cpu: Option<usize>) -> Result<i32> {
        self.request_thread(cpu, None)
    }

    /// Asks the control thread for a new runner starting on stack `sp`
    /// (seccomp-trap mode); returns its host tid. It waits, untraced and
    /// with every signal blocked, for its first RUN.
    pub(crate) fn new_runner(&self, cpu: Option<usize>, sp: u64) -> Result<i32> {
        self.request_thread(cpu, Some(sp))
    }

    fn request_thread(&self, cpu: Option<usize>, runner_sp: Option<u64>) -> Result<i32> {
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        {
            let requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
            let tx = requests
                .as_ref()
                .ok_or_else(|| Error::StubDied("address space shut down".into()))?;
            tx.send(Request::NewThread(cpu, runner_sp, reply_tx))
                .map_err(|_| Error::StubDied("stub control thread is gone".into()))?;
        }
        reply_rx
            .recv()
            .map_err(|_| Error::StubDied("stub control thread is gone".into()))?
    }

    /// Ends the control thread, which reaps the stub's first thread. Call
    /// after the stub was killed and its other threads reaped: a thread
    /// group leader is only reaped once it is the last.
    pub(crate) fn shutdown(&self) {
        drop(
            self.requests
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = thread {
            if t.join().is_err() {
                tracing::warn!("stub control thread panicked");
            }
        }
    }
}

/// The stub's first thread, traced by the control thread.
struct Leader {
    tracee: Tracee,
    pidfd: OwnedFd,
    /// New threads still traced by us because handing them over failed:
    /// they must be reaped before the leader can be.
    orphans: Vec<i32>,
    /// The runner clone trampoline (seccomp-trap mode).
    runner_clone: u64,
}

impl Leader {
    /// Forks and prepares a stub (see [`crate::stub`]) from the calling
    /// (control) thread.
    fn create(
        memfd: BorrowedFd<'_>,
        slotfd: Option<BorrowedFd<'_>>,
        image: &StubImage,
    ) -> Result<Self> {
        let forked = stub::fork_stub(memfd, slotfd, image)?;
        let mut leader = Leader {
            tracee: Tracee::new(forked.pid, Regs::default()),
            pidfd: forked.pidfd,
            orphans: Vec::new(),
            runner_clone: STUB_BASE + image.layout().runner_clone,
        };
        // On error, dropping `leader` kills and reaps the stub.
        leader.finish_setup(image)?;
        Ok(leader)
    }

    fn pidfd_borrowed(&self) -> BorrowedFd<'_> {
        self.pidfd.as_fd()
    }

    fn expect_trap(&mut self, what: &'static str) -> Result<()> {
        match self.tracee.wait()? {
            WaitStatus::Stopped(TRAP_STOP) => Ok(()),
            other => Err(Error::StubDied(format!("{what}: {}", other.describe()))),
        }
    }

    fn finish_setup(&mut self, image: &StubImage) -> Result<()> {
        let pid = self.tracee.tid;
        let layout = image.layout();
        // Stop 1: at the setup entry of the first copy, rdi = its address.
        self.expect_trap("stub setup (first stop)")?;
        // TRACECLONE: the clone event names the new thread's host tid, which
        // the stub (in its own pid namespace) cannot tell us.
        sys::set_options(
            pid,
            libc::PTRACE_O_EXITKILL | libc::PTRACE_O_TRACESYSGOOD | libc::PTRACE_O_TRACECLONE,
        )?;
        let mut regs = Regs::default();
        sys::get_regs(pid, &mut regs)?;
        let first = regs.rdi;
        if regs.rip != first + layout.setup + 1 {
            return Err(Error::StubDied(format!(
                "stub stopped at unexpected {:#x} during setup",
                regs.rip
            )));
        }
        // The fork inherited glibc's rseq registration, which points into
        // memory the stub is about to unmap: the kernel would then fail to
        // update it on the next preemption and kill the stub with SIGSEGV.
        // Only the task itself can unregister, so inject the call. (Threads
        // cloned later start without a registration.)
        let rseq = sys::rseq_config(pid)?;
        if rseq.pointer != 0 {
            let args = [
                rseq.pointer,
                u64::from(rseq.size),
                1, // RSEQ_FLAG_UNREGISTER
                u64::from(rseq.signature),
                0,
                0,
            ];
            self.tracee.inject_at(
                &regs,
                first,
                libc::SYS_rseq,
                args,
                "rseq(unregister) in stub",
            )?;
        }
        sys::set_regs(pid, &regs)?;
        sys::cont(pid, 0)?;
        // Stop 2: ready at STUB_BASE, filter installed.
        self.expect_trap("stub setup (ready stop)")?;
        sys::get_regs(pid, &mut regs)?;
        if regs.rip != STUB_BASE + layout.ready {
            return Err(Error::StubDied(format!(
                "stub stopped at unexpected {:#x} when ready",
                regs.rip
            )));
        }
        self.tracee.template = regs;
        Ok(())
    }

    /// Serves requests until every sender is gone, then reaps the stub.
    fn serve(mut self, rx: mpsc::Receiver<Request>) {
        while let Ok(req) = rx.recv() {
            match req {
                Request::NewThread(cpu, runner_sp, reply) => {
                    if let Some(cpu) = cpu {
                        // Best effort: only speed depends on it.
                        let _ = sys::set_affinity(0, cpu);
                        let _ = sys::set_affinity(self.tracee.tid, cpu);
                    }
                    let r = self.clone_thread(runner_sp);
                    if let Err(e) = &r {
                        tracing::warn!(pid = self.tracee.tid, error = %e, "cannot create stub thread");
                    }
                    let _ = reply.send(r);
                }
            }
        }
        // Drop kills (if not yet) and reaps.
    }

    /// Injects `clone` through the clone trampoline. The new thread is
    /// auto-attached to us (TRACECLONE) and stops at once; we detach it, and
    /// it blocks in the park loop's `pause` until its own tracer seizes it.
    fn clone_thread(&mut self, runner_sp: Option<u64>) -> Result<i32> {
        let pid = self.tracee.tid;
        self.tracee.check_alive()?;
        let mut r = self.tracee.template;
        r.rip = if runner_sp.is_some() {
            self.runner_clone
        } else {
            CLONE_TRAMPOLINE
        };
        r.rax = libc::SYS_clone as u64;
        r.orig_rax = u64::MAX;
        // clone(flags, newsp = 0: keep rsp, the stub code needs no stack,
        // parent_tid, child_tid, tls): no pointer is used with these flags.
        // A runner gets its own stack (in its slot) instead.
        let sp = runner_sp.unwrap_or(0);
        [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9] = [STUB_THREAD_CLONE_FLAGS, sp, 0, 0, 0, 0];
        sys::set_regs(pid, &r)?;
        sys::cont(pid, 0)?;
        let mut child = None;
        loop {
            match self.tracee.wait()? {
                WaitStatus::Stopped(TRAP_STOP) => break,
                WaitStatus::Stopped(s) if event_of(s) == EVENT_CLONE => {
                    child = Some(sys::get_event_msg(pid)? as i32);
                    sys::cont(pid, 0)?;
                }
                WaitStatus::Stopped(s) => {
                    if event_of(s) == 0 && s != libc::SIGSTOP && sys::get_siginfo(pid)?.code > 0 {
                        return Err(Error::StubDied(format!(
                            "clone in stub: trampoline raised signal {s}"
                        )));
                    }
                    sys::cont(pid, 0)?;
                }
                dead => {
                    return Err(Error::StubDied(format!(
                        "clone in stub: {}",
                        dead.describe()
                    )))
                }
            }
        }
        let ret = sys::peek_rax(pid)? as i64;
        if ret < 0 {
            return Err(Error::Host {
                op: "clone in stub",
                source: std::io::Error::from_raw_os_error(-ret as i32),
            });
        }
        let child = child.ok_or_else(|| Error::StubDied("clone in stub: no clone event".into()))?;
        let r = Self::hand_over(child);
        if r.is_err() {
            self.orphans.push(child);
        }
        r.map(|()| child)
    }

    fn hand_over(child: i32) -> Result<()> {
        // The auto-attached child starts with a SIGSTOP; let it have that
        // stop, then let it go (suppressing the SIGSTOP) into the park loop.
        loop {
            match sys::wait(child)? {
                WaitStatus::Stopped(s) if s & 0xff == libc::SIGSTOP => break,
                WaitStatus::Stopped(_) => sys::cont(child, 0)?,
                dead => {
                    return Err(Error::StubDied(format!(
                        "new stub thread: {}",
                        dead.describe()
                    )))
                }
            }
        }
        sys::detach(child, 0)
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        // Usually the address space already killed the stub; killing it
        // again is harmless. Through the pidfd: exact even if the pid were
        // recycled.
        if self.tracee.gone.is_none() {
            if let Err(e) = sys::pidfd_send_signal(self.pidfd.as_raw_fd(), libc::SIGKILL) {
                tracing::debug!(pid = self.tracee.tid, error = %e, "cannot kill stub");
            }
        }
        let mut orphans: Vec<Tracee> = self
            .orphans
            .drain(..)
            .map(|tid| Tracee::new(tid, Regs::default()))
            .collect();
        crate::tracee::reap_all(&mut orphans, |t| t);
        self.tracee.reap_after_kill();
    }
}
