//! Moving bytes between descriptors without passing them through the
//! guest: `sendfile`, `copy_file_range`, `splice`, `tee` and `vmsplice`.
//! Every byte goes through the descriptions' own read and write paths (or
//! the pipe's queue), staged [`IO_CHUNK`] at a time: no host call is added
//! to the Sentry's filter, and no Sentry buffer grows with the guest's
//! count.

use std::sync::Arc;

use abi::{Errno, OpenFlags};

use crate::fsimpl::pipe::{Attempt, PipeEnd};
use crate::kernel::task::Task;
use crate::mm::guestio::{ByteSource, GuestBufs, Stage, IO_CHUNK};
use crate::mm::GuestSlice;
use crate::socket::is_socket;
use crate::socket::netlink::NetlinkSocket;
use crate::sync::Locked;
use crate::vfs::file::{Blocker, FileDescription, FileKind};

/// Linux's cap on one transfer (`MAX_RW_COUNT`).
const MAX_RW_COUNT: u64 = 0x7fff_f000;
/// splice(2) flags.
const SPLICE_F_NONBLOCK: u64 = 0x2;
/// `SPLICE_F_MOVE | SPLICE_F_NONBLOCK | SPLICE_F_MORE | SPLICE_F_GIFT`.
const SPLICE_F_ALL: u64 = 0xf;

/// The pipe end of a description that is one (`get_pipe_info`).
fn pipe_end(f: &FileDescription) -> Option<&PipeEnd> {
    f.downcast()
}

fn nonblocking(f: &FileDescription) -> bool {
    f.nonblocking()
}

fn appending(f: &FileDescription) -> bool {
    f.flags() & OpenFlags::APPEND.bits() != 0
}

/// A regular file: what `copy_file_range` accepts, and what carries a
/// position the Sentry keeps (the reads here pass it explicitly).
fn regular(f: &FileDescription) -> bool {
    match &f.kind {
        FileKind::Impl(_) if let Some(m) = f.downcast::<crate::fsimpl::tmpfs::MemInode>() => {
            matches!(m.kind, crate::fsimpl::tmpfs::MemKind::File(_))
        }
        FileKind::Host(_) => !f.is_dir(),
        _ => false,
    }
}

/// Whether reads take an offset (`FMODE_PREAD`): `ESPIPE` or `EINVAL`
/// otherwise, depending on the call.
fn seekable(f: &FileDescription) -> bool {
    regular(f) || generated(f) || matches!(f.kind, FileKind::Dev(_))
}

/// Whether the object has a `splice_read` that feeds a non-pipe output
/// (`do_splice_direct`): files and devices; Linux refuses sockets, pipes
/// and directories there with `EINVAL`.
fn direct_source(f: &FileDescription) -> bool {
    regular(f) || generated(f) || matches!(f.kind, FileKind::Stdio(_) | FileKind::Dev(_))
}

/// A generated file (/proc, /sys), which splices as Linux's
/// `copy_splice_read` does.
fn generated(f: &FileDescription) -> bool {
    f.downcast_impl().is_some_and(|i| i.splice_source())
}

/// Whether the object can feed a pipe (`splice_read`): the above and
/// sockets.
fn pipe_source(f: &FileDescription) -> bool {
    direct_source(f) || (is_socket(f) && crate::socket::downcast::<NetlinkSocket>(f).is_none())
}

/// Whether the object takes spliced data (`splice_write`).
fn sink(f: &FileDescription) -> bool {
    regular(f)
        || is_socket(f)
        || f.downcast::<crate::fsimpl::devpts::PtyEnd>().is_some()
        || pipe_end(f).is_some()
        || matches!(f.kind, FileKind::Dev(_) | FileKind::Stdio(_))
}

/// Reads into a Sentry buffer through the description's read path (`at`:
/// at that offset, position untouched).
fn read_into(
    task: &Task,
    f: &FileDescription,
    buf: &mut [u8],
    at: Option<u64>,
) -> Result<usize, Errno> {
    // The Sentry buffer as the one "guest" slice the read path takes.
    // SAFETY: `buf` is valid for reads and writes of its length, and `s`
    // is a local that only the read below uses, gone when this function
    // returns, inside `buf`'s borrow; `buf` itself is not touched
    // meanwhile.
    let s = [unsafe { GuestSlice::new(buf.as_mut_ptr(), buf.len()) }];
    let n = if is_socket(f) {
        super::socket::read_socket(task, f, &GuestBufs::new(&s))?
    } else {
        f.read(task.blocker(), &s, at)?
    };
    Ok(n as usize)
}

