//! Seccomp-trap mode specifics: register round trips through the signal
//! frame, registers the Sentry changes, isolation of guest system calls and
//! of the handler's own allowed calls, the stub's mappings, and the
//! fallback without FSGSBASE.

mod common;

use common::*;
use platform::{AddressSpace, Error, Event, Platform, Regs};
use platform_ptrace::{
    Mode, PtraceAddressSpace, PtraceOptions, FAST_CODE, FAST_CODE_LEN, FAST_MIN_ADDR, FAST_TABLE,
    FAST_TABLE_LEN, SLOTS_BASE, SLOTS_LEN, STUB_BASE,
};

fn trap() -> PtraceOptions {
    PtraceOptions {
        mode: Mode::SeccompTrap,
        ..PtraceOptions::default()
    }
}

fn pid_of(as_: &dyn AddressSpace) -> i32 {
    as_.as_any()
        .downcast_ref::<PtraceAddressSpace>()
        .expect("ptrace address space")
        .stub_pid()
}

/// Every GPR the Sentry writes at one syscall is what the guest has at the
/// next (`syscall; syscall`: nothing in between touches them), in both modes.
fn every_gpr_round_trips() {
    let mem = MemFile::new();
    mem.write(0, &code(&[&SYSCALL, &SYSCALL]));
    let p = mem.platform();
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    regs.rax = 39;
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    assert_eq!(regs.syscall_nr(), 39);
    assert_eq!(regs.rip, CODE + 2);
    let mut want = regs;
    let mut v = 0x1111_0000_0000_0001u64;
    for r in [
        &mut want.r15,
        &mut want.r14,
        &mut want.r13,
        &mut want.r12,
        &mut want.rbp,
        &mut want.rbx,
        &mut want.r11,
        &mut want.r10,
        &mut want.r9,
        &mut want.r8,
        &mut want.rcx,
        &mut want.rdx,
        &mut want.rsi,
        &mut want.rdi,
    ] {
        *r = v;
        v = v.wrapping_add(0x0101_0101_0101_0101);
    }
    // rax becomes the next call's number.
    want.rax = 102;
    want.rsp = DATA + 0x400;
    let mut regs = want;
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    assert_eq!(regs.syscall_nr(), 102);
    assert_eq!(regs.rip, CODE + 4);
    let mut got = regs;
    got.rip = want.rip;
    got.orig_rax = want.orig_rax;
    got.rax = want.rax;
    // The `syscall` instruction itself loads rcx (return rip) and r11
    // (rflags) before anyone sees them.
    got.rcx = want.rcx;
    got.r11 = want.r11;
    assert_eq!(got, want, "\n got {regs:#x?}\nwant {want:#x?}");
}

#[test]
fn rax_only_results_reach_the_guest() {
    let mem = MemFile::new();
    mem.write(
        0,
        &code(&[&mov_eax(39), &SYSCALL, &MOV_RAX_RDI, &exit_call()]),
    );
    let p = mem.platform_with(trap());
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    for i in 0..1000u64 {
        regs.rip = CODE;
        assert_eq!(
            ctx.switch(&*as_, &mut regs).expect("switch"),
            Event::Syscall
        );
        assert_eq!(regs.syscall_nr(), 39);
        assert_eq!(
            regs.rax as i64,
            -(libc::ENOSYS as i64),
            "as at a SYSEMU stop"
        );
        regs.rax = i * 7;
        assert_eq!(
            ctx.switch(&*as_, &mut regs).expect("switch"),
            Event::Syscall
        );
        assert_eq!(regs.syscall_nr(), 60);
        assert_eq!(regs.syscall_args()[0], i * 7);
    }
}

/// The machine's idle time so far, in clock ticks (`/proc/stat`).
fn idle_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let cpu = stat.lines().next().unwrap_or("");
    // cpu user nice system idle iowait ...
    cpu.split_whitespace()
        .skip(4)
        .take(2)
        .filter_map(|f| f.parse::<u64>().ok())
        .sum()
}

