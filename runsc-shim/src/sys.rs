//! The host calls the runtime needs that `std` does not wrap: FIFOs, file
//! locks, pidfds, signals, pseudo-terminals and descriptor passing. Every
//! `unsafe` block of the crate lives here.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// `mkfifo(path, mode)`.
pub fn mkfifo(path: &Path, mode: u32) -> io::Result<()> {
    let p = c_path(path)?;
    // SAFETY: `p` is a NUL-terminated string that outlives the call.
    cvt(unsafe { libc::mkfifo(p.as_ptr(), mode as libc::mode_t) }).map(drop)
}

/// `flock(fd, LOCK_EX)`: blocks until this process holds the lock; it is
/// released when the descriptor is closed.
pub fn lock_exclusive(fd: BorrowedFd<'_>) -> io::Result<()> {
    flock(fd, libc::LOCK_EX)
}

/// `flock(fd, op)`, again when interrupted.
pub fn flock(fd: BorrowedFd<'_>, op: libc::c_int) -> io::Result<()> {
    loop {
        // SAFETY: `fd` is a live descriptor for the duration of the call.
        match cvt(unsafe { libc::flock(fd.as_raw_fd(), op) }) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r.map(drop),
        }
    }
}

/// `kill(pid, sig)`.
pub fn kill(pid: i32, sig: i32) -> io::Result<()> {
    if pid <= 0 {
        // kill(0 or -N) would hit a whole process group: never meant here.
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    // SAFETY: plain system call on integers.
    cvt(unsafe { libc::kill(pid, sig) }).map(drop)
}

/// Ends the process with `code` at once (`_exit(2)`): no flushing of
/// buffers and no clean-up of the runtime (which would unmap the main
/// thread's signal stack: calls the monitor's filter leaves out).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and touches no memory of ours.
    unsafe { libc::_exit(code) }
}

/// Sends `sig` with `value` to process `pid` as `sigqueue(3)` does
/// (`si_code` `SI_QUEUE`), naming no sender (the receiver may be in
/// another PID namespace, where this pid means nothing).
pub fn queue_signal(pid: i32, sig: i32, value: i32) -> io::Result<()> {
    /// `siginfo_t` as `sigqueue` fills it (asm-generic/siginfo.h).
    #[repr(C)]
    struct QueueInfo {
        signo: i32,
        errno: i32,
        code: i32,
        _pad: i32,
        pid: i32,
        uid: u32,
        value: u64,
        _rest: [u8; 96],
    }
    const _: () = assert!(std::mem::size_of::<QueueInfo>() == 128);
    if pid <= 0 {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    let info = QueueInfo {
        signo: sig,
        errno: 0,
        code: libc::SI_QUEUE,
        _pad: 0,
        pid: 0,
        uid: 0,
        value: value as u64,
        _rest: [0; 96],
    };
    // SAFETY: rt_sigqueueinfo reads one siginfo_t, alive for the call.
    let r = unsafe { libc::syscall(libc::SYS_rt_sigqueueinfo, pid, sig, &info) };
    cvt(r as libc::c_int).map(drop)
}

/// The host name (`uname`'s node name) of the UTS namespace at `path` (a
/// `/proc/PID/ns/uts` file, or a bind mount of one). A short-lived thread
/// of this process joins it to ask: nothing else moves. `EINVAL` when
/// `path` is another kind of namespace or none.
pub fn uts_nodename(path: &Path) -> io::Result<String> {
    let ns = std::fs::File::open(path)?;
    let asked = std::thread::scope(|s| {
        s.spawn(|| -> io::Result<String> {
            // SAFETY: setns on a descriptor this function holds; it moves
            // only this thread, which ends right after.
            cvt(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWUTS) })?;
            // SAFETY: utsname is plain data that uname fills.
            let mut u: libc::utsname = unsafe { std::mem::zeroed() };
            // SAFETY: `u` is a valid utsname.
            cvt(unsafe { libc::uname(&mut u) })?;
            // SAFETY: the kernel NUL-terminates nodename within its size.
            let name = unsafe { std::ffi::CStr::from_ptr(u.nodename.as_ptr()) };
            Ok(name.to_string_lossy().into_owned())
        })
        .join()
    });
    asked.map_err(|_| io::Error::other("the namespace-reading thread panicked"))?
}

