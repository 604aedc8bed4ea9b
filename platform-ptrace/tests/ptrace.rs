//! Crate-level behaviour of the ptrace platform: guest code in a real stub.

mod common;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;
use platform::{AddressSpace, Error, Event, Platform, Prot};
const SEGV_MAPERR: i32 = 1;
const SEGV_ACCERR: i32 = 2;

use platform_ptrace::{PtraceAddressSpace, UntracedOutcome, STUB_BASE, STUB_LEN};

fn pid_of(as_: &dyn AddressSpace) -> i32 {
    as_.as_any()
        .downcast_ref::<PtraceAddressSpace>()
        .expect("ptrace address space")
        .stub_pid()
}

#[test]
fn syscalls_are_reported_and_answered() {
    let mem = MemFile::new();
    let code = code(&[&mov_eax(39), &SYSCALL, &MOV_RAX_RDI, &mov_eax(60), &SYSCALL]);
    mem.write(0, &code);
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();

    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    assert_eq!(regs.syscall_nr(), 39);
    assert_eq!(regs.rip, CODE + 7, "rip is past the syscall instruction");
    regs.rax = 1234;
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    assert_eq!(regs.syscall_nr(), 60);
    assert_eq!(regs.syscall_args()[0], 1234);
}

#[test]
fn guest_memory_is_the_memory_file() {
    let mem = MemFile::new();
    // mov (%rbx),%rax ; add $1,%rax ; mov %rax,8(%rbx) ; mov %rax,%rdi ; exit
    let code = code(&[
        &[0x48, 0x8b, 0x03],
        &[0x48, 0x83, 0xc0, 0x01],
        &[0x48, 0x89, 0x43, 0x08],
        &MOV_RAX_RDI,
        &exit_call(),
    ]);
    mem.write(0, &code);
    mem.write_u64(DATA_OFF, 41);
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    regs.rbx = DATA;
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    assert_eq!(regs.rdi, 42, "guest read the test's write");
    assert_eq!(
        mem.read_u64(DATA_OFF + 8),
        42,
        "test sees the guest's write"
    );
}

#[test]
fn fault_on_unmapped_page_then_retry_succeeds() {
    let mem = MemFile::new();
    mem.write(0, &code(&[&STORE_RAX_AT_RBX, &exit_call()]));
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    let target = 0x30008;
    regs.rbx = target;
    regs.rax = 0xfeed;
    let ev = ctx.switch(&*as_, &mut regs).expect("switch");
    assert_eq!(
        ev,
        Event::Fault {
            signo: libc::SIGSEGV,
            code: SEGV_MAPERR,
            addr: target,
            access: None
        }
    );
    assert_eq!(regs.rip, CODE, "faulting instruction not retired");
    as_.map(0x30000, 0x1000, Prot::RW, 0x2000).expect("map");
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    assert_eq!(regs.syscall_nr(), 60);
    assert_eq!(mem.read_u64(0x2008), 0xfeed);
}

#[test]
fn write_to_read_only_page_faults() {
    let mem = MemFile::new();
    mem.write(0, &code(&[&STORE_RAX_AT_RBX, &exit_call()]));
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    as_.protect(
        DATA,
        0x1000,
        Prot {
            read: true,
            write: false,
            exec: false,
        },
    )
    .expect("protect");
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    regs.rbx = DATA + 16;
    let ev = ctx.switch(&*as_, &mut regs).expect("switch");
    assert_eq!(
        ev,
        Event::Fault {
            signo: libc::SIGSEGV,
            code: SEGV_ACCERR,
            addr: DATA + 16,
            access: None
        }
    );
    // Unmapped: the retry faults with MAPERR instead.
    as_.unmap(DATA, 0x1000).expect("unmap");
    let ev = ctx.switch(&*as_, &mut regs).expect("switch");
    assert!(
        matches!(
            ev,
            Event::Fault {
                code: SEGV_MAPERR,
                ..
            }
        ),
        "{ev:?}"
    );
}

