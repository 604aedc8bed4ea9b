//! The gofer's side of the protocol: one connection served until end of
//! stream, each request answered by `*at()` calls relative to the descriptor
//! of a handle, never by path.
//!
//! What stops a hostile client from reaching beyond the root: every name is
//! one checked component ([`proto::check_name`]); every lookup is
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` or `O_NOFOLLOW`, so a
//! symlink is returned as itself and never followed; a file is reopened for
//! I/O only if it is still the same regular file or directory the handle
//! named (device number and inode compared), with `O_NONBLOCK` so a FIFO
//! swapped in cannot block the gofer; devices, FIFOs and sockets are never
//! opened (EACCES); set-user-ID and set-group-ID bits are never set, and
//! only `user.` extended attributes are served (a `security.capability`
//! attribute would hand out capabilities on the host).
//!
//! Host changes reach the Sentry through one host inotify instance per
//! connection, donated by `WatchInit`: it carries events only, and opens
//! nothing. `AddWatch` puts a watch on an object a handle already holds
//! (never on a path from the client), never following a symlink, and at
//! most [`proto::MAX_WATCHES`] of them.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::rc::Rc;

use abi::Errno;
use serde::Serialize;

use crate::proto::{self, Dirent, Handle, Header, Request, Stat, StatFs, WalkStatus};
use crate::sys;

/// How a server behaves.
#[derive(Clone, Copy, Debug)]
pub struct ServerOptions {
    /// refuse every modification with EROFS
    pub read_only: bool,
    /// most handles one connection may hold (each is a host descriptor)
    pub max_handles: usize,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            read_only: false,
            max_handles: 4096,
        }
    }
}

/// Why a connection ended other than by a clean end of stream.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// the root descriptor is not a directory
    #[error("root is not a directory")]
    RootNotDir,
    /// the root descriptor could not be examined
    #[error("cannot stat the root: {0}")]
    Root(Errno),
    /// a frame announced a payload over the limit
    #[error("frame of {0} bytes exceeds the limit")]
    FrameTooLarge(u32),
    /// the stream ended in the middle of a frame
    #[error("connection closed mid-frame")]
    Truncated,
    /// reading or writing the socket failed
    #[error("socket error: {0}")]
    Socket(Errno),
}

/// Permission bits a client may set: no set-user-ID or set-group-ID.
const MODE_MASK: u32 = 0o1777;

/// Open flags a client may pass to `Open` and `Create` (the access mode is
/// checked apart). `O_CLOEXEC` is accepted and ignored: the descriptor is
/// sent, not inherited.
const OPEN_FLAGS: i32 = libc::O_APPEND
    | libc::O_TRUNC
    | libc::O_NONBLOCK
    | libc::O_DSYNC
    | libc::O_SYNC
    | libc::O_DIRECT
    | libc::O_NOATIME
    | libc::O_LARGEFILE
    | libc::O_DIRECTORY
    | libc::O_NOFOLLOW
    | libc::O_CLOEXEC
    | libc::O_NOCTTY;

/// A host object a handle stands for.
struct Inode {
    /// `O_PATH | O_NOFOLLOW` descriptor
    fd: OwnedFd,
    dev: (u32, u32),
    ino: u64,
    /// file type bits
    kind: u32,
    /// parent and name, to reopen a non-directory for I/O (an `O_PATH`
    /// descriptor cannot be reopened without `/proc`); kept up to date on
    /// renames made through this connection
    link: RefCell<Option<(Rc<Inode>, CString)>>,
    /// directory opened for `Getdents`, kept between calls
    dir: RefCell<Option<OwnedFd>>,
}

impl Inode {
    fn new(fd: OwnedFd, link: Option<(Rc<Inode>, CString)>) -> Result<(Rc<Inode>, Stat), Errno> {
        let st = sys::statx(fd.as_fd())?;
        let stat = to_stat(&st);
        Ok((
            Rc::new(Inode {
                fd,
                dev: (st.stx_dev_major, st.stx_dev_minor),
                ino: st.stx_ino,
                kind: stat.file_type(),
                link: RefCell::new(link),
                dir: RefCell::new(None),
            }),
            stat,
        ))
    }

    fn is_dir(&self) -> bool {
        self.kind == abi::S_IFDIR
    }

    fn same_file(&self, st: &libc::statx) -> bool {
        (st.stx_dev_major, st.stx_dev_minor) == self.dev && st.stx_ino == self.ino
    }

    /// Opens the object for I/O. `flags` holds the access mode and status
    /// flags, already checked.
    fn reopen(&self, flags: i32) -> Result<OwnedFd, Errno> {
        match self.kind {
            abi::S_IFDIR => {
                sys::openat_beneath(self.fd.as_fd(), c".", flags | libc::O_DIRECTORY, 0)
            }
            abi::S_IFREG => {
                let link = self.link.borrow();
                let (parent, name) = link.as_ref().ok_or(Errno::ESTALE)?;
                // O_NONBLOCK: if the name now holds a FIFO, opening it must
                // not wait for a writer; the identity check below refuses
                // it. O_TRUNC waits for that check too, so a file swapped in
                // under the name is never truncated.
                let writes = flags & libc::O_ACCMODE != libc::O_RDONLY;
                let trunc = writes && flags & libc::O_TRUNC != 0;
                let fd = sys::openat_beneath(
                    parent.fd.as_fd(),
                    name,
                    (flags & if trunc { !libc::O_TRUNC } else { !0 })
                        | libc::O_NONBLOCK
                        | libc::O_NOCTTY,
                    0,
                )?;
                let st = sys::statx(fd.as_fd())?;
                if !self.same_file(&st) {
                    return Err(Errno::ESTALE);
                }
                if trunc {
                    sys::ftruncate(fd.as_fd(), 0)?;
                }
                if flags & libc::O_NONBLOCK == 0 {
                    sys::setfl(fd.as_fd(), sys::getfl(fd.as_fd())? & !libc::O_NONBLOCK)?;
                }
                Ok(fd)
            }
            abi::S_IFLNK => Err(Errno::ELOOP),
            _ => Err(Errno::EACCES),
        }
    }

    /// A directory opened for reading its listing, for the client to
    /// list it itself; `None` for anything else or one it cannot read.
    fn open_listing(&self) -> Option<OwnedFd> {
        self.is_dir()
            .then(|| self.reopen(libc::O_RDONLY | libc::O_NONBLOCK).ok())
            .flatten()
    }

    /// A read-only descriptor for calls that need a real open file (xattrs,
    /// fsync).
    fn open_for_meta(&self) -> Result<OwnedFd, Errno> {
        match self.kind {
            abi::S_IFDIR | abi::S_IFREG => self.reopen(libc::O_RDONLY),
            _ => Err(Errno::EOPNOTSUPP),
        }
    }
}

fn ts(t: &libc::statx_timestamp) -> proto::Timespec {
    proto::Timespec {
        sec: t.tv_sec,
        nsec: t.tv_nsec,
    }
}

fn to_stat(st: &libc::statx) -> Stat {
    Stat {
        mask: st.stx_mask,
        mode: u32::from(st.stx_mode),
        nlink: st.stx_nlink,
        uid: st.stx_uid,
        gid: st.stx_gid,
        ino: st.stx_ino,
        size: st.stx_size,
        blocks: st.stx_blocks,
        blksize: st.stx_blksize,
        attributes: st.stx_attributes,
        atime: ts(&st.stx_atime),
        mtime: ts(&st.stx_mtime),
        ctime: ts(&st.stx_ctime),
        btime: ts(&st.stx_btime),
        rdev_major: st.stx_rdev_major,
        rdev_minor: st.stx_rdev_minor,
        dev_major: st.stx_dev_major,
        dev_minor: st.stx_dev_minor,
    }
}

/// A reply ready to send.
struct Reply {
    payload: Vec<u8>,
    /// descriptors donated with it, in order
    fds: Vec<OwnedFd>,
    /// the connection's inotify descriptor goes with it (`WatchInit`)
    inotify: bool,
}

fn reply<T: Serialize>(v: &T) -> Result<Reply, Errno> {
    Ok(Reply {
        payload: postcard::to_stdvec(v).map_err(|_| Errno::EIO)?,
        fds: Vec::new(),
        inotify: false,
    })
}

/// `IN_DONT_FOLLOW` and `IN_ONLYDIR`: a host watch never follows a
/// symlink, and one meant for a directory lands on nothing else.
const IN_DONT_FOLLOW: u32 = 0x0200_0000;
const IN_ONLYDIR: u32 = 0x0100_0000;

fn name_of(name: &[u8]) -> Result<CString, Errno> {
    proto::check_name(name)?;
    sys::cstr(name)
}

/// The state of one connection.
struct Session {
    root: Rc<Inode>,
    handles: HashMap<u64, Rc<Inode>>,
    next: u64,
    opts: ServerOptions,
    /// the host inotify instance `WatchInit` donates, once made
    inotify: Option<OwnedFd>,
    /// host watch descriptors made on it and not removed
    watches: HashSet<i32>,
}

impl Session {
    fn get(&self, h: Handle) -> Result<&Rc<Inode>, Errno> {
        self.handles.get(&h.0).ok_or(Errno::EBADF)
    }

    fn dir(&self, h: Handle) -> Result<Rc<Inode>, Errno> {
        let i = self.get(h)?;
        if !i.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        Ok(Rc::clone(i))
    }

    fn insert(&mut self, inode: Rc<Inode>) -> Result<Handle, Errno> {
        if self.handles.len() >= self.opts.max_handles {
            return Err(Errno::EMFILE);
        }
        self.next += 1;
        self.handles.insert(self.next, inode);
        Ok(Handle(self.next))
    }

    fn writable(&self) -> Result<(), Errno> {
        if self.opts.read_only {
            Err(Errno::EROFS)
        } else {
            Ok(())
        }
    }

    /// Looks up one checked name below `dir` without following it.
    fn lookup(dir: &Rc<Inode>, name: &[u8]) -> Result<(Rc<Inode>, Stat), Errno> {
        let c = name_of(name)?;
        let fd = sys::openat_beneath(dir.fd.as_fd(), &c, libc::O_PATH, 0)?;
        Inode::new(fd, Some((Rc::clone(dir), c)))
    }

    /// Walks `names` from `dir`, calling `found` for each object found.
    fn walk(
        &mut self,
        dir: Handle,
        names: &[Vec<u8>],
        mut found: impl FnMut(&mut Self, Rc<Inode>, Stat) -> Result<(), Errno>,
    ) -> Result<WalkStatus, Errno> {
        if names.len() > proto::MAX_WALK {
            return Err(Errno::ENAMETOOLONG);
        }
        // Check every name first, so a bad one anywhere fails the request
        // before any host call.
        for n in names {
            proto::check_name(n)?;
        }
        let mut cur = self.dir(dir)?;
        for (i, n) in names.iter().enumerate() {
            if !cur.is_dir() {
                return Ok(WalkStatus::NotDir);
            }
            let (inode, stat) = match Self::lookup(&cur, n) {
                Ok(x) => x,
                Err(Errno::ENOENT) => return Ok(WalkStatus::Missing),
                Err(e) => {
                    tracing::trace!(errno = e.0, index = i, "walk failed");
                    return Err(e);
                }
            };
            found(self, Rc::clone(&inode), stat)?;
            cur = inode;
        }
        Ok(WalkStatus::Complete)
    }

    /// Checks `Open`/`Create` flags; returns them with the access mode.
    fn open_flags(&self, flags: u32) -> Result<i32, Errno> {
        let flags = i32::try_from(flags).map_err(|_| Errno::EINVAL)?;
        let acc = flags & libc::O_ACCMODE;
        if acc == libc::O_ACCMODE || flags & !(OPEN_FLAGS | libc::O_ACCMODE) != 0 {
            return Err(Errno::EINVAL);
        }
        if acc != libc::O_RDONLY || flags & libc::O_TRUNC != 0 {
            self.writable()?;
        }
        Ok(flags & !libc::O_CLOEXEC)
    }

    /// Makes a handle for an object just created as `name` in `dir`.
    fn created(&mut self, dir: &Rc<Inode>, name: CString) -> Result<proto::Node, Errno> {
        let fd = sys::openat_beneath(dir.fd.as_fd(), &name, libc::O_PATH, 0)?;
        let (inode, stat) = Inode::new(fd, Some((Rc::clone(dir), name)))?;
        let handle = self.insert(inode)?;
        Ok(proto::Node { handle, stat })
    }

    fn handle(&mut self, req: Request) -> Result<Reply, Errno> {
        match req {
            Request::Attach(proto::Attach {}) => {
                let stat = to_stat(&sys::statx(self.root.fd.as_fd())?);
                let handle = self.insert(Rc::clone(&self.root))?;
                reply(&proto::Node { handle, stat })
            }
            Request::Walk(r) => {
                let mut nodes = Vec::new();
                let status = self.walk(r.dir, &r.names, |s, inode, stat| {
                    let handle = s.insert(inode)?;
                    nodes.push(proto::Node { handle, stat });
                    Ok(())
                });
                match status {
                    Ok(status) => reply(&proto::WalkReply { status, nodes }),
                    Err(e) => {
                        // Nothing half-done stays behind.
                        for n in nodes {
                            self.handles.remove(&n.handle.0);
                        }
                        Err(e)
                    }
                }
            }
            Request::WalkStat(r) => {
                let mut stats = Vec::new();
                let status = self.walk(r.dir, &r.names, |_, _, stat| {
                    stats.push(stat);
                    Ok(())
                })?;
                reply(&proto::WalkStatReply { status, stats })
            }
            Request::Open(r) => {
                let flags = self.open_flags(r.flags)?;
                let inode = self.get(r.handle)?;
                if inode.is_dir() && flags & libc::O_ACCMODE != libc::O_RDONLY {
                    return Err(Errno::EISDIR);
                }
                if flags & libc::O_DIRECTORY != 0 && !inode.is_dir() {
                    return Err(Errno::ENOTDIR);
                }
                let fd = inode.reopen(flags)?;
                let mut rep = reply(&())?;
                rep.fds.push(fd);
                Ok(rep)
            }
            Request::Create(r) => {
                self.writable()?;
                let flags = self.open_flags(r.flags)?;
                if flags & libc::O_DIRECTORY != 0 {
                    return Err(Errno::EINVAL);
                }
                let dir = self.dir(r.dir)?;
                let name = name_of(&r.name)?;
                let fd = sys::openat_beneath(
                    dir.fd.as_fd(),
                    &name,
                    flags | libc::O_CREAT | libc::O_EXCL,
                    r.mode & MODE_MASK,
                )?;
                let node = self.created(&dir, name)?;
                let st = sys::statx(fd.as_fd())?;
                if st.stx_ino != node.stat.ino {
                    // Replaced between the two opens by someone else.
                    self.handles.remove(&node.handle.0);
                    return Err(Errno::ESTALE);
                }
                let mut rep = reply(&node)?;
                rep.fds.push(fd);
                Ok(rep)
            }
            Request::Mkdir(r) => {
                self.writable()?;
                let dir = self.dir(r.dir)?;
                let name = name_of(&r.name)?;
                sys::mkdirat(dir.fd.as_fd(), &name, r.mode & MODE_MASK)?;
                reply(&self.created(&dir, name)?)
            }
            Request::Mknod(r) => {
                self.writable()?;
                // A socket inode made this way is bound to nothing: the
                // Sentry keeps the guest's socket, a host process that
                // connects is refused.
                let kind = match r.mode & abi::S_IFMT {
                    0 | abi::S_IFREG => abi::S_IFREG,
                    abi::S_IFIFO => abi::S_IFIFO,
                    abi::S_IFSOCK => abi::S_IFSOCK,
                    _ => return Err(Errno::EPERM),
                };
                let dir = self.dir(r.dir)?;
                let name = name_of(&r.name)?;
                sys::mknodat(dir.fd.as_fd(), &name, kind | (r.mode & MODE_MASK))?;
                reply(&self.created(&dir, name)?)
            }
            Request::Symlink(r) => {
                self.writable()?;
                if r.target.is_empty() {
                    return Err(Errno::ENOENT);
                }
                if r.target.len() > proto::SYMLINK_MAX {
                    return Err(Errno::ENAMETOOLONG);
                }
                let target = sys::cstr(&r.target)?;
                let dir = self.dir(r.dir)?;
                let name = name_of(&r.name)?;
                sys::symlinkat(&target, dir.fd.as_fd(), &name)?;
                reply(&self.created(&dir, name)?)
            }
            Request::Link(r) => {
                self.writable()?;
                let dir = self.dir(r.dir)?;
                let name = name_of(&r.name)?;
                let target = Rc::clone(self.get(r.target)?);
                if target.is_dir() {
                    return Err(Errno::EPERM);
                }
                // Link by the handle's descriptor where the kernel allows
                // it; otherwise by its parent and name, checked below.
                let by_fd = sys::linkat(
                    target.fd.as_fd(),
                    c"",
                    dir.fd.as_fd(),
                    &name,
                    libc::AT_EMPTY_PATH,
                );
                if let Err(e) = by_fd {
                    if e != Errno::ENOENT && e != Errno::EPERM {
                        return Err(e);
                    }
                    let link = target.link.borrow();
                    let (parent, old) = link.as_ref().ok_or(Errno::ESTALE)?;
                    sys::linkat(parent.fd.as_fd(), old, dir.fd.as_fd(), &name, 0)?;
                }
                let node = self.created(&dir, name.clone())?;
                if node.stat.ino != target.ino {
                    self.handles.remove(&node.handle.0);
                    let _ = sys::unlinkat(dir.fd.as_fd(), &name, 0);
                    return Err(Errno::ESTALE);
                }
                reply(&node)
            }
            Request::Unlink(r) => {
                self.writable()?;
                let flags = i32::try_from(r.flags).map_err(|_| Errno::EINVAL)?;
                if flags & !libc::AT_REMOVEDIR != 0 {
                    return Err(Errno::EINVAL);
                }
                let dir = self.dir(r.dir)?;
                let name = name_of(&r.name)?;
                sys::unlinkat(dir.fd.as_fd(), &name, flags)?;
                reply(&())
            }
            Request::Rename(r) => {
                self.writable()?;
                if r.flags & !(libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE) != 0 {
                    return Err(Errno::EINVAL);
                }
                let old_dir = self.dir(r.old_dir)?;
                let new_dir = self.dir(r.new_dir)?;
                let old_name = name_of(&r.old_name)?;
                let new_name = name_of(&r.new_name)?;
                sys::renameat2(
                    old_dir.fd.as_fd(),
                    &old_name,
                    new_dir.fd.as_fd(),
                    &new_name,
                    r.flags,
                )?;
                self.renamed(&old_dir, &old_name, &new_dir, &new_name, r.flags);
                reply(&())
            }
            Request::Readlink(r) => {
                let inode = self.get(r.handle)?;
                if inode.kind != abi::S_IFLNK {
                    return Err(Errno::EINVAL);
                }
                reply(&sys::readlink(inode.fd.as_fd())?)
            }
            Request::Getdents(r) => {
                let inode = self.dir(r.handle)?;
                reply(&getdents(&inode, r.offset, r.count)?)
            }
            Request::GetStat(r) => {
                let inode = self.get(r.handle)?;
                reply(&to_stat(&sys::statx(inode.fd.as_fd())?))
            }
            Request::SetStat(r) => {
                self.writable()?;
                let inode = Rc::clone(self.get(r.handle)?);
                setstat(&inode, &r)?;
                reply(&())
            }
            Request::GetStatFs(r) => {
                let inode = self.get(r.handle)?;
                reply(&to_statfs(&sys::fstatfs(inode.fd.as_fd())?))
            }
            Request::Fsync(r) => {
                let inode = self.get(r.handle)?;
                let fd = inode.open_for_meta()?;
                sys::fsync(fd.as_fd())?;
                reply(&())
            }
            Request::GetXattr(r) => {
                let name = xattr_name(&r.name)?;
                let fd = self.get(r.handle)?.open_for_meta()?;
                reply(&sys::fgetxattr(fd.as_fd(), &name)?)
            }
            Request::SetXattr(r) => {
                self.writable()?;
                let name = xattr_name(&r.name)?;
                if r.value.len() > proto::MAX_DATA {
                    return Err(Errno::E2BIG);
                }
                let flags = i32::try_from(r.flags).map_err(|_| Errno::EINVAL)?;
                if flags & !(libc::XATTR_CREATE | libc::XATTR_REPLACE) != 0 {
                    return Err(Errno::EINVAL);
                }
                let fd = self.get(r.handle)?.open_for_meta()?;
                sys::fsetxattr(fd.as_fd(), &name, &r.value, flags)?;
                reply(&())
            }
            Request::ListXattr(r) => {
                let fd = self.get(r.handle)?.open_for_meta()?;
                let list = sys::flistxattr(fd.as_fd())?;
                let names: Vec<Vec<u8>> = list
                    .split(|&b| b == 0)
                    .filter(|n| n.starts_with(XATTR_PREFIX))
                    .map(<[u8]>::to_vec)
                    .collect();
                reply(&names)
            }
            Request::RemoveXattr(r) => {
                self.writable()?;
                let name = xattr_name(&r.name)?;
                let fd = self.get(r.handle)?.open_for_meta()?;
                sys::fremovexattr(fd.as_fd(), &name)?;
                reply(&())
            }
            Request::Close(r) => {
                self.handles.remove(&r.handle.0).ok_or(Errno::EBADF)?;
                reply(&())
            }
            Request::CloseMany(r) => {
                if r.handles.len() > proto::MAX_WALK {
                    return Err(Errno::E2BIG);
                }
                let mut unknown = false;
                for h in r.handles {
                    unknown |= self.handles.remove(&h.0).is_none();
                }
                if unknown {
                    return Err(Errno::EBADF);
                }
                reply(&())
            }
            Request::WalkOpenDir(r) => {
                let mut found = None;
                let status =
                    self.walk(r.dir, std::slice::from_ref(&r.name), |s, inode, stat| {
                        let handle = s.insert(Rc::clone(&inode))?;
                        found = Some((inode, proto::Node { handle, stat }));
                        Ok(())
                    })?;
                let fd = found.as_ref().and_then(|(inode, _)| inode.open_listing());
                let nodes = found.into_iter().map(|(_, n)| n).collect();
                let mut rep = reply(&proto::WalkReply { status, nodes })?;
                rep.fds.extend(fd);
                Ok(rep)
            }
            Request::WalkDirs(r) => {
                if r.names.len() > proto::MAX_WALK_DIRS {
                    return Err(Errno::E2BIG);
                }
                for n in &r.names {
                    proto::check_name(n)?;
                }
                let dir = self.dir(r.dir)?;
                let mut found = Vec::with_capacity(r.names.len());
                let mut fds = Vec::new();
                for n in &r.names {
                    // Anything but a directory, or one gone, is left out.
                    let dir_found = Self::lookup(&dir, n).ok().filter(|(i, _)| i.is_dir());
                    let Some((inode, stat)) = dir_found else {
                        found.push(None);
                        continue;
                    };
                    let fd = inode.open_listing();
                    let Ok(handle) = self.insert(inode) else {
                        found.push(None);
                        continue;
                    };
                    found.push(Some(proto::WalkedDir {
                        node: proto::Node { handle, stat },
                        open: fd.is_some(),
                    }));
                    fds.extend(fd);
                }
                let mut rep = reply(&found)?;
                rep.fds = fds;
                Ok(rep)
            }
            Request::Follow(r) => {
                sys::run_on_cpu(r.cpu)?;
                reply(&())
            }
            Request::WatchInit(proto::WatchInit {}) => {
                self.inotify()?;
                let mut rep = reply(&())?;
                rep.inotify = true;
                Ok(rep)
            }
            Request::AddWatch(r) => {
                if r.mask == 0 || r.mask & !proto::WATCH_EVENTS != 0 {
                    return Err(Errno::EINVAL);
                }
                let inode = Rc::clone(self.get(r.handle)?);
                reply(&self.add_watch(&inode, r.mask)?)
            }
            Request::RmWatch(r) => {
                if !self.watches.remove(&r.wd) {
                    return Err(Errno::EINVAL);
                }
                let fd = self.inotify.as_ref().ok_or(Errno::EIO)?;
                match sys::inotify_rm_watch(fd.as_fd(), r.wd) {
                    // The host already ended it (its object was deleted).
                    Ok(()) | Err(Errno::EINVAL) => reply(&()),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// The connection's inotify instance, made on first use.
    fn inotify(&mut self) -> Result<BorrowedFd<'_>, Errno> {
        if self.inotify.is_none() {
            self.inotify = Some(sys::inotify_init()?);
        }
        Ok(self.inotify.as_ref().ok_or(Errno::EIO)?.as_fd())
    }

    /// Watches the object `inode` stands for. `inotify_add_watch` takes a
    /// path, and the gofer resolves none from its client: a directory is
    /// watched as `.` after `fchdir` to its own descriptor, anything else
    /// by its checked name in its parent, which must still be the same
    /// object afterwards (ESTALE if it was swapped meanwhile). Either way
    /// with `IN_DONT_FOLLOW`, so a symlink is watched as itself and the
    /// watch stays below the root (the seccomp filter insists on it). The
    /// gofer process serves its one connection on one thread, so the
    /// working directory is this call's alone to move.
    fn add_watch(&mut self, inode: &Rc<Inode>, mask: u32) -> Result<i32, Errno> {
        let link = inode.link.borrow().clone();
        let (dir, name, mask) = if inode.is_dir() {
            (Rc::clone(inode), c".".to_owned(), mask | IN_ONLYDIR)
        } else {
            let (parent, name) = link.ok_or(Errno::ESTALE)?;
            (parent, name, mask)
        };
        // Where the working directory rests between watches: the root,
        // or for a one-file volume the directory holding it. It must not
        // stay in a watched directory, which would keep a removed one
        // alive (and its IN_DELETE_SELF from coming).
        let home = if self.root.is_dir() {
            Rc::clone(&self.root)
        } else {
            self.root
                .link
                .borrow()
                .as_ref()
                .map(|(p, _)| Rc::clone(p))
                .ok_or(Errno::ESTALE)?
        };
        let known = self.watches.len();
        let fd = self.inotify()?;
        sys::fchdir(dir.fd.as_fd())?;
        let added = sys::inotify_add_watch(fd, &name, mask | IN_DONT_FOLLOW);
        let back = sys::fchdir(home.fd.as_fd());
        let wd = added?;
        let fresh = !self.watches.contains(&wd);
        let same = name.as_bytes() == b"."
            || sys::statx_at(dir.fd.as_fd(), &name).is_ok_and(|st| inode.same_file(&st));
        if back.is_err() || !same || (fresh && known >= proto::MAX_WATCHES) {
            if fresh {
                let _ = sys::inotify_rm_watch(self.inotify()?, wd);
            }
            back?;
            return Err(if same { Errno::ENOSPC } else { Errno::ESTALE });
        }
        self.watches.insert(wd);
        Ok(wd)
    }

    /// Keeps the parent links of this connection's handles right after a
    /// rename, so they can still be reopened.
    fn renamed(
        &self,
        old_dir: &Rc<Inode>,
        old_name: &CString,
        new_dir: &Rc<Inode>,
        new_name: &CString,
        flags: u32,
    ) {
        let same = |a: &Rc<Inode>, b: &Rc<Inode>| a.dev == b.dev && a.ino == b.ino;
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        for inode in self.handles.values() {
            let mut link = inode.link.borrow_mut();
            let Some((parent, name)) = link.as_mut() else {
                continue;
            };
            if same(parent, old_dir) && name == old_name {
                *parent = Rc::clone(new_dir);
                *name = new_name.clone();
            } else if exchange && same(parent, new_dir) && name == new_name {
                *parent = Rc::clone(old_dir);
                *name = old_name.clone();
            }
        }
    }
}

const XATTR_PREFIX: &[u8] = b"user.";

/// Checks an extended attribute name: only the `user.` namespace is served;
/// `security.`, `trusted.` and `system.` attributes can grant capabilities
/// or change ACLs on the host.
fn xattr_name(name: &[u8]) -> Result<CString, Errno> {
    if name.len() > proto::NAME_MAX || name.is_empty() {
        return Err(Errno::ERANGE);
    }
    if !name.starts_with(XATTR_PREFIX) || name.len() == XATTR_PREFIX.len() {
        return Err(Errno::EOPNOTSUPP);
    }
    sys::cstr(name)
}

fn getdents(inode: &Inode, offset: u64, count: u32) -> Result<Vec<Dirent>, Errno> {
    let count = usize::try_from(count).map_err(|_| Errno::EINVAL)?;
    if count == 0 {
        return Err(Errno::EINVAL);
    }
    let mut dir = inode.dir.borrow_mut();
    if dir.is_none() {
        *dir = Some(sys::openat_beneath(
            inode.fd.as_fd(),
            c".",
            libc::O_RDONLY | libc::O_DIRECTORY,
            0,
        )?);
    }
    let fd = dir.as_ref().ok_or(Errno::EIO)?.as_fd();
    sys::seek_set(fd, offset)?;
    let mut buf = vec![0u8; count.min(proto::MAX_DATA)];
    let n = sys::getdents64(fd, &mut buf)?;
    parse_dirents(buf.get(..n).ok_or(Errno::EIO)?)
}

/// Parses `struct linux_dirent64` records: `d_ino: u64, d_off: i64,
/// d_reclen: u16, d_type: u8, d_name: [u8]` (NUL-terminated).
fn parse_dirents(mut buf: &[u8]) -> Result<Vec<Dirent>, Errno> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let field = |r: std::ops::Range<usize>| buf.get(r).ok_or(Errno::EIO);
        let ino = u64::from_ne_bytes(field(0..8)?.try_into().map_err(|_| Errno::EIO)?);
        let off = u64::from_ne_bytes(field(8..16)?.try_into().map_err(|_| Errno::EIO)?);
        let reclen = usize::from(u16::from_ne_bytes(
            field(16..18)?.try_into().map_err(|_| Errno::EIO)?,
        ));
        let kind = *buf.get(18).ok_or(Errno::EIO)?;
        let raw = field(19..reclen.max(19))?;
        let name = raw.split(|&b| b == 0).next().unwrap_or_default().to_vec();
        out.push(Dirent {
            ino,
            off,
            kind,
            name,
        });
        buf = buf.get(reclen.max(19)..).ok_or(Errno::EIO)?;
    }
    Ok(out)
}

