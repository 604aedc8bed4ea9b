//! Socket calls. `AF_UNIX` is implemented in the Sentry; other families are
//! refused until the netstack is wired in.

use std::sync::Arc;
use std::time::Instant;

use abi::{Errno, OpenFlags};

use crate::fsimpl::tmpfs::MemKind;
use crate::kernel::task::Task;
use crate::kernel::wait::WaitQueue;
use crate::mm::guestio::{ByteSource, GuestBufs, Stage, IO_CHUNK};
use crate::socket::unix::{self, Creds, SockType, SocketHandle, UnixAddr, UnixSocket, SCM_MAX_FD};
use crate::socket::{SockTimeouts, Socket, SocketFile};
use crate::vfs::file::{FdEntry, FileDescription};
use crate::vfs::{Lookup, Node};

const AF_UNIX: u64 = 1;
const SOCK_STREAM: u64 = 1;
const SOCK_DGRAM: u64 = 2;
const SOCK_SEQPACKET: u64 = 5;
const SOCK_NONBLOCK: u64 = 0o4000;
const SOCK_CLOEXEC: u64 = 0o2000000;
const SOL_SOCKET: i32 = 1;
const SCM_RIGHTS: i32 = 1;
const SCM_CREDENTIALS: i32 = 2;
const MSG_PEEK: u64 = 2;
const MSG_TRUNC: u64 = 0x20;
const MSG_CTRUNC: u32 = 0x8;
const MSG_DONTWAIT: u64 = 0x40;
const MSG_WAITALL: u64 = 0x100;
pub(super) const MSG_NOSIGNAL: u64 = 0x4000;
const MSG_CMSG_CLOEXEC: u64 = 0x4000_0000;
/// `sizeof(struct sockaddr_un)`.
const SUN_LEN: usize = 110;

/// The credentials a Unix socket passes: the effective ids (unix(7)).
fn creds(task: &Task) -> Creds {
    Creds {
        pid: task.pid(),
        uid: task.creds.uid[1],
        gid: task.creds.gid[1],
    }
}

fn kind_arg(ty: u64) -> Result<SockType, Errno> {
    match ty & 0xf {
        SOCK_STREAM => Ok(SockType::Stream),
        SOCK_DGRAM => Ok(SockType::Dgram),
        SOCK_SEQPACKET => Ok(SockType::SeqPacket),
        _ => Err(Errno::ESOCKTNOSUPPORT),
    }
}

fn install(task: &mut Task, sock: Arc<UnixSocket>, flags: u64) -> Result<i64, Errno> {
    if flags & !(SOCK_NONBLOCK | SOCK_CLOEXEC) != 0 {
        return Err(Errno::EINVAL);
    }
    let status = OpenFlags::RDWR.bits()
        | if flags & SOCK_NONBLOCK != 0 {
            OpenFlags::NONBLOCK.bits()
        } else {
            0
        };
    let file = FileDescription::new(SocketFile::kind(SocketHandle(sock)), None, status);
    let limit = task.nofile();
    task.fds().insert_from(
        0,
        FdEntry {
            file,
            cloexec: flags & SOCK_CLOEXEC != 0,
        },
        limit,
    )
}

pub fn sys_socket(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let (family, ty, proto) = (a[0] as i32 as i64, a[1], a[2] as i32);
    match family {
        2 => return super::inet::socket(task, netstack::Domain::Inet, ty, proto),
        10 => return super::inet::socket(task, netstack::Domain::Inet6, ty, proto),
        16 => return super::netlink::socket(task, ty, proto),
        // Packet sockets would see the host's traffic: never.
        17 => return Err(Errno::EPERM),
        f if f == AF_UNIX as i64 => {}
        _ => {
            tracing::debug!("socket family {family} refused");
            return Err(Errno::EAFNOSUPPORT);
        }
    }
    let kind = kind_arg(ty)?;
    if proto != 0 {
        return Err(Errno::EPROTONOSUPPORT);
    }
    let sock = UnixSocket::new(kind, crate::socket::state(&task.kernel).unix.clone());
    if let Some(d) = &task.landlock {
        let _ = sock.maker_domain.set(d.clone());
    }
    install(task, sock, ty & !0xf).map(|fd| fd as u64)
}

pub fn sys_socketpair(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    if a[0] != AF_UNIX {
        return Err(if a[0] == 2 || a[0] == 10 {
            Errno::EOPNOTSUPP
        } else {
            Errno::EAFNOSUPPORT
        });
    }
    let kind = kind_arg(a[1])?;
    if a[2] as i32 != 0 {
        return Err(Errno::EPROTONOSUPPORT);
    }
    task.mm().slices(a[3], 8, true)?;
    let (x, y) = UnixSocket::pair(
        kind,
        crate::socket::state(&task.kernel).unix.clone(),
        creds(task),
    );
    let fx = install(task, x, a[1] & !0xf)?;
    let fy = match install(task, y, a[1] & !0xf) {
        Ok(f) => f,
        Err(e) => {
            let _ = task.fds().remove(fx);
            return Err(e);
        }
    };
    task.mm().write_obj(a[3], &[fx as i32, fy as i32])?;
    Ok(0)
}