/// `unshare(CLONE_NEWNET)`: the calling thread (and the threads it starts
/// from now on) in a new network namespace holding only a loopback device
/// that is down.
pub fn unshare_network() -> io::Result<()> {
    // SAFETY: plain system call on an integer.
    cvt(unsafe { libc::unshare(libc::CLONE_NEWNET) }).map(drop)
}

/// `setns(open(path), CLONE_NEWNET)`: the calling thread (and the threads
/// it starts from now on) joins the network namespace `path` names (a
/// `/proc/PID/ns/net` or a bind mount of one, as `ip netns add` makes).
/// A file that is not a network namespace fails with `EINVAL`.
pub fn join_network(path: &Path) -> io::Result<()> {
    // std opens with O_CLOEXEC: the descriptor dies with this call.
    let ns = std::fs::File::open(path)?;
    // SAFETY: `ns` is a live descriptor for the duration of the call; the
    // nstype argument makes the kernel refuse any other kind of namespace.
    cvt(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

/// Brings the loopback device of the calling thread's network namespace
/// up (a new namespace has it down), as `ip link set lo up` does, through
/// `SIOCSIFFLAGS` (netdevice(7)).
pub fn loopback_up() -> io::Result<()> {
    // SAFETY: plain system call on integers; on success it returns a new
    // descriptor that nothing else owns.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` is a fresh descriptor owned by no one else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `ifreq` is plain old data for which all-zero bytes are valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *d = *s as libc::c_char;
    }
    // SAFETY: `sock` is live and `req` a valid ifreq the call fills in.
    cvt(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) })?;
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    // SAFETY: as above; the call only reads `req`.
    cvt(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) }).map(drop)
}

/// `pidfd_open(pid, 0)`: a descriptor that becomes readable when the process
/// exits, usable by a process that is not its parent.
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain system call on integers; on success it returns a new
    // descriptor that nothing else owns.
    let ret = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `ret` is a fresh descriptor owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as RawFd) })
}

/// Waits up to `timeout_ms` (-1: for ever) for `fd` to become readable (or
/// hung up); returns whether it did.
pub fn poll_readable(fd: BorrowedFd<'_>, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: `p` is one valid pollfd that lives across the call.
        match cvt(unsafe { libc::poll(&mut p, 1, timeout_ms) }) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
            Ok(n) => return Ok(n > 0),
        }
    }
}

/// The caller's real user and group ids (the ones the Sentry shows the guest).
pub fn ids() -> (u32, u32) {
    // SAFETY: plain system calls without arguments.
    unsafe { (libc::getuid(), libc::getgid()) }
}

/// Prepares `cmd` so that the child gets `fd` as descriptor `target` (without
/// close-on-exec) and, when `new_session`, becomes a session leader with no
/// controlling terminal, detached from the caller's job control (runc's
/// `create` semantics). When `tty` is given the child's standard descriptors
/// are that terminal and it becomes the controlling terminal.
pub fn prepare_child(
    cmd: &mut Command,
    fd: RawFd,
    target: RawFd,
    new_session: bool,
    tty: Option<RawFd>,
) {
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe system calls on integers (setsid, dup2, fcntl, ioctl).
    unsafe {
        cmd.pre_exec(move || {
            if new_session || tty.is_some() {
                cvt(libc::setsid())?;
            }
            if let Some(t) = tty {
                cvt(libc::ioctl(t, libc::TIOCSCTTY, 0))?;
                for std_fd in 0..3 {
                    cvt(libc::dup2(t, std_fd))?;
                }
            }
            if fd == target {
                let flags = cvt(libc::fcntl(fd, libc::F_GETFD))?;
                cvt(libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC))?;
            } else {
                cvt(libc::dup2(fd, target))?;
            }
            Ok(())
        });
    }
}

