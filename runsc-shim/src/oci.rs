//! OCI bundles: reading `config.json` with the `oci-spec` crate and deciding,
//! field by field, what the sandbox honours, what it may safely ignore, and
//! what it must refuse because ignoring it would change what the container
//! does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use oci_spec::runtime::{Hooks, LinuxNamespaceType, LinuxResources, Spec};

use crate::cgroup::Limits;

/// Why a bundle cannot be run. Each message is one line that names the
/// field (or file) at fault and, where there is one, what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// the bundle directory is missing or unreadable
    #[error("bundle {path}: {source} (give --bundle a directory holding config.json)")]
    Bundle {
        /// as given
        path: PathBuf,
        /// the host's answer
        source: std::io::Error,
    },
    /// config.json cannot be read
    #[error("{path}: {source} (make one with 'ferrovisor spec')")]
    ReadConfig {
        /// the file
        path: PathBuf,
        /// the host's answer
        source: std::io::Error,
    },
    /// config.json is not a valid runtime spec
    #[error("{path}: malformed: {source}")]
    Malformed {
        /// the file
        path: PathBuf,
        /// what the parser said, with line and column
        source: serde_json::Error,
    },
    /// a field has a value this runtime cannot accept
    #[error("config.json: {field}: {reason}")]
    Field {
        /// the field, in the spec's JSON spelling
        field: String,
        /// what is wrong and, where there is one, what to do
        reason: String,
    },
    /// a field asks for something the sandbox does not do yet
    #[error("config.json: {field}: not supported by ferrovisor yet ({why})")]
    Unsupported {
        /// the field, in the spec's JSON spelling
        field: String,
        /// what the sandbox would have to do
        why: String,
    },
    /// `linux.seccomp` does not compile
    #[error("config.json: linux.seccomp: {0}")]
    Seccomp(#[source] crate::seccomp::Error),
    /// a `linux.devices` entry for a device the guest does not have
    #[error(
        "config.json: linux.devices[{index}]: not supported by ferrovisor yet ({path}: the \
         sandbox has only its own {} (host devices are not passed through))",
        guest_device_names()
    )]
    HostDevice {
        /// the entry's place in `linux.devices`
        index: usize,
        /// its path
        path: String,
    },
    /// a `linux.devices` entry for a guest device, of another type or number
    #[error(
        "config.json: linux.devices[{index}]: not supported by ferrovisor yet ({path} is the \
         character device {major}:{minor} here)"
    )]
    DeviceNumber {
        /// the entry's place in `linux.devices`
        index: usize,
        /// its path
        path: String,
        /// the guest's device's major number
        major: i64,
        /// and its minor number
        minor: i64,
    },
    /// a `linux.devices` entry for a guest device, of another mode or owner
    #[error(
        "config.json: linux.devices[{index}]: not supported by ferrovisor yet ({path} is mode \
         0666, owned by root, here)"
    )]
    DeviceMode {
        /// the entry's place in `linux.devices`
        index: usize,
        /// its path
        path: String,
    },
}

fn field(field: impl Into<String>, reason: impl Into<String>) -> Error {
    Error::Field {
        field: field.into(),
        reason: reason.into(),
    }
}

fn unsupported(field: impl Into<String>, why: impl Into<String>) -> Error {
    Error::Unsupported {
        field: field.into(),
        why: why.into(),
    }
}

/// A bundle read from disk.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// the bundle directory, absolute
    pub dir: PathBuf,
    /// its parsed `config.json`
    pub spec: Spec,
}

/// Reads `DIR/config.json`. `dir` is made absolute so that it stays valid
/// when recorded in the state directory.
pub fn load(dir: &Path) -> Result<Bundle, Error> {
    let abs = std::fs::canonicalize(dir).map_err(|source| Error::Bundle {
        path: dir.to_path_buf(),
        source,
    })?;
    if !abs.is_dir() {
        return Err(Error::Bundle {
            path: dir.to_path_buf(),
            source: std::io::Error::from_raw_os_error(libc::ENOTDIR),
        });
    }
    let path = abs.join("config.json");
    let bytes = std::fs::read(&path).map_err(|source| Error::ReadConfig {
        path: path.clone(),
        source,
    })?;
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|source| Error::Malformed {
            path: path.clone(),
            source,
        })?;
    if let Some(process) = value.get("process") {
        check_process_names(process, "process.")?;
    }
    let spec: Spec =
        serde_json::from_value(value).map_err(|source| Error::Malformed { path, source })?;
    Ok(Bundle { dir: abs, spec })
}

/// Capability names as runc spells them, index = capability number
/// (linux/capability.h).
const CAPABILITIES: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// Resource limit names, index = `RLIMIT_*` number
/// (asm-generic/resource.h).
const RLIMITS: [&str; 16] = [
    "RLIMIT_CPU",
    "RLIMIT_FSIZE",
    "RLIMIT_DATA",
    "RLIMIT_STACK",
    "RLIMIT_CORE",
    "RLIMIT_RSS",
    "RLIMIT_NPROC",
    "RLIMIT_NOFILE",
    "RLIMIT_MEMLOCK",
    "RLIMIT_AS",
    "RLIMIT_LOCKS",
    "RLIMIT_SIGPENDING",
    "RLIMIT_MSGQUEUE",
    "RLIMIT_NICE",
    "RLIMIT_RTPRIO",
    "RLIMIT_RTTIME",
];

/// The bit of a capability named as runc names it (`CAP_CHOWN`).
pub fn capability_bit(name: &str) -> Option<u64> {
    CAPABILITIES.iter().position(|c| *c == name).map(|n| 1 << n)
}

/// The capability sets of an OCI `process.capabilities`, in its spelling.
const CAPABILITY_SETS: [&str; 5] = [
    "bounding",
    "effective",
    "permitted",
    "inheritable",
    "ambient",
];

/// Checks the capability and resource limit names of an OCI `process`
/// object (raw JSON, before the parser, whose own error would not name
/// the field): `prefix` is how fields are named (`process.`).
pub fn check_process_names(process: &serde_json::Value, prefix: &str) -> Result<(), Error> {
    if let Some(caps) = process.get("capabilities").and_then(|c| c.as_object()) {
        for set in CAPABILITY_SETS {
            let Some(names) = caps.get(set).and_then(|v| v.as_array()) else {
                continue;
            };
            for (i, name) in names.iter().enumerate() {
                let known = name.as_str().is_some_and(|n| CAPABILITIES.contains(&n));
                if !known {
                    return Err(field(
                        format!("{prefix}capabilities.{set}[{i}]"),
                        format!("{name} is not a capability (give a name like \"CAP_CHOWN\")"),
                    ));
                }
            }
        }
    }
    if let Some(limits) = process.get("rlimits").and_then(|r| r.as_array()) {
        for (i, limit) in limits.iter().enumerate() {
            let typ = limit.get("type").unwrap_or(&serde_json::Value::Null);
            if !typ.as_str().is_some_and(|t| RLIMITS.contains(&t)) {
                return Err(field(
                    format!("{prefix}rlimits[{i}].type"),
                    format!("{typ} is not a resource limit (give a name like \"RLIMIT_NOFILE\")"),
                ));
            }
        }
    }
    Ok(())
}

/// Most supplementary groups a process may have (limits.h `NGROUPS_MAX`).
const NGROUPS_MAX: usize = 65536;

