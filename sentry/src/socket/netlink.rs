//! `AF_NETLINK` route sockets: enough of rtnetlink for programs that list
//! interfaces, addresses and routes (`getifaddrs`, `if_nameindex`, `ip
//! addr`, `ip link`, `ip route`, glibc's `AI_ADDRCONFIG` check) to see the
//! sandbox's network: [`NetTable`], also behind the interface ioctls,
//! `/sys/class/net` and `/proc/net`. Nothing can be changed through them:
//! requests that would change links, addresses or routes get `EPERM`, as
//! for a process without `CAP_NET_ADMIN` in the host's namespace; other
//! requests get `EOPNOTSUPP`.
//!
//! Replies are built when the request is sent and queued on the socket,
//! bounded by its receive buffer (`ENOBUFS` beyond, as Linux reports an
//! overrun).

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use crate::sync::Locked;
use abi::netlink::{
    ARPHRD_ETHER, IFA_ADDRESS, IFA_BROADCAST, IFA_CACHEINFO, IFA_FLAGS, IFA_LABEL, IFA_LOCAL,
    IFF_LOOPBACK, IFLA_ADDRESS, IFLA_BROADCAST, IFLA_GROUP, IFLA_IFNAME, IFLA_LINK, IFLA_LINKMODE,
    IFLA_MTU, IFLA_OPERSTATE, IFLA_QDISC, IFLA_TXQLEN, RTA_CACHEINFO, RTA_DST, RTA_GATEWAY,
    RTA_OIF, RTA_PREF, RTA_PREFSRC, RTA_PRIORITY, RTA_SRC, RTA_TABLE, RTA_UID, RTM_GETADDR,
    RTM_GETLINK, RTM_GETROUTE, RTM_NEWADDR, RTM_NEWLINK, RTM_NEWROUTE, RT_SCOPE_UNIVERSE,
    RT_TABLE_MAIN,
};
use abi::netlink::{
    NLMSG_DONE, NLMSG_ERROR, NLMSG_HDRLEN, NLM_F_ACK, NLM_F_DUMP, NLM_F_MULTI, NLM_F_REQUEST,
    RTCF_BROADCAST, RTCF_LOCAL, RTCF_MULTICAST, RTM_F_CLONED, RTN_BROADCAST, RTN_LOCAL,
    RTN_MULTICAST, RTN_UNICAST,
};
use abi::Errno;

pub use crate::kernel::netdev::*;

/// Address families as the `u8` of rtnetlink's headers.
const AF_INET: u8 = abi::socket::AF_INET as u8;
const AF_INET6: u8 = abi::socket::AF_INET6 as u8;

/// Default receive buffer, bytes (Linux's `rmem_default`).
pub const DEFAULT_RCVBUF: usize = 212_992;

/// One netlink socket.
#[derive(Debug)]
pub struct NetlinkSocket {
    /// The port id (`nl_pid`), 0 until bound (explicitly or by sending).
    port: AtomicU32,
    /// Replies waiting to be read, one message per datagram.
    queue: Mutex<Queue>,
    /// `SO_RCVBUF`.
    pub rcvbuf: AtomicU32,
    /// descriptions with `O_ASYNC`, signalled when replies are queued
    /// (`sock_def_readable()`)
    pub fasync: crate::vfs::fasync::Fasync,
    /// `SO_RCVTIMEO`/`SO_SNDTIMEO` (a send never waits here: replies are
    /// queued at once, so only the receive timeout has an effect).
    pub timeouts: super::SockTimeouts,
    /// receivers waiting for a reply
    pub waiters: crate::kernel::wait::WaitQueue,
}

#[derive(Debug, Default)]
struct Queue {
    msgs: VecDeque<Vec<u8>>,
    bytes: usize,
    /// An overrun to report on the next receive.
    overrun: bool,
}

/// The next port id to hand out.
static NEXT_PORT: AtomicU32 = AtomicU32::new(0x8000_0000);

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn put_attr(out: &mut Vec<u8>, ty: u16, data: &[u8]) {
    let len = 4 + data.len();
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(data);
    out.resize(align4(out.len()), 0);
}

/// A whole netlink message: header then `body`.
fn message(ty: u16, flags: u16, seq: u32, port: u32, body: &[u8]) -> Vec<u8> {
    let len = NLMSG_HDRLEN + body.len();
    let mut m = Vec::with_capacity(align4(len));
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&ty.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&port.to_ne_bytes());
    m.extend_from_slice(body);
    m.resize(align4(m.len()), 0);
    m
}

