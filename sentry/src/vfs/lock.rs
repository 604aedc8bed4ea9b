//! Advisory file locks kept by the Sentry: `flock(2)` locks and `fcntl(2)`
//! record locks (classic per-process POSIX locks and open-file-description
//! locks). Nothing reaches the host; the table is sandbox-wide.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use crate::kernel::wait::WaitQueue;
use crate::sync::Locked;

/// Which file a lock is on: `(st_dev, st_ino)`.
pub type FileKey = (u64, u64);

/// The end of a lock reaching "to end of file and beyond".
pub const OFFSET_MAX: i64 = i64::MAX;

/// Who holds a record lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Owner {
    /// a process (classic POSIX lock), by PID
    Process(i32),
    /// an open file description (OFD lock), by its address
    Description(usize),
}

impl Owner {
    /// What `F_GETLK` reports as `l_pid`.
    pub fn reported_pid(self) -> i32 {
        match self {
            Owner::Process(p) => p,
            Owner::Description(_) => -1,
        }
    }
}

/// One byte-range lock; `start..=end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordLock {
    /// holder
    pub owner: Owner,
    /// first byte
    pub start: i64,
    /// last byte (inclusive; [`OFFSET_MAX`] for "to EOF")
    pub end: i64,
    /// write (exclusive) rather than read (shared)
    pub write: bool,
}

impl RecordLock {
    fn overlaps(&self, start: i64, end: i64) -> bool {
        self.start <= end && start <= self.end
    }
}

#[derive(Debug, Default)]
struct FileLocks {
    /// flock holders: description address → exclusive
    flocks: HashMap<usize, bool>,
    records: Vec<RecordLock>,
}

impl FileLocks {
    fn is_empty(&self) -> bool {
        self.flocks.is_empty() && self.records.is_empty()
    }
}

/// Every lock of the sandbox.
#[derive(Debug, Default)]
pub struct LockTable {
    files: Mutex<HashMap<FileKey, FileLocks>>,
    /// who waits for whom (POSIX owners only), for `EDEADLK`
    waiting: Mutex<HashMap<i32, i32>>,
    /// callers waiting for a lock: woken by every release in the table
    /// (one queue for all files; only lock waiters sleep here)
    pub waiters: WaitQueue,
}

impl LockTable {
    /// An empty table.
    pub fn new() -> Self {
        LockTable::default()
    }

