//! The system call table: one row per x86-64 system call, sorted by
//! number, saying how the Sentry answers it (handler, support level, and
//! what is missing where support is partial), and the dispatcher. Handlers
//! live in one file per family; [`args`] gives them typed arguments.

mod aio;
mod args;
mod cachestat;
pub mod checkpoint;
pub mod compat;
mod events;
mod fork;
mod fs;
mod host_inet;
mod inet;
mod ioprio;
mod kcmp;
mod keys;
mod landlock;
mod membarrier;
mod memfd;
mod mm;
mod mount;
mod mqueue;
mod netlink;
mod ns;
pub(crate) mod numa;
mod poll;
mod process;
mod ptrace;
mod seccomp;
mod signal;
mod socket;
mod splice;
mod sysv;
mod time;

use abi::{nr, Errno};

pub use args::{Args, SyscallArgs};
pub use fs::write_core;

use crate::kernel::task::Task;
use crate::vfs::{Location, PATH_MAX};

/// A system call handler: arguments in ABI order, result for `rax`.
pub type Handler = fn(&mut Task, &Args) -> Result<u64, Errno>;

/// How completely the Sentry implements a system call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// Linux semantics
    Full,
    /// the common cases; the row's note says what is missing
    Partial,
    /// answered `ENOSYS`
    Unsupported,
}

impl Support {
    /// The level as the generated table writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Support::Full => "full",
            Support::Partial => "partial",
            Support::Unsupported => "unsupported",
        }
    }
}

/// One row of the table.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// number
    pub nr: u64,
    /// kernel name
    pub name: &'static str,
    /// handler, `None` when unsupported
    pub handler: Option<Handler>,
    /// support level
    pub support: Support,
    /// what is missing (partial), or what the call is about (unsupported)
    pub note: &'static str,
}

const fn row(nr: u64, handler: Option<Handler>, support: Support, note: &'static str) -> Entry {
    let Some(name) = abi::syscall_name(nr) else {
        panic!("a row of the table is not an x86-64 system call");
    };
    Entry {
        nr,
        name,
        handler,
        support,
        note,
    }
}

/// A call with Linux's semantics.
const fn full(nr: u64, handler: Handler) -> Entry {
    row(nr, Some(handler), Support::Full, "")
}

/// A call whose common cases work; `missing` says what does not.
const fn partial(nr: u64, handler: Handler, missing: &'static str) -> Entry {
    row(nr, Some(handler), Support::Partial, missing)
}

/// A call answered `ENOSYS`; `what` names what it is for.
const fn unsupported(nr: u64, what: &'static str) -> Entry {
    row(nr, None, Support::Unsupported, what)
}

