//! The stub process: its machine code, its image (code page + seccomp filter
//! page) and its creation.
//!
//! The stub is a fork of the calling thread in new user and PID namespaces
//! (see [`STUB_FORK_CLONE_FLAGS`]). Right after
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
/// The runner filter's `sock_fprog` and program (seccomp-trap mode), after
/// the stub's filter.
const RUNNER_FPROG_OFFSET: usize = 0xd00;
const RUNNER_FILTER_OFFSET: usize = 0xd10;
/// Read-only configuration words of the seccomp-trap handler in the data
/// page (after the filter): whether the slot region is to be mapped at
/// setup and whether the handler may use `rdfsbase`/`wrfsbase`. (How it
/// waits is per slot: [`H_SPIN`], [`H_YIELDS`].)
const CONF_MAP_SLOTS: usize = 0xf00;
const CONF_FSGSBASE: usize = 0xf08;
/// Whether setup maps the patched-site tables (see `crate::fast`).
const CONF_MAP_FAST: usize = 0xf18;

/// Size of one per-thread slot of the seccomp-trap mode: a header page
/// (the message the handler and the Sentry exchange) and the thread's
/// signal stack. 28 KiB of stack hold the largest signal frame this kind of
/// CPU produces (AT_MINSIGSTKSZ is 11952 with AMX) with room to spare.
pub const SLOT_SIZE: u64 = 0x8000;
/// Guest threads per address space in seccomp-trap mode.
pub const MAX_SLOTS: u64 = 1024;
/// Length of the slot region.
pub const SLOTS_LEN: u64 = SLOT_SIZE * MAX_SLOTS;
/// Where the slot region lives in every seccomp-trap stub: right below the
/// stub's own pages. Guest mappings end here in that mode.
pub const SLOTS_BASE: u64 = STUB_BASE - SLOTS_LEN;
/// The stub's descriptor for the slot region's memfd during setup (closed
/// before the filter is installed).
pub const STUB_SLOTFD: i32 = 4;
/// The stub's descriptor for the patched-site tables' memfd during setup
/// (closed before the filter is installed).
pub const STUB_FASTFD: i32 = 5;
/// The stub's descriptor for a restored sandbox image (read-only), whose
/// pages guest memory shares until written (see
/// [`platform::Platform::share_base`]); open for the stub's life.
pub const STUB_BASEFD: i32 = 6;
/// Offset in a slot of the signal stack's lowest byte.
pub const SLOT_STACK: u64 = PAGE_SIZE;
/// Offset in a slot of the `ucontext` a new runner thread enters the guest
/// through (at the bottom of the stack; real frames go at its top).
pub const SLOT_INIT_UC: u64 = PAGE_SIZE;
/// Offset in a slot of a new runner thread's first stack pointer.
pub const SLOT_START_SP: u64 = SLOT_SIZE - 64;

/// Offsets of the header fields (see `crate::trap::SlotHeader`).
pub(crate) const H_STATE: u64 = 0;
pub(crate) const H_STUB_WAITING: u64 = 4;
pub(crate) const H_SENTRY_WAITING: u64 = 8;
pub(crate) const H_SIGNO: u64 = 12;
pub(crate) const H_UC: u64 = 16;
pub(crate) const H_FS_BASE: u64 = 24;
pub(crate) const H_GS_BASE: u64 = 32;
pub(crate) const H_SET: u64 = 40;
pub(crate) const H_NEW_FS_BASE: u64 = 48;
pub(crate) const H_NEW_GS_BASE: u64 = 56;
/// The slot's own stub address: where a patched site's fast path finds its
/// slot (`%gs` points at it while the guest's gs base is 0).
pub(crate) const H_SELF: u64 = 64;
/// The fast path's record of a call: number, conversion request, return
/// address, flags, stack pointer, result, and the registers it saves.
pub(crate) const F_NR: u64 = 0x100;
pub(crate) const F_CONVERT: u64 = 0x188;
/// Set by the handler when it drops a kick in the fast path (see there).
pub(crate) const H_KICK_DROPPED: u64 = 0x18c;
/// How the handler waits for the Sentry (set by it, read at each wait):
/// `pause` iterations it polls, then `sched_yield` calls, before it sleeps
/// on its futex (see `crate::handoff`). The guest can write them too, which
/// only changes how its own thread waits.
pub(crate) const H_SPIN: u64 = 0x190;
pub(crate) const H_YIELDS: u64 = 0x194;
pub(crate) const F_RIP: u64 = 0x108;
pub(crate) const F_FLAGS: u64 = 0x110;
pub(crate) const F_RSP: u64 = 0x118;
pub(crate) const F_RAX: u64 = 0x120;
pub(crate) const F_RBX: u64 = 0x128;
pub(crate) const F_RDX: u64 = 0x130;
pub(crate) const F_RSI: u64 = 0x138;
pub(crate) const F_RDI: u64 = 0x140;
pub(crate) const F_RBP: u64 = 0x148;
pub(crate) const F_R8: u64 = 0x150;
pub(crate) const F_R9: u64 = 0x158;
pub(crate) const F_R10: u64 = 0x160;
pub(crate) const F_R12: u64 = 0x168;
pub(crate) const F_R13: u64 = 0x170;
pub(crate) const F_R14: u64 = 0x178;
pub(crate) const F_R15: u64 = 0x180;
/// Top of the fast path's own small stack (in the header page, below the
/// signal stack, so a signal taken there still switches stacks).
pub(crate) const F_STACK: u64 = 0x800;

