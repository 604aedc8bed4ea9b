//! All of 127.0.0.0/8 is the stack's own, as Linux's `local 127.0.0.0/8
//! dev lo` route makes it: sockets bind anywhere in it, a listener on one
//! address is reached there only, a wildcard listener at every address,
//! and an unbound socket sends from 127.0.0.1 (the route's preferred
//! source). IPv6 keeps `::1` alone, as Linux does.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use netstack::policy::parse_cidr_rule;
use netstack::{Errno, Mode, Policy, Stack, StackConfig};

fn ip(a: SocketAddr) -> String {
    a.ip().to_string()
}

#[test]
fn tcp_and_udp_bind_anywhere_in_the_range() {
    let (stack, _w) = stack();
    for a in ["127.0.0.2", "127.1.2.3", "127.0.0.0", "127.255.255.254"] {
        for s in [tcp(&stack, false), udp(&stack, false)] {
            s.bind(addr(&format!("{a}:0"))).expect(a);
            assert_eq!(ip(s.local_addr().expect("name")), a);
        }
        // The same address through a dual-stack socket, v4-mapped.
        let s = tcp(&stack, true);
        s.bind(addr(&format!("[::ffff:{a}]:0"))).expect(a);
    }
    // Two addresses of the range are two addresses: one port on each.
    let a = tcp(&stack, false);
    a.bind(addr("127.0.0.2:7000")).expect("bind");
    let b = tcp(&stack, false);
    b.bind(addr("127.0.0.3:7000"))
        .expect("same port, other address");
    let c = tcp(&stack, false);
    assert_eq!(c.bind(addr("127.0.0.2:7000")), Err(Errno::EADDRINUSE));
    // IPv6 has ::1 only; other IPv4 addresses stay foreign.
    assert_eq!(
        tcp(&stack, true).bind(addr("[::2]:0")),
        Err(Errno::EADDRNOTAVAIL)
    );
    assert_eq!(
        udp(&stack, false).bind(addr("128.0.0.1:0")),
        Err(Errno::EADDRNOTAVAIL)
    );
}

#[test]
fn a_listener_is_reached_at_its_address_only() {
    let (stack, w) = stack();
    let (l, la) = listener(&stack, "127.0.0.5", 4);
    let c = tcp(&stack, false);
    assert_eq!(connect(&w, &c, la), Ok(()));
    let (s, peer) = l.accept().expect("accept");
    // The unbound client's source is 127.0.0.1, not the destination.
    assert_eq!(ip(c.local_addr().expect("name")), "127.0.0.1");
    assert_eq!(peer, c.local_addr().expect("name"));
    assert_eq!(s.local_addr(), Ok(la));
    // The listener's port at another address of the range: refused.
    let d = tcp(&stack, false);
    let other = addr(&format!("127.0.0.6:{}", la.port()));
    assert_eq!(connect(&w, &d, other), Err(Errno::ECONNREFUSED));
    assert_eq!(l.accept().map(|_| ()), Err(Errno::EAGAIN));
    // A client bound in the range connects from there.
    let e = tcp(&stack, false);
    e.bind(addr("127.3.3.3:0")).expect("bind");
    assert_eq!(connect(&w, &e, la), Ok(()));
    let (_s, peer) = l.accept().expect("accept");
    assert_eq!(peer, e.local_addr().expect("name"));
    assert_eq!(ip(peer), "127.3.3.3");
}

