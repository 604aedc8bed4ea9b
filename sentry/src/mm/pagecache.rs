//! The page cache of volume files mapped `MAP_SHARED`: the pages every
//! shared mapping of one host file sees, kept in the Sentry's memory file
//! and written back to the host.
//!
//! A volume's file lives on the host, whose pages the memory file cannot
//! share, so the Sentry keeps its own copy of the mapped part, one per host
//! file (keyed by `(st_dev, st_ino)`, so two opens, hard links and `fork`
//! children all meet the same pages), as long as any shared mapping of it
//! exists:
//!
//! * `mmap(MAP_SHARED)` makes the mapped pages *present*: read from the
//!   host once, then mapped into the guest straight from the memory file
//!   (as tmpfs pages are), so stores through any mapping are seen by every
//!   other mapping at once.
//! * `read(2)` of a file with a cache reads the host and lays the present
//!   pages over what it read; `write(2)` writes the host (write-through)
//!   and the present pages it covers. So the Sentry's `read` sees stores
//!   made through mappings, and mappings see `write`s, as on Linux.
//! * Stores through mappings reach the host when they are written back:
//!   on `msync(2)` of their range (any flags: `MS_ASYNC` too), on
//!   `fsync(2)`/`fdatasync(2)`/`syncfs(2)` of any description of the file
//!   and on `sync(2)` (the whole file), when a mapping piece goes away
//!   whole (`munmap`, `execve`, the exit of the last process holding it:
//!   its range), before the Sentry changes the file's size or blocks
//!   (`truncate`, `ftruncate`, `fallocate`: the whole file), and at the
//!   sandbox's end for what processes killed then still hold. A
//!   writeback compares each present page with the host's and writes
//!   only the pages that differ, so unchanged pages cost a read, not a
//!   write (and keep the host file's times).
//! * When the last mapping of the file goes, everything is written back
//!   and the pages are freed.
//!
//! The host side is not watched: what another host process writes to the
//! file while the sandbox maps it shows in the mapping only if the page was
//! not present yet (and is overwritten by a writeback of the sandbox's page
//! if that page differs). Pages wholly past the end of the file are mapped
//! (they read as zeros) instead of raising `SIGBUS`, as the Sentry's tmpfs
//! mappings are; stores there never reach the host (a write or truncate
//! that grows the file over them zeroes them first). An `O_APPEND`
//! description's shared mappings are read-only (its host descriptor could
//! not write a page back in place).
//!
//! Memory is bounded: present pages are charged to a quota of their own
//! (half the sandbox's memory, as a tmpfs) and `mmap` answers `ENOMEM` past
//! it. The memory file's offsets are reserved in [`CHUNK`]s, so a file that
//! grows while mapped gets more chunks without moving the pages already
//! mapped; a mapping that spans several chunks is several VMAs (and as
//! many lines of `/proc/self/maps`).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use abi::Errno;

use crate::host;
use crate::mm::guestio::{ByteSource, GuestBufs, Stage, IO_CHUNK};
use crate::mm::memfile::MemoryFile;
use crate::mm::quota::Quota;
use crate::mm::Mappable;
use crate::mm::SharedRegion;
use crate::sync::Locked;
use crate::PAGE_SIZE;

/// File bytes per reservation of memory-file offsets. Offsets cost nothing
/// until a page is touched; 16 MiB keeps the VMAs of a large mapping few
/// while a sandbox can still map thousands of files at once.
pub const CHUNK: u64 = 16 << 20;

/// Host file identity: `(st_dev, st_ino)`.
pub type FileKey = (u64, u64);

/// Every page cache of one sandbox.
pub struct PageCaches {
    mf: Arc<MemoryFile>,
    quota: Arc<Quota>,
    /// live caches with the number of mappings (pins) each has
    map: Mutex<HashMap<FileKey, (Arc<FileCache>, usize)>>,
    /// `map.len()`, read without the lock: reads and writes of volume
    /// files skip the lookup while nothing is mapped
    live: AtomicUsize,
}

