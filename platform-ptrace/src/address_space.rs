//! One guest address space = one stub process, traced by the thread that
//! created it. Mapping changes are system calls injected into the stub
//! through its trampoline.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};

use platform::{AddressSpace, Error, Prot, Regs, Result, PAGE_SIZE};

use crate::stub::{self, StubImage, STUB_BASE, STUB_MEMFD, TRAMPOLINE};
use crate::sys::{self, WaitStatus};

/// `SIGTRAP` stop (the `int3` after the trampoline's `syscall`).
const TRAP_STOP: i32 = libc::SIGTRAP;

/// A guest address space backed by a traced stub process. The stub's
/// state lives behind a lock because the trait's methods take `&self` (the
/// Sentry shares an address space between the threads of a process).
#[derive(Debug)]
pub struct PtraceAddressSpace {
    pid: i32,
    stub: std::sync::Mutex<Stub>,
}

/// The traced stub process itself.
#[derive(Debug)]
pub(crate) struct Stub {
    pid: i32,
    pidfd: OwnedFd,
    /// The only thread allowed to issue ptrace requests to the stub.
    tracer: i32,
    /// Stub registers as of its last stop, when known exactly; lets
    /// `switch` skip `PTRACE_SETREGS` when the Sentry changed nothing.
    pub(crate) cached: Option<Regs>,
    /// Registers of the ready stub: the template for injected calls.
    template: Regs,
    /// The stub has been waited for after its death; its pid is no longer
    /// ours to signal.
    reaped: bool,
}

impl PtraceAddressSpace {
    /// Forks and prepares a stub (see [`crate::stub`]).
    pub(crate) fn create(memfd: BorrowedFd<'_>, image: &StubImage, pin: bool) -> Result<Self> {
        let stub = Stub::create(memfd, image, pin)?;
        Ok(PtraceAddressSpace { pid: stub.pid, stub: std::sync::Mutex::new(stub) })
    }

    /// The stub's host pid (for tests and diagnostics).
    pub fn stub_pid(&self) -> i32 {
        self.pid
    }

    /// Locks the stub.
    pub(crate) fn stub(&self) -> std::sync::MutexGuard<'_, Stub> {
        self.stub.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Resumes the stub *without* system call emulation (`PTRACE_CONT`)
    /// until it stops or dies: only for tests proving that the seccomp
    /// filter holds when tracing does not.
    #[doc(hidden)]
    pub fn run_untraced_for_test(&self, regs: &Regs) -> Result<UntracedOutcome> {
        self.stub().run_untraced_for_test(regs)
    }

    /// Cost probe: one injected call (see [`Stub::inject_nop_for_bench`]).
    #[doc(hidden)]
    pub fn inject_nop_for_bench(&self) -> Result<()> {
        self.stub().inject_nop_for_bench()
    }
}

impl Stub {
    /// Forks and prepares a stub (see [`crate::stub`]).
    pub(crate) fn create(memfd: BorrowedFd<'_>, image: &StubImage, pin: bool) -> Result<Self> {
        if pin {
            // The stub inherits the mask: tracer and stub share a CPU, so
            // every ptrace stop is a same-core hand-off.
            sys::pin_to_current_cpu()?;
        }
        let forked = stub::fork_stub(memfd, image)?;
        let mut as_ = Stub {
            pid: forked.pid,
            pidfd: forked.pidfd,
            tracer: sys::gettid(),
            cached: None,
            template: Regs::default(),
            reaped: false,
        };
        // On error, dropping `as_` kills and reaps the stub.
        as_.finish_setup(image)?;
        Ok(as_)
    }