#[test]
fn ud2_and_int3_are_signals() {
    let mem = MemFile::new();
    mem.write(0, &code(&[&UD2]));
    mem.write(0x100, &code(&[&INT3, &exit_call()]));
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    let ev = ctx.switch(&*as_, &mut regs).expect("switch");
    assert!(
        matches!(
            ev,
            Event::Signal {
                signo: libc::SIGILL,
                ..
            }
        ),
        "{ev:?}"
    );
    assert_eq!(regs.rip, CODE);
    regs.rip = CODE + 0x100;
    let ev = ctx.switch(&*as_, &mut regs).expect("switch");
    assert!(
        matches!(
            ev,
            Event::Signal {
                signo: libc::SIGTRAP,
                ..
            }
        ),
        "{ev:?}"
    );
    // The SIGTRAP was not delivered: the guest continues past the int3.
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    assert_eq!(regs.syscall_nr(), 60);
}

#[test]
fn fs_base_from_regs_takes_effect() {
    let mem = MemFile::new();
    mem.write(0, &code(&[&LOAD_FS0_RAX, &MOV_RAX_RDI, &exit_call()]));
    mem.write_u64(DATA_OFF + 0x40, 0x1122_3344_5566_7788);
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    regs.fs_base = DATA + 0x40;
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    assert_eq!(regs.syscall_args()[0], 0x1122_3344_5566_7788);
    assert_eq!(regs.fs_base, DATA + 0x40);
}

#[test]
fn stub_holds_only_its_pages_and_guest_mappings() {
    let mem = MemFile::new();
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let maps =
        std::fs::read_to_string(format!("/proc/{}/maps", pid_of(as_.as_ref()))).expect("read maps");
    let allowed = [
        (CODE, CODE + 0x1000),
        (DATA, DATA + 0x1000),
        (STUB_BASE, STUB_BASE + STUB_LEN),
    ];
    let mut seen_stub = false;
    for line in maps.lines() {
        if line.ends_with("[vsyscall]") {
            continue;
        }
        let range = line.split_whitespace().next().expect("range");
        let (s, e) = range.split_once('-').expect("dash");
        let s = u64::from_str_radix(s, 16).expect("hex");
        let e = u64::from_str_radix(e, 16).expect("hex");
        assert!(
            allowed.iter().any(|&(a, b)| a <= s && e <= b),
            "unexpected mapping in stub: {line}\n{maps}"
        );
        if s >= STUB_BASE {
            seen_stub = true;
            assert!(
                !line.contains("w"),
                "stub pages must not be writable: {line}"
            );
        }
    }
    assert!(seen_stub, "{maps}");
}

/// With `stub_net_ns` off a stub stays in its creator's network namespace
/// (the Sentry's own, in the sandbox), and its clone flags say so.
#[test]
fn stubs_share_the_network_namespace_when_told_to() {
    use std::os::fd::AsFd;
    let mem = MemFile::new();
    let p = platform_ptrace::PtracePlatform::with_options(
        mem.fd.as_fd(),
        platform_ptrace::PtraceOptions {
            stub_net_ns: false,
            ..Default::default()
        },
    )
    .expect("platform");
    let as_ = p.new_address_space().expect("address space");
    let pid = pid_of(as_.as_ref());
    let ns = |who: &str, ns: &str| std::fs::read_link(format!("/proc/{who}/ns/{ns}")).expect("ns");
    assert_eq!(ns(&pid.to_string(), "net"), ns("self", "net"));
    assert_ne!(ns(&pid.to_string(), "pid"), ns("self", "pid"));
    assert!(p
        .host_clone_flags()
        .iter()
        .all(|f| f & libc::CLONE_NEWNET as u64 == 0));
}

