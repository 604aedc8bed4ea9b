//! The stub's seccomp filter, written with [`abi::bpf`]'s assembler: the
//! one program the stub installs, in its two modes.
//!
//! The filter is the isolation boundary if tracing ever fails: a system call
//! from anywhere but the trampoline's single `syscall` instruction kills the
//! stub, and from the trampoline only what syscall injection needs passes.

pub use abi::bpf::SockFilter;
use abi::bpf::{AsmError, Assembler, Target::Next};

/// `SECCOMP_RET_KILL_PROCESS`: the whole stub dies of SIGSYS.
pub const RET_KILL_PROCESS: u32 = abi::bpf::SECCOMP_RET_KILL_PROCESS;
/// `SECCOMP_RET_ALLOW`.
pub const RET_ALLOW: u32 = abi::bpf::SECCOMP_RET_ALLOW;
/// `SECCOMP_RET_TRAP`: the call is not made; the thread gets SIGSYS.
pub const RET_TRAP: u32 = abi::bpf::SECCOMP_RET_TRAP;
/// `AUDIT_ARCH_X86_64`.
pub const AUDIT_ARCH_X86_64: u32 = abi::bpf::AUDIT_ARCH_X86_64;

/// `MAP_SHARED | MAP_FIXED`: the only mmap flags injection uses.
pub const INJECTED_MMAP_FLAGS: u32 = (libc::MAP_SHARED | libc::MAP_FIXED) as u32;

/// Where the stub's `syscall` instructions are, as the kernel reports them
/// to seccomp (`instruction_pointer`: the address right after each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StubIps {
    /// the trampoline used for injected memory calls and thread exit
    pub trampoline: u64,
    /// the clone trampoline
    pub clone: u64,
    /// the park loop's `pause`
    pub park: u64,
}

/// The stub's filter; `memfd` is the stub's memory-file descriptor.
///
/// Allowed, each only from its own `syscall` instruction:
/// * trampoline: `mmap` with exactly `MAP_SHARED|MAP_FIXED` on the memory
///   file (so no anonymous memory, no other descriptor — there are none
///   anyway); `munmap`, `mprotect`; `exit` (one thread, never the group);
/// * clone trampoline: `clone` with exactly
///   [`crate::stub::STUB_THREAD_CLONE_FLAGS`] (a plain thread: no new
///   namespaces, no TLS or tid pointers, no exit signal, not traced);
/// * park loop: `pause`.
///
/// Everything else, including x32 numbers and foreign architectures, kills
/// the process. A hostile guest can jump to any of these instructions with
/// registers of its choosing, so what passes here is what it could reach;
/// none of it names a host object other than the memory file.
pub fn stub_filter(ips: &StubIps, memfd: u32) -> Vec<SockFilter> {
    // The program is fixed; it assembles or this crate is broken (tested).
    filter(ips, None, memfd).unwrap_or_else(|e| panic!("stub filter does not assemble: {e}"))
}

/// The seccomp-trap handler's `syscall` instructions, as seccomp sees them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrapIps {
    /// the runner clone trampoline
    pub runner_clone: u64,
    /// the handler's `futex`
    pub futex: u64,
    /// the handler's `rt_sigreturn`
    pub sigreturn: u64,
    /// the handler's `arch_prctl`
    pub arch_prctl: u64,
    /// a new runner's `seccomp`, which adds [`runner_filter`]
    pub runner_seccomp: u64,
    /// the address of the runner filter's `sock_fprog` (in the data page)
    pub runner_fprog: u64,
}

/// The stub's filter in seccomp-trap mode. Like [`stub_filter`] for the
/// trampolines, except that a call from anywhere but the stub's own
/// `syscall` instructions *traps* (`SECCOMP_RET_TRAP`: SIGSYS to the
/// stub's handler, which hands the call to the Sentry; the host never runs
/// it). Added, each only from its own instruction in the handler:
/// * runner clone trampoline: `clone` with the same fixed flags;
/// * `futex` with op `FUTEX_WAIT` (0) or `FUTEX_WAKE` (1) (shared, no
///   timeout semantics beyond what the guest could get by spinning) on a
///   slot's state word: inside the slot region, at offset 0 of a slot;
///   and `sched_yield` from the same instruction (the handler's other way
///   to wait);
/// * `rt_sigreturn` (the guest could only forge its own registers, signal
///   mask and signal stack, all of which it owns);
/// * `arch_prctl` with `ARCH_SET_FS` or `ARCH_SET_GS` (its own TLS bases).
///
/// * runner `seccomp`: `SECCOMP_SET_MODE_FILTER`, no flags, with the
///   runner filter's own `sock_fprog` (see [`runner_filter`]).
///
/// A call from a stub instruction that breaks its rules kills the stub. A
/// foreign architecture's call (`int $0x80`) traps like any guest call; the
/// platform reports it as no call the Sentry knows.
pub fn trap_filter(ips: &StubIps, trap: &TrapIps, memfd: u32) -> Vec<SockFilter> {
    filter(ips, Some(trap), memfd).unwrap_or_else(|e| panic!("trap filter does not assemble: {e}"))
}

