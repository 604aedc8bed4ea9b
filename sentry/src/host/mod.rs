//! Thin wrappers over the host calls the Sentry makes. Every one acts on a
//! descriptor the Sentry already holds; none names a host path (files come
//! from the gofer).

pub mod cpu_topology;
pub mod filter;
mod filter_doc;

pub use filter_doc::markdown as filters_markdown;
pub(crate) mod sig;
pub(crate) mod socket;

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

fn cvt(r: i64) -> io::Result<i64> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `fstat(fd)`, also for `O_PATH` descriptors.
pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    // SAFETY: all-zero bytes are a valid `stat`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid out-pointer; empty path with AT_EMPTY_PATH
    // names `fd` itself (works for O_PATH descriptors).
    cvt(unsafe {
        libc::fstatat(
            fd.as_raw_fd(),
            c"".as_ptr(),
            &mut st,
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
        )
    }
    .into())?;
    Ok(st)
}

/// `getdents64` into `buf`; returns the byte count (0 at the end).
pub fn getdents64(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for its length.
    let n = cvt(unsafe {
        libc::syscall(
            libc::SYS_getdents64,
            fd.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    })?;
    Ok(n as usize)
}

/// `pread` into raw memory (guest memory in the memory file).
///
/// # Safety
/// `ptr` must be valid for writes of `len` bytes.
pub unsafe fn pread_raw(
    fd: BorrowedFd<'_>,
    ptr: *mut u8,
    len: usize,
    pos: u64,
) -> io::Result<usize> {
    // SAFETY: the caller guarantees `ptr`/`len`.
    let n = cvt(unsafe { libc::pread(fd.as_raw_fd(), ptr.cast(), len, pos as i64) } as i64)?;
    Ok(n as usize)
}

/// `read` into raw memory.
///
/// # Safety
/// `ptr` must be valid for writes of `len` bytes.
pub unsafe fn read_raw(fd: BorrowedFd<'_>, ptr: *mut u8, len: usize) -> io::Result<usize> {
    // SAFETY: the caller guarantees `ptr`/`len`.
    let n = cvt(unsafe { libc::read(fd.as_raw_fd(), ptr.cast(), len) } as i64)?;
    Ok(n as usize)
}

/// `write` from raw memory.
///
/// # Safety
/// `ptr` must be valid for reads of `len` bytes.
pub unsafe fn write_raw(fd: BorrowedFd<'_>, ptr: *const u8, len: usize) -> io::Result<usize> {
    // SAFETY: the caller guarantees `ptr`/`len`.
    let n = cvt(unsafe { libc::write(fd.as_raw_fd(), ptr.cast(), len) } as i64)?;
    Ok(n as usize)
}

/// `lseek`.
pub fn lseek(fd: BorrowedFd<'_>, off: i64, whence: i32) -> io::Result<u64> {
    // SAFETY: plain syscall on a descriptor we hold.
    Ok(cvt(unsafe { libc::lseek(fd.as_raw_fd(), off, whence) })? as u64)
}

/// `ftruncate`.
pub fn ftruncate(fd: BorrowedFd<'_>, len: u64) -> io::Result<()> {
    let len = i64::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    // SAFETY: plain syscall on a descriptor we hold.
    cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), len) }.into()).map(drop)
}

/// `fsync`, also for the guest's `fdatasync`: it does all `fdatasync`
/// does, and spares the Sentry's seccomp filter a call.
pub fn fsync(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: plain syscall on a descriptor we hold.
    let r = unsafe { libc::fsync(fd.as_raw_fd()) };
    cvt(r.into()).map(drop)
}

/// `fallocate`.
pub fn fallocate(fd: BorrowedFd<'_>, mode: i32, off: i64, len: i64) -> io::Result<()> {
    // SAFETY: plain syscall on a descriptor we hold.
    cvt(unsafe { libc::fallocate(fd.as_raw_fd(), mode, off, len) }.into()).map(drop)
}

/// `ioctl(fd, TCGETS)`.
pub fn tcgets(fd: BorrowedFd<'_>) -> io::Result<abi::Termios> {
    let mut t = <abi::Termios as zerocopy::FromZeros>::new_zeroed();
    // SAFETY: TCGETS writes a kernel `struct termios` (36 bytes, the size of
    // `abi::Termios`).
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TCGETS, &mut t as *mut abi::Termios) }.into())?;
    Ok(t)
}

