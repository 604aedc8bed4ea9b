//! The state directory (`--root`, `/run/ferrovisor` by default): one
//! directory per container holding `state.json` and, while the container is
//! created but not started, the `exec.fifo` its boot process waits on.
//!
//! A container directory is made with one `mkdir`, so two containers with
//! the same id cannot both be created. `state.json` is replaced by rename,
//! so a reader sees a whole file or none (none: the container is still
//! being created). Every read-modify-write holds `flock` on the directory.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Where `ferrovisor` keeps container state unless `--root` says otherwise.
pub const DEFAULT_ROOT: &str = "/run/ferrovisor";

/// The name of the FIFO `start` opens to release a created container.
pub const EXEC_FIFO: &str = "exec.fifo";

const STATE_FILE: &str = "state.json";
/// The cgroup of a container still `creating`, so that a `delete` after a
/// `create` that died half-way can remove it and what runs in it.
const CREATING_CGROUP: &str = "cgroup.json";

/// Where the sandbox process leaves its exit status: it opens this file
/// before its seccomp filter goes on, and from then on can only write to
/// descriptors it holds (no renames of `state.json`).
pub const EXIT_FILE: &str = "exit_status";

/// State directory errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// the id cannot name a directory safely
    #[error("invalid container id {0:?} (use letters, digits and _ . + -, not starting with . )")]
    InvalidId(String),
    /// create was asked for an id in use
    #[error("container {0} already exists (delete it first, or pick another id)")]
    Exists(String),
    /// no container by that id
    #[error("container {0} does not exist")]
    NotFound(String),
    /// the state directory or a file in it could not be used
    #[error("state directory {path}: {source}")]
    Io {
        /// the file or directory
        path: PathBuf,
        /// the host's answer
        source: std::io::Error,
    },
    /// state.json is not what this runtime writes
    #[error("{path}: corrupt state file: {source}")]
    Corrupt {
        /// the file
        path: PathBuf,
        /// what the parser said
        source: serde_json::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The lifecycle states of the OCI runtime spec, in the order a container
/// goes through them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// the runtime is still setting up
    Creating,
    /// set up, the user program not started
    Created,
    /// the user program runs
    Running,
    /// the whole sandbox is frozen (`pause`) until `resume`
    Paused,
    /// the user program has exited (or the sandbox died)
    Stopped,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, so that table columns ({:<10}) line up.
        f.pad(match self {
            Status::Creating => "creating",
            Status::Created => "created",
            Status::Running => "running",
            Status::Paused => "paused",
            Status::Stopped => "stopped",
        })
    }
}

/// What `state.json` holds: the OCI state plus what the runtime needs to
/// find and judge the sandbox later.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// runtime spec version of the state format
    pub oci_version: String,
    /// container id
    pub id: String,
    /// as last recorded (see [`Record::observed`] for the live view)
    pub status: Status,
    /// host pid of the sandbox (the boot process); 0 before it exists
    pub pid: i32,
    /// start time of `pid` in clock ticks since boot, to tell a reused pid
    pub pid_start_time: u64,
    /// absolute bundle path
    pub bundle: PathBuf,
    /// absolute rootfs path
    pub rootfs: PathBuf,
    /// creation time, RFC 3339
    pub created: String,
    /// uid of the creator
    pub owner: u32,
    /// `annotations` from config.json
    pub annotations: BTreeMap<String, String>,
    /// where a writable root's writes go: `rootfs`, `memory` or
    /// `read-only` (empty in records older than the field)
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub root_writes: String,
    /// the container's exit status (0-255, 128+N for signal N) once known
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
    /// the last signal `kill` sent, so that a sandbox killed by it gets the
    /// status 128+N even though it could not record it itself
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_signal: Option<i32>,
    /// the sandbox's host cgroup, removed by `delete`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<crate::cgroup::Cgroup>,
    /// limits `update` changed that the Sentry applies to the guest: a
    /// sandbox started later applies them as it starts
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_limits: Option<crate::control::GuestLimits>,
    /// `guest_limits` changed while the sandbox was paused, when its frozen
    /// Sentry could not hear them: `resume` delivers them
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub guest_limits_pending: bool,
}

