//! POSIX message queues (mq_overview(7)): the sandbox's queues, which live
//! in the Sentry alone (never on the host), and the mqueue file system that
//! lists them at `/dev/mqueue`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use abi::{Errno, Stat, Timespec};

use crate::vfs::file::Blocker;

use crate::sync::Locked;
pub use abi::ipc::{MQ_PRIO_MAX, NOTIFY_COOKIE_LEN as COOKIE_LEN};
use abi::ipc::{NOTIFY_REMOVED, NOTIFY_WOKENUP};
use abi::signal::SI_MESGQ;
pub use abi::signal::{SIGEV_NONE, SIGEV_SIGNAL, SIGEV_THREAD};
/// `HARD_MSGMAX` and `HARD_MSGSIZEMAX`: the limits for everyone, and the
/// most the `fs.mqueue` sysctls may say.
pub const HARD_MSGMAX: i64 = 65536;
/// see [`HARD_MSGMAX`]
pub const HARD_MSGSIZEMAX: i64 = 16 << 20;

/// The IPC namespace's `/proc/sys/fs/mqueue` limits (mq_overview(7)),
/// Linux's defaults unless the container's `linux.sysctl` set them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `msg_max` and `msgsize_max`: the limits for callers without
    /// `CAP_SYS_RESOURCE`
    pub msg_max: i64,
    /// see `msg_max`
    pub msgsize_max: i64,
    /// `msg_default` and `msgsize_default`: a queue created without
    /// attributes (each no more than its maximum)
    pub msg_default: i64,
    /// see `msg_default`
    pub msgsize_default: i64,
    /// `queues_max`: queues a caller without `CAP_SYS_RESOURCE` may make
    /// exist
    pub queues_max: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            msg_max: 10,
            msgsize_max: 8192,
            msg_default: 10,
            msgsize_default: 8192,
            queues_max: 256,
        }
    }
}
/// Linux charges each queue's bookkeeping to `RLIMIT_MSGQUEUE` too: one
/// `struct msg_msg` per message and one priority tree node per priority
/// (48 bytes each on x86-64); the limit's arithmetic is part of the ABI.
const MSG_OVERHEAD: u64 = 48;
const NODE_OVERHEAD: u64 = 48;
/// `RLIMIT_MSGQUEUE`, as an index of the limits.
pub const RLIMIT_MSGQUEUE: usize = abi::rlimit::RLIMIT_MSGQUEUE as usize;
/// Message text all the sandbox's queues may hold together. Linux bounds it
/// by `RLIMIT_MSGQUEUE`, which root may raise; messages live in the
/// Sentry's own memory, so a bound holds whatever the guest's limits say
/// (a send past it is `ENOMEM`, as Linux's when it cannot allocate).
const MAX_QUEUED_BYTES: u64 = 256 << 20;
/// The size an mqueue inode reports (`FILENT_SIZE`).
const FILENT_SIZE: i64 = 80;
/// Device number of the mqueue file system.
pub const MQUEUE_DEV: u64 = 0x3_0000_0022;

/// Where a `SIGEV_THREAD` registration posts: glibc's netlink socket and
/// the cookie it gave, posted back as one datagram (glibc's helper thread
/// reads it and starts the user's function, or frees its data when the
/// registration went unused).
#[derive(Clone, Debug)]
pub struct ThreadNotify {
    /// the netlink socket's description, held as Linux holds the socket
    pub sock: Arc<crate::vfs::file::FileDescription>,
    /// the `sigev_value.sival_ptr` bytes read at registration
    pub cookie: [u8; COOKIE_LEN],
    /// queues a datagram on the socket (the socket layer's own code)
    pub post: fn(&crate::vfs::file::FileDescription, Vec<u8>),
}

impl ThreadNotify {
    /// Posts the cookie with `why` in its last byte.
    fn post(&self, why: u8) {
        let mut c = self.cookie;
        c[COOKIE_LEN - 1] = why;
        (self.post)(&self.sock, c.to_vec());
    }
}

/// A notification registration (`mq_notify`).
#[derive(Clone, Debug)]
pub struct Notify {
    /// the registered process
    pub pid: i32,
    /// `sigev_notify`
    pub kind: i32,
    /// `sigev_signo`
    pub signo: i32,
    /// `sigev_value`
    pub value: u64,
    /// `SIGEV_THREAD`'s socket and cookie
    pub thread: Option<ThreadNotify>,
}

