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

/// Whether the driver can run (saying so when not).
fn have_python3() -> bool {
    let there = std::path::Path::new("/usr/bin/python3").exists();
    if !there {
        eprintln!("skipped: no python3 (.ci/run installs it)");
    }
    there
}

/// The interactive bash the driver runs, and its session natively, which
/// must pass (else the test is wrong).
fn native_session() -> ([&'static str; 4], common::Outcome) {
    let bash = ["bash", "--norc", "--noprofile", "-i"];
    let nat = driver(&bash);
    assert_eq!(
        nat.status, 0,
        "the NATIVE run failed, so the test is wrong: {}{}",
        nat.stdout, nat.stderr
    );
    (bash, nat)
}

fn driver(cmd: &[&str]) -> common::Outcome {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/terminal.py");
    let mut c = command("/usr/bin/python3", &[]);
    c.arg(script).args(cmd);
    run(c, None, TIMEOUT)
}

#[test]
fn bash_at_a_terminal_has_job_control_keys_and_its_size_as_native() {
    if !have_python3() {
        return;
    }
    let (bash, nat) = native_session();
    for platform in common::platforms() {
        let mut cmd = vec![FERROVISOR, "do", "--platform", &platform, "--"];
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
    if !have_python3() {
        return;
    }
    let out = driver(&["--killed", FERROVISOR, "do", "--", "sleep", "60"]);
    assert_eq!(
        out.stdout, "raw while it runs True\nstatus 137\ncooked after True\n",
        "stderr: {}",
        out.stderr
    );
}

/// `sandbox exec --tty`: the same bash session as natively, through a
/// terminal of the sandbox's own that the Sentry relays to the caller's
/// (job control, ^C, ^Z, `tty`, a resize, one key without Enter, the
/// caller's terminal put back); without a terminal, one line.
#[test]
fn sandbox_exec_tty_gives_bash_a_terminal_as_native() {
    if !have_python3() {
        return;
    }
    let root = common::TempDir::new("exec-tty");
    let sandbox = |args: &[&str]| {
        let mut c = command(FERROVISOR, &[]);
        c.arg("--root").arg(root.path()).arg("sandbox").args(args);
        run(c, None, TIMEOUT)
    };
    let made = sandbox(&["create", "tbox"]);
    assert_eq!(made.status, 0, "{}", common::show(&made));
    let (bash, nat) = native_session();
    let mut cmd = vec![
        FERROVISOR,
        "--root",
        root.path_str(),
        "sandbox",
        "exec",
        "--tty",
    ];
    // (the driver's environment is the CLI's, not the sandbox's)
    cmd.extend([
        "-e",
        "PS1=PROMPT> ",
        "-e",
        "TERM=xterm",
        "-e",
        "HISTFILE=/dev/null",
    ]);
    cmd.extend(["tbox", "--"]);
    cmd.extend(bash);
    let sb = driver(&cmd);
    let no_tty = sandbox(&["exec", "--tty", "tbox", "--", "true"]);
    let _ = sandbox(&["rm", "tbox"]);
    assert_eq!(
        (sb.status, sb.stdout.as_str()),
        (nat.status, nat.stdout.as_str()),
        "{}",
        sb.stderr
    );
    assert_eq!(no_tty.status, 2, "{}", common::show(&no_tty));
    assert_eq!(no_tty.stderr.lines().count(), 1, "{}", no_tty.stderr);
}
