//! System calls on `AF_NETLINK` sockets (see `socket::netlink`).

use std::sync::atomic::Ordering;

use abi::Errno;

use crate::kernel::task::Task;
use crate::mm::guestio::{ByteSource, GuestBufs, Stage};
use abi::netlink::NETLINK_ROUTE;

use crate::socket::netlink::{table, Interface, NetlinkSocket};
use crate::socket::{Socket, SocketFile};
use crate::vfs::file::{copy_to_slices, FileDescription};

const AF_NETLINK: u16 = 16;
const SOCK_DGRAM: u64 = 2;
const SOCK_RAW: u64 = 3;
const SOCK_NONBLOCK: u64 = 0o4000;
const SOCK_CLOEXEC: u64 = 0o2000000;
const MSG_PEEK: u64 = 2;
const MSG_TRUNC: u64 = 0x20;
const MSG_DONTWAIT: u64 = 0x40;
/// `sizeof(struct sockaddr_nl)`.
const SOCKADDR_NL_LEN: usize = 12;

fn sock(file: &FileDescription) -> Result<&NetlinkSocket, Errno> {
    crate::socket::downcast(file).ok_or(Errno::ENOTSOCK)
}

/// `socket(AF_NETLINK, SOCK_RAW|SOCK_DGRAM, NETLINK_ROUTE)`; every other
/// netlink protocol (audit, netfilter, uevents, ...) is the host's
/// business: `EPROTONOSUPPORT`.
pub fn socket(task: &mut Task, ty: u64, proto: i32) -> Result<u64, Errno> {
    if !matches!(ty & 0xf, SOCK_RAW | SOCK_DGRAM) {
        return Err(Errno::ESOCKTNOSUPPORT);
    }
    if ty & !(0xf | SOCK_NONBLOCK | SOCK_CLOEXEC) != 0 {
        return Err(Errno::EINVAL);
    }
    if proto != NETLINK_ROUTE {
        tracing::debug!(proto, "netlink protocol refused");
        return Err(Errno::EPROTONOSUPPORT);
    }
    super::inet::install_socket(task, SocketFile::kind(NetlinkSocket::new()), ty)
}

/// Reads a `sockaddr_nl`: its `nl_pid`.
fn read_addr(task: &Task, addr: u64, len: u64) -> Result<u32, Errno> {
    if (len as usize) < SOCKADDR_NL_LEN {
        return Err(Errno::EINVAL);
    }
    let mut raw = [0u8; SOCKADDR_NL_LEN];
    task.mm().copy_in(addr, &mut raw)?;
    if u16::from_ne_bytes([raw[0], raw[1]]) != AF_NETLINK {
        return Err(Errno::EINVAL);
    }
    Ok(u32::from_ne_bytes([raw[4], raw[5], raw[6], raw[7]]))
}

