//! UDP over the loopback stack.

mod common;

use common::*;
use netstack::{Errno, Shutdown, SockOpt};

#[test]
fn round_trip_peek_and_truncation() {
    for (v6, ip) in [(false, "127.0.0.1"), (true, "[::1]")] {
        let (stack, _w) = stack();
        let a = udp(&stack, v6);
        let b = udp(&stack, v6);
        a.bind(addr(&format!("{ip}:0"))).expect("bind");
        let aa = a.local_addr().expect("local");
        let mut buf = [0u8; 16];
        assert_eq!(a.recv(&mut buf, false), Err(Errno::EAGAIN));
        assert!(!a.readiness().expect("r").readable);

        // Unbound sender: bound to an ephemeral port by sendto.
        assert_eq!(b.send_to(b"hello, datagram!", aa), Ok(16));
        let ba = b.local_addr().expect("local");
        assert!(ba.port() >= 32768, "{ba}");
        assert!(a.readiness().expect("r").readable);
        assert_eq!(a.bytes_readable(), Ok(16));

        // Peek leaves it; a short buffer truncates and says how much was lost.
        let mut small = [0u8; 5];
        let m = a.recv_from(&mut small, true).expect("peek");
        assert_eq!((m.len, m.full_len), (5, 16));
        assert_eq!(m.from.port(), ba.port());
        let m = a.recv_from(&mut small, false).expect("recv");
        assert_eq!((m.len, m.full_len), (5, 16));
        assert_eq!(&small, b"hello");
        // The rest of a truncated datagram is gone.
        assert_eq!(a.recv(&mut buf, false), Err(Errno::EAGAIN));

        // Reply to the sender; datagram boundaries are kept.
        assert_eq!(a.send_to(b"one", m.from), Ok(3));
        assert_eq!(a.send_to(b"two!", m.from), Ok(4));
        assert_eq!(b.recv(&mut buf, false), Ok(3));
        assert_eq!(b.recv(&mut buf, false), Ok(4));
        assert_eq!(&buf[..4], b"two!");
        // Empty datagrams exist.
        assert_eq!(b.send_to(b"", aa), Ok(0));
        assert_eq!(a.recv_from(&mut buf, false).map(|m| m.full_len), Ok(0));
    }
}

#[test]
fn connected_socket_filters_and_defaults() {
    let (stack, _w) = stack();
    let a = udp(&stack, false);
    a.bind(addr("127.0.0.1:0")).expect("bind");
    let aa = a.local_addr().expect("l");
    let b = udp(&stack, false);
    let stranger = udp(&stack, false);
    assert_eq!(b.send(b"x"), Err(Errno::EDESTADDRREQ));
    b.connect(aa).expect("connect");
    assert_eq!(b.peer_addr(), Ok(aa));
    assert_eq!(b.send(b"ping"), Ok(4));
    let mut buf = [0u8; 8];
    let m = a.recv_from(&mut buf, false).expect("recv");
    // Only the peer's datagrams reach a connected socket.
    assert_eq!(stranger.send_to(b"spam", b.local_addr().expect("l")), Ok(4));
    assert_eq!(a.send_to(b"pong", m.from), Ok(4));
    assert_eq!(b.recv(&mut buf, false), Ok(4));
    assert_eq!(&buf[..4], b"pong");
    assert_eq!(b.recv(&mut buf, false), Err(Errno::EAGAIN));
    b.disconnect().expect("disconnect");
    assert_eq!(b.peer_addr(), Err(Errno::ENOTCONN));
    // Limits and errors.
    assert_eq!(a.send_to(&vec![0u8; 70_000], aa), Err(Errno::EMSGSIZE));
    assert_eq!(a.send_to(b"x", addr("127.0.0.1:0")), Err(Errno::EINVAL));
    assert_eq!(a.send_to(b"x", addr("[::1]:53")), Err(Errno::EAFNOSUPPORT));
    assert_eq!(a.listen(1), Err(Errno::EOPNOTSUPP));
    b.connect(aa).expect("connect");
    b.shutdown(Shutdown::Write).expect("shutdown");
    assert_eq!(b.send(b"x"), Err(Errno::EPIPE));
}

#[test]
fn dual_stack_udp() {
    let (stack, _w) = stack();
    let six = udp(&stack, true);
    six.bind(addr("[::]:0")).expect("bind");
    let port = six.local_addr().expect("l").port();
    let four = udp(&stack, false);
    four.send_to(b"v4", addr(&format!("127.0.0.1:{port}")))
        .expect("send");
    let mut buf = [0u8; 4];
    let m = six.recv_from(&mut buf, false).expect("recv");
    assert_eq!(
        m.from.to_string(),
        format!(
            "[::ffff:127.0.0.1]:{}",
            four.local_addr().expect("l").port()
        )
    );
    // And back through the mapped address.
    six.send_to(b"v6", m.from).expect("send");
    assert_eq!(four.recv(&mut buf, false), Ok(2));
}

#[test]
fn bounded_receive_queue() {
    let (stack, _w) = stack();
    let a = udp(&stack, false);
    a.bind(addr("127.0.0.1:0")).expect("bind");
    let aa = a.local_addr().expect("l");
    let b = udp(&stack, false);
    // Far more than the receive buffer holds: the excess is dropped, as
    // Linux drops datagrams when the socket buffer is full.
    let payload = vec![7u8; 8192];
    let mut sent = 0;
    for _ in 0..200 {
        if b.send_to(&payload, aa).is_ok() {
            sent += 1;
        }
    }
    assert!(sent > 0);
    let mut got = 0;
    let mut buf = vec![0u8; 8192];
    while a.recv(&mut buf, false).is_ok() {
        got += 1;
    }
    assert!(got > 0 && got < 200, "got {got}");
    let stats = stack.stats();
    assert!(stats.buffer_bytes <= 4 * (208 << 10), "{stats:?}");
}

