//! Guest memory as the Sentry reaches it: [`GuestSlice`], a range of the
//! Sentry's mapping of the memory file with safe copies and host I/O, and
//! [`GuestWord`], a futex word. The unsafe code that reads and writes guest
//! memory for system calls is here, behind one unsafe constructor each.

use std::io;
use std::os::fd::BorrowedFd;
use std::ptr;
use std::sync::atomic::AtomicU32;

use crate::host;

/// A range of guest memory: bytes of the memory file, reached through the
/// Sentry's mapping of it, for copies and for host I/O straight into or out
/// of guest memory.
///
/// Not a `&[u8]`: other guest threads, and guest processes sharing the
/// pages, may write these bytes at any time (through the platform, outside
/// anything Rust can see), so the Sentry never holds a Rust reference into
/// them. Every access is a raw copy (`ptr::copy_nonoverlapping`) into or
/// out of Sentry memory, or a host system call that the host kernel makes;
/// a value the Sentry checks is checked in its own copy, read once.
///
/// A slice is for the system call that made it:
/// [`crate::mm::MemoryManager::slices`] checks the VMAs when it makes one,
/// and nothing keeps one past the call.
#[derive(Clone, Copy, Debug)]
pub struct GuestSlice {
    /// start in the Sentry's mapping
    ptr: *mut u8,
    /// length in bytes
    len: usize,
}

impl GuestSlice {
    /// The `len` bytes at `ptr`.
    ///
    /// # Safety
    ///
    /// `[ptr, ptr + len)` must stay valid for reads and writes as long as
    /// this slice, or any copy or part of it, is used, and no Rust reference
    /// to those bytes may be used meanwhile (they are reached only through
    /// this type).
    ///
    /// For guest memory that holds when `ptr` lies inside the Sentry's
    /// mapping of the memory file and the `MemoryFile` outlives the slice.
    /// The file is mapped once, when it is made, and unmapped only when it
    /// drops; the kernel holds it for the sandbox's life, and every system
    /// call runs on a task that holds the kernel, so a slice made and used
    /// within one system call is valid. A guest `munmap` (by another
    /// thread, meanwhile) only returns offsets to the file's allocator and
    /// punches them out: the Sentry's mapping stays, so the slice still
    /// points at mapped memory (it reads zeros, or another mapping's bytes
    /// once the offsets are handed out again; it cannot fault).
    pub unsafe fn new(ptr: *mut u8, len: usize) -> Self {
        GuestSlice { ptr, len }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the slice has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `len` bytes from `off` on; `None` when they go past the end.
    pub fn sub(&self, off: usize, len: usize) -> Option<GuestSlice> {
        let end = off.checked_add(len)?;
        (end <= self.len).then(|| GuestSlice {
            // (pointer arithmetic only: `off <= self.len`)
            ptr: self.ptr.wrapping_add(off),
            len,
        })
    }

    /// The bytes before `mid` and those from it on; `mid` past the end
    /// splits there (the whole slice, then an empty one).
    pub fn split_at(&self, mid: usize) -> (GuestSlice, GuestSlice) {
        let mid = mid.min(self.len);
        let tail = GuestSlice {
            ptr: self.ptr.wrapping_add(mid),
            len: self.len - mid,
        };
        (
            GuestSlice {
                ptr: self.ptr,
                len: mid,
            },
            tail,
        )
    }

    /// Grows this slice by `next` when `next` starts where it ends (for
    /// [`crate::mm::MemoryManager::slices`], which joins what lies together
    /// in the memory file); returns whether it did.
    pub(super) fn join(&mut self, next: GuestSlice) -> bool {
        if self.ptr.wrapping_add(self.len) != next.ptr {
            return false;
        }
        self.len += next.len;
        true
    }

    /// Copies the guest bytes from `off` on into `out`; returns the count
    /// copied (short at the slice's end, 0 past it).
    pub fn read_at(&self, off: usize, out: &mut [u8]) -> usize {
        let n = self.len.saturating_sub(off).min(out.len());
        if n > 0 {
            // SAFETY: `off + n <= len`, so the source lies in the slice,
            // valid for reads (`new`'s contract); `out` is valid for `n`
            // bytes, and cannot overlap the slice, since no Rust reference
            // to the slice's bytes is used while it is (`new`'s contract).
            unsafe { ptr::copy_nonoverlapping(self.ptr.add(off), out.as_mut_ptr(), n) };
        }
        n
    }

    /// Copies `data` into the guest bytes from `off` on; returns the count
    /// copied (short at the slice's end, 0 past it).
    pub fn write_at(&self, off: usize, data: &[u8]) -> usize {
        let n = self.len.saturating_sub(off).min(data.len());
        if n > 0 {
            // SAFETY: `off + n <= len`, so the destination lies in the
            // slice, valid for writes (`new`'s contract); `data` is valid
            // for `n` bytes, and cannot overlap the slice, since no Rust
            // reference to the slice's bytes is used while it is (`new`'s
            // contract).
            unsafe { ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off), n) };
        }
        n
    }

    /// Sets every byte to zero.
    pub fn zero(&self) {
        // SAFETY: the slice is valid for writes of `len` bytes (`new`'s
        // contract).
        unsafe { ptr::write_bytes(self.ptr, 0, self.len) };
    }

    /// `read(fd)` into the slice; returns the count read.
    pub fn read_from(&self, fd: BorrowedFd<'_>) -> io::Result<usize> {
        // SAFETY: the slice is valid for writes of `len` bytes (`new`'s
        // contract); the host kernel writes at most that many.
        unsafe { host::read_raw(fd, self.ptr, self.len) }
    }

    /// `pread(fd, pos)` into the slice; returns the count read.
    pub fn pread_from(&self, fd: BorrowedFd<'_>, pos: u64) -> io::Result<usize> {
        // SAFETY: the slice is valid for writes of `len` bytes (`new`'s
        // contract); the host kernel writes at most that many.
        unsafe { host::pread_raw(fd, self.ptr, self.len, pos) }
    }

    /// `write(fd)` of the slice; returns the count written.
    pub fn write_to(&self, fd: BorrowedFd<'_>) -> io::Result<usize> {
        // SAFETY: the slice is valid for reads of `len` bytes (`new`'s
        // contract); the host kernel reads at most that many.
        unsafe { host::write_raw(fd, self.ptr, self.len) }
    }

    /// `pwrite(fd, pos)` of the slice; returns the count written.
    pub fn pwrite_to(&self, fd: BorrowedFd<'_>, pos: u64) -> io::Result<usize> {
        // SAFETY: the slice is valid for reads of `len` bytes (`new`'s
        // contract); the host kernel reads at most that many.
        unsafe { host::pwrite_raw(fd, self.ptr, self.len, pos) }
    }
}

