//! File system calls: descriptors, reading, metadata, directories, and the
//! write operations a read-only root refuses with `EROFS`.

use std::sync::Arc;

use abi::landlock::access;
use abi::{
    Errno, Iovec, OpenFlags, RwfFlags, Stat, Statx, StatxTimestamp, AT_EMPTY_PATH, AT_FDCWD,
    AT_NO_AUTOMOUNT, AT_STATX_SYNC_TYPE, AT_SYMLINK_NOFOLLOW,
};
use zerocopy::FromZeros;

use super::{dir_arg, path_arg};
use crate::fsimpl::tmpfs::{downcast, mem_arc, mem_of, MemInode, MemKind};
use crate::host;
use crate::kernel::auth::{cap, Creds, MAY_EXEC, MAY_READ, MAY_WRITE};
use crate::kernel::landlock;
use crate::kernel::task::Task;
use crate::mm::guestio::GuestBufs;
use crate::mm::GuestSlice;
use crate::socket::is_socket;
use crate::sync::Locked;
use crate::vfs::fasync::OwnerKind;
use crate::vfs::file::{FdEntry, FileDescription, FileKind};
use crate::vfs::inotify::{self, EntryIds};
use crate::vfs::lock::{FileKey, Owner, RecordLock, OFFSET_MAX};
use crate::vfs::{Device, GoferRef, HostFile, Location, Lookup, Node, VolumeKind};

/// Linux's cap on one read or write (`MAX_RW_COUNT`).
const MAX_RW_COUNT: u64 = 0x7fff_f000;
/// `UIO_MAXIOV`.
const UIO_MAXIOV: u64 = 1024;

pub(super) fn guest_buf(
    task: &Task,
    addr: u64,
    len: u64,
    write: bool,
) -> Result<Vec<GuestSlice>, Errno> {
    task.mm().slices(addr, len.min(MAX_RW_COUNT), write)
}

/// The guest buffers of an iovec array (`EFAULT`, `EINVAL` as readv(2)).
pub fn iovecs_pub(
    task: &Task,
    addr: u64,
    count: u64,
    write: bool,
) -> Result<Vec<GuestSlice>, Errno> {
    iovecs(task, addr, count, write)
}

