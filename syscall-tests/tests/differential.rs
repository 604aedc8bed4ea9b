//! Every guest program, run natively and under `ferrovisor do`, must print
//! the same stdout and end with the same status.
//!
//! One `#[test]` per guest, so a failure names the behaviour. Each entry
//! gives the status the guest must end with natively (0 unless it is meant
//! to die or exit otherwise); a native run that disagrees means the test is
//! wrong, not the sandbox. Guests named `erofs_*` modify the root: natively
//! they run with `/` remounted read-only in a private mount namespace (root
//! needed), matching the sandbox's read-only view of the host root.
//! Guests named `sysv_*` use System V IPC: natively they run in an IPC
//! namespace of their own, as the sandbox is one.
//! Guests named `*_volume` work in a directory they are given: natively a
//! scratch directory, in the sandbox another one mounted as a volume; the
//! files both runs leave there must agree as well.
//!
//! Environment knobs: `FERROVISOR_BIN` (binary to test), `FERROVISOR_PLATFORM`
//! (run under that platform only; by default every guest runs under
//! `seccomp`, `seccomp-spin`, `ptrace`, and `kvm` where `/dev/kvm` opens),
//! `FERROVISOR_DEBUG_DIR` (keep a debug log per run).

mod harness;

use harness::Native;
use std::path::{Path, PathBuf};

fn guest_path(name: &str) -> PathBuf {
    Path::new(syscall_tests::GUEST_DIR).join(name)
}

fn run_guest(name: &str, native_status: i32) {
    if name.ends_with("_volume") {
        // Works in a directory given as its argument: a volume in the
        // sandbox, whose host files are compared too.
        harness::compare_on_volume(name, &guest_path(name), native_status);
        return;
    }
    let native = if name.starts_with("erofs_") {
        Native::ReadOnlyRoot
    } else if name.starts_with("sysv_") {
        Native::OwnIpc
    } else {
        Native::Plain
    };
    harness::compare(name, native, &guest_path(name), &[], native_status);
}

macro_rules! status {
    () => {
        0
    };
    ($s:expr) => {
        $s
    };
}

/// `name` or `name => status`: declares the test and records the name so
/// `every_guest_has_a_test` can check the list against `guests/*.c`.
macro_rules! guests {
    ($($name:ident $(=> $status:expr)?),* $(,)?) => {
        const LISTED: &[&str] = &[$(stringify!($name)),*];
        $(
            #[test]
            fn $name() {
                run_guest(stringify!($name), status!($($status)?));
            }
        )*
    };
}