/// Writes a `sockaddr_nl` for port `pid` (groups 0), with the usual
/// length in/out protocol.
fn write_addr(task: &Task, addr: u64, len_addr: u64, pid: u32) -> Result<(), Errno> {
    if addr == 0 {
        return Ok(());
    }
    let mut raw = [0u8; SOCKADDR_NL_LEN];
    raw[..2].copy_from_slice(&AF_NETLINK.to_ne_bytes());
    raw[4..8].copy_from_slice(&pid.to_ne_bytes());
    let have: u32 = task.mm().read_obj(len_addr)?;
    if (have as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    let n = SOCKADDR_NL_LEN.min(have as usize);
    task.mm().copy_out(addr, &raw[..n])?;
    task.mm().write_obj(len_addr, &(SOCKADDR_NL_LEN as u32))
}

/// Sends one datagram of requests to the kernel (`addr`, when given, must
/// name it).
pub fn send(task: &Task, file: &FileDescription, data: &GuestBufs<'_>) -> Result<u64, Errno> {
    let s = sock(file)?;
    // A netlink message is handled whole, so it is copied whole: Linux
    // refuses one above the send buffer (`netlink_sendmsg`: `len >
    // sk_sndbuf - 32` is `EMSGSIZE`), which bounds the copy.
    if data.len() > NETLINK_SNDBUF - 32 {
        return Err(Errno::EMSGSIZE);
    }
    let mut stage = Stage::new();
    s.send(stage.load(data, 0, data.len()), task.creds.uid[0])
        .map(|n| n as u64)
}

/// A netlink socket's send buffer (`net.core.wmem_default`); `SO_SNDBUF`
/// is not modelled on these sockets.
const NETLINK_SNDBUF: usize = 212_992;

/// Receives the next reply: `(bytes, full length)`, sleeping while none
/// waits unless non-blocking.
pub fn recv(
    task: &Task,
    file: &FileDescription,
    max: usize,
    flags: u64,
) -> Result<(Vec<u8>, usize), Errno> {
    let s = sock(file)?;
    let nonblock = file.nonblocking() || flags & MSG_DONTWAIT != 0;
    // `SO_RCVTIMEO` bounds the wait (`netlink_recvmsg` waits in
    // `skb_recv_datagram`, which ends with `EAGAIN` past `sk_rcvtimeo`).
    task.blocker().block_until(
        std::slice::from_ref(&s.waiters),
        nonblock,
        super::socket::deadline(file, true),
        || match s.recv(max, flags & MSG_PEEK != 0) {
            Ok(r) => Ok(Some(r)),
            Err(Errno::EAGAIN) => Ok(None),
            Err(e) => Err(e),
        },
        || s.readable(),
    )
}

const SOL_SOCKET: i32 = 1;
const SOL_NETLINK: i32 = 270;
const SO_TYPE: i32 = 3;
const SO_SNDBUF: i32 = 7;
const SO_RCVBUF: i32 = 8;
const SO_RCVBUFFORCE: i32 = 33;
const SO_PROTOCOL: i32 = 38;
const SO_DOMAIN: i32 = 39;

fn int_arg(task: &Task, ptr: u64, len: u64) -> Result<i32, Errno> {
    if len < 4 {
        return Err(Errno::EINVAL);
    }
    task.mm().read_obj(ptr)
}

const SIOCGIFNAME: u64 = 0x8910;
const SIOCGIFCONF: u64 = 0x8912;
const SIOCGIFFLAGS: u64 = 0x8913;
const SIOCGIFADDR: u64 = 0x8915;
const SIOCGIFBRDADDR: u64 = 0x8919;
const SIOCGIFNETMASK: u64 = 0x891b;
const SIOCGIFMETRIC: u64 = 0x891d;
const SIOCGIFMTU: u64 = 0x8921;
const SIOCGIFHWADDR: u64 = 0x8927;
const SIOCGIFINDEX: u64 = 0x8933;
const SIOCGIFTXQLEN: u64 = 0x8942;
/// `sizeof(struct ifreq)`.
const IFREQ_LEN: usize = 40;

/// The first `AF_INET` address of `i`, its netmask and its broadcast
/// address (0.0.0.0 when it was given none, as Linux reports it).
fn inet_addr(i: &Interface) -> Option<([u8; 4], [u8; 4], [u8; 4])> {
    i.addrs.iter().find_map(|a| match a.addr {
        std::net::IpAddr::V4(v4) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(a.prefix.min(32)))
                .unwrap_or(0);
            let brd = a.broadcast.map_or([0; 4], |b| b.octets());
            Some((v4.octets(), mask.to_be_bytes(), brd))
        }
        std::net::IpAddr::V6(_) => None,
    })
}

fn sockaddr_in(ip: [u8; 4]) -> [u8; 16] {
    let mut sa = [0u8; 16];
    sa[..2].copy_from_slice(&2u16.to_ne_bytes());
    sa[4..8].copy_from_slice(&ip);
    sa
}

