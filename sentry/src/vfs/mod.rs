//! The guest's file system view for `ferrovisor do`: a read-only host
//! directory as root, with a synthetic `/dev` and masked `/proc` and `/sys`.
//!
//! Paths are resolved by the Sentry one component at a time: each component is
//! opened `O_PATH | O_NOFOLLOW` relative to its parent's descriptor, symlinks
//! are read and followed here, and `..` pops the Sentry's own stack of
//! directories, so no name or link can climb out of the root.
//!
//! An OCI container's masked and read-only paths (`linux.maskedPaths`,
//! `linux.readonlyPaths`) are fixed over the finished tree at boot, as
//! runc's mounts over them are: they go by the path from the sandbox's
//! root, wherever a walk comes from, and no guest call can undo them.

pub mod fasync;
pub mod file;
pub mod inotify;
pub mod lock;
pub mod volume_watch;

use std::collections::HashMap;
use std::collections::VecDeque;
use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use abi::{Errno, Stat};

use crate::host;
use crate::sync::Locked;

/// Maximum symlinks followed in one walk (Linux's `MAXSYMLINKS`).
const MAX_SYMLINKS: u32 = 40;
/// Maximum length of one path component (`NAME_MAX`).
pub const NAME_MAX: usize = 255;
/// Maximum path length (`PATH_MAX`, including the NUL).
pub const PATH_MAX: usize = 4096;

/// Host file systems whose contents describe the host itself (processes,
/// devices, kernel state). Even when a root directory contains one of them
/// mounted, the guest sees an empty directory instead.
const MASKED_FS_MAGIC: &[i64] = &[
    0x9fa0,      // proc
    0x6265_6572, // sysfs
    0x1cd1,      // devpts
    0x6462_6720, // debugfs
    0x7472_6163, // tracefs
    0x7363_6673, // securityfs
    0x0027_e0eb, // cgroup
    0x6367_7270, // cgroup2
    0xcafe_4a11, // bpf
    0x6265_6570, // configfs
    0x6573_5546, // fusectl
    0x6165_676c, // pstore
    0xde5e_81e4, // efivarfs
    0x4249_4e4d, // binfmt_misc
    0x1980_0202, // mqueue
    0xf97c_ff8c, // selinuxfs
    0x6e73_6673, // nsfs
];

/// A device the Sentry implements itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// `/dev/null`
    Null,
    /// `/dev/zero`
    Zero,
    /// `/dev/full`
    Full,
    /// `/dev/random`
    Random,
    /// `/dev/urandom`
    Urandom,
    /// `/dev/tty`: the caller's controlling terminal
    Tty,
    /// `/dev/ptmx` (and `/dev/pts/ptmx`): opening allocates a pty pair
    Ptmx,
    /// an NVIDIA device of a sandbox given a GPU (nvproxy)
    Nvidia(NvDevice),
}

/// The NVIDIA device files a sandbox with a GPU has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NvDevice {
    /// `/dev/nvidiactl`
    Ctl,
    /// `/dev/nvidia-uvm`
    Uvm,
    /// `/dev/nvidiaN`
    Gpu(u8),
}

impl NvDevice {
    /// The device named `name` in `/dev` (`nvidiactl`, `nvidia-uvm`,
    /// `nvidia0`; not `nvidia00`).
    pub fn from_name(name: &str) -> Option<NvDevice> {
        match name.strip_prefix("nvidia")? {
            "ctl" => Some(NvDevice::Ctl),
            "-uvm" => Some(NvDevice::Uvm),
            n => n
                .parse::<u8>()
                .ok()
                .filter(|i| i.to_string() == n)
                .map(NvDevice::Gpu),
        }
    }

    /// Its name in `/dev` (and on the host).
    pub fn name(self) -> String {
        match self {
            NvDevice::Ctl => "nvidiactl".into(),
            NvDevice::Uvm => "nvidia-uvm".into(),
            NvDevice::Gpu(n) => format!("nvidia{n}"),
        }
    }

    /// `(major, minor)`: nvidia.ko's major 195, the control device minor
    /// 255, GPU N minor N; nvidia-uvm's major is given out at load time,
    /// and 511 stands for it.
    pub fn number(self) -> (u64, u64) {
        match self {
            NvDevice::Ctl => (195, 255),
            NvDevice::Uvm => (511, 0),
            NvDevice::Gpu(n) => (195, u64::from(n)),
        }
    }

    /// Its inode number in `/dev` (after the memory and terminal devices').
    fn ino(self) -> u64 {
        match self {
            NvDevice::Ctl => 300,
            NvDevice::Uvm => 301,
            NvDevice::Gpu(n) => 302 + u64::from(n),
        }
    }
}

const DEVICES: &[(&str, Device, u32)] = &[
    ("full", Device::Full, 7),
    ("null", Device::Null, 3),
    ("random", Device::Random, 8),
    ("urandom", Device::Urandom, 9),
    ("zero", Device::Zero, 5),
    ("tty", Device::Tty, 0),
    ("ptmx", Device::Ptmx, 2),
];

impl Device {
    /// `(major, minor)` of the device number: memory devices are major 1,
    /// the terminal devices major 5 (TTYAUX_MAJOR).
    pub fn number(self) -> (u64, u64) {
        let minor = DEVICES
            .iter()
            .find(|(_, d, _)| *d == self)
            .map_or(3, |&(_, _, m)| u64::from(m));
        match self {
            Device::Nvidia(d) => d.number(),
            Device::Tty | Device::Ptmx => (5, minor),
            _ => (1, minor),
        }
    }

    /// Its inode number in `/dev`.
    pub fn ino(self) -> u64 {
        match self {
            Device::Nvidia(d) => d.ino(),
            _ => {
                let (major, minor) = self.number();
                10 + (major - 1) * 16 + minor
            }
        }
    }
}

/// Inode of a container's `/dev/ptmx` link (after those of `/dev/fd` and
/// the stdio links).
const PTMX_LINK_INO: u64 = 40;

/// Device number (`st_dev`) of the devpts file system: its own, as on
/// Linux, where every mount has one (`SYNTH_DEV + 0x20` is /proc's).
const DEVPTS_DEV: u64 = SYNTH_DEV + 0x21;

/// Device number of the first extra tmpfs mount; each later one takes the
/// next, never one a file system above has.
const EXTRA_TMPFS_DEV: u64 = SYNTH_DEV + 0x100;
/// Whether a mount the guest made takes writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Writes {
    Allowed,
    Refused,
    /// refused for good: a bind of a path the sandbox's config made
    /// read-only
    RefusedForGood,
}

impl Writes {
    fn refused(read_only: bool) -> Writes {
        if read_only {
            Writes::Refused
        } else {
            Writes::Allowed
        }
    }
}
/// Most file systems the guest may have mounted at once.
const MAX_GUEST_MOUNTS: usize = 1000;

/// Device number of the root overlay's upper layer (a tmpfs of the
/// Sentry's): one mount with the root's image below it, so its
/// [`mount_key`] is the root's, 0.
pub const UPPER_DEV: u64 = SYNTH_DEV + 0x13;

/// The type tmpfs gives in the mount table ([`Inode::fs_type`]): the
/// in-memory file systems the Sentry itself writes to are those.
pub const TMPFS: &str = "tmpfs";

/// Device number of the Sentry's synthetic file systems.
const SYNTH_DEV: u64 = 0x3_0000_0000;

/// Device number (`st_dev`) of /proc.
pub const PROC_DEV: u64 = SYNTH_DEV + 0x20;

/// [`mount_key`] of /proc (and /sys, which the same generator serves).
pub const PROC_MOUNT_KEY: usize = 3;

fn makedev(major: u64, minor: u64) -> u64 {
    ((major & 0xfff) << 8) | (minor & 0xff) | ((minor & !0xff) << 12)
}

/// A host file or directory held open by the Sentry.
pub struct HostFile {
    fd: OwnedFd,
    /// the host's `(st_dev, st_ino)`, asked for once when first needed
    /// (the page cache of volume files is keyed by it)
    identity: std::sync::OnceLock<(u64, u64)>,
    /// for a file of the root's read-only image: the sandbox's images,
    /// where its image for private mappings is found (see
    /// [`crate::mm::fileimage`])
    image: Option<Arc<crate::mm::fileimage::Images>>,
}

impl fmt::Debug for HostFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HostFile({:?})", self.fd)
    }
}

impl crate::mm::Mappable for HostFile {
    fn fd(&self) -> BorrowedFd<'_> {
        HostFile::fd(self)
    }

    fn identity(&self) -> Result<(u64, u64), Errno> {
        HostFile::identity(self)
    }

    fn images(&self) -> Option<&Arc<crate::mm::fileimage::Images>> {
        self.image.as_ref()
    }
}

impl HostFile {
    /// Wraps a descriptor the gofer donated.
    pub fn new(fd: OwnedFd) -> HostFile {
        HostFile {
            fd,
            identity: Default::default(),
            image: None,
        }
    }

    /// Wraps a descriptor of a regular file of the root's read-only
    /// image, which the sandbox cannot change: private mappings of it
    /// share its image, found among `images` (see [`crate::mm::fileimage`]).
    pub fn of_root_image(fd: OwnedFd, images: Arc<crate::mm::fileimage::Images>) -> HostFile {
        HostFile {
            image: Some(images),
            ..HostFile::new(fd)
        }
    }

    /// The file's image for private mappings, when it has one (a file of
    /// the root's image that is neither empty nor huge).
    pub fn image(
        &self,
        mf: &Arc<crate::mm::memfile::MemoryFile>,
    ) -> Result<Option<Arc<crate::mm::fileimage::FileImage>>, Errno> {
        match &self.image {
            Some(images) => images.image(self, mf),
            None => Ok(None),
        }
    }

    /// The host file's identity, `(st_dev, st_ino)`: every open of one
    /// file, through any name or link, has the same.
    pub fn identity(&self) -> Result<(u64, u64), Errno> {
        if let Some(&id) = self.identity.get() {
            return Ok(id);
        }
        let st = host::fstat(self.fd.as_fd())?;
        Ok(*self.identity.get_or_init(|| (st.st_dev, st.st_ino)))
    }

    /// The host descriptor.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A resolved object in the guest's tree.
#[derive(Clone, Debug)]
pub enum Node {
    /// a host object, held by a gofer handle
    Host {
        /// the handle
        h: Arc<GoferRef>,
        /// its `st_mode`
        mode: u32,
    },
    /// the synthetic `/dev`
    DevDir,
    /// a synthetic device
    Dev(Device),
    /// an empty read-only directory standing in for a masked host one
    Masked {
        /// inode number to report
        ino: u64,
    },
    /// a directory of the root overlay: a read-only host directory below,
    /// the sandbox's own changes (a tmpfs tree) above
    Ovl(Arc<OvlDir>),
    /// `/dev/pts`
    PtsDir,
    /// `/dev/pts/N`, a pty slave
    Pts(u32),
    /// a node of a file system implemented outside vfs (tmpfs and the
    /// overlay's upper layer, `/proc`, `/sys`, `/dev/mqueue`)
    Inode(Arc<dyn Inode>),
}

/// A node of a file system whose code lives outside vfs (Linux's
/// `inode_operations`, with what its `super_block` says): vfs asks it what
/// it cannot know itself.
pub trait Inode: Send + Sync + fmt::Debug + std::any::Any {
    /// `stat(2)`.
    fn stat(&self) -> Result<Stat, Errno>;
    /// Whether it is a directory.
    fn is_dir(&self) -> bool;
    /// A directory's child `name`.
    fn lookup(&self, name: &[u8]) -> Result<Node, Errno> {
        let _ = name;
        Err(Errno::ENOTDIR)
    }
    /// A directory's entries, `.` and `..` first.
    fn list(&self) -> Result<Vec<DirEntry>, Errno> {
        Err(Errno::ENOTDIR)
    }
    /// The same for every node of its file system, different from every
    /// other file system's ([`mount_key`]).
    fn mount_key(&self) -> usize;
    /// `statfs(2)` of its file system.
    fn statfs(&self, s: &mut abi::Statfs);
    /// Whether it is a symbolic link.
    fn is_symlink(&self) -> bool {
        false
    }
    /// A symbolic link's target.
    fn readlink(&self) -> Result<Vec<u8>, Errno> {
        Err(Errno::EINVAL)
    }
    /// The open file a `/proc/[pid]/fd/N` link names: a walk through it
    /// goes to that file, not to a path.
    fn open_file(&self) -> Option<&Arc<file::FileDescription>> {
        None
    }
    /// Whether, found as `name` in `parent`, it is one of /proc's "magic"
    /// links, which name an object rather than a path (`openat2`'s
    /// `RESOLVE_NO_MAGICLINKS`).
    fn is_magic_link(&self, parent: &Node, name: &[u8]) -> bool {
        let _ = (parent, name);
        false
    }
    /// Its file system's type as the mount table names it; `None`: a
    /// guest's mount of it shows as a bind.
    fn fs_type(&self) -> Option<&'static str> {
        None
    }
    /// A regular file's bytes from `pos` (`EINVAL` for what holds none).
    fn read_at(&self, pos: u64, out: &mut [u8]) -> Result<usize, Errno> {
        let _ = (pos, out);
        Err(Errno::EINVAL)
    }
    /// Whether its file system refuses writes (a guest's `mount -o ro`).
    fn read_only(&self) -> bool {
        false
    }
    /// Makes its file system read-only or writable (a remount).
    fn set_read_only(&self, read_only: bool) {
        let _ = read_only;
    }

    // What the root overlay asks of its upper layer, an in-memory file
    // system (and what vfs puts in a tmpfs itself: mount points, the
    // Sentry's own files).

