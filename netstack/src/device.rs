//! The link under the smoltcp interface: a loopback queue in `Loopback`
//! mode. Every packet the interface transmits comes back as received.
//!
//! The device also implements the part of `listen(2)`'s backlog that smoltcp
//! lacks: smoltcp answers a SYN for which no socket is listening with a RST,
//! but Linux drops a SYN when the listener's queue is full, so the client
//! retries. A *SYN gate* per listening port says how many new SYNs may pass
//! in this poll round; a SYN over that budget is held for the next round
//! (when the stack has added listening sockets) or dropped when the backlog
//! is full.
//!
//! It is also where the per-packet facts smoltcp does not keep live:
//! smoltcp emits every packet with TOS (traffic class) 0 and one hop limit
//! per socket, so the UDP datagrams of a guest socket leave the stack
//! *marked* (their `PacketMeta` id carries the socket's TTL or hop limit
//! and TOS or traffic class) and the device writes those into the IP
//! header as it transmits them. smoltcp passes no `PacketMeta` down for
//! IPv6 packets, so an IPv6 datagram is marked by its source port instead:
//! the stack records the sending socket's values just before it queues
//! the datagram, which (operations running the protocol before they
//! return) goes out before another send can change them. On the way in it notes what each UDP
//! datagram's header said and when it arrived, under an id smoltcp keeps
//! with the datagram (`IP_RECVTTL`, `IP_RECVTOS`, `SO_TIMESTAMP`), and
//! picks out ICMP port unreachable messages about UDP datagrams, which the
//! stack turns into `ECONNREFUSED` (`IP_RECVERR`).
//!
//! smoltcp passes no `PacketMeta` for TCP segments either, so a TCP
//! connection's TOS (traffic class) is written by its addresses and ports:
//! the stack records each connection's value when it is opened, accepted
//! or changed, and each listening port's values for its SYN-ACKs (a
//! connection not yet seen by the stack answers its handshake with its
//! listener's, as Linux's `tcp_v4_send_synack` does). TCP's ECN bits stay
//! 0: smoltcp does not do ECN.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use smoltcp::iface::SocketHandle;
use smoltcp::phy::{self, ChecksumCapabilities, DeviceCapabilities, Medium, PacketMeta};
use smoltcp::time::Instant;

/// Largest IP packet on the loopback link. 65535 is the most an IPv4 total
/// length can say; Linux's `lo` uses 65536. Large packets mean few trips
/// through the TCP state machine per megabyte.
pub(crate) const LOOPBACK_MTU: usize = 65535;

/// Bytes of packets that may wait in the loopback queue. Each poll round
/// transmits at most one packet per socket, and the stack drains the queue
/// every round, so this only bounds a pathological round.
const MAX_QUEUED_BYTES: usize = 16 << 20;

/// Buffers kept for reuse.
const POOL_SIZE: usize = 64;

/// Arrivals of UDP datagrams remembered at once. A datagram keeps its entry
/// until it is read; one smoltcp dropped (no socket, a full buffer) keeps
/// it until this many newer ones pushed it out. A datagram whose entry is
/// gone reads as sent with the defaults, at the time it is read.
pub(crate) const MAX_ARRIVALS: usize = 1 << 16;

/// IPv4 SYNs to listening ports whose header is remembered for the
/// connection they open (`IP_PKTOPTIONS`); the oldest give way.
const MAX_SYN_HEADERS: usize = 4096;

/// ICMP errors waiting for the stack, which takes them after every round.
const MAX_UNREACHABLE: usize = 1024;

/// The bit of a `PacketMeta` id that marks an outgoing datagram's header
/// fields; ids of arrivals never have it.
const TX_MARK: u32 = 1 << 31;

/// The `PacketMeta` of a UDP datagram sent with TTL (hop limit) `hop_limit`
/// and TOS (traffic class) `tos`.
pub(crate) fn tx_mark(hop_limit: u8, tos: u8) -> PacketMeta {
    let mut m = PacketMeta::default();
    m.id = TX_MARK | u32::from(tos) << 8 | u32::from(hop_limit);
    m
}

/// What a UDP datagram's IP header said, and when it arrived.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Arrival {
    pub hop_limit: u8,
    pub tos: u8,
    pub at: std::time::Instant,
}

