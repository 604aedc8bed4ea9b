//! UDP to allowed destinations outside the sandbox (`Mode::Egress`).
//!
//! A guest UDP socket that sends to a destination the policy allowed gets,
//! at that moment and not before, one host UDP socket for the destination's
//! address family. The guest's datagrams go out through it (the payload
//! only: no guest-built header ever reaches the host kernel), and a reader
//! thread brings the replies back into the sandbox as UDP packets on the
//! stack's own link, so the guest's socket receives them like any other
//! datagram and `recvfrom` names the real peer.
//!
//! Replies are accepted only from an address and port the guest socket
//! sent to (what a NAT's connection tracking does for UDP): an unrelated
//! host on the network cannot push datagrams into the sandbox through the
//! host socket's port.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use abi::Errno;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    IpAddress, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, UdpPacket, UdpRepr,
};

use crate::policy::canonical;
use crate::relay::errno_of;

/// Called by a reader thread with each reply (its sender, its payload).
/// Never called with a lock of the relay held.
pub(crate) type Deliver = Arc<dyn Fn(SocketAddr, &[u8]) + Send + Sync>;

/// Destinations remembered per guest socket for accepting replies; the
/// oldest is forgotten first. Bounded because the guest chooses them.
const MAX_PEERS: usize = 256;

/// How often an idle reader thread looks whether its socket was closed
/// (std's `UdpSocket` has no way to interrupt a blocking receive).
const READ_POLL: Duration = Duration::from_millis(250);

/// Longest a send may wait for room in the host socket's buffer. The
/// stack's lock is not held meanwhile; past it the datagram is dropped,
/// as a congested link drops it.
const SEND_TIMEOUT: Duration = Duration::from_secs(1);

/// Largest UDP payload a host socket can receive.
const MAX_DATAGRAM: usize = 65535;

struct Shared {
    closed: AtomicBool,
    /// Destinations sent to, canonical.
    peers: Mutex<VecDeque<SocketAddr>>,
}

impl Shared {
    fn knows(&self, from: SocketAddr) -> bool {
        self.peers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&from)
    }

    fn remember(&self, dest: SocketAddr) {
        let mut p = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = p.iter().position(|a| *a == dest) {
            // Most recent last, so the oldest goes first.
            p.remove(i);
        } else if p.len() >= MAX_PEERS {
            p.pop_front();
        }
        p.push_back(dest);
    }
}

/// The host side of one guest UDP socket, owned by the socket's entry;
/// dropping it (the guest closed the socket) ends the reader threads and
/// closes the host sockets within [`READ_POLL`].
pub(crate) struct UdpRelay {
    shared: Arc<Shared>,
    v4: Option<Arc<UdpSocket>>,
    v6: Option<Arc<UdpSocket>>,
    deliver: Deliver,
}

impl UdpRelay {
    pub(crate) fn new(deliver: Deliver) -> UdpRelay {
        UdpRelay {
            shared: Arc::new(Shared {
                closed: AtomicBool::new(false),
                peers: Mutex::default(),
            }),
            v4: None,
            v6: None,
            deliver,
        }
    }

    /// The host socket that carries datagrams to `dest` (canonical, already
    /// allowed by the policy), opened on first use; replies from `dest` are
    /// accepted from now on.
    pub(crate) fn route(&mut self, dest: SocketAddr) -> Result<Arc<UdpSocket>, Errno> {
        let slot = if dest.is_ipv4() {
            &mut self.v4
        } else {
            &mut self.v6
        };
        let sock = match slot {
            Some(s) => s.clone(),
            None => {
                let any = if dest.is_ipv4() {
                    IpAddr::V4(Ipv4Addr::UNSPECIFIED)
                } else {
                    IpAddr::V6(Ipv6Addr::UNSPECIFIED)
                };
                let s = UdpSocket::bind(SocketAddr::new(any, 0)).map_err(|e| errno_of(&e))?;
                s.set_read_timeout(Some(READ_POLL))
                    .map_err(|e| errno_of(&e))?;
                s.set_write_timeout(Some(SEND_TIMEOUT))
                    .map_err(|e| errno_of(&e))?;
                let s = Arc::new(s);
                let (r, shared, deliver) = (s.clone(), self.shared.clone(), self.deliver.clone());
                std::thread::Builder::new()
                    .name("netstack-udp-rx".into())
                    .spawn(move || read_loop(&r, &shared, &deliver))
                    .map_err(|_| Errno::ENOBUFS)?;
                *slot = Some(s.clone());
                s
            }
        };
        self.shared.remember(dest);
        Ok(sock)
    }
}

