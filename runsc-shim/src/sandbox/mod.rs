//! Named, long-lived sandboxes for agents (`ferrovisor sandbox ...`,
//! `serve`, `mcp`). Each is a `ferrovisor do --init` process in the
//! background, whose first process is the Sentry's own init; programs come
//! in through its control socket. This module is the one implementation
//! that the CLI, the HTTP API ([`api`]) and the MCP server ([`mcp`]) share.
//!
//! A sandbox's state directory (`<state root>/.sandboxes/NAME`, root's)
//! holds `sandbox.json` (what it was made with, its host process), the
//! control socket and `log` (what the sandbox's host process said).

pub mod api;
pub mod cli;
pub mod files;
pub mod http;
pub mod image;
pub mod mcp;
pub mod ports;

use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::control;

/// The folder of sandboxes under the state root (a dot name: never a
/// container id).
const FOLDER: &str = ".sandboxes";
const META: &str = "sandbox.json";
const LOG: &str = "log";
/// The key of the unpacked image a sandbox's root is (`create --image`).
const IMAGE_KEY: &str = "image";

/// What goes wrong, each said for a person.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Usage(String),
    #[error("no sandbox named {0:?} (see 'ferrovisor sandbox ls')")]
    NotFound(String),
    #[error("a sandbox named {0:?} exists already (remove it with 'ferrovisor sandbox rm')")]
    Exists(String),
    #[error("the sandbox {name:?} has ended{}", why.as_deref().map(|w| format!(": {w}")).unwrap_or_default())]
    Ended { name: String, why: Option<String> },
    #[error("the sandbox {name:?} did not start: {why}")]
    Start { name: String, why: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Control(#[from] control::Error),
    /// a guest program that a file operation ran failed
    #[error("{0}")]
    Guest(String),
    /// a guest path that is not there
    #[error("{0}: no such file or directory in the sandbox")]
    NoSuchFile(String),
    #[error("{0}")]
    NotSupported(String),
}

impl Error {
    fn io(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> Error {
        let what = what.to_string();
        move |source| Error::Io { what, source }
    }
}

/// How a sandbox is made: `do`'s flags that make sense for a long-lived
/// sandbox, the same from the command line and from JSON.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, clap::Args)]
#[serde(default, deny_unknown_fields)]
pub struct CreateOptions {
    /// Host directory to use as the (read-only) root file system (default /).
    #[arg(long, value_name = "DIR", conflicts_with = "image")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<PathBuf>,
    /// An OCI image for the root instead: an image layout folder, or a tar
    /// of one (`skopeo copy ... oci-archive:`) or from `docker save`;
    /// unpacked once, its environment the sandbox's base.
    #[arg(long, value_name = "OCI-LAYOUT-OR-TAR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<PathBuf>,
    /// Let programs write anywhere: changes go to an in-memory layer that
    /// lasts as long as the sandbox.
    #[arg(long)]
    pub overlay: bool,
    /// Mount host directory or file HOST at GUEST; repeatable.
    #[arg(long = "volume", short = 'v', value_name = "HOST:GUEST[:ro]")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<String>,
    /// Mount a tmpfs of the sandbox's own at PATH; repeatable.
    #[arg(long, value_name = "PATH[:OPTIONS]")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tmpfs: Vec<String>,
    /// `none` (the default without allow rules), `sandbox` or `host`.
    #[arg(long, value_name = "MODE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// Let programs connect to CIDR[:PORT]; repeatable.
    #[arg(long = "allow-cidr", value_name = "CIDR[:PORT]")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_cidr: Vec<String>,
    /// Let programs reach DOMAIN by name; repeatable.
    #[arg(long = "allow-host", value_name = "DOMAIN[:PORT/tcp]")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_host: Vec<String>,
    /// Allow HOST over HTTP(S) for these methods (and paths) only; repeatable.
    #[arg(long = "allow-http", value_name = "HOST:METHOD,...[:/PATH,...]")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_http: Vec<String>,
    /// A secret the sandbox sees only as a placeholder; repeatable.
    #[arg(
        long = "secret",
        value_name = "NAME=@FILE:HOST,... | NAME=env:VAR:HOST,..."
    )]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// Append one JSON line per attempt to leave the sandbox to FILE.
    #[arg(long = "egress-log", value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress_log: Option<PathBuf>,
    /// Most tasks at once (default 4096; -1 for no limit of its own).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids: Option<i64>,
    /// Host name the programs see (default the sandbox's name).
    #[arg(long, value_name = "NAME")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// NAME=VALUE in every program's environment; repeatable.
    #[arg(long = "env", short = 'e', value_name = "NAME=VALUE")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// End the sandbox once no program has run for DURATION (15m, 1h).
    #[arg(long = "idle-timeout", value_name = "DURATION")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<String>,
    /// End the sandbox DURATION after it started (8h).
    #[arg(long, value_name = "DURATION")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Most memory the sandbox may use (bytes, or 512m, 2g), held by a host
    /// cgroup: past it the kernel ends the sandbox.
    #[arg(long, value_name = "BYTES")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// CPUs' worth of time the sandbox may use (1.5: one and a half), held
    /// by a host cgroup.
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// How guest code runs (`seccomp`, the default, or `ptrace`).
    #[arg(long, value_name = "PLATFORM")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    /// Go on from a `sandbox snapshot` IMAGE instead of starting afresh
    /// (give the options the snapshot's sandbox was made with).
    #[arg(long, value_name = "IMAGE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<PathBuf>,
}

