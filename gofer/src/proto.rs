//! The gofer wire protocol: frames of a fixed little-endian header followed by
//! a payload encoded with serde and postcard, one request answered by one
//! reply on a Unix stream socket.
//!
//! A reply carries the request's `tag` and either the request's `kind` with
//! [`REPLY_BIT`] set (success, payload = the operation's reply type) or
//! [`KIND_ERROR`] (payload = a Linux errno as `i32`). `Open` and `Create`
//! replies carry one host descriptor as `SCM_RIGHTS` ancillary data on the
//! frame's first byte.
//!
//! Names are byte strings, not `String`: Linux file names are bytes, and a
//! host tree (or a guest) may hold names that are not UTF-8.

use abi::Errno;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Size of the frame header: `len: u32, kind: u16, tag: u16`.
pub const HEADER_LEN: usize = 8;
/// Largest payload either side accepts. Every reply is bounded well below
/// this (directory reads and xattr values are capped at 64 KiB), so a frame
/// over it is a framing error and the connection is closed.
pub const MAX_PAYLOAD: u32 = 1 << 20;
/// Set in a reply's `kind` on success.
pub const REPLY_BIT: u16 = 0x8000;
/// `kind` of an error reply; its payload is the errno.
pub const KIND_ERROR: u16 = 0xffff;
/// Longest file name (`NAME_MAX`).
pub const NAME_MAX: usize = 255;
/// Longest symlink target (`PATH_MAX` less the NUL).
pub const SYMLINK_MAX: usize = 4095;
/// Most names in one `Walk` or `WalkStat` (the Sentry splits longer paths).
pub const MAX_WALK: usize = 256;
/// Largest directory read and xattr value or list (`XATTR_SIZE_MAX`).
pub const MAX_DATA: usize = 64 * 1024;

/// A frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// payload length in bytes
    pub len: u32,
    /// operation (request), operation | [`REPLY_BIT`], or [`KIND_ERROR`]
    pub kind: u16,
    /// chosen by the client, echoed in the reply
    pub tag: u16,
}

impl Header {
    /// The header's wire form.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&self.len.to_le_bytes());
        b[4..6].copy_from_slice(&self.kind.to_le_bytes());
        b[6..8].copy_from_slice(&self.tag.to_le_bytes());
        b
    }

    /// Parses a header (any 8 bytes are a header; `len` is checked by the
    /// reader against [`MAX_PAYLOAD`]).
    pub fn decode(b: &[u8; HEADER_LEN]) -> Header {
        Header {
            len: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            kind: u16::from_le_bytes([b[4], b[5]]),
            tag: u16::from_le_bytes([b[6], b[7]]),
        }
    }
}

/// A server-side handle: an id in the connection's handle table, standing
/// for an `O_PATH` descriptor the gofer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Handle(pub u64);

/// A file name (one path component) as bytes.
pub type Name = Vec<u8>;

/// Checks one path component: not empty, no `/`, no NUL, not `.` or `..`
/// (EINVAL), at most [`NAME_MAX`] bytes (ENAMETOOLONG). The gofer resolves no
/// path: `..` and multi-component names are the Sentry's business, so any
/// such name reaching the server is an attempt to climb out of its root.
pub fn check_name(name: &[u8]) -> Result<(), Errno> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0)
    {
        return Err(Errno::EINVAL);
    }
    if name.len() > NAME_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    Ok(())
}

/// A time stamp (`struct statx_timestamp`). In `SetStat`, `nsec` may be
/// `UTIME_NOW` or `UTIME_OMIT`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timespec {
    /// seconds since the epoch
    pub sec: i64,
    /// nanoseconds
    pub nsec: u32,
}

