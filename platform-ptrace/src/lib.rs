//! The ptrace platform: guest code runs in a *stub process* per address
//! space, and every guest system call is caught with `PTRACE_SYSEMU` and
//! handed to the Sentry as [`platform::Event::Syscall`].
//!
//! * [`stub`] holds the stub's machine code and its creation: a fork of the
//!   address space's control thread in new user and PID namespaces (and a
//!   new network namespace unless [`PtraceOptions::stub_net_ns`] is off), with no_new_privs, nothing mapped but the stub's two pages
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
//! **Seccomp-trap mode** ([`Mode::SeccompTrap`], module `trap`): guest code runs
//! on an *untraced* runner thread per (host thread, address space) — a
//! traced thread would enter a ptrace signal-delivery-stop for every
//! SIGSYS. The filter traps (`SECCOMP_RET_TRAP`) every call not made from
//! the stub's own instructions; the stub's handler (its code page,
//! read+exec) takes SIGSYS, the faults and an interrupt kick (`SIGUSR2`)
//! on a signal stack inside the thread's *slot* (header + stack, a memfd
//! of this platform mapped shared in the stub below [`STUB_BASE`] and in
//! the Sentry), posts the event and waits (spin, yield, then futex); the Sentry
//! reads and rewrites the registers in the frame's `ucontext`, and the
//! handler `rt_sigreturn`s. fs/gs bases go through `rdfsbase`/`wrfsbase`
//! (or `arch_prctl` without FSGSBASE). FP state is the frame's XSAVE area.
//! Mapping calls still go through the traced thread's trampoline. Guest
//! mappings end at [`SLOTS_BASE`] in this mode.
//!
//! **Patched sites** (module `fast`, [`PtraceOptions::patch_syscalls`]):
//! the Sentry rewrites a trapped `mov $nr, %eax; syscall` into a jump
//! through a platform-wide table (mapped read-only in every stub at
//! [`FAST_TABLE`], entries at [`FAST_CODE`]) to the stub's *fast path*,
//! which finds the thread's slot through `%gs` (the slot while the guest's
//! gs base is 0), saves the registers in the slot header and hands the call
//! over like the handler does, without a signal frame. When the Sentry
//! changes more than rax, or wants the FP state, the fast path turns the
//! call into a frame (a `ud2` the handler reports). Guest mappings then
//! end at [`FAST_CODE`] and start at [`FAST_MIN_ADDR`].
//!
//! Unsafe code lives in `sys` (host call wrappers), `stub` (stub code and
//! the child side of the fork) and `trap` (the shared slot mapping).
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
mod fast;
mod fpu;
mod handoff;
mod spare;
mod stub;
mod sys;
mod tracee;
mod trap;

use std::os::fd::BorrowedFd;
use std::sync::Arc;

use platform::{AddressSpace, Context, Platform, Result};

pub use address_space::{PtraceAddressSpace, UntracedOutcome};
pub use context::{PtraceContext, PtraceInterrupter};
pub use fast::{FAST_CODE, FAST_CODE_LEN, FAST_MIN_ADDR, FAST_TABLE, FAST_TABLE_LEN};
pub use handoff::{handoff_stats, HandoffStats};
pub use stub::{
    CLONE_TRAMPOLINE, MAX_SLOTS, PARK, SLOTS_BASE, SLOTS_LEN, SLOT_SIZE, STUB_BASE, STUB_LEN,
    STUB_THREAD_CLONE_FLAGS, TRAMPOLINE,
};

/// The number to report for a system call that did not come from a
/// `syscall` instruction (`int $0x80`, `sysenter`: the 32-bit ABI, which the
/// Sentry does not implement), so that every platform answers it ENOSYS:
/// `syscall` leaves the return address in rcx, the others leave rcx as it
/// was. (A guest that sets rcx to match just makes a 64-bit call.)
fn not_syscall_insn(regs: &platform::Regs) -> Option<u64> {
    (regs.rcx != regs.rip).then_some(u64::MAX)
}

