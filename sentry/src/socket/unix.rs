//! Unix domain sockets, entirely inside the Sentry: stream, datagram and
//! seqpacket; pathname (a tmpfs inode), abstract and autobound addresses;
//! `SCM_RIGHTS` and `SCM_CREDENTIALS`. What a sender has queued unread
//! counts against its own `SO_SNDBUF`, with Linux's per-skb overhead, for
//! every type (the receiver's `SO_RCVBUF` bounds nothing, as in Linux).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use abi::Errno;

use crate::kernel::wait::WaitQueue;
use crate::sync::Locked;
use crate::vfs::file::FileDescription;

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
    /// what the message costs its sender's `SO_SNDBUF` until it is read
    /// or dropped (datagrams and seqpacket)
    pub _charge: Option<SndCharge>,
}

/// A datagram's share of its sender's send buffer, given back when the
/// message goes (read, or dropped with the receiver): Linux's
/// `sk_wmem_alloc`, released by the skb's destructor (`sock_wfree`).
#[derive(Debug)]
pub struct SndCharge {
    wmem: Arc<AtomicUsize>,
    bytes: usize,
    /// the sender's waiters: room again may let a blocked send go on
    /// (`sock_wfree` → `sk_write_space`)
    sender: WaitQueue,
}

impl Drop for SndCharge {
    fn drop(&mut self) {
        self.wmem.fetch_sub(self.bytes, Ordering::Relaxed);
        self.sender.notify();
    }
}

/// What a datagram of `len` bytes costs its sender's send buffer: the
/// `truesize` Linux's `unix_dgram_sendmsg` charges on x86-64: the
/// `sk_buff` (256 bytes), a linear part rounded up by kmalloc together
/// with `skb_shared_info` (320), and whole pages for what goes beyond
/// `SKB_MAX_ALLOC` (at most `MAX_SKB_FRAGS` of them). With the default
/// 212992-byte buffer this lets 278 small datagrams wait unread, as Linux.
pub fn dgram_truesize(len: usize) -> usize {
    const PAGE: usize = 4096;
    const SHINFO: usize = 320;
    const SKB: usize = 256;
    const SKB_MAX_ALLOC: usize = 4 * PAGE - SHINFO;
    const MAX_FRAG_BYTES: usize = 17 * PAGE;
    let paged = if len > SKB_MAX_ALLOC {
        ((len - SKB_MAX_ALLOC).min(MAX_FRAG_BYTES) + PAGE - 1) & !(PAGE - 1)
    } else {
        0
    };
    let linear = (len.saturating_sub(paged) + 63) & !63;
    SKB + (linear + SHINFO).next_power_of_two() + paged
}

/// The most one stream piece carries: `SKB_MAX_HEAD(0)` (a page less
/// `skb_shared_info`) plus `UNIX_SKB_FRAGS_SZ` (32 KiB).
const STREAM_SKB_MAX: usize = 4096 - 320 + (32 << 10);

/// What a stream piece of `len` bytes costs its sender's send buffer
/// (`unix_stream_sendmsg` on x86-64): the `sk_buff`, a linear head of
/// what does not fill whole pages (rounded up by kmalloc with
/// `skb_shared_info`), and the rest in pages.
pub fn stream_truesize(len: usize) -> usize {
    const PAGE: usize = 4096;
    const SHINFO: usize = 320;
    const SKB: usize = 256;
    let paged = ((len.saturating_sub(PAGE - SHINFO) + PAGE - 1) & !(PAGE - 1)).min(len);
    let linear = (len - paged + 63) & !63;
    SKB + (linear + SHINFO).next_power_of_two() + ((paged + PAGE - 1) & !(PAGE - 1))
}