impl CreateOptions {
    /// The host cgroup's limits `memory` and `cpus` ask for.
    fn limits(&self) -> Result<crate::cgroup::Limits, Error> {
        let mut l = crate::cgroup::Limits::default();
        if let Some(m) = &self.memory {
            let bytes = crate::cgroup::parse_bytes(m)
                .filter(|&b| b >= 16 << 20)
                .ok_or_else(|| {
                    Error::Usage(format!(
                        "--memory {m:?}: give bytes like 512m or 2g (at least 16m)"
                    ))
                })?;
            l.memory = Some(bytes);
            // (no swap beyond it: the limit is the sandbox's memory)
            l.memory_swap = Some(bytes);
        }
        if let Some(c) = self.cpus {
            if !(0.01..=1024.0).contains(&c) {
                return Err(Error::Usage(format!(
                    "--cpus {c}: give a number of CPUs like 0.5 or 2"
                )));
            }
            l.cpu_quota = Some((c * 100_000.0) as i64);
            l.cpu_period = Some(100_000);
        }
        Ok(l)
    }

    /// `do`'s flags for these options (checked by `do` itself).
    fn do_args(&self, name: &str) -> Result<Vec<String>, Error> {
        let mut a = Vec::new();
        let mut flag = |f: &str, v: &str| {
            a.push(format!("--{f}"));
            a.push(v.to_string());
        };
        if let Some(r) = &self.root {
            flag("root", &r.to_string_lossy());
        }
        for v in &self.volumes {
            flag("volume", v);
        }
        for v in &self.tmpfs {
            flag("tmpfs", v);
        }
        if let Some(n) = &self.network {
            flag("network", n);
        }
        for v in &self.allow_cidr {
            flag("allow-cidr", v);
        }
        for v in &self.allow_host {
            flag("allow-host", v);
        }
        for v in &self.allow_http {
            flag("allow-http", v);
        }
        for v in &self.secrets {
            flag("secret", v);
        }
        if let Some(f) = &self.egress_log {
            flag("egress-log", &f.to_string_lossy());
        }
        if let Some(n) = self.pids {
            flag("pids", &n.to_string());
        }
        flag("hostname", self.hostname.as_deref().unwrap_or(name));
        for v in &self.env {
            if !v.contains('=') {
                return Err(Error::Usage(format!("--env {v:?}: give NAME=VALUE")));
            }
            flag("env", v);
        }
        for (f, v) in [
            ("idle-timeout", &self.idle_timeout),
            ("timeout", &self.timeout),
        ] {
            if let Some(v) = v {
                control::parse_duration(v).map_err(|e| Error::Usage(format!("--{f} {e}")))?;
                flag(f, v);
            }
        }
        if let Some(p) = &self.platform {
            flag("platform", p);
        }
        if self.overlay {
            a.push("--overlay".into());
        }
        if let Some(image) = &self.from {
            a.push("--restore".into());
            a.push(image.to_string_lossy().into_owned());
        }
        Ok(a)
    }
}