    /// Whether it marks a lower entry of its name deleted (an overlay
    /// whiteout).
    fn is_whiteout(&self) -> bool {
        false
    }
    /// Whether a directory hides the lower one of its name (opaque).
    fn is_opaque(&self) -> bool {
        false
    }
    /// A directory's entries, whiteouts included: name, inode number,
    /// `st_mode`.
    fn entries_all(&self) -> Result<Vec<(Vec<u8>, u64, u32)>, Errno> {
        Err(Errno::ENOTDIR)
    }
    /// Makes `name` in this directory, of `mode` (its type agreeing with
    /// `kind`), owned by `owner`.
    fn create(
        &self,
        name: &[u8],
        mode: u32,
        owner: (u32, u32),
        kind: NewInode,
    ) -> Result<Arc<dyn Inode>, Errno> {
        let _ = (name, mode, owner, kind);
        Err(Errno::EROFS)
    }
    /// Removes the whiteout `name`, if there is one (something is about to
    /// be made there); whether there was.
    fn clear_whiteout(&self, name: &[u8]) -> bool {
        let _ = name;
        false
    }
    /// Removes entry `name`, whatever it is.
    fn unlink_any(&self, name: &[u8]) -> Result<(), Errno> {
        let _ = name;
        Err(Errno::EROFS)
    }
    /// Writes all of `data` at `pos`.
    fn write_all_at(&self, pos: u64, data: &[u8]) -> Result<(), Errno> {
        let _ = (pos, data);
        Err(Errno::EROFS)
    }
    /// Gives it an owner.
    fn set_owner(&self, uid: u32, gid: u32) {
        let _ = (uid, gid);
    }
    /// Sets its three times (a copy keeps its original's).
    fn restore_times(&self, atime: abi::Timespec, mtime: abi::Timespec, ctime: abi::Timespec) {
        let _ = (atime, mtime, ctime);
    }
}

/// What [`Inode::create`] makes.
#[derive(Debug)]
pub enum NewInode {
    /// an empty directory
    Dir,
    /// an empty regular file
    File,
    /// a symbolic link to the target
    Symlink(Vec<u8>),
}

/// The child `name` of directory `dir` as an inode (an in-memory file
/// system's children are all inodes).
fn child_inode(dir: &dyn Inode, name: &[u8]) -> Result<Arc<dyn Inode>, Errno> {
    match dir.lookup(name)? {
        Node::Inode(i) => Ok(i),
        _ => Err(Errno::EIO),
    }
}

/// Identifies an inode as [`Node::inode_id`] does.
fn inode_id(i: &dyn Inode) -> usize {
    i as *const dyn Inode as *const () as usize
}

/// The file systems above vfs that it puts in the tree itself, which boot
/// hands it: vfs mounts `/proc`, `/sys`, `/dev/pts` and its tmpfs (`/tmp`,
/// `/run`, `/dev/shm`, the overlay's upper layer, memfds' own) at their
/// places without knowing their types.
pub trait FsImpls: Send + Sync + fmt::Debug + std::any::Any {
    /// `/proc`'s root.
    fn proc_root(&self) -> Node;
    /// `/sys`'s root.
    fn sys_root(&self) -> Node;
    /// Whether pseudo-terminal `n` is live (its `/dev/pts/N` exists).
    fn pty_exists(&self, n: u32) -> bool;
    /// The live pseudo-terminals' numbers, for listing `/dev/pts`.
    fn ptys(&self) -> Vec<u32>;
    /// The NVIDIA devices `/dev` shows: none without a GPU.
    fn gpu_devices(&self) -> Vec<NvDevice> {
        Vec::new()
    }
    /// The root of a new tmpfs with device number `dev`, of at most
    /// `size` bytes drawn from `pool`, with permission bits `mode`.
    fn new_tmpfs(
        &self,
        mf: &Arc<crate::mm::memfile::MemoryFile>,
        pool: &Arc<crate::mm::quota::Quota>,
        dev: u64,
        size: u64,
        mode: u32,
    ) -> Arc<dyn Inode>;
}

impl Node {
    /// The node's own type, when it is a [`Node::Inode`] of type `T`.
    pub fn inode<T: Inode>(&self) -> Option<&T> {
        match self {
            Node::Inode(i) => (&**i as &dyn std::any::Any).downcast_ref(),
            _ => None,
        }
    }

    /// Identifies the object of a file system whose open files are its
    /// inodes themselves (see [`file::FileImpl::inode_id`]).
    pub fn inode_id(&self) -> Option<usize> {
        match self {
            Node::Inode(i) => Some(inode_id(&**i)),
            _ => None,
        }
    }

    /// The inode, if this is one of a tmpfs (the overlay's upper layer
    /// included): what the Sentry may write itself.
    fn tmpfs(&self) -> Option<&Arc<dyn Inode>> {
        match self {
            Node::Inode(i) if i.fs_type() == Some(TMPFS) => Some(i),
            _ => None,
        }
    }

    /// The open file a `/proc/[pid]/fd/N` link names, if this is one.
    pub fn open_file(&self) -> Option<&Arc<file::FileDescription>> {
        match self {
            Node::Inode(i) => i.open_file(),
            _ => None,
        }
    }
}

/// A directory of the root overlay, named by its path from the root (its
/// upper half is looked up by that path each time, so it appears as soon
/// as anything is written below).
#[derive(Debug)]
pub struct OvlDir {
    /// components from the root
    pub path: Vec<Vec<u8>>,
    /// the host directory below, if any
    pub lower: Option<Node>,
}

impl Node {
    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        match self {
            Node::Host { mode, .. } => mode & abi::S_IFMT == abi::S_IFDIR,
            Node::DevDir | Node::Masked { .. } | Node::PtsDir => true,
            Node::Dev(_) | Node::Pts(_) => false,
            Node::Inode(i) => i.is_dir(),
            Node::Ovl(_) => true,
        }
    }

    /// Whether this is a symbolic link.
    pub fn is_symlink(&self) -> bool {
        match self {
            Node::Host { mode, .. } => mode & abi::S_IFMT == abi::S_IFLNK,
            Node::Inode(i) => i.is_symlink(),
            _ => false,
        }
    }

    /// The target of a symbolic link.
    pub fn readlink(&self) -> Result<Vec<u8>, Errno> {
        match self {
            Node::Host { h, mode } if mode & abi::S_IFMT == abi::S_IFLNK => {
                if h.volume.is_some() {
                    return h.client.readlink(h.handle);
                }
                if let Some(t) = h.target.get() {
                    return Ok(t.clone());
                }
                let t = h.client.readlink(h.handle)?;
                Ok(h.target.get_or_init(|| t).clone())
            }
            Node::Inode(i) => i.readlink(),
            _ => Err(Errno::EINVAL),
        }
    }

    /// `stat` of this node.
    pub fn stat(&self) -> Result<Stat, Errno> {
        match self {
            Node::Host { h, .. } => h.stat(),
            Node::Ovl(d) => {
                let upper = OVL_UPPER
                    .with(|u| u.borrow().clone())
                    .and_then(|root| upper_walk(&root, &d.path));
                match (upper, &d.lower) {
                    // A merged directory: the host's identity, with what the
                    // sandbox changed (mode, owner, times) from the upper one.
                    (Some(u), Some(l)) => {
                        let mut st = l.stat()?;
                        let us = u.stat()?;
                        st.mode = us.mode;
                        st.uid = us.uid;
                        st.gid = us.gid;
                        (st.atime, st.atime_nsec) = (us.atime, us.atime_nsec);
                        (st.mtime, st.mtime_nsec) = (us.mtime, us.mtime_nsec);
                        (st.ctime, st.ctime_nsec) = (us.ctime, us.ctime_nsec);
                        Ok(st)
                    }
                    (Some(u), None) => u.stat(),
                    (None, Some(l)) => l.stat(),
                    (None, None) => Err(Errno::ENOENT),
                }
            }
            Node::DevDir => Ok(synth(abi::S_IFDIR | 0o755, 1, 0)),
            // An OCI mask is runc's read-only tmpfs, whose root keeps
            // tmpfs's mode; a masked host file system shows read-only.
            Node::Masked { ino } if ino & MASK_INO == MASK_INO => {
                Ok(synth(abi::S_IFDIR | 0o1777, *ino, 0))
            }
            Node::Masked { ino } => Ok(synth(abi::S_IFDIR | 0o555, *ino, 0)),
            Node::Dev(d) => {
                let (major, minor) = d.number();
                Ok(synth(abi::S_IFCHR | 0o666, d.ino(), makedev(major, minor)))
            }
            Node::PtsDir => {
                let mut st = synth(abi::S_IFDIR | 0o755, 1, 0);
                st.dev = DEVPTS_DEV;
                Ok(st)
            }
            // devpts numbers a slave's inode N + 3; `ttyname()` relies on
            // fstat of the slave and stat of its path agreeing.
            Node::Pts(n) => {
                let mut st = synth(
                    abi::S_IFCHR | 0o620,
                    u64::from(*n) + 3,
                    makedev(abi::tty::UNIX98_PTY_SLAVE_MAJOR, u64::from(*n)),
                );
                st.dev = DEVPTS_DEV;
                Ok(st)
            }
            Node::Inode(i) => i.stat(),
        }
    }
}

/// `stat` of a synthetic object of the Sentry's: owned by the sandbox's
/// user, empty, with no times.
pub fn synth(mode: u32, ino: u64, rdev: u64) -> Stat {
    let (uid, gid) = host::ids();
    Stat {
        dev: SYNTH_DEV,
        ino,
        nlink: if mode & abi::S_IFMT == abi::S_IFDIR {
            2
        } else {
            1
        },
        mode,
        uid,
        gid,
        pad0: 0,
        rdev,
        size: 0,
        blksize: 4096,
        blocks: 0,
        atime: 0,
        atime_nsec: 0,
        mtime: 0,
        mtime_nsec: 0,
        ctime: 0,
        ctime_nsec: 0,
        unused: [0; 3],
    }
}

/// A symbolic link of the Sentry's own in `/dev` (`/dev/fd`, the stdio
/// links, a container's `/dev/ptmx`): shown as /proc's links are, on
/// /proc's device.
#[derive(Debug)]
struct DevLink {
    ino: u64,
    target: &'static [u8],
}

impl Inode for DevLink {
    fn stat(&self) -> Result<Stat, Errno> {
        let mut st = synth(abi::S_IFLNK | 0o777, self.ino, 0);
        st.dev = PROC_DEV;
        Ok(st)
    }

    fn is_dir(&self) -> bool {
        false
    }

    fn mount_key(&self) -> usize {
        PROC_MOUNT_KEY
    }

    fn statfs(&self, s: &mut abi::Statfs) {
        synth_statfs(s);
    }

    fn is_symlink(&self) -> bool {
        true
    }

    fn readlink(&self) -> Result<Vec<u8>, Errno> {
        Ok(self.target.to_vec())
    }
}

/// `statfs` of the Sentry's read-only synthetic file systems (`/dev`,
/// `/proc`): a read-only tmpfs.
pub fn synth_statfs(s: &mut abi::Statfs) {
    s.f_type = 0x0102_1994; // TMPFS_MAGIC
    s.f_bsize = 4096;
    s.f_namelen = 255;
    s.f_frsize = 4096;
    s.f_flags = 1;
}

/// A path from the root: the chain of directories down to an object, which
/// is what lets `..` stop at the root.
#[derive(Clone, Debug)]
pub struct Location {
    chain: Vec<(Vec<u8>, Node)>,
}

impl Location {
    /// The object itself.
    pub fn node(&self) -> &Node {
        // The chain always holds the root.
        &self.chain[self.chain.len() - 1].1
    }

    /// Whether the object is a host object of the root's own gofer (a
    /// root written through is served as a volume is, but is no mount).
    pub fn on_host_root(&self) -> bool {
        match (&self.chain[0].1, self.node()) {
            (Node::Host { h: root, .. }, Node::Host { h, .. }) => root.mount_id() == h.mount_id(),
            _ => false,
        }
    }

    /// Each step from the sandbox's root down: its name (the root's is
    /// empty) and its node.
    pub fn steps(&self) -> impl Iterator<Item = (&[u8], &Node)> {
        self.chain.iter().map(|(n, node)| (n.as_slice(), node))
    }

    /// The names from the sandbox's root down to this location.
    pub fn names(&self) -> Vec<Vec<u8>> {
        self.chain[1..].iter().map(|(n, _)| n.clone()).collect()
    }

    /// The guest's absolute path of this location.
    pub fn path(&self) -> String {
        if self.chain.len() == 1 {
            return "/".into();
        }
        let mut s = Vec::new();
        for (name, _) in &self.chain[1..] {
            s.push(b'/');
            s.extend_from_slice(name);
        }
        String::from_utf8_lossy(&s).into_owned()
    }

    /// Whether this and `other` name the same place: the same names from
    /// the sandbox's root down. (Locations are always built by walking
    /// from that root, so the names say where they are.)
    pub fn same_place(&self, other: &Location) -> bool {
        self.chain.len() == other.chain.len()
            && self
                .chain
                .iter()
                .zip(&other.chain)
                .all(|((a, _), (b, _))| a == b)
    }

    /// This location's path as seen from `root` (a process's root after
    /// `chroot`), or `None` when it is not at or below `root`.
    pub fn path_from(&self, root: &Location) -> Option<String> {
        let depth = root.chain.len();
        if self.chain.len() < depth
            || !self.chain[..depth]
                .iter()
                .zip(&root.chain)
                .all(|((a, _), (b, _))| a == b)
        {
            return None;
        }
        if self.chain.len() == depth {
            return Some("/".into());
        }
        let mut s = Vec::new();
        for (name, _) in &self.chain[depth..] {
            s.push(b'/');
            s.extend_from_slice(name);
        }
        Some(String::from_utf8_lossy(&s).into_owned())
    }

