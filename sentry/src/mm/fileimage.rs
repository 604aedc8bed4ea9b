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
//! The sandbox's [`Images`] find a file's image by the file's identity and
//! version, whichever descriptor maps it. An image lives as long as a
//! mapping uses it, and also while it is among the images used last, as
//! Linux keeps a file's pages cached after its last mapping goes: a build
//! runs one compiler process after another, each mapping the same large
//! libraries (rustc's driver library and LLVM, some 340 MiB), and each
//! finds them read already instead of reading them again. The images used
//! last hold at most a quarter of the sandbox's memory, and [`MAX_KEPT`]
//! (the Sentry cannot tell when the host runs short of memory, as Linux's
//! reclaim does); the one used longest ago leaves the list first. If the
//! host changes the file (its size or times differ from the image's), the
//! next mapping gets a new image; mappings made before keep the old one,
//! as they kept their private copies before.
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};

use abi::Errno;

use crate::mm::memfile::MemoryFile;
use crate::mm::Mappable;
use crate::sync::Locked;
use crate::PAGE_SIZE;

/// Files larger than this get private copies: their image's offsets would
/// take too much of the memory file's offset space.
const MAX_IMAGE: u64 = 1 << 32;

/// The most bytes of the images used last: room for a compiler's libraries
/// (rustc's driver and LLVM, and the standard library's rlibs, some
/// 500 MiB) and a linker.
const MAX_KEPT: u64 = 1 << 30;

/// What identifies a version of a host file: device, inode, size,
/// modification and change times.
type Stamp = (u64, u64, i64, i64, i64, i64, i64);

fn stamp_of(file: &dyn Mappable) -> Result<Stamp, Errno> {
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
    /// its pages are a restored sandbox image's (in its window, whose
    /// offsets are never given back)
    windowed: bool,
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

    /// Its offsets: the file's size in whole pages.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file is empty (never: such files get no image).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies the image's pages into `out` ([`FileImage::len`] bytes).
    pub fn read_all(&self, out: &mut [u8]) {
        self.mf.read(self.off, &mut out[..self.len as usize]);
    }

    /// Makes sure the pages holding `[pos, pos + len)` (clamped to the
    /// file) hold the file's bytes, reading those not read yet from
    /// `file`.
    pub fn fill(&self, file: &dyn Mappable, pos: u64, len: u64) -> Result<(), Errno> {
        let end = pos.saturating_add(len).min(self.len);
        let first = pos / PAGE_SIZE;
        let last = end.div_ceil(PAGE_SIZE);
        let mut filled = self.filled.locked();
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
        if !self.windowed {
            self.mf.release(self.off, self.len);
        }
    }
}

/// The images of one sandbox's root files: every image a mapping uses,
/// by the file's identity and version, and the images used last, kept
/// after their mappings go (see the module's documentation).
#[derive(Debug)]
pub struct Images {
    inner: Mutex<Kept>,
    /// the most bytes of images the recent list holds
    budget: u64,
}

#[derive(Debug, Default)]
struct Kept {
    /// every image still alive, by its file's stamp
    live: HashMap<Stamp, Weak<FileImage>>,
    /// the images used last, the latest at the back
    recent: VecDeque<Arc<FileImage>>,
    /// their bytes
    recent_bytes: u64,
}

impl Images {
    /// Images of a sandbox with `total_memory` bytes of memory: the images
    /// used last hold at most a quarter of it ([`MAX_KEPT`] at most).
    pub fn new(total_memory: u64) -> Images {
        Images {
            inner: Default::default(),
            budget: (total_memory / 4).min(MAX_KEPT),
        }
    }

