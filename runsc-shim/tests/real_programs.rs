//! Real programs (coreutils, busybox applets, tar, gcc, git, sqlite3, Python
//! scripts and a venv + unittest CI job, a cargo build) run natively and under
//! `ferrovisor do` on each platform, with the same argv, environment and
//! stdin: stdout and exit status must agree. Also the CLI's own error statuses (127, 126, 2), death
//! by signal (128+N), `--root DIR` confinement of absolute symlinks, attacks
//! that must not get out of `--root DIR` (file handles, chroot, pivot_root,
//! mount, a rename race, /proc's root, cwd and fd links, hard links;
//! `no_way_out.c`), `--overlay` over `--root DIR` (copy-up, whiteouts,
//! directory renames; the host's tree untouched), tmpfs limits, and what
//! programs learn about the machine (CPU counts, start times), and Go: a
//! static Go program (preemption signals, threads, netpoller, HTTP) and the
//! Go toolchain building, vetting and testing a module in the sandbox, and
//! a Node.js CI job (npm install offline, `npm test` with `node --test`).

mod common;

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use common::{command, compile_static, run, Outcome, TempDir};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
const TIMEOUT: Duration = Duration::from_secs(120);

fn native(argv: &[&str], env: &[(&str, &str)], stdin: Option<&[u8]>) -> Outcome {
    native_within(argv, env, stdin, TIMEOUT)
}

fn native_within(
    argv: &[&str],
    env: &[(&str, &str)],
    stdin: Option<&[u8]>,
    timeout: Duration,
) -> Outcome {
    let mut cmd = command(argv[0], env);
    cmd.args(&argv[1..]);
    run(cmd, stdin, timeout)
}

fn sandboxed(opts: &[&str], argv: &[&str], env: &[(&str, &str)], stdin: Option<&[u8]>) -> Outcome {
    sandboxed_within(opts, argv, env, stdin, TIMEOUT)
}

fn sandboxed_within(
    opts: &[&str],
    argv: &[&str],
    env: &[(&str, &str)],
    stdin: Option<&[u8]>,
    timeout: Duration,
) -> Outcome {
    let mut cmd = command(FERROVISOR, env);
    cmd.arg("do").args(opts).arg("--").args(argv);
    run(cmd, stdin, timeout)
}

/// Runs `argv` both ways and asserts equal stdout and status; the native
/// status must be `native_status` (otherwise the test itself is wrong).
fn compare_with(argv: &[&str], env: &[(&str, &str)], stdin: Option<&[u8]>, native_status: i32) {
    compare_within(argv, env, stdin, native_status, TIMEOUT);
}

/// [`compare_with`], each run given `timeout`.
fn compare_within(
    argv: &[&str],
    env: &[(&str, &str)],
    stdin: Option<&[u8]>,
    native_status: i32,
    timeout: Duration,
) {
    let nat = native_within(argv, env, stdin, timeout);
    assert_eq!(
        nat.status, native_status,
        "{argv:?}: the NATIVE run exited {} (stderr: {}), so the test is wrong",
        nat.status, nat.stderr
    );
    for platform in &platforms() {
        let sb = sandboxed_within(&["--platform", platform], argv, env, stdin, timeout);
        if nat.stdout_bytes != sb.stdout_bytes || nat.status != sb.status {
            panic!(
                "{argv:?}: sandbox (--platform {platform}) differs from native\n\
                 exit status: native {} / sandbox {}\n--- native stdout ---\n{}\n\
                 --- sandbox stdout ---\n{}\n--- sandbox stderr ---\n{}",
                nat.status, sb.status, nat.stdout, sb.stdout, sb.stderr
            );
        }
    }
}

use common::platforms;

fn compare(argv: &[&str]) {
    compare_with(argv, &[], None, 0);
}

fn compare_stdin(argv: &[&str], stdin: &[u8]) {
    compare_with(argv, &[], Some(stdin), 0);
}

const UNSORTED: &[u8] = b"pear\napple\nfig\nbanana\napple\ncherry\nfig\nfig\n10\n9\n";

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

// ---- coreutils -------------------------------------------------------------

#[test]
fn echo_hello_world() {
    compare(&["/bin/echo", "hello", "world"]);
}

#[test]
fn true_exits_zero() {
    compare(&["/bin/true"]);
}

#[test]
fn false_exits_one() {
    compare_with(&["/bin/false"], &[], None, 1);
}

#[test]
fn ls_la_usr_bin() {
    compare(&["/bin/ls", "-la", "/usr/bin"]);
}

#[test]
fn cat_os_release() {
    compare(&["/bin/cat", "/etc/os-release"]);
}

#[test]
fn cat_stdin() {
    compare_stdin(&["/bin/cat"], UNSORTED);
}

#[test]
fn sha256sum_ls() {
    compare(&["/usr/bin/sha256sum", "/usr/bin/ls"]);
}

#[test]
fn sort_stdin() {
    compare_stdin(&["/usr/bin/sort"], UNSORTED);
}

#[test]
fn wc_stdin() {
    compare_stdin(&["/usr/bin/wc"], UNSORTED);
}

#[test]
fn head_passwd() {
    compare(&["/usr/bin/head", "-n", "3", "/etc/passwd"]);
}

#[test]
fn env_exact() {
    compare_with(
        &["/usr/bin/env"],
        &[("FERRO_A", "1"), ("FERRO_B", "two words"), ("EMPTY", "")],
        None,
        0,
    );
}

#[test]
fn command_found_in_path() {
    compare(&["echo", "found", "through", "PATH"]);
}

#[test]
fn exit_status_of_missing_file() {
    // cat reports the error on stderr and exits 1 in both worlds.
    compare_with(&["/bin/cat", "/nonexistent-ferrovisor-file"], &[], None, 1);
}

// ---- busybox (static) --------------------------------------------------------

fn busybox<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["/bin/busybox"];
    v.extend_from_slice(args);
    v
}

#[test]
fn busybox_echo() {
    compare(&busybox(&["echo", "-n", "no newline", "|", "end"]));
}

#[test]
fn busybox_cat() {
    compare(&busybox(&["cat", "/etc/os-release", "/etc/passwd"]));
}

#[test]
fn busybox_ls() {
    compare(&busybox(&["ls", "-la", "/etc"]));
}

#[test]
fn busybox_wc() {
    compare_stdin(&busybox(&["wc", "-l", "-w", "-c"]), UNSORTED);
}

#[test]
fn busybox_sort() {
    compare_stdin(&busybox(&["sort", "-n", "-r"]), UNSORTED);
}

#[test]
fn busybox_uniq() {
    compare_stdin(&busybox(&["uniq", "-c"]), b"a\na\nb\nc\nc\nc\na\n");
}

#[test]
fn busybox_head() {
    compare(&busybox(&["head", "-n", "2", "/etc/passwd"]));
}

#[test]
fn busybox_tr() {
    compare_stdin(&busybox(&["tr", "a-z", "A-Z"]), UNSORTED);
}

#[test]
fn busybox_seq() {
    compare(&busybox(&["seq", "1", "3", "40"]));
}

#[test]
fn busybox_sha256sum() {
    compare(&busybox(&["sha256sum", "/bin/busybox", "/etc/passwd"]));
}

#[test]
fn busybox_md5sum() {
    compare_stdin(&busybox(&["md5sum"]), UNSORTED);
}

#[test]
fn busybox_basename() {
    compare(&busybox(&["basename", "/a/b/c.txt", ".txt"]));
}

#[test]
fn busybox_dirname() {
    compare(&busybox(&["dirname", "/a/b/c.txt"]));
}

#[test]
fn busybox_expr() {
    compare(&busybox(&["expr", "6", "*", "7"]));
}

#[test]
fn busybox_expr_false() {
    // expr prints 0 and exits 1 when the result is null or zero.
    compare_with(&busybox(&["expr", "3", "-", "3"]), &[], None, 1);
}

#[test]
fn busybox_printf() {
    compare(&busybox(&[
        "printf",
        "%s-%05d-%x|%c\\n",
        "word",
        "42",
        "255",
        "zebra",
    ]));
}

// ---- the CLI's own statuses --------------------------------------------------

/// `script` runs a shell under a pseudo-terminal (issue 4 point 6): `tty`
/// names the slave (its number reduced to `N`, which differs natively when
/// other terminals are open), `stty -a` shows the new terminal's modes,
/// `stty` changes them, and `ps` finds the shell's controlling terminal
/// and sees it in the foreground (`+`).
#[test]
fn script_runs_tty_and_stty_under_a_pty() {
    compare(&[
        "/usr/bin/script",
        "-qc",
        "tty | sed 's/[0-9]*$/N/'; stty -a; stty raw -echo; stty -g; \
         ps -o tty=,stat= -p $$ | sed 's/[0-9]/N/g'; \
         test -w \"$(tty)\" && test -r /dev/tty && echo accessible",
        "/dev/null",
    ]);
}

#[test]
fn missing_command_is_127() {
    let out = sandboxed(&[], &["ferrovisor-no-such-command"], &[], None);
    assert_eq!(out.status, 127, "stderr: {}", out.stderr);
    assert!(
        out.stderr.contains("command not found"),
        "stderr: {}",
        out.stderr
    );
    assert!(out.stdout.is_empty());
    let out = sandboxed(&[], &["/no/such/dir/prog"], &[], None);
    assert_eq!(out.status, 127, "absolute path: stderr: {}", out.stderr);
}

#[test]
fn not_elf_not_script_is_126() {
    let dir = TempDir::new("notelf");
    let file = dir.path().join("garbage");
    std::fs::write(&file, b"this is neither ELF nor a #! script\n").expect("write");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = sandboxed(&[], &[path_str(&file)], &[], None);
    assert_eq!(out.status, 126, "stderr: {}", out.stderr);
    assert!(out.stdout.is_empty());
}

