//! Unix domain sockets, entirely inside the Sentry: stream, datagram and
//! seqpacket; pathname (a tmpfs inode), abstract and autobound addresses;
//! `SCM_RIGHTS` and `SCM_CREDENTIALS`.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use abi::Errno;

use crate::file::FileDescription;
use crate::kernel::EventBus;

/// Socket type (`SOCK_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SockType {
    /// `SOCK_STREAM`
    Stream,
    /// `SOCK_DGRAM`
    Dgram,
    /// `SOCK_SEQPACKET`
    SeqPacket,
}

/// Sender credentials (`struct ucred`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Creds {
    /// process id
    pub pid: i32,
    /// user id
    pub uid: u32,
    /// group id
    pub gid: u32,
}

/// A socket address in the AF_UNIX namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum UnixAddr {
    /// not bound
    #[default]
    Unnamed,
    /// a path (as given)
    Path(Vec<u8>),
    /// an abstract name (without the leading NUL)
    Abstract(Vec<u8>),
}

/// One queued message (a `write` on a stream socket is one message too;
/// stream reads join messages that carry no ancillary data).
#[derive(Debug)]
pub struct Message {
    /// payload
    pub data: Vec<u8>,
    /// already read (streams only)
    pub consumed: usize,
    /// passed descriptions (`SCM_RIGHTS`)
    pub rights: Vec<Arc<FileDescription>>,
    /// sender credentials
    pub creds: Creds,
    /// sender address (datagrams)
    pub from: UnixAddr,
}

/// Default receive buffer, like Linux's `net.core.rmem_default`.
pub const DEFAULT_BUF: usize = 212_992;
/// Largest descriptor count in one `SCM_RIGHTS` message (`SCM_MAX_FD`).
pub const SCM_MAX_FD: usize = 253;
/// Most datagrams queued on one socket (`max_dgram_qlen`).
const MAX_DGRAMS: usize = 512;

#[derive(Debug, Default)]
struct Queue {
    msgs: VecDeque<Message>,
    bytes: usize,
}

/// Mutable state of a socket.
#[derive(Debug)]
pub struct State {
    /// bound address
    pub addr: UnixAddr,
    /// connected peer (streams, seqpacket; default destination for dgram)
    pub peer: Option<Weak<UnixSocket>>,
    /// the peer's address at connect time
    pub peer_addr: UnixAddr,
    /// peer credentials (`SO_PEERCRED`)
    pub peer_creds: Option<Creds>,
    /// listening: connections waiting for `accept`
    pub listening: Option<(usize, VecDeque<Arc<UnixSocket>>)>,
    rx: Queue,
    /// no more reads (`shutdown(SHUT_RD)` or the peer's `SHUT_WR`)
    pub rd_shut: bool,
    /// no more writes
    pub wr_shut: bool,
    /// the connection was made and later lost (peer closed)
    pub peer_gone: bool,
    /// was connected at some point
    pub was_connected: bool,
    /// `SO_PASSCRED`
    pub passcred: bool,
    /// `SO_RCVBUF`
    pub rcvbuf: usize,
    /// `SO_SNDBUF`
    pub sndbuf: usize,
    /// pending `SO_ERROR`
    pub error: Option<Errno>,
}

/// A Unix domain socket.
pub struct UnixSocket {
    /// type
    pub kind: SockType,
    state: Mutex<State>,
    bus: Arc<EventBus>,
    registry: Arc<Registry>,
    /// descriptions with `O_ASYNC`, signalled when data or a connection
    /// arrives (sock_def_readable())
    pub fasync: crate::fasync::Fasync,
    /// `SO_RCVTIMEO`/`SO_SNDTIMEO` (an accepted socket starts without:
    /// `unix_stream_connect` makes it with `sock_init_data`)
    pub timeouts: super::SockTimeouts,
}

impl fmt::Debug for UnixSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UnixSocket({:?})", self.kind)
    }
}

