//! tmpfs: directories, files and symlinks kept in the Sentry's memory, for
//! `/tmp`, `/run` and `/dev/shm`. The whole file system has a size limit;
//! going past it is `ENOSPC`, never host memory exhaustion.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use abi::{Errno, Stat, Timespec};

use crate::mm::guestio::{ByteSource, GuestBufs, Stage, IO_CHUNK};
use crate::mm::memfile::MemoryFile;
use crate::mm::quota::{Quota, WritableMapping};
use crate::mm::GuestSlice;
use crate::mm::SharedRegion;
use crate::sync::Locked;
use crate::vfs::file::{Blocker, Caller, FileDescription, FileImpl};
use crate::vfs::{DirEntry, Inode, NewInode, Node};
use crate::PAGE_SIZE;

/// A regular file's contents: pages of the memory file, so that shared
/// mappings of the file see `write(2)`s and the reverse.
#[derive(Debug, Default)]
pub struct FileData {
    region: Option<Arc<SharedRegion>>,
    len: u64,
}

impl FileData {
    /// Bytes in the file.
    pub fn len(&self) -> u64 {
        self.len
    }

    fn cap(&self) -> u64 {
        self.region.as_ref().map_or(0, |r| r.len())
    }

    /// Makes room for `want` bytes. Growing past the current allocation
    /// moves the data to a larger one: mappings made earlier keep the old
    /// pages (a known gap; programs map files after sizing them).
    fn reserve(&mut self, mf: &Arc<MemoryFile>, want: u64) -> Result<(), Errno> {
        if want <= self.cap() {
            return Ok(());
        }
        let new_cap = want
            .max(self.cap() * 2)
            .max(4 * PAGE_SIZE)
            .next_multiple_of(PAGE_SIZE);
        let region = SharedRegion::new(mf, new_cap)?;
        if let Some(old) = &self.region {
            mf.copy_populated(
                old.offset(),
                region.offset(),
                self.len.next_multiple_of(PAGE_SIZE).min(old.len()),
            );
        }
        self.region = Some(region);
        Ok(())
    }

    /// How many of the pages `first..=last` (page indexes) below the end
    /// of the file hold memory: what Linux's page cache holds of a tmpfs
    /// file (holes and pages never written have none).
    pub fn resident_pages(&self, first: u64, last: u64) -> u64 {
        let Some(r) = &self.region else {
            return 0;
        };
        let pages = self.len.div_ceil(PAGE_SIZE).min(r.len() / PAGE_SIZE);
        let end = last.saturating_add(1).min(pages);
        if first >= end {
            return 0;
        }
        let bytes = (end - first) * PAGE_SIZE;
        r.memory_file()
            .populated(r.offset() + first * PAGE_SIZE, bytes)
            .div_ceil(PAGE_SIZE)
    }

    /// The region and its length, for a shared mapping of `len` bytes
    /// from `off`.
    pub fn region_for(
        &mut self,
        mf: &Arc<MemoryFile>,
        off: u64,
        len: u64,
    ) -> Result<Arc<SharedRegion>, Errno> {
        self.reserve(mf, off.checked_add(len).ok_or(Errno::EOVERFLOW)?)?;
        self.region.clone().ok_or(Errno::ENOMEM)
    }
}

/// One tmpfs instance.
#[derive(Debug)]
pub struct MemFs {
    mf: Arc<MemoryFile>,
    dev: u64,
    next_ino: AtomicU64,
    /// this file system's `size=`
    quota: Quota,
    /// what all of the sandbox's in-memory file systems may hold together
    pool: Arc<Quota>,
    inodes: AtomicU64,
    /// the superblock is read-only (a guest's `mount -o ro`, until a
    /// remount of it): no mount of it takes writes
    read_only: std::sync::atomic::AtomicBool,
}

/// Most inodes one tmpfs holds (`nr_inodes`).
const MAX_INODES: u64 = 1 << 20;

impl MemFs {
    /// Whether the file system itself is read-only (whatever its mounts).
    pub fn read_only(&self) -> bool {
        self.read_only.load(Ordering::Relaxed)
    }

    /// Makes the file system read-only or writable (a remount of it).
    pub fn set_read_only(&self, read_only: bool) {
        self.read_only.store(read_only, Ordering::Relaxed);
    }

    /// A new, empty file system of at most `limit` bytes, drawn from
    /// `pool`, with root directory mode `mode`; returns its root directory.
    pub fn new_root(
        mf: Arc<MemoryFile>,
        pool: &Arc<Quota>,
        dev: u64,
        limit: u64,
        mode: u32,
    ) -> Arc<MemInode> {
        let fs = Arc::new(MemFs {
            mf,
            dev,
            next_ino: AtomicU64::new(2),
            quota: Quota::unshared(limit),
            pool: pool.clone(),
            inodes: AtomicU64::new(1),
            read_only: Default::default(),
        });
        let (uid, gid) = crate::host::ids();
        Arc::new(MemInode {
            opaque: Default::default(),
            xattrs: Default::default(),
            ino: 1,
            fs,
            kind: MemKind::Dir(Mutex::new(BTreeMap::new())),
            meta: Mutex::new(Meta::new(abi::S_IFDIR | (mode & 0o7777), uid, gid, 2)),
            sealing: Sealing::default(),
        })
    }

    /// Takes `bytes` from this file system and the sandbox's pool, or
    /// nothing (`ENOSPC`).
    fn charge(&self, bytes: u64) -> Result<(), Errno> {
        self.quota.charge(bytes)?;
        if let Err(e) = self.pool.charge(bytes) {
            self.quota.refund(bytes);
            return Err(e);
        }
        Ok(())
    }

    /// Takes as much of `bytes` as fits (Linux writes what fits and
    /// returns the short count); returns what it took.
    fn charge_up_to(&self, bytes: u64) -> u64 {
        let fits = bytes.min(self.quota.available()).min(self.pool.available());
        if fits > 0 && self.charge(fits).is_ok() {
            fits
        } else {
            0
        }
    }

    fn refund(&self, bytes: u64) {
        self.quota.refund(bytes);
        self.pool.refund(bytes);
    }

    /// `(total, used)` bytes, for `statfs`: a full pool leaves no room
    /// here either.
    pub fn usage(&self) -> (u64, u64) {
        let used = self.quota.used();
        let free = self.quota.available().min(self.pool.available());
        (used + free, used)
    }
}

/// The set-ID bits of a regular file of `mode` that a write or `chown`
/// clears (Linux's `should_remove_suid`): set-user-ID, and set-group-ID
/// when the group may execute (without group execute it marks mandatory
/// locking).
pub fn setid_bits_killed(mode: u32) -> u32 {
    if mode & abi::S_IFMT != abi::S_IFREG {
        return 0;
    }
    let mut kill = mode & abi::S_ISUID;
    if mode & (abi::S_ISGID | 0o010) == abi::S_ISGID | 0o010 {
        kill |= abi::S_ISGID;
    }
    kill
}