/// Every x86-64 system call, once, sorted by number.
pub const ROWS: &[Entry] = &[
    full(nr::READ, fs::sys_read),
    full(nr::WRITE, fs::sys_write),
    full(nr::OPEN, fs::sys_open),
    full(nr::CLOSE, fs::sys_close),
    full(nr::STAT, fs::sys_stat),
    full(nr::FSTAT, fs::sys_fstat),
    full(nr::LSTAT, fs::sys_lstat),
    partial(
        nr::POLL,
        poll::sys_poll,
        "nfds up to max(RLIMIT_NOFILE, 1024); the caller's stdio is re-checked every 20 ms",
    ),
    full(nr::LSEEK, fs::sys_lseek),
    partial(
        nr::MMAP,
        mm::sys_mmap,
        "no MAP_GROWSDOWN growth or huge pages; shared volume mappings miss host changes",
    ),
    full(nr::MPROTECT, mm::sys_mprotect),
    full(nr::MUNMAP, mm::sys_munmap),
    full(nr::BRK, mm::sys_brk),
    partial(
        nr::RT_SIGACTION,
        signal::sys_rt_sigaction,
        "unknown sa_flags bits are kept (Linux clears them)",
    ),
    full(nr::RT_SIGPROCMASK, signal::sys_rt_sigprocmask),
    full(nr::RT_SIGRETURN, signal::sys_rt_sigreturn),
    partial(
        nr::IOCTL,
        fs::sys_ioctl,
        "terminal, FIO* and netdevice(7) requests only; others ENOTTY",
    ),
    full(nr::PREAD64, fs::sys_pread64),
    full(nr::PWRITE64, fs::sys_pwrite64),
    full(nr::READV, fs::sys_readv),
    full(nr::WRITEV, fs::sys_writev),
    full(nr::ACCESS, fs::sys_access),
    full(nr::PIPE, fs::sys_pipe),
    partial(
        nr::SELECT,
        poll::sys_select,
        "nfds above max(RLIMIT_NOFILE, 1024) EINVAL (Linux caps it); no time left after a signal",
    ),
    full(nr::SCHED_YIELD, process::sys_sched_yield),
    partial(nr::MREMAP, mm::sys_mremap, "no MREMAP_DONTUNMAP"),
    full(nr::MSYNC, mm::sys_msync),
    full(nr::MINCORE, mm::sys_mincore),
    partial(
        nr::MADVISE,
        mm::sys_madvise,
        "only DONTNEED and FREE act; DONTFORK, WIPEONFORK, REMOVE and others are ignored",
    ),
    full(nr::SHMGET, sysv::sys_shmget),
    full(nr::SHMAT, sysv::sys_shmat),
    partial(
        nr::SHMCTL,
        sysv::sys_shmctl,
        "SHM_LOCK only marks the segment (RLIMIT_MEMLOCK not checked)",
    ),
    full(nr::DUP, fs::sys_dup),
    full(nr::DUP2, fs::sys_dup2),
    full(nr::PAUSE, signal::sys_pause),
    full(nr::NANOSLEEP, time::sys_nanosleep),
    partial(
        nr::GETITIMER,
        events::sys_getitimer,
        "ITIMER_VIRTUAL and ITIMER_PROF count wall time",
    ),
    full(nr::ALARM, events::sys_alarm),
    partial(
        nr::SETITIMER,
        events::sys_setitimer,
        "ITIMER_VIRTUAL and ITIMER_PROF count wall time",
    ),
    full(nr::GETPID, process::sys_getpid),
    full(nr::SENDFILE, splice::sys_sendfile),
    partial(
        nr::SOCKET,
        socket::sys_socket,
        "AF_UNIX, AF_INET/AF_INET6 TCP and UDP, AF_NETLINK route; raw and packet sockets EPERM",
    ),
    partial(
        nr::CONNECT,
        socket::sys_connect,
        "Unix: the host's sockets on volumes are not reachable (ECONNREFUSED)",
    ),
    full(nr::ACCEPT, socket::sys_accept),
    partial(
        nr::SENDTO,
        socket::sys_sendto,
        "UDP relayed outside the sandbox leaves with the host's TTL and TOS",
    ),
    partial(
        nr::RECVFROM,
        socket::sys_recvfrom,
        "MSG_ERRQUEUE holds only loopback port-unreachable errors",
    ),
    partial(
        nr::SENDMSG,
        socket::sys_sendmsg,
        "UDP relayed outside the sandbox leaves with the host's TTL and TOS",
    ),
    partial(
        nr::RECVMSG,
        socket::sys_recvmsg,
        "MSG_ERRQUEUE: only loopback port-unreachable errors, without timestamp or IP_PKTINFO",
    ),
    partial(
        nr::SHUTDOWN,
        socket::sys_shutdown,
        "a no-op on netlink sockets (Linux: EOPNOTSUPP)",
    ),
    partial(
        nr::BIND,
        socket::sys_bind,
        "a Unix socket's file only on the sandbox's tmpfs (EROFS on volumes)",
    ),
    full(nr::LISTEN, socket::sys_listen),
    full(nr::GETSOCKNAME, socket::sys_getsockname),
    full(nr::GETPEERNAME, socket::sys_getpeername),
    full(nr::SOCKETPAIR, socket::sys_socketpair),
    partial(
        nr::SETSOCKOPT,
        socket::sys_setsockopt,
        "unknown IP/IPv6 options (IPV6_MULTICAST_HOPS, IP_RECVORIGDSTADDR) accepted, no effect",
    ),
    partial(
        nr::GETSOCKOPT,
        socket::sys_getsockopt,
        "IP/IPv6 options not kept (IPV6_MULTICAST_HOPS, IPV6_2292PKTOPTIONS) are ENOPROTOOPT",
    ),
    partial(
        nr::CLONE,
        fork::sys_clone,
        "no new namespaces (EPERM without CAP_SYS_ADMIN, then EINVAL); CLONE_PTRACE and CLONE_SYSVSEM ignored",
    ),
    full(nr::FORK, fork::sys_fork),
    full(nr::VFORK, fork::sys_vfork),
    partial(
        nr::EXECVE,
        process::sys_execve,
        "file capabilities (security.capability) not honoured",
    ),
    partial(
        nr::EXIT,
        process::sys_exit,
        "a process whose threads all exit reports the last thread's status, not the leader's",
    ),
    partial(
        nr::WAIT4,
        fork::sys_wait4,
        "__WALL, __WCLONE, __WNOTHREAD ignored: clone children are waited for like others",
    ),
    partial(
        nr::KILL,
        signal::sys_kill,
        "a non-leader thread's ID is ESRCH (Linux signals its process)",
    ),
    full(nr::UNAME, process::sys_uname),
    full(nr::SEMGET, sysv::sys_semget),
    full(nr::SEMOP, sysv::sys_semop),
    full(nr::SEMCTL, sysv::sys_semctl),
    full(nr::SHMDT, sysv::sys_shmdt),
    full(nr::MSGGET, sysv::sys_msgget),
    full(nr::MSGSND, sysv::sys_msgsnd),
    partial(nr::MSGRCV, sysv::sys_msgrcv, "no MSG_COPY (ENOSYS)"),
    full(nr::MSGCTL, sysv::sys_msgctl),
    partial(
        nr::FCNTL,
        fs::sys_fcntl,
        "no leases, F_NOTIFY or read/write hints (EINVAL); locks are not seen by the host",
    ),
    partial(
        nr::FLOCK,
        fs::sys_flock,
        "locks are the sandbox's own: the host's processes do not see them",
    ),
    full(nr::FSYNC, fs::sys_fsync),
    full(nr::FDATASYNC, fs::sys_fsync),
    full(nr::TRUNCATE, fs::sys_truncate),
    full(nr::FTRUNCATE, fs::sys_ftruncate),
    full(nr::GETDENTS, fs::sys_getdents),
    full(nr::GETCWD, fs::sys_getcwd),
    full(nr::CHDIR, fs::sys_chdir),
    full(nr::FCHDIR, fs::sys_fchdir),
    full(nr::RENAME, fs::sys_rename),
    full(nr::MKDIR, fs::sys_mkdir),
    full(nr::RMDIR, fs::sys_rmdir),
    full(nr::CREAT, fs::sys_creat),
    full(nr::LINK, fs::sys_link),
    full(nr::UNLINK, fs::sys_unlink),
    full(nr::SYMLINK, fs::sys_symlink),
    full(nr::READLINK, fs::sys_readlink),
    full(nr::CHMOD, fs::sys_chmod),
    full(nr::FCHMOD, fs::sys_fchmod),
    full(nr::CHOWN, fs::sys_chown),
    full(nr::FCHOWN, fs::sys_fchown),
    full(nr::LCHOWN, fs::sys_lchown),
    full(nr::UMASK, fs::sys_umask),
    full(nr::GETTIMEOFDAY, time::sys_gettimeofday),
    full(nr::GETRLIMIT, process::sys_getrlimit),
    partial(
        nr::GETRUSAGE,
        process::sys_getrusage,
        "CPU times and an estimated ru_maxrss only; RUSAGE_THREAD gives the process's",
    ),
    full(nr::SYSINFO, process::sys_sysinfo),
    full(nr::TIMES, process::sys_times),
    partial(
        nr::PTRACE,
        ptrace::sys_ptrace,
        "no hardware breakpoints or watchpoints (debug registers stay clear); a seized tracee's group-stop ends with any restart",
    ),
    full(nr::GETUID, process::sys_getuid),
    unsupported(nr::SYSLOG, "the kernel log"),
    full(nr::GETGID, process::sys_getgid),
    full(nr::SETUID, process::sys_setuid),
    full(nr::SETGID, process::sys_setgid),
    full(nr::GETEUID, process::sys_geteuid),
    full(nr::GETEGID, process::sys_getegid),
    full(nr::SETPGID, process::sys_setpgid),
    full(nr::GETPPID, process::sys_getppid),
    full(nr::GETPGRP, process::sys_getpgrp),
    full(nr::SETSID, process::sys_setsid),
    full(nr::SETREUID, process::sys_setreuid),
    full(nr::SETREGID, process::sys_setregid),
    full(nr::GETGROUPS, process::sys_getgroups),
    full(nr::SETGROUPS, process::sys_setgroups),
    full(nr::SETRESUID, process::sys_setresuid),
    full(nr::GETRESUID, process::sys_getresuid),
    full(nr::SETRESGID, process::sys_setresgid),
    full(nr::GETRESGID, process::sys_getresgid),
    full(nr::GETPGID, process::sys_getpgid),
    full(nr::SETFSUID, process::sys_setfsuid),
    full(nr::SETFSGID, process::sys_setfsgid),
    full(nr::GETSID, process::sys_getsid),
    full(nr::CAPGET, process::sys_capget),
    full(nr::CAPSET, process::sys_capset),
    partial(
        nr::RT_SIGPENDING,
        signal::sys_rt_sigpending,
        "writes 8 bytes whatever sigsetsize",
    ),
    full(nr::RT_SIGTIMEDWAIT, signal::sys_rt_sigtimedwait),
    partial(
        nr::RT_SIGQUEUEINFO,
        signal::sys_rt_sigqueueinfo,
        "a non-leader thread's ID is ESRCH (Linux signals its process)",
    ),
    full(nr::RT_SIGSUSPEND, signal::sys_rt_sigsuspend),
    full(nr::SIGALTSTACK, signal::sys_sigaltstack),
    full(nr::UTIME, fs::sys_utime),
    full(nr::MKNOD, fs::sys_mknod),
    unsupported(nr::USELIB, "obsolete"),
    partial(nr::PERSONALITY, process::sys_personality, "every persona runs as PER_LINUX; of its flags only ADDR_NO_RANDOMIZE acts"),
    partial(nr::USTAT, fs::sys_ustat, "the devices of the sandbox's standard mounts and volumes"),
    full(nr::STATFS, fs::sys_statfs),
    full(nr::FSTATFS, fs::sys_fstatfs),
    full(nr::SYSFS, fs::sys_sysfs),
    partial(
        nr::GETPRIORITY,
        process::sys_getpriority,
        "per thread, shown in /proc; the host scheduler is not asked",
    ),
    partial(
        nr::SETPRIORITY,
        process::sys_setpriority,
        "per thread, shown in /proc; the host scheduler is not asked",
    ),
    partial(nr::SCHED_SETPARAM, process::sys_sched_setparam, "the caller only; priority 0 of SCHED_OTHER"),
    partial(
        nr::SCHED_GETPARAM,
        process::sys_sched_getparam,
        "the caller only; priority always 0",
    ),
    partial(nr::SCHED_SETSCHEDULER, process::sys_sched_setscheduler, "SCHED_OTHER, BATCH and IDLE kept per thread; real-time and deadline policies EPERM"),
    full(nr::SCHED_GETSCHEDULER, process::sys_sched_getscheduler),
    full(
        nr::SCHED_GET_PRIORITY_MAX,
        process::sys_sched_get_priority_max,
    ),
    full(
        nr::SCHED_GET_PRIORITY_MIN,
        process::sys_sched_get_priority_min,
    ),
    partial(nr::SCHED_RR_GET_INTERVAL, process::sys_sched_rr_get_interval, "the caller only; 4 ms"),
    partial(
        nr::MLOCK,
        mm::sys_mlock,
        "nothing is locked; RLIMIT_MEMLOCK is not counted",
    ),
    partial(
        nr::MUNLOCK,
        mm::sys_mlock,
        "nothing is locked; RLIMIT_MEMLOCK is not counted",
    ),
    partial(nr::MLOCKALL, mm::sys_mlockall, "nothing is locked; RLIMIT_MEMLOCK is not counted"),
    full(nr::MUNLOCKALL, mm::sys_munlockall),
    partial(
        nr::VHANGUP,
        process::sys_vhangup,
        "ptys: the slave's open descriptions hang up; a --tty run's host terminal is not touched",
    ),
    unsupported(nr::MODIFY_LDT, "LDT"),
    partial(
        nr::PIVOT_ROOT,
        mount::sys_pivot_root,
        "the root stays where it is: EPERM",
    ),
    unsupported(nr::_SYSCTL, "removed from Linux"),
    partial(
        nr::PRCTL,
        process::sys_prctl,
        "name, pdeathsig, dumpable, caps, securebits, no_new_privs, seccomp, subreaper; others EINVAL",
    ),
    partial(
        nr::ARCH_PRCTL,
        process::sys_arch_prctl,
        "FS/GS bases and CPUID only; no ARCH_MAP_VDSO_*, XCOMP or shadow-stack options (EINVAL)",
    ),
    unsupported(nr::ADJTIMEX, "the clock is the host's"),
    full(nr::SETRLIMIT, process::sys_setrlimit),
    full(nr::CHROOT, mount::sys_chroot),
    full(nr::SYNC, process::sys_sync),
    unsupported(nr::ACCT, "process accounting"),
    unsupported(nr::SETTIMEOFDAY, "the clock is the host's"),
    partial(
        nr::MOUNT,
        mount::sys_mount,
        "tmpfs (size=, mode=; nosuid, nodev and noexec per mount, held at execve, access, mmap and mprotect), binds of the sandbox's own tree, read-only remounts and propagation types; move mounts and other file systems EPERM",
    ),
    partial(
        nr::UMOUNT2,
        mount::sys_umount2,
        "what the guest mounted (busy only with a later mount below it, not with open files); the sandbox's own mounts EBUSY",
    ),
    unsupported(nr::SWAPON, "swap"),
    unsupported(nr::SWAPOFF, "swap"),
    unsupported(nr::REBOOT, "reboot"),
    full(nr::SETHOSTNAME, process::sys_sethostname),
    full(nr::SETDOMAINNAME, process::sys_setdomainname),
    unsupported(nr::IOPL, "I/O ports"),
    unsupported(nr::IOPERM, "I/O ports"),
    unsupported(nr::CREATE_MODULE, "kernel modules"),
    unsupported(nr::INIT_MODULE, "kernel modules"),
    unsupported(nr::DELETE_MODULE, "kernel modules"),
    unsupported(nr::GET_KERNEL_SYMS, "kernel modules"),
    unsupported(nr::QUERY_MODULE, "kernel modules"),
    unsupported(nr::QUOTACTL, "disk quotas"),
    unsupported(nr::NFSSERVCTL, "removed from Linux"),
    unsupported(nr::GETPMSG, "not implemented by Linux"),
    unsupported(nr::PUTPMSG, "not implemented by Linux"),
    unsupported(nr::AFS_SYSCALL, "not implemented by Linux"),
    unsupported(nr::TUXCALL, "not implemented by Linux"),
    unsupported(nr::SECURITY, "not implemented by Linux"),
    full(nr::GETTID, process::sys_gettid),
    partial(
        nr::READAHEAD,
        fs::sys_readahead,
        "checked as Linux checks it; reads nothing ahead (the page cache is the host's)",
    ),
    full(nr::SETXATTR, fs::sys_setxattr),
    full(nr::LSETXATTR, fs::sys_lsetxattr),
    full(nr::FSETXATTR, fs::sys_fsetxattr),
    full(nr::GETXATTR, fs::sys_getxattr),
    full(nr::LGETXATTR, fs::sys_lgetxattr),
    full(nr::FGETXATTR, fs::sys_fgetxattr),
    full(nr::LISTXATTR, fs::sys_listxattr),
    full(nr::LLISTXATTR, fs::sys_llistxattr),
    full(nr::FLISTXATTR, fs::sys_flistxattr),
    full(nr::REMOVEXATTR, fs::sys_removexattr),
    full(nr::LREMOVEXATTR, fs::sys_lremovexattr),
    full(nr::FREMOVEXATTR, fs::sys_fremovexattr),
    full(nr::TKILL, signal::sys_tkill),
    full(nr::TIME, time::sys_time),
    partial(
        nr::FUTEX,
        process::sys_futex,
        "no FUTEX_WAIT_REQUEUE_PI or FUTEX_CMP_REQUEUE_PI (ENOSYS)",
    ),
    partial(
        nr::SCHED_SETAFFINITY,
        process::sys_sched_setaffinity,
        "the caller only, the first 64 CPUs; kept and reported, not enforced",
    ),
    partial(
        nr::SCHED_GETAFFINITY,
        process::sys_sched_getaffinity,
        "the caller only",
    ),
    unsupported(nr::SET_THREAD_AREA, "32-bit TLS (arch_prctl works)"),
    full(nr::IO_SETUP, aio::sys_io_setup),
    full(nr::IO_DESTROY, aio::sys_io_destroy),
    full(nr::IO_GETEVENTS, aio::sys_io_getevents),
    partial(
        nr::IO_SUBMIT,
        aio::sys_io_submit,
        "each request runs as it is submitted; IOCB_CMD_POLL is EINVAL",
    ),
    partial(
        nr::IO_CANCEL,
        aio::sys_io_cancel,
        "nothing is ever in flight to cancel: EINVAL",
    ),
    unsupported(nr::GET_THREAD_AREA, "32-bit TLS (arch_prctl works)"),
    unsupported(nr::LOOKUP_DCOOKIE, "removed from Linux"),
    full(nr::EPOLL_CREATE, events::sys_epoll_create),
    unsupported(nr::EPOLL_CTL_OLD, "not implemented by Linux"),
    unsupported(nr::EPOLL_WAIT_OLD, "not implemented by Linux"),
    partial(
        nr::REMAP_FILE_PAGES,
        mm::sys_remap_file_pages,
        "as Linux emulates it (a new mapping of the range); not for shared anonymous memory",
    ),
    full(nr::GETDENTS64, fs::sys_getdents64),
    full(nr::SET_TID_ADDRESS, process::sys_set_tid_address),
    full(nr::RESTART_SYSCALL, fs::sys_restart_syscall),
    full(nr::SEMTIMEDOP, sysv::sys_semtimedop),
    full(nr::FADVISE64, fs::sys_fadvise64),
    partial(
        nr::TIMER_CREATE,
        events::sys_timer_create,
        "SIGEV_THREAD_ID signals the process; CPU-time clocks count wall time",
    ),
    full(nr::TIMER_SETTIME, events::sys_timer_settime),
    full(nr::TIMER_GETTIME, events::sys_timer_gettime),
    full(nr::TIMER_GETOVERRUN, events::sys_timer_getoverrun),
    full(nr::TIMER_DELETE, events::sys_timer_delete),
    partial(
        nr::CLOCK_SETTIME,
        time::sys_clock_settime,
        "the clocks are the host's: EPERM",
    ),
    full(nr::CLOCK_GETTIME, time::sys_clock_gettime),
    full(nr::CLOCK_GETRES, time::sys_clock_getres),
    full(nr::CLOCK_NANOSLEEP, time::sys_clock_nanosleep),
    full(nr::EXIT_GROUP, process::sys_exit_group),
    full(nr::EPOLL_WAIT, events::sys_epoll_wait),
    full(nr::EPOLL_CTL, events::sys_epoll_ctl),
    full(nr::TGKILL, signal::sys_tgkill),
    full(nr::UTIMES, fs::sys_utimes),
    unsupported(nr::VSERVER, "not implemented by Linux"),
    full(nr::MBIND, numa::sys_mbind),
    full(nr::SET_MEMPOLICY, numa::sys_set_mempolicy),
    full(nr::GET_MEMPOLICY, numa::sys_get_mempolicy),
    full(nr::MQ_OPEN, mqueue::sys_mq_open),
    full(nr::MQ_UNLINK, mqueue::sys_mq_unlink),
    full(nr::MQ_TIMEDSEND, mqueue::sys_mq_timedsend),
    full(nr::MQ_TIMEDRECEIVE, mqueue::sys_mq_timedreceive),
    full(nr::MQ_NOTIFY, mqueue::sys_mq_notify),
    full(nr::MQ_GETSETATTR, mqueue::sys_mq_getsetattr),
    unsupported(nr::KEXEC_LOAD, "kexec"),
    partial(
        nr::WAITID,
        fork::sys_waitid,
        "__WALL, __WCLONE, __WNOTHREAD ignored: clone children are waited for like others",
    ),
    partial(
        nr::ADD_KEY,
        keys::sys_add_key,
        "user, logon and keyring keys; a sandbox-wide bound on keys and bytes instead of per-user quotas",
    ),
    partial(
        nr::REQUEST_KEY,
        keys::sys_request_key,
        "finds what the caller's keyrings hold; no upcall (ENOKEY)",
    ),
    partial(
        nr::KEYCTL,
        keys::sys_keyctl,
        "GET_KEYRING_ID, JOIN_SESSION_KEYRING, UPDATE, REVOKE, SETPERM, DESCRIBE, CLEAR, LINK, UNLINK, SEARCH, READ, GET_SECURITY, INVALIDATE; others EOPNOTSUPP",
    ),
    partial(
        nr::IOPRIO_SET,
        ioprio::sys_ioprio_set,
        "kept and inherited, not applied: the host does the I/O",
    ),
    partial(
        nr::IOPRIO_GET,
        ioprio::sys_ioprio_get,
        "IOPRIO_WHO_USER sees the sandbox's threads only",
    ),
    full(nr::INOTIFY_INIT, fs::sys_inotify_init),
    full(nr::INOTIFY_ADD_WATCH, fs::sys_inotify_add_watch),
    full(nr::INOTIFY_RM_WATCH, fs::sys_inotify_rm_watch),
    full(nr::MIGRATE_PAGES, numa::sys_migrate_pages),
    full(nr::OPENAT, fs::sys_openat),
    full(nr::MKDIRAT, fs::sys_mkdirat),
    full(nr::MKNODAT, fs::sys_mknodat),
    full(nr::FCHOWNAT, fs::sys_fchownat),
    full(nr::FUTIMESAT, fs::sys_futimesat),
    full(nr::NEWFSTATAT, fs::sys_newfstatat),
    full(nr::UNLINKAT, fs::sys_unlinkat),
    full(nr::RENAMEAT, fs::sys_renameat),
    full(nr::LINKAT, fs::sys_linkat),
    full(nr::SYMLINKAT, fs::sys_symlinkat),
    full(nr::READLINKAT, fs::sys_readlinkat),
    full(nr::FCHMODAT, fs::sys_fchmodat),
    full(nr::FACCESSAT, fs::sys_faccessat),
    partial(
        nr::PSELECT6,
        poll::sys_pselect6,
        "nfds above max(RLIMIT_NOFILE, 1024) is EINVAL (Linux caps it)",
    ),
    partial(
        nr::PPOLL,
        poll::sys_ppoll,
        "the time left is not written back; the caller's stdio is re-checked every 20 ms",
    ),
    partial(
        nr::UNSHARE,
        fork::sys_unshare,
        "CLONE_FILES and CLONE_FS; CLONE_SYSVSEM keeps the undo list; no new namespaces (EPERM without CAP_SYS_ADMIN, then EINVAL, as a kernel built without them)",
    ),
    full(nr::SET_ROBUST_LIST, process::sys_set_robust_list),
    partial(
        nr::GET_ROBUST_LIST,
        process::sys_get_robust_list,
        "the caller only",
    ),
    full(nr::SPLICE, splice::sys_splice),
    full(nr::TEE, splice::sys_tee),
    partial(
        nr::SYNC_FILE_RANGE,
        fs::sys_sync_file_range,
        "checked as Linux checks it; writes back nothing itself (no promise of durability, as on Linux)",
    ),
    full(nr::VMSPLICE, splice::sys_vmsplice),
    full(nr::MOVE_PAGES, numa::sys_move_pages),
    full(nr::UTIMENSAT, fs::sys_utimensat),
    full(nr::EPOLL_PWAIT, events::sys_epoll_pwait),
    full(nr::SIGNALFD, events::sys_signalfd),
    full(nr::TIMERFD_CREATE, events::sys_timerfd_create),
    full(nr::EVENTFD, events::sys_eventfd),
    full(nr::FALLOCATE, fs::sys_fallocate),
    partial(
        nr::TIMERFD_SETTIME,
        events::sys_timerfd_settime,
        "TFD_TIMER_CANCEL_ON_SET never cancels",
    ),
    full(nr::TIMERFD_GETTIME, events::sys_timerfd_gettime),
    full(nr::ACCEPT4, socket::sys_accept4),
    full(nr::SIGNALFD4, events::sys_signalfd4),
    full(nr::EVENTFD2, events::sys_eventfd2),
    full(nr::EPOLL_CREATE1, events::sys_epoll_create1),
    full(nr::DUP3, fs::sys_dup3),
    full(nr::PIPE2, fs::sys_pipe2),
    full(nr::INOTIFY_INIT1, fs::sys_inotify_init1),
    full(nr::PREADV, fs::sys_preadv),
    full(nr::PWRITEV, fs::sys_pwritev),
    partial(
        nr::RT_TGSIGQUEUEINFO,
        signal::sys_rt_tgsigqueueinfo,
        "any si_code to the caller's process's threads (Linux: to the caller's thread only)",
    ),
    unsupported(nr::PERF_EVENT_OPEN, "perf events"),
    partial(
        nr::RECVMMSG,
        socket::sys_recvmmsg,
        "MSG_ERRQUEUE: only loopback port-unreachable errors, without timestamp or IP_PKTINFO",
    ),
    partial(
        nr::FANOTIFY_INIT,
        fs::sys_fanotify_init,
        "refused with EPERM, as in a container without CAP_SYS_ADMIN (inotify works)",
    ),
    partial(
        nr::FANOTIFY_MARK,
        fs::sys_fanotify_mark,
        "refused with EPERM, as in a container without CAP_SYS_ADMIN (inotify works)",
    ),
    full(nr::PRLIMIT64, process::sys_prlimit64),
    partial(
        nr::NAME_TO_HANDLE_AT,
        mount::sys_name_to_handle_at,
        "no file system exports handles: EOPNOTSUPP",
    ),
    partial(
        nr::OPEN_BY_HANDLE_AT,
        mount::sys_open_by_handle_at,
        "file handles are refused: EPERM",
    ),
    unsupported(nr::CLOCK_ADJTIME, "the clock is the host's"),
    full(nr::SYNCFS, fs::sys_fsync),
    partial(
        nr::SENDMMSG,
        socket::sys_sendmmsg,
        "UDP relayed outside the sandbox leaves with the host's TTL and TOS",
    ),
    partial(
        nr::SETNS,
        ns::sys_setns,
        "the sandbox's own namespaces (one of each kind), which the caller is in already; no pidfds",
    ),
    full(nr::GETCPU, process::sys_getcpu),
    full(nr::PROCESS_VM_READV, ptrace::sys_process_vm_readv),
    full(nr::PROCESS_VM_WRITEV, ptrace::sys_process_vm_writev),
    partial(
        nr::KCMP,
        kcmp::sys_kcmp,
        "tables, fs and address space compared per process, not per thread; CLONE_IO not shared",
    ),
    unsupported(nr::FINIT_MODULE, "kernel modules"),
    partial(nr::SCHED_SETATTR, process::sys_sched_setattr, "as sched_setscheduler, with the nice value; no utilisation clamps"),
    partial(nr::SCHED_GETATTR, process::sys_sched_getattr, "no utilisation clamps"),
    full(nr::RENAMEAT2, fs::sys_renameat2),
    partial(
        nr::SECCOMP,
        seccomp::sys_seccomp,
        "strict mode keeps rdtsc; TRACE answers ENOSYS (no tracers)",
    ),
    full(nr::GETRANDOM, process::sys_getrandom),
    full(nr::MEMFD_CREATE, memfd::sys_memfd_create),
    unsupported(nr::KEXEC_FILE_LOAD, "kexec"),
    unsupported(nr::BPF, "BPF"),
    partial(
        nr::EXECVEAT,
        process::sys_execveat,
        "file capabilities not honoured; AT_SYMLINK_NOFOLLOW ignored",
    ),
    unsupported(nr::USERFAULTFD, "userfaultfd"),
    partial(
        nr::MEMBARRIER,
        membarrier::sys_membarrier,
        "no SYNC_CORE or RSEQ commands; GLOBAL_EXPEDITED reaches every process",
    ),
    partial(nr::MLOCK2, mm::sys_mlock2, "nothing is locked; RLIMIT_MEMLOCK is not counted"),
    full(nr::COPY_FILE_RANGE, splice::sys_copy_file_range),
    partial(
        nr::PREADV2,
        fs::sys_preadv2,
        "RWF_NOWAIT and RWF_DONTCACHE judged per kind of file (tmpfs as shmem, host files as ext4)",
    ),
    partial(
        nr::PWRITEV2,
        fs::sys_pwritev2,
        "as preadv2; RWF_NOAPPEND cannot undo a host file's O_APPEND",
    ),
    unsupported(nr::PKEY_MPROTECT, "memory protection keys"),
    unsupported(nr::PKEY_ALLOC, "memory protection keys"),
    unsupported(nr::PKEY_FREE, "memory protection keys"),
    full(nr::STATX, fs::sys_statx),
    full(nr::IO_PGETEVENTS, aio::sys_io_pgetevents),
    unsupported(
        nr::RSEQ,
        "restartable sequences: the Sentry cannot see the host preempt a thread to abort its critical section; glibc and tcmalloc run without",
    ),
    full(nr::PIDFD_SEND_SIGNAL, signal::sys_pidfd_send_signal),
    unsupported(nr::IO_URING_SETUP, "io_uring"),
    unsupported(nr::IO_URING_ENTER, "io_uring"),
    unsupported(nr::IO_URING_REGISTER, "io_uring"),
    partial(
        nr::OPEN_TREE,
        mount::sys_open_tree,
        "OPEN_TREE_CLONE is EPERM",
    ),
    partial(
        nr::MOVE_MOUNT,
        mount::sys_move_mount,
        "the new mount API is not offered (mount(2) is): EPERM",
    ),
    partial(
        nr::FSOPEN,
        mount::sys_fsopen,
        "the new mount API is not offered (mount(2) is): EPERM",
    ),
    partial(
        nr::FSCONFIG,
        mount::sys_fsconfig,
        "no file system context can exist: EINVAL",
    ),
    partial(
        nr::FSMOUNT,
        mount::sys_fsmount,
        "the new mount API is not offered (mount(2) is): EPERM",
    ),
    partial(
        nr::FSPICK,
        mount::sys_fspick,
        "the new mount API is not offered (mount(2) is): EPERM",
    ),
    partial(nr::PIDFD_OPEN, fork::sys_pidfd_open, "no PIDFD_THREAD"),
    partial(
        nr::CLONE3,
        fork::sys_clone3,
        "no new namespaces (EPERM without CAP_SYS_ADMIN, then EINVAL); no set_tid; CLONE_CLEAR_SIGHAND and CLONE_INTO_CGROUP ignored",
    ),
    full(nr::CLOSE_RANGE, fs::sys_close_range),
    full(nr::OPENAT2, fs::sys_openat2),
    full(nr::PIDFD_GETFD, fork::sys_pidfd_getfd),
    full(nr::FACCESSAT2, fs::sys_faccessat2),
    full(nr::PROCESS_MADVISE, mm::sys_process_madvise),
    full(nr::EPOLL_PWAIT2, events::sys_epoll_pwait2),
    partial(
        nr::MOUNT_SETATTR,
        mount::sys_mount_setattr,
        "the new mount API is not offered (mount(2) is): EPERM",
    ),
    unsupported(nr::QUOTACTL_FD, "disk quotas"),
    partial(
        nr::LANDLOCK_CREATE_RULESET,
        landlock::sys_landlock_create_ruleset,
        "ABI 7: file rights, device ioctls, TCP port rules, signal and abstract-socket scopes; the audit flags change nothing (no audit log); no errata claimed",
    ),
    partial(
        nr::LANDLOCK_ADD_RULE,
        landlock::sys_landlock_add_rule,
        "a rule holds at its file's place: not through other bind mounts, and not after the file moves",
    ),
    full(nr::LANDLOCK_RESTRICT_SELF, landlock::sys_landlock_restrict_self),
    unsupported(nr::MEMFD_SECRET, "secret memory"),
    full(nr::PROCESS_MRELEASE, mm::sys_process_mrelease),
    full(nr::FUTEX_WAITV, process::sys_futex_waitv),
    full(nr::SET_MEMPOLICY_HOME_NODE, numa::sys_set_mempolicy_home_node),
    partial(
        nr::CACHESTAT,
        cachestat::sys_cachestat,
        "host files read as wholly cached and clean",
    ),
    full(nr::FCHMODAT2, fs::sys_fchmodat2),
    unsupported(nr::MAP_SHADOW_STACK, "shadow stacks"),
    full(nr::FUTEX_WAKE, process::sys_futex_wake),
    full(nr::FUTEX_WAIT, process::sys_futex_wait),
    full(nr::FUTEX_REQUEUE, process::sys_futex_requeue),
    unsupported(nr::STATMOUNT, "mount listing (/proc/self/mountinfo works)"),
    unsupported(nr::LISTMOUNT, "mount listing (/proc/self/mountinfo works)"),
    full(nr::LSM_GET_SELF_ATTR, landlock::sys_lsm_get_self_attr),
    full(nr::LSM_SET_SELF_ATTR, landlock::sys_lsm_set_self_attr),
    full(nr::LSM_LIST_MODULES, landlock::sys_lsm_list_modules),
    full(nr::MSEAL, mm::sys_mseal),
    full(nr::SETXATTRAT, fs::sys_setxattrat),
    full(nr::GETXATTRAT, fs::sys_getxattrat),
    full(nr::LISTXATTRAT, fs::sys_listxattrat),
    full(nr::REMOVEXATTRAT, fs::sys_removexattrat),
    partial(
        nr::OPEN_TREE_ATTR,
        mount::sys_open_tree_attr,
        "OPEN_TREE_CLONE and mount attributes are EPERM",
    ),
];