/// The attributes of a file, from `statx(2)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stat {
    /// which fields are valid (`STATX_*`)
    pub mask: u32,
    /// file type and permissions (`st_mode`)
    pub mode: u32,
    /// hard links
    pub nlink: u32,
    /// owner
    pub uid: u32,
    /// group
    pub gid: u32,
    /// inode number
    pub ino: u64,
    /// size in bytes
    pub size: u64,
    /// 512-byte blocks allocated
    pub blocks: u64,
    /// preferred I/O size
    pub blksize: u32,
    /// `STATX_ATTR_*` flags
    pub attributes: u64,
    /// last access
    pub atime: Timespec,
    /// last modification
    pub mtime: Timespec,
    /// last status change
    pub ctime: Timespec,
    /// creation (valid if `mask` has `STATX_BTIME`)
    pub btime: Timespec,
    /// device of a device node, major
    pub rdev_major: u32,
    /// device of a device node, minor
    pub rdev_minor: u32,
    /// device holding the file, major
    pub dev_major: u32,
    /// device holding the file, minor
    pub dev_minor: u32,
}

fn makedev(major: u32, minor: u32) -> u64 {
    let (major, minor) = (u64::from(major), u64::from(minor));
    ((major & 0xffff_f000) << 32)
        | ((major & 0xfff) << 8)
        | ((minor & 0xffff_ff00) << 12)
        | (minor & 0xff)
}

impl Stat {
    /// The file type bits (`mode & S_IFMT`).
    pub fn file_type(&self) -> u32 {
        self.mode & abi::S_IFMT
    }

    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        self.file_type() == abi::S_IFDIR
    }

    /// Whether this is a symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.file_type() == abi::S_IFLNK
    }

    /// `st_dev` as `stat(2)` encodes it.
    pub fn dev(&self) -> u64 {
        makedev(self.dev_major, self.dev_minor)
    }

    /// `st_rdev` as `stat(2)` encodes it.
    pub fn rdev(&self) -> u64 {
        makedev(self.rdev_major, self.rdev_minor)
    }

    /// The `struct stat` a guest's `stat(2)` returns.
    pub fn to_linux(&self) -> abi::Stat {
        abi::Stat {
            dev: self.dev(),
            ino: self.ino,
            nlink: u64::from(self.nlink),
            mode: self.mode,
            uid: self.uid,
            gid: self.gid,
            pad0: 0,
            rdev: self.rdev(),
            size: i64::try_from(self.size).unwrap_or(i64::MAX),
            blksize: i64::from(self.blksize),
            blocks: i64::try_from(self.blocks).unwrap_or(i64::MAX),
            atime: self.atime.sec,
            atime_nsec: i64::from(self.atime.nsec),
            mtime: self.mtime.sec,
            mtime_nsec: i64::from(self.mtime.nsec),
            ctime: self.ctime.sec,
            ctime_nsec: i64::from(self.ctime.nsec),
            unused: [0; 3],
        }
    }
}

/// File system attributes, from `fstatfs(2)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatFs {
    /// file system magic (`f_type`)
    pub fs_type: u64,
    /// block size
    pub block_size: u64,
    /// total blocks
    pub blocks: u64,
    /// free blocks
    pub blocks_free: u64,
    /// free blocks for unprivileged users
    pub blocks_available: u64,
    /// total inodes
    pub files: u64,
    /// free inodes
    pub files_free: u64,
    /// longest name
    pub name_max: u64,
    /// fragment size
    pub fragment_size: u64,
    /// mount flags (`ST_*`)
    pub flags: u64,
}

/// How far a walk got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WalkStatus {
    /// every name was found
    Complete,
    /// the name after the last entry returned does not exist
    Missing,
    /// the last entry returned is not a directory (a symlink, which the
    /// gofer never follows, or a file) and names remained
    NotDir,
}

/// A handle and the attributes of what it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// the new handle
    pub handle: Handle,
    /// its attributes
    pub stat: Stat,
}

/// One directory entry (`struct linux_dirent64`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dirent {
    /// inode number
    pub ino: u64,
    /// offset of the next entry, for the next `Getdents`
    pub off: u64,
    /// `DT_*` type
    pub kind: u8,
    /// name
    pub name: Name,
}

/// An operation: a request type, its kind and its reply type.
pub trait Op: Serialize + DeserializeOwned {
    /// The frame kind.
    const KIND: u16;
    /// Whether a successful reply carries a descriptor.
    const DONATES_FD: bool = false;
    /// The reply's payload.
    type Reply: Serialize + DeserializeOwned;
}

