//! Thin, safe wrappers over the host calls the tracer side of the platform
//! needs: ptrace requests, `waitpid`, signals to the stub and CPU affinity.
//!
//! Every wrapper issues the raw system call (not libc's convenience wrappers,
//! whose `PEEK*` handling hides errors) and turns a failure into a
//! [`platform::Error::Host`] naming the operation.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use platform::{Error, Regs, Result};

/// `PTRACE_SYSEMU` (not in every libc target's constant list).
const PTRACE_SYSEMU: libc::c_long = 31;
/// `PTRACE_GET_RSEQ_CONFIGURATION` (Linux 5.13).
const PTRACE_GET_RSEQ_CONFIGURATION: libc::c_long = 0x420f;
/// `PIDFD_THREAD` (Linux 6.9): a pidfd for one thread, readable when it exits.
const PIDFD_THREAD: libc::c_long = libc::O_EXCL as libc::c_long;

/// `PTRACE_SEIZE`, `PTRACE_INTERRUPT` (Linux 3.4).
const PTRACE_SEIZE: libc::c_long = 0x4206;
const PTRACE_INTERRUPT: libc::c_long = 0x4207;
/// `PTRACE_GETREGSET` / `PTRACE_SETREGSET`.
const PTRACE_GETREGSET: libc::c_long = 0x4204;
const PTRACE_SETREGSET: libc::c_long = 0x4205;
/// `NT_X86_XSTATE`: the regset holding the XSAVE area (standard format).
pub(crate) const NT_X86_XSTATE: usize = 0x202;
/// Size of the legacy `FXSAVE` area (`struct user_fpregs_struct`).
pub(crate) const FXSAVE_LEN: usize = 512;

/// Byte offset of `rax` in `struct user` (the register block comes first).
const USER_RAX: usize = std::mem::offset_of!(Regs, rax);

fn check(ret: libc::c_long, op: &'static str) -> Result<libc::c_long> {
    if ret < 0 {
        Err(Error::last_os(op))
    } else {
        Ok(ret)
    }
}

/// Raw `ptrace(2)`.
fn ptrace(
    req: libc::c_long,
    pid: i32,
    addr: usize,
    data: usize,
    op: &'static str,
) -> Result<libc::c_long> {
    // SAFETY: every caller passes, for requests that write through `data`, a
    // pointer to a live, writable buffer of the size the request writes; other
    // requests take plain integers.
    let ret = unsafe { libc::syscall(libc::SYS_ptrace, req, pid, addr, data) };
    check(ret, op)
}

/// Reads all general-purpose registers of a stopped tracee.
pub(crate) fn get_regs(pid: i32, regs: &mut Regs) -> Result<()> {
    // `Regs` is laid out like `struct user_regs_struct`, which is what
    // PTRACE_GETREGS writes.
    let p: *mut Regs = regs;
    ptrace(
        libc::PTRACE_GETREGS as _,
        pid,
        0,
        p as usize,
        "ptrace(GETREGS)",
    )?;
    Ok(())
}

/// Writes all general-purpose registers of a stopped tracee.
pub(crate) fn set_regs(pid: i32, regs: &Regs) -> Result<()> {
    let p: *const Regs = regs;
    ptrace(
        libc::PTRACE_SETREGS as _,
        pid,
        0,
        p as usize,
        "ptrace(SETREGS)",
    )?;
    Ok(())
}

/// Writes `rax` alone (one word of `struct user`).
pub(crate) fn poke_rax(pid: i32, value: u64) -> Result<()> {
    ptrace(
        libc::PTRACE_POKEUSER as _,
        pid,
        USER_RAX,
        value as usize,
        "ptrace(POKEUSER rax)",
    )?;
    Ok(())
}

/// Reads `rax` alone.
pub(crate) fn peek_rax(pid: i32) -> Result<u64> {
    let mut out: u64 = 0;
    let p: *mut u64 = &mut out;
    // The raw PEEKUSER request stores the word at `data`.
    ptrace(
        libc::PTRACE_PEEKUSER as _,
        pid,
        USER_RAX,
        p as usize,
        "ptrace(PEEKUSER rax)",
    )?;
    Ok(out)
}

