//! The socket calls for `AF_INET`/`AF_INET6` descriptors under
//! `--network host`: each is carried out on the Sentry's host socket, so
//! addresses, errors and options are the host kernel's own (Linux's). The
//! Sentry keeps what the host must not see: the guest's memory (copied
//! through bounded buffers), blocking (the event bus, so signals interrupt
//! it), `SIGPIPE`, and which options reach the host at all.

use std::os::fd::BorrowedFd;

use abi::Errno;
use netstack::{Domain, SocketType};

use crate::host::socket as host_sys;
use crate::kernel::task::Task;
use crate::mm::guestio::{ByteSource, GuestBufs};
use crate::socket::cmsg;
use crate::socket::host_inet::HostInetSocket;
use crate::socket::{Socket, SocketFile};
use crate::vfs::file::{copy_to_slices, FileDescription};

const SOCK_NONBLOCK: u64 = 0o4000;
const SOCK_CLOEXEC: u64 = 0o2000000;
const MSG_OOB: u64 = 1;
const MSG_PEEK: u64 = 2;
const MSG_DONTROUTE: u64 = 4;
const MSG_TRUNC: u64 = 0x20;
const MSG_EOR: u64 = 0x80;
const MSG_WAITALL: u64 = 0x100;
const MSG_CONFIRM: u64 = 0x800;
const MSG_MORE: u64 = 0x8000;

/// Guest send flags passed on to the host; the Sentry adds `MSG_DONTWAIT`
/// and `MSG_NOSIGNAL` itself (it does the waiting and raises `SIGPIPE`).
const SEND_FLAGS: u64 = MSG_OOB | MSG_DONTROUTE | MSG_EOR | MSG_CONFIRM | MSG_MORE;
/// Guest receive flags passed on to the host (`MSG_WAITALL` is the Sentry's).
const RECV_FLAGS: u64 = MSG_OOB | MSG_PEEK | MSG_TRUNC;

/// Most bytes moved by one host receive: a short read is Linux's right for
/// a stream, and no datagram is larger; it bounds the Sentry's buffer
/// whatever length the guest passes.
const RECV_CHUNK: usize = 256 << 10;
/// Largest `sockaddr` a guest may pass (`sizeof(struct sockaddr_storage)`).
const ADDR_MAX: u64 = 128;
/// Largest socket option value copied either way (`struct tcp_info` is
/// about 240 bytes).
const OPT_MAX: usize = 256;

fn err(e: std::io::Error) -> Errno {
    e.into()
}

/// `socket(AF_INET/AF_INET6, ...)` as a host socket.
pub fn socket(task: &mut Task, domain: Domain, ty: SocketType, flags: u64) -> Result<u64, Errno> {
    let net = crate::socket::state(&task.kernel)
        .host_net
        .clone()
        .ok_or(Errno::EAFNOSUPPORT)?;
    let s = HostInetSocket::new(&net, domain, ty)?;
    install(task, s, flags)
}

fn install(task: &mut Task, s: HostInetSocket, flags: u64) -> Result<u64, Errno> {
    super::inet::install_socket(task, SocketFile::kind(s), flags)
}

/// The guest's `sockaddr` bytes, for the host kernel to judge.
fn read_addr(task: &Task, addr: u64, len: u64) -> Result<Vec<u8>, Errno> {
    let len = len as u32 as i32;
    if !(0..=ADDR_MAX as i32).contains(&len) {
        return Err(Errno::EINVAL);
    }
    let mut raw = vec![0u8; len as usize];
    task.mm().copy_in(addr, &mut raw)?;
    Ok(raw)
}

/// Writes an address the host reported to the guest's `addr`/`*len_addr`,
/// truncated to the guest's room, with the full length stored (as Linux).
fn write_addr(task: &Task, addr: u64, len_addr: u64, raw: &[u8]) -> Result<(), Errno> {
    if addr == 0 {
        return Ok(());
    }
    let have: u32 = task.mm().read_obj(len_addr)?;
    if (have as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    let n = raw.len().min(have as usize);
    task.mm().copy_out(addr, &raw[..n])?;
    task.mm().write_obj(len_addr, &(raw.len() as u32))
}

/// `POLLIN`/`POLLOUT` as the host (and guest) spell them.
const POLLIN: i16 = libc::POLLIN;
const POLLOUT: i16 = libc::POLLOUT;

fn so_error(fd: BorrowedFd<'_>) -> Result<i32, Errno> {
    let v = host_sys::get_opt(fd, libc::SOL_SOCKET, libc::SO_ERROR, 4).map_err(err)?;
    Ok(v.get(..4)
        .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]])))
}