fn iovecs(task: &Task, addr: u64, count: u64, write: bool) -> Result<Vec<GuestSlice>, Errno> {
    if count > UIO_MAXIOV {
        return Err(Errno::EINVAL);
    }
    let mut out = Vec::new();
    let mut total: u64 = 0;
    for i in 0..count {
        let iov: Iovec = task.mm().read_obj(addr + i * 16)?;
        if iov.len > i64::MAX as u64 {
            return Err(Errno::EINVAL);
        }
        let len = iov.len.min(MAX_RW_COUNT - total);
        total += len;
        if len > 0 {
            match task.mm().slices(iov.base, len, write) {
                Ok(s) => out.extend(s),
                // Linux transfers up to the first bad buffer.
                Err(e) if !out.is_empty() => {
                    let _ = e;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(out)
}

/// Reads from a socket into guest buffers.
fn socket_read(task: &Task, file: &FileDescription, bufs: &[GuestSlice]) -> Result<u64, Errno> {
    super::socket::read_socket(task, file, &GuestBufs::new(bufs))
}

/// Writes guest buffers to a socket.
fn socket_write(task: &Task, file: &FileDescription, bufs: &[GuestSlice]) -> Result<u64, Errno> {
    super::socket::write_socket(task, file, &GuestBufs::new(bufs), 0)
}

pub fn sys_read(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let file = task.fds().file(a[0] as i32 as i64)?;
    if is_socket(&file) {
        let bufs = guest_buf(task, a[1], a[2], true)?;
        return socket_read(task, &file, &bufs);
    }
    if a[2] == 0 {
        return Ok(0);
    }
    file.read(task.blocker(), &guest_buf(task, a[1], a[2], true)?, None)
}

/// A write to a pipe with no reader raises `SIGPIPE` as well as failing
/// with `EPIPE` (pipe(7)).
fn sigpipe(task: &Task, r: Result<u64, Errno>) -> Result<u64, Errno> {
    if r == Err(Errno::EPIPE) {
        task.raise_sigpipe();
    }
    r
}

pub fn sys_write(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let file = task.fds().file(a[0] as i32 as i64)?;
    if is_socket(&file) {
        let bufs = guest_buf(task, a[1], a[2], false)?;
        return socket_write(task, &file, &bufs);
    }
    if a[2] == 0 {
        // Nothing to write, but the descriptor must allow writing.
        return if file.writable() {
            Ok(0)
        } else {
            Err(Errno::EBADF)
        };
    }
    let r = file.write(task.blocker(), &guest_buf(task, a[1], a[2], false)?, None);
    sigpipe(task, r)
}

pub fn sys_pipe(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    pipe2(task, a[0], 0)
}

pub fn sys_pipe2(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    pipe2(task, a[0], a[1] as u32)
}

fn pipe2(task: &mut Task, addr: u64, flags: u32) -> Result<u64, Errno> {
    let allowed = (OpenFlags::CLOEXEC | OpenFlags::NONBLOCK | OpenFlags::DIRECT).bits();
    if flags & !allowed != 0 {
        return Err(Errno::EINVAL);
    }
    // Check the destination before creating anything.
    task.mm().slices(addr, 8, true)?;
    let pipe = crate::fsimpl::pipe::Pipe::new();
    let status = flags & (OpenFlags::NONBLOCK | OpenFlags::DIRECT).bits();
    let cloexec = flags & OpenFlags::CLOEXEC.bits() != 0;
    let r = FileDescription::new(
        FileKind::Impl(Arc::new(crate::fsimpl::pipe::PipeEnd {
            pipe: pipe.clone(),
            reader: true,
        })),
        None,
        status,
    );
    let w = FileDescription::new(
        FileKind::Impl(Arc::new(crate::fsimpl::pipe::PipeEnd {
            pipe,
            reader: false,
        })),
        None,
        status | OpenFlags::WRONLY.bits(),
    );
    let limit = task.nofile();
    let rfd = task
        .fds()
        .insert_from(0, FdEntry { file: r, cloexec }, limit)?;
    let wfd = match task
        .fds()
        .insert_from(0, FdEntry { file: w, cloexec }, limit)
    {
        Ok(fd) => fd,
        Err(e) => {
            let _ = task.fds().remove(rfd);
            return Err(e);
        }
    };
    task.mm().write_obj(addr, &[rfd as i32, wfd as i32])?;
    Ok(0)
}

fn offset_arg(off: u64) -> Result<u64, Errno> {
    if (off as i64) < 0 {
        Err(Errno::EINVAL)
    } else {
        Ok(off)
    }
}

/// The open file of message queue `q`.
fn mqueue_file(q: Arc<crate::kernel::ipc::mqueue::MsgQueue>) -> FileKind {
    FileKind::Impl(Arc::new(crate::fsimpl::mqueue::MqueueFile(q)))
}

/// Whether reads and writes of `file` take a position (`pread`).
pub(super) fn is_positional(file: &FileDescription) -> bool {
    positional(file).is_ok()
}

fn positional(file: &FileDescription) -> Result<(), Errno> {
    match &file.kind {
        FileKind::Impl(i) if i.seekable() => Ok(()),
        FileKind::Stdio(_) | FileKind::Host(_) | FileKind::Dev(_) | FileKind::SynthDir => Ok(()),
        FileKind::Path => Err(Errno::EBADF),
        _ => Err(Errno::ESPIPE),
    }
}

pub fn sys_pread64(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let file = task.fds().file(a[0] as i32 as i64)?;
    positional(&file)?;
    let off = offset_arg(a[3])?;
    if a[2] == 0 {
        return Ok(0);
    }
    file.read(
        task.blocker(),
        &guest_buf(task, a[1], a[2], true)?,
        Some(off),
    )
}

pub fn sys_pwrite64(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let file = task.fds().file(a[0] as i32 as i64)?;
    positional(&file)?;
    let off = offset_arg(a[3])?;
    if a[2] == 0 {
        return Ok(0);
    }
    let r = file.write(
        task.blocker(),
        &guest_buf(task, a[1], a[2], false)?,
        Some(off),
    );
    sigpipe(task, r)
}

pub fn sys_readv(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let file = task.fds().file(a[0] as i32 as i64)?;
    if is_socket(&file) {
        let bufs = iovecs(task, a[1], a[2], true)?;
        return socket_read(task, &file, &bufs);
    }
    file.read(task.blocker(), &iovecs(task, a[1], a[2], true)?, None)
}

pub fn sys_writev(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let file = task.fds().file(a[0] as i32 as i64)?;
    if is_socket(&file) {
        let bufs = iovecs(task, a[1], a[2], false)?;
        return socket_write(task, &file, &bufs);
    }
    let r = file.write(task.blocker(), &iovecs(task, a[1], a[2], false)?, None);
    sigpipe(task, r)
}

pub fn sys_preadv(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    rw2(task, offset_arg(a[3])?, a, false, 0)
}

pub fn sys_pwritev(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    rw2(task, offset_arg(a[3])?, a, true, 0)
}

/// The `RWF_*` flags a kind of file takes, as Linux decides them: by
/// `FMODE_NOWAIT`, `FOP_DONTCACHE`, and whether the file has
/// `read_iter`/`write_iter` (without, only `RWF_HIPRI` passes). tmpfs
/// files answer as shmem does, host files as ext4 does (no `RWF_NOWAIT`
/// for buffered writes). `RWF_ATOMIC` needs direct I/O: never.
fn rwf_supported(file: &FileDescription, write: bool) -> RwfFlags {
    use RwfFlags as R;
    let base = R::HIPRI | R::DSYNC | R::SYNC | R::APPEND | R::NOAPPEND | R::NOSIGNAL;
    match &file.kind {
        FileKind::Dev(Device::Full) if write => R::HIPRI,
        FileKind::Dev(Device::Full) => base,
        FileKind::Impl(_) if file.downcast::<MemInode>().is_some() => base,
        FileKind::Host(_) if write => base | R::DONTCACHE,
        FileKind::Host(_) => base | R::NOWAIT | R::DONTCACHE,
        _ => base | R::NOWAIT,
    }
}

/// `preadv2(2)`, `pwritev2(2)`: `preadv`/`pwritev`, or `readv`/`writev`
/// at offset -1, with `RWF_*` flags `bits`, checked in Linux's order
/// (offset, descriptor, access, iovec; nothing to move is 0 whatever the
/// flags).
fn rw2(task: &mut Task, pos: u64, a: &[u64; 6], write: bool, bits: u32) -> Result<u64, Errno> {
    let pos = pos as i64;
    if pos < -1 {
        return Err(Errno::EINVAL);
    }
    let file = task.fds().file(a[0] as i32 as i64)?;
    let at = (pos != -1).then_some(pos as u64);
    if at.is_some() {
        positional(&file)?;
    }
    if !(if write {
        file.writable()
    } else {
        file.can_read()
    }) {
        return Err(Errno::EBADF);
    }
    let bufs = iovecs(task, a[1], a[2], !write)?;
    rw_core(task, &file, at, &bufs, write, bits)
}

/// A read or write of `bufs` at `at` (else at the file's offset) with
/// `RWF_*` flags `bits`, access already checked: `preadv2`'s and AIO's.
pub(super) fn rw_core(
    task: &mut Task,
    file: &Arc<FileDescription>,
    at: Option<u64>,
    bufs: &[GuestSlice],
    write: bool,
    bits: u32,
) -> Result<u64, Errno> {
    let file = file.clone();
    if bufs.iter().all(GuestSlice::is_empty) {
        return Ok(0);
    }
    let supported = rwf_supported(&file, write);
    let flags = match RwfFlags::from_bits(bits) {
        Some(f) if supported == RwfFlags::HIPRI && !RwfFlags::HIPRI.contains(f) => {
            return Err(Errno::EOPNOTSUPP)
        }
        Some(f) if f.contains(RwfFlags::APPEND | RwfFlags::NOAPPEND) => return Err(Errno::EINVAL),
        Some(f) if supported.contains(f) => f,
        _ => return Err(Errno::EOPNOTSUPP),
    };
    let append = if flags.contains(RwfFlags::APPEND) {
        Some(true)
    } else if flags.contains(RwfFlags::NOAPPEND) {
        Some(false)
    } else {
        None
    };
    let nosignal = flags.contains(RwfFlags::NOSIGNAL);
    task.nowait = flags.contains(RwfFlags::NOWAIT);
    let r = match (write, is_socket(&file)) {
        (false, true) => socket_read(task, &file, bufs),
        (false, false) => file.read(task.blocker(), bufs, at),
        (true, true) => {
            let flags = if nosignal {
                super::socket::MSG_NOSIGNAL
            } else {
                0
            };
            super::socket::write_socket(task, &file, &GuestBufs::new(bufs), flags)
        }
        (true, false) => {
            let r = file.write_with(task.blocker(), bufs, at, append);
            if nosignal {
                r
            } else {
                sigpipe(task, r)
            }
        }
    };
    task.nowait = false;
    if write && r.is_ok() && flags.intersects(RwfFlags::SYNC | RwfFlags::DSYNC) {
        sync_file(task, &file)?;
    }
    r
}

pub fn sys_preadv2(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    rw2(task, a[3], a, false, a[5] as u32)
}

pub fn sys_pwritev2(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    rw2(task, a[3], a, true, a[5] as u32)
}

pub fn sys_open(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    open_with(
        task,
        AT_FDCWD as u64,
        a[0],
        a[1] as u32,
        a[2] as u32,
        Default::default(),
    )
}

pub fn sys_openat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    open_with(
        task,
        a[0],
        a[1],
        a[2] as u32,
        a[3] as u32,
        Default::default(),
    )
}

/// `fanotify_init(2)`: refused as a container refuses it (Docker's profile
/// allows it only with `CAP_SYS_ADMIN`, which containers do not get), so
/// tools fall back to inotify, which the Sentry has.
pub fn sys_fanotify_init(_task: &mut Task, _a: &[u64; 6]) -> Result<u64, Errno> {
    Err(Errno::EPERM)
}

/// `fanotify_mark(2)`: refused with `fanotify_init`.
pub fn sys_fanotify_mark(_task: &mut Task, _a: &[u64; 6]) -> Result<u64, Errno> {
    Err(Errno::EPERM)
}

pub fn sys_inotify_init(task: &mut Task, _a: &[u64; 6]) -> Result<u64, Errno> {
    inotify_init(task, 0)
}

pub fn sys_inotify_init1(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    inotify_init(task, a[0] as u32)
}

fn inotify_init(task: &mut Task, flags: u32) -> Result<u64, Errno> {
    let allowed = OpenFlags::CLOEXEC.bits() | OpenFlags::NONBLOCK.bits();
    if flags & !allowed != 0 {
        return Err(Errno::EINVAL);
    }
    let kind = FileKind::Impl(inotify::Inotify::new());
    // An inotify descriptor is read-only (O_RDONLY is 0).
    super::events::install_with(task, kind, flags, 0)
}

fn inotify_of(task: &Task, fd: u64) -> Result<Arc<inotify::Inotify>, Errno> {
    task.fds()
        .file(fd as i32 as i64)?
        .downcast_arc::<inotify::Inotify>()
        .ok_or(Errno::EINVAL)
}

pub fn sys_inotify_add_watch(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let ino = inotify_of(task, a[0])?;
    let m = a[2] as u32;
    if m & inotify::mask::ALL_EVENTS == 0 {
        return Err(Errno::EINVAL);
    }
    let path = path_arg(task, a[1])?;
    let start = dir_arg(task, AT_FDCWD as u64, &path)?;
    let follow = m & inotify::mask::DONT_FOLLOW == 0;
    let loc = task.resolve(&start, &path, follow)?;
    check_access(task, &loc, 4)?;
    let (key, is_dir) = inotify::identify(loc.node()).ok_or(Errno::ENOENT)?;
    if m & inotify::mask::ONLYDIR != 0 && !is_dir {
        return Err(Errno::ENOTDIR);
    }
    if m & !inotify::mask::VALID != 0 {
        return Err(Errno::EINVAL);
    }
    // On a volume, the host's changes are watched too.
    let host = crate::vfs::volume_watch::share(loc.node(), key)?;
    ino.add_watch(key, m, host).map(|wd| wd as u64)
}

pub fn sys_inotify_rm_watch(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    inotify_of(task, a[0])?.rm_watch(a[1] as i32).map(|()| 0)
}

/// `RESOLVE_*` bits of `openat2`.
mod resolve {
    pub const NO_XDEV: u64 = 0x01;
    pub const NO_MAGICLINKS: u64 = 0x02;
    pub const NO_SYMLINKS: u64 = 0x04;
    pub const BENEATH: u64 = 0x08;
    pub const IN_ROOT: u64 = 0x10;
    pub const CACHED: u64 = 0x20;
    pub const ALL: u64 = 0x3f;
}

/// `openat2(dirfd, path, how, size)`: `openat` with strict flag checks and
/// `RESOLVE_*` limits on the path walk.
pub fn sys_openat2(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    // struct open_how { u64 flags, mode, resolve }, extensible: a larger
    // struct is accepted when what we do not know is zero.
    const OPEN_HOW_SIZE: u64 = 24;
    let size = a[3];
    if size < OPEN_HOW_SIZE {
        return Err(Errno::EINVAL);
    }
    if size > 4096 {
        return Err(Errno::E2BIG);
    }
    let mut raw = vec![0u8; size as usize];
    task.mm().copy_in(a[2], &mut raw)?;
    if raw[OPEN_HOW_SIZE as usize..].iter().any(|&b| b != 0) {
        return Err(Errno::E2BIG);
    }
    let word = |i: usize| u64::from_ne_bytes(raw[i * 8..i * 8 + 8].try_into().unwrap_or_default());
    let (flags, mode, how) = (word(0), word(1), word(2));
    let valid = (abi::O_ACCMODE
        | (OpenFlags::CREAT
            | OpenFlags::EXCL
            | OpenFlags::NOCTTY
            | OpenFlags::TRUNC
            | OpenFlags::APPEND
            | OpenFlags::NONBLOCK
            | OpenFlags::DSYNC
            | OpenFlags::ASYNC
            | OpenFlags::DIRECT
            | OpenFlags::LARGEFILE
            | OpenFlags::DIRECTORY
            | OpenFlags::NOFOLLOW
            | OpenFlags::NOATIME
            | OpenFlags::CLOEXEC
            | OpenFlags::SYNC
            | OpenFlags::PATH
            | OpenFlags::TMPFILE)
            .bits()) as u64;
    if flags & !valid != 0 || how & !resolve::ALL != 0 {
        return Err(Errno::EINVAL);
    }
    let f = OpenFlags::from_bits_retain(flags as u32);
    let makes = f.contains(OpenFlags::CREAT) || f.contains(OpenFlags::TMPFILE);
    if (makes && mode & !0o7777 != 0) || (!makes && mode != 0) {
        return Err(Errno::EINVAL);
    }
    let path_ok = OpenFlags::PATH | OpenFlags::DIRECTORY | OpenFlags::NOFOLLOW | OpenFlags::CLOEXEC;
    if f.contains(OpenFlags::PATH) && !path_ok.contains(f) {
        return Err(Errno::EINVAL);
    }
    if how & resolve::BENEATH != 0 && how & resolve::IN_ROOT != 0 {
        return Err(Errno::EINVAL);
    }
    if how & resolve::CACHED != 0
        && (f.contains(OpenFlags::CREAT)
            || f.contains(OpenFlags::TRUNC)
            || f.contains(OpenFlags::TMPFILE))
    {
        return Err(Errno::EAGAIN);
    }
    let how = crate::vfs::Resolve {
        no_xdev: how & resolve::NO_XDEV != 0,
        no_magiclinks: how & resolve::NO_MAGICLINKS != 0,
        no_symlinks: how & resolve::NO_SYMLINKS != 0,
        beneath: how & resolve::BENEATH != 0,
        in_root: how & resolve::IN_ROOT != 0,
        // (the task's walk adds its credentials)
        search: None,
    };
    open_with(task, a[0], a[1], flags as u32, mode as u32, how)
}

pub fn sys_creat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let flags = OpenFlags::CREAT | OpenFlags::WRONLY | OpenFlags::TRUNC;
    open_with(
        task,
        AT_FDCWD as u64,
        a[0],
        flags.bits(),
        a[1] as u32,
        Default::default(),
    )
}

pub(super) fn open_with(
    task: &mut Task,
    dirfd: u64,
    path_addr: u64,
    raw_flags: u32,
    mode: u32,
    how: crate::vfs::Resolve,
) -> Result<u64, Errno> {
    let mut created = false;
    let fd = open_inner(task, dirfd, path_addr, raw_flags, mode, how, &mut created)?;
    if inotify::hub().active() && raw_flags & OpenFlags::PATH.bits() == 0 {
        let loc = task
            .fds()
            .file(fd as i64)
            .ok()
            .and_then(|f| f.location.clone());
        if let Some(loc) = loc {
            if created {
                if let Some((parent, name)) = loc.parent() {
                    if let Some(ids) = EntryIds::of(parent, Some(loc.node())) {
                        ids.entry(inotify::mask::CREATE, 0, name);
                    }
                }
            }
            inotify::on_object(&loc, inotify::mask::OPEN);
        }
    }
    Ok(fd)
}

fn open_inner(
    task: &mut Task,
    dirfd: u64,
    path_addr: u64,
    raw_flags: u32,
    mode: u32,
    how: crate::vfs::Resolve,
    made: &mut bool,
) -> Result<u64, Errno> {
    let path = path_arg(task, path_addr)?;
    open_path(task, dirfd, path, raw_flags, mode, how, made)
}

/// [`open_inner`] of a path the Sentry holds.
pub(crate) fn open_path(
    task: &mut Task,
    dirfd: u64,
    path: Vec<u8>,
    raw_flags: u32,
    mode: u32,
    how: crate::vfs::Resolve,
    made: &mut bool,
) -> Result<u64, Errno> {
    let start = if how.beneath || how.in_root {
        // The scope is `dirfd` even for an absolute path.
        dir_arg(task, dirfd, b".")?
    } else {
        dir_arg(task, dirfd, &path)?
    };
    let flags = OpenFlags::from_bits_retain(raw_flags);
    let path_only = flags.contains(OpenFlags::PATH);
    let tmpfile = flags.contains(OpenFlags::TMPFILE);
    let acc = raw_flags & abi::O_ACCMODE;
    let wants_write = !path_only && (acc != 0 || flags.contains(OpenFlags::TRUNC) || tmpfile);
    if acc == abi::O_ACCMODE && !path_only {
        return Err(Errno::EINVAL);
    }
    if tmpfile && acc == 0 {
        return Err(Errno::EINVAL);
    }
    let create = flags.contains(OpenFlags::CREAT) && !path_only && !tmpfile;
    let excl = create && flags.contains(OpenFlags::EXCL);
    let follow = !flags.contains(OpenFlags::NOFOLLOW) && !excl;
    let mut created = false;
    let loc = match task.walk_with(&start, &path, follow, how)? {
        Lookup::Found(l) => l,
        Lookup::Missing { parent } => {
            if create && !path.ends_with(b"/") {
                let name = last_component(&path).ok_or(Errno::ENOENT)?;
                read_only_path(task, &parent)?;
                landlocked(task, &parent, access::MAKE_REG)?;
                if let Some(v) = volume(parent.node()) {
                    let h = v?;
                    may_write_dir(task, &parent)?;
                    let mode = mode & 0o7777 & !task.fs_ctx().umask;
                    let (node, fd) =
                        h.client()
                            .create(h.handle(), &name, host_open_flags(raw_flags), mode)?;
                    let child = Node::Host {
                        h: Arc::new(adopt(task, h, node)),
                        mode: abi::S_IFREG | mode,
                    };
                    let loc = child_of(&parent, name, child);
                    let kind = FileKind::Host(Arc::new(HostFile::new(fd)));
                    *made = true;
                    // Made, then opened: Linux checks the open after.
                    landlocked(task, &loc, landlock::open_rights(false, acc, false))?;
                    return install_file(task, kind, loc, acc, flags);
                }
                if let Some(root) = parent.node().inode::<crate::fsimpl::mqueue::MqueueRoot>() {
                    // Linux's mqueue file system makes a queue with the
                    // default attributes.
                    let c = super::mqueue::create_args(task, mode, None);
                    let (q, _) = root.0.open(&name, Some(c), false)?;
                    *made = true;
                    let loc = child_of(&parent, name, crate::fsimpl::mqueue::node(q.clone()));
                    return install_file(task, mqueue_file(q), loc, acc, flags);
                }
                let dir = match parent.node() {
                    Node::Ovl(d) => {
                        let u = upper_mem(task.kernel.fs.ensure_upper(d)?)?;
                        u.clear_whiteout(&name);
                        u
                    }
                    n => mem_arc(n).ok_or_else(|| ro_error(n))?,
                };
                may_write_dir(task, &parent)?;
                let mode = abi::S_IFREG | (mode & 0o7777 & !task.fs_ctx().umask);
                let node =
                    dir.create(&name, mode, task.ids, || MemKind::File(Default::default()))?;
                created = true;
                *made = true;
                child_of(&parent, name, Node::Inode(node))
            } else {
                return Err(if path.ends_with(b"/") && create {
                    Errno::EISDIR
                } else {
                    Errno::ENOENT
                });
            }
        }
    };
    let node = loc.node().clone();
    if excl && !created {
        return Err(Errno::EEXIST);
    }
    let is_symlink = matches!(&node, Node::Host { mode, .. } if mode & abi::S_IFMT == abi::S_IFLNK);
    if flags.contains(OpenFlags::DIRECTORY) && !node.is_dir() && !tmpfile {
        return Err(Errno::ENOTDIR);
    }
    if is_symlink && !path_only {
        return Err(Errno::ELOOP);
    }
    if node.is_dir() && (create || (wants_write && !tmpfile)) {
        return Err(Errno::EISDIR);
    }
    if tmpfile && !node.is_dir() {
        return Err(Errno::ENOTDIR);
    }
    may_open(task, &loc, acc, flags, created)?;
    if wants_write && !special_file(&node) && task.kernel.fs.read_only_at(&loc) {
        // Permission first (may_open, which leaves the Sentry's own files
        // alone), then the mount (do_dentry_open).
        if !created && !tmpfile {
            let want = match acc {
                0 | 1 => 2,
                _ => 6,
            };
            check_access(task, &loc, want)?;
        }
        return Err(Errno::EROFS);
    }
    if !path_only {
        // security_file_open(): an O_TMPFILE file is a new file in `loc`.
        let trunc = flags.contains(OpenFlags::TRUNC) && !created;
        landlocked(
            task,
            &loc,
            landlock::open_rights(node.is_dir() && !tmpfile, acc, trunc),
        )?;
    }
    let kind = if path_only {
        FileKind::Path
    } else {
        match &node {
            Node::Host { h, .. } if h.volume().is_some() => {
                if let Some(Err(e)) = volume(&node) {
                    if wants_write {
                        return Err(e);
                    }
                }
                let kind = node.stat()?.mode & abi::S_IFMT;
                if kind == abi::S_IFDIR || !wants_write {
                    FileKind::Host(task.kernel.fs.open_host(&loc)?)
                } else {
                    let fd = h.client().open(h.handle(), host_open_flags(raw_flags))?;
                    let f = Arc::new(HostFile::new(fd));
                    if flags.contains(OpenFlags::TRUNC) {
                        // The host emptied the file: so do its mappings.
                        if let Some(cache) = task.kernel.fs.page_caches.lookup(&f) {
                            cache.reload()?;
                        }
                    }
                    FileKind::Host(f)
                }
            }
            // Writing a host file below the overlay copies it up.
            Node::Host { .. } if wants_write && matches!(loc.parent(), Some((Node::Ovl(_), _))) => {
                let m = upper_mem(task.kernel.fs.copy_up(&loc)?)?;
                if flags.contains(OpenFlags::TRUNC) {
                    m.truncate(0)?;
                }
                let mut l = loc.clone();
                l.pop();
                let l = child_of(
                    &l,
                    last_component(&path).unwrap_or_default(),
                    Node::Inode(m.clone()),
                );
                return install_file(task, FileKind::Impl(m), l, acc, flags);
            }
            Node::Host { .. } => {
                if wants_write {
                    return Err(Errno::EROFS);
                }
                FileKind::Host(task.kernel.fs.open_host(&loc)?)
            }
            Node::Ovl(d) if tmpfile => {
                let upper = upper_mem(task.kernel.fs.ensure_upper(d)?)?;
                let mode = abi::S_IFREG | (mode & 0o7777 & !task.fs_ctx().umask);
                let m = crate::fsimpl::tmpfs::MemInode::unlinked_file(upper.fs(), mode, task.ids)?;
                m.set_linkable(!flags.contains(OpenFlags::EXCL));
                FileKind::Impl(m)
            }
            Node::Ovl(_) => FileKind::SynthDir,
            Node::Dev(crate::vfs::Device::Ptmx) => FileKind::Impl(Arc::new(
                crate::fsimpl::builtins(&task.kernel.fs).devpts.allocate()?,
            )),
            Node::Dev(crate::vfs::Device::Nvidia(d)) => {
                let gpu = crate::fsimpl::builtins(&task.kernel.fs)
                    .gpu
                    .get()
                    .ok_or(Errno::ENOENT)?;
                FileKind::Impl(gpu.open(*d)?)
            }
            Node::Dev(crate::vfs::Device::Tty) => {
                // The caller's controlling terminal (ENXIO without one).
                let ctty = task.proc_.state().ctty.clone().ok_or(Errno::ENXIO)?;
                let ctty = crate::fsimpl::devpts::Pty::of(&ctty).ok_or(Errno::ENXIO)?;
                FileKind::Impl(Arc::new(ctty.open_slave()?))
            }
            Node::Pts(n) => {
                let pty = crate::fsimpl::builtins(&task.kernel.fs)
                    .devpts
                    .get(*n)
                    .ok_or(Errno::ENOENT)?;
                let end = pty.open_slave()?;
                if !flags.contains(OpenFlags::NOCTTY) && acc != abi::OpenFlags::WRONLY.bits() {
                    acquire_ctty(task, &pty);
                }
                FileKind::Impl(Arc::new(end))
            }
            Node::Dev(d) => FileKind::Dev(*d),
            n if let Some(p) = crate::fsimpl::proc::ProcInode::of(n) => match p {
                crate::fsimpl::proc::ProcNode::FdLink(_, file, _) => {
                    // Reopening /proc/self/fd/N of an object with no path:
                    // the same object, in the requested direction.
                    if let Some(end) = file.downcast::<crate::fsimpl::pipe::PipeEnd>() {
                        FileKind::Impl(Arc::new(
                            end.pipe.open_end(acc != abi::OpenFlags::WRONLY.bits()),
                        ))
                    } else if let Some(m) = reopenable_mem(file) {
                        // A tmpfs file (a memfd, an O_TMPFILE file): a new
                        // description of the same inode, in the requested
                        // mode, as Linux reopens it.
                        if flags.contains(OpenFlags::TRUNC) && wants_write {
                            m.truncate(0)?;
                        }
                        let status = acc
                            | (flags & (OpenFlags::APPEND | OpenFlags::NONBLOCK)).bits()
                            | OpenFlags::LARGEFILE.bits();
                        let reopened = FileDescription::new(
                            FileKind::Impl(m.clone()),
                            file.location.clone(),
                            status,
                        );
                        let cloexec = flags.contains(OpenFlags::CLOEXEC);
                        return task.install_fd(reopened, cloexec);
                    } else {
                        let cloexec = flags.contains(OpenFlags::CLOEXEC);
                        return task.install_fd(file.clone(), cloexec);
                    }
                }
                // Writes are taken by FileDescription::write.
                crate::fsimpl::proc::ProcNode::OomScoreAdj(_, _, data) => {
                    FileKind::Impl(Arc::new(crate::fsimpl::proc::ProcFile::new(data.clone())))
                }
                // Writes are taken by FileDescription::write; only the
                // namespace's root may open most for writing.
                crate::fsimpl::proc::ProcNode::Sysctl(_, path, data) => {
                    if wants_write
                        && !crate::fsimpl::sysctl::may_open_for_write(path, task.creds.uid[1])
                    {
                        return Err(Errno::EACCES);
                    }
                    FileKind::Impl(Arc::new(crate::fsimpl::proc::ProcFile::new(data.clone())))
                }
                // Writes are taken by FileDescription::write.
                crate::fsimpl::proc::ProcNode::Checkpoint(data) => {
                    FileKind::Impl(Arc::new(crate::fsimpl::proc::ProcFile::new(data.clone())))
                }
                crate::fsimpl::proc::ProcNode::Mem(_, p) => {
                    let leader = p.state().threads.first().cloned().ok_or(Errno::ESRCH)?;
                    crate::syscalls::ptrace::may_access(task, &leader)?;
                    FileKind::Impl(Arc::new(crate::fsimpl::proc::ProcMem::new(p)?))
                }
                crate::fsimpl::proc::ProcNode::Pagemap(_, p) => {
                    let leader = p.state().threads.first().cloned().ok_or(Errno::ESRCH)?;
                    // (mm_access() answers EACCES where ptrace says EPERM)
                    crate::syscalls::ptrace::may_access(task, &leader).map_err(|e| {
                        if e == Errno::EPERM {
                            Errno::EACCES
                        } else {
                            e
                        }
                    })?;
                    FileKind::Impl(Arc::new(crate::fsimpl::proc::ProcPagemap::new(p)?))
                }
                _ if wants_write => return Err(Errno::EACCES),
                crate::fsimpl::proc::ProcNode::File(_, data) => {
                    FileKind::Impl(Arc::new(crate::fsimpl::proc::ProcFile::new(data.clone())))
                }
                _ => FileKind::SynthDir,
            },
            n if let Some(m) = mem_arc(n) => match &m.kind {
                MemKind::Fifo(pipe) => {
                    // O_RDWR is served as the read end (a partial fifo(7)).
                    let reader = acc != abi::OpenFlags::WRONLY.bits();
                    let (before, open) = pipe.peer(reader);
                    let nonblock = flags.contains(OpenFlags::NONBLOCK);
                    // fifo(7): no reader for a non-blocking writer.
                    if !reader && nonblock && open == 0 {
                        return Err(Errno::ENXIO);
                    }
                    let end = pipe.open_end(reader);
                    if acc != abi::OpenFlags::RDWR.bits() && !nonblock {
                        pipe.wait_for_peer(reader, before, &*task.thread)?;
                    }
                    FileKind::Impl(Arc::new(end))
                }
                _ => {
                    if flags.contains(OpenFlags::TRUNC) && wants_write && !created && !m.is_dir() {
                        m.truncate(0)?;
                    }
                    if tmpfile {
                        let mode = abi::S_IFREG | (mode & 0o7777 & !task.fs_ctx().umask);
                        let f =
                            crate::fsimpl::tmpfs::MemInode::unlinked_file(m.fs(), mode, task.ids)?;
                        f.set_linkable(!flags.contains(OpenFlags::EXCL));
                        FileKind::Impl(f)
                    } else {
                        FileKind::Impl(m.clone())
                    }
                }
            },
            Node::Inode(i) if !i.is_dir() => {
                let Some(crate::fsimpl::mqueue::MqueueNode(q)) = loc.node().inode() else {
                    return Err(Errno::ENXIO);
                };
                let want = match acc {
                    0 => 4,
                    1 => 2,
                    _ => 6,
                };
                if !q.permits(&task.creds, want) {
                    return Err(Errno::EACCES);
                }
                mqueue_file(q.clone())
            }
            Node::DevDir | Node::Masked { .. } | Node::PtsDir | Node::Inode(_) => {
                if wants_write {
                    return Err(Errno::EROFS);
                }
                FileKind::SynthDir
            }
        }
    };
    install_file(task, kind, loc, acc, flags)
}

/// The tmpfs file (not directory) an open description is of.
fn reopenable_mem(file: &FileDescription) -> Option<Arc<MemInode>> {
    file.downcast_arc::<MemInode>().filter(|m| !m.is_dir())
}

/// A session leader without a controlling terminal that opens a terminal
/// belonging to no session acquires it (tty_open_proc_set_tty()).
fn acquire_ctty(task: &Task, pty: &Arc<crate::fsimpl::devpts::Pty>) {
    let (leader, has, sid, pgid) = {
        let p = task.proc_.state();
        (p.sid == task.pid(), p.ctty.is_some(), p.sid, p.pgid)
    };
    if leader && !has && pty.set_controlling(sid, pgid) {
        task.proc_.state().ctty = Some(pty.clone());
    }
}

/// Opens the slave of `pty` as a new descriptor (`TIOCGPTPEER`).
fn open_peer(
    task: &mut Task,
    pty: &Arc<crate::fsimpl::devpts::Pty>,
    raw_flags: u32,
) -> Result<u64, Errno> {
    // Linux passes the flags to the open as they are: creation flags mean
    // nothing for a device and are ignored.
    let keep =
        abi::O_ACCMODE | (OpenFlags::NOCTTY | OpenFlags::NONBLOCK | OpenFlags::CLOEXEC).bits();
    let raw_flags = raw_flags & keep;
    let fs = &task.kernel.fs;
    let loc = fs.resolve(
        &fs.root(),
        format!("/dev/pts/{}", pty.index).as_bytes(),
        false,
    )?;
    let end = pty.open_slave()?;
    let flags = OpenFlags::from_bits_retain(raw_flags);
    if !flags.contains(OpenFlags::NOCTTY)
        && raw_flags & abi::O_ACCMODE != abi::OpenFlags::WRONLY.bits()
    {
        acquire_ctty(task, pty);
    }
    install_file(
        task,
        FileKind::Impl(Arc::new(end)),
        loc,
        raw_flags & abi::O_ACCMODE,
        flags,
    )
}

/// Terminal ioctls on a pty end.
fn pty_ioctl(
    task: &mut Task,
    file: &FileDescription,
    end: &crate::fsimpl::devpts::PtyEnd,
    cmd: u32,
    arg: u64,
) -> Result<u64, Errno> {
    use crate::fsimpl::devpts::{IoctlIn, IoctlOut};
    let input = match crate::fsimpl::devpts::ioctl_input(cmd) {
        Some(read) => read(&task.mm(), arg)?,
        None => IoctlIn::None,
    };
    let ctx = crate::fsimpl::devpts::IoctlCtx {
        kernel: &task.kernel,
        thread: &task.thread,
        readable: file.can_read(),
    };
    let out = crate::fsimpl::devpts::ioctl(&ctx, end, cmd, arg, input)?;
    match out {
        IoctlOut::Ret(v) => Ok(v),
        IoctlOut::Int(v) => task.mm().write_obj(arg, &v).map(|()| 0),
        IoctlOut::Termios(t) => task.mm().write_obj(arg, &t).map(|()| 0),
        IoctlOut::Termios2(t) => task.mm().write_obj(arg, &t).map(|()| 0),
        IoctlOut::Termio(t) => task.mm().write_obj(arg, &t).map(|()| 0),
        IoctlOut::Winsize(w) => task.mm().write_obj(arg, &w).map(|()| 0),
        IoctlOut::OpenPeer(pty, flags) => open_peer(task, &pty, flags),
    }
}

/// Installs a new description for an `open` that succeeded.
fn install_file(
    task: &mut Task,
    kind: FileKind,
    loc: Location,
    acc: u32,
    flags: OpenFlags,
) -> Result<u64, Errno> {
    let path_only = flags.contains(OpenFlags::PATH);
    let keep = OpenFlags::PATH
        | OpenFlags::APPEND
        | OpenFlags::NONBLOCK
        | OpenFlags::DIRECT
        | OpenFlags::NOATIME
        | OpenFlags::DSYNC
        | OpenFlags::SYNC
        | OpenFlags::ASYNC
        | OpenFlags::DIRECTORY
        | OpenFlags::NOFOLLOW;
    let status = if path_only {
        (flags & (OpenFlags::PATH | OpenFlags::DIRECTORY | OpenFlags::NOFOLLOW)).bits()
    } else {
        acc | (flags & keep).bits() | OpenFlags::LARGEFILE.bits()
    };
    // What the open's domain denies is kept with the file: truncating it,
    // and ioctls on a device (landlock(7)).
    let denied = match &task.landlock {
        Some(d) if !path_only => {
            let device = loc
                .node()
                .stat()
                .is_ok_and(|st| matches!(st.mode & abi::S_IFMT, abi::S_IFCHR | abi::S_IFBLK));
            let asked = if device {
                access::TRUNCATE | access::IOCTL_DEV
            } else {
                access::TRUNCATE
            };
            d.denied(&loc, asked)
        }
        _ => 0,
    };
    let file = FileDescription::new(kind, Some(loc), status);
    file.set_landlock_denied(denied);
    let cloexec = flags.contains(OpenFlags::CLOEXEC);
    task.install_fd(file, cloexec)
}

/// Landlock's check (landlock(7)) of `want` at `loc` for the caller.
pub(super) fn landlocked(task: &Task, loc: &Location, want: u64) -> Result<(), Errno> {
    match &task.landlock {
        Some(d) => d.check(loc, want),
        None => Ok(()),
    }
}

/// The last component of `path` (trailing slashes ignored).
fn last_component(path: &[u8]) -> Option<Vec<u8>> {
    path.split(|&b| b == b'/')
        .rfind(|c| !c.is_empty())
        .map(<[u8]>::to_vec)
}

/// The location of `name`, a new child of `parent`.
fn child_of(parent: &Location, name: Vec<u8>, node: Node) -> Location {
    let mut l = parent.clone();
    l.push(name, node);
    l
}

/// The permission checks of an open of `loc` that existed (Linux's
/// `may_open`), on the files whose mode and owner are their own (the
/// root's image, volumes, the sandbox's tmpfs and overlay): the access
/// mode asks for reading and writing, `O_TRUNC` for writing, `O_TMPFILE`
/// for adding a name to the directory; `O_NOATIME` needs the owner or
/// `CAP_FOWNER` (`EPERM`).
fn may_open(
    task: &Task,
    loc: &Location,
    acc: u32,
    flags: OpenFlags,
    created: bool,
) -> Result<(), Errno> {
    if created || flags.contains(OpenFlags::PATH) {
        return Ok(());
    }
    if !matches!(loc.node(), Node::Host { .. } | Node::Ovl(_)) && mem_of(loc.node()).is_none() {
        return Ok(());
    }
    if flags.contains(OpenFlags::TMPFILE) {
        return may_write_dir(task, loc);
    }
    let mut want = match acc {
        0 => MAY_READ,
        1 => MAY_WRITE,
        _ => MAY_READ | MAY_WRITE,
    };
    if flags.contains(OpenFlags::TRUNC) {
        want |= MAY_WRITE;
    }
    check_access(task, loc, want)?;
    if flags.contains(OpenFlags::NOATIME) && !task.creds.owns(loc.node().stat()?.uid) {
        return Err(Errno::EPERM);
    }
    Ok(())
}

/// Whether the task may add or remove names in directory `dir`: write
/// and search permission (or `CAP_DAC_OVERRIDE`).
pub(super) fn may_write_dir(task: &Task, dir: &Location) -> Result<(), Errno> {
    let st = dir.node().stat()?;
    task.creds
        .may_access(st.mode, st.uid, st.gid, MAY_WRITE | MAY_EXEC)
}

/// Whether the task may remove or replace `victim`, a name in `dir`
/// (Linux's `may_delete`): [`may_write_dir`], and in a sticky directory
/// only the owner of the file or of the directory, or `CAP_FOWNER`
/// (`EPERM`).
fn may_delete(task: &Task, dir: &Location, victim: Option<&Location>) -> Result<(), Errno> {
    may_write_dir(task, dir)?;
    let Some(victim) = victim else {
        return Ok(());
    };
    let d = dir.node().stat()?;
    if d.mode & abi::S_ISVTX == 0 {
        return Ok(());
    }
    let owner = victim.node().stat()?.uid;
    let fsuid = task.creds.uid[3];
    if fsuid == owner || fsuid == d.uid || task.capable(cap::FOWNER) {
        return Ok(());
    }
    Err(Errno::EPERM)
}

/// The error a write to `parent`'s file system gets.
fn ro_error(_parent: &Node) -> Errno {
    Errno::EROFS
}

/// `EROFS` where an OCI read-only path covers `loc` (a read-only bind
/// mount in runc: changing what is on it fails, whatever the file system).
fn read_only_path(task: &Task, loc: &Location) -> Result<(), Errno> {
    if task.kernel.fs.read_only_at(loc) {
        return Err(Errno::EROFS);
    }
    Ok(())
}

/// Whether `node` is a device, FIFO or socket: opening one for writing,
/// or asking `access(W_OK)` of it, is not a write to its mount.
fn special_file(node: &Node) -> bool {
    node.stat().is_ok_and(|st| {
        matches!(
            st.mode & abi::S_IFMT,
            abi::S_IFCHR | abi::S_IFBLK | abi::S_IFIFO | abi::S_IFSOCK
        )
    })
}

/// The gofer handle of `node` when it is on a volume: `Some(Ok)` on a
/// writable one, `Some(Err(EROFS))` on a read-only one, `None` elsewhere.
fn volume(node: &Node) -> Option<Result<&Arc<GoferRef>, Errno>> {
    match node {
        Node::Host { h, .. } => match h.volume()? {
            VolumeKind::ReadWrite => Some(Ok(h)),
            VolumeKind::ReadOnly => Some(Err(Errno::EROFS)),
        },
        _ => None,
    }
}

/// The page cache of the volume file `h`, if it is mapped shared (asks the
/// gofer for its identity only while some file is).
fn cache_of(task: &Task, h: &GoferRef) -> Option<Arc<crate::mm::pagecache::FileCache>> {
    let caches = &task.kernel.fs.page_caches;
    if !caches.any() {
        return None;
    }
    let st = h.stat().ok()?;
    caches.lookup_key((st.dev, st.ino))
}

/// Takes over the gofer's handle on what the guest just made on a volume
/// (dropping the result closes it), and gives it to the guest's user: the
/// gofer makes it as its own. Best effort: a host that refuses keeps the
/// gofer's owner.
pub(super) fn adopt(task: &Task, dir: &GoferRef, node: gofer::proto::Node) -> GoferRef {
    let child = dir.child(node);
    let (uid, gid) = task.ids;
    if (uid, gid) != (0, 0) {
        let attr = gofer::client::SetAttr {
            uid: Some(uid),
            gid: Some(gid),
            ..Default::default()
        };
        let _ = child.client().set_stat(child.handle(), &attr);
    }
    child
}

/// `O_*` flags that reach a volume file's host descriptor.
fn host_open_flags(raw: u32) -> i32 {
    let pass = abi::O_ACCMODE
        | (OpenFlags::APPEND | OpenFlags::TRUNC | OpenFlags::DSYNC | OpenFlags::SYNC).bits();
    (raw & pass) as i32 | libc::O_NONBLOCK | libc::O_NOCTTY
}

/// A mount point (the root of a volume or tmpfs mounted there) cannot be
/// removed or renamed.
fn busy_mount_point(task: &Task, e: &Entry) -> Result<(), Errno> {
    if task.kernel.fs.is_mount_point(&e.parent, &e.name) {
        return Err(Errno::EBUSY);
    }
    Ok(())
}

pub fn sys_close_range(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    const CLOSE_RANGE_UNSHARE: u64 = 2;
    const CLOSE_RANGE_CLOEXEC: u64 = 4;
    let (first, last, flags) = (a[0] as u32, a[1] as u32, a[2]);
    if flags & !(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC) != 0 || first > last {
        return Err(Errno::EINVAL);
    }
    let cloexec = flags & CLOSE_RANGE_CLOEXEC != 0;
    let closing: Vec<Arc<FileDescription>> = if cloexec {
        Vec::new()
    } else {
        let fds = task.fds();
        fds.open_fds()
            .into_iter()
            .filter(|&fd| fd >= first as usize && fd <= last as usize)
            .filter_map(|fd| fds.file(fd as i64).ok())
            .collect()
    };
    task.fds()
        .close_range(first as usize, last as usize, cloexec);
    for f in &closing {
        close_releases_locks(task, f);
    }
    Ok(0)
}

pub fn sys_close(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let entry = task.fds().remove(a[0] as i32 as i64)?;
    close_releases_locks(task, &entry.file);
    Ok(0)
}

fn stat_path(task: &Task, dirfd: u64, path_addr: u64, flags: u32) -> Result<Stat, Errno> {
    let path = path_arg(task, path_addr)?;
    if path.is_empty() {
        if flags & AT_EMPTY_PATH == 0 {
            return Err(Errno::ENOENT);
        }
        if dirfd as i32 == AT_FDCWD {
            return task.cwd().node().stat();
        }
        return task.fds().file(dirfd as i32 as i64)?.stat();
    }
    let start = dir_arg(task, dirfd, &path)?;
    let follow = flags & AT_SYMLINK_NOFOLLOW == 0;
    let loc = task.resolve(&start, &path, follow)?;
    // A followed /proc/[pid]/fd/N of an object with no path (a pipe, a
    // socket) is the object itself.
    if let (true, Some(file)) = (follow, loc.node().open_file()) {
        return file.stat();
    }
    loc.node().stat()
}

pub fn sys_stat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let st = stat_path(task, AT_FDCWD as u64, a[0], 0)?;
    task.mm().write_obj(a[1], &st).map(|()| 0)
}

pub fn sys_lstat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let st = stat_path(task, AT_FDCWD as u64, a[0], AT_SYMLINK_NOFOLLOW)?;
    task.mm().write_obj(a[1], &st).map(|()| 0)
}

