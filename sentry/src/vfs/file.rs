//! Open file descriptions and the descriptor table.

use std::fmt;
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use abi::{Errno, OpenFlags, Stat};

use crate::host;
use crate::kernel::wait::{Registration, Sleeper, WaitQueue};
use crate::mm::guestio::{ByteSource, GuestBufs, Stage, IO_CHUNK};
pub use crate::mm::guestmem::{copy_from_slices, copy_from_slices_at, copy_to_slices};
use crate::mm::GuestSlice;
use crate::sync::Locked;
use crate::vfs::{self, Device, DirEntry, HostFile, Location, Node};

/// What an open file description refers to.
pub enum FileKind {
    /// a host regular file or directory, opened read-only
    Host(Arc<HostFile>),
    /// a synthetic device
    Dev(Device),
    /// a synthetic directory (`/dev`, masked directories)
    SynthDir,
    /// one of the caller's standard descriptors, handed to the sandbox
    Stdio(i32),
    /// an `O_PATH` descriptor: only a location
    Path,
    /// a file whose kind implements [`FileImpl`] in its own module
    /// (tmpfs, eventfd, timerfd, signalfd, epoll, inotify, pidfd, message
    /// queue, sockets)
    Impl(Arc<dyn FileImpl>),
}

/// What an open file of one kind does (Linux's `file_operations`): each
/// kind implements it beside the rest of its code, and
/// [`FileDescription`] keeps what every open file has (flags, position,
/// owner, locks) and asks this for the rest.
pub trait FileImpl: std::any::Any + Send + Sync + fmt::Debug {
    /// `read(2)` into guest memory (`at`: `pread`'s offset). The access
    /// mode has been checked.
    fn read(
        &self,
        file: &FileDescription,
        blk: Blocker<'_>,
        bufs: &[GuestSlice],
        at: Option<u64>,
    ) -> Result<u64, Errno> {
        let _ = (file, blk, bufs, at);
        Err(Errno::EINVAL)
    }

    /// `write(2)` from guest memory. The access mode has been checked.
    fn write(
        &self,
        file: &FileDescription,
        blk: Blocker<'_>,
        bufs: &[GuestSlice],
        at: Option<u64>,
    ) -> Result<u64, Errno> {
        let _ = (file, blk, bufs, at);
        Err(Errno::EINVAL)
    }

    /// [`FileImpl::write`] with `O_APPEND` overridden for this write when
    /// `append` is given (`pwritev2`'s `RWF_APPEND`, `RWF_NOAPPEND`);
    /// kinds that do not append ignore it.
    fn write_with(
        &self,
        file: &FileDescription,
        blk: Blocker<'_>,
        bufs: &[GuestSlice],
        at: Option<u64>,
        append: Option<bool>,
    ) -> Result<u64, Errno> {
        let _ = append;
        self.write(file, blk, bufs, at)
    }

    /// Whether it is a directory, where its location does not say (an
    /// `O_TMPFILE` file's location is the directory it was made in).
    fn is_dir(&self) -> Option<bool> {
        None
    }

    /// Identifies it, when the open file is an inode itself (a tmpfs
    /// file) as [`vfs::Node::inode_id`] does: a location holding another
    /// object is not where it is (an `O_TMPFILE` file's location is the
    /// directory it was made in).
    fn inode_id(&self) -> Option<usize> {
        None
    }

    /// Whether it can sit in an epoll set (`EPERM` for regular files and
    /// directories).
    fn pollable(&self) -> bool {
        true
    }

    /// Whether reads and writes of it raise inotify events on its
    /// location (a file of a file system, unlike a pipe or a socket).
    fn inotify(&self) -> bool {
        false
    }

    /// The `poll(2)` bits that hold now (the caller masks them).
    fn poll(&self, caller: &dyn Caller, events: i16, depth: u32) -> i16;

    /// A number that changes whenever readiness may have changed
    /// (edge-triggered epoll).
    fn generation(&self) -> u64 {
        0
    }

    /// Whether `lseek(2)` moves the description's position (else
    /// `ESPIPE`), and `pread`/`pwrite` are allowed.
    fn seekable(&self) -> bool {
        false
    }

    /// Whether `sendfile(2)` and `splice(2)` may read from it (Linux's
    /// `splice_read`): generated files do.
    fn splice_source(&self) -> bool {
        false
    }

    /// `fstat(2)`: by default an anonymous inode with no file type, 0600,
    /// as Linux's `anon_inode` files are.
    fn stat(&self, file: &FileDescription) -> Result<Stat, Errno> {
        let mut st = crate::vfs::pipe_stat_like(0o600);
        st.ino = file as *const FileDescription as u64 >> 4;
        Ok(st)
    }

