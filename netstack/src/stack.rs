//! The stack: one smoltcp interface and its sockets behind one lock, the
//! socket layer the Sentry calls, and the timer thread.
//!
//! Progress model. Every operation that can change protocol state runs
//! [`Inner::pump`] before returning: poll rounds of the interface until no
//! packet is in flight, so on loopback a `send` has delivered its bytes into
//! the peer's receive buffer (and the peer's ACK back) before it returns, and
//! a `recv` that opens the window lets the sender's queued bytes flow at
//! once. Nothing waits for another thread on the data path. A background
//! thread per stack sleeps until smoltcp's next timer (`poll_at`; at most
//! one second) and pumps then, for retransmissions, delayed ACKs,
//! keep-alives and orphaned connections. After every pump the stack compares
//! each socket's [`Readiness`] with the last one reported and hands the
//! changed ids to the notifier, outside the lock.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::Duration;

use abi::Errno;
use smoltcp::iface::{Config, Interface, PollResult, SocketHandle, SocketSet};
use smoltcp::socket::{tcp, udp};
use smoltcp::time::{Duration as SDuration, Instant as SInstant};
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr, IpEndpoint, IpListenEndpoint};

use crate::device::{Loopback, SynGate, LOOPBACK_MTU};
use crate::policy::{canonical, Decision, Policy};
use crate::ports::{Binding, Owner, PortTable, Proto, Scope};
use crate::{
    Domain, Limits, Mode, Notifier, Progress, Readiness, RecvMeta, Shutdown, SockOpt, SockOptName,
    SocketId, SocketType, StackConfig, Stats, Wakeups,
};

/// Listening smoltcp sockets kept ready per listener at once. smoltcp has no
/// backlog: each listening socket takes one SYN. The stack keeps a few and
/// adds more between poll rounds (the SYN gate holds extra SYNs meanwhile),
/// so a listener with a backlog of 4096 does not cost 4096 sockets.
const SLOT_BURST: usize = 8;

/// Safety bound on poll rounds in one pump; the timer thread finishes what
/// is left.
const MAX_ROUNDS: usize = 10_000;

/// Longest the timer thread sleeps without looking.
const MAX_TIMER_SLEEP: Duration = Duration::from_secs(1);

/// Linux's `SOCK_MIN_RCVBUF`/`SOCK_MIN_SNDBUF`, near enough.
const MIN_BUFFER: usize = 4608;

/// Datagrams a UDP socket may queue in each direction.
const UDP_PACKETS: usize = 1024;

/// Errors a socket may hold for `MSG_ERRQUEUE` (Linux bounds the queue by
/// the receive buffer; ICMP errors are small, so this is generous).
const MAX_QUEUED_ERRORS: usize = 64;

/// How long a handshake may stay half-open (SYN received, our SYN-ACK
/// unanswered) before its slot listens again: Linux gives up after
/// `tcp_synack_retries` (5) retransmissions, about 63 seconds.
const SYN_RECV_TIMEOUT: Duration = Duration::from_secs(63);

/// When every slot of a listener's backlog is a half-open handshake, the
/// oldest one at least this old makes room for a new SYN (FreeBSD's
/// syncache drops its oldest entry on overflow; Linux answers with SYN
/// cookies). A peer on the sandbox's loopback completes its handshake in
/// microseconds, so only peers that never answer (a SYN flood from spoofed
/// addresses) lose their slot; one second is Linux's first SYN-ACK
/// retransmission.
const SYN_RECV_EVICT_AGE: Duration = Duration::from_secs(1);

/// What a new TCP socket's `TCP_KEEPIDLE`, `TCP_KEEPINTVL` and
/// `TCP_KEEPCNT` are: the `net.ipv4.tcp_keepalive_time`, `_intvl` and
/// `_probes` sysctls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeepaliveDefaults {
    /// idle time before the first probe
    pub time: Duration,
    /// time between probes
    pub intvl: Duration,
    /// probes unanswered before the connection is dropped
    pub probes: u8,
}

impl Default for KeepaliveDefaults {
    /// Linux's.
    fn default() -> Self {
        KeepaliveDefaults {
            time: Duration::from_secs(7200),
            intvl: Duration::from_secs(75),
            probes: 9,
        }
    }
}

/// A std duration as smoltcp's, capped at ten years so that adding it to
/// a timestamp can never overflow.
fn sdur(d: Duration) -> SDuration {
    const TEN_YEARS_US: u128 = 10 * 365 * 24 * 3600 * 1_000_000;
    SDuration::from_micros(d.as_micros().min(TEN_YEARS_US) as u64)
}

