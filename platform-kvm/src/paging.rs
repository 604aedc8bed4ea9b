//! Guest page tables, written by the Sentry in frames of the platform's
//! pool (4-level, 4 KiB pages).
//!
//! KVM may cache what a table said (shadow pages on PVM, the TLB with EPT
//! or NPT). A new or widened entry needs nothing: the guest's next access
//! faults and KVM reads the table afresh. An entry that loses a page or a
//! right is followed by dropping the host's mapping of the page it held
//! ([`crate::sys::Region::forget`]): KVM's MMU notifier then forgets every
//! guest mapping of that page on every vCPU, and the next access reads
//! the tables again. Frames of a dead address space are reused only after
//! KVM dropped its shadow pages of them (the pool's slot is reloaded).

use std::sync::{Arc, Mutex};

use platform::{AddressSpace, Error, Prot, Result, PAGE_SIZE};

use crate::layout::{self, PTE_A, PTE_D, PTE_NX, PTE_P, PTE_U, PTE_W};
use crate::sys::Region;
use crate::Shared;

/// Guest-physical bytes of page-table frames the pool may hand out.
pub(crate) const POOL_SIZE: u64 = 1 << 30;
/// Marks an entry that holds a page, present or not (`PROT_NONE`).
const PTE_HELD: u64 = 1 << 9;
const ADDR: u64 = 0x000f_ffff_ffff_f000;

/// Page-table frames.
#[derive(Debug)]
pub(crate) struct Pool {
    region: Region,
    gpa: u64,
    state: Mutex<PoolState>,
}

#[derive(Debug, Default)]
struct PoolState {
    /// first never-used offset
    next: u64,
    /// zeroed frames KVM holds nothing of (guest-physical)
    free: Vec<u64>,
    /// zeroed frames of dead address spaces, KVM may still shadow
    dirty: Vec<u64>,
}

impl Pool {
    pub(crate) fn new(gpa: u64) -> Result<Pool> {
        Ok(Pool {
            region: Region::anonymous(POOL_SIZE as usize)?,
            gpa,
            state: Mutex::new(PoolState::default()),
        })
    }

    pub(crate) fn region(&self) -> &Region {
        &self.region
    }

    fn state(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A zeroed frame (guest-physical address).
    fn alloc(&self, shared: &Shared) -> Result<u64> {
        let mut s = self.state();
        if let Some(f) = s.free.pop() {
            return Ok(f);
        }
        if s.next + PAGE_SIZE <= POOL_SIZE {
            s.next += PAGE_SIZE;
            return Ok(self.gpa + s.next - PAGE_SIZE);
        }
        if s.dirty.is_empty() {
            return Err(Error::Misuse("out of KVM page-table frames"));
        }
        shared.reload_slot(crate::SLOT_TABLES, self.gpa, &self.region)?;
        let dirty = std::mem::take(&mut s.dirty);
        s.free = dirty;
        s.free
            .pop()
            .ok_or(Error::Misuse("out of KVM page-table frames"))
    }

    /// Gives back frames of a dead address space.
    fn release(&self, frames: Vec<u64>) {
        for &f in &frames {
            self.region.forget(f - self.gpa, PAGE_SIZE);
        }
        self.state().dirty.extend(frames);
    }

    fn word(&self, table: u64, index: u64) -> &std::sync::atomic::AtomicU64 {
        self.region.word(table - self.gpa + index * 8)
    }
}

/// Runs of guest-physical pages whose KVM mappings must go.
#[derive(Default)]
struct Forget(Vec<(u64, u64)>);

impl Forget {
    fn add(&mut self, gpa: u64) {
        match self.0.last_mut() {
            Some((start, len)) if *start + *len == gpa => *len += PAGE_SIZE,
            _ => self.0.push((gpa, PAGE_SIZE)),
        }
    }

