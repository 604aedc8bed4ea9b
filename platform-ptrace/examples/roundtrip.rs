//! Syscall round-trip micro-benchmark of the ptrace platform: a guest loop
//! of `getppid` through `PTRACE_SYSEMU`, answered at once, in ns per call,
//! for each combination of CPU pinning and rax-only register writes; plus
//! the cost of one injected syscall, of creating an address space (control
//! thread + stub) and of giving a further host thread its own stub thread.
//!
//! `cargo run --release -p platform-ptrace --example roundtrip [iterations]`

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::Instant;

use platform::{AddressSpace, Context, Event, Prot, Regs};
use platform_ptrace::{PtraceOptions, PtracePlatform};

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

fn bench(options: PtraceOptions, iters: u32) -> (f64, f64, f64, f64) {
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
    for _ in 0..1000 {
        let ev = ctx.switch(&as_, &mut regs).expect("switch");
        assert_eq!(ev, Event::Syscall, "{regs:?}");
        regs.rax = 1;
    }
    let t = Instant::now();
    for _ in 0..iters {
        let ev = ctx.switch(&as_, &mut regs).expect("switch");
        debug_assert_eq!(ev, Event::Syscall);
        regs.rax = 1;
    }
    let rt_ns = t.elapsed().as_nanos() as f64 / f64::from(iters);
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
    (rt_ns, inject_ns, create_us, thread_us / f64::from(THREADS))
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
    let iters: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    println!("native getppid: {:.0} ns/call", native_getppid(iters));
    for pin_cpu in [false, true] {
        for poke_rax in [false, true] {
            let options = PtraceOptions { pin_cpu, poke_rax };
            // A fresh thread per run: pinning sticks to the thread.
            let (rt, inject, create, thread) = std::thread::spawn(move || bench(options, iters))
                .join()
                .expect("bench thread");
            println!(
                "pin_cpu={pin_cpu:<5} poke_rax={poke_rax:<5}  round trip {rt:>6.0} ns/call   \
                 injected syscall {inject:>6.0} ns   new address space {create:>6.0} µs   \
                 new stub thread {thread:>5.0} µs"
            );
        }
    }
}
