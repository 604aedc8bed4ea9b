//! TCP/IP for one sandbox, on smoltcp, plus the egress policy.
//!
//! The Sentry implements `AF_INET`/`AF_INET6` sockets on top of this crate.
//! Every operation is non-blocking: where Linux would sleep, it returns
//! `EAGAIN` (or `EINPROGRESS` for connect), and the Sentry waits for the
//! stack's notifier to say that readiness may have changed.
//!
//! Progress: each operation runs the protocol (smoltcp's `Interface::poll`)
//! to quiescence before it returns, so on loopback a `send` has put its bytes
//! in the peer's receive buffer by the time it returns; a background thread
//! per stack runs the timers (retransmission, delayed ACK, keep-alive,
//! orphaned connections). See [`Stack`].
//!
//! Integration with the Sentry:
//!
//! * one [`Stack::new`] per sandbox; [`Stack::set_notifier`] with a function
//!   that wakes the waiters of the [`SocketId`]s it is given (or all socket
//!   waiters: ids are a hint, never needed for correctness);
//! * a guest socket's file description owns a [`Socket`]; dropping it is
//!   `close`;
//! * a blocking call is a loop: try the operation; on `EAGAIN` (and for a
//!   blocking `connect`, after `EINPROGRESS`), sleep until the notifier
//!   names the socket, a signal arrives, or `SO_RCVTIMEO`/`SO_SNDTIMEO`
//!   expires, then try again. A blocking connect ends with
//!   [`Socket::take_error`];
//! * poll/epoll map [`Readiness`] to poll bits (see its docs) and re-read it
//!   after each notification;
//! * `MSG_WAITALL`, `MSG_DONTWAIT`, `SIGPIPE` on `EPIPE`, `O_NONBLOCK` and
//!   the sockaddr encoding stay in the Sentry.

#![forbid(unsafe_code)]

pub mod audit;
mod device;
pub mod dns;
mod http;
pub mod jks;
pub mod policy;
mod ports;
mod relay;
mod sniff;
mod stack;
pub mod tls;
mod udp_relay;

#[cfg(test)]
mod link_tests;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

pub use abi::Errno;
pub use policy::{Decision, IpNet, Policy};
pub use stack::{KeepaliveDefaults, Socket, Stack, EGRESS_ADDR_V4, EGRESS_ADDR_V6};

/// A socket's identity within its stack, stable for its lifetime and never
/// reused by the same stack. The notifier reports these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SocketId(pub u64);

/// Called (outside any netstack lock, on whichever thread made progress)
/// with the sockets whose [`Readiness`] changed. It must not block; it may
/// call back into the stack.
pub type Notifier = Arc<dyn Fn(&[SocketId]) + Send + Sync>;

/// What the stack is attached to.
#[derive(Clone, Debug, Default)]
pub enum Mode {
    /// `--network=none`: interface `lo` with 127.0.0.1/8 and ::1/128 and
    /// nothing else; as on Linux, every address of 127.0.0.0/8 is local
    /// (sockets bind, listen and connect anywhere in it; an unbound socket
    /// sends from 127.0.0.1). Connecting anywhere else fails with
    /// `ENETUNREACH`.
    #[default]
    Loopback,
    /// `--network=sandbox`: loopback as above, plus a link to the outside
    /// for what the egress policy allows. The link is a user-space relay
    /// (see the `relay` module): a TCP connection to an allowed
    /// destination is carried by a host connection opened only after the
    /// policy said yes; anything else gets `ECONNREFUSED` at once. UDP
    /// datagrams to an allowed destination go out through a host UDP
    /// socket opened for the guest's socket, and replies from that
    /// destination come back to it (see the `udp_relay` module); a refused
    /// destination gets `EPERM` from sendto and `ECONNREFUSED` from
    /// connect. DNS to the sandbox's own resolver is answered by the Sentry.
    /// The sandbox's addresses on that link ([`StackConfig::link`]) are
    /// the stack's own as well: sockets bind, listen and connect there,
    /// delivered locally as loopback is.
    Egress,
}

/// The sandbox's own addresses on its link to the outside in
/// [`Mode::Egress`], with their prefix lengths: `getsockname` shows them on
/// relayed connections, and the stack delivers to them locally. The default
/// is the link `do` sets up itself ([`EGRESS_ADDR_V4`]/24 and
/// [`EGRESS_ADDR_V6`]/64); in OCI mode the runtime gives the addresses of
/// the interface the engine put in the container's network namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// At most [`MAX_LINK_ADDRS`] addresses (later ones are ignored), each
    /// with its prefix length. The first of each family is the source of
    /// relayed connections of that family; a family without one has no
    /// route out (`ENETUNREACH`).
    pub addrs: Vec<(IpAddr, u8)>,
}

