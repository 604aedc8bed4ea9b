//! Several guest threads per address space: one stub thread per host
//! thread, injections through the caller's own stub thread, per-context
//! interrupts, clean thread exits, the filter rules that make them possible,
//! and FPU state.

mod common;

use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

use common::*;
use platform::{AddressSpace, Error, Event, Platform, Prot, Regs};
use platform_ptrace::{
    PtraceAddressSpace, UntracedOutcome, CLONE_TRAMPOLINE, STUB_THREAD_CLONE_FLAGS, TRAMPOLINE,
};

fn ptrace_as(as_: &dyn AddressSpace) -> &PtraceAddressSpace {
    as_.as_any()
        .downcast_ref::<PtraceAddressSpace>()
        .expect("ptrace address space")
}

fn pid_of(as_: &dyn AddressSpace) -> i32 {
    ptrace_as(as_).stub_pid()
}

/// `1: inc (%rbx); mov $39,%eax; syscall; jmp 1b`
fn counting_loop() -> Vec<u8> {
    let mut c = code(&[&INC_AT_RBX, &mov_eax(39), &SYSCALL]);
    let back = -(c.len() as i8 + 2);
    c.extend_from_slice(&[0xeb, back as u8]);
    c
}

#[test]
fn two_threads_run_guest_code_concurrently_in_one_address_space() {
    const SWITCHES: u64 = 300;
    let mem = MemFile::new();
    mem.write(0, &counting_loop());
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let start = Barrier::new(2);
    let tids: Vec<i32> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2u64)
            .map(|i| {
                let (p, as_, start) = (&p, &as_, &start);
                s.spawn(move || {
                    let mut ctx = p.new_context().expect("context");
                    let mut regs = start_regs();
                    regs.rbx = DATA + 8 * i;
                    regs.r12 = 0x1000 + i;
                    start.wait();
                    for n in 0..SWITCHES {
                        let ev = ctx.switch(&**as_, &mut regs).expect("switch");
                        assert_eq!(ev, Event::Syscall);
                        assert_eq!(regs.syscall_nr(), 39);
                        // Our own registers, not the other thread's.
                        assert_eq!(regs.rbx, DATA + 8 * i);
                        assert_eq!(regs.r12, 0x1000 + i);
                        regs.rax = n;
                    }
                    ptrace_as(&**as_)
                        .stub_tid_of_current_thread()
                        .expect("stub thread")
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("worker"))
            .collect()
    });
    assert_ne!(tids[0], tids[1], "each host thread has its own stub thread");
    // Each guest loop incremented its own counter once per syscall.
    assert_eq!(mem.read_u64(DATA_OFF), SWITCHES);
    assert_eq!(mem.read_u64(DATA_OFF + 8), SWITCHES);
}

#[test]
fn counters_advance_while_both_threads_spin() {
    // Both guests run at the same time: each waits for the other's counter
    // to move before making its syscall, which only works if they overlap.
    // 1: inc (%rbx); cmpq $0, (%rcx); je 1b; mov $39,%eax; syscall
    let mem = MemFile::new();
    let mut c = INC_AT_RBX.to_vec();
    c.extend_from_slice(&[0x48, 0x83, 0x39, 0x00]); // cmpq $0,(%rcx)
    let back = -(c.len() as i8 + 2);
    c.extend_from_slice(&[0x74, back as u8]);
    c.extend(code(&[&mov_eax(39), &SYSCALL]));
    mem.write(0, &c);
    let p = mem.platform_with(platform_ptrace::PtraceOptions {
        // Two spinning guests pinned to one CPU would still overlap, but
        // slowly; let the scheduler spread them.
        pin_cpu: false,
        ..Default::default()
    });
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    std::thread::scope(|s| {
        for i in 0..2u64 {
            let (p, as_) = (&p, &as_);
            s.spawn(move || {
                let mut ctx = p.new_context().expect("context");
                let mut regs = start_regs();
                regs.rbx = DATA + 8 * i;
                regs.rcx = DATA + 8 * (1 - i);
                let ev = ctx.switch(&**as_, &mut regs).expect("switch");
                assert_eq!(ev, Event::Syscall);
                assert_eq!(regs.rbx, DATA + 8 * i);
            });
        }
    });
    assert!(mem.read_u64(DATA_OFF) > 0);
    assert!(mem.read_u64(DATA_OFF + 8) > 0);
}