#[test]
fn nonexistent_root_is_2_with_one_line() {
    let out = sandboxed(
        &["--root", "/nonexistent-ferrovisor-root"],
        &["/bin/true"],
        &[],
        None,
    );
    assert_eq!(out.status, 2, "stderr: {}", out.stderr);
    assert_eq!(
        out.stderr.trim_end().lines().count(),
        1,
        "stderr: {:?}",
        out.stderr
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn killed_by_sigterm_is_143() {
    let dir = TempDir::new("sigterm");
    // In a child: the guest's first process is the sandbox's init, which
    // drops signals from inside that it has no handler for
    // (pid_namespaces(7)). The parent passes the death on as a shell does.
    let bin = compile_static(
        dir.path(),
        "selfterm",
        "#include <signal.h>\n#include <stdio.h>\n#include <sys/wait.h>\n#include <unistd.h>\n\
         int main(void) { int st; puts(\"before\"); fflush(stdout);\n\
         if (fork() == 0) { kill(getpid(), SIGTERM); puts(\"after\"); return 0; }\n\
         wait(&st); return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1; }\n",
    );
    compare_with(&[path_str(&bin)], &[], None, 143);
}

/// A signal sent to the process group of `ferrovisor do` (as a shell's
/// `kill -INT -PGID`, or a supervisor, does) reaches both of its host
/// processes, the monitor and the Sentry; the guest still gets it once per
/// send, as the program run natively would.
#[test]
fn a_signal_to_the_process_group_reaches_the_guest_once() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let dir = TempDir::new("groupint");
    // The handler says how many it has seen; a line on stdin asks for the
    // total.
    let bin = compile_static(
        dir.path(),
        "countint",
        "#include <signal.h>\n#include <stdio.h>\n#include <unistd.h>\n\
         static volatile sig_atomic_t n;\n\
         static void on_int(int s) { char c = 'a' + n++; (void)s; write(1, &c, 1); write(1, \"\\n\", 1); }\n\
         int main(void) { struct sigaction sa = {0}; char b;\n\
         sa.sa_handler = on_int; sigaction(SIGINT, &sa, 0);\n\
         write(1, \"ready\\n\", 6);\n\
         while (read(0, &b, 1) != 1) {}\n\
         printf(\"total %d\\n\", (int)n); return 0; }\n",
    );
    let mut child = command(FERROVISOR, &[])
        .args(["do", "--", path_str(&bin)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("spawn ferrovisor");
    let pgid = child.id() as i32;
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("ready");
    assert_eq!(line, "ready\n");
    const SENDS: u8 = 5;
    for i in 0..SENDS {
        // SAFETY: kill(2) of the test's own child's process group.
        assert_eq!(unsafe { libc::kill(-pgid, libc::SIGINT) }, 0);
        line.clear();
        out.read_line(&mut line).expect("the handler's line");
        assert_eq!(line, format!("{}\n", (b'a' + i) as char), "send {i}");
    }
    // A second copy of the last would come by now.
    std::thread::sleep(std::time::Duration::from_millis(300));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"x")
        .expect("ask");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).expect("total");
    assert_eq!(rest, format!("total {SENDS}\n"));
    assert!(child.wait().expect("wait").success());
}

/// ^Z and `fg` of `ferrovisor do` as a shell does them (SIGTSTP, then
/// SIGCONT, to the job's process group): the sandbox stops with the
/// `ferrovisor` process, and both go on; SIGTERM then ends it with 143.
#[test]
fn a_stop_and_continue_of_the_job_stop_and_continue_the_sandbox() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let dir = TempDir::new("jobstop");
    // No fork: a shell's loop blocks signals around each of its forks.
    let bin = compile_static(
        dir.path(),
        "ticker",
        "#include <unistd.h>\n\
         int main(void) { for (;;) { write(1, \"x\\n\", 2); usleep(20000); } }\n",
    );
    let mut child = command(FERROVISOR, &[])
        .args(["do", "--", path_str(&bin)])
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("spawn ferrovisor");
    let pgid = child.id() as i32;
    let lines = Arc::new(AtomicUsize::new(0));
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    let counter = lines.clone();
    let reader = std::thread::spawn(move || {
        for _ in out.lines() {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    });
    let grows = |from: usize| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while lines.load(Ordering::Relaxed) < from + 5 {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    };
    let state = || {
        let stat = std::fs::read_to_string(format!("/proc/{pgid}/stat")).expect("stat");
        stat.rsplit(')').next().unwrap_or("").trim().chars().next()
    };
    assert!(grows(0), "the guest never wrote");
    // SAFETY: kill(2) of the test's own child's process group.
    assert_eq!(unsafe { libc::kill(-pgid, libc::SIGTSTP) }, 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while state() != Some('T') {
        assert!(
            std::time::Instant::now() < deadline,
            "ferrovisor never stopped"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    let n = lines.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(
        lines.load(Ordering::Relaxed),
        n,
        "the guest ran while stopped"
    );
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(-pgid, libc::SIGCONT) }, 0);
    assert!(grows(n), "the guest did not go on");
    // SAFETY: kill(2) of the test's own child.
    assert_eq!(unsafe { libc::kill(pgid, libc::SIGTERM) }, 0);
    let status = child.wait().expect("wait");
    reader.join().expect("reader");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::into_raw(status) >> 8,
        143
    );
}

#[test]
fn exit_status_passes_through() {
    let dir = TempDir::new("status");
    let bin = compile_static(dir.path(), "exit77", "int main(void) { return 77; }\n");
    compare_with(&[path_str(&bin)], &[], None, 77);
}

// ---- --root confinement ---------------------------------------------------------

/// DIR/bin/busybox (static) and DIR/escape -> /../../etc. Inside the sandbox
/// the absolute target and the `..` above the root both stay in DIR.
fn make_root(with_hostname: bool) -> TempDir {
    let dir = TempDir::new("root");
    let root = dir.path();
    std::fs::create_dir_all(root.join("bin")).expect("mkdir bin");
    std::fs::copy("/bin/busybox", root.join("bin/busybox")).expect("copy busybox");
    symlink("/../../etc", root.join("escape")).expect("symlink");
    if with_hostname {
        std::fs::create_dir_all(root.join("etc")).expect("mkdir etc");
        std::fs::write(root.join("etc/hostname"), b"inside-the-root\n").expect("write hostname");
    }
    dir
}

#[test]
fn root_symlink_resolves_inside_root() {
    let dir = make_root(true);
    let root = path_str(dir.path());
    let out = sandboxed(
        &["--root", root],
        &["/bin/busybox", "cat", "/escape/hostname"],
        &[],
        None,
    );
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "inside-the-root\n");
    // Natively the same thing happens under chroot (we are root here).
    let nat = native(
        &[
            "/usr/sbin/chroot",
            root,
            "/bin/busybox",
            "cat",
            "/escape/hostname",
        ],
        &[],
        None,
    );
    assert_eq!(nat.status, 0, "native chroot: {}", nat.stderr);
    assert_eq!(nat.stdout_bytes, out.stdout_bytes);
}

#[test]
fn root_symlink_does_not_reach_host_files() {
    let dir = make_root(false);
    let root = path_str(dir.path());
    let out = sandboxed(
        &["--root", root],
        &["/bin/busybox", "cat", "/escape/hostname"],
        &[],
        None,
    );
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    assert!(out.stdout.is_empty(), "host file leaked: {:?}", out.stdout);
    assert!(
        out.stderr.contains("No such file or directory"),
        "stderr: {}",
        out.stderr
    );
    // `..` above the root is the root.
    let out = sandboxed(
        &["--root", root],
        &["/bin/busybox", "ls", "-a", "/../../.."],
        &[],
        None,
    );
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let names: Vec<String> = out.stdout.split_whitespace().map(str::to_owned).collect();
    assert_eq!(
        names,
        [".", "..", "bin", "escape"],
        "listing of / inside --root"
    );
}

#[test]
fn root_is_read_only() {
    let dir = make_root(true);
    let root = path_str(dir.path());
    let out = sandboxed(
        &["--root", root],
        &["/bin/busybox", "touch", "/new-file"],
        &[],
        None,
    );
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    assert!(
        out.stderr.contains("Read-only file system"),
        "stderr: {}",
        out.stderr
    );
    assert!(
        !dir.path().join("new-file").exists(),
        "the guest wrote to the host"
    );
}

// ---- --overlay: a writable root in the sandbox's memory (issue 4 point 3) ----

/// The changes the overlay script makes, each followed by what the guest
/// then sees: copy-up of a lower file (overwritten, appended to), a
/// whiteout (the file gone from lookups and listings), a directory of the
/// lower layer renamed with its children (and a symlink among them), a file
/// and a directory made again where deleted ones were (the new directory
/// empty: nothing of the old one shows through), a subtree moved back and
/// the rest removed.
const OVERLAY_SCRIPT: &str = r#"set -e
echo upper > /data/file.txt
echo "file: $(cat /data/file.txt)"
echo more >> /data/keep.txt
echo "keep: $(cat /data/keep.txt | tr '\n' ' ')"
rm /data/gone.txt
echo "after rm: $(ls -A /data | tr '\n' ' ')"
test -e /data/gone.txt || echo "gone.txt is gone"
cat /data/gone.txt 2>/dev/null || echo "cat gone.txt fails"
mv /tree /moved
test -e /tree || echo "/tree is gone"
echo "moved: $(cd /moved && find . | sort | tr '\n' ' ')"
echo "moved child: $(cat /moved/sub/child.txt) via link: $(cat /moved/link)"
echo "moved deep: $(cat /moved/sub/deeper/d.txt)"
echo recreated > /data/gone.txt
echo "recreated: $(cat /data/gone.txt); ls: $(ls -A /data | tr '\n' ' ')"
mkdir /tree
echo "new /tree: [$(ls -A /tree)]"
mv /moved/sub /tree/sub
echo "tree after moving sub back: $(cd /tree && find . | sort | tr '\n' ' ')"
rm -r /moved
test -e /moved || echo "/moved removed"
echo "root: $(ls -A / | tr '\n' ' ')"
"#;

const OVERLAY_SEES: &str = "file: upper
keep: kept more 
after rm: file.txt keep.txt 
gone.txt is gone
cat gone.txt fails
/tree is gone
moved: . ./link ./sub ./sub/child.txt ./sub/deeper ./sub/deeper/d.txt ./top.txt 
moved child: child via link: child
moved deep: deep
recreated: recreated; ls: file.txt gone.txt keep.txt 
new /tree: []
tree after moving sub back: . ./sub ./sub/child.txt ./sub/deeper ./sub/deeper/d.txt 
/moved removed
root: bin data tree 
";

/// A root for `--overlay`: busybox and its applets, files in /data, and /tree with a
/// subdirectory two levels deep and a relative symlink.
fn make_overlay_root(dir: &Path) {
    for d in ["bin", "data", "tree/sub/deeper"] {
        std::fs::create_dir_all(dir.join(d)).expect("mkdir");
    }
    std::fs::copy("/bin/busybox", dir.join("bin/busybox")).expect("copy busybox");
    // The applets the script runs, found by PATH (natively the chroot has
    // no /proc/self/exe for busybox to run them by).
    for applet in ["cat", "find", "ls", "mkdir", "mv", "rm", "sort", "tr"] {
        symlink("busybox", dir.join("bin").join(applet)).expect("applet link");
    }
    for (f, text) in [
        ("data/file.txt", "lower\n"),
        ("data/keep.txt", "kept\n"),
        ("data/gone.txt", "doomed\n"),
        ("tree/top.txt", "top\n"),
        ("tree/sub/child.txt", "child\n"),
        ("tree/sub/deeper/d.txt", "deep\n"),
    ] {
        std::fs::write(dir.join(f), text).expect("write");
    }
    symlink("sub/child.txt", dir.join("tree/link")).expect("symlink");
}

/// Every path below `dir` with its type, mode and contents (or target).
fn snapshot(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let p = e.expect("entry").path();
            let m = std::fs::symlink_metadata(&p).expect("lstat");
            let what = if m.is_dir() {
                todo.push(p.clone());
                "dir".to_owned()
            } else if m.file_type().is_symlink() {
                format!("-> {}", std::fs::read_link(&p).expect("readlink").display())
            } else {
                let bytes = std::fs::read(&p).expect("read");
                format!(
                    "{} bytes {:x}",
                    bytes.len(),
                    bytes.iter().map(|&b| u64::from(b)).sum::<u64>()
                )
            };
            out.push(format!(
                "{} {:o} {what}",
                p.display(),
                m.permissions().mode()
            ));
        }
    }
    out.sort();
    out
}

/// `--overlay --root DIR`: the guest changes its root freely (copy-up,
/// whiteouts, directory renames, deletes and re-creates) and sees what a
/// writable root shows natively (the same script in a chroot on a copy),
/// while DIR on the host stays as it was, and the next sandbox starts from
/// it again.
#[test]
fn overlay_root_copies_up_whites_out_and_renames_and_the_host_is_untouched() {
    let dir = TempDir::new("overlay");
    let (lower, copy) = (dir.path().join("lower"), dir.path().join("native"));
    make_overlay_root(&lower);
    make_overlay_root(&copy);
    let before = snapshot(&lower);
    let nat = native(
        &[
            "/usr/sbin/chroot",
            path_str(&copy),
            "/bin/busybox",
            "sh",
            "-c",
            OVERLAY_SCRIPT,
        ],
        &[],
        None,
    );
    assert_eq!(nat.status, 0, "native chroot: {nat:?}");
    assert_eq!(
        nat.stdout, OVERLAY_SEES,
        "the native run disagrees, so the test is wrong"
    );
    for platform in &platforms() {
        let argv = ["/bin/busybox", "sh", "-c", OVERLAY_SCRIPT];
        let opts = [
            "--overlay",
            "--root",
            path_str(&lower),
            "--platform",
            platform,
        ];
        let out = sandboxed(&opts, &argv, &[], None);
        assert_eq!(out.status, 0, "{platform}: {out:?}");
        assert_eq!(
            out.stdout, OVERLAY_SEES,
            "{platform}: stderr: {}",
            out.stderr
        );
        assert_eq!(
            snapshot(&lower),
            before,
            "{platform}: the host's root changed"
        );
        // A new sandbox sees the lower layer as it was.
        let argv = [
            "/bin/busybox",
            "sh",
            "-c",
            "cat /data/file.txt /data/gone.txt /tree/top.txt",
        ];
        let out = sandboxed(&opts, &argv, &[], None);
        assert_eq!(out.status, 0, "{platform}: {out:?}");
        assert_eq!(out.stdout, "lower\ndoomed\ntop\n", "{platform}");
    }
    // Without --overlay the same root is read-only.
    let out = sandboxed(
        &["--root", path_str(&lower)],
        &["/bin/busybox", "rm", "/data/gone.txt"],
        &[],
        None,
    );
    assert_eq!(out.status, 1, "{out:?}");
    assert!(out.stderr.contains("Read-only file system"), "{out:?}");
    assert_eq!(snapshot(&lower), before, "the host's root changed");
}

