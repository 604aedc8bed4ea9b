//! The contract between the Sentry and the mechanisms that run guest code.
//!
//! A platform only runs guest instructions until something needs deciding (a
//! system call, a fault, a signal) and then hands control back; every decision
//! is the Sentry's. The Sentry never names a concrete platform: the binary
//! picks one and passes it in as `dyn Platform`.
#![forbid(unsafe_code)]

use std::any::Any;
use std::fmt;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

/// Page size of the guest (x86-64 base pages).
pub const PAGE_SIZE: u64 = 4096;

/// Errors a platform reports to the Sentry. These are host failures, never
/// guest mistakes: a guest mistake is an [`Event`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// a host call the platform needs failed
    #[error("{op}: {source}")]
    Host {
        /// what the platform was doing
        op: &'static str,
        /// the host's error
        source: std::io::Error,
    },
    /// the stub process running the guest disappeared
    #[error("guest stub process died unexpectedly ({0})")]
    StubDied(String),
    /// the caller broke the platform's threading contract
    #[error("platform misuse: {0}")]
    Misuse(&'static str),
}

impl Error {
    /// Wraps the current `errno` as a host error for `op`.
    pub fn last_os(op: &'static str) -> Self {
        Error::Host {
            op,
            source: std::io::Error::last_os_error(),
        }
    }
}

/// Result of platform operations.
pub type Result<T> = std::result::Result<T, Error>;

/// General-purpose registers of a guest thread, laid out like the kernel's
/// `struct user_regs_struct` (sys/user.h) so ptrace can fill it directly.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
#[allow(missing_docs)]
pub struct Regs {
    pub r15: u64,
    pub r14: u64,
    pub r13: u64,
    pub r12: u64,
    pub rbp: u64,
    pub rbx: u64,
    pub r11: u64,
    pub r10: u64,
    pub r9: u64,
    pub r8: u64,
    pub rax: u64,
    pub rcx: u64,
    pub rdx: u64,
    pub rsi: u64,
    pub rdi: u64,
    pub orig_rax: u64,
    pub rip: u64,
    pub cs: u64,
    pub eflags: u64,
    pub rsp: u64,
    pub ss: u64,
    pub fs_base: u64,
    pub gs_base: u64,
    pub ds: u64,
    pub es: u64,
    pub fs: u64,
    pub gs: u64,
}

const _: () = assert!(std::mem::size_of::<Regs>() == 27 * 8);

impl Regs {
    /// System call number at a syscall stop.
    pub fn syscall_nr(&self) -> u64 {
        self.orig_rax
    }

    /// The six system call arguments in ABI order.
    pub fn syscall_args(&self) -> [u64; 6] {
        [self.rdi, self.rsi, self.rdx, self.r10, self.r8, self.r9]
    }

    /// Fresh user-mode registers for a thread starting at `entry` with stack
    /// pointer `sp` (what `execve` leaves behind: everything else zero).
    pub fn initial(entry: u64, sp: u64) -> Self {
        Regs {
            rip: entry,
            rsp: sp,
            cs: 0x33,
            ss: 0x2b,
            eflags: 0x202,
            ..Regs::default()
        }
    }
}

impl fmt::Debug for Regs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Regs {{ rip: {:#x}, rsp: {:#x}, rax: {:#x}, orig_rax: {}, rdi: {:#x}, rsi: {:#x}, rdx: {:#x} }}",
            self.rip, self.rsp, self.rax, self.orig_rax as i64, self.rdi, self.rsi, self.rdx
        )
    }
}

/// Memory protection of a guest mapping (the `PROT_*` bits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Prot {
    /// readable
    pub read: bool,
    /// writable
    pub write: bool,
    /// executable
    pub exec: bool,
}

impl Prot {
    /// No access at all.
    pub const NONE: Prot = Prot {
        read: false,
        write: false,
        exec: false,
    };
    /// Read and write.
    pub const RW: Prot = Prot {
        read: true,
        write: true,
        exec: false,
    };

    /// From Linux `PROT_*` bits (`PROT_READ` = 1, `PROT_WRITE` = 2, `PROT_EXEC` = 4).
    pub fn from_bits(bits: u64) -> Self {
        Prot {
            read: bits & 1 != 0,
            write: bits & 2 != 0,
            exec: bits & 4 != 0,
        }
    }

    /// To Linux `PROT_*` bits.
    pub fn bits(self) -> u64 {
        u64::from(self.read) | (u64::from(self.write) << 1) | (u64::from(self.exec) << 2)
    }
}

/// Kind of memory access that faulted, when the platform can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// load
    Read,
    /// store
    Write,
    /// instruction fetch
    Execute,
}

