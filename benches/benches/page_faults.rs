//! First touches of fresh anonymous pages, timed by the guest itself,
//! natively and under each platform: the host kernel's fault path on the
//! stub platforms, KVM's walk of the Sentry's page tables on `kvm`.

use benches::{compare, criterion, runners, Comparison, Guest, Unit};

fn main() {
    let runners = runners();
    let mut c = criterion();
    compare(
        &mut c,
        &Comparison::new("page_faults", Unit::NsPerIter),
        &runners,
        |runner, iters| runner.run_timed(Guest::PageFaults, iters),
    );
    c.final_summary();
}
