//! Core files: the ELF image Linux writes when a process dies of a signal
//! whose default action dumps core (`core(5)`), for gdb to read back.
//!
//! Notes as Linux orders them (`NT_PRSTATUS`, `NT_PRPSINFO`, `NT_SIGINFO`,
//! `NT_AUXV`, `NT_FILE`, `NT_FPREGSET`, `NT_X86_XSTATE`) for the thread that
//! took the signal, then one `PT_LOAD` per mapping, holding what Linux's
//! default `coredump_filter` keeps: anonymous and written private memory
//! whole, the first page of a mapped ELF file, nothing of other file pages.

use abi::SigInfo;
use zerocopy::IntoBytes;

use crate::kernel::task::Task;
use crate::mm::Backing;
use crate::sync::Locked;

const PAGE: u64 = 4096;
const NT_PRSTATUS: u32 = 1;
const NT_FPREGSET: u32 = 2;
const NT_PRPSINFO: u32 = 3;
const NT_AUXV: u32 = 6;
const NT_X86_XSTATE: u32 = 0x202;
const NT_X86_XSAVE_LAYOUT: u32 = 0x205;
const NT_SIGINFO: u32 = 0x5349_4749;
const NT_FILE: u32 = 0x4649_4c45;

/// One mapping of the image: address range, flags, and how many of its
/// bytes the file holds.
struct Load {
    start: u64,
    end: u64,
    flags: u32,
    dump: u64,
}

fn note(out: &mut Vec<u8>, name: &[u8], kind: u32, desc: &[u8]) {
    let pad4 = |v: &mut Vec<u8>| v.resize(v.len().next_multiple_of(4), 0);
    out.extend((name.len() as u32 + 1).to_le_bytes());
    out.extend((desc.len() as u32).to_le_bytes());
    out.extend(kind.to_le_bytes());
    out.extend(name);
    out.push(0);
    pad4(out);
    out.extend(desc);
    pad4(out);
}

fn put(buf: &mut [u8], at: usize, v: &[u8]) {
    buf[at..at + v.len()].copy_from_slice(v);
}

/// A core file: its headers and notes, then guest memory at file offsets.
/// The writer copies the memory a page at a time (no copy of the whole
/// process is made) and leaves pages of zeros as holes, as Linux does.
#[derive(Debug)]
pub struct Image {
    /// the file's length
    pub size: u64,
    /// the bytes at offset 0
    pub head: Vec<u8>,
    /// (file offset, guest address, length), page-aligned
    pub segments: Vec<(u64, u64, u64)>,
}