/// Bytes charged per user against `RLIMIT_MSGQUEUE`, and the number of
/// queues that exist (unlinked ones count until their last close).
#[derive(Debug, Default)]
struct Accounting {
    bytes: Mutex<HashMap<u32, u64>>,
    queues: AtomicUsize,
    /// message text queued in all queues
    queued: AtomicU64,
}

/// Mutable state of a queue.
#[derive(Debug)]
pub struct QueueState {
    /// messages by (highest priority first, then arrival)
    msgs: BTreeMap<(std::cmp::Reverse<u32>, u64), Vec<u8>>,
    seq: u64,
    /// bytes of message text queued
    qsize: u64,
    /// permission bits
    pub mode: u32,
    /// owner
    pub uid: u32,
    /// group
    pub gid: u32,
    /// the notification registration
    pub notify: Option<Notify>,
    /// receivers asleep in `mq_timedreceive`, which take a message before
    /// any notification is due
    receivers: usize,
    /// modification and access times (seconds, nanoseconds)
    mtime: (i64, i64),
    atime: (i64, i64),
    ctime: (i64, i64),
}

/// One message queue.
#[derive(Debug)]
pub struct MsgQueue {
    /// inode number in the mqueue file system
    pub ino: u64,
    /// `mq_maxmsg`
    pub maxmsg: i64,
    /// `mq_msgsize`
    pub msgsize: i64,
    st: Mutex<QueueState>,
    acct: Arc<Accounting>,
    charged: (u32, u64),
    /// senders waiting for room and receivers waiting for a message
    pub waiters: crate::kernel::wait::WaitQueue,
}

impl Drop for MsgQueue {
    fn drop(&mut self) {
        let (uid, bytes) = self.charged;
        if let Some(b) = self.acct.bytes.locked().get_mut(&uid) {
            *b = b.saturating_sub(bytes);
        }
        self.acct.queues.fetch_sub(1, Ordering::Relaxed);
        let held = self.st.get_mut().map_or(0, |st| st.qsize);
        self.acct.queued.fetch_sub(held, Ordering::Relaxed);
    }
}

fn now() -> (i64, i64) {
    crate::host::clock_gettime(0).map_or((0, 0), |t| (t.tv_sec, t.tv_nsec))
}

/// What the opener asks for when a queue is created.
#[derive(Clone, Copy, Debug)]
pub struct Create {
    /// `mode & ~umask`
    pub mode: u32,
    /// creator's effective user and group: the queue's owner
    pub ids: (u32, u32),
    /// creator's real user, whose `RLIMIT_MSGQUEUE` budget the queue
    /// takes (Linux charges the `user_struct`, which is the real uid's)
    pub real_uid: u32,
    /// `(mq_maxmsg, mq_msgsize)`, `None` for the defaults
    pub attr: Option<(i64, i64)>,
    /// the creator may exceed the soft limits (`CAP_SYS_RESOURCE`)
    pub privileged: bool,
    /// the creator's `RLIMIT_MSGQUEUE`
    pub rlimit: u64,
}

/// The sandbox's queues by name (the root of its mqueue file system).
#[derive(Debug, Default)]
pub struct Registry {
    /// by name
    pub queues: Mutex<BTreeMap<Vec<u8>, Arc<MsgQueue>>>,
    acct: Arc<Accounting>,
    next_ino: AtomicU64,
    /// the limits, which the container's sysctls and root's writes to
    /// /proc/sys/fs/mqueue set
    limits: Mutex<Limits>,
}

/// Checks a queue name as the kernel's lookup does: not empty (`ENOENT`),
/// no `/`, not `.` or `..` (`EACCES`), at most `NAME_MAX` bytes.
pub fn check_name(name: &[u8]) -> Result<(), Errno> {
    if name.is_empty() {
        return Err(Errno::ENOENT);
    }
    if name == b"." || name == b".." || name.contains(&b'/') {
        return Err(Errno::EACCES);
    }
    if name.len() > crate::vfs::NAME_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    Ok(())
}

