//! The sandbox's link to the outside in `Mode::Egress`: a user-space relay.
//!
//! A guest TCP connection to an allowed destination outside the sandbox is
//! carried by a host socket that the stack opens only after the policy said
//! yes. The guest's packets never reach the host kernel: the relay moves the
//! byte stream, in both directions, between the guest's socket and the host
//! connection, the way slirp-style user networking does. Each relayed
//! connection has two threads (connect-then-write, and read); both buffers
//! are bounded by the socket's buffer sizes, so a guest (or a remote peer)
//! that stops reading only stalls its own connection.
//!
//! A connection allowed by a host rule alone is accepted at once and held
//! until its first bytes name the host (TLS SNI, HTTP `Host`): only a name
//! the rules allow, which resolved to this address, opens the host
//! connection. Plain HTTP is then checked request by request, and TLS to a
//! host with secrets or HTTP rules is intercepted (see `tls` and `http`).

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown as NetShutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use abi::Errno;

use crate::audit::{AuditLog, Record};
use crate::policy::{Decision, Policy};
use crate::sniff::{self, Opening};
use crate::tls::Interceptor;
use crate::Readiness;

/// How long a connection allowed by name may take to name its host.
const NAME_WAIT: Duration = Duration::from_secs(10);

/// What a relayed connection is checked against, and where it is logged.
pub(crate) struct Egress {
    pub policy: Arc<Policy>,
    pub tls: Option<Arc<Interceptor>>,
    pub audit: Option<Arc<AuditLog>>,
    pub record: Record,
    /// Allowed by a host rule alone: the connection must name the host.
    pub by_name: bool,
    pub report_refusals: bool,
}

/// How the bytes of a connection go, once its name was checked.
enum Plan {
    /// As they are.
    Pass,
    /// Plain HTTP, request by request, for this host.
    Http(String),
    /// TLS ended in the Sentry and made anew to this host.
    Tls(String),
}

/// Called by the relay threads when the connection's readiness may have
/// changed. Never called with the relay's lock held.
pub(crate) type Wake = Arc<dyn Fn() + Send + Sync>;

/// Largest chunk moved by one host read or write.
const CHUNK: usize = 64 << 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Connecting,
    Established,
    /// The connection attempt failed; the error waits in `error`.
    Failed,
}

struct State {
    phase: Phase,
    /// For shutting the host connection down from the guest's side.
    stream: Option<TcpStream>,
    /// The host socket's port (the guest sees it with the sandbox's
    /// address, never the host's).
    local_port: u16,
    rx: VecDeque<u8>,
    rx_cap: usize,
    /// The peer finished sending (or the connection broke).
    rx_eof: bool,
    tx: VecDeque<u8>,
    tx_cap: usize,
    /// The guest shut down its sending side: FIN after `tx` drains.
    tx_shut: bool,
    /// A write to the host failed: further sends get `EPIPE`.
    tx_broken: bool,
    error: Option<Errno>,
    /// connect(2) already returned success once.
    reported: bool,
    /// The guest closed its socket.
    closed: bool,
    /// Bytes sent to and received from the host.
    bytes_out: u64,
    bytes_in: u64,
    secrets: u64,
    requests: u64,
    /// Why the connection was refused after it was accepted.
    refused: Option<String>,
}

struct Shared {
    st: Mutex<State>,
    cond: Condvar,
    /// The attempt's record, written when the connection is gone.
    audit: Option<(Arc<AuditLog>, Mutex<Record>)>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        let Some((log, rec)) = &self.audit else {
            return;
        };
        let st = self.st.get_mut().unwrap_or_else(|e| e.into_inner());
        let mut r = rec.lock().unwrap_or_else(|e| e.into_inner()).clone();
        r.bytes_out = st.bytes_out;
        r.bytes_in = st.bytes_in;
        r.secrets = st.secrets;
        r.requests = st.requests;
        if let Some(why) = st.refused.take() {
            r.allowed = false;
            r.rule = why;
        }
        log.write(&r);
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.cond.wait(g).unwrap_or_else(|e| e.into_inner())
    }
}

/// One relayed connection, owned by the guest socket's entry.
pub(crate) struct Relay {
    shared: Arc<Shared>,
    /// The destination, as the guest named it.
    pub peer: SocketAddr,
}

