//! Thin safe wrappers over the host system calls the gofer makes: `*at()`
//! file calls relative to a descriptor, socket I/O with descriptor passing,
//! and the namespace and mount calls of the jail. Every `unsafe` block of the
//! crate outside `seccomp.rs` is here.

use std::ffi::{CStr, CString};
use std::io::IoSlice;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

use abi::Errno;

/// The calling thread's `errno`.
pub fn errno() -> Errno {
    Errno(
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO),
    )
}

fn check(r: libc::c_int) -> Result<(), Errno> {
    if r < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

fn check_fd(r: libc::c_long) -> Result<OwnedFd, Errno> {
    if r < 0 {
        return Err(errno());
    }
    let fd = RawFd::try_from(r).map_err(|_| Errno::EBADF)?;
    // SAFETY: the kernel just returned this new descriptor to us; nothing
    // else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Converts a checked name to a C string.
pub fn cstr(name: &[u8]) -> Result<CString, Errno> {
    CString::new(name).map_err(|_| Errno::EINVAL)
}

/// Whether `openat2(2)` exists (Linux 5.6); cleared on the first ENOSYS.
static HAVE_OPENAT2: AtomicBool = AtomicBool::new(true);

/// Opens `name`, a single component already checked to hold no `/`, below
/// `dir` without following any symlink: `openat2` with `RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` where the kernel has it,
/// else `openat` with `O_NOFOLLOW` (equivalent for a single component).
/// `O_NOFOLLOW` and `O_CLOEXEC` are always added.
pub fn openat_beneath(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: i32,
    mode: u32,
) -> Result<OwnedFd, Errno> {
    let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    if HAVE_OPENAT2.load(Ordering::Relaxed) {
        let how = OpenHow {
            flags: flags as u32 as u64,
            mode: if flags & (libc::O_CREAT | libc::O_TMPFILE) != 0 {
                u64::from(mode)
            } else {
                0
            },
            resolve: libc::RESOLVE_BENEATH
                | libc::RESOLVE_NO_SYMLINKS
                | libc::RESOLVE_NO_MAGICLINKS,
        };
        // SAFETY: `name` is a valid C string and `how` a valid open_how whose
        // size we pass; the kernel reads both and returns a new descriptor.
        let r = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                name.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        };
        match check_fd(r) {
            Err(Errno::ENOSYS) => HAVE_OPENAT2.store(false, Ordering::Relaxed),
            res => return res,
        }
    }
    // SAFETY: `name` is a valid C string; openat returns a new descriptor.
    let r = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, mode) };
    check_fd(r.into())
}

/// `statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)`: works on `O_PATH`
/// descriptors, symlinks included.
pub fn statx(fd: BorrowedFd<'_>) -> Result<libc::statx, Errno> {
    // SAFETY: statx is plain old data; all-zero is a valid value.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: the path is a valid empty C string and `st` a valid out buffer.
    let r = unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_BASIC_STATS | libc::STATX_BTIME,
            &mut st,
        )
    };
    check(r).map(|()| st)
}

/// `struct open_how` of `openat2(2)` (libc's is non-exhaustive).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}
const _: () = assert!(std::mem::size_of::<OpenHow>() == 24);

/// The kernel's x86-64 `struct statfs` (libc hides `f_flags`).
#[repr(C)]
#[derive(Default)]
pub struct Statfs {
    pub f_type: i64,
    pub f_bsize: i64,
    pub f_blocks: u64,
    pub f_bfree: u64,
    pub f_bavail: u64,
    pub f_files: u64,
    pub f_ffree: u64,
    pub f_fsid: [i32; 2],
    pub f_namelen: i64,
    pub f_frsize: i64,
    pub f_flags: i64,
    pub f_spare: [i64; 4],
}
const _: () = assert!(std::mem::size_of::<Statfs>() == 120);

/// `fstatfs(2)` (works on `O_PATH` descriptors).
pub fn fstatfs(fd: BorrowedFd<'_>) -> Result<Statfs, Errno> {
    let mut st = Statfs::default();
    // SAFETY: `st` is a valid out buffer of the kernel's struct statfs.
    let r = unsafe { libc::syscall(libc::SYS_fstatfs, fd.as_raw_fd(), &mut st as *mut Statfs) };
    if r < 0 {
        Err(errno())
    } else {
        Ok(st)
    }
}