/// A field of a `/proc/PID/status` text.
fn status_field(status: &str, name: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .map(str::trim)
        .unwrap_or("")
        .to_owned()
}

/// The processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(format!("/proc/{child}/status")) else {
            continue;
        };
        if status_field(&status, "PPid:") == pid.to_string() {
            found.push(child);
        }
    }
    found
}

/// The Sentry's own host process (ARCHITECTURE.md, "Processes on the
/// host"), under each platform, while the guest runs:
/// * it is a child of the `ferrovisor` process, PID 1 of a PID namespace
///   of its own, in new user, mount, IPC, UTS and network namespaces, and
///   runs as the host's `nobody` (65534), while the guest still sees uid 0;
/// * every thread of it is in seccomp filter mode with no_new_privs and no
///   capability at all;
/// * its stubs (the guest's address spaces) are in user and PID
///   namespaces of their own, and in the Sentry's mount, IPC, UTS and
///   network namespaces, which are not the host's;
/// * the root's gofer is one server process in user, PID, mount, network,
///   IPC and UTS namespaces of its own, with no_new_privs, under a seccomp
///   filter;
/// * the `ferrovisor` process the caller started only waits: one thread,
///   no_new_privs, no capability but `CAP_KILL`, and a seccomp filter of
///   its own.
#[test]
fn the_sentry_runs_unprivileged_in_its_own_namespaces_under_its_own_filter() {
    for platform in &platforms() {
        check_the_sentrys_process(platform, false);
    }
}

/// As above for a caller that is not root (`nobody`): the Sentry gets the
/// same namespaces, with the caller's ids, which the guest sees too.
#[test]
fn a_callers_sentry_without_root_gets_its_own_namespaces_too() {
    check_the_sentrys_process("seccomp", true);
}

/// Under `--network host` the Sentry stays in the host's network
/// namespace, so its stubs get one of their own.
#[test]
fn with_the_host_network_the_stubs_get_a_network_namespace_of_their_own() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let mut child = command(FERROVISOR, &[])
        .args(["do", "--network", "host", "--", "/bin/sh", "-c"])
        .arg("echo ready; read line")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn ferrovisor");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read the guest's line");
    assert_eq!(line, "ready\n");
    let net = |pid: u32| std::fs::read_link(format!("/proc/{pid}/ns/net")).expect("ns link");
    let sentry = children_of(child.id())
        .into_iter()
        .find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/status"))
                .is_ok_and(|s| status_field(&s, "NSpid:").ends_with("\t1"))
        })
        .expect("the Sentry");
    assert_eq!(net(sentry), net(child.id()), "the Sentry's network");
    let stubs = children_of(sentry);
    assert!(!stubs.is_empty(), "no stub under the Sentry");
    for stub in stubs {
        assert_ne!(net(stub), net(sentry), "stub {stub}");
    }
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"done\n")
        .expect("write");
    assert!(child.wait().expect("wait").success());
}

/// Runs a guest that waits on stdin and checks the processes of
/// `ferrovisor do` while it does (see the tests above).
fn check_the_sentrys_process(platform: &str, as_nobody: bool) {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let mut cmd = if as_nobody {
        let mut c = command("setpriv", &[]);
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            FERROVISOR,
        ]);
        c
    } else {
        command(FERROVISOR, &[])
    };
    cmd.args(["do", "--platform", platform, "--", "/bin/sh", "-c"])
        .arg("echo ready $(id -u); read line; echo \"got $line\"")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn ferrovisor");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read the guest's line");
    let guest_uid = if as_nobody { "65534" } else { "0" };
    assert_eq!(line, format!("ready {guest_uid}\n"), "{platform}");

    // setpriv execs ferrovisor: same pid.
    let monitor = child.id();
    let status = std::fs::read_to_string(format!("/proc/{monitor}/status")).expect("status");
    assert_eq!(status_field(&status, "Name:"), "ferrovisor", "{platform}");
    assert_eq!(
        status_field(&status, "Threads:"),
        "1",
        "{platform}:\n{status}"
    );
    assert_eq!(status_field(&status, "NoNewPrivs:"), "1", "{platform}");
    // The monitor's own seccomp filter, over those the caller had.
    assert_eq!(
        status_field(&status, "Seccomp:"),
        "2",
        "{platform}: monitor"
    );
    let own = std::fs::read_to_string("/proc/self/status").expect("own status");
    let filters = |s: &str| -> u32 {
        status_field(s, "Seccomp_filters:")
            .parse()
            .expect("Seccomp_filters")
    };
    assert_eq!(filters(&status), filters(&own) + 1, "{platform}: monitor");
    let kill_only = if as_nobody {
        "0000000000000000"
    } else {
        "0000000000000020"
    };
    let mut monitor_caps = vec![
        ("CapInh:", "0000000000000000"),
        ("CapPrm:", kill_only),
        ("CapEff:", kill_only),
        ("CapAmb:", "0000000000000000"),
    ];
    if !as_nobody {
        // (a caller without root cannot change its bounding set)
        monitor_caps.push(("CapBnd:", kill_only));
    }
    for (caps, want) in monitor_caps {
        assert_eq!(
            status_field(&status, caps),
            want,
            "{platform}: monitor {caps}"
        );
    }

    let sentries: Vec<u32> = children_of(monitor)
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/status"))
                .is_ok_and(|s| status_field(&s, "NSpid:").ends_with("\t1"))
        })
        .collect();
    assert_eq!(
        sentries.len(),
        1,
        "{platform}: the Sentry among {:?}",
        children_of(monitor)
    );
    let sentry = sentries[0];
    for ns in ["user", "pid", "mnt", "ipc", "uts", "net"] {
        let theirs = std::fs::read_link(format!("/proc/{sentry}/ns/{ns}")).expect("ns link");
        let ours = std::fs::read_link(format!("/proc/self/ns/{ns}")).expect("our ns link");
        assert_ne!(
            theirs, ours,
            "{platform}: the Sentry shares the host's {ns} namespace"
        );
    }
    let ns_of = |pid: u32, ns: &str| std::fs::read_link(format!("/proc/{pid}/ns/{ns}")).ok();
    // The root's gofer: one server process, below the caller's process,
    // in namespaces of its own, under its own seccomp filter.
    let mut below = children_of(monitor);
    let mut gofers = Vec::new();
    while let Some(p) = below.pop() {
        below.extend(children_of(p));
        let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
        let Ok(st) = std::fs::read_to_string(format!("/proc/{p}/status")) else {
            continue;
        };
        // (the server is PID 1 of its PID namespace; its parent there only
        // waits)
        if cmdline.split(|&b| b == 0).nth(1) == Some(b"gofer")
            && status_field(&st, "NSpid:").ends_with("\t1")
        {
            gofers.push((p, st));
        }
    }
    assert_eq!(gofers.len(), 1, "{platform}: gofer servers {gofers:?}");
    let (gofer, st) = &gofers[0];
    assert_eq!(status_field(st, "Seccomp:"), "2", "{platform}: gofer");
    assert_eq!(status_field(st, "NoNewPrivs:"), "1", "{platform}: gofer");
    for ns in ["user", "pid", "mnt", "net", "ipc", "uts"] {
        assert_ne!(
            ns_of(*gofer, ns),
            ns_of(monitor, ns),
            "{platform}: the gofer shares the host's {ns} namespace"
        );
    }
    let mut stubs = 0;
    for stub in children_of(sentry) {
        // (the stub of a process that just ended may be gone already)
        let Some(net) = ns_of(stub, "net") else {
            continue;
        };
        assert_eq!(Some(net), ns_of(sentry, "net"), "{platform}: stub");
        for ns in ["user", "pid"] {
            let theirs = ns_of(stub, ns);
            assert_ne!(theirs, ns_of(sentry, ns), "{platform}: stub {ns}");
            assert_ne!(theirs, ns_of(monitor, ns), "{platform}: stub {ns}");
        }
        for ns in ["mnt", "ipc", "uts"] {
            // (gone meanwhile: None)
            if let Some(theirs) = ns_of(stub, ns) {
                assert_eq!(Some(theirs), ns_of(sentry, ns), "{platform}: stub {ns}");
            }
        }
        stubs += 1;
    }
    if platform == "kvm" {
        // Guest code runs in the VM: no host process of its own at all.
        assert_eq!(stubs, 0, "{platform}: stubs under the Sentry");
    } else {
        assert!(stubs > 0, "{platform}: no stub under the Sentry");
    }
    let tasks = format!("/proc/{sentry}/task");
    let mut seen = 0;
    for task in std::fs::read_dir(&tasks).expect("the Sentry's threads") {
        let path = task.expect("task").path().join("status");
        let Ok(status) = std::fs::read_to_string(&path) else {
            continue; // a thread that just ended
        };
        let field = |name| status_field(&status, name);
        assert_eq!(field("Seccomp:"), "2", "{platform}: {path:?}:\n{status}");
        assert_eq!(field("NoNewPrivs:"), "1", "{platform}: {path:?}");
        for ids in ["Uid:", "Gid:"] {
            assert_eq!(
                field(ids).split_whitespace().collect::<Vec<_>>(),
                ["65534"; 4],
                "{platform}: {path:?}: {ids}"
            );
        }
        // Root's powers are gone too, and so are those the Sentry had in
        // its own user namespace (this is a run without `--network host`).
        for caps in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
            assert_eq!(
                field(caps),
                "0000000000000000",
                "{platform}: {path:?}: {caps}\n{status}"
            );
        }
        seen += 1;
    }
    assert!(seen >= 2, "{platform}: only {seen} threads in {tasks}");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"fine\n")
        .expect("write");
    line.clear();
    out.read_line(&mut line).expect("read");
    assert_eq!(line, "got fine\n", "{platform}");
    let st = child.wait().expect("wait");
    assert!(st.success(), "{platform}: {st:?}");
}

// ---- no way out (issue 4 point 7) ----------------------------------------------

/// A host directory holding `secret` ("HOST-SECRET ...") and `root/`, the
/// sandbox's root, with busybox, the attack program `no_way_out.c`, and a
/// decoy ("inside-decoy") at the secret's own absolute path below the root:
/// a guest that opens the secret's path finds the decoy, so whatever reads
/// "HOST-SECRET" got out.
struct EscapeRoot {
    dir: TempDir,
    secret: String,
}

impl EscapeRoot {
    fn new() -> EscapeRoot {
        let dir = TempDir::new("noescape");
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("bin")).expect("mkdir bin");
        std::fs::copy("/bin/busybox", root.join("bin/busybox")).expect("copy busybox");
        let bin = compile_static(dir.path(), "no_way_out", include_str!("no_way_out.c"));
        std::fs::copy(&bin, root.join("bin/no_way_out")).expect("copy attack");
        let secret = dir.path().join("secret");
        std::fs::write(&secret, b"HOST-SECRET outside the root\n").expect("write secret");
        let secret = path_str(&secret).to_owned();
        let decoy = root.join(secret.trim_start_matches('/'));
        std::fs::create_dir_all(decoy.parent().expect("parent")).expect("mkdir decoy dir");
        std::fs::write(&decoy, b"inside-decoy\n").expect("write decoy");
        EscapeRoot { dir, secret }
    }

    fn root(&self) -> String {
        path_str(&self.dir.path().join("root")).to_owned()
    }

    /// Runs the attack program in the sandbox, under each platform;
    /// asserts it exited 0 and never read the secret; returns its stdout
    /// of each run.
    fn attack(&self, args: &[&str]) -> Vec<String> {
        let root = self.root();
        let mut argv = vec!["/bin/no_way_out"];
        argv.extend_from_slice(args);
        platforms()
            .into_iter()
            .map(|platform| {
                let out = sandboxed(
                    &["--root", &root, "--platform", &platform],
                    &argv,
                    &[],
                    None,
                );
                assert_eq!(out.status, 0, "{platform}: {args:?}: {out:?}");
                assert!(
                    !out.stdout.contains("HOST-SECRET"),
                    "{platform}: {args:?}: the guest read a host file outside its root:\n{}",
                    out.stdout
                );
                out.stdout
            })
            .collect()
    }
}

/// Asserts that `out` has each of the lines `want`.
fn has_lines(out: &str, want: &[&str]) {
    for line in want {
        assert!(
            out.lines().any(|l| l == *line),
            "missing line {line:?} in:\n{out}"
        );
    }
}

