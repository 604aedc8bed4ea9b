//! Wake-ups among sleepers: one byte ping-ponged between two threads over a
//! pair of pipes while 200 more threads of the guest sleep in `read` on
//! pipes of their own, timed by the guest itself, natively and under each
//! platform; microseconds per round trip.
//!
//! A write should wake only the waiters of its own pipe: with wait queues
//! per object the round trip costs what it does without the crowd, with
//! one sandbox-wide broadcast every sleeper wakes to re-check on every
//! write.

use benches::{compare, criterion, runners, Comparison, Guest, Unit};
use criterion::SamplingMode;

fn main() {
    let runners = runners();
    let mut c = criterion();
    compare(
        &mut c,
        &Comparison::new("pipe_pingpong_blocked", Unit::UsPerRoundTrip)
            .sampling(SamplingMode::Flat),
        &runners,
        |runner, iters| runner.run_timed(Guest::PipePingpongBlocked, iters),
    );
    c.final_summary();
}
