//! Interactive use at a terminal: `ferrovisor do -- bash -i` driven through
//! a pseudo-terminal by `terminal.py` (job control, ^C, ^Z, `tty`, window
//! size, one key without Enter, the terminal put back at the end), the
//! same script natively and in the sandbox on every platform; and the
//! terminal put back when the sandbox is killed.

mod common;

use std::time::Duration;

use common::{command, run};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
const TIMEOUT: Duration = Duration::from_secs(180);

fn driver(cmd: &[&str]) -> common::Outcome {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/terminal.py");
    let mut c = command("/usr/bin/python3", &[]);
    c.arg(script).args(cmd);
    run(c, None, TIMEOUT)
}

#[test]
fn bash_at_a_terminal_has_job_control_keys_and_its_size_as_native() {
    if !std::path::Path::new("/usr/bin/python3").exists() {
        eprintln!("skipped: no python3 (.ci/run installs it)");
        return;
    }
    let bash = ["bash", "--norc", "--noprofile", "-i"];
    let nat = driver(&bash);
    assert_eq!(
        nat.status, 0,
        "the NATIVE run failed, so the test is wrong: {}{}",
        nat.stdout, nat.stderr
    );
    for platform in ["seccomp", "seccomp-spin", "ptrace"] {
        let mut cmd = vec![FERROVISOR, "do", "--platform", platform, "--"];
        cmd.extend(bash);
        let sb = driver(&cmd);
        assert_eq!(
            (sb.status, sb.stdout.as_str()),
            (nat.status, nat.stdout.as_str()),
            "--platform {platform}: {}",
            sb.stderr
        );
    }
}

#[test]
fn the_terminal_is_put_back_when_the_sandbox_is_killed() {
    if !std::path::Path::new("/usr/bin/python3").exists() {
        eprintln!("skipped: no python3 (.ci/run installs it)");
        return;
    }
    let out = driver(&["--killed", FERROVISOR, "do", "--", "sleep", "60"]);
    assert_eq!(
        out.stdout, "raw while it runs True\nstatus 137\ncooked after True\n",
        "stderr: {}",
        out.stderr
    );
}