/// The host's view of a process, read from `/proc/PID/stat`.
pub fn process_start_time(pid: i32) -> Option<(char, u64)> {
    if pid <= 0 {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may itself contain spaces or
    // parentheses: the fields after it start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    // Field 22 of proc_pid_stat(5) is starttime; `rest` starts at field 3.
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

impl Record {
    /// Whether the recorded sandbox process still exists (and is not a
    /// zombie nobody has reaped yet, nor a new process that reused its pid).
    pub fn sandbox_alive(&self) -> bool {
        match process_start_time(self.pid) {
            Some((state, start)) => start == self.pid_start_time && state != 'Z' && state != 'X',
            None => false,
        }
    }

    /// The status as it is now: a created or running container whose sandbox
    /// is gone is stopped, whatever the file says.
    pub fn observed(&self) -> Status {
        match self.status {
            Status::Created | Status::Running | Status::Paused if !self.sandbox_alive() => {
                Status::Stopped
            }
            s => s,
        }
    }

    /// The exit status once stopped: the recorded one, else 128+N when
    /// `kill` sent signal N to a sandbox that then died without saying.
    pub fn exit_code(&self) -> Option<i32> {
        self.exit_status.or(self.kill_signal.map(|s| 128 + s))
    }
}

/// Checks that `id` can name a directory without escaping the state root.
pub fn check_id(id: &str) -> Result<(), Error> {
    let ok = !id.is_empty()
        && id.len() <= 1024
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.+-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidId(id.to_string()))
    }
}

/// The state root.
#[derive(Clone, Debug)]
pub struct StateDir {
    root: PathBuf,
}

/// One container's directory, locked for as long as this value lives.
#[derive(Debug)]
pub struct Locked {
    dir: PathBuf,
    id: String,
    _lock: File,
}

impl StateDir {
    /// The state root at `root` (made on first use).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        StateDir { root: root.into() }
    }

    /// The state root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of container `id`.
    pub fn dir(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }

    /// Makes the directory of a new container and locks it; fails if the id
    /// is taken.
    pub fn create(&self, id: &str) -> Result<Locked, Error> {
        check_id(id)?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o711)
            .create(&self.root)
            .map_err(io(&self.root))?;
        let dir = self.dir(id);
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(Error::Exists(id.to_string()))
            }
            Err(e) => return Err(io(&dir)(e)),
        }
        Locked::open(dir, id)
    }

    /// Locks the directory of an existing container.
    pub fn lock(&self, id: &str) -> Result<Locked, Error> {
        check_id(id)?;
        let dir = self.dir(id);
        if !dir.is_dir() {
            return Err(Error::NotFound(id.to_string()));
        }
        Locked::open(dir, id)
    }

    /// Reads a container's record without locking (renames make it whole).
    /// `Ok(None)`: the container exists but is still being created.
    pub fn read(&self, id: &str) -> Result<Option<Record>, Error> {
        check_id(id)?;
        let dir = self.dir(id);
        if !dir.is_dir() {
            return Err(Error::NotFound(id.to_string()));
        }
        read_record(&dir)
    }

    /// The ids of all containers, sorted.
    pub fn ids(&self) -> Result<Vec<String>, Error> {
        let rd = match std::fs::read_dir(&self.root) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(&self.root)(e)),
        };
        let mut ids: Vec<String> = rd
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|id| check_id(id).is_ok())
            .collect();
        ids.sort();
        Ok(ids)
    }
}

fn read_record(dir: &Path) -> Result<Option<Record>, Error> {
    let path = dir.join(STATE_FILE);
    let mut record: Record = match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| Error::Corrupt {
            path: path.clone(),
            source,
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path)(e)),
    };
    if record.exit_status.is_none() {
        // What the sandbox process wrote as it ended (a partial write reads
        // as nothing).
        record.exit_status = std::fs::read_to_string(dir.join(EXIT_FILE))
            .ok()
            .and_then(|s| s.strip_suffix('\n').and_then(|n| n.parse().ok()));
    }
    Ok(Some(record))
}

/// The sandbox process's side of [`EXIT_FILE`]: opened (empty) before the
/// Sentry starts, written once when it ends.
#[derive(Debug)]
pub struct ExitFile(std::fs::File);

impl ExitFile {
    /// Creates (or empties) the container's exit status file.
    pub fn create(dir: &Path) -> Result<ExitFile, Error> {
        let path = dir.join(EXIT_FILE);
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .map(ExitFile)
            .map_err(io(&path))
    }

