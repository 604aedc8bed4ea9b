//! `AF_NETLINK` route sockets: enough of rtnetlink for programs that list
//! interfaces and addresses (`getifaddrs`, `if_nameindex`, `ip addr`, `ip
//! link`, glibc's `AI_ADDRCONFIG` check) to see the sandbox's network,
//! which is its loopback interface. Nothing can be changed through them:
//! requests that would change links, addresses or routes get `EPERM`, as
//! for a process without `CAP_NET_ADMIN` in the host's namespace; other
//! requests get `EOPNOTSUPP`.
//!
//! Replies are built when the request is sent and queued on the socket,
//! bounded by its receive buffer (`ENOBUFS` beyond, as Linux reports an
//! overrun).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use abi::Errno;

/// `NETLINK_ROUTE`, the only protocol served.
pub const NETLINK_ROUTE: i32 = 0;

/// The interface table of the sandbox: its loopback.
pub struct Interface {
    pub index: i32,
    pub name: &'static str,
    pub mtu: u32,
    /// `IFF_*` flags.
    pub flags: u32,
    /// (address, prefix length) pairs.
    pub addrs: &'static [(std::net::IpAddr, u8)],
}

/// `IFF_UP | IFF_LOOPBACK | IFF_RUNNING | IFF_LOWER_UP`.
const LO_FLAGS: u32 = 0x1 | 0x8 | 0x40 | 0x1_0000;

/// Every interface of the sandbox.
pub static INTERFACES: &[Interface] = &[Interface {
    index: 1,
    name: "lo",
    mtu: 65536,
    flags: LO_FLAGS,
    addrs: &[
        (std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8),
        (std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST), 128),
    ],
}];

const NLMSG_HDRLEN: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_MULTI: u16 = 0x2;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_DUMP: u16 = 0x300;

const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_NEWADDR: u16 = 20;
const RTM_GETADDR: u16 = 22;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;

const IFLA_ADDRESS: u16 = 1;
const IFLA_BROADCAST: u16 = 2;
const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
const IFLA_TXQLEN: u16 = 13;
const IFLA_OPERSTATE: u16 = 16;
const IFLA_LINKMODE: u16 = 17;
const IFLA_QDISC: u16 = 6;
const IFLA_GROUP: u16 = 27;

const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFA_LABEL: u16 = 3;
const IFA_CACHEINFO: u16 = 6;
const IFA_FLAGS: u16 = 8;

const IFA_F_PERMANENT: u32 = 0x80;
const RT_SCOPE_HOST: u8 = 254;
const ARPHRD_LOOPBACK: u16 = 772;
/// `IF_OPER_UNKNOWN`: what Linux reports for `lo`.
const IF_OPER_UNKNOWN: u8 = 0;

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
    pub fasync: crate::fasync::Fasync,
    /// `SO_RCVTIMEO`/`SO_SNDTIMEO` (a send never waits here: replies are
    /// queued at once, so only the receive timeout has an effect).
    pub timeouts: super::SockTimeouts,
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
    b.extend_from_slice(&ARPHRD_LOOPBACK.to_ne_bytes());
    b.extend_from_slice(&i.index.to_ne_bytes());
    b.extend_from_slice(&i.flags.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    let mut name = i.name.as_bytes().to_vec();
    name.push(0);
    put_attr(&mut b, IFLA_IFNAME, &name);
    put_attr(&mut b, IFLA_TXQLEN, &1000u32.to_ne_bytes());
    put_attr(&mut b, IFLA_OPERSTATE, &[IF_OPER_UNKNOWN]);
    put_attr(&mut b, IFLA_LINKMODE, &[0]);
    put_attr(&mut b, IFLA_MTU, &i.mtu.to_ne_bytes());
    put_attr(&mut b, IFLA_GROUP, &0u32.to_ne_bytes());
    put_attr(&mut b, IFLA_QDISC, b"noqueue\0");
    put_attr(&mut b, IFLA_ADDRESS, &[0; 6]);
    put_attr(&mut b, IFLA_BROADCAST, &[0; 6]);
    b
}