/// The capabilities, `noNewPrivileges` and resource limits of an OCI
/// `process`, as runc gives them to the container's process: the sets
/// before it executes its program (whose `execve` then transforms them,
/// as in the Sentry), limits as they are. `prefix` names the fields in
/// errors (`process.`).
pub fn privileges(
    process: &oci_spec::runtime::Process,
    prefix: &str,
) -> Result<crate::control::Privileges, Error> {
    let number = |v: serde_json::Value, table: &[&str]| {
        v.as_str().and_then(|n| table.iter().position(|t| *t == n))
    };
    let capabilities = match process.capabilities() {
        None => None,
        Some(c) => {
            let mask = |set: &Option<oci_spec::runtime::Capabilities>, name: &str| {
                let mut bits = 0u64;
                for cap in set.iter().flatten() {
                    let v = serde_json::to_value(cap).unwrap_or_default();
                    match number(v.clone(), &CAPABILITIES) {
                        Some(n) => bits |= 1 << n,
                        None => {
                            return Err(field(
                                format!("{prefix}capabilities.{name}"),
                                format!("{v} is not a capability"),
                            ))
                        }
                    }
                }
                Ok(bits)
            };
            Some(crate::control::Capabilities {
                effective: mask(c.effective(), "effective")?,
                permitted: mask(c.permitted(), "permitted")?,
                inheritable: mask(c.inheritable(), "inheritable")?,
                bounding: mask(c.bounding(), "bounding")?,
                ambient: mask(c.ambient(), "ambient")?,
            })
        }
    };
    let mut rlimits: Vec<(u32, u64, u64)> = Vec::new();
    for (i, r) in process.rlimits().iter().flatten().enumerate() {
        let name = format!("{prefix}rlimits[{i}]");
        let v = serde_json::to_value(r.typ()).unwrap_or_default();
        let Some(n) = number(v.clone(), &RLIMITS) else {
            return Err(field(
                format!("{name}.type"),
                format!("{v} is not a resource limit"),
            ));
        };
        if r.soft() > r.hard() {
            return Err(field(
                name,
                format!(
                    "soft limit {} above hard limit {} (setrlimit(2) refuses it)",
                    r.soft(),
                    r.hard()
                ),
            ));
        }
        // (runc applies them in order: a later entry for the same limit wins)
        rlimits.retain(|&(t, _, _)| t != n as u32);
        rlimits.push((n as u32, r.soft(), r.hard()));
    }
    let umask = process.user().umask();
    if let Some(u) = umask.filter(|u| *u > 0o777) {
        return Err(field(
            format!("{prefix}user.umask"),
            format!("{u:#o} is not a file mode creation mask (give one from 0 to 0o777)"),
        ));
    }
    let mut groups = process.user().additional_gids().clone().unwrap_or_default();
    groups.sort_unstable();
    groups.dedup();
    if groups.len() > NGROUPS_MAX {
        return Err(field(
            format!("{prefix}user.additionalGids"),
            format!(
                "{} groups, more than setgroups(2) takes ({NGROUPS_MAX})",
                groups.len()
            ),
        ));
    }
    Ok(crate::control::Privileges {
        capabilities,
        no_new_privileges: process.no_new_privileges().unwrap_or(false),
        rlimits,
        umask,
        groups,
    })
}

/// What the sandbox will run, derived from a checked bundle.
#[derive(Debug, Clone)]
pub struct Plan {
    /// host directory that becomes the guest's root
    pub rootfs: PathBuf,
    /// `linux.seccomp` as the program the Sentry runs for the guest
    pub seccomp: Option<Vec<abi::bpf::SockFilter>>,
    /// the NVIDIA devices `linux.devices` names (`nvidiactl`, `nvidia0`,
    /// `nvidia-uvm`), as the NVIDIA container toolkit writes them: given to
    /// the guest through nvproxy with the runtime's `--nvproxy`
    pub nvidia_devices: Vec<String>,
    /// `linux.resources.cpu.cpus`: the host CPUs the sandbox runs on
    pub cpus: Option<Vec<usize>>,
    /// `linux.memoryPolicy`: the mode (with its flags) and nodes the
    /// sandbox's memory is placed by, on the host and in the guest's view
    pub mempolicy: Option<(i32, Vec<usize>)>,
    /// `root.readonly`
    pub readonly: bool,
    /// `process.args`
    pub argv: Vec<String>,
    /// `process.env`
    pub env: Vec<String>,
    /// `process.cwd`
    pub cwd: String,
    /// `hostname`, or the container id when absent
    pub hostname: String,
    /// `process.terminal`
    pub terminal: bool,
    /// `process.consoleSize` as (rows, columns)
    pub console_size: Option<(u16, u16)>,
    /// `process.oomScoreAdj`
    pub oom_score_adj: Option<i32>,
    /// `annotations`
    pub annotations: BTreeMap<String, String>,
    /// the hooks to run on the host: `prestart`, `createRuntime`,
    /// `poststart`, `poststop` (the other kinds are refused)
    pub hooks: Option<Hooks>,
    /// `linux.namespaces` asks for a new network namespace: the sandbox's
    /// host process gets one (with nothing in it the Sentry uses), so that
    /// hooks that set up "the container's" network namespace act on that,
    /// never on the host's
    pub network_namespace: bool,
    /// `linux.namespaces` names an existing network namespace by `path`
    /// (a Kubernetes pod's, one `ip netns add` made): the sandbox's host
    /// process joins it instead of making one
    pub network_namespace_path: Option<NamespacePath>,
    /// `linux.resources` applied through the sandbox's host cgroup
    pub limits: Limits,
    /// `linux.cgroupsPath`
    pub cgroups_path: Option<PathBuf>,
    /// fields accepted but not honoured in a way the user may notice, for
    /// the log at warning level
    pub notes: Vec<String>,
    /// fields accepted and ignored because ignoring them is harmless, for
    /// the log at info level
    pub ignored: Vec<String>,
    /// bind and tmpfs mounts beyond the sandbox's standard ones, in order
    pub mounts: Vec<PlanMount>,
    /// `process.user.uid` and `gid`
    pub uid: u32,
    /// see `uid`
    pub gid: u32,
    /// `process.capabilities`, `noNewPrivileges`, `rlimits` and
    /// `user.umask`
    pub privileges: crate::control::Privileges,
    /// `linux.maskedPaths`
    pub masked_paths: Vec<String>,
    /// `linux.readonlyPaths`
    pub readonly_paths: Vec<String>,
    /// `linux.sysctl` entries the Sentry applies (checked, by name)
    pub sysctls: Vec<(String, String)>,
}

/// An existing namespace the sandbox's host process joins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespacePath {
    /// the field that named it (`linux.namespaces[N].path`), for errors
    pub field: String,
    /// the namespace file
    pub path: PathBuf,
}

/// A mount the sandbox makes at boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanMount {
    /// a host directory or regular file, served by a gofer of its own
    Bind {
        /// host path
        source: PathBuf,
        /// guest path
        dest: String,
        /// `ro` among the options
        read_only: bool,
    },
    /// a tmpfs of the sandbox's own
    Tmpfs {
        /// guest path
        dest: String,
        /// `mode=` (default 1777)
        mode: u32,
        /// `size=` in bytes; `None`: half the sandbox's memory, as Linux
        size: Option<u64>,
    },
}

/// Options of bind and tmpfs mounts that change nothing in the sandbox
/// (propagation, and flags the Sentry applies anyway or that only matter
/// to the host's kernel).
const HARMLESS_MOUNT_OPTIONS: &[&str] = &[
    "bind",
    "rbind",
    "rw",
    "private",
    "rprivate",
    "slave",
    "rslave",
    "shared",
    "rshared",
    "unbindable",
    "runbindable",
    "nosuid",
    "nodev",
    "noexec",
    "suid",
    "dev",
    "exec",
    "relatime",
    "norelatime",
    "strictatime",
    "noatime",
    "nodiratime",
    "diratime",
    "atime",
    "nostrictatime",
    // The recursive forms (mount_setattr(2) with AT_RECURSIVE): nothing is
    // mounted below a mount of the sandbox's but by the guest itself.
    "rnosuid",
    "rnodev",
    "rnoexec",
    "rsuid",
    "rdev",
    "rexec",
    "rrw",
    "ratime",
    "rnoatime",
    "rrelatime",
    "rnorelatime",
    "rstrictatime",
    "rnostrictatime",
    "rdiratime",
    "rnodiratime",
    "Z",
    "z",
];

