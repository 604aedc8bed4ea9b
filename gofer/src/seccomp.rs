//! Seccomp allow-lists as data, compiled to classic BPF with
//! [`abi::bpf`]'s assembler.
//!
//! A [`Policy`] is a list of [`Rule`]s (a syscall number, argument checks and
//! the action taken when they hold) and a default action. The compiled
//! program first kills any call not made with the x86-64 ABI (an x32 or i386
//! syscall number would otherwise name a different call), then tries the
//! rules in order. [`Policy::decide`] runs a program in user space, so
//! policies are tested without installing them.

use abi::bpf::{
    self, Assembler, SeccompData, SockFilter, Target::Next, AUDIT_ARCH_X86_64, SECCOMP_RET_ALLOW,
    SECCOMP_RET_DATA, SECCOMP_RET_ERRNO, SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_LOG,
    SECCOMP_RET_TRAP, X32_SYSCALL_BIT,
};
use abi::Errno;

pub use abi::bpf::AsmError;

/// What the kernel does with a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// let it through
    Allow,
    /// fail it with this errno (used where a fallback exists)
    Errno(i32),
    /// kill the whole process: a call nobody planned for is a bug or an
    /// attack, and the gofer must fail loudly
    KillProcess,
    /// deliver `SIGSYS` (the call does not happen); unlike a kill, this
    /// ranks below nothing a stacked filter of a child process asks for
    /// but a kill, so a child's own trap handler still sees its calls
    Trap,
    /// let it through and log it to the kernel log (for finding out what a
    /// process calls, never in a policy that enforces)
    Log,
}

impl Action {
    /// The `SECCOMP_RET_*` value.
    pub fn ret(self) -> u32 {
        match self {
            Action::Allow => SECCOMP_RET_ALLOW,
            Action::Errno(e) => SECCOMP_RET_ERRNO | (e as u32 & SECCOMP_RET_DATA),
            Action::KillProcess => SECCOMP_RET_KILL_PROCESS,
            Action::Trap => SECCOMP_RET_TRAP,
            Action::Log => SECCOMP_RET_LOG,
        }
    }
}

/// `(args[arg] & mask) == value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgCheck {
    /// argument index, 0..6
    pub arg: u8,
    /// bits compared
    pub mask: u64,
    /// expected value of those bits
    pub value: u64,
}

/// One allow-list entry: taken if the number matches and every check holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// x86-64 syscall number
    pub nr: i64,
    /// all must hold
    pub checks: Vec<ArgCheck>,
    /// what happens then
    pub action: Action,
}

impl ArgCheck {
    /// An `int` argument equals `value`: the kernel reads only the low 32
    /// bits of the register, and a caller (a variadic `syscall(2)` above
    /// all) may leave anything in the high ones.
    pub fn int_eq(arg: u8, value: u64) -> ArgCheck {
        ArgCheck {
            arg,
            mask: 0xffff_ffff,
            value: value & 0xffff_ffff,
        }
    }
}

impl Rule {
    /// Allows `nr` when every one of `checks` holds.
    pub fn allow_when(nr: i64, checks: Vec<ArgCheck>) -> Rule {
        Rule {
            nr,
            checks,
            action: Action::Allow,
        }
    }

    /// Allows `nr` whatever its arguments.
    pub fn allow(nr: i64) -> Rule {
        Rule {
            nr,
            checks: Vec::new(),
            action: Action::Allow,
        }
    }

    /// Allows `nr` when `(args[arg] & mask) == value`.
    pub fn allow_if(nr: i64, arg: u8, mask: u64, value: u64) -> Rule {
        Rule {
            nr,
            checks: vec![ArgCheck { arg, mask, value }],
            action: Action::Allow,
        }
    }
}

/// A filter before compilation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// tried in order
    pub rules: Vec<Rule>,
    /// for calls no rule matches
    pub default: Action,
}

