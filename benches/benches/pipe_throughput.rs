//! Pipe throughput: a forked child writes through a pipe in 64 KiB writes
//! and the parent reads and discards, timed by the guest itself, natively
//! and under each platform.
//!
//! One iteration is one MiB, so the medians print as MiB/s. The ratio is, as
//! in every bench, sandbox time over native time, i.e. native MiB/s over
//! sandbox MiB/s: "ratio 4.0x" means the sandbox moves a quarter as much.

use benches::{compare, criterion, runners, Comparison, Guest, Unit};

fn main() {
    let runners = runners();
    let mut c = criterion();
    compare(
        &mut c,
        &Comparison::new("pipe_throughput", Unit::MibPerSec),
        &runners,
        |runner, iters| runner.run_timed(Guest::PipeThroughput, iters),
    );
    c.final_summary();
}
