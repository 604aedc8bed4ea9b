//! What the first bytes of a connection say about where it goes: the server
//! name of a TLS ClientHello, or the method, target and `Host` of an HTTP
//! request. The relays check that name before any byte leaves the sandbox.
//!
//! Every parser here reads guest bytes: lengths are checked, nothing panics,
//! and a head that is too long is an answer, not a wait.

/// Largest request head (request line and headers) the relays read.
pub const MAX_HEAD: usize = 64 << 10;

/// Largest TLS record (a ClientHello must fit in the first one).
const MAX_RECORD: usize = 5 + (16 << 10) + 2048;

/// What the first bytes of a stream are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opening {
    /// Not enough bytes yet to tell.
    More,
    /// A TLS ClientHello; the server name it asks for, if any, lower-case.
    Tls { sni: Option<String> },
    /// An HTTP/1 request head of `len` bytes.
    Http(Head),
    /// Neither: another protocol (or a malformed opening).
    Other,
}

/// A parsed HTTP/1 request head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    /// Bytes of the head, the blank line included.
    pub len: usize,
    pub method: String,
    pub target: String,
    /// The `Host` header without its port, lower-case (absent: `None`).
    pub host: Option<String>,
    /// How the request's body is framed.
    pub body: Body,
    /// An `Upgrade` or `CONNECT` request: after it the stream is opaque.
    pub opaque: bool,
}

/// The framing of a request body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    Length(u64),
    Chunked,
}

/// Classifies the opening of a stream.
pub fn opening(buf: &[u8]) -> Opening {
    match buf.first() {
        None => Opening::More,
        Some(0x16) => client_hello(buf),
        Some(b) if b.is_ascii_uppercase() => match request_head(buf) {
            Ok(Some(h)) => Opening::Http(h),
            Ok(None) => Opening::More,
            Err(()) => Opening::Other,
        },
        Some(_) => Opening::Other,
    }
}

/// A cursor over guest bytes; every read is checked.
struct Cur<'a> {
    b: &'a [u8],
}

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.b.len() < n {
            return None;
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Some(h)
    }

    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| usize::from(b[0]))
    }

    fn u16(&mut self) -> Option<usize> {
        self.take(2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
    }

    fn u24(&mut self) -> Option<usize> {
        self.take(3)
            .map(|b| (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]))
    }

    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(n)
    }

    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(n)
    }
}

/// The server name of the ClientHello in the first TLS record.
fn client_hello(buf: &[u8]) -> Opening {
    if buf.len() < 5 {
        return Opening::More;
    }
    // Handshake record, TLS 1.0 to 1.3 on the record layer.
    if buf[1] != 3 {
        return Opening::Other;
    }
    let len = usize::from(u16::from_be_bytes([buf[3], buf[4]]));
    if 5 + len > MAX_RECORD {
        return Opening::Other;
    }
    if buf.len() < 5 + len {
        return Opening::More;
    }
    match sni(&buf[5..5 + len]) {
        Some(sni) => Opening::Tls { sni },
        None => Opening::Other,
    }
}

/// `None`: not a well-formed ClientHello; `Some(None)`: one without SNI.
fn sni(record: &[u8]) -> Option<Option<String>> {
    let mut c = Cur { b: record };
    if c.u8()? != 1 {
        return None;
    }
    let len = c.u24()?;
    // The whole ClientHello must be in this record.
    let mut c = Cur { b: c.take(len)? };
    c.take(2 + 32)?; // version, random
    c.vec8()?; // session id
    c.vec16()?; // cipher suites
    c.vec8()?; // compression methods
    if c.b.is_empty() {
        return Some(None);
    }
    let mut exts = Cur { b: c.vec16()? };
    while !exts.b.is_empty() {
        let ty = exts.u16()?;
        let body = exts.vec16()?;
        if ty != 0 {
            continue;
        }
        let mut names = Cur {
            b: Cur { b: body }.vec16()?,
        };
        while !names.b.is_empty() {
            let kind = names.u8()?;
            let name = names.vec16()?;
            if kind == 0 {
                let s = std::str::from_utf8(name).ok()?;
                if s.is_empty() || !s.bytes().all(|b| b.is_ascii_graphic()) {
                    return None;
                }
                return Some(Some(s.trim_end_matches('.').to_ascii_lowercase()));
            }
        }
        return Some(None);
    }
    Some(None)
}