/// Copies `data` into guest slices; returns the count copied.
pub fn copy_to_slices(bufs: &[GuestSlice], data: &[u8]) -> u64 {
    copy_to_slices_at(bufs, 0, data) as u64
}

/// Copies `data` into guest slices, starting `skip` bytes in; returns the
/// count copied.
pub fn copy_to_slices_at(bufs: &[GuestSlice], mut skip: usize, data: &[u8]) -> usize {
    let mut done = 0;
    for b in bufs {
        if done == data.len() {
            break;
        }
        if skip >= b.len {
            skip -= b.len;
            continue;
        }
        done += b.write_at(skip, &data[done..]);
        skip = 0;
    }
    done
}

/// Copies from guest slices into `out`; returns the count copied.
pub fn copy_from_slices(bufs: &[GuestSlice], out: &mut [u8]) -> usize {
    copy_from_slices_at(bufs, 0, out)
}

/// Copies from guest slices, starting `skip` bytes in, into `out`; returns
/// the count copied.
pub fn copy_from_slices_at(bufs: &[GuestSlice], mut skip: usize, out: &mut [u8]) -> usize {
    let mut done = 0;
    for b in bufs {
        if done == out.len() {
            break;
        }
        if skip >= b.len {
            skip -= b.len;
            continue;
        }
        done += b.read_at(skip, &mut out[done..]);
        skip = 0;
    }
    done
}

/// A 4-byte-aligned guest word seen as an atomic: a futex word, which the
/// guest changes at any time with its own atomic instructions.
#[derive(Debug)]
pub struct GuestWord {
    ptr: *const AtomicU32,
}