/// The sandbox's abstract socket namespace (pathname sockets live in the
/// file system).
#[derive(Debug, Default)]
pub struct Registry {
    abstract_names: Mutex<HashMap<Vec<u8>, Weak<UnixSocket>>>,
    next_auto: Mutex<u32>,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, HashMap<Vec<u8>, Weak<UnixSocket>>> {
        self.abstract_names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The socket bound to abstract `name`.
    pub fn lookup(&self, name: &[u8]) -> Option<Arc<UnixSocket>> {
        self.lock().get(name).and_then(Weak::upgrade)
    }
}

/// What a receive produced.
#[derive(Debug, Default)]
pub struct Received {
    /// bytes copied out
    pub data: Vec<u8>,
    /// the full length of the datagram (for `MSG_TRUNC`)
    pub full_len: usize,
    /// passed descriptions
    pub rights: Vec<Arc<FileDescription>>,
    /// sender credentials
    pub creds: Option<Creds>,
    /// sender address
    pub from: UnixAddr,
}

impl UnixSocket {
    /// A new unbound socket.
    pub fn new(kind: SockType, bus: Arc<EventBus>, registry: Arc<Registry>) -> Arc<UnixSocket> {
        Arc::new(UnixSocket {
            kind,
            state: Mutex::new(State {
                addr: UnixAddr::Unnamed,
                peer: None,
                peer_addr: UnixAddr::Unnamed,
                peer_creds: None,
                listening: None,
                rx: Queue::default(),
                rd_shut: false,
                wr_shut: false,
                peer_gone: false,
                was_connected: false,
                passcred: false,
                rcvbuf: DEFAULT_BUF,
                sndbuf: DEFAULT_BUF,
                error: None,
            }),
            bus,
            registry,
            fasync: Default::default(),
            timeouts: Default::default(),
        })
    }

    /// Locks the state.
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Two connected sockets (`socketpair`).
    pub fn pair(
        kind: SockType,
        bus: Arc<EventBus>,
        registry: Arc<Registry>,
        creds: Creds,
    ) -> (Arc<UnixSocket>, Arc<UnixSocket>) {
        let a = UnixSocket::new(kind, bus.clone(), registry.clone());
        let b = UnixSocket::new(kind, bus, registry);
        connect_pair(&a, &b, creds, creds);
        (a, b)
    }

    /// Binds to `addr` (`Unnamed` = autobind to an abstract name).
    /// Pathname binding is done by the caller, which creates the inode.
    pub fn bind(self: &Arc<Self>, addr: UnixAddr) -> Result<UnixAddr, Errno> {
        let mut st = self.state();
        if st.addr != UnixAddr::Unnamed {
            return Err(Errno::EINVAL);
        }
        let addr = match addr {
            UnixAddr::Unnamed => {
                // Autobind: five hex digits in the abstract namespace.
                let mut names = self.registry.lock();
                let mut n = self
                    .registry
                    .next_auto
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                let mut tries = 0;
                loop {
                    *n = (*n + 1) & 0xfffff;
                    let name = format!("{:05x}", *n).into_bytes();
                    if names.get(&name).and_then(Weak::upgrade).is_none() {
                        names.insert(name.clone(), Arc::downgrade(self));
                        break UnixAddr::Abstract(name);
                    }
                    tries += 1;
                    if tries > 0x100000 {
                        return Err(Errno::ENOSPC);
                    }
                }
            }
            UnixAddr::Abstract(name) => {
                let mut names = self.registry.lock();
                if names.get(&name).and_then(Weak::upgrade).is_some() {
                    return Err(Errno::EADDRINUSE);
                }
                names.insert(name.clone(), Arc::downgrade(self));
                UnixAddr::Abstract(name)
            }
            p @ UnixAddr::Path(_) => p,
        };
        st.addr = addr.clone();
        Ok(addr)
    }