#[test]
fn no_way_out_through_file_handles() {
    let r = EscapeRoot::new();
    // The secret's real handle, as the host's kernel would take it back.
    let nat = native(
        &[
            &format!("{}/no_way_out", r.dir.path_str()),
            "mkhandle",
            &r.secret,
        ],
        &[],
        None,
    );
    assert_eq!(nat.status, 0, "native name_to_handle_at: {nat:?}");
    let handle = nat.stdout.trim();
    for out in r.attack(&["handles", &r.secret, handle]) {
        has_lines(
            &out,
            &[
                "name_to_handle_at(secret): EOPNOTSUPP",
                "name_to_handle_at(/bin/busybox): EOPNOTSUPP",
                "name_to_handle_at(/, AT_EMPTY_PATH): EOPNOTSUPP",
                "open_by_handle_at(host handle of the secret): EPERM",
                "guessed handles opened: 0, refused with EPERM: 1020",
                "secret by path: read: inside-decoy",
            ],
        );
    }
}

#[test]
fn no_way_out_through_chroot_and_a_held_directory() {
    let r = EscapeRoot::new();
    // The decoy's directories start at the secret's first path component
    // (where the temporary directory lives: it differs between machines).
    let first = r
        .secret
        .trim_start_matches('/')
        .split('/')
        .next()
        .expect("absolute path")
        .to_owned();
    let mut want_top = [".".to_owned(), "..".to_owned(), "bin".to_owned(), first];
    want_top[2..].sort();
    let top_line = format!("top directory: {}", want_top.join(" "));
    for out in r.attack(&["chroot", &r.secret]) {
        has_lines(
            &out,
            &[
                "chdir(/tmp/jail/inner): ok",
                "chroot(/tmp/jail): ok",
                "cwd in the jail: /inner",
                "chroot(.): ok",
                "cwd in the inner jail: /",
                "secret in the jail: ENOENT",
                "fchdir(held /): ok",
                // Out of the chroot (unreachable from its root), at the
                // top of the sandbox, and no higher.
                "cwd after 64 x ..: (unreachable)/",
                "chroot(.) after ..: ok",
                "cwd after chroot(.): /",
                "secret by .. chain: read: inside-decoy",
                "secret by path: read: inside-decoy",
                "secret from the held descriptor: read: inside-decoy",
            ],
        );
        // The top of every `..` chain is the root given: its names only.
        has_lines(&out, &[&top_line]);
    }
    let mut top: Vec<String> = std::fs::read_dir(r.root())
        .expect("read root")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    assert_eq!(top, want_top[2..], "the test's own root changed");
}

#[test]
fn no_way_out_through_pivot_root() {
    let r = EscapeRoot::new();
    for out in r.attack(&["pivot", &r.secret]) {
        has_lines(
            &out,
            &[
                "pivot_root(/tmp/new, /tmp/new/old): EPERM",
                "pivot_root(., .): EPERM",
                "umount2(., MNT_DETACH): EINVAL",
                "secret by path: read: inside-decoy",
                "secret by .. chain: read: inside-decoy",
            ],
        );
    }
}

#[test]
fn no_way_out_through_mount() {
    let r = EscapeRoot::new();
    for out in r.attack(&["mount", &r.secret]) {
        has_lines(
            &out,
            &[
                "mount(proc): EPERM",
                // a tmpfs of the Sentry's own over the empty directory,
                // then binds of the sandbox's own tree: its root, and its
                // directory of the secret's name (the decoy's)
                "mount(tmpfs): ok",
                "mount(bind /): ok",
                "mount(bind of the secret's directory): ok",
                "mount(remount / rw): EPERM",
                "mount(move /proc): EPERM",
                "umount2(/proc): EBUSY",
                "umount2(/tmp): EBUSY",
                "/tmp/m entries: 3",
                "secret through /tmp/m: ENOENT",
                "secret's name in /tmp/m: read: inside-decoy",
            ],
        );
        // The new mount API is refused like mount(2), root or not: the
        // calls that need the privilege are EPERM (mount_setattr checks
        // its attribute size, here 0, first: EINVAL, as Linux does).
        has_lines(
            &out,
            &[
                "fsopen(tmpfs): EPERM",
                "open_tree(/): EPERM",
                "move_mount: EPERM",
                "mount_setattr: EINVAL",
            ],
        );
    }
}

