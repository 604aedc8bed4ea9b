//! The memory file: one sparse memfd from which every guest page comes.
//!
//! The Sentry maps the whole file once into its own address space, so copying
//! to and from guest memory is a `memcpy` through that mapping; platforms map
//! ranges of the same file into guest address spaces. Offsets are handed out
//! page by page by a first-fit allocator; freed ranges are punched out of the
//! file so their memory returns to the host.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::{Mutex, OnceLock};

use abi::Errno;

use crate::sync::Locked;
use crate::PAGE_SIZE;

/// Size of the file's (sparse) offset space. Offsets cost nothing until a
/// page is touched, so this only bounds how much guest memory may exist at
/// once, address-space reservations included.
const FILE_SIZE: u64 = 1 << 40;

/// The Sentry's memory file.
#[derive(Debug)]
pub struct MemoryFile {
    fd: OwnedFd,
    base: *mut u8,
    size: u64,
    free: Mutex<BTreeMap<u64, u64>>,
    /// the window of offsets that shows a sandbox image's pages, read-only
    /// (see [`MemoryFile::attach_base`])
    window: OnceLock<(u64, u64)>,
    /// address spaces being torn down (their pages going back) right now
    tearing_down: std::sync::atomic::AtomicUsize,
}

// SAFETY: `base` points at a shared mapping that lives as long as `self`; all
// accesses go through methods that bounds-check offsets, and concurrent access
// to guest memory is inherent to a kernel (the guest may write at any time).
unsafe impl Send for MemoryFile {}
// SAFETY: shared use reaches the mapping only through the bounds-checked
// copies, and the bytes are shared with the guest anyway; the allocator
// state is behind a mutex.
unsafe impl Sync for MemoryFile {}

impl MemoryFile {
    /// Creates the memfd and maps it into the Sentry.
    pub fn new() -> std::io::Result<Self> {
        // SAFETY: the name is a valid NUL-terminated string.
        let raw = unsafe { libc::memfd_create(c"ferrovisor-memory".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut size = FILE_SIZE;
        loop {
            // SAFETY: plain syscall on our own descriptor.
            if unsafe { libc::ftruncate(fd.as_raw_fd(), size as i64) } == 0 {
                // SAFETY: mapping a file we own at a kernel-chosen address;
                // MAP_NORESERVE because the file is sparse.
                let p = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        size as usize,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_SHARED | libc::MAP_NORESERVE,
                        fd.as_raw_fd(),
                        0,
                    )
                };
                if p != libc::MAP_FAILED {
                    let mut free = BTreeMap::new();
                    free.insert(0, size);
                    return Ok(MemoryFile {
                        fd,
                        base: p.cast(),
                        size,
                        free: Mutex::new(free),
                        window: OnceLock::new(),
                        tearing_down: Default::default(),
                    });
                }
            }
            if size <= 1 << 32 {
                return Err(std::io::Error::last_os_error());
            }
            size /= 4;
        }
    }

    /// The memfd, for platforms to map from.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Bytes of memory the file holds (it is sparse): the guest's pages
    /// in use, its tmpfs files' included.
    pub fn used_bytes(&self) -> u64 {
        crate::host::fstat(self.fd()).map_or(0, |st| st.st_blocks as u64 * 512)
    }

    /// Shows `len` bytes of `file` from `pos` on (both page-aligned: a
    /// restored sandbox image's pages) at a window of offsets of their
    /// own, read-only, so that guest memory can share them until written;
    /// the window's first offset. Once per memory file: the window lives
    /// as long as it does. Nothing may write to the window's offsets.
    pub fn attach_base(&self, file: BorrowedFd<'_>, pos: u64, len: u64) -> Result<u64, Errno> {
        if !pos.is_multiple_of(PAGE_SIZE) || len == 0 || self.window.get().is_some() {
            return Err(Errno::EINVAL);
        }
        let len = len.div_ceil(PAGE_SIZE) * PAGE_SIZE;
        let at = self.allocate(len)?;
        // SAFETY: replaces part of our own mapping of the memory file (in
        // bounds: `allocate` gave it) with a read-only view of `file`.
        let p = unsafe {
            libc::mmap(
                self.ptr(at, len).cast(),
                len as usize,
                libc::PROT_READ,
                libc::MAP_SHARED | libc::MAP_FIXED,
                file.as_raw_fd(),
                pos as i64,
            )
        };
        if p == libc::MAP_FAILED {
            let e = Errno::from_io(&std::io::Error::last_os_error());
            self.release(at, len);
            return Err(e);
        }
        let _ = self.window.set((at, len));
        Ok(at)
    }

