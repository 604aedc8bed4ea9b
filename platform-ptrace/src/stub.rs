//! The stub process: its machine code, its image (code page + seccomp filter
//! page) and its creation.
//!
//! The stub is a fork of the calling thread in fresh namespaces. Right after
//! the fork it copies the image to a page the kernel picks and jumps there;
//! that code stops once so the tracer can drop the inherited rseq
//! registration, then unmaps every other mapping (the Sentry's copy-on-write
//! memory must not be reachable from guest code), moves itself to
//! [`STUB_BASE`], installs the seccomp filter and stops again. From then on
//! the address space holds the two stub pages and whatever the Sentry maps.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use platform::{Error, Result, PAGE_SIZE};

use crate::bpf::{self, SockFilter};
use crate::sys;

/// Where the stub's pages live: 2 MiB below the top of the user address
/// space, above anything a guest maps (guest mappings end here).
pub const STUB_BASE: u64 = 0x7fff_ffe0_0000;
/// Code page + data (filter) page.
pub const STUB_LEN: u64 = 2 * PAGE_SIZE;
/// End of the x86-64 user address space with 4-level paging (`TASK_SIZE`).
pub const USER_TOP: u64 = 0x7fff_ffff_f000;
/// The stub's descriptor for the memory file.
pub const STUB_MEMFD: i32 = 3;
/// Address of the trampoline's `syscall; int3` pair (offset 0 of the code).
pub const TRAMPOLINE: u64 = STUB_BASE;
/// `instruction_pointer` seccomp sees for a trampoline syscall.
pub const TRAMPOLINE_SYSCALL_IP: u64 = TRAMPOLINE + 2;
/// The clone trampoline: `syscall`, then the parent stops at an `int3`
/// while the child (rax = 0) falls into the park loop.
pub const CLONE_TRAMPOLINE: u64 = STUB_BASE + 3;
/// `instruction_pointer` seccomp sees for the clone trampoline's syscall.
pub const CLONE_SYSCALL_IP: u64 = CLONE_TRAMPOLINE + 2;
/// The park loop (`pause` forever) where a new stub thread waits, untraced,
/// for its tracer to seize it.
pub const PARK: u64 = STUB_BASE + 11;
/// `instruction_pointer` seccomp sees for the park loop's `pause`.
pub const PARK_SYSCALL_IP: u64 = PARK + 7;
/// The only `clone` flags the filter lets through: a thread sharing
/// everything, with no TLS, tid pointers, exit signal or new namespaces.
pub const STUB_THREAD_CLONE_FLAGS: u64 = (libc::CLONE_VM
    | libc::CLONE_FS
    | libc::CLONE_FILES
    | libc::CLONE_SIGHAND
    | libc::CLONE_THREAD
    | libc::CLONE_SYSVSEM) as u64;

/// The syscall instruction pointers the filter accepts.
pub const STUB_IPS: bpf::StubIps = bpf::StubIps {
    trampoline: TRAMPOLINE_SYSCALL_IP,
    clone: CLONE_SYSCALL_IP,
    park: PARK_SYSCALL_IP,
};

/// `sock_fprog` lives at the start of the data page, the filter after it.
const FPROG_OFFSET: usize = 0;
const FILTER_OFFSET: usize = 16;

