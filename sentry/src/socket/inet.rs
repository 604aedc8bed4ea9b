//! Internet sockets: file descriptions over the sandbox's netstack.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use abi::Errno;
use netstack::{Domain, SocketId, SocketType, Wakeups};

use crate::kernel::wait::WaitQueue;
use crate::sync::Locked;
use crate::vfs::fasync::{Fasync, Reason};

/// An `AF_INET`/`AF_INET6` socket.
#[derive(Debug)]
pub struct InetSocket {
    /// the netstack socket (dropping it is `close`)
    pub sock: netstack::Socket,
    /// address family
    pub domain: Domain,
    /// TCP or UDP
    pub ty: SocketType,
    /// `listen` was called
    pub listening: AtomicBool,
    /// `SO_BROADCAST` (kept and read back: the sandbox's networks have no
    /// broadcast address to send to)
    pub broadcast: AtomicBool,
    /// `SO_RCVTIMEO`/`SO_SNDTIMEO`
    pub timeouts: super::SockTimeouts,
    /// descriptions with `O_ASYNC`, signalled on the netstack's wake-ups
    pub fasync: Arc<Fasync>,
    /// the control messages asked for (`SO_TIMESTAMP`, `IP_PKTINFO`, ...)
    pub cmsgs: super::cmsg::RecvCmsgs,
    /// The last datagram's arrival as the guest's `CLOCK_REALTIME`, by its
    /// arrival instant: a `MSG_PEEK` and the read after it report the very
    /// same stamp, as Linux's (kept in the skb) are.
    pub last_stamp: Mutex<Option<(std::time::Instant, (i64, i64))>>,
    /// callers blocked on the socket, woken when the stack names it
    pub waiters: WaitQueue,
    queues: Arc<InetQueues>,
}

impl Drop for InetSocket {
    fn drop(&mut self) {
        self.queues.remove(self.sock.id());
    }
}

impl InetSocket {
    /// Wraps a netstack socket, whose waiters `queues` wakes.
    pub fn new(
        sock: netstack::Socket,
        domain: Domain,
        ty: SocketType,
        queues: &Arc<InetQueues>,
    ) -> Self {
        let waiters = WaitQueue::new();
        queues.add(sock.id(), waiters.clone());
        InetSocket {
            sock,
            domain,
            ty,
            listening: AtomicBool::new(false),
            broadcast: AtomicBool::new(false),
            timeouts: super::SockTimeouts::default(),
            fasync: Arc::default(),
            cmsgs: super::cmsg::RecvCmsgs::default(),
            last_stamp: Mutex::new(None),
            waiters,
            queues: queues.clone(),
        }
    }

    /// Whether `listen` was called.
    pub fn is_listening(&self) -> bool {
        self.listening.load(Ordering::Relaxed)
    }
}

/// The wait queues of the guest's netstack sockets, by id: the stack's
/// notifier wakes the waiters of the sockets whose readiness changed.
#[derive(Debug, Default)]
pub struct InetQueues {
    map: Mutex<HashMap<SocketId, WaitQueue>>,
}

impl InetQueues {
    fn add(&self, id: SocketId, q: WaitQueue) {
        // One entry per live socket, which the stack's socket limit bounds.
        self.lock().insert(id, q);
    }