/// The interface ioctls of netdevice(7) on any socket, answered from the
/// sandbox's interface table; the `SIOCS*` ones that would change an
/// interface get `EPERM`. `None` for requests that are not interface
/// ioctls.
pub fn interface_ioctl(
    task: &Task,
    file: &FileDescription,
    cmd: u64,
    arg: u64,
) -> Option<Result<u64, Errno>> {
    if !(0x8910..=0x8970).contains(&cmd) {
        return None;
    }
    if crate::socket::of(file).is_none() {
        return Some(Err(Errno::ENOTTY));
    }
    Some(interface_request(task, cmd, arg))
}

fn interface_request(task: &Task, cmd: u64, arg: u64) -> Result<u64, Errno> {
    let table = table();
    if cmd == SIOCGIFCONF {
        // struct ifconf { int ifc_len; void *ifc_buf; }
        let len: i32 = task.mm().read_obj(arg)?;
        let buf: u64 = task.mm().read_obj(arg + 8)?;
        let mut out = Vec::new();
        // One entry per IPv4 address, as Linux's inet_gifconf gives them.
        for i in &table.interfaces {
            for a in &i.addrs {
                if let std::net::IpAddr::V4(ip) = a.addr {
                    let mut req = [0u8; IFREQ_LEN];
                    req[..i.name.len()].copy_from_slice(i.name.as_bytes());
                    req[16..32].copy_from_slice(&sockaddr_in(ip.octets()));
                    out.extend_from_slice(&req);
                }
            }
        }
        if buf == 0 {
            return task.mm().write_obj(arg, &(out.len() as i32)).map(|()| 0);
        }
        let fit = (len.max(0) as usize / IFREQ_LEN * IFREQ_LEN).min(out.len());
        task.mm().copy_out(buf, &out[..fit])?;
        return task.mm().write_obj(arg, &(fit as i32)).map(|()| 0);
    }
    let mut req = [0u8; IFREQ_LEN];
    task.mm().copy_in(arg, &mut req)?;
    if cmd == SIOCGIFNAME {
        let index = i32::from_ne_bytes([req[16], req[17], req[18], req[19]]);
        let i = table.by_index(index).ok_or(Errno::ENODEV)?;
        let mut name = [0u8; 16];
        name[..i.name.len()].copy_from_slice(i.name.as_bytes());
        return task.mm().copy_out(arg, &name).map(|()| 0);
    }
    let name = req[..16].split(|&c| c == 0).next().unwrap_or(&[]);
    let i = table.by_name(name).ok_or(Errno::ENODEV)?;
    let value: Vec<u8> = match cmd {
        SIOCGIFINDEX => i.index.to_ne_bytes().to_vec(),
        SIOCGIFFLAGS => ((i.flags & 0xffff) as u16).to_ne_bytes().to_vec(),
        SIOCGIFMTU => i.mtu.to_ne_bytes().to_vec(),
        SIOCGIFADDR => sockaddr_in(inet_addr(i).ok_or(Errno::EADDRNOTAVAIL)?.0).to_vec(),
        SIOCGIFNETMASK => sockaddr_in(inet_addr(i).ok_or(Errno::EADDRNOTAVAIL)?.1).to_vec(),
        SIOCGIFBRDADDR => sockaddr_in(inet_addr(i).ok_or(Errno::EADDRNOTAVAIL)?.2).to_vec(),
        SIOCGIFMETRIC => 0i32.to_ne_bytes().to_vec(),
        SIOCGIFHWADDR => {
            let mut sa = [0u8; 16];
            sa[..2].copy_from_slice(&i.hwtype.to_ne_bytes());
            sa[2..8].copy_from_slice(&i.hwaddr);
            sa.to_vec()
        }
        // `ifr_qlen`, which `ip` and ifconfig print as "qlen".
        SIOCGIFTXQLEN => i.txqlen.to_ne_bytes().to_vec(),
        // Everything else changes an interface (or asks what we do not
        // keep): a sandbox may not.
        0x8911 | 0x8914 | 0x8916 | 0x8918 | 0x891a | 0x891c | 0x8922 | 0x8924 | 0x8934 => {
            return Err(Errno::EPERM)
        }
        _ => return Err(Errno::EOPNOTSUPP),
    };
    task.mm().copy_out(arg + 16, &value).map(|()| 0)
}

