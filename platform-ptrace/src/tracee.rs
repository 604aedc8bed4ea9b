//! One traced thread of a stub process: its ptrace bookkeeping, and system
//! calls injected through the stub's trampolines.
//!
//! Only the thread's tracer may issue ptrace requests to it; callers enforce
//! that (see [`crate::address_space::StubThread`]).

use platform::{Error, Regs, Result};

use crate::stub::TRAMPOLINE;
use crate::sys::{self, WaitStatus};

/// `SIGTRAP` stop (the `int3` after a trampoline's `syscall`).
pub(crate) const TRAP_STOP: i32 = libc::SIGTRAP;

/// `PTRACE_EVENT_*` number of a ptrace stop (bits 8..16 of `status >> 8`).
pub(crate) fn event_of(stop: i32) -> i32 {
    stop >> 8
}

/// Why a tracee is no longer usable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Gone {
    /// We made it exit (its context or tracer thread let it go).
    Released,
    /// It died (killed, or the whole stub died); the words say how.
    Died(String),
}

/// One traced stub thread.
#[derive(Debug)]
pub(crate) struct Tracee {
    /// Host thread id (in the tracer's pid namespace).
    pub(crate) tid: i32,
    /// Registers as of its last stop, when known exactly; lets a switch
    /// skip `PTRACE_SETREGS` when the Sentry changed nothing.
    pub(crate) cached: Option<Regs>,
    /// Registers of the ready stub: the template for injected calls.
    pub(crate) template: Regs,
    /// Set once the thread has been waited for after its end.
    pub(crate) gone: Option<Gone>,
    /// Seccomp-trap mode: the untraced thread that runs this host thread's
    /// guest code in the same stub (this traced one only injects calls).
    pub(crate) runner: Option<crate::trap::Runner>,
}

impl Tracee {
    pub(crate) fn new(tid: i32, template: Regs) -> Self {
        Tracee {
            tid,
            cached: None,
            template,
            gone: None,
            runner: None,
        }
    }

    /// Fails unless the thread is still there to be traced.
    pub(crate) fn check_alive(&self) -> Result<()> {
        match &self.gone {
            None => Ok(()),
            Some(Gone::Released) => Err(Error::StubDied("stub thread already released".into())),
            Some(Gone::Died(how)) => Err(Error::StubDied(how.clone())),
        }
    }

    /// `waitpid` on the thread, noting its end.
    pub(crate) fn wait(&mut self) -> Result<WaitStatus> {
        let st = match sys::wait(self.tid) {
            Ok(st) => st,
            Err(e) => {
                // ECHILD: the thread is gone and was reaped elsewhere (its
                // process was killed while no one waited for it).
                self.gone.get_or_insert(Gone::Died(e.to_string()));
                self.cached = None;
                return Err(e);
            }
        };
        if !matches!(st, WaitStatus::Stopped(_)) {
            self.gone.get_or_insert(Gone::Died(st.describe()));
            self.cached = None;
        }
        Ok(st)
    }

    /// Resumes after a stop that is not the one expected: signals sent
    /// from outside (or a late interrupt kick) and ptrace event stops are
    /// dropped; a signal the CPU raised in the trampoline means the stub is
    /// broken, and is an error.
    fn skip_stray_stop(&mut self, sig: i32, op: &'static str) -> Result<()> {
        if event_of(sig) != 0 || sig == libc::SIGSTOP || sys::get_siginfo(self.tid)?.code <= 0 {
            tracing::debug!(sig, tid = self.tid, "dropping stray stop of stub thread");
            return sys::cont(self.tid, 0);
        }
        Err(Error::StubDied(format!(
            "{op}: stub trampoline raised signal {sig}"
        )))
    }

    /// Runs system call `nr` in the thread through the trampoline at
    /// `trampoline` (starting from `template`) and returns its result. The
    /// thread's registers are left clobbered (`cached` is cleared; the next
    /// switch sets all of them).
    pub(crate) fn inject_at(
        &mut self,
        template: &Regs,
        trampoline: u64,
        nr: libc::c_long,
        args: [u64; 6],
        op: &'static str,
    ) -> Result<u64> {
        let mut r = *template;
        r.rip = trampoline;
        r.rax = nr as u64;
        // Not in a system call as far as restart logic is concerned.
        r.orig_rax = u64::MAX;
        [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9] = args;
        self.cached = None;
        sys::set_regs(self.tid, &r)?;
        sys::cont(self.tid, 0)?;
        loop {
            match self.wait()? {
                WaitStatus::Stopped(TRAP_STOP) => break,
                WaitStatus::Stopped(sig) => self.skip_stray_stop(sig, op)?,
                dead => return Err(Error::StubDied(format!("{op}: {}", dead.describe()))),
            }
        }
        let ret = sys::peek_rax(self.tid)?;
        let sret = ret as i64;
        if (-4095..0).contains(&sret) {
            return Err(Error::Host {
                op,
                source: std::io::Error::from_raw_os_error(-sret as i32),
            });
        }
        Ok(ret)
    }