    /// The lists of descriptions to signal when it becomes readable and
    /// writable (`O_ASYNC`), for kinds that support it.
    fn fasync_lists(&self) -> Option<[Option<&crate::vfs::fasync::Fasync>; 2]> {
        None
    }

    /// What `/proc/[pid]/fd/N` links to; `None`: the path it was opened at.
    fn link_name(&self) -> Option<Vec<u8>> {
        None
    }

    /// `FIONREAD`: the bytes a read would find now; `None` for kinds that
    /// do not answer it (`ENOTTY`).
    fn bytes_readable(&self) -> Option<Result<i32, Errno>> {
        None
    }

    /// Lines of its own in `/proc/[pid]/fdinfo/N`.
    fn fdinfo(&self) -> String {
        String::new()
    }

    /// Adds the queues whose notifications may change what
    /// [`FileImpl::poll`] reports; `true` when some readiness comes with
    /// no notification ([`FileDescription::wait_queues`]). None by
    /// default: always ready, or ready by what wakes the caller itself.
    fn wait_queues(&self, out: &mut Vec<WaitQueue>, depth: u32) -> bool {
        let _ = (out, depth);
        false
    }
}

/// The calling thread as file operations see it: a [`Sleeper`] (its
/// waiter, and whether a signal ends its wait) and what some files ask of
/// their caller. The kernel's threads implement it.
pub trait Caller: Sleeper {
    /// Whether the caller has capability `cap` in its effective set.
    fn capable(&self, cap: u32) -> bool;
    /// Whether `gid` is the caller's file-system group or one of its
    /// supplementary groups.
    fn in_group(&self, gid: u32) -> bool;
    /// The signals pending for the caller, its own and its process's.
    fn signals_pending(&self) -> u64;
    /// Takes up to `max` pending signals of `mask`, lowest number first
    /// (`signalfd` reads).
    fn dequeue_signals(&self, mask: u64, max: usize) -> Vec<abi::SigInfo>;
    /// The caller itself, for the layers above that know what it is
    /// (a terminal's job control).
    fn as_any(&self) -> &dyn std::any::Any;
    /// Raises `SIGPIPE` for the caller (a pipe write that wrote part and
    /// then lost its readers: the count returns, the signal comes too).
    fn raise_sigpipe(&self) {}
}

/// What a blocking file operation needs: the file system, and the caller
/// to sleep as and to notice signals of.
#[derive(Clone, Copy)]
pub struct Blocker<'a> {
    /// the sandbox's file system (page caches of shared mappings)
    pub fs: &'a vfs::FileSystem,
    /// the calling thread
    pub caller: &'a dyn Caller,
    /// `RWF_NOWAIT`: `EAGAIN` where the operation would sleep
    pub nowait: bool,
}

impl fmt::Debug for Blocker<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Blocker").finish_non_exhaustive()
    }
}