/// Parses an HTTP/1 request head: `Ok(None)` until its blank line has
/// arrived, `Err` for what is not one (or one over [`MAX_HEAD`]).
pub fn request_head(buf: &[u8]) -> Result<Option<Head>, ()> {
    let end = match find(buf, b"\r\n\r\n") {
        Some(i) => i + 4,
        None if buf.len() >= MAX_HEAD => return Err(()),
        None => {
            // Reject early what cannot be a request line.
            let line = buf
                .split(|&b| b == b'\r' || b == b'\n')
                .next()
                .unwrap_or(b"");
            let method = line.split(|&b| b == b' ').next().unwrap_or(b"");
            if !method.iter().all(u8::is_ascii_uppercase) || method.len() > 16 {
                return Err(());
            }
            return Ok(None);
        }
    };
    if end > MAX_HEAD {
        return Err(());
    }
    let text = std::str::from_utf8(&buf[..end - 4]).map_err(|_| ())?;
    let mut lines = text.split("\r\n");
    let mut parts = lines.next().ok_or(())?.split(' ');
    let (method, target, version) = (
        parts.next().ok_or(())?,
        parts.next().ok_or(())?,
        parts.next().ok_or(())?,
    );
    if parts.next().is_some()
        || method.is_empty()
        || !method.bytes().all(|b| b.is_ascii_uppercase())
        || !version.starts_with("HTTP/1.")
        || target.is_empty()
    {
        return Err(());
    }
    let mut host = None;
    let mut length = None;
    let mut chunked = false;
    let mut upgrade = false;
    for line in lines {
        let (k, v) = line.split_once(':').ok_or(())?;
        let v = v.trim();
        if k.eq_ignore_ascii_case("host") {
            if host.is_some() {
                // Two Host headers: ambiguous, refused as servers do.
                return Err(());
            }
            host = Some(strip_port(v).to_ascii_lowercase());
        } else if k.eq_ignore_ascii_case("content-length") {
            let n: u64 = v.parse().map_err(|_| ())?;
            if length.is_some_and(|l| l != n) {
                return Err(());
            }
            length = Some(n);
        } else if k.eq_ignore_ascii_case("transfer-encoding") {
            chunked = v
                .rsplit(',')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("chunked"));
            if !chunked {
                return Err(());
            }
        } else if k.eq_ignore_ascii_case("upgrade") {
            upgrade = true;
        }
    }
    // Both framings at once is request smuggling's shape: refused.
    if chunked && length.is_some() {
        return Err(());
    }
    Ok(Some(Head {
        len: end,
        method: method.to_string(),
        target: target.to_string(),
        host: host.map(|h| h.trim_end_matches('.').to_string()),
        body: if chunked {
            Body::Chunked
        } else {
            Body::Length(length.unwrap_or(0))
        },
        opaque: upgrade || method == "CONNECT",
    }))
}

/// `example.com:8080` as `example.com`; `[::1]:80` as `::1`.
fn strip_port(v: &str) -> &str {
    if let Some(rest) = v.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match v.rsplit_once(':') {
        Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => v,
    }
}

/// The position of `needle` in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Follows a chunked body through a stream: how many bytes of `buf` belong
/// to the body still, and whether it ended there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Chunked {
    /// Bytes of chunk data (and its CRLF) still to pass.
    left: u64,
    /// In the trailer section after the last chunk.
    trailers: bool,
}