/// The /proc links that name a process's root, working directory and
/// open files (its own and a child's, by pid) resolve inside the sandbox and
/// name guest paths; whatever way they are followed, `..` included, the
/// guest finds the decoy. Hard links of the secret's path, through those
/// links or of an open descriptor, fail and leave nothing behind.
#[test]
fn no_way_out_through_proc_links_and_hard_links() {
    let r = EscapeRoot::new();
    let dir = r
        .secret
        .rsplit_once('/')
        .expect("absolute path")
        .0
        .to_owned();
    let (dir_link, file_link) = (format!("-> {dir}"), format!("-> {}", r.secret));
    for out in r.attack(&["proclinks", &r.secret]) {
        has_lines(
            &out,
            &[
                "readlink /proc/self/root: -> /",
                "readlink /proc/1/root: -> /",
                "secret via /proc/self/root: read: inside-decoy",
                "secret via /proc/1/root: read: inside-decoy",
                "secret via /proc/self/root/..: read: inside-decoy",
                "secret via /proc/1/root/..: read: inside-decoy",
                "open(/proc/self/root): ok",
                "secret from an open /proc/self/root: read: inside-decoy",
                "chdir(secret's directory): ok",
                &format!("readlink /proc/self/cwd: {dir_link}"),
                "secret via /proc/self/cwd: read: inside-decoy",
                "secret via /proc/self/cwd/..: read: inside-decoy",
                "descriptors: as expected",
                &format!("readlink /proc/self/fd/DIR: {dir_link}"),
                &format!("readlink /proc/self/fd/FILE: {file_link}"),
                "readlink /proc/self/fd/ROOT: -> /",
                "secret via /proc/self/fd/DIR: read: inside-decoy",
                "secret via /proc/self/fd/FILE: read: inside-decoy",
                "secret via /proc/self/fd/ROOT: read: inside-decoy",
                "secret via /proc/self/fd/DIR/..: read: inside-decoy",
                &format!("readlink /proc/CHILD/fd/100: {dir_link}"),
                "secret via /proc/CHILD/fd/100: read: inside-decoy",
                "secret via /proc/CHILD/root: read: inside-decoy",
                "secret via /proc/CHILD/cwd/..: read: inside-decoy",
                "/tmp/hl: ENOENT",
                "hard link beside it: ENOENT",
                "secret by path: read: inside-decoy",
            ],
        );
        // Every hard link is refused (the errno is not the point here).
        for attempt in [
            "link(secret, /tmp/hl)",
            "link(/proc/self/root/..secret, /tmp/hl)",
            "linkat(/proc/self/fd/FILE, /tmp/hl, AT_SYMLINK_FOLLOW)",
            "linkat(FILE, \"\", /tmp/hl, AT_EMPTY_PATH)",
            "link(secret, beside it)",
        ] {
            let line = out
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{attempt}: ")))
                .unwrap_or_else(|| panic!("no {attempt} line in:\n{out}"));
            assert_ne!(line, "ok", "{attempt} succeeded:\n{out}");
        }
    }
    // Nothing was made on the host beside the decoy.
    let decoy_dir = Path::new(&r.root()).join(dir.trim_start_matches('/'));
    let names: Vec<String> = std::fs::read_dir(&decoy_dir)
        .expect("read decoy dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["secret"], "the guest changed its root on the host");
    assert_eq!(
        std::fs::read_to_string(&r.secret).expect("read secret"),
        "HOST-SECRET outside the root\n"
    );
}

/// One guest process swaps a directory and a symlink to `/` (RENAME_EXCHANGE
/// in a loop) while another opens the secret's path through them 4000
/// times: through the symlink it must find the decoy inside the root,
/// through the directory nothing, and never the host's file.
#[test]
fn no_way_out_through_a_rename_race_against_a_symlink_swap() {
    let r = EscapeRoot::new();
    for out in r.attack(&["race", &r.secret, "4000"]) {
        has_lines(&out, &["swapper still swapping at the end: yes"]);
        let counts = |label: &str| -> [u32; 4] {
            let line = out
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{label}: ")))
                .unwrap_or_else(|| panic!("no {label} line in:\n{out}"));
            let v: Vec<u32> = line
                .split_whitespace()
                .map(|kv| kv.split_once('=').expect("k=v").1.parse().expect("count"))
                .collect();
            [v[0], v[1], v[2], v[3]]
        };
        let [leaked, decoy, missing, other] = counts("via d");
        assert_eq!((leaked, other), (0, 0), "{out}");
        assert_eq!(decoy + missing, 2000, "{out}");
        // Both shapes were met, so the opens really raced the swaps.
        assert!(decoy > 0 && missing > 0, "the race never happened: {out}");
        // `..` from either shape climbs to the root and no further.
        assert_eq!(counts("via .."), [0, 2000, 0, 0], "{out}");
    }
}

/// Linux's tmpfs with `size=8m`, natively (in a mount namespace of its
/// own) and in the sandbox (`--tmpfs /tmp:size=8m`): a write that does not
/// fit writes what fits, the next one is ENOSPC, statfs shows the limit
/// and no room, and after a delete the space is back and the sandbox goes
/// on working.
#[test]
fn filling_a_tmpfs_past_its_size_is_enospc_and_the_sandbox_lives_on() {
    const FILL: &str = r#"
import errno, os
M = 1 << 20
fd = os.open("/tmp/fill", os.O_WRONLY | os.O_CREAT, 0o644)
print("first write", os.write(fd, b"x" * (6 * M)) / M)
print("second write", os.write(fd, b"y" * (6 * M)) / M)
try:
    os.write(fd, b"z")
    print("third write worked")
except OSError as e:
    print("third write", errno.errorcode[e.errno])
st = os.statvfs("/tmp")
print("size", st.f_blocks * st.f_frsize / M, "free", st.f_bavail * st.f_frsize)
print("file", os.fstat(fd).st_size / M)
os.close(fd)
os.unlink("/tmp/fill")
st = os.statvfs("/tmp")
print("free after unlink", st.f_bavail * st.f_frsize / M)
with open("/tmp/ok", "w") as f:
    f.write("still writable\n")
print(open("/tmp/ok").read(), end="")
"#;
    let nat = native(
        &[
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "bash",
            "-c",
            "mount -t tmpfs -o size=8m tmpfs /tmp && exec python3 -c \"$FILL\"",
        ],
        &[("FILL", FILL)],
        None,
    );
    assert_eq!(nat.status, 0, "native: {nat:?}");
    assert_eq!(
        nat.stdout,
        "first write 6.0\nsecond write 2.0\nthird write ENOSPC\nsize 8.0 free 0\nfile 8.0\n\
         free after unlink 8.0\nstill writable\n",
        "the native run disagrees with what the test expects"
    );
    let sb = sandboxed(
        &["--tmpfs", "/tmp:size=8m"],
        &["python3", "-c", FILL],
        &[],
        None,
    );
    assert_eq!((sb.status, &sb.stdout), (0, &nat.stdout), "{sb:?}");
    // Without --tmpfs, /tmp holds at most half the memory, as Linux sizes
    // a tmpfs by default.
    let sb = sandboxed(
        &[],
        &[
            "python3",
            "-c",
            "import os; st = os.statvfs('/tmp'); \
             kb = int(open('/proc/meminfo').read().split()[1]); \
             print(abs(st.f_blocks * st.f_frsize - kb * 1024 // 2) <= 4096)",
        ],
        &[],
        None,
    );
    assert_eq!((sb.status, sb.stdout.as_str()), (0, "True\n"), "{sb:?}");
    let bad = sandboxed(&["--tmpfs", "/tmp:size=lots"], &["true"], &[], None);
    assert_eq!(bad.status, 2, "{bad:?}");
    assert_eq!(bad.stderr.trim_end().lines().count(), 1, "{bad:?}");
}

// ---- what programs learn about the machine -------------------------------------

/// nproc, Python and getconf count the CPUs as natively (issue 4 point 3,
/// /sys): glibc reads /sys/devices/system/cpu, Python and nproc
/// sched_getaffinity.
#[test]
fn cpu_counts_agree_with_native() {
    compare_script(
        "nproc; nproc --all
         python3 -c 'import os; print(os.cpu_count(), len(os.sched_getaffinity(0)))'
         getconf _NPROCESSORS_CONF; getconf _NPROCESSORS_ONLN
         cat /sys/devices/system/cpu/online
         if command -v node >/dev/null; then
             node -e 'const os = require(\"os\"); console.log(os.availableParallelism(), os.cpus().length)'
         fi",
    );
    // One cpuN directory per CPU, each but cpu0 on line.
    let out = sandboxed(
        &[],
        &[
            "bash",
            "-c",
            "getconf _NPROCESSORS_CONF; ls /sys/devices/system/cpu | grep -c '^cpu[0-9]'; \
             cat /sys/devices/system/cpu/cpu[1-9]*/online 2>/dev/null | sort -u; \
             test -e /sys/devices/system/cpu/cpu0/online || echo cpu0 fixed",
        ],
        &[],
        None,
    );
    assert_eq!(out.status, 0, "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[0], lines[1], "{}", out.stdout);
    assert_eq!(lines.last(), Some(&"cpu0 fixed"), "{}", out.stdout);
    if lines[0] != "1" {
        assert_eq!(lines[2], "1", "{}", out.stdout);
    }
}

/// Each CPU's topology and cache files say what the host's say (read by
/// the Sentry before its seccomp filter; renumbered only when the sandbox
/// runs on some of the host's CPUs), so lscpu finds the same cores,
/// sockets and caches.
#[test]
fn cpu_topology_and_caches_agree_with_native() {
    compare_script(
        "cd /sys/devices/system/cpu
         for f in cpu[0-9]*/topology/* cpu[0-9]*/cache/index*/*; do
             case $f in */uevent) continue;; esac
             echo \"$f: $(cat $f)\"
         done
         ls -d cpu[0-9]*/topology cpu[0-9]*/cache/index* | wc -l
         if command -v lscpu >/dev/null; then lscpu -p; lscpu -C; fi",
    );
}

/// /sys/fs/cgroup's statistics: cpu.stat counts the guest's CPU time
/// (usage = user + system, growing as the guest computes), memory.stat the
/// sandbox's memory (tmpfs files as `file` and `shmem`).
#[test]
fn cgroup_statistics_parse_and_grow() {
    let out = sandboxed(
        &[],
        &[
            "bash",
            "-c",
            "stat() { grep \"^$2 \" /sys/fs/cgroup/$1 | cut -d' ' -f2; }
             u0=$(stat cpu.stat usage_usec)
             i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done
             u1=$(stat cpu.stat usage_usec)
             [ $u1 -gt $u0 ] && echo usage grew
             [ $((u1 - u0)) -ge 10000 ] && echo by at least 10 ms
             bash -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done'
             u2=$(stat cpu.stat usage_usec)
             [ $((u2 - u1)) -ge 10000 ] && echo an exited child counts
             [ $(( $(stat cpu.stat user_usec) + $(stat cpu.stat system_usec) )) \
               -ge $u2 ] && echo user plus system
             stat cpu.stat nr_throttled
             cut -d' ' -f1 /sys/fs/cgroup/cpu.stat | tr '\\n' ' '; echo
             f0=$(stat memory.stat file)
             head -c 8388608 /dev/zero > /dev/shm/x
             f1=$(stat memory.stat file)
             [ $((f1 - f0)) -ge 8388608 ] && echo file grew by the tmpfs file
             [ $(stat memory.stat shmem) = $f1 ] && echo shmem is file
             [ $(stat memory.stat anon) -gt 0 ] && echo some anon
             ls /sys/fs/cgroup | grep -c stat",
        ],
        &[],
        None,
    );
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(
        out.stdout,
        "usage grew\nby at least 10 ms\nan exited child counts\nuser plus system\n0\n\
         usage_usec user_usec system_usec nr_periods nr_throttled throttled_usec \
         nr_bursts burst_usec \n\
         file grew by the tmpfs file\nshmem is file\nsome anon\n2\n",
        "{}",
        out.stderr
    );
}

/// Set-user-ID bits count where the mount table shows no `nosuid` (the
/// sandbox's `/tmp`) and not where it does (`/dev/shm`, as in a
/// container), as Linux's `nosuid` mounts behave.
#[test]
fn set_user_id_programs_follow_the_mount_tables_nosuid() {
    let out = sandboxed(
        &[],
        &[
            "sh",
            "-c",
            "for d in /tmp /dev/shm; do
               cp /usr/bin/id $d/id && chmod 4755 $d/id
               grep \" $d \" /proc/self/mounts | cut -d' ' -f4 | tr ',' '\\n' | grep -cx nosuid
               setpriv --reuid=1000 --regid=1000 --clear-groups $d/id -u
             done",
        ],
        &[],
        None,
    );
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(out.stdout, "0\n0\n1\n1000\n", "{}", out.stderr);
}

/// /sys/class/net/lo, which tools read for the loopback, says what the
/// host's loopback says (and what the sandbox's netlink says of it).
#[test]
fn sys_class_net_lo_agrees_with_native() {
    compare_script(
        "cd /sys/class/net/lo && cat address broadcast mtu flags operstate ifindex iflink \
         type carrier addr_len tx_queue_len
         readlink /sys/class/net/lo; test -d /sys/class/net/lo/ && echo a directory
         ls /sys/class/net | grep -x lo
         python3 -c 'import socket; print(socket.if_nametoindex(\"lo\"))'",
    );
}

/// The rest of /sys a program reads to size itself is the sandbox's own
/// view (so not compared with the host's): one NUMA node with every CPU
/// and all the memory /proc/meminfo reports, transparent huge pages off
/// (guest memory never uses them), and the sandbox's cgroup v2 files, with
/// no limits under `do`.
#[test]
fn sys_is_the_sandboxs_own_view() {
    let out = sandboxed(
        &[],
        &[
            "bash",
            "-c",
            "cd /sys/devices/system/node; cat online possible has_cpu
             cmp node0/cpulist ../cpu/online && echo node0 has every CPU
             [ \"$(grep MemTotal node0/meminfo | tr -s ' ' | cut -d' ' -f4)\" = \
               \"$(grep MemTotal /proc/meminfo | tr -s ' ' | cut -d' ' -f2)\" ] && echo same MemTotal
             ls /sys/devices/system/node | tr '\\n' ' '; echo
             cat /sys/kernel/mm/transparent_hugepage/enabled
             cd /sys/fs/cgroup; cat cgroup.controllers cpu.max memory.max pids.max /proc/self/cgroup
             cmp cpuset.cpus.effective ../../devices/system/cpu/online && echo cpuset every CPU
             grep -qx $$ cgroup.procs && echo the shell is in cgroup.procs
             grep ' /sys' /proc/mounts
             stat -f -c %T /sys /sys/fs/cgroup
             echo x > memory.max 2>/dev/null || echo memory.max is read-only",
        ],
        &[],
        None,
    );
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(
        out.stdout,
        "0\n0\n0\nnode0 has every CPU\nsame MemTotal\n\
         has_cpu has_memory has_normal_memory node0 online possible \n\
         always madvise [never]\n\
         cpuset cpu memory pids\nmax 100000\nmax\n4096\n0::/\n\
         cpuset every CPU\nthe shell is in cgroup.procs\n\
         sysfs /sys sysfs ro,nosuid,nodev,noexec 0 0\n\
         cgroup2 /sys/fs/cgroup cgroup2 ro,nosuid,nodev,noexec 0 0\n\
         sysfs\ncgroup2fs\nmemory.max is read-only\n",
        "{}",
        out.stderr
    );
}

/// The sandbox has no block devices, and /sys says so as a container
/// given no disks would: /sys/block, /sys/class/block and /sys/dev/block
/// exist and are empty, so listing them succeeds with nothing, lsblk
/// (which fails without /sys/dev/block) lists nothing, and Python's
/// listing of /sys/block (what psutil's disk counters fall back on)
/// finds none; df, which reads the mount table, still works.
#[test]
fn sys_block_is_empty_and_lists() {
    let out = sandboxed(
        &[],
        &[
            "bash",
            "-c",
            "for d in /sys/block /sys/class/block /sys/dev/block; do
                 ls -A $d; echo \"ls $d: $?, $(ls -A $d | wc -l) entries\"
             done
             test -d /sys/block && echo a directory
             if command -v lsblk >/dev/null; then
                 lsblk > /tmp/lsblk; echo \"lsblk: $?\"
                 echo \"lsblk lines: $(wc -l < /tmp/lsblk)\"
             else
                 echo 'lsblk: 0'; echo 'lsblk lines: 0'
             fi
             python3 -c 'import os; print(os.listdir(\"/sys/block\"))'
             df / >/dev/null; echo \"df: $?\"",
        ],
        &[],
        None,
    );
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(
        out.stdout,
        "ls /sys/block: 0, 0 entries\nls /sys/class/block: 0, 0 entries\n\
         ls /sys/dev/block: 0, 0 entries\na directory\nlsblk: 0\nlsblk lines: 0\n[]\ndf: 0\n",
        "{}",
        out.stderr
    );
}

/// The JVM sizes itself from the sandbox's cgroup v2 view (/proc/cgroups,
/// the cgroup2 line of mountinfo, /proc/self/cgroup, then
/// /sys/fs/cgroup): it finds it, with the sandbox's CPUs and no limits
/// under `do`. (Its threads also ask `sched_getaffinity` about themselves
/// by thread ID, through `pthread_getattr_np`.)
#[test]
fn the_jvm_reads_the_sandboxs_cgroup() {
    assert!(
        Path::new("/usr/bin/java").exists(),
        "no /usr/bin/java: install openjdk-17-jre-headless (.ci/run does)"
    );
    let out = sandboxed(
        &[],
        &[
            "bash",
            "-c",
            "nproc; java -XshowSettings:system -version 2>&1 | \
             grep -E 'Provider|Effective CPU Count|Memory Limit|Processes Limit' | tr -s ' '",
        ],
        &[],
        None,
    );
    assert_eq!(out.status, 0, "{out:?}");
    let cpus = out.stdout.lines().next().unwrap_or_default();
    assert_eq!(
        out.stdout,
        format!(
            "{cpus}\n Provider: cgroupv2\n Effective CPU Count: {cpus}\n \
             Memory Limit: Unlimited\n Maximum Processes Limit: 4096\n"
        ),
        "{}",
        out.stderr
    );
}

/// `ps` computes a start date from /proc/[pid]/stat's start time and
/// /proc/stat's btime, and an elapsed time from /proc/uptime: the sandbox's
/// first process started today, moments ago, not in 1970.
#[test]
fn ps_shows_a_real_start_date_and_a_small_elapsed_time() {
    let out = sandboxed(
        &[],
        &[
            "bash",
            "-c",
            "ps -o lstart= -p 1; date -d \"$(ps -o lstart= -p 1)\" +%s; date +%s; \
             ps -o etimes= -p 1; ps -o pid,lstart,etime,cmd -p 1 | tail -1; \
             grep btime /proc/stat | cut -d' ' -f2; cut -d' ' -f1 /proc/uptime; date +%s",
        ],
        &[],
        None,
    );
    assert_eq!(out.status, 0, "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().map(str::trim).collect();
    assert_eq!(lines.len(), 8, "{}", out.stdout);
    let year = native(&["date", "+%Y"], &[], None).stdout.trim().to_owned();
    assert!(
        lines[0].ends_with(&year),
        "lstart {:?} is not this year ({year})",
        lines[0]
    );
    let num = |s: &str| -> f64 {
        s.parse()
            .unwrap_or_else(|_| panic!("{s:?}: {}", out.stdout))
    };
    let (started, now) = (num(lines[1]), num(lines[2]));
    assert!(
        (0.0..60.0).contains(&(now - started)),
        "started {started}, now {now}: {}",
        out.stdout
    );
    assert!(num(lines[3]) < 60.0, "etimes: {}", out.stdout);
    assert!(
        lines[4].starts_with("1 ") && lines[4].contains(&year),
        "{}",
        out.stdout
    );
    // btime + uptime is the time uptime was read (after `now`, before
    // the last `date`: far apart on a loaded machine).
    let (btime, uptime, after) = (num(lines[5]), num(lines[6]), num(lines[7]));
    assert!(
        (now - 2.0..=after + 2.0).contains(&(btime + uptime)),
        "btime {btime} + uptime {uptime} vs now {now} .. {after}"
    );
}

// ---- programs that work files hard (tar, gcc, git, sqlite3, Python, cargo) --

/// Runs `script` with bash natively and in the sandbox: same stdout, status 0.
/// Each script works in a fresh `mktemp -d` (the sandbox's /tmp is its own)
/// and removes it.
fn compare_script(script: &str) {
    compare_with(&["bash", "-c", script], &[], None, 0);
}

#[test]
fn tar_gzip_round_trip_of_usr_share_doc() {
    compare_script(
        "set -e; d=$(mktemp -d); cd \"$d\"
         tar czf doc.tgz -C /usr/share doc
         mkdir x; tar xzf doc.tgz -C x
         diff -r --no-dereference /usr/share/doc x/doc && echo same
         tar tzf doc.tgz | LC_ALL=C sort | md5sum
         cd /; rm -rf \"$d\"",
    );
}

/// Walks down large read-only trees, twice (the second served from what
/// the first looked up, and looked up ahead), then one directory at a time:
/// every name, type, size, inode and link count as natively.
#[test]
fn find_and_du_walk_the_root_as_natively() {
    compare_script(
        "set -e
         walk() { find /usr/lib/python3* /usr/share/zoneinfo -printf '%p %y %s %i %n %m\\n' | LC_ALL=C sort | md5sum; }
         walk; walk
         du -s --apparent-size /usr/share/zoneinfo /usr/lib/python3*
         for d in /usr/share/zoneinfo/*/; do ls \"$d\" > /dev/null; done
         find /usr/share/zoneinfo -type d | LC_ALL=C sort | md5sum",
    );
}

/// Under a low hard descriptor limit (the Sentry's and the gofer's both),
/// a walk over a large tree still sees every file: the caches the walk
/// fills shrink to fit (before, `find /usr/lib` failed with EMFILE after a
/// few hundred files at 256).
#[test]
fn a_walk_under_a_low_descriptor_limit_sees_every_file() {
    let walk = "find /usr/lib/python3* /usr/share -type f | wc -l";
    let want = native(&["sh", "-c", walk], &[], None);
    assert_eq!(want.status, 0, "{want:?}");
    let script = format!("ulimit -n 256 && exec {FERROVISOR} do -- sh -c '{walk}'");
    let got = native(&["sh", "-c", &script], &[], None);
    assert_eq!(
        (got.status, &got.stdout),
        (0, &want.stdout),
        "{}",
        got.stderr
    );
}

#[test]
fn gcc_compiles_and_runs_a_program() {
    compare_script(
        r#"set -e; d=$(mktemp -d); cd "$d"
         printf '#include <stdio.h>\nint main(void) { printf("%%d\\n", 6 * 7); return 0; }\n' > h.c
         gcc -O2 -Wall -o h h.c
         ./h
         cd /; rm -rf "$d""#,
    );
}

#[test]
fn git_init_add_commit_log() {
    compare_script(
        "set -e; d=$(mktemp -d); cd \"$d\"
         export GIT_AUTHOR_DATE=2020-01-01T00:00:00Z GIT_COMMITTER_DATE=2020-01-01T00:00:00Z
         git init -q r; cd r
         git config user.email t@example.test; git config user.name Tester
         echo one > a; git add a; git commit -q -m first
         echo two >> a; mkdir -p sub; echo three > sub/b; git add -A; git commit -q -m second
         git log --format='%H %s'
         git status --short; git show --stat --format=%s HEAD | tail -3
         cd /; rm -rf \"$d\"",
    );
}

#[test]
fn sqlite3_creates_and_queries_a_database() {
    compare_script(
        r#"set -e; d=$(mktemp -d); cd "$d"
         sqlite3 db "create table t(a, b); insert into t values (1, 'x'), (2, 'y'); create index i on t(b);"
         sqlite3 db "pragma journal_mode=wal; insert into t values (3, 'z'); select count(*), sum(a) from t; pragma integrity_check;"
         sqlite3 db "select b from t where b > 'x' order by b;"
         cd /; rm -rf "$d""#,
    );
}

/// `cp` copies with `copy_file_range` and `shutil.copyfile` with
/// `sendfile`: both must copy whole files, within /tmp and from the root.
#[test]
fn cp_and_shutil_copyfile_copy_whole_files() {
    compare_script(
        r#"set -e; d=$(mktemp -d); cd "$d"
         seq 1 500000 > big; cp big big.cp; cp /usr/bin/ls ls.cp
         python3 -c 'import shutil; shutil.copyfile("big", "big.py"); shutil.copyfile("/usr/bin/ls", "ls.py")'
         cmp big big.cp; cmp big big.py; cmp /usr/bin/ls ls.cp; cmp /usr/bin/ls ls.py
         wc -c < big.cp; wc -c < big.py; sha256sum big.cp big.py | cut -c1-64 | uniq -c
         cd /; rm -rf "$d""#,
    );
}

/// A CI job's Rust build: cargo builds a crate (a library, a binary, a
/// build script, a proc-macro crate of the same workspace) offline,
/// in release and test profiles, runs it, runs its unit and doc tests,
/// finds nothing to do a second time and rebuilds what an edit touched.
/// Cargo shares a jobserver pipe with its rustc processes, locks the
/// target directory, hard-links and renames artifacts, runs threads and
/// many processes (rustc, rustdoc, cc and the linker, the build script,
/// the tests); rustc maps rlibs and its own 170 MiB driver library and
/// loads the proc macro it built. The toolchain is the one that builds
/// this project (the directory of `$CARGO`, which holds rustc and
/// rustdoc too); paths, hashes and timings are masked.
#[test]
fn cargo_builds_tests_and_rebuilds_a_crate_offline() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_owned());
    let bin = Path::new(&cargo).parent().expect("cargo's directory");
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", path_str(bin));
    let mut env = vec![("PATH", path.as_str())];
    // A rustup proxy in $CARGO finds its toolchain through these.
    let rustup: Vec<(&str, String)> = ["RUSTUP_HOME", "RUSTUP_TOOLCHAIN"]
        .into_iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k, v)))
        .collect();
    env.extend(rustup.iter().map(|(k, v)| (*k, v.as_str())));
    // About 5 s a platform here, but a busy machine makes every process
    // start slower, and a build starts dozens.
    compare_within(&["bash", "-c", CARGO_JOB], &env, None, 0, 4 * TIMEOUT);
}

const CARGO_JOB: &str = r#"set -e; d=$(mktemp -d); cd "$d"
export HOME="$d" CARGO_HOME="$d/cargo-home"
mkdir -p c/src c/mac/src; cd c
cat > Cargo.toml <<'T'
[package]
name = "tiny"
version = "0.1.0"
edition = "2021"
[dependencies]
mac = { path = "mac" }
[workspace]
T
cat > mac/Cargo.toml <<'T'
[package]
name = "mac"
version = "0.1.0"
edition = "2021"
[lib]
proc-macro = true
T
cat > mac/src/lib.rs <<'T'
#[proc_macro]
pub fn answer(_: proc_macro::TokenStream) -> proc_macro::TokenStream { "42".parse().unwrap() }
T
cat > build.rs <<'T'
fn main() {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    std::fs::write(out.join("gen.rs"), "pub const GENERATED: &str = \"by build.rs\";").unwrap();
    println!("cargo:rerun-if-changed=build.rs");
}
T
cat > src/lib.rs <<'T'
include!(concat!(env!("OUT_DIR"), "/gen.rs"));
/// ```
/// assert_eq!(tiny::square(3), 9);
/// ```
pub fn square(x: u64) -> u64 { x * x }
pub fn answer() -> u64 { mac::answer!() }
#[cfg(test)]
mod tests {
    #[test]
    fn squares() { assert_eq!(super::square(7), 49); }
    #[test]
    #[should_panic(expected = "boom")]
    fn unwinds() { panic!("boom") }
}
T
cat > src/main.rs <<'T'
fn words(s: &str) -> usize { s.split_whitespace().count() }
fn squares(n: u64) -> Vec<u64> {
    let h: Vec<_> = (1..=n).map(|i| std::thread::spawn(move || tiny::square(i))).collect();
    h.into_iter().map(|h| h.join().unwrap()).collect()
}
fn main() { println!("{:?} {} {} {}", squares(5), words("a b  c"), tiny::answer(), tiny::GENERATED); }
#[cfg(test)]
mod tests {
    #[test]
    fn counts() { assert_eq!(super::words("x y"), 2); }
    #[test]
    fn threads() { assert_eq!(super::squares(3), [1, 4, 9]); }
}
T
mask() { sed -e "s#$d#D#g" -e 's/ in [0-9.]*m\?s$//' -e 's/finished in [0-9.]*s/finished/' -e 's/-[0-9a-f]\{16\}/-HASH/g'; }
cargo build --offline --release -j2 2>&1 | mask | sort
./target/release/tiny
cargo test --offline -j2 -- --test-threads=1 2>&1 | mask | grep -v '^ *Compiling '
echo "--- again"; cargo build --offline --release 2>&1 | mask
sed -i 's/x \* x/x * x + 1/' src/lib.rs
cargo build --offline --release 2>&1 | mask; ./target/release/tiny
cd /; rm -rf "$d""#;

#[test]
fn python_tempfile_copytree_walk_flock_mmap() {
    compare_script(
        r#"python3 - <<'PY'
import fcntl, mmap, os, shutil, tempfile
with tempfile.TemporaryDirectory() as d:
    src = os.path.join(d, "src")
    os.makedirs(os.path.join(src, "a", "b"))
    for i in range(5):
        with open(os.path.join(src, "a", "b", "f%d" % i), "w") as f:
            f.write(str(i) * 1000)
    shutil.copytree(src, os.path.join(d, "dst"))
    print(sorted((os.path.relpath(r, d), sorted(fs)) for r, _, fs in os.walk(os.path.join(d, "dst"))))
    fd = os.open(os.path.join(d, "lock"), os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("locked")
    os.ftruncate(fd, 4096)
    m = mmap.mmap(fd, 4096)
    m[:5] = b"hello"
    m.flush()
    print(os.pread(fd, 5, 0))
PY"#,
    );
}

/// A typical Python CI job, offline: `python3 -m venv` (Debian's
/// python3-venv, pip from its bundled wheels), pip's own view of the venv,
/// then `python -m unittest` on a package from `PYTHONPATH` whose tests use
/// `multiprocessing` pools (fork and spawn: POSIX semaphores in /dev/shm,
/// pipes, re-exec of the venv's interpreter), `ThreadPoolExecutor`,
/// `subprocess`, `sqlite3`, `json` and `tempfile`. Stderr goes to stdout
/// (`exec 2>&1`) so it is compared too; only the run time is masked.
#[test]
fn python_venv_and_unittest_ci_job() {
    compare_script(PYTHON_CI_JOB);
}

const PYTHON_CI_JOB: &str = r#"set -e; exec 2>&1; d=$(mktemp -d); cd "$d"
python3 -m venv venv
. venv/bin/activate
mkdir -p src/calc tests
cat > src/calc/__init__.py <<'PY'
import json, sqlite3, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import get_context


def square(x):
    return x * x


def squares(n, method=None):
    with get_context(method).Pool(2) as p:
        return p.map(square, range(n))


def threaded_sum(n):
    with ThreadPoolExecutor(4) as ex:
        return sum(ex.map(square, range(n)))


def child_says(word):
    return subprocess.run([sys.executable, "-c", "import sys; print(sys.argv[1][::-1])", word],
                          check=True, capture_output=True, text=True).stdout.strip()


def store(path, rows):
    with sqlite3.connect(path) as db:
        db.execute("create table if not exists t(k text primary key, v text)")
        db.executemany("insert into t values (?, ?)", [(k, json.dumps(v)) for k, v in rows])
    with sqlite3.connect(path) as db:
        return {k: json.loads(v) for k, v in db.execute("select k, v from t order by k")}
PY
cat > tests/test_calc.py <<'PY'
import json, os, tempfile, unittest
import calc


class CalcTest(unittest.TestCase):
    def test_pool(self):
        self.assertEqual(calc.squares(10), [i * i for i in range(10)])

    def test_spawn_pool(self):
        self.assertEqual(calc.squares(5, "spawn"), [0, 1, 4, 9, 16])

    def test_threads(self):
        self.assertEqual(calc.threaded_sum(100), 328350)

    def test_subprocess(self):
        self.assertEqual(calc.child_says("sandbox"), "xobdnas")

    def test_sqlite_json(self):
        with tempfile.TemporaryDirectory() as d:
            got = calc.store(os.path.join(d, "db"), [("a", [1, 2]), ("b", {"x": None})])
        self.assertEqual(got, {"a": [1, 2], "b": {"x": None}})

    def test_json_file(self):
        with tempfile.NamedTemporaryFile("w+", suffix=".json") as f:
            json.dump({"b": [1, 2.5], "a": "\u00e9"}, f, sort_keys=True)
            f.seek(0)
            self.assertEqual(json.load(f), {"a": "\u00e9", "b": [1, 2.5]})
PY
pip list --disable-pip-version-check --no-index
pip check --disable-pip-version-check
python -c 'import sys; print(sys.prefix == sys.base_prefix, sys.executable == "'"$d"'/venv/bin/python")'
s=0; PYTHONPATH=src python -m unittest discover -v -s tests > log 2>&1 || s=$?
sed -E 's/^(Ran [0-9]+ tests?) in [0-9.]+s$/\1/' log; echo "unittest status $s"
cd /; rm -rf "$d""#;

#[test]
fn ps_aux_and_proc_self_list_the_sandbox_itself() {
    // Nothing to compare with natively (other processes, other pids): the
    // sandbox's own view must be complete and consistent.
    let out = sandboxed(
        &[],
        &["bash", "-c", "ps aux; echo ---; ls -la /proc/self/"],
        &[],
        None,
    );
    assert_eq!(out.status, 0, "{out:?}");
    let (ps, ls) = out.stdout.split_once("---\n").expect("both parts");
    let lines: Vec<&str> = ps.lines().collect();
    assert!(
        lines[0].starts_with("USER") && lines[0].ends_with("COMMAND"),
        "{ps}"
    );
    let pid_of = |l: &str| l.split_whitespace().nth(1).map(str::to_owned);
    let init = lines
        .iter()
        .find(|l| l.contains("bash -c ps aux"))
        .expect("init");
    assert_eq!(pid_of(init).as_deref(), Some("1"), "{ps}");
    assert!(lines.iter().any(|l| l.ends_with(" ps aux")), "{ps}");
    assert_eq!(lines.len(), 3, "the header, bash and ps: {ps}");
    for want in [
        "exe -> /usr/bin/ls",
        "cwd -> /",
        "root -> /",
        " status",
        " maps",
        " fd",
    ] {
        assert!(ls.contains(want), "{want:?} in {ls}");
    }
}

// ---- Node.js: a CI job with npm ---------------------------------------------

/// Whether the host has `node` and `npm` (saying so where not); CI installs
/// both (`.ci/run`: `nodejs`, and `npm` unless it came with it).
fn host_node_and_npm() -> bool {
    let found = ["/usr/bin/node", "/usr/bin/npm"]
        .iter()
        .all(|p| Path::new(p).exists());
    if !found {
        eprintln!(
            "skipped: no `node` or `npm` on this host (apt-get install nodejs npm; .ci/run does)"
        );
    }
    found
}

/// A Node.js CI job in the sandbox's /tmp, offline: `npm pack` of a local
/// package, `npm install` of its tarball, then `npm test` running
/// `node --test` on tests that use `worker_threads`, `child_process.execFile`
/// (node and sh, with an exit status), `fs.promises` (write, rename, readdir,
/// stat, rm) with `fs.watch` (inotify), `http` on 127.0.0.1, timers
/// (`setTimeout`, `setImmediate`, `nextTick`, `timers/promises`) and
/// `crypto.randomBytes`; then `npm run` of a failing test (status 1).
/// Durations, npm's timing and the job's directory are masked.
const NODE_JOB: &str = r##"set -eo pipefail; d=$(mktemp -d); cd "$d"
export HOME="$d" npm_config_cache="$d/npm-cache" npm_config_update_notifier=false
mkdir dep app app/test
cat > dep/package.json <<'J'
{ "name": "tinydep", "version": "1.2.3", "main": "index.js", "license": "MIT" }
J
cat > dep/index.js <<'J'
exports.words = (s) => s.split(/\s+/).filter(Boolean).sort();
J
(cd dep && npm pack --silent)
cd app
npm init -y >/dev/null
npm pkg set name=app scripts.test="node --test test/"
npm install --offline --no-audit --no-fund ../dep/tinydep-1.2.3.tgz | sed "s/in [0-9.]*m\?s$/in T/"
cat > test/work.test.js <<'J'
const test = require('node:test');
const assert = require('node:assert');
const { Worker } = require('node:worker_threads');
const { execFile } = require('node:child_process');
const fs = require('node:fs');
const fsp = require('node:fs/promises');
const path = require('node:path');
const os = require('node:os');
const http = require('node:http');
const crypto = require('node:crypto');
const timersp = require('node:timers/promises');
const { words } = require('tinydep');

test('a local dependency', () => {
  assert.deepStrictEqual(words('the quick  brown fox'), ['brown', 'fox', 'quick', 'the']);
});

test('worker_threads', async () => {
  const sums = await Promise.all([1, 2, 3].map((k) => new Promise((resolve, reject) => {
    const w = new Worker(`const { parentPort, workerData } = require('worker_threads');
      let s = 0; for (let i = 0; i < 1e6; i++) s += i % workerData;
      parentPort.postMessage(s);`, { eval: true, workerData: k + 1 });
    w.once('message', resolve);
    w.once('error', reject);
  })));
  console.log('worker sums', sums.join(' '));
  assert.deepStrictEqual(sums, [500000, 999999, 1500000]);
});

test('child_process.execFile', async () => {
  const out = await new Promise((resolve, reject) =>
    execFile(process.execPath, ['-e', 'console.log(6 * 7, process.argv.length)', 'x'],
      (err, stdout) => (err ? reject(err) : resolve(stdout))));
  assert.strictEqual(out, '42 2\n');
  const sh = await new Promise((resolve) =>
    execFile('sh', ['-c', 'echo from sh; exit 3'], (err, stdout) => resolve([err.code, stdout])));
  assert.deepStrictEqual(sh, [3, 'from sh\n']);
});

test('fs.promises write, rename, readdir, watch', async () => {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'n-'));
  const seen = [];
  const watcher = fs.watch(dir, (ev, name) => seen.push(name));
  for (let i = 0; i < 5; i++) await fsp.writeFile(path.join(dir, `f${i}.tmp`), 'x'.repeat(i * 1000));
  for (let i = 0; i < 5; i++) await fsp.rename(path.join(dir, `f${i}.tmp`), path.join(dir, `f${i}.txt`));
  const names = (await fsp.readdir(dir)).sort();
  const sizes = await Promise.all(names.map(async (n) => (await fsp.stat(path.join(dir, n))).size));
  console.log('files', names.join(' '), sizes.join(' '));
  for (let i = 0; i < 50 && !seen.includes('f4.txt'); i++) await timersp.setTimeout(10);
  watcher.close();
  assert.ok(seen.includes('f4.txt'), `watch saw ${seen}`);
  await fsp.rm(dir, { recursive: true });
});

test('http on 127.0.0.1', async () => {
  const server = http.createServer((req, res) => res.end(`hello ${req.method} ${req.url}`));
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  const bodies = await Promise.all(['/a', '/b', '/c'].map((p) => new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: p }, (res) => {
      let b = ''; res.setEncoding('utf8');
      res.on('data', (c) => (b += c)); res.on('end', () => resolve(`${res.statusCode} ${b}`));
    }).on('error', reject);
  })));
  server.close();
  console.log('http', bodies.join(', '));
  assert.strictEqual(bodies[2], '200 hello GET /c');
});

test('timers and crypto.randomBytes', async () => {
  const order = [];
  await new Promise((resolve) => {
    setTimeout(() => order.push('t20'), 20);
    setTimeout(() => { order.push('t40'); resolve(); }, 40);
    setImmediate(() => order.push('immediate'));
    process.nextTick(() => order.push('tick'));
  });
  const t0 = process.hrtime.bigint();
  await timersp.setTimeout(30);
  const slept = Number(process.hrtime.bigint() - t0) / 1e6;
  console.log('timers', order.join(' '), slept >= 29);
  const a = crypto.randomBytes(32), b = crypto.randomBytes(32);
  console.log('random', a.length, b.length, a.equals(b));
  assert.ok(slept >= 29);
  const h = crypto.createHash('sha256').update('ferrovisor').digest('hex');
  console.log('sha256', h.slice(0, 16));
});
J
cat > test/fail.test.js <<'J'
const test = require('node:test');
test('skipped', { skip: 'on purpose' }, () => {});
test('todo', { todo: true }, () => {});
J
npm test 2>&1 | sed -e 's/duration_ms:\? [0-9.]*/duration_ms X/' -e "s|$d|D|g"
mkdir check
cat > check/bad.test.js <<'J'
const test = require('node:test');
const assert = require('node:assert');
test('adds', () => assert.strictEqual(1 + 1, 3));
J
npm pkg set scripts.check="node --test check/"
npm run check >check.out 2>&1 || echo "npm run check exited $?"
sed -e 's/duration_ms:\? [0-9.]*/duration_ms X/' -e "s|$d|D|g" -e 's/_logs\/[^ ]*\.log/_logs\/LOG/' check.out
ls node_modules; cat package.json | grep -c tinydep
cd /; rm -rf "$d""##;

/// [`NODE_JOB`] gives native's stdout, stderr and exit status on every
/// platform (about 3 s a run here).
#[test]
fn node_npm_test_job_runs_as_natively() {
    if !host_node_and_npm() {
        return;
    }
    let argv = ["bash", "-c", NODE_JOB];
    let nat = native(&argv, &[], None);
    assert_eq!(
        nat.status, 0,
        "the NATIVE run failed, so the test is wrong: {}",
        nat.stderr
    );
    for want in [
        "# worker sums 500000 999999 1500000\n",
        "# files f0.txt f1.txt f2.txt f3.txt f4.txt 0 1000 2000 3000 4000\n",
        "# http 200 hello GET /a, 200 hello GET /b, 200 hello GET /c\n",
        "# pass 6\n# fail 0\n",
        "npm run check exited 1\n",
    ] {
        assert!(
            nat.stdout.contains(want),
            "the NATIVE run lacks {want:?}: {}",
            nat.stdout
        );
    }
    for platform in &platforms() {
        let sb = sandboxed(&["--platform", platform], &argv, &[], None);
        assert_eq!(
            (sb.status, sb.stdout.as_str(), sb.stderr.as_str()),
            (nat.status, nat.stdout.as_str(), nat.stderr.as_str()),
            "--platform {platform}: sandbox (left) differs from native (right)"
        );
    }
}

// ---- Go: its runtime and its toolchain ----------------------------------------

/// A Go program that leans on what the Go runtime asks of a kernel: threads
/// made with `clone(CLONE_THREAD|...)`, each with its own `sigaltstack`;
/// asynchronous preemption (SIGURG by `tgkill`; without it the spinners
/// below hold both Ps and the program never ends); futexes; timers and
/// `nanosleep`; the netpoller on epoll (pipes and sockets with deadlines,
/// HTTP and UDP over loopback); `os/exec` (clone with `CLONE_VFORK|CLONE_VM`,
/// then wait4); signals to itself; `setuid`/`setgid` applied to every
/// thread by a signal each; a heap given back with `madvise`.
const GO_PROGRAM: &str = r#"package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	runtime.GOMAXPROCS(2)

	// Two goroutines spin without a call (so without a cooperative
	// preemption point) on both Ps for 300 ms: main wakes up to stop them
	// only if the runtime preempts one by a signal.
	var stop atomic.Bool
	var spins [2]uint64
	var wg sync.WaitGroup
	for i := range spins {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for !stop.Load() {
				spins[i]++
			}
		}(i)
	}
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	fmt.Println("preempted, both spun:", spins[0] > 1000 && spins[1] > 1000)

	// Channels: a pipeline of four workers.
	in, out := make(chan int), make(chan int, 4)
	for w := 0; w < 4; w++ {
		go func() {
			for v := range in {
				out <- v * v
			}
		}()
	}
	go func() {
		for i := 1; i <= 100; i++ {
			in <- i
		}
		close(in)
	}()
	sum := 0
	for i := 0; i < 100; i++ {
		sum += <-out
	}
	fmt.Println("sum of squares:", sum)

	// Sleeps, timers and a ticker.
	t0 := time.Now()
	time.Sleep(30 * time.Millisecond)
	<-time.NewTimer(20 * time.Millisecond).C
	<-time.After(10 * time.Millisecond)
	tk := time.NewTicker(5 * time.Millisecond)
	for i := 0; i < 4; i++ {
		<-tk.C
	}
	tk.Stop()
	el := time.Since(t0)
	fmt.Println("slept long enough:", el >= 80*time.Millisecond, "not too long:", el < 10*time.Second)

	// os/exec.
	b, err := exec.Command("/bin/echo", "from", "echo").Output()
	fmt.Printf("echo: %q %v\n", b, err)
	fmt.Println("false:", exec.Command("/bin/false").Run())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	fmt.Println("sleep 10 under a 100 ms context:", exec.CommandContext(ctx, "/bin/sleep", "10").Run())

	// Files in a temporary directory.
	dir, err := os.MkdirTemp("", "goprog")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	p, q := filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")
	if err := os.WriteFile(p, []byte(strings.Repeat("go!", 10000)), 0o640); err != nil {
		panic(err)
	}
	if err := os.Rename(p, q); err != nil {
		panic(err)
	}
	data, err := os.ReadFile(q)
	st, _ := os.Stat(q)
	_, gone := os.Stat(p)
	ents, _ := os.ReadDir(dir)
	names := []string{}
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	fmt.Println("file:", len(data), err, st.Mode(), os.IsNotExist(gone), names)

	// A signal to itself, and SIGPIPE ignored.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1)
	syscall.Kill(os.Getpid(), syscall.SIGUSR1)
	fmt.Println("signal:", <-sigs)
	signal.Ignore(syscall.SIGPIPE)

	// setgid and setuid run on every thread of the process.
	fmt.Println("setgid:", syscall.Setgid(os.Getgid()), "setuid:", syscall.Setuid(os.Getuid()))

	// A pipe with a read deadline, through the netpoller.
	r, w, _ := os.Pipe()
	r.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	buf := make([]byte, 16)
	_, err = r.Read(buf)
	fmt.Println("pipe read timed out:", os.IsTimeout(err))
	w.Write([]byte("ping"))
	r.SetReadDeadline(time.Time{})
	n, _ := r.Read(buf)
	fmt.Println("pipe:", string(buf[:n]))

	// UDP over loopback.
	uc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	cc, _ := net.Dial("udp", uc.LocalAddr().String())
	cc.Write([]byte("dgram"))
	uc.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, _, err = uc.ReadFrom(buf)
	fmt.Println("udp:", string(buf[:n]), err)

	// TCP: a read deadline that passes, then the data.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() {
		s, _ := ln.Accept()
		time.Sleep(100 * time.Millisecond)
		s.Write([]byte("late"))
		s.Close()
	}()
	tc, _ := net.Dial("tcp", ln.Addr().String())
	tc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err = tc.Read(buf)
	fmt.Println("tcp read timed out:", os.IsTimeout(err))
	tc.SetReadDeadline(time.Time{})
	n, _ = io.ReadFull(tc, buf[:4])
	fmt.Println("tcp:", string(buf[:n]))
	ln.Close()

	// An HTTP server and eight concurrent clients in the same process.
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s %s", r.Method, r.URL.Path)
	})}
	go srv.Serve(hl)
	bodies := make([]string, 8)
	var hw sync.WaitGroup
	for i := range bodies {
		hw.Add(1)
		go func(i int) {
			defer hw.Done()
			resp, err := http.Get(fmt.Sprintf("http://%s/p%d", hl.Addr(), i))
			if err != nil {
				bodies[i] = err.Error()
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			bodies[i] = fmt.Sprintf("%d %s", resp.StatusCode, b)
		}(i)
	}
	hw.Wait()
	srv.Close()
	for _, b := range bodies {
		fmt.Println("http:", b)
	}

	// 320 MiB of heap, touched, then given back to the system.
	var big [][]byte
	for i := 0; i < 40; i++ {
		b := make([]byte, 8<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = byte(j)
		}
		big = append(big, b)
	}
	big = nil
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Println("heap released:", ms.HeapReleased > 100<<20)

	// Twenty threads asleep in nanosleep at once.
	var tw sync.WaitGroup
	for i := 0; i < 20; i++ {
		tw.Add(1)
		go func() {
			defer tw.Done()
			runtime.LockOSThread()
			syscall.Nanosleep(&syscall.Timespec{Nsec: 20e6}, nil)
		}()
	}
	tw.Wait()
	exe, err := os.Executable()
	fmt.Println("executable:", filepath.Base(exe), err)
}
"#;