// By hand: a cache and its registry refer to each other.
impl std::fmt::Debug for PageCaches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PageCaches({} files)", self.live.load(Ordering::Relaxed))
    }
}

impl std::fmt::Debug for FileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FileCache({:?})", self.key)
    }
}

impl PageCaches {
    /// No caches yet; present pages may take `limit` bytes together.
    pub fn new(mf: Arc<MemoryFile>, limit: u64) -> Arc<Self> {
        Arc::new(PageCaches {
            mf,
            quota: Quota::new(limit),
            map: Mutex::new(HashMap::new()),
            live: AtomicUsize::new(0),
        })
    }

    /// The cache of the file `f` is open on, if it has one.
    pub fn lookup(&self, f: &dyn Mappable) -> Option<Arc<FileCache>> {
        if self.live.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.lookup_key(f.identity().ok()?)
    }

    /// The cache of the file `key` names, if it has one.
    pub fn lookup_key(&self, key: FileKey) -> Option<Arc<FileCache>> {
        if self.live.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.map.locked().get(&key).map(|(c, _)| c.clone())
    }

    /// Whether any cache exists (callers skip a costly identity lookup
    /// when none does).
    pub fn any(&self) -> bool {
        self.live.load(Ordering::Acquire) > 0
    }

    /// Every live cache (for `sync(2)`).
    pub fn all(&self) -> Vec<Arc<FileCache>> {
        self.map.locked().values().map(|(c, _)| c.clone()).collect()
    }

    /// A pin on the cache of `f`'s file, made if it has none: the file's
    /// pages stay while a pin lives.
    pub fn pin(self: &Arc<Self>, f: &dyn Mappable) -> Result<CachePin, Errno> {
        let key = f.identity()?;
        let mut map = self.map.locked();
        let entry = map.entry(key).or_insert_with(|| {
            (
                Arc::new(FileCache {
                    key,
                    caches: self.clone(),
                    dead: AtomicBool::new(false),
                    state: Mutex::new(CacheState::default()),
                }),
                0,
            )
        });
        entry.1 += 1;
        let cache = entry.0.clone();
        self.live.store(map.len(), Ordering::Release);
        Ok(CachePin(cache))
    }

    fn unpin(&self, cache: &Arc<FileCache>) {
        let mut map = self.map.locked();
        let Some(entry) = map.get_mut(&cache.key) else {
            return;
        };
        if !Arc::ptr_eq(&entry.0, cache) {
            return;
        }
        entry.1 -= 1;
        if entry.1 > 0 {
            return;
        }
        map.remove(&cache.key);
        self.live.store(map.len(), Ordering::Release);
        // Written back under the registry's lock: a new mapping of the
        // file waits for it, so it never reads what the host had before.
        if let Err(e) = cache.writeback(None) {
            tracing::warn!("page cache writeback failed: {e:?}");
        }
        cache.dead.store(true, Ordering::Release);
    }
}

/// Keeps a file's cache (and its pages) alive: one per mapping piece.
#[derive(Debug)]
pub struct CachePin(Arc<FileCache>);

impl CachePin {
    /// The cache.
    pub fn cache(&self) -> &Arc<FileCache> {
        &self.0
    }
}

impl Drop for CachePin {
    fn drop(&mut self) {
        let caches = self.0.caches.clone();
        caches.unpin(&self.0);
    }
}

/// The cached pages of one host file.
pub struct FileCache {
    key: FileKey,
    caches: Arc<PageCaches>,
    /// its last mapping went and it was written back: late users (a read
    /// that looked it up just before) go to the host alone
    dead: AtomicBool,
    state: Mutex<CacheState>,
}