fn to_statfs(st: &sys::Statfs) -> StatFs {
    let u = |v: i64| u64::try_from(v).unwrap_or(0);
    StatFs {
        fs_type: u(st.f_type),
        block_size: u(st.f_bsize),
        blocks: st.f_blocks,
        blocks_free: st.f_bfree,
        blocks_available: st.f_bavail,
        files: st.f_files,
        files_free: st.f_ffree,
        name_max: u(st.f_namelen),
        fragment_size: u(st.f_frsize),
        flags: u(st.f_flags),
    }
}

fn setstat(inode: &Inode, r: &proto::SetStat) -> Result<(), Errno> {
    use proto::setstat as m;
    if r.mask & !m::ALL != 0 {
        return Err(Errno::EINVAL);
    }
    if r.mask & m::SIZE != 0 {
        match inode.kind {
            abi::S_IFREG => {}
            abi::S_IFDIR => return Err(Errno::EISDIR),
            _ => return Err(Errno::EINVAL),
        }
        let fd = inode.reopen(libc::O_WRONLY)?;
        sys::ftruncate(fd.as_fd(), r.size)?;
    }
    if r.mask & m::MODE != 0 {
        let mode = r.mode & MODE_MASK;
        match sys::fchmod_path(inode.fd.as_fd(), mode) {
            // Before Linux 6.6 an O_PATH descriptor cannot be chmod'ed:
            // open the file itself (symlinks have no mode to change).
            Err(Errno::ENOSYS) | Err(Errno::EINVAL) if inode.kind != abi::S_IFLNK => {
                let fd = inode.open_for_meta()?;
                sys::fchmod(fd.as_fd(), mode)?;
            }
            res => res?,
        }
    }
    if r.mask & (m::UID | m::GID) != 0 {
        let uid = if r.mask & m::UID != 0 {
            r.uid
        } else {
            u32::MAX
        };
        let gid = if r.mask & m::GID != 0 {
            r.gid
        } else {
            u32::MAX
        };
        sys::fchown(inode.fd.as_fd(), uid, gid)?;
    }
    if r.mask & (m::ATIME | m::MTIME) != 0 {
        let t = |set: bool, t: &proto::Timespec| -> Result<libc::timespec, Errno> {
            if !set {
                return Ok(libc::timespec {
                    tv_sec: 0,
                    tv_nsec: libc::UTIME_OMIT,
                });
            }
            let nsec = i64::from(t.nsec);
            if nsec >= 1_000_000_000 && nsec != libc::UTIME_NOW && nsec != libc::UTIME_OMIT {
                return Err(Errno::EINVAL);
            }
            Ok(libc::timespec {
                tv_sec: t.sec,
                tv_nsec: nsec,
            })
        };
        let times = [
            t(r.mask & m::ATIME != 0, &r.atime)?,
            t(r.mask & m::MTIME != 0, &r.mtime)?,
        ];
        sys::utimens(inode.fd.as_fd(), &times)?;
    }
    Ok(())
}