/// The host's `go` command, or `None` (saying so) where Go is not
/// installed; CI installs it (`golang-go` in `.ci/run`).
fn host_go() -> Option<&'static str> {
    let found = ["/usr/bin/go", "/usr/local/go/bin/go"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    if found.is_none() {
        eprintln!("skipped: no `go` on this host (apt-get install golang-go; .ci/run does)");
    }
    found
}

/// A static (cgo-free) Go program built with the host's toolchain runs in
/// the sandbox as natively, on every platform.
#[test]
fn go_program_runs_as_natively() {
    let Some(go) = host_go() else { return };
    let dir = TempDir::new("goprog");
    std::fs::write(dir.path().join("main.go"), GO_PROGRAM).expect("write main.go");
    std::fs::write(dir.path().join("go.mod"), "module goprog\n\ngo 1.19\n").expect("write go.mod");
    // The build's home and cache stay in the test's directory.
    let home = dir.path().join("home");
    let cache = dir.path().join("cache");
    let env = [
        ("HOME", path_str(&home)),
        ("GOCACHE", path_str(&cache)),
        ("GOFLAGS", "-mod=mod"),
        ("CGO_ENABLED", "0"),
    ];
    let mut build = command(go, &env);
    build
        .current_dir(dir.path())
        .args(["build", "-o", "goprog", "."]);
    let out = run(build, None, TIMEOUT);
    assert_eq!(out.status, 0, "go build: {}", out.stderr);
    compare(&[path_str(&dir.path().join("goprog"))]);
}