/// `getdents64(2)` into `buf`, returning the bytes filled.
pub fn getdents64(fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize, Errno> {
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_getdents64,
            fd.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    if r < 0 {
        Err(errno())
    } else {
        usize::try_from(r).map_err(|_| Errno::EIO)
    }
}

/// `lseek(fd, off, SEEK_SET)`.
pub fn seek_set(fd: BorrowedFd<'_>, off: u64) -> Result<(), Errno> {
    let off = i64::try_from(off).map_err(|_| Errno::EINVAL)?;
    // SAFETY: lseek takes no pointers.
    let r = unsafe { libc::lseek(fd.as_raw_fd(), off, libc::SEEK_SET) };
    if r < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// `mkdirat(2)`.
pub fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> Result<(), Errno> {
    // SAFETY: `name` is a valid C string.
    check(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) })
}

/// `mknodat(2)` with device 0.
pub fn mknodat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> Result<(), Errno> {
    // SAFETY: `name` is a valid C string.
    check(unsafe { libc::mknodat(dir.as_raw_fd(), name.as_ptr(), mode, 0) })
}

/// `symlinkat(2)`.
pub fn symlinkat(target: &CStr, dir: BorrowedFd<'_>, name: &CStr) -> Result<(), Errno> {
    // SAFETY: both are valid C strings.
    check(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) })
}

/// `linkat(2)` (`flags` 0: a symlink is linked, not followed).
pub fn linkat(
    old_dir: BorrowedFd<'_>,
    old_name: &CStr,
    new_dir: BorrowedFd<'_>,
    new_name: &CStr,
    flags: i32,
) -> Result<(), Errno> {
    // SAFETY: both are valid C strings.
    check(unsafe {
        libc::linkat(
            old_dir.as_raw_fd(),
            old_name.as_ptr(),
            new_dir.as_raw_fd(),
            new_name.as_ptr(),
            flags,
        )
    })
}

/// `unlinkat(2)`.
pub fn unlinkat(dir: BorrowedFd<'_>, name: &CStr, flags: i32) -> Result<(), Errno> {
    // SAFETY: `name` is a valid C string.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) })
}

/// `renameat2(2)`.
pub fn renameat2(
    old_dir: BorrowedFd<'_>,
    old_name: &CStr,
    new_dir: BorrowedFd<'_>,
    new_name: &CStr,
    flags: u32,
) -> Result<(), Errno> {
    // SAFETY: both are valid C strings.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            old_dir.as_raw_fd(),
            old_name.as_ptr(),
            new_dir.as_raw_fd(),
            new_name.as_ptr(),
            flags,
        )
    };
    if r < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// `readlinkat(fd, "")`: the target of the symlink `fd` (an `O_PATH`