    fn remove(&self, id: SocketId) {
        self.lock().remove(&id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SocketId, WaitQueue>> {
        self.map.locked()
    }

    /// The stack's notifier: wakes the waiters of the sockets named.
    pub fn notify(&self, ids: &[SocketId]) {
        let m = self.lock();
        for id in ids {
            if let Some(q) = m.get(id) {
                q.notify();
            }
        }
    }
}

/// The netstack sockets that have descriptions with `O_ASYNC`, so that
/// the stack's notifier can signal their owners.
#[derive(Debug, Default)]
pub struct AsyncSockets {
    map: Mutex<HashMap<SocketId, Weak<Fasync>>>,
}

impl AsyncSockets {
    /// Signals for `sock` from now on (`O_ASYNC` set on one of its
    /// descriptions); what happened before is forgotten.
    pub fn register(&self, sock: &InetSocket) {
        let id = sock.sock.id();
        sock.sock.stack().set_async(id, true);
        let mut m = self.map.locked();
        // At most one entry per live netstack socket, which the stack's
        // own socket limit bounds.
        m.retain(|_, f| f.strong_count() > 0);
        m.insert(id, Arc::downgrade(&sock.fasync));
    }

    /// The stack's notifier: signals the owners of the sockets named that
    /// something happened to.
    pub fn notify(&self, stack: &netstack::Stack, ids: &[SocketId]) {
        let lists: Vec<(SocketId, Arc<Fasync>)> = {
            let m = self.map.locked();
            if m.is_empty() {
                return;
            }
            ids.iter()
                .filter_map(|id| m.get(id).and_then(Weak::upgrade).map(|f| (*id, f)))
                .collect()
        };
        for (id, list) in lists {
            if list.is_empty() {
                continue;
            }
            for reason in reasons(stack.take_wakeups(id)) {
                list.kill(reason);
            }
        }
    }
}

/// The signals Linux sends for what happened, in the order its callbacks
/// would have: the connection, the data, the peer's FIN, an error, room to
/// write.
fn reasons(w: Wakeups) -> Vec<Reason> {
    let mut out = Vec::new();
    if w.connected {
        out.push(Reason::Out);
    }
    if w.fin {
        // tcp_fin()'s own signal, then tcp_data_ready()'s for the segment
        // that carried the FIN (SOCK_DONE makes it readable), which also
        // stands for any data that came with it.
        out.push(if w.fin_both { Reason::Hup } else { Reason::In });
        out.push(Reason::In);
    } else if w.data {
        out.push(Reason::In);
    }
    if w.error {
        out.push(Reason::Err);
    }
    if w.space {
        out.push(Reason::Out);
    }
    out
}

/// `AF_INET`.
pub const AF_INET: u16 = 2;
/// `AF_INET6`.
pub const AF_INET6: u16 = 10;

/// Parses a `sockaddr_in`/`sockaddr_in6` for a socket of `domain`.
pub fn parse_addr(raw: &[u8], domain: Domain) -> Result<SocketAddr, Errno> {
    if raw.len() < 2 {
        return Err(Errno::EINVAL);
    }
    let family = u16::from_ne_bytes([raw[0], raw[1]]);
    match (family, domain) {
        (AF_INET, _) => {
            if raw.len() < 16 {
                return Err(Errno::EINVAL);
            }
            if domain == Domain::Inet6 {
                // An AF_INET address on an AF_INET6 socket.
                return Err(Errno::EAFNOSUPPORT);
            }
            let port = u16::from_be_bytes([raw[2], raw[3]]);
            let ip = Ipv4Addr::new(raw[4], raw[5], raw[6], raw[7]);
            Ok(SocketAddr::V4(SocketAddrV4::new(ip, port)))
        }
        (AF_INET6, Domain::Inet6) => {
            if raw.len() < 24 {
                return Err(Errno::EINVAL);
            }
            let port = u16::from_be_bytes([raw[2], raw[3]]);
            let flow = u32::from_be_bytes([raw[4], raw[5], raw[6], raw[7]]);
            let mut a = [0u8; 16];
            a.copy_from_slice(&raw[8..24]);
            let scope = if raw.len() >= 28 {
                u32::from_ne_bytes([raw[24], raw[25], raw[26], raw[27]])
            } else {
                0
            };
            Ok(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a),
                port,
                flow,
                scope,
            )))
        }
        (AF_INET6, Domain::Inet) => Err(Errno::EAFNOSUPPORT),
        // AF_UNSPEC on connect means "disconnect" (handled by the caller).
        _ => Err(Errno::EAFNOSUPPORT),
    }
}

/// Encodes `addr` as the sockaddr of a socket of `domain` (IPv4 peers of
/// an IPv6 socket appear v4-mapped).
pub fn encode_addr(addr: SocketAddr, domain: Domain) -> Vec<u8> {
    match (addr, domain) {
        (SocketAddr::V4(a), Domain::Inet) => {
            let mut v = AF_INET.to_ne_bytes().to_vec();
            v.extend_from_slice(&a.port().to_be_bytes());
            v.extend_from_slice(&a.ip().octets());
            v.extend_from_slice(&[0u8; 8]);
            v
        }
        (a, _) => {
            let (ip, port, flow, scope) = match a {
                SocketAddr::V6(a6) => (*a6.ip(), a6.port(), a6.flowinfo(), a6.scope_id()),
                SocketAddr::V4(a4) => (a4.ip().to_ipv6_mapped(), a4.port(), 0, 0),
            };
            let mut v = AF_INET6.to_ne_bytes().to_vec();
            v.extend_from_slice(&port.to_be_bytes());
            v.extend_from_slice(&flow.to_be_bytes());
            v.extend_from_slice(&ip.octets());
            v.extend_from_slice(&scope.to_ne_bytes());
            v
        }
    }
}