impl Blocker<'_> {
    /// Retries `attempt` until it makes progress, sleeping on `queues` in
    /// between: `EAGAIN` when `nonblock`, `ERESTARTSYS` when a signal
    /// arrives first. `ready` must tell, without side effects, whether an
    /// attempt could progress now; `queues` are those of the objects whose
    /// change makes it so.
    pub fn block_on<T>(
        &self,
        queues: &[WaitQueue],
        nonblock: bool,
        attempt: impl FnMut() -> Result<Option<T>, Errno>,
        ready: impl Fn() -> bool,
    ) -> Result<T, Errno> {
        self.block_until(queues, nonblock, None, attempt, ready)
    }

    /// [`Blocker::block_on`] that gives up at `deadline` with `EAGAIN`
    /// (a socket's `SO_RCVTIMEO`/`SO_SNDTIMEO`). A signal during a wait
    /// with a deadline is `EINTR`, never restarted: Linux's
    /// `sock_intr_errno` (signal(7): "interface is a socket with a
    /// timeout").
    pub fn block_until<T>(
        &self,
        queues: &[WaitQueue],
        nonblock: bool,
        deadline: Option<Instant>,
        attempt: impl FnMut() -> Result<Option<T>, Errno>,
        ready: impl Fn() -> bool,
    ) -> Result<T, Errno> {
        let signal = if deadline.is_some() {
            Errno::EINTR
        } else {
            Errno::ERESTARTSYS
        };
        self.block_with(
            queues,
            nonblock,
            deadline,
            Errno::EAGAIN,
            signal,
            attempt,
            ready,
        )
    }

    /// [`Blocker::block_on`] with the errnos of the call: `timed_out` at
    /// `deadline`, `signal` when a signal arrives first.
    #[allow(clippy::too_many_arguments)]
    pub fn block_with<T>(
        &self,
        queues: &[WaitQueue],
        nonblock: bool,
        deadline: Option<Instant>,
        timed_out: Errno,
        signal: Errno,
        mut attempt: impl FnMut() -> Result<Option<T>, Errno>,
        ready: impl Fn() -> bool,
    ) -> Result<T, Errno> {
        let waiter = self.caller.waiter();
        // Registered at the first wait, so a call that need not wait
        // touches no queue.
        let mut registered = None;
        loop {
            if let Some(v) = attempt()? {
                return Ok(v);
            }
            if nonblock || self.nowait {
                return Err(Errno::EAGAIN);
            }
            // Checked before `ready`, which may say yes to an attempt
            // that still cannot progress (room for a smaller message).
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(timed_out);
            }
            if registered.is_none() {
                registered = Some(Registration::new(waiter, queues));
            }
            waiter.prepare();
            if ready() {
                continue;
            }
            if self.caller.interrupted() {
                return Err(signal);
            }
            waiter.sleep(deadline);
        }
    }

    /// Sleeps once on `queues` unless `ready` holds: `Err(signal)` when a
    /// signal is pending, `Ok(false)` once `deadline` has passed, else
    /// `Ok(true)` (woken, or ready: the caller looks again).
    pub fn wait_once(
        &self,
        queues: &[WaitQueue],
        deadline: Option<Instant>,
        signal: Errno,
        ready: impl Fn() -> bool,
    ) -> Result<bool, Errno> {
        let waiter = self.caller.waiter();
        let _registered = Registration::new(waiter, queues);
        waiter.prepare();
        if ready() {
            return Ok(true);
        }
        if self.caller.interrupted() {
            return Err(signal);
        }
        if self.nowait {
            return Err(Errno::EAGAIN);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(false);
        }
        waiter.sleep(deadline);
        Ok(true)
    }
}

/// An open file description, shared by `dup`ed descriptors.
pub struct FileDescription {
    /// what is open
    pub kind: FileKind,
    /// where it was opened
    pub location: Option<Location>,
    /// status flags (`F_GETFL`)
    pub flags: Mutex<u32>,
    /// file position
    pub pos: Mutex<u64>,
    dir: Mutex<Option<Vec<DirEntry>>>,
    /// the lock table and file this description took flock/OFD locks in,
    /// so that its last close drops them
    locks: Mutex<Option<(Arc<crate::vfs::lock::LockTable>, crate::vfs::lock::FileKey)>>,
    /// who gets its I/O signals (`F_SETOWN`, `F_SETSIG`)
    owner: Mutex<crate::vfs::fasync::Owner>,
    /// the Landlock rights its opener's domain denied it, checked later by
    /// `ftruncate` and `ioctl` whoever holds it (landlock(7))
    landlock_denied: std::sync::atomic::AtomicU64,
}

impl Drop for FileDescription {
    fn drop(&mut self) {
        if crate::vfs::inotify::hub().active() && self.flags() & OpenFlags::PATH.bits() == 0 {
            self.notify(if self.writable() {
                crate::vfs::inotify::mask::CLOSE_WRITE
            } else {
                crate::vfs::inotify::mask::CLOSE_NOWRITE
            });
        }
        let taken = self
            .locks
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some((table, key)) = taken {
            table.release_description(key, self.lock_id());
        }
        // A standard descriptor handed in from outside (`exec`) belongs to
        // its description; the Sentry's own 0-2 stay open.
        if let FileKind::Stdio(fd) = self.kind {
            if fd > 2 {
                // SAFETY: `fd` was given to this description alone and is
                // closed once, with it.
                drop(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) });
            }
        }
    }
}

impl fmt::Debug for FileDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.location.as_ref().map(Location::path);
        f.debug_struct("FileDescription")
            .field("path", &path)
            .finish()
    }
}

impl FileDescription {
    /// A new description of a file whose kind implements [`FileImpl`].
    pub fn of_impl(file: Arc<dyn FileImpl>, location: Option<Location>, flags: u32) -> Arc<Self> {
        Self::new(FileKind::Impl(file), location, flags)
    }

    /// The open file as its kind's own type, when it is one of `T`.
    pub fn downcast<T: FileImpl>(&self) -> Option<&T> {
        match &self.kind {
            FileKind::Impl(i) => (&**i as &dyn std::any::Any).downcast_ref(),
            _ => None,
        }
    }

