//! The ELF loader: maps a static or dynamic (PT_INTERP) ELF64 executable and
//! its interpreter into a fresh address space and builds the initial stack
//! (argv, envp, auxv) the way Linux's `binfmt_elf` does; `#!` scripts are
//! turned into a run of their interpreter as `binfmt_script` does.

pub mod init;
pub mod vdso;
pub mod vdso_time;

use std::ops::Range;
use std::sync::Arc;

use abi::auxv::*;
use abi::elf::*;
use abi::{Elf64Ehdr, Elf64Phdr, Errno};
use platform::{Prot, Regs};
use zerocopy::FromBytes;

use crate::kernel::auth::ExecFile;
use crate::mm::{page_down, page_up, Backing, MemoryManager};
use crate::vfs::{FileSystem, HostFile, Location};
use crate::PAGE_SIZE;

/// `BINPRM_BUF_SIZE`: how much of a file is examined for `#!` and ELF headers.
const BINPRM_BUF_SIZE: usize = 256;
/// `MAX_ARG_STRLEN`: the longest single argument or environment string.
const MAX_ARG_STRLEN: usize = 32 * PAGE_SIZE as usize;
/// `#!` interpreters Linux follows, one into the next, before `ELOOP`
/// (`exec_binprm` gives up at a depth above 5).
const MAX_INTERP_DEPTH: u32 = 5;
/// `PATH_MAX`: the longest PT_INTERP name, its NUL included.
const PATH_MAX: u64 = 4096;
/// The most program header bytes binfmt_elf reads.
const MAX_PHDRS_SIZE: usize = 64 << 10;
/// Size of the initial stack mapping.
const STACK_SIZE: u64 = 8 << 20;
/// Where non-fixed PIE executables go, before randomisation (Linux's
/// `ELF_ET_DYN_BASE` for a 47-bit address space).
const ET_DYN_BASE: u64 = 0x5555_5555_4000;

/// What `execve` needs from the caller's context.
pub struct ExecRequest<'a> {
    /// the file system
    pub fs: &'a FileSystem,
    /// the caller's root directory (`chroot`): the program, its `#!`
    /// interpreter and its ELF interpreter are found from there
    pub root: &'a Location,
    /// the caller's working directory
    pub cwd: &'a Location,
    /// the path as given
    pub path: Vec<u8>,
    /// arguments
    pub argv: Vec<Vec<u8>>,
    /// environment
    pub envp: Vec<Vec<u8>>,
    /// the caller's credentials, whose execute permission the program
    /// (and its interpreter) need; `None` for the sandbox's first
    /// program, which only needs an execute bit
    pub creds: Option<&'a crate::kernel::auth::Creds>,
    /// a further check of each file opened to execute (the program, a
    /// `#!` interpreter, the ELF interpreter): the caller's Landlock domain
    pub may_exec: Option<&'a ExecCheck<'a>>,
    /// the addresses guest mappings may use (the platform keeps the rest
    /// for itself)
    pub user_range: Range<u64>,
}

/// A check of a file about to be executed, at its location.
pub type ExecCheck<'a> = dyn Fn(&Location) -> Result<(), Errno> + 'a;

/// The result of a successful load.
#[derive(Debug)]
pub struct Loaded {
    /// initial registers
    pub regs: Regs,
    /// the guest path of the executable actually mapped
    pub exe: String,
    /// the process name (`comm`): the last component of the path the
    /// caller gave, symlinks unresolved, at most 15 bytes (a `#!` script
    /// names itself, not its interpreter)
    pub comm: Vec<u8>,
    /// the auxiliary vector as the stack holds it (`/proc/[pid]/auxv`)
    pub auxv: Vec<u8>,
}

/// A parsed ELF file ready to map.
struct Elf {
    file: Arc<HostFile>,
    name: String,
    hdr: Elf64Ehdr,
    phdrs: Vec<Elf64Phdr>,
}

fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    crate::host::getrandom(&mut b);
    u64::from_ne_bytes(b)
}

