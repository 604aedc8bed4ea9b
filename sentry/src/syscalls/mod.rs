//! The system call table: every x86-64 system call with its handler and
//! support level, and the dispatcher. Handlers live in one file per family.

mod events;
mod fork;
mod fs;
mod host_inet;
mod inet;
mod memfd;
mod mm;
mod mount;
mod mqueue;
mod netlink;
mod poll;
mod process;
mod signal;
mod socket;
mod splice;
mod time;

use std::sync::LazyLock;

use abi::{nr, Errno};

use crate::kernel::task::Task;
use crate::vfs::{Location, PATH_MAX};

/// A system call handler: arguments in ABI order, result for `rax`.
pub type Handler = fn(&mut Task, &[u64; 6]) -> Result<u64, Errno>;

/// How completely the Sentry implements a system call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// Linux semantics
    Full,
    /// the common cases; the note in the handler says what is missing
    Partial,
    /// answered `ENOSYS`
    Unsupported,
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
}

use Support::{Full, Partial};

/// Implemented system calls.
const IMPLEMENTED: &[(u64, Handler, Support)] = &[
    (nr::SETUID, process::sys_setuid, Full),
    (nr::SETGID, process::sys_setgid, Full),
    (nr::SETREUID, process::sys_setreuid, Full),
    (nr::SETREGID, process::sys_setregid, Full),
    (nr::SETRESUID, process::sys_setresuid, Full),
    (nr::SETRESGID, process::sys_setresgid, Full),
    (nr::SETFSUID, process::sys_setfsuid, Full),
    (nr::SETFSGID, process::sys_setfsgid, Full),
    (nr::SETGROUPS, process::sys_setgroups, Full),
    (nr::CAPGET, process::sys_capget, Full),
    (nr::CAPSET, process::sys_capset, Partial),
    (nr::SOCKET, socket::sys_socket, Partial),
    (nr::SOCKETPAIR, socket::sys_socketpair, Full),
    (nr::BIND, socket::sys_bind, Partial),
    (nr::LISTEN, socket::sys_listen, Partial),
    (nr::ACCEPT, socket::sys_accept, Partial),
    (nr::ACCEPT4, socket::sys_accept4, Partial),
    (nr::CONNECT, socket::sys_connect, Partial),
    (nr::GETSOCKNAME, socket::sys_getsockname, Partial),
    (nr::GETPEERNAME, socket::sys_getpeername, Partial),
    (nr::SHUTDOWN, socket::sys_shutdown, Partial),
    (nr::SENDTO, socket::sys_sendto, Partial),
    (nr::RECVFROM, socket::sys_recvfrom, Partial),
    (nr::SENDMSG, socket::sys_sendmsg, Partial),
    (nr::RECVMSG, socket::sys_recvmsg, Partial),
    (nr::SENDMMSG, socket::sys_sendmmsg, Partial),
    (nr::RECVMMSG, socket::sys_recvmmsg, Partial),
    (nr::SETSOCKOPT, socket::sys_setsockopt, Partial),
    (nr::GETSOCKOPT, socket::sys_getsockopt, Partial),
    (nr::EVENTFD, events::sys_eventfd, Full),
    (nr::EVENTFD2, events::sys_eventfd2, Full),
    (nr::TIMERFD_CREATE, events::sys_timerfd_create, Full),
    (nr::TIMERFD_SETTIME, events::sys_timerfd_settime, Partial),
    (nr::TIMERFD_GETTIME, events::sys_timerfd_gettime, Full),
    (nr::SIGNALFD, events::sys_signalfd, Full),
    (nr::SIGNALFD4, events::sys_signalfd4, Full),
    (nr::EPOLL_CREATE, events::sys_epoll_create, Full),
    (nr::EPOLL_CREATE1, events::sys_epoll_create1, Full),
    (nr::EPOLL_CTL, events::sys_epoll_ctl, Full),
    (nr::EPOLL_WAIT, events::sys_epoll_wait, Full),
    (nr::EPOLL_PWAIT, events::sys_epoll_pwait, Full),
    (nr::EPOLL_PWAIT2, events::sys_epoll_pwait2, Full),
    (nr::ALARM, events::sys_alarm, Full),
    (nr::SETITIMER, events::sys_setitimer, Partial),
    (nr::GETITIMER, events::sys_getitimer, Partial),
    (nr::TIMER_CREATE, events::sys_timer_create, Partial),
    (nr::TIMER_SETTIME, events::sys_timer_settime, Full),
    (nr::TIMER_GETTIME, events::sys_timer_gettime, Full),
    (nr::TIMER_GETOVERRUN, events::sys_timer_getoverrun, Full),
    (nr::TIMER_DELETE, events::sys_timer_delete, Full),
    (nr::CLOSE_RANGE, fs::sys_close_range, Full),
    (
        nr::SCHED_GET_PRIORITY_MAX,
        process::sys_sched_get_priority_max,
        Full,
    ),
    (
        nr::SCHED_GET_PRIORITY_MIN,
        process::sys_sched_get_priority_min,
        Full,
    ),
    (nr::READ, fs::sys_read, Full),
    (nr::WRITE, fs::sys_write, Full),
    (nr::OPEN, fs::sys_open, Full),
    (nr::CLOSE, fs::sys_close, Full),
    (nr::STAT, fs::sys_stat, Full),
    (nr::FSTAT, fs::sys_fstat, Full),
    (nr::LSTAT, fs::sys_lstat, Full),
    (nr::LSEEK, fs::sys_lseek, Full),
    (nr::MMAP, mm::sys_mmap, Partial),
    (nr::MPROTECT, mm::sys_mprotect, Full),
    (nr::MUNMAP, mm::sys_munmap, Full),
    (nr::SHMGET, crate::kernel::ipc::shm::sys_shmget, Full),
    (nr::SHMAT, crate::kernel::ipc::shm::sys_shmat, Full),
    (nr::SHMDT, crate::kernel::ipc::shm::sys_shmdt, Full),
    (nr::SHMCTL, crate::kernel::ipc::shm::sys_shmctl, Partial),
    (nr::SEMGET, crate::kernel::ipc::sem::sys_semget, Full),
    (nr::SEMOP, crate::kernel::ipc::sem::sys_semop, Full),
    (
        nr::SEMTIMEDOP,
        crate::kernel::ipc::sem::sys_semtimedop,
        Full,
    ),
    (nr::SEMCTL, crate::kernel::ipc::sem::sys_semctl, Full),
    (nr::MSGGET, crate::kernel::ipc::msg::sys_msgget, Full),
    (nr::MSGSND, crate::kernel::ipc::msg::sys_msgsnd, Full),
    (nr::MSGRCV, crate::kernel::ipc::msg::sys_msgrcv, Partial),
    (nr::MSGCTL, crate::kernel::ipc::msg::sys_msgctl, Full),
    (nr::BRK, mm::sys_brk, Full),
    (nr::RT_SIGACTION, signal::sys_rt_sigaction, Partial),
    (nr::RT_SIGPROCMASK, signal::sys_rt_sigprocmask, Partial),
    (nr::IOCTL, fs::sys_ioctl, Partial),
    (nr::PREAD64, fs::sys_pread64, Full),
    (nr::PWRITE64, fs::sys_pwrite64, Full),
    (nr::READV, fs::sys_readv, Full),
    (nr::WRITEV, fs::sys_writev, Full),
    (nr::ACCESS, fs::sys_access, Full),
    (nr::SCHED_YIELD, process::sys_sched_yield, Full),
    (nr::MREMAP, mm::sys_mremap, Partial),
    (nr::MSYNC, mm::sys_msync, Full),
    (nr::MADVISE, mm::sys_madvise, Partial),
    (nr::DUP, fs::sys_dup, Full),
    (nr::DUP2, fs::sys_dup2, Full),
    (nr::NANOSLEEP, time::sys_nanosleep, Full),
    (nr::GETPID, process::sys_getpid, Full),
    (nr::EXECVE, process::sys_execve, Partial),
    (nr::EXIT, process::sys_exit, Partial),
    (nr::WAIT4, fork::sys_wait4, Partial),
    (nr::WAITID, fork::sys_waitid, Partial),
    (nr::FORK, fork::sys_fork, Full),
    (nr::VFORK, fork::sys_vfork, Partial),
    (nr::CLONE, fork::sys_clone, Partial),
    (nr::CLONE3, fork::sys_clone3, Partial),
    (nr::PIDFD_OPEN, fork::sys_pidfd_open, Full),
    (nr::PIDFD_SEND_SIGNAL, signal::sys_pidfd_send_signal, Full),
    (nr::PIPE, fs::sys_pipe, Full),
    (nr::SENDFILE, splice::sys_sendfile, Full),
    (nr::COPY_FILE_RANGE, splice::sys_copy_file_range, Full),
    (nr::SPLICE, splice::sys_splice, Full),
    (nr::TEE, splice::sys_tee, Full),
    (nr::VMSPLICE, splice::sys_vmsplice, Full),
    (nr::PIPE2, fs::sys_pipe2, Full),
    (nr::POLL, poll::sys_poll, Partial),
    (nr::PPOLL, poll::sys_ppoll, Partial),
    (nr::SELECT, poll::sys_select, Partial),
    (nr::PSELECT6, poll::sys_pselect6, Partial),
    (nr::RT_SIGRETURN, signal::sys_rt_sigreturn, Full),
    (nr::RT_SIGSUSPEND, signal::sys_rt_sigsuspend, Full),
    (nr::RT_SIGTIMEDWAIT, signal::sys_rt_sigtimedwait, Partial),
    (nr::PAUSE, signal::sys_pause, Full),
    (nr::KILL, signal::sys_kill, Partial),
    (nr::UNAME, process::sys_uname, Full),
    (nr::SETHOSTNAME, process::sys_sethostname, Full),
    (nr::SETDOMAINNAME, process::sys_setdomainname, Full),
    (nr::FCNTL, fs::sys_fcntl, Partial),
    (nr::FLOCK, fs::sys_flock, Partial),
    (nr::FSYNC, fs::sys_fsync, Full),
    (nr::FDATASYNC, fs::sys_fsync, Full),
    (nr::TRUNCATE, fs::sys_truncate, Full),
    (nr::FTRUNCATE, fs::sys_ftruncate, Full),
    (nr::GETDENTS64, fs::sys_getdents64, Full),
    (nr::GETCWD, fs::sys_getcwd, Full),
    (nr::CHDIR, fs::sys_chdir, Full),
    (nr::FCHDIR, fs::sys_fchdir, Full),
    (nr::RENAME, fs::sys_rename, Full),
    (nr::MKDIR, fs::sys_mkdir, Full),
    (nr::RMDIR, fs::sys_rmdir, Full),
    (nr::CREAT, fs::sys_creat, Full),
    (nr::LINK, fs::sys_link, Full),
    (nr::UNLINK, fs::sys_unlink, Full),
    (nr::SYMLINK, fs::sys_symlink, Full),
    (nr::READLINK, fs::sys_readlink, Full),
    (nr::CHMOD, fs::sys_chmod, Full),
    (nr::FCHMOD, fs::sys_fchmod, Full),
    (nr::CHOWN, fs::sys_chown, Full),
    (nr::FCHOWN, fs::sys_fchown, Full),
    (nr::LCHOWN, fs::sys_lchown, Full),
    (nr::UMASK, fs::sys_umask, Full),
    (nr::GETTIMEOFDAY, time::sys_gettimeofday, Full),
    (nr::GETRLIMIT, process::sys_getrlimit, Full),
    (nr::GETRUSAGE, process::sys_getrusage, Partial),
    (nr::SYSINFO, process::sys_sysinfo, Full),
    (nr::TIMES, process::sys_times, Partial),
    (nr::GETUID, process::sys_getuid, Full),
    (nr::GETGID, process::sys_getgid, Full),
    (nr::GETEUID, process::sys_geteuid, Full),
    (nr::GETEGID, process::sys_getegid, Full),
    (nr::SETPGID, process::sys_setpgid, Partial),
    (nr::GETPPID, process::sys_getppid, Full),
    (nr::GETPGRP, process::sys_getpgrp, Full),
    (nr::SETSID, process::sys_setsid, Partial),
    (nr::GETGROUPS, process::sys_getgroups, Full),
    (nr::GETRESUID, process::sys_getresuid, Full),
    (nr::GETRESGID, process::sys_getresgid, Full),
    (nr::GETPGID, process::sys_getpgid, Full),
    (nr::GETSID, process::sys_getsid, Full),
    (nr::RT_SIGPENDING, signal::sys_rt_sigpending, Partial),
    (nr::SIGALTSTACK, signal::sys_sigaltstack, Full),
    (nr::UTIME, fs::sys_utime, Full),
    (nr::MKNOD, fs::sys_mknod, Full),
    (nr::STATFS, fs::sys_statfs, Full),
    (nr::FSTATFS, fs::sys_fstatfs, Full),
    (nr::GETPRIORITY, process::sys_getpriority, Partial),
    (nr::SETPRIORITY, process::sys_setpriority, Partial),
    (nr::SCHED_GETPARAM, process::sys_sched_getparam, Partial),
    (
        nr::SCHED_GETSCHEDULER,
        process::sys_sched_getscheduler,
        Partial,
    ),
    (nr::MLOCK, mm::sys_mlock, Partial),
    (nr::MUNLOCK, mm::sys_mlock, Partial),
    (nr::PRCTL, process::sys_prctl, Partial),
    (nr::ARCH_PRCTL, process::sys_arch_prctl, Partial),
    (nr::SYNC, process::sys_sync, Full),
    (nr::GETTID, process::sys_gettid, Full),
    (nr::SETXATTR, fs::sys_setxattr, Full),
    (nr::LSETXATTR, fs::sys_lsetxattr, Full),
    (nr::FSETXATTR, fs::sys_fsetxattr, Full),
    (nr::GETXATTR, fs::sys_getxattr, Full),
    (nr::LGETXATTR, fs::sys_lgetxattr, Full),
    (nr::FGETXATTR, fs::sys_fgetxattr, Full),
    (nr::LISTXATTR, fs::sys_listxattr, Full),
    (nr::LLISTXATTR, fs::sys_llistxattr, Full),
    (nr::FLISTXATTR, fs::sys_flistxattr, Full),
    (nr::REMOVEXATTR, fs::sys_removexattr, Full),
    (nr::LREMOVEXATTR, fs::sys_lremovexattr, Full),
    (nr::FREMOVEXATTR, fs::sys_fremovexattr, Full),
    (nr::TKILL, signal::sys_tkill, Partial),
    (nr::TIME, time::sys_time, Full),
    (nr::FUTEX, process::sys_futex, Partial),
    (
        nr::SCHED_SETAFFINITY,
        process::sys_sched_setaffinity,
        Partial,
    ),
    (nr::SCHED_GETAFFINITY, process::sys_sched_getaffinity, Full),
    (nr::SET_TID_ADDRESS, process::sys_set_tid_address, Full),
    (nr::FADVISE64, fs::sys_fadvise64, Full),
    (nr::CLOCK_GETTIME, time::sys_clock_gettime, Full),
    (nr::CLOCK_GETRES, time::sys_clock_getres, Full),
    (nr::CLOCK_NANOSLEEP, time::sys_clock_nanosleep, Full),
    (nr::EXIT_GROUP, process::sys_exit_group, Full),
    (nr::TGKILL, signal::sys_tgkill, Partial),
    (nr::RT_SIGQUEUEINFO, signal::sys_rt_sigqueueinfo, Partial),
    (
        nr::RT_TGSIGQUEUEINFO,
        signal::sys_rt_tgsigqueueinfo,
        Partial,
    ),
    (nr::UTIMES, fs::sys_utimes, Full),
    (nr::OPENAT, fs::sys_openat, Full),
    (nr::OPENAT2, fs::sys_openat2, Full),
    (nr::INOTIFY_INIT, fs::sys_inotify_init, Full),
    (nr::INOTIFY_INIT1, fs::sys_inotify_init1, Full),
    (nr::INOTIFY_ADD_WATCH, fs::sys_inotify_add_watch, Full),
    (nr::INOTIFY_RM_WATCH, fs::sys_inotify_rm_watch, Full),
    (nr::MKDIRAT, fs::sys_mkdirat, Full),
    (nr::MKNODAT, fs::sys_mknodat, Full),
    (nr::FCHOWNAT, fs::sys_fchownat, Full),
    (nr::FUTIMESAT, fs::sys_futimesat, Full),
    (nr::NEWFSTATAT, fs::sys_newfstatat, Full),
    (nr::UNLINKAT, fs::sys_unlinkat, Full),
    (nr::RENAMEAT, fs::sys_renameat, Full),
    (nr::LINKAT, fs::sys_linkat, Full),
    (nr::SYMLINKAT, fs::sys_symlinkat, Full),
    (nr::READLINKAT, fs::sys_readlinkat, Full),
    (nr::FCHMODAT, fs::sys_fchmodat, Full),
    (nr::FACCESSAT, fs::sys_faccessat, Full),
    (nr::SET_ROBUST_LIST, process::sys_set_robust_list, Full),
    (nr::GET_ROBUST_LIST, process::sys_get_robust_list, Full),
    (nr::UTIMENSAT, fs::sys_utimensat, Full),
    (nr::FALLOCATE, fs::sys_fallocate, Full),
    (nr::DUP3, fs::sys_dup3, Full),
    (nr::PREADV, fs::sys_preadv, Full),
    (nr::PWRITEV, fs::sys_pwritev, Full),
    (nr::PRLIMIT64, process::sys_prlimit64, Full),
    (nr::SYNCFS, fs::sys_fsync, Full),
    (nr::GETCPU, process::sys_getcpu, Full),
    (nr::RENAMEAT2, fs::sys_renameat2, Full),
    (nr::GETRANDOM, process::sys_getrandom, Full),
    (nr::EXECVEAT, process::sys_execveat, Partial),
    (nr::STATX, fs::sys_statx, Full),
    (nr::FACCESSAT2, fs::sys_faccessat2, Full),
    (nr::FCHMODAT2, fs::sys_fchmodat2, Full),
    (nr::MOUNT, mount::sys_mount, Partial),
    (nr::UMOUNT2, mount::sys_umount2, Partial),
    (nr::PIVOT_ROOT, mount::sys_pivot_root, Partial),
    (nr::CHROOT, mount::sys_chroot, Partial),
    (nr::NAME_TO_HANDLE_AT, mount::sys_name_to_handle_at, Partial),
    (nr::OPEN_BY_HANDLE_AT, mount::sys_open_by_handle_at, Partial),
    (nr::MEMFD_CREATE, memfd::sys_memfd_create, Full),
    (nr::MQ_OPEN, mqueue::sys_mq_open, Full),
    (nr::MQ_UNLINK, mqueue::sys_mq_unlink, Full),
    (nr::MQ_TIMEDSEND, mqueue::sys_mq_timedsend, Full),
    (nr::MQ_TIMEDRECEIVE, mqueue::sys_mq_timedreceive, Full),
    (nr::MQ_NOTIFY, mqueue::sys_mq_notify, Partial),
    (nr::MQ_GETSETATTR, mqueue::sys_mq_getsetattr, Full),
    (nr::OPEN_TREE, mount::sys_open_tree, Partial),
    (nr::OPEN_TREE_ATTR, mount::sys_open_tree_attr, Partial),
    (nr::MOVE_MOUNT, mount::sys_move_mount, Partial),
    (nr::FSOPEN, mount::sys_fsopen, Partial),
    (nr::FSCONFIG, mount::sys_fsconfig, Partial),
    (nr::FSMOUNT, mount::sys_fsmount, Partial),
    (nr::FSPICK, mount::sys_fspick, Partial),
    (nr::MOUNT_SETATTR, mount::sys_mount_setattr, Partial),
];