    /// `listen(2)`.
    pub fn listen(&self, backlog: i32) -> Result<(), Errno> {
        if self.kind == SockType::Dgram {
            return Err(Errno::EOPNOTSUPP);
        }
        let mut st = self.state();
        if st.peer.is_some() || st.was_connected {
            return Err(Errno::EINVAL);
        }
        if st.addr == UnixAddr::Unnamed {
            return Err(Errno::EINVAL);
        }
        // somaxconn bounds the backlog, as in Linux.
        let backlog = backlog.clamp(0, 4096) as usize;
        match &mut st.listening {
            Some((b, _)) => *b = backlog,
            None => st.listening = Some((backlog, VecDeque::new())),
        }
        drop(st);
        self.bus.notify();
        Ok(())
    }

    /// Connects a stream/seqpacket socket to listener `target`: queues the
    /// server side on the listener. `Ok(false)` when its backlog is full.
    pub fn connect_to(
        self: &Arc<Self>,
        kernel: &crate::kernel::Kernel,
        target: &Arc<UnixSocket>,
        creds: Creds,
        target_creds: Creds,
    ) -> Result<bool, Errno> {
        if target.kind != self.kind {
            return Err(Errno::ECONNREFUSED);
        }
        {
            let st = self.state();
            if st.peer.is_some() {
                return Err(Errno::EISCONN);
            }
            if st.listening.is_some() {
                return Err(Errno::EINVAL);
            }
        }
        let server = UnixSocket::new(self.kind, self.bus.clone(), self.registry.clone());
        {
            let mut ts = target.state();
            let addr = ts.addr.clone();
            let Some((backlog, queue)) = ts.listening.as_mut() else {
                return Err(Errno::ECONNREFUSED);
            };
            if queue.len() > *backlog {
                return Ok(false);
            }
            connect_pair(self, &server, creds, target_creds);
            server.state().addr = addr.clone();
            self.state().peer_addr = addr;
            queue.push_back(server);
        }
        self.bus.notify();
        target.fasync.kill(kernel, crate::fasync::Reason::In);
        Ok(true)
    }

    /// Sets the default destination of a datagram socket.
    pub fn connect_dgram(&self, target: &Arc<UnixSocket>) -> Result<(), Errno> {
        if target.kind != SockType::Dgram {
            return Err(Errno::EPROTOTYPE);
        }
        let addr = target.state().addr.clone();
        let mut st = self.state();
        st.peer = Some(Arc::downgrade(target));
        st.peer_addr = addr;
        Ok(())
    }

    /// Takes a pending connection (`accept`); `None` when none waits.
    pub fn accept(&self) -> Result<Option<Arc<UnixSocket>>, Errno> {
        let mut st = self.state();
        let Some((_, q)) = st.listening.as_mut() else {
            return Err(Errno::EINVAL);
        };
        let c = q.pop_front();
        drop(st);
        if c.is_some() {
            self.bus.notify();
        }
        Ok(c)
    }