#[test]
fn a_mapping_made_by_one_thread_is_seen_by_another() {
    let mem = MemFile::new();
    mem.write(0, &code(&[&LOAD_RBX_RAX, &MOV_RAX_RDI, &exit_call()]));
    mem.write_u64(0x5008, 0xabcd_ef01);
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    // Thread B switches once first, so it has its stub thread already.
    let (to_b, b_rx) = mpsc::channel::<()>();
    let (to_a, a_rx) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let (p, as_) = (&p, &as_);
        let b = s.spawn(move || {
            let mut ctx = p.new_context().expect("context");
            let mut regs = start_regs();
            regs.rbx = 0x40008;
            let ev = ctx.switch(&**as_, &mut regs).expect("switch");
            assert!(matches!(ev, Event::Fault { addr: 0x40008, .. }), "{ev:?}");
            to_a.send(()).expect("to a");
            b_rx.recv().expect("from a");
            let ev = ctx.switch(&**as_, &mut regs).expect("switch");
            assert_eq!(ev, Event::Syscall);
            regs.syscall_args()[0]
        });
        a_rx.recv().expect("from b");
        // Thread A (this one) maps the page B faulted on.
        as_.map(0x40000, 0x1000, Prot::RW, 0x5000).expect("map");
        to_b.send(()).expect("to b");
        assert_eq!(b.join().expect("b"), 0xabcd_ef01);
    });
}

#[test]
fn a_thread_that_never_switched_can_map() {
    let mem = MemFile::new();
    mem.write(0, &code(&[&LOAD_RBX_RAX, &MOV_RAX_RDI, &exit_call()]));
    mem.write_u64(DATA_OFF + 0x10, 77);
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    let pid = pid_of(&*as_);
    std::thread::scope(|s| {
        s.spawn(|| {
            map_code_and_data(&*as_);
            // The first thread plus this thread's stub thread.
            assert_eq!(task_count(pid), 2);
        })
        // join() waits for the thread's end, thread-local destructors
        // included (the end of the scope alone does not).
        .join()
        .expect("mapper");
    });
    // That thread ended and let its stub thread go.
    assert_eq!(task_count(pid), 1);
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    regs.rbx = DATA + 0x10;
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    assert_eq!(regs.syscall_args()[0], 77);
}

#[test]
fn dropping_one_context_leaves_the_other_running() {
    let mem = MemFile::new();
    mem.write(0, &counting_loop());
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let pid = pid_of(&*as_);
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let (p, as_) = (&p, &as_);
        let b = s.spawn(move || {
            let mut ctx = p.new_context().expect("context");
            let mut regs = start_regs();
            regs.rbx = DATA + 8;
            assert_eq!(
                ctx.switch(&**as_, &mut regs).expect("switch"),
                Event::Syscall
            );
            ready_tx.send(()).expect("ready");
            go_rx.recv().expect("go");
            for _ in 0..50 {
                assert_eq!(
                    ctx.switch(&**as_, &mut regs).expect("switch"),
                    Event::Syscall
                );
            }
        });
        let mut ctx = p.new_context().expect("context");
        let mut regs = start_regs();
        regs.rbx = DATA;
        assert_eq!(
            ctx.switch(&**as_, &mut regs).expect("switch"),
            Event::Syscall
        );
        ready_rx.recv().expect("b ready");
        let n = per_switcher();
        assert_eq!(
            task_count(pid),
            1 + 2 * n,
            "first thread + two stub threads"
        );
        drop(ctx);
        assert_eq!(task_count(pid), 1 + n, "our stub thread exited");
        go_tx.send(()).expect("go");
        b.join().expect("b keeps running");
    });
    assert_eq!(mem.read_u64(DATA_OFF), 1);
    assert_eq!(mem.read_u64(DATA_OFF + 8), 51);
    assert_eq!(task_count(pid), 1, "b's stub thread left with b");
    drop(as_);
    assert!(
        std::fs::metadata(format!("/proc/{pid}")).is_err(),
        "stub {pid} still exists"
    );
}

