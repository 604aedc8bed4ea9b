//! Flag and constant values of the Linux x86-64 ABI.

use bitflags::bitflags;

bitflags! {
    /// `open(2)` flags (the access mode lives in the low two bits, see [`O_ACCMODE`]).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct OpenFlags: u32 {
        const WRONLY = 0o1;
        const RDWR = 0o2;
        const CREAT = 0o100;
        const EXCL = 0o200;
        const NOCTTY = 0o400;
        const TRUNC = 0o1000;
        const APPEND = 0o2000;
        const NONBLOCK = 0o4000;
        const DSYNC = 0o10000;
        const ASYNC = 0o20000;
        const DIRECT = 0o40000;
        const LARGEFILE = 0o100000;
        const DIRECTORY = 0o200000;
        const NOFOLLOW = 0o400000;
        const NOATIME = 0o1000000;
        const CLOEXEC = 0o2000000;
        const SYNC = 0o4010000;
        const PATH = 0o10000000;
        const TMPFILE = 0o20200000;
        const _ = !0;
    }
}

/// Access-mode bits of the open flags.
pub const O_ACCMODE: u32 = 0o3;

bitflags! {
    /// `preadv2(2)`/`pwritev2(2)` flags (`RWF_*`), as of Linux 6.17.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct RwfFlags: u32 {
        const HIPRI = 0x01;
        const DSYNC = 0x02;
        const SYNC = 0x04;
        const NOWAIT = 0x08;
        const APPEND = 0x10;
        const NOAPPEND = 0x20;
        const ATOMIC = 0x40;
        const DONTCACHE = 0x80;
        const NOSIGNAL = 0x100;
    }
}

bitflags! {
    /// `mmap(2)` flags.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct MapFlags: u64 {
        const SHARED = 0x01;
        const PRIVATE = 0x02;
        const SHARED_VALIDATE = 0x03;
        const FIXED = 0x10;
        const ANONYMOUS = 0x20;
        const GROWSDOWN = 0x100;
        const DENYWRITE = 0x800;
        const EXECUTABLE = 0x1000;
        const LOCKED = 0x2000;
        const NORESERVE = 0x4000;
        const POPULATE = 0x8000;
        const NONBLOCK = 0x10000;
        const STACK = 0x20000;
        const HUGETLB = 0x40000;
        const SYNC = 0x80000;
        const FIXED_NOREPLACE = 0x100000;
        const _ = !0;
    }
}

/// Mask of the mapping type bits of `MapFlags` (`MAP_TYPE`).
pub const MAP_TYPE: u64 = 0x0f;

/// `dirfd` meaning "the current working directory".
pub const AT_FDCWD: i32 = -100;
/// Do not follow a final symlink.
pub const AT_SYMLINK_NOFOLLOW: u32 = 0x100;
/// `unlinkat`: remove a directory.
pub const AT_REMOVEDIR: u32 = 0x200;
/// `faccessat`: use effective ids.
pub const AT_EACCESS: u32 = 0x200;
/// Follow a final symlink (`linkat`).
pub const AT_SYMLINK_FOLLOW: u32 = 0x400;
/// Do not automount.
pub const AT_NO_AUTOMOUNT: u32 = 0x800;
/// An empty path names `dirfd` itself.
pub const AT_EMPTY_PATH: u32 = 0x1000;
/// `statx` sync-type bits.
pub const AT_STATX_SYNC_TYPE: u32 = 0x6000;

/// File type bits of `st_mode`.
pub const S_IFMT: u32 = 0o170000;
/// Socket.
pub const S_IFSOCK: u32 = 0o140000;
/// Symbolic link.
pub const S_IFLNK: u32 = 0o120000;
/// Regular file.
pub const S_IFREG: u32 = 0o100000;
/// Block device.
pub const S_IFBLK: u32 = 0o060000;
/// Directory.
pub const S_IFDIR: u32 = 0o040000;
/// Character device.
pub const S_IFCHR: u32 = 0o020000;
/// FIFO.
pub const S_IFIFO: u32 = 0o010000;
/// Set-user-ID bit.
pub const S_ISUID: u32 = 0o4000;
/// Set-group-ID bit.
pub const S_ISGID: u32 = 0o2000;
/// Sticky bit: in a directory, only owners may remove names.
pub const S_ISVTX: u32 = 0o1000;