/// Takes ownership of descriptor `fd`, inherited from the parent; fails if it
/// is not open.
pub fn inherited_fd(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_GETFD only inspects the descriptor table.
    cvt(unsafe { libc::fcntl(fd, libc::F_GETFD) })?;
    // SAFETY: the descriptor is open and, by the boot protocol, handed to
    // this process alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A new pseudo-terminal pair: (master, slave), both close-on-exec.
pub fn open_pty() -> io::Result<(OwnedFd, OwnedFd)> {
    // SAFETY: plain system call; returns a fresh descriptor on success.
    let m = cvt(unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC) })?;
    // SAFETY: `m` is a fresh descriptor that nothing else owns.
    let master = unsafe { OwnedFd::from_raw_fd(m) };
    // SAFETY: `m` is an open pty master.
    cvt(unsafe { libc::grantpt(m) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::unlockpt(m) })?;
    let mut name = [0 as libc::c_char; 128];
    // SAFETY: `name` has room for `name.len()` bytes, which is passed.
    let r = unsafe { libc::ptsname_r(m, name.as_mut_ptr(), name.len()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    // SAFETY: ptsname_r NUL-terminated `name` on success.
    let s = cvt(unsafe {
        libc::open(
            name.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: `s` is a fresh descriptor that nothing else owns.
    Ok((master, unsafe { OwnedFd::from_raw_fd(s) }))
}

/// Descriptor 0, borrowed without touching `std::io::stdin` (whose
/// buffer the monitor, under its filter, may not allocate).
pub fn stdin() -> BorrowedFd<'static> {
    // SAFETY: descriptor 0 stays open for the process's life (a closed one
    // makes the calls on it fail with EBADF, nothing worse).
    unsafe { BorrowedFd::borrow_raw(0) }
}

/// The terminal's settings (`tcgetattr`).
pub fn termios(fd: BorrowedFd<'_>) -> io::Result<libc::termios> {
    // SAFETY: all-zero bytes are a valid `termios`.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: tcgetattr writes one `termios`, which `t` is.
    cvt(unsafe { libc::tcgetattr(fd.as_raw_fd(), &mut t) }).map(|_| t)
}

/// Sets the terminal's settings at once (`tcsetattr(TCSANOW)`).
pub fn set_termios(fd: BorrowedFd<'_>, t: &libc::termios) -> io::Result<()> {
    // SAFETY: tcsetattr reads one `termios`.
    cvt(unsafe { libc::tcsetattr(fd.as_raw_fd(), libc::TCSANOW, t) }).map(drop)
}

/// `t` in raw mode (`cfmakeraw`): bytes pass as typed, in and out.
pub fn raw(mut t: libc::termios) -> libc::termios {
    // SAFETY: cfmakeraw only edits the struct it is given.
    unsafe { libc::cfmakeraw(&mut t) };
    t
}

/// `ioctl(fd, TIOCSWINSZ)`.
pub fn set_window_size(fd: BorrowedFd<'_>, rows: u16, cols: u16) -> io::Result<()> {
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one `struct winsize`, which `ws` is.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, &ws) }).map(drop)
}

/// Sends `fd` over the Unix socket `sock` with SCM_RIGHTS, with `name` as
/// the payload (runc sends the terminal's path; receivers ignore it).
pub fn send_fd(sock: BorrowedFd<'_>, fd: BorrowedFd<'_>, name: &[u8]) -> io::Result<()> {
    let payload: &[u8] = if name.is_empty() { b"/dev/ptmx" } else { name };
    send_with_fds(sock, payload, &[fd])
}

/// Most descriptors one message carries (Linux's SCM_MAX_FD).
pub const MAX_FDS: usize = 253;

/// Room for one cmsghdr carrying [`MAX_FDS`] ints, in 8-byte words.
const CONTROL_WORDS: usize = (std::mem::size_of::<libc::cmsghdr>() + MAX_FDS * 4).div_ceil(8);

/// The first of descriptors 3 .. 3+`n` (those a caller hands down with
/// `--preserve-fds n`) that is not open, if one is not.
pub fn first_closed_past_stdio(n: u32) -> Option<RawFd> {
    // SAFETY: F_GETFD only inspects the descriptor table.
    (3..3 + n as RawFd).find(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0)
}

/// Takes descriptors 3 .. 3+`n`, handed down by the caller, as this
/// process's own, close-on-exec (so that no child of ours inherits them).
pub fn take_past_stdio(n: u32) -> io::Result<Vec<OwnedFd>> {
    (3..3 + n as RawFd)
        .map(|fd| {
            let owned = inherited_fd(fd)?;
            // SAFETY: F_SETFD on a descriptor this process owns.
            cvt(unsafe { libc::fcntl(owned.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) })?;
            Ok(owned)
        })
        .collect()
}

/// Keeps descriptors `fds` open across the exec of `cmd` (they are
/// handed down to it).
pub fn keep_open(cmd: &mut Command, fds: std::ops::Range<RawFd>) {
    // SAFETY: the closure runs in the forked child before exec and only
    // calls fcntl on integers.
    unsafe {
        cmd.pre_exec(move || {
            for fd in fds.clone() {
                let flags = cvt(libc::fcntl(fd, libc::F_GETFD))?;
                cvt(libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC))?;
            }
            Ok(())
        });
    }
}