    /// The image of `file` as it is now on the host: the one made before
    /// if the file has not changed since, else a new one (with nothing
    /// read yet). `None` for an empty or very large file (the caller
    /// copies instead).
    pub fn image(
        &self,
        file: &dyn Mappable,
        mf: &Arc<MemoryFile>,
    ) -> Result<Option<Arc<FileImage>>, Errno> {
        let stamp = stamp_of(file)?;
        let mut kept = self.inner.locked();
        let img = match kept.live.get(&stamp).and_then(Weak::upgrade) {
            Some(img) => img,
            None => {
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
                    windowed: false,
                });
                // Entries of images gone are dropped before the map could
                // outgrow the images alive.
                if kept.live.len() >= 64 + 2 * kept.recent.len() {
                    kept.live.retain(|_, w| w.strong_count() > 0);
                }
                kept.live.insert(stamp, Arc::downgrade(&img));
                img
            }
        };
        kept.remember(img.clone(), self.budget);
        Ok(Some(img))
    }

    /// Makes the `len` bytes at memory-file offset `off` (in a restored
    /// sandbox image's window, holding `file`'s bytes as they are now) the
    /// image of `file`, all read, in place of any made before.
    pub fn adopt(
        &self,
        file: &dyn Mappable,
        mf: &Arc<MemoryFile>,
        off: u64,
        len: u64,
    ) -> Result<(), Errno> {
        let stamp = stamp_of(file)?;
        let size = stamp.2.max(0) as u64;
        if size == 0 || size.div_ceil(PAGE_SIZE) * PAGE_SIZE != len {
            return Err(Errno::EINVAL);
        }
        let pages = len / PAGE_SIZE;
        let mut filled = vec![0u64; pages.div_ceil(64) as usize];
        for p in 0..pages {
            filled[(p / 64) as usize] |= 1 << (p % 64);
        }
        let img = Arc::new(FileImage {
            mf: mf.clone(),
            off,
            len,
            stamp,
            filled: Mutex::new(filled),
            windowed: true,
        });
        let mut kept = self.inner.locked();
        kept.recent.retain(|r| r.stamp != stamp);
        kept.recent_bytes = kept.recent.iter().map(|r| r.len).sum();
        kept.live.insert(stamp, Arc::downgrade(&img));
        kept.remember(img, self.budget);
        Ok(())
    }

    /// Bytes of the images kept among the recent ones.
    pub fn recent_bytes(&self) -> u64 {
        self.inner.locked().recent_bytes
    }
}

