//! TCP over the loopback stack, as the Sentry will drive it.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use netstack::{Errno, Limits, Progress, Shutdown, SockOpt, SockOptName, Stack, StackConfig};

fn echo(ip: &str) {
    let (stack, w) = stack();
    let (l, la) = listener(&stack, ip, 16);
    assert!(!l.readiness().expect("ready").readable);

    let c = tcp(&stack, la.is_ipv6());
    // Non-blocking connect: in progress, then writable, SO_ERROR clear.
    assert_eq!(c.connect(la), Err(Errno::EINPROGRESS));
    let r = c.readiness().expect("readiness");
    assert!(r.writable && !r.error && !r.hup, "{r:?}");
    assert_eq!(c.take_error(), Ok(None));
    // connect(2) again reports success once, then EISCONN.
    assert_eq!(c.connect(la), Ok(()));
    assert_eq!(c.connect(la), Err(Errno::EISCONN));

    assert!(l.readiness().expect("ready").readable);
    let (s, peer) = l.accept().expect("accept");
    assert_eq!(peer, c.local_addr().expect("local"));
    assert_eq!(s.peer_addr().expect("peer"), peer);
    assert_eq!(c.peer_addr().expect("peer"), la);
    assert_eq!(s.local_addr().expect("local"), la);
    assert_eq!(l.accept().map(|_| ()), Err(Errno::EAGAIN));

    let mut buf = [0u8; 64];
    assert_eq!(s.recv(&mut buf, false), Err(Errno::EAGAIN));
    assert_eq!(c.send(b"hello"), Ok(5));
    assert_eq!(s.bytes_readable(), Ok(5));
    assert_eq!(s.recv(&mut buf, true), Ok(5)); // MSG_PEEK
    assert_eq!(s.recv(&mut buf, false), Ok(5));
    assert_eq!(&buf[..5], b"hello");
    assert_eq!(s.send(&buf[..5]), Ok(5));
    assert_eq!(read_exact(&w, &c, 5), b"hello");

    // Close: the peer sees EOF (0), rdhup, then its own close completes.
    c.close();
    let r = s.readiness().expect("readiness");
    assert!(r.readable && r.rdhup, "{r:?}");
    assert_eq!(s.recv(&mut buf, false), Ok(0));
    drop(s);
    drop(l);
    // Everything, including orphans, is gone once the FINs are done.
    let end = Instant::now() + Duration::from_secs(5);
    while stack.stats().internal_sockets > 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(stack.stats().internal_sockets, 0, "{:?}", stack.stats());
    assert_eq!(stack.stats().buffer_bytes, 0);
}

#[test]
fn echo_ipv4() {
    echo("127.0.0.1");
}

#[test]
fn echo_ipv6() {
    echo("::1");
}

#[test]
fn dual_stack_listener_accepts_ipv4_mapped() {
    let (stack, w) = stack();
    let (l, la) = listener(&stack, "::", 4);
    let c = tcp(&stack, false);
    connect(&w, &c, addr(&format!("127.0.0.1:{}", la.port()))).expect("connect");
    let (_s, peer) = l.accept().expect("accept");
    assert_eq!(
        peer.to_string(),
        format!("[::ffff:127.0.0.1]:{}", c.local_addr().expect("l").port())
    );

    // A v6 socket may connect to a mapped address, unless V6ONLY.
    let c6 = tcp(&stack, true);
    connect(&w, &c6, addr(&format!("[::ffff:127.0.0.1]:{}", la.port()))).expect("connect");
    assert!(c6
        .local_addr()
        .expect("local")
        .to_string()
        .starts_with("[::ffff:127.0.0.1]"));
    let c6only = tcp(&stack, true);
    c6only.set_option(SockOpt::V6Only(true)).expect("v6only");
    assert_eq!(
        c6only.connect(addr(&format!("[::ffff:127.0.0.1]:{}", la.port()))),
        Err(Errno::ENETUNREACH)
    );
}

