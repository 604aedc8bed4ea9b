//! The memory manager: a guest address space's VMAs, backed by ranges of the
//! memory file and mirrored into the platform's address space.
//!
//! Every VMA owns a contiguous range of memory-file offsets, so splitting a
//! VMA (partial `munmap`/`mprotect`) keeps offsets consistent and freeing a
//! piece frees exactly its offsets. Guest pages are mapped into the platform's
//! address space when the VMA is created, so the host kernel resolves the
//! first touch of a page from the (sparse) memory file without a round trip to
//! the Sentry.
//!
//! A private mapping of a file of the root's image starts out as a view of
//! the file's image (see [`crate::mm::fileimage`]): its pages are the image's,
//! mapped without write access, and its own offsets hold nothing yet. The
//! first store to such a page, by the guest (a write fault, which the
//! Sentry resolves) or by the Sentry for a system call, copies the page
//! into the mapping's own offsets and maps the copy instead
//! ([`Vma::image_pages`]). Any other fault the Sentry sees is a real guest
//! error.
//!
//! A restored sandbox's memory shares its image's pages the same way: the
//! image's file is shown read-only at a window of memory-file offsets
//! ([`MemoryFile::attach_base`]), and a restored VMA's saved pages are
//! views of it ([`Vma::base`]) until written. Every sandbox restored from
//! one image shares the host's cached pages of that file.

pub mod fileimage;
pub mod guestio;
pub mod guestmem;
pub mod memfile;
pub mod pagecache;
pub mod quota;
pub mod snapshot;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use abi::Errno;
use platform::{Access, AddressSpace, Prot};

use crate::mm::fileimage::FileImage;
use crate::mm::memfile::MemoryFile;
use crate::PAGE_SIZE;

/// What a file mapping maps, as mm sees it: a host file the Sentry holds
/// open (a volume's or the root image's), whatever file system it is of.
pub trait Mappable: Send + Sync + std::fmt::Debug {
    /// The host descriptor its pages are read from and written back to.
    fn fd(&self) -> std::os::fd::BorrowedFd<'_>;
    /// The host file's identity, `(st_dev, st_ino)`: every open of one
    /// file, through any name or link, has the same.
    fn identity(&self) -> Result<(u64, u64), Errno>;
    /// For a file of the root's read-only image: the sandbox's images,
    /// where its image for private mappings is found.
    fn images(&self) -> Option<&Arc<fileimage::Images>>;
}

/// Linux's default `vm.max_map_count`.
const MAX_VMAS: usize = 65530;

/// A write fault on a file's image in a mapping this small makes the whole
/// mapping its own (see [`MemoryManager::handle_fault`]).
const OWN_WHOLE: u64 = 64 * PAGE_SIZE;

/// Else the aligned piece of this many bytes around the fault.
const OWN_CHUNK: u64 = 16 * PAGE_SIZE;

/// Offsets reserved for the heap, so `brk` grows in place.
const HEAP_RESERVE: u64 = 1 << 32;

/// Memory-file pages shared by several mappings (`MAP_SHARED` anonymous
/// memory, which stays shared across `fork`); released when the last
/// mapping goes. A region may instead be a view of a volume file's page
/// cache, whose pages are the cache's: the last mapping going writes them
/// back to the host (see [`crate::mm::pagecache`]).
#[derive(Debug)]
pub struct SharedRegion {
    mf: Arc<MemoryFile>,
    off: u64,
    len: u64,
    /// for a view of a page cache: the cache and the file offset of the
    /// region's first byte
    file: Option<(crate::mm::pagecache::CachePin, u64)>,
}

impl SharedRegion {
    /// Allocates `len` bytes (page-aligned) of the memory file.
    pub fn new(mf: &Arc<MemoryFile>, len: u64) -> Result<Arc<Self>, Errno> {
        let off = mf.allocate(len)?;
        Ok(Arc::new(SharedRegion {
            mf: mf.clone(),
            off,
            len,
            file: None,
        }))
    }

    /// A view of `len` bytes of a page cache's pages at memory-file offset
    /// `off`, which hold the file's bytes from `pos` on.
    pub fn file_view(
        mf: &Arc<MemoryFile>,
        off: u64,
        len: u64,
        pin: crate::mm::pagecache::CachePin,
        pos: u64,
    ) -> Arc<Self> {
        Arc::new(SharedRegion {
            mf: mf.clone(),
            off,
            len,
            file: Some((pin, pos)),
        })
    }

    /// For a view of a page cache: the cache and the file offset of the
    /// memory-file offset `off` (inside the region).
    pub fn file_at(&self, off: u64) -> Option<(&Arc<crate::mm::pagecache::FileCache>, u64)> {
        self.file
            .as_ref()
            .map(|(pin, pos)| (pin.cache(), pos + off.saturating_sub(self.off)))
    }

    /// Memory-file offset of the region's first byte.
    pub fn offset(&self) -> u64 {
        self.off
    }

    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memory file.
    pub fn memory_file(&self) -> &Arc<MemoryFile> {
        &self.mf
    }
}

impl Drop for SharedRegion {
    fn drop(&mut self) {
        match &self.file {
            // The cache's pages: written back now that no mapping of this
            // piece is left; the pin's drop frees them with the last one.
            Some((pin, pos)) => {
                if let Err(e) = pin.cache().writeback(Some((*pos, pos + self.len))) {
                    tracing::warn!("page cache writeback failed: {e:?}");
                }
            }
            None => self.mf.release(self.off, self.len),
        }
    }
}

/// What backs a VMA's contents.
#[derive(Clone)]
pub enum Backing {
    /// zero-filled anonymous memory
    Anon,
    /// zero-filled memory shared with other mappings
    Shared(Arc<SharedRegion>),
    /// a private copy of a file's contents
    File {
        /// the file
        file: Arc<dyn Mappable>,
        /// file position of the VMA's first byte
        pos: u64,
        /// how many bytes from `pos` come from the file (the rest is zeros,
        /// like the tail of an ELF segment's last page)
        avail: u64,
        /// guest path, for /proc/self/maps later
        name: String,
        /// the file's image, which the mapping's pages share until written
        /// (a file of the root's image; `None`: a private copy)
        image: Option<Arc<FileImage>>,
    },
}

impl fmt::Debug for Backing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backing::Anon => f.write_str("Anon"),
            Backing::Shared(r) => write!(f, "Shared({:#x})", r.off),
            Backing::File { pos, name, .. } => write!(f, "File({name}@{pos:#x})"),
        }
    }
}

/// A virtual memory area: `[start, end)` with one protection and backing.
#[derive(Clone, Debug)]
pub struct Vma {
    /// first address
    pub start: u64,
    /// one past the last address
    pub end: u64,
    /// protection
    pub prot: Prot,
    /// `MAP_SHARED` (matters for `madvise` and, later, `fork`)
    pub shared: bool,
    /// memory-file offset of `start`
    pub offset: u64,
    /// contents
    pub backing: Backing,
    /// part of the `brk` heap, whose offsets belong to the heap reservation
    pub heap: bool,
    /// `mprotect` may add `PROT_WRITE` (false for shared mappings of files
    /// opened read-only)
    pub may_write: bool,
    /// `mprotect` may add `PROT_EXEC` (false for a file on a `noexec`
    /// mount, as Linux's `VM_MAYEXEC`)
    pub may_exec: bool,
    /// from this address on, pages lie past the end of the mapped file:
    /// touching them is `SIGBUS`, so they are not mapped into the guest
    pub sigbus_from: Option<u64>,
    /// for a shared mapping that may write a tmpfs file: the pin that
    /// keeps `F_SEAL_WRITE` off the file while the mapping lives
    pub writer: Option<crate::mm::quota::WritableMapping>,
    /// for a private mapping of a file's image: which pages still are the
    /// image's (see the module's documentation)
    pub image_pages: Option<ImagePages>,
    /// for memory restored from a sandbox image: where its saved pages
    /// are in the image's window (those `image_pages` marks still are)
    pub base: Option<BasePages>,
    /// the NUMA policy `mbind(2)` gave it (`None`: the default)
    pub mempolicy: Option<MemPolicy>,
    /// sealed by `mseal(2)`: its range can no longer be unmapped, moved,
    /// replaced or reprotected
    pub sealed: bool,
    /// what a shared mapping maps (the open file, opaque here), which
    /// `remap_file_pages(2)` maps again at another offset
    pub source: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

/// A NUMA memory policy as `get_mempolicy(2)` reports it: the mode with
/// its mode flags, and the first word of its node mask. The sandbox has
/// one node, and Linux copies out no more words than there are nodes, so
/// later words are never seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemPolicy {
    /// `MPOL_*` mode ORed with its `MPOL_F_*` mode flags
    pub mode: i32,
    /// the node mask's first word
    pub nodes: u64,
}

