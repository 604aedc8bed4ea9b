//! What arrives from the link side must never hurt the stack: random,
//! truncated and corrupted IPv4/IPv6/TCP/UDP packets, and a flood of SYNs
//! from addresses that never answer, fed to the interface the way the link
//! delivers them. Afterwards the stack still serves connections.
//!
//! (Today the link is the loopback queue and the UDP relay's replies; a
//! TAP link would deliver exactly such packets, with no guarantee about
//! what is in them.)

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, TcpPacket, TcpSeqNumber, UdpPacket,
};

use crate::{Domain, Errno, Limits, Socket, SocketType, Stack, StackConfig};

/// Retries `f` while it says `EAGAIN`, for at most 10 seconds.
fn retry<T>(mut f: impl FnMut() -> Result<T, Errno>) -> Result<T, Errno> {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        match f() {
            Err(Errno::EAGAIN) if Instant::now() < end => {
                std::thread::sleep(Duration::from_millis(5));
            }
            r => return r,
        }
    }
}

fn sa(s: &str) -> SocketAddr {
    s.parse().expect("test address")
}

fn small_stack() -> Arc<Stack> {
    Stack::new(StackConfig {
        limits: Limits {
            max_sockets: 64,
            memory_budget: 64 << 20,
            ..Limits::default()
        },
        ..StackConfig::default()
    })
}

fn listen(stack: &Arc<Stack>, at: &str, backlog: i32) -> (Socket, SocketAddr) {
    let d = if at.starts_with('[') {
        Domain::Inet6
    } else {
        Domain::Inet
    };
    let l = stack.socket(d, SocketType::Stream).expect("socket");
    l.bind(sa(at)).expect("bind");
    l.listen(backlog).expect("listen");
    let a = l.local_addr().expect("addr");
    (l, a)
}

/// A connection from a fresh socket to `to`, accepted by `l`, carries bytes
/// both ways.
fn serves(stack: &Arc<Stack>, l: &Socket, to: SocketAddr) -> Result<(), String> {
    let d = if to.is_ipv4() {
        Domain::Inet
    } else {
        Domain::Inet6
    };
    let c = stack
        .socket(d, SocketType::Stream)
        .map_err(|e| format!("{e:?}"))?;
    match c.connect(to) {
        Err(Errno::EINPROGRESS) => {}
        r => return Err(format!("connect: {r:?}")),
    }
    let (a, _) = retry(|| l.accept()).map_err(|e| format!("accept: {e:?}"))?;
    if let Some(e) = c.take_error().map_err(|e| format!("{e:?}"))? {
        return Err(format!("connect failed: {e:?}"));
    }
    retry(|| c.send(b"ping")).map_err(|e| format!("send: {e:?}"))?;
    let mut buf = [0u8; 8];
    let n = retry(|| a.recv(&mut buf, false)).map_err(|e| format!("recv: {e:?}"))?;
    retry(|| a.send(&buf[..n])).map_err(|e| format!("send back: {e:?}"))?;
    let m = retry(|| c.recv(&mut buf, false)).map_err(|e| format!("recv back: {e:?}"))?;
    if &buf[..m] != b"ping" {
        return Err(format!("echo was {:?}", &buf[..m]));
    }
    Ok(())
}

/// A datagram from a fresh socket reaches `u` (bound at `at`).
fn udp_serves(stack: &Arc<Stack>, u: &Socket, at: SocketAddr) -> Result<(), String> {
    let d = if at.is_ipv4() {
        Domain::Inet
    } else {
        Domain::Inet6
    };
    let s = stack
        .socket(d, SocketType::Datagram)
        .map_err(|e| format!("{e:?}"))?;
    s.send_to(b"dgram", at)
        .map_err(|e| format!("sendto: {e:?}"))?;
    let mut buf = [0u8; 64];
    // Earlier fuzz datagrams may be queued first; ours is among them.
    for _ in 0..2048 {
        let n = retry(|| u.recv(&mut buf, false)).map_err(|e| format!("recv: {e:?}"))?;
        if &buf[..n] == b"dgram" {
            return Ok(());
        }
    }
    Err("datagram never arrived".into())
}

fn ip_packet(src: IpAddr, dst: IpAddr, proto: IpProtocol, l4: &[u8]) -> Vec<u8> {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let ip = Ipv4Repr {
                src_addr: s,
                dst_addr: d,
                next_header: proto,
                payload_len: l4.len(),
                hop_limit: 64,
            };
            let mut buf = vec![0u8; ip.buffer_len() + l4.len()];
            let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
            ip.emit(&mut p, &ChecksumCapabilities::ignored());
            p.payload_mut().copy_from_slice(l4);
            buf
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let ip = Ipv6Repr {
                src_addr: s,
                dst_addr: d,
                next_header: proto,
                payload_len: l4.len(),
                hop_limit: 64,
            };
            let mut buf = vec![0u8; ip.buffer_len() + l4.len()];
            let mut p = Ipv6Packet::new_unchecked(&mut buf[..]);
            ip.emit(&mut p);
            p.payload_mut().copy_from_slice(l4);
            buf
        }
        _ => unreachable!("test packets have one family"),
    }
}

