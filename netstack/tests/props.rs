//! Random operation sequences: whatever a guest does, the stack answers with
//! values or errnos, never a panic, and its books stay balanced.

use std::net::SocketAddr;
use std::time::Duration;

use netstack::{
    Domain, Limits, Shutdown, SockOpt, SockOptName, Socket, SocketType, Stack, StackConfig,
};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Socket {
        v6: bool,
        udp: bool,
    },
    Bind(usize, usize),
    Listen(usize, i32),
    Accept(usize),
    Connect(usize, usize),
    /// Connect to where socket `.1` is bound.
    ConnectTo(usize, usize),
    Send(usize, usize),
    SendTo(usize, usize, usize),
    Recv(usize, usize, bool),
    Shutdown(usize, u8),
    Close(usize),
    SetOpt(usize, u8, u32),
    GetOpt(usize, u8),
    TakeError(usize),
    Poll(usize),
    Disconnect(usize),
    Sleep,
}

const ADDRS: &[&str] = &[
    "127.0.0.1:0",
    "127.0.0.1:5000",
    "0.0.0.0:5000",
    "0.0.0.0:0",
    "10.0.0.1:80",
    "127.0.0.2:5000",
    "[::1]:0",
    "[::1]:5000",
    "[::]:5000",
    "[::ffff:127.0.0.1]:5000",
    "[::ffff:127.0.0.1]:0",
    "[fe80::1]:22",
    "127.0.0.1:9",
    "[::1]:9",
];

fn op() -> impl Strategy<Value = Op> {
    let i = 0usize..8;
    prop_oneof![
        3 => (any::<bool>(), any::<bool>()).prop_map(|(v6, udp)| Op::Socket { v6, udp }),
        2 => (i.clone(), 0..ADDRS.len()).prop_map(|(s, a)| Op::Bind(s, a)),
        2 => (i.clone(), -2i32..4).prop_map(|(s, b)| Op::Listen(s, b)),
        2 => i.clone().prop_map(Op::Accept),
        1 => (i.clone(), 0..ADDRS.len()).prop_map(|(s, a)| Op::Connect(s, a)),
        2 => (i.clone(), i.clone()).prop_map(|(s, t)| Op::ConnectTo(s, t)),
        3 => (i.clone(), 0usize..300_000).prop_map(|(s, n)| Op::Send(s, n)),
        1 => (i.clone(), i.clone(), 0usize..70_000).prop_map(|(s, t, n)| Op::SendTo(s, t, n)),
        3 => (i.clone(), 0usize..300_000, any::<bool>()).prop_map(|(s, n, p)| Op::Recv(s, n, p)),
        1 => (i.clone(), 0u8..3).prop_map(|(s, h)| Op::Shutdown(s, h)),
        1 => i.clone().prop_map(Op::Close),
        1 => (i.clone(), 0u8..9, any::<u32>()).prop_map(|(s, o, v)| Op::SetOpt(s, o, v)),
        1 => (i.clone(), 0u8..9).prop_map(|(s, o)| Op::GetOpt(s, o)),
        1 => i.clone().prop_map(Op::TakeError),
        1 => i.clone().prop_map(Op::Poll),
        1 => i.clone().prop_map(Op::Disconnect),
        1 => Just(Op::Sleep),
    ]
}