impl Socket for NetlinkSocket {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn timeouts(&self) -> &crate::socket::SockTimeouts {
        &self.timeouts
    }

    fn poll(&self, _events: i16) -> i16 {
        use abi::poll::*;
        POLLOUT
            | POLLWRNORM
            | if self.readable() {
                POLLIN | POLLRDNORM
            } else {
                0
            }
    }

    fn wait_queues(&self, out: &mut Vec<crate::kernel::wait::WaitQueue>) {
        out.push(self.waiters.clone());
    }

    fn fasync(&self) -> Option<&crate::vfs::fasync::Fasync> {
        Some(&self.fasync)
    }

    fn bind(&self, task: &Task, _: &FileDescription, addr: u64, len: u64) -> Result<u64, Errno> {
        let pid = read_addr(task, addr, len)?;
        self.bind(pid).map(|()| 0)
    }

    /// `connect(2)`: only the kernel (port 0) is there to talk to.
    fn connect(&self, task: &Task, _: &FileDescription, addr: u64, len: u64) -> Result<u64, Errno> {
        match read_addr(task, addr, len)? {
            0 => Ok(0),
            _ => Err(Errno::ECONNREFUSED),
        }
    }

    fn getsockname(
        &self,
        task: &Task,
        _: &FileDescription,
        addr: u64,
        len: u64,
    ) -> Result<u64, Errno> {
        let port = self.port();
        write_addr(task, addr, len, port).map(|()| 0)
    }

    fn getpeername(
        &self,
        task: &Task,
        _: &FileDescription,
        addr: u64,
        len: u64,
    ) -> Result<u64, Errno> {
        write_addr(task, addr, len, 0).map(|()| 0)
    }

    // Nothing to shut: the kernel end always listens.
    fn shutdown(&self, _: &Task, _: &FileDescription, how: u64) -> Result<u64, Errno> {
        if how <= 2 {
            Ok(0)
        } else {
            Err(Errno::EINVAL)
        }
    }

    fn write(
        &self,
        task: &Task,
        file: &FileDescription,
        data: &GuestBufs<'_>,
        _flags: u64,
    ) -> Result<u64, Errno> {
        send(task, file, data)
    }

    fn read(&self, task: &Task, file: &FileDescription, dst: &GuestBufs<'_>) -> Result<u64, Errno> {
        let (d, _) = recv(task, file, dst.len(), 0)?;
        Ok(dst.write_at(0, &d) as u64)
    }