    /// The open file's own kind, when it implements [`FileImpl`].
    pub fn downcast_impl(&self) -> Option<&dyn FileImpl> {
        match &self.kind {
            FileKind::Impl(i) => Some(&**i),
            _ => None,
        }
    }

    /// [`FileDescription::downcast`], shared.
    pub fn downcast_arc<T: FileImpl>(&self) -> Option<Arc<T>> {
        match &self.kind {
            FileKind::Impl(i) => (i.clone() as Arc<dyn std::any::Any + Send + Sync>)
                .downcast()
                .ok(),
            _ => None,
        }
    }

    /// A new description.
    pub fn new(kind: FileKind, location: Option<Location>, flags: u32) -> Arc<Self> {
        Arc::new(FileDescription {
            kind,
            location,
            flags: Mutex::new(flags),
            pos: Mutex::new(0),
            dir: Mutex::new(None),
            locks: Mutex::new(None),
            owner: Mutex::new(crate::vfs::fasync::Owner::default()),
            landlock_denied: Default::default(),
        })
    }

    /// Whether its opener's Landlock domain denied it `right`.
    pub fn landlock_denies(&self, right: u64) -> bool {
        self.landlock_denied
            .load(std::sync::atomic::Ordering::Relaxed)
            & right
            != 0
    }

    /// Records the Landlock rights its opener's domain denied it.
    pub fn set_landlock_denied(&self, rights: u64) {
        self.landlock_denied
            .store(rights, std::sync::atomic::Ordering::Relaxed);
    }

    /// The owner of its I/O signals.
    pub fn owner(&self) -> crate::vfs::fasync::Owner {
        *self.owner.locked()
    }

    /// Sets the owner of its I/O signals; with `only_if_none`, only when
    /// there is none yet (`__f_setown()` without `force`).
    pub fn set_owner(&self, kind: crate::vfs::fasync::OwnerKind, id: i32, only_if_none: bool) {
        let mut o = self.owner.locked();
        if only_if_none && o.id != 0 {
            return;
        }
        o.kind = kind;
        o.id = id;
    }

    /// Sets the signal of `F_SETSIG`.
    pub fn set_sigio_signal(&self, sig: i32) {
        self.owner.locked().signum = sig;
    }

    /// The lists of descriptions to signal when this object becomes
    /// readable and writable, for the kinds that support `O_ASYNC`
    /// (`None`: Linux has no `fasync` operation for it, or the sandbox
    /// does not signal it yet).
    pub fn fasync_lists(&self) -> Option<[Option<&crate::vfs::fasync::Fasync>; 2]> {
        match &self.kind {
            FileKind::Impl(i) => i.fasync_lists(),
            _ => None,
        }
    }

    /// This description as a lock owner (its address: unique while it
    /// lives, and its locks go when it does).
    pub fn lock_id(&self) -> usize {
        self as *const Self as usize
    }

    /// Remembers that this description holds locks of `key` in `table`.
    pub fn note_locks(
        &self,
        table: &Arc<crate::vfs::lock::LockTable>,
        key: crate::vfs::lock::FileKey,
    ) {
        let mut l = self.locks.locked();
        if l.is_none() {
            *l = Some((table.clone(), key));
        }
    }

    /// Whether reads are allowed (lock type checks).
    pub fn can_read(&self) -> bool {
        self.readable()
    }

    /// Whether writes are allowed (lock type checks).
    pub fn can_write(&self) -> bool {
        self.writable()
    }

    /// The status flags.
    pub fn flags(&self) -> u32 {
        *self.flags.locked()
    }

    fn readable(&self) -> bool {
        let f = self.flags();
        f & abi::O_ACCMODE != OpenFlags::WRONLY.bits() && f & OpenFlags::PATH.bits() == 0
    }

    /// Whether the description was opened for writing.
    pub fn writable(&self) -> bool {
        let f = self.flags();
        f & abi::O_ACCMODE != 0 && f & OpenFlags::PATH.bits() == 0
    }