/// An ICMP destination unreachable (port unreachable) about a UDP datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Unreachable {
    pub icmp_type: u8,
    pub icmp_code: u8,
    /// The ICMP message's source.
    pub offender: IpAddr,
    /// The quoted datagram's source and destination.
    pub src: SocketAddr,
    pub dst: SocketAddr,
    /// The part of its payload the message quoted.
    pub payload: Vec<u8>,
}

/// How many new connections may reach a listening port this round.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SynGate {
    /// SYNs that may pass before the next round.
    pub budget: usize,
    /// The backlog is full: SYNs over budget are dropped, not held.
    pub full: bool,
}

#[derive(Default)]
struct Queues {
    rx: VecDeque<Vec<u8>>,
    queued_bytes: usize,
    pool: Vec<Vec<u8>>,
    /// Hop limit and traffic class of IPv6 UDP datagrams by source port.
    v6_marks: HashMap<u16, (u8, u8)>,
    /// TOS (traffic class) of a TCP connection's segments by (source,
    /// destination), with the smoltcp socket that set it.
    tcp_marks: HashMap<(SocketAddr, SocketAddr), (u8, SocketHandle)>,
    /// TOS and traffic class of a listening port's SYN-ACKs.
    syn_ack_marks: HashMap<u16, (u8, u8)>,
    /// Every TCP segment transmitted: source, destination, flags, TOS
    /// (tests only).
    #[cfg(test)]
    tcp_log: Vec<(SocketAddr, SocketAddr, u8, u8)>,
}

impl Queues {
    fn recycle(&mut self, buf: Vec<u8>) {
        if self.pool.len() < POOL_SIZE {
            self.pool.push(buf);
        }
    }
}

/// The loopback link.
pub(crate) struct Loopback {
    queues: RefCell<Queues>,
    /// SYNs held back for the next round.
    deferred: VecDeque<Vec<u8>>,
    /// Packets that may still be received in this round: only those queued
    /// before it started, so replies wait for the next round and a round is
    /// bounded.
    rx_budget: usize,
    /// Packets handed to the interface in this round.
    pub delivered: usize,
    /// SYN gates by destination port, set by the stack before each round.
    pub gates: HashMap<u16, SynGate>,
    /// UDP datagrams' arrivals by id.
    arrivals: HashMap<u32, Arrival>,
    /// Their ids, oldest first (some already taken).
    arrival_order: VecDeque<u32>,
    next_arrival: u32,
    /// Port unreachable messages not yet taken by the stack.
    pub unreachable: Vec<Unreachable>,
    /// TTL and TOS of IPv4 SYNs to listening ports, by (source,
    /// destination), until the connection is accepted.
    syn_headers: HashMap<(SocketAddr, SocketAddr), (u8, u8)>,
    /// Their keys, oldest first (some already taken).
    syn_order: VecDeque<(SocketAddr, SocketAddr)>,
}

impl Loopback {
    pub(crate) fn new() -> Loopback {
        Loopback {
            queues: RefCell::default(),
            deferred: VecDeque::new(),
            rx_budget: 0,
            delivered: 0,
            gates: HashMap::new(),
            arrivals: HashMap::new(),
            arrival_order: VecDeque::new(),
            next_arrival: 1,
            unreachable: Vec::new(),
            syn_headers: HashMap::new(),
            syn_order: VecDeque::new(),
        }
    }

    /// Notes the TTL and TOS of `syn`, an IPv4 SYN to a listening port:
    /// Linux gives the connection it opens the values of its handshake
    /// (`tcp_v4_syn_recv_sock`: `mc_ttl`, `rcv_tos`).
    fn note_syn(&mut self, syn: &[u8]) {
        if syn.first().map(|b| b >> 4) != Some(4) {
            return;
        }
        let Some((src, dst, _, tos)) = tcp_segment(syn) else {
            return;
        };
        while self.syn_headers.len() >= MAX_SYN_HEADERS {
            match self.syn_order.pop_front() {
                Some(old) => {
                    self.syn_headers.remove(&old);
                }
                None => break,
            }
        }
        if self.syn_order.len() >= 2 * MAX_SYN_HEADERS {
            let live = &self.syn_headers;
            self.syn_order.retain(|k| live.contains_key(k));
        }
        self.syn_headers.insert((src, dst), (syn[8], tos));
        self.syn_order.push_back((src, dst));
    }