fn now() -> Timespec {
    crate::host::clock_gettime(libc::CLOCK_REALTIME).unwrap_or(Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    })
}

/// Inode metadata.
#[derive(Clone, Debug)]
pub struct Meta {
    /// type and permission bits
    pub mode: u32,
    /// owner
    pub uid: u32,
    /// group
    pub gid: u32,
    /// link count
    pub nlink: u64,
    /// access time
    pub atime: Timespec,
    /// modification time
    pub mtime: Timespec,
    /// change time
    pub ctime: Timespec,
    /// a file with no name that `linkat` may give one (`O_TMPFILE`
    /// without `O_EXCL`; Linux's `I_LINKABLE`)
    pub linkable: bool,
}

impl Meta {
    fn new(mode: u32, uid: u32, gid: u32, nlink: u64) -> Self {
        let t = now();
        Meta {
            mode,
            uid,
            gid,
            nlink,
            atime: t,
            mtime: t,
            ctime: t,
            linkable: false,
        }
    }
}

/// A directory's entries: name → inode.
pub type Entries = BTreeMap<Vec<u8>, Arc<MemInode>>;

/// What an inode holds.
pub enum MemKind {
    /// a directory: name → inode
    Dir(Mutex<BTreeMap<Vec<u8>, Arc<MemInode>>>),
    /// a regular file's bytes
    File(Mutex<FileData>),
    /// a symlink's target
    Symlink(Vec<u8>),
    /// a FIFO (`mknod S_IFIFO`): one pipe shared by every opener
    Fifo(Arc<crate::fsimpl::pipe::Pipe>),
    /// a bound Unix socket (or a socket inode nobody listens on); the
    /// socket layer knows its type
    Socket(std::sync::Weak<dyn std::any::Any + Send + Sync>),
    /// an overlay whiteout: the lower entry of this name was deleted
    Whiteout,
}

/// A tmpfs inode.
pub struct MemInode {
    /// inode number
    pub ino: u64,
    opaque: std::sync::atomic::AtomicBool,
    fs: Arc<MemFs>,
    /// contents
    pub kind: MemKind,
    meta: Mutex<Meta>,
    /// extended attributes (`user.*`, `trusted.*`)
    xattrs: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    /// file seals, and the name of a `memfd_create` file
    sealing: Sealing,
}

/// File seals (`fcntl(2)`, "File Sealing"): the `F_SEAL_*` bits.
pub mod seal {
    /// no more seals may be added
    pub const SEAL: u32 = 0x1;
    /// the file may not shrink
    pub const SHRINK: u32 = 0x2;
    /// the file may not grow
    pub const GROW: u32 = 0x4;
    /// the contents may not change (no writable shared mapping may exist)
    pub const WRITE: u32 = 0x8;
    /// like `WRITE`, but mappings that already exist stay writable
    pub const FUTURE_WRITE: u32 = 0x10;
    /// the mode's execute bits may not change
    pub const EXEC: u32 = 0x20;
    /// every seal Linux knows (`F_ALL_SEALS`)
    pub const ALL: u32 = SEAL | SHRINK | GROW | WRITE | FUTURE_WRITE | EXEC;
}

/// An inode's seals and what they depend on.
#[derive(Debug)]
struct Sealing {
    /// `F_SEAL_*` bits. Every tmpfs file starts with `F_SEAL_SEAL` (so
    /// `F_ADD_SEALS` is `EPERM`), as Linux's shmem does; only
    /// `memfd_create(MFD_ALLOW_SEALING)` files start without it.
    seals: AtomicU32,
    /// the name given to `memfd_create`, for `/proc/self/fd` links
    memfd_name: Option<Vec<u8>>,
    /// the pin of writable shared mappings, while any exists
    writable_maps: Mutex<Weak<()>>,
}

impl Default for Sealing {
    fn default() -> Self {
        Sealing {
            seals: AtomicU32::new(seal::SEAL),
            memfd_name: None,
            writable_maps: Mutex::new(Weak::new()),
        }
    }
}

impl fmt::Debug for MemInode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MemInode({})", self.ino)
    }
}

impl Drop for MemInode {
    fn drop(&mut self) {
        let xattrs: u64 = self
            .xattrs
            .locked()
            .iter()
            .map(|(k, v)| (k.len() + v.len()) as u64)
            .sum();
        self.fs.refund(xattrs);
        if let MemKind::File(data) = &self.kind {
            let len = data.lock().map(|d| d.len()).unwrap_or(0);
            self.fs.refund(len);
        }
        self.fs.inodes.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A tmpfs inode as vfs sees it: the tree's node, and the overlay's upper
/// layer (which is a tmpfs).
impl Inode for MemInode {
    fn stat(&self) -> Result<Stat, Errno> {
        Ok(MemInode::stat(self))
    }

    fn is_dir(&self) -> bool {
        MemInode::is_dir(self)
    }

    fn lookup(&self, name: &[u8]) -> Result<Node, Errno> {
        MemInode::lookup(self, name).map(|m| Node::Inode(m))
    }

    fn list(&self) -> Result<Vec<DirEntry>, Errno> {
        let mut v = crate::vfs::dot_entries(self.ino);
        for (name, ino, mode) in self.entries()? {
            v.push(DirEntry {
                ino,
                kind: abi::dt::from_mode(mode),
                name,
            });
        }
        Ok(v)
    }

    fn mount_key(&self) -> usize {
        // The overlay's upper layer is one mount with the root's image.
        if self.fs.dev == crate::vfs::UPPER_DEV {
            0
        } else {
            Arc::as_ptr(&self.fs) as usize
        }
    }

    fn statfs(&self, s: &mut abi::Statfs) {
        let (total, used) = self.fs.usage();
        s.f_type = 0x0102_1994; // TMPFS_MAGIC
        s.f_bsize = 4096;
        s.f_blocks = total / 4096;
        s.f_bfree = (total - used) / 4096;
        s.f_bavail = s.f_bfree;
        s.f_namelen = 255;
        s.f_frsize = 4096;
    }

    fn is_symlink(&self) -> bool {
        MemInode::readlink(self).is_some()
    }

    fn readlink(&self) -> Result<Vec<u8>, Errno> {
        MemInode::readlink(self)
            .map(<[u8]>::to_vec)
            .ok_or(Errno::EINVAL)
    }

    fn fs_type(&self) -> Option<&'static str> {
        Some(crate::vfs::TMPFS)
    }

    fn read_at(&self, pos: u64, out: &mut [u8]) -> Result<usize, Errno> {
        MemInode::read_at(self, pos, out)
    }

    fn read_only(&self) -> bool {
        self.fs.read_only()
    }

    fn set_read_only(&self, read_only: bool) {
        self.fs.set_read_only(read_only);
    }

    fn is_whiteout(&self) -> bool {
        MemInode::is_whiteout(self)
    }

    fn is_opaque(&self) -> bool {
        MemInode::is_opaque(self)
    }

    fn entries_all(&self) -> Result<Vec<(Vec<u8>, u64, u32)>, Errno> {
        MemInode::entries_all(self)
    }

    fn create(
        &self,
        name: &[u8],
        mode: u32,
        owner: (u32, u32),
        kind: NewInode,
    ) -> Result<Arc<dyn Inode>, Errno> {
        let made = MemInode::create(self, name, mode, owner, || match kind {
            NewInode::Dir => MemKind::Dir(Default::default()),
            NewInode::File => MemKind::File(Default::default()),
            NewInode::Symlink(target) => MemKind::Symlink(target),
        })?;
        Ok(made)
    }

    fn clear_whiteout(&self, name: &[u8]) -> bool {
        MemInode::clear_whiteout(self, name)
    }

    fn unlink_any(&self, name: &[u8]) -> Result<(), Errno> {
        MemInode::unlink_any(self, name)
    }

    fn write_all_at(&self, pos: u64, data: &[u8]) -> Result<(), Errno> {
        MemInode::write_all_at(self, pos, data)
    }

    fn set_owner(&self, uid: u32, gid: u32) {
        MemInode::set_owner(self, uid, gid);
    }

    fn restore_times(&self, atime: Timespec, mtime: Timespec, ctime: Timespec) {
        MemInode::restore_times(self, atime, mtime, ctime);
    }
}

/// The tmpfs inode `node` is, if it is one.
pub fn mem_of(node: &Node) -> Option<&MemInode> {
    node.inode::<MemInode>()
}

/// [`mem_of`], shared.
pub fn mem_arc(node: &Node) -> Option<Arc<MemInode>> {
    match node {
        Node::Inode(i) => downcast(i.clone()),
        _ => None,
    }
}

/// The tmpfs inode `inode` is, if it is one.
pub fn downcast(inode: Arc<dyn Inode>) -> Option<Arc<MemInode>> {
    (inode as Arc<dyn std::any::Any + Send + Sync>)
        .downcast()
        .ok()
}

/// An open tmpfs file or directory (a memfd too): its description reads
/// and writes the inode itself, at the description's position.
impl FileImpl for MemInode {
    fn read(
        &self,
        file: &FileDescription,
        _blk: Blocker<'_>,
        bufs: &[GuestSlice],
        at: Option<u64>,
    ) -> Result<u64, Errno> {
        let mut pos_guard = file.pos.locked();
        let mut pos = at.unwrap_or(*pos_guard);
        let mut total = 0u64;
        for b in bufs {
            if self.is_dir() {
                return Err(Errno::EISDIR);
            }
            let n = self.read_to_guest(pos, &GuestBufs::new(std::slice::from_ref(b)))?;
            total += n as u64;
            pos += n as u64;
            if n < b.len() {
                break;
            }
        }
        if at.is_none() {
            *pos_guard = pos;
        }
        Ok(total)
    }