pub fn name(
    task: &Task,
    s: &HostInetSocket,
    addr: u64,
    len: u64,
    peer: bool,
) -> Result<u64, Errno> {
    let raw = host_sys::name(s.fd(), peer).map_err(err)?;
    write_addr(task, addr, len, &raw).map(|()| 0)
}

/// Sends `data` (to `to`, raw `sockaddr` bytes, if given); a stream send
/// waits until all of it is queued, unless a signal or `EAGAIN` comes
/// after partial progress (Linux's `tcp_sendmsg`), and is staged
/// [`crate::mm::guestio::IO_CHUNK`] bytes at a time; a datagram goes whole, so one above
/// [`crate::mm::guestio::MAX_INET_DATAGRAM`] is `EMSGSIZE` (as the host would answer) before
/// it is copied.
pub fn send(
    task: &Task,
    file: &FileDescription,
    s: &HostInetSocket,
    data: &GuestBufs<'_>,
    flags: u64,
    to: Option<&[u8]>,
) -> Result<u64, Errno> {
    let host_flags = (flags & SEND_FLAGS) as i32 | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
    let stream = s.ty != SocketType::Datagram;
    let piece = crate::mm::guestio::inet_send_piece(stream, data.len())?;
    super::socket::send_loop(
        task,
        file,
        flags,
        data,
        piece,
        stream,
        std::slice::from_ref(&s.waiters),
        |chunk| match host_sys::send_to(s.fd(), chunk, host_flags, to).map_err(err) {
            Ok(n) => Ok(Some(n)),
            Err(Errno::EAGAIN) => Ok(None),
            Err(e) => Err(e),
        },
        || s.ready(POLLOUT),
    )
}

/// What [`recv`] got: the bytes, the call's result (a datagram's full
/// size under `MSG_TRUNC`), the sender and `msg_flags`.
pub struct Got {
    pub data: Vec<u8>,
    pub result: usize,
    pub from: Vec<u8>,
    pub flags: i32,
    /// the host's control messages that passed the checks
    pub control: Vec<cmsg::Cmsg>,
}

/// Receives up to `max` bytes.
pub fn recv(
    task: &Task,
    file: &FileDescription,
    s: &HostInetSocket,
    max: usize,
    flags: u64,
    control: bool,
) -> Result<Got, Errno> {
    let host_flags = (flags & RECV_FLAGS) as i32 | libc::MSG_DONTWAIT;
    let blk = task.blocker();
    let mut buf = vec![0u8; max.min(RECV_CHUNK)];
    // One deadline for the whole call, MSG_WAITALL's further waits too.
    let until = super::socket::deadline(file, true);
    let first = blk.block_until(
        std::slice::from_ref(&s.waiters),
        super::socket::nonblocking(file, flags),
        until,
        || match host_sys::recv_msg(s.fd(), &mut buf, host_flags, control).map_err(err) {
            Ok(r) => Ok(Some(r)),
            Err(Errno::EAGAIN) => Ok(None),
            Err(e) => Err(e),
        },
        || s.ready(POLLIN),
    )?;
    let mut len = first.len.min(buf.len());
    let waitall = flags & (MSG_WAITALL | MSG_PEEK | MSG_TRUNC) == MSG_WAITALL;
    if waitall && s.ty == SocketType::Stream && !super::socket::nonblocking(file, flags) {
        // MSG_WAITALL: keep reading until the buffer is full, EOF, an error
        // or a signal (which ends it with what arrived).
        while len < buf.len() && first.len > 0 {
            let more = blk.block_until(
                std::slice::from_ref(&s.waiters),
                false,
                until,
                || match host_sys::recv_from(s.fd(), &mut buf[len..], libc::MSG_DONTWAIT)
                    .map_err(err)
                {
                    Ok(r) => Ok(Some(r.len)),
                    Err(Errno::EAGAIN) => Ok(None),
                    Err(e) => Err(e),
                },
                || s.ready(POLLIN),
            );
            match more {
                Ok(0) | Err(_) => break,
                Ok(n) => len += n,
            }
        }
    }
    let stream = s.ty == SocketType::Stream;
    let (data, result) = if stream && flags & MSG_TRUNC != 0 {
        // A stream's MSG_TRUNC discards the bytes: none reach the guest.
        (Vec::new(), first.len)
    } else if stream {
        buf.truncate(len);
        (buf, len)
    } else {
        // A datagram: the call returns its full size under MSG_TRUNC.
        buf.truncate(len);
        (buf, first.len)
    };
    Ok(Got {
        data,
        result,
        from: first.from,
        flags: first.flags,
        // Never the host's bytes: each message checked, then rebuilt.
        control: cmsg::parse_host(&first.control),
    })
}