/// Values of the header's `state` word (the futex word).
pub(crate) const STATE_RUN: u32 = 1;
pub(crate) const STATE_EVENT: u32 = 2;
pub(crate) const STATE_EXIT: u32 = 3;
/// Bits of the header's `set` word: load these bases before returning.
pub(crate) const SET_FS: u64 = 1;
pub(crate) const SET_GS: u64 = 2;

/// `SA_RESTORER` (x86 sigaction flag; not in every libc target).
const SA_RESTORER: libc::c_int = 0x0400_0000;

/// `arch_prctl` codes the handler uses without FSGSBASE.
pub const ARCH_SET_GS: u64 = 0x1001;
/// See [`ARCH_SET_GS`].
pub const ARCH_SET_FS: u64 = 0x1002;

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
    ".globl ferrovisor_ptrace_stub_runner_clone",
    ".globl ferrovisor_ptrace_stub_runner_seccomp",
    ".globl ferrovisor_ptrace_stub_handler",
    ".globl ferrovisor_ptrace_stub_futex",
    ".globl ferrovisor_ptrace_stub_sigreturn",
    ".globl ferrovisor_ptrace_stub_arch_prctl",
    ".globl ferrovisor_ptrace_stub_fast_entry",
    ".globl ferrovisor_ptrace_stub_fast_gs",
    ".globl ferrovisor_ptrace_stub_fast_check",
    ".globl ferrovisor_ptrace_stub_fast_convert",
    ".globl ferrovisor_ptrace_stub_fast_fallback",
    ".globl ferrovisor_ptrace_stub_fast_end",
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
    // --- seccomp-trap mode (unused, and unreachable by any allowed call,
    // in SYSEMU mode) ---
    // The runner clone trampoline: the parent stops at the int3; the child
    // starts on the stack pointer given to clone, inside its slot, with
    // every signal blocked, and waits there for its first RUN.
    "ferrovisor_ptrace_stub_runner_clone:",
    "    syscall",
    "    test %rax, %rax",
    "    jz 4f",
    "    int3",
    "4:",
    // Before any guest code: the runner filter (no trampolines for guest
    // code). Without it the thread must not run at all.
    "    mov $1, %edi",
    "    xor %esi, %esi",
    "    movabs ${runner_fprog}, %rdx",
    "    mov $317, %eax",
    "ferrovisor_ptrace_stub_runner_seccomp:",
    "    syscall",
    "    test %rax, %rax",
    "    jz 6f",
    "    ud2",
    "6:",
    "    mov %rsp, %rbx",
    "    and ${slot_mask}, %rbx",
    "    lea {init_uc}(%rbx), %r12",
    "    jmp 20f",
    // The signal handler (SIGSYS, faults, the interrupt kick), on the
    // thread's signal stack inside its slot: rdi = signo, rdx = ucontext.
    // Posts the event, waits for the Sentry's answer, returns to the guest
    // through rt_sigreturn of the (possibly rewritten) ucontext. rbx = slot,
    // r12 = ucontext throughout; no FPU/vector register is touched (the
    // guest's are in the frame).
    "ferrovisor_ptrace_stub_handler:",
    // A kick that lands in the fast path (a patched site's entry or the
    // stub's fast code) is dropped: that thread is on its way to the Sentry
    // anyway, which checks for interrupts before it lets the thread go.
    "    cmp ${kick}, %edi",
    "    jne 12f",
    "    mov {uc_rip}(%rdx), %rax",
    "    movabs ${fast_code}, %rcx",
    "    sub %rcx, %rax",
    "    cmp ${fast_code_len}, %rax",
    "    jb 13f",
    "    add %rcx, %rax",
    "    lea ferrovisor_ptrace_stub_fast_start(%rip), %rcx",
    "    sub %rcx, %rax",
    "    cmp $(ferrovisor_ptrace_stub_fast_end - ferrovisor_ptrace_stub_fast_start), %rax",
    "    jae 12f",
    // The thread may be on its way back to the guest, where nothing would
    // bring it to the Sentry soon: say so and wake the Sentry, which sends
    // the kick again.
    "13:",
    "    mov %rdx, %r12",
    "    mov %rsp, %rbx",
    "    and ${slot_mask}, %rbx",
    "    movl $1, {h_kick_dropped}(%rbx)",
    "    lea {h_state}(%rbx), %rdi",
    "    mov $1, %esi",
    "    mov $1, %edx",
    "    call 40f",
    "    jmp 34f",
    "12:",
    "    mov %rsp, %rbx",
    "    and ${slot_mask}, %rbx",
    "    mov %rdx, %r12",
    "    mov %edi, {h_signo}(%rbx)",
    "    mov %rdx, {h_uc}(%rbx)",
    "    movabs ${conf_fsgsbase}, %rax",
    "    cmpq $0, (%rax)",
    "    je 11f",
    "    rdfsbase %rax",
    "    mov %rax, {h_fs}(%rbx)",
    "    rdgsbase %rax",
    "    mov %rax, {h_gs}(%rbx)",
    "11:",
    // state = EVENT with a full barrier, then wake the Sentry if it sleeps.
    "    mov ${event}, %eax",
    "    xchg %eax, {h_state}(%rbx)",
    "    cmpl $0, {h_sentry_waiting}(%rbx)",
    "    je 20f",
    "    lea {h_state}(%rbx), %rdi",
    "    mov $1, %esi",
    "    mov $1, %edx",
    "    call 40f",
    // Wait for RUN or EXIT (see 42 below).
    "20:",
    "    call 42f",
    "    cmp ${exit}, %eax",
    "    je 35f",
    // RUN: load the bases the Sentry set, then rt_sigreturn.
    "30:",
    "    mov {h_set}(%rbx), %r13",
    "    movq $0, {h_set}(%rbx)",
    "    movabs ${conf_fsgsbase}, %rax",
    "    mov (%rax), %r14",
    "    test ${set_fs}, %r13",
    "    jz 32f",
    "    mov {h_new_fs}(%rbx), %rsi",
    "    test %r14, %r14",
    "    jz 31f",
    "    wrfsbase %rsi",
    "    jmp 32f",
    "31:",
    "    mov ${arch_set_fs}, %edi",
    "    call 45f",
    "32:",
    "    test ${set_gs}, %r13",
    "    jz 34f",
    "    mov {h_new_gs}(%rbx), %rsi",
    "    test %r14, %r14",
    "    jz 33f",
    "    wrgsbase %rsi",
    "    jmp 34f",
    "33:",
    "    mov ${arch_set_gs}, %edi",
    "    call 45f",
    "34:",
    "    mov %r12, %rsp",
    "    mov $15, %eax",
    "ferrovisor_ptrace_stub_sigreturn:",
    "    syscall",
    "    ud2",
    // EXIT: leave through the trampoline's exit(0) (this thread only).
    "35:",
    "    xor %edi, %edi",
    "    mov $60, %eax",
    "    movabs ${base}, %rcx",
    "    jmp *%rcx",
    // futex(rdi, esi, edx, NULL): the filter checks op and address. The
    // fast path sleeps here too, so this is where its region (in which a
    // kick is dropped) starts.
    "ferrovisor_ptrace_stub_fast_start:",
    "40:",
    "    xor %r10d, %r10d",
    "    mov $202, %eax",
    "ferrovisor_ptrace_stub_futex:",
    "    syscall",
    "    ret",
    // sched_yield(), through the same instruction (the filter allows it
    // there).
    "41:",
    "    mov $24, %eax",
    "    jmp ferrovisor_ptrace_stub_futex",
    // Waits until the state word of the slot at rbx says RUN or EXIT:
    // spins, then yields (with the Sentry on this CPU, it runs now), then
    // sleeps on the futex; returns with the state in eax. The handler and
    // the fast path both wait here.
    "42:",
    "    mov {h_spin}(%rbx), %ecx",
    "43:",
    "    mov {h_state}(%rbx), %eax",
    "    cmp ${run}, %eax",
    "    je 48f",
    "    cmp ${exit}, %eax",
    "    je 48f",
    "    pause",
    "    sub $1, %ecx",
    "    jg 43b",
    "    mov {h_yields}(%rbx), %r13d",
    "44:",
    "    test %r13d, %r13d",
    "    jz 46f",
    "    sub $1, %r13d",
    "    call 41b",
    "    mov {h_state}(%rbx), %eax",
    "    cmp ${run}, %eax",
    "    je 48f",
    "    cmp ${exit}, %eax",
    "    je 48f",
    "    jmp 44b",
    "46:",
    "    movl $1, {h_stub_waiting}(%rbx)",
    "    mfence",
    "    mov {h_state}(%rbx), %edx",
    "    cmp ${run}, %edx",
    "    je 47f",
    "    cmp ${exit}, %edx",
    "    je 47f",
    "    lea {h_state}(%rbx), %rdi",
    "    xor %esi, %esi",
    "    call 40b",
    "47:",
    "    movl $0, {h_stub_waiting}(%rbx)",
    "    jmp 42b",
    "48:",
    "    ret",
    // arch_prctl(edi, rsi): the filter allows ARCH_SET_FS/GS only.
    "45:",
    "    mov $158, %eax",
    "ferrovisor_ptrace_stub_arch_prctl:",
    "    syscall",
    "    ret",
    // --- the fast path of a patched site (see `crate::fast`): entered from
    // its entry with eax = nr << 16, rcx = the return address, every other
    // register the guest's. Finds its slot through %gs, saves what the
    // Sentry needs in the slot header, posts the call like the handler does
    // and returns straight to the guest when the Sentry only set rax. Until
    // the stack switch nothing but rax/r11 changes and flags live in ax
    // (lahf/seto), so a fault there or the fallback's ud2 leave a frame the
    // Sentry reads as the call itself.
    "ferrovisor_ptrace_stub_fast_entry:",
    "    lahf",
    "    seto %al",
    "ferrovisor_ptrace_stub_fast_gs:",
    "    mov %gs:{h_self}, %r11",
    "ferrovisor_ptrace_stub_fast_check:",
    "    cmp %r11, {h_self}(%r11)",
    "    jne 58f",
    "    mov %rsp, {f_rsp}(%r11)",
    "    lea {f_stack}(%r11), %rsp",
    "    add $0x7f, %al",
    "    sahf",
    "    pushfq",
    "    popq {f_flags}(%r11)",
    "    shr $16, %rax",
    "    mov %rax, {f_nr}(%r11)",
    "    mov %rcx, {f_rip}(%r11)",
    "    mov %rbx, {f_rbx}(%r11)",
    "    mov %rdx, {f_rdx}(%r11)",
    "    mov %rsi, {f_rsi}(%r11)",
    "    mov %rdi, {f_rdi}(%r11)",
    "    mov %rbp, {f_rbp}(%r11)",
    "    mov %r8, {f_r8}(%r11)",
    "    mov %r9, {f_r9}(%r11)",
    "    mov %r10, {f_r10}(%r11)",
    "    mov %r12, {f_r12}(%r11)",
    "    mov %r13, {f_r13}(%r11)",
    "    mov %r14, {f_r14}(%r11)",
    "    mov %r15, {f_r15}(%r11)",
    "    mov %r11, %rbx",
    "    movabs ${conf_fsgsbase}, %rax",
    "    cmpq $0, (%rax)",
    "    je 51f",
    "    rdfsbase %rax",
    "    mov %rax, {h_fs}(%rbx)",
    "    rdgsbase %rax",
    "    mov %rax, {h_gs}(%rbx)",
    "51:",
    "    movl $0, {h_signo}(%rbx)",
    "    mov ${event}, %eax",
    "    xchg %eax, {h_state}(%rbx)",
    "    cmpl $0, {h_sentry_waiting}(%rbx)",
    "    je 52f",
    "    lea {h_state}(%rbx), %rdi",
    "    mov $1, %esi",
    "    mov $1, %edx",
    "    call 40b",
    "52:",
    "    call 42b",
    "    cmp ${exit}, %eax",
    "    je 35b",
    "    mov {f_rax}(%rbx), %rax",
    "    mov {f_rdx}(%rbx), %rdx",
    "    mov {f_rsi}(%rbx), %rsi",
    "    mov {f_rdi}(%rbx), %rdi",
    "    mov {f_rbp}(%rbx), %rbp",
    "    mov {f_r8}(%rbx), %r8",
    "    mov {f_r9}(%rbx), %r9",
    "    mov {f_r10}(%rbx), %r10",
    "    mov {f_r12}(%rbx), %r12",
    "    mov {f_r13}(%rbx), %r13",
    "    mov {f_r14}(%rbx), %r14",
    "    mov {f_r15}(%rbx), %r15",
    "    mov {f_rip}(%rbx), %rcx",
    "    mov {f_flags}(%rbx), %r11",
    "    cmpl $0, {f_convert}(%rbx)",
    "    jne 56f",
    "    push %r11",
    "    popfq",
    "    mov {f_rsp}(%rbx), %rsp",
    "    mov {f_rbx}(%rbx), %rbx",
    "    jmp *%rcx",
    // The Sentry needs a full frame (other registers, FP state): fault with
    // every register as at the call; the handler reports it.
    "56:",
    "    movl $0, {f_convert}(%rbx)",
    "    push %r11",
    "    popfq",
    "    mov {f_rsp}(%rbx), %rsp",
    "    mov {f_rbx}(%rbx), %rbx",
    "ferrovisor_ptrace_stub_fast_convert:",
    "    ud2",
    // %gs does not lead to a slot: make the call the slow way.
    "58:",
    "    add $0x7f, %al",
    "    sahf",
    "ferrovisor_ptrace_stub_fast_fallback:",
    "    ud2",
    "ferrovisor_ptrace_stub_fast_end:",
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
    // seccomp-trap mode: mmap(SLOTS_BASE, SLOTS_LEN, RW, MAP_SHARED|
    // MAP_FIXED, STUB_SLOTFD, 0), then close the descriptor.
    "    movabs ${conf_map_slots}, %rax",
    "    cmpq $0, (%rax)",
    "    je 5f",
    "    movabs ${slots}, %rdi",
    "    mov ${slots_len}, %esi",
    "    mov $3, %edx",
    "    mov $0x11, %r10d",
    "    mov ${slotfd}, %r8d",
    "    xor %r9d, %r9d",
    "    mov $9, %eax",
    "    syscall",
    "    cmp %rdi, %rax",
    "    jne 9f",
    "    mov ${slotfd}, %edi",
    "    mov $3, %eax",
    "    syscall",
    // With patched sites: mmap(FAST_TABLE, len, R, MAP_SHARED|MAP_FIXED,
    // STUB_FASTFD, 0), mmap(FAST_CODE, len, RX, .., table len), close.
    "    movabs ${conf_map_fast}, %rax",
    "    cmpq $0, (%rax)",
    "    je 5f",
    "    mov ${fast_table}, %edi",
    "    mov ${fast_table_len}, %esi",
    "    mov $1, %edx",
    "    mov $0x11, %r10d",
    "    mov ${fastfd}, %r8d",
    "    xor %r9d, %r9d",
    "    mov $9, %eax",
    "    syscall",
    "    cmp %rdi, %rax",
    "    jne 9f",
    "    movabs ${fast_code}, %rdi",
    "    mov ${fast_code_len}, %esi",
    "    mov $5, %edx",
    "    mov $0x11, %r10d",
    "    mov ${fastfd}, %r8d",
    "    mov ${fast_table_len}, %r9d",
    "    mov $9, %eax",
    "    syscall",
    "    cmp %rdi, %rax",
    "    jne 9f",
    "    mov ${fastfd}, %edi",
    "    mov $3, %eax",
    "    syscall",
    "5:",
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
    runner_fprog = const STUB_BASE + PAGE_SIZE + RUNNER_FPROG_OFFSET as u64,
    page = const PAGE_SIZE,
    slot_mask = const -(SLOT_SIZE as i64),
    init_uc = const SLOT_INIT_UC,
    h_state = const H_STATE,
    h_stub_waiting = const H_STUB_WAITING,
    h_sentry_waiting = const H_SENTRY_WAITING,
    h_signo = const H_SIGNO,
    h_uc = const H_UC,
    h_fs = const H_FS_BASE,
    h_gs = const H_GS_BASE,
    h_set = const H_SET,
    h_new_fs = const H_NEW_FS_BASE,
    h_new_gs = const H_NEW_GS_BASE,
    run = const STATE_RUN,
    event = const STATE_EVENT,
    exit = const STATE_EXIT,
    set_fs = const SET_FS,
    set_gs = const SET_GS,
    arch_set_fs = const ARCH_SET_FS,
    arch_set_gs = const ARCH_SET_GS,
    conf_fsgsbase = const STUB_BASE + PAGE_SIZE + CONF_FSGSBASE as u64,
    h_spin = const H_SPIN,
    h_yields = const H_YIELDS,
    conf_map_slots = const STUB_BASE + PAGE_SIZE + CONF_MAP_SLOTS as u64,
    slots = const SLOTS_BASE,
    slots_len = const SLOTS_LEN,
    slotfd = const STUB_SLOTFD,
    fastfd = const STUB_FASTFD,
    conf_map_fast = const STUB_BASE + PAGE_SIZE + CONF_MAP_FAST as u64,
    fast_table = const crate::fast::FAST_TABLE,
    fast_table_len = const crate::fast::FAST_TABLE_LEN,
    fast_code = const crate::fast::FAST_CODE,
    fast_code_len = const crate::fast::FAST_CODE_LEN,
    kick = const crate::trap::KICK_SIGNAL,
    uc_rip = const crate::trap::UC_RIP,
    h_self = const H_SELF,
    h_kick_dropped = const H_KICK_DROPPED,
    f_nr = const F_NR,
    f_convert = const F_CONVERT,
    f_rip = const F_RIP,
    f_flags = const F_FLAGS,
    f_rsp = const F_RSP,
    f_rax = const F_RAX,
    f_rbx = const F_RBX,
    f_rdx = const F_RDX,
    f_rsi = const F_RSI,
    f_rdi = const F_RDI,
    f_rbp = const F_RBP,
    f_r8 = const F_R8,
    f_r9 = const F_R9,
    f_r10 = const F_R10,
    f_r12 = const F_R12,
    f_r13 = const F_R13,
    f_r14 = const F_R14,
    f_r15 = const F_R15,
    f_stack = const F_STACK,
    options(att_syntax)
);

