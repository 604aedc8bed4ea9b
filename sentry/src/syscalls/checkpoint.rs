//! Saving a running sandbox when its guest asks, and starting a sandbox
//! from the saved image (`ferrovisor do --save DIR`, `do --restore DIR`).
//!
//! A write to `/proc/ferrovisor/checkpoint` asks; the image is written as
//! that call returns, so the writer stands at a system call boundary, and
//! a restored copy goes on from the same return. What it cannot save yet
//! (docs/checkpoint.md lists it) is named in the one line the checkpoint
//! fails with, and the sandbox runs on.
//!
//! The image: a header (magic, version, the payload's length and checksum,
//! the page area's), the payload (processes, address spaces
//! ([`crate::mm::snapshot`]), descriptors), then, page-aligned, the page
//! area that a restore maps and shares ([`Image`]). Standard descriptors
//! become the restoring caller's; other files are opened again by path
//! and must be unchanged.

use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use abi::{Errno, KSigaction, OpenFlags, StackT};
use zerocopy::{FromBytes, IntoBytes};

use crate::fsimpl::devpts::{Pty, PtyEnd};
use crate::fsimpl::events::{Epoll, EventFd, SignalFd, TimerFd};
use crate::fsimpl::pipe::{Pipe, PipeEnd};
use crate::fsimpl::tmpfs::{MemInode, MemKind};
use crate::kernel::auth::{CapSets, Creds};
use crate::kernel::task::{FsContext, Process, ProcessState, Task, Thread, CHECKPOINT_ASKED};
use crate::kernel::{Error, Kernel};
use crate::mm::snapshot::{bad, Bad, Dec, Enc, Files, PageArea};
use crate::mm::{Mappable, MemoryManager};
use crate::socket::unix::{Creds as UnixCreds, Saved as UnixSaved, SockType, UnixSocket};
use crate::sync::Locked;
use crate::vfs::file::{FdEntry, FdTable, FileDescription, FileKind};

/// The first bytes of every image.
const MAGIC: &[u8; 8] = b"FVSNAP\r\n";

/// The layout this Sentry writes and reads.
const VERSION: u32 = 7;

/// Magic, version, flags, payload length and checksum, page area length
/// and checksum.
const HEADER: usize = 8 + 4 + 4 + 8 + 8 + 8 + 8;

/// Where the page area of an image whose payload is `len` bytes starts.
fn pages_at(len: u64) -> u64 {
    (HEADER as u64 + len).div_ceil(crate::PAGE_SIZE) * crate::PAGE_SIZE
}

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
const FD_PIPE: u8 = 3;
const FD_EVENTFD: u8 = 4;
const FD_EPOLL: u8 = 5;
const FD_UNIX: u8 = 6;
const FD_LISTENER: u8 = 7;
const FD_DETACHED: u8 = 8;
const FD_PTY: u8 = 9;
const FD_CONSOLE_SLAVE: u8 = 10;
const FD_TIMERFD: u8 = 11;
const FD_SIGNALFD: u8 = 12;

/// A process's controlling terminal in an image.
const CTTY_NONE: u8 = 0;
const CTTY_CONSOLE: u8 = 1;
const CTTY_PTY: u8 = 2;

/// Kernel objects the open files of an image share: pipes (their bytes),
/// epoll instances (their interests), sockets and ptys, each saved once.
#[derive(Default)]
struct Objects {
    pipes: Vec<Arc<Pipe>>,
    epolls: Vec<Arc<FileDescription>>,
    unix: Vec<Arc<UnixSocket>>,
    ptys: Vec<Arc<Pty>>,
    /// the pty of the sandbox's terminal (`do` at a tty): not saved, the
    /// restored sandbox's own terminal takes its place
    console: Option<Arc<Pty>>,
}

impl Objects {
    fn new(kernel: &Kernel) -> Objects {
        let console = kernel.checkpoint.console.get();
        Objects {
            console: console.and_then(|c| Some(c.downcast::<PtyEnd>()?.pty.clone())),
            ..Objects::default()
        }
    }

    /// Whether `pty` is the sandbox's terminal.
    fn is_console(&self, pty: &Arc<Pty>) -> bool {
        self.console.as_ref().is_some_and(|c| Arc::ptr_eq(c, pty))
    }
}

/// A Unix socket of the image: what it was, its queued messages, and its
/// peer (an index among them).
fn save_unix(objects: &mut Objects, e: &mut Enc) -> Result<(), String> {
    let mut body = Enc::default();
    let mut i = 0;
    while let Some(sock) = objects.unix.get(i).cloned() {
        let (s, peer) = sock
            .saved()
            .map_err(|why| format!("{why} (not saved yet)"))?;
        body.u8(match s.kind {
            SockType::Stream => 0,
            SockType::Dgram => 1,
            SockType::SeqPacket => 2,
        });
        body.u32(peer.map_or(0, |p| index_of(&mut objects.unix, &p) + 1));
        match s.peer_creds {
            Some(c) => {
                body.u8(1);
                body.u32(c.pid as u32);
                body.u32(c.uid);
                body.u32(c.gid);
            }
            None => body.u8(0),
        }
        let flags = u8::from(s.rd_shut)
            | u8::from(s.wr_shut) << 1
            | u8::from(s.peer_gone) << 2
            | u8::from(s.was_connected) << 3
            | u8::from(s.passcred) << 4;
        body.u8(flags);
        body.u64(s.rcvbuf as u64);
        body.u64(s.sndbuf as u64);
        body.u64(s.messages.len() as u64);
        for (data, c) in &s.messages {
            body.bytes(data);
            body.u32(c.pid as u32);
            body.u32(c.uid);
            body.u32(c.gid);
        }
        i += 1;
    }
    e.u64(objects.unix.len() as u64);
    e.buf.extend_from_slice(&body.buf);
    Ok(())
}

/// The Unix sockets [`save_unix`] wrote, connected to each other again.
fn read_unix(d: &mut Dec<'_>, kernel: &Kernel) -> Result<Vec<Arc<UnixSocket>>, Bad> {
    let n = d.count(34)?;
    let registry = crate::socket::state(kernel).unix.clone();
    let mut socks = Vec::with_capacity(n);
    let mut peers = Vec::with_capacity(n);
    for _ in 0..n {
        let kind = match d.u8()? {
            0 => SockType::Stream,
            1 => SockType::Dgram,
            2 => SockType::SeqPacket,
            _ => return bad("the image has a socket of an unknown type"),
        };
        peers.push(d.u32()? as usize);
        let creds = |d: &mut Dec<'_>| -> Result<UnixCreds, Bad> {
            Ok(UnixCreds {
                pid: d.u32()? as i32,
                uid: d.u32()?,
                gid: d.u32()?,
            })
        };
        let peer_creds = if d.u8()? != 0 { Some(creds(d)?) } else { None };
        let flags = d.u8()?;
        let (rcvbuf, sndbuf) = (d.u64()? as usize, d.u64()? as usize);
        let m = d.count(20)?;
        let mut messages = Vec::with_capacity(m);
        let mut queued = 0usize;
        for _ in 0..m {
            let data = d.bytes()?.to_vec();
            queued = queued.saturating_add(data.len());
            messages.push((data, creds(d)?));
        }
        if queued > 4 * crate::socket::unix::BUF_MAX {
            return bad("a socket of the image holds more than its buffer");
        }
        let s = UnixSaved {
            kind,
            peer_creds,
            rd_shut: flags & 1 != 0,
            wr_shut: flags & 2 != 0,
            peer_gone: flags & 4 != 0,
            was_connected: flags & 8 != 0,
            passcred: flags & 16 != 0,
            rcvbuf,
            sndbuf,
            messages,
        };
        socks.push(UnixSocket::restored(&s, registry.clone()));
    }
    for (sock, peer) in socks.iter().zip(peers) {
        if peer > socks.len() {
            return bad("a socket of the image names a peer it does not have");
        }
        if peer > 0 {
            sock.link_restored(&socks[peer - 1]);
        }
    }
    Ok(socks)
}

/// A 64-bit checksum of the payload, eight bytes a step (a torn or
/// corrupt image, not an attacker, is what it catches: who may restore
/// an image is the host's file permissions' business).
fn checksum(data: &[u8]) -> u64 {
    let mut sum = Checksum::new(data.len() as u64);
    let whole = data.len() / 8 * 8;
    sum.words(&data[..whole]);
    sum.end(&data[whole..])
}

/// [`checksum`] over data that comes in pieces (each but the last a
/// multiple of eight bytes long).
struct Checksum(u64);

impl Checksum {
    fn new(len: u64) -> Checksum {
        Checksum(0xcbf2_9ce4_8422_2325u64 ^ len)
    }

    fn words(&mut self, data: &[u8]) {
        for w in data.chunks_exact(8) {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            self.0 = (self.0 ^ u64::from_le_bytes(b))
                .wrapping_mul(0x0000_0100_0000_01b3)
                .rotate_left(23);
        }
    }

