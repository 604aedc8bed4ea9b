//! An address space in a sandbox image (`do --save`, `do --restore`): each
//! VMA's range, protection and backing, and the pages it holds of its own,
//! zero pages left out. A private file mapping is saved by its guest path
//! and rebuilt from that file (whose identity the caller checks), so pages
//! still shared with the file's image cost the image nothing.
//!
//! The pages themselves go to the image's page area (page-aligned in its
//! file), each VMA naming its pages' slots there; a restore maps that area
//! and shares it until the guest writes ([`crate::mm::BasePages`]).
//!
//! [`Enc`] and [`Dec`] are the image's little-endian encoding; [`Dec`]
//! reads untrusted bytes and fails, never panics, on any that do not fit.

use std::sync::Arc;

use platform::Prot;

use crate::mm::fileimage::FileImage;
use crate::mm::{Backing, BasePages, Mappable, MemoryManager, SharedRegion};
use crate::PAGE_SIZE;

/// Appends values to an image.
#[derive(Default)]
pub struct Enc {
    /// the bytes so far
    pub buf: Vec<u8>,
}

impl Enc {
    /// One byte.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// A length, then the bytes.
    pub fn bytes(&mut self, v: &[u8]) {
        self.u64(v.len() as u64);
        self.buf.extend_from_slice(v);
    }
}

/// Reads values back, checking every length against what is left.
pub struct Dec<'a> {
    data: &'a [u8],
}

/// What is wrong with an image, in words for its user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bad(pub String);

impl std::fmt::Display for Bad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A [`Bad`] saying `what`.
pub fn bad<T>(what: impl Into<String>) -> Result<T, Bad> {
    Err(Bad(what.into()))
}