/// What the guest may do with a socket option: hand it to the host, or
/// have it accepted without effect (as the netstack does), or neither.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OptRule {
    Host,
    Ignore,
    Refuse,
}

const SOL_SOCKET: i32 = 1;
const IPPROTO_IP: i32 = 0;
const IPPROTO_TCP: i32 = 6;
const IPPROTO_UDP: i32 = 17;
const IPPROTO_IPV6: i32 = 41;

/// The options that reach the host: an allow-list of plain values. What
/// carries a pointer (`SO_ATTACH_FILTER`, `SO_ATTACH_BPF`) or acts beyond
/// the socket (`SO_BINDTODEVICE`, `SO_MARK`) is refused with `ENOPROTOOPT`;
/// the options whose results come back as control messages are allowed
/// only for the messages `cmsg::parse_host` checks and rebuilds; other
/// IP-level options (`IP_TRANSPARENT`, `IP_RECVERR`, `IP_RECVOPTS`,
/// `IPV6_RECVTCLASS`, whose messages or error queue the Sentry does not
/// deliver from the host) are accepted without effect.
fn opt_rule(level: i32, name: i32) -> OptRule {
    match (level, name) {
        // REUSEADDR TYPE ERROR DONTROUTE BROADCAST SNDBUF RCVBUF KEEPALIVE
        // OOBINLINE PRIORITY LINGER REUSEPORT RCVLOWAT SNDLOWAT RCVTIMEO
        // SNDTIMEO ACCEPTCONN PROTOCOL DOMAIN RCVTIMEO_NEW SNDTIMEO_NEW
        (SOL_SOCKET, 2..=10 | 12 | 13 | 15 | 18..=21 | 30 | 38 | 39 | 66 | 67) => OptRule::Host,
        // TIMESTAMP TIMESTAMPNS TIMESTAMP_NEW TIMESTAMPNS_NEW: their
        // messages come back from the host checked (`cmsg::parse_host`)
        (SOL_SOCKET, 29 | 35 | 63 | 64) => OptRule::Host,
        // PASSCRED
        (SOL_SOCKET, 16) => OptRule::Ignore,
        // NODELAY MAXSEG CORK KEEPIDLE KEEPINTVL KEEPCNT SYNCNT LINGER2
        // DEFER_ACCEPT WINDOW_CLAMP INFO QUICKACK USER_TIMEOUT FASTOPEN
        // NOTSENT_LOWAT
        (IPPROTO_TCP, 1..=12 | 18 | 23 | 25) => OptRule::Host,
        // UDP_CORK
        (IPPROTO_UDP, 1) => OptRule::Host,
        // TOS TTL MTU_DISCOVER MTU FREEBIND BIND_ADDRESS_NO_PORT and the
        // multicast options
        (IPPROTO_IP, 1 | 2 | 10 | 14 | 15 | 24 | 32..=36) => OptRule::Host,
        // PKTINFO RECVTTL RECVTOS: messages checked as the timestamps
        (IPPROTO_IP, 8 | 12 | 13) => OptRule::Host,
        // UNICAST_HOPS, multicast, MTU_DISCOVER, V6ONLY, TCLASS
        (IPPROTO_IPV6, 16..=21 | 23 | 26 | 67) => OptRule::Host,
        // RECVPKTINFO RECVHOPLIMIT
        (IPPROTO_IPV6, 49 | 51) => OptRule::Host,
        (IPPROTO_IP | IPPROTO_IPV6, _) => OptRule::Ignore,
        _ => OptRule::Refuse,
    }
}