/// The pages of a private file mapping that still are its file's image's:
/// one bit per page from the VMA's start (set: the image's page, mapped
/// without write access; clear: the VMA's own page at its offset).
#[derive(Clone, Debug)]
pub struct ImagePages {
    bits: RefCell<Vec<u64>>,
    /// the leading pages that the file fills whole (or up to its end):
    /// those that revert to the image after `MADV_DONTNEED`
    shareable: u64,
}

impl ImagePages {
    /// The first `shareable` pages the image's, of `pages` in all.
    fn new(pages: u64, shareable: u64) -> ImagePages {
        let mut bits = vec![0u64; pages.div_ceil(64) as usize];
        for i in 0..shareable.min(pages) {
            bits[(i / 64) as usize] |= 1 << (i % 64);
        }
        ImagePages {
            bits: RefCell::new(bits),
            shareable,
        }
    }

    fn get(&self, i: u64) -> bool {
        self.bits
            .borrow()
            .get((i / 64) as usize)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    fn set(&self, i: u64, image: bool) {
        if let Some(w) = self.bits.borrow_mut().get_mut((i / 64) as usize) {
            if image {
                *w |= 1 << (i % 64);
            } else {
                *w &= !(1 << (i % 64));
            }
        }
    }

    /// Moves pages `at..pages` to a new set (page `at` becoming its first).
    fn split_off(&self, at: u64, pages: u64) -> ImagePages {
        let right = ImagePages::new(pages - at, 0);
        for i in at..pages {
            right.set(i - at, self.get(i));
            self.set(i, false);
        }
        ImagePages {
            shareable: self.shareable.saturating_sub(at),
            ..right
        }
    }
}

/// The saved pages of a restored VMA in the image's window: page numbers
/// (counted from where the VMA started when it was restored) and their
/// memory-file offsets, in order. Sparse: a huge reservation saved few.
#[derive(Clone, Debug)]
pub struct BasePages {
    slots: Arc<[(u64, u64)]>,
    /// the number, among `slots`', of this VMA's first page
    first: u64,
}

impl BasePages {
    /// `slots` must be sorted by page number.
    pub fn new(slots: Vec<(u64, u64)>) -> BasePages {
        debug_assert!(slots.windows(2).all(|w| w[0].0 < w[1].0));
        BasePages {
            slots: slots.into(),
            first: 0,
        }
    }

    /// The window offset of the VMA's page `i`, if it was saved.
    fn offset(&self, i: u64) -> Option<u64> {
        let k = self.first + i;
        let j = self.slots.binary_search_by_key(&k, |s| s.0).ok()?;
        Some(self.slots[j].1)
    }

    /// Page numbers (of the VMA) that were saved.
    fn pages(&self) -> impl Iterator<Item = u64> + '_ {
        self.slots
            .iter()
            .filter_map(|&(k, _)| k.checked_sub(self.first))
    }
}

/// What [`MemoryManager::handle_fault`] made of a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultFix {
    /// A write to a page of a file's image: the page is the mapping's own
    /// now; run the guest again.
    Copied,
    /// The page is the mapping's own and writable already (another thread
    /// got it copied meanwhile): run the guest again, once.
    Stale,
    /// A real guest error.
    None,
}

impl Vma {
    /// A VMA over `[start, end)` at memory-file offset `offset`, with
    /// nothing but its protection, sharing and backing said.
    fn new(start: u64, end: u64, prot: Prot, shared: bool, offset: u64, backing: Backing) -> Vma {
        Vma {
            start,
            end,
            prot,
            shared,
            offset,
            backing,
            heap: false,
            may_write: true,
            may_exec: true,
            sigbus_from: None,
            writer: None,
            image_pages: None,
            base: None,
            mempolicy: None,
            sealed: false,
            source: None,
        }
    }

    /// Whether this VMA's offsets are its own to free (not the heap
    /// reservation's, not a shared region's).
    fn owns_offsets(&self) -> bool {
        !self.heap && !matches!(self.backing, Backing::Shared(_))
    }

    fn split_at(&mut self, at: u64) -> Vma {
        debug_assert!(at > self.start && at < self.end);
        let delta = at - self.start;
        let mut right = self.clone();
        right.start = at;
        right.offset += delta;
        if let Backing::File { pos, avail, .. } = &mut right.backing {
            *pos += delta;
            *avail = avail.saturating_sub(delta);
        }
        right.image_pages = self
            .image_pages
            .as_ref()
            .map(|p| p.split_off(delta / PAGE_SIZE, (self.end - self.start) / PAGE_SIZE));
        if let Some(b) = &mut right.base {
            b.first += delta / PAGE_SIZE;
        }
        self.end = at;
        right
    }

    /// Memory-file offset of the image's byte behind `addr` (inside this
    /// VMA), when its page still is the image's.
    fn image_offset(&self, addr: u64) -> Option<u64> {
        let pages = self.image_pages.as_ref()?;
        if let Some(b) = &self.base {
            let i = (addr - self.start) / PAGE_SIZE;
            return pages
                .get(i)
                .then(|| b.offset(i))
                .flatten()
                .map(|o| o + (addr - self.start) % PAGE_SIZE);
        }
        let Backing::File {
            image: Some(img),
            pos,
            ..
        } = &self.backing
        else {
            return None;
        };
        pages
            .get((addr - self.start) / PAGE_SIZE)
            .then(|| img.offset() + pos + (addr - self.start))
    }

    /// Where the guest's byte at `addr` (inside this VMA) is in the memory
    /// file, and how many bytes from there on lie contiguously in both.
    fn locate(&self, addr: u64) -> (u64, u64) {
        if self.image_pages.is_none() {
            return (self.offset + (addr - self.start), self.end - addr);
        }
        let n = (page_down(addr) + PAGE_SIZE).min(self.end) - addr;
        match self.image_offset(addr) {
            Some(off) => (off, n),
            None => (self.offset + (addr - self.start), n),
        }
    }
}

/// Rounds up to a page boundary, `None` on overflow.
pub fn page_up(x: u64) -> Option<u64> {
    x.checked_add(PAGE_SIZE - 1).map(|v| v & !(PAGE_SIZE - 1))
}

/// Rounds down to a page boundary.
pub fn page_down(x: u64) -> u64 {
    x & !(PAGE_SIZE - 1)
}

pub use crate::mm::guestmem::{GuestSlice, GuestWord};

/// A copied address space in transit from a `fork` parent to its child.
#[derive(Debug)]
pub struct MmSnapshot {
    stack: Option<(u64, u64)>,
    vdso: Option<u64>,
    vmas: Vec<Vma>,
    heap_offset: Option<u64>,
    brk_start: u64,
    brk: u64,
    mmap_top: u64,
}

/// One guest address space.
pub struct MemoryManager {
    mf: Arc<MemoryFile>,
    space: Arc<dyn AddressSpace>,
    vmas: BTreeMap<u64, Vma>,
    /// lowest address handed out by top-down `mmap` searches (exclusive top)
    mmap_top: u64,
    max_addr: u64,
    brk_start: u64,
    brk: u64,
    heap_offset: Option<u64>,
    stack: Option<(u64, u64)>,
    vdso: Option<u64>,
    /// lowest address a mapping may start at (the platform's)
    min_addr: u64,
    /// live threads using this address space (Linux's `mm_users`): the
    /// host threads of exited ones may hold it a while longer
    users: u32,
}

