//! The sandbox's DNS server, the only way a name from inside the sandbox
//! becomes an address outside it (`Mode::Egress`).
//!
//! It listens on the stack's own loopback (`127.0.0.1:53`, which the
//! sandbox's `/etc/resolv.conf` names) and answers `A` and `AAAA` questions
//! for names that an `--allow-host` rule matches, by asking the host's
//! resolver; every answer is recorded in the egress policy
//! ([`Policy::note_resolution`]), which is what lets a later `connect` to
//! that address through. Other names get `NXDOMAIN` without the host ever
//! seeing them, so DNS cannot carry data out of the sandbox either.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use abi::Errno;

use crate::{Domain, Policy, SocketType, Stack};

/// Resolves a name outside the sandbox. The default asks the host's
/// resolver (`getaddrinfo`); tests give their own.
pub type Resolver = Arc<dyn Fn(&str) -> std::io::Result<Vec<IpAddr>> + Send + Sync>;

/// The host's resolver.
pub fn host_resolver() -> Resolver {
    Arc::new(|name: &str| {
        let mut v: Vec<IpAddr> = (name, 0u16).to_socket_addrs()?.map(|a| a.ip()).collect();
        v.dedup();
        Ok(v)
    })
}

/// Where the server listens inside the sandbox.
pub const DNS_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 53);

/// Largest answer over UDP without EDNS (RFC 1035).
const MAX_UDP_ANSWER: usize = 512;
/// Largest message over TCP (its length prefix is 16 bits).
const MAX_TCP_MESSAGE: usize = 65535;
/// Most TCP connections the server keeps; a new one beyond closes the
/// oldest, so idle connections cannot starve the others.
const MAX_TCP_CONNS: usize = 16;
/// Longest name (RFC 1035).
const MAX_NAME: usize = 255;

const TYPE_A: u16 = 1;
const TYPE_AAAA: u16 = 28;
const CLASS_IN: u16 = 1;
const RCODE_FORMERR: u16 = 1;
const RCODE_SERVFAIL: u16 = 2;
const RCODE_NXDOMAIN: u16 = 3;
const RCODE_NOTIMP: u16 = 4;
/// TTL of every answer: short, so the guest asks again (and the policy
/// learns again) rather than trusting an old address.
const TTL: u32 = 30;

