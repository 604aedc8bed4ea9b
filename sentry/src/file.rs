//! Open file descriptions and the descriptor table.

use std::fmt;
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex};

use abi::{Errno, OpenFlags, Stat};

use crate::host;
use crate::kernel::EventBus;
use crate::mm::GuestSlice;
use crate::pipe::{Attempt, PipeEnd};
use crate::task::Process;
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
    /// one end of a pipe
    Pipe(PipeEnd),
}

/// What a blocking file operation needs to sleep and to notice signals.
#[derive(Clone, Copy, Debug)]
pub struct Blocker<'a> {
    /// the sandbox's wait point
    pub bus: &'a EventBus,
    /// the calling process (its pending signals interrupt the wait)
    pub proc_: &'a Process,
}

impl Blocker<'_> {
    /// Retries `attempt` until it makes progress: `EAGAIN` when
    /// `nonblock`, `ERESTARTSYS` when a signal arrives first. `ready` must
    /// tell, without side effects, whether an attempt could progress now.
    pub fn block_on<T>(
        &self,
        nonblock: bool,
        mut attempt: impl FnMut() -> Result<Option<T>, Errno>,
        ready: impl Fn() -> bool,
    ) -> Result<T, Errno> {
        loop {
            if let Some(v) = attempt()? {
                return Ok(v);
            }
            if nonblock {
                return Err(Errno::EAGAIN);
            }
            let g = self.bus.lock();
            if ready() {
                continue;
            }
            if self.proc_.interrupted() {
                return Err(Errno::ERESTARTSYS);
            }
            drop(self.bus.wait(g, None));
        }
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
}