/// Opens the regular file at `path` to execute: it needs an execute bit,
/// and, for `creds`, execute permission (capabilities(7):
/// `CAP_DAC_OVERRIDE` stands in for the caller's own bit).
fn open_exec(
    fs: &FileSystem,
    root: &Location,
    cwd: &Location,
    path: &[u8],
    creds: Option<&crate::kernel::auth::Creds>,
    may_exec: Option<&ExecCheck<'_>>,
) -> Result<(Arc<HostFile>, Location, abi::Stat), Errno> {
    let loc = fs.resolve_in(root, cwd, path, true)?;
    let st = loc.node().stat()?;
    if st.mode & abi::S_IFMT != abi::S_IFREG {
        return Err(Errno::EACCES);
    }
    if st.mode & 0o111 == 0 || fs.noexec(&loc) {
        return Err(Errno::EACCES);
    }
    if let Some(c) = creds {
        c.may_access(st.mode, st.uid, st.gid, crate::kernel::auth::MAY_EXEC)?;
    }
    if let Some(check) = may_exec {
        check(&loc)?;
    }
    Ok((fs.open_exec(&loc)?, loc, st))
}

/// Whether set-ID bits of the program at `loc` do not count (a `nosuid`
/// mount), as the mount table shows: the volumes (as an OCI runtime mounts
/// them) and the Sentry's `/dev` and `/dev/shm` (as a container's are).
/// The root (also when written through, as a volume is), `/tmp` and `/run`
/// have no such option.
fn nosuid(loc: &Location) -> bool {
    matches!(loc.node(), crate::vfs::Node::Host { h, .. } if h.volume().is_some())
        && !loc.on_host_root()
        || loc.path().starts_with("/dev/")
}

