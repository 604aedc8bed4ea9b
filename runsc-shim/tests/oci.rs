//! The OCI runtime CLI end to end: bundles made of a busybox rootfs and a
//! `config.json` from `ferrovisor spec`, driven through create, start,
//! state, kill, wait, delete and run with a private `--root`, plus the
//! one-line errors for bad bundles and flags.

mod common;

use std::io::Read;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{compile_static, run, Outcome, TempDir};
use serde_json::Value;

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
const TIMEOUT: Duration = Duration::from_secs(120);
const APPLETS: &[&str] = &[
    "sh", "echo", "sleep", "cat", "true", "hostname", "pwd", "id", "stat", "touch", "grep", "stty",
    "dd",
];

fn wait_child(mut child: std::process::Child, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return s,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what}: still running after {TIMEOUT:?}, killed");
            }
            Err(e) => panic!("{what}: wait: {e}"),
        }
    }
}

fn code(s: std::process::ExitStatus) -> i32 {
    s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
}

/// A test's world: a bundle and a private state root.
struct World {
    dir: TempDir,
    ids: Vec<String>,
}

impl World {
    /// A bundle whose rootfs is busybox and whose `config.json` comes from
    /// `ferrovisor spec`, then `edit`.
    fn new(tag: &str, edit: impl FnOnce(&mut Value)) -> World {
        let dir = TempDir::new(tag);
        let bundle = dir.path().join("bundle");
        let bin = bundle.join("rootfs/bin");
        std::fs::create_dir_all(&bin).expect("mkdir rootfs/bin");
        std::fs::copy("/bin/busybox", bin.join("busybox")).expect("copy busybox");
        for a in APPLETS {
            symlink("busybox", bin.join(a)).expect("applet symlink");
        }
        // As an image has it: the sandbox adds no /tmp of its own.
        let tmp = bundle.join("rootfs/tmp");
        std::fs::create_dir(&tmp).expect("mkdir rootfs/tmp");
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).expect("chmod tmp");
        let w = World {
            dir,
            ids: Vec::new(),
        };
        let out = w.cli(&["spec", "--bundle", &w.bundle_str()]);
        assert_eq!(out.status, 0, "spec: {}", out.stderr);
        w.edit_config(edit);
        w
    }

    fn bundle(&self) -> PathBuf {
        self.dir.path().join("bundle")
    }

    fn bundle_str(&self) -> String {
        self.bundle().to_string_lossy().into_owned()
    }

    fn state_root(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn edit_config(&self, edit: impl FnOnce(&mut Value)) {
        let path = self.bundle().join("config.json");
        let mut v: Value =
            serde_json::from_slice(&std::fs::read(&path).expect("read config")).expect("json");
        edit(&mut v);
        std::fs::write(&path, v.to_string()).expect("write config");
    }

    fn command(&self, args: &[&str]) -> Command {
        self.command_of(FERROVISOR, args)
    }

    /// `args` for the runtime `bin`: ferrovisor, or runc with a state root
    /// of its own.
    fn command_of(&self, bin: &str, args: &[&str]) -> Command {
        let root = match bin {
            FERROVISOR => self.state_root(),
            _ => self.dir.path().join("runc-state"),
        };
        let mut cmd = Command::new(bin);
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .current_dir("/")
            .arg("--root")
            .arg(root)
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    /// Runs a command that leaves nothing behind holding its stdio.
    fn cli(&self, args: &[&str]) -> Outcome {
        self.cli_of(FERROVISOR, args)
    }

    /// [`World::cli`] for the runtime `bin`.
    fn cli_of(&self, bin: &str, args: &[&str]) -> Outcome {
        run(self.command_of(bin, args), None, TIMEOUT)
    }

    /// `create`: the sandbox inherits stdout and stderr, so they go to
    /// files (`ID.out`, `ID.err`) that stay readable after it exits.
    fn create(&mut self, id: &str) -> Outcome {
        self.create_with(&[], id)
    }

    /// `create` after the global flags `global`.
    fn create_with(&mut self, global: &[&str], id: &str) -> Outcome {
        self.create_of(FERROVISOR, global, id)
    }

    /// [`World::create_with`] for the runtime `bin`.
    fn create_of(&mut self, bin: &str, global: &[&str], id: &str) -> Outcome {
        self.ids.push(id.to_string());
        let out_path = self.dir.path().join(format!("{id}.out"));
        let err_path = self.dir.path().join(format!("{id}.err"));
        let bundle = self.bundle_str();
        let mut args = global.to_vec();
        args.extend(["create", "--bundle", &bundle, id]);
        let mut cmd = self.command_of(bin, &args);
        cmd.stdout(std::fs::File::create(&out_path).expect("out file"))
            .stderr(std::fs::File::create(&err_path).expect("err file"));
        let child = cmd.spawn().expect("spawn create");
        let status = code(wait_child(child, "create"));
        Outcome {
            stdout: String::new(),
            stdout_bytes: Vec::new(),
            stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
            status,
        }
    }

    /// `create`, `start` and `wait` of `id`, which must exit 0; what it
    /// wrote to stdout.
    fn run_to_success(&mut self, id: &str) -> String {
        assert_eq!(self.create(id).status, 0, "create {id}");
        assert_eq!(self.cli(&["start", id]).status, 0, "start {id}");
        assert_eq!(self.wait(id), 0, "{id}: {}", self.container_stderr(id));
        self.container_stdout(id)
    }

    /// `create` and `start` of `id` under `bin`; what the container wrote
    /// to stdout once it ends with `last` (or after 30 s).
    fn started_output(&mut self, bin: &str, id: &str, last: &str) -> String {
        let out = self.create_of(bin, &[], id);
        assert_eq!(out.status, 0, "{bin} create: {}", out.stderr);
        assert_eq!(self.cli_of(bin, &["start", id]).status, 0, "{bin} start");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.container_stdout(id).ends_with(last) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.container_stdout(id)
    }

    /// What the container wrote to stderr.
    fn container_stderr(&self, id: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{id}.err"))).unwrap_or_default()
    }

    /// What the container wrote to stdout.
    fn container_stdout(&self, id: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{id}.out"))).unwrap_or_default()
    }

    fn state(&self, id: &str) -> Value {
        self.state_of(FERROVISOR, id)
    }

    /// [`World::state`] of the runtime `bin`.
    fn state_of(&self, bin: &str, id: &str) -> Value {
        let out = self.cli_of(bin, &["state", id]);
        assert_eq!(out.status, 0, "state {id}: {}", out.stderr);
        serde_json::from_str(&out.stdout).expect("state prints JSON")
    }

    fn status(&self, id: &str) -> String {
        self.state(id)["status"]
            .as_str()
            .expect("status is a string")
            .to_string()
    }

    /// `wait`, returning the exit status it reports.
    fn wait(&self, id: &str) -> i64 {
        let out = self.cli(&["wait", id]);
        assert_eq!(out.status, 0, "wait {id}: {}", out.stderr);
        let v: Value = serde_json::from_str(&out.stdout).expect("wait prints JSON");
        assert_eq!(v["id"], id);
        v["exitStatus"].as_i64().expect("exitStatus")
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // Never leave a sandbox running after a failed test.
        let runc = self
            .dir
            .path()
            .join("runc-state")
            .is_dir()
            .then(runc_binary)
            .flatten();
        for id in std::mem::take(&mut self.ids) {
            let _ = self.cli(&["delete", "--force", &id]);
            if let Some(runc) = &runc {
                let _ = self.cli_of(runc, &["delete", "--force", &id]);
            }
        }
    }
}

/// Where runc is installed, if it is: tests that compare with it run
/// their runc half only then.
fn runc_binary() -> Option<String> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"])
        .map(|d| Path::new(d).join("runc"))
        .find(|p| p.is_file());
    found.map(|p| p.to_string_lossy().into_owned())
}

/// The runtimes `test` runs its sequence under: ferrovisor, and runc where
/// it is installed (saying so when it is not).
fn runtimes(test: &str) -> Vec<String> {
    let mut bins = vec![FERROVISOR.to_string()];
    match runc_binary() {
        Some(runc) => bins.push(runc),
        None => eprintln!("note: runc is not installed: {test} is not compared with runc"),
    }
    bins
}

fn set_args(v: &mut Value, args: &[&str]) {
    v["process"]["args"] = args.iter().map(|a| Value::from(*a)).collect();
}

fn assert_one_line(out: &Outcome) {
    assert_ne!(out.status, 0, "should fail: {out:?}");
    assert_eq!(
        out.stderr.trim_end().lines().count(),
        1,
        "one line on stderr: {:?}",
        out.stderr
    );
}

#[test]
fn create_start_state_wait_delete() {
    let mut w = World::new("lifecycle", |v| {
        set_args(v, &["sh", "-c", "echo hello; exit 0"])
    });
    let out = w.create("c1");
    assert_eq!(out.status, 0, "create: {}", out.stderr);

    let st = w.state("c1");
    assert_eq!(st["status"], "created", "{st}");
    assert_eq!(st["id"], "c1");
    assert!(st["pid"].as_i64().unwrap_or(0) > 0, "{st}");
    assert_eq!(
        st["bundle"].as_str().map(PathBuf::from),
        Some(std::fs::canonicalize(w.bundle()).expect("canonical bundle"))
    );
    assert!(
        st["ociVersion"].is_string() && st["annotations"].is_object(),
        "{st}"
    );
    // Not started: the program has printed nothing.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(w.container_stdout("c1"), "");

    let out = w.cli(&["start", "c1"]);
    assert_eq!(out.status, 0, "start: {}", out.stderr);
    let s = w.status("c1");
    assert!(s == "running" || s == "stopped", "after start: {s}");

    assert_eq!(w.wait("c1"), 0);
    let st = w.state("c1");
    assert_eq!(st["status"], "stopped", "{st}");
    assert_eq!(w.container_stdout("c1"), "hello\n");

    // A second start of a stopped container is refused.
    let out = w.cli(&["start", "c1"]);
    assert_one_line(&out);

    let list = w.cli(&["list", "--format", "json"]);
    let list: Value = serde_json::from_str(&list.stdout).expect("list json");
    assert_eq!(list[0]["id"], "c1");

    let out = w.cli(&["delete", "c1"]);
    assert_eq!(out.status, 0, "delete: {}", out.stderr);
    let out = w.cli(&["state", "c1"]);
    assert_one_line(&out);
    assert!(out.stderr.contains("does not exist"), "{}", out.stderr);
}

#[test]
fn run_prints_hello_and_returns_the_exit_status() {
    let w = World::new("run", |v| {
        set_args(
            v,
            &[
                "sh",
                "-c",
                "echo hello; echo $GREETING; pwd; hostname; exit 7",
            ],
        );
        v["process"]["env"] = serde_json::json!(["PATH=/bin", "GREETING=hi there"]);
        v["process"]["cwd"] = "/bin".into();
        v["hostname"] = "box1".into();
    });
    let out = w.cli(&["run", "--bundle", &w.bundle_str(), "r1"]);
    assert_eq!(out.status, 7, "run: {out:?}");
    assert_eq!(out.stdout, "hello\nhi there\n/bin\nbox1\n", "{out:?}");
    // run deletes the container once it has exited.
    let list = w.cli(&["list", "-q"]);
    assert_eq!(list.stdout, "", "{list:?}");
}

/// The global `--platform kvm` (issue 17): the same container, its code in
/// a KVM virtual machine; a platform the runtime does not know is refused
/// in one line.
#[test]
fn run_on_the_kvm_platform() {
    if !common::kvm_usable() {
        eprintln!("run_on_the_kvm_platform: skipped, /dev/kvm does not open here");
        return;
    }
    let w = World::new("run-kvm", |v| {
        set_args(v, &["sh", "-c", "echo hello; echo $((6 * 7)); exit 3"]);
    });
    let out = w.cli(&[
        "--platform",
        "kvm",
        "run",
        "--bundle",
        &w.bundle_str(),
        "k1",
    ]);
    assert_eq!(out.status, 3, "run: {out:?}");
    assert_eq!(out.stdout, "hello\n42\n", "{out:?}");
    let out = w.cli(&[
        "--platform",
        "vmx",
        "run",
        "--bundle",
        &w.bundle_str(),
        "k2",
    ]);
    assert_ne!(out.status, 0, "{out:?}");
    assert!(out.stderr.contains("vmx"), "{out:?}");
}

#[test]
fn bind_and_tmpfs_mounts_from_the_config() {
    let host = TempDir::new("bind-source");
    std::fs::write(host.path().join("in"), "from the host\n").expect("write");
    std::fs::set_permissions(host.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let src = host.path().to_string_lossy().into_owned();
    let w = World::new("mounts", |v| {
        set_args(
            v,
            &[
                "sh",
                "-c",
                "cat /data/in; echo written > /data/out; id -u; stat -c %u /data/out; \
                 echo t > /scratch/t && cat /scratch/t; stat -c %a /scratch; \
                 dd if=/dev/zero of=/scratch/big bs=4096 count=512 2>&1 | grep -o 'No space left on device'; \
                 stat -c %s /scratch/big; rm /scratch/big; \
                 grep -c ' /scratch tmpfs ' /proc/mounts; \
                 stat -c %d /scratch /dev/pts /proc | sort -u | wc -l; \
                 touch /ro/x 2>&1 | grep -o 'Read-only file system'; cat /ro/in",
            ],
        );
        v["process"]["user"] = serde_json::json!({"uid": 1000, "gid": 1000});
        let mounts = v["mounts"].as_array_mut().expect("mounts");
        mounts.push(serde_json::json!({"destination": "/data", "type": "bind",
            "source": src, "options": ["rbind", "rw", "rprivate"]}));
        mounts.push(
            serde_json::json!({"destination": "/scratch", "type": "tmpfs",
            "source": "tmpfs", "options": ["nosuid", "nodev", "size=1m", "mode=1777"]}),
        );
        mounts.push(serde_json::json!({"destination": "/ro", "type": "bind",
            "source": src, "options": ["rbind", "ro"]}));
    });
    let out = w.cli(&["run", "--bundle", &w.bundle_str(), "binds1"]);
    assert_eq!(
        out.stdout,
        "from the host\n1000\n1000\nt\n1777\nNo space left on device\n1048574\n1\n3\n\
         Read-only file system\nfrom the host\n",
        "{out:?}"
    );
    assert_eq!(out.status, 0, "{out:?}");
    let made = host.path().join("out");
    assert_eq!(std::fs::read_to_string(&made).expect("read"), "written\n");
    assert_eq!(std::fs::metadata(&made).expect("stat").uid(), 1000);
    assert!(!host.path().join("x").exists());
}

#[test]
fn kill_a_sleeping_container() {
    let mut w = World::new("kill", |v| set_args(v, &["sh", "-c", "sleep 1000"]));
    assert_eq!(w.create("k1").status, 0);
    assert_eq!(w.cli(&["start", "k1"]).status, 0);
    assert_eq!(w.status("k1"), "running");
    let pid = w.state("k1")["pid"].as_i64().expect("pid");

    // ps lists the sandbox's host processes, the sandbox first.
    let ps = w.cli(&["ps", "--format", "json", "k1"]);
    let pids: Vec<i64> = serde_json::from_str(&ps.stdout).expect("ps json");
    assert_eq!(pids.first(), Some(&pid), "{ps:?}");
    // events --stats prints one stats record.
    let ev = w.cli(&["events", "--stats", "k1"]);
    let ev: Value = serde_json::from_str(ev.stdout.trim()).expect("events json");
    assert_eq!(ev["type"], "stats");
    assert!(
        ev["data"]["pids"]["current"].as_u64().unwrap_or(0) >= 1,
        "{ev}"
    );
    if host_cgroups() {
        // From the sandbox's cgroup: the Sentry's memory and CPU time.
        assert!(
            ev["data"]["memory"]["usage"]["usage"].as_u64().unwrap_or(0) > 0,
            "{ev}"
        );
        assert!(
            ev["data"]["cpu"]["usage"]["total"].as_u64().unwrap_or(0) > 0,
            "{ev}"
        );
    }

    // A running container is not deleted without --force.
    let out = w.cli(&["delete", "k1"]);
    assert_one_line(&out);
    assert!(out.stderr.contains("running"), "{}", out.stderr);
    assert_eq!(w.status("k1"), "running");

    // The container's init has no handler for TERM: from outside its PID
    // namespace only handled signals, SIGKILL and SIGSTOP arrive
    // (pid_namespaces(7)), so it keeps running, as under runc.
    let out = w.cli(&["kill", "k1", "TERM"]);
    assert_eq!(out.status, 0, "kill: {}", out.stderr);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(w.status("k1"), "running");
    let out = w.cli(&["kill", "k1", "KILL"]);
    assert_eq!(out.status, 0, "kill: {}", out.stderr);
    assert_eq!(w.wait("k1"), 128 + 9);
    assert_eq!(w.status("k1"), "stopped");
    // Killing a stopped container is an error.
    assert_one_line(&w.cli(&["kill", "k1", "KILL"]));
    assert_eq!(w.cli(&["delete", "k1"]).status, 0);
}

/// `kill STOP` stops the container's init and `kill CONT` continues it,
/// as with runc; the container stays `running` all the while. `TSTP`,
/// which init does not handle, is dropped (from outside its PID
/// namespace only handled signals, SIGKILL and SIGSTOP arrive).
#[test]
fn kill_stop_and_cont_stop_and_continue_the_containers_init() {
    let mut w = World::new("stop", |v| {
        set_args(
            v,
            &["sh", "-c", "i=0; while :; do i=$((i+1)); echo $i; done"],
        );
    });
    assert_eq!(w.create("s1").status, 0);
    // Nothing to stop before start.
    assert_one_line(&w.cli(&["kill", "s1", "STOP"]));
    assert_eq!(w.cli(&["start", "s1"]).status, 0);
    let lines = |w: &World| w.container_stdout("s1").lines().count();
    let grows = |w: &World, from: usize| {
        let deadline = Instant::now() + TIMEOUT;
        while lines(w) < from + 10 {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    };
    assert!(grows(&w, 0), "the counter never ran");

    let out = w.cli(&["kill", "s1", "STOP"]);
    assert_eq!(out.status, 0, "kill STOP: {}", out.stderr);
    // What was under way when it stopped comes out first.
    std::thread::sleep(Duration::from_millis(300));
    let n = lines(&w);
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(lines(&w), n, "init ran while stopped");
    assert_eq!(w.status("s1"), "running");

    let out = w.cli(&["kill", "s1", "CONT"]);
    assert_eq!(out.status, 0, "kill CONT: {}", out.stderr);
    assert!(grows(&w, n), "no progress after CONT");

    let out = w.cli(&["kill", "s1", "TSTP"]);
    assert_eq!(out.status, 0, "kill TSTP: {}", out.stderr);
    let n = lines(&w);
    assert!(grows(&w, n), "TSTP stopped an init without a handler");
    assert_eq!(w.status("s1"), "running");

    assert_eq!(w.cli(&["kill", "s1", "KILL"]).status, 0);
    assert_eq!(w.wait("s1"), 128 + 9);
    assert_eq!(w.cli(&["delete", "s1"]).status, 0);
}

#[test]
fn delete_force_kills_a_running_container() {
    let mut w = World::new("force", |v| set_args(v, &["sleep", "1000"]));
    assert_eq!(w.create("f1").status, 0);
    assert_eq!(w.cli(&["start", "f1"]).status, 0);
    let pid = w.state("f1")["pid"].as_i64().expect("pid") as i32;
    let out = w.cli(&["delete", "--force", "f1"]);
    assert_eq!(out.status, 0, "delete --force: {}", out.stderr);
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z")),
        "sandbox {pid} still alive"
    );
    assert_one_line(&w.cli(&["state", "f1"]));
    // --force on a container that does not exist is not an error.
    assert_eq!(w.cli(&["delete", "--force", "f1"]).status, 0);
}

/// Host processes (other than zombies) whose command line mentions `text`.
fn processes_mentioning(text: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit(')').next().is_some_and(|r| r.starts_with(" Z")));
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if !zombie && String::from_utf8_lossy(&cmdline).contains(text) {
            found.push(pid);
        }
    }
    found
}

/// [`processes_mentioning`] `text` once they have had 10 s to end.
fn processes_left(text: &str) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_mentioning(text).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    processes_mentioning(text)
}

/// Lines of the host's mount table (this test's mount namespace, where
/// the runtime runs) that mention `text`.
fn mounts_mentioning(text: &str) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .expect("mountinfo")
        .lines()
        .filter(|l| l.contains(text))
        .map(str::to_owned)
        .collect()
}

#[test]
fn delete_after_the_sentry_or_the_gofer_died_leaves_nothing() {
    // With a limit, the sandbox gets a host cgroup of its own, which must
    // go too.
    let cgroups = host_cgroups();
    for victim in ["sentry", "gofer"] {
        let mut w = World::new(victim, |v| {
            set_args(v, &["sleep", "1000"]);
            if cgroups {
                v["linux"]["resources"] = serde_json::json!({"pids": {"limit": 200}});
            }
        });
        let id = format!("crash-{victim}");
        assert_eq!(w.create(&id).status, 0);
        assert_eq!(w.cli(&["start", &id]).status, 0);
        let bundle = w.bundle_str();
        let sentry = w.state(&id)["pid"].as_i64().expect("pid") as i32;
        let cgroup = cgroups.then(|| cgroup_dir(i64::from(sentry), "pids"));
        if let Some(dir) = &cgroup {
            assert_ne!(dir, &cgroup_dir(i64::from(std::process::id()), "pids"));
        }
        let running = processes_mentioning(&bundle);
        assert!(running.contains(&sentry), "{running:?}");
        let target = if victim == "sentry" {
            sentry
        } else {
            let rootfs = format!("{bundle}/rootfs");
            *processes_mentioning(&rootfs)
                .iter()
                .find(|&&p| {
                    std::fs::read(format!("/proc/{p}/cmdline"))
                        .is_ok_and(|c| String::from_utf8_lossy(&c).contains("gofer"))
                })
                .expect("a gofer process")
        };
        // SAFETY: plain system call on a process this test started.
        assert_eq!(unsafe { libc::kill(target, libc::SIGKILL) }, 0);
        let out = w.cli(&["delete", "--force", &id]);
        assert_eq!(
            out.status, 0,
            "delete --force after the {victim} died: {out:?}"
        );
        assert_eq!(
            processes_left(&bundle),
            Vec::<i32>::new(),
            "left behind after the {victim} died"
        );
        assert_eq!(w.cli(&["list", "-q"]).stdout, "");
        assert!(!w.state_root().join(&id).exists());
        if let Some(dir) = &cgroup {
            assert!(!dir.exists(), "{} left behind", dir.display());
        }
        assert_eq!(
            mounts_mentioning(&w.dir.path().to_string_lossy()),
            Vec::<String>::new(),
            "mounts left behind after the {victim} died"
        );
    }
}

