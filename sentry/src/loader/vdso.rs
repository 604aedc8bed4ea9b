//! The Sentry's own vDSO: the small shared object Linux maps into every
//! process and names in the auxiliary vector (`AT_SYSINFO_EHDR`), where glibc
//! and musl look up `__vdso_clock_gettime`, `__vdso_gettimeofday`,
//! `__vdso_time`, `__vdso_getcpu` and `__vdso_clock_getres` (version
//! `LINUX_2.6`, see vdso(7)).
//!
//! The image is built from `sentry/vdso/` by `build.rs`, which also checks it.
//! `clock_gettime`, `gettimeofday` and `time` compute the time from the TSC
//! and the time page of [`crate::loader::vdso_time`], which sits one page below the
//! image; `getcpu` answers CPU 0, node 0, like the Sentry's getcpu(2). What
//! the page cannot answer (CPU-time clocks, `clock_getres`, a page marked
//! invalid) issues the real `syscall` instruction, which the platform traps
//! like any other guest syscall.
//!
//! [`install`] gives both to a guest: the time page read-only, then
//! [`size_pages`] pages holding the whole of [`image`] (its one PT_LOAD
//! starts at address 0 and file offsets equal addresses, so the file *is* the
//! memory image, and it needs no relocation) read+execute. Its base goes in
//! `AT_SYSINFO_EHDR`.

use abi::Errno;
use platform::Prot;

use crate::loader::vdso_time::{TimeKeeper, VVAR_SIZE};
use crate::mm::{Backing, MemoryManager};
use crate::PAGE_SIZE;

// The layout (`SIZE_PAGES`) is read from the image's program headers by
// build.rs, which has already rejected an image that breaks the rules above.
mod layout {
    include!(concat!(env!("OUT_DIR"), "/vdso_layout.rs"));
}

static IMAGE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/vdso.so"));

/// The vDSO's ELF file, to be copied byte for byte to the base of its mapping.
pub fn image() -> &'static [u8] {
    IMAGE
}

/// Pages to map for the vDSO: its PT_LOAD extent rounded up to whole pages,
/// which also covers the whole of [`image`].
pub fn size_pages() -> u64 {
    layout::SIZE_PAGES
}