    fn apply(self, shared: &Shared) {
        for (start, len) in self.0 {
            shared.memory.forget(start, len);
        }
    }
}

fn entry_for(gpa: u64, prot: Prot) -> u64 {
    if prot == Prot::NONE {
        return gpa | PTE_HELD;
    }
    let mut e = gpa | PTE_HELD | PTE_P | PTE_U | PTE_A;
    if prot.write {
        e |= PTE_W | PTE_D;
    }
    if !prot.exec {
        e |= PTE_NX;
    }
    e
}

/// Whether replacing `old` by `new` takes something away from the guest.
fn narrows(old: u64, new: u64) -> bool {
    old & PTE_P != 0
        && (new & PTE_P == 0
            || new & ADDR != old & ADDR
            || (old & PTE_W != 0 && new & PTE_W == 0)
            || (old & PTE_NX == 0 && new & PTE_NX != 0))
}

/// One guest address space.
#[derive(Debug)]
pub struct KvmAddressSpace {
    shared: Arc<Shared>,
    /// guest-physical address of the PML4
    root: u64,
    /// every frame of the tree, the root first
    frames: Mutex<Vec<u64>>,
    /// time its vCPUs spent in `KVM_RUN`
    guest_ns: std::sync::atomic::AtomicU64,
}

impl KvmAddressSpace {
    pub(crate) fn new(shared: Arc<Shared>) -> Result<Self> {
        let root = shared.tables.alloc(&shared)?;
        shared.tables.word(root, 511).store(
            (shared.system_gpa + layout::PDPT) | PTE_P | PTE_W | PTE_A,
            std::sync::atomic::Ordering::Release,
        );
        Ok(KvmAddressSpace {
            shared,
            root,
            frames: Mutex::new(vec![root]),
            guest_ns: Default::default(),
        })
    }

    /// The `CR3` of this address space.
    pub(crate) fn root(&self) -> u64 {
        self.root
    }

    /// Whether `va` is mapped, accessible or not (a fault there is an
    /// access error, not a missing page).
    pub(crate) fn holds(&self, va: u64) -> bool {
        use std::sync::atomic::Ordering;
        va < layout::MAX_USER_ADDRESS
            && matches!(self.leaf(va, false), Ok(Ok(w)) if w.load(Ordering::Acquire) & PTE_HELD != 0)
    }

    /// The byte the guest reads at `va`, if it may read there.
    pub(crate) fn read_byte(&self, va: u64) -> Option<u8> {
        use std::sync::atomic::Ordering;
        if va >= layout::MAX_USER_ADDRESS {
            return None;
        }
        let e = match self.leaf(va, false) {
            Ok(Ok(w)) => w.load(Ordering::Acquire),
            _ => return None,
        };
        if e & PTE_P == 0 {
            return None;
        }
        self.shared.memory.byte((e & ADDR) + (va & (PAGE_SIZE - 1)))
    }

