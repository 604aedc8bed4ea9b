//! Saving a running sandbox when its guest asks, and starting a sandbox
//! from the saved image (`ferrovisor do --save DIR`, `do --restore DIR`).
//!
//! A write to `/proc/ferrovisor/checkpoint` asks; the image is written as
//! that call returns, so the writer stands at a system call boundary, and
//! a restored copy goes on from the same return. This first version saves
//! a sandbox of one process with one thread; what it cannot save (another
//! task, a pipe or socket, shared memory, an armed timer) is named in the
//! one line the checkpoint fails with, and the sandbox runs on.
//!
//! The image: a header (magic, version, payload length, checksum), then
//! the process, its address space ([`crate::mm::snapshot`]) and its
//! descriptors. Standard descriptors become the restoring caller's; other
//! files are opened again by path and must be unchanged.

use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};

use abi::{Errno, KSigaction, OpenFlags, StackT};
use zerocopy::{FromBytes, IntoBytes};

use crate::fsimpl::tmpfs::{MemInode, MemKind};
use crate::kernel::auth::{CapSets, Creds};
use crate::kernel::task::{FsContext, Process, ProcessState, Task, Thread};
use crate::kernel::{Error, Kernel};
use crate::mm::snapshot::{bad, Bad, Dec, Enc, Files};
use crate::mm::{Mappable, MemoryManager};
use crate::sync::Locked;
use crate::vfs::file::{FdEntry, FdTable, FileDescription, FileKind};

/// The first bytes of every image.
const MAGIC: &[u8; 8] = b"FVSNAP\r\n";

/// The layout this Sentry writes and reads.
const VERSION: u32 = 2;

/// Magic, version, flags, payload length, checksum.
const HEADER: usize = 8 + 4 + 4 + 8 + 8;

/// The kinds of tmpfs node an image holds.
const NODE_DIR: u8 = 0;
const NODE_FILE: u8 = 1;
const NODE_LINK: u8 = 2;

/// Longest name in a tmpfs directory (`NAME_MAX`).
const NAME_MAX: usize = 255;

/// How a descriptor is found again at restore.
const FD_STDIO: u8 = 0;
const FD_PATH: u8 = 1;
const FD_CONSOLE: u8 = 2;

/// A 64-bit checksum of the payload, eight bytes a step (a torn or
/// corrupt image, not an attacker, is what it catches: who may restore
/// an image is the host's file permissions' business).
fn checksum(data: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ data.len() as u64;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        h = (h ^ u64::from_le_bytes(b))
            .wrapping_mul(0x0000_0100_0000_01b3)
            .rotate_left(23);
    }
    for &b in words.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A process's seccomp state in an image: none, or the filter every
/// process started from outside gets (an OCI `linux.seccomp`, which the
/// restoring bundle gives again).
const SECCOMP_NONE: u8 = 0;
const SECCOMP_CONTAINER: u8 = 1;

/// How `task`'s seccomp state is saved; filters of the guest's own are not
/// yet.
fn seccomp_of(task: &Task) -> Result<u8, String> {
    if !task.thread.seccomp.active() {
        return Ok(SECCOMP_NONE);
    }
    let st = task.thread.state();
    let s = &st.seccomp;
    match (&s.filter, &task.kernel.container_seccomp) {
        (Some(f), Some(c))
            if s.mode == crate::kernel::seccomp::Mode::Filter && Arc::ptr_eq(f, c) =>
        {
            Ok(SECCOMP_CONTAINER)
        }
        _ => Err("the process installed a seccomp filter of its own (not saved yet)".into()),
    }
}

/// The registers in `user_regs_struct` order.
fn regs_words(r: &platform::Regs) -> [u64; 27] {
    [
        r.r15, r.r14, r.r13, r.r12, r.rbp, r.rbx, r.r11, r.r10, r.r9, r.r8, r.rax, r.rcx, r.rdx,
        r.rsi, r.rdi, r.orig_rax, r.rip, r.cs, r.eflags, r.rsp, r.ss, r.fs_base, r.gs_base, r.ds,
        r.es, r.fs, r.gs,
    ]
}