pub fn sys_fstat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let st = task.fds().file(a[0] as i32 as i64)?.stat()?;
    task.mm().write_obj(a[1], &st).map(|()| 0)
}

pub fn sys_newfstatat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let flags = a[3] as u32;
    if flags & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH | AT_NO_AUTOMOUNT) != 0 {
        return Err(Errno::EINVAL);
    }
    let st = stat_path(task, a[0], a[1], flags)?;
    task.mm().write_obj(a[2], &st).map(|()| 0)
}

fn dev_split(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major as u32, minor as u32)
}

pub fn sys_statx(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let flags = a[2] as u32;
    let mask = a[3] as u32;
    if flags & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH | AT_NO_AUTOMOUNT | AT_STATX_SYNC_TYPE) != 0
        || flags & AT_STATX_SYNC_TYPE == AT_STATX_SYNC_TYPE
        || mask & 0x8000_0000 != 0
    {
        return Err(Errno::EINVAL);
    }
    let st = if a[1] == 0 && flags & AT_EMPTY_PATH != 0 {
        if a[0] as i32 == AT_FDCWD {
            task.cwd().node().stat()?
        } else {
            task.fds().file(a[0] as i32 as i64)?.stat()?
        }
    } else {
        stat_path(task, a[0], a[1], flags)?
    };
    let ts = |sec: i64, nsec: i64| StatxTimestamp {
        tv_sec: sec,
        tv_nsec: nsec as u32,
        reserved: 0,
    };
    let (rdev_major, rdev_minor) = dev_split(st.rdev);
    let (dev_major, dev_minor) = dev_split(st.dev);
    let mut sx = Statx::new_zeroed();
    sx.mask = 0x7ff; // STATX_BASIC_STATS
    sx.blksize = st.blksize as u32;
    sx.nlink = st.nlink as u32;
    sx.uid = st.uid;
    sx.gid = st.gid;
    sx.mode = st.mode as u16;
    sx.ino = st.ino;
    sx.size = st.size as u64;
    sx.blocks = st.blocks as u64;
    sx.atime = ts(st.atime, st.atime_nsec);
    sx.ctime = ts(st.ctime, st.ctime_nsec);
    sx.mtime = ts(st.mtime, st.mtime_nsec);
    sx.rdev_major = rdev_major;
    sx.rdev_minor = rdev_minor;
    sx.dev_major = dev_major;
    sx.dev_minor = dev_minor;
    task.mm().write_obj(a[4], &sx).map(|()| 0)
}

pub fn sys_lseek(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let file = task.fds().file(a[0] as i32 as i64)?;
    let whence = a[2] as u32;
    match whence {
        0..=2 => file.seek(a[1] as i64, whence),
        3 | 4 => {
            let st = file.stat()?;
            if !(matches!(file.kind, FileKind::Host(_)) || file.downcast::<MemInode>().is_some())
                || file.is_dir()
            {
                return Err(Errno::EINVAL);
            }
            let off = a[1] as i64;
            if off < 0 {
                return Err(Errno::ENXIO);
            }
            if off >= st.size {
                return Err(Errno::ENXIO);
            }
            // The whole file is data, as on a file system without holes.
            let target = if whence == 3 { off } else { st.size };
            file.seek(target, 0)
        }
        _ => Err(Errno::EINVAL),
    }
}

