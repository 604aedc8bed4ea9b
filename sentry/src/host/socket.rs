//! Thin wrappers over the host socket calls that `--network host` needs.
//! Every call acts on an `AF_INET`/`AF_INET6` socket the Sentry created
//! itself (or on the Sentry's own epoll instance); addresses are byte
//! strings in Linux's `sockaddr` layout, which the host kernel validates.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Room for any `sockaddr` an Internet socket reports (`sockaddr_in6` is
/// 28 bytes; this is `sockaddr_storage`).
const ADDR_MAX: usize = 128;

fn cvt(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

fn addr_len(a: &[u8]) -> libc::socklen_t {
    a.len().min(ADDR_MAX) as libc::socklen_t
}

/// `socket(domain, ty, proto)`; the caller adds `SOCK_NONBLOCK|SOCK_CLOEXEC`.
pub fn socket(domain: i32, ty: i32, proto: i32) -> io::Result<OwnedFd> {
    // SAFETY: no pointers.
    let fd = cvt(unsafe { libc::socket(domain, ty, proto) } as isize)?;
    // SAFETY: `fd` was just returned by the kernel and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `bind(fd, addr)`.
pub fn bind(fd: BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    // SAFETY: `addr` is readable for the length given.
    cvt(unsafe { libc::bind(fd.as_raw_fd(), addr.as_ptr().cast(), addr_len(addr)) } as isize)
        .map(drop)
}

/// `connect(fd, addr)`.
pub fn connect(fd: BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    // SAFETY: `addr` is readable for the length given.
    cvt(unsafe { libc::connect(fd.as_raw_fd(), addr.as_ptr().cast(), addr_len(addr)) } as isize)
        .map(drop)
}

/// `listen(fd, backlog)`.
pub fn listen(fd: BorrowedFd<'_>, backlog: i32) -> io::Result<()> {
    // SAFETY: no pointers.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), backlog) } as isize).map(drop)
}

/// `accept4(fd, SOCK_NONBLOCK|SOCK_CLOEXEC)`: the connection and its peer.
pub fn accept(fd: BorrowedFd<'_>) -> io::Result<(OwnedFd, Vec<u8>)> {
    let mut buf = [0u8; ADDR_MAX];
    let mut len = ADDR_MAX as libc::socklen_t;
    // SAFETY: `buf` is writable for `len` bytes; `len` is a valid in/out pointer.
    let c = cvt(unsafe {
        libc::accept4(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            &mut len,
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    } as isize)?;
    // SAFETY: `c` was just returned by the kernel and is owned by no one else.
    let conn = unsafe { OwnedFd::from_raw_fd(c as i32) };
    Ok((conn, buf[..(len as usize).min(ADDR_MAX)].to_vec()))
}

/// `sendto(fd, data, flags, to)`.
pub fn send_to(
    fd: BorrowedFd<'_>,
    data: &[u8],
    flags: i32,
    to: Option<&[u8]>,
) -> io::Result<usize> {
    let (p, l) = match to {
        Some(a) => (a.as_ptr(), addr_len(a)),
        None => (std::ptr::null(), 0),
    };
    // SAFETY: `data` is readable for its length; `p` is null (with length
    // 0) or readable for `l` bytes.
    cvt(unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            data.as_ptr().cast(),
            data.len(),
            flags,
            p.cast(),
            l,
        )
    })
}

/// What [`recv_from`] received.
pub struct Received {
    /// bytes the call returned (with `MSG_TRUNC`, a datagram's full size)
    pub len: usize,
    /// the sender, empty when the kernel reported none
    pub from: Vec<u8>,
    /// `msg_flags` (`MSG_TRUNC` when a datagram did not fit)
    pub flags: i32,
    /// the control messages, raw, as the host wrote them (empty unless a
    /// control buffer was given); unchecked
    pub control: Vec<u8>,
}

/// Room for the control messages the guest may ask for on an Internet
/// socket (a timestamp, packet info, TTL and TOS take 112 bytes).
pub const CONTROL_MAX: usize = 256;

/// `recvmsg(fd)` into one buffer, with no control data.
pub fn recv_from(fd: BorrowedFd<'_>, buf: &mut [u8], flags: i32) -> io::Result<Received> {
    recv_msg(fd, buf, flags, false)
}

/// `recvmsg(fd)` into one buffer; with `control`, also the control
/// messages (into a buffer of [`CONTROL_MAX`] bytes). Descriptors passed
/// with `SCM_RIGHTS` (which no Internet socket carries) are closed at once,
/// so none could stay open in the Sentry.
pub fn recv_msg(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
    flags: i32,
    control: bool,
) -> io::Result<Received> {
    let mut addr = [0u8; ADDR_MAX];
    // The kernel writes the messages with copy_to_user: no alignment is
    // needed; they are parsed as bytes.
    let mut ctl = [0u8; CONTROL_MAX];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: all-zero bytes are a valid `msghdr`.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = addr.as_mut_ptr().cast();
    msg.msg_namelen = ADDR_MAX as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if control {
        msg.msg_control = ctl.as_mut_ptr().cast();
        msg.msg_controllen = CONTROL_MAX;
    }
    // SAFETY: `msg` points at `addr`, one iovec over `buf` and (if asked)
    // `ctl`, all writable for the lengths given.
    let n =
        cvt(unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, flags | libc::MSG_CMSG_CLOEXEC) })?;
    let alen = (msg.msg_namelen as usize).min(ADDR_MAX);
    let clen = if control {
        msg.msg_controllen.min(CONTROL_MAX)
    } else {
        0
    };
    let raw = ctl[..clen].to_vec();
    close_rights(&raw);
    Ok(Received {
        len: n,
        from: addr[..alen].to_vec(),
        flags: msg.msg_flags,
        control: raw,
    })
}