fn regs_of(w: &[u64; 27]) -> platform::Regs {
    platform::Regs {
        r15: w[0],
        r14: w[1],
        r13: w[2],
        r12: w[3],
        rbp: w[4],
        rbx: w[5],
        r11: w[6],
        r10: w[7],
        r9: w[8],
        r8: w[9],
        rax: w[10],
        rcx: w[11],
        rdx: w[12],
        rsi: w[13],
        rdi: w[14],
        orig_rax: w[15],
        rip: w[16],
        cs: w[17],
        eflags: w[18],
        rsp: w[19],
        ss: w[20],
        fs_base: w[21],
        gs_base: w[22],
        ds: w[23],
        es: w[24],
        fs: w[25],
        gs: w[26],
    }
}

/// What identifies a host file's contents: size and modification time.
fn identity_of(st: &abi::Stat) -> Vec<u8> {
    let mut e = Enc::default();
    for w in [st.size as u64, st.mtime as u64, st.mtime_nsec as u64] {
        e.u64(w);
    }
    e.buf
}

/// Files of the sandbox's root and volumes, by guest path.
struct SandboxFiles<'a>(&'a Kernel);

impl Files for SandboxFiles<'_> {
    fn describe(&self, name: &str, file: &Arc<dyn Mappable>) -> Result<Vec<u8>, String> {
        let st =
            crate::host::fstat(file.fd()).map_err(|e| format!("the mapped file {name}: {e}"))?;
        Ok(identity_of(&crate::host::to_abi_stat(&st)))
    }

    fn find(&self, name: &str, identity: &[u8]) -> Result<crate::mm::snapshot::Found, String> {
        let fs = &self.0.fs;
        let gone = |e: Errno| format!("{name}, mapped in the saved process: {e}");
        let loc = fs
            .resolve(&fs.root(), name.as_bytes(), true)
            .map_err(gone)?;
        let host = fs.open_host(&loc).map_err(gone)?;
        let st = crate::host::fstat(host.fd()).map_err(|e| format!("{name}: {e}"))?;
        if identity_of(&crate::host::to_abi_stat(&st)) != identity {
            return Err(format!(
                "{name} has changed since the checkpoint (restore into the same root)"
            ));
        }
        let image = host
            .image(&self.0.memory)
            .map_err(|e| format!("{name}: {e}"))?;
        Ok((host, image))
    }
}

/// Called at a task's boundary while a save is asked for (see
/// [`crate::kernel::Checkpointing`]): the first task makes it.
pub fn at_boundary(task: &mut Task) {
    use std::sync::atomic::Ordering;
    let kernel = task.kernel.clone();
    let ck = &kernel.checkpoint;
    if !ck.requested.swap(false, Ordering::AcqRel) {
        return;
    }
    let started = std::time::Instant::now();
    let once = ck.once.locked().take();
    let result = match once.as_ref().or(ck.target.as_ref()) {
        Some(file) => save(task, file),
        None => Err("the sandbox was started without --save".into()),
    };
    crate::kernel::task::CHECKPOINT_ASKED.store(false, Ordering::Release);
    let status = match result {
        Ok(len) => {
            tracing::info!(
                "checkpoint saved: {len} bytes in {:.1} ms",
                started.elapsed().as_secs_f64() * 1e3
            );
            "saved\n".to_string()
        }
        Err(why) if once.is_some() => format!("failed: {why}\n"),
        Err(why) => {
            // The user who asked for the save reads why on stderr (one
            // from outside gets it back); the guest reads it from the file.
            let line = format!("ferrovisor: checkpoint not saved: {why}\n");
            let _ = crate::host::write(
                crate::vfs::file::FileDescription::stdio_borrow(2),
                line.as_bytes(),
            );
            format!("failed: {why}\n")
        }
    };
    let mut held = ck.status.locked();
    *held = status;
    ck.rounds.fetch_add(1, Ordering::AcqRel);
    ck.ended.notify_all();
}

/// Writes into `target` the image of the sandbox `task` (its only task)
/// is in, as it stands at this boundary. Returns its size.
fn save(task: &mut Task, target: &std::fs::File) -> Result<u64, String> {
    let payload = encode(task)?;
    let mut head = Vec::with_capacity(HEADER);
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&VERSION.to_le_bytes());
    head.extend_from_slice(&0u32.to_le_bytes());
    head.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    head.extend_from_slice(&checksum(&payload).to_le_bytes());
    let io = |e: std::io::Error| format!("writing the image: {e}");
    target.set_len(0).map_err(io)?;
    target.write_all_at(&head, 0).map_err(io)?;
    target.write_all_at(&payload, HEADER as u64).map_err(io)?;
    target.sync_all().map_err(io)?;
    Ok((HEADER + payload.len()) as u64)
}