/// A question of a query.
#[derive(Debug, PartialEq, Eq)]
struct Question {
    name: String,
    qtype: u16,
    qclass: u16,
    /// Byte range of the question section in the query.
    end: usize,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Parses the (single) question of a standard query. `None` for anything
/// malformed.
fn parse_question(q: &[u8]) -> Option<Question> {
    let flags = be16(q, 2)?;
    let qdcount = be16(q, 4)?;
    // QR must be 0 (a query); one question.
    if flags & 0x8000 != 0 || qdcount != 1 {
        return None;
    }
    let mut at = 12;
    let mut name = String::new();
    loop {
        let len = *q.get(at)? as usize;
        at += 1;
        if len == 0 {
            break;
        }
        // No compression pointers in a question (nothing to point at).
        if len & 0xc0 != 0 {
            return None;
        }
        let label = q.get(at..at + len)?;
        at += len;
        if !name.is_empty() {
            name.push('.');
        }
        for &c in label {
            if !(c.is_ascii_alphanumeric() || c == b'-' || c == b'_') {
                return None;
            }
            name.push(c.to_ascii_lowercase() as char);
        }
        if name.len() > MAX_NAME {
            return None;
        }
    }
    let qtype = be16(q, at)?;
    let qclass = be16(q, at + 2)?;
    Some(Question {
        name,
        qtype,
        qclass,
        end: at + 4,
    })
}

/// An answer to `query`: a header with `rcode`, the question echoed, and
/// one record per address.
fn answer(
    query: &[u8],
    question: Option<&Question>,
    rcode: u16,
    addrs: &[IpAddr],
    max: usize,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(max.min(MAX_UDP_ANSWER));
    out.extend_from_slice(query.get(..2).unwrap_or(&[0, 0]));
    let rd = be16(query, 2).unwrap_or(0) & 0x0100;
    // QR, opcode 0, RD as asked, RA, rcode.
    let flags = 0x8000 | rd | 0x0080 | rcode;
    out.extend_from_slice(&flags.to_be_bytes());
    let Some(q) = question else {
        out.extend_from_slice(&[0; 8]);
        return out;
    };
    out.extend_from_slice(&1u16.to_be_bytes());
    let count_at = out.len();
    out.extend_from_slice(&[0; 6]);
    out.extend_from_slice(&query[12..q.end]);
    let mut n = 0u16;
    for a in addrs {
        let data: Vec<u8> = match (a, q.qtype) {
            (IpAddr::V4(v4), TYPE_A) => v4.octets().to_vec(),
            (IpAddr::V6(v6), TYPE_AAAA) => v6.octets().to_vec(),
            _ => continue,
        };
        if out.len() + 12 + data.len() > max {
            // TC: the client asks again over TCP for the whole answer.
            out[2] |= 0x02;
            break;
        }
        // The name: a pointer to the question's (offset 12).
        out.extend_from_slice(&0xc00cu16.to_be_bytes());
        out.extend_from_slice(&q.qtype.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&TTL.to_be_bytes());
        out.extend_from_slice(&(data.len() as u16).to_be_bytes());
        out.extend_from_slice(&data);
        n += 1;
    }
    out[count_at..count_at + 2].copy_from_slice(&n.to_be_bytes());
    out
}

/// The answer to one query, consulting `policy` and `resolve`, of at most
/// `max` bytes.
fn respond(query: &[u8], policy: &Policy, resolve: &Resolver, max: usize) -> Option<Vec<u8>> {
    if query.len() < 12 {
        return None;
    }
    let Some(q) = parse_question(query) else {
        return Some(answer(query, None, RCODE_FORMERR, &[], max));
    };
    if q.qclass != CLASS_IN {
        return Some(answer(query, Some(&q), RCODE_NOTIMP, &[], max));
    }
    if !policy.host_allowed(&q.name) {
        tracing::warn!(name = %q.name, "dns: refused (no --allow-host rule matches)");
        return Some(answer(query, Some(&q), RCODE_NXDOMAIN, &[], max));
    }
    if q.qtype != TYPE_A && q.qtype != TYPE_AAAA {
        // An allowed name, a record kind we do not forward: no data.
        return Some(answer(query, Some(&q), 0, &[], max));
    }
    match resolve(&q.name) {
        Ok(addrs) => {
            policy.note_resolution(&q.name, &addrs);
            tracing::info!(name = %q.name, ?addrs, "dns: resolved");
            Some(answer(query, Some(&q), 0, &addrs, max))
        }
        Err(e) => {
            tracing::info!(name = %q.name, error = %e, "dns: host resolver failed");
            // getaddrinfo's errors do not say "no such name" apart from
            // "try again"; a timeout is the one to retry.
            let rcode = if e.kind() == std::io::ErrorKind::TimedOut {
                RCODE_SERVFAIL
            } else {
                RCODE_NXDOMAIN
            };
            Some(answer(query, Some(&q), rcode, &[], max))
        }
    }
}

/// Wakes the server thread when its socket may be readable.
#[derive(Default)]
pub(crate) struct Waiter {
    ready: Mutex<bool>,
    cond: Condvar,
}

impl Waiter {
    pub(crate) fn wake(&self) {
        *self.ready.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cond.notify_all();
    }