fn link_body(i: &Interface) -> Vec<u8> {
    let mut b = Vec::new();
    // struct ifinfomsg
    b.push(0); // AF_UNSPEC
    b.push(0);
    b.extend_from_slice(&i.hwtype.to_ne_bytes());
    b.extend_from_slice(&i.index.to_ne_bytes());
    b.extend_from_slice(&i.flags.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    let mut name = i.name.as_bytes().to_vec();
    name.push(0);
    put_attr(&mut b, IFLA_IFNAME, &name);
    if i.iflink != i.index {
        // (`rtnl_fill_link_ifindex()`: only a link to another device)
        put_attr(&mut b, IFLA_LINK, &i.iflink.to_ne_bytes());
    }
    put_attr(&mut b, IFLA_TXQLEN, &i.txqlen.to_ne_bytes());
    put_attr(&mut b, IFLA_OPERSTATE, &[i.operstate]);
    put_attr(&mut b, IFLA_LINKMODE, &[0]);
    put_attr(&mut b, IFLA_MTU, &i.mtu.to_ne_bytes());
    put_attr(&mut b, IFLA_GROUP, &0u32.to_ne_bytes());
    let mut qdisc = i.qdisc.as_bytes().to_vec();
    qdisc.push(0);
    put_attr(&mut b, IFLA_QDISC, &qdisc);
    put_attr(&mut b, IFLA_ADDRESS, &i.hwaddr);
    let brd = if i.hwtype == ARPHRD_ETHER {
        [0xff; 6]
    } else {
        [0; 6]
    };
    put_attr(&mut b, IFLA_BROADCAST, &brd);
    b
}

fn octets(a: IpAddr) -> (u8, Vec<u8>) {
    match a {
        IpAddr::V4(a) => (AF_INET, a.octets().to_vec()),
        IpAddr::V6(a) => (AF_INET6, a.octets().to_vec()),
    }
}

fn addr_body(i: &Interface, a: &IfAddr) -> Vec<u8> {
    let mut b = Vec::new();
    let (family, octets) = octets(a.addr);
    // struct ifaddrmsg
    b.push(family);
    b.push(a.prefix);
    b.push(a.flags as u8);
    b.push(a.scope);
    b.extend_from_slice(&(i.index as u32).to_ne_bytes());
    put_attr(&mut b, IFA_ADDRESS, &octets);
    if family == AF_INET {
        put_attr(&mut b, IFA_LOCAL, &octets);
        if let Some(brd) = a.broadcast {
            put_attr(&mut b, IFA_BROADCAST, &brd.octets());
        }
        let mut label = i.name.as_bytes().to_vec();
        label.push(0);
        put_attr(&mut b, IFA_LABEL, &label);
    }
    put_attr(&mut b, IFA_FLAGS, &a.flags.to_ne_bytes());
    // struct ifa_cacheinfo: preferred and valid lifetimes "forever".
    let mut ci = Vec::new();
    ci.extend_from_slice(&u32::MAX.to_ne_bytes());
    ci.extend_from_slice(&u32::MAX.to_ne_bytes());
    ci.extend_from_slice(&0u32.to_ne_bytes());
    ci.extend_from_slice(&0u32.to_ne_bytes());
    put_attr(&mut b, IFA_CACHEINFO, &ci);
    b
}

fn route_body(r: &Route) -> Vec<u8> {
    let mut b = Vec::new();
    let (family, dst) = octets(r.dst);
    // struct rtmsg
    b.extend_from_slice(&[
        family, r.dst_len, 0, 0, r.table, r.protocol, r.scope, r.kind,
    ]);
    b.extend_from_slice(&0u32.to_ne_bytes());
    put_attr(&mut b, RTA_TABLE, &u32::from(r.table).to_ne_bytes());
    if r.dst_len > 0 {
        put_attr(&mut b, RTA_DST, &dst);
    }
    if let Some(p) = r.priority {
        put_attr(&mut b, RTA_PRIORITY, &p.to_ne_bytes());
    }
    if let Some(src) = r.prefsrc {
        put_attr(&mut b, RTA_PREFSRC, &octets(src).1);
    }
    if let Some(gw) = r.gateway {
        put_attr(&mut b, RTA_GATEWAY, &octets(gw).1);
    }
    put_attr(&mut b, RTA_OIF, &r.oif.to_ne_bytes());
    if family == AF_INET6 {
        // ICMPV6_ROUTER_PREF_MEDIUM
        put_attr(&mut b, RTA_PREF, &[0]);
    }
    b
}

/// The answer to a route lookup (`RTM_GETROUTE` without `NLM_F_DUMP`,
/// what `ip route get` asks): the route a packet to the request's
/// `RTA_DST` would take, from `RTA_SRC` if given, laid out as Linux's
/// `rt_fill_info` (IPv4) and `rt6_fill_node` (IPv6) lay it out. `uid` is
/// the asker's, which IPv4 answers carry.
fn route_get_body(table: &NetTable, body: &[u8], uid: u32) -> Result<Vec<u8>, Errno> {
    let family = *body.first().ok_or(Errno::EINVAL)?;
    let v4 = match family {
        AF_INET => true,
        AF_INET6 => false,
        _ => return Err(Errno::EAFNOSUPPORT),
    };
    let addr_of = |v: &[u8]| -> Result<IpAddr, Errno> {
        match (v4, v.len()) {
            (true, 4) => Ok(IpAddr::from(<[u8; 4]>::try_from(v).unwrap_or_default())),
            (false, 16) => Ok(IpAddr::from(<[u8; 16]>::try_from(v).unwrap_or_default())),
            _ => Err(Errno::EINVAL),
        }
    };
    let unspecified = if v4 {
        IpAddr::from([0u8; 4])
    } else {
        IpAddr::from([0u8; 16])
    };
    let (mut dst, mut src) = (unspecified, None);
    for (ty, v) in attrs_of(body.get(12..).unwrap_or_default()) {
        match ty {
            RTA_DST => dst = addr_of(v)?,
            RTA_SRC => src = Some(addr_of(v)?),
            _ => {}
        }
    }
    // A source must be one of the sandbox's own addresses.
    if src.is_some_and(|s| !table.is_local(s)) {
        return Err(Errno::ENETUNREACH);
    }
    let lo = table
        .interfaces
        .iter()
        .find(|i| i.flags & IFF_LOOPBACK != 0)
        .map_or(1, |i| i.index);
    // To a multicast or the limited broadcast address, a packet from a
    // given source leaves through that source's interface, whatever the
    // routes say (`ip_route_output_key_hash_rcu` skips the lookup).
    let source_if = match (src, dst) {
        (Some(IpAddr::V4(s)), IpAddr::V4(d)) if d.is_multicast() || d.is_broadcast() => {
            Some(if s.is_loopback() {
                lo
            } else {
                table
                    .interfaces
                    .iter()
                    .find(|i| i.addrs.iter().any(|x| x.addr == IpAddr::V4(s)))
                    .map_or(lo, |i| i.index)
            })
        }
        _ => None,
    };
    let r = match source_if {
        Some(oif) => Route {
            table: RT_TABLE_MAIN,
            kind: if matches!(dst, IpAddr::V4(d) if d.is_broadcast()) {
                RTN_BROADCAST
            } else {
                RTN_MULTICAST
            },
            dst,
            dst_len: 32,
            oif,
            scope: RT_SCOPE_UNIVERSE,
            protocol: 0,
            prefsrc: None,
            priority: None,
            gateway: None,
        },
        None => table.route_to(dst).ok_or(Errno::ENETUNREACH)?.clone(),
    };
    let local = r.kind == RTN_LOCAL;
    let oif = if local { lo } else { r.oif };
    // A loopback source never leaves through another interface
    // (`__mkroute_output`: EINVAL).
    if matches!(src, Some(IpAddr::V4(s)) if s.is_loopback())
        && table
            .by_index(oif)
            .is_some_and(|i| i.flags & IFF_LOOPBACK == 0)
    {
        return Err(Errno::EINVAL);
    }
    let prefsrc = if local {
        r.prefsrc.unwrap_or(dst)
    } else {
        r.prefsrc
            .or_else(|| table.source_on(r.oif, dst))
            .unwrap_or(unspecified)
    };
    let (_, dst_bytes) = octets(dst);
    let mut b = Vec::new();
    let mut cache = [0u8; 32];
    // rta_clntref: the users of the cached route (this lookup and the
    // route itself).
    cache[..4].copy_from_slice(&2u32.to_ne_bytes());
    if v4 {
        let (kind, flags) = match r.kind {
            RTN_LOCAL => (RTN_LOCAL, RTCF_LOCAL),
            RTN_BROADCAST => (RTN_BROADCAST, RTCF_BROADCAST | RTCF_LOCAL),
            _ if matches!(dst, IpAddr::V4(a) if a.is_multicast()) => {
                (RTN_MULTICAST, RTCF_MULTICAST | RTCF_LOCAL)
            }
            _ => (RTN_UNICAST, 0),
        };
        let src_len = if src.is_some() { 32 } else { 0 };
        // struct rtmsg: the main table and no protocol or scope, whatever
        // the route (Linux names the table only when asked to with
        // RTM_F_LOOKUP_TABLE).
        b.extend_from_slice(&[AF_INET, 32, src_len, 0, RT_TABLE_MAIN, 0, 0, kind]);
        b.extend_from_slice(&(flags | RTM_F_CLONED).to_ne_bytes());
        put_attr(&mut b, RTA_TABLE, &u32::from(RT_TABLE_MAIN).to_ne_bytes());
        put_attr(&mut b, RTA_DST, &dst_bytes);
        if let Some(s) = src {
            put_attr(&mut b, RTA_SRC, &octets(s).1);
        }
        put_attr(&mut b, RTA_OIF, &oif.to_ne_bytes());
        if src.is_none() {
            put_attr(&mut b, RTA_PREFSRC, &octets(prefsrc).1);
        }
        if let Some(gw) = r.gateway.filter(|_| !local) {
            put_attr(&mut b, RTA_GATEWAY, &octets(gw).1);
        }
        put_attr(&mut b, RTA_UID, &uid.to_ne_bytes());
        put_attr(&mut b, RTA_CACHEINFO, &cache);
    } else {
        let priority = if local { 0 } else { r.priority.unwrap_or(1024) };
        b.extend_from_slice(&[AF_INET6, 128, 128, 0, r.table, r.protocol, 0, r.kind]);
        b.extend_from_slice(&0u32.to_ne_bytes());
        put_attr(&mut b, RTA_TABLE, &u32::from(r.table).to_ne_bytes());
        put_attr(&mut b, RTA_DST, &dst_bytes);
        put_attr(&mut b, RTA_SRC, &octets(src.unwrap_or(unspecified)).1);
        if src.is_none() {
            put_attr(&mut b, RTA_PREFSRC, &octets(prefsrc).1);
        }
        put_attr(&mut b, RTA_PRIORITY, &priority.to_ne_bytes());
        if let Some(gw) = r.gateway.filter(|_| !local) {
            put_attr(&mut b, RTA_GATEWAY, &octets(gw).1);
        }
        put_attr(&mut b, RTA_OIF, &oif.to_ne_bytes());
        put_attr(&mut b, RTA_CACHEINFO, &cache);
        // ICMPV6_ROUTER_PREF_MEDIUM
        put_attr(&mut b, RTA_PREF, &[0]);
    }
    Ok(b)
}

/// The attributes in `attrs`: `(type, value)`, up to the first malformed one.
pub fn attrs_of(mut attrs: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while attrs.len() >= 4 {
        let len = u16::from_ne_bytes([attrs[0], attrs[1]]) as usize;
        let ty = u16::from_ne_bytes([attrs[2], attrs[3]]) & 0x3fff;
        if len < 4 || len > attrs.len() {
            break;
        }
        out.push((ty, &attrs[4..len]));
        attrs = &attrs[align4(len).min(attrs.len())..];
    }
    out
}

fn error_body(errno: i32, request: &[u8]) -> Vec<u8> {
    let mut b = (-errno).to_ne_bytes().to_vec();
    // The request's header, as Linux echoes it (without the payload when
    // the request succeeded or with NETLINK_CAP_ACK; we always cap).
    b.extend_from_slice(&request[..NLMSG_HDRLEN.min(request.len())]);
    b
}

/// Finds the name an `IFLA_IFNAME` attribute in `attrs` gives.
fn ifname_attr(attrs: &[u8]) -> Option<&[u8]> {
    let v = attrs_of(attrs)
        .into_iter()
        .find(|&(ty, _)| ty == IFLA_IFNAME)?
        .1;
    Some(v.split(|&c| c == 0).next().unwrap_or(v))
}

impl NetlinkSocket {
    pub fn new() -> NetlinkSocket {
        NetlinkSocket {
            port: AtomicU32::new(0),
            queue: Mutex::default(),
            rcvbuf: AtomicU32::new(DEFAULT_RCVBUF as u32),
            fasync: Default::default(),
            timeouts: super::SockTimeouts::default(),
            waiters: Default::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.locked()
    }

    /// The port id, assigned on first use (a number unique in the
    /// sandbox; programs learn it with `getsockname`).
    pub fn port(&self) -> u32 {
        let cur = self.port.load(Ordering::Relaxed);
        if cur != 0 {
            return cur;
        }
        let p = NEXT_PORT.fetch_add(1, Ordering::Relaxed).max(1);
        match self
            .port
            .compare_exchange(0, p, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => p,
            Err(existing) => existing,
        }
    }

    /// `bind(2)`: `nl_pid` 0 lets the kernel pick; a non-zero one is taken
    /// as given (one sandbox, one process namespace). Multicast groups are
    /// accepted: no events are ever sent.
    pub fn bind(&self, pid: u32) -> Result<(), Errno> {
        if pid != 0 {
            let cur = self.port.load(Ordering::Relaxed);
            if cur != 0 && cur != pid {
                return Err(Errno::EINVAL);
            }
            self.port.store(pid, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Handles the messages in one datagram the guest sent; returns its
    /// length (netlink sends are all-or-nothing).
    pub fn send(&self, data: &[u8], uid: u32) -> Result<usize, Errno> {
        self.send_on(&table(), data, uid)
    }

    /// [`NetlinkSocket::send`], answered from `table`.
    fn send_on(&self, table: &NetTable, data: &[u8], uid: u32) -> Result<usize, Errno> {
        let port = self.port();
        let mut at = 0;
        let mut replies = Vec::new();
        while data.len() - at >= NLMSG_HDRLEN {
            let m = &data[at..];
            let len = u32::from_ne_bytes([m[0], m[1], m[2], m[3]]) as usize;
            if len < NLMSG_HDRLEN || len > m.len() {
                break;
            }
            let m = &m[..len];
            let ty = u16::from_ne_bytes([m[4], m[5]]);
            let flags = u16::from_ne_bytes([m[6], m[7]]);
            let seq = u32::from_ne_bytes([m[8], m[9], m[10], m[11]]);
            at += align4(len).min(data.len() - at);
            if flags & NLM_F_REQUEST == 0 {
                continue;
            }
            let body = &m[NLMSG_HDRLEN..];
            let dump = flags & NLM_F_DUMP == NLM_F_DUMP;
            let family = body.first().copied().unwrap_or(0);
            let mut out: Vec<Vec<u8>> = Vec::new();
            let mut result: Result<(), Errno> = Ok(());
            match ty {
                RTM_GETLINK if dump => {
                    for i in &table.interfaces {
                        out.push(message(RTM_NEWLINK, NLM_F_MULTI, seq, port, &link_body(i)));
                    }
                }
                RTM_GETLINK => {
                    // One link, by index or by name.
                    let index = body
                        .get(4..8)
                        .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                    let name = body.get(16..).and_then(ifname_attr);
                    let found = if index != 0 {
                        table.by_index(index)
                    } else {
                        name.and_then(|n| table.by_name(n))
                    };
                    match found {
                        Some(i) => out.push(message(RTM_NEWLINK, 0, seq, port, &link_body(i))),
                        None => result = Err(Errno::ENODEV),
                    }
                }
                RTM_GETADDR if dump => {
                    for i in &table.interfaces {
                        for a in &i.addrs {
                            if family == 0 || family == octets(a.addr).0 {
                                out.push(message(
                                    RTM_NEWADDR,
                                    NLM_F_MULTI,
                                    seq,
                                    port,
                                    &addr_body(i, a),
                                ));
                            }
                        }
                    }
                }
                RTM_GETROUTE if dump => {
                    for r in &table.routes {
                        if family == 0 || family == octets(r.dst).0 {
                            out.push(message(
                                RTM_NEWROUTE,
                                NLM_F_MULTI,
                                seq,
                                port,
                                &route_body(r),
                            ));
                        }
                    }
                }
                RTM_GETROUTE => match route_get_body(table, body, uid) {
                    Ok(b) => out.push(message(RTM_NEWROUTE, 0, seq, port, &b)),
                    Err(e) => result = Err(e),
                },
                RTM_GETADDR => result = Err(Errno::EOPNOTSUPP),
                t if (RTM_NEWLINK..=RTM_NEWROUTE + 3).contains(&t) => result = Err(Errno::EPERM),
                _ => result = Err(Errno::EOPNOTSUPP),
            }
            match result {
                Err(e) => out.push(message(NLMSG_ERROR, 0, seq, port, &error_body(e.0, m))),
                Ok(()) if dump => out.push(message(
                    NLMSG_DONE,
                    NLM_F_MULTI,
                    seq,
                    port,
                    &0i32.to_ne_bytes(),
                )),
                Ok(()) if flags & NLM_F_ACK != 0 => {
                    out.push(message(NLMSG_ERROR, 0, seq, port, &error_body(0, m)))
                }
                Ok(()) => {}
            }
            // A dump is one datagram per message on Linux too (programs
            // read them in a loop until NLMSG_DONE).
            replies.extend(out);
        }
        let cap = self.rcvbuf.load(Ordering::Relaxed) as usize;
        let mut q = self.lock();
        let mut queued = false;
        let mut overrun = false;
        for r in replies {
            if q.bytes + r.len() > cap {
                // netlink_overrun(): an error report (POLL_ERR).
                overrun = !q.overrun;
                q.overrun = true;
                break;
            }
            q.bytes += r.len();
            q.msgs.push_back(r);
            queued = true;
        }
        drop(q);
        if queued || overrun {
            self.waiters.notify();
        }
        // Linux queues the replies to one request (a whole small dump with
        // its NLMSG_DONE) in one buffer: one signal.
        if queued {
            self.fasync.kill(crate::vfs::fasync::Reason::In);
        }
        if overrun {
            self.fasync.kill(crate::vfs::fasync::Reason::Err);
        }
        Ok(data.len())
    }

    /// Queues a datagram the kernel side sends on its own (a message
    /// queue's thread notification: `netlink_sendskb`), dropped when the
    /// receive buffer has no room.
    pub fn post(&self, msg: Vec<u8>) {
        let cap = self.rcvbuf.load(Ordering::Relaxed) as usize;
        let mut q = self.lock();
        if q.bytes + msg.len() > cap {
            return;
        }
        q.bytes += msg.len();
        q.msgs.push_back(msg);
        drop(q);
        self.waiters.notify();
        self.fasync.kill(crate::vfs::fasync::Reason::In);
    }

    /// Takes (or with `peek`, copies) the next reply: `(bytes, full
    /// length)`. `EAGAIN` when none waits; `ENOBUFS` once after an overrun.
    pub fn recv(&self, max: usize, peek: bool) -> Result<(Vec<u8>, usize), Errno> {
        let mut q = self.lock();
        if q.overrun && q.msgs.is_empty() {
            q.overrun = false;
            return Err(Errno::ENOBUFS);
        }
        let m = if peek {
            q.msgs.front().cloned()
        } else {
            q.msgs.pop_front()
        };
        let Some(m) = m else {
            return Err(Errno::EAGAIN);
        };
        if !peek {
            q.bytes -= m.len();
        }
        let full = m.len();
        Ok((m[..full.min(max)].to_vec(), full))
    }

    /// Whether a reply waits.
    pub fn readable(&self) -> bool {
        let q = self.lock();
        !q.msgs.is_empty() || q.overrun
    }
}

impl Default for NetlinkSocket {
    fn default() -> Self {
        NetlinkSocket::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn request(ty: u16, flags: u16, body: &[u8]) -> Vec<u8> {
        message(ty, flags, 7, 0, body)
    }

    fn drain(s: &NetlinkSocket) -> Vec<(u16, Vec<u8>)> {
        let mut v = Vec::new();
        while let Ok((m, _)) = s.recv(65536, false) {
            v.push((u16::from_ne_bytes([m[4], m[5]]), m));
        }
        v
    }

    #[test]
    fn link_dump_lists_lo_then_done() {
        let s = NetlinkSocket::new();
        let req = request(RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, &[0; 16]);
        assert_eq!(s.send(&req, 0), Ok(req.len()));
        let r = drain(&s);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].0, RTM_NEWLINK);
        assert_eq!(ifname_attr(&r[0].1[32..]), Some(&b"lo"[..]));
        assert_eq!(r[1].0, NLMSG_DONE);
        // Sequence number and port come back.
        assert_eq!(
            u32::from_ne_bytes([r[0].1[8], r[0].1[9], r[0].1[10], r[0].1[11]]),
            7
        );
        let port = u32::from_ne_bytes([r[0].1[12], r[0].1[13], r[0].1[14], r[0].1[15]]);
        assert_eq!(port, s.port());
    }

    #[test]
    fn addr_dump_filters_by_family() {
        let s = NetlinkSocket::new();
        let req = request(
            RTM_GETADDR,
            NLM_F_REQUEST | NLM_F_DUMP,
            &[10, 0, 0, 0, 0, 0, 0, 0],
        );
        s.send(&req, 0).expect("send");
        let r = drain(&s);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].1[16], 10);
        assert_eq!(r[0].1[17], 128);
    }

    #[test]
    fn changes_are_refused_and_garbage_ignored() {
        let s = NetlinkSocket::new();
        let req = request(
            RTM_NEWADDR,
            NLM_F_REQUEST | NLM_F_ACK,
            &[2, 24, 0, 0, 1, 0, 0, 0],
        );
        s.send(&req, 0).expect("send");
        let r = drain(&s);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].0, NLMSG_ERROR);
        let e = i32::from_ne_bytes([r[0].1[16], r[0].1[17], r[0].1[18], r[0].1[19]]);
        assert_eq!(e, -Errno::EPERM.0);
        let mut x: u32 = 3;
        for len in 0..200 {
            let junk: Vec<u8> = (0..len)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (x >> 16) as u8
                })
                .collect();
            let _ = s.send(&junk, 0);
        }
    }

    /// Routes as `ip route show table all` would print their keys.
    fn keys(t: &NetTable) -> Vec<String> {
        t.routes
            .iter()
            .map(|r| {
                format!(
                    "{} {} {}/{} dev {} src {:?} metric {:?}",
                    r.table, r.kind, r.dst, r.dst_len, r.oif, r.prefsrc, r.priority
                )
            })
            .collect()
    }

    #[test]
    fn loopback_routes_are_linux_local_table() {
        assert_eq!(
            keys(&NetTable::loopback()),
            [
                "255 2 127.0.0.0/8 dev 1 src Some(127.0.0.1) metric None",
                "255 2 127.0.0.1/32 dev 1 src Some(127.0.0.1) metric None",
                "255 3 127.255.255.255/32 dev 1 src Some(127.0.0.1) metric None",
                "255 2 ::1/128 dev 1 src None metric Some(0)",
            ]
        );
    }

    /// `ip route get`'s answers, byte for byte as Linux 6.18 gave them in a
    /// namespace with the same link (there eth0 had index 3, here 2).
    #[test]
    fn route_lookups_answer_as_linux_does() {
        let t = NetTable::sandbox(Ipv4Addr::new(10, 0, 2, 15), "fd00::15".parse().expect("v6"));
        let get = |family: u8, dst: &[u8], src: Option<&[u8]>| {
            let mut body = vec![family, (dst.len() * 8) as u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
            put_attr(&mut body, RTA_DST, dst);
            if let Some(src) = src {
                put_attr(&mut body, RTA_SRC, src);
            }
            let s = NetlinkSocket::new();
            s.send_on(&t, &request(RTM_GETROUTE, NLM_F_REQUEST, &body), 1000)
                .expect("send");
            let r = drain(&s);
            assert_eq!(r.len(), 1);
            r.into_iter().next().expect("one").1
        };
        let attrs = |m: &[u8]| -> Vec<(u16, Vec<u8>)> {
            attrs_of(&m[28..])
                .into_iter()
                .map(|(t, v)| (t, v.to_vec()))
                .collect()
        };
        let mut cache = vec![0u8; 32];
        cache[0] = 2;
        // 1.1.1.1: through eth0, from its address.
        let m = get(AF_INET, &[1, 1, 1, 1], None);
        assert_eq!(u16::from_ne_bytes([m[4], m[5]]), RTM_NEWROUTE);
        assert_eq!(&m[16..24], &[2, 32, 0, 0, 254, 0, 0, 1]);
        assert_eq!(&m[24..28], &0x200u32.to_ne_bytes());
        assert_eq!(
            attrs(&m),
            vec![
                (RTA_TABLE, vec![254, 0, 0, 0]),
                (RTA_DST, vec![1, 1, 1, 1]),
                (RTA_OIF, vec![2, 0, 0, 0]),
                (RTA_PREFSRC, vec![10, 0, 2, 15]),
                (RTA_UID, 1000u32.to_ne_bytes().to_vec()),
                (RTA_CACHEINFO, cache.clone()),
            ]
        );
        // The interface's own address: local, through lo.
        let m = get(AF_INET, &[10, 0, 2, 15], None);
        assert_eq!(&m[16..24], &[2, 32, 0, 0, 254, 0, 0, 2]);
        assert_eq!(&m[24..28], &0x8000_0200u32.to_ne_bytes());
        assert_eq!(attrs(&m)[2], (RTA_OIF, vec![1, 0, 0, 0]));
        // A source of ours: named, with no preferred source.
        let m = get(AF_INET, &[10, 0, 3, 1], Some(&[10, 0, 2, 15]));
        assert_eq!(&m[16..24], &[2, 32, 32, 0, 254, 0, 0, 1]);
        let a: Vec<u16> = attrs(&m).iter().map(|x| x.0).collect();
        assert_eq!(
            a,
            [RTA_TABLE, RTA_DST, RTA_SRC, RTA_OIF, RTA_UID, RTA_CACHEINFO]
        );
        // IPv6 on the link: the route's table, protocol and metric.
        let fd07: [u8; 16] = "fd00::7".parse::<Ipv6Addr>().expect("v6").octets();
        let fd15: [u8; 16] = "fd00::15".parse::<Ipv6Addr>().expect("v6").octets();
        let m = get(AF_INET6, &fd07, None);
        assert_eq!(&m[16..24], &[10, 128, 128, 0, 254, 2, 0, 1]);
        assert_eq!(&m[24..28], &[0; 4]);
        assert_eq!(
            attrs(&m),
            vec![
                (RTA_TABLE, vec![254, 0, 0, 0]),
                (RTA_DST, fd07.to_vec()),
                (RTA_SRC, vec![0; 16]),
                (RTA_PREFSRC, fd15.to_vec()),
                (RTA_PRIORITY, 256u32.to_ne_bytes().to_vec()),
                (RTA_OIF, vec![2, 0, 0, 0]),
                (RTA_CACHEINFO, cache.clone()),
                (RTA_PREF, vec![0]),
            ]
        );
        // IPv6, the own address: the local table, through lo.
        let m = get(AF_INET6, &fd15, None);
        assert_eq!(&m[16..24], &[10, 128, 128, 0, 255, 2, 0, 2]);
        // No route, or a source that is not ours: unreachable.
        let s = NetlinkSocket::new();
        let lo = NetTable::loopback();
        let mut body = vec![AF_INET, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        put_attr(&mut body, RTA_DST, &[1, 1, 1, 1]);
        s.send_on(&lo, &request(RTM_GETROUTE, NLM_F_REQUEST, &body), 0)
            .expect("send");
        let r = drain(&s);
        assert_eq!(r[0].0, NLMSG_ERROR);
        assert_eq!(&r[0].1[16..20], &(-Errno::ENETUNREACH.0).to_ne_bytes());
    }

    #[test]
    fn all_of_loopbacks_range_is_a_local_source() {
        let t = NetTable::sandbox(Ipv4Addr::new(10, 0, 2, 15), "fd00::15".parse().expect("v6"));
        let get = |dst: [u8; 4], src: [u8; 4]| {
            let mut body = vec![AF_INET, 32, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0];
            put_attr(&mut body, RTA_DST, &dst);
            put_attr(&mut body, RTA_SRC, &src);
            route_get_body(&t, &body, 0)
        };
        // 127.0.0.3 is ours as 127.0.0.1 is (`ip route get 127.0.0.7 from
        // 127.0.0.3`: local, through lo).
        let m = get([127, 0, 0, 7], [127, 0, 0, 3]).expect("local");
        assert_eq!(&m[..8], &[2, 32, 32, 0, 254, 0, 0, RTN_LOCAL]);
        let oif = attrs_of(&m[12..])
            .into_iter()
            .find(|(ty, _)| *ty == RTA_OIF)
            .map(|(_, v)| v.to_vec());
        assert_eq!(oif, Some(1i32.to_ne_bytes().to_vec()));
        // A loopback source does not leave through eth0: EINVAL, as Linux.
        assert_eq!(get([1, 1, 1, 1], [127, 0, 0, 3]), Err(Errno::EINVAL));
        assert_eq!(get([10, 0, 2, 7], [127, 0, 0, 1]), Err(Errno::EINVAL));
        // To a multicast group it leaves through lo, its own interface.
        let m = get([224, 0, 0, 1], [127, 0, 0, 3]).expect("multicast");
        let oif = attrs_of(&m[12..])
            .into_iter()
            .find(|(ty, _)| *ty == RTA_OIF)
            .map(|(_, v)| v.to_vec());
        assert_eq!(oif, Some(1i32.to_ne_bytes().to_vec()));
        // So it does with loopback alone, where no route leads there.
        let mut body = vec![AF_INET, 32, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        put_attr(&mut body, RTA_DST, &[224, 0, 0, 1]);
        put_attr(&mut body, RTA_SRC, &[127, 0, 0, 3]);
        let m = route_get_body(&NetTable::loopback(), &body, 0).expect("multicast");
        assert_eq!(&m[..8], &[2, 32, 32, 0, 254, 0, 0, RTN_MULTICAST]);
        // The broadcast address is not a source; 128.0.0.1 is no one's.
        assert_eq!(
            get([127, 0, 0, 7], [127, 255, 255, 255]),
            Err(Errno::ENETUNREACH)
        );
        assert_eq!(get([127, 0, 0, 7], [128, 0, 0, 1]), Err(Errno::ENETUNREACH));
    }

    #[test]
    fn sandbox_table_has_eth0_its_subnet_and_default_routes() {
        let t = NetTable::sandbox(Ipv4Addr::new(10, 0, 2, 15), "fd00::15".parse().expect("v6"));
        assert_eq!(
            keys(&t),
            [
                "254 1 0.0.0.0/0 dev 2 src None metric None",
                "254 1 10.0.2.0/24 dev 2 src Some(10.0.2.15) metric None",
                "255 2 10.0.2.15/32 dev 2 src Some(10.0.2.15) metric None",
                "255 3 10.0.2.255/32 dev 2 src Some(10.0.2.15) metric None",
                "255 2 127.0.0.0/8 dev 1 src Some(127.0.0.1) metric None",
                "255 2 127.0.0.1/32 dev 1 src Some(127.0.0.1) metric None",
                "255 3 127.255.255.255/32 dev 1 src Some(127.0.0.1) metric None",
                "254 1 fd00::/64 dev 2 src None metric Some(256)",
                "254 1 ::/0 dev 2 src None metric Some(1024)",
                "255 2 ::1/128 dev 1 src None metric Some(0)",
                "255 2 fd00::15/128 dev 2 src None metric Some(0)",
                "255 5 ff00::/8 dev 2 src None metric Some(256)",
            ]
        );
        // A route dump for AF_INET lists only the IPv4 ones, then DONE.
        let s = NetlinkSocket::new();
        let req = request(RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP, &[2; 12]);
        s.send_on(&t, &req, 0).expect("send");
        let r = drain(&s);
        assert_eq!(r.len(), 8);
        assert!(r[..7]
            .iter()
            .all(|(ty, m)| *ty == RTM_NEWROUTE && m[16] == 2));
        // The default route: no RTA_DST, scope link, main table.
        assert_eq!(&r[0].1[16..28], &[2, 0, 0, 0, 254, 3, 253, 1, 0, 0, 0, 0]);
        assert_eq!(r[7].0, NLMSG_DONE);
    }

    #[test]
    fn replies_are_bounded_by_the_receive_buffer() {
        let s = NetlinkSocket::new();
        s.rcvbuf.store(300, Ordering::Relaxed);
        let req = request(RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, &[0; 16]);
        for _ in 0..10 {
            s.send(&req, 0).expect("send");
        }
        let mut n = 0;
        loop {
            match s.recv(65536, false) {
                Ok(_) => n += 1,
                Err(e) => {
                    assert_eq!(e, Errno::ENOBUFS);
                    break;
                }
            }
        }
        assert!(n < 20);
        assert_eq!(s.recv(65536, false), Err(Errno::EAGAIN));
    }
}
