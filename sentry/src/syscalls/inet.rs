//! The socket calls for `AF_INET`/`AF_INET6` descriptors, over the netstack
//! (or, under `--network host`, handed to `host_inet`).

use abi::{Errno, OpenFlags};
use netstack::{Domain, Shutdown, SockOpt, SockOptName, SocketType};

use crate::kernel::task::Task;
use crate::mm::guestio::{ByteSource, GuestBufs, Stage, IO_CHUNK, MAX_INET_DATAGRAM};
use crate::socket::cmsg;
use crate::socket::inet::{encode_addr, parse_addr, unspecified, InetSocket};
use crate::socket::{
    Socket, SocketFile, SO_RCVTIMEO, SO_RCVTIMEO_NEW, SO_SNDTIMEO, SO_SNDTIMEO_NEW,
};
use crate::vfs::file::{FileDescription, FileKind};

use super::host_inet as hostnet;
use crate::sync::Locked;

const SOCK_NONBLOCK: u64 = 0o4000;
const SOCK_CLOEXEC: u64 = 0o2000000;
const MSG_PEEK: u64 = 2;
const MSG_TRUNC: u64 = 0x20;
const MSG_WAITALL: u64 = 0x100;
const MSG_ERRQUEUE: u64 = 0x2000;

fn sock(file: &FileDescription) -> Result<&InetSocket, Errno> {
    crate::socket::downcast(file).ok_or(Errno::ENOTSOCK)
}

/// `socket(AF_INET/AF_INET6, ...)`.
pub fn socket(task: &mut Task, domain: Domain, ty: u64, proto: i32) -> Result<u64, Errno> {
    let (st, want_proto) = match ty & 0xf {
        1 => (SocketType::Stream, 6),
        2 => (SocketType::Datagram, 17),
        // Raw and packet sockets are never offered to a guest.
        3 | 10 => return Err(Errno::EPERM),
        _ => return Err(Errno::ESOCKTNOSUPPORT),
    };
    if proto != 0 && proto != want_proto {
        return Err(Errno::EPROTONOSUPPORT);
    }
    let flags = ty & !0xf;
    if flags & !(SOCK_NONBLOCK | SOCK_CLOEXEC) != 0 {
        return Err(Errno::EINVAL);
    }
    if crate::socket::state(&task.kernel).host_net.is_some() {
        return hostnet::socket(task, domain, st, flags);
    }
    let s = task.kernel.net.socket(domain, st).map_err(|e| {
        if e == Errno::ENOBUFS {
            Errno::EMFILE
        } else {
            e
        }
    })?;
    let sock = InetSocket::new(
        s,
        domain,
        st,
        &crate::socket::state(&task.kernel).inet_queues,
    );
    install(task, sock, flags)
}

fn install(task: &mut Task, s: InetSocket, flags: u64) -> Result<u64, Errno> {
    install_socket(task, SocketFile::kind(s), flags)
}

/// Installs a new socket description at the lowest free descriptor, with
/// `SOCK_NONBLOCK`/`SOCK_CLOEXEC` from `flags` (the type argument's).
pub(crate) fn install_socket(task: &mut Task, kind: FileKind, flags: u64) -> Result<u64, Errno> {
    let status = OpenFlags::RDWR.bits()
        | if flags & SOCK_NONBLOCK != 0 {
            OpenFlags::NONBLOCK.bits()
        } else {
            0
        };
    let file = FileDescription::new(kind, None, status);
    task.install_fd(file, flags & SOCK_CLOEXEC != 0)
}

fn read_sockaddr(
    task: &Task,
    addr: u64,
    len: u64,
    domain: Domain,
) -> Result<std::net::SocketAddr, Errno> {
    if len > 128 {
        return Err(Errno::EINVAL);
    }
    let mut raw = vec![0u8; len as usize];
    task.mm().copy_in(addr, &mut raw)?;
    parse_addr(&raw, domain)
}