    /// The TTL and TOS of the SYN that opened the connection from `src`
    /// to `dst`, forgotten once taken.
    pub(crate) fn take_syn_header(&mut self, src: SocketAddr, dst: SocketAddr) -> Option<(u8, u8)> {
        self.syn_headers.remove(&(src, dst))
    }

    /// The arrival noted under `id` (a received datagram's `PacketMeta`);
    /// `take` forgets it (the datagram was read).
    pub(crate) fn arrival(&mut self, id: u32, take: bool) -> Option<Arrival> {
        if take {
            self.arrivals.remove(&id)
        } else {
            self.arrivals.get(&id).copied()
        }
    }

    /// Notes the arrival of a UDP datagram whose header said `hop_limit`
    /// and `tos`; returns the id smoltcp will keep with it.
    fn note_arrival(&mut self, hop_limit: u8, tos: u8) -> u32 {
        let id = self.next_arrival;
        self.next_arrival = if id >= TX_MARK - 1 { 1 } else { id + 1 };
        while self.arrivals.len() >= MAX_ARRIVALS {
            match self.arrival_order.pop_front() {
                Some(old) => {
                    self.arrivals.remove(&old);
                }
                None => break,
            }
        }
        // Ids of datagrams already read linger in the order list: drop
        // them once they outnumber the live ones.
        if self.arrival_order.len() >= 2 * MAX_ARRIVALS {
            let live = &self.arrivals;
            self.arrival_order.retain(|i| live.contains_key(i));
        }
        self.arrivals.insert(
            id,
            Arrival {
                hop_limit,
                tos,
                at: std::time::Instant::now(),
            },
        );
        self.arrival_order.push_back(id);
        id
    }

    /// Starts a poll round: held SYNs go first, then what is queued.
    pub(crate) fn start_round(&mut self) {
        let q = self.queues.get_mut();
        while let Some(p) = self.deferred.pop_back() {
            q.queued_bytes += p.len();
            q.rx.push_front(p);
        }
        self.rx_budget = q.rx.len();
        self.delivered = 0;
    }

    /// Queues `packet` as received from the link (a datagram the UDP relay
    /// brought back from outside). Dropped, as a full link drops it, when
    /// the queue is at its bound; returns whether it was queued.
    pub(crate) fn inject(&mut self, packet: Vec<u8>) -> bool {
        let q = self.queues.get_mut();
        if q.queued_bytes.saturating_add(packet.len()) > MAX_QUEUED_BYTES {
            return false;
        }
        q.queued_bytes += packet.len();
        q.rx.push_back(packet);
        true
    }

    /// IPv6 UDP datagrams from `port` go out with hop limit `hop` and
    /// traffic class `tclass` from now on.
    pub(crate) fn mark_v6_source(&mut self, port: u16, hop: u8, tclass: u8) {
        self.queues.get_mut().v6_marks.insert(port, (hop, tclass));
    }

    /// The socket on `port` is gone.
    pub(crate) fn forget_v6_source(&mut self, port: u16) {
        self.queues.get_mut().v6_marks.remove(&port);
    }

    /// The TCP segments smoltcp socket `h` sends from `src` to `dst` carry
    /// TOS (traffic class) `tos` from now on (0, smoltcp's own: no mark).
    pub(crate) fn mark_tcp(&mut self, h: SocketHandle, src: SocketAddr, dst: SocketAddr, tos: u8) {
        let marks = &mut self.queues.get_mut().tcp_marks;
        if tos == 0 {
            Self::unmark(marks, h, (src, dst));
        } else {
            marks.insert((src, dst), (tos, h));
        }
    }

    /// Socket `h`'s connection from `src` to `dst` is gone: its mark goes,
    /// unless a newer connection with the same addresses took it over.
    pub(crate) fn unmark_tcp(&mut self, h: SocketHandle, src: SocketAddr, dst: SocketAddr) {
        Self::unmark(&mut self.queues.get_mut().tcp_marks, h, (src, dst));
    }

