//! Just enough HTTP/1.1 for the local API: requests with a known length
//! (no chunked uploads), answers with a length or chunked (exec output),
//! connections kept open between requests.

use std::io::{self, BufRead, Read, Write};

/// Largest request head (request line and headers).
const MAX_HEAD: usize = 64 << 10;
/// Largest request body (a file written through the API).
pub const MAX_BODY: usize = 256 << 20;

/// One request.
#[derive(Debug, Default)]
pub struct Request {
    pub method: String,
    /// the path, percent-decoded, without the query
    pub path: String,
    /// the query's `name=value` pairs, percent-decoded
    pub query: Vec<(String, String)>,
    /// header names in lower case
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the client keeps the connection (HTTP/1.1's default).
    pub fn keep_alive(&self) -> bool {
        !self
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

/// Why a request could not be read: the status to answer with.
#[derive(Debug)]
pub struct BadRequest(pub u16, pub String);

/// Reads one request; `Ok(None)` when the client closed the connection
/// between requests.
pub fn read_request<R: BufRead>(r: &mut R) -> io::Result<Result<Option<Request>, BadRequest>> {
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        let n = r
            .by_ref()
            .take(MAX_HEAD as u64 + 1)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(if head.is_empty() {
                Ok(None)
            } else {
                Err(BadRequest(400, "the request ended in its head".into()))
            });
        }
        if head.len() + n > MAX_HEAD {
            return Ok(Err(BadRequest(431, "the request head is too long".into())));
        }
        if line == b"\r\n" || line == b"\n" {
            if head.is_empty() {
                continue; // a stray empty line between requests
            }
            break;
        }
        head.extend_from_slice(&line);
    }
    let Ok(text) = String::from_utf8(head) else {
        return Ok(Err(BadRequest(400, "the request head is not UTF-8".into())));
    };
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Ok(Err(BadRequest(400, format!("bad request line {first:?}"))));
    };
    if !version.starts_with("HTTP/1.") {
        return Ok(Err(BadRequest(505, format!("{version} is not HTTP/1.x"))));
    }
    let mut req = Request {
        method: method.to_string(),
        ..Default::default()
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    req.path = decode(path, false);
    req.query = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (n, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(n, true), decode(v, true))
        })
        .collect();
    for l in lines {
        let Some((n, v)) = l.split_once(':') else {
            return Ok(Err(BadRequest(400, format!("bad header line {l:?}"))));
        };
        req.headers
            .push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    if req
        .header("transfer-encoding")
        .is_some_and(|t| !t.eq_ignore_ascii_case("identity"))
    {
        return Ok(Err(BadRequest(
            411,
            "send the body with a Content-Length".into(),
        )));
    }
    let len = match req.header("content-length").map(str::parse::<usize>) {
        None => 0,
        Some(Ok(n)) if n <= MAX_BODY => n,
        Some(Ok(_)) => {
            return Ok(Err(BadRequest(
                413,
                format!("bodies are at most {MAX_BODY} bytes"),
            )))
        }
        Some(Err(_)) => return Ok(Err(BadRequest(400, "bad Content-Length".into()))),
    };
    req.body = vec![0; len];
    r.read_exact(&mut req.body)?;
    Ok(Ok(Some(req)))
}

/// `%XX` (and `+`, with `plus`: in a query) decoded; bad escapes are
/// kept as they are.
pub fn decode(s: &str, plus: bool) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match b[i] {
            b'%' => match (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            ) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' if plus => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        422 => "Unprocessable Content",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        505 => "HTTP Version Not Supported",
        _ => "Internal Server Error",
    }
}

/// Writes a whole answer.
pub fn respond(
    w: &mut impl Write,
    status: u16,
    content_type: &str,
    body: &[u8],
    keep: bool,
) -> io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    if status != 204 {
        head.push_str(&format!(
            "Content-Type: {content_type}\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    if !keep {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    w.write_all(head.as_bytes())?;
    if status != 204 {
        w.write_all(body)?;
    }
    w.flush()
}

/// Sends the head of a `200` answer of `content_type` whose body comes
/// in chunks ([`chunk`]), ended by [`end_chunks`].
pub fn start_chunked(w: &mut impl Write, content_type: &str) -> io::Result<()> {
    write!(
        w,
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n\r\n"
    )?;
    w.flush()
}

/// Sends one chunk, flushed: output is streamed.
pub fn chunk(w: &mut impl Write, data: &[u8]) -> io::Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    write!(w, "{:x}\r\n", data.len())?;
    w.write_all(data)?;
    w.write_all(b"\r\n")?;
    w.flush()
}

/// Ends a chunked answer.
pub fn end_chunks(w: &mut impl Write) -> io::Result<()> {
    w.write_all(b"0\r\n\r\n")?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &[u8]) -> Result<Option<Request>, BadRequest> {
        read_request(&mut std::io::BufReader::new(raw)).expect("no I/O error")
    }

    #[test]
    fn requests_are_read_with_their_query_and_body() {
        let r = parse(b"PUT /v1/sandboxes/a%20b/files?path=%2Ftmp%2Fx+y&mode=644 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcEXTRA")
            .expect("good")
            .expect("one");
        assert_eq!(
            (r.method.as_str(), r.path.as_str()),
            ("PUT", "/v1/sandboxes/a b/files")
        );
        assert_eq!(r.param("path"), Some("/tmp/x y"));
        assert_eq!(r.param("mode"), Some("644"));
        assert_eq!(r.header("host"), Some("x"));
        assert_eq!(r.body, b"abc");
        assert!(r.keep_alive());
    }

    #[test]
    fn bad_requests_get_their_status() {
        assert!(parse(b"").expect("clean end").is_none());
        let status = |raw: &[u8]| parse(raw).expect_err("refused").0;
        assert_eq!(status(b"GET /\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/2\r\n\r\n"), 505);
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            411
        );
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nContent-Length: 999999999999\r\n\r\n"),
            413
        );
        assert_eq!(status(b"GET / HTTP/1.1\r\nno colon\r\n\r\n"), 400);
        assert_eq!(decode("%zz%2", true), "%zz%2");
        assert_eq!(decode("a+b", false), "a+b");
    }
}