#[test]
fn connection_refused() {
    let (stack, w) = stack();
    let c = tcp(&stack, false);
    assert_eq!(c.connect(addr("127.0.0.1:9")), Err(Errno::EINPROGRESS));
    let r = c.readiness().expect("readiness");
    assert!(r.writable && r.error && r.hup, "{r:?}");
    assert_eq!(c.connect(addr("127.0.0.1:9")), Err(Errno::ECONNREFUSED));
    // Through the blocking helper (SO_ERROR path) on a fresh socket, v6 too.
    let c = tcp(&stack, true);
    assert_eq!(connect(&w, &c, addr("[::1]:9")), Err(Errno::ECONNREFUSED));
    // The socket can try again.
    let (_l, la) = listener(&stack, "::1", 1);
    assert_eq!(connect(&w, &c, la), Ok(()));
}

#[test]
fn outside_destinations_unreachable() {
    let (stack, _w) = stack();
    let c = tcp(&stack, false);
    assert_eq!(
        c.connect(addr("93.184.216.34:443")),
        Err(Errno::ENETUNREACH)
    );
    assert_eq!(
        c.connect(addr("169.254.169.254:80")),
        Err(Errno::ENETUNREACH)
    );
    let c = tcp(&stack, true);
    assert_eq!(
        c.connect(addr("[2001:db8::1]:443")),
        Err(Errno::ENETUNREACH)
    );
    assert_eq!(c.bind(addr("[2001:db8::1]:0")), Err(Errno::EADDRNOTAVAIL));
    let u = udp(&stack, false);
    assert_eq!(u.send_to(b"x", addr("8.8.8.8:53")), Err(Errno::ENETUNREACH));
}

#[test]
fn backlog_limits_pending_connections() {
    let (stack, w) = stack();
    // As Linux: backlog + 1 connections may wait for accept.
    let (l, la) = listener(&stack, "127.0.0.1", 2);
    let clients: Vec<_> = (0..6).map(|_| tcp(&stack, false)).collect();
    for c in &clients {
        assert_eq!(c.connect(la), Err(Errno::EINPROGRESS));
    }
    let connected = |cs: &[netstack::Socket]| {
        cs.iter()
            .filter(|c| c.readiness().expect("r").writable)
            .count()
    };
    assert_eq!(connected(&clients), 3);
    // The others are still trying (their SYNs were dropped, not reset).
    for c in &clients {
        assert_eq!(c.take_error(), Ok(None));
    }
    // Accepting one makes room; a retransmitted SYN gets in.
    let _a = l.accept().expect("accept");
    let end = Instant::now() + Duration::from_secs(10);
    while connected(&clients) < 4 && Instant::now() < end {
        let g = w.generation();
        w.wait(g, Duration::from_millis(100));
    }
    assert_eq!(connected(&clients), 4);
    // The three that waited can be accepted. (Each accept makes room for
    // another retransmitted SYN, so how many more arrive while accepting
    // depends on the clients' retransmission timers: not asserted.)
    for _ in 0..3 {
        l.accept().expect("a connection that waited in the backlog");
    }
}

#[test]
fn eof_after_peer_close_and_reset_on_linger_zero() {
    let (stack, w) = stack();
    let (l, la) = listener(&stack, "127.0.0.1", 4);
    let c = tcp(&stack, false);
    connect(&w, &c, la).expect("connect");
    let (s, _) = l.accept().expect("accept");
    send_all(&w, &c, b"last words");
    c.close();
    assert_eq!(read_to_end(&w, &s), b"last words");
    let mut buf = [0u8; 8];
    assert_eq!(s.recv(&mut buf, false), Ok(0));
    // Writing to a peer that is gone: RST comes back, then EPIPE.
    let _ = s.send(b"x");
    let r = s.readiness().expect("readiness");
    assert!(r.hup, "{r:?}");
    assert!(matches!(
        s.send(b"x"),
        Err(Errno::ECONNRESET | Errno::EPIPE)
    ));

    // SO_LINGER 0: the peer sees ECONNRESET.
    let c = tcp(&stack, false);
    connect(&w, &c, la).expect("connect");
    let (s, _) = l.accept().expect("accept");
    c.set_option(SockOpt::Linger(Some(Duration::ZERO)))
        .expect("linger");
    assert_eq!(
        c.option(SockOptName::Linger),
        Ok(SockOpt::Linger(Some(Duration::ZERO)))
    );
    c.close();
    let r = s.readiness().expect("readiness");
    assert!(r.error && r.hup && r.readable, "{r:?}");
    assert_eq!(s.recv(&mut buf, false), Err(Errno::ECONNRESET));
    assert_eq!(s.recv(&mut buf, false), Ok(0));
}