/// Why a policy does not compile.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CompileError {
    /// an argument index over 5
    #[error("argument index {0} out of range")]
    BadArg(u8),
    /// a negative or x32 syscall number
    #[error("bad syscall number {0}")]
    BadNr(i64),
    /// the program is one the kernel would not load (a rule's body too
    /// long for an 8-bit jump, more than `BPF_MAXINSNS` instructions)
    #[error("{0}")]
    Asm(#[from] AsmError),
}

impl Policy {
    /// How many calls the policy lets through, under some condition.
    pub fn allowed_calls(&self) -> usize {
        let mut nrs: Vec<i64> = self
            .rules
            .iter()
            .filter(|r| r.action == Action::Allow)
            .map(|r| r.nr)
            .collect();
        nrs.sort_unstable();
        nrs.dedup();
        nrs.len()
    }

    /// Compiles to classic BPF.
    pub fn compile(&self) -> Result<Vec<SockFilter>, CompileError> {
        // Another calling convention (i386, x32) gets the default action:
        // its numbers mean other calls, so no rule may match them.
        let kill = self.default.ret();
        let mut a = Assembler::new();
        let x86_64 = a.label("x86-64");
        a.load_arch();
        a.jeq(AUDIT_ARCH_X86_64, x86_64, Next);
        a.ret(kill);
        a.bind(x86_64);
        let native = a.label("native number");
        a.load_nr();
        a.jge(X32_SYSCALL_BIT, Next, native);
        a.ret(kill);
        a.bind(native);
        for rule in &self.rules {
            let nr = u32::try_from(rule.nr)
                .ok()
                .filter(|&n| n < X32_SYSCALL_BIT)
                .ok_or(CompileError::BadNr(rule.nr))?;
            // Every rule reloads the number: argument checks clobber A.
            // Each check that fails goes on to the next rule.
            let next = a.label("next rule");
            a.load_nr();
            a.jeq(nr, Next, next);
            for c in &rule.checks {
                if c.arg > 5 {
                    return Err(CompileError::BadArg(c.arg));
                }
                let arg = usize::from(c.arg);
                for high in [false, true] {
                    let shift = if high { 32 } else { 0 };
                    let mask = (c.mask >> shift) as u32;
                    let value = (c.value >> shift) as u32;
                    if mask == 0 {
                        continue;
                    }
                    if high {
                        a.load_arg_high(arg);
                    } else {
                        a.load_arg_low(arg);
                    }
                    if mask != u32::MAX {
                        a.and(mask);
                    }
                    a.jeq(value & mask, Next, next);
                }
            }
            a.ret(rule.action.ret());
            a.bind(next);
        }
        a.ret(self.default.ret());
        Ok(a.finish()?)
    }

    /// Compiles and installs the filter on the calling thread (and the
    /// threads it later creates), setting `no_new_privs` first as the kernel
    /// requires of an unprivileged caller.
    pub fn install(&self) -> Result<(), Errno> {
        self.install_with(0)
    }

    /// As [`Policy::install`], on every thread of the process at once
    /// (`SECCOMP_FILTER_FLAG_TSYNC`): no thread is left unfiltered.
    pub fn install_all_threads(&self) -> Result<(), Errno> {
        self.install_with(libc::SECCOMP_FILTER_FLAG_TSYNC)
    }

    fn install_with(&self, flags: libc::c_ulong) -> Result<(), Errno> {
        let prog = self.compile().map_err(|_| Errno::EINVAL)?;
        let mut filter: Vec<libc::sock_filter> = prog
            .iter()
            .map(|i| libc::sock_filter {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
            .collect();
        let fprog = libc::sock_fprog {
            len: u16::try_from(filter.len()).map_err(|_| Errno::EINVAL)?,
            filter: filter.as_mut_ptr(),
        };
        crate::sys::set_no_new_privs()?;
        // SAFETY: `fprog` points at `len` valid instructions, alive for the
        // call; the kernel copies the program.
        let r = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                flags,
                &fprog as *const libc::sock_fprog,
            )
        };
        match r {
            0 => Ok(()),
            // With TSYNC, a positive value is a thread that could not take
            // the filter (it has a diverging one of its own).
            r if r > 0 => Err(Errno::EBUSY),
            _ => Err(crate::sys::errno()),
        }
    }
}