/// How often smoltcp sends keep-alives on an idle connection: the idle
/// time, but at most once a second (`tcp_keepalive_time` may be 0).
fn keep_alive_every(idle: Duration) -> SDuration {
    sdur(idle.max(Duration::from_secs(1)))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock is a bug, but must not take the whole
    // sandbox's network with it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The network stack of one sandbox. See the module docs for how it makes
/// progress.
pub struct Stack {
    inner: Mutex<Inner>,
    notifier: Mutex<Option<Notifier>>,
    /// Threads of the stack's own waiting on its sockets (the DNS server).
    waiters: Mutex<HashMap<SocketId, Arc<crate::dns::Waiter>>>,
    timer: Arc<Timer>,
    policy: Arc<Policy>,
    mode: Mode,
    progress: Progress,
}

struct Timer {
    state: Mutex<TimerState>,
    cond: Condvar,
}

#[derive(Default)]
struct TimerState {
    deadline: Option<std::time::Instant>,
    kicked: bool,
    shutdown: bool,
}

impl Stack {
    /// What the stack is attached to.
    pub fn mode(&self) -> &Mode {
        &self.mode
    }

    /// Builds the stack and starts its timer thread. The thread holds only
    /// a weak reference and ends when the stack is dropped.
    pub fn new(config: StackConfig) -> Arc<Stack> {
        let timer = Arc::new(Timer {
            state: Mutex::default(),
            cond: Condvar::new(),
        });
        let stack = Arc::new_cyclic(|me| Stack {
            inner: Mutex::new(Inner::new(&config, me.clone())),
            notifier: Mutex::new(None),
            waiters: Mutex::default(),
            timer: timer.clone(),
            policy: config.policy.clone(),
            mode: config.mode.clone(),
            progress: config.progress,
        });
        let weak = Arc::downgrade(&stack);
        let spawned = std::thread::Builder::new()
            .name("netstack-timer".into())
            .spawn(move || timer_loop(weak, timer));
        if let Err(e) = spawned {
            // Without the thread, operations still make progress; only
            // retransmissions wait for the next operation.
            tracing::warn!(error = %e, "netstack: cannot start timer thread");
        }
        stack
    }

    /// `net.ipv4.ip_local_port_range`: where binds to port 0 (and connects
    /// of unbound sockets) take their port.
    pub fn local_port_range(&self) -> (u16, u16) {
        lock(&self.inner).ports.range()
    }

    /// Sets [`Stack::local_port_range`]; `EINVAL` unless `0 < lo <= hi`.
    pub fn set_local_port_range(&self, lo: u16, hi: u16) -> Result<(), Errno> {
        if lo == 0 || lo > hi {
            return Err(Errno::EINVAL);
        }
        lock(&self.inner).ports.set_range(lo, hi);
        Ok(())
    }

    /// The `net.ipv4.tcp_keepalive_*` sysctls: what new TCP sockets'
    /// keepalive options are.
    pub fn keepalive_defaults(&self) -> KeepaliveDefaults {
        lock(&self.inner).keepalive
    }

    /// Sets [`Stack::keepalive_defaults`] (sockets made before keep theirs).
    pub fn set_keepalive_defaults(&self, k: KeepaliveDefaults) {
        lock(&self.inner).keepalive = k;
    }

    /// Sets the function called when socket readiness may have changed.
    pub fn set_notifier(&self, notifier: Notifier) {
        *lock(&self.notifier) = Some(notifier);
    }

    /// The egress policy (for the Sentry's DNS helper,
    /// [`Policy::note_resolution`], and for [`Policy::update`]).
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// Creates a socket. `ENOBUFS` beyond [`Limits::max_sockets`].
    pub fn socket(self: &Arc<Self>, domain: Domain, ty: SocketType) -> Result<Socket, Errno> {
        let id = lock(&self.inner).new_entry(domain == Domain::Inet6, ty)?;
        Ok(Socket {
            stack: self.clone(),
            id,
        })
    }

    /// Takes what happened to socket `id` since the last call (for a socket
    /// the notifier named). Nothing for an unknown id.
    pub fn take_wakeups(&self, id: SocketId) -> Wakeups {
        lock(&self.inner)
            .entries
            .get_mut(&id)
            .map(|e| std::mem::take(&mut e.wake))
            .unwrap_or_default()
    }

    /// Whether the guest wants signals for socket `id` (`O_ASYNC`, Linux's
    /// `SOCK_FASYNC`): a send that finds no room marks the socket only
    /// then, so that room again is a wake-up. Turning it on forgets the
    /// wake-ups so far.
    pub fn set_async(&self, id: SocketId, on: bool) {
        if let Some(e) = lock(&self.inner).entries.get_mut(&id) {
            e.fasync = on;
            if on {
                e.wake = Wakeups::default();
                e.woken = false;
            } else {
                e.nospace = false;
            }
        }
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        let g = lock(&self.inner);
        Stats {
            sockets: g.entries.len(),
            internal_sockets: g.alloc.len(),
            orphans: g.orphans.len(),
            buffer_bytes: g.buffer_bytes,
        }
    }

    /// Runs `f` on socket `id`, then the protocol, then notifies.
    fn op<R>(
        &self,
        id: SocketId,
        f: impl FnOnce(&mut Inner, &mut Entry) -> Result<R, Errno>,
    ) -> Result<R, Errno> {
        let (r, changed, next) = {
            let mut g = lock(&self.inner);
            let r = g.with_entry(id, f);
            // What the operation consumed is not an arrival: the level
            // comes down before the protocol may bring more.
            g.lower_rx_level(id);
            if self.progress == Progress::Inline {
                g.pump();
                let changed = g.collect_changes();
                (r, changed, g.next_poll())
            } else {
                (r, g.collect_changes(), Some(std::time::Instant::now()))
            }
        };
        self.kick_timer(next);
        self.notify(&changed);
        r
    }

    /// A reply from outside for UDP socket `id` (called by its relay's
    /// reader thread): it enters the stack as a packet on the link.
    fn udp_relay_deliver(&self, id: SocketId, from: SocketAddr, payload: &[u8]) {
        let (changed, next) = {
            let mut g = lock(&self.inner);
            if !g.inject_udp(id, from, payload) {
                return;
            }
            if self.progress == Progress::Inline {
                g.pump();
                (g.collect_changes(), g.next_poll())
            } else {
                (g.collect_changes(), Some(std::time::Instant::now()))
            }
        };
        self.kick_timer(next);
        self.notify(&changed);
    }

    /// Feeds `packet` to the interface as if the link had received it
    /// (tests of what arrives from outside), then runs the protocol.
    #[cfg(test)]
    pub(crate) fn receive_from_link(&self, packet: Vec<u8>) {
        let (changed, next) = {
            let mut g = lock(&self.inner);
            g.device.inject(packet);
            g.pump();
            (g.collect_changes(), g.next_poll())
        };
        self.kick_timer(next);
        self.notify(&changed);
    }

    /// A relayed connection's state changed (called by its threads).
    fn relay_changed(&self) {
        let changed = lock(&self.inner).collect_changes();
        self.notify(&changed);
    }

    /// Runs `f` on socket `id` without running the protocol (queries).
    fn query<R>(
        &self,
        id: SocketId,
        f: impl FnOnce(&mut Inner, &mut Entry) -> R,
    ) -> Result<R, Errno> {
        lock(&self.inner).with_entry(id, |s, e| Ok(f(s, e)))
    }

    /// Wakes `w` whenever socket `id` (a socket of the stack's own, such
    /// as the DNS server's) may have changed.
    pub(crate) fn add_waiter(&self, id: SocketId, w: Arc<crate::dns::Waiter>) {
        lock(&self.waiters).insert(id, w);
    }

    pub(crate) fn remove_waiter(&self, id: SocketId) {
        lock(&self.waiters).remove(&id);
    }

    fn notify(&self, changed: &[SocketId]) {
        if changed.is_empty() {
            return;
        }
        {
            let w = lock(&self.waiters);
            if !w.is_empty() {
                for id in changed {
                    if let Some(w) = w.get(id) {
                        w.wake();
                    }
                }
            }
        }
        let n = lock(&self.notifier).clone();
        if let Some(n) = n {
            n(changed);
        }
    }

    fn kick_timer(&self, next: Option<std::time::Instant>) {
        let next = match (self.progress, next) {
            (Progress::Background, _) => std::time::Instant::now(),
            (Progress::Inline, Some(n)) => n,
            (Progress::Inline, None) => return,
        };
        let mut st = lock(&self.timer.state);
        if st.deadline.is_none_or(|d| next < d) {
            st.deadline = Some(next);
            st.kicked = true;
            self.timer.cond.notify_one();
        }
    }

    /// One timer tick: pump, notify, and say when to come back.
    fn tick(&self) -> Duration {
        let (changed, next) = {
            let mut g = lock(&self.inner);
            g.pump();
            (g.collect_changes(), g.next_poll())
        };
        self.notify(&changed);
        next.map_or(MAX_TIMER_SLEEP, |t| {
            t.saturating_duration_since(std::time::Instant::now())
                .min(MAX_TIMER_SLEEP)
        })
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        let mut st = lock(&self.timer.state);
        st.shutdown = true;
        self.timer.cond.notify_all();
    }
}

fn timer_loop(stack: Weak<Stack>, timer: Arc<Timer>) {
    loop {
        let sleep = match stack.upgrade() {
            Some(s) => s.tick(),
            None => return,
        };
        let until = std::time::Instant::now() + sleep;
        let mut st = lock(&timer.state);
        st.deadline = Some(until);
        loop {
            if st.shutdown {
                return;
            }
            if st.kicked {
                st.kicked = false;
                break;
            }
            let now = std::time::Instant::now();
            let Some(d) = st.deadline else { break };
            if now >= d {
                break;
            }
            st = timer
                .cond
                .wait_timeout(st, d - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        // While pumping, the next deadline is unknown: operations kick.
        st.deadline = None;
    }
}

/// A socket of a [`Stack`]. Dropping it closes it (`close(2)`: a graceful
/// FIN, or a RST with `SO_LINGER` 0 or unread data, as Linux does).
pub struct Socket {
    stack: Arc<Stack>,
    id: SocketId,
}

impl std::fmt::Debug for Socket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Socket({})", self.id.0)
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        let (changed, next) = {
            let mut g = lock(&self.stack.inner);
            g.close(self.id);
            if self.stack.progress == Progress::Inline {
                g.pump();
            }
            (g.collect_changes(), g.next_poll())
        };
        self.stack.kick_timer(next);
        self.stack.notify(&changed);
    }
}

impl Socket {
    /// This socket's id, as the notifier reports it.
    pub fn id(&self) -> SocketId {
        self.id
    }

    /// The stack it belongs to.
    pub fn stack(&self) -> &Arc<Stack> {
        &self.stack
    }

    /// Closes the socket (same as dropping it).
    pub fn close(self) {}

    /// `bind(2)`. Errors: `EINVAL` (already bound), `EAFNOSUPPORT`,
    /// `EADDRNOTAVAIL` (not an address of this stack), `EADDRINUSE`.
    pub fn bind(&self, addr: SocketAddr) -> Result<(), Errno> {
        self.stack.op(self.id, |s, e| s.bind(e, addr))
    }

    /// `listen(2)`; binds an ephemeral port first if unbound. The backlog is
    /// clamped to `[0, max_backlog]`; as Linux, `backlog + 1` connections
    /// may wait for `accept`, and SYNs beyond that are dropped (the client
    /// retries).
    pub fn listen(&self, backlog: i32) -> Result<(), Errno> {
        self.stack.op(self.id, |s, e| s.listen(e, backlog))
    }

    /// `accept(2)`: `EAGAIN` when no connection waits, `EINVAL` when not
    /// listening.
    pub fn accept(&self) -> Result<(Socket, SocketAddr), Errno> {
        let (id, peer) = self.stack.op(self.id, |s, e| s.accept(e))?;
        Ok((
            Socket {
                stack: self.stack.clone(),
                id,
            },
            peer,
        ))
    }

    /// `connect(2)`. TCP: always non-blocking; returns `EINPROGRESS`, after
    /// which readiness turns `writable` and [`Socket::take_error`] gives the
    /// outcome (`None`, `ECONNREFUSED`, `ETIMEDOUT`). Calling it again
    /// returns `EALREADY` while in progress, `Ok` once after success, then
    /// `EISCONN`, or the pending error after a failure (Linux's
    /// `__inet_stream_connect`). UDP: sets the default peer.
    /// `ENETUNREACH` for destinations outside the sandbox in loopback mode.
    pub fn connect(&self, addr: SocketAddr) -> Result<(), Errno> {
        self.stack.op(self.id, |s, e| s.connect(e, addr))
    }

    /// Names the guest process behind the socket's next connect or send,
    /// for the egress log.
    pub fn set_origin(&self, pid: i32, command: &str) {
        let _ = self.stack.op(self.id, |_, e| {
            if e.origin.pid != pid || e.origin.command != command {
                e.origin = crate::audit::Origin {
                    pid,
                    command: command.to_string(),
                };
            }
            Ok(())
        });
    }

    /// `connect(2)` with `AF_UNSPEC` on a UDP socket: forget the peer.
    pub fn disconnect(&self) -> Result<(), Errno> {
        self.stack.op(self.id, |_, e| match &mut e.state {
            State::Udp(u) => {
                u.peer = None;
                Ok(())
            }
            _ => Err(Errno::EOPNOTSUPP),
        })
    }

    /// `send(2)`: bytes queued, `EAGAIN` when the send buffer is full,
    /// `EPIPE` after `shutdown(Write)` or on an unconnected TCP socket
    /// (the Sentry raises `SIGPIPE` unless `MSG_NOSIGNAL`), a pending
    /// `ECONNRESET` first after a reset.
    pub fn send(&self, buf: &[u8]) -> Result<usize, Errno> {
        self.send_inner(buf, None)
    }

    /// `sendto(2)`. TCP ignores `addr` (as Linux's `tcp_sendmsg`). UDP
    /// binds an ephemeral port if needed; `EMSGSIZE` beyond one packet.
    /// In `Mode::Egress`, a datagram to a destination outside the sandbox
    /// goes out through a host socket if the policy allows it, and fails
    /// with `EPERM` at once if not (what Linux's `sendto` answers when a
    /// firewall's OUTPUT rule drops the datagram); replies come back to
    /// this socket.
    pub fn send_to(&self, buf: &[u8], addr: SocketAddr) -> Result<usize, Errno> {
        self.send_inner(buf, Some(addr))
    }

    fn send_inner(&self, buf: &[u8], to: Option<SocketAddr>) -> Result<usize, Errno> {
        match self.stack.op(self.id, |s, e| s.send(e, buf, to))? {
            Sent::Queued(n) => Ok(n),
            // The host send may wait for buffer room: never under the lock.
            Sent::Outside(sock, dest) => crate::udp_relay::send(&sock, buf, dest),
        }
    }

    /// `recv(2)`: bytes read; 0 at end of stream; `EAGAIN` when nothing is
    /// there yet; with `peek`, the data stays (`MSG_PEEK`). UDP: one
    /// datagram, truncated to `buf` (see [`Socket::recv_from`] for its size).
    pub fn recv(&self, buf: &mut [u8], peek: bool) -> Result<usize, Errno> {
        self.recv_from(buf, peek).map(|m| m.len)
    }

    /// `recvfrom(2)`, with the datagram's full size for `MSG_TRUNC`.
    pub fn recv_from(&self, buf: &mut [u8], peek: bool) -> Result<RecvMeta, Errno> {
        self.stack.op(self.id, |s, e| s.recv(e, buf, peek))
    }

    /// `shutdown(2)`. `ENOTCONN` when not connected.
    pub fn shutdown(&self, how: Shutdown) -> Result<(), Errno> {
        self.stack.op(self.id, |s, e| s.shutdown(e, how))
    }

    /// A listening TCP socket as a checkpoint saves it: its address and
    /// backlog. `None` for any other socket, or one with connections
    /// waiting or being made (they are not saved yet).
    pub fn idle_listener(&self) -> Result<Option<(SocketAddr, i32)>, Errno> {
        self.stack.query(self.id, |_, e| match (&e.state, e.local) {
            (State::Listen(l), Some(local)) if l.ready.is_empty() && l.half_open.is_empty() => {
                Some((local, l.capacity.saturating_sub(1) as i32))
            }
            _ => None,
        })
    }

    /// `getsockname(2)`: the unspecified address and port 0 before bind.
    pub fn local_addr(&self) -> Result<SocketAddr, Errno> {
        self.stack.query(self.id, |s, e| s.local_addr(e))
    }

    /// `getpeername(2)`: `ENOTCONN` unless connected.
    pub fn peer_addr(&self) -> Result<SocketAddr, Errno> {
        self.stack.query(self.id, |_, e| e.peer())?
    }

    /// `setsockopt(2)`. `ENOPROTOOPT` for an option that does not apply
    /// (TCP options on UDP, `IPV6_V6ONLY` on `AF_INET`).
    pub fn set_option(&self, opt: SockOpt) -> Result<(), Errno> {
        self.stack.op(self.id, |s, e| s.set_option(e, opt))
    }

    /// `getsockopt(2)`.
    pub fn option(&self, name: SockOptName) -> Result<SockOpt, Errno> {
        self.stack.query(self.id, |_, e| e.option(name))?
    }

    /// `getsockopt(IP_PKTOPTIONS)`'s values (see [`crate::PktOptions`]).
    pub fn pkt_options(&self) -> Result<crate::PktOptions, Errno> {
        self.stack.query(self.id, |s, e| {
            let local = match canonical(s.local_addr(e).ip()) {
                IpAddr::V4(a) => a,
                IpAddr::V6(a) if a.is_unspecified() => Ipv4Addr::UNSPECIFIED,
                IpAddr::V6(_) => Ipv4Addr::new(127, 0, 0, 6),
            };
            crate::PktOptions {
                local,
                ifindex: e.opts.mc_index,
                ttl: e.opts.mc_ttl,
                tos: e.opts.rcv_tos,
            }
        })
    }

    /// `SO_ERROR`: the pending error, cleared by reading it (this also ends
    /// a failed connect attempt: the next `connect` starts a new one).
    pub fn take_error(&self) -> Result<Option<Errno>, Errno> {
        self.stack.op(self.id, |_, e| {
            // Collected: a later connect(2) starts afresh, as after a
            // blocking connect that failed.
            e.connect_failed = false;
            if let State::Relay(r) = &e.state {
                let err = r.take_error();
                if r.failed() {
                    e.state = State::Idle;
                }
                return Ok(err.or(e.error.take()));
            }
            Ok(e.error.take())
        })
    }

    /// `FIONREAD`: bytes queued (TCP) or the next datagram's size (UDP).
    pub fn bytes_readable(&self) -> Result<usize, Errno> {
        self.stack.query(self.id, |s, e| s.bytes_readable(e))
    }

    /// `recvmsg(MSG_ERRQUEUE)`: the oldest error queued for `IP_RECVERR`,
    /// or `EAGAIN`. It leaves the queue even under `MSG_PEEK`, as in Linux.
    pub fn recv_error(&self) -> Result<crate::QueuedError, Errno> {
        self.stack.op(self.id, |s, e| s.recv_error(e))
    }

    /// How many edges the socket has had: arrivals (data, a datagram, a
    /// connection on a listener, also when some were waiting already) and
    /// changes of its readiness. Edge-triggered epoll reports a socket
    /// again when this moved, whatever the readiness.
    pub fn edges(&self) -> Result<u64, Errno> {
        self.stack.query(self.id, |_, e| e.edges)
    }

    /// Current poll state.
    pub fn readiness(&self) -> Result<Readiness, Errno> {
        self.stack.query(self.id, |s, e| s.readiness(e))
    }
}

// ---------------------------------------------------------------------------
// The state behind the lock.

struct Inner {
    iface: Interface,
    device: Loopback,
    sockets: SocketSet<'static>,
    entries: BTreeMap<SocketId, Entry>,
    listeners: BTreeSet<SocketId>,
    ports: PortTable,
    orphans: Vec<Orphan>,
    /// Buffer bytes of every smoltcp socket we own.
    alloc: HashMap<SocketHandle, usize>,
    buffer_bytes: usize,
    next_id: u64,
    limits: Limits,
    mode: Mode,
    /// The link's addresses (`Mode::Egress`; empty otherwise), as the
    /// interface table holds them.
    link: crate::Link,
    epoch: std::time::Instant,
    /// The stack itself, for the wake-ups of relayed connections.
    me: Weak<Stack>,
    policy: Arc<Policy>,
    report_refusals: bool,
    audit: Option<Arc<crate::audit::AuditLog>>,
    tls: Option<Arc<crate::tls::Interceptor>>,
    /// The connection each TOS-marked smoltcp socket was marked for
    /// (see `mark_tcp`).
    tcp_marked: HashMap<SocketHandle, (SocketAddr, SocketAddr)>,
    /// what new TCP sockets' keepalive options are
    keepalive: KeepaliveDefaults,
}

fn proto(ty: SocketType) -> &'static str {
    match ty {
        SocketType::Stream => "tcp",
        SocketType::Datagram => "udp",
    }
}

/// A closed connection still exchanging FINs (or its RST) with the peer.
struct Orphan {
    handle: SocketHandle,
    port: Option<u16>,
    deadline: SInstant,
    /// Created (or aborted) since the last pump: it has not had a chance to
    /// send its last segment yet.
    fresh: bool,
}