impl fmt::Debug for FileDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.location.as_ref().map(Location::path);
        f.debug_struct("FileDescription")
            .field("path", &path)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl FileDescription {
    /// A new description.
    pub fn new(kind: FileKind, location: Option<Location>, flags: u32) -> Arc<Self> {
        Arc::new(FileDescription {
            kind,
            location,
            flags: Mutex::new(flags),
            pos: Mutex::new(0),
            dir: Mutex::new(None),
        })
    }

    /// The status flags.
    pub fn flags(&self) -> u32 {
        *lock(&self.flags)
    }

    fn readable(&self) -> bool {
        let f = self.flags();
        f & abi::O_ACCMODE != OpenFlags::WRONLY.bits() && f & OpenFlags::PATH.bits() == 0
    }

    fn writable(&self) -> bool {
        let f = self.flags();
        f & abi::O_ACCMODE != 0 && f & OpenFlags::PATH.bits() == 0
    }

    /// One of the Sentry's standard descriptors, borrowed.
    pub fn stdio_borrow(fd: i32) -> BorrowedFd<'static> {
        // SAFETY: the standard descriptors stay open for the Sentry's whole
        // life; the Sentry never closes them.
        unsafe { host::borrow_raw(fd) }
    }

    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        self.location.as_ref().is_some_and(|l| l.node().is_dir())
    }

    /// Reads into guest memory at the description's position (`pos` given:
    /// `pread`, position unchanged).
    pub fn read(
        &self,
        blk: Blocker<'_>,
        bufs: &[GuestSlice],
        at: Option<u64>,
    ) -> Result<u64, Errno> {
        if !self.readable() {
            return Err(Errno::EBADF);
        }
        if let FileKind::Pipe(end) = &self.kind {
            if at.is_some() {
                return Err(Errno::ESPIPE);
            }
            if !end.reader {
                return Err(Errno::EBADF);
            }
            let nonblock = self.flags() & OpenFlags::NONBLOCK.bits() != 0;
            return blk.block_on(
                nonblock,
                || match end.pipe.try_read(bufs)? {
                    Attempt::Done(n) => Ok(Some(n)),
                    Attempt::WouldBlock => Ok(None),
                },
                || {
                    let (readable, _, hup, _) = end.pipe.poll_state();
                    readable || hup
                },
            );
        }
        if let FileKind::Stdio(fd) = self.kind {
            if at.is_none() && !self.stdio_ready(fd, blk)? {
                return Err(Errno::EAGAIN);
            }
        }
        let mut pos_guard = lock(&self.pos);
        let mut pos = at.unwrap_or(*pos_guard);
        let mut total = 0u64;
        for b in bufs {
            let n = match &self.kind {
                FileKind::Host(f) => {
                    if self.is_dir() {
                        return Err(Errno::EISDIR);
                    }
                    // SAFETY: guest slices point into the memory file mapping,
                    // valid for `len` bytes.
                    unsafe { host::pread_raw(f.fd(), b.ptr, b.len, pos) }?
                }
                FileKind::Dev(Device::Null) => 0,
                FileKind::Dev(Device::Zero | Device::Full) => {
                    // SAFETY: as above.
                    unsafe { std::ptr::write_bytes(b.ptr, 0, b.len) };
                    b.len
                }
                FileKind::Dev(Device::Random | Device::Urandom) => {
                    let mut tmp = vec![0u8; b.len];
                    host::getrandom(&mut tmp);
                    // SAFETY: as above; `tmp` is Sentry memory.
                    unsafe { std::ptr::copy_nonoverlapping(tmp.as_ptr(), b.ptr, b.len) };
                    b.len
                }
                FileKind::Stdio(fd) => {
                    if at.is_some() {
                        // SAFETY: as above.
                        unsafe { host::pread_raw(Self::stdio_borrow(*fd), b.ptr, b.len, pos) }?
                    } else {
                        // SAFETY: as above.
                        unsafe { host::read_raw(Self::stdio_borrow(*fd), b.ptr, b.len) }?
                    }
                }
                FileKind::SynthDir => return Err(Errno::EISDIR),
                FileKind::Path | FileKind::Pipe(_) => return Err(Errno::EBADF),
            };
            total += n as u64;
            pos += n as u64;
            if n < b.len {
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
        if !self.writable() {
            return Err(Errno::EBADF);
        }
        if let FileKind::Pipe(end) = &self.kind {
            if at.is_some() {
                return Err(Errno::ESPIPE);
            }
            let total_len: u64 = bufs.iter().map(|b| b.len as u64).sum();
            let nonblock = self.flags() & OpenFlags::NONBLOCK.bits() != 0;
            let mut done = 0u64;
            // Linux writes as much as fits, sleeping until everything is
            // written; a signal after partial progress returns the count.
            while done < total_len {
                let r = blk.block_on(
                    nonblock,
                    || match end.pipe.try_write(bufs, done)? {
                        Attempt::Done(n) => Ok(Some(n)),
                        Attempt::WouldBlock => Ok(None),
                    },
                    || {
                        let (_, writable, _, no_readers) = end.pipe.poll_state();
                        writable || no_readers
                    },
                );
                match r {
                    Ok(n) => done += n,
                    Err(e) if done > 0 && (e == Errno::EAGAIN || e.is_restart()) => break,
                    Err(e) => return Err(e),
                }
            }
            return Ok(done);
        }
        let mut total = 0u64;
        for b in bufs {
            let n = match &self.kind {
                FileKind::Dev(Device::Full) => return Err(Errno::ENOSPC),
                FileKind::Dev(_) => b.len,
                FileKind::Stdio(fd) => {
                    let host_fd = Self::stdio_borrow(*fd);
                    // SAFETY: guest slices are valid for `len` bytes.
                    let r = unsafe {
                        match at {
                            Some(pos) => host::pwrite_raw(host_fd, b.ptr, b.len, pos + total),
                            None => host::write_raw(host_fd, b.ptr, b.len),
                        }
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
            if n < b.len {
                break;
            }
        }
        Ok(total)
    }

    /// Waits until the caller's standard descriptor `fd` has input, waking
    /// up now and then to notice signals (a host read cannot be
    /// interrupted from here). `false` for a non-blocking descriptor that
    /// has nothing.
    fn stdio_ready(&self, fd: i32, blk: Blocker<'_>) -> Result<bool, Errno> {
        let nonblock = self.flags() & OpenFlags::NONBLOCK.bits() != 0;
        loop {
            match host::poll_in(Self::stdio_borrow(fd), if nonblock { 0 } else { 50 }) {
                Ok(true) => return Ok(true),
                Ok(false) if nonblock => return Ok(false),
                Ok(false) => {}
                Err(e) => return Err(e.into()),
            }
            if blk.proc_.interrupted() {
                return Err(Errno::ERESTARTSYS);
            }
        }
    }

    /// `lseek(2)`.
    pub fn seek(&self, off: i64, whence: u32) -> Result<u64, Errno> {
        match &self.kind {
            FileKind::Pipe(_) => Err(Errno::ESPIPE),
            FileKind::Stdio(fd) => Ok(host::lseek(Self::stdio_borrow(*fd), off, whence as i32)?),
            FileKind::Dev(_) => Ok(0),
            FileKind::Path => Err(Errno::EBADF),
            FileKind::Host(_) | FileKind::SynthDir => {
                let mut pos = lock(&self.pos);
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
                    *lock(&self.dir) = None;
                }
                Ok(new as u64)
            }
        }
    }

    /// `fstat(2)`.
    pub fn stat(&self) -> Result<Stat, Errno> {
        match (&self.kind, &self.location) {
            (FileKind::Pipe(end), _) => Ok(crate::vfs::pipe_stat(end)),
            (FileKind::Stdio(fd), _) => {
                Ok(host::to_abi_stat(&host::fstat(Self::stdio_borrow(*fd))?))
            }
            (_, Some(l)) => l.node().stat(),
            _ => Err(Errno::EBADF),
        }
    }

    /// The directory snapshot, taken on first use.
    pub fn dir_entries(&self) -> Result<std::sync::MutexGuard<'_, Option<Vec<DirEntry>>>, Errno> {
        let loc = self.location.as_ref().ok_or(Errno::ENOTDIR)?;
        if !loc.node().is_dir() {
            return Err(Errno::ENOTDIR);
        }
        if matches!(self.kind, FileKind::Path) {
            return Err(Errno::EBADF);
        }
        let mut d = lock(&self.dir);
        if d.is_none() {
            let host = match &self.kind {
                FileKind::Host(h) => Some(h.as_ref()),
                _ => None,
            };
            *d = Some(vfs::list_dir(loc.node(), host)?);
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

    /// Closes every close-on-exec descriptor (`execve`).
    pub fn close_on_exec(&mut self) {
        for s in &mut self.slots {
            if s.as_ref().is_some_and(|e| e.cloexec) {
                *s = None;
            }
        }
    }
}