#[test]
fn interrupt_reaches_only_its_own_context() {
    let mem = MemFile::new();
    mem.write(0, &code(&[&SPIN_WHILE_ZERO_AT_RBX, &exit_call()]));
    let p = mem.platform_with(platform_ptrace::PtraceOptions {
        pin_cpu: false,
        ..Default::default()
    });
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    std::thread::scope(|s| {
        let (p, as_) = (&p, &as_);
        let (intr_tx, intr_rx) = mpsc::channel();
        let spinner = |flag: u64, intr_tx: mpsc::Sender<Arc<dyn platform::Interrupter>>| {
            move || {
                let mut ctx = p.new_context().expect("context");
                intr_tx.send(ctx.interrupter()).expect("send");
                let mut regs = start_regs();
                regs.rbx = flag;
                ctx.switch(&**as_, &mut regs).expect("switch")
            }
        };
        let (a_tx, b_tx) = (intr_tx.clone(), intr_tx);
        let a = s.spawn(spinner(DATA, a_tx));
        let ia = intr_rx.recv().expect("a's interrupter");
        let b = s.spawn(spinner(DATA + 8, b_tx));
        let ib = intr_rx.recv().expect("b's interrupter");
        std::thread::sleep(Duration::from_millis(50));
        ia.interrupt();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !a.is_finished() && !b.is_finished() {
            assert!(Instant::now() < deadline, "interrupt lost");
            std::thread::sleep(Duration::from_millis(5));
        }
        // A stopped; B still spins.
        std::thread::sleep(Duration::from_millis(50));
        assert!(a.is_finished(), "a's interrupt did not stop a");
        assert!(!b.is_finished(), "a's interrupt stopped b");
        assert_eq!(a.join().expect("a"), Event::Interrupted);
        // Release B normally.
        mem.write_u64(DATA_OFF + 8, 1);
        assert_eq!(b.join().expect("b"), Event::Syscall);
        drop(ib);
    });
}

#[test]
fn one_context_can_switch_into_two_address_spaces() {
    let mem = MemFile::new();
    mem.write(0, &code(&[&mov_eax(39), &SYSCALL, &exit_call()]));
    let p = mem.platform();
    let as1 = p.new_address_space().expect("address space");
    let as2 = p.new_address_space().expect("address space");
    map_code_and_data(&*as1);
    map_code_and_data(&*as2);
    let mut ctx = p.new_context().expect("context");
    let mut r1 = start_regs();
    let mut r2 = start_regs();
    assert_eq!(ctx.switch(&*as1, &mut r1).expect("switch"), Event::Syscall);
    assert_eq!(ctx.switch(&*as2, &mut r2).expect("switch"), Event::Syscall);
    assert_eq!(ctx.switch(&*as1, &mut r1).expect("switch"), Event::Syscall);
    assert_eq!(r1.syscall_nr(), 60);
    assert_eq!(ctx.switch(&*as2, &mut r2).expect("switch"), Event::Syscall);
    assert_eq!(r2.syscall_nr(), 60);
    // After an "execve": the old address space goes, the context goes on.
    let pid1 = pid_of(&*as1);
    drop(as1);
    assert!(std::fs::metadata(format!("/proc/{pid1}")).is_err());
    r2 = start_regs();
    assert_eq!(ctx.switch(&*as2, &mut r2).expect("switch"), Event::Syscall);
}

#[test]
fn released_thread_is_replaced_on_next_use() {
    let mem = MemFile::new();
    mem.write(0, &code(&[&mov_eax(39), &SYSCALL, &exit_call()]));
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let pid = pid_of(&*as_);
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    let first = ptrace_as(&*as_).stub_tid_of_current_thread();
    ptrace_as(&*as_).release_current_thread();
    assert_eq!(task_count(pid), 1);
    regs = start_regs();
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    assert_ne!(ptrace_as(&*as_).stub_tid_of_current_thread(), first);
    assert_eq!(task_count(pid), 1 + per_switcher());
}

// --- isolation: the rules added for threads, under PTRACE_CONT ---

fn untraced(code_bytes: &[u8], setup: impl FnOnce(&mut Regs)) -> (UntracedOutcome, usize) {
    let mem = MemFile::new();
    mem.write(0, code_bytes);
    let p = mem.platform();
    let as_ = p.new_ptrace_address_space().expect("address space");
    map_code_and_data(&as_);
    let mut regs = start_regs();
    setup(&mut regs);
    let out = as_.run_untraced_for_test(&regs).expect("run");
    let tasks = std::fs::read_dir(format!("/proc/{}/task", as_.stub_pid()))
        .map(|d| d.count())
        .unwrap_or(0);
    (out, tasks)
}

