//! The Sentry's own seccomp allow-list: the host system calls it may make
//! once the sandbox is set up (ARCHITECTURE.md, "Processes on the host").
//!
//! Everything that names a host path (the root, volumes, the gofer's
//! start, the memory file, the control socket) happens before [`install`];
//! afterwards the Sentry works only on descriptors it holds. So `openat`,
//! `execve`, `mount`, `unshare`, `bpf`, `io_uring_*`, `keyctl`,
//! `perf_event_open` and every other call below are out of reach of a Sentry
//! that a guest managed to subvert.
//!
//! The filter is inherited by the stub processes the platform forks later,
//! stacked under their own. A call of guest code there is trapped by the
//! stub's filter; this one must then not rank higher than that trap, so its
//! default action is [`Action::Trap`] (`SIGSYS`, whose handler in the Sentry
//! names the call in one line and ends the sandbox), never a kill. What the
//! stubs themselves call from the platform's code (their set-up, and the
//! memory and thread calls the Sentry injects) is in the list.
//!
//! [`drop_capabilities`] gives up root's powers, which the Sentry does not
//! need either once set up.

use gofer::seccomp::{Action, ArgCheck, Policy, Rule};

/// What the sandbox uses beyond the always-needed set.
#[derive(Clone, Copy, Debug, Default)]
pub struct Needs {
    /// guest sockets are host sockets (`--network host`), or egress relays
    /// connect out: TCP and UDP sockets of the host's families
    pub host_sockets: bool,
    /// guest servers listen on host sockets (`--network host`)
    pub host_listen: bool,
    /// names resolve through the host's resolver (`--allow-host`): the C
    /// library reads `/etc/resolv.conf`, `/etc/hosts` and `nsswitch.conf`
    /// by path, read-only
    pub host_resolver: bool,
    /// the platform's own `clone` flag sets ([`platform::Platform::host_clone_flags`])
    pub platform_clone_flags: &'static [u64],
    /// the platform's own `ioctl` requests ([`platform::Platform::host_ioctls`]:
    /// KVM's, on the VM and vCPU descriptors)
    pub platform_ioctls: &'static [u64],
    /// the descriptor numbers those are made on, `(start, len)`, a power
    /// of two, aligned ([`platform::Platform::host_ioctl_fds`]); `None`:
    /// any
    pub platform_ioctl_fds: Option<(u64, u64)>,
    /// the platform runs guests in stub processes it traces
    /// ([`platform::Platform::uses_stubs`]; false: no `ptrace`, `seccomp`
    /// or the stubs' `arch_prctl`)
    pub no_stubs: bool,
    /// the NVIDIA ioctl requests nvproxy makes, exactly (`do --gpus`;
    /// empty without a GPU)
    pub gpu_ioctls: &'static [u64],
}

/// `clone` flags of a C library thread (`pthread_create`).
const THREAD_CLONE_FLAGS: u64 = (libc::CLONE_VM
    | libc::CLONE_FS
    | libc::CLONE_FILES
    | libc::CLONE_SIGHAND
    | libc::CLONE_THREAD
    | libc::CLONE_SYSVSEM
    | libc::CLONE_SETTLS
    | libc::CLONE_PARENT_SETTID
    | libc::CLONE_CHILD_CLEARTID) as u64;

fn eq(arg: u8, value: u64) -> ArgCheck {
    ArgCheck {
        arg,
        mask: u64::MAX,
        value,
    }
}

/// Allows `nr` when argument `arg` is one of `values` (all 64 bits).
fn one_of(nr: i64, arg: u8, values: &[u64]) -> impl Iterator<Item = Rule> + '_ {
    values
        .iter()
        .map(move |&v| Rule::allow_when(nr, vec![eq(arg, v)]))
}

/// Allows `nr` when `int` argument `arg` is one of `values`.
fn int_one_of(nr: i64, arg: u8, values: &[u64]) -> impl Iterator<Item = Rule> + '_ {
    values
        .iter()
        .map(move |&v| Rule::allow_when(nr, vec![ArgCheck::int_eq(arg, v)]))
}