impl fmt::Debug for MemoryManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryManager")
            .field("vmas", &self.vmas.len())
            .field("brk", &self.brk)
            .finish()
    }
}

/// What a `SIGILL` at a patched system call site means (see
/// [`platform::write_syscall_patch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchedSiteFault {
    /// The thread met the site while it was being patched: run it again.
    Rerun,
    /// The thread ran the old `syscall` instruction's place: the call, with
    /// `rax` as its number.
    Syscall,
}

/// Whether `b` is a finished patch: `jmp *abs32` through the platform's
/// table, whose addresses all end in `0x06`, `0x00` (see the platform).
fn is_patch(b: &[u8; 7]) -> bool {
    b[..3] == [0xff, 0x24, 0x25] && b[5] == platform::INVALID_OPCODE && b[6] == 0
}

impl MemoryManager {
    /// An empty address space with `mmap` searches starting below `mmap_top`.
    pub fn new(mf: Arc<MemoryFile>, space: Arc<dyn AddressSpace>, max_addr: u64) -> Self {
        MemoryManager {
            mf,
            vmas: BTreeMap::new(),
            mmap_top: max_addr,
            max_addr,
            brk_start: 0,
            brk: 0,
            heap_offset: None,
            stack: None,
            vdso: None,
            min_addr: space.min_user_address(),
            space,
            users: 1,
        }
    }

    /// A new thread or `CLONE_VM` child uses this address space.
    pub fn add_user(&mut self) {
        self.users += 1;
    }

    /// A thread left it (exited, or exec'd into a new one).
    pub fn drop_user(&mut self) {
        self.users = self.users.saturating_sub(1);
    }

    /// Whether any live thread still uses it (an exited process's host
    /// threads may hold it after its parent has reaped it).
    pub fn in_use(&self) -> bool {
        self.users > 0
    }

    /// Whether a live thread other than the caller uses it.
    pub fn is_shared(&self) -> bool {
        self.users > 1
    }

    /// The platform address space, for `Context::switch`.
    pub fn address_space(&self) -> Arc<dyn AddressSpace> {
        self.space.clone()
    }

    /// The memory file.
    pub fn memory_file(&self) -> &Arc<MemoryFile> {
        &self.mf
    }

    /// Highest usable address plus one.
    pub fn max_addr(&self) -> u64 {
        self.max_addr
    }

    /// The addresses mappings may use: the platform keeps the rest.
    pub fn user_range(&self) -> std::ops::Range<u64> {
        self.min_addr..self.max_addr
    }

    /// Sets where top-down `mmap` searches begin.
    pub fn set_mmap_top(&mut self, top: u64) {
        self.mmap_top = top.min(self.max_addr);
    }

    /// Removes every mapping (for `execve`, which may reuse the address
    /// space): the platform's in one call over the guest's range, and
    /// what the memory manager knew of them (the heap, the stack, the
    /// vDSO).
    pub fn clear(&mut self) -> Result<(), Errno> {
        let old = self.take_range(0, self.max_addr);
        let mut unmapped = Ok(());
        if !old.is_empty() {
            let low = self.min_addr;
            unmapped = self.space.unmap(low, self.max_addr - low);
            // (a mapping at 0, below the platform's lowest address, alone)
            for v in old.iter().filter(|v| v.start < low) {
                unmapped = unmapped.and(self.space.unmap(v.start, v.end.min(low) - v.start));
            }
        }
        self.free_vmas(old);
        if let Some(off) = self.heap_offset.take() {
            self.mf.release(off, HEAP_RESERVE);
        }
        self.brk_start = 0;
        self.brk = 0;
        self.mmap_top = self.max_addr;
        self.stack = None;
        self.vdso = None;
        unmapped.map_err(|e| {
            tracing::warn!("platform unmap failed: {e}");
            Errno::ENOMEM
        })
    }

    /// The VMAs, in address order.
    pub fn vmas(&self) -> impl Iterator<Item = &Vma> {
        self.vmas.values()
    }

    /// Whether every page of `[start, end)` is mapped (no hole).
    pub fn covers(&self, start: u64, end: u64) -> bool {
        let mut at = start;
        for v in self
            .vmas
            .range(..end)
            .map(|(_, v)| v)
            .skip_while(|v| v.end <= start)
        {
            if v.start > at {
                return false;
            }
            at = at.max(v.end);
            if at >= end {
                return true;
            }
        }
        at >= end
    }

    fn overlaps(&self, start: u64, end: u64) -> bool {
        self.vmas
            .range(..end)
            .next_back()
            .is_some_and(|(_, v)| v.end > start)
    }

    /// Finds a free range of `len` bytes, the highest one below `mmap_top`.
    fn find_free(&self, len: u64) -> Option<u64> {
        let mut top = self.mmap_top;
        for v in self.vmas.range(..self.mmap_top).rev().map(|(_, v)| v) {
            if v.end <= top && top - v.end >= len {
                return Some(top - len);
            }
            top = top.min(v.start);
        }
        (top >= self.min_addr + len).then(|| top - len)
    }

    /// Picks the address for a new mapping of `len` bytes (page-aligned),
    /// honouring a hint when the range is free, as `mmap(2)` does.
    pub fn pick_address(&self, hint: u64, len: u64) -> Result<u64, Errno> {
        if hint != 0 {
            let h = page_down(hint);
            if h >= self.min_addr
                && h.checked_add(len).is_some_and(|e| e <= self.max_addr)
                && !self.overlaps(h, h + len)
            {
                return Ok(h);
            }
        }
        self.find_free(len).ok_or(Errno::ENOMEM)
    }

    /// Creates a mapping at exactly `[start, start + len)`, replacing what was
    /// there. `len` must be page-aligned.
    pub fn map_fixed(
        &mut self,
        start: u64,
        len: u64,
        prot: Prot,
        shared: bool,
        backing: Backing,
    ) -> Result<(), Errno> {
        let end = start.checked_add(len).ok_or(Errno::ENOMEM)?;
        if start < self.min_addr && start != 0
            || end > self.max_addr
            || !start.is_multiple_of(PAGE_SIZE)
            || len == 0
        {
            return Err(Errno::ENOMEM);
        }
        if self.vmas.len() >= MAX_VMAS {
            return Err(Errno::ENOMEM);
        }
        if self.sealed_in(start, end) {
            return Err(Errno::EPERM);
        }
        // The new mapping is made ready first, then replaces the old one
        // in the platform in one step; the old one's memory is freed only
        // after that (see `unmap_range`).
        let vma = if shared && matches!(backing, Backing::Anon) {
            let off = self.mf.allocate(len)?;
            let region = Arc::new(SharedRegion {
                mf: self.mf.clone(),
                off,
                len,
                file: None,
            });
            Vma::new(start, end, prot, shared, off, Backing::Shared(region))
        } else {
            let offset = self.mf.allocate(len)?;
            let mut image_pages = None;
            if let Backing::File {
                file,
                pos,
                avail,
                image,
                ..
            } = &backing
            {
                let avail = len.min(*avail);
                let filled = match image {
                    Some(img) if !shared => self.share_image(img, file, *pos, avail, len),
                    _ => Ok(None),
                }
                .and_then(|pages| {
                    // What the image does not give: a copy of the file's
                    // bytes.
                    let from = pages.as_ref().map_or(0, |p| p.shareable * PAGE_SIZE);
                    image_pages = pages;
                    if from < avail {
                        self.fill_from_file(offset + from, avail - from, file, pos + from)?;
                    }
                    Ok(())
                });
                if let Err(e) = filled {
                    self.mf.release(offset, len);
                    return Err(e);
                }
            }
            Vma {
                image_pages,
                ..Vma::new(start, end, prot, shared, offset, backing)
            }
        };
        let old = self.take_range(start, end);
        let made = self.install(vma);
        if made.is_err() {
            let _ = self.space.unmap(start, end - start);
        }
        self.free_vmas(old);
        made
    }

