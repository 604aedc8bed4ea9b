//! UDP to allowed destinations outside the sandbox (`Mode::Egress`), against
//! a real host UDP echo server on one of the host's own addresses outside
//! 127.0.0.0/8 (all of which is the sandbox's own loopback): an address
//! only a rule that names it opens.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use common::{addr, blocking, udp, Waiter};
use netstack::policy::parse_cidr_rule;
use netstack::{Errno, Mode, Policy, Stack, StackConfig};

/// The "host's own address" of these tests: an address outside
/// 127.0.0.0/8 (all of which is the sandbox's own loopback) and other than
/// the sandbox's link addresses, on the loopback link of a network namespace of
/// the calling test thread's own (made at its first call; the stack's
/// relay threads and the echo server, started from this thread later,
/// share it). The host's own network is left alone.
fn host_ip() -> Ipv4Addr {
    const ADDR: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
    thread_local! {
        static READY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if !READY.with(std::cell::Cell::get) {
        // SAFETY: unshare with a flag only; affects this thread alone.
        let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(
            r,
            0,
            "unshare(CLONE_NEWNET): {}",
            std::io::Error::last_os_error()
        );
        for args in ["link set lo up", &format!("addr add {ADDR}/32 dev lo")] {
            let st = std::process::Command::new("ip")
                .args(args.split(' '))
                .status()
                .expect("run ip (iproute2)");
            assert!(st.success(), "ip {args}: {st}");
        }
        READY.with(|r| r.set(true));
    }
    ADDR
}

/// `host_ip()` with `rest` after it (a port, a prefix).
fn host(rest: &str) -> String {
    format!("{}{rest}", host_ip())
}

/// A stack with a link out and `rules`, where the host's own address
/// stays closed unless a rule names it, as the runtime builds it.
fn egress_stack(rules: &[&str]) -> (Arc<Stack>, Arc<Waiter>) {
    let cidrs = rules
        .iter()
        .map(|r| parse_cidr_rule(r).expect("rule"))
        .collect();
    let policy = Policy::new(cidrs, vec![]).with_host_addresses([IpAddr::V4(host_ip())]);
    let stack = Stack::new(StackConfig {
        mode: Mode::Egress,
        policy: Arc::new(policy),
        ..StackConfig::default()
    });
    let waiter = Arc::new(Waiter::default());
    let w = waiter.clone();
    stack.set_notifier(Arc::new(move |_ids| w.bump()));
    (stack, waiter)
}

/// A host UDP echo server on [`host_ip`] that answers `n` datagrams, then
/// returns the senders it saw (the relay's host sockets).
fn echo_server(n: usize) -> (SocketAddr, JoinHandle<Vec<SocketAddr>>) {
    let s = UdpSocket::bind(host(":0")).expect("bind the host's address");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let at = s.local_addr().expect("addr");
    let h = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = vec![0u8; 65536];
        for _ in 0..n {
            let Ok((k, from)) = s.recv_from(&mut buf) else {
                break;
            };
            seen.push(from);
            s.send_to(&buf[..k], from).expect("echo");
        }
        seen
    });
    (at, h)
}

fn recv_from(w: &Waiter, s: &netstack::Socket) -> Result<(Vec<u8>, SocketAddr), Errno> {
    let mut buf = vec![0u8; 65536];
    let m = blocking(w, Duration::from_secs(5), || s.recv_from(&mut buf, false))?;
    Ok((buf[..m.len].to_vec(), m.from))
}

#[test]
fn datagrams_to_an_allowed_destination_are_echoed_back() {
    let (srv, h) = echo_server(3);
    let (stack, w) = egress_stack(&[&host(&format!("/32:{}", srv.port()))]);
    // sendto on an unconnected socket; the reply names the real peer.
    let u = udp(&stack, false);
    assert_eq!(u.send_to(b"first", srv), Ok(5));
    assert_eq!(recv_from(&w, &u), Ok((b"first".to_vec(), srv)));
    // The socket got a port of the sandbox, shown with the wildcard
    // address as Linux shows an autobound socket.
    let local = u.local_addr().expect("local");
    assert!(local.ip().is_unspecified() && local.port() != 0, "{local}");
    // A large datagram arrives whole.
    let big: Vec<u8> = (0..60_000u32).map(|i| (i * 7 % 251) as u8).collect();
    assert_eq!(u.send_to(&big, srv), Ok(big.len()));
    assert_eq!(recv_from(&w, &u), Ok((big, srv)));
    // connect + send on a dual-stack socket: the peer appears v4-mapped.
    let u6 = udp(&stack, true);
    let mapped = addr(&format!("[::ffff:{}]:{}", host_ip(), srv.port()));
    assert_eq!(u6.connect(mapped), Ok(()));
    assert_eq!(u6.send(b"third"), Ok(5));
    assert_eq!(recv_from(&w, &u6), Ok((b"third".to_vec(), mapped)));
    assert_eq!(h.join().expect("server").len(), 3);
}