/// The calls, in the order the filter tries them: the hot paths first
/// (the hand-off with the stubs, I/O on held descriptors, the gofer's
/// socket). The list is what the Sentry was seen to call across the test
/// suite, every platform and network mode included (found with a filter
/// that logged instead of refusing), and nothing more.
pub fn policy(needs: Needs) -> Policy {
    use libc::*;
    let mut rules: Vec<Rule> = [
        SYS_futex,
        SYS_ptrace,
        SYS_wait4,
        SYS_read,
        SYS_write,
        SYS_pread64,
        SYS_pwrite64,
        SYS_recvmsg,
        SYS_sendmsg,
        SYS_recvfrom,
        SYS_sendto,
        SYS_poll,
        SYS_clock_gettime,
        SYS_clock_nanosleep,
        // a sleep or wait the host stopped and continued (^Z, `fg`)
        SYS_restart_syscall,
        SYS_sched_yield,
        SYS_getrandom,
        // memory: the Sentry's own heap and its views of the memory file;
        // the stubs map guest memory and their own code
        SYS_mmap,
        SYS_munmap,
        SYS_mprotect,
        SYS_mremap,
        SYS_madvise,
        SYS_brk,
        // descriptors the Sentry holds (the memory file, files the gofer
        // donated, sockets, the terminal it was given)
        SYS_close,
        SYS_close_range,
        SYS_dup2,
        SYS_fcntl,
        SYS_lseek,
        SYS_getdents64,
        SYS_fsync,
        SYS_ftruncate,
        SYS_fallocate,
        SYS_memfd_create,
        // the control socket of a container (`exec`, `update`)
        SYS_accept4,
        // threads, signals and the stubs
        SYS_rt_sigaction,
        SYS_rt_sigprocmask,
        SYS_rt_sigreturn,
        SYS_rt_sigtimedwait,
        SYS_sigaltstack,
        SYS_tgkill,
        SYS_pidfd_open,
        SYS_pidfd_send_signal,
        SYS_set_robust_list,
        SYS_rseq,
        SYS_gettid,
        SYS_exit,
        SYS_exit_group,
        SYS_sched_getaffinity,
        SYS_sched_setaffinity,
        SYS_prlimit64,
        SYS_pause,
        // a stub's handler on a host without FSGSBASE
        SYS_arch_prctl,
        // a new stub installs its own filter
        SYS_seccomp,
    ]
    .into_iter()
    .filter(|nr| !(needs.no_stubs && [SYS_ptrace, SYS_seccomp, SYS_arch_prctl].contains(nr)))
    .map(Rule::allow)
    .collect();
    // fstat: a descriptor's (AT_EMPTY_PATH), never a path's.
    let empty_path = AT_EMPTY_PATH as u64;
    rules.push(Rule::allow_when(
        SYS_newfstatat,
        vec![ArgCheck {
            arg: 3,
            mask: empty_path,
            value: empty_path,
        }],
    ));
    // Threads of the Sentry, stub threads, and the stubs' own fork into
    // fresh namespaces: nothing else. clone3 passes its flags in memory a
    // filter cannot read; ENOSYS makes the C library fall back to clone.
    rules.extend(one_of(SYS_clone, 0, &[THREAD_CLONE_FLAGS]));
    rules.extend(one_of(SYS_clone, 0, needs.platform_clone_flags));
    rules.push(Rule {
        nr: SYS_clone3,
        checks: Vec::new(),
        action: Action::Errno(ENOSYS),
    });
    rules.extend(int_one_of(
        SYS_prctl,
        0,
        &[
            PR_SET_NAME as u64,
            PR_GET_NAME as u64,
            PR_SET_PDEATHSIG as u64,
            PR_SET_NO_NEW_PRIVS as u64,
        ],
    ));
    // The terminal the Sentry was given (its modes and size, read only),
    // readable byte counts, non-blocking mode.
    rules.extend(int_one_of(
        SYS_ioctl,
        1,
        &[TCGETS, TIOCGWINSZ, FIONREAD, FIONBIO],
    ));
    for &req in needs.platform_ioctls {
        let mut checks = vec![ArgCheck::int_eq(1, req)];
        if let Some((start, len)) = needs.platform_ioctl_fds {
            // (an int: the high half of the register is not the caller's)
            checks.push(ArgCheck {
                arg: 0,
                mask: 0xffff_ffff & !(len - 1),
                value: start,
            });
        }
        rules.push(Rule::allow_when(SYS_ioctl, checks));
    }
    // Unix sockets always (the gofer's, the control socket's peers);
    // TCP and UDP ones when the sandbox reaches the host's network.
    let mut families = vec![AF_UNIX];
    if needs.host_sockets || needs.host_resolver {
        families.extend([AF_INET, AF_INET6]);
    }
    for family in families {
        for kind in [SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET] {
            rules.push(Rule::allow_when(
                SYS_socket,
                vec![
                    ArgCheck::int_eq(0, family as u64),
                    ArgCheck {
                        arg: 1,
                        mask: 0xf,
                        value: kind as u64,
                    },
                ],
            ));
        }
    }
    if needs.host_sockets || needs.host_resolver {
        rules.extend(
            [
                SYS_connect,
                SYS_bind,
                SYS_shutdown,
                SYS_getsockopt,
                SYS_setsockopt,
                SYS_getsockname,
                SYS_getpeername,
                // host sockets wait in one epoll set (made before the
                // filter)
                SYS_epoll_ctl,
                SYS_epoll_wait,
            ]
            .map(Rule::allow),
        );
    }
    if needs.host_listen {
        rules.push(Rule::allow(SYS_listen));
    }
    if needs.host_resolver {
        // Read-only opens: the resolver's files. No O_CREAT, O_TRUNC,
        // write access or O_PATH tricks.
        let writes = (O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND | O_TMPFILE) as u64;
        rules.push(Rule::allow_when(
            SYS_openat,
            vec![ArgCheck {
                arg: 2,
                mask: writes,
                value: 0,
            }],
        ));
        // and looks at them by path (has resolv.conf changed?)
        rules.extend([SYS_uname, SYS_newfstatat, SYS_sendmmsg].map(Rule::allow));
    }
    // The C library looks at a few host files by itself (malloc reads
    // /proc/sys/vm/overcommit_memory before it first shrinks a thread's
    // heap, and /sys/devices/system/cpu/online when it sizes its arenas)
    // and copes when it cannot: an open by path fails with EACCES rather
    // than ending the Sentry. (It still traps for a stub: a trap outranks
    // an errno.)
    for nr in [
        SYS_open,
        SYS_openat,
        SYS_openat2,
        SYS_stat,
        SYS_lstat,
        SYS_access,
        SYS_faccessat,
        SYS_faccessat2,
        SYS_readlink,
        SYS_readlinkat,
        SYS_newfstatat,
        SYS_statx,
    ] {
        rules.push(Rule {
            nr,
            checks: Vec::new(),
            action: Action::Errno(EACCES),
        });
    }
    // nvproxy's requests, each an exact number from the driver's table:
    // last, since the filter tries rules in order and these are a hundred.
    rules.extend(int_one_of(SYS_ioctl, 1, needs.gpu_ioctls));
    Policy {
        rules,
        default: Action::Trap,
    }
}