/// `size=` of a tmpfs: bytes with an optional k, m or g suffix.
fn tmpfs_size(v: &str) -> Option<u64> {
    let (num, mult) = match v.chars().last()? {
        'k' | 'K' => (&v[..v.len() - 1], 1u64 << 10),
        'm' | 'M' => (&v[..v.len() - 1], 1 << 20),
        'g' | 'G' => (&v[..v.len() - 1], 1 << 30),
        _ => (v, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// Why a `--tmpfs` of `do` is refused, one line naming it.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TmpfsError {
    /// a path that is relative or climbs with `..`
    #[error("--tmpfs {0}: the path in the sandbox must be absolute, without \"..\"")]
    BadPath(String),
    /// `size=` without a size
    #[error("--tmpfs {spec}: \"{option}\" is not a size (e.g. size=64m)")]
    BadSize {
        /// the whole flag's value
        spec: String,
        /// the option at fault
        option: String,
    },
    /// `mode=` without an octal mode
    #[error("--tmpfs {spec}: \"{option}\" is not an octal mode")]
    BadMode {
        /// the whole flag's value
        spec: String,
        /// the option at fault
        option: String,
    },
    /// an option other than `size=` and `mode=`
    #[error("--tmpfs {spec}: unknown option \"{option}\" (size= and mode= are known)")]
    UnknownOption {
        /// the whole flag's value
        spec: String,
        /// the option at fault
        option: String,
    },
}

/// Parses `do`'s `--tmpfs PATH[:OPTIONS]`, OPTIONS being `size=` and
/// `mode=` separated by commas (as `docker run --tmpfs`); returns the path,
/// the mode and the size (`None`: the default).
pub fn parse_tmpfs(spec: &str) -> Result<(String, u32, Option<u64>), TmpfsError> {
    let (dest, opts) = spec.split_once(':').unwrap_or((spec, ""));
    if !dest.starts_with('/') || dest.split('/').any(|c| c == "..") {
        return Err(TmpfsError::BadPath(spec.to_owned()));
    }
    let (mut mode, mut size) = (0o1777, None);
    for o in opts.split(',').filter(|o| !o.is_empty()) {
        let (spec, option) = (spec.to_owned(), o.to_owned());
        if let Some(v) = o.strip_prefix("size=") {
            size = Some(
                tmpfs_size(v)
                    .filter(|&s| s > 0)
                    .ok_or(TmpfsError::BadSize { spec, option })?,
            );
        } else if let Some(v) = o.strip_prefix("mode=") {
            mode = u32::from_str_radix(v, 8)
                .ok()
                .filter(|m| m & !0o7777 == 0)
                .ok_or(TmpfsError::BadMode { spec, option })?;
        } else {
            return Err(TmpfsError::UnknownOption { spec, option });
        }
    }
    Ok((dest.to_owned(), mode, size))
}

/// Checks one bind or tmpfs mount and says how to make it.
fn plan_mount(
    bundle: &Bundle,
    i: usize,
    m: &oci_spec::runtime::Mount,
    bind: bool,
) -> Result<PlanMount, Error> {
    let dest = m.destination().to_string_lossy().into_owned();
    if !dest.starts_with('/') || dest.split('/').any(|c| c == "..") {
        return Err(field(
            format!("mounts[{i}].destination"),
            format!("\"{dest}\" must be an absolute path without \"..\""),
        ));
    }
    let mut read_only = false;
    let mut mode = 0o1777;
    let mut size = None;
    for o in m.options().as_deref().unwrap_or_default() {
        // `rro`: read-only with what is below, which is nothing but the
        // guest's own mounts.
        if o == "ro" || o == "rro" {
            read_only = true;
        } else if let (false, Some(v)) = (bind, o.strip_prefix("mode=")) {
            mode = u32::from_str_radix(v, 8).map_err(|_| {
                field(
                    format!("mounts[{i}].options"),
                    format!("\"{o}\": not an octal mode"),
                )
            })?;
        } else if let (false, Some(v)) = (bind, o.strip_prefix("size=")) {
            size = Some(tmpfs_size(v).ok_or_else(|| {
                field(
                    format!("mounts[{i}].options"),
                    format!("\"{o}\": not a size"),
                )
            })?);
        } else if !HARMLESS_MOUNT_OPTIONS.contains(&o.as_str())
            && !o.starts_with("nr_inodes=")
            && !o.starts_with("uid=")
            && !o.starts_with("gid=")
        {
            return Err(unsupported(
                format!("mounts[{i}].options"),
                format!("mount option \"{o}\" at {dest}"),
            ));
        }
    }
    if !bind {
        if read_only {
            return Err(unsupported(
                format!("mounts[{i}].options"),
                "a read-only tmpfs",
            ));
        }
        return Ok(PlanMount::Tmpfs { dest, mode, size });
    }
    let Some(source) = m.source() else {
        return Err(field(
            format!("mounts[{i}].source"),
            "missing for a bind mount",
        ));
    };
    // A relative source is relative to the bundle.
    let source = bundle.dir.join(source);
    let meta = std::fs::metadata(&source).map_err(|e| {
        field(
            format!("mounts[{i}].source"),
            format!("{}: {e}", source.display()),
        )
    })?;
    if !meta.is_dir() && !meta.is_file() {
        return Err(unsupported(
            format!("mounts[{i}].source"),
            format!(
                "bind mount of {} at {dest}: only directories and regular files can be \
                 mounted (a host device, FIFO or socket would be a way out of the sandbox)",
                source.display()
            ),
        ));
    }
    Ok(PlanMount::Bind {
        source,
        dest,
        read_only,
    })
}

/// Mount types the sandbox provides itself, at the places runc's default
/// spec and container engines put them. The Sentry serves its own view of
/// each (or the guest simply does not see a host one), so accepting them
/// never hands the guest a host object.
const STANDARD_MOUNTS: &[(&str, &[&str])] = &[
    ("proc", &["/proc"]),
    ("sysfs", &["/sys"]),
    ("tmpfs", &["/dev", "/dev/shm"]),
    ("devpts", &["/dev/pts"]),
    ("mqueue", &["/dev/mqueue"]),
    ("cgroup", &["/sys/fs/cgroup"]),
    ("cgroup2", &["/sys/fs/cgroup"]),
];

/// Sysctls engines set whose values are what the Sentry does anyway, with
/// why. Docker sets both for every container with a network namespace of
/// its own.
const SYSCTLS_AS_IS: &[(&str, &str, &str)] = &[
    (
        "net.ipv4.ip_unprivileged_port_start",
        "0",
        "the Sentry reserves no port for privileged users",
    ),
    (
        "net.ipv4.ip_forward",
        "0",
        "the sandbox forwards no packets, as 0 says",
    ),
];

/// Whether `value` is one Linux takes for `net.ipv4.ping_group_range`
/// (two group ids): whatever the range, the Sentry has no ICMP sockets
/// for it to open or close.
fn ping_group_range(value: &str) -> bool {
    let ids: Vec<_> = value.split_whitespace().map(str::parse::<u32>).collect();
    matches!(ids[..], [Ok(a), Ok(b)] if a <= i32::MAX as u32 && b <= i32::MAX as u32)
}

/// True for JSON that sets nothing: null, false, 0, "", and arrays or
/// objects of such. Engines send e.g. `"memory": {}` or `"cpu":
/// {"shares": 0}` for "no limit".
fn vacuous(v: &serde_json::Value) -> bool {
    use serde_json::Value;
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.iter().all(vacuous),
        Value::Object(o) => o.values().all(vacuous),
    }
}

fn set<T: serde::Serialize>(v: &Option<T>) -> bool {
    v.as_ref()
        .and_then(|v| serde_json::to_value(v).ok())
        .is_some_and(|v| !vacuous(&v))
}

/// Refuses, by name, a field of `linux.resources.GROUP` that is set but
/// not among `applied`.
fn only<T: serde::Serialize>(v: &Option<T>, group: &str, applied: &[&str]) -> Result<(), Error> {
    let Some(serde_json::Value::Object(o)) = v.as_ref().and_then(|v| serde_json::to_value(v).ok())
    else {
        return Ok(());
    };
    match o
        .iter()
        .find(|(k, v)| !applied.contains(&k.as_str()) && !vacuous(v))
    {
        Some((k, _)) => Err(unsupported(
            format!("linux.resources.{group}.{k}"),
            format!("of {group}, only {} are applied", applied.join(", ")),
        )),
        None => Ok(()),
    }
}

/// A byte count or count where 0 means "not set" and -1 "no limit".
fn limit(v: Option<i64>, name: &str) -> Result<Option<i64>, Error> {
    match v {
        Some(n) if n < -1 => Err(field(
            format!("linux.resources.{name}"),
            format!("{n} is not a limit (give a positive number, or -1 for none)"),
        )),
        Some(0) | None => Ok(None),
        Some(n) => Ok(Some(n)),
    }
}

/// The memory, CPU and pids limits of `linux.resources`, which the
/// sandbox's host cgroup applies to all of the sandbox (Sentry, stubs and
/// gofer together).
fn resource_limits(r: &LinuxResources) -> Result<Limits, Error> {
    only(
        r.memory(),
        "memory",
        &["limit", "reservation", "swap", "disableOOMKiller"],
    )?;
    only(r.cpu(), "cpu", &["shares", "quota", "period"])?;
    only(r.pids(), "pids", &["limit"])?;
    let memory = r.memory().as_ref();
    let cpu = r.cpu().as_ref();
    Ok(Limits {
        memory: limit(memory.and_then(|m| m.limit()), "memory.limit")?,
        memory_reservation: limit(memory.and_then(|m| m.reservation()), "memory.reservation")?,
        memory_swap: limit(memory.and_then(|m| m.swap()), "memory.swap")?,
        cpu_shares: cpu.and_then(|c| c.shares()).filter(|s| *s != 0),
        cpu_quota: limit(cpu.and_then(|c| c.quota()), "cpu.quota")?,
        cpu_period: cpu.and_then(|c| c.period()).filter(|p| *p != 0),
        pids: limit(r.pids().as_ref().map(|p| p.limit()), "pids.limit")?,
        ..Limits::default()
    })
}

/// The limits of `linux.resources` (at `create`, or given to `update`),
/// refusing by name any field the sandbox would not apply.
pub fn resources(r: &LinuxResources) -> Result<Limits, Error> {
    let limits = resource_limits(r)?;
    let others = [
        ("blockIO", set(r.block_io())),
        ("hugepageLimits", set(r.hugepage_limits())),
        ("network", set(r.network())),
        ("rdma", set(r.rdma())),
        ("unified", set(r.unified())),
    ];
    if let Some((name, _)) = others.iter().find(|(_, s)| *s) {
        return Err(unsupported(
            format!("linux.resources.{name}"),
            "only memory, cpu and pids limits are applied through the host's cgroup",
        ));
    }
    Ok(limits)
}

/// `linux.memoryPolicy` as `set_mempolicy(2)` takes it: the mode ORed
/// with its flags, and the nodes; refused as the Sentry would refuse the
/// guest's own call.
fn memory_policy(p: &oci_spec::runtime::LinuxMemoryPolicy) -> Result<(i32, Vec<usize>), Error> {
    use oci_spec::runtime::{MemoryPolicyFlagType as F, MemoryPolicyModeType as M};
    let mode = match p.mode() {
        M::MpolDefault => 0,
        M::MpolPreferred => 1,
        M::MpolBind => 2,
        M::MpolInterleave => 3,
        M::MpolLocal => 4,
        M::MpolPreferredMany => 5,
        M::MpolWeightedInterleave => 6,
    };
    let flags = p.flags().iter().flatten().fold(0, |acc, f| {
        acc | match f {
            F::MpolFStaticNodes => 1 << 15,
            F::MpolFRelativeNodes => 1 << 14,
            F::MpolFNumaBalancing => 1 << 13,
        }
    });
    let nodes = match p.nodes().as_deref().map(str::trim) {
        None | Some("") => Vec::new(),
        Some(text) => parse_cpu_list(text).ok_or_else(|| {
            field(
                "linux.memoryPolicy.nodes",
                format!("\"{text}\": not a list such as 0-3,6"),
            )
        })?,
    };
    sentry::NumaPolicy::new(mode | flags, &nodes)
        .map_err(|why| field("linux.memoryPolicy", format!("{}: {why}", p.mode())))?;
    Ok((mode | flags, nodes))
}

/// Takes `cpu.cpus` and `cpu.mems` out of `r`: the CPUs the sandbox may
/// run on (its host threads' affinity, and its cpuset cgroup's), and
/// memory nodes, which must be all of the host's (the Sentry places guest
/// memory by its own policy, `linux.memoryPolicy`).
fn cpu_set(r: &LinuxResources) -> Result<(CpuSet, LinuxResources), Error> {
    let mut r = r.clone();
    let Some(mut cpu) = r.cpu().clone() else {
        return Ok((CpuSet::default(), r));
    };
    let given = |v: &Option<String>| v.clone().filter(|s| !s.trim().is_empty());
    let list = |name: &str, text: &str| {
        parse_cpu_list(text).ok_or_else(|| {
            field(
                format!("linux.resources.cpu.{name}"),
                format!("\"{text}\": not a list such as 0-3,6"),
            )
        })
    };
    let online = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|t| parse_cpu_list(t.trim()))
            .unwrap_or_else(|| vec![0])
    };
    let cpus = match given(cpu.cpus()) {
        Some(text) => {
            let set = list("cpus", &text)?;
            let on = online("/sys/devices/system/cpu/online");
            if let Some(c) = set.iter().find(|c| !on.contains(c)) {
                return Err(field(
                    "linux.resources.cpu.cpus",
                    format!("CPU {c} is not online (online: {})", cpu_list_text(&on)),
                ));
            }
            Some(set)
        }
        None => None,
    };
    let mems = match given(cpu.mems()) {
        Some(text) => {
            let set = list("mems", &text)?;
            let on = online("/sys/devices/system/node/online");
            if set != on {
                return Err(unsupported(
                    "linux.resources.cpu.mems",
                    format!(
                        "memory nodes {text} of the host's {}: only all of them",
                        cpu_list_text(&on)
                    ),
                ));
            }
            Some(set)
        }
        None => None,
    };
    cpu.set_cpus(None);
    cpu.set_mems(None);
    r.set_cpu(Some(cpu));
    Ok((CpuSet { cpus, mems }, r))
}