    /// For a private mapping of `len` bytes of `file` from `pos` on, of
    /// which the file gives `avail`: the pages that may be the image's,
    /// read into it. Those are the pages the file fills whole, and the one
    /// holding the file's end when the mapping reaches it (the image reads
    /// zeros past the end, as the mapping must); a page the mapping cuts
    /// short of the file's bytes (an ELF segment's last page) is a copy.
    /// `None` when no page can be.
    fn share_image(
        &self,
        img: &FileImage,
        file: &dyn Mappable,
        pos: u64,
        avail: u64,
        len: u64,
    ) -> Result<Option<ImagePages>, Errno> {
        let to_end = pos.saturating_add(avail) >= img.size();
        let bytes = if to_end {
            page_up(avail).unwrap_or(0)
        } else {
            page_down(avail)
        };
        // (a position and length from a sandbox image, not only from
        // `mmap`, which keeps them inside the file)
        let inside = pos
            .checked_add(bytes)
            .is_some_and(|e| e <= page_up(img.size()).unwrap_or(0));
        if bytes == 0 || !pos.is_multiple_of(PAGE_SIZE) || !inside {
            return Ok(None);
        }
        img.fill(file, pos, bytes)?;
        Ok(Some(ImagePages::new(len / PAGE_SIZE, bytes / PAGE_SIZE)))
    }

    /// Maps `[s, e)` of `v` (page-aligned, inside it) into the platform's
    /// address space: the image's pages without write access, the VMA's
    /// own pages with its protection; nothing past a file's end.
    fn map_pieces(&self, v: &Vma, s: u64, e: u64) -> platform::Result<()> {
        let e = e.min(Self::host_end(v));
        if v.image_pages.is_none() {
            if e > s {
                return self.space.map(s, e - s, v.prot, v.offset + (s - v.start));
            }
            return Ok(());
        }
        let read_only = Prot {
            write: false,
            ..v.prot
        };
        let mut at = s;
        while at < e {
            let image = v.image_offset(at);
            let mut end = at + PAGE_SIZE;
            // (a run of the image's pages must lie in a row there too)
            while end < e
                && match (image, v.image_offset(end)) {
                    (Some(a), Some(b)) => b == a + (end - at),
                    (None, None) => true,
                    _ => false,
                }
            {
                end += PAGE_SIZE;
            }
            match image {
                Some(off) => self.space.map(at, end - at, read_only, off)?,
                None => self
                    .space
                    .map(at, end - at, v.prot, v.offset + (at - v.start))?,
            }
            at = end;
        }
        Ok(())
    }

    /// Gives the pages of `v` in `[s, e)` that still are its image's
    /// copies of their own, before something writes them, and maps the
    /// copies in their place (a run of pages at once).
    fn own_pages(&self, v: &Vma, s: u64, e: u64) {
        let Some(pages) = &v.image_pages else {
            return;
        };
        let e = e.min(v.end);
        let mut at = page_down(s);
        while at < e {
            let run = at;
            while at < e {
                let Some(src) = v.image_offset(at) else {
                    break;
                };
                self.mf
                    .copy_within(src, v.offset + (at - v.start), PAGE_SIZE);
                pages.set((at - v.start) / PAGE_SIZE, false);
                at += PAGE_SIZE;
            }
            let mapped = at.min(Self::host_end(v));
            if mapped > run {
                let off = v.offset + (run - v.start);
                if let Err(e) = self.space.map(run, mapped - run, v.prot, off) {
                    tracing::warn!("platform map failed: {e}");
                }
            }
            if at == run {
                at += PAGE_SIZE;
            }
        }
    }

    /// Makes the saved pages of the private mapping `[start, end)` (one
    /// VMA, just restored, holding nothing of its own) views of the
    /// image's pages in `base`, until written.
    pub fn share_base(&mut self, start: u64, end: u64, base: BasePages) -> Result<(), Errno> {
        let keys = self.isolate(start, end);
        let [key] = keys[..] else {
            return Err(Errno::EINVAL);
        };
        let Some(v) = self.vmas.get_mut(&key) else {
            return Err(Errno::EINVAL);
        };
        if v.shared || v.image_pages.is_some() || v.start != start || v.end != end {
            return Err(Errno::EINVAL);
        }
        let pages = ImagePages::new((end - start) / PAGE_SIZE, 0);
        for i in base.pages() {
            pages.set(i, true);
        }
        v.image_pages = Some(pages);
        v.base = Some(base);
        let v = v.clone();
        self.map_pieces(&v, v.start, v.end)
            .map_err(|_| Errno::ENOMEM)
    }

    /// Makes every page of the VMA at `key` its own (before `mremap`,
    /// which moves and grows plain copies).
    fn own_all(&mut self, key: u64) {
        let Some(v) = self.vmas.get(&key) else {
            return;
        };
        self.own_pages(v, v.start, v.end);
        if let Some(v) = self.vmas.get_mut(&key) {
            v.image_pages = None;
        }
    }

    fn fill_from_file(
        &self,
        offset: u64,
        len: u64,
        file: &dyn Mappable,
        pos: u64,
    ) -> Result<(), Errno> {
        self.mf
            .fill_from_fd(offset, len, file.fd(), pos)
            .map(|_| ())
    }

    /// The part of `v` that is mapped into the guest (pages past a file's
    /// end stay unmapped so that touching them faults).
    fn host_end(v: &Vma) -> u64 {
        v.sigbus_from.map_or(v.end, |b| b.clamp(v.start, v.end))
    }

    /// Records limits `mmap` learned from the file: whether `mprotect` may
    /// add write or execute access, and where the file's pages end.
    pub fn set_limits(
        &mut self,
        start: u64,
        (may_write, may_exec): (bool, bool),
        sigbus_from: Option<u64>,
    ) {
        let Some(v) = self.vmas.get_mut(&start) else {
            return;
        };
        v.may_write = may_write;
        v.may_exec = may_exec;
        v.sigbus_from = sigbus_from;
        if let Some(b) = sigbus_from.filter(|&b| b < v.end) {
            let end = v.end;
            let _ = self.space.unmap(b, end - b);
        }
    }

    /// Attaches `writer` to the VMA at `start` (a writable shared
    /// mapping of a tmpfs file, just made).
    pub fn set_writer(&mut self, start: u64, writer: Option<crate::mm::quota::WritableMapping>) {
        if let Some(v) = self.vmas.get_mut(&start) {
            v.writer = writer;
        }
    }

    /// Records what the VMA at `start` maps (see [`Vma::source`]).
    pub fn set_source(&mut self, start: u64, source: Option<Arc<dyn std::any::Any + Send + Sync>>) {
        if let Some(v) = self.vmas.get_mut(&start) {
            v.source = source;
        }
    }

    /// Lets go of every tmpfs file this address space pins through
    /// writable shared mappings (its owner is exiting).
    pub fn drop_file_pins(&mut self) {
        for v in self.vmas.values_mut() {
            v.writer = None;
        }
    }

    /// The signal a fault at `addr` inside a mapping means, if the mapping
    /// says (`SIGBUS` past the end of a file).
    pub fn fault_signal(&self, addr: u64) -> Option<i32> {
        let v = self.find_vma(addr)?;
        v.sigbus_from
            .filter(|&b| addr >= b)
            .map(|_| abi::signal::SIGBUS)
    }

    fn install(&mut self, vma: Vma) -> Result<(), Errno> {
        if Self::host_end(&vma) == vma.start {
            self.vmas.insert(vma.start, vma);
            return Ok(());
        }
        if let Err(e) = self.map_pieces(&vma, vma.start, vma.end) {
            tracing::warn!("platform map failed: {e}");
            if vma.owns_offsets() {
                self.mf.release(vma.offset, vma.end - vma.start);
            }
            return Err(Errno::ENOMEM);
        }
        self.vmas.insert(vma.start, vma);
        Ok(())
    }

    /// Maps `[start, start + len)` onto `region` from `region_off` on,
    /// shared (a `MAP_SHARED` mapping of a tmpfs file).
    pub fn map_region(
        &mut self,
        start: u64,
        len: u64,
        prot: Prot,
        region: Arc<SharedRegion>,
        region_off: u64,
    ) -> Result<(), Errno> {
        let end = start.checked_add(len).ok_or(Errno::ENOMEM)?;
        if end > self.max_addr || region_off.checked_add(len).is_none_or(|e| e > region.len) {
            return Err(Errno::ENOMEM);
        }
        self.unmap_range(start, end)?;
        let offset = region.off + region_off;
        self.install(Vma::new(
            start,
            end,
            prot,
            true,
            offset,
            Backing::Shared(region),
        ))
    }