/// descriptor) stands for.
pub fn readlink(fd: BorrowedFd<'_>) -> Result<Vec<u8>, Errno> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
    let r = unsafe {
        libc::readlinkat(
            fd.as_raw_fd(),
            c"".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if r < 0 {
        return Err(errno());
    }
    buf.truncate(usize::try_from(r).map_err(|_| Errno::EIO)?);
    Ok(buf)
}

/// `fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)`;
/// `u32::MAX` leaves an id unchanged.
pub fn fchown(fd: BorrowedFd<'_>, uid: u32, gid: u32) -> Result<(), Errno> {
    // SAFETY: the path is a valid empty C string.
    check(unsafe {
        libc::fchownat(
            fd.as_raw_fd(),
            c"".as_ptr(),
            uid,
            gid,
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
        )
    })
}

/// `fchmodat2(fd, "", mode, AT_EMPTY_PATH)` (Linux 6.6): changes the mode
/// through an `O_PATH` descriptor.
pub fn fchmod_path(fd: BorrowedFd<'_>, mode: u32) -> Result<(), Errno> {
    // SAFETY: the path is a valid empty C string.
    let r = unsafe {
        libc::syscall(
            libc::SYS_fchmodat2,
            fd.as_raw_fd(),
            c"".as_ptr(),
            mode,
            libc::AT_EMPTY_PATH,
        )
    };
    if r < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// `fchmod(2)` on an open (not `O_PATH`) descriptor.
pub fn fchmod(fd: BorrowedFd<'_>, mode: u32) -> Result<(), Errno> {
    // SAFETY: fchmod takes no pointers.
    check(unsafe { libc::fchmod(fd.as_raw_fd(), mode) })
}

/// `utimensat(fd, "", times, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)`.
pub fn utimens(fd: BorrowedFd<'_>, times: &[libc::timespec; 2]) -> Result<(), Errno> {
    // SAFETY: the path is a valid empty C string, `times` two timespecs.
    check(unsafe {
        libc::utimensat(
            fd.as_raw_fd(),
            c"".as_ptr(),
            times.as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
        )
    })
}

/// `ftruncate(2)`.
pub fn ftruncate(fd: BorrowedFd<'_>, size: u64) -> Result<(), Errno> {
    let size = i64::try_from(size).map_err(|_| Errno::EFBIG)?;
    // SAFETY: ftruncate takes no pointers.
    check(unsafe { libc::ftruncate(fd.as_raw_fd(), size) })
}

/// `fsync(2)`.
pub fn fsync(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    // SAFETY: fsync takes no pointers.
    check(unsafe { libc::fsync(fd.as_raw_fd()) })
}

/// `fcntl(F_GETFL)`.
pub fn getfl(fd: BorrowedFd<'_>) -> Result<i32, Errno> {
    // SAFETY: F_GETFL takes no pointers.
    let r = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if r < 0 {
        Err(errno())
    } else {
        Ok(r)
    }
}

/// `fcntl(F_SETFL)`.
pub fn setfl(fd: BorrowedFd<'_>, flags: i32) -> Result<(), Errno> {
    // SAFETY: F_SETFL takes an integer.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) })
}

/// `fgetxattr(2)` of at most [`crate::proto::MAX_DATA`] bytes.
pub fn fgetxattr(fd: BorrowedFd<'_>, name: &CStr) -> Result<Vec<u8>, Errno> {
    let mut buf = vec![0u8; crate::proto::MAX_DATA];
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
    let r = unsafe {
        libc::fgetxattr(
            fd.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if r < 0 {
        return Err(errno());
    }
    buf.truncate(usize::try_from(r).map_err(|_| Errno::EIO)?);
    Ok(buf)
}

/// `fsetxattr(2)`.
pub fn fsetxattr(fd: BorrowedFd<'_>, name: &CStr, value: &[u8], flags: i32) -> Result<(), Errno> {
    // SAFETY: `name` is a valid C string; the kernel reads `value.len()`
    // bytes from `value`.
    check(unsafe {
        libc::fsetxattr(
            fd.as_raw_fd(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            flags,
        )
    })
}

/// `flistxattr(2)`: the NUL-separated list of names.
pub fn flistxattr(fd: BorrowedFd<'_>) -> Result<Vec<u8>, Errno> {
    let mut buf = vec![0u8; crate::proto::MAX_DATA];
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
    let r = unsafe { libc::flistxattr(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if r < 0 {
        return Err(errno());
    }
    buf.truncate(usize::try_from(r).map_err(|_| Errno::EIO)?);
    Ok(buf)
}

/// `fremovexattr(2)`.
pub fn fremovexattr(fd: BorrowedFd<'_>, name: &CStr) -> Result<(), Errno> {
    // SAFETY: `name` is a valid C string.
    check(unsafe { libc::fremovexattr(fd.as_raw_fd(), name.as_ptr()) })
}

/// Most descriptors one frame carries (`WalkDirs`' batch).
pub const MAX_FDS: usize = 32;

/// Sends all of `data` on a stream socket, with `fds` (at most
/// [`MAX_FDS`]) as `SCM_RIGHTS` on the first byte. `MSG_NOSIGNAL`: a peer that went away is
/// EPIPE, not a SIGPIPE that kills the gofer.
pub fn send_all(sock: BorrowedFd<'_>, data: &[u8], fds: &[BorrowedFd<'_>]) -> Result<(), Errno> {
    if fds.len() > MAX_FDS {
        return Err(Errno::EINVAL);
    }
    let mut sent = 0;
    let mut fds = fds;
    // Room for MAX_FDS descriptors' control message, aligned as cmsghdr
    // wants.
    let mut cbuf = [0u64; 2 + MAX_FDS / 2];
    while sent < data.len() {
        let iov = [IoSlice::new(&data[sent..])];
        // SAFETY: msghdr is plain old data; all-zero is a valid value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = 1;
        if !fds.is_empty() {
            let bytes = std::mem::size_of_val(fds) as u32;
            // SAFETY: CMSG_SPACE is a pure size computation.
            let space = unsafe { libc::CMSG_SPACE(bytes) } as usize;
            debug_assert!(space <= std::mem::size_of_val(&cbuf));
            msg.msg_control = cbuf.as_mut_ptr().cast();
            msg.msg_controllen = space;
            // SAFETY: msg_control points at `space` writable bytes, enough
            // for one cmsghdr carrying the descriptors, so CMSG_FIRSTHDR is
            // non-null and CMSG_DATA has room for each.
            unsafe {
                let c = libc::CMSG_FIRSTHDR(&msg);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN(bytes) as usize;
                for (i, f) in fds.iter().enumerate() {
                    let at = libc::CMSG_DATA(c).cast::<RawFd>().add(i);
                    std::ptr::write_unaligned(at, f.as_raw_fd());
                }
            }
        }
        // SAFETY: `msg` points at live buffers for the duration of the call.
        let r = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if r < 0 {
            let e = errno();
            if e == Errno::EINTR {
                continue;
            }
            return Err(e);
        }
        fds = &[];
        sent += usize::try_from(r).map_err(|_| Errno::EIO)?;
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes from a stream socket, collecting any
/// descriptors that arrive with them into `fds` (close-on-exec). Returns
/// `Ok(false)` on end of stream before the first byte, EIO on end of stream
/// in the middle.
pub fn recv_exact(
    sock: BorrowedFd<'_>,
    buf: &mut [u8],
    fds: &mut Vec<OwnedFd>,
) -> Result<bool, Errno> {
    let mut got = 0;
    let mut cbuf = [0u64; 32];
    while got < buf.len() {
        let mut iov = libc::iovec {
            iov_base: buf[got..].as_mut_ptr().cast(),
            iov_len: buf.len() - got,
        };
        // SAFETY: msghdr is plain old data; all-zero is a valid value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cbuf);
        // SAFETY: `msg` points at live, writable buffers of the given sizes.
        let r = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if r < 0 {
            let e = errno();
            if e == Errno::EINTR {
                continue;
            }
            return Err(e);
        }
        // SAFETY: the kernel filled `msg_controllen` bytes of control data;
        // the CMSG_* walk stays inside them.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(c);
                    let n =
                        ((*c).cmsg_len - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                    for i in 0..n {
                        let raw = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                        // The kernel installed this descriptor for us.
                        fds.push(OwnedFd::from_raw_fd(raw));
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        if r == 0 {
            return if got == 0 { Ok(false) } else { Err(Errno::EIO) };
        }
        got += usize::try_from(r).map_err(|_| Errno::EIO)?;
    }
    Ok(true)
}

// ---- the jail's calls ----

/// `unshare(2)`.
pub fn unshare(flags: i32) -> Result<(), Errno> {
    // SAFETY: unshare takes no pointers.
    check(unsafe { libc::unshare(flags) })
}

/// `mount(2)`; `None` passes NULL.
pub fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
) -> Result<(), Errno> {
    let p = |s: Option<&CStr>| s.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: every pointer is NULL or a valid C string; no data argument.
    check(unsafe {
        libc::mount(
            p(source),
            target.as_ptr(),
            p(fstype),
            flags,
            std::ptr::null(),
        )
    })
}

/// `statvfs(2)`'s mount flags (`ST_*`) of the mount holding `path`.
pub fn mount_flags(path: &CStr) -> Result<libc::c_ulong, Errno> {
    // SAFETY: statvfs is plain old data; all-zero is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a valid C string, `st` a valid out buffer.
    check(unsafe { libc::statvfs(path.as_ptr(), &mut st) }).map(|()| st.f_flag)
}

/// `pivot_root(new_root, put_old)`.
pub fn pivot_root(new_root: &CStr, put_old: &CStr) -> Result<(), Errno> {
    // SAFETY: both are valid C strings.
    let r = unsafe { libc::syscall(libc::SYS_pivot_root, new_root.as_ptr(), put_old.as_ptr()) };
    if r < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// `umount2(2)`.
pub fn umount2(target: &CStr, flags: i32) -> Result<(), Errno> {
    // SAFETY: `target` is a valid C string.
    check(unsafe { libc::umount2(target.as_ptr(), flags) })
}

/// `chdir(2)`.
pub fn chdir(path: &CStr) -> Result<(), Errno> {
    // SAFETY: `path` is a valid C string.
    check(unsafe { libc::chdir(path.as_ptr()) })
}

/// `fchdir(2)`: the working directory becomes `dir` (an `O_PATH`
/// descriptor will do).
pub fn fchdir(dir: BorrowedFd<'_>) -> Result<(), Errno> {
    // SAFETY: plain integer argument.
    check(unsafe { libc::fchdir(dir.as_raw_fd()) })
}

/// `inotify_init1(IN_NONBLOCK | IN_CLOEXEC)`.
pub fn inotify_init() -> Result<OwnedFd, Errno> {
    // SAFETY: plain integer argument.
    let r = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    check_fd(r.into())
}

/// `inotify_add_watch(2)` of `name`, relative to the working directory.
pub fn inotify_add_watch(fd: BorrowedFd<'_>, name: &CStr, mask: u32) -> Result<i32, Errno> {
    // SAFETY: `name` is a valid C string.
    let r = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), name.as_ptr(), mask) };
    if r < 0 {
        return Err(errno());
    }
    Ok(r)
}

/// `inotify_rm_watch(2)`.
pub fn inotify_rm_watch(fd: BorrowedFd<'_>, wd: i32) -> Result<(), Errno> {
    // SAFETY: plain integer arguments.
    check(unsafe { libc::inotify_rm_watch(fd.as_raw_fd(), wd) })
}

/// `fstatat(2)` of `name` in `dir`, not following it: its identity.
pub fn statx_at(dir: BorrowedFd<'_>, name: &CStr) -> Result<libc::statx, Errno> {
    // SAFETY: statx is plain old data; all-zero is a valid value.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is a valid C string and `st` a valid out buffer.
    check(unsafe {
        libc::statx(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_INO,
            &mut st,
        )
    })?;
    Ok(st)
}

/// Opens an absolute or relative path (the jail only; the server never
/// opens by path).
pub fn open_path(path: &CStr, flags: i32) -> Result<OwnedFd, Errno> {
    // SAFETY: `path` is a valid C string.
    let r = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
    check_fd(r.into())
}

/// Moves the calling thread to CPU `cpu` alone.
pub fn run_on_cpu(cpu: u32) -> Result<(), Errno> {
    let cpu = usize::try_from(cpu).map_err(|_| Errno::EINVAL)?;
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(Errno::EINVAL);
    }
    // SAFETY: cpu_set_t is plain data (all-zero is the empty set); the set
    // is passed with its own size and `cpu` is within it.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        return Err(errno());
    }
    Ok(())
}

/// `prctl(PR_SET_NO_NEW_PRIVS, 1)`.
pub fn set_no_new_privs() -> Result<(), Errno> {
    // SAFETY: prctl with integer arguments only.
    check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })
}

/// Gives up every privilege for good: an empty capability bounding set,
/// then `nobody`'s ids (65534) as real, effective and saved ids with no
/// supplementary groups, which clears the other capability sets.
pub fn become_nobody() -> Result<(), Errno> {
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } != 0 {
            if errno() == Errno::EINVAL {
                break; // past the kernel's last capability
            }
            return Err(errno());
        }
    }
    // SAFETY: setgroups with an empty list; the others take integers.
    unsafe {
        check(libc::setgroups(0, std::ptr::null()))?;
        check(libc::setresgid(65534, 65534, 65534))?;
        check(libc::setresuid(65534, 65534, 65534))
    }
}

/// `prctl(PR_SET_PDEATHSIG, sig)`.
pub fn set_parent_death_signal(sig: i32) -> Result<(), Errno> {
    // SAFETY: prctl with integer arguments only.
    check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig, 0, 0, 0) })
}