/// The Go toolchain at work in the sandbox (`--overlay`): `go build` of a
/// module of two packages, `go vet`, `go test` and `go run`, with a fresh
/// build cache in the sandbox's /tmp: many processes (the go command, the
/// compiler, the linker, vet, the test binary), hundreds of files, the
/// cache's index files mapped shared. Same output as natively.
#[test]
fn go_builds_vets_tests_and_runs_a_module() {
    if host_go().is_none() {
        return;
    }
    let script = r#"set -e; d=$(mktemp -d); cd "$d"
printf 'module hello\n\ngo 1.19\n' > go.mod
mkdir words
cat > words/words.go <<'GO'
// Package words sorts words.
package words

import (
	"sort"
	"strings"
)

// Sorted returns the words of s in order.
func Sorted(s string) []string {
	w := strings.Fields(s)
	sort.Strings(w)
	return w
}
GO
cat > words/words_test.go <<'GO'
package words

import "testing"

func TestSorted(t *testing.T) {
	if got := Sorted("b a c"); len(got) != 3 || got[0] != "a" || got[2] != "c" {
		t.Fatal(got)
	}
}
GO
cat > main.go <<'GO'
package main

import (
	"fmt"
	"os"
	"strings"

	"hello/words"
)

func main() {
	w := words.Sorted("the quick brown fox jumps over the lazy dog")
	fmt.Println(strings.Join(w, " "), len(w), len(os.Args))
}
GO
export HOME="$d" GOCACHE="$d/cache" GOFLAGS=-mod=mod CGO_ENABLED=0
go build -o "$d/hello" .
"$d/hello"
go vet ./...
go test ./... 2>&1 | sed 's/\t[0-9.]*s$//'
go run . a b
cd /; rm -rf "$d""#;
    let argv = ["sh", "-c", script];
    let expected = "brown dog fox jumps lazy over quick the the 9 1\n\
                    ?   \thello\t[no test files]\nok  \thello/words\n\
                    brown dog fox jumps lazy over quick the the 9 3\n";
    let nat = native(&argv, &[], None);
    assert_eq!(
        (nat.status, nat.stdout.as_str()),
        (0, expected),
        "the NATIVE run differs, so the test is wrong: {}",
        nat.stderr
    );
    for platform in ["seccomp", "ptrace"] {
        let sb = sandboxed(&["--overlay", "--platform", platform], &argv, &[], None);
        assert_eq!(
            (sb.status, sb.stdout.as_str()),
            (0, expected),
            "--platform {platform}: {}",
            sb.stderr
        );
    }
}

