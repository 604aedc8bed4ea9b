//! Byte budgets and mapping pins that memory-backed files and the page
//! cache share.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use abi::Errno;

/// A count of bytes against a limit, shared by whoever charges it.
#[derive(Debug)]
pub struct Quota {
    used: AtomicU64,
    limit: u64,
}

impl Quota {
    /// A quota of `limit` bytes, none used.
    pub fn new(limit: u64) -> Arc<Quota> {
        Arc::new(Quota {
            used: AtomicU64::new(0),
            limit,
        })
    }

    /// A quota of `limit` bytes, none used, owned by one file system.
    pub fn unshared(limit: u64) -> Quota {
        Quota {
            used: AtomicU64::new(0),
            limit,
        }
    }

    /// Takes `bytes`, or nothing and `ENOSPC` if they do not fit.
    pub(crate) fn charge(&self, bytes: u64) -> Result<(), Errno> {
        let mut cur = self.used.load(Ordering::Relaxed);
        loop {
            let new = cur
                .checked_add(bytes)
                .filter(|&n| n <= self.limit)
                .ok_or(Errno::ENOSPC)?;
            match self
                .used
                .compare_exchange(cur, new, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(v) => cur = v,
            }
        }
    }

    /// Gives `bytes` back.
    pub(crate) fn refund(&self, bytes: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                Some(u.saturating_sub(bytes))
            });
    }

    pub fn available(&self) -> u64 {
        self.limit.saturating_sub(self.used.load(Ordering::Relaxed))
    }

    /// Bytes it holds at most.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes taken.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }
}

/// Held by every VMA that maps a memory-backed file (tmpfs, memfd) shared
/// and may write it
/// (`VM_SHARED | VM_MAYWRITE`): while one lives, `F_SEAL_WRITE` is
/// refused with `EBUSY` (Linux's `mapping_deny_writable`). Clones go with
/// VMA splits and `fork`; the last drop ends the pin.
#[derive(Clone, Debug)]
pub struct WritableMapping(#[allow(dead_code)] Arc<()>);

impl WritableMapping {
    /// A pin that lasts as long as `pin` has owners.
    pub fn new(pin: Arc<()>) -> Self {
        WritableMapping(pin)
    }
}
