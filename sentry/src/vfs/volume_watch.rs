//! inotify on volumes: the host watches a volume's gofer keeps for the
//! guest's watches, and the host's events turned into the guest's.
//!
//! A guest watch on an object of a volume (a gofer-backed host directory)
//! gets a share of one host watch on the same object, which the gofer
//! makes on an object it already holds (`AddWatch`) on the one host
//! inotify instance it keeps per volume and donated to the Sentry
//! (`WatchInit`). The host reports changes to objects and entries (the
//! [`gofer::proto::WATCH_EVENTS`]), whoever made them: another process on
//! the host, or the Sentry itself on the guest's behalf. So on a watch with
//! a host share, those events come from the host alone and the Sentry's own
//! ones are not raised ([`crate::vfs::inotify`]): each change is reported once,
//! in the order the host made them. Opens, reads and closes without
//! writing still come from the Sentry (the host would report the gofer's
//! and the Sentry's own), so those made on the host side are not seen.
//!
//! The host queues an event before the call that caused it returns, so
//! reading the host instance before queueing a Sentry event or answering
//! a guest's read or poll ([`drain`]) keeps the guest's own changes in
//! order with the rest and visible at once; a thread per volume waits for
//! the host's other events and delivers them as they come.
//!
//! Where the host's view differs from what Linux would report to the
//! guest: stores through `MAP_SHARED` mappings raise `IN_MODIFY` when the
//! Sentry writes them back; and `truncate(2)` by path makes the gofer open
//! the file for writing, whose close the host reports, so the Sentry drops
//! that `IN_CLOSE_WRITE` ([`quietly`]) (with any other of the object's
//! that the host reports in that moment).
//!
//! Limits: a sandbox holds at most [`MAX_HOST_WATCHES`] host watches
//! (`ENOSPC` past it, as Linux's `max_user_watches`); a host watch goes
//! when the last guest watch sharing it does.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use abi::Errno;

use crate::sync::Locked;
use crate::vfs::inotify::{hub, mask, Key};

/// Most host watches one sandbox holds.
pub const MAX_HOST_WATCHES: usize = 8192;

/// Host cookies of renames remembered, to give both halves one cookie of
/// the sandbox's own.
const COOKIES_KEPT: usize = 64;

#[derive(Debug, Default)]
struct Maps {
    /// object → (host watch descriptor, guest watches sharing it)
    by_key: HashMap<Key, (i32, usize)>,
    by_wd: HashMap<i32, Key>,
}

/// The host inotify instance of one volume.
struct VolumeWatcher {
    client: Arc<gofer::client::Client>,
    fd: OwnedFd,
    maps: Mutex<Maps>,
}

impl std::fmt::Debug for VolumeWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolumeWatcher").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Registry {
    watchers: Mutex<Vec<Arc<VolumeWatcher>>>,
    /// host watches of the sandbox
    count: AtomicUsize,
    /// held while host events are read and delivered, so they are
    /// delivered in the order read; host cookie → ours
    delivering: Mutex<VecDeque<(u32, u32)>>,
}

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(Registry::default)
}

/// A guest watch's share of a host watch; dropping it gives the share
/// back, and the last one removes the host watch.
pub struct HostShare {
    watcher: Arc<VolumeWatcher>,
    key: Key,
    wd: i32,
}

impl std::fmt::Debug for HostShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostShare({})", self.wd)
    }
}

impl Drop for HostShare {
    fn drop(&mut self) {
        let w = &self.watcher;
        let mut maps = w.maps.locked();
        let last = match maps.by_key.get_mut(&self.key) {
            // The host may have ended the watch (and a new one been made
            // for the same object since): only this share's watch counts.
            Some((wd, refs)) if *wd == self.wd => {
                *refs -= 1;
                *refs == 0
            }
            _ => false,
        };
        if last {
            maps.by_key.remove(&self.key);
            maps.by_wd.remove(&self.wd);
            registry().count.fetch_sub(1, Ordering::Relaxed);
            drop(maps);
            let _ = w.client.rm_watch(self.wd);
        }
    }
}