    /// Whether inode `m` is on the path to this location.
    pub fn chain_contains(&self, m: &dyn Inode) -> bool {
        let id = inode_id(m);
        self.chain.iter().any(|(_, n)| n.inode_id() == Some(id))
    }

    /// Appends a child (for objects just created).
    pub fn push(&mut self, name: Vec<u8>, node: Node) {
        self.chain.push((name, node));
    }

    /// Moves to the containing directory; `false` at the root.
    pub fn pop(&mut self) -> bool {
        if self.chain.len() > 1 {
            self.chain.pop();
            true
        } else {
            false
        }
    }

    /// The containing directory and this object's name (`None` for the root).
    pub fn parent(&self) -> Option<(&Node, &[u8])> {
        let n = self.chain.len();
        (n >= 2).then(|| (&self.chain[n - 2].1, self.chain[n - 1].0.as_slice()))
    }
}

/// What a walk found for the last component.
#[derive(Debug)]
pub enum Lookup {
    /// it exists
    Found(Location),
    /// it does not, but its parent directory does (where `O_CREAT` or
    /// `mkdir` would act)
    Missing {
        /// the parent directory
        parent: Location,
    },
}

/// The mount namespace of one sandbox: the root and the device cache used to
/// recognise masked host file systems.
pub struct FileSystem {
    root: Node,
    masked_devs: Mutex<HashMap<u64, bool>>,
    /// host lookups already made: (parent handle's address, name) → the
    /// child, with the parent kept alive so the address stays its own
    dcache: Mutex<DentryCache>,
    /// how much looking subdirectories up ahead has paid lately (see
    /// `look_ahead`)
    walker: std::sync::atomic::AtomicI32,
    tmp: Arc<dyn Inode>,
    run: Arc<dyn Inode>,
    shm: Arc<dyn Inode>,
    /// the internal tmpfs `memfd_create` files live in (Linux's `shm_mnt`):
    /// never mounted, bounded by the shared pool
    memfd: Arc<dyn Inode>,
    /// the file systems above vfs that it mounts itself
    impls: Arc<dyn FsImpls>,
    /// `/proc`'s and `/sys`'s roots, asked of `impls` once
    proc_root: Node,
    sys_root: Node,
    /// `/dev/mqueue`'s root, which boot gives
    mqueue_root: std::sync::OnceLock<Node>,
    /// the root overlay's upper layer
    pub upper: Arc<dyn Inode>,
    /// writes to the root go to the upper layer (else they are `EROFS`)
    pub overlay: bool,
    /// the root is the host directory itself, writable through its gofer
    /// (the OCI runtime's default: the bundle's rootfs is the container's
    /// file system, as under runc)
    host_root: bool,
    /// `/tmp` and `/run` are tmpfs of the sandbox's own (`do`); else they
    /// are the root's own directories (OCI, as runc leaves them)
    tmpfs_tmp: bool,
    /// the guest's Unix sockets bound on host directories, by the host
    /// identity of their inode (which is bound to nothing on the host)
    host_sockets: Mutex<HashMap<(u64, u64), HostSocket>>,
    /// volumes and extra tmpfs mounts, covering what their path names
    mounts: Vec<MountPoint>,
    /// masked and read-only paths (OCI `linux.maskedPaths` and
    /// `readonlyPaths`), fixed once at boot over everything else
    locked: std::sync::OnceLock<LockedPaths>,
    /// extra tmpfs mounts made so far (each takes its own device number,
    /// even where a later mount replaces an earlier one)
    tmpfs_mounts: AtomicU64,
    /// the tmpfs mounts the guest made (`mount(2)`), newest last, each
    /// with whether it is read-only; they cover the mounts made at boot
    guest_mounts: RwLock<Vec<(MountPoint, Writes)>>,
    /// whether `guest_mounts` may hold any (so walks skip its lock)
    any_guest_mount: AtomicBool,
    /// the files [`FileSystem::provide_file`] put in the upper layer, with
    /// their size and modification time then: a sandbox image does not
    /// carry them (the restored sandbox provides its own)
    provided: Mutex<Vec<Provided>>,
    mf: Arc<crate::mm::memfile::MemoryFile>,
    /// what all the in-memory file systems may hold together
    pool: Arc<crate::mm::quota::Quota>,
    /// pages of volume files mapped `MAP_SHARED`
    pub page_caches: Arc<crate::mm::pagecache::PageCaches>,
    /// the images of the root's files that private mappings share
    pub images: Arc<crate::mm::fileimage::Images>,
}

/// A file [`FileSystem::provide_file`] put in the upper layer, with its
/// size and modification time then.
struct Provided {
    file: Arc<dyn Inode>,
    size: i64,
    mtime: abi::Timespec,
}

/// One of the sandbox's own tmpfs a sandbox image carries: its guest path
/// and root.
pub type SavedTmpfs<'a> = (&'static str, &'a Arc<dyn Inode>);

/// What `linux.maskedPaths` and `linux.readonlyPaths` made of the tree:
/// runc's mounts over those paths, which no guest can undo (its `umount`
/// is `EPERM`, as for a mount locked in a user namespace).
#[derive(Debug, Default)]
struct LockedPaths {
    /// masks: an empty read-only directory over a directory (runc's
    /// read-only tmpfs), the null device over anything else (runc's bind
    /// of `/dev/null`); mounted above every other mount
    masks: Vec<MountPoint>,
    /// paths made read-only, with what is below them on the same mount
    /// (runc's read-only bind of the path over itself)
    read_only: Vec<Vec<Vec<u8>>>,
}

/// What a locked path is, as the mount table shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockedMount {
    /// a read-only path: runc's read-only bind of the path over itself
    ReadOnly,
    /// a masked directory: runc's read-only tmpfs
    MaskedDir,
    /// anything else masked: runc's bind of the null device (of `/dev`)
    MaskedFile,
}

/// Inode numbers of the directories masks show (each its own tmpfs
/// root): these bits set, the mask's number below them.
const MASK_INO: u64 = 0x4d41_534b_0000;

/// The Sentry's own mounts at fixed paths (`mount_key` tells them apart):
/// a read-only path above one of them does not make it read-only, as a
/// non-recursive read-only remount leaves submounts as they were.
const BUILTIN_MOUNTS: &[&[&[u8]]] = &[
    &[b"dev"],
    &[b"proc"],
    &[b"sys"],
    &[b"tmp"],
    &[b"run"],
    &[b"dev", b"shm"],
    &[b"dev", b"pts"],
    &[b"dev", b"mqueue"],
];

/// A file system mounted over a path of the tree.
#[derive(Debug)]
struct MountPoint {
    /// components from the root
    path: Vec<Vec<u8>>,
    /// what a walk through the path reaches instead
    root: Node,
    /// its per-mount flags (the guest's mounts; the sandbox's own have
    /// none here)
    flags: MountFlags,
}

/// The per-mount flags `mount(2)` sets with `MS_NOSUID`, `MS_NODEV` and
/// `MS_NOEXEC`: shown in the mount table and by `statfs`; set-ID bits do
/// not count and programs do not run on a mount that has them (no device
/// node can be made in the sandbox, so `nodev` has nothing to refuse).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MountFlags {
    /// `MS_NOSUID`
    pub nosuid: bool,
    /// `MS_NODEV`
    pub nodev: bool,
    /// `MS_NOEXEC`
    pub noexec: bool,
}

impl MountFlags {
    /// Those of `mount(2)`'s `flags`.
    pub fn of_mount(flags: u64) -> MountFlags {
        MountFlags {
            nosuid: flags & 2 != 0,
            nodev: flags & 4 != 0,
            noexec: flags & 8 != 0,
        }
    }

    /// As the mount table lists them after `rw` or `ro`.
    pub fn options(self) -> String {
        [
            (self.nosuid, ",nosuid"),
            (self.nodev, ",nodev"),
            (self.noexec, ",noexec"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, o)| *o)
        .collect()
    }

    /// `statfs`'s `ST_NOSUID`, `ST_NODEV` and `ST_NOEXEC`.
    pub fn statfs_bits(self) -> i64 {
        i64::from(self.nosuid) * 2 + i64::from(self.nodev) * 4 + i64::from(self.noexec) * 8
    }
}

thread_local! {
    /// The upper layer of the overlay this host thread's sandbox uses (one
    /// sandbox per Sentry process; set when a task starts).
    static OVL_UPPER: std::cell::RefCell<Option<Arc<dyn Inode>>> = const { std::cell::RefCell::new(None) };
}

/// Walks the upper tree along `path`; `None` if a directory is missing.
fn upper_walk(root: &Arc<dyn Inode>, path: &[Vec<u8>]) -> Option<Arc<dyn Inode>> {
    let mut cur = root.clone();
    for c in path {
        let next = child_inode(&*cur, c).ok()?;
        if !next.is_dir() {
            return None;
        }
        cur = next;
    }
    Some(cur)
}

/// The default size of a tmpfs, and of all the sandbox's in-memory file
/// systems together (`/tmp`, `/run`, `/dev/shm`, the overlay's upper layer,
/// tmpfs mounts), for a sandbox of `total_memory` bytes: half, as Linux
/// sizes a tmpfs mounted without `size=` (Documentation/filesystems/
/// tmpfs.rst). The shared bound keeps a guest that fills several of them
/// at once from taking more than that: it gets `ENOSPC`, where it would
/// otherwise push the sandbox past its memory limit and be killed whole.
pub fn default_tmpfs_size(total_memory: u64) -> u64 {
    (total_memory / 2).max(16 << 20)
}

impl fmt::Debug for FileSystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileSystem")
            .field("root", &self.root)
            .finish()
    }
}

/// Whether mount path `path` (components from the root) names `name` in
/// the directory at the end of `chain`.
/// The absolute path of `names` from the root.
fn names_path(names: &[Vec<u8>]) -> String {
    names.iter().fold(String::new(), |mut p, c| {
        p.push('/');
        p.push_str(&String::from_utf8_lossy(c));
        p
    })
}

fn names_child(path: &[Vec<u8>], chain: &[(Vec<u8>, Node)], name: &[u8]) -> bool {
    let depth = chain.len();
    path.len() == depth
        && path[depth - 1] == name
        && path[..depth - 1]
            .iter()
            .zip(&chain[1..])
            .all(|(a, (b, _))| a == b)
}

fn split(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    path.split(|&b| b == b'/').filter(|c| !c.is_empty())
}

impl FileSystem {
    /// Bytes the sandbox's tmpfs files (and memfds) hold, from the pool
    /// they share.
    pub fn tmpfs_used(&self) -> u64 {
        self.pool.used()
    }

    /// A file system whose root is the host directory the gofer behind
    /// `client` serves.
    pub fn new(
        client: gofer::client::Client,
        mf: Arc<crate::mm::memfile::MemoryFile>,
        writes: RootWrites,
        tmpfs_tmp: bool,
        total_memory: u64,
        impls: Arc<dyn FsImpls>,
    ) -> Result<Self, Errno> {
        let client = Arc::new(client);
        let root = client.attach()?;
        let host_root = writes == RootWrites::Host;
        use crate::mm::quota::Quota;
        let size = default_tmpfs_size(total_memory);
        let pool = Quota::new(size);
        let tmpfs = |dev, mode| impls.new_tmpfs(&mf, &pool, dev, size, mode);
        let upper = tmpfs(UPPER_DEV, root.stat.mode & 0o7777);
        {
            let st = root.stat.to_linux();
            upper.set_owner(st.uid, st.gid);
            upper.restore_times(
                ts(st.atime, st.atime_nsec),
                ts(st.mtime, st.mtime_nsec),
                ts(st.ctime, st.ctime_nsec),
            );
        }
        let lower = Node::Host {
            h: Arc::new(GoferRef {
                client,
                handle: root.handle,
                stat: root.stat,
                // Written through, it is one more volume: nothing of it
                // may be cached as unchanging.
                volume: host_root.then_some(VolumeKind::ReadWrite),
                file: Default::default(),
                target: Default::default(),
                dir: Default::default(),
                listed: Default::default(),
            }),
            mode: root.stat.mode,
        };
        Ok(FileSystem {
            root: if host_root {
                lower
            } else {
                Node::Ovl(Arc::new(OvlDir {
                    path: Vec::new(),
                    lower: Some(lower),
                }))
            },
            upper,
            overlay: writes == RootWrites::Memory,
            host_root,
            tmpfs_tmp,
            host_sockets: Default::default(),
            masked_devs: Mutex::new(HashMap::new()),
            dcache: Mutex::new(DentryCache::new()),
            walker: Default::default(),
            tmp: tmpfs(SYNTH_DEV + 0x10, 0o1777),
            run: tmpfs(SYNTH_DEV + 0x11, 0o755),
            proc_root: impls.proc_root(),
            sys_root: impls.sys_root(),
            mqueue_root: Default::default(),
            shm: tmpfs(SYNTH_DEV + 0x12, 0o1777),
            memfd: tmpfs(SYNTH_DEV + 0x14, 0o1777),
            mounts: Vec::new(),
            locked: Default::default(),
            tmpfs_mounts: AtomicU64::new(0),
            guest_mounts: Default::default(),
            any_guest_mount: AtomicBool::new(false),
            provided: Default::default(),
            // As much as a tmpfs may hold: half the sandbox's memory.
            page_caches: crate::mm::pagecache::PageCaches::new(mf.clone(), size),
            images: Arc::new(crate::mm::fileimage::Images::new(total_memory)),
            mf,
            pool,
            impls,
        })
    }