#[test]
fn refused_destinations_fail_at_once_and_reach_nobody() {
    let (srv, h) = echo_server(1);
    // A rule for another port of the same address, and a wide rule that
    // does not name the host's address.
    let (stack, _w) = egress_stack(&[&host("/32:9"), "0.0.0.0/0"]);
    let u = udp(&stack, false);
    assert_eq!(u.send_to(b"x", srv), Err(Errno::EPERM));
    assert_eq!(
        u.send_to(b"x", addr("169.254.169.254:53")),
        Err(Errno::EPERM)
    );
    assert_eq!(u.connect(srv), Err(Errno::ECONNREFUSED));
    assert_eq!(u.send(b"x"), Err(Errno::EDESTADDRREQ));
    let u6 = udp(&stack, true);
    let mapped = addr(&format!("[::ffff:{}]:{}", host_ip(), srv.port()));
    assert_eq!(u6.send_to(b"x", mapped), Err(Errno::EPERM));
    assert_eq!(u6.connect(mapped), Err(Errno::ECONNREFUSED));
    // Loopback-only stacks: no route at all.
    let (lo, _w) = common::stack();
    let u = udp(&lo, false);
    assert_eq!(u.send_to(b"x", srv), Err(Errno::ENETUNREACH));
    // The server never got a datagram.
    assert_eq!(h.join().expect("server"), Vec::<SocketAddr>::new());
}

#[test]
fn replies_only_from_peers_the_socket_sent_to() {
    let (srv, h) = echo_server(1);
    let (stack, w) = egress_stack(&[&host("/32")]);
    let u = udp(&stack, false);
    assert_eq!(u.send_to(b"hello", srv), Ok(5));
    assert_eq!(recv_from(&w, &u), Ok((b"hello".to_vec(), srv)));
    let relay_port = h.join().expect("server")[0];
    // Another host socket, never sent to, aims at the relay's host port:
    // dropped. Then the real peer's datagram arrives, and is the only one.
    let stranger = UdpSocket::bind(host(":0")).expect("stranger");
    stranger
        .send_to(b"spoof", relay_port)
        .expect("stranger send");
    std::thread::sleep(Duration::from_millis(300));
    let peer = UdpSocket::bind(srv).expect("rebind server address");
    peer.send_to(b"genuine", relay_port).expect("peer send");
    assert_eq!(recv_from(&w, &u), Ok((b"genuine".to_vec(), srv)));
    let mut buf = [0u8; 16];
    assert_eq!(u.recv_from(&mut buf, false), Err(Errno::EAGAIN));
}

#[test]
fn a_socket_bound_to_loopback_has_no_route_out() {
    let (stack, _w) = egress_stack(&[&host("/32")]);
    let u = udp(&stack, false);
    u.bind(addr("127.0.0.1:0")).expect("bind");
    assert_eq!(u.send_to(b"x", addr(&host(":7"))), Err(Errno::EINVAL));
    // Any address of loopback's range.
    let u = udp(&stack, false);
    u.bind(addr("127.0.0.5:0")).expect("bind");
    assert_eq!(u.send_to(b"x", addr(&host(":7"))), Err(Errno::EINVAL));
}