/// A client that gives up during `create` (killed while a `createRuntime`
/// hook runs): the sandbox's boot process ends by itself, `list` shows the
/// container `creating`, and `delete` removes it and its host cgroup.
#[test]
fn a_create_killed_half_way_leaves_nothing_after_delete() {
    let cgroups = host_cgroups();
    let w = World::new("half-way", |_| {});
    let hook_pid = w.dir.path().join("hook.pid");
    let script = format!("echo $$ > {}; exec sleep 60", hook_pid.display());
    w.edit_config(|v| {
        set_args(v, &["sleep", "1000"]);
        if cgroups {
            v["linux"]["resources"] = serde_json::json!({"pids": {"limit": 200}});
        }
        v["hooks"] = serde_json::json!({"createRuntime": [
            {"path": "/bin/sh", "args": ["sh", "-c", script]}]});
    });
    let bundle = w.bundle_str();
    let mut create = w
        .command(&["create", "--bundle", &bundle, "h1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn create");
    let deadline = Instant::now() + TIMEOUT;
    while !hook_pid.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let hook: i32 = std::fs::read_to_string(&hook_pid)
        .expect("the hook ran")
        .trim()
        .parse()
        .expect("hook pid");
    let boot: Vec<i32> = processes_mentioning(&bundle)
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == b"boot"))
        })
        .collect();
    assert_eq!(boot.len(), 1, "one boot process: {boot:?}");
    let cgroup = cgroups.then(|| cgroup_dir(i64::from(boot[0]), "pids"));
    let _ = create.kill();
    let _ = create.wait();
    // SAFETY: plain system call on the hook this test's create started.
    unsafe { libc::kill(hook, libc::SIGKILL) };

    assert_eq!(
        processes_left(&bundle),
        Vec::<i32>::new(),
        "boot outlived create"
    );
    let listed = w.cli(&["list"]).stdout;
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("h1 ") && l.contains("creating")),
        "{listed}"
    );
    let out = w.cli(&["delete", "h1"]);
    assert_eq!(out.status, 0, "delete: {out:?}");
    assert_eq!(w.cli(&["list", "-q"]).stdout, "");
    if let Some(dir) = &cgroup {
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
}

#[test]
fn created_container_can_be_deleted_and_ids_are_unique() {
    let mut w = World::new("created", |v| set_args(v, &["echo", "never"]));
    assert_eq!(w.create("d1").status, 0);
    let out = w.create("d1");
    assert_one_line(&out);
    assert!(out.stderr.contains("already exists"), "{}", out.stderr);
    assert_eq!(w.status("d1"), "created");
    assert_eq!(w.cli(&["delete", "d1"]).status, 0);
    assert_eq!(w.container_stdout("d1"), "");
}

#[test]
fn bad_bundles_get_one_line_naming_the_problem() {
    let mut w = World::new("errors", |_| {});
    // Missing bundle.
    let out = w.cli(&["create", "--bundle", "/nonexistent-bundle", "e1"]);
    assert_one_line(&out);
    assert!(out.stderr.contains("bundle"), "{}", out.stderr);

    // Malformed config.json.
    std::fs::write(w.bundle().join("config.json"), "{ not json").expect("write");
    let out = w.create("e2");
    assert_one_line(&out);
    assert!(out.stderr.contains("config.json"), "{}", out.stderr);

    // Unsupported fields are refused by name, not ignored.
    std::fs::remove_file(w.bundle().join("config.json")).expect("rm");
    let _ = w.cli(&["spec", "--bundle", &w.bundle_str()]);
    w.edit_config(|v| {
        v["mounts"]
            .as_array_mut()
            .expect("mounts")
            .push(serde_json::json!({
                "destination": "/data", "type": "bind", "source": "/nonexistent-source",
                "options": ["rbind"]
            }));
    });
    let out = w.create("e3");
    assert_one_line(&out);
    assert!(out.stderr.contains("mounts[7].source"), "{}", out.stderr);

    w.edit_config(|v| {
        v["mounts"].as_array_mut().expect("mounts").pop();
        v["ociVersion"] = "2.0.0".into();
    });
    let out = w.create("e4");
    assert_one_line(&out);
    assert!(out.stderr.contains("ociVersion"), "{}", out.stderr);

    w.edit_config(|v| {
        v["ociVersion"] = "1.1.0".into();
        v["root"]["path"] = "missing-rootfs".into();
    });
    let out = w.create("e5");
    assert_one_line(&out);
    assert!(out.stderr.contains("root.path"), "{}", out.stderr);

    // Nothing was left behind by the failed creates.
    assert_eq!(w.cli(&["list", "-q"]).stdout, "");

    // Unknown flag.
    let out = w.cli(&["create", "--no-such-flag", "e6"]);
    assert_one_line(&out);
    assert!(out.stderr.contains("--no-such-flag"), "{}", out.stderr);

    // spec does not overwrite.
    assert_one_line(&w.cli(&["spec", "--bundle", &w.bundle_str()]));
}

#[test]
fn errors_go_to_the_log_as_runc_json() {
    let w = World::new("log", |_| {});
    let log = w.dir.path().join("log.json");
    let log_s = log.to_string_lossy().into_owned();
    let out = w.cli(&["--log", &log_s, "--log-format", "json", "state", "nope"]);
    assert_one_line(&out);
    let text = std::fs::read_to_string(&log).expect("log written");
    let last: Value =
        serde_json::from_str(text.lines().last().expect("a line")).expect("json line");
    assert_eq!(last["level"], "error");
    assert!(
        last["msg"].as_str().is_some_and(|m| m.contains("nope")),
        "{last}"
    );
    assert!(last["time"].is_string());
}

#[test]
fn runc_global_flags_and_stub_commands_parse() {
    let w = World::new("flags", |_| {});
    let out = w.cli(&["--systemd-cgroup", "--debug", "list"]);
    assert_eq!(out.status, 0, "{out:?}");
    let out = w.cli(&["pause", "x"]);
    assert_one_line(&out);
    let out = w.cli(&["--log-format", "yaml", "list"]);
    assert_one_line(&out);
    assert_eq!(out.status, 2);
}

/// Receives one descriptor sent with SCM_RIGHTS on `sock`.
fn recv_fd(sock: &std::os::unix::net::UnixStream) -> std::os::fd::OwnedFd {
    use std::os::fd::{AsRawFd, FromRawFd};
    let mut buf = [0u8; 256];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain data; all-zero is a valid empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: `msg` points at live buffers of the sizes it states.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    assert!(n >= 0, "recvmsg: {}", std::io::Error::last_os_error());
    // SAFETY: recvmsg filled `control`; CMSG_FIRSTHDR/CMSG_DATA stay inside
    // the length it reported, and the kernel installed the descriptor.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        assert!(!cmsg.is_null(), "no descriptor received");
        assert_eq!((*cmsg).cmsg_type, libc::SCM_RIGHTS);
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const i32);
        std::os::fd::OwnedFd::from_raw_fd(fd)
    }
}

#[test]
fn terminal_goes_to_the_console_socket() {
    let mut w = World::new("console", |v| {
        set_args(v, &["sh", "-c", "[ -t 1 ] && echo tty-hello"]);
        v["process"]["terminal"] = true.into();
        v["process"]["consoleSize"] = serde_json::json!({"height": 30, "width": 100});
    });
    // Without a console socket, terminal: true is refused.
    assert_one_line(&w.create("t0"));

    let sock_path = w.dir.path().join("console.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock_path).expect("bind");
    let receiver = std::thread::spawn(move || {
        let (conn, _) = listener.accept().expect("accept");
        recv_fd(&conn)
    });
    w.ids.push("t1".into());
    let mut cmd = w.command(&[
        "create",
        "--bundle",
        &w.bundle_str(),
        "--console-socket",
        &sock_path.to_string_lossy(),
        "t1",
    ]);
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let out = cmd.output().expect("create");
    assert!(
        out.status.success(),
        "create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let master = receiver.join().expect("receiver");
    assert_eq!(w.cli(&["start", "t1"]).status, 0);
    assert_eq!(w.wait("t1"), 0);
    // Read what the container wrote; EIO once the last slave is closed.
    let mut master = std::fs::File::from(master);
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 {
            break;
        }
        text.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&text);
    assert!(text.contains("tty-hello"), "{text:?}");
}

#[test]
fn exec_with_a_terminal() {
    let mut w = World::new("exectty", |v| set_args(v, &["sleep", "1000"]));
    assert_eq!(w.create("x1").status, 0);
    assert_eq!(w.cli(&["start", "x1"]).status, 0);
    // Without a terminal to use, --tty is refused; a console socket alone too.
    assert_one_line(&w.cli(&["exec", "--tty", "x1", "true"]));
    assert_one_line(&w.cli(&["exec", "--console-socket", "/nonexistent", "x1", "true"]));

    let sock_path = w.dir.path().join("exec-console.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock_path).expect("bind");
    let receiver = std::thread::spawn(move || {
        let (conn, _) = listener.accept().expect("accept");
        recv_fd(&conn)
    });
    let process = w.dir.path().join("process.json");
    std::fs::write(
        &process,
        serde_json::json!({
            "terminal": true,
            "consoleSize": {"height": 33, "width": 99},
            "user": {"uid": 0, "gid": 0},
            "args": ["sh", "-c", "[ -t 0 ] && [ -t 1 ] && echo is-a-tty; stty size; read x; echo got $x"],
            "env": ["PATH=/bin"],
            "cwd": "/"
        })
        .to_string(),
    )
    .expect("process.json");
    let mut cmd = w.command(&[
        "exec",
        "--process",
        &process.to_string_lossy(),
        "--console-socket",
        &sock_path.to_string_lossy(),
        "x1",
    ]);
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("exec");
    let master = std::fs::File::from(receiver.join().expect("receiver"));
    std::io::Write::write_all(&mut &master, b"hello\n").expect("type");
    let mut stderr = child.stderr.take().expect("stderr");
    let status = wait_child(child, "exec");
    let mut why = String::new();
    let _ = stderr.read_to_string(&mut why);
    assert_eq!(code(status), 0, "exec: {why}");
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = (&master).read(&mut buf) {
        if n == 0 {
            break;
        }
        text.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&text).replace("\r\n", "\n");
    assert!(text.contains("is-a-tty\n33 99\n"), "{text:?}");
    assert!(text.contains("got hello\n"), "{text:?}");
    assert_eq!(w.cli(&["delete", "--force", "x1"]).status, 0);
}

#[test]
fn run_forwards_term_to_the_container_and_cleans_up() {
    // The container's init handles TERM (a trap): the signal `run` gets
    // reaches it and its exit status becomes `run`'s.
    let w = World::new("runterm", |v| {
        set_args(
            v,
            &[
                "sh",
                "-c",
                "trap 'exit 42' TERM; echo ready; sleep 1000 & wait",
            ],
        )
    });
    let mut cmd = w.command(&["run", "--bundle", &w.bundle_str(), "s1"]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn run");
    // Wait until the trap is set (a TERM before it would be dropped).
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    std::io::BufRead::read_line(&mut out, &mut first).expect("read ready");
    assert_eq!(first, "ready\n");
    assert_eq!(w.status("s1"), "running");
    // SAFETY: plain system call on the pid of our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let mut err = String::new();
    let _ = child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err);
    let status = wait_child(child, "run");
    assert_eq!(code(status), 42, "stderr: {err}");
    assert_eq!(w.cli(&["list", "-q"]).stdout, "", "run left state behind");
}

#[test]
fn features_and_unsupported_commands() {
    let w = World::new("features", |_| {});
    let out = w.cli(&["features"]);
    assert_eq!(out.status, 0, "features: {out:?}");
    let v: Value = serde_json::from_str(&out.stdout).expect("features prints JSON");
    assert_eq!(v["ociVersionMin"], "1.0.0", "{v}");
    assert!(
        v["ociVersionMax"]
            .as_str()
            .is_some_and(|s| s.starts_with("1.")),
        "{v}"
    );
    // The hooks that run in the runtime's namespaces, not the two that run
    // in the container's.
    assert_eq!(
        v["hooks"],
        serde_json::json!(["prestart", "createRuntime", "poststart", "poststop"]),
        "{v}"
    );
    assert_eq!(v["linux"]["cgroup"]["v1"], true, "{v}");
    assert_eq!(v["linux"]["cgroup"]["systemd"], false, "{v}");
    let policies = &v["linux"]["memoryPolicy"];
    assert!(
        policies["modes"]
            .as_array()
            .is_some_and(|m| m.contains(&"MPOL_BIND".into()))
            && policies["flags"]
                .as_array()
                .is_some_and(|f| f.contains(&"MPOL_F_STATIC_NODES".into())),
        "{v}"
    );
    // runc's seccomp actions but the agent's, and all of its operators.
    let seccomp = &v["linux"]["seccomp"];
    assert_eq!(seccomp["enabled"], true, "{v}");
    let actions = seccomp["actions"].as_array().expect("actions");
    assert!(actions.contains(&"SCMP_ACT_ERRNO".into()), "{v}");
    assert!(!actions.contains(&"SCMP_ACT_NOTIFY".into()), "{v}");
    if let Some(runc) = runtimes("features").get(1) {
        let theirs: Value =
            serde_json::from_str(&w.cli_of(runc, &["features"]).stdout).expect("runc features");
        let mut want = theirs["linux"]["seccomp"]["actions"].clone();
        want.as_array_mut()
            .expect("runc's actions")
            .retain(|a| a != "SCMP_ACT_NOTIFY");
        assert_eq!(seccomp["actions"], want, "{v}");
        assert_eq!(
            seccomp["operators"], theirs["linux"]["seccomp"]["operators"],
            "{v}"
        );
    }
    // runc's checkpoint and restore flags are taken; what cannot be done
    // is one line naming it.
    for (args, what) in [
        (
            &["checkpoint", "--image-path", "/nonexistent", "c1"][..],
            "container c1 does not exist",
        ),
        (
            &["restore", "--bundle", "/nonexistent", "c1"][..],
            "bundle /nonexistent",
        ),
        (
            &["checkpoint", "--pre-dump", "--work-path", "/w", "feat-cp"][..],
            "checkpoint --pre-dump (images are whole): not supported",
        ),
    ] {
        let out = w.cli(args);
        assert_one_line(&out);
        assert_eq!(out.status, 1, "{args:?}: {out:?}");
        assert!(out.stderr.contains(what), "{args:?}: {}", out.stderr);
    }
}

/// The hooks that run in the runtime's namespaces run on the host where
/// runc runs them: `prestart` and `createRuntime` during `create` (in that
/// order), `poststart` during `start`, `poststop` during `delete`, each
/// with its arguments and the container's state on stdin. A failing
/// `createRuntime` hook fails `create` in one line naming it and leaves no
/// container.
#[test]
fn hooks_run_at_their_points_of_the_lifecycle() {
    let mut w = World::new("hooks", |v| set_args(v, &["sh", "-c", "echo ran"]));
    let log = w.dir.path().join("hooks.log");
    let log_s = log.to_string_lossy().into_owned();
    // Each hook appends "KIND ID STATUS" (from the state on stdin).
    let script = r#"s=$(cat); id=${s#*\"id\":\"}; st=${s#*\"status\":\"}; echo "$1 ${id%%\"*} ${st%%\"*}" >> "$2""#;
    let hook = |kind: &str| serde_json::json!([{ "path": "/bin/sh", "args": ["sh", "-c", script, "sh", kind, log_s] }]);
    w.edit_config(|v| {
        v["hooks"] = serde_json::json!({
            "prestart": hook("prestart"),
            "createRuntime": hook("createRuntime"),
            "poststart": hook("poststart"),
            "poststop": hook("poststop"),
        });
    });
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    let out = w.create("h1");
    assert_eq!(out.status, 0, "create: {}", out.stderr);
    assert_eq!(read(), "prestart h1 creating\ncreateRuntime h1 creating\n");
    assert_eq!(w.cli(&["start", "h1"]).status, 0);
    assert_eq!(w.wait("h1"), 0);
    let after_start = read();
    assert!(
        after_start.starts_with("prestart h1 creating\ncreateRuntime h1 creating\npoststart h1 "),
        "{after_start}"
    );
    assert_eq!(after_start.lines().count(), 3, "{after_start}");
    assert_eq!(w.container_stdout("h1"), "ran\n");
    assert_eq!(w.cli(&["delete", "h1"]).status, 0);
    let all = read();
    assert_eq!(all.lines().count(), 4, "{all}");
    assert_eq!(all.lines().last(), Some("poststop h1 stopped"), "{all}");

    // A failing createRuntime hook: create fails, naming it, and nothing is
    // left.
    w.edit_config(|v| {
        v["hooks"] = serde_json::json!({
            "createRuntime": [{ "path": "/bin/sh", "args": ["sh", "-c", "echo no way >&2; exit 3"] }],
        });
    });
    let out = w.create("h2");
    assert_one_line(&out);
    assert!(
        out.stderr.contains("hooks.createRuntime[0]"),
        "{}",
        out.stderr
    );
    assert_eq!(w.cli(&["list", "-q"]).stdout, "");
}

/// What config.json asks of the container's process and root, as the
/// guest sees it: `root.readonly`, `process.user` (uid, gid,
/// additionalGids), `process.cwd`, `process.env`, `oomScoreAdj`
/// (on the sandbox's host processes, as runc sets it on the container's),
/// `hostname`, and the proc, sysfs, cgroup and devpts mounts of the
/// default spec (the Sentry's own; cgroup is its cgroup2 view, and its
/// devpts has no line in `/proc/self/mounts`).
/// Puts the static probe `privileges.c` at `/bin/privileges` of `w`'s
/// rootfs.
fn add_privileges_probe(w: &World) {
    let bin = compile_static(w.dir.path(), "privileges", include_str!("privileges.c"));
    std::fs::copy(&bin, w.bundle().join("rootfs/bin/privileges")).expect("copy probe");
}

/// What `privileges.c` prints for these capability sets, `no_new_privs`
/// and limits (RLIMIT_NOFILE, RLIMIT_RTPRIO as (soft, hard)).
fn privileges_report(
    [eff, prm, inh, bnd, amb]: [u64; 5],
    nnp: bool,
    nofile: (u64, u64),
    rtprio: (u64, u64),
) -> Vec<String> {
    let nnp = u8::from(nnp);
    vec![
        format!("capget effective={eff:016x} permitted={prm:016x} inheritable={inh:016x}"),
        format!("prctl bounding={bnd:016x} ambient={amb:016x} no_new_privs={nnp}"),
        format!(
            "nofile getrlimit={0}/{1} prlimit={0}/{1}",
            nofile.0, nofile.1
        ),
        format!("rtprio getrlimit={}/{}", rtprio.0, rtprio.1),
        format!("CapInh:\t{inh:016x}"),
        format!("CapPrm:\t{prm:016x}"),
        format!("CapEff:\t{eff:016x}"),
        format!("CapBnd:\t{bnd:016x}"),
        format!("CapAmb:\t{amb:016x}"),
        format!("NoNewPrivs:\t{nnp}"),
        format!("Max open files {} {} files", nofile.0, nofile.1),
        format!("Max realtime priority {} {}", rtprio.0, rtprio.1),
    ]
}

/// `privileges.c`'s lines, with the runs of blanks in /proc/self/limits
/// made one.
fn privileges_lines<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<String> {
    lines
        .map(|l| {
            if l.starts_with("Max ") {
                l.split_whitespace().collect::<Vec<_>>().join(" ")
            } else {
                l.to_string()
            }
        })
        .collect()
}

/// CAP_CHOWN, CAP_KILL, CAP_NET_BIND_SERVICE (capability.h: 0, 5, 10).
const CHOWN_KILL_BIND: u64 = 1 | 1 << 5 | 1 << 10;
/// CAP_SETUID (7).
const SETUID: u64 = 1 << 7;

#[test]
fn process_and_root_settings_reach_the_guest() {
    let mut w = World::new("honoured", |v| {
        set_args(
            v,
            &[
                "sh",
                "-c",
                "id; pwd; echo $FV_VAR; hostname; \
                 touch /x 2>/dev/null && echo root-writable || echo root-read-only; \
                 touch /tmp/y 2>/dev/null && echo tmp-writable || echo tmp-read-only; \
                 grep -E ' /(proc|sys|sys/fs/cgroup) ' /proc/self/mounts | \
                 while read d m t rest; do echo $m ${t%2}; done; \
                 [ -c /dev/pts/ptmx ] && echo devpts-ptmx; /bin/privileges",
            ],
        );
        v["root"]["readonly"] = true.into();
        v["process"]["user"] = serde_json::json!({"uid": 1000, "gid": 1000});
        // A user other than root keeps, across execve, only its ambient
        // capabilities (capabilities(7)): runc gives them as here.
        let three = serde_json::json!(["CAP_CHOWN", "CAP_KILL", "CAP_NET_BIND_SERVICE"]);
        v["process"]["capabilities"] = serde_json::json!({
            "bounding": ["CAP_CHOWN", "CAP_KILL", "CAP_NET_BIND_SERVICE", "CAP_SETUID"],
            "effective": three, "permitted": three, "inheritable": three, "ambient": three,
        });
        v["process"]["rlimits"] = serde_json::json!([
            {"type": "RLIMIT_NOFILE", "soft": 1000, "hard": 1024},
            {"type": "RLIMIT_RTPRIO", "soft": 3, "hard": 5},
        ]);
        v["process"]["noNewPrivileges"] = true.into();
        v["process"]["cwd"] = "/tmp".into();
        v["process"]["env"] = serde_json::json!(["PATH=/bin", "FV_VAR=from-config"]);
        v["process"]["oomScoreAdj"] = 123.into();
        v["hostname"] = "honoured-box".into();
        v["mounts"]
            .as_array_mut()
            .expect("mounts")
            .push(serde_json::json!({
                "destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
                "options": ["mode=1777"]
            }));
    });
    add_privileges_probe(&w);
    assert_eq!(
        w.create("p1").status,
        0,
        "create: {}",
        w.container_stderr("p1")
    );
    let pid = w.state("p1")["pid"].as_i64().expect("pid");
    let adj = std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj")).expect("oom_score_adj");
    assert_eq!(adj.trim(), "123");
    assert_eq!(w.cli(&["start", "p1"]).status, 0);
    assert_eq!(w.wait("p1"), 0, "{}", w.container_stderr("p1"));
    let out = w.container_stdout("p1");
    let mut lines = out.lines();
    assert_eq!(
        lines
            .next()
            .map(|l| l.split(' ').take(2).collect::<Vec<_>>()),
        Some(vec!["uid=1000", "gid=1000"]),
        "{out}"
    );
    assert_eq!(
        lines.by_ref().take(9).collect::<Vec<_>>(),
        [
            "/tmp",
            "from-config",
            "honoured-box",
            "root-read-only",
            "tmp-writable",
            "/proc proc",
            "/sys sysfs",
            "/sys/fs/cgroup cgroup",
            "devpts-ptmx",
        ],
        "{out}"
    );
    let c = CHOWN_KILL_BIND;
    assert_eq!(
        privileges_lines(lines),
        privileges_report([c, c, c, c | SETUID, c], true, (1000, 1024), (3, 5)),
        "{out}"
    );
}

#[test]
fn permission_checks_follow_the_capabilities() {
    // A root container's permission checks go by its capabilities
    // (capabilities(7)), not by uid 0: without CAP_CHOWN no chown, without
    // CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH no reading another user's
    // 0600 file (`spec`'s default set, as runc's, has neither). With the
    // two (Docker's default set has them) the same script succeeds; and
    // `CAP_SYS_ADMIN` renames the sandbox's host.
    let script = "echo data > /tmp/f; /bin/busybox chown 1234 /tmp/f; echo chown=$?; \
                  cat /secret; echo cat=$?; cat /mine; id -u; \
                  hostname renamed 2>/dev/null; hostname";
    let run = |tag: &str, caps: &[&str]| {
        let mut w = World::new(tag, |v| {
            set_args(v, &["sh", "-c", script]);
            v["hostname"] = "box".into();
            v["process"]["capabilities"] = serde_json::json!({
                "bounding": caps, "effective": caps, "permitted": caps,
            });
            v["mounts"]
                .as_array_mut()
                .expect("mounts")
                .push(serde_json::json!({
                    "destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
                    "options": ["mode=1777"]
                }));
        });
        let rootfs = w.bundle().join("rootfs");
        for (name, owner) in [("secret", 1234), ("mine", 0)] {
            let path = rootfs.join(name);
            std::fs::write(&path, format!("{name} contents\n")).expect("write file");
            std::os::unix::fs::chown(&path, Some(owner), Some(owner)).expect("chown file");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .expect("chmod file");
        }
        assert_eq!(w.create("c").status, 0, "{}", w.container_stderr("c"));
        assert_eq!(w.cli(&["start", "c"]).status, 0);
        assert_eq!(w.wait("c"), 0, "{}", w.container_stderr("c"));
        (w.container_stdout("c"), w.container_stderr("c"))
    };
    let (out, err) = run("caps-none", &["CAP_KILL", "CAP_SETUID", "CAP_FOWNER"]);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["chown=1", "cat=1", "mine contents", "0", "box"],
        "{out}{err}"
    );
    assert!(
        err.contains("chown: /tmp/f: Operation not permitted"),
        "{err}"
    );
    assert!(
        err.contains("can't open '/secret': Permission denied"),
        "{err}"
    );
    let (out, err) = run(
        "caps-granted",
        &["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_SYS_ADMIN"],
    );
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "chown=0",
            "secret contents",
            "cat=0",
            "mine contents",
            "0",
            "renamed"
        ],
        "{out}{err}"
    );
}