    /// Mounts the host directory (or file) the gofer behind `client`
    /// serves at guest path `dest`, before the sandbox starts. A mount
    /// point the tree lacks is made in the sandbox's own layer (the host's
    /// root is never changed for it).
    pub fn mount_volume(
        &mut self,
        dest: &[u8],
        client: gofer::client::Client,
        kind: VolumeKind,
    ) -> Result<(), Errno> {
        let client = Arc::new(client);
        let root = client.attach()?;
        let node = Node::Host {
            h: Arc::new(GoferRef {
                client,
                handle: root.handle,
                stat: root.stat,
                volume: Some(kind),
                file: Default::default(),
                target: Default::default(),
                dir: Default::default(),
                listed: Default::default(),
            }),
            mode: root.stat.mode,
        };
        self.add_mount(dest, node)
    }

    /// The sandbox's own tmpfs a sandbox image carries, by guest path; an
    /// error naming what else in memory holds files (the overlay's upper
    /// layer, `--tmpfs` and guest mounts), which an image does not carry
    /// yet.
    pub fn saved_tmpfs(&self) -> Result<[SavedTmpfs<'_>; 3], String> {
        let holds = |m: &Arc<dyn Inode>| m.entries_all().is_ok_and(|e| !e.is_empty());
        if !self.upper_holds_only_provided() {
            return Err("files written over the root (--overlay; not saved yet)".into());
        }
        if self
            .any_guest_mount
            .load(std::sync::atomic::Ordering::Relaxed)
            && !self
                .guest_mounts
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty()
        {
            return Err("a file system the guest mounted (not saved yet)".into());
        }
        for m in &self.mounts {
            if let Some(root) = m.root.tmpfs() {
                if holds(root) {
                    return Err(format!(
                        "the tmpfs at /{} (--tmpfs; not saved yet)",
                        String::from_utf8_lossy(&m.path.join(&b'/'))
                    ));
                }
            }
        }
        Ok([
            ("/tmp", &self.tmp),
            ("/run", &self.run),
            ("/dev/shm", &self.shm),
        ])
    }

    /// Whether the overlay's upper layer holds nothing but directories and
    /// the files the Sentry provided, as it provided them.
    fn upper_holds_only_provided(&self) -> bool {
        let provided = self.provided.locked();
        let mut stack = vec![self.upper.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = dir.entries_all() else {
                return false;
            };
            // (an empty directory there is the guest's own)
            if entries.is_empty() && inode_id(&*dir) != inode_id(&*self.upper) {
                return false;
            }
            for (name, _, _) in entries {
                let Ok(n) = child_inode(&*dir, &name) else {
                    return false;
                };
                if n.is_dir() {
                    stack.push(n);
                    continue;
                }
                let Ok(st) = n.stat() else {
                    return false;
                };
                if !provided.iter().any(|p| {
                    inode_id(&*p.file) == inode_id(&*n)
                        && st.size == p.size
                        && ts(st.mtime, st.mtime_nsec) == p.mtime
                }) {
                    return false;
                }
            }
        }
        true
    }

    /// The root of the file system `memfd_create` files are made in.
    pub fn memfd_root(&self) -> &Arc<dyn Inode> {
        &self.memfd
    }

    /// Mounts a new tmpfs at guest path `dest` (an OCI `tmpfs` mount at a
    /// place the sandbox does not already serve one).
    pub fn mount_tmpfs(&mut self, dest: &[u8], mode: u32, size: Option<u64>) -> Result<(), Errno> {
        let root = self.new_tmpfs(mode, size);
        self.add_mount(dest, root)
    }

    /// A new tmpfs's root, with its own device number; the pool's limit
    /// is the default size.
    fn new_tmpfs(&self, mode: u32, size: Option<u64>) -> Node {
        let dev = EXTRA_TMPFS_DEV + self.tmpfs_mounts.fetch_add(1, Ordering::Relaxed);
        let size = size.unwrap_or(self.pool.limit());
        Node::Inode(
            self.impls
                .new_tmpfs(&self.mf, &self.pool, dev, size, mode & 0o7777),
        )
    }

    /// The guest's `mount -t tmpfs` over the directory `at` (not the
    /// root, where every walk starts: `EBUSY`).
    pub fn guest_mount_tmpfs(
        &self,
        at: &Location,
        mode: u32,
        size: Option<u64>,
        read_only: bool,
        flags: MountFlags,
    ) -> Result<(), Errno> {
        let path = at.names();
        if path.is_empty() {
            return Err(Errno::EBUSY);
        }
        if !at.node().is_dir() {
            return Err(Errno::ENOTDIR);
        }
        let mut g = self.guest_mounts.write().unwrap_or_else(|e| e.into_inner());
        // Linux's `fs.mount-max` bounds a namespace's mounts (`ENOSPC`).
        if g.len() >= MAX_GUEST_MOUNTS {
            return Err(Errno::ENOSPC);
        }
        let root = self.new_tmpfs(mode, size.map(|s| s.min(self.pool.limit())));
        if let Node::Inode(m) = &root {
            m.set_read_only(read_only);
        }
        g.push((MountPoint { path, root, flags }, Writes::refused(read_only)));
        self.any_guest_mount.store(true, Ordering::Release);
        Ok(())
    }

    /// The guest's bind mount of `from`, a place in the sandbox's own tree,
    /// over `at`; `recursive`: the mounts below `from` come too. A place
    /// holding a masked or read-only path is refused (`EPERM`): the copy
    /// would show it unmasked or writable; a place inside one is bound
    /// read-only.
    pub fn guest_bind(&self, from: &Location, at: &Location, recursive: bool) -> Result<(), Errno> {
        let (src, path) = (from.names(), at.names());
        if path.is_empty() {
            return Err(Errno::EBUSY);
        }
        if from.node().is_dir() != at.node().is_dir() {
            return Err(Errno::ENOTDIR);
        }
        if self.holds_locked_path(from) {
            return Err(Errno::EPERM);
        }
        // A bind of a read-only place is read-only, as Linux's copies its
        // mount's flags; of a path the sandbox's config made read-only, it
        // stays so.
        let read_only = if self.read_only_mount(from).is_some() {
            Writes::RefusedForGood
        } else {
            Writes::refused(self.in_read_only_guest_mount(from))
        };
        // (Linux's bind copies the flags of the mount it binds from)
        let flags = self.guest_mount_flags(from);
        let mut g = self.guest_mounts.write().unwrap_or_else(|e| e.into_inner());
        let mut new = vec![(
            MountPoint {
                path: path.clone(),
                root: from.node().clone(),
                flags,
            },
            read_only,
        )];
        if recursive {
            let below = |p: &[Vec<u8>]| p.len() > src.len() && p.starts_with(&src);
            let moved = |p: &[Vec<u8>]| {
                let mut q = path.clone();
                q.extend_from_slice(&p[src.len()..]);
                q
            };
            for m in self.mounts.iter().filter(|m| below(&m.path)) {
                new.push((
                    MountPoint {
                        path: moved(&m.path),
                        root: m.root.clone(),
                        flags: m.flags,
                    },
                    Writes::Allowed,
                ));
            }
            for (m, ro) in g.iter().filter(|(m, _)| below(&m.path)) {
                new.push((
                    MountPoint {
                        path: moved(&m.path),
                        root: m.root.clone(),
                        flags: m.flags,
                    },
                    *ro,
                ));
            }
        }
        if g.len() + new.len() > MAX_GUEST_MOUNTS {
            return Err(Errno::ENOSPC);
        }
        g.extend(new);
        self.any_guest_mount.store(true, Ordering::Release);
        Ok(())
    }

    /// The guest's `umount` of what it mounted at `at` (the newest mount
    /// there): `EINVAL` where it mounted nothing, `EBUSY` for the
    /// sandbox's own mounts (volumes, its tmpfs), which stay.
    pub fn guest_umount(&self, at: &Location, detach: bool) -> Result<(), Errno> {
        let path = at.names();
        let mut g = self.guest_mounts.write().unwrap_or_else(|e| e.into_inner());
        match g.iter().rposition(|(m, _)| m.path == path) {
            Some(i) => {
                // Mounts made below it since go with it when detached
                // (`MNT_DETACH`), else keep it busy.
                let below = |p: &[Vec<u8>]| p.len() > path.len() && p.starts_with(&path);
                if g[i + 1..].iter().any(|(m, _)| below(&m.path)) {
                    if !detach {
                        return Err(Errno::EBUSY);
                    }
                    let mut k = i + 1;
                    while k < g.len() {
                        if below(&g[k].0.path) {
                            g.remove(k);
                        } else {
                            k += 1;
                        }
                    }
                }
                g.remove(i);
                if g.is_empty() {
                    self.any_guest_mount.store(false, Ordering::Release);
                }
                Ok(())
            }
            None if self.mounts.iter().any(|m| m.path == path)
                || BUILTIN_MOUNTS.iter().any(|b| b.iter().eq(path.iter())) =>
            {
                Err(Errno::EBUSY)
            }
            None => Err(Errno::EINVAL),
        }
    }

    /// Makes what the guest mounted at `at` read-only or writable again,
    /// with `flags` (a remount sets the mount's flags to those given);
    /// without `bind`, a tmpfs there is remounted too, as its superblock
    /// is on Linux (with it, only this mount changes).
    pub fn guest_remount(
        &self,
        at: &Location,
        read_only: bool,
        flags: MountFlags,
        bind: bool,
    ) -> Result<(), Errno> {
        let path = at.names();
        let mut g = self.guest_mounts.write().unwrap_or_else(|e| e.into_inner());
        let Some((m, w)) = g.iter_mut().rev().find(|(m, _)| m.path == path) else {
            return Err(Errno::EPERM);
        };
        match w {
            // A bind of a read-only place stays read-only.
            Writes::RefusedForGood if !read_only => return Err(Errno::EPERM),
            Writes::RefusedForGood => {}
            w => *w = Writes::refused(read_only),
        }
        m.flags = flags;
        if let (false, Node::Inode(root)) = (bind, &m.root) {
            root.set_read_only(read_only);
        }
        Ok(())
    }

    /// The flags of the mount the guest made that `loc` is on (none when
    /// it is on none).
    pub fn guest_mount_flags(&self, loc: &Location) -> MountFlags {
        self.innermost_guest_mount(loc, |(m, _)| m.flags)
            .unwrap_or_default()
    }

    /// `f` of the innermost mount the guest made that holds `loc`.
    fn innermost_guest_mount<T>(
        &self,
        loc: &Location,
        f: impl FnOnce(&(MountPoint, Writes)) -> T,
    ) -> Option<T> {
        if !self.any_guest_mount.load(Ordering::Acquire) {
            return None;
        }
        let names: Vec<&[u8]> = loc.chain[1..].iter().map(|(n, _)| n.as_slice()).collect();
        let g = self.guest_mounts.read().unwrap_or_else(|e| e.into_inner());
        g.iter()
            .filter(|(m, _)| {
                m.path.len() <= names.len() && m.path.iter().zip(&names).all(|(a, b)| a == b)
            })
            .max_by_key(|(m, _)| m.path.len())
            .map(f)
    }

    /// What the in-memory file systems may hold together.
    pub fn memory_limit(&self) -> u64 {
        self.pool.limit()
    }

    /// Whether `loc` is on a tmpfs the guest mounted read-only.
    fn in_read_only_guest_mount(&self, loc: &Location) -> bool {
        self.innermost_guest_mount(loc, |(m, w)| {
            *w != Writes::Allowed || matches!(&m.root, Node::Inode(r) if r.read_only())
        })
        .unwrap_or(false)
    }

    fn add_mount(&mut self, dest: &[u8], root: Node) -> Result<(), Errno> {
        let path: Vec<Vec<u8>> = split(dest).map(<[u8]>::to_vec).collect();
        if path.is_empty() || path.iter().any(|c| c == b"." || c == b"..") {
            return Err(Errno::EINVAL);
        }
        self.make_mount_point(&path, root.is_dir())?;
        // A later mount at the same place hides the earlier one.
        self.mounts.retain(|m| m.path != path);
        self.mounts.push(MountPoint {
            path,
            root,
            flags: MountFlags::default(),
        });
        Ok(())
    }

    /// Makes the directories (and, for a file, the empty file) that a
    /// mount at `path` covers, where the tree lacks them, so listings show
    /// them. Only the sandbox's own layers change: the overlay's upper one
    /// (even over a read-only root) and tmpfs.
    fn make_mount_point(&self, path: &[Vec<u8>], dir: bool) -> Result<(), Errno> {
        let mut loc = self.root();
        for (i, c) in path.iter().enumerate() {
            let last = i + 1 == path.len();
            if !loc.node().is_dir() {
                return Err(Errno::ENOTDIR);
            }
            let found = match self.mounted_at(&loc, c) {
                Some(n) => Ok(n),
                None => self.lookup_child(loc.node(), loc.chain.len() - 1, c),
            };
            let node = match found {
                Ok(n) => n,
                Err(Errno::ENOENT) => {
                    let parent = match loc.node() {
                        Node::Ovl(d) => self.upper_dir(d)?,
                        n if let Some(m) = n.tmpfs() => m.clone(),
                        // Elsewhere (a volume, /proc): the mount still
                        // works for paths that name it.
                        _ => return Ok(()),
                    };
                    parent.clear_whiteout(c);
                    let made = if dir || !last {
                        parent.create(c, abi::S_IFDIR | 0o755, (0, 0), NewInode::Dir)?
                    } else {
                        parent.create(c, abi::S_IFREG | 0o644, (0, 0), NewInode::File)?
                    };
                    // Found again, so an overlay directory is one.
                    match self.lookup_child(loc.node(), loc.chain.len() - 1, c) {
                        Ok(n) => n,
                        Err(_) => Node::Inode(made),
                    }
                }
                Err(e) => return Err(e),
            };
            loc.push(c.clone(), node);
        }
        Ok(())
    }