/// Maps a host I/O error to what the guest's socket reports.
pub(crate) fn errno_of(e: &std::io::Error) -> Errno {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused => Errno::ECONNREFUSED,
        K::ConnectionReset => Errno::ECONNRESET,
        K::ConnectionAborted => Errno::ECONNABORTED,
        K::TimedOut => Errno::ETIMEDOUT,
        K::BrokenPipe => Errno::EPIPE,
        K::AddrNotAvailable => Errno::EADDRNOTAVAIL,
        K::NetworkUnreachable => Errno::ENETUNREACH,
        K::HostUnreachable => Errno::EHOSTUNREACH,
        _ => match e.raw_os_error() {
            Some(n) => Errno(n),
            None => Errno::EIO,
        },
    }
}

impl Relay {
    /// Starts connecting to `dest` (already allowed by the policy).
    /// Returns at once; readiness turns writable when the outcome is known.
    pub(crate) fn start(
        dest: SocketAddr,
        rx_cap: usize,
        tx_cap: usize,
        timeout: Duration,
        wake: Wake,
        mut egress: Egress,
    ) -> Result<Relay, Errno> {
        // Held until it names its host: connected, as far as the guest can
        // tell, with a port of the sandbox's own.
        static NEXT_PORT: AtomicU16 = AtomicU16::new(0);
        let (phase, local_port) = if egress.by_name {
            let n = NEXT_PORT.fetch_add(1, Ordering::Relaxed);
            (Phase::Established, 32768 + n % 28232)
        } else {
            (Phase::Connecting, 0)
        };
        egress.record.allowed = true;
        let audit = egress
            .audit
            .take()
            .map(|a| (a, Mutex::new(egress.record.clone())));
        let shared = Arc::new(Shared {
            audit,
            st: Mutex::new(State {
                phase,
                stream: None,
                local_port,
                rx: VecDeque::new(),
                rx_cap: rx_cap.max(1),
                rx_eof: false,
                tx: VecDeque::new(),
                tx_cap: tx_cap.max(1),
                tx_shut: false,
                tx_broken: false,
                error: None,
                reported: false,
                closed: false,
                bytes_out: 0,
                bytes_in: 0,
                secrets: 0,
                requests: 0,
                refused: None,
            }),
            cond: Condvar::new(),
        });
        let s = shared.clone();
        std::thread::Builder::new()
            .name("netstack-relay".into())
            .spawn(move || connect_and_write(s, dest, timeout, wake, egress))
            .map_err(|_| Errno::ENOBUFS)?;
        Ok(Relay { shared, peer: dest })
    }

    /// connect(2) on a relayed socket: `EALREADY` while connecting, `Ok`
    /// once after success, then `EISCONN`; the error after a failure.
    pub(crate) fn connect_again(&self) -> Result<(), Errno> {
        let mut g = self.shared.lock();
        match g.phase {
            Phase::Connecting => Err(Errno::EALREADY),
            Phase::Established if !g.reported => {
                g.reported = true;
                Ok(())
            }
            Phase::Established => Err(Errno::EISCONN),
            Phase::Failed => Err(g.error.take().unwrap_or(Errno::ECONNABORTED)),
        }
    }

    /// Whether the connection attempt failed (the entry then goes back to
    /// unconnected once the error is collected).
    pub(crate) fn failed(&self) -> bool {
        self.shared.lock().phase == Phase::Failed
    }

    pub(crate) fn established(&self) -> bool {
        self.shared.lock().phase == Phase::Established
    }

    /// The host socket's port.
    pub(crate) fn local_port(&self) -> u16 {
        self.shared.lock().local_port
    }

    /// `SO_ERROR`.
    pub(crate) fn take_error(&self) -> Option<Errno> {
        self.shared.lock().error.take()
    }

    pub(crate) fn send(&self, buf: &[u8]) -> Result<usize, Errno> {
        let mut g = self.shared.lock();
        match g.phase {
            Phase::Connecting => return Err(Errno::EAGAIN),
            Phase::Failed => return Err(g.error.take().unwrap_or(Errno::EPIPE)),
            Phase::Established => {}
        }
        if g.tx_broken {
            return Err(g.error.take().unwrap_or(Errno::EPIPE));
        }
        if g.tx_shut {
            return Err(Errno::EPIPE);
        }
        if buf.is_empty() {
            return Ok(0);
        }
        let room = g.tx_cap.saturating_sub(g.tx.len());
        if room == 0 {
            return Err(Errno::EAGAIN);
        }
        let n = room.min(buf.len());
        g.tx.extend(&buf[..n]);
        drop(g);
        self.shared.cond.notify_all();
        Ok(n)
    }

