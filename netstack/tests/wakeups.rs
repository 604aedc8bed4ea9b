//! Wake-ups for signal-driven I/O: the edges Linux's socket callbacks
//! signal (`sk_data_ready`, `tcp_finish_connect`, `tcp_fin`,
//! `sk_error_report`, `sk_stream_write_space`), taken per socket.

mod common;

use common::*;
use netstack::{Errno, Shutdown, SockOpt, Wakeups};

fn take(s: &netstack::Socket) -> Wakeups {
    s.stack().take_wakeups(s.id())
}

#[test]
fn data_connections_fin_and_reset() {
    let (stack, _w) = stack();
    let (l, la) = listener(&stack, "127.0.0.1", 16);
    stack.set_async(l.id(), true);
    let c = tcp(&stack, false);
    stack.set_async(c.id(), true);
    assert_eq!(c.connect(la), Err(Errno::EINPROGRESS));
    // The connection completed on loopback within the call.
    assert!(take(&c).connected);
    assert!(take(&l).data, "a connection arrived at the listener");
    assert!(take(&l).is_empty(), "taken once");
    let (s, _) = l.accept().expect("accept");
    stack.set_async(s.id(), true);
    assert!(take(&s).is_empty(), "nothing from before accept");

    assert_eq!(c.send(b"a"), Ok(1));
    assert_eq!(
        take(&s),
        Wakeups {
            data: true,
            ..Wakeups::default()
        }
    );
    // More data while the first is unread is another arrival.
    assert_eq!(c.send(b"b"), Ok(1));
    assert!(take(&s).data);
    // Reading is not an arrival.
    let mut buf = [0u8; 8];
    assert_eq!(s.recv(&mut buf, false), Ok(2));
    assert!(take(&s).is_empty());

    // The peer's FIN on a socket still writing: a half close.
    c.shutdown(Shutdown::Write).expect("shutdown");
    let w = take(&s);
    assert!(w.fin && !w.fin_both, "{w:?}");

    // The peer's FIN after this side's own.
    let c2 = tcp(&stack, false);
    assert_eq!(c2.connect(la), Err(Errno::EINPROGRESS));
    let (s2, _) = l.accept().expect("accept");
    stack.set_async(s2.id(), true);
    s2.shutdown(Shutdown::Write).expect("shutdown");
    assert!(!take(&s2).fin);
    drop(c2);
    let w = take(&s2);
    assert!(w.fin && w.fin_both, "{w:?}");

    // A reset.
    let c3 = tcp(&stack, false);
    assert_eq!(c3.connect(la), Err(Errno::EINPROGRESS));
    let (s3, _) = l.accept().expect("accept");
    stack.set_async(s3.id(), true);
    c3.set_option(SockOpt::Linger(Some(std::time::Duration::ZERO)))
        .expect("linger");
    drop(c3);
    assert!(take(&s3).error);
}

#[test]
fn room_again_only_after_a_send_found_none_with_async_on() {
    let (stack, w) = stack();
    let (l, la) = listener(&stack, "127.0.0.1", 16);
    let c = tcp(&stack, false);
    assert_eq!(c.connect(la), Err(Errno::EINPROGRESS));
    let (s, _) = l.accept().expect("accept");
    let chunk = vec![0u8; 65536];
    let fill = |c: &netstack::Socket| while c.send(&chunk).is_ok() {};
    let drain = |s: &netstack::Socket| {
        let mut buf = vec![0u8; 65536];
        while s.recv(&mut buf, false).is_ok() {}
    };
    // Without O_ASYNC, a full socket is not marked.
    fill(&c);
    stack.set_async(c.id(), true);
    drain(&s);
    assert!(!take(&c).space);
    // With it, room again is a wake-up.
    fill(&c);
    let mut got = false;
    for _ in 0..100 {
        drain(&s);
        if take(&c).space {
            got = true;
            break;
        }
        w.wait(w.generation(), std::time::Duration::from_millis(20));
    }
    assert!(got);
}

#[test]
fn refused_connect_and_datagrams() {
    let (stack, _w) = stack();
    let (l, la) = listener(&stack, "127.0.0.1", 16);
    drop(l);
    let c = tcp(&stack, false);
    stack.set_async(c.id(), true);
    let _ = c.connect(la);
    assert!(take(&c).error);

    let u = udp(&stack, false);
    u.bind(addr("127.0.0.1:0")).expect("bind");
    let ua = u.local_addr().expect("addr");
    stack.set_async(u.id(), true);
    let u2 = udp(&stack, false);
    assert_eq!(u2.send_to(b"x", ua), Ok(1));
    assert!(take(&u).data);
    assert_eq!(u2.send_to(b"y", ua), Ok(1));
    assert!(take(&u).data);
}