    /// The mounts made over the root's paths: (path, file system type,
    /// read-only, the options after `rw` or `ro`), for `/proc/self/mounts`.
    pub fn mount_list(&self) -> Vec<(String, &'static str, bool, String)> {
        self.mounts
            .iter()
            .map(|m| {
                let path = names_path(&m.path);
                let (typ, ro) = match &m.root {
                    Node::Host { h, .. } => ("bind", h.volume != Some(VolumeKind::ReadWrite)),
                    _ => ("tmpfs", false),
                };
                // (as an OCI runtime mounts volumes and tmpfs)
                (path, typ, ro, ",nosuid,nodev".to_string())
            })
            .chain(
                self.guest_mounts
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .map(|(m, ro)| {
                        let path = names_path(&m.path);
                        let typ = match &m.root {
                            Node::Inode(i) => i.fs_type().unwrap_or("bind"),
                            _ => "bind",
                        };
                        (path, typ, *ro != Writes::Allowed, m.flags.options())
                    }),
            )
            .collect()
    }

    /// The mounts `linux.readonlyPaths` and `linux.maskedPaths` made, in
    /// the order runc makes them (read-only paths first): absolute paths.
    pub fn locked_list(&self) -> Vec<(String, LockedMount)> {
        let Some(l) = self.locked.get() else {
            return Vec::new();
        };
        let ro = l
            .read_only
            .iter()
            .map(|p| (names_path(p), LockedMount::ReadOnly));
        let masks = l.masks.iter().map(|m| {
            let kind = if m.root.is_dir() {
                LockedMount::MaskedDir
            } else {
                LockedMount::MaskedFile
            };
            (names_path(&m.path), kind)
        });
        ro.chain(masks).collect()
    }

    /// Whether `name` in `parent` is a mount point (a read-only path is
    /// one too: runc bind-mounts it over itself).
    pub fn is_mount_point(&self, parent: &Location, name: &[u8]) -> bool {
        self.mounted_at(parent, name).is_some()
            || self.locked.get().is_some_and(|l| {
                l.read_only
                    .iter()
                    .any(|p| names_child(p, &parent.chain, name))
            })
    }

    /// What is mounted at `name` in `parent`, if anything.
    fn mounted_at(&self, parent: &Location, name: &[u8]) -> Option<Node> {
        let locked = self.locked.get();
        if let Some(l) = locked {
            // Masks were mounted last, over everything.
            if let Some(m) = l
                .masks
                .iter()
                .find(|m| names_child(&m.path, &parent.chain, name))
            {
                return Some(m.root.clone());
            }
        }
        if self.any_guest_mount.load(Ordering::Acquire) {
            let g = self.guest_mounts.read().unwrap_or_else(|e| e.into_inner());
            if let Some((m, _)) = g
                .iter()
                .rev()
                .find(|(m, _)| names_child(&m.path, &parent.chain, name))
            {
                return Some(m.root.clone());
            }
        }
        if self.mounts.is_empty() {
            return None;
        }
        self.mounts
            .iter()
            .rev()
            .find(|m| names_child(&m.path, &parent.chain, name))
            // A masked directory hides the mounts below it, as the tmpfs
            // runc mounts over it does.
            .filter(|m| {
                !locked.is_some_and(|l| {
                    l.masks
                        .iter()
                        .any(|k| k.path.len() < m.path.len() && m.path.starts_with(&k.path))
                })
            })
            .map(|m| m.root.clone())
    }

    /// Applies OCI `linux.readonlyPaths`, then `linux.maskedPaths` (runc's
    /// order), once, after every mount is made and /proc can be walked.
    /// Each path is resolved from the root, symlinks followed; one that
    /// does not exist is skipped, as runc skips it. A masked directory
    /// becomes an empty read-only directory and anything else the null
    /// device; below a read-only path, writes are `EROFS` while the rest
    /// of its mount stays writable. Returns the paths skipped.
    pub fn lock_paths(
        &self,
        masked: &[Vec<u8>],
        read_only: &[Vec<u8>],
    ) -> Result<Vec<Vec<u8>>, Errno> {
        let mut locked = LockedPaths::default();
        let mut skipped = Vec::new();
        // The path's names from the root, symlinks followed, and what is
        // there; `None` when it is not there.
        let canonical = |path: &[u8]| -> Result<Option<Location>, Errno> {
            if !path.starts_with(b"/") {
                return Err(Errno::EINVAL);
            }
            match self.resolve(&self.root(), path, true) {
                Ok(loc) => Ok(Some(loc)),
                Err(Errno::ENOENT | Errno::ENOTDIR) => Ok(None),
                Err(e) => Err(e),
            }
        };
        for p in read_only {
            match canonical(p)? {
                Some(loc) => locked.read_only.push(loc.names()),
                None => skipped.push(p.clone()),
            }
        }
        for p in masked {
            let Some(loc) = canonical(p)? else {
                skipped.push(p.clone());
                continue;
            };
            let (names, node) = (loc.names(), loc.node().clone());
            if names.is_empty() {
                // (the root cannot be covered: it is where walks start)
                return Err(Errno::EINVAL);
            }
            // Below a directory masked already there is nothing (runc's
            // mount there would fail with ENOENT and be skipped).
            if locked.masks.iter().any(|m| {
                m.root.is_dir() && names.len() > m.path.len() && names.starts_with(&m.path)
            }) {
                skipped.push(p.clone());
                continue;
            }
            let root = if node.is_dir() {
                Node::Masked {
                    ino: MASK_INO + locked.masks.len() as u64,
                }
            } else {
                Node::Dev(Device::Null)
            };
            locked.masks.retain(|m| m.path != names);
            locked.masks.push(MountPoint {
                path: names,
                root,
                flags: MountFlags::default(),
            });
        }
        self.locked.set(locked).map_err(|_| Errno::EBUSY)?;
        Ok(skipped)
    }

    /// The read-only path `loc` is below (an index into the list), if it
    /// is on one: the deepest such path, unless a mount below that path
    /// holds `loc` (a read-only remount does not reach submounts).
    /// Locations with different answers are on different mounts (`link`
    /// and `rename` between them are `EXDEV`).
    pub fn read_only_mount(&self, loc: &Location) -> Option<usize> {
        let l = self.locked.get()?;
        let names: Vec<&[u8]> = loc.chain[1..].iter().map(|(n, _)| n.as_slice()).collect();
        let under =
            |p: &[Vec<u8>]| p.len() <= names.len() && p.iter().zip(&names).all(|(a, b)| a == b);
        let (i, ro) = l
            .read_only
            .iter()
            .enumerate()
            .filter(|(_, p)| under(p))
            .max_by_key(|(_, p)| p.len())?;
        let deeper = |p: &[Vec<u8>]| p.len() > ro.len() && under(p);
        let submount = self.mounts.iter().any(|m| deeper(&m.path))
            || l.masks.iter().any(|m| deeper(&m.path))
            || BUILTIN_MOUNTS.iter().any(|b| {
                b.len() > ro.len()
                    && b.len() <= names.len()
                    && b.iter().zip(&names).all(|(a, n)| a == n)
            });
        (!submount).then_some(i)
    }

    /// Whether `loc` is read-only because of a read-only path (writes to
    /// it, and names made or removed in it, are `EROFS`).
    pub fn read_only_at(&self, loc: &Location) -> bool {
        self.read_only_mount(loc).is_some() || self.in_read_only_guest_mount(loc)
    }

    /// Whether a masked or read-only path is at or below `loc`: moving it
    /// would carry that path away from its mount, which here stays with
    /// the path (`rename` answers `EBUSY`, as for a mount point).
    pub fn holds_locked_path(&self, loc: &Location) -> bool {
        let Some(l) = self.locked.get() else {
            return false;
        };
        let names: Vec<&[u8]> = loc.chain[1..].iter().map(|(n, _)| n.as_slice()).collect();
        let below =
            |p: &[Vec<u8>]| p.len() >= names.len() && p.iter().zip(&names).all(|(a, b)| a == b);
        l.read_only.iter().any(|p| below(p)) || l.masks.iter().any(|m| below(&m.path))
    }

    /// The root directory.
    pub fn root(&self) -> Location {
        Location {
            chain: vec![(Vec::new(), self.root.clone())],
        }
    }

    fn is_masked_dev(&self, h: &GoferRef, dev: u64) -> bool {
        let mut cache = self.masked_devs.locked();
        *cache.entry(dev).or_insert_with(|| {
            h.client
                .statfs(h.handle)
                .map(|s| MASKED_FS_MAGIC.contains(&(s.fs_type as i64)))
                .unwrap_or(true)
        })
    }