// The stub code. Position independent; never touches the stack (it is
// unmapped half-way through). Syscalls preserve every register but rax, rcx
// and r11, which the code relies on (r12 carries the first copy's address).
//
// Layout: offset 0 `syscall; int3` (the trampoline); offset 3 the clone
// trampoline and, at 11, the park loop a new thread spins in (blocked in
// `pause`, no stack needed) until its tracer seizes it; then the setup code
// entered with rdi = address of the first copy of the image.
core::arch::global_asm!(
    ".pushsection .text.ferrovisor_ptrace_stub,\"ax\",@progbits",
    ".globl ferrovisor_ptrace_stub_start",
    ".globl ferrovisor_ptrace_stub_setup",
    ".globl ferrovisor_ptrace_stub_ready",
    ".globl ferrovisor_ptrace_stub_end",
    ".globl ferrovisor_ptrace_stub_clone",
    ".globl ferrovisor_ptrace_stub_park",
    ".p2align 4",
    "ferrovisor_ptrace_stub_start:",
    "    syscall",
    "    int3",
    "ferrovisor_ptrace_stub_clone:",
    "    syscall",
    "    test %rax, %rax",
    "    jz 3f",
    "    int3",
    "ferrovisor_ptrace_stub_park:",
    "3:",
    "    mov $34, %eax",
    "    syscall",
    "    jmp 3b",
    "ferrovisor_ptrace_stub_setup:",
    // Stop 1: the tracer unregisters rseq (the registration points into
    // memory about to be unmapped) through this copy's trampoline.
    "    int3",
    "    mov %rdi, %r12",
    // munmap(0, first copy)
    "    xor %edi, %edi",
    "    mov %r12, %rsi",
    "    mov $11, %eax",
    "    syscall",
    // munmap(end of first copy, USER_TOP - that)
    "    lea {len}(%r12), %rdi",
    "    movabs ${top}, %rsi",
    "    sub %rdi, %rsi",
    "    mov $11, %eax",
    "    syscall",
    // mmap(STUB_BASE, len, RWX, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED, -1, 0)
    "    movabs ${base}, %rdi",
    "    mov ${len}, %esi",
    "    mov $7, %edx",
    "    mov $0x32, %r10d",
    "    mov $-1, %r8",
    "    xor %r9d, %r9d",
    "    mov $9, %eax",
    "    syscall",
    "    cmp %rdi, %rax",
    "    jne 9f",
    // copy the image there and continue in the copy
    "    mov %r12, %rsi",
    "    mov ${len}, %ecx",
    "    cld",
    "    rep movsb",
    "    lea 2f(%rip), %rax",
    "    sub %r12, %rax",
    "    movabs ${base}, %rdx",
    "    add %rdx, %rax",
    "    jmp *%rax",
    "2:",
    // munmap(first copy)
    "    mov %r12, %rdi",
    "    mov ${len}, %esi",
    "    mov $11, %eax",
    "    syscall",
    // code page read+exec (a guest must not rewrite the trampoline), data
    // page read-only
    "    movabs ${base}, %rdi",
    "    mov ${page}, %esi",
    "    mov $5, %edx",
    "    mov $10, %eax",
    "    syscall",
    "    test %rax, %rax",
    "    jnz 9f",
    "    movabs ${data}, %rdi",
    "    mov ${page}, %esi",
    "    mov $1, %edx",
    "    mov $10, %eax",
    "    syscall",
    "    test %rax, %rax",
    "    jnz 9f",
    // seccomp(SECCOMP_SET_MODE_FILTER, 0, &fprog): the last thing, since
    // after it only the trampoline may make system calls.
    "    mov $1, %edi",
    "    xor %esi, %esi",
    "    movabs ${data}, %rdx",
    "    mov $317, %eax",
    "    syscall",
    "    test %rax, %rax",
    "    jnz 9f",
    // Stop 2: ready. The tracer never resumes past this point.
    "    int3",
    "ferrovisor_ptrace_stub_ready:",
    "    ud2",
    "9:",
    "    mov $231, %eax",
    "    mov $120, %edi",
    "    syscall",
    "    ud2",
    "ferrovisor_ptrace_stub_end:",
    ".popsection",
    len = const STUB_LEN,
    top = const USER_TOP,
    base = const STUB_BASE,
    data = const STUB_BASE + PAGE_SIZE,
    page = const PAGE_SIZE,
    options(att_syntax)
);