impl<'a> Dec<'a> {
    /// A reader of `data`.
    pub fn new(data: &'a [u8]) -> Dec<'a> {
        Dec { data }
    }

    /// How many bytes are left to read.
    pub fn left(&self) -> usize {
        self.data.len()
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Bad> {
        if n > self.data.len() {
            return bad("the image is truncated");
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Ok(head)
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8, Bad> {
        Ok(self.take(1)?[0])
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self) -> Result<u32, Bad> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> Result<u64, Bad> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }

    /// A count of items each at least `min` bytes long, checked against
    /// what is left (so a huge count cannot make the reader allocate).
    pub fn count(&mut self, min: usize) -> Result<usize, Bad> {
        let n = self.u64()?;
        if n.saturating_mul(min.max(1) as u64) > self.data.len() as u64 {
            return bad("the image is truncated");
        }
        Ok(n as usize)
    }

    /// A length, then that many bytes.
    pub fn bytes(&mut self) -> Result<&'a [u8], Bad> {
        let n = self.count(1)?;
        self.take(n)
    }

    /// The same as a string.
    pub fn string(&mut self) -> Result<String, Bad> {
        String::from_utf8(self.bytes()?.to_vec()).or_else(|_| bad("a name is not UTF-8"))
    }

    /// Whether everything was read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// What a VMA maps, as the image keeps it.
const KIND_ANON: u8 = 0;
const KIND_FILE: u8 = 1;
const KIND_TIME: u8 = 2;

/// Where a restore finds the image's page area: at memory-file offset
/// `at` (the window), `pages` pages; `share`: the platform maps the window
/// too, so restored memory may share it (else each page is copied).
#[derive(Clone, Copy, Debug)]
pub struct PageArea {
    /// the window's first offset
    pub at: u64,
    /// pages in the area
    pub pages: u64,
    /// whether restored memory shares the area's pages
    pub share: bool,
}

/// The largest file whose image a sandbox image holds whole (a larger
/// one is read from the host again at restore).
const MAX_SAVED_IMAGE: u64 = 64 << 20;

/// A file's image that private mappings share, with the file's guest
/// path and the file.
pub type UsedImage = (String, Arc<dyn Mappable>, Arc<FileImage>);

/// Writes the images in `used` (of files no larger than
/// [`MAX_SAVED_IMAGE`]) to `out`, their pages to the page area `pages`:
/// a restore then shares them with every copy instead of reading the
/// files again.
pub fn save_file_images(
    used: &[UsedImage],
    out: &mut Enc,
    pages: &mut Vec<u8>,
    files: &dyn Files,
) -> Result<(), String> {
    let kept: Vec<_> = used
        .iter()
        .filter(|(_, _, img)| img.len() <= MAX_SAVED_IMAGE)
        .collect();
    out.u64(kept.len() as u64);
    for (name, file, img) in kept {
        img.fill(&**file, 0, img.len())
            .map_err(|e| format!("reading {name}: {e}"))?;
        out.bytes(name.as_bytes());
        out.bytes(&files.describe(name, file)?);
        out.u64(pages.len() as u64 / PAGE_SIZE);
        out.u64(img.len() / PAGE_SIZE);
        let at = pages.len();
        pages.resize(at + img.len() as usize, 0);
        img.read_all(&mut pages[at..]);
    }
    Ok(())
}

/// A mapped file found again, and its image for private mappings.
pub type Found = (Arc<dyn Mappable>, Option<Arc<FileImage>>);

/// What the caller knows of a file a mapping maps, to find it again.
pub trait Files {
    /// Where the mapped file is in the guest, and what identifies its
    /// contents (size, modification time), written to the image.
    fn describe(&self, name: &str, file: &Arc<dyn Mappable>) -> Result<Vec<u8>, String>;
    /// The file at guest path `name`, checked against `identity` (from
    /// [`Files::describe`]), and its image for private mappings.
    fn find(&self, name: &str, identity: &[u8]) -> Result<Found, String>;
}

fn prot_bits(p: Prot) -> u8 {
    u8::from(p.read) | u8::from(p.write) << 1 | u8::from(p.exec) << 2
}

fn prot_of(b: u8) -> Prot {
    Prot {
        read: b & 1 != 0,
        write: b & 2 != 0,
        exec: b & 4 != 0,
    }
}

impl MemoryManager {
    /// Writes this address space to `out`, its pages to the page area
    /// `pages`. `time` is the sandbox's time page, mapped in every process
    /// and made anew at restore. What the image cannot hold yet (shared
    /// memory) is refused in words.
    pub fn save(
        &self,
        out: &mut Enc,
        pages: &mut Vec<u8>,
        time: &Arc<SharedRegion>,
        files: &dyn Files,
    ) -> Result<(), String> {
        for w in [
            self.brk_start,
            self.brk,
            self.mmap_top,
            u64::from(self.heap_offset.is_some()),
        ] {
            out.u64(w);
        }
        let (stack, vdso) = (self.stack.unwrap_or((0, 0)), self.vdso.unwrap_or(0));
        for w in [stack.0, stack.1, vdso] {
            out.u64(w);
        }
        out.u64(self.vmas.len() as u64);
        let mut page = vec![0u8; PAGE_SIZE as usize];
        for v in self.vmas.values() {
            out.u64(v.start);
            out.u64(v.end);
            out.u8(prot_bits(v.prot));
            out.u8(u8::from(v.heap)
                | u8::from(v.may_write) << 1
                | u8::from(v.sealed) << 2
                | u8::from(v.shared) << 3
                // (set for a file on a noexec mount: images made before
                // this bit read as executable, as they were)
                | u8::from(!v.may_exec) << 4);
            out.u64(v.sigbus_from.unwrap_or(0));
            match &v.backing {
                Backing::Shared(r) if Arc::ptr_eq(r, time) => {
                    out.u8(KIND_TIME);
                    // Its pages are the sandbox's, not the process's.
                    out.u64(0);
                    continue;
                }
                Backing::Shared(_) => {
                    return Err(format!(
                        "the shared mapping at {:#x}-{:#x} (shared memory is not saved yet)",
                        v.start, v.end
                    ))
                }
                Backing::Anon if v.shared => {
                    return Err(format!(
                        "the shared mapping at {:#x}-{:#x} (shared memory is not saved yet)",
                        v.start, v.end
                    ))
                }
                Backing::Anon => out.u8(KIND_ANON),
                Backing::File { .. } if v.shared && v.may_write => {
                    return Err(format!(
                        "the writable shared mapping of a file at {:#x}-{:#x} (not saved yet)",
                        v.start, v.end
                    ))
                }
                Backing::File {
                    file,
                    pos,
                    avail,
                    name,
                    image,
                } => {
                    out.u8(KIND_FILE);
                    out.bytes(name.as_bytes());
                    out.bytes(&files.describe(name, file)?);
                    out.u64(*pos);
                    out.u64(*avail);
                    out.u8(u8::from(image.is_some() && v.image_pages.is_some()));
                }
            }
            // The pages the VMA holds of its own: populated ones that are
            // not its file's image's, and not all zeros; and those it still
            // shares with the image it was restored from.
            // (walked run by run: a huge reservation holds few pages)
            let mut own = Vec::new();
            self.mf.for_each_data(v.offset, v.end - v.start, |s, e| {
                let first = (s - v.offset) / PAGE_SIZE;
                let last = (e - v.offset).div_ceil(PAGE_SIZE);
                own.extend((first..last).filter(|&i| {
                    v.image_pages.as_ref().is_none_or(|p| !p.get(i))
                        && v.sigbus_from.is_none_or(|b| v.start + i * PAGE_SIZE < b)
                }));
            });
            if let (Some(b), Some(p)) = (&v.base, &v.image_pages) {
                let n = (v.end - v.start) / PAGE_SIZE;
                own.extend(b.pages().filter(|&i| i < n && p.get(i)));
                own.sort_unstable();
            }
            let mut kept = Vec::new();
            for i in own {
                let (off, _) = v.locate(v.start + i * PAGE_SIZE);
                self.mf.read(off, &mut page);
                if page.iter().any(|&b| b != 0) {
                    kept.push((i, page.clone()));
                }
            }
            if v.prot.exec {
                self.unpatch(&mut kept);
            }
            out.u64(kept.len() as u64);
            for (i, data) in kept {
                out.u64(i);
                out.u64((pages.len() as u64) / PAGE_SIZE);
                pages.extend_from_slice(&data);
            }
        }
        Ok(())
    }

    /// Adds to `used` the files' images that this address space's private
    /// mappings share pages with, each once.
    pub fn file_images(&self, used: &mut Vec<UsedImage>) {
        for v in self.vmas.values() {
            if let (
                Backing::File {
                    file,
                    name,
                    image: Some(img),
                    ..
                },
                Some(_),
            ) = (&v.backing, &v.image_pages)
            {
                if !used.iter().any(|(_, _, i)| Arc::ptr_eq(i, img)) {
                    used.push((name.clone(), file.clone(), img.clone()));
                }
            }
        }
    }

    /// Puts back the code of every patched system call site in `pages`
    /// (numbered pages of one VMA, in order): a patch points into this
    /// platform's tables, which a restored sandbox does not have.
    fn unpatch(&self, pages: &mut [(u64, Vec<u8>)]) {
        let ps = PAGE_SIZE as usize;
        for k in 0..pages.len() {
            // A site may run on into the next page (which is then the
            // mapping's own too: patching made both its own).
            let next = pages
                .get(k + 1)
                .filter(|(j, _)| *j == pages[k].0 + 1)
                .map(|(_, d)| d[..6].to_vec());
            for o in 0..ps {
                if pages[k].1[o] != 0xff {
                    continue;
                }
                let mut w = [0u8; 7];
                for (n, b) in w.iter_mut().enumerate() {
                    *b = match (o + n < ps, &next) {
                        (true, _) => pages[k].1[o + n],
                        (false, Some(nx)) => nx[o + n - ps],
                        (false, None) => 0,
                    };
                }
                if !super::is_patch(&w) {
                    continue;
                }
                let Some(code) = self.space.unpatched(w) else {
                    continue;
                };
                for (n, b) in code.iter().enumerate() {
                    if o + n < ps {
                        pages[k].1[o + n] = *b;
                    } else if let Some((_, d)) = pages.get_mut(k + 1) {
                        d[o + n - ps] = *b;
                    }
                }
            }
        }
    }

    /// Rebuilds the address space [`MemoryManager::save`] wrote into this
    /// empty one, with `time` as the time page and its pages in `area`.
    pub fn restore(
        &mut self,
        inp: &mut Dec<'_>,
        area: PageArea,
        time: &Arc<SharedRegion>,
        files: &dyn Files,
    ) -> Result<(), String> {
        let err = |e: Bad| e.0;
        let brk_start = inp.u64().map_err(err)?;
        let brk = inp.u64().map_err(err)?;
        let mmap_top = inp.u64().map_err(err)?;
        let has_heap = inp.u64().map_err(err)? != 0;
        let stack = (inp.u64().map_err(err)?, inp.u64().map_err(err)?);
        let vdso = inp.u64().map_err(err)?;
        let user = self.user_range();
        let in_range = |a: u64| a >= user.start && a <= user.end && a.is_multiple_of(PAGE_SIZE);
        if has_heap {
            if !in_range(brk_start & !(PAGE_SIZE - 1)) || brk < brk_start {
                return Err("the image's heap is out of range".into());
            }
            self.init_brk(brk_start)
                .map_err(|e| format!("the heap: {e}"))?;
            if self.brk(brk) != brk {
                return Err("the image's heap cannot be rebuilt".into());
            }
        }
        self.mmap_top = mmap_top.min(self.max_addr);
        if stack != (0, 0) {
            self.stack = Some(stack);
        }
        if vdso != 0 {
            self.vdso = Some(vdso);
        }
        let n = inp.count(26).map_err(err)?;
        for _ in 0..n {
            let start = inp.u64().map_err(err)?;
            let end = inp.u64().map_err(err)?;
            let prot = prot_of(inp.u8().map_err(err)?);
            let flags = inp.u8().map_err(err)?;
            let sigbus_from = inp.u64().map_err(err)?;
            let (heap, may_write, sealed) = (flags & 1 != 0, flags & 2 != 0, flags & 4 != 0);
            let may_exec = flags & 16 == 0;
            // (a shared mapping of a file that can never be written: its
            // pages are the file's)
            let shared = flags & 8 != 0 && !may_write;
            if !in_range(start) || !in_range(end) || end <= start {
                return Err(format!("a mapping at {start:#x}-{end:#x} is out of range"));
            }
            let kind = inp.u8().map_err(err)?;
            let len = end - start;
            match kind {
                KIND_TIME => {
                    if len != time.len() {
                        return Err("the image's time page has another size".into());
                    }
                    self.map_region(start, len, prot, time.clone(), 0)
                        .map_err(|e| format!("the time page: {e}"))?;
                }
                KIND_ANON if heap => {
                    // The heap was rebuilt above by `brk`; only its
                    // protection may differ.
                    if !self.covers(start, end) {
                        return Err("the image's heap has a mapping outside it".into());
                    }
                    if prot != Prot::RW {
                        self.protect(start, end, prot)
                            .map_err(|e| format!("the heap's protection: {e}"))?;
                    }
                }
                KIND_ANON => self
                    .map_fixed(start, len, prot, false, Backing::Anon)
                    .map_err(|e| format!("the mapping at {start:#x}: {e}"))?,
                KIND_FILE => {
                    let name = inp.string().map_err(err)?;
                    let identity = inp.bytes().map_err(err)?;
                    let pos = inp.u64().map_err(err)?;
                    let avail = inp.u64().map_err(err)?;
                    let shared_image = inp.u8().map_err(err)? != 0;
                    let (file, image) = files.find(&name, identity)?;
                    let backing = Backing::File {
                        file,
                        pos,
                        avail,
                        name: name.clone(),
                        image: image.filter(|_| shared_image),
                    };
                    self.map_fixed(start, len, prot, shared, backing)
                        .map_err(|e| format!("{name} mapped at {start:#x}: {e}"))?;
                }
                _ => return Err("the image holds a mapping of an unknown kind".into()),
            }
            let limits = (may_write, may_exec);
            self.set_limits(start, limits, (sigbus_from != 0).then_some(sigbus_from));
            if sealed {
                self.seal(start, end)
                    .map_err(|e| format!("sealing {start:#x}: {e}"))?;
            }
            let n = inp.count(16).map_err(err)?;
            let mut slots = Vec::with_capacity(n);
            for _ in 0..n {
                let i = inp.u64().map_err(err)?;
                let slot = inp.u64().map_err(err)?;
                if i >= len / PAGE_SIZE || slots.last().is_some_and(|&(j, _)| j >= i) {
                    return Err(
                        "the image holds a page outside its mapping, or out of order".into(),
                    );
                }
                if slot >= area.pages {
                    return Err("the image names a page past its page area".into());
                }
                slots.push((i, area.at + slot * PAGE_SIZE));
            }
            if slots.is_empty() {
                continue;
            }
            let shared_base = area.share
                && self.covers(start, end)
                && self
                    .find_vma(start)
                    .is_some_and(|v| !v.shared && v.image_pages.is_none());
            if shared_base {
                self.share_base(start, end, BasePages::new(slots))
                    .map_err(|e| format!("the pages at {start:#x}: {e}"))?;
                continue;
            }
            // Copies, a run of pages at once (each store to a file's image
            // maps the run's copy into the guest anew).
            let mut k = 0;
            while k < slots.len() {
                let mut j = k + 1;
                while j < slots.len() && slots[j].0 == slots[j - 1].0 + 1 {
                    j += 1;
                }
                let ps = PAGE_SIZE as usize;
                let mut run = vec![0u8; (j - k) * ps];
                for (n, &(_, off)) in slots[k..j].iter().enumerate() {
                    self.mf.read(off, &mut run[n * ps..(n + 1) * ps]);
                }
                let at = start + slots[k].0 * PAGE_SIZE;
                self.poke(at, &run)
                    .map_err(|e| format!("the pages at {at:#x}: {e}"))?;
                k = j;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reader_refuses_what_is_not_there() {
        let mut e = Enc::default();
        e.u64(7);
        e.bytes(b"abc");
        let mut d = Dec::new(&e.buf);
        assert_eq!(d.u64(), Ok(7));
        assert_eq!(d.bytes(), Ok(&b"abc"[..]));
        assert!(d.is_empty());
        assert!(d.u8().is_err());
        // A length far past the end is refused before anything is taken.
        let mut e = Enc::default();
        e.u64(u64::MAX);
        assert!(Dec::new(&e.buf).bytes().is_err());
        assert!(Dec::new(&e.buf).count(4096).is_err());
    }
}
