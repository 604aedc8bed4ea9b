//! The cost of listing a directory of about a thousand entries (/usr/bin):
//! open, getdents64 to the end, close, timed by the guest itself, natively
//! and under each platform.

use benches::{compare, criterion, runners, Comparison, Guest, Unit};

fn main() {
    let runners = runners();
    let mut c = criterion();
    compare(
        &mut c,
        &Comparison::new("readdir", Unit::NsPerIter),
        &runners,
        |runner, iters| runner.run_timed(Guest::Readdir, iters),
    );
    c.final_summary();
}