    /// Splits VMAs so that `at` is a boundary.
    fn split(&mut self, at: u64) {
        let key = match self.vmas.range(..at).next_back() {
            Some((&k, v)) if v.end > at => k,
            _ => return,
        };
        if let Some(v) = self.vmas.get_mut(&key) {
            let right = v.split_at(at);
            self.vmas.insert(at, right);
        }
    }

    /// Keys of the VMAs intersecting `[start, end)`, after splitting at both
    /// ends so each lies entirely inside.
    fn isolate(&mut self, start: u64, end: u64) -> Vec<u64> {
        self.split(start);
        self.split(end);
        self.vmas.range(start..end).map(|(&k, _)| k).collect()
    }

    /// Unmaps `[start, end)` (page-aligned); unmapped holes are fine, a
    /// sealed VMA in the range is `EPERM` with nothing unmapped.
    pub fn unmap_range(&mut self, start: u64, end: u64) -> Result<(), Errno> {
        if self.sealed_in(start, end) {
            return Err(Errno::EPERM);
        }
        let old = self.take_range(start, end);
        if old.is_empty() {
            return Ok(());
        }
        // The guest loses the pages before their memory is freed: another
        // of its threads, still running, must never reach memory the
        // memory file hands out again (to another process, say).
        let unmapped = self.space.unmap(start, end - start).map_err(|e| {
            tracing::warn!("platform unmap failed: {e}");
            Errno::ENOMEM
        });
        self.free_vmas(old);
        unmapped
    }

    /// Takes the VMAs in `[start, end)` out (split at both ends), leaving
    /// the platform's mappings as they are: the caller maps over them or
    /// unmaps them, then frees them with [`Self::free_vmas`].
    fn take_range(&mut self, start: u64, end: u64) -> Vec<Vma> {
        self.isolate(start, end)
            .into_iter()
            .filter_map(|k| self.vmas.remove(&k))
            .collect()
    }

    /// Frees what VMAs taken out held: their own offsets, the heap's
    /// pages, their references to shared regions and files' images.
    fn free_vmas(&self, old: Vec<Vma>) {
        for v in old {
            if v.owns_offsets() {
                self.mf.release(v.offset, v.end - v.start);
            } else if v.heap {
                self.mf.punch(v.offset, v.end - v.start);
            }
        }
    }

    /// `mprotect(2)` on a page-aligned range.
    pub fn protect(&mut self, start: u64, end: u64, prot: Prot) -> Result<(), Errno> {
        // Every page must be mapped (ENOMEM otherwise), checked before
        // changing anything.
        let mut at = start;
        for v in self
            .vmas
            .range(..end)
            .map(|(_, v)| v)
            .filter(|v| v.end > start)
        {
            if v.start > at {
                return Err(Errno::ENOMEM);
            }
            if v.sealed {
                return Err(Errno::EPERM);
            }
            if (prot.write && !v.may_write) || (prot.exec && !v.may_exec) {
                return Err(Errno::EACCES);
            }
            at = v.end;
        }
        if at < end {
            return Err(Errno::ENOMEM);
        }
        for k in self.isolate(start, end) {
            let Some(v) = self.vmas.get_mut(&k) else {
                continue;
            };
            v.prot = prot;
            let (s, e) = (v.start, Self::host_end(v));
            if v.image_pages.is_some() {
                // the image's pages stay read-only
                let v = v.clone();
                self.map_pieces(&v, s, e).map_err(|_| Errno::ENOMEM)?;
            } else if e > s {
                self.space
                    .protect(s, e - s, prot)
                    .map_err(|_| Errno::ENOMEM)?;
            }
        }
        Ok(())
    }

    /// `madvise(MADV_DONTNEED)`: private pages revert to their backing
    /// (zeros, or the file's contents); shared pages keep their data.
    pub fn dontneed(&mut self, start: u64, end: u64) -> Result<(), Errno> {
        let mut work = Vec::new();
        for v in self
            .vmas
            .range(..end)
            .map(|(_, v)| v)
            .filter(|v| v.end > start && !v.shared)
        {
            let s = v.start.max(start);
            let e = v.end.min(end);
            let off = v.offset + (s - v.start);
            // The image's pages come back as they were: only the rest is
            // read from the file again.
            let shared_to = v
                .image_pages
                .as_ref()
                .map_or(v.start, |p| v.start + p.shareable * PAGE_SIZE)
                .clamp(s, e);
            let file = match &v.backing {
                Backing::File {
                    file, pos, avail, ..
                } => {
                    let skip = shared_to - v.start;
                    Some((
                        file.clone(),
                        shared_to - s,
                        pos + skip,
                        avail.saturating_sub(skip).min(e - shared_to),
                    ))
                }
                Backing::Anon | Backing::Shared(_) => None,
            };
            work.push((v.start, s, e, off, file));
        }
        for (key, s, e, off, file) in work {
            self.mf.punch(off, e - s);
            if let Some((f, skip, pos, avail)) = file {
                self.fill_from_file(off + skip, avail, &f, pos)?;
            }
            let Some(v) = self.vmas.get(&key).filter(|v| v.image_pages.is_some()) else {
                continue;
            };
            if let Some(pages) = &v.image_pages {
                for at in (s..e).step_by(PAGE_SIZE as usize) {
                    let i = (at - v.start) / PAGE_SIZE;
                    pages.set(i, i < pages.shareable);
                }
            }
            self.map_pieces(v, s, e).map_err(|_| Errno::ENOMEM)?;
        }
        Ok(())
    }

    /// Sets up the heap right after the loaded program.
    pub fn init_brk(&mut self, start: u64) -> Result<(), Errno> {
        self.brk_start = start;
        self.brk = start;
        if self.heap_offset.is_none() {
            self.heap_offset = Some(self.mf.allocate(HEAP_RESERVE)?);
        }
        Ok(())
    }

    /// `brk(2)`: returns the new break, or the old one when refused.
    pub fn brk(&mut self, want: u64) -> u64 {
        let Some(heap_off) = self.heap_offset else {
            return self.brk;
        };
        if want < self.brk_start || want - self.brk_start > HEAP_RESERVE {
            return self.brk;
        }
        let (Some(old_end), Some(new_end)) = (page_up(self.brk), page_up(want)) else {
            return self.brk;
        };
        if new_end > old_end {
            if self.overlaps(old_end, new_end) || new_end > self.max_addr {
                return self.brk;
            }
            let offset = heap_off + (old_end - page_down(self.brk_start));
            let vma = Vma {
                heap: true,
                ..Vma::new(old_end, new_end, Prot::RW, false, offset, Backing::Anon)
            };
            if self.install(vma).is_err() {
                return self.brk;
            }
        } else if new_end < old_end && self.unmap_range(new_end, old_end).is_err() {
            return self.brk;
        }
        self.brk = want;
        self.brk
    }