pub fn sys_ioctl(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    const TCGETS: u64 = 0x5401;
    const TIOCGWINSZ: u64 = 0x5413;
    const FIONREAD: u64 = 0x541b;
    const FIONBIO: u64 = 0x5421;
    const FIONCLEX: u64 = 0x5450;
    const FIOCLEX: u64 = 0x5451;
    const FIOASYNC: u64 = abi::tty::FIOASYNC as u64;
    let fd = a[0] as i32 as i64;
    let file = task.fds().file(fd)?;
    if matches!(file.kind, FileKind::Path) {
        return Err(Errno::EBADF);
    }
    if file.landlock_denies(access::IOCTL_DEV) && !landlock::ioctl_always_allowed(a[1] as u32) {
        return Err(Errno::EACCES);
    }
    match a[1] as u32 as u64 {
        FIOCLEX | FIONCLEX => {
            task.fds().get_mut(fd)?.cloexec = a[1] as u32 as u64 == FIOCLEX;
            Ok(0)
        }
        FIONBIO => {
            let on: i32 = task.mm().read_obj(a[2])?;
            let mut f = file.flags.locked();
            if on != 0 {
                *f |= OpenFlags::NONBLOCK.bits();
            } else {
                *f &= !OpenFlags::NONBLOCK.bits();
            }
            Ok(0)
        }
        FIOASYNC => {
            let on: i32 = task.mm().read_obj(a[2])?;
            set_async(task, fd as i32, &file, on != 0, true).map(|()| 0)
        }
        cmd if file
            .downcast::<crate::fsimpl::seccomp_notify::SeccompListener>()
            .is_some() =>
        {
            let n = file
                .downcast::<crate::fsimpl::seccomp_notify::SeccompListener>()
                .map(|l| l.0.clone())
                .ok_or(Errno::ENOTTY)?;
            super::seccomp::listener_ioctl(task, &n, cmd as u32, a[2])
        }
        cmd if file.downcast::<crate::fsimpl::nvidia::NvFile>().is_some() => file
            .downcast::<crate::fsimpl::nvidia::NvFile>()
            .ok_or(Errno::ENOTTY)?
            .ioctl(task, cmd as u32, a[2]),
        cmd if file.downcast::<crate::fsimpl::devpts::PtyEnd>().is_some() => {
            let end = file
                .downcast::<crate::fsimpl::devpts::PtyEnd>()
                .ok_or(Errno::ENOTTY)?;
            pty_ioctl(task, &file, end, cmd as u32, a[2])
        }
        // Terminal queries are passed to the caller's own terminal, read-only.
        TCGETS => {
            let host = file.stdio().ok_or(Errno::ENOTTY)?;
            let t = host::tcgets(host)?;
            task.mm().write_obj(a[2], &t).map(|()| 0)
        }
        TIOCGWINSZ => {
            let host = file.stdio().ok_or(Errno::ENOTTY)?;
            let w = host::get_winsize(host)?;
            task.mm().write_obj(a[2], &w).map(|()| 0)
        }
        FIONREAD => {
            let n: i32 = match (&file.kind, file.stdio()) {
                (_, Some(h)) => host::fionread(h)?,
                // A tmpfs file: what is left to read from its position, as
                // for any regular file (file_ioctl()).
                (FileKind::Impl(_), _)
                    if let Some(m) = file.downcast::<MemInode>().filter(|m| m.is_file()) =>
                {
                    let pos = *file.pos.locked();
                    m.size().saturating_sub(pos).min(i32::MAX as u64) as i32
                }
                (FileKind::Impl(i), _) => i.bytes_readable().unwrap_or(Err(Errno::ENOTTY))?,
                (FileKind::Host(_), _) if !file.is_dir() => {
                    let size = file.stat()?.size as u64;
                    let pos = *file.pos.locked();
                    size.saturating_sub(pos).min(i32::MAX as u64) as i32
                }
                _ => return Err(Errno::ENOTTY),
            };
            task.mm().write_obj(a[2], &n).map(|()| 0)
        }
        cmd => {
            super::netlink::interface_ioctl(task, &file, cmd, a[2]).unwrap_or(Err(Errno::ENOTTY))
        }
    }
}

/// Whether the task may access `loc` as `mode` (`R_OK | W_OK | X_OK`) asks:
/// `EROFS` for a write to a read-only file system, then the permission
/// bits and capabilities.
pub(super) fn check_access(task: &Task, loc: &Location, mode: u32) -> Result<u64, Errno> {
    check_access_as(task, &task.creds, loc, mode)
}

/// [`check_access`] with the credentials `creds`.
fn check_access_as(task: &Task, creds: &Creds, loc: &Location, mode: u32) -> Result<u64, Errno> {
    if mode & !7 != 0 {
        return Err(Errno::EINVAL);
    }
    let st = loc.node().stat()?;
    let writable_fs = match loc.node() {
        // (/proc and /sys: a read-only file system to access(2)'s W_OK)
        Node::Inode(i) if i.mount_key() == crate::vfs::PROC_MOUNT_KEY => false,
        Node::Dev(_) | Node::Pts(_) | Node::Inode(_) => true,
        Node::Host { h, .. } if h.volume().is_some() => h.volume() == Some(VolumeKind::ReadWrite),
        Node::Host { .. } | Node::Ovl(_) => task.kernel.fs.overlay,
        _ => false,
    };
    if mode & 2 != 0 && !writable_fs {
        return Err(Errno::EROFS);
    }
    creds.may_access(st.mode, st.uid, st.gid, mode)?;
    Ok(0)
}

fn faccess(task: &Task, dirfd: u64, path_addr: u64, mode: u32, flags: u32) -> Result<u64, Errno> {
    if flags & !(abi::AT_EACCESS | AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    if mode & !7 != 0 {
        return Err(Errno::EINVAL);
    }
    let path = path_arg(task, path_addr)?;
    let loc = if path.is_empty() {
        if flags & AT_EMPTY_PATH == 0 {
            return Err(Errno::ENOENT);
        }
        dir_arg(task, dirfd, &path)?
    } else {
        let start = dir_arg(task, dirfd, &path)?;
        task.resolve(&start, &path, flags & AT_SYMLINK_NOFOLLOW == 0)?
    };
    // A regular file on a noexec mount is not executable, whoever asks
    // (do_faccessat(), before the permission check).
    let fs = &task.kernel.fs;
    if mode & 1 != 0
        && fs.noexec(&loc)
        && loc
            .node()
            .stat()
            .is_ok_and(|st| st.mode & abi::S_IFMT == abi::S_IFREG)
    {
        return Err(Errno::EACCES);
    }
    if flags & abi::AT_EACCESS != 0 {
        check_access(task, &loc, mode)?;
    } else {
        // access(2) asks as the real user (and a real root with its
        // permitted capabilities).
        check_access_as(task, &task.creds.for_access(), &loc, mode)?;
    }
    // "SuS v2 requires we report a read only fs too" (do_faccessat()).
    if mode & 2 != 0 && !special_file(loc.node()) {
        read_only_path(task, &loc)?;
    }
    Ok(0)
}

pub fn sys_access(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    faccess(task, AT_FDCWD as u64, a[0], a[1] as u32, 0)
}

pub fn sys_faccessat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    faccess(task, a[0], a[1], a[2] as u32, 0)
}

pub fn sys_faccessat2(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    faccess(task, a[0], a[1], a[2] as u32, a[3] as u32)
}

pub fn sys_dup(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let file = task.fds().file(a[0] as i32 as i64)?;
    task.install_fd(file, false)
}

fn dup_to(task: &mut Task, old: i64, new: u64, cloexec: bool) -> Result<u64, Errno> {
    let file = task.fds().file(old)?;
    let new = i32::try_from(new as i64).map_err(|_| Errno::EBADF)?;
    if new < 0 {
        return Err(Errno::EBADF);
    }
    let limit = task.nofile();
    let old = task
        .fds()
        .insert_at(new as usize, FdEntry { file, cloexec }, limit)?;
    if let Some(old) = old {
        close_releases_locks(task, &old.file);
    }
    Ok(new as u64)
}

pub fn sys_dup2(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let old = a[0] as i32 as i64;
    if old == a[1] as i32 as i64 {
        task.fds().get(old)?;
        return Ok(old as u64);
    }
    dup_to(task, old, a[1] as i32 as i64 as u64, false)
}

pub fn sys_dup3(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let flags = a[2] as u32;
    if flags & !OpenFlags::CLOEXEC.bits() != 0 || a[0] as i32 == a[1] as i32 {
        return Err(Errno::EINVAL);
    }
    dup_to(
        task,
        a[0] as i32 as i64,
        a[1] as i32 as i64 as u64,
        flags != 0,
    )
}

pub fn sys_fcntl(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    const F_DUPFD: u32 = 0;
    const F_GETFD: u32 = 1;
    const F_SETFD: u32 = 2;
    const F_GETFL: u32 = 3;
    const F_SETFL: u32 = 4;
    const F_GETLK: u32 = 5;
    const F_SETLK: u32 = 6;
    const F_SETLKW: u32 = 7;
    const F_OFD_GETLK: u32 = 36;
    const F_OFD_SETLK: u32 = 37;
    const F_OFD_SETLKW: u32 = 38;
    const F_DUPFD_CLOEXEC: u32 = 1030;
    const F_SETOWN: u32 = 8;
    const F_GETOWN: u32 = 9;
    const F_SETOWN_EX: u32 = 15;
    const F_GETOWN_EX: u32 = 16;
    const F_SETSIG: u32 = 10;
    const F_GETSIG: u32 = 11;
    const F_SETPIPE_SZ: u32 = 1031;
    const F_GETPIPE_SZ: u32 = 1032;
    const F_ADD_SEALS: u32 = 1033;
    const F_GET_SEALS: u32 = 1034;
    let fd = a[0] as i32 as i64;
    let file = task.fds().file(fd)?;
    let path_only = matches!(file.kind, FileKind::Path);
    match a[1] as u32 {
        cmd @ (F_DUPFD | F_DUPFD_CLOEXEC) => {
            let min = a[2] as i32;
            if min < 0 || min as u64 >= task.nofile() {
                return Err(Errno::EINVAL);
            }
            let limit = task.nofile();
            task.fds()
                .insert_from(
                    min as usize,
                    FdEntry {
                        file,
                        cloexec: cmd == F_DUPFD_CLOEXEC,
                    },
                    limit,
                )
                .map(|fd| fd as u64)
        }
        F_GETFD => Ok(u64::from(task.fds().get(fd)?.cloexec)),
        F_SETFD => {
            task.fds().get_mut(fd)?.cloexec = a[2] & 1 != 0;
            Ok(0)
        }
        F_GETFL => Ok(u64::from(file.flags())),
        F_SETFL => {
            if path_only {
                return Err(Errno::EBADF);
            }
            // O_ASYNC is the fasync operation's to set (set_async()).
            let changeable =
                (OpenFlags::APPEND | OpenFlags::NONBLOCK | OpenFlags::DIRECT | OpenFlags::NOATIME)
                    .bits();
            let want_async = a[2] as u32 & OpenFlags::ASYNC.bits() != 0;
            set_async(task, fd as i32, &file, want_async, false)?;
            let mut f = file.flags.locked();
            *f = (*f & !changeable) | (a[2] as u32 & changeable);
            Ok(0)
        }
        // An O_PATH descriptor has no owner (check_fcntl_cmd()).
        F_SETOWN | F_GETOWN | F_SETOWN_EX | F_GETOWN_EX | F_SETSIG | F_GETSIG if path_only => {
            Err(Errno::EBADF)
        }
        F_SETOWN => {
            let who = a[2] as i32;
            if who == i32::MIN {
                return Err(Errno::EINVAL);
            }
            let (kind, id) = if who < 0 {
                (OwnerKind::Pgrp, -who)
            } else {
                (OwnerKind::Pid, who)
            };
            check_owner(task, kind, id)?;
            file.set_owner(kind, id, false);
            Ok(0)
        }
        F_GETOWN => {
            let o = file.owner();
            Ok(if o.kind == OwnerKind::Pgrp {
                -o.id
            } else {
                o.id
            } as i64 as u64)
        }
        // struct f_owner_ex { int type; pid_t pid; }: glibc's F_GETOWN uses it.
        F_GETOWN_EX => {
            let o = file.owner();
            task.mm()
                .write_obj(a[2], &[o.kind.ex_type(), o.id])
                .map(|()| 0)
        }
        F_SETOWN_EX => {
            let [t, id] = task.mm().read_obj::<[i32; 2]>(a[2])?;
            let kind = OwnerKind::from_ex_type(t).ok_or(Errno::EINVAL)?;
            check_owner(task, kind, id)?;
            file.set_owner(kind, id, false);
            Ok(0)
        }
        F_SETSIG => {
            // The argument is taken as an int (do_fcntl()'s `argi`).
            let sig = a[2] as i32;
            if !(0..=64).contains(&sig) {
                return Err(Errno::EINVAL);
            }
            file.set_sigio_signal(sig);
            Ok(0)
        }
        F_GETSIG => Ok(file.owner().signum as u64),
        F_SETPIPE_SZ | F_GETPIPE_SZ => {
            let Some(end) = file.downcast::<crate::fsimpl::pipe::PipeEnd>() else {
                return Err(Errno::EBADF);
            };
            if a[1] as u32 == F_GETPIPE_SZ {
                Ok(end.pipe.capacity() as u64)
            } else {
                end.pipe.set_capacity(a[2]).map(|n| n as u64)
            }
        }
        F_ADD_SEALS | F_GET_SEALS if path_only => Err(Errno::EBADF),
        F_ADD_SEALS => super::memfd::add_seals(task, &file, a[2]),
        F_GET_SEALS => super::memfd::get_seals(task, &file),
        F_GETLK | F_SETLK | F_SETLKW => record_lock(task, &file, a[1] as u32, a[2], false),
        F_OFD_GETLK | F_OFD_SETLK | F_OFD_SETLKW => {
            record_lock(task, &file, a[1] as u32, a[2], true)
        }
        _ => Err(Errno::EINVAL),
    }
}

/// Whether `id` names a live thread, process or process group for
/// `F_SETOWN` (`ESRCH` otherwise; 0 removes the owner).
fn check_owner(task: &Task, kind: OwnerKind, id: i32) -> Result<(), Errno> {
    if id == 0 {
        return Ok(());
    }
    if id < 0 {
        return Err(Errno::ESRCH);
    }
    let procs = task.kernel.procs();
    let found = match kind {
        OwnerKind::Tid => procs.threads.contains_key(&id),
        // Linux looks the number up as any kind of ID (find_vpid()).
        OwnerKind::Pid => procs.threads.contains_key(&id) || procs.map.contains_key(&id),
        OwnerKind::Pgrp => procs.map.values().any(|p| p.state().pgid == id),
    };
    if found {
        Ok(())
    } else {
        Err(Errno::ESRCH)
    }
}

/// Turns signal-driven I/O on or off for a description (`O_ASYNC` through
/// `F_SETFL`, or `FIOASYNC`), calling the object's `fasync` operation when
/// the flag changes; that operation alone sets or clears `O_ASYNC`. For a
/// file Linux has no such operation for, `FIOASYNC` answers `ENOTTY` and
/// `F_SETFL` leaves the flag as it is.
fn set_async(
    task: &Task,
    fd: i32,
    file: &Arc<FileDescription>,
    on: bool,
    ioctl: bool,
) -> Result<(), Errno> {
    let had = file.flags() & OpenFlags::ASYNC.bits() != 0;
    if had == on {
        return Ok(());
    }
    match file.fasync_lists() {
        Some(lists) => {
            for l in lists.into_iter().flatten() {
                let kernel: std::sync::Weak<dyn crate::vfs::fasync::SigioTarget> =
                    Arc::downgrade(&task.kernel) as std::sync::Weak<crate::kernel::Kernel>;
                l.set(kernel, fd, file, on)?;
            }
            if let Some(s) = crate::socket::of(file) {
                s.async_changed(&task.kernel, on);
            }
            if let (true, Some(end)) = (on, file.downcast::<crate::fsimpl::devpts::PtyEnd>()) {
                // __tty_fasync(): with no owner yet, the terminal's
                // foreground group (only a slave has one), else the caller.
                match end.pty.fg_pgrp().filter(|_| !end.master) {
                    Some(pgrp) => file.set_owner(OwnerKind::Pgrp, pgrp, true),
                    None => file.set_owner(OwnerKind::Pid, task.pid(), true),
                }
            }
        }
        // /dev/random and /dev/urandom have a fasync operation, but Linux
        // signals only when its entropy pool first becomes ready, which in
        // the sandbox it always is: the flag is kept, no signal comes. The
        // host's sockets under --network host would need the host's
        // readiness watched: the same for now.
        None if is_socket(file)
            || matches!(file.kind, FileKind::Dev(Device::Random | Device::Urandom)) => {}
        None if ioctl => return Err(Errno::ENOTTY),
        None => return Ok(()),
    }
    {
        let mut f = file.flags.locked();
        if on {
            *f |= OpenFlags::ASYNC.bits();
        } else {
            *f &= !OpenFlags::ASYNC.bits();
        }
    }
    Ok(())
}

/// The lock identity of an open file: its `(st_dev, st_ino)`, which two
/// separate opens of one file agree on.
fn lock_key(file: &FileDescription) -> Result<FileKey, Errno> {
    let st = file.stat()?;
    Ok((st.dev, st.ino))
}

/// Retries `attempt` until it succeeds, waiting for lock releases in
/// between; `ERESTARTSYS` when a signal arrives first.
fn wait_for_lock(
    task: &Task,
    mut attempt: impl FnMut() -> Result<bool, Errno>,
    ready: impl Fn() -> bool,
) -> Result<(), Errno> {
    task.blocker().block_on(
        std::slice::from_ref(&task.kernel.locks.waiters),
        false,
        || Ok(attempt()?.then_some(())),
        ready,
    )
}

/// `struct flock` (x86-64): l_type, l_whence, l_start, l_len, l_pid.
fn read_flock(task: &Task, addr: u64) -> Result<(i16, i16, i64, i64, i32), Errno> {
    let raw: [u8; 32] = task.mm().read_obj(addr)?;
    let i16_at = |o: usize| i16::from_ne_bytes([raw[o], raw[o + 1]]);
    let i64_at = |o: usize| i64::from_ne_bytes(raw[o..o + 8].try_into().unwrap_or([0; 8]));
    let pid = i32::from_ne_bytes(raw[24..28].try_into().unwrap_or([0; 4]));
    Ok((i16_at(0), i16_at(2), i64_at(8), i64_at(16), pid))
}

fn write_flock(task: &Task, addr: u64, l_type: i16, l: Option<&RecordLock>) -> Result<(), Errno> {
    let mut raw: [u8; 32] = task.mm().read_obj(addr)?;
    raw[0..2].copy_from_slice(&l_type.to_ne_bytes());
    if let Some(l) = l {
        let len = if l.end == OFFSET_MAX {
            0
        } else {
            l.end - l.start + 1
        };
        raw[2..4].copy_from_slice(&0i16.to_ne_bytes());
        raw[8..16].copy_from_slice(&l.start.to_ne_bytes());
        raw[16..24].copy_from_slice(&len.to_ne_bytes());
        raw[24..28].copy_from_slice(&l.owner.reported_pid().to_ne_bytes());
    }
    task.mm().write_obj(addr, &raw)
}