#[test]
fn exec_takes_the_privileges_of_its_process() {
    // The container's own process runs as root with the capabilities of
    // config.json; `exec` with a command line gets them too (plus
    // `--cap`, and `--no-new-privs`), `exec --process` those of its JSON.
    let mut w = World::new("exec-privileges", |v| {
        set_args(v, &["sh", "-c", "/bin/privileges; exec sleep 1000"]);
        let three = serde_json::json!(["CAP_CHOWN", "CAP_KILL", "CAP_NET_BIND_SERVICE"]);
        v["process"]["capabilities"] = serde_json::json!({
            "bounding": three, "effective": three, "permitted": three,
        });
        v["process"]["rlimits"] =
            serde_json::json!([{"type": "RLIMIT_NOFILE", "soft": 1024, "hard": 1024}]);
        // (`spec` sets it, as runc's does)
        v["process"]["noNewPrivileges"] = false.into();
    });
    add_privileges_probe(&w);
    assert_eq!(w.create("x1").status, 0, "{}", w.container_stderr("x1"));
    assert_eq!(w.cli(&["start", "x1"]).status, 0);
    {
        let root = w.state_root();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(60));
            let _ = Command::new(FERROVISOR)
                .arg("--root")
                .arg(root)
                .args(["kill", "x1", "KILL"])
                .status();
        });
    }
    let c = CHOWN_KILL_BIND;
    // (the host's RLIMIT_RTPRIO: not in config.json)
    let rtprio = {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one struct rlimit, ours.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut r) }, 0);
        (r.rlim_cur, r.rlim_max)
    };
    let first = privileges_report([c, c, 0, c, 0], false, (1024, 1024), rtprio);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = w.container_stdout("x1");
        if out.lines().count() >= first.len() || Instant::now() > deadline {
            assert_eq!(privileges_lines(out.lines()), first, "{out}");
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }

    let out = w.cli(&["exec", "x1", "/bin/privileges"]);
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(privileges_lines(out.stdout.lines()), first, "{out:?}");

    let out = w.cli(&[
        "exec",
        "--cap",
        "CAP_SETUID",
        "--no-new-privs",
        "x1",
        "/bin/privileges",
    ]);
    assert_eq!(out.status, 0, "{out:?}");
    let s = c | SETUID;
    assert_eq!(
        privileges_lines(out.stdout.lines()),
        privileges_report([s, s, 0, s, 0], true, (1024, 1024), rtprio),
        "{out:?}"
    );

    let proc_json = w.dir.path().join("process.json");
    std::fs::write(
        &proc_json,
        serde_json::json!({
            "args": ["/bin/privileges"], "cwd": "/", "env": ["PATH=/bin"],
            "user": {"uid": 0, "gid": 0},
            "capabilities": {"bounding": ["CAP_SETUID"], "effective": ["CAP_SETUID"],
                             "permitted": ["CAP_SETUID"]},
            "rlimits": [{"type": "RLIMIT_NOFILE", "soft": 64, "hard": 128},
                        {"type": "RLIMIT_RTPRIO", "soft": 1, "hard": 2}],
            "noNewPrivileges": true,
        })
        .to_string(),
    )
    .expect("process.json");
    let out = w.cli(&["exec", "--process", &proc_json.to_string_lossy(), "x1"]);
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(
        privileges_lines(out.stdout.lines()),
        privileges_report([SETUID, SETUID, 0, SETUID, 0], true, (64, 128), (1, 2)),
        "{out:?}"
    );

    // Names runc does not know are refused, naming the field.
    std::fs::write(
        &proc_json,
        r#"{"args":["true"],"cwd":"/","user":{"uid":0,"gid":0},
            "capabilities":{"bounding":["CAP_CHOWN","CAP_FLY"]}}"#,
    )
    .expect("process.json");
    let out = w.cli(&["exec", "--process", &proc_json.to_string_lossy(), "x1"]);
    assert_one_line(&out);
    assert_ne!(out.status, 0);
    assert!(
        out.stderr.contains("capabilities.bounding[1]") && out.stderr.contains("CAP_FLY"),
        "{out:?}"
    );
    let out = w.cli(&["exec", "--cap", "CAP_FLY", "x1", "true"]);
    assert_one_line(&out);
    assert_ne!(out.status, 0);
    assert!(out.stderr.contains("CAP_FLY"), "{out:?}");
    assert_eq!(w.cli(&["kill", "x1", "KILL"]).status, 0);
}

#[test]
fn exec_runs_a_second_program_in_the_running_sandbox() {
    // The container's first process makes a file in the sandbox's own
    // /tmp; an exec'd program sees it (same sandbox), gets its arguments,
    // environment, working directory and stdio, and its status comes back.
    let mut w = World::new("exec", |v| {
        set_args(v, &["sh", "-c", "echo inside > /tmp/mark; exec sleep 1000"]);
        writable_root(v);
    });
    assert_eq!(w.create("e1").status, 0);
    assert_eq!(w.cli(&["start", "e1"]).status, 0);
    // Reads below wait for exec'd programs; should one hang, killing the
    // container ends them all (and this test with a failure, not a hang).
    {
        let root = w.state_root();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(60));
            let _ = Command::new(FERROVISOR)
                .arg("--root")
                .arg(root)
                .args(["kill", "e1", "KILL"])
                .status();
        });
    }
    let mut seen = false;
    for _ in 0..100 {
        let out = w.cli(&["exec", "e1", "cat", "/tmp/mark"]);
        if out.status == 0 {
            assert_eq!(out.stdout, "inside\n", "{out:?}");
            seen = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(seen, "exec never saw the first process's file");

    let out = w.cli(&[
        "exec",
        "--env",
        "GREETING=hi",
        "--cwd",
        "/bin",
        "e1",
        "sh",
        "-c",
        "echo $GREETING $(pwd) $$; echo to-stderr >&2; exit 7",
    ]);
    assert_eq!(out.status, 7, "{out:?}");
    let words: Vec<&str> = out.stdout.split_whitespace().collect();
    assert_eq!(&words[..2], &["hi", "/bin"], "{out:?}");
    // A pid of the sandbox's own, not the first process's.
    assert!(words[2].parse::<i32>().is_ok_and(|p| p > 1), "{out:?}");
    assert_eq!(out.stderr, "to-stderr\n", "{out:?}");

    // --process, as containerd's runc shim sends it; --detach returns at
    // once and the pid file names the process that stands for the program.
    let proc_json = w.dir.path().join("process.json");
    std::fs::write(
        &proc_json,
        r#"{"args":["sh","-c","exit 5"],"cwd":"/","env":["PATH=/bin"],"user":{"uid":0,"gid":0}}"#,
    )
    .expect("process.json");
    let pid_file = w.dir.path().join("exec.pid");
    let out = w.cli(&[
        "exec",
        "--process",
        &proc_json.to_string_lossy(),
        "--detach",
        "--pid-file",
        &pid_file.to_string_lossy(),
        "e1",
    ]);
    assert_eq!(out.status, 0, "{out:?}");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .expect("pid file")
        .trim()
        .parse()
        .expect("pid");
    assert!(pid > 0);

    // Refusals: a missing program, a terminal, a container not running.
    let out = w.cli(&["exec", "e1", "/no/such/program"]);
    assert_one_line(&out);
    assert_ne!(out.status, 0);
    assert!(out.stderr.contains("no such file"), "{out:?}");
    let out = w.cli(&["exec", "--tty", "e1", "sh"]);
    assert_one_line(&out);
    assert!(out.stderr.contains("not a terminal"), "{out:?}");
    // Signals to the exec process reach the program (its trap runs and its
    // status comes back).
    let mut trapped = w.command(&[
        "exec",
        "e1",
        "sh",
        "-c",
        "trap 'echo got-term; exit 9' TERM; echo ready; while true; do sleep 0.1; done",
    ]);
    trapped.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut trapped = trapped.spawn().expect("spawn exec");
    let mut out = std::io::BufReader::new(trapped.stdout.take().expect("stdout"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).expect("read");
    assert_eq!(line, "ready\n");
    // SAFETY: kill(2) of our own unreaped child.
    unsafe { libc::kill(trapped.id() as i32, libc::SIGTERM) };
    line.clear();
    std::io::BufRead::read_line(&mut out, &mut line).expect("read");
    assert_eq!(line, "got-term\n");
    assert_eq!(code(wait_child(trapped, "exec trap")), 9);

    // An exec'd program still running when the sandbox is killed ends with
    // it, as if by SIGKILL.
    let mut long = w.command(&["exec", "e1", "sh", "-c", "echo started; exec sleep 1000"]);
    long.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut long = long.spawn().expect("spawn exec");
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(long.stdout.take().expect("stdout")),
        &mut first,
    )
    .expect("read");
    assert_eq!(first, "started\n");
    assert_eq!(w.cli(&["kill", "e1", "KILL"]).status, 0);
    assert_eq!(w.wait("e1"), 128 + 9);
    assert_eq!(code(wait_child(long, "exec sleep")), 128 + 9);
    let out = w.cli(&["exec", "e1", "true"]);
    assert_one_line(&out);
    assert!(out.stderr.contains("stopped"), "{out:?}");
}

/// Whether this test can make host cgroups (root, with the cgroup file
/// system writable); the cgroup tests say so and pass trivially otherwise.
fn host_cgroups() -> bool {
    let probe = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        "/sys/fs/cgroup/cgroup.procs"
    } else {
        "/sys/fs/cgroup/pids/cgroup.procs"
    };
    let c = std::ffi::CString::new(probe).expect("path");
    // SAFETY: access(2) reads the NUL-terminated path and nothing else.
    let ok = unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0;
    if !ok {
        eprintln!("skipped: {probe} is not writable (run as root for the cgroup tests)");
    }
    ok
}

/// The host cgroup directory process `pid` is in: of `controller` on
/// cgroup v1, the unified one on v2.
fn cgroup_dir(pid: i64, controller: &str) -> PathBuf {
    let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("/proc/PID/cgroup");
    let path = text
        .lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
            let hit = if v2 {
                ctrls.is_empty()
            } else {
                ctrls.split(',').any(|c| c == controller)
            };
            hit.then(|| path.trim_start_matches('/').to_string())
        })
        .unwrap_or_else(|| panic!("no {controller} cgroup in {text}"));
    let base = if v2 {
        PathBuf::from("/sys/fs/cgroup")
    } else {
        Path::new("/sys/fs/cgroup").join(controller)
    };
    base.join(path)
}

fn read_trim(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_string()
}

fn v2() -> bool {
    Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
}

#[test]
fn resource_limits_hold_the_whole_sandbox_until_delete() {
    if !host_cgroups() {
        return;
    }
    let mut w = World::new("limits", |v| {
        set_args(v, &["sleep", "1000"]);
        v["linux"]["resources"] = serde_json::json!({
            "memory": {"limit": 64 << 20},
            "cpu": {"quota": 50000, "period": 100000},
            "pids": {"limit": 200}});
    });
    let out = w.create("l1");
    assert_eq!(out.status, 0, "create: {}", out.stderr);
    let pid = w.state("l1")["pid"].as_i64().expect("pid");
    let memory = cgroup_dir(pid, "memory");
    let cpu = cgroup_dir(pid, "cpu");
    let pids = cgroup_dir(pid, "pids");
    // The sandbox has a cgroup of its own, not the caller's.
    assert_ne!(memory, cgroup_dir(i64::from(std::process::id()), "memory"));
    if v2() {
        assert_eq!(read_trim(&memory.join("memory.max")), "67108864");
        assert_eq!(read_trim(&cpu.join("cpu.max")), "50000 100000");
    } else {
        assert_eq!(read_trim(&memory.join("memory.limit_in_bytes")), "67108864");
        assert_eq!(read_trim(&cpu.join("cpu.cfs_quota_us")), "50000");
        assert_eq!(read_trim(&cpu.join("cpu.cfs_period_us")), "100000");
    }
    // The guest's 200 tasks are counted in the Sentry; the host limit is
    // a backstop with room for the sandbox's own tasks.
    let host_max: u64 = read_trim(&pids.join("pids.max")).parse().expect("pids.max");
    assert!(host_max > 200, "pids.max {host_max}");

    // Running, every host process of the sandbox (Sentry, stubs, gofer)
    // is inside.
    assert_eq!(w.cli(&["start", "l1"]).status, 0);
    // The first guest process's stub may still be starting.
    let deadline = Instant::now() + Duration::from_secs(10);
    let host = loop {
        let ps = w.cli(&["ps", "--format", "json", "l1"]);
        let host: Vec<i64> = serde_json::from_str(&ps.stdout).expect("ps json");
        if host.len() >= 3 || Instant::now() > deadline {
            break host;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(host.len() >= 3, "sandbox, gofer and a stub: {host:?}");
    let inside = read_trim(&memory.join("cgroup.procs"));
    for p in &host {
        assert!(
            inside.lines().any(|l| l == p.to_string()),
            "host process {p} outside {}: {inside}",
            memory.display()
        );
    }

    let out = w.cli(&["delete", "--force", "l1"]);
    assert_eq!(out.status, 0, "delete: {}", out.stderr);
    for d in [&memory, &cpu, &pids] {
        assert!(!d.exists(), "{} left behind", d.display());
    }
}

/// `cpu.cpus` and `cpu.mems` are the sandbox's cpuset cgroup's, as under
/// runc (runtime-tools reads them there); the guest sees one CPU.
#[test]
fn a_cpu_set_is_written_to_the_cpuset_cgroup() {
    if !host_cgroups() {
        return;
    }
    let mut w = World::new("cpuset", |v| {
        set_args(v, &["sh", "-c", "nproc; sleep 1000"]);
        v["linux"]["resources"] = serde_json::json!({"cpu": {"cpus": "0", "mems": "0"}});
    });
    let out = w.create("cs1");
    assert_eq!(out.status, 0, "create: {}", out.stderr);
    let pid = w.state("cs1")["pid"].as_i64().expect("pid");
    let cpuset = cgroup_dir(pid, "cpuset");
    assert_ne!(cpuset, cgroup_dir(i64::from(std::process::id()), "cpuset"));
    assert_eq!(read_trim(&cpuset.join("cpuset.cpus")), "0");
    assert_eq!(read_trim(&cpuset.join("cpuset.mems")), "0");
    let out = w.cli(&["delete", "--force", "cs1"]);
    assert_eq!(out.status, 0, "delete: {}", out.stderr);
    assert!(!cpuset.exists(), "{} left behind", cpuset.display());
}

#[test]
fn a_memory_limit_holds_the_whole_sandbox() {
    if !host_cgroups() {
        return;
    }
    // 128 MiB into the guest's /dev/shm: memory of the Sentry's, so of the
    // sandbox's cgroup.
    let fill = [
        "sh",
        "-c",
        "dd if=/dev/zero of=/dev/shm/big bs=1M count=128 2>/dev/null; echo wrote $?",
    ];
    let mut free = World::new("nomemlimit", |v| set_args(v, &fill));
    let out = free.run_to_success("m0");
    assert_eq!(out, "wrote 0\n");

    // Under a 64 MiB limit the guest sees 64 MiB of memory, and /dev/shm holds
    // half of it, as Linux sizes a tmpfs: the same fill ends in ENOSPC at
    // 32 MiB and the sandbox carries on (issue 4 point 7).
    let tmpfs_fill = [
        "sh",
        "-c",
        "grep MemTotal /proc/meminfo; \
         dd if=/dev/zero of=/dev/shm/big bs=1M count=128 2>&1 | grep -o 'No space left on device'; \
         ls -l /dev/shm/big | awk '{print $5}'; rm /dev/shm/big; echo alive > /dev/shm/ok; \
         cat /dev/shm/ok",
    ];
    let mut w = World::new("memlimit-tmpfs", |v| {
        set_args(v, &tmpfs_fill);
        v["linux"]["resources"] = serde_json::json!({"memory": {"limit": 64 << 20}});
    });
    let out = w.run_to_success("m1");
    assert_eq!(
        out,
        format!(
            "MemTotal:          65536 kB\nNo space left on device\n{}\nalive\n",
            32 << 20
        )
    );
    assert_eq!(w.cli(&["delete", "m1"]).status, 0);

    // Memory the guest's processes take for themselves (here a shell
    // variable of 128 MiB) is held to the limit by the host: its OOM killer
    // ends the whole sandbox, not just the guest's shell.
    let anon_fill = [
        "sh",
        "-c",
        "x=$(yes 0123456789abcdef | head -c 134217728); echo ${#x}",
    ];
    let mut w = World::new("memlimit", |v| {
        set_args(v, &anon_fill);
        v["linux"]["resources"] = serde_json::json!({"memory": {"limit": 64 << 20}});
    });
    let created = w.create("m2");
    assert_eq!(created.status, 0, "{created:?}");
    let pid = w.state("m2")["pid"].as_i64().expect("pid");
    let memory = cgroup_dir(pid, "memory");
    assert_eq!(w.cli(&["start", "m2"]).status, 0);
    assert_eq!(w.wait("m2"), 128 + 9);
    assert_eq!(w.container_stdout("m2"), "");
    let events = read_trim(&memory.join(if v2() {
        "memory.events"
    } else {
        "memory.oom_control"
    }));
    let kills: u64 = events
        .lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(kills > 0, "{events}");
    assert_eq!(w.cli(&["delete", "m2"]).status, 0);
    assert!(!memory.exists(), "{} left behind", memory.display());
}

/// What the guest reads in its /sys/fs/cgroup (the sandbox's own cgroup v2
/// view, whatever the host's cgroups are): the container's memory and pids
/// limits as `memory.max` and `pids.max`, "max" without them; its CPU
/// quota as `cpu.max` ("QUOTA PERIOD", "max 100000" without); the Sentry's
/// own task count and memory use; `0::/` as its cgroup; the cgroup2 mount,
/// read-only, in its mount table and to `statfs`.
const CGROUP_SCRIPT: &str = "cd /sys/fs/cgroup; cat memory.max pids.max cpu.max cpu.weight \
     cgroup.controllers /proc/self/cgroup; \
     c=$(cat memory.current); [ \"$c\" -gt 0 ] && echo memory.current positive; \
     [ \"$(cat pids.current)\" -ge 2 ] && echo pids.current counts; \
     grep -c ' / /sys/fs/cgroup ro,nosuid,nodev,noexec - cgroup2 ' /proc/self/mountinfo; \
     stat -f -c %t /sys/fs/cgroup";

#[test]
fn the_guest_reads_its_limits_in_sys_fs_cgroup() {
    if !host_cgroups() {
        return;
    }
    // 63677270: CGROUP2_SUPER_MAGIC
    let common = "memory.current positive\npids.current counts\n1\n63677270\n";
    let mut w = World::new("cgroupview", |v| {
        set_args(v, &["sh", "-c", CGROUP_SCRIPT]);
        v["linux"]["resources"] = serde_json::json!({
            "memory": {"limit": 64 << 20},
            "pids": {"limit": 50},
            "cpu": {"quota": 150000, "period": 50000},
        });
    });
    let out = w.run_to_success("g1");
    assert_eq!(
        out,
        format!(
            "{}\n50\n150000 50000\n100\ncpuset cpu memory pids\n0::/\n{common}",
            64 << 20
        )
    );
    assert_eq!(w.cli(&["delete", "g1"]).status, 0);

    let mut free = World::new("cgroupview-free", |v| {
        set_args(v, &["sh", "-c", CGROUP_SCRIPT]);
    });
    assert_eq!(free.create("g2").status, 0);
    assert_eq!(free.cli(&["start", "g2"]).status, 0);
    assert_eq!(free.wait("g2"), 0);
    assert_eq!(
        free.container_stdout("g2"),
        format!("max\nmax\nmax 100000\n100\ncpuset cpu memory pids\n0::/\n{common}")
    );
    assert_eq!(free.cli(&["delete", "g2"]).status, 0);
}

/// A shell (itself one task) whose subshell (another) forks short sleepers
/// until fork fails, then forks again once they are gone. Under a pids
/// limit of 10 that is 8 sleepers, as runc's cgroup allows.
const PIDS_SCRIPT: &str =
    "( i=0; while [ $i -lt 50 ]; do sleep 2 & i=$((i+1)); echo started $i; done ); \
     echo subshell status $?; sleep 3; sh -c 'echo still works'";

/// Runs [`PIDS_SCRIPT`] natively in a fresh pids cgroup whose `pids.max`
/// is `limit`, and returns its stdout, stderr and status.
fn pids_script_natively(limit: u32) -> Outcome {
    let base = if v2() {
        PathBuf::from("/sys/fs/cgroup")
    } else {
        PathBuf::from("/sys/fs/cgroup/pids")
    };
    let dir = base.join(format!(
        "ferrovisor-test-native-pids-{}",
        std::process::id()
    ));
    std::fs::create_dir(&dir).expect("native pids cgroup");
    std::fs::write(dir.join("pids.max"), limit.to_string()).expect("pids.max");
    // The shell joins the cgroup, then becomes busybox sh (one task).
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("echo $$ > \"$1/cgroup.procs\" && exec /bin/busybox sh -c \"$0\"")
        .arg(PIDS_SCRIPT)
        .arg(&dir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null());
    let out = run(cmd, None, TIMEOUT);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::remove_dir(&dir).is_err() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    out
}

#[test]
fn a_pids_limit_counts_guest_tasks_like_runc() {
    if !host_cgroups() {
        return;
    }
    let expected = (1..=8)
        .map(|i| format!("started {i}\n"))
        .collect::<String>()
        + "subshell status 2\nstill works\n";
    let native = pids_script_natively(10);
    assert_eq!(
        (native.stdout.as_str(), native.status),
        (expected.as_str(), 0),
        "the NATIVE run differs, so the test is wrong (stderr: {})",
        native.stderr
    );
    assert!(
        native
            .stderr
            .contains("can't fork: Resource temporarily unavailable"),
        "native: {}",
        native.stderr
    );

    let mut w = World::new("pids", |v| {
        set_args(v, &["sh", "-c", PIDS_SCRIPT]);
        v["linux"]["resources"] = serde_json::json!({"pids": {"limit": 10}});
    });
    assert_eq!(w.create("p1").status, 0);
    let pid = w.state("p1")["pid"].as_i64().expect("pid");
    let pids = cgroup_dir(pid, "pids");
    assert_eq!(w.cli(&["start", "p1"]).status, 0);
    // The Sentry answered EAGAIN at the guest's 11th task, lived on, and
    // forked again once tasks were free.
    assert_eq!(w.wait("p1"), 0);
    assert_eq!(w.container_stdout("p1"), expected);
    let err = w.container_stderr("p1");
    assert!(
        err.contains("can't fork: Resource temporarily unavailable"),
        "{err}"
    );
    // The host backstop was never reached.
    let events = read_trim(&pids.join("pids.events"));
    assert!(
        events.lines().any(|l| l == "max 0"),
        "pids.events: {events}"
    );
    assert_eq!(w.cli(&["delete", "p1"]).status, 0);
    assert!(!pids.exists(), "{} left behind", pids.display());
}

#[test]
fn one_id_under_two_state_roots_gets_two_cgroups() {
    if !host_cgroups() {
        return;
    }
    // The same id under two `--root`s: each sandbox gets a default cgroup
    // of its own, and deleting one leaves the other running.
    let mut a = World::new("twin-a", |v| set_args(v, &["sleep", "1000"]));
    let mut b = World::new("twin-b", |v| set_args(v, &["sleep", "1000"]));
    assert_eq!(a.create("twin1").status, 0);
    assert_eq!(b.create("twin1").status, 0, "second root");
    let pid_a = a.state("twin1")["pid"].as_i64().expect("pid");
    let pid_b = b.state("twin1")["pid"].as_i64().expect("pid");
    let (cg_a, cg_b) = (cgroup_dir(pid_a, "pids"), cgroup_dir(pid_b, "pids"));
    assert_ne!(cg_a, cg_b);
    for cg in [&cg_a, &cg_b] {
        let name = cg.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        assert!(name.starts_with("twin1-"), "{}", cg.display());
    }
    assert_eq!(a.cli(&["start", "twin1"]).status, 0);
    assert_eq!(b.cli(&["start", "twin1"]).status, 0);
    assert_eq!(a.cli(&["delete", "--force", "twin1"]).status, 0);
    assert!(!cg_a.exists(), "{} left behind", cg_a.display());
    assert_eq!(b.status("twin1"), "running");
    assert!(
        read_trim(&cg_b.join("cgroup.procs"))
            .lines()
            .any(|p| p == pid_b.to_string()),
        "the other sandbox is still in its cgroup"
    );
    assert_eq!(b.cli(&["delete", "--force", "twin1"]).status, 0);
    assert!(!cg_b.exists(), "{} left behind", cg_b.display());
}

/// CPU time (user + system, in clock ticks) of processes `pids`.
fn cpu_ticks(pids: &[i64]) -> u64 {
    pids.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).ok())
        .filter_map(|s| {
            let f: Vec<u64> = s[s.rfind(')')? + 2..]
                .split_whitespace()
                .map(|x| x.parse().unwrap_or(0))
                .collect();
            // proc_pid_stat(5) fields 14 and 15; `f` starts at field 3.
            Some(f.get(11)? + f.get(12)?)
        })
        .sum()
}

