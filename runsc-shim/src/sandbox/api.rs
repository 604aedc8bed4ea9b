//! `ferrovisor serve`: the sandboxes of [`Store`] over HTTP/1.1 and JSON,
//! on a Unix socket (mode 0600) or on loopback TCP with a bearer token.
//! Exec output streams as JSON lines. `docs/openapi.json` describes every
//! route of [`ROUTES`] (a test keeps them in step). Sandboxes made through
//! the API end when `serve` does.

use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::http::{self, Request};
use super::{CreateOptions, Error, ExecOptions, Output, Store, Stream};

/// Every route: method and path, `{name}` standing for a sandbox's name.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/v1/health"),
    ("GET", "/v1/sandboxes"),
    ("POST", "/v1/sandboxes"),
    ("GET", "/v1/sandboxes/{name}"),
    ("DELETE", "/v1/sandboxes/{name}"),
    ("POST", "/v1/sandboxes/{name}/stop"),
    ("GET", "/v1/sandboxes/{name}/logs"),
    ("POST", "/v1/sandboxes/{name}/exec"),
    ("POST", "/v1/sandboxes/{name}/processes/{pid}/signal"),
    ("POST", "/v1/sandboxes/{name}/processes/{pid}/resize"),
    ("GET", "/v1/sandboxes/{name}/files"),
    ("PUT", "/v1/sandboxes/{name}/files"),
    ("GET", "/v1/sandboxes/{name}/dir"),
    ("GET", "/v1/sandboxes/{name}/stat"),
    ("GET", "/v1/sandboxes/{name}/watch"),
    ("POST", "/v1/sandboxes/{name}/egress"),
    ("POST", "/v1/sandboxes/{name}/ports"),
    ("POST", "/v1/sandboxes/{name}/snapshot"),
    ("POST", "/v1/sandboxes/{name}/fork"),
    ("POST", "/v1/images/prune"),
];

/// Where `serve` listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl Listen {
    /// `unix:PATH` or `tcp:127.0.0.1:PORT` (loopback only).
    pub fn parse(s: &str) -> Result<Listen, Error> {
        if let Some(p) = s.strip_prefix("unix:") {
            if p.is_empty() {
                return Err(Error::Usage("--listen unix:PATH: give a path".into()));
            }
            return Ok(Listen::Unix(p.into()));
        }
        if let Some(a) = s.strip_prefix("tcp:") {
            let addr: SocketAddr = a
                .parse()
                .map_err(|_| Error::Usage(format!("--listen {s:?}: give tcp:127.0.0.1:PORT")))?;
            if !addr.ip().is_loopback() {
                return Err(Error::Usage(format!(
                    "--listen {s:?}: the API listens on loopback only (127.0.0.1 or [::1])"
                )));
            }
            return Ok(Listen::Tcp(addr));
        }
        Err(Error::Usage(format!(
            "--listen {s:?}: give unix:PATH or tcp:127.0.0.1:PORT"
        )))
    }
}

/// `POST /v1/sandboxes`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    name: String,
    #[serde(default)]
    options: CreateOptions,
}

/// `POST .../ports`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PortBody {
    guest_port: u16,
    #[serde(default)]
    host_port: u16,
}

/// `POST .../processes/{pid}/signal`: a number or a name (`TERM`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignalBody {
    signal: SignalName,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum SignalName {
    Number(i32),
    Name(String),
}

/// `POST .../processes/{pid}/resize`: the terminal's new size.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SizeBody {
    rows: u16,
    cols: u16,
}

/// A program that `exec` runs now.
struct Live {
    signaller: crate::control::Signaller,
    /// on a terminal of its own
    tty: bool,
}

/// `POST .../snapshot`: the folder to save the image in.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotBody {
    image: PathBuf,
}

/// `POST .../fork`: the copy's name.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ForkBody {
    name: String,
}

/// `PUT .../files` answers nothing; the rest of the file routes answer these.
#[derive(Debug, Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
}