fn write_sockaddr(
    task: &Task,
    addr: u64,
    len_addr: u64,
    a: std::net::SocketAddr,
    domain: Domain,
) -> Result<(), Errno> {
    if addr == 0 {
        return Ok(());
    }
    let raw = encode_addr(a, domain);
    let have: u32 = task.mm().read_obj(len_addr)?;
    if (have as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    let n = raw.len().min(have as usize);
    task.mm().copy_out(addr, &raw[..n])?;
    task.mm().write_obj(len_addr, &(raw.len() as u32))
}

/// A port below 1024 takes `CAP_NET_BIND_SERVICE` (`EACCES`), checked
/// before whether the address is free (Linux's `inet_bind`, with
/// `ip_unprivileged_port_start` at its default).
pub(super) fn may_bind_port(task: &Task, port: u16) -> Result<(), Errno> {
    if port != 0 && port < 1024 && !task.capable(crate::kernel::auth::cap::NET_BIND_SERVICE) {
        return Err(Errno::EACCES);
    }
    Ok(())
}

/// Sends `data`; stream sends loop until all is queued (or a signal or
/// `EAGAIN` after partial progress), [`IO_CHUNK`] bytes at a time; a
/// datagram goes whole, so one above [`MAX_INET_DATAGRAM`] is `EMSGSIZE`
/// before it is copied (`udp_sendmsg`).
pub fn send(
    task: &Task,
    file: &FileDescription,
    data: &GuestBufs<'_>,
    flags: u64,
    to: Option<std::net::SocketAddr>,
) -> Result<u64, Errno> {
    let s = sock(file)?;
    let stream = s.ty != SocketType::Datagram;
    if !stream && matches!(task.kernel.net.mode(), netstack::Mode::Egress) {
        // For the egress log: who sends a datagram out.
        s.sock
            .set_origin(task.pid(), &String::from_utf8_lossy(&task.comm));
    }
    let piece = crate::mm::guestio::inet_send_piece(stream, data.len())?;
    super::socket::send_loop(
        task,
        file,
        flags,
        data,
        piece,
        stream,
        std::slice::from_ref(&s.waiters),
        |chunk| {
            let r = match to {
                Some(a) if s.ty == SocketType::Datagram => s.sock.send_to(chunk, a),
                _ => s.sock.send(chunk),
            };
            match r {
                Ok(n) => Ok(Some(n)),
                Err(Errno::EAGAIN) => Ok(None),
                Err(e) => Err(e),
            }
        },
        || {
            s.sock
                .readiness()
                .is_ok_and(|r| r.writable || r.error || r.hup)
        },
    )
}

/// What one receive got: bytes copied, the full length, the sender and
/// the address a datagram was sent to.
pub struct Got {
    len: usize,
    full: usize,
    from: Option<std::net::SocketAddr>,
    local: Option<std::net::IpAddr>,
    hop_limit: Option<u8>,
    tos: Option<u8>,
    arrived: Option<std::time::Instant>,
}

/// Receives into `dst`. The bytes
/// pass through a Sentry buffer of at most [`IO_CHUNK`] (a stream: further
/// pieces follow while data is there, or until full under `MSG_WAITALL`)
/// or [`MAX_INET_DATAGRAM`] bytes (no datagram is longer), whatever the
/// guest's length. A stream's `MSG_PEEK` sees at most one piece: a short
/// read, which is a stream's right.
pub fn recv(
    task: &Task,
    file: &FileDescription,
    dst: &GuestBufs<'_>,
    flags: u64,
) -> Result<Got, Errno> {
    let s = sock(file)?;
    let blk = task.blocker();
    let peek = flags & MSG_PEEK != 0;
    let stream = s.ty == SocketType::Stream;
    let max = dst.len();
    let ready = || {
        s.sock
            .readiness()
            .is_ok_and(|r| r.readable || r.error || r.hup)
    };
    let mut stage = Stage::new();
    let cap = if stream { IO_CHUNK } else { MAX_INET_DATAGRAM };
    let buf = stage.space(max.min(cap));
    // One deadline for the whole call, MSG_WAITALL's further waits too.
    let until = super::socket::deadline(file, true);
    let meta = blk.block_until(
        std::slice::from_ref(&s.waiters),
        super::socket::nonblocking(file, flags),
        until,
        || match s.sock.recv_from(buf, peek) {
            Ok(m) => Ok(Some(m)),
            Err(Errno::EAGAIN) => Ok(None),
            Err(e) => Err(e),
        },
        ready,
    )?;
    let mut full_piece = meta.len == buf.len();
    let mut len = dst.write_at(0, &buf[..meta.len]);
    let waitall = flags & MSG_WAITALL != 0 && !peek && stream;
    if stream && !peek {
        // Without MSG_WAITALL, what is already there (no waiting); with
        // it, until the buffer is full, end of file, an error or a signal
        // (which ends it with what arrived).
        while len < max && meta.len > 0 && (waitall || full_piece) {
            let piece = stage.space((max - len).min(IO_CHUNK));
            let r = if waitall {
                blk.block_until(
                    std::slice::from_ref(&s.waiters),
                    false,
                    until,
                    || match s.sock.recv(piece, false) {
                        Ok(n) => Ok(Some(n)),
                        Err(Errno::EAGAIN) => Ok(None),
                        Err(e) => Err(e),
                    },
                    ready,
                )
            } else {
                s.sock.recv(piece, false)
            };
            match r {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    full_piece = n == piece.len();
                    len += dst.write_at(len, &piece[..n]);
                }
            }
        }
    }
    let full = if s.ty == SocketType::Datagram {
        meta.full_len
    } else {
        len
    };
    Ok(Got {
        len,
        full,
        from: Some(meta.from),
        local: meta.local,
        hop_limit: meta.hop_limit,
        tos: meta.tos,
        arrived: meta.arrived,
    })
}