struct Entry {
    id: SocketId,
    ty: SocketType,
    v6: bool,
    opts: Opts,
    /// Bound address, in the socket's own family (IPv4-mapped on a dual
    /// stack socket).
    local: Option<SocketAddr>,
    /// Whether `local` holds a port-table binding (accepted sockets share
    /// their listener's and hold none).
    bound: bool,
    /// Bound by connect/listen/sendto rather than bind(2): released when
    /// the connection attempt fails.
    autobound: bool,
    error: Option<Errno>,
    /// A failed non-blocking connect not yet collected by connect(2).
    connect_failed: bool,
    shut_rd: bool,
    shut_wr: bool,
    last: Readiness,
    /// bytes (or, on a listener, connections) waiting to be read when the
    /// changes were last collected: a higher level later is an arrival
    rx_level: usize,
    /// a send found no room (`SOCKWQ_ASYNC_NOSPACE`): room again is a
    /// wake-up
    nospace: bool,
    /// the guest asked for signals (`SOCK_FASYNC`): only then does a
    /// send out of room set `nospace`
    fasync: bool,
    /// wake-ups not yet taken
    wake: Wakeups,
    /// `wake` gained something since the changes were last collected
    woken: bool,
    /// arrivals and readiness changes so far: each one is an edge for
    /// edge-triggered epoll, as each of Linux's socket callbacks is
    edges: u64,
    /// errors for `MSG_ERRQUEUE` (`IP_RECVERR`), oldest first
    errqueue: VecDeque<crate::QueuedError>,
    /// The guest process that last connected or sent (the egress log's).
    origin: crate::audit::Origin,
    state: State,
}

impl Entry {
    /// A socket with nothing yet bound, queued or reported.
    fn new(
        id: SocketId,
        ty: SocketType,
        v6: bool,
        opts: Opts,
        local: Option<SocketAddr>,
        state: State,
    ) -> Self {
        Entry {
            id,
            ty,
            v6,
            opts,
            local,
            bound: false,
            autobound: false,
            error: None,
            connect_failed: false,
            shut_rd: false,
            shut_wr: false,
            last: Readiness::default(),
            rx_level: 0,
            nospace: false,
            fasync: false,
            wake: Wakeups::default(),
            woken: false,
            edges: 0,
            errqueue: VecDeque::new(),
            origin: crate::audit::Origin::default(),
            state,
        }
    }
}

#[derive(Clone, Debug)]
struct Opts {
    reuse_addr: bool,
    reuse_port: bool,
    keepalive: bool,
    keepidle: Duration,
    keepintvl: Duration,
    keepcnt: u8,
    rcvbuf: usize,
    sndbuf: usize,
    linger: Option<Duration>,
    nodelay: bool,
    v6only: bool,
    /// `IP_TTL`, `IPV6_UNICAST_HOPS`
    ttl: u8,
    hop_limit: u8,
    /// `IP_TOS`, `IPV6_TCLASS`
    tos: u8,
    tclass: u8,
    /// `IP_MULTICAST_TTL` (stored only: no multicast here); an accepted
    /// IPv4 connection's is its handshake's TTL (`IP_PKTOPTIONS`)
    mc_ttl: u8,
    /// The interface an accepted IPv4 connection came in on, and the TOS
    /// of its handshake (`IP_PKTOPTIONS`)
    mc_index: i32,
    rcv_tos: u8,
    /// `IP_RECVERR`/`IPV6_RECVERR`
    recverr: bool,
}

impl Opts {
    /// The hop limit and TOS byte of a packet to an IPv4 (`v4`) or IPv6
    /// destination: a dual-stack socket uses its IPv4 options for
    /// v4-mapped peers, as Linux does.
    fn header(&self, v4: bool) -> (u8, u8) {
        if v4 {
            (self.ttl, self.tos)
        } else {
            (self.hop_limit, self.tclass)
        }
    }

    /// smoltcp's hop limit for a TCP connection. smoltcp refuses 0 (which
    /// Linux allows for IPv6 and delivers on loopback): such a connection
    /// keeps the default, which nothing inside the sandbox can observe.
    fn tcp_hop_limit(&self, v4: bool) -> Option<u8> {
        Some(self.header(v4).0).filter(|&h| h != 0)
    }
}

enum State {
    Idle,
    Listen(Listener),
    Conn(Conn),
    Udp(Udp),
    /// A TCP connection to an allowed destination outside the sandbox,
    /// carried by a host connection (`Mode::Egress`).
    Relay(crate::relay::Relay),
}

struct Listener {
    /// Connections that may wait: established in `ready` plus handshakes in
    /// progress.
    capacity: usize,
    /// smoltcp sockets in LISTEN or SYN-RECEIVED.
    slots: Vec<SocketHandle>,
    /// When each slot in SYN-RECEIVED was first seen there.
    half_open: HashMap<SocketHandle, SInstant>,
    /// Established connections waiting for accept.
    ready: VecDeque<SocketHandle>,
}

struct Conn {
    handle: SocketHandle,
    peer: SocketAddr,
    established: bool,
    /// connect(2) already returned success once.
    reported: bool,
    peer_fin: bool,
    reset: bool,
    started: SInstant,
}

struct Udp {
    handle: Option<SocketHandle>,
    peer: Option<SocketAddr>,
    /// Host sockets for destinations outside the sandbox (`Mode::Egress`),
    /// opened by the first allowed datagram.
    relay: Option<crate::udp_relay::UdpRelay>,
    /// Destinations outside already in the egress log (the first datagram
    /// to each is an attempt; at most [`MAX_LOGGED_FLOWS`] are kept).
    logged: Vec<SocketAddr>,
}

/// Destinations per UDP socket whose first datagram is logged.
const MAX_LOGGED_FLOWS: usize = 64;

/// What [`Inner::send`] did.
enum Sent {
    /// Bytes queued in the stack.
    Queued(usize),
    /// A datagram for outside the sandbox, allowed: the caller sends it
    /// through this host socket once the lock is released.
    Outside(Arc<std::net::UdpSocket>, SocketAddr),
}

fn seed() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x6e65_7473_7461_636b);
    h.finish()
}

/// The sandbox's address on the link to the outside that `do` sets up
/// (`Mode::Egress` with the default [`crate::Link`]), as `getsockname`
/// shows it on a relayed connection.
pub const EGRESS_ADDR_V4: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 15);
/// The IPv6 counterpart of [`EGRESS_ADDR_V4`] (a unique local address).
pub const EGRESS_ADDR_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0x15);

/// Whether `ip` (canonical) is an address of the loopback interface: all
/// of 127.0.0.0/8, as Linux's `local 127.0.0.0/8 dev lo` route makes it,
/// and `::1` alone (IPv6 has no such route).
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_loopback(),
        IpAddr::V6(a) => a == Ipv6Addr::LOCALHOST,
    }
}

/// Loopback's broadcast address (Linux's `broadcast 127.255.255.255 dev
/// lo` route): one may bind to it, but neither connect a TCP socket nor
/// send a datagram there without `SO_BROADCAST`, which the netstack does
/// not offer.
const LOOPBACK_BROADCAST: Ipv4Addr = Ipv4Addr::new(127, 255, 255, 255);

/// The source address of a packet from an unbound socket to `dest`, one of
/// the stack's own addresses: 127.0.0.1 for all of loopback's IPv4 range
/// (the preferred source of Linux's `local 127.0.0.0/8` route), else the
/// destination itself (the local table's route to each address names it
/// as its own source).
fn local_source(dest: IpAddr) -> IpAddr {
    match dest {
        IpAddr::V4(a) if a.is_loopback() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        _ => dest,
    }
}

/// Whether a socket bound to `bound` (canonical) sends from the address
/// the route names rather than its own: unbound, or bound to a broadcast
/// address, as `inet_bind` leaves `inet_saddr` zero for one.
fn picks_source(bound: IpAddr) -> bool {
    bound.is_unspecified() || bound == IpAddr::V4(LOOPBACK_BROADCAST)
}

fn to_ip(a: IpAddress) -> IpAddr {
    match a {
        IpAddress::Ipv4(a) => IpAddr::V4(a),
        IpAddress::Ipv6(a) => IpAddr::V6(a),
    }
}

/// `addr` as a socket of family `v6` reports it.
fn family_form(v6: bool, addr: SocketAddr) -> SocketAddr {
    match (v6, addr.ip()) {
        (true, IpAddr::V4(a)) => SocketAddr::new(IpAddr::V6(a.to_ipv6_mapped()), addr.port()),
        _ => addr,
    }
}

fn endpoint_addr(ep: IpEndpoint) -> SocketAddr {
    SocketAddr::new(to_ip(ep.addr), ep.port)
}

fn from_endpoint(v6: bool, ep: IpEndpoint) -> SocketAddr {
    family_form(v6, SocketAddr::new(to_ip(ep.addr), ep.port))
}

fn unspecified(v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    }
}

fn listen_endpoint(local: SocketAddr) -> IpListenEndpoint {
    let ip = canonical(local.ip());
    IpListenEndpoint {
        addr: if ip.is_unspecified() {
            None
        } else {
            Some(ip.into())
        },
        port: local.port(),
    }
}

impl Entry {
    fn proto(&self) -> Proto {
        match self.ty {
            SocketType::Stream => Proto::Tcp,
            SocketType::Datagram => Proto::Udp,
        }
    }

    fn scope(&self, ip: IpAddr) -> Scope {
        Scope::of(self.v6, self.opts.v6only, ip)
    }

    /// Checks `addr` against the socket's family and returns it in
    /// canonical form (IPv4 for an IPv4-mapped address).
    fn canonical_addr(&self, addr: SocketAddr, connecting: bool) -> Result<SocketAddr, Errno> {
        match (self.v6, addr) {
            (false, SocketAddr::V4(_)) => Ok(addr),
            (false, SocketAddr::V6(_)) | (true, SocketAddr::V4(_)) => Err(Errno::EAFNOSUPPORT),
            (true, SocketAddr::V6(a)) => match a.ip().to_ipv4_mapped() {
                Some(v4) if self.opts.v6only => {
                    let _ = v4;
                    Err(if connecting {
                        Errno::ENETUNREACH
                    } else {
                        Errno::EINVAL
                    })
                }
                Some(v4) => Ok(SocketAddr::new(IpAddr::V4(v4), a.port())),
                None => Ok(addr),
            },
        }
    }

    fn peer(&self) -> Result<SocketAddr, Errno> {
        match &self.state {
            State::Conn(c) if c.established => Ok(c.peer),
            State::Relay(r) if r.established() => Ok(family_form(self.v6, r.peer)),
            State::Udp(Udp { peer: Some(p), .. }) => Ok(*p),
            _ => Err(Errno::ENOTCONN),
        }
    }

    fn option(&self, name: SockOptName) -> Result<SockOpt, Errno> {
        let o = &self.opts;
        let tcp_only = |v| {
            if self.ty == SocketType::Stream {
                Ok(v)
            } else {
                Err(Errno::ENOPROTOOPT)
            }
        };
        match name {
            SockOptName::ReuseAddr => Ok(SockOpt::ReuseAddr(o.reuse_addr)),
            SockOptName::ReusePort => Ok(SockOpt::ReusePort(o.reuse_port)),
            SockOptName::KeepAlive => Ok(SockOpt::KeepAlive(o.keepalive)),
            SockOptName::RcvBuf => Ok(SockOpt::RcvBuf(o.rcvbuf)),
            SockOptName::SndBuf => Ok(SockOpt::SndBuf(o.sndbuf)),
            SockOptName::Linger => Ok(SockOpt::Linger(o.linger)),
            SockOptName::NoDelay => tcp_only(SockOpt::NoDelay(o.nodelay)),
            SockOptName::KeepIdle => tcp_only(SockOpt::KeepIdle(o.keepidle)),
            SockOptName::KeepIntvl => tcp_only(SockOpt::KeepIntvl(o.keepintvl)),
            SockOptName::KeepCnt => tcp_only(SockOpt::KeepCnt(o.keepcnt)),
            SockOptName::V6Only if self.v6 => Ok(SockOpt::V6Only(o.v6only)),
            SockOptName::V6Only => Err(Errno::ENOPROTOOPT),
            SockOptName::Ttl => Ok(SockOpt::Ttl(o.ttl)),
            SockOptName::Tos => Ok(SockOpt::Tos(o.tos)),
            SockOptName::MulticastTtl => Ok(SockOpt::MulticastTtl(o.mc_ttl)),
            SockOptName::RecvErr => Ok(SockOpt::RecvErr(o.recverr)),
            SockOptName::HopLimit | SockOptName::TrafficClass if !self.v6 => {
                Err(Errno::ENOPROTOOPT)
            }
            SockOptName::HopLimit => Ok(SockOpt::HopLimit(o.hop_limit)),
            SockOptName::TrafficClass => Ok(SockOpt::TrafficClass(o.tclass)),
        }
    }
}