/// `ioctl(fd, request, params)` on an NVIDIA device for nvproxy: the
/// driver reads and writes `params` and the proxy buffers its embedded
/// pointers name. The return value, or the errno.
pub fn nv_ioctl(fd: BorrowedFd<'_>, request: u32, params: &mut [u8]) -> Result<i32, abi::Errno> {
    // SAFETY: `params` is live and writable for its length, at least the
    // size the table (and so the driver) gives the request; the pointers
    // inside it point at buffers nvproxy keeps alive across the call.
    let r = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::c_ulong::from(request),
            params.as_mut_ptr(),
        )
    };
    if r < 0 {
        Err(abi::Errno(
            io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        ))
    } else {
        Ok(r)
    }
}

/// `ioctl(fd, TIOCGWINSZ)`.
pub fn get_winsize(fd: BorrowedFd<'_>) -> io::Result<abi::Winsize> {
    let mut w = <abi::Winsize as zerocopy::FromZeros>::new_zeroed();
    // SAFETY: TIOCGWINSZ writes a `struct winsize` (8 bytes).
    cvt(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TIOCGWINSZ,
            &mut w as *mut abi::Winsize,
        )
    }
    .into())?;
    Ok(w)
}

/// `ioctl(fd, FIONREAD)`.
pub fn fionread(fd: BorrowedFd<'_>) -> io::Result<i32> {
    let mut n: i32 = 0;
    // SAFETY: FIONREAD writes an int.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut n as *mut i32) }.into())?;
    Ok(n)
}

/// `getrandom` filling `buf` completely.
pub fn getrandom(buf: &mut [u8]) {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the slice tail is valid for writes.
        let n = unsafe { libc::getrandom(buf[done..].as_mut_ptr().cast(), buf.len() - done, 0) };
        if n > 0 {
            done += n as usize;
        }
    }
}

/// A descriptor number we were handed (stdio), borrowed.
///
/// # Safety
/// `fd` must stay open for `'a`.
pub unsafe fn borrow_raw<'a>(fd: i32) -> BorrowedFd<'a> {
    // SAFETY: per the caller's guarantee.
    unsafe { BorrowedFd::borrow_raw(fd) }
}

/// `clock_gettime`.
pub fn clock_gettime(clock: i32) -> io::Result<abi::Timespec> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    cvt(unsafe { libc::clock_gettime(clock, &mut ts) }.into())?;
    Ok(abi::Timespec {
        tv_sec: ts.tv_sec,
        tv_nsec: ts.tv_nsec,
    })
}

/// The host's `clock_getres` of its fixed clocks (0 to 11) and, last, of
/// its tick-counted CPU clocks; `None` where the host has no such clock.
/// Read once, before the Sentry's filter (which has no `clock_getres`).
pub fn clock_resolutions() -> &'static [Option<abi::Timespec>; 13] {
    static RES: std::sync::OnceLock<[Option<abi::Timespec>; 13]> = std::sync::OnceLock::new();
    RES.get_or_init(|| {
        std::array::from_fn(|i| {
            let clock = if i == 12 { !0 << 3 } else { i as i32 };
            clock_getres(clock).ok()
        })
    })
}

/// `clock_getres`.
fn clock_getres(clock: i32) -> io::Result<abi::Timespec> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    cvt(unsafe { libc::clock_getres(clock, &mut ts) }.into())?;
    Ok(abi::Timespec {
        tv_sec: ts.tv_sec,
        tv_nsec: ts.tv_nsec,
    })
}

/// The core-file limit the Sentry had before [`no_core_files`].
static CORE_BEFORE: std::sync::OnceLock<abi::Rlimit> = std::sync::OnceLock::new();

/// No core file of the Sentry's process, wherever the host sends them
/// (it holds secrets): a limit of one byte is below the page an ELF core
/// needs, and the one value for which the kernel refuses to pipe a core to
/// a `core_pattern` handler, which ignores zero. Guests still see the
/// limit the caller gave.
pub fn no_core_files() -> std::io::Result<()> {
    let _ = CORE_BEFORE.set(getrlimit(libc::RLIMIT_CORE));
    let one = libc::rlimit {
        rlim_cur: 1,
        rlim_max: 1,
    };
    // SAFETY: setrlimit reads the struct we pass.
    cvt(unsafe { libc::setrlimit(libc::RLIMIT_CORE, &one) }.into()).map(drop)
}

/// `getrlimit` of the host process, to hand the guest the caller's limits.
pub fn getrlimit(res: u32) -> abi::Rlimit {
    if res == libc::RLIMIT_CORE {
        if let Some(r) = CORE_BEFORE.get() {
            return *r;
        }
    }
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid out-pointer.
    if unsafe { libc::getrlimit(res as _, &mut r) } != 0 {
        return abi::Rlimit {
            cur: u64::MAX,
            max: u64::MAX,
        };
    }
    abi::Rlimit {
        cur: r.rlim_cur,
        max: r.rlim_max,
    }
}