fn pread_exact(file: &HostFile, buf: &mut [u8], pos: u64) -> Result<usize, Errno> {
    let mut done = 0;
    while done < buf.len() {
        let n = crate::host::pread(file.fd(), &mut buf[done..], pos + done as u64)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    Ok(done)
}

/// Reads the ELF header in `head` and the program headers it points to,
/// checked as binfmt_elf checks them before it commits to the program.
fn parse_elf(file: Arc<HostFile>, name: String, head: &[u8]) -> Result<Elf, Errno> {
    let (hdr, _) = Elf64Ehdr::read_from_prefix(head).map_err(|_| Errno::ENOEXEC)?;
    if hdr.ident[..4] != MAGIC || hdr.ident[4] != CLASS64 || hdr.ident[5] != DATA_LSB {
        return Err(Errno::ENOEXEC);
    }
    if hdr.machine != EM_X86_64 || (hdr.kind != ET_EXEC && hdr.kind != ET_DYN) {
        return Err(Errno::ENOEXEC);
    }
    let size = usize::from(hdr.phnum) * std::mem::size_of::<Elf64Phdr>();
    if usize::from(hdr.phentsize) != std::mem::size_of::<Elf64Phdr>()
        || size == 0
        || size > MAX_PHDRS_SIZE
    {
        return Err(Errno::ENOEXEC);
    }
    let mut raw = vec![0u8; size];
    if pread_exact(&file, &mut raw, hdr.phoff)? != raw.len() {
        return Err(Errno::ENOEXEC);
    }
    let phdrs = <[Elf64Phdr]>::ref_from_bytes(&raw)
        .map_err(|_| Errno::ENOEXEC)?
        .to_vec();
    Ok(Elf {
        file,
        name,
        hdr,
        phdrs,
    })
}

/// Where an ELF image landed.
struct Mapped {
    bias: u64,
    entry: u64,
    phdr: u64,
    end: u64,
}

/// A random number of pages below `1 << bits`, or 0 when the layout is
/// fixed.
fn random_pages(randomize: bool, bits: u32) -> u64 {
    if randomize {
        (random_u64() % (1 << bits)) * PAGE_SIZE
    } else {
        0
    }
}

fn map_elf(
    mm: &mut MemoryManager,
    elf: &Elf,
    main: bool,
    randomize: bool,
) -> Result<Mapped, Errno> {
    let loads: Vec<&Elf64Phdr> = elf.phdrs.iter().filter(|p| p.kind == PT_LOAD).collect();
    let first = loads.first().ok_or(Errno::ENOEXEC)?;
    let lo = page_down(first.vaddr);
    let mut hi = 0u64;
    for p in &loads {
        if p.filesz > p.memsz || p.vaddr % PAGE_SIZE != p.offset % PAGE_SIZE {
            return Err(Errno::ENOEXEC);
        }
        let end = p.vaddr.checked_add(p.memsz).ok_or(Errno::ENOEXEC)?;
        hi = hi.max(end);
    }
    let span = page_up(hi)
        .ok_or(Errno::ENOEXEC)?
        .checked_sub(lo)
        .ok_or(Errno::ENOEXEC)?;
    let bias = if elf.hdr.kind == ET_DYN {
        let hint = if main {
            ET_DYN_BASE + random_pages(randomize, 22)
        } else {
            0
        };
        mm.pick_address(hint, span)? - lo
    } else {
        0
    };
    for p in &loads {
        let start = page_down(bias + p.vaddr);
        let skew = (bias + p.vaddr) - start;
        let end = page_up(bias + p.vaddr + p.memsz).ok_or(Errno::ENOEXEC)?;
        if end == start {
            continue;
        }
        let prot = Prot {
            read: p.flags & PF_R != 0,
            write: p.flags & PF_W != 0,
            exec: p.flags & PF_X != 0,
        };
        // The file's pages, whole, as the kernel maps them: the last page
        // of a segment shows the file's next bytes, but where bss follows
        // (zeros from the segment's file end on, which the kernel writes).
        let avail = if p.memsz > p.filesz {
            p.filesz + skew
        } else {
            end - start
        };
        let backing = Backing::File {
            file: elf.file.clone(),
            pos: p.offset - skew,
            avail,
            name: elf.name.clone(),
            image: elf.file.image(mm.memory_file())?,
        };
        mm.map_fixed(start, end - start, prot, false, backing)?;
    }
    let phdr = elf
        .phdrs
        .iter()
        .find(|p| p.kind == PT_PHDR)
        .map(|p| p.vaddr)
        .or_else(|| {
            loads
                .iter()
                .find(|p| p.offset <= elf.hdr.phoff && elf.hdr.phoff < p.offset + p.filesz)
                .map(|p| p.vaddr + (elf.hdr.phoff - p.offset))
        })
        .unwrap_or(0)
        + bias;
    Ok(Mapped {
        bias,
        entry: elf.hdr.entry + bias,
        phdr,
        end: page_up(bias + hi).ok_or(Errno::ENOEXEC)?,
    })
}

/// Splits the `#!` line at the start of `buf` (a file's first bytes, zeros
/// past its end) into interpreter and optional argument as binfmt_script
/// does: the line ends at a newline, or, without one in the buffer, at its
/// last byte, as long as the interpreter's name ended before that (a name
/// cut short is `ENOEXEC`, an argument may be cut); the name ends at a
/// space, tab or NUL, the argument (the rest, trimmed) at a NUL.
fn parse_shebang(buf: &[u8; BINPRM_BUF_SIZE]) -> Result<(Vec<u8>, Option<Vec<u8>>), Errno> {
    let blank = |b: u8| b == b' ' || b == b'\t';
    let ends_name = |b: u8| blank(b) || b == 0;
    let cstr = |s: &[u8]| s.split(|&b| b == 0).next().unwrap_or_default().to_vec();
    let last = BINPRM_BUF_SIZE - 1;
    // (`strnchr`, which stops at a NUL)
    let newline = buf
        .iter()
        .take_while(|&&b| b != 0)
        .position(|&b| b == b'\n');
    let mut end = match newline {
        Some(i) => i,
        None => {
            // (the name must end within the buffer)
            let name = (2..=last).find(|&i| !blank(buf[i])).ok_or(Errno::ENOEXEC)?;
            (name..=last)
                .find(|&i| ends_name(buf[i]))
                .ok_or(Errno::ENOEXEC)?;
            last
        }
    };
    while blank(buf[end - 1]) {
        end -= 1;
    }
    let name = (2..=end)
        .find(|&i| !blank(buf[i]))
        .filter(|&i| i != end)
        .ok_or(Errno::ENOEXEC)?;
    let sep = (name..=end).find(|&i| ends_name(buf[i]));
    let arg = sep
        .filter(|&i| buf[i] != 0)
        .and_then(|sep| (sep..=end).find(|&i| !blank(buf[i])));
    match (sep, arg) {
        (Some(sep), Some(arg)) => Ok((cstr(&buf[name..sep]), Some(cstr(&buf[arg..end])))),
        _ => Ok((cstr(&buf[name..end]), None)),
    }
}

/// Where the interpreter a file names (`#!`, PT_INTERP) is looked up: an
/// empty name is the working directory, as the kernel's own lookup (not
/// one of a path from user space, which finds nothing) takes it.
fn interp_path(name: Vec<u8>) -> Vec<u8> {
    if name.is_empty() {
        b".".to_vec()
    } else {
        name
    }
}

/// Whether the segments of `elf` that must go where they say (ET_EXEC)
/// lie in `range`, or start at 0 (as `MemoryManager::map_fixed` allows).
fn fits(elf: &Elf, range: &Range<u64>) -> bool {
    elf.hdr.kind != ET_EXEC
        || elf
            .phdrs
            .iter()
            .filter(|p| p.kind == PT_LOAD && p.memsz > 0)
            .all(|p| {
                let start = page_down(p.vaddr);
                let end = p.vaddr.checked_add(p.memsz).and_then(page_up);
                (start >= range.start || start == 0) && end.is_some_and(|e| e <= range.end)
            })
}

/// An executable found, read and checked, not yet mapped: every error up to
/// here leaves the caller's address space untouched, as `execve` requires.
#[derive(Debug)]
pub struct Prepared {
    elf: Elf,
    interp: Option<Elf>,
    execfn: Vec<u8>,
    argv: Vec<Vec<u8>>,
    envp: Vec<Vec<u8>>,
    exe: String,
    file: ExecFile,
    unreadable: bool,
}

/// The ids a new program is told of in its auxiliary vector (`AT_UID`,
/// `AT_EUID`, `AT_GID`, `AT_EGID`) and whether it runs with privileges its
/// real user lacks (`AT_SECURE`: the C library then ignores `LD_PRELOAD`
/// and the like).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuxCreds {
    /// real user id
    pub uid: u32,
    /// effective user id
    pub euid: u32,
    /// real group id
    pub gid: u32,
    /// effective group id
    pub egid: u32,
    /// `AT_SECURE`
    pub secure: bool,
    /// the layout is randomised (not `personality(ADDR_NO_RANDOMIZE)`)
    pub randomize: bool,
}