/// `CLOCK_REALTIME` as the guest sees it at `arrived` (now, if unknown):
/// the guest's clock now, less the time since, so the stamp agrees with
/// the guest's own clock readings around the arrival. The same datagram
/// read again (after `MSG_PEEK`) gets the same stamp.
fn arrival_time(
    task: &Task,
    s: &InetSocket,
    arrived: Option<std::time::Instant>,
) -> Result<(i64, i64), Errno> {
    let mut last = s.last_stamp.locked();
    if let (Some(a), Some((at, stamp))) = (arrived, *last) {
        if a == at {
            return Ok(stamp);
        }
    }
    let t = super::time::realtime(task)?;
    let now = std::time::Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    );
    let ago = arrived.map_or(std::time::Duration::ZERO, |a| a.elapsed());
    let at = now.saturating_sub(ago);
    let stamp = (at.as_secs() as i64, i64::from(at.subsec_nanos()));
    if let Some(a) = arrived {
        *last = Some((a, stamp));
    }
    Ok(stamp)
}

/// `recvmsg(MSG_ERRQUEUE)`: the oldest error queued for `IP_RECVERR`,
/// never waiting and taken even under `MSG_PEEK` (`ip_recv_error`): the quoted payload as the data, the
/// destination it was sent to as the name, `IP_RECVERR` (`IPV6_RECVERR`)
/// with `sock_extended_err` as the control message, `MSG_ERRQUEUE` in the
/// flags.
fn recv_error(
    task: &Task,
    s: &InetSocket,
    msg: u64,
    w: &[u64; 7],
    dst: &GuestBufs<'_>,
    flags: u64,
) -> Result<u64, Errno> {
    let e = s.sock.recv_error()?;
    let n = dst.write_at(0, &e.payload[..e.payload.len().min(dst.len())]);
    let mut out_flags = MSG_ERRQUEUE as u32;
    if e.payload.len() > n {
        out_flags |= MSG_TRUNC as u32;
    }
    let m = cmsg::extended_err(&e, s.domain == Domain::Inet6);
    out_flags |= put_control(task, msg, w[4], w[5], &[m])?;
    task.mm().write_obj(msg + 48, &out_flags)?;
    if w[0] != 0 {
        write_sockaddr(task, w[0], msg + 8, e.dest, s.domain)?;
    }
    Ok(if flags & MSG_TRUNC != 0 {
        e.payload.len()
    } else {
        n
    } as u64)
}

/// Writes control messages to the guest's buffer (`control`, `room`
/// bytes) and `msg_controllen`; returns `MSG_CTRUNC` when they did not all
/// fit.
pub(super) fn put_control(
    task: &Task,
    msg: u64,
    control: u64,
    room: u64,
    msgs: &[cmsg::Cmsg],
) -> Result<u32, Errno> {
    // No buffer is no room (`put_cmsg`).
    let room = if control == 0 {
        0
    } else {
        room.min(1 << 16) as usize
    };
    let (bytes, flags) = cmsg::encode(msgs, room);
    if !bytes.is_empty() {
        task.mm().copy_out(control, &bytes)?;
    }
    task.mm().write_obj(msg + 40, &(bytes.len() as u64))?;
    Ok(flags)
}

const SOL_SOCKET: i32 = 1;
const IPPROTO_TCP: i32 = 6;
const IPPROTO_IPV6: i32 = 41;
const IPPROTO_IP: i32 = 0;
const IPPROTO_UDP: i32 = 17;

const IP_TTL: i32 = 2;
const IP_TOS: i32 = 1;
const IP_MULTICAST_TTL: i32 = 33;
const IPV6_UNICAST_HOPS: i32 = 16;
/// `INET_ECN_MASK`: the ECN bits of the TOS byte, which a TCP socket's
/// `IP_TOS`/`IPV6_TCLASS` cannot set (TCP manages them).
const ECN_MASK: u8 = 3;