/// What `sandbox.json` keeps.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Meta {
    name: String,
    created: String,
    pid: i32,
    /// the host process's start time (`/proc/PID/stat`), so that a reused
    /// pid is not taken for the sandbox
    start_time: u64,
    options: CreateOptions,
    /// the host cgroup holding `--memory` and `--cpus`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cgroup: Option<crate::cgroup::Cgroup>,
    /// its image's working directory and user, for programs that say
    /// neither
    #[serde(default)]
    defaults: image::ExecDefaults,
}

/// A sandbox as `ls` and the API show it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Info {
    pub name: String,
    /// `running` or `ended`
    pub state: String,
    /// RFC 3339, UTC
    pub created: String,
    /// the sandbox's host process
    pub pid: i32,
    /// guest tasks now (running only)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<u64>,
    /// why it ended, as its log says (ended only)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    pub options: CreateOptions,
}

/// A program to run in a sandbox.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecOptions {
    /// the command and its arguments (`args[0]` looked up in PATH)
    pub args: Vec<String>,
    /// NAME=VALUE over the sandbox's environment
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// working directory (default `/`)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `USER[:GROUP]`, names or numbers, as the sandbox's /etc/passwd and
    /// /etc/group have them (default 0:0)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// seconds before the program is killed
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    /// the program's input, base64 (the API's; the CLI passes its own)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
    /// a terminal of the sandbox's own, relayed to the caller's (the
    /// CLI's `--tty`); through the API, its output is the `stdout` stream
    /// and its input `stdin`, through its line discipline (echoed, CR-LF)
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tty: bool,
    /// that terminal's size (default 24 by 80); a running program's
    /// changes with `POST .../processes/{pid}/resize`
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<TermSize>,
}

/// A terminal's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TermSize {
    pub rows: u16,
    pub cols: u16,
}

impl TermSize {
    /// Checked: a terminal has at least one row and one column.
    pub fn new(rows: u16, cols: u16) -> Result<TermSize, Error> {
        if rows == 0 || cols == 0 {
            return Err(Error::Usage(format!(
                "size {rows}x{cols}: give at least 1 row and 1 column"
            )));
        }
        Ok(TermSize { rows, cols })
    }
}

impl ExecOptions {
    fn request(&self) -> Result<control::ExecRequest, Error> {
        if self.args.is_empty() {
            return Err(Error::Usage("give the command to run".into()));
        }
        if let Some(e) = self.env.iter().find(|e| !e.contains('=')) {
            return Err(Error::Usage(format!("env {e:?}: give NAME=VALUE")));
        }
        if self
            .timeout
            .is_some_and(|t| !(t.is_finite() && t > 0.0 && t < 1e9))
        {
            return Err(Error::Usage(
                "timeout: give a positive number of seconds".into(),
            ));
        }
        if let Some(s) = self.size {
            if !self.tty {
                return Err(Error::Usage("size: only with tty".into()));
            }
            TermSize::new(s.rows, s.cols)?;
        }
        Ok(control::ExecRequest {
            args: self.args.clone(),
            env: self.env.clone(),
            cwd: self.cwd.clone().unwrap_or_else(|| "/".into()),
            uid: 0,
            gid: 0,
            privileges: control::Privileges::default(),
            inherit_env: true,
            preserve_fds: 0,
            user: self.user.clone(),
            tty: self.tty,
            size: self.size.map(|s| (s.rows, s.cols)),
        })
    }
}

/// How a program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// shell-style: 128+N for signal N
    pub status: i32,
    /// killed by its timeout
    pub timed_out: bool,
}

/// A sandbox name: what a host name and a file name both accept.
pub fn check_name(name: &str) -> Result<(), Error> {
    let ok = (1..=63).contains(&name.len())
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "sandbox name {name:?}: give 1-63 letters, digits, '-', '_' or '.', starting with a letter or digit"
        )))
    }
}

/// The sandboxes under one state root.
#[derive(Clone, Debug)]
pub struct Store {
    root: PathBuf,
    dir: PathBuf,
    exe: PathBuf,
}