fn encode(task: &mut Task) -> Result<Vec<u8>, String> {
    let kernel = task.kernel.clone();
    {
        let procs = kernel.procs();
        if procs.map.len() != 1 || procs.threads.len() != 1 {
            return Err(format!(
                "the sandbox has {} processes and {} threads (only a sandbox of one \
                 single-threaded process is saved yet)",
                procs.map.len(),
                procs.threads.len()
            ));
        }
    }
    let mut e = Enc::default();
    e.u32(task.pid() as u32);
    for w in regs_words(&task.regs) {
        e.u64(w);
    }
    let fp = task
        .ctx
        .fpstate()
        .map_err(|err| format!("reading the FPU state: {err}"))?;
    e.bytes(&fp);
    {
        let t = task.thread.state();
        if t.ptrace.is_some() {
            return Err("the process is traced".into());
        }
        if t.pending.bits != 0 {
            return Err("a signal is pending for the thread".into());
        }
        e.u64(t.mask);
    }
    e.bytes(task.altstack.as_bytes());
    e.u64(task.clear_child_tid);
    e.u64(task.robust_list.0);
    e.u64(task.robust_list.1);
    e.bytes(&task.comm);
    e.bytes(task.exe.as_bytes());
    e.u8(u8::from(task.no_new_privs));
    let c = &task.creds;
    for id in c.uid.iter().chain(&c.gid) {
        e.u32(*id);
    }
    e.u64(c.groups.len() as u64);
    for g in &c.groups {
        e.u32(*g);
    }
    let caps = c.caps;
    for w in [
        caps.effective,
        caps.permitted,
        caps.inheritable,
        caps.bounding,
        caps.ambient,
    ] {
        e.u64(w);
    }
    e.u32(c.securebits);
    e.u8(seccomp_of(task)?);
    {
        let p = task.proc_.state();
        if p.itimers.iter().any(Option::is_some) || !p.posix_timers.is_empty() {
            return Err("the process has a timer armed (timers are not saved yet)".into());
        }
        if p.pending.bits != 0 {
            return Err("a signal is pending for the process".into());
        }
        if !p.tracees.is_empty() {
            return Err("the process traces another".into());
        }
        e.bytes(p.actions.as_bytes());
        for r in &p.rlimits {
            e.u64(r.cur);
            e.u64(r.max);
        }
        e.u32(p.personality);
        e.u8(u8::from(p.dumpable));
        e.bytes(&p.info.cmdline);
        e.bytes(&p.info.environ);
        e.bytes(&p.info.auxv);
    }
    {
        let fs = task.fs.locked();
        e.bytes(fs.cwd.path().as_bytes());
        e.u32(fs.umask);
    }
    save_tmpfs(&kernel, &mut e)?;
    task.mm()
        .save(&mut e, kernel.timekeeper.region(), &SandboxFiles(&kernel))?;
    save_fds(task, &mut e)?;
    Ok(e.buf)
}

fn save_meta(n: &MemInode, e: &mut Enc) {
    let m = n.meta();
    e.u32(m.mode);
    e.u32(m.uid);
    e.u32(m.gid);
    for t in [m.atime, m.mtime, m.ctime] {
        e.u64(t.tv_sec as u64);
        e.u64(t.tv_nsec as u64);
    }
    let names = n.list_xattr();
    e.u64(names.len() as u64);
    for name in names {
        e.bytes(&name);
        e.bytes(&n.get_xattr(&name).unwrap_or_default());
    }
}