/// `setsockopt` of the options that shape the IP header of what the
/// socket sends (`IP_TTL`, `IP_TOS`, `IP_MULTICAST_TTL`,
/// `IPV6_UNICAST_HOPS`, `IPV6_TCLASS`) and of `IP_RECVERR`/`IPV6_RECVERR`,
/// with Linux's checks and defaults (ip(7), ipv6(7)); `None` for other
/// options.
fn set_ip_option(
    task: &Task,
    s: &InetSocket,
    level: i32,
    name: i32,
    val: u64,
    len: u64,
) -> Option<Result<u64, Errno>> {
    let stream = s.ty == SocketType::Stream;
    let len = len as u32 as i32;
    let opt = match (level, name) {
        (IPPROTO_IP, IP_TTL | IP_TOS | IP_MULTICAST_TTL | cmsg::IP_RECVERR) => {
            // An int, or a single byte (`do_ip_setsockopt`); no value
            // at all reads as 0.
            let v: i32 = match len {
                l if l < 0 => return Some(Err(Errno::EINVAL)),
                l if l >= 4 => match task.mm().read_obj::<i32>(val) {
                    Ok(v) => v,
                    Err(e) => return Some(Err(e)),
                },
                l if l >= 1 => match task.mm().read_obj::<u8>(val) {
                    Ok(v) => i32::from(v),
                    Err(e) => return Some(Err(e)),
                },
                _ => 0,
            };
            match name {
                IP_TTL => match v {
                    -1 => SockOpt::Ttl(netstack::HOP_LIMIT),
                    1..=255 => SockOpt::Ttl(v as u8),
                    _ => return Some(Err(Errno::EINVAL)),
                },
                // Only the low byte counts; TCP keeps the ECN bits its own.
                IP_TOS if stream => SockOpt::Tos(v as u8 & !ECN_MASK),
                IP_TOS => SockOpt::Tos(v as u8),
                IP_MULTICAST_TTL => {
                    if stream || len < 1 {
                        return Some(Err(Errno::EINVAL));
                    }
                    match v {
                        -1 => SockOpt::MulticastTtl(1),
                        0..=255 => SockOpt::MulticastTtl(v as u8),
                        _ => return Some(Err(Errno::EINVAL)),
                    }
                }
                _ => SockOpt::RecvErr(v != 0),
            }
        }
        (IPPROTO_IPV6, IPV6_UNICAST_HOPS | cmsg::IPV6_TCLASS | cmsg::IPV6_RECVERR) => {
            if s.domain != Domain::Inet6 {
                return Some(Err(Errno::ENOPROTOOPT));
            }
            if len < 4 {
                return Some(Err(Errno::EINVAL));
            }
            let v: i32 = match task.mm().read_obj(val) {
                Ok(v) => v,
                Err(e) => return Some(Err(e)),
            };
            match name {
                _ if name != cmsg::IPV6_RECVERR && !(-1..=255).contains(&v) => {
                    return Some(Err(Errno::EINVAL))
                }
                IPV6_UNICAST_HOPS if v == -1 => SockOpt::HopLimit(netstack::HOP_LIMIT),
                IPV6_UNICAST_HOPS => SockOpt::HopLimit(v as u8),
                // -1 is RFC 3542's default, 0.
                cmsg::IPV6_TCLASS if v == -1 => SockOpt::TrafficClass(0),
                cmsg::IPV6_TCLASS if stream => SockOpt::TrafficClass(v as u8 & !ECN_MASK),
                cmsg::IPV6_TCLASS => SockOpt::TrafficClass(v as u8),
                _ => SockOpt::RecvErr(v != 0),
            }
        }
        _ => return None,
    };
    Some(s.sock.set_option(opt).map(|()| 0))
}

/// The value of a boolean control-message option: an `int`, except that
/// the IP-level ones also take a single byte (`ip_setsockopt`'s
/// `optlen >= 1` case); the socket- and IPv6-level ones need a whole
/// `int` (`EINVAL`).
fn cmsg_flag_arg(task: &Task, level: i32, val: u64, len: u64) -> Result<bool, Errno> {
    let len = len as u32 as i32;
    if len >= 4 {
        let v: i32 = task.mm().read_obj(val)?;
        return Ok(v != 0);
    }
    if len >= 1 && level == cmsg::IPPROTO_IP {
        let v: u8 = task.mm().read_obj(val)?;
        return Ok(v != 0);
    }
    Err(Errno::EINVAL)
}

impl Socket for InetSocket {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn timeouts(&self) -> &crate::socket::SockTimeouts {
        &self.timeouts
    }

    fn poll(&self, _events: i16) -> i16 {
        use abi::poll::*;
        let r = self.sock.readiness().unwrap_or_default();
        (if r.readable { POLLIN | POLLRDNORM } else { 0 })
            | (if r.writable { POLLOUT | POLLWRNORM } else { 0 })
            | (if r.hup { POLLHUP } else { 0 })
            | (if r.rdhup { POLLRDHUP } else { 0 })
            | if r.error { POLLERR } else { 0 }
    }

    fn wait_queues(&self, out: &mut Vec<crate::kernel::wait::WaitQueue>) {
        out.push(self.waiters.clone());
    }

    fn generation(&self) -> u64 {
        self.sock.edges().unwrap_or(0)
    }

    fn fasync(&self) -> Option<&crate::vfs::fasync::Fasync> {
        Some(&self.fasync)
    }

    fn async_changed(&self, kernel: &crate::kernel::Kernel, on: bool) {
        if on {
            crate::socket::state(kernel).inet_async.register(self);
        } else if self.fasync.is_empty() {
            self.sock.stack().set_async(self.sock.id(), false);
        }
    }

    fn bytes_readable(&self) -> Result<i32, Errno> {
        Ok(self.sock.bytes_readable().unwrap_or(0) as i32)
    }

    fn bind(&self, task: &Task, _: &FileDescription, addr: u64, len: u64) -> Result<u64, Errno> {
        let s = self;
        let a = read_sockaddr(task, addr, len, s.domain)?;
        if s.ty == SocketType::Stream {
            super::landlock::check_tcp(task, abi::landlock::net::BIND_TCP, a.port())?;
        }
        may_bind_port(task, a.port())?;
        s.sock.bind(a).map(|()| 0)
    }

    fn listen(&self, _task: &Task, _: &FileDescription, backlog: i32) -> Result<u64, Errno> {
        let s = self;
        if s.ty != SocketType::Stream {
            return Err(Errno::EOPNOTSUPP);
        }
        s.sock.listen(backlog)?;
        s.listening
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(0)
    }