#[test]
fn stub_is_namespaced_no_new_privs_and_filtered() {
    let mem = MemFile::new();
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    let pid = pid_of(as_.as_ref());
    // Its own user, PID and (by default) network namespaces; the caller's
    // mount, IPC and UTS ones (the Sentry's, fresh in the sandbox).
    for ns in ["user", "pid", "net", "mnt", "ipc", "uts"] {
        let theirs = std::fs::read_link(format!("/proc/{pid}/ns/{ns}")).expect("ns link");
        let ours = std::fs::read_link(format!("/proc/self/ns/{ns}")).expect("own ns link");
        if ["user", "pid", "net"].contains(&ns) {
            assert_ne!(theirs, ours, "{ns} namespace shared with the stub");
        } else {
            assert_eq!(theirs, ours, "{ns} namespace not shared with the stub");
        }
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .map(str::to_owned)
    };
    assert_eq!(field("NoNewPrivs:").as_deref(), Some("1"));
    assert_eq!(field("Seccomp:").as_deref(), Some("2"));
    // One descriptor: the memory file at 3.
    let fds: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fd dir")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf8"))
        .collect();
    assert_eq!(fds, ["3"]);
}

fn untraced(code_bytes: &[u8], setup: impl FnOnce(&mut platform::Regs)) -> UntracedOutcome {
    let mem = MemFile::new();
    mem.write(0, code_bytes);
    let p = mem.platform();
    let as_ = p.new_ptrace_address_space().expect("address space");
    map_code_and_data(&as_);
    let mut regs = start_regs();
    setup(&mut regs);
    as_.run_untraced_for_test(&regs).expect("run")
}

#[test]
fn untraced_guest_syscall_is_killed_by_seccomp() {
    let code = code(&[
        &mov_eax(39),
        &SYSCALL,
        &mov_edi(42),
        &mov_eax(231),
        &SYSCALL,
    ]);
    assert_eq!(
        untraced(&code, |_| {}),
        UntracedOutcome::Killed(libc::SIGSYS)
    );
}

#[test]
fn untraced_forbidden_syscalls_through_the_trampoline_are_killed() {
    for (nr, args) in [
        (62u64, [1u64, 9, 0]),                // kill(1, SIGKILL)
        (257, [libc::AT_FDCWD as u64, 0, 0]), // openat
        (231, [42, 0, 0]),                    // exit_group(42)
        (9, [0, 0x1000, 3]),                  // mmap without the fixed flags
    ] {
        let out = untraced(&[], |r| {
            r.rip = STUB_BASE;
            r.rax = nr;
            r.rdi = args[0];
            r.rsi = args[1];
            r.rdx = args[2];
            r.r10 = libc::MAP_PRIVATE as u64 | libc::MAP_ANONYMOUS as u64;
            r.r8 = u64::MAX;
        });
        assert_eq!(out, UntracedOutcome::Killed(libc::SIGSYS), "syscall {nr}");
    }
    // Control: an allowed call through the trampoline runs and reaches the
    // int3 after it.
    let out = untraced(&[], |r| {
        r.rip = STUB_BASE;
        r.rax = libc::SYS_munmap as u64;
        r.rdi = 0x40000;
        r.rsi = 0x1000;
    });
    assert_eq!(out, UntracedOutcome::Stopped(libc::SIGTRAP));
}

#[test]
fn interrupt_stops_a_spinning_guest_and_switch_resumes_it() {
    let mem = MemFile::new();
    mem.write(0, &code(&[&SPIN_WHILE_ZERO_AT_RBX, &exit_call()]));
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    regs.rbx = DATA;
    let intr = ctx.interrupter();
    let (tx, rx) = mpsc::channel::<()>();
    let kicker = std::thread::spawn(move || {
        while rx.recv_timeout(Duration::from_millis(20)).is_err() {
            intr.interrupt();
        }
    });
    let started = Instant::now();
    let ev = ctx.switch(&*as_, &mut regs).expect("switch");
    assert_eq!(ev, Event::Interrupted);
    assert!(
        regs.rip == CODE || regs.rip == CODE + 4,
        "rip {:#x}",
        regs.rip
    );
    tx.send(()).expect("stop kicker");
    kicker.join().expect("kicker");
    assert!(started.elapsed() < Duration::from_secs(5));
    // Let the loop end; a stale kick may surface as one more Interrupted.
    mem.write_u64(DATA_OFF, 1);
    let mut ev = ctx.switch(&*as_, &mut regs).expect("switch");
    if ev == Event::Interrupted {
        ev = ctx.switch(&*as_, &mut regs).expect("switch");
    }
    assert_eq!(ev, Event::Syscall);
    assert_eq!(regs.syscall_nr(), 60);
}

