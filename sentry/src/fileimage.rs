//! Images of the root's files for private mappings: one copy of a file's
//! bytes in the memory file, shared copy-on-write by every private mapping
//! of it.
//!
//! A private file mapping used to be a private copy of the mapped bytes,
//! read from the host when it was made. Every `execve` then read `ld.so`,
//! the C library and the program in full into memory of its own, and
//! every `fork` copied what had been read. For a file of the root's
//! read-only image (which the sandbox cannot change: writes go to the
//! overlay's upper layer) the Sentry now keeps one *image*: memory-file
//! pages holding the file's bytes, read from the host once, page by page
//! as mappings need them. A private mapping maps the image's pages into
//! the guest without write access; the first store to a page (a write
//! fault, or the Sentry writing guest memory for a system call) copies
//! that page into the mapping's own memory and maps the copy in its place
//! (see [`crate::mm`]).
//!
//! An image lives as long as a mapping uses it (the file's descriptor in
//! the Sentry finds it again meanwhile). If the host changes the file (its
//! size or times differ from the image's), the next mapping gets a new
//! image; mappings made before keep the old one, as they kept their
//! private copies before.
//!
use std::sync::{Arc, Mutex, Weak};

use abi::Errno;

use crate::memfile::MemoryFile;
use crate::vfs::HostFile;
use crate::PAGE_SIZE;

/// Files larger than this get private copies: their image's offsets would
/// take too much of the memory file's offset space.
const MAX_IMAGE: u64 = 1 << 32;

/// What identifies a version of a host file: device, inode, size,
/// modification and change times.
type Stamp = (u64, u64, i64, i64, i64, i64, i64);

fn stamp_of(file: &HostFile) -> Result<Stamp, Errno> {
    let st = crate::host::fstat(file.fd())?;
    Ok((
        st.st_dev,
        st.st_ino,
        st.st_size,
        st.st_mtime,
        st.st_mtime_nsec,
        st.st_ctime,
        st.st_ctime_nsec,
    ))
}

/// The image of one version of a file.
#[derive(Debug)]
pub struct FileImage {
    mf: Arc<MemoryFile>,
    /// memory-file offset of the file's first byte
    off: u64,
    /// offsets reserved: the file's size, in whole pages
    len: u64,
    stamp: Stamp,
    /// one bit per page: read from the host already
    filled: Mutex<Vec<u64>>,
}

impl FileImage {
    /// Memory-file offset of the file's first byte.
    pub fn offset(&self) -> u64 {
        self.off
    }

    /// The file's size when the image was made.
    pub fn size(&self) -> u64 {
        self.stamp.2.max(0) as u64
    }

    /// Makes sure the pages holding `[pos, pos + len)` (clamped to the
    /// file) hold the file's bytes, reading those not read yet from
    /// `file`.
    pub fn fill(&self, file: &HostFile, pos: u64, len: u64) -> Result<(), Errno> {
        let end = pos.saturating_add(len).min(self.len);
        let first = pos / PAGE_SIZE;
        let last = end.div_ceil(PAGE_SIZE);
        let mut filled = self.filled.lock().unwrap_or_else(|e| e.into_inner());
        let is_filled = |bits: &Vec<u64>, p: u64| bits[(p / 64) as usize] & (1 << (p % 64)) != 0;
        let mut p = first;
        while p < last {
            if is_filled(&filled, p) {
                p += 1;
                continue;
            }
            let run = p;
            while p < last && !is_filled(&filled, p) {
                p += 1;
            }
            let (at, n) = (run * PAGE_SIZE, (p - run) * PAGE_SIZE);
            self.mf.fill_from_fd(self.off + at, n, file.fd(), at)?;
            for q in run..p {
                filled[(q / 64) as usize] |= 1 << (q % 64);
            }
        }
        Ok(())
    }
}

impl Drop for FileImage {
    fn drop(&mut self) {
        self.mf.release(self.off, self.len);
    }
}

/// Where a file keeps its image: held weakly, so that the image goes with
/// its last mapping.
#[derive(Debug, Default)]
pub struct ImageSlot(Mutex<Weak<FileImage>>);

impl ImageSlot {
    /// The image of `file` as it is now on the host: the one made before
    /// if the file has not changed since, else a new one (with nothing
    /// read yet). `None` for an empty or very large file (the caller
    /// copies instead).
    pub fn image(
        &self,
        file: &HostFile,
        mf: &Arc<MemoryFile>,
    ) -> Result<Option<Arc<FileImage>>, Errno> {
        let stamp = stamp_of(file)?;
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(img) = slot.upgrade().filter(|i| i.stamp == stamp) {
            return Ok(Some(img));
        }
        let size = stamp.2.max(0) as u64;
        if size == 0 || size > MAX_IMAGE {
            return Ok(None);
        }
        let len = size.div_ceil(PAGE_SIZE) * PAGE_SIZE;
        let img = Arc::new(FileImage {
            mf: mf.clone(),
            off: mf.allocate(len)?,
            len,
            stamp,
            filled: Mutex::new(vec![0; (len / PAGE_SIZE).div_ceil(64) as usize]),
        });
        *slot = Arc::downgrade(&img);
        Ok(Some(img))
    }
}
