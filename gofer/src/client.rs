//! The Sentry's side of the protocol: typed calls, one request in flight at a
//! time per connection.
//!
//! Every failure is an [`Errno`]: the server's own, or EIO when the
//! connection broke or the server answered nonsense (after which the client
//! stays broken: a stream that lost its framing cannot be trusted again).

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

use abi::Errno;

use crate::proto::{self, Dirent, Handle, Header, Node, Op, Stat, StatFs, Timespec};
use crate::{server, sys};

struct Conn {
    sock: UnixStream,
    tag: u16,
    broken: bool,
}

/// A connection to a gofer.
pub struct Client {
    conn: Mutex<Conn>,
    /// whether the server is asked to follow its callers between CPUs
    /// ([`proto::Follow`])
    follow: bool,
    /// the CPU the server was last asked to run on (-1: none yet)
    server_cpu: AtomicI32,
    /// handles given up with [`Client::release`], not yet closed
    released: Mutex<Vec<Handle>>,
}

/// A directory [`Client::walk_dirs`] found, with its descriptor if it
/// could be opened.
pub type OpenedDir = (Node, Option<OwnedFd>);

/// How many released handles are closed together: one round trip per
/// batch instead of one per handle.
const RELEASE_BATCH: usize = 64;

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").finish_non_exhaustive()
    }
}

/// Attributes to change with [`Client::set_stat`]; `None` leaves one as it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    /// permissions
    pub mode: Option<u32>,
    /// owner
    pub uid: Option<u32>,
    /// group
    pub gid: Option<u32>,
    /// size
    pub size: Option<u64>,
    /// access time (`nsec` may be `UTIME_NOW`)
    pub atime: Option<Timespec>,
    /// modification time (`nsec` may be `UTIME_NOW`)
    pub mtime: Option<Timespec>,
}

impl Client {
    /// Wraps a connected socket.
    pub fn new(sock: UnixStream) -> Client {
        Client {
            conn: Mutex::new(Conn {
                sock,
                tag: 0,
                broken: false,
            }),
            follow: false,
            server_cpu: AtomicI32::new(-1),
            released: Mutex::new(Vec::new()),
        }
    }

    /// Like [`Client::new`], for a server that follows its callers
    /// between CPUs: when a call comes from another CPU than the last, the
    /// server is first asked to move there ([`proto::Follow`]), so that
    /// round trips wake no other core (tens of microseconds on some
    /// machines, several times the rest of a round trip).
    pub fn following(sock: UnixStream) -> Client {
        Client {
            follow: true,
            ..Client::new(sock)
        }
    }

    /// The caller's CPU, if the server should move there first.
    fn caller_moved(&self) -> Option<u32> {
        if !self.follow {
            return None;
        }
        // SAFETY: no arguments; reads the calling thread's CPU.
        let cpu = unsafe { libc::sched_getcpu() };
        if cpu < 0 || self.server_cpu.swap(cpu, Ordering::Relaxed) == cpu {
            return None;
        }
        u32::try_from(cpu).ok()
    }

    /// Sends one request and waits for its reply, with the donated
    /// descriptor if the operation carries one.
    pub fn call<O: Op>(&self, req: &O) -> Result<(O::Reply, Option<OwnedFd>), Errno> {
        let (reply, fds) = self.call_all(req)?;
        Ok((reply, fds.into_iter().next()))
    }

    /// [`Client::call`] with every descriptor donated, in order.
    pub fn call_all<O: Op>(&self, req: &O) -> Result<(O::Reply, Vec<OwnedFd>), Errno> {
        let payload = postcard::to_stdvec(req).map_err(|_| Errno::EINVAL)?;
        if payload.len() > proto::MAX_PAYLOAD as usize {
            return Err(Errno::E2BIG);
        }
        // A poisoned lock means a caller panicked mid-call: the stream may be
        // mid-frame, so treat it as broken.
        let mut conn = self.conn.lock().map_err(|_| Errno::EIO)?;
        if conn.broken {
            return Err(Errno::EIO);
        }
        if let Some(cpu) = self.caller_moved() {
            let follow = postcard::to_stdvec(&proto::Follow { cpu }).map_err(|_| Errno::EINVAL)?;
            // Best effort: a server that cannot move answers an errno and
            // stays where it is.
            if exchange::<proto::Follow>(&mut conn, &follow).is_err() {
                conn.broken = true;
                return Err(Errno::EIO);
            }
        }
        match exchange::<O>(&mut conn, &payload) {
            Ok(answer) => answer,
            Err(Fatal) => {
                conn.broken = true;
                Err(Errno::EIO)
            }
        }
    }