    fn lock_dcache(&self) -> std::sync::MutexGuard<'_, DentryCache> {
        self.dcache.locked()
    }

    /// Asks the gofer for `name` in host directory `h`.
    fn walk_host(&self, h: &Arc<GoferRef>, name: &[u8]) -> Result<Node, Errno> {
        // The gofer refuses names with `/`, `..` or NUL itself; a name it
        // cannot walk is simply not there. A directory of the root comes
        // open, for the listing that usually follows its lookup (a
        // volume's are looked up at every walk, so they are not).
        let (reply, dir) =
            if h.volume.is_none() && DIRS_KEPT.load(Ordering::Relaxed) < max_dirs_kept() {
                h.client.walk_open_dir(h.handle, name)?
            } else {
                (h.client.walk(h.handle, &[name])?, None)
            };
        let Some(node) = reply.nodes.first() else {
            return Err(Errno::ENOENT);
        };
        let child = h.child(*node);
        if let Some(fd) = dir {
            child.keep_dir(fd);
        }
        if node.stat.is_dir() && h.listed.load(Ordering::Relaxed) {
            // A walk down a tree just listed: looking ahead would have
            // saved this round trip.
            self.walker_paid(1);
        }
        let st = node.stat;
        if st.is_dir() && self.is_masked_dev(&child, st.dev()) {
            return Ok(Node::Masked { ino: st.ino });
        }
        Ok(Node::Host {
            h: Arc::new(child),
            mode: st.mode,
        })
    }

    /// Looks `name` up in directory `dir` (which sits `depth` levels below
    /// the root).
    /// The object at `loc` looked up anew in its directory (a synthetic
    /// file's contents made again); `None` when it is gone.
    pub fn look_up_again(&self, loc: &Location) -> Option<Node> {
        let n = loc.chain.len();
        if n < 2 {
            return None;
        }
        let (name, _) = &loc.chain[n - 1];
        self.lookup_child(&loc.chain[n - 2].1, n - 2, name).ok()
    }

    /// What the sandbox puts at `/NAME` over the root's own directory.
    fn synthetic_top(&self, name: &[u8]) -> Option<Node> {
        Some(match name {
            b"dev" => Node::DevDir,
            b"proc" => self.proc_root.clone(),
            b"sys" => self.sys_root.clone(),
            b"tmp" if self.tmpfs_tmp => Node::Inode(self.tmp.clone()),
            b"run" if self.tmpfs_tmp => Node::Inode(self.run.clone()),
            _ => return None,
        })
    }

    /// Records the socket bound to the host inode `id` (see
    /// `host_sockets`), forgetting sockets that have closed.
    pub fn bind_host_socket(&self, id: (u64, u64), socket: HostSocket) {
        let mut m = self.host_sockets.locked();
        m.retain(|_, s| s.strong_count() > 0);
        m.insert(id, socket);
    }

    /// The open socket bound to the host inode `id`, if any.
    pub fn host_socket(&self, id: (u64, u64)) -> Option<Arc<dyn std::any::Any + Send + Sync>> {
        self.host_sockets.locked().get(&id)?.upgrade()
    }

    /// Whether `/tmp` and `/run` are tmpfs of the sandbox's own (`do`), not
    /// the root's directories (OCI).
    pub fn sandbox_tmp(&self) -> bool {
        self.tmpfs_tmp
    }

    /// Whether `/dev` is a container's, as runc makes it (an OCI sandbox:
    /// `/dev/shm` `noexec`, `/dev/pts` in the mount table, `/dev/ptmx` a
    /// link); `do`'s mirrors a host's, where programs in `/dev/shm` run.
    pub fn container_dev(&self) -> bool {
        !self.tmpfs_tmp
    }

    /// Whether `loc` is on a `noexec` mount (a container's `/dev/shm`, or
    /// a mount the guest made so): programs there do not run.
    pub fn noexec(&self, loc: &Location) -> bool {
        let shm = |n: &Node| matches!(n, Node::Inode(m) if m.mount_key() == self.shm.mount_key());
        (self.container_dev() && shm(loc.node())) || self.guest_mount_flags(loc).noexec
    }

    /// Whether the guest's writes to its root (outside volumes and
    /// tmpfs) are allowed: to the host directory or to the overlay.
    pub fn root_writable(&self) -> bool {
        self.overlay || self.host_root
    }

    fn lookup_child(&self, dir: &Node, depth: usize, name: &[u8]) -> Result<Node, Errno> {
        if name.len() > NAME_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        // Only the root itself, not the overlay's host directory below it.
        if depth == 0 && (matches!(dir, Node::Ovl(_)) || self.host_root) {
            if let Some(n) = self.synthetic_top(name) {
                return Ok(n);
            }
        }
        match dir {
            Node::Ovl(d) => self.ovl_lookup(d, depth, name),
            Node::Host { h, .. } if h.volume.is_some() => self.walk_host(h, name),
            Node::Host { h, .. } => {
                // The root the gofer serves is the container's image, which
                // nobody changes under a running sandbox: a lookup made
                // once stands.
                let key = (Arc::as_ptr(h) as usize, name.to_vec());
                let (hit, gone) = self.lock_dcache().get(&key);
                // (dropped here, outside the lock: dropping handles may
                // ask the gofer to close them)
                drop(gone);
                if let Some((n, ahead)) = hit {
                    if ahead {
                        self.walker_paid(1);
                    }
                    return n.ok_or(Errno::ENOENT);
                }
                // Misses are remembered too: programs probe many paths
                // that are not there (the loader, Python's imports).
                let child = match self.walk_host(h, name) {
                    Ok(n) => Some(n),
                    Err(Errno::ENOENT) => None,
                    Err(e) => return Err(e),
                };
                let gone = self
                    .lock_dcache()
                    .insert(key, (h.clone(), child.clone()), false);
                drop(gone);
                child.ok_or(Errno::ENOENT)
            }
            Node::DevDir if name == b"shm" => Ok(Node::Inode(self.shm.clone())),
            Node::DevDir if matches!(name, b"fd" | b"stdin" | b"stdout" | b"stderr") => {
                let target: &[u8] = match name {
                    b"fd" => b"/proc/self/fd",
                    b"stdin" => b"/proc/self/fd/0",
                    b"stdout" => b"/proc/self/fd/1",
                    _ => b"/proc/self/fd/2",
                };
                Ok(Node::Inode(Arc::new(DevLink {
                    ino: 20 + name.len() as u64,
                    target,
                })))
            }
            Node::DevDir if name == b"pts" => Ok(Node::PtsDir),
            Node::DevDir if name == b"ptmx" && self.container_dev() => {
                Ok(Node::Inode(Arc::new(DevLink {
                    ino: PTMX_LINK_INO,
                    target: b"pts/ptmx",
                })))
            }
            Node::DevDir if name == b"mqueue" => self.mqueue_root().ok_or(Errno::ENOENT),
            Node::Inode(i) => i.lookup(name),
            Node::PtsDir if name == b"ptmx" => Ok(Node::Dev(Device::Ptmx)),
            Node::PtsDir => std::str::from_utf8(name)
                .ok()
                .and_then(|s| s.parse::<u32>().ok().filter(|n| n.to_string() == s))
                .filter(|&n| self.impls.pty_exists(n))
                .map(Node::Pts)
                .ok_or(Errno::ENOENT),
            Node::DevDir => DEVICES
                .iter()
                .find(|(n, _, _)| n.as_bytes() == name)
                .map(|&(_, d, _)| Node::Dev(d))
                .or_else(|| {
                    (self.impls.gpu_devices().into_iter())
                        .find(|d| d.name().as_bytes() == name)
                        .map(|d| Node::Dev(Device::Nvidia(d)))
                })
                .ok_or(Errno::ENOENT),
            Node::Masked { .. } => Err(Errno::ENOENT),
            Node::Dev(_) | Node::Pts(_) => Err(Errno::ENOTDIR),
        }
    }

    /// The file systems above vfs that it mounts itself, which boot gave.
    pub fn impls(&self) -> &dyn FsImpls {
        &*self.impls
    }

    /// `/dev/mqueue`'s root (once boot has given it).
    pub fn mqueue_root(&self) -> Option<Node> {
        self.mqueue_root.get().cloned()
    }

    /// Gives `/dev/mqueue` its root, once.
    pub fn set_mqueue_root(&self, root: Node) {
        let _ = self.mqueue_root.set(root);
    }

    /// Resolves `path` from `start` (ignored for absolute paths). A final
    /// symlink is followed when `follow` is set or the path ends in `/`.
    pub fn walk(&self, start: &Location, path: &[u8], follow: bool) -> Result<Lookup, Errno> {
        self.walk_with(start, path, follow, Resolve::default())
    }

    /// [`FileSystem::walk`] under `openat2`'s restrictions.
    pub fn walk_with(
        &self,
        start: &Location,
        path: &[u8],
        follow: bool,
        how: Resolve,
    ) -> Result<Lookup, Errno> {
        self.walk_in(&self.root(), start, path, follow, how)
    }

    /// [`FileSystem::walk_with`] for a process whose root is `root` (its
    /// `chroot`): absolute paths and symlinks start there and `..` stops
    /// there. `root` is itself a location below the sandbox's root, and
    /// `..` never climbs above that one either, whatever `root` is: a
    /// process that gets outside its `chroot` (a directory held open, as
    /// on Linux) is still inside the sandbox.
    pub fn walk_in(
        &self,
        root: &Location,
        start: &Location,
        path: &[u8],
        follow: bool,
        how: Resolve,
    ) -> Result<Lookup, Errno> {
        if path.is_empty() {
            return Err(Errno::ENOENT);
        }
        if path.len() >= PATH_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        let scoped = how.beneath || how.in_root;
        // Where an absolute path or symlink starts over.
        let jump = |from: &Location| -> Result<Location, Errno> {
            if how.beneath {
                return Err(Errno::EXDEV);
            }
            let to = if how.in_root {
                start.clone()
            } else {
                root.clone()
            };
            if how.no_xdev && mount_key(from.node()) != mount_key(to.node()) {
                return Err(Errno::EXDEV);
            }
            Ok(to)
        };
        let mut loc = if path[0] == b'/' {
            jump(start)?
        } else {
            start.clone()
        };
        let mut must_be_dir = path.ends_with(b"/");
        let mut queue: VecDeque<Vec<u8>> = split(path).map(<[u8]>::to_vec).collect();
        let mut links = 0;
        // Those whose capabilities pass every directory need no check.
        let search = how.search.filter(|c| {
            !c.capable(crate::kernel::auth::cap::DAC_READ_SEARCH)
                && !c.capable(crate::kernel::auth::cap::DAC_OVERRIDE)
        });
        while let Some(name) = queue.pop_front() {
            let last = queue.is_empty();
            if !loc.node().is_dir() {
                return Err(Errno::ENOTDIR);
            }
            // Every component, `.` and `..` too, needs search permission
            // on the directory it is looked up in.
            if let Some(c) = search {
                let st = loc.node().stat()?;
                c.may_access(st.mode, st.uid, st.gid, crate::kernel::auth::MAY_EXEC)?;
            }
            if name == b"." {
                continue;
            }
            if name == b".." {
                if scoped && loc.chain.len() <= start.chain.len() {
                    // At the walk's own root: RESOLVE_IN_ROOT stays there,
                    // RESOLVE_BENEATH refuses to climb out.
                    if how.beneath {
                        return Err(Errno::EXDEV);
                    }
                    continue;
                }
                // At the process's root (chroot(2)): `..` stays.
                if loc.same_place(root) {
                    continue;
                }
                if loc.chain.len() > 1 {
                    let below = mount_key(loc.node());
                    loc.chain.pop();
                    if how.no_xdev && mount_key(loc.node()) != below {
                        return Err(Errno::EXDEV);
                    }
                }
                continue;
            }
            let found = match self.mounted_at(&loc, &name) {
                Some(n) => Ok(n),
                None => self.lookup_child(loc.node(), loc.chain.len() - 1, &name),
            };
            let child = match found {
                Ok(c) => c,
                Err(Errno::ENOENT) if last => return Ok(Lookup::Missing { parent: loc }),
                Err(e) => return Err(e),
            };
            let followed = !last || follow || must_be_dir;
            if followed && is_magic_link(loc.node(), &name, &child) {
                if how.no_magiclinks || how.no_symlinks {
                    return Err(Errno::ELOOP);
                }
                if scoped {
                    return Err(Errno::EXDEV);
                }
            }
            if how.no_xdev && mount_key(&child) != mount_key(loc.node()) {
                return Err(Errno::EXDEV);
            }
            // /proc/[pid]/fd/N names the open file itself, not a path.
            if let Some(file) = child.open_file() {
                if !last || follow || must_be_dir {
                    // (an O_TMPFILE file's description names the
                    // directory it was made in, not the file)
                    let own = |t: &&Location| match &file.kind {
                        file::FileKind::Impl(i) => i
                            .inode_id()
                            .is_none_or(|id| t.node().inode_id() == Some(id)),
                        _ => true,
                    };
                    if let Some(target) = file.location.as_ref().filter(own) {
                        if how.no_xdev && mount_key(target.node()) != mount_key(loc.node()) {
                            return Err(Errno::EXDEV);
                        }
                        loc = target.clone();
                        continue;
                    }
                    if !last {
                        return Err(Errno::ENOTDIR);
                    }
                    loc.chain.push((name, child));
                    continue;
                }
            }
            if child.is_symlink() && (!last || follow || must_be_dir) {
                if how.no_symlinks {
                    return Err(Errno::ELOOP);
                }
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(Errno::ELOOP);
                }
                let target = child.readlink()?;
                if target.is_empty() {
                    return Err(Errno::ENOENT);
                }
                if target[0] == b'/' {
                    loc = jump(&loc)?;
                }
                if target.ends_with(b"/") && last {
                    must_be_dir = true;
                }
                for c in split(&target).collect::<Vec<_>>().into_iter().rev() {
                    queue.push_front(c.to_vec());
                }
                continue;
            }
            loc.chain.push((name, child));
        }
        if must_be_dir && !loc.node().is_dir() {
            return Err(Errno::ENOTDIR);
        }
        Ok(Lookup::Found(loc))
    }

    /// Like [`FileSystem::walk`], but a missing object is `ENOENT`.
    pub fn resolve(&self, start: &Location, path: &[u8], follow: bool) -> Result<Location, Errno> {
        match self.walk(start, path, follow)? {
            Lookup::Found(l) => Ok(l),
            Lookup::Missing { .. } => Err(Errno::ENOENT),
        }
    }

    /// [`FileSystem::resolve`] for a process whose root is `root`.
    pub fn resolve_in(
        &self,
        root: &Location,
        start: &Location,
        path: &[u8],
        follow: bool,
    ) -> Result<Location, Errno> {
        match self.walk_in(root, start, path, follow, Resolve::default())? {
            Lookup::Found(l) => Ok(l),
            Lookup::Missing { .. } => Err(Errno::ENOENT),
        }
    }

    /// Opens a file to execute or map: a host file directly; a tmpfs file
    /// as a private snapshot in an anonymous memory file (never a host
    /// path), so the loader reads both the same way.
    pub fn open_exec(&self, loc: &Location) -> Result<Arc<HostFile>, Errno> {
        let Some(m) = loc.node().tmpfs() else {
            return self.open_host(loc);
        };
        let size = m.stat()?.size.max(0) as u64;
        if size > 1 << 30 {
            return Err(Errno::ENOMEM);
        }
        let mut data = vec![0u8; size as usize];
        let n = m.read_at(0, &mut data)?;
        data.truncate(n);
        Ok(Arc::new(HostFile::new(host::memfd_with(&data)?)))
    }

    /// Opens the object at `loc` for reading (files and directories only:
    /// host device nodes, FIFOs and sockets are refused, as on a `nodev`
    /// mount, so a crafted root cannot reach host devices).
    pub fn open_host(&self, loc: &Location) -> Result<Arc<HostFile>, Errno> {
        let Node::Host { h, mode } = loc.node() else {
            return Err(Errno::EINVAL);
        };
        let kind = mode & abi::S_IFMT;
        if kind != abi::S_IFREG && kind != abi::S_IFDIR {
            return Err(Errno::EACCES);
        }
        let dir = if kind == abi::S_IFDIR {
            if let Some(fd) = h.take_dir() {
                return Ok(Arc::new(HostFile::new(fd)));
            }
            libc::O_DIRECTORY
        } else {
            0
        };
        // A regular file of the root's read-only image: every description
        // reads it at its own offset (pread), so one host descriptor serves
        // them all, and opening it again costs no gofer round trip.
        let shared = kind == abi::S_IFREG && h.volume.is_none();
        if shared {
            if let Some(f) = h.file.get() {
                return Ok(f.clone());
            }
        }
        let fd = h.client.open(
            h.handle,
            libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | dir,
        )?;
        // The object may have changed between the walk and this open.
        let st = host::fstat(fd.as_fd())?;
        if st.st_mode & abi::S_IFMT != kind {
            return Err(Errno::EAGAIN);
        }
        let f = Arc::new(if shared {
            HostFile::of_root_image(fd, self.images.clone())
        } else {
            HostFile::new(fd)
        });
        if shared && OPEN_FILES_KEPT.fetch_add(1, Ordering::Relaxed) < max_kept(4, 256) {
            if h.file.set(f.clone()).is_err() {
                OPEN_FILES_KEPT.fetch_sub(1, Ordering::Relaxed);
            }
        } else if shared {
            OPEN_FILES_KEPT.fetch_sub(1, Ordering::Relaxed);
        }
        Ok(f)
    }

    fn ovl_lookup(&self, d: &OvlDir, depth: usize, name: &[u8]) -> Result<Node, Errno> {
        let mut path = d.path.clone();
        path.push(name.to_vec());
        let upper = upper_walk(&self.upper, &d.path).and_then(|u| child_inode(&*u, name).ok());
        let lower_child = |lower: &Option<Node>| -> Result<Option<Node>, Errno> {
            match lower {
                Some(l) => match self.lookup_child(l, depth, name) {
                    Ok(n) => Ok(Some(n)),
                    Err(Errno::ENOENT) => Ok(None),
                    Err(e) => Err(e),
                },
                None => Ok(None),
            }
        };
        match upper {
            Some(u) if u.is_whiteout() => Err(Errno::ENOENT),
            Some(u) if u.is_dir() => {
                let lower = if u.is_opaque() {
                    None
                } else {
                    lower_child(&d.lower)?.filter(Node::is_dir)
                };
                Ok(Node::Ovl(Arc::new(OvlDir { path, lower })))
            }
            Some(u) => Ok(Node::Inode(u)),
            None => match lower_child(&d.lower)? {
                Some(n @ Node::Host { .. }) if n.is_dir() => Ok(Node::Ovl(Arc::new(OvlDir {
                    path,
                    lower: Some(n),
                }))),
                Some(n) => Ok(n),
                None => Err(Errno::ENOENT),
            },
        }
    }

    /// Puts a file of the Sentry's own at `path` (its components, the last
    /// the file's name), over whatever the root has there, whether or not
    /// the root is writable: the sandbox's `/etc/resolv.conf`, `/etc/hosts`
    /// and trust store, the built-in init. Directories on the way take the
    /// lower layer's modes and owners; the file is root's, with `perm`.
    pub fn provide_file(&self, path: &[&[u8]], contents: &[u8], perm: u32) -> Result<(), Errno> {
        let (name, dirs) = path.split_last().ok_or(Errno::EINVAL)?;
        if self.host_root {
            // The host's directory is the container's and stays as it was:
            // the file is bound over the path, as an engine binds its
            // `/etc/resolv.conf`.
            let Node::Inode(dir) = self.new_tmpfs(0o755, None) else {
                return Err(Errno::EIO);
            };
            let f = dir.create(name, abi::S_IFREG | (perm & 0o7777), (0, 0), NewInode::File)?;
            f.write_all_at(0, contents)?;
            let path = path.iter().map(|c| c.to_vec()).collect();
            let mut g = self.guest_mounts.write().unwrap_or_else(|e| e.into_inner());
            g.push((
                MountPoint {
                    path,
                    root: Node::Inode(f),
                    flags: MountFlags::default(),
                },
                Writes::Allowed,
            ));
            self.any_guest_mount.store(true, Ordering::Release);
            return Ok(());
        }
        let mut up = self.upper.clone();
        let mut low = Some(self.root.clone());
        for (depth, dir) in dirs.iter().enumerate() {
            let lower = low
                .as_ref()
                .and_then(|n| self.lookup_child(n, depth, dir).ok());
            up = match child_inode(&*up, dir) {
                Ok(d) if d.is_dir() => d,
                Ok(_) => return Err(Errno::ENOTDIR),
                Err(_) => {
                    let (mode, uid, gid) = match lower.as_ref().map(|n| n.stat()) {
                        Some(Ok(st)) if st.mode & abi::S_IFMT == abi::S_IFDIR => {
                            (st.mode, st.uid, st.gid)
                        }
                        _ => (abi::S_IFDIR | 0o755, 0, 0),
                    };
                    up.create(dir, mode, (uid, gid), NewInode::Dir)?
                }
            };
            low = lower;
        }
        let _ = up.unlink_any(name);
        let f = up.create(name, abi::S_IFREG | (perm & 0o7777), (0, 0), NewInode::File)?;
        f.write_all_at(0, contents)?;
        let st = f.stat()?;
        let mtime = ts(st.mtime, st.mtime_nsec);
        self.provided.locked().push(Provided {
            file: f,
            size: st.size,
            mtime,
        });
        Ok(())
    }

    /// The upper half of overlay directory `d`, if the sandbox made one.
    pub fn existing_upper(&self, d: &OvlDir) -> Option<Arc<dyn Inode>> {
        upper_walk(&self.upper, &d.path)
    }

    /// The upper directory for overlay directory `d`, created (with the
    /// lower directories' modes and owners) if needed: "copy-up".
    pub fn ensure_upper(&self, d: &OvlDir) -> Result<Arc<dyn Inode>, Errno> {
        if !self.overlay {
            return Err(Errno::EROFS);
        }
        self.upper_dir(d)
    }

    /// [`FileSystem::ensure_upper`], also when the guest may not write to
    /// the root (for what the Sentry itself puts there).
    fn upper_dir(&self, d: &OvlDir) -> Result<Arc<dyn Inode>, Errno> {
        let mut cur = self.upper.clone();
        let mut lower = self.root.clone();
        for (i, c) in d.path.iter().enumerate() {
            let lower_next = match &lower {
                Node::Ovl(o) => o
                    .lower
                    .as_ref()
                    .and_then(|l| self.lookup_child(l, i, c).ok()),
                n => self.lookup_child(n, i, c).ok(),
            };
            let next = match child_inode(&*cur, c) {
                Ok(n) if n.is_dir() => n,
                Ok(_) => return Err(Errno::ENOTDIR),
                Err(_) => {
                    let st = lower_next
                        .as_ref()
                        .map(Node::stat)
                        .transpose()?
                        .ok_or(Errno::ENOENT)?;
                    let n = cur.create(c, st.mode, (st.uid, st.gid), NewInode::Dir)?;
                    n.restore_times(
                        ts(st.atime, st.atime_nsec),
                        ts(st.mtime, st.mtime_nsec),
                        ts(st.ctime, st.ctime_nsec),
                    );
                    n
                }
            };
            cur = next;
            lower = lower_next.unwrap_or(Node::Masked { ino: 0 });
        }
        Ok(cur)
    }

    /// Copies a lower (host) file or symlink at `loc` into the upper layer
    /// and returns the copy, which then stands for it.
    pub fn copy_up(&self, loc: &Location) -> Result<Arc<dyn Inode>, Errno> {
        if !self.overlay {
            return Err(Errno::EROFS);
        }
        let Some((Node::Ovl(parent), name)) = loc.parent() else {
            return Err(Errno::EROFS);
        };
        if matches!(loc.node(), Node::Host { h, .. } if h.volume.is_some()) {
            // A volume mounted over a path of the root is not its lower layer.
            return Err(Errno::EROFS);
        }
        let node = loc.node();
        let st = node.stat()?;
        let dir = self.ensure_upper(parent)?;
        let kind = st.mode & abi::S_IFMT;
        let copy = match kind {
            abi::S_IFREG => {
                let src = self.open_host(loc)?;
                let f = dir.create(name, st.mode, (st.uid, st.gid), NewInode::File)?;
                let mut buf = vec![0u8; 1 << 20];
                let mut pos = 0u64;
                loop {
                    let n = host::pread(src.fd(), &mut buf, pos)?;
                    if n == 0 {
                        break;
                    }
                    f.write_all_at(pos, &buf[..n])?;
                    pos += n as u64;
                }
                f
            }
            abi::S_IFLNK => {
                let target = node.readlink()?;
                dir.create(name, st.mode, (st.uid, st.gid), NewInode::Symlink(target))?
            }
            _ => return Err(Errno::EROFS),
        };
        copy.restore_times(
            ts(st.atime, st.atime_nsec),
            ts(st.mtime, st.mtime_nsec),
            ts(st.ctime, st.ctime_nsec),
        );
        Ok(copy)
    }

    /// Whether overlay directory `d` has a lower entry `name`.
    pub fn ovl_lower_has(&self, d: &OvlDir, depth: usize, name: &[u8]) -> bool {
        d.lower
            .as_ref()
            .is_some_and(|l| self.lookup_child(l, depth, name).is_ok())
    }

    /// Lists an overlay directory: upper entries over lower ones, minus
    /// whiteouts.
    pub fn ovl_list(&self, d: &OvlDir) -> Result<Vec<DirEntry>, Errno> {
        let mut by_name: std::collections::BTreeMap<Vec<u8>, DirEntry> =
            std::collections::BTreeMap::new();
        let upper = upper_walk(&self.upper, &d.path);
        let opaque = upper.as_ref().is_some_and(|u| u.is_opaque());
        if let (Some(Node::Host { .. }), false) = (&d.lower, opaque) {
            let lower = d.lower.as_ref().ok_or(Errno::EIO)?;
            let loc = Location {
                chain: vec![(Vec::new(), lower.clone())],
            };
            let f = self.open_host(&loc)?;
            for e in self.list_host(lower, &f)? {
                if e.name != b"." && e.name != b".." {
                    by_name.insert(e.name.clone(), e);
                }
            }
        }
        if let Some(u) = &upper {
            for (name, ino, mode) in u.entries_all()? {
                if mode == WHITEOUT_MODE {
                    by_name.remove(&name);
                } else {
                    by_name.insert(
                        name.clone(),
                        DirEntry {
                            ino,
                            kind: abi::dt::from_mode(mode),
                            name,
                        },
                    );
                }
            }
        }
        let mut v = dot_entries(1);
        v.extend(by_name.into_values());
        Ok(v)
    }

    /// The entries of directory `loc`, as `getdents` of a new opening of
    /// it lists them.
    pub fn list(&self, loc: &Location) -> Result<Vec<DirEntry>, Errno> {
        match loc.node() {
            Node::Ovl(o) => self.ovl_list(o),
            Node::PtsDir => Ok(self.pts_list()),
            Node::DevDir => Ok(self.dev_list()),
            n @ Node::Host { .. } => self.list_host(n, &*self.open_host(loc)?),
            n => list_dir(n, None),
        }
    }

    /// Lists host directory `node` through its open `file`; on the root's
    /// image, while walks down listed trees are common (`find`, `du`,
    /// `tar`, `ls -R`), its subdirectories are looked up ahead, together.
    pub fn list_host(&self, node: &Node, file: &HostFile) -> Result<Vec<DirEntry>, Errno> {
        let entries = list_dir(node, Some(file))?;
        if let Node::Host { h, .. } = node {
            if h.volume.is_none() {
                h.listed.store(true, Ordering::Relaxed);
                self.look_ahead(h, &entries);
            }
        }
        Ok(entries)
    }

    /// Adds `n` to the look-ahead score (a walk a look-ahead saved or would
    /// have saved; a look-ahead made costs one), kept within bounds so that
    /// it follows what the guest does now.
    fn walker_paid(&self, n: i32) {
        let _ = self
            .walker
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                Some((s + n).clamp(-WALKER_MAX, WALKER_MAX))
            });
    }

    /// Looks the subdirectories among `entries` of root directory `h` up in
    /// one gofer round trip (at most [`gofer::proto::MAX_WALK_DIRS`], those
    /// not already cached), when looking ahead has paid lately.
    fn look_ahead(&self, h: &Arc<GoferRef>, entries: &[DirEntry]) {
        if self.walker.load(Ordering::Relaxed) < WALKER_ON {
            return;
        }
        let names: Vec<&[u8]> = {
            let cache = self.lock_dcache();
            entries
                .iter()
                .filter(|e| e.kind == abi::dt::DIR && e.name != b"." && e.name != b"..")
                .filter(|e| !cache.contains(&(Arc::as_ptr(h) as usize, e.name.clone())))
                .map(|e| e.name.as_slice())
                .take(gofer::proto::MAX_WALK_DIRS)
                .collect()
        };
        if names.is_empty() {
            return;
        }
        self.walker_paid(-1);
        let Ok(found) = h.client.walk_dirs(h.handle, &names) else {
            return;
        };
        let mut gone = Vec::new();
        for (name, f) in names.iter().zip(found) {
            let Some((node, fd)) = f else { continue };
            let child = h.child(node);
            if let Some(fd) = fd {
                child.keep_dir(fd);
            }
            let n = if self.is_masked_dev(&child, node.stat.dev()) {
                Node::Masked { ino: node.stat.ino }
            } else {
                Node::Host {
                    h: Arc::new(child),
                    mode: node.stat.mode,
                }
            };
            let key = (Arc::as_ptr(h) as usize, name.to_vec());
            gone.extend(self.lock_dcache().insert(key, (h.clone(), Some(n)), true));
        }
        // (dropped outside the lock)
        drop(gone);
    }

    /// Lists `/dev`; a container's `ptmx` is a link, as runc makes it.
    pub fn dev_list(&self) -> Vec<DirEntry> {
        let mut v = list_dir(&Node::DevDir, None).unwrap_or_default();
        for d in self.impls.gpu_devices() {
            v.push(DirEntry {
                ino: Device::Nvidia(d).ino(),
                kind: abi::dt::CHR,
                name: d.name().into_bytes(),
            });
        }
        if self.container_dev() {
            for e in v.iter_mut().filter(|e| e.name == b"ptmx") {
                (e.ino, e.kind) = (PTMX_LINK_INO, abi::dt::LNK);
            }
        }
        v
    }

    /// Lists `/dev/pts`: `ptmx` and a node per live pair.
    pub fn pts_list(&self) -> Vec<DirEntry> {
        let mut v = dot_entries(1);
        v.push(DirEntry {
            ino: 2,
            kind: abi::dt::CHR,
            name: b"ptmx".to_vec(),
        });
        for n in self.impls.ptys() {
            v.push(DirEntry {
                ino: u64::from(n) + 3,
                kind: abi::dt::CHR,
                name: n.to_string().into_bytes(),
            });
        }
        v
    }

    /// Makes this host thread's `Node::Ovl` stats see this file system's
    /// upper layer.
    pub fn enter_thread(&self) {
        OVL_UPPER.with(|u| *u.borrow_mut() = Some(self.upper.clone()));
    }

    /// `statfs` of a host object.
    pub fn statfs_host(&self, node: &Node) -> Result<gofer::proto::StatFs, Errno> {
        match node {
            Node::Host { h, .. } => h.client.statfs(h.handle),
            _ => Err(Errno::EINVAL),
        }
    }
}