/// Maps `time`'s page and, right above it, the vDSO into `mm` at an address
/// of `mm`'s choosing, and returns the vDSO's base (for `AT_SYSINFO_EHDR`
/// and [`MemoryManager::set_special`]).
///
/// The time page is shared with every other guest and the Sentry, read-only,
/// and `mprotect(2)` may not make it writable (`EACCES`, as for Linux's
/// vvar): one guest must not be able to set another's clocks. The image is a
/// private copy per address space, as before.
pub fn install(mm: &mut MemoryManager, time: &TimeKeeper) -> Result<u64, Errno> {
    let image_len = size_pages() * PAGE_SIZE;
    let start = mm.pick_address(0, VVAR_SIZE + image_len)?;
    let read_only = Prot {
        read: true,
        write: false,
        exec: false,
    };
    mm.map_region(start, VVAR_SIZE, read_only, time.region().clone(), 0)?;
    mm.set_limits(start, (false, true), None);
    let base = start + VVAR_SIZE;
    let rx = Prot {
        read: true,
        write: false,
        exec: true,
    };
    let mapped = mm
        .map_fixed(base, image_len, rx, false, Backing::Anon)
        .and_then(|()| mm.poke(base, image()));
    if let Err(e) = mapped {
        mm.unmap_range(start, base + image_len)?;
        return Err(e);
    }
    Ok(base)
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi::{elf, Elf64Ehdr, Elf64Phdr};
    use zerocopy::{FromBytes, Immutable, KnownLayout};

    // ELF structures the loader does not need, so `abi` does not have them
    // (elf(5)).
    #[derive(Clone, Copy, Debug, FromBytes, Immutable, KnownLayout)]
    #[repr(C)]
    struct Elf64Shdr {
        name: u32,
        kind: u32,
        flags: u64,
        addr: u64,
        offset: u64,
        size: u64,
        link: u32,
        info: u32,
        addralign: u64,
        entsize: u64,
    }
    const _: () = assert!(core::mem::size_of::<Elf64Shdr>() == 64);

    #[derive(Clone, Copy, Debug, FromBytes, Immutable, KnownLayout)]
    #[repr(C)]
    struct Elf64Dyn {
        tag: u64,
        val: u64,
    }
    const _: () = assert!(core::mem::size_of::<Elf64Dyn>() == 16);

    #[derive(Clone, Copy, Debug, FromBytes, Immutable, KnownLayout)]
    #[repr(C)]
    struct Elf64Sym {
        name: u32,
        info: u8,
        other: u8,
        shndx: u16,
        value: u64,
        size: u64,
    }
    const _: () = assert!(core::mem::size_of::<Elf64Sym>() == 24);

    #[derive(Clone, Copy, Debug, FromBytes, Immutable, KnownLayout)]
    #[repr(C)]
    struct Elf64Verdef {
        version: u16,
        flags: u16,
        ndx: u16,
        cnt: u16,
        hash: u32,
        aux: u32,
        next: u32,
    }
    const _: () = assert!(core::mem::size_of::<Elf64Verdef>() == 20);

    #[derive(Clone, Copy, Debug, FromBytes, Immutable, KnownLayout)]
    #[repr(C)]
    struct Elf64Verdaux {
        name: u32,
        next: u32,
    }
    const _: () = assert!(core::mem::size_of::<Elf64Verdaux>() == 8);

    const PT_DYNAMIC: u32 = 2;
    const SHT_RELA: u32 = 4;
    const SHT_REL: u32 = 9;
    const SHT_RELR: u32 = 19;
    const DT_NULL: u64 = 0;
    const DT_PLTRELSZ: u64 = 2;
    const DT_HASH: u64 = 4;
    const DT_STRTAB: u64 = 5;
    const DT_SYMTAB: u64 = 6;
    const DT_RELA: u64 = 7;
    const DT_RELASZ: u64 = 8;
    const DT_REL: u64 = 17;
    const DT_RELSZ: u64 = 18;
    const DT_TEXTREL: u64 = 22;
    const DT_JMPREL: u64 = 23;
    const DT_RELRSZ: u64 = 35;
    const DT_RELR: u64 = 36;
    const DT_GNU_HASH: u64 = 0x6fff_fef5;
    const DT_VERSYM: u64 = 0x6fff_fff0;
    const DT_VERDEF: u64 = 0x6fff_fffc;
    const STT_FUNC: u8 = 2;
    const VERSYM_HIDDEN: u16 = 0x8000;

    /// The names glibc and Linux's vDSO export, `__vdso_*` and plain.
    const FUNCTIONS: [&str; 5] = [
        "clock_gettime",
        "gettimeofday",
        "time",
        "getcpu",
        "clock_getres",
    ];

    fn at<T: FromBytes>(off: u64) -> T {
        let start = usize::try_from(off).expect("offset fits usize");
        let bytes = image().get(start..).expect("offset inside the image");
        T::read_from_prefix(bytes)
            .expect("structure inside the image")
            .0
    }

    fn cstr(off: u64) -> &'static str {
        let start = usize::try_from(off).expect("offset fits usize");
        let rest = image().get(start..).expect("string inside the image");
        let len = rest.iter().position(|&c| c == 0).expect("NUL-terminated");
        std::str::from_utf8(&rest[..len]).expect("UTF-8 name")
    }

    fn ehdr() -> Elf64Ehdr {
        at(0)
    }

    fn phdrs() -> Vec<Elf64Phdr> {
        let eh = ehdr();
        assert_eq!(usize::from(eh.phentsize), size_of::<Elf64Phdr>());
        (0..u64::from(eh.phnum))
            .map(|i| at(eh.phoff + i * u64::from(eh.phentsize)))
            .collect()
    }

    fn shdrs() -> Vec<Elf64Shdr> {
        let eh = ehdr();
        (0..u64::from(eh.shnum))
            .map(|i| at(eh.shoff + i * u64::from(eh.shentsize)))
            .collect()
    }

    /// The dynamic section's entries, up to DT_NULL.
    fn dynamic() -> Vec<Elf64Dyn> {
        let ph = phdrs()
            .into_iter()
            .find(|ph| ph.kind == PT_DYNAMIC)
            .expect("PT_DYNAMIC");
        (0..ph.filesz / 16)
            .map(|i| at::<Elf64Dyn>(ph.offset + i * 16))
            .take_while(|d| d.tag != DT_NULL)
            .collect()
    }

    /// The value of a dynamic tag. Addresses are also file offsets here.
    fn dyn_val(tag: u64) -> Option<u64> {
        dynamic().into_iter().find(|d| d.tag == tag).map(|d| d.val)
    }

    fn sym(index: u32) -> Elf64Sym {
        at(dyn_val(DT_SYMTAB).expect("DT_SYMTAB") + u64::from(index) * 24)
    }

    fn sym_name(s: &Elf64Sym) -> &'static str {
        cstr(dyn_val(DT_STRTAB).expect("DT_STRTAB") + u64::from(s.name))
    }

    /// The SysV hash of elf(5), used by DT_HASH and by version definitions.
    fn sysv_hash(name: &str) -> u32 {
        name.bytes().fold(0u32, |h, c| {
            let h = (h << 4).wrapping_add(u32::from(c));
            let g = h & 0xf000_0000;
            (h ^ (g >> 24)) & !g
        })
    }

    fn gnu_hash(name: &str) -> u32 {
        name.bytes().fold(5381u32, |h, c| {
            h.wrapping_mul(33).wrapping_add(u32::from(c))
        })
    }

    /// Looks `name` up the way a SysV dynamic loader does, through DT_HASH.
    fn lookup_sysv(name: &str) -> Option<u32> {
        let table = dyn_val(DT_HASH).expect("DT_HASH");
        let word = |i: u64| at::<u32>(table + 4 * i);
        let (nbucket, nchain) = (u64::from(word(0)), u64::from(word(1)));
        let mut index = word(2 + u64::from(sysv_hash(name)) % nbucket);
        while index != 0 {
            if sym_name(&sym(index)) == name {
                return Some(index);
            }
            index = word(2 + nbucket + u64::from(index));
            assert!(u64::from(index) < nchain, "DT_HASH chain out of range");
        }
        None
    }

    /// Looks `name` up the way glibc does, through DT_GNU_HASH and its Bloom
    /// filter.
    fn lookup_gnu(name: &str) -> Option<u32> {
        let table = dyn_val(DT_GNU_HASH).expect("DT_GNU_HASH");
        let word = |i: u64| at::<u32>(table + 4 * i);
        let (nbuckets, symoffset) = (u64::from(word(0)), word(1));
        let (bloom_size, bloom_shift) = (u64::from(word(2)), word(3));
        let h = gnu_hash(name);

        let bloom_word: u64 = at(table + 16 + 8 * ((u64::from(h) / 64) % bloom_size));
        let mask = (1u64 << (h % 64)) | (1u64 << ((h >> bloom_shift) % 64));
        if bloom_word & mask != mask {
            return None;
        }
        let buckets = table + 16 + 8 * bloom_size;
        let chains = buckets + 4 * nbuckets;
        let mut index: u32 = at(buckets + 4 * (u64::from(h) % nbuckets));
        if index == 0 {
            return None;
        }
        loop {
            let chain_hash: u32 = at(chains + 4 * u64::from(index - symoffset));
            if chain_hash | 1 == h | 1 && sym_name(&sym(index)) == name {
                return Some(index);
            }
            if chain_hash & 1 != 0 {
                return None;
            }
            index += 1;
        }
    }

    /// The version definition a symbol's DT_VERSYM entry names: its hash
    /// and name.
    fn sym_version(index: u32) -> (u32, &'static str) {
        let versym: u16 = at(dyn_val(DT_VERSYM).expect("DT_VERSYM") + 2 * u64::from(index));
        assert_eq!(
            versym & VERSYM_HIDDEN,
            0,
            "symbol {index} has a hidden version"
        );
        let mut off = dyn_val(DT_VERDEF).expect("DT_VERDEF");
        loop {
            let vd: Elf64Verdef = at(off);
            if vd.ndx == versym {
                let aux: Elf64Verdaux = at(off + u64::from(vd.aux));
                let name = cstr(dyn_val(DT_STRTAB).expect("DT_STRTAB") + u64::from(aux.name));
                return (vd.hash, name);
            }
            assert_ne!(vd.next, 0, "no version definition {versym}");
            off += u64::from(vd.next);
        }
    }

    #[test]
    fn vdso_is_x86_64_shared_object() {
        let eh = ehdr();
        assert_eq!(eh.ident[..4], elf::MAGIC);
        assert_eq!(eh.ident[4], elf::CLASS64);
        assert_eq!(eh.ident[5], elf::DATA_LSB);
        assert_eq!(eh.kind, elf::ET_DYN);
        assert_eq!(eh.machine, elf::EM_X86_64);
    }

    #[test]
    fn vdso_loads_at_zero_read_exec_without_bss() {
        let loads: Vec<_> = phdrs()
            .into_iter()
            .filter(|ph| ph.kind == elf::PT_LOAD)
            .collect();
        assert_eq!(loads[0].vaddr, 0, "first PT_LOAD must start at 0");
        for ph in &loads {
            // What makes "copy the file to the base" a correct load.
            assert_eq!(ph.offset, ph.vaddr);
            assert_eq!(ph.filesz, ph.memsz);
            assert_eq!(ph.flags & elf::PF_W, 0, "the vDSO is never writable");
        }
        assert!(loads.iter().any(|ph| ph.flags & elf::PF_X != 0));
    }

    #[test]
    fn vdso_size_pages_covers_loads_and_file() {
        let load_end = phdrs()
            .iter()
            .filter(|ph| ph.kind == elf::PT_LOAD)
            .map(|ph| ph.vaddr + ph.memsz)
            .max()
            .expect("a PT_LOAD");
        let len = image().len() as u64;
        assert_eq!(
            size_pages(),
            load_end.max(len).div_ceil(crate::PAGE_SIZE),
            "size_pages disagrees with the program headers"
        );
        assert!((1..=2).contains(&size_pages()), "{} pages", size_pages());
    }

    #[test]
    fn vdso_has_no_relocations() {
        for tag in [DT_RELA, DT_REL, DT_RELR, DT_JMPREL, DT_TEXTREL] {
            assert_eq!(dyn_val(tag), None, "dynamic tag {tag:#x} present");
        }
        for tag in [DT_RELASZ, DT_RELSZ, DT_RELRSZ, DT_PLTRELSZ] {
            assert!(matches!(dyn_val(tag), None | Some(0)), "tag {tag:#x}");
        }
        for (i, sh) in shdrs().iter().enumerate() {
            assert!(
                !matches!(sh.kind, SHT_RELA | SHT_REL | SHT_RELR) || sh.size == 0,
                "section {i} holds relocations"
            );
        }
    }

    #[test]
    fn vdso_has_dynamic_tables_glibc_needs() {
        for tag in [
            DT_HASH,
            DT_GNU_HASH,
            DT_SYMTAB,
            DT_STRTAB,
            DT_VERSYM,
            DT_VERDEF,
        ] {
            assert!(dyn_val(tag).is_some(), "dynamic tag {tag:#x} missing");
        }
    }

    #[test]
    fn vdso_exports_functions_at_linux_2_6() {
        let text_end = phdrs()
            .iter()
            .filter(|ph| ph.kind == elf::PT_LOAD)
            .map(|ph| ph.vaddr + ph.memsz)
            .max()
            .expect("a PT_LOAD");
        for f in FUNCTIONS {
            let prefixed = format!("__vdso_{f}");
            let by_gnu = lookup_gnu(&prefixed).unwrap_or_else(|| panic!("{prefixed} (GNU hash)"));
            let by_sysv = lookup_sysv(&prefixed).unwrap_or_else(|| panic!("{prefixed} (SysV)"));
            assert_eq!(by_gnu, by_sysv);
            let s = sym(by_gnu);
            assert_eq!(s.info & 0xf, STT_FUNC, "{prefixed} is not a function");
            assert!(
                s.value > 0 && s.value < text_end,
                "{prefixed} at {:#x}",
                s.value
            );
            assert_eq!(
                sym_version(by_gnu),
                (sysv_hash("LINUX_2.6"), "LINUX_2.6"),
                "{prefixed}"
            );

            // The plain name is an alias of the same code, as in Linux.
            let plain = lookup_gnu(f).unwrap_or_else(|| panic!("{f}"));
            assert_eq!(sym(plain).value, s.value, "{f}");
            assert_eq!(sym_version(plain).1, "LINUX_2.6");
        }
        assert_eq!(lookup_gnu("__vdso_nonexistent"), None);
        assert_eq!(lookup_sysv("__vdso_nonexistent"), None);
    }

    /// Runs the image's functions on the host, where their `syscall`s reach
    /// the host kernel, to check the code rather than just the tables.
    mod native {
        use super::*;
        use crate::loader::vdso_time::TimePage;
        use std::sync::atomic::Ordering;
        use std::sync::Arc;
        use std::time::Duration;

        /// The image copied into a private read+execute mapping with a time
        /// page right below it, as [`install`] places them in a guest.
        struct Mapped {
            /// the time page; the image follows it
            start: *mut libc::c_void,
            len: usize,
            /// the image's first byte
            base: usize,
        }

        impl Mapped {
            /// With a zeroed (invalid) time page of its own, which
            /// [`Mapped::page`] can fill in.
            fn new() -> Mapped {
                let vvar = usize::try_from(VVAR_SIZE).expect("size");
                let image_len = usize::try_from(size_pages() * crate::PAGE_SIZE).expect("size");
                let len = vvar + image_len;
                // SAFETY: a fresh anonymous mapping; no existing memory is
                // affected.
                let start = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        len,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    )
                };
                assert_ne!(start, libc::MAP_FAILED, "mmap");
                assert!(image().len() <= image_len);
                let base = start as usize + vvar;
                // SAFETY: `base` starts a writable part of the mapping of
                // `image_len` bytes, at least the image's length, and cannot
                // overlap the image.
                unsafe {
                    std::ptr::copy_nonoverlapping(image().as_ptr(), base as *mut u8, image().len())
                };
                // SAFETY: changes the protection of our own mapping only.
                let rc = unsafe {
                    libc::mprotect(
                        base as *mut libc::c_void,
                        image_len,
                        libc::PROT_READ | libc::PROT_EXEC,
                    )
                };
                assert_eq!(rc, 0, "mprotect");
                Mapped { start, len, base }
            }

            /// With `time`'s own page mapped read-only below the image,
            /// from the memory file, as a guest sees it.
            fn with_keeper(time: &TimeKeeper) -> Mapped {
                use std::os::fd::AsRawFd;
                let mapped = Mapped::new();
                let region = time.region();
                let fd = region.memory_file().fd().as_raw_fd();
                let off = libc::off_t::try_from(region.offset()).expect("offset");
                // SAFETY: replaces the first page of our own mapping (the
                // anonymous time page) with a shared read-only view of the
                // keeper's page; nothing holds references into the old page.
                let p = unsafe {
                    libc::mmap(
                        mapped.start,
                        usize::try_from(VVAR_SIZE).expect("size"),
                        libc::PROT_READ,
                        libc::MAP_SHARED | libc::MAP_FIXED,
                        fd,
                        off,
                    )
                };
                assert_eq!(p, mapped.start, "mmap of the time page");
                mapped
            }

            /// The anonymous time page of [`Mapped::new`], to fill in.
            fn page(&self) -> &TimePage {
                // SAFETY: `start` is the page-aligned start of a private
                // read+write page that lives as long as `self`; any bytes
                // are a valid `TimePage`, and it is only accessed through
                // its atomics (here) or read by the vDSO's code.
                unsafe { &*self.start.cast::<TimePage>() }
            }

            fn addr(&self, name: &str) -> usize {
                let index = lookup_gnu(name).unwrap_or_else(|| panic!("{name}"));
                let value = usize::try_from(sym(index).value).expect("address");
                assert!(value < self.len - usize::try_from(VVAR_SIZE).expect("size"));
                self.base + value
            }
        }

        impl Drop for Mapped {
            fn drop(&mut self) {
                // SAFETY: unmaps the mapping made in `new`, which nothing
                // else refers to once `self` is gone.
                unsafe { libc::munmap(self.start, self.len) };
            }
        }

        type TimespecFn = unsafe extern "C" fn(libc::c_int, *mut libc::timespec) -> libc::c_int;

        fn timespec_fn(vdso: &Mapped, name: &str) -> TimespecFn {
            let addr = vdso.addr(name);
            // SAFETY: `addr` is the entry of a function in the executable
            // mapping with the C signature of clock_gettime(2).
            unsafe { std::mem::transmute::<usize, TimespecFn>(addr) }
        }

        fn host_now(clock: libc::clockid_t) -> libc::timespec {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is a valid, writable timespec.
            assert_eq!(unsafe { libc::clock_gettime(clock, &mut ts) }, 0);
            ts
        }

        fn as_pair(ts: &libc::timespec) -> (i64, i64) {
            (ts.tv_sec, ts.tv_nsec)
        }

        #[test]
        fn vdso_clock_gettime_reads_the_clock() {
            let vdso = Mapped::new();
            let gettime = timespec_fn(&vdso, "__vdso_clock_gettime");
            let before = host_now(libc::CLOCK_MONOTONIC);
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is a valid, writable timespec.
            let rc = unsafe { gettime(libc::CLOCK_MONOTONIC, &mut ts) };
            let after = host_now(libc::CLOCK_MONOTONIC);
            assert_eq!(rc, 0);
            assert!(as_pair(&before) <= as_pair(&ts) && as_pair(&ts) <= as_pair(&after));

            // Errors come back as -errno, as from Linux's vDSO.
            // SAFETY: `ts` is a valid, writable timespec (an invalid clock
            // is the function's to refuse).
            let rc = unsafe { gettime(0x7fff, &mut ts) };
            assert_eq!(rc, -libc::EINVAL);
        }

        #[test]
        fn vdso_clock_getres_matches_host() {
            let vdso = Mapped::new();
            let getres = timespec_fn(&vdso, "__vdso_clock_getres");
            let mut ours = libc::timespec {
                tv_sec: -1,
                tv_nsec: -1,
            };
            let mut host = libc::timespec {
                tv_sec: -2,
                tv_nsec: -2,
            };
            // SAFETY: both are valid, writable timespecs.
            let (rc, host_rc) = unsafe {
                (
                    getres(libc::CLOCK_REALTIME, &mut ours),
                    libc::clock_getres(libc::CLOCK_REALTIME, &mut host),
                )
            };
            assert_eq!((rc, host_rc), (0, 0));
            assert_eq!(as_pair(&ours), as_pair(&host));
        }

        #[test]
        fn vdso_gettimeofday_and_time_read_realtime() {
            let vdso = Mapped::new();
            type GettimeofdayFn =
                unsafe extern "C" fn(*mut libc::timeval, *mut libc::c_void) -> libc::c_int;
            type TimeFn = unsafe extern "C" fn(*mut libc::time_t) -> libc::time_t;
            // SAFETY: the addresses are entries of functions with the C
            // signatures of gettimeofday(2) and time(2).
            let (gettimeofday, time) = unsafe {
                (
                    std::mem::transmute::<usize, GettimeofdayFn>(vdso.addr("__vdso_gettimeofday")),
                    std::mem::transmute::<usize, TimeFn>(vdso.addr("__vdso_time")),
                )
            };
            // time(2) may be a coarse clock, a tick behind the fine one:
            // the earliest it may read is the coarse clock's now.
            let before = host_now(libc::CLOCK_REALTIME_COARSE).tv_sec;
            let mut tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 0,
            };
            let mut stored: libc::time_t = 0;
            // SAFETY: `tv` and `stored` are valid and writable; a null
            // timezone is allowed.
            let (rc, t) = unsafe {
                (
                    gettimeofday(&mut tv, std::ptr::null_mut()),
                    time(&mut stored),
                )
            };
            let after = host_now(libc::CLOCK_REALTIME).tv_sec;
            assert_eq!(rc, 0);
            assert!((before..=after).contains(&tv.tv_sec));
            assert!((before..=after).contains(&t));
            assert_eq!(stored, t);
        }

        #[test]
        fn vdso_getcpu_names_a_cpu() {
            let vdso = Mapped::new();
            type GetcpuFn =
                unsafe extern "C" fn(*mut u32, *mut u32, *mut libc::c_void) -> libc::c_long;
            // SAFETY: the address is the entry of a function with the C
            // signature of getcpu(2).
            let getcpu = unsafe { std::mem::transmute::<usize, GetcpuFn>(vdso.addr("getcpu")) };
            let (mut cpu, mut node) = (u32::MAX, u32::MAX);
            // SAFETY: `cpu` and `node` are valid and writable.
            let rc = unsafe { getcpu(&mut cpu, &mut node, std::ptr::null_mut()) };
            assert_eq!(rc, 0);
            // SAFETY: sysconf has no memory-safety preconditions.
            let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
            assert!(i64::from(cpu) < cpus, "cpu {cpu} of {cpus}");
            assert_ne!(node, u32::MAX);
        }

        fn ns(ts: &libc::timespec) -> i64 {
            ts.tv_sec * 1_000_000_000 + ts.tv_nsec
        }

        /// Calls the vDSO's `clock_gettime`; `(return value, nanoseconds)`.
        fn vdso_now(gettime: TimespecFn, clock: libc::clockid_t) -> (libc::c_int, i64) {
            let mut ts = libc::timespec {
                tv_sec: -1,
                tv_nsec: -1,
            };
            // SAFETY: `ts` is a valid, writable timespec.
            let rc = unsafe { gettime(clock, &mut ts) };
            (rc, ns(&ts))
        }

        /// How far the vDSO's reading of `clock` lies outside the host's
        /// readings of `host_clock` around it (0 if inside).
        fn outside_host(gettime: TimespecFn, clock: i32, host_clock: i32) -> i64 {
            let before = ns(&host_now(host_clock));
            let (rc, ours) = vdso_now(gettime, clock);
            let after = ns(&host_now(host_clock));
            assert_eq!(rc, 0, "clock {clock}");
            if ours < before {
                ours - before
            } else {
                (ours - after).max(0)
            }
        }

        fn live_keeper() -> (Arc<crate::mm::memfile::MemoryFile>, TimeKeeper) {
            let mf = Arc::new(crate::mm::memfile::MemoryFile::new().expect("memory file"));
            let tk = TimeKeeper::new(&mf).expect("time keeper");
            assert!(
                tk.wait_valid(Duration::from_secs(5)),
                "no valid time page (is the TSC invariant?)"
            );
            (mf, tk)
        }

        /// The vDSO against a live time page (shared with the keeper through
        /// the memory file, as in a guest) agrees with the host's clocks.
        #[test]
        fn vdso_clock_gettime_reads_the_time_page() {
            let (_mf, tk) = live_keeper();
            let vdso = Mapped::with_keeper(&tk);
            let gettime = timespec_fn(&vdso, "__vdso_clock_gettime");
            let clocks = [
                (libc::CLOCK_MONOTONIC, libc::CLOCK_MONOTONIC),
                (libc::CLOCK_REALTIME, libc::CLOCK_REALTIME),
                (libc::CLOCK_MONOTONIC_RAW, libc::CLOCK_MONOTONIC_RAW),
                (libc::CLOCK_BOOTTIME, libc::CLOCK_BOOTTIME),
                (libc::CLOCK_TAI, libc::CLOCK_TAI),
                // The coarse clocks are as fine as the others here.
                (libc::CLOCK_MONOTONIC_COARSE, libc::CLOCK_MONOTONIC),
                (libc::CLOCK_REALTIME_COARSE, libc::CLOCK_REALTIME),
            ];
            let mut worst = 0;
            for (clock, host_clock) in clocks {
                let mut last = 0;
                for _ in 0..1000 {
                    let e = outside_host(gettime, clock, host_clock);
                    assert!(e.abs() < 50_000, "clock {clock} off the host's by {e} ns");
                    worst = worst.max(e.abs());
                    let (_, now) = vdso_now(gettime, clock);
                    assert!(now >= last || clock == libc::CLOCK_REALTIME);
                    last = now;
                }
            }
            eprintln!("worst vDSO error against the host clocks: {worst} ns");
            // The keeper decodes the page as the vDSO does.
            let (_, ours) = vdso_now(gettime, libc::CLOCK_MONOTONIC);
            let keeper = tk.now(libc::CLOCK_MONOTONIC).expect("valid page");
            let keeper = keeper.tv_sec * 1_000_000_000 + keeper.tv_nsec;
            assert!((0..1_000_000).contains(&(keeper - ours)));
        }

        #[test]
        fn vdso_gettimeofday_and_time_read_the_time_page() {
            let (_mf, tk) = live_keeper();
            let vdso = Mapped::with_keeper(&tk);
            type GettimeofdayFn =
                unsafe extern "C" fn(*mut libc::timeval, *mut libc::c_void) -> libc::c_int;
            type TimeFn = unsafe extern "C" fn(*mut libc::time_t) -> libc::time_t;
            // SAFETY: the addresses are entries of functions with the C
            // signatures of gettimeofday(2) and time(2).
            let (gettimeofday, time) = unsafe {
                (
                    std::mem::transmute::<usize, GettimeofdayFn>(vdso.addr("__vdso_gettimeofday")),
                    std::mem::transmute::<usize, TimeFn>(vdso.addr("__vdso_time")),
                )
            };
            let before = ns(&host_now(libc::CLOCK_REALTIME));
            let mut tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 0,
            };
            let mut tz = [-1i32; 2];
            let mut stored: libc::time_t = 0;
            // SAFETY: `tv`, `tz` (two ints, a struct timezone) and `stored`
            // are valid and writable.
            let (rc, t) = unsafe {
                (
                    gettimeofday(&mut tv, tz.as_mut_ptr().cast()),
                    time(&mut stored),
                )
            };
            let after = ns(&host_now(libc::CLOCK_REALTIME));
            assert_eq!(rc, 0);
            assert_eq!(tz, [0, 0], "UTC, as the Sentry's gettimeofday says");
            let tv_ns = tv.tv_sec * 1_000_000_000 + tv.tv_usec * 1000;
            assert!(tv_ns > before - 50_000 && tv_ns < after + 50_000);
            assert!((before / 1_000_000_000 - 1..=after / 1_000_000_000 + 1).contains(&t));
            assert_eq!(stored, t);
        }

        /// Fills `page` (a private test page) with one slot per entry of
        /// `slots` (clock id, base, nanoseconds per tick times 2^32).
        fn fill(page: &TimePage, valid: u64, tsc_base: u64, max_delta: u64, slots: &[(i32, u64)]) {
            page.valid.store(valid, Ordering::Relaxed);
            page.tsc_base.store(tsc_base, Ordering::Relaxed);
            page.max_delta.store(max_delta, Ordering::Relaxed);
            page.shift.store(32, Ordering::Relaxed);
            for &(clock, base) in slots {
                let slot = &page.clock[usize::try_from(clock).expect("clock id")];
                slot.base_ns.store(base, Ordering::Relaxed);
                // One nanosecond per tick: easy to bound.
                slot.mult.store(1 << 32, Ordering::Relaxed);
            }
        }

        /// Far from any host clock's reading, so a value near it can only
        /// have come from the page.
        const FAKE_MONOTONIC: u64 = 123_456_789 * 1_000_000_000;
        const FAKE_REALTIME: u64 = 987_654_321 * 1_000_000_000;

        #[test]
        fn vdso_computes_from_the_page_without_the_syscall() {
            let vdso = Mapped::new();
            let slots = [
                (libc::CLOCK_MONOTONIC, FAKE_MONOTONIC),
                (libc::CLOCK_REALTIME, FAKE_REALTIME),
            ];
            fill(
                vdso.page(),
                1,
                crate::loader::vdso_time::rdtsc(),
                u64::MAX / 2,
                &slots,
            );
            let gettime = timespec_fn(&vdso, "__vdso_clock_gettime");
            let (rc, mono) = vdso_now(gettime, libc::CLOCK_MONOTONIC);
            assert_eq!(rc, 0);
            let mono = u64::try_from(mono).expect("positive");
            assert!((FAKE_MONOTONIC..FAKE_MONOTONIC + 10_000_000_000).contains(&mono));

            type TimeFn = unsafe extern "C" fn(*mut libc::time_t) -> libc::time_t;
            // SAFETY: the entry of a function with time(2)'s C signature.
            let time = unsafe { std::mem::transmute::<usize, TimeFn>(vdso.addr("time")) };
            // SAFETY: a null pointer is allowed.
            let t = unsafe { time(std::ptr::null_mut()) };
            let fake_sec = i64::try_from(FAKE_REALTIME / 1_000_000_000).expect("seconds");
            assert!((fake_sec..fake_sec + 10).contains(&t), "{t}");

            // A clock without a slot (mult 0) is the host's, through the
            // syscall.
            assert_eq!(
                outside_host(gettime, libc::CLOCK_BOOTTIME, libc::CLOCK_BOOTTIME),
                0
            );
            let (rc, _) = vdso_now(gettime, libc::CLOCK_PROCESS_CPUTIME_ID);
            assert_eq!(rc, 0);
            let (rc, _) = vdso_now(gettime, 0x7fff);
            assert_eq!(rc, -libc::EINVAL);
        }

        #[test]
        fn vdso_traps_when_the_page_is_invalid_stale_or_mid_update() {
            let vdso = Mapped::new();
            let gettime = timespec_fn(&vdso, "__vdso_clock_gettime");
            let slots = [(libc::CLOCK_MONOTONIC, FAKE_MONOTONIC)];
            let host = |what: &str| {
                assert_eq!(
                    outside_host(gettime, libc::CLOCK_MONOTONIC, libc::CLOCK_MONOTONIC),
                    0,
                    "{what}: not the host's clock"
                );
            };

            let tsc = crate::loader::vdso_time::rdtsc();
            fill(vdso.page(), 0, tsc, u64::MAX / 2, &slots);
            host("invalid");

            // Last refreshed a million ticks ago, trusted for a thousand.
            fill(vdso.page(), 1, tsc - 1_000_000, 1000, &slots);
            host("stale");

            // A writer that never finishes: readers give up and trap.
            fill(vdso.page(), 1, tsc, u64::MAX / 2, &slots);
            vdso.page().seq.store(1, Ordering::Relaxed);
            host("mid-update");

            vdso.page().seq.store(2, Ordering::Relaxed);
            let (_, mono) = vdso_now(gettime, libc::CLOCK_MONOTONIC);
            assert!(u64::try_from(mono).expect("positive") >= FAKE_MONOTONIC);
        }
    }
}