/// Resumes a stopped tracee until its next system call entry, which is
/// reported and then skipped (`PTRACE_SYSEMU`); `sig` 0 suppresses the
/// signal the tracee stopped with.
pub(crate) fn sysemu(pid: i32, sig: i32) -> Result<()> {
    ptrace(PTRACE_SYSEMU, pid, 0, sig as usize, "ptrace(SYSEMU)")?;
    Ok(())
}

/// `PTRACE_SEIZE` with `options`: attaches without stopping the tracee.
pub(crate) fn seize(tid: i32, options: libc::c_int) -> Result<()> {
    ptrace(PTRACE_SEIZE, tid, 0, options as usize, "ptrace(SEIZE)")?;
    Ok(())
}

/// `PTRACE_INTERRUPT`: makes a seized tracee stop (`PTRACE_EVENT_STOP`).
pub(crate) fn interrupt(tid: i32) -> Result<()> {
    ptrace(PTRACE_INTERRUPT, tid, 0, 0, "ptrace(INTERRUPT)")?;
    Ok(())
}

/// `PTRACE_DETACH`, resuming the tracee with `sig` (0: none).
pub(crate) fn detach(tid: i32, sig: i32) -> Result<()> {
    ptrace(
        libc::PTRACE_DETACH as _,
        tid,
        0,
        sig as usize,
        "ptrace(DETACH)",
    )?;
    Ok(())
}

/// `PTRACE_GETEVENTMSG`: for `PTRACE_EVENT_CLONE`, the new thread's id in
/// the tracer's pid namespace.
pub(crate) fn get_event_msg(tid: i32) -> Result<u64> {
    let mut out: libc::c_ulong = 0;
    let p: *mut libc::c_ulong = &mut out;
    ptrace(
        libc::PTRACE_GETEVENTMSG as _,
        tid,
        0,
        p as usize,
        "ptrace(GETEVENTMSG)",
    )?;
    Ok(out)
}

/// `PTRACE_GETREGSET` of note type `nt` into `buf`; returns how many bytes
/// the kernel filled (its regset size, if `buf` is at least that large).
pub(crate) fn get_regset(tid: i32, nt: usize, buf: &mut [u8]) -> Result<usize> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let p: *mut libc::iovec = &mut iov;
    // `iov` describes `buf`, live and writable for its whole length; the
    // kernel writes at most `iov_len` bytes and updates `iov_len`.
    ptrace(PTRACE_GETREGSET, tid, nt, p as usize, "ptrace(GETREGSET)")?;
    Ok(iov.iov_len)
}

/// `PTRACE_SETREGSET` of note type `nt` from `buf`.
pub(crate) fn set_regset(tid: i32, nt: usize, buf: &[u8]) -> Result<()> {
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr().cast_mut().cast(),
        iov_len: buf.len(),
    };
    let p: *mut libc::iovec = &mut iov;
    // The kernel only reads `buf` (and may rewrite `iov_len`).
    ptrace(PTRACE_SETREGSET, tid, nt, p as usize, "ptrace(SETREGSET)")?;
    Ok(())
}

/// `PTRACE_GETFPREGS`: the 512-byte `FXSAVE` area.
pub(crate) fn get_fpregs(tid: i32, buf: &mut [u8; FXSAVE_LEN]) -> Result<()> {
    let p: *mut [u8; FXSAVE_LEN] = buf;
    ptrace(
        libc::PTRACE_GETFPREGS as _,
        tid,
        0,
        p as usize,
        "ptrace(GETFPREGS)",
    )?;
    Ok(())
}

/// `PTRACE_SETFPREGS` from a 512-byte `FXSAVE` area.
pub(crate) fn set_fpregs(tid: i32, buf: &[u8; FXSAVE_LEN]) -> Result<()> {
    let p: *const [u8; FXSAVE_LEN] = buf;
    ptrace(
        libc::PTRACE_SETFPREGS as _,
        tid,
        0,
        p as usize,
        "ptrace(SETFPREGS)",
    )?;
    Ok(())
}

/// Largest XSAVE area the CPU can need (CPUID leaf 0xD, sub-leaf 0, ECX),
/// or 0 without XSAVE.
pub(crate) fn cpuid_xsave_max_size() -> usize {
    // CPUID leaf 1 ECX bit 26: XSAVE supported (leaf 0xD is defined).
    let leaf1 = std::arch::x86_64::__cpuid(1);
    if leaf1.ecx & (1 << 26) == 0 {
        return 0;
    }
    std::arch::x86_64::__cpuid_count(0xd, 0).ecx as usize
}

