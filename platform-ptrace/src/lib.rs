//! The ptrace platform: guest code runs in a *stub process* per address
//! space, and every guest system call is caught with `PTRACE_SYSEMU` and
//! handed to the Sentry as [`platform::Event::Syscall`].
//!
//! * [`stub`] holds the stub's machine code and its creation: a fork of the
//!   calling thread in fresh user/pid/mount/net/ipc/uts namespaces, with
//!   no_new_privs, nothing mapped but the stub's two pages above
//!   [`STUB_BASE`], one descriptor (the memory file) and a seccomp filter
//!   ([`bpf`]) that kills it for any system call not made through its
//!   trampoline — the isolation that holds even if tracing fails.
//! * [`PtraceAddressSpace`] maps memory-file ranges by injecting `mmap`,
//!   `munmap` and `mprotect` into the stopped stub.
//! * [`PtraceContext`] runs the guest (`PTRACE_SYSEMU` + `waitpid`) and turns
//!   each stop into an event.
//!
//! ptrace binds a tracee to one tracer *thread*: an address space, and every
//! context switched into it, belong to the thread that created them. Using
//! them elsewhere is [`platform::Error::Misuse`].
//!
//! Unsafe code lives in `sys` (host call wrappers) and `stub` (stub code and
//! the child side of the fork).
//!
//! Contract with the rest of the Sentry process:
//! * no thread may `wait` for arbitrary children (`waitpid(-1, ..)`): stubs
//!   are children of the Sentry, and a stolen ptrace stop hangs a switch;
//! * with [`PtraceOptions::pin_cpu`] (the default) a thread that creates an
//!   address space stays pinned to the CPU it was running on;
//! * a guest that calls into the host's `[vsyscall]` page (which cannot be
//!   unmapped) bypasses ptrace but not seccomp: its stub is killed, and the
//!   next switch reports [`platform::Error::StubDied`].

mod address_space;
pub mod bpf;
mod context;
mod stub;
mod sys;

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use platform::{AddressSpace, Context, Platform, Result};

pub use address_space::{PtraceAddressSpace, UntracedOutcome};
pub use context::{PtraceContext, PtraceInterrupter};
pub use stub::{STUB_BASE, STUB_LEN};

/// Tuning knobs of [`PtracePlatform`]. The defaults are the measured-fastest
/// settings (see the `roundtrip` example).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PtraceOptions {
    /// Pin the tracer thread, and so the stubs it creates, to the CPU it runs
    /// on when it creates an address space: every ptrace stop becomes a
    /// same-core hand-off instead of a cross-core wake-up.
    pub pin_cpu: bool,
    /// When only `rax` changed since the last stop (the usual syscall
    /// return), write it with `PTRACE_POKEUSER` instead of `PTRACE_SETREGS`.
    pub poke_rax: bool,
}

impl Default for PtraceOptions {
    fn default() -> Self {
        PtraceOptions {
            pin_cpu: true,
            poke_rax: true,
        }
    }
}

/// The ptrace platform; see the crate docs.
#[derive(Debug)]
pub struct PtracePlatform {
    memory_file: OwnedFd,
    image: Arc<stub::StubImage>,
    options: PtraceOptions,
}

impl PtracePlatform {
    /// A platform mapping guest pages from `memory_file` (duplicated).
    pub fn new(memory_file: BorrowedFd<'_>) -> Result<Self> {
        Self::with_options(memory_file, PtraceOptions::default())
    }

    /// Like [`PtracePlatform::new`], with explicit options.
    pub fn with_options(memory_file: BorrowedFd<'_>, options: PtraceOptions) -> Result<Self> {
        Ok(PtracePlatform {
            memory_file: sys::dup_cloexec(memory_file)?,
            image: Arc::new(stub::StubImage::new()),
            options,
        })
    }

    /// Like [`Platform::new_address_space`], with the concrete type.
    pub fn new_ptrace_address_space(&self) -> Result<PtraceAddressSpace> {
        PtraceAddressSpace::create(self.memory_file.as_fd(), &self.image, self.options.pin_cpu)
    }

    /// Like [`Platform::new_context`], with the concrete type.
    pub fn new_ptrace_context(&self) -> PtraceContext {
        PtraceContext::new(self.options.poke_rax)
    }
}

impl Platform for PtracePlatform {
    fn name(&self) -> &'static str {
        "ptrace"
    }

    fn max_user_address(&self) -> u64 {
        STUB_BASE
    }

    fn new_address_space(&self) -> Result<Arc<dyn AddressSpace>> {
        Ok(Arc::new(self.new_ptrace_address_space()?))
    }

    fn new_context(&self) -> Result<Box<dyn Context>> {
        Ok(Box::new(self.new_ptrace_context()))
    }
}