/// The sandbox's own tmpfs (/tmp, /run, /dev/shm), each a tree in
/// preorder: a node, then for a directory its count of entries and each
/// entry's name and node. (A loop, not recursion: the guest decides how
/// deep the tree is.)
fn save_tmpfs(kernel: &Kernel, e: &mut Enc) -> Result<(), String> {
    for (top, root) in kernel.fs.saved_tmpfs()? {
        // (name in its directory, node, path for messages)
        let mut stack: Vec<(Option<Vec<u8>>, Arc<MemInode>, String)> =
            vec![(None, root.clone(), top.to_string())];
        while let Some((name, n, path)) = stack.pop() {
            if let Some(name) = name {
                e.bytes(&name);
            }
            let failed = |err: Errno| format!("{path}: {err}");
            match &n.kind {
                MemKind::Dir(_) => {
                    e.u8(NODE_DIR);
                    save_meta(&n, e);
                    let entries = n.entries_all().map_err(failed)?;
                    e.u64(entries.len() as u64);
                    // Pushed last to first, so that they come out in order.
                    for (name, _, _) in entries.into_iter().rev() {
                        let child = n.lookup(&name).map_err(failed)?;
                        let shown = format!("{path}/{}", String::from_utf8_lossy(&name));
                        stack.push((Some(name), child, shown));
                    }
                }
                MemKind::File(_) => {
                    if n.meta().nlink > 1 {
                        return Err(format!(
                            "{path}: a tmpfs file with hard links (not saved yet)"
                        ));
                    }
                    e.u8(NODE_FILE);
                    save_meta(&n, e);
                    let mut data = vec![0u8; n.size() as usize];
                    let mut done = 0;
                    while done < data.len() {
                        match n.read_at(done as u64, &mut data[done..]).map_err(failed)? {
                            0 => break,
                            k => done += k,
                        }
                    }
                    data.truncate(done);
                    e.bytes(&data);
                }
                MemKind::Symlink(target) => {
                    e.u8(NODE_LINK);
                    save_meta(&n, e);
                    e.bytes(target);
                }
                MemKind::Fifo(_) => return Err(format!("{path}: a FIFO (not saved yet)")),
                MemKind::Socket(_) => return Err(format!("{path}: a Unix socket (not saved yet)")),
                MemKind::Whiteout => return Err(format!("{path}: an overlay whiteout")),
            }
        }
    }
    Ok(())
}

/// A tmpfs node's metadata as [`save_meta`] wrote it.
struct SavedMeta {
    mode: u32,
    ids: (u32, u32),
    times: [abi::Timespec; 3],
    xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

fn read_meta(d: &mut Dec<'_>) -> Result<SavedMeta, Bad> {
    let mode = d.u32()? & 0o7777;
    let ids = (d.u32()?, d.u32()?);
    let mut times = [abi::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    }; 3];
    for t in &mut times {
        t.tv_sec = d.u64()? as i64;
        t.tv_nsec = (d.u64()? % 1_000_000_000) as i64;
    }
    let n = d.count(16)?;
    let mut xattrs = Vec::with_capacity(n);
    for _ in 0..n {
        xattrs.push((d.bytes()?.to_vec(), d.bytes()?.to_vec()));
    }
    Ok(SavedMeta {
        mode,
        ids,
        times,
        xattrs,
    })
}

fn apply_meta(n: &MemInode, m: &SavedMeta) -> Result<(), Errno> {
    n.set_mode(m.mode);
    n.set_owner(m.ids.0, m.ids.1);
    for (name, value) in &m.xattrs {
        n.set_xattr(name, value, 0)?;
    }
    n.restore_times(m.times[0], m.times[1], m.times[2]);
    Ok(())
}

/// Fills the new sandbox's own tmpfs from what [`save_tmpfs`] wrote.
fn restore_tmpfs(kernel: &Kernel, d: &mut Dec<'_>) -> Result<(), Error> {
    let b = |e: Bad| Error::Restore(e.0);
    let roots = kernel.fs.saved_tmpfs().map_err(Error::Restore)?;
    for (top, root) in roots {
        let fail = |what: &dyn std::fmt::Display| Error::Restore(format!("{top}: {what}"));
        if d.u8().map_err(b)? != NODE_DIR {
            return Err(fail(&"the image's tmpfs does not start with a directory"));
        }
        let meta = read_meta(d).map_err(b)?;
        apply_meta(root, &meta).map_err(|e| fail(&e))?;
        let mut stack = vec![(root.clone(), d.count(9).map_err(b)?)];
        while let Some((dir, left)) = stack.last_mut() {
            if *left == 0 {
                stack.pop();
                continue;
            }
            *left -= 1;
            let dir = dir.clone();
            let name = d.bytes().map_err(b)?.to_vec();
            if name.is_empty()
                || name.len() > NAME_MAX
                || name.contains(&b'/')
                || name.contains(&0)
                || name == b"."
                || name == b".."
            {
                return Err(fail(&"the image holds a file name Linux would not take"));
            }
            let kind = d.u8().map_err(b)?;
            let meta = read_meta(d).map_err(b)?;
            let ids = meta.ids;
            let made = |e: Errno| fail(&format_args!("{}: {e}", String::from_utf8_lossy(&name)));
            let node = match kind {
                NODE_DIR => {
                    let n = dir
                        .create(&name, abi::S_IFDIR | meta.mode, ids, || {
                            MemKind::Dir(Default::default())
                        })
                        .map_err(made)?;
                    stack.push((n.clone(), d.count(9).map_err(b)?));
                    n
                }
                NODE_FILE => {
                    let data = d.bytes().map_err(b)?;
                    let n = dir
                        .create(&name, abi::S_IFREG | meta.mode, ids, || {
                            MemKind::File(Default::default())
                        })
                        .map_err(made)?;
                    n.write_all_at(0, data).map_err(made)?;
                    n
                }
                NODE_LINK => {
                    let target = d.bytes().map_err(b)?.to_vec();
                    dir.create(&name, abi::S_IFLNK | 0o777, ids, || {
                        MemKind::Symlink(target)
                    })
                    .map_err(made)?
                }
                _ => return Err(fail(&"the image holds a tmpfs node of an unknown kind")),
            };
            apply_meta(&node, &meta).map_err(made)?;
        }
    }
    Ok(())
}