/// TCP flag bits, as on the wire.
const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const ACK: u8 = 0x10;

fn tcp_segment(sport: u16, dport: u16, seq: u32, ack: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 20 + payload.len()];
    let mut p = TcpPacket::new_unchecked(&mut b[..]);
    p.set_src_port(sport);
    p.set_dst_port(dport);
    p.set_seq_number(TcpSeqNumber(seq as i32));
    p.set_ack_number(TcpSeqNumber(ack as i32));
    p.set_header_len(20);
    p.set_window_len(65535);
    p.set_fin(flags & FIN != 0);
    p.set_syn(flags & SYN != 0);
    p.set_rst(flags & RST != 0);
    p.set_ack(flags & ACK != 0);
    p.set_psh(flags & 0x08 != 0);
    p.set_urg(flags & 0x20 != 0);
    p.payload_mut().copy_from_slice(payload);
    b
}

fn udp_datagram(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 8 + payload.len()];
    let mut p = UdpPacket::new_unchecked(&mut b[..]);
    p.set_src_port(sport);
    p.set_dst_port(dport);
    p.set_len((8 + payload.len()) as u16);
    p.set_checksum(0);
    b[8..].copy_from_slice(payload);
    b
}

/// One packet as the link might deliver it.
#[derive(Clone, Debug)]
enum Frame {
    /// Bytes with no structure at all (the version nibble included).
    Garbage(Vec<u8>),
    /// A well-formed packet, then damaged.
    Crafted {
        v6: bool,
        /// Spoofs a peer on the sandbox's own loopback (else an outside
        /// address that never answers).
        from_loopback: bool,
        /// 0: TCP, 1: UDP, 2: some other protocol number.
        proto: u8,
        /// Index into the stack's bound ports, or a random port.
        port: usize,
        sport: u16,
        seq: u32,
        ack: u32,
        flags: u8,
        payload: usize,
        /// Keep only this many bytes.
        cut: Option<usize>,
        /// Overwrite these bytes (positions modulo the length).
        flips: Vec<(usize, u8)>,
    },
}

fn frame() -> impl Strategy<Value = Frame> {
    prop_oneof![
        1 => proptest::collection::vec(any::<u8>(), 0..120).prop_map(Frame::Garbage),
        4 => (
            any::<bool>(),
            any::<bool>(),
            0u8..3,
            0usize..6,
            any::<u16>(),
            any::<u32>(),
            any::<u32>(),
            any::<u8>(),
            prop_oneof![Just(0usize), 1usize..64, 1000usize..1600],
            proptest::option::of(0usize..80),
            proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        )
            .prop_map(
                |(v6, from_loopback, proto, port, sport, seq, ack, flags, payload, cut, flips)| {
                    Frame::Crafted {
                        v6,
                        from_loopback,
                        proto,
                        port,
                        sport,
                        seq,
                        ack,
                        flags,
                        payload,
                        cut,
                        flips,
                    }
                }
            ),
    ]
}

fn build(f: &Frame, ports: &[u16]) -> Vec<u8> {
    match f {
        Frame::Garbage(b) => b.clone(),
        Frame::Crafted {
            v6,
            from_loopback,
            proto,
            port,
            sport,
            seq,
            ack,
            flags,
            payload,
            cut,
            flips,
        } => {
            let (src, dst) = match (v6, from_loopback) {
                (false, true) => (Ipv4Addr::LOCALHOST.into(), Ipv4Addr::LOCALHOST.into()),
                (false, false) => (
                    Ipv4Addr::new(203, 0, 113, 9).into(),
                    Ipv4Addr::LOCALHOST.into(),
                ),
                (true, true) => (Ipv6Addr::LOCALHOST.into(), Ipv6Addr::LOCALHOST.into()),
                (true, false) => (
                    "2001:db8::9".parse::<IpAddr>().expect("ip"),
                    Ipv6Addr::LOCALHOST.into(),
                ),
            };
            let dport = ports.get(*port).copied().unwrap_or(*sport ^ 0x5a5a);
            let data = vec![0x61u8; *payload];
            let (proto, l4) = match proto {
                0 => (
                    IpProtocol::Tcp,
                    tcp_segment(*sport, dport, *seq, *ack, *flags, &data),
                ),
                1 => (IpProtocol::Udp, udp_datagram(*sport, dport, &data)),
                _ => (IpProtocol::Unknown(*flags), data),
            };
            let mut p = ip_packet(src, dst, proto, &l4);
            if let Some(n) = cut {
                p.truncate(*n);
            }
            if !p.is_empty() {
                let len = p.len();
                for (at, v) in flips {
                    p[at % len] = *v;
                }
            }
            p
        }
    }
}

/// The stack under attack: listeners on both families, a bound UDP socket
/// and an established connection, whose ports the crafted frames aim at.
struct Target {
    stack: Arc<Stack>,
    l4: Socket,
    l4_at: SocketAddr,
    l6: Socket,
    l6_at: SocketAddr,
    u: Socket,
    u_at: SocketAddr,
    _conn: (Socket, Socket),
    ports: Vec<u16>,
}