impl Inner {
    fn new(config: &StackConfig, me: Weak<Stack>) -> Inner {
        let mut device = Loopback::new();
        let seed = seed();
        let mut cfg = Config::new(HardwareAddress::Ip);
        cfg.random_seed = seed;
        let epoch = std::time::Instant::now();
        let mut iface = Interface::new(cfg, &mut device, SInstant::from_micros(0));
        // All of 127.0.0.0/8 is local, as on Linux, where smoltcp would
        // take only the addresses in its table: with AnyIP it accepts a
        // packet for another address when a route to it goes through one
        // of its own, so one route for the prefix through 127.0.0.1 does.
        // Only the stack's own packets ever reach the interface (nothing
        // enters from outside but the relays' replies, addressed to a
        // socket), so this widens nothing.
        iface.set_any_ip(true);
        iface.routes_mut().update(|routes| {
            let _ = routes.push(smoltcp::iface::Route {
                cidr: IpCidr::new(IpAddress::v4(127, 0, 0, 0), 8),
                via_router: IpAddress::v4(127, 0, 0, 1),
                preferred_until: None,
                expires_at: None,
            });
        });
        let link = match config.mode {
            Mode::Egress => crate::Link {
                addrs: config.link.usable().collect(),
            },
            Mode::Loopback => crate::Link { addrs: Vec::new() },
        };
        iface.update_ip_addrs(|addrs| {
            // Eight addresses fit the table (smoltcp's
            // `iface-max-addr-count-8`, which `MAX_LINK_ADDRS` follows).
            // Loopback first: smoltcp's IPv4 source for an unbound socket
            // is the first IPv4 address.
            let _ = addrs.push(IpCidr::new(IpAddress::v4(127, 0, 0, 1), 8));
            let _ = addrs.push(IpCidr::new(IpAddress::v6(0, 0, 0, 0, 0, 0, 0, 1), 128));
            // The addresses of the guest's link out are the stack's own
            // too: a program may bind and listen there and reach itself,
            // as Linux delivers to a local address through its loopback.
            for &(a, prefix) in &link.addrs {
                let _ = addrs.push(IpCidr::new(a.into(), prefix));
            }
        });
        Inner {
            iface,
            device,
            sockets: SocketSet::new(Vec::new()),
            entries: BTreeMap::new(),
            listeners: BTreeSet::new(),
            ports: PortTable::new(seed),
            orphans: Vec::new(),
            alloc: HashMap::new(),
            buffer_bytes: 0,
            next_id: 1,
            limits: config.limits.clone(),
            mode: config.mode.clone(),
            link,
            epoch,
            me,
            policy: config.policy.clone(),
            report_refusals: config.report_refusals,
            audit: config.audit.clone(),
            tls: config.tls.clone(),
            tcp_marked: HashMap::new(),
            keepalive: KeepaliveDefaults::default(),
        }
    }

    /// Whether `ip` (canonical) is an address of this stack: loopback's,
    /// and in `Mode::Egress` its link's (see [`crate::Link`]).
    fn is_local(&self, ip: IpAddr) -> bool {
        is_loopback(ip) || self.link.addrs.iter().any(|&(a, _)| a == ip)
    }

    fn now(&self) -> SInstant {
        SInstant::from_micros(self.epoch.elapsed().as_micros().min(i64::MAX as u128) as i64)
    }

    fn new_entry(&mut self, v6: bool, ty: SocketType) -> Result<SocketId, Errno> {
        if self.entries.len() >= self.limits.max_sockets {
            return Err(Errno::ENOBUFS);
        }
        let buf = match ty {
            SocketType::Stream => self.limits.tcp_buffer,
            SocketType::Datagram => self.limits.udp_buffer,
        };
        let id = SocketId(self.next_id);
        self.next_id += 1;
        let state = match ty {
            SocketType::Stream => State::Idle,
            SocketType::Datagram => State::Udp(Udp {
                handle: None,
                peer: None,
                relay: None,
                logged: Vec::new(),
            }),
        };
        let opts = Opts {
            reuse_addr: false,
            reuse_port: false,
            keepalive: false,
            keepidle: self.keepalive.time,
            keepintvl: self.keepalive.intvl,
            keepcnt: self.keepalive.probes,
            rcvbuf: buf,
            sndbuf: buf,
            linger: None,
            nodelay: false,
            v6only: false,
            ttl: crate::HOP_LIMIT,
            hop_limit: crate::HOP_LIMIT,
            tos: crate::TOS,
            tclass: crate::TOS,
            mc_ttl: 1,
            mc_index: 0,
            rcv_tos: 0,
            recverr: false,
        };
        let mut e = Entry::new(id, ty, v6, opts, None, state);
        e.last = self.readiness(&e);
        self.entries.insert(id, e);
        Ok(id)
    }

    fn with_entry<R>(
        &mut self,
        id: SocketId,
        f: impl FnOnce(&mut Inner, &mut Entry) -> Result<R, Errno>,
    ) -> Result<R, Errno> {
        let mut e = self.entries.remove(&id).ok_or(Errno::EBADF)?;
        let r = f(self, &mut e);
        self.entries.insert(id, e);
        r
    }

    // --- smoltcp socket allocation -------------------------------------

    fn reserve(&mut self, bytes: usize) -> Result<(), Errno> {
        if self.alloc.len() >= self.limits.max_sockets.saturating_mul(2)
            || self.buffer_bytes.saturating_add(bytes) > self.limits.memory_budget
        {
            return Err(Errno::ENOBUFS);
        }
        Ok(())
    }

