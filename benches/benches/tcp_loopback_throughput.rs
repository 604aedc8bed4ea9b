//! TCP loopback throughput: a forked child connects to its parent over
//! 127.0.0.1 and writes in 64 KiB writes, the parent reads and discards,
//! timed by the guest itself, natively (the host's loopback) and under each
//! platform (the sandbox's netstack).
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
        &Comparison::new("tcp_loopback_throughput", Unit::MibPerSec),
        &runners,
        |runner, iters| runner.run_timed(Guest::TcpLoopbackThroughput, iters),
    );
    c.final_summary();
}