    fn write_with(
        &self,
        file: &FileDescription,
        blk: Blocker<'_>,
        bufs: &[GuestSlice],
        at: Option<u64>,
        append: Option<bool>,
    ) -> Result<u64, Errno> {
        self.remove_privs(blk.caller.capable(crate::kernel::auth::cap::FSETID), |g| {
            blk.caller.in_group(g)
        });
        // An O_APPEND description appends even for pwrite (pwrite(2),
        // BUGS), leaving the position alone.
        let append = append.unwrap_or(file.flags() & abi::OpenFlags::APPEND.bits() != 0);
        let mut pos = file.pos.locked();
        let (end, written) = self.write_from(at.unwrap_or(*pos), &GuestBufs::new(bufs), append)?;
        if at.is_none() {
            *pos = end;
        }
        Ok(written as u64)
    }

    fn write(
        &self,
        file: &FileDescription,
        blk: Blocker<'_>,
        bufs: &[GuestSlice],
        at: Option<u64>,
    ) -> Result<u64, Errno> {
        self.write_with(file, blk, bufs, at, None)
    }

    fn poll(&self, _caller: &dyn Caller, _events: i16, _depth: u32) -> i16 {
        use abi::poll::*;
        POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM
    }

    fn seekable(&self) -> bool {
        true
    }

    fn stat(&self, _file: &FileDescription) -> Result<Stat, Errno> {
        Ok(MemInode::stat(self))
    }

    fn link_name(&self) -> Option<Vec<u8>> {
        // As Linux names a memfd: its file on the internal tmpfs, unlinked.
        let memfd = self.memfd_name()?;
        let mut name = b"/memfd:".to_vec();
        name.extend_from_slice(memfd);
        name.extend_from_slice(b" (deleted)");
        Some(name)
    }

    fn is_dir(&self) -> Option<bool> {
        Some(MemInode::is_dir(self))
    }

    fn inode_id(&self) -> Option<usize> {
        Some(self as *const MemInode as usize)
    }

    // Linux's shmem has no poll.
    fn pollable(&self) -> bool {
        false
    }

    fn inotify(&self) -> bool {
        true
    }
}

/// Longest symlink target (`PATH_MAX`).
const SYMLINK_MAX: usize = 4095;

impl MemInode {
    /// The file system this inode belongs to.
    pub fn fs(&self) -> &Arc<MemFs> {
        &self.fs
    }

    /// Metadata.
    pub fn meta(&self) -> Meta {
        self.meta.locked().clone()
    }

    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        matches!(self.kind, MemKind::Dir(_))
    }

    /// Whether this is a regular file.
    pub fn is_file(&self) -> bool {
        matches!(self.kind, MemKind::File(_))
    }

    /// `stat`.
    pub fn stat(&self) -> Stat {
        let m = self.meta();
        let size = match &self.kind {
            MemKind::File(d) => d.locked().len() as i64,
            MemKind::Symlink(t) => t.len() as i64,
            MemKind::Dir(_) => 4096,
            MemKind::Fifo(_) | MemKind::Socket(_) | MemKind::Whiteout => 0,
        };
        Stat {
            dev: self.fs.dev,
            ino: self.ino,
            nlink: m.nlink,
            mode: m.mode,
            uid: m.uid,
            gid: m.gid,
            pad0: 0,
            rdev: 0,
            size,
            blksize: 4096,
            blocks: (size + 511) / 512,
            atime: m.atime.tv_sec,
            atime_nsec: m.atime.tv_nsec,
            mtime: m.mtime.tv_sec,
            mtime_nsec: m.mtime.tv_nsec,
            ctime: m.ctime.tv_sec,
            ctime_nsec: m.ctime.tv_nsec,
            unused: [0; 3],
        }
    }