    /// Records `code` (one `write` and an `fsync` on the held descriptor).
    pub fn record(mut self, code: i32) -> std::io::Result<()> {
        self.0.write_all(format!("{code}\n").as_bytes())?;
        self.0.sync_all()
    }
}

impl Locked {
    fn open(dir: PathBuf, id: &str) -> Result<Self, Error> {
        let lock = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(&dir)
            .map_err(io(&dir))?;
        crate::sys::lock_exclusive(lock.as_fd()).map_err(io(&dir))?;
        // A concurrent delete may have removed the directory while we
        // waited for the lock.
        if !dir.is_dir() {
            return Err(Error::NotFound(id.to_string()));
        }
        Ok(Locked {
            dir,
            id: id.to_string(),
            _lock: lock,
        })
    }

    /// The container directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The container id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The record, `None` while still being created.
    pub fn read(&self) -> Result<Option<Record>, Error> {
        read_record(&self.dir)
    }

    /// The record of a container past `creating`.
    pub fn record(&self) -> Result<Record, Error> {
        self.read()?.ok_or_else(|| Error::NotFound(self.id.clone()))
    }

    /// Replaces the record atomically (write to a temporary file, fsync,
    /// rename over the old one).
    pub fn write(&self, record: &Record) -> Result<(), Error> {
        let tmp = self.dir.join(".state.json.tmp");
        let path = self.dir.join(STATE_FILE);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io(&tmp))?;
        let bytes = serde_json::to_vec_pretty(record).map_err(|source| Error::Corrupt {
            path: path.clone(),
            source,
        })?;
        f.write_all(&bytes).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io(&path))
    }

    /// Moves the recorded status forward to `status`, never back: the boot
    /// process and `start` both say "running", and a quick container may
    /// already have said "stopped". Returns the record as written.
    pub fn advance(&self, status: Status) -> Result<Record, Error> {
        let mut r = self.record()?;
        if status > r.status {
            r.status = status;
            self.write(&r)?;
        }
        Ok(r)
    }

    /// Notes the cgroup of a container before its record exists.
    pub fn note_cgroup(&self, cgroup: &crate::cgroup::Cgroup) -> Result<(), Error> {
        let path = self.dir.join(CREATING_CGROUP);
        let text = serde_json::to_vec(cgroup).unwrap_or_default();
        std::fs::write(&path, text).map_err(io(&path))
    }

    /// The cgroup [`Locked::note_cgroup`] noted, if any.
    pub fn noted_cgroup(&self) -> Option<crate::cgroup::Cgroup> {
        let text = std::fs::read(self.dir.join(CREATING_CGROUP)).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Removes the container's directory and everything in it.
    pub fn remove(self) -> Result<(), Error> {
        std::fs::remove_dir_all(&self.dir).map_err(io(&self.dir))
    }
}

/// Formats a time as RFC 3339 UTC with nanoseconds, as runc's `created`.
pub fn rfc3339(t: std::time::SystemTime) -> String {
    netstack::audit::rfc3339(t, 9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_could_escape_are_refused() {
        for bad in ["", ".", "..", "a/b", ".hidden", "a b", "x\0"] {
            assert!(check_id(bad).is_err(), "{bad:?}");
        }
        for good in ["a", "abc-1.2_3+4", "0"] {
            assert!(check_id(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn rfc3339_known_dates() {
        let t = |s| std::time::UNIX_EPOCH + std::time::Duration::from_secs(s);
        assert_eq!(rfc3339(t(0)), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(rfc3339(t(951_782_400)), "2000-02-29T00:00:00.000000000Z");
        assert_eq!(rfc3339(t(1_700_000_000)), "2023-11-14T22:13:20.000000000Z");
    }

    #[test]
    fn status_only_moves_forward() {
        assert!(Status::Creating < Status::Created);
        assert!(Status::Created < Status::Running);
        assert!(Status::Running < Status::Paused);
        assert!(Status::Paused < Status::Stopped);
    }

    #[test]
    fn own_process_is_seen() {
        let pid = std::process::id() as i32;
        let (state, start) = process_start_time(pid).expect("own stat");
        assert_ne!(state, 'Z');
        assert!(start > 0);
    }
}