    pub(crate) fn recv(&self, buf: &mut [u8], peek: bool) -> Result<usize, Errno> {
        let mut g = self.shared.lock();
        match g.phase {
            Phase::Connecting => return Err(Errno::EAGAIN),
            Phase::Failed => return Err(Errno::ENOTCONN),
            Phase::Established => {}
        }
        if buf.is_empty() {
            return Ok(0);
        }
        if !g.rx.is_empty() {
            let n = buf.len().min(g.rx.len());
            for (d, s) in buf.iter_mut().zip(g.rx.iter()) {
                *d = *s;
            }
            if !peek {
                g.rx.drain(..n);
                drop(g);
                // Room again: the reader may go on.
                self.shared.cond.notify_all();
            }
            return Ok(n);
        }
        if let Some(e) = g.error.take() {
            return Err(e);
        }
        if g.rx_eof {
            return Ok(0);
        }
        Err(Errno::EAGAIN)
    }

    pub(crate) fn shutdown(&self, rd: bool, wr: bool) {
        let mut g = self.shared.lock();
        if wr {
            g.tx_shut = true;
        }
        if rd {
            // Linux keeps receiving after SHUT_RD but reads return 0; the
            // host side stops reading so the buffer stays bounded.
            g.rx.clear();
            g.rx_eof = true;
            if let Some(s) = &g.stream {
                let _ = s.shutdown(NetShutdown::Read);
            }
        }
        drop(g);
        self.shared.cond.notify_all();
    }

    pub(crate) fn bytes_readable(&self) -> usize {
        self.shared.lock().rx.len()
    }

    pub(crate) fn readiness(&self) -> Readiness {
        let g = self.shared.lock();
        match g.phase {
            Phase::Connecting => Readiness::default(),
            Phase::Failed => Readiness {
                readable: true,
                writable: true,
                hup: true,
                rdhup: false,
                error: g.error.is_some(),
            },
            Phase::Established => {
                let dead = g.tx_broken || (g.rx_eof && g.tx_shut);
                Readiness {
                    readable: !g.rx.is_empty() || g.rx_eof || g.error.is_some(),
                    writable: g.tx.len() < g.tx_cap || g.tx_broken || g.tx_shut,
                    hup: dead,
                    rdhup: g.rx_eof,
                    error: g.error.is_some(),
                }
            }
        }
    }
}

impl Drop for Relay {
    /// close(2): what the guest already sent still goes out, then FIN.
    fn drop(&mut self) {
        let mut g = self.shared.lock();
        g.closed = true;
        g.tx_shut = true;
        if let Some(s) = &g.stream {
            let _ = s.shutdown(NetShutdown::Read);
            // A peer that never reads must not keep the writer forever.
            let _ = s.set_write_timeout(Some(Duration::from_secs(60)));
        }
        drop(g);
        self.shared.cond.notify_all();
    }
}