    fn dir(&self) -> Result<MutexGuard<'_, Entries>, Errno> {
        match &self.kind {
            MemKind::Dir(d) => Ok(d.locked()),
            _ => Err(Errno::ENOTDIR),
        }
    }

    /// Lets `linkat` give this nameless file a name ([`Meta::linkable`]).
    pub fn set_linkable(&self, linkable: bool) {
        self.meta.locked().linkable = linkable;
    }

    /// Whether `linkat` may link this file: it has a name already, or it
    /// is a linkable nameless one.
    pub fn may_link(&self) -> bool {
        let meta = self.meta.locked();
        meta.nlink > 0 || meta.linkable
    }

    /// A regular file that has no name yet (`O_TMPFILE`).
    pub fn unlinked_file(
        fs: &Arc<MemFs>,
        mode: u32,
        ids: (u32, u32),
    ) -> Result<Arc<MemInode>, Errno> {
        if fs.inodes.fetch_add(1, Ordering::Relaxed) >= MAX_INODES {
            fs.inodes.fetch_sub(1, Ordering::Relaxed);
            return Err(Errno::ENOSPC);
        }
        let mut meta = Meta::new(mode, ids.0, ids.1, 0);
        meta.nlink = 0;
        Ok(Arc::new(MemInode {
            opaque: Default::default(),
            xattrs: Default::default(),
            ino: fs.next_ino.fetch_add(1, Ordering::Relaxed),
            fs: fs.clone(),
            kind: MemKind::File(Default::default()),
            meta: Mutex::new(meta),
            sealing: Sealing::default(),
        }))
    }

    /// An anonymous file for `memfd_create(2)`: no link, mode 0777 (as
    /// Linux's `shmem_file_setup` makes it), `name` kept for
    /// `/proc/self/fd`; `allow_sealing` starts it without `F_SEAL_SEAL`.
    pub fn memfd(
        fs: &Arc<MemFs>,
        name: Vec<u8>,
        allow_sealing: bool,
        ids: (u32, u32),
    ) -> Result<Arc<MemInode>, Errno> {
        let node = Self::unlinked_file(fs, abi::S_IFREG | 0o777, ids)?;
        let mut node = Arc::into_inner(node).ok_or(Errno::ENOMEM)?;
        node.sealing.memfd_name = Some(name);
        if allow_sealing {
            *node.sealing.seals.get_mut() = 0;
        }
        Ok(Arc::new(node))
    }

    /// The name a `memfd_create` file was given, if it is one.
    pub fn memfd_name(&self) -> Option<&[u8]> {
        self.sealing.memfd_name.as_deref()
    }

    /// The seals (`F_GET_SEALS`); `EINVAL` for what is not a regular file.
    pub fn seals(&self) -> Result<u32, Errno> {
        match self.kind {
            MemKind::File(_) => Ok(self.sealing.seals.load(Ordering::Relaxed)),
            _ => Err(Errno::EINVAL),
        }
    }

    /// Adds `seals` (`F_ADD_SEALS`, after the caller checked the
    /// description is writable and the bits are known): `EPERM` once
    /// `F_SEAL_SEAL` is set, `EBUSY` for `F_SEAL_WRITE` while a writable
    /// shared mapping exists (memfd_add_seals() in mm/memfd.c).
    pub fn add_seals(&self, seals: u32) -> Result<(), Errno> {
        let MemKind::File(d) = &self.kind else {
            return Err(Errno::EINVAL);
        };
        // The data lock orders this against writes and mappings.
        let _d = d.locked();
        let maps = self.sealing.writable_maps.locked();
        let cur = self.sealing.seals.load(Ordering::Relaxed);
        if cur & seal::SEAL != 0 {
            return Err(Errno::EPERM);
        }
        // F_SEAL_EXEC on an executable file seals the contents too (W^X
        // from then on), as memfd_add_seals() does.
        let mut seals = seals;
        if seals & seal::EXEC != 0 && self.meta().mode & 0o111 != 0 {
            seals |= seal::SHRINK | seal::GROW | seal::WRITE | seal::FUTURE_WRITE;
        }
        if seals & seal::WRITE != 0 && cur & seal::WRITE == 0 && maps.strong_count() > 0 {
            return Err(Errno::EBUSY);
        }
        self.sealing.seals.store(cur | seals, Ordering::Relaxed);
        Ok(())
    }

    /// A pin for a new shared mapping that may write the file, or `EPERM`
    /// when `F_SEAL_WRITE` or `F_SEAL_FUTURE_WRITE` forbids one.
    pub fn writable_mapping(&self) -> Result<WritableMapping, Errno> {
        let mut maps = self.sealing.writable_maps.locked();
        if self.sealing.seals.load(Ordering::Relaxed) & (seal::WRITE | seal::FUTURE_WRITE) != 0 {
            return Err(Errno::EPERM);
        }
        let pin = maps.upgrade().unwrap_or_else(|| {
            let pin = Arc::new(());
            *maps = Arc::downgrade(&pin);
            pin
        });
        Ok(WritableMapping::new(pin))
    }

    /// Whether a shared mapping made now could later be given write
    /// access by `mprotect` (not once a write seal is set: Linux clears
    /// `VM_MAYWRITE` for those).
    pub fn write_sealed(&self) -> bool {
        self.sealing.seals.load(Ordering::Relaxed) & (seal::WRITE | seal::FUTURE_WRITE) != 0
    }

    /// Looks `name` up in this directory.
    pub fn lookup(&self, name: &[u8]) -> Result<Arc<MemInode>, Errno> {
        self.dir()?.get(name).cloned().ok_or(Errno::ENOENT)
    }

    /// Directory entries (without `.` and `..`, without whiteouts).
    pub fn entries(&self) -> Result<Vec<(Vec<u8>, u64, u32)>, Errno> {
        Ok(self
            .entries_all()?
            .into_iter()
            .filter(|e| e.2 != abi::S_IFCHR)
            .collect())
    }

    /// Directory entries including whiteouts (mode `S_IFCHR`).
    pub fn entries_all(&self) -> Result<Vec<(Vec<u8>, u64, u32)>, Errno> {
        Ok(self
            .dir()?
            .iter()
            .map(|(n, i)| {
                (
                    n.clone(),
                    i.ino,
                    if i.is_whiteout() {
                        abi::S_IFCHR
                    } else {
                        i.meta().mode
                    },
                )
            })
            .collect())
    }

    /// Whether this is an overlay whiteout.
    pub fn is_whiteout(&self) -> bool {
        matches!(self.kind, MemKind::Whiteout)
    }

    /// Whether this upper directory hides the lower one of its name.
    pub fn is_opaque(&self) -> bool {
        self.opaque.load(Ordering::Relaxed)
    }

    /// Marks this upper directory as hiding the lower one.
    pub fn set_opaque(&self) {
        self.opaque.store(true, Ordering::Relaxed);
    }

    /// Removes `name` whatever it is (an upper directory holding only
    /// whiteouts included).
    pub fn unlink_any(&self, name: &[u8]) -> Result<(), Errno> {
        let node = self.dir()?.remove(name).ok_or(Errno::ENOENT)?;
        if node.is_dir() {
            self.meta.locked().nlink -= 1;
        }
        self.touch();
        Ok(())
    }

    /// Records that `name` was deleted from the lower layer (replacing any
    /// upper entry of that name).
    pub fn whiteout(&self, name: &[u8]) -> Result<(), Errno> {
        {
            let mut d = self.dir()?;
            d.remove(name);
        }
        self.create(name, abi::S_IFCHR, (0, 0), || MemKind::Whiteout)
            .map(|_| ())
    }

    /// Removes a whiteout of `name`, if there is one; `true` if there was.
    pub fn clear_whiteout(&self, name: &[u8]) -> bool {
        let Ok(mut d) = self.dir() else { return false };
        if d.get(name).is_some_and(|n| n.is_whiteout()) {
            d.remove(name);
            true
        } else {
            false
        }
    }

    fn touch(&self) {
        let t = now();
        let mut m = self.meta.locked();
        m.mtime = t;
        m.ctime = t;
    }

    /// Creates `name` here. `kind` is built only once the name is known to
    /// be free.
    pub fn create(
        &self,
        name: &[u8],
        mode: u32,
        ids: (u32, u32),
        kind: impl FnOnce() -> MemKind,
    ) -> Result<Arc<MemInode>, Errno> {
        let mut d = self.dir()?;
        if d.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        if self.fs.inodes.fetch_add(1, Ordering::Relaxed) >= MAX_INODES {
            self.fs.inodes.fetch_sub(1, Ordering::Relaxed);
            return Err(Errno::ENOSPC);
        }
        let kind = kind();
        if let MemKind::Symlink(t) = &kind {
            if t.len() > SYMLINK_MAX {
                self.fs.inodes.fetch_sub(1, Ordering::Relaxed);
                return Err(Errno::ENAMETOOLONG);
            }
        }
        let is_dir = matches!(kind, MemKind::Dir(_));
        // setgid directories pass their group on.
        let pm = self.meta();
        let gid = if pm.mode & 0o2000 != 0 { pm.gid } else { ids.1 };
        let mode = if is_dir && pm.mode & 0o2000 != 0 {
            mode | 0o2000
        } else {
            mode
        };
        let node = Arc::new(MemInode {
            opaque: Default::default(),
            xattrs: Default::default(),
            ino: self.fs.next_ino.fetch_add(1, Ordering::Relaxed),
            fs: self.fs.clone(),
            kind,
            meta: Mutex::new(Meta::new(mode, ids.0, gid, if is_dir { 2 } else { 1 })),
            sealing: Sealing::default(),
        });
        d.insert(name.to_vec(), node.clone());
        drop(d);
        if is_dir {
            self.meta.locked().nlink += 1;
        }
        self.touch();
        Ok(node)
    }

    /// Removes `name` (`dir` says whether `rmdir` asked).
    pub fn unlink(&self, name: &[u8], dir: bool) -> Result<(), Errno> {
        let mut d = self.dir()?;
        let node = d.get(name).cloned().ok_or(Errno::ENOENT)?;
        match (&node.kind, dir) {
            (MemKind::Dir(c), true) if !c.locked().is_empty() => return Err(Errno::ENOTEMPTY),
            (MemKind::Dir(_), true) => {}
            (MemKind::Dir(_), false) => return Err(Errno::EISDIR),
            (_, true) => return Err(Errno::ENOTDIR),
            _ => {}
        }
        d.remove(name);
        drop(d);
        if dir {
            self.meta.locked().nlink -= 1;
        }
        {
            let mut m = node.meta.locked();
            m.nlink = m.nlink.saturating_sub(if dir { 2 } else { 1 });
            m.ctime = now();
        }
        self.touch();
        Ok(())
    }

    /// Adds a hard link to `target` as `name`.
    pub fn link(&self, name: &[u8], target: &Arc<MemInode>) -> Result<(), Errno> {
        if target.is_dir() {
            return Err(Errno::EPERM);
        }
        if !Arc::ptr_eq(&self.fs, &target.fs) {
            return Err(Errno::EXDEV);
        }
        let mut d = self.dir()?;
        if d.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        d.insert(name.to_vec(), target.clone());
        drop(d);
        target.meta.locked().nlink += 1;
        self.touch();
        Ok(())
    }

    /// The symlink target.
    pub fn readlink(&self) -> Option<&[u8]> {
        match &self.kind {
            MemKind::Symlink(t) => Some(t),
            _ => None,
        }
    }

    /// Reads at `pos` into `out`; returns the count.
    pub fn read_at(&self, pos: u64, out: &mut [u8]) -> Result<usize, Errno> {
        let MemKind::File(d) = &self.kind else {
            return Err(Errno::EINVAL);
        };
        let d = d.locked();
        let n = (out.len() as u64).min(d.len.saturating_sub(pos)) as usize;
        if let (Some(r), true) = (&d.region, n > 0) {
            self.fs.mf.read(r.offset() + pos, &mut out[..n]);
        }
        drop(d);
        self.meta.locked().atime = now();
        Ok(n)
    }

    /// Reads from `pos` into guest buffers, through a Sentry buffer of at
    /// most [`IO_CHUNK`] bytes whatever their length; returns the count
    /// read (short at the end of the file).
    pub fn read_to_guest(&self, pos: u64, dst: &GuestBufs<'_>) -> Result<usize, Errno> {
        let MemKind::File(d) = &self.kind else {
            return Err(Errno::EINVAL);
        };
        let d = d.locked();
        let n = (dst.len() as u64).min(d.len.saturating_sub(pos)) as usize;
        if let (Some(r), true) = (&d.region, n > 0) {
            // The guest buffer may be a mapping of this very file: staging
            // in Sentry memory keeps the two copies apart.
            let mut stage = Stage::new();
            let mut done = 0;
            while done < n {
                let piece = stage.space(IO_CHUNK.min(n - done));
                self.fs.mf.read(r.offset() + pos + done as u64, piece);
                done += dst.write_at(done, piece);
            }
        }
        drop(d);
        self.meta.locked().atime = now();
        Ok(n)
    }

    /// Writes `data` at `pos` (or at the end with `append`); returns the new
    /// end of the write and how many bytes it wrote (fewer than asked when
    /// the file system is full).
    pub fn write_at(&self, pos: u64, data: &[u8], append: bool) -> Result<(u64, usize), Errno> {
        self.write_from(pos, data, append)
    }

    /// [`MemInode::write_at`] from any source, guest buffers included: the
    /// bytes go through a Sentry buffer of at most [`IO_CHUNK`] bytes, all
    /// under the file's lock, so the write stays one write (`O_APPEND`
    /// writers do not interleave) however long it is.
    pub fn write_from<S: ByteSource + ?Sized>(
        &self,
        pos: u64,
        data: &S,
        append: bool,
    ) -> Result<(u64, usize), Errno> {
        let MemKind::File(d) = &self.kind else {
            return Err(Errno::EINVAL);
        };
        let mut d = d.locked();
        let start = if append { d.len } else { pos };
        if data.is_empty() {
            return Ok((start, 0));
        }
        let mut end = start.checked_add(data.len() as u64).ok_or(Errno::EFBIG)?;
        let old_len = d.len;
        let seals = self.sealing.seals.load(Ordering::Relaxed);
        if seals & (seal::WRITE | seal::FUTURE_WRITE) != 0 {
            return Err(Errno::EPERM);
        }
        if seals & seal::GROW != 0 && end > old_len {
            // shmem_write_begin() refuses, page by page, each piece that
            // would end past the size: the pages wholly inside are written
            // and the count is short, or nothing is and the write is EPERM.
            let inside = (old_len - old_len % PAGE_SIZE).saturating_sub(start);
            if inside == 0 {
                return Err(Errno::EPERM);
            }
            end = start + inside;
        }
        if end > old_len {
            // Past the limit, the bytes that fit are written and the count
            // is short; with no room at all the write is `ENOSPC`
            // (write(2), as tmpfs answers). A hole before `start` is
            // charged like data.
            let granted = self.fs.charge_up_to(end - old_len);
            if old_len + granted <= start {
                self.fs.refund(granted);
                return Err(Errno::ENOSPC);
            }
            end = old_len + granted;
            if let Err(e) = d.reserve(&self.fs.mf, end) {
                self.fs.refund(granted);
                return Err(e);
            }
        }
        let n = (end - start) as usize;
        if let Some(r) = &d.region {
            let mut stage = Stage::new();
            let mut done = 0;
            while done < n {
                let piece = stage.load(data, done, IO_CHUNK.min(n - done));
                if piece.is_empty() {
                    break;
                }
                self.fs.mf.write(r.offset() + start + done as u64, piece);
                done += piece.len();
            }
        }
        d.len = d.len.max(end);
        drop(d);
        self.touch();
        Ok((end, n))
    }

    /// Writes all of `data` at `pos`, or fails (`ENOSPC` when it does not
    /// fit).
    pub fn write_all_at(&self, pos: u64, data: &[u8]) -> Result<(), Errno> {
        match self.write_at(pos, data, false)? {
            (_, n) if n == data.len() => Ok(()),
            _ => Err(Errno::ENOSPC),
        }
    }

    /// Sets the size (`truncate`).
    pub fn truncate(&self, size: u64) -> Result<(), Errno> {
        let MemKind::File(d) = &self.kind else {
            return Err(if self.is_dir() {
                Errno::EISDIR
            } else {
                Errno::EINVAL
            });
        };
        let mut d = d.locked();
        let old = d.len;
        // shmem_setattr(): the size seals.
        let seals = self.sealing.seals.load(Ordering::Relaxed);
        if (size < old && seals & seal::SHRINK != 0) || (size > old && seals & seal::GROW != 0) {
            return Err(Errno::EPERM);
        }
        if size > old {
            self.fs.charge(size - old)?;
            if let Err(e) = d.reserve(&self.fs.mf, size) {
                self.fs.refund(size - old);
                return Err(e);
            }
        } else {
            self.fs.refund(old - size);
            // Bytes past the new end read as zeros if the file grows again.
            if let Some(r) = &d.region {
                let cut = size.next_multiple_of(PAGE_SIZE);
                if cut > size {
                    self.fs.mf.write(
                        r.offset() + size,
                        &vec![0u8; (cut - size).min(r.len() - size) as usize],
                    );
                }
                if cut < r.len() {
                    self.fs.mf.punch(r.offset() + cut, r.len() - cut);
                }
            }
        }
        d.len = size;
        drop(d);
        self.touch();
        Ok(())
    }

    /// `fallocate(2)` on a regular file, as tmpfs does it (shmem_fallocate()):
    /// `punch` zeroes `[off, off + len)` inside the file (refused under a
    /// write seal); otherwise the file grows to cover the range unless
    /// `keep_size` (refused under `F_SEAL_GROW` when it reaches past the
    /// end). Space is charged when the size grows, as for `ftruncate`.
    pub fn fallocate(&self, punch: bool, keep_size: bool, off: u64, len: u64) -> Result<(), Errno> {
        let MemKind::File(d) = &self.kind else {
            return Err(Errno::ENODEV);
        };
        let end = off.checked_add(len).ok_or(Errno::EFBIG)?;
        let seals = self.sealing.seals.load(Ordering::Relaxed);
        if punch {
            if seals & (seal::WRITE | seal::FUTURE_WRITE) != 0 {
                return Err(Errno::EPERM);
            }
            let d = d.locked();
            let stop = end.min(d.len);
            if let (Some(r), true) = (&d.region, off < stop) {
                let stop = stop.min(r.len());
                // Whole pages are given back; the partial ones at either
                // edge are zeroed.
                let first = off.next_multiple_of(PAGE_SIZE).min(stop);
                let last = (stop - stop % PAGE_SIZE).max(first);
                let zero = |from: u64, to: u64| {
                    if to > from {
                        self.fs
                            .mf
                            .write(r.offset() + from, &vec![0u8; (to - from) as usize]);
                    }
                };
                zero(off, first);
                zero(last, stop);
                if last > first {
                    self.fs.mf.punch(r.offset() + first, last - first);
                }
            }
            drop(d);
            self.touch();
            return Ok(());
        }
        let size = self.size();
        if end > size && seals & seal::GROW != 0 {
            return Err(Errno::EPERM);
        }
        if end > size && !keep_size {
            self.truncate(end)?;
        }
        Ok(())
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        match &self.kind {
            MemKind::File(d) => d.locked().len,
            _ => 0,
        }
    }

    /// A regular file's pages `first..=last` that hold memory (see
    /// [`FileData::resident_pages`]); none for other kinds.
    pub fn resident_pages(&self, first: u64, last: u64) -> u64 {
        match &self.kind {
            MemKind::File(d) => d.locked().resident_pages(first, last),
            _ => 0,
        }
    }

    /// The memory-file pages behind a shared mapping of `[off, off + len)`.
    pub fn shared_region(&self, off: u64, len: u64) -> Result<Arc<SharedRegion>, Errno> {
        let MemKind::File(d) = &self.kind else {
            return Err(Errno::ENODEV);
        };
        d.locked().region_for(&self.fs.mf, off, len)
    }

    /// An extended attribute's value.
    pub fn get_xattr(&self, name: &[u8]) -> Result<Vec<u8>, Errno> {
        self.xattrs
            .locked()
            .get(name)
            .cloned()
            .ok_or(Errno::ENODATA)
    }

    /// Sets an extended attribute (`XATTR_CREATE` 1: it must not exist,
    /// `XATTR_REPLACE` 2: it must). The value is charged to the file
    /// system like file data.
    pub fn set_xattr(&self, name: &[u8], value: &[u8], flags: u32) -> Result<(), Errno> {
        let mut x = self.xattrs.locked();
        let old = x.get(name).map(Vec::len);
        match old {
            Some(_) if flags & 1 != 0 => return Err(Errno::EEXIST),
            None if flags & 2 != 0 => return Err(Errno::ENODATA),
            _ => {}
        }
        let old = old.map_or(0, |l| l + name.len()) as u64;
        let new = (value.len() + name.len()) as u64;
        if new > old {
            self.fs.charge(new - old)?;
        } else {
            self.fs.refund(old - new);
        }
        x.insert(name.to_vec(), value.to_vec());
        drop(x);
        self.meta.locked().ctime = now();
        Ok(())
    }

    /// The names of the extended attributes.
    pub fn list_xattr(&self) -> Vec<Vec<u8>> {
        self.xattrs.locked().keys().cloned().collect()
    }

    /// Removes an extended attribute.
    pub fn remove_xattr(&self, name: &[u8]) -> Result<(), Errno> {
        let v = self.xattrs.locked().remove(name).ok_or(Errno::ENODATA)?;
        self.fs.refund((v.len() + name.len()) as u64);
        self.meta.locked().ctime = now();
        Ok(())
    }

    /// `chmod`.
    pub fn set_mode(&self, mode: u32) {
        let mut m = self.meta.locked();
        m.mode = (m.mode & abi::S_IFMT) | (mode & 0o7777);
        m.ctime = now();
    }

    /// What a write or a truncation does to the set-ID bits (Linux's
    /// `file_remove_privs`): unless the caller holds `CAP_FSETID`
    /// (`fsetid`), they go as [`setid_bits_killed`] says, so that nobody
    /// can put other code in a program that runs with its owner's ids; a
    /// set-group-ID bit without group execute goes too when the caller is
    /// not in the file's group (`in_group`), as since Linux 6.2
    /// (`setattr_should_drop_sgid`).
    pub fn remove_privs(&self, fsetid: bool, in_group: impl Fn(u32) -> bool) {
        if fsetid {
            return;
        }
        let mut m = self.meta.locked();
        let mut kill = setid_bits_killed(m.mode);
        if m.mode & abi::S_IFMT == abi::S_IFREG && m.mode & abi::S_ISGID != 0 && !in_group(m.gid) {
            kill |= abi::S_ISGID;
        }
        if kill != 0 {
            m.mode &= !kill;
            m.ctime = now();
        }
    }

    /// `chown` (`u32::MAX` leaves a field unchanged); the caller clears
    /// what [`setid_bits_killed`] says.
    pub fn set_owner(&self, uid: u32, gid: u32) {
        let mut m = self.meta.locked();
        if uid != u32::MAX {
            m.uid = uid;
        }
        if gid != u32::MAX {
            m.gid = gid;
        }
        m.ctime = now();
    }

    /// Sets all three times exactly (copy-up keeps the original's times).
    pub fn restore_times(&self, atime: Timespec, mtime: Timespec, ctime: Timespec) {
        let mut m = self.meta.locked();
        m.atime = atime;
        m.mtime = mtime;
        m.ctime = ctime;
    }

    /// `utimensat`; `None` leaves a time unchanged.
    pub fn set_times(&self, atime: Option<Timespec>, mtime: Option<Timespec>) {
        let mut m = self.meta.locked();
        if let Some(a) = atime {
            m.atime = a;
        }
        if let Some(t) = mtime {
            m.mtime = t;
        }
        m.ctime = now();
    }
}