/// Resumes a stopped tracee without syscall tracing.
pub(crate) fn cont(pid: i32, sig: i32) -> Result<()> {
    ptrace(libc::PTRACE_CONT as _, pid, 0, sig as usize, "ptrace(CONT)")?;
    Ok(())
}

/// `PTRACE_SETOPTIONS`.
pub(crate) fn set_options(pid: i32, options: libc::c_int) -> Result<()> {
    ptrace(
        libc::PTRACE_SETOPTIONS as _,
        pid,
        0,
        options as usize,
        "ptrace(SETOPTIONS)",
    )?;
    Ok(())
}

/// What `PTRACE_GETSIGINFO` says about the signal a tracee stopped with.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SigInfo {
    pub signo: i32,
    pub code: i32,
    pub addr: u64,
}

/// `PTRACE_GETSIGINFO`.
pub(crate) fn get_siginfo(pid: i32) -> Result<SigInfo> {
    // SAFETY: siginfo_t is plain old data; all-zero is a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let p: *mut libc::siginfo_t = &mut info;
    ptrace(
        libc::PTRACE_GETSIGINFO as _,
        pid,
        0,
        p as usize,
        "ptrace(GETSIGINFO)",
    )?;
    // SAFETY: `si_addr` reads the union member at the fault-address offset;
    // for non-fault signals it yields whatever the kernel stored there (pid
    // and uid bits), which is only reported, never dereferenced.
    let addr = unsafe { info.si_addr() } as u64;
    Ok(SigInfo {
        signo: info.si_signo,
        code: info.si_code,
        addr,
    })
}

/// The stub's restartable-sequences registration, as ptrace reports it.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub(crate) struct RseqConfig {
    pub pointer: u64,
    pub size: u32,
    pub signature: u32,
    pub flags: u32,
    pad: u32,
}

/// `PTRACE_GET_RSEQ_CONFIGURATION`.
pub(crate) fn rseq_config(pid: i32) -> Result<RseqConfig> {
    let mut cfg = RseqConfig::default();
    let p: *mut RseqConfig = &mut cfg;
    ptrace(
        PTRACE_GET_RSEQ_CONFIGURATION,
        pid,
        std::mem::size_of::<RseqConfig>(),
        p as usize,
        "ptrace(GET_RSEQ_CONFIGURATION)",
    )?;
    Ok(cfg)
}

/// Decoded `waitpid` status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitStatus {
    /// ptrace stop; the value is `WSTOPSIG` (with bit 0x80 for syscall stops
    /// under `PTRACE_O_TRACESYSGOOD`) plus the event in bits 8..16.
    Stopped(i32),
    /// exited with this status
    Exited(i32),
    /// killed by this signal
    Signaled(i32),
}

impl WaitStatus {
    /// Words for a dead stub, for [`Error::StubDied`].
    pub(crate) fn describe(self) -> String {
        match self {
            WaitStatus::Exited(c) => format!("exited with status {c}"),
            WaitStatus::Signaled(s) if s == libc::SIGSYS => {
                "killed by SIGSYS (seccomp filter)".to_string()
            }
            WaitStatus::Signaled(s) => format!("killed by signal {s}"),
            WaitStatus::Stopped(s) => format!("stopped with {s:#x}"),
        }
    }
}

/// `waitpid(pid, __WALL)`, retried on `EINTR` (the Sentry's own signals must
/// not abort a guest switch).
pub(crate) fn wait(pid: i32) -> Result<WaitStatus> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: `status` is a live c_int the kernel writes.
        let ret = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
        if ret == pid {
            break;
        }
        let err = io::Error::last_os_error();
        if ret < 0 && err.raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return Err(Error::Host {
            op: "waitpid(stub)",
            source: err,
        });
    }
    Ok(if libc::WIFSTOPPED(status) {
        Stopped(status >> 8)
    } else if libc::WIFEXITED(status) {
        WaitStatus::Exited(libc::WEXITSTATUS(status))
    } else {
        WaitStatus::Signaled(libc::WTERMSIG(status))
    })
}
use WaitStatus::Stopped;