#[test]
fn a_socket_bound_to_the_sandbox_address_reaches_out_and_hears_back() {
    let (at, server) = echo_server(1);
    let (stack, w) = egress_stack(&[&host("/32")]);
    let u = udp(&stack, false);
    u.bind(addr("10.0.2.15:0"))
        .expect("bind the link's address");
    let port = u.local_addr().expect("name").port();
    assert_eq!(u.send_to(b"out", at), Ok(3));
    let (got, from) = recv_from(&w, &u).expect("echo");
    assert_eq!((got.as_slice(), from), (&b"out"[..], at));
    assert_eq!(u.local_addr(), Ok(addr(&format!("10.0.2.15:{port}"))));
    assert_eq!(server.join().expect("server").len(), 1);
}

#[test]
fn the_sandbox_address_is_the_stacks_own_only_with_a_link_out() {
    let (stack, w) = egress_stack(&[]);
    let u = udp(&stack, false);
    u.bind(addr("10.0.2.15:0")).expect("bind");
    let to = u.local_addr().expect("name");
    let v = udp(&stack, false);
    assert_eq!(v.send_to(b"in", to), Ok(2));
    let (got, from) = recv_from(&w, &u).expect("local delivery");
    assert_eq!(got, b"in");
    assert_eq!(from.ip(), to.ip());
    let other = udp(&stack, false);
    assert_eq!(other.bind(addr("10.0.2.16:0")), Err(Errno::EADDRNOTAVAIL));
    // Loopback only: no eth0, so no such address.
    let lo = Stack::new(StackConfig::default());
    let s = udp(&lo, false);
    assert_eq!(s.bind(addr("10.0.2.15:0")), Err(Errno::EADDRNOTAVAIL));
}

#[test]
fn a_link_the_runtime_gives_replaces_the_default_addresses() {
    use std::io::{Read, Write};
    // The container's interface as OCI mode passes it: IPv4 only.
    let cidrs = [host("/32"), "::/0".to_owned()]
        .iter()
        .map(|r| parse_cidr_rule(r).expect("rule"))
        .collect();
    let stack = Stack::new(StackConfig {
        mode: Mode::Egress,
        link: netstack::Link {
            addrs: vec![(addr("192.0.2.10:0").ip(), 24)],
        },
        policy: Arc::new(Policy::new(cidrs, vec![])),
        ..StackConfig::default()
    });
    let w = Arc::new(common::Waiter::default());
    let w1 = w.clone();
    stack.set_notifier(Arc::new(move |_ids| w1.bump()));
    // Its address is the stack's own, the default one is not.
    assert_eq!(
        udp(&stack, false).bind(addr("10.0.2.15:0")),
        Err(Errno::EADDRNOTAVAIL)
    );
    let (l, at) = common::listener(&stack, "192.0.2.10", 4);
    let c = common::tcp(&stack, false);
    assert_eq!(common::connect(&w, &c, at), Ok(()));
    let (_a, from) = blocking(&w, Duration::from_secs(5), || l.accept()).expect("accept");
    assert_eq!(from.ip(), at.ip());
    // A relayed connection shows it as its local address.
    let host = std::net::TcpListener::bind(host(":0")).expect("host listener");
    let out = common::tcp(&stack, false);
    assert_eq!(
        common::connect(&w, &out, host.local_addr().expect("addr")),
        Ok(())
    );
    let (mut peer, _) = host.accept().expect("host accept");
    assert_eq!(out.local_addr().map(|a| a.ip()), Ok(at.ip()));
    peer.write_all(b"hi").expect("host write");
    let mut buf = [0u8; 2];
    let n = blocking(&w, Duration::from_secs(5), || out.recv(&mut buf, false)).expect("recv");
    assert_eq!(&buf[..n], b"hi");
    drop(out);
    let _ = peer.read(&mut buf);
    // Replies to a wildcard-bound UDP socket come in on that address.
    let (srv, h) = echo_server(1);
    let u = udp(&stack, false);
    assert_eq!(u.send_to(b"out", srv), Ok(3));
    assert_eq!(recv_from(&w, &u), Ok((b"out".to_vec(), srv)));
    assert_eq!(h.join().expect("server").len(), 1);
    // No IPv6 address on the link: no route there, whatever the rules say.
    let t6 = common::tcp(&stack, true);
    assert_eq!(
        t6.connect(addr("[2001:db8::1]:80")),
        Err(Errno::ENETUNREACH)
    );
    assert_eq!(
        udp(&stack, true).send_to(b"x", addr("[2001:db8::1]:53")),
        Err(Errno::ENETUNREACH)
    );
}
