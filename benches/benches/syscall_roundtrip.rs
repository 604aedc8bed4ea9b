//! The cost of one system call round trip: `getppid` in a loop, timed by the
//! guest itself, natively and under each platform.

use benches::{compare, criterion, runners, Comparison, Guest, Unit};

fn main() {
    let runners = runners();
    let mut c = criterion();
    compare(
        &mut c,
        &Comparison::new("syscall_roundtrip", Unit::NsPerCall),
        &runners,
        |runner, iters| runner.run_timed(Guest::GetppidLoop, iters),
    );
    c.final_summary();
}