fn filter(ips: &StubIps, trap: Option<&TrapIps>, memfd: u32) -> Result<Vec<SockFilter>, AsmError> {
    let high = (ips.trampoline >> 32) as u32;
    assert!(
        (ips.clone >> 32) as u32 == high && (ips.park >> 32) as u32 == high,
        "stub syscalls must share the upper half of their address"
    );
    if let Some(t) = trap {
        for ip in [
            t.runner_clone,
            t.futex,
            t.sigreturn,
            t.arch_prctl,
            t.runner_seccomp,
        ] {
            assert_eq!(
                (ip >> 32) as u32,
                high,
                "stub syscalls share the upper half"
            );
        }
    }
    let mut a = Assembler::new();
    let kill = a.label("kill");
    let allow = a.label("allow");
    let trampoline = a.label("trampoline");
    let clone = a.label("clone");
    let park = a.label("park");
    let futex = a.label("futex");
    let sigreturn = a.label("sigreturn");
    let arch_prctl = a.label("arch_prctl");
    let trapped = a.label("trap");
    let runner_seccomp = a.label("runner_seccomp");
    // Outside the stub: kill (SYSEMU mode: never reached while traced) or
    // trap (seccomp-trap mode: the guest's own system calls).
    let outside = if trap.is_some() { trapped } else { kill };
    let flags = crate::stub::STUB_THREAD_CLONE_FLAGS;
    a.load_arch();
    // A 32-bit call (`int $0x80`) can only come from guest code (the stub
    // has none): in seccomp-trap mode it traps too, and the Sentry answers
    // ENOSYS, as on the ptrace platform.
    a.jeq(AUDIT_ARCH_X86_64, Next, outside);
    a.load_ip_high();
    a.jeq(high, Next, outside);
    a.load_ip_low();
    a.jeq(ips.trampoline as u32, trampoline, Next);
    a.jeq(ips.clone as u32, clone, Next);
    if let Some(t) = trap {
        a.jeq(t.runner_clone as u32, clone, Next);
        a.jeq(t.futex as u32, futex, Next);
        a.jeq(t.sigreturn as u32, sigreturn, Next);
        a.jeq(t.arch_prctl as u32, arch_prctl, Next);
        a.jeq(t.runner_seccomp as u32, runner_seccomp, Next);
    }
    a.jeq(ips.park as u32, park, outside);

    a.bind(trampoline);
    a.load_nr();
    a.jeq(libc::SYS_munmap as u32, allow, Next);
    a.jeq(libc::SYS_mprotect as u32, allow, Next);
    a.jeq(libc::SYS_exit as u32, allow, Next);
    a.jeq(libc::SYS_mmap as u32, Next, kill);
    // mmap(addr, len, prot, flags, fd, off): flags is a full 64-bit
    // argument, fd is truncated to int by the kernel.
    a.load_arg_low(3);
    a.jeq(INJECTED_MMAP_FLAGS, Next, kill);
    a.load_arg_high(3);
    a.jeq(0, Next, kill);
    a.load_arg_low(4);
    a.jeq(memfd, allow, Next);
    // (a restored image's pages, open read-only: no writable mapping)
    a.jeq(crate::stub::STUB_BASEFD as u32, allow, kill);

    a.bind(clone);
    a.load_nr();
    a.jeq(libc::SYS_clone as u32, Next, kill);
    // The kernel reads only the low half of clone's flags; both halves
    // are checked anyway.
    a.load_arg_low(0);
    a.jeq(flags as u32, Next, kill);
    a.load_arg_high(0);
    a.jeq((flags >> 32) as u32, allow, kill);

    a.bind(park);
    a.load_nr();
    a.jeq(libc::SYS_pause as u32, allow, kill);

    if let Some(t) = trap {
        let slots = crate::stub::SLOTS_BASE;
        let end = slots + crate::stub::SLOTS_LEN;
        assert_eq!(slots >> 32, (end - 1) >> 32, "slot region crosses 4 GiB");
        a.bind(futex);
        a.load_nr();
        a.jeq(libc::SYS_sched_yield as u32, allow, Next);
        a.jeq(libc::SYS_futex as u32, Next, kill);
        // op: FUTEX_WAIT or FUTEX_WAKE, nothing in the upper half.
        a.load_arg_high(1);
        a.jeq(0, Next, kill);
        a.load_arg_low(1);
        a.jge(2, kill, Next);
        // uaddr: a slot's state word.
        a.load_arg_high(0);
        a.jeq((slots >> 32) as u32, Next, kill);
        a.load_arg_low(0);
        a.jge(slots as u32, Next, kill);
        a.jge(end as u32, kill, Next);
        a.and((crate::stub::SLOT_SIZE - 1) as u32);
        a.jeq(crate::stub::H_STATE as u32, allow, kill);

        a.bind(sigreturn);
        a.load_nr();
        a.jeq(libc::SYS_rt_sigreturn as u32, allow, kill);

        a.bind(arch_prctl);
        a.load_nr();
        a.jeq(libc::SYS_arch_prctl as u32, Next, kill);
        a.load_arg_high(0);
        a.jeq(0, Next, kill);
        a.load_arg_low(0);
        a.jeq(crate::stub::ARCH_SET_FS as u32, allow, Next);
        a.jeq(crate::stub::ARCH_SET_GS as u32, allow, kill);

        a.bind(runner_seccomp);
        a.load_nr();
        a.jeq(libc::SYS_seccomp as u32, Next, kill);
        for (arg, want) in [(0, SECCOMP_SET_MODE_FILTER), (1, 0), (2, t.runner_fprog)] {
            a.load_arg_low(arg);
            a.jeq(want as u32, Next, kill);
            a.load_arg_high(arg);
            if arg == 2 {
                a.jeq((want >> 32) as u32, allow, kill);
            } else {
                a.jeq((want >> 32) as u32, Next, kill);
            }
        }

        a.bind(trapped);
        a.ret(RET_TRAP);
    }
    a.bind(kill);
    a.ret(RET_KILL_PROCESS);
    a.bind(allow);
    a.ret(RET_ALLOW);
    a.finish()
}

