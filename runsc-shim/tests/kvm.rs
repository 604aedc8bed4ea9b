//! `--platform kvm` (issue 17): real programs run in ring 3 of a KVM
//! virtual machine and print what they print natively; threads, signals
//! and FPU state survive the vCPU hand-offs; a host without a usable
//! `/dev/kvm` gets one line. The differential suite runs under it with
//! `FERROVISOR_PLATFORM=kvm` (see `.ci/run`).

mod common;

use std::process::Command;
use std::time::Duration;

use common::{command, compile_static, run, TempDir};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
const TIMEOUT: Duration = Duration::from_secs(180);

/// Threads that each sum their share with SSE and x87 arithmetic while a
/// timer's signals interrupt them, and a child made by fork that execs.
const WORK: &str = r#"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
static volatile long ticks;
static void on_tick(int s) { (void)s; ticks++; double x = 1.5; x *= x; (void)x; }
static void *work(void *arg) {
	long id = (long)arg; double d = 0; long double e = 0;
	for (long i = 0; i < 3000000; i++) { d += (double)(i % 7) * 0.5; e += (long double)(i % 3); }
	return (void *)(long)(d + (double)e + (double)id);
}
int main(void) {
	signal(SIGALRM, on_tick);
	struct itimerval it = {{0, 2000}, {0, 2000}};
	setitimer(ITIMER_REAL, &it, NULL);
	pthread_t t[4]; long total = 0;
	for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, work, (void *)i);
	for (int i = 0; i < 4; i++) { void *r; pthread_join(t[i], &r); total += (long)r; }
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	printf("total %ld, ticked %s\n", total, ticks > 0 ? "yes" : "no");
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) { execl("/bin/sh", "sh", "-c", "echo child $((6 * 7))", (char *)0); _exit(127); }
	int st; waitpid(p, &st, 0);
	printf("child status %d\n", WEXITSTATUS(st));
	return 0;
}
"#;

/// Whether this host can run the KVM tests; says so when it cannot.
fn kvm_here(test: &str) -> bool {
    let ok = common::kvm_usable();
    if !ok {
        eprintln!("{test}: skipped, /dev/kvm does not open here");
    }
    ok
}

fn kvm_do(args: &[&str]) -> common::Outcome {
    let mut cmd = command(FERROVISOR, &[]);
    cmd.args(["do", "--platform", "kvm", "--"]).args(args);
    run(cmd, None, TIMEOUT)
}

fn native(args: &[&str]) -> common::Outcome {
    let mut cmd = Command::new(args[0]);
    cmd.args(&args[1..]);
    run(cmd, None, TIMEOUT)
}

#[test]
fn real_programs_print_what_they_print_natively() {
    if !kvm_here("real_programs_print_what_they_print_natively") {
        return;
    }
    let dir = TempDir::new("kvm-work");
    let work = compile_static(dir.path(), "work", WORK);
    let work = work.to_str().expect("utf-8 path");
    let cases: Vec<Vec<&str>> = vec![
        vec![work],
        vec!["/bin/sh", "-c", "echo a b | tr a-z A-Z; ls /usr/bin | wc -l | tr -d ' ' | grep -c ."],
        vec![
            "/usr/bin/python3",
            "-c",
            "import hashlib, threading, json\n\
             r = []\n\
             ts = [threading.Thread(target=lambda i=i: r.append(hashlib.sha256(str(i).encode() * 10000).hexdigest()[:8])) for i in range(4)]\n\
             [t.start() for t in ts]; [t.join() for t in ts]\n\
             print(sorted(r), json.dumps({'sum': sum(range(10**5))}))",
        ],
    ];
    for args in cases {
        let want = native(&args);
        assert_eq!(want.status, 0, "native {args:?}: {}", want.stderr);
        let got = kvm_do(&args);
        assert_eq!(
            (got.status, got.stdout.as_str()),
            (0, want.stdout.as_str()),
            "{args:?}: {}",
            got.stderr
        );
    }
}