/// Linux's `mq_attr_ok`.
fn attr_ok(maxmsg: i64, msgsize: i64, privileged: bool, limits: &Limits) -> Result<u64, Errno> {
    if maxmsg <= 0 || msgsize <= 0 {
        return Err(Errno::EINVAL);
    }
    let (mm, ms) = if privileged {
        (HARD_MSGMAX, HARD_MSGSIZEMAX)
    } else {
        (limits.msg_max, limits.msgsize_max)
    };
    if maxmsg > mm || msgsize > ms {
        return Err(Errno::EINVAL);
    }
    // Both are bounded above, so this cannot overflow.
    let tree = maxmsg as u64 * MSG_OVERHEAD + (maxmsg as u64).min(MQ_PRIO_MAX) * NODE_OVERHEAD;
    Ok(maxmsg as u64 * msgsize as u64 + tree)
}

impl Registry {
    /// The `fs.mqueue` limits in force.
    pub fn limits(&self) -> Limits {
        *self.limits.locked()
    }

    /// Sets the `fs.mqueue` limits: queues made from now on keep them.
    pub fn set_limits(&self, limits: Limits) {
        *self.limits.locked() = limits;
    }

    /// The queue called `name`.
    pub fn get(&self, name: &[u8]) -> Option<Arc<MsgQueue>> {
        self.queues.locked().get(name).cloned()
    }

    /// The queues, by name.
    pub fn list(&self) -> Vec<(Vec<u8>, Arc<MsgQueue>)> {
        self.queues
            .locked()
            .iter()
            .map(|(n, q)| (n.clone(), q.clone()))
            .collect()
    }

    /// Finds `name` or creates it: `(queue, created)`. `EEXIST` for an
    /// existing queue with `excl`; `ENOENT` for a missing one without
    /// `create`.
    pub fn open(
        &self,
        name: &[u8],
        create: Option<Create>,
        excl: bool,
    ) -> Result<(Arc<MsgQueue>, bool), Errno> {
        check_name(name)?;
        let mut queues = self.queues.locked();
        if let Some(q) = queues.get(name) {
            if create.is_some() && excl {
                return Err(Errno::EEXIST);
            }
            return Ok((q.clone(), false));
        }
        let c = create.ok_or(Errno::ENOENT)?;
        let limits = self.limits();
        let (maxmsg, msgsize) = c.attr.unwrap_or((
            limits.msg_default.min(limits.msg_max),
            limits.msgsize_default.min(limits.msgsize_max),
        ));
        let bytes = attr_ok(maxmsg, msgsize, c.privileged, &limits)?;
        let count = self.acct.queues.load(Ordering::Relaxed);
        if !c.privileged && i64::try_from(count).unwrap_or(i64::MAX) >= limits.queues_max {
            return Err(Errno::ENOSPC);
        }
        {
            let mut charged = self.acct.bytes.locked();
            let user = charged.entry(c.real_uid).or_default();
            match user.checked_add(bytes) {
                Some(total) if total <= c.rlimit => *user = total,
                _ => return Err(Errno::EMFILE),
            }
        }
        self.acct.queues.fetch_add(1, Ordering::Relaxed);
        let t = now();
        let q = Arc::new(MsgQueue {
            ino: self.next_ino.fetch_add(1, Ordering::Relaxed) + 2,
            maxmsg,
            msgsize,
            st: Mutex::new(QueueState {
                msgs: BTreeMap::new(),
                seq: 0,
                qsize: 0,
                mode: c.mode & 0o7777,
                uid: c.ids.0,
                gid: c.ids.1,
                notify: None,
                receivers: 0,
                mtime: t,
                atime: t,
                ctime: t,
            }),
            acct: self.acct.clone(),
            charged: (c.real_uid, bytes),
            waiters: Default::default(),
        });
        queues.insert(name.to_vec(), q.clone());
        Ok((q, true))
    }

    /// Removes `name` (`mq_unlink`, `unlink` in `/dev/mqueue`); the queue
    /// lives on while descriptors refer to it. `uid` is the caller's: only
    /// the owner, root (who owns the sticky directory) or a caller with
    /// `CAP_FOWNER` (`fowner`) may remove it (`EACCES`, as Linux answers).
    pub fn unlink(&self, name: &[u8], uid: u32, fowner: bool) -> Result<(), Errno> {
        check_name(name)?;
        let mut queues = self.queues.locked();
        let q = queues.get(name).ok_or(Errno::ENOENT)?;
        if uid != 0 && !fowner && q.state().uid != uid {
            return Err(Errno::EACCES);
        }
        queues.remove(name);
        Ok(())
    }
}

