//! Tracers inside the sandbox: `strace -f` of a shell pipeline and of
//! Python starting a subprocess, `strace -p` of a running process, and
//! `gdb` (breakpoints, stepping, hardware and software watchpoints, attach,
//! a core file written on `SIGSEGV` and read back),
//! each run natively and under `ferrovisor do` on every platform; the
//! outputs (PIDs and addresses left out by the filters) must agree.

mod common;

use std::time::Duration;

use common::{command, run};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
const TIMEOUT: Duration = Duration::from_secs(120);
use common::platforms;

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
    for platform in platforms() {
        let mut cmd = command(FERROVISOR, &[]);
        cmd.args(["do", "--platform", &platform, "--", "/bin/sh", "-c", script]);
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

fn have_gdb() -> bool {
    std::path::Path::new("/usr/bin/gdb").exists() && std::path::Path::new("/usr/bin/gcc").exists()
}

/// Compiles `src` with `-g -O0` into the test's own directory (the sandbox
/// sees it read-only, at the same path): the program's path.
fn program(name: &str, src: &str) -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("debuggers");
    std::fs::create_dir_all(&dir).expect("test directory");
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).expect("write the source");
    let exe = dir.join(name);
    let st = std::process::Command::new("gcc")
        .args(["-g", "-O0", "-o"])
        .arg(&exe)
        .arg(&c)
        .status()
        .expect("run gcc");
    assert!(st.success(), "gcc {name}.c failed");
    exe.to_string_lossy().into_owned()
}

/// gdb's output with addresses and process IDs left out.
fn gdb_filter() -> &'static str {
    "sed -E -e 's/0x[0-9a-f]+/ADDR/g' -e 's/process [0-9]+/process N/' \
     -e '/^\\[(Thread debugging|Inferior .* killed)|^Using host libthread_db|^Reading symbols|^Download/d'"
}

const ADD_C: &str = r#"
#include <stdio.h>
int counter;
int add(int a, int b)
{
	int s = a + b;
	counter += s;
	return s;
}
int main(void)
{
	int total = 0;
	for (int i = 0; i < 3; i++)
		total = add(total, i);
	printf("total %d\n", total);
	return 0;
}
"#;

#[test]
fn gdb_breakpoints_steps_and_watchpoints_agree_with_native() {
    if !have_gdb() {
        eprintln!("skipped: no gdb or gcc (apt-get install gdb gcc; .ci/run does)");
        return;
    }
    let exe = program("add", ADD_C);
    // Breakpoints, bt, print, finish, next, step, stepi; a hardware
    // watchpoint (debug registers), a software one (single-stepping), an
    // execute breakpoint in a debug register (hbreak).
    let cmds = [
        "set pagination off",
        "set confirm off",
        "break add",
        "run",
        "bt",
        "print a",
        "print b",
        "finish",
        "next",
        "step",
        "step",
        "stepi",
        "info registers rip",
        "delete",
        "watch counter",
        "continue",
        "delete",
        "set can-use-hw-watchpoints 0",
        "watch counter",
        "continue",
        "delete",
        "hbreak add",
        "continue",
        "print a",
        "delete",
        "continue",
    ];
    let args: Vec<String> = cmds.iter().map(|c| format!("-ex '{c}'")).collect();
    compare(&format!(
        "gdb -q -nx -batch {} {exe} 2>&1 | {}",
        args.join(" "),
        gdb_filter()
    ));
}

#[test]
fn gdb_attaches_to_a_running_process() {
    if !have_gdb() {
        eprintln!("skipped: no gdb or gcc (apt-get install gdb gcc; .ci/run does)");
        return;
    }
    let exe = program(
        "spin",
        "#include <unistd.h>\nvolatile int ticks;\nvoid spin(void) { ticks++; usleep(1000); }\n\
         int main(void) { for (;;) spin(); }\n",
    );
    // Where the attach lands (inside usleep) differs run to run: only what
    // comes after the breakpoint is compared.
    compare(&format!(
        "{exe} & p=$!; sleep 0.3; \
         gdb -q -nx -batch -p $p -ex 'break spin' -ex 'continue' -ex 'bt' -ex 'print ticks > 0' \
         -ex 'kill' 2>&1 | {} | sed -n '/^Breakpoint 1,/,$p'; wait $p; echo status $?",
        gdb_filter()
    ));
}

#[test]
fn gdb_reads_the_core_file_of_a_crash_as_native_gdb_sees_the_crash() {
    if !have_gdb() {
        eprintln!("skipped: no gdb or gcc (apt-get install gdb gcc; .ci/run does)");
        return;
    }
    let exe = program(
        "crash",
        "int *volatile nowhere;\nint depth(int n) { if (n == 0) return *nowhere; \
         return depth(n - 1) + 1; }\nint main(void) { return depth(3); }\n",
    );
    // What gdb prints after the marker: where it stopped comes before it,
    // in the two runs' own words.
    let frames = "sed -n '/^==$/,$p'";
    // Natively, gdb catches the crash live (the host's core_pattern is not
    // the test's to choose); in the sandbox, the core file is read back.
    let mut cmd = command("/bin/sh", &[]);
    cmd.args([
        "-c",
        &format!(
            "gdb -q -nx -batch -ex run -ex 'echo ==\\n' -ex bt -ex 'print n' -ex 'info registers rip' {exe} 2>&1 \
             | {} | {frames}",
            gdb_filter()
        ),
    ]);
    let nat = run(cmd, None, TIMEOUT);
    assert!(
        nat.stdout.contains("#3") && nat.stdout.contains("$1 = 0"),
        "the NATIVE run is not what the test expects: {}{}",
        nat.stdout,
        nat.stderr
    );
    let script = format!(
        "cd /tmp && ulimit -c unlimited && {{ {exe}; echo status $?; }}; \
         stat -c '%A %s' core | sed 's/ [1-9][0-9]*$/ nonempty/'; \
         gdb -q -nx -batch -ex 'echo ==\\n' -ex bt -ex 'print n' -ex 'info registers rip' {exe} core 2>&1 \
         | {} | {frames}",
        gdb_filter()
    );
    let want = format!("status 139\n-rw------- nonempty\n{}", nat.stdout);
    for platform in platforms() {
        let mut cmd = command(FERROVISOR, &[]);
        cmd.args([
            "do",
            "--platform",
            &platform,
            "--",
            "/bin/sh",
            "-c",
            &script,
        ]);
        let sb = run(cmd, None, TIMEOUT);
        assert_eq!(
            sb.stdout, want,
            "--platform {platform}: the core file does not show the crash (stderr: {})",
            sb.stderr
        );
    }
}
