//! HTTP/1 requests on their way out of the sandbox, on a connection the
//! relay inspects: each request's `Host` must be the connection's name, its
//! method and path must pass the host's `--allow-http` rules, and the
//! placeholders of the host's secrets in its headers become their values.
//! Bodies pass untouched; after an `Upgrade` the stream is opaque.

use std::sync::Arc;

use crate::policy::{DenyReason, Policy};
use crate::sniff::{self, Body, Chunked};

/// Where the outgoing stream is.
enum At {
    Head,
    /// A body held whole until it has come (`n` bytes), for secrets put
    /// in place in bodies; `head` goes out with it.
    Buffer {
        head: Vec<u8>,
        n: usize,
    },
    Length(u64),
    Chunked(Chunked),
    Opaque,
}

/// The filter of one connection's outgoing bytes.
pub(crate) struct Outgoing {
    name: String,
    policy: Arc<Policy>,
    at: At,
    pending: Vec<u8>,
    /// Bytes of a head searched for its end so far (each byte is looked
    /// at about once, however the guest cuts its writes).
    searched: usize,
    /// Placeholders replaced so far.
    pub secrets: u64,
    /// Requests seen so far.
    pub requests: u64,
}

/// A request the Sentry refuses: the answer for the guest, and why.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub response: Vec<u8>,
    pub reason: DenyReason,
}

impl Outgoing {
    pub(crate) fn new(name: &str, policy: Arc<Policy>) -> Outgoing {
        Outgoing {
            name: name.to_string(),
            policy,
            at: At::Head,
            pending: Vec::new(),
            searched: 0,
            secrets: 0,
            requests: 0,
        }
    }

    /// Takes bytes the guest sent and appends what may go out to `out`.
    /// After a refusal nothing more goes out on this connection.
    pub(crate) fn push(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), Refusal> {
        if let At::Opaque = self.at {
            out.extend_from_slice(input);
            return Ok(());
        }
        self.pending.extend_from_slice(input);
        let mut used = 0;
        loop {
            let rest = &self.pending[used..];
            if rest.is_empty() {
                break;
            }
            match &mut self.at {
                At::Opaque => {
                    out.extend_from_slice(rest);
                    used = self.pending.len();
                }
                At::Buffer { head, n } => {
                    let k = *n;
                    if rest.len() < k {
                        break;
                    }
                    let head = std::mem::take(head);
                    let (body, count) = self.substitute_body(&self.pending[used..used + k]);
                    self.secrets += count;
                    out.extend_from_slice(&with_length(&head, body.len()));
                    out.extend_from_slice(&body);
                    used += k;
                    self.at = At::Head;
                }
                At::Length(n) => {
                    let k = usize::try_from(*n).unwrap_or(usize::MAX).min(rest.len());
                    out.extend_from_slice(&rest[..k]);
                    used += k;
                    *n -= k as u64;
                    if *n == 0 {
                        self.at = At::Head;
                    }
                }
                At::Chunked(c) => {
                    let (k, done) = c.feed(rest).map_err(|()| bad_request(&self.name))?;
                    out.extend_from_slice(&rest[..k]);
                    used += k;
                    if done {
                        self.at = At::Head;
                    } else if k == 0 {
                        break;
                    }
                }
                At::Head => {
                    let from = self.searched.saturating_sub(3);
                    if sniff::find(&rest[from..], b"\r\n\r\n").is_none() {
                        if rest.len() >= sniff::MAX_HEAD
                            || (self.searched == 0 && sniff::request_head(rest).is_err())
                        {
                            return Err(bad_request(&self.name));
                        }
                        self.searched = rest.len();
                        break;
                    }
                    self.searched = 0;
                    let head = match sniff::request_head(rest) {
                        Ok(Some(h)) => h,
                        Ok(None) => break,
                        Err(()) => return Err(bad_request(&self.name)),
                    };
                    self.requests += 1;
                    if let Some(h) = &head.host {
                        if *h != self.name {
                            return Err(refuse(DenyReason::Fronting { name: h.clone() }));
                        }
                    }
                    self.policy
                        .check_request(&self.name, &head.method, &head.target)
                        .map_err(refuse)?;
                    let (text, n) = self.substitute(&rest[..head.len]);
                    self.secrets += n;
                    out.extend_from_slice(&text);
                    used += head.len;
                    self.at = match head.body {
                        _ if head.opaque => At::Opaque,
                        Body::Length(n) if n > 0 && n <= MAX_BODY && self.body_secrets() => {
                            // Sent with its body, Content-Length made anew.
                            out.truncate(out.len() - text.len());
                            At::Buffer {
                                head: text,
                                n: n as usize,
                            }
                        }
                        Body::Length(0) => At::Head,
                        Body::Length(n) => At::Length(n),
                        Body::Chunked => At::Chunked(Chunked::default()),
                    };
                }
            }
        }
        self.pending.drain(..used);
        Ok(())
    }