/// Closes any descriptor an `SCM_RIGHTS` message in `raw` carries.
fn close_rights(raw: &[u8]) {
    let mut at = 0usize;
    while raw.len().saturating_sub(at) >= 16 {
        let word = |o: usize, n: usize| raw.get(at + o..at + o + n);
        let Some(len) = word(0, 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_ne_bytes)
        else {
            return;
        };
        let len = len as usize;
        if len < 16 || len > raw.len() - at {
            return;
        }
        let level = word(8, 4)
            .and_then(|b| b.try_into().ok())
            .map(i32::from_ne_bytes);
        let ty = word(12, 4)
            .and_then(|b| b.try_into().ok())
            .map(i32::from_ne_bytes);
        if level == Some(libc::SOL_SOCKET) && ty == Some(libc::SCM_RIGHTS) {
            for c in raw[at + 16..at + len].chunks_exact(4) {
                let fd = i32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
                if fd >= 0 {
                    // SAFETY: the kernel just installed `fd` in this process
                    // for this message; nothing else knows of it, so taking
                    // ownership (and closing it) is sound.
                    drop(unsafe { OwnedFd::from_raw_fd(fd) });
                }
            }
        }
        at += (len + 7) & !7;
    }
}

/// `shutdown(fd, how)`.
pub fn shutdown(fd: BorrowedFd<'_>, how: i32) -> io::Result<()> {
    // SAFETY: no pointers.
    cvt(unsafe { libc::shutdown(fd.as_raw_fd(), how) } as isize).map(drop)
}

/// `getsockname` (or `getpeername` when `peer`).
pub fn name(fd: BorrowedFd<'_>, peer: bool) -> io::Result<Vec<u8>> {
    let mut buf = [0u8; ADDR_MAX];
    let mut len = ADDR_MAX as libc::socklen_t;
    // SAFETY: `buf` is writable for `len` bytes; `len` is a valid in/out pointer.
    let r = unsafe {
        if peer {
            libc::getpeername(fd.as_raw_fd(), buf.as_mut_ptr().cast(), &mut len)
        } else {
            libc::getsockname(fd.as_raw_fd(), buf.as_mut_ptr().cast(), &mut len)
        }
    };
    cvt(r as isize)?;
    Ok(buf[..(len as usize).min(ADDR_MAX)].to_vec())
}

/// `setsockopt(fd, level, name, val)`.
pub fn set_opt(fd: BorrowedFd<'_>, level: i32, name: i32, val: &[u8]) -> io::Result<()> {
    // SAFETY: `val` is readable for its length.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            val.as_ptr().cast(),
            val.len() as libc::socklen_t,
        )
    } as isize)
    .map(drop)
}

/// `getsockopt(fd, level, name)` with room for `max` bytes.
pub fn get_opt(fd: BorrowedFd<'_>, level: i32, name: i32, max: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; max];
    let mut len = max as libc::socklen_t;
    // SAFETY: `buf` is writable for `len` bytes; `len` is a valid in/out pointer.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    } as isize)?;
    buf.truncate((len as usize).min(max));
    Ok(buf)
}

/// A new epoll instance (close-on-exec).
pub fn epoll_create() -> io::Result<OwnedFd> {
    // SAFETY: no pointers.
    let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) } as isize)?;
    // SAFETY: `fd` was just returned by the kernel and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Adds `fd` to `ep`, edge-triggered for every readiness change, tagged `key`.
pub fn epoll_watch(ep: BorrowedFd<'_>, fd: BorrowedFd<'_>, key: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: (libc::EPOLLIN
            | libc::EPOLLOUT
            | libc::EPOLLPRI
            | libc::EPOLLRDHUP
            | libc::EPOLLERR
            | libc::EPOLLHUP
            | libc::EPOLLET) as u32,
        u64: key,
    };
    // SAFETY: `ev` is a valid epoll_event.
    cvt(
        unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd.as_raw_fd(), &mut ev) }
            as isize,
    )
    .map(drop)
}

/// Waits for events on `ep`; fills `keys` with the keys of the
/// descriptors that had one and returns how many. `EINTR` reads as none.
pub fn epoll_wait(ep: BorrowedFd<'_>, keys: &mut [u64]) -> io::Result<usize> {
    const MAX: usize = 64;
    // SAFETY: all-zero bytes are valid epoll_events.
    let mut evs: [libc::epoll_event; MAX] = unsafe { std::mem::zeroed() };
    let max = keys.len().min(MAX);
    // SAFETY: `evs` has room for `max` events.
    let n = unsafe { libc::epoll_wait(ep.as_raw_fd(), evs.as_mut_ptr(), max as i32, -1) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok(0);
        }
        return Err(e);
    }
    let n = n as usize;
    for (k, e) in keys.iter_mut().zip(evs.iter()).take(n) {
        *k = e.u64;
    }
    Ok(n)
}
