//! The cost of one system call round trip: `getppid` in a loop, timed by the
//! guest itself, natively, under each platform and under gVisor when it is
//! there; through the generic `syscall(2)` and through glibc's own wrapper
//! (a site the sandbox may patch).

use benches::{compare, criterion, runners, Comparison, Guest, Unit};

fn main() {
    let runners = runners();
    let mut c = criterion();
    for (name, guest) in [
        ("syscall_roundtrip", Guest::GetppidLoop),
        ("syscall_roundtrip_libc", Guest::GetppidLibcLoop),
    ] {
        compare(
            &mut c,
            &Comparison::new(name, Unit::NsPerCall),
            &runners,
            |runner, iters| runner.run_timed(guest, iters),
        );
    }
    c.final_summary();
}