/// The host watch share for a guest watch on `node` (object `key`):
/// `None` when `node` is not on a volume.
pub fn share(node: &crate::vfs::Node, key: Key) -> Result<Option<HostShare>, Errno> {
    let crate::vfs::Node::Host { h, .. } = node else {
        return Ok(None);
    };
    if h.volume().is_none() {
        return Ok(None);
    }
    let watcher = watcher_for(h.shared_client())?;
    let mut maps = watcher.maps.locked();
    if let Some((wd, refs)) = maps.by_key.get_mut(&key) {
        *refs += 1;
        let wd = *wd;
        drop(maps);
        return Ok(Some(HostShare { watcher, key, wd }));
    }
    let reg = registry();
    if reg.count.load(Ordering::Relaxed) >= MAX_HOST_WATCHES {
        return Err(Errno::ENOSPC);
    }
    let wd = match h.client().add_watch(h.handle(), gofer::proto::WATCH_EVENTS) {
        Ok(wd) => wd,
        // Replaced on the host since the guest looked it up.
        Err(Errno::ESTALE) => return Err(Errno::ENOENT),
        Err(e) => return Err(e),
    };
    // One object, one host watch descriptor: a second key for the same
    // descriptor would be a hard link seen under two identities, which
    // (st_dev, st_ino) rules out.
    maps.by_key.insert(key, (wd, 1));
    maps.by_wd.insert(wd, key);
    reg.count.fetch_add(1, Ordering::Relaxed);
    drop(maps);
    Ok(Some(HostShare { watcher, key, wd }))
}

/// The watcher of the volume `client` serves, made (with its thread) on
/// first use.
fn watcher_for(client: &Arc<gofer::client::Client>) -> Result<Arc<VolumeWatcher>, Errno> {
    let mut all = (registry().watchers).locked();
    if let Some(w) = all.iter().find(|w| Arc::ptr_eq(&w.client, client)) {
        return Ok(w.clone());
    }
    let fd = client.watch_init()?;
    let w = Arc::new(VolumeWatcher {
        client: client.clone(),
        fd,
        maps: Mutex::default(),
    });
    let watched = w.clone();
    // It lives as long as the Sentry process (one sandbox), as the
    // volume's gofer connection does.
    std::thread::Builder::new()
        .name("volume-watch".into())
        .spawn(move || loop {
            match crate::host::poll_in(watched.fd.as_fd(), -1) {
                Ok(true) => drain_now(),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!("volume watcher stopped: {e}");
                    return;
                }
            }
        })
        .map_err(|_| Errno::EAGAIN)?;
    all.push(w.clone());
    Ok(w)
}

/// Delivers the events the host has queued for the sandbox's volume
/// watches, now.
pub fn drain() {
    if registry().count.load(Ordering::Relaxed) > 0 {
        drain_now();
    }
}

/// [`drain`], even with no host watch left: what the host queued for the
/// ones removed (their `IN_IGNORED`) is read and dropped, or the waiting
/// thread would find the descriptor readable forever.
fn drain_now() {
    let mut cookies = (registry().delivering).locked();
    drain_locked(&mut cookies, &|_, _| false);
}

/// Host events `skip` says no to are read and dropped.
type Skip<'a> = &'a dyn Fn(Key, &HostEvent<'_>) -> bool;

fn drain_locked(cookies: &mut VecDeque<(u32, u32)>, skip: Skip<'_>) {
    let watchers = (registry().watchers).locked().clone();
    for w in watchers {
        w.drain(cookies, skip);
    }
}

/// Runs `f`, a change of the object at `loc` on a volume that the host
/// reports with more than Linux does (`truncate(2)` by path: the gofer
/// opens the file for writing to cut it, and the host reports that open's
/// close): the host's `quiet` events about the object that come meanwhile
/// are dropped, on its own watches and its directory's.
pub fn quietly<R>(loc: &crate::vfs::Location, quiet: u32, f: impl FnOnce() -> R) -> R {
    if registry().count.load(Ordering::Relaxed) == 0 {
        return f();
    }
    let object = crate::vfs::inotify::identify(loc.node()).map(|(k, _)| k);
    let entry = loc.parent().and_then(|(dir, name)| {
        crate::vfs::inotify::identify(dir).map(|(k, _)| (k, name.to_vec()))
    });
    let mut cookies = (registry().delivering).locked();
    // What came before is the guest's to see.
    drain_locked(&mut cookies, &|_, _| false);
    let r = f();
    drain_locked(&mut cookies, &|key, ev| {
        ev.mask & quiet != 0
            && ((ev.name.is_empty() && Some(key) == object)
                || entry
                    .as_ref()
                    .is_some_and(|(dir, name)| *dir == key && ev.name == name.as_slice()))
    });
    r
}

/// One host `struct inotify_event`.
#[derive(Debug, PartialEq, Eq)]
struct HostEvent<'a> {
    wd: i32,
    mask: u32,
    cookie: u32,
    name: &'a [u8],
}