/// Runs `op` on the socket behind `fd` (`ENOTSOCK` for another file).
fn on_socket(
    task: &mut Task,
    fd: u64,
    op: impl FnOnce(&dyn Socket, &mut Task, &FileDescription) -> Result<u64, Errno>,
) -> Result<u64, Errno> {
    let file = task.fds().file(fd as i32 as i64)?;
    let sock = crate::socket::of(&file).ok_or(Errno::ENOTSOCK)?;
    op(sock, task, &file)
}

/// Parses a `sockaddr_un`.
fn read_addr(task: &Task, addr: u64, len: u64) -> Result<UnixAddr, Errno> {
    if len < 2 || len as usize > SUN_LEN {
        return Err(Errno::EINVAL);
    }
    let mut raw = vec![0u8; len as usize];
    task.mm().copy_in(addr, &mut raw)?;
    if u16::from_ne_bytes([raw[0], raw[1]]) != AF_UNIX as u16 {
        return Err(Errno::EINVAL);
    }
    let path = &raw[2..];
    Ok(if path.is_empty() {
        UnixAddr::Unnamed
    } else if path[0] == 0 {
        UnixAddr::Abstract(path[1..].to_vec())
    } else {
        let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
        UnixAddr::Path(path[..end].to_vec())
    })
}