extern "C" {
    static ferrovisor_ptrace_stub_start: u8;
    static ferrovisor_ptrace_stub_setup: u8;
    static ferrovisor_ptrace_stub_ready: u8;
    static ferrovisor_ptrace_stub_end: u8;
    static ferrovisor_ptrace_stub_clone: u8;
    static ferrovisor_ptrace_stub_park: u8;
    static ferrovisor_ptrace_stub_runner_clone: u8;
    static ferrovisor_ptrace_stub_runner_seccomp: u8;
    static ferrovisor_ptrace_stub_handler: u8;
    static ferrovisor_ptrace_stub_futex: u8;
    static ferrovisor_ptrace_stub_sigreturn: u8;
    static ferrovisor_ptrace_stub_arch_prctl: u8;
    static ferrovisor_ptrace_stub_fast_entry: u8;
    static ferrovisor_ptrace_stub_fast_gs: u8;
    static ferrovisor_ptrace_stub_fast_check: u8;
    static ferrovisor_ptrace_stub_fast_convert: u8;
    static ferrovisor_ptrace_stub_fast_fallback: u8;
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
    /// the runner clone trampoline (seccomp-trap mode)
    pub runner_clone: u64,
    /// a new runner's `seccomp` syscall instruction
    pub runner_seccomp: u64,
    /// the signal handler (seccomp-trap mode)
    pub handler: u64,
    /// the handler's `futex` syscall instruction
    pub futex: u64,
    /// the handler's `rt_sigreturn` syscall instruction
    pub sigreturn: u64,
    /// the handler's `arch_prctl` syscall instruction
    pub arch_prctl: u64,
    /// the fast path's entry (patched sites jump here)
    pub fast_entry: u64,
    /// its load through %gs, and the check of what it loaded (a fault at
    /// either stands for the call)
    pub fast_gs: u64,
    pub fast_check: u64,
    /// its `ud2` that turns a fast call into a full frame
    pub fast_convert: u64,
    /// its `ud2` when %gs does not lead to a slot
    pub fast_fallback: u64,
}