#[test]
fn bound_to_one_family_cannot_reach_the_other() {
    // Found by the property test: an IPv6 socket bound to ::1 sending to
    // a v4-mapped address made smoltcp build (and panic on) a packet from
    // ::1 to 127.0.0.1.
    let (stack, _w) = stack();
    let peer = udp(&stack, false);
    peer.bind(addr("127.0.0.1:0")).expect("bind");
    let port = peer.local_addr().expect("local").port();
    let a = udp(&stack, true);
    a.bind(addr("[::1]:0")).expect("bind");
    let mapped = addr(&format!("[::ffff:127.0.0.1]:{port}"));
    assert_eq!(a.send_to(b"x", mapped), Err(Errno::ENETUNREACH));
    assert_eq!(a.connect(mapped), Err(Errno::ENETUNREACH));
    let t = tcp(&stack, true);
    t.bind(addr("[::1]:0")).expect("bind");
    assert_eq!(t.connect(mapped), Err(Errno::ENETUNREACH));
    // An unbound dual-stack socket still reaches IPv4 peers.
    let b = udp(&stack, true);
    assert_eq!(b.send_to(b"y", mapped), Ok(1));
}

#[test]
fn datagrams_carry_the_senders_ttl_and_tos() {
    for (v6, ip) in [(false, "127.0.0.1"), (true, "[::1]")] {
        let (stack, _w) = stack();
        let rx = udp(&stack, v6);
        let tx = udp(&stack, v6);
        rx.bind(addr(&format!("{ip}:0"))).expect("bind");
        let to = rx.local_addr().expect("local");
        let mut buf = [0u8; 8];
        assert_eq!(tx.send_to(b"a", to), Ok(1));
        let m = rx.recv_from(&mut buf, false).expect("recv");
        assert_eq!((m.hop_limit, m.tos), (Some(64), Some(0)));
        let (hop, tos) = if v6 {
            (SockOpt::HopLimit(0), SockOpt::TrafficClass(0x2d))
        } else {
            (SockOpt::Ttl(7), SockOpt::Tos(0xb9))
        };
        tx.set_option(hop).expect("hop");
        tx.set_option(tos).expect("tos");
        let before = std::time::Instant::now();
        assert_eq!(tx.send_to(b"b", to), Ok(1));
        let after = std::time::Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let want = if v6 { (0, 0x2d) } else { (7, 0xb9) };
        // A peek and the read see the same facts, and the time is the
        // arrival, not the read.
        for peek in [true, false] {
            let m = rx.recv_from(&mut buf, peek).expect("recv");
            assert_eq!((m.hop_limit, m.tos), (Some(want.0), Some(want.1)));
            let at = m.arrived.expect("arrival noted");
            assert!(before <= at && at <= after, "{peek}");
        }
    }
    // The IPv6 options are refused on an IPv4 socket.
    let (stack, _w) = stack();
    let s = udp(&stack, false);
    assert_eq!(s.set_option(SockOpt::HopLimit(3)), Err(Errno::ENOPROTOOPT));
}

#[test]
fn port_unreachable_refuses_connected_sockets_and_queues_with_recverr() {
    for (v6, ip) in [(false, "127.0.0.1"), (true, "[::1]")] {
        let (stack, _w) = stack();
        // A port with nobody on it.
        let gone = udp(&stack, v6);
        gone.bind(addr(&format!("{ip}:0"))).expect("bind");
        let dead = gone.local_addr().expect("local");
        drop(gone);

        let c = udp(&stack, v6);
        c.connect(dead).expect("connect");
        assert_eq!(c.send(b"hello"), Ok(5));
        assert!(c.readiness().expect("r").error);
        assert!(!c.readiness().expect("r").readable);
        assert_eq!(c.send(b"hello"), Err(Errno::ECONNREFUSED));
        assert_eq!(c.send(b"hello"), Ok(5));
        let mut buf = [0u8; 8];
        assert_eq!(c.recv(&mut buf, false), Err(Errno::ECONNREFUSED));
        assert_eq!(c.recv(&mut buf, false), Err(Errno::EAGAIN));
        assert_eq!(c.recv_error(), Err(Errno::EAGAIN), "nothing queued");

        // Unconnected: silence, unless IP_RECVERR.
        let u = udp(&stack, v6);
        assert_eq!(u.send_to(b"hello", dead), Ok(5));
        assert_eq!(u.take_error(), Ok(None));
        u.set_option(SockOpt::RecvErr(true)).expect("recverr");
        assert_eq!(u.send_to(b"hello", dead), Ok(5));
        assert_eq!(u.take_error(), Ok(Some(Errno::ECONNREFUSED)));
        assert!(u.readiness().expect("r").error, "still queued");
        let e = u.recv_error().expect("queued");
        assert_eq!(e.errno, Errno::ECONNREFUSED);
        assert_eq!(e.dest, dead);
        assert_eq!(e.payload, b"hello");
        assert_eq!((e.icmp_type, e.icmp_code), if v6 { (1, 4) } else { (3, 3) });
        assert_eq!(e.offender, dead.ip());
        assert_eq!(u.recv_error(), Err(Errno::EAGAIN));
        assert!(!u.readiness().expect("r").error);
    }
}