fn save_fds(task: &Task, e: &mut Enc) -> Result<(), String> {
    let fds = task.fds();
    let open = fds.open_fds();
    e.u64(open.len() as u64);
    let console = task.kernel.checkpoint.console.get();
    for fd in open {
        let entry = fds
            .get(fd as i64)
            .map_err(|_| "the descriptor table changed")?;
        let file = &entry.file;
        e.u32(fd as u32);
        e.u8(u8::from(entry.cloexec));
        e.u32(file.flags());
        let what = |kind: &str| {
            format!("descriptor {fd} ({kind}): only standard descriptors and files opened by path are saved yet")
        };
        match &file.kind {
            FileKind::Stdio(n) => {
                e.u8(FD_STDIO);
                e.u32(*n as u32);
            }
            _ if console.is_some_and(|c| Arc::ptr_eq(c, file)) => e.u8(FD_CONSOLE),
            FileKind::Host(_) | FileKind::Dev(_) | FileKind::SynthDir | FileKind::Impl(_) => {
                // Files that opening their path again gives back: host
                // files of the root and volumes, devices, /proc files.
                let by_path = match &file.kind {
                    FileKind::Impl(_) => file.downcast::<crate::fsimpl::proc::ProcFile>().is_some(),
                    _ => true,
                };
                let Some(loc) = file.location.as_ref().filter(|_| by_path) else {
                    return Err(what(&kind_name(&file.kind)));
                };
                e.u8(FD_PATH);
                e.bytes(loc.path().as_bytes());
                e.u64(*file.pos.locked());
                let identity = match &file.kind {
                    FileKind::Host(_) if !file.is_dir() => identity_of(
                        &file
                            .stat()
                            .map_err(|err| format!("descriptor {fd}: {err}"))?,
                    ),
                    _ => Vec::new(),
                };
                e.bytes(&identity);
            }
            FileKind::Mem(m) => {
                // A file of the tmpfs the image carries, while it still
                // has its name there.
                let fs = &task.kernel.fs;
                let named = file.location.as_ref().filter(|loc| {
                    fs.resolve(&fs.root(), loc.path().as_bytes(), false)
                        .is_ok_and(|l| l.node().mem().is_some_and(|n| Arc::ptr_eq(n, m)))
                });
                let Some(loc) = named else {
                    return Err(format!(
                        "descriptor {fd} (a tmpfs file without its name, or of a tmpfs not saved): not saved yet"
                    ));
                };
                e.u8(FD_PATH);
                e.bytes(loc.path().as_bytes());
                e.u64(*file.pos.locked());
                e.bytes(&[]);
            }
            _ => return Err(what(&kind_name(&file.kind))),
        }
    }
    Ok(())
}

/// What an open file is, in a word or two.
fn kind_name(kind: &FileKind) -> String {
    match kind {
        FileKind::Host(_) => "a host file".into(),
        FileKind::Dev(_) => "a device".into(),
        FileKind::SynthDir => "a directory".into(),
        FileKind::Stdio(_) => "a standard descriptor".into(),
        FileKind::Path => "an O_PATH descriptor".into(),
        FileKind::Mem(_) => "a tmpfs file".into(),
        // (`Pipe(...)`, `SocketFile { ... }`: the type's name is enough)
        FileKind::Impl(i) => {
            let full = format!("{i:?}");
            let end = full.find(['(', ' ', '{']).unwrap_or(full.len());
            full[..end].to_string()
        }
    }
}