/// The table, indexed by number: dispatch is one index, made when the
/// Sentry is compiled.
pub static TABLE: [Option<Entry>; abi::MAX_SYSCALL as usize] = {
    let mut t = [None; abi::MAX_SYSCALL as usize];
    let mut i = 0;
    while i < ROWS.len() {
        t[ROWS[i].nr as usize] = Some(ROWS[i]);
        i += 1;
    }
    t
};

/// Runs system call `nr` for `task`.
pub fn dispatch(task: &mut Task, nr: u64, args: &Args) -> Result<u64, Errno> {
    // The guest's own seccomp filters come first; a thread without any
    // pays this one test.
    if task.thread.seccomp.active() {
        if let Some(r) = seccomp::secure_computing(task, nr, args) {
            return r;
        }
    }
    match TABLE.get(nr as usize) {
        Some(Some(Entry {
            handler: Some(h),
            name,
            ..
        })) => {
            let r = h(task, args);
            tracing::trace!(
                "{name}({:#x}, {:#x}, {:#x}) = {r:?}",
                args[0],
                args[1],
                args[2]
            );
            r
        }
        Some(Some(Entry { name, .. })) => {
            task.kernel.report_unsupported(nr, name);
            Err(Errno::ENOSYS)
        }
        _ => {
            task.kernel.report_unsupported(nr, "(unknown)");
            Err(Errno::ENOSYS)
        }
    }
}