extern "C" {
    static ferrovisor_ptrace_stub_start: u8;
    static ferrovisor_ptrace_stub_setup: u8;
    static ferrovisor_ptrace_stub_ready: u8;
    static ferrovisor_ptrace_stub_end: u8;
    static ferrovisor_ptrace_stub_clone: u8;
    static ferrovisor_ptrace_stub_park: u8;
}

/// Offsets of the labels in the stub code.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CodeLayout {
    /// the setup entry point
    pub setup: u64,
    /// where the stub stops when ready
    pub ready: u64,
    /// the clone trampoline
    pub clone: u64,
    /// the park loop
    pub park: u64,
}

/// The stub's machine code and its label offsets.
pub(crate) fn code() -> (&'static [u8], CodeLayout) {
    let start = &raw const ferrovisor_ptrace_stub_start as usize;
    let setup = &raw const ferrovisor_ptrace_stub_setup as usize;
    let ready = &raw const ferrovisor_ptrace_stub_ready as usize;
    let end = &raw const ferrovisor_ptrace_stub_end as usize;
    let clone = &raw const ferrovisor_ptrace_stub_clone as usize;
    let park = &raw const ferrovisor_ptrace_stub_park as usize;
    // SAFETY: the four symbols delimit one contiguous run of bytes in this
    // crate's (readable) text section, start <= end.
    let bytes = unsafe { std::slice::from_raw_parts(start as *const u8, end - start) };
    let layout = CodeLayout {
        setup: (setup - start) as u64,
        ready: (ready - start) as u64,
        clone: (clone - start) as u64,
        park: (park - start) as u64,
    };
    (bytes, layout)
}

/// The two pages copied into every stub, built once per platform (the child
/// side of the fork may not allocate).
#[derive(Debug)]
pub(crate) struct StubImage {
    bytes: Box<[u8]>,
    layout: CodeLayout,
}

impl StubImage {
    pub(crate) fn new() -> Self {
        let (code, layout) = code();
        assert!(code.len() as u64 <= PAGE_SIZE, "stub code exceeds a page");
        // The filter and the injection code use the constants; the assembler
        // decides. They agree or this crate is broken (tested).
        assert_eq!(STUB_BASE + layout.clone, CLONE_TRAMPOLINE);
        assert_eq!(STUB_BASE + layout.park, PARK);
        let filter = bpf::stub_filter(&STUB_IPS, STUB_MEMFD as u32);
        let filter_bytes = filter.len() * std::mem::size_of::<SockFilter>();
        assert!(FILTER_OFFSET + filter_bytes <= PAGE_SIZE as usize);
        let mut bytes = vec![0u8; STUB_LEN as usize].into_boxed_slice();
        bytes[..code.len()].copy_from_slice(code);
        let data = &mut bytes[PAGE_SIZE as usize..];
        // struct sock_fprog { unsigned short len; struct sock_filter *filter; }
        let fprog = &mut data[FPROG_OFFSET..FILTER_OFFSET];
        fprog[0..2].copy_from_slice(&(filter.len() as u16).to_le_bytes());
        let filter_addr = STUB_BASE + PAGE_SIZE + FILTER_OFFSET as u64;
        fprog[8..16].copy_from_slice(&filter_addr.to_le_bytes());
        for (i, insn) in filter.iter().enumerate() {
            let o = FILTER_OFFSET + 8 * i;
            data[o..o + 2].copy_from_slice(&insn.code.to_le_bytes());
            data[o + 2] = insn.jt;
            data[o + 3] = insn.jf;
            data[o + 4..o + 8].copy_from_slice(&insn.k.to_le_bytes());
        }
        StubImage { bytes, layout }
    }

    pub(crate) fn layout(&self) -> CodeLayout {
        self.layout
    }
}

/// A freshly forked stub, stopped at nothing yet.
#[derive(Debug)]
pub(crate) struct Forked {
    pub pid: i32,
    pub pidfd: OwnedFd,
}

const NAMESPACES: libc::c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS;