/// The table, indexed by number; every x86-64 system call has a row.
pub static TABLE: LazyLock<Vec<Option<Entry>>> = LazyLock::new(|| {
    let mut t: Vec<Option<Entry>> = vec![None; abi::MAX_SYSCALL as usize];
    for &(n, name) in abi::SYSCALLS {
        t[n as usize] = Some(Entry {
            nr: n,
            name,
            handler: None,
            support: Support::Unsupported,
        });
    }
    for &(n, handler, support) in IMPLEMENTED {
        if let Some(Some(e)) = t.get_mut(n as usize) {
            e.handler = Some(handler);
            e.support = support;
        }
    }
    t
});

/// Runs system call `nr` for `task`.
pub fn dispatch(task: &mut Task, nr: u64, args: &[u64; 6]) -> Result<u64, Errno> {
    match TABLE.get(nr as usize).copied().flatten() {
        Some(Entry {
            handler: Some(h),
            name,
            ..
        }) => {
            let r = h(task, args);
            tracing::trace!(
                "{name}({:#x}, {:#x}, {:#x}) = {r:?}",
                args[0],
                args[1],
                args[2]
            );
            r
        }
        Some(Entry { name, .. }) => {
            task.kernel.report_unsupported(nr, name);
            Err(Errno::ENOSYS)
        }
        None => {
            task.kernel.report_unsupported(nr, "(unknown)");
            Err(Errno::ENOSYS)
        }
    }
}

/// Reads a path argument (`EFAULT`, `ENAMETOOLONG`).
fn path_arg(task: &Task, addr: u64) -> Result<Vec<u8>, Errno> {
    task.mm().read_cstr(addr, PATH_MAX - 1)
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
    fn every_syscall_has_a_row_and_handlers_are_unique() {
        let rows = TABLE.iter().flatten().count();
        assert_eq!(rows, abi::SYSCALLS.len());
        let mut seen = std::collections::HashSet::new();
        for &(n, _, _) in IMPLEMENTED {
            assert!(seen.insert(n), "syscall {n} listed twice");
            assert!(
                abi::syscall_name(n).is_some(),
                "{n} is not an x86-64 syscall"
            );
        }
        assert_eq!(TABLE[0].map(|e| e.support), Some(Support::Full));
        assert_eq!(
            TABLE[nr::IO_SETUP as usize].map(|e| e.support),
            Some(Support::Unsupported)
        );
    }
}
