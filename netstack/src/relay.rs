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

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown as NetShutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use abi::Errno;

use crate::Readiness;

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
}

struct Shared {
    st: Mutex<State>,
    cond: Condvar,
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
    ) -> Result<Relay, Errno> {
        let shared = Arc::new(Shared {
            st: Mutex::new(State {
                phase: Phase::Connecting,
                stream: None,
                local_port: 0,
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
            }),
            cond: Condvar::new(),
        });
        let s = shared.clone();
        std::thread::Builder::new()
            .name("netstack-relay".into())
            .spawn(move || connect_and_write(s, dest, timeout, wake))
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

/// First thread of a relayed connection: connects, starts the reader, then
/// writes what the guest sends.
fn connect_and_write(shared: Arc<Shared>, dest: SocketAddr, timeout: Duration, wake: Wake) {
    let stream = match TcpStream::connect_timeout(&dest, timeout) {
        Ok(s) => s,
        Err(e) => {
            tracing::info!(%dest, error = %e, "netstack: relayed connection failed");
            let mut g = shared.lock();
            g.phase = Phase::Failed;
            g.error = Some(errno_of(&e));
            drop(g);
            wake();
            return;
        }
    };
    let _ = stream.set_nodelay(true);
    let reader = stream.try_clone();
    {
        let mut g = shared.lock();
        g.stream = stream.try_clone().ok();
        g.local_port = stream.local_addr().map_or(0, |a| a.port());
        g.phase = Phase::Established;
        if g.closed {
            let _ = stream.shutdown(NetShutdown::Read);
        }
    }
    match reader {
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
    write_loop(&shared, stream, &wake);
}

fn write_loop(shared: &Shared, mut stream: TcpStream, wake: &Wake) {
    let mut chunk = Vec::with_capacity(CHUNK);
    loop {
        let mut g = shared.lock();
        while g.tx.is_empty() && !g.tx_shut {
            g = shared.wait(g);
        }
        if g.tx.is_empty() {
            // The guest shut its side (or closed): FIN.
            let _ = stream.shutdown(NetShutdown::Write);
            let closed = g.closed;
            drop(g);
            wake();
            if closed {
                let _ = stream.shutdown(NetShutdown::Both);
            }
            return;
        }
        let n = g.tx.len().min(CHUNK);
        chunk.clear();
        chunk.extend(g.tx.drain(..n));
        drop(g);
        // Room in the send buffer again.
        wake();
        if let Err(e) = stream.write_all(&chunk) {
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
            Ok(n) => g.rx.extend(&buf[..n]),
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