    fn unmark(
        marks: &mut HashMap<(SocketAddr, SocketAddr), (u8, SocketHandle)>,
        h: SocketHandle,
        key: (SocketAddr, SocketAddr),
    ) {
        if marks.get(&key).is_some_and(|&(_, owner)| owner == h) {
            marks.remove(&key);
        }
    }

    /// SYN-ACKs from listening `port` carry TOS `tos` (IPv4) or traffic
    /// class `tclass` (IPv6); `None`: the port no longer listens.
    pub(crate) fn mark_listener(&mut self, port: u16, marks: Option<(u8, u8)>) {
        let m = &mut self.queues.get_mut().syn_ack_marks;
        match marks {
            Some((0, 0)) | None => m.remove(&port),
            Some(v) => m.insert(port, v),
        };
    }

    /// The TCP segments transmitted since the last call: source,
    /// destination, flags and TOS (traffic class).
    #[cfg(test)]
    pub(crate) fn take_tcp_log(&mut self) -> Vec<(SocketAddr, SocketAddr, u8, u8)> {
        std::mem::take(&mut self.queues.get_mut().tcp_log)
    }

    /// TCP connections and listening ports with a mark (tests only).
    #[cfg(test)]
    pub(crate) fn tcp_marks_left(&self) -> usize {
        let q = self.queues.borrow();
        q.tcp_marks.len() + q.syn_ack_marks.len()
    }

    /// Whether packets are waiting.
    pub(crate) fn has_pending(&self) -> bool {
        !self.queues.borrow().rx.is_empty() || !self.deferred.is_empty()
    }
}

/// The destination port of a TCP segment that opens a connection (SYN
/// without ACK), if `packet` is one.
pub(crate) fn syn_dst_port(packet: &[u8]) -> Option<u16> {
    let version = packet.first()? >> 4;
    let tcp = match version {
        4 => {
            let ihl = usize::from(packet.first()? & 0x0f) * 4;
            let proto = *packet.get(9)?;
            // Only the first fragment carries the TCP header.
            let frag = u16::from_be_bytes([*packet.get(6)?, *packet.get(7)?]) & 0x1fff;
            if proto != 6 || frag != 0 || ihl < 20 {
                return None;
            }
            packet.get(ihl..)?
        }
        6 => {
            if *packet.get(6)? != 6 {
                return None;
            }
            packet.get(40..)?
        }
        _ => return None,
    };
    let flags = *tcp.get(13)?;
    const SYN: u8 = 0x02;
    const ACK: u8 = 0x10;
    if flags & SYN != 0 && flags & ACK == 0 {
        Some(u16::from_be_bytes([*tcp.get(2)?, *tcp.get(3)?]))
    } else {
        None
    }
}

pub(crate) struct RxToken<'a> {
    buf: Vec<u8>,
    id: u32,
    queues: &'a RefCell<Queues>,
}

pub(crate) struct TxToken<'a> {
    queues: &'a RefCell<Queues>,
    /// TTL (hop limit) and TOS (traffic class) to write into the header.
    mark: Option<(u8, u8)>,
}

/// What the device reads in a packet it receives.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// A UDP datagram whose header said this TTL (hop limit) and TOS
    /// (traffic class).
    Udp {
        hop_limit: u8,
        tos: u8,
    },
    /// An ICMP port unreachable about a UDP datagram.
    Unreachable(Unreachable),
    Other,
}