#[derive(Debug, Default)]
struct CacheState {
    /// chunk number → memory-file offset of its reservation
    chunks: BTreeMap<u64, u64>,
    /// present pages: start → end (file offsets, page-aligned, disjoint,
    /// not adjacent)
    present: BTreeMap<u64, u64>,
    /// a description open for reading and writing (not `O_APPEND`) that
    /// mapped the file writable: what writebacks use. `None` while no
    /// mapping could be written, so nothing needs writing back.
    writer: Option<Arc<dyn Mappable>>,
    /// a description of the file (the first mapping's), to read pages
    /// again after the Sentry changed the file behind the cache
    reader: Option<Arc<dyn Mappable>>,
    /// bytes charged to the quota
    charged: u64,
}

impl CacheState {
    /// The present parts of `[s, e)`.
    fn present_in(&self, s: u64, e: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let first = self.present.range(..=s).next_back().map(|(&a, &b)| (a, b));
        for (a, b) in first
            .into_iter()
            .chain(self.present.range(s..e).map(|(&a, &b)| (a, b)))
        {
            let (a, b) = (a.max(s), b.min(e));
            if a < b && out.last() != Some(&(a, b)) {
                out.push((a, b));
            }
        }
        out
    }

    /// The parts of `[s, e)` not present.
    fn missing_in(&self, s: u64, e: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut at = s;
        for (a, b) in self.present_in(s, e) {
            if a > at {
                out.push((at, a));
            }
            at = b;
        }
        if at < e {
            out.push((at, e));
        }
        out
    }

    fn mark_present(&mut self, s: u64, e: u64) {
        let mut s = s;
        let mut e = e;
        if let Some((&a, &b)) = self.present.range(..=s).next_back() {
            if b >= s {
                s = a;
                e = e.max(b);
            }
        }
        let inside: Vec<u64> = self.present.range(s..=e).map(|(&a, _)| a).collect();
        for a in inside {
            if let Some(b) = self.present.remove(&a) {
                e = e.max(b);
            }
        }
        self.present.insert(s, e);
    }

    /// `[s, e)` (inside present chunks) cut at chunk boundaries, as
    /// `(file offset, memory-file offset, length)`.
    fn runs(&self, s: u64, e: u64) -> Vec<(u64, u64, u64)> {
        let mut out = Vec::new();
        let mut at = s;
        while at < e {
            let idx = at / CHUNK;
            let stop = e.min((idx + 1) * CHUNK);
            if let Some(&base) = self.chunks.get(&idx) {
                out.push((at, base + at % CHUNK, stop - at));
            }
            at = stop;
        }
        out
    }
}

impl FileCache {
    fn mf(&self) -> &MemoryFile {
        &self.caches.mf
    }