/// `linux.resources.cpu.cpus` and `.mems`, as lists.
#[derive(Default)]
struct CpuSet {
    cpus: Option<Vec<usize>>,
    mems: Option<Vec<usize>>,
}

/// A kernel CPU or node list (`0-3,6`), sorted, each once.
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in text.split(',') {
        let (a, b): (usize, usize) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
            None => {
                let n = part.trim().parse().ok()?;
                (n, n)
            }
        };
        if a > b || b >= 1 << 16 {
            return None;
        }
        out.extend(a..=b);
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// `cpus` as a kernel list (`0-3,6`).
fn cpu_list_text(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// Checks `ociVersion`: this runtime implements the 1.x runtime spec.
fn check_version(version: &str) -> Result<(), Error> {
    if version.is_empty() {
        return Err(field(
            "ociVersion",
            "missing (set it to the runtime spec version, e.g. \"1.1.0\")",
        ));
    }
    let major = version.split('.').next().unwrap_or_default();
    if major != "1" || version.split('.').count() < 2 {
        return Err(field(
            "ociVersion",
            format!("\"{version}\" is not supported (this runtime implements runtime spec 1.x)"),
        ));
    }
    Ok(())
}

/// Checks a bundle and derives what to run. `id` names the container (the
/// default host name). Refuses, with the field's name, everything that would
/// change the container's behaviour if ignored.
pub fn plan(bundle: &Bundle, id: &str) -> Result<Plan, Error> {
    let spec = &bundle.spec;
    let mut notes = Vec::new();
    let mut seccomp = None;
    let mut ignored = Vec::new();
    check_version(spec.version())?;

    // root
    let root = spec
        .root()
        .as_ref()
        .ok_or_else(|| field("root", "missing (set root.path to the rootfs directory)"))?;
    let rootfs = if root.path().is_absolute() {
        root.path().clone()
    } else {
        bundle.dir.join(root.path())
    };
    match std::fs::metadata(&rootfs) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(field(
                "root.path",
                format!("{} is not a directory", rootfs.display()),
            ))
        }
        Err(e) => {
            return Err(field(
                "root.path",
                format!(
                    "{}: {e} (create the root file system there)",
                    rootfs.display()
                ),
            ))
        }
    }
    // readonly: false gives the container an in-memory overlay over the
    // rootfs: writes stay in the sandbox and vanish with it.
    let readonly = root.readonly().unwrap_or(false);

    // process
    let process = spec
        .process()
        .as_ref()
        .ok_or_else(|| field("process", "missing (say what to run in process.args)"))?;
    let argv = process.args().clone().unwrap_or_default();
    if argv.is_empty() {
        return Err(field("process.args", "empty (give the program to run)"));
    }
    let cwd = process.cwd().to_string_lossy().into_owned();
    if !cwd.starts_with('/') {
        return Err(field(
            "process.cwd",
            format!("\"{cwd}\" is not an absolute path"),
        ));
    }
    let env = process.env().clone().unwrap_or_default();
    if let Some(bad) = env.iter().find(|e| !e.contains('=')) {
        return Err(field(
            "process.env",
            format!("\"{bad}\" is not of the form NAME=VALUE"),
        ));
    }
    // The Sentry gives the guest these ids, with `additionalGids` as its
    // supplementary groups, and checks permissions with them.
    // (`process.user.umask` and the groups travel with the privileges:
    // `exec` without `--process` takes them too, as runc's does.)
    let (uid, gid) = (process.user().uid(), process.user().gid());
    let privileges = privileges(process, "process.")?;
    if process.apparmor_profile().is_some() || process.selinux_label().is_some() {
        ignored.push(
            "process.apparmorProfile/selinuxLabel not applied: the Sentry is the confinement"
                .into(),
        );
    }
    if process.scheduler().is_some() {
        return Err(unsupported("process.scheduler", "scheduling policies"));
    }
    if process.io_priority().is_some() {
        return Err(unsupported("process.ioPriority", "I/O priorities"));
    }
    if process.exec_cpu_affinity().is_some() {
        return Err(unsupported("process.execCPUAffinity", "CPU affinity"));
    }
    let console_size = process
        .console_size()
        .map(|b| (b.height() as u16, b.width() as u16));

    // hostname and domainname
    let mut hostname = spec.hostname().clone().unwrap_or_else(|| id.to_string());
    if spec.domainname().as_ref().is_some_and(|d| !d.is_empty()) {
        return Err(unsupported("domainname", "a NIS domain name in the guest"));
    }

    // mounts
    let mut mounts = Vec::new();
    for (i, m) in spec.mounts().iter().flatten().enumerate() {
        let dest = m.destination().to_string_lossy();
        let typ = m.typ().as_deref().unwrap_or("");
        let options = m.options().as_deref().unwrap_or_default();
        let bind = typ == "bind" || options.iter().any(|o| o == "bind" || o == "rbind");
        let standard = !bind
            && STANDARD_MOUNTS
                .iter()
                .any(|(t, places)| *t == typ && places.contains(&dest.trim_end_matches('/')));
        if standard {
            continue;
        }
        if bind || typ == "tmpfs" {
            mounts.push(plan_mount(bundle, i, m, bind)?);
            continue;
        }
        return Err(unsupported(
            format!("mounts[{i}]"),
            format!(
                "{typ} mount at {dest}: the Sentry provides its own proc, sysfs, devpts, mqueue \
                 and cgroup at their usual places, and bind and tmpfs mounts anywhere"
            ),
        ));
    }

    // hooks: every kind runs host code at a defined moment; skipping it would
    // silently break whatever the engine set up with it. The runtime runs
    // those that run in its own namespaces (see `hooks`); the other two run
    // inside the container's, which are the Sentry's emulation.
    if let Some(h) = spec.hooks() {
        let inside = [
            ("createContainer", h.create_container()),
            ("startContainer", h.start_container()),
        ];
        if let Some((name, _)) = inside
            .iter()
            .find(|(_, v)| v.as_ref().is_some_and(|v| !v.is_empty()))
        {
            return Err(unsupported(
                format!("hooks.{name}"),
                "running a host program inside the sandbox's namespaces",
            ));
        }
    }
    let mut network_namespace = false;
    let mut network_namespace_path = None;

    let mut limits = Limits::default();
    let mut cpus = None;
    let mut mempolicy = None;
    let mut cgroups_path = None;
    let mut sysctls = Vec::new();
    let mut nvidia_devices = Vec::new();
    let mut masked_paths = Vec::new();
    let mut readonly_paths = Vec::new();
    if let Some(linux) = spec.linux() {
        let mut network_seen = false;
        for (i, ns) in linux.namespaces().iter().flatten().enumerate() {
            let is_network = ns.typ() == LinuxNamespaceType::Network;
            if is_network {
                // Two entries would leave it unclear which network the
                // container has (runtime-spec: a type appears at most once).
                if network_seen {
                    return Err(field(
                        format!("linux.namespaces[{i}]"),
                        "a second network namespace entry (give one)",
                    ));
                }
                network_seen = true;
            }
            match ns.path() {
                None if is_network => network_namespace = true,
                None => {}
                // The network namespace is the one a host process of the
                // sandbox lives in, and the Sentry only uses it under
                // `--network host`: joining an engine's (a pod's) is what
                // runc does with it. Every other kind is the Sentry's to
                // emulate, so a host namespace of that kind cannot be
                // shared with the container.
                Some(p) if is_network => {
                    let name = format!("linux.namespaces[{i}].path");
                    if !p.is_absolute() {
                        return Err(field(
                            name,
                            format!("{}: give an absolute path", p.display()),
                        ));
                    }
                    if let Err(e) = std::fs::metadata(p) {
                        return Err(field(
                            name,
                            format!("network namespace {}: {e}", p.display()),
                        ));
                    }
                    network_namespace_path = Some(NamespacePath {
                        field: name,
                        path: p.clone(),
                    });
                }
                // A Kubernetes pod's other containers name its pause
                // container's UTS and IPC namespaces. The UTS one carries
                // the pod's hostname, which the guest is shown.
                Some(p) if ns.typ() == LinuxNamespaceType::Uts => {
                    let name = format!("linux.namespaces[{i}].path");
                    if spec.hostname().as_ref().is_some_and(|h| !h.is_empty()) {
                        return Err(field(
                            "hostname",
                            format!(
                                "set while {name} joins the existing UTS namespace {}, \
                                 whose hostname the container has (drop one of them)",
                                p.display()
                            ),
                        ));
                    }
                    hostname = crate::sys::uts_nodename(p).map_err(|e| {
                        let why = if e.raw_os_error() == Some(libc::EINVAL) {
                            "not a UTS namespace".to_string()
                        } else {
                            e.to_string()
                        };
                        field(name, format!("UTS namespace {}: {why}", p.display()))
                    })?;
                }
                // System V IPC and POSIX message queues are the Sentry's
                // own: the pod's are not shared, which few programs notice
                // (the log says so).
                Some(p) if ns.typ() == LinuxNamespaceType::Ipc => {
                    let name = format!("linux.namespaces[{i}].path");
                    if let Err(e) = std::fs::metadata(p) {
                        return Err(field(name, format!("IPC namespace {}: {e}", p.display())));
                    }
                    notes.push(format!(
                        "{name}: the IPC namespace {} is not shared: the container's System V \
                         IPC objects and POSIX message queues are its sandbox's own",
                        p.display()
                    ));
                }
                Some(p) if ns.typ() == LinuxNamespaceType::Pid => {
                    return Err(unsupported(
                        format!("linux.namespaces[{i}].path"),
                        format!(
                            "sharing the process namespace {} with other containers (a \
                             pod's shareProcessNamespace): each ferrovisor sandbox has \
                             processes of its own",
                            p.display()
                        ),
                    ));
                }
                Some(p) => {
                    return Err(unsupported(
                        format!("linux.namespaces[{i}].path"),
                        format!(
                            "joining the existing {} namespace {}; the Sentry emulates \
                             namespaces of its own (only network, UTS and IPC namespaces \
                             can be named)",
                            ns.typ(),
                            p.display()
                        ),
                    ));
                }
            }
        }
        if let Some(r) = linux.resources() {
            // Device rules are harmless to skip: the Sentry exposes no host
            // device node to the guest in any case.
            let (set, r) = cpu_set(r)?;
            limits = resources(&r)?;
            limits.cpuset_cpus = set.cpus.as_deref().map(cpu_list_text);
            limits.cpuset_mems = set.mems.as_deref().map(cpu_list_text);
            cpus = set.cpus;
            if r.memory().as_ref().and_then(|m| m.disable_oom_killer()) == Some(true) {
                ignored.push(
                    "linux.resources.memory.disableOOMKiller not applied: the sandbox is killed \
                     when it passes its memory limit, as under cgroup v2"
                        .into(),
                );
            }
        }
        cgroups_path = linux.cgroups_path().clone();
        let has_namespace =
            |t: LinuxNamespaceType| linux.namespaces().iter().flatten().any(|n| n.typ() == t);
        let own_network = network_namespace || network_namespace_path.is_some();
        // (by name: the JSON object's order is lost in the parse, and the
        // first refused should be the same every time)
        let mut entries: Vec<_> = linux.sysctl().iter().flatten().collect();
        entries.sort();
        for (name, value) in entries {
            check_sysctl_namespace(name, &has_namespace, own_network)?;
            if let Some((_, _, why)) = SYSCTLS_AS_IS
                .iter()
                .find(|(n, v, _)| n == name && v == value)
            {
                ignored.push(format!("linux.sysctl {name}={value} not applied: {why}"));
                continue;
            }
            if name == "net.ipv4.ping_group_range" && ping_group_range(value) {
                ignored.push(format!(
                    "linux.sysctl {name}={value} not applied: the Sentry has no ICMP sockets \
                     to allow or refuse"
                ));
                continue;
            }
            if !sentry::sysctl::emulated(name) {
                return Err(unsupported(
                    format!("linux.sysctl.{name}"),
                    format!(
                        "the Sentry does not emulate it; it emulates {}",
                        sentry::sysctl::names().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
            sentry::sysctl::check(name, value)
                .map_err(|why| field(format!("linux.sysctl.{name}"), why))?;
            sysctls.push((name.clone(), value.clone()));
        }
        for (i, d) in linux.devices().iter().flatten().enumerate() {
            match nvidia_device(d) {
                Some(name) => nvidia_devices.extend(name),
                None => check_device(i, d)?,
            }
        }
        // As runc, the profile filters the guest's calls: the Sentry runs
        // it before answering each (its own host filter stays as it is).
        if let Some(profile) = linux.seccomp() {
            let prog = crate::seccomp::compile(profile).map_err(Error::Seccomp)?;
            seccomp = Some(prog);
        }
        // The guest is a 64-bit Linux program: LINUX is what it has.
        if let Some(p) = linux.personality() {
            if p.domain() != oci_spec::runtime::LinuxPersonalityDomain::PerLinux {
                return Err(unsupported(
                    "linux.personality.domain",
                    format!("{} (32-bit programs)", p.domain()),
                ));
            }
            if let Some(f) = p.flags().as_ref().and_then(|f| f.first()) {
                return Err(unsupported("linux.personality.flags", format!("flag {f}")));
            }
        }
        if let Some(p) = linux.memory_policy() {
            mempolicy = Some(memory_policy(p)?);
        }
        let refused = [
            ("linux.intelRdt", linux.intel_rdt().is_some()),
            ("linux.timeOffsets", linux.time_offsets().is_some()),
            ("linux.netDevices", linux.net_devices().is_some()),
        ];
        if let Some((name, _)) = refused.iter().find(|(_, s)| *s) {
            return Err(unsupported(*name, "this setting"));
        }
        // Applied in the Sentry's tree, wherever they are (the root,
        // volumes, tmpfs mounts, its own /proc and /sys); those that do not
        // exist there are skipped, as runc skips them.
        for (list, name, out) in [
            (linux.masked_paths(), "maskedPaths", &mut masked_paths),
            (linux.readonly_paths(), "readonlyPaths", &mut readonly_paths),
        ] {
            for (i, p) in list.iter().flatten().enumerate() {
                // A relative path is below the root, as runc takes it.
                let p = if p.starts_with('/') {
                    p.clone()
                } else {
                    format!("/{p}")
                };
                let root = p.trim_end_matches('/').is_empty();
                if p.split('/').any(|c| c == "..") || (root && name == "maskedPaths") {
                    return Err(field(
                        format!("linux.{name}[{i}]"),
                        format!("\"{p}\" must be a path below / without \"..\""),
                    ));
                }
                out.push(p);
            }
        }
        if linux.uid_mappings().is_some() || linux.gid_mappings().is_some() {
            ignored.push(
                "linux.uidMappings/gidMappings not applied: the guest sees the caller's ids".into(),
            );
        }
    }
    let others = [
        ("solaris", spec.solaris().is_some()),
        ("windows", spec.windows().is_some()),
        ("vm", spec.vm().is_some()),
        ("zos", spec.zos().is_some()),
    ];
    if let Some((name, _)) = others.iter().find(|(_, s)| *s) {
        return Err(unsupported(*name, "this is a Linux runtime"));
    }

    Ok(Plan {
        rootfs,
        seccomp,
        nvidia_devices,
        cpus,
        mempolicy,
        readonly,
        argv,
        env,
        cwd,
        hostname,
        terminal: process.terminal().unwrap_or(false),
        console_size,
        oom_score_adj: process.oom_score_adj(),
        hooks: spec.hooks().clone(),
        network_namespace,
        network_namespace_path,
        ignored,
        limits,
        cgroups_path,
        annotations: spec
            .annotations()
            .as_ref()
            .map(|a| a.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default(),
        notes,
        mounts,
        uid,
        gid,
        privileges,
        masked_paths,
        readonly_paths,
        sysctls,
    })
}

/// The device nodes every guest has (the Sentry's own, mode 0666, root's):
/// path, major and minor.
const GUEST_DEVICES: &[(&str, i64, i64)] = &[
    ("/dev/null", 1, 3),
    ("/dev/zero", 1, 5),
    ("/dev/full", 1, 7),
    ("/dev/random", 1, 8),
    ("/dev/urandom", 1, 9),
    ("/dev/tty", 5, 0),
    ("/dev/ptmx", 5, 2),
];

/// The paths of [`GUEST_DEVICES`], for messages.
fn guest_device_names() -> String {
    GUEST_DEVICES
        .iter()
        .map(|(p, ..)| *p)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether a `linux.devices` entry is an NVIDIA device, and the name the
/// sandbox gives it (`None` inside for those it has no use for:
/// `nvidia-modeset`, `nvidia-uvm-tools`, the capability devices).
fn nvidia_device(d: &oci_spec::runtime::LinuxDevice) -> Option<Option<String>> {
    let name = d.path().to_str()?.strip_prefix("/dev/")?;
    name.starts_with("nvidia")
        .then(|| sentry::NvDevice::from_name(name).map(|d| d.name()))
}

/// A `linux.devices` entry (`index`) is taken when it asks for one of the
/// devices the Sentry gives every guest, as the guest has it; any other
/// would need the host's device, which the sandbox does not pass through.
fn check_device(index: usize, d: &oci_spec::runtime::LinuxDevice) -> Result<(), Error> {
    let path = d.path().display().to_string();
    let known = GUEST_DEVICES.iter().find(|(p, ..)| *p == path);
    let Some(&(_, major, minor)) = known else {
        return Err(Error::HostDevice { index, path });
    };
    let char_dev = matches!(
        d.typ(),
        oci_spec::runtime::LinuxDeviceType::C | oci_spec::runtime::LinuxDeviceType::U
    );
    if !char_dev || d.major() != major || d.minor() != minor {
        return Err(Error::DeviceNumber {
            index,
            path,
            major,
            minor,
        });
    }
    let mode_ok = d.file_mode().is_none_or(|m| m & 0o7777 == 0o666);
    let owner_ok = d.uid().is_none_or(|u| u == 0) && d.gid().is_none_or(|g| g == 0);
    if !mode_ok || !owner_ok {
        return Err(Error::DeviceMode { index, path });
    }
    Ok(())
}

/// runc's rule for which sysctls a container may set: only those of a
/// kernel namespace the container has its own of (its validator's
/// `sysctl()`), so that none reaches the host's. The sandbox's are always
/// its own, but a config that asks for the host's IPC or network
/// namespace is refused as runc refuses it.
fn check_sysctl_namespace(
    name: &str,
    has_namespace: &dyn Fn(LinuxNamespaceType) -> bool,
    own_network: bool,
) -> Result<(), Error> {
    const IPC: &[&str] = &[
        "kernel.msgmax",
        "kernel.msgmnb",
        "kernel.msgmni",
        "kernel.sem",
        "kernel.shmall",
        "kernel.shmmax",
        "kernel.shmmni",
        "kernel.shm_rmid_forced",
    ];
    let f = format!("linux.sysctl.{name}");
    if IPC.contains(&name) || name.starts_with("fs.mqueue.") {
        if !has_namespace(LinuxNamespaceType::Ipc) {
            return Err(field(
                f,
                "not allowed in the host's IPC namespace (add an ipc entry to linux.namespaces)",
            ));
        }
        return Ok(());
    }
    if name.starts_with("net.") {
        if !own_network {
            return Err(field(
                f,
                "not allowed in the host's network namespace (add a network entry to \
                 linux.namespaces)",
            ));
        }
        return Ok(());
    }
    if has_namespace(LinuxNamespaceType::Uts) {
        match name {
            "kernel.hostname" => {
                return Err(field(
                    f,
                    "conflicts with the OCI \"hostname\" field (set that instead)",
                ))
            }
            "kernel.domainname" => {
                return Err(unsupported(f, "a NIS domain name in the guest"));
            }
            _ => {}
        }
    }
    Err(field(
        f,
        "not in a kernel namespace of the container's own (runc refuses it too)",
    ))
}

/// The `config.json` that `ferrovisor spec` writes: runc's template (a shell
/// in `rootfs`), trimmed to what this runtime accepts and with the caller's
/// own ids.
pub fn template() -> Spec {
    let mut spec = Spec::default();
    spec.set_version(oci_spec::runtime::VERSION.to_string());
    spec.set_hostname(Some("ferrovisor".into()));
    if let Some(process) = spec.process_mut() {
        let (uid, gid) = crate::sys::ids();
        process.user_mut().set_uid(uid);
        process.user_mut().set_gid(gid);
        process.set_terminal(Some(false));
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle_with(
        edit: impl FnOnce(&mut serde_json::Value),
    ) -> (tempdir::Dir, Result<Plan, Error>) {
        let dir = tempdir::Dir::new();
        std::fs::create_dir(dir.path().join("rootfs")).expect("mkdir rootfs");
        let mut v = serde_json::to_value(template()).expect("template serializes");
        edit(&mut v);
        std::fs::write(dir.path().join("config.json"), v.to_string()).expect("write config");
        let b = load(dir.path()).expect("load");
        let r = plan(&b, "c1");
        (dir, r)
    }

    mod tempdir {
        use std::path::{Path, PathBuf};
        use std::sync::atomic::{AtomicUsize, Ordering};

        static N: AtomicUsize = AtomicUsize::new(0);

        pub struct Dir(PathBuf);
        impl Dir {
            pub fn new() -> Self {
                let p = std::env::temp_dir().join(format!(
                    "ferrovisor-oci-unit-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                let _ = std::fs::remove_dir_all(&p);
                std::fs::create_dir_all(&p).expect("temp dir");
                Dir(p)
            }
            pub fn path(&self) -> &Path {
                &self.0
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    fn err_text(r: Result<Plan, Error>) -> String {
        match r {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn template_is_accepted() {
        let (_d, r) = bundle_with(|_| {});
        let p = r.expect("template accepted");
        assert_eq!(p.argv, ["sh"]);
        assert_eq!(p.hostname, "ferrovisor");
        assert!(p.readonly);
        assert!(p.rootfs.ends_with("rootfs"));
    }

    #[test]
    fn devices_the_guest_has_are_taken_others_refused() {
        let dev = |path: &str, typ: &str, major: i64, minor: i64, mode: u32| {
            serde_json::json!({"path": path, "type": typ, "major": major, "minor": minor,
                               "fileMode": mode, "uid": 0, "gid": 0})
        };
        // As Docker sends `--device /dev/null` and `--device /dev/urandom`.
        let (_d, r) = bundle_with(|v| {
            v["linux"]["devices"] = serde_json::json!([
                dev("/dev/null", "c", 1, 3, 0o666),
                dev("/dev/urandom", "c", 1, 9, 0o20666)
            ])
        });
        assert!(r.is_ok(), "{:?}", r.err());
        for (entry, says) in [
            (
                dev("/dev/kvm", "c", 10, 232, 0o666),
                "host devices are not passed through",
            ),
            (dev("/dev/null", "c", 1, 5, 0o666), "character device 1:3"),
            (dev("/dev/null", "b", 1, 3, 0o666), "character device 1:3"),
            (dev("/dev/zero", "c", 1, 5, 0o600), "mode 0666"),
        ] {
            let (_d, r) = bundle_with(|v| {
                v["linux"]["devices"] =
                    serde_json::json!([dev("/dev/full", "c", 1, 7, 0o666), entry])
            });
            let text = err_text(r);
            assert!(
                text.contains("linux.devices[1]") && text.contains(says),
                "{text}"
            );
        }
    }

    #[test]
    fn version_is_checked() {
        let (_d, r) = bundle_with(|v| v["ociVersion"] = "2.0.0".into());
        assert!(err_text(r).contains("ociVersion"));
        let (_d, r) = bundle_with(|v| v["ociVersion"] = "1.0.2-dev".into());
        assert!(r.is_ok());
    }

    #[test]
    fn semantic_fields_are_refused_by_name() {
        type Edit = Box<dyn Fn(&mut serde_json::Value)>;
        let cases: Vec<(&str, Edit)> = vec![
            (
                "mounts[7].source",
                Box::new(|v| {
                    v["mounts"]
                        .as_array_mut()
                        .expect("mounts")
                        .push(serde_json::json!({
                        "destination": "/data", "type": "bind", "source": "/dev/null",
                        "options": ["rbind"]}))
                }),
            ),
            (
                "mounts[7].options",
                Box::new(|v| {
                    v["mounts"]
                        .as_array_mut()
                        .expect("mounts")
                        .push(serde_json::json!({
                        "destination": "/data", "type": "bind", "source": "/etc",
                        "options": ["rbind", "idmap"]}))
                }),
            ),
            (
                "mounts[7]",
                Box::new(|v| {
                    v["mounts"]
                        .as_array_mut()
                        .expect("mounts")
                        .push(serde_json::json!({
                        "destination": "/data", "type": "nfs", "source": "server:/x"}))
                }),
            ),
            (
                "linux.namespaces[0].path",
                Box::new(|v| v["linux"]["namespaces"][0]["path"] = "/proc/1/ns/pid".into()),
            ),
            (
                "linux.namespaces[1].path",
                Box::new(|v| v["linux"]["namespaces"][1]["path"] = "/nonexistent/netns".into()),
            ),
            (
                "linux.namespaces[1].path",
                Box::new(|v| v["linux"]["namespaces"][1]["path"] = "proc/1/ns/net".into()),
            ),
            (
                "linux.namespaces[6]",
                Box::new(|v| {
                    v["linux"]["namespaces"]
                        .as_array_mut()
                        .expect("namespaces")
                        .push(serde_json::json!({"type": "network"}))
                }),
            ),
            (
                "hooks.createContainer",
                Box::new(|v| {
                    v["hooks"] = serde_json::json!({"createContainer": [{"path": "/bin/true"}]})
                }),
            ),
            (
                "linux.sysctl.net.core.somaxconn",
                Box::new(|v| {
                    v["linux"]["sysctl"] = serde_json::json!({"net.core.somaxconn": "5000"})
                }),
            ),
            (
                "linux.sysctl.net.ipv4.tcp_syncookies",
                Box::new(|v| {
                    v["linux"]["sysctl"] = serde_json::json!({"net.ipv4.tcp_syncookies": "1"})
                }),
            ),
            (
                "linux.resources.memory.swappiness",
                Box::new(|v| {
                    v["linux"]["resources"]["memory"] =
                        serde_json::json!({"limit": 1000000, "swappiness": 10})
                }),
            ),
            (
                "linux.resources.cpu.mems",
                Box::new(|v| v["linux"]["resources"]["cpu"] = serde_json::json!({"mems": "0-63"})),
            ),
            (
                "linux.resources.cpu.cpus",
                Box::new(|v| v["linux"]["resources"]["cpu"] = serde_json::json!({"cpus": "4096"})),
            ),
            (
                "linux.personality.domain",
                Box::new(|v| v["linux"]["personality"] = serde_json::json!({"domain": "LINUX32"})),
            ),
            (
                "linux.resources.blockIO",
                Box::new(|v| {
                    v["linux"]["resources"]["blockIO"] = serde_json::json!({"weight": 100})
                }),
            ),
            (
                "linux.resources.pids.limit",
                Box::new(|v| v["linux"]["resources"]["pids"] = serde_json::json!({"limit": -5})),
            ),
            (
                "process.user.umask",
                Box::new(|v| v["process"]["user"]["umask"] = 0o1000.into()),
            ),
            (
                "process.user.additionalGids",
                Box::new(|v| {
                    v["process"]["user"]["additionalGids"] = (0..65537).collect::<Vec<u32>>().into()
                }),
            ),
            (
                "linux.sysctl.vm.swappiness",
                Box::new(|v| v["linux"]["sysctl"] = serde_json::json!({"vm.swappiness": "1"})),
            ),
            (
                "linux.sysctl.kernel.hostname",
                Box::new(|v| v["linux"]["sysctl"] = serde_json::json!({"kernel.hostname": "x"})),
            ),
            (
                "linux.sysctl.kernel.shmmni",
                Box::new(|v| v["linux"]["sysctl"] = serde_json::json!({"kernel.shmmni": "-1"})),
            ),
            (
                "linux.sysctl.fs.mqueue.msg_max",
                Box::new(|v| {
                    v["linux"]["sysctl"] = serde_json::json!({"fs.mqueue.msg_max": "5"});
                    v["linux"]["namespaces"]
                        .as_array_mut()
                        .expect("namespaces")
                        .retain(|n| n["type"] != "ipc");
                }),
            ),
            (
                "linux.maskedPaths[1]",
                Box::new(|v| {
                    v["linux"]["maskedPaths"] = serde_json::json!(["/proc/kcore", "a/../b"])
                }),
            ),
            (
                "linux.readonlyPaths[0]",
                Box::new(|v| v["linux"]["readonlyPaths"] = serde_json::json!(["/proc/../etc"])),
            ),
            ("root.path", Box::new(|v| v["root"]["path"] = "nope".into())),
            (
                "process.rlimits[1]",
                Box::new(|v| {
                    v["process"]["rlimits"] = serde_json::json!([
                        {"type": "RLIMIT_CORE", "soft": 0, "hard": 0},
                        {"type": "RLIMIT_NOFILE", "soft": 2048, "hard": 1024},
                    ])
                }),
            ),
            (
                "process.args",
                Box::new(|v| v["process"]["args"] = serde_json::json!([])),
            ),
        ];
        for (name, edit) in cases {
            let (_d, r) = bundle_with(|v| edit(v));
            let text = err_text(r);
            assert!(text.contains(name), "{name}: {text}");
            assert!(!text.contains('\n'), "one line: {text}");
        }
    }

    #[test]
    fn privileges_are_planned_as_bit_masks() {
        let (_d, r) = bundle_with(|v| {
            v["process"]["capabilities"] = serde_json::json!({
                "bounding": ["CAP_CHOWN", "CAP_CHECKPOINT_RESTORE"],
                "effective": ["CAP_KILL"],
                "permitted": ["CAP_KILL", "CAP_SYS_ADMIN"],
            });
            v["process"]["rlimits"] = serde_json::json!([
                {"type": "RLIMIT_NOFILE", "soft": 10, "hard": 20},
                {"type": "RLIMIT_RTTIME", "soft": 1, "hard": 2},
                {"type": "RLIMIT_NOFILE", "soft": 30, "hard": 40},
            ]);
            v["process"]["noNewPrivileges"] = true.into();
        });
        let p = r.expect("accepted").privileges;
        assert_eq!(
            p.capabilities,
            Some(crate::control::Capabilities {
                effective: 1 << 5,
                permitted: 1 << 5 | 1 << 21,
                inheritable: 0,
                bounding: 1 | 1 << 40,
                ambient: 0,
            })
        );
        // (the later entry for a limit wins, as when runc sets them in turn)
        assert_eq!(p.rlimits, [(15, 1, 2), (7, 30, 40)]);
        assert!(p.no_new_privileges);
        let (_d, r) = bundle_with(|v| {
            let process = v["process"].as_object_mut().expect("process");
            for key in ["noNewPrivileges", "capabilities", "rlimits"] {
                process.remove(key);
            }
        });
        assert_eq!(
            r.expect("accepted").privileges,
            crate::control::Privileges::default()
        );
    }

    #[test]
    fn unknown_capability_and_limit_names_are_refused_by_field() {
        let cases: [(&str, serde_json::Value, &str); 3] = [
            (
                "capabilities",
                serde_json::json!({"effective": ["CAP_KILL", "CAP_TELEPORT"]}),
                "process.capabilities.effective[1]",
            ),
            (
                "capabilities",
                serde_json::json!({"ambient": ["chown"]}),
                "process.capabilities.ambient[0]",
            ),
            (
                "rlimits",
                serde_json::json!([{"type": "RLIMIT_FUN", "soft": 1, "hard": 1}]),
                "process.rlimits[0].type",
            ),
        ];
        for (key, value, name) in cases {
            let dir = tempdir::Dir::new();
            std::fs::create_dir(dir.path().join("rootfs")).expect("mkdir rootfs");
            let mut v = serde_json::to_value(template()).expect("template serializes");
            v["process"][key] = value;
            std::fs::write(dir.path().join("config.json"), v.to_string()).expect("write");
            let text = load(dir.path()).expect_err("refused").to_string();
            assert!(text.contains(name), "{name}: {text}");
            assert!(!text.contains('\n'), "one line: {text}");
        }
    }

    #[test]
    fn a_network_namespace_path_is_joined_not_refused() {
        let (_d, r) = bundle_with(|v| {
            assert_eq!(v["linux"]["namespaces"][1]["type"], "network");
            v["linux"]["namespaces"][1]["path"] = "/proc/self/ns/net".into();
        });
        let p = r.expect("a network namespace path is accepted");
        assert!(!p.network_namespace, "joined, not made");
        assert_eq!(
            p.network_namespace_path,
            Some(NamespacePath {
                field: "linux.namespaces[1].path".into(),
                path: "/proc/self/ns/net".into(),
            })
        );
        let (_d, r) = bundle_with(|_| {});
        assert_eq!(r.expect("template").network_namespace_path, None);
    }

    #[test]
    fn sysctls_paths_umask_and_groups_are_planned() {
        let (_d, r) = bundle_with(|v| {
            v["process"]["user"]["umask"] = 0o077.into();
            v["process"]["user"]["additionalGids"] = serde_json::json!([10, 5, 3, 5]);
            v["linux"]["sysctl"] = serde_json::json!({
                "fs.mqueue.msg_max": "20", "kernel.shmmax": "68719476736"});
            v["linux"]["maskedPaths"] = serde_json::json!(["/proc/kcore", "/srv/secret"]);
            v["linux"]["readonlyPaths"] = serde_json::json!(["/proc/sys"]);
        });
        let p = r.expect("accepted");
        assert_eq!(p.privileges.umask, Some(0o077));
        assert_eq!(p.privileges.groups, [3, 5, 10]);
        assert_eq!(
            p.sysctls,
            [
                ("fs.mqueue.msg_max".to_string(), "20".to_string()),
                ("kernel.shmmax".into(), "68719476736".into())
            ]
        );
        assert_eq!(p.masked_paths, ["/proc/kcore", "/srv/secret"]);
        assert_eq!(p.readonly_paths, ["/proc/sys"]);
    }

    #[test]
    fn harmless_fields_are_accepted() {
        let (_d, r) = bundle_with(|v| {
            v["linux"]["resources"] = serde_json::json!({
                "devices": [{"allow": false, "access": "rwm"}],
                "memory": {}, "cpu": {"shares": 1024}});
            v["root"]["readonly"] = false.into();
            v["annotations"] = serde_json::json!({"a": "b"});
        });
        let p = r.expect("accepted");
        // readonly: false is honoured (an in-memory overlay), no note.
        assert!(!p.readonly);
        assert!(!p.notes.iter().any(|n| n.contains("root.readonly")));
        assert_eq!(p.annotations.get("a").map(String::as_str), Some("b"));
    }

    /// What Docker 20.10 sends for `docker run --network none` (abridged).
    #[test]
    fn docker_config_is_accepted() {
        let files = tempdir::Dir::new();
        let hosts = files.path().join("hosts");
        std::fs::write(&hosts, "127.0.0.1\tlocalhost\n").expect("write hosts");
        let (_d, r) = bundle_with(|v| {
            v["mounts"]
                .as_array_mut()
                .expect("mounts")
                .push(serde_json::json!({
                "destination": "/etc/hosts", "type": "bind",
                "source": hosts, "options": ["rbind", "rprivate"]}));
            v["hooks"] = serde_json::json!({"prestart": [{
                "path": "/proc/1/exe", "args": ["libnetwork-setkey", "-exec-root=/x", "c1"]}]});
            v["linux"]["sysctl"] = serde_json::json!({
                "net.ipv4.ip_unprivileged_port_start": "0",
                "net.ipv4.ping_group_range": "0 2147483647"});
            v["linux"]["seccomp"] = serde_json::json!({
                "defaultAction": "SCMP_ACT_ERRNO",
                "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW"}]});
            v["linux"]["resources"] = serde_json::json!({
                "memory": {"disableOOMKiller": false}, "cpu": {"shares": 0},
                "blockIO": {"weight": 0}});
            v["linux"]["cgroupsPath"] = "/docker/c1".into();
        });
        let p = r.expect("accepted");
        assert_eq!(
            p.mounts,
            vec![PlanMount::Bind {
                source: hosts,
                dest: "/etc/hosts".into(),
                read_only: false
            }]
        );
        assert!(p.network_namespace, "runc's template asks for one");
        let hooks = p.hooks.expect("hooks kept");
        assert_eq!(hooks.prestart().as_ref().map(Vec::len), Some(1));
        assert!(p.seccomp.is_some(), "the profile is applied");
        assert!(p.ignored.iter().any(|n| n.contains("ping_group_range")));
    }

    #[test]
    fn memory_cpu_and_pids_limits_are_taken() {
        let (_d, r) = bundle_with(|v| {
            v["linux"]["resources"] = serde_json::json!({
                "memory": {"limit": 67108864, "swap": -1},
                "cpu": {"shares": 512, "quota": 50000, "period": 100000},
                "pids": {"limit": 20}});
            v["linux"]["cgroupsPath"] = "/ferrovisor/x".into();
        });
        let p = r.expect("accepted");
        assert_eq!(
            p.limits,
            Limits {
                memory: Some(64 << 20),
                memory_reservation: None,
                memory_swap: Some(-1),
                cpu_shares: Some(512),
                cpu_quota: Some(50000),
                cpu_period: Some(100000),
                pids: Some(20),
                ..Limits::default()
            }
        );
        assert_eq!(p.cgroups_path.as_deref(), Some(Path::new("/ferrovisor/x")));
        let (_d, r) = bundle_with(|_| {});
        assert!(!r.expect("template").limits.any());
    }

    #[test]
    fn vacuous_values() {
        assert!(vacuous(
            &serde_json::json!({"a": 0, "b": [], "c": {"d": null}})
        ));
        assert!(!vacuous(&serde_json::json!({"a": 0, "b": [1]})));
    }

    #[test]
    fn cpu_lists_read_as_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0-3,6"), Some(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list("5,1-2,2"), Some(vec![1, 2, 5]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("a"), None);
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(cpu_list_text(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
    }

    #[test]
    fn tmpfs_specs_of_do() {
        assert_eq!(parse_tmpfs("/tmp"), Ok(("/tmp".into(), 0o1777, None)));
        assert_eq!(
            parse_tmpfs("/tmp:size=64m"),
            Ok(("/tmp".into(), 0o1777, Some(64 << 20)))
        );
        assert_eq!(
            parse_tmpfs("/scratch:mode=700,size=2g"),
            Ok(("/scratch".into(), 0o700, Some(2 << 30)))
        );
        assert_eq!(
            parse_tmpfs("/x:size=4096"),
            Ok(("/x".into(), 0o1777, Some(4096)))
        );
        for bad in [
            "tmp",
            "/a/../b",
            "/tmp:size=",
            "/tmp:size=0",
            "/tmp:size=lots",
            "/tmp:size=99999999999g",
            "/tmp:mode=9",
            "/tmp:mode=17777",
            "/tmp:uid=0",
        ] {
            let e = parse_tmpfs(bad).expect_err(bad).to_string();
            assert!(e.starts_with("--tmpfs "), "{bad}: {e}");
        }
        for (bad, says) in [
            (
                "tmp",
                "--tmpfs tmp: the path in the sandbox must be absolute, without \"..\"",
            ),
            (
                "/tmp:size=lots",
                "--tmpfs /tmp:size=lots: \"size=lots\" is not a size (e.g. size=64m)",
            ),
            (
                "/tmp:mode=9",
                "--tmpfs /tmp:mode=9: \"mode=9\" is not an octal mode",
            ),
            (
                "/tmp:uid=0",
                "--tmpfs /tmp:uid=0: unknown option \"uid=0\" (size= and mode= are known)",
            ),
        ] {
            assert_eq!(parse_tmpfs(bad).expect_err(bad).to_string(), says);
        }
    }
}