/// First thread of a relayed connection: checks the name where it must,
/// connects, starts the reader, then writes what the guest sends.
fn connect_and_write(
    shared: Arc<Shared>,
    dest: SocketAddr,
    timeout: Duration,
    wake: Wake,
    egress: Egress,
) {
    let plan = if egress.by_name {
        match gate(&shared, &wake, &egress, dest) {
            Some(p) => p,
            None => return,
        }
    } else {
        Plan::Pass
    };
    let mut stream = match TcpStream::connect_timeout(&dest, timeout) {
        Ok(s) => s,
        Err(e) => {
            tracing::info!(%dest, error = %e, "netstack: relayed connection failed");
            let mut g = shared.lock();
            if egress.by_name {
                // The guest was told it is connected: the error comes as
                // a reset of the stream.
                g.rx_eof = true;
                g.tx_broken = true;
                g.tx.clear();
                g.error = Some(errno_of(&e));
            } else {
                g.phase = Phase::Failed;
                g.error = Some(errno_of(&e));
            }
            g.refused = Some(format!("connection failed: {e}"));
            drop(g);
            wake();
            return;
        }
    };
    let _ = stream.set_nodelay(true);
    {
        let mut g = shared.lock();
        g.stream = stream.try_clone().ok();
        if !egress.by_name {
            g.local_port = stream.local_addr().map_or(0, |a| a.port());
        }
        g.phase = Phase::Established;
        if g.closed {
            let _ = stream.shutdown(NetShutdown::Read);
        }
    }
    let tls = egress.tls.clone();
    match plan {
        Plan::Tls(name) => {
            let Some(tls) = tls else { return };
            intercept(&shared, stream, &wake, &tls, &name, &egress.policy);
            return;
        }
        Plan::Pass | Plan::Http(_) => {}
    }
    match stream.try_clone() {
        Ok(r) => {
            let (s, w) = (shared.clone(), wake.clone());
            let spawned = std::thread::Builder::new()
                .name("netstack-relay-rx".into())
                .spawn(move || read_loop(s, r, w));
            if spawned.is_err() {
                let mut g = shared.lock();
                g.rx_eof = true;
                g.error = Some(Errno::ENOBUFS);
            }
        }
        Err(_) => shared.lock().rx_eof = true,
    }
    wake();
    let filter = match plan {
        Plan::Http(name) => Some(crate::http::Outgoing::new(&name, egress.policy.clone())),
        _ => None,
    };
    write_loop(&shared, &mut stream, &wake, filter);
}

/// Holds a connection allowed by name until its first bytes name the host,
/// and decides. `None`: refused (the guest got Linux-like answers: a TLS
/// alert, an HTTP 403, or a reset).
fn gate(shared: &Shared, wake: &Wake, eg: &Egress, dest: SocketAddr) -> Option<Plan> {
    let deadline = Instant::now() + NAME_WAIT;
    let mut g = shared.lock();
    // Looked at again only when more has come (a guest writing a byte at
    // a time costs each byte once or so, not the whole head each time).
    let mut seen = 0;
    let opening = loop {
        if g.tx.len() > seen {
            let buf = g.tx.make_contiguous();
            // An HTTP head is parsed again only when a line of it ends;
            // in between only the new bytes are searched.
            let unfinished = buf.first().is_some_and(u8::is_ascii_uppercase)
                && seen > 0
                && buf.len() < sniff::MAX_HEAD
                && !buf[seen..].contains(&b'\n');
            seen = buf.len();
            if !unfinished {
                let o = sniff::opening(buf);
                if o != Opening::More {
                    break o;
                }
            }
        }
        let now = Instant::now();
        if g.tx_shut || g.closed || now >= deadline {
            break Opening::Other;
        }
        g = shared
            .cond
            .wait_timeout(g, deadline - now)
            .map(|(g, _)| g)
            .unwrap_or_else(|e| e.into_inner().0);
    };
    drop(g);
    let (name, from) = match &opening {
        Opening::Tls { sni } => (sni.clone(), "sni"),
        Opening::Http(h) => (h.host.clone(), "host"),
        _ => (None, "none"),
    };
    if let (Some((_, rec)), Some(n)) = (&shared.audit, &name) {
        rec.lock().unwrap_or_else(|e| e.into_inner()).name = Some((n.clone(), from));
    }
    match (eg.policy.check_name(dest, name.as_deref()), name) {
        (Decision::Allow { rule, .. }, Some(name)) => {
            tracing::info!(%dest, %rule, %name, "egress: allowed by name");
            if let Some((_, rec)) = &shared.audit {
                rec.lock().unwrap_or_else(|e| e.into_inner()).rule = rule;
            }
            Some(match opening {
                Opening::Tls { .. } if eg.tls.is_some() && eg.policy.inspects(&name) => {
                    Plan::Tls(name)
                }
                Opening::Http(_) => Plan::Http(name),
                _ => Plan::Pass,
            })
        }
        (decision, name) => {
            let why = match decision {
                Decision::Deny(why) => why.to_string(),
                Decision::Allow { .. } => "the connection named no host".to_string(),
            };
            let shown = name.as_deref().unwrap_or("no name");
            tracing::warn!(%dest, name = %shown, reason = %why, "egress: refused");
            if eg.report_refusals {
                eprintln!("ferrovisor: egress to {dest} ({shown}) refused: {why}");
            }
            let answer = match opening {
                Opening::Tls { .. } => crate::tls::alert(crate::tls::UNRECOGNIZED_NAME).to_vec(),
                Opening::Http(_) => {
                    crate::http::response(403, "Forbidden", &format!("refused: {why}"))
                }
                _ => Vec::new(),
            };
            let mut g = shared.lock();
            // With nothing to say, the connection is reset.
            if answer.is_empty() {
                g.error = Some(Errno::ECONNRESET);
            }
            g.rx.extend(answer);
            g.rx_eof = true;
            g.tx.clear();
            g.tx_broken = true;
            g.refused = Some(why);
            drop(g);
            shared.cond.notify_all();
            wake();
            None
        }
    }
}