impl MsgQueue {
    /// Its state, locked.
    pub fn state(&self) -> MutexGuard<'_, QueueState> {
        self.st.locked()
    }

    /// Number of messages queued.
    pub fn curmsgs(&self) -> i64 {
        self.state().msgs.len() as i64
    }

    /// `(readable, writable)` for `poll`.
    pub fn poll_state(&self) -> (bool, bool) {
        let st = self.state();
        (!st.msgs.is_empty(), (st.msgs.len() as i64) < self.maxmsg)
    }

    /// A number that changes whenever readiness may have (epoll's edge
    /// trigger): every send and receive bumps the sequence.
    pub fn generation(&self) -> u64 {
        let st = self.state();
        st.seq.wrapping_mul(2) + st.msgs.len() as u64
    }

    /// Queues `data` if there is room: `None` when full; otherwise the
    /// notification now due, if any (the queue became non-empty with nobody
    /// waiting to receive: mq_notify(3)).
    fn try_send(&self, data: &[u8], prio: u32) -> Result<Option<Option<Notify>>, Errno> {
        let mut st = self.state();
        if st.msgs.len() as i64 >= self.maxmsg {
            return Ok(None);
        }
        let len = data.len() as u64;
        let queued = &self.acct.queued;
        if queued
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |q| {
                q.checked_add(len).filter(|&t| t <= MAX_QUEUED_BYTES)
            })
            .is_err()
        {
            return Err(Errno::ENOMEM);
        }
        let seq = st.seq;
        st.seq += 1;
        st.msgs
            .insert((std::cmp::Reverse(prio), seq), data.to_vec());
        st.qsize += data.len() as u64;
        st.mtime = now();
        st.ctime = st.mtime;
        if st.msgs.len() == 1 && st.receivers == 0 {
            return Ok(Some(st.notify.take()));
        }
        Ok(Some(None))
    }

    /// Takes the oldest message of the highest priority.
    fn try_receive(&self) -> Option<(Vec<u8>, u32)> {
        let mut st = self.state();
        let ((prio, _), data) = st.msgs.pop_first()?;
        st.qsize -= data.len() as u64;
        self.acct
            .queued
            .fetch_sub(data.len() as u64, Ordering::Relaxed);
        st.seq += 1;
        st.atime = now();
        st.ctime = st.atime;
        Some((data, prio.0))
    }

    /// Sends one message, sleeping while the queue is full (`deadline`:
    /// `ETIMEDOUT` after it). Returns the notification to deliver.
    pub fn send(
        &self,
        blk: Blocker<'_>,
        data: &[u8],
        prio: u32,
        nonblock: bool,
        deadline: Option<Instant>,
    ) -> Result<Option<Notify>, Errno> {
        // (signal(7) lists the message queue calls among those
        // `SA_RESTART` restarts, timeout or not)
        let r = blk.block_with(
            std::slice::from_ref(&self.waiters),
            nonblock,
            deadline,
            Errno::ETIMEDOUT,
            Errno::ERESTARTSYS,
            || self.try_send(data, prio),
            || self.poll_state().1,
        )?;
        self.waiters.notify();
        Ok(r)
    }

    /// Receives one message, sleeping while the queue is empty.
    pub fn receive(
        &self,
        blk: Blocker<'_>,
        nonblock: bool,
        deadline: Option<Instant>,
    ) -> Result<(Vec<u8>, u32), Errno> {
        if let Some(m) = self.try_receive() {
            self.waiters.notify();
            return Ok(m);
        }
        if nonblock {
            return Err(Errno::EAGAIN);
        }
        self.state().receivers += 1;
        let r = blk.block_with(
            std::slice::from_ref(&self.waiters),
            false,
            deadline,
            Errno::ETIMEDOUT,
            Errno::ERESTARTSYS,
            || Ok(self.try_receive()),
            || self.poll_state().0,
        );
        self.state().receivers -= 1;
        let m = r?;
        self.waiters.notify();
        Ok(m)
    }

    /// The line reading a queue's file gives (mq_overview(7)).
    pub fn status_line(&self, pid_of: impl Fn(i32) -> i32) -> Vec<u8> {
        let st = self.state();
        let (kind, signo, pid) = match &st.notify {
            Some(n) => (
                n.kind,
                if n.kind == SIGEV_SIGNAL { n.signo } else { 0 },
                pid_of(n.pid),
            ),
            None => (0, 0, 0),
        };
        format!(
            "QSIZE:{:<10} NOTIFY:{:<5} SIGNO:{:<5} NOTIFY_PID:{:<6}\n",
            st.qsize, kind, signo, pid
        )
        .into_bytes()
    }

    /// Its inode's `stat`.
    pub fn stat(&self) -> Stat {
        let st = self.state();
        let mut s = crate::vfs::pipe_stat_like(abi::S_IFREG | st.mode);
        s.dev = MQUEUE_DEV;
        s.ino = self.ino;
        s.uid = st.uid;
        s.gid = st.gid;
        s.size = FILENT_SIZE;
        (s.atime, s.atime_nsec) = st.atime;
        (s.mtime, s.mtime_nsec) = st.mtime;
        (s.ctime, s.ctime_nsec) = st.ctime;
        s
    }

    /// Whether a caller with `creds` may open it for `acc` (`MAY_READ` 4,
    /// `MAY_WRITE` 2): its mode, or `CAP_DAC_OVERRIDE`.
    pub fn permits(&self, creds: &crate::kernel::auth::Creds, acc: u32) -> bool {
        let (mode, uid, gid) = {
            let st = self.state();
            (st.mode, st.uid, st.gid)
        };
        creds.may_access(mode & 0o777, uid, gid, acc).is_ok()
    }
}