/// Forks the stub from the calling thread (which becomes its tracer).
pub(crate) fn fork_stub(memfd: BorrowedFd<'_>, image: &StubImage) -> Result<Forked> {
    let parent = sys::pidfd_open_self_thread();
    let parent_raw = parent.as_ref().map_or(-1, |f| f.as_raw_fd());
    let memfd_raw = memfd.as_raw_fd();
    let image_ptr = image.bytes.as_ptr();
    let setup = image.layout.setup;
    let mut pidfd: libc::c_int = -1;
    let flags = NAMESPACES | libc::CLONE_PIDFD | libc::SIGCHLD;
    // SAFETY: a fork-like clone (no CLONE_VM, no new stack): the child gets a
    // private copy of this thread's memory and continues in `stub_child`,
    // which never returns and only issues raw system calls. `pidfd` is a live
    // c_int the kernel writes in the parent (CLONE_PIDFD uses parent_tid).
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags as libc::c_ulong,
            0usize,
            &mut pidfd as *mut libc::c_int,
            0usize,
            0usize,
        )
    };
    if ret == 0 {
        // SAFETY: we are the freshly forked child; the pointers refer to our
        // private copy of the parent's memory.
        unsafe { stub_child(memfd_raw, parent_raw, image_ptr, setup) }
    }
    if ret < 0 {
        return Err(Error::last_os("clone(stub)"));
    }
    drop(parent);
    // SAFETY: CLONE_PIDFD gave the parent a fresh descriptor nobody owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
    Ok(Forked {
        pid: ret as i32,
        pidfd,
    })
}