/// `fcntl` `F_GETLK`/`F_SETLK`/`F_SETLKW` and their OFD variants.
fn record_lock(
    task: &Task,
    file: &Arc<FileDescription>,
    cmd: u32,
    addr: u64,
    ofd: bool,
) -> Result<u64, Errno> {
    const F_RDLCK: i16 = 0;
    const F_WRLCK: i16 = 1;
    const F_UNLCK: i16 = 2;
    let (get, wait) = match cmd {
        5 | 36 => (true, false),
        7 | 38 => (false, true),
        _ => (false, false),
    };
    let (l_type, whence, l_start, l_len, l_pid) = read_flock(task, addr)?;
    if matches!(file.kind, FileKind::Path) {
        return Err(Errno::EBADF);
    }
    if ofd && l_pid != 0 {
        return Err(Errno::EINVAL);
    }
    let write = match l_type {
        F_RDLCK => Some(false),
        F_WRLCK => Some(true),
        F_UNLCK if !get => None,
        _ => return Err(Errno::EINVAL),
    };
    let base = match whence {
        0 => 0,
        1 => *file.pos.locked() as i64,
        2 => file.stat()?.size,
        _ => return Err(Errno::EINVAL),
    };
    let start = base.checked_add(l_start).ok_or(Errno::EOVERFLOW)?;
    let (start, end) = match l_len {
        0 => (start, OFFSET_MAX),
        n if n > 0 => (start, start.checked_add(n - 1).ok_or(Errno::EOVERFLOW)?),
        n => (start.checked_add(n).ok_or(Errno::EINVAL)?, start - 1),
    };
    if start < 0 {
        return Err(Errno::EINVAL);
    }
    if !get {
        match write {
            Some(false) if !file.can_read() => return Err(Errno::EBADF),
            Some(true) if !file.can_write() => return Err(Errno::EBADF),
            _ => {}
        }
    }
    let key = lock_key(file)?;
    let owner = if ofd {
        Owner::Description(file.lock_id())
    } else {
        Owner::Process(task.pid())
    };
    let table = task.kernel.locks.clone();
    if get {
        let want = RecordLock {
            owner,
            start,
            end,
            write: write == Some(true),
        };
        return match table.conflict(key, &want) {
            Some(c) => write_flock(
                task,
                addr,
                if c.write { F_WRLCK } else { F_RDLCK },
                Some(&c),
            ),
            None => write_flock(task, addr, F_UNLCK, None),
        }
        .map(|()| 0);
    }
    if ofd {
        file.note_locks(&table, key);
    }
    let me = task.pid();
    let r = wait_for_lock(
        task,
        || match table.record_try(key, owner, start, end, write) {
            Ok(()) => Ok(true),
            Err(_) if !wait => Err(Errno::EAGAIN),
            Err(holder) => {
                table.stop_waiting(me);
                if let (false, Owner::Process(h)) = (ofd, holder.owner) {
                    if !table.start_waiting(me, h) {
                        return Err(Errno::EDEADLK);
                    }
                }
                Ok(false)
            }
        },
        || {
            write.is_none_or(|w| {
                table
                    .conflict(
                        key,
                        &RecordLock {
                            owner,
                            start,
                            end,
                            write: w,
                        },
                    )
                    .is_none()
            })
        },
    );
    if wait && !ofd {
        table.stop_waiting(me);
    }
    r.map(|()| 0)
}

/// Drops the calling process's POSIX locks on the file `file` is open on
/// (closing any descriptor of a file does that), and its notification
/// registration when `file` is a message queue.
pub fn close_releases_locks(task: &Task, file: &FileDescription) {
    if let Some(crate::fsimpl::mqueue::MqueueFile(q)) = file.downcast() {
        // Any close by the registered process ends its notification
        // registration (Linux's `mqueue_flush_file`).
        super::mqueue::drop_registration(task, q);
    }
    let owner = Owner::Process(task.pid());
    if !task.kernel.locks.holds_records(owner) {
        return;
    }
    if let Ok(key) = lock_key(file) {
        task.kernel.locks.release_records(Some(key), owner);
    }
}

pub fn sys_flock(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    const LOCK_SH: u32 = 1;
    const LOCK_EX: u32 = 2;
    const LOCK_NB: u32 = 4;
    const LOCK_UN: u32 = 8;
    let file = task.fds().file(a[0] as i32 as i64)?;
    if matches!(file.kind, FileKind::Path) {
        return Err(Errno::EBADF);
    }
    let cmd = a[1] as u32;
    let op = cmd & !LOCK_NB;
    if !matches!(op, LOCK_SH | LOCK_EX | LOCK_UN) {
        return Err(Errno::EINVAL);
    }
    let key = lock_key(&file)?;
    let table = task.kernel.locks.clone();
    let id = file.lock_id();
    if op == LOCK_UN {
        table.flock_unlock(key, id);
        return Ok(0);
    }
    let exclusive = op == LOCK_EX;
    match table.flock_held(key, id) {
        Some(ex) if ex == exclusive => return Ok(0),
        // Linux converts by dropping the old lock first.
        Some(_) => {
            table.flock_unlock(key, id);
        }
        None => {}
    }
    file.note_locks(&table, key);
    let nonblock = cmd & LOCK_NB != 0;
    wait_for_lock(
        task,
        || {
            if table.flock_try(key, id, exclusive) {
                Ok(true)
            } else if nonblock {
                Err(Errno::EAGAIN)
            } else {
                Ok(false)
            }
        },
        || !table.flock_conflicts(key, id, exclusive),
    )
    .map(|()| 0)
}

pub fn sys_fsync(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let file = task.fds().file(a[0] as i32 as i64)?;
    sync_file(task, &file).map(|()| 0)
}

/// `fsync(2)` of an open file, for AIO's `IOCB_CMD_FSYNC`.
pub(super) fn sync_file_pub(task: &Task, file: &FileDescription) -> Result<(), Errno> {
    sync_file(task, file)
}

/// `fsync(2)` of an open file.
fn sync_file(task: &Task, file: &FileDescription) -> Result<(), Errno> {
    match &file.kind {
        FileKind::Path => Err(Errno::EBADF),
        // A volume's file: the data must reach the host's disk, what its
        // shared mappings hold included (through any description, as
        // Linux's fsync writes the file's dirty pages whoever made them).
        FileKind::Host(f) if !file.is_dir() => {
            let cache = task.kernel.fs.page_caches.lookup(f);
            if let Some(c) = &cache {
                c.writeback(None)?;
            }
            if file.flags() & abi::O_ACCMODE != 0 || cache.is_some() {
                host::fsync(f.fd())?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

pub fn sys_fadvise64(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let file = task.fds().file(a[0] as i32 as i64)?;
    if matches!(file.kind, FileKind::Path) {
        return Err(Errno::EBADF);
    }
    if a[3] > 5 || (a[2] as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    if file.downcast::<crate::fsimpl::pipe::PipeEnd>().is_some() {
        return Err(Errno::ESPIPE);
    }
    if let FileKind::Stdio(fd) = file.kind {
        let st = host::fstat(FileDescription::stdio_borrow(fd))?;
        if st.st_mode & abi::S_IFMT == abi::S_IFIFO {
            return Err(Errno::ESPIPE);
        }
    }
    Ok(0)
}

pub fn sys_fallocate(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let file = task.fds().file(a[0] as i32 as i64)?;
    if (a[2] as i64) < 0 || (a[3] as i64) <= 0 {
        return Err(Errno::EINVAL);
    }
    match &file.kind {
        FileKind::Host(_) if file.flags() & abi::O_ACCMODE == 0 => Err(Errno::EBADF),
        FileKind::Host(f) if !file.is_dir() => {
            let change = || {
                host::fallocate(f.fd(), a[1] as i32, a[2] as i64, a[3] as i64).map_err(Errno::from)
            };
            match task.kernel.fs.page_caches.lookup(f) {
                Some(cache) => cache.around_host_change(change)?,
                None => change()?,
            }
            Ok(0)
        }
        FileKind::Impl(_) if let Some(m) = file.downcast::<MemInode>() => {
            const KEEP_SIZE: u64 = 0x1;
            const PUNCH_HOLE: u64 = 0x2;
            let mode = a[1] & 0xffff_ffff;
            // tmpfs knows these two modes only; a hole keeps the size.
            if mode & !(KEEP_SIZE | PUNCH_HOLE) != 0
                || (mode & PUNCH_HOLE != 0 && mode & KEEP_SIZE == 0)
            {
                return Err(Errno::EOPNOTSUPP);
            }
            if !file.writable() {
                return Err(Errno::EBADF);
            }
            if m.is_dir() {
                return Err(Errno::EISDIR);
            }
            if (a[2] as i64).checked_add(a[3] as i64).is_none() {
                return Err(Errno::EFBIG);
            }
            m.fallocate(mode & PUNCH_HOLE != 0, mode & KEEP_SIZE != 0, a[2], a[3])?;
            if let Some(loc) = &file.location {
                inotify::on_object(loc, inotify::mask::MODIFY);
            }
            Ok(0)
        }
        FileKind::Path => Err(Errno::EBADF),
        _ => Err(Errno::EBADF),
    }
}

pub fn sys_getdents64(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    getdents(task, a, false)
}

/// The old `getdents(2)`: `struct linux_dirent`, whose type is the
/// record's last byte, after the name's NUL.
pub fn sys_getdents(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    getdents(task, a, true)
}

fn getdents(task: &mut Task, a: &[u64; 6], old: bool) -> Result<u64, Errno> {
    let file = task.fds().file(a[0] as i32 as i64)?;
    let count = a[2].min(MAX_RW_COUNT) as usize;
    let entries = file.dir_entries(&task.kernel.fs)?;
    let entries = entries.as_deref().unwrap_or(&[]);
    let mut pos = file.pos.locked();
    let mut out = Vec::new();
    let mut i = *pos as usize;
    while let Some(e) = entries.get(i) {
        // (the name starts at 19 in linux_dirent64, after d_type; at 18
        // in linux_dirent, with d_type after its NUL)
        let reclen = if old {
            (18 + e.name.len() + 2 + 7) & !7
        } else {
            (19 + e.name.len() + 1 + 7) & !7
        };
        if out.len() + reclen > count {
            break;
        }
        let start = out.len();
        out.extend_from_slice(&e.ino.to_ne_bytes());
        out.extend_from_slice(&((i + 1) as i64).to_ne_bytes());
        out.extend_from_slice(&(reclen as u16).to_ne_bytes());
        if !old {
            out.push(e.kind);
        }
        out.extend_from_slice(&e.name);
        out.resize(start + reclen, 0);
        if old {
            out[start + reclen - 1] = e.kind;
        }
        i += 1;
    }
    if out.is_empty() && i < entries.len() {
        return Err(Errno::EINVAL);
    }
    task.mm().copy_out(a[1], &out)?;
    *pos = i as u64;
    Ok(out.len() as u64)
}

/// `sysfs(2)`: the file system types of `/proc/filesystems` by name (1),
/// by index (2), and how many (3).
pub fn sys_sysfs(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    use crate::fsimpl::proc::FILESYSTEMS;
    match a[0] {
        1 => {
            let name = super::path_arg(task, a[1])?;
            FILESYSTEMS
                .iter()
                .position(|(n, _)| n.as_bytes() == name)
                .map(|i| i as u64)
                .ok_or(Errno::EINVAL)
        }
        2 => {
            let (name, _) = usize::try_from(a[1])
                .ok()
                .and_then(|i| FILESYSTEMS.get(i))
                .ok_or(Errno::EINVAL)?;
            let mut out = name.as_bytes().to_vec();
            out.push(0);
            task.mm().copy_out(a[2], &out)?;
            Ok(0)
        }
        3 => Ok(FILESYSTEMS.len() as u64),
        _ => Err(Errno::EINVAL),
    }
}

/// `ustat(2)`: free blocks and inodes of the mounted file system whose
/// device is `dev` (Linux's 32-bit `new_encode_dev` form), EINVAL for a
/// device nothing is mounted from.
pub fn sys_ustat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let dev = a[0] as u32;
    let want = (
        u64::from((dev & 0xfff00) >> 8),
        u64::from((dev & 0xff) | ((dev >> 12) & 0xfff00)),
    );
    let parts = |d: u64| {
        (
            ((d >> 8) & 0xfff) | ((d >> 32) & !0xfff),
            (d & 0xff) | ((d >> 12) & !0xff),
        )
    };
    let fs = &task.kernel.fs;
    let root = task.root();
    // (the mount points /proc/self/mounts lists)
    let standard = crate::fsimpl::proc::standard_mounts(fs).into_iter();
    let points = std::iter::once("/")
        .chain(standard.map(|(path, ..)| path))
        .map(String::from)
        .chain(fs.mount_list().into_iter().map(|(path, ..)| path));
    for p in points {
        let Ok(loc) = task.resolve(&root, p.as_bytes(), true) else {
            continue;
        };
        let Ok(st) = loc.node().stat() else {
            continue;
        };
        if parts(st.dev) != want {
            continue;
        }
        let s = statfs_of(fs, loc.node())?;
        // struct ustat: f_tfree (int), f_tinode (ino_t), f_fname[6],
        // f_fpack[6], padded to 32 bytes.
        let mut out = [0u8; 32];
        out[0..4].copy_from_slice(&(s.f_bfree as i32).to_ne_bytes());
        out[8..16].copy_from_slice(&s.f_ffree.to_ne_bytes());
        task.mm().copy_out(a[1], &out)?;
        return Ok(0);
    }
    Err(Errno::EINVAL)
}

/// `restart_syscall(2)` called by the program itself: the Sentry restarts
/// interrupted calls on its own and leaves none to finish here, so this is
/// Linux's answer for a thread with nothing to restart.
pub fn sys_restart_syscall(_task: &mut Task, _a: &[u64; 6]) -> Result<u64, Errno> {
    Err(Errno::EINTR)
}

/// `readahead(2)`, checked as Linux checks it: a descriptor open for
/// reading, of a regular file. The host's page cache reads ahead itself.
pub fn sys_readahead(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let file = task.fds().file(a[0] as i32 as i64)?;
    if !file.can_read() {
        return Err(Errno::EBADF);
    }
    if file.stat()?.mode & abi::S_IFMT != abi::S_IFREG {
        return Err(Errno::EINVAL);
    }
    Ok(0)
}

/// `sync_file_range(2)`, checked as Linux checks it (the descriptor, the
/// flags, the range, the file's type). It promises no durability on
/// Linux either; the Sentry's writes are already the host's.
pub fn sys_sync_file_range(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    const VALID: u32 = 1 | 2 | 4; // WAIT_BEFORE, WRITE, WAIT_AFTER
    let file = task.fds().file(a[0] as i32 as i64)?;
    let (offset, nbytes, flags) = (a[1] as i64, a[2] as i64, a[3] as u32);
    if flags & !VALID != 0 {
        return Err(Errno::EINVAL);
    }
    let end = offset.wrapping_add(nbytes);
    if offset < 0 || end < 0 || end < offset {
        return Err(Errno::EINVAL);
    }
    let fmt = file.stat()?.mode & abi::S_IFMT;
    if ![abi::S_IFREG, abi::S_IFBLK, abi::S_IFDIR, abi::S_IFLNK].contains(&fmt) {
        return Err(Errno::ESPIPE);
    }
    Ok(0)
}

pub fn sys_getcwd(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    // Seen from the caller's root; a working directory outside it (left
    // there by chroot(2)) is shown as Linux shows it, "(unreachable)"
    // before the path.
    let cwd = task.cwd();
    let mut path = match cwd.path_from(&task.root()) {
        Some(p) => p.into_bytes(),
        None => format!("(unreachable){}", cwd.path()).into_bytes(),
    };
    path.push(0);
    if (a[1] as usize) < path.len() {
        return Err(Errno::ERANGE);
    }
    task.mm().copy_out(a[0], &path)?;
    Ok(path.len() as u64)
}

pub fn sys_chdir(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let path = path_arg(task, a[0])?;
    let loc = task.resolve(&task.cwd(), &path, true)?;
    if !loc.node().is_dir() {
        return Err(Errno::ENOTDIR);
    }
    check_access(task, &loc, 1)?;
    task.fs_ctx().cwd = loc;
    Ok(0)
}

pub fn sys_fchdir(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let file = task.fds().file(a[0] as i32 as i64)?;
    let loc = file.location.clone().ok_or(Errno::ENOTDIR)?;
    if !loc.node().is_dir() {
        return Err(Errno::ENOTDIR);
    }
    task.fs_ctx().cwd = loc;
    Ok(0)
}

fn readlink(task: &Task, dirfd: u64, path_addr: u64, buf: u64, size: u64) -> Result<u64, Errno> {
    let path = path_arg(task, path_addr)?;
    if (size as i32) <= 0 {
        return Err(Errno::EINVAL);
    }
    let loc = if path.is_empty() {
        // An O_PATH descriptor of a symlink names it with an empty path.
        let file = task
            .fds()
            .file(dirfd as i32 as i64)
            .map_err(|_| Errno::ENOENT)?;
        file.location.clone().ok_or(Errno::ENOENT)?
    } else {
        let start = dir_arg(task, dirfd, &path)?;
        task.resolve(&start, &path, false)?
    };
    // readlinkat(fd, "") of something that is not a link: ENOENT.
    let not_link = if path.is_empty() {
        Errno::ENOENT
    } else {
        Errno::EINVAL
    };
    if !loc.node().is_symlink() {
        return Err(not_link);
    }
    let target = loc.node().readlink()?;
    let n = target.len().min(size as i32 as usize);
    task.mm().copy_out(buf, &target[..n])?;
    Ok(n as u64)
}

pub fn sys_readlink(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    readlink(task, AT_FDCWD as u64, a[0], a[1], a[2])
}

pub fn sys_readlinkat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    readlink(task, a[0], a[1], a[2], a[3])
}

/// A path split into the directory that holds its last component, that
/// component, and the object it names if it exists.
struct Entry {
    parent: Location,
    name: Vec<u8>,
    existing: Option<Location>,
}

/// Resolves `path` for a call that adds, removes or changes a name.
fn entry(task: &Task, dirfd: u64, path_addr: u64, follow: bool) -> Result<Entry, Errno> {
    entry_at(task, dirfd, path_arg(task, path_addr)?, follow)
}

fn entry_at(task: &Task, dirfd: u64, path: Vec<u8>, follow: bool) -> Result<Entry, Errno> {
    let start = dir_arg(task, dirfd, &path)?;
    let name = last_component(&path).unwrap_or_else(|| b".".to_vec());
    match task.walk(&start, &path, follow)? {
        Lookup::Found(loc) => {
            let mut parent = loc.clone();
            if !parent.pop() {
                // The root itself: "/" has no parent to change.
                return Ok(Entry {
                    parent: loc.clone(),
                    name,
                    existing: Some(loc),
                });
            }
            Ok(Entry {
                parent,
                name,
                existing: Some(loc),
            })
        }
        Lookup::Missing { parent } => Ok(Entry {
            parent,
            name,
            existing: None,
        }),
    }
}

/// The overlay's upper-layer inode `i` as the tmpfs inode it is.
fn upper_mem(i: Arc<dyn crate::vfs::Inode>) -> Result<Arc<MemInode>, Errno> {
    downcast(i).ok_or(Errno::EIO)
}

/// The tmpfs directory an entry's parent is, or the error a read-only or
/// synthetic parent gives.
fn mem_dir(
    task: &Task,
    e: &Entry,
) -> Result<std::sync::Arc<crate::fsimpl::tmpfs::MemInode>, Errno> {
    match e.parent.node() {
        // Writing below an overlay directory copies it up first.
        Node::Ovl(d) => upper_mem(task.kernel.fs.ensure_upper(d)?),
        n => mem_arc(n).ok_or_else(|| ro_error(n)),
    }
}

/// The overlay directory an entry's parent is, if it is one.
fn ovl_parent(e: &Entry) -> Option<&std::sync::Arc<crate::vfs::OvlDir>> {
    match e.parent.node() {
        Node::Ovl(d) => Some(d),
        _ => None,
    }
}

/// The upper-layer object standing for `loc`: itself on tmpfs, a copy-up
/// of a host file below an overlay directory, the upper half of an
/// overlay directory; `EROFS` elsewhere.
fn writable(
    task: &Task,
    loc: &Location,
) -> Result<std::sync::Arc<crate::fsimpl::tmpfs::MemInode>, Errno> {
    match loc.node() {
        Node::Ovl(d) => upper_mem(task.kernel.fs.ensure_upper(d)?),
        Node::Host { .. } => upper_mem(task.kernel.fs.copy_up(loc)?),
        n => mem_arc(n).ok_or_else(|| ro_error(n)),
    }
}

fn mkdir(task: &Task, dirfd: u64, path: u64, mode: u32) -> Result<u64, Errno> {
    let e = entry(task, dirfd, path, false)?;
    if e.existing.is_some() {
        return Err(Errno::EEXIST);
    }
    read_only_path(task, &e.parent)?;
    landlocked(task, &e.parent, access::MAKE_DIR)?;
    if let Some(v) = volume(e.parent.node()) {
        let h = v?;
        may_write_dir(task, &e.parent)?;
        let mode = mode & 0o7777 & !task.fs_ctx().umask;
        let node = h.client().mkdir(h.handle(), &e.name, mode)?;
        adopt(task, h, node);
        return Ok(0);
    }
    let dir = mem_dir(task, &e)?;
    may_write_dir(task, &e.parent)?;
    let mode = abi::S_IFDIR | (mode & 0o7777 & !task.fs_ctx().umask);
    // Over a deleted lower directory, the new one must not show its
    // old contents: it is opaque.
    let replaced = dir.clear_whiteout(&e.name);
    let d = dir.create(&e.name, mode, task.ids, || MemKind::Dir(Default::default()))?;
    if replaced {
        d.set_opaque();
    }
    Ok(0)
}

pub fn sys_mkdir(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    mkdir(task, AT_FDCWD as u64, a[0], a[1] as u32)
        .inspect(|_| created(task, AT_FDCWD as u64, a[0]))
}

pub fn sys_mkdirat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    mkdir(task, a[0], a[1], a[2] as u32).inspect(|_| created(task, a[0], a[1]))
}

fn mknod(task: &Task, dirfd: u64, path: u64, mode: u32) -> Result<u64, Errno> {
    let kind = mode & abi::S_IFMT;
    let e = entry(task, dirfd, path, false)?;
    if e.existing.is_some() {
        return Err(Errno::EEXIST);
    }
    read_only_path(task, &e.parent)?;
    landlocked(
        task,
        &e.parent,
        landlock::make_right(kind).ok_or(Errno::EINVAL)?,
    )?;
    let perm = mode & 0o7777 & !task.fs_ctx().umask;
    if let Some(v) = volume(e.parent.node()) {
        let h = v?;
        let kind = match kind {
            0 | abi::S_IFREG => abi::S_IFREG,
            abi::S_IFIFO => abi::S_IFIFO,
            abi::S_IFCHR | abi::S_IFBLK => return Err(Errno::EPERM),
            // Bound to nothing: a host process that connects is refused,
            // and the guest's connect finds no socket of the Sentry's.
            abi::S_IFSOCK => abi::S_IFSOCK,
            _ => return Err(Errno::EINVAL),
        };
        may_write_dir(task, &e.parent)?;
        let node = h.client().mknod(h.handle(), &e.name, kind | perm)?;
        adopt(task, h, node);
        return Ok(0);
    }
    let dir = mem_dir(task, &e)?;
    may_write_dir(task, &e.parent)?;
    dir.clear_whiteout(&e.name);
    match kind {
        0 | abi::S_IFREG => dir.create(&e.name, abi::S_IFREG | perm, task.ids, || {
            MemKind::File(Default::default())
        }),
        abi::S_IFIFO => dir.create(&e.name, abi::S_IFIFO | perm, task.ids, || {
            MemKind::Fifo(crate::fsimpl::pipe::Pipe::new_fifo())
        }),
        // Device nodes would reach host devices: never in a sandbox.
        abi::S_IFCHR | abi::S_IFBLK => return Err(Errno::EPERM),
        abi::S_IFSOCK => dir.create(&e.name, abi::S_IFSOCK | perm, task.ids, || {
            MemKind::Socket(std::sync::Weak::<()>::new())
        }),
        _ => return Err(Errno::EINVAL),
    }
    .map(|_| 0)
}

pub fn sys_mknod(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    mknod(task, AT_FDCWD as u64, a[0], a[1] as u32)
        .inspect(|_| created(task, AT_FDCWD as u64, a[0]))
}

pub fn sys_mknodat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    mknod(task, a[0], a[1], a[2] as u32).inspect(|_| created(task, a[0], a[1]))
}

fn symlink(task: &Task, target: u64, dirfd: u64, path: u64) -> Result<u64, Errno> {
    let target = path_arg(task, target)?;
    if target.is_empty() {
        return Err(Errno::ENOENT);
    }
    let e = entry(task, dirfd, path, false)?;
    if e.existing.is_some() {
        return Err(Errno::EEXIST);
    }
    read_only_path(task, &e.parent)?;
    landlocked(task, &e.parent, access::MAKE_SYM)?;
    if let Some(v) = volume(e.parent.node()) {
        let h = v?;
        may_write_dir(task, &e.parent)?;
        if target.len() > gofer::proto::SYMLINK_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        let node = h.client().symlink(h.handle(), &e.name, &target)?;
        adopt(task, h, node);
        return Ok(0);
    }
    let dir = mem_dir(task, &e)?;
    may_write_dir(task, &e.parent)?;
    dir.clear_whiteout(&e.name);
    dir.create(&e.name, abi::S_IFLNK | 0o777, task.ids, || {
        MemKind::Symlink(target)
    })
    .map(|_| 0)
}

pub fn sys_symlink(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    symlink(task, a[0], AT_FDCWD as u64, a[1]).inspect(|_| created(task, AT_FDCWD as u64, a[1]))
}

pub fn sys_symlinkat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    symlink(task, a[0], a[1], a[2]).inspect(|_| created(task, a[1], a[2]))
}