impl AuxCreds {
    /// What `creds` (after `execve`) tell the program.
    pub fn new(creds: &crate::kernel::auth::Creds, secure: bool) -> Self {
        AuxCreds {
            uid: creds.uid[0],
            euid: creds.uid[1],
            gid: creds.gid[0],
            egid: creds.gid[1],
            secure,
            randomize: true,
        }
    }
}

impl Prepared {
    /// The program whose set-ID bits count (the last of a `#!` chain).
    pub fn exec_file(&self) -> ExecFile {
        self.file
    }

    /// Whether the caller may not read one of the files (program, `#!`
    /// interpreters, ELF interpreter): the process then stops being
    /// dumpable, as Linux's `would_dump` makes it, so that its memory
    /// does not show what the file holds.
    pub fn unreadable(&self) -> bool {
        self.unreadable
    }
}

impl std::fmt::Debug for Elf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Elf({})", self.name)
    }
}

/// Finds and checks the program named by `req` (following `#!` lines).
pub fn prepare(req: ExecRequest<'_>) -> Result<Prepared, Errno> {
    let ExecRequest {
        fs,
        root,
        cwd,
        mut path,
        mut argv,
        envp,
        creds,
        may_exec,
        user_range,
    } = req;
    let execfn = path.clone();
    for s in argv.iter().chain(envp.iter()) {
        if s.len() >= MAX_ARG_STRLEN {
            return Err(Errno::E2BIG);
        }
    }
    let mut depth = 0;
    let mut unreadable = false;
    let readable = |st: &abi::Stat| {
        creds.is_none_or(|c| {
            c.may_access(st.mode, st.uid, st.gid, crate::kernel::auth::MAY_READ)
                .is_ok()
        })
    };
    let (elf, exe, file) = loop {
        let (file_ref, loc, st) = open_exec(fs, root, cwd, &path, creds, may_exec)?;
        if depth > MAX_INTERP_DEPTH {
            return Err(Errno::ELOOP);
        }
        unreadable |= !readable(&st);
        // Linux's `bprm->buf`: zeros past the end of a shorter file.
        let mut head = [0u8; BINPRM_BUF_SIZE];
        pread_exact(&file_ref, &mut head, 0)?;
        if head.starts_with(b"#!") {
            depth += 1;
            let (interp, arg) = parse_shebang(&head)?;
            let mut new_argv = vec![interp.clone()];
            new_argv.extend(arg);
            new_argv.push(path.clone());
            new_argv.extend(argv.into_iter().skip(1));
            argv = new_argv;
            path = interp_path(interp);
            continue;
        }
        let file = ExecFile {
            mode: st.mode,
            uid: st.uid,
            gid: st.gid,
            nosuid: nosuid(&loc) || fs.guest_mount_flags(&loc).nosuid,
        };
        break (parse_elf(file_ref, loc.path(), &head)?, loc.path(), file);
    };
    let interp = match elf.phdrs.iter().find(|p| p.kind == PT_INTERP) {
        Some(p) => {
            // binfmt_elf: a name that does not fit or has no NUL at its
            // end is ENOEXEC, one the file holds only part of EIO; the
            // interpreter is opened as a program is, and a header it
            // holds only part of is EIO, any other fault in it ELIBBAD.
            if p.filesz < 2 || p.filesz > PATH_MAX {
                return Err(Errno::ENOEXEC);
            }
            let mut name = vec![0u8; p.filesz as usize];
            if pread_exact(&elf.file, &mut name, p.offset)? != name.len() {
                return Err(Errno::EIO);
            }
            if name.last() != Some(&0) {
                return Err(Errno::ENOEXEC);
            }
            let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            name.truncate(len);
            let (file, loc, st) = open_exec(fs, root, cwd, &interp_path(name), creds, may_exec)?;
            unreadable |= !readable(&st);
            let mut head = [0u8; std::mem::size_of::<Elf64Ehdr>()];
            if pread_exact(&file, &mut head, 0)? != head.len() {
                return Err(Errno::EIO);
            }
            Some(parse_elf(file, loc.path(), &head).map_err(|_| Errno::ELIBBAD)?)
        }
        None => None,
    };
    // Linux maps fixed segments anywhere below TASK_SIZE, but the pages
    // the platform keeps are not the guest's: a program with a segment
    // there fails here, with the caller still running, rather than dying
    // once its old image is gone.
    if !fits(&elf, &user_range) || interp.as_ref().is_some_and(|i| !fits(i, &user_range)) {
        return Err(Errno::ENOMEM);
    }
    Ok(Prepared {
        elf,
        interp,
        execfn,
        argv,
        envp,
        exe,
        file,
        unreadable,
    })
}