/// `CAP_NET_BIND_SERVICE`: guest servers on the host's low ports under
/// `--network host`.
pub const CAP_NET_BIND_SERVICE: u32 = 10;

/// Drops the calling thread's capabilities but `keep`: effective, permitted,
/// inheritable, ambient and the bounding set. Threads it starts afterwards
/// inherit that. The Sentry needs none of root's powers once its root,
/// volumes, gofers and namespaces are set up: it acts on descriptors it
/// holds, and its stubs live in user namespaces it owns.
pub fn drop_capabilities(keep: &[u32]) -> Result<(), abi::Errno> {
    let errno = || abi::Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    // The bounding set first: dropping from it takes CAP_SETPCAP.
    for cap in 0..64 {
        if keep.contains(&cap) {
            continue;
        }
        // SAFETY: prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } != 0 {
            match errno() {
                // past the kernel's last capability
                abi::Errno::EINVAL => break,
                // not root: no CAP_SETPCAP to change it with, and nothing
                // to gain from it either (no_new_privs and the filter
                // leave no exec that could use it)
                abi::Errno::EPERM => break,
                e => return Err(e),
            }
        }
    }
    // SAFETY: prctl with integer arguments.
    if unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    } != 0
    {
        return Err(errno());
    }
    /// `struct __user_cap_header_struct`.
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    /// `struct __user_cap_data_struct`.
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut data = [Data::default(); 2];
    for &cap in keep {
        let d = &mut data[(cap / 32) as usize % 2];
        d.effective |= 1 << (cap % 32);
        d.permitted |= 1 << (cap % 32);
    }
    let header = Header {
        // _LINUX_CAPABILITY_VERSION_3: two data structs, 64 capabilities.
        version: 0x2008_0522,
        pid: 0,
    };
    // SAFETY: capset reads one header and two data structs, alive for the
    // call.
    if unsafe { libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) } != 0 {
        return Err(errno());
    }
    Ok(())
}