    fn connect(
        &self,
        task: &Task,
        file: &FileDescription,
        addr: u64,
        len: u64,
    ) -> Result<u64, Errno> {
        let s = self;
        // AF_UNSPEC dissolves a datagram socket's association.
        if len >= 2 {
            let fam: u16 = task.mm().read_obj(addr)?;
            if fam == 0 && s.ty == SocketType::Datagram {
                return s.sock.disconnect().map(|()| 0);
            }
        }
        let a = read_sockaddr(task, addr, len, s.domain)?;
        if s.ty == SocketType::Stream {
            super::landlock::check_tcp(task, abi::landlock::net::CONNECT_TCP, a.port())?;
        }
        if matches!(task.kernel.net.mode(), netstack::Mode::Egress) {
            // For the egress log: who is connecting.
            s.sock
                .set_origin(task.pid(), &String::from_utf8_lossy(&task.comm));
        }
        let pending = match s.sock.connect(a) {
            Ok(()) => return Ok(0),
            // A connect already under way (one that timed out or was
            // interrupted) is waited for again (`__inet_stream_connect`).
            Err(e @ (Errno::EINPROGRESS | Errno::EALREADY))
                if !super::socket::nonblocking(file, 0) =>
            {
                e
            }
            Err(e) => return Err(e),
        };
        // A blocking connect waits for the handshake, then reports its
        // result; past `SO_SNDTIMEO` it gives up with what `connect` said
        // first (`EINPROGRESS`, or `EALREADY`), the handshake going on.
        let blk = task.blocker();
        blk.block_until(
            std::slice::from_ref(&s.waiters),
            false,
            super::socket::deadline(file, false),
            || {
                let r = s.sock.readiness()?;
                Ok((r.writable || r.error || r.hup).then_some(()))
            },
            || {
                s.sock
                    .readiness()
                    .is_ok_and(|r| r.writable || r.error || r.hup)
            },
        )
        .map_err(|e| if e == Errno::EAGAIN { pending } else { e })?;
        match s.sock.take_error()? {
            Some(e) => Err(e),
            None => match s.sock.connect(a) {
                Ok(()) | Err(Errno::EISCONN) => Ok(0),
                Err(e) => Err(e),
            },
        }
    }

    fn accept(
        &self,
        task: &mut Task,
        file: &FileDescription,
        addr: u64,
        len_addr: u64,
        flags: u64,
    ) -> Result<u64, Errno> {
        if flags & !(SOCK_NONBLOCK | SOCK_CLOEXEC) != 0 {
            return Err(Errno::EINVAL);
        }
        let s = self;
        if s.ty != SocketType::Stream {
            return Err(Errno::EOPNOTSUPP);
        }
        if !s.is_listening() {
            return Err(Errno::EINVAL);
        }
        let blk = task.blocker();
        let (conn, peer) = blk.block_until(
            std::slice::from_ref(&s.waiters),
            super::socket::nonblocking(file, 0),
            super::socket::deadline(file, true),
            || match s.sock.accept() {
                Ok(c) => Ok(Some(c)),
                Err(Errno::EAGAIN) => Ok(None),
                Err(e) => Err(e),
            },
            || s.sock.readiness().is_ok_and(|r| r.readable),
        )?;
        let domain = s.domain;
        let mut conn = InetSocket::new(
            conn,
            domain,
            SocketType::Stream,
            &crate::socket::state(&task.kernel).inet_queues,
        );
        // An accepted socket inherits the listener's timeouts and the control
        // messages it asked for (`sk_clone_lock` copies the whole `struct
        // sock`).
        conn.timeouts = s.timeouts.clone();
        conn.cmsgs = s.cmsgs.clone();
        let fd = install(task, conn, flags)?;
        if addr != 0 {
            write_sockaddr(task, addr, len_addr, peer, domain)?;
        }
        Ok(fd)
    }

    fn getsockname(
        &self,
        task: &Task,
        _: &FileDescription,
        addr: u64,
        len: u64,
    ) -> Result<u64, Errno> {
        let s = self;
        let a = s
            .sock
            .local_addr()
            .unwrap_or_else(|_| unspecified(s.domain));
        write_sockaddr(task, addr, len, a, s.domain).map(|()| 0)
    }

    fn getpeername(
        &self,
        task: &Task,
        _: &FileDescription,
        addr: u64,
        len: u64,
    ) -> Result<u64, Errno> {
        let s = self;
        let a = s.sock.peer_addr()?;
        write_sockaddr(task, addr, len, a, s.domain).map(|()| 0)
    }

    fn shutdown(&self, _task: &Task, _: &FileDescription, how: u64) -> Result<u64, Errno> {
        let how = match how as i32 {
            0 => Shutdown::Read,
            1 => Shutdown::Write,
            2 => Shutdown::Both,
            _ => return Err(Errno::EINVAL),
        };
        self.sock.shutdown(how).map(|()| 0)
    }

    fn write(
        &self,
        task: &Task,
        file: &FileDescription,
        data: &GuestBufs<'_>,
        flags: u64,
    ) -> Result<u64, Errno> {
        send(task, file, data, flags, None)
    }

