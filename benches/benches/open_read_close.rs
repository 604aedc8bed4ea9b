//! The cost of reading a small file: open, read 4 KiB, close of
//! /etc/os-release in a loop, timed by the guest itself, natively and under
//! each platform.

use benches::{compare, criterion, runners, Comparison, Guest, Unit};

fn main() {
    let runners = runners();
    let mut c = criterion();
    compare(
        &mut c,
        &Comparison::new("open_read_close", Unit::NsPerIter),
        &runners,
        |runner, iters| runner.run_timed(Guest::OpenReadClose, iters),
    );
    c.final_summary();
}