/// The unspecified address of `domain` (for `getsockname` before bind).
pub fn unspecified(domain: Domain) -> SocketAddr {
    match domain {
        Domain::Inet => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        Domain::Inet6 => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakeups_become_linuxs_signals_in_order() {
        let w = |f: fn(&mut Wakeups)| {
            let mut w = Wakeups::default();
            f(&mut w);
            reasons(w)
        };
        assert_eq!(w(|w| w.data = true), vec![Reason::In]);
        // tcp_fin()'s signal, then tcp_data_ready()'s.
        assert_eq!(w(|w| w.fin = true), vec![Reason::In, Reason::In]);
        assert_eq!(
            w(|w| {
                w.fin = true;
                w.fin_both = true;
                w.data = true;
            }),
            vec![Reason::Hup, Reason::In]
        );
        assert_eq!(
            w(|w| {
                w.connected = true;
                w.space = true;
            }),
            vec![Reason::Out, Reason::Out]
        );
        assert_eq!(w(|w| w.error = true), vec![Reason::Err]);
        assert!(reasons(Wakeups::default()).is_empty());
    }
}

/// A TCP connection the Sentry itself opens to a guest listener on the
/// sandbox's loopback (`ferrovisor sandbox port`), used by a host thread:
/// it blocks as a guest's blocking socket does, on the socket's queue.
#[derive(Debug)]
pub struct LoopbackConn {
    sock: InetSocket,
}

impl LoopbackConn {
    /// Connects to `127.0.0.1:port` in the sandbox (`ECONNREFUSED` when
    /// nothing listens there).
    pub fn connect(kernel: &crate::kernel::Kernel, port: u16) -> Result<LoopbackConn, Errno> {
        let s = kernel.net.socket(Domain::Inet, SocketType::Stream)?;
        let sock = InetSocket::new(
            s,
            Domain::Inet,
            SocketType::Stream,
            &super::state(kernel).inet_queues,
        );
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        match sock.sock.connect(addr) {
            Ok(()) => return Ok(LoopbackConn { sock }),
            Err(Errno::EINPROGRESS | Errno::EALREADY) => {}
            Err(e) => return Err(e),
        }
        let c = LoopbackConn { sock };
        c.wait(|r| r.writable || r.error || r.hup)?;
        match c.sock.sock.take_error()? {
            Some(e) => Err(e),
            None => match c.sock.sock.connect(addr) {
                Ok(()) | Err(Errno::EISCONN) => Ok(c),
                Err(e) => Err(e),
            },
        }
    }

    fn wait(&self, ready: impl Fn(netstack::Readiness) -> bool) -> Result<(), Errno> {
        let sleeper = crate::kernel::wait::Uninterruptible::default();
        crate::kernel::wait::wait_until(
            &sleeper,
            std::slice::from_ref(&self.sock.waiters),
            None,
            || match self.sock.sock.readiness() {
                Ok(r) if ready(r) => Some(Ok(())),
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            },
        )
        .map_err(|_| Errno::EINTR)?
    }

    /// Reads what the guest sent, waiting for some; 0 at its end.
    pub fn read(&self, buf: &mut [u8]) -> Result<usize, Errno> {
        loop {
            match self.sock.sock.recv(buf, false) {
                Err(Errno::EAGAIN) => self.wait(|r| r.readable || r.hup || r.rdhup || r.error)?,
                r => return r,
            }
        }
    }

    /// Sends all of `buf` to the guest, waiting for room.
    pub fn write_all(&self, mut buf: &[u8]) -> Result<(), Errno> {
        while !buf.is_empty() {
            match self.sock.sock.send(buf) {
                Ok(n) => buf = &buf[n..],
                Err(Errno::EAGAIN) => self.wait(|r| r.writable || r.hup || r.error)?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// No more to send: the guest reads its end.
    pub fn shutdown_write(&self) {
        let _ = self.sock.sock.shutdown(netstack::Shutdown::Write);
    }
}