/// Why [`Context::switch`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The guest issued a system call: number in `regs.orig_rax`, arguments in
    /// the ABI registers, `regs.rip` already past the `syscall` instruction.
    /// The Sentry writes the result to `regs.rax` and switches again.
    Syscall,
    /// A memory fault (`SIGSEGV` or `SIGBUS` raised by the CPU or the host
    /// kernel) at `addr`.
    Fault {
        /// the host signal (`SIGSEGV` or `SIGBUS`)
        signo: i32,
        /// `si_code` as the host reported it
        code: i32,
        /// faulting address (`si_addr`)
        addr: u64,
        /// access type, if known
        access: Option<Access>,
    },
    /// Another synchronous signal raised by guest execution (`SIGILL`,
    /// `SIGFPE`, `SIGTRAP`, ...), with the host's `si_code` and `si_addr`.
    Signal {
        /// signal number
        signo: i32,
        /// `si_code`
        code: i32,
        /// `si_addr`
        addr: u64,
    },
    /// [`Interrupter::interrupt`] was called while the guest ran.
    Interrupted,
}

/// Makes a running [`Context::switch`] return [`Event::Interrupted`] promptly.
/// Callable from any thread.
pub trait Interrupter: Send + Sync + fmt::Debug {
    /// Requests the interruption; harmless if the context is not running.
    fn interrupt(&self);
}

/// One sandbox's way of running guest code.
pub trait Platform: Send + Sync + fmt::Debug {
    /// Short name (`"ptrace"`, ...), for logs.
    fn name(&self) -> &'static str;

    /// Highest guest address plus one that guest mappings may use; the
    /// platform keeps what lies above for itself (trampoline pages).
    fn max_user_address(&self) -> u64;

    /// Creates an empty guest address space whose pages come from the
    /// memory file the platform was built with. It may be shared by several
    /// contexts (the threads of one guest process), each switched on its
    /// own host thread.
    fn new_address_space(&self) -> Result<Arc<dyn AddressSpace>>;

    /// Creates the context for one guest thread, bound to the calling host
    /// thread.
    fn new_context(&self) -> Result<Box<dyn Context>>;

    /// Whether several contexts, on different host threads, may run in one
    /// address space (guest threads). Without it the Sentry refuses
    /// `clone(CLONE_VM)` other than `vfork`.
    fn supports_threads(&self) -> bool {
        false
    }

    /// Lets address spaces made from now on map `len` bytes of `file`
    /// from `pos` on (a restored sandbox image's pages), read-only,
    /// wherever the Sentry maps the memory-file offsets `[window, window +
    /// len)`. Called before the first address space; false when the
    /// platform cannot (the Sentry then copies those pages).
    fn share_base(
        &self,
        file: std::os::fd::BorrowedFd<'_>,
        pos: u64,
        len: u64,
        window: u64,
    ) -> bool {
        let _ = (file, pos, len, window);
        false
    }

    /// The `clone(2)` flag sets the platform's host processes and threads
    /// use once it runs guests (a new stub, a stub's thread): the Sentry's
    /// own seccomp filter, which those processes inherit, allows exactly
    /// these besides ordinary threads.
    fn host_clone_flags(&self) -> &'static [u64] {
        &[]
    }

    /// Whether guest code runs in host processes the platform traces and
    /// filters (stubs): the Sentry's filter then allows `ptrace`,
    /// `seccomp` and the stubs' own calls.
    fn uses_stubs(&self) -> bool {
        true
    }

    /// The `ioctl(2)` requests the platform makes once it runs guests (on
    /// descriptors of its own, such as KVM's): the Sentry's seccomp filter
    /// allows exactly these besides its own few.
    fn host_ioctls(&self) -> &'static [u64] {
        &[]
    }

    /// The descriptor numbers those requests are made on, when the
    /// platform keeps them together: `(start, len)`, `len` a power of two
    /// and `start` a multiple of it. The filter then allows the requests
    /// on those numbers only.
    fn host_ioctl_fds(&self) -> Option<(u64, u64)> {
        None
    }
}

/// A guest address space: the guest-visible mappings of memory-file pages.
/// Shared by the contexts running in it; the Sentry serialises changes to
/// one address space (its memory manager's lock), but calls may come from
/// any of those contexts' host threads.
pub trait AddressSpace: Send + Sync + fmt::Debug {
    /// Maps `len` bytes of the memory file at `file_offset` to guest address
    /// `addr` with `prot`, replacing whatever was mapped there. Writes by the
    /// guest land in the memory file (the mapping is shared with the Sentry).
    fn map(&self, addr: u64, len: u64, prot: Prot, file_offset: u64) -> Result<()>;

    /// Removes guest mappings in `[addr, addr + len)`.
    fn unmap(&self, addr: u64, len: u64) -> Result<()>;

    /// Changes the protection of existing mappings in `[addr, addr + len)`.
    fn protect(&self, addr: u64, len: u64, prot: Prot) -> Result<()>;

    /// For the platform's own downcasts in [`Context::switch`].
    fn as_any(&self) -> &dyn Any;

    /// Readies the calling host thread to run guest code here, so that a
    /// platform that is out of room for another thread says so now (the
    /// new guest thread's `clone` fails) rather than at its first switch.
    fn prepare_thread(&self) -> Result<()> {
        Ok(())
    }

    /// CPU time guest code has used in this address space so far, when
    /// the platform can tell (`getrusage`, `times`, `wait4`).
    fn cpu_time(&self) -> Option<std::time::Duration> {
        None
    }