guests! {
    // one process attacks another through the stub (issue 21)
    isolation,
    int80,
    // files, read-only
    open_basic,
    openat_dirfd,
    open_nofollow,
    openat2,
    inotify,
    xattr,
    read_basic,
    pread_readv,
    rwf_flags,
    lseek,
    stat_basic,
    newfstatat,
    statx,
    getdents,
    cwd,
    readlink,
    access,
    dup,
    file_locks,
    fcntl,
    ioctl,
    devices,
    symlinks,
    path_edge,
    eloop,
    stdio_fds,
    // writes on the read-only root
    erofs_open,
    erofs_dirs,
    erofs_names,
    erofs_attrs,
    // memory
    mmap_anon,
    mlock_calls,
    mmap_fixed,
    mmap_hint,
    mmap_file,
    mmap_file_cow,
    elf_segment_tail,
    execve_fpu,
    link_write_errnos,
    file_calls_more,
    munmap,
    munmap_segv => 128 + 11,
    mprotect,
    mprotect_segv => 128 + 11,
    brk,
    madvise,
    mremap,
    mincore,
    // NUMA with one node, cachestat, mseal (issue 20)
    numa,
    cachestat,
    // Landlock, ABI 3, and membarrier (issue 20)
    landlock,
    membarrier,
    remap_file_pages,
    vhangup,
    xattrat,
    futex2,
    lsm,
    mempolicy_home,
    process_madvise,
    mseal,
    // AIO (issue 20)
    aio,
    // the old getdents, setrlimit, readahead, sync_file_range (issue 20)
    old_calls,
    // keyrings: add_key, keyctl, request_key (issue 20)
    keyrings,
    // mount -t tmpfs and umount by the sandbox's root (issue 20)
    mount_tmpfs,
    // /proc/self/ns and setns into one's own namespaces (issue 20)
    proc_ns,
    // unshare of a thread's descriptor table and working directory (issue 20)
    unshare_calls,
    // process, identity, time
    ids,
    net_ifaces,
    uname,
    exit_group => 263 & 0xff,
    exit_atexit => 42,
    arch_prctl,
    set_tid_address,
    rlimit,
    capabilities,
    // permission checks by capability, not uid 0 (issue 6)
    cap_checks,
    // set-user-ID and set-group-ID programs, and what clears the bits
    setuid_exec,
    // PR_SET_SECUREBITS and what each bit does
    securebits,
    // System V shared memory, semaphores and message queues
    sysv_shm,
    sysv_sem,
    sysv_msg,
    umask,
    sched,
    // /proc/cpuinfo's topology agrees with /sys's (issue 4 point 3)
    cpuinfo_topology,
    getrandom,
    clocks,
    clock_ids,
    personality_sched,
    ioprio,
    nanosleep,
    sysinfo_times,
    auxv,
    enosys,
    // signals
    sigaction,
    sigprocmask,
    sigaltstack,
    kill_sigterm => 128 + 15,
    abort => 128 + 6,
    segv_null => 128 + 11,
    sigfpe => 128 + 8,
    fault_signals => 128 + 4,
    privileged => 0,
    cpuid_features,
    thread_fpu => 0,
    vector_state => 0,
    // execve
    execve_echo,
    execve_static => 5,
    execve_env,
    execve_errors => 3,
    // malformed ELF headers, PT_INTERP and #! lines (issue 21)
    execve_malformed,
    execve_state,
    // a guest's own seccomp filters, enforced by the Sentry (issue 20)
    seccomp_filter,
    seccomp_notify,
    // /proc/PID/mem, as debuggers use it (issue 20)
    proc_mem,
    // nice values and fair scheduling policies (issue 20)
    sched_prio,
    // answers Python's test suites found wrong (issue 20)
    python_probes,
    // hangs and wrong answers gVisor's syscall tests found (issue 20)
    suite_finds,
    // signals in depth (issue 3 point 3)
    sig_siginfo,
    sig_restart,
    sig_flags => 128 + 12,
    sig_altstack_overflow,
    sig_fault_info,
    sigsuspend_wait,
    sigchld_waitid,
    stop_cont,
    // processes, threads and waiting (issue 3 points 1, 4, 8)
    wait4_nohang,
    pidfd,
    kcmp,
    pgrp_session,
    subreaper,
    futex_wake,
    futex_waitv,
    pthread_sync,
    robust_mutex,
    thread_execve,
    fork_threads,
    posix_timer,
    clock_abstime,
    resources,
    // descriptors between processes (issue 3 point 5)
    pipe_caps,
    dup_range,
    poll_select,
    epoll_modes,
    // edge-triggered epoll on sockets: every arrival is an edge (the Go
    // netpoller's accept and read loops)
    epoll_socket_edges,
    // threads mapping without MAP_FIXED at once: a range each (the Go
    // runtime's and toolchain's off-heap memory and mapped files)
    mmap_threads,
    eventfd_sem,
    timerfd_periodic,
    signalfd_read,
    // large single transfers staged in bounded pieces (no Sentry buffer
    // as large as the guest's)
    big_transfers,
    // SO_RCVTIMEO / SO_SNDTIMEO on Unix, TCP and UDP sockets (issue 7)
    sock_timeouts,
    // recvmmsg's timeout; SO_RCVTIMEO on netlink sockets (issue 7)
    sock_recvmmsg,
    // control messages on UDP and TCP sockets: IP_PKTINFO, TTL, TOS,
    // IPv6 packet info and hop limit, timestamps, MSG_CTRUNC (issue 7)
    sock_cmsg,
    // IP_TTL, IP_TOS, IPV6_UNICAST_HOPS, IPV6_TCLASS, IP_MULTICAST_TTL:
    // Linux's values, and the receiver's messages seeing them (issue 7)
    sock_ip_header,
    // SO_TIMESTAMP[NS] is the datagram's arrival time (issue 7)
    sock_rx_timestamp,
    // SO_TIMESTAMPING: its flags and checks, SCM_TIMESTAMPING's software
    // receive stamp on UDP and TCP (issue 7)
    sock_timestamping,
    // IP_TOS / IPV6_TCLASS on TCP: masking, inheritance by accepted
    // sockets, dual stack (issue 7)
    sock_tcp_tos,
    // ECONNREFUSED from a loopback port unreachable, IP_RECVERR and
    // MSG_ERRQUEUE (issue 7)
    sock_udp_refused,
    // Unix datagram and seqpacket buffer accounting: the sender's
    // SO_SNDBUF, max_dgram_qlen, EMSGSIZE (issue 7)
    unix_dgram_buf,
    // Unix stream buffer accounting: the writer's own SO_SNDBUF, not the
    // reader's SO_RCVBUF (issue 7)
    unix_stream_sndbuf,
    // SCM_RIGHTS from a sender that waits for buffer room: the descriptors
    // go with the message's first byte (issue 7)
    unix_rights_blocked,
    // Unix stream, datagram and seqpacket sockets: pathname and abstract
    // names, SCM_RIGHTS, SCM_CREDENTIALS, SO_PEERCRED, shutdown, MSG_PEEK,
    // MSG_DONTWAIT, MSG_NOSIGNAL, MSG_TRUNC (issue 7 point 1)
    unix_sockets,
    // TCP/UDP socket options programs set, accept4, non-blocking connect,
    // FIONREAD, IPV6_V6ONLY, SO_REUSEPORT, epoll readiness (issue 7 point 2)
    tcp_sockopts,
    // pseudo-terminals (issue 4 point 3, /dev/pts)
    pty_basic,
    pty_jobctl,
    // packet mode, termio ioctls and TIOCSTI; signal-driven I/O on pipes
    // and ptys (issue 4 leftovers)
    pty_packet,
    pty_termio,
    sigio,
    // signal-driven I/O: hang-ups, room again, errors and connections;
    // TCP/UDP, netlink, inotify, /dev/random (issue 4 leftovers)
    sigio_more,
    // no way out: what would change the file system view (issue 4 point 7)
    privileged_refused,
    // memfd_create and file seals (issue 4 point 3)
    memfd,
    // chroot: a narrower root per process (issue 4 point 7)
    chroot,
    // the mount table a chroot sees (issue 4 leftovers)
    mountinfo_chroot,
    // open_tree_attr refused like the other mount calls (needs Linux 6.15
    // natively)
    open_tree_attr,
    // sendfile, copy_file_range, splice, tee, vmsplice (issue 4
    // acceptance 4)
    sendfile,
    copy_file_range,
    splice,
    // shared writable mappings of volume files: coherent with read and
    // write, shared across opens and fork, written back to the host
    // (issue 4 acceptance 4)
    mmap_shared_volume,
    // inotify on a volume: the guest's own changes once each, as the host
    // reports them (issue 4)
    inotify_volume,
    // /dev/fd/N, /dev/stdin, /dev/stdout, /dev/stderr: the links, and a
    // file opened anew through them (issue 4 point 3)
    dev_fd,
    // /proc/[pid]/{statm,maps,smaps,environ,cwd,limits,oom_score_adj} and
    // /proc/thread-self (issue 4 point 3)
    proc_pid_files,
    // /proc/{loadavg,version,filesystems}, /proc/sys/kernel and
    // /proc/sys/vm files: formats and agreements (issue 4 point 3)
    proc_sys_files,
    proc_sys_more,
    proc_status,
    pagemap,
    // POSIX message queues and the mqueue file system (issue 6 point 2)
    mq_basic,
    // mq_notify with SIGEV_THREAD: glibc's helper thread, and the cookie
    // the kernel posts to its netlink socket (issue 6 point 2)
    mq_notify_thread,
    // search permission on every directory a path walks through, for a
    // process without CAP_DAC_READ_SEARCH (issue 6 point 2, capabilities)
    path_search,
    // a child's SIGCHLD is generated with its exit: once reaped, never
    // found pending by a parent that then blocks it (issue 3)
    sigchld_after_wait,
}