    /// Sends one message. `to` is the destination of an unconnected
    /// datagram. `Ok(None)` = would block. `EPIPE` when the peer is gone
    /// (the caller raises `SIGPIPE` unless `MSG_NOSIGNAL`).
    pub fn send(
        &self,
        kernel: &crate::kernel::Kernel,
        data: &[u8],
        rights: Vec<Arc<FileDescription>>,
        creds: Creds,
        to: Option<Arc<UnixSocket>>,
    ) -> Result<Option<usize>, Errno> {
        let (peer, my_addr) = {
            let st = self.state();
            if st.wr_shut {
                return Err(Errno::EPIPE);
            }
            let peer = match (&to, self.kind) {
                (Some(t), SockType::Dgram) => Some(t.clone()),
                (Some(_), _) => return Err(Errno::EISCONN),
                (None, _) => st.peer.as_ref().and_then(Weak::upgrade),
            };
            (peer, st.addr.clone())
        };
        let Some(peer) = peer else {
            return Err(match self.kind {
                SockType::Dgram if self.state().peer.is_some() => Errno::ECONNREFUSED,
                SockType::Dgram => Errno::ENOTCONN,
                _ if self.state().was_connected => Errno::EPIPE,
                _ => Errno::ENOTCONN,
            });
        };
        let mut ps = peer.state();
        if self.kind != SockType::Dgram && (ps.rd_shut || ps.peer_gone) {
            return Err(Errno::EPIPE);
        }
        let cap = ps.rcvbuf;
        let n = match self.kind {
            SockType::Stream => {
                let room = cap.saturating_sub(ps.rx.bytes);
                if room == 0 && !data.is_empty() {
                    return Ok(None);
                }
                data.len()
                    .min(room.max(if data.is_empty() { 0 } else { 1 }))
            }
            _ => {
                if data.len() > cap {
                    return Err(Errno::EMSGSIZE);
                }
                if ps.rx.bytes + data.len() > cap || ps.rx.msgs.len() >= MAX_DGRAMS {
                    return Ok(None);
                }
                data.len()
            }
        };
        ps.rx.bytes += n;
        ps.rx.msgs.push_back(Message {
            data: data[..n].to_vec(),
            consumed: 0,
            rights,
            creds,
            from: my_addr,
        });
        drop(ps);
        self.bus.notify();
        peer.fasync.kill(kernel, crate::fasync::Reason::In);
        Ok(Some(n))
    }

    /// Receives into at most `max` bytes. `Ok(None)` = would block; an
    /// empty `data` with `full_len == 0` on a stream is end of file.
    pub fn recv(
        &self,
        max: usize,
        peek: bool,
        waitall_min: usize,
    ) -> Result<Option<Received>, Errno> {
        let mut st = self.state();
        let _ = waitall_min;
        if st.listening.is_some() {
            return Err(Errno::EINVAL);
        }
        if st.rx.msgs.is_empty() {
            let eof = st.rd_shut || st.peer_gone;
            if self.kind != SockType::Dgram && eof {
                return Ok(Some(Received::default()));
            }
            if self.kind != SockType::Dgram && st.peer.is_none() && !st.was_connected {
                return Err(Errno::EINVAL);
            }
            return Ok(None);
        }
        let mut out = Received::default();
        match self.kind {
            SockType::Stream => {
                let mut i = 0;
                while out.data.len() < max {
                    let Some(m) = st.rx.msgs.get_mut(i) else {
                        break;
                    };
                    // Ancillary data belongs to its own message: stop before
                    // a message that carries some, unless it is the first.
                    if i > 0 && (!m.rights.is_empty()) {
                        break;
                    }
                    let avail = &m.data[m.consumed..];
                    let n = avail.len().min(max - out.data.len());
                    out.data.extend_from_slice(&avail[..n]);
                    if i == 0 {
                        out.creds = Some(m.creds);
                        if !peek {
                            out.rights = std::mem::take(&mut m.rights);
                        }
                    }
                    if peek {
                        i += 1;
                        continue;
                    }
                    m.consumed += n;
                    if m.consumed == m.data.len() {
                        st.rx.msgs.pop_front();
                    } else {
                        break;
                    }
                }
                if !peek {
                    st.rx.bytes -= out.data.len();
                }
                out.full_len = out.data.len();
            }
            _ => {
                let m = if peek {
                    let m = &st.rx.msgs[0];
                    Message {
                        data: m.data.clone(),
                        consumed: 0,
                        rights: Vec::new(),
                        creds: m.creds,
                        from: m.from.clone(),
                    }
                } else {
                    let m = st.rx.msgs.pop_front().ok_or(Errno::EAGAIN)?;
                    st.rx.bytes -= m.data.len();
                    m
                };
                out.full_len = m.data.len();
                out.data = m.data;
                out.data.truncate(max);
                out.rights = m.rights;
                out.creds = Some(m.creds);
                out.from = m.from;
            }
        }
        drop(st);
        if !peek {
            self.bus.notify();
        }
        Ok(Some(out))
    }