/// `openat2`'s `RESOLVE_*` restrictions on a path walk, and whose walk it
/// is.
#[derive(Clone, Copy, Debug, Default)]
pub struct Resolve<'a> {
    /// The walker's credentials: each directory walked through must grant
    /// them search permission (Linux's `may_lookup`), else `EACCES`.
    /// `None` for the Sentry's own walks.
    pub search: Option<&'a crate::kernel::auth::Creds>,
    /// `RESOLVE_NO_XDEV`: never cross a mount point (`EXDEV`)
    pub no_xdev: bool,
    /// `RESOLVE_NO_MAGICLINKS`: `/proc/[pid]/{fd/N,exe,cwd,root}` are not
    /// followed (`ELOOP`)
    pub no_magiclinks: bool,
    /// `RESOLVE_NO_SYMLINKS`: no symlink is followed (`ELOOP`)
    pub no_symlinks: bool,
    /// `RESOLVE_BENEATH`: stay below the starting directory (`EXDEV`)
    pub beneath: bool,
    /// `RESOLVE_IN_ROOT`: the starting directory is the root for `/`,
    /// `..` and absolute symlinks
    pub in_root: bool,
}

/// Identifies the mount `node` belongs to: objects with different keys are
/// on different file systems (`rename` and `link` between them are
/// `EXDEV`). The root's image and the overlay's layer above it are one.
pub fn mount_key(node: &Node) -> usize {
    match node {
        Node::Host { h, .. } if h.volume.is_some() => h.mount_id(),
        Node::Host { .. } | Node::Ovl(_) => 0,
        Node::DevDir | Node::Dev(_) => 1,
        Node::Masked { ino } => 2 + ((*ino as usize) << 4),
        Node::PtsDir | Node::Pts(_) => 5,
        Node::Inode(i) => i.mount_key(),
    }
}

