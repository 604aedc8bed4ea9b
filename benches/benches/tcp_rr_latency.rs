//! TCP request/response latency: one-byte requests and one-byte responses
//! over one `TCP_NODELAY` connection on 127.0.0.1 between two processes,
//! timed by the guest itself, natively and under each platform; microseconds
//! per round trip.

use benches::{compare, criterion, runners, Comparison, Guest, Unit};

fn main() {
    let runners = runners();
    let mut c = criterion();
    compare(
        &mut c,
        &Comparison::new("tcp_rr_latency", Unit::UsPerRoundTrip),
        &runners,
        |runner, iters| runner.run_timed(Guest::TcpRrLatency, iters),
    );
    c.final_summary();
}
