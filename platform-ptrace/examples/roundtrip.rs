//! Syscall round-trip micro-benchmark of the ptrace platform: a guest loop
//! of `getppid`, answered at once, in ns per call, for each mode
//! (`PTRACE_SYSEMU`, seccomp-trap) and CPU placement; plus, for SYSEMU, the
//! cost of one injected syscall, of creating an address space (control
//! thread + stub) and of giving a further host thread its own stub thread.
//!
//! `cargo run --release -p platform-ptrace --example roundtrip -- [--mode sysemu|seccomp|all] [iterations]`

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::Instant;

use platform::{AddressSpace, Context, Event, Prot, Regs};
use platform_ptrace::{Mode, PtraceOptions, PtracePlatform};

const CODE: u64 = 0x10000;

fn memfd() -> OwnedFd {
    // SAFETY: valid NUL-terminated name.
    let fd = unsafe { libc::memfd_create(c"roundtrip".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // 1: mov $110,%eax (getppid); syscall; jmp 1b
    let code: [u8; 9] = [0xb8, 110, 0, 0, 0, 0x0f, 0x05, 0xeb, 0xf7];
    // SAFETY: writes `code` from a live buffer at offset 0 of our memfd.
    let n = unsafe { libc::pwrite(fd.as_raw_fd(), code.as_ptr().cast(), code.len(), 0) };
    assert_eq!(n, code.len() as isize);
    // SAFETY: plain integer arguments.
    assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), 0x1000) }, 0);
    fd
}

struct Figures {
    round_trip_ns: f64,
    inject_ns: f64,
    create_us: f64,
    thread_us: f64,
}

fn bench(options: PtraceOptions, iters: u32, extras: bool) -> Figures {
    let fd = memfd();
    let p = PtracePlatform::with_options(fd.as_fd(), options).expect("platform");
    let t = Instant::now();
    let as_ = p.new_ptrace_address_space().expect("address space");
    let create_us = t.elapsed().as_secs_f64() * 1e6;
    let rx = Prot {
        read: true,
        write: false,
        exec: true,
    };
    as_.map(CODE, 0x1000, rx, 0).expect("map");
    let mut ctx = p.new_ptrace_context();
    let mut regs = Regs::initial(CODE, 0);
    for i in 0..1000 {
        let ev = ctx.switch(&as_, &mut regs).expect("switch");
        assert_eq!(ev, Event::Syscall, "{regs:?}");
        assert_eq!(regs.syscall_nr(), 110);
        if i == 0 {
            // Patch the site as the Sentry would (when the platform can).
            let code = [0xb8, 110, 0, 0, 0, 0x0f, 0x05];
            if let Some(patch) = as_.syscall_patch(code, 110, regs.rip) {
                let at = regs.rip - 7 - CODE;
                platform::write_syscall_patch(patch, |i, b| {
                    // SAFETY: writes one byte from a live local into our memfd.
                    let n = unsafe {
                        libc::pwrite(
                            fd.as_raw_fd(),
                            (&b as *const u8).cast(),
                            1,
                            (at + i as u64) as i64,
                        )
                    };
                    assert_eq!(n, 1);
                });
            }
        }
        regs.rax = 1;
    }
    let t = Instant::now();
    for _ in 0..iters {
        let ev = ctx.switch(&as_, &mut regs).expect("switch");
        debug_assert_eq!(ev, Event::Syscall);
        regs.rax = 1;
    }
    let round_trip_ns = t.elapsed().as_nanos() as f64 / f64::from(iters);
    if !extras {
        return Figures {
            round_trip_ns,
            inject_ns: f64::NAN,
            create_us,
            thread_us: f64::NAN,
        };
    }
    let n = iters / 4;
    let t = Instant::now();
    for _ in 0..n {
        as_.inject_nop_for_bench().expect("inject");
    }
    let inject_ns = t.elapsed().as_nanos() as f64 / f64::from(n);
    // A further host thread: its first use creates its stub thread (a
    // request to the control thread, clone, seize, setup) and its end
    // lets it go; the second use is one plain injection, subtracted.
    const THREADS: u32 = 20;
    let mut thread_us = 0.0;
    for _ in 0..THREADS {
        thread_us += std::thread::scope(|s| {
            s.spawn(|| {
                let t = Instant::now();
                as_.inject_nop_for_bench().expect("inject");
                let first = t.elapsed();
                let t = Instant::now();
                as_.inject_nop_for_bench().expect("inject");
                (first.saturating_sub(t.elapsed())).as_secs_f64() * 1e6
            })
            .join()
            .expect("thread")
        });
    }
    Figures {
        round_trip_ns,
        inject_ns,
        create_us,
        thread_us: thread_us / f64::from(THREADS),
    }
}