/// Serves one connection until the client closes it. Returns `Ok(())` on a
/// clean end of stream or when the client went away mid-reply; framing
/// errors end the connection with an error. Requests never panic the
/// server: a bad payload or an unknown kind gets an errno reply.
///
/// The process umask applies to created files; the gofer process runs with
/// umask 0 so the modes the Sentry asks for are the ones made.
pub fn serve(root: OwnedFd, conn: UnixStream, opts: ServerOptions) -> Result<(), ServeError> {
    let (root, stat) = Inode::new(root, None).map_err(ServeError::Root)?;
    if !stat.is_dir() {
        return Err(ServeError::RootNotDir);
    }
    serve_inode(root, conn, opts)
}

/// Serves one regular file, `name` in directory `dir`: `Attach` returns
/// it, and as no directory handle exists, nothing else is reachable (a
/// volume that is a single file, such as a container's `/etc/hosts`).
pub fn serve_file(
    dir: OwnedFd,
    name: &[u8],
    conn: UnixStream,
    opts: ServerOptions,
) -> Result<(), ServeError> {
    proto::check_name(name).map_err(ServeError::Root)?;
    let cname = std::ffi::CString::new(name).map_err(|_| ServeError::Root(Errno::EINVAL))?;
    let fd = sys::openat_beneath(dir.as_fd(), &cname, libc::O_PATH, 0).map_err(ServeError::Root)?;
    // The directory is kept only to reopen the file by name; no handle on
    // it is ever given out.
    let (dir, _) = Inode::new(dir, None).map_err(ServeError::Root)?;
    let (root, stat) = Inode::new(fd, Some((dir, cname))).map_err(ServeError::Root)?;
    if stat.mode & libc::S_IFMT != libc::S_IFREG {
        return Err(ServeError::Root(Errno::EINVAL));
    }
    serve_inode(root, conn, opts)
}