/// The stub's machine code and its label offsets.
pub(crate) fn code() -> (&'static [u8], CodeLayout) {
    let start = &raw const ferrovisor_ptrace_stub_start as usize;
    let setup = &raw const ferrovisor_ptrace_stub_setup as usize;
    let ready = &raw const ferrovisor_ptrace_stub_ready as usize;
    let end = &raw const ferrovisor_ptrace_stub_end as usize;
    let clone = &raw const ferrovisor_ptrace_stub_clone as usize;
    let park = &raw const ferrovisor_ptrace_stub_park as usize;
    let runner_clone = &raw const ferrovisor_ptrace_stub_runner_clone as usize;
    let runner_seccomp = &raw const ferrovisor_ptrace_stub_runner_seccomp as usize;
    let handler = &raw const ferrovisor_ptrace_stub_handler as usize;
    let futex = &raw const ferrovisor_ptrace_stub_futex as usize;
    let sigreturn = &raw const ferrovisor_ptrace_stub_sigreturn as usize;
    let arch_prctl = &raw const ferrovisor_ptrace_stub_arch_prctl as usize;
    let fast_entry = &raw const ferrovisor_ptrace_stub_fast_entry as usize;
    let fast_gs = &raw const ferrovisor_ptrace_stub_fast_gs as usize;
    let fast_check = &raw const ferrovisor_ptrace_stub_fast_check as usize;
    let fast_convert = &raw const ferrovisor_ptrace_stub_fast_convert as usize;
    let fast_fallback = &raw const ferrovisor_ptrace_stub_fast_fallback as usize;
    // SAFETY: the four symbols delimit one contiguous run of bytes in this
    // crate's (readable) text section, start <= end.
    let bytes = unsafe { std::slice::from_raw_parts(start as *const u8, end - start) };
    let layout = CodeLayout {
        setup: (setup - start) as u64,
        ready: (ready - start) as u64,
        clone: (clone - start) as u64,
        park: (park - start) as u64,
        runner_clone: (runner_clone - start) as u64,
        runner_seccomp: (runner_seccomp - start) as u64,
        handler: (handler - start) as u64,
        futex: (futex - start) as u64,
        sigreturn: (sigreturn - start) as u64,
        arch_prctl: (arch_prctl - start) as u64,
        fast_entry: (fast_entry - start) as u64,
        fast_gs: (fast_gs - start) as u64,
        fast_check: (fast_check - start) as u64,
        fast_convert: (fast_convert - start) as u64,
        fast_fallback: (fast_fallback - start) as u64,
    };
    (bytes, layout)
}