/// Reads `packet`'s IP header and, for ICMP, the quoted datagram's. Never
/// panics, whatever the bytes.
fn inspect(packet: &[u8]) -> Seen {
    let Some((src, proto, hop_limit, tos, payload)) = ip_header(packet) else {
        return Seen::Other;
    };
    match proto {
        17 => Seen::Udp { hop_limit, tos },
        1 | 58 => {
            // Type and code of a port unreachable: 3/3 (ICMP), 1/4 (ICMPv6).
            let (t, c) = (payload.first().copied(), payload.get(1).copied());
            let wanted = if proto == 1 { (3, 3) } else { (1, 4) };
            if (t, c) != (Some(wanted.0), Some(wanted.1)) {
                return Seen::Other;
            }
            // The quoted datagram starts after the 8-byte ICMP header.
            let Some(quoted) = payload.get(8..) else {
                return Seen::Other;
            };
            let Some((qsrc, qproto, _, _, qpay)) = ip_header(quoted) else {
                return Seen::Other;
            };
            let qdst = ip_dst(quoted);
            let (Some(qdst), 17, Some(udp)) = (qdst, qproto, qpay.get(..8)) else {
                return Seen::Other;
            };
            let port = |o: usize| u16::from_be_bytes([udp[o], udp[o + 1]]);
            Seen::Unreachable(Unreachable {
                icmp_type: wanted.0,
                icmp_code: wanted.1,
                offender: src,
                src: SocketAddr::new(qsrc, port(0)),
                dst: SocketAddr::new(qdst, port(2)),
                payload: qpay[8..].to_vec(),
            })
        }
        _ => Seen::Other,
    }
}

/// An IP packet's source, protocol, TTL (hop limit), TOS (traffic class)
/// and payload. Extension headers of IPv6 are not followed (smoltcp sends
/// none).
fn ip_header(p: &[u8]) -> Option<(IpAddr, u8, u8, u8, &[u8])> {
    match p.first()? >> 4 {
        4 => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            if ihl < 20 {
                return None;
            }
            let src: [u8; 4] = p.get(12..16)?.try_into().ok()?;
            let total = usize::from(u16::from_be_bytes([*p.get(2)?, *p.get(3)?]));
            let payload = p.get(ihl..total.min(p.len()).max(ihl))?;
            Some((
                IpAddr::V4(Ipv4Addr::from(src)),
                *p.get(9)?,
                p[8],
                p[1],
                payload,
            ))
        }
        6 => {
            let src: [u8; 16] = p.get(8..24)?.try_into().ok()?;
            let tc = (p[0] & 0x0f) << 4 | p[1] >> 4;
            let len = usize::from(u16::from_be_bytes([p[4], p[5]]));
            let payload = p.get(40..(40 + len).min(p.len()).max(40))?;
            Some((IpAddr::V6(Ipv6Addr::from(src)), p[6], p[7], tc, payload))
        }
        _ => None,
    }
}

fn ip_dst(p: &[u8]) -> Option<IpAddr> {
    match p.first()? >> 4 {
        4 => {
            let a: [u8; 4] = p.get(16..20)?.try_into().ok()?;
            Some(IpAddr::V4(Ipv4Addr::from(a)))
        }
        6 => {
            let a: [u8; 16] = p.get(24..40)?.try_into().ok()?;
            Some(IpAddr::V6(Ipv6Addr::from(a)))
        }
        _ => None,
    }
}

/// A TCP segment's source, destination, flags and TOS (traffic class).
fn tcp_segment(p: &[u8]) -> Option<(SocketAddr, SocketAddr, u8, u8)> {
    let (src, proto, _, tos, payload) = ip_header(p)?;
    let dst = ip_dst(p)?;
    if proto != 6 {
        return None;
    }
    let port = |o: usize| Some(u16::from_be_bytes([*payload.get(o)?, *payload.get(o + 1)?]));
    Some((
        SocketAddr::new(src, port(0)?),
        SocketAddr::new(dst, port(2)?),
        *payload.get(13)?,
        tos,
    ))
}

/// The TOS (traffic class) the stack marked for TCP segment `p`, if any.
fn tcp_mark(q: &Queues, p: &[u8]) -> Option<u8> {
    if q.tcp_marks.is_empty() && q.syn_ack_marks.is_empty() {
        return None;
    }
    let (src, dst, flags, _) = tcp_segment(p)?;
    if let Some(&(tos, _)) = q.tcp_marks.get(&(src, dst)) {
        return Some(tos);
    }
    const SYN_ACK: u8 = 0x12;
    if flags & SYN_ACK != SYN_ACK {
        return None;
    }
    let &(tos, tclass) = q.syn_ack_marks.get(&src.port())?;
    Some(if src.is_ipv4() { tos } else { tclass })
}