#[test]
fn a_host_without_a_usable_dev_kvm_gets_one_line() {
    // /dev/kvm replaced by /dev/null in a mount namespace of the test's
    // own (or, on a host without one, as it is).
    let hide = if std::path::Path::new("/dev/kvm").exists() {
        "mount --bind /dev/null /dev/kvm && "
    } else {
        ""
    };
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "{hide}exec {FERROVISOR} do --platform kvm -- /bin/true"
        ));
    let out = run(cmd, None, TIMEOUT);
    assert_eq!(out.status, 125, "{out:?}");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{out:?}");
    assert!(
        lines[0].contains("/dev/kvm") && lines[0].contains("--platform"),
        "{out:?}"
    );
}

#[test]
fn features_name_kvm_where_it_can_run() {
    let mut cmd = command(FERROVISOR, &[]);
    cmd.arg("features");
    let out = run(cmd, None, TIMEOUT);
    assert_eq!(out.status, 0, "{out:?}");
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("features JSON");
    let platforms = v["annotations"]["dev.ferrovisor.platforms"]
        .as_str()
        .expect("platforms listed");
    let usable = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok();
    assert_eq!(
        platforms.split(',').any(|p| p == "kvm"),
        usable,
        "{platforms}"
    );
    assert!(platforms.split(',').any(|p| p == "seccomp"), "{platforms}");
}

#[test]
fn a_sandbox_saved_on_kvm_restores_there_and_only_there() {
    if !kvm_here("a_sandbox_saved_on_kvm_restores_there_and_only_there") {
        return;
    }
    let dir = TempDir::new("kvm-save");
    let img = dir.path().join("img");
    let img = img.to_str().expect("utf-8 path");
    let script = "import sys\n\
                  open('/proc/ferrovisor/checkpoint', 'w').write('save')\n\
                  print(open('/proc/ferrovisor/checkpoint').read().strip(), sys.stdin.readline().strip())";
    let mut cmd = command(FERROVISOR, &[]);
    cmd.args([
        "do",
        "--platform",
        "kvm",
        "--save",
        img,
        "--",
        "python3",
        "-c",
        script,
    ]);
    let out = run(cmd, Some(b"first\n"), TIMEOUT);
    assert_eq!(
        (out.status, out.stdout.as_str()),
        (0, "saved first\n"),
        "{out:?}"
    );
    let mut cmd = command(FERROVISOR, &[]);
    cmd.args(["do", "--platform", "kvm", "--restore", img]);
    let out = run(cmd, Some(b"second\n"), TIMEOUT);
    assert_eq!(
        (out.status, out.stdout.as_str()),
        (0, "restored second\n"),
        "{out:?}"
    );
    let mut cmd = command(FERROVISOR, &[]);
    cmd.args(["do", "--restore", img]);
    let out = run(cmd, Some(b"third\n"), TIMEOUT);
    assert_eq!(out.status, 125, "{out:?}");
    assert!(out.stderr.contains("--platform"), "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{out:?}");
}

/// `do --stats` counts the exits: every system call one.
#[test]
fn stats_count_one_exit_per_system_call() {
    if !kvm_here("stats_count_one_exit_per_system_call") {
        return;
    }
    let dir = TempDir::new("kvm-stats");
    let bin = compile_static(
        dir.path(),
        "calls",
        "#include <unistd.h>\n#include <sys/syscall.h>\n\
         int main(void) { for (int i = 0; i < 2000; i++) syscall(SYS_getppid); return 0; }\n",
    );
    let mut cmd = command(FERROVISOR, &[]);
    cmd.args(["do", "--platform", "kvm", "--stats", "--"])
        .arg(&bin);
    let out = run(cmd, None, TIMEOUT);
    assert_eq!(out.status, 0, "{out:?}");
    let line = out
        .stderr
        .lines()
        .find(|l| l.starts_with("ferrovisor: kvm exits:"))
        .unwrap_or_else(|| panic!("no stats: {out:?}"));
    let calls: u64 = line
        .split_whitespace()
        .nth(3)
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    // the loop's calls, and start-up's and exit's few dozen
    assert!((2000..2100).contains(&calls), "{line}");
}