fn link(
    task: &Task,
    olddir: u64,
    old: u64,
    newdir: u64,
    new: u64,
    flags: u32,
) -> Result<u64, Errno> {
    let path = path_arg(task, old)?;
    let mut src = if path.is_empty() && flags & AT_EMPTY_PATH != 0 {
        // The file `olddir` is open on (Linux asks for
        // CAP_DAC_READ_SEARCH, and says ENOENT without it).
        if task.ids.0 != 0 {
            return Err(Errno::ENOENT);
        }
        if olddir as i32 == AT_FDCWD {
            task.cwd()
        } else {
            let file = task.fds().file(olddir as i32 as i64)?;
            linkable_file(task, &file)?
        }
    } else {
        let start = dir_arg(task, olddir, &path)?;
        task.resolve(&start, &path, flags & abi::AT_SYMLINK_FOLLOW != 0)?
    };
    // /proc/self/fd/N is the file itself.
    if let Some(file) = src.node().open_file() {
        if file.downcast::<MemInode>().is_some() {
            src = linkable_file(task, file)?;
        }
    }
    let e = entry(task, newdir, new, false)?;
    if e.existing.is_some() {
        return Err(Errno::EEXIST);
    }
    // A link never crosses mounts; Linux says so before anything else
    // (even before a read-only root's EROFS).
    if crate::vfs::mount_key(src.node()) != crate::vfs::mount_key(e.parent.node())
        || task.kernel.fs.read_only_mount(&src) != task.kernel.fs.read_only_mount(&e.parent)
    {
        return Err(Errno::EXDEV);
    }
    read_only_path(task, &e.parent)?;
    if let Some(d) = &task.landlock {
        let mut from = src.clone();
        from.pop();
        d.check_move(&landlock::Move {
            from: &from,
            to: &e.parent,
            mode: src.node().stat()?.mode,
            rename: false,
            target: None,
            exchange: false,
        })?;
    }
    if let Some(v) = volume(e.parent.node()) {
        let h = v?;
        let Node::Host { h: s, .. } = src.node() else {
            return Err(Errno::EXDEV);
        };
        if s.mount_id() != h.mount_id() {
            return Err(Errno::EXDEV);
        }
        if src.node().is_dir() {
            return Err(Errno::EPERM);
        }
        may_write_dir(task, &e.parent)?;
        // The reply's handle is closed at once.
        drop(h.child(h.client().link(h.handle(), &e.name, s.handle())?));
        return Ok(0);
    }
    let dir = mem_dir(task, &e)?;
    let node = match src.node() {
        // A host file below the overlay is copied up, then linked.
        Node::Host { .. } if matches!(src.parent(), Some((Node::Ovl(_), _))) => {
            upper_mem(task.kernel.fs.copy_up(&src)?)?
        }
        n => mem_arc(n).ok_or(Errno::EXDEV)?,
    };
    may_write_dir(task, &e.parent)?;
    dir.clear_whiteout(&e.name);
    dir.link(&e.name, &node)?;
    // A nameless file gets one name at most this way (I_LINKABLE).
    node.set_linkable(false);
    Ok(0)
}

/// Where the file `file` is open on can be linked from: a tmpfs file
/// with no name (O_TMPFILE) may get one, unless it was made `O_EXCL`.
fn linkable_file(task: &Task, file: &FileDescription) -> Result<Location, Errno> {
    if let Some(m) = &file.downcast_arc::<MemInode>() {
        if let Some(l) = named_location(file, m) {
            return Ok(l);
        }
        if !m.may_link() {
            return Err(Errno::ENOENT);
        }
        return Ok(nameless(task, m));
    }
    file.location.clone().ok_or(Errno::EBADF)
}

/// The location of a tmpfs file's description while it still names the
/// file (an unlinked or O_TMPFILE file has none).
fn named_location(
    file: &FileDescription,
    m: &Arc<crate::fsimpl::tmpfs::MemInode>,
) -> Option<Location> {
    file.location
        .clone()
        .filter(|l| mem_of(l.node()).is_some_and(|x| std::ptr::eq(x, &**m)))
}

pub fn sys_link(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    link(task, AT_FDCWD as u64, a[0], AT_FDCWD as u64, a[1], 0)
        .inspect(|_| created(task, AT_FDCWD as u64, a[1]))
}

/// inotify: `IN_CREATE` for what a call just made at `path`.
fn created(task: &Task, dirfd: u64, path: u64) {
    if !inotify::hub().active() {
        return;
    }
    if let Ok(Entry {
        parent,
        name,
        existing: Some(obj),
    }) = entry(task, dirfd, path, false)
    {
        if let Some(ids) = EntryIds::of(parent.node(), Some(obj.node())) {
            ids.entry(inotify::mask::CREATE, 0, &name);
        }
    }
}

pub fn sys_linkat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    if a[4] as u32 & !(abi::AT_SYMLINK_FOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    link(task, a[0], a[1], a[2], a[3], a[4] as u32).inspect(|_| created(task, a[2], a[3]))
}

fn unlink(task: &Task, dirfd: u64, path: u64, dir: bool) -> Result<u64, Errno> {
    unlink_path(task, dirfd, path_arg(task, path)?, dir)
}

fn unlink_path(task: &Task, dirfd: u64, path: Vec<u8>, dir: bool) -> Result<u64, Errno> {
    let e = entry_at(task, dirfd, path, false)?;
    let ids = EntryIds::of(e.parent.node(), e.existing.as_ref().map(Location::node));
    let r = unlink_entry(task, &e, dir);
    if let (Ok(_), Some(ids)) = (&r, ids) {
        ids.removed(&e.name);
    }
    r
}

fn unlink_entry(task: &Task, e: &Entry, dir: bool) -> Result<u64, Errno> {
    if e.name == b"." {
        return Err(if dir { Errno::EINVAL } else { Errno::EISDIR });
    }
    if e.name == b".." {
        return Err(if dir { Errno::ENOTEMPTY } else { Errno::EISDIR });
    }
    if !e.parent.node().is_dir() {
        return Err(Errno::ENOTDIR);
    }
    // (do_unlinkat() asks for write access to the mount before the name)
    read_only_path(task, &e.parent)?;
    if e.existing.is_some() {
        let right = if dir {
            access::REMOVE_DIR
        } else {
            access::REMOVE_FILE
        };
        landlocked(task, &e.parent, right)?;
    }
    if let Some(v) = volume(e.parent.node()) {
        let h = v?;
        if e.existing.is_none() {
            return Err(Errno::ENOENT);
        }
        busy_mount_point(task, e)?;
        may_delete(task, &e.parent, e.existing.as_ref())?;
        let flags = if dir { abi::AT_REMOVEDIR } else { 0 };
        h.client().unlink(h.handle(), &e.name, flags)?;
        return Ok(0);
    }
    if e.existing.is_some() {
        busy_mount_point(task, e)?;
    }
    if let Some(root) = e.parent.node().inode::<crate::fsimpl::mqueue::MqueueRoot>() {
        if dir {
            return Err(if e.existing.is_some() {
                Errno::ENOTDIR
            } else {
                Errno::ENOENT
            });
        }
        root.0
            .unlink(&e.name, task.ids.0, task.capable(cap::FOWNER))?;
        return Ok(0);
    }
    // A read-only parent refuses before the name is even looked at.
    match e.parent.node() {
        Node::Ovl(_) if !task.kernel.fs.overlay => return Err(Errno::EROFS),
        Node::Ovl(_) => {}
        n if mem_of(n).is_some() => {}
        n => return Err(ro_error(n)),
    }
    let Some(existing) = &e.existing else {
        return Err(Errno::ENOENT);
    };
    if let Some(d) = ovl_parent(e) {
        let depth = d.path.len();
        let in_lower = task.kernel.fs.ovl_lower_has(d, depth, &e.name);
        match existing.node() {
            Node::Ovl(sub) => {
                if !dir {
                    return Err(Errno::EISDIR);
                }
                if task.kernel.fs.ovl_list(sub)?.len() > 2 {
                    return Err(Errno::ENOTEMPTY);
                }
            }
            n if mem_of(n).is_some_and(|m| m.is_dir() && !dir) => return Err(Errno::EISDIR),
            n if mem_of(n).is_some_and(|m| !m.is_dir() && dir) => return Err(Errno::ENOTDIR),
            Node::Host { .. } if dir != existing.node().is_dir() => {
                return Err(if dir { Errno::ENOTDIR } else { Errno::EISDIR })
            }
            Node::Host { .. } => {}
            n if mem_of(n).is_some() => {}
            _ => return Err(Errno::EBUSY),
        }
        may_delete(task, &e.parent, Some(existing))?;
        let upper = upper_mem(task.kernel.fs.ensure_upper(d)?)?;
        if in_lower {
            // Hide the host's entry.
            upper.whiteout(&e.name)?;
        } else {
            upper.unlink_any(&e.name)?;
        }
        return Ok(0);
    }
    if mem_of(existing.node()).is_none() {
        // A mount point (the root of a tmpfs) cannot be removed.
        return Err(Errno::EBUSY);
    }
    let parent = mem_dir(task, e)?;
    may_delete(task, &e.parent, Some(existing))?;
    parent.unlink(&e.name, dir).map(|()| 0)
}

pub fn sys_unlink(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    unlink(task, AT_FDCWD as u64, a[0], false)
}

pub fn sys_rmdir(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    unlink(task, AT_FDCWD as u64, a[0], true)
}

pub fn sys_unlinkat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    if a[2] as u32 & !abi::AT_REMOVEDIR != 0 {
        return Err(Errno::EINVAL);
    }
    unlink(task, a[0], a[1], a[2] as u32 & abi::AT_REMOVEDIR != 0)
}

fn rename(
    task: &Task,
    olddir: u64,
    old: u64,
    newdir: u64,
    new: u64,
    flags: u32,
) -> Result<u64, Errno> {
    let from = entry(task, olddir, old, false)?;
    let to = entry(task, newdir, new, false)?;
    let ids = EntryIds::of(
        from.parent.node(),
        from.existing.as_ref().map(Location::node),
    );
    let to_ids = EntryIds::of(to.parent.node(), from.existing.as_ref().map(Location::node));
    let r = rename_entries(task, &from, &to, flags);
    if let (Ok(_), Some(a), Some(b)) = (&r, ids, to_ids) {
        let cookie = inotify::hub().cookie();
        a.entry(inotify::mask::MOVED_FROM, cookie, &from.name);
        b.entry(inotify::mask::MOVED_TO, cookie, &to.name);
        a.object(inotify::mask::MOVE_SELF);
    }
    r
}