    fn live_state(&self) -> Option<MutexGuard<'_, CacheState>> {
        let st = self.state.locked();
        (!self.dead.load(Ordering::Acquire)).then_some(st)
    }

    /// Memory-file pieces for a shared mapping of `[pos, pos + len)` of
    /// the file (page-aligned), read from `f` where not present yet:
    /// `(offset in the mapping, pieces' own region)` in order, cut at
    /// chunk boundaries. `writer` is `f` when the mapping may be written.
    pub fn map(
        pin: CachePin,
        f: &Arc<dyn Mappable>,
        writer: bool,
        pos: u64,
        len: u64,
    ) -> Result<Vec<(u64, Arc<SharedRegion>)>, Errno> {
        let this = pin.cache().clone();
        let end = pos.checked_add(len).ok_or(Errno::EOVERFLOW)?;
        let mut pieces = Vec::new();
        {
            let mut st = this.live_state().ok_or(Errno::EAGAIN)?;
            if writer && st.writer.is_none() {
                st.writer = Some(f.clone());
            }
            if st.reader.is_none() {
                st.reader = Some(f.clone());
            }
            for (s, e) in st.missing_in(pos, end) {
                this.make_present(&mut st, f, s, e)?;
            }
            let mut at = pos;
            while at < end {
                let idx = at / CHUNK;
                let stop = end.min((idx + 1) * CHUNK);
                let base = *st.chunks.get(&idx).ok_or(Errno::ENOMEM)?;
                pieces.push((at - pos, base + at % CHUNK, stop - at, at));
                at = stop;
            }
        }
        let mut out = Vec::with_capacity(pieces.len());
        let mut pin = Some(pin);
        let caches = this.caches.clone();
        for (in_map, off, n, file_pos) in pieces {
            // Each piece holds a pin of its own.
            let p = match pin.take() {
                Some(p) => p,
                None => caches.pin_existing(&this).ok_or(Errno::EAGAIN)?,
            };
            out.push((
                in_map,
                SharedRegion::file_view(&caches.mf, off, n, p, file_pos),
            ));
        }
        Ok(out)
    }

    /// Pieces for `[pos, pos + len)` of a file some mapping already maps
    /// (`mremap` growing one), read from the host with the description
    /// the first mapping was made through.
    pub fn map_more(
        self: &Arc<Self>,
        pos: u64,
        len: u64,
    ) -> Result<Vec<(u64, Arc<SharedRegion>)>, Errno> {
        let pin = self.caches.pin_existing(self).ok_or(Errno::EAGAIN)?;
        let reader = self.state.locked().reader.clone().ok_or(Errno::EAGAIN)?;
        FileCache::map(pin, &reader, false, pos, len)
    }

    /// Reads `[s, e)` (missing, page-aligned) from the host into new
    /// pages, reserving chunks and charging the quota.
    fn make_present(
        &self,
        st: &mut CacheState,
        f: &dyn Mappable,
        s: u64,
        e: u64,
    ) -> Result<(), Errno> {
        self.caches.quota.charge(e - s).map_err(|_| Errno::ENOMEM)?;
        st.charged += e - s;
        for idx in s / CHUNK..=(e - 1) / CHUNK {
            if let std::collections::btree_map::Entry::Vacant(v) = st.chunks.entry(idx) {
                v.insert(self.mf().allocate(CHUNK)?);
            }
        }
        for (fpos, moff, n) in st.runs(s, e) {
            self.mf().fill_from_fd(moff, n, f.fd(), fpos)?;
        }
        st.mark_present(s, e);
        Ok(())
    }

    /// `read(2)` of `f` (this cache's file) at `pos` into `dst`: the host's
    /// bytes with the present pages over them.
    pub fn read(&self, f: &dyn Mappable, pos: u64, dst: &GuestBufs<'_>) -> Result<usize, Errno> {
        let Some(st) = self.live_state() else {
            return read_host(f, pos, dst);
        };
        pread_staged(f, pos, dst, |at, buf| {
            for (a, b) in st.present_in(at, at + buf.len() as u64) {
                for (fpos, moff, len) in st.runs(a, b) {
                    let i = (fpos - at) as usize;
                    self.mf().read(moff, &mut buf[i..i + len as usize]);
                }
            }
        })
    }

    /// `write(2)` to `f` (this cache's file, open for writing) from `src`
    /// at `pos` (`None`: at the end, for `O_APPEND`, whose host descriptor
    /// appends by itself): the host first, then the present pages it
    /// covers. Returns the count written and where it ended.
    pub fn write<S: ByteSource + ?Sized>(
        &self,
        f: &dyn Mappable,
        pos: Option<u64>,
        src: &S,
    ) -> Result<(u64, u64), Errno> {
        let Some(st) = self.live_state() else {
            return write_host(f, pos, src);
        };
        let old_size = host::fstat(f.fd())?.st_size.max(0) as u64;
        let start = pos.unwrap_or(old_size);
        // A write past the end leaves a hole before it: what mappings
        // stored past the old end (where Linux would have raised SIGBUS)
        // is not part of the file.
        if start > old_size {
            self.zero(&st, old_size, start);
        }
        let done = pwrite_staged(f, start, src, |at, piece| {
            for (a, b) in st.present_in(at, at + piece.len() as u64) {
                for (fpos, moff, len) in st.runs(a, b) {
                    let i = (fpos - at) as usize;
                    self.mf().write(moff, &piece[i..i + len as usize]);
                }
            }
        })?;
        Ok((done as u64, start + done as u64))
    }

    /// Zeroes the present bytes of `[s, e)`: whole pages are dropped
    /// (holes read as zeros), partial ones written.
    fn zero(&self, st: &CacheState, s: u64, e: u64) {
        let zeros = [0u8; PAGE_SIZE as usize];
        for (a, b) in st.present_in(s, e) {
            for (fpos, moff, len) in st.runs(a, b) {
                let end = fpos + len;
                let first = fpos.next_multiple_of(PAGE_SIZE).min(end);
                let last = (end - end % PAGE_SIZE).max(first);
                if first > fpos {
                    self.mf().write(moff, &zeros[..(first - fpos) as usize]);
                }
                if last > first {
                    self.mf().punch(moff + (first - fpos), last - first);
                }
                if end > last {
                    self.mf()
                        .write(moff + (last - fpos), &zeros[..(end - last) as usize]);
                }
            }
        }
    }

    /// Writes the present pages of `[s, e)` (the whole file: `None`) that
    /// differ from the host's back to the host.
    pub fn writeback(&self, range: Option<(u64, u64)>) -> Result<(), Errno> {
        let st = self.state.locked();
        self.writeback_locked(&st, range)
    }

    fn writeback_locked(&self, st: &CacheState, range: Option<(u64, u64)>) -> Result<(), Errno> {
        let Some(w) = st.writer.clone() else {
            return Ok(());
        };
        let size = host::fstat(w.fd())?.st_size.max(0) as u64;
        let (s, e) = range.unwrap_or((0, u64::MAX));
        let e = e.min(size);
        let mut ours = Stage::new();
        let mut theirs = Stage::new();
        for (a, b) in st.present_in(s & !(PAGE_SIZE - 1), e) {
            for (fpos, moff, len) in st.runs(a, b) {
                let mut done = 0u64;
                while done < len {
                    let n = (IO_CHUNK as u64).min(len - done) as usize;
                    let at = fpos + done;
                    let mine = ours.space(n);
                    self.mf().read(moff + done, mine);
                    let host_buf = theirs.space(n);
                    let got = host::pread(w.fd(), host_buf, at)?;
                    let mut i = 0usize;
                    while i < n {
                        let j = (i + PAGE_SIZE as usize).min(n);
                        let differs = j > got || mine[i..j] != host_buf[i..j];
                        if differs {
                            let mut k = 0;
                            while i + k < j {
                                let w_n =
                                    host::pwrite(w.fd(), &mine[i + k..j], at + (i + k) as u64)?;
                                if w_n == 0 {
                                    return Err(Errno::EIO);
                                }
                                k += w_n;
                            }
                        }
                        i = j;
                    }
                    done += n as u64;
                }
            }
        }
        Ok(())
    }

    /// Runs `change`, which changes the host file's size or contents
    /// behind the cache (`truncate`, `fallocate`), with the pages written
    /// back before and read again after (past the new end they read as
    /// zeros). Stores made through a mapping while `change` runs may be
    /// lost, as they would be to a racing `truncate` on Linux.
    pub fn around_host_change<T>(
        &self,
        change: impl FnOnce() -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        let Some(st) = self.live_state() else {
            return change();
        };
        self.writeback_locked(&st, None)?;
        let r = change()?;
        self.reload_locked(&st)?;
        Ok(r)
    }

    /// Reads every present page again from the host (after an open with
    /// `O_TRUNC` emptied the file).
    pub fn reload(&self) -> Result<(), Errno> {
        match self.live_state() {
            Some(st) => self.reload_locked(&st),
            None => Ok(()),
        }
    }

    fn reload_locked(&self, st: &CacheState) -> Result<(), Errno> {
        let Some(f) = st.reader.clone() else {
            return Ok(());
        };
        let size = host::fstat(f.fd())?.st_size.max(0) as u64;
        for (a, b) in st.present_in(0, size) {
            for (fpos, moff, len) in st.runs(a, b) {
                self.mf().fill_from_fd(moff, len, f.fd(), fpos)?;
            }
        }
        // What lies past the end reads as zeros.
        self.zero(st, size, u64::MAX);
        Ok(())
    }

    /// Lays the present pages of `[pos, pos + len)` over a private copy of
    /// the file made at memory-file offset `dst` (a `MAP_PRIVATE` mapping
    /// made while shared ones exist starts from what they hold).
    pub fn copy_present(&self, pos: u64, len: u64, dst: u64) {
        let Some(st) = self.live_state() else {
            return;
        };
        for (a, b) in st.present_in(pos, pos + len) {
            for (fpos, moff, n) in st.runs(a, b) {
                self.mf().copy_within(moff, dst + (fpos - pos), n);
            }
        }
    }
}