/// A guest making calls back to back, in the adaptive hand-off: every
/// answer reaches the guest while the runner changes CPU and way of
/// waiting; with a second CPU that sat idle meanwhile it tries spinning at
/// least once (without one, by design, it does not: other work is running).
#[test]
fn adaptive_hand_off_answers_every_call() {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let before = platform_ptrace::handoff_stats();
    let (idle_before, started) = (idle_ticks(), std::time::Instant::now());
    // A thread of its own: the platform pins the thread that switches.
    std::thread::spawn(|| {
        let mem = MemFile::new();
        // 1: getpid; rdi = the answer; jmp 1b
        mem.write(
            0,
            &code(&[&mov_eax(39), &SYSCALL, &MOV_RAX_RDI, &[0xeb, 0xf4]]),
        );
        let p = mem.platform_with(trap());
        let as_ = p.new_address_space().expect("address space");
        map_code_and_data(&*as_);
        let mut ctx = p.new_context().expect("context");
        let mut regs = start_regs();
        let mut answer = None;
        for i in 0..40_000u64 {
            assert_eq!(
                ctx.switch(&*as_, &mut regs).expect("switch"),
                Event::Syscall
            );
            assert_eq!(regs.syscall_nr(), 39, "call {i}");
            if let Some(a) = answer {
                assert_eq!(regs.rdi, a, "answer to call {}", i - 1);
            }
            regs.rax = i * 3 + 1;
            answer = Some(regs.rax);
        }
    })
    .join()
    .expect("guest thread");
    let after = platform_ptrace::handoff_stats();
    let events = |h: platform_ptrace::HandoffStats| h.yield_events + h.spin_events;
    assert!(
        events(after) >= events(before) + 40_000,
        "{before:?} {after:?}"
    );
    // USER_HZ is 100: half a CPU idle over the run, at least.
    let elapsed_ticks = started.elapsed().as_millis() as u64 / 10;
    let idle = idle_ticks().saturating_sub(idle_before);
    if cpus >= 2 && idle * 2 >= elapsed_ticks.max(1) {
        assert!(
            after.to_spin > before.to_spin,
            "{before:?} {after:?} (idle {idle} of {elapsed_ticks} ticks)"
        );
    }
}

/// The Sentry moves rip, rsp and fs_base at a syscall (as execve and
/// signal delivery do): the guest continues there with them.
fn rip_rsp_and_fs_base_changes_take_effect(options: PtraceOptions) {
    let mem = MemFile::new();
    mem.write(0, &code(&[&mov_eax(39), &SYSCALL, &UD2]));
    // At 0x100: rdi = fs:0, rsi = (rsp), exit.
    mem.write(
        0x100,
        &code(&[
            &LOAD_FS0_RAX,
            &MOV_RAX_RDI,
            &[0x48, 0x8b, 0x34, 0x24],
            &exit_call(),
        ]),
    );
    mem.write_u64(DATA_OFF + 0x40, 0xaaaa_bbbb);
    mem.write_u64(DATA_OFF + 0x80, 0xcccc_dddd);
    mem.write_u64(DATA_OFF + 0x600, 0x1234);
    let p = mem.platform_with(options);
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    regs.fs_base = DATA + 0x40;
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    assert_eq!(regs.fs_base, DATA + 0x40);
    regs.rip = CODE + 0x100;
    regs.rsp = DATA + 0x600;
    regs.fs_base = DATA + 0x80;
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    assert_eq!(regs.syscall_nr(), 60);
    assert_eq!(regs.syscall_args()[0], 0xcccc_dddd, "new fs_base used");
    assert_eq!(regs.syscall_args()[1], 0x1234, "new rsp used");
    assert_eq!(regs.fs_base, DATA + 0x80);
    assert_eq!(regs.rsp, DATA + 0x600);
}

#[test]
fn rip_rsp_and_fs_base_changes_take_effect_with_fsgsbase() {
    rip_rsp_and_fs_base_changes_take_effect(trap());
}

#[test]
fn rip_rsp_and_fs_base_changes_take_effect_without_fsgsbase() {
    rip_rsp_and_fs_base_changes_take_effect(PtraceOptions {
        fsgsbase: false,
        ..trap()
    });
}

#[test]
fn rip_rsp_and_fs_base_changes_take_effect_sysemu() {
    rip_rsp_and_fs_base_changes_take_effect(PtraceOptions::default());
}

