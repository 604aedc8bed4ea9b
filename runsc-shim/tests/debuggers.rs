//! Tracers inside the sandbox: `strace -f` of a shell pipeline and of
//! Python starting a subprocess, and `strace -p` of a running process, each
//! run natively and under `ferrovisor do` on every platform; the traces
//! (PIDs and addresses left out by the filters) must agree.

mod common;

use std::time::Duration;

use common::{command, run};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
const TIMEOUT: Duration = Duration::from_secs(120);
const PLATFORMS: [&str; 3] = ["seccomp", "seccomp-spin", "ptrace"];

fn have_strace() -> bool {
    std::path::Path::new("/usr/bin/strace").exists()
}

/// Runs `script` with `sh -c` natively and in the sandbox; stdout (the
/// trace, sorted by the script where threads interleave) must agree.
fn compare(script: &str) {
    let mut cmd = command("/bin/sh", &[]);
    cmd.args(["-c", script]);
    let nat = run(cmd, None, TIMEOUT);
    assert_eq!(
        nat.status, 0,
        "the NATIVE run failed, so the test is wrong: {}",
        nat.stderr
    );
    assert!(!nat.stdout.trim().is_empty(), "the native trace is empty");
    for platform in PLATFORMS {
        let mut cmd = command(FERROVISOR, &[]);
        cmd.args(["do", "--platform", platform, "--", "/bin/sh", "-c", script]);
        let sb = run(cmd, None, TIMEOUT);
        assert_eq!(
            (sb.status, sb.stdout.as_str()),
            (nat.status, nat.stdout.as_str()),
            "--platform {platform}: the trace differs from native (stderr: {})",
            sb.stderr
        );
    }
}

/// The per-process traces of `strace -ff -o PREFIX`, each line once,
/// sorted (processes run in any order).
fn merged(prefix: &str) -> String {
    format!("cat {prefix}.* | sort; rm -f {prefix}.*")
}

#[test]
fn strace_f_of_a_pipeline_agrees_with_native() {
    if !have_strace() {
        eprintln!("skipped: no strace (apt-get install strace; .ci/run does)");
        return;
    }
    compare(&format!(
        "strace -ff -q -e signal=none -e trace=write,dup2,pipe2,exit_group -o /tmp/trace.$$ \
         sh -c 'echo hi | cat; echo there >&2' >/dev/null 2>&1 && {}",
        merged("/tmp/trace.$$")
    ));
}

#[test]
fn strace_f_of_python_starting_a_subprocess_agrees_with_native() {
    if !have_strace() || !std::path::Path::new("/usr/bin/python3").exists() {
        eprintln!("skipped: no strace or python3 (.ci/run installs both)");
        return;
    }
    compare(&format!(
        "strace -ff -q -e signal=none -e trace=write,exit_group -o /tmp/trace.$$ \
         /usr/bin/python3 -c 'import subprocess; subprocess.run([\"/bin/echo\", \"child\"])' \
         >/dev/null && {}",
        merged("/tmp/trace.$$")
    ));
}

#[test]
fn strace_p_attaches_to_a_running_process() {
    if !have_strace() {
        eprintln!("skipped: no strace (apt-get install strace; .ci/run does)");
        return;
    }
    // The traced shell waits for its child, so the attach comes while it
    // blocks, and its last calls are the same both ways.
    compare(
        "(sleep 1.5; echo done; exit 3) & p=$!; sleep 0.5; \
         strace -q -e signal=none -e trace=write,exit_group -o /tmp/trace.$$ -p $p; \
         cat /tmp/trace.$$; rm -f /tmp/trace.$$",
    );
}