impl Drop for UdpRelay {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
    }
}

/// Sends one datagram through a host socket from [`UdpRelay::route`].
/// Called without the stack's lock.
pub(crate) fn send(sock: &UdpSocket, buf: &[u8], dest: SocketAddr) -> Result<usize, Errno> {
    use std::io::ErrorKind as K;
    match sock.send_to(buf, dest) {
        Ok(n) => Ok(n),
        Err(e) if matches!(e.kind(), K::WouldBlock | K::TimedOut) => {
            tracing::debug!(%dest, "netstack: host UDP send buffer full, datagram dropped");
            Ok(buf.len())
        }
        Err(e) => Err(errno_of(&e)),
    }
}

fn read_loop(sock: &UdpSocket, shared: &Shared, deliver: &Deliver) {
    use std::io::ErrorKind as K;
    let mut buf = vec![0u8; MAX_DATAGRAM];
    while !shared.closed.load(Ordering::Acquire) {
        match sock.recv_from(&mut buf) {
            Ok((n, from)) => {
                let from = SocketAddr::new(canonical(from.ip()), from.port());
                if shared.closed.load(Ordering::Acquire) {
                    return;
                }
                if shared.knows(from) {
                    deliver(from, &buf[..n]);
                } else {
                    tracing::debug!(%from, "netstack: UDP datagram from a peer never sent to, dropped");
                }
            }
            Err(e) if matches!(e.kind(), K::WouldBlock | K::TimedOut | K::Interrupted) => {}
            Err(e) => {
                // An unconnected UDP socket reports no ICMP errors; anything
                // else is unexpected. Do not spin on it.
                tracing::debug!(error = %e, "netstack: host UDP receive failed");
                std::thread::sleep(READ_POLL);
            }
        }
    }
}

/// An IP packet carrying a UDP datagram from `src` to `dst` (same family),
/// as the stack's link delivers it; `None` if it does not fit one packet.
/// Checksums are left zero: the loopback link does not check them.
pub(crate) fn udp_packet(src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> Option<Vec<u8>> {
    let udp_len = smoltcp::wire::UDP_HEADER_LEN + payload.len();
    let udp = UdpRepr {
        src_port: src.port(),
        dst_port: dst.port(),
    };
    let caps = ChecksumCapabilities::ignored();
    let emit_udp = |bytes: &mut [u8], s: IpAddress, d: IpAddress| {
        let mut p = UdpPacket::new_unchecked(bytes);
        udp.emit(
            &mut p,
            &s,
            &d,
            payload.len(),
            |b| b.copy_from_slice(payload),
            &caps,
        );
    };
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let ip = Ipv4Repr {
                src_addr: s,
                dst_addr: d,
                next_header: IpProtocol::Udp,
                payload_len: udp_len,
                hop_limit: 64,
            };
            if ip.buffer_len() + udp_len > crate::device::LOOPBACK_MTU {
                return None;
            }
            let mut buf = vec![0u8; ip.buffer_len() + udp_len];
            let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
            ip.emit(&mut p, &caps);
            emit_udp(p.payload_mut(), s.into(), d.into());
            Some(buf)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let ip = Ipv6Repr {
                src_addr: s,
                dst_addr: d,
                next_header: IpProtocol::Udp,
                payload_len: udp_len,
                hop_limit: 64,
            };
            if ip.buffer_len() + udp_len > crate::device::LOOPBACK_MTU {
                return None;
            }
            let mut buf = vec![0u8; ip.buffer_len() + udp_len];
            let mut p = Ipv6Packet::new_unchecked(&mut buf[..]);
            ip.emit(&mut p);
            emit_udp(p.payload_mut(), s.into(), d.into());
            Some(buf)
        }
        _ => None,
    }
}
