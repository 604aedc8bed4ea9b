//! Sockets. Unix domain sockets live entirely in the Sentry; Internet
//! sockets run on the sandbox's netstack, or with `--network host` are
//! host sockets the Sentry owns.

pub mod cmsg;
pub mod host_inet;
pub mod inet;
pub mod netlink;
pub mod unix;

use std::any::Any;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use abi::{Errno, Stat};

use crate::kernel::task::Task;
use crate::kernel::wait::WaitQueue;
use crate::kernel::Kernel;
use crate::mm::guestio::GuestBufs;
use crate::mm::GuestSlice;
use crate::vfs::fasync::Fasync;
use crate::vfs::file::{Blocker, Caller, FileDescription, FileImpl, FileKind};

/// The socket layer's sandbox-wide state, kept by the kernel.
#[derive(Debug, Default)]
pub struct SocketState {
    /// abstract Unix socket names
    pub unix: Arc<unix::Registry>,
    /// `--network host`: the guest's TCP and UDP sockets are host sockets
    /// the Sentry owns (the netstack then serves nothing Internet-facing)
    pub host_net: Option<Arc<host_inet::HostNet>>,
    /// netstack sockets with `O_ASYNC` descriptions
    pub inet_async: Arc<inet::AsyncSockets>,
    /// the wait queues of the guest's netstack sockets
    pub inet_queues: Arc<inet::InetQueues>,
}

/// The socket layer's state in `kernel` (boot puts it there).
pub fn state(kernel: &Kernel) -> &SocketState {
    kernel
        .sockets
        .downcast_ref()
        .expect("boot gives every kernel a SocketState")
}

/// What the socket calls do with one family's sockets (Linux's
/// `proto_ops`): each call decodes the descriptor, finds its [`Socket`]
/// with [`of`], and hands over the rest. `a` is the call's own arguments
/// where it has more than an address and a length. The families'
/// implementations live beside their calls in `syscalls/`.
pub trait Socket: Send + Sync + fmt::Debug + Any {
    /// The socket itself, for its family's own code.
    fn as_any(&self) -> &dyn Any;
    /// `SO_RCVTIMEO` and `SO_SNDTIMEO`.
    fn timeouts(&self) -> &SockTimeouts;
    /// The `poll(2)` bits that hold now (`events`: what was asked, plus
    /// errors and hang-ups).
    fn poll(&self, events: i16) -> i16;
    /// The queues notified when [`Socket::poll`] may change.
    fn wait_queues(&self, out: &mut Vec<WaitQueue>);
    /// Changes with every readiness edge (edge-triggered epoll).
    fn generation(&self) -> u64 {
        0
    }
    /// The descriptions to signal when it becomes readable (`O_ASYNC`).
    fn fasync(&self) -> Option<&Fasync> {
        None
    }
    /// `O_ASYNC` was turned on or off on one of its descriptions.
    fn async_changed(&self, kernel: &Kernel, on: bool) {
        let _ = (kernel, on);
    }
    /// `FIONREAD`.
    fn bytes_readable(&self) -> Result<i32, Errno> {
        Err(Errno::ENOTTY)
    }