/// Default receive buffer, like Linux's `net.core.rmem_default`.
pub const DEFAULT_BUF: usize = 212_992;
/// Largest descriptor count in one `SCM_RIGHTS` message (`SCM_MAX_FD`).
pub const SCM_MAX_FD: usize = 253;
/// Most datagrams queued on one socket, whatever the senders' buffers
/// (a bound on the Sentry's memory; the send buffers bound it first).
const MAX_DGRAMS: usize = 512;
/// `net.unix.max_dgram_qlen`: a datagram socket whose queue holds more
/// than this takes no more from senders it is not connected to
/// (`unix_recvq_full`).
pub const MAX_DGRAM_QLEN: usize = 10;
/// The sandbox's `net.core.wmem_max` / `rmem_max`: the most `SO_SNDBUF`
/// and `SO_RCVBUF` take (before doubling); 4 MiB, as hosts commonly set
/// them (the kernel's own default is 212992).
pub const BUF_MAX: usize = 4 << 20;
/// `SOCK_MIN_SNDBUF`.
pub const MIN_SNDBUF: usize = 4608;
/// `SOCK_MIN_RCVBUF`.
pub const MIN_RCVBUF: usize = 2304;

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
    /// callers blocked on the socket: woken when data, a connection or
    /// room arrives, or the socket or its peer shuts down or closes
    pub waiters: WaitQueue,
    registry: Arc<Registry>,
    /// descriptions with `O_ASYNC`, signalled when data or a connection
    /// arrives (sock_def_readable())
    pub fasync: crate::vfs::fasync::Fasync,
    /// `SO_RCVTIMEO`/`SO_SNDTIMEO` (an accepted socket starts without:
    /// `unix_stream_connect` makes it with `sock_init_data`)
    pub timeouts: super::SockTimeouts,
    /// a send found no room (`SOCKWQ_ASYNC_NOSPACE`): room again signals
    /// `POLL_OUT` (`unix_write_space()`)
    nospace: std::sync::atomic::AtomicBool,
    /// bytes of this socket's datagrams that wait unread (`sk_wmem_alloc`)
    wmem: Arc<AtomicUsize>,
    /// the Landlock domain of the thread that made it, for abstract-socket
    /// scoping (landlock(7))
    pub maker_domain: std::sync::OnceLock<Arc<crate::kernel::landlock::Domain>>,
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
        self.abstract_names.locked()
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
    pub fn new(kind: SockType, registry: Arc<Registry>) -> Arc<UnixSocket> {
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
            waiters: WaitQueue::new(),
            registry,
            fasync: Default::default(),
            timeouts: Default::default(),
            nospace: Default::default(),
            wmem: Arc::default(),
            maker_domain: Default::default(),
        })
    }

    /// Locks the state.
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    /// The connected peer, if it is still there.
    pub fn peer(&self) -> Option<Arc<UnixSocket>> {
        self.state().peer.as_ref().and_then(Weak::upgrade)
    }

    /// The queues whose notifications may change this socket's readiness:
    /// its own, and its peer's (whose state bounds what may be sent to
    /// it).
    pub fn wait_queues(&self) -> Vec<WaitQueue> {
        let mut q = vec![self.waiters.clone()];
        if let Some(p) = self.peer() {
            q.push(p.waiters.clone());
        }
        q
    }

    /// Two connected sockets (`socketpair`).
    pub fn pair(
        kind: SockType,
        registry: Arc<Registry>,
        creds: Creds,
    ) -> (Arc<UnixSocket>, Arc<UnixSocket>) {
        let a = UnixSocket::new(kind, registry.clone());
        let b = UnixSocket::new(kind, registry);
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
                let mut n = self.registry.next_auto.locked();
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
        self.waiters.notify();
        Ok(())
    }

    /// Connects a stream/seqpacket socket to listener `target`: queues the
    /// server side on the listener. `Ok(false)` when its backlog is full.
    pub fn connect_to(
        self: &Arc<Self>,
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
        let server = UnixSocket::new(self.kind, self.registry.clone());
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
        target.waiters.notify();
        self.waiters.notify();
        target.fasync.kill(crate::vfs::fasync::Reason::In);
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
            // A connect waiting for room in the backlog.
            self.waiters.notify();
        }
        Ok(c)
    }

    /// Sends one message. `to` is the destination of an unconnected
    /// datagram. `Ok(None)` = would block. `EPIPE` when the peer is gone
    /// (the caller raises `SIGPIPE` unless `MSG_NOSIGNAL`). `rights` are
    /// taken only with the first byte that is queued: a send that would
    /// block leaves them with the caller, to go with the data when room
    /// comes (Linux attaches them to the first skb it manages to queue).
    pub fn send(
        &self,
        data: &[u8],
        rights: &mut Vec<Arc<FileDescription>>,
        creds: Creds,
        to: Option<Arc<UnixSocket>>,
    ) -> Result<Option<usize>, Errno> {
        let (peer, my_addr, sndbuf) = {
            let st = self.state();
            if st.wr_shut {
                return Err(Errno::EPIPE);
            }
            let peer = match (&to, self.kind) {
                (Some(t), SockType::Dgram) => Some(t.clone()),
                (Some(_), _) => return Err(Errno::EISCONN),
                (None, _) => st.peer.as_ref().and_then(Weak::upgrade),
            };
            (peer, st.addr.clone(), st.sndbuf)
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
        if self.kind == SockType::Stream {
            return self.send_stream(&peer, ps, data, rights, creds, my_addr, sndbuf);
        }
        // unix_dgram_sendmsg (seqpacket's too): the sender's own buffer
        // decides, not the receiver's: a datagram larger than it is
        // EMSGSIZE; one that would overdraw it (what its unread datagrams
        // hold) waits; and a receiver not connected back to the sender
        // takes no more once its queue is over max_dgram_qlen.
        if data.len() > sndbuf.saturating_sub(32) {
            return Err(Errno::EMSGSIZE);
        }
        if self.wmem.load(Ordering::Relaxed) >= sndbuf {
            self.out_of_room();
            return Ok(None);
        }
        let peer_of_peer = ps.peer.as_ref().map(Weak::as_ptr);
        let mutual = std::ptr::eq(Arc::as_ptr(&peer), self)
            || peer_of_peer.is_some_and(|p| std::ptr::eq(p, self));
        if (!mutual && ps.rx.msgs.len() > MAX_DGRAM_QLEN) || ps.rx.msgs.len() >= MAX_DGRAMS {
            return Ok(None);
        }
        let n = data.len();
        let charge = Some(self.charge(dgram_truesize(n)));
        ps.rx.bytes += n;
        ps.rx.msgs.push_back(Message {
            data: data[..n].to_vec(),
            consumed: 0,
            rights: std::mem::take(rights),
            creds,
            from: my_addr,
            _charge: charge,
        });
        drop(ps);
        peer.waiters.notify();
        peer.fasync.kill(crate::vfs::fasync::Reason::In);
        Ok(Some(n))
    }

    /// Charges `bytes` to this socket's send buffer until the message
    /// that carries the charge goes.
    fn charge(&self, bytes: usize) -> SndCharge {
        self.wmem.fetch_add(bytes, Ordering::Relaxed);
        SndCharge {
            wmem: self.wmem.clone(),
            bytes,
            sender: self.waiters.clone(),
        }
    }

    /// Whether at most a quarter of the send buffer is in use: the
    /// writer may go on (`unix_writable`), and one that found no room
    /// hears of room again (`unix_write_space`).
    fn has_room(&self, sndbuf: usize) -> bool {
        self.wmem.load(Ordering::Relaxed) * 4 <= sndbuf
    }

    /// A stream send, as `unix_stream_sendmsg`: the data goes in pieces
    /// (at most half the send buffer, and at most one page of head plus
    /// 32 KiB of fragments, each), each charged to the *sender's*
    /// `SO_SNDBUF` at its Linux `truesize` until the reader has consumed
    /// all of it. A piece may start while the charge is below the buffer
    /// (`sock_alloc_send_pskb`), so the last may overdraw it. The
    /// receiver's `SO_RCVBUF` plays no part. Descriptors ride on the
    /// first piece; an empty write queues nothing.
    #[allow(clippy::too_many_arguments)]
    fn send_stream(
        &self,
        peer: &Arc<UnixSocket>,
        mut ps: MutexGuard<'_, State>,
        data: &[u8],
        rights: &mut Vec<Arc<FileDescription>>,
        creds: Creds,
        from: UnixAddr,
        sndbuf: usize,
    ) -> Result<Option<usize>, Errno> {
        let piece_max = (sndbuf / 2).saturating_sub(64).clamp(1, STREAM_SKB_MAX);
        let mut sent = 0;
        while sent < data.len() {
            if self.wmem.load(Ordering::Relaxed) >= sndbuf {
                break;
            }
            let n = (data.len() - sent).min(piece_max);
            let charge = self.charge(stream_truesize(n));
            ps.rx.bytes += n;
            ps.rx.msgs.push_back(Message {
                data: data[sent..sent + n].to_vec(),
                consumed: 0,
                rights: std::mem::take(rights),
                creds,
                from: from.clone(),
                _charge: Some(charge),
            });
            sent += n;
        }
        drop(ps);
        if sent == 0 && !data.is_empty() {
            self.out_of_room();
            return Ok(None);
        }
        if sent > 0 {
            peer.waiters.notify();
            peer.fasync.kill(crate::vfs::fasync::Reason::In);
        }
        Ok(Some(sent))
    }

    /// A send found no room: with `O_ASYNC` descriptions (Linux's
    /// `SOCK_FASYNC`), room again will signal `POLL_OUT`.
    fn out_of_room(&self) {
        if !self.fasync.is_empty() {
            self.nospace.store(true, Ordering::Relaxed);
        }
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
                // As unix_stream_read_generic(): pieces are glued until
                // one that carries descriptors, which ends the read (its
                // descriptors are this read's, even when it is read only
                // in part).
                let mut i = 0;
                while out.data.len() < max {
                    let Some(m) = st.rx.msgs.get_mut(i) else {
                        break;
                    };
                    let avail = &m.data[m.consumed..];
                    let n = avail.len().min(max - out.data.len());
                    out.data.extend_from_slice(&avail[..n]);
                    if out.creds.is_none() {
                        out.creds = Some(m.creds);
                    }
                    let rights = !m.rights.is_empty();
                    if peek {
                        i += 1;
                    } else {
                        if rights {
                            out.rights = std::mem::take(&mut m.rights);
                        }
                        m.consumed += n;
                        if m.consumed < m.data.len() {
                            break;
                        }
                        st.rx.msgs.pop_front();
                    }
                    if rights {
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
                        _charge: None,
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
        // The writer of a connected stream or seqpacket socket that found
        // no room has some now if what it has queued fell to a quarter of
        // its send buffer (sock_wfree → unix_write_space).
        let writer = match (peek, self.kind) {
            (false, SockType::Stream | SockType::SeqPacket) => {
                st.peer.as_ref().and_then(Weak::upgrade)
            }
            _ => None,
        };
        drop(st);
        if !peek {
            // Datagram senders waiting for room in this queue.
            self.waiters.notify();
        }
        if let Some(w) = writer {
            let (wr_shut, sndbuf) = {
                let ws = w.state();
                (ws.wr_shut, ws.sndbuf)
            };
            if w.has_room(sndbuf) && w.nospace.swap(false, Ordering::Relaxed) && !wr_shut {
                w.fasync.kill(crate::vfs::fasync::Reason::Out);
            }
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
            {
                let mut ps = p.state();
                if how != 0 {
                    ps.rd_shut = true;
                }
                if how != 1 {
                    ps.wr_shut = true;
                }
            }
            // unix_shutdown(): the peer hears of this call's half only:
            // both directions is POLL_HUP, no more to read POLL_IN, no
            // more writes alone nothing.
            match how {
                2 => p.fasync.kill(crate::vfs::fasync::Reason::Hup),
                1 => p.fasync.kill(crate::vfs::fasync::Reason::In),
                _ => {}
            }
            p.waiters.notify();
        }
        self.waiters.notify();
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
        let sndbuf = st.sndbuf;
        drop(st);
        // Writable while a quarter of the send buffer at most is in use
        // (`unix_writable`), and, for datagrams towards a receiver not
        // connected back, while its queue has room (`unix_dgram_poll`).
        let own_room = self.has_room(sndbuf);
        let writable = match peer {
            Some(_) if self.kind == SockType::Stream => !wr_shut && own_room,
            Some(p) => {
                let ps = p.state();
                let mutual = ps
                    .peer
                    .as_ref()
                    .is_some_and(|q| std::ptr::eq(q.as_ptr(), self));
                !wr_shut
                    && (ps.rd_shut || (own_room && (mutual || ps.rx.msgs.len() <= MAX_DGRAM_QLEN)))
            }
            None => !connected_kind && !wr_shut && own_room,
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
                p.state().peer_gone = true;
                // unix_release_sock(): the peer can neither read more nor
                // write.
                p.fasync.kill(crate::vfs::fasync::Reason::Hup);
            }
            p.waiters.notify();
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
        self.waiters.notify();
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

/// An unnamed socket as a checkpoint holds it: its state, and its queued
/// messages (the unread part of each, and its sender's credentials).
#[derive(Clone, Debug)]
pub struct Saved {
    pub kind: SockType,
    pub peer_creds: Option<Creds>,
    pub rd_shut: bool,
    pub wr_shut: bool,
    pub peer_gone: bool,
    pub was_connected: bool,
    pub passcred: bool,
    pub rcvbuf: usize,
    pub sndbuf: usize,
    pub messages: Vec<(Vec<u8>, Creds)>,
}

impl UnixSocket {
    /// What a checkpoint saves of this socket, and its live peer; why not,
    /// for what is not saved yet (a bound or listening socket, passed
    /// descriptors, a datagram's sender address).
    pub fn saved(&self) -> Result<(Saved, Option<Arc<UnixSocket>>), &'static str> {
        let st = self.state();
        if st.addr != UnixAddr::Unnamed || st.peer_addr != UnixAddr::Unnamed {
            return Err("a bound or named Unix socket");
        }
        if st.listening.is_some() {
            return Err("a listening Unix socket");
        }
        if st.rx.msgs.iter().any(|m| !m.rights.is_empty()) {
            return Err("a Unix socket with descriptors queued in it");
        }
        if st.rx.msgs.iter().any(|m| m.from != UnixAddr::Unnamed) {
            return Err("a Unix socket with datagrams from a named socket");
        }
        let saved = Saved {
            kind: self.kind,
            peer_creds: st.peer_creds,
            rd_shut: st.rd_shut,
            wr_shut: st.wr_shut,
            peer_gone: st.peer_gone,
            was_connected: st.was_connected,
            passcred: st.passcred,
            rcvbuf: st.rcvbuf,
            sndbuf: st.sndbuf,
            messages: st
                .rx
                .msgs
                .iter()
                .map(|m| (m.data[m.consumed.min(m.data.len())..].to_vec(), m.creds))
                .collect(),
        };
        Ok((saved, st.peer.as_ref().and_then(Weak::upgrade)))
    }

    /// A socket as [`UnixSocket::saved`] described it, not yet connected
    /// ([`UnixSocket::link_restored`]).
    pub fn restored(s: &Saved, registry: Arc<Registry>) -> Arc<UnixSocket> {
        let sock = UnixSocket::new(s.kind, registry);
        {
            let mut st = sock.state();
            st.peer_creds = s.peer_creds;
            st.rd_shut = s.rd_shut;
            st.wr_shut = s.wr_shut;
            st.peer_gone = s.peer_gone;
            st.was_connected = s.was_connected;
            st.passcred = s.passcred;
            st.rcvbuf = s.rcvbuf.clamp(MIN_RCVBUF, 2 * BUF_MAX);
            st.sndbuf = s.sndbuf.clamp(MIN_SNDBUF, 2 * BUF_MAX);
            for (data, creds) in &s.messages {
                st.rx.bytes += data.len();
                st.rx.msgs.push_back(Message {
                    data: data.clone(),
                    consumed: 0,
                    rights: Vec::new(),
                    creds: *creds,
                    from: UnixAddr::Unnamed,
                    _charge: None,
                });
            }
        }
        sock
    }

    /// Points a restored socket at its restored peer.
    pub fn link_restored(self: &Arc<Self>, peer: &Arc<UnixSocket>) {
        self.state().peer = Some(Arc::downgrade(peer));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_pieces_cost_linux_truesize() {
        // unix_stream_sendmsg on x86-64: a 1000-byte write is one
        // 2304-byte skb (93 fit the default buffer), a page-sized one has
        // its bytes in a page fragment, the largest piece is 36544 bytes.
        for (len, cost) in [(1, 768), (1000, 2304), (3776, 4352), (4000, 4864)] {
            assert_eq!(stream_truesize(len), cost, "{len}");
        }
        assert_eq!(STREAM_SKB_MAX, 36544);
        assert_eq!(stream_truesize(STREAM_SKB_MAX), 4352 + 32768);
        assert_eq!(DEFAULT_BUF.div_ceil(stream_truesize(1000)), 93);
    }

    #[test]
    fn datagram_costs_match_linux_truesize() {
        // What the default 212992-byte buffer admits on x86-64 Linux:
        // 278 small datagrams, 93 of 1000 bytes, 26 of 4000, 4 of 64 KiB
        // (a send is let through while the total is below the buffer).
        for (len, cost, fits) in [
            (0, 768, 278),
            (100, 768, 278),
            (1000, 2304, 93),
            (4000, 8448, 26),
            (65536, 69888, 4),
        ] {
            assert_eq!(dgram_truesize(len), cost, "{len}");
            assert_eq!(DEFAULT_BUF.div_ceil(cost), fits, "{len}");
        }
    }
}