macro_rules! ops {
    ($( $(#[$doc:meta])* $kind:literal $name:ident { $($(#[$fdoc:meta])* $field:ident : $ty:ty),* $(,)? } -> $reply:ty $(, donates $d:literal)? ;)*) => {
        $(
            $(#[$doc])*
            #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
            pub struct $name { $($(#[$fdoc])* pub $field: $ty),* }

            impl Op for $name {
                const KIND: u16 = $kind;
                $(const DONATES_FD: bool = $d;)?
                type Reply = $reply;
            }
        )*

        /// Any request, as the server decodes it.
        #[derive(Clone, Debug, PartialEq, Eq)]
        #[allow(missing_docs)]
        pub enum Request { $($name($name)),* }

        impl Request {
            /// The frame kind.
            pub fn kind(&self) -> u16 {
                match self { $(Request::$name(_) => $kind),* }
            }

            /// Encodes the payload.
            pub fn encode(&self) -> Result<Vec<u8>, postcard::Error> {
                match self { $(Request::$name(r) => postcard::to_stdvec(r)),* }
            }

            /// Decodes a request payload of the given kind: ENOSYS for an
            /// unknown kind, EINVAL for a payload that does not decode or
            /// has bytes left over.
            pub fn decode(kind: u16, payload: &[u8]) -> Result<Request, Errno> {
                match kind {
                    $($kind => decode_exact(payload).map(Request::$name),)*
                    _ => Err(Errno::ENOSYS),
                }
            }
        }
    };
}

/// Decodes a whole payload; trailing bytes are an error.
pub fn decode_exact<T: DeserializeOwned>(payload: &[u8]) -> Result<T, Errno> {
    match postcard::take_from_bytes::<T>(payload) {
        Ok((v, [])) => Ok(v),
        _ => Err(Errno::EINVAL),
    }
}

ops! {
    /// Returns a handle on the server's root.
    1 Attach {} -> Node;
    /// Looks `names` up one by one from `dir`, returning a handle and stat
    /// for each found. Symlinks are never followed.
    2 Walk {
        /// starting directory
        dir: Handle,
        /// path components
        names: Vec<Name>,
    } -> WalkReply;
    /// Like `Walk`, but returns only the stats (no handles are made).
    3 WalkStat {
        /// starting directory
        dir: Handle,
        /// path components
        names: Vec<Name>,
    } -> WalkStatReply;
    /// Opens the file for I/O and donates the descriptor. `flags` are
    /// `open(2)` flags (access mode, `O_APPEND`, `O_TRUNC`, `O_NONBLOCK`,
    /// `O_DIRECTORY`, sync flags); a symlink gives ELOOP, a device, FIFO or
    /// socket EACCES.
    4 Open {
        /// the file
        handle: Handle,
        /// `O_*` flags
        flags: u32,
    } -> (), donates true;
    /// Creates a regular file (always `O_CREAT | O_EXCL`) and donates it.
    5 Create {
        /// parent directory
        dir: Handle,
        /// new name
        name: Name,
        /// `O_*` flags for the donated descriptor
        flags: u32,
        /// permissions (set-user-ID and set-group-ID are cleared)
        mode: u32,
    } -> Node, donates true;
    /// Makes a directory.
    6 Mkdir {
        /// parent directory
        dir: Handle,
        /// new name
        name: Name,
        /// permissions
        mode: u32,
    } -> Node;
    /// Makes a regular file or a FIFO (`mode` holds the type).
    7 Mknod {
        /// parent directory
        dir: Handle,
        /// new name
        name: Name,
        /// type and permissions
        mode: u32,
    } -> Node;
    /// Makes a symbolic link.
    8 Symlink {
        /// parent directory
        dir: Handle,
        /// new name
        name: Name,
        /// link contents
        target: Vec<u8>,
    } -> Node;
    /// Makes a hard link to `target`.
    9 Link {
        /// parent directory
        dir: Handle,
        /// new name
        name: Name,
        /// existing file
        target: Handle,
    } -> Node;
    /// Removes a name (`flags`: 0 or `AT_REMOVEDIR`).
    10 Unlink {
        /// parent directory
        dir: Handle,
        /// name
        name: Name,
        /// `AT_REMOVEDIR` or 0
        flags: u32,
    } -> ();
    /// Renames (`flags`: `RENAME_NOREPLACE`, `RENAME_EXCHANGE`).
    11 Rename {
        /// old parent
        old_dir: Handle,
        /// old name
        old_name: Name,
        /// new parent
        new_dir: Handle,
        /// new name
        new_name: Name,
        /// `RENAME_*`
        flags: u32,
    } -> ();
    /// Reads a symbolic link.
    12 Readlink {
        /// the link
        handle: Handle,
    } -> Vec<u8>;
    /// Reads directory entries from `offset` (0 or a previous `Dirent::off`),
    /// at most `count` bytes of `linux_dirent64` (capped at 64 KiB).
    13 Getdents {
        /// the directory
        handle: Handle,
        /// where to start
        offset: u64,
        /// buffer size
        count: u32,
    } -> Vec<Dirent>;
    /// Returns a file's attributes.
    14 GetStat {
        /// the file
        handle: Handle,
    } -> Stat;
    /// Changes attributes: the `STATX_MODE`, `STATX_UID`, `STATX_GID`,
    /// `STATX_SIZE`, `STATX_ATIME`, `STATX_MTIME` bits of `mask` say which.
    15 SetStat {
        /// the file
        handle: Handle,
        /// which fields to set
        mask: u32,
        /// permissions (set-user-ID and set-group-ID are cleared)
        mode: u32,
        /// owner
        uid: u32,
        /// group
        gid: u32,
        /// size
        size: u64,
        /// access time (`nsec` may be `UTIME_NOW`)
        atime: Timespec,
        /// modification time (`nsec` may be `UTIME_NOW`)
        mtime: Timespec,
    } -> ();
    /// Returns file system attributes.
    16 GetStatFs {
        /// any file on the file system
        handle: Handle,
    } -> StatFs;
    /// Flushes a file or directory to storage.
    17 Fsync {
        /// the file
        handle: Handle,
    } -> ();
    /// Reads an extended attribute (only the `user.` namespace is served).
    18 GetXattr {
        /// the file
        handle: Handle,
        /// attribute name
        name: Name,
    } -> Vec<u8>;
    /// Sets an extended attribute (`flags`: `XATTR_CREATE`, `XATTR_REPLACE`).
    19 SetXattr {
        /// the file
        handle: Handle,
        /// attribute name
        name: Name,
        /// value
        value: Vec<u8>,
        /// `XATTR_*`
        flags: u32,
    } -> ();
    /// Lists extended attribute names (of the `user.` namespace).
    20 ListXattr {
        /// the file
        handle: Handle,
    } -> Vec<Name>;
    /// Removes an extended attribute.
    21 RemoveXattr {
        /// the file
        handle: Handle,
        /// attribute name
        name: Name,
    } -> ();
    /// Releases a handle.
    22 Close {
        /// the handle
        handle: Handle,
    } -> ();
    /// Moves the thread serving this connection to `cpu`, where its caller
    /// now runs: a round trip then wakes no other core, which costs tens
    /// of microseconds on some machines. `EINVAL` past the host's CPUs.
    23 Follow {
        /// the caller's CPU
        cpu: u32,
    } -> ();
    /// Donates the connection's host inotify instance (made on the first
    /// call, non-blocking; later calls donate the same one): a read-only
    /// stream of events for the watches [`AddWatch`] puts on it, which
    /// opens nothing.
    24 WatchInit {} -> (), donates true;
    /// Watches the object of `handle` on the connection's inotify instance
    /// for the [`WATCH_EVENTS`] in `mask` (others are EINVAL) and returns
    /// the host's watch descriptor (the same one for the same object).
    /// The object is never followed if it is a symlink. ENOSPC past
    /// [`MAX_WATCHES`] watches.
    25 AddWatch {
        /// the object
        handle: Handle,
        /// `IN_*` event bits
        mask: u32,
    } -> i32;
    /// Removes a watch [`AddWatch`] made (EINVAL for any other).
    26 RmWatch {
        /// the host's watch descriptor
        wd: i32,
    } -> ();
    /// `Walk` of one name that also opens a directory it finds for reading
    /// and donates that descriptor (none for anything else, or when the
    /// directory cannot be read): a directory listed right after its
    /// lookup then costs one round trip, not two.
    27 WalkOpenDir {
        /// starting directory
        dir: Handle,
        /// the name
        name: Name,
    } -> WalkReply, donates true;
    /// Releases several handles (at most [`MAX_WALK`]); EBADF if one is
    /// unknown, after releasing the others.
    28 CloseMany {
        /// the handles
        handles: Vec<Handle>,
    } -> ();
    /// Looks up each of `names` in `dir` (at most [`MAX_WALK_DIRS`]) and
    /// returns, in order, a handle on each that is a directory, opened for
    /// reading as `WalkOpenDir` does (its descriptors donated in order, one
    /// for each entry whose `open` is set); `None` for one that is missing
    /// or not a directory. A client that lists a directory asks for its
    /// subdirectories ahead of a walk, in one round trip.
    29 WalkDirs {
        /// the directory
        dir: Handle,
        /// names in it
        names: Vec<Name>,
    } -> Vec<Option<WalkedDir>>, donates true;
}

/// The `IN_*` events a host watch may ask for: changes to objects and
/// directory entries. Opens, reads and closes without writing are not
/// among them (the Sentry raises those itself; the host would report the
/// gofer's and the Sentry's own).
pub const WATCH_EVENTS: u32 = 0x2 // IN_MODIFY
    | 0x4 // IN_ATTRIB
    | 0x8 // IN_CLOSE_WRITE
    | 0x40 // IN_MOVED_FROM
    | 0x80 // IN_MOVED_TO
    | 0x100 // IN_CREATE
    | 0x200 // IN_DELETE
    | 0x400 // IN_DELETE_SELF
    | 0x800; // IN_MOVE_SELF

/// Most host watches one connection holds (each pins a host inode and
/// counts against the user's `max_user_watches`).
pub const MAX_WATCHES: usize = 8192;

/// Most names in one `WalkDirs`: its descriptors fit one frame.
pub const MAX_WALK_DIRS: usize = crate::sys::MAX_FDS;

/// A directory `WalkDirs` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalkedDir {
    /// its handle and attributes
    pub node: Node,
    /// whether a descriptor open for reading it came with the reply
    pub open: bool,
}

/// Reply to `Walk`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalkReply {
    /// how far the walk got
    pub status: WalkStatus,
    /// one per name found, in order
    pub nodes: Vec<Node>,
}

/// Reply to `WalkStat`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalkStatReply {
    /// how far the walk got
    pub status: WalkStatus,
    /// one per name found, in order
    pub stats: Vec<Stat>,
}

/// `mask` bits of `SetStat` (the `STATX_*` values).
pub mod setstat {
    /// set the permissions
    pub const MODE: u32 = 0x2;
    /// set the owner
    pub const UID: u32 = 0x8;
    /// set the group
    pub const GID: u32 = 0x10;
    /// set the access time
    pub const ATIME: u32 = 0x20;
    /// set the modification time
    pub const MTIME: u32 = 0x40;
    /// truncate or extend
    pub const SIZE: u32 = 0x200;
    /// every bit the server knows
    pub const ALL: u32 = MODE | UID | GID | ATIME | MTIME | SIZE;
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names() {
        assert_eq!(check_name(b"a"), Ok(()));
        assert_eq!(check_name(b"..."), Ok(()));
        assert_eq!(check_name(&[0xff, 0xfe]), Ok(()));
        assert_eq!(check_name(&[b'x'; 255]), Ok(()));
        assert_eq!(check_name(&[b'x'; 256]), Err(Errno::ENAMETOOLONG));
        for bad in [&b""[..], b".", b"..", b"a/b", b"/", b"a\0", b"../x"] {
            assert_eq!(check_name(bad), Err(Errno::EINVAL), "{bad:?}");
        }
    }

    #[test]
    fn header_round_trip() {
        let h = Header {
            len: 0x0102_0304,
            kind: 0x8005,
            tag: 7,
        };
        let b = h.encode();
        assert_eq!(b, [4, 3, 2, 1, 5, 0x80, 7, 0]);
        assert_eq!(Header::decode(&b), h);
    }

    #[test]
    fn decode_rejects_garbage() {
        assert_eq!(Request::decode(999, &[]), Err(Errno::ENOSYS));
        // Attach has an empty payload: a stray byte is an error.
        assert!(Request::decode(Attach::KIND, &[]).is_ok());
        assert_eq!(Request::decode(Attach::KIND, &[0]), Err(Errno::EINVAL));
        assert_eq!(Request::decode(Walk::KIND, &[1]), Err(Errno::EINVAL));
        // The watch operations: fixed kinds at the end of the list, and
        // their payloads are checked as strictly as the others'.
        assert_eq!(
            (WatchInit::KIND, AddWatch::KIND, RmWatch::KIND),
            (24, 25, 26)
        );
        const { assert!(WatchInit::DONATES_FD && !AddWatch::DONATES_FD) };
        assert_eq!(Request::decode(WatchInit::KIND, &[0]), Err(Errno::EINVAL));
        assert_eq!(Request::decode(AddWatch::KIND, &[1]), Err(Errno::EINVAL));
        assert_eq!(
            Request::decode(RmWatch::KIND, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            Err(Errno::EINVAL)
        );
        let add = Request::AddWatch(AddWatch {
            handle: Handle(3),
            mask: WATCH_EVENTS,
        });
        let b = add.encode().expect("encode");
        assert_eq!(Request::decode(AddWatch::KIND, &b), Ok(add));
        assert_eq!(
            Request::decode(AddWatch::KIND, &[b.as_slice(), &[0]].concat()),
            Err(Errno::EINVAL)
        );
        // A length prefix far larger than the payload must not allocate it.
        assert_eq!(
            Request::decode(Walk::KIND, &[1, 0xff, 0xff, 0xff, 0xff, 0x0f]),
            Err(Errno::EINVAL)
        );
    }

    #[test]
    fn stat_to_linux() {
        let s = Stat {
            mode: abi::S_IFREG | 0o644,
            dev_major: 8,
            dev_minor: 1,
            rdev_major: 0x1234,
            rdev_minor: 0x567,
            size: 10,
            ..Stat::default()
        };
        let l = s.to_linux();
        assert_eq!(l.dev, 0x801);
        // glibc's makedev: minor low 8 bits, major 12 bits, minor high bits.
        assert_eq!(l.rdev, 0x1000_0052_3467);
        assert_eq!(l.size, 10);
        assert!(!s.is_dir());
    }

    /// Names a hostile client would try, and random bytes.
    fn name() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(b"..".to_vec()),
            Just(b".".to_vec()),
            Just(Vec::new()),
            Just(b"a".to_vec()),
            Just(b"f".to_vec()),
            Just(b"esc".to_vec()),
            Just(b"fifo".to_vec()),
            Just(b"../../x".to_vec()),
            Just(b"user.x".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..300),
        ]
    }

    fn ts() -> impl Strategy<Value = Timespec> {
        (any::<i64>(), any::<u32>()).prop_map(|(sec, nsec)| Timespec { sec, nsec })
    }

    pub(crate) fn request() -> impl Strategy<Value = Request> {
        // Mostly handles the server has handed out.
        let h = || prop_oneof![4 => 0u64..8, 1 => any::<u64>()].prop_map(Handle);
        prop_oneof![
            Just(Request::Attach(Attach {})),
            (h(), proptest::collection::vec(name(), 0..8))
                .prop_map(|(dir, names)| Request::Walk(Walk { dir, names })),
            (h(), proptest::collection::vec(name(), 0..8))
                .prop_map(|(dir, names)| Request::WalkStat(WalkStat { dir, names })),
            (h(), any::<u32>()).prop_map(|(handle, flags)| Request::Open(Open { handle, flags })),
            (h(), name(), any::<u32>(), any::<u32>()).prop_map(|(dir, name, flags, mode)| {
                Request::Create(Create {
                    dir,
                    name,
                    flags,
                    mode,
                })
            }),
            (h(), name(), any::<u32>()).prop_map(|(dir, name, mode)| Request::Mkdir(Mkdir {
                dir,
                name,
                mode
            })),
            (h(), name(), any::<u32>()).prop_map(|(dir, name, mode)| Request::Mknod(Mknod {
                dir,
                name,
                mode
            })),
            (h(), name(), name()).prop_map(|(dir, name, target)| Request::Symlink(Symlink {
                dir,
                name,
                target
            })),
            (h(), name(), h()).prop_map(|(dir, name, target)| Request::Link(Link {
                dir,
                name,
                target
            })),
            (h(), name(), any::<u32>()).prop_map(|(dir, name, flags)| Request::Unlink(Unlink {
                dir,
                name,
                flags
            })),
            (h(), name(), h(), name(), any::<u32>()).prop_map(
                |(old_dir, old_name, new_dir, new_name, flags)| Request::Rename(Rename {
                    old_dir,
                    old_name,
                    new_dir,
                    new_name,
                    flags
                })
            ),
            h().prop_map(|handle| Request::Readlink(Readlink { handle })),
            (h(), any::<u64>(), any::<u32>()).prop_map(|(handle, offset, count)| {
                Request::Getdents(Getdents {
                    handle,
                    offset,
                    count,
                })
            }),
            h().prop_map(|handle| Request::GetStat(GetStat { handle })),
            (
                h(),
                any::<u32>(),
                any::<u32>(),
                any::<u32>(),
                any::<u32>(),
                any::<u64>(),
                ts(),
                ts()
            )
                .prop_map(|(handle, mask, mode, uid, gid, size, atime, mtime)| {
                    Request::SetStat(SetStat {
                        handle,
                        mask,
                        mode,
                        uid,
                        gid,
                        size,
                        atime,
                        mtime,
                    })
                }),
            h().prop_map(|handle| Request::GetStatFs(GetStatFs { handle })),
            h().prop_map(|handle| Request::Fsync(Fsync { handle })),
            (h(), name()).prop_map(|(handle, name)| Request::GetXattr(GetXattr { handle, name })),
            (h(), name(), name(), any::<u32>()).prop_map(|(handle, name, value, flags)| {
                Request::SetXattr(SetXattr {
                    handle,
                    name,
                    value,
                    flags,
                })
            }),
            h().prop_map(|handle| Request::ListXattr(ListXattr { handle })),
            (h(), name())
                .prop_map(|(handle, name)| Request::RemoveXattr(RemoveXattr { handle, name })),
            h().prop_map(|handle| Request::Close(Close { handle })),
            Just(Request::WatchInit(WatchInit {})),
            (h(), prop_oneof![Just(WATCH_EVENTS), any::<u32>()])
                .prop_map(|(handle, mask)| Request::AddWatch(AddWatch { handle, mask })),
            any::<i32>().prop_map(|wd| Request::RmWatch(RmWatch { wd })),
            (h(), name()).prop_map(|(dir, name)| Request::WalkOpenDir(WalkOpenDir { dir, name })),
            proptest::collection::vec(h(), 0..300)
                .prop_map(|handles| Request::CloseMany(CloseMany { handles })),
            (h(), proptest::collection::vec(name(), 0..40))
                .prop_map(|(dir, names)| Request::WalkDirs(WalkDirs { dir, names })),
        ]
    }

    proptest! {
        #[test]
        fn request_round_trip(req in request()) {
            let payload = req.encode().expect("encode");
            prop_assert!(payload.len() < MAX_PAYLOAD as usize);
            prop_assert_eq!(Request::decode(req.kind(), &payload), Ok(req));
        }

        #[test]
        fn random_payloads_never_panic(kind in 0u16..40, payload in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Request::decode(kind, &payload);
        }

        #[test]
        fn stat_round_trip(ino in any::<u64>(), mode in any::<u32>(), a in ts(), m in ts()) {
            let s = Stat { ino, mode, atime: a, mtime: m, ..Stat::default() };
            let b = postcard::to_stdvec(&s).expect("encode");
            prop_assert_eq!(decode_exact::<Stat>(&b), Ok(s));
        }

        #[test]
        fn reply_round_trip(names in proptest::collection::vec(name(), 0..5), ino in any::<u64>()) {
            let d: Vec<Dirent> = names.into_iter().enumerate().map(|(i, name)| Dirent { ino, off: i as u64, kind: 4, name }).collect();
            let b = postcard::to_stdvec(&d).expect("encode");
            prop_assert_eq!(decode_exact::<Vec<Dirent>>(&b), Ok(d));
        }
    }
}