#[test]
fn shutdown_write_half_close() {
    let (stack, w) = stack();
    let (l, la) = listener(&stack, "::1", 4);
    let c = tcp(&stack, true);
    connect(&w, &c, la).expect("connect");
    let (s, _) = l.accept().expect("accept");
    send_all(&w, &c, b"request");
    c.shutdown(Shutdown::Write).expect("shutdown");
    assert_eq!(c.send(b"more"), Err(Errno::EPIPE));
    // The server reads to EOF, then answers on its still-open half.
    assert_eq!(read_to_end(&w, &s), b"request");
    assert!(s.readiness().expect("r").rdhup);
    send_all(&w, &s, b"response");
    s.close();
    assert_eq!(read_to_end(&w, &c), b"response");
    let r = c.readiness().expect("r");
    assert!(r.hup && r.rdhup, "{r:?}");
    // Unconnected sockets.
    let fresh = tcp(&stack, false);
    assert_eq!(fresh.shutdown(Shutdown::Both), Err(Errno::ENOTCONN));
    let r = fresh.readiness().expect("r");
    assert!(
        r.writable && r.hup && !r.readable,
        "fresh TCP socket polls OUT|HUP: {r:?}"
    );
    let mut buf = [0u8; 4];
    assert_eq!(fresh.recv(&mut buf, false), Err(Errno::ENOTCONN));
    assert_eq!(fresh.send(b"x"), Err(Errno::EPIPE));
}

#[test]
fn bind_rules() {
    let (stack, _w) = stack();
    let a = tcp(&stack, false);
    a.bind(addr("127.0.0.1:5000")).expect("bind");
    assert_eq!(a.bind(addr("127.0.0.1:5001")), Err(Errno::EINVAL));
    let b = tcp(&stack, false);
    assert_eq!(b.bind(addr("0.0.0.0:5000")), Err(Errno::EADDRINUSE));
    assert_eq!(b.bind(addr("10.0.0.1:5000")), Err(Errno::EADDRNOTAVAIL));
    assert_eq!(b.bind(addr("[::1]:5000")), Err(Errno::EAFNOSUPPORT));
    // v6-only wildcard coexists with an IPv4 binding; dual-stack does not.
    let c = tcp(&stack, true);
    assert_eq!(c.bind(addr("[::]:5000")), Err(Errno::EADDRINUSE));
    c.set_option(SockOpt::V6Only(true)).expect("v6only");
    c.bind(addr("[::]:5000")).expect("v6only bind");
    assert_eq!(c.set_option(SockOpt::V6Only(false)), Err(Errno::EINVAL));
    // SO_REUSEADDR on both: both may bind, one may listen.
    let r1 = tcp(&stack, false);
    let r2 = tcp(&stack, false);
    for r in [&r1, &r2] {
        r.set_option(SockOpt::ReuseAddr(true)).expect("reuseaddr");
        r.bind(addr("127.0.0.1:6000")).expect("bind");
    }
    r1.listen(1).expect("listen");
    assert_eq!(r2.listen(1), Err(Errno::EADDRINUSE));
    // Closing frees the port.
    drop(a);
    b.bind(addr("0.0.0.0:5000")).expect("rebind after close");
    // Port 0 picks an ephemeral port.
    let e = tcp(&stack, false);
    e.bind(addr("127.0.0.1:0")).expect("bind");
    assert!(e.local_addr().expect("l").port() >= 32768);
}