    /// Lowest address a guest mapping may start at (the platform may keep
    /// low memory for itself; `vm.mmap_min_addr` is 64 KiB).
    fn min_user_address(&self) -> u64 {
        0x10000
    }

    /// Seven bytes that may replace `code`, the seven bytes of guest code
    /// that end at `ret` (the address after a `syscall` instruction the
    /// guest just made call `nr` with), so that later calls from there
    /// reach the Sentry without a trap, when the platform can do that for
    /// this code; `None` otherwise. The replacement is valid in every
    /// address space of the platform. Write it with [`write_syscall_patch`],
    /// which also says what a `SIGILL` at a patched site means.
    fn syscall_patch(&self, code: [u8; 7], nr: u64, ret: u64) -> Option<[u8; 7]> {
        let _ = (code, nr, ret);
        None
    }

    /// The guest code a replacement from [`AddressSpace::syscall_patch`]
    /// took the place of, or `None` when `patch` is not one this platform
    /// gave: a saved sandbox carries the original code, since patches
    /// point into this platform's own tables.
    fn unpatched(&self, patch: [u8; 7]) -> Option<[u8; 7]> {
        let _ = patch;
        None
    }
}

/// An invalid opcode in 64-bit mode (`push %es` of 32-bit code).
pub const INVALID_OPCODE: u8 = 0x06;

/// Writes a [`AddressSpace::syscall_patch`] replacement over the live
/// code it replaces (an instruction, then `syscall`) one byte at a time (`write(i, byte)` stores
/// byte `i` of the site; each store must be a single, visible byte store)
/// in an order that keeps every intermediate state safe for a thread
/// running there: byte 0 becomes [`INVALID_OPCODE`] first, then byte 5
/// (which is [`INVALID_OPCODE`] in every patch), byte 6, bytes 1 to 4, and
/// last the real byte 0. A thread that meets the site meanwhile faults with
/// `SIGILL` at the site (run it there again) or at offset 5 (it had done
/// the `mov`: the fault stands for the `syscall`, with `rax` as the
/// number). Offset 5 of a finished patch faults the same way, so a jump
/// to the old `syscall` instruction (a restarted call: `rip -= 2`) still
/// makes the call.
pub fn write_syscall_patch(patch: [u8; 7], mut write: impl FnMut(usize, u8)) {
    debug_assert_eq!(patch[5], INVALID_OPCODE);
    write(0, INVALID_OPCODE);
    for i in [5, 6, 1, 2, 3, 4, 0] {
        write(i, patch[i]);
    }
}

/// One guest thread's execution context.
pub trait Context: Send + fmt::Debug {
    /// Runs the guest with `regs` in `address_space` until an [`Event`];
    /// `regs` holds the guest's registers afterwards.
    fn switch(&mut self, address_space: &dyn AddressSpace, regs: &mut Regs) -> Result<Event>;

    /// A handle other threads use to interrupt this context.
    fn interrupter(&self) -> Arc<dyn Interrupter>;

    /// CPU time the calling host thread has spent running guest code, on
    /// a platform that runs it in the Sentry's own threads (whose CPU
    /// clocks then hold it beside the Sentry's own work).
    fn guest_cpu_of_this_thread(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }

    /// The guest thread's floating-point/vector state as of the last
    /// [`Context::switch`], in the `FXSAVE` layout (512 bytes) or a larger
    /// `XSAVE` layout, for signal frames.
    fn fpstate(&mut self) -> Result<Vec<u8>> {
        Err(Error::Misuse("this platform does not expose FPU state"))
    }

    /// Replaces the floating-point state (same layout as [`Context::fpstate`])
    /// for the next switch.
    fn set_fpstate(&mut self, _state: &[u8]) -> Result<()> {
        Err(Error::Misuse("this platform does not expose FPU state"))
    }

    /// Puts the floating-point and vector registers in their state at a
    /// program's start, as `execve` leaves them: x87 control word 0x37f,
    /// MXCSR 0x1f80, every register zero, every `XSAVE` component initial.
    fn reset_fpstate(&mut self) -> Result<()> {
        let now = self.fpstate()?;
        let mut fp = vec![0u8; now.len()];
        if fp.len() >= 512 {
            fp[0..2].copy_from_slice(&0x037fu16.to_le_bytes());
            fp[24..28].copy_from_slice(&0x1f80u32.to_le_bytes());
            // MXCSR_MASK is the CPU's, as it reported it.
            fp[28..32].copy_from_slice(&now[28..32]);
        }
        if fp.len() >= 512 + 64 {
            // XSTATE_BV: x87 and SSE as given above; every other component
            // (AVX's upper halves and the rest) in its initial state.
            fp[512..520].copy_from_slice(&3u64.to_le_bytes());
        }
        self.set_fpstate(&fp)
    }
}

/// The memory file descriptor a platform maps guest pages from, borrowed at
/// construction time (platforms keep their own duplicate).
pub type MemoryFileFd<'a> = BorrowedFd<'a>;