    /// `shutdown(2)`: `how` 0 = read, 1 = write, 2 = both.
    pub fn shutdown(&self, how: i32) -> Result<(), Errno> {
        if !(0..=2).contains(&how) {
            return Err(Errno::EINVAL);
        }
        let peer = {
            let mut st = self.state();
            if st.peer.is_none() && self.kind != SockType::Dgram && st.listening.is_none() {
                return Err(Errno::ENOTCONN);
            }
            if how != 1 {
                st.rd_shut = true;
            }
            if how != 0 {
                st.wr_shut = true;
            }
            st.peer.as_ref().and_then(Weak::upgrade)
        };
        if let (Some(p), true) = (peer, self.kind != SockType::Dgram) {
            let mut ps = p.state();
            if how != 0 {
                ps.rd_shut = true;
            }
            if how != 1 {
                ps.wr_shut = true;
            }
        }
        self.bus.notify();
        Ok(())
    }

    /// `(readable, writable, hup, rdhup, error)` for poll.
    pub fn readiness(&self) -> (bool, bool, bool, bool, bool) {
        let st = self.state();
        if let Some((_, q)) = &st.listening {
            return (!q.is_empty(), false, false, false, false);
        }
        let connected_kind = self.kind != SockType::Dgram;
        let eof = st.rd_shut || st.peer_gone;
        let readable = !st.rx.msgs.is_empty() || (connected_kind && eof && st.was_connected);
        let hup =
            connected_kind && st.was_connected && ((st.rd_shut && st.wr_shut) || st.peer_gone);
        let peer = st.peer.as_ref().and_then(Weak::upgrade);
        let wr_shut = st.wr_shut;
        let error = st.error.is_some();
        drop(st);
        let writable = match peer {
            Some(p) => {
                let ps = p.state();
                !wr_shut && (ps.rx.bytes < ps.rcvbuf || ps.rd_shut)
            }
            None => !connected_kind && !wr_shut,
        };
        (readable, writable || hup, hup, eof && connected_kind, error)
    }

    /// Bytes waiting to be read (`FIONREAD`).
    pub fn available(&self) -> usize {
        let st = self.state();
        match self.kind {
            SockType::Stream => st.rx.bytes,
            _ => st.rx.msgs.front().map_or(0, |m| m.data.len()),
        }
    }

    /// The socket was closed: the peer sees end of file.
    pub fn release(&self) {
        let (peer, addr, pending) = {
            let mut st = self.state();
            let pending = st.listening.take().map(|(_, q)| q).unwrap_or_default();
            // Drop queued descriptions now: a socket passed over itself must
            // not keep itself alive.
            st.rx.msgs.clear();
            st.rx.bytes = 0;
            (
                st.peer.take().and_then(|w| w.upgrade()),
                st.addr.clone(),
                pending,
            )
        };
        for c in pending {
            c.release();
        }
        if let Some(p) = peer {
            if self.kind != SockType::Dgram {
                let mut ps = p.state();
                ps.peer_gone = true;
            }
        }
        if let UnixAddr::Abstract(name) = addr {
            let mut names = self.registry.lock();
            if names
                .get(&name)
                .is_some_and(|w| w.upgrade().is_none() || std::ptr::eq(w.as_ptr(), self))
            {
                names.remove(&name);
            }
        }
        self.bus.notify();
    }
}

fn connect_pair(a: &Arc<UnixSocket>, b: &Arc<UnixSocket>, a_creds: Creds, b_creds: Creds) {
    {
        let mut sa = a.state();
        sa.peer = Some(Arc::downgrade(b));
        sa.peer_creds = Some(b_creds);
        sa.was_connected = true;
    }
    let mut sb = b.state();
    sb.peer = Some(Arc::downgrade(a));
    sb.peer_creds = Some(a_creds);
    sb.was_connected = true;
}

/// The open-file side of a socket: closing the last description releases
/// it.
#[derive(Debug)]
pub struct SocketHandle(pub Arc<UnixSocket>);

impl Drop for SocketHandle {
    fn drop(&mut self) {
        self.0.release();
    }
}