#[test]
fn options_round_trip() {
    let (stack, _w) = stack();
    let s = tcp(&stack, true);
    s.set_option(SockOpt::NoDelay(true)).expect("nodelay");
    assert_eq!(s.option(SockOptName::NoDelay), Ok(SockOpt::NoDelay(true)));
    s.set_option(SockOpt::RcvBuf(100_000)).expect("rcvbuf");
    assert_eq!(s.option(SockOptName::RcvBuf), Ok(SockOpt::RcvBuf(200_000)));
    s.set_option(SockOpt::SndBuf(usize::MAX)).expect("sndbuf");
    assert_eq!(
        s.option(SockOptName::SndBuf),
        Ok(SockOpt::SndBuf(Limits::default().max_tcp_buffer))
    );
    s.set_option(SockOpt::KeepAlive(true)).expect("keepalive");
    s.set_option(SockOpt::KeepIdle(Duration::from_secs(30)))
        .expect("keepidle");
    assert_eq!(
        s.set_option(SockOpt::KeepIdle(Duration::ZERO)),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        s.option(SockOptName::KeepIntvl),
        Ok(SockOpt::KeepIntvl(Duration::from_secs(75)))
    );
    assert_eq!(s.option(SockOptName::KeepCnt), Ok(SockOpt::KeepCnt(9)));
    s.set_option(SockOpt::KeepIntvl(Duration::from_secs(5)))
        .expect("keepintvl");
    s.set_option(SockOpt::KeepCnt(3)).expect("keepcnt");
    assert_eq!(
        s.option(SockOptName::KeepIntvl),
        Ok(SockOpt::KeepIntvl(Duration::from_secs(5)))
    );
    assert_eq!(s.option(SockOptName::KeepCnt), Ok(SockOpt::KeepCnt(3)));
    assert_eq!(s.set_option(SockOpt::KeepCnt(128)), Err(Errno::EINVAL));
    assert_eq!(
        s.set_option(SockOpt::KeepIntvl(Duration::from_secs(32768))),
        Err(Errno::EINVAL)
    );
    s.set_option(SockOpt::ReusePort(true)).expect("reuseport");
    assert_eq!(
        s.option(SockOptName::ReusePort),
        Ok(SockOpt::ReusePort(true))
    );
    assert_eq!(s.option(SockOptName::V6Only), Ok(SockOpt::V6Only(false)));
    let u = udp(&stack, false);
    assert_eq!(
        u.set_option(SockOpt::NoDelay(true)),
        Err(Errno::ENOPROTOOPT)
    );
    assert_eq!(u.option(SockOptName::V6Only), Err(Errno::ENOPROTOOPT));
}

#[test]
fn socket_limit() {
    let limits = Limits {
        max_sockets: 8,
        ..Limits::default()
    };
    let stack = Stack::new(StackConfig {
        limits,
        ..StackConfig::default()
    });
    let mut v = Vec::new();
    for _ in 0..8 {
        v.push(tcp(&stack, false));
    }
    assert_eq!(
        stack
            .socket(netstack::Domain::Inet, netstack::SocketType::Stream)
            .map(|_| ()),
        Err(Errno::ENOBUFS)
    );
    v.pop();
    assert!(stack
        .socket(netstack::Domain::Inet, netstack::SocketType::Stream)
        .is_ok());
}

#[test]
fn notifier_reports_changed_sockets() {
    let stack = Stack::new(StackConfig::default());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    stack.set_notifier(Arc::new(move |ids| {
        s2.lock().expect("lock").extend_from_slice(ids)
    }));
    let l = tcp(&stack, false);
    l.bind(addr("127.0.0.1:0")).expect("bind");
    l.listen(1).expect("listen");
    let c = tcp(&stack, false);
    let _ = c.connect(l.local_addr().expect("l"));
    let ids = seen.lock().expect("lock").clone();
    assert!(ids.contains(&l.id()), "listener became readable: {ids:?}");
    assert!(ids.contains(&c.id()), "client became writable: {ids:?}");
}