impl Policy {
    /// What the compiled filter answers to x86-64 call `nr` with `args`
    /// (a `SECCOMP_RET_*` value), worked out in user space.
    pub fn decide(&self, nr: i64, args: [u64; 6]) -> Result<u32, CompileError> {
        let prog = self.compile()?;
        let data = SeccompData {
            nr: nr as i32,
            arch: AUDIT_ARCH_X86_64,
            instruction_pointer: 0,
            args,
        };
        // The assembler makes only programs the interpreter runs through.
        Ok(bpf::run(&prog, &data).unwrap_or(Action::KillProcess.ret()))
    }
}

/// The gofer server's allow-list: the file calls of [`crate::server`],
/// socket I/O on its connection, memory management without `PROT_EXEC`, and
/// exit. In read-only mode no call that modifies a file is allowed at all,
/// `openat` only without write access, `O_CREAT` or `O_TRUNC`, and `openat2`
/// (whose flags a filter cannot see) fails with ENOSYS so the server falls
/// back to `openat`. `mknodat` can make only regular files, FIFOs and
/// (unbound) socket inodes.
/// inotify watches (for volumes the guest watches) are allowed only with
/// `IN_DONT_FOLLOW`, and `fchdir` (to a held descriptor) is what makes
/// their path relative to an object the gofer already holds.
pub fn gofer_policy(read_only: bool) -> Policy {
    use libc::*;
    const EXEC: u64 = PROT_EXEC as u64;
    let mut rules = vec![
        Rule::allow(SYS_recvmsg),
        Rule::allow(SYS_sendmsg),
        Rule::allow_if(SYS_write, 0, u64::MAX, 2), // logs to stderr
        Rule::allow(SYS_close),
        Rule::allow(SYS_statx),
        Rule::allow(SYS_fstatfs),
        Rule::allow(SYS_getdents64),
        Rule::allow(SYS_lseek),
        Rule::allow(SYS_readlinkat),
        Rule::allow(SYS_fgetxattr),
        Rule::allow(SYS_flistxattr),
        Rule::allow(SYS_fsync),
        // F_GETFD: std's descriptor-ownership debug checks.
        Rule::allow_if(SYS_fcntl, 1, u64::MAX, F_GETFD as u64),
        Rule::allow_if(SYS_fcntl, 1, u64::MAX, F_GETFL as u64),
        Rule::allow_if(SYS_fcntl, 1, u64::MAX, F_SETFL as u64),
        Rule::allow_if(SYS_mmap, 2, EXEC, 0),
        Rule::allow_if(SYS_mprotect, 2, EXEC, 0),
        Rule::allow(SYS_munmap),
        Rule::allow(SYS_mremap),
        Rule::allow(SYS_madvise),
        Rule::allow(SYS_brk),
        Rule::allow(SYS_futex),
        Rule::allow(SYS_getrandom),
        Rule::allow(SYS_sched_yield),
        // Follow: the serving thread itself (pid 0), never another.
        Rule::allow_if(SYS_sched_setaffinity, 0, u64::MAX, 0),
        Rule::allow(SYS_clock_gettime),
        Rule::allow(SYS_rt_sigreturn),
        Rule::allow(SYS_rt_sigprocmask),
        Rule::allow(SYS_sigaltstack),
        Rule::allow(SYS_exit),
        Rule::allow(SYS_exit_group),
        // host watches on volume objects (`WatchInit`, `AddWatch`): one
        // non-blocking instance; watches never follow a symlink, and take
        // their path relative to a held directory the gofer moves into
        Rule::allow_if(
            SYS_inotify_init1,
            0,
            u64::MAX,
            (IN_NONBLOCK | IN_CLOEXEC) as u64,
        ),
        Rule::allow_if(
            SYS_inotify_add_watch,
            2,
            IN_DONT_FOLLOW as u64,
            IN_DONT_FOLLOW as u64,
        ),
        Rule::allow(SYS_inotify_rm_watch),
        Rule::allow(SYS_fchdir),
    ];
    if read_only {
        let forbidden = (O_ACCMODE | O_CREAT | O_TRUNC) as u64;
        rules.push(Rule::allow_if(SYS_openat, 2, forbidden, 0));
        rules.push(Rule {
            nr: SYS_openat2,
            checks: Vec::new(),
            action: Action::Errno(ENOSYS),
        });
    } else {
        rules.extend(
            [
                SYS_openat,
                SYS_openat2,
                SYS_mkdirat,
                SYS_symlinkat,
                SYS_linkat,
                SYS_unlinkat,
                SYS_renameat2,
                SYS_fchownat,
                SYS_fchmodat2,
                SYS_fchmod,
                SYS_utimensat,
                SYS_ftruncate,
                SYS_fsetxattr,
                SYS_fremovexattr,
            ]
            .map(Rule::allow),
        );
        for kind in [S_IFREG, S_IFIFO, S_IFSOCK] {
            rules.push(Rule::allow_if(
                SYS_mknodat,
                2,
                u64::from(S_IFMT),
                u64::from(kind),
            ));
        }
    }
    Policy {
        rules,
        default: Action::KillProcess,
    }
}