fn native_getppid(iters: u32) -> f64 {
    let t = Instant::now();
    for _ in 0..iters {
        // SAFETY: no arguments.
        unsafe { libc::syscall(libc::SYS_getppid) };
    }
    t.elapsed().as_nanos() as f64 / f64::from(iters)
}

fn main() {
    let mut iters: u32 = 200_000;
    let mut modes = vec![Mode::Sysemu, Mode::SeccompTrap];
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--mode" => {
                modes = match args.next().as_deref() {
                    Some("sysemu" | "ptrace") => vec![Mode::Sysemu],
                    Some("seccomp" | "seccomp-trap") => vec![Mode::SeccompTrap],
                    Some("all") => vec![Mode::Sysemu, Mode::SeccompTrap],
                    other => panic!("--mode sysemu|seccomp|all, not {other:?}"),
                }
            }
            n => iters = n.parse().expect("iterations"),
        }
    }
    println!("native getppid: {:.0} ns/call", native_getppid(iters));
    let mut results = Vec::new();
    for &mode in &modes {
        let y = platform_ptrace::DEFAULT_YIELDS;
        let placements: &[(bool, u32, u32, bool, bool)] = match mode {
            // pinned same-core vs free; poke_rax is the default since it won
            Mode::Sysemu => &[(true, 0, 0, false, false), (false, 0, 0, false, false)],
            // pinned same-core (futex hand-off, or yields then futex) vs
            // free with spinning, each with the call site patched and not;
            // then the adaptive hand-off (the default), which chooses
            Mode::SeccompTrap => &[
                (true, 0, 0, false, false),
                (true, 0, 0, true, false),
                (true, 0, y, false, false),
                (true, 0, y, true, false),
                (false, 2000, 0, false, false),
                (false, 2000, 0, true, false),
                (false, 20000, 0, false, false),
                (false, 20000, 0, true, false),
                (true, 0, y, false, true),
                (true, 0, y, true, true),
            ],
        };
        for &(pin_cpu, spin, yields, patch_syscalls, adaptive) in placements {
            let options = PtraceOptions {
                pin_cpu,
                mode,
                spin,
                yields,
                patch_syscalls,
                adaptive,
                ..PtraceOptions::default()
            };
            let extras = mode == Mode::Sysemu;
            // A fresh thread per run: pinning sticks to the thread.
            let f = std::thread::spawn(move || bench(options, iters, extras))
                .join()
                .expect("bench thread");
            println!(
                "{mode:<11?} pin_cpu={pin_cpu:<5} spin={spin:<5} yields={yields:<2} patched={patch_syscalls:<5} adaptive={adaptive:<5}  round trip {:>6.0} ns/call   \
                 injected syscall {:>6.0} ns   new address space {:>6.0} µs   \
                 new stub thread {:>5.0} µs",
                f.round_trip_ns, f.inject_ns, f.create_us, f.thread_us
            );
            results.push((mode, pin_cpu, f.round_trip_ns));
        }
    }
    let best = |m: Mode| {
        results
            .iter()
            .filter(|r| r.0 == m)
            .map(|r| r.2)
            .fold(f64::INFINITY, f64::min)
    };
    let pinned = |m: Mode| {
        results
            .iter()
            .find(|r| r.0 == m && r.1)
            .map_or(f64::NAN, |r| r.2)
    };
    if modes.len() == 2 {
        println!(
            "pinned: sysemu {:.0} ns, seccomp-trap {:.0} ns, ratio {:.2}x; best of each: ratio {:.2}x",
            pinned(Mode::Sysemu),
            pinned(Mode::SeccompTrap),
            pinned(Mode::Sysemu) / pinned(Mode::SeccompTrap),
            best(Mode::Sysemu) / best(Mode::SeccompTrap)
        );
    }
}