fn target() -> Target {
    let stack = small_stack();
    let (l4, l4_at) = listen(&stack, "0.0.0.0:0", 2);
    let (l6, l6_at) = listen(&stack, "[::1]:0", 2);
    let u = stack
        .socket(Domain::Inet, SocketType::Datagram)
        .expect("udp");
    u.bind(sa("127.0.0.1:0")).expect("bind udp");
    let u_at = u.local_addr().expect("udp addr");
    let c = stack.socket(Domain::Inet, SocketType::Stream).expect("c");
    assert_eq!(
        c.connect(sa(&format!("127.0.0.1:{}", l4_at.port()))),
        Err(Errno::EINPROGRESS)
    );
    let (a, _) = retry(|| l4.accept()).expect("accept");
    let cport = c.local_addr().expect("c addr").port();
    let ports = vec![l4_at.port(), l6_at.port(), u_at.port(), cport, 53];
    Target {
        stack,
        l4,
        l4_at,
        l6,
        l6_at,
        u,
        u_at,
        _conn: (c, a),
        ports,
    }
}

impl Target {
    fn still_serves(&self) -> Result<(), String> {
        let v4 = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), self.l4_at.port());
        serves(&self.stack, &self.l4, v4).map_err(|e| format!("v4 listener: {e}"))?;
        serves(&self.stack, &self.l6, self.l6_at).map_err(|e| format!("v6 listener: {e}"))?;
        udp_serves(&self.stack, &self.u, self.u_at).map_err(|e| format!("udp: {e}"))?;
        let (fresh, at) = listen(&self.stack, "127.0.0.1:0", 4);
        serves(&self.stack, &fresh, at).map_err(|e| format!("fresh listener: {e}"))?;
        let st = self.stack.stats();
        if st.internal_sockets > 2 * 64 {
            return Err(format!("internal sockets unbounded: {st:?}"));
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn malformed_packets_from_the_link_never_panic(frames in proptest::collection::vec(frame(), 1..120)) {
        let t = target();
        for f in &frames {
            t.stack.receive_from_link(build(f, &t.ports));
        }
        if let Err(e) = t.still_serves() {
            return Err(TestCaseError::fail(e));
        }
    }
}

#[test]
fn every_truncation_of_valid_packets_is_harmless() {
    let t = target();
    let lo4: IpAddr = Ipv4Addr::LOCALHOST.into();
    let lo6: IpAddr = Ipv6Addr::LOCALHOST.into();
    let packets = [
        ip_packet(
            lo4,
            lo4,
            IpProtocol::Tcp,
            &tcp_segment(40000, t.l4_at.port(), 1, 0, SYN, b""),
        ),
        ip_packet(
            lo6,
            lo6,
            IpProtocol::Tcp,
            &tcp_segment(40001, t.l6_at.port(), 1, 0, SYN, b""),
        ),
        ip_packet(
            lo4,
            lo4,
            IpProtocol::Tcp,
            &tcp_segment(40002, t.ports[3], 9, 9, ACK | FIN, b"data"),
        ),
        ip_packet(
            lo4,
            lo4,
            IpProtocol::Udp,
            &udp_datagram(40003, t.u_at.port(), b"payload"),
        ),
        ip_packet(
            lo6,
            lo6,
            IpProtocol::Udp,
            &udp_datagram(40004, 9, b"payload"),
        ),
        ip_packet(
            lo4,
            lo4,
            IpProtocol::Icmp,
            &[3, 3, 0, 0, 0, 0, 0, 0, 0x45, 0, 0, 20],
        ),
        ip_packet(
            lo6,
            lo6,
            IpProtocol::Icmpv6,
            &[1, 4, 0, 0, 0, 0, 0, 0, 0x60, 0, 0, 0],
        ),
    ];
    for p in &packets {
        for n in 0..=p.len() {
            t.stack.receive_from_link(p[..n].to_vec());
        }
    }
    t.still_serves().expect("the stack still serves");
}

#[test]
fn syn_flood_from_silent_addresses_leaves_the_listener_working() {
    // Thousands of SYNs from outside addresses that never complete the
    // handshake, at a listener with a backlog of 2 (Linux answers such a
    // flood with SYN cookies; here the SYN gate and the slot limit bound
    // what it costs).
    let t = target();
    for i in 0..5000u32 {
        let src = IpAddr::V4(Ipv4Addr::from(0xcb00_7100 + (i % 200)));
        let seg = tcp_segment(1024 + (i % 60000) as u16, t.l4_at.port(), i, 0, SYN, b"");
        t.stack.receive_from_link(ip_packet(
            src,
            Ipv4Addr::LOCALHOST.into(),
            IpProtocol::Tcp,
            &seg,
        ));
    }
    let st = t.stack.stats();
    assert!(st.internal_sockets <= 2 * 64, "{st:?}");
    t.still_serves().expect("the listener still accepts");
}