/// One line of an exec's output stream.
#[derive(Debug, Serialize)]
#[serde(rename_all = "lowercase")]
enum Line<'a> {
    Started { pid: i32 },
    Stdout(&'a str),
    Stderr(&'a str),
    Exit(super::Outcome),
    Error(&'a str),
}

/// The server's state: the store, the token, and the sandboxes it made.
pub struct Server {
    store: Store,
    token: Option<String>,
    made: Mutex<Vec<String>>,
    /// ports forwarded, by sandbox: closed with it
    ports: Mutex<Vec<(String, super::ports::Forward)>>,
    /// the programs `exec` runs now, by sandbox and guest pid, for
    /// their signals and terminal sizes
    live: Mutex<HashMap<(String, i32), Live>>,
}

fn status_of(e: &Error) -> u16 {
    match e {
        Error::Usage(_) => 400,
        Error::NotFound(_) | Error::NoSuchFile(_) => 404,
        Error::Exists(_) | Error::Ended { .. } => 409,
        Error::Start { .. } | Error::Guest(_) => 422,
        Error::NotSupported(_) => 501,
        Error::Io { .. } | Error::Control(_) => 500,
    }
}

fn json<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

/// Equal, in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Server {
    pub fn new(store: Store, token: Option<String>) -> Arc<Server> {
        Arc::new(Server {
            store,
            token,
            made: Mutex::new(Vec::new()),
            ports: Mutex::new(Vec::new()),
            live: Mutex::new(HashMap::new()),
        })
    }

    /// Ends every sandbox made through this server.
    pub fn end_all(&self) {
        self.ports.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let names = std::mem::take(&mut *self.made.lock().unwrap_or_else(|e| e.into_inner()));
        for n in names {
            if let Err(e) = self.store.remove(&n) {
                eprintln!("ferrovisor: serve: ending sandbox {n:?}: {e}");
            }
        }
    }

    /// Serves one connection's requests until it closes.
    pub fn connection<S: Read + Write>(&self, reader: S, mut writer: S) {
        let mut reader = BufReader::new(reader);
        loop {
            let req = match http::read_request(&mut reader) {
                Ok(Ok(Some(r))) => r,
                Ok(Ok(None)) | Err(_) => return,
                Ok(Err(http::BadRequest(status, why))) => {
                    let _ = http::respond(
                        &mut writer,
                        status,
                        "application/json",
                        &json(&ErrorBody { error: &why }),
                        false,
                    );
                    return;
                }
            };
            let keep = req.keep_alive();
            if self.answer(&req, &mut writer, keep).is_err() || !keep {
                return;
            }
        }
    }

    fn answer(&self, req: &Request, w: &mut impl Write, keep: bool) -> std::io::Result<()> {
        if let Some(t) = &self.token {
            let given = req
                .header("authorization")
                .and_then(|h| h.strip_prefix("Bearer "))
                .unwrap_or_default();
            if !same(given.as_bytes(), t.as_bytes()) {
                let body = json(&ErrorBody {
                    error: "give the token: Authorization: Bearer TOKEN",
                });
                return http::respond(w, 401, "application/json", &body, keep);
            }
        }
        let parts: Vec<&str> = req.path.trim_end_matches('/').split('/').skip(1).collect();
        let m = req.method.as_str();
        let result: Result<(u16, &str, Vec<u8>), Error> = match (m, parts.as_slice()) {
            ("GET", ["v1", "health"]) => Ok((
                200,
                "application/json",
                json(&serde_json::json!({"ok": true, "version": env!("CARGO_PKG_VERSION")})),
            )),
            ("GET", ["v1", "sandboxes"]) => self
                .store
                .list()
                .map(|l| (200, "application/json", json(&l))),
            ("POST", ["v1", "sandboxes"]) => self.create(&req.body),
            ("POST", ["v1", "images", "prune"]) => self
                .store
                .prune_images()
                .map(|gone| (200, "application/json", json(&gone))),
            ("GET", ["v1", "sandboxes", n]) => self
                .store
                .info(n)
                .map(|i| (200, "application/json", json(&i))),
            ("DELETE", ["v1", "sandboxes", n]) => self.store.remove(n).map(|()| {
                self.ports
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .retain(|(m, _)| m != n);
                self.made
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .retain(|m| m != n);
                (204, "", Vec::new())
            }),
            ("POST", ["v1", "sandboxes", n, "stop"]) => {
                self.store.stop(n).map(|()| (204, "", Vec::new()))
            }
            ("GET", ["v1", "sandboxes", n, "logs"]) => self
                .store
                .logs(n)
                .map(|l| (200, "text/plain; charset=utf-8", l)),
            ("POST", ["v1", "sandboxes", n, "exec"]) => return self.exec(n, &req.body, w, keep),
            ("POST", ["v1", "sandboxes", n, "processes", pid, "signal"]) => {
                serde_json::from_slice::<SignalBody>(&req.body)
                    .map_err(|e| Error::Usage(format!("the request: {e}")))
                    .and_then(|b| {
                        let sig = match b.signal {
                            SignalName::Number(s) if (1..=64).contains(&s) => s,
                            SignalName::Number(s) => {
                                return Err(Error::Usage(format!("signal {s}: give 1 to 64")))
                            }
                            SignalName::Name(s) => crate::container::parse_signal(&s)
                                .ok()
                                .filter(|s| *s > 0)
                                .ok_or_else(|| {
                                    Error::Usage(format!("signal {s:?}: give a name like TERM"))
                                })?,
                        };
                        self.to_process(n, pid, false, |s| s.signal(sig))
                    })
                    .map(|()| (204, "", Vec::new()))
            }
            ("POST", ["v1", "sandboxes", n, "processes", pid, "resize"]) => {
                serde_json::from_slice::<SizeBody>(&req.body)
                    .map_err(|e| Error::Usage(format!("the request: {e}")))
                    .and_then(|b| {
                        super::TermSize::new(b.rows, b.cols)?;
                        self.to_process(n, pid, true, |s| s.resize(b.rows, b.cols))
                    })
                    .map(|()| (204, "", Vec::new()))
            }
            ("GET", ["v1", "sandboxes", n, "watch"]) => return self.watch(n, req, w, keep),
            ("GET", ["v1", "sandboxes", n, "files"]) => path_of(req)
                .and_then(|p| self.store.read_file(n, p))
                .map(|d| (200, "application/octet-stream", d)),
            ("PUT", ["v1", "sandboxes", n, "files"]) => path_of(req)
                .and_then(|p| {
                    let mode = match req.param("mode") {
                        None => None,
                        Some(m) => Some(u32::from_str_radix(m, 8).map_err(|_| {
                            Error::Usage(format!("mode {m:?}: give octal permission bits"))
                        })?),
                    };
                    self.store.write_file(n, p, req.body.clone(), mode)
                })
                .map(|()| (204, "", Vec::new())),
            ("GET", ["v1", "sandboxes", n, "dir"]) => path_of(req)
                .and_then(|p| self.store.list_dir(n, p))
                .map(|l| (200, "application/json", json(&l))),
            ("GET", ["v1", "sandboxes", n, "stat"]) => path_of(req)
                .and_then(|p| self.store.stat(n, p))
                .map(|e| (200, "application/json", json(&e))),
            ("POST", ["v1", "sandboxes", n, "egress"]) => {
                serde_json::from_slice::<crate::control::EgressUpdate>(&req.body)
                    .map_err(|e| Error::Usage(format!("the request: {e}")))
                    .and_then(|u| self.store.update_egress(n, &u))
                    .map(|()| (204, "", Vec::new()))
            }
            ("POST", ["v1", "sandboxes", n, "ports"]) => serde_json::from_slice::<PortBody>(
                &req.body,
            )
            .map_err(|e| Error::Usage(format!("the request: {e}")))
            .and_then(|b| self.store.forward(n, b.guest_port, b.host_port))
            .map(|f| {
                let body = json(
                    &serde_json::json!({"guest_port": f.guest_port, "host": f.host.to_string()}),
                );
                self.ports
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((n.to_string(), f));
                (201, "application/json", body)
            }),
            ("POST", ["v1", "sandboxes", n, "snapshot"]) => {
                serde_json::from_slice::<SnapshotBody>(&req.body)
                    .map_err(|e| Error::Usage(format!("the request: {e}")))
                    .and_then(|b| {
                        self.store.snapshot(n, &b.image)?;
                        Ok((
                            200,
                            "application/json",
                            json(&serde_json::json!({"image": b.image})),
                        ))
                    })
            }
            ("POST", ["v1", "sandboxes", n, "fork"]) => {
                serde_json::from_slice::<ForkBody>(&req.body)
                    .map_err(|e| Error::Usage(format!("the request: {e}")))
                    .and_then(|b| {
                        let made = self.store.fork(n, &b.name)?;
                        Ok(self.adopt(b.name, made))
                    })
            }
            _ => {
                let known = ROUTES.iter().any(|(_, p)| matches_route(p, &parts));
                let (status, why) = if known {
                    (405, format!("{m} is not served at {}", req.path))
                } else {
                    (404, format!("no route {}", req.path))
                };
                return http::respond(
                    w,
                    status,
                    "application/json",
                    &json(&ErrorBody { error: &why }),
                    keep,
                );
            }
        };
        match result {
            Ok((status, ty, body)) => http::respond(w, status, ty, &body, keep),
            Err(e) => http::respond(
                w,
                status_of(&e),
                "application/json",
                &json(&ErrorBody {
                    error: &e.to_string(),
                }),
                keep,
            ),
        }
    }

    fn create(&self, body: &[u8]) -> Result<(u16, &'static str, Vec<u8>), Error> {
        let b: CreateBody =
            serde_json::from_slice(body).map_err(|e| Error::Usage(format!("the request: {e}")))?;
        let made = self.store.create(&b.name, &b.options)?;
        Ok(self.adopt(b.name, made))
    }

    /// A sandbox this server made: reaped when it ends, ended with the
    /// server; the answer that describes it.
    fn adopt(
        &self,
        name: String,
        (info, mut child): (super::Info, std::process::Child),
    ) -> (u16, &'static str, Vec<u8>) {
        // This server is its parent: reap it when it ends.
        std::thread::spawn(move || {
            let _ = child.wait();
        });
        self.made
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(name);
        (201, "application/json", json(&info))
    }

    /// A folder's changes as JSON lines, until it goes, the sandbox ends
    /// or the client leaves.
    fn watch(
        &self,
        name: &str,
        req: &Request,
        w: &mut impl Write,
        keep: bool,
    ) -> std::io::Result<()> {
        let recursive = matches!(req.param("recursive"), Some("true" | "1"));
        let changes = match path_of(req).and_then(|p| self.store.watch(name, p, recursive)) {
            Ok(c) => c,
            Err(e) => {
                let body = json(&ErrorBody {
                    error: &e.to_string(),
                });
                return http::respond(w, status_of(&e), "application/json", &body, keep);
            }
        };
        http::start_chunked(w, "application/x-ndjson")?;
        for c in changes {
            let mut line = json(&c);
            line.push(b'\n');
            http::chunk(w, &line)?;
        }
        http::end_chunks(w)
    }

    /// Sends to the program that `exec` runs as guest pid `pid` in `name`
    /// (which must have a terminal, with `tty`).
    fn to_process(
        &self,
        name: &str,
        pid: &str,
        tty: bool,
        send: impl FnOnce(&crate::control::Signaller) -> std::io::Result<()>,
    ) -> Result<(), Error> {
        let gone = || {
            Error::NotFound(format!(
                "no program {pid} that exec started runs in sandbox {name}"
            ))
        };
        let pid: i32 = pid.parse().map_err(|_| gone())?;
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let l = live.get(&(name.to_string(), pid)).ok_or_else(gone)?;
        if tty && !l.tty {
            return Err(Error::Usage(format!(
                "program {pid} runs without a terminal: no size to change (exec with tty)"
            )));
        }
        send(&l.signaller).map_err(|_| gone())
    }

    fn exec(&self, name: &str, body: &[u8], w: &mut impl Write, keep: bool) -> std::io::Result<()> {
        let refuse = |w: &mut dyn Write, e: Error| {
            let mut w = w;
            http::respond(
                &mut w,
                status_of(&e),
                "application/json",
                &json(&ErrorBody {
                    error: &e.to_string(),
                }),
                keep,
            )
        };
        let opts: ExecOptions = match serde_json::from_slice::<ExecOptions>(body) {
            // (the client's output is a pipe, which has no size to take)
            Ok(o) if o.tty && o.size.is_none() => ExecOptions {
                size: Some(super::TermSize { rows: 24, cols: 80 }),
                ..o
            },
            Ok(o) => o,
            Err(e) => return refuse(w, Error::Usage(format!("the request: {e}"))),
        };
        let stdin = match opts
            .stdin
            .as_deref()
            .map(|s| base64::engine::general_purpose::STANDARD.decode(s))
        {
            None => Vec::new(),
            Some(Ok(d)) => d,
            Some(Err(e)) => return refuse(w, Error::Usage(format!("stdin: not base64 ({e})"))),
        };
        let mut out: Option<std::io::Result<()>> = None;
        let b64 = |d: &[u8]| base64::engine::general_purpose::STANDARD.encode(d);
        let mut started = None;
        let result = self.store.exec_streaming(name, &opts, stdin, |o| {
            let line = match o {
                Output::Started(pid, running) => {
                    if let Ok(signaller) = running.signaller() {
                        let key = (name.to_string(), pid);
                        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
                        let tty = opts.tty;
                        live.insert(key.clone(), Live { signaller, tty });
                        started = Some(key);
                    }
                    out = Some(http::start_chunked(w, "application/x-ndjson"));
                    Line::Started { pid }.to_line()
                }
                Output::Data(Stream::Stdout, d) => Line::Stdout(&b64(d)).to_line(),
                Output::Data(Stream::Stderr, d) => Line::Stderr(&b64(d)).to_line(),
            };
            if let Some(Ok(())) = out {
                out = Some(http::chunk(w, &line));
            }
        });
        if let Some(key) = started {
            self.live
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&key);
        }
        match (out, result) {
            (None, Err(e)) => refuse(w, e),
            (None, Ok(_)) => refuse(w, Error::Guest("the program did not start".into())),
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(())), r) => {
                let line = match r {
                    Ok(o) => Line::Exit(o).to_line(),
                    Err(e) => Line::Error(&e.to_string()).to_line(),
                };
                http::chunk(w, &line)?;
                http::end_chunks(w)
            }
        }
    }
}