/// `d_type` values of `getdents64`.
pub mod dt {
    /// unknown
    pub const UNKNOWN: u8 = 0;
    /// FIFO
    pub const FIFO: u8 = 1;
    /// character device
    pub const CHR: u8 = 2;
    /// directory
    pub const DIR: u8 = 4;
    /// block device
    pub const BLK: u8 = 6;
    /// regular file
    pub const REG: u8 = 8;
    /// symlink
    pub const LNK: u8 = 10;
    /// socket
    pub const SOCK: u8 = 12;

    /// The `d_type` for an `st_mode`.
    pub fn from_mode(mode: u32) -> u8 {
        ((mode & super::S_IFMT) >> 12) as u8
    }
}

/// Auxiliary vector keys (`AT_*` of elf.h).
pub mod auxv {
    #![allow(missing_docs)]
    pub const AT_NULL: u64 = 0;
    pub const AT_PHDR: u64 = 3;
    pub const AT_PHENT: u64 = 4;
    pub const AT_PHNUM: u64 = 5;
    pub const AT_PAGESZ: u64 = 6;
    pub const AT_BASE: u64 = 7;
    pub const AT_FLAGS: u64 = 8;
    pub const AT_ENTRY: u64 = 9;
    pub const AT_UID: u64 = 11;
    pub const AT_EUID: u64 = 12;
    pub const AT_GID: u64 = 13;
    pub const AT_EGID: u64 = 14;
    pub const AT_PLATFORM: u64 = 15;
    pub const AT_HWCAP: u64 = 16;
    pub const AT_CLKTCK: u64 = 17;
    pub const AT_SECURE: u64 = 23;
    pub const AT_RANDOM: u64 = 25;
    pub const AT_HWCAP2: u64 = 26;
    pub const AT_EXECFN: u64 = 31;
    pub const AT_SYSINFO_EHDR: u64 = 33;
    pub const AT_MINSIGSTKSZ: u64 = 51;
}

/// ELF constants.
pub mod elf {
    #![allow(missing_docs)]
    pub const MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];
    pub const CLASS64: u8 = 2;
    pub const DATA_LSB: u8 = 1;
    pub const ET_EXEC: u16 = 2;
    pub const ET_DYN: u16 = 3;
    pub const EM_X86_64: u16 = 62;
    pub const PT_LOAD: u32 = 1;
    pub const PT_INTERP: u32 = 3;
    pub const PT_PHDR: u32 = 6;
    pub const PT_GNU_STACK: u32 = 0x6474_e551;
    pub const PF_X: u32 = 1;
    pub const PF_W: u32 = 2;
    pub const PF_R: u32 = 4;
}

/// Signal numbers.
pub mod signal {
    #![allow(missing_docs)]
    pub const SIGHUP: i32 = 1;
    pub const SIGINT: i32 = 2;
    pub const SIGQUIT: i32 = 3;
    pub const SIGILL: i32 = 4;
    pub const SIGTRAP: i32 = 5;
    pub const SIGABRT: i32 = 6;
    pub const SIGBUS: i32 = 7;
    pub const SIGFPE: i32 = 8;
    pub const SIGKILL: i32 = 9;
    pub const SIGUSR1: i32 = 10;
    pub const SIGSEGV: i32 = 11;
    pub const SIGUSR2: i32 = 12;
    pub const SIGPIPE: i32 = 13;
    pub const SIGALRM: i32 = 14;
    pub const SIGTERM: i32 = 15;
    pub const SIGSTKFLT: i32 = 16;
    pub const SIGCHLD: i32 = 17;
    pub const SIGCONT: i32 = 18;
    pub const SIGSTOP: i32 = 19;
    pub const SIGTSTP: i32 = 20;
    pub const SIGTTIN: i32 = 21;
    pub const SIGTTOU: i32 = 22;
    pub const SIGURG: i32 = 23;
    pub const SIGXCPU: i32 = 24;
    pub const SIGXFSZ: i32 = 25;
    pub const SIGVTALRM: i32 = 26;
    pub const SIGPROF: i32 = 27;
    pub const SIGWINCH: i32 = 28;
    pub const SIGIO: i32 = 29;
    pub const SIGPWR: i32 = 30;
    pub const SIGSYS: i32 = 31;
    pub const SIGRTMIN: i32 = 32;
    pub const SIGRTMAX: i32 = 64;
    pub const SIG_DFL: u64 = 0;
    pub const SIG_IGN: u64 = 1;
    pub const SIG_BLOCK: u64 = 0;
    pub const SIG_UNBLOCK: u64 = 1;
    pub const SIG_SETMASK: u64 = 2;
    pub const SS_ONSTACK: i32 = 1;
    pub const SS_DISABLE: i32 = 2;
    pub const MINSIGSTKSZ: u64 = 2048;
    // `sigev_notify` values (sigevent(3type))
    pub const SIGEV_SIGNAL: i32 = 0;
    pub const SIGEV_NONE: i32 = 1;
    pub const SIGEV_THREAD: i32 = 2;
    /// `si_code` of a message queue notification
    pub const SI_MESGQ: i32 = -3;