/// How many addresses a [`Link`] may hold: smoltcp's interface table
/// (`iface-max-addr-count-8`) less loopback's two.
pub const MAX_LINK_ADDRS: usize = 6;

impl Default for Link {
    fn default() -> Link {
        Link {
            addrs: vec![
                (IpAddr::V4(EGRESS_ADDR_V4), 24),
                (IpAddr::V6(EGRESS_ADDR_V6), 64),
            ],
        }
    }
}

impl Link {
    /// The addresses the stack takes: the first [`MAX_LINK_ADDRS`] unicast
    /// ones (not loopback's) with a prefix length within their family's
    /// width.
    pub fn usable(&self) -> impl Iterator<Item = (IpAddr, u8)> + '_ {
        self.addrs
            .iter()
            .copied()
            .filter(|(a, p)| {
                let width = if a.is_ipv4() { 32 } else { 128 };
                *p <= width && !a.is_unspecified() && !a.is_loopback() && !a.is_multicast()
            })
            .take(MAX_LINK_ADDRS)
    }

    /// The first address of `ip`'s family: the source of a relayed
    /// connection to `ip`.
    pub fn source_for(&self, ip: IpAddr) -> Option<IpAddr> {
        self.usable()
            .map(|(a, _)| a)
            .find(|a| a.is_ipv4() == ip.is_ipv4())
    }
}

/// Bounds on what one stack (one sandbox) may hold. Every buffer the guest
/// can fill is bounded by these, as ARCHITECTURE.md requires.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Sockets the guest may hold open (`socket` and `accept` fail with
    /// `ENOBUFS` beyond it). Internal sockets (listen slots, connections
    /// closed but still finishing) are bounded by twice this.
    pub max_sockets: usize,
    /// Largest accepted `listen` backlog (Linux's `somaxconn`).
    pub max_backlog: usize,
    /// Default TCP receive and send buffer, bytes.
    pub tcp_buffer: usize,
    /// Largest TCP buffer `SO_RCVBUF`/`SO_SNDBUF` can ask for.
    pub max_tcp_buffer: usize,
    /// Default UDP receive and send buffer, bytes.
    pub udp_buffer: usize,
    /// Largest UDP buffer.
    pub max_udp_buffer: usize,
    /// Sum of all socket buffers of the stack; allocation beyond it fails
    /// with `ENOBUFS`.
    pub memory_budget: usize,
    /// How long a `connect` may wait for the handshake (`ETIMEDOUT`).
    pub connect_timeout: Duration,
    /// How long a closed connection may take to finish its FIN exchange
    /// before it is reset (Linux's `tcp_fin_timeout` plus orphan retries).
    pub orphan_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_sockets: 1024,
            max_backlog: 4096,
            tcp_buffer: 256 << 10,
            max_tcp_buffer: 4 << 20,
            udp_buffer: 208 << 10,
            max_udp_buffer: 4 << 20,
            memory_budget: 512 << 20,
            connect_timeout: Duration::from_secs(75),
            orphan_timeout: Duration::from_secs(60),
        }
    }
}

/// Who runs the protocol after an operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Progress {
    /// The calling thread, before the operation returns (the default: no
    /// thread hand-off on the data path); the timer thread only for timers.
    #[default]
    Inline,
    /// Only the stack's thread, woken by each operation. Kept for
    /// comparison (see the crate README numbers); slower on loopback.
    Background,
}

/// How to build a [`Stack`].
#[derive(Clone, Debug, Default)]
pub struct StackConfig {
    pub mode: Mode,
    /// The link's addresses in [`Mode::Egress`] (unused otherwise).
    pub link: Link,
    pub progress: Progress,
    /// Egress rules for destinations outside the sandbox.
    pub policy: Arc<Policy>,
    pub limits: Limits,
    /// Print a line on the Sentry's standard error for every destination
    /// the policy refuses (the user's view of the egress log; the debug
    /// log has them either way).
    pub report_refusals: bool,
    /// `--egress-log`: one line per attempt to leave the sandbox.
    pub audit: Option<Arc<audit::AuditLog>>,
    /// The sandbox's CA, for hosts with secrets or HTTP rules.
    pub tls: Option<Arc<tls::Interceptor>>,
}

