//! Landlock (landlock(7), linux/landlock.h): the rulesets a process builds
//! and enforces on itself, and the access rights their rules name.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// `landlock_create_ruleset`'s flag: answer the ABI version, make nothing.
pub const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1 << 0;
/// `landlock_create_ruleset`'s flag: answer the errata fixed (ABI 7).
pub const LANDLOCK_CREATE_RULESET_ERRATA: u32 = 1 << 1;
/// `landlock_restrict_self`'s flags (ABI 7): `LOG_SAME_EXEC_OFF`,
/// `LOG_NEW_EXEC_ON`, `LOG_SUBDOMAINS_OFF`.
pub const LANDLOCK_RESTRICT_SELF_FLAGS: u32 = 0x7;
/// `LANDLOCK_RESTRICT_SELF_LOG_SUBDOMAINS_OFF`.
pub const LANDLOCK_RESTRICT_SELF_LOG_SUBDOMAINS_OFF: u32 = 1 << 2;
/// `landlock_add_rule`'s rule type: a file hierarchy.
pub const LANDLOCK_RULE_PATH_BENEATH: u32 = 1;
/// `landlock_add_rule`'s rule type: a TCP port (ABI 4).
pub const LANDLOCK_RULE_NET_PORT: u32 = 2;

/// What a ruleset may scope to its domain (`LANDLOCK_SCOPE_*`, ABI 6).
pub mod scope {
    /// no connecting to an abstract Unix socket made outside the domain
    pub const ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
    /// no signals to processes outside the domain
    pub const SIGNAL: u64 = 1 << 1;
}

/// The network access rights (`LANDLOCK_ACCESS_NET_*`, ABI 4).
pub mod net {
    /// bind a TCP socket to the port
    pub const BIND_TCP: u64 = 1 << 0;
    /// connect a TCP socket to the port
    pub const CONNECT_TCP: u64 = 1 << 1;
}

/// The file-system access rights (`LANDLOCK_ACCESS_FS_*`).
pub mod access {
    /// execute a file
    pub const EXECUTE: u64 = 1 << 0;
    /// open a file for writing
    pub const WRITE_FILE: u64 = 1 << 1;
    /// open a file for reading
    pub const READ_FILE: u64 = 1 << 2;
    /// open or list a directory
    pub const READ_DIR: u64 = 1 << 3;
    /// remove (or rename away) a directory in it
    pub const REMOVE_DIR: u64 = 1 << 4;
    /// unlink (or rename away) a file in it
    pub const REMOVE_FILE: u64 = 1 << 5;
    /// make a character device in it
    pub const MAKE_CHAR: u64 = 1 << 6;
    /// make a directory in it
    pub const MAKE_DIR: u64 = 1 << 7;
    /// make a regular file in it
    pub const MAKE_REG: u64 = 1 << 8;
    /// make a Unix socket in it
    pub const MAKE_SOCK: u64 = 1 << 9;
    /// make a FIFO in it
    pub const MAKE_FIFO: u64 = 1 << 10;
    /// make a block device in it
    pub const MAKE_BLOCK: u64 = 1 << 11;
    /// make a symbolic link in it
    pub const MAKE_SYM: u64 = 1 << 12;
    /// link or rename a file from or to another directory (ABI 2)
    pub const REFER: u64 = 1 << 13;
    /// truncate a file (ABI 3)
    pub const TRUNCATE: u64 = 1 << 14;
    /// `ioctl` on a character or block device (ABI 5)
    pub const IOCTL_DEV: u64 = 1 << 15;
}

/// `struct landlock_ruleset_attr`: what a ruleset handles (denies unless a
/// rule allows). Later ABIs append fields; a caller's shorter struct is
/// zero-extended, a longer one must be zero past what is known.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RulesetAttr {
    /// file-system rights handled
    pub handled_access_fs: u64,
    /// network rights handled (ABI 4)
    pub handled_access_net: u64,
    /// IPC scopes (ABI 6)
    pub scoped: u64,
}

const _: () = assert!(size_of::<RulesetAttr>() == 24);

/// `struct landlock_path_beneath_attr` (packed: 12 bytes).
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct PathBeneathAttr {
    /// the rights the rule allows beneath the file
    pub allowed_access: u64,
    /// the file (any descriptor with a path, `O_PATH` or not)
    pub parent_fd: i32,
}

const _: () = assert!(size_of::<PathBeneathAttr>() == 12);

/// `struct landlock_net_port_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct NetPortAttr {
    /// the rights the rule allows for the port
    pub allowed_access: u64,
    /// the port, host order
    pub port: u64,
}

const _: () = assert!(size_of::<NetPortAttr>() == 16);