#[test]
fn pause_freezes_the_sandbox_and_resume_continues_it() {
    if !host_cgroups() {
        return;
    }
    let mut w = World::new("pause", |v| {
        set_args(
            v,
            &["sh", "-c", "i=0; while :; do i=$((i+1)); echo $i; done"],
        );
    });
    assert_eq!(w.create("z1").status, 0);
    assert_eq!(w.cli(&["start", "z1"]).status, 0);
    let lines = |w: &World| w.container_stdout("z1").lines().count();
    let deadline = Instant::now() + TIMEOUT;
    while lines(&w) < 10 {
        assert!(Instant::now() < deadline, "the counter never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Not paused yet: resume is refused.
    assert_one_line(&w.cli(&["resume", "z1"]));

    let out = w.cli(&["pause", "z1"]);
    assert_eq!(out.status, 0, "pause: {}", out.stderr);
    assert_eq!(w.status("z1"), "paused");
    let ps = w.cli(&["ps", "--format", "json", "z1"]);
    let host: Vec<i64> = serde_json::from_str(&ps.stdout).expect("ps json");
    let (n, ticks) = (lines(&w), cpu_ticks(&host));
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(lines(&w), n, "the guest ran while paused");
    assert_eq!(cpu_ticks(&host), ticks, "the sandbox used CPU while paused");
    // Paused is not stopped: delete without --force and exec are refused.
    assert_one_line(&w.cli(&["delete", "z1"]));
    assert_one_line(&w.cli(&["exec", "z1", "true"]));

    let out = w.cli(&["resume", "z1"]);
    assert_eq!(out.status, 0, "resume: {}", out.stderr);
    assert_eq!(w.status("z1"), "running");
    let deadline = Instant::now() + TIMEOUT;
    while lines(&w) < n + 10 {
        assert!(Instant::now() < deadline, "no progress after resume");
        std::thread::sleep(Duration::from_millis(20));
    }

    // A paused container can be killed.
    assert_eq!(w.cli(&["pause", "z1"]).status, 0);
    let pid = w.state("z1")["pid"].as_i64().expect("pid");
    let freezer = cgroup_dir(pid, "freezer");
    assert_eq!(w.cli(&["kill", "z1", "KILL"]).status, 0);
    assert_eq!(w.wait("z1"), 128 + 9);
    assert_eq!(w.status("z1"), "stopped");
    assert_eq!(w.cli(&["delete", "z1"]).status, 0);
    assert!(!freezer.exists(), "{} left behind", freezer.display());
}

#[test]
fn delete_force_of_a_paused_container() {
    if !host_cgroups() {
        return;
    }
    let mut w = World::new("pausedel", |v| set_args(v, &["sleep", "1000"]));
    assert_eq!(w.create("y1").status, 0);
    assert_eq!(w.cli(&["start", "y1"]).status, 0);
    let pid = w.state("y1")["pid"].as_i64().expect("pid");
    let freezer = cgroup_dir(pid, "freezer");
    assert_eq!(w.cli(&["pause", "y1"]).status, 0);
    let out = w.cli(&["delete", "--force", "y1"]);
    assert_eq!(out.status, 0, "delete --force: {}", out.stderr);
    assert!(
        !Path::new(&format!("/proc/{pid}/stat")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z")),
        "sandbox {pid} still alive"
    );
    assert!(!freezer.exists(), "{} left behind", freezer.display());
}

/// The host cgroup file holding `v1`'s (or, on cgroup v2, `v2`'s) limit
/// for the sandbox `pid`.
/// A bundle running `sh -c script` with a 256 MiB memory limit and a pids
/// limit of 100, for the `update` tests.
/// The root writable (runc's default spec makes it read-only): the guest's
/// writes reach the bundle's rootfs.
fn writable_root(v: &mut Value) {
    v["root"]["readonly"] = false.into();
}

fn limited_world(tag: &str, script: &str) -> World {
    World::new(tag, |v| {
        set_args(v, &["sh", "-c", script]);
        writable_root(v);
        v["linux"]["resources"] = serde_json::json!({
            "memory": {"limit": 256 << 20},
            "pids": {"limit": 100}});
    })
}

fn limit_file(pid: i64, controller: &str, v1: &str, v2_file: &str) -> PathBuf {
    cgroup_dir(pid, controller).join(if v2() { v2_file } else { v1 })
}

#[test]
fn update_changes_a_running_containers_limits() {
    if !host_cgroups() {
        return;
    }
    // PIDS_SCRIPT under a pids.limit of 5 natively: the shell, its
    // subshell and 3 sleepers.
    let expected_forks = (1..=3)
        .map(|i| format!("started {i}\n"))
        .collect::<String>()
        + "subshell status 2\nstill works\n";
    let native = pids_script_natively(5);
    assert_eq!(
        (native.stdout.as_str(), native.status),
        (expected_forks.as_str(), 0),
        "the NATIVE run differs, so the test is wrong (stderr: {})",
        native.stderr
    );

    // The guest reports its memory, waits for /tmp/go (made by `exec`
    // once the limits are updated), reports it again and forks until
    // fork fails.
    let script = format!(
        "grep MemTotal /proc/meminfo; while [ ! -e /tmp/go ]; do sleep 0.1; done; \
         grep MemTotal /proc/meminfo; {PIDS_SCRIPT}"
    );
    let mut w = limited_world("update", &script);
    let id = "upd-running";
    assert_eq!(w.create(id).status, 0);
    let pid = w.state(id)["pid"].as_i64().expect("pid");
    let memory = limit_file(pid, "memory", "memory.limit_in_bytes", "memory.max");
    let quota = limit_file(pid, "cpu", "cpu.cfs_quota_us", "cpu.max");
    let host_pids = limit_file(pid, "pids", "pids.max", "pids.max");
    assert_eq!(read_trim(&memory), (256u64 << 20).to_string());
    assert_eq!(w.cli(&["start", id]).status, 0);
    // The guest has looked at its memory once before anything changes.
    let deadline = Instant::now() + TIMEOUT;
    while !w.container_stdout(id).contains("MemTotal") {
        assert!(
            Instant::now() < deadline,
            "the guest never printed MemTotal"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // --memory, in runc's units: the cgroup file holds it.
    let out = w.cli(&["update", "--memory", "128m", id]);
    assert_eq!(out.status, 0, "update --memory: {out:?}");
    assert_eq!(read_trim(&memory), (128u64 << 20).to_string());

    // -r: linux.resources JSON from a file.
    let file = w.dir.path().join("resources.json");
    std::fs::write(&file, r#"{"cpu": {"quota": 20000, "period": 100000}}"#)
        .expect("write resources");
    let out = w.cli(&["update", "-r", &file.to_string_lossy(), id]);
    assert_eq!(out.status, 0, "update -r: {out:?}");
    let want = if v2() { "20000 100000" } else { "20000" };
    assert_eq!(read_trim(&quota), want);
    // The guest reads the new quota in its cgroup's cpu.max.
    let out = w.cli(&["exec", id, "cat", "/sys/fs/cgroup/cpu.max"]);
    assert_eq!(
        (out.status, out.stdout.as_str()),
        (0, "20000 100000\n"),
        "{out:?}"
    );
    assert_eq!(read_trim(&memory), (128u64 << 20).to_string(), "unchanged");
    // -r -: the document on standard input, as containerd's runc shim
    // sends it.
    let out = run(
        w.command(&["update", "--resources", "-", id]),
        Some(br#"{"memory": {"reservation": 67108864}, "cpu": {"cpus": ""}}"#),
        TIMEOUT,
    );
    assert_eq!(out.status, 0, "update -r -: {out:?}");
    let soft = limit_file(pid, "memory", "memory.soft_limit_in_bytes", "memory.low");
    assert_eq!(read_trim(&soft), "67108864");

    // What the sandbox does not apply is refused by field name, and
    // nothing changes.
    std::fs::write(&file, r#"{"blockIO": {"weight": 100}}"#).expect("write resources");
    let r = file.to_string_lossy().into_owned();
    let before_pids = read_trim(&host_pids);
    for (args, says) in [
        (
            vec!["update", "-r", r.as_str(), id],
            "linux.resources.blockIO",
        ),
        (
            vec!["update", "--cpuset-cpus", "0", id],
            "linux.resources.cpu.cpus",
        ),
        (
            vec!["update", "--blkio-weight", "100", id],
            "linux.resources.blockIO",
        ),
        (vec!["update", "--memory", "lots", id], "--memory"),
        (
            vec!["update", "--pids-limit", "-7", id],
            "linux.resources.pids.limit",
        ),
        (
            vec!["update", "-r", r.as_str(), "--pids-limit", "5", id],
            "not both",
        ),
        (
            vec!["update", "--pids-limit", "5", "upd-nonexistent"],
            "upd-nonexistent",
        ),
    ] {
        let out = w.cli(&args);
        assert_one_line(&out);
        assert!(out.stderr.contains(says), "{args:?}: {out:?}");
    }
    assert_eq!(read_trim(&host_pids), before_pids);
    assert_eq!(read_trim(&memory), (128u64 << 20).to_string());

    // --pids-limit: the guest may now hold 5 tasks, counted by the Sentry;
    // the host backstop follows.
    let out = w.cli(&["update", "--pids-limit", "5", id]);
    assert_eq!(out.status, 0, "update --pids-limit: {out:?}");
    assert_ne!(read_trim(&host_pids), before_pids);
    let out = w.cli(&["exec", id, "touch", "/tmp/go"]);
    assert_eq!(out.status, 0, "exec: {out:?}");
    assert_eq!(w.wait(id), 0);
    assert_eq!(
        w.container_stdout(id),
        format!("MemTotal:         262144 kB\nMemTotal:         131072 kB\n{expected_forks}")
    );
    let err = std::fs::read_to_string(w.dir.path().join(format!("{id}.err"))).unwrap_or_default();
    assert!(
        err.contains("can't fork: Resource temporarily unavailable"),
        "{err}"
    );

    // A stopped container: one line, non-zero.
    let out = w.cli(&["update", "--pids-limit", "10", id]);
    assert_one_line(&out);
    assert!(out.stderr.contains("stopped"), "{out:?}");
    assert_eq!(w.cli(&["delete", id]).status, 0);
}

#[test]
fn update_of_a_created_container_holds_from_the_start() {
    if !host_cgroups() {
        return;
    }
    // Limits changed between create and start: the Sentry learns them as
    // it starts (there is no control socket to tell it before).
    let script = format!("grep MemTotal /proc/meminfo; {PIDS_SCRIPT}");
    let mut w = World::new("update-created", |v| {
        set_args(v, &["sh", "-c", &script]);
        v["linux"]["resources"] = serde_json::json!({"memory": {"limit": 256 << 20}});
    });
    let id = "upd-created";
    assert_eq!(w.create(id).status, 0);
    let out = w.cli(&["update", "--memory", "96m", "--pids-limit", "5", id]);
    assert_eq!(out.status, 0, "update: {out:?}");
    assert_eq!(w.status(id), "created");
    assert_eq!(w.cli(&["start", id]).status, 0);
    assert_eq!(w.wait(id), 0);
    let forks = (1..=3)
        .map(|i| format!("started {i}\n"))
        .collect::<String>();
    assert_eq!(
        w.container_stdout(id),
        format!("MemTotal:          98304 kB\n{forks}subshell status 2\nstill works\n")
    );
    assert_eq!(w.cli(&["delete", id]).status, 0);
}

#[test]
fn update_of_a_paused_container_reaches_the_guest_on_resume() {
    if !host_cgroups() {
        return;
    }
    // The guest shows its limits as the Sentry knows them, waits for
    // /tmp/go (made by `exec` after the resume), shows them again, then
    // forks until fork fails.
    let show = "cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max; \
                grep MemTotal /proc/meminfo";
    let script =
        format!("{show}; while [ ! -e /tmp/go ]; do sleep 0.1; done; {show}; {PIDS_SCRIPT}");
    let mut w = limited_world("update-paused", &script);
    let id = "upd-paused";
    assert_eq!(w.create(id).status, 0);
    let pid = w.state(id)["pid"].as_i64().expect("pid");
    let memory = limit_file(pid, "memory", "memory.limit_in_bytes", "memory.max");
    let host_pids = limit_file(pid, "pids", "pids.max", "pids.max");
    assert_eq!(w.cli(&["start", id]).status, 0);
    let deadline = Instant::now() + TIMEOUT;
    while !w.container_stdout(id).contains("MemTotal") {
        assert!(
            Instant::now() < deadline,
            "the guest never printed MemTotal"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = "268435456\n100\nMemTotal:         262144 kB\n";
    assert_eq!(w.container_stdout(id), before);

    let out = w.cli(&["pause", id]);
    assert_eq!(out.status, 0, "pause: {out:?}");
    let before_pids = read_trim(&host_pids);
    let out = w.cli(&["update", "--memory", "96m", "--pids-limit", "5", id]);
    assert_eq!(out.status, 0, "update of a paused container: {out:?}");
    assert_eq!(w.status(id), "paused", "update thawed the sandbox");
    // The host cgroup has the new limits while the sandbox is frozen.
    assert_eq!(read_trim(&memory), (96u64 << 20).to_string());
    assert_ne!(read_trim(&host_pids), before_pids);
    // What the Sentry holds is recorded for the resume.
    let record: Value = serde_json::from_slice(
        &std::fs::read(w.state_root().join(id).join("state.json")).expect("state.json"),
    )
    .expect("state json");
    assert_eq!(record["guestLimitsPending"], Value::Bool(true), "{record}");

    let out = w.cli(&["resume", id]);
    assert_eq!(out.status, 0, "resume: {out:?}");
    assert_eq!(w.status(id), "running");
    let out = w.cli(&["exec", id, "touch", "/tmp/go"]);
    assert_eq!(out.status, 0, "exec: {out:?}");
    assert_eq!(w.wait(id), 0);
    // PIDS_SCRIPT under a pids.limit of 5, as natively (see
    // update_changes_a_running_containers_limits).
    let forks = (1..=3)
        .map(|i| format!("started {i}\n"))
        .collect::<String>();
    assert_eq!(
        w.container_stdout(id),
        format!(
            "{before}100663296\n5\nMemTotal:          98304 kB\n\
             {forks}subshell status 2\nstill works\n"
        )
    );
    assert_eq!(w.cli(&["delete", id]).status, 0);
}

#[test]
fn events_stats_count_the_guests_tasks_like_runc() {
    // Under runc the container's pids cgroup holds the shell and its two
    // sleepers: 3 tasks (each single-threaded). The host cgroup of a
    // sandbox counts the Sentry's threads, its stubs and the gofer
    // instead; the guest's own count is what `events` reports.
    let mut w = World::new("stats-tasks", |v| {
        set_args(v, &["sh", "-c", "sleep 100 & sleep 100 & wait"]);
        v["linux"]["resources"] = serde_json::json!({"pids": {"limit": 40}});
    });
    let id = "stats-tasks";
    assert_eq!(w.create(id).status, 0);
    assert_eq!(w.cli(&["start", id]).status, 0);
    let stats = |w: &World| -> Value {
        let ev = w.cli(&["events", "--stats", id]);
        assert_eq!(ev.status, 0, "events --stats: {ev:?}");
        serde_json::from_str(ev.stdout.trim()).expect("events json")
    };
    // Both sleepers forked: the count rises to 3 and stays there.
    let deadline = Instant::now() + TIMEOUT;
    let mut ev = stats(&w);
    while ev["data"]["pids"]["current"] != 3 {
        assert!(Instant::now() < deadline, "never 3 tasks: {ev}");
        std::thread::sleep(Duration::from_millis(50));
        ev = stats(&w);
    }
    std::thread::sleep(Duration::from_millis(500));
    let ev = stats(&w);
    assert_eq!(ev["type"], "stats", "{ev}");
    assert_eq!(ev["data"]["pids"]["current"], 3, "{ev}");
    if host_cgroups() {
        // The container's limit, as the guest counts against it.
        assert_eq!(ev["data"]["pids"]["limit"], 40, "{ev}");
        // Paused, the Sentry cannot answer: the host's figure stands in,
        // and events does not hang. The host's count is of other things:
        // more than the guest's.
        assert_eq!(w.cli(&["pause", id]).status, 0);
        let pid = w.state(id)["pid"].as_i64().expect("pid");
        let host: u64 = read_trim(&cgroup_dir(pid, "pids").join("pids.current"))
            .parse()
            .expect("pids.current");
        assert!(host > 3, "host pids.current {host}");
        let ev = stats(&w);
        assert_eq!(ev["data"]["pids"]["current"], host, "{ev}");
        assert_eq!(w.cli(&["resume", id]).status, 0);
    }
    assert_eq!(w.cli(&["kill", id, "KILL"]).status, 0);
    assert_eq!(w.wait(id), 128 + 9);
    assert_eq!(w.cli(&["delete", id]).status, 0);
}

/// `ps` lists the container's processes in `ps -ef`'s columns, as runc's
/// does: the same users, commands and parent links (the guest's PIDs are
/// its own, runc's the host's); `--format json` gives the sandbox's host
/// PIDs, the sandbox's own first.
#[test]
fn ps_lists_the_containers_processes_as_runc() {
    let script = "sleep 1000 & sleep 2000 & echo up; wait";
    let mut w = World::new("ps", |v| set_args(v, &["sh", "-c", script]));
    // (names come from the image's passwd here, the host's under runc)
    let etc = PathBuf::from(w.bundle_str()).join("rootfs/etc");
    std::fs::create_dir_all(&etc).expect("mkdir etc");
    std::fs::write(etc.join("passwd"), "root:x:0:0:root:/root:/bin/sh\n").expect("passwd");
    // (user, command, parent's command) of each line, sorted.
    let rows = |table: &str| -> Vec<(String, String, String)> {
        let mut lines = table.lines();
        let header = lines.next().unwrap_or_default();
        assert!(
            header
                .split_whitespace()
                .eq(["UID", "PID", "PPID", "C", "STIME", "TTY", "TIME", "CMD"]),
            "{table}"
        );
        let procs: Vec<(String, String, String, String)> = lines
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                assert!(f.len() >= 8, "{table}");
                let cmd = f[7..].join(" ");
                (f[0].to_string(), f[1].to_string(), f[2].to_string(), cmd)
            })
            .collect();
        let mut out: Vec<_> = procs
            .iter()
            .map(|(user, _, ppid, cmd)| {
                let parent = procs.iter().find(|p| &p.1 == ppid).map_or("", |p| &p.3);
                (user.clone(), cmd.clone(), parent.to_string())
            })
            .collect();
        out.sort();
        out
    };
    let want = vec![
        ("root".to_string(), format!("sh -c {script}"), String::new()),
        (
            "root".into(),
            "sleep 1000".into(),
            format!("sh -c {script}"),
        ),
        (
            "root".into(),
            "sleep 2000".into(),
            format!("sh -c {script}"),
        ),
    ];
    for (i, bin) in runtimes("ps_lists_the_containers_processes_as_runc")
        .iter()
        .enumerate()
    {
        let id = format!("ps{i}");
        w.started_output(bin, &id, "up\n");
        // (the sleeps are forked as `up` is printed, and each is a copy of
        // the shell until its execve)
        let deadline = Instant::now() + Duration::from_secs(10);
        let table = loop {
            let t = w.cli_of(bin, &["ps", &id]);
            assert_eq!(t.status, 0, "{bin}: {t:?}");
            if rows(&t.stdout) == want || Instant::now() > deadline {
                break t.stdout;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(rows(&table), want, "{bin}:\n{table}");
        let json = w.cli_of(bin, &["ps", "--format", "json", &id]);
        let pids: Vec<i64> = serde_json::from_str(&json.stdout).expect("ps json");
        assert_eq!(
            pids.first(),
            w.state_of(bin, &id)["pid"].as_i64().as_ref(),
            "{bin}"
        );
        assert_eq!(w.cli_of(bin, &["delete", "--force", &id]).status, 0);
    }
    // Only ps -ef's columns are shown for the guest: other options, and
    // options with json, are one line each.
    let id = "ps-opts";
    w.started_output(FERROVISOR, id, "up\n");
    assert_eq!(w.cli(&["ps", id, "--", "-e", "-f"]).status, 0);
    for args in [
        &["ps", id, "--", "--no-such-option"][..],
        &["ps", id, "--", "-o", "comm"][..],
        &["ps", "--format", "json", id, "--", "-ef"][..],
    ] {
        let out = w.cli(args);
        assert_one_line(&out);
    }
    assert_eq!(w.cli(&["delete", "--force", id]).status, 0);
}

// ---- --network host: the container's network namespace ----------------

/// Named network namespaces (`ip netns add`), deleted on drop, so that a
/// failing test leaves nothing behind on the machine.
struct NamedNetns(Vec<String>);

impl Drop for NamedNetns {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = Command::new("ip")
                .args(["netns", "del", name])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A child process killed (and reaped) on drop.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An HTTP server on port 8080 answering every GET with a line naming the
/// client's address, then 64 KiB of a fixed pattern; it logs each client's
/// address to `argv[1]` and prints "ready" once listening.
const NETNS_SERVER: &str = r#"
import http.server, sys
log = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(log, "a") as f:
            f.write(self.client_address[0] + "\n")
        body = ("you are %s\n" % self.client_address[0]).encode() + b"0123456789abcdef" * 4096
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("0.0.0.0", 8080), H)
print("ready", flush=True)
s.serve_forever()
"#;

/// Two named network namespaces joined by a veth pair: the container's
/// (`.1`) and the server's (`.2`, running [`NETNS_SERVER`]). The host's own
/// namespace has no route to either address.
struct NetnsPair {
    /// the server, killed before the namespaces go
    _server: KillOnDrop,
    _netns: NamedNetns,
    /// `/run/netns/NAME` of the container's namespace
    container_ns: String,
    client_ip: String,
    server_ip: String,
    log: PathBuf,
}

/// Named network namespaces made for a test, deleted when it is dropped.
fn named_netns(names: &[&String]) -> NamedNetns {
    let mut netns = NamedNetns(Vec::new());
    for name in names {
        ip(&["netns", "add", name]);
        netns.0.push((*name).clone());
    }
    netns
}

/// Runs [`NETNS_SERVER`] in namespace `ns`, logging requests to `log`, and
/// waits until it listens.
fn start_netns_server(ns: &str, log: &Path) -> KillOnDrop {
    std::fs::write(log, "").expect("server log");
    let mut child = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "/usr/bin/python3",
            "-I",
            "-c",
            NETNS_SERVER,
        ])
        .arg(log)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the server");
    let mut stdout = child.stdout.take().expect("server stdout");
    let server = KillOnDrop(child);
    let mut ready = [0u8; 6];
    stdout
        .read_exact(&mut ready)
        .expect("the server says it is ready");
    assert_eq!(&ready, b"ready\n");
    server
}

fn netns_pair(dir: &Path, tag: &str) -> NetnsPair {
    let base = format!("fv-oci-{}-{tag}", std::process::id());
    let (c, s) = (format!("{base}-c"), format!("{base}-s"));
    let netns = named_netns(&[&c, &s]);
    let subnet = format!("10.77.{}", std::process::id() % 250);
    let (client_ip, server_ip) = (format!("{subnet}.1"), format!("{subnet}.2"));
    ip(&[
        "-n", &c, "link", "add", "fvc0", "type", "veth", "peer", "name", "fvs0", "netns", &s,
    ]);
    for (ns, dev, addr) in [(&c, "fvc0", &client_ip), (&s, "fvs0", &server_ip)] {
        ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev]);
        ip(&["-n", ns, "link", "set", dev, "up"]);
        ip(&["-n", ns, "link", "set", "lo", "up"]);
    }
    let log = dir.join(format!("{tag}-server.log"));
    let server = start_netns_server(&s, &log);
    NetnsPair {
        _server: server,
        _netns: netns,
        container_ns: format!("/run/netns/{c}"),
        client_ip,
        server_ip,
        log,
    }
}

fn expected_body(client_ip: &str) -> String {
    format!("you are {client_ip}\n{}", "0123456789abcdef".repeat(4096))
}

/// The container printed the whole body the server in `net` sent, naming
/// the container's namespace as the client.
fn assert_got_the_body(out: &Outcome, net: &NetnsPair) {
    assert!(
        out.stdout == expected_body(&net.client_ip),
        "the body, as the server sent it, naming {} as the client: got {} bytes: {:?}",
        net.client_ip,
        out.stdout.len(),
        out.stdout.lines().next()
    );
}

#[test]
fn network_host_uses_the_network_namespace_config_json_names() {
    let mut w = World::new("netns-host", |_| {});
    let net = netns_pair(w.dir.path(), "host");
    let url = format!("http://{}:8080/", net.server_ip);
    let ns_path = net.container_ns.clone();
    w.edit_config(|v| {
        set_args(v, &["/bin/busybox", "wget", "-q", "-O", "-", &url]);
        let nss = v["linux"]["namespaces"].as_array_mut().expect("namespaces");
        let netns = nss
            .iter_mut()
            .find(|n| n["type"] == "network")
            .expect("a network entry");
        netns["path"] = ns_path.into();
    });
    let bundle = w.bundle_str();

    // With --network host the guest's connection leaves from the
    // namespace's own address, over its veth, and the bytes arrive intact.
    w.ids.push("nh1".into());
    let out = w.cli(&["--network", "host", "run", "--bundle", &bundle, "nh1"]);
    assert_eq!(out.status, 0, "run --network host: {out:?}");
    assert_got_the_body(&out, &net);
    let log = std::fs::read_to_string(&net.log).expect("server log");
    assert_eq!(
        log,
        format!("{}\n", net.client_ip),
        "one request, from the namespace"
    );

    // Nothing extra on stdout for the engine to parse: the warning is in
    // the log (stderr here, there being no --log).
    assert!(out.stderr.contains("--network host"), "{out:?}");

    // The same bundle without --network host (the default, and --network
    // none): loopback only, the connection is refused at once and nothing
    // reaches the server.
    for (id, global) in [("nh2", None), ("nh3", Some("none"))] {
        w.ids.push(id.into());
        let mut args = Vec::new();
        if let Some(mode) = global {
            args.extend(["--network", mode]);
        }
        args.extend(["run", "--bundle", &bundle, id]);
        let out = w.cli(&args);
        assert_ne!(out.status, 0, "{id}: the connection should fail: {out:?}");
        assert_eq!(out.stdout, "", "{id}: {out:?}");
        let why = out.stderr.to_lowercase();
        assert!(
            why.contains("unreachable") || why.contains("refused"),
            "{id}: ENETUNREACH or ECONNREFUSED: {out:?}"
        );
        let log = std::fs::read_to_string(&net.log).expect("server log");
        assert_eq!(log.lines().count(), 1, "{id}: the server saw nothing new");
    }

    // What the guest lists of its network is that namespace's too: its
    // veth and address, none of the host's interfaces.
    w.edit_config(|v| set_args(v, &["/bin/busybox", "ip", "-o", "-4", "addr"]));
    w.ids.push("nh4".into());
    let out = w.cli(&["--network", "host", "run", "--bundle", &bundle, "nh4"]);
    assert_eq!(out.status, 0, "run --network host: {out:?}");
    let names: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(names, ["lo", "fvc0"], "{out:?}");
    assert!(
        out.stdout
            .contains(&format!("inet {}/24 scope global fvc0", net.client_ip)),
        "{out:?}"
    );
}

#[test]
fn network_host_without_a_path_gets_a_fresh_namespace_with_loopback() {
    // The template asks for a new network namespace: under --network host
    // the guest's sockets are host sockets there. A guest server on
    // 127.0.0.1 is reached from that namespace (lo is up), that namespace
    // is not the host's, and the server of another namespace is out of
    // reach.
    let mut w = World::new("netns-fresh", |_| {});
    let net = netns_pair(w.dir.path(), "fresh");
    let url = format!("http://{}:8080/", net.server_ip);
    std::fs::create_dir_all(w.bundle().join("rootfs/www")).expect("mkdir www");
    std::fs::write(w.bundle().join("rootfs/www/x"), "served on loopback\n").expect("write");
    let script = format!(
        "/bin/busybox wget -q -O - {url} || echo server unreachable; \
         exec /bin/busybox httpd -f -p 127.0.0.1:8000 -h /www"
    );
    w.edit_config(|v| set_args(v, &["sh", "-c", &script]));
    let out = w.create_with(&["--network", "host"], "nf1");
    assert_eq!(out.status, 0, "create: {out:?}");
    let out = w.cli(&["start", "nf1"]);
    assert_eq!(out.status, 0, "start: {out:?}");
    let pid = w.state("nf1")["pid"].as_i64().expect("pid");
    let ns = format!("/proc/{pid}/ns/net");
    let theirs = std::fs::metadata(&ns).expect("the sandbox's netns").ino();
    let ours = std::fs::metadata("/proc/self/ns/net")
        .expect("our netns")
        .ino();
    assert_ne!(
        theirs, ours,
        "the container is not in the host's network namespace"
    );

    // From inside that namespace (and only there) the guest's listener
    // answers (within seconds: the guest has nothing else to do).
    let deadline = Instant::now() + Duration::from_secs(30);
    let fetched = loop {
        let out = Command::new("nsenter")
            .arg(format!("--net={ns}"))
            .args(["busybox", "wget", "-q", "-O", "-"])
            .arg("http://127.0.0.1:8000/x")
            .stdin(Stdio::null())
            .output()
            .expect("nsenter");
        if out.status.success() || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        String::from_utf8_lossy(&fetched.stdout),
        "served on loopback\n",
        "{}",
        String::from_utf8_lossy(&fetched.stderr)
    );
    let out = w.cli(&["kill", "nf1", "KILL"]);
    assert_eq!(out.status, 0, "kill: {out:?}");
    let _ = w.wait("nf1");
    assert_eq!(w.container_stdout("nf1"), "server unreachable\n");
    let log = std::fs::read_to_string(&net.log).expect("server log");
    assert_eq!(log, "", "nothing reached the other namespace's server");
}

#[test]
fn namespace_paths_are_refused_by_field_unless_a_joinable_network() {
    let mut w = World::new("netns-errors", |_| {});
    // Another kind of namespace: the Sentry emulates those itself.
    w.edit_config(|v| v["linux"]["namespaces"][0]["path"] = "/proc/1/ns/pid".into());
    let out = w.create("ne1");
    assert_one_line(&out);
    assert!(out.stderr.contains("linux.namespaces[0].path"), "{out:?}");

    // A network namespace that does not exist.
    w.edit_config(|v| {
        v["linux"]["namespaces"][0]
            .as_object_mut()
            .expect("entry")
            .remove("path");
        v["linux"]["namespaces"][1]["path"] = "/run/netns/fv-oci-no-such-namespace".into();
    });
    for global in [&[][..], &["--network", "host"][..]] {
        let mut args = global.to_vec();
        let bundle = w.bundle_str();
        args.extend(["run", "--bundle", &bundle, "ne2"]);
        w.ids.push("ne2".into());
        let out = w.cli(&args);
        assert_one_line(&out);
        assert!(out.stderr.contains("linux.namespaces[1].path"), "{out:?}");
        assert!(out.stderr.contains("fv-oci-no-such-namespace"), "{out:?}");
    }

    // A namespace file of another kind where a network one belongs: the
    // boot process's setns refuses it, and the message still names the
    // field.
    w.edit_config(|v| v["linux"]["namespaces"][1]["path"] = "/proc/self/ns/uts".into());
    let out = w.create("ne3");
    assert_one_line(&out);
    assert!(out.stderr.contains("linux.namespaces[1].path"), "{out:?}");
    assert!(out.stderr.contains("not a network namespace"), "{out:?}");
    // Nothing was left behind by the failed creates.
    assert_eq!(w.cli(&["list", "-q"]).stdout, "");
}

/// A Kubernetes pod's app container names its pause container's UTS and
/// IPC namespaces by path (CRI leaves `hostname` out then): it runs, with
/// the pod's hostname, and the log says the IPC namespace is not shared.
/// A hostname beside a joined UTS namespace, a UTS path that is another
/// kind of namespace, and a shared process namespace (a pod's
/// shareProcessNamespace) are each refused in one line naming the field.
#[test]
fn pod_containers_name_the_pods_uts_and_ipc_namespaces() {
    use std::io::BufRead;
    let mut w = World::new("pod-ns", |_| {});
    // The pod's namespaces, held by a process of the test's own (killed at
    // the end); its hostname is set inside its new UTS namespace only.
    let mut holder = Command::new("unshare")
        .args(["--uts", "--ipc", "sh", "-c"])
        .arg("hostname pod-fv-7 && echo up && exec sleep 600")
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the namespace holder");
    let mut up = String::new();
    std::io::BufReader::new(holder.stdout.take().expect("stdout"))
        .read_line(&mut up)
        .expect("holder's line");
    assert_eq!(up, "up\n");
    let pid = holder.id();
    let join = |v: &mut Value, pid_path: bool| {
        set_args(v, &["/bin/busybox", "hostname"]);
        v.as_object_mut().expect("config").remove("hostname");
        let nss = v["linux"]["namespaces"].as_array_mut().expect("namespaces");
        nss.retain(|n| !["uts", "ipc", "pid"].contains(&n["type"].as_str().unwrap_or("")));
        for kind in ["uts", "ipc"] {
            nss.push(serde_json::json!({"type": kind, "path": format!("/proc/{pid}/ns/{kind}")}));
        }
        if pid_path {
            nss.push(serde_json::json!({"type": "pid", "path": format!("/proc/{pid}/ns/pid")}));
        } else {
            nss.push(serde_json::json!({"type": "pid"}));
        }
    };
    w.edit_config(|v| join(v, false));
    let bundle = w.bundle_str();
    w.ids.push("pod1".into());
    let out = w.cli(&["run", "--bundle", &bundle, "pod1"]);
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(out.stdout, "pod-fv-7\n", "{out:?}");
    assert!(
        out.stderr.contains("is not shared"),
        "the IPC note: {out:?}"
    );

    w.edit_config(|v| v["hostname"] = "mine".into());
    let out = w.create("pod2");
    assert_one_line(&out);
    assert!(out.stderr.contains("hostname"), "{out:?}");

    w.edit_config(|v| {
        v.as_object_mut().expect("config").remove("hostname");
        let nss = v["linux"]["namespaces"].as_array_mut().expect("namespaces");
        let uts = nss
            .iter_mut()
            .find(|n| n["type"] == "uts")
            .expect("uts entry");
        uts["path"] = format!("/proc/{pid}/ns/ipc").into();
    });
    let out = w.create("pod3");
    assert_one_line(&out);
    assert!(out.stderr.contains("not a UTS namespace"), "{out:?}");

    w.edit_config(|v| join(v, true));
    let out = w.create("pod4");
    assert_one_line(&out);
    assert!(out.stderr.contains("shareProcessNamespace"), "{out:?}");

    let _ = holder.kill();
    let _ = holder.wait();
}

// ---- --network sandbox: egress rules as global flags -------------------

/// A bundle whose `linux.namespaces` network entry names `ns`, running
/// `args`.
fn in_netns(w: &World, ns: &str, args: &[&str]) {
    let ns = ns.to_owned();
    w.edit_config(|v| {
        set_args(v, args);
        let nss = v["linux"]["namespaces"].as_array_mut().expect("namespaces");
        let netns = nss
            .iter_mut()
            .find(|n| n["type"] == "network")
            .expect("a network entry");
        netns["path"] = ns.into();
    });
}

#[test]
fn network_sandbox_reaches_only_what_the_rules_allow() {
    let mut w = World::new("netns-sandbox", |_| {});
    let net = netns_pair(w.dir.path(), "sbx");
    let url = format!("http://{}:8080/", net.server_ip);
    in_netns(
        &w,
        &net.container_ns,
        &["/bin/busybox", "wget", "-q", "-O", "-", &url],
    );
    let bundle = w.bundle_str();
    let allowed = format!("{}/32:8080", net.server_ip);

    // The rule for the server's port: the Sentry's relay connects from the
    // container's namespace (the server names its address), and the bytes
    // arrive intact.
    w.ids.push("sb1".into());
    let out = w.cli(&[
        "--network",
        "sandbox",
        "--allow-cidr",
        &allowed,
        "run",
        "--bundle",
        &bundle,
        "sb1",
    ]);
    assert_eq!(out.status, 0, "run --allow-cidr {allowed}: {out:?}");
    assert_got_the_body(&out, &net);
    let log = std::fs::read_to_string(&net.log).expect("server log");
    assert_eq!(log, format!("{}\n", net.client_ip), "one request");

    // A rule for another port (which implies --network sandbox), and
    // --network sandbox without rules: refused at once (ECONNREFUSED),
    // one line naming the destination, and the server sees nothing.
    let other_port = format!("{}/32:9999", net.server_ip);
    let cases: [(&str, &[&str]); 2] = [
        ("sb2", &["--allow-cidr", &other_port]),
        ("sb3", &["--network", "sandbox"]),
    ];
    for (id, global) in cases {
        w.ids.push(id.into());
        let mut args = global.to_vec();
        args.extend(["run", "--bundle", &bundle, id]);
        let out = w.cli(&args);
        assert_ne!(out.status, 0, "{id}: the connection should fail: {out:?}");
        assert_eq!(out.stdout, "", "{id}: {out:?}");
        assert!(
            out.stderr.contains("Connection refused"),
            "{id}: ECONNREFUSED: {out:?}"
        );
        assert_eq!(
            out.stderr
                .matches(&format!(
                    "ferrovisor: egress to {}:8080 refused",
                    net.server_ip
                ))
                .count(),
            1,
            "{id}: {out:?}"
        );
        let log = std::fs::read_to_string(&net.log).expect("server log");
        assert_eq!(log.lines().count(), 1, "{id}: the server saw nothing new");
    }

    // The container's own address is the guest's (the netstack's) under
    // a wide rule too: a connection there stays inside the sandbox, where
    // nothing listens, and nothing leaves it (no egress line, the server
    // untouched). The host's own addresses stay closed unless a rule names
    // them (the refusal goes to the log file too).
    let log_file = w.dir.path().join("runtime.log");
    let log_str = log_file.to_string_lossy().into_owned();
    let mut targets = vec![format!("http://{}:8080/", net.client_ip)];
    let host = host_address();
    if let Some(h) = &host {
        targets.push(format!("http://{h}:8080/"));
    } else {
        eprintln!("no address of the host's own: that part of sb4 is skipped");
    }
    for (i, url) in targets.iter().enumerate() {
        let id = format!("sb4-{i}");
        in_netns(
            &w,
            &net.container_ns,
            &["/bin/busybox", "wget", "-q", "-O", "-", url],
        );
        w.ids.push(id.clone());
        let out = w.cli(&[
            "--log",
            &log_str,
            "--allow-cidr",
            "0.0.0.0/0",
            "run",
            "--bundle",
            &bundle,
            &id,
        ]);
        assert_ne!(out.status, 0, "{id}: {out:?}");
        assert!(out.stderr.contains("Connection refused"), "{id}: {out:?}");
        match (i, &host) {
            (0, _) => assert!(!out.stderr.contains("egress to"), "{id}: {out:?}"),
            (_, Some(h)) => {
                assert!(
                    out.stderr.contains(&format!(
                        "egress to {h}:8080 refused: the host's own address"
                    )),
                    "{id}: {out:?}"
                );
                let logged = std::fs::read_to_string(&log_file).expect("runtime log");
                assert!(
                    logged.contains("egress: refused") && logged.contains(h.as_str()),
                    "the runtime's log names the refusal: {logged}"
                );
            }
            _ => {}
        }
        let log = std::fs::read_to_string(&net.log).expect("server log");
        assert_eq!(log.lines().count(), 1, "{id}: the server saw nothing new");
    }

    // What the container lists is the container's interface, whose
    // address the netstack owns, not the default link `do` has.
    in_netns(
        &w,
        &net.container_ns,
        &[
            "/bin/busybox",
            "sh",
            "-c",
            "busybox ip -4 addr; busybox ip route; cat /proc/net/route",
        ],
    );
    w.ids.push("sb5".into());
    let out = w.cli(&["--network", "sandbox", "run", "--bundle", &bundle, "sb5"]);
    assert_eq!(out.status, 0, "sb5: {out:?}");
    for want in [
        "inet 127.0.0.1/8 scope host lo".to_string(),
        format!("inet {}/24 scope global fvc0", net.client_ip),
        "dev fvc0 scope link".to_string(),
        format!("src {}", net.client_ip),
        "fvc0\t".to_string(),
    ] {
        assert!(out.stdout.contains(&want), "sb5: no {want:?}: {out:?}");
    }
    assert!(!out.stdout.contains("10.0.2.15"), "sb5: {out:?}");
}

/// One of the host's own addresses: the source of its route out, if it
/// has one.
fn host_address() -> Option<String> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then(|| ip.to_string())
}

/// What [`network_sandbox_takes_the_container_interface_and_routes`] runs,
/// natively in the namespace and in the sandbox: what `ip` lists of the
/// interface and the routes, route lookups, the interface's MTU and MAC,
/// and sockets on its address (a listener there reached from the same
/// program, a connection out through the gateway and what the server saw).
const LINK_SCRIPT: &str = r#"PATH=/usr/sbin:/usr/bin:/sbin:/bin
ip -4 addr show dev fvl0 | grep inet
ip -6 addr show dev fvl0 scope global | grep inet6
echo --; ip -4 route; echo --; ip -6 route | grep -v ^fe80; echo --
ip route get 198.51.100.7; ip route get 192.0.2.77; ip route get 192.0.2.10
ip -6 route get 2001:db8::77
echo --; cat /sys/class/net/fvl0/mtu /sys/class/net/fvl0/address
python3 -I -c '
import errno, socket
s = socket.socket()
s.bind(("192.0.2.10", 0))
s.listen(1)
c = socket.create_connection(s.getsockname(), timeout=20)
a, peer = s.accept()
print("bound", s.getsockname()[0], "peer", peer[0], "client", c.getsockname()[0])
for addr in ("10.0.2.15", "192.0.2.11"):
    try:
        socket.socket().bind((addr, 0))
        print("bound", addr)
    except OSError as e:
        print(addr, errno.errorcode[e.errno])
o = socket.create_connection(("192.0.2.1", 8080), timeout=20)
print("sockname", o.getsockname()[0])
o.sendall(b"GET / HTTP/1.0\r\n\r\n")
d = b""
while True:
    x = o.recv(65536)
    if not x:
        break
    d += x
print(d.split(b"\r\n\r\n", 1)[1].split(b"\n")[0].decode())
'
"#;

/// In `--network sandbox` the guest's link out is the interface the engine
/// put in the container's network namespace: `ip addr`, `ip route` and `ip
/// route get` inside show its addresses and routes (its default route
/// through the gateway too) as the native `ip` in that namespace does, with
/// its name, MTU and MAC, and its address is the netstack's own: a socket
/// binds and listens there, and a connection out through the relay shows it
/// as its local address, as the server sees it. Everything lives in two
/// named namespaces joined by a veth; nothing is set up on the host.
#[test]
fn network_sandbox_takes_the_container_interface_and_routes() {
    let mut w = World::new("netns-link", |v| v["root"]["path"] = "/".into());
    let base = format!("fv-oci-{}-lk", std::process::id());
    let (c, g) = (format!("{base}-c"), format!("{base}-g"));
    let _netns = named_netns(&[&c, &g]);
    ip(&[
        "-n", &c, "link", "add", "fvl0", "type", "veth", "peer", "name", "fvg0", "netns", &g,
    ]);
    ip(&["-n", &c, "link", "set", "fvl0", "mtu", "1400"]);
    ip(&["-n", &c, "addr", "add", "192.0.2.10/24", "dev", "fvl0"]);
    ip(&[
        "-n",
        &c,
        "addr",
        "add",
        "2001:db8::10/64",
        "dev",
        "fvl0",
        "nodad",
    ]);
    ip(&["-n", &g, "addr", "add", "192.0.2.1/24", "dev", "fvg0"]);
    ip(&[
        "-n",
        &g,
        "addr",
        "add",
        "2001:db8::1/64",
        "dev",
        "fvg0",
        "nodad",
    ]);
    for (ns, dev) in [(&c, "fvl0"), (&g, "fvg0")] {
        ip(&["-n", ns, "link", "set", dev, "up"]);
        ip(&["-n", ns, "link", "set", "lo", "up"]);
    }
    ip(&["-n", &c, "route", "add", "default", "via", "192.0.2.1"]);
    ip(&[
        "-n",
        &c,
        "-6",
        "route",
        "add",
        "default",
        "via",
        "2001:db8::1",
    ]);
    let log = w.dir.path().join("gateway.log");
    let _server = start_netns_server(&g, &log);

    let native = run(
        {
            let mut cmd = Command::new("ip");
            cmd.args(["netns", "exec", &c, "sh", "-c", LINK_SCRIPT])
                .stdin(Stdio::null());
            cmd
        },
        None,
        TIMEOUT,
    );
    assert_eq!(native.status, 0, "natively: {native:?}");
    for want in [
        "    inet 192.0.2.10/24 scope global fvl0\n",
        "    inet6 2001:db8::10/64 scope global nodad",
        "default via 192.0.2.1 dev fvl0 \n192.0.2.0/24 dev fvl0 proto kernel scope link src 192.0.2.10 \n",
        "198.51.100.7 via 192.0.2.1 dev fvl0 src 192.0.2.10 uid 0",
        "\n1400\n",
        "bound 192.0.2.10 peer 192.0.2.10 client 192.0.2.10\n10.0.2.15 EADDRNOTAVAIL\n",
        "sockname 192.0.2.10\nyou are 192.0.2.10\n",
    ] {
        assert!(native.stdout.contains(want), "natively, no {want:?}: {native:?}");
    }

    in_netns(
        &w,
        &format!("/run/netns/{c}"),
        &["/bin/sh", "-c", LINK_SCRIPT],
    );
    w.ids.push("lk1".into());
    let bundle = w.bundle_str();
    let out = w.cli(&[
        "--network",
        "sandbox",
        "--allow-cidr",
        "192.0.2.1/32:8080",
        "run",
        "--bundle",
        &bundle,
        "lk1",
    ]);
    assert_eq!(out.status, 0, "lk1: {out:?}");
    assert_eq!(out.stdout, native.stdout, "lk1: the sandbox against native");
    let seen = std::fs::read_to_string(&log).expect("server log");
    assert_eq!(seen, "192.0.2.10\n192.0.2.10\n", "natively, then the relay");

    // Without a rule the same connection is refused at once; the guest
    // still sees (and owns) the container's address.
    w.ids.push("lk2".into());
    let out = w.cli(&["--network", "sandbox", "run", "--bundle", &bundle, "lk2"]);
    assert_ne!(out.status, 0, "lk2: {out:?}");
    assert!(
        out.stdout.contains("bound 192.0.2.10 peer 192.0.2.10"),
        "lk2: {out:?}"
    );
    assert!(
        out.stderr.contains("egress to 192.0.2.1:8080 refused"),
        "lk2: {out:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&log)
            .expect("server log")
            .lines()
            .count(),
        2,
        "lk2: the server saw nothing new"
    );
}

#[test]
fn network_sandbox_allow_host_resolves_through_the_sentry() {
    // The Sentry's DNS server asks the host's resolver (here: a private
    // mount namespace's /etc/hosts) from the confined Sentry; the guest
    // resolves the allowed name and nothing else. The rootfs is the host's
    // (read-only), for Python's resolver and HTTP client.
    let mut w = World::new("netns-dns", |v| v["root"]["path"] = "/".into());
    let net = netns_pair(w.dir.path(), "dns");
    let script = "import socket, sys, urllib.request\n\
         try: socket.getaddrinfo('other.example.test', 80); print('other resolved')\n\
         except socket.gaierror as e: print('other', e.errno == socket.EAI_NONAME)\n\
         d = urllib.request.urlopen('http://files.example.test:8080/', timeout=20).read()\n\
         sys.stdout.write(d.decode())\n";
    in_netns(
        &w,
        &net.container_ns,
        &["/usr/bin/python3", "-I", "-c", script],
    );
    let hosts = w.dir.path().join("hosts");
    std::fs::write(
        &hosts,
        format!(
            "127.0.0.1 localhost\n{s} files.example.test\n{s} other.example.test\n",
            s = net.server_ip
        ),
    )
    .expect("hosts");
    // The server's address is internal (10.77.0.0/16): a host rule alone
    // would be DNS rebinding; the CIDR rule opens it, the host rule gives
    // the name.
    let rule = format!("{}/32:8080", net.server_ip);
    let wrapper = r#"mount --bind "$1" /etc/hosts && shift && exec "$@""#;
    let mut cmd = common::command("unshare", &[]);
    cmd.args(["-m", "--propagation", "private", "sh", "-c", wrapper, "sh"])
        .arg(&hosts)
        .arg(FERROVISOR)
        .arg("--root")
        .arg(w.state_root())
        .args([
            "--allow-host",
            "files.example.test",
            "--allow-cidr",
            &rule,
            "run",
            "--bundle",
            &w.bundle_str(),
            "dn1",
        ]);
    w.ids.push("dn1".into());
    let out = run(cmd, None, TIMEOUT);
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(
        out.stdout,
        format!("other True\n{}", expected_body(&net.client_ip)),
        "{out:?}"
    );
}

#[test]
fn network_flags_are_checked_in_one_line() {
    let mut w = World::new("netns-flags", |_| {});
    let bundle = w.bundle_str();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--network", "host", "--allow-cidr", "10.0.0.0/8"],
            "--allow-cidr and --allow-host do not apply to --network host",
        ),
        (
            &["--network", "none", "--allow-host", "example.com"],
            "need --network sandbox",
        ),
        (
            &["--allow-cidr", "10.0.0.0/33"],
            "--allow-cidr \"10.0.0.0/33\"",
        ),
        (
            &["--network", "sandbox", "--allow-cidr", "1.2.3.4:0"],
            "port after the network",
        ),
        (
            &["--allow-host", "exa mple.com"],
            "--allow-host \"exa mple.com\": not a domain name",
        ),
        (&["--network", "bridge"], "--network"),
    ];
    for (flags, says) in cases {
        for command in [
            &["run", "--bundle", &bundle, "nf9"][..],
            &["create", "--bundle", &bundle, "nf9"],
        ] {
            w.ids.push("nf9".into());
            let mut args = flags.to_vec();
            args.extend(command);
            let out = w.cli(&args);
            assert_one_line(&out);
            assert!(out.stderr.contains(says), "{args:?}: {out:?}");
        }
    }
    // The runtime's rules before 'do' are refused, not ignored.
    let out = w.cli(&["--allow-cidr", "10.0.0.0/8", "do", "--", "/bin/true"]);
    assert_one_line(&out);
    assert!(out.stderr.contains("give them after 'do'"), "{out:?}");
    assert_eq!(w.cli(&["list", "-q"]).stdout, "", "nothing was created");
}

/// A program that makes a message queue, sends two messages and receives
/// the more urgent one first.
const MQ_USER: &str = r#"
#include <fcntl.h>
#include <mqueue.h>
#include <stdio.h>
int main(int argc, char **argv)
{
	struct mq_attr a = {.mq_maxmsg = 4, .mq_msgsize = 64};
	mqd_t q = mq_open(argv[1], O_CREAT | O_EXCL | O_RDWR, 0600, &a);
	if (q < 0 || mq_send(q, "second", 6, 1) != 0 || mq_send(q, "first", 5, 7) != 0) {
		perror("mq");
		return 1;
	}
	char b[64];
	unsigned p;
	long n = mq_receive(q, b, sizeof b, &p);
	printf("got %.*s %u\n", (int)n, b, p);
	return 0;
}
"#;

/// The `mqueue` mount of a config (Docker adds one at /dev/mqueue): the
/// guest sees the Sentry's mqueue file system there, its queues work, are
/// listed as files whose reading gives the status line, go away with
/// `rm`, and never exist on the host.
#[test]
fn mqueue_mount_serves_the_sandboxs_queues() {
    let name = format!("oci-mq-{}", std::process::id());
    let mut w = World::new("mqueue", |v| {
        set_args(
            v,
            &[
                "sh",
                "-c",
                &format!(
                    "mq_user /{name} && ls /dev/mqueue && cat /dev/mqueue/{name}; \
                     grep ' /dev/mqueue ' /proc/self/mounts | \
                     while read d m t rest; do echo $m $t; done; \
                     rm /dev/mqueue/{name} && ls /dev/mqueue | wc -l"
                ),
            ],
        );
        let mounts = v["mounts"].as_array_mut().expect("mounts");
        if !mounts.iter().any(|m| m["type"] == "mqueue") {
            mounts.push(serde_json::json!({
                "destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
                "options": ["nosuid", "noexec", "nodev"]
            }));
        }
    });
    let bin = common::compile_static(w.dir.path(), "mq_user", MQ_USER);
    std::fs::copy(&bin, w.bundle().join("rootfs/bin/mq_user")).expect("copy mq_user");
    assert_eq!(w.create("mq1").status, 0, "{}", w.container_stderr("mq1"));
    assert_eq!(w.cli(&["start", "mq1"]).status, 0);
    assert_eq!(w.wait("mq1"), 0, "{}", w.container_stderr("mq1"));
    let out = w.container_stdout("mq1");
    let lines: Vec<&str> = out.lines().map(str::trim_end).collect();
    assert_eq!(
        lines,
        [
            "got first 7",
            name.as_str(),
            "QSIZE:6          NOTIFY:0     SIGNO:0     NOTIFY_PID:0",
            "/dev/mqueue mqueue",
            "0",
        ],
        "{out}"
    );
    // The queue was the Sentry's: the host never had one by that name.
    let cname = std::ffi::CString::new(format!("/{name}")).expect("name");
    // SAFETY: `cname` is a valid C string; the call only looks the name up.
    let q = unsafe { libc::mq_open(cname.as_ptr(), libc::O_RDONLY) };
    assert_eq!(q, -1, "the queue exists on the host");
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::ENOENT)
    );
}

/// Runs each command of a shell script's `r LABEL CMD...` lines and prints
/// `LABEL rc=N OUTPUT` (output and errors on one line).
const REPORT_FN: &str = "r() { l=$1; shift; o=$(\"$@\" 2>&1); c=$?; echo \"$l rc=$c\" $o; }; ";

/// The line of `out` that starts with `label `.
fn line_of<'a>(out: &'a str, label: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(&format!("{label} ")))
        .unwrap_or_else(|| panic!("no line {label}: {out}"))
}