impl Chunked {
    /// Consumes what it can of `buf`: `Ok((n, done))` where `n` bytes were
    /// passed; `n < buf.len()` without `done` means a size line is not
    /// whole yet. `Err` for a malformed body.
    pub fn feed(&mut self, buf: &[u8]) -> Result<(usize, bool), ()> {
        let mut at = 0;
        loop {
            if self.left > 0 {
                let n = usize::try_from(self.left)
                    .unwrap_or(usize::MAX)
                    .min(buf.len() - at);
                at += n;
                self.left -= n as u64;
                if self.left > 0 {
                    return Ok((at, false));
                }
            }
            let rest = &buf[at..];
            let Some(eol) = find(rest, b"\r\n") else {
                if rest.len() > 4096 {
                    return Err(());
                }
                return Ok((at, false));
            };
            let line = &rest[..eol];
            at += eol + 2;
            if self.trailers {
                if line.is_empty() {
                    return Ok((at, true));
                }
                continue;
            }
            let size = std::str::from_utf8(line).map_err(|_| ())?;
            let size = size.split(';').next().unwrap_or("").trim();
            let n = u64::from_str_radix(size, 16).map_err(|_| ())?;
            if n == 0 {
                self.trailers = true;
            } else {
                self.left = n.checked_add(2).ok_or(())?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ClientHello naming `name`, as a record.
    pub(crate) fn hello(name: Option<&str>) -> Vec<u8> {
        let mut exts = Vec::new();
        if let Some(n) = name {
            let mut list = vec![0u8];
            list.extend((n.len() as u16).to_be_bytes());
            list.extend(n.as_bytes());
            let mut body = (list.len() as u16).to_be_bytes().to_vec();
            body.extend(list);
            exts.extend([0, 0]);
            exts.extend((body.len() as u16).to_be_bytes());
            exts.extend(body);
        }
        // An unrelated extension first (supported_groups, empty).
        let mut all = vec![0, 10, 0, 0];
        all.extend(exts);
        let mut ch = vec![3, 3];
        ch.extend([7u8; 32]);
        ch.push(0);
        ch.extend([0, 2, 0x13, 1]);
        ch.extend([1, 0]);
        ch.extend((all.len() as u16).to_be_bytes());
        ch.extend(all);
        let mut hs = vec![1, 0];
        hs.extend((ch.len() as u16).to_be_bytes());
        hs.extend(ch);
        let mut rec = vec![0x16, 3, 1];
        rec.extend((hs.len() as u16).to_be_bytes());
        rec.extend(hs);
        rec
    }

    #[test]
    fn sni_of_a_client_hello() {
        let r = hello(Some("API.Example.com"));
        assert_eq!(
            opening(&r),
            Opening::Tls {
                sni: Some("api.example.com".into())
            }
        );
        for n in 0..r.len() {
            assert_eq!(opening(&r[..n]), Opening::More);
        }
        assert_eq!(opening(&hello(None)), Opening::Tls { sni: None });
        // Lengths that lie are not a hello, and never panic.
        let mut bad = r.clone();
        bad[8] = 0xff;
        assert_eq!(opening(&bad), Opening::Other);
        for i in 5..r.len() {
            let mut b = r.clone();
            b[i] ^= 0xff;
            let _ = opening(&b);
        }
    }

    #[test]
    fn http_heads() {
        let h = b"GET /a?b HTTP/1.1\r\nHost: Example.COM:8080\r\nContent-Length: 5\r\n\r\nhello";
        let Opening::Http(head) = opening(h) else {
            panic!("{:?}", opening(h));
        };
        assert_eq!(head.len, h.len() - 5);
        assert_eq!(head.method, "GET");
        assert_eq!(head.target, "/a?b");
        assert_eq!(head.host.as_deref(), Some("example.com"));
        assert_eq!(head.body, Body::Length(5));
        assert_eq!(opening(b"GET / HTTP/1.1\r\nHost: a"), Opening::More);
        assert_eq!(opening(b"SSH-2.0-OpenSSH\r\n"), Opening::Other);
        assert_eq!(opening(b"\x00\x01"), Opening::Other);
        assert_eq!(
            opening(b"POST / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
            Opening::Other
        );
        assert_eq!(
            opening(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"),
            Opening::Other
        );
        let big = vec![b'G'; MAX_HEAD + 1];
        assert_eq!(opening(&big), Opening::Other);
    }

    #[test]
    fn chunked_bodies_end_where_they_end() {
        let body = b"5\r\nhello\r\n3;x=1\r\nabc\r\n0\r\nT: v\r\n\r\nNEXT";
        let mut c = Chunked::default();
        assert_eq!(c.feed(body), Ok((body.len() - 4, true)));
        // Byte by byte, the same end.
        let mut c = Chunked::default();
        let mut at = 0;
        let mut done = false;
        let mut end = 0;
        while !done {
            end += 1;
            let (n, d) = c.feed(&body[at..end]).expect("well formed");
            at += n;
            done = d;
        }
        assert_eq!(at, body.len() - 4);
        assert!(Chunked::default().feed(b"zz\r\n").is_err());
    }
}