/// The two pages copied into every stub, built once per platform (the child
/// side of the fork may not allocate).
#[derive(Debug)]
pub(crate) struct StubImage {
    bytes: Box<[u8]>,
    layout: CodeLayout,
    trap: Option<TrapConfig>,
    /// The patched-site tables every stub maps (seccomp-trap mode with
    /// [`TrapConfig::patch`]).
    fast: Option<crate::fast::FastTable>,
    /// The `clone` flags stubs are forked with: [`STUB_FORK_CLONE_FLAGS`]
    /// or [`STUB_FORK_SHARED_NET_CLONE_FLAGS`].
    pub(crate) fork_flags: u64,
    /// The restored image stubs made from now on map pages of.
    pub(crate) base: std::sync::OnceLock<Base>,
}

/// A restored sandbox image's pages, shown to guests read-only where the
/// Sentry maps the memory-file offsets of its window.
#[derive(Debug)]
pub(crate) struct Base {
    /// the image file, read-only
    pub fd: OwnedFd,
    /// the window's first memory-file offset
    pub window: u64,
    /// the pages' first byte in the file
    pub pos: u64,
    /// their length
    pub len: u64,
}

impl Base {
    /// The file offset behind memory-file offsets `[off, off + len)`, when
    /// they lie in the window.
    pub(crate) fn file_offset(&self, off: u64, len: u64) -> Option<u64> {
        let rel = off.checked_sub(self.window)?;
        (rel.checked_add(len)? <= self.len).then_some(self.pos + rel)
    }
}