    /// `mremap(2)` of `[old, old + old_len)` to `new_len` bytes.
    pub fn remap(
        &mut self,
        old: u64,
        old_len: u64,
        new_len: u64,
        may_move: bool,
        fixed: Option<u64>,
    ) -> Result<u64, Errno> {
        let old_end = old.checked_add(old_len).ok_or(Errno::EFAULT)?;
        let v = self.find_vma(old).cloned().ok_or(Errno::EFAULT)?;
        // A sealed VMA is neither moved nor resized (mm/mremap.c checks
        // the seal before the length).
        if v.sealed {
            return Err(Errno::EPERM);
        }
        if v.end < old_end {
            return Err(Errno::EFAULT);
        }
        if v.heap {
            return Err(Errno::EFAULT);
        }
        let v = if v.image_pages.is_some() {
            self.own_all(v.start);
            self.vmas.get(&v.start).cloned().ok_or(Errno::EFAULT)?
        } else {
            v
        };
        if fixed.is_none() && new_len <= old_len {
            self.unmap_range(old + new_len, old_end)?;
            return Ok(old);
        }
        // (a length past the end of the address space fits nowhere)
        let new_end = old.checked_add(new_len).ok_or(Errno::ENOMEM)?;
        if let Backing::Shared(region) = &v.backing {
            if let Some(r) =
                self.remap_shared(&v, region.clone(), old, old_len, new_len, may_move, fixed)
            {
                return r;
            }
        }
        // Grow in place when the following range is free.
        if fixed.is_none() && !self.overlaps(old_end, new_end) && new_end <= self.max_addr {
            let extra = new_len - old_len;
            let mut vma = v.clone();
            vma.start = old_end;
            vma.end = new_end;
            vma.offset = self.mf.allocate(extra)?;
            if let Backing::File { pos, avail, .. } = &mut vma.backing {
                *pos += old_end - v.start;
                *avail = avail.saturating_sub(old_end - v.start);
            }
            return self.install(vma).map(|()| old);
        }
        if !may_move {
            return Err(Errno::ENOMEM);
        }
        let dest = match fixed {
            Some(d) => {
                self.unmap_range(d, d.checked_add(new_len).ok_or(Errno::EINVAL)?)?;
                d
            }
            None => self.find_free(new_len).ok_or(Errno::ENOMEM)?,
        };
        let offset = self.mf.allocate(new_len)?;
        self.mf
            .copy_within(v.offset + (old - v.start), offset, old_len.min(new_len));
        let mut backing = v.backing.clone();
        if let Backing::File { pos, avail, .. } = &mut backing {
            *pos += old - v.start;
            *avail = avail.saturating_sub(old - v.start);
        }
        self.unmap_range(old, old_end)?;
        self.install(Vma {
            mempolicy: v.mempolicy,
            may_exec: v.may_exec,
            source: v.source.clone(),
            ..Vma::new(dest, dest + new_len, v.prot, v.shared, offset, backing)
        })?;
        Ok(dest)
    }

    /// `mremap` of part of a shared VMA `v`: the new range maps the same
    /// pages (and, for a page cache's view grown past its region, more of
    /// the file), never a copy, so it stays shared. `None` when the region
    /// has no room and is no view (the caller's general path).
    #[allow(clippy::too_many_arguments)]
    fn remap_shared(
        &mut self,
        v: &Vma,
        region: Arc<SharedRegion>,
        old: u64,
        old_len: u64,
        new_len: u64,
        may_move: bool,
        fixed: Option<u64>,
    ) -> Option<Result<u64, Errno>> {
        let off = v.offset + (old - v.start);
        let room = region.off + region.len - off;
        let pieces = if room >= new_len {
            vec![(0, region.clone(), off - region.off, new_len)]
        } else {
            let (cache, pos) = region.file_at(off)?;
            match cache.map_more(pos, new_len) {
                Ok(p) => p
                    .into_iter()
                    .map(|(at, r)| {
                        let n = r.len;
                        (at, r, 0, n)
                    })
                    .collect(),
                Err(e) => return Some(Err(e)),
            }
        };
        let old_end = old + old_len;
        let dest = if fixed.is_none()
            && old.checked_add(new_len).is_some_and(|e| e <= self.max_addr)
            && !self.overlaps(old_end, old + new_len)
        {
            old
        } else if !may_move {
            return Some(Err(Errno::ENOMEM));
        } else {
            match fixed {
                Some(d) if d.checked_add(new_len).is_some_and(|e| e <= self.max_addr) => d,
                Some(_) => return Some(Err(Errno::EINVAL)),
                None => match self.find_free(new_len) {
                    Some(d) => d,
                    None => return Some(Err(Errno::ENOMEM)),
                },
            }
        };
        if let Err(e) = self.unmap_range(old, old_end) {
            return Some(Err(e));
        }
        for (at, r, r_off, n) in pieces {
            if let Err(e) = self.map_region(dest + at, n, v.prot, r, r_off) {
                let _ = self.unmap_range(dest, dest + at);
                return Some(Err(e));
            }
            self.set_limits(dest + at, (v.may_write, v.may_exec), None);
            self.set_writer(dest + at, v.writer.clone());
            self.set_source(dest + at, v.source.clone());
        }
        Some(Ok(dest))
    }

    /// A private copy of this address space for a `fork` child: private
    /// pages are copied (only those that hold data), shared regions are
    /// shared.
    pub fn fork_copy(&self) -> Result<MmSnapshot, Errno> {
        let heap_offset = match self.heap_offset {
            Some(_) => Some(self.mf.allocate(HEAP_RESERVE)?),
            None => None,
        };
        let mut vmas = Vec::with_capacity(self.vmas.len());
        let undo = |vmas: &Vec<Vma>, mf: &MemoryFile| {
            for v in vmas {
                if v.owns_offsets() {
                    mf.release(v.offset, v.end - v.start);
                }
            }
            if let Some(h) = heap_offset {
                mf.release(h, HEAP_RESERVE);
            }
        };
        for v in self.vmas.values() {
            let mut c = v.clone();
            let len = v.end - v.start;
            if let (true, Some(old), Some(new)) = (v.heap, self.heap_offset, heap_offset) {
                c.offset = new + (v.offset - old);
            } else if v.owns_offsets() {
                c.offset = match self.mf.allocate(len) {
                    Ok(o) => o,
                    Err(e) => {
                        undo(&vmas, &self.mf);
                        return Err(e);
                    }
                };
            } else {
                vmas.push(c);
                continue;
            }
            self.mf.copy_populated(v.offset, c.offset, len);
            vmas.push(c);
        }
        Ok(MmSnapshot {
            stack: self.stack,
            vdso: self.vdso,
            vmas,
            heap_offset,
            brk_start: self.brk_start,
            brk: self.brk,
            mmap_top: self.mmap_top,
        })
    }

    /// Builds an address space from a [`MemoryManager::fork_copy`].
    pub fn from_snapshot(
        mf: Arc<MemoryFile>,
        space: Arc<dyn AddressSpace>,
        max_addr: u64,
        snap: MmSnapshot,
    ) -> Result<Self, Errno> {
        let mut mm = MemoryManager::new(mf, space, max_addr);
        mm.heap_offset = snap.heap_offset;
        mm.stack = snap.stack;
        mm.vdso = snap.vdso;
        mm.brk_start = snap.brk_start;
        mm.brk = snap.brk;
        mm.mmap_top = snap.mmap_top;
        let mut vmas = snap.vmas.into_iter();
        while let Some(v) = vmas.next() {
            if let Err(e) = mm.map_pieces(&v, v.start, v.end) {
                tracing::warn!("platform map failed in fork: {e}");
                if v.owns_offsets() {
                    mm.mf.release(v.offset, v.end - v.start);
                }
                for rest in vmas {
                    if rest.owns_offsets() {
                        mm.mf.release(rest.offset, rest.end - rest.start);
                    }
                }
                return Err(Errno::ENOMEM);
            }
            mm.vmas.insert(v.start, v);
        }
        Ok(mm)
    }

    /// Resolves a fault at `addr` if it is a store to a page of a file's
    /// image that the mapping may write (see the module's documentation);
    /// else the guest gets a signal. `access` is the fault's kind when the
    /// platform knows it.
    pub fn handle_fault(&mut self, addr: u64, access: Option<Access>) -> FaultFix {
        let Some(v) = self.find_vma(addr) else {
            return FaultFix::None;
        };
        if v.image_pages.is_none()
            || !v.prot.write
            || access.is_some_and(|a| a != Access::Write)
            || addr >= Self::host_end(v)
        {
            return FaultFix::None;
        }
        if v.image_offset(addr).is_none() {
            return FaultFix::Stale;
        }
        // A store to a file's data is seldom the only one (a program's
        // relocations write all over its data): a small mapping becomes
        // its own whole, a large one a piece at a time, each at the cost
        // of one fault and one mapping.
        let (s, e) = if v.end - v.start <= OWN_WHOLE {
            (v.start, v.end)
        } else {
            let s = (addr & !(OWN_CHUNK - 1)).max(v.start);
            (s, (s + OWN_CHUNK).min(v.end))
        };
        self.own_pages(v, s, e);
        FaultFix::Copied
    }