/// `waitpid(pid, WNOHANG | __WALL)`: `None` if nothing is to be reported.
pub(crate) fn wait_nohang(pid: i32) -> Result<Option<WaitStatus>> {
    let mut status: libc::c_int = 0;
    // SAFETY: `status` is a live c_int the kernel writes.
    let ret = unsafe { libc::waitpid(pid, &mut status, libc::__WALL | libc::WNOHANG) };
    if ret == 0 {
        return Ok(None);
    }
    if ret != pid {
        return Err(Error::last_os("waitpid(stub, WNOHANG)"));
    }
    Ok(Some(if libc::WIFSTOPPED(status) {
        Stopped(status >> 8)
    } else if libc::WIFEXITED(status) {
        WaitStatus::Exited(libc::WEXITSTATUS(status))
    } else {
        WaitStatus::Signaled(libc::WTERMSIG(status))
    }))
}

/// `tgkill(tgid, tid, sig)`: a thread-directed signal (the stub's threads
/// are told apart by their tracers; a process-directed signal could be
/// taken by any of them).
pub(crate) fn tgkill(tgid: i32, tid: i32, sig: i32) -> Result<()> {
    // SAFETY: plain integer arguments.
    let ret = unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid, sig) };
    check(ret, "tgkill(stub thread)").map(drop)
}

/// `pidfd_send_signal(pidfd, sig, NULL, 0)`: unlike `kill`, cannot hit a
/// recycled pid.
pub(crate) fn pidfd_send_signal(pidfd: RawFd, sig: i32) -> Result<()> {
    // SAFETY: plain integer arguments and a NULL siginfo.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd,
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    check(ret, "pidfd_send_signal(stub)").map(drop)
}

/// A pidfd for the calling *thread*, or `None` where the kernel lacks
/// `PIDFD_THREAD`. The stub polls it to detect a tracer that died before the
/// stub armed `PR_SET_PDEATHSIG`.
pub(crate) fn pidfd_open_self_thread() -> Option<OwnedFd> {
    // SAFETY: plain integer arguments.
    let ret = unsafe { libc::syscall(libc::SYS_pidfd_open, gettid(), PIDFD_THREAD) };
    if ret < 0 {
        return None;
    }
    // SAFETY: the kernel returned a fresh descriptor that nothing else owns.
    Some(unsafe { OwnedFd::from_raw_fd(ret as RawFd) })
}

/// `dup(fd)` with `O_CLOEXEC`.
pub(crate) fn dup_cloexec(fd: BorrowedFd<'_>) -> Result<OwnedFd> {
    // SAFETY: plain integer arguments.
    let ret = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    check(ret.into(), "fcntl(F_DUPFD_CLOEXEC, memory file)")?;
    // SAFETY: the kernel returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret) })
}

thread_local! {
    static TID: Cell<i32> = const { Cell::new(0) };
}

/// The calling thread's id, cached per thread (it is checked on every switch).
pub(crate) fn gettid() -> i32 {
    TID.with(|t| {
        if t.get() == 0 {
            // SAFETY: gettid has no arguments and cannot fail.
            t.set(unsafe { libc::syscall(libc::SYS_gettid) } as i32);
        }
        t.get()
    })
}

/// Restricts thread `tid` (0: the caller) to `cpu`.
pub(crate) fn set_affinity(tid: i32, cpu: usize) -> Result<()> {
    set_affinity_to(tid, &[cpu])
}

/// Lets thread `tid` (0: the caller) run on the CPUs in `cpus`.
pub(crate) fn set_affinity_to(tid: i32, cpus: &[usize]) -> Result<()> {
    // SAFETY: cpu_set_t is a plain bitmask; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return Err(Error::Misuse("cpu number beyond CPU_SETSIZE"));
        }
        // SAFETY: `cpu` is below CPU_SETSIZE (checked above).
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a live cpu_set_t of the size passed.
    let ret = unsafe { libc::sched_setaffinity(tid, std::mem::size_of_val(&set), &set) };
    check(ret.into(), "sched_setaffinity").map(drop)
}

/// The calling thread's CPU affinity mask.
pub(crate) fn affinity_mask() -> Result<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is a plain bitmask; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live cpu_set_t of the size passed.
    let ret = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    check(ret.into(), "sched_getaffinity").map(|_| set)
}

