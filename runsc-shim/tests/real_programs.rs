//! Real programs (coreutils, busybox applets) run natively and under
//! `ferrovisor do`, with the same argv, environment and stdin: stdout and exit
//! status must agree. Also the CLI's own error statuses (127, 126, 2), death
//! by signal (128+N), and `--root DIR` confinement of absolute symlinks.

mod common;

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{command, run, Outcome, TempDir};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
const TIMEOUT: Duration = Duration::from_secs(120);

fn native(argv: &[&str], env: &[(&str, &str)], stdin: Option<&[u8]>) -> Outcome {
    let mut cmd = command(argv[0], env);
    cmd.args(&argv[1..]);
    run(cmd, stdin, TIMEOUT)
}

fn sandboxed(opts: &[&str], argv: &[&str], env: &[(&str, &str)], stdin: Option<&[u8]>) -> Outcome {
    let mut cmd = command(FERROVISOR, env);
    cmd.arg("do").args(opts).arg("--").args(argv);
    run(cmd, stdin, TIMEOUT)
}

/// Runs `argv` both ways and asserts equal stdout and status; the native
/// status must be `native_status` (otherwise the test itself is wrong).
fn compare_with(argv: &[&str], env: &[(&str, &str)], stdin: Option<&[u8]>, native_status: i32) {
    let nat = native(argv, env, stdin);
    assert_eq!(
        nat.status, native_status,
        "{argv:?}: the NATIVE run exited {} (stderr: {}), so the test is wrong",
        nat.status, nat.stderr
    );
    let sb = sandboxed(&[], argv, env, stdin);
    if nat.stdout_bytes != sb.stdout_bytes || nat.status != sb.status {
        panic!(
            "{argv:?}: sandbox differs from native\nexit status: native {} / sandbox {}\n\
             --- native stdout ---\n{}\n--- sandbox stdout ---\n{}\n--- sandbox stderr ---\n{}",
            nat.status, sb.status, nat.stdout, sb.stdout, sb.stderr
        );
    }
}

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

/// Compiles a small static C program into `dir`.
fn compile_static(dir: &Path, name: &str, source: &str) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    let bin = dir.join(name);
    std::fs::write(&src, source).expect("write C source");
    let out = Command::new("gcc")
        .args(["-static", "-O1", "-Wall", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("run gcc");
    assert!(
        out.status.success(),
        "gcc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    bin
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
    let bin = compile_static(
        dir.path(),
        "selfterm",
        "#include <signal.h>\n#include <stdio.h>\n#include <unistd.h>\n\
         int main(void) { puts(\"before\"); fflush(stdout); kill(getpid(), SIGTERM); puts(\"after\"); return 0; }\n",
    );
    compare_with(&[path_str(&bin)], &[], None, 143);
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

// ---- programs that work files hard (tar, gcc, git, sqlite3, Python) ---------

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