fn at(rip: u64, nr: i64, args: [u64; 2]) -> impl FnOnce(&mut Regs) {
    move |r| {
        r.rip = rip;
        r.rax = nr as u64;
        r.rdi = args[0];
        r.rsi = args[1];
    }
}

#[test]
fn untraced_clone_with_other_flags_is_killed() {
    let fork_like = libc::SIGCHLD as u64;
    for flags in [
        fork_like,
        STUB_THREAD_CLONE_FLAGS | libc::CLONE_SETTLS as u64,
        STUB_THREAD_CLONE_FLAGS | libc::CLONE_NEWNS as u64,
        STUB_THREAD_CLONE_FLAGS & !(libc::CLONE_THREAD as u64 | libc::CLONE_SIGHAND as u64),
    ] {
        let (out, _) = untraced(&[], at(CLONE_TRAMPOLINE, libc::SYS_clone, [flags, 0]));
        assert_eq!(
            out,
            UntracedOutcome::Killed(libc::SIGSYS),
            "flags {flags:#x}"
        );
    }
}

#[test]
fn untraced_clone_outside_its_trampoline_is_killed() {
    let thread = [STUB_THREAD_CLONE_FLAGS, 0];
    let (out, _) = untraced(&[], at(TRAMPOLINE, libc::SYS_clone, thread));
    assert_eq!(out, UntracedOutcome::Killed(libc::SIGSYS));
    let guest = code(&[&SYSCALL]);
    let (out, _) = untraced(&guest, at(CODE, libc::SYS_clone, thread));
    assert_eq!(out, UntracedOutcome::Killed(libc::SIGSYS));
    // clone3 and fork through the clone trampoline.
    for nr in [libc::SYS_clone3, libc::SYS_fork, libc::SYS_vfork] {
        let (out, _) = untraced(&[], at(CLONE_TRAMPOLINE, nr, thread));
        assert_eq!(out, UntracedOutcome::Killed(libc::SIGSYS), "nr {nr}");
    }
}

#[test]
fn untraced_exit_and_pause_outside_their_places_are_killed() {
    let guest = code(&[&SYSCALL]);
    for (rip, nr) in [
        (CODE, libc::SYS_exit),
        (CODE, libc::SYS_pause),
        (TRAMPOLINE, libc::SYS_pause),
        (CLONE_TRAMPOLINE, libc::SYS_exit),
        (CLONE_TRAMPOLINE, libc::SYS_pause),
    ] {
        let (out, _) = untraced(&guest, at(rip, nr, [0, 0]));
        assert_eq!(
            out,
            UntracedOutcome::Killed(libc::SIGSYS),
            "{rip:#x} nr {nr}"
        );
    }
}

#[test]
fn untraced_allowed_thread_calls_behave() {
    // exit through the trampoline ends that thread only.
    let (out, tasks) = untraced(&[], at(TRAMPOLINE, libc::SYS_exit, [7, 0]));
    assert_eq!(out, UntracedOutcome::Exited(7));
    assert_eq!(tasks, 1, "the stub's first thread lives on");
    // A plain thread through the clone trampoline: the parent reaches the
    // int3; the child parks.
    let thread = [STUB_THREAD_CLONE_FLAGS, 0];
    let (out, tasks) = untraced(&[], at(CLONE_TRAMPOLINE, libc::SYS_clone, thread));
    assert_eq!(out, UntracedOutcome::Stopped(libc::SIGTRAP));
    assert_eq!(tasks, 3, "first thread, ours, the parked clone");
}

// --- FPU state ---

const XMM0: usize = 160;

