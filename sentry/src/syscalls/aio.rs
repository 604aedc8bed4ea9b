//! Linux AIO: `io_setup`, `io_submit`, `io_getevents`, `io_pgetevents`,
//! `io_cancel`, `io_destroy`. Each request runs when it is submitted (as
//! Linux runs buffered file I/O), and its completion goes into the context's
//! ring, a page of the guest's memory laid out as Linux's `struct aio_ring`
//! (libaio reaps from it without a system call). `IOCB_CMD_POLL` is not
//! supported (`EINVAL`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

use abi::Errno;

use super::args::{Args, SyscallArgs};
use crate::kernel::task::Task;
use crate::kernel::wait::WaitQueue;
use crate::mm::{Backing, MemoryManager};
use crate::vfs::file::{FileDescription, FileKind};
use crate::PAGE_SIZE;
use platform::Prot;

const AIO_RING_MAGIC: u32 = 0xa10a_10a1;
/// `sizeof(struct aio_ring)`: its header; events follow.
const RING_HEADER: u64 = 32;
/// `sizeof(struct io_event)`
const EVENT_SIZE: u64 = 32;
/// `sizeof(struct iocb)`
const IOCB_SIZE: usize = 64;
/// `/proc/sys/fs/aio-max-nr` (read-only in the sandbox: global in Linux).
const AIO_MAX_NR: u64 = 65536;

const IOCB_CMD_PREAD: u16 = 0;
const IOCB_CMD_PWRITE: u16 = 1;
const IOCB_CMD_FSYNC: u16 = 2;
const IOCB_CMD_FDSYNC: u16 = 3;
const IOCB_CMD_PREADV: u16 = 7;
const IOCB_CMD_PWRITEV: u16 = 8;
/// Signal the eventfd `aio_resfd` at completion (`IOCB_FLAG_IOPRIO`, the
/// other flag, changes nothing here).
const IOCB_FLAG_RESFD: u32 = 1;

use crate::kernel::AIO_NR;
use crate::sync::Locked;

/// One context: its ring in the guest's memory.
struct Ctx {
    /// The ring's address, which is the context's id.
    ring: u64,
    /// Slots of the ring.
    nr: u32,
    /// The requests the caller asked for (counted in `AIO_NR`).
    max_reqs: u32,
    /// The ring's tail, as the Sentry wrote it (the guest's copy is not
    /// trusted).
    tail: Mutex<u32>,
    /// `io_getevents` callers waiting for completions.
    waiters: WaitQueue,
}

impl Drop for Ctx {
    fn drop(&mut self) {
        AIO_NR.fetch_sub(u64::from(self.max_reqs), Ordering::Relaxed);
    }
}

/// The contexts of each address space, as Linux keeps them on the mm: a
/// child after `fork` and a program after `execve` start with none.
type Table = HashMap<usize, (Weak<Mutex<MemoryManager>>, Vec<Arc<Ctx>>)>;

fn table() -> MutexGuard<'static, Table> {
    static TABLE: std::sync::OnceLock<Mutex<Table>> = std::sync::OnceLock::new();
    TABLE.get_or_init(Mutex::default).locked()
}

fn key(task: &Task) -> usize {
    Arc::as_ptr(&task.mm) as usize
}

/// The context `id` of the caller's address space.
fn lookup(task: &Task, id: u64) -> Result<Arc<Ctx>, Errno> {
    let t = table();
    match t.get(&key(task)) {
        Some((w, ctxs)) if Weak::ptr_eq(w, &Arc::downgrade(&task.mm)) => ctxs
            .iter()
            .find(|c| c.ring == id)
            .cloned()
            .ok_or(Errno::EINVAL),
        _ => Err(Errno::EINVAL),
    }
}