    /// One of the Sentry's standard descriptors, borrowed.
    pub fn stdio_borrow(fd: i32) -> BorrowedFd<'static> {
        // SAFETY: the standard descriptors stay open for the Sentry's whole
        // life; the Sentry never closes them.
        unsafe { host::borrow_raw(fd) }
    }

    /// Whether `O_NONBLOCK` is set.
    pub fn nonblocking(&self) -> bool {
        self.flags() & OpenFlags::NONBLOCK.bits() != 0
    }

    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        match &self.kind {
            FileKind::Impl(i) if let Some(dir) = i.is_dir() => dir,
            _ => self.location.as_ref().is_some_and(|l| l.node().is_dir()),
        }
    }

    /// Reads into guest memory at the description's position (`pos` given:
    /// `pread`, position unchanged).
    pub fn read(
        &self,
        blk: Blocker<'_>,
        bufs: &[GuestSlice],
        at: Option<u64>,
    ) -> Result<u64, Errno> {
        let n = self.read_inner(blk, bufs, at)?;
        if n > 0 {
            self.notify(crate::vfs::inotify::mask::ACCESS);
        }
        Ok(n)
    }

    /// inotify: raises `m` on the file this is, if it is one.
    fn notify(&self, m: u32) {
        let of_file = match &self.kind {
            FileKind::Host(_) => true,
            FileKind::Impl(i) => i.inotify(),
            _ => false,
        };
        if let (true, Some(loc)) = (of_file, &self.location) {
            crate::vfs::inotify::on_object(loc, m);
        }
    }

    fn read_inner(
        &self,
        blk: Blocker<'_>,
        bufs: &[GuestSlice],
        at: Option<u64>,
    ) -> Result<u64, Errno> {
        if !self.readable() {
            return Err(Errno::EBADF);
        }
        if let FileKind::Impl(i) = &self.kind {
            return i.read(self, blk, bufs, at);
        }
        if let FileKind::Stdio(fd) = self.kind {
            if at.is_none() && !self.stdio_ready(fd, blk)? {
                return Err(Errno::EAGAIN);
            }
        }
        if let FileKind::Host(f) = &self.kind {
            // A volume file that is mapped shared: what the mappings hold
            // counts, written back or not.
            if let Some(cache) = blk.fs.page_caches.lookup(f) {
                if self.is_dir() {
                    return Err(Errno::EISDIR);
                }
                let mut pos_guard = self.pos.locked();
                let pos = at.unwrap_or(*pos_guard);
                let n = cache.read(f, pos, &GuestBufs::new(bufs))? as u64;
                if at.is_none() {
                    *pos_guard = pos + n;
                }
                return Ok(n);
            }
        }
        let mut pos_guard = self.pos.locked();
        let mut pos = at.unwrap_or(*pos_guard);
        let mut total = 0u64;
        for b in bufs {
            let n = match &self.kind {
                FileKind::Host(f) => {
                    if self.is_dir() {
                        return Err(Errno::EISDIR);
                    }
                    b.pread_from(f.fd(), pos)?
                }
                FileKind::Dev(Device::Null) => 0,
                // Never opened as such: opening them yields a pty end, or
                // the GPU's device file.
                FileKind::Dev(Device::Tty | Device::Ptmx | Device::Nvidia(_)) => {
                    return Err(Errno::EIO)
                }
                FileKind::Dev(Device::Zero | Device::Full) => {
                    b.zero();
                    b.len()
                }
                FileKind::Dev(Device::Random | Device::Urandom) => {
                    fill_random(&GuestBufs::new(std::slice::from_ref(b)));
                    b.len()
                }
                FileKind::Stdio(fd) => {
                    if at.is_some() {
                        b.pread_from(Self::stdio_borrow(*fd), pos)?
                    } else {
                        b.read_from(Self::stdio_borrow(*fd))?
                    }
                }
                FileKind::SynthDir => return Err(Errno::EISDIR),
                FileKind::Path => return Err(Errno::EBADF),
                FileKind::Impl(_) => return Err(Errno::EINVAL),
            };
            total += n as u64;
            pos += n as u64;
            if n < b.len() {
                break;
            }
        }
        if at.is_none() && matches!(self.kind, FileKind::Host(_)) {
            *pos_guard = pos;
        }
        Ok(total)
    }

    /// Writes guest memory to the file.
    pub fn write(
        &self,
        blk: Blocker<'_>,
        bufs: &[GuestSlice],
        at: Option<u64>,
    ) -> Result<u64, Errno> {
        self.write_with(blk, bufs, at, None)
    }

    /// [`Self::write`] with `O_APPEND` overridden for this write when
    /// `append` is given (`pwritev2`'s `RWF_APPEND`, `RWF_NOAPPEND`).
    pub fn write_with(
        &self,
        blk: Blocker<'_>,
        bufs: &[GuestSlice],
        at: Option<u64>,
        append: Option<bool>,
    ) -> Result<u64, Errno> {
        let n = self.write_inner(blk, bufs, at, append)?;
        if n > 0 {
            self.notify(crate::vfs::inotify::mask::MODIFY);
        }
        Ok(n)
    }

    fn write_inner(
        &self,
        blk: Blocker<'_>,
        bufs: &[GuestSlice],
        at: Option<u64>,
        append: Option<bool>,
    ) -> Result<u64, Errno> {
        if !self.writable() {
            return Err(Errno::EBADF);
        }
        if let FileKind::Impl(i) = &self.kind {
            return i.write_with(self, blk, bufs, at, append);
        }
        if let FileKind::Host(f) = &self.kind {
            // A volume's file, opened for writing by the gofer.
            return self.write_host(blk, f, bufs, at, append == Some(true));
        }
        let mut total = 0u64;
        for b in bufs {
            let n = match &self.kind {
                FileKind::Dev(Device::Full) => return Err(Errno::ENOSPC),
                FileKind::Dev(_) => b.len(),
                FileKind::Stdio(fd) => {
                    let host_fd = Self::stdio_borrow(*fd);
                    let r = match at {
                        Some(pos) => b.pwrite_to(host_fd, pos + total),
                        None => b.write_to(host_fd),
                    };
                    match r {
                        Ok(n) => n,
                        Err(e) if total > 0 => {
                            tracing::debug!("short write: {e}");
                            break;
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                _ => return Err(Errno::EBADF),
            };
            total += n as u64;
            if n < b.len() {
                break;
            }
        }
        Ok(total)
    }

    fn write_host(
        &self,
        blk: Blocker<'_>,
        f: &crate::vfs::HostFile,
        bufs: &[GuestSlice],
        at: Option<u64>,
        rwf_append: bool,
    ) -> Result<u64, Errno> {
        if self.is_dir() {
            return Err(Errno::EISDIR);
        }
        // The host descriptor carries O_APPEND too: its writes land at the
        // end whatever the offset, as the guest's would.
        let o_append = self.flags() & OpenFlags::APPEND.bits() != 0;
        let append = o_append || rwf_append;
        let mut pos = self.pos.locked();
        if let Some(cache) = blk.fs.page_caches.lookup(f) {
            // Mapped shared: the mappings see the write too.
            let from = if append {
                None
            } else {
                Some(at.unwrap_or(*pos))
            };
            let (n, end) = cache.write(f, from, &GuestBufs::new(bufs))?;
            if at.is_none() {
                *pos = end;
            }
            return Ok(n);
        }
        let mut off = match at {
            // RWF_APPEND without O_APPEND on the host descriptor: at the
            // end as the host sees it now.
            _ if rwf_append && !o_append => host::fstat(f.fd())?.st_size as u64,
            Some(at) => at,
            None => *pos,
        };
        let mut total = 0u64;
        for b in bufs {
            let r = b.pwrite_to(f.fd(), off);
            let n = match r {
                Ok(n) => n,
                Err(e) if total > 0 => {
                    tracing::debug!("short write: {e}");
                    break;
                }
                Err(e) => return Err(e.into()),
            };
            total += n as u64;
            off += n as u64;
            if n < b.len() {
                break;
            }
        }
        if at.is_none() {
            *pos = if append {
                host::fstat(f.fd())?.st_size as u64
            } else {
                off
            };
        }
        Ok(total)
    }

    /// Readiness for `poll`/`epoll`: the subset of `events` (plus errors
    /// and hang-ups, which are always reported) that holds now.
    pub fn poll_ready(&self, caller: &dyn Caller, events: i16, depth: u32) -> i16 {
        use abi::poll::*;
        let always = POLLERR | POLLHUP;
        let ready = match &self.kind {
            FileKind::Impl(i) => i.poll(caller, events, depth),
            FileKind::Stdio(fd) => host::poll_events(Self::stdio_borrow(*fd), events),
            FileKind::Path => POLLNVAL,
            FileKind::Host(_) | FileKind::Dev(_) | FileKind::SynthDir => {
                POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM
            }
        };
        ready & (events | always | POLLNVAL)
    }

    /// Adds the queues whose notifications may change what
    /// [`FileDescription::poll_ready`] reports: a `poll`, `select` or
    /// `epoll_wait` sleeps on them. Kinds that are always ready, or whose
    /// readiness is the caller's own (a signalfd: a signal wakes the
    /// thread itself), have none. `true` when the readiness of some of it
    /// comes with no notification (the caller's stdio): the waiter must
    /// then look again now and then.
    pub fn wait_queues(&self, out: &mut Vec<WaitQueue>, depth: u32) -> bool {
        match &self.kind {
            FileKind::Impl(i) => return i.wait_queues(out, depth),
            FileKind::Stdio(_) => return true,
            FileKind::Host(_) | FileKind::Dev(_) | FileKind::SynthDir | FileKind::Path => {}
        }
        false
    }

    /// A number that changes whenever the object's readiness may have
    /// changed (edge-triggered epoll).
    pub fn event_generation(&self) -> u64 {
        match &self.kind {
            FileKind::Impl(i) => i.generation(),
            _ => 0,
        }
    }

    /// Whether the object can sit in an epoll set (regular files and
    /// directories cannot: `EPERM`).
    pub fn pollable(&self) -> bool {
        match &self.kind {
            FileKind::Host(_) | FileKind::SynthDir | FileKind::Path => false,
            FileKind::Impl(i) => i.pollable(),
            _ => true,
        }
    }

    /// Waits until the caller's standard descriptor `fd` has input, waking
    /// up now and then to notice signals (a host read cannot be
    /// interrupted from here). `false` for a non-blocking descriptor that
    /// has nothing.
    fn stdio_ready(&self, fd: i32, blk: Blocker<'_>) -> Result<bool, Errno> {
        let nonblock = self.nonblocking();
        loop {
            match host::poll_in(Self::stdio_borrow(fd), if nonblock { 0 } else { 50 }) {
                Ok(true) => return Ok(true),
                Ok(false) if nonblock => return Ok(false),
                Ok(false) => {}
                Err(e) => return Err(e.into()),
            }
            if blk.caller.interrupted() {
                return Err(Errno::ERESTARTSYS);
            }
        }
    }

    /// `lseek(2)`.
    pub fn seek(&self, off: i64, whence: u32) -> Result<u64, Errno> {
        match &self.kind {
            FileKind::Impl(i) if !i.seekable() => Err(Errno::ESPIPE),
            FileKind::Stdio(fd) => Ok(host::lseek(Self::stdio_borrow(*fd), off, whence as i32)?),
            FileKind::Dev(_) => Ok(0),
            FileKind::Path => Err(Errno::EBADF),
            FileKind::Host(_) | FileKind::SynthDir | FileKind::Impl(_) => {
                let mut pos = self.pos.locked();
                let base: i64 = match whence {
                    0 => 0,
                    1 => *pos as i64,
                    2 => {
                        if self.is_dir() {
                            return Err(Errno::EINVAL);
                        }
                        self.stat()?.size
                    }
                    _ => return Err(Errno::EINVAL),
                };
                let new = base.checked_add(off).ok_or(Errno::EOVERFLOW)?;
                if new < 0 {
                    return Err(Errno::EINVAL);
                }
                *pos = new as u64;
                if self.is_dir() && new == 0 {
                    *self.dir.locked() = None;
                }
                Ok(new as u64)
            }
        }
    }

    /// `fstat(2)`.
    pub fn stat(&self) -> Result<Stat, Errno> {
        match (&self.kind, &self.location) {
            (FileKind::Impl(i), _) => i.stat(self),
            (FileKind::Stdio(fd), _) => {
                Ok(host::to_abi_stat(&host::fstat(Self::stdio_borrow(*fd))?))
            }
            (_, Some(l)) => l.node().stat(),
            _ => Err(Errno::EBADF),
        }
    }

    /// The directory snapshot, taken on first use.
    pub fn dir_entries(
        &self,
        fs: &crate::vfs::FileSystem,
    ) -> Result<std::sync::MutexGuard<'_, Option<Vec<DirEntry>>>, Errno> {
        let loc = self.location.as_ref().ok_or(Errno::ENOTDIR)?;
        if !loc.node().is_dir() {
            return Err(Errno::ENOTDIR);
        }
        if matches!(self.kind, FileKind::Path) {
            return Err(Errno::EBADF);
        }
        let mut d = self.dir.locked();
        if d.is_none() {
            let host = match &self.kind {
                FileKind::Host(h) => Some(h.as_ref()),
                _ => None,
            };
            *d = Some(match loc.node() {
                vfs::Node::Ovl(o) => fs.ovl_list(o)?,
                vfs::Node::PtsDir => fs.pts_list(),
                vfs::Node::DevDir => fs.dev_list(),
                n @ vfs::Node::Host { .. } => fs.list_host(n, host.ok_or(Errno::EBADF)?)?,
                n => vfs::list_dir(n, host)?,
            });
        }
        Ok(d)
    }

    /// The host descriptor used by `ioctl` pass-through for terminals.
    pub fn stdio(&self) -> Option<BorrowedFd<'static>> {
        match self.kind {
            FileKind::Stdio(fd) => Some(Self::stdio_borrow(fd)),
            _ => None,
        }
    }

    /// The host file behind a file-backed `mmap`.
    pub fn host_file(&self) -> Option<&Arc<HostFile>> {
        match &self.kind {
            FileKind::Host(h) if !self.is_dir() => Some(h),
            _ => None,
        }
    }

    /// Whether the node is a synthetic device.
    pub fn node(&self) -> Option<&Node> {
        self.location.as_ref().map(Location::node)
    }
}