/// `linux.maskedPaths` and `linux.readonlyPaths` as runc applies them: a
/// masked directory is empty and read-only, a masked file reads as the
/// null device, a path that is not there is skipped; below a read-only
/// path every change is `EROFS` while the rest of its mount stays
/// writable; in the root, in a volume and in the Sentry's /proc and /sys
/// alike, and no guest can unmount any of it.
#[test]
fn masked_and_read_only_paths_hold_like_runc() {
    let host = TempDir::new("mask-volume");
    for d in ["ro", "rw"] {
        std::fs::create_dir(host.path().join(d)).expect("mkdir");
    }
    std::fs::write(host.path().join("ro/f"), "old\n").expect("write");
    std::fs::write(host.path().join("hidden"), "volume secret\n").expect("write");
    let src = host.path().to_string_lossy().into_owned();
    let w = World::new("masks", |v| {
        let script = String::from(REPORT_FN)
            + "r secret-dir busybox ls -A /srv/secret; \
               r secret-file cat /srv/secret/inner; \
               r secret-create touch /srv/secret/new; \
               r secret-stat stat -c '%A %F' /srv/secret; \
               r token cat /etc/token; \
               r token-stat stat -c '%F %t,%T' /etc/token; \
               r token-write sh -c 'echo x > /etc/token'; \
               r token-after cat /etc/token; \
               r loadavg cat /proc/loadavg; \
               r sys-mm busybox ls -A /sys/kernel/mm; \
               r kcore cat /proc/kcore; \
               r vol-hidden cat /vol/hidden; \
               r ro-read cat /srv/ro/f; \
               r ro-write sh -c 'echo new > /srv/ro/f'; \
               r ro-create touch /srv/ro/g; \
               r ro-rm busybox rm /srv/ro/f; \
               r ro-mkdir busybox mkdir /srv/ro/d; \
               r ro-chmod busybox chmod 600 /srv/ro/f; \
               r rw-root touch /srv/rw; \
               r ro-link busybox ln /srv/ro/f /srv/l; \
               r vol-ro-write sh -c 'echo v > /vol/ro/x'; \
               r vol-ro-rm busybox rm /vol/ro/f; \
               r vol-rw-write sh -c 'echo v > /vol/rw/x'; \
               r vol-ro-move busybox mv /vol/ro /vol/moved; \
               r data-ro touch /data/x; \
               r scratch-rw touch /scratch/x; \
               r proc-sys sh -c 'echo 1 > /proc/sys/kernel/shmmax'; \
               r umount-ro busybox umount /srv/ro; \
               r umount-mask busybox umount /etc/token; \
               r rmdir-mask busybox rmdir /srv/secret; \
               r rm-mask busybox rm /etc/token; \
               r mounts busybox grep -E ' /(srv/ro|srv/secret|etc/token|data|proc/sys) ' /proc/self/mounts";
        set_args(v, &["sh", "-c", &script]);
        // (a writable root: what is read-only is so by the paths alone)
        v["root"]["readonly"] = false.into();
        let mounts = v["mounts"].as_array_mut().expect("mounts");
        mounts.push(serde_json::json!({"destination": "/vol", "type": "bind",
            "source": src, "options": ["rbind", "rw"]}));
        for dest in ["/data", "/scratch"] {
            mounts.push(serde_json::json!({"destination": dest, "type": "tmpfs",
                "source": "tmpfs", "options": ["size=1m"]}));
        }
        v["linux"]["maskedPaths"] = serde_json::json!([
            "/srv/secret",
            "/etc/token",
            "/proc/kcore",
            "/proc/loadavg",
            "/sys/kernel/mm",
            "/sys/firmware",
            "/vol/hidden",
            "/no/such/path"
        ]);
        v["linux"]["readonlyPaths"] =
            serde_json::json!(["/srv/ro", "/vol/ro", "/data", "/proc/sys", "/no/such/dir"]);
    });
    let root = w.bundle().join("rootfs");
    for d in ["srv/secret", "srv/ro", "etc"] {
        std::fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    std::fs::write(root.join("srv/secret/inner"), "hidden\n").expect("write");
    std::fs::write(root.join("etc/token"), "SECRET\n").expect("write");
    std::fs::write(root.join("srv/ro/f"), "old\n").expect("write");
    let out = w.cli(&["run", "--bundle", &w.bundle_str(), "masks1"]);
    assert_eq!(out.status, 0, "{out:?}");
    let o = out.stdout.as_str();
    let expect = |label: &str, want: &str| {
        let l = line_of(o, label);
        assert!(l.contains(want), "{label}: want {want:?}: {l}\n{o}");
    };
    expect("secret-dir", "rc=0");
    assert_eq!(line_of(o, "secret-dir").trim_end(), "secret-dir rc=0");
    expect("secret-file", "No such file or directory");
    expect("secret-create", "Read-only file system");
    // (runc's read-only tmpfs has tmpfs's mode)
    expect("secret-stat", "rc=0 drwxrwxrwt directory");
    expect("token-stat", "rc=0 character special file 1,3");
    assert_eq!(line_of(o, "token").trim_end(), "token rc=0");
    expect("token-stat", "character special file 1,3");
    expect("token-write", "rc=0");
    assert_eq!(line_of(o, "token-after").trim_end(), "token-after rc=0");
    assert_eq!(line_of(o, "loadavg").trim_end(), "loadavg rc=0");
    assert_eq!(line_of(o, "sys-mm").trim_end(), "sys-mm rc=0");
    expect("kcore", "No such file or directory");
    assert_eq!(line_of(o, "vol-hidden").trim_end(), "vol-hidden rc=0");
    expect("ro-read", "rc=0 old");
    for label in [
        "ro-write",
        "ro-create",
        "ro-rm",
        "ro-mkdir",
        "ro-chmod",
        "vol-ro-write",
        "vol-ro-rm",
        "data-ro",
        "proc-sys",
    ] {
        expect(label, "Read-only file system");
    }
    for label in ["rw-root", "vol-rw-write", "scratch-rw"] {
        assert_eq!(line_of(o, label).trim_end(), format!("{label} rc=0"), "{o}");
    }
    // (a read-only path is a mount of its own: no link crosses into it)
    expect("ro-link", "Invalid cross-device link");
    expect("vol-ro-move", "resource busy");
    expect("umount-ro", "Operation not permitted");
    expect("umount-mask", "Operation not permitted");
    expect("rmdir-mask", "resource busy");
    expect("rm-mask", "resource busy");
    // Each shows in the mount table as runc's mount there does: the
    // read-only paths as read-only mounts of what they are on, a masked
    // directory as a read-only tmpfs, a masked file as /dev's null device.
    assert_eq!(
        line_of(o, "mounts").trim_end(),
        "mounts rc=0 tmpfs /data tmpfs rw,nosuid,nodev 0 0 \
         none /srv/ro ferrovisor ro 0 0 \
         tmpfs /data tmpfs ro,nosuid,nodev 0 0 \
         proc /proc/sys proc ro,nosuid,nodev,noexec 0 0 \
         tmpfs /srv/secret tmpfs ro 0 0 \
         tmpfs /etc/token tmpfs rw,nosuid 0 0",
        "{o}"
    );
    // The host saw the writable volume's write, never the read-only one's.
    assert_eq!(
        std::fs::read_to_string(host.path().join("rw/x")).expect("rw/x"),
        "v\n"
    );
    assert!(!host.path().join("ro/x").exists());
    assert_eq!(
        std::fs::read_to_string(host.path().join("ro/f")).expect("ro/f"),
        "old\n"
    );
    assert!(host.path().join("ro").is_dir());
}

/// `process.user.umask` is the first process's, `exec --process` takes its
/// own, a plain `exec` the container's, and /proc shows each.
#[test]
fn umask_of_the_process_is_honoured() {
    let mut w = World::new("umask", |v| {
        writable_root(v);
        set_args(
            v,
            &[
                "sh",
                "-c",
                "umask; touch /tmp/f; stat -c %a /tmp/f; grep Umask /proc/self/status; \
                 exec sleep 1000",
            ],
        );
        v["process"]["user"]["umask"] = 0o077.into();
    });
    assert_eq!(w.create("u1").status, 0, "{}", w.container_stderr("u1"));
    assert_eq!(w.cli(&["start", "u1"]).status, 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    while w.container_stdout("u1").lines().count() < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(w.container_stdout("u1"), "0077\n600\nUmask:\t0077\n");
    let probe = "umask; touch /tmp/$1; stat -c %a /tmp/$1; grep Umask /proc/self/status";
    let out = w.cli(&["exec", "u1", "sh", "-c", probe, "sh", "g"]);
    assert_eq!(out.stdout, "0077\n600\nUmask:\t0077\n", "{out:?}");
    let proc_json = w.dir.path().join("process.json");
    std::fs::write(
        &proc_json,
        serde_json::json!({
            "args": ["sh", "-c", probe, "sh", "h"], "cwd": "/", "env": ["PATH=/bin"],
            "user": {"uid": 0, "gid": 0, "umask": 0o027},
        })
        .to_string(),
    )
    .expect("process.json");
    let out = w.cli(&["exec", "--process", &proc_json.to_string_lossy(), "u1"]);
    assert_eq!(out.stdout, "0027\n640\nUmask:\t0027\n", "{out:?}");
    assert_eq!(w.cli(&["kill", "u1", "KILL"]).status, 0);
}

const MQ_LIMITS: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
static void try(const char *what, const char *name, long maxmsg)
{
	struct mq_attr a = {.mq_maxmsg = maxmsg, .mq_msgsize = 64};
	mqd_t q = mq_open(name, O_CREAT | O_RDWR, 0600, maxmsg ? &a : NULL);
	printf("%s: %s\n", what, q < 0 ? strerror(errno) : "ok");
}
int main(void)
{
	try("maxmsg 15", "/a", 15);
	try("maxmsg 21", "/b", 21);
	try("second queue", "/c", 0);
	/* somaxconn holds the backlog asked for: Linux queues backlog + 1
	 * connections, then a non-blocking connect is refused. */
	struct sockaddr_un sa = {.sun_family = AF_UNIX, .sun_path = "/tmp/l.sock"};
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof sa) || listen(s, 128)) {
		perror("listen");
		return 1;
	}
	int n = 0;
	while (n < 200) {
		int c = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (connect(c, (struct sockaddr *)&sa, sizeof sa))
			break;
		n++;
	}
	printf("connected: %d\n", n);
	/* ip_local_port_range: where a bind to port 0 lands */
	struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof in;
	int t = socket(AF_INET, SOCK_STREAM, 0);
	if (t < 0 || bind(t, (struct sockaddr *)&in, sizeof in) ||
	    getsockname(t, (struct sockaddr *)&in, &len)) {
		perror("bind");
		return 1;
	}
	int port = ntohs(in.sin_port);
	printf("port in range: %s\n", port >= 40000 && port <= 40002 ? "yes" : "no");
	return 0;
}
"#;

