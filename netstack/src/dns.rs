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
//!
//! Queries are read, and the answers' headers written, with smoltcp's
//! `wire` DNS types; smoltcp writes no resource records and has no setter
//! for the rcode, so those bytes are written here.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use abi::Errno;
use smoltcp::wire::{DnsFlags, DnsOpcode, DnsPacket, DnsQueryType, DnsQuestion, DnsRcode};

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

/// Length of a message's header (RFC 1035 section 4.1.1).
const HEADER_LEN: usize = 12;
const CLASS_IN: u16 = 1;
/// TTL of every answer: short, so the guest asks again (and the policy
/// learns again) rather than trusting an old address.
const TTL: u32 = 30;

/// Nothing for a compression pointer to point at: the question's name is
/// the first of a query, and a pointer names only a prior occurrence (RFC
/// 1035 section 4.1.4). Read against no packet at all,
/// [`DnsPacket::parse_name`] refuses every pointer.
const NO_PRIOR_NAMES: DnsPacket<&[u8]> = DnsPacket::new_unchecked(&[]);

/// A question of a query.
#[derive(Debug, PartialEq, Eq)]
struct Question {
    name: String,
    /// The type asked for, of a question of class IN; `None` for any
    /// other class, which smoltcp's question parser does not take.
    qtype: Option<DnsQueryType>,
    /// Length of the question section, after the header.
    len: usize,
}