#[test]
fn interrupt_before_switch_is_not_lost() {
    let mem = MemFile::new();
    mem.write(0, &code(&[&SPIN_WHILE_ZERO_AT_RBX, &exit_call()]));
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    regs.rbx = DATA;
    ctx.interrupter().interrupt();
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Interrupted
    );
    mem.write_u64(DATA_OFF, 1);
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
}

fn gone_or_zombie(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/status")) {
        Err(_) => true,
        Ok(s) => s
            .lines()
            .any(|l| l.starts_with("State:") && l.contains('Z')),
    }
}

#[test]
fn dropping_the_address_space_reaps_the_stub() {
    let mem = MemFile::new();
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    let pid = pid_of(as_.as_ref());
    assert!(!gone_or_zombie(pid));
    drop(as_);
    assert!(
        std::fs::metadata(format!("/proc/{pid}")).is_err(),
        "stub {pid} still exists after drop"
    );
}

#[test]
fn address_space_outlives_the_thread_that_created_it() {
    let mem = MemFile::new();
    mem.write(0, &exit_call());
    let p = mem.platform();
    // Created, mapped (so given a stub thread) on a thread that then ends.
    let as_ = std::thread::scope(|s| {
        s.spawn(|| {
            let as_ = p.new_address_space().expect("address space");
            map_code_and_data(&*as_);
            as_
        })
        .join()
        .expect("thread")
    });
    let pid = pid_of(&*as_);
    // The ended thread's stub thread exited; the first one remains.
    assert_eq!(task_count(pid), 1);
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    assert_eq!(regs.syscall_nr(), 60);
    drop(ctx);
    drop(as_);
    assert!(std::fs::metadata(format!("/proc/{pid}")).is_err());
}

#[test]
fn ranges_reaching_the_stub_are_refused() {
    let mem = MemFile::new();
    let p = mem.platform();
    assert_eq!(p.max_user_address(), STUB_BASE);
    let as_ = p.new_address_space().expect("address space");
    for (addr, len) in [
        (STUB_BASE, 0x1000),
        (STUB_BASE - 0x1000, 0x2000),
        (0x1000, u64::MAX - 0xfff),
        (0x1001, 0x1000),
        (0x1000, 0),
    ] {
        assert!(matches!(
            as_.map(addr, len, Prot::RW, 0),
            Err(Error::Misuse(_))
        ));
        assert!(matches!(as_.unmap(addr, len), Err(Error::Misuse(_))));
        assert!(matches!(
            as_.protect(addr, len, Prot::NONE),
            Err(Error::Misuse(_))
        ));
    }
    // Host errors come back as errors naming the operation: mprotect of
    // nothing is ENOMEM.
    match as_.protect(0x50000, 0x1000, Prot::RW) {
        Err(Error::Host { op, source }) => {
            assert_eq!(op, "mprotect in stub");
            assert_eq!(source.raw_os_error(), Some(libc::ENOMEM));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn killed_stub_is_reported_as_died() {
    let mem = MemFile::new();
    mem.write(0, &code(&[&SPIN_WHILE_ZERO_AT_RBX]));
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let pid = pid_of(as_.as_ref());
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    regs.rbx = DATA;
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        // SAFETY: the stub is not reaped until the switch below returns.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
    let r = ctx.switch(&*as_, &mut regs);
    killer.join().expect("killer");
    assert!(matches!(r, Err(Error::StubDied(_))), "{r:?}");
    let r = ctx.switch(&*as_, &mut regs);
    assert!(matches!(r, Err(Error::StubDied(_))), "{r:?}");
    drop(as_);
}

#[test]
fn executing_a_non_executable_page_is_an_execute_fault() {
    let mem = MemFile::new();
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    regs.rip = DATA;
    let ev = ctx.switch(&*as_, &mut regs).expect("switch");
    assert_eq!(
        ev,
        Event::Fault {
            signo: libc::SIGSEGV,
            code: SEGV_ACCERR,
            addr: DATA,
            access: Some(platform::Access::Execute)
        }
    );
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").expect("fd dir").count()
}

#[test]
fn address_spaces_come_and_go_without_leaks() {
    let mem = MemFile::new();
    let p = mem.platform();
    // Warm up thread-locals and lazily opened descriptors.
    drop(p.new_address_space().expect("address space"));
    let before = open_fds();
    let mut pids = Vec::new();
    const N: usize = 40;
    for _ in 0..N {
        let as_ = p.new_address_space().expect("address space");
        map_code_and_data(&*as_);
        pids.push(pid_of(as_.as_ref()));
    }
    // Other tests of this binary open descriptors concurrently (a few
    // each, for a while): the fewest seen over a moment is the count
    // without them, and may not hold one leaked descriptor per address
    // space.
    let after = (0..20)
        .map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(5));
            open_fds()
        })
        .min()
        .unwrap_or(usize::MAX);
    assert!(after < before + N / 2, "{before} -> {after}");
    for pid in pids {
        assert!(
            std::fs::metadata(format!("/proc/{pid}")).is_err(),
            "stub {pid} left"
        );
    }
}