/// Reads a path argument (`EFAULT`, `ENAMETOOLONG`).
fn path_arg(task: &Task, addr: u64) -> Result<Vec<u8>, Errno> {
    task.mm().read_cstr(addr, PATH_MAX - 1)
}

/// Reads a string argument of at most `max` bytes: `EINVAL` when longer,
/// as Linux's `strndup_user`.
fn string_arg(task: &Task, addr: u64, max: usize) -> Result<Vec<u8>, Errno> {
    task.mm().read_cstr(addr, max).map_err(|e| {
        if e == Errno::ENAMETOOLONG {
            Errno::EINVAL
        } else {
            e
        }
    })
}

/// The directory a `*at()` call's relative paths start from.
fn dir_arg(task: &Task, dirfd: u64, path: &[u8]) -> Result<Location, Errno> {
    if path.first() == Some(&b'/') {
        return Ok(task.root());
    }
    let dirfd = dirfd as i32;
    if dirfd == abi::AT_FDCWD {
        return Ok(task.cwd());
    }
    let file = task.fds().file(dirfd.into())?;
    let loc = file.location.clone().ok_or(Errno::ENOTDIR)?;
    if !path.is_empty() && !loc.node().is_dir() {
        return Err(Errno::ENOTDIR);
    }
    Ok(loc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_sorted_and_cover_every_syscall_once() {
        for w in ROWS.windows(2) {
            assert!(
                w[0].nr < w[1].nr,
                "row {} ({}) comes before {} ({}): one row per system call, sorted by number",
                w[0].name,
                w[0].nr,
                w[1].name,
                w[1].nr
            );
        }
        let numbers: Vec<u64> = ROWS.iter().map(|e| e.nr).collect();
        let abi: Vec<u64> = abi::SYSCALLS.iter().map(|&(n, _)| n).collect();
        for &(n, name) in abi::SYSCALLS {
            assert!(numbers.contains(&n), "{name} ({n}) has no row");
        }
        assert_eq!(numbers, abi);
        for e in ROWS {
            assert_eq!(abi::syscall_name(e.nr), Some(e.name));
        }
    }

    #[test]
    fn support_levels_agree_with_handlers_and_notes() {
        for e in ROWS {
            match e.support {
                Support::Unsupported => assert!(e.handler.is_none(), "{}", e.name),
                Support::Full => assert!(e.handler.is_some(), "{}", e.name),
                Support::Partial => {
                    assert!(e.handler.is_some(), "{}", e.name);
                    assert!(
                        !e.note.trim().is_empty(),
                        "{} is partial: its row must say what is missing",
                        e.name
                    );
                }
            }
        }
    }

    #[test]
    fn table_is_indexed_by_number() {
        assert_eq!(TABLE.iter().flatten().count(), abi::SYSCALLS.len());
        for (i, e) in TABLE.iter().enumerate() {
            if let Some(e) = e {
                assert_eq!(e.nr, i as u64);
            } else {
                assert_eq!(abi::syscall_name(i as u64), None);
            }
        }
        assert_eq!(TABLE[0].map(|e| e.support), Some(Support::Full));
        assert_eq!(
            TABLE[nr::SYSLOG as usize].map(|e| e.support),
            Some(Support::Unsupported)
        );
    }
}