/// `getauxval` of the Sentry's own process (CPU feature bits for the guest).
pub fn getauxval(key: u64) -> u64 {
    // SAFETY: plain libc query.
    unsafe { libc::getauxval(key) }
}

/// Host ids of the caller (the guest sees the caller's identity). Asked of
/// the host once, before the Sentry's seccomp filter (which leaves them
/// out) goes on: they never change.
pub fn ids() -> (u32, u32) {
    static IDS: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    // SAFETY: plain syscalls without arguments.
    *IDS.get_or_init(|| unsafe { (libc::getuid(), libc::getgid()) })
}

/// Converts a host `stat` to the guest ABI's.
pub fn to_abi_stat(st: &libc::stat) -> abi::Stat {
    abi::Stat {
        dev: st.st_dev,
        ino: st.st_ino,
        nlink: st.st_nlink,
        mode: st.st_mode,
        uid: st.st_uid,
        gid: st.st_gid,
        pad0: 0,
        rdev: st.st_rdev,
        size: st.st_size,
        blksize: st.st_blksize,
        blocks: st.st_blocks,
        atime: st.st_atime,
        atime_nsec: st.st_atime_nsec,
        mtime: st.st_mtime,
        mtime_nsec: st.st_mtime_nsec,
        ctime: st.st_ctime,
        ctime_nsec: st.st_ctime_nsec,
        unused: [0; 3],
    }
}

/// A descriptor's status flags (`F_GETFL`).
pub fn getfl(fd: BorrowedFd<'_>) -> io::Result<i32> {
    // SAFETY: plain fcntl query.
    Ok(cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) }.into())? as i32)
}

/// Total RAM of the host, in bytes (what the guest is told it has).
pub fn total_memory() -> u64 {
    // SAFETY: all-zero bytes are a valid `sysinfo`.
    let mut si: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: `si` is a valid out-pointer.
    if unsafe { libc::sysinfo(&mut si) } != 0 {
        return 1 << 30;
    }
    si.totalram * u64::from(si.mem_unit)
}

/// Whether `fd` has input within `timeout_ms` (`poll` for `POLLIN`; hang-up
/// and errors count as ready so the following read reports them).
pub fn poll_in(fd: BorrowedFd<'_>, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(n > 0)
}

/// `poll` of one host descriptor without waiting; returns `revents`.
pub fn poll_events(fd: BorrowedFd<'_>, events: i16) -> i16 {
    poll_for(fd, events, 0)
}

/// `poll` of one host descriptor for up to `timeout_ms`; returns
/// `revents` (0 when it timed out or failed).
pub fn poll_for(fd: BorrowedFd<'_>, events: i16, timeout_ms: i32) -> i16 {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if n <= 0 {
        0
    } else {
        p.revents
    }
}

/// The caller's supplementary groups, asked of the host once (the Sentry
/// may give up its own before it starts).
pub fn groups() -> Vec<u32> {
    static GROUPS: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();
    GROUPS.get_or_init(host_groups).clone()
}

fn host_groups() -> Vec<u32> {
    // SAFETY: a null list with size 0 only asks for the count.
    let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    if n <= 0 {
        return Vec::new();
    }
    let mut v = vec![0 as libc::gid_t; n as usize];
    // SAFETY: `v` has room for `n` ids.
    let n = unsafe { libc::getgroups(n, v.as_mut_ptr()) };
    v.truncate(n.max(0) as usize);
    v
}

/// `pwrite` from raw memory.
///
/// # Safety
/// `ptr` must be valid for reads of `len` bytes.
pub unsafe fn pwrite_raw(
    fd: BorrowedFd<'_>,
    ptr: *const u8,
    len: usize,
    pos: u64,
) -> io::Result<usize> {
    // SAFETY: the caller guarantees `ptr`/`len`.
    let n = cvt(unsafe { libc::pwrite(fd.as_raw_fd(), ptr.cast(), len, pos as i64) } as i64)?;
    Ok(n as usize)
}

/// `read` into a Sentry buffer.
pub fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of its length.
    let n = cvt(unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } as i64)?;
    Ok(n as usize)
}

/// `write` from a Sentry buffer.
pub fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of its length.
    let n = cvt(unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) } as i64)?;
    Ok(n as usize)
}

/// `pread` into a Sentry buffer.
pub fn pread(fd: BorrowedFd<'_>, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of its length.
    unsafe { pread_raw(fd, buf.as_mut_ptr(), buf.len(), pos) }
}

/// `pwrite` from a Sentry buffer.
pub fn pwrite(fd: BorrowedFd<'_>, buf: &[u8], pos: u64) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of its length.
    unsafe { pwrite_raw(fd, buf.as_ptr(), buf.len(), pos) }
}