#[test]
fn every_guest_has_a_test() {
    let mut listed: Vec<&str> = LISTED.to_vec();
    listed.sort_unstable();
    assert_eq!(
        listed,
        syscall_tests::guest_names(),
        "the guests! list must name every guests/*.c exactly once"
    );
}

/// A `#!/bin/sh` script run directly: the kernel (or Sentry) finds the
/// interpreter, passes the script path and arguments, and the script's
/// status is the run's status.
#[test]
fn script_sh() {
    let script = Path::new(syscall_tests::FIXTURES).join("script.sh");
    harness::compare(
        "script_sh",
        Native::Plain,
        &script,
        &["one", "two words"],
        3,
    );
}

/// The same with a static interpreter (`#!/bin/busybox sh`).
#[test]
fn script_static_interpreter() {
    let script = Path::new(syscall_tests::FIXTURES).join("script_static.sh");
    harness::compare(
        "script_static_interpreter",
        Native::Plain,
        &script,
        &["x", "y"],
        4,
    );
}

/// argv as given on the command line reaches the guest unchanged.
#[test]
fn auxv_with_arguments() {
    harness::compare(
        "auxv_with_arguments",
        Native::Plain,
        &guest_path("auxv"),
        &["first", "", "with space", "-dash", "--", "ünïcode"],
        0,
    );
}