    /// A handle on the root and its attributes.
    pub fn attach(&self) -> Result<Node, Errno> {
        Ok(self.call(&proto::Attach {})?.0)
    }

    /// The directories among `names` in `dir` (at most
    /// [`proto::MAX_WALK_DIRS`]), each with a descriptor open for reading it
    /// when it could be opened; `None` for the others.
    pub fn walk_dirs(&self, dir: Handle, names: &[&[u8]]) -> Result<Vec<Option<OpenedDir>>, Errno> {
        let names = names.iter().map(|n| n.to_vec()).collect();
        let (found, fds) = self.call_all(&proto::WalkDirs { dir, names })?;
        let mut fds = fds.into_iter();
        // A reply that promises more descriptors than came is nonsense.
        found
            .into_iter()
            .map(|f| match f {
                None => Ok(None),
                Some(d) if d.open => fds
                    .next()
                    .map(|fd| Some((d.node, Some(fd))))
                    .ok_or(Errno::EIO),
                Some(d) => Ok(Some((d.node, None))),
            })
            .collect()
    }

    /// Looks `name` up in `dir` as [`Client::walk`] does; a directory found
    /// comes with a descriptor open for reading it, when it can be read.
    pub fn walk_open_dir(
        &self,
        dir: Handle,
        name: &[u8],
    ) -> Result<(proto::WalkReply, Option<OwnedFd>), Errno> {
        let name = name.to_vec();
        self.call(&proto::WalkOpenDir { dir, name })
    }

    /// Looks `names` up from `dir`, one handle per name found. A symlink is
    /// returned as itself (the walk stops there with `NotDir` if names
    /// remain); a missing name stops it with `Missing`.
    pub fn walk(&self, dir: Handle, names: &[&[u8]]) -> Result<proto::WalkReply, Errno> {
        let names = names.iter().map(|n| n.to_vec()).collect();
        Ok(self.call(&proto::Walk { dir, names })?.0)
    }

    /// Like [`Client::walk`] but makes no handles.
    pub fn walk_stat(&self, dir: Handle, names: &[&[u8]]) -> Result<proto::WalkStatReply, Errno> {
        let names = names.iter().map(|n| n.to_vec()).collect();
        Ok(self.call(&proto::WalkStat { dir, names })?.0)
    }

    /// Opens the file for I/O; the host descriptor is returned.
    pub fn open(&self, handle: Handle, flags: i32) -> Result<OwnedFd, Errno> {
        let flags = u32::try_from(flags).map_err(|_| Errno::EINVAL)?;
        let ((), fd) = self.call(&proto::Open { handle, flags })?;
        fd.ok_or(Errno::EIO)
    }

    /// Creates a regular file (exclusively) and opens it.
    pub fn create(
        &self,
        dir: Handle,
        name: &[u8],
        flags: i32,
        mode: u32,
    ) -> Result<(Node, OwnedFd), Errno> {
        let flags = u32::try_from(flags).map_err(|_| Errno::EINVAL)?;
        let (node, fd) = self.call(&proto::Create {
            dir,
            name: name.to_vec(),
            flags,
            mode,
        })?;
        Ok((node, fd.ok_or(Errno::EIO)?))
    }

    /// Makes a directory.
    pub fn mkdir(&self, dir: Handle, name: &[u8], mode: u32) -> Result<Node, Errno> {
        let name = name.to_vec();
        Ok(self.call(&proto::Mkdir { dir, name, mode })?.0)
    }