/// `SECCOMP_SET_MODE_FILTER`.
const SECCOMP_SET_MODE_FILTER: u64 = 1;

/// The second filter of every runner (a thread that runs guest code in
/// seccomp-trap mode), added before it first runs the guest. The stub's
/// filter lets the trampolines through for the stub threads the Sentry
/// drives; guest code could jump there too and map the memory file (every
/// process's pages) or change protections. From a runner those calls trap
/// instead, to the Sentry as the guest's own calls (as the ptrace platform
/// sees any `syscall` instruction), except the trampoline's `exit`, its way
/// out. Everything else passes on to the stub's filter, which decides.
pub fn runner_filter(ips: &StubIps, trap: &TrapIps) -> Vec<SockFilter> {
    runner(ips, trap).unwrap_or_else(|e| panic!("runner filter does not assemble: {e}"))
}

fn runner(ips: &StubIps, trap: &TrapIps) -> Result<Vec<SockFilter>, AsmError> {
    let mut a = Assembler::new();
    let allow = a.label("allow");
    let trapped = a.label("trap");
    let trampoline = a.label("trampoline");
    a.load_arch();
    a.jeq(AUDIT_ARCH_X86_64, Next, allow);
    a.load_ip_high();
    a.jeq((ips.trampoline >> 32) as u32, Next, allow);
    a.load_ip_low();
    a.jeq(ips.trampoline as u32, trampoline, Next);
    for ip in [ips.clone, ips.park, trap.runner_clone, trap.runner_seccomp] {
        a.jeq(ip as u32, trapped, Next);
    }
    a.ret(RET_ALLOW);
    a.bind(trampoline);
    a.load_nr();
    a.jeq(libc::SYS_exit as u32, allow, trapped);
    a.bind(trapped);
    a.ret(RET_TRAP);
    a.bind(allow);
    a.ret(RET_ALLOW);
    a.finish()
}

#[cfg(test)]
mod tests_support {
    use super::*;