/// The policy of the jail's first process, which only waits for the server
/// and exits with its status.
pub fn waiter_policy() -> Policy {
    use libc::*;
    Policy {
        rules: [
            SYS_wait4,
            SYS_exit,
            SYS_exit_group,
            SYS_rt_sigreturn,
            SYS_restart_syscall,
        ]
        .map(Rule::allow)
        .to_vec(),
        default: Action::KillProcess,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(p: &Policy, nr: i64, args: [u64; 6]) -> u32 {
        p.decide(nr, args).expect("compile")
    }

    const ALLOW: u32 = 0x7fff_0000;
    const KILL: u32 = 0x8000_0000;

    #[test]
    fn gofer_policy_allows_file_calls_and_kills_the_rest() {
        let p = gofer_policy(false);
        assert_eq!(run(&p, libc::SYS_statx, [0; 6]), ALLOW);
        assert_eq!(run(&p, libc::SYS_openat2, [0; 6]), ALLOW);
        for nr in [
            libc::SYS_execve,
            libc::SYS_socket,
            libc::SYS_connect,
            libc::SYS_ptrace,
            libc::SYS_open,
            libc::SYS_mount,
            libc::SYS_clone,
            libc::SYS_kill,
            libc::SYS_ioctl,
        ] {
            assert_eq!(run(&p, nr, [0; 6]), KILL, "syscall {nr}");
        }
        // Executable memory is refused.
        let exec = libc::PROT_EXEC as u64;
        assert_eq!(run(&p, libc::SYS_mmap, [0, 4096, 3, 0, 0, 0]), ALLOW);
        assert_eq!(run(&p, libc::SYS_mmap, [0, 4096, exec | 1, 0, 0, 0]), KILL);
        assert_eq!(run(&p, libc::SYS_mprotect, [0, 4096, exec, 0, 0, 0]), KILL);
        // Only regular files, FIFOs and socket inodes.
        let m = |t: u32| u64::from(t | 0o644);
        assert_eq!(
            run(&p, libc::SYS_mknodat, [0, 0, m(libc::S_IFSOCK), 0, 0, 0]),
            ALLOW
        );
        assert_eq!(
            run(&p, libc::SYS_mknodat, [0, 0, m(libc::S_IFIFO), 0, 0, 0]),
            ALLOW
        );
        assert_eq!(
            run(&p, libc::SYS_mknodat, [0, 0, m(libc::S_IFREG), 0, 0, 0]),
            ALLOW
        );
        assert_eq!(
            run(&p, libc::SYS_mknodat, [0, 0, m(libc::S_IFCHR), 0, 0, 0]),
            KILL
        );
        assert_eq!(
            run(&p, libc::SYS_mknodat, [0, 0, m(libc::S_IFBLK), 0, 0, 0]),
            KILL
        );
        // Writes only to stderr; fcntl only F_GETFL/F_SETFL.
        assert_eq!(run(&p, libc::SYS_write, [2, 0, 0, 0, 0, 0]), ALLOW);
        let dont_follow = libc::IN_DONT_FOLLOW as u64;
        assert_eq!(
            run(
                &p,
                libc::SYS_inotify_add_watch,
                [3, 0, 0x2 | dont_follow, 0, 0, 0]
            ),
            ALLOW
        );
        assert_eq!(
            run(&p, libc::SYS_inotify_add_watch, [3, 0, 0x2, 0, 0, 0]),
            KILL
        );
        let nb = (libc::IN_NONBLOCK | libc::IN_CLOEXEC) as u64;
        assert_eq!(run(&p, libc::SYS_inotify_init1, [nb, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(run(&p, libc::SYS_inotify_init1, [0, 0, 0, 0, 0, 0]), KILL);
        assert_eq!(run(&p, libc::SYS_chdir, [0; 6]), KILL);
        assert_eq!(run(&p, libc::SYS_write, [1, 0, 0, 0, 0, 0]), KILL);
        assert_eq!(run(&p, libc::SYS_write, [2 | 1 << 32, 0, 0, 0, 0, 0]), KILL);
        assert_eq!(
            run(&p, libc::SYS_fcntl, [3, libc::F_SETFL as u64, 0, 0, 0, 0]),
            ALLOW
        );
        assert_eq!(
            run(&p, libc::SYS_fcntl, [3, libc::F_SETOWN as u64, 0, 0, 0, 0]),
            KILL
        );
    }

    #[test]
    fn read_only_policy_refuses_modifications() {
        let p = gofer_policy(true);
        let o = |f: i32| [0, 0, f as u64, 0, 0, 0];
        assert_eq!(
            run(&p, libc::SYS_openat, o(libc::O_PATH | libc::O_NOFOLLOW)),
            ALLOW
        );
        assert_eq!(
            run(&p, libc::SYS_openat, o(libc::O_RDONLY | libc::O_DIRECTORY)),
            ALLOW
        );
        assert_eq!(run(&p, libc::SYS_openat, o(libc::O_WRONLY)), KILL);
        assert_eq!(run(&p, libc::SYS_openat, o(libc::O_RDWR)), KILL);
        assert_eq!(run(&p, libc::SYS_openat, o(libc::O_CREAT)), KILL);
        assert_eq!(run(&p, libc::SYS_openat, o(libc::O_TRUNC)), KILL);
        assert_eq!(
            run(&p, libc::SYS_openat2, [0; 6]),
            Action::Errno(libc::ENOSYS).ret()
        );
        for nr in [
            libc::SYS_unlinkat,
            libc::SYS_renameat2,
            libc::SYS_mkdirat,
            libc::SYS_mknodat,
            libc::SYS_fsetxattr,
            libc::SYS_ftruncate,
        ] {
            assert_eq!(run(&p, nr, [0; 6]), KILL, "syscall {nr}");
        }
    }

    #[test]
    fn foreign_abis_are_killed() {
        let prog = gofer_policy(false).compile().expect("compile");
        let mut d = SeccompData {
            nr: libc::SYS_statx as i32,
            arch: abi::bpf::AUDIT_ARCH_I386,
            ..SeccompData::default()
        };
        assert_eq!(bpf::run(&prog, &d), Some(KILL));
        d.arch = AUDIT_ARCH_X86_64;
        assert_eq!(bpf::run(&prog, &d), Some(ALLOW));
        d.nr = (X32_SYSCALL_BIT as i32) | libc::SYS_statx as i32;
        assert_eq!(bpf::run(&prog, &d), Some(KILL));
    }

    #[test]
    fn compile_rejects_bad_rules() {
        let p = Policy {
            rules: vec![Rule::allow_if(1, 6, 1, 1)],
            default: Action::KillProcess,
        };
        assert_eq!(p.compile(), Err(CompileError::BadArg(6)));
        let p = Policy {
            rules: vec![Rule::allow(-1)],
            default: Action::KillProcess,
        };
        assert_eq!(p.compile(), Err(CompileError::BadNr(-1)));
    }
}