/// `rename(2)` between two directories of one tmpfs. `RENAME_NOREPLACE`
/// (1) and `RENAME_EXCHANGE` (2) as renameat2(2) describes.
pub fn rename(
    from: &Arc<MemInode>,
    old: &[u8],
    to: &Arc<MemInode>,
    new: &[u8],
    flags: u32,
) -> Result<(), Errno> {
    if !Arc::ptr_eq(&from.fs, &to.fs) {
        return Err(Errno::EXDEV);
    }
    if Arc::ptr_eq(from, to) {
        let mut d = from.dir()?;
        let node = d.get(old).cloned().ok_or(Errno::ENOENT)?;
        let existing = d.get(new).cloned();
        if flags & 2 != 0 {
            let other = existing.ok_or(Errno::ENOENT)?;
            d.insert(new.to_vec(), node);
            d.insert(old.to_vec(), other);
        } else {
            if let Some(e) = &existing {
                check_replace(&node, e, flags)?;
                if Arc::ptr_eq(e, &node) {
                    return Ok(());
                }
            }
            d.remove(old);
            d.insert(new.to_vec(), node);
        }
        drop(d);
        from.touch();
        return Ok(());
    }
    // Lock both directories in inode order so two renames cannot deadlock.
    let (mut src, mut dst) = if from.ino < to.ino {
        let s = from.dir()?;
        (s, to.dir()?)
    } else {
        let d = to.dir()?;
        (from.dir()?, d)
    };
    let node = src.get(old).cloned().ok_or(Errno::ENOENT)?;
    let existing = dst.get(new).cloned();
    if flags & 2 != 0 {
        let other = existing.ok_or(Errno::ENOENT)?;
        dst.insert(new.to_vec(), node.clone());
        src.insert(old.to_vec(), other.clone());
        drop(src);
        drop(dst);
        if node.is_dir() != other.is_dir() {
            let (gain, lose) = if node.is_dir() {
                (to, from)
            } else {
                (from, to)
            };
            gain.meta.locked().nlink += 1;
            lose.meta.locked().nlink -= 1;
        }
    } else {
        if let Some(e) = &existing {
            check_replace(&node, e, flags)?;
        }
        src.remove(old);
        dst.insert(new.to_vec(), node.clone());
        drop(src);
        drop(dst);
        if node.is_dir() {
            from.meta.locked().nlink -= 1;
            if existing.is_none() {
                to.meta.locked().nlink += 1;
            }
        }
    }
    from.touch();
    to.touch();
    Ok(())
}