/// One descriptor slot.
#[derive(Clone, Debug)]
pub struct FdEntry {
    /// the description
    pub file: Arc<FileDescription>,
    /// `FD_CLOEXEC`
    pub cloexec: bool,
}

/// A descriptor table.
#[derive(Clone, Debug, Default)]
pub struct FdTable {
    slots: Vec<Option<FdEntry>>,
}

impl FdTable {
    /// The entry for `fd`.
    pub fn get(&self, fd: i64) -> Result<&FdEntry, Errno> {
        usize::try_from(fd)
            .ok()
            .and_then(|i| self.slots.get(i))
            .and_then(Option::as_ref)
            .ok_or(Errno::EBADF)
    }

    /// Mutable entry for `fd`.
    pub fn get_mut(&mut self, fd: i64) -> Result<&mut FdEntry, Errno> {
        usize::try_from(fd)
            .ok()
            .and_then(|i| self.slots.get_mut(i))
            .and_then(Option::as_mut)
            .ok_or(Errno::EBADF)
    }

    /// The description for `fd`.
    pub fn file(&self, fd: i64) -> Result<Arc<FileDescription>, Errno> {
        self.get(fd).map(|e| e.file.clone())
    }

    /// Installs at the lowest free slot `>= min`, below `limit` (`EMFILE`).
    pub fn insert_from(&mut self, min: usize, entry: FdEntry, limit: u64) -> Result<i64, Errno> {
        let mut i = min;
        while i < self.slots.len() && self.slots[i].is_some() {
            i += 1;
        }
        if i as u64 >= limit {
            return Err(Errno::EMFILE);
        }
        if i >= self.slots.len() {
            self.slots.resize(i + 1, None);
        }
        self.slots[i] = Some(entry);
        Ok(i as i64)
    }