impl Store {
    /// The sandboxes of state root `root`, started with `exe` (this binary).
    pub fn new(root: &Path, exe: PathBuf) -> Store {
        Store {
            root: root.to_path_buf(),
            dir: root.join(FOLDER),
            exe,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The control socket of sandbox `name`.
    pub fn socket(&self, name: &str) -> PathBuf {
        self.path(name).join(control::SOCKET)
    }

    fn meta(&self, name: &str) -> Result<Meta, Error> {
        check_name(name)?;
        let text = match std::fs::read(self.path(name).join(META)) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NotFound(name.into()))
            }
            Err(e) => return Err(Error::io(format_args!("sandbox {name:?}"))(e)),
        };
        serde_json::from_slice(&text).map_err(|e| Error::Io {
            what: format!("sandbox {name:?}: its {META}"),
            source: std::io::Error::other(e),
        })
    }

    /// Makes sandbox `name` and waits until it takes programs. The
    /// sandbox's host process is `exe do --init ...` in a process group
    /// of its own (a ^C at the caller's terminal does not reach it); the
    /// caller reaps it if it is its parent (`serve` is).
    pub fn create(&self, name: &str, opts: &CreateOptions) -> Result<(Info, Child), Error> {
        check_name(name)?;
        let dir = self.path(name);
        std::fs::create_dir_all(&self.dir).map_err(Error::io(self.dir.display()))?;
        set_mode(&self.dir, 0o700)?;
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(Error::Exists(name.into()))
            }
            Err(e) => return Err(Error::io(dir.display())(e)),
        }
        let made = self.start(name, opts, &dir);
        if made.is_err() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        made
    }

    fn start(&self, name: &str, opts: &CreateOptions, dir: &Path) -> Result<(Info, Child), Error> {
        let mut args = vec!["do".to_string()];
        let limits = opts.limits()?;
        let mut defaults = image::ExecDefaults::default();
        match &opts.image {
            Some(source) => {
                let img = image::prepare(&self.root.join(".images"), source)?;
                // (what `prune` keeps while the sandbox exists)
                std::fs::write(dir.join(IMAGE_KEY), &img.key).map_err(Error::io(dir.display()))?;
                defaults = img.defaults;
                let mut env = img.env;
                env.extend(opts.env.iter().cloned());
                let with_root = CreateOptions {
                    root: Some(img.rootfs),
                    image: None,
                    env,
                    ..opts.clone()
                };
                args.extend(with_root.do_args(name)?);
            }
            None => args.extend(opts.do_args(name)?),
        }
        let cgroup = if limits.any() {
            let scope = crate::cgroup::scope_of(&self.root);
            let made =
                crate::cgroup::Cgroup::create(&format!("sandbox-{name}"), &scope, None, &limits);
            let cg = match made {
                Ok(cg) => cg,
                // Without one, the Sentry holds the limits itself.
                Err(_) if limits.sentry_can_hold() => {
                    if let Some(m) = limits.memory {
                        args.extend(["--memory".into(), m.to_string()]);
                    }
                    if let Some(q) = limits.cpu_quota {
                        args.extend(["--cpus".into(), (q as f64 / 100_000.0).to_string()]);
                    }
                    return self.spawn(name, opts, dir, args, (None, defaults));
                }
                Err(e) => return Err(Error::Usage(format!("--cpus needs a host cgroup: {e}"))),
            };
            for d in &cg.dirs {
                args.extend(["--cgroup".into(), d.to_string_lossy().into_owned()]);
            }
            if let Some(m) = limits.memory {
                args.extend(["--memory-limit".into(), m.to_string()]);
            }
            if let Some(q) = limits.cpu_quota {
                args.extend(["--cpu-quota".into(), q.to_string()]);
            }
            Some(cg)
        } else {
            None
        };
        let started = self.spawn(name, opts, dir, args, (cgroup.clone(), defaults));
        if started.is_err() {
            if let Some(cg) = cgroup {
                let _ = cg.destroy();
            }
        }
        started
    }

    fn spawn(
        &self,
        name: &str,
        opts: &CreateOptions,
        dir: &Path,
        mut args: Vec<String>,
        (cgroup, defaults): (Option<crate::cgroup::Cgroup>, image::ExecDefaults),
    ) -> Result<(Info, Child), Error> {
        let socket = dir.join(control::SOCKET);
        args.extend([
            "--init".into(),
            "--clean-env".into(),
            "--no-tty".into(),
            "--control-socket".into(),
            socket.to_string_lossy().into_owned(),
        ]);
        let log_path = dir.join(LOG);
        let log = std::fs::File::create(&log_path).map_err(Error::io(log_path.display()))?;
        let log2 = log.try_clone().map_err(Error::io(log_path.display()))?;
        let mut child = Command::new(&self.exe)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .current_dir("/")
            .process_group(0)
            .spawn()
            .map_err(Error::io(format_args!("starting {}", self.exe.display())))?;
        let pid = child.id() as i32;
        let meta = Meta {
            name: name.into(),
            created: netstack::audit::rfc3339(std::time::SystemTime::now(), 0),
            pid,
            start_time: start_time(pid).unwrap_or(0),
            options: opts.clone(),
            cgroup,
            defaults,
        };
        let text = serde_json::to_vec_pretty(&meta).map_err(|e| Error::Io {
            what: META.into(),
            source: std::io::Error::other(e),
        })?;
        std::fs::write(dir.join(META), text).map_err(Error::io(META))?;
        // Ready once the control socket answers and init runs.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                let why = last_words(&log_path)
                    .unwrap_or_else(|| "its host process ended without a word".into());
                return Err(Error::Start {
                    name: name.into(),
                    why,
                });
            }
            if socket.exists() {
                if let Some(stats) = control::stats(&socket).ok().filter(|s| s.tasks > 0) {
                    let info = Info {
                        name: name.into(),
                        state: "running".into(),
                        created: meta.created.clone(),
                        pid,
                        tasks: Some(stats.tasks),
                        ended: None,
                        options: opts.clone(),
                    };
                    return Ok((info, child));
                }
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::Start {
                    name: name.into(),
                    why: "it did not answer within 30 s".into(),
                });
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Saves running sandbox `name` into directory `image` (made when
    /// missing); it runs on. What the save said (`saved`).
    pub fn snapshot(&self, name: &str, image: &Path) -> Result<String, Error> {
        self.save(name, image, false)
    }

    /// [`Sandboxes::snapshot`]; `lean`: for one restore at once (`fork`).
    fn save(&self, name: &str, image: &Path, lean: bool) -> Result<String, Error> {
        let info = self.info(name)?;
        if info.state != "running" {
            return Err(Error::Ended {
                name: name.into(),
                why: Some("nothing to save".into()),
            });
        }
        let file = crate::container::open_image_for_save(image)
            .map_err(Error::io(format_args!("{}", image.display())))?;
        control::checkpoint(&self.socket(name), &file, true, lean)
            .map_err(|e| Error::Guest(format!("sandbox {name:?} was not saved (it runs on): {e}")))
    }

    /// Makes sandbox `new` as a copy of running sandbox `name`: a snapshot
    /// (under `.forks`, removed once read), then a sandbox made from it
    /// with `name`'s options. The two run on apart.
    pub fn fork(&self, name: &str, new: &str) -> Result<(Info, Child), Error> {
        check_name(new)?;
        if self.path(new).exists() {
            return Err(Error::Exists(new.into()));
        }
        let options = self.meta(name)?.options;
        let image = self.root.join(".forks").join(new);
        std::fs::create_dir_all(self.root.join(".forks")).map_err(Error::io("the forks folder"))?;
        self.save(name, &image, true)?;
        let opts = CreateOptions {
            from: Some(image.clone()),
            hostname: Some(options.hostname.clone().unwrap_or_else(|| name.to_string())),
            ..options
        };
        let made = self.create(new, &opts);
        // Read whole by the copy's Sentry before it answered.
        let _ = std::fs::remove_dir_all(&image);
        made
    }

    /// Sandbox `name` now.
    pub fn info(&self, name: &str) -> Result<Info, Error> {
        let meta = self.meta(name)?;
        let alive = self.alive(&meta);
        let tasks = if alive {
            control::stats(&self.socket(name)).ok().map(|s| s.tasks)
        } else {
            None
        };
        let running = alive && tasks.is_some();
        Ok(Info {
            name: meta.name,
            state: if running { "running" } else { "ended" }.into(),
            created: meta.created,
            pid: meta.pid,
            tasks,
            ended: if running {
                None
            } else if meta.cgroup.as_ref().is_some_and(|c| c.oom_killed()) {
                Some("killed by the host's kernel: it reached its --memory limit".into())
            } else {
                last_words(&self.path(name).join(LOG))
            },
            options: meta.options,
        })
    }

    fn alive(&self, meta: &Meta) -> bool {
        start_time(meta.pid).is_some_and(|t| t == meta.start_time)
    }

    /// Every sandbox, by name.
    pub fn list(&self) -> Result<Vec<Info>, Error> {
        let rd = match std::fs::read_dir(&self.dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(self.dir.display())(e)),
        };
        let mut names: Vec<String> = rd
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| check_name(n).is_ok())
            .collect();
        names.sort();
        Ok(names.iter().filter_map(|n| self.info(n).ok()).collect())
    }

    /// A running sandbox's control socket, or why there is none.
    pub(crate) fn running(&self, name: &str) -> Result<PathBuf, Error> {
        let meta = self.meta(name)?;
        if !self.alive(&meta) {
            return Err(Error::Ended {
                name: name.into(),
                why: last_words(&self.path(name).join(LOG)),
            });
        }
        Ok(self.socket(name))
    }

    /// Watches directory `path` of running sandbox `name`: its changes as
    /// they come.
    pub fn watch(&self, name: &str, path: &str, recursive: bool) -> Result<control::Watch, Error> {
        let socket = self.running(name)?;
        control::watch(&socket, path, recursive).map_err(|e| match e {
            control::Error::Refused(why) => Error::Guest(why),
            e => Error::Control(e),
        })
    }

    /// Starts `opts` in sandbox `name` with `stdio` as its descriptors 0-2.
    pub fn exec(
        &self,
        name: &str,
        opts: &ExecOptions,
        stdio: [BorrowedFd<'_>; 3],
    ) -> Result<Running, Error> {
        // (as docker exec: the image's, unless the program says)
        let defaults = self.meta(name)?.defaults;
        let opts = ExecOptions {
            cwd: opts.cwd.clone().or(defaults.cwd),
            user: opts.user.clone().or(defaults.user),
            ..opts.clone()
        };
        let req = opts.request()?;
        let socket = self.running(name)?;
        let exec = control::exec(&socket, &req, stdio, &[]).map_err(|e| match e {
            control::Error::Refused(why) => Error::Guest(why),
            e => Error::Control(e),
        })?;
        Ok(Running {
            exec,
            timeout: opts.timeout.map(Duration::from_secs_f64),
        })
    }

    /// Runs `opts` with `stdin` as its input, passing its output to
    /// `sink` as it comes, and returns how it ended. Output still queued
    /// when the program has exited is passed on too; a background program
    /// that keeps the output open does not hold the call.
    pub fn exec_streaming(
        &self,
        name: &str,
        opts: &ExecOptions,
        stdin: Vec<u8>,
        mut sink: impl FnMut(Output<'_>),
    ) -> Result<Outcome, Error> {
        let pipe = |what| std::io::pipe().map_err(Error::io(what));
        let (in_r, mut in_w) = pipe("a pipe")?;
        let (out_r, out_w) = pipe("a pipe")?;
        let (err_r, err_w) = pipe("a pipe")?;
        let running = self.exec(name, opts, [in_r.as_fd(), out_w.as_fd(), err_w.as_fd()])?;
        drop((in_r, out_w, err_w));
        sink(Output::Started(running.pid(), &running));
        std::thread::spawn(move || {
            use std::io::Write;
            let _ = in_w.write_all(&stdin);
        });
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let mut readers = Vec::new();
        for (stream, r) in [(Stream::Stdout, out_r), (Stream::Stderr, err_r)] {
            let (tx, stop) = (tx.clone(), stop.clone());
            readers.push(std::thread::spawn(move || {
                pump(OwnedFd::from(r), stream, &tx, &stop)
            }));
        }
        let waiter = {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let _ = tx.send(Event::Exited(running.wait()));
            })
        };
        drop(tx);
        let mut open = 2;
        let mut outcome = None;
        loop {
            let ev = if outcome.is_some() {
                // Exited: what is already queued, then done.
                match rx.recv_timeout(Duration::from_millis(20)) {
                    Ok(ev) => ev,
                    Err(_) => break,
                }
            } else {
                match rx.recv() {
                    Ok(ev) => ev,
                    Err(_) => break,
                }
            };
            match ev {
                Event::Data(s, d) => sink(Output::Data(s, &d)),
                Event::Eof => {
                    open -= 1;
                    if open == 0 && outcome.is_some() {
                        break;
                    }
                }
                Event::Exited(r) => {
                    outcome = Some(r?);
                    if open == 0 {
                        break;
                    }
                }
            }
        }
        stop.store(true, Ordering::SeqCst);
        for r in readers {
            let _ = r.join();
        }
        let _ = waiter.join();
        outcome.ok_or_else(|| Error::Guest("the program's end was not reported".into()))
    }

    /// Ends sandbox `name` (its processes killed), if it runs.
    pub fn stop(&self, name: &str) -> Result<(), Error> {
        let meta = self.meta(name)?;
        if !self.alive(&meta) {
            return Ok(());
        }
        // Said in its log, for `ls` to show.
        if let Ok(mut log) = std::fs::OpenOptions::new()
            .append(true)
            .open(self.path(name).join(LOG))
        {
            use std::io::Write;
            let _ = writeln!(log, "ferrovisor: stopped by 'ferrovisor sandbox stop'");
        }
        // `do` ends the sandbox on SIGTERM; SIGKILL if it does not.
        let _ = crate::sys::kill(meta.pid, libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.alive(&meta) {
            if Instant::now() > deadline {
                let _ = crate::sys::kill(meta.pid, libc::SIGKILL);
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.alive(&meta) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.release_cgroup(&meta);
        Ok(())
    }

    /// The host cgroup of a sandbox that has ended, removed (what is left
    /// in it killed).
    fn release_cgroup(&self, meta: &Meta) {
        if let Some(cg) = &meta.cgroup {
            if let Err(e) = cg.destroy() {
                eprintln!(
                    "ferrovisor: sandbox {:?}: removing its cgroup: {e}",
                    meta.name
                );
            }
        }
    }

    /// Removes the unpacked images (`create --image`) no sandbox uses, as
    /// `docker image prune` does; a sandbox that ended but was not removed
    /// keeps its image.
    pub fn prune_images(&self) -> Result<Vec<image::Pruned>, Error> {
        // (every sandbox folder, one still being made too)
        let used: Vec<String> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join(IMAGE_KEY)).ok())
            .collect();
        image::prune(&self.root.join(".images"), &used)
    }

    /// Ends sandbox `name` and forgets it.
    pub fn remove(&self, name: &str) -> Result<(), Error> {
        self.stop(name)?;
        self.release_cgroup(&self.meta(name)?);
        std::fs::remove_dir_all(self.path(name))
            .map_err(Error::io(format_args!("sandbox {name:?}")))
    }

    /// What the sandbox's host process said (start-up errors, why it ended).
    pub fn logs(&self, name: &str) -> Result<Vec<u8>, Error> {
        self.meta(name)?;
        std::fs::read(self.path(name).join(LOG))
            .map_err(Error::io(format_args!("sandbox {name:?}")))
    }

    /// Egress rules changed while it runs (`--allow-host`, `--deny-host`).
    pub fn update_egress(&self, name: &str, u: &control::EgressUpdate) -> Result<(), Error> {
        let socket = self.running(name)?;
        control::update_egress(&socket, u).map_err(Error::Control)
    }
}