/// Guest `getpid`, `kill(1, SIGKILL)` (pid 1 in the stub's namespace is
/// the stub) and `openat` come back as events and never run on the host.
#[test]
fn guest_syscalls_never_reach_the_host() {
    let mem = MemFile::new();
    mem.write(
        0,
        &code(&[
            &mov_eax(39),
            &SYSCALL,
            &mov_edi(1),
            &[0xbe, 9, 0, 0, 0], // mov $9,%esi
            &mov_eax(62),
            &SYSCALL,
            &mov_eax(257),
            &SYSCALL,
            &exit_call(),
        ]),
    );
    mem.write(DATA_OFF + 0x100, b"/etc/passwd\0");
    let p = mem.platform_with(trap());
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let pid = pid_of(&*as_);
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    regs.rdi = libc::AT_FDCWD as u64;
    regs.rsi = DATA + 0x100;
    for nr in [39, 62, 257, 60] {
        if nr == 257 {
            regs.rdi = libc::AT_FDCWD as u64;
            regs.rsi = DATA + 0x100;
        }
        assert_eq!(
            ctx.switch(&*as_, &mut regs).expect("switch"),
            Event::Syscall
        );
        assert_eq!(regs.syscall_nr(), nr);
        regs.rax = (-(libc::EPERM as i64)) as u64;
    }
    // Still alive (the kill did not run), and no descriptor was opened.
    let fds: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fd dir")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf8"))
        .collect();
    assert_eq!(fds, ["3"]);
}

/// A guest that jumps to the handler's own `futex` with other arguments
/// (another address, another op), or to its `arch_prctl` with another
/// code, is killed by the filter.
#[test]
fn forged_handler_calls_kill_the_stub() {
    let [futex, _sigreturn, arch_prctl] = platform_ptrace::trap_handler_syscalls_for_test();
    let cases: [(u64, u64, [u64; 2]); 5] = [
        (futex, 202, [DATA, 0]),           // not a slot
        (futex, 202, [SLOTS_BASE + 8, 0]), // not a state word
        (futex, 202, [SLOTS_BASE, 9]),     // FUTEX_WAIT_BITSET
        (futex, 39, [SLOTS_BASE, 0]),      // another call from there
        (arch_prctl, 158, [0x3001, 0]),    // ARCH_CET_STATUS, not FS/GS
    ];
    for (rip, nr, [a0, a1]) in cases {
        let mem = MemFile::new();
        let p = mem.platform_with(trap());
        let as_ = p.new_address_space().expect("address space");
        map_code_and_data(&*as_);
        let mut ctx = p.new_context().expect("context");
        let mut regs = start_regs();
        regs.rip = rip;
        regs.rax = nr;
        regs.rdi = a0;
        regs.rsi = a1;
        let r = ctx.switch(&*as_, &mut regs);
        assert!(
            matches!(r, Err(Error::StubDied(_))),
            "{rip:#x} nr {nr} ({a0:#x}, {a1}): {r:?}"
        );
    }
}

#[test]
fn stub_maps_only_guest_memory_and_platform_pages() {
    let mem = MemFile::new();
    mem.write(0, &code(&[&mov_eax(39), &SYSCALL]));
    let p = mem.platform_with(trap());
    assert_eq!(p.max_user_address(), FAST_CODE);
    assert_eq!(FAST_CODE + FAST_CODE_LEN, SLOTS_BASE);
    let as_ = p.new_address_space().expect("address space");
    assert_eq!(as_.min_user_address(), FAST_MIN_ADDR);
    map_code_and_data(&*as_);
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", pid_of(&*as_))).expect("maps");
    for line in maps.lines() {
        if line.ends_with("[vsyscall]") {
            continue;
        }
        let range = line.split_whitespace().next().expect("range");
        let (s, e) = range.split_once('-').expect("dash");
        let s = u64::from_str_radix(s, 16).expect("hex");
        let e = u64::from_str_radix(e, 16).expect("hex");
        let perms = line.split_whitespace().nth(1).expect("perms");
        if (CODE..CODE + 0x1000).contains(&s) || (DATA..DATA + 0x1000).contains(&s) {
            continue;
        }
        if s >= SLOTS_BASE && e <= SLOTS_BASE + SLOTS_LEN {
            assert_eq!(perms, "rw-s", "slots: shared, never executable: {line}");
            continue;
        }
        if s == FAST_TABLE && e == FAST_TABLE + FAST_TABLE_LEN {
            assert_eq!(perms, "r--s", "patched-site pointers: read-only: {line}");
            continue;
        }
        if s == FAST_CODE && e == FAST_CODE + FAST_CODE_LEN {
            assert_eq!(
                perms, "r-xs",
                "patched-site entries: never writable: {line}"
            );
            continue;
        }
        assert!(
            s >= STUB_BASE && e <= STUB_BASE + 0x2000,
            "unexpected: {line}\n{maps}"
        );
        assert!(!perms.contains('w'), "stub code/filter writable: {line}");
    }
    // Guest mappings may not reach the slots, the patched-site entries or
    // their pointers.
    for (at, len) in [
        (SLOTS_BASE - 0x1000, 0x2000),
        (FAST_CODE - 0x1000, 0x2000),
        (FAST_TABLE, 0x1000),
        (FAST_TABLE - 0x1000, 0x2000),
    ] {
        assert!(
            matches!(
                as_.map(at, len, platform::Prot::RW, 0),
                Err(Error::Misuse(_))
            ),
            "{at:#x}+{len:#x}"
        );
    }
    as_.map(FAST_TABLE - 0x1000, 0x1000, platform::Prot::RW, 0)
        .expect("below the table is the guest's");
}

