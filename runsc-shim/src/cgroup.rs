//! The sandbox's host cgroup: `create` makes one per container, moves the
//! sandbox process into it (the Sentry, and so every stub and the gofer it
//! starts, follow), and writes `linux.resources`' memory, CPU and pids
//! limits there; `pause` and `resume` use its freezer; `delete` kills what
//! is left in it and removes it. Both the per-controller hierarchies of
//! cgroup v1 and the unified hierarchy of cgroup v2 are handled.
//!
//! Where the cgroup goes follows runc's cgroupfs driver: an absolute
//! `linux.cgroupsPath` is taken from the root of each hierarchy, a relative
//! one (and the default, `ferrovisor/ID-HASH`, HASH naming the state root
//! so that two `--root`s may use one id) from the cgroup `ferrovisor` itself
//! runs in, so that limits a supervisor put on the caller still hold. On v2
//! that is the parent of the caller's cgroup: v2 lets no cgroup that holds
//! processes hand controllers down to children.

use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Where the unified (v2) hierarchy is mounted when it is the only one.
const V2_ROOT: &str = "/sys/fs/cgroup";

/// The v1 controllers a sandbox joins; the freezer serves `pause`,
/// cpuacct the CPU time `stats` reports (often mounted with cpu, then the
/// two share a directory).
const V1_CONTROLLERS: &[&str] = &["memory", "cpu", "cpuacct", "pids", "freezer"];

/// How long freezing, or emptying a cgroup with SIGKILL, may take.
const SETTLE: Duration = Duration::from_secs(10);

/// Host cgroup errors, one line each, naming the config field at stake.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// a limit needs a controller this host does not offer
    #[error(
        "config.json: {field}: the host has no {controller} cgroup controller to apply it with"
    )]
    NoController {
        /// the field, in the spec's JSON spelling
        field: &'static str,
        /// the controller's name
        controller: &'static str,
    },
    /// `linux.cgroupsPath` cannot be used
    #[error("config.json: linux.cgroupsPath: {0}")]
    Path(String),
    /// writing a cgroup file or making a cgroup directory failed
    #[error("{what} {path}: {source}")]
    Io {
        /// what was being done, starting with the field where one is at stake
        what: String,
        /// the file or directory
        path: PathBuf,
        /// the host's answer
        source: std::io::Error,
    },
    /// the freezer did not settle
    #[error("cgroup {0}: {1}")]
    Stuck(PathBuf, &'static str),
    /// pause or resume of a sandbox without a freezer
    #[error(
        "the sandbox has no cgroup freezer (the host offers none, or no cgroup could be made)"
    )]
    NoFreezer,
}

fn io(what: impl Into<String>, path: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let (what, path) = (what.into(), path.to_path_buf());
    move |source| Error::Io { what, path, source }
}

/// The limits of `linux.resources` the sandbox's cgroup applies. Memory
/// values are bytes, -1 for no limit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// `memory.limit`
    pub memory: Option<i64>,
    /// `memory.reservation` (a soft limit)
    pub memory_reservation: Option<i64>,
    /// `memory.swap`: memory plus swap, in the spec's (v1) sense
    pub memory_swap: Option<i64>,
    /// `cpu.shares`, a relative weight (1024 is v1's default)
    pub cpu_shares: Option<u64>,
    /// `cpu.quota` in microseconds per period, -1 for none
    pub cpu_quota: Option<i64>,
    /// `cpu.period` in microseconds
    pub cpu_period: Option<u64>,
    /// `pids.limit`, -1 for none
    pub pids: Option<i64>,
    /// `cpu.cpus`, a kernel CPU list (`0-3,6`)
    pub cpuset_cpus: Option<String>,
    /// `cpu.mems`, a kernel node list
    pub cpuset_mems: Option<String>,
}

impl Limits {
    fn wants_memory(&self) -> bool {
        self.memory.is_some() || self.memory_reservation.is_some() || self.memory_swap.is_some()
    }

    fn wants_cpu(&self) -> bool {
        self.cpu_shares.is_some() || self.cpu_quota.is_some() || self.cpu_period.is_some()
    }

    fn wants_cpuset(&self) -> bool {
        self.cpuset_cpus.is_some() || self.cpuset_mems.is_some()
    }

    /// Whether the Sentry can hold every limit set here without a host
    /// cgroup: memory (its own watcher; with no swap, `swap` adds nothing
    /// and `reservation` is soft), pids (its task count), a CPU quota
    /// (its throttle) and a CPU set (its threads' affinity), not
    /// `cpu.shares` (a weight among the host's cgroups).
    pub fn sentry_can_hold(&self) -> bool {
        self.cpu_shares.is_none()
    }

    /// Whether any limit is set (then the cgroup is required, not a
    /// convenience for `pause`).
    pub fn any(&self) -> bool {
        self.wants_memory() || self.wants_cpu() || self.wants_cpuset() || self.pids.is_some()
    }
}

