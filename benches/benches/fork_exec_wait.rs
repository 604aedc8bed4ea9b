//! The cost of running a command: fork, execve of /bin/true in the child and
//! wait4 in the parent, in a loop timed by the guest itself, natively and
//! under each platform; nanoseconds per round.

use benches::{compare, criterion, runners, Comparison, Guest, Unit};
use criterion::SamplingMode;

fn main() {
    let runners = runners();
    let mut c = criterion();
    // A round takes hundreds of microseconds natively and milliseconds in the
    // sandbox, so every sample gets the same iteration count rather than
    // criterion's linear ramp, which would need 55 times the first sample's.
    let cmp = Comparison::new("fork_exec_wait", Unit::NsPerIter).sampling(SamplingMode::Flat);
    compare(&mut c, &cmp, &runners, |runner, iters| {
        runner.run_timed(Guest::ForkExecWait, iters)
    });
    c.final_summary();
}
