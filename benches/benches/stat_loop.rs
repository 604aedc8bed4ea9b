//! The cost of a path lookup with attributes: `stat` of /usr/bin/env in a
//! loop, timed by the guest itself, natively and under each platform. The
//! Sentry's dentry cache should keep repeated lookups off the gofer.

use benches::{compare, criterion, runners, Comparison, Guest, Unit};

fn main() {
    let runners = runners();
    let mut c = criterion();
    compare(
        &mut c,
        &Comparison::new("stat_loop", Unit::NsPerIter),
        &runners,
        |runner, iters| runner.run_timed(Guest::StatLoop, iters),
    );
    c.final_summary();
}