/// Writes TTL (hop limit) `hop` and TOS (traffic class) `tos` into the IP
/// header of `p`, the IPv4 header checksum following.
fn rewrite_header(p: &mut [u8], hop: u8, tos: u8) {
    match p.first().map(|b| b >> 4) {
        Some(4) if p.len() >= 20 => {
            let ihl = (usize::from(p[0] & 0x0f) * 4).clamp(20, p.len());
            p[1] = tos;
            p[8] = hop;
            p[10] = 0;
            p[11] = 0;
            let mut sum = 0u32;
            for w in p[..ihl].chunks(2) {
                sum += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
            }
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            p[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        }
        Some(6) if p.len() >= 40 => {
            p[0] = 0x60 | tos >> 4;
            p[1] = (tos & 0x0f) << 4 | (p[1] & 0x0f);
            p[7] = hop;
        }
        _ => {}
    }
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        let r = f(&self.buf);
        self.queues.borrow_mut().recycle(self.buf);
        r
    }

    fn meta(&self) -> PacketMeta {
        let mut m = PacketMeta::default();
        m.id = self.id;
        m
    }
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        let mut buf = self.queues.borrow_mut().pool.pop().unwrap_or_default();
        // Only the grown part is zeroed; pooled buffers keep their length.
        buf.resize(len, 0);
        let r = f(&mut buf);
        let mut q = self.queues.borrow_mut();
        let mark = self.mark.or_else(|| {
            // IPv6 UDP: by source port.
            let v6_udp = buf.len() >= 48 && buf[0] >> 4 == 6 && buf[6] == 17;
            v6_udp
                .then(|| {
                    q.v6_marks
                        .get(&u16::from_be_bytes([buf[40], buf[41]]))
                        .copied()
                })
                .flatten()
        });
        if let Some((hop, tos)) = mark {
            rewrite_header(&mut buf, hop, tos);
        } else if let Some(tos) = tcp_mark(&q, &buf) {
            // TCP keeps the hop limit smoltcp wrote.
            let hop = match buf[0] >> 4 {
                4 => buf[8],
                _ => buf[7],
            };
            rewrite_header(&mut buf, hop, tos);
        }
        #[cfg(test)]
        if let Some(seg) = tcp_segment(&buf) {
            q.tcp_log.push(seg);
        }
        q.queued_bytes += buf.len();
        q.rx.push_back(buf);
        r
    }

    fn set_meta(&mut self, meta: PacketMeta) {
        self.mark = (meta.id & TX_MARK != 0).then_some((meta.id as u8, (meta.id >> 8) as u8));
    }
}

impl phy::Device for Loopback {
    type RxToken<'a> = RxToken<'a>;
    type TxToken<'a> = TxToken<'a>;

    fn receive(&mut self, _now: Instant) -> Option<(RxToken<'_>, TxToken<'_>)> {
        loop {
            if self.rx_budget == 0 {
                return None;
            }
            self.rx_budget -= 1;
            let q = self.queues.get_mut();
            let buf = q.rx.pop_front()?;
            q.queued_bytes -= buf.len();
            if let Some(port) = syn_dst_port(&buf) {
                if let Some(gate) = self.gates.get_mut(&port) {
                    if gate.budget == 0 {
                        if gate.full {
                            tracing::trace!(port, "backlog full: SYN dropped");
                            q.recycle(buf);
                        } else {
                            self.deferred.push_back(buf);
                        }
                        continue;
                    }
                    gate.budget -= 1;
                    self.note_syn(&buf);
                }
            }
            self.delivered += 1;
            let id = match inspect(&buf) {
                Seen::Udp { hop_limit, tos } => self.note_arrival(hop_limit, tos),
                Seen::Unreachable(u) => {
                    if self.unreachable.len() < MAX_UNREACHABLE {
                        self.unreachable.push(u);
                    }
                    0
                }
                Seen::Other => 0,
            };
            return Some((
                RxToken {
                    buf,
                    id,
                    queues: &self.queues,
                },
                TxToken {
                    queues: &self.queues,
                    mark: None,
                },
            ));
        }
    }