    fn alloc_tcp(&mut self, opts: &Opts) -> Result<SocketHandle, Errno> {
        // smoltcp refuses (panics on) receive buffers over 1 GiB, whatever
        // the configured limits say.
        let (rcv, snd) = (opts.rcvbuf.min(1 << 30), opts.sndbuf.min(1 << 30));
        let bytes = rcv + snd;
        self.reserve(bytes)?;
        // Zeroed allocations of this size come from fresh mappings: pages
        // cost memory only once data has passed through them.
        let mut s = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0u8; rcv]),
            tcp::SocketBuffer::new(vec![0u8; snd]),
        );
        s.set_nagle_enabled(!opts.nodelay);
        if opts.keepalive {
            s.set_keep_alive(Some(keep_alive_every(opts.keepidle)));
        }
        // On loopback an ACK costs one trip through the queue; delaying it
        // only delays the sender (write-write-read stalls with Nagle).
        if matches!(self.mode, Mode::Loopback) {
            s.set_ack_delay(None);
        }
        let h = self.sockets.add(s);
        self.alloc.insert(h, bytes);
        self.buffer_bytes += bytes;
        Ok(h)
    }

    fn alloc_udp(&mut self, opts: &Opts, local: SocketAddr) -> Result<SocketHandle, Errno> {
        let bytes = opts.rcvbuf + opts.sndbuf;
        self.reserve(bytes)?;
        let mut s = udp::Socket::new(
            udp::PacketBuffer::new(
                vec![udp::PacketMetadata::EMPTY; UDP_PACKETS],
                vec![0u8; opts.rcvbuf],
            ),
            udp::PacketBuffer::new(
                vec![udp::PacketMetadata::EMPTY; UDP_PACKETS],
                vec![0u8; opts.sndbuf],
            ),
        );
        s.bind(listen_endpoint(local)).map_err(|_| Errno::EINVAL)?;
        let h = self.sockets.add(s);
        self.alloc.insert(h, bytes);
        self.buffer_bytes += bytes;
        Ok(h)
    }

    /// The segments of TCP socket `h` carry the TOS (IPv4 peer) or
    /// traffic class (IPv6 peer) of `opts` from now on: smoltcp sets
    /// neither, so the device writes it by the connection's addresses.
    /// Once the connection's addresses are known (connect, handshake done).
    fn mark_tcp(&mut self, h: SocketHandle, opts: &Opts) {
        let s = self.sockets.get::<tcp::Socket>(h);
        let (Some(l), Some(r)) = (s.local_endpoint(), s.remote_endpoint()) else {
            return;
        };
        let key = (endpoint_addr(l), endpoint_addr(r));
        let tos = opts.header(key.1.is_ipv4()).1;
        if let Some(old) = self.tcp_marked.insert(h, key) {
            self.device.unmark_tcp(h, old.0, old.1);
        }
        self.device.mark_tcp(h, key.0, key.1, tos);
    }

    /// SYN-ACKs of listener `e` carry its TOS and traffic class.
    fn mark_listener(&mut self, e: &Entry) {
        if let (State::Listen(_), Some(l)) = (&e.state, e.local) {
            let marks = (e.opts.tos, if e.v6 { e.opts.tclass } else { 0 });
            self.device.mark_listener(l.port(), Some(marks));
        }
    }

    fn free(&mut self, h: SocketHandle) {
        if let Some((src, dst)) = self.tcp_marked.remove(&h) {
            self.device.unmark_tcp(h, src, dst);
        }
        if let Some(bytes) = self.alloc.remove(&h) {
            self.buffer_bytes -= bytes;
            self.sockets.remove(h);
        }
    }

    fn tcp(&mut self, h: SocketHandle) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(h)
    }

    fn orphan(&mut self, h: SocketHandle, port: Option<u16>) {
        let deadline = self.now() + sdur(self.limits.orphan_timeout);
        self.orphans.push(Orphan {
            handle: h,
            port,
            deadline,
            fresh: true,
        });
    }

    // --- binding ---------------------------------------------------------

    /// Binds `e` to `addr` (canonical form), port 0 meaning ephemeral.
    fn bind_to(&mut self, e: &mut Entry, addr: SocketAddr) -> Result<(), Errno> {
        let b = Binding {
            owner: Owner::Socket(e.id),
            scope: e.scope(addr.ip()),
            reuse_addr: e.opts.reuse_addr,
            reuse_port: e.opts.reuse_port,
            listening: false,
        };
        let port = self.ports.bind(e.proto(), addr.port(), b)?;
        let local = family_form(e.v6, SocketAddr::new(addr.ip(), port));
        // A dual-stack wildcard stays "::", not "::ffff:0.0.0.0".
        let local = if addr.ip().is_unspecified() {
            SocketAddr::new(unspecified(e.v6), port)
        } else {
            local
        };
        if let State::Udp(u) = &mut e.state {
            match self.alloc_udp(&e.opts, SocketAddr::new(addr.ip(), port)) {
                Ok(h) => u.handle = Some(h),
                Err(err) => {
                    self.ports.remove(e.proto(), port, Owner::Socket(e.id));
                    return Err(err);
                }
            }
        }
        e.local = Some(local);
        e.bound = true;
        Ok(())
    }

    fn autobind(&mut self, e: &mut Entry) -> Result<(), Errno> {
        if e.local.is_some() {
            return Ok(());
        }
        self.bind_to(e, SocketAddr::new(unspecified(e.v6), 0))?;
        e.autobound = true;
        Ok(())
    }

    fn unbind(&mut self, e: &mut Entry) {
        if let (true, Some(local)) = (e.bound, e.local) {
            self.ports
                .remove(e.proto(), local.port(), Owner::Socket(e.id));
        }
        e.bound = false;
        e.autobound = false;
        e.local = None;
    }

    fn bind(&mut self, e: &mut Entry, addr: SocketAddr) -> Result<(), Errno> {
        let addr = e.canonical_addr(addr, false)?;
        let fresh = match &e.state {
            State::Idle => true,
            State::Udp(u) => u.handle.is_none(),
            _ => false,
        };
        if e.local.is_some() || !fresh {
            return Err(Errno::EINVAL);
        }
        if !addr.ip().is_unspecified() && !self.is_local(addr.ip()) {
            return Err(Errno::EADDRNOTAVAIL);
        }
        self.bind_to(e, addr)
    }

    /// Whether the guest may reach `dest` (canonical). In loopback mode
    /// only the stack's own addresses exist; in egress mode the policy
    /// decides, and a refusal is logged with the destination before any
    /// host socket exists and answered with `refused` (`ECONNREFUSED` for
    /// connect(2), `EPERM` for a datagram's sendto(2)).
    fn check_egress(
        &self,
        e: &Entry,
        dest: SocketAddr,
        refused: Errno,
    ) -> Result<Option<(String, bool)>, Errno> {
        if self.is_local(dest.ip()) {
            return Ok(None);
        }
        match self.mode {
            Mode::Loopback => {
                tracing::debug!(%dest, "netstack: no route outside the sandbox (loopback only)");
                Err(Errno::ENETUNREACH)
            }
            // No address of the family on the link: no route there.
            Mode::Egress if self.link.source_for(dest.ip()).is_none() => {
                tracing::debug!(%dest, "netstack: no address of the family on the link out");
                Err(Errno::ENETUNREACH)
            }
            Mode::Egress => match self.policy.check(dest, None) {
                Decision::Allow { rule, by_name } => {
                    // A connection is logged once; datagrams are checked
                    // one by one, so only at debug level.
                    match e.ty {
                        SocketType::Stream => tracing::info!(%dest, %rule, "egress: allowed"),
                        SocketType::Datagram => {
                            tracing::debug!(%dest, %rule, "egress: datagram allowed");
                        }
                    }
                    Ok(Some((rule, by_name)))
                }
                Decision::Deny(why) => {
                    tracing::warn!(%dest, reason = %why, "egress: refused");
                    if self.report_refusals {
                        eprintln!("ferrovisor: egress to {dest} refused: {why}");
                    }
                    if let Some(log) = &self.audit {
                        let mut r = crate::audit::Record::new(e.origin.clone(), proto(e.ty), dest);
                        r.rule = why.to_string();
                        log.write(&r);
                    }
                    Err(refused)
                }
            },
        }
    }

    /// The destination of a connect/sendto, canonical, with the unspecified
    /// address meaning this host (as Linux does). `refused` is the errno of
    /// a destination the policy refuses.
    fn destination(
        &self,
        e: &Entry,
        addr: SocketAddr,
        refused: Errno,
    ) -> Result<(SocketAddr, Option<(String, bool)>), Errno> {
        let mut dest = e.canonical_addr(addr, true)?;
        if dest.ip().is_unspecified() {
            dest.set_ip(match dest.ip() {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
            });
        }
        // A socket bound to an address of one family cannot reach the other
        // (an IPv6 socket bound to ::1 sending to ::ffff:127.0.0.1);
        // smoltcp would build a packet with mismatched addresses.
        if let Some(l) = e.local {
            let lip = canonical(l.ip());
            if !lip.is_unspecified() && lip.is_ipv4() != dest.ip().is_ipv4() {
                return Err(Errno::ENETUNREACH);
            }
            // An IPv4 loopback source has no route out: Linux's
            // ip_route_output_key refuses it with EINVAL where a route
            // exists (IPv6 lets it be).
            if matches!(self.mode, Mode::Egress)
                && matches!(lip, IpAddr::V4(a) if a.is_loopback())
                && !self.is_local(dest.ip())
            {
                return Err(Errno::EINVAL);
            }
        }
        // Loopback's broadcast address is no destination for a connection
        // (tcp_v4_connect: ENETUNREACH for a broadcast route), nor for a
        // datagram without SO_BROADCAST (EACCES).
        if dest.ip() == IpAddr::V4(LOOPBACK_BROADCAST) {
            return Err(match e.ty {
                SocketType::Stream => Errno::ENETUNREACH,
                SocketType::Datagram => Errno::EACCES,
            });
        }
        let allowed = self.check_egress(e, dest, refused)?;
        Ok((dest, allowed))
    }

    // --- TCP -------------------------------------------------------------

    fn listen(&mut self, e: &mut Entry, backlog: i32) -> Result<(), Errno> {
        let max = self.limits.max_backlog;
        let backlog = usize::try_from(backlog).map_or(max, |b| b.min(max));
        match &mut e.state {
            State::Udp(_) => return Err(Errno::EOPNOTSUPP),
            State::Conn(_) | State::Relay(_) => return Err(Errno::EINVAL),
            State::Listen(l) => {
                l.capacity = backlog + 1;
                return Ok(());
            }
            State::Idle => {}
        }
        if e.shut_rd {
            e.shut_rd = false;
            e.shut_wr = false;
        }
        self.autobind(e)?;
        let port = e.local.map_or(0, |l| l.port());
        if let Err(err) = self
            .ports
            .set_listening(Proto::Tcp, port, Owner::Socket(e.id))
        {
            if e.autobound {
                self.unbind(e);
            }
            return Err(err);
        }
        e.error = None;
        e.connect_failed = false;
        e.state = State::Listen(Listener {
            capacity: backlog + 1,
            slots: Vec::new(),
            half_open: HashMap::new(),
            ready: VecDeque::new(),
        });
        self.listeners.insert(e.id);
        self.mark_listener(e);
        self.refresh_listener(e);
        Ok(())
    }

    fn accept(&mut self, e: &mut Entry) -> Result<(SocketId, SocketAddr), Errno> {
        let State::Listen(l) = &mut e.state else {
            return Err(Errno::EINVAL);
        };
        loop {
            let Some(h) = l.ready.front().copied() else {
                return Err(Errno::EAGAIN);
            };
            if self.entries.len() + 1 >= self.limits.max_sockets {
                return Err(Errno::ENOBUFS);
            }
            l.ready.pop_front();
            let s = self.sockets.get::<tcp::Socket>(h);
            let (Some(remote), Some(local)) = (s.remote_endpoint(), s.local_endpoint()) else {
                self.sockets.get_mut::<tcp::Socket>(h).abort();
                self.orphan(h, None);
                continue;
            };
            // smoltcp listens on "any address" for both families; keep each
            // family to its own sockets.
            let is_v4 = matches!(remote.addr, IpAddress::Ipv4(_));
            if (!e.v6 && !is_v4) || (e.v6 && e.opts.v6only && is_v4) {
                self.sockets.get_mut::<tcp::Socket>(h).abort();
                self.orphan(h, None);
                continue;
            }
            let peer = from_endpoint(e.v6, remote);
            // The accepted socket inherits the listener's options (and a
            // v4-mapped peer gets the IPv4 ones).
            self.sockets
                .get_mut::<tcp::Socket>(h)
                .set_hop_limit(e.opts.tcp_hop_limit(is_v4));
            self.mark_tcp(h, &e.opts);
            let id = SocketId(self.next_id);
            self.next_id += 1;
            let state = State::Conn(Conn {
                handle: h,
                peer,
                established: true,
                reported: true,
                peer_fin: false,
                reset: false,
                started: self.now(),
            });
            let mut opts = e.opts.clone();
            if is_v4 {
                // `tcp_v4_syn_recv_sock`: the handshake's interface, TTL
                // and TOS (the defaults if its SYN was forgotten).
                let (src, dst) = (endpoint_addr(remote), endpoint_addr(local));
                let (ttl, tos) = self
                    .device
                    .take_syn_header(src, dst)
                    .unwrap_or((crate::HOP_LIMIT, crate::TOS));
                opts.mc_index = crate::LOOPBACK_IFINDEX;
                opts.mc_ttl = ttl;
                opts.rcv_tos = tos;
            }
            let local = Some(from_endpoint(e.v6, local));
            let mut child = Entry::new(id, SocketType::Stream, e.v6, opts, local, state);
            self.refresh_conn(&mut child);
            child.last = self.readiness(&child);
            child.rx_level = self.rx_level(&child);
            // A passively opened connection wakes no one for what
            // happened before accept (tcp_rcv_state_process's note).
            child.wake = Wakeups::default();
            child.woken = false;
            self.entries.insert(id, child);
            return Ok((id, peer));
        }
    }

    fn connect(&mut self, e: &mut Entry, addr: SocketAddr) -> Result<(), Errno> {
        if let State::Udp(_) = e.state {
            return self.udp_connect(e, addr);
        }
        match &mut e.state {
            State::Listen(_) => return Err(Errno::EISCONN),
            State::Conn(c) if !c.established => return Err(Errno::EALREADY),
            State::Conn(c) if !c.reported => {
                c.reported = true;
                return Ok(());
            }
            State::Conn(_) => return Err(Errno::EISCONN),
            State::Relay(r) => {
                let r = r.connect_again();
                if r.is_err() && matches!(&e.state, State::Relay(x) if x.failed()) {
                    e.state = State::Idle;
                }
                return r;
            }
            _ => {}
        }
        if e.connect_failed {
            e.connect_failed = false;
            return Err(e.error.take().unwrap_or(Errno::ECONNABORTED));
        }
        let (dest, allowed) = self.destination(e, addr, Errno::ECONNREFUSED)?;
        if dest.port() == 0 {
            return Err(Errno::ECONNREFUSED);
        }
        if !self.is_local(dest.ip()) {
            let (rule, by_name) = allowed.unwrap_or_default();
            return self.relay_connect(e, dest, rule, by_name);
        }
        if e.local.is_none() {
            // Linux's connect(2) says EADDRNOTAVAIL when the ephemeral range
            // is used up.
            self.autobind(e).map_err(|err| {
                if err == Errno::EADDRINUSE {
                    Errno::EADDRNOTAVAIL
                } else {
                    err
                }
            })?;
        }
        let mut local = e.local.map_or(SocketAddr::new(unspecified(e.v6), 0), |l| l);
        if picks_source(canonical(local.ip())) {
            // Linux's route lookup picks the source (see `local_source`).
            local.set_ip(local_source(dest.ip()));
        }
        let h = match self.alloc_tcp(&e.opts) {
            Ok(h) => h,
            Err(err) => {
                if e.autobound {
                    self.unbind(e);
                }
                return Err(err);
            }
        };
        let timeout = sdur(self.limits.connect_timeout);
        let cx = self.iface.context();
        let s = self.sockets.get_mut::<tcp::Socket>(h);
        s.set_timeout(Some(timeout));
        s.set_hop_limit(e.opts.tcp_hop_limit(dest.is_ipv4()));
        if s.connect(cx, IpEndpoint::from(dest), listen_endpoint(local))
            .is_err()
        {
            self.free(h);
            if e.autobound {
                self.unbind(e);
            }
            return Err(Errno::EINVAL);
        }
        self.mark_tcp(h, &e.opts);
        e.error = None;
        e.state = State::Conn(Conn {
            handle: h,
            peer: family_form(e.v6, dest),
            established: false,
            reported: false,
            peer_fin: false,
            reset: false,
            started: self.now(),
        });
        Err(Errno::EINPROGRESS)
    }

    fn send(&mut self, e: &mut Entry, buf: &[u8], to: Option<SocketAddr>) -> Result<Sent, Errno> {
        let c = match &mut e.state {
            State::Udp(_) => return self.udp_send(e, buf, to),
            State::Relay(r) => return r.send(buf).map(Sent::Queued),
            State::Conn(c) => c,
            _ => return Err(Errno::EPIPE),
        };
        if !c.established {
            return Err(Errno::EAGAIN);
        }
        if c.reset {
            return Err(e.error.take().unwrap_or(Errno::EPIPE));
        }
        if e.shut_wr {
            return Err(Errno::EPIPE);
        }
        let h = c.handle;
        let s = self.tcp(h);
        if !s.may_send() {
            return Err(Errno::EPIPE);
        }
        if buf.is_empty() {
            return Ok(Sent::Queued(0));
        }
        // Whatever did not fit marks the socket as out of room
        // (sk_stream_wait_memory sets SOCKWQ_ASYNC_NOSPACE, blocking or not).
        match s.send_slice(buf) {
            Ok(0) => {
                e.nospace |= e.fasync;
                Err(Errno::EAGAIN)
            }
            Ok(n) => {
                if n < buf.len() {
                    e.nospace |= e.fasync;
                }
                Ok(Sent::Queued(n))
            }
            Err(_) => Err(Errno::EPIPE),
        }
    }

    fn recv(&mut self, e: &mut Entry, buf: &mut [u8], peek: bool) -> Result<RecvMeta, Errno> {
        let c = match &mut e.state {
            State::Udp(_) => return self.udp_recv(e, buf, peek),
            State::Relay(r) => {
                let peer = family_form(e.v6, r.peer);
                let len = r.recv(buf, peek)?;
                return Ok(RecvMeta {
                    len,
                    full_len: len,
                    from: peer,
                    local: None,
                    hop_limit: None,
                    tos: None,
                    arrived: None,
                });
            }
            State::Conn(c) => c,
            _ => return Err(Errno::ENOTCONN),
        };
        let peer = c.peer;
        let meta = |len| RecvMeta {
            len,
            full_len: len,
            from: peer,
            local: None,
            hop_limit: None,
            tos: None,
            arrived: None,
        };
        if !c.established {
            return Err(Errno::EAGAIN);
        }
        let (h, eof) = (c.handle, c.peer_fin || c.reset || e.shut_rd);
        if buf.is_empty() {
            return Ok(meta(0));
        }
        let s = self.tcp(h);
        if s.recv_queue() > 0 {
            let n = if peek {
                s.peek_slice(buf).unwrap_or(0)
            } else {
                s.recv_slice(buf).unwrap_or(0)
            };
            if n > 0 {
                return Ok(meta(n));
            }
        }
        if let Some(err) = e.error.take() {
            return Err(err);
        }
        if eof || s.state() == tcp::State::Closed {
            return Ok(meta(0));
        }
        Err(Errno::EAGAIN)
    }

    fn shutdown(&mut self, e: &mut Entry, how: Shutdown) -> Result<(), Errno> {
        let (rd, wr) = match how {
            Shutdown::Read => (true, false),
            Shutdown::Write => (false, true),
            Shutdown::Both => (true, true),
        };
        match &mut e.state {
            State::Idle => Err(Errno::ENOTCONN),
            State::Listen(_) => {
                if rd {
                    // Linux disconnects a listener on SHUT_RD: pending
                    // connections are reset, accept fails with EINVAL.
                    self.stop_listening(e);
                }
                Ok(())
            }
            State::Conn(c) => {
                let h = c.handle;
                if self.tcp(h).state() == tcp::State::Closed {
                    return Err(Errno::ENOTCONN);
                }
                e.shut_rd |= rd;
                if wr && !e.shut_wr {
                    e.shut_wr = true;
                    self.tcp(h).close();
                }
                Ok(())
            }
            State::Relay(r) => {
                if !r.established() {
                    return Err(Errno::ENOTCONN);
                }
                e.shut_rd |= rd;
                e.shut_wr |= wr;
                r.shutdown(rd, wr);
                Ok(())
            }
            State::Udp(u) => {
                let connected = u.peer.is_some();
                e.shut_rd |= rd;
                e.shut_wr |= wr;
                if connected {
                    Ok(())
                } else {
                    Err(Errno::ENOTCONN)
                }
            }
        }
    }

    fn stop_listening(&mut self, e: &mut Entry) {
        if let State::Listen(l) = std::mem::replace(&mut e.state, State::Idle) {
            for h in l.slots.into_iter().chain(l.ready) {
                self.tcp(h).abort();
                self.orphan(h, None);
            }
            if let Some(local) = e.local {
                self.device.mark_listener(local.port(), None);
                // Still bound, no longer listening.
                self.ports
                    .remove(Proto::Tcp, local.port(), Owner::Socket(e.id));
                let b = Binding {
                    owner: Owner::Socket(e.id),
                    scope: e.scope(local.ip()),
                    reuse_addr: e.opts.reuse_addr,
                    reuse_port: e.opts.reuse_port,
                    listening: false,
                };
                if self.ports.bind(Proto::Tcp, local.port(), b).is_err() {
                    e.bound = false;
                }
            }
        }
        self.listeners.remove(&e.id);
    }

    fn close(&mut self, id: SocketId) {
        let Some(mut e) = self.entries.remove(&id) else {
            return;
        };
        self.listeners.remove(&id);
        match std::mem::replace(&mut e.state, State::Idle) {
            State::Idle => self.unbind(&mut e),
            State::Listen(l) => {
                for h in l.slots.into_iter().chain(l.ready) {
                    self.tcp(h).abort();
                    self.orphan(h, None);
                }
                if let Some(local) = e.local {
                    self.device.mark_listener(local.port(), None);
                }
                self.unbind(&mut e);
            }
            State::Conn(c) => {
                let s = self.tcp(c.handle);
                // Unread data or SO_LINGER 0: reset (RFC 2525, tcp(7)).
                if e.opts.linger == Some(Duration::ZERO) || s.recv_queue() > 0 {
                    s.abort();
                } else {
                    s.close();
                }
                let port = match (e.bound, e.local) {
                    (true, Some(l)) => {
                        self.ports.transfer(
                            Proto::Tcp,
                            l.port(),
                            Owner::Socket(id),
                            Owner::Orphan(c.handle),
                        );
                        Some(l.port())
                    }
                    _ => None,
                };
                self.orphan(c.handle, port);
            }
            State::Udp(u) => {
                if let Some(h) = u.handle {
                    self.free(h);
                }
                if let Some(l) = e.local {
                    self.device.forget_v6_source(l.port());
                }
                self.unbind(&mut e);
            }
            // Dropping the relay sends what is queued, then FIN.
            State::Relay(_) => self.unbind(&mut e),
        }
    }

    /// Starts a relayed connection to `dest`, outside the sandbox, which
    /// the policy allowed (see `check_egress`).
    fn relay_connect(
        &mut self,
        e: &mut Entry,
        dest: SocketAddr,
        rule: String,
        by_name: bool,
    ) -> Result<(), Errno> {
        let me = self.me.clone();
        let wake: crate::relay::Wake = Arc::new(move || {
            if let Some(s) = me.upgrade() {
                s.relay_changed();
            }
        });
        let r = crate::relay::Relay::start(
            dest,
            e.opts.rcvbuf,
            e.opts.sndbuf,
            self.limits.connect_timeout,
            wake,
            crate::relay::Egress {
                policy: self.policy.clone(),
                tls: self.tls.clone(),
                audit: self.audit.clone(),
                record: {
                    let mut r = crate::audit::Record::new(e.origin.clone(), "tcp", dest);
                    r.rule = rule;
                    r
                },
                by_name,
                report_refusals: self.report_refusals,
            },
        )?;
        e.error = None;
        e.state = State::Relay(r);
        Err(Errno::EINPROGRESS)
    }

    // --- UDP -------------------------------------------------------------

    fn udp_connect(&mut self, e: &mut Entry, addr: SocketAddr) -> Result<(), Errno> {
        let (dest, _) = self.destination(e, addr, Errno::ECONNREFUSED)?;
        self.autobind(e).map_err(|_| Errno::EAGAIN)?;
        if let State::Udp(u) = &mut e.state {
            u.peer = Some(family_form(e.v6, dest));
        }
        Ok(())
    }

    fn udp_send(
        &mut self,
        e: &mut Entry,
        buf: &[u8],
        to: Option<SocketAddr>,
    ) -> Result<Sent, Errno> {
        let State::Udp(u) = &e.state else {
            return Err(Errno::EINVAL);
        };
        let dest = match (to, u.peer) {
            (Some(a), _) => a,
            (None, Some(p)) => p,
            (None, None) => return Err(Errno::EDESTADDRREQ),
        };
        if e.shut_wr {
            return Err(Errno::EPIPE);
        }
        let (dest, allowed) = self.destination(e, dest, Errno::EPERM)?;
        if dest.port() == 0 {
            return Err(Errno::EINVAL);
        }
        let ip_header = if dest.is_ipv4() { 20 } else { 40 };
        if buf.len() > LOOPBACK_MTU - ip_header - 8 {
            return Err(Errno::EMSGSIZE);
        }
        // An error an earlier datagram earned (ECONNREFUSED from a port
        // unreachable) fails this send and is forgotten
        // (`sock_alloc_send_pskb`'s `sock_error`).
        if let Some(err) = e.error.take() {
            return Err(err);
        }
        if !self.is_local(dest.ip()) {
            return self.udp_send_outside(e, dest, allowed.map(|(rule, _)| rule));
        }
        // Linux answers EAGAIN when autobind finds no free port.
        self.autobind(e).map_err(|_| Errno::EAGAIN)?;
        let State::Udp(Udp {
            handle: Some(h), ..
        }) = e.state
        else {
            return Err(Errno::EINVAL);
        };
        let mut meta = udp::UdpMetadata::from(IpEndpoint::from(dest));
        let (hop, tos) = e.opts.header(dest.is_ipv4());
        meta.meta = crate::device::tx_mark(hop, tos);
        if let (false, Some(l)) = (dest.is_ipv4(), e.local) {
            self.device.mark_v6_source(l.port(), hop, tos);
        }
        if let Some(l) = e.local {
            let ip = canonical(l.ip());
            // From the bound address, or else the one the route names
            // (see `connect`).
            let src = if picks_source(ip) {
                local_source(dest.ip())
            } else {
                ip
            };
            meta.local_address = Some(src.into());
        }
        let s = self.sockets.get_mut::<udp::Socket>(h);
        // The buffer was sized when the socket was bound; a larger SO_SNDBUF
        // set later does not grow it.
        if buf.len() > s.payload_send_capacity() {
            return Err(Errno::EMSGSIZE);
        }
        match s.send_slice(buf, meta) {
            Ok(()) => Ok(Sent::Queued(buf.len())),
            Err(udp::SendError::BufferFull) => Err(Errno::EAGAIN),
            Err(udp::SendError::Unaddressable) => Err(Errno::EINVAL),
        }
    }

    /// A datagram to `dest`, outside the sandbox, which the policy allowed:
    /// opens the socket's host socket for that family if need be (only now,
    /// never for a refused destination) and hands it to the caller.
    fn udp_send_outside(
        &mut self,
        e: &mut Entry,
        dest: SocketAddr,
        rule: Option<String>,
    ) -> Result<Sent, Errno> {
        // A socket bound to a loopback address has no route out (Linux's
        // ip_route_output_key refuses a loopback source with EINVAL).
        if e.local.is_some_and(|l| is_loopback(canonical(l.ip()))) {
            return Err(Errno::EINVAL);
        }
        // The guest's socket needs its port in the sandbox: replies enter
        // the stack addressed to it.
        self.autobind(e).map_err(|_| Errno::EAGAIN)?;
        let (me, id) = (self.me.clone(), e.id);
        let State::Udp(u) = &mut e.state else {
            return Err(Errno::EINVAL);
        };
        let relay = u.relay.get_or_insert_with(|| {
            crate::udp_relay::UdpRelay::new(Arc::new(move |from, payload: &[u8]| {
                if let Some(s) = me.upgrade() {
                    s.udp_relay_deliver(id, from, payload);
                }
            }))
        });
        let sock = relay.route(dest)?;
        if let Some(log) = &self.audit {
            if !u.logged.contains(&dest) && u.logged.len() < MAX_LOGGED_FLOWS {
                u.logged.push(dest);
                let mut r = crate::audit::Record::new(e.origin.clone(), "udp", dest);
                r.allowed = true;
                r.rule = rule.unwrap_or_default();
                log.write(&r);
            }
        }
        Ok(Sent::Outside(sock, dest))
    }

    /// Puts a datagram that came back from outside on the link, addressed
    /// to UDP socket `id`'s port on its bound address, or, bound to a
    /// wildcard, on the sandbox's address on its link out of the sender's
    /// family (where Linux would have received it). Returns whether a
    /// packet was queued.
    fn inject_udp(&mut self, id: SocketId, from: SocketAddr, payload: &[u8]) -> bool {
        let Some(e) = self.entries.get(&id) else {
            return false;
        };
        let (
            State::Udp(Udp {
                handle: Some(_), ..
            }),
            Some(local),
        ) = (&e.state, e.local)
        else {
            return false;
        };
        let bound = canonical(local.ip());
        let to = if bound.is_unspecified() {
            match self.link.source_for(from.ip()) {
                Some(a) => a,
                None => return false,
            }
        } else {
            bound
        };
        match crate::udp_relay::udp_packet(from, SocketAddr::new(to, local.port()), payload) {
            Some(p) => self.device.inject(p),
            None => false,
        }
    }

    fn udp_recv(&mut self, e: &mut Entry, buf: &mut [u8], peek: bool) -> Result<RecvMeta, Errno> {
        let State::Udp(u) = &e.state else {
            return Err(Errno::EINVAL);
        };
        let handle = u.handle;
        // A pending error comes before any datagram (`__skb_recv_udp`).
        if let Some(err) = e.error.take() {
            return Err(err);
        }
        let Some(h) = handle else {
            return Err(Errno::EAGAIN);
        };
        let v6 = e.v6;
        let s = self.sockets.get_mut::<udp::Socket>(h);
        let (len, full_len, from, local, id) = match s.peek() {
            Ok((payload, meta)) => {
                let n = payload.len().min(buf.len());
                buf[..n].copy_from_slice(&payload[..n]);
                let local = meta
                    .local_address
                    .map(|a| from_endpoint(v6, IpEndpoint::new(a, 0)).ip());
                (
                    n,
                    payload.len(),
                    from_endpoint(v6, meta.endpoint),
                    local,
                    meta.meta.id,
                )
            }
            Err(_) if e.shut_rd => {
                return Ok(RecvMeta {
                    len: 0,
                    full_len: 0,
                    from: SocketAddr::new(unspecified(v6), 0),
                    local: None,
                    hop_limit: None,
                    tos: None,
                    arrived: None,
                })
            }
            Err(_) => return Err(Errno::EAGAIN),
        };
        if !peek {
            let _ = s.recv();
        }
        let arrival = self.device.arrival(id, !peek);
        Ok(RecvMeta {
            len,
            full_len,
            from,
            local,
            // A datagram whose note was pushed out reads as sent with the
            // defaults.
            hop_limit: Some(arrival.map_or(crate::HOP_LIMIT, |a| a.hop_limit)),
            tos: Some(arrival.map_or(crate::TOS, |a| a.tos)),
            arrived: arrival.map(|a| a.at),
        })
    }

    // --- options and queries ----------------------------------------------

    fn set_option(&mut self, e: &mut Entry, opt: SockOpt) -> Result<(), Errno> {
        let stream = e.ty == SocketType::Stream;
        let (max_buf, live) = match &e.state {
            State::Conn(c) => (self.limits.max_tcp_buffer, Some(c.handle)),
            _ if stream => (self.limits.max_tcp_buffer, None),
            _ => (self.limits.max_udp_buffer, None),
        };
        // Linux doubles the value for bookkeeping overhead and reports the
        // doubled value (socket(7)).
        let buf_size = |v: usize| v.saturating_mul(2).clamp(MIN_BUFFER, max_buf);
        let tos_changed = matches!(opt, SockOpt::Tos(_) | SockOpt::TrafficClass(_));
        match opt {
            SockOpt::ReuseAddr(v) => e.opts.reuse_addr = v,
            SockOpt::ReusePort(v) => e.opts.reuse_port = v,
            SockOpt::Linger(v) => e.opts.linger = v,
            SockOpt::RcvBuf(v) => e.opts.rcvbuf = buf_size(v),
            SockOpt::SndBuf(v) => e.opts.sndbuf = buf_size(v),
            SockOpt::KeepAlive(v) => e.opts.keepalive = v,
            SockOpt::NoDelay(v) if stream => e.opts.nodelay = v,
            SockOpt::KeepIdle(v) if stream => {
                if v.is_zero() || v > Duration::from_secs(32767) {
                    return Err(Errno::EINVAL);
                }
                e.opts.keepidle = v;
            }
            // MAX_TCP_KEEPINTVL and MAX_TCP_KEEPCNT (`tcp_sock_set_keep*`).
            SockOpt::KeepIntvl(v) if stream => {
                if v.is_zero() || v > Duration::from_secs(32767) {
                    return Err(Errno::EINVAL);
                }
                e.opts.keepintvl = v;
            }
            SockOpt::KeepCnt(v) if stream => {
                if v == 0 || v > 127 {
                    return Err(Errno::EINVAL);
                }
                e.opts.keepcnt = v;
            }
            SockOpt::NoDelay(_)
            | SockOpt::KeepIdle(_)
            | SockOpt::KeepIntvl(_)
            | SockOpt::KeepCnt(_) => return Err(Errno::ENOPROTOOPT),
            SockOpt::Ttl(v) => e.opts.ttl = v,
            SockOpt::Tos(v) => e.opts.tos = v,
            SockOpt::MulticastTtl(v) => e.opts.mc_ttl = v,
            SockOpt::RecvErr(v) => {
                e.opts.recverr = v;
                // Turning it off empties the queue (`ip_setsockopt`).
                if !v {
                    e.errqueue.clear();
                }
            }
            SockOpt::HopLimit(_) | SockOpt::TrafficClass(_) if !e.v6 => {
                return Err(Errno::ENOPROTOOPT)
            }
            SockOpt::HopLimit(v) => e.opts.hop_limit = v,
            SockOpt::TrafficClass(v) => e.opts.tclass = v,
            SockOpt::V6Only(_) if !e.v6 => return Err(Errno::ENOPROTOOPT),
            SockOpt::V6Only(v) => {
                let fresh = match &e.state {
                    State::Idle => true,
                    State::Udp(u) => u.handle.is_none(),
                    _ => false,
                };
                if e.local.is_some() || !fresh {
                    return Err(Errno::EINVAL);
                }
                e.opts.v6only = v;
            }
        }
        if let Some(h) = live {
            let (nodelay, keepalive, idle) = (e.opts.nodelay, e.opts.keepalive, e.opts.keepidle);
            let v4 = matches!(&e.state, State::Conn(c) if canonical(c.peer.ip()).is_ipv4());
            let hop = e.opts.tcp_hop_limit(v4);
            let s = self.tcp(h);
            s.set_nagle_enabled(!nodelay);
            s.set_keep_alive(keepalive.then(|| keep_alive_every(idle)));
            s.set_hop_limit(hop);
            if tos_changed {
                self.mark_tcp(h, &e.opts);
            }
        }
        if tos_changed {
            self.mark_listener(e);
        }
        Ok(())
    }

    fn local_addr(&self, e: &Entry) -> SocketAddr {
        if let State::Relay(r) = &e.state {
            // The sandbox's own address on its link, never the host's: the
            // one the socket was bound to, else the link's first of the
            // family; the port the socket was bound to, if it was.
            let bound = e.local.map(|l| canonical(l.ip()));
            let ip = match bound {
                Some(b)
                    if b.is_ipv4() == r.peer.ip().is_ipv4()
                        && self.link.addrs.iter().any(|&(a, _)| a == b) =>
                {
                    b
                }
                _ => self
                    .link
                    .source_for(r.peer.ip())
                    .unwrap_or_else(|| unspecified(r.peer.ip().is_ipv6())),
            };
            let port = match e.local {
                Some(l) if l.port() != 0 => l.port(),
                _ => r.local_port(),
            };
            return family_form(e.v6, SocketAddr::new(ip, port));
        }
        if let State::Conn(c) = &e.state {
            if let Some(ep) = self.sockets.get::<tcp::Socket>(c.handle).local_endpoint() {
                return from_endpoint(e.v6, ep);
            }
        }
        // A connected UDP socket bound to a wildcard shows the source its
        // datagrams go from, as `ip4_datagram_connect` sets it.
        if let (State::Udp(Udp { peer: Some(p), .. }), Some(l)) = (&e.state, e.local) {
            let to = canonical(p.ip());
            let src = if self.is_local(to) {
                Some(local_source(to))
            } else {
                self.link.source_for(to)
            };
            if let (true, Some(src)) = (canonical(l.ip()).is_unspecified(), src) {
                return family_form(e.v6, SocketAddr::new(src, l.port()));
            }
        }
        e.local.unwrap_or(SocketAddr::new(unspecified(e.v6), 0))
    }

    fn bytes_readable(&mut self, e: &Entry) -> usize {
        match &e.state {
            State::Conn(c) => self.sockets.get::<tcp::Socket>(c.handle).recv_queue(),
            State::Relay(r) => r.bytes_readable(),
            // FIONREAD on a datagram socket: the size of the next datagram.
            State::Udp(Udp {
                handle: Some(h), ..
            }) => self
                .sockets
                .get_mut::<udp::Socket>(*h)
                .peek()
                .map_or(0, |(p, _)| p.len()),
            _ => 0,
        }
    }

    fn readiness(&self, e: &Entry) -> Readiness {
        let error = e.error.is_some();
        match &e.state {
            // A fresh or failed TCP socket polls as OUT|HUP (tcp_poll, CLOSE).
            State::Idle => Readiness {
                readable: e.shut_rd,
                writable: true,
                hup: true,
                rdhup: e.shut_rd,
                error,
            },
            State::Listen(l) => Readiness {
                readable: !l.ready.is_empty(),
                error,
                ..Readiness::default()
            },
            State::Conn(c) if !c.established => Readiness {
                error,
                ..Readiness::default()
            },
            State::Conn(c) => {
                let s = self.sockets.get::<tcp::Socket>(c.handle);
                let closed = s.state() == tcp::State::Closed;
                let rcv_shut = c.peer_fin || c.reset || e.shut_rd;
                let snd_shut = e.shut_wr || c.reset || closed;
                // sk_stream_is_writeable: free space at least half of what
                // is queued, so a writer is not woken for a few bytes.
                let queued = s.send_queue();
                let free = s.send_capacity() - queued;
                Readiness {
                    readable: s.recv_queue() > 0 || rcv_shut || error,
                    writable: snd_shut || (s.may_send() && free > 0 && free >= queued / 2),
                    hup: (rcv_shut && snd_shut) || closed,
                    rdhup: rcv_shut,
                    error,
                }
            }
            State::Relay(r) => {
                let mut rd = r.readiness();
                rd.error |= error;
                rd
            }
            State::Udp(u) => {
                let (readable, writable) = match u.handle {
                    Some(h) => {
                        let s = self.sockets.get::<udp::Socket>(h);
                        (s.can_recv(), s.can_send())
                    }
                    None => (false, true),
                };
                // datagram_poll: an error (pending, or queued for
                // MSG_ERRQUEUE) is POLLERR, not POLLIN.
                Readiness {
                    readable: readable || e.shut_rd,
                    writable,
                    hup: e.shut_rd && e.shut_wr,
                    rdhup: e.shut_rd,
                    error: error || !e.errqueue.is_empty(),
                }
            }
        }
    }

    // --- progress ----------------------------------------------------------

    /// Runs the protocol until no packet is in flight.
    fn pump(&mut self) {
        for _ in 0..MAX_ROUNDS {
            self.refresh_listeners();
            self.device.start_round();
            let now = self.now();
            let r = self.iface.poll(now, &mut self.device, &mut self.sockets);
            let progressed = r == PollResult::SocketStateChanged || self.device.delivered > 0;
            let aborted = self.abort_orphans_with_data();
            if !progressed && !aborted && !self.device.has_pending() {
                break;
            }
        }
        self.refresh_listeners();
        for u in std::mem::take(&mut self.device.unreachable) {
            self.port_unreachable(u);
        }
        let ids: Vec<SocketId> = self.entries.keys().copied().collect();
        for id in ids {
            let _ = self.with_entry(id, |s, e| {
                s.refresh_conn(e);
                s.refresh_udp(e);
                Ok(())
            });
        }
        self.reap_orphans();
    }

    /// An ICMP port unreachable about a datagram one of our UDP sockets
    /// sent: as Linux's `__udp4_lib_err`/`__udp6_lib_err`, the socket that
    /// sent it (a connected one to that destination first) gets
    /// `ECONNREFUSED` if it is connected or asked for `IP_RECVERR`, and
    /// with `IP_RECVERR` the error is queued for `MSG_ERRQUEUE` as well.
    fn port_unreachable(&mut self, u: crate::device::Unreachable) {
        let (src, dst) = (u.src, u.dst);
        let mut best: Option<(bool, SocketId)> = None;
        for (id, e) in &self.entries {
            let State::Udp(Udp { peer, .. }) = &e.state else {
                continue;
            };
            let Some(local) = e.local else { continue };
            let lip = canonical(local.ip());
            if local.port() != src.port() || !(lip.is_unspecified() || lip == src.ip()) {
                continue;
            }
            if src.is_ipv4() && e.v6 && e.opts.v6only || src.is_ipv6() && !e.v6 {
                continue;
            }
            let connected = match peer {
                Some(p) if SocketAddr::new(canonical(p.ip()), p.port()) == dst => true,
                Some(_) => continue,
                None => false,
            };
            if best.is_none_or(|(c, _)| connected && !c) {
                best = Some((connected, *id));
            }
        }
        let Some((connected, id)) = best else { return };
        let Some(e) = self.entries.get_mut(&id) else {
            return;
        };
        if !connected && !e.opts.recverr {
            return;
        }
        if e.opts.recverr && e.errqueue.len() < MAX_QUEUED_ERRORS {
            e.errqueue.push_back(crate::QueuedError {
                errno: Errno::ECONNREFUSED,
                icmp_type: u.icmp_type,
                icmp_code: u.icmp_code,
                offender: u.offender,
                dest: family_form(e.v6, dst),
                payload: u.payload,
            });
        }
        e.error = Some(Errno::ECONNREFUSED);
        e.wake.error = true;
        e.woken = true;
    }

    /// `recvmsg(MSG_ERRQUEUE)`: the oldest queued error. Taking it clears
    /// the pending error unless another ICMP error follows, which becomes
    /// the pending one (`sock_dequeue_err_skb`).
    fn recv_error(&mut self, e: &mut Entry) -> Result<crate::QueuedError, Errno> {
        let q = e.errqueue.pop_front().ok_or(Errno::EAGAIN)?;
        e.error = e.errqueue.front().map(|n| n.errno);
        Ok(q)
    }

    fn refresh_listeners(&mut self) {
        self.device.gates.clear();
        let ids: Vec<SocketId> = self.listeners.iter().copied().collect();
        for id in ids {
            let _ = self.with_entry(id, |s, e| {
                s.refresh_listener(e);
                Ok(())
            });
        }
    }

    /// Moves finished handshakes to the accept queue and keeps enough
    /// listening sockets for the backlog; sets the port's SYN gate.
    fn refresh_listener(&mut self, e: &mut Entry) {
        let Some(local) = e.local else { return };
        let State::Listen(l) = &mut e.state else {
            return;
        };
        let ep = listen_endpoint(local);
        let now = self.now();
        let mut slots = std::mem::take(&mut l.slots);
        let mut half_open = std::mem::take(&mut l.half_open);
        let mut listening = 0;
        let mut handshaking = 0;
        let mut established = Vec::new();
        slots.retain(|&h| {
            let s = self.sockets.get_mut::<tcp::Socket>(h);
            match s.state() {
                tcp::State::Listen => {
                    half_open.remove(&h);
                    listening += 1;
                    true
                }
                tcp::State::SynReceived => {
                    let since = *half_open.entry(h).or_insert(now);
                    if now - since >= sdur(SYN_RECV_TIMEOUT) {
                        // The peer never answered: forget it, listen again.
                        half_open.remove(&h);
                        s.abort();
                        if s.listen(ep).is_ok() {
                            listening += 1;
                        }
                    } else {
                        handshaking += 1;
                    }
                    true
                }
                tcp::State::Closed | tcp::State::TimeWait => {
                    // A handshake that failed: listen again.
                    half_open.remove(&h);
                    s.abort();
                    if s.listen(ep).is_ok() {
                        listening += 1;
                    }
                    true
                }
                _ => {
                    half_open.remove(&h);
                    l.ready.push_back(h);
                    established.push(h);
                    false
                }
            }
        });
        // From here on, the connection's own mark: the listener's values
        // (an accepted socket inherits them), by the peer's family.
        for h in established {
            self.mark_tcp(h, &e.opts);
        }
        let State::Listen(l) = &mut e.state else {
            return;
        };
        // The backlog is all half-open handshakes: the oldest one that has
        // waited long enough gives way (see SYN_RECV_EVICT_AGE).
        if listening == 0 && handshaking > 0 && l.ready.len() + handshaking >= l.capacity {
            let oldest = half_open
                .iter()
                .filter(|(_, &since)| now - since >= sdur(SYN_RECV_EVICT_AGE))
                .min_by_key(|(_, &since)| since)
                .map(|(&h, _)| h);
            if let Some(h) = oldest {
                half_open.remove(&h);
                let s = self.sockets.get_mut::<tcp::Socket>(h);
                s.abort();
                if s.listen(ep).is_ok() {
                    listening += 1;
                }
                handshaking -= 1;
            }
        }
        l.half_open = half_open;
        let want = l
            .capacity
            .saturating_sub(l.ready.len() + handshaking)
            .min(SLOT_BURST);
        // More listening sockets than the backlog allows: drop the extras.
        while listening > want {
            let Some(i) = slots
                .iter()
                .position(|&h| self.sockets.get::<tcp::Socket>(h).state() == tcp::State::Listen)
            else {
                break;
            };
            let h = slots.swap_remove(i);
            self.free(h);
            listening -= 1;
        }
        let opts = e.opts.clone();
        while listening < want {
            let Ok(h) = self.alloc_tcp(&opts) else { break };
            // The family of the peer is not known yet: accept corrects it.
            self.tcp(h).set_hop_limit(opts.tcp_hop_limit(!e.v6));
            if self.tcp(h).listen(ep).is_err() {
                self.free(h);
                break;
            }
            slots.push(h);
            listening += 1;
        }
        if let State::Listen(l) = &mut e.state {
            l.slots = slots;
        }
        let gate = self.device.gates.entry(local.port()).or_insert(SynGate {
            budget: 0,
            full: true,
        });
        gate.budget += listening;
        gate.full &= listening == 0;
    }

    /// Follows a connection's state: handshake done or failed, peer FIN,
    /// reset.
    fn refresh_conn(&mut self, e: &mut Entry) {
        let State::Conn(c) = &mut e.state else { return };
        let now = self.now();
        let s = self.sockets.get_mut::<tcp::Socket>(c.handle);
        let state = s.state();
        if !c.established {
            match state {
                tcp::State::SynSent | tcp::State::SynReceived => return,
                tcp::State::Closed => {
                    let waited = now - c.started;
                    e.error = Some(if waited >= sdur(self.limits.connect_timeout) {
                        Errno::ETIMEDOUT
                    } else {
                        Errno::ECONNREFUSED
                    });
                    e.connect_failed = true;
                    e.wake.error = true;
                    e.woken = true;
                    let h = c.handle;
                    e.state = State::Idle;
                    self.free(h);
                    if e.autobound {
                        self.unbind(e);
                    }
                    return;
                }
                _ => {
                    c.established = true;
                    s.set_timeout(None);
                    e.wake.connected = true;
                    e.woken = true;
                }
            }
        }
        match state {
            tcp::State::CloseWait
            | tcp::State::LastAck
            | tcp::State::Closing
            | tcp::State::TimeWait
                if !c.peer_fin =>
            {
                c.peer_fin = true;
                e.wake.fin = true;
                // tcp_fin: no POLL_HUP for a half-duplex close.
                e.wake.fin_both |= e.shut_wr;
                e.woken = true;
            }
            tcp::State::Closed if !c.peer_fin && !c.reset => {
                c.reset = true;
                e.error = Some(Errno::ECONNRESET);
                e.wake.error = true;
                e.woken = true;
            }
            _ => {}
        }
    }

    /// Drops datagrams a socket must not see: those of the other family,
    /// and those not from the connected peer (udp(7)).
    fn refresh_udp(&mut self, e: &mut Entry) {
        let State::Udp(Udp {
            handle: Some(h),
            peer,
            ..
        }) = &e.state
        else {
            return;
        };
        let s = self.sockets.get_mut::<udp::Socket>(*h);
        while let Ok((_, meta)) = s.peek() {
            let from = SocketAddr::new(to_ip(meta.endpoint.addr), meta.endpoint.port);
            let wrong_family = match from {
                SocketAddr::V4(_) => e.v6 && e.opts.v6only,
                SocketAddr::V6(_) => !e.v6,
            };
            let stranger = peer.is_some_and(|p| family_form(e.v6, from) != p);
            if !(wrong_family || stranger) {
                break;
            }
            let id = meta.meta.id;
            let _ = s.recv();
            self.device.arrival(id, true);
        }
    }

    /// A closed socket that receives data answers with a RST, as Linux's
    /// (tcp_rcv_state_process on an orphan): nobody will ever read it, and
    /// the writer learns so (EPIPE/ECONNRESET) instead of filling a buffer.
    fn abort_orphans_with_data(&mut self) -> bool {
        let mut any = false;
        for o in &mut self.orphans {
            let s = self.sockets.get_mut::<tcp::Socket>(o.handle);
            if s.recv_queue() > 0 && s.state() != tcp::State::Closed {
                s.abort();
                o.fresh = true;
                any = true;
            }
        }
        any
    }

    fn reap_orphans(&mut self) {
        let now = self.now();
        let mut i = 0;
        while i < self.orphans.len() {
            let o = &mut self.orphans[i];
            if o.fresh {
                o.fresh = false;
                i += 1;
                continue;
            }
            let h = o.handle;
            let s = self.sockets.get_mut::<tcp::Socket>(h);
            // On loopback no segment is ever lost, so TIME-WAIT guards
            // nothing and would only hold the port.
            let done = matches!(s.state(), tcp::State::Closed | tcp::State::TimeWait);
            if done {
                let o = self.orphans.swap_remove(i);
                if let Some(port) = o.port {
                    self.ports.remove(Proto::Tcp, port, Owner::Orphan(h));
                }
                self.free(h);
                continue;
            }
            if now >= o.deadline {
                s.abort();
                o.fresh = true;
            }
            i += 1;
        }
    }

    /// Ids whose readiness differs from what was last reported.
    fn collect_changes(&mut self) -> Vec<SocketId> {
        let mut changed = Vec::new();
        let ids: Vec<SocketId> = self.entries.keys().copied().collect();
        for id in ids {
            let Some(e) = self.entries.get(&id) else {
                continue;
            };
            let r = self.readiness(e);
            let level = self.rx_level(e);
            let Some(e) = self.entries.get_mut(&id) else {
                continue;
            };
            // More data (or another connection) on a socket that was
            // readable already is an edge too (sk_data_ready wakes
            // edge-triggered epoll waiters on every arrival): it is news
            // to every waiter.
            let arrived = level > e.rx_level;
            if arrived {
                e.wake.data = true;
                e.woken = true;
            }
            e.rx_level = level;
            if let State::Relay(_) = e.state {
                // A relayed connection's FIN and errors show as readiness.
                if r.rdhup && !e.last.rdhup {
                    e.wake.fin = true;
                    e.wake.fin_both |= e.shut_wr;
                    e.woken = true;
                }
                if r.error && !e.last.error {
                    e.wake.error = true;
                    e.woken = true;
                }
            }
            if e.nospace && r.writable {
                e.nospace = false;
                // sk_stream_write_space: not once writing is shut down.
                if !e.shut_wr {
                    e.wake.space = true;
                    e.woken = true;
                }
            }
            if r != e.last || arrived {
                e.edges += 1;
            }
            // Other wake-ups (room to write) are news only to a socket
            // that wants signals.
            if r != e.last || arrived || (e.woken && e.fasync) {
                changed.push(id);
                e.last = r;
                e.woken = false;
            }
        }
        changed
    }

    /// Bytes waiting to be read (a listener: connections waiting to be
    /// accepted), for telling arrivals apart.
    fn rx_level(&self, e: &Entry) -> usize {
        match &e.state {
            State::Listen(l) => l.ready.len(),
            State::Conn(c) => self.sockets.get::<tcp::Socket>(c.handle).recv_queue(),
            State::Relay(r) => r.bytes_readable(),
            State::Udp(Udp {
                handle: Some(h), ..
            }) => self.sockets.get::<udp::Socket>(*h).recv_queue(),
            _ => 0,
        }
    }

    /// After an operation on `id`: what it took out lowers the level.
    fn lower_rx_level(&mut self, id: SocketId) {
        let Some(level) = self.entries.get(&id).map(|e| self.rx_level(e)) else {
            return;
        };
        if let Some(e) = self.entries.get_mut(&id) {
            e.rx_level = e.rx_level.min(level);
        }
    }

    /// When the timer thread must next run the protocol.
    fn next_poll(&mut self) -> Option<std::time::Instant> {
        let now = self.now();
        let at = self.iface.poll_at(now, &self.sockets)?;
        let micros = at.total_micros().max(0) as u64;
        Some(self.epoch + Duration::from_micros(micros))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Domain, StackConfig};

    fn retry<T>(mut f: impl FnMut() -> Result<T, Errno>) -> T {
        let end = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            match f() {
                Err(Errno::EAGAIN) if std::time::Instant::now() < end => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                r => return r.expect("operation"),
            }
        }
    }

    /// The TCP segments sent since the last call: source, destination,
    /// flags and the TOS (traffic class) byte of their IP header.
    fn segments(stack: &Stack) -> Vec<(SocketAddr, SocketAddr, u8, u8)> {
        lock(&stack.inner).device.take_tcp_log()
    }

    fn tos_opt(v4: bool, v: u8) -> SockOpt {
        if v4 {
            SockOpt::Tos(v)
        } else {
            SockOpt::TrafficClass(v)
        }
    }

    /// The TOS of every segment from `from`, and whether there were any.
    fn tos_from(segs: &[(SocketAddr, SocketAddr, u8, u8)], from: SocketAddr) -> Vec<u8> {
        segs.iter().filter(|s| s.0 == from).map(|s| s.3).collect()
    }

    /// A connection between sockets with `IP_TOS`/`IPV6_TCLASS` set emits
    /// its segments with those values in the IP header: the client's SYN
    /// and data, the listener's SYN-ACK, the accepted socket's data (its
    /// listener's value, inherited), and a value changed on a live
    /// connection from then on. `listen_at` in the listener's family;
    /// `connect_v4`: the client is IPv4 (to a dual-stack listener).
    fn emitted_headers_carry_tos(listen_at: &str, connect_v4: bool) {
        let stack = Stack::new(StackConfig::default());
        let listen_at: SocketAddr = listen_at.parse().expect("address");
        let lv6 = listen_at.is_ipv6();
        let l = stack
            .socket(
                if lv6 { Domain::Inet6 } else { Domain::Inet },
                SocketType::Stream,
            )
            .expect("socket");
        // The listener's values for both families: a dual-stack one
        // answers IPv4 peers with its IPv4 TOS.
        l.set_option(SockOpt::Tos(0x28)).expect("IP_TOS");
        if lv6 {
            l.set_option(SockOpt::TrafficClass(0x48))
                .expect("IPV6_TCLASS");
        }
        l.bind(listen_at).expect("bind");
        l.listen(4).expect("listen");
        let port = l.local_addr().expect("addr").port();
        let server_tos = if connect_v4 { 0x28 } else { 0x48 };
        let (domain, to) = if connect_v4 {
            (Domain::Inet, SocketAddr::from(([127, 0, 0, 1], port)))
        } else {
            (
                Domain::Inet6,
                SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port)),
            )
        };
        let c = stack.socket(domain, SocketType::Stream).expect("socket");
        c.set_option(tos_opt(connect_v4, 0xb8)).expect("tos");
        segments(&stack);
        assert_eq!(c.connect(to), Err(Errno::EINPROGRESS));
        let (s, _) = retry(|| l.accept());
        let caddr = c.local_addr().expect("local");
        let caddr = SocketAddr::new(canonical(caddr.ip()), caddr.port());
        let saddr = SocketAddr::new(canonical(to.ip()), port);
        assert_eq!(retry(|| c.send(b"ping")), 4);
        let mut buf = [0u8; 8];
        assert_eq!(retry(|| s.recv(&mut buf, false)), 4);
        assert_eq!(retry(|| s.send(b"pong")), 4);
        assert_eq!(retry(|| c.recv(&mut buf, false)), 4);
        let segs = segments(&stack);
        let syn = segs
            .iter()
            .find(|x| x.0 == caddr && x.2 & 0x12 == 0x02)
            .expect("SYN");
        assert_eq!(syn.3, 0xb8, "SYN {segs:?}");
        let syn_ack = segs
            .iter()
            .find(|x| x.0 == saddr && x.2 & 0x12 == 0x12)
            .expect("SYN-ACK");
        assert_eq!(syn_ack.3, server_tos, "SYN-ACK {segs:?}");
        let client = tos_from(&segs, caddr);
        let server = tos_from(&segs, saddr);
        assert!(client.len() >= 3 && server.len() >= 2, "{segs:?}");
        assert!(client.iter().all(|&t| t == 0xb8), "{segs:?}");
        assert!(server.iter().all(|&t| t == server_tos), "{segs:?}");
        // The accepted IPv4 socket's IP_PKTOPTIONS: what its handshake's
        // header carried.
        if connect_v4 {
            let p = s.pkt_options().expect("pktoptions");
            assert_eq!(
                (p.ifindex, p.ttl, p.tos),
                (crate::LOOPBACK_IFINDEX, crate::HOP_LIMIT, 0xb8)
            );
            assert_eq!(p.local, std::net::Ipv4Addr::LOCALHOST);
        }
        // getsockopt on the accepted socket: the listener's value.
        assert_eq!(
            s.option(if connect_v4 {
                SockOptName::Tos
            } else {
                SockOptName::TrafficClass
            }),
            Ok(tos_opt(connect_v4, server_tos))
        );

        // Changed on live connections: the next segments follow.
        s.set_option(tos_opt(connect_v4, 0x10)).expect("tos");
        c.set_option(tos_opt(connect_v4, 0)).expect("tos");
        assert_eq!(retry(|| s.send(b"late")), 4);
        assert_eq!(retry(|| c.recv(&mut buf, false)), 4);
        let segs = segments(&stack);
        let server = tos_from(&segs, saddr);
        let client = tos_from(&segs, caddr);
        assert!(!server.is_empty() && !client.is_empty(), "{segs:?}");
        assert!(server.iter().all(|&t| t == 0x10), "{segs:?}");
        assert!(client.iter().all(|&t| t == 0), "{segs:?}");

        // Closed: no marks are left behind.
        drop((c, s, l));
        let end = std::time::Instant::now() + Duration::from_secs(5);
        while stack.stats().internal_sockets > 0 && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        let g = lock(&stack.inner);
        assert!(g.tcp_marked.is_empty());
        assert_eq!(g.device.tcp_marks_left(), 0);
    }

    #[test]
    fn tcp_segments_carry_ip_tos() {
        emitted_headers_carry_tos("127.0.0.1:0", true);
    }

    #[test]
    fn tcp_segments_carry_ipv6_tclass() {
        emitted_headers_carry_tos("[::1]:0", false);
    }

    #[test]
    fn dual_stack_listener_answers_ipv4_with_ip_tos() {
        emitted_headers_carry_tos("[::]:0", true);
    }
}