fn serve_inode(root: Rc<Inode>, conn: UnixStream, opts: ServerOptions) -> Result<(), ServeError> {
    let mut session = Session {
        root,
        handles: HashMap::new(),
        next: 0,
        opts,
        inotify: None,
        watches: HashSet::new(),
    };
    let sock = conn.as_fd();
    let mut stray = Vec::new();
    let mut payload = Vec::new();
    loop {
        let mut hdr = [0u8; proto::HEADER_LEN];
        // Descriptors a client sends are not wanted; dropping closes them.
        stray.clear();
        match sys::recv_exact(sock, &mut hdr, &mut stray) {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(Errno::EIO) => return Err(ServeError::Truncated),
            Err(Errno::ECONNRESET) => return Ok(()),
            Err(e) => return Err(ServeError::Socket(e)),
        }
        let h = Header::decode(&hdr);
        if h.len > proto::MAX_PAYLOAD {
            return Err(ServeError::FrameTooLarge(h.len));
        }
        payload.clear();
        payload.resize(h.len as usize, 0);
        match sys::recv_exact(sock, &mut payload, &mut stray) {
            Ok(true) => {}
            Ok(false) if h.len == 0 => {}
            Ok(false) | Err(Errno::EIO) => return Err(ServeError::Truncated),
            Err(e) => return Err(ServeError::Socket(e)),
        }
        let result = Request::decode(h.kind, &payload).and_then(|req| {
            tracing::trace!(?req, tag = h.tag, "gofer request");
            session.handle(req)
        });
        let (kind, rep) = match result {
            Ok(rep) => (h.kind | proto::REPLY_BIT, rep),
            Err(e) => {
                tracing::trace!(errno = e.0, tag = h.tag, "gofer error reply");
                (
                    proto::KIND_ERROR,
                    Reply {
                        payload: postcard::to_stdvec(&e.0).unwrap_or_default(),
                        fds: Vec::new(),
                        inotify: false,
                    },
                )
            }
        };
        let mut fds: Vec<BorrowedFd<'_>> = rep.fds.iter().map(AsFd::as_fd).collect();
        if rep.inotify {
            fds.extend(session.inotify.as_ref().map(AsFd::as_fd));
        }
        if send_frame(sock, kind, h.tag, &rep.payload, &fds).is_err() {
            // The client is gone: nothing more to serve.
            return Ok(());
        }
    }
}