/// Which output a chunk came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
}

/// What [`Store::exec_streaming`] passes on.
#[derive(Debug)]
pub enum Output<'a> {
    /// the program runs, with this guest pid
    Started(i32, &'a Running),
    /// some of its output
    Data(Stream, &'a [u8]),
}

enum Event {
    Data(Stream, Vec<u8>),
    Eof,
    Exited(Result<Outcome, Error>),
}

/// Reads `fd` into `tx` until its end, or until `stop` once nothing is
/// left to read.
fn pump(fd: OwnedFd, stream: Stream, tx: &mpsc::Sender<Event>, stop: &AtomicBool) {
    let mut f = std::fs::File::from(fd);
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match crate::sys::poll_readable(f.as_fd(), 50) {
            Ok(true) => {}
            Ok(false) if stop.load(Ordering::SeqCst) => break,
            Ok(false) => continue,
            Err(_) => break,
        }
        match f.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if tx.send(Event::Data(stream, buf[..n].to_vec())).is_err() {
                    return;
                }
            }
        }
    }
    let _ = tx.send(Event::Eof);
}

/// A program started in a sandbox.
pub struct Running {
    exec: control::Exec,
    timeout: Option<Duration>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Running({})", self.exec.pid)
    }
}

impl Running {
    /// The guest's pid.
    pub fn pid(&self) -> i32 {
        self.exec.pid
    }

