//! A watch of one directory of the sandbox for the outside (`sandbox
//! watch`, the API's file watch): what inotify would tell a guest of the
//! files made, written, removed, moved and changed in it, and, when
//! recursive, in the folders below it (each watched as it appears, as
//! `inotifywait -r` does, its first entries told as made).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use abi::Errno;

use super::wait::{Registration, Waiter};
use super::Kernel;
use crate::sync::Locked;
use crate::vfs::inotify::{self, mask, Inotify};

/// The most folders a recursive watch holds (one inotify watch each).
const MAX_DIRS: usize = 8192;

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
    /// the entry's path from the watched directory (its name, for an
    /// entry of the directory itself); empty for the directory itself
    pub name: String,
    /// whether the entry is a directory
    pub dir: bool,
}

/// A watch of one directory; it ends when dropped.
#[derive(Debug)]
pub struct DirWatch {
    ino: Arc<Inotify>,
    /// the watched directory's own watch
    root_wd: i32,
    /// for a recursive watch, the folders below it
    tree: Option<Tree>,
}

/// The folders a recursive watch holds, by watch descriptor: their path
/// from the watched directory.
#[derive(Debug)]
struct Tree {
    kernel: Weak<Kernel>,
    root: String,
    dirs: Mutex<HashMap<i32, String>>,
}

impl DirWatch {
    /// Watches directory `path` (absolute, in the sandbox's tree);
    /// `ENOTDIR` for anything else. On a volume, the host's own changes
    /// are seen too.
    pub fn new(kernel: &Arc<Kernel>, path: &str, recursive: bool) -> Result<DirWatch, Errno> {
        let ino = Inotify::new();
        let root_wd = watch_dir(kernel, &ino, path, true)?.ok_or(Errno::ENOTDIR)?;
        let tree = recursive.then(|| Tree {
            kernel: Arc::downgrade(kernel),
            root: match path.trim_end_matches('/') {
                "" => "/".to_string(),
                p => p.to_string(),
            },
            dirs: Mutex::new(HashMap::new()),
        });
        let w = DirWatch { ino, root_wd, tree };
        if let Some(t) = &w.tree {
            w.add_below(kernel, t, "", false, &mut Vec::new());
        }
        Ok(w)
    }

    /// Watches the folders below `rel` (a path from the watched
    /// directory, "" for itself); `told`: the entries found are told as
    /// made into `out` (a folder that just appeared may have them already).
    fn add_below(&self, kernel: &Kernel, t: &Tree, rel: &str, told: bool, out: &mut Vec<Change>) {
        let mut todo = vec![rel.to_string()];
        while let Some(rel) = todo.pop() {
            let path = join(&t.root, &rel);
            let fs = &kernel.fs;
            let Ok(loc) = fs.resolve(&fs.root(), path.as_bytes(), false) else {
                continue;
            };
            let Ok(entries) = fs.list(&loc) else {
                continue;
            };
            for e in entries {
                if e.name == b"." || e.name == b".." {
                    continue;
                }
                let name = join(&rel, &String::from_utf8_lossy(&e.name));
                let dir = e.kind == abi::dt::DIR;
                if told {
                    out.push(Change {
                        kind: "create",
                        name: name.clone(),
                        dir,
                    });
                }
                if !dir || t.dirs.locked().len() >= MAX_DIRS {
                    continue;
                }
                if let Ok(Some(wd)) = watch_dir(kernel, &self.ino, &join(&t.root, &name), false) {
                    t.dirs.locked().insert(wd, name.clone());
                    todo.push(name);
                }
            }
        }
    }

    /// Stops watching folder `rel` and those below it (it went, or moved
    /// out).
    fn forget(&self, t: &Tree, rel: &str) {
        let below = format!("{rel}/");
        let gone: Vec<i32> = t
            .dirs
            .locked()
            .iter()
            .filter(|(_, p)| *p == rel || p.starts_with(&below))
            .map(|(wd, _)| *wd)
            .collect();
        for wd in gone {
            t.dirs.locked().remove(&wd);
            let _ = self.ino.rm_watch(wd);
        }
    }

    /// The events taken as changes, the tree kept up to date.
    fn changes(&self) -> Vec<Change> {
        let mut out = Vec::new();
        for (wd, m, name) in self.ino.take_all() {
            let prefix = if wd == self.root_wd {
                String::new()
            } else {
                match self
                    .tree
                    .as_ref()
                    .and_then(|t| t.dirs.locked().get(&wd).cloned())
                {
                    Some(p) => p,
                    None => continue,
                }
            };
            // A folder below says it went through its parent's event.
            if wd != self.root_wd && m & (mask::DELETE_SELF | mask::MOVE_SELF | mask::IGNORED) != 0
            {
                continue;
            }
            let Some(mut c) = change((m, name)) else {
                continue;
            };
            if !prefix.is_empty() {
                c.name = join(&prefix, &c.name);
            }
            let (dir, name) = (c.dir, c.name.clone());
            out.push(c);
            let Some(t) = &self.tree else {
                continue;
            };
            if dir && m & (mask::DELETE | mask::MOVED_FROM) != 0 {
                self.forget(t, &name);
            }
            if dir && m & (mask::CREATE | mask::MOVED_TO) != 0 {
                if let Some(k) = t.kernel.upgrade() {
                    let path = join(&t.root, &name);
                    if t.dirs.locked().len() < MAX_DIRS {
                        if let Ok(Some(wd)) = watch_dir(&k, &self.ino, &path, false) {
                            t.dirs.locked().insert(wd, name.clone());
                            self.add_below(&k, t, &name, true, &mut out);
                        }
                    }
                }
            }
        }
        out
    }

    /// The changes since the last call, waiting up to `timeout` for one.
    pub fn next(&self, timeout: Duration) -> Vec<Change> {
        let deadline = Instant::now() + timeout;
        let waiter = Waiter::new();
        let queues = [self.ino.waiters.clone()];
        let _reg = Registration::new(&waiter, &queues);
        loop {
            waiter.prepare();
            let changes = self.changes();
            if !changes.is_empty() || Instant::now() >= deadline {
                return changes;
            }
            waiter.sleep(Some(deadline));
        }
    }
}

/// Adds a watch of directory `path` to `ino`: its descriptor, `None` if it
/// is not a directory. `follow`: a link at its end is followed.
fn watch_dir(
    kernel: &Kernel,
    ino: &Arc<Inotify>,
    path: &str,
    follow: bool,
) -> Result<Option<i32>, Errno> {
    let fs = &kernel.fs;
    let loc = fs.resolve(&fs.root(), path.as_bytes(), follow)?;
    let (key, is_dir) = inotify::identify(loc.node()).ok_or(Errno::ENOENT)?;
    if !is_dir {
        return Ok(None);
    }
    let host = crate::vfs::volume_watch::share(loc.node(), key)?;
    ino.add_watch(key, WANTED, host).map(Some)
}

/// `a/b`, or `b` when `a` is empty.
fn join(a: &str, b: &str) -> String {
    if a.is_empty() {
        b.to_string()
    } else {
        format!("{}/{b}", a.trim_end_matches('/'))
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