    /// Whether a secret of this host goes into bodies too.
    fn body_secrets(&self) -> bool {
        self.policy
            .secrets()
            .iter()
            .any(|s| s.in_body && s.goes_to(&self.name))
    }

    /// A body with the placeholders of this host's body secrets replaced.
    fn substitute_body(&self, body: &[u8]) -> (Vec<u8>, u64) {
        let mut b = body.to_vec();
        let mut n = 0;
        for s in self.policy.secrets() {
            if s.in_body && s.goes_to(&self.name) {
                n += replace(&mut b, s.placeholder.as_bytes(), s.value());
            }
        }
        (b, n)
    }

    /// The head with the placeholders of this host's secrets replaced,
    /// also inside `Basic` credentials; and how many were.
    fn substitute(&self, head: &[u8]) -> (Vec<u8>, u64) {
        let secrets: Vec<_> = self
            .policy
            .secrets()
            .iter()
            .filter(|s| s.goes_to(&self.name))
            .collect();
        if secrets.is_empty() {
            return (head.to_vec(), 0);
        }
        let mut count = 0;
        let mut out = Vec::with_capacity(head.len());
        for line in split_lines(head) {
            let mut line = line.to_vec();
            for s in &secrets {
                count += replace(&mut line, s.placeholder.as_bytes(), s.value());
            }
            count += basic_credentials(&mut line, &secrets);
            out.extend_from_slice(&line);
        }
        (out, count)
    }
}

/// Largest request body held whole to put secrets in place.
const MAX_BODY: u64 = 1 << 20;

/// `head` with its `Content-Length` saying `len`.
fn with_length(head: &[u8], len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(head.len() + 8);
    for line in split_lines(head) {
        let key = line.split(|&b| b == b':').next().unwrap_or(b"");
        if line.contains(&b':') && key.eq_ignore_ascii_case(b"content-length") {
            out.extend_from_slice(format!("Content-Length: {len}\r\n").as_bytes());
        } else {
            out.extend_from_slice(line);
        }
    }
    out
}

/// Lines with their CRLF.
fn split_lines(b: &[u8]) -> impl Iterator<Item = &[u8]> {
    b.split_inclusive(|&c| c == b'\n')
}

/// Replaces every `from` in `v` with `to`; how many.
fn replace(v: &mut Vec<u8>, from: &[u8], to: &[u8]) -> u64 {
    if from.is_empty() {
        return 0;
    }
    let mut n = 0;
    let mut at = 0;
    while let Some(i) = sniff::find(&v[at..], from) {
        let i = at + i;
        v.splice(i..i + from.len(), to.iter().copied());
        at = i + to.len();
        n += 1;
    }
    n
}