    /// A sender of signals and terminal sizes to the program.
    pub fn signaller(&self) -> std::io::Result<control::Signaller> {
        self.exec.signaller()
    }

    /// This process's ^C, `kill` and the rest go to the program.
    pub fn forward_host_signals(&self) -> Result<(), Error> {
        self.exec
            .forward_host_signals()
            .map_err(Error::io("forwarding signals"))
    }

    /// Waits for the program's end, killing it at its timeout.
    pub fn wait(self) -> Result<Outcome, Error> {
        let timed_out = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        if let Some(t) = self.timeout {
            let sig = self
                .exec
                .signaller()
                .map_err(Error::io("the program's timeout"))?;
            let (timed_out, done) = (timed_out.clone(), done.clone());
            std::thread::spawn(move || {
                let end = Instant::now() + t;
                while Instant::now() < end {
                    if done.load(Ordering::SeqCst) {
                        return;
                    }
                    std::thread::sleep((end - Instant::now()).min(Duration::from_millis(20)));
                }
                if !done.load(Ordering::SeqCst) {
                    timed_out.store(true, Ordering::SeqCst);
                    let _ = sig.signal(libc::SIGKILL);
                }
            });
        }
        let status = self.exec.wait();
        done.store(true, Ordering::SeqCst);
        Ok(Outcome {
            status: status?,
            timed_out: timed_out.load(Ordering::SeqCst),
        })
    }
}