/// Sends `data` with `fds` attached (SCM_RIGHTS) in one message; `data`
/// must not be empty.
pub fn send_with_fds(sock: BorrowedFd<'_>, data: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    if fds.len() > MAX_FDS || data.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let mut control = [0u64; CONTROL_WORDS];
    let bytes = std::mem::size_of_val(fds) as u32;
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE(bytes) } as usize;
    debug_assert!(space <= std::mem::size_of_val(&control));
    // SAFETY: msghdr is plain data; all-zero is a valid empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = space;
        // SAFETY: `msg` points at `control`, which has room for one header
        // with `fds.len()` descriptors (checked above); CMSG_FIRSTHDR and
        // CMSG_DATA stay inside it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(bytes) as usize;
            let data = libc::CMSG_DATA(cmsg) as *mut RawFd;
            for (i, fd) in fds.iter().enumerate() {
                std::ptr::write_unaligned(data.add(i), fd.as_raw_fd());
            }
        }
    }
    let mut sent = 0;
    while sent < data.len() {
        // SAFETY: `msg` and everything it points at live across the call.
        let r = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        // The descriptors went with the first part; the rest is plain data.
        sent += r as usize;
        msg.msg_control = std::ptr::null_mut();
        msg.msg_controllen = 0;
        iov.iov_base = data[sent..].as_ptr() as *mut libc::c_void;
        iov.iov_len = data.len() - sent;
        msg.msg_iov = &mut iov;
    }
    Ok(())
}

/// Whether the peer of connected socket `fd` has closed its end (or sent
/// something, which a client that only listens never does).
pub fn peer_left(fd: BorrowedFd<'_>) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN | libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd, and no wait.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents != 0
}

/// Receives one message into `buf`, with the descriptors attached to it
/// (close-on-exec): `(bytes, descriptors)`.
pub fn recv_with_fds(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut control = [0u64; CONTROL_WORDS];
    // SAFETY: msghdr is plain data; all-zero is a valid empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&control);
    let n = loop {
        // SAFETY: `msg` and the buffers it points at live across the call;
        // MSG_CMSG_CLOEXEC makes received descriptors close-on-exec.
        let r = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if r >= 0 {
            break r as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut fds = Vec::new();
    // SAFETY: recvmsg filled `msg`; CMSG_FIRSTHDR/CMSG_NXTHDR check
    // msg_controllen and return null past the end; CMSG_DATA stays inside
    // `control`, and the count comes from the header's own length.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let len = (*cmsg).cmsg_len - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(cmsg) as *const RawFd;
                for i in 0..len / std::mem::size_of::<RawFd>() {
                    // SAFETY: the kernel just installed these for us.
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((n, fds))
}

/// The process [`forward_signals`] passes signals to.
static FORWARD_TO: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = FORWARD_TO.load(std::sync::atomic::Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe and takes plain integers.
        unsafe { libc::kill(pid, sig) };
    }
}

/// Makes the signals a supervisor sends (HUP, INT, QUIT, TERM, USR1, USR2,
/// WINCH) go to `pid` instead of ending the caller, so that `run`
/// outlives its container and can report and clean up. A handler rather
/// than SIG_IGN, because an ignored disposition would be inherited by
/// children across exec.
pub fn forward_signals(pid: i32) -> io::Result<()> {
    FORWARD_TO.store(pid, std::sync::atomic::Ordering::Relaxed);
    // The boot process hands the same signals on to the guest.
    for sig in sentry::hostsig::FORWARDED {
        // SAFETY: sigaction is plain data; all-zero is a valid empty value.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = forward as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
        // SAFETY: `sa` is a valid sigaction whose handler only makes an
        // async-signal-safe call; the old action is not asked for.
        cvt(unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) })?;
    }
    Ok(())
}

#[cfg(feature = "containerd-shim")]
/// Clears `O_NONBLOCK` on `fd` (a FIFO opened without blocking, to be used
/// by a program that expects blocking I/O).
pub fn set_blocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller keeps open; no memory passed.
    let flags = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) }).map(drop)
}