/// Address family of a socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Domain {
    /// `AF_INET`
    Inet,
    /// `AF_INET6`
    Inet6,
}

/// Socket type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocketType {
    /// `SOCK_STREAM` (TCP)
    Stream,
    /// `SOCK_DGRAM` (UDP)
    Datagram,
}

/// `shutdown(2)`'s `how`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shutdown {
    Read,
    Write,
    Both,
}

/// Poll state of a socket. The Sentry maps it to poll bits:
/// `readable` → `POLLIN|POLLRDNORM`, `writable` → `POLLOUT|POLLWRNORM`,
/// `hup` → `POLLHUP`, `rdhup` → `POLLRDHUP`, `error` → `POLLERR`.
/// The values follow Linux's `tcp_poll`/`udp_poll`: a fresh TCP socket is
/// `writable|hup`; a listener is readable when a connection waits; EOF and
/// errors make a socket readable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Readiness {
    pub readable: bool,
    pub writable: bool,
    pub hup: bool,
    pub rdhup: bool,
    pub error: bool,
}

/// What happened to a socket since its wake-ups were last taken
/// ([`Stack::take_wakeups`]), for signal-driven I/O (`O_ASYNC`): the
/// moments Linux's socket callbacks call `sk_wake_async()`. Readiness is a
/// level; these are edges, and more data arriving on a socket that was
/// already readable is one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wakeups {
    /// data, a datagram or (on a listener) a connection arrived
    /// (`sk_data_ready`: `POLL_IN`)
    pub data: bool,
    /// an active connect completed (`tcp_finish_connect`: `POLL_OUT`)
    pub connected: bool,
    /// the peer's FIN arrived (`tcp_fin`: `POLL_HUP` when this side had
    /// shut down writing already, else `POLL_IN`)
    pub fin: bool,
    /// with `fin`: this side had shut down writing
    pub fin_both: bool,
    /// a reset or a refused or timed-out connect (`sk_error_report`:
    /// `POLL_ERR`)
    pub error: bool,
    /// room to send again after a send found none (`sk_stream_write_space`
    /// with `SOCKWQ_ASYNC_NOSPACE` set: `POLL_OUT`)
    pub space: bool,
}

impl Wakeups {
    /// Whether nothing happened.
    pub fn is_empty(&self) -> bool {
        *self == Wakeups::default()
    }
}

/// A socket option, with its value. Names are Linux's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SockOpt {
    /// `SO_REUSEADDR`
    ReuseAddr(bool),
    /// `SO_REUSEPORT` (stored and honoured by bind conflicts; no load
    /// balancing between listeners).
    ReusePort(bool),
    /// `SO_KEEPALIVE`
    KeepAlive(bool),
    /// `SO_RCVBUF`: as Linux, the value set is doubled and clamped; it takes
    /// effect for connections made after it is set.
    RcvBuf(usize),
    /// `SO_SNDBUF`, as `RcvBuf`.
    SndBuf(usize),
    /// `SO_LINGER`: `Some(0)` makes close reset the connection; other
    /// values behave as a graceful close (no operation here blocks).
    Linger(Option<Duration>),
    /// `TCP_NODELAY`
    NoDelay(bool),
    /// `TCP_KEEPIDLE`
    KeepIdle(Duration),
    /// `TCP_KEEPINTVL` (1 to 32767 seconds): stored and read back, and
    /// inherited by accepted connections; probes go out every
    /// `TCP_KEEPIDLE`.
    KeepIntvl(Duration),
    /// `TCP_KEEPCNT` (1 to 127): stored and read back, as `KeepIntvl`.
    KeepCnt(u8),
    /// `IPV6_V6ONLY` (only before bind, only on `AF_INET6`).
    V6Only(bool),
    /// `IP_TTL`: the TTL of the IPv4 packets the socket sends (the Sentry
    /// checks the range and turns Linux's -1 into [`HOP_LIMIT`]).
    Ttl(u8),
    /// `IPV6_UNICAST_HOPS`: the hop limit of its IPv6 packets (0 allowed,
    /// as in Linux).
    HopLimit(u8),
    /// `IP_TOS`: the TOS byte of its IPv4 packets, as the guest set it
    /// (the Sentry applies Linux's masking).
    Tos(u8),
    /// `IPV6_TCLASS`: the traffic class of its IPv6 packets.
    TrafficClass(u8),
    /// `IP_MULTICAST_TTL`: stored and read back; the netstack carries no
    /// multicast, so nothing is sent with it.
    MulticastTtl(u8),
    /// `IP_RECVERR` / `IPV6_RECVERR`: errors the netstack learns from
    /// ICMP (a port unreachable on loopback) are reported on unconnected
    /// UDP sockets too and queued for `MSG_ERRQUEUE`.
    RecvErr(bool),
}