/// Whether `child`, found as `name` in `parent`, is one of /proc's "magic"
/// links, which name an object rather than a path.
fn is_magic_link(parent: &Node, name: &[u8], child: &Node) -> bool {
    match child {
        Node::Inode(i) => i.is_magic_link(parent, name),
        _ => false,
    }
}

/// A handle on a host object, served by the gofer; closed when the last
/// node holding it goes.
pub struct GoferRef {
    client: Arc<gofer::client::Client>,
    handle: gofer::proto::Handle,
    /// a read-only regular file of the root, once opened: kept for the
    /// next open (see [`FileSystem::open_host`])
    file: std::sync::OnceLock<Arc<HostFile>>,
    /// a symbolic link of the root, once read: it cannot change either
    /// (see `stat`), and path walks through links such as
    /// `/etc/os-release` would otherwise ask the gofer every time
    target: std::sync::OnceLock<Vec<u8>>,
    /// attributes when looked up: the lower layer is the container's
    /// image, which nothing changes while the sandbox runs (writes go to
    /// the overlay's upper layer); a volume's are asked for each time
    stat: gofer::proto::Stat,
    /// on a volume (a host directory the user mounted), not the root
    volume: Option<VolumeKind>,
    /// a directory of the root opened for reading at its lookup, until the
    /// first open takes it (see [`FileSystem::open_host`])
    dir: Mutex<Option<OwnedFd>>,
    /// a directory the guest has listed (see `FileSystem::look_ahead`)
    listed: AtomicBool,
}

/// A socket of the socket layer, as the file system holds it (weakly: its
/// last close ends it).
pub type HostSocket = std::sync::Weak<dyn std::any::Any + Send + Sync>;

/// What the guest's writes to the root file system do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RootWrites {
    /// they are `EROFS`
    ReadOnly,
    /// they land in an in-memory overlay over the host directory, which
    /// stays as it was
    Memory,
    /// they reach the host directory through the root's gofer
    Host,
}

/// How a volume was mounted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VolumeKind {
    /// the guest's writes reach the host
    ReadWrite,
    /// writes answer `EROFS`
    ReadOnly,
}

impl GoferRef {
    /// The gofer serving this object.
    pub fn client(&self) -> &gofer::client::Client {
        &self.client
    }

    /// The gofer serving this object, shared.
    pub fn shared_client(&self) -> &Arc<gofer::client::Client> {
        &self.client
    }

    /// The gofer's handle on it.
    pub fn handle(&self) -> gofer::proto::Handle {
        self.handle
    }

    /// The volume it is on, if any.
    pub fn volume(&self) -> Option<VolumeKind> {
        self.volume
    }

    /// Identifies the file system it is on (`rename` across two is
    /// `EXDEV`).
    pub fn mount_id(&self) -> usize {
        Arc::as_ptr(&self.client) as usize
    }

    /// A handle on a node this gofer just made or walked to.
    pub fn child(&self, node: gofer::proto::Node) -> GoferRef {
        GoferRef {
            client: self.client.clone(),
            handle: node.handle,
            stat: node.stat,
            volume: self.volume,
            file: Default::default(),
            target: Default::default(),
            dir: Default::default(),
            listed: Default::default(),
        }
    }

    /// Keeps `fd`, this directory opened for reading, for its first open,
    /// if fewer than [`max_dirs_kept`] are kept (else it is closed).
    fn keep_dir(&self, fd: OwnedFd) {
        if DIRS_KEPT.fetch_add(1, Ordering::Relaxed) < max_dirs_kept() {
            *self.dir.locked() = Some(fd);
        } else {
            DIRS_KEPT.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The descriptor the lookup opened, if no open has taken it yet.
    fn take_dir(&self) -> Option<OwnedFd> {
        let fd = self.dir.locked().take()?;
        DIRS_KEPT.fetch_sub(1, Ordering::Relaxed);
        Some(fd)
    }

    /// Current attributes (cached for the root's read-only lower layer).
    pub fn stat(&self) -> Result<Stat, Errno> {
        match self.volume {
            None => Ok(self.stat.to_linux()),
            Some(_) => Ok(self.client.stat(self.handle)?.to_linux()),
        }
    }
}

impl fmt::Debug for GoferRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GoferRef({:?})", self.handle)
    }
}

/// Host descriptors of root files kept open for reuse (at most 256, or a
/// quarter of a low descriptor limit: see `max_kept`).
static OPEN_FILES_KEPT: AtomicUsize = AtomicUsize::new(0);

impl Drop for GoferRef {
    fn drop(&mut self) {
        if self.file.get().is_some() {
            OPEN_FILES_KEPT.fetch_sub(1, Ordering::Relaxed);
        }
        drop(self.take_dir());
        // A volume's object may be deleted on the host, whose inotify
        // tells DELETE_SELF only once no descriptor holds it: closed now.
        // The root's image does not change: its handles close in batches.
        if self.volume.is_some() {
            let _ = self.client.close(self.handle);
        } else {
            self.client.release(self.handle);
        }
    }
}

/// Directories held open from their lookup (see `GoferRef::dir`).
static DIRS_KEPT: AtomicUsize = AtomicUsize::new(0);

/// At most 512 directories are kept open, or an eighth of a low
/// descriptor limit.
fn max_dirs_kept() -> usize {
    max_kept(8, 512)
}

/// How many descriptors a cache may hold: `most`, or the `share`th part
/// of the Sentry's descriptor limit when that is low (each is a host
/// descriptor of its own, beside those the guest's files take).
fn max_kept(share: u64, most: usize) -> usize {
    static SOFT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let soft = *SOFT.get_or_init(|| host::getrlimit(libc::RLIMIT_NOFILE).cur);
    usize::try_from(soft / share)
        .unwrap_or(usize::MAX)
        .min(most)
}

/// The look-ahead score at which subdirectories are looked up ahead, and
/// its bound either way (so a change of habit shows within a few lists).
const WALKER_ON: i32 = 4;
const WALKER_MAX: i32 = 16;

type DentryKey = (usize, Vec<u8>);
/// A lookup: the parent (kept alive, as the key names it by address) and
/// the child, or `None` when it is not there.
type Dentry = (Arc<GoferRef>, Option<Node>);

/// A cached lookup, and whether it was made ahead and not used yet.
type CachedDentry = (Dentry, bool);

/// Host lookups made, by (parent handle's address, name). Each entry holds
/// a handle, one open descriptor in the gofer, hence the bound: entries
/// live in two generations, and when the young one is full the old one
/// goes, so entries in use stay (a hit in the old one moves it young).
struct DentryCache {
    young: DentryMap,
    old: DentryMap,
    /// entries per generation
    generation: usize,
}

type DentryMap = HashMap<DentryKey, CachedDentry>;

impl DentryCache {
    /// 1,024 entries a generation, or fewer under a low hard descriptor
    /// limit, which the gofer has too (an eighth of it: the gofer also
    /// holds the guest's open files and walks in progress).
    fn new() -> DentryCache {
        let hard = host::getrlimit(libc::RLIMIT_NOFILE).max;
        let generation = usize::try_from(hard / 8)
            .unwrap_or(usize::MAX)
            .clamp(16, 1024);
        DentryCache {
            young: DentryMap::new(),
            old: DentryMap::new(),
            generation,
        }
    }

    /// The lookup cached for `key` (and whether this is the first use of
    /// one made ahead), and the generation it pushed out, if any, for the
    /// caller to drop.
    fn get(&mut self, key: &DentryKey) -> (Option<(Option<Node>, bool)>, Option<DentryMap>) {
        if let Some(((_, n), ahead)) = self.young.get_mut(key) {
            return (Some((n.clone(), std::mem::take(ahead))), None);
        }
        let Some((k, (v, ahead))) = self.old.remove_entry(key) else {
            return (None, None);
        };
        let n = v.1.clone();
        (Some((n, ahead)), self.insert(k, v, false))
    }

    fn contains(&self, key: &DentryKey) -> bool {
        self.young.contains_key(key) || self.old.contains_key(key)
    }

    /// Caches a lookup (`ahead`: made before the guest asked); returns the
    /// generation it pushed out, if any.
    #[must_use]
    fn insert(&mut self, key: DentryKey, v: Dentry, ahead: bool) -> Option<DentryMap> {
        let gone = (self.young.len() >= self.generation)
            .then(|| std::mem::replace(&mut self.old, std::mem::take(&mut self.young)));
        self.young.insert(key, (v, ahead));
        gone
    }
}

/// One directory entry, as `getdents64` reports it.
#[derive(Clone, Debug)]
pub struct DirEntry {
    /// inode number
    pub ino: u64,
    /// `d_type`
    pub kind: u8,
    /// name
    pub name: Vec<u8>,
}

/// The `.` (inode `ino`) and `..` entries a directory listing starts with.
pub fn dot_entries(ino: u64) -> Vec<DirEntry> {
    vec![
        DirEntry {
            ino,
            kind: abi::dt::DIR,
            name: b".".to_vec(),
        },
        DirEntry {
            ino: 1,
            kind: abi::dt::DIR,
            name: b"..".to_vec(),
        },
    ]
}

/// Lists a directory node completely (the Sentry serves `getdents64` from
/// this snapshot, as Linux's own readdir sees a directory at one time).
pub fn list_dir(node: &Node, file: Option<&HostFile>) -> Result<Vec<DirEntry>, Errno> {
    let dot = dot_entries;
    match node {
        Node::DevDir => {
            let mut v = dot(1);
            for &(name, d, _) in DEVICES {
                let (major, minor) = d.number();
                v.push(DirEntry {
                    ino: 10 + (major - 1) * 16 + minor,
                    kind: abi::dt::CHR,
                    name: name.as_bytes().to_vec(),
                });
            }
            v.push(DirEntry {
                ino: 2,
                kind: abi::dt::DIR,
                name: b"shm".to_vec(),
            });
            v.push(DirEntry {
                ino: 3,
                kind: abi::dt::DIR,
                name: b"pts".to_vec(),
            });
            v.push(DirEntry {
                ino: 4,
                kind: abi::dt::DIR,
                name: b"mqueue".to_vec(),
            });
            for (i, n) in ["fd", "stdin", "stdout", "stderr"].iter().enumerate() {
                v.push(DirEntry {
                    ino: 30 + i as u64,
                    kind: abi::dt::LNK,
                    name: n.as_bytes().to_vec(),
                });
            }
            Ok(v)
        }
        Node::Masked { ino } => Ok(dot(*ino)),
        Node::PtsDir => Err(Errno::EIO),
        Node::Ovl(_) => Err(Errno::EIO),
        Node::Dev(_) | Node::Pts(_) => Err(Errno::ENOTDIR),
        Node::Inode(i) => i.list(),
        Node::Host { .. } => {
            let f = file.ok_or(Errno::EBADF)?;
            let mut out = Vec::new();
            let mut buf = vec![0u8; 32768];
            host::lseek(f.fd(), 0, libc::SEEK_SET)?;
            loop {
                let n = host::getdents64(f.fd(), &mut buf)?;
                if n == 0 {
                    break;
                }
                let mut at = 0;
                while at + 19 <= n {
                    let ino =
                        u64::from_ne_bytes(buf[at..at + 8].try_into().map_err(|_| Errno::EIO)?);
                    let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
                    let kind = buf[at + 18];
                    if reclen == 0 || at + reclen > n {
                        break;
                    }
                    let name_area = &buf[at + 19..at + reclen];
                    let len = name_area
                        .iter()
                        .position(|&b| b == 0)
                        .unwrap_or(name_area.len());
                    out.push(DirEntry {
                        ino,
                        kind,
                        name: name_area[..len].to_vec(),
                    });
                    at += reclen;
                }
            }
            Ok(out)
        }
    }
}

/// `fstat` of an anonymous object (pipe, socket) with `mode`.
pub fn pipe_stat_like(mode: u32) -> Stat {
    Stat {
        dev: SYNTH_DEV + 1,
        ..synth(mode, 0, 0)
    }
}

fn ts(sec: i64, nsec: i64) -> abi::Timespec {
    abi::Timespec {
        tv_sec: sec,
        tv_nsec: nsec,
    }
}

/// `st_mode` of an overlay whiteout (a 0/0 character device, as overlayfs
/// marks deletions).
pub const WHITEOUT_MODE: u32 = abi::S_IFCHR;