/// The sandbox makes no new namespaces, and says so as a kernel built
/// without them: `EINVAL` for its root (for others `EPERM`, which the
/// guest unshare_calls checks natively too), so `unshare` fails at once
/// with a clear message instead of a missing call.
#[test]
fn no_new_namespaces_answer_as_a_kernel_without_them() {
    for platform in &platforms() {
        let out = sandboxed(
            &["--platform", platform],
            &[
                "/bin/sh",
                "-c",
                "for f in -u -i -n -m -p -r; do unshare $f true 2>&1; echo \"$f $?\"; done",
            ],
            &[],
            None,
        );
        assert_eq!(out.status, 0, "{platform}: {out:?}");
        for f in ["-u", "-i", "-n", "-m", "-p", "-r"] {
            assert!(
                out.stdout.contains(&format!("{f} 1\n")),
                "{platform}: {}",
                out.stdout
            );
        }
        assert_eq!(
            out.stdout
                .matches("unshare failed: Invalid argument")
                .count(),
            6,
            "{platform}: {}",
            out.stdout
        );
    }
}

/// `net.ipv4.ip_local_port_range` written by the guest's root as Linux
/// takes it in a network namespace of its own: a pair, one port (the first),
/// and the pairs and ports it refuses; the native run is in a new network
/// namespace, so the host's range is not touched.
#[test]
fn the_local_port_range_is_written_as_in_a_network_namespace() {
    let script = "f=/proc/sys/net/ipv4/ip_local_port_range; cat $f; \
                  for v in '50000 50010' '9 5' 20000 0 60000 '1 65535' '1 65536'; do \
                  echo \"$v\" > $f 2>/dev/null; echo \"$v: $? $(cat $f)\"; done";
    let nat = native(&["unshare", "-n", "/bin/sh", "-c", script], &[], None);
    assert_eq!(nat.status, 0, "native: {nat:?}");
    assert!(
        nat.stdout.contains("20000: 0 20000\t50010"),
        "{}",
        nat.stdout
    );
    let out = sandboxed(&[], &["/bin/sh", "-c", script], &[], None);
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(out.stdout, nat.stdout);
}

/// `net.ipv4.tcp_keepalive_{time,intvl,probes}` written by the guest's
/// root as Linux takes them in a network namespace of its own, and what a
/// new TCP socket's `TCP_KEEPIDLE`, `TCP_KEEPINTVL` and `TCP_KEEPCNT` are
/// then (compared with a native run in a new network namespace).
#[test]
fn the_keepalive_sysctls_are_new_sockets_defaults_as_in_a_network_namespace() {
    let script = "d=/proc/sys/net/ipv4; cat $d/tcp_keepalive_time $d/tcp_keepalive_intvl \
                  $d/tcp_keepalive_probes; \
                  for v in 600 0 2147483 99999999999 abc '7 8'; do \
                  echo \"$v\" > $d/tcp_keepalive_time 2>/dev/null; \
                  echo \"time $v: $? $(cat $d/tcp_keepalive_time)\"; done; \
                  for v in 256 -1 4; do echo $v > $d/tcp_keepalive_probes 2>/dev/null; \
                  echo \"probes $v: $? $(cat $d/tcp_keepalive_probes)\"; done; \
                  echo 600 > $d/tcp_keepalive_time; echo 30 > $d/tcp_keepalive_intvl; \
                  python3 -c 'import socket as s; k = s.socket(); \
                  print(*(k.getsockopt(6, o) for o in (s.TCP_KEEPIDLE, s.TCP_KEEPINTVL, s.TCP_KEEPCNT)))'";
    let nat = native(&["unshare", "-n", "/bin/sh", "-c", script], &[], None);
    assert_eq!(nat.status, 0, "native: {nat:?}");
    assert!(nat.stdout.ends_with("600 30 4\n"), "{}", nat.stdout);
    let out = sandboxed(&[], &["/bin/sh", "-c", script], &[], None);
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(out.stdout, nat.stdout);
}