    /// Installs at exactly `fd`, returning what was there.
    pub fn insert_at(
        &mut self,
        fd: usize,
        entry: FdEntry,
        limit: u64,
    ) -> Result<Option<FdEntry>, Errno> {
        if fd as u64 >= limit {
            return Err(Errno::EBADF);
        }
        if fd >= self.slots.len() {
            self.slots.resize(fd + 1, None);
        }
        Ok(self.slots[fd].replace(entry))
    }

    /// Removes `fd`.
    pub fn remove(&mut self, fd: i64) -> Result<FdEntry, Errno> {
        usize::try_from(fd)
            .ok()
            .and_then(|i| self.slots.get_mut(i))
            .and_then(Option::take)
            .ok_or(Errno::EBADF)
    }

    /// `close_range(2)`: closes (or, with `cloexec`, marks close-on-exec)
    /// every descriptor in `[first, last]`.
    pub fn close_range(&mut self, first: usize, last: usize, cloexec: bool) {
        let end = last.saturating_add(1).min(self.slots.len());
        for s in self.slots.iter_mut().take(end).skip(first) {
            if cloexec {
                if let Some(e) = s {
                    e.cloexec = true;
                }
            } else {
                *s = None;
            }
        }
    }

    /// Highest open descriptor plus one.
    pub fn len(&self) -> usize {
        self.slots
            .iter()
            .rposition(Option::is_some)
            .map_or(0, |i| i + 1)
    }

    /// Whether no descriptor is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The open descriptor numbers.
    pub fn open_fds(&self) -> Vec<usize> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .map(|(i, _)| i)
            .collect()
    }

    /// Closes every close-on-exec descriptor (`execve`).
    pub fn close_on_exec(&mut self) {
        for s in &mut self.slots {
            if s.as_ref().is_some_and(|e| e.cloexec) {
                *s = None;
            }
        }
    }
}

/// Fills guest buffers with random bytes, [`IO_CHUNK`] at a time.
pub fn fill_random(dst: &GuestBufs<'_>) {
    let mut stage = Stage::new();
    let mut done = 0;
    while done < dst.len() {
        let piece = stage.space(IO_CHUNK.min(dst.len() - done));
        host::getrandom(piece);
        done += dst.write_at(done, piece);
    }
}

/// The length of a write from `bufs`, and its first `max` bytes (a /proc
/// file that parses what it is given).
pub fn gather(bufs: &[GuestSlice], max: usize) -> (usize, Vec<u8>) {
    let len: usize = bufs.iter().map(GuestSlice::len).sum();
    let mut data = vec![0u8; len.min(max)];
    let n = copy_from_slices(bufs, &mut data);
    data.truncate(n);
    (len, data)
}