    fn end(mut self, rest: &[u8]) -> u64 {
        for &b in rest {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0
    }
}

/// A sandbox image opened for a restore: its header and payload read and
/// checked; its page area stays in the file, which the restore maps (so
/// every sandbox restored from one file shares the host's cached pages).
#[derive(Debug)]
pub struct Image {
    /// header and payload
    bytes: Vec<u8>,
    file: std::fs::File,
}

impl Image {
    /// Reads the header and payload of the image in `file` and checks
    /// them (magic, version, sizes, the payload's checksum).
    pub fn open(file: std::fs::File) -> Result<Image, Bad> {
        let mut head = [0u8; HEADER];
        let size = file
            .metadata()
            .or_else(|e| bad(format!("reading the image: {e}")))?
            .len();
        if size < HEADER as u64 {
            return bad("not a ferrovisor sandbox image (too short)");
        }
        file.read_exact_at(&mut head, 0)
            .or_else(|e| bad(format!("reading the image: {e}")))?;
        framed(&head, true)?;
        let (len, pages) = (word(&head, 16), word(&head, 32));
        let want = (len < size)
            .then(|| pages_at(len).checked_add(pages))
            .flatten();
        if want != Some(size) {
            return bad(format!(
                "the image is truncated or has bytes past its end ({size} bytes, not {})",
                want.map_or_else(|| "that many".to_string(), |w| w.to_string())
            ));
        }
        let mut bytes = vec![0u8; HEADER + len as usize];
        bytes[..HEADER].copy_from_slice(&head);
        file.read_exact_at(&mut bytes[HEADER..], HEADER as u64)
            .or_else(|e| bad(format!("reading the image: {e}")))?;
        payload(&bytes)?;
        Ok(Image { bytes, file })
    }

    /// The file the image was read from.
    pub fn file(&self) -> &std::fs::File {
        &self.file
    }

    /// Where the page area is in the file, and its length.
    fn page_area(&self) -> (u64, u64) {
        (pages_at(word(&self.bytes, 16)), word(&self.bytes, 32))
    }

    /// Reads the page area and checks its checksum (which [`Image::open`]
    /// leaves to the caller: a runtime may remember it checked this file).
    pub fn check_pages(&self) -> Result<(), Bad> {
        let (at, len) = self.page_area();
        let mut sum = Checksum::new(len);
        let mut buf = vec![0u8; 1 << 20];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(buf.len() as u64) as usize;
            self.file
                .read_exact_at(&mut buf[..n], at + done)
                .or_else(|e| bad(format!("reading the image's pages: {e}")))?;
            sum.words(&buf[..n / 8 * 8]);
            done += n as u64;
        }
        if sum.end(&[]) != word(&self.bytes, 40) {
            return bad("the image is corrupt (the checksum of its pages does not match)");
        }
        Ok(())
    }
}

/// The little-endian word at `at` of an image's header.
fn word(head: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&head[at..at + 8]);
    u64::from_le_bytes(b)
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
        // (a file the Sentry keeps in memory, as its own init, is mapped
        // from a copy: its size is what can be compared)
        let in_memory = crate::fsimpl::tmpfs::mem_of(loc.node()).is_some();
        let host = fs.open_exec(&loc).map_err(gone)?;
        let st = crate::host::fstat(host.fd()).map_err(|e| format!("{name}: {e}"))?;
        let now = identity_of(&crate::host::to_abi_stat(&st));
        let same = if in_memory {
            now.get(..8) == identity.get(..8)
        } else {
            now == identity
        };
        if !same {
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

/// One task's own state, taken by the task itself at its boundary (its
/// registers and FPU state are readable only on its own host thread), and
/// what it shares with others.
struct Record {
    own: Vec<u8>,
    mm: Arc<Mutex<MemoryManager>>,
    fds: Arc<Mutex<FdTable>>,
    fs: Arc<Mutex<FsContext>>,
}

/// The tasks stopped for a save, by thread id, and the round (one per
/// save) they wait for the end of.
struct Freeze {
    round: u64,
    records: Vec<(i32, Result<Record, String>)>,
}

static FREEZE: Mutex<Freeze> = Mutex::new(Freeze {
    round: 0,
    records: Vec::new(),
});

/// Signalled as a task parks and as a save ends.
static THAW: std::sync::Condvar = std::sync::Condvar::new();

/// How long a save waits for every task to come to a boundary.
const GATHER: Duration = Duration::from_secs(10);

/// Called at a task's boundary while a save is asked for (see
/// [`crate::kernel::Checkpointing`]): the first task makes the save once
/// every other has stopped at a boundary of its own; the others wait.
pub fn at_boundary(task: &mut Task) {
    use std::sync::atomic::Ordering;
    let kernel = task.kernel.clone();
    let ck = &kernel.checkpoint;
    if !ck.requested.swap(false, Ordering::AcqRel) {
        park(task);
        return;
    }
    let started = std::time::Instant::now();
    let once = ck.once.locked().take();
    let (result, parked) = match once.as_ref().or(ck.target.as_ref()) {
        Some(file) => gather_and_save(task, file),
        None => (
            Err("the sandbox was started without --save".into()),
            FREEZE.locked(),
        ),
    };
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
    {
        let mut held = ck.status.locked();
        *held = status;
        ck.rounds.fetch_add(1, Ordering::AcqRel);
        ck.ended.notify_all();
    }
    // The others go on only now: a guest that reads the status next sees
    // this save's.
    thaw(parked);
}

/// Ends the round: every parked task goes on.
fn thaw(mut f: std::sync::MutexGuard<'static, Freeze>) {
    f.records.clear();
    f.round += 1;
    CHECKPOINT_ASKED.store(false, std::sync::atomic::Ordering::Release);
    THAW.notify_all();
}

/// Stops `task` at its boundary until the save under way ends.
fn park(task: &mut Task) {
    use std::sync::atomic::Ordering;
    let record = record_of(task);
    let mut f = FREEZE.locked();
    if !CHECKPOINT_ASKED.load(Ordering::Acquire) {
        return;
    }
    let round = f.round;
    f.records.push(record);
    THAW.notify_all();
    while f.round == round && CHECKPOINT_ASKED.load(Ordering::Acquire) {
        f = THAW
            .wait_timeout(f, Duration::from_millis(100))
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
    }
}

/// Waits until every live thread has parked, then writes the image of
/// the whole sandbox into `target`: its size, and the parked tasks, which
/// go on (saved or not) once [`thaw`]ed.
fn gather_and_save(
    task: &mut Task,
    target: &std::fs::File,
) -> (Result<u64, String>, std::sync::MutexGuard<'static, Freeze>) {
    let kernel = task.kernel.clone();
    let own = record_of(task);
    let mut f = FREEZE.locked();
    f.records.push(own);
    let deadline = std::time::Instant::now() + GATHER;
    let gathered = loop {
        if let Some((tid, Err(why))) = f.records.iter().find(|(_, r)| r.is_err()) {
            break Err(format!("thread {tid}: {why}"));
        }
        let missing: Vec<Arc<Thread>> = kernel
            .procs()
            .threads
            .values()
            .filter(|t| !f.records.iter().any(|(tid, _)| *tid == t.tid))
            .cloned()
            .collect();
        let Some(first) = missing.first() else {
            break Ok(());
        };
        if std::time::Instant::now() >= deadline {
            break Err(format!(
                "thread {} of process {} did not stop where it can be saved within {} s \
                 (stopped, in vfork, or in a call that cannot be interrupted)",
                first.tid,
                first.process.pid,
                GATHER.as_secs()
            ));
        }
        drop(f);
        for t in &missing {
            t.waiter.wake();
            t.interrupt();
        }
        f = THAW
            .wait_timeout(FREEZE.locked(), Duration::from_millis(20))
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
    };
    let result = gathered.and_then(|()| {
        let t = std::time::Instant::now();
        let (payload, pages) = encode(&kernel, &f.records)?;
        let encoded = t.elapsed();
        let len = write_image(target, &payload, &pages)?;
        tracing::debug!(
            "image encoded in {:.1} ms, written in {:.1} ms",
            encoded.as_secs_f64() * 1e3,
            (t.elapsed() - encoded).as_secs_f64() * 1e3
        );
        Ok(len)
    });
    (result, f)
}

/// Writes header, `payload` and the page area `pages` into `target`; the
/// image's size.
fn write_image(target: &std::fs::File, payload: &[u8], pages: &[u8]) -> Result<u64, String> {
    let mut head = Vec::with_capacity(HEADER);
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&VERSION.to_le_bytes());
    head.extend_from_slice(&0u32.to_le_bytes());
    for w in [
        payload.len() as u64,
        checksum(payload),
        pages.len() as u64,
        checksum(pages),
    ] {
        head.extend_from_slice(&w.to_le_bytes());
    }
    let io = |e: std::io::Error| format!("writing the image: {e}");
    let at = pages_at(payload.len() as u64);
    target.set_len(0).map_err(io)?;
    target.write_all_at(&head, 0).map_err(io)?;
    target.write_all_at(payload, HEADER as u64).map_err(io)?;
    target.write_all_at(pages, at).map_err(io)?;
    // (not flushed to the disk: a save is not a commit, and an image torn
    // by a host crash fails its checksums at restore)
    target.set_len(at + pages.len() as u64).map_err(io)?;
    Ok(at + pages.len() as u64)
}

fn record_of(task: &mut Task) -> (i32, Result<Record, String>) {
    let record = own_state(task).map(|own| Record {
        own,
        mm: task.mm.clone(),
        fds: task.fds.clone(),
        fs: task.fs.clone(),
    });
    (task.tid(), record)
}

/// A signal queue: its count of instances, then each signal and its
/// `siginfo`.
fn save_sigqueue(q: &crate::kernel::task::SigQueue, e: &mut Enc) {
    let entries = q.entries();
    e.u64(entries.len() as u64);
    for (sig, info) in entries {
        e.u32(sig as u32);
        e.bytes(info.as_bytes());
    }
}