/// `io_setup(nr_events, ctxp)`.
pub fn sys_io_setup(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (want, ctxp) = (a.u32(0), a.ptr(1));
    let old: u64 = task.mm().read_obj(ctxp)?;
    if old != 0 || want == 0 {
        return Err(Errno::EINVAL);
    }
    // Sized as Linux's `ioctx_alloc` and `aio_setup_ring` size it: room
    // for four per CPU, doubled, two spare, rounded up to whole pages.
    let cpus = task.kernel.cpus.max(1) as u64;
    let doubled = u64::from(want).max(cpus * 4) * 2;
    if doubled > 0x1000_0000 / EVENT_SIZE {
        return Err(Errno::EINVAL);
    }
    if u64::from(want) > AIO_MAX_NR {
        return Err(Errno::EAGAIN);
    }
    let bytes = (RING_HEADER + (doubled + 2) * EVENT_SIZE).div_ceil(PAGE_SIZE) * PAGE_SIZE;
    let nr = ((bytes - RING_HEADER) / EVENT_SIZE) as u32;
    let prev = AIO_NR.fetch_add(u64::from(want), Ordering::Relaxed);
    if prev + u64::from(want) > AIO_MAX_NR {
        AIO_NR.fetch_sub(u64::from(want), Ordering::Relaxed);
        return Err(Errno::EAGAIN);
    }
    let ring = {
        let mut mm = task.mm();
        let at = mm.pick_address(0, bytes).inspect_err(|_| {
            AIO_NR.fetch_sub(u64::from(want), Ordering::Relaxed);
        })?;
        if let Err(e) = mm.map_fixed(
            at,
            bytes,
            Prot {
                read: true,
                write: true,
                exec: false,
            },
            false,
            Backing::Anon,
        ) {
            AIO_NR.fetch_sub(u64::from(want), Ordering::Relaxed);
            return Err(e);
        }
        at
    };
    let ctx = Arc::new(Ctx {
        ring,
        nr,
        max_reqs: want,
        tail: Mutex::new(0),
        waiters: WaitQueue::new(),
    });
    let id = {
        let mut t = table();
        t.retain(|_, (w, _)| w.strong_count() > 0);
        let e = t
            .entry(key(task))
            .or_insert_with(|| (Arc::downgrade(&task.mm), Vec::new()));
        if !Weak::ptr_eq(&e.0, &Arc::downgrade(&task.mm)) {
            *e = (Arc::downgrade(&task.mm), Vec::new());
        }
        e.1.push(ctx.clone());
        e.1.len() as u32 - 1
    };
    // id, nr, head, tail, magic, compat_features, incompat_features,
    // header_length
    let mut header = Vec::with_capacity(RING_HEADER as usize);
    for v in [id, nr, 0, 0, AIO_RING_MAGIC, 1, 0, RING_HEADER as u32] {
        header.extend_from_slice(&v.to_ne_bytes());
    }
    // (One lock of the address space at a time.)
    let mut written = task.mm().poke(ring, &header);
    if written.is_ok() {
        written = task.mm().copy_out(ctxp, &ring.to_ne_bytes());
    }
    if let Err(e) = written {
        destroy(task, &ctx);
        return Err(e);
    }
    Ok(0)
}

/// Forgets `ctx` and unmaps its ring.
fn destroy(task: &Task, ctx: &Arc<Ctx>) {
    if let Some((_, ctxs)) = table().get_mut(&key(task)) {
        ctxs.retain(|c| !Arc::ptr_eq(c, ctx));
    }
    let len = RING_HEADER + u64::from(ctx.nr) * EVENT_SIZE;
    let _ = task
        .mm()
        .unmap_range(ctx.ring, ctx.ring + len.div_ceil(PAGE_SIZE) * PAGE_SIZE);
    // Waiters see the context gone.
    ctx.waiters.notify();
}

/// `io_destroy(ctx)`.
pub fn sys_io_destroy(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let ctx = lookup(task, a.u64(0))?;
    destroy(task, &ctx);
    Ok(0)
}

/// The ring's head as the guest left it (reaping in user space moves it),
/// within the ring.
fn head(task: &Task, ctx: &Ctx) -> Result<u32, Errno> {
    let mut b = [0u8; 4];
    task.mm().peek(ctx.ring + 8, &mut b)?;
    Ok(u32::from_ne_bytes(b) % ctx.nr)
}

/// Completions in the ring not yet reaped.
fn pending(task: &Task, ctx: &Ctx, tail: u32) -> Result<u32, Errno> {
    Ok((tail + ctx.nr - head(task, ctx)?) % ctx.nr)
}

/// A struct iocb, as read from the guest.
struct Iocb {
    data: u64,
    rw_flags: u32,
    opcode: u16,
    fd: u32,
    buf: u64,
    nbytes: u64,
    offset: i64,
    reserved2: u64,
    flags: u32,
    resfd: u32,
}

fn read_iocb(task: &Task, addr: u64) -> Result<Iocb, Errno> {
    let mut b = [0u8; IOCB_SIZE];
    task.mm().copy_in(addr, &mut b)?;
    let u64_at = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
    let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap_or([0; 4]));
    Ok(Iocb {
        data: u64_at(0),
        rw_flags: u32_at(12),
        opcode: u16::from_ne_bytes([b[16], b[17]]),
        fd: u32_at(20),
        buf: u64_at(24),
        nbytes: u64_at(32),
        offset: u64_at(40) as i64,
        reserved2: u64_at(48),
        flags: u32_at(56),
        resfd: u32_at(60),
    })
}

