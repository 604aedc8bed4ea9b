//! inotify: watches on objects of the sandbox's tree, and the events the
//! Sentry's own file operations raise on them.
//!
//! An object is identified by its `(st_dev, st_ino)`, which every file
//! system of the sandbox reports stably. A watch on an object of a volume
//! also hears of changes made on the host, through a host watch of the
//! volume's gofer ([`crate::vfs::volume_watch`]): for such a watch, changes to
//! objects and entries come from the host only (the guest's own too, as
//! the host saw them), the rest from the Sentry.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use abi::Errno;

use crate::kernel::wait::WaitQueue;
use crate::sync::Locked;

/// `IN_*` bits.
#[allow(missing_docs)]
pub mod mask {
    pub const ACCESS: u32 = 0x1;
    pub const MODIFY: u32 = 0x2;
    pub const ATTRIB: u32 = 0x4;
    pub const CLOSE_WRITE: u32 = 0x8;
    pub const CLOSE_NOWRITE: u32 = 0x10;
    pub const OPEN: u32 = 0x20;
    pub const MOVED_FROM: u32 = 0x40;
    pub const MOVED_TO: u32 = 0x80;
    pub const CREATE: u32 = 0x100;
    pub const DELETE: u32 = 0x200;
    pub const DELETE_SELF: u32 = 0x400;
    pub const MOVE_SELF: u32 = 0x800;
    pub const Q_OVERFLOW: u32 = 0x4000;
    pub const IGNORED: u32 = 0x8000;
    pub const ONLYDIR: u32 = 0x0100_0000;
    pub const DONT_FOLLOW: u32 = 0x0200_0000;
    pub const EXCL_UNLINK: u32 = 0x0400_0000;
    pub const MASK_CREATE: u32 = 0x1000_0000;
    pub const MASK_ADD: u32 = 0x2000_0000;
    pub const ISDIR: u32 = 0x4000_0000;
    pub const ONESHOT: u32 = 0x8000_0000;
    /// every event a watch can ask for
    pub const ALL_EVENTS: u32 = 0xfff;
    /// what `inotify_add_watch` accepts
    pub const VALID: u32 =
        ALL_EVENTS | ONLYDIR | DONT_FOLLOW | EXCL_UNLINK | MASK_CREATE | MASK_ADD | ONESHOT;
    /// events a watched directory also gets for its children
    pub const CHILD: u32 = ACCESS | MODIFY | ATTRIB | CLOSE_WRITE | CLOSE_NOWRITE | OPEN;
}

/// `(st_dev, st_ino)` of a watched object.
pub type Key = (u64, u64);

/// Most events an instance queues (Linux's `max_queued_events`).
const MAX_QUEUED: usize = 16384;
/// Size of `struct inotify_event` without its name.
const EVENT_HEADER: usize = 16;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Event {
    wd: i32,
    mask: u32,
    cookie: u32,
    name: Vec<u8>,
}

impl Event {
    /// The name's length on the wire: NUL-terminated, padded to a whole
    /// header's size.
    fn name_len(&self) -> usize {
        if self.name.is_empty() {
            0
        } else {
            (self.name.len() + 1).div_ceil(EVENT_HEADER) * EVENT_HEADER
        }
    }

    fn size(&self) -> usize {
        EVENT_HEADER + self.name_len()
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.wd.to_ne_bytes());
        out.extend_from_slice(&self.mask.to_ne_bytes());
        out.extend_from_slice(&self.cookie.to_ne_bytes());
        out.extend_from_slice(&(self.name_len() as u32).to_ne_bytes());
        let start = out.len();
        out.extend_from_slice(&self.name);
        out.resize(start + self.name_len(), 0);
    }
}

/// One watch of an instance.
#[derive(Debug)]
struct Watch {
    key: Key,
    /// events, with the `IN_ONESHOT`/`IN_EXCL_UNLINK` flags
    want: u32,
    /// its share of the host watch, on a volume
    host: Option<crate::vfs::volume_watch::HostShare>,
}

/// Events that, on a watch with a host share, only the host reports.
const HOST_EVENTS: u32 = gofer::proto::WATCH_EVENTS | mask::IGNORED;

#[derive(Debug, Default)]
struct State {
    /// wd → watch
    watches: BTreeMap<i32, Watch>,
    next_wd: i32,
    queue: VecDeque<Event>,
    queued_bytes: usize,
    overflowed: bool,
}