/// Child side of [`fork_stub`]. Only raw system calls: the Sentry may be
/// multithreaded and this is a fork of one thread, so locks held by other
/// threads (the allocator's among them) stay locked forever here.
///
/// # Safety
/// Must only be called in the child of the fork in [`fork_stub`], with
/// `image` pointing to [`STUB_LEN`] readable bytes.
unsafe fn stub_child(memfd: RawFd, parent: RawFd, image: *const u8, setup: u64) -> ! {
    use libc::{c_long, syscall};
    // SAFETY: each call is a raw system call with integer arguments or
    // pointers to live locals of this frame, failures exit; the final copy
    // writes STUB_LEN bytes into the fresh mapping `first` from `image`
    // (STUB_LEN readable bytes per the contract), and the jump enters the
    // copied stub code, which never returns.
    unsafe {
        let fail = |code: c_long| -> ! {
            syscall(libc::SYS_exit_group, code);
            #[allow(clippy::empty_loop)]
            loop {}
        };
        // Die with the tracer thread. If it already died (before this call),
        // its pidfd is readable: leave rather than run untraced.
        if syscall(libc::SYS_prctl, libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            fail(101);
        }
        if parent >= 0 {
            let mut p = libc::pollfd {
                fd: parent,
                events: libc::POLLIN,
                revents: 0,
            };
            if syscall(libc::SYS_poll, &mut p as *mut libc::pollfd, 1, 0) != 0 {
                fail(102);
            }
        }
        if syscall(libc::SYS_ptrace, libc::PTRACE_TRACEME, 0, 0, 0) != 0 {
            fail(103);
        }
        if syscall(libc::SYS_prctl, libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            fail(104);
        }
        // A seccomp kill must not leave core files of guest memory around.
        let zero = libc::rlimit64 {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if syscall(
            libc::SYS_prlimit64,
            0,
            libc::RLIMIT_CORE,
            &zero as *const libc::rlimit64,
            0usize,
        ) != 0
        {
            fail(105);
        }
        // Inherited handlers point into memory about to be unmapped; signals
        // are the tracer's business. Default dispositions, nothing blocked,
        // no alternate stack.
        let dfl = libc::sigaction {
            sa_sigaction: libc::SIG_DFL,
            sa_mask: std::mem::zeroed(),
            sa_flags: 0,
            sa_restorer: None,
        };
        for sig in 1..=64 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                syscall(
                    libc::SYS_rt_sigaction,
                    sig,
                    &dfl as *const libc::sigaction,
                    0usize,
                    8usize,
                );
            }
        }
        let empty: u64 = 0;
        syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &empty as *const u64,
            0usize,
            8usize,
        );
        let no_stack = libc::stack_t {
            ss_sp: std::ptr::null_mut(),
            ss_flags: libc::SS_DISABLE,
            ss_size: 0,
        };
        syscall(
            libc::SYS_sigaltstack,
            &no_stack as *const libc::stack_t,
            0usize,
        );
        // The memory file at a fixed number, nothing else open.
        if memfd != STUB_MEMFD && syscall(libc::SYS_dup2, memfd, STUB_MEMFD) != STUB_MEMFD.into() {
            fail(106);
        }
        if syscall(libc::SYS_close_range, 0, STUB_MEMFD - 1, 0) != 0
            || syscall(libc::SYS_close_range, STUB_MEMFD + 1, u32::MAX, 0) != 0
        {
            fail(107);
        }
        let first = syscall(
            libc::SYS_mmap,
            0usize,
            STUB_LEN,
            libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if first < 0 {
            fail(108);
        }
        let first = first as u64;
        // The copy must not overlap its final place.
        if first < STUB_BASE + STUB_LEN && STUB_BASE < first + STUB_LEN {
            fail(109);
        }
        std::ptr::copy_nonoverlapping(image, first as *mut u8, STUB_LEN as usize);
        core::arch::asm!(
            "jmp {entry}",
            entry = in(reg) first + setup,
            in("rdi") first,
            options(noreturn)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trampoline_is_syscall_then_int3_at_offset_0() {
        let (code, layout) = code();
        assert_eq!(&code[..3], &[0x0f, 0x05, 0xcc]);
        assert_eq!(code[layout.setup as usize], 0xcc, "setup opens with int3");
        // The ready stop lands right after an int3, followed by ud2.
        assert_eq!(code[layout.ready as usize - 1], 0xcc);
        assert_eq!(&code[layout.ready as usize..][..2], &[0x0f, 0x0b]);
        assert!(code.len() as u64 <= PAGE_SIZE);
        // clone trampoline: syscall; test %rax,%rax; jz park; int3
        let c = layout.clone as usize;
        assert_eq!(c as u64, CLONE_TRAMPOLINE - STUB_BASE);
        assert_eq!(&code[c..c + 2], &[0x0f, 0x05]);
        assert_eq!(code[layout.park as usize - 1], 0xcc);
        // park: mov $34,%eax; syscall; jmp park
        let p = layout.park as usize;
        assert_eq!(p as u64, PARK - STUB_BASE);
        assert_eq!(&code[p..p + 5], &[0xb8, 34, 0, 0, 0]);
        assert_eq!(&code[p + 5..p + 7], &[0x0f, 0x05]);
        assert_eq!(STUB_BASE + p as u64 + 7, PARK_SYSCALL_IP);
    }

    #[test]
    fn image_carries_a_sock_fprog_pointing_at_the_filter() {
        let image = StubImage::new();
        let data = &image.bytes[PAGE_SIZE as usize..];
        let len = u16::from_le_bytes([data[0], data[1]]) as usize;
        let ptr = u64::from_le_bytes(data[8..16].try_into().expect("8 bytes"));
        let filter = bpf::stub_filter(&STUB_IPS, STUB_MEMFD as u32);
        assert_eq!(len, filter.len());
        assert_eq!(ptr, STUB_BASE + PAGE_SIZE + FILTER_OFFSET as u64);
        let first = &data[FILTER_OFFSET..FILTER_OFFSET + 8];
        assert_eq!(u16::from_le_bytes([first[0], first[1]]), filter[0].code);
        assert_eq!(
            u32::from_le_bytes(first[4..8].try_into().expect("4")),
            filter[0].k
        );
        assert_eq!(&image.bytes[..3], &[0x0f, 0x05, 0xcc]);
    }
}