/// `linux.sysctl`: the namespaced sysctls the Sentry emulates show in
/// /proc/sys and the message queue limits hold; runc's namespace rules
/// and the ones the Sentry does not emulate are refused by name.
#[test]
fn sysctls_are_applied_or_refused_by_name() {
    let w = World::new("sysctl", |v| {
        writable_root(v);
        set_args(
            v,
            &[
                "sh",
                "-c",
                "mq_limits; cat /proc/sys/fs/mqueue/msg_max /proc/sys/fs/mqueue/queues_max \
                 /proc/sys/kernel/shmmax /proc/sys/kernel/sem /proc/sys/fs/mqueue/msgsize_max \
                 /proc/sys/net/core/somaxconn /proc/sys/net/ipv4/ip_local_port_range \
                 /proc/sys/net/ipv4/tcp_keepalive_time /proc/sys/net/ipv4/tcp_keepalive_probes",
            ],
        );
        // (root may pass the limits: CAP_SYS_RESOURCE)
        v["process"]["user"] = serde_json::json!({"uid": 1000, "gid": 1000});
        v["linux"]["sysctl"] = serde_json::json!({
            "fs.mqueue.msg_max": "20", "fs.mqueue.queues_max": "1",
            "kernel.shmmax": "68719476736", "kernel.sem": "250 32000 100 128",
            "net.ipv4.ip_unprivileged_port_start": "0", "net.core.somaxconn": "2",
            "net.ipv4.ip_local_port_range": "40000 40002",
            "net.ipv4.tcp_keepalive_time": "300", "net.ipv4.tcp_keepalive_probes": "3",
            "net.ipv4.ip_forward": "0", "net.ipv4.ping_group_range": "1 0",
        });
    });
    let bin = common::compile_static(w.dir.path(), "mq_limits", MQ_LIMITS);
    std::fs::copy(&bin, w.bundle().join("rootfs/bin/mq_limits")).expect("copy mq_limits");
    let out = w.cli(&["run", "--bundle", &w.bundle_str(), "sc1"]);
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(
        out.stdout,
        "maxmsg 15: ok\nmaxmsg 21: Invalid argument\nsecond queue: No space left on device\n\
         connected: 3\nport in range: yes\n20\n1\n68719476736\n250\t32000\t100\t128\n8192\n2\n\
         40000\t40002\n300\n3\n",
        "{out:?}"
    );

    for (sysctl, value, named) in [
        ("vm.swappiness", "1", "linux.sysctl.vm.swappiness"),
        (
            "net.core.somaxconn",
            "8192",
            "linux.sysctl.net.core.somaxconn",
        ),
        (
            "net.ipv4.tcp_syncookies",
            "1",
            "linux.sysctl.net.ipv4.tcp_syncookies",
        ),
        ("kernel.hostname", "x", "linux.sysctl.kernel.hostname"),
        (
            "net.ipv4.ip_forward",
            "1",
            "linux.sysctl.net.ipv4.ip_forward",
        ),
        (
            "net.ipv4.ping_group_range",
            "0",
            "linux.sysctl.net.ipv4.ping_group_range",
        ),
        (
            "net.ipv4.tcp_keepalive_probes",
            "256",
            "linux.sysctl.net.ipv4.tcp_keepalive_probes",
        ),
        ("fs.mqueue.msg_max", "0", "linux.sysctl.fs.mqueue.msg_max"),
        (
            "net.ipv4.ip_local_port_range",
            "40002 40000",
            "linux.sysctl.net.ipv4.ip_local_port_range",
        ),
    ] {
        w.edit_config(|v| {
            let mut one = serde_json::Map::new();
            one.insert(sysctl.into(), value.into());
            v["linux"]["sysctl"] = Value::Object(one);
        });
        let out = w.cli(&["run", "--bundle", &w.bundle_str(), "sc2"]);
        assert_one_line(&out);
        assert!(out.stderr.contains(named), "{sysctl}: {out:?}");
    }
}