    fn wait(&self, timeout: Duration) {
        let mut g = self.ready.lock().unwrap_or_else(|e| e.into_inner());
        if !*g {
            g = self
                .cond
                .wait_timeout(g, timeout)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        *g = false;
    }
}

/// A DNS-over-TCP connection: messages with a 16-bit length prefix each
/// way (RFC 7766).
struct TcpConn {
    sock: crate::Socket,
    input: Vec<u8>,
    output: Vec<u8>,
}

impl TcpConn {
    /// Reads what has come, answers every whole query, sends what it can.
    /// `false` once the connection is over.
    fn progress(&mut self, policy: &Policy, resolve: &Resolver, busy: &mut bool) -> bool {
        let mut buf = [0u8; 4096];
        let mut open = true;
        // Queries are small: more than one whole message waiting unread
        // is a client not reading its answers; stop reading until it does.
        while self.output.len() < 2 * (MAX_TCP_MESSAGE + 2) {
            match self.sock.recv(&mut buf, false) {
                Ok(0) => {
                    open = false;
                    break;
                }
                Ok(n) => {
                    *busy = true;
                    self.input.extend_from_slice(&buf[..n]);
                    if self.input.len() > MAX_TCP_MESSAGE + 2 {
                        break;
                    }
                }
                Err(Errno::EAGAIN) => break,
                Err(_) => return false,
            }
        }
        while self.input.len() >= 2 {
            let len = usize::from(u16::from_be_bytes([self.input[0], self.input[1]]));
            if self.input.len() < 2 + len {
                break;
            }
            let query: Vec<u8> = self.input.drain(..2 + len).skip(2).collect();
            if let Some(a) = respond(&query, policy, resolve, MAX_TCP_MESSAGE) {
                self.output
                    .extend_from_slice(&(a.len() as u16).to_be_bytes());
                self.output.extend_from_slice(&a);
            }
        }
        while !self.output.is_empty() {
            match self.sock.send(&self.output) {
                Ok(n) => {
                    *busy = true;
                    self.output.drain(..n);
                }
                Err(Errno::EAGAIN) => break,
                Err(_) => return false,
            }
        }
        open || !self.output.is_empty()
    }
}

/// Starts the DNS server of `stack` on [`DNS_ADDR`], over UDP and TCP.
pub fn serve(stack: &Arc<Stack>, resolve: Resolver) -> Result<(), Errno> {
    let sock = stack.socket(Domain::Inet, SocketType::Datagram)?;
    sock.bind(DNS_ADDR)?;
    let listener = stack.socket(Domain::Inet, SocketType::Stream)?;
    listener.bind(DNS_ADDR)?;
    listener.listen(MAX_TCP_CONNS as i32)?;
    let waiter = Arc::new(Waiter::default());
    stack.add_waiter(sock.id(), waiter.clone());
    stack.add_waiter(listener.id(), waiter.clone());
    let policy = stack.policy().clone();
    let stack = Arc::clone(stack);
    std::thread::Builder::new()
        .name("netstack-dns".into())
        .spawn(move || {
            let mut buf = vec![0u8; 4096];
            let mut conns: std::collections::VecDeque<TcpConn> = Default::default();
            loop {
                let mut busy = false;
                match sock.recv_from(&mut buf, false) {
                    Ok(m) => {
                        busy = true;
                        let q = &buf[..m.len];
                        if let Some(a) = respond(q, &policy, &resolve, MAX_UDP_ANSWER) {
                            let _ = sock.send_to(&a, m.from);
                        }
                    }
                    Err(Errno::EAGAIN) => {}
                    Err(e) => {
                        tracing::warn!(error = ?e, "dns: server stops");
                        return;
                    }
                }
                while let Ok((c, _)) = listener.accept() {
                    busy = true;
                    stack.add_waiter(c.id(), waiter.clone());
                    conns.push_back(TcpConn {
                        sock: c,
                        input: Vec::new(),
                        output: Vec::new(),
                    });
                    if conns.len() > MAX_TCP_CONNS {
                        if let Some(old) = conns.pop_front() {
                            stack.remove_waiter(old.sock.id());
                        }
                    }
                }
                conns.retain_mut(|c| {
                    let keep = c.progress(&policy, &resolve, &mut busy);
                    if !keep {
                        stack.remove_waiter(c.sock.id());
                    }
                    keep
                });
                if !busy {
                    waiter.wait(Duration::from_secs(1));
                }
            }
        })
        .map_err(|_| Errno::ENOMEM)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn query(name: &str, qtype: u16) -> Vec<u8> {
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for l in name.split('.') {
            q.push(l.len() as u8);
            q.extend_from_slice(l.as_bytes());
        }
        q.push(0);
        q.extend_from_slice(&qtype.to_be_bytes());
        q.extend_from_slice(&CLASS_IN.to_be_bytes());
        q
    }

    fn fixed(addrs: Vec<IpAddr>) -> Resolver {
        Arc::new(move |_: &str| Ok(addrs.clone()))
    }

    #[test]
    fn allowed_name_is_answered_and_recorded() {
        let p = Policy::new(vec![], vec!["*.example.com".into()]);
        let ip = IpAddr::V4(Ipv4Addr::new(93, 184, 216, 34));
        let q = query("www.Example.com", TYPE_A);
        let a = respond(&q, &p, &fixed(vec![ip]), MAX_UDP_ANSWER).expect("answer");
        assert_eq!(&a[..2], &[0x12, 0x34]);
        assert_eq!(be16(&a, 2).expect("answer") & 0x000f, 0, "rcode");
        assert_eq!(be16(&a, 6), Some(1), "one answer");
        assert_eq!(&a[a.len() - 4..], &[93, 184, 216, 34]);
        assert!(p.check(SocketAddr::new(ip, 443), None).is_allowed());
    }

    #[test]
    fn other_names_never_reach_the_resolver() {
        let p = Policy::new(vec![], vec!["example.com".into()]);
        let called = Arc::new(Mutex::new(false));
        let c = called.clone();
        let r: Resolver = Arc::new(move |_: &str| {
            *c.lock().expect("lock") = true;
            Ok(vec![])
        });
        let a = respond(
            &query("secret-data.attacker.net", TYPE_A),
            &p,
            &r,
            MAX_UDP_ANSWER,
        )
        .expect("answer");
        assert_eq!(be16(&a, 2).expect("answer") & 0x000f, RCODE_NXDOMAIN);
        assert!(!*called.lock().expect("lock"));
    }

    #[test]
    fn aaaa_gets_only_v6() {
        let p = Policy::new(vec![], vec!["example.com".into()]);
        let addrs = vec![
            IpAddr::V4(Ipv4Addr::new(1, 2, 3, 4)),
            "2001:db8::1".parse().expect("address"),
        ];
        let a = respond(
            &query("example.com", TYPE_AAAA),
            &p,
            &fixed(addrs),
            MAX_UDP_ANSWER,
        )
        .expect("answer");
        assert_eq!(be16(&a, 6), Some(1));
        assert_eq!(
            a.len(),
            12 + 17 + 12 + 16,
            "header, question, one AAAA record"
        );
    }

    #[test]
    fn malformed_queries_get_formerr_or_nothing() {
        let p = Policy::new(vec![], vec!["example.com".into()]);
        let r = fixed(vec![]);
        assert!(respond(&[1, 2, 3], &p, &r, MAX_UDP_ANSWER).is_none());
        let mut q = query("example.com", TYPE_A);
        q[12] = 0xc0; // a compression pointer in the question
        let a = respond(&q, &p, &r, MAX_UDP_ANSWER).expect("answer");
        assert_eq!(be16(&a, 2).expect("answer") & 0x000f, RCODE_FORMERR);
        let mut q = query("example.com", TYPE_A);
        q.truncate(q.len() - 3);
        let a = respond(&q, &p, &r, MAX_UDP_ANSWER).expect("answer");
        assert_eq!(be16(&a, 2).expect("answer") & 0x000f, RCODE_FORMERR);
        // Random bytes never panic.
        let mut x: u32 = 1;
        for len in 0..300 {
            let junk: Vec<u8> = (0..len)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (x >> 16) as u8
                })
                .collect();
            let _ = respond(&junk, &p, &r, MAX_UDP_ANSWER);
        }
    }

    #[test]
    fn answers_fit_512_bytes() {
        let p = Policy::new(vec![], vec!["example.com".into()]);
        let many: Vec<IpAddr> = (0..200u8)
            .map(|i| IpAddr::V4(Ipv4Addr::new(1, 1, 1, i)))
            .collect();
        let a = respond(
            &query("example.com", TYPE_A),
            &p,
            &fixed(many.clone()),
            MAX_UDP_ANSWER,
        )
        .expect("answer");
        assert!(a.len() <= MAX_UDP_ANSWER);
        assert!(be16(&a, 6).expect("answer") > 20);
        assert_eq!(be16(&a, 2).expect("flags") & 0x0200, 0x0200, "TC set");
        let whole = respond(
            &query("example.com", TYPE_A),
            &p,
            &fixed(many),
            MAX_TCP_MESSAGE,
        )
        .expect("answer");
        assert_eq!(be16(&whole, 6), Some(200));
        assert_eq!(be16(&whole, 2).expect("flags") & 0x0200, 0);
    }
}