/// runc's byte counts: a number with an optional k, m, g or t suffix
/// (powers of 1024, an optional trailing b), or -1 for no limit.
pub fn parse_bytes(s: &str) -> Option<i64> {
    if s == "-1" {
        return Some(-1);
    }
    let lower = s.trim().to_ascii_lowercase();
    let lower = lower.strip_suffix('b').unwrap_or(&lower);
    let (num, shift) = match lower.char_indices().last() {
        Some((i, 'k')) => (&lower[..i], 10),
        Some((i, 'm')) => (&lower[..i], 20),
        Some((i, 'g')) => (&lower[..i], 30),
        Some((i, 't')) => (&lower[..i], 40),
        _ => (lower, 0),
    };
    let n: i64 = num.trim().parse().ok().filter(|n| *n >= 0)?;
    n.checked_mul(1 << shift)
}

/// A sandbox's cgroup, as recorded in the container's state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cgroup {
    /// the sandbox's directory in each hierarchy (one on v2)
    pub dirs: Vec<PathBuf>,
    /// the directories this runtime made, parents first: only these are
    /// removed
    pub made: Vec<PathBuf>,
    /// the directory whose freezer pauses the sandbox
    pub freezer: Option<PathBuf>,
    /// cgroup v2 rather than v1
    pub v2: bool,
}

/// The cgroup path below a hierarchy's root or the caller's cgroup:
/// `linux.cgroupsPath` if given, else `ferrovisor/ID-SCOPE`. Returns whether
/// it is absolute, and its components.
fn inner_path(given: Option<&Path>, id: &str, scope: &str) -> Result<(bool, PathBuf), Error> {
    let Some(p) = given else {
        return Ok((false, Path::new("ferrovisor").join(format!("{id}-{scope}"))));
    };
    let text = p.to_string_lossy();
    if text.contains(':') {
        return Err(Error::Path(format!(
            "\"{text}\" is a systemd slice:prefix:name path; ferrovisor manages cgroupfs \
             directly (give a path like /ferrovisor/{id})"
        )));
    }
    let mut inner = PathBuf::new();
    for c in p.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(n) => inner.push(n),
            _ => return Err(Error::Path(format!("\"{text}\": no . or .. components"))),
        }
    }
    if inner.as_os_str().is_empty() {
        return Err(Error::Path(format!(
            "\"{text}\" names the root cgroup (give a cgroup of the container's own)"
        )));
    }
    Ok((p.is_absolute(), inner))
}

/// A short name for state root `root` (FNV-1a of its canonical path, 12 hex
/// digits): the default cgroups of two state roots' same-named containers
/// differ, since `delete` kills everything in its container's cgroup.
pub fn scope_of(root: &Path) -> String {
    let canonical = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in canonical.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{:012x}", h >> 16)
}

/// The caller's cgroup in the hierarchy whose `/proc/self/cgroup` line
/// matches `wanted` (a v1 controller, or `""` for v2's `0::` line).
fn own_cgroup(wanted: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        let hit = if wanted.is_empty() {
            ctrls.is_empty()
        } else {
            ctrls.split(',').any(|c| c == wanted)
        };
        hit.then(|| PathBuf::from(path))
    })
}

/// The v1 hierarchy of `controller`: its mount point and the cgroup path
/// its root is (not `/` inside a cgroup namespace's bind mounts).
fn v1_mount(controller: &str) -> Option<(PathBuf, PathBuf)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().find_map(|l| {
        // proc_pid_mountinfo(5): ID PARENT MAJ:MIN ROOT POINT OPTS... - TYPE SOURCE SUPER
        let (head, tail) = l.split_once(" - ")?;
        let mut t = tail.split(' ');
        let (typ, super_opts) = (t.next()?, t.nth(1)?);
        if typ != "cgroup" || !super_opts.split(',').any(|o| o == controller) {
            return None;
        }
        let h: Vec<&str> = head.split(' ').collect();
        Some((PathBuf::from(h.get(4)?), PathBuf::from(h.get(3)?)))
    })
}

/// `base/inner` where `base` is the hierarchy root for an absolute path,
/// else the caller's cgroup `own` (seen from a mount whose root is `root`).
fn place(mount: &Path, root: &Path, own: Option<PathBuf>, absolute: bool, inner: &Path) -> PathBuf {
    let mut dir = mount.to_path_buf();
    if !absolute {
        if let Some(rel) = own.as_deref().and_then(|o| o.strip_prefix(root).ok()) {
            dir.push(rel);
        }
    }
    dir.join(inner)
}

/// The first of `controllers` (field, controller) that `dir`'s
/// `cgroup.controllers` lacks.
fn missing_v2(dir: &Path, wanted: &[(&'static str, &'static str)]) -> Option<Error> {
    let have = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
    wanted
        .iter()
        .find(|(_, c)| !have.split_whitespace().any(|h| h == *c))
        .map(|&(field, controller)| Error::NoController { field, controller })
}