    /// [`Tracee::inject_at`] through the ordinary trampoline.
    pub(crate) fn inject(
        &mut self,
        nr: libc::c_long,
        args: [u64; 6],
        op: &'static str,
    ) -> Result<u64> {
        self.check_alive()?;
        let t = self.template;
        self.inject_at(&t, TRAMPOLINE, nr, args, op)
    }

    /// Makes the thread leave with `exit(0)` (the thread only, never its
    /// process) and reaps it. Harmless if it is already gone.
    pub(crate) fn exit_thread(&mut self) -> Result<()> {
        // The runner leaves by itself (told through its slot).
        self.runner = None;
        if self.gone.is_some() {
            return Ok(());
        }
        let mut r = self.template;
        r.rip = TRAMPOLINE;
        r.rax = libc::SYS_exit as u64;
        r.orig_rax = u64::MAX;
        r.rdi = 0;
        self.cached = None;
        sys::set_regs(self.tid, &r)?;
        sys::cont(self.tid, 0)?;
        loop {
            match self.wait()? {
                WaitStatus::Exited(_) => {
                    self.gone = Some(Gone::Released);
                    return Ok(());
                }
                WaitStatus::Signaled(_) => return Ok(()),
                WaitStatus::Stopped(sig) => self.skip_stray_stop(sig, "exit(stub thread)")?,
            }
        }
    }

    /// After the whole stub was sent `SIGKILL`: reaps this thread if it has
    /// ended (skipping stops reported before the kill landed), without
    /// waiting. True once it is gone.
    ///
    /// Never a blocking wait: a dying thread can depend on *another* thread
    /// being reaped first (the stub is the init of its PID namespace, and
    /// its last thread waits in the kernel until every other task of the
    /// namespace is reaped, including sibling threads traced by other
    /// Sentry threads), so a blocking wait in the wrong order deadlocks.
    pub(crate) fn try_reap(&mut self) -> bool {
        if self.gone.is_some() {
            return true;
        }
        match sys::wait_nohang(self.tid) {
            Ok(None) | Ok(Some(WaitStatus::Stopped(_))) => false,
            Ok(Some(st)) => {
                self.gone = Some(Gone::Died(st.describe()));
                self.cached = None;
                true
            }
            Err(e) => {
                // ECHILD: the thread is gone and was reaped elsewhere.
                tracing::debug!(tid = self.tid, error = %e, "stub thread not reapable");
                self.gone = Some(Gone::Died(e.to_string()));
                self.cached = None;
                true
            }
        }
    }

    /// After the whole stub was sent `SIGKILL`: waits (polling, see
    /// [`Tracee::try_reap`]) for this thread's end, for at most
    /// [`REAP_TIMEOUT`].
    pub(crate) fn reap_after_kill(&mut self) {
        reap_all(std::slice::from_mut(self), |t| t);
    }

    /// Resumes the thread *without* system call emulation (`PTRACE_CONT`)
    /// with `regs` until it stops or dies (isolation tests only).
    pub(crate) fn run_untraced(&mut self, regs: &Regs) -> Result<WaitStatus> {
        self.check_alive()?;
        self.cached = None;
        sys::set_regs(self.tid, regs)?;
        sys::cont(self.tid, 0)?;
        self.wait()
    }
}

/// How long reaping a killed stub may take before the Sentry gives up on
/// it (the kernel still ends it: `PTRACE_O_EXITKILL` and the kill).
pub(crate) const REAP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Reaps every thread of `items` (each reached through `tracee`), in
/// whatever order they end, polling until all are gone or
/// [`REAP_TIMEOUT`] passed.
pub(crate) fn reap_all<T>(items: &mut [T], mut tracee: impl FnMut(&mut T) -> &mut Tracee) {
    let deadline = std::time::Instant::now() + REAP_TIMEOUT;
    let mut pause = std::time::Duration::from_micros(50);
    loop {
        let mut left = 0;
        for it in items.iter_mut() {
            if !tracee(it).try_reap() {
                left += 1;
            }
        }
        if left == 0 {
            return;
        }
        if std::time::Instant::now() >= deadline {
            tracing::warn!(
                left,
                "killed stub threads not reaped in time; leaving them to the kernel"
            );
            return;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(5));
    }
}