impl Line<'_> {
    fn to_line(&self) -> Vec<u8> {
        let mut v = json(self);
        v.push(b'\n');
        v
    }
}

fn path_of(req: &Request) -> Result<&str, Error> {
    req.param("path")
        .ok_or_else(|| Error::Usage("give the file's path: ?path=/PATH".into()))
}

fn matches_route(pattern: &str, parts: &[&str]) -> bool {
    let p: Vec<&str> = pattern.split('/').skip(1).collect();
    p.len() == parts.len()
        && p.iter()
            .zip(parts)
            .all(|(a, b)| a.starts_with('{') || a == b)
}

/// Serves `server` at `listen` until SIGINT or SIGTERM, then ends the
/// sandboxes it made.
pub fn serve(server: Arc<Server>, listen: &Listen) -> Result<(), Error> {
    // Taken by the main thread only: the others inherit the mask.
    crate::sys::mask_signals(&[libc::SIGINT, libc::SIGTERM], true)
        .map_err(Error::io("blocking signals"))?;
    match listen {
        Listen::Unix(path) => {
            let _ = std::fs::remove_file(path);
            let l = UnixListener::bind(path).map_err(Error::io(path.display()))?;
            super::set_mode(path, 0o600)?;
            let s = server.clone();
            std::thread::spawn(move || {
                for c in l.incoming().flatten() {
                    let s = s.clone();
                    std::thread::spawn(move || {
                        if let Ok(r) = c.try_clone() {
                            s.connection(r, c);
                        }
                    });
                }
            });
        }
        Listen::Tcp(addr) => {
            if server.token.is_none() {
                return Err(Error::Usage(
                    "--listen tcp: needs a token: give --token-file FILE".into(),
                ));
            }
            let l = TcpListener::bind(addr).map_err(Error::io(addr))?;
            let s = server.clone();
            std::thread::spawn(move || {
                for c in l.incoming().flatten() {
                    let _ = c.set_nodelay(true);
                    let s = s.clone();
                    std::thread::spawn(move || {
                        if let Ok(r) = c.try_clone() {
                            s.connection(r, c);
                        }
                    });
                }
            });
        }
    }
    eprintln!(
        "ferrovisor: serving the sandbox API on {}",
        match listen {
            Listen::Unix(p) => format!("unix:{}", p.display()),
            Listen::Tcp(a) => format!("tcp:{a}"),
        }
    );
    let _ = crate::sys::wait_signal(&[libc::SIGINT, libc::SIGTERM]);
    server.end_all();
    if let Listen::Unix(p) = listen {
        let _ = std::fs::remove_file(p);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_are_unix_paths_or_loopback() {
        assert_eq!(
            Listen::parse("unix:/run/f.sock").expect("ok"),
            Listen::Unix("/run/f.sock".into())
        );
        assert!(matches!(
            Listen::parse("tcp:127.0.0.1:8080"),
            Ok(Listen::Tcp(_))
        ));
        assert!(matches!(
            Listen::parse("tcp:[::1]:8080"),
            Ok(Listen::Tcp(_))
        ));
        for bad in [
            "tcp:0.0.0.0:80",
            "tcp:10.0.0.1:80",
            "http://x",
            "unix:",
            "tcp:x",
        ] {
            assert!(Listen::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_openapi_file_describes_every_route_and_no_other() {
        let text = include_str!("../../../docs/openapi.json");
        let doc: serde_json::Value = serde_json::from_str(text).expect("docs/openapi.json is JSON");
        let mut documented = Vec::new();
        for (path, ops) in doc["paths"].as_object().expect("paths") {
            for method in ops.as_object().expect("operations").keys() {
                if method != "parameters" {
                    documented.push((method.to_uppercase(), path.clone()));
                }
            }
        }
        documented.sort();
        let mut served: Vec<(String, String)> = ROUTES
            .iter()
            .map(|(m, p)| (m.to_string(), p.to_string()))
            .collect();
        served.sort();
        assert_eq!(documented, served);
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd") || !same(b"ab", b"abc"));
        assert!(!same(b"", b"x"));
    }
}