/// The last line of a sandbox's log that ferrovisor wrote, without its
/// `ferrovisor: ` prefix.
fn last_words(log: &Path) -> Option<String> {
    let text = std::fs::read(log).ok()?;
    let text = String::from_utf8_lossy(&text);
    text.lines()
        .rev()
        .find_map(|l| l.strip_prefix("ferrovisor: "))
        .map(str::to_string)
}

/// Field 22 of `/proc/PID/stat`; `None` for a pid that is gone or a zombie.
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    if fields.first() == Some(&"Z") || fields.first() == Some(&"X") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

pub(crate) fn set_mode(path: &Path, mode: u32) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(Error::io(path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_host_and_file_names() {
        for ok in ["a", "agent-1", "x.y_z", &"a".repeat(63)] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-a", ".a", "a/b", "a b", &"a".repeat(64), ".."] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn options_become_do_flags_and_bad_ones_are_refused() {
        let o = CreateOptions {
            overlay: true,
            volumes: vec!["/srv:/work".into()],
            env: vec!["A=1".into()],
            idle_timeout: Some("15m".into()),
            ..Default::default()
        };
        let a = o.do_args("box").expect("valid");
        assert_eq!(
            a,
            [
                "--volume",
                "/srv:/work",
                "--hostname",
                "box",
                "--env",
                "A=1",
                "--idle-timeout",
                "15m",
                "--overlay"
            ]
        );
        let bad = CreateOptions {
            timeout: Some("soon".into()),
            ..Default::default()
        };
        assert!(bad
            .do_args("box")
            .expect_err("refused")
            .to_string()
            .contains("--timeout"));
        let json: CreateOptions =
            serde_json::from_str(r#"{"overlay":true,"volumes":["/a:/b"]}"#).expect("valid");
        assert!(json.overlay && json.volumes == ["/a:/b"]);
        assert!(serde_json::from_str::<CreateOptions>(r#"{"overlays":true}"#).is_err());
    }

    #[test]
    fn exec_users_go_to_the_sandbox_to_be_found() {
        let o = |u: &str| ExecOptions {
            args: vec!["id".into()],
            user: Some(u.into()),
            ..Default::default()
        };
        let r = o("nobody:nogroup").request().expect("valid");
        assert_eq!(r.user.as_deref(), Some("nobody:nogroup"));
        assert!(ExecOptions::default().request().is_err());
    }
}
