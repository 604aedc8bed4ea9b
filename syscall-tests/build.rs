//! Builds the guest programs in `guests/` (static C binaries) and the fixture
//! tree they inspect, both under OUT_DIR, so that the native and the sandboxed
//! run of a guest see the very same files.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use abi::elf::*;
use abi::{Elf64Ehdr, Elf64Phdr};
use zerocopy::{FromZeros, Immutable, IntoBytes};

fn main() {
    let manifest =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let src = manifest.join("guests");
    let bin = out.join("guests");
    let fixtures = out.join("fixtures");
    println!("cargo:rerun-if-changed=guests");
    println!("cargo:rerun-if-changed=build.rs");

    make_fixtures(&fixtures);
    fs::create_dir_all(&bin).expect("create guest dir");

    let mut names: Vec<String> = fs::read_dir(&src)
        .expect("read guests/")
        .filter_map(|e| {
            let p = e.expect("dir entry").path();
            (p.extension()? == "c").then(|| p.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    names.sort();

    // gcc -static links for a noticeable time; two or so at once keeps a
    // small machine busy without starving the rest of the workspace build.
    let jobs = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(4);
    let errors: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..jobs)
            .map(|j| {
                let names = &names;
                let (src, bin, fixtures) = (&src, &bin, &fixtures);
                s.spawn(move || {
                    names
                        .iter()
                        .skip(j)
                        .step_by(jobs)
                        .filter_map(|n| compile(src, bin, fixtures, n).err())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("compile thread"))
            .collect()
    });
    if !errors.is_empty() {
        for e in &errors {
            eprintln!("{e}");
        }
        panic!("{} guest program(s) failed to compile", errors.len());
    }

    let fuzz = out.join("fuzz");
    println!("cargo:rerun-if-changed=fuzz");
    if let Err(e) = compile(&manifest.join("fuzz"), &out, &fixtures, "fuzz") {
        panic!("{e}");
    }
    println!("cargo:rustc-env=SYSCALL_TESTS_FUZZER={}", fuzz.display());
    println!("cargo:rustc-env=SYSCALL_TESTS_GUEST_DIR={}", bin.display());
    println!(
        "cargo:rustc-env=SYSCALL_TESTS_FIXTURES={}",
        fixtures.display()
    );
    println!("cargo:rustc-env=SYSCALL_TESTS_GUESTS={}", names.join(","));
}

fn compile(src: &Path, bin: &Path, fixtures: &Path, name: &str) -> Result<(), String> {
    // A guest may ask for linker options of its own with a line
    // `/* link: OPTIONS */`.
    let text = fs::read_to_string(src.join(format!("{name}.c")))
        .map_err(|e| format!("{name}: cannot read the source: {e}"))?;
    let link: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("/* link: "))
        .filter_map(|l| l.strip_suffix(" */"))
        .flat_map(str::split_whitespace)
        .collect();
    let out = Command::new("gcc")
        .args(["-static", "-O1", "-Wall", "-std=gnu11"])
        .args(&link)
        .arg(format!("-DFIXTURES=\"{}\"", fixtures.display()))
        .arg(format!("-DGUEST_DIR=\"{}\"", bin.display()))
        .arg(format!("-I{}", src.display()))
        .arg("-o")
        .arg(bin.join(name))
        .arg(src.join(format!("{name}.c")))
        .output()
        .map_err(|e| format!("{name}: cannot run gcc: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{name}: gcc failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The fixture tree. Guests get its path at compile time (-DFIXTURES) and
/// rely on exactly this content: keep `guests/` in step when changing it.
fn make_fixtures(root: &Path) {
    if root.exists() {
        fs::remove_dir_all(root).expect("remove old fixtures");
    }
    let mk = |rel: &str| fs::create_dir_all(root.join(rel)).expect("mkdir fixture");
    let file = |rel: &str, data: &[u8], mode: u32| {
        let p = root.join(rel);
        fs::write(&p, data).expect("write fixture");
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).expect("chmod fixture");
    };
    let link = |target: &str, rel: &str| symlink(target, root.join(rel)).expect("symlink fixture");

    mk("dir/sub");
    file("file.txt", b"hello fixture\n", 0o644);
    file("empty", b"", 0o644);
    // Three pages and a bit, byte i = (i * 7 + i / 4096) mod 256: every page
    // differs, so a mapping at the wrong offset shows.
    let big: Vec<u8> = (0..3 * 4096 + 100)
        .map(|i: usize| (i * 7 + i / 4096) as u8)
        .collect();
    file("big.bin", &big, 0o644);
    file("dir/a", b"a\n", 0o644);
    file("dir/b", b"bb\n", 0o644);
    file("dir/c", b"ccc\n", 0o644);
    link("../file.txt", "dir/up");
    link("file.txt", "link_rel");
    link(&format!("{}/file.txt", root.display()), "link_abs");
    link("dir/../file.txt", "link_dotdot");
    link("dir", "link_dir");
    link("link_rel", "link_link");
    link("does-not-exist", "dangling");
    link("loop_b", "loop_a");
    link("loop_a", "loop_b");
    link("self", "self");
    // chain/0 -> 1 -> ... -> 39 -> ../file.txt: 40 links, Linux's MAXSYMLINKS,
    // still resolves; chain/start -> 0 makes 41 and must fail with ELOOP.
    mk("chain");
    for i in 0..39 {
        link(&(i + 1).to_string(), &format!("chain/{i}"));
    }
    link("../file.txt", "chain/39");
    link("0", "chain/start");
    // exec fixtures
    file("noexec.txt", b"not executable\n", 0o644);
    file("notelf", b"just some text, no magic\n", 0o755);
    file(
        "script.sh",
        b"#!/bin/sh\necho \"script: $# args: $*\"\nexit 3\n",
        0o755,
    );
    file(
        "script_static.sh",
        b"#!/bin/busybox sh\necho \"static script: $*\"\nexit 4\n",
        0o755,
    );
    file(
        "script_badinterp.sh",
        b"#!/nonexistent/interp\necho no\n",
        0o755,
    );
    make_malformed(root);
}

/// Executables Linux refuses (or runs) for what their headers say, for
/// `execve_malformed`: hand-made ELF files and `#!` scripts.
fn make_malformed(root: &Path) {
    let file = |rel: &str, data: &[u8]| {
        let p = root.join(rel);
        fs::write(&p, data).expect("write fixture");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).expect("chmod fixture");
    };
    let fix = |rel: &str| format!("{}/{rel}", root.display()).into_bytes();
    let cstr = |rel: &str| [fix(rel), vec![0]].concat();
    let keep = |_: &mut Elf64Ehdr, _: &mut [Elf64Phdr]| {};
    let spoilt = |spoil: fn(&mut Elf64Ehdr)| elf64(BASE, None, 0, |h, _| spoil(h));

    let ok = elf64(BASE, None, 0, keep);
    file("elf_ok", &ok);
    file("elf_truncated", &ok[..40]);
    file("elf_phnum0", &spoilt(|h| h.phnum = 0));
    file("elf_phentsize", &spoilt(|h| h.phentsize = 32));
    file("elf_phoff_eof", &spoilt(|h| h.phoff = 1 << 20));
    // Linux reads at most 64 KiB of program headers: 1170 of 56 bytes.
    file("elf_phnum1170", &elf64(BASE, None, 1169, keep));
    file("elf_phnum1171", &elf64(BASE, None, 1170, keep));
    // Segments where the sandbox's platform keeps its own pages (the
    // ptrace stub at the top, the seccomp platform's tables low down).
    file("elf_stub_addr", &elf64(0x7fff_ffe0_0000, None, 0, keep));
    file("elf_low_addr", &elf64(0x1_0000, None, 0, keep));
    file("elf32", &elf32());

    let interp = |rel: &str, name: &[u8]| file(rel, &elf64(BASE, Some(name), 0, keep));
    interp("interp_dir", &cstr("dir"));
    interp("interp_nonul", &fix("elf_ok"));
    interp("interp_script", &cstr("script.sh"));
    interp("interp_text", &cstr("shebang_long_arg"));
    interp("interp_elf32", &cstr("elf32"));
    interp("interp_missing", &cstr("missing"));
    interp("interp_noexec", &cstr("noexec.txt"));
    interp("interp_empty", b"\0\0");
    interp("interp_short", b"\0");
    interp("interp_name_max", &[b"/", &[b'a'; 300][..], b"\0"].concat());
    interp("interp_path_max", &[&[b'/'; 4096][..], b"\0"].concat());
    let eof = elf64(BASE, Some(&cstr("elf_ok")), 0, |_, p| p[1].offset = 1 << 20);
    file("interp_eof", &eof);

    // BINPRM_BUF_SIZE is 256: a name running past it must not be cut
    // short, an argument may be.
    file("shebang_long", &[b"#!/", &[b'x'; 300][..]].concat());
    file(
        "shebang_long_arg",
        &[b"#!/bin/echo ", &[b'a'; 300][..]].concat(),
    );
    let script = |rel: &str, line: &[u8]| file(rel, &[b"#!", line, b"\n"].concat());
    script("shebang_nul", b"/bin/echo\0 ignored");
    script("shebang_nul_name", b" \0/bin/echo");
    script("shebang_empty", b"");
    script("shebang_blank", b" \t ");
    script("shebang_dir", &fix("dir"));
    script("shebang_noexec", &fix("noexec.txt"));
    // nest1 runs elf_ok through one #! line, nestN through N.
    let mut inner = "elf_ok".to_owned();
    for n in 1..=6 {
        let name = format!("nest{n}");
        script(&name, &fix(&inner));
        inner = name;
    }
}

/// `EV_CURRENT`, the one ELF version.
const EV_CURRENT: u8 = 1;
/// `ELFCLASS32` and `EM_386`: an i386 program.
const CLASS32: u8 = 1;
const EM_386: u16 = 3;

/// Where the x86-64 fixtures are loaded, as `ld` links them.
const BASE: u64 = 0x40_0000;

/// `mov $60, %eax; xor %edi, %edi; syscall`: `exit(0)`.
const EXIT_0_X86_64: [u8; 9] = [0xb8, 60, 0, 0, 0, 0x31, 0xff, 0x0f, 0x05];

/// A static x86-64 executable loaded at `base`: one read-execute PT_LOAD
/// of the whole file, a PT_INTERP of `interp` (its NUL, if any, included)
/// when given, `nulls` PT_NULL headers, and code that exits 0; `spoil`
/// may change the headers before they are written.
fn elf64(
    base: u64,
    interp: Option<&[u8]>,
    nulls: usize,
    spoil: impl FnOnce(&mut Elf64Ehdr, &mut [Elf64Phdr]),
) -> Vec<u8> {
    let interp = interp.unwrap_or_default();
    let phnum = 1 + usize::from(!interp.is_empty()) + nulls;
    let code = (size_of::<Elf64Ehdr>() + phnum * size_of::<Elf64Phdr>()) as u64;
    let data = code + EXIT_0_X86_64.len() as u64;
    let phdr = |kind, flags, offset, size| Elf64Phdr {
        kind,
        flags,
        offset,
        vaddr: base + offset,
        paddr: base + offset,
        filesz: size,
        memsz: size,
        align: 0x1000,
    };
    let mut phdrs = vec![phdr(PT_LOAD, PF_R | PF_X, 0, data + interp.len() as u64)];
    if !interp.is_empty() {
        phdrs.push(phdr(PT_INTERP, PF_R, data, interp.len() as u64));
    }
    phdrs.resize(phnum, Elf64Phdr::new_zeroed());
    let mut ident = [0; 16];
    ident[..4].copy_from_slice(&MAGIC);
    ident[4..7].copy_from_slice(&[CLASS64, DATA_LSB, EV_CURRENT]);
    let mut hdr = Elf64Ehdr {
        ident,
        kind: ET_EXEC,
        machine: EM_X86_64,
        version: EV_CURRENT.into(),
        entry: base + code,
        phoff: size_of::<Elf64Ehdr>() as u64,
        shoff: 0,
        flags: 0,
        ehsize: size_of::<Elf64Ehdr>() as u16,
        phentsize: size_of::<Elf64Phdr>() as u16,
        phnum: phnum as u16,
        shentsize: 0,
        shnum: 0,
        shstrndx: 0,
    };
    spoil(&mut hdr, &mut phdrs);
    [hdr.as_bytes(), phdrs.as_bytes(), &EXIT_0_X86_64, interp].concat()
}

/// `struct elf32_hdr`.
#[derive(IntoBytes, Immutable)]
#[repr(C)]
struct Elf32Ehdr {
    ident: [u8; 16],
    kind: u16,
    machine: u16,
    version: u32,
    entry: u32,
    phoff: u32,
    shoff: u32,
    flags: u32,
    ehsize: u16,
    phentsize: u16,
    phnum: u16,
    shentsize: u16,
    shnum: u16,
    shstrndx: u16,
}

/// `struct elf32_phdr`.
#[derive(IntoBytes, Immutable)]
#[repr(C)]
struct Elf32Phdr {
    kind: u32,
    offset: u32,
    vaddr: u32,
    paddr: u32,
    filesz: u32,
    memsz: u32,
    flags: u32,
    align: u32,
}

/// An i386 executable (`mov $1, %eax; xor %ebx, %ebx; int $0x80`, its
/// `exit(0)`), which an x86-64 kernel with ia32 emulation runs.
fn elf32() -> Vec<u8> {
    const CODE: [u8; 9] = [0xb8, 1, 0, 0, 0, 0x31, 0xdb, 0xcd, 0x80];
    const BASE: u32 = 0x0804_8000;
    let code = (size_of::<Elf32Ehdr>() + size_of::<Elf32Phdr>()) as u32;
    let mut ident = [0; 16];
    ident[..4].copy_from_slice(&MAGIC);
    ident[4..7].copy_from_slice(&[CLASS32, DATA_LSB, EV_CURRENT]);
    let hdr = Elf32Ehdr {
        ident,
        kind: ET_EXEC,
        machine: EM_386,
        version: EV_CURRENT.into(),
        entry: BASE + code,
        phoff: size_of::<Elf32Ehdr>() as u32,
        shoff: 0,
        flags: 0,
        ehsize: size_of::<Elf32Ehdr>() as u16,
        phentsize: size_of::<Elf32Phdr>() as u16,
        phnum: 1,
        shentsize: 0,
        shnum: 0,
        shstrndx: 0,
    };
    let len = code + CODE.len() as u32;
    let load = Elf32Phdr {
        kind: PT_LOAD,
        offset: 0,
        vaddr: BASE,
        paddr: BASE,
        filesz: len,
        memsz: len,
        flags: PF_R | PF_X,
        align: 0x1000,
    };
    [hdr.as_bytes(), load.as_bytes(), &CODE].concat()
}