impl Socket for HostInetSocket {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn timeouts(&self) -> &crate::socket::SockTimeouts {
        &self.timeouts
    }

    // The host's poll bits have Linux's values, which the guest's are.
    fn poll(&self, events: i16) -> i16 {
        HostInetSocket::poll(self, events)
    }

    fn wait_queues(&self, out: &mut Vec<crate::kernel::wait::WaitQueue>) {
        out.push(self.waiters.clone());
    }

    fn generation(&self) -> u64 {
        HostInetSocket::generation(self)
    }

    fn bytes_readable(&self) -> Result<i32, Errno> {
        HostInetSocket::bytes_readable(self)
    }

    fn bind(
        &self,
        task: &Task,
        _file: &FileDescription,
        addr: u64,
        len: u64,
    ) -> Result<u64, Errno> {
        let s = self;
        let raw = read_addr(task, addr, len)?;
        // The port of an AF_INET or AF_INET6 address, in network order.
        let family = raw
            .get(..2)
            .map(|f| i32::from(u16::from_ne_bytes([f[0], f[1]])));
        if raw.len() >= 4 && matches!(family, Some(libc::AF_INET | libc::AF_INET6)) {
            let port = u16::from_be_bytes([raw[2], raw[3]]);
            if s.ty == SocketType::Stream {
                super::landlock::check_tcp(task, abi::landlock::net::BIND_TCP, port)?;
            }
            super::inet::may_bind_port(task, port)?;
        }
        host_sys::bind(s.fd(), &raw).map_err(err).map(|()| 0)
    }

    fn listen(&self, _task: &Task, _file: &FileDescription, backlog: i32) -> Result<u64, Errno> {
        let s = self;
        host_sys::listen(s.fd(), backlog).map_err(err).map(|()| 0)
    }

    fn connect(
        &self,
        task: &Task,
        file: &FileDescription,
        addr: u64,
        len: u64,
    ) -> Result<u64, Errno> {
        let s = self;
        let raw = read_addr(task, addr, len)?;
        let family = raw
            .get(..2)
            .map(|f| i32::from(u16::from_ne_bytes([f[0], f[1]])));
        if s.ty == SocketType::Stream
            && raw.len() >= 4
            && matches!(family, Some(libc::AF_INET | libc::AF_INET6))
        {
            let port = u16::from_be_bytes([raw[2], raw[3]]);
            super::landlock::check_tcp(task, abi::landlock::net::CONNECT_TCP, port)?;
        }
        let pending = match host_sys::connect(s.fd(), &raw).map_err(err) {
            Ok(()) => return Ok(0),
            // A blocking connect waits for the handshake; after a signal
            // restarted it, the host says EALREADY and the wait goes on
            // (Linux's __inet_stream_connect).
            Err(e @ (Errno::EINPROGRESS | Errno::EALREADY))
                if !super::socket::nonblocking(file, 0) =>
            {
                e
            }
            Err(e) => return Err(e),
        };
        // Past `SO_SNDTIMEO` the wait ends with what the host said first
        // (`EINPROGRESS`, or `EALREADY` for a connect already under way), the
        // handshake going on (`__inet_stream_connect`).
        task.blocker()
            .block_until(
                std::slice::from_ref(&s.waiters),
                false,
                super::socket::deadline(file, false),
                || Ok(s.ready(POLLOUT).then_some(())),
                || s.ready(POLLOUT),
            )
            .map_err(|e| if e == Errno::EAGAIN { pending } else { e })?;
        let e = so_error(s.fd())?;
        if e != 0 {
            return Err(Errno(e));
        }
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
        let s = self;
        if flags & !(SOCK_NONBLOCK | SOCK_CLOEXEC) != 0 {
            return Err(Errno::EINVAL);
        }
        let (conn, peer) = task.blocker().block_until(
            std::slice::from_ref(&s.waiters),
            super::socket::nonblocking(file, 0),
            super::socket::deadline(file, true),
            || match s.accept() {
                Ok(c) => Ok(Some(c)),
                Err(Errno::EAGAIN) => Ok(None),
                Err(e) => Err(e),
            },
            || s.ready(POLLIN),
        )?;
        let fd = install(task, conn, flags)?;
        write_addr(task, addr, len_addr, &peer)?;
        Ok(fd)
    }