    /// Makes a regular file or FIFO.
    pub fn mknod(&self, dir: Handle, name: &[u8], mode: u32) -> Result<Node, Errno> {
        let name = name.to_vec();
        Ok(self.call(&proto::Mknod { dir, name, mode })?.0)
    }

    /// Makes a symbolic link `name` → `target`.
    pub fn symlink(&self, dir: Handle, name: &[u8], target: &[u8]) -> Result<Node, Errno> {
        let (name, target) = (name.to_vec(), target.to_vec());
        Ok(self.call(&proto::Symlink { dir, name, target })?.0)
    }

    /// Makes a hard link `name` to `target`.
    pub fn link(&self, dir: Handle, name: &[u8], target: Handle) -> Result<Node, Errno> {
        let name = name.to_vec();
        Ok(self.call(&proto::Link { dir, name, target })?.0)
    }

    /// Removes a name (`flags`: 0 or `AT_REMOVEDIR`).
    pub fn unlink(&self, dir: Handle, name: &[u8], flags: u32) -> Result<(), Errno> {
        let name = name.to_vec();
        self.call(&proto::Unlink { dir, name, flags })?;
        Ok(())
    }

    /// Renames (`flags`: `RENAME_NOREPLACE`, `RENAME_EXCHANGE`).
    pub fn rename(
        &self,
        old_dir: Handle,
        old_name: &[u8],
        new_dir: Handle,
        new_name: &[u8],
        flags: u32,
    ) -> Result<(), Errno> {
        self.call(&proto::Rename {
            old_dir,
            old_name: old_name.to_vec(),
            new_dir,
            new_name: new_name.to_vec(),
            flags,
        })?;
        Ok(())
    }

    /// Reads a symbolic link.
    pub fn readlink(&self, handle: Handle) -> Result<Vec<u8>, Errno> {
        Ok(self.call(&proto::Readlink { handle })?.0)
    }

    /// Reads directory entries from `offset`; an empty list is the end.
    pub fn getdents(&self, handle: Handle, offset: u64, count: u32) -> Result<Vec<Dirent>, Errno> {
        Ok(self
            .call(&proto::Getdents {
                handle,
                offset,
                count,
            })?
            .0)
    }

    /// The gofer's host inotify instance (see [`proto::WatchInit`]): a
    /// non-blocking descriptor to read events from.
    pub fn watch_init(&self) -> Result<OwnedFd, Errno> {
        let ((), fd) = self.call(&proto::WatchInit {})?;
        fd.ok_or(Errno::EIO)
    }

    /// Watches the object of `handle` on the host for the events in
    /// `mask` (of [`proto::WATCH_EVENTS`]); the host's watch descriptor.
    pub fn add_watch(&self, handle: Handle, mask: u32) -> Result<i32, Errno> {
        Ok(self.call(&proto::AddWatch { handle, mask })?.0)
    }

    /// Removes a host watch.
    pub fn rm_watch(&self, wd: i32) -> Result<(), Errno> {
        self.call(&proto::RmWatch { wd })?;
        Ok(())
    }

    /// A file's attributes.
    pub fn stat(&self, handle: Handle) -> Result<Stat, Errno> {
        Ok(self.call(&proto::GetStat { handle })?.0)
    }

    /// Changes attributes.
    pub fn set_stat(&self, handle: Handle, attr: &SetAttr) -> Result<(), Errno> {
        use proto::setstat as m;
        let mut mask = 0;
        let mut bit = |set: bool, b: u32| {
            if set {
                mask |= b;
            }
        };
        bit(attr.mode.is_some(), m::MODE);
        bit(attr.uid.is_some(), m::UID);
        bit(attr.gid.is_some(), m::GID);
        bit(attr.size.is_some(), m::SIZE);
        bit(attr.atime.is_some(), m::ATIME);
        bit(attr.mtime.is_some(), m::MTIME);
        self.call(&proto::SetStat {
            handle,
            mask,
            mode: attr.mode.unwrap_or(0),
            uid: attr.uid.unwrap_or(0),
            gid: attr.gid.unwrap_or(0),
            size: attr.size.unwrap_or(0),
            atime: attr.atime.unwrap_or_default(),
            mtime: attr.mtime.unwrap_or_default(),
        })?;
        Ok(())
    }