/// One inotify instance (what `inotify_init` returns).
#[derive(Debug)]
pub struct Inotify {
    state: Mutex<State>,
    generation: AtomicU64,
    /// readers waiting for an event
    pub waiters: WaitQueue,
    /// descriptions with `O_ASYNC`, signalled when an event is queued
    /// (fsnotify's `kill_fasync(POLL_IN)` in `fsnotify_insert_event()`)
    pub fasync: crate::vfs::fasync::Fasync,
}

impl Inotify {
    /// A new instance.
    pub fn new() -> Arc<Inotify> {
        Arc::new(Inotify {
            state: Mutex::new(State::default()),
            generation: AtomicU64::new(0),
            waiters: WaitQueue::new(),
            fasync: Default::default(),
        })
    }

    /// `inotify_add_watch` on the object `key` (`IN_ONLYDIR` already
    /// checked by the caller), with its share of a host watch if the
    /// object is on a volume: the watch descriptor.
    pub fn add_watch(
        self: &Arc<Self>,
        key: Key,
        want: u32,
        host: Option<crate::vfs::volume_watch::HostShare>,
    ) -> Result<i32, Errno> {
        if want & !mask::VALID != 0 || want & mask::ALL_EVENTS == 0 {
            return Err(Errno::EINVAL);
        }
        if want & mask::MASK_ADD != 0 && want & mask::MASK_CREATE != 0 {
            return Err(Errno::EINVAL);
        }
        let keep = mask::ALL_EVENTS | mask::ONESHOT | mask::EXCL_UNLINK;
        let mut st = self.state.locked();
        if let Some((&wd, _)) = st.watches.iter().find(|(_, w)| w.key == key) {
            if want & mask::MASK_CREATE != 0 {
                return Err(Errno::EEXIST);
            }
            let entry = st.watches.get_mut(&wd).ok_or(Errno::EINVAL)?;
            entry.want = if want & mask::MASK_ADD != 0 {
                entry.want | (want & keep)
            } else {
                want & keep
            };
            // The watch keeps the host share it has.
            return Ok(wd);
        }
        st.next_wd += 1;
        let wd = st.next_wd;
        st.watches.insert(
            wd,
            Watch {
                key,
                want: want & keep,
                host,
            },
        );
        drop(st);
        hub().add(key, Arc::downgrade(self), wd);
        Ok(wd)
    }

    /// `inotify_rm_watch`: the watch goes, with an `IN_IGNORED` event.
    pub fn rm_watch(&self, wd: i32) -> Result<(), Errno> {
        let mut st = self.state.locked();
        let watch = st.watches.remove(&wd).ok_or(Errno::EINVAL)?;
        let queued = Self::push(&mut st, wd, mask::IGNORED, 0, &[]);
        drop(st);
        hub().remove(watch.key, self, wd);
        // (the host watch goes with its last share, here)
        drop(watch);
        self.woke(queued);
        Ok(())
    }

    /// After a change: wakes readers, and signals the owners when an
    /// event was queued (not when it merged with the last one or the
    /// queue was full).
    fn woke(&self, queued: bool) {
        self.generation.fetch_add(1, Ordering::Relaxed);
        self.waiters.notify();
        if queued {
            self.fasync.kill(crate::vfs::fasync::Reason::In);
        }
    }

    /// Queues an event; whether it (or the overflow event) was queued.
    fn push(st: &mut State, wd: i32, m: u32, cookie: u32, name: &[u8]) -> bool {
        let ev = Event {
            wd,
            mask: m,
            cookie,
            name: name.to_vec(),
        };
        // An event identical to the last one queued adds nothing.
        if st.queue.back() == Some(&ev) {
            return false;
        }
        if st.queue.len() >= MAX_QUEUED {
            return Self::push_overflow(st);
        }
        st.queued_bytes += ev.size();
        st.queue.push_back(ev);
        true
    }

    /// Queues `IN_Q_OVERFLOW`, once until the queue is read empty; whether
    /// it was queued now.
    fn push_overflow(st: &mut State) -> bool {
        if st.overflowed {
            return false;
        }
        st.overflowed = true;
        let ov = Event {
            wd: -1,
            mask: mask::Q_OVERFLOW,
            cookie: 0,
            name: Vec::new(),
        };
        st.queued_bytes += ov.size();
        st.queue.push_back(ov);
        true
    }