impl Kept {
    /// Puts `img` at the back of the recent list, and lets the images used
    /// longest ago go while the list holds more than `budget` bytes.
    fn remember(&mut self, img: Arc<FileImage>, budget: u64) {
        if let Some(i) = self.recent.iter().position(|r| Arc::ptr_eq(r, &img)) {
            if let Some(r) = self.recent.remove(i) {
                self.recent_bytes -= r.len;
            }
        }
        self.recent_bytes += img.len;
        self.recent.push_back(img);
        while self.recent_bytes > budget {
            match self.recent.pop_front() {
                Some(r) => self.recent_bytes -= r.len,
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::mm::TestFile;

    fn images_of(f: &TestFile) -> &Arc<Images> {
        f.images.as_ref().expect("a file of the root's image")
    }

    fn file_with(data: &[u8], images: &Arc<Images>) -> (TestFile, std::fs::File) {
        let fd = crate::host::memfd_with(data).expect("memfd");
        let writer = std::fs::File::from(fd.try_clone().expect("dup"));
        (TestFile::new(fd, Some(images.clone())), writer)
    }

    fn image_of(file: &TestFile, mf: &Arc<MemoryFile>) -> Arc<FileImage> {
        images_of(file)
            .image(file, mf)
            .expect("fstat")
            .expect("an image")
    }

    fn memory_file() -> Arc<MemoryFile> {
        Arc::new(MemoryFile::new().expect("memory file"))
    }

    #[test]
    fn an_image_outlives_its_last_mapping_with_its_pages_read() {
        let mf = memory_file();
        let images = Arc::new(Images::new(1 << 30));
        let data = vec![7u8; 3 * PAGE_SIZE as usize];
        let (file, _w) = file_with(&data, &images);
        let img = image_of(&file, &mf);
        img.fill(&file, 0, data.len() as u64).expect("fill");
        let kept = Arc::downgrade(&img);
        drop(img);
        // No mapping holds it now: the next one still finds it, filled.
        let again = image_of(&file, &mf);
        assert!(Arc::ptr_eq(&again, &kept.upgrade().expect("kept")));
        assert!(again.filled.lock().expect("lock")[0] & 0b111 == 0b111);
        let mut back = vec![0u8; data.len()];
        mf.read(again.offset(), &mut back);
        assert_eq!(back, data);
    }

    #[test]
    fn an_adopted_image_is_found_read_and_keeps_its_offsets() {
        let mf = memory_file();
        let images = Arc::new(Images::new(1 << 30));
        let data = vec![5u8; PAGE_SIZE as usize + 10];
        let (file, _w) = file_with(&data, &images);
        let off = mf.allocate(2 * PAGE_SIZE).expect("offsets");
        mf.write(off, &data);
        // A length that is not the file's, in whole pages: refused.
        assert_eq!(images.adopt(&file, &mf, off, PAGE_SIZE), Err(Errno::EINVAL));
        images
            .adopt(&file, &mf, off, 2 * PAGE_SIZE)
            .expect("adopted");
        let img = image_of(&file, &mf);
        assert_eq!(img.offset(), off);
        assert!(img.filled.lock().expect("lock")[0] & 0b11 == 0b11);
        drop(img);
        drop(images);
        // Its offsets were never given back: the next allocation is elsewhere.
        assert_ne!(mf.allocate(2 * PAGE_SIZE).expect("more"), off);
    }

    #[test]
    fn every_open_of_one_file_finds_the_same_image() {
        let mf = memory_file();
        let images = Arc::new(Images::new(1 << 30));
        let (file, _w) = file_with(b"shared bytes", &images);
        let fd = file.fd().try_clone_to_owned().expect("dup");
        let other = TestFile::new(fd, Some(images.clone()));
        let a = image_of(&file, &mf);
        let b = image_of(&other, &mf);
        assert!(Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn a_changed_file_gets_a_new_image() {
        let mf = memory_file();
        let images = Arc::new(Images::new(1 << 30));
        let (file, mut w) = file_with(b"first", &images);
        let old = image_of(&file, &mf);
        w.write_all(b" and more").expect("write");
        let new = image_of(&file, &mf);
        assert!(!Arc::ptr_eq(&old, &new));
        assert_eq!(new.size(), 14);
    }

    #[test]
    fn images_kept_unmapped_stay_within_their_budget() {
        let mf = memory_file();
        // A budget of two pages.
        let images = Arc::new(Images::new(8 * PAGE_SIZE));
        let files: Vec<_> = (0..3u8)
            .map(|i| file_with(&vec![i; PAGE_SIZE as usize], &images))
            .collect();
        let kept: Vec<_> = files
            .iter()
            .map(|(f, _)| Arc::downgrade(&image_of(f, &mf)))
            .collect();
        assert_eq!(images.recent_bytes(), 2 * PAGE_SIZE);
        // The one used longest ago went; the last two stay.
        assert!(kept[0].upgrade().is_none());
        assert!(kept[1].upgrade().is_some() && kept[2].upgrade().is_some());
        // Using the older of the two makes the newer the next to go.
        image_of(&files[1].0, &mf);
        image_of(&files[0].0, &mf);
        assert!(kept[2].upgrade().is_none());
        assert!(kept[1].upgrade().is_some());
        // An image mapped still is found even when it is not kept.
        let big = file_with(&vec![9u8; 3 * PAGE_SIZE as usize], &images);
        let held = image_of(&big.0, &mf);
        assert!(images.recent_bytes() <= 2 * PAGE_SIZE);
        assert!(Arc::ptr_eq(&held, &image_of(&big.0, &mf)));
    }
}