    fn finish_setup(&mut self, image: &StubImage) -> Result<()> {
        let layout = image.layout();
        // Stop 1: at the setup entry of the first copy, rdi = its address.
        self.expect_trap("stub setup (first stop)")?;
        sys::set_options(
            self.pid,
            libc::PTRACE_O_EXITKILL | libc::PTRACE_O_TRACESYSGOOD,
        )?;
        let mut regs = Regs::default();
        sys::get_regs(self.pid, &mut regs)?;
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
        // Only the task itself can unregister, so inject the call.
        let rseq = sys::rseq_config(self.pid)?;
        if rseq.pointer != 0 {
            let args = [
                rseq.pointer,
                u64::from(rseq.size),
                1, // RSEQ_FLAG_UNREGISTER
                u64::from(rseq.signature),
                0,
                0,
            ];
            self.inject_at(
                &regs,
                first,
                libc::SYS_rseq,
                args,
                "rseq(unregister) in stub",
            )?;
        }
        sys::set_regs(self.pid, &regs)?;
        sys::cont(self.pid, 0)?;
        // Stop 2: ready at STUB_BASE, filter installed.
        self.expect_trap("stub setup (ready stop)")?;
        sys::get_regs(self.pid, &mut regs)?;
        if regs.rip != STUB_BASE + layout.ready {
            return Err(Error::StubDied(format!(
                "stub stopped at unexpected {:#x} when ready",
                regs.rip
            )));
        }
        self.template = regs;
        self.cached = Some(regs);
        Ok(())
    }

    /// Waits for a `SIGTRAP` stop; anything else during setup is fatal.
    fn expect_trap(&mut self, what: &'static str) -> Result<()> {
        match self.wait()? {
            WaitStatus::Stopped(TRAP_STOP) => Ok(()),
            other => Err(Error::StubDied(format!("{what}: {}", other.describe()))),
        }
    }

    /// The stub's host pid (for tests and diagnostics).
    pub fn stub_pid(&self) -> i32 {
        self.pid
    }

    pub(crate) fn pidfd(&self) -> RawFd {
        self.pidfd.as_raw_fd()
    }

    pub(crate) fn tracer(&self) -> i32 {
        self.tracer
    }

    pub(crate) fn check_thread(&self) -> Result<()> {
        if sys::gettid() != self.tracer {
            return Err(Error::Misuse(
                "ptrace address space used from a thread other than its creator",
            ));
        }
        if self.reaped {
            return Err(Error::StubDied("stub already dead".into()));
        }
        Ok(())
    }

    /// `waitpid` on the stub, noting its death.
    pub(crate) fn wait(&mut self) -> Result<WaitStatus> {
        let st = sys::wait(self.pid)?;
        if !matches!(st, WaitStatus::Stopped(_)) {
            self.reaped = true;
            self.cached = None;
        }
        Ok(st)
    }

    /// Runs system call `nr` in the stub through the trampoline at
    /// `trampoline` and returns its result. The stub's registers are left
    /// clobbered (`cached` is cleared; the next switch sets all of them).
    fn inject_at(
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
        sys::set_regs(self.pid, &r)?;
        sys::cont(self.pid, 0)?;
        loop {
            match self.wait()? {
                WaitStatus::Stopped(TRAP_STOP) => break,
                // A signal meant for an earlier switch (an interrupt kick
                // that arrived late) or sent from outside: drop it.
                WaitStatus::Stopped(libc::SIGSTOP) => sys::cont(self.pid, 0)?,
                WaitStatus::Stopped(sig) if sys::get_siginfo(self.pid)?.code <= 0 => {
                    tracing::debug!(sig, "dropping host-sent signal to stub");
                    sys::cont(self.pid, 0)?
                }
                // The trampoline itself faulted: the stub is broken, and
                // resuming it would only fault again. Kill it so later calls
                // fail fast instead of spinning.
                WaitStatus::Stopped(sig) => {
                    self.kill_and_reap();
                    return Err(Error::StubDied(format!(
                        "{op}: stub trampoline raised signal {sig}"
                    )));
                }
                dead => return Err(Error::StubDied(format!("{op}: {}", dead.describe()))),
            }
        }
        let ret = sys::peek_rax(self.pid)?;
        let sret = ret as i64;
        if (-4095..0).contains(&sret) {
            return Err(Error::Host {
                op,
                source: std::io::Error::from_raw_os_error(-sret as i32),
            });
        }
        Ok(ret)
    }

    fn inject(&mut self, nr: libc::c_long, args: [u64; 6], op: &'static str) -> Result<u64> {
        self.check_thread()?;
        let t = self.template;
        self.inject_at(&t, TRAMPOLINE, nr, args, op)
    }