/// How the seccomp-trap handler of an image behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TrapConfig {
    /// the handler reads and writes fs/gs bases with `rdfsbase`/`wrfsbase`
    /// (else: `arch_prctl` to set them; it cannot read them)
    pub fsgsbase: bool,
    /// `pause` iterations before the handler sleeps on its futex (each
    /// slot's start; see [`H_SPIN`])
    pub spin: u32,
    /// then `sched_yield` calls before it sleeps
    pub yields: u32,
    /// each runner chooses how it waits (see `crate::handoff`)
    pub adaptive: bool,
    /// guest `mov $nr, %eax; syscall` sites are patched into jumps to the
    /// stub's fast path (see `crate::fast`)
    pub patch: bool,
}

/// The syscall instructions of the seccomp-trap handler, as seccomp sees
/// them (the address after each `syscall`).
pub(crate) fn trap_ips(layout: &CodeLayout) -> bpf::TrapIps {
    bpf::TrapIps {
        runner_clone: STUB_BASE + layout.runner_clone + 2,
        futex: STUB_BASE + layout.futex + 2,
        sigreturn: STUB_BASE + layout.sigreturn + 2,
        arch_prctl: STUB_BASE + layout.arch_prctl + 2,
        runner_seccomp: STUB_BASE + layout.runner_seccomp + 2,
        runner_fprog: STUB_BASE + PAGE_SIZE + RUNNER_FPROG_OFFSET as u64,
    }
}

/// Writes `filter` at `at` of the data page and its `sock_fprog` at
/// `fprog` (`struct sock_fprog { unsigned short len; struct sock_filter
/// *filter; }`); returns where the program ends.
fn put_filter(data: &mut [u8], fprog: usize, at: usize, filter: &[SockFilter]) -> usize {
    let len = u16::try_from(filter.len()).expect("a seccomp program has under 4096 instructions");
    data[fprog..fprog + 2].copy_from_slice(&len.to_le_bytes());
    let addr = STUB_BASE + PAGE_SIZE + at as u64;
    data[fprog + 8..fprog + 16].copy_from_slice(&addr.to_le_bytes());
    let bytes = abi::bpf::program_bytes(filter);
    data[at..at + bytes.len()].copy_from_slice(bytes);
    at + bytes.len()
}