    /// `read(2)` on an Internet socket.
    fn read(&self, task: &Task, file: &FileDescription, dst: &GuestBufs<'_>) -> Result<u64, Errno> {
        recv(task, file, dst, 0).map(|g| g.len as u64)
    }

    fn sendto(&self, task: &Task, file: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno> {
        let s = self;
        let slices = task.mm().slices(a[1], a[2], false)?;
        let to = if a[4] != 0 {
            Some(read_sockaddr(task, a[4], a[5], s.domain)?)
        } else {
            None
        };
        send(task, file, &GuestBufs::new(&slices), a[3], to)
    }

    fn recvfrom(&self, task: &Task, file: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno> {
        let s = self;
        let slices = task.mm().slices(a[1], a[2], true)?;
        if a[3] & MSG_ERRQUEUE != 0 {
            // The error's data and destination, without its message.
            let e = s.sock.recv_error()?;
            let n = GuestBufs::new(&slices).write_at(0, &e.payload);
            if a[4] != 0 {
                write_sockaddr(task, a[4], a[5], e.dest, s.domain)?;
            }
            return Ok(if a[3] & MSG_TRUNC != 0 {
                e.payload.len()
            } else {
                n
            } as u64);
        }
        let Got {
            len: n, full, from, ..
        } = recv(task, file, &GuestBufs::new(&slices), a[3])?;
        if let (Some(f), true) = (from, a[4] != 0) {
            write_sockaddr(task, a[4], a[5], f, s.domain)?;
        }
        Ok(if a[3] & MSG_TRUNC != 0 { full } else { n } as u64)
    }

    fn sendmsg(
        &self,
        task: &Task,
        file: &FileDescription,
        msg: u64,
        flags: u64,
    ) -> Result<u64, Errno> {
        let s = self;
        let w: [u64; 7] = task.mm().read_obj(msg)?;
        let slices = super::fs::iovecs_pub(task, w[2], w[3], false)?;
        let to = if w[0] != 0 && w[1] as u32 != 0 {
            Some(read_sockaddr(task, w[0], u64::from(w[1] as u32), s.domain)?)
        } else {
            None
        };
        send(task, file, &GuestBufs::new(&slices), flags, to)
    }

    fn recvmsg(
        &self,
        task: &Task,
        file: &FileDescription,
        msg: u64,
        flags: u64,
    ) -> Result<u64, Errno> {
        let s = self;
        let w: [u64; 7] = task.mm().read_obj(msg)?;
        let slices = super::fs::iovecs_pub(task, w[2], w[3], true)?;
        if flags & MSG_ERRQUEUE != 0 {
            return recv_error(task, s, msg, &w, &GuestBufs::new(&slices), flags);
        }
        let got = recv(task, file, &GuestBufs::new(&slices), flags)?;
        let Got {
            len: n, full, from, ..
        } = got;
        let mut out_flags = 0u32;
        if full > n {
            out_flags |= MSG_TRUNC as u32;
        }
        let mut msgs = Vec::new();
        if s.cmsgs.any() {
            // What the netstack knows of the datagram: where it was sent (on
            // its one interface, loopback), the TTL (hop limit) and TOS
            // (traffic class) its header carried and when it arrived. TCP's
            // timestamp is when the guest read the bytes.
            let time = if s.cmsgs.timestamp() {
                Some(arrival_time(task, s, got.arrived)?)
            } else {
                None
            };
            let arrival = cmsg::Arrival {
                time,
                dst: got.local.map(|a| (a, cmsg::LOOPBACK_IFINDEX)),
                hop_limit: got.hop_limit,
                tos: got.tos,
            };
            msgs = cmsg::messages(
                &s.cmsgs,
                &arrival,
                s.ty == SocketType::Datagram,
                s.domain == Domain::Inet6,
            );
        }
        out_flags |= put_control(task, msg, w[4], w[5], &msgs)?;
        task.mm().write_obj(msg + 48, &out_flags)?;
        if let (Some(f), true) = (from, w[0] != 0) {
            write_sockaddr(task, w[0], msg + 8, f, s.domain)?;
        }
        Ok(if flags & MSG_TRUNC != 0 { full } else { n } as u64)
    }

    fn setsockopt(&self, task: &Task, _: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno> {
        let s = self;
        let (level, name) = (a[1] as i32, a[2] as i32);
        if level == SOL_SOCKET {
            if let Some(r) = super::socket::set_timeout(task, &s.timeouts, name, a[3], a[4]) {
                return r;
            }
        }
        if let Some(r) = set_ip_option(task, s, level, name, a[3], a[4]) {
            return r;
        }
        if level == SOL_SOCKET && matches!(name, cmsg::SO_TIMESTAMPING | cmsg::SO_TIMESTAMPING_NEW)
        {
            // An int of flags, or a `struct so_timestamping` whose first
            // field it is (`sk_setsockopt`).
            if (a[4] as u32 as i32) < 4 {
                return Err(Errno::EINVAL);
            }
            let flags: u32 = task.mm().read_obj(a[3])?;
            let tcp_unconnected =
                s.ty == SocketType::Stream && (s.is_listening() || s.sock.peer_addr().is_err());
            s.cmsgs.set_timestamping(name, flags, tcp_unconnected)?;
            return Ok(0);
        }
        if cmsg::RecvCmsgs::is_option(level, name) {
            let on = cmsg_flag_arg(task, level, a[3], a[4])?;
            // The IPv6 ones only on AF_INET6 sockets (`ipv6_setsockopt`
            // refuses an AF_INET socket with ENOPROTOOPT).
            if level == cmsg::IPPROTO_IPV6 && s.domain != Domain::Inet6 {
                return Err(Errno::ENOPROTOOPT);
            }
            s.cmsgs.set(level, name, on);
            return Ok(0);
        }
        if a[4] < 4 {
            return Err(Errno::EINVAL);
        }
        let v: i32 = task.mm().read_obj(a[3])?;
        let opt = match (level, name) {
            (SOL_SOCKET, 2) => SockOpt::ReuseAddr(v != 0),
            (SOL_SOCKET, 15) => SockOpt::ReusePort(v != 0),
            (SOL_SOCKET, 9) => SockOpt::KeepAlive(v != 0),
            (SOL_SOCKET, 8) => SockOpt::RcvBuf(v.max(0) as usize),
            (SOL_SOCKET, 7) => SockOpt::SndBuf(v.max(0) as usize),
            (SOL_SOCKET, 13) => {
                // A whole `struct linger` (`sk_setsockopt`).
                if a[4] < 8 {
                    return Err(Errno::EINVAL);
                }
                let l: [i32; 2] = task.mm().read_obj(a[3])?;
                SockOpt::Linger(
                    (l[0] != 0).then(|| std::time::Duration::from_secs(l[1].max(0) as u64)),
                )
            }
            (IPPROTO_TCP, 1) => SockOpt::NoDelay(v != 0),
            (IPPROTO_TCP, 4) => {
                if v < 1 {
                    return Err(Errno::EINVAL);
                }
                SockOpt::KeepIdle(std::time::Duration::from_secs(v as u64))
            }
            (IPPROTO_TCP, 5) => {
                if v < 1 {
                    return Err(Errno::EINVAL);
                }
                SockOpt::KeepIntvl(std::time::Duration::from_secs(v as u64))
            }
            (IPPROTO_TCP, 6) => SockOpt::KeepCnt(if (1..=127).contains(&v) {
                v as u8
            } else {
                return Err(Errno::EINVAL);
            }),
            (IPPROTO_IPV6, 26) => SockOpt::V6Only(v != 0),
            (SOL_SOCKET, 6) => {
                s.broadcast
                    .store(v != 0, std::sync::atomic::Ordering::Relaxed);
                return Ok(0);
            }
            // Accepted without effect: priorities, IP_RECVORIGDSTADDR,
            // IPV6_MULTICAST_HOPS and friends.
            (SOL_SOCKET, 10 | 12 | 16 | 29 | 30)
            | (IPPROTO_TCP, 2 | 3 | 9 | 12 | 18 | 23)
            | (IPPROTO_IP, _)
            | (IPPROTO_IPV6, _) => return Ok(0),
            _ => return Err(Errno::ENOPROTOOPT),
        };
        s.sock.set_option(opt).map(|()| 0)
    }

    fn getsockopt(&self, task: &Task, _: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno> {
        let s = self;
        let (level, name) = (a[1] as i32, a[2] as i32);
        let len: u32 = task.mm().read_obj(a[4])?;
        if (len as i32) < 0 {
            return Err(Errno::EINVAL);
        }
        let b = |v: bool| i32::from(v);
        if level == cmsg::IPPROTO_IPV6 && s.domain != Domain::Inet6 {
            return Err(Errno::EOPNOTSUPP);
        }
        if (level, name) == (IPPROTO_IP, cmsg::IP_PKTOPTIONS) {
            // Control messages in the option's buffer, cut short as put_cmsg
            // cuts them; the length is what they took.
            if s.ty != SocketType::Stream {
                return Err(Errno::ENOPROTOOPT);
            }
            let msgs = cmsg::pkt_options(&s.cmsgs, &s.sock.pkt_options()?);
            let (bytes, _) = cmsg::encode(&msgs, (len as usize).min(1 << 16));
            task.mm().copy_out(a[3], &bytes)?;
            task.mm().write_obj(a[4], &(bytes.len() as u32))?;
            return Ok(0);
        }
        let val: Vec<u8> = match (level, name) {
            (IPPROTO_IP, IP_TTL | IP_TOS | IP_MULTICAST_TTL | cmsg::IP_RECVERR)
            | (IPPROTO_IPV6, IPV6_UNICAST_HOPS | cmsg::IPV6_TCLASS | cmsg::IPV6_RECVERR) => {
                let which = match name {
                    IP_TTL => SockOptName::Ttl,
                    IP_TOS => SockOptName::Tos,
                    IP_MULTICAST_TTL => SockOptName::MulticastTtl,
                    IPV6_UNICAST_HOPS => SockOptName::HopLimit,
                    cmsg::IPV6_TCLASS => SockOptName::TrafficClass,
                    _ => SockOptName::RecvErr,
                };
                let v = match s.sock.option(which)? {
                    SockOpt::Ttl(v)
                    | SockOpt::Tos(v)
                    | SockOpt::MulticastTtl(v)
                    | SockOpt::HopLimit(v)
                    | SockOpt::TrafficClass(v) => i32::from(v),
                    SockOpt::RecvErr(v) => b(v),
                    _ => 0,
                };
                v.to_ne_bytes().to_vec()
            }
            (SOL_SOCKET, cmsg::SO_TIMESTAMPING | cmsg::SO_TIMESTAMPING_NEW) => {
                // struct so_timestamping: the flags, and no PTP clock bound.
                let mut v = s.cmsgs.timestamping(name).to_ne_bytes().to_vec();
                v.extend_from_slice(&0i32.to_ne_bytes());
                v
            }
            (l, n) if cmsg::RecvCmsgs::is_option(l, n) => {
                let on = s.cmsgs.get(l, n).unwrap_or(false);
                b(on).to_ne_bytes().to_vec()
            }
            (SOL_SOCKET, SO_RCVTIMEO | SO_SNDTIMEO | SO_RCVTIMEO_NEW | SO_SNDTIMEO_NEW) => {
                super::socket::get_timeout(&s.timeouts, name).unwrap_or_default()
            }
            (SOL_SOCKET, 3) => (if s.ty == SocketType::Stream { 1i32 } else { 2 })
                .to_ne_bytes()
                .to_vec(),
            (SOL_SOCKET, 4) => s
                .sock
                .take_error()?
                .map_or(0, |e| e.0)
                .to_ne_bytes()
                .to_vec(),
            (SOL_SOCKET, 39) => i32::from(if s.domain == Domain::Inet { 2u16 } else { 10 })
                .to_ne_bytes()
                .to_vec(),
            (SOL_SOCKET, 38) => (if s.ty == SocketType::Stream { 6i32 } else { 17 })
                .to_ne_bytes()
                .to_vec(),
            (SOL_SOCKET, 30) => b(s.is_listening()).to_ne_bytes().to_vec(),
            (SOL_SOCKET, 6) => b(s.broadcast.load(std::sync::atomic::Ordering::Relaxed))
                .to_ne_bytes()
                .to_vec(),
            (SOL_SOCKET, 13) => {
                let v = match s.sock.option(SockOptName::Linger)? {
                    SockOpt::Linger(Some(d)) => [1i32, d.as_secs() as i32],
                    _ => [0, 0],
                };
                [v[0].to_ne_bytes(), v[1].to_ne_bytes()].concat()
            }
            // An AF_INET UDP socket hands levels other than its own to
            // `ip_getsockopt`, which says EOPNOTSUPP (`TCP_NODELAY` on UDP).
            (lvl, _)
                if s.ty == SocketType::Datagram
                    && s.domain == Domain::Inet
                    && !matches!(lvl, SOL_SOCKET | IPPROTO_IP | IPPROTO_UDP) =>
            {
                return Err(Errno::EOPNOTSUPP)
            }
            (lvl, nm) => {
                let which = match (lvl, nm) {
                    (SOL_SOCKET, 2) => SockOptName::ReuseAddr,
                    (SOL_SOCKET, 15) => SockOptName::ReusePort,
                    (SOL_SOCKET, 9) => SockOptName::KeepAlive,
                    (SOL_SOCKET, 8) => SockOptName::RcvBuf,
                    (SOL_SOCKET, 7) => SockOptName::SndBuf,
                    (IPPROTO_TCP, 1) => SockOptName::NoDelay,
                    (IPPROTO_TCP, 4) => SockOptName::KeepIdle,
                    (IPPROTO_TCP, 5) => SockOptName::KeepIntvl,
                    (IPPROTO_TCP, 6) => SockOptName::KeepCnt,
                    (IPPROTO_IPV6, 26) => SockOptName::V6Only,
                    _ => return Err(Errno::ENOPROTOOPT),
                };
                let v: i32 = match s.sock.option(which)? {
                    SockOpt::ReuseAddr(x)
                    | SockOpt::ReusePort(x)
                    | SockOpt::KeepAlive(x)
                    | SockOpt::NoDelay(x)
                    | SockOpt::V6Only(x) => b(x),
                    SockOpt::RcvBuf(n) | SockOpt::SndBuf(n) => n.min(i32::MAX as usize) as i32,
                    SockOpt::KeepIdle(d) | SockOpt::KeepIntvl(d) => d.as_secs() as i32,
                    SockOpt::KeepCnt(n) => i32::from(n),
                    _ => 0,
                };
                v.to_ne_bytes().to_vec()
            }
        };
        // An IP-level int in 0..=255 read into less than an int comes as one
        // byte (`do_ip_getsockopt`).
        let n = if level == IPPROTO_IP
            && (1..4).contains(&len)
            && val.len() == 4
            && val[1..] == [0, 0, 0]
        {
            1
        } else {
            val.len().min(len as usize)
        };
        task.mm().copy_out(a[3], &val[..n])?;
        task.mm().write_obj(a[4], &(n as u32))?;
        Ok(0)
    }
}