    fn getsockname(
        &self,
        task: &Task,
        _: &FileDescription,
        addr: u64,
        len: u64,
    ) -> Result<u64, Errno> {
        name(task, self, addr, len, false)
    }

    fn getpeername(
        &self,
        task: &Task,
        _: &FileDescription,
        addr: u64,
        len: u64,
    ) -> Result<u64, Errno> {
        name(task, self, addr, len, true)
    }

    fn shutdown(&self, _task: &Task, _file: &FileDescription, how: u64) -> Result<u64, Errno> {
        let s = self;
        host_sys::shutdown(s.fd(), how as i32)
            .map_err(err)
            .map(|()| 0)
    }

    fn write(
        &self,
        task: &Task,
        file: &FileDescription,
        data: &GuestBufs<'_>,
        flags: u64,
    ) -> Result<u64, Errno> {
        send(task, file, self, data, flags, None)
    }

    /// `read(2)` on the socket.
    fn read(&self, task: &Task, file: &FileDescription, dst: &GuestBufs<'_>) -> Result<u64, Errno> {
        let s = self;
        let got = recv(task, file, s, dst.len(), 0, false)?;
        Ok(dst.write_at(0, &got.data) as u64)
    }

    fn sendto(&self, task: &Task, file: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno> {
        let s = self;
        let slices = task.mm().slices(a[1], a[2], false)?;
        let to = if a[4] != 0 {
            Some(read_addr(task, a[4], a[5])?)
        } else {
            None
        };
        send(task, file, s, &GuestBufs::new(&slices), a[3], to.as_deref())
    }

    fn recvfrom(&self, task: &Task, file: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno> {
        let s = self;
        let slices = task.mm().slices(a[1], a[2], true)?;
        let max: usize = slices.iter().map(|x| x.len()).sum();
        let got = recv(task, file, s, max, a[3], false)?;
        copy_to_slices(&slices, &got.data);
        if a[4] != 0 && !got.from.is_empty() {
            write_addr(task, a[4], a[5], &got.from)?;
        }
        Ok(got.result as u64)
    }

    fn sendmsg(
        &self,
        task: &Task,
        file: &FileDescription,
        msg: u64,
        flags: u64,
    ) -> Result<u64, Errno> {
        let s = self;
        // struct msghdr: name, namelen (u32), iov, iovlen, control, controllen, flags.
        let w: [u64; 7] = task.mm().read_obj(msg)?;
        let slices = super::fs::iovecs_pub(task, w[2], w[3], false)?;
        let to = if w[0] != 0 && w[1] as u32 != 0 {
            Some(read_addr(task, w[0], u64::from(w[1] as u32))?)
        } else {
            None
        };
        send(
            task,
            file,
            s,
            &GuestBufs::new(&slices),
            flags,
            to.as_deref(),
        )
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
        let max: usize = slices.iter().map(|x| x.len()).sum();
        let got = recv(task, file, s, max, flags, true)?;
        copy_to_slices(&slices, &got.data);
        // The host's control messages that passed the checks, laid out anew
        // for the guest's buffer; MSG_CTRUNC is the guest's buffer's, not the
        // host's.
        let ctrunc = super::inet::put_control(task, msg, w[4], w[5], &got.control)?;
        let out_flags = (got.flags & !(cmsg::MSG_CTRUNC as i32)) | ctrunc as i32;
        task.mm().write_obj(msg + 48, &out_flags)?;
        if w[0] != 0 {
            if got.from.is_empty() {
                task.mm().write_obj(msg + 8, &0u32)?;
            } else {
                write_addr(task, w[0], msg + 8, &got.from)?;
            }
        }
        Ok(got.result as u64)
    }

    fn setsockopt(&self, task: &Task, _file: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno> {
        let s = self;
        let (level, name) = (a[1] as i32, a[2] as i32);
        let len = a[4] as u32 as i32;
        if len < 0 {
            return Err(Errno::EINVAL);
        }
        match opt_rule(level, name) {
            OptRule::Refuse => return Err(Errno::ENOPROTOOPT),
            OptRule::Ignore => return Ok(0),
            OptRule::Host => {}
        }
        let mut val = vec![0u8; (len as usize).min(OPT_MAX)];
        task.mm().copy_in(a[3], &mut val)?;
        host_sys::set_opt(s.fd(), level, name, &val).map_err(err)?;
        // The host socket never blocks, so its timeouts act through the
        // Sentry's waits: keep them as the host judged and rounded them.
        if let Some(rcv) = (level == SOL_SOCKET)
            .then(|| crate::socket::timeout_option(name))
            .flatten()
        {
            let negative = val
                .get(..8)
                .and_then(|b| b.try_into().ok())
                .is_some_and(|b| i64::from_ne_bytes(b) < 0);
            if negative {
                // "Do not wait", which the host reads back as zero.
                s.timeouts.set_no_wait(rcv);
            } else {
                let opt = if rcv {
                    crate::socket::SO_RCVTIMEO
                } else {
                    crate::socket::SO_SNDTIMEO
                };
                let tv = host_sys::get_opt(s.fd(), SOL_SOCKET, opt, 16).map_err(err)?;
                s.timeouts.set_exact(rcv, &tv);
            }
        }
        Ok(0)
    }

    fn getsockopt(&self, task: &Task, _file: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno> {
        let s = self;
        let (level, name) = (a[1] as i32, a[2] as i32);
        let len: u32 = task.mm().read_obj(a[4])?;
        if (len as i32) < 0 {
            return Err(Errno::EINVAL);
        }
        if opt_rule(level, name) != OptRule::Host {
            return Err(Errno::ENOPROTOOPT);
        }
        let val =
            host_sys::get_opt(s.fd(), level, name, (len as usize).min(OPT_MAX)).map_err(err)?;
        task.mm().copy_out(a[3], &val)?;
        task.mm().write_obj(a[4], &(val.len() as u32))?;
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_that_carry_pointers_or_reach_beyond_the_socket_are_refused() {
        assert_eq!(opt_rule(SOL_SOCKET, 26), OptRule::Refuse); // SO_ATTACH_FILTER
        assert_eq!(opt_rule(SOL_SOCKET, 50), OptRule::Refuse); // SO_ATTACH_BPF
        assert_eq!(opt_rule(SOL_SOCKET, 25), OptRule::Refuse); // SO_BINDTODEVICE
        assert_eq!(opt_rule(SOL_SOCKET, 36), OptRule::Refuse); // SO_MARK
        assert_eq!(opt_rule(IPPROTO_IP, 19), OptRule::Ignore); // IP_TRANSPARENT
        assert_eq!(opt_rule(IPPROTO_IP, 11), OptRule::Ignore); // IP_RECVERR
        assert_eq!(opt_rule(IPPROTO_IP, 6), OptRule::Ignore); // IP_RECVOPTS
        assert_eq!(opt_rule(IPPROTO_IP, 8), OptRule::Host); // IP_PKTINFO
        assert_eq!(opt_rule(SOL_SOCKET, 35), OptRule::Host); // SO_TIMESTAMPNS
        assert_eq!(opt_rule(SOL_SOCKET, 2), OptRule::Host); // SO_REUSEADDR
        assert_eq!(opt_rule(SOL_SOCKET, 66), OptRule::Host); // SO_RCVTIMEO_NEW
        assert_eq!(opt_rule(IPPROTO_TCP, 1), OptRule::Host); // TCP_NODELAY
        assert_eq!(opt_rule(IPPROTO_IPV6, 26), OptRule::Host); // IPV6_V6ONLY
    }
}