/// Whether the host lets user code use `rdfsbase` and friends
/// (`AT_HWCAP2` bit `HWCAP2_FSGSBASE`, Linux 5.9).
pub(crate) fn host_has_fsgsbase() -> bool {
    // SAFETY: getauxval only reads the auxiliary vector.
    let hwcap2 = unsafe { libc::getauxval(libc::AT_HWCAP2) };
    hwcap2 & 2 != 0
}

impl StubImage {
    /// The image for SYSEMU mode (`trap` = `None`) or seccomp-trap mode.
    pub(crate) fn new(trap: Option<TrapConfig>) -> Result<Self> {
        let (code, layout) = code();
        assert!(code.len() as u64 <= PAGE_SIZE, "stub code exceeds a page");
        // The filter and the injection code use the constants; the assembler
        // decides. They agree or this crate is broken (tested).
        assert_eq!(STUB_BASE + layout.clone, CLONE_TRAMPOLINE);
        assert_eq!(STUB_BASE + layout.park, PARK);
        let filter = match trap {
            None => bpf::stub_filter(&STUB_IPS, STUB_MEMFD as u32),
            Some(_) => bpf::trap_filter(&STUB_IPS, &trap_ips(&layout), STUB_MEMFD as u32),
        };
        let mut bytes = vec![0u8; STUB_LEN as usize].into_boxed_slice();
        bytes[..code.len()].copy_from_slice(code);
        let data = &mut bytes[PAGE_SIZE as usize..];
        let end = put_filter(data, FPROG_OFFSET, FILTER_OFFSET, &filter);
        assert!(
            end <= RUNNER_FPROG_OFFSET,
            "stub filter overlaps the runner's"
        );
        if let Some(t) = trap {
            let runner = bpf::runner_filter(&STUB_IPS, &trap_ips(&layout));
            let end = put_filter(data, RUNNER_FPROG_OFFSET, RUNNER_FILTER_OFFSET, &runner);
            assert!(
                end <= CONF_MAP_SLOTS,
                "runner filter overlaps the configuration"
            );
            data[CONF_MAP_SLOTS..CONF_MAP_SLOTS + 8].copy_from_slice(&1u64.to_le_bytes());
            let f = u64::from(t.fsgsbase);
            data[CONF_FSGSBASE..CONF_FSGSBASE + 8].copy_from_slice(&f.to_le_bytes());
        }
        let fast = match trap {
            Some(t) if t.patch => {
                data[CONF_MAP_FAST..CONF_MAP_FAST + 8].copy_from_slice(&1u64.to_le_bytes());
                Some(crate::fast::FastTable::new(STUB_BASE + layout.fast_entry)?)
            }
            _ => None,
        };
        Ok(StubImage {
            bytes,
            layout,
            trap,
            fast,
            fork_flags: STUB_FORK_CLONE_FLAGS,
            base: std::sync::OnceLock::new(),
        })
    }

    /// The patched-site tables, when sites are patched.
    pub(crate) fn fast(&self) -> Option<&crate::fast::FastTable> {
        self.fast.as_ref()
    }

    pub(crate) fn layout(&self) -> CodeLayout {
        self.layout
    }

    /// The seccomp-trap configuration, `None` for SYSEMU mode.
    pub(crate) fn trap(&self) -> Option<TrapConfig> {
        self.trap
    }
}

/// A freshly forked stub, stopped at nothing yet.
#[derive(Debug)]
pub(crate) struct Forked {
    pub pid: i32,
    pub pidfd: OwnedFd,
}

/// The namespaces every stub gets of its own: a user namespace, for a PID
/// namespace of its own (from which the Sentry, which runs as the same
/// host user, is out of sight and reach). Its mount, IPC and UTS
/// namespaces are the Sentry's, which are fresh and empty, and over which
/// the stub's user namespace gives it no power (namespaces of its own would
/// be owned by that user namespace, and give it, should it ever get out of
/// its filter, root's powers over them: mounting, for one).
const NAMESPACES: libc::c_int = libc::CLONE_NEWUSER | libc::CLONE_NEWPID;

/// The `clone` flags of a new stub: its own namespaces (a network
/// namespace too), a pidfd, `SIGCHLD`.
pub const STUB_FORK_CLONE_FLAGS: u64 =
    (NAMESPACES | libc::CLONE_NEWNET | libc::CLONE_PIDFD | libc::SIGCHLD) as u64;

/// The `clone` flags of a new stub that stays in the Sentry's network
/// namespace ([`crate::PtraceOptions::stub_net_ns`] off).
pub const STUB_FORK_SHARED_NET_CLONE_FLAGS: u64 =
    (NAMESPACES | libc::CLONE_PIDFD | libc::SIGCHLD) as u64;