/// Which option to read with [`Socket::option`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SockOptName {
    ReuseAddr,
    ReusePort,
    KeepAlive,
    RcvBuf,
    SndBuf,
    Linger,
    NoDelay,
    KeepIdle,
    KeepIntvl,
    KeepCnt,
    V6Only,
    Ttl,
    HopLimit,
    Tos,
    TrafficClass,
    MulticastTtl,
    RecvErr,
}

/// What [`Socket::recv_from`] received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes copied into the caller's buffer.
    pub len: usize,
    /// Size of the datagram (UDP); equals `len` for TCP. `full_len > len`
    /// means the datagram was truncated (`MSG_TRUNC`).
    pub full_len: usize,
    /// Sender (TCP: the peer).
    pub from: SocketAddr,
    /// The address a datagram was sent to (`IP_PKTINFO`); `None` for TCP.
    pub local: Option<std::net::IpAddr>,
    /// A datagram's TTL (IPv4) or hop limit (IPv6) as its header carried
    /// it (`IP_RECVTTL`, `IPV6_RECVHOPLIMIT`); `None` for TCP.
    pub hop_limit: Option<u8>,
    /// A datagram's TOS byte (IPv4) or traffic class (IPv6) as its header
    /// carried it (`IP_RECVTOS`, `IPV6_RECVTCLASS`); `None` for TCP.
    pub tos: Option<u8>,
    /// When a datagram arrived in the netstack (`SO_TIMESTAMP`); `None`
    /// for TCP, or when the stack no longer knows (see
    /// `device::MAX_ARRIVALS`).
    pub arrived: Option<std::time::Instant>,
}

/// What `getsockopt(IP_PKTOPTIONS)` reports of a TCP socket: Linux's
/// `inet_rcv_saddr`, `mc_index`, `mc_ttl` and `rcv_tos`, which an
/// accepted IPv4 connection takes from its handshake (the interface it
/// came in on, the peer's TTL and TOS) and other sockets keep at their
/// defaults (0, `IP_MULTICAST_TTL`, 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PktOptions {
    /// The local IPv4 address (127.0.0.6, Linux's `LOOPBACK4_IPV6`, for
    /// an IPv6 one; 0.0.0.0 when unbound).
    pub local: std::net::Ipv4Addr,
    /// The interface index.
    pub ifindex: i32,
    /// The TTL.
    pub ttl: u8,
    /// The TOS byte.
    pub tos: u8,
}

/// An error the netstack learnt about a datagram the socket sent, for
/// `recvmsg(MSG_ERRQUEUE)` (`IP_RECVERR`): Linux's `sock_extended_err`
/// with what the ICMP message said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedError {
    /// `ee_errno`
    pub errno: Errno,
    /// ICMP type and code (`ee_type`, `ee_code`): 3/3 for IPv4's port
    /// unreachable, 1/4 for IPv6's.
    pub icmp_type: u8,
    pub icmp_code: u8,
    /// Who reported it (the ICMP message's source: `SO_EE_OFFENDER`).
    pub offender: std::net::IpAddr,
    /// Where the datagram was going (`msg_name`).
    pub dest: SocketAddr,
    /// The start of the datagram's payload the ICMP message quoted.
    pub payload: Vec<u8>,
}

/// The default TTL (hop limit) of the packets the netstack sends (Linux's
/// `ip_default_ttl` and IPv6 `hop_limit` sysctls); datagrams relayed from
/// outside are injected with it too.
pub const HOP_LIMIT: u8 = 64;

/// The default TOS (traffic class) byte.
pub const TOS: u8 = 0;

/// The index of the loopback interface, the interface every packet of the
/// netstack comes in on.
pub const LOOPBACK_IFINDEX: i32 = 1;

/// Counters for tests and debugging.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Guest-visible sockets.
    pub sockets: usize,
    /// smoltcp sockets, including listen slots and orphans.
    pub internal_sockets: usize,
    /// Closed connections still finishing.
    pub orphans: usize,
    /// Bytes of socket buffers allocated.
    pub buffer_bytes: usize,
}