fn addr_body(i: &Interface, addr: std::net::IpAddr, prefix: u8) -> Vec<u8> {
    let mut b = Vec::new();
    let (family, octets): (u8, Vec<u8>) = match addr {
        std::net::IpAddr::V4(a) => (2, a.octets().to_vec()),
        std::net::IpAddr::V6(a) => (10, a.octets().to_vec()),
    };
    let flags = IFA_F_PERMANENT;
    // struct ifaddrmsg
    b.push(family);
    b.push(prefix);
    b.push(flags as u8);
    b.push(RT_SCOPE_HOST);
    b.extend_from_slice(&(i.index as u32).to_ne_bytes());
    put_attr(&mut b, IFA_ADDRESS, &octets);
    if family == 2 {
        put_attr(&mut b, IFA_LOCAL, &octets);
        let mut label = i.name.as_bytes().to_vec();
        label.push(0);
        put_attr(&mut b, IFA_LABEL, &label);
    }
    put_attr(&mut b, IFA_FLAGS, &flags.to_ne_bytes());
    // struct ifa_cacheinfo: preferred and valid lifetimes "forever".
    let mut ci = Vec::new();
    ci.extend_from_slice(&u32::MAX.to_ne_bytes());
    ci.extend_from_slice(&u32::MAX.to_ne_bytes());
    ci.extend_from_slice(&0u32.to_ne_bytes());
    ci.extend_from_slice(&0u32.to_ne_bytes());
    put_attr(&mut b, IFA_CACHEINFO, &ci);
    b
}

fn error_body(errno: i32, request: &[u8]) -> Vec<u8> {
    let mut b = (-errno).to_ne_bytes().to_vec();
    // The request's header, as Linux echoes it (without the payload when
    // the request succeeded or with NETLINK_CAP_ACK; we always cap).
    b.extend_from_slice(&request[..NLMSG_HDRLEN.min(request.len())]);
    b
}

/// Finds the name an `IFLA_IFNAME` attribute in `attrs` gives.
fn ifname_attr(mut attrs: &[u8]) -> Option<&[u8]> {
    while attrs.len() >= 4 {
        let len = u16::from_ne_bytes([attrs[0], attrs[1]]) as usize;
        let ty = u16::from_ne_bytes([attrs[2], attrs[3]]) & 0x3fff;
        if len < 4 || len > attrs.len() {
            return None;
        }
        if ty == IFLA_IFNAME {
            let v = &attrs[4..len];
            return Some(v.split(|&c| c == 0).next().unwrap_or(v));
        }
        attrs = &attrs[align4(len).min(attrs.len())..];
    }
    None
}

impl NetlinkSocket {
    pub fn new() -> NetlinkSocket {
        NetlinkSocket {
            port: AtomicU32::new(0),
            queue: Mutex::default(),
            rcvbuf: AtomicU32::new(DEFAULT_RCVBUF as u32),
            fasync: Default::default(),
            timeouts: super::SockTimeouts::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
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
    pub fn send(&self, data: &[u8]) -> Result<usize, Errno> {
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
                    for i in INTERFACES {
                        out.push(message(RTM_NEWLINK, NLM_F_MULTI, seq, port, &link_body(i)));
                    }
                }
                RTM_GETLINK => {
                    // One link, by index or by name.
                    let index = body
                        .get(4..8)
                        .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                    let name = body.get(16..).and_then(ifname_attr);
                    let found = INTERFACES.iter().find(|i| {
                        (index != 0 && i.index == index)
                            || (index == 0 && name == Some(i.name.as_bytes()))
                    });
                    match found {
                        Some(i) => out.push(message(RTM_NEWLINK, 0, seq, port, &link_body(i))),
                        None => result = Err(Errno::ENODEV),
                    }
                }
                RTM_GETADDR if dump => {
                    for i in INTERFACES {
                        for &(a, p) in i.addrs {
                            let fam = if a.is_ipv4() { 2 } else { 10 };
                            if family == 0 || family == fam {
                                out.push(message(
                                    RTM_NEWADDR,
                                    NLM_F_MULTI,
                                    seq,
                                    port,
                                    &addr_body(i, a, p),
                                ));
                            }
                        }
                    }
                }
                // The main routing table of a namespace with only `lo` up
                // is empty.
                RTM_GETROUTE if dump => {}
                RTM_GETADDR | RTM_GETROUTE => result = Err(Errno::EOPNOTSUPP),
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
        // Linux queues the replies to one request (a whole small dump with
        // its NLMSG_DONE) in one buffer: one signal.
        if queued {
            self.fasync.kill(crate::fasync::Reason::In);
        }
        if overrun {
            self.fasync.kill(crate::fasync::Reason::Err);
        }
        Ok(data.len())
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
        assert_eq!(s.send(&req), Ok(req.len()));
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
        s.send(&req).expect("send");
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
        s.send(&req).expect("send");
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
            let _ = s.send(&junk);
        }
    }

    #[test]
    fn replies_are_bounded_by_the_receive_buffer() {
        let s = NetlinkSocket::new();
        s.rcvbuf.store(300, Ordering::Relaxed);
        let req = request(RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, &[0; 16]);
        for _ in 0..10 {
            s.send(&req).expect("send");
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