fn rename_entries(task: &Task, from: &Entry, to: &Entry, flags: u32) -> Result<u64, Errno> {
    let fs = &task.kernel.fs;
    if crate::vfs::mount_key(from.parent.node()) != crate::vfs::mount_key(to.parent.node())
        || fs.read_only_mount(&from.parent) != fs.read_only_mount(&to.parent)
    {
        return Err(Errno::EXDEV);
    }
    // "/", "." and ".." name no entry of a directory to move or replace
    // (Linux's LAST_ROOT and LAST_DOT[DOT]), before any other check.
    if [&from.name, &to.name]
        .iter()
        .any(|n| n.as_slice() == b"." || n.as_slice() == b"..")
    {
        return Err(Errno::EBUSY);
    }
    read_only_path(task, &from.parent)?;
    if from.existing.is_some() {
        busy_mount_point(task, from)?;
    }
    if to.existing.is_some() {
        busy_mount_point(task, to)?;
    }
    // A directory above a masked or read-only path would leave it behind
    // (its mount here is tied to the path): the guest cannot move a mask
    // away from what it hides.
    if [&from.existing, &to.existing]
        .into_iter()
        .flatten()
        .any(|l| fs.holds_locked_path(l))
    {
        return Err(Errno::EBUSY);
    }
    landlock_rename(task, from, to, flags)?;
    if let (Some(a), Some(b)) = (volume(from.parent.node()), volume(to.parent.node())) {
        let (a, b) = (a?, b?);
        if from.existing.is_none() {
            return Err(Errno::ENOENT);
        }
        if from.name == b"." || from.name == b".." || to.name == b"." || to.name == b".." {
            return Err(Errno::EBUSY);
        }
        may_delete(task, &from.parent, from.existing.as_ref())?;
        may_delete(task, &to.parent, to.existing.as_ref())?;
        a.client()
            .rename(a.handle(), &from.name, b.handle(), &to.name, flags)?;
        return Ok(0);
    }
    match from.parent.node() {
        Node::Ovl(_) if !task.kernel.fs.overlay => return Err(Errno::EROFS),
        Node::Ovl(_) => {}
        n if mem_of(n).is_some() => {}
        n => return Err(ro_error(n)),
    }
    let Some(src) = &from.existing else {
        return Err(Errno::ENOENT);
    };
    // Overlay: a host directory cannot move (overlayfs without
    // redirect_dir answers EXDEV and tools copy instead); a host file is
    // copied up first; the old name is whited out if the host has it.
    let mut hide_old = false;
    if let Some(d) = ovl_parent(from) {
        match src.node() {
            Node::Ovl(sub) if sub.lower.is_some() => return Err(Errno::EXDEV),
            Node::Host { .. } => {
                task.kernel.fs.copy_up(src)?;
            }
            _ => {}
        }
        hide_old = task.kernel.fs.ovl_lower_has(d, d.path.len(), &from.name);
    }
    let src_dir = mem_dir(task, from)?;
    let dst_dir = mem_dir(task, to)?;
    dst_dir.clear_whiteout(&to.name);
    if from.name == b"." || from.name == b".." || to.name == b"." || to.name == b".." {
        return Err(Errno::EBUSY);
    }
    // A directory cannot move below itself.
    if let Some(s) = mem_of(src.node()) {
        if s.is_dir() && to.parent.chain_contains(s) {
            return Err(Errno::EINVAL);
        }
    }
    may_delete(task, &from.parent, from.existing.as_ref())?;
    may_delete(task, &to.parent, to.existing.as_ref())?;
    crate::fsimpl::tmpfs::rename(&src_dir, &from.name, &dst_dir, &to.name, flags)?;
    if hide_old && flags & 2 == 0 {
        src_dir.whiteout(&from.name)?;
    }
    Ok(0)
}

/// Landlock's check of a rename (security_path_rename()), made once the
/// names are known to exist as `flags` require (Linux looks them up
/// first: `ENOENT`, `EEXIST` come before it).
fn landlock_rename(task: &Task, from: &Entry, to: &Entry, flags: u32) -> Result<(), Errno> {
    const RENAME_NOREPLACE: u32 = 1;
    const RENAME_EXCHANGE: u32 = 2;
    let (Some(d), Some(src)) = (&task.landlock, &from.existing) else {
        return Ok(());
    };
    let exchange = flags & RENAME_EXCHANGE != 0;
    if (exchange && to.existing.is_none())
        || (flags & RENAME_NOREPLACE != 0 && to.existing.is_some())
    {
        return Ok(());
    }
    let target = match &to.existing {
        Some(t) => Some(t.node().stat()?.mode),
        None => None,
    };
    d.check_move(&landlock::Move {
        from: &from.parent,
        to: &to.parent,
        mode: src.node().stat()?.mode,
        rename: true,
        target,
        exchange,
    })
}

pub fn sys_rename(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    rename(task, AT_FDCWD as u64, a[0], AT_FDCWD as u64, a[1], 0)
}

pub fn sys_renameat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    rename(task, a[0], a[1], a[2], a[3], 0)
}

pub fn sys_renameat2(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    if a[4] as u32 & !7 != 0 || a[4] & 3 == 3 {
        return Err(Errno::EINVAL);
    }
    rename(task, a[0], a[1], a[2], a[3], a[4] as u32)
}

/// The object a metadata change names, which must exist.
fn target(
    task: &Task,
    dirfd: u64,
    path: u64,
    follow: bool,
    empty_ok: bool,
) -> Result<Location, Errno> {
    let p = path_arg(task, path)?;
    if p.is_empty() {
        if !empty_ok {
            return Err(Errno::ENOENT);
        }
        if dirfd as i32 == AT_FDCWD {
            return Ok(task.cwd());
        }
        return task
            .fds()
            .file(dirfd as i32 as i64)?
            .location
            .clone()
            .ok_or(Errno::EBADF);
    }
    let start = dir_arg(task, dirfd, &p)?;
    task.resolve(&start, &p, follow)
}

/// Only the owner (or `CAP_FOWNER`) may change an inode's metadata.
fn owner_check(task: &Task, m: &crate::fsimpl::tmpfs::MemInode) -> Result<(), Errno> {
    if task.creds.owns(m.meta().uid) {
        Ok(())
    } else {
        Err(Errno::EPERM)
    }
}

/// Changes attributes of a volume object; `owner_only` when only its
/// owner (or `CAP_FOWNER`) may.
fn volume_set(
    task: &Task,
    h: &GoferRef,
    attr: &gofer::client::SetAttr,
    owner_only: bool,
) -> Result<u64, Errno> {
    if owner_only && !task.creds.owns(h.stat()?.uid) {
        return Err(Errno::EPERM);
    }
    h.client().set_stat(h.handle(), attr)?;
    Ok(0)
}

fn chmod_loc(task: &Task, loc: &Location, mode: u32) -> Result<u64, Errno> {
    let r = chmod_loc_inner(task, loc, mode);
    if r.is_ok() {
        inotify::on_object(loc, inotify::mask::ATTRIB);
    }
    r
}

/// The mode `chmod` sets: without `CAP_FSETID`, the set-group-ID bit of
/// a file whose group the caller is not in is dropped (chmod(2)).
fn chmod_mode(task: &Task, st: &Stat, mode: u32) -> u32 {
    let mut mode = mode & 0o7777;
    if !task.creds.in_group(st.gid) && !task.capable(cap::FSETID) {
        mode &= !abi::S_ISGID;
    }
    mode
}

fn chmod_loc_inner(task: &Task, loc: &Location, mode: u32) -> Result<u64, Errno> {
    read_only_path(task, loc)?;
    if let Some(v) = volume(loc.node()) {
        let h = v?;
        let attr = gofer::client::SetAttr {
            mode: Some(chmod_mode(task, &h.stat()?, mode)),
            ..Default::default()
        };
        return volume_set(task, h, &attr, true);
    }
    let m = &writable(task, loc)?;
    owner_check(task, m)?;
    let mode = chmod_mode(task, &loc.node().stat()?, mode);
    // F_SEAL_EXEC freezes the execute bits (shmem_setattr()).
    if m.seals().unwrap_or(0) & crate::fsimpl::tmpfs::seal::EXEC != 0
        && (m.meta().mode ^ mode) & 0o111 != 0
    {
        return Err(Errno::EPERM);
    }
    m.set_mode(mode);
    Ok(0)
}

fn chown_loc(task: &Task, loc: &Location, uid: u32, gid: u32) -> Result<u64, Errno> {
    let r = chown_loc_inner(task, loc, uid, gid);
    if r.is_ok() {
        inotify::on_object(loc, inotify::mask::ATTRIB);
    }
    r
}

/// Whether the caller may give an object of owner `st` the owner `uid`
/// and group `gid` (`u32::MAX`: unchanged), chown(2): without
/// `CAP_CHOWN` only its owner may, keeping the owner and choosing one of
/// its own groups.
fn may_chown(task: &Task, st: &Stat, uid: u32, gid: u32) -> Result<(), Errno> {
    if task.capable(cap::CHOWN) {
        return Ok(());
    }
    let c = &task.creds;
    let owner = c.uid[3] == st.uid;
    let uid_ok = uid == u32::MAX || (owner && uid == st.uid);
    let gid_ok = gid == u32::MAX || (owner && (gid == st.gid || c.in_group(gid)));
    if uid_ok && gid_ok {
        Ok(())
    } else {
        Err(Errno::EPERM)
    }
}

fn chown_loc_inner(task: &Task, loc: &Location, uid: u32, gid: u32) -> Result<u64, Errno> {
    read_only_path(task, loc)?;
    if let Some(v) = volume(loc.node()) {
        let h = v?;
        may_chown(task, &h.stat()?, uid, gid)?;
        let attr = gofer::client::SetAttr {
            uid: (uid != u32::MAX).then_some(uid),
            gid: (gid != u32::MAX).then_some(gid),
            ..Default::default()
        };
        return volume_set(task, h, &attr, false);
    }
    let m = &writable(task, loc)?;
    let st = loc.node().stat()?;
    may_chown(task, &st, uid, gid)?;
    m.set_owner(uid, gid);
    // A change of owner clears the set-user-ID bit (root's too), and the
    // set-group-ID bit unless that marks mandatory locking and the caller
    // is in the group or holds `CAP_FSETID` (chown(2)).
    let mut kill = crate::fsimpl::tmpfs::setid_bits_killed(st.mode);
    let sgid_only = st.mode & (abi::S_ISGID | 0o010) == abi::S_ISGID;
    if st.mode & abi::S_IFMT == abi::S_IFREG
        && sgid_only
        && !task.creds.in_group(st.gid)
        && !task.capable(cap::FSETID)
    {
        kill |= abi::S_ISGID;
    }
    if kill != 0 {
        m.set_mode(st.mode & !kill);
    }
    Ok(0)
}

pub fn sys_chmod(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let loc = target(task, AT_FDCWD as u64, a[0], true, false)?;
    chmod_loc(task, &loc, a[1] as u32)
}

pub fn sys_fchmodat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let loc = target(task, a[0], a[1], true, false)?;
    chmod_loc(task, &loc, a[2] as u32)
}

pub fn sys_fchmodat2(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let flags = a[3] as u32;
    if flags & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    let loc = target(
        task,
        a[0],
        a[1],
        flags & AT_SYMLINK_NOFOLLOW == 0,
        flags & AT_EMPTY_PATH != 0,
    )?;
    if flags & AT_SYMLINK_NOFOLLOW != 0 && loc.node().is_symlink() {
        return Err(Errno::EOPNOTSUPP);
    }
    chmod_loc(task, &loc, a[2] as u32)
}

pub fn sys_chown(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let loc = target(task, AT_FDCWD as u64, a[0], true, false)?;
    chown_loc(task, &loc, a[1] as u32, a[2] as u32)
}

pub fn sys_lchown(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let loc = target(task, AT_FDCWD as u64, a[0], false, false)?;
    chown_loc(task, &loc, a[1] as u32, a[2] as u32)
}

pub fn sys_fchownat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let flags = a[4] as u32;
    if flags & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    let loc = target(
        task,
        a[0],
        a[1],
        flags & AT_SYMLINK_NOFOLLOW == 0,
        flags & AT_EMPTY_PATH != 0,
    )?;
    chown_loc(task, &loc, a[2] as u32, a[3] as u32)
}

fn file_loc(task: &Task, fd: u64) -> Result<Location, Errno> {
    let file = task.fds().file(fd as i32 as i64)?;
    match &file.kind {
        FileKind::Path => Err(Errno::EBADF),
        FileKind::Stdio(_) => Err(Errno::EPERM),
        _ if file.downcast::<crate::fsimpl::pipe::PipeEnd>().is_some() => Err(Errno::EPERM),
        // Unlinked files (O_TMPFILE) have no location: give them one.
        FileKind::Impl(_) if let Some(m) = &file.downcast_arc::<MemInode>() => {
            Ok(named_location(&file, m).unwrap_or_else(|| nameless(task, m)))
        }
        _ => file.location.clone().ok_or(Errno::EBADF),
    }
}

/// A location for a tmpfs file with no name (`O_TMPFILE`, memfd).
fn nameless(task: &Task, m: &std::sync::Arc<crate::fsimpl::tmpfs::MemInode>) -> Location {
    let mut l = task.kernel.fs.root();
    l.push(Vec::new(), Node::Inode(m.clone()));
    l
}

pub fn sys_fchmod(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let loc = file_loc(task, a[0])?;
    chmod_loc(task, &loc, a[1] as u32)
}

pub fn sys_fchown(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let loc = file_loc(task, a[0])?;
    chown_loc(task, &loc, a[1] as u32, a[2] as u32)
}

/// `utimensat` special values.
const UTIME_NOW: i64 = (1 << 30) - 1;
const UTIME_OMIT: i64 = (1 << 30) - 2;

fn set_times(task: &Task, loc: &Location, times: Option<[abi::Timespec; 2]>) -> Result<u64, Errno> {
    let r = set_times_inner(task, loc, times);
    if r.is_ok() {
        inotify::on_object(loc, inotify::mask::ATTRIB);
    }
    r
}

fn set_times_inner(
    task: &Task,
    loc: &Location,
    times: Option<[abi::Timespec; 2]>,
) -> Result<u64, Errno> {
    read_only_path(task, loc)?;
    let now = crate::host::clock_gettime(libc::CLOCK_REALTIME)?;
    let pick = |t: abi::Timespec| -> Result<Option<abi::Timespec>, Errno> {
        match t.tv_nsec {
            UTIME_NOW => Ok(Some(now)),
            UTIME_OMIT => Ok(None),
            n if (0..1_000_000_000).contains(&n) => Ok(Some(t)),
            _ => Err(Errno::EINVAL),
        }
    };
    let (at, mt) = match times {
        None => (Some(now), Some(now)),
        Some([a, b]) => (pick(a)?, pick(b)?),
    };
    let explicit = times.is_some_and(|t| {
        t.iter()
            .any(|x| x.tv_nsec != UTIME_NOW && x.tv_nsec != UTIME_OMIT)
    });
    if let Some(v) = volume(loc.node()) {
        let h = v?;
        let ts = |t: Option<abi::Timespec>| {
            t.map(|t| gofer::proto::Timespec {
                sec: t.tv_sec,
                nsec: t.tv_nsec as u32,
            })
        };
        let attr = gofer::client::SetAttr {
            atime: ts(at),
            mtime: ts(mt),
            ..Default::default()
        };
        return volume_set(task, h, &attr, explicit);
    }
    let m = &writable(task, loc)?;
    if explicit {
        owner_check(task, m)?;
    } else if !task.creds.owns(m.meta().uid) {
        // Setting the current time also suits whoever may write the file
        // (utimensat(2)).
        let st = loc.node().stat()?;
        task.creds.may_access(st.mode, st.uid, st.gid, MAY_WRITE)?;
    }
    m.set_times(at, mt);
    Ok(0)
}

pub fn sys_utimensat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let flags = a[3] as u32;
    if flags & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    let times: Option<[abi::Timespec; 2]> = if a[2] != 0 {
        Some(task.mm().read_obj(a[2])?)
    } else {
        None
    };
    let loc = if a[1] == 0 {
        // futimens(fd): the descriptor itself.
        file_loc(task, a[0])?
    } else {
        target(
            task,
            a[0],
            a[1],
            flags & AT_SYMLINK_NOFOLLOW == 0,
            flags & AT_EMPTY_PATH != 0,
        )?
    };
    set_times(task, &loc, times)
}

fn timevals(task: &Task, addr: u64) -> Result<Option<[abi::Timespec; 2]>, Errno> {
    if addr == 0 {
        return Ok(None);
    }
    let tv: [abi::Timeval; 2] = task.mm().read_obj(addr)?;
    let mut out = [abi::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    }; 2];
    for (o, t) in out.iter_mut().zip(tv) {
        if !(0..1_000_000).contains(&t.tv_usec) {
            return Err(Errno::EINVAL);
        }
        *o = abi::Timespec {
            tv_sec: t.tv_sec,
            tv_nsec: t.tv_usec * 1000,
        };
    }
    Ok(Some(out))
}

pub fn sys_utimes(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let times = timevals(task, a[1])?;
    let loc = target(task, AT_FDCWD as u64, a[0], true, false)?;
    set_times(task, &loc, times)
}

pub fn sys_futimesat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let times = timevals(task, a[2])?;
    let loc = target(task, a[0], a[1], true, false)?;
    set_times(task, &loc, times)
}

pub fn sys_utime(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let times = if a[1] != 0 {
        let t: [i64; 2] = task.mm().read_obj(a[1])?;
        Some([
            abi::Timespec {
                tv_sec: t[0],
                tv_nsec: 0,
            },
            abi::Timespec {
                tv_sec: t[1],
                tv_nsec: 0,
            },
        ])
    } else {
        None
    };
    let loc = target(task, AT_FDCWD as u64, a[0], true, false)?;
    set_times(task, &loc, times)
}

