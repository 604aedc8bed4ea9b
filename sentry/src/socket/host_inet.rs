//! `--network host`: Internet sockets that are host sockets owned by the
//! Sentry, in the host's network namespace, with no egress policy.
//!
//! The guest never holds a host descriptor: each guest socket is a file
//! description whose host socket the Sentry created non-blocking and uses
//! on the guest's behalf. Blocking is the Sentry's: a call that would block
//! sleeps on the socket's wait queue, which a watcher thread notifies
//! whenever the host reports a readiness edge on it (one host epoll
//! instance for all of them, edge-triggered), so signals interrupt the wait
//! as they do for every other blocking call.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use abi::Errno;
use netstack::{Domain, SocketType};

use crate::host::socket as host_sys;
use crate::kernel::wait::WaitQueue;
use crate::sync::Locked;

/// The host sockets of one sandbox and the thread watching them.
pub struct HostNet {
    epoll: OwnedFd,
    /// per-socket edge counters (for edge-triggered guest epoll) and
    /// wait queues, by key
    edges: Mutex<HashMap<u64, (Arc<AtomicU64>, WaitQueue)>>,
    next_key: AtomicU64,
}

impl std::fmt::Debug for HostNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostNet").finish_non_exhaustive()
    }
}

impl HostNet {
    /// Creates the watcher; a readiness edge wakes its socket's waiters.
    pub fn new() -> std::io::Result<Arc<HostNet>> {
        let net = Arc::new(HostNet {
            epoll: host_sys::epoll_create()?,
            edges: Mutex::new(HashMap::new()),
            next_key: AtomicU64::new(1),
        });
        // The watcher lives as long as the Sentry process (one sandbox).
        let watched = net.clone();
        std::thread::Builder::new()
            .name("host-net".into())
            .spawn(move || {
                let net = watched;
                let mut keys = [0u64; 64];
                loop {
                    let n = match host_sys::epoll_wait(net.epoll.as_fd(), &mut keys) {
                        Ok(n) => n,
                        Err(e) => {
                            tracing::warn!("host network watcher stopped: {e}");
                            return;
                        }
                    };
                    if n == 0 {
                        continue;
                    }
                    let edges = net.edges.locked();
                    for k in &keys[..n] {
                        if let Some((c, q)) = edges.get(k) {
                            c.fetch_add(1, Ordering::Relaxed);
                            q.notify();
                        }
                    }
                }
            })?;
        Ok(net)
    }

    #[allow(clippy::type_complexity)]
    fn adopt(
        self: &Arc<Self>,
        fd: OwnedFd,
    ) -> Result<(u64, Arc<AtomicU64>, WaitQueue, OwnedFd), Errno> {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let edges = Arc::new(AtomicU64::new(0));
        let waiters = WaitQueue::new();
        self.edges
            .locked()
            .insert(key, (edges.clone(), waiters.clone()));
        if let Err(e) = host_sys::epoll_watch(self.epoll.as_fd(), fd.as_fd(), key) {
            self.forget(key);
            return Err(e.into());
        }
        Ok((key, edges, waiters, fd))
    }

    fn forget(&self, key: u64) {
        self.edges.locked().remove(&key);
    }
}

/// A guest `AF_INET`/`AF_INET6` TCP or UDP socket backed by a host socket.
pub struct HostInetSocket {
    fd: OwnedFd,
    /// address family
    pub domain: Domain,
    /// TCP or UDP
    pub ty: SocketType,
    key: u64,
    edges: Arc<AtomicU64>,
    /// callers blocked on the socket, woken by the host's readiness edges
    pub waiters: WaitQueue,
    net: Arc<HostNet>,
    /// `SO_RCVTIMEO`/`SO_SNDTIMEO` as the host set them (the host socket
    /// itself never blocks, so the Sentry's waits apply them)
    pub timeouts: super::SockTimeouts,
}

impl std::fmt::Debug for HostInetSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostInetSocket")
            .field("domain", &self.domain)
            .field("ty", &self.ty)
            .finish_non_exhaustive()
    }
}

impl Drop for HostInetSocket {
    fn drop(&mut self) {
        // Closing the descriptor (after this) removes it from the epoll set.
        self.net.forget(self.key);
    }
}

impl HostInetSocket {
    /// A new host socket (non-blocking and close-on-exec on the host: the
    /// guest's blocking mode is the file description's, kept by the Sentry).
    pub fn new(net: &Arc<HostNet>, domain: Domain, ty: SocketType) -> Result<Self, Errno> {
        let (d, t, p) = (
            match domain {
                Domain::Inet => libc::AF_INET,
                Domain::Inet6 => libc::AF_INET6,
            },
            match ty {
                SocketType::Stream => libc::SOCK_STREAM,
                SocketType::Datagram => libc::SOCK_DGRAM,
            },
            match ty {
                SocketType::Stream => libc::IPPROTO_TCP,
                SocketType::Datagram => libc::IPPROTO_UDP,
            },
        );
        let fd = host_sys::socket(d, t | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, p)?;
        Self::wrap(net, fd, domain, ty)
    }

    fn wrap(
        net: &Arc<HostNet>,
        fd: OwnedFd,
        domain: Domain,
        ty: SocketType,
    ) -> Result<Self, Errno> {
        let (key, edges, waiters, fd) = net.adopt(fd)?;
        Ok(HostInetSocket {
            fd,
            domain,
            ty,
            key,
            edges,
            waiters,
            net: net.clone(),
            timeouts: super::SockTimeouts::default(),
        })
    }

    /// The host socket, for the calls in `crate::host::socket`.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// `accept` without waiting: the connection and its peer's address.
    pub fn accept(&self) -> Result<(HostInetSocket, Vec<u8>), Errno> {
        let (c, peer) = host_sys::accept(self.fd())?;
        let mut conn = Self::wrap(&self.net, c, self.domain, SocketType::Stream)?;
        // The host's accepted socket inherits the listener's timeouts
        // (`sk_clone_lock`); so does the Sentry's record of them.
        conn.timeouts = self.timeouts.clone();
        Ok((conn, peer))
    }

    /// The host's poll bits for `events` (plus errors and hang-ups), now.
    pub fn poll(&self, events: i16) -> i16 {
        crate::host::poll_events(self.fd(), events)
    }

    /// Whether the host reports any of `events` (or an error or hang-up).
    pub fn ready(&self, events: i16) -> bool {
        self.poll(events) & (events | libc::POLLERR | libc::POLLHUP) != 0
    }

    /// Changes with every readiness edge the host reported.
    pub fn generation(&self) -> u64 {
        self.edges.load(Ordering::Relaxed)
    }

    /// `FIONREAD`.
    pub fn bytes_readable(&self) -> Result<i32, Errno> {
        Ok(crate::host::fionread(self.fd())?)
    }
}