/// The CPUs in `set`.
pub(crate) fn cpus_of(set: &libc::cpu_set_t) -> Vec<usize> {
    (0..8 * std::mem::size_of::<libc::cpu_set_t>())
        // SAFETY: `c` is below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, set) })
        .collect()
}

/// The CPU the calling thread runs on.
pub(crate) fn current_cpu() -> Result<usize> {
    // SAFETY: no arguments; reads the vDSO/rseq cpu number.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).map_err(|_| Error::last_os("sched_getcpu"))
}

/// Pins the calling thread to the CPU it is running on and returns it.
/// Children created afterwards inherit the mask.
pub(crate) fn pin_to_current_cpu() -> Result<usize> {
    // SAFETY: no arguments; reads the vDSO/rseq cpu number.
    let cpu = unsafe { libc::sched_getcpu() };
    let cpu = usize::try_from(cpu).map_err(|_| Error::last_os("sched_getcpu"))?;
    // SAFETY: cpu_set_t is a plain bitmask; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` comes from sched_getcpu, so it is below CPU_SETSIZE.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a live cpu_set_t of the size passed.
    let ret = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    check(ret.into(), "sched_setaffinity(tracer)")?;
    Ok(cpu)
}

/// `PTRACE_GETSIGMASK` / `PTRACE_SETSIGMASK` (Linux 3.11).
const PTRACE_GETSIGMASK: libc::c_long = 0x420a;
const PTRACE_SETSIGMASK: libc::c_long = 0x420b;

/// The blocked-signal mask of a stopped tracee.
pub(crate) fn get_sigmask(tid: i32) -> Result<u64> {
    let mut mask: u64 = 0;
    let p: *mut u64 = &mut mask;
    ptrace(PTRACE_GETSIGMASK, tid, 8, p as usize, "ptrace(GETSIGMASK)")?;
    Ok(mask)
}

/// Replaces the blocked-signal mask of a stopped tracee.
pub(crate) fn set_sigmask(tid: i32, mask: u64) -> Result<()> {
    let p: *const u64 = &mask;
    ptrace(PTRACE_SETSIGMASK, tid, 8, p as usize, "ptrace(SETSIGMASK)")?;
    Ok(())
}

/// Whether thread `tid` of process `tgid` still exists (`tgkill` with
/// signal 0; a reaped thread's id cannot be reused while its thread group
/// leader, a zombie under our tracing at least, keeps the group).
pub(crate) fn thread_alive(tgid: i32, tid: i32) -> bool {
    // SAFETY: plain integer arguments; signal 0 only checks.
    let ret = unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid, 0) };
    ret == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// `FUTEX_WAIT` (shared: the word lives in a `MAP_SHARED` memfd mapping
/// the stub maps too) on `word` while it holds `expected`, for at most
/// `timeout`. Wake-ups, time-outs and a changed word all just return.
pub(crate) fn futex_wait(
    word: &std::sync::atomic::AtomicU32,
    expected: u32,
    timeout: std::time::Duration,
) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a live, aligned u32 for the duration of the call;
    // `ts` a live timespec. FUTEX_WAIT only reads both.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        )
    };
}

/// `FUTEX_WAKE` of one waiter on `word` (shared, see [`futex_wait`]).
pub(crate) fn futex_wake(word: &std::sync::atomic::AtomicU32) {
    // SAFETY: `word` is a live, aligned u32; FUTEX_WAKE does not access it.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, 1) };
}

/// A fresh, sealed-size memfd of `len` zero bytes.
pub(crate) fn memfd_of_len(name: &std::ffi::CStr, len: u64) -> Result<OwnedFd> {
    // SAFETY: a valid NUL-terminated name and flags.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    check(fd.into(), "memfd_create(stub slots)")?;
    // SAFETY: the kernel returned a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: plain integer arguments.
    let ret = unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) };
    check(ret.into(), "ftruncate(stub slots)")?;
    Ok(fd)
}

/// Frees the pages of `[off, off + len)` of memfd `fd` (they read as zero
/// afterwards).
pub(crate) fn punch_hole(fd: BorrowedFd<'_>, off: u64, len: u64) -> Result<()> {
    // SAFETY: plain integer arguments.
    let ret = unsafe {
        libc::fallocate(
            fd.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            off as libc::off_t,
            len as libc::off_t,
        )
    };
    check(ret.into(), "fallocate(PUNCH_HOLE, stub slot)").map(drop)
}