    /// The memory-file offset (the futex key) and the readable word at
    /// `addr` (`EINVAL` when misaligned, `EFAULT` when not mapped
    /// readable).
    pub fn futex_word(&self, addr: u64) -> Result<(u64, GuestWord), Errno> {
        if !addr.is_multiple_of(4) {
            return Err(Errno::EINVAL);
        }
        let v = self
            .find_vma(addr)
            .filter(|v| v.prot.read && addr + 4 <= v.end)
            .ok_or(Errno::EFAULT)?;
        // The key must not change when the page is first written: a
        // writable page is the mapping's own from the first futex call on.
        if v.prot.write {
            self.own_pages(v, addr, addr + 4);
        }
        let (off, _) = v.locate(addr);
        // SAFETY: `addr` is 4-byte aligned, and so is the Sentry's pointer
        // (the mapping is page-aligned and a page's bytes keep their place
        // in it); `mf.ptr` checked the 4 bytes lie inside the memory file's
        // mapping, which stays until the `MemoryFile` drops with the
        // kernel, after every system call (see `GuestSlice::new`).
        Ok((off, unsafe { GuestWord::new(self.mf.ptr(off, 4)) }))
    }

    /// The seven bytes at `site` when they lie in one private executable
    /// VMA, with the Sentry's pointer to each (the pointers of a file's
    /// image where its pages still are the image's).
    fn code_at(&self, site: u64) -> Option<([u8; 7], [*mut u8; 7])> {
        let v = self.find_vma(site)?;
        if v.shared || !v.prot.exec || site.checked_add(7)? > v.end {
            return None;
        }
        let mut b = [0u8; 7];
        let mut ptrs = [std::ptr::null_mut(); 7];
        for (i, (x, p)) in b.iter_mut().zip(ptrs.iter_mut()).enumerate() {
            let (off, _) = v.locate(site + i as u64);
            *p = self.mf.ptr(off, 1);
            // SAFETY: a byte of this VMA's memory (its own or its image's);
            // volatile because guest threads may write it concurrently.
            *x = unsafe { p.read_volatile() };
        }
        Some((b, ptrs))
    }

    /// After a trapped system call `nr` that returns to `ret`: when the
    /// `syscall` instruction and the one before it lie in private code and
    /// the platform has a faster entry for them (a `mov $nr, %eax; syscall`
    /// typically), rewrites them into it, so later calls from there do not
    /// trap. Only this address space's copy of the code changes (and what
    /// `fork` copies from it): code that still is a file's image gets a
    /// copy of its own first, since the rewrite holds for this address
    /// only (the entry it jumps to returns there), and the file may be
    /// mapped elsewhere in another process.
    pub fn patch_syscall_site(&self, ret: u64, nr: u64) {
        let Some(site) = ret.checked_sub(7) else {
            return;
        };
        let Some((bytes, _)) = self.code_at(site) else {
            return;
        };
        if bytes[5..] != [0x0f, 0x05] {
            return;
        }
        let Some(patch) = self.space.syscall_patch(bytes, nr, ret) else {
            return;
        };
        let Some(v) = self.find_vma(site) else {
            return;
        };
        self.own_pages(v, site, site + 7);
        let Some((now, ptr)) = self.code_at(site) else {
            return;
        };
        if now != bytes {
            return;
        }
        platform::write_syscall_patch(patch, |i, b| {
            // SAFETY: `i` < 7, a byte `code_at` checked; a volatile byte
            // store, in the order the platform asks for.
            unsafe { ptr[i].write_volatile(b) }
        });
    }

    /// Whether a `SIGILL` at `rip` comes from a patched system call site
    /// (see [`platform::write_syscall_patch`]), and what it stands for.
    pub fn patched_site_fault(&self, rip: u64) -> Option<PatchedSiteFault> {
        if let Some((b, _)) = rip.checked_sub(5).and_then(|s| self.code_at(s)) {
            if is_patch(&b) {
                return Some(PatchedSiteFault::Syscall);
            }
        }
        match self.code_at(rip) {
            Some((b, _)) if is_patch(&b) => Some(PatchedSiteFault::Rerun),
            _ => None,
        }
    }