fn read_sigqueue(d: &mut Dec<'_>) -> Result<Vec<(i32, abi::SigInfo)>, Bad> {
    let n = d.count(12)?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let sig = d.u32()? as i32;
        if !(1..=64).contains(&sig) {
            return bad("the image has a pending signal out of range");
        }
        let info = abi::SigInfo::read_from_bytes(d.bytes()?)
            .or_else(|_| bad("the image's siginfo is malformed"))?;
        v.push((sig, info));
    }
    Ok(v)
}

/// The state a task holds of its own: registers, FPU, signal mask and
/// pending signals, alternate stack, ids and capabilities, seccomp.
fn own_state(task: &mut Task) -> Result<Vec<u8>, String> {
    let mut e = Enc::default();
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
            return Err("it is traced (ptrace is not saved yet)".into());
        }
        if t.landlock.is_some() {
            return Err("it enforces a Landlock ruleset (not saved yet)".into());
        }
        e.u64(t.mask);
        save_sigqueue(&t.pending, &mut e);
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
    Ok(e.buf)
}

/// The index of `item` in `list` (by identity), added when new.
fn index_of<T: ?Sized>(list: &mut Vec<Arc<T>>, item: &Arc<T>) -> u32 {
    match list.iter().position(|x| Arc::ptr_eq(x, item)) {
        Some(i) => i as u32,
        None => {
            list.push(item.clone());
            (list.len() - 1) as u32
        }
    }
}

/// How a process ended, for a zombie.
const LIVE: u8 = 0;
const EXITED: u8 = 1;
const KILLED: u8 = 2;