#[cfg(feature = "containerd-shim")]
/// Makes this process a child subreaper: orphaned descendants (a
/// sandbox whose `create` exited, the sandbox's gofer) become its children.
pub fn set_child_subreaper() -> io::Result<()> {
    // SAFETY: prctl(PR_SET_CHILD_SUBREAPER) takes integers only.
    cvt(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }).map(drop)
}

#[cfg(feature = "containerd-shim")]
/// Points standard output at standard error (closing what stdout was).
pub fn stdout_to_stderr() -> io::Result<()> {
    // SAFETY: dup2 on the process's own standard descriptors.
    cvt(unsafe { libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) }).map(drop)
}

#[cfg(feature = "containerd-shim")]
/// Waits for any child to end: its pid and exit status (0-255, 128+N after
/// signal N). `ECHILD` when there is none.
pub fn wait_any() -> io::Result<(i32, i32)> {
    loop {
        let mut status = 0;
        // SAFETY: waitpid with a pointer to a local int.
        let pid = cvt(unsafe { libc::waitpid(-1, &mut status, 0) })?;
        if libc::WIFEXITED(status) {
            return Ok((pid, libc::WEXITSTATUS(status)));
        }
        if libc::WIFSIGNALED(status) {
            return Ok((pid, 128 + libc::WTERMSIG(status)));
        }
    }
}

#[cfg(feature = "containerd-shim")]
/// Receives one descriptor sent with SCM_RIGHTS over the Unix socket
/// `sock` (the terminal master [`send_fd`] sends).
pub fn recv_fd(sock: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let mut payload = [0u8; 256];
    let (_, fds) = recv_with_fds(sock, &mut payload)?;
    fds.into_iter()
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no descriptor in the message"))
}

/// A failure a forked child reported: its error's message, which crossed
/// a pipe as text.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ChildFailed(pub String);

/// Forks (the caller must have no other threads). The child runs `start`:
/// on success it reports so to the parent, then runs what `start` returned
/// and exits with its status; on failure it reports the error and exits
/// 255. The parent gets the child's pid and what the child reported.
pub fn fork_reporting<F, G, E>(start: F) -> io::Result<(i32, Result<(), ChildFailed>)>
where
    F: FnOnce() -> Result<G, E>,
    G: FnOnce() -> i32,
    E: std::fmt::Display,
{
    let (mut rd, wr) = std::io::pipe()?;
    // SAFETY: the caller is single-threaded (a command-line process that
    // started no thread), so the child may run arbitrary code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        drop(rd);
        let mut wr = wr;
        let code = match start() {
            Ok(run) => {
                let _ = std::io::Write::write_all(&mut wr, b"ok");
                drop(wr);
                run()
            }
            Err(e) => {
                let _ = std::io::Write::write_all(&mut wr, e.to_string().as_bytes());
                255
            }
        };
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    drop(wr);
    let mut msg = String::new();
    std::io::Read::read_to_string(&mut rd, &mut msg)?;
    Ok((
        pid,
        if msg == "ok" {
            Ok(())
        } else {
            Err(ChildFailed(msg))
        },
    ))
}