fn cpuid(leaf: u32, sub: u32) -> [u32; 4] {
    // CPUID is available on every x86-64 CPU and only writes registers.
    let r = std::arch::x86_64::__cpuid_count(leaf, sub);
    [r.eax, r.ebx, r.ecx, r.edx]
}

/// The state components the host enabled for XSAVE (`XCR0`), 0 without
/// XSAVE.
pub fn xcr0() -> u64 {
    if cpuid(1, 0)[2] & (1 << 27) == 0 {
        return 0;
    }
    let (lo, hi): (u32, u32);
    // SAFETY: XGETBV reads a register and is allowed in ring 3 once the
    // OS set CR4.OSXSAVE, which CPUID's bit 27 above reports.
    unsafe {
        std::arch::asm!("xgetbv", in("ecx") 0, out("eax") lo, out("edx") hi, options(nomem, nostack));
    }
    u64::from(hi) << 32 | u64::from(lo)
}

/// Where each extended XSAVE component enabled in [`xcr0`] lies in the
/// standard format: (component, size, offset), from CPUID leaf 0xD.
pub fn xsave_layout() -> Vec<(u32, u32, u32)> {
    let xcr0 = xcr0();
    (2..64)
        .filter(|i| xcr0 >> i & 1 != 0)
        .map(|i| {
            let r = cpuid(0xd, i);
            (i, r[0], r[1])
        })
        .collect()
}

/// The CPU's brand string (CPUID leaves 0x80000002..4).
pub fn cpu_brand() -> String {
    if cpuid(0x8000_0000, 0)[0] < 0x8000_0004 {
        return "unknown".into();
    }
    let mut b = Vec::new();
    for leaf in 0x8000_0002..=0x8000_0004u32 {
        for r in cpuid(leaf, 0) {
            b.extend_from_slice(&r.to_le_bytes());
        }
    }
    String::from_utf8_lossy(&b)
        .trim_matches(char::from(0))
        .trim()
        .to_string()
}

/// The CPU vendor string (CPUID leaf 0).
pub fn cpu_vendor() -> String {
    let r = cpuid(0, 0);
    let mut b = Vec::new();
    for x in [r[1], r[3], r[2]] {
        b.extend_from_slice(&x.to_le_bytes());
    }
    String::from_utf8_lossy(&b).into_owned()
}

/// The /proc/cpuinfo flags the guest may rely on, from CPUID.
pub fn cpu_flags() -> String {
    let l1 = cpuid(1, 0);
    let l7 = cpuid(7, 0);
    let checks: &[(&str, u32, u32)] = &[
        ("fpu", l1[3], 0),
        ("tsc", l1[3], 4),
        ("cx8", l1[3], 8),
        ("cmov", l1[3], 15),
        ("mmx", l1[3], 23),
        ("fxsr", l1[3], 24),
        ("sse", l1[3], 25),
        ("sse2", l1[3], 26),
        ("pni", l1[2], 0),
        ("pclmulqdq", l1[2], 1),
        ("ssse3", l1[2], 9),
        ("fma", l1[2], 12),
        ("cx16", l1[2], 13),
        ("sse4_1", l1[2], 19),
        ("sse4_2", l1[2], 20),
        ("movbe", l1[2], 22),
        ("popcnt", l1[2], 23),
        ("aes", l1[2], 25),
        ("xsave", l1[2], 26),
        ("avx", l1[2], 28),
        ("f16c", l1[2], 29),
        ("rdrand", l1[2], 30),
        ("bmi1", l7[1], 3),
        ("avx2", l7[1], 5),
        ("bmi2", l7[1], 8),
        ("erms", l7[1], 9),
        ("avx512f", l7[1], 16),
        ("rdseed", l7[1], 18),
        ("adx", l7[1], 19),
        ("sha_ni", l7[1], 29),
    ];
    checks
        .iter()
        .filter(|(_, reg, bit)| reg & (1 << bit) != 0)
        .map(|(n, _, _)| *n)
        .collect::<Vec<_>>()
        .join(" ")
}

/// An anonymous, sealed-size memory file holding `data` (a snapshot the
/// loader can `pread` like a host file).
pub fn memfd_with(data: &[u8]) -> io::Result<OwnedFd> {
    // SAFETY: the name is NUL-terminated; the result is a new descriptor.
    let raw = unsafe { libc::memfd_create(c"ferrovisor-exec".as_ptr(), libc::MFD_CLOEXEC) };
    cvt(raw.into())?;
    // SAFETY: `raw` is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut done = 0;
    while done < data.len() {
        // SAFETY: the slice tail is valid for reads.
        let n = unsafe {
            libc::write(
                fd.as_raw_fd(),
                data[done..].as_ptr().cast(),
                data.len() - done,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        done += n as usize;
    }
    Ok(fd)
}