/// Writes a Sentry buffer through the description's write path; a pipe
/// with no reader raises `SIGPIPE` (sockets raise it themselves).
pub(super) fn write_from(
    task: &Task,
    f: &FileDescription,
    buf: &mut [u8],
    at: Option<u64>,
) -> Result<usize, Errno> {
    // The Sentry buffer as the one "guest" slice the write path takes.
    // SAFETY: `buf` is valid for reads and writes of its length, and `s`
    // is a local that only the write below uses, gone when this function
    // returns, inside `buf`'s borrow; `buf` itself is not touched
    // meanwhile.
    let s = [unsafe { GuestSlice::new(buf.as_mut_ptr(), buf.len()) }];
    let r = if is_socket(f) {
        super::socket::write_socket(task, f, &GuestBufs::new(&s), 0)
    } else {
        f.write(task.blocker(), &s, at)
    };
    if r == Err(Errno::EPIPE) && !is_socket(f) {
        task.raise_sigpipe();
    }
    r.map(|n| n as usize)
}

/// `EPIPE` from a pipe write raises `SIGPIPE` (pipe(7)).
fn sigpipe<T>(task: &Task, r: Result<T, Errno>) -> Result<T, Errno> {
    if matches!(r, Err(Errno::EPIPE)) {
        task.raise_sigpipe();
    }
    r
}

/// Waits until the pipe has data (`true`) or no writer is left and it is
/// empty (`false`, end of file): `ipipe_prep`.
fn wait_data(blk: Blocker<'_>, end: &PipeEnd, nonblock: bool) -> Result<bool, Errno> {
    blk.block_on(
        std::slice::from_ref(&end.pipe.rd_wait),
        nonblock,
        || {
            let (readable, _, hup, _) = end.pipe.poll_state();
            Ok(if readable {
                Some(true)
            } else if hup {
                Some(false)
            } else {
                None
            })
        },
        || {
            let (readable, _, hup, _) = end.pipe.poll_state();
            readable || hup
        },
    )
}

/// Waits until the pipe has a free buffer, returning the room: `EPIPE`
/// (and `SIGPIPE`) with no reader (`wait_for_space`).
fn wait_room(task: &Task, end: &PipeEnd, nonblock: bool) -> Result<usize, Errno> {
    let r = task.blocker().block_on(
        std::slice::from_ref(&end.pipe.wr_wait),
        nonblock,
        || {
            let room = end.pipe.splice_room()?;
            Ok((room > 0).then_some(room))
        },
        || {
            let (_, writable, _, no_readers) = end.pipe.poll_state();
            writable || no_readers
        },
    );
    sigpipe(task, r)
}

/// Fills the pipe `dst` from `src` with at most `len` bytes and no more
/// than its free buffers hold now, after waiting for one to be free
/// (`splice_file_to_pipe`). `at` is the read offset, advanced by what went
/// in (`None`: the object has no position).
fn file_to_pipe(
    task: &Task,
    src: &FileDescription,
    at: &mut Option<u64>,
    dst: &PipeEnd,
    len: u64,
    nonblock: bool,
) -> Result<u64, Errno> {
    let room = wait_room(task, dst, nonblock)?;
    let want = len.min(room as u64) as usize;
    let mut stage = Stage::new();
    let mut done = 0usize;
    while done < want {
        let buf = stage.space(IO_CHUNK.min(want - done));
        let got = match read_into(task, src, buf, *at) {
            Ok(n) => n,
            Err(_) if done > 0 => break,
            Err(e) => return Err(e),
        };
        if got == 0 {
            break;
        }
        let put = match sigpipe(task, dst.pipe.push_pages(&buf[..got])) {
            Ok(n) => n,
            Err(_) if done > 0 => break,
            Err(e) => return Err(e),
        };
        done += put;
        if let Some(p) = at {
            *p += put as u64;
        }
        // A socket's or terminal's bytes come as they come: one read.
        if put < got || at.is_none() {
            break;
        }
    }
    Ok(done as u64)
}