    /// Guest ranges must be page aligned, non-empty and below the stub.
    fn check_range(addr: u64, len: u64) -> Result<()> {
        if !addr.is_multiple_of(PAGE_SIZE) || !len.is_multiple_of(PAGE_SIZE) || len == 0 {
            return Err(Error::Misuse("guest range not page aligned or empty"));
        }
        match addr.checked_add(len) {
            Some(end) if end <= STUB_BASE => Ok(()),
            _ => Err(Error::Misuse("guest range reaches the stub's pages")),
        }
    }

    fn run_untraced_for_test(&mut self, regs: &Regs) -> Result<UntracedOutcome> {
        self.check_thread()?;
        self.cached = None;
        sys::set_regs(self.pid, regs)?;
        sys::cont(self.pid, 0)?;
        Ok(match self.wait()? {
            WaitStatus::Stopped(s) => UntracedOutcome::Stopped(s),
            WaitStatus::Exited(c) => UntracedOutcome::Exited(c),
            WaitStatus::Signaled(s) => UntracedOutcome::Killed(s),
        })
    }

    /// Cost probe: one injected `mprotect` of an unmapped page (the stub
    /// answers ENOMEM), i.e. the whole injection round trip.
    fn inject_nop_for_bench(&mut self) -> Result<()> {
        match self.inject(
            libc::SYS_mprotect,
            [0x1000, PAGE_SIZE, 0, 0, 0, 0],
            "mprotect(probe)",
        ) {
            Err(Error::Host { .. }) | Ok(_) => Ok(()),
            Err(e) => Err(e),
        }
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

impl AddressSpace for PtraceAddressSpace {
    fn map(&self, addr: u64, len: u64, prot: Prot, file_offset: u64) -> Result<()> {
        self.stub().map(addr, len, prot, file_offset)
    }

    fn unmap(&self, addr: u64, len: u64) -> Result<()> {
        self.stub().unmap(addr, len)
    }

    fn protect(&self, addr: u64, len: u64, prot: Prot) -> Result<()> {
        self.stub().protect(addr, len, prot)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Stub {
    fn map(&mut self, addr: u64, len: u64, prot: Prot, file_offset: u64) -> Result<()> {
        Self::check_range(addr, len)?;
        if !file_offset.is_multiple_of(PAGE_SIZE) {
            return Err(Error::Misuse("memory file offset not page aligned"));
        }
        let flags = (libc::MAP_SHARED | libc::MAP_FIXED) as u64;
        let args = [
            addr,
            len,
            prot.bits(),
            flags,
            STUB_MEMFD as u64,
            file_offset,
        ];
        let got = self.inject(libc::SYS_mmap, args, "mmap in stub")?;
        if got != addr {
            return Err(Error::StubDied(format!(
                "stub mmap returned {got:#x}, not {addr:#x}"
            )));
        }
        Ok(())
    }

    fn unmap(&mut self, addr: u64, len: u64) -> Result<()> {
        Self::check_range(addr, len)?;
        self.inject(libc::SYS_munmap, [addr, len, 0, 0, 0, 0], "munmap in stub")?;
        Ok(())
    }

    fn protect(&mut self, addr: u64, len: u64, prot: Prot) -> Result<()> {
        Self::check_range(addr, len)?;
        self.inject(
            libc::SYS_mprotect,
            [addr, len, prot.bits(), 0, 0, 0],
            "mprotect in stub",
        )?;
        Ok(())
    }
}

impl Stub {
    /// SIGKILLs the stub, if not reaped yet, and waits for its death.
    fn kill_and_reap(&mut self) {
        if self.reaped {
            return;
        }
        // Through the pidfd: exact even if the pid were recycled.
        if let Err(e) = sys::pidfd_send_signal(self.pidfd.as_raw_fd(), libc::SIGKILL) {
            tracing::warn!(pid = self.pid, error = %e, "cannot kill stub");
            let _ = sys::kill(self.pid, libc::SIGKILL);
        }
        // Reap it (any thread of the tracer's process may). A stop reported
        // before the kill landed is skipped.
        loop {
            match sys::wait(self.pid) {
                Ok(WaitStatus::Stopped(_)) => continue,
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(pid = self.pid, error = %e, "cannot reap stub");
                    break;
                }
            }
        }
        self.reaped = true;
        self.cached = None;
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.kill_and_reap();
    }
}
