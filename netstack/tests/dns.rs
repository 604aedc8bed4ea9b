//! The sandbox's DNS server over UDP and TCP (RFC 7766: a 16-bit length
//! before each message), on a stack of its own.

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use common::{connect, read_exact, send_all, tcp, udp, Waiter};
use netstack::dns::{serve, DNS_ADDR};
use netstack::{Errno, Policy, Stack, StackConfig};

/// A stack whose DNS answers `many.test` with 100 addresses and refuses
/// every other name.
fn dns_stack() -> (Arc<Stack>, Arc<Waiter>) {
    let stack = Stack::new(StackConfig {
        policy: Arc::new(Policy::new(vec![], vec!["many.test".into()])),
        ..StackConfig::default()
    });
    let waiter = Arc::new(Waiter::default());
    let w = waiter.clone();
    stack.set_notifier(Arc::new(move |_ids| w.bump()));
    let addrs: Vec<IpAddr> = (1..=100u8)
        .map(|i| IpAddr::V4(Ipv4Addr::new(192, 0, 2, i)))
        .collect();
    serve(&stack, Arc::new(move |_name: &str| Ok(addrs.clone()))).expect("serve");
    (stack, waiter)
}

/// A query for `name`, type A, with id `id`.
fn query(id: u16, name: &str) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[test]
fn tcp_answers_whole_and_udp_within_512_bytes() {
    let (stack, w) = dns_stack();

    let u = udp(&stack, false);
    u.send_to(&query(7, "many.test"), DNS_ADDR).expect("send");
    let mut buf = [0u8; 4096];
    let got = common::blocking(&w, std::time::Duration::from_secs(10), || {
        u.recv_from(&mut buf, false).map(|m| m.len)
    })
    .expect("udp answer");
    assert!(got <= 512, "{got}");
    assert_eq!(be16(&buf, 0), 7);
    let over_udp = be16(&buf, 6);
    assert!((1..100).contains(&over_udp), "{over_udp}");
    assert_eq!(be16(&buf, 2) & 0x0200, 0x0200, "truncated: TC set");

    // Over TCP: two queries in one write, both answered in order, the
    // first with all 100 records.
    let c = tcp(&stack, false);
    connect(&w, &c, DNS_ADDR).expect("connect");
    let mut both = Vec::new();
    for (id, name) in [(1, "many.test"), (2, "other.test")] {
        let q = query(id, name);
        both.extend_from_slice(&(q.len() as u16).to_be_bytes());
        both.extend_from_slice(&q);
    }
    send_all(&w, &c, &both);
    let len = be16(&read_exact(&w, &c, 2), 0) as usize;
    let a = read_exact(&w, &c, len);
    assert!(len > 512, "{len}");
    assert_eq!((be16(&a, 0), be16(&a, 6)), (1, 100));
    let len = be16(&read_exact(&w, &c, 2), 0) as usize;
    let b = read_exact(&w, &c, len);
    // A name no rule allows: NXDOMAIN (rcode 3), no records.
    assert_eq!((be16(&b, 0), be16(&b, 2) & 0xf, be16(&b, 6)), (2, 3, 0));
    c.close();

    // Many idle connections do not stop the server answering.
    let idle: Vec<_> = (0..40)
        .map(|_| {
            let s = tcp(&stack, false);
            connect(&w, &s, DNS_ADDR).expect("connect");
            s
        })
        .collect();
    let c = tcp(&stack, false);
    connect(&w, &c, DNS_ADDR).expect("connect");
    let q = query(3, "many.test");
    let mut msg = (q.len() as u16).to_be_bytes().to_vec();
    msg.extend_from_slice(&q);
    send_all(&w, &c, &msg);
    let len = be16(&read_exact(&w, &c, 2), 0) as usize;
    assert_eq!(be16(&read_exact(&w, &c, len), 6), 100);
    drop(idle);
    assert_eq!(u.recv_from(&mut buf, false).err(), Some(Errno::EAGAIN));
}