/// Empties up to `len` bytes of the pipe `src` into `dst`, after waiting
/// for data (`iter_file_splice_write`): bytes the output refuses stay in
/// the pipe. `at`: the write offset (`None`: the description's own).
fn pipe_to_file(
    task: &Task,
    src: &PipeEnd,
    dst: &FileDescription,
    at: &mut Option<u64>,
    len: u64,
    nonblock: bool,
) -> Result<u64, Errno> {
    if !wait_data(task.blocker(), src, nonblock)? {
        return Ok(0);
    }
    let mut stage = Stage::new();
    let mut done = 0u64;
    while done < len {
        let buf = stage.space(IO_CHUNK.min((len - done) as usize));
        let got = src.pipe.peek(0, buf);
        if got == 0 {
            break;
        }
        let wrote = match write_from(task, dst, &mut buf[..got], *at) {
            Ok(n) => n,
            Err(_) if done > 0 => break,
            Err(e) => return Err(e),
        };
        src.pipe.discard(wrote);
        done += wrote as u64;
        if let Some(p) = at {
            *p += wrote as u64;
        }
        if wrote < got {
            break;
        }
    }
    Ok(done)
}

/// Pipe to pipe: `splice` moves (`consume`), `tee` copies. Waits for data,
/// then for room, then moves what both allow (`splice_pipe_to_pipe`,
/// `link_pipe`).
fn pipe_to_pipe(
    task: &Task,
    src: &PipeEnd,
    dst: &PipeEnd,
    len: u64,
    nonblock: bool,
    consume: bool,
) -> Result<u64, Errno> {
    let data = wait_data(task.blocker(), src, nonblock)?;
    let room = wait_room(task, dst, nonblock)?;
    if !data {
        return Ok(0);
    }
    let want = len.min(room as u64) as usize;
    let mut stage = Stage::new();
    let mut done = 0usize;
    while done < want {
        let buf = stage.space(IO_CHUNK.min(want - done));
        let got = src.pipe.peek(if consume { 0 } else { done }, buf);
        if got == 0 {
            break;
        }
        let put = match sigpipe(task, dst.pipe.push_pages(&buf[..got])) {
            Ok(n) => n,
            Err(_) if done > 0 => break,
            Err(e) => return Err(e),
        };
        if consume {
            src.pipe.discard(put);
        }
        done += put;
        if put < got {
            break;
        }
    }
    Ok(done as u64)
}

/// A guest `loff_t` behind a pointer (`EFAULT`).
fn read_off(task: &Task, addr: u64) -> Result<Option<i64>, Errno> {
    if addr == 0 {
        return Ok(None);
    }
    task.mm().read_obj::<i64>(addr).map(Some)
}

fn file_pos(f: &FileDescription) -> u64 {
    *f.pos.locked()
}

fn set_file_pos(f: &FileDescription, pos: u64) {
    *f.pos.locked() = pos;
}

/// `sendfile(out_fd, in_fd, offset, count)`.
pub fn sys_sendfile(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let offp = a[2];
    // sendfile64 reads the offset before looking at the descriptors, and
    // stores it back whatever the outcome.
    let mut off = read_off(task, offp)?;
    let r = sendfile(task, a[0], a[1], &mut off, a[3]);
    if let Some(v) = off {
        task.mm().write_obj(offp, &v)?;
    }
    r
}

fn sendfile(
    task: &Task,
    out_fd: u64,
    in_fd: u64,
    off: &mut Option<i64>,
    count: u64,
) -> Result<u64, Errno> {
    let inf = task.fds().file(in_fd as i32 as i64)?;
    if !inf.can_read() {
        return Err(Errno::EBADF);
    }
    if off.is_some() && !seekable(&inf) {
        return Err(Errno::ESPIPE);
    }
    let start = match *off {
        Some(v) => v,
        None => file_pos(&inf) as i64,
    };
    if (count as i64) < 0 || (seekable(&inf) && start < 0) {
        return Err(Errno::EINVAL);
    }
    let count = count.min(MAX_RW_COUNT);
    let outf = task.fds().file(out_fd as i32 as i64)?;
    if !outf.can_write() {
        return Err(Errno::EBADF);
    }
    // Objects without a position read at `None`; the rest at an explicit
    // offset, stored back below by what was sent.
    let mut at = seekable(&inf).then_some(start as u64);
    let r = if let Some(end) = pipe_end(&outf) {
        if !pipe_source(&inf) {
            return Err(Errno::EINVAL);
        }
        let nonblock = nonblocking(&outf) || nonblocking(&inf);
        file_to_pipe(task, &inf, &mut at, end, count, nonblock)
    } else {
        // `do_splice_direct`: an appending output, an unseekable input
        // (sockets, pipes) and outputs without `splice_write` are refused.
        if appending(&outf) || !direct_source(&inf) || !sink(&outf) {
            return Err(Errno::EINVAL);
        }
        direct(task, &inf, &mut at, &outf, count)
    };
    if let Some(p) = at {
        match off {
            Some(v) => *v = p as i64,
            None => set_file_pos(&inf, p),
        }
    }
    r
}