    /// Whether offset `off` lies in the window of [`MemoryFile::attach_base`].
    pub fn in_window(&self, off: u64) -> bool {
        self.window
            .get()
            .is_some_and(|&(at, len)| off >= at && off - at < len)
    }

    /// Allocates `len` bytes (a multiple of the page size) of file offsets.
    pub fn allocate(&self, len: u64) -> Result<u64, Errno> {
        debug_assert!(len.is_multiple_of(PAGE_SIZE) && len > 0);
        let mut free = self.free.locked();
        let found = free.iter().find(|&(_, &l)| l >= len).map(|(&s, &l)| (s, l));
        let (start, flen) = found.ok_or(Errno::ENOMEM)?;
        free.remove(&start);
        if flen > len {
            free.insert(start + len, flen - len);
        }
        Ok(start)
    }

    /// Runs `f`, which gives an address space's pages back, counted in
    /// [`MemoryFile::tearing_down`].
    pub fn tear_down(&self, f: impl FnOnce()) {
        use std::sync::atomic::Ordering;
        self.tearing_down.fetch_add(1, Ordering::SeqCst);
        f();
        self.tearing_down.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether an address space is giving its pages back right now (what
    /// the memory file holds is about to shrink).
    pub fn tearing_down(&self) -> bool {
        self.tearing_down.load(std::sync::atomic::Ordering::SeqCst) > 0
    }

    /// Returns `[off, off + len)` to the allocator and releases its pages.
    pub fn release(&self, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        self.punch(off, len);
        let mut free = self.free.locked();
        let mut start = off;
        let mut end = off + len;
        if let Some((&ps, &pl)) = free.range(..start).next_back() {
            if ps + pl == start {
                start = ps;
                free.remove(&ps);
            }
        }
        if let Some(&nl) = free.get(&end) {
            free.remove(&end);
            end += nl;
        }
        free.insert(start, end - start);
    }

    /// Drops the contents of `[off, off + len)`: it reads as zeros afterwards
    /// (in the Sentry's view and in every guest mapping of it).
    pub fn punch(&self, off: u64, len: u64) {
        // SAFETY: plain syscall on our own descriptor; failure only means the
        // pages stay allocated, so it is ignored.
        unsafe {
            libc::fallocate(
                self.fd.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                off as i64,
                len as i64,
            );
        }
    }

    /// Pointer to offset `off` in the Sentry's mapping, valid for `len` bytes.
    pub fn ptr(&self, off: u64, len: u64) -> *mut u8 {
        assert!(
            off.checked_add(len).is_some_and(|e| e <= self.size),
            "memory file offset out of range"
        );
        // SAFETY: in bounds of the mapping, checked above.
        unsafe { self.base.add(off as usize) }
    }

    /// Copies `buf` into the file at `off`.
    pub fn write(&self, off: u64, buf: &[u8]) {
        let dst = self.ptr(off, buf.len() as u64);
        // SAFETY: `dst` is valid for `buf.len()` bytes (checked by `ptr`) and
        // cannot overlap `buf`, which is Sentry heap or stack memory.
        unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), dst, buf.len()) };
    }

    /// Copies from the file at `off` into `buf`.
    pub fn read(&self, off: u64, buf: &mut [u8]) {
        let src = self.ptr(off, buf.len() as u64);
        // SAFETY: `src` is valid for `buf.len()` bytes (checked by `ptr`) and
        // cannot overlap `buf`, which is Sentry heap or stack memory.
        unsafe { std::ptr::copy_nonoverlapping(src, buf.as_mut_ptr(), buf.len()) };
    }

    /// Copies `len` bytes within the file.
    pub fn copy_within(&self, from: u64, to: u64, len: u64) {
        let src = self.ptr(from, len);
        let dst = self.ptr(to, len);
        // SAFETY: both ranges are in bounds; `copy` tolerates overlap.
        unsafe { std::ptr::copy(src, dst, len as usize) };
    }

    /// Calls `f(start, end)` for each run of `[from, from + len)` that
    /// holds pages (the holes between them are left out).
    pub(crate) fn for_each_data(&self, from: u64, len: u64, mut f: impl FnMut(u64, u64)) {
        let end = from + len;
        let mut at = from;
        while at < end {
            // SAFETY: plain lseek on our own descriptor.
            let data = unsafe { libc::lseek(self.fd.as_raw_fd(), at as i64, libc::SEEK_DATA) };
            if data < 0 || data as u64 >= end {
                return;
            }
            // SAFETY: plain lseek on our own descriptor.
            let hole = unsafe { libc::lseek(self.fd.as_raw_fd(), data, libc::SEEK_HOLE) };
            let stop = if hole < 0 {
                end
            } else {
                (hole as u64).min(end)
            };
            f(data as u64, stop);
            at = stop;
        }
    }

    /// How many bytes of `[from, from + len)` hold pages (not holes).
    pub fn populated(&self, from: u64, len: u64) -> u64 {
        let mut n = 0;
        self.for_each_data(from, len, |s, e| n += e - s);
        n
    }

    /// Sets `out[i]` to 1 where page `i` of `[from, from + out.len()
    /// pages)` holds memory (is no hole): `mincore(2)`'s residency.
    pub fn mark_populated(&self, from: u64, out: &mut [u8]) {
        if self.in_window(from) {
            // an image's page: present, in the image's file
            out.fill(1);
            return;
        }
        let pages = out.len();
        self.for_each_data(from, pages as u64 * PAGE_SIZE, |s, e| {
            let first = ((s - from) / PAGE_SIZE) as usize;
            let last = (e - from).div_ceil(PAGE_SIZE) as usize;
            out[first..last.min(pages)].fill(1);
        });
    }

    /// Bytes of `[from, from + len)` that hold memory (whole pages).
    pub fn populated_bytes(&self, from: u64, len: u64) -> u64 {
        let mut n = 0;
        self.for_each_data(from, len, |s, e| {
            n += (e.min(from + len) - s).div_ceil(PAGE_SIZE) * PAGE_SIZE;
        });
        n
    }

    /// Copies `[from, from + len)` to `to`, touching only the pages that
    /// hold data (holes stay holes), for `fork`.
    pub fn copy_populated(&self, from: u64, to: u64, len: u64) {
        self.for_each_data(from, len, |s, e| {
            self.copy_within(s, to + (s - from), e - s)
        });
    }

    /// Reads up to `len` bytes from host descriptor `fd` at file position
    /// `pos` straight into the memory file at `off`; returns the count.
    pub fn fill_from_fd(
        &self,
        off: u64,
        len: u64,
        fd: BorrowedFd<'_>,
        pos: u64,
    ) -> Result<u64, Errno> {
        let mut done = 0;
        while done < len {
            let p = self.ptr(off + done, len - done);
            // SAFETY: `p` is valid for `len - done` bytes of our mapping.
            let n = unsafe {
                libc::pread(
                    fd.as_raw_fd(),
                    p.cast(),
                    (len - done) as usize,
                    (pos + done) as i64,
                )
            };
            if n < 0 {
                let e = Errno::from_io(&std::io::Error::last_os_error());
                if e == Errno::EINTR {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                break;
            }
            done += n as u64;
        }
        Ok(done)
    }
}

impl Drop for MemoryFile {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `new`.
        unsafe { libc::munmap(self.base.cast(), self.size as usize) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocate_release_coalesce() {
        let m = MemoryFile::new().expect("memfd");
        let a = m.allocate(PAGE_SIZE).expect("a");
        let b = m.allocate(2 * PAGE_SIZE).expect("b");
        assert_ne!(a, b);
        m.write(b + 10, b"hello");
        let mut out = [0u8; 5];
        m.read(b + 10, &mut out);
        assert_eq!(&out, b"hello");
        m.release(a, PAGE_SIZE);
        m.release(b, 2 * PAGE_SIZE);
        // Everything coalesced back into one range starting at 0.
        let c = m.allocate(3 * PAGE_SIZE).expect("c");
        assert_eq!(c, 0);
        m.read(c + PAGE_SIZE + 10, &mut out);
        assert_eq!(out, [0; 5], "released pages read back as zeros");
    }
}