/// `getuid(2)`, `getgid(2)`.
pub fn ids() -> (u32, u32) {
    // SAFETY: getuid and getgid cannot fail.
    unsafe { (libc::getuid(), libc::getgid()) }
}

/// `umask(2)`.
pub fn umask(mask: u32) -> u32 {
    // SAFETY: umask cannot fail.
    unsafe { libc::umask(mask) }
}

/// Closes every descriptor from `first` up, except `keep`.
pub fn close_from(first: u32, keep: RawFd) {
    let keep = u32::try_from(keep).unwrap_or(u32::MAX);
    // SAFETY: close_range only closes descriptors; the caller owns the
    // process's descriptor table at this point (single-threaded, about to
    // serve), and `keep` survives.
    unsafe {
        if keep >= first {
            if keep > first {
                libc::syscall(libc::SYS_close_range, first, keep - 1, 0);
            }
            libc::syscall(libc::SYS_close_range, keep.saturating_add(1), u32::MAX, 0);
        } else {
            libc::syscall(libc::SYS_close_range, first, u32::MAX, 0);
        }
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit: every handle is a
/// descriptor.
pub fn raise_nofile() {
    // SAFETY: rlimit is plain old data; getrlimit/setrlimit read and write it.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

/// A forked process's side.
pub enum Fork {
    /// in the parent, with the child's pid
    Parent(libc::pid_t),
    /// in the child
    Child,
}

/// `fork(2)`.
///
/// # Safety
///
/// In a multi-threaded process the child may only make async-signal-safe
/// calls until it execs or exits; the caller must be single-threaded or keep
/// to that.
pub unsafe fn fork() -> Result<Fork, Errno> {
    // SAFETY: the caller upholds the contract above.
    match unsafe { libc::fork() } {
        -1 => Err(errno()),
        0 => Ok(Fork::Child),
        pid => Ok(Fork::Parent(pid)),
    }
}

/// Waits for `pid`, returning its exit code (128 + signal if killed).
pub fn wait_exit(pid: libc::pid_t) -> Result<i32, Errno> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid out pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r >= 0 {
            break;
        }
        let e = errno();
        if e != Errno::EINTR {
            return Err(e);
        }
    }
    if libc::WIFEXITED(status) {
        Ok(libc::WEXITSTATUS(status))
    } else {
        Ok(128 + libc::WTERMSIG(status))
    }
}

/// `_exit(2)`: leaves at once, without running exit handlers.
/// Says on standard output that the server runs (`announce`: a line
/// `up`, which whoever started the gofer waits for), then points standard
/// output at standard error.
pub fn announce_and_release_stdout(announce: bool) {
    if announce {
        // SAFETY: writes a live buffer to descriptor 1.
        let _ = unsafe { libc::write(1, b"up\n".as_ptr().cast(), 3) };
    }
    // SAFETY: dup2 on descriptors this process owns.
    unsafe { libc::dup2(2, 1) };
}

pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and touches no memory of ours.
    unsafe { libc::_exit(code) }
}