/// Whether `node` may replace `existing` (and unlinks the latter's count).
fn check_replace(node: &Arc<MemInode>, existing: &Arc<MemInode>, flags: u32) -> Result<(), Errno> {
    if flags & 1 != 0 {
        return Err(Errno::EEXIST);
    }
    if Arc::ptr_eq(existing, node) {
        return Ok(());
    }
    match (node.is_dir(), existing.is_dir()) {
        (true, false) => return Err(Errno::ENOTDIR),
        (false, true) => return Err(Errno::EISDIR),
        (true, true) => {
            if let MemKind::Dir(c) = &existing.kind {
                if !c.locked().is_empty() {
                    return Err(Errno::ENOTEMPTY);
                }
            }
        }
        _ => {}
    }
    let mut m = existing.meta.locked();
    m.nlink = m
        .nlink
        .saturating_sub(if existing.is_dir() { 2 } else { 1 });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Arc<MemInode>, name: &[u8]) -> Arc<MemInode> {
        dir.create(name, abi::S_IFREG | 0o644, (0, 0), || {
            MemKind::File(Default::default())
        })
        .expect("create")
    }

    #[test]
    fn a_full_tmpfs_writes_what_fits_then_refuses_and_frees_on_unlink() {
        let mf = Arc::new(MemoryFile::new().expect("memory file"));
        let pool = Quota::new(1 << 20);
        let root = MemFs::new_root(mf, &pool, 1, 10_000, 0o1777);
        let f = file(&root, b"f");
        assert_eq!(f.write_at(0, &[7u8; 6000], false), Ok((6000, 6000)));
        // 4000 bytes are left: a write of 6000 at the end writes 4000.
        assert_eq!(f.write_at(0, &[8u8; 6000], true), Ok((10_000, 4000)));
        assert_eq!(f.write_at(0, b"x", true), Err(Errno::ENOSPC));
        // Rewriting bytes that exist needs no room.
        assert_eq!(f.write_at(0, b"abc", false), Ok((3, 3)));
        assert_eq!(root.fs().usage(), (10_000, 10_000));
        let mut tail = [0u8; 2];
        assert_eq!(f.read_at(9998, &mut tail), Ok(2));
        assert_eq!(tail, [8, 8]);
        // Growing by truncate is refused the same way; shrinking frees.
        assert_eq!(f.truncate(10_001), Err(Errno::ENOSPC));
        root.unlink(b"f", false).expect("unlink");
        drop(f);
        assert_eq!(root.fs().usage(), (10_000, 0));
        assert_eq!(pool.used(), 0);
        let g = file(&root, b"g");
        assert_eq!(g.write_at(0, &[1u8; 10_000], false), Ok((10_000, 10_000)));
    }

    #[test]
    fn tmpfs_instances_share_the_sandbox_pool() {
        let mf = Arc::new(MemoryFile::new().expect("memory file"));
        let pool = Quota::new(12_000);
        let a = MemFs::new_root(mf.clone(), &pool, 1, 10_000, 0o1777);
        let b = MemFs::new_root(mf, &pool, 2, 10_000, 0o1777);
        let fa = file(&a, b"fa");
        let fb = file(&b, b"fb");
        assert_eq!(fa.write_at(0, &[1u8; 8000], false), Ok((8000, 8000)));
        // `b` has 10000 of its own but the pool only 4000 more.
        assert_eq!(fb.write_at(0, &[2u8; 8000], false), Ok((4000, 4000)));
        assert_eq!(fb.write_at(4000, b"y", false), Err(Errno::ENOSPC));
        // statfs of `b` shows no room left.
        assert_eq!(b.fs().usage(), (4000, 4000));
        fa.truncate(0).expect("truncate");
        assert_eq!(fb.write_at(4000, &[2u8; 6000], false), Ok((10_000, 6000)));
        assert_eq!(pool.used(), 10_000);
    }

    #[test]
    fn memfds_draw_on_the_shared_pool_and_are_freed_with_their_last_reference() {
        let mf = Arc::new(MemoryFile::new().expect("memory file"));
        let pool = Quota::new(12_000);
        let tmp = MemFs::new_root(mf.clone(), &pool, 1, 12_000, 0o1777);
        let memfds = MemFs::new_root(mf, &pool, 2, 12_000, 0o1777);
        let m = MemInode::memfd(memfds.fs(), b"m".to_vec(), false, (0, 0)).expect("memfd");
        assert_eq!(m.memfd_name(), Some(&b"m"[..]));
        assert_eq!(m.stat().mode, abi::S_IFREG | 0o777);
        assert_eq!(m.stat().nlink, 0);
        m.truncate(10_000).expect("truncate");
        // What the memfd holds is gone from /tmp's room as well.
        let f = file(&tmp, b"f");
        assert_eq!(f.write_at(0, &[1u8; 4000], false), Ok((2000, 2000)));
        drop(m);
        assert_eq!(pool.used(), 2000);
    }

    #[test]
    fn seals_refuse_what_they_name_with_eperm() {
        let mf = Arc::new(MemoryFile::new().expect("memory file"));
        let pool = Quota::new(1 << 20);
        let root = MemFs::new_root(mf, &pool, 1, 1 << 20, 0o1777);
        // A named tmpfs file and a memfd made without MFD_ALLOW_SEALING:
        // F_SEAL_SEAL from the start.
        let named = file(&root, b"f");
        assert_eq!(named.seals(), Ok(seal::SEAL));
        assert_eq!(named.add_seals(seal::WRITE), Err(Errno::EPERM));
        assert_eq!(root.seals(), Err(Errno::EINVAL));
        let m = MemInode::memfd(root.fs(), Vec::new(), true, (0, 0)).expect("memfd");
        assert_eq!(m.seals(), Ok(0));
        m.truncate(8192).expect("truncate");
        m.add_seals(seal::SHRINK | seal::GROW).expect("seal");
        assert_eq!(m.truncate(4096), Err(Errno::EPERM));
        assert_eq!(m.truncate(8193), Err(Errno::EPERM));
        assert_eq!(m.truncate(8192), Ok(()));
        // Growing writes: the whole pages inside the size go in, the rest
        // is refused (a short count), none at all is EPERM.
        assert_eq!(m.write_at(4000, &[1u8; 8192], false), Ok((8192, 4192)));
        assert_eq!(m.write_at(8190, b"abc", false), Ok((8192, 2)));
        assert_eq!(m.write_at(0, b"x", true), Err(Errno::EPERM));
        assert_eq!(m.write_at(8000, b"inside", false), Ok((8006, 6)));
        m.add_seals(seal::FUTURE_WRITE).expect("seal");
        assert_eq!(m.write_at(0, b"x", false), Err(Errno::EPERM));
        assert!(m.write_sealed());
        assert_eq!(m.writable_mapping().err(), Some(Errno::EPERM));
    }

    #[test]
    fn seal_write_waits_for_every_writable_mapping_to_go() {
        let mf = Arc::new(MemoryFile::new().expect("memory file"));
        let pool = Quota::new(1 << 20);
        let root = MemFs::new_root(mf, &pool, 1, 1 << 20, 0o1777);
        let m = MemInode::memfd(root.fs(), Vec::new(), true, (0, 0)).expect("memfd");
        let first = m.writable_mapping().expect("mapping");
        // A split VMA or a fork holds a clone of the pin.
        let split = first.clone();
        drop(first);
        assert_eq!(m.add_seals(seal::WRITE), Err(Errno::EBUSY));
        assert_eq!(m.seals(), Ok(0));
        drop(split);
        assert_eq!(m.add_seals(seal::WRITE), Ok(()));
        assert_eq!(m.writable_mapping().err(), Some(Errno::EPERM));
        // F_SEAL_EXEC on a file with execute bits seals the contents too.
        let x = MemInode::memfd(root.fs(), Vec::new(), true, (0, 0)).expect("memfd");
        x.add_seals(seal::EXEC).expect("seal");
        assert_eq!(
            x.seals(),
            Ok(seal::EXEC | seal::SHRINK | seal::GROW | seal::WRITE | seal::FUTURE_WRITE)
        );
        x.add_seals(seal::SEAL).expect("seal");
        assert_eq!(x.add_seals(0), Err(Errno::EPERM));
    }
}