/// Replaces everything in `mm` with the prepared program, so that a context
/// switched to the returned registers starts it. An error here comes after
/// the old image is gone: the caller must kill the task.
pub fn commit(
    mm: &mut MemoryManager,
    prepared: Prepared,
    aux: AuxCreds,
    time: &crate::loader::vdso_time::TimeKeeper,
) -> Result<Loaded, Errno> {
    let Prepared {
        elf,
        interp,
        execfn,
        argv,
        envp,
        exe,
        ..
    } = prepared;
    mm.clear()?;
    // Stack first, at a randomised top, so mmap searches start below it.
    let rnd = aux.randomize;
    let stack_top = page_down(mm.max_addr() - PAGE_SIZE - random_pages(rnd, 16));
    let stack_base = stack_top - STACK_SIZE;
    mm.map_fixed(stack_base, STACK_SIZE, Prot::RW, false, Backing::Anon)?;
    mm.set_mmap_top(stack_base - (1 << 30) - random_pages(rnd, 20));

    // The vDSO: the Sentry's own image, read-only and executable, and its
    // time page below the stack (AT_SYSINFO_EHDR).
    let vdso_base = crate::loader::vdso::install(mm, time)?;
    mm.set_special((stack_base, stack_top), vdso_base);

    let main = map_elf(mm, &elf, true, rnd)?;
    let brk_start = main.end + random_pages(rnd, 13);
    mm.init_brk(brk_start)?;
    let (entry, base) = match &interp {
        Some(i) => {
            let m = map_elf(mm, i, false, rnd)?;
            (m.entry, m.bias)
        }
        None => (main.entry, 0),
    };

    // Strings at the top of the stack, then the pointer arrays below them.
    let mut sp = stack_top;
    let mut push_bytes = |mm: &mut MemoryManager, data: &[u8], nul: bool| -> Result<u64, Errno> {
        let len = data.len() as u64 + u64::from(nul);
        sp = sp.checked_sub(len).ok_or(Errno::E2BIG)?;
        if sp < stack_base + STACK_SIZE / 4 * 3 {
            return Err(Errno::E2BIG);
        }
        mm.copy_out(sp, data)?;
        if nul {
            mm.copy_out(sp + data.len() as u64, &[0])?;
        }
        Ok(sp)
    };
    let comm: Vec<u8> = execfn
        .rsplit(|&b| b == b'/')
        .next()
        .unwrap_or_default()
        .iter()
        .copied()
        .take(15)
        .collect();
    let execfn_addr = push_bytes(mm, &execfn, true)?;
    let platform_addr = push_bytes(mm, b"x86_64", true)?;
    let mut rand = [0u8; 16];
    crate::host::getrandom(&mut rand);
    let random_addr = push_bytes(mm, &rand, false)?;
    let mut env_ptrs = Vec::with_capacity(envp.len());
    for e in envp.iter().rev() {
        env_ptrs.push(push_bytes(mm, e, true)?);
    }
    env_ptrs.reverse();
    let mut arg_ptrs = Vec::with_capacity(argv.len());
    for a in argv.iter().rev() {
        arg_ptrs.push(push_bytes(mm, a, true)?);
    }
    arg_ptrs.reverse();

    let auxv: Vec<(u64, u64)> = vec![
        (AT_SYSINFO_EHDR, vdso_base),
        (AT_HWCAP, crate::host::getauxval(AT_HWCAP)),
        (AT_PAGESZ, PAGE_SIZE),
        (AT_CLKTCK, 100),
        (AT_PHDR, main.phdr),
        (AT_PHENT, std::mem::size_of::<Elf64Phdr>() as u64),
        (AT_PHNUM, elf.phdrs.len() as u64),
        (AT_BASE, base),
        (AT_FLAGS, 0),
        (AT_ENTRY, main.entry),
        (AT_UID, aux.uid.into()),
        (AT_EUID, aux.euid.into()),
        (AT_GID, aux.gid.into()),
        (AT_EGID, aux.egid.into()),
        (AT_SECURE, aux.secure.into()),
        (AT_RANDOM, random_addr),
        (AT_HWCAP2, crate::host::getauxval(AT_HWCAP2)),
        (AT_EXECFN, execfn_addr),
        (AT_PLATFORM, platform_addr),
        (
            AT_MINSIGSTKSZ,
            crate::host::getauxval(AT_MINSIGSTKSZ).max(abi::signal::MINSIGSTKSZ),
        ),
        (AT_NULL, 0),
    ];
    let words = 1 + arg_ptrs.len() + 1 + env_ptrs.len() + 1 + auxv.len() * 2;
    let mut table: Vec<u64> = Vec::with_capacity(words);
    table.push(arg_ptrs.len() as u64);
    table.extend(&arg_ptrs);
    table.push(0);
    table.extend(&env_ptrs);
    table.push(0);
    for &(k, v) in &auxv {
        table.push(k);
        table.push(v);
    }
    let bytes: Vec<u8> = table.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let sp = (sp - bytes.len() as u64) & !15;
    if sp < stack_base + STACK_SIZE / 4 * 3 {
        return Err(Errno::E2BIG);
    }
    mm.copy_out(sp, &bytes)?;
    Ok(Loaded {
        regs: Regs::initial(entry, sp),
        exe,
        comm,
        auxv: auxv
            .iter()
            .flat_map(|&(k, v)| [k, v])
            .flat_map(u64::to_ne_bytes)
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    /// `parse_shebang` of a file that starts with `head`.
    fn shebang(head: &[u8]) -> Result<(Vec<u8>, Option<Vec<u8>>), Errno> {
        let mut buf = [0; BINPRM_BUF_SIZE];
        let n = head.len().min(BINPRM_BUF_SIZE);
        buf[..n].copy_from_slice(&head[..n]);
        parse_shebang(&buf)
    }

    fn line(name: &str, arg: Option<&[u8]>) -> Result<(Vec<u8>, Option<Vec<u8>>), Errno> {
        Ok((name.as_bytes().to_vec(), arg.map(<[u8]>::to_vec)))
    }

    #[test]
    fn shebang_lines() {
        assert_eq!(shebang(b"#!/bin/sh\necho"), line("/bin/sh", None));
        assert_eq!(
            shebang(b"#!  /usr/bin/env  python3 -u \n"),
            line("/usr/bin/env", Some(b"python3 -u"))
        );
        assert_eq!(shebang(b"#!/bin/sh"), line("/bin/sh", None));
        assert_eq!(shebang(b"#!   \n"), Err(Errno::ENOEXEC));
        assert_eq!(shebang(b"#!\n"), Err(Errno::ENOEXEC));
        // A NUL ends the name, or the argument, and hides a newline.
        assert_eq!(shebang(b"#!/bin/echo\0 no\n"), line("/bin/echo", None));
        assert_eq!(shebang(b"#!/bin/sh -x\0y\n"), line("/bin/sh", Some(b"-x")));
        assert_eq!(shebang(b"#!/bin/sh \0\n"), line("/bin/sh", Some(b"")));
        assert_eq!(shebang(b"#! \0/bin/sh\n"), line("", None));
    }

    #[test]
    fn shebang_past_the_buffer() {
        // The name must end within the buffer; the argument is cut at its
        // last byte.
        let long_name = [b"#!/".as_slice(), &[b'x'; 300]].concat();
        assert_eq!(shebang(&long_name), Err(Errno::ENOEXEC));
        let long_arg = [b"#!/bin/echo ".as_slice(), &[b'a'; 300]].concat();
        let cut = [b'a'; BINPRM_BUF_SIZE - 1 - 12];
        assert_eq!(shebang(&long_arg), line("/bin/echo", Some(&cut)));
        let newline_late = [b"#!/bin/sh ".as_slice(), &[b'a'; 300], b"\n"].concat();
        assert_eq!(shebang(&newline_late).map(|l| l.0), Ok(b"/bin/sh".to_vec()));
    }

    proptest! {
        #[test]
        fn shebang_any_bytes(rest in proptest::collection::vec(any::<u8>(), 0..300)) {
            let head = [b"#!".as_slice(), &rest].concat();
            if let Ok((name, arg)) = shebang(&head) {
                prop_assert!(!name.iter().any(|&b| b" \t\n\0".contains(&b)));
                prop_assert!(!arg.unwrap_or_default().iter().any(|&b| b"\n\0".contains(&b)));
            }
        }
    }
}