    /// `SA_*` flags.
    pub mod sa {
        /// no SIGCHLD when children stop
        pub const NOCLDSTOP: u64 = 1;
        /// children do not become zombies
        pub const NOCLDWAIT: u64 = 2;
        /// three-argument handler
        pub const SIGINFO: u64 = 4;
        /// `sa_restorer` is valid
        pub const RESTORER: u64 = 0x0400_0000;
        /// run on the alternate stack
        pub const ONSTACK: u64 = 0x0800_0000;
        /// restart interrupted calls
        pub const RESTART: u64 = 0x1000_0000;
        /// do not block the signal in its handler
        pub const NODEFER: u64 = 0x4000_0000;
        /// reset to default after one delivery
        pub const RESETHAND: u64 = 0x8000_0000;
    }
}

/// Resource limit numbers (`RLIMIT_*`).
pub mod rlimit {
    #![allow(missing_docs)]
    pub const RLIMIT_CPU: u32 = 0;
    pub const RLIMIT_FSIZE: u32 = 1;
    pub const RLIMIT_DATA: u32 = 2;
    pub const RLIMIT_STACK: u32 = 3;
    pub const RLIMIT_CORE: u32 = 4;
    pub const RLIMIT_NOFILE: u32 = 7;
    pub const RLIMIT_AS: u32 = 9;
    pub const RLIMIT_MSGQUEUE: u32 = 12;
    pub const RLIM_NLIMITS: usize = 16;
    pub const RLIM_INFINITY: u64 = u64::MAX;
}

/// Terminal ioctls and termios flags (tty_ioctl(4), termios(3)).
pub mod tty {
    #![allow(missing_docs)]
    pub const TCGETS: u32 = 0x5401;
    pub const TCSETS: u32 = 0x5402;
    pub const TCSETSW: u32 = 0x5403;
    pub const TCSETSF: u32 = 0x5404;
    pub const TCSBRK: u32 = 0x5409;
    pub const TCXONC: u32 = 0x540a;
    pub const TCFLSH: u32 = 0x540b;
    pub const TIOCEXCL: u32 = 0x540c;
    pub const TIOCNXCL: u32 = 0x540d;
    pub const TIOCSCTTY: u32 = 0x540e;
    pub const TIOCGPGRP: u32 = 0x540f;
    pub const TIOCSPGRP: u32 = 0x5410;
    pub const TIOCOUTQ: u32 = 0x5411;
    pub const TIOCGWINSZ: u32 = 0x5413;
    pub const TIOCSWINSZ: u32 = 0x5414;
    pub const FIONREAD: u32 = 0x541b;
    pub const TIOCNOTTY: u32 = 0x5422;
    pub const TIOCSETD: u32 = 0x5423;
    pub const TIOCGETD: u32 = 0x5424;
    pub const TCSBRKP: u32 = 0x5425;
    pub const TIOCSBRK: u32 = 0x5427;
    pub const TIOCCBRK: u32 = 0x5428;
    pub const TIOCGSID: u32 = 0x5429;
    pub const TCGETS2: u32 = 0x802c_542a;
    pub const TCSETS2: u32 = 0x402c_542b;
    pub const TCSETSW2: u32 = 0x402c_542c;
    pub const TCSETSF2: u32 = 0x402c_542d;
    pub const TIOCGPTN: u32 = 0x8004_5430;
    pub const TIOCSPTLCK: u32 = 0x4004_5431;
    pub const TIOCGDEV: u32 = 0x8004_5432;
    pub const TIOCSIG: u32 = 0x4004_5436;
    pub const TIOCGPTLCK: u32 = 0x8004_5439;
    pub const TIOCGEXCL: u32 = 0x8004_5440;
    pub const TIOCGPTPEER: u32 = 0x5441;
    pub const TCGETA: u32 = 0x5405;
    pub const TCSETA: u32 = 0x5406;
    pub const TCSETAW: u32 = 0x5407;
    pub const TCSETAF: u32 = 0x5408;
    pub const TIOCSTI: u32 = 0x5412;
    pub const TIOCPKT: u32 = 0x5420;
    pub const TIOCGPKT: u32 = 0x8004_5438;
    pub const FIOASYNC: u32 = 0x5452;