    /// File system attributes.
    pub fn statfs(&self, handle: Handle) -> Result<StatFs, Errno> {
        Ok(self.call(&proto::GetStatFs { handle })?.0)
    }

    /// Flushes a file or directory.
    pub fn fsync(&self, handle: Handle) -> Result<(), Errno> {
        self.call(&proto::Fsync { handle })?;
        Ok(())
    }

    /// Reads an extended attribute (`user.` only).
    pub fn get_xattr(&self, handle: Handle, name: &[u8]) -> Result<Vec<u8>, Errno> {
        let name = name.to_vec();
        Ok(self.call(&proto::GetXattr { handle, name })?.0)
    }

    /// Sets an extended attribute.
    pub fn set_xattr(
        &self,
        handle: Handle,
        name: &[u8],
        value: &[u8],
        flags: u32,
    ) -> Result<(), Errno> {
        self.call(&proto::SetXattr {
            handle,
            name: name.to_vec(),
            value: value.to_vec(),
            flags,
        })?;
        Ok(())
    }

    /// Lists extended attribute names.
    pub fn list_xattr(&self, handle: Handle) -> Result<Vec<Vec<u8>>, Errno> {
        Ok(self.call(&proto::ListXattr { handle })?.0)
    }

    /// Removes an extended attribute.
    pub fn remove_xattr(&self, handle: Handle, name: &[u8]) -> Result<(), Errno> {
        let name = name.to_vec();
        self.call(&proto::RemoveXattr { handle, name })?;
        Ok(())
    }

    /// Releases a handle.
    pub fn close(&self, handle: Handle) -> Result<(), Errno> {
        self.call(&proto::Close { handle })?;
        Ok(())
    }

    /// Releases a handle later, with others: for a caller that does not
    /// need the server to have let go of it yet (a dropped cache entry).
    pub fn release(&self, handle: Handle) {
        let batch = {
            let Ok(mut r) = self.released.lock() else {
                return;
            };
            r.push(handle);
            if r.len() < RELEASE_BATCH {
                return;
            }
            std::mem::take(&mut *r)
        };
        // A handle the server no longer knows is no loss.
        let _ = self.call(&proto::CloseMany { handles: batch });
    }
}

/// The connection can no longer be used.
struct Fatal;

type Answer<O> = Result<(<O as Op>::Reply, Vec<OwnedFd>), Errno>;

fn exchange<O: Op>(conn: &mut Conn, payload: &[u8]) -> Result<Answer<O>, Fatal> {
    conn.tag = conn.tag.wrapping_add(1);
    let tag = conn.tag;
    let sock = conn.sock.as_fd();
    server::send_frame(sock, O::KIND, tag, payload, &[]).map_err(|_| Fatal)?;
    let mut fds = Vec::new();
    let mut hdr = [0u8; proto::HEADER_LEN];
    match sys::recv_exact(sock, &mut hdr, &mut fds) {
        Ok(true) => {}
        _ => return Err(Fatal),
    }
    let h = Header::decode(&hdr);
    if h.tag != tag || h.len > proto::MAX_PAYLOAD {
        return Err(Fatal);
    }
    let mut body = vec![0u8; h.len as usize];
    if h.len > 0 && !matches!(sys::recv_exact(sock, &mut body, &mut fds), Ok(true)) {
        return Err(Fatal);
    }
    if h.kind == proto::KIND_ERROR {
        return Ok(Err(match proto::decode_exact::<i32>(&body) {
            Ok(e) if e > 0 => Errno(e),
            _ => Errno::EIO,
        }));
    }
    if h.kind != O::KIND | proto::REPLY_BIT {
        return Err(Fatal);
    }
    let reply = proto::decode_exact::<O::Reply>(&body).map_err(|_| Fatal)?;
    // Descriptors an operation does not donate are closed here.
    if !O::DONATES_FD {
        fds.clear();
    }
    Ok(Ok((reply, fds)))
}