    /// Adds time spent running guest code here.
    pub(crate) fn add_guest_time(&self, d: std::time::Duration) {
        self.guest_ns
            .fetch_add(d.as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
    }

    fn pool(&self) -> &Pool {
        &self.shared.tables
    }

    /// The leaf entry of `va`, making the tables on the way when `make`;
    /// `Err(next)` when a table is missing: the next address that may
    /// have one.
    fn leaf(
        &self,
        va: u64,
        make: bool,
    ) -> Result<std::result::Result<&std::sync::atomic::AtomicU64, u64>> {
        use std::sync::atomic::Ordering;
        let mut table = self.root;
        for shift in [39u32, 30, 21] {
            let w = self.pool().word(table, (va >> shift) & 511);
            let e = w.load(Ordering::Acquire);
            table = if e & PTE_P != 0 {
                e & ADDR
            } else if make {
                let f = self.pool().alloc(&self.shared)?;
                self.frames
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(f);
                w.store(f | PTE_P | PTE_W | PTE_U | PTE_A, Ordering::Release);
                f
            } else {
                let span = 1u64 << shift;
                return Ok(Err((va & !(span - 1)) + span));
            };
        }
        Ok(Ok(self.pool().word(table, (va >> 12) & 511)))
    }

    fn check(addr: u64, len: u64) -> Result<u64> {
        let end = addr.checked_add(len).ok_or(Error::Misuse("range wraps"))?;
        if !addr.is_multiple_of(PAGE_SIZE)
            || !len.is_multiple_of(PAGE_SIZE)
            || end > layout::MAX_USER_ADDRESS
        {
            return Err(Error::Misuse(
                "range outside the user half or not page-aligned",
            ));
        }
        Ok(end)
    }

    /// Rewrites the entries of `[addr, end)` that exist with `f(old)`.
    fn rewrite(&self, addr: u64, end: u64, f: impl Fn(u64) -> Option<u64>) -> Result<()> {
        use std::sync::atomic::Ordering;
        let mut forget = Forget::default();
        let mut va = addr;
        while va < end {
            match self.leaf(va, false)? {
                Ok(w) => {
                    let old = w.load(Ordering::Acquire);
                    if let Some(new) = f(old) {
                        w.store(new, Ordering::Release);
                        if narrows(old, new) {
                            forget.add(old & ADDR);
                        }
                    }
                    va += PAGE_SIZE;
                }
                Err(next) => va = next,
            }
        }
        forget.apply(&self.shared);
        Ok(())
    }
}

impl AddressSpace for KvmAddressSpace {
    fn map(&self, addr: u64, len: u64, prot: Prot, file_offset: u64) -> Result<()> {
        use std::sync::atomic::Ordering;
        let end = Self::check(addr, len)?;
        if !file_offset.is_multiple_of(PAGE_SIZE)
            || file_offset + len > self.shared.memory.len() as u64
        {
            return Err(Error::Misuse("memory-file range outside the file"));
        }
        self.shared.ensure_memory(file_offset, len)?;
        let mut forget = Forget::default();
        let mut va = addr;
        while va < end {
            let Ok(w) = self.leaf(va, true)? else {
                return Err(Error::Misuse("page table missing after it was made"));
            };
            let new = entry_for(file_offset + (va - addr), prot);
            let old = w.swap(new, Ordering::AcqRel);
            if narrows(old, new) {
                forget.add(old & ADDR);
            }
            va += PAGE_SIZE;
        }
        forget.apply(&self.shared);
        Ok(())
    }

    fn unmap(&self, addr: u64, len: u64) -> Result<()> {
        let end = Self::check(addr, len)?;
        self.rewrite(addr, end, |old| (old != 0).then_some(0))
    }

    fn protect(&self, addr: u64, len: u64, prot: Prot) -> Result<()> {
        let end = Self::check(addr, len)?;
        self.rewrite(addr, end, |old| {
            (old & PTE_HELD != 0).then(|| entry_for(old & ADDR, prot))
        })
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn cpu_time(&self) -> Option<std::time::Duration> {
        Some(std::time::Duration::from_nanos(
            self.guest_ns.load(std::sync::atomic::Ordering::Relaxed),
        ))
    }
}

impl Drop for KvmAddressSpace {
    fn drop(&mut self) {
        let frames = std::mem::take(&mut *self.frames.lock().unwrap_or_else(|e| e.into_inner()));
        self.shared.tables.release(frames);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_say_what_the_guest_may_do() {
        let ro = entry_for(0x5000, Prot::from_bits(1));
        assert_eq!(ro & (PTE_P | PTE_W | PTE_U), PTE_P | PTE_U);
        assert_ne!(ro & PTE_NX, 0);
        let rwx = entry_for(0x5000, Prot::from_bits(7));
        assert_eq!(rwx & PTE_NX, 0);
        assert_ne!(rwx & PTE_W, 0);
        let none = entry_for(0x5000, Prot::NONE);
        assert_eq!(none & PTE_P, 0);
        assert_eq!(none & ADDR, 0x5000);
    }

    #[test]
    fn only_narrowing_forgets() {
        let ro = entry_for(0x5000, Prot::from_bits(1));
        let rw = entry_for(0x5000, Prot::RW);
        assert!(!narrows(ro, rw));
        assert!(narrows(rw, ro));
        assert!(narrows(rw, 0));
        assert!(narrows(ro, entry_for(0x6000, Prot::from_bits(1))));
        assert!(!narrows(0, rw));
        assert!(narrows(entry_for(0x5000, Prot::from_bits(5)), ro));
    }
}
