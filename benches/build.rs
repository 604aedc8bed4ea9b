//! Compiles the C guest programs in `guests/` into static binaries in
//! `OUT_DIR`, where `benches::guest_path` finds them.
//!
//! The guests are static so the per-call numbers measure the platform, not
//! the dynamic loader, and so they run under a Sentry that has no shared
//! libraries to offer.

use std::env;
use std::path::PathBuf;
use std::process::Command;

/// Guest programs, by file stem; keep in step with `benches::Guest`.
const GUESTS: &[&str] = &[
    "getppid_loop",
    "getppid_libc_loop",
    "open_read_close",
    "clock_gettime_loop",
    "fork_exec_wait",
    "pipe_throughput",
    "tcp_loopback_throughput",
    "tcp_rr_latency",
    "connect_accept",
    "stat_loop",
    "page_faults",
    "readdir",
    "pipe_pingpong_blocked",
];

fn main() {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let cc = env::var("BENCH_GUEST_CC").unwrap_or_else(|_| "gcc".to_owned());
    println!("cargo:rerun-if-env-changed=BENCH_GUEST_CC");
    println!("cargo:rerun-if-changed=guests/guest_common.h");
    println!("cargo:rerun-if-changed=guests/tcp_common.h");

    for guest in GUESTS {
        let source = format!("guests/{guest}.c");
        println!("cargo:rerun-if-changed={source}");
        let output = out_dir.join(guest);
        let status = Command::new(&cc)
            .args(["-static", "-O2", "-Wall", "-Wextra", "-Werror", "-o"])
            .arg(&output)
            .arg(&source)
            .status()
            .unwrap_or_else(|e| panic!("cannot run `{cc}` to build guest {guest}: {e}"));
        assert!(
            status.success(),
            "`{cc} -static -O2 {source}` failed ({status}); \
             the benches need gcc with a static libc (Debian: libc6-dev)"
        );
    }
}
