//! The random-syscall fuzzer (`fuzz/fuzz.c`) in the sandbox, on every
//! platform: no sequence of guest calls may end the sandbox any other way
//! than the guest's own exit. Seeds in `fuzz/seeds` are replayed first; then
//! seeds 16, 17, ... (new ones from the clock with
//! `FERROVISOR_FUZZ_RANDOM=1`) run for `$FERROVISOR_FUZZ_SECS` (default 40)
//! per platform. A failing seed is printed and appended to
//! `target/fuzz-failed-seeds`; add it to `fuzz/seeds` with the fix.

#[allow(dead_code)]
mod harness;

use std::io::Write;
use std::path::Path;

/// Seconds one sandbox fuzzes (under the harness's one-minute limit).
const RUN_SECS: u64 = 40;

fn replayed() -> Vec<u64> {
    include_str!("../fuzz/seeds")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.parse().expect("fuzz/seeds: one decimal seed per line"))
        .collect()
}

fn fuzz_once(platform: &str, seed: u64, secs: u64) {
    let fuzzer = Path::new(env!("SYSCALL_TESTS_FUZZER"));
    // (shown if the run hangs and the harness gives up on it)
    eprintln!("fuzz: seed {seed} on {platform} for {secs} s");
    let label = format!("fuzz-{seed}");
    let out = harness::run_sandboxed_on(
        platform,
        &label,
        fuzzer,
        &[&seed.to_string(), &secs.to_string()],
    );
    if out.status == 0 && out.stdout.contains("fuzz: ") {
        return;
    }
    let note = format!("{platform} {seed}\n");
    let failed = Path::new(env!("CARGO_TARGET_TMPDIR")).join("../fuzz-failed-seeds");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(failed)
    {
        let _ = f.write_all(note.as_bytes());
    }
    panic!(
        "fuzz seed {seed} ended the sandbox on {platform}: status {}\nstdout:\n{}\nstderr:\n{}\n\
         replay: {} do --platform {platform} -- {} {seed} {secs}",
        out.status,
        out.stdout,
        out.stderr,
        harness::ferrovisor_bin().display(),
        fuzzer.display(),
    );
}

fn fuzz(platform: &str) {
    if !harness::platforms().iter().any(|p| p == platform) {
        return;
    }
    for seed in replayed() {
        fuzz_once(platform, seed, 12);
    }
    let total: u64 = std::env::var("FERROVISOR_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(RUN_SECS);
    // Fixed seeds unless asked for new ones, so that a run is repeatable
    // (a hang ends a run by the harness's limit, not by a report).
    let base = match std::env::var("FERROVISOR_FUZZ_RANDOM") {
        Ok(v) if !v.is_empty() && v != "0" => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs()),
        _ => 1,
    };
    let mut left = total;
    let mut n = 0;
    while left > 0 {
        let secs = left.min(RUN_SECS);
        fuzz_once(platform, base * 16 + n, secs);
        left -= secs;
        n += 1;
    }
}

#[test]
fn fuzz_seccomp() {
    fuzz("seccomp");
}

#[test]
fn fuzz_seccomp_spin() {
    fuzz("seccomp-spin");
}

#[test]
fn fuzz_ptrace() {
    fuzz("ptrace");
}

/// Where `/dev/kvm` opens (harness::platforms lists kvm then).
#[test]
fn fuzz_kvm() {
    fuzz("kvm");
}