/// The core image of `task`'s process, dying of `info`'s signal, at most
/// `limit` bytes long (`RLIMIT_CORE`: Linux stops writing there).
pub fn image(task: &mut Task, info: &SigInfo, limit: u64) -> Image {
    let fp = task.ctx.fpstate().unwrap_or_default();
    let (ppid, pgid, sid, comm, cmdline, auxv) = {
        let st = task.proc_.state();
        (
            st.ppid,
            st.pgid,
            st.sid,
            st.info.comm.clone(),
            st.info.cmdline.clone(),
            st.info.auxv.clone(),
        )
    };
    let (pid, tid) = (task.pid(), task.tid());
    let mm = task.mm.clone();
    let mm = mm.locked();

    // NT_PRSTATUS: struct elf_prstatus (336 bytes on x86-64).
    let mut prstatus = [0u8; 336];
    put(&mut prstatus, 0, &info.signo.to_le_bytes());
    put(&mut prstatus, 4, &info.code.to_le_bytes());
    put(&mut prstatus, 8, &info.errno.to_le_bytes());
    put(&mut prstatus, 12, &(info.signo as u16).to_le_bytes());
    put(&mut prstatus, 24, &task.thread.state().mask.to_le_bytes());
    for (i, v) in [tid, ppid, pgid, sid].iter().enumerate() {
        put(&mut prstatus, 32 + 4 * i, &v.to_le_bytes());
    }
    let regs: Vec<u8> = crate::kernel::ptrace::user_regs(&task.regs)
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    put(&mut prstatus, 112, &regs);
    put(&mut prstatus, 328, &1i32.to_le_bytes());

    // NT_PRPSINFO: struct elf_prpsinfo (136 bytes).
    let mut psinfo = [0u8; 136];
    psinfo[0] = 0; // running
    psinfo[1] = b'R';
    put(&mut psinfo, 16, &task.creds.uid[0].to_le_bytes());
    put(&mut psinfo, 20, &task.creds.gid[0].to_le_bytes());
    for (i, v) in [pid, ppid, pgid, sid].iter().enumerate() {
        put(&mut psinfo, 24 + 4 * i, &v.to_le_bytes());
    }
    let name = &comm.as_bytes()[..comm.len().min(15)];
    put(&mut psinfo, 40, name);
    let args: Vec<u8> = cmdline
        .iter()
        .take(79)
        .map(|&b| if b == 0 { b' ' } else { b })
        .collect();
    put(&mut psinfo, 56, args.trim_ascii_end());

    // The mappings, and NT_FILE for those of files.
    let mut loads = Vec::new();
    let mut files: Vec<(u64, u64, u64, String)> = Vec::new();
    for v in mm.vmas() {
        let flags =
            u32::from(v.prot.read) << 2 | u32::from(v.prot.write) << 1 | u32::from(v.prot.exec);
        let len = v.end - v.start;
        let special = !mm.label(v).is_empty();
        let dump = match &v.backing {
            _ if !v.prot.read && !v.prot.write && !v.prot.exec => 0,
            _ if special => len,
            Backing::Anon | Backing::Shared(_) => len,
            Backing::File { pos, name, .. } => {
                files.push((v.start, v.end, pos / PAGE, name.clone()));
                let mut magic = [0u8; 4];
                if v.prot.write {
                    len
                } else if *pos == 0 && mm.peek(v.start, &mut magic).is_ok() && magic == *b"\x7fELF"
                {
                    PAGE.min(len)
                } else {
                    0
                }
            }
        };
        loads.push(Load {
            start: v.start,
            end: v.end,
            flags,
            dump,
        });
    }
    loads.truncate(0xfffe);

    let mut notes = Vec::new();
    note(&mut notes, b"CORE", NT_PRSTATUS, &prstatus);
    note(&mut notes, b"CORE", NT_PRPSINFO, &psinfo);
    note(&mut notes, b"CORE", NT_SIGINFO, info.as_bytes());
    note(&mut notes, b"CORE", NT_AUXV, &auxv);
    let mut nt_file = Vec::new();
    nt_file.extend((files.len() as u64).to_le_bytes());
    nt_file.extend(PAGE.to_le_bytes());
    for (s, e, off, _) in &files {
        for w in [s, e, off] {
            nt_file.extend(w.to_le_bytes());
        }
    }
    for (.., name) in &files {
        nt_file.extend(name.as_bytes());
        nt_file.push(0);
    }
    note(&mut notes, b"CORE", NT_FILE, &nt_file);
    if fp.len() >= 512 {
        note(&mut notes, b"CORE", NT_FPREGSET, &fp[..512]);
    }
    if fp.len() > 512 {
        let mut x = fp.clone();
        x[464..472].copy_from_slice(&crate::host::xcr0().to_le_bytes());
        note(&mut notes, b"LINUX", NT_X86_XSTATE, &x);
        // struct x86_xfeat_component per extended component: debuggers
        // find the registers in the area by it.
        let layout: Vec<u8> = crate::host::xsave_layout()
            .into_iter()
            .flat_map(|(i, size, off)| [i, size, off, 0])
            .flat_map(u32::to_le_bytes)
            .collect();
        note(&mut notes, b"LINUX", NT_X86_XSAVE_LAYOUT, &layout);
    }

    // ELF header, program headers, notes, then the page-aligned contents.
    let phnum = 1 + loads.len();
    let notes_at = 64 + 56 * phnum as u64;
    let mut data_at = (notes_at + notes.len() as u64).next_multiple_of(PAGE);
    let mut out = Vec::new();
    out.extend(b"\x7fELF\x02\x01\x01");
    out.resize(16, 0);
    out.extend(4u16.to_le_bytes()); // ET_CORE
    out.extend(62u16.to_le_bytes()); // EM_X86_64
    out.extend(1u32.to_le_bytes());
    out.extend(0u64.to_le_bytes());
    out.extend(64u64.to_le_bytes());
    out.extend(0u64.to_le_bytes());
    out.extend(0u32.to_le_bytes());
    for h in [64u16, 56, phnum as u16, 0, 0, 0] {
        out.extend(h.to_le_bytes());
    }
    let phdr = |out: &mut Vec<u8>, kind: u32, flags: u32, w: [u64; 6]| {
        out.extend(kind.to_le_bytes());
        out.extend(flags.to_le_bytes());
        for x in w {
            out.extend(x.to_le_bytes());
        }
    };
    phdr(&mut out, 4, 0, [notes_at, 0, 0, notes.len() as u64, 0, 0]);
    for l in &loads {
        phdr(
            &mut out,
            1,
            l.flags,
            [data_at, l.start, 0, l.dump, l.end - l.start, PAGE],
        );
        data_at += l.dump;
    }
    out.extend(&notes);
    out.truncate(limit as usize);
    let size = data_at.min(limit);
    let mut segments = Vec::new();
    let mut off = (notes_at + notes.len() as u64).next_multiple_of(PAGE);
    for l in loads.iter().filter(|l| l.dump > 0) {
        if off >= limit {
            break;
        }
        segments.push((off, l.start, l.dump.min(limit - off)));
        off += l.dump;
    }
    Image {
        size,
        head: out,
        segments,
    }
}