    fn bind(&self, task: &Task, file: &FileDescription, addr: u64, len: u64) -> Result<u64, Errno>;
    fn listen(&self, task: &Task, file: &FileDescription, backlog: i32) -> Result<u64, Errno> {
        let _ = (task, file, backlog);
        Err(Errno::EOPNOTSUPP)
    }
    fn connect(
        &self,
        task: &Task,
        file: &FileDescription,
        addr: u64,
        len: u64,
    ) -> Result<u64, Errno>;
    /// `accept4(2)` (`flags` 0 for `accept`).
    fn accept(
        &self,
        task: &mut Task,
        file: &FileDescription,
        addr: u64,
        len_addr: u64,
        flags: u64,
    ) -> Result<u64, Errno> {
        let _ = (task, file, addr, len_addr, flags);
        Err(Errno::EOPNOTSUPP)
    }
    fn getsockname(
        &self,
        task: &Task,
        file: &FileDescription,
        addr: u64,
        len_addr: u64,
    ) -> Result<u64, Errno>;
    fn getpeername(
        &self,
        task: &Task,
        file: &FileDescription,
        addr: u64,
        len_addr: u64,
    ) -> Result<u64, Errno>;
    fn shutdown(&self, task: &Task, file: &FileDescription, how: u64) -> Result<u64, Errno>;
    /// `write(2)` and `writev(2)` (`flags`: `pwritev2`'s as `send` flags).
    fn write(
        &self,
        task: &Task,
        file: &FileDescription,
        data: &GuestBufs<'_>,
        flags: u64,
    ) -> Result<u64, Errno>;
    /// `read(2)` and `readv(2)`.
    fn read(&self, task: &Task, file: &FileDescription, dst: &GuestBufs<'_>) -> Result<u64, Errno>;
    fn sendto(&self, task: &Task, file: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno>;
    fn recvfrom(&self, task: &Task, file: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno>;
    fn sendmsg(
        &self,
        task: &Task,
        file: &FileDescription,
        msg: u64,
        flags: u64,
    ) -> Result<u64, Errno>;
    fn recvmsg(
        &self,
        task: &Task,
        file: &FileDescription,
        msg: u64,
        flags: u64,
    ) -> Result<u64, Errno>;
    fn setsockopt(&self, task: &Task, file: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno>;
    fn getsockopt(&self, task: &Task, file: &FileDescription, a: &[u64; 6]) -> Result<u64, Errno>;
}

/// The open file of a socket of any family.
#[derive(Debug)]
pub struct SocketFile(Box<dyn Socket>);

impl SocketFile {
    /// The file kind of a new description of `sock`.
    pub fn kind(sock: impl Socket) -> FileKind {
        FileKind::Impl(Arc::new(SocketFile(Box::new(sock))))
    }

    /// Its inode number, as `fstat` and `/proc/PID/fd` show it.
    fn ino(&self) -> u64 {
        self as *const SocketFile as u64 >> 4
    }
}

/// The socket behind `file`, if it is one.
pub fn of(file: &FileDescription) -> Option<&dyn Socket> {
    file.downcast::<SocketFile>().map(|s| &*s.0)
}

/// Whether `file` is a socket.
pub fn is_socket(file: &FileDescription) -> bool {
    of(file).is_some()
}

/// The socket of family type `T` behind `file`, if it is one.
pub fn downcast<T: Socket>(file: &FileDescription) -> Option<&T> {
    of(file).and_then(|s| s.as_any().downcast_ref())
}

impl FileImpl for SocketFile {
    // Reads and writes that reach the file itself (not through the
    // socket calls) find no connection to use.
    fn read(
        &self,
        _file: &FileDescription,
        _blk: Blocker<'_>,
        _bufs: &[GuestSlice],
        _at: Option<u64>,
    ) -> Result<u64, Errno> {
        Err(Errno::ENOTCONN)
    }

    fn write(
        &self,
        _file: &FileDescription,
        _blk: Blocker<'_>,
        _bufs: &[GuestSlice],
        _at: Option<u64>,
    ) -> Result<u64, Errno> {
        Err(Errno::ENOTCONN)
    }

    fn poll(&self, _caller: &dyn Caller, events: i16, _depth: u32) -> i16 {
        self.0.poll(events | libc::POLLERR | libc::POLLHUP)
    }

    fn generation(&self) -> u64 {
        self.0.generation()
    }

    fn stat(&self, _file: &FileDescription) -> Result<Stat, Errno> {
        let mut st = crate::vfs::pipe_stat_like(abi::S_IFSOCK | 0o777);
        st.ino = self.ino();
        Ok(st)
    }

    fn fasync_lists(&self) -> Option<[Option<&Fasync>; 2]> {
        self.0.fasync().map(|f| [Some(f), None])
    }

    fn link_name(&self) -> Option<Vec<u8>> {
        Some(format!("socket:[{}]", self.ino()).into_bytes())
    }

    fn bytes_readable(&self) -> Option<Result<i32, Errno>> {
        Some(self.0.bytes_readable())
    }

    fn wait_queues(&self, out: &mut Vec<WaitQueue>, _depth: u32) -> bool {
        self.0.wait_queues(out);
        false
    }
}

/// `SO_RCVTIMEO` (`SO_RCVTIMEO_OLD`; the 64-bit `_NEW` has the same layout
/// on x86-64).
pub const SO_RCVTIMEO: i32 = 20;
/// `SO_SNDTIMEO`.
pub const SO_SNDTIMEO: i32 = 21;
/// `SO_RCVTIMEO_NEW`.
pub const SO_RCVTIMEO_NEW: i32 = 66;
/// `SO_SNDTIMEO_NEW`.
pub const SO_SNDTIMEO_NEW: i32 = 67;

/// Whether `name` (at `SOL_SOCKET`) is one of the four timeout options,
/// and if so whether it is a receive timeout.
pub fn timeout_option(name: i32) -> Option<bool> {
    match name {
        SO_RCVTIMEO | SO_RCVTIMEO_NEW => Some(true),
        SO_SNDTIMEO | SO_SNDTIMEO_NEW => Some(false),
        _ => None,
    }
}

/// Linux counts socket timeouts in jiffies; `CONFIG_HZ=250` is the common
/// distribution setting (and the test machines'), so a set value rounds up
/// to 4 ms as it does natively (`sock_set_timeout`).
const HZ: u64 = 250;
const NONE: u64 = u64::MAX;

/// A socket's `SO_RCVTIMEO` and `SO_SNDTIMEO`: how long a blocking receive
/// (and `accept`) or send (and `connect`) may wait. Shared by every
/// descriptor of the socket.
#[derive(Debug)]
pub struct SockTimeouts {
    /// nanoseconds; [`NONE`] is "wait for ever" (Linux's
    /// `MAX_SCHEDULE_TIMEOUT`), 0 "do not wait"
    rcv: AtomicU64,
    snd: AtomicU64,
}

impl Default for SockTimeouts {
    fn default() -> Self {
        SockTimeouts {
            rcv: AtomicU64::new(NONE),
            snd: AtomicU64::new(NONE),
        }
    }
}

impl Clone for SockTimeouts {
    /// What an accepted socket inherits from its listener (`sk_clone_lock`
    /// copies the whole `struct sock`).
    fn clone(&self) -> Self {
        SockTimeouts {
            rcv: AtomicU64::new(self.rcv.load(Ordering::Relaxed)),
            snd: AtomicU64::new(self.snd.load(Ordering::Relaxed)),
        }
    }
}

impl SockTimeouts {
    fn slot(&self, rcv: bool) -> &AtomicU64 {
        if rcv {
            &self.rcv
        } else {
            &self.snd
        }
    }

    /// `setsockopt(SO_RCVTIMEO/SO_SNDTIMEO)` with the guest's `struct
    /// timeval` bytes, as Linux's `sock_set_timeout`: shorter than a
    /// timeval is `EINVAL`, `tv_usec` outside `0..1000000` is `EDOM`, a
    /// negative `tv_sec` sets "do not wait" (0 jiffies), zero is "no
    /// timeout", anything else rounds up to whole jiffies.
    pub fn set(&self, rcv: bool, val: &[u8]) -> Result<(), Errno> {
        let (Some(s), Some(u)) = (val.get(..8), val.get(8..16)) else {
            return Err(Errno::EINVAL);
        };
        let sec = i64::from_ne_bytes(s.try_into().map_err(|_| Errno::EINVAL)?);
        let usec = i64::from_ne_bytes(u.try_into().map_err(|_| Errno::EINVAL)?);
        if !(0..1_000_000).contains(&usec) {
            return Err(Errno::EDOM);
        }
        let nanos = if sec < 0 {
            0
        } else if sec == 0 && usec == 0 || sec as u64 >= i64::MAX as u64 / HZ - 1 {
            NONE
        } else {
            let jiffies = sec as u64 * HZ + (usec as u64).div_ceil(1_000_000 / HZ);
            jiffies.saturating_mul(1_000_000_000 / HZ).min(NONE - 1)
        };
        self.slot(rcv).store(nanos, Ordering::Relaxed);
        Ok(())
    }

    /// Stores a value the host already judged and rounded (a host
    /// socket's, read back as a `struct timeval`).
    pub fn set_exact(&self, rcv: bool, val: &[u8]) {
        let word = |r: std::ops::Range<usize>| {
            val.get(r)
                .and_then(|b| b.try_into().ok())
                .map_or(0, i64::from_ne_bytes)
        };
        let (sec, usec) = (word(0..8), word(8..16));
        let nanos = if sec <= 0 && usec <= 0 {
            // The host reports both "no timeout" and "do not wait" as
            // zero; only a negative `tv_sec` sets the latter, which the
            // caller saw.
            NONE
        } else {
            (sec as u64)
                .saturating_mul(1_000_000_000)
                .saturating_add(usec as u64 * 1000)
                .min(NONE - 1)
        };
        self.slot(rcv).store(nanos, Ordering::Relaxed);
    }

    /// Marks a timeout "do not wait" (a negative `tv_sec`).
    pub fn set_no_wait(&self, rcv: bool) {
        self.slot(rcv).store(0, Ordering::Relaxed);
    }

    /// `getsockopt`: the value as a `struct timeval` (`sock_get_timeout`).
    pub fn get(&self, rcv: bool) -> [u8; 16] {
        let n = self.slot(rcv).load(Ordering::Relaxed);
        let (sec, usec) = if n == NONE {
            (0, 0)
        } else {
            (
                (n / 1_000_000_000) as i64,
                (n % 1_000_000_000 / 1000) as i64,
            )
        };
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&sec.to_ne_bytes());
        out[8..].copy_from_slice(&usec.to_ne_bytes());
        out
    }

    /// When a call starting now must give up waiting: `None` without a
    /// timeout.
    pub fn deadline(&self, rcv: bool) -> Option<Instant> {
        let n = self.slot(rcv).load(Ordering::Relaxed);
        (n != NONE).then(|| {
            let now = Instant::now();
            now.checked_add(Duration::from_nanos(n))
                .unwrap_or(now + Duration::from_secs(1 << 32))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tv(sec: i64, usec: i64) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&sec.to_ne_bytes());
        b[8..].copy_from_slice(&usec.to_ne_bytes());
        b
    }

    #[test]
    fn timeouts_round_to_jiffies_and_validate_as_linux() {
        let t = SockTimeouts::default();
        assert_eq!(t.get(true), tv(0, 0));
        assert!(t.deadline(true).is_none());
        t.set(true, &tv(1, 500_000)).expect("valid timeval");
        assert_eq!(t.get(true), tv(1, 500_000));
        t.set(true, &tv(0, 1)).expect("valid timeval");
        assert_eq!(t.get(true), tv(0, 4000));
        assert_eq!(t.set(true, &tv(0, 1_000_000)), Err(Errno::EDOM));
        assert_eq!(t.set(true, &tv(0, -1)), Err(Errno::EDOM));
        assert_eq!(t.set(true, &tv(0, 1)[..12]), Err(Errno::EINVAL));
        t.set(false, &tv(-5, 0)).expect("valid timeval");
        assert_eq!(t.get(false), tv(0, 0));
        assert!(t.deadline(false).is_some_and(|d| d <= Instant::now()));
        t.set(false, &tv(0, 0)).expect("valid timeval");
        assert!(t.deadline(false).is_none());
        t.set(false, &tv(i64::MAX, 0)).expect("valid timeval");
        assert!(t.deadline(false).is_none());
    }
}