/// Runs `args` of `w` under `bin`, for a sequence compared with runc's.
fn step(w: &World, bin: &str, args: &[&str]) -> Outcome {
    let out = w.cli_of(bin, args);
    eprintln!("{bin} {args:?}: {} {}", out.status, out.stderr.trim_end());
    out
}

/// The OCI status of `id` under `bin` once it is `want` (or the deadline
/// has passed).
fn status_of(w: &World, bin: &str, id: &str, want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = w.cli_of(bin, &["state", id]);
        let st: Value = serde_json::from_str(&out.stdout).unwrap_or_default();
        let status = st["status"].as_str().unwrap_or("none").to_string();
        if status == want || Instant::now() > deadline {
            return status;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `delete` and `kill` fail where runc's do and succeed where they do:
/// `delete` of a container that does not exist or is running (without
/// `--force`), `kill` of one that does not exist or has stopped (unless
/// `--all`), either with an empty id. The same sequence runs under runc
/// where it is installed, and must give the same statuses.
#[test]
fn delete_and_kill_exit_as_runcs_do() {
    let mut w = World::new("cli-like-runc", |v| set_args(v, &["sleep", "1000"]));
    let expected: &[(&[&str], bool)] = &[
        (&["delete", "nosuch"], false),
        (&["delete", "--force", "nosuch"], true),
        (&["kill", "nosuch"], false),
        (&["kill", "nosuch", "KILL"], false),
        (&["kill", ""], false),
        (&["kill", "", "KILL"], false),
        (&["delete", ""], false),
        (&["delete", "--force", ""], false),
        (&["kill", "c1", "0"], true),
        (&["start", "c1"], true),
        (&["delete", "c1"], false),
        (&["kill", "c1", "KILL"], true),
        // (here the container has stopped)
        (&["kill", "c1", "KILL"], false),
        (&["kill", "c1", "TERM"], false),
        (&["kill", "--all", "c1", "KILL"], true),
        (&["delete", "c1"], true),
        (&["delete", "c1"], false),
        (&["kill", "c1", "KILL"], false),
    ];
    let mut answers = Vec::new();
    for bin in runtimes("delete_and_kill_exit_as_runcs_do") {
        let out = w.create_of(&bin, &[], "c1");
        assert_eq!(out.status, 0, "{bin} create: {}", out.stderr);
        let mut got = Vec::new();
        for (i, (args, _)) in expected.iter().enumerate() {
            if i == 12 {
                assert_eq!(status_of(&w, &bin, "c1", "stopped"), "stopped", "{bin}");
            }
            let out = step(&w, &bin, args);
            if bin == FERROVISOR && out.status != 0 {
                assert_one_line(&out);
            }
            got.push((*args, out.status == 0));
        }
        answers.push((bin, got));
    }
    assert_eq!(answers[0].1, expected, "ferrovisor");
    if let Some((runc, got)) = answers.get(1) {
        assert_eq!(
            got, &answers[0].1,
            "{runc} answers otherwise than ferrovisor"
        );
    }
}

/// `process.user.additionalGids` are the guest's supplementary groups
/// (sorted, each once, as runc sets them) and its permission checks go by
/// them; `HOME`, when the spec's environment has none (or an empty one),
/// is the user's home directory in the rootfs's `/etc/passwd`, else `/`.
/// Each case runs under runc too where it is installed, which must print
/// the same.
#[test]
fn additional_gids_and_home_are_runcs() {
    let probe = "id -G; grep Groups /proc/self/status; echo \"HOME=${HOME-unset}\"; \
                 cat /grp >/dev/null 2>&1 && echo grp-readable || echo grp-unreadable";
    let mut w = World::new("groups-home", |v| set_args(v, &["sh", "-c", probe]));
    let rootfs = w.bundle().join("rootfs");
    std::fs::create_dir_all(rootfs.join("etc")).expect("mkdir etc");
    let passwd = rootfs.join("etc/passwd");
    let entries = "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n";
    std::fs::write(&passwd, entries).expect("passwd");
    let grp = rootfs.join("grp");
    std::fs::write(&grp, "for group 5\n").expect("grp");
    std::os::unix::fs::chown(&grp, Some(0), Some(5)).expect("chown grp");
    std::fs::set_permissions(&grp, std::fs::Permissions::from_mode(0o640)).expect("chmod grp");
    let bins = runtimes("additional_gids_and_home_are_runcs");
    let path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    let cases = [
        (
            serde_json::json!({"uid": 1000, "gid": 1000, "additionalGids": [5, 3, 5]}),
            serde_json::json!([path]),
            true,
            "1000 3 5\nGroups:\t3 5 \nHOME=/home/user\ngrp-readable\n",
        ),
        (
            serde_json::json!({"uid": 1234, "gid": 7}),
            serde_json::json!([path]),
            true,
            "7\nGroups:\t \nHOME=/\ngrp-unreadable\n",
        ),
        (
            serde_json::json!({"uid": 0, "gid": 0, "additionalGids": [0, 10]}),
            serde_json::json!([path]),
            true,
            "0 10\nGroups:\t0 10 \nHOME=/root\ngrp-readable\n",
        ),
        (
            serde_json::json!({"uid": 1000, "gid": 1000}),
            serde_json::json!([path, "HOME=/custom"]),
            true,
            "1000\nGroups:\t \nHOME=/custom\ngrp-unreadable\n",
        ),
        (
            serde_json::json!({"uid": 1000, "gid": 1000}),
            serde_json::json!([path, "HOME="]),
            true,
            "1000\nGroups:\t \nHOME=/home/user\ngrp-unreadable\n",
        ),
        (
            serde_json::json!({"uid": 0, "gid": 0}),
            serde_json::json!([path]),
            false,
            "0\nGroups:\t \nHOME=/\ngrp-readable\n",
        ),
    ];
    for (user, env, with_passwd, want) in cases {
        w.edit_config(|v| {
            v["process"]["user"] = user.clone();
            v["process"]["env"] = env.clone();
        });
        if !with_passwd {
            std::fs::remove_file(&passwd).expect("rm passwd");
        }
        for bin in &bins {
            let out = w.cli_of(bin, &["run", "--bundle", &w.bundle_str(), "g1"]);
            assert_eq!(
                (out.stdout.as_str(), out.status),
                (want, 0),
                "{bin} as {user} with {env}: {}",
                out.stderr
            );
        }
    }

    // exec: `--process` with its own groups; a command line with the
    // container's groups and `--additional-gids`.
    std::fs::write(&passwd, entries).expect("passwd");
    w.edit_config(|v| {
        set_args(v, &["sleep", "1000"]);
        v["process"]["user"] = serde_json::json!({"uid": 1000, "gid": 1000, "additionalGids": [5]});
        v["process"]["env"] = serde_json::json!([path]);
    });
    let proc_json = w.dir.path().join("process.json");
    std::fs::write(
        &proc_json,
        serde_json::json!({
            "args": ["sh", "-c", probe], "cwd": "/", "env": [path],
            "user": {"uid": 1000, "gid": 1000, "additionalGids": [3]},
        })
        .to_string(),
    )
    .expect("process.json");
    let proc_json = proc_json.to_string_lossy().into_owned();
    for bin in &bins {
        assert_eq!(w.create_of(bin, &[], "g2").status, 0, "{bin} create");
        assert_eq!(w.cli_of(bin, &["start", "g2"]).status, 0, "{bin} start");
        let out = w.cli_of(bin, &["exec", "--process", &proc_json, "g2"]);
        assert_eq!(
            out.stdout, "1000 3\nGroups:\t3 \nHOME=/home/user\ngrp-unreadable\n",
            "{bin} exec --process: {}",
            out.stderr
        );
        let out = w.cli_of(
            bin,
            &[
                "exec",
                "--user",
                "1000:1000",
                "-g",
                "10",
                "g2",
                "sh",
                "-c",
                probe,
            ],
        );
        assert_eq!(
            out.stdout, "1000 5 10\nGroups:\t5 10 \nHOME=/home/user\ngrp-readable\n",
            "{bin} exec -g: {}",
            out.stderr
        );
        assert_eq!(w.cli_of(bin, &["delete", "--force", "g2"]).status, 0);
    }
}

#[test]
fn network_sandbox_takes_secrets_and_logs_each_connection() {
    // The container's environment holds the placeholder, never the value
    // (nor the runtime's variable it came from); the egress log has the
    // connection; `update --deny-host` reaches the running sandbox.
    let mut w = World::new("netns-secret", |_| {});
    let net = netns_pair(w.dir.path(), "sct");
    let url = format!("http://{}:8080/", net.server_ip);
    let script = format!(
        "echo \"token=$TOKEN\"; env | grep -c FV_OCI_SECRET; /bin/busybox wget -q -O /dev/null {url}; echo fetched $?; sleep 3"
    );
    in_netns(&w, &net.container_ns, &["/bin/sh", "-c", &script]);
    let bundle = w.bundle_str();
    let log = w.dir.path().join("egress.log");
    let log_s = log.to_str().expect("utf-8").to_owned();
    let runtime_log = w.dir.path().join("runtime.log");
    let allowed = format!("{}/32:8080", net.server_ip);
    w.ids.push("sc1".into());
    let mut cmd = w.command_of(
        FERROVISOR,
        &[
            "--log",
            runtime_log.to_str().expect("utf-8"),
            "--allow-cidr",
            &allowed,
            "--secret",
            "TOKEN=env:FV_OCI_SECRET:api.test",
            "--egress-log",
            &log_s,
            "run",
            "--bundle",
            &bundle,
            "sc1",
        ],
    );
    cmd.env("FV_OCI_SECRET", "oci-real-value-91");
    let child = std::thread::spawn(move || run(cmd, None, TIMEOUT));
    // While it runs: the rules can change.
    let mut updated = None;
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(50));
        let o = w.cli(&["update", "--deny-host", "api.test", "sc1"]);
        if o.status == 0 {
            updated = Some(o);
            break;
        }
    }
    let out = child.join().expect("run");
    assert_eq!(out.status, 0, "{out:?}");
    assert!(
        out.stdout.contains("token=ferrovisor-secret-"),
        "the placeholder: {out:?}"
    );
    assert!(!out.stdout.contains("oci-real-value-91"), "{out:?}");
    assert!(out.stdout.contains("\n0\nfetched 0\n"), "{out:?}");
    assert!(updated.is_some(), "update --deny-host of a running sandbox");
    let text = std::fs::read_to_string(&log).expect("egress log");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert_eq!(lines[0]["dest"], net.server_ip.as_str(), "{text}");
    assert_eq!(lines[0]["decision"], "allowed", "{text}");
    assert!(
        lines[0]["rule"]
            .as_str()
            .is_some_and(|r| r.starts_with("cidr")),
        "{text}"
    );
    // The same record in the runtime's log, where an engine looks.
    let said = std::fs::read_to_string(&runtime_log).expect("runtime log");
    assert!(
        said.lines()
            .any(|l| l.contains(" egress: ") && l.contains(text.trim_end())),
        "{said}"
    );
    assert!(!said.contains("oci-real-value-91"), "{said}");
}