/// The addresses of the host's network interfaces (`getifaddrs(3)`), IPv4
/// and IPv6, as the egress policy closes them.
pub fn host_addresses() -> io::Result<Vec<std::net::IpAddr>> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a pointer to a list it allocated into
    // `list`, which is freed below with freeifaddrs.
    cvt(unsafe { libc::getifaddrs(&mut list) })?;
    let mut out = Vec::new();
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, alive
        // until freeifaddrs.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: a non-null ifa_addr points to a sockaddr whose family
            // field says which sockaddr it is.
            let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
            if family == libc::AF_INET {
                // SAFETY: AF_INET: the address is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                    sin.sin_addr.s_addr,
                ))));
            } else if family == libc::AF_INET6 {
                // SAFETY: AF_INET6: the address is a sockaddr_in6.
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                out.push(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: `list` came from getifaddrs and is not used afterwards.
    unsafe { libc::freeifaddrs(list) };
    Ok(out)
}

/// Most bytes one rtnetlink dump may bring (a host with thousands of
/// routes stays far below; a runaway one is an error, not a memory sink).
const MAX_DUMP: usize = 64 << 20;

/// One rtnetlink dump request (`NLM_F_REQUEST | NLM_F_DUMP`) of type `ty`
/// with `body` (the request's fixed header, e.g. a `struct ifinfomsg`),
/// in the calling thread's network namespace: the messages of the answer,
/// each whole with its `nlmsghdr`, up to `NLMSG_DONE`. An `NLMSG_ERROR`
/// is the error it carries.
pub fn rtnetlink_dump(ty: u16, body: &[u8]) -> io::Result<Vec<Vec<u8>>> {
    const NLMSG_HDRLEN: usize = 16;
    const SEQ: u32 = 1;
    // SAFETY: plain system call on integers; on success it returns a new
    // descriptor that nothing else owns.
    let fd = cvt(unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    })?;
    // SAFETY: `fd` is a fresh descriptor owned by no one else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = NLMSG_HDRLEN + body.len();
    let mut req = Vec::with_capacity(len);
    req.extend_from_slice(&(len as u32).to_ne_bytes());
    req.extend_from_slice(&ty.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    req.extend_from_slice(&flags.to_ne_bytes());
    req.extend_from_slice(&SEQ.to_ne_bytes());
    req.extend_from_slice(&0u32.to_ne_bytes());
    req.extend_from_slice(body);
    // SAFETY: `sock` is live; `req` is readable for its length. A netlink
    // socket without an address sends to the kernel.
    let sent = unsafe { libc::send(sock.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut total = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        // SAFETY: `sock` is live; `buf` is writable for its length.
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let data = &buf[..n as usize];
        if data.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "rtnetlink: no answer",
            ));
        }
        total += data.len();
        if total > MAX_DUMP {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "rtnetlink: dump too large",
            ));
        }
        let mut at = 0;
        while data.len() - at >= NLMSG_HDRLEN {
            let m = &data[at..];
            let mlen = u32::from_ne_bytes([m[0], m[1], m[2], m[3]]) as usize;
            if mlen < NLMSG_HDRLEN || mlen > m.len() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "rtnetlink: bad message",
                ));
            }
            let mty = u16::from_ne_bytes([m[4], m[5]]);
            let seq = u32::from_ne_bytes([m[8], m[9], m[10], m[11]]);
            at += ((mlen + 3) & !3).min(data.len() - at);
            if seq != SEQ {
                continue;
            }
            match i32::from(mty) {
                libc::NLMSG_DONE => return Ok(out),
                libc::NLMSG_ERROR => {
                    let err = m
                        .get(NLMSG_HDRLEN..NLMSG_HDRLEN + 4)
                        .map_or(0, |e| i32::from_ne_bytes([e[0], e[1], e[2], e[3]]));
                    if err != 0 {
                        return Err(io::Error::from_raw_os_error(-err));
                    }
                }
                _ => out.push(m[..mlen].to_vec()),
            }
        }
    }
}

/// A fork-like `clone(flags | SIGCHLD)`: the child gets a copy of the
/// caller's memory and continues from the call, in the new namespaces
/// `flags` asks for. `Ok(None)` in the child, `Ok(Some(pid))` in the parent.
///
/// # Safety
///
/// The caller must have no other thread: the child would inherit locks
/// they hold (this bypasses the C library's fork handlers).
pub unsafe fn fork_into(flags: libc::c_int) -> io::Result<Option<i32>> {
    let flags = (flags | libc::SIGCHLD) as libc::c_ulong;
    // SAFETY: without CLONE_VM or a new stack, clone duplicates the
    // process as fork does; the caller vouches that no other thread exists.
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    match pid {
        p if p < 0 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        p => Ok(Some(p as i32)),
    }
}

/// How many threads the calling process has.
pub fn thread_count() -> io::Result<usize> {
    Ok(std::fs::read_dir("/proc/self/task")?.count())
}

/// `prctl(PR_SET_PDEATHSIG, sig)`: `sig` comes when the parent ends.
pub fn set_parent_death_signal(sig: i32) -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    cvt(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0) }).map(drop)
}

/// Empties the capability bounding set, then takes `uid` and `gid` (not 0)
/// as real, effective and saved ids, with no supplementary groups, which
/// clears every other capability set. Stays dumpable, which a change of
/// ids would otherwise undo (the process goes on tracing its own children,
/// which inherit the flag).
pub fn become_unprivileged(uid: u32, gid: u32) -> io::Result<()> {
    // While CAP_SETPCAP is still there.
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINVAL) {
                break; // past the kernel's last capability
            }
            return Err(e);
        }
    }
    // SAFETY: setgroups with an empty list; setresgid/setresuid and prctl
    // take integers.
    unsafe {
        cvt(libc::setgroups(0, std::ptr::null()))?;
        cvt(libc::setresgid(gid, gid, gid))?;
        cvt(libc::setresuid(uid, uid, uid))?;
        cvt(libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0))?;
    }
    Ok(())
}