    /// Queues event `m` for watch `wd` if it asks for it; `false` when the
    /// watch is gone (one-shot, or the object's end). `from_host`: the
    /// host reported it, for a watch with a host share; otherwise the
    /// Sentry raised it, and such a watch takes from the Sentry only what
    /// the host does not report.
    fn deliver(&self, wd: i32, m: u32, cookie: u32, name: &[u8], from_host: bool) -> bool {
        let mut st = self.state.locked();
        let Some(w) = st.watches.get(&wd) else {
            return false;
        };
        let want = w.want;
        let m = match (from_host, w.host.is_some()) {
            (false, true) => m & !HOST_EVENTS,
            (true, false) => return true,
            _ => m,
        };
        let event = m & mask::ALL_EVENTS;
        let ends = m & mask::IGNORED != 0;
        if event & want == 0 && !ends {
            return true;
        }
        let mut queued = false;
        if event != 0 && event & want != 0 {
            queued |= Self::push(&mut st, wd, m & !mask::IGNORED, cookie, name);
        }
        let gone = ends || want & mask::ONESHOT != 0;
        let ended = if gone {
            queued |= Self::push(&mut st, wd, mask::IGNORED, 0, &[]);
            st.watches.remove(&wd)
        } else {
            None
        };
        drop(st);
        // (a host share goes outside the instance's lock)
        drop(ended);
        self.woke(queued);
        !gone
    }

    /// The host dropped events of a watch of this instance: so does the
    /// guest (`IN_Q_OVERFLOW`, once until the queue is read empty).
    fn overflowed(&self) {
        let queued = Self::push_overflow(&mut self.state.locked());
        if queued {
            self.woke(true);
        }
    }

    /// Takes whole events that fit in `cap` bytes; `EINVAL` when even the
    /// first does not, `None` when there are none.
    pub fn take(&self, cap: usize) -> Result<Option<Vec<u8>>, Errno> {
        crate::vfs::volume_watch::drain();
        let mut st = self.state.locked();
        let Some(first) = st.queue.front() else {
            return Ok(None);
        };
        if first.size() > cap {
            return Err(Errno::EINVAL);
        }
        let mut out = Vec::new();
        while let Some(ev) = st.queue.front() {
            if out.len() + ev.size() > cap {
                break;
            }
            ev.encode(&mut out);
            st.queued_bytes -= ev.size();
            st.queue.pop_front();
        }
        if st.queue.is_empty() {
            st.overflowed = false;
        }
        self.generation.fetch_add(1, Ordering::Relaxed);
        Ok(Some(out))
    }

    /// Takes every queued event: `(wd, mask, name)` each.
    pub fn take_all(&self) -> Vec<(i32, u32, Vec<u8>)> {
        crate::vfs::volume_watch::drain();
        let mut st = self.state.locked();
        let taken: Vec<_> = st.queue.drain(..).map(|e| (e.wd, e.mask, e.name)).collect();
        st.queued_bytes = 0;
        st.overflowed = false;
        drop(st);
        self.generation.fetch_add(1, Ordering::Relaxed);
        taken
    }

    /// Whether events are queued.
    pub fn readable(&self) -> bool {
        crate::vfs::volume_watch::drain();
        !self.state.locked().queue.is_empty()
    }

    /// Bytes of queued events (`FIONREAD`).
    pub fn queued_bytes(&self) -> usize {
        crate::vfs::volume_watch::drain();
        self.state.locked().queued_bytes
    }

    /// Changes whenever readiness may have (edge-triggered epoll).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }
}

impl Drop for Inotify {
    fn drop(&mut self) {
        let watches = std::mem::take(&mut self.state.locked().watches);
        for (wd, w) in watches {
            hub().remove(w.key, self, wd);
        }
    }
}

/// An instance and its watch descriptor for one object.
type Watcher = (Weak<Inotify>, i32);

/// Every watch of the sandbox, by object.
#[derive(Debug, Default)]
pub struct Hub {
    watches: Mutex<HashMap<Key, Vec<Watcher>>>,
    count: AtomicUsize,
    cookie: AtomicU32,
}

/// The sandbox's watches (one sandbox per Sentry process).
pub fn hub() -> &'static Hub {
    static HUB: OnceLock<Hub> = OnceLock::new();
    HUB.get_or_init(Hub::default)
}