/// `io_submit(ctx, nr, iocbpp)`: how many requests were taken; the first
/// one's error if none was.
pub fn sys_io_submit(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (id, nr, list) = (a.u64(0), a.i64(1), a.ptr(2));
    if nr < 0 {
        return Err(Errno::EINVAL);
    }
    let ctx = lookup(task, id)?;
    let nr = nr.min(i64::from(ctx.nr)) as u64;
    let mut done = 0;
    for i in 0..nr {
        match submit_one(task, &ctx, list + i * 8) {
            Ok(()) => done += 1,
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(done)
}

fn submit_one(task: &mut Task, ctx: &Arc<Ctx>, slot: u64) -> Result<(), Errno> {
    let user: u64 = task.mm().read_obj(slot)?;
    let cb = read_iocb(task, user)?;
    if cb.reserved2 != 0 || cb.nbytes > isize::MAX as u64 {
        return Err(Errno::EINVAL);
    }
    // A slot for the completion (Linux's reqs_available).
    if pending(task, ctx, *ctx.tail.locked())? + 1 >= ctx.nr {
        return Err(Errno::EAGAIN);
    }
    let resfd = if cb.flags & IOCB_FLAG_RESFD != 0 {
        let f = task.fds().file(i64::from(cb.resfd))?;
        if f.downcast_arc::<crate::fsimpl::events::EventFd>().is_none() {
            return Err(Errno::EINVAL);
        }
        Some(f)
    } else {
        None
    };
    let file = task.fds().file(i64::from(cb.fd))?;
    if matches!(file.kind, FileKind::Path) {
        return Err(Errno::EBADF);
    }
    // Linux writes its key (0) back into the iocb.
    task.mm().copy_out(user + 8, &0u32.to_ne_bytes())?;
    let res: i64 = match cb.opcode {
        IOCB_CMD_PREAD | IOCB_CMD_PWRITE | IOCB_CMD_PREADV | IOCB_CMD_PWRITEV => {
            let write = matches!(cb.opcode, IOCB_CMD_PWRITE | IOCB_CMD_PWRITEV);
            let vectored = matches!(cb.opcode, IOCB_CMD_PREADV | IOCB_CMD_PWRITEV);
            let allowed = if write {
                file.writable()
            } else {
                file.can_read()
            };
            if !allowed {
                return Err(Errno::EBADF);
            }
            // A directory has no read_iter or write_iter.
            if file.is_dir() {
                return Err(Errno::EINVAL);
            }
            if vectored {
                // The array itself is read at submission (EFAULT then);
                // a bad buffer in it, as a bad plain buffer, is the
                // request's result.
                let mut raw = vec![0u8; (cb.nbytes.min(1024) * 16) as usize];
                task.mm().copy_in(cb.buf, &mut raw)?;
            }
            let bufs = match if vectored {
                super::fs::iovecs_pub(task, cb.buf, cb.nbytes, !write)
            } else {
                super::fs::guest_buf(task, cb.buf, cb.nbytes, !write)
            } {
                Ok(b) => b,
                Err(Errno::EFAULT) => {
                    complete(task, ctx, user, cb.data, -i64::from(Errno::EFAULT.0))?;
                    signal(&resfd);
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            if cb.offset < 0 && super::fs::is_positional(&file) {
                return Err(Errno::EINVAL);
            }
            let at = super::fs::is_positional(&file).then_some(cb.offset as u64);
            match super::fs::rw_core(task, &file, at, &bufs, write, cb.rw_flags) {
                Ok(n) => n as i64,
                // Refused flags are the call's error; what the I/O met is
                // the request's result.
                Err(e @ Errno::EOPNOTSUPP) => return Err(e),
                Err(e) => -i64::from(e.0),
            }
        }
        IOCB_CMD_FSYNC | IOCB_CMD_FDSYNC => {
            if !has_fsync(&file) {
                return Err(Errno::EINVAL);
            }
            match super::fs::sync_file_pub(task, &file) {
                Ok(()) => 0,
                Err(e) => -i64::from(e.0),
            }
        }
        _ => return Err(Errno::EINVAL),
    };
    complete(task, ctx, user, cb.data, res)?;
    signal(&resfd);
    Ok(())
}

/// Tells the request's eventfd, if it has one, of its completion.
fn signal(resfd: &Option<Arc<FileDescription>>) {
    if let Some(e) = resfd
        .as_ref()
        .and_then(|f| f.downcast_arc::<crate::fsimpl::events::EventFd>())
    {
        let _ = e.try_write(1);
    }
}

/// Whether the file has an `fsync` (pipes, sockets and devices do not).
fn has_fsync(file: &FileDescription) -> bool {
    matches!(file.kind, FileKind::Host(_))
        || file.downcast::<crate::fsimpl::tmpfs::MemInode>().is_some()
}

/// Puts an event in the ring and wakes the reapers.
fn complete(task: &Task, ctx: &Ctx, obj: u64, data: u64, res: i64) -> Result<(), Errno> {
    let mut tail = ctx.tail.locked();
    let mut ev = [0u8; EVENT_SIZE as usize];
    ev[..8].copy_from_slice(&data.to_ne_bytes());
    ev[8..16].copy_from_slice(&obj.to_ne_bytes());
    ev[16..24].copy_from_slice(&res.to_ne_bytes());
    let at = ctx.ring + RING_HEADER + u64::from(*tail) * EVENT_SIZE;
    task.mm().poke(at, &ev)?;
    *tail = (*tail + 1) % ctx.nr;
    task.mm().poke(ctx.ring + 12, &tail.to_ne_bytes())?;
    drop(tail);
    ctx.waiters.notify();
    Ok(())
}

/// Moves up to `max` completions to `out`; how many.
fn reap(task: &Task, ctx: &Ctx, out: u64, max: u64) -> Result<u64, Errno> {
    let tail = *ctx.tail.locked();
    let mut head = head(task, ctx)?;
    let mut n = 0;
    let mut ev = [0u8; EVENT_SIZE as usize];
    while n < max && head != tail {
        task.mm().peek(
            ctx.ring + RING_HEADER + u64::from(head) * EVENT_SIZE,
            &mut ev,
        )?;
        task.mm().copy_out(out + n * EVENT_SIZE, &ev)?;
        head = (head + 1) % ctx.nr;
        n += 1;
    }
    if n > 0 {
        task.mm().poke(ctx.ring + 8, &head.to_ne_bytes())?;
    }
    Ok(n)
}

/// `io_getevents(ctx, min_nr, nr, events, timeout)`.
pub fn sys_io_getevents(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let deadline = timeout(task, a.ptr(4))?;
    getevents(task, a.u64(0), a.i64(1), a.i64(2), a.ptr(3), deadline)
}

/// `io_pgetevents(ctx, min_nr, nr, events, timeout, usig)`: with the
/// signal mask of `usig` (`{sigmask, sigsetsize}`) while it waits.
pub fn sys_io_pgetevents(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let deadline = timeout(task, a.ptr(4))?;
    let (mask, size) = match a.ptr(5) {
        0 => (0, 8),
        p => {
            let v: [u64; 2] = task.mm().read_obj(p)?;
            (v[0], v[1])
        }
    };
    let (id, min, nr, out) = (a.u64(0), a.i64(1), a.i64(2), a.ptr(3));
    super::poll::with_mask_pub(task, mask, size, |t| {
        getevents(t, id, min, nr, out, deadline)
    })
}

fn timeout(task: &Task, tsp: u64) -> Result<Option<Instant>, Errno> {
    if tsp == 0 {
        return Ok(None);
    }
    let ts: abi::Timespec = task.mm().read_obj(tsp)?;
    super::poll::deadline_of(&ts).map(Some)
}

fn getevents(
    task: &mut Task,
    id: u64,
    min: i64,
    nr: i64,
    out: u64,
    deadline: Option<Instant>,
) -> Result<u64, Errno> {
    let ctx = lookup(task, id)?;
    if min < 0 || nr < 0 || min > nr {
        return Err(Errno::EINVAL);
    }
    let (min, nr) = (min as u64, nr as u64);
    let mut got = reap(task, &ctx, out, nr)?;
    if got >= min || nr == 0 {
        return Ok(got);
    }
    // Waits for the rest; the time running out is not an error, and a
    // signal is EINTR only when nothing was reaped.
    let blk = task.blocker();
    loop {
        let ready = || {
            lookup(task, id).is_err()
                || pending(task, &ctx, *ctx.tail.locked()).is_ok_and(|p| p > 0)
        };
        match blk.wait_once(
            std::slice::from_ref(&ctx.waiters),
            deadline,
            Errno::EINTR,
            ready,
        ) {
            Ok(true) => {}
            Ok(false) => return Ok(got),
            Err(e) if got == 0 => return Err(e),
            Err(_) => return Ok(got),
        }
        if lookup(task, id).is_err() {
            return if got > 0 { Ok(got) } else { Err(Errno::EINVAL) };
        }
        got += reap(task, &ctx, out + got * EVENT_SIZE, nr - got)?;
        if got >= min {
            return Ok(got);
        }
    }
}

/// `io_cancel(ctx, iocb, result)`: requests finish as they are submitted,
/// so none is ever in flight to cancel.
pub fn sys_io_cancel(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let _ctx = lookup(task, a.u64(0))?;
    let _: [u8; IOCB_SIZE] = task.mm().read_obj(a.ptr(1))?;
    Err(Errno::EINVAL)
}
