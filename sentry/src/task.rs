//! Tasks: one guest thread each, run on the host thread that owns its
//! platform context.

use std::fmt;
use std::sync::Arc;

use abi::{Errno, KSigaction, Rlimit, StackT};
use platform::{Context, Event, Regs};
use zerocopy::FromZeros;

use crate::file::FdTable;
use crate::kernel::Kernel;
use crate::mm::MemoryManager;
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
}

/// Signal dispositions and masks of a task.
#[derive(Clone, Debug)]
pub struct SignalState {
    /// `rt_sigaction` dispositions, index = signal - 1
    pub actions: [KSigaction; 64],
    /// blocked signals
    pub mask: u64,
    /// `sigaltstack`
    pub altstack: StackT,
}

impl SignalState {
    /// What `execve` keeps: handled signals go back to their default action
    /// (ignored ones stay ignored), the mask stays, the alternate stack goes.
    pub fn reset_for_exec(&mut self) {
        for a in &mut self.actions {
            if a.handler != abi::signal::SIG_IGN {
                *a = KSigaction::new_zeroed();
            }
        }
        self.altstack = StackT::new_zeroed();
        self.altstack.flags = abi::signal::SS_DISABLE;
    }
}

impl Default for SignalState {
    fn default() -> Self {
        let mut altstack = StackT::new_zeroed();
        altstack.flags = abi::signal::SS_DISABLE;
        SignalState {
            actions: [KSigaction::new_zeroed(); 64],
            mask: 0,
            altstack,
        }
    }
}

/// A guest thread.
pub struct Task {
    /// the sandbox
    pub kernel: Arc<Kernel>,
    /// registers while stopped in the Sentry
    pub regs: Regs,
    /// address space
    pub mm: MemoryManager,
    /// platform context
    pub ctx: Box<dyn Context>,
    /// descriptors
    pub fds: FdTable,
    /// working directory
    pub cwd: Location,
    /// file creation mask
    pub umask: u32,
    /// (uid, gid) the guest sees
    pub ids: (u32, u32),
    /// signals
    pub signals: SignalState,
    /// resource limits, index = `RLIMIT_*`
    pub rlimits: [Rlimit; abi::rlimit::RLIM_NLIMITS],
    /// `set_tid_address`
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
}

impl fmt::Debug for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task")
            .field("exe", &self.exe)
            .field("regs", &self.regs)
            .finish()
    }
}

impl Task {
    /// The guest thread id (the sandbox's own numbering: the first task is 1).
    pub fn tid(&self) -> i32 {
        1
    }

    /// `RLIMIT_NOFILE`'s soft limit.
    pub fn nofile(&self) -> u64 {
        self.rlimits[abi::rlimit::RLIMIT_NOFILE as usize].cur
    }

    /// Runs the task until it exits.
    pub fn run(&mut self) -> Result<ExitStatus, platform::Error> {
        loop {
            let event = self.ctx.switch(self.mm.address_space(), &mut self.regs)?;
            match event {
                Event::Syscall => {
                    let nr = self.regs.orig_rax;
                    let args = self.regs.syscall_args();
                    let ret = crate::syscalls::dispatch(self, nr, &args);
                    if let Some(status) = self.exit {
                        return Ok(status);
                    }
                    self.regs.rax = match ret {
                        Ok(v) => v,
                        Err(e) => e.as_return(),
                    };
                }
                Event::Fault { signo, addr, .. } => {
                    if !self.mm.handle_fault(addr) {
                        tracing::debug!(
                            "guest fault at {addr:#x} (signal {signo}), rip {:#x}",
                            self.regs.rip
                        );
                        return Ok(ExitStatus::Signal(signo));
                    }
                }
                Event::Signal { signo, .. } => {
                    tracing::debug!("guest signal {signo} at rip {:#x}", self.regs.rip);
                    return Ok(ExitStatus::Signal(signo));
                }
                Event::Interrupted => {}
            }
        }
    }

    /// Ends the task with `status`.
    pub fn exit(&mut self, status: ExitStatus) -> Result<u64, Errno> {
        self.exit = Some(status);
        Ok(0)
    }
}