#[test]
fn two_hundred_concurrent_connections() {
    let (stack, w) = stack();
    let (l, la) = listener(&stack, "127.0.0.1", 256);
    let clients: Vec<_> = (0..200)
        .map(|i| {
            let c = tcp(&stack, false);
            assert_eq!(c.connect(la), Err(Errno::EINPROGRESS), "client {i}");
            c
        })
        .collect();
    let mut servers = Vec::new();
    while servers.len() < 200 {
        let (s, _) = blocking(&w, Duration::from_secs(10), || l.accept()).expect("accept");
        servers.push(s);
    }
    for c in &clients {
        assert_eq!(c.take_error(), Ok(None));
    }
    for (i, c) in clients.iter().enumerate() {
        send_all(&w, c, format!("client {i:03}").as_bytes());
    }
    // Echo each message back on its own connection.
    for s in &servers {
        let msg = read_exact(&w, s, 10);
        send_all(&w, s, &msg);
    }
    for (i, c) in clients.iter().enumerate() {
        assert_eq!(read_exact(&w, c, 10), format!("client {i:03}").as_bytes());
    }
    assert_eq!(stack.stats().sockets, 401);
}

fn fnv(data: &[u8], mut h: u64) -> u64 {
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// `total` bytes through one connection, sender and receiver on their own
/// threads as two guest tasks would be. Returns MB/s.
fn threaded_transfer(total: usize, limits: Limits, progress: Progress) -> f64 {
    let stack = Stack::new(StackConfig {
        limits,
        progress,
        ..StackConfig::default()
    });
    let w = Arc::new(Waiter::default());
    let w1 = w.clone();
    stack.set_notifier(Arc::new(move |_| w1.bump()));
    let (l, la) = listener(&stack, "127.0.0.1", 1);
    let c = tcp(&stack, false);
    connect(&w, &c, la).expect("connect");
    let (s, _) = l.accept().expect("accept");

    let data: Vec<u8> = (0..total).map(|i| (i * 7 + i / 4093) as u8).collect();
    let want = fnv(&data, 0xcbf2_9ce4_8422_2325);
    let start = Instant::now();
    let w2 = w.clone();
    let sender = std::thread::spawn(move || {
        for chunk in data.chunks(128 << 10) {
            send_all(&w2, &c, chunk);
        }
        c.close();
    });
    // Receive straight into place; the checksum is taken after the clock
    // stops, so it measures the stack, not the hash.
    let mut out = vec![1u8; total + 1];
    let mut got = 0;
    loop {
        let end = (got + (256 << 10)).min(out.len());
        let n = blocking(&w, Duration::from_secs(10), || {
            s.recv(&mut out[got..end], false)
        })
        .expect("recv");
        if n == 0 {
            break;
        }
        got += n;
    }
    let secs = start.elapsed().as_secs_f64();
    sender.join().expect("sender");
    assert_eq!(got, total);
    assert_eq!(fnv(&out[..got], 0xcbf2_9ce4_8422_2325), want);
    total as f64 / 1e6 / secs
}

/// 10 MB with a checksum; prints the throughput. `NETSTACK_BENCH_MB` and
/// `NETSTACK_BENCH_BUF` (bytes) change size and socket buffers for manual
/// measurements.
#[test]
fn ten_megabytes_with_checksum() {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<usize>().ok());
    let total = env("NETSTACK_BENCH_MB").unwrap_or(10) << 20;
    let mut limits = Limits::default();
    if let Some(b) = env("NETSTACK_BENCH_BUF") {
        limits.tcp_buffer = b;
    }
    let buf = limits.tcp_buffer;
    for progress in [Progress::Inline, Progress::Background] {
        let mbps = threaded_transfer(total, limits.clone(), progress);
        println!(
            "loopback TCP, 2 threads, {progress:?} progress, {} KiB buffers: {} MB at {mbps:.0} MB/s",
            buf >> 10,
            total >> 20
        );
    }
}