/// Sandbox only (Linux has the room and runs it): a program with a segment
/// where the platform keeps its own pages fails `execve` with ENOMEM, its
/// caller still running (issue 21).
#[test]
fn execve_reserved_addresses() {
    // (KVM keeps its own pages in the upper half, so there is no such
    // segment there: Linux's answer holds, which `execve_malformed` checks)
    sandbox_only_on("execve_malformed", "reserved", |p| p != "kvm");
}

/// Runs guest `name` with argument `arg` in the sandbox alone, on every
/// platform: its checks are the sandbox's own answers, not Linux's.
fn sandbox_only(name: &str, arg: &str) {
    sandbox_only_on(name, arg, |_| true);
}

/// [`sandbox_only`] on the platforms `which` takes.
fn sandbox_only_on(name: &str, arg: &str, which: impl Fn(&str) -> bool) {
    let guest = guest_path(name);
    for platform in harness::platforms().into_iter().filter(|p| which(p)) {
        let sb = harness::run_sandboxed_on(&platform, name, &guest, &[arg]);
        assert_eq!(
            (sb.status, sb.stdout.lines().last()),
            (0, Some("failures=0")),
            "--platform {platform}:\n{}{}",
            sb.stdout,
            sb.stderr
        );
    }
}

/// `int $0x80` gets ENOSYS on every platform (Linux would run the 32-bit
/// call, which the sandbox does not implement), and the process goes on.
#[test]
fn int80_is_enosys_everywhere() {
    sandbox_only("int80", "sandbox");
}

#[test]
fn diff_marks_changed_lines() {
    let d = harness::diff("a\nb\nc\n", "a\nx\nc\nd\n");
    assert_eq!(d, "  a\n+ x\n- b\n  c\n+ d\n");
}