/// Delivers a due notification: `SIGEV_SIGNAL` sends the signal to the
/// registered process with `SI_MESGQ`, the sender's pid and uid and the
/// registered value; `SIGEV_THREAD` posts its cookie marked "woken up";
/// `SIGEV_NONE` only ends the registration.
pub fn deliver(kernel: &crate::kernel::Kernel, n: Notify, sender: (i32, u32)) {
    if let Some(t) = &n.thread {
        t.post(NOTIFY_WOKENUP);
        return;
    }
    // Signal 0 is a valid registration that sends nothing.
    if n.kind != SIGEV_SIGNAL || n.signo == 0 {
        return;
    }
    if let Some(p) = kernel.process(n.pid) {
        let mut info = crate::kernel::task::user_info(n.signo, sender.0, sender.1, SI_MESGQ);
        info.fields[1] = n.value;
        p.send_signal(kernel, n.signo, info);
    }
}

/// Ends a registration that was never delivered (`mq_notify(NULL)`, a
/// close by the registered process): a thread registration's cookie is
/// posted marked "removed", so that glibc frees what it set aside.
pub fn unregister(n: Notify) {
    if let Some(t) = &n.thread {
        t.post(NOTIFY_REMOVED);
    }
}

/// The instant an absolute `CLOCK_REALTIME` time falls at (`EINVAL` for a
/// malformed one, as the kernel checks before anything else).
pub fn realtime_deadline(ts: &Timespec) -> Result<Instant, Errno> {
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return Err(Errno::EINVAL);
    }
    let when = Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
    let (s, ns) = now();
    let now = Duration::new(s.max(0) as u64, ns.clamp(0, 999_999_999) as u32);
    let left = when.saturating_sub(now);
    let start = Instant::now();
    // A deadline too far to represent is no deadline at all in practice.
    Ok(start
        .checked_add(left)
        .unwrap_or_else(|| start + Duration::from_secs(1 << 32)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(attr: Option<(i64, i64)>, privileged: bool, rlimit: u64) -> Option<Create> {
        Some(Create {
            mode: 0o600,
            ids: (1000, 1000),
            real_uid: 1000,
            attr,
            privileged,
            rlimit,
        })
    }

    #[test]
    fn names_attributes_and_limits_match_linux() {
        let r = Registry::default();
        assert_eq!(
            r.open(b"", create(None, false, u64::MAX), false).err(),
            Some(Errno::ENOENT)
        );
        assert_eq!(
            r.open(b"a/b", create(None, false, u64::MAX), false).err(),
            Some(Errno::EACCES)
        );
        assert_eq!(
            r.open(&[b'x'; 256], create(None, false, u64::MAX), false)
                .err(),
            Some(Errno::ENAMETOOLONG)
        );
        assert_eq!(r.open(b"q", None, false).err(), Some(Errno::ENOENT));
        assert_eq!(
            r.open(b"q", create(Some((11, 10)), false, u64::MAX), false)
                .err(),
            Some(Errno::EINVAL)
        );
        assert_eq!(
            r.open(b"q", create(Some((0, 10)), true, u64::MAX), false)
                .err(),
            Some(Errno::EINVAL)
        );
        assert!(r
            .open(b"q", create(Some((11, 10)), true, u64::MAX), false)
            .is_ok());
        // 10 messages of 8192 bytes and their bookkeeping: 81920 + 960,
        // charged to their creator (another user than the one above).
        let big = |rlimit| {
            Some(Create {
                ids: (2000, 2000),
                real_uid: 2000,
                ..create(None, false, rlimit).expect("args")
            })
        };
        assert_eq!(r.open(b"big", big(82879), false).err(), Some(Errno::EMFILE));
        assert!(r.open(b"big", big(82880), false).is_ok());
        assert_eq!(r.open(b"big2", big(u64::MAX), false).err(), None);
        assert_eq!(
            r.open(b"big3", big(2 * 82880), false).err(),
            Some(Errno::EMFILE)
        );
        assert_eq!(
            r.open(b"q", create(None, false, u64::MAX), true).err(),
            Some(Errno::EEXIST)
        );
        assert_eq!(r.unlink(b"q", 1001, false), Err(Errno::EACCES));
        r.unlink(b"q", 1000, false).expect("owner unlinks");
        assert_eq!(r.unlink(b"q", 1000, false), Err(Errno::ENOENT));
    }

    impl MsgQueue {
        fn try_send_ok(&self, data: &[u8], prio: u32) -> Option<Option<Notify>> {
            self.try_send(data, prio).expect("room in the sandbox")
        }
    }

    #[test]
    fn priorities_order_and_notification_is_one_shot() {
        let r = Registry::default();
        let (q, _) = r
            .open(b"q", create(Some((3, 8)), false, u64::MAX), false)
            .expect("create");
        q.state().notify = Some(Notify {
            pid: 7,
            kind: SIGEV_SIGNAL,
            signo: 10,
            value: 5,
            thread: None,
        });
        assert!(q
            .status_line(|p| p)
            .starts_with(b"QSIZE:0          NOTIFY:0     SIGNO:10    NOTIFY_PID:7"));
        assert!(matches!(q.try_send_ok(b"lo", 1), Some(Some(_))));
        assert!(matches!(q.try_send_ok(b"hi", 5), Some(None)));
        assert!(matches!(q.try_send_ok(b"lo2", 1), Some(None)));
        assert!(q.try_send_ok(b"x", 9).is_none());
        assert_eq!(
            q.status_line(|p| p),
            b"QSIZE:7          NOTIFY:0     SIGNO:0     NOTIFY_PID:0     \n".to_vec()
        );
        assert_eq!(q.try_receive(), Some((b"hi".to_vec(), 5)));
        assert_eq!(q.try_receive(), Some((b"lo".to_vec(), 1)));
        assert_eq!(q.try_receive(), Some((b"lo2".to_vec(), 1)));
        assert_eq!(q.try_receive(), None);
    }

    #[test]
    fn queued_text_is_bounded_sandbox_wide() {
        let r = Registry::default();
        let (q, _) = r
            .open(b"q", create(Some((3, 8)), false, u64::MAX), false)
            .expect("create");
        r.acct.queued.store(MAX_QUEUED_BYTES - 1, Ordering::Relaxed);
        assert_eq!(q.try_send(b"ab", 0).err(), Some(Errno::ENOMEM));
        assert!(matches!(q.try_send(b"a", 0), Ok(Some(_))));
        assert_eq!(r.acct.queued.load(Ordering::Relaxed), MAX_QUEUED_BYTES);
        assert!(q.try_receive().is_some());
        drop(q);
        assert_eq!(r.acct.queued.load(Ordering::Relaxed), MAX_QUEUED_BYTES - 1);
    }
}