    fn sendto(&self, task: &Task, file: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno> {
        if a[4] != 0 && read_addr(task, a[4], a[5])? != 0 {
            return Err(Errno::ECONNREFUSED);
        }
        let slices = task.mm().slices(a[1], a[2], false)?;
        send(task, file, &GuestBufs::new(&slices))
    }

    fn recvfrom(&self, task: &Task, file: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno> {
        let slices = task.mm().slices(a[1], a[2], true)?;
        let (data, full) = recv(task, file, a[2] as usize, a[3])?;
        copy_to_slices(&slices, &data);
        if a[4] != 0 {
            write_addr(task, a[4], a[5], 0)?;
        }
        Ok(if a[3] & MSG_TRUNC != 0 {
            full
        } else {
            data.len()
        } as u64)
    }

    fn sendmsg(
        &self,
        task: &Task,
        file: &FileDescription,
        msg: u64,
        _flags: u64,
    ) -> Result<u64, Errno> {
        let w: [u64; 7] = task.mm().read_obj(msg)?;
        if w[0] != 0 && w[1] as u32 != 0 && read_addr(task, w[0], u64::from(w[1] as u32))? != 0 {
            return Err(Errno::ECONNREFUSED);
        }
        let slices = super::fs::iovecs_pub(task, w[2], w[3], false)?;
        send(task, file, &GuestBufs::new(&slices))
    }

    fn recvmsg(
        &self,
        task: &Task,
        file: &FileDescription,
        msg: u64,
        flags: u64,
    ) -> Result<u64, Errno> {
        let w: [u64; 7] = task.mm().read_obj(msg)?;
        let slices = super::fs::iovecs_pub(task, w[2], w[3], true)?;
        let max: usize = slices.iter().map(|x| x.len()).sum();
        let (data, full) = recv(task, file, max, flags)?;
        copy_to_slices(&slices, &data);
        let out_flags: u32 = if full > data.len() {
            MSG_TRUNC as u32
        } else {
            0
        };
        // No control messages.
        task.mm().write_obj(msg + 40, &0u64)?;
        task.mm().write_obj(msg + 48, &out_flags)?;
        if w[0] != 0 {
            write_addr(task, w[0], msg + 8, 0)?;
        }
        Ok(if flags & MSG_TRUNC != 0 {
            full
        } else {
            data.len()
        } as u64)
    }

    /// `setsockopt(2)`: buffer sizes are kept (doubled, as Linux reports
    /// them); the `SOL_NETLINK` options programs set (extended acks, strict
    /// checking, membership) are accepted and change nothing here.
    fn setsockopt(&self, task: &Task, _: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno> {
        let s = self;
        let (level, name) = (a[1] as i32, a[2] as i32);
        if level == SOL_SOCKET {
            if let Some(r) = super::socket::set_timeout(task, &s.timeouts, name, a[3], a[4]) {
                return r;
            }
        }
        let v = int_arg(task, a[3], a[4])?;
        match (level, name) {
            (SOL_SOCKET, SO_RCVBUF | SO_RCVBUFFORCE) => {
                let v = (v.max(0) as u32).saturating_mul(2).clamp(2304, 8 << 20);
                s.rcvbuf.store(v, Ordering::Relaxed);
                Ok(0)
            }
            (SOL_SOCKET, _) => Ok(0),
            (SOL_NETLINK, 1..=12) => Ok(0),
            _ => Err(Errno::ENOPROTOOPT),
        }
    }

    fn getsockopt(&self, task: &Task, _: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno> {
        let s = self;
        let (level, name) = (a[1] as i32, a[2] as i32);
        let len: u32 = task.mm().read_obj(a[4])?;
        if (len as i32) < 0 {
            return Err(Errno::EINVAL);
        }
        if level == SOL_SOCKET {
            if let Some(v) = super::socket::get_timeout(&s.timeouts, name) {
                let n = (len as usize).min(v.len());
                task.mm().copy_out(a[3], &v[..n])?;
                task.mm().write_obj(a[4], &(n as u32))?;
                return Ok(0);
            }
        }
        let v: i32 = match (level, name) {
            (SOL_SOCKET, SO_TYPE) => SOCK_RAW as i32,
            (SOL_SOCKET, SO_DOMAIN) => i32::from(AF_NETLINK),
            (SOL_SOCKET, SO_PROTOCOL) => NETLINK_ROUTE,
            (SOL_SOCKET, SO_RCVBUF) => s.rcvbuf.load(Ordering::Relaxed) as i32,
            (SOL_SOCKET, SO_SNDBUF) => crate::socket::netlink::DEFAULT_RCVBUF as i32,
            (SOL_SOCKET, _) | (SOL_NETLINK, _) => 0,
            _ => return Err(Errno::ENOPROTOOPT),
        };
        let n = (len as usize).min(4);
        task.mm().copy_out(a[3], &v.to_ne_bytes()[..n])?;
        task.mm().write_obj(a[4], &(n as u32))?;
        Ok(0)
    }
}