    /// What the kernel answers for call `nr` made with `arch` from `ip`.
    pub(super) fn run(prog: &[SockFilter], nr: u32, arch: u32, ip: u64, args: [u64; 6]) -> u32 {
        let data = abi::bpf::SeccompData {
            nr: nr as i32,
            arch,
            instruction_pointer: ip,
            args,
        };
        abi::bpf::run(prog, &data).expect("a program the kernel loads")
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::run;
    use super::*;

    const IP: u64 = 0x7fff_ffe0_0002;
    const CLONE_IP: u64 = 0x7fff_ffe0_0005;
    const PARK_IP: u64 = 0x7fff_ffe0_0012;
    const IPS: StubIps = StubIps {
        trampoline: IP,
        clone: CLONE_IP,
        park: PARK_IP,
    };
    const X86: u32 = AUDIT_ARCH_X86_64;
    const THREAD: u64 = crate::stub::STUB_THREAD_CLONE_FLAGS;

    fn mmap_args(flags: u64, fd: u64) -> [u64; 6] {
        [0x10000, 0x1000, 3, flags, fd, 0]
    }

    #[test]
    fn trampoline_mm_calls_pass() {
        let p = stub_filter(&IPS, 3);
        let ok = mmap_args(INJECTED_MMAP_FLAGS.into(), 3);
        assert_eq!(run(&p, 9, X86, IP, ok), RET_ALLOW);
        assert_eq!(run(&p, 11, X86, IP, [0; 6]), RET_ALLOW);
        assert_eq!(run(&p, 10, X86, IP, [0; 6]), RET_ALLOW);
    }

    #[test]
    fn calls_outside_the_trampoline_die() {
        let p = stub_filter(&IPS, 3);
        for ip in [IP - 2, IP + 1, IP + 0x1_0000_0000, 0x401000] {
            assert_eq!(run(&p, 11, X86, ip, [0; 6]), RET_KILL_PROCESS, "{ip:#x}");
        }
    }

    #[test]
    fn other_calls_and_arches_die() {
        let p = stub_filter(&IPS, 3);
        for nr in [0, 1, 34, 39, 56, 57, 59, 62, 231, 257, 317, 9 | 0x4000_0000] {
            assert_eq!(run(&p, nr, X86, IP, [0; 6]), RET_KILL_PROCESS, "nr {nr}");
        }
        // i386 (AUDIT_ARCH_I386): number 90 is old_mmap there.
        assert_eq!(run(&p, 11, 0x4000_0003, IP, [0; 6]), RET_KILL_PROCESS);
    }

    #[test]
    fn exit_passes_only_from_the_trampoline() {
        let p = stub_filter(&IPS, 3);
        assert_eq!(run(&p, 60, X86, IP, [0; 6]), RET_ALLOW);
        for ip in [CLONE_IP, PARK_IP, 0x401000] {
            assert_eq!(run(&p, 60, X86, ip, [0; 6]), RET_KILL_PROCESS, "{ip:#x}");
        }
    }

    #[test]
    fn clone_passes_only_as_a_plain_thread_from_its_trampoline() {
        let p = stub_filter(&IPS, 3);
        let args = |flags: u64| [flags, 0, 0, 0, 0, 0];
        assert_eq!(run(&p, 56, X86, CLONE_IP, args(THREAD)), RET_ALLOW);
        // From the ordinary trampoline or the park loop: no.
        assert_eq!(run(&p, 56, X86, IP, args(THREAD)), RET_KILL_PROCESS);
        assert_eq!(run(&p, 56, X86, PARK_IP, args(THREAD)), RET_KILL_PROCESS);
        for extra in [
            libc::CLONE_NEWUSER as u64,
            libc::CLONE_SETTLS as u64,
            libc::CLONE_PTRACE as u64,
            libc::CLONE_CHILD_CLEARTID as u64,
            libc::SIGCHLD as u64,
            1 << 40,
        ] {
            let a = args(THREAD | extra);
            assert_eq!(
                run(&p, 56, X86, CLONE_IP, a),
                RET_KILL_PROCESS,
                "{extra:#x}"
            );
        }
        // A fork (no CLONE_VM etc.) and clone3/fork/vfork numbers die.
        assert_eq!(run(&p, 56, X86, CLONE_IP, args(0)), RET_KILL_PROCESS);
        for nr in [57, 58, 435] {
            assert_eq!(run(&p, nr, X86, CLONE_IP, args(THREAD)), RET_KILL_PROCESS);
        }
        // Anything else from the clone trampoline dies too.
        assert_eq!(run(&p, 11, X86, CLONE_IP, [0; 6]), RET_KILL_PROCESS);
    }

    #[test]
    fn park_allows_only_pause() {
        let p = stub_filter(&IPS, 3);
        assert_eq!(run(&p, 34, X86, PARK_IP, [0; 6]), RET_ALLOW);
        for nr in [9, 10, 11, 56, 60, 231] {
            assert_eq!(run(&p, nr, X86, PARK_IP, [0; 6]), RET_KILL_PROCESS, "{nr}");
        }
    }

    #[test]
    fn mmap_arguments_are_checked() {
        let p = stub_filter(&IPS, 3);
        let anon = u64::from(INJECTED_MMAP_FLAGS) | libc::MAP_ANONYMOUS as u64;
        assert_eq!(run(&p, 9, X86, IP, mmap_args(anon, 3)), RET_KILL_PROCESS);
        let private = (libc::MAP_PRIVATE | libc::MAP_FIXED) as u64;
        assert_eq!(run(&p, 9, X86, IP, mmap_args(private, 3)), RET_KILL_PROCESS);
        let high = u64::from(INJECTED_MMAP_FLAGS) | 1 << 40;
        assert_eq!(run(&p, 9, X86, IP, mmap_args(high, 3)), RET_KILL_PROCESS);
        let flags = u64::from(INJECTED_MMAP_FLAGS);
        assert_eq!(run(&p, 9, X86, IP, mmap_args(flags, 4)), RET_KILL_PROCESS);
    }
}
#[cfg(test)]
mod trap_tests {
    use super::tests_support::run;
    use super::*;
    use crate::stub::{self, SLOTS_BASE, SLOT_SIZE, STUB_IPS, STUB_THREAD_CLONE_FLAGS};