fn run(ops: Vec<Op>) {
    let limits = Limits {
        max_sockets: 12,
        memory_budget: 8 << 20,
        ..Limits::default()
    };
    let stack = Stack::new(StackConfig {
        limits: limits.clone(),
        ..StackConfig::default()
    });
    stack.set_notifier(std::sync::Arc::new(|_| {}));
    let mut socks: Vec<Option<Socket>> = (0..8).map(|_| None).collect();
    let data = vec![0xa5u8; 300_000];
    let mut buf = vec![0u8; 300_000];
    let addr = |i: usize| -> SocketAddr { ADDRS[i].parse().expect("test address") };
    for op in ops {
        match op {
            Op::Socket { v6, udp } => {
                let d = if v6 { Domain::Inet6 } else { Domain::Inet };
                let t = if udp {
                    SocketType::Datagram
                } else {
                    SocketType::Stream
                };
                if let Ok(s) = stack.socket(d, t) {
                    if let Some(slot) = socks.iter_mut().find(|s| s.is_none()) {
                        *slot = Some(s);
                    }
                }
            }
            Op::Bind(s, a) => {
                if let Some(s) = &socks[s] {
                    let _ = s.bind(addr(a));
                }
            }
            Op::Listen(s, b) => {
                if let Some(s) = &socks[s] {
                    let _ = s.listen(b);
                }
            }
            Op::Accept(s) => {
                let got = socks[s].as_ref().and_then(|s| s.accept().ok());
                if let Some((c, _)) = got {
                    if let Some(slot) = socks.iter_mut().find(|s| s.is_none()) {
                        *slot = Some(c);
                    }
                }
            }
            Op::Connect(s, a) => {
                if let Some(s) = &socks[s] {
                    let _ = s.connect(addr(a));
                }
            }
            Op::ConnectTo(s, t) => {
                let to = socks[t].as_ref().and_then(|t| t.local_addr().ok());
                if let (Some(s), Some(to)) = (&socks[s], to) {
                    let _ = s.connect(to);
                }
            }
            Op::Send(s, n) => {
                if let Some(s) = &socks[s] {
                    let _ = s.send(&data[..n]);
                }
            }
            Op::SendTo(s, t, n) => {
                let to = socks[t].as_ref().and_then(|t| t.local_addr().ok());
                if let (Some(s), Some(to)) = (&socks[s], to) {
                    let _ = s.send_to(&data[..n], to);
                }
            }
            Op::Recv(s, n, peek) => {
                if let Some(s) = &socks[s] {
                    if let Ok(m) = s.recv_from(&mut buf[..n], peek) {
                        assert!(m.len <= n && m.len <= m.full_len);
                        assert!(buf[..m.len].iter().all(|&b| b == 0xa5));
                    }
                }
            }
            Op::Shutdown(s, h) => {
                if let Some(s) = &socks[s] {
                    let how = [Shutdown::Read, Shutdown::Write, Shutdown::Both][usize::from(h)];
                    let _ = s.shutdown(how);
                }
            }
            Op::Close(s) => socks[s] = None,
            Op::SetOpt(s, o, v) => {
                if let Some(s) = &socks[s] {
                    let b = v % 2 == 1;
                    let d = Duration::from_secs(u64::from(v % 40_000));
                    let opt = match o {
                        0 => SockOpt::ReuseAddr(b),
                        1 => SockOpt::ReusePort(b),
                        2 => SockOpt::KeepAlive(b),
                        3 => SockOpt::RcvBuf(v as usize),
                        4 => SockOpt::SndBuf(v as usize),
                        5 => SockOpt::Linger(b.then_some(Duration::from_secs(u64::from(v % 3)))),
                        6 => SockOpt::NoDelay(b),
                        7 => SockOpt::KeepIdle(d),
                        _ => SockOpt::V6Only(b),
                    };
                    let _ = s.set_option(opt);
                }
            }
            Op::GetOpt(s, o) => {
                if let Some(s) = &socks[s] {
                    let names = [
                        SockOptName::ReuseAddr,
                        SockOptName::ReusePort,
                        SockOptName::KeepAlive,
                        SockOptName::RcvBuf,
                        SockOptName::SndBuf,
                        SockOptName::Linger,
                        SockOptName::NoDelay,
                        SockOptName::KeepIdle,
                        SockOptName::V6Only,
                    ];
                    let _ = s.option(names[usize::from(o)]);
                }
            }
            Op::TakeError(s) => {
                if let Some(s) = &socks[s] {
                    let _ = s.take_error();
                }
            }
            Op::Poll(s) => {
                if let Some(s) = &socks[s] {
                    let _ = s.readiness();
                    let _ = s.bytes_readable();
                    let _ = s.local_addr();
                    let _ = s.peer_addr();
                }
            }
            Op::Disconnect(s) => {
                if let Some(s) = &socks[s] {
                    let _ = s.disconnect();
                }
            }
            Op::Sleep => std::thread::sleep(Duration::from_millis(2)),
        }
        let st = stack.stats();
        assert!(st.sockets <= limits.max_sockets, "{st:?}");
        assert!(st.buffer_bytes <= limits.memory_budget, "{st:?}");
        assert!(st.internal_sockets <= 2 * limits.max_sockets, "{st:?}");
    }
    let open = socks.iter().filter(|s| s.is_some()).count();
    assert_eq!(stack.stats().sockets, open);
    drop(socks);
    assert_eq!(stack.stats().sockets, 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_operations_never_panic(ops in proptest::collection::vec(op(), 1..80)) {
        run(ops);
    }
}
