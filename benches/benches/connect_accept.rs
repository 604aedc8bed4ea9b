//! TCP connection rate: connect, accept and both closes on 127.0.0.1
//! between two processes, one connection at a time, timed by the guest
//! itself, natively and under each platform.
//!
//! One iteration is one connection, so the medians print as connections per
//! second; the ratio is, as in every bench, sandbox time over native time.

use benches::{compare, criterion, runners, Comparison, Guest, Unit};
use criterion::SamplingMode;

fn main() {
    let runners = runners();
    let mut c = criterion();
    // The same count in every sample: natively each connection leaves a
    // TIME-WAIT entry on the host holding an ephemeral port, and the linear
    // ramp would put ten times the first sample's count into the last run.
    let cmp = Comparison::new("connect_accept", Unit::ConnPerSec).sampling(SamplingMode::Flat);
    compare(&mut c, &cmp, &runners, |runner, iters| {
        runner.run_timed(Guest::ConnectAccept, iters)
    });
    c.final_summary();
}