impl GuestWord {
    /// The word at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must be 4-byte aligned and valid for reads and writes of 4
    /// bytes as long as the word is used: for guest memory, inside the
    /// Sentry's mapping of a memory file that outlives it (see
    /// [`GuestSlice::new`]).
    pub unsafe fn new(ptr: *const u8) -> Self {
        GuestWord { ptr: ptr.cast() }
    }
}

impl std::ops::Deref for GuestWord {
    type Target = AtomicU32;

    fn deref(&self) -> &AtomicU32 {
        // SAFETY: `ptr` is aligned and valid for as long as `self` (`new`'s
        // contract), and any 4 bytes are a valid `AtomicU32`; the guest's
        // own accesses to the word are atomic stores and read-modify-writes
        // of the hardware, which is what an `AtomicU32` models.
        unsafe { &*self.ptr }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn over(buf: &mut [u8]) -> GuestSlice {
        // SAFETY: `buf` outlives the slice in each test and is not touched
        // while the slice is in use.
        unsafe { GuestSlice::new(buf.as_mut_ptr(), buf.len()) }
    }

    #[test]
    fn copies_stop_at_the_end() {
        let mut mem = [0u8; 4];
        let s = over(&mut mem);
        assert_eq!(s.write_at(1, b"abcdef"), 3);
        assert_eq!(s.write_at(4, b"x"), 0);
        assert_eq!(s.write_at(9, b"x"), 0);
        let mut out = [9u8; 6];
        assert_eq!(s.read_at(0, &mut out), 4);
        assert_eq!(&out, b"\0abc\x09\x09");
        assert_eq!(s.read_at(5, &mut out), 0);
        s.zero();
        assert_eq!(mem, [0; 4]);
    }

    #[test]
    fn parts_are_bounds_checked() {
        let mut mem = *b"0123456789";
        let s = over(&mut mem);
        assert!(s.sub(8, 3).is_none());
        assert!(s.sub(usize::MAX, 2).is_none());
        let part = s.sub(2, 3).expect("in bounds");
        let mut out = [0u8; 8];
        assert_eq!(part.read_at(0, &mut out), 3);
        assert_eq!(&out[..3], b"234");
        let (a, b) = s.split_at(4);
        assert_eq!((a.len(), b.len()), (4, 6));
        assert_eq!(b.read_at(0, &mut out[..1]), 1);
        assert_eq!(out[0], b'4');
        let (a, b) = s.split_at(99);
        assert_eq!((a.len(), b.len()), (10, 0));
        let mut joined = s.sub(0, 3).expect("head");
        assert!(!joined.join(s.sub(4, 2).expect("apart")));
        assert!(joined.join(s.sub(3, 2).expect("next")));
        assert_eq!(joined.len(), 5);
    }

    #[test]
    fn host_io_goes_straight_into_and_out_of_the_slice() {
        let fd = host::memfd_with(b"hello world").expect("memfd");
        let mut mem = [0u8; 5];
        let s = over(&mut mem);
        use std::os::fd::AsFd;
        assert_eq!(s.pread_from(fd.as_fd(), 6).expect("pread"), 5);
        assert_eq!(s.pwrite_to(fd.as_fd(), 0).expect("pwrite"), 5);
        let mut back = [0u8; 11];
        assert_eq!(host::pread(fd.as_fd(), &mut back, 0).expect("pread"), 11);
        assert_eq!(&back, b"world world");
        assert_eq!(mem, *b"world");
    }

    #[test]
    fn slices_walk_with_a_skip() {
        let (mut a, mut b) = ([0u8; 2], [0u8; 3]);
        let s = [over(&mut a), over(&mut b)];
        assert_eq!(copy_to_slices_at(&s, 1, &[7, 8, 9]), 3);
        assert_eq!(copy_to_slices(&s, &[1]), 1);
        let mut out = [0u8; 4];
        assert_eq!(copy_from_slices_at(&s, 1, &mut out), 4);
        assert_eq!(out, [7, 8, 9, 0]);
        assert_eq!(copy_from_slices(&s, &mut out[..2]), 2);
        assert_eq!(out[..2], [1, 7]);
        assert_eq!((a, b), ([1, 7], [8, 9, 0]));
    }
}