    fn filter() -> (Vec<SockFilter>, TrapIps) {
        let (_, layout) = stub::code();
        let t = stub::trap_ips(&layout);
        (trap_filter(&STUB_IPS, &t, 3), t)
    }
    const X86: u32 = AUDIT_ARCH_X86_64;

    #[test]
    fn handler_calls_pass_with_their_arguments() {
        let (p, t) = filter();
        let slot = SLOTS_BASE + 5 * SLOT_SIZE;
        for op in [0, 1] {
            assert_eq!(
                run(&p, 202, X86, t.futex, [slot, op, 2, 0, 0, 0]),
                RET_ALLOW
            );
        }
        assert_eq!(run(&p, 24, X86, t.futex, [0; 6]), RET_ALLOW);
        assert_eq!(run(&p, 15, X86, t.sigreturn, [0; 6]), RET_ALLOW);
        let flags = STUB_THREAD_CLONE_FLAGS;
        assert_eq!(
            run(
                &p,
                56,
                X86,
                t.runner_clone,
                [flags, slot + 0x7000, 0, 0, 0, 0]
            ),
            RET_ALLOW
        );
        for code in [0x1001, 0x1002] {
            assert_eq!(
                run(&p, 158, X86, t.arch_prctl, [code, 0x1234, 0, 0, 0, 0]),
                RET_ALLOW
            );
        }
    }

    #[test]
    fn handler_calls_with_other_arguments_die() {
        let (p, t) = filter();
        for args in [
            [0x20000, 0],
            [SLOTS_BASE + 8, 0],
            [SLOTS_BASE - SLOT_SIZE, 0],
            [SLOTS_BASE + crate::stub::SLOTS_LEN, 0],
            [SLOTS_BASE, 9],
            [SLOTS_BASE, 1 << 32],
        ] {
            let a = [args[0], args[1], 0, 0, 0, 0];
            assert_eq!(run(&p, 202, X86, t.futex, a), RET_KILL_PROCESS, "{args:x?}");
        }
        for (ip, nr) in [
            (t.futex, 39),
            (t.sigreturn, 202),
            (t.sigreturn, 24),
            (t.arch_prctl, 24),
            (t.arch_prctl, 15),
            (t.runner_clone, 202),
        ] {
            assert_eq!(
                run(&p, nr, X86, ip, [SLOTS_BASE, 0, 0, 0, 0, 0]),
                RET_KILL_PROCESS
            );
        }
        assert_eq!(
            run(&p, 158, X86, t.arch_prctl, [0x3001, 0, 0, 0, 0, 0]),
            RET_KILL_PROCESS
        );
        assert_eq!(
            run(
                &p,
                158,
                X86,
                t.arch_prctl,
                [0x1002 | 1 << 32, 0, 0, 0, 0, 0]
            ),
            RET_KILL_PROCESS
        );
    }