/// The image's payload: the tmpfs trees, the open file descriptions, the
/// descriptor tables, working directories, address spaces (each a blob
/// its first thread's host thread reads back) and the processes with
/// their threads, init first.
fn encode(
    kernel: &Arc<Kernel>,
    records: &[(i32, Result<Record, String>)],
) -> Result<(Vec<u8>, Vec<u8>), String> {
    let mut procs: Vec<Arc<Process>> = kernel.procs().map.values().cloned().collect();
    procs.sort_by_key(|p| (p.pid != 1, p.pid));
    let record = |tid: i32| {
        records
            .iter()
            .find_map(|(t, r)| (*t == tid).then_some(r.as_ref().ok()).flatten())
    };
    let (mut mms, mut tables, mut dirs) = (Vec::new(), Vec::new(), Vec::new());
    let mut body = Enc::default();
    let mut objects = Objects::new(kernel);
    body.u64(procs.len() as u64);
    for p in &procs {
        let st = p.state();
        let who = format!("process {} ({})", p.pid, st.info.comm);
        if !st.posix_timers.is_empty() {
            return Err(format!(
                "{who} has a POSIX timer (timer_create is not saved yet)"
            ));
        }
        if !st.tracees.is_empty() {
            return Err(format!("{who} traces another"));
        }
        if st.stopped.is_some() {
            return Err(format!("{who} is stopped"));
        }
        for w in [p.pid, st.ppid, st.pgid, st.sid, st.exit_signal] {
            body.u32(w as u32);
        }
        match st.exit {
            None => {
                body.u8(LIVE);
                body.u32(0);
            }
            Some(crate::kernel::task::ExitStatus::Code(c)) => {
                body.u8(EXITED);
                body.u32(c as u32);
            }
            Some(crate::kernel::task::ExitStatus::Signal(s)) => {
                body.u8(KILLED);
                body.u32(s as u32);
            }
        }
        body.bytes(st.actions.as_bytes());
        for r in &st.rlimits {
            body.u64(r.cur);
            body.u64(r.max);
        }
        body.u32(st.personality);
        body.u8(u8::from(st.dumpable));
        // Interval timers (alarm, setitimer): time left and interval.
        for id in st.itimers {
            match id.and_then(|id| kernel.timers.get(id)) {
                Some((left, interval)) => {
                    body.u8(1);
                    body.u64(left.as_nanos() as u64);
                    body.u64(interval.as_nanos() as u64);
                }
                None => body.u8(0),
            }
        }
        body.bytes(&st.info.cmdline);
        body.bytes(&st.info.environ);
        body.bytes(&st.info.auxv);
        body.bytes(st.info.comm.as_bytes());
        save_sigqueue(&st.pending, &mut body);
        body.u32(
            st.ctty
                .as_ref()
                .and_then(|t| t.fg_pgrp())
                .map_or(0, |g| g as u32),
        );
        match st.ctty.as_ref().map(Pty::of) {
            None => body.u8(CTTY_NONE),
            Some(Some(p)) if !objects.is_console(&p) => {
                body.u8(CTTY_PTY);
                body.u32(index_of(&mut objects.ptys, &p));
            }
            Some(_) => body.u8(CTTY_CONSOLE),
        }
        let threads = st.threads.clone();
        drop(st);
        body.u64(threads.len() as u64);
        for t in &threads {
            let Some(r) = record(t.tid) else {
                return Err(format!("thread {} of {who} was not stopped", t.tid));
            };
            body.u32(t.tid as u32);
            body.u32(index_of(&mut mms, &r.mm));
            body.u32(index_of(&mut tables, &r.fds));
            body.u32(index_of(&mut dirs, &r.fs));
            body.bytes(&r.own);
        }
    }
    let mut e = Enc::default();
    // (the FPU state's layout is the platform's)
    e.bytes(kernel.platform.name().as_bytes());
    let queues = kernel.mqueue.queues.locked().len();
    for (n, what) in [
        (kernel.sysv_shm.count(), "System V shared memory"),
        (queues, "a POSIX message queue"),
    ] {
        if n > 0 {
            return Err(format!("the sandbox has {what} (not saved yet)"));
        }
    }
    let mut used = Vec::new();
    let lean = kernel
        .checkpoint
        .lean
        .swap(false, std::sync::atomic::Ordering::AcqRel);
    for mm in mms.iter().filter(|_| !lean) {
        mm.locked().file_images(&mut used);
    }
    let mut pages = Vec::new();
    crate::mm::snapshot::save_file_images(&used, &mut e, &mut pages, &SandboxFiles(kernel))?;
    drop(used);
    kernel.sysv_sem.save(&mut e);
    kernel.sysv_msg.save(&mut e);
    save_tmpfs(kernel, &mut e)?;
    save_files(kernel, &tables, &mut objects, &mut e)?;
    e.u64(dirs.len() as u64);
    for fs in &dirs {
        let fs = fs.locked();
        if fs.root.path() != kernel.fs.root().path() {
            return Err("a process changed its root directory (chroot is not saved yet)".into());
        }
        e.bytes(fs.cwd.path().as_bytes());
        e.u32(fs.umask);
    }
    e.u64(mms.len() as u64);
    for mm in &mms {
        // A length, then the address space: written in place.
        let at = e.buf.len();
        e.u64(0);
        mm.locked().save(
            &mut e,
            &mut pages,
            kernel.timekeeper.region(),
            &SandboxFiles(kernel),
        )?;
        let len = (e.buf.len() - at - 8) as u64;
        e.buf[at..at + 8].copy_from_slice(&len.to_le_bytes());
    }
    e.buf.extend_from_slice(&body.buf);
    Ok((e.buf, pages))
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
    for (top, root) in saved_tmpfs(kernel)? {
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

/// The sandbox's own tmpfs an image carries (see
/// [`crate::vfs::FileSystem::saved_tmpfs`]), as tmpfs inodes.
fn saved_tmpfs(kernel: &Kernel) -> Result<Vec<(&'static str, Arc<MemInode>)>, String> {
    kernel
        .fs
        .saved_tmpfs()?
        .into_iter()
        .map(|(top, root)| {
            crate::fsimpl::tmpfs::downcast(root.clone())
                .map(|m| (top, m))
                .ok_or_else(|| format!("{top}: not a tmpfs"))
        })
        .collect()
}

/// Fills the new sandbox's own tmpfs from what [`save_tmpfs`] wrote.
fn restore_tmpfs(kernel: &Kernel, d: &mut Dec<'_>) -> Result<(), Error> {
    let b = |e: Bad| Error::Restore(e.0);
    let roots = saved_tmpfs(kernel).map_err(Error::Restore)?;
    for (top, root) in &roots {
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

/// The open file descriptions the descriptor tables hold (one entry for
/// each, however many descriptors and processes share it, so a shared
/// offset stays shared), then each table as (descriptor, close-on-exec,
/// description) triples.
fn save_files(
    kernel: &Kernel,
    tables: &[Arc<Mutex<FdTable>>],
    objects: &mut Objects,
    e: &mut Enc,
) -> Result<(), String> {
    let mut files: Vec<Arc<FileDescription>> = Vec::new();
    let mut file_bytes = Enc::default();
    let mut table_bytes = Enc::default();
    table_bytes.u64(tables.len() as u64);
    for t in tables {
        let fds = t.locked();
        let open = fds.open_fds();
        table_bytes.u64(open.len() as u64);
        for fd in open {
            let entry = fds
                .get(fd as i64)
                .map_err(|_| "the descriptor table changed")?;
            table_bytes.u32(fd as u32);
            table_bytes.u8(u8::from(entry.cloexec));
            let known = files.len();
            let at = index_of(&mut files, &entry.file);
            if at as usize == known {
                describe_file(kernel, fd, &entry.file, objects, &mut file_bytes)?;
            }
            table_bytes.u32(at);
        }
    }
    // Each epoll's interests, by file (those files described too: an
    // interest may outlive its descriptor).
    let mut epoll_bytes = Enc::default();
    let mut i = 0;
    while let Some(ep) = objects.epolls.get(i).cloned() {
        let Some(ep) = ep.downcast::<Epoll>() else {
            return Err("an epoll changed".into());
        };
        let interests = ep.interests();
        epoll_bytes.u64(interests.len() as u64);
        for (fd, target, events, data, disabled) in interests {
            let known = files.len();
            let at = index_of(&mut files, &target);
            if at as usize == known {
                describe_file(kernel, fd as usize, &target, objects, &mut file_bytes)?;
            }
            epoll_bytes.u32(fd as u32);
            epoll_bytes.u32(at);
            epoll_bytes.u32(events);
            epoll_bytes.u64(data);
            epoll_bytes.u8(u8::from(disabled));
        }
        i += 1;
    }
    e.u64(files.len() as u64);
    e.buf.extend_from_slice(&file_bytes.buf);
    // The pipes' queued bytes: the ends above name them.
    let pipes = &objects.pipes;
    e.u64(pipes.len() as u64);
    for p in pipes {
        e.u64(p.capacity() as u64);
        e.bytes(&p.contents());
    }
    e.u64(objects.epolls.len() as u64);
    e.buf.extend_from_slice(&epoll_bytes.buf);
    save_unix(objects, e)?;
    e.u64(objects.ptys.len() as u64);
    for p in &objects.ptys {
        p.save(e)?;
    }
    e.buf.extend_from_slice(&table_bytes.buf);
    Ok(())
}

/// One open file description: its flags, then how it is found again.
fn describe_file(
    kernel: &Kernel,
    fd: usize,
    file: &Arc<FileDescription>,
    objects: &mut Objects,
    e: &mut Enc,
) -> Result<(), String> {
    let console = kernel.checkpoint.console.get();
    e.u32(file.flags());
    let what = |kind: &str| {
        format!("descriptor {fd} ({kind}): only standard descriptors, pipes and files opened by path are saved yet")
    };
    match &file.kind {
        FileKind::Stdio(n) if *n <= 2 => {
            e.u8(FD_STDIO);
            e.u32(*n as u32);
        }
        // A descriptor that `exec` from outside brought in (its client's
        // input or output): that client is not the copy's, so a restored
        // copy reads and writes /dev/null there.
        FileKind::Stdio(_) => e.u8(FD_DETACHED),
        _ if console.is_some_and(|c| Arc::ptr_eq(c, file)) => e.u8(FD_CONSOLE),
        FileKind::Impl(_) if file.location.is_none() && file.downcast::<PipeEnd>().is_some() => {
            // An anonymous pipe's end: the pipe and its bytes are saved once.
            let Some(end) = file.downcast::<PipeEnd>() else {
                return Err("the pipe changed".into());
            };
            e.u8(FD_PIPE);
            e.u32(index_of(&mut objects.pipes, &end.pipe));
            e.u8(u8::from(end.reader));
        }
        FileKind::Impl(_) if file.downcast::<PtyEnd>().is_some() => {
            let Some(end) = file.downcast::<PtyEnd>() else {
                return Err("the pty changed".into());
            };
            let Some(loc) = file.location.as_ref() else {
                return Err(format!(
                    "descriptor {fd} (a pty end without a path): not saved yet"
                ));
            };
            if objects.is_console(&end.pty) {
                // Another opening of the terminal's slave: the restored
                // sandbox's terminal takes its place.
                if end.master {
                    return Err(format!(
                        "descriptor {fd} (the terminal's master): not saved"
                    ));
                }
                e.u8(FD_CONSOLE_SLAVE);
            } else {
                e.u8(FD_PTY);
                e.u32(index_of(&mut objects.ptys, &end.pty));
                e.u8(u8::from(end.master));
            }
            e.bytes(loc.path().as_bytes());
        }
        FileKind::Impl(_) if file.downcast::<EventFd>().is_some() => {
            let Some(ev) = file.downcast::<EventFd>() else {
                return Err("the eventfd changed".into());
            };
            e.u8(FD_EVENTFD);
            e.u64(ev.count());
            e.u8(u8::from(ev.semaphore));
        }
        FileKind::Impl(_) if file.downcast::<TimerFd>().is_some() => {
            // Its clock, the expirations not yet read, and the time left
            // and interval (an absolute time is saved as the time left).
            let Some(t) = file.downcast::<TimerFd>() else {
                return Err("the timerfd changed".into());
            };
            let (left, interval) = t.service().get(t.id).unwrap_or_default();
            e.u8(FD_TIMERFD);
            e.u32(t.clock as u32);
            e.u64(t.count.load(std::sync::atomic::Ordering::Relaxed));
            e.u64(left.as_nanos() as u64);
            e.u64(interval.as_nanos() as u64);
        }
        FileKind::Impl(_) if file.downcast::<SignalFd>().is_some() => {
            let Some(s) = file.downcast::<SignalFd>() else {
                return Err("the signalfd changed".into());
            };
            e.u8(FD_SIGNALFD);
            e.u64(*s.mask.locked());
        }
        FileKind::Impl(_) if unix_of(file).is_some() => {
            let Some(sock) = unix_of(file) else {
                return Err("the socket changed".into());
            };
            e.u8(FD_UNIX);
            e.u32(index_of(&mut objects.unix, &sock));
        }
        FileKind::Impl(_) if inet_of(file).is_some() => {
            // A TCP listener with no connection waiting: listening again at
            // restore. Connections and UDP are not saved yet.
            let listener = inet_of(file)
                .filter(|s| s.is_listening() && s.ty == netstack::SocketType::Stream)
                .and_then(|s| Some((s.domain, s.sock.idle_listener().ok()??)));
            let Some((domain, (addr, backlog))) = listener else {
                return Err(format!(
                    "descriptor {fd} (a TCP or UDP socket other than a listener with no \
                     connection waiting): not saved yet"
                ));
            };
            e.u8(FD_LISTENER);
            e.u8(u8::from(domain == netstack::Domain::Inet6));
            e.bytes(addr.to_string().as_bytes());
            e.u32(backlog as u32);
        }
        FileKind::Impl(_) if file.downcast::<Epoll>().is_some() => {
            e.u8(FD_EPOLL);
            e.u32(index_of(&mut objects.epolls, file));
        }
        FileKind::Impl(_) if let Some(m) = file.downcast_arc::<MemInode>() => {
            let m = &m;
            // A file of the tmpfs the image carries, while it still
            // has its name there.
            let fs = &kernel.fs;
            let named = file.location.as_ref().filter(|loc| {
                fs.resolve(&fs.root(), loc.path().as_bytes(), false)
                    .is_ok_and(|l| {
                        crate::fsimpl::tmpfs::mem_of(l.node())
                            .is_some_and(|n| std::ptr::eq(n, &**m))
                    })
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
        _ => return Err(what(&kind_name(&file.kind))),
    }
    Ok(())
}

/// The TCP/UDP socket of the sandbox's netstack behind `file`, if it is
/// one.
fn inet_of(file: &FileDescription) -> Option<&crate::socket::inet::InetSocket> {
    crate::socket::of(file)?
        .as_any()
        .downcast_ref::<crate::socket::inet::InetSocket>()
}

/// The Unix socket behind `file`, if it is one.
fn unix_of(file: &FileDescription) -> Option<Arc<UnixSocket>> {
    let s = crate::socket::of(file)?;
    let h = s
        .as_any()
        .downcast_ref::<crate::socket::unix::SocketHandle>()?;
    Some(h.0.clone())
}

/// What an open file is, in a word or two.
fn kind_name(kind: &FileKind) -> String {
    match kind {
        FileKind::Host(_) => "a host file".into(),
        FileKind::Dev(_) => "a device".into(),
        FileKind::SynthDir => "a directory".into(),
        FileKind::Stdio(_) => "a standard descriptor".into(),
        FileKind::Path => "an O_PATH descriptor".into(),
        FileKind::Impl(i) if (&**i as &dyn std::any::Any).is::<MemInode>() => "a tmpfs file".into(),
        // (`Pipe(...)`, `SocketFile { ... }`: the type's name is enough)
        FileKind::Impl(i) => {
            let full = format!("{i:?}");
            let end = full.find(['(', ' ', '{']).unwrap_or(full.len());
            full[..end].to_string()
        }
    }
}

/// An image's payload, its header and checksum checked (what the runtime
/// does before it starts a restore).
pub fn payload(image: &[u8]) -> Result<&[u8], Bad> {
    let body = framed(image, false)?;
    let sum = u64::from_le_bytes(image[24..32].try_into().or_else(|_| bad("no checksum"))?);
    if checksum(body) != sum {
        return bad("the image is corrupt (its checksum does not match)");
    }
    Ok(body)
}

/// An image's payload (`image`: its header and payload), its magic,
/// version and length checked (the checksum is [`payload`]'s: the runtime
/// checked it already); with `head_only`, the header alone.
fn framed(image: &[u8], head_only: bool) -> Result<&[u8], Bad> {
    if image.len() < HEADER || &image[..8] != MAGIC {
        return bad("not a ferrovisor sandbox image");
    }
    let version = u32::from_le_bytes([image[8], image[9], image[10], image[11]]);
    if version != VERSION {
        return bad(format!(
            "an image of version {version}; this ferrovisor reads version {VERSION}"
        ));
    }
    let len = word(image, 16);
    let body = &image[HEADER..];
    if !head_only && body.len() as u64 != len {
        return bad(format!(
            "the image is truncated or has bytes past its end ({} of {len} bytes)",
            body.len()
        ));
    }
    Ok(body)
}

/// A thread as the image holds it.
struct SavedThread {
    tid: i32,
    mm: usize,
    fds: usize,
    fs: usize,
    regs: platform::Regs,
    fp: Vec<u8>,
    mask: u64,
    pending: Vec<(i32, abi::SigInfo)>,
    altstack: StackT,
    clear_child_tid: u64,
    robust_list: (u64, u64),
    comm: Vec<u8>,
    exe: String,
    no_new_privs: bool,
    creds: Creds,
    seccomp: Option<Arc<crate::kernel::seccomp::Filter>>,
}

/// A process as the image holds it.
struct SavedProcess {
    pid: i32,
    ppid: i32,
    pgid: i32,
    sid: i32,
    exit_signal: i32,
    exit: Option<crate::kernel::task::ExitStatus>,
    actions: [KSigaction; 64],
    rlimits: [abi::Rlimit; abi::rlimit::RLIM_NLIMITS],
    personality: u32,
    dumpable: bool,
    /// interval timers: time left and interval
    itimers: [Option<(Duration, Duration)>; 3],
    cmdline: Vec<u8>,
    environ: Vec<u8>,
    auxv: Vec<u8>,
    comm: String,
    pending: Vec<(i32, abi::SigInfo)>,
    fg_pgrp: i32,
    ctty: Ctty,
    threads: Vec<SavedThread>,
}

/// A process's controlling terminal as the image holds it.
#[derive(Clone, Copy)]
enum Ctty {
    None,
    /// the sandbox's terminal (the restored sandbox's own)
    Console,
    /// a pty of the image, by index
    Pty(usize),
}

/// An open file description as the image holds it.
struct SavedFile {
    flags: u32,
    how: FileHow,
}

enum FileHow {
    Stdio(i32),
    Console,
    Pipe {
        pipe: usize,
        reader: bool,
    },
    EventFd {
        count: u64,
        semaphore: bool,
    },
    TimerFd {
        clock: i32,
        count: u64,
        left: Duration,
        interval: Duration,
    },
    SignalFd(u64),
    Epoll(usize),
    Unix(usize),
    Pty {
        pty: usize,
        master: bool,
        path: Vec<u8>,
    },
    ConsoleSlave(Vec<u8>),
    Listener {
        v6: bool,
        addr: std::net::SocketAddr,
        backlog: i32,
    },
    Path {
        path: Vec<u8>,
        pos: u64,
        identity: Vec<u8>,
    },
}

fn read_file(d: &mut Dec<'_>) -> Result<SavedFile, Bad> {
    let flags = d.u32()?;
    let how = match d.u8()? {
        FD_STDIO => {
            let n = d.u32()? as i32;
            if !(0..3).contains(&n) {
                return bad(format!("a descriptor names host descriptor {n}"));
            }
            FileHow::Stdio(n)
        }
        FD_CONSOLE => FileHow::Console,
        FD_DETACHED => FileHow::Path {
            path: b"/dev/null".to_vec(),
            pos: 0,
            identity: Vec::new(),
        },
        FD_PIPE => FileHow::Pipe {
            pipe: d.u32()? as usize,
            reader: d.u8()? != 0,
        },
        FD_EVENTFD => FileHow::EventFd {
            count: d.u64()?,
            semaphore: d.u8()? != 0,
        },
        FD_TIMERFD => FileHow::TimerFd {
            clock: d.u32()? as i32,
            count: d.u64()?,
            left: Duration::from_nanos(d.u64()?),
            interval: Duration::from_nanos(d.u64()?),
        },
        FD_SIGNALFD => FileHow::SignalFd(d.u64()?),
        FD_EPOLL => FileHow::Epoll(d.u32()? as usize),
        FD_UNIX => FileHow::Unix(d.u32()? as usize),
        FD_PTY => FileHow::Pty {
            pty: d.u32()? as usize,
            master: d.u8()? != 0,
            path: d.bytes()?.to_vec(),
        },
        FD_CONSOLE_SLAVE => FileHow::ConsoleSlave(d.bytes()?.to_vec()),
        FD_LISTENER => {
            let v6 = d.u8()? != 0;
            let addr = d
                .string()?
                .parse()
                .or_else(|_| bad("a listening socket of the image has a bad address"))?;
            FileHow::Listener {
                v6,
                addr,
                backlog: d.u32()? as i32,
            }
        }
        FD_PATH => FileHow::Path {
            path: d.bytes()?.to_vec(),
            pos: d.u64()?,
            identity: d.bytes()?.to_vec(),
        },
        _ => return bad("the image holds a descriptor of an unknown kind"),
    };
    Ok(SavedFile { flags, how })
}

fn read_thread(
    d: &mut Dec<'_>,
    kernel: &Kernel,
    tables: (usize, usize, usize),
) -> Result<SavedThread, Bad> {
    let tid = d.u32()? as i32;
    let (mm, fds, fs) = (d.u32()? as usize, d.u32()? as usize, d.u32()? as usize);
    if mm >= tables.0 || fds >= tables.1 || fs >= tables.2 {
        return bad("a thread names a table the image does not have");
    }
    let own = d.bytes()?;
    let mut d = Dec::new(own);
    let mut words = [0u64; 27];
    for w in &mut words {
        *w = d.u64()?;
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
    let fp = d.bytes()?.to_vec();
    let mask = d.u64()?;
    let pending = read_sigqueue(&mut d)?;
    let altstack = StackT::read_from_bytes(d.bytes()?)
        .or_else(|_| bad("the image's signal stack is malformed"))?;
    let clear_child_tid = d.u64()?;
    let robust_list = (d.u64()?, d.u64()?);
    let comm = d.bytes()?.to_vec();
    let exe = d.string()?;
    let no_new_privs = d.u8()? != 0;
    let mut uid = [0u32; 4];
    let mut gid = [0u32; 4];
    for id in uid.iter_mut().chain(gid.iter_mut()) {
        *id = d.u32()?;
    }
    let n = d.count(4)?;
    let mut groups = Vec::with_capacity(n);
    for _ in 0..n {
        groups.push(d.u32()?);
    }
    let mut caps = [0u64; 5];
    for w in &mut caps {
        *w = d.u64()?;
    }
    let securebits = d.u32()?;
    let seccomp = match (d.u8()?, &kernel.container_seccomp) {
        (SECCOMP_NONE, _) => None,
        (SECCOMP_CONTAINER, Some(f)) => Some(f.clone()),
        (SECCOMP_CONTAINER, None) => {
            return bad(
                "the saved process ran under the container's seccomp filter, and this \
                 bundle has none (restore with the bundle it was saved from)",
            )
        }
        _ => return bad("the image's seccomp state is malformed"),
    };
    if !d.is_empty() {
        return bad("a thread's record has bytes past its end");
    }
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
    Ok(SavedThread {
        tid,
        mm,
        fds,
        fs,
        regs,
        fp,
        mask,
        pending,
        altstack,
        clear_child_tid,
        robust_list,
        comm,
        exe,
        no_new_privs,
        creds,
        seccomp,
    })
}

fn read_process(
    d: &mut Dec<'_>,
    kernel: &Kernel,
    tables: (usize, usize, usize),
) -> Result<SavedProcess, Bad> {
    let mut ids = [0i32; 5];
    for w in &mut ids {
        *w = d.u32()? as i32;
    }
    let [pid, ppid, pgid, sid, exit_signal] = ids;
    if !(1..crate::kernel::PID_MAX).contains(&pid) || !(0..=64).contains(&exit_signal) {
        return bad("the image has a process id or exit signal out of range");
    }
    let (how, code) = (d.u8()?, d.u32()? as i32);
    let exit = match how {
        LIVE => None,
        EXITED => Some(crate::kernel::task::ExitStatus::Code(code)),
        KILLED if (1..=64).contains(&code) => Some(crate::kernel::task::ExitStatus::Signal(code)),
        _ => return bad("the image's exit status is malformed"),
    };
    let actions = <[KSigaction; 64]>::read_from_bytes(d.bytes()?)
        .or_else(|_| bad("the image's signal handlers are malformed"))?;
    let mut rlimits = [abi::Rlimit { cur: 0, max: 0 }; abi::rlimit::RLIM_NLIMITS];
    for r in &mut rlimits {
        r.cur = d.u64()?;
        r.max = d.u64()?;
    }
    let personality = d.u32()?;
    let dumpable = d.u8()? != 0;
    let mut itimers = [None; 3];
    for t in &mut itimers {
        if d.u8()? != 0 {
            *t = Some((
                Duration::from_nanos(d.u64()?),
                Duration::from_nanos(d.u64()?),
            ));
        }
    }
    let cmdline = d.bytes()?.to_vec();
    let environ = d.bytes()?.to_vec();
    let auxv = d.bytes()?.to_vec();
    let comm = d.string()?;
    let pending = read_sigqueue(d)?;
    let fg_pgrp = d.u32()? as i32;
    let ctty = match d.u8()? {
        CTTY_NONE => Ctty::None,
        CTTY_CONSOLE => Ctty::Console,
        CTTY_PTY => Ctty::Pty(d.u32()? as usize),
        _ => return bad("the image's controlling terminal is of an unknown kind"),
    };
    let n = d.count(8)?;
    let mut threads = Vec::with_capacity(n);
    for _ in 0..n {
        threads.push(read_thread(d, kernel, tables)?);
    }
    if exit.is_some() != threads.is_empty() {
        return bad("the image has a live process without threads, or an exited one with");
    }
    Ok(SavedProcess {
        pid,
        ppid,
        pgid,
        sid,
        exit_signal,
        exit,
        actions,
        rlimits,
        personality,
        dumpable,
        itimers,
        cmdline,
        environ,
        auxv,
        comm,
        pending,
        fg_pgrp,
        ctty,
        threads,
    })
}

/// The files' images [`crate::mm::snapshot::save_file_images`] wrote,
/// made the sandbox's images of those files where their pages can be
/// shared (else the files are read again as mappings need them).
fn adopt_file_images(kernel: &Arc<Kernel>, d: &mut Dec<'_>, area: PageArea) -> Result<(), Error> {
    let b = |e: Bad| Error::Restore(e.0);
    let n = d.count(32).map_err(b)?;
    for _ in 0..n {
        let name = d.string().map_err(b)?;
        let identity = d.bytes().map_err(b)?;
        let (slot, pages) = (d.u64().map_err(b)?, d.u64().map_err(b)?);
        let inside = slot.checked_add(pages).is_some_and(|e| e <= area.pages);
        if !inside || pages == 0 {
            return Err(Error::Restore(format!(
                "the image of {name} lies outside the image's page area"
            )));
        }
        if !area.share {
            continue;
        }
        let (file, _) = SandboxFiles(kernel)
            .find(&name, identity)
            .map_err(Error::Restore)?;
        if let Some(images) = file.images() {
            let off = area.at + slot * crate::PAGE_SIZE;
            images
                .adopt(&*file, &kernel.memory, off, pages * crate::PAGE_SIZE)
                .map_err(|e| Error::Restore(format!("{name}: its image: {e}")))?;
        }
    }
    Ok(())
}

/// Where an address space comes to be built: the host thread of its
/// first thread sets it, the others of its threads wait for it.
type MmSlot = Arc<std::sync::OnceLock<Result<Arc<Mutex<MemoryManager>>, String>>>;

/// Builds address space `blob` for a thread on its own host thread (the
/// one that will run it).
fn build_mm(
    kernel: &Arc<Kernel>,
    blob: &[u8],
    area: PageArea,
) -> Result<Arc<Mutex<MemoryManager>>, String> {
    let space = kernel
        .platform
        .new_address_space()
        .map_err(|e| format!("a new address space: {e}"))?;
    let mut mm = MemoryManager::new(
        kernel.memory.clone(),
        space,
        kernel.platform.max_user_address(),
    );
    let mut d = Dec::new(blob);
    mm.restore(
        &mut d,
        area,
        kernel.timekeeper.region(),
        &SandboxFiles(kernel),
    )?;
    if !d.is_empty() {
        return Err("an address space has bytes past its end".into());
    }
    Ok(Arc::new(Mutex::new(mm)))
}

/// What every restored thread shares: the tables it points into.
struct Shared {
    kernel: Arc<Kernel>,
    /// the image, and where in it each address space is
    image: Arc<Vec<u8>>,
    blobs: Vec<std::ops::Range<usize>>,
    /// the image's page area
    area: PageArea,
    slots: Vec<MmSlot>,
    owner: Vec<i32>,
    fds: Vec<Arc<Mutex<FdTable>>>,
    fs: Vec<Arc<Mutex<FsContext>>>,
}

impl Shared {
    /// The address space of `t`: built here by its first thread, waited
    /// for by the others.
    fn mm_for(&self, t: &SavedThread) -> Result<Arc<Mutex<MemoryManager>>, String> {
        if self.owner[t.mm] == t.tid {
            let mm = build_mm(
                &self.kernel,
                &self.image[self.blobs[t.mm].clone()],
                self.area,
            );
            let _ = self.slots[t.mm].set(mm.clone());
            return mm;
        }
        let mm = self.slots[t.mm].wait().clone()?;
        {
            let mut m = mm.locked();
            m.address_space()
                .prepare_thread()
                .map_err(|e| format!("thread {}: {e}", t.tid))?;
            m.add_user();
        }
        Ok(mm)
    }

    /// The task of saved thread `t`, on its own host thread.
    fn task(&self, p: &Arc<Process>, th: Arc<Thread>, t: SavedThread) -> Result<Task, String> {
        let mm = self.mm_for(&t)?;
        let mut ctx = self
            .kernel
            .platform
            .new_context()
            .map_err(|e| format!("thread {}: {e}", t.tid))?;
        if !t.fp.is_empty() {
            ctx.set_fpstate(&t.fp)
                .map_err(|e| format!("thread {}: the FPU state: {e}", t.tid))?;
        }
        th.set_interrupter(Some(ctx.interrupter()));
        let ids = (t.creds.uid[3], t.creds.gid[3]);
        Ok(Task {
            thread: th,
            proc_: p.clone(),
            kernel: self.kernel.clone(),
            regs: t.regs,
            mm,
            ctx,
            fds: self.fds[t.fds].clone(),
            fs: self.fs[t.fs].clone(),
            ids,
            creds: t.creds,
            keyrings: Default::default(),
            clear_child_tid: t.clear_child_tid,
            robust_list: t.robust_list,
            comm: t.comm,
            exe: t.exe,
            exit: None,
            no_new_privs: t.no_new_privs,
            restart: None,
            saved_mask: None,
            nowait: false,
            altstack: t.altstack,
            patch_checked: 0,
            stale_fault: None,
            seccomp_copy: Default::default(),
            landlock: None,
        })
    }
}

/// Tells restored threads whether to run (`true`) or to end, once.
type Gate = Arc<std::sync::OnceLock<bool>>;

/// Builds the saved sandbox from `image` in the new sandbox `kernel`: its
/// processes and threads, each thread on a host thread of its own. The
/// first thread of init is built on the calling host thread, which must
/// run it (the returned task); the others start once everything is in
/// place. `console` is the sandbox's terminal, if it has one.
pub fn restore_process(
    kernel: &Arc<Kernel>,
    image: Image,
    console: Option<(Arc<FileDescription>, Arc<dyn crate::kernel::task::Terminal>)>,
) -> Result<Task, Error> {
    let fail = Error::Restore;
    let b = |e: Bad| Error::Restore(e.0);
    let started = std::time::Instant::now();
    let (at, len) = image.page_area();
    let area = if len == 0 {
        PageArea {
            at: 0,
            pages: 0,
            share: false,
        }
    } else {
        let file = std::os::fd::AsFd::as_fd(&image.file);
        let window = kernel
            .memory
            .attach_base(file, at, len)
            .map_err(|e| fail(format!("mapping the image's pages: {e}")))?;
        PageArea {
            at: window,
            pages: len / crate::PAGE_SIZE,
            share: kernel.platform.share_base(file, at, len, window),
        }
    };
    let Image { bytes, file } = image;
    // (kept open for the sandbox's life: the runtime's lock on it says a
    // sandbox shares its pages)
    let _ = kernel.checkpoint.base.set(file);
    let image = Arc::new(bytes);
    let body = framed(&image, false).map_err(b)?;
    let mut d = Dec::new(body);
    let platform = d.bytes().map_err(b)?;
    if platform != kernel.platform.name().as_bytes() {
        return Err(fail(format!(
            "the image was saved on the {} platform and this sandbox runs on {}: restore \
             with the --platform it was saved with",
            String::from_utf8_lossy(platform),
            kernel.platform.name()
        )));
    }
    adopt_file_images(kernel, &mut d, area)?;
    kernel.sysv_sem.restore(&mut d).map_err(b)?;
    kernel.sysv_msg.restore(&mut d).map_err(b)?;
    restore_tmpfs(kernel, &mut d)?;
    let n = d.count(5).map_err(b)?;
    let mut files = Vec::with_capacity(n);
    for _ in 0..n {
        files.push(read_file(&mut d).map_err(b)?);
    }
    let n = d.count(16).map_err(b)?;
    let mut pipes = Vec::with_capacity(n);
    for _ in 0..n {
        let capacity = d.u64().map_err(b)?;
        let data = d.bytes().map_err(b)?;
        let pipe = usize::try_from(capacity)
            .ok()
            .and_then(|c| Pipe::with_contents(c, data).ok())
            .ok_or_else(|| fail("a pipe of the image does not fit its capacity".into()))?;
        pipes.push(pipe);
    }
    // Each epoll's interests: (number, file, events, data, one-shot fired).
    let n = d.count(8).map_err(b)?;
    let mut interests = Vec::with_capacity(n);
    for _ in 0..n {
        let m = d.count(21).map_err(b)?;
        let mut list = Vec::with_capacity(m);
        for _ in 0..m {
            let fd = d.u32().map_err(b)? as i32;
            let file = d.u32().map_err(b)? as usize;
            let events = d.u32().map_err(b)?;
            let data = d.u64().map_err(b)?;
            let disabled = d.u8().map_err(b)? != 0;
            if file >= files.len() {
                return Err(fail("an epoll names a file the image does not have".into()));
            }
            list.push((fd, file, events, data, disabled));
        }
        interests.push(list);
    }
    let epolls: Vec<Arc<Epoll>> = (0..interests.len()).map(|_| Arc::default()).collect();
    let socks = read_unix(&mut d, kernel).map_err(b)?;
    let n = d.count(40).map_err(b)?;
    let mut ptys = Vec::with_capacity(n);
    for _ in 0..n {
        ptys.push(
            crate::fsimpl::builtins(&kernel.fs)
                .devpts
                .restore(&mut d)
                .map_err(b)?,
        );
    }
    let n = d.count(8).map_err(b)?;
    let mut tables = Vec::with_capacity(n);
    for _ in 0..n {
        let m = d.count(9).map_err(b)?;
        let mut entries = Vec::with_capacity(m);
        for _ in 0..m {
            let fd = d.u32().map_err(b)? as usize;
            let cloexec = d.u8().map_err(b)? != 0;
            let file = d.u32().map_err(b)? as usize;
            if file >= files.len() {
                return Err(fail(
                    "a descriptor names a file the image does not have".into(),
                ));
            }
            entries.push((fd, cloexec, file));
        }
        tables.push(entries);
    }
    let n = d.count(12).map_err(b)?;
    let mut dirs = Vec::with_capacity(n);
    for _ in 0..n {
        let cwd = d.bytes().map_err(b)?.to_vec();
        let umask = d.u32().map_err(b)? & 0o777;
        let root = kernel.fs.root();
        let loc = kernel
            .fs
            .resolve(&root, &cwd, true)
            .ok()
            .filter(|l| l.node().is_dir())
            .ok_or_else(|| {
                fail(format!(
                    "the working directory {} is not in the sandbox",
                    String::from_utf8_lossy(&cwd)
                ))
            })?;
        dirs.push(Arc::new(Mutex::new(FsContext {
            cwd: loc,
            root,
            umask,
        })));
    }
    let n = d.count(8).map_err(b)?;
    let mut blobs = Vec::with_capacity(n);
    for _ in 0..n {
        // (read in place by the thread that builds it)
        let blob = d.bytes().map_err(b)?.len();
        let end = image.len() - d.left();
        blobs.push(end - blob..end);
    }
    let sizes = (blobs.len(), tables.len(), dirs.len());
    let n = d.count(8).map_err(b)?;
    let mut saved = Vec::with_capacity(n);
    for _ in 0..n {
        saved.push(read_process(&mut d, kernel, sizes).map_err(b)?);
    }
    if !d.is_empty() {
        return Err(fail("the image has bytes past its end".into()));
    }
    let (mut pids, mut tids) = (
        std::collections::BTreeSet::new(),
        std::collections::BTreeSet::new(),
    );
    for p in &saved {
        let fresh = pids.insert(p.pid);
        let threads_fresh = p
            .threads
            .iter()
            .all(|t| (1..crate::kernel::PID_MAX).contains(&t.tid) && tids.insert(t.tid));
        if !fresh || !threads_fresh {
            return Err(fail(
                "the image has a process or thread id twice, or out of range".into(),
            ));
        }
    }
    let borrowed = saved.iter().any(|p| {
        p.threads
            .iter()
            .any(|t| t.tid != p.pid && pids.contains(&t.tid))
    });
    if borrowed {
        return Err(fail(
            "the image has a thread with another process's id".into(),
        ));
    }
    let last_id = pids.iter().chain(&tids).copied().max().unwrap_or(1);
    if saved
        .first()
        .is_none_or(|p| p.pid != 1 || p.threads.is_empty())
    {
        return Err(fail("the image's first process is not a live init".into()));
    }

    // The processes and threads, in the tables before anything runs.
    let (console_file, tty) = match console {
        Some((f, t)) => (Some(f), Some(t)),
        None => (None, None),
    };
    let mut built = Vec::with_capacity(saved.len());
    {
        let mut procs = kernel.procs();
        for sp in &saved {
            let p = Process::new(
                sp.pid,
                ProcessState::new(sp.ppid, sp.pgid, sp.sid, sp.exit_signal, sp.actions),
            );
            {
                let mut st = p.state();
                st.rlimits = sp.rlimits;
                st.unkillable = sp.pid == 1;
                st.dumpable = sp.dumpable;
                st.personality = sp.personality;
                st.exit = sp.exit;
                st.info.cmdline = sp.cmdline.clone();
                st.info.environ = sp.environ.clone();
                st.info.auxv = sp.auxv.clone();
                st.info.comm = sp.comm.clone();
                for (sig, info) in &sp.pending {
                    st.pending.enqueue(*sig, *info);
                }
                match (sp.ctty, &tty) {
                    (Ctty::Console, Some(t)) => {
                        if sp.sid == sp.pid {
                            let fg = if sp.fg_pgrp > 0 { sp.fg_pgrp } else { sp.pgid };
                            let _ = t.attach(sp.sid, fg);
                        }
                        st.ctty = Some(t.clone());
                    }
                    // (the pty's own state names its session and group)
                    (Ctty::Pty(n), _) => {
                        let pty = ptys.get(n).cloned().ok_or_else(|| {
                            fail(format!(
                                "process {} has a terminal the image has not",
                                sp.pid
                            ))
                        })?;
                        st.ctty = Some(pty as Arc<dyn crate::kernel::task::Terminal>);
                    }
                    _ => {}
                }
            }
            let mut threads = Vec::with_capacity(sp.threads.len());
            for t in &sp.threads {
                let th = Thread::new(t.tid, p.clone(), t.mask);
                {
                    let mut st = th.state();
                    for (sig, info) in &t.pending {
                        st.pending.enqueue(*sig, *info);
                    }
                    if let Some(f) = &t.seccomp {
                        let s = crate::kernel::seccomp::Seccomp {
                            mode: crate::kernel::seccomp::Mode::Filter,
                            filter: Some(f.clone()),
                        };
                        th.set_seccomp(&mut st, s);
                    }
                }
                p.state().threads.push(th.clone());
                procs.threads.insert(t.tid, th.clone());
                threads.push(th);
            }
            procs.map.insert(sp.pid, p.clone());
            built.push((p, threads));
        }
        procs.set_last_pid(last_id);
    }
    // Interval timers go on with the time they had left.
    for (sp, (p, _)) in saved.iter().zip(&built) {
        for (which, t) in sp.itimers.iter().enumerate() {
            let Some((left, interval)) = *t else { continue };
            let sig = [
                abi::signal::SIGALRM,
                abi::signal::SIGVTALRM,
                abi::signal::SIGPROF,
            ][which];
            let target = crate::kernel::timers::Target::Signal {
                pid: sp.pid,
                sig,
                code: crate::kernel::task::si::KERNEL,
                timer: None,
            };
            let id = kernel
                .timers
                .create(target)
                .ok_or_else(|| fail("no room for the image's timers".into()))?;
            if !left.is_zero() {
                kernel.timers.arm(kernel, id, left, interval);
            }
            p.state().itimers[which] = Some(id);
        }
    }

    // Each address space is built by the host thread of its first thread.
    let mut owner = vec![0; blobs.len()];
    for t in saved.iter().flat_map(|p| p.threads.iter()).rev() {
        owner[t.mm] = t.tid;
    }
    let shared = Arc::new(Shared {
        kernel: kernel.clone(),
        slots: (0..blobs.len()).map(|_| MmSlot::default()).collect(),
        image: image.clone(),
        area,
        blobs,
        owner,
        fds: (0..tables.len()).map(|_| Arc::default()).collect(),
        fs: dirs,
    });
    let mut saved = saved.into_iter();
    let mut init = saved
        .next()
        .ok_or_else(|| fail("no init in the image".into()))?;
    let init_thread = init.threads.remove(0);
    let mm_started = std::time::Instant::now();
    let mut task = shared
        .task(&built[0].0, built[0].1[0].clone(), init_thread)
        .map_err(fail)?;
    let mm_took = mm_started.elapsed();

    // The files, opened through init, then the tables that hold them.
    let mut opened = Vec::with_capacity(files.len());
    let was_console: Vec<bool> = files
        .iter()
        .map(|f| matches!(f.how, FileHow::Console))
        .collect();
    for (i, f) in files.into_iter().enumerate() {
        let objects = (&pipes[..], &epolls[..], &socks[..], &ptys[..]);
        opened.push(reopen(&mut task, i, f, console_file.as_ref(), objects)?);
    }
    for (ep, list) in epolls.iter().zip(&interests) {
        for &(fd, file, events, data, disabled) in list {
            if let Some(f) = &opened[file] {
                ep.restore_interest(fd, f, events, data, disabled);
            }
        }
    }
    for (table, entries) in shared.fds.iter().zip(&tables) {
        let mut t = table.locked();
        for &(fd, cloexec, i) in entries {
            // Saved at a terminal, restored without one: the caller's
            // standard descriptors stand in for the terminal's.
            let stand_in = || {
                (was_console[i] && console_file.is_none() && fd <= 2)
                    .then(|| crate::kernel::stdio_file(fd as i32))
                    .flatten()
            };
            if let Some(file) = opened[i].clone().or_else(stand_in) {
                t.insert_at(fd, FdEntry { file, cloexec }, NR_OPEN)
                    .map_err(|e| fail(format!("descriptor {fd}: {e}")))?;
            }
        }
    }

    // Every other thread, on a host thread of its own, held at the gate.
    let gate = Gate::default();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let mut spawned = 0;
    let rest = init.threads.into_iter().map(|t| (0, t)).chain(
        saved
            .enumerate()
            .flat_map(|(i, p)| p.threads.into_iter().map(move |t| (i + 1, t))),
    );
    for (pi, t) in rest {
        let (p, threads) = &built[pi];
        let Some(th) = threads.iter().find(|th| th.tid == t.tid).cloned() else {
            continue;
        };
        let (p, shared, gate, ready) = (p.clone(), shared.clone(), gate.clone(), ready_tx.clone());
        let name = format!("task-{}", t.tid);
        let run = move || {
            let leader = t.tid == p.pid;
            let made = shared.task(&p, th, t);
            let ok = made.as_ref().map(|_| ()).map_err(Clone::clone);
            let _ = ready.send(ok);
            let Ok(mut task) = made else { return };
            if !*gate.wait() {
                return;
            }
            if leader {
                task.publish_info();
            }
            task.publish_privileges();
            task.run_to_exit();
        };
        std::thread::Builder::new()
            .name(name)
            .spawn(run)
            .map_err(|e| fail(format!("a host thread: {e}")))?;
        spawned += 1;
    }
    drop(ready_tx);
    for _ in 0..spawned {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(why)) => {
                let _ = gate.set(false);
                return Err(fail(why));
            }
            Err(_) => {
                let _ = gate.set(false);
                return Err(fail("a restored thread ended before it was ready".into()));
            }
        }
    }
    *kernel.checkpoint.status.locked() = "restored\n".into();
    task.publish_info();
    task.publish_privileges();
    let _ = gate.set(true);
    tracing::info!(
        "sandbox restored from {} bytes in {:.2} ms (init's address space in {:.2} ms, {} more threads)",
        image.len(),
        started.elapsed().as_secs_f64() * 1e3,
        mm_took.as_secs_f64() * 1e3,
        spawned,
    );
    Ok(task)
}

/// Object `n` of one kind (`what`) that open file `i` of the image names.
fn object<T: Clone>(list: &[T], n: usize, what: &str, i: usize) -> Result<T, Error> {
    list.get(n).cloned().ok_or_else(|| {
        Error::Restore(format!(
            "open file {i} names {what} the image does not have"
        ))
    })
}

/// The restored objects open files point into: pipes, epolls, sockets,
/// ptys.
type Shareds<'a> = (
    &'a [Arc<Pipe>],
    &'a [Arc<Epoll>],
    &'a [Arc<UnixSocket>],
    &'a [Arc<Pty>],
);

/// Where saved file `i` was opened (a device node: the description is
/// made again, not opened).
fn found_at(task: &Task, path: &[u8], i: usize) -> Result<crate::vfs::Location, Error> {
    let fs = &task.kernel.fs;
    fs.resolve(&fs.root(), path, true).map_err(|e| {
        Error::Restore(format!(
            "{} (open file {i}): {e}",
            String::from_utf8_lossy(path)
        ))
    })
}

/// The most descriptors a table may hold (Linux's `NR_OPEN`).
const NR_OPEN: u64 = 1 << 20;

/// Opens saved file `f` again through `task`: the restoring caller's own
/// standard descriptor, the new terminal, or the file at its path, which
/// must be unchanged. `None`: a standard descriptor the caller has not.
fn reopen(
    task: &mut Task,
    i: usize,
    f: SavedFile,
    console: Option<&Arc<FileDescription>>,
    (pipes, epolls, socks, ptys): Shareds<'_>,
) -> Result<Option<Arc<FileDescription>>, Error> {
    let fail = Error::Restore;
    match f.how {
        FileHow::Stdio(n) => Ok(crate::kernel::stdio_file(n)),
        FileHow::Console => Ok(console.cloned()),
        FileHow::Pipe { pipe, reader } => {
            let pipe = object(pipes, pipe, "a pipe", i)?;
            // (the access mode and O_NONBLOCK come back with the flags)
            let end = FileKind::Impl(Arc::new(pipe.open_end(reader)));
            Ok(Some(FileDescription::new(end, None, f.flags)))
        }
        FileHow::EventFd { count, semaphore } => {
            if count == u64::MAX {
                return Err(fail(format!(
                    "open file {i}: an eventfd past its largest count"
                )));
            }
            let ev = FileKind::Impl(EventFd::new(count, semaphore));
            Ok(Some(FileDescription::new(ev, None, f.flags)))
        }
        FileHow::TimerFd {
            clock,
            count,
            left,
            interval,
        } => {
            if crate::syscalls::events::clock_ok(clock).is_err() {
                return Err(fail(format!("open file {i}: a timerfd on clock {clock}")));
            }
            let t = TimerFd::new(task.kernel.timers.clone(), clock)
                .ok_or_else(|| fail("no room for the image's timers".into()))?;
            t.count.store(count, std::sync::atomic::Ordering::Relaxed);
            if !left.is_zero() {
                task.kernel.timers.arm(&task.kernel, t.id, left, interval);
            }
            let kind = FileKind::Impl(Arc::new(t));
            Ok(Some(FileDescription::new(kind, None, f.flags)))
        }
        FileHow::SignalFd(mask) => {
            let s = SignalFd {
                mask: Mutex::new(mask & !crate::kernel::task::UNBLOCKABLE),
            };
            Ok(Some(FileDescription::new(
                FileKind::Impl(Arc::new(s)),
                None,
                f.flags,
            )))
        }
        FileHow::Epoll(n) => {
            let kind = FileKind::Impl(object(epolls, n, "an epoll", i)?);
            Ok(Some(FileDescription::new(kind, None, f.flags)))
        }
        FileHow::Listener { v6, addr, backlog } => {
            let kernel = task.kernel.clone();
            let domain = if v6 {
                netstack::Domain::Inet6
            } else {
                netstack::Domain::Inet
            };
            let shown = |e: Errno| fail(format!("the socket listening on {addr}: {e}"));
            let s = kernel
                .net
                .socket(domain, netstack::SocketType::Stream)
                .map_err(shown)?;
            let queues = &crate::socket::state(&kernel).inet_queues;
            let sock = crate::socket::inet::InetSocket::new(
                s,
                domain,
                netstack::SocketType::Stream,
                queues,
            );
            sock.sock.bind(addr).map_err(shown)?;
            sock.sock.listen(backlog).map_err(shown)?;
            sock.listening
                .store(true, std::sync::atomic::Ordering::Relaxed);
            let kind = crate::socket::SocketFile::kind(sock);
            Ok(Some(FileDescription::new(kind, None, f.flags)))
        }
        FileHow::Pty { pty, master, path } => {
            let pty = object(ptys, pty, "a pty", i)?;
            let loc = found_at(task, &path, i)?;
            let end = FileKind::Impl(Arc::new(pty.restored_end(master)));
            Ok(Some(FileDescription::new(end, Some(loc), f.flags)))
        }
        FileHow::ConsoleSlave(path) => {
            let Some(c) = console.and_then(|c| c.downcast::<PtyEnd>()) else {
                return Ok(None);
            };
            let loc = found_at(task, &path, i)?;
            let end = FileKind::Impl(Arc::new(c.pty.restored_end(false)));
            Ok(Some(FileDescription::new(end, Some(loc), f.flags)))
        }
        FileHow::Unix(n) => {
            let sock = object(socks, n, "a socket", i)?;
            let kind = crate::socket::SocketFile::kind(crate::socket::unix::SocketHandle(sock));
            Ok(Some(FileDescription::new(kind, None, f.flags)))
        }
        FileHow::Path {
            path,
            pos,
            identity,
        } => {
            let shown = String::from_utf8_lossy(&path).into_owned();
            let reopen = f.flags & !(OpenFlags::CREAT | OpenFlags::TRUNC | OpenFlags::EXCL).bits();
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
            .map_err(|e| fail(format!("{shown} (open file {i}): {e}")))?;
            let entry = task
                .fds()
                .remove(got as i64)
                .map_err(|e| fail(format!("open file {i}: {e}")))?;
            let file = entry.file;
            if !identity.is_empty() {
                let st = file
                    .stat()
                    .map_err(|e| fail(format!("{shown} (open file {i}): {e}")))?;
                if identity_of(&st) != identity {
                    return Err(fail(format!(
                        "{shown} has changed since the checkpoint (restore into the same root)"
                    )));
                }
            }
            *file.pos.locked() = pos;
            Ok(Some(file))
        }
    }
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
        v.extend_from_slice(&0u64.to_le_bytes());
        v.extend_from_slice(&checksum(&[]).to_le_bytes());
        v.extend_from_slice(payload);
        v
    }

    /// A fresh unnamed file in the target directory.
    fn scratch() -> std::fs::File {
        let dir = std::env::temp_dir();
        let path = dir.join(format!("ferrovisor-image-test-{}", std::process::id()));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .expect("scratch file");
        let _ = std::fs::remove_file(&path);
        f
    }

    #[test]
    fn the_page_area_is_page_aligned_and_checked_on_its_own() {
        let f = scratch();
        let pages: Vec<u8> = (0..2 * crate::PAGE_SIZE as usize)
            .map(|i| (i % 251) as u8)
            .collect();
        let size = write_image(&f, b"payload bytes", &pages).expect("written");
        assert_eq!(size, 2 * crate::PAGE_SIZE + crate::PAGE_SIZE);
        let img = Image::open(f.try_clone().expect("dup")).expect("opens");
        assert_eq!(img.page_area(), (crate::PAGE_SIZE, 2 * crate::PAGE_SIZE));
        assert_eq!(img.check_pages(), Ok(()));
        // A flipped byte of a page: the payload still reads, the pages do not.
        f.write_all_at(&[0xff], crate::PAGE_SIZE + 77)
            .expect("flip");
        let img = Image::open(f.try_clone().expect("dup")).expect("opens");
        assert!(img.check_pages().is_err_and(|e| e.0.contains("pages")));
        // A file cut short is refused at once.
        f.set_len(2 * crate::PAGE_SIZE).expect("cut");
        assert!(Image::open(f).is_err_and(|e| e.0.contains("truncated")));
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
