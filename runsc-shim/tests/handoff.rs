//! `do --stats` (issue 24): the default platform counts every system call
//! it hands to the Sentry and says how; the others say their way is fixed.
//! A guest's calls are answered right whichever way the platform chose.

mod common;

use std::time::Duration;

use common::{command, compile_static, run, TempDir};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");

/// getppid() through glibc N times (a patchable site), summed: the sum
/// shows that every answer reached the guest.
const LOOP: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
	long n = atol(argv[1]), sum = 0;
	for (long i = 0; i < n; i++) sum += getppid();
	printf("%ld\n", sum);
	return 0;
}
"#;

#[test]
fn stats_count_the_hand_offs_of_the_default_platform() {
    let dir = TempDir::new("handoff");
    let bin = compile_static(dir.path(), "getppid_loop", LOOP);
    let bin = bin.to_str().expect("utf-8 path");
    let n: u64 = 20_000;
    for platform in ["seccomp", "seccomp-yield"] {
        let mut cmd = command(FERROVISOR, &[]);
        cmd.args(["do", "--platform", platform, "--stats", "--", bin])
            .arg(n.to_string());
        let out = run(cmd, None, Duration::from_secs(120));
        assert_eq!(out.status, 0, "{platform}: {}", out.stderr);
        // The guest is PID 1 of its sandbox: its parent reads as 0.
        assert_eq!(out.stdout, "0\n", "{platform}");
        let line = out
            .stderr
            .lines()
            .find(|l| l.starts_with("ferrovisor: hand-offs:"))
            .unwrap_or_else(|| panic!("{platform}: no stats in {:?}", out.stderr));
        if platform == "seccomp" {
            let words: Vec<u64> = line
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|w| w.parse().ok())
                .collect();
            // yielding + spinning events: every call, and start-up's.
            assert!(words.len() >= 2 && words[0] + words[1] >= n, "{line}");
        } else {
            assert!(line.contains("fixed on this platform"), "{line}");
        }
    }
}