    /// What a thread with both filters gets: the most restrictive answer
    /// (the kernel compares the actions as signed numbers).
    fn stacked(progs: &[&[SockFilter]], nr: u32, arch: u32, ip: u64, args: [u64; 6]) -> u32 {
        progs
            .iter()
            .map(|p| run(p, nr, arch, ip, args))
            .min_by_key(|&r| r as i32)
            .expect("a filter")
    }

    #[test]
    fn runners_cannot_use_the_trampolines() {
        let (base, t) = filter();
        let runner = runner_filter(&STUB_IPS, &t);
        let both = [&base[..], &runner[..]];
        let mmap = [0x10000, 0x1000, 3, INJECTED_MMAP_FLAGS.into(), 3, 0];
        // The stub threads the Sentry drives may map the memory file ...
        assert_eq!(run(&base, 9, X86, STUB_IPS.trampoline, mmap), RET_ALLOW);
        // ... guest code that jumps there makes a guest call instead.
        for nr in [9, 10, 11] {
            assert_eq!(stacked(&both, nr, X86, STUB_IPS.trampoline, mmap), RET_TRAP);
        }
        let flags = STUB_THREAD_CLONE_FLAGS;
        for ip in [STUB_IPS.clone, t.runner_clone] {
            let args = [flags, 0, 0, 0, 0, 0];
            assert_eq!(stacked(&both, 56, X86, ip, args), RET_TRAP, "{ip:#x}");
        }
        assert_eq!(stacked(&both, 34, X86, STUB_IPS.park, [0; 6]), RET_TRAP);
        let add = [1, 0, t.runner_fprog, 0, 0, 0];
        assert_eq!(stacked(&both, 317, X86, t.runner_seccomp, add), RET_TRAP);
        // What a runner needs still passes: the handler's calls and the
        // trampoline's exit.
        let slot = SLOTS_BASE + 2 * SLOT_SIZE;
        assert_eq!(
            stacked(&both, 202, X86, t.futex, [slot, 1, 1, 0, 0, 0]),
            RET_ALLOW
        );
        assert_eq!(stacked(&both, 15, X86, t.sigreturn, [0; 6]), RET_ALLOW);
        assert_eq!(
            stacked(&both, 60, X86, STUB_IPS.trampoline, [0; 6]),
            RET_ALLOW
        );
        assert_eq!(stacked(&both, 39, X86, 0x401002, [0; 6]), RET_TRAP);
        assert_eq!(stacked(&both, 9, 0x4000_0003, 0x401002, [0; 6]), RET_TRAP);
    }

    #[test]
    fn only_the_runner_filter_can_be_added_from_its_instruction() {
        let (p, t) = filter();
        let ip = t.runner_seccomp;
        assert_eq!(
            run(&p, 317, X86, ip, [1, 0, t.runner_fprog, 0, 0, 0]),
            RET_ALLOW
        );
        for args in [
            [1, 1, t.runner_fprog],
            [1, 0, t.runner_fprog + 16],
            [1, 0, t.runner_fprog ^ 1 << 40],
            [0, 0, t.runner_fprog],
            [2, 0, t.runner_fprog],
        ] {
            let a = [args[0], args[1], args[2], 0, 0, 0];
            assert_eq!(run(&p, 317, X86, ip, a), RET_KILL_PROCESS, "{args:x?}");
        }
        assert_eq!(run(&p, 9, X86, ip, [0; 6]), RET_KILL_PROCESS);
    }

    #[test]
    fn guest_calls_trap_and_foreign_arches_die() {
        let (p, _) = filter();
        for ip in [0x10002, 0x7fff_0000_1000, crate::stub::STUB_BASE + 0x800] {
            for nr in [0, 39, 56, 59, 62, 231, 257, 317, 9 | 0x4000_0000] {
                assert_eq!(run(&p, nr, X86, ip, [0; 6]), RET_TRAP, "{ip:#x} {nr}");
            }
        }
        assert_eq!(run(&p, 20, 0x4000_0003, 0x10002, [0; 6]), RET_TRAP);
    }
}