    fn transmit(&mut self, _now: Instant) -> Option<TxToken<'_>> {
        if self.queues.get_mut().queued_bytes >= MAX_QUEUED_BYTES {
            return None;
        }
        Some(TxToken {
            queues: &self.queues,
            mark: None,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ip;
        caps.max_transmission_unit = LOOPBACK_MTU;
        // Packets never leave memory: checksums would only cost time. (A
        // TAP link will keep smoltcp's defaults.)
        caps.checksum = ChecksumCapabilities::ignored();
        caps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syn_detection() {
        let mut v4 = vec![0u8; 40];
        v4[0] = 0x45;
        v4[9] = 6;
        v4[22] = 0x1f;
        v4[23] = 0x90; // port 8080
        v4[33] = 0x02; // SYN
        assert_eq!(syn_dst_port(&v4), Some(8080));
        v4[33] = 0x12; // SYN|ACK
        assert_eq!(syn_dst_port(&v4), None);
        let mut v6 = vec![0u8; 60];
        v6[0] = 0x60;
        v6[6] = 6;
        v6[42] = 0;
        v6[43] = 80;
        v6[53] = 0x02;
        assert_eq!(syn_dst_port(&v6), Some(80));
        // Truncated and garbage input never panics.
        for n in 0..v6.len() {
            let _ = syn_dst_port(&v6[..n]);
            let _ = syn_dst_port(&v4[..n.min(v4.len())]);
        }
        assert_eq!(syn_dst_port(&[0x4f; 3]), None);
    }

    fn udp4(ttl: u8, tos: u8) -> Vec<u8> {
        let mut p = vec![0u8; 33];
        p[0] = 0x45;
        p[1] = tos;
        p[3] = 33;
        p[8] = ttl;
        p[9] = 17;
        p[12..16].copy_from_slice(&[127, 0, 0, 1]);
        p[16..20].copy_from_slice(&[127, 0, 0, 1]);
        p[20..22].copy_from_slice(&4000u16.to_be_bytes());
        p[22..24].copy_from_slice(&5000u16.to_be_bytes());
        p[28..33].copy_from_slice(b"hello");
        p
    }

    #[test]
    fn header_rewrite_and_inspection_agree() {
        let mut p = udp4(64, 0);
        rewrite_header(&mut p, 17, 0xb9);
        assert_eq!(
            inspect(&p),
            Seen::Udp {
                hop_limit: 17,
                tos: 0xb9
            }
        );
        // The IPv4 header checksum still adds up.
        let sum: u32 = p[..20]
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        assert_eq!((sum & 0xffff) + (sum >> 16), 0xffff);
        let mut v6 = vec![0u8; 48];
        v6[0] = 0x60;
        v6[1] = 0x05; // part of the flow label, which stays
        v6[6] = 17;
        rewrite_header(&mut v6, 0, 0x2d);
        assert_eq!(
            inspect(&v6),
            Seen::Udp {
                hop_limit: 0,
                tos: 0x2d
            }
        );
        assert_eq!(v6[1] & 0x0f, 0x05);
    }

    #[test]
    fn port_unreachable_names_the_datagram() {
        let quoted = udp4(64, 0);
        let mut icmp = udp4(64, 0)[..20].to_vec();
        icmp[9] = 1;
        icmp.extend_from_slice(&[3, 3, 0, 0, 0, 0, 0, 0]);
        icmp.extend_from_slice(&quoted);
        let total = icmp.len() as u16;
        icmp[2..4].copy_from_slice(&total.to_be_bytes());
        let Seen::Unreachable(u) = inspect(&icmp) else {
            panic!("not seen: {:?}", inspect(&icmp));
        };
        assert_eq!(u.src, "127.0.0.1:4000".parse().expect("addr"));
        assert_eq!(u.dst, "127.0.0.1:5000".parse().expect("addr"));
        assert_eq!(u.payload, b"hello");
        assert_eq!((u.icmp_type, u.icmp_code), (3, 3));
        // Another code (host unreachable) is not a port unreachable.
        icmp[21] = 1;
        assert_eq!(inspect(&icmp), Seen::Other);
        // Truncations and garbage never panic.
        icmp[21] = 3;
        for n in 0..icmp.len() {
            let _ = inspect(&icmp[..n]);
            let mut cut = icmp[..n].to_vec();
            rewrite_header(&mut cut, 1, 1);
        }
        for b in 0..=255u8 {
            let _ = inspect(&[b; 60]);
        }
    }
}