    // c_iflag
    pub const ISTRIP: u32 = 0o40;
    pub const INLCR: u32 = 0o100;
    pub const IGNCR: u32 = 0o200;
    pub const ICRNL: u32 = 0o400;
    pub const IXON: u32 = 0o2000;
    pub const IXANY: u32 = 0o4000;
    pub const IUTF8: u32 = 0o40000;
    // c_oflag
    pub const OPOST: u32 = 0o1;
    pub const ONLCR: u32 = 0o4;
    pub const OCRNL: u32 = 0o10;
    pub const ONOCR: u32 = 0o20;
    pub const ONLRET: u32 = 0o40;
    pub const TABDLY: u32 = 0o14000;
    pub const XTABS: u32 = 0o14000;
    // c_cflag
    pub const B38400: u32 = 0o17;
    pub const CS8: u32 = 0o60;
    pub const CREAD: u32 = 0o200;
    pub const CSIZE: u32 = 0o60;
    pub const PARENB: u32 = 0o400;
    // c_lflag
    pub const ISIG: u32 = 0o1;
    pub const ICANON: u32 = 0o2;
    pub const ECHO: u32 = 0o10;
    pub const ECHOE: u32 = 0o20;
    pub const ECHOK: u32 = 0o40;
    pub const ECHONL: u32 = 0o100;
    pub const NOFLSH: u32 = 0o200;
    pub const TOSTOP: u32 = 0o400;
    pub const ECHOCTL: u32 = 0o1000;
    pub const ECHOKE: u32 = 0o4000;
    pub const IEXTEN: u32 = 0o100000;
    pub const EXTPROC: u32 = 0o200000;
    // c_cc indices
    pub const VINTR: usize = 0;
    pub const VQUIT: usize = 1;
    pub const VERASE: usize = 2;
    pub const VKILL: usize = 3;
    pub const VEOF: usize = 4;
    pub const VTIME: usize = 5;
    pub const VMIN: usize = 6;
    pub const VSTART: usize = 8;
    pub const VSTOP: usize = 9;
    pub const VSUSP: usize = 10;
    pub const VEOL: usize = 11;
    pub const VREPRINT: usize = 12;
    pub const VWERASE: usize = 14;
    pub const VLNEXT: usize = 15;
    pub const VEOL2: usize = 16;

    /// Major device number of pty slaves.
    pub const UNIX98_PTY_SLAVE_MAJOR: u64 = 136;

    // Packet mode's control bytes (ioctl_tty(2) `TIOCPKT`).
    /// data follows
    pub const TIOCPKT_DATA: u8 = 0;
    /// the slave's input queue was flushed
    pub const TIOCPKT_FLUSHREAD: u8 = 1;
    /// the slave's output queue was flushed
    pub const TIOCPKT_FLUSHWRITE: u8 = 2;
    /// output to the terminal was stopped
    pub const TIOCPKT_STOP: u8 = 4;
    /// output was restarted
    pub const TIOCPKT_START: u8 = 8;
    /// the stop and start characters are no longer `^S`/`^Q` with `IXON`
    pub const TIOCPKT_NOSTOP: u8 = 16;
    /// they are again
    pub const TIOCPKT_DOSTOP: u8 = 32;
    /// the termios changed under `EXTPROC`
    pub const TIOCPKT_IOCTL: u8 = 64;
}