    fn files(&self) -> MutexGuard<'_, HashMap<FileKey, FileLocks>> {
        self.files.locked()
    }

    /// Whether the flock `exclusive` by `ofd` would conflict now.
    pub fn flock_conflicts(&self, key: FileKey, ofd: usize, exclusive: bool) -> bool {
        self.files().get(&key).is_some_and(|f| {
            f.flocks
                .iter()
                .any(|(&o, &ex)| o != ofd && (ex || exclusive))
        })
    }

    /// Drops `ofd`'s flock on `key`, if any; whether one was held.
    pub fn flock_unlock(&self, key: FileKey, ofd: usize) -> bool {
        let removed = {
            let mut files = self.files();
            let removed = files
                .get_mut(&key)
                .and_then(|f| f.flocks.remove(&ofd))
                .is_some();
            if files.get(&key).is_some_and(FileLocks::is_empty) {
                files.remove(&key);
            }
            removed
        };
        if removed {
            self.waiters.notify();
        }
        removed
    }

    /// The current flock mode of `ofd` on `key` (`Some(exclusive)`).
    pub fn flock_held(&self, key: FileKey, ofd: usize) -> Option<bool> {
        self.files()
            .get(&key)
            .and_then(|f| f.flocks.get(&ofd).copied())
    }

    /// Takes the flock if nothing conflicts; whether it was taken.
    pub fn flock_try(&self, key: FileKey, ofd: usize, exclusive: bool) -> bool {
        let mut files = self.files();
        let f = files.entry(key).or_default();
        if f.flocks
            .iter()
            .any(|(&o, &ex)| o != ofd && (ex || exclusive))
        {
            return false;
        }
        f.flocks.insert(ofd, exclusive);
        true
    }

    /// The first lock that would conflict with `want` (by another owner).
    pub fn conflict(&self, key: FileKey, want: &RecordLock) -> Option<RecordLock> {
        self.files()
            .get(&key)
            .and_then(|f| conflict_in(&f.records, want))
    }

    /// Sets (or with `write == None` clears) `owner`'s lock on a range if
    /// nothing conflicts; `Err(blocker)` otherwise.
    pub fn record_try(
        &self,
        key: FileKey,
        owner: Owner,
        start: i64,
        end: i64,
        write: Option<bool>,
    ) -> Result<(), RecordLock> {
        let mut files = self.files();
        let f = files.entry(key).or_default();
        if let Some(w) = write {
            let want = RecordLock {
                owner,
                start,
                end,
                write: w,
            };
            if let Some(c) = conflict_in(&f.records, &want) {
                if f.is_empty() {
                    files.remove(&key);
                }
                return Err(c);
            }
        }
        // Cut the owner's locks out of the range (splitting as needed).
        let mut released = false;
        let mut out = Vec::with_capacity(f.records.len() + 2);
        for l in f.records.drain(..) {
            if l.owner != owner || !l.overlaps(start, end) {
                out.push(l);
                continue;
            }
            // Only a changed or removed part wakes anyone.
            if write != Some(l.write) || write == Some(false) {
                released = true;
            }
            if l.start < start {
                out.push(RecordLock {
                    end: start - 1,
                    ..l
                });
            }
            if l.end > end {
                out.push(RecordLock {
                    start: end + 1,
                    ..l
                });
            }
        }
        if let Some(w) = write {
            // Merge with the owner's touching locks of the same type.
            let (mut s, mut e) = (start, end);
            out.retain(|l| {
                let touches = l.start <= e.saturating_add(1) && s <= l.end.saturating_add(1);
                if l.owner == owner && l.write == w && touches {
                    s = s.min(l.start);
                    e = e.max(l.end);
                    false
                } else {
                    true
                }
            });
            out.push(RecordLock {
                owner,
                start: s,
                end: e,
                write: w,
            });
        }
        out.sort_by_key(|l| l.start);
        f.records = out;
        if f.is_empty() {
            files.remove(&key);
        }
        drop(files);
        if released {
            self.waiters.notify();
        }
        Ok(())
    }

    /// Drops every record lock of `owner` on `key` (or on every file).
    pub fn release_records(&self, key: Option<FileKey>, owner: Owner) {
        let mut any = false;
        {
            let mut files = self.files();
            for (k, f) in files.iter_mut() {
                if key.is_some_and(|key| key != *k) {
                    continue;
                }
                let before = f.records.len();
                f.records.retain(|l| l.owner != owner);
                any |= f.records.len() != before;
            }
            files.retain(|_, f| !f.is_empty());
        }
        if any {
            self.waiters.notify();
        }
    }

    /// Whether `owner` holds any record lock at all.
    pub fn holds_records(&self, owner: Owner) -> bool {
        self.files()
            .values()
            .any(|f| f.records.iter().any(|l| l.owner == owner))
    }

    /// Drops the flock and OFD locks of a closing description.
    pub fn release_description(&self, key: FileKey, ofd: usize) {
        self.flock_unlock(key, ofd);
        self.release_records(Some(key), Owner::Description(ofd));
    }

    /// Records that process `pid` is about to wait for `holder`; `false`
    /// (and nothing recorded) when that would close a wait cycle.
    pub fn start_waiting(&self, pid: i32, holder: i32) -> bool {
        let mut w = self.waiting.locked();
        let mut cur = holder;
        for _ in 0..=w.len() {
            if cur == pid {
                return false;
            }
            match w.get(&cur) {
                Some(&next) => cur = next,
                None => break,
            }
        }
        w.insert(pid, holder);
        true
    }

    /// Process `pid` no longer waits.
    pub fn stop_waiting(&self, pid: i32) {
        self.waiting.locked().remove(&pid);
    }
}

fn conflict_in(records: &[RecordLock], want: &RecordLock) -> Option<RecordLock> {
    records
        .iter()
        .find(|l| {
            l.owner != want.owner && l.overlaps(want.start, want.end) && (l.write || want.write)
        })
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> LockTable {
        LockTable::new()
    }

    #[test]
    fn split_and_merge() {
        let t = table();
        let k = (1, 2);
        let a = Owner::Process(10);
        let b = Owner::Process(11);
        assert!(t.record_try(k, a, 0, 99, Some(true)).is_ok());
        assert!(t.record_try(k, a, 40, 59, None).is_ok());
        assert!(t
            .conflict(
                k,
                &RecordLock {
                    owner: b,
                    start: 40,
                    end: 59,
                    write: true
                }
            )
            .is_none());
        assert!(t
            .conflict(
                k,
                &RecordLock {
                    owner: b,
                    start: 59,
                    end: 60,
                    write: false
                }
            )
            .is_some());
        assert!(t.record_try(k, a, 40, 59, Some(true)).is_ok());
        let f = t.files();
        assert_eq!(f[&k].records.len(), 1);
        assert_eq!((f[&k].records[0].start, f[&k].records[0].end), (0, 99));
    }

    #[test]
    fn shared_and_exclusive() {
        let t = table();
        let k = (1, 3);
        assert!(t.flock_try(k, 1, false));
        assert!(t.flock_try(k, 2, false));
        assert!(!t.flock_try(k, 3, true));
        t.release_description(k, 1);
        t.release_description(k, 2);
        assert!(t.flock_try(k, 3, true));
    }

    #[test]
    fn deadlock_cycle() {
        let t = table();
        assert!(t.start_waiting(1, 2));
        assert!(!t.start_waiting(2, 1));
        t.stop_waiting(1);
        assert!(t.start_waiting(2, 1));
    }
}