/// The pid of `p`'s spare stub, once it is made.
fn spare_of(p: &platform_ptrace::PtracePlatform) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(pid) = p.spare_stub_for_test() {
            return pid;
        }
        assert!(Instant::now() < deadline, "no spare stub");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn from_the_second_address_space_on_a_spare_stub_is_made_ahead() {
    let mem = MemFile::new();
    mem.write(0, &exit_call());
    let p = mem.platform();
    // A guest that never forks pays for no spare.
    let first = p.new_address_space().expect("address space");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(p.spare_stub_for_test(), None);
    let mut ctx = p.new_context().expect("context");
    let mut spares = Vec::new();
    for _ in 0..3 {
        let as_ = p.new_address_space().expect("address space");
        // Once one exists, the next address space takes a stub that was
        // ready before it was asked for.
        let spare = spare_of(&p);
        assert!(!gone_or_zombie(spare));
        drop(as_);
        let next = p.new_address_space().expect("address space");
        assert_eq!(pid_of(next.as_ref()), spare);
        // It works like any other: guest code runs to its first call.
        map_code_and_data(&*next);
        let mut regs = start_regs();
        assert_eq!(
            ctx.switch(&*next, &mut regs).expect("switch"),
            Event::Syscall
        );
        assert_eq!(regs.syscall_nr(), 60);
        spares.push(spare);
    }
    drop(ctx);
    drop(first);
    let last = spare_of(&p);
    // The platform takes its spare with it.
    drop(p);
    for pid in spares.into_iter().chain([last]) {
        assert!(
            std::fs::metadata(format!("/proc/{pid}")).is_err(),
            "stub {pid} left"
        );
    }
}

seccomp_trap_too!(
    syscalls_are_reported_and_answered,
    guest_memory_is_the_memory_file,
    fault_on_unmapped_page_then_retry_succeeds,
    write_to_read_only_page_faults,
    ud2_and_int3_are_signals,
    fs_base_from_regs_takes_effect,
    stub_is_namespaced_no_new_privs_and_filtered,
    interrupt_stops_a_spinning_guest_and_switch_resumes_it,
    interrupt_before_switch_is_not_lost,
    dropping_the_address_space_reaps_the_stub,
    address_space_outlives_the_thread_that_created_it,
    killed_stub_is_reported_as_died,
    executing_a_non_executable_page_is_an_execute_fault,
    address_spaces_come_and_go_without_leaks,
    from_the_second_address_space_on_a_spare_stub_is_made_ahead,
);