#[test]
fn fpstate_reads_and_writes_xmm0() {
    let mem = MemFile::new();
    let v1 = 0x1122_3344_5566_7788u64;
    mem.write(
        0,
        &code(&[
            &movabs_rax(v1),
            &MOVQ_RAX_XMM0,
            &mov_eax(39),
            &SYSCALL,
            &MOVQ_XMM0_RAX,
            &MOV_RAX_RDI,
            &exit_call(),
        ]),
    );
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let mut ctx = p.new_context().expect("context");
    assert!(
        matches!(ctx.fpstate(), Err(Error::Misuse(_))),
        "before any switch"
    );
    let mut regs = start_regs();
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    assert_eq!(regs.syscall_nr(), 39);
    let mut fp = ctx.fpstate().expect("fpstate");
    assert!(fp.len() >= 512, "{}", fp.len());
    assert_eq!(&fp[XMM0..XMM0 + 8], &v1.to_le_bytes());
    assert_eq!(ctx.fpstate().expect("cached"), fp);

    let v2 = 0xdead_beef_cafe_f00du64;
    fp[XMM0..XMM0 + 8].copy_from_slice(&v2.to_le_bytes());
    ctx.set_fpstate(&fp).expect("set_fpstate");
    assert_eq!(
        &ctx.fpstate().expect("fpstate")[XMM0..XMM0 + 8],
        &v2.to_le_bytes()
    );
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    assert_eq!(regs.syscall_nr(), 60);
    assert_eq!(regs.syscall_args()[0], v2, "guest sees the new xmm0");

    // A forked thread's state, given before its first switch, reads back
    // as given (a checkpoint may come before it runs).
    let mut child = p.new_context().expect("context");
    child.set_fpstate(&fp).expect("set before the first switch");
    assert_eq!(child.fpstate().expect("read before the first switch"), fp);
}

#[test]
fn malformed_fpstate_is_an_error_not_a_panic() {
    let mem = MemFile::new();
    mem.write(0, &code(&[&mov_eax(39), &SYSCALL, &mov_eax(39), &SYSCALL]));
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    let good = ctx.fpstate().expect("fpstate");
    for len in [0, 511, good.len() - 1, good.len() + 64] {
        let r = ctx.set_fpstate(&vec![0; len]);
        assert!(r.is_err(), "length {len} accepted");
    }
    // Reserved MXCSR bits.
    let mut bad = good.clone();
    bad[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
    if bad.len() > 512 {
        // XSTATE_BV = x87|SSE, so that the kernel looks at MXCSR.
        bad[512..520].copy_from_slice(&3u64.to_le_bytes());
    }
    assert!(
        ctx.set_fpstate(&bad).is_err(),
        "reserved MXCSR bits accepted"
    );
    if good.len() > 512 {
        // XSAVE header: XCOMP_BV must be 0 in the standard format, and the
        // reserved header bytes too.
        let mut bad = good.clone();
        bad[520..528].copy_from_slice(&(1u64 << 63 | 3).to_le_bytes());
        assert!(ctx.set_fpstate(&bad).is_err(), "compacted header accepted");
        let mut bad = good.clone();
        bad[540] = 1;
        assert!(
            ctx.set_fpstate(&bad).is_err(),
            "reserved header bytes accepted"
        );
    }
    // The context still works, with its state intact.
    assert_eq!(ctx.fpstate().expect("fpstate"), good);
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
}

#[test]
fn new_stub_threads_start_with_clean_vector_registers() {
    let mem = MemFile::new();
    mem.write(0, &code(&[&mov_eax(39), &SYSCALL]));
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    let fp = ctx.fpstate().expect("fpstate");
    // x87 control word and MXCSR at their power-on values, XMM0..15 zero
    // (nothing left over from the Sentry thread the stub was forked from).
    assert_eq!(u16::from_le_bytes([fp[0], fp[1]]), 0x37f);
    assert_eq!(
        u32::from_le_bytes(fp[24..28].try_into().expect("4")),
        0x1f80
    );
    assert!(fp[XMM0..XMM0 + 256].iter().all(|&b| b == 0));
}

seccomp_trap_too!(
    two_threads_run_guest_code_concurrently_in_one_address_space,
    counters_advance_while_both_threads_spin,
    a_mapping_made_by_one_thread_is_seen_by_another,
    a_thread_that_never_switched_can_map,
    dropping_one_context_leaves_the_other_running,
    interrupt_reaches_only_its_own_context,
    one_context_can_switch_into_two_address_spaces,
    released_thread_is_replaced_on_next_use,
    fpstate_reads_and_writes_xmm0,
    malformed_fpstate_is_an_error_not_a_panic,
    new_stub_threads_start_with_clean_vector_registers,
);