impl PageCaches {
    /// One more pin on a cache already pinned by the caller (`None` if it
    /// has gone meanwhile).
    fn pin_existing(&self, cache: &Arc<FileCache>) -> Option<CachePin> {
        let mut map = self.map.locked();
        let entry = map.get_mut(&cache.key)?;
        if !Arc::ptr_eq(&entry.0, cache) {
            return None;
        }
        entry.1 += 1;
        Some(CachePin(cache.clone()))
    }
}

impl Drop for FileCache {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        for (_, off) in std::mem::take(&mut st.chunks) {
            self.caches.mf.release(off, CHUNK);
        }
        self.caches.quota.refund(st.charged);
    }
}

/// `read(2)` of a host file without a cache (one that went just before).
fn read_host(f: &dyn Mappable, pos: u64, dst: &GuestBufs<'_>) -> Result<usize, Errno> {
    pread_staged(f, pos, dst, |_, _| {})
}

/// Reads the host file at `pos` into `dst`, staged [`IO_CHUNK`] at a time;
/// `got(at, bytes)` may change each piece before it is copied out. Stops
/// at the end of the file, a short read, or an error past the first piece.
fn pread_staged(
    f: &dyn Mappable,
    pos: u64,
    dst: &GuestBufs<'_>,
    mut got: impl FnMut(u64, &mut [u8]),
) -> Result<usize, Errno> {
    let want = dst.len();
    let mut stage = Stage::new();
    let mut done = 0usize;
    while done < want {
        let at = pos + done as u64;
        let buf = stage.space(IO_CHUNK.min(want - done));
        let n = match host::pread(f.fd(), buf, at) {
            Ok(n) => n,
            Err(_) if done > 0 => break,
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            break;
        }
        got(at, &mut buf[..n]);
        done += dst.write_at(done, &buf[..n]);
        if n < buf.len() {
            break;
        }
    }
    Ok(done)
}