    /// What /proc/[pid]/maps calls an anonymous VMA.
    pub fn label(&self, v: &Vma) -> &'static str {
        if v.heap {
            "[heap]"
        } else if self.stack.is_some_and(|(s, e)| v.start >= s && v.end <= e) {
            "[stack]"
        } else if self.vdso == Some(v.start) {
            "[vdso]"
        } else {
            ""
        }
    }

    /// Records where the loader put the stack and the vDSO.
    pub fn set_special(&mut self, stack: (u64, u64), vdso: u64) {
        self.stack = Some(stack);
        self.vdso = Some(vdso);
    }

    /// `mincore(2)` from `start` (page-aligned) for at most `out.len()`
    /// pages, up to the end of the VMA holding `start`: 1 for a page that
    /// holds memory in the memory file (touched, or filled from a file),
    /// 0 for one never touched or given back. Returns the pages done;
    /// `ENOMEM` when `start` is unmapped.
    pub fn residency(&self, start: u64, out: &mut [u8]) -> Result<usize, Errno> {
        let v = self.find_vma(start).ok_or(Errno::ENOMEM)?;
        let n = (((v.end - start) / PAGE_SIZE) as usize).min(out.len());
        let out = &mut out[..n];
        out.fill(0);
        if v.image_pages.is_none() {
            self.mf.mark_populated(v.offset + (start - v.start), out);
            return Ok(n);
        }
        // Pages of a file's image lie elsewhere in the file: one at a time.
        for (i, b) in out.iter_mut().enumerate() {
            let (off, _) = v.locate(start + i as u64 * PAGE_SIZE);
            self.mf.mark_populated(off, std::slice::from_mut(b));
        }
        Ok(n)
    }

    /// Whether a VMA in `[start, end)` is sealed.
    pub fn sealed_in(&self, start: u64, end: u64) -> bool {
        self.vmas
            .range(..end)
            .rev()
            .take_while(|(_, v)| v.end > start)
            .any(|(_, v)| v.sealed)
    }

    /// `mseal(2)` of `[start, end)` (page-aligned): `ENOMEM` with nothing
    /// sealed when part of it is unmapped.
    pub fn seal(&mut self, start: u64, end: u64) -> Result<(), Errno> {
        if !self.covers(start, end) {
            return Err(Errno::ENOMEM);
        }
        for k in self.isolate(start, end) {
            if let Some(v) = self.vmas.get_mut(&k) {
                v.sealed = true;
            }
        }
        Ok(())
    }

    /// Gives the mapped parts of `[start, end)` (page-aligned) the NUMA
    /// policy `pol` (`mbind(2)`; `None` restores the default).
    pub fn set_mempolicy(&mut self, start: u64, end: u64, pol: Option<MemPolicy>) {
        for k in self.isolate(start, end) {
            if let Some(v) = self.vmas.get_mut(&k) {
                v.mempolicy = pol;
            }
        }
    }

    /// Whether the page at `addr` holds memory (see [`Self::residency`]);
    /// `None` when `addr` is unmapped.
    pub fn page_present(&self, addr: u64) -> Option<bool> {
        let mut b = [0u8];
        self.residency(page_down(addr), &mut b).ok()?;
        Some(b[0] != 0)
    }

    /// Bytes of VMA `v` that the memory file holds (its resident set, as
    /// [`Self::residency`] counts pages).
    pub fn resident_bytes(&self, v: &Vma) -> u64 {
        if v.image_pages.is_none() {
            return self.mf.populated_bytes(v.offset, v.end - v.start);
        }
        let mut pages = [0u8; 512];
        let (mut at, mut n) = (v.start, 0);
        while at < v.end {
            let done = self.residency(at, &mut pages).unwrap_or(0);
            if done == 0 {
                break;
            }
            n += pages[..done].iter().map(|&b| u64::from(b)).sum::<u64>();
            at += done as u64 * PAGE_SIZE;
        }
        n * PAGE_SIZE
    }

    /// The VMA containing `addr`, if any.
    pub fn find_vma(&self, addr: u64) -> Option<&Vma> {
        self.vmas
            .range(..=addr)
            .next_back()
            .map(|(_, v)| v)
            .filter(|v| v.end > addr)
    }

    /// Guest range `[addr, addr + len)` as pointers into the memory file,
    /// checking that every byte is mapped with the needed permission
    /// (`EFAULT` otherwise, as the kernel's user copies do).
    pub fn slices(&self, addr: u64, len: u64, write: bool) -> Result<Vec<GuestSlice>, Errno> {
        let mut out: Vec<GuestSlice> = Vec::new();
        let end = addr.checked_add(len).ok_or(Errno::EFAULT)?;
        let mut at = addr;
        while at < end {
            let v = self.find_vma(at).ok_or(Errno::EFAULT)?;
            if !(if write { v.prot.write } else { v.prot.read }) {
                return Err(Errno::EFAULT);
            }
            if write {
                self.own_pages(v, at, v.end.min(end));
            }
            let (off, n) = v.locate(at);
            let n = n.min(end - at);
            // SAFETY: `mf.ptr` checked that the `n` bytes lie inside the
            // memory file's mapping, which stays until the `MemoryFile`
            // drops with the kernel, after every system call that could use
            // the slice (see `GuestSlice::new`).
            let s = unsafe { GuestSlice::new(self.mf.ptr(off, n), n as usize) };
            if !out.last_mut().is_some_and(|last| last.join(s)) {
                out.push(s);
            }
            at += n;
        }
        Ok(out)
    }

    /// Copies guest memory at `addr` into `buf`.
    pub fn copy_in(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        self.copy_in_with(addr, buf, false)
    }

    /// Copies guest memory out even where the guest may not read (a
    /// tracer's view, Linux's FOLL_FORCE).
    pub fn peek(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        self.copy_in_with(addr, buf, true)
    }

    fn copy_in_with(&self, addr: u64, buf: &mut [u8], force: bool) -> Result<(), Errno> {
        let mut at = addr;
        let mut done = 0usize;
        let end = addr.checked_add(buf.len() as u64).ok_or(Errno::EFAULT)?;
        while at < end {
            let v = self
                .find_vma(at)
                .filter(|v| force || v.prot.read)
                .ok_or(Errno::EFAULT)?;
            let (off, n) = v.locate(at);
            let n = n.min(end - at) as usize;
            self.mf.read(off, &mut buf[done..done + n]);
            done += n;
            at += n as u64;
        }
        Ok(())
    }

    /// Copies `buf` into guest memory at `addr`.
    pub fn copy_out(&self, addr: u64, buf: &[u8]) -> Result<(), Errno> {
        self.copy_out_with(addr, buf, false)
    }

    /// Copies `buf` into guest memory even where the guest may not write
    /// (the loader filling read-only pages).
    pub fn poke(&self, addr: u64, buf: &[u8]) -> Result<(), Errno> {
        self.copy_out_with(addr, buf, true)
    }

    fn copy_out_with(&self, addr: u64, buf: &[u8], force: bool) -> Result<(), Errno> {
        let mut at = addr;
        let mut done = 0usize;
        let end = addr.checked_add(buf.len() as u64).ok_or(Errno::EFAULT)?;
        while at < end {
            let v = self
                .find_vma(at)
                .filter(|v| force || v.prot.write)
                .ok_or(Errno::EFAULT)?;
            let n = (v.end.min(end) - at) as usize;
            self.own_pages(v, at, at + n as u64);
            self.mf
                .write(v.offset + (at - v.start), &buf[done..done + n]);
            done += n;
            at += n as u64;
        }
        Ok(())
    }

    /// Reads a `#[repr(C)]` value from guest memory.
    pub fn read_obj<T: zerocopy::FromBytes + zerocopy::IntoBytes>(
        &self,
        addr: u64,
    ) -> Result<T, Errno> {
        let mut v = T::new_zeroed();
        self.copy_in(addr, v.as_mut_bytes())?;
        Ok(v)
    }

    /// Writes a `#[repr(C)]` value to guest memory.
    pub fn write_obj<T: zerocopy::IntoBytes + zerocopy::Immutable>(
        &self,
        addr: u64,
        v: &T,
    ) -> Result<(), Errno> {
        self.copy_out(addr, v.as_bytes())
    }

    /// Reads a NUL-terminated string of at most `max` bytes (without the
    /// NUL); `ENAMETOOLONG` when longer.
    pub fn read_cstr(&self, addr: u64, max: usize) -> Result<Vec<u8>, Errno> {
        // Small pieces into a stack buffer: most strings (paths, names)
        // are short, and a page-sized zeroed buffer per call cost more
        // than the call's own work.
        const PIECE: usize = 256;
        let mut out = Vec::new();
        let mut buf = [0u8; PIECE];
        let mut at = addr;
        loop {
            let v = self
                .find_vma(at)
                .filter(|v| v.prot.read)
                .ok_or(Errno::EFAULT)?;
            // Read up to the end of the page or the VMA, whichever is first.
            let chunk_end = v.end.min(page_down(at) + PAGE_SIZE);
            while at < chunk_end {
                let n = ((chunk_end - at) as usize).min(PIECE);
                let piece = &mut buf[..n];
                self.mf.read(v.locate(at).0, piece);
                if let Some(i) = piece.iter().position(|&b| b == 0) {
                    out.extend_from_slice(&piece[..i]);
                    if out.len() > max {
                        return Err(Errno::ENAMETOOLONG);
                    }
                    return Ok(out);
                }
                out.extend_from_slice(piece);
                if out.len() > max {
                    return Err(Errno::ENAMETOOLONG);
                }
                at += n as u64;
            }
        }
    }

    /// Fills guest memory from a host descriptor (the loader's file copies).
    pub fn fill_from_fd(
        &self,
        addr: u64,
        len: u64,
        fd: BorrowedFd<'_>,
        pos: u64,
    ) -> Result<u64, Errno> {
        let v = self
            .find_vma(addr)
            .filter(|v| v.end >= addr + len)
            .ok_or(Errno::EFAULT)?;
        self.own_pages(v, addr, addr + len);
        self.mf
            .fill_from_fd(v.offset + (addr - v.start), len, fd, pos)
    }
}

impl Drop for MemoryManager {
    fn drop(&mut self) {
        let (vmas, heap) = (std::mem::take(&mut self.vmas), self.heap_offset.take());
        self.mf.tear_down(|| {
            for v in vmas.into_values() {
                if v.owns_offsets() {
                    self.mf.release(v.offset, v.end - v.start);
                }
            }
            if let Some(off) = heap {
                self.mf.release(off, HEAP_RESERVE);
            }
        });
    }
}

/// A shared file maps as the file it shares.
impl<T: Mappable + ?Sized> Mappable for Arc<T> {
    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        (**self).fd()
    }
    fn identity(&self) -> Result<(u64, u64), Errno> {
        (**self).identity()
    }
    fn images(&self) -> Option<&Arc<fileimage::Images>> {
        (**self).images()
    }
}

/// A host file for mm's own tests, standing in for the file systems'.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct TestFile {
    pub(crate) fd: std::os::fd::OwnedFd,
    pub(crate) images: Option<Arc<fileimage::Images>>,
    identity: std::sync::OnceLock<(u64, u64)>,
}

#[cfg(test)]
impl TestFile {
    pub(crate) fn new(fd: std::os::fd::OwnedFd, images: Option<Arc<fileimage::Images>>) -> Self {
        TestFile {
            fd,
            images,
            identity: Default::default(),
        }
    }
}

#[cfg(test)]
impl Mappable for TestFile {
    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }
    fn identity(&self) -> Result<(u64, u64), Errno> {
        if let Some(&id) = self.identity.get() {
            return Ok(id);
        }
        let st = crate::host::fstat(self.fd())?;
        Ok(*self.identity.get_or_init(|| (st.st_dev, st.st_ino)))
    }
    fn images(&self) -> Option<&Arc<fileimage::Images>> {
        self.images.as_ref()
    }
}