/// Installs [`policy`] on every thread of the Sentry's process, with a
/// `SIGSYS` handler that names a refused call before the process ends.
pub fn install(needs: Needs) -> Result<(), abi::Errno> {
    // SAFETY: all-zero bytes are a valid `sigaction`; the handler is an
    // `extern "C"` function with the SA_SIGINFO signature that only calls
    // async-signal-safe system calls.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = refused as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO;
        if libc::sigaction(libc::SIGSYS, &act, std::ptr::null_mut()) != 0 {
            return Err(abi::Errno(
                std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
            ));
        }
    }
    policy(needs).install_all_threads()
}

/// The `SIGSYS` handler: the Sentry called something outside its list. That
/// is a bug in the Sentry (or a subverted one): say which call, in one line,
/// and end the sandbox with the status of a failed runtime.
extern "C" fn refused(_sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // `struct siginfo` for SIGSYS: the call's number is the int at byte 24
    // (after signo, errno, code, padding and the call's address).
    // SAFETY: the kernel passes a valid siginfo and ucontext to an
    // SA_SIGINFO handler; the first argument is in the saved %rdi.
    let (nr, arg0) = unsafe {
        (
            info.cast::<u8>().add(24).cast::<i32>().read_unaligned(),
            (*ctx.cast::<libc::ucontext_t>()).uc_mcontext.gregs[libc::REG_RDI as usize] as u64,
        )
    };
    let mut line = [0u8; 192];
    let len = refusal_line(nr, arg0, &mut line);
    // SAFETY: write and exit_group are async-signal-safe raw calls on a
    // live local buffer.
    unsafe {
        libc::write(2, line.as_ptr().cast(), len);
        libc::syscall(libc::SYS_exit_group, 125);
    }
}