/// `no_new_privs` for the calling thread and its future children.
pub fn no_new_privs() -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    cvt(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }).map(drop)
}

/// Changes the calling thread's mask: blocks (`block`) or unblocks `sigs`;
/// returns the previous mask.
pub fn mask_signals(sigs: &[i32], block: bool) -> io::Result<libc::sigset_t> {
    // SAFETY: sigset_t is plain data that sigemptyset initialises; the
    // signal numbers are the caller's valid constants.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid sigset_t pointers for the duration of the calls.
    unsafe {
        libc::sigemptyset(&mut set);
        for &s in sigs {
            libc::sigaddset(&mut set, s);
        }
        let how = if block {
            libc::SIG_BLOCK
        } else {
            libc::SIG_UNBLOCK
        };
        let r = libc::pthread_sigmask(how, &set, &mut old);
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
    }
    Ok(old)
}

/// Puts back a mask [`mask_signals`] returned.
pub fn restore_mask(old: &libc::sigset_t) -> io::Result<()> {
    // SAFETY: `old` is a valid sigset_t.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// Waits for one of `sigs` (blocked by the caller): the signal and its
/// `si_code`.
pub fn wait_signal(sigs: &[i32]) -> io::Result<(i32, i32)> {
    // SAFETY: as in mask_signals.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: plain data that sigwaitinfo fills.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers for the duration of the calls.
    unsafe {
        libc::sigemptyset(&mut set);
        for &s in sigs {
            libc::sigaddset(&mut set, s);
        }
    }
    loop {
        // SAFETY: as above.
        let sig = unsafe { libc::sigwaitinfo(&set, &mut info) };
        if sig > 0 {
            return Ok((sig, info.si_code));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// How a child ended, as `waitpid` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// `exit(code)`
    Exited(i32),
    /// killed by this signal
    Signaled(i32),
}

/// Reaps one ended child without waiting: `None` when none has ended (or
/// there is no child).
pub fn reap_any() -> Option<(i32, Ended)> {
    loop {
        let mut status = 0;
        // SAFETY: waitpid with a pointer to a local int.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return None;
        }
        if libc::WIFEXITED(status) {
            return Some((pid, Ended::Exited(libc::WEXITSTATUS(status))));
        }
        if libc::WIFSIGNALED(status) {
            return Some((pid, Ended::Signaled(libc::WTERMSIG(status))));
        }
    }
}

/// Limits the calling thread (and all it starts later) to the host CPUs
/// `cpus`.
pub fn set_affinity(cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c >= libc::CPU_SETSIZE as usize {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: `c` is below CPU_SETSIZE, inside `set`.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: sched_setaffinity reads `set`, of the size given.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// `set_mempolicy(2)` of the calling thread (those it starts, and the
/// processes it forks, inherit it): `mode` with its flags, over `nodes`.
pub fn set_mempolicy(mode: i32, nodes: &[usize]) -> io::Result<()> {
    let words = nodes.iter().max().map_or(0, |&n| n / 64 + 1);
    let mut mask = vec![0u64; words];
    for &n in nodes {
        mask[n / 64] |= 1 << (n % 64);
    }
    let (ptr, maxnode) = match words {
        0 => (std::ptr::null(), 0),
        _ => (mask.as_ptr(), words as u64 * 64 + 1),
    };
    // SAFETY: the kernel reads `maxnode - 1` bits from `ptr`, which has
    // that many (or is null with none).
    let r = unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, ptr, maxnode) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads `path` as if `root` were `/` (`openat2(RESOLVE_IN_ROOT)`): a
/// link in a container's rootfs cannot lead to a host file.
pub fn read_in_root(root: &Path, path: &str) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let dir = std::fs::File::open(root)?;
    let name = CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `open_how` is plain data, all zeros but for the fields set.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY) as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: the descriptor, path and `how` outlive the call, and `how`'s
    // size is passed with it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            name.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat2 returned a new descriptor that nothing else owns.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd as RawFd) };
    let mut out = Vec::new();
    file.by_ref().take(1 << 20).read_to_end(&mut out)?;
    Ok(out)
}