/// Addresses of the seccomp-trap handler's own `syscall` instructions
/// (`futex`, `rt_sigreturn`, `arch_prctl`), for isolation tests.
#[doc(hidden)]
pub fn trap_handler_syscalls_for_test() -> [u64; 3] {
    let (_, l) = stub::code();
    [
        STUB_BASE + l.futex,
        STUB_BASE + l.sigreturn,
        STUB_BASE + l.arch_prctl,
    ]
}

/// How guest system calls reach the Sentry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Every guest system call is a `PTRACE_SYSEMU` stop of a traced stub
    /// thread.
    #[default]
    Sysemu,
    /// The stub's seccomp filter traps guest system calls
    /// (`SECCOMP_RET_TRAP`) to a SIGSYS handler in the stub, which hands
    /// them to the Sentry through shared memory; no ptrace stop on the hot
    /// path. See the crate docs.
    SeccompTrap,
}

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
    /// How guest system calls are caught.
    pub mode: Mode,
    /// Seccomp-trap mode: `pause` iterations each side polls the shared
    /// state word before it sleeps on it (a futex). Useless when both are
    /// pinned to one CPU (the peer cannot run meanwhile), worth ~µs when
    /// they run on two.
    pub spin: u32,
    /// Seccomp-trap mode: `sched_yield` calls each side makes, after it
    /// spun and before it sleeps, while the peer has not answered. With
    /// both pinned to one CPU (the default) this hands the CPU straight to
    /// the peer, which is then already running when its answer is posted:
    /// no futex wake-up on either side, the cheapest same-core hand-off
    /// (see the `roundtrip` example). When the peer is blocked elsewhere
    /// each call returns at once, so the count bounds the waste.
    pub yields: u32,
    /// Seccomp-trap mode: let the stub use `rdfsbase`/`wrfsbase` for the
    /// guest's fs/gs bases when the host allows it (`HWCAP2_FSGSBASE`);
    /// without, it sets them with `arch_prctl` and the Sentry remembers
    /// them. Off only to test that fallback.
    pub fsgsbase: bool,
    /// Seccomp-trap mode: rewrite each guest `mov $nr, %eax; syscall` the
    /// Sentry sees into a jump to the stub's fast path, so that later
    /// calls from there skip the kernel's signal delivery (module `fast`).
    pub patch_syscalls: bool,
    /// Give each stub a network namespace of its own. Turn it off only
    /// when the Sentry itself runs in a fresh network namespace that holds
    /// nothing (no interface but loopback, no socket of the host's): the
    /// stubs then share it, and each new address space saves the kernel's
    /// set-up and tear-down of a network namespace, about half a
    /// millisecond of a `fork` or `execve` here. Their user and PID
    /// namespaces are their own either way; their mount, IPC and UTS
    /// namespaces are the Sentry's, which must be fresh ones too.
    pub stub_net_ns: bool,
    /// Seccomp-trap mode with [`PtraceOptions::pin_cpu`]: each runner
    /// measures its hand-offs and moves to another CPU to spin there while
    /// that is faster than yielding on one (module `handoff`); `spin` and
    /// `yields` are then its starting values.
    pub adaptive: bool,
}

/// [`PtraceOptions::yields`] by default: enough for the Sentry to answer
/// the usual call (one or two yields), and few enough that a thread whose
/// peer is blocked in the host wastes only a few µs before it sleeps.
pub const DEFAULT_YIELDS: u32 = 16;

impl Default for PtraceOptions {
    fn default() -> Self {
        PtraceOptions {
            pin_cpu: true,
            poke_rax: true,
            mode: Mode::Sysemu,
            spin: 0,
            yields: DEFAULT_YIELDS,
            fsgsbase: true,
            patch_syscalls: true,
            stub_net_ns: true,
            adaptive: true,
        }
    }
}

/// The ptrace platform; see the crate docs.
#[derive(Debug)]
pub struct PtracePlatform {
    spares: spare::Spares,
    image: Arc<stub::StubImage>,
    options: PtraceOptions,
}

impl PtracePlatform {
    /// A platform mapping guest pages from `memory_file` (duplicated).
    pub fn new(memory_file: BorrowedFd<'_>) -> Result<Self> {
        Self::with_options(memory_file, PtraceOptions::default())
    }