impl Hub {
    /// Whether any watch exists: file operations skip the work of raising
    /// events when none does.
    pub fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    /// A fresh cookie tying a rename's two events together.
    pub fn cookie(&self) -> u32 {
        self.cookie.fetch_add(1, Ordering::Relaxed).wrapping_add(1)
    }

    fn add(&self, key: Key, who: Weak<Inotify>, wd: i32) {
        self.watches
            .locked()
            .entry(key)
            .or_default()
            .push((who, wd));
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    fn remove(&self, key: Key, who: *const Inotify, wd: i32) {
        let mut all = self.watches.locked();
        if let Some(list) = all.get_mut(&key) {
            let before = list.len();
            list.retain(|(w, d)| !(std::ptr::eq(w.as_ptr(), who) && *d == wd));
            self.count.fetch_sub(before - list.len(), Ordering::Relaxed);
            if list.is_empty() {
                all.remove(&key);
            }
        }
    }

    /// Raises event `m` on object `key` for the watches on it; `name` is
    /// the child's name when `key` is the directory it is in. With
    /// `IN_IGNORED` in `m` every watch on the object ends after it.
    pub fn raise(&self, key: Key, m: u32, cookie: u32, name: &[u8]) {
        if !self.active() {
            return;
        }
        // What the host reported before this change goes first.
        crate::vfs::volume_watch::drain();
        self.deliver(key, m, cookie, name, false);
    }

    /// Raises event `m` the host reported on object `key` of a volume,
    /// for the watches on it with a host share.
    pub fn raise_host(&self, key: Key, m: u32, cookie: u32, name: &[u8]) {
        self.deliver(key, m, cookie, name, true);
    }

    /// `IN_Q_OVERFLOW` for every instance watching object `key`.
    pub fn overflow(&self, key: Key) {
        let targets: Vec<Watcher> = match self.watches.locked().get(&key) {
            Some(list) => list.clone(),
            None => return,
        };
        for (who, _) in targets {
            if let Some(inst) = who.upgrade() {
                inst.overflowed();
            }
        }
    }

    fn deliver(&self, key: Key, m: u32, cookie: u32, name: &[u8], from_host: bool) {
        let targets: Vec<Watcher> = match self.watches.locked().get(&key) {
            Some(list) => list.clone(),
            None => return,
        };
        for (who, wd) in targets {
            let Some(inst) = who.upgrade() else { continue };
            if !inst.deliver(wd, m, cookie, name, from_host) {
                self.remove(key, Arc::as_ptr(&inst), wd);
            }
        }
    }
}

/// The identity of `node` and whether it is a directory.
pub fn identify(node: &crate::vfs::Node) -> Option<(Key, bool)> {
    let st = node.stat().ok()?;
    Some(((st.dev, st.ino), st.mode & abi::S_IFMT == abi::S_IFDIR))
}

/// Raises `m` on the object at `loc` and, for the events a directory
/// hears about its children, on the directory it is in.
pub fn on_object(loc: &crate::vfs::Location, m: u32) {
    let hub = hub();
    if !hub.active() {
        return;
    }
    let Some((key, dir)) = identify(loc.node()) else {
        return;
    };
    let m = if dir { m | mask::ISDIR } else { m };
    hub.raise(key, m, 0, &[]);
    if m & mask::CHILD != 0 {
        if let Some((parent, name)) = loc.parent() {
            if let Some((pkey, _)) = identify(parent) {
                hub.raise(pkey, m, 0, name);
            }
        }
    }
}

/// What a directory-entry change needs to know before it happens (the
/// object may be gone after): the directory, the object, and whether the
/// object is a directory.
#[derive(Clone, Debug)]
pub struct EntryIds {
    dir: Option<Key>,
    object: Option<Key>,
    is_dir: bool,
    last_link: bool,
}

impl EntryIds {
    /// Takes the identities of directory `dir` and of `object` in it.
    pub fn of(dir: &crate::vfs::Node, object: Option<&crate::vfs::Node>) -> Option<EntryIds> {
        if !hub().active() {
            return None;
        }
        let st = object.and_then(|o| o.stat().ok());
        Some(EntryIds {
            dir: identify(dir).map(|(k, _)| k),
            object: st.as_ref().map(|s| (s.dev, s.ino)),
            is_dir: st
                .as_ref()
                .is_some_and(|s| s.mode & abi::S_IFMT == abi::S_IFDIR),
            last_link: st.as_ref().is_none_or(|s| s.nlink <= 1),
        })
    }