/// Forks the stub from the calling thread (which becomes its tracer).
pub(crate) fn fork_stub(
    memfd: BorrowedFd<'_>,
    slotfd: Option<BorrowedFd<'_>>,
    image: &StubImage,
) -> Result<Forked> {
    let parent = sys::pidfd_open_self_thread();
    let parent_raw = parent.as_ref().map_or(-1, |f| f.as_raw_fd());
    let memfd_raw = memfd.as_raw_fd();
    let slotfd_raw = slotfd.map_or(-1, |f| f.as_raw_fd());
    let fastfd_raw = image.fast.as_ref().map_or(-1, |f| f.fd().as_raw_fd());
    let basefd_raw = image.base.get().map_or(-1, |b| b.fd.as_raw_fd());
    let handler = STUB_BASE + image.layout.handler;
    let trap = image.trap.is_some();
    if trap != slotfd.is_some() {
        return Err(Error::Misuse("slot region and stub mode disagree"));
    }
    let image_ptr = image.bytes.as_ptr();
    let setup = image.layout.setup;
    let mut pidfd: libc::c_int = -1;
    let flags = image.fork_flags;
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
        unsafe {
            stub_child(
                ChildFds {
                    memfd: memfd_raw,
                    slotfd: slotfd_raw,
                    fastfd: fastfd_raw,
                    basefd: basefd_raw,
                },
                trap.then_some(handler),
                parent_raw,
                image_ptr,
                setup,
            )
        }
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

/// The Sentry's descriptors a new stub keeps (-1: none), at the numbers
/// they have in the Sentry.
#[derive(Clone, Copy)]
struct ChildFds {
    memfd: RawFd,
    slotfd: RawFd,
    fastfd: RawFd,
    basefd: RawFd,
}

/// Child side of [`fork_stub`]. Only raw system calls: the Sentry may be
/// multithreaded and this is a fork of one thread, so locks held by other
/// threads (the allocator's among them) stay locked forever here.
///
/// In seccomp-trap mode (`handler` set) the handler takes SIGSYS, the
/// faults and the interrupt kick on the thread's signal stack, with every
/// signal blocked while it runs; the first thread blocks the kick, so
/// threads cloned from it start with it blocked until their first
/// `rt_sigreturn` into the guest. The slot region's memfd goes to [`STUB_SLOTFD`].
///
/// # Safety
/// Must only be called in the child of the fork in [`fork_stub`], with
/// `image` pointing to [`STUB_LEN`] readable bytes.
unsafe fn stub_child(
    fds: ChildFds,
    handler: Option<u64>,
    parent: RawFd,
    image: *const u8,
    setup: u64,
) -> ! {
    use libc::{c_long, syscall};
    let ChildFds {
        memfd,
        slotfd,
        fastfd,
        basefd,
    } = fds;
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
        if let Some(handler) = handler {
            // The kernel's struct sigaction (not libc's): handler, flags,
            // restorer (never used: the handler leaves through its own
            // rt_sigreturn), mask (everything blocked while it runs).
            let act: [u64; 4] = [
                handler,
                (libc::SA_SIGINFO | libc::SA_ONSTACK | SA_RESTORER) as u64,
                handler + 1,
                u64::MAX,
            ];
            for sig in crate::trap::HANDLED_SIGNALS {
                if syscall(libc::SYS_rt_sigaction, sig, act.as_ptr(), 0usize, 8usize) != 0 {
                    fail(110);
                }
            }
        }
        // Trap mode: the kick blocked, so that a runner (which inherits this
        // mask) cannot take one before its first rt_sigreturn into the
        // guest. Nothing else: an int3 of the trampolines with SIGTRAP
        // blocked would make the kernel reset SIGTRAP's handler to the
        // default for the whole process (force_sig_info_to_task).
        let mask: u64 = if handler.is_some() {
            1 << (crate::trap::KICK_SIGNAL - 1)
        } else {
            0
        };
        syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &mask as *const u64,
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
        // The memory file at a fixed number, nothing else open (but the
        // slot region's memfd, which setup maps and closes). Each source is
        // first moved out of the way of both targets.
        let memfd = syscall(libc::SYS_fcntl, memfd, libc::F_DUPFD, 10) as RawFd;
        let slotfd = if slotfd >= 0 {
            syscall(libc::SYS_fcntl, slotfd, libc::F_DUPFD, 10) as RawFd
        } else {
            -1
        };
        let fastfd = if fastfd >= 0 {
            syscall(libc::SYS_fcntl, fastfd, libc::F_DUPFD, 10) as RawFd
        } else {
            -1
        };
        let basefd = if basefd >= 0 {
            syscall(libc::SYS_fcntl, basefd, libc::F_DUPFD, 10) as RawFd
        } else {
            -2
        };
        if memfd < 0 || (handler.is_some() && slotfd < 0) || basefd == -1 {
            fail(106);
        }
        if syscall(libc::SYS_dup2, memfd, STUB_MEMFD) != STUB_MEMFD.into()
            || (slotfd >= 0 && syscall(libc::SYS_dup2, slotfd, STUB_SLOTFD) != STUB_SLOTFD.into())
            || (fastfd >= 0 && syscall(libc::SYS_dup2, fastfd, STUB_FASTFD) != STUB_FASTFD.into())
            || (basefd >= 0 && syscall(libc::SYS_dup2, basefd, STUB_BASEFD) != STUB_BASEFD.into())
        {
            fail(106);
        }
        // (numbers below the image's that nothing was given: closed too)
        if basefd >= 0 {
            if slotfd < 0 {
                syscall(libc::SYS_close, STUB_SLOTFD);
            }
            if fastfd < 0 {
                syscall(libc::SYS_close, STUB_FASTFD);
            }
        }
        let last = if basefd >= 0 {
            STUB_BASEFD
        } else if fastfd >= 0 {
            STUB_FASTFD
        } else if slotfd >= 0 {
            STUB_SLOTFD
        } else {
            STUB_MEMFD
        };
        if syscall(libc::SYS_close_range, 0, STUB_MEMFD - 1, 0) != 0
            || syscall(libc::SYS_close_range, last + 1, u32::MAX, 0) != 0
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
        let image = StubImage::new(None).expect("image");
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
