//! The cost of reading the clock: `clock_gettime(CLOCK_MONOTONIC)` through
//! the C library (so through the vDSO) in a loop, timed by the guest itself,
//! natively and under each platform.

use benches::{compare, criterion, runners, Comparison, Guest, Unit};

fn main() {
    let runners = runners();
    let mut c = criterion();
    compare(
        &mut c,
        &Comparison::new("clock_gettime", Unit::NsPerCall),
        &runners,
        |runner, iters| runner.run_timed(Guest::ClockGettimeLoop, iters),
    );
    c.final_summary();
}