/// Parses the (single) question of a standard query. `None` for anything
/// malformed.
fn parse_question(packet: &DnsPacket<&[u8]>) -> Option<Question> {
    // A query (QR clear) of one question.
    if packet.flags().contains(DnsFlags::RESPONSE) || packet.question_count() != 1 {
        return None;
    }
    let section = packet.payload();
    let mut name = String::new();
    // The name's bytes: a length byte and the label each, and the root's.
    let mut name_len = 1;
    for label in NO_PRIOR_NAMES.parse_name(section) {
        let label = label.ok()?;
        name_len += 1 + label.len();
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
    let qtype = match DnsQuestion::parse(section) {
        Ok((_, q)) => Some(q.type_),
        // The name is sound and its type and class are there: what
        // smoltcp refused is the class.
        Err(_) if section.len() >= name_len + 4 => None,
        Err(_) => return None,
    };
    Some(Question {
        name,
        qtype,
        len: name_len + 4,
    })
}

/// An answer to `query`: a header with `rcode`, the question echoed, and
/// one record per address.
fn answer(
    query: &DnsPacket<&[u8]>,
    question: Option<&Question>,
    rcode: DnsRcode,
    addrs: &[IpAddr],
    max: usize,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(max.min(MAX_UDP_ANSWER));
    out.resize(HEADER_LEN, 0);
    let mut header = DnsPacket::new_unchecked(&mut out[..]);
    header.set_transaction_id(query.transaction_id());
    // A response to a standard query, RD as asked, recursion available.
    let rd = query.flags() & DnsFlags::RECURSION_DESIRED;
    header.set_flags(DnsFlags::RESPONSE | rd | DnsFlags::RECURSION_AVAILABLE);
    header.set_opcode(DnsOpcode::Query);
    // smoltcp reads the rcode but has no setter for it: the low four bits
    // of the flags.
    out[3] |= u8::from(rcode) & 0x0f;
    let Some(q) = question else {
        return out;
    };
    out.extend_from_slice(&query.payload()[..q.len]);
    let mut n = 0u16;
    let mut truncated = false;
    for a in addrs {
        // smoltcp parses records but does not write them: ours.
        let (qtype, data): (_, &[u8]) = match (a, q.qtype) {
            (IpAddr::V4(v4), Some(t @ DnsQueryType::A)) => (t, &v4.octets()),
            (IpAddr::V6(v6), Some(t @ DnsQueryType::Aaaa)) => (t, &v6.octets()),
            _ => continue,
        };
        if out.len() + 12 + data.len() > max {
            // TC: the client asks again over TCP for the whole answer.
            truncated = true;
            break;
        }
        // The name: a pointer to the question's, right after the header.
        out.extend_from_slice(&(0xc000 | HEADER_LEN as u16).to_be_bytes());
        out.extend_from_slice(&u16::from(qtype).to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&TTL.to_be_bytes());
        out.extend_from_slice(&(data.len() as u16).to_be_bytes());
        out.extend_from_slice(data);
        n += 1;
    }
    let mut header = DnsPacket::new_unchecked(&mut out[..]);
    header.set_question_count(1);
    header.set_answer_record_count(n);
    if truncated {
        let flags = header.flags();
        header.set_flags(flags | DnsFlags::TRUNCATED);
    }
    out
}

/// The answer to one query, consulting `policy` and `resolve`, of at most
/// `max` bytes.
fn respond(query: &[u8], policy: &Policy, resolve: &Resolver, max: usize) -> Option<Vec<u8>> {
    let query = DnsPacket::new_checked(query).ok()?;
    let Some(q) = parse_question(&query) else {
        return Some(answer(&query, None, DnsRcode::FormErr, &[], max));
    };
    let Some(qtype) = q.qtype else {
        return Some(answer(&query, Some(&q), DnsRcode::NotImp, &[], max));
    };
    if !policy.host_allowed(&q.name) {
        tracing::warn!(name = %q.name, "dns: refused (no --allow-host rule matches)");
        return Some(answer(&query, Some(&q), DnsRcode::NXDomain, &[], max));
    }
    if qtype != DnsQueryType::A && qtype != DnsQueryType::Aaaa {
        // An allowed name, a record kind we do not forward: no data.
        return Some(answer(&query, Some(&q), DnsRcode::NoError, &[], max));
    }
    match resolve(&q.name) {
        Ok(addrs) => {
            policy.note_resolution(&q.name, &addrs);
            tracing::info!(name = %q.name, ?addrs, "dns: resolved");
            Some(answer(&query, Some(&q), DnsRcode::NoError, &addrs, max))
        }
        Err(e) => {
            tracing::info!(name = %q.name, error = %e, "dns: host resolver failed");
            // getaddrinfo's errors do not say "no such name" apart from
            // "try again"; a timeout is the one to retry.
            let rcode = if e.kind() == std::io::ErrorKind::TimedOut {
                DnsRcode::ServFail
            } else {
                DnsRcode::NXDomain
            };
            Some(answer(&query, Some(&q), rcode, &[], max))
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
    use smoltcp::wire::{DnsRecord, DnsRecordData, DnsRepr};
    use std::net::Ipv4Addr;

    fn query(name: &str, qtype: DnsQueryType) -> Vec<u8> {
        let mut wire = Vec::new();
        for l in name.split('.') {
            wire.push(l.len() as u8);
            wire.extend_from_slice(l.as_bytes());
        }
        wire.push(0);
        let repr = DnsRepr {
            transaction_id: 0x1234,
            opcode: DnsOpcode::Query,
            flags: DnsFlags::RECURSION_DESIRED,
            question: DnsQuestion {
                name: &wire,
                type_: qtype,
            },
        };
        let mut q = vec![0; repr.buffer_len()];
        repr.emit(&mut DnsPacket::new_unchecked(&mut q[..]));
        q
    }

    fn fixed(addrs: Vec<IpAddr>) -> Resolver {
        Arc::new(move |_: &str| Ok(addrs.clone()))
    }

    /// The answer's header, and its records as smoltcp reads them.
    fn parsed(a: &[u8]) -> (DnsPacket<&[u8]>, Vec<DnsRecord<'_>>) {
        let p = DnsPacket::new_checked(a).expect("a header");
        let mut records = Vec::new();
        if p.question_count() == 1 {
            let (mut rest, _) = DnsQuestion::parse(&a[HEADER_LEN..]).expect("the question");
            for _ in 0..p.answer_record_count() {
                let (r, record) = DnsRecord::parse(rest).expect("a record");
                records.push(record);
                rest = r;
            }
            assert!(rest.is_empty(), "nothing after the records");
        }
        (p, records)
    }

    #[test]
    fn allowed_name_is_answered_and_recorded() {
        let p = Policy::new(vec![], vec!["*.example.com".into()]);
        let ip = IpAddr::V4(Ipv4Addr::new(93, 184, 216, 34));
        let q = query("www.Example.com", DnsQueryType::A);
        let a = respond(&q, &p, &fixed(vec![ip]), MAX_UDP_ANSWER).expect("answer");
        let (header, records) = parsed(&a);
        assert_eq!(header.transaction_id(), 0x1234);
        assert_eq!(header.rcode(), DnsRcode::NoError);
        assert_eq!(
            header.flags(),
            DnsFlags::RESPONSE | DnsFlags::RECURSION_DESIRED | DnsFlags::RECURSION_AVAILABLE
        );
        assert_eq!(records.len(), 1, "one answer");
        assert_eq!(
            records[0].data,
            DnsRecordData::A(Ipv4Addr::new(93, 184, 216, 34))
        );
        assert_eq!(records[0].ttl, TTL);
        // The record's name points at the question's.
        assert_eq!(records[0].name, &[0xc0, 12]);
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
            &query("secret-data.attacker.net", DnsQueryType::A),
            &p,
            &r,
            MAX_UDP_ANSWER,
        )
        .expect("answer");
        assert_eq!(parsed(&a).0.rcode(), DnsRcode::NXDomain);
        assert!(!*called.lock().expect("lock"));
    }

    #[test]
    fn aaaa_gets_only_v6() {
        let p = Policy::new(vec![], vec!["example.com".into()]);
        let v6: std::net::Ipv6Addr = "2001:db8::1".parse().expect("address");
        let addrs = vec![IpAddr::V4(Ipv4Addr::new(1, 2, 3, 4)), IpAddr::V6(v6)];
        let a = respond(
            &query("example.com", DnsQueryType::Aaaa),
            &p,
            &fixed(addrs),
            MAX_UDP_ANSWER,
        )
        .expect("answer");
        let (_, records) = parsed(&a);
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].data, DnsRecordData::Aaaa(v6));
        assert_eq!(
            a.len(),
            12 + 17 + 12 + 16,
            "header, question, one AAAA record"
        );
    }

    #[test]
    fn other_kinds_and_classes() {
        let p = Policy::new(vec![], vec!["example.com".into()]);
        let r = fixed(vec![IpAddr::V4(Ipv4Addr::new(1, 2, 3, 4))]);
        // An allowed name, MX: no data, no error.
        let a = respond(
            &query("example.com", DnsQueryType::Unknown(15)),
            &p,
            &r,
            512,
        )
        .expect("answer");
        let (header, records) = parsed(&a);
        assert_eq!((header.rcode(), records.len()), (DnsRcode::NoError, 0));
        // Class CH: not implemented, the question echoed as asked.
        let mut q = query("example.com", DnsQueryType::A);
        let n = q.len();
        q[n - 1] = 3;
        let a = respond(&q, &p, &r, 512).expect("answer");
        let header = DnsPacket::new_checked(&a[..]).expect("a header");
        assert_eq!(header.rcode(), DnsRcode::NotImp);
        assert_eq!(header.question_count(), 1);
        assert_eq!(&a[HEADER_LEN..], &q[HEADER_LEN..]);
    }

    #[test]
    fn malformed_queries_get_formerr_or_nothing() {
        let p = Policy::new(vec![], vec!["example.com".into()]);
        let r = fixed(vec![]);
        assert!(respond(&[1, 2, 3], &p, &r, MAX_UDP_ANSWER).is_none());
        let formerr = |q: &[u8]| {
            let a = respond(q, &p, &r, MAX_UDP_ANSWER).expect("answer");
            let (header, _) = parsed(&a);
            assert_eq!(header.question_count(), 0);
            header.rcode()
        };
        let mut q = query("example.com", DnsQueryType::A);
        q[12] = 0xc0; // a compression pointer in the question
        assert_eq!(formerr(&q), DnsRcode::FormErr);
        // A pointer back at the header is no better.
        let mut q = query("example.com", DnsQueryType::A);
        q.splice(12..12, [3, b'w', b'w', b'w', 0xc0, 0]);
        assert_eq!(formerr(&q), DnsRcode::FormErr);
        let mut q = query("example.com", DnsQueryType::A);
        q.truncate(q.len() - 3);
        assert_eq!(formerr(&q), DnsRcode::FormErr);
        let mut q = query("example.com", DnsQueryType::A);
        q[2] |= 0x80; // a response, not a query
        assert_eq!(formerr(&q), DnsRcode::FormErr);
        assert_eq!(
            formerr(&query("exa mple.com", DnsQueryType::A)),
            DnsRcode::FormErr
        );
        let long = vec!["a".repeat(63); 5].join(".");
        assert_eq!(formerr(&query(&long, DnsQueryType::A)), DnsRcode::FormErr);
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
            &query("example.com", DnsQueryType::A),
            &p,
            &fixed(many.clone()),
            MAX_UDP_ANSWER,
        )
        .expect("answer");
        assert!(a.len() <= MAX_UDP_ANSWER);
        let (header, records) = parsed(&a);
        assert!(records.len() > 20);
        assert!(header.flags().contains(DnsFlags::TRUNCATED), "TC set");
        let whole = respond(
            &query("example.com", DnsQueryType::A),
            &p,
            &fixed(many),
            MAX_TCP_MESSAGE,
        )
        .expect("answer");
        let (header, records) = parsed(&whole);
        assert_eq!(records.len(), 200);
        assert!(!header.flags().contains(DnsFlags::TRUNCATED));
    }
}