/// Sends one frame (header and payload in one buffer, so descriptors ride
/// on the header's first byte).
pub(crate) fn send_frame(
    sock: BorrowedFd<'_>,
    kind: u16,
    tag: u16,
    payload: &[u8],
    fds: &[BorrowedFd<'_>],
) -> Result<(), Errno> {
    let len = u32::try_from(payload.len()).map_err(|_| Errno::EMSGSIZE)?;
    if len > proto::MAX_PAYLOAD {
        return Err(Errno::EMSGSIZE);
    }
    let mut frame = Vec::with_capacity(proto::HEADER_LEN + payload.len());
    frame.extend_from_slice(&Header { len, kind, tag }.encode());
    frame.extend_from_slice(payload);
    sys::send_all(sock, &frame, fds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirents_parse_and_reject_truncation() {
        let mut buf = Vec::new();
        for (ino, name) in [(5u64, &b"."[..]), (7, b"hello")] {
            let reclen = (19 + name.len() + 1).next_multiple_of(8);
            let start = buf.len();
            buf.extend_from_slice(&ino.to_ne_bytes());
            buf.extend_from_slice(&(ino * 10).to_ne_bytes());
            buf.extend_from_slice(&(reclen as u16).to_ne_bytes());
            buf.push(4);
            buf.extend_from_slice(name);
            buf.resize(start + reclen, 0);
        }
        let d = parse_dirents(&buf).expect("parse");
        assert_eq!(d.len(), 2);
        assert_eq!(d[1].name, b"hello");
        assert_eq!(d[1].off, 70);
        assert_eq!(parse_dirents(&buf[..buf.len() - 30]), Err(Errno::EIO));
    }

    #[test]
    fn xattr_names() {
        assert!(xattr_name(b"user.x").is_ok());
        assert_eq!(xattr_name(b"security.capability"), Err(Errno::EOPNOTSUPP));
        assert_eq!(
            xattr_name(b"trusted.overlay.opaque"),
            Err(Errno::EOPNOTSUPP)
        );
        assert_eq!(xattr_name(b"user."), Err(Errno::EOPNOTSUPP));
        assert_eq!(xattr_name(b"user.a\0b"), Err(Errno::EINVAL));
    }

    mod fuzz {
        use std::io::{Read, Write};
        use std::path::{Path, PathBuf};
        use std::sync::mpsc;
        use std::time::Duration;

        use proptest::prelude::*;

        use super::super::*;
        use crate::proto::tests::request;

        struct Tree {
            base: PathBuf,
        }

        impl Tree {
            /// base/root is served; base/sentinel must survive untouched.
            fn new() -> Tree {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let base = std::env::temp_dir().join(format!(
                    "gofer-fuzz-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                let root = base.join("root");
                std::fs::create_dir_all(root.join("a/b")).expect("mkdir");
                std::fs::write(root.join("f"), b"x").expect("write");
                std::fs::write(base.join("sentinel"), b"keep").expect("write");
                std::os::unix::fs::symlink("..", root.join("esc")).expect("ln");
                std::os::unix::fs::symlink("../sentinel", root.join("a/s")).expect("ln");
                Tree { base }
            }

            fn root(&self) -> PathBuf {
                self.base.join("root")
            }

            fn check_outside(&self) {
                assert_eq!(
                    std::fs::read(self.base.join("sentinel")).expect("sentinel"),
                    b"keep"
                );
                let mut names: Vec<_> = std::fs::read_dir(&self.base)
                    .expect("readdir")
                    .map(|e| e.expect("entry").file_name())
                    .collect();
                names.sort();
                assert_eq!(names, ["root", "sentinel"]);
            }
        }

        impl Drop for Tree {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.base);
            }
        }

        /// Runs a server on `input` (then end of stream) and returns what it
        /// wrote back, failing if it panics or does not finish in time.
        fn run(root: &Path, opts: ServerOptions, input: Vec<u8>) -> Vec<u8> {
            let (mut a, b) = UnixStream::pair().expect("pair");
            let fd: OwnedFd = std::fs::File::open(root).expect("root").into();
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                let r = serve(fd, b, opts);
                let _ = tx.send(r.is_ok());
            });
            let writer = {
                let mut a = a.try_clone().expect("clone");
                std::thread::spawn(move || {
                    let _ = a.write_all(&input);
                    let _ = a.shutdown(std::net::Shutdown::Write);
                })
            };
            let mut out = Vec::new();
            // A server that closes with input unread resets the connection.
            match a.read_to_end(&mut out) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
                Err(e) => panic!("read replies: {e}"),
            }
            writer.join().expect("writer");
            rx.recv_timeout(Duration::from_secs(10))
                .expect("server finished without panic");
            out
        }

        fn frames(reqs: &[Request]) -> Vec<u8> {
            let mut v = Vec::new();
            for (i, r) in reqs.iter().enumerate() {
                let p = r.encode().expect("encode");
                v.extend_from_slice(
                    &Header {
                        len: p.len() as u32,
                        kind: r.kind(),
                        tag: i as u16,
                    }
                    .encode(),
                );
                v.extend_from_slice(&p);
            }
            v
        }

        /// Parses replies: every one is a whole frame with a tag in order.
        fn check_replies(mut out: &[u8], n: usize) {
            let mut tag = 0u16;
            while !out.is_empty() {
                let h = Header::decode(out[..8].try_into().expect("header"));
                assert_eq!(h.tag, tag);
                assert!(h.kind == proto::KIND_ERROR || h.kind & proto::REPLY_BIT != 0);
                out = &out[8 + h.len as usize..];
                tag = tag.wrapping_add(1);
            }
            assert_eq!(usize::from(tag), n, "one reply per request");
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            #[test]
            fn random_bytes(input in proptest::collection::vec(any::<u8>(), 0..600)) {
                let t = Tree::new();
                run(&t.root(), ServerOptions::default(), input);
                t.check_outside();
            }

            #[test]
            fn random_frames(frames in proptest::collection::vec(
                (any::<u16>(), proptest::collection::vec(any::<u8>(), 0..64)), 0..20)) {
                let t = Tree::new();
                let mut input = Vec::new();
                for (i, (kind, p)) in frames.iter().enumerate() {
                    input.extend_from_slice(&Header { len: p.len() as u32, kind: *kind, tag: i as u16 }.encode());
                    input.extend_from_slice(p);
                }
                let out = run(&t.root(), ServerOptions::default(), input);
                check_replies(&out, frames.len());
                t.check_outside();
            }

            #[test]
            fn hostile_requests(reqs in proptest::collection::vec(request(), 0..40), ro in any::<bool>()) {
                let t = Tree::new();
                let mut all = vec![Request::Attach(proto::Attach {})];
                all.extend(reqs);
                let opts = ServerOptions { read_only: ro, max_handles: 64 };
                let out = run(&t.root(), opts, frames(&all));
                // Attach, first, succeeds: the rest ran against a live root.
                prop_assert_eq!(Header::decode(out[..8].try_into().expect("header")).kind, 1 | proto::REPLY_BIT);
                check_replies(&out, all.len());
                t.check_outside();
            }
        }

        #[test]
        fn oversized_frame_closes_the_connection() {
            let t = Tree::new();
            let mut input = Header {
                len: proto::MAX_PAYLOAD + 1,
                kind: 1,
                tag: 0,
            }
            .encode()
            .to_vec();
            input.extend_from_slice(&[0; 16]);
            assert!(run(&t.root(), ServerOptions::default(), input).is_empty());
        }
    }
}