#[test]
fn a_wildcard_listener_is_reached_at_every_address_and_names_it() {
    let (stack, w) = stack();
    let (l, la) = listener(&stack, "0.0.0.0", 8);
    for dialled in ["127.0.0.7", "127.200.1.9", "127.0.0.0"] {
        let c = tcp(&stack, false);
        let to = addr(&format!("{dialled}:{}", la.port()));
        assert_eq!(connect(&w, &c, to), Ok(()), "{dialled}");
        let (s, peer) = l.accept().expect("accept");
        assert_eq!(ip(s.local_addr().expect("name")), dialled);
        assert_eq!(ip(peer), "127.0.0.1");
        assert_eq!(c.peer_addr(), Ok(to));
        // Data flows both ways.
        assert_eq!(c.send(b"ping"), Ok(4));
        assert_eq!(read_exact(&w, &s, 4), b"ping");
        assert_eq!(s.send(b"pong"), Ok(4));
        assert_eq!(read_exact(&w, &c, 4), b"pong");
    }
    // A dual-stack listener and client: v4-mapped addresses throughout.
    let (l6, la6) = listener(&stack, "::", 1);
    let c = tcp(&stack, true);
    let to = addr(&format!("[::ffff:127.0.0.9]:{}", la6.port()));
    assert_eq!(connect(&w, &c, to), Ok(()));
    let (s, peer) = l6.accept().expect("accept");
    assert_eq!(ip(s.local_addr().expect("name")), "::ffff:127.0.0.9");
    assert_eq!(ip(peer), "::ffff:127.0.0.1");
}

#[test]
fn datagrams_between_addresses_of_the_range() {
    let (stack, w) = stack();
    let mut buf = [0u8; 16];
    let r = udp(&stack, false);
    r.bind(addr("127.0.0.5:0")).expect("bind");
    let ra = r.local_addr().expect("name");
    // Unbound sender: from 127.0.0.1.
    let s = udp(&stack, false);
    assert_eq!(s.send_to(b"a", ra), Ok(1));
    let m = blocking(&w, Duration::from_secs(5), || r.recv_from(&mut buf, false)).expect("a");
    assert_eq!(ip(m.from), "127.0.0.1");
    assert_eq!(m.from.port(), s.local_addr().expect("name").port());
    assert_eq!(m.local.map(|a| a.to_string()).as_deref(), Some("127.0.0.5"));
    // The reply goes back from the receiver's own address.
    assert_eq!(r.send_to(b"b", m.from), Ok(1));
    let m = blocking(&w, Duration::from_secs(5), || s.recv_from(&mut buf, false)).expect("b");
    assert_eq!(m.from, ra);
    // A sender bound in the range: from its address.
    let b = udp(&stack, false);
    b.bind(addr("127.3.3.3:0")).expect("bind");
    assert_eq!(b.send_to(b"c", ra), Ok(1));
    let m = blocking(&w, Duration::from_secs(5), || r.recv_from(&mut buf, false)).expect("c");
    assert_eq!(m.from, b.local_addr().expect("name"));
    // A wildcard receiver hears any address of the range; IP_PKTINFO
    // names the one dialled.
    let any = udp(&stack, false);
    any.bind(addr("0.0.0.0:0")).expect("bind");
    let port = any.local_addr().expect("name").port();
    assert_eq!(s.send_to(b"d", addr(&format!("127.0.0.9:{port}"))), Ok(1));
    let m = blocking(&w, Duration::from_secs(5), || {
        any.recv_from(&mut buf, false)
    })
    .expect("d");
    assert_eq!(ip(m.from), "127.0.0.1");
    assert_eq!(m.local.map(|a| a.to_string()).as_deref(), Some("127.0.0.9"));
    // Nobody at 127.0.0.5's port on another address: a connected socket
    // learns ECONNREFUSED from the port unreachable.
    let c = udp(&stack, false);
    c.connect(addr(&format!("127.0.0.6:{}", ra.port())))
        .expect("connect");
    assert_eq!(ip(c.local_addr().expect("name")), "127.0.0.1");
    assert_eq!(c.send(b"e"), Ok(1));
    assert_eq!(
        blocking(&w, Duration::from_secs(5), || c.recv(&mut buf, false)),
        Err(Errno::ECONNREFUSED)
    );
    assert_eq!(r.recv(&mut buf, false), Err(Errno::EAGAIN));
}