    /// The seccomp-trap mode with otherwise default options.
    pub fn new_seccomp_trap(memory_file: BorrowedFd<'_>) -> Result<Self> {
        Self::with_options(
            memory_file,
            PtraceOptions {
                mode: Mode::SeccompTrap,
                ..PtraceOptions::default()
            },
        )
    }

    /// Like [`PtracePlatform::new`], with explicit options.
    pub fn with_options(memory_file: BorrowedFd<'_>, options: PtraceOptions) -> Result<Self> {
        let trap = (options.mode == Mode::SeccompTrap).then(|| stub::TrapConfig {
            fsgsbase: options.fsgsbase && stub::host_has_fsgsbase(),
            spin: options.spin,
            yields: options.yields,
            patch: options.patch_syscalls,
            adaptive: options.adaptive && options.pin_cpu,
        });
        if let Ok(set) = sys::affinity_mask() {
            let _ = address_space::ALLOWED_CPUS.set(sys::cpus_of(&set));
        }
        if trap.is_some_and(|t| t.adaptive) {
            handoff::open_cpu_stat();
        }
        let mut image = stub::StubImage::new(trap)?;
        if !options.stub_net_ns {
            image.fork_flags = stub::STUB_FORK_SHARED_NET_CLONE_FLAGS;
        }
        let image = Arc::new(image);
        Ok(PtracePlatform {
            spares: spare::Spares::new(sys::dup_cloexec(memory_file)?, image.clone()),
            image,
            options,
        })
    }

    /// The options this platform was made with.
    pub fn options(&self) -> PtraceOptions {
        self.options
    }

    /// Like [`Platform::new_address_space`], with the concrete type.
    pub fn new_ptrace_address_space(&self) -> Result<PtraceAddressSpace> {
        let stub = self.spares.take()?;
        Ok(PtraceAddressSpace::from_prepared(
            stub,
            &self.image,
            self.options.pin_cpu,
        ))
    }

    /// The pid of the spare stub the next address space will take, if one
    /// is ready.
    #[doc(hidden)]
    pub fn spare_stub_for_test(&self) -> Option<i32> {
        self.spares.ready_pid()
    }

    /// Like [`Platform::new_context`], with the concrete type.
    pub fn new_ptrace_context(&self) -> PtraceContext {
        PtraceContext::new(self.options.poke_rax)
    }
}

impl Platform for PtracePlatform {
    fn host_clone_flags(&self) -> &'static [u64] {
        if self.options.stub_net_ns {
            &[stub::STUB_THREAD_CLONE_FLAGS, stub::STUB_FORK_CLONE_FLAGS]
        } else {
            &[
                stub::STUB_THREAD_CLONE_FLAGS,
                stub::STUB_FORK_SHARED_NET_CLONE_FLAGS,
            ]
        }
    }

    fn name(&self) -> &'static str {
        match self.options.mode {
            Mode::Sysemu => "ptrace",
            Mode::SeccompTrap => "seccomp-trap",
        }
    }

    fn max_user_address(&self) -> u64 {
        match self.options.mode {
            Mode::Sysemu => STUB_BASE,
            Mode::SeccompTrap if self.image.fast().is_some() => fast::FAST_CODE,
            Mode::SeccompTrap => SLOTS_BASE,
        }
    }

    fn new_address_space(&self) -> Result<Arc<dyn AddressSpace>> {
        Ok(Arc::new(self.new_ptrace_address_space()?))
    }

    fn share_base(&self, file: BorrowedFd<'_>, pos: u64, len: u64, window: u64) -> bool {
        // (a spare made before this would lack the image: none is made
        // before a second address space)
        if self.spares.ready_pid().is_some() {
            return false;
        }
        let Ok(fd) = sys::dup_cloexec(file) else {
            return false;
        };
        let base = stub::Base {
            fd,
            window,
            pos,
            len,
        };
        self.image.base.set(base).is_ok()
    }

    fn new_context(&self) -> Result<Box<dyn Context>> {
        Ok(Box::new(self.new_ptrace_context()))
    }

    fn supports_threads(&self) -> bool {
        true
    }
}