/// Writes a `sockaddr_un` to `addr` with its length at `len_addr`
/// (truncated to the caller's buffer, full length reported).
fn write_addr(task: &Task, addr: u64, len_addr: u64, a: &UnixAddr) -> Result<(), Errno> {
    if addr == 0 {
        return Ok(());
    }
    let mut raw = (AF_UNIX as u16).to_ne_bytes().to_vec();
    match a {
        UnixAddr::Unnamed => {}
        UnixAddr::Path(p) => {
            raw.extend_from_slice(p);
            raw.push(0);
        }
        UnixAddr::Abstract(n) => {
            raw.push(0);
            raw.extend_from_slice(n);
        }
    }
    let have: u32 = task.mm().read_obj(len_addr)?;
    if (have as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    let n = raw.len().min(have as usize);
    task.mm().copy_out(addr, &raw[..n])?;
    task.mm().write_obj(len_addr, &(raw.len() as u32))
}

/// The socket of type `kind` bound at `addr`, for `connect` and `sendto`.
/// As Linux's `unix_find_other`: a socket of another type at a path is
/// `EPROTOTYPE`, and at an abstract name is not found (Linux keys abstract
/// names by type too).
fn lookup(task: &Task, addr: &UnixAddr, kind: SockType) -> Result<Arc<UnixSocket>, Errno> {
    match addr {
        UnixAddr::Unnamed => Err(Errno::EINVAL),
        UnixAddr::Abstract(n) => {
            let target = crate::socket::state(&task.kernel)
                .unix
                .lookup(n)
                .filter(|s| s.kind == kind)
                .ok_or(Errno::ECONNREFUSED)?;
            // Landlock: an abstract socket made outside the caller's
            // domain is out of reach when the domain scopes them.
            let scope = abi::landlock::scope::ABSTRACT_UNIX_SOCKET;
            if task
                .landlock
                .as_ref()
                .is_some_and(|d| d.scoped_out(scope, target.maker_domain.get()))
            {
                return Err(Errno::EPERM);
            }
            Ok(target)
        }
        UnixAddr::Path(p) => {
            let loc = task.resolve(&task.cwd(), p, true)?;
            let target = match loc.node() {
                n if let Some(m) = crate::fsimpl::tmpfs::mem_of(n) => match &m.kind {
                    MemKind::Socket(w) => w
                        .upgrade()
                        .and_then(|s| s.downcast::<UnixSocket>().ok())
                        .ok_or(Errno::ECONNREFUSED),
                    _ => Err(Errno::ECONNREFUSED),
                },
                Node::Host { h, mode } if mode & abi::S_IFMT == abi::S_IFSOCK => h
                    .client()
                    .stat(h.handle())
                    .ok()
                    .and_then(|st| task.kernel.fs.host_socket((st.dev(), st.ino)))
                    .and_then(|s| s.downcast::<UnixSocket>().ok())
                    .ok_or(Errno::ECONNREFUSED),
                _ => Err(Errno::ECONNREFUSED),
            }?;
            if target.kind != kind {
                return Err(Errno::EPROTOTYPE);
            }
            Ok(target)
        }
    }
}

pub fn sys_bind(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    on_socket(task, a[0], |s, task, f| s.bind(task, f, a[1], a[2]))
}

pub fn sys_listen(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    // `net.core.somaxconn` bounds every family's backlog, and a negative
    // one (as unsigned) means as many as it allows (__sys_listen()).
    let somaxconn = crate::fsimpl::builtins(&task.kernel.fs).proc.somaxconn();
    let backlog = if a[1] as u32 > somaxconn {
        somaxconn as i32
    } else {
        a[1] as i32
    };
    on_socket(task, a[0], |s, task, f| s.listen(task, f, backlog))
}

/// Whether a call on `file` with `flags` must not block (`O_NONBLOCK` or
/// `MSG_DONTWAIT`).
pub(super) fn nonblocking(file: &FileDescription, flags: u64) -> bool {
    file.nonblocking() || flags & MSG_DONTWAIT != 0
}

/// When a blocking call on `file` starting now gives up waiting: its
/// `SO_RCVTIMEO` (`rcv`: receives and `accept`) or `SO_SNDTIMEO` (sends
/// and `connect`); `None` without one.
pub(super) fn deadline(file: &FileDescription, rcv: bool) -> Option<Instant> {
    crate::socket::of(file).and_then(|s| s.timeouts().deadline(rcv))
}

/// `setsockopt(SOL_SOCKET, SO_RCVTIMEO/SO_SNDTIMEO[_NEW])` on a Sentry
/// socket: `Some` when `name` is one of them.
pub(super) fn set_timeout(
    task: &Task,
    t: &SockTimeouts,
    name: i32,
    val: u64,
    len: u64,
) -> Option<Result<u64, Errno>> {
    let rcv = crate::socket::timeout_option(name)?;
    Some((|| {
        if (len as u32 as i32) < 16 {
            return Err(Errno::EINVAL);
        }
        let mut tv = [0u8; 16];
        task.mm().copy_in(val, &mut tv)?;
        t.set(rcv, &tv).map(|()| 0)
    })())
}

/// `getsockopt(SOL_SOCKET, SO_RCVTIMEO/SO_SNDTIMEO[_NEW])`: `Some` when
/// `name` is one of them; the value is a `struct timeval`.
pub(super) fn get_timeout(t: &SockTimeouts, name: i32) -> Option<Vec<u8>> {
    crate::socket::timeout_option(name).map(|rcv| t.get(rcv).to_vec())
}

pub fn sys_connect(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    on_socket(task, a[0], |s, task, f| s.connect(task, f, a[1], a[2]))
}

pub fn sys_accept(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    on_socket(task, a[0], |s, task, f| s.accept(task, f, a[1], a[2], 0))
}

pub fn sys_accept4(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    on_socket(task, a[0], |s, task, f| s.accept(task, f, a[1], a[2], a[3]))
}

pub fn sys_getsockname(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    on_socket(task, a[0], |s, task, f| s.getsockname(task, f, a[1], a[2]))
}

pub fn sys_getpeername(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    on_socket(task, a[0], |s, task, f| s.getpeername(task, f, a[1], a[2]))
}

pub fn sys_shutdown(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    on_socket(task, a[0], |s, task, f| s.shutdown(task, f, a[1]))
}

/// Sends `data` (with `rights`) honouring blocking rules; stream sends
/// loop until everything is queued, [`IO_CHUNK`] bytes at a time.
fn send(
    task: &Task,
    file: &FileDescription,
    sock: &Arc<UnixSocket>,
    data: &GuestBufs<'_>,
    mut rights: Vec<Arc<FileDescription>>,
    flags: u64,
    to: Option<Arc<UnixSocket>>,
) -> Result<u64, Errno> {
    let me = creds(task);
    let stream = sock.kind == SockType::Stream;
    let piece = if stream {
        IO_CHUNK
    } else {
        // A datagram or seqpacket message goes whole or not at all, so it
        // is staged whole: Linux refuses one larger than the send buffer
        // (`unix_dgram_sendmsg`: `len > sk_sndbuf - 32` is `EMSGSIZE`),
        // and `SO_SNDBUF` is capped, which bounds the copy.
        if data.len() > sock.state().sndbuf.saturating_sub(32) {
            return Err(Errno::EMSGSIZE);
        }
        data.len()
    };
    // A writer waiting for room also wakes when the peer shuts its reading
    // side (our `wr_shut`), to fail with EPIPE (`sock_alloc_send_pskb`).
    let ready = || {
        let (_, w, hup, _, _) = sock.readiness();
        w || hup || to.is_some() || sock.state().wr_shut
    };
    // Room comes with the receiver's reads (its queue, and our charges
    // given back: ours).
    let mut queues = sock.wait_queues();
    if let Some(t) = &to {
        queues.push(t.waiters.clone());
    }
    send_loop(
        task,
        file,
        flags,
        data,
        piece,
        stream,
        &queues,
        |chunk| sock.send(chunk, &mut rights, me, to.clone()),
        ready,
    )
}

/// The socket send loop: `attempt(chunk)` tries once to send `chunk`, the
/// next at most `piece` bytes of `data` staged in a Sentry buffer
/// (`Some(n)`: sent, `None`: it would block), waiting on `ready` unless
/// `file` or `flags` say not to block, until `SO_SNDTIMEO` runs out (then
/// `EAGAIN`). A stream send goes on until all of `data` is queued, a
/// datagram is one attempt; a signal, the timeout or `EAGAIN` after partial
/// progress returns what went (Linux's `tcp_sendmsg`); `EPIPE` raises
/// `SIGPIPE` unless `MSG_NOSIGNAL`.
#[allow(clippy::too_many_arguments)]
pub(super) fn send_loop(
    task: &Task,
    file: &FileDescription,
    flags: u64,
    data: &GuestBufs<'_>,
    piece: usize,
    stream: bool,
    queues: &[WaitQueue],
    mut attempt: impl FnMut(&[u8]) -> Result<Option<usize>, Errno>,
    ready: impl Fn() -> bool,
) -> Result<u64, Errno> {
    let blk = task.blocker();
    let nonblock = nonblocking(file, flags);
    let deadline = deadline(file, false);
    let len = data.len();
    let mut stage = Stage::new();
    let mut done = 0usize;
    loop {
        match blk.block_until(
            queues,
            nonblock,
            deadline,
            || attempt(stage.load(data, done, piece)),
            &ready,
        ) {
            Ok(n) => {
                done += n;
                if done >= len || !stream {
                    return Ok(done as u64);
                }
            }
            Err(e) if done > 0 && (e == Errno::EAGAIN || e == Errno::EINTR || e.is_restart()) => {
                return Ok(done as u64)
            }
            Err(Errno::EPIPE) => {
                if flags & MSG_NOSIGNAL == 0 {
                    task.raise_sigpipe();
                }
                return Err(Errno::EPIPE);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Writes on a socket descriptor (`write`, `writev`), with `send(2)`
/// flags (`pwritev2`'s `RWF_NOSIGNAL` is `MSG_NOSIGNAL`).
pub fn write_socket(
    task: &Task,
    file: &FileDescription,
    data: &GuestBufs<'_>,
    flags: u64,
) -> Result<u64, Errno> {
    crate::socket::of(file)
        .ok_or(Errno::ENOTSOCK)?
        .write(task, file, data, flags)
}

/// Reads on a socket descriptor (`read`, `readv`) into `dst`.
pub fn read_socket(task: &Task, file: &FileDescription, dst: &GuestBufs<'_>) -> Result<u64, Errno> {
    crate::socket::of(file)
        .ok_or(Errno::ENOTSOCK)?
        .read(task, file, dst)
}

/// Receives into `dst`: what came, and how many bytes of it `dst` got. What
/// one receive takes is bounded by the queue (`SO_RCVBUF`), and
/// `MSG_WAITALL`'s further receives are copied out as they come, so the
/// Sentry never holds the guest's length.
fn recv(
    task: &Task,
    file: &FileDescription,
    sock: &Arc<UnixSocket>,
    dst: &GuestBufs<'_>,
    flags: u64,
) -> Result<(crate::socket::unix::Received, usize), Errno> {
    let blk = task.blocker();
    let peek = flags & MSG_PEEK != 0;
    let max = dst.len();
    // One deadline for the whole call, MSG_WAITALL's further waits too.
    let until = deadline(file, true);
    let mut first = blk.block_until(
        std::slice::from_ref(&sock.waiters),
        nonblocking(file, flags),
        until,
        || sock.recv(max, peek, 0),
        || sock.readiness().0,
    )?;
    let mut n = dst.write_at(0, &first.data);
    // MSG_WAITALL on a stream: keep reading until full or end of file.
    if flags & MSG_WAITALL != 0 && !peek && sock.kind == SockType::Stream {
        while n < max && !first.data.is_empty() {
            match blk.block_until(
                std::slice::from_ref(&sock.waiters),
                false,
                until,
                || sock.recv(max - n, false, 0),
                || sock.readiness().0,
            ) {
                Ok(more) if !more.data.is_empty() => n += dst.write_at(n, &more.data),
                _ => break,
            }
        }
        first.full_len = n;
    }
    Ok((first, n))
}

/// `struct msghdr`.
struct MsgHdr {
    name: u64,
    namelen: u32,
    iov: u64,
    iovlen: u64,
    control: u64,
    controllen: u64,
}

fn read_msghdr(task: &Task, addr: u64) -> Result<MsgHdr, Errno> {
    let w: [u64; 7] = task.mm().read_obj(addr)?;
    Ok(MsgHdr {
        name: w[0],
        namelen: w[1] as u32,
        iov: w[2],
        iovlen: w[3],
        control: w[4],
        controllen: w[5],
    })
}

/// Parses `SCM_RIGHTS` control messages into descriptions.
fn read_rights(task: &Task, control: u64, len: u64) -> Result<Vec<Arc<FileDescription>>, Errno> {
    let mut out = Vec::new();
    if control == 0 || len == 0 {
        return Ok(out);
    }
    if len > 65536 {
        return Err(Errno::ENOBUFS);
    }
    let mut raw = vec![0u8; len as usize];
    task.mm().copy_in(control, &mut raw)?;
    let mut at = 0usize;
    while at + 16 <= raw.len() {
        let clen =
            u64::from_ne_bytes(raw[at..at + 8].try_into().map_err(|_| Errno::EINVAL)?) as usize;
        let level = i32::from_ne_bytes(raw[at + 8..at + 12].try_into().map_err(|_| Errno::EINVAL)?);
        let ty = i32::from_ne_bytes(
            raw[at + 12..at + 16]
                .try_into()
                .map_err(|_| Errno::EINVAL)?,
        );
        if clen < 16 || at + clen > raw.len() {
            return Err(Errno::EINVAL);
        }
        if level == SOL_SOCKET && ty == SCM_RIGHTS {
            for c in raw[at + 16..at + clen].chunks_exact(4) {
                let fd = i32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
                out.push(task.fds().file(fd.into())?);
                if out.len() > SCM_MAX_FD {
                    return Err(Errno::EINVAL);
                }
            }
        } else if level != SOL_SOCKET || ty != SCM_CREDENTIALS {
            return Err(Errno::EINVAL);
        }
        at += (clen + 7) & !7;
    }
    Ok(out)
}

pub fn sys_sendmsg(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    on_socket(task, a[0], |s, task, f| s.sendmsg(task, f, a[1], a[2]))
}

pub fn sys_sendto(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    on_socket(task, a[0], |s, task, f| s.sendto(task, f, a))
}

pub fn sys_recvmsg(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    on_socket(task, a[0], |s, task, f| s.recvmsg(task, f, a[1], a[2]))
}

/// Size of `struct mmsghdr`: a `msghdr` (56 bytes), the `msg_len` that
/// the kernel fills in, and padding.
const MMSGHDR_SIZE: u64 = 64;
/// Most messages one `sendmmsg`/`recvmmsg` handles (Linux's `UIO_MAXIOV`).
const UIO_MAXIOV: u64 = 1024;
const MSG_WAITFORONE: u64 = 0x10000;

/// `sendmmsg(2)`: `sendmsg` for each message in turn; the count sent, or
/// the first message's error when none was.
pub fn sys_sendmmsg(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let (fd, vec, vlen, flags) = (a[0], a[1], a[2].min(UIO_MAXIOV), a[3] & 0xffff_ffff);
    let mut done = 0;
    while done < vlen {
        let hdr = vec.wrapping_add(done * MMSGHDR_SIZE);
        match sys_sendmsg(task, &[fd, hdr, flags, 0, 0, 0]) {
            Ok(n) => task.mm().copy_out(hdr + 56, &(n as u32).to_ne_bytes())?,
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        }
        done += 1;
    }
    Ok(done)
}

/// `recvmmsg(2)`: `recvmsg` for each message in turn; with
/// `MSG_WAITFORONE`, only the first may wait. The timeout is Linux's
/// (`do_recvmmsg`): checked only after each datagram, so a receive that
/// waits is not cut short by it (recvmmsg(2), BUGS); once it has passed,
/// the call returns what it has. What is left of it is written back when
/// any datagram came.
pub fn sys_recvmmsg(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let (fd, vec, vlen, mut flags) = (a[0], a[1], a[2].min(UIO_MAXIOV), a[3] & 0xffff_ffff);
    let end = if a[4] != 0 {
        let ts: [i64; 2] = task.mm().read_obj(a[4])?;
        Some(mmsg_end_time(ts)?)
    } else {
        None
    };
    let mut done = 0;
    let mut left = [0i64; 2];
    while done < vlen {
        let hdr = vec.wrapping_add(done * MMSGHDR_SIZE);
        match sys_recvmsg(task, &[fd, hdr, flags, 0, 0, 0]) {
            Ok(n) => task.mm().copy_out(hdr + 56, &(n as u32).to_ne_bytes())?,
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        }
        done += 1;
        if flags & MSG_WAITFORONE != 0 {
            flags |= MSG_DONTWAIT;
        }
        if let Some(end) = end {
            // `end` is `None` for a zero timeout: it has passed at once.
            match end.and_then(|e| e.checked_duration_since(Instant::now())) {
                Some(d) if !d.is_zero() => {
                    left = [d.as_secs() as i64, i64::from(d.subsec_nanos())];
                }
                _ => {
                    left = [0, 0];
                    break;
                }
            }
        }
    }
    if end.is_some() && done > 0 {
        task.mm().write_obj(a[4], &left)?;
    }
    Ok(done)
}

/// When a `recvmmsg` timeout (`struct timespec`) ends, as Linux's
/// `poll_select_set_timeout`: `EINVAL` for a negative or malformed one,
/// `None` for zero (already over after the first datagram).
fn mmsg_end_time(ts: [i64; 2]) -> Result<Option<Instant>, Errno> {
    let [sec, nsec] = ts;
    if sec < 0 || !(0..1_000_000_000).contains(&nsec) {
        return Err(Errno::EINVAL);
    }
    if sec == 0 && nsec == 0 {
        return Ok(None);
    }
    // A century stands for longer ones, which never end in practice
    // (`timespec64_add_safe` saturates) and would overflow an `Instant`.
    let d = std::time::Duration::new(sec.min(100 * 365 * 86_400) as u64, nsec as u32);
    Ok(Instant::now().checked_add(d))
}

pub fn sys_recvfrom(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    on_socket(task, a[0], |s, task, f| s.recvfrom(task, f, a))
}

pub fn sys_setsockopt(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    on_socket(task, a[0], |s, task, f| s.setsockopt(task, f, a))
}

pub fn sys_getsockopt(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    on_socket(task, a[0], |s, task, f| s.getsockopt(task, f, a))
}

impl Socket for SocketHandle {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn timeouts(&self) -> &SockTimeouts {
        &self.0.timeouts
    }

    fn poll(&self, _events: i16) -> i16 {
        use abi::poll::*;
        let (r, w, hup, rdhup, err) = self.0.readiness();
        (if r { POLLIN | POLLRDNORM } else { 0 })
            | (if w { POLLOUT | POLLWRNORM } else { 0 })
            | (if hup { POLLHUP } else { 0 })
            | (if rdhup { POLLRDHUP } else { 0 })
            | if err { POLLERR } else { 0 }
    }

    fn wait_queues(&self, out: &mut Vec<WaitQueue>) {
        out.extend(self.0.wait_queues());
    }

    fn fasync(&self) -> Option<&crate::vfs::fasync::Fasync> {
        Some(&self.0.fasync)
    }

    fn bytes_readable(&self) -> Result<i32, Errno> {
        Ok(self.0.available() as i32)
    }

    fn bind(
        &self,
        task: &Task,
        _file: &FileDescription,
        addr: u64,
        len: u64,
    ) -> Result<u64, Errno> {
        let sock = &self.0;
        let addr = read_addr(task, addr, len)?;
        if let UnixAddr::Path(p) = &addr {
            if sock.state().addr != UnixAddr::Unnamed {
                return Err(Errno::EINVAL);
            }
            // A pathname socket is an inode in the file system.
            let start = super::dir_arg(task, abi::AT_FDCWD as u64, p)?;
            let parent = match task.walk(&start, p, false)? {
                Lookup::Found(_) => return Err(Errno::EADDRINUSE),
                Lookup::Missing { parent } => parent,
            };
            if task.kernel.fs.read_only_at(&parent) {
                return Err(Errno::EROFS);
            }
            super::fs::landlocked(task, &parent, abi::landlock::access::MAKE_SOCK)?;
            let name = p
                .split(|&b| b == b'/')
                .rfind(|c| !c.is_empty())
                .ok_or(Errno::EINVAL)?
                .to_vec();
            let mode = abi::S_IFSOCK | (0o777 & !task.fs_ctx().umask);
            let weak: std::sync::Weak<dyn std::any::Any + Send + Sync> = Arc::downgrade(sock) as _;
            let in_use = |e| {
                if e == Errno::EEXIST {
                    Errno::EADDRINUSE
                } else {
                    e
                }
            };
            match parent.node() {
                n if let Some(dir) = crate::fsimpl::tmpfs::mem_of(n) => {
                    dir.create(&name, mode, task.ids, || MemKind::Socket(weak))
                        .map_err(in_use)?;
                }
                // On a host directory the inode is the host's, bound to
                // nothing there: the socket stays the Sentry's, found by
                // the inode's identity.
                Node::Host { h, .. } if h.volume() == Some(crate::vfs::VolumeKind::ReadWrite) => {
                    super::fs::may_write_dir(task, &parent)?;
                    let node = h.client().mknod(h.handle(), &name, mode).map_err(in_use)?;
                    let id = (node.stat.dev(), node.stat.ino);
                    super::fs::adopt(task, h, node);
                    task.kernel.fs.bind_host_socket(id, weak);
                }
                _ => return Err(Errno::EROFS),
            }
        }
        sock.bind(addr).map(|_| 0)
    }

    fn listen(&self, _: &Task, _: &FileDescription, backlog: i32) -> Result<u64, Errno> {
        self.0.listen(backlog).map(|()| 0)
    }

    fn connect(
        &self,
        task: &Task,
        file: &FileDescription,
        addr: u64,
        len: u64,
    ) -> Result<u64, Errno> {
        let sock = &self.0;
        let addr = read_addr(task, addr, len)?;
        let target = lookup(task, &addr, sock.kind)?;
        if sock.kind == SockType::Dgram {
            return sock.connect_dgram(&target).map(|()| 0);
        }
        let me = creds(task);
        let blk = task.blocker();
        let nonblock = nonblocking(file, 0);
        // A full backlog is waited out for at most `SO_SNDTIMEO`, then
        // `EAGAIN` (`unix_stream_connect`).
        blk.block_until(
            std::slice::from_ref(&target.waiters),
            nonblock,
            deadline(file, false),
            || Ok(sock.connect_to(&target, me, me)?.then_some(())),
            || {
                target
                    .state()
                    .listening
                    .as_ref()
                    .is_none_or(|(b, q)| q.len() <= *b)
            },
        )
        .map_err(|e| if e == Errno::EAGAIN { Errno::EAGAIN } else { e })?;
        Ok(0)
    }

    fn accept(
        &self,
        task: &mut Task,
        file: &FileDescription,
        addr: u64,
        len_addr: u64,
        flags: u64,
    ) -> Result<u64, Errno> {
        let sock = &self.0;
        if sock.kind == SockType::Dgram {
            return Err(Errno::EOPNOTSUPP);
        }
        if flags & !(SOCK_NONBLOCK | SOCK_CLOEXEC) != 0 {
            return Err(Errno::EINVAL);
        }
        let blk = task.blocker();
        let conn = blk.block_until(
            std::slice::from_ref(&sock.waiters),
            nonblocking(file, 0),
            deadline(file, true),
            || sock.accept(),
            || sock.readiness().0,
        )?;
        let peer_addr = conn.state().peer_addr.clone();
        let peer_addr = if peer_addr == UnixAddr::Unnamed {
            conn.state()
                .peer
                .as_ref()
                .and_then(std::sync::Weak::upgrade)
                .map_or(UnixAddr::Unnamed, |p| p.state().addr.clone())
        } else {
            UnixAddr::Unnamed
        };
        let fd = install(task, conn, flags)?;
        if addr != 0 {
            write_addr(task, addr, len_addr, &peer_addr)?;
        }
        Ok(fd as u64)
    }

    fn getsockname(
        &self,
        task: &Task,
        _: &FileDescription,
        addr: u64,
        len_addr: u64,
    ) -> Result<u64, Errno> {
        let name = self.0.state().addr.clone();
        write_addr(task, addr, len_addr, &name).map(|()| 0)
    }

    fn getpeername(
        &self,
        task: &Task,
        _file: &FileDescription,
        out: u64,
        len_addr: u64,
    ) -> Result<u64, Errno> {
        let sock = &self.0;
        let (peer, saved) = {
            let st = sock.state();
            (
                st.peer.as_ref().and_then(std::sync::Weak::upgrade),
                st.peer_addr.clone(),
            )
        };
        let Some(peer) = peer else {
            return Err(Errno::ENOTCONN);
        };
        let addr = if saved == UnixAddr::Unnamed {
            peer.state().addr.clone()
        } else {
            saved
        };
        write_addr(task, out, len_addr, &addr).map(|()| 0)
    }

    fn shutdown(&self, _: &Task, _: &FileDescription, how: u64) -> Result<u64, Errno> {
        self.0.shutdown(how as i32).map(|()| 0)
    }

    fn write(
        &self,
        task: &Task,
        file: &FileDescription,
        data: &GuestBufs<'_>,
        flags: u64,
    ) -> Result<u64, Errno> {
        send(task, file, &self.0, data, Vec::new(), flags, None)
    }

    fn read(&self, task: &Task, file: &FileDescription, dst: &GuestBufs<'_>) -> Result<u64, Errno> {
        let (_, n) = recv(task, file, &self.0, dst, 0)?;
        Ok(n as u64)
    }

    fn sendto(&self, task: &Task, file: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno> {
        let sock = &self.0;
        let slices = task.mm().slices(a[1], a[2], false)?;
        let to = if a[4] != 0 && sock.kind == SockType::Dgram {
            let addr = read_addr(task, a[4], a[5])?;
            Some(lookup(task, &addr, sock.kind)?)
        } else {
            None
        };
        send(
            task,
            file,
            sock,
            &GuestBufs::new(&slices),
            Vec::new(),
            a[3],
            to,
        )
    }

    fn recvfrom(&self, task: &Task, file: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno> {
        let sock = &self.0;
        let slices = task.mm().slices(a[1], a[2], true)?;
        let (r, n) = recv(task, file, sock, &GuestBufs::new(&slices), a[3])?;
        if a[4] != 0 {
            write_addr(task, a[4], a[5], &r.from)?;
        }
        Ok(if a[3] & MSG_TRUNC != 0 { r.full_len } else { n } as u64)
    }

    fn sendmsg(
        &self,
        task: &Task,
        file: &FileDescription,
        msg: u64,
        flags: u64,
    ) -> Result<u64, Errno> {
        let sock = &self.0;
        let h = read_msghdr(task, msg)?;
        let slices = super::fs::iovecs_pub(task, h.iov, h.iovlen, false)?;
        let rights = read_rights(task, h.control, h.controllen)?;
        let to = if h.name != 0 && h.namelen != 0 {
            let addr = read_addr(task, h.name, u64::from(h.namelen))?;
            if sock.kind != SockType::Dgram {
                if sock.state().peer.is_some() {
                    return Err(Errno::EISCONN);
                }
                return Err(Errno::EOPNOTSUPP);
            }
            Some(lookup(task, &addr, sock.kind)?)
        } else {
            None
        };
        send(
            task,
            file,
            sock,
            &GuestBufs::new(&slices),
            rights,
            flags,
            to,
        )
    }

    fn recvmsg(
        &self,
        task: &Task,
        file: &FileDescription,
        msg: u64,
        flags: u64,
    ) -> Result<u64, Errno> {
        let sock = &self.0;
        let h = read_msghdr(task, msg)?;
        let slices = super::fs::iovecs_pub(task, h.iov, h.iovlen, true)?;
        let (r, n) = recv(task, file, sock, &GuestBufs::new(&slices), flags)?;
        let mut out_flags = 0u32;
        if r.full_len > n {
            out_flags |= MSG_TRUNC as u32;
        }
        // Control messages: credentials (SO_PASSCRED), then descriptors.
        let mut control = Vec::new();
        let passcred = sock.state().passcred;
        if passcred {
            let c = r.creds.unwrap_or_default();
            control.extend_from_slice(&28u64.to_ne_bytes());
            control.extend_from_slice(&SOL_SOCKET.to_ne_bytes());
            control.extend_from_slice(&SCM_CREDENTIALS.to_ne_bytes());
            control.extend_from_slice(&c.pid.to_ne_bytes());
            control.extend_from_slice(&c.uid.to_ne_bytes());
            control.extend_from_slice(&c.gid.to_ne_bytes());
            control.extend_from_slice(&[0u8; 4]);
        }
        if !r.rights.is_empty() {
            let room = (h.controllen as usize).saturating_sub(control.len() + 16) / 4;
            let take = room.min(r.rights.len());
            if take < r.rights.len() {
                out_flags |= MSG_CTRUNC;
            }
            let limit = task.nofile();
            let cloexec = flags & MSG_CMSG_CLOEXEC != 0;
            let mut fds = Vec::new();
            for f in r.rights.into_iter().take(take) {
                fds.push(
                    task.fds()
                        .insert_from(0, FdEntry { file: f, cloexec }, limit)?
                        as i32,
                );
            }
            if !fds.is_empty() {
                let clen = 16 + 4 * fds.len();
                control.extend_from_slice(&(clen as u64).to_ne_bytes());
                control.extend_from_slice(&SOL_SOCKET.to_ne_bytes());
                control.extend_from_slice(&SCM_RIGHTS.to_ne_bytes());
                for fd in fds {
                    control.extend_from_slice(&fd.to_ne_bytes());
                }
                control.resize((control.len() + 7) & !7, 0);
            }
        }
        let clen = control.len().min(h.controllen as usize);
        if clen < control.len() {
            out_flags |= MSG_CTRUNC;
        }
        if clen > 0 {
            task.mm().copy_out(h.control, &control[..clen])?;
        }
        task.mm().write_obj(msg + 40, &(clen as u64))?;
        task.mm().write_obj(msg + 48, &out_flags)?;
        if h.name != 0 {
            // msg_namelen is updated in place.
            let len_addr = msg + 8;
            write_addr(task, h.name, len_addr, &r.from)?;
        }
        Ok(if flags & MSG_TRUNC != 0 {
            r.full_len
        } else {
            n
        } as u64)
    }

    fn setsockopt(&self, task: &Task, _file: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno> {
        let sock = &self.0;
        const SO_SNDBUF: u64 = 7;
        const SO_RCVBUF: u64 = 8;
        const SO_PASSCRED: u64 = 16;
        if a[1] as i32 != SOL_SOCKET {
            return Err(Errno::ENOPROTOOPT);
        }
        if let Some(r) = set_timeout(task, &sock.timeouts, a[2] as i32, a[3], a[4]) {
            return r;
        }
        if a[4] < 4 {
            return Err(Errno::EINVAL);
        }
        let v: i32 = task.mm().read_obj(a[3])?;
        let mut st = sock.state();
        match a[2] {
            SO_PASSCRED => st.passcred = v != 0,
            // Linux bounds the value by wmem_max/rmem_max (a negative one,
            // read as unsigned, too), doubles it and keeps a minimum
            // (`sk_setsockopt`, socket(7)).
            SO_RCVBUF => {
                st.rcvbuf = ((v as u32 as usize).min(unix::BUF_MAX) * 2).max(unix::MIN_RCVBUF);
            }
            SO_SNDBUF => {
                st.sndbuf = ((v as u32 as usize).min(unix::BUF_MAX) * 2).max(unix::MIN_SNDBUF);
            }
            // Accepted and without effect on Unix sockets.
            2 | 9 | 10 | 13 | 15 => {}
            _ => return Err(Errno::ENOPROTOOPT),
        }
        drop(st);
        // A larger send buffer may let a blocked writer go on (Linux calls
        // `sk_write_space` after `SO_SNDBUF`).
        sock.waiters.notify();
        Ok(0)
    }

    fn getsockopt(&self, task: &Task, _file: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno> {
        let sock = &self.0;
        const SO_TYPE: u64 = 3;
        const SO_ERROR: u64 = 4;
        const SO_SNDBUF: u64 = 7;
        const SO_RCVBUF: u64 = 8;
        const SO_PASSCRED: u64 = 16;
        const SO_PEERCRED: u64 = 17;
        const SO_ACCEPTCONN: u64 = 30;
        const SO_PROTOCOL: u64 = 38;
        const SO_DOMAIN: u64 = 39;
        if a[1] as i32 != SOL_SOCKET {
            return Err(Errno::EOPNOTSUPP);
        }
        let len: u32 = task.mm().read_obj(a[4])?;
        if (len as i32) < 0 {
            return Err(Errno::EINVAL);
        }
        let int = |v: i32| v.to_ne_bytes().to_vec();
        let val: Vec<u8> = if let Some(v) = get_timeout(&sock.timeouts, a[2] as i32) {
            v
        } else {
            let mut st = sock.state();
            match a[2] {
                SO_TYPE => int(match sock.kind {
                    SockType::Stream => 1,
                    SockType::Dgram => 2,
                    SockType::SeqPacket => 5,
                }),
                SO_ERROR => int(st.error.take().map_or(0, |e| e.0)),
                SO_SNDBUF => int(st.sndbuf as i32),
                SO_RCVBUF => int(st.rcvbuf as i32),
                SO_PASSCRED => int(i32::from(st.passcred)),
                SO_ACCEPTCONN => int(i32::from(st.listening.is_some())),
                SO_DOMAIN => int(AF_UNIX as i32),
                SO_PROTOCOL => int(0),
                SO_PEERCRED => {
                    let c = st.peer_creds.unwrap_or(Creds {
                        pid: 0,
                        uid: u32::MAX,
                        gid: u32::MAX,
                    });
                    let mut v = c.pid.to_ne_bytes().to_vec();
                    v.extend_from_slice(&c.uid.to_ne_bytes());
                    v.extend_from_slice(&c.gid.to_ne_bytes());
                    v
                }
                _ => return Err(Errno::ENOPROTOOPT),
            }
        };
        let n = val.len().min(len as usize);
        task.mm().copy_out(a[3], &val[..n])?;
        task.mm().write_obj(a[4], &(n as u32))?;
        Ok(0)
    }
}