/// An image's payload, its header checked.
pub fn payload(image: &[u8]) -> Result<&[u8], Bad> {
    if image.len() < HEADER || &image[..8] != MAGIC {
        return bad("not a ferrovisor sandbox image");
    }
    let word = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&image[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let version = u32::from_le_bytes([image[8], image[9], image[10], image[11]]);
    if version != VERSION {
        return bad(format!(
            "an image of version {version}; this ferrovisor reads version {VERSION}"
        ));
    }
    let (len, sum) = (word(16), word(24));
    let body = &image[HEADER..];
    if body.len() as u64 != len {
        return bad(format!(
            "the image is truncated or has bytes past its end ({} of {len} bytes)",
            body.len()
        ));
    }
    if checksum(body) != sum {
        return bad("the image is corrupt (its checksum does not match)");
    }
    Ok(body)
}

/// Builds the saved process from `image` in the new sandbox `kernel`, on
/// the calling host thread, which must run it; `console` is the
/// sandbox's terminal, if it has one.
pub fn restore_process(
    kernel: &Arc<Kernel>,
    image: &[u8],
    console: Option<(Arc<FileDescription>, Arc<dyn crate::kernel::task::Terminal>)>,
) -> Result<Task, Error> {
    let fail = |why: String| Error::Restore(why);
    let started = std::time::Instant::now();
    let body = payload(image).map_err(|e| fail(e.0))?;
    let checked = started.elapsed();
    let mut d = Dec::new(body);
    let b = |e: Bad| Error::Restore(e.0);
    let pid = d.u32().map_err(b)? as i32;
    let mut words = [0u64; 27];
    for w in &mut words {
        *w = d.u64().map_err(b)?;
    }
    // The segment selectors are those of every 64-bit user thread, not
    // the image's.
    let saved = regs_of(&words);
    let fresh = platform::Regs::initial(saved.rip, saved.rsp);
    let regs = platform::Regs {
        cs: fresh.cs,
        ss: fresh.ss,
        ds: 0,
        es: 0,
        fs: 0,
        gs: 0,
        ..saved
    };
    let fp = d.bytes().map_err(b)?.to_vec();
    let mask = d.u64().map_err(b)?;
    let altstack = StackT::read_from_bytes(d.bytes().map_err(b)?)
        .map_err(|_| fail("the image's signal stack is malformed".into()))?;
    let clear_child_tid = d.u64().map_err(b)?;
    let robust_list = (d.u64().map_err(b)?, d.u64().map_err(b)?);
    let comm = d.bytes().map_err(b)?.to_vec();
    let exe = d.string().map_err(b)?;
    let no_new_privs = d.u8().map_err(b)? != 0;
    let mut uid = [0u32; 4];
    let mut gid = [0u32; 4];
    for id in uid.iter_mut().chain(gid.iter_mut()) {
        *id = d.u32().map_err(b)?;
    }
    let n = d.count(4).map_err(b)?;
    let mut groups = Vec::with_capacity(n);
    for _ in 0..n {
        groups.push(d.u32().map_err(b)?);
    }
    let mut caps = [0u64; 5];
    for w in &mut caps {
        *w = d.u64().map_err(b)?;
    }
    let securebits = d.u32().map_err(b)?;
    let seccomp = d.u8().map_err(b)?;
    let seccomp = match (seccomp, &kernel.container_seccomp) {
        (SECCOMP_NONE, _) => None,
        (SECCOMP_CONTAINER, Some(f)) => Some(f.clone()),
        (SECCOMP_CONTAINER, None) => {
            return Err(fail(
                "the saved process ran under the container's seccomp filter, and this \
                 bundle has none (restore with the bundle it was saved from)"
                    .into(),
            ))
        }
        _ => return Err(fail("the image's seccomp state is malformed".into())),
    };
    let mut creds = Creds::new(uid[0], gid[0], groups);
    creds.uid = uid;
    creds.gid = gid;
    creds.caps = CapSets {
        effective: caps[0],
        permitted: caps[1],
        inheritable: caps[2],
        bounding: caps[3],
        ambient: caps[4],
    };
    creds.securebits = securebits;
    let actions = <[KSigaction; 64]>::read_from_bytes(d.bytes().map_err(b)?)
        .map_err(|_| fail("the image's signal handlers are malformed".into()))?;
    let mut rlimits = [abi::Rlimit { cur: 0, max: 0 }; abi::rlimit::RLIM_NLIMITS];
    for r in &mut rlimits {
        r.cur = d.u64().map_err(b)?;
        r.max = d.u64().map_err(b)?;
    }
    let personality = d.u32().map_err(b)?;
    let dumpable = d.u8().map_err(b)? != 0;
    let cmdline = d.bytes().map_err(b)?.to_vec();
    let environ = d.bytes().map_err(b)?.to_vec();
    let auxv = d.bytes().map_err(b)?.to_vec();
    let cwd_path = d.bytes().map_err(b)?.to_vec();
    let umask = d.u32().map_err(b)? & 0o777;

    let root = kernel.fs.root();
    let cwd = kernel
        .fs
        .resolve(&root, &cwd_path, true)
        .ok()
        .filter(|l| l.node().is_dir())
        .ok_or_else(|| {
            fail(format!(
                "the working directory {} is not in the sandbox",
                String::from_utf8_lossy(&cwd_path)
            ))
        })?;
    restore_tmpfs(kernel, &mut d)?;
    let space = kernel.platform.new_address_space()?;
    let mut mm = MemoryManager::new(
        kernel.memory.clone(),
        space,
        kernel.platform.max_user_address(),
    );
    let mm_started = std::time::Instant::now();
    mm.restore(&mut d, kernel.timekeeper.region(), &SandboxFiles(kernel))
        .map_err(fail)?;
    let mm_took = mm_started.elapsed();
    let mut ctx = kernel.platform.new_context()?;
    if !fp.is_empty() {
        ctx.set_fpstate(&fp)?;
    }

    let got = kernel
        .procs()
        .alloc_pid()
        .map_err(|e| Error::Spawn(format!("no task for it ({e})")))?;
    if got != pid {
        return Err(fail(format!(
            "the saved process was pid {pid}, and the new sandbox gives {got}"
        )));
    }
    let proc_ = Process::new(
        pid,
        ProcessState::new(0, pid, pid, abi::signal::SIGCHLD, actions),
    );
    let thread = Thread::new(pid, proc_.clone(), mask);
    let (console_file, tty) = match console {
        Some((f, t)) => (Some(f), Some(t)),
        None => (None, None),
    };
    {
        let mut st = proc_.state();
        st.threads.push(thread.clone());
        st.rlimits = rlimits;
        st.unkillable = pid == 1;
        st.dumpable = dumpable;
        st.personality = personality;
        if let Some(t) = tty {
            if t.attach(pid, pid) {
                st.ctty = Some(t);
            }
        }
        st.info.cmdline = cmdline;
        st.info.environ = environ;
        st.info.auxv = auxv;
    }
    {
        let mut procs = kernel.procs();
        procs.map.insert(pid, proc_.clone());
        procs.threads.insert(pid, thread.clone());
    }
    thread.set_interrupter(Some(ctx.interrupter()));
    let ids = (creds.uid[3], creds.gid[3]);
    let mut task = Task {
        thread,
        proc_,
        kernel: kernel.clone(),
        regs,
        mm: Arc::new(Mutex::new(mm)),
        ctx,
        fds: Arc::new(Mutex::new(FdTable::default())),
        fs: Arc::new(Mutex::new(FsContext {
            cwd,
            root: kernel.fs.root(),
            umask,
        })),
        ids,
        creds,
        keyrings: Default::default(),
        clear_child_tid,
        robust_list,
        comm,
        exe,
        exit: None,
        no_new_privs,
        restart: None,
        saved_mask: None,
        nowait: false,
        altstack,
        patch_checked: 0,
        stale_fault: None,
        seccomp_copy: Default::default(),
    };
    if let Some(f) = seccomp {
        let mut st = task.thread.state();
        let s = crate::kernel::seccomp::Seccomp {
            mode: crate::kernel::seccomp::Mode::Filter,
            filter: Some(f),
        };
        task.thread.set_seccomp(&mut st, s);
    }
    restore_fds(&mut task, &mut d, console_file)?;
    if !d.is_empty() {
        return Err(fail("the image has bytes past its end".into()));
    }
    *kernel.checkpoint.status.locked() = "restored\n".into();
    task.publish_info();
    task.publish_privileges();
    tracing::info!(
        "sandbox restored from {} bytes in {:.2} ms (image checked in {:.2} ms, address space in {:.2} ms)",
        image.len(),
        started.elapsed().as_secs_f64() * 1e3,
        checked.as_secs_f64() * 1e3,
        mm_took.as_secs_f64() * 1e3,
    );
    Ok(task)
}

fn restore_fds(
    task: &mut Task,
    d: &mut Dec<'_>,
    console: Option<Arc<FileDescription>>,
) -> Result<(), Error> {
    let fail = Error::Restore;
    let b = |e: Bad| Error::Restore(e.0);
    let n = d.count(10).map_err(b)?;
    for _ in 0..n {
        let fd = d.u32().map_err(b)? as usize;
        let cloexec = d.u8().map_err(b)? != 0;
        let flags = d.u32().map_err(b)?;
        let file = match d.u8().map_err(b)? {
            FD_STDIO => {
                let n = d.u32().map_err(b)? as i32;
                if !(0..3).contains(&n) {
                    return Err(fail(format!("descriptor {fd} names host descriptor {n}")));
                }
                // The restoring caller's own descriptor, with its own mode.
                let Some(file) = crate::kernel::stdio_file(n) else {
                    continue;
                };
                file
            }
            FD_CONSOLE => match &console {
                Some(c) => c.clone(),
                None => continue,
            },
            FD_PATH => {
                let path = d.bytes().map_err(b)?.to_vec();
                let pos = d.u64().map_err(b)?;
                let identity = d.bytes().map_err(b)?.to_vec();
                let shown = String::from_utf8_lossy(&path).into_owned();
                let reopen =
                    flags & !(OpenFlags::CREAT | OpenFlags::TRUNC | OpenFlags::EXCL).bits();
                let mut made = false;
                let got = super::fs::open_path(
                    task,
                    abi::AT_FDCWD as u64,
                    path,
                    reopen,
                    0,
                    Default::default(),
                    &mut made,
                )
                .map_err(|e| fail(format!("descriptor {fd} ({shown}): {e}")))?;
                let entry = task
                    .fds()
                    .remove(got as i64)
                    .map_err(|e| fail(format!("descriptor {fd}: {e}")))?;
                let file = entry.file;
                if !identity.is_empty() {
                    let st = file
                        .stat()
                        .map_err(|e| fail(format!("descriptor {fd} ({shown}): {e}")))?;
                    if identity_of(&st) != identity {
                        return Err(fail(format!(
                            "{shown} (descriptor {fd}) has changed since the checkpoint"
                        )));
                    }
                }
                *file.pos.locked() = pos;
                file
            }
            _ => {
                return Err(fail(
                    "the image holds a descriptor of an unknown kind".into(),
                ))
            }
        };
        let limit = task.nofile();
        task.fds()
            .insert_at(fd, FdEntry { file, cloexec }, limit)
            .map_err(|e| fail(format!("descriptor {fd}: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(payload: &[u8]) -> Vec<u8> {
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&VERSION.to_le_bytes());
        v.extend_from_slice(&0u32.to_le_bytes());
        v.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        v.extend_from_slice(&checksum(payload).to_le_bytes());
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn the_header_is_checked_before_anything_is_read() {
        let good = image(b"0123456789abcdef-");
        assert_eq!(payload(&good), Ok(&b"0123456789abcdef-"[..]));
        assert!(payload(b"not an image at all, not at all")
            .is_err_and(|e| e.0.contains("not a ferrovisor sandbox image")));
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap_or(&mut 0) ^= 1;
        assert!(payload(&flipped).is_err_and(|e| e.0.contains("checksum")));
        assert!(payload(&good[..good.len() - 1]).is_err_and(|e| e.0.contains("truncated")));
        let mut newer = good.clone();
        newer[8] = 9;
        assert!(payload(&newer).is_err_and(|e| e.0.contains("version 9")));
    }

    #[test]
    fn registers_round_trip_in_order() {
        let mut w = [0u64; 27];
        for (i, x) in w.iter_mut().enumerate() {
            *x = i as u64 * 3 + 1;
        }
        assert_eq!(regs_words(&regs_of(&w)), w);
    }
}
