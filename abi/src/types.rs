//! `#[repr(C)]` Linux structures exchanged with guests, with their sizes
//! checked at compile time against the x86-64 ABI.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

macro_rules! abi_struct {
    ($(#[$m:meta])* $name:ident, $size:expr, { $($(#[$fm:meta])* $f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
        #[repr(C)]
        #[allow(missing_docs)]
        pub struct $name { $($(#[$fm])* pub $f: $t),* }
        const _: () = assert!(core::mem::size_of::<$name>() == $size);
    };
}

abi_struct!(
    /// `struct timespec`.
    Timespec, 16, { tv_sec: i64, tv_nsec: i64 });
abi_struct!(
    /// `struct timeval`.
    Timeval, 16, { tv_sec: i64, tv_usec: i64 });
abi_struct!(
    /// `struct iovec`.
    Iovec, 16, { base: u64, len: u64 });
abi_struct!(
    /// `struct kcmp_epoll_slot` (`kcmp(KCMP_EPOLL_TFD)`).
    KcmpEpollSlot, 12, { efd: u32, tfd: u32, toff: u32 });
abi_struct!(
    /// `struct cachestat_range` (`cachestat(2)`).
    CachestatRange, 16, { off: u64, len: u64 });
abi_struct!(
/// `struct cachestat` (`cachestat(2)`): page counts.
Cachestat, 40, {
    nr_cache: u64, nr_dirty: u64, nr_writeback: u64, nr_evicted: u64,
    nr_recently_evicted: u64,
});
abi_struct!(
    /// `struct futex_waitv` (`futex_waitv(2)`).
    FutexWaitv, 24, { val: u64, uaddr: u64, flags: u32, reserved: u32 });
abi_struct!(
    /// `struct xattr_args` (`setxattrat(2)`, `getxattrat(2)`).
    XattrArgs, 16, { value: u64, size: u32, flags: u32 });
abi_struct!(
    /// `struct rlimit` / `struct rlimit64`.
    Rlimit, 16, { cur: u64, max: u64 });
abi_struct!(
    /// `struct tms` (clock ticks).
    Tms, 32, { utime: i64, stime: i64, cutime: i64, cstime: i64 });
abi_struct!(
    /// `struct winsize` (TIOCGWINSZ).
    Winsize, 8, { row: u16, col: u16, xpixel: u16, ypixel: u16 });
abi_struct!(
    /// The old `struct termio` (TCGETA): 16-bit flags and `NCC` (8)
    /// control characters, padded to an even size.
    Termio, 18, { iflag: u16, oflag: u16, cflag: u16, lflag: u16, line: u8, cc: [u8; 8], pad: u8 });
abi_struct!(
    /// The kernel's `struct termios` (TCGETS), not glibc's larger one.
    Termios, 36, { iflag: u32, oflag: u32, cflag: u32, lflag: u32, line: u8, cc: [u8; 19] });
abi_struct!(
/// `struct stat` on x86-64 (`stat`, `fstat`, `lstat`, `newfstatat`).
Stat, 144, {
    dev: u64, ino: u64, nlink: u64, mode: u32, uid: u32, gid: u32, pad0: u32,
    rdev: u64, size: i64, blksize: i64, blocks: i64,
    atime: i64, atime_nsec: i64, mtime: i64, mtime_nsec: i64, ctime: i64, ctime_nsec: i64,
    unused: [i64; 3],
});
abi_struct!(
    /// `struct statx_timestamp`.
    StatxTimestamp, 16, { tv_sec: i64, tv_nsec: u32, reserved: i32 });
abi_struct!(
/// `struct statx`.
Statx, 256, {
    mask: u32, blksize: u32, attributes: u64, nlink: u32, uid: u32, gid: u32, mode: u16, spare0: u16,
    ino: u64, size: u64, blocks: u64, attributes_mask: u64,
    atime: StatxTimestamp, btime: StatxTimestamp, ctime: StatxTimestamp, mtime: StatxTimestamp,
    rdev_major: u32, rdev_minor: u32, dev_major: u32, dev_minor: u32,
    mnt_id: u64, dio_mem_align: u32, dio_offset_align: u32, spare3: [u64; 12],
});
abi_struct!(
/// `struct statfs` on x86-64.
Statfs, 120, {
    f_type: i64, f_bsize: i64, f_blocks: u64, f_bfree: u64, f_bavail: u64, f_files: u64, f_ffree: u64,
    f_fsid: [i32; 2], f_namelen: i64, f_frsize: i64, f_flags: i64, f_spare: [i64; 4],
});
abi_struct!(
    /// `struct new_utsname` (`uname`).
    Utsname, 390, { sysname: [u8; 65], nodename: [u8; 65], release: [u8; 65], version: [u8; 65], machine: [u8; 65], domainname: [u8; 65] });
abi_struct!(
/// `struct sysinfo`.
Sysinfo, 112, {
    uptime: i64, loads: [u64; 3], totalram: u64, freeram: u64, sharedram: u64, bufferram: u64,
    totalswap: u64, freeswap: u64, procs: u16, pad: [u16; 3], totalhigh: u64, freehigh: u64, mem_unit: u32, pad2: [u8; 4],
});
abi_struct!(
    /// `struct rusage`.
    Rusage, 144, { utime: Timeval, stime: Timeval, rest: [i64; 14] });
abi_struct!(
    /// The kernel's `struct sigaction` for `rt_sigaction` (handler, flags, restorer, mask).
    KSigaction, 32, { handler: u64, flags: u64, restorer: u64, mask: u64 });
abi_struct!(
    /// `stack_t` (`sigaltstack`).
    StackT, 24, { sp: u64, flags: i32, pad: u32, size: u64 });
abi_struct!(
    /// `struct robust_list_head`.
    RobustListHead, 24, { list: u64, futex_offset: i64, list_op_pending: u64 });
abi_struct!(
/// ELF64 file header.
Elf64Ehdr, 64, {
    ident: [u8; 16], kind: u16, machine: u16, version: u32, entry: u64, phoff: u64, shoff: u64,
    flags: u32, ehsize: u16, phentsize: u16, phnum: u16, shentsize: u16, shnum: u16, shstrndx: u16,
});
abi_struct!(
    /// ELF64 program header.
    Elf64Phdr, 56, { kind: u32, flags: u32, offset: u64, vaddr: u64, paddr: u64, filesz: u64, memsz: u64, align: u64 });
abi_struct!(
/// `struct sigcontext` (x86-64), the register part of a signal frame.
SigContext, 256, {
    r8: u64, r9: u64, r10: u64, r11: u64, r12: u64, r13: u64, r14: u64, r15: u64,
    rdi: u64, rsi: u64, rbp: u64, rbx: u64, rdx: u64, rax: u64, rcx: u64, rsp: u64, rip: u64, eflags: u64,
    cs: u16, gs: u16, fs: u16, ss: u16, err: u64, trapno: u64, oldmask: u64, cr2: u64, fpstate: u64, reserved: [u64; 8],
});
abi_struct!(
    /// `struct ucontext` as the kernel writes it into a signal frame.
    UContext, 304, { flags: u64, link: u64, stack: StackT, mcontext: SigContext, sigmask: u64 });
abi_struct!(
    /// `siginfo_t`: the common header, then the union as words. For
    /// `kill`/`SIGCHLD` the union starts with pid (i32) and uid (u32), then
    /// status (i32); for faults it starts with the address.
    SigInfo, 128, { signo: i32, errno: i32, code: i32, pad: i32, fields: [u64; 14] });
abi_struct!(
/// The kernel's `struct termios2` (TCGETS2): `struct termios` plus the
/// input and output speeds.
Termios2, 44, {
    iflag: u32, oflag: u32, cflag: u32, lflag: u32, line: u8, cc: [u8; 19],
    ispeed: u32, ospeed: u32,
});
abi_struct!(
    /// `struct __user_cap_header_struct` (capget(2)).
    CapUserHeader, 8, { version: u32, pid: i32 });
abi_struct!(
    /// `struct __user_cap_data_struct`: 32 capabilities of each set (two of
    /// them, low then high, in versions 2 and 3).
    CapUserData, 12, { effective: u32, permitted: u32, inheritable: u32 });
