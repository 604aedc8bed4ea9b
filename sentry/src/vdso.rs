//! The Sentry's own vDSO: the small shared object Linux maps into every
//! process and names in the auxiliary vector (`AT_SYSINFO_EHDR`), where glibc
//! and musl look up `__vdso_clock_gettime`, `__vdso_gettimeofday`,
//! `__vdso_time`, `__vdso_getcpu` and `__vdso_clock_getres` (version
//! `LINUX_2.6`, see vdso(7)).
//!
//! The image is built from `sentry/vdso/` by `build.rs`, which also checks it.
//! For now each function issues the real `syscall` instruction, which the
//! platform traps like any other guest syscall; a later step serves the clocks
//! from a time page without a trap.
//!
//! To give it to a guest: allocate [`size_pages`] zeroed pages at a
//! page-aligned base, copy the whole of [`image`] to the base (its one
//! PT_LOAD starts at address 0 and file offsets equal addresses, so the file
//! *is* the memory image, and it needs no relocation), map the pages
//! read+execute, and put the base in `AT_SYSINFO_EHDR`. The image is the same
//! for every process and never written, so its pages can be shared.

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

        /// The image copied into a private read+execute mapping, as the
        /// loader will place it in a guest.
        struct Mapped {
            base: *mut libc::c_void,
            len: usize,
        }

        impl Mapped {
            fn new() -> Mapped {
                let len = usize::try_from(size_pages() * crate::PAGE_SIZE).expect("size");
                // SAFETY: a fresh anonymous mapping; no existing memory is
                // affected.
                let base = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        len,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    )
                };
                assert_ne!(base, libc::MAP_FAILED, "mmap");
                assert!(image().len() <= len);
                // SAFETY: `base` is a writable mapping of `len` bytes, at
                // least the image's length, and cannot overlap the image.
                unsafe {
                    std::ptr::copy_nonoverlapping(image().as_ptr(), base.cast(), image().len())
                };
                // SAFETY: changes the protection of our own mapping only.
                let rc = unsafe { libc::mprotect(base, len, libc::PROT_READ | libc::PROT_EXEC) };
                assert_eq!(rc, 0, "mprotect");
                Mapped { base, len }
            }

            fn addr(&self, name: &str) -> usize {
                let index = lookup_gnu(name).unwrap_or_else(|| panic!("{name}"));
                let value = usize::try_from(sym(index).value).expect("address");
                assert!(value < self.len);
                self.base as usize + value
            }
        }

        impl Drop for Mapped {
            fn drop(&mut self) {
                // SAFETY: unmaps the mapping made in `new`, which nothing
                // else refers to once `self` is gone.
                unsafe { libc::munmap(self.base, self.len) };
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
            // SAFETY: as above.
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
            let before = host_now(libc::CLOCK_REALTIME).tv_sec;
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
    }
}