impl Cgroup {
    /// Makes the cgroup of container `id` of the state root named `scope`
    /// ([`scope_of`]) at `path` (`linux.cgroupsPath`) and writes `limits`
    /// into it. On failure nothing is left behind.
    pub fn create(
        id: &str,
        scope: &str,
        path: Option<&Path>,
        limits: &Limits,
    ) -> Result<Cgroup, Error> {
        let (absolute, inner) = inner_path(path, id, scope)?;
        let shared = path.is_none();
        let mut cg = Cgroup::default();
        let made = if Path::new(V2_ROOT).join("cgroup.controllers").exists() {
            cg.v2 = true;
            cg.make_v2(absolute, &inner, limits, shared)
        } else {
            cg.make_v1(absolute, &inner, limits, shared)
        };
        match made {
            Ok(()) => Ok(cg),
            Err(e) => {
                let _ = cg.destroy();
                Err(e)
            }
        }
    }

    /// Makes `dir` and any missing parents, recording what it made. A
    /// directory that exists must hold no process: `delete` kills
    /// everything in the sandbox's cgroup. With `shared_parent` (the
    /// default `ferrovisor/ID-SCOPE`), the parent counts as made here too, so
    /// that the last sandbox to go removes it.
    fn make_dir(&mut self, dir: &Path, shared_parent: bool) -> Result<(), Error> {
        let mut attempts = 0;
        'again: loop {
            let missing: Vec<&Path> = dir.ancestors().take_while(|d| !d.exists()).collect();
            for d in missing.into_iter().rev() {
                match std::fs::create_dir(d) {
                    Ok(()) => self.made.push(d.to_path_buf()),
                    Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                    // Another sandbox's delete removed the shared parent
                    // between our look and our mkdir.
                    Err(e) if e.kind() == ErrorKind::NotFound && attempts < 3 => {
                        attempts += 1;
                        continue 'again;
                    }
                    Err(e) => return Err(io("making cgroup", d)(e)),
                }
            }
            break;
        }
        if let Some(parent) = dir.parent().filter(|_| shared_parent) {
            if !self.made.iter().any(|m| m == parent) {
                let at = self
                    .made
                    .iter()
                    .position(|m| m == dir)
                    .unwrap_or(self.made.len());
                self.made.insert(at, parent.to_path_buf());
            }
        }
        if !self.made.iter().any(|m| m == dir) && !procs(dir).is_empty() {
            return Err(Error::Path(format!(
                "{} already holds processes (give a cgroup of the container's own)",
                dir.display()
            )));
        }
        self.dirs.push(dir.to_path_buf());
        Ok(())
    }

    fn make_v1(
        &mut self,
        absolute: bool,
        inner: &Path,
        limits: &Limits,
        shared: bool,
    ) -> Result<(), Error> {
        let mut memory = None;
        let mut cpu = None;
        let mut pids = None;
        for &controller in V1_CONTROLLERS {
            let (field, needed) = match controller {
                "memory" => ("linux.resources.memory", limits.wants_memory()),
                "cpu" => ("linux.resources.cpu", limits.wants_cpu()),
                "pids" => ("linux.resources.pids", limits.pids.is_some()),
                _ => ("", false),
            };
            let Some((mount, root)) = v1_mount(controller) else {
                if needed {
                    return Err(Error::NoController { field, controller });
                }
                continue;
            };
            let dir = place(&mount, &root, own_cgroup(controller), absolute, inner);
            // Controllers mounted together (cpu,cpuacct) share a directory.
            if !self.dirs.contains(&dir) {
                self.make_dir(&dir, shared)?;
            }
            match controller {
                "memory" => memory = Some(dir),
                "cpu" => cpu = Some(dir),
                "pids" => pids = Some(dir),
                "freezer" => self.freezer = Some(dir),
                _ => {}
            }
        }
        // A v1 cpuset starts with no CPUs and no nodes, and no task may
        // join it so: joined only when asked for, each new level filled
        // from its parent before the sandbox's own set is written.
        if limits.wants_cpuset() {
            let (field, controller) = ("linux.resources.cpu.cpus", "cpuset");
            let (mount, root) =
                v1_mount(controller).ok_or(Error::NoController { field, controller })?;
            let dir = place(&mount, &root, own_cgroup(controller), absolute, inner);
            if !self.dirs.contains(&dir) {
                self.make_dir(&dir, shared)?;
            }
            let mut levels: Vec<&Path> = dir
                .ancestors()
                .take_while(|a| a.starts_with(&mount) && *a != mount)
                .collect();
            levels.reverse();
            for d in levels {
                for file in ["cpuset.cpus", "cpuset.mems"] {
                    let now = std::fs::read_to_string(d.join(file)).unwrap_or_default();
                    if now.trim().is_empty() {
                        let parent = d.parent().unwrap_or(&mount).join(file);
                        let from = std::fs::read_to_string(&parent)
                            .map_err(io(format!("{field}: reading"), &parent))?;
                        set(d, file, Some(from.trim()), field)?;
                    }
                }
            }
            write_cpuset(&dir, limits)?;
        }
        write_v1(memory.as_deref(), cpu.as_deref(), pids.as_deref(), limits)
    }

    fn make_v2(
        &mut self,
        absolute: bool,
        inner: &Path,
        limits: &Limits,
        shared: bool,
    ) -> Result<(), Error> {
        let root = Path::new(V2_ROOT);
        let own = own_cgroup("").map(|o| o.parent().map(Path::to_path_buf).unwrap_or(o));
        let dir = place(root, Path::new("/"), own, absolute, inner);
        let wanted = wanted_v2(limits);
        if let Some(e) = missing_v2(root, &wanted) {
            return Err(e);
        }
        self.make_dir(&dir, shared)?;
        self.freezer = Some(dir.clone());
        enable_v2(root, &dir, &wanted)?;
        write_v2(&dir, limits)
    }

    /// Changes the limits of a sandbox's cgroup (`update`): those set in
    /// `limits` are written, the others left as they are.
    pub fn update(&self, limits: &Limits) -> Result<(), Error> {
        if self.v2 {
            let dir = self.dirs.first().ok_or(Error::NoController {
                field: "linux.resources",
                controller: "any",
            })?;
            let wanted = wanted_v2(limits);
            enable_v2(Path::new(V2_ROOT), dir, &wanted)?;
            if let Some(e) = missing_v2(dir, &wanted) {
                return Err(e);
            }
            return write_v2(dir, limits);
        }
        // Each v1 hierarchy's directory is known by the files of its
        // controller.
        let with = |file: &str| self.dirs.iter().find(|d| d.join(file).exists());
        let memory = with("memory.limit_in_bytes");
        let cpu = with("cpu.shares");
        let pids = with("pids.max");
        for (needed, found, field, controller) in [
            (
                limits.wants_memory(),
                memory,
                "linux.resources.memory",
                "memory",
            ),
            (limits.wants_cpu(), cpu, "linux.resources.cpu", "cpu"),
            (limits.pids.is_some(), pids, "linux.resources.pids", "pids"),
        ] {
            if needed && found.is_none() {
                return Err(Error::NoController { field, controller });
            }
        }
        write_v1(
            memory.map(PathBuf::as_path),
            cpu.map(PathBuf::as_path),
            pids.map(PathBuf::as_path),
            limits,
        )
    }

    /// Moves process `pid` (all its threads) into the cgroup.
    pub fn add(&self, pid: i32) -> Result<(), Error> {
        for d in &self.dirs {
            std::fs::write(d.join("cgroup.procs"), pid.to_string())
                .map_err(io(format!("moving the sandbox (pid {pid}) into"), d))?;
        }
        Ok(())
    }

    /// Stops every process of the sandbox, and returns once all are
    /// stopped.
    pub fn freeze(&self) -> Result<(), Error> {
        let dir = self.freezer.as_deref().ok_or(Error::NoFreezer)?;
        let (file, value) = self.freeze_file(true);
        std::fs::write(dir.join(file), value).map_err(io("freezing", dir))?;
        let deadline = Instant::now() + SETTLE;
        while !self.frozen(dir) {
            if Instant::now() > deadline {
                let _ = self.thaw();
                return Err(Error::Stuck(dir.into(), "did not freeze (thawed again)"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    /// Lets a frozen sandbox run again.
    pub fn thaw(&self) -> Result<(), Error> {
        let dir = self.freezer.as_deref().ok_or(Error::NoFreezer)?;
        let (file, value) = self.freeze_file(false);
        std::fs::write(dir.join(file), value).map_err(io("thawing", dir))
    }

    fn freeze_file(&self, freeze: bool) -> (&'static str, &'static str) {
        match (self.v2, freeze) {
            (true, true) => ("cgroup.freeze", "1"),
            (true, false) => ("cgroup.freeze", "0"),
            (false, true) => ("freezer.state", "FROZEN"),
            (false, false) => ("freezer.state", "THAWED"),
        }
    }

    fn frozen(&self, dir: &Path) -> bool {
        if self.v2 {
            std::fs::read_to_string(dir.join("cgroup.events"))
                .is_ok_and(|e| e.lines().any(|l| l == "frozen 1"))
        } else {
            // FREEZING until every task has stopped.
            std::fs::read_to_string(dir.join("freezer.state")).is_ok_and(|s| s.trim() == "FROZEN")
        }
    }

    /// What the cgroup has counted so far.
    pub fn stats(&self) -> Stats {
        match (self.v2, self.dirs.first()) {
            (true, Some(dir)) => stats_v2(dir),
            _ => stats_v1(&self.dirs),
        }
    }

    /// Whether the host's OOM killer has killed a process of the sandbox
    /// for going over its memory limit.
    pub fn oom_killed(&self) -> bool {
        self.dirs.iter().any(|d| {
            ["memory.events", "memory.oom_control"].iter().any(|f| {
                std::fs::read_to_string(d.join(f)).is_ok_and(|t| {
                    t.lines()
                        .filter_map(|l| l.strip_prefix("oom_kill "))
                        .any(|n| n.trim().parse::<u64>().is_ok_and(|n| n > 0))
                })
            })
        })
    }

    /// Kills every process left in the cgroup and removes the directories
    /// this runtime made. Removing a cgroup that is already gone is not an
    /// error.
    pub fn destroy(&self) -> Result<(), Error> {
        // Frozen tasks do not act on SIGKILL (v1) until thawed.
        if self.freezer.as_deref().is_some_and(Path::exists) {
            let _ = self.thaw();
        }
        let deadline = Instant::now() + SETTLE;
        loop {
            let left: Vec<(&PathBuf, i32)> = self
                .dirs
                .iter()
                .flat_map(|d| procs(d).into_iter().map(move |p| (d, p)))
                .collect();
            let Some((dir, _)) = left.first() else { break };
            if Instant::now() > deadline {
                return Err(Error::Stuck(
                    dir.to_path_buf(),
                    "processes outlived SIGKILL",
                ));
            }
            for (_, pid) in &left {
                let _ = crate::sys::kill(*pid, libc::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        for d in self.made.iter().rev() {
            match std::fs::remove_dir(d) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                // A parent shared with other sandboxes stays.
                Err(_) if !self.dirs.contains(d) => {}
                Err(e) => return Err(io("removing cgroup", d)(e)),
            }
        }
        Ok(())
    }
}

/// What the sandbox's cgroup has counted, for `stats` (containerd's
/// metrics): every host process of the sandbox, the Sentry included.
/// `None` where the host offers no such counter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// memory in use, bytes (v1 `memory.usage_in_bytes`, v2 `memory.current`)
    pub memory_usage: Option<u64>,
    /// the memory limit, bytes (`u64::MAX` for none, as v1 spells it)
    pub memory_limit: Option<u64>,
    /// the most memory ever in use, bytes (v1 `memory.max_usage_in_bytes`,
    /// v2 `memory.peak`)
    pub memory_max_usage: Option<u64>,
    /// CPU time, nanoseconds: total, user, kernel
    pub cpu_total_ns: Option<u64>,
    /// CPU time in user mode, nanoseconds
    pub cpu_user_ns: Option<u64>,
    /// CPU time in the kernel, nanoseconds
    pub cpu_kernel_ns: Option<u64>,
    /// host tasks (threads) in the cgroup
    pub pids_current: Option<u64>,
    /// the host tasks limit (0 for none, as containerd reports it)
    pub pids_limit: Option<u64>,
}

/// Reads a file of one number (or `max`, read as `max_as`).
fn read_number(path: &Path, max_as: u64) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    match text.trim() {
        "max" => Some(max_as),
        n => n.parse().ok(),
    }
}

/// The value of `key` in a flat keyed file (`cpu.stat`, `cpuacct.stat`).
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// USER_HZ: the unit of v1's `cpuacct.stat` (fixed at 100 on Linux,
/// whatever the kernel's HZ).
const USER_HZ_NS: u64 = 10_000_000;

/// The counters of a v1 sandbox, whose directories are `dirs` (one per
/// hierarchy; each file is read where its controller put it).
fn stats_v1(dirs: &[PathBuf]) -> Stats {
    let first =
        |file: &str, max_as: u64| dirs.iter().find_map(|d| read_number(&d.join(file), max_as));
    let cpu_stat = dirs
        .iter()
        .find_map(|d| std::fs::read_to_string(d.join("cpuacct.stat")).ok())
        .unwrap_or_default();
    // v1 reports "no limit" as the largest page-aligned value; say u64::MAX.
    let limit =
        first("memory.limit_in_bytes", u64::MAX).map(|l| if l >= (1 << 62) { u64::MAX } else { l });
    Stats {
        memory_usage: first("memory.usage_in_bytes", 0),
        memory_limit: limit,
        memory_max_usage: first("memory.max_usage_in_bytes", 0),
        cpu_total_ns: first("cpuacct.usage", 0),
        cpu_user_ns: keyed(&cpu_stat, "user").map(|t| t * USER_HZ_NS),
        cpu_kernel_ns: keyed(&cpu_stat, "system").map(|t| t * USER_HZ_NS),
        pids_current: first("pids.current", 0),
        pids_limit: first("pids.max", 0),
    }
}

/// The counters of a v2 sandbox whose cgroup is `dir`.
fn stats_v2(dir: &Path) -> Stats {
    let cpu_stat = std::fs::read_to_string(dir.join("cpu.stat")).unwrap_or_default();
    let usec = |key: &str| keyed(&cpu_stat, key).map(|us| us * 1000);
    Stats {
        memory_usage: read_number(&dir.join("memory.current"), 0),
        memory_limit: read_number(&dir.join("memory.max"), u64::MAX),
        memory_max_usage: read_number(&dir.join("memory.peak"), 0),
        cpu_total_ns: usec("usage_usec"),
        cpu_user_ns: usec("user_usec"),
        cpu_kernel_ns: usec("system_usec"),
        pids_current: read_number(&dir.join("pids.current"), 0),
        pids_limit: read_number(&dir.join("pids.max"), 0),
    }
}

/// Host tasks of a sandbox beyond those its guest tasks need: the Sentry's
/// own threads (about 13 idle), the gofers, the first stub, with room to
/// spare.
const SANDBOX_HOST_TASKS: i64 = 64;

/// The host cgroup's `pids.max` for a guest `pids.limit` of `n` (-1: none).
/// The Sentry enforces `n` on guest tasks itself (runc's semantics); the
/// host limit is a backstop that a correct Sentry never reaches: each guest
/// task runs on a Sentry thread, and each guest process has a stub.
fn host_pids_max(n: i64) -> String {
    if n < 0 {
        "max".to_string()
    } else {
        n.saturating_mul(2)
            .saturating_add(SANDBOX_HOST_TASKS)
            .to_string()
    }
}

/// The v2 `cpu.weight` for v1 `cpu.shares`: the linear map of shares
/// [2, 262144] onto weights [1, 10000] that runc uses, so that engines
/// which only speak shares get the same relative weights as under runc.
fn cpu_weight(shares: u64) -> u64 {
    1 + (shares.clamp(2, 262_144) - 2) * 9999 / 262_142
}

/// Writes `value` to `dir/file` when set.
fn set(dir: &Path, file: &str, value: Option<impl ToString>, field: &str) -> Result<(), Error> {
    let Some(value) = value else { return Ok(()) };
    let value = value.to_string();
    let path = dir.join(file);
    std::fs::write(&path, &value).map_err(io(format!("{field}: writing {value} to"), &path))
}

/// The v2 controllers (field, controller) that `limits` need.
fn wanted_v2(limits: &Limits) -> Vec<(&'static str, &'static str)> {
    let mut wanted = Vec::new();
    if limits.wants_memory() {
        wanted.push(("linux.resources.memory", "memory"));
    }
    if limits.wants_cpu() {
        wanted.push(("linux.resources.cpu", "cpu"));
    }
    if limits.pids.is_some() {
        wanted.push(("linux.resources.pids", "pids"));
    }
    if limits.wants_cpuset() {
        wanted.push(("linux.resources.cpu.cpus", "cpuset"));
    }
    wanted
}

/// Writes the CPU and memory node lists into a cpuset cgroup (both
/// hierarchies name the files alike).
fn write_cpuset(dir: &Path, limits: &Limits) -> Result<(), Error> {
    let cpus = limits.cpuset_cpus.as_deref();
    set(dir, "cpuset.cpus", cpus, "linux.resources.cpu.cpus")?;
    let mems = limits.cpuset_mems.as_deref();
    set(dir, "cpuset.mems", mems, "linux.resources.cpu.mems")
}

/// Has every cgroup between v2 root `root` and `dir` hand the `wanted`
/// controllers down, so that `dir` has their files.
fn enable_v2(
    root: &Path,
    dir: &Path,
    wanted: &[(&'static str, &'static str)],
) -> Result<(), Error> {
    let parents: Vec<&Path> = dir
        .ancestors()
        .skip(1)
        .take_while(|a| a.starts_with(root))
        .collect();
    for p in parents.into_iter().rev() {
        for &(field, controller) in wanted {
            if let Some(e) = missing_v2(p, &[(field, controller)]) {
                return Err(e);
            }
            let file = p.join("cgroup.subtree_control");
            let on = std::fs::read_to_string(&file)
                .is_ok_and(|t| t.split_whitespace().any(|c| c == controller));
            if !on {
                std::fs::write(&file, format!("+{controller}")).map_err(io(
                    format!("{field}: enabling the {controller} controller in"),
                    &file,
                ))?;
            }
        }
    }
    Ok(())
}

/// Writes `limits` into v1 directories of the memory, cpu and pids
/// hierarchies (those the host has); unset limits are left as they are.
fn write_v1(
    memory: Option<&Path>,
    cpu: Option<&Path>,
    pids: Option<&Path>,
    limits: &Limits,
) -> Result<(), Error> {
    if let Some(d) = memory {
        // memory+swap may never be below the memory limit: raising both
        // needs memsw first, lowering both the limit first.
        let limit = || {
            set(
                d,
                "memory.limit_in_bytes",
                limits.memory,
                "linux.resources.memory.limit",
            )
        };
        let swap = || {
            set(
                d,
                "memory.memsw.limit_in_bytes",
                limits.memory_swap,
                "linux.resources.memory.swap",
            )
        };
        if limit().is_err() {
            swap()?;
            limit()?;
        } else {
            swap()?;
        }
        set(
            d,
            "memory.soft_limit_in_bytes",
            limits.memory_reservation,
            "linux.resources.memory.reservation",
        )?;
    }
    if let Some(d) = cpu {
        set(
            d,
            "cpu.shares",
            limits.cpu_shares,
            "linux.resources.cpu.shares",
        )?;
        set(
            d,
            "cpu.cfs_period_us",
            limits.cpu_period,
            "linux.resources.cpu.period",
        )?;
        set(
            d,
            "cpu.cfs_quota_us",
            limits.cpu_quota,
            "linux.resources.cpu.quota",
        )?;
    }
    if let Some(d) = pids {
        let max = limits.pids.map(host_pids_max);
        set(d, "pids.max", max, "linux.resources.pids.limit")?;
    }
    Ok(())
}

/// Writes `limits` into v2 cgroup `dir`; unset limits are left as they
/// are (a memory+swap limit is figured against the memory limit already
/// there when no new one is given, a CPU period against the quota there).
fn write_v2(dir: &Path, limits: &Limits) -> Result<(), Error> {
    let unlimited = |v: i64| {
        if v < 0 {
            "max".to_string()
        } else {
            v.to_string()
        }
    };
    set(
        dir,
        "memory.max",
        limits.memory.map(unlimited),
        "linux.resources.memory.limit",
    )?;
    set(
        dir,
        "memory.low",
        limits.memory_reservation.map(unlimited),
        "linux.resources.memory.reservation",
    )?;
    // v2 limits swap alone; the spec's swap is memory plus swap.
    let memory = limits.memory.or_else(|| {
        std::fs::read_to_string(dir.join("memory.max"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
    });
    let swap = match (limits.memory_swap, memory) {
        (None, _) => None,
        (Some(s), _) if s < 0 => Some("max".to_string()),
        (Some(s), Some(m)) if m > 0 && s >= m => Some((s - m).to_string()),
        (Some(_), _) => {
            return Err(Error::Path(
                "linux.resources.memory.swap: needs a memory.limit no larger than it".into(),
            ))
        }
    };
    set(dir, "memory.swap.max", swap, "linux.resources.memory.swap")?;
    let weight = limits.cpu_shares.map(cpu_weight);
    set(dir, "cpu.weight", weight, "linux.resources.cpu.shares")?;
    // cpu.max is "QUOTA PERIOD" (QUOTA "max" for none); what is not
    // given stays as it is.
    let now = std::fs::read_to_string(dir.join("cpu.max")).unwrap_or_default();
    let mut now = now.split_whitespace();
    let (now_quota, now_period) = (now.next().unwrap_or("max"), now.next().unwrap_or("100000"));
    let max = match (limits.cpu_quota, limits.cpu_period) {
        (None, None) => None,
        (q, p) => {
            let q = match q {
                Some(q) if q > 0 => q.to_string(),
                Some(_) => "max".to_string(),
                None => now_quota.to_string(),
            };
            let p = p.map_or(now_period.to_string(), |p| p.to_string());
            Some(format!("{q} {p}"))
        }
    };
    set(dir, "cpu.max", max, "linux.resources.cpu.quota")?;
    let max = limits.pids.map(host_pids_max);
    set(dir, "pids.max", max, "linux.resources.pids.limit")?;
    write_cpuset(dir, limits)
}

/// The processes in cgroup `dir`.
fn procs(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_map_onto_weights() {
        assert_eq!(cpu_weight(2), 1);
        assert_eq!(cpu_weight(1024), 39);
        assert_eq!(cpu_weight(262_144), 10_000);
        assert_eq!(cpu_weight(1 << 30), 10_000);
    }

    #[test]
    fn v2_counters_are_read_like_containerd_reports_them() {
        let dir = std::env::temp_dir().join(format!("ferrovisor-cg-v2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let files = [
            ("cgroup.controllers", "cpu memory pids\n"),
            ("memory.current", "48205824\n"),
            ("memory.max", "max\n"),
            ("memory.peak", "50331648\n"),
            (
                "cpu.stat",
                "usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\n\
                 nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
            ),
            ("pids.current", "14\n"),
            ("pids.max", "64\n"),
        ];
        for (name, text) in files {
            std::fs::write(dir.join(name), text).expect("write");
        }
        let got = stats_v2(&dir);
        assert_eq!(
            got,
            Stats {
                memory_usage: Some(48_205_824),
                memory_limit: Some(u64::MAX),
                memory_max_usage: Some(50_331_648),
                cpu_total_ns: Some(1_234_567_000),
                cpu_user_ns: Some(1_000_000_000),
                cpu_kernel_ns: Some(234_567_000),
                pids_current: Some(14),
                pids_limit: Some(64),
            }
        );
        // A limit, and controllers the host does not offer.
        std::fs::write(dir.join("memory.max"), "268435456\n").expect("write");
        for gone in ["cpu.stat", "pids.current", "pids.max", "memory.peak"] {
            std::fs::remove_file(dir.join(gone)).expect("rm");
        }
        let got = stats_v2(&dir);
        assert_eq!(got.memory_limit, Some(268_435_456));
        assert_eq!((got.cpu_total_ns, got.pids_current), (None, None));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn v1_counters_come_from_each_hierarchy() {
        let base = std::env::temp_dir().join(format!("ferrovisor-cg-v1-{}", std::process::id()));
        let (mem, acct, pids) = (base.join("memory"), base.join("cpuacct"), base.join("pids"));
        for d in [&mem, &acct, &pids] {
            std::fs::create_dir_all(d).expect("temp dir");
        }
        std::fs::write(mem.join("memory.usage_in_bytes"), "4096000\n").expect("write");
        std::fs::write(mem.join("memory.limit_in_bytes"), "9223372036854771712\n").expect("w");
        std::fs::write(acct.join("cpuacct.usage"), "987654321\n").expect("write");
        std::fs::write(acct.join("cpuacct.stat"), "user 70\nsystem 25\n").expect("write");
        std::fs::write(pids.join("pids.current"), "13\n").expect("write");
        std::fs::write(pids.join("pids.max"), "max\n").expect("write");
        let got = stats_v1(&[mem, acct, pids]);
        assert_eq!(got.memory_usage, Some(4_096_000));
        assert_eq!(got.memory_limit, Some(u64::MAX));
        assert_eq!(got.cpu_total_ns, Some(987_654_321));
        assert_eq!(got.cpu_user_ns, Some(700_000_000));
        assert_eq!(got.cpu_kernel_ns, Some(250_000_000));
        assert_eq!((got.pids_current, got.pids_limit), (Some(13), Some(0)));
        std::fs::remove_dir_all(&base).expect("cleanup");
    }

    #[test]
    fn state_roots_name_different_scopes() {
        let a = scope_of(Path::new("/run/ferrovisor-a"));
        let b = scope_of(Path::new("/run/ferrovisor-b"));
        assert_ne!(a, b);
        assert_eq!(a, scope_of(Path::new("/run/ferrovisor-a")));
        assert_eq!(a.len(), 12);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
    }

    #[test]
    fn paths_follow_runc() {
        let p = |s: &str| inner_path(Some(Path::new(s)), "c1", "0123456789ab");
        assert_eq!(
            inner_path(None, "c1", "0123456789ab").ok(),
            Some((false, "ferrovisor/c1-0123456789ab".into()))
        );
        assert_eq!(p("/docker/abc").ok(), Some((true, "docker/abc".into())));
        assert_eq!(p("a/b").ok(), Some((false, "a/b".into())));
        for bad in ["/", "/a/../b", "system.slice:docker:abc", "./x"] {
            let e = p(bad).expect_err(bad).to_string();
            assert!(e.contains("linux.cgroupsPath") && !e.contains('\n'), "{e}");
        }
        let dir = place(
            Path::new("/sys/fs/cgroup/memory"),
            Path::new("/"),
            Some("/user/1".into()),
            false,
            Path::new("ferrovisor/c1"),
        );
        assert_eq!(dir, Path::new("/sys/fs/cgroup/memory/user/1/ferrovisor/c1"));
        let dir = place(
            Path::new("/sys/fs/cgroup/memory"),
            Path::new("/"),
            Some("/user/1".into()),
            true,
            Path::new("x"),
        );
        assert_eq!(dir, Path::new("/sys/fs/cgroup/memory/x"));
    }
    #[test]
    fn v2_updates_write_only_what_changes() {
        let dir = std::env::temp_dir().join(format!("ferrovisor-cg-upd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).expect(f);
        // What a fresh v2 cgroup holds, and a memory limit from create.
        for (name, text) in [
            ("memory.max", "268435456\n"),
            ("memory.swap.max", "max\n"),
            ("cpu.max", "max 100000\n"),
            ("cpu.weight", "100\n"),
            ("pids.max", "max\n"),
        ] {
            std::fs::write(dir.join(name), text).expect("write");
        }
        let pids = Limits {
            pids: Some(5),
            ..Limits::default()
        };
        write_v2(&dir, &pids).expect("pids");
        assert_eq!(read("pids.max"), host_pids_max(5));
        assert_eq!(read("memory.max"), "268435456\n", "memory untouched");
        assert_eq!(read("cpu.max"), "max 100000\n", "cpu untouched");

        // Swap alone is figured against the memory limit already there.
        let swap = Limits {
            memory_swap: Some(300 << 20),
            ..Limits::default()
        };
        write_v2(&dir, &swap).expect("swap");
        assert_eq!(
            read("memory.swap.max"),
            ((300 << 20) - 268_435_456).to_string()
        );

        let both = Limits {
            memory: Some(64 << 20),
            cpu_quota: Some(50_000),
            cpu_shares: Some(1024),
            ..Limits::default()
        };
        write_v2(&dir, &both).expect("memory and cpu");
        assert_eq!(read("memory.max"), (64u64 << 20).to_string());
        assert_eq!(read("cpu.max"), "50000 100000");
        assert_eq!(read("cpu.weight"), "39");
        // A new period keeps the quota; -1 lifts limits.
        let period = Limits {
            cpu_period: Some(200_000),
            memory: Some(-1),
            pids: Some(-1),
            ..Limits::default()
        };
        write_v2(&dir, &period).expect("period");
        assert_eq!(read("cpu.max"), "50000 200000");
        assert_eq!(read("memory.max"), "max");
        assert_eq!(read("pids.max"), "max");

        // memory+swap below memory is refused, naming the field.
        std::fs::write(dir.join("memory.max"), "max\n").expect("write");
        let bad = Limits {
            memory_swap: Some(1 << 20),
            ..Limits::default()
        };
        let e = write_v2(&dir, &bad).expect_err("swap without a limit");
        assert!(e.to_string().contains("linux.resources.memory.swap"), "{e}");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