/// A file's bytes to any output, piece by piece; stops at the first short
/// write, and a failure after progress returns the progress.
fn direct(
    task: &Task,
    src: &FileDescription,
    at: &mut Option<u64>,
    dst: &FileDescription,
    count: u64,
) -> Result<u64, Errno> {
    let mut stage = Stage::new();
    let mut done = 0u64;
    while done < count {
        let buf = stage.space(IO_CHUNK.min((count - done) as usize));
        let got = match read_into(task, src, buf, *at) {
            Ok(n) => n,
            Err(_) if done > 0 => break,
            Err(e) => return Err(e),
        };
        if got == 0 {
            break;
        }
        let mut wrote = 0;
        let mut failed = None;
        while wrote < got {
            match write_from(task, dst, &mut buf[wrote..got], None) {
                Ok(0) => break,
                Ok(n) => wrote += n,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        done += wrote as u64;
        if let Some(p) = at {
            *p += wrote as u64;
        }
        if let Some(e) = failed {
            if done == 0 {
                return Err(e);
            }
            break;
        }
        if wrote < got || at.is_none() {
            break;
        }
    }
    Ok(done)
}

/// The identity of a regular file's inode, to refuse overlapping copies
/// within one file.
fn same_inode(a: &FileDescription, b: &FileDescription) -> bool {
    match (&a.kind, &b.kind) {
        (FileKind::Impl(_), FileKind::Impl(_))
            if let (Some(x), Some(y)) = (
                a.downcast::<crate::fsimpl::tmpfs::MemInode>(),
                b.downcast::<crate::fsimpl::tmpfs::MemInode>(),
            ) =>
        {
            std::ptr::eq(x, y)
        }
        (FileKind::Host(_), FileKind::Host(_)) => match (a.stat(), b.stat()) {
            (Ok(x), Ok(y)) => x.dev == y.dev && x.ino == y.ino,
            _ => false,
        },
        _ => false,
    }
}

/// `copy_file_range(fd_in, off_in, fd_out, off_out, len, flags)`.
pub fn sys_copy_file_range(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let inf = task.fds().file(a[0] as i32 as i64)?;
    let outf = task.fds().file(a[2] as i32 as i64)?;
    let off_in = read_off(task, a[1])?;
    let off_out = read_off(task, a[3])?;
    if a[5] != 0 {
        return Err(Errno::EINVAL);
    }
    if matches!(inf.kind, FileKind::Path) || matches!(outf.kind, FileKind::Path) {
        return Err(Errno::EBADF);
    }
    // generic_file_rw_checks(), in Linux's order.
    if inf.is_dir() || outf.is_dir() {
        return Err(Errno::EISDIR);
    }
    if !regular(&inf) || !regular(&outf) {
        return Err(Errno::EINVAL);
    }
    if !inf.can_read() || !outf.can_write() || appending(&outf) {
        return Err(Errno::EBADF);
    }
    let pos_in = off_in.unwrap_or(file_pos(&inf) as i64);
    let pos_out = off_out.unwrap_or(file_pos(&outf) as i64);
    let len = a[4];
    // generic_copy_file_checks(): offsets must not wrap...
    if (pos_in as u64).checked_add(len).is_none() || (pos_out as u64).checked_add(len).is_none() {
        return Err(Errno::EOVERFLOW);
    }
    if pos_in < 0 || pos_out < 0 || (len as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    // ... the copy stops at the input's end ...
    let size = inf.stat()?.size.max(0) as u64;
    let count = len.min(size.saturating_sub(pos_in as u64));
    // ... and ranges of one file must not overlap.
    let (pi, po) = (pos_in as u64, pos_out as u64);
    if same_inode(&inf, &outf) && po + count > pi && po < pi + count {
        return Err(Errno::EINVAL);
    }
    if count == 0 {
        return Ok(0);
    }
    // The sandbox's own memory files and a host volume's are different
    // file systems, with no copy_file_range between them (tmpfs has none).
    if std::mem::discriminant(&inf.kind) != std::mem::discriminant(&outf.kind) {
        return Err(Errno::EXDEV);
    }
    let count = count.min(MAX_RW_COUNT);
    let mut stage = Stage::new();
    let mut done = 0u64;
    while done < count {
        let buf = stage.space(IO_CHUNK.min((count - done) as usize));
        let got = match read_into(task, &inf, buf, Some(pi + done)) {
            Ok(n) => n,
            Err(_) if done > 0 => break,
            Err(e) => return Err(e),
        };
        if got == 0 {
            break;
        }
        let wrote = match write_from(task, &outf, &mut buf[..got], Some(po + done)) {
            Ok(n) => n,
            Err(_) if done > 0 => break,
            Err(e) => return Err(e),
        };
        done += wrote as u64;
        if wrote < got {
            break;
        }
    }
    if done > 0 {
        match off_in {
            Some(v) => task.mm().write_obj(a[1], &(v + done as i64))?,
            None => set_file_pos(&inf, pi + done),
        }
        match off_out {
            Some(v) => task.mm().write_obj(a[3], &(v + done as i64))?,
            None => set_file_pos(&outf, po + done),
        }
    }
    Ok(done)
}

/// `splice(fd_in, off_in, fd_out, off_out, len, flags)`.
pub fn sys_splice(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let (len, flags) = (a[4], a[5] & 0xffff_ffff);
    if len == 0 {
        return Ok(0);
    }
    if flags & !SPLICE_F_ALL != 0 {
        return Err(Errno::EINVAL);
    }
    let inf = task.fds().file(a[0] as i32 as i64)?;
    let outf = task.fds().file(a[2] as i32 as i64)?;
    let (ipipe, opipe) = (pipe_end(&inf), pipe_end(&outf));
    // A pipe has no offset (splice(2): ESPIPE).
    if (ipipe.is_some() && a[1] != 0) || (opipe.is_some() && a[3] != 0) {
        return Err(Errno::ESPIPE);
    }
    let off_out = read_off(task, a[3])?;
    let off_in = read_off(task, a[1])?;
    if !inf.can_read() || !outf.can_write() {
        return Err(Errno::EBADF);
    }
    let flag_nb = flags & SPLICE_F_NONBLOCK != 0;
    match (ipipe, opipe) {
        (Some(i), Some(o)) => {
            if Arc::ptr_eq(&i.pipe, &o.pipe) {
                return Err(Errno::EINVAL);
            }
            let nb = flag_nb || nonblocking(&inf) || nonblocking(&outf);
            pipe_to_pipe(task, i, o, len, nb, true)
        }
        (Some(i), None) => {
            if (off_out.is_some() && !seekable(&outf)) || appending(&outf) || !sink(&outf) {
                return Err(Errno::EINVAL);
            }
            if (len as i64) < 0 || off_out.is_some_and(|v| v < 0) {
                return Err(Errno::EINVAL);
            }
            let mut at = off_out.map(|v| v as u64);
            let r = pipe_to_file(task, i, &outf, &mut at, len, flag_nb || nonblocking(&inf));
            if let Some(p) = at {
                task.mm().write_obj(a[3], &(p as i64))?;
            }
            r
        }
        (None, Some(o)) => {
            if (off_in.is_some() && !seekable(&inf)) || !pipe_source(&inf) {
                return Err(Errno::EINVAL);
            }
            let start = off_in.unwrap_or(file_pos(&inf) as i64);
            if (len as i64) < 0 || (seekable(&inf) && start < 0) {
                return Err(Errno::EINVAL);
            }
            let mut at = seekable(&inf).then_some(start as u64);
            let nb = flag_nb || nonblocking(&outf);
            let r = file_to_pipe(task, &inf, &mut at, o, len, nb);
            if let Some(p) = at {
                match off_in {
                    Some(_) => task.mm().write_obj(a[1], &(p as i64))?,
                    None => set_file_pos(&inf, p),
                }
            }
            r
        }
        (None, None) => Err(Errno::EINVAL),
    }
}

/// `tee(fd_in, fd_out, len, flags)`.
pub fn sys_tee(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let (len, flags) = (a[2], a[3] & 0xffff_ffff);
    if flags & !SPLICE_F_ALL != 0 {
        return Err(Errno::EINVAL);
    }
    if len == 0 {
        return Ok(0);
    }
    let inf = task.fds().file(a[0] as i32 as i64)?;
    let outf = task.fds().file(a[1] as i32 as i64)?;
    if !inf.can_read() || !outf.can_write() {
        return Err(Errno::EBADF);
    }
    match (pipe_end(&inf), pipe_end(&outf)) {
        (Some(i), Some(o)) if !Arc::ptr_eq(&i.pipe, &o.pipe) => {
            let nb = flags & SPLICE_F_NONBLOCK != 0 || nonblocking(&inf) || nonblocking(&outf);
            pipe_to_pipe(task, i, o, len, nb, false)
        }
        _ => Err(Errno::EINVAL),
    }
}

/// `vmsplice(fd, iov, nr_segs, flags)`: guest memory into a pipe through
/// its write end, or out of it through its read end. Only
/// `SPLICE_F_NONBLOCK` makes it non-blocking: Linux ignores the
/// description's `O_NONBLOCK` here.
pub fn sys_vmsplice(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let flags = a[3] & 0xffff_ffff;
    if flags & !SPLICE_F_ALL != 0 {
        return Err(Errno::EINVAL);
    }
    let f = task.fds().file(a[0] as i32 as i64)?;
    let to_pipe = if f.can_write() {
        true
    } else if f.can_read() {
        false
    } else {
        return Err(Errno::EBADF);
    };
    // Guest memory is read for a write into the pipe, written otherwise.
    let bufs = super::fs::iovecs_pub(task, a[1], a[2], !to_pipe)?;
    let src = GuestBufs::new(&bufs);
    if src.is_empty() {
        return Ok(0);
    }
    let end = pipe_end(&f).ok_or(Errno::EBADF)?;
    let nonblock = flags & SPLICE_F_NONBLOCK != 0;
    if !to_pipe {
        return task.blocker().block_on(
            std::slice::from_ref(&end.pipe.rd_wait),
            nonblock,
            || match end.pipe.try_read(&bufs)? {
                Attempt::Done(n) => Ok(Some(n)),
                Attempt::WouldBlock => Ok(None),
            },
            || {
                let (readable, _, hup, _) = end.pipe.poll_state();
                readable || hup
            },
        );
    }
    // Whatever fits once there is room; the rest is the caller's to retry.
    let room = wait_room(task, end, nonblock)?;
    let want = src.len().min(room);
    let mut stage = Stage::new();
    let mut done = 0usize;
    while done < want {
        let piece = stage.load(&src, done, IO_CHUNK.min(want - done));
        let put = match sigpipe(task, end.pipe.push_pages(piece)) {
            Ok(n) => n,
            Err(_) if done > 0 => break,
            Err(e) => return Err(e),
        };
        done += put;
        if put < piece.len() {
            break;
        }
    }
    Ok(done as u64)
}

#[cfg(test)]
mod tests {
    use crate::fsimpl::pipe::Pipe;

    #[test]
    fn splice_room_counts_whole_free_pages_and_push_fills_them() {
        let p = Pipe::new();
        assert_eq!(p.splice_room(), Ok(65536));
        let data = vec![7u8; 70000];
        assert_eq!(p.push_pages(&data[..5]), Ok(5));
        // The partly filled page is not joined: 15 pages remain.
        assert_eq!(p.splice_room(), Ok(15 * 4096));
        assert_eq!(p.push_pages(&data), Ok(15 * 4096));
        assert_eq!(p.splice_room(), Ok(0));
        assert_eq!(p.push_pages(&data), Ok(0));
    }

    #[test]
    fn peek_leaves_bytes_and_discard_frees_pages() {
        let p = Pipe::new();
        assert_eq!(p.push_pages(b"hello world"), Ok(11));
        let mut out = [0u8; 5];
        assert_eq!(p.peek(6, &mut out), 5);
        assert_eq!(&out, b"world");
        assert_eq!(p.peek(0, &mut out), 5);
        assert_eq!(&out, b"hello");
        assert_eq!(p.available(), 11);
        p.discard(6);
        assert_eq!(p.peek(0, &mut out), 5);
        assert_eq!(&out, b"world");
        p.discard(5);
        assert_eq!(p.available(), 0);
        assert_eq!(p.splice_room(), Ok(65536));
        assert_eq!(p.peek(0, &mut out), 0);
    }
}