/// Writes `patch` over the site at `at` in the code page the way the
/// Sentry does.
fn patch_site(mem: &MemFile, at: u64, patch: [u8; 7]) {
    platform::write_syscall_patch(patch, |i, b| mem.write(at - CODE + i as u64, &[b]));
}

/// `mov $39,%eax; syscall` (0), `mov %rax,%rdi` (7), `mov $60,%eax;
/// syscall` (10) in seccomp-trap mode, run up to its first (trapped) call:
/// the memory, platform, address space, context and registers.
fn getpid_then_exit() -> (
    MemFile,
    platform_ptrace::PtracePlatform,
    std::sync::Arc<dyn AddressSpace>,
    Box<dyn platform::Context>,
    Regs,
) {
    let mem = MemFile::new();
    mem.write(
        0,
        &code(&[&mov_eax(39), &SYSCALL, &MOV_RAX_RDI, &exit_call()]),
    );
    let p = mem.platform_with(trap());
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let mut ctx = p.new_context().expect("context");
    let mut regs = start_regs();
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    (mem, p, as_, ctx, regs)
}

/// A patched `mov $nr, %eax; syscall` reaches the Sentry without a trap,
/// with every register as the trap would show it; results, register
/// changes, the FP state and a jump to the old `syscall` instruction all
/// behave as before the patch.
#[test]
fn patched_sites_behave_like_trapped_ones() {
    let (mem, _p, as_, mut ctx, mut regs) = getpid_then_exit();
    let trapped = regs;
    let original = [0xb8, 39, 0, 0, 0, 0x0f, 0x05];
    assert_eq!(
        as_.syscall_patch(original, 110, CODE + 7),
        None,
        "reached by a jump"
    );
    let patch = as_
        .syscall_patch(original, 39, CODE + 7)
        .expect("patchable");
    patch_site(&mem, CODE, patch);
    regs.rax = 5;
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    assert_eq!(regs.syscall_nr(), 60);
    assert_eq!(regs.syscall_args()[0], 5);
    // Through the patched site: the same registers as the trap gave.
    let mut fast = start_regs();
    fast.rbx = 0x1234;
    fast.r12 = 0x5678;
    fast.r15 = u64::MAX;
    fast.rdx = 3;
    assert_eq!(
        ctx.switch(&*as_, &mut fast).expect("switch"),
        Event::Syscall
    );
    assert_eq!(fast.syscall_nr(), 39);
    assert_eq!(fast.rax as i64, -(libc::ENOSYS as i64));
    assert_eq!(fast.rip, CODE + 7);
    assert_eq!(fast.rcx, CODE + 7, "rcx holds the return address");
    assert_eq!(fast.r11, fast.eflags, "r11 holds the flags");
    assert_eq!(fast.eflags & 0x2, 0x2);
    assert_eq!(
        (fast.rbx, fast.r12, fast.r15, fast.rdx),
        (0x1234, 0x5678, u64::MAX, 3)
    );
    assert_eq!((fast.rsp, fast.fs_base, fast.gs_base), (trapped.rsp, 0, 0));
    // The FP state of a fast call is there (through a full frame).
    assert!(ctx.fpstate().expect("fpstate").len() >= 512);
    fast.rax = 77;
    assert_eq!(
        ctx.switch(&*as_, &mut fast).expect("switch"),
        Event::Syscall
    );
    assert_eq!((fast.syscall_nr(), fast.syscall_args()[0]), (60, 77));
    // Many rax-only round trips, then one where the Sentry moves rip (a
    // restart: back to the old `syscall`, now an invalid opcode).
    for i in 0..1000 {
        let mut r = start_regs();
        assert_eq!(ctx.switch(&*as_, &mut r).expect("switch"), Event::Syscall);
        assert_eq!(r.syscall_nr(), 39);
        r.rax = i;
        assert_eq!(ctx.switch(&*as_, &mut r).expect("switch"), Event::Syscall);
        assert_eq!(r.syscall_args()[0], i);
    }
    let mut r = start_regs();
    assert_eq!(ctx.switch(&*as_, &mut r).expect("switch"), Event::Syscall);
    r.rip -= 2;
    r.rax = r.orig_rax;
    let ev = ctx.switch(&*as_, &mut r).expect("switch");
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
    assert_eq!(r.rip, CODE + 5, "the old syscall instruction faults");
}