    /// Raises `m` on the directory for the entry `name`.
    pub fn entry(&self, m: u32, cookie: u32, name: &[u8]) {
        if let Some(k) = self.dir {
            let m = if self.is_dir { m | mask::ISDIR } else { m };
            hub().raise(k, m, cookie, name);
        }
    }

    /// Raises `m` on the object itself (`IN_DELETE_SELF`, `IN_MOVE_SELF`).
    pub fn object(&self, m: u32) {
        if let Some(k) = self.object {
            hub().raise(k, m, 0, &[]);
        }
    }

    /// After an unlink: the object is gone when that was its last name
    /// (a directory always), and every watch on it ends.
    pub fn removed(&self, name: &[u8]) {
        if !self.is_dir {
            // One link fewer.
            self.object(mask::ATTRIB);
        }
        self.entry(mask::DELETE, 0, name);
        if self.is_dir || self.last_link {
            self.object(mask::DELETE_SELF | mask::IGNORED);
        }
    }
}

impl crate::vfs::file::FileImpl for Inotify {
    fn read(
        &self,
        file: &crate::vfs::file::FileDescription,
        blk: crate::vfs::file::Blocker<'_>,
        bufs: &[crate::mm::GuestSlice],
        _at: Option<u64>,
    ) -> Result<u64, Errno> {
        let len: usize = bufs.iter().map(crate::mm::GuestSlice::len).sum();
        if len == 0 {
            return Err(Errno::EINVAL);
        }
        let nonblock = file.nonblocking();
        blk.block_on(
            std::slice::from_ref(&self.waiters),
            nonblock,
            || self.take(len),
            || self.readable(),
        )
        .map(|v| crate::vfs::file::copy_to_slices(bufs, &v))
    }

    fn poll(&self, _caller: &dyn crate::vfs::file::Caller, _events: i16, _depth: u32) -> i16 {
        use abi::poll::{POLLIN, POLLRDNORM};
        if self.readable() {
            POLLIN | POLLRDNORM
        } else {
            0
        }
    }

    fn generation(&self) -> u64 {
        Inotify::generation(self)
    }

    fn wait_queues(&self, out: &mut Vec<WaitQueue>, _depth: u32) -> bool {
        out.push(self.waiters.clone());
        false
    }

    fn fasync_lists(&self) -> Option<[Option<&crate::vfs::fasync::Fasync>; 2]> {
        Some([Some(&self.fasync), None])
    }

    fn link_name(&self) -> Option<Vec<u8>> {
        Some(b"anon_inode:inotify".to_vec())
    }

    fn bytes_readable(&self) -> Option<Result<i32, Errno>> {
        Some(Ok(self.queued_bytes() as i32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_padded_and_events_coalesce() {
        let ino = Inotify::new();
        let key = (0xfeed, 1);
        let wd = ino
            .add_watch(key, mask::CREATE | mask::MODIFY, None)
            .expect("watch");
        hub().raise(key, mask::CREATE, 0, b"abc");
        hub().raise(key, mask::MODIFY, 0, b"abc");
        hub().raise(key, mask::MODIFY, 0, b"abc");
        hub().raise(key, mask::DELETE, 0, b"abc");
        assert_eq!(ino.queued_bytes(), 64);
        assert_eq!(ino.take(31), Err(Errno::EINVAL));
        let got = ino.take(32).expect("take").expect("events");
        assert_eq!(got.len(), 32);
        assert_eq!(&got[0..4], &wd.to_ne_bytes());
        assert_eq!(&got[4..8], &mask::CREATE.to_ne_bytes());
        assert_eq!(&got[12..16], &16u32.to_ne_bytes());
        assert_eq!(&got[16..20], b"abc\0");
        ino.rm_watch(wd).expect("rm");
        assert_eq!(ino.rm_watch(wd), Err(Errno::EINVAL));
        let rest = ino.take(4096).expect("take").expect("events");
        assert_eq!(rest.len(), 32 + 16);
        assert_eq!(&rest[36..40], &mask::IGNORED.to_ne_bytes());
    }
}
