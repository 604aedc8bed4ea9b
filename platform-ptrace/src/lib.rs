//! The ptrace platform: guest code runs in a *stub process* per address
//! space, and every guest system call is caught with `PTRACE_SYSEMU` and
//! handed to the Sentry as [`platform::Event::Syscall`].
//!
//! * [`stub`] holds the stub's machine code and its creation: a fork of the
//!   address space's control thread in fresh user/pid/mount/net/ipc/uts
//!   namespaces, with no_new_privs, nothing mapped but the stub's two pages
//!   above [`STUB_BASE`], one descriptor (the memory file) and a seccomp
//!   filter ([`bpf`]) that kills it for any system call not made through its
//!   trampolines — the isolation that holds even if tracing fails.
//! * ptrace binds a tracee thread to one tracer *thread*, so every host
//!   thread that uses an address space gets its own *stub thread* in that
//!   stub process, traced by it. The stub's first thread stays stopped under
//!   a small control thread (`control`) that forked it and clones new stub
//!   threads on request.
//! * [`PtraceAddressSpace`] maps memory-file ranges by injecting `mmap`,
//!   `munmap` and `mprotect` through the calling thread's stub thread.
//! * [`PtraceContext`] runs the guest on the calling thread's stub thread
//!   (`PTRACE_SYSEMU` + `waitpid`) and turns each stop into an event.
//!
//! Unsafe code lives in `sys` (host call wrappers) and `stub` (stub code and
//! the child side of the fork).
//!
//! Contract with the rest of the Sentry process:
//! * any thread may use an address space, but a stub thread belongs to the
//!   host thread that first used the address space: a context is switched
//!   from one host thread, and [`Context::fpstate`] is read there too;
//! * dropping a context on its host thread makes its stub threads exit; a
//!   host thread that ends releases the stub threads it still has (a
//!   thread-local destructor). Only a host thread that dies without running
//!   those (killed, `pthread_exit` from foreign code) takes the whole stub
//!   process with it (`PTRACE_O_EXITKILL`): other guest threads of that
//!   address space then get [`platform::Error::StubDied`];
//! * no thread may `wait` for arbitrary children (`waitpid(-1, ..)`): stubs
//!   are children of the Sentry, and a stolen ptrace stop hangs a switch;
//! * with [`PtraceOptions::pin_cpu`] (the default) a thread that gets a stub
//!   thread stays pinned to the CPU it was running on, and so does its stub
//!   thread;
//! * a guest that calls into the host's `[vsyscall]` page (which cannot be
//!   unmapped) bypasses ptrace but not seccomp: its stub is killed, and the
//!   next switch reports [`platform::Error::StubDied`].

mod address_space;
pub mod bpf;
mod context;
mod control;
mod fpu;
mod stub;
mod sys;
mod tracee;

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use platform::{AddressSpace, Context, Platform, Result};

pub use address_space::{PtraceAddressSpace, UntracedOutcome};
pub use context::{PtraceContext, PtraceInterrupter};
pub use stub::{CLONE_TRAMPOLINE, PARK, STUB_BASE, STUB_LEN, STUB_THREAD_CLONE_FLAGS, TRAMPOLINE};

/// Tuning knobs of [`PtracePlatform`]. The defaults are the measured-fastest
/// settings (see the `roundtrip` example).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PtraceOptions {
    /// Pin a host thread, and each stub thread it traces, to the CPU it runs
    /// on when it gets its first stub thread: every ptrace stop becomes a
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

    fn supports_threads(&self) -> bool {
        true
    }
}