/// `poll(2)` event bits.
pub mod poll {
    #![allow(missing_docs)]
    pub const POLLIN: i16 = 0x1;
    pub const POLLPRI: i16 = 0x2;
    pub const POLLOUT: i16 = 0x4;
    pub const POLLERR: i16 = 0x8;
    pub const POLLHUP: i16 = 0x10;
    pub const POLLNVAL: i16 = 0x20;
    pub const POLLRDNORM: i16 = 0x40;
    pub const POLLWRNORM: i16 = 0x100;
    pub const POLLRDHUP: i16 = 0x2000;
}

/// Kernel keys (`linux/keyctl.h`, keyutils' permission bits).
pub mod keys {
    /// Permission bits: each of possessor, user, group and other has
    /// view, read, write, search, link and set-attribute.
    pub mod perm {
        pub const VIEW: u32 = 0x01;
        pub const READ: u32 = 0x02;
        pub const WRITE: u32 = 0x04;
        pub const SEARCH: u32 = 0x08;
        pub const LINK: u32 = 0x10;
        pub const SETATTR: u32 = 0x20;
        pub const ALL: u32 = 0x3f;
        /// `KEY_POS_*` is `ALL << POS`, and so on.
        pub const POS: u32 = 24;
        pub const USR: u32 = 16;
    }

    /// Special keyring ids (`KEY_SPEC_*`).
    pub mod spec {
        pub const THREAD: i32 = -1;
        pub const PROCESS: i32 = -2;
        pub const SESSION: i32 = -3;
        pub const USER: i32 = -4;
        pub const USER_SESSION: i32 = -5;
        pub const GROUP: i32 = -6;
        pub const REQKEY_AUTH: i32 = -7;
        pub const REQUESTOR: i32 = -8;
    }

    /// `keyctl(2)` operations.
    pub mod keyctl {
        pub const KEYCTL_GET_KEYRING_ID: u64 = 0;
        pub const KEYCTL_JOIN_SESSION_KEYRING: u64 = 1;
        pub const KEYCTL_UPDATE: u64 = 2;
        pub const KEYCTL_REVOKE: u64 = 3;
        pub const KEYCTL_SETPERM: u64 = 5;
        pub const KEYCTL_DESCRIBE: u64 = 6;
        pub const KEYCTL_CLEAR: u64 = 7;
        pub const KEYCTL_LINK: u64 = 8;
        pub const KEYCTL_UNLINK: u64 = 9;
        pub const KEYCTL_SEARCH: u64 = 10;
        pub const KEYCTL_READ: u64 = 11;
        pub const KEYCTL_GET_SECURITY: u64 = 17;
        pub const KEYCTL_INVALIDATE: u64 = 21;
    }
}

/// `ptrace(2)`'s options and events.
pub mod ptrace {
    /// `PTRACE_O_*` options.
    pub mod opt {
        pub const TRACESYSGOOD: u32 = 1;
        pub const TRACEFORK: u32 = 1 << 1;
        pub const TRACEVFORK: u32 = 1 << 2;
        pub const TRACECLONE: u32 = 1 << 3;
        pub const TRACEEXEC: u32 = 1 << 4;
        pub const TRACEVFORKDONE: u32 = 1 << 5;
        pub const TRACEEXIT: u32 = 1 << 6;
        pub const TRACESECCOMP: u32 = 1 << 7;
        pub const EXITKILL: u32 = 1 << 20;
        pub const SUSPEND_SECCOMP: u32 = 1 << 21;
        /// every option Linux knows
        pub const ALL: u32 = 0xff | EXITKILL | SUSPEND_SECCOMP;
    }

    /// `PTRACE_EVENT_*`: the option bit of event `e` is `1 << e`.
    pub mod event {
        pub const FORK: u32 = 1;
        pub const VFORK: u32 = 2;
        pub const CLONE: u32 = 3;
        pub const EXEC: u32 = 4;
        pub const VFORK_DONE: u32 = 5;
        pub const EXIT: u32 = 6;
        pub const STOP: u32 = 128;
    }
}