/// `write(2)` to a host file without a cache (one that went just before).
fn write_host<S: ByteSource + ?Sized>(
    f: &dyn Mappable,
    pos: Option<u64>,
    src: &S,
) -> Result<(u64, u64), Errno> {
    let start = match pos {
        Some(p) => p,
        None => host::fstat(f.fd())?.st_size.max(0) as u64,
    };
    let done = pwrite_staged(f, start, src, |_, _| {})?;
    Ok((done as u64, start + done as u64))
}

/// Writes `src` to the host file at `start`, staged [`IO_CHUNK`] at a
/// time; `written(at, bytes)` sees each piece the host took. Returns the
/// count written (short after a partial write or an error past the first
/// piece).
fn pwrite_staged<S: ByteSource + ?Sized>(
    f: &dyn Mappable,
    start: u64,
    src: &S,
    mut written: impl FnMut(u64, &[u8]),
) -> Result<usize, Errno> {
    let mut stage = Stage::new();
    let mut done = 0usize;
    while done < src.len() {
        let piece = stage.load(src, done, IO_CHUNK);
        if piece.is_empty() {
            break;
        }
        let at = start + done as u64;
        let n = match host::pwrite(f.fd(), piece, at) {
            Ok(n) => n,
            Err(_) if done > 0 => break,
            Err(e) => return Err(e.into()),
        };
        written(at, &piece[..n]);
        done += n;
        if n < piece.len() {
            break;
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::GuestSlice;
    use std::os::fd::OwnedFd;

    struct TempFile(std::path::PathBuf);

    impl TempFile {
        fn new(tag: &str, contents: &[u8]) -> TempFile {
            let p = std::env::temp_dir()
                .join(format!("ferrovisor-pagecache-{tag}-{}", std::process::id()));
            std::fs::write(&p, contents).expect("write");
            TempFile(p)
        }

        fn open(&self) -> Arc<dyn Mappable> {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&self.0)
                .expect("open");
            Arc::new(crate::mm::TestFile::new(OwnedFd::from(f), None))
        }

        fn bytes(&self) -> Vec<u8> {
            std::fs::read(&self.0).expect("read")
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn caches(limit: u64) -> Arc<PageCaches> {
        PageCaches::new(Arc::new(MemoryFile::new().expect("memory file")), limit)
    }

    fn guest(buf: &mut [u8]) -> [GuestSlice; 1] {
        // SAFETY: each use is within one statement, while `buf` is borrowed
        // and not otherwise touched.
        [unsafe { GuestSlice::new(buf.as_mut_ptr(), buf.len()) }]
    }

    #[test]
    fn present_ranges_merge_and_report_what_is_missing() {
        let mut st = CacheState::default();
        st.mark_present(0x1000, 0x3000);
        st.mark_present(0x5000, 0x6000);
        assert_eq!(
            st.missing_in(0, 0x7000),
            [(0, 0x1000), (0x3000, 0x5000), (0x6000, 0x7000)]
        );
        assert_eq!(
            st.present_in(0x2000, 0x5800),
            [(0x2000, 0x3000), (0x5000, 0x5800)]
        );
        st.mark_present(0x3000, 0x5000);
        assert_eq!(st.present.len(), 1);
        assert_eq!(st.present_in(0, u64::MAX), [(0x1000, 0x6000)]);
        assert!(st.missing_in(0x1000, 0x6000).is_empty());
    }

    #[test]
    fn mappings_reads_and_writes_share_the_pages_and_reach_the_host() {
        let file = TempFile::new("share", &[b'.'; 3 * PAGE_SIZE as usize]);
        let pc = caches(1 << 20);
        let a = file.open();
        let b = file.open();
        let pin = pc.pin(&a).expect("pin");
        let regions = FileCache::map(pin, &a, true, 0, 3 * PAGE_SIZE).expect("map");
        assert_eq!(regions.len(), 1);
        let region = &regions[0].1;
        // A second open finds the same cache.
        let cache = pc.lookup(&b).expect("cache");
        // A store through the mapping is what read(2) returns.
        pc.mf.write(region.offset() + 10, b"mapped");
        let mut out = [0u8; 8];
        let n = cache
            .read(&b, 9, &GuestBufs::new(&guest(&mut out)))
            .expect("read");
        assert_eq!((n, &out), (8, b".mapped."));
        // write(2) shows in the mapping, through another description.
        let mut data = *b"written";
        let (n, end) = cache
            .write(&b, Some(PAGE_SIZE + 1), &GuestBufs::new(&guest(&mut data)))
            .expect("write");
        assert_eq!((n, end), (7, PAGE_SIZE + 8));
        let mut seen = [0u8; 7];
        pc.mf.read(region.offset() + PAGE_SIZE + 1, &mut seen);
        assert_eq!(&seen, b"written");
        // The host has the write at once, the store after a writeback.
        assert_eq!(&file.bytes()[10..16], b"......");
        cache.writeback(Some((0, PAGE_SIZE))).expect("writeback");
        assert_eq!(&file.bytes()[10..16], b"mapped");
        // The last mapping going writes everything back and frees the
        // cache.
        pc.mf.write(region.offset() + 2 * PAGE_SIZE, b"last");
        drop(cache);
        drop(regions);
        assert!(!pc.any());
        assert!(pc.lookup(&b).is_none());
        let host = file.bytes();
        assert_eq!(&host[2 * PAGE_SIZE as usize..][..4], b"last");
        assert_eq!(host.len(), 3 * PAGE_SIZE as usize);
        assert_eq!(pc.quota.used(), 0);
    }

    #[test]
    fn pages_past_the_quota_are_enomem_and_truncation_zeroes_the_tail() {
        let file = TempFile::new("quota", &[b'x'; 2 * PAGE_SIZE as usize]);
        let pc = caches(2 * PAGE_SIZE);
        let f = file.open();
        let regions =
            FileCache::map(pc.pin(&f).expect("pin"), &f, true, 0, 2 * PAGE_SIZE).expect("map");
        let err = FileCache::map(pc.pin(&f).expect("pin"), &f, true, 2 * PAGE_SIZE, PAGE_SIZE);
        assert_eq!(err.err(), Some(Errno::ENOMEM));
        // Mapping the same pages again costs nothing more.
        let again = FileCache::map(pc.pin(&f).expect("pin"), &f, true, PAGE_SIZE, PAGE_SIZE)
            .expect("map again");
        let off = regions[0].1.offset();
        pc.mf.write(off + 5, b"kept");
        pc.mf.write(off + PAGE_SIZE + 5, b"gone");
        let cache = pc.lookup(&f).expect("cache");
        cache
            .around_host_change(|| host::ftruncate(f.fd(), PAGE_SIZE + 2).map_err(Errno::from))
            .expect("truncate");
        let mut b = [0u8; 8];
        pc.mf.read(off + PAGE_SIZE, &mut b);
        assert_eq!(&b, b"xx\0\0\0\0\0\0", "past the end reads as zeros");
        pc.mf.read(again[0].1.offset() + 5, &mut b[..4]);
        assert_eq!(&b[..4], b"\0\0\0\0");
        drop((cache, regions, again));
        let host = file.bytes();
        assert_eq!(host.len(), PAGE_SIZE as usize + 2);
        assert_eq!(&host[5..9], b"kept");
        assert_eq!(pc.quota.used(), 0);
    }

    #[test]
    fn a_write_past_the_end_leaves_a_hole_whatever_mappings_stored_there() {
        let file = TempFile::new("hole", b"0123");
        let pc = caches(1 << 20);
        let f = file.open();
        let regions =
            FileCache::map(pc.pin(&f).expect("pin"), &f, true, 0, 2 * PAGE_SIZE).expect("map");
        let off = regions[0].1.offset();
        // Stores past the end (Linux: SIGBUS for the second page).
        pc.mf.write(off + 10, b"tail of page 0");
        pc.mf.write(off + PAGE_SIZE + 7, b"page 1");
        let cache = pc.lookup(&f).expect("cache");
        let mut data = *b"end";
        let (n, end) = cache
            .write(
                &f,
                Some(PAGE_SIZE + 100),
                &GuestBufs::new(&guest(&mut data)),
            )
            .expect("write");
        assert_eq!((n, end), (3, PAGE_SIZE + 103));
        let mut out = vec![0u8; (PAGE_SIZE + 103) as usize];
        let got = cache
            .read(&f, 0, &GuestBufs::new(&guest(&mut out)))
            .expect("read");
        assert_eq!(got, out.len());
        let mut want = vec![0u8; out.len()];
        want[..4].copy_from_slice(b"0123");
        want[PAGE_SIZE as usize + 100..].copy_from_slice(b"end");
        assert_eq!(out, want);
        drop((cache, regions));
        assert_eq!(file.bytes(), want);
    }
}