#[test]
fn loopback_broadcast_is_bound_but_never_a_destination() {
    let (stack, w) = stack();
    let (l, la) = listener(&stack, "127.0.0.5", 1);
    // Without SO_BROADCAST (which the stack does not offer): EACCES for a
    // datagram, ENETUNREACH for a connection, as Linux answers.
    let u = udp(&stack, false);
    assert_eq!(
        u.send_to(b"x", addr("127.255.255.255:9")),
        Err(Errno::EACCES)
    );
    assert_eq!(u.connect(addr("127.255.255.255:9")), Err(Errno::EACCES));
    assert_eq!(
        tcp(&stack, false).connect(addr("127.255.255.255:9")),
        Err(Errno::ENETUNREACH)
    );
    // Bound there, a socket sends from the route's source, 127.0.0.1.
    let c = tcp(&stack, false);
    c.bind(addr("127.255.255.255:0")).expect("bind");
    assert_eq!(connect(&w, &c, la), Ok(()));
    let (_s, peer) = l.accept().expect("accept");
    assert_eq!(ip(peer), "127.0.0.1");
    let r = udp(&stack, false);
    r.bind(addr("127.0.0.5:0")).expect("bind");
    let b = udp(&stack, false);
    b.bind(addr("127.255.255.255:0")).expect("bind");
    assert_eq!(b.send_to(b"x", r.local_addr().expect("name")), Ok(1));
    let mut buf = [0u8; 4];
    let m = blocking(&w, Duration::from_secs(5), || r.recv_from(&mut buf, false)).expect("x");
    assert_eq!(ip(m.from), "127.0.0.1");
}

#[test]
fn loopback_only_the_range_has_no_route_out() {
    let (stack, _w) = stack();
    let c = tcp(&stack, false);
    c.bind(addr("127.0.0.5:0")).expect("bind");
    assert_eq!(c.connect(addr("192.0.2.1:80")), Err(Errno::ENETUNREACH));
}

/// With a link out and a rule that opens everything, the range stays the
/// sandbox's own: nothing in it is relayed to the host, and a socket bound
/// in it has no route out (Linux: EINVAL).
#[test]
fn with_a_link_out_the_range_stays_inside() {
    let stack = Stack::new(StackConfig {
        mode: Mode::Egress,
        policy: Arc::new(Policy::new(
            vec![parse_cidr_rule("0.0.0.0/0").expect("rule")],
            vec![],
        )),
        ..StackConfig::default()
    });
    let w = Arc::new(Waiter::default());
    let w1 = w.clone();
    stack.set_notifier(Arc::new(move |_ids| w1.bump()));
    // Delivered inside, to the sandbox's own wildcard sockets.
    let (l, la) = listener(&stack, "0.0.0.0", 1);
    let c = tcp(&stack, false);
    let to = addr(&format!("127.0.0.7:{}", la.port()));
    assert_eq!(connect(&w, &c, to), Ok(()));
    let (s, _) = l.accept().expect("accept");
    assert_eq!(ip(s.local_addr().expect("name")), "127.0.0.7");
    let r = udp(&stack, false);
    r.bind(addr("0.0.0.0:0")).expect("bind");
    let u = udp(&stack, false);
    let port = r.local_addr().expect("name").port();
    assert_eq!(u.send_to(b"in", addr(&format!("127.9.9.9:{port}"))), Ok(2));
    let mut buf = [0u8; 4];
    let m = blocking(&w, Duration::from_secs(5), || r.recv_from(&mut buf, false)).expect("in");
    assert_eq!(m.local.map(|a| a.to_string()).as_deref(), Some("127.9.9.9"));
    // Nobody listening in the sandbox: refused inside, never relayed.
    let d = tcp(&stack, false);
    assert_eq!(
        connect(&w, &d, addr("127.0.0.8:9")),
        Err(Errno::ECONNREFUSED)
    );
    // Bound in the range, no way out, TCP and UDP.
    for a in ["127.0.0.1:0", "127.0.0.5:0"] {
        let t = tcp(&stack, false);
        t.bind(addr(a)).expect("bind");
        assert_eq!(t.connect(addr("192.0.2.1:80")), Err(Errno::EINVAL), "{a}");
        let v = udp(&stack, false);
        v.bind(addr(a)).expect("bind");
        assert_eq!(v.send_to(b"x", addr("192.0.2.1:53")), Err(Errno::EINVAL));
    }
}