/// The same transfer with one thread alternating send and recv (no
/// wake-ups at all): the stack's own cost.
#[test]
fn throughput_single_thread() {
    const TOTAL: usize = 10 << 20;
    let (stack, w) = stack();
    let (l, la) = listener(&stack, "127.0.0.1", 1);
    let c = tcp(&stack, false);
    connect(&w, &c, la).expect("connect");
    let (s, _) = l.accept().expect("accept");
    let data = vec![0x5au8; 256 << 10];
    let mut buf = vec![0u8; 256 << 10];
    let (mut sent, mut got) = (0, 0);
    let start = Instant::now();
    while got < TOTAL {
        if sent < TOTAL {
            let k = (TOTAL - sent).min(data.len());
            if let Ok(n) = c.send(&data[..k]) {
                sent += n;
            }
        }
        if let Ok(n) = s.recv(&mut buf, false) {
            assert!(buf[..n].iter().all(|&b| b == 0x5a));
            got += n;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "loopback TCP, 1 thread: {:.0} MB/s",
        TOTAL as f64 / 1e6 / secs
    );
}

/// Round-trip latency of a 1-byte ping-pong between two threads.
fn ping_pong(progress: Progress) -> Duration {
    const ROUNDS: usize = 2000;
    let stack = Stack::new(StackConfig {
        progress,
        ..StackConfig::default()
    });
    let w = Arc::new(Waiter::default());
    let w1 = w.clone();
    stack.set_notifier(Arc::new(move |_| w1.bump()));
    let (l, la) = listener(&stack, "127.0.0.1", 1);
    let c = tcp(&stack, false);
    connect(&w, &c, la).expect("connect");
    let (s, _) = l.accept().expect("accept");
    c.set_option(SockOpt::NoDelay(true)).expect("nodelay");
    s.set_option(SockOpt::NoDelay(true)).expect("nodelay");
    let w2 = w.clone();
    let done = Arc::new(AtomicUsize::new(0));
    let d2 = done.clone();
    let echo = std::thread::spawn(move || {
        for _ in 0..ROUNDS {
            let b = read_exact(&w2, &s, 1);
            send_all(&w2, &s, &b);
        }
        d2.store(1, Ordering::SeqCst);
    });
    let start = Instant::now();
    for i in 0..ROUNDS {
        send_all(&w, &c, &[i as u8]);
        assert_eq!(read_exact(&w, &c, 1), [i as u8]);
    }
    let per = start.elapsed() / ROUNDS as u32;
    echo.join().expect("echo");
    assert_eq!(done.load(Ordering::SeqCst), 1);
    per
}

#[test]
fn ping_pong_latency() {
    for progress in [Progress::Inline, Progress::Background] {
        let per = ping_pong(progress);
        println!("loopback TCP round trip, {progress:?} progress (2 threads, 1 byte): {per:?}");
    }
}

#[test]
fn close_with_unread_data_resets() {
    let (stack, w) = stack();
    let (l, la) = listener(&stack, "127.0.0.1", 1);
    let c = tcp(&stack, false);
    connect(&w, &c, la).expect("connect");
    let (s, _) = l.accept().expect("accept");
    send_all(&w, &c, b"never read");
    // RFC 2525 / Linux: closing with unread data sends RST, not FIN.
    s.close();
    let mut buf = [0u8; 4];
    assert_eq!(c.recv(&mut buf, false), Err(Errno::ECONNRESET));
    assert_eq!(c.send(b"x"), Err(Errno::EPIPE));
    // Listener closed: pending connections are reset too, the port is free.
    let c2 = tcp(&stack, false);
    connect(&w, &c2, la).expect("connect");
    drop(l);
    assert!(c2.readiness().expect("r").error);
    let again = tcp(&stack, false);
    again.bind(la).expect("port free after listener close");
}