/// Names of the network interfaces (`if_nameindex(3)`).
pub fn interface_names() -> Result<Vec<String>, Errno> {
    // SAFETY: if_nameindex returns NULL or an array ended by a zero entry,
    // which we free with if_freenameindex after copying the names.
    unsafe {
        let list = libc::if_nameindex();
        if list.is_null() {
            return Err(errno());
        }
        let mut names = Vec::new();
        let mut p = list;
        while (*p).if_index != 0 && !(*p).if_name.is_null() {
            names.push(CStr::from_ptr((*p).if_name).to_string_lossy().into_owned());
            p = p.add(1);
        }
        libc::if_freenameindex(list);
        Ok(names)
    }
}

/// Takes ownership of descriptor `fd` if it is an open socket.
pub fn adopt_socket(fd: RawFd) -> Result<OwnedFd, Errno> {
    // SAFETY: stat is plain old data; all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into `st` only; a closed `fd` gives EBADF.
    check(unsafe { libc::fstat(fd, &mut st) })?;
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(Errno::ENOTSOCK);
    }
    // SAFETY: the descriptor is open, and the caller guarantees (by taking
    // it from the process's arguments) that nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// How the device opener opens a device for a guest: read-write, never a
/// controlling terminal, never through a symbolic link.
pub const DEVICE_OPEN_FLAGS: i32 =
    libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NOFOLLOW;

/// Opens `name` under `dir` with [`DEVICE_OPEN_FLAGS`]; ENXIO unless it is a
/// character device (a regular file or a FIFO put there is not one).
pub fn open_device(dir: BorrowedFd<'_>, name: &CStr) -> Result<OwnedFd, Errno> {
    // SAFETY: `name` is NUL-terminated; openat returns a new descriptor.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), DEVICE_OPEN_FLAGS) };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let st = statx(std::os::fd::AsFd::as_fd(&fd))?;
    if u32::from(st.stx_mode) & libc::S_IFMT != libc::S_IFCHR {
        return Err(Errno::ENXIO);
    }
    Ok(fd)
}