/// A guest that moved its gs base away from the platform's still makes
/// its calls from a patched site (the slow way).
#[test]
fn patched_sites_work_with_a_foreign_gs_base() {
    let (mem, _p, as_, mut ctx, _) = getpid_then_exit();
    let patch = as_
        .syscall_patch([0xb8, 39, 0, 0, 0, 0x0f, 0x05], 39, CODE + 7)
        .expect("patchable");
    patch_site(&mem, CODE, patch);
    // gs at the data page (whose word at 64 is not a slot), then at 0
    // (unmapped): both fall back to a full frame of the same call.
    for gs in [DATA, 0x1000_0000] {
        let mut r = start_regs();
        r.gs_base = gs;
        r.rbx = 42;
        assert_eq!(ctx.switch(&*as_, &mut r).expect("switch"), Event::Syscall);
        assert_eq!(
            (r.syscall_nr(), r.rip, r.rbx, r.gs_base),
            (39, CODE + 7, 42, gs)
        );
        r.rax = 9;
        assert_eq!(ctx.switch(&*as_, &mut r).expect("switch"), Event::Syscall);
        assert_eq!((r.syscall_nr(), r.syscall_args()[0]), (60, 9));
    }
}

/// The stub's `Seccomp:` is on and the handler's slot page is the only
/// place a guest syscall's registers go: a guest syscall issued while
/// another host thread maps memory still comes back.
#[test]
fn threads_and_mapping_interleave() {
    let mem = MemFile::new();
    mem.write(0, &code(&[&LOAD_RBX_RAX, &MOV_RAX_RDI, &exit_call()]));
    mem.write_u64(0x5008, 0x77);
    let p = mem.platform_with(trap());
    let as_ = p.new_address_space().expect("address space");
    map_code_and_data(&*as_);
    let mut ctx = p.new_context().expect("context");
    let mut regs: Regs = start_regs();
    regs.rbx = 0x40008;
    let ev = ctx.switch(&*as_, &mut regs).expect("switch");
    assert!(matches!(ev, Event::Fault { addr: 0x40008, .. }), "{ev:?}");
    std::thread::scope(|s| {
        s.spawn(|| {
            as_.map(0x40000, 0x1000, platform::Prot::RW, 0x5000)
                .expect("map")
        })
        .join()
        .expect("mapper");
    });
    assert_eq!(
        ctx.switch(&*as_, &mut regs).expect("switch"),
        Event::Syscall
    );
    assert_eq!(regs.syscall_args()[0], 0x77);
}

#[test]
fn every_gpr_round_trips_sysemu() {
    in_mode(Mode::Sysemu, every_gpr_round_trips);
}

#[test]
fn every_gpr_round_trips_seccomp_trap() {
    in_mode(Mode::SeccompTrap, every_gpr_round_trips);
}