/// Parses what one read of an inotify descriptor returned (whole events;
/// a malformed tail is dropped).
fn parse(mut buf: &[u8]) -> Vec<HostEvent<'_>> {
    let mut out = Vec::new();
    while buf.len() >= 16 {
        let word = |i: usize| u32::from_ne_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let len = word(12) as usize;
        let Some(raw) = buf.get(16..16 + len) else {
            break;
        };
        out.push(HostEvent {
            wd: word(0) as i32,
            mask: word(4),
            cookie: word(8),
            name: raw.split(|&b| b == 0).next().unwrap_or_default(),
        });
        buf = &buf[16 + len..];
    }
    out
}

impl VolumeWatcher {
    fn drain(&self, cookies: &mut VecDeque<(u32, u32)>, skip: Skip<'_>) {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match crate::host::read(self.fd.as_fd(), &mut buf) {
                Ok(0) => return,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // EAGAIN: nothing more queued.
                Err(_) => return,
            };
            for ev in parse(&buf[..n]) {
                self.deliver(&ev, cookies, skip);
            }
        }
    }

    fn deliver(&self, ev: &HostEvent<'_>, cookies: &mut VecDeque<(u32, u32)>, skip: Skip<'_>) {
        if ev.mask & mask::Q_OVERFLOW != 0 {
            // The host dropped events: so may the guest have, on every
            // watch of this volume.
            let keys: Vec<Key> = self.maps.locked().by_key.keys().copied().collect();
            for key in keys {
                hub().overflow(key);
            }
            return;
        }
        let Some(key) = self.maps.locked().by_wd.get(&ev.wd).copied() else {
            // A watch the Sentry already removed.
            return;
        };
        if skip(key, ev) {
            return;
        }
        if ev.mask & mask::IGNORED != 0 {
            // The host ended the watch (its object is gone): so do the
            // guest's watches on it.
            let mut maps = self.maps.locked();
            if maps.by_key.get(&key).is_some_and(|(wd, _)| *wd == ev.wd) {
                maps.by_key.remove(&key);
                registry().count.fetch_sub(1, Ordering::Relaxed);
            }
            maps.by_wd.remove(&ev.wd);
            drop(maps);
            let _ = self.client.rm_watch(ev.wd);
            hub().raise_host(key, mask::IGNORED, 0, &[]);
            return;
        }
        let cookie = if ev.cookie == 0 {
            0
        } else if let Some(&(_, ours)) = cookies.iter().find(|(h, _)| *h == ev.cookie) {
            ours
        } else {
            let ours = hub().cookie();
            if cookies.len() >= COOKIES_KEPT {
                cookies.pop_front();
            }
            cookies.push_back((ev.cookie, ours));
            ours
        };
        hub().raise_host(key, ev.mask, cookie, ev.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_whole_events_only() {
        let mut b = Vec::new();
        for (wd, m, c, name) in [(1i32, 0x100u32, 0u32, &b"ab"[..]), (2, 0x400, 7, b"")] {
            b.extend_from_slice(&wd.to_ne_bytes());
            b.extend_from_slice(&m.to_ne_bytes());
            b.extend_from_slice(&c.to_ne_bytes());
            let len = if name.is_empty() { 0 } else { 16 };
            b.extend_from_slice(&(len as u32).to_ne_bytes());
            let start = b.len();
            b.extend_from_slice(name);
            b.resize(start + len, 0);
        }
        let evs = parse(&b);
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[0].name, b"ab");
        assert_eq!((evs[1].wd, evs[1].mask, evs[1].cookie), (2, 0x400, 7));
        // A name longer than what was read is not trusted.
        assert_eq!(parse(&b[..20]).len(), 0);
        assert_eq!(parse(&b[..b.len() - 1]).len(), 1);
    }
}