/// Appends bytes for the guest, waiting for room; `Err` once the guest
/// closed its socket.
fn push_rx(shared: &Shared, wake: &Wake, bytes: &[u8]) -> std::io::Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    let mut g = shared.lock();
    while g.rx.len() >= g.rx_cap && !g.closed {
        g = shared.wait(g);
    }
    if g.closed {
        return Err(std::io::ErrorKind::BrokenPipe.into());
    }
    g.rx.extend(bytes);
    drop(g);
    wake();
    Ok(())
}

/// The next bytes the guest sent, waiting for them; `None` once it shut
/// its sending side and everything went.
fn take_tx(shared: &Shared, wake: &Wake) -> Option<Vec<u8>> {
    let mut g = shared.lock();
    while g.tx.is_empty() && !g.tx_shut {
        g = shared.wait(g);
    }
    if g.tx.is_empty() {
        return None;
    }
    let n = g.tx.len().min(CHUNK);
    let chunk: Vec<u8> = g.tx.drain(..n).collect();
    drop(g);
    // Room in the send buffer again.
    wake();
    Some(chunk)
}

/// A request the HTTP layer refused: the guest gets its answer, then the
/// end of the stream; nothing more goes out.
fn refuse_request(shared: &Shared, wake: &Wake, r: &crate::http::Refusal) {
    tracing::warn!(reason = %r.reason, "egress: request refused");
    let mut g = shared.lock();
    g.tx_broken = true;
    g.tx.clear();
    g.refused = Some(r.reason.to_string());
    drop(g);
    wake();
}