/// Writes the refusal message for call `nr` with first argument `arg0`
/// into `buf` without allocating (it runs in a signal handler); returns its
/// length.
fn refusal_line(nr: i32, arg0: u64, buf: &mut [u8; 192]) -> usize {
    const HEAD: &[u8] =
        b"ferrovisor: internal error: the Sentry's seccomp filter refused host system call ";
    const MID: &[u8] = b" (first argument 0x";
    const TAIL: &[u8] = b"; please report it with the command that ran)\n";
    let mut hex = [0u8; 16];
    let mut hex_at = hex.len();
    let mut v = arg0;
    loop {
        hex_at -= 1;
        hex[hex_at] = b"0123456789abcdef"[(v & 0xf) as usize];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    let mut digits = [0u8; 11];
    let mut at = digits.len();
    let mut n = i64::from(nr).unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if nr < 0 {
        at -= 1;
        digits[at] = b'-';
    }
    let mut len = 0;
    for part in [HEAD, &digits[at..], MID, &hex[hex_at..], TAIL] {
        buf[len..len + part.len()].copy_from_slice(part);
        len += part.len();
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALLOW: u32 = 0x7fff_0000;
    const TRAP: u32 = 0x0003_0000;
    const REFUSED: u32 = 0x0005_0000 | libc::EACCES as u32;
    /// A stand-in for a platform's own clone flags.
    const PLATFORM_FLAGS: u64 = (libc::CLONE_NEWUSER | libc::CLONE_PIDFD | libc::SIGCHLD) as u64;

    fn needs() -> Needs {
        Needs {
            platform_clone_flags: &[PLATFORM_FLAGS],
            ..Needs::default()
        }
    }

    fn run(needs: Needs, nr: i64, args: [u64; 6]) -> u32 {
        policy(needs).decide(nr, args).expect("the policy compiles")
    }

    fn call(nr: i64, args: &[u64]) -> u32 {
        let mut a = [0u64; 6];
        a[..args.len()].copy_from_slice(args);
        run(needs(), nr, a)
    }

    #[test]
    fn host_paths_are_out_of_reach() {
        use libc::*;
        for nr in [
            SYS_open,
            SYS_openat,
            SYS_openat2,
            SYS_stat,
            SYS_readlink,
            SYS_access,
        ] {
            assert_eq!(call(nr, &[]), REFUSED, "syscall {nr}");
        }
        // fstat is a descriptor's; a path lookup is refused.
        let empty = AT_EMPTY_PATH as u64;
        assert_eq!(call(SYS_newfstatat, &[3, 0, 0, empty]), ALLOW);
        assert_eq!(call(SYS_newfstatat, &[AT_FDCWD as u64, 0, 0, 0]), REFUSED);
        assert_eq!(call(SYS_statx, &[3, 0, empty]), REFUSED);
        for nr in [
            SYS_execve,
            SYS_execveat,
            SYS_mount,
            SYS_umount2,
            SYS_pivot_root,
            SYS_chroot,
            SYS_unshare,
            SYS_setns,
            SYS_bpf,
            SYS_io_uring_setup,
            SYS_keyctl,
            SYS_perf_event_open,
            SYS_userfaultfd,
            SYS_init_module,
            SYS_finit_module,
            SYS_kexec_load,
            SYS_process_vm_writev,
            SYS_unlinkat,
            SYS_renameat2,
            SYS_mkdirat,
            SYS_symlinkat,
            SYS_fchmodat,
            SYS_setuid,
            SYS_capset,
            SYS_fork,
            SYS_vfork,
            SYS_name_to_handle_at,
            SYS_open_by_handle_at,
        ] {
            assert_eq!(call(nr, &[]), TRAP, "syscall {nr}");
        }
    }

    #[test]
    fn the_calls_the_sentry_makes_pass() {
        use libc::*;
        for nr in [
            SYS_futex,
            SYS_ptrace,
            SYS_wait4,
            SYS_read,
            SYS_write,
            SYS_recvmsg,
            SYS_sendmsg,
            SYS_mmap,
            SYS_munmap,
            SYS_close,
            SYS_rt_sigreturn,
            SYS_exit_group,
            SYS_seccomp,
        ] {
            assert_eq!(call(nr, &[]), ALLOW, "syscall {nr}");
        }
        // Not with another calling convention: x32 numbers and i386 calls.
        let prog = policy(needs()).compile().expect("the policy compiles");
        let mut data = abi::bpf::SeccompData {
            nr: SYS_read as i32 | abi::bpf::X32_SYSCALL_BIT as i32,
            arch: abi::bpf::AUDIT_ARCH_X86_64,
            ..Default::default()
        };
        // (the default: a trap, which in the Sentry ends the sandbox with
        // the call's number, and in a stub reaches the Sentry as the
        // guest's call, answered ENOSYS)
        assert_eq!(
            abi::bpf::run(&prog, &data),
            Some(abi::bpf::SECCOMP_RET_TRAP)
        );
        data.nr = 3; // read on i386
        data.arch = abi::bpf::AUDIT_ARCH_I386;
        assert_eq!(
            abi::bpf::run(&prog, &data),
            Some(abi::bpf::SECCOMP_RET_TRAP)
        );
    }

    #[test]
    fn clone_makes_threads_and_the_platforms_processes_only() {
        use libc::*;
        assert_eq!(call(SYS_clone, &[THREAD_CLONE_FLAGS]), ALLOW);
        assert_eq!(call(SYS_clone, &[PLATFORM_FLAGS]), ALLOW);
        // A plain fork, a thread with one flag more, new namespaces.
        assert_eq!(call(SYS_clone, &[SIGCHLD as u64]), TRAP);
        assert_eq!(
            call(SYS_clone, &[THREAD_CLONE_FLAGS | CLONE_NEWNET as u64]),
            TRAP
        );
        assert_eq!(call(SYS_clone, &[CLONE_NEWUSER as u64]), TRAP);
        // clone3's flags are in memory: ENOSYS sends the C library to clone.
        assert_eq!(call(SYS_clone3, &[]), 0x0005_0000 | ENOSYS as u32);
    }

    #[test]
    fn sockets_are_unix_unless_the_host_network_is_used() {
        use libc::*;
        let sock = |needs: Needs, family: i32, kind: i32| {
            run(needs, SYS_socket, [family as u64, kind as u64, 0, 0, 0, 0])
        };
        let host = Needs {
            host_sockets: true,
            ..needs()
        };
        for n in [needs(), host] {
            assert_eq!(sock(n, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC), ALLOW);
            assert_eq!(sock(n, AF_NETLINK, SOCK_RAW), TRAP);
            assert_eq!(sock(n, AF_PACKET, SOCK_RAW), TRAP);
            assert_eq!(sock(n, AF_INET, SOCK_RAW), TRAP);
        }
        assert_eq!(sock(needs(), AF_INET, SOCK_STREAM), TRAP);
        assert_eq!(call(SYS_connect, &[]), TRAP);
        // Only guest servers on host sockets listen there.
        assert_eq!(run(host, SYS_listen, [0; 6]), TRAP);
        let listening = Needs {
            host_listen: true,
            ..host
        };
        assert_eq!(run(listening, SYS_listen, [0; 6]), ALLOW);
        assert_eq!(sock(host, AF_INET, SOCK_STREAM | SOCK_NONBLOCK), ALLOW);
        assert_eq!(sock(host, AF_INET6, SOCK_DGRAM), ALLOW);
        assert_eq!(run(host, SYS_connect, [0; 6]), ALLOW);
    }

    #[test]
    fn the_resolver_reads_files_but_writes_none() {
        use libc::*;
        let n = Needs {
            host_resolver: true,
            ..needs()
        };
        let open = |flags: i32| run(n, SYS_openat, [AT_FDCWD as u64, 0, flags as u64, 0, 0, 0]);
        assert_eq!(open(O_RDONLY | O_CLOEXEC), ALLOW);
        assert_eq!(open(O_WRONLY), REFUSED);
        assert_eq!(open(O_RDWR), REFUSED);
        assert_eq!(open(O_RDONLY | O_CREAT), REFUSED);
        assert_eq!(open(O_RDONLY | O_TRUNC), REFUSED);
    }

    /// A platform without stubs (KVM) gets its ioctls and loses the
    /// stubs' calls.
    #[test]
    fn a_platform_without_stubs_gets_its_ioctls_and_no_ptrace() {
        use libc::*;
        const KVM_RUN: u64 = 0xae80;
        let kvm = Needs {
            platform_ioctls: &[KVM_RUN],
            platform_ioctl_fds: Some((4096, 1024)),
            no_stubs: true,
            ..Needs::default()
        };
        // On the platform's descriptors only.
        for (fd, want) in [
            (4096, ALLOW),
            (5119, ALLOW),
            (5, TRAP),
            (5120, TRAP),
            (4095, TRAP),
        ] {
            assert_eq!(
                run(kvm, SYS_ioctl, [fd, KVM_RUN, 0, 0, 0, 0]),
                want,
                "fd {fd}"
            );
        }
        assert_eq!(run(needs(), SYS_ioctl, [4096, KVM_RUN, 0, 0, 0, 0]), TRAP);
        for nr in [SYS_ptrace, SYS_seccomp, SYS_arch_prctl] {
            assert_eq!(run(kvm, nr, [0; 6]), TRAP, "{nr}");
            assert_eq!(run(needs(), nr, [0; 6]), ALLOW, "{nr}");
        }
    }

    #[test]
    fn a_gpu_adds_exactly_its_ioctl_requests() {
        use libc::*;
        // _IOWR('F', 0x2a, 32) (NV_ESC_RM_CONTROL) and the same at 24 bytes.
        let (control, wrong_size) = (0xc020_462a_u64, 0xc018_462a_u64);
        let gpu = Needs {
            gpu_ioctls: &[0xc020_462a],
            ..needs()
        };
        assert_eq!(run(gpu, SYS_ioctl, [9, control, 0, 0, 0, 0]), ALLOW);
        assert_eq!(run(gpu, SYS_ioctl, [9, wrong_size, 0, 0, 0, 0]), TRAP);
        assert_eq!(run(needs(), SYS_ioctl, [9, control, 0, 0, 0, 0]), TRAP);
        assert_eq!(run(gpu, SYS_ioctl, [0, TCGETS, 0, 0, 0, 0]), ALLOW);
    }

    #[test]
    fn ioctl_and_prctl_take_a_few_requests() {
        use libc::*;
        // int arguments: the register's high half is not the caller's.
        let dirty = 0xdead_beef_0000_0000;
        assert_eq!(call(SYS_prctl, &[dirty | PR_SET_PDEATHSIG as u64]), ALLOW);
        assert_eq!(call(SYS_ioctl, &[0, dirty | TCGETS]), ALLOW);
        assert_eq!(
            call(SYS_socket, &[dirty | AF_UNIX as u64, SOCK_STREAM as u64]),
            ALLOW
        );
        assert_eq!(call(SYS_ioctl, &[0, TCGETS]), ALLOW);
        assert_eq!(call(SYS_ioctl, &[0, FIONREAD]), ALLOW);
        assert_eq!(call(SYS_ioctl, &[0, TIOCSTI]), TRAP);
        assert_eq!(call(SYS_ioctl, &[0, TIOCSCTTY]), TRAP);
        assert_eq!(call(SYS_prctl, &[PR_SET_NAME as u64]), ALLOW);
        assert_eq!(call(SYS_prctl, &[PR_SET_DUMPABLE as u64]), TRAP);
        assert_eq!(call(SYS_prctl, &[PR_CAPBSET_DROP as u64]), TRAP);
        assert_eq!(call(SYS_prctl, &[PR_SET_MM as u64]), TRAP);
    }

    /// ARCHITECTURE.md's target: at most 70 host calls, in every mode.
    #[test]
    fn at_most_seventy_calls_in_any_mode() {
        let modes = [
            ("none", needs()),
            (
                "host",
                Needs {
                    host_sockets: true,
                    host_listen: true,
                    ..needs()
                },
            ),
            (
                "egress",
                Needs {
                    host_sockets: true,
                    host_resolver: true,
                    ..needs()
                },
            ),
        ];
        for (name, n) in modes {
            let allowed = policy(n).allowed_calls();
            eprintln!("{name}: {allowed} calls");
            assert!(allowed <= 70, "{name}: {allowed} calls");
        }
    }

    #[test]
    fn the_refusal_names_the_call() {
        let mut buf = [0u8; 192];
        for (nr, arg0, text) in [
            (257, 0xffff_ff9c, "257 (first argument 0xffffff9c"),
            (0, 0, "0 (first argument 0x0"),
            (-1, u64::MAX, "-1 (first argument 0xffffffffffffffff"),
            (i32::MAX, 0x10, "2147483647 (first argument 0x10"),
        ] {
            let len = refusal_line(nr, arg0, &mut buf);
            let line = std::str::from_utf8(&buf[..len]).expect("ascii");
            assert_eq!(
                line,
                format!("ferrovisor: internal error: the Sentry's seccomp filter refused host system call {text}; please report it with the command that ran)\n")
            );
        }
    }
}