pub fn sys_truncate(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    if (a[1] as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    let loc = target(task, AT_FDCWD as u64, a[0], true, false)?;
    if loc.node().is_dir() {
        return Err(Errno::EISDIR);
    }
    read_only_path(task, &loc)?;
    check_access(task, &loc, 2)?;
    landlocked(task, &loc, access::TRUNCATE)?;
    if let Some(v) = volume(loc.node()) {
        let attr = gofer::client::SetAttr {
            size: Some(a[1]),
            ..Default::default()
        };
        let h = v?;
        // The gofer's open for writing is no guest's: its close is not
        // reported.
        crate::vfs::volume_watch::quietly(&loc, inotify::mask::CLOSE_WRITE, || {
            match cache_of(task, h) {
                Some(cache) => cache.around_host_change(|| volume_set(task, h, &attr, false)),
                None => volume_set(task, h, &attr, false),
            }
        })?;
    } else {
        let m = writable(task, &loc)?;
        m.truncate(a[1])?;
        m.remove_privs(task.capable(cap::FSETID), |g| task.creds.in_group(g));
    }
    inotify::on_object(&loc, inotify::mask::MODIFY);
    Ok(0)
}

pub fn sys_ftruncate(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let file = task.fds().file(a[0] as i32 as i64)?;
    if (a[1] as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    match &file.kind {
        FileKind::Path => return Err(Errno::EBADF),
        FileKind::Impl(_)
            if let Some(m) = file
                .downcast::<MemInode>()
                .filter(|_| file.flags() & abi::O_ACCMODE != 0) =>
        {
            if file.landlock_denies(access::TRUNCATE) {
                return Err(Errno::EACCES);
            }
            m.truncate(a[1])?;
            m.remove_privs(task.capable(cap::FSETID), |g| task.creds.in_group(g));
        }
        FileKind::Host(f) if file.flags() & abi::O_ACCMODE != 0 && !file.is_dir() => {
            if file.landlock_denies(access::TRUNCATE) {
                return Err(Errno::EACCES);
            }
            let cut = || host::ftruncate(f.fd(), a[1]).map_err(Errno::from);
            match task.kernel.fs.page_caches.lookup(f) {
                Some(cache) => cache.around_host_change(cut)?,
                None => cut()?,
            }
        }
        _ => return Err(Errno::EINVAL),
    }
    if let Some(loc) = &file.location {
        inotify::on_object(loc, inotify::mask::MODIFY);
    }
    Ok(0)
}

pub fn sys_umask(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let mut fs = task.fs_ctx();
    let old = fs.umask;
    fs.umask = a[0] as u32 & 0o777;
    Ok(old.into())
}

fn statfs_of(fs: &crate::vfs::FileSystem, node: &Node) -> Result<abi::Statfs, Errno> {
    let mut s = abi::Statfs::new_zeroed();
    let lower;
    let node = match node {
        Node::Ovl(d) => match &d.lower {
            Some(l) => {
                lower = l.clone();
                &lower
            }
            None => node,
        },
        n => n,
    };
    match node {
        Node::Host { h: gref, .. } => {
            let ro = gref.volume() != Some(VolumeKind::ReadWrite);
            let h = fs.statfs_host(node)?;
            s.f_type = h.fs_type as i64;
            s.f_bsize = h.block_size as i64;
            s.f_blocks = h.blocks;
            s.f_bfree = h.blocks_free;
            s.f_bavail = h.blocks_available;
            s.f_files = h.files;
            s.f_ffree = h.files_free;
            s.f_namelen = h.name_max as i64;
            s.f_frsize = h.fragment_size as i64;
            s.f_flags = i64::from(ro); // ST_RDONLY
        }
        Node::Inode(i) => i.statfs(&mut s),
        _ => crate::vfs::synth_statfs(&mut s),
    }
    Ok(s)
}

pub fn sys_statfs(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let path = path_arg(task, a[0])?;
    let loc = task.resolve(&task.cwd(), &path, true)?;
    let mut s = statfs_of(&task.kernel.fs, loc.node())?;
    s.f_flags |= task.kernel.fs.guest_mount_flags(&loc).statfs_bits();
    task.mm().write_obj(a[1], &s).map(|()| 0)
}

pub fn sys_fstatfs(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let file = task.fds().file(a[0] as i32 as i64)?;
    let mut s = match (file.node(), &file.kind) {
        (Some(n), _) => statfs_of(&task.kernel.fs, n)?,
        // A memfd: the internal tmpfs it lives in.
        (None, _) if let Some(m) = file.downcast_arc::<MemInode>() => {
            statfs_of(&task.kernel.fs, &Node::Inode(m))?
        }
        (None, _)
            if file
                .downcast::<crate::fsimpl::mqueue::MqueueFile>()
                .is_some() =>
        {
            statfs_of(
                &task.kernel.fs,
                &task.kernel.fs.mqueue_root().ok_or(Errno::EBADF)?,
            )?
        }
        (None, _) => statfs_of(&task.kernel.fs, &Node::DevDir)?,
    };
    if let Some(l) = &file.location {
        s.f_flags |= task.kernel.fs.guest_mount_flags(l).statfs_bits();
    }
    task.mm().write_obj(a[1], &s).map(|()| 0)
}

// Extended attributes: `user.*` and `trusted.*` (root only) on the
// sandbox's own files (tmpfs, the overlay's upper layer, copied up first),
// every name on a volume through the gofer; the read-only root and the
// synthetic file systems show none.

/// `XATTR_NAME_MAX`.
const XATTR_NAME_MAX: usize = 255;
/// `XATTR_SIZE_MAX`.
const XATTR_SIZE_MAX: usize = 65536;

fn xattr_name(task: &Task, addr: u64) -> Result<Vec<u8>, Errno> {
    let name = task.mm().read_cstr(addr, XATTR_NAME_MAX + 1).map_err(|e| {
        if e == Errno::ENAMETOOLONG {
            Errno::ERANGE
        } else {
            e
        }
    })?;
    if name.is_empty() || name.len() > XATTR_NAME_MAX {
        return Err(Errno::ERANGE);
    }
    Ok(name)
}

/// Whether the caller may see attribute `name` at all, and change it.
fn xattr_allowed(task: &Task, loc: &Location, name: &[u8], write: bool) -> Result<(), Errno> {
    if volume(loc.node()).is_some() {
        // The host's file system decides, as the gofer's owner.
        return Ok(());
    }
    if name.starts_with(b"trusted.") {
        if !task.capable(cap::SYS_ADMIN) {
            return Err(if write { Errno::EPERM } else { Errno::ENODATA });
        }
        return Ok(());
    }
    if !name.starts_with(b"user.") {
        return Err(Errno::EOPNOTSUPP);
    }
    // user.* lives on regular files and directories only.
    let kind = loc.node().stat()?.mode & abi::S_IFMT;
    if kind != abi::S_IFREG && kind != abi::S_IFDIR {
        return Err(if write { Errno::EPERM } else { Errno::ENODATA });
    }
    check_access(task, loc, if write { 2 } else { 4 }).map(drop)
}

/// The sandbox's own inode holding `loc`'s attributes, if it has one (an
/// overlay directory's upper half; none for the read-only lower layer).
fn xattr_inode(task: &Task, loc: &Location) -> Option<Arc<crate::fsimpl::tmpfs::MemInode>> {
    match loc.node() {
        Node::Ovl(d) => task.kernel.fs.existing_upper(d).and_then(downcast),
        n => mem_arc(n),
    }
}

/// Copies `value` (of length `len`) out to a buffer of `size` bytes at
/// `addr`: `size` 0 asks only for the length.
fn xattr_out(task: &Task, value: &[u8], addr: u64, size: u64) -> Result<u64, Errno> {
    if size == 0 {
        return Ok(value.len() as u64);
    }
    if (size as usize) < value.len() {
        return Err(Errno::ERANGE);
    }
    task.mm().copy_out(addr, value)?;
    Ok(value.len() as u64)
}

fn get_xattr(task: &Task, loc: &Location, a: &[u64; 6]) -> Result<u64, Errno> {
    let name = xattr_name(task, a[1])?;
    xattr_allowed(task, loc, &name, false)?;
    let value = if let Some(v) = volume(loc.node()) {
        let h = match v {
            Ok(h) => h,
            Err(_) => match loc.node() {
                Node::Host { h, .. } => h,
                _ => return Err(Errno::ENODATA),
            },
        };
        h.client().get_xattr(h.handle(), &name)?
    } else {
        xattr_inode(task, loc)
            .ok_or(Errno::ENODATA)?
            .get_xattr(&name)?
    };
    xattr_out(task, &value, a[2], a[3])
}

fn list_xattr(task: &Task, loc: &Location, a: &[u64; 6]) -> Result<u64, Errno> {
    let names = match loc.node() {
        Node::Host { h, .. } if h.volume().is_some() => h.client().list_xattr(h.handle())?,
        _ => xattr_inode(task, loc)
            .map(|m| m.list_xattr())
            .unwrap_or_default(),
    };
    let mut out = Vec::new();
    for n in names {
        if n.starts_with(b"trusted.")
            && !task.capable(cap::SYS_ADMIN)
            && volume(loc.node()).is_none()
        {
            continue;
        }
        out.extend_from_slice(&n);
        out.push(0);
    }
    xattr_out(task, &out, a[1], a[2])
}

/// Sets (`value` given) or removes attribute `name` of `loc`.
fn change_xattr(
    task: &Task,
    loc: &Location,
    name: &[u8],
    value: Option<(&[u8], u32)>,
) -> Result<u64, Errno> {
    read_only_path(task, loc)?;
    xattr_allowed(task, loc, name, true)?;
    if let Some(v) = volume(loc.node()) {
        let h = v?;
        match value {
            Some((data, flags)) => h.client().set_xattr(h.handle(), name, data, flags)?,
            None => h.client().remove_xattr(h.handle(), name)?,
        }
    } else {
        let m = match loc.node() {
            Node::Ovl(_) | Node::Host { .. } => writable(task, loc)?,
            n if mem_of(n).is_some() => writable(task, loc)?,
            _ => return Err(Errno::EOPNOTSUPP),
        };
        match value {
            Some((data, flags)) => m.set_xattr(name, data, flags)?,
            None => m.remove_xattr(name)?,
        }
    }
    inotify::on_object(loc, inotify::mask::ATTRIB);
    Ok(0)
}

fn set_xattr(task: &Task, loc: &Location, a: &[u64; 6]) -> Result<u64, Errno> {
    let flags = a[4] as u32;
    if flags & !3 != 0 {
        return Err(Errno::EINVAL);
    }
    let name = xattr_name(task, a[1])?;
    if a[3] as usize > XATTR_SIZE_MAX {
        return Err(Errno::E2BIG);
    }
    let mut value = vec![0u8; a[3] as usize];
    task.mm().copy_in(a[2], &mut value)?;
    change_xattr(task, loc, &name, Some((&value, flags)))
}

fn remove_xattr(task: &Task, loc: &Location, name_addr: u64) -> Result<u64, Errno> {
    let name = xattr_name(task, name_addr)?;
    change_xattr(task, loc, &name, None)
}

pub fn sys_getxattr(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let loc = target(task, AT_FDCWD as u64, a[0], true, false)?;
    get_xattr(task, &loc, a)
}

pub fn sys_lgetxattr(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let loc = target(task, AT_FDCWD as u64, a[0], false, false)?;
    get_xattr(task, &loc, a)
}

pub fn sys_fgetxattr(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let loc = file_loc(task, a[0])?;
    get_xattr(task, &loc, a)
}

pub fn sys_listxattr(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let loc = target(task, AT_FDCWD as u64, a[0], true, false)?;
    list_xattr(task, &loc, a)
}

pub fn sys_llistxattr(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let loc = target(task, AT_FDCWD as u64, a[0], false, false)?;
    list_xattr(task, &loc, a)
}

pub fn sys_flistxattr(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let loc = file_loc(task, a[0])?;
    list_xattr(task, &loc, a)
}

pub fn sys_setxattr(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let loc = target(task, AT_FDCWD as u64, a[0], true, false)?;
    set_xattr(task, &loc, a)
}

pub fn sys_lsetxattr(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let loc = target(task, AT_FDCWD as u64, a[0], false, false)?;
    set_xattr(task, &loc, a)
}

pub fn sys_fsetxattr(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let loc = file_loc(task, a[0])?;
    set_xattr(task, &loc, a)
}

pub fn sys_removexattr(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let loc = target(task, AT_FDCWD as u64, a[0], true, false)?;
    remove_xattr(task, &loc, a[1])
}

pub fn sys_lremovexattr(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let loc = target(task, AT_FDCWD as u64, a[0], false, false)?;
    remove_xattr(task, &loc, a[1])
}

pub fn sys_fremovexattr(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let loc = file_loc(task, a[0])?;
    remove_xattr(task, &loc, a[1])
}

/// An `*xattrat` call's `at_flags` (Linux 6.13): `AT_SYMLINK_NOFOLLOW` and
/// `AT_EMPTY_PATH`, others `EINVAL` (checked before anything is read).
fn xattrat_flags(at_flags: u64) -> Result<(), Errno> {
    if at_flags & !(abi::AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) as u64 != 0 {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// The object of an `*xattrat` call: `dirfd`, `path` and valid `at_flags`.
fn xattrat_target(task: &Task, dirfd: u64, path: u64, at_flags: u64) -> Result<Location, Errno> {
    target(
        task,
        dirfd,
        path,
        at_flags & abi::AT_SYMLINK_NOFOLLOW as u64 == 0,
        at_flags & AT_EMPTY_PATH as u64 != 0,
    )
}

/// `struct xattr_args` of `setxattrat` and `getxattrat` (a longer struct
/// must be zero past it; at most a page).
fn xattr_args(task: &Task, addr: u64, len: u64) -> Result<abi::XattrArgs, Errno> {
    const VER0: usize = size_of::<abi::XattrArgs>();
    if len > crate::PAGE_SIZE {
        return Err(Errno::E2BIG);
    }
    if (len as usize) < VER0 {
        return Err(Errno::EINVAL);
    }
    let mut raw = vec![0u8; len as usize];
    task.mm().copy_in(addr, &mut raw)?;
    if raw[VER0..].iter().any(|&b| b != 0) {
        return Err(Errno::E2BIG);
    }
    <abi::XattrArgs as zerocopy::FromBytes>::read_from_prefix(&raw)
        .map(|(x, _)| x)
        .map_err(|_| Errno::EINVAL)
}

/// `setxattrat(dirfd, path, at_flags, name, args, size)`.
pub fn sys_setxattrat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    xattrat_flags(a[2])?;
    let x = xattr_args(task, a[4], a[5])?;
    let loc = xattrat_target(task, a[0], a[1], a[2])?;
    let (size, flags) = (u64::from(x.size), u64::from(x.flags));
    set_xattr(task, &loc, &[0, a[3], x.value, size, flags, 0])
}

/// `getxattrat(dirfd, path, at_flags, name, args, size)`: `args.flags`
/// must be 0.
pub fn sys_getxattrat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    xattrat_flags(a[2])?;
    let x = xattr_args(task, a[4], a[5])?;
    if x.flags != 0 {
        return Err(Errno::EINVAL);
    }
    let loc = xattrat_target(task, a[0], a[1], a[2])?;
    get_xattr(task, &loc, &[0, a[3], x.value, u64::from(x.size), 0, 0])
}

/// `listxattrat(dirfd, path, at_flags, list, size)`.
pub fn sys_listxattrat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    xattrat_flags(a[2])?;
    let loc = xattrat_target(task, a[0], a[1], a[2])?;
    list_xattr(task, &loc, &[0, a[3], a[4], 0, 0, 0])
}

/// `removexattrat(dirfd, path, at_flags, name)`.
pub fn sys_removexattrat(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    xattrat_flags(a[2])?;
    let loc = xattrat_target(task, a[0], a[1], a[2])?;
    remove_xattr(task, &loc, a[3])
}

/// Writes a core file as Linux's default `core_pattern` ("core") does: a
/// new file `core` in the working directory, mode 0600, an old one
/// unlinked first (never followed if it is a link).
pub fn write_core(task: &mut Task, image: &crate::kernel::coredump::Image) -> Result<(), Errno> {
    let here = AT_FDCWD as u64;
    let _ = unlink_path(task, here, b"core".to_vec(), false);
    let flags = OpenFlags::WRONLY
        | OpenFlags::CREAT
        | OpenFlags::EXCL
        | OpenFlags::NOFOLLOW
        | OpenFlags::LARGEFILE
        | OpenFlags::CLOEXEC;
    let how = crate::vfs::Resolve::default();
    let fd = open_path(
        task,
        here,
        b"core".to_vec(),
        flags.bits(),
        0o600,
        how,
        &mut false,
    )?;
    let file = task.fds().file(fd as i64)?;
    let write_at = |task: &Task, at: u64, mut buf: Vec<u8>| -> Result<(), Errno> {
        let mut done = 0;
        while done < buf.len() {
            let pos = Some(at + done as u64);
            match super::splice::write_from(task, &file, &mut buf[done..], pos)? {
                0 => return Err(Errno::ENOSPC),
                n => done += n,
            }
        }
        Ok(())
    };
    let mut r = write_at(task, 0, image.head.clone());
    let mut end = image.head.len() as u64;
    // Only pages the memory file holds are read (a huge mapping never
    // touched costs nothing), and a SIGKILL ends the dump (Linux's
    // dump_interrupted).
    let mut resident = vec![0u8; 1024];
    for &(off, addr, len) in &image.segments {
        let mut done = 0;
        while done < len && r.is_ok() {
            if task.proc_.state().group_exit.is_some() {
                return Err(Errno::EINTR);
            }
            let pages = (len - done).div_ceil(4096).min(1024) as usize;
            let n = task
                .mm()
                .residency(addr + done, &mut resident[..pages])
                .unwrap_or(0)
                .max(1);
            for (i, &held) in resident[..n].iter().enumerate() {
                let at = done + i as u64 * 4096;
                if held == 0 || at >= len || r.is_err() {
                    continue;
                }
                let mut page = vec![0u8; 4096.min(len - at) as usize];
                // A page the Sentry cannot read (none should be) is zeros.
                let _ = task.mm().peek(addr + at, &mut page);
                if page.iter().any(|&b| b != 0) {
                    end = off + at + page.len() as u64;
                    r = write_at(task, off + at, page);
                }
            }
            done += n as u64 * 4096;
        }
    }
    // After a hole, the last byte, so that the file has its length.
    if r.is_ok() && end < image.size {
        r = write_at(task, image.size - 1, vec![0]);
    }
    let entry = task.fds().remove(fd as i64)?;
    close_releases_locks(task, &entry.file);
    r
}