/// `Authorization: Basic B64` (or `Proxy-Authorization`) whose decoded
/// credentials hold a placeholder: decoded, replaced, encoded again.
fn basic_credentials(line: &mut Vec<u8>, secrets: &[&crate::policy::Secret]) -> u64 {
    let Ok(text) = std::str::from_utf8(line) else {
        return 0;
    };
    let Some((key, value)) = text.split_once(':') else {
        return 0;
    };
    let key = key.trim();
    if !key.eq_ignore_ascii_case("authorization")
        && !key.eq_ignore_ascii_case("proxy-authorization")
    {
        return 0;
    }
    let value = value.trim();
    let Some(b64) = value
        .strip_prefix("Basic ")
        .or_else(|| value.strip_prefix("basic "))
    else {
        return 0;
    };
    let Some(mut creds) = base64_decode(b64.trim()) else {
        return 0;
    };
    let mut n = 0;
    for s in secrets {
        n += replace(&mut creds, s.placeholder.as_bytes(), s.value());
    }
    if n > 0 {
        *line = format!("{key}: Basic {}\r\n", base64_encode(&creds)).into_bytes();
        creds.fill(0);
    }
    n
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(b: &[u8]) -> String {
    let mut o = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= c.len() {
                o.push(char::from(B64[(n >> shift & 63) as usize]));
            } else {
                o.push('=');
            }
        }
    }
    o
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes() {
        let v = B64.iter().position(|&x| x == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

fn bad_request(name: &str) -> Refusal {
    Refusal {
        response: response(
            400,
            "Bad Request",
            "not an HTTP/1 request the sandbox can check",
        ),
        reason: DenyReason::BadRequest {
            name: name.to_string(),
        },
    }
}

fn refuse(reason: DenyReason) -> Refusal {
    Refusal {
        response: response(403, "Forbidden", &format!("refused: {reason}")),
        reason,
    }
}

/// A response of the Sentry's own, which ends the connection.
pub(crate) fn response(code: u16, status: &str, text: &str) -> Vec<u8> {
    let body = format!("ferrovisor: {text}\n");
    format!(
        "HTTP/1.1 {code} {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{HttpRule, Secret};

    fn policy() -> Arc<Policy> {
        Arc::new(
            Policy::new(vec![], vec!["api.test".into()])
                .with_http_rules(vec![
                    HttpRule::parse("api.test:GET,HEAD:/v1/,/ok").expect("rule")
                ])
                .with_secrets(vec![Secret::new(
                    "TOKEN".into(),
                    "PLACEHOLDER123".into(),
                    b"real-value".to_vec(),
                    vec!["api.test".into()],
                )]),
        )
    }

    #[test]
    fn secrets_replace_placeholders_in_heads_only() {
        let mut o = Outgoing::new("api.test", policy());
        let mut out = Vec::new();
        let req =
            b"GET /v1/x HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer PLACEHOLDER123\r\n\r\n";
        // In pieces, as the guest may send it.
        for piece in req.chunks(7) {
            o.push(piece, &mut out).expect("allowed");
        }
        assert_eq!(
            out,
            b"GET /v1/x HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer real-value\r\n\r\n"
        );
        assert_eq!((o.secrets, o.requests), (1, 1));
        // Basic credentials: decoded, replaced, encoded.
        let mut out = Vec::new();
        let creds = base64_encode(b"user:PLACEHOLDER123");
        let req =
            format!("HEAD /ok HTTP/1.1\r\nHost: api.test\r\nAuthorization: Basic {creds}\r\n\r\n");
        o.push(req.as_bytes(), &mut out).expect("allowed");
        let want = format!(
            "HEAD /ok HTTP/1.1\r\nHost: api.test\r\nAuthorization: Basic {}\r\n\r\n",
            base64_encode(b"user:real-value")
        );
        assert_eq!(String::from_utf8_lossy(&out), want);
    }

    #[test]
    fn methods_paths_and_hosts_are_checked_per_request() {
        let mut o = Outgoing::new("api.test", policy());
        let mut out = Vec::new();
        // A body with the placeholder is passed as it is, then the next head.
        let req = b"GET /v1/a HTTP/1.1\r\nHost: api.test\r\nContent-Length: 14\r\n\r\nPLACEHOLDER123GET /ok HTTP/1.1\r\nHost: api.test\r\n\r\n";
        o.push(req, &mut out).expect("allowed");
        assert_eq!(out, req.to_vec());
        let e = o
            .push(b"POST /v1/a HTTP/1.1\r\nHost: api.test\r\n\r\n", &mut out)
            .expect_err("POST refused");
        assert!(String::from_utf8_lossy(&e.response).starts_with("HTTP/1.1 403"));
        let mut o = Outgoing::new("api.test", policy());
        assert!(o
            .push(
                b"GET /v2/ HTTP/1.1\r\nHost: api.test\r\n\r\n",
                &mut Vec::new()
            )
            .is_err());
        let mut o = Outgoing::new("api.test", policy());
        let e = o
            .push(
                b"GET /v1/ HTTP/1.1\r\nHost: other.test\r\n\r\n",
                &mut Vec::new(),
            )
            .expect_err("another host");
        assert!(matches!(e.reason, DenyReason::Fronting { .. }));
        // Chunked bodies are followed to their end.
        let mut o = Outgoing::new("api.test", policy());
        let mut out = Vec::new();
        let req = b"GET /v1/ HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nPOST / HTTP/1.1\r\n\r\n";
        assert!(o.push(req, &mut out).is_err());
    }

    #[test]
    fn body_secrets_go_into_bodies_of_known_length() {
        let policy = Arc::new(Policy::new(vec![], vec!["api.test".into()]).with_secrets(
            vec![Secret::new(
                "T".into(),
                "PH".into(),
                b"the-value".to_vec(),
                vec!["api.test".into()],
            )
            .in_bodies()],
        ));
        let mut o = Outgoing::new("api.test", policy);
        let mut out = Vec::new();
        let req = b"POST /t HTTP/1.1\r\nHost: api.test\r\ncontent-length: 10\r\n\r\n{\"t\":\"PH\"}GET / HTTP/1.1\r\nHost: api.test\r\n\r\n";
        for piece in req.chunks(5) {
            o.push(piece, &mut out).expect("allowed");
        }
        assert_eq!(
            String::from_utf8_lossy(&out),
            "POST /t HTTP/1.1\r\nHost: api.test\r\nContent-Length: 17\r\n\r\n{\"t\":\"the-value\"}GET / HTTP/1.1\r\nHost: api.test\r\n\r\n"
        );
        assert_eq!((o.secrets, o.requests), (1, 2));
    }

    #[test]
    fn base64_round_trips() {
        for s in [&b""[..], b"a", b"ab", b"abc", b"user:pass"] {
            assert_eq!(base64_decode(&base64_encode(s)).as_deref(), Some(s));
        }
        assert_eq!(base64_encode(b"user:pass"), "dXNlcjpwYXNz");
    }

    proptest::proptest! {
        /// Whatever the guest sends, the parsers answer without panicking,
        /// and what goes out is never more than what came in plus the
        /// values put in place of placeholders.
        #[test]
        fn guest_bytes_never_panic(
            pieces in proptest::collection::vec(proptest::collection::vec(0u8..=255, 0..300), 0..8),
            prefix in proptest::sample::select(vec![
                &b""[..],
                b"GET / HTTP/1.1\r\nHost: api.test\r\n",
                b"POST /v1/ HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n",
                b"\x16\x03\x01",
            ]),
        ) {
            let _ = crate::sniff::opening(prefix);
            let mut o = Outgoing::new("api.test", policy());
            let mut out = Vec::new();
            let mut all = prefix.to_vec();
            let _ = o.push(prefix, &mut out);
            for p in &pieces {
                all.extend_from_slice(p);
                let _ = crate::sniff::opening(&all);
                let _ = crate::sniff::Chunked::default().feed(p);
                if o.push(p, &mut out).is_err() {
                    break;
                }
            }
            proptest::prop_assert!(out.len() <= all.len() + 64 * (o.secrets as usize + 1));
        }
    }
}