/// An intercepted TLS connection: the host's TLS (verified) first, then
/// the guest's, with the HTTP layer between the two plaintexts.
fn intercept(
    shared: &Arc<Shared>,
    mut stream: TcpStream,
    wake: &Wake,
    tls: &Interceptor,
    name: &str,
    policy: &Arc<Policy>,
) {
    let fail = |why: String, alert: bool| {
        tracing::warn!(%name, reason = %why, "egress: intercepted connection failed");
        if alert {
            let _ = push_rx(
                shared,
                wake,
                &crate::tls::alert(crate::tls::HANDSHAKE_FAILURE),
            );
        }
        let mut g = shared.lock();
        g.rx_eof = true;
        g.tx_broken = true;
        g.tx.clear();
        g.refused.get_or_insert(why);
        drop(g);
        wake();
    };
    let host = match tls.host_side(name, &mut stream) {
        Ok(h) => Arc::new(h),
        Err(e) => return fail(format!("TLS to {name}: {e}"), true),
    };
    let guest = match tls.guest_side(name) {
        Ok(g) => Arc::new(g),
        Err(e) => return fail(format!("the sandbox's certificate for {name}: {e}"), true),
    };
    let Ok(writer) = stream.try_clone() else {
        return fail("no second descriptor for the host connection".into(), false);
    };
    let writer = Arc::new(Mutex::new(writer));
    let to_host = {
        let (writer, shared) = (writer.clone(), shared.clone());
        move |b: &[u8]| -> std::io::Result<()> {
            writer
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .write_all(b)?;
            shared.lock().bytes_out += b.len() as u64;
            Ok(())
        }
    };
    // Host to guest.
    {
        let (shared, wake, host, guest, mut to_host) = (
            shared.clone(),
            wake.clone(),
            host.clone(),
            guest.clone(),
            to_host.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name("netstack-relay-tls".into())
            .spawn(move || {
                let mut to_guest = |b: &[u8]| push_rx(&shared, &wake, b);
                let mut buf = vec![0u8; CHUNK];
                loop {
                    let n = match stream.read(&mut buf) {
                        Ok(0) | Err(_) => 0,
                        Ok(n) => n,
                    };
                    shared.lock().bytes_in += n as u64;
                    let (plain, eof) = match host.feed(&buf[..n], &mut to_host) {
                        Ok(r) => r,
                        Err(_) => (Vec::new(), true),
                    };
                    if guest.send(&plain, &mut to_guest).is_err() {
                        break;
                    }
                    if n == 0 || eof {
                        guest.close(&mut to_guest);
                        break;
                    }
                }
                shared.lock().rx_eof = true;
                wake();
            });
        if spawned.is_err() {
            return fail("no thread for the connection".into(), false);
        }
    }
    // Guest to host.
    let mut to_guest = |b: &[u8]| push_rx(shared, wake, b);
    let mut to_host = to_host;
    let mut http = crate::http::Outgoing::new(name, policy.clone());
    let mut out = Vec::new();
    while let Some(chunk) = take_tx(shared, wake) {
        let (plain, eof) = match guest.feed(&chunk, &mut to_guest) {
            Ok(r) => r,
            Err(e) => return fail(format!("the guest's TLS: {e}"), false),
        };
        out.clear();
        let refused = http.push(&plain, &mut out).err();
        {
            let mut g = shared.lock();
            g.secrets = http.secrets;
            g.requests = http.requests;
        }
        if host.send(&out, &mut to_host).is_err() {
            break;
        }
        if let Some(r) = refused {
            refuse_request(shared, wake, &r);
            let _ = guest.send(&r.response, &mut to_guest);
            guest.close(&mut to_guest);
            shared.lock().rx_eof = true;
            wake();
            break;
        }
        if eof {
            break;
        }
    }
    host.close(&mut to_host);
    let w = writer.lock().unwrap_or_else(|e| e.into_inner());
    let _ = w.shutdown(NetShutdown::Write);
}

fn write_loop(
    shared: &Shared,
    stream: &mut TcpStream,
    wake: &Wake,
    mut filter: Option<crate::http::Outgoing>,
) {
    let mut out = Vec::new();
    loop {
        let Some(chunk) = take_tx(shared, wake) else {
            // The guest shut its side (or closed): FIN.
            let _ = stream.shutdown(NetShutdown::Write);
            let closed = shared.lock().closed;
            wake();
            if closed {
                let _ = stream.shutdown(NetShutdown::Both);
            }
            return;
        };
        let (bytes, refused) = match &mut filter {
            None => (&chunk[..], None),
            Some(f) => {
                out.clear();
                let r = f.push(&chunk, &mut out).err();
                let mut g = shared.lock();
                g.secrets = f.secrets;
                g.requests = f.requests;
                drop(g);
                (&out[..], r)
            }
        };
        let sent = stream.write_all(bytes);
        if sent.is_ok() {
            shared.lock().bytes_out += bytes.len() as u64;
        }
        if let Some(r) = refused {
            refuse_request(shared, wake, &r);
            // The host's answers to what went before come first, then
            // the Sentry's: the host's side is closed, and what it still
            // sends is dropped.
            let _ = stream.shutdown(NetShutdown::Both);
            let _ = push_rx(shared, wake, &r.response);
            shared.lock().rx_eof = true;
            wake();
            return;
        }
        if let Err(e) = sent {
            let mut g = shared.lock();
            g.tx_broken = true;
            g.tx.clear();
            if !g.closed {
                g.error.get_or_insert(errno_of(&e));
            }
            drop(g);
            wake();
            let _ = stream.shutdown(NetShutdown::Both);
            return;
        }
    }
}

fn read_loop(shared: Arc<Shared>, mut stream: TcpStream, wake: Wake) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let room = {
            let mut g = shared.lock();
            while g.rx.len() >= g.rx_cap && !g.closed && !g.rx_eof {
                g = shared.wait(g);
            }
            if g.closed || g.rx_eof {
                return;
            }
            g.rx_cap - g.rx.len()
        };
        let want = room.min(buf.len());
        let got = stream.read(&mut buf[..want]);
        let mut g = shared.lock();
        match got {
            Ok(0) => g.rx_eof = true,
            Ok(n) => {
                g.bytes_in += n as u64;
                g.rx.extend(&buf[..n]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                g.rx_eof = true;
                if !g.closed {
                    g.error.get_or_insert(errno_of(&e));
                }
            }
        }
        let done = g.rx_eof || g.closed;
        drop(g);
        wake();
        if done {
            return;
        }
    }
}
