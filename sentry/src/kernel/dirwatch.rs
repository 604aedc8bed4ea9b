//! A watch of one directory of the sandbox for the outside (`sandbox
//! watch`, the API's file watch): what inotify would tell a guest of the
//! files made, written, removed, moved and changed in it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use abi::Errno;

use super::wait::{Registration, Waiter};
use super::Kernel;
use crate::vfs::inotify::{self, mask, Inotify};

/// The events watched.
const WANTED: u32 = mask::CREATE
    | mask::CLOSE_WRITE
    | mask::DELETE
    | mask::MOVED_FROM
    | mask::MOVED_TO
    | mask::ATTRIB
    | mask::DELETE_SELF
    | mask::MOVE_SELF;

/// One change in the watched directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// `create`, `write` (closed after writing), `remove`, `moved_from`,
    /// `moved_to`, `chmod` (metadata), or `gone` (the directory itself
    /// was removed or moved: the watch ends)
    pub kind: &'static str,
    /// the entry's name; empty for the directory itself
    pub name: String,
    /// whether the entry is a directory
    pub dir: bool,
}

/// A watch of one directory; it ends when dropped.
#[derive(Debug)]
pub struct DirWatch {
    ino: Arc<Inotify>,
}

impl DirWatch {
    /// Watches directory `path` (absolute, in the sandbox's tree);
    /// `ENOTDIR` for anything else. On a volume, the host's own changes
    /// are seen too.
    pub fn new(kernel: &Kernel, path: &str) -> Result<DirWatch, Errno> {
        let fs = &kernel.fs;
        let loc = fs.resolve(&fs.root(), path.as_bytes(), true)?;
        let (key, is_dir) = inotify::identify(loc.node()).ok_or(Errno::ENOENT)?;
        if !is_dir {
            return Err(Errno::ENOTDIR);
        }
        let host = crate::vfs::volume_watch::share(loc.node(), key)?;
        let ino = Inotify::new();
        ino.add_watch(key, WANTED, host)?;
        Ok(DirWatch { ino })
    }

    /// The changes since the last call, waiting up to `timeout` for one.
    pub fn next(&self, timeout: Duration) -> Vec<Change> {
        let deadline = Instant::now() + timeout;
        let waiter = Waiter::new();
        let queues = [self.ino.waiters.clone()];
        let _reg = Registration::new(&waiter, &queues);
        loop {
            waiter.prepare();
            let changes: Vec<Change> = self.ino.take_all().into_iter().filter_map(change).collect();
            if !changes.is_empty() || Instant::now() >= deadline {
                return changes;
            }
            waiter.sleep(Some(deadline));
        }
    }
}

/// An event as a [`Change`]; `None` for those not reported.
fn change((m, name): (u32, Vec<u8>)) -> Option<Change> {
    let kind = match m & mask::ALL_EVENTS {
        e if e & mask::CREATE != 0 => "create",
        e if e & mask::CLOSE_WRITE != 0 => "write",
        e if e & mask::DELETE != 0 => "remove",
        e if e & mask::MOVED_FROM != 0 => "moved_from",
        e if e & mask::MOVED_TO != 0 => "moved_to",
        e if e & mask::ATTRIB != 0 => "chmod",
        e if e & (mask::DELETE_SELF | mask::MOVE_SELF) != 0 => "gone",
        _ => return None,
    };
    let name = String::from_utf8_lossy(&name)
        .trim_end_matches('\0')
        .to_string();
    Some(Change {
        kind,
        name,
        dir: m & mask::ISDIR != 0,
    })
}