/// A writable root is the bundle's rootfs, as under runc: what the guest
/// writes (in `/tmp` too) is on the host afterwards, owned by the guest's
/// user, and `state` says so. With `--overlay` the writes stay in memory
/// and the rootfs is as it was.
#[test]
fn a_writable_root_is_the_bundles_rootfs_unless_overlay() {
    let script = "echo top > /top; echo tmp > /tmp/t; cat /top /tmp/t; sleep 1000";
    let mut w = World::new("rootfs", |v| {
        set_args(v, &["sh", "-c", script]);
        writable_root(v);
        v["process"]["user"] = serde_json::json!({"uid": 1000, "gid": 1000});
    });
    let rootfs = w.bundle().join("rootfs");
    std::fs::set_permissions(&rootfs, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    // In the state's own field: its annotations are config.json's alone.
    let annotation = |w: &World, id: &str| {
        let state = w.state(id);
        assert_eq!(state["annotations"], serde_json::json!({}), "{state}");
        state["rootWrites"].as_str().map(str::to_owned)
    };
    let runtimes = [("ferrovisor", FERROVISOR.to_owned())]
        .into_iter()
        .chain(runc_binary().map(|b| ("runc", b)));
    for (runtime, bin) in runtimes {
        let id = format!("rw-{runtime}");
        assert_eq!(w.create_of(&bin, &[], &id).status, 0, "{runtime}: create");
        assert_eq!(
            w.cli_of(&bin, &["start", &id]).status,
            0,
            "{runtime}: start"
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while w.container_stdout(&id) != "top\ntmp\n" {
            assert!(
                Instant::now() < deadline,
                "{runtime}: {:?} {:?}",
                w.container_stdout(&id),
                w.container_stderr(&id)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        for (path, text) in [("top", "top\n"), ("tmp/t", "tmp\n")] {
            let p = rootfs.join(path);
            assert_eq!(
                std::fs::read_to_string(&p).ok().as_deref(),
                Some(text),
                "{runtime}: {path}"
            );
            let meta = std::fs::metadata(&p).expect("stat");
            assert_eq!((meta.uid(), meta.gid()), (1000, 1000), "{runtime}: {path}");
            std::fs::remove_file(p).expect("rm");
        }
        if runtime == "ferrovisor" {
            assert_eq!(annotation(&w, &id).as_deref(), Some("rootfs"));
        }
        assert_eq!(w.cli_of(&bin, &["delete", "--force", &id]).status, 0);
    }

    assert_eq!(w.create_with(&["--overlay"], "rw-memory").status, 0);
    assert_eq!(annotation(&w, "rw-memory").as_deref(), Some("memory"));
    assert_eq!(w.cli(&["start", "rw-memory"]).status, 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    while w.container_stdout("rw-memory") != "top\ntmp\n" {
        assert!(
            Instant::now() < deadline,
            "{}",
            w.container_stderr("rw-memory")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!rootfs.join("top").exists() && !rootfs.join("tmp/t").exists());
    let features: Value =
        serde_json::from_str(&w.cli(&["--overlay", "features"]).stdout).expect("features json");
    assert_eq!(
        features["annotations"]["dev.ferrovisor.root-writes"],
        "memory"
    );
    let features: Value = serde_json::from_str(&w.cli(&["features"]).stdout).expect("json");
    assert_eq!(
        features["annotations"]["dev.ferrovisor.root-writes"],
        "rootfs"
    );
}

/// `kill` right after `start` reaches the handler the program sets up
/// first thing, as under runc: `start` returns once the program is
/// running and waits for something, not while the sandbox still boots.
#[test]
fn a_signal_right_after_start_reaches_the_programs_handler() {
    let mut w = World::new("early-kill", |v| {
        set_args(
            v,
            &[
                "sh",
                "-c",
                "trap 'echo got TERM; exit 7' TERM; sleep 1000 & wait",
            ],
        );
    });
    for round in 0..3 {
        let id = format!("ek{round}");
        assert_eq!(w.create(&id).status, 0, "create");
        assert_eq!(w.cli(&["start", &id]).status, 0, "start");
        assert_eq!(w.cli(&["kill", &id, "TERM"]).status, 0, "kill");
        assert_eq!(w.wait(&id), 7, "{id}: {}", w.container_stderr(&id));
        assert_eq!(w.container_stdout(&id), "got TERM\n");
    }
}

/// What the guest sees of its container as under runc: the identity id
/// maps of one user namespace, `process.oomScoreAdj` in its own /proc, the
/// mounts of runc's default spec in that order with their sources (the
/// cgroup one's is the host's cgroup version's), `/dev/pts` too, `/dev/ptmx`
/// a link to `pts/ptmx`, and a `noexec` `/dev/shm` that runs no program.
#[test]
fn the_guest_sees_its_container_as_under_runc() {
    let script = "cat /proc/self/uid_map /proc/self/gid_map /proc/self/setgroups \
                  /proc/self/oom_score_adj; \
                  awk '{ if (index(\" /proc /dev /dev/pts /dev/shm /dev/mqueue /sys \", \" \" $2 \" \")) \
                  print $1, $2; else if ($2 == \"/sys/fs/cgroup\") print $2 }' /proc/self/mounts; \
                  grep ' /dev/shm ' /proc/self/mounts | grep -c noexec; \
                  busybox readlink /dev/ptmx; stat -L -c %t:%T /dev/ptmx; \
                  busybox ls -l /dev | grep -c ' ptmx -> pts/ptmx'; \
                  busybox cp /bin/busybox /dev/shm/bb; busybox chmod 755 /dev/shm/bb; \
                  /dev/shm/bb true 2>/dev/null || echo refused";
    let mut w = World::new("as-runc", |v| {
        set_args(v, &["sh", "-c", script]);
        v["process"]["oomScoreAdj"] = 100.into();
    });
    let want = format!(
        "{0:>10} {1:>10} {2:>10}\n{0:>10} {1:>10} {2:>10}\nallow\n100\n\
         proc /proc\ntmpfs /dev\ndevpts /dev/pts\nshm /dev/shm\nmqueue /dev/mqueue\nsysfs /sys\n\
         /sys/fs/cgroup\n1\npts/ptmx\n5:2\n1\nrefused\n",
        0,
        0,
        u32::MAX
    );
    for (i, bin) in runtimes("the_guest_sees_its_container_as_under_runc")
        .iter()
        .enumerate()
    {
        let id = format!("asrunc{i}");
        let out = w.started_output(bin, &id, "refused\n");
        assert_eq!(out, want, "{bin}: {}", w.container_stderr(&id));
    }
}

/// `linux.seccomp` filters the guest's calls as runc has the host kernel
/// filter the container's: a denied call fails with the profile's errno,
/// in the first process and in one `exec` starts, and /proc says the
/// process is in filter mode.
#[test]
fn the_seccomp_profile_filters_the_guests_calls_as_under_runc() {
    let script = "busybox mkdir /tmp/x 2>&1; echo \"mkdir $?\"; \
                  grep Seccomp: /proc/self/status; echo up; sleep 100";
    let mut w = World::new("seccomp", |v| {
        set_args(v, &["sh", "-c", script]);
        v["linux"]["seccomp"] = serde_json::json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
            "syscalls": [
                {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13},
                // (a call of another architecture: skipped, as runc does)
                {"names": ["arm_fadvise64_64"], "action": "SCMP_ACT_KILL"},
                // Only `uname` with a null buffer fails.
                {"names": ["uname"], "action": "SCMP_ACT_ERRNO", "errnoRet": 14,
                 "args": [{"index": 0, "value": 0, "op": "SCMP_CMP_EQ"}]}
            ]
        });
    });
    let want = "mkdir: can't create directory '/tmp/x': Permission denied\nmkdir 1\n\
                Seccomp:\t2\nup\n";
    for (i, bin) in runtimes("the_seccomp_profile_filters_the_guests_calls_as_under_runc")
        .iter()
        .enumerate()
    {
        let id = format!("sc{i}");
        let out = w.started_output(bin, &id, "up\n");
        assert_eq!(out, want, "{bin}: {}", w.container_stderr(&id));
        let exec = w.cli_of(bin, &["exec", &id, "busybox", "mkdir", "/tmp/y"]);
        assert_eq!(exec.status, 1, "{bin}: {exec:?}");
        assert!(exec.stderr.contains("Permission denied"), "{bin}: {exec:?}");
        let exec = w.cli_of(bin, &["exec", &id, "busybox", "uname", "-s"]);
        assert_eq!(
            (exec.status, exec.stdout.as_str()),
            (0, "Linux\n"),
            "{bin}: {exec:?}"
        );
        assert_eq!(w.cli_of(bin, &["delete", "--force", &id]).status, 0);
    }
    // A profile that needs an agent is refused at create, in one line.
    w.edit_config(|v| {
        v["linux"]["seccomp"]["syscalls"][0]["action"] = "SCMP_ACT_NOTIFY".into();
    });
    let out = w.create("sc-notify");
    assert_ne!(out.status, 0);
    assert_one_line(&out);
    assert!(out.stderr.contains("SCMP_ACT_NOTIFY"), "{out:?}");
}

/// Configuration runc accepts runs here too, meaning what it means there:
/// `cpu.cpus` holds the sandbox to those CPUs, `disableOOMKiller`, the
/// LINUX personality, an `rro` bind (read-only) and a relative read-only
/// path (below the root).
#[test]
fn settings_runc_accepts_are_taken() {
    let vol = TempDir::new("rro-vol");
    let script = "nproc; touch /vol/x 2>&1; touch /bin/x 2>&1; echo done";
    let mut w = World::new("runc-accepts", |v| {
        set_args(v, &["sh", "-c", script]);
        writable_root(v);
        v["linux"]["resources"] = serde_json::json!({
            "cpu": {"cpus": "0"}, "memory": {"disableOOMKiller": true}});
        v["linux"]["personality"] = serde_json::json!({"domain": "LINUX"});
        v["linux"]["readonlyPaths"] = serde_json::json!(["bin"]);
        v["mounts"]
            .as_array_mut()
            .expect("mounts")
            .push(serde_json::json!({
                "destination": "/vol", "type": "bind", "source": vol.path_str(),
                "options": ["rbind", "rro"]
            }));
    });
    let want = "1\ntouch: /vol/x: Read-only file system\n\
                touch: /bin/x: Read-only file system\ndone\n";
    for (i, bin) in runtimes("settings_runc_accepts_are_taken")
        .iter()
        .enumerate()
    {
        let id = format!("acc{i}");
        let out = w.started_output(bin, &id, "done\n");
        assert_eq!(out, want, "{bin}: {}", w.container_stderr(&id));
    }
}

/// runc's `checkpoint --image-path` saves a container that counts and
/// stops it; `restore --image-path --bundle --detach` goes on from the
/// next number; `checkpoint --leave-running` saves and lets it count on;
/// a corrupt image fails `restore` in one line.
#[test]
fn checkpoint_and_restore_a_counting_container() {
    checkpoint_and_restore(&["/bin/count"]);
}

/// The same for a shell that counts, with a `sleep` child each second
/// (two processes when saved).
#[test]
fn checkpoint_and_restore_a_counting_shell() {
    checkpoint_and_restore(&[
        "sh",
        "-c",
        "i=0; while :; do echo $i; i=$((i+1)); sleep 0.2; done",
    ]);
}

fn checkpoint_and_restore(argv: &[&str]) {
    let mut w = World::new("ckpt", |v| set_args(v, argv));
    let bin = compile_static(w.dir.path(), "count", common::containerd::COUNT_C);
    std::fs::copy(bin, w.bundle().join("rootfs/bin/count")).expect("copy count");
    let images = w.dir.path().join("images");
    let images_s = images.display().to_string();
    let bundle = w.bundle_str();
    let lines_in = |w: &World, name: &str, n: usize| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got = common::counted(
                &std::fs::read_to_string(w.dir.path().join(name)).unwrap_or_default(),
            );
            if got.len() >= n || Instant::now() > deadline {
                return got;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    assert_eq!(w.create("cp1").status, 0);
    assert_eq!(w.cli(&["start", "cp1"]).status, 0);
    assert!(lines_in(&w, "cp1.out", 3).len() >= 3, "it counts");
    let out = w.cli(&[
        "checkpoint",
        "--image-path",
        &images_s,
        "--work-path",
        "/nonexistent",
        "cp1",
    ]);
    assert_eq!(out.status, 0, "checkpoint: {}", out.stderr);
    assert_eq!(w.status("cp1"), "stopped");
    let before = common::counted(&w.container_stdout("cp1"));
    assert_eq!(w.cli(&["delete", "cp1"]).status, 0);

    // The restored container writes where `restore`'s stdout goes.
    let restored = |w: &mut World, images: &str, out: &str| {
        w.ids.push("cp1".into());
        let mut cmd = w.command(&[
            "restore",
            "--image-path",
            images,
            "--bundle",
            &bundle,
            "--detach",
            "-no-subreaper",
            "cp1",
        ]);
        // (files: the detached sandbox keeps both open)
        let err_path = w.dir.path().join(format!("{out}.err"));
        cmd.stdout(std::fs::File::create(w.dir.path().join(out)).expect("out"))
            .stderr(std::fs::File::create(&err_path).expect("err"));
        let child = cmd.spawn().expect("restore");
        let status = code(wait_child(child, "restore"));
        (
            status,
            std::fs::read_to_string(&err_path).unwrap_or_default(),
        )
    };
    let (status, err) = restored(&mut w, &images_s, "r1.out");
    assert_eq!(status, 0, "restore: {err}");
    assert_eq!(w.status("cp1"), "running");
    let after = lines_in(&w, "r1.out", 3);
    let next = before.last().map_or(0, |n| n + 1);
    let want: Vec<u64> = (next..next + after.len() as u64).collect();
    assert_eq!(after, want, "saved after {before:?}");

    // --leave-running: saved, and it counts on.
    let again = w.dir.path().join("again");
    let out = w.cli(&[
        "checkpoint",
        "--leave-running",
        "--image-path",
        &again.display().to_string(),
        "cp1",
    ]);
    assert_eq!(out.status, 0, "checkpoint --leave-running: {}", out.stderr);
    assert_eq!(w.status("cp1"), "running");
    let n =
        common::counted(&std::fs::read_to_string(w.dir.path().join("r1.out")).unwrap_or_default());
    assert!(
        lines_in(&w, "r1.out", n.len() + 2).len() >= n.len() + 2,
        "counts on"
    );
    // fork: a second container goes on from the same number; both count.
    w.ids.push("cpf".into());
    let mut cmd = w.command(&["fork", "cp1", "cpf"]);
    cmd.stdout(std::fs::File::create(w.dir.path().join("f.out")).expect("out"))
        .stderr(std::fs::File::create(w.dir.path().join("f.err")).expect("err"));
    let status = code(wait_child(cmd.spawn().expect("fork"), "fork"));
    assert_eq!(
        status,
        0,
        "fork: {}",
        std::fs::read_to_string(w.dir.path().join("f.err")).unwrap_or_default()
    );
    assert_eq!(
        (w.status("cp1"), w.status("cpf")),
        ("running".into(), "running".into())
    );
    let forked = lines_in(&w, "f.out", 2);
    let so_far =
        common::counted(&std::fs::read_to_string(w.dir.path().join("r1.out")).unwrap_or_default());
    assert!(
        forked.len() >= 2 && forked[0] > next && forked[1] == forked[0] + 1,
        "{forked:?} forked from {so_far:?}"
    );
    assert!(
        lines_in(&w, "r1.out", so_far.len() + 2).len() >= so_far.len() + 2,
        "the original counts on"
    );
    assert_eq!(w.cli(&["delete", "--force", "cpf"]).status, 0);
    assert_eq!(w.cli(&["delete", "--force", "cp1"]).status, 0);

    // A corrupt image: one line, and no container.
    let img = again.join("sandbox.img");
    let mut bytes = std::fs::read(&img).expect("image");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&img, bytes).expect("corrupt");
    let (status, err) = restored(&mut w, &again.display().to_string(), "r2.out");
    assert_ne!(status, 0);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("checksum") || err.contains("corrupt"), "{err}");
    assert_ne!(w.cli(&["state", "cp1"]).status, 0, "no container left");
}

impl World {
    /// `args` for `bin`, started by a shell that first opens `redirects`
    /// (descriptors past stdio for `--preserve-fds` to hand down).
    fn handing_down(&self, redirects: &str, bin: &str, args: &[&str]) -> Command {
        let inner = self.command_of(bin, args);
        let mut cmd = Command::new("/bin/sh");
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .arg("-c")
            .arg(format!("{redirects}; exec \"$0\" \"$@\""))
            .arg(inner.get_program())
            .args(inner.get_args());
        cmd
    }
}

#[test]
fn preserve_fds_hands_descriptors_past_stdio_down_as_runc() {
    let script = "echo to three >&3; cat <&4; echo to five >&5 || echo five is not open; \
                  ls -l /proc/self/fd/3 | cut -c1-10";
    let mut seen = Vec::new();
    for bin in runtimes("preserve_fds_hands_descriptors_past_stdio_down_as_runc") {
        let mut w = World::new("preserve-fds", |v| set_args(v, &["sh", "-c", script]));
        std::fs::write(w.dir.path().join("four"), "from four\n").expect("four");
        let bundle = w.bundle_str();
        w.ids.push("p1".into());
        let cmd = w.handing_down(
            "exec 3>three 4<four",
            &bin,
            &["run", "--preserve-fds", "2", "--bundle", &bundle, "p1"],
        );
        let out = run(cmd, None, TIMEOUT);
        assert_eq!(out.status, 0, "{bin}: {out:?}");
        let three = std::fs::read_to_string(w.dir.path().join("three")).unwrap_or_default();
        seen.push((bin.clone(), out.stdout.clone(), three));

        // exec hands its own down too, while the container runs.
        w.edit_config(|v| set_args(v, &["sleep", "60"]));
        assert_eq!(w.create_of(&bin, &[], "p2").status, 0, "{bin} create");
        assert_eq!(w.cli_of(&bin, &["start", "p2"]).status, 0, "{bin} start");
        let cmd = w.handing_down(
            "exec 3>exec-three",
            &bin,
            &[
                "exec",
                "--preserve-fds",
                "1",
                "p2",
                "sh",
                "-c",
                "echo exec to three >&3",
            ],
        );
        let out = run(cmd, None, TIMEOUT);
        assert_eq!(out.status, 0, "{bin} exec: {out:?}");
        let exec_three =
            std::fs::read_to_string(w.dir.path().join("exec-three")).unwrap_or_default();
        assert_eq!(exec_three, "exec to three\n", "{bin}");
        assert_eq!(w.cli_of(&bin, &["delete", "--force", "p2"]).status, 0);
    }
    let (bin, stdout, three) = &seen[0];
    assert_eq!(
        (stdout.as_str(), three.as_str()),
        ("from four\nfive is not open\nl-wx------\n", "to three\n"),
        "{bin}"
    );
    for (bin, stdout, three) in &seen[1..] {
        assert_eq!((stdout, three), (&seen[0].1, &seen[0].2), "{bin} differs");
    }

    // A descriptor that is not open: one line, nothing created.
    let w = World::new("preserve-fds-closed", |v| set_args(v, &["true"]));
    let bundle = w.bundle_str();
    let cmd = w.handing_down(
        "exec 3>three",
        FERROVISOR,
        &["create", "--preserve-fds", "2", "--bundle", &bundle, "p3"],
    );
    let out = run(cmd, None, TIMEOUT);
    assert_one_line(&out);
    assert!(
        out.stderr.contains("descriptor 4 is not open"),
        "{}",
        out.stderr
    );
    assert_ne!(w.cli(&["state", "p3"]).status, 0, "no container left");
}

/// `linux.memoryPolicy` places the sandbox's memory (its host process
/// runs under the policy) and is the guest's first thread's, as
/// `set_mempolicy(2)` would make it natively; one Linux refuses is refused
/// in one line.
#[test]
fn memory_policy_is_set_as_set_mempolicy_sets_it() {
    let probe_dir = TempDir::new("mempolicy-probe");
    let probe = compile_static(probe_dir.path(), "mempolicy", include_str!("mempolicy.c"));
    let native = |mode: i32, mask: u64| {
        let out = std::process::Command::new(&probe)
            .args([mode.to_string(), mask.to_string()])
            .output()
            .expect("run the probe natively");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    // (policy, the same for set_mempolicy, what the host's numa_maps says)
    let cases = [
        (
            serde_json::json!({"mode": "MPOL_BIND", "nodes": "0"}),
            (2, 1),
            "bind:0",
        ),
        (
            serde_json::json!({"mode": "MPOL_INTERLEAVE", "nodes": "0",
                               "flags": ["MPOL_F_STATIC_NODES"]}),
            (3 | 1 << 15, 1),
            "interleave=static:0",
        ),
        (
            serde_json::json!({"mode": "MPOL_PREFERRED"}),
            (1, 0),
            "local",
        ),
        (serde_json::json!({"mode": "MPOL_BIND"}), (2, 0), ""),
    ];
    for (i, (policy, (mode, mask), host)) in cases.into_iter().enumerate() {
        let mut w = World::new("mempolicy", |v| {
            set_args(v, &["/bin/mempolicy"]);
            v["linux"]["memoryPolicy"] = policy.clone();
        });
        std::fs::copy(&probe, w.bundle().join("rootfs/bin/mempolicy")).expect("copy probe");
        let (ok, expected) = native(mode, mask);
        let id = format!("m{i}");
        let out = w.create(&id);
        if !ok {
            // Linux refuses it: so does create, in one line.
            assert_one_line(&out);
            assert!(out.stderr.contains("linux.memoryPolicy"), "{}", out.stderr);
            continue;
        }
        assert_eq!(out.status, 0, "{policy}: {}", out.stderr);
        let pid = w.state(&id)["pid"].as_i64().expect("pid");
        let maps = std::fs::read_to_string(format!("/proc/{pid}/numa_maps")).unwrap_or_default();
        let first = maps.lines().next().unwrap_or_default();
        assert!(
            first.split_whitespace().nth(1) == Some(host),
            "{policy}: the sandbox's host process: {first}"
        );
        assert_eq!(w.cli(&["start", &id]).status, 0);
        assert_eq!(w.wait(&id), 0, "{}", w.container_stderr(&id));
        assert_eq!(w.container_stdout(&id), expected, "{policy}");
    }
}

/// Writes `argv[1]` MiB of memory, one MiB a millisecond (the Sentry's
/// watcher looks every millisecond or so near the limit; a faster writer
/// passes it by more before it is stopped), then says so.
const HOG: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 1;
	char *p = malloc(mib << 20);
	if (!p) return 2;
	for (size_t i = 0; i < mib; i++) {
		memset(p + (i << 20), 1, 1 << 20);
		usleep(1000);
	}
	printf("filled %zu MiB\n", mib);
	return 0;
}
"#;

/// Where the host's cgroups cannot be used (here: an empty, read-only
/// /sys/fs/cgroup in a mount namespace of the runtime's own), memory and
/// pids limits are held by the Sentry: past the memory limit the process
/// holding the most is killed, as a memory cgroup's OOM killer does, and
/// the container goes on; a CPU quota is held too (the guest's `cpu.max`
/// says it); `cpu.shares`, a weight among host cgroups, is refused in one
/// line.
#[test]
fn memory_and_pids_limits_hold_without_a_host_cgroup() {
    let mut w = World::new("no-cgroup", |v| {
        set_args(
            v,
            &[
                "sh",
                "-c",
                "/bin/hog 300; echo \"status $?\"; /bin/hog 8; grep MemTotal /proc/meminfo; \
                 cat /sys/fs/cgroup/pids.max",
            ],
        );
        v["linux"]["resources"] =
            serde_json::json!({"memory": {"limit": 64 << 20}, "pids": {"limit": 30}});
    });
    let hog = compile_static(w.dir.path(), "hog", HOG);
    std::fs::copy(&hog, w.bundle().join("rootfs/bin/hog")).expect("copy hog");
    let bundle = w.bundle_str();
    w.ids.extend(["nc1".into(), "nc2".into(), "nc3".into()]);
    let without_cgroups = |args: &[&str]| {
        let inner = w.command(args);
        let mut cmd = Command::new("unshare");
        cmd.args(["-m", "--propagation", "private", "/bin/sh", "-c"])
            .arg("mount -t tmpfs -o ro none /sys/fs/cgroup && exec \"$0\" \"$@\"")
            .arg(inner.get_program())
            .args(inner.get_args())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .stdin(Stdio::null());
        run(cmd, None, TIMEOUT)
    };
    let out = without_cgroups(&["run", "--bundle", &bundle, "nc1"]);
    assert_eq!(out.status, 0, "{}", common::show(&out));
    assert_eq!(
        out.stdout,
        "status 137\nfilled 8 MiB\nMemTotal:          65536 kB\n30\n"
    );

    w.edit_config(|v| {
        set_args(v, &["cat", "/sys/fs/cgroup/cpu.max"]);
        v["linux"]["resources"] = serde_json::json!({"cpu": {"quota": 50000, "period": 100000}});
    });
    let out = without_cgroups(&["run", "--bundle", &bundle, "nc2"]);
    assert_eq!(out.status, 0, "{}", common::show(&out));
    assert_eq!(out.stdout, "50000 100000\n", "{}", common::show(&out));
    w.edit_config(|v| {
        v["linux"]["resources"] = serde_json::json!({"cpu": {"shares": 512}});
    });
    let out = without_cgroups(&["run", "--bundle", &bundle, "nc3"]);
    assert_one_line(&out);
}

/// What libcuda asks first, on the container's /dev/nvidiactl.
const NV_GUEST: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#define IOWR_F(nr, size) ((3u << 30) | ((size) << 16) | ('F' << 8) | (nr))
static const char *res(int r) { return r == 0 ? "ok" : strerror(errno); }
int main(void) {
    int fd = open("/dev/nvidiactl", O_RDWR);
    if (fd < 0) { printf("open: %s\n", strerror(errno)); return 1; }
    unsigned char buf[32] = {0};
    printf("unknown escape: %s\n", res(ioctl(fd, IOWR_F(0x99, 16), buf)));
    printf("rm free: %s\n", res(ioctl(fd, IOWR_F(0x29, 16), buf)));
    printf("gpu 1: %s\n", open("/dev/nvidia1", O_RDWR) < 0 ? strerror(errno) : "open");
    return 0;
}
"#;

/// `--nvproxy` (issue 16): linux.devices' /dev/nvidia* reach the guest
/// through nvproxy, over character devices with /dev/null's numbers
/// standing for the host's; without the flag such a config is refused in
/// one line.
#[test]
fn nvproxy_gives_the_devices_linux_devices_names() {
    let devices = serde_json::json!([
        {"path": "/dev/nvidiactl", "type": "c", "major": 195, "minor": 255, "fileMode": 438},
        {"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0, "fileMode": 438},
        {"path": "/dev/nvidia-modeset", "type": "c", "major": 195, "minor": 254, "fileMode": 438}
    ]);
    let mut w = World::new("nvproxy", |v| {
        set_args(v, &["/bin/nvguest"]);
        v["linux"]["devices"] = devices;
    });
    let bin = compile_static(w.dir.path(), "nvguest", NV_GUEST);
    std::fs::copy(&bin, w.bundle().join("rootfs/bin/nvguest")).expect("copy the guest");
    let dev = w.dir.path().join("hostdev");
    std::fs::create_dir(&dev).expect("mkdir");
    for name in ["nvidiactl", "nvidia0"] {
        let st = Command::new("mknod")
            .arg(dev.join(name))
            .args(["c", "1", "3"])
            .status();
        assert!(st.expect("mknod").success(), "mknod (tests run as root)");
    }
    let out = w.cli(&["run", "--bundle", &w.bundle_str(), "nv1"]);
    assert_eq!(out.status, 1, "{out:?}");
    assert_one_line(&out);
    assert!(
        out.stderr
            .contains("linux.devices names /dev/nvidiactl: give the runtime --nvproxy"),
        "{out:?}"
    );
    let dev_dir = dev.to_string_lossy().into_owned();
    let flags = [
        "--nvproxy",
        "--nvproxy-driver-version",
        "580.105.08",
        "--nvproxy-dev-dir",
        &dev_dir,
    ];
    let out = w.cli(&[&flags[..], &["run", "--bundle", &w.bundle_str(), "nv2"]].concat());
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(
        out.stdout,
        "unknown escape: Invalid argument\n\
         rm free: Inappropriate ioctl for device\n\
         gpu 1: No such file or directory\n",
        "{out:?}"
    );
    let out = w.cli(&[
        "--nvproxy",
        "--nvproxy-driver-version",
        "550.54.14",
        "run",
        "--bundle",
        &w.bundle_str(),
        "nv3",
    ]);
    assert_eq!(out.status, 1, "{out:?}");
    assert_one_line(&out);
    assert!(
        out.stderr
            .contains("NVIDIA driver 550.54.14 is not supported"),
        "{out:?}"
    );
    w.ids.push("nv2".into());
}
