//! Sandbox start-up: wall time from spawning `ferrovisor do -- /bin/true` to
//! reaping it, against spawning `/bin/true` natively.

use std::path::Path;
use std::time::Duration;

use benches::{compare, criterion, runners, Comparison, Unit};
use criterion::SamplingMode;

fn main() {
    let runners = runners();
    let mut c = criterion();
    // Each iteration is a whole process (milliseconds), so every sample gets
    // the same iteration count rather than criterion's linear ramp, which
    // would need 55 runs at the least.
    let cmp = Comparison::new("startup", Unit::Ms).sampling(SamplingMode::Flat);
    compare(&mut c, &cmp, &runners, |runner, iters| {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            total += runner.run_wall(Path::new("/bin/true"), &[])?;
        }
        Ok(total)
    });
    c.final_summary();
}
