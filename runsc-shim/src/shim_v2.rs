//! containerd's shim v2 for ferrovisor (`containerd-shim-ferrovisor-v1`,
//! runtime `io.containerd.ferrovisor.v1`), on the `containerd-shim` crate's
//! synchronous API.
//!
//! The shim drives the same lifecycle library as the `ferrovisor` CLI
//! ([`crate::container::Runtime`]): `Create` mounts the task's rootfs into
//! the bundle and calls [`Runtime::create`] with the task's stdio FIFOs as
//! the sandbox's stdio; `Start`, `Kill`, `Pids` and `Delete` map onto
//! `start`, `kill`, `ps` and `delete`. The sandbox (the `ferrovisor boot`
//! process) is the shim's child, and the shim is a subreaper, so its exit
//! status arrives through the shim's reaper thread and the crate's exit
//! monitor; the shim turns it into a `/tasks/exit` event and answers `Wait`.
//!
//! With `terminal`, the sandbox's stdio is a pseudo-terminal whose master
//! side `create` passes over a console socket (as runc's `--console-socket`);
//! the shim copies between it and the FIFOs and resizes it.
//!
//! `Update` applies the task's new `linux.resources` through
//! [`Runtime::update`], as `ferrovisor update -r` does.
//!
//! Runtime flags come from a TOML file named by `ConfigPath` in the task's
//! runtime options (containerd's `runtimeoptions.v1.Options`), as gVisor's
//! shim reads runsc's: `network = "none" | "sandbox" | "host"` and, for
//! `sandbox`, `allow_cidr = [...]` and `allow_host = [...]` (the global
//! `--network`, `--allow-cidr` and `--allow-host`), nothing else for now.
//!
//! Not supported, and answered with a clear error: checkpoints (the Sentry
//! cannot save a sandbox).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use containerd_shim as shim;
use shim::api;
use shim::monitor::{monitor_subscribe, Subject, Topic};
use shim::protos::cgroups::metrics as cgroup_metrics;
use shim::protos::events::task::{
    TaskCreate, TaskDelete, TaskExit, TaskIO, TaskPaused, TaskResumed, TaskStart,
};
use shim::protos::protobuf::well_known_types::timestamp::Timestamp;
use shim::protos::protobuf::{Message, MessageDyn, MessageField};
use shim::protos::ttrpc::{self, Code};
use shim::publisher::RemotePublisher;
use shim::{Config, DeleteResponse, ExitSignal, Flags, TtrpcContext, TtrpcResult};

use crate::container::{CreateOptions, Runtime, Stdio};
use crate::logging::LogFormat;
use crate::network::{self, Network, Spelling};
use crate::state::StateDir;

/// The answer to a checkpoint, or a create from one.
const PARENT_CHECKPOINT_UNSUPPORTED: &str =
    "a parent checkpoint is not supported by ferrovisor (its images are whole)";

/// The runtime name containerd maps to this binary.
pub const RUNTIME_ID: &str = "io.containerd.ferrovisor.v1";

/// Where containerd keeps the state of v2 tasks: a bundle is
/// `STATE/io.containerd.runtime.v2.task/NAMESPACE/ID`.
const TASK_STATE_DIR: &str = "io.containerd.runtime.v2.task";

/// The runtime's state root when the bundle is not where containerd puts
/// them: runc's shim uses `/run/containerd/runc/NAMESPACE`.
const DEFAULT_ROOT: &str = "/run/containerd/ferrovisor";

/// Why the shim could not start or serve, or set up a task's I/O: one line.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// a host operation failed
    #[error("{what}: {source}")]
    Io {
        /// what was being done
        what: String,
        /// the host's answer
        source: std::io::Error,
    },
    /// containerd did not say where it listens
    #[error("TTRPC_ADDRESS is not set (containerd sets it for its shims)")]
    NoTtrpcAddress,
    /// the shim crate's own start or publisher failed
    #[error(transparent)]
    Shim(#[from] shim::Error),
    /// the shim crate's logger
    #[error("logger: {0}")]
    Logger(shim::Error),
    /// the bootstrap answer could not be encoded
    #[error(transparent)]
    Protobuf(#[from] shim::protos::protobuf::Error),
    /// the ttrpc server
    #[error(transparent)]
    Ttrpc(#[from] ttrpc::Error),
    /// the thread that accepts the terminal's master panicked
    #[error("console thread panicked")]
    ConsolePanicked,
    /// nowhere to find the runtime this shim drives
    #[error("no ferrovisor binary beside containerd-shim-ferrovisor-v1 or in PATH")]
    NoBinary,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// Why a task's runtime config file is refused: one line.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// not TOML
    #[error("line {line}: {message}")]
    Syntax {
        /// where
        line: usize,
        /// the parser's message, its first line only
        message: String,
    },
    /// `network` is not one of the modes
    #[error("network: must be \"none\", \"sandbox\" or \"host\", not {0}")]
    BadNetwork(String),
    /// `platform` is not one of the platforms
    #[error("platform: must be \"seccomp\" or \"kvm\", not {0}")]
    BadPlatform(String),
    /// an allow list that is not a list of strings
    #[error("{key}: must be an array of strings, not {what}")]
    NotStrings {
        /// `allow_cidr` or `allow_host`
        key: String,
        /// what it is instead
        what: String,
    },
    /// a key that takes a string
    #[error("{key}: must be a string, not {what}")]
    NotString {
        /// the key
        key: String,
        /// what it is instead
        what: String,
    },
    /// a key that takes `true` or `false`
    #[error("{key}: must be true or false, not {what}")]
    NotBool {
        /// the key
        key: String,
        /// what it is instead
        what: String,
    },
    /// a key other than [`RUNTIME_CONFIG_KEYS`]
    #[error("unknown key `{0}` (only {RUNTIME_CONFIG_KEYS} are supported)")]
    UnknownKey(String),
    /// the network and its rules do not go together
    #[error(transparent)]
    Network(#[from] network::Error),
    /// `allow_http`, `secret` or `egress_log` refused
    #[error(transparent)]
    Egress(network::Error),
}

/// Why a task's runtime options, or the config file they name, are
/// refused: one line.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    /// `runtimeoptions.v1.Options` does not decode
    #[error("runtime options: {0}")]
    Decode(shim::protos::protobuf::Error),
    /// the config file cannot be read
    #[error("runtime config {}: {source}", path.display())]
    Read {
        /// the file
        path: PathBuf,
        /// the host's answer
        source: std::io::Error,
    },
    /// the config file says something this runtime does not take
    #[error("runtime config {}: {source}", path.display())]
    Config {
        /// the file
        path: PathBuf,
        /// what is wrong in it
        source: ConfigError,
    },
}

/// Runs the shim: containerd calls it with `start`, `delete` or (the shim
/// server) no action.
///
/// `start` and the server are ours rather than the crate's, for containerd
/// before 2.0: it reads the bare socket address from `start` (the crate
/// prints a JSON answer that containerd 1.6 takes for an address), and it
/// calls the Task service as `containerd.task.v2.Task` (the crate serves
/// only `containerd.task.v3.Task`, whose messages are the same).
pub fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let flags = match shim::parse(&args[1..]) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{RUNTIME_ID}: {e}");
            std::process::exit(1);
        }
    };
    let served = match flags.action.as_str() {
        "start" if !flags.info && !flags.version => Some(start(&flags)),
        "" if !flags.info && !flags.version && !flags.socket.is_empty() => Some(serve(&flags)),
        _ => None,
    };
    match served {
        Some(Ok(())) => {}
        Some(Err(e)) => {
            eprintln!("{RUNTIME_ID}: {e}");
            std::process::exit(1);
        }
        // `delete`, `-info`, `-v`: the crate's own handling.
        None => shim::run::<Service>(RUNTIME_ID, None),
    }
}

/// `start`: launches the shim server and prints its address, bare for
/// containerd's legacy protocol, as a `BootstrapResult` when containerd
/// sent `BootstrapParams` on stdin.
fn start(flags: &Flags) -> Result<(), Error> {
    use std::io::IsTerminal;
    let mut input = Vec::new();
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        stdin
            .lock()
            .take(10 << 20)
            .read_to_end(&mut input)
            .map_err(io("reading stdin"))?;
    }
    let bootstrap = (!input.is_empty())
        .then(|| shim::bootstrap::BootstrapParams::parse_from_bytes(&input).ok())
        .flatten()
        .filter(|p| p.instance_id == flags.id && p.namespace == flags.namespace);
    let bootstrapped = bootstrap.is_some();
    let mut opts = match bootstrap {
        Some(p) => shim::StartOpts::from(p),
        None => shim::StartOpts {
            id: flags.id.clone(),
            publish_binary: flags.publish_binary.clone(),
            address: flags.address.clone(),
            ttrpc_address: std::env::var("TTRPC_ADDRESS").unwrap_or_default(),
            namespace: flags.namespace.clone(),
            ..Default::default()
        },
    };
    opts.debug |= flags.debug;
    if opts.ttrpc_address.is_empty() {
        return Err(Error::NoTtrpcAddress);
    }
    let grouping = opts.id.clone();
    let (_pid, address) = shim::spawn(opts, &grouping, Vec::new())?;
    let reply = if bootstrapped {
        shim::bootstrap::BootstrapResult {
            version: shim::protos::TASK_API_VERSION,
            address,
            protocol: "ttrpc".into(),
            ..Default::default()
        }
        .write_to_bytes()?
    } else {
        address.into_bytes()
    };
    let mut out = std::io::stdout().lock();
    out.write_all(&reply)
        .and_then(|()| out.flush())
        .map_err(io("writing the address"))
}

/// The shim server: the Task service on the socket `start` chose, until
/// `Shutdown`.
fn serve(flags: &Flags) -> Result<(), Error> {
    use std::os::fd::IntoRawFd;
    use std::os::unix::net::UnixListener;

    crate::sys::set_child_subreaper().map_err(io("becoming a subreaper"))?;
    shim::logger::init(flags.debug, "info", &flags.namespace, &flags.id).map_err(Error::Logger)?;
    let ttrpc_address = std::env::var("TTRPC_ADDRESS").map_err(|_| Error::NoTtrpcAddress)?;
    let publisher = RemotePublisher::new(&ttrpc_address)?;
    let mut config = Config::default();
    let mut service = <Service as shim::Shim>::new(RUNTIME_ID, flags, &mut config);
    let task: Arc<dyn shim::Task + Send + Sync> =
        Arc::new(shim::Shim::create_task_service(&service, publisher));
    let mut methods = shim::protos::create_task(Arc::clone(&task));
    for (name, handler) in shim::protos::create_task(task) {
        if let Some(method) = name.strip_prefix("/containerd.task.v3.") {
            methods.insert(format!("/containerd.task.v2.{method}"), handler);
        }
    }

    let path = flags
        .socket
        .strip_prefix("unix://")
        .unwrap_or(&flags.socket)
        .to_string();
    if let Some(dir) = Path::new(&path).parent() {
        std::fs::create_dir_all(dir).map_err(io(dir.display().to_string()))?;
    }
    let listener = match UnixListener::bind(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            // A socket left by a shim that died: containerd chose this
            // address for this task, so it is ours to replace.
            let _ = std::fs::remove_file(&path);
            UnixListener::bind(&path)
        }
        r => r,
    }
    .map_err(io(format!("listening on {path}")))?;
    let mut server = ttrpc::Server::new()
        .add_listener(listener.into_raw_fd())?
        .register_service(methods);
    server.start()?;
    // Release `start`, which reads our stdout until it closes.
    crate::sys::stdout_to_stderr().map_err(io("closing stdout"))?;

    std::thread::Builder::new()
        .name("reaper".into())
        .spawn(reap_children)
        .map_err(io("reaper thread"))?;
    shim::Shim::wait(&mut service);
    server.shutdown();
    let _ = std::fs::remove_file(&path);
    Ok(())
}

/// Collects every child (the sandboxes, and the gofers and other orphans a
/// subreaper inherits) and hands their exit statuses to the monitor that
/// [`Service::watch_exits`] reads.
fn reap_children() {
    loop {
        match crate::sys::wait_any() {
            Ok((pid, code)) => {
                if let Err(e) = shim::monitor::monitor_notify_by_pid(pid, code) {
                    log::warn!("exit of {pid}: {e}");
                }
            }
            // No child right now: one may come with the next Create.
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    }
}

fn rpc_error(code: Code, msg: impl Into<String>) -> ttrpc::Error {
    ttrpc::Error::RpcStatus(ttrpc::get_status(code, msg.into()))
}

fn internal(e: impl std::fmt::Display) -> ttrpc::Error {
    rpc_error(Code::INTERNAL, e.to_string())
}

fn now() -> Timestamp {
    shim::util::timestamp().unwrap_or_default()
}

/// The state root for the task in `bundle`: `STATE/ferrovisor/NAMESPACE`
/// beside containerd's own task state (`/run/containerd/ferrovisor/NS` in a
/// default installation, like runc's shim), so a private containerd keeps
/// everything under its own state directory.
fn state_root(bundle: &Path, namespace: &str) -> PathBuf {
    let state = bundle
        .parent()
        .and_then(Path::parent)
        .filter(|d| d.file_name().is_some_and(|n| n == TASK_STATE_DIR))
        .and_then(Path::parent);
    match state {
        Some(s) => s.join("ferrovisor").join(namespace),
        None => Path::new(DEFAULT_ROOT).join(namespace),
    }
}

/// The `ferrovisor` binary: beside this shim, else in `PATH`.
fn ferrovisor_binary() -> Result<PathBuf, Error> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("ferrovisor")));
    let path = std::env::var_os("PATH").unwrap_or_default();
    beside
        .into_iter()
        .chain(std::env::split_paths(&path).map(|d| d.join("ferrovisor")))
        .find(|p| p.is_file())
        .ok_or(Error::NoBinary)
}

/// The runtime for a task: state under [`state_root`], log in the bundle.
fn runtime(bundle: &Path, namespace: &str, exe: PathBuf) -> Runtime {
    Runtime {
        state: StateDir::new(state_root(bundle, namespace)),
        exe,
        log: Some(bundle.join("ferrovisor.log")),
        log_format: LogFormat::Json,
        debug: false,
        // The runtime config file's `network` and allow rules set it (see
        // `RuntimeConfig`).
        network: Network::None,
        overlay: false,
        platform: crate::container::Platform::Seccomp,
        nvproxy: Default::default(),
    }
}

/// The type of containerd's generic runtime options message
/// (`runtimeoptions.v1.Options`: `type_url`, `config_path`, `config_root`),
/// which carries `ConfigPath` for runtimes other than runc.
const RUNTIME_OPTIONS: &str = "runtimeoptions.v1.Options";

/// The `config_path` of an encoded `runtimeoptions.v1.Options`, `None` if
/// empty. The message is not among the shim crate's generated types; it
/// has three string fields, read here from the wire format.
fn config_path_of(encoded: &[u8]) -> Result<Option<PathBuf>, OptionsError> {
    use shim::protos::protobuf::{rt::skip_field_for_tag, CodedInputStream};
    /// `config_path`: field 2, length-delimited (wire type 2).
    const CONFIG_PATH_TAG: u32 = (2 << 3) | 2;
    let mut input = CodedInputStream::from_bytes(encoded);
    let mut path = String::new();
    while let Some(tag) = input.read_raw_tag_or_eof().map_err(OptionsError::Decode)? {
        if tag == CONFIG_PATH_TAG {
            path = input.read_string().map_err(OptionsError::Decode)?;
        } else {
            skip_field_for_tag(tag, &mut input).map_err(OptionsError::Decode)?;
        }
    }
    Ok((!path.is_empty()).then(|| PathBuf::from(path)))
}

/// The runtime flags a task's runtime config file sets: the TOML file its
/// runtime options' `ConfigPath` names, as gVisor's shim reads one of
/// runsc flags. Only `network = "none" | "sandbox" | "host"`,
/// `allow_cidr = ["CIDR[:PORT]", ...]`, `allow_host = ["DOMAIN", ...]`,
/// `allow_http = ["HOST:METHODS", ...]`, `secret = ["NAME=@FILE:HOSTS",
/// ...]`, `egress_log = "FILE"`, `overlay = true`, `platform = "seccomp"
/// | "kvm"`, `nvproxy = true` and `nvproxy_capabilities = "CAPS"` (the
/// global flags of the same names, with their checks and meaning) for now;
/// any other key is refused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct RuntimeConfig {
    /// the containers' network and its allow rules
    network: Network,
    /// `--overlay`: a writable root's writes stay in memory
    overlay: bool,
    /// `--platform`
    platform: crate::container::Platform,
    /// `--nvproxy` (`nvproxy = true`) and `--nvproxy-capabilities`
    /// (`nvproxy_capabilities = "compute,utility"`)
    nvproxy: crate::container::NvproxyFlags,
}

/// The keys [`RuntimeConfig`] takes.
const RUNTIME_CONFIG_KEYS: &str =
    "`network`, `allow_cidr`, `allow_host`, `allow_http`, `secret`, `egress_log`, `overlay`, `platform`, `nvproxy` and `nvproxy_capabilities`";

impl RuntimeConfig {
    /// Reads and parses the file at `path`; errors are one line naming it.
    fn load(path: &Path) -> Result<RuntimeConfig, OptionsError> {
        let text = std::fs::read_to_string(path).map_err(|source| OptionsError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text).map_err(|source| OptionsError::Config {
            path: path.to_path_buf(),
            source,
        })
    }

    fn parse(text: &str) -> Result<RuntimeConfig, ConfigError> {
        let doc = toml_edit::Document::parse(text).map_err(|e| {
            let before = e.span().and_then(|s| text.get(..s.start)).unwrap_or("");
            let line = before.matches('\n').count() + 1;
            // The message alone: the error's display spans several lines.
            let message = e.message().lines().next().unwrap_or("").trim();
            ConfigError::Syntax {
                line,
                message: message.to_owned(),
            }
        })?;
        let what = |item: &toml_edit::Item| {
            item.as_str()
                .map_or_else(|| item.type_name().to_string(), |v| format!("{v:?}"))
        };
        let boolean = |key: &str, item: &toml_edit::Item| {
            item.as_bool().ok_or_else(|| ConfigError::NotBool {
                key: key.to_owned(),
                what: what(item),
            })
        };
        let string = |key: &str, item: &toml_edit::Item| {
            item.as_str()
                .map(str::to_owned)
                .ok_or_else(|| ConfigError::NotString {
                    key: key.to_owned(),
                    what: what(item),
                })
        };
        let mut mode = None;
        let (mut allow_cidr, mut allow_host) = (Vec::new(), Vec::new());
        let mut extras = network::Extras::default();
        let mut overlay = false;
        let mut platform = crate::container::Platform::Seccomp;
        let mut nvproxy = crate::container::NvproxyFlags::default();
        for (key, item) in doc.as_table().iter() {
            match key {
                "platform" => {
                    platform = item
                        .as_str()
                        .and_then(crate::container::Platform::parse)
                        .ok_or_else(|| ConfigError::BadPlatform(what(item)))?;
                }
                "overlay" => {
                    overlay = boolean(key, item)?;
                }
                "nvproxy" => {
                    nvproxy.on = boolean(key, item)?;
                }
                "nvproxy_capabilities" => {
                    nvproxy.capabilities = Some(string(key, item)?);
                }
                "network" => {
                    mode = Some(
                        item.as_str()
                            .and_then(network::Mode::parse)
                            .ok_or_else(|| ConfigError::BadNetwork(what(item)))?,
                    );
                }
                "egress_log" => {
                    extras.egress_log = Some(string(key, item)?.into());
                }
                "allow_cidr" | "allow_host" | "allow_http" | "secret" => {
                    let bad = || ConfigError::NotStrings {
                        key: key.to_owned(),
                        what: what(item),
                    };
                    let list = item
                        .as_array()
                        .ok_or_else(bad)?
                        .iter()
                        .map(|v| v.as_str().map(str::to_string))
                        .collect::<Option<Vec<String>>>()
                        .ok_or_else(bad)?;
                    match key {
                        "allow_cidr" => allow_cidr = list,
                        "allow_host" => allow_host = list,
                        "allow_http" => extras.allow_http = list,
                        _ => extras.secrets = list,
                    }
                }
                other => return Err(ConfigError::UnknownKey(other.to_owned())),
            }
        }
        let mode = mode.or_else(|| extras.given().then_some(network::Mode::Sandbox));
        let network = Network::new(mode, allow_cidr, allow_host, Spelling::ConfigFile)?
            .with_extras(extras)
            .map_err(ConfigError::Egress)?;
        Ok(RuntimeConfig {
            network,
            overlay,
            platform,
            nvproxy,
        })
    }
}

/// Lifecycle of the task as the shim tracks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Created,
    Running,
    /// frozen by `Pause` (tasks only; an exec's process pauses with them)
    Paused,
    Stopped,
}

struct Task {
    bundle: PathBuf,
    runtime: Runtime,
    pid: u32,
    phase: Phase,
    exit: Option<(u32, Timestamp)>,
    stdin: String,
    stdout: String,
    stderr: String,
    /// the write end of the pipe that feeds the sandbox's stdin from the
    /// stdin FIFO; dropped by `CloseIO`
    stdin_pipe: Arc<Mutex<Option<File>>>,
    /// the terminal's master side, with `terminal`
    master: Option<Arc<OwnedFd>>,
}

/// A process `exec` added to a task.
struct ExecProc {
    req: crate::control::ExecRequest,
    stdin: String,
    stdout: String,
    stderr: String,
    /// its pid inside the sandbox, once started
    pid: u32,
    phase: Phase,
    exit: Option<(u32, Timestamp)>,
    stdin_pipe: Arc<Mutex<Option<File>>>,
    /// signals it, once started
    signaller: Option<crate::control::Signaller>,
    /// it runs on a terminal of its own
    terminal: bool,
    /// that terminal's master side, once started
    master: Option<Arc<OwnedFd>>,
}

#[derive(Default)]
struct Tasks {
    by_id: HashMap<String, Task>,
    /// exec'd processes by (task id, exec id)
    execs: HashMap<(String, String), ExecProc>,
    /// exits of children no task claimed (yet): a sandbox that died
    /// between `create` returning and the task being recorded; bounded
    early_exits: Vec<(i32, i32)>,
}

impl Tasks {
    /// The task `id`, or containerd's "not found".
    fn get(&self, id: &str) -> Result<&Task, ttrpc::Error> {
        self.by_id.get(id).ok_or_else(|| Service::not_found(id))
    }

    /// Exec `exec_id` of task `id`, or containerd's "not found".
    fn exec(&mut self, id: &str, exec_id: &str) -> Result<&mut ExecProc, ttrpc::Error> {
        self.execs
            .get_mut(&(id.to_owned(), exec_id.to_owned()))
            .ok_or_else(|| {
                rpc_error(
                    Code::NOT_FOUND,
                    format!("exec {exec_id} of task {id} not found"),
                )
            })
    }
}

/// How many unclaimed exits to remember (gofers, reparented to the shim,
/// end up there too).
const EARLY_EXITS: usize = 64;

struct Inner {
    namespace: String,
    exit: Arc<ExitSignal>,
    tasks: Mutex<Tasks>,
    changed: Condvar,
    publisher: Mutex<Option<RemotePublisher>>,
}

/// The shim: the process containerd starts, and its task service.
#[derive(Clone)]
pub struct Service {
    inner: Arc<Inner>,
}

impl Service {
    fn tasks(&self) -> MutexGuard<'_, Tasks> {
        self.inner
            .tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `Pause` (`freeze`) or `Resume` of task `id`: the runtime's cgroup
    /// freezer, then the phase and containerd's event.
    fn freeze(&self, id: &str, freeze: bool) -> TtrpcResult<api::Empty> {
        let rt = self.tasks().get(id)?.runtime.clone();
        let done = if freeze { rt.pause(id) } else { rt.resume(id) };
        done.map_err(|e| match e {
            crate::Error::WrongStatus { .. } => rpc_error(Code::FAILED_PRECONDITION, e.to_string()),
            e => internal(e),
        })?;
        if let Some(t) = self.tasks().by_id.get_mut(id) {
            if t.exit.is_none() {
                t.phase = if freeze {
                    Phase::Paused
                } else {
                    Phase::Running
                };
            }
        }
        let container_id = id.to_string();
        if freeze {
            let event = TaskPaused {
                container_id,
                ..Default::default()
            };
            self.publish("/tasks/paused", Box::new(event));
        } else {
            let event = TaskResumed {
                container_id,
                ..Default::default()
            };
            self.publish("/tasks/resumed", Box::new(event));
        }
        Ok(api::Empty::default())
    }

    /// `Checkpoint`: the sandbox saved into the request's path (or the
    /// options' `image_path`), then ended unless the options leave it
    /// running (containerd's runc `CheckpointOptions`; `exit` false by
    /// default, as runc's shim reads it).
    fn checkpoint_task(&self, req: &api::CheckpointTaskRequest) -> TtrpcResult<api::Empty> {
        let rt = self.tasks().get(&req.id)?.runtime.clone();
        let mut path = PathBuf::from(&req.path);
        let mut exit = false;
        if let Some(any) = req.options.as_ref() {
            if any.type_url.ends_with("CheckpointOptions") {
                let o = shim::protos::shim::oci::CheckpointOptions::parse_from_bytes(&any.value)
                    .map_err(|e| rpc_error(Code::INVALID_ARGUMENT, format!("options: {e}")))?;
                if o.open_tcp {
                    return Err(rpc_error(
                        Code::UNIMPLEMENTED,
                        "open TCP connections are not saved by ferrovisor",
                    ));
                }
                exit = o.exit;
                if !o.image_path.is_empty() {
                    path = PathBuf::from(o.image_path);
                }
            }
        }
        if path.as_os_str().is_empty() {
            return Err(rpc_error(
                Code::INVALID_ARGUMENT,
                "checkpoint: no path for the image",
            ));
        }
        rt.checkpoint(&req.id, &path, !exit).map_err(|e| match e {
            crate::Error::WrongStatus { .. } => rpc_error(Code::FAILED_PRECONDITION, e.to_string()),
            e => internal(e),
        })?;
        Ok(api::Empty::default())
    }

    /// `Update`: the task's new `linux.resources` (runtime-spec JSON, as
    /// containerd sends it), applied to the sandbox's cgroup and Sentry.
    fn update_task(&self, req: &api::UpdateTaskRequest) -> TtrpcResult<api::Empty> {
        let rt = self.tasks().get(&req.id)?.runtime.clone();
        let json = req.resources.as_ref().map_or(&[][..], |a| &a.value[..]);
        if json.is_empty() {
            return Err(rpc_error(
                Code::INVALID_ARGUMENT,
                "update: no resources given",
            ));
        }
        let limits = crate::container::update_resources(json)
            .map_err(|e| rpc_error(Code::INVALID_ARGUMENT, e.to_string()))?;
        rt.update(&req.id, &limits).map_err(|e| match e {
            crate::Error::WrongStatus { .. } => rpc_error(Code::FAILED_PRECONDITION, e.to_string()),
            crate::Error::Usage(_) | crate::Error::NoCgroup(_) => {
                rpc_error(Code::INVALID_ARGUMENT, e.to_string())
            }
            e => internal(e),
        })?;
        Ok(api::Empty::default())
    }

    fn publish(&self, topic: &str, event: Box<dyn MessageDyn>) {
        let guard = self
            .inner
            .publisher
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(p) = guard.as_ref() {
            if let Err(e) = p.publish(
                shim::Context::default(),
                topic,
                &self.inner.namespace,
                event,
            ) {
                log::warn!("publishing {topic}: {e}");
            }
        }
    }

    /// Records the exit of the sandbox with host pid `pid`, wakes `Wait`
    /// and publishes `/tasks/exit`.
    fn exited(&self, pid: i32, code: i32) {
        let mut tasks = self.tasks();
        let Some((id, task)) = tasks
            .by_id
            .iter_mut()
            .find(|(_, t)| t.pid as i32 == pid && t.exit.is_none())
        else {
            // A gofer or other orphan this subreaper inherited, or a sandbox
            // whose task is not recorded yet.
            if tasks.early_exits.len() >= EARLY_EXITS {
                tasks.early_exits.remove(0);
            }
            tasks.early_exits.push((pid, code));
            return;
        };
        let ts = now();
        task.exit = Some((code as u32, ts.clone()));
        task.phase = Phase::Stopped;
        let event = TaskExit {
            container_id: id.clone(),
            id: id.clone(),
            pid: task.pid,
            exit_status: code as u32,
            exited_at: MessageField::some(ts),
            ..Default::default()
        };
        drop(tasks);
        self.inner.changed.notify_all();
        self.publish("/tasks/exit", Box::new(event));
    }

    /// Reads the exit of every child [`reap_children`] collects.
    fn watch_exits(&self) {
        let sub = match monitor_subscribe(Topic::Pid) {
            Ok(s) => s,
            Err(e) => {
                log::error!("subscribing to exits: {e}");
                return;
            }
        };
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("exits".into())
            .spawn(move || {
                for ev in sub.rx.iter() {
                    if let Subject::Pid(pid) = ev.subject {
                        me.exited(pid, ev.exit_code);
                    }
                }
            });
        if let Err(e) = spawned {
            log::error!("starting the exit watcher: {e}");
        }
    }

    fn create_task(&self, req: &api::CreateTaskRequest) -> Result<u32, ttrpc::Error> {
        if !req.parent_checkpoint.is_empty() {
            return Err(rpc_error(
                Code::UNIMPLEMENTED,
                PARENT_CHECKPOINT_UNSUPPORTED,
            ));
        }
        // A checkpoint's directory (containerd unpacked it there): the
        // sandbox goes on from its image once started.
        let restore = (!req.checkpoint.is_empty()).then(|| PathBuf::from(&req.checkpoint));
        let bundle = PathBuf::from(&req.bundle);
        let mut exe = None;
        let mut root = None;
        let mut config = RuntimeConfig::default();
        if let Some(any) = req.options.as_ref() {
            // containerd's runc options (BinaryName, Root), as a CRI
            // runtime's `options` table gives them.
            if any.type_url.ends_with("containerd.runc.v1.Options") {
                if let Ok(o) = api::Options::parse_from_bytes(&any.value) {
                    if !o.binary_name.is_empty() {
                        exe = Some(PathBuf::from(&o.binary_name));
                    }
                    if !o.root.is_empty() {
                        root = Some(PathBuf::from(&o.root).join(&self.inner.namespace));
                    }
                }
            }
            // containerd's generic runtime options (`ConfigPath`, as a CRI
            // runtime's `options` table or `ctr run --runtime-config-path`
            // gives it): the runtime flags, as gVisor's shim takes them.
            if any.type_url.ends_with(RUNTIME_OPTIONS) {
                let path = config_path_of(&any.value)
                    .map_err(|e| rpc_error(Code::INVALID_ARGUMENT, e.to_string()))?;
                if let Some(path) = path {
                    config = RuntimeConfig::load(&path)
                        .map_err(|e| rpc_error(Code::INVALID_ARGUMENT, e.to_string()))?;
                }
            }
        }
        let exe = match exe {
            Some(e) => e,
            None => ferrovisor_binary()
                .map_err(|e| rpc_error(Code::FAILED_PRECONDITION, e.to_string()))?,
        };
        let mut rt = runtime(&bundle, &self.inner.namespace, exe);
        if let Some(r) = root {
            rt.state = StateDir::new(r);
        }
        rt.network = config.network;
        rt.overlay = config.overlay;
        rt.platform = config.platform;
        rt.nvproxy = config.nvproxy;

        let rootfs = bundle.join("rootfs");
        let mounted = !req.rootfs.is_empty();
        if mounted {
            std::fs::create_dir_all(&rootfs)
                .map_err(|e| internal(format!("mkdir {}: {e}", rootfs.display())))?;
            for m in &req.rootfs {
                shim::mount::mount_rootfs(
                    Some(m.type_.as_str()).filter(|t| !t.is_empty()),
                    Some(m.source.as_str()).filter(|s| !s.is_empty()),
                    &m.options,
                    &rootfs,
                )
                .map_err(|e| internal(format!("mounting the rootfs: {e}")))?;
            }
        }
        let unmount = || {
            if mounted {
                let _ = shim::mount::umount_recursive(rootfs.to_str(), 0);
            }
        };

        let stdin_pipe = Arc::new(Mutex::new(None));
        let (stdio, console) = if req.terminal {
            match ConsoleSocket::listen() {
                Ok(c) => (None, Some(c)),
                Err(e) => {
                    unmount();
                    return Err(internal(e));
                }
            }
        } else {
            match open_stdio(
                StdioPaths::of(&req.stdin, &req.stdout, &req.stderr),
                &stdin_pipe,
            ) {
                Ok(s) => (Some(s), None),
                Err(e) => {
                    unmount();
                    return Err(internal(e));
                }
            }
        };
        let opts = CreateOptions {
            bundle: bundle.clone(),
            stdio,
            console_socket: console.as_ref().map(|c| c.path.clone()),
            restore,
            ..CreateOptions::default()
        };
        let created = rt.create(&req.id, &opts);
        // The terminal's master side, which `create` sent to the socket.
        let master = console.map(ConsoleSocket::finish);
        let created = match created {
            Ok(c) => c,
            Err(e) => {
                unmount();
                return Err(rpc_error(Code::FAILED_PRECONDITION, e.to_string()));
            }
        };
        let master = match master {
            Some(Ok(m)) => {
                let m = Arc::new(m);
                if let Err(e) = wire_terminal(&req.stdin, &req.stdout, &m, &stdin_pipe) {
                    let _ = rt.delete(&req.id, true);
                    unmount();
                    return Err(internal(e));
                }
                Some(m)
            }
            Some(Err(e)) => {
                let _ = rt.delete(&req.id, true);
                unmount();
                return Err(internal(e));
            }
            None => None,
        };
        // The boot process is our child: the reaper thread collects it, so
        // nobody may wait on its handle.
        let pid = created.pid as u32;
        let mut tasks = self.tasks();
        let early = tasks
            .early_exits
            .iter()
            .position(|(p, _)| *p == created.pid)
            .map(|i| tasks.early_exits.remove(i));
        tasks.by_id.insert(
            req.id.clone(),
            Task {
                bundle,
                runtime: rt,
                pid,
                phase: if early.is_some() {
                    Phase::Stopped
                } else {
                    Phase::Created
                },
                exit: early.map(|(_, code)| (code as u32, now())),
                stdin: req.stdin.clone(),
                stdout: req.stdout.clone(),
                stderr: req.stderr.clone(),
                stdin_pipe,
                master,
            },
        );
        Ok(pid)
    }

    /// `Start` of an exec'd process: its stdio FIFOs opened, the program
    /// started in the sandbox through its control socket, and a thread
    /// waiting for its end.
    fn start_exec(&self, id: &str, exec_id: &str) -> Result<u32, ttrpc::Error> {
        let (req, paths, pipe, socket, terminal) = {
            let mut tasks = self.tasks();
            let socket = tasks
                .get(id)?
                .runtime
                .state
                .dir(id)
                .join(crate::control::SOCKET);
            let e = tasks.exec(id, exec_id)?;
            if e.phase != Phase::Created {
                return Err(rpc_error(
                    Code::FAILED_PRECONDITION,
                    format!("exec {exec_id} already started"),
                ));
            }
            let paths = (e.stdin.clone(), e.stdout.clone(), e.stderr.clone());
            (
                e.req.clone(),
                paths,
                e.stdin_pipe.clone(),
                socket,
                e.terminal,
            )
        };
        let fail = |e: String| rpc_error(Code::FAILED_PRECONDITION, format!("exec {exec_id}: {e}"));
        let mut master = None;
        let started = if terminal {
            // A terminal of its own: the slave is the program's stdio, the
            // master is wired to the exec's FIFOs.
            let (m, slave) = crate::sys::open_pty().map_err(internal)?;
            let m = Arc::new(m);
            wire_terminal(&paths.0, &paths.1, &m, &pipe).map_err(internal)?;
            master = Some(m);
            crate::control::exec(
                &socket,
                &req,
                [slave.as_fd(), slave.as_fd(), slave.as_fd()],
                &[],
            )
        } else {
            let stdio = open_stdio(StdioPaths::of(&paths.0, &paths.1, &paths.2), &pipe)
                .map_err(internal)?;
            // The sandbox holds its own copies once this returns.
            crate::control::exec(
                &socket,
                &req,
                [
                    stdio.stdin.as_fd(),
                    stdio.stdout.as_fd(),
                    stdio.stderr.as_fd(),
                ],
                &[],
            )
        }
        .map_err(|e| fail(e.to_string()))?;
        let pid = started.pid as u32;
        if let Ok(e) = self.tasks().exec(id, exec_id) {
            e.pid = pid;
            e.phase = Phase::Running;
            e.signaller = started.signaller().ok();
            e.master = master;
        }
        let this = self.clone();
        let (id, exec_id) = (id.to_owned(), exec_id.to_owned());
        std::thread::Builder::new()
            .name("exec-wait".into())
            .spawn(move || {
                let code = started.wait().unwrap_or(255) as u32;
                let ts = now();
                if let Ok(e) = this.tasks().exec(&id, &exec_id) {
                    e.exit = Some((code, ts.clone()));
                    e.phase = Phase::Stopped;
                }
                this.inner.changed.notify_all();
                this.publish(
                    "/tasks/exit",
                    Box::new(TaskExit {
                        container_id: id.clone(),
                        id: exec_id.clone(),
                        pid,
                        exit_status: code,
                        exited_at: MessageField::some(ts),
                        ..Default::default()
                    }),
                );
            })
            .map_err(internal)?;
        Ok(pid)
    }

    /// `Wait`: sleeps until `exit` (of the task or an exec) says it ended.
    fn wait_for(
        &self,
        exit: impl Fn(&mut Tasks) -> Result<Option<(u32, Timestamp)>, ttrpc::Error>,
    ) -> TtrpcResult<api::WaitResponse> {
        let mut tasks = self.tasks();
        loop {
            if let Some((code, ts)) = exit(&mut tasks)? {
                return Ok(api::WaitResponse {
                    exit_status: code,
                    exited_at: MessageField::some(ts),
                    ..Default::default()
                });
            }
            tasks = self
                .inner
                .changed
                .wait(tasks)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Refuses what an exec'd process does not support here.
    fn not_found(id: &str) -> ttrpc::Error {
        rpc_error(Code::NOT_FOUND, format!("task {id} not found"))
    }
}

/// Opens a stdio FIFO for writing without blocking on a missing reader (the
/// client opens its end first, but a client that went away must not hang
/// the shim); with no reader, the FIFO is opened read-write so that it
/// never blocks, and output is lost like on a closed terminal.
fn open_output(path: &str) -> std::io::Result<File> {
    if path.is_empty() {
        return OpenOptions::new().write(true).open("/dev/null");
    }
    // `ctr run --log-uri file:///PATH`: a file the output is appended to
    // (made if missing), as runc's shim does.
    if let Some(file) = path.strip_prefix("file://") {
        return OpenOptions::new()
            .append(true)
            .create(true)
            .custom_flags(libc::O_CLOEXEC)
            .mode(0o640)
            .open(file);
    }
    let f = match OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)?,
        Err(e) => return Err(e),
    };
    crate::sys::set_blocking(f.as_fd())?;
    Ok(f)
}

/// The FIFOs containerd names for a process's stdio.
#[derive(Clone, Copy)]
struct StdioPaths<'a> {
    stdin: &'a str,
    stdout: &'a str,
    stderr: &'a str,
}

impl<'a> StdioPaths<'a> {
    fn of(stdin: &'a str, stdout: &'a str, stderr: &'a str) -> Self {
        StdioPaths {
            stdin,
            stdout,
            stderr,
        }
    }
}

/// The sandbox's stdio: the stdout and stderr FIFOs themselves, and a pipe
/// for stdin fed from the stdin FIFO by a thread (the FIFO's writer may
/// come later than the sandbox's first read, which on the FIFO itself would
/// be an early end of file).
fn open_stdio(
    paths: StdioPaths<'_>,
    stdin_pipe: &Arc<Mutex<Option<File>>>,
) -> Result<Stdio, Error> {
    let req = paths;
    let stdout = open_output(req.stdout).map_err(io(format!("stdout {}", req.stdout)))?;
    let stderr = if req.stderr.is_empty() || req.stderr == req.stdout {
        stdout
            .try_clone()
            .map_err(io(format!("stderr {}", req.stderr)))?
    } else {
        open_output(req.stderr).map_err(io(format!("stderr {}", req.stderr)))?
    };
    let stdin: OwnedFd = if req.stdin.is_empty() {
        File::open("/dev/null").map_err(io("/dev/null"))?.into()
    } else {
        let (r, w) = std::io::pipe().map_err(io("stdin pipe"))?;
        *stdin_pipe
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(File::from(OwnedFd::from(w)));
        let path = req.stdin.to_owned();
        let pipe = Arc::clone(stdin_pipe);
        std::thread::Builder::new()
            .name("stdin".into())
            .spawn(move || copy_stdin(&path, &pipe))
            .map_err(io("stdin thread"))?;
        r.into()
    };
    Ok(Stdio {
        stdin: Arc::new(stdin),
        stdout: Arc::new(stdout.into()),
        stderr: Arc::new(stderr.into()),
    })
}

/// A private Unix socket on which [`Runtime::create`] hands over the master
/// side of the container's terminal (runc's `--console-socket`).
struct ConsoleSocket {
    dir: PathBuf,
    path: PathBuf,
    accept: std::thread::JoinHandle<Result<OwnedFd, Error>>,
}

impl ConsoleSocket {
    fn listen() -> Result<ConsoleSocket, Error> {
        use std::os::unix::fs::DirBuilderExt;
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        // Under the temp dir rather than the bundle: a socket path must
        // fit in 108 bytes.
        let dir = std::env::temp_dir().join(format!(
            "ferrovisor-pty-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(io(format!("console socket directory {}", dir.display())))?;
        let path = dir.join("pty.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path)
            .map_err(io(format!("console socket {}", path.display())))?;
        let accept = std::thread::Builder::new()
            .name("console".into())
            .spawn(move || {
                let (conn, _) = listener.accept().map_err(io("console socket"))?;
                crate::sys::recv_fd(conn.as_fd()).map_err(io("console socket"))
            })
            .map_err(io("console thread"))?;
        Ok(ConsoleSocket { dir, path, accept })
    }

    /// The master `create` sent; if it sent none (it failed first), the
    /// accept is released with a connection of our own.
    fn finish(self) -> Result<OwnedFd, Error> {
        if !self.accept.is_finished() {
            // A no-op when `create` connected: then the accept is done.
            let _ = std::os::unix::net::UnixStream::connect(&self.path);
        }
        let r = self.accept.join().unwrap_or(Err(Error::ConsolePanicked));
        let _ = std::fs::remove_dir_all(&self.dir);
        r
    }
}

/// Wires a terminal to the task's FIFOs: stdin FIFO to the master, the
/// master to the stdout FIFO (a terminal has no separate stderr).
fn wire_terminal(
    stdin: &str,
    stdout: &str,
    master: &Arc<OwnedFd>,
    stdin_pipe: &Arc<Mutex<Option<File>>>,
) -> Result<(), Error> {
    let mut out = open_output(stdout).map_err(io(format!("stdout {stdout}")))?;
    let mut from_master = File::from(master.try_clone().map_err(io("terminal master"))?);
    std::thread::Builder::new()
        .name("tty-out".into())
        .spawn(move || {
            // Ends with EIO once the container's side is closed.
            let _ = std::io::copy(&mut from_master, &mut out);
        })
        .map_err(io("terminal thread"))?;
    if !stdin.is_empty() {
        let to_master = File::from(master.try_clone().map_err(io("terminal master"))?);
        *stdin_pipe
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(to_master);
        let path = stdin.to_owned();
        let pipe = Arc::clone(stdin_pipe);
        std::thread::Builder::new()
            .name("tty-in".into())
            .spawn(move || copy_stdin(&path, &pipe))
            .map_err(io("terminal thread"))?;
    }
    Ok(())
}

/// Copies the stdin FIFO into the sandbox's stdin pipe until either ends
/// (or `CloseIO` drops the pipe).
fn copy_stdin(path: &str, pipe: &Mutex<Option<File>>) {
    // Blocks until the client opens its end for writing.
    let Ok(mut fifo) = File::open(path) else {
        return;
    };
    let mut buf = [0u8; 32 * 1024];
    loop {
        let n = match fifo.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut guard = pipe
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(w) = guard.as_mut() else { return };
        if w.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    pipe.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
}

impl shim::Shim for Service {
    type T = Service;

    fn new(_runtime_id: &str, args: &Flags, _config: &mut Config) -> Self {
        Service {
            inner: Arc::new(Inner {
                namespace: args.namespace.clone(),
                exit: Arc::new(ExitSignal::default()),
                tasks: Mutex::new(Tasks::default()),
                changed: Condvar::new(),
                publisher: Mutex::new(None),
            }),
        }
    }

    fn start_shim(&mut self, opts: shim::StartOpts) -> Result<String, shim::Error> {
        let grouping = opts.id.clone();
        let (_pid, address) = shim::spawn(opts, &grouping, Vec::new())?;
        Ok(address)
    }

    /// Cleanup after a shim that died: containerd runs `shim delete` in the
    /// bundle. Kills and deletes the container, unmounts its rootfs.
    fn delete_shim(&mut self) -> Result<DeleteResponse, shim::Error> {
        let bundle = std::env::current_dir().map_err(|e| shim::Error::Other(e.to_string()))?;
        let id = bundle
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Ok(exe) = ferrovisor_binary() {
            let rt = runtime(&bundle, &self.inner.namespace, exe);
            if let Err(e) = rt.delete(&id, true) {
                log::warn!("deleting {id}: {e}");
            }
        }
        let rootfs = bundle.join("rootfs");
        let _ = shim::mount::umount_recursive(rootfs.to_str(), 0);
        Ok(DeleteResponse {
            exit_status: 128 + libc::SIGKILL as u32,
            exited_at: MessageField::some(now()),
            ..Default::default()
        })
    }

    fn wait(&mut self) {
        self.inner.exit.wait();
    }

    fn create_task_service(&self, publisher: RemotePublisher) -> Self::T {
        *self
            .inner
            .publisher
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(publisher);
        self.watch_exits();
        self.clone()
    }
}

impl shim::Task for Service {
    fn create(
        &self,
        _ctx: &TtrpcContext,
        req: api::CreateTaskRequest,
    ) -> TtrpcResult<api::CreateTaskResponse> {
        if self.tasks().by_id.contains_key(&req.id) {
            return Err(rpc_error(
                Code::ALREADY_EXISTS,
                format!("task {} already exists", req.id),
            ));
        }
        let pid = self.create_task(&req)?;
        self.publish(
            "/tasks/create",
            Box::new(TaskCreate {
                container_id: req.id.clone(),
                bundle: req.bundle.clone(),
                rootfs: req.rootfs.clone(),
                io: MessageField::some(TaskIO {
                    stdin: req.stdin.clone(),
                    stdout: req.stdout.clone(),
                    stderr: req.stderr.clone(),
                    terminal: req.terminal,
                    ..Default::default()
                }),
                pid,
                ..Default::default()
            }),
        );
        Ok(api::CreateTaskResponse {
            pid,
            ..Default::default()
        })
    }

    fn start(
        &self,
        _ctx: &TtrpcContext,
        req: api::StartRequest,
    ) -> TtrpcResult<api::StartResponse> {
        if !req.exec_id.is_empty() {
            let pid = self.start_exec(&req.id, &req.exec_id)?;
            return Ok(api::StartResponse {
                pid,
                ..Default::default()
            });
        }
        let (rt, pid) = {
            let tasks = self.tasks();
            let t = tasks.get(&req.id)?;
            (t.runtime.clone(), t.pid)
        };
        rt.start(&req.id)
            .map_err(|e| rpc_error(Code::FAILED_PRECONDITION, e.to_string()))?;
        if let Some(t) = self.tasks().by_id.get_mut(&req.id) {
            if t.phase == Phase::Created {
                t.phase = Phase::Running;
            }
        }
        self.publish(
            "/tasks/start",
            Box::new(TaskStart {
                container_id: req.id.clone(),
                pid,
                ..Default::default()
            }),
        );
        Ok(api::StartResponse {
            pid,
            ..Default::default()
        })
    }

    fn state(
        &self,
        _ctx: &TtrpcContext,
        req: api::StateRequest,
    ) -> TtrpcResult<api::StateResponse> {
        if !req.exec_id.is_empty() {
            let mut tasks = self.tasks();
            let e = tasks.exec(&req.id, &req.exec_id)?;
            let mut resp = api::StateResponse {
                id: req.exec_id.clone(),
                pid: e.pid,
                status: match e.phase {
                    Phase::Created => api::Status::CREATED,
                    Phase::Running => api::Status::RUNNING,
                    Phase::Paused => api::Status::PAUSED,
                    Phase::Stopped => api::Status::STOPPED,
                }
                .into(),
                stdin: e.stdin.clone(),
                stdout: e.stdout.clone(),
                stderr: e.stderr.clone(),
                exec_id: req.exec_id.clone(),
                ..Default::default()
            };
            if let Some((code, ts)) = &e.exit {
                resp.exit_status = *code;
                resp.exited_at = MessageField::some(ts.clone());
            }
            return Ok(resp);
        }
        let tasks = self.tasks();
        let t = tasks.get(&req.id)?;
        let status = match t.phase {
            Phase::Created => api::Status::CREATED,
            Phase::Running => api::Status::RUNNING,
            Phase::Paused => api::Status::PAUSED,
            Phase::Stopped => api::Status::STOPPED,
        };
        let mut resp = api::StateResponse {
            id: req.id.clone(),
            bundle: t.bundle.to_string_lossy().into_owned(),
            pid: t.pid,
            status: status.into(),
            stdin: t.stdin.clone(),
            stdout: t.stdout.clone(),
            stderr: t.stderr.clone(),
            terminal: t.master.is_some(),
            ..Default::default()
        };
        if let Some((code, ts)) = &t.exit {
            resp.exit_status = *code;
            resp.exited_at = MessageField::some(ts.clone());
        }
        Ok(resp)
    }

    fn update(&self, _ctx: &TtrpcContext, req: api::UpdateTaskRequest) -> TtrpcResult<api::Empty> {
        self.update_task(&req)
    }

    fn checkpoint(
        &self,
        _ctx: &TtrpcContext,
        req: api::CheckpointTaskRequest,
    ) -> TtrpcResult<api::Empty> {
        self.checkpoint_task(&req)
    }

    fn pause(&self, _ctx: &TtrpcContext, req: api::PauseRequest) -> TtrpcResult<api::Empty> {
        self.freeze(&req.id, true)
    }

    fn resume(&self, _ctx: &TtrpcContext, req: api::ResumeRequest) -> TtrpcResult<api::Empty> {
        self.freeze(&req.id, false)
    }

    fn kill(&self, _ctx: &TtrpcContext, req: api::KillRequest) -> TtrpcResult<api::Empty> {
        if !req.exec_id.is_empty() {
            let mut tasks = self.tasks();
            let e = tasks.exec(&req.id, &req.exec_id)?;
            if e.exit.is_some() {
                return Err(rpc_error(
                    Code::NOT_FOUND,
                    format!("exec {}: process already finished", req.exec_id),
                ));
            }
            let Some(s) = &e.signaller else {
                return Err(rpc_error(
                    Code::FAILED_PRECONDITION,
                    format!("exec {} is not started", req.exec_id),
                ));
            };
            s.signal(req.signal as i32).map_err(internal)?;
            return Ok(api::Empty::default());
        }
        let rt = {
            let tasks = self.tasks();
            let t = tasks.get(&req.id)?;
            if t.exit.is_some() {
                return Err(rpc_error(
                    Code::NOT_FOUND,
                    format!("task {}: process already finished", req.id),
                ));
            }
            t.runtime.clone()
        };
        rt.kill(&req.id, req.signal as i32).map_err(|e| match e {
            crate::Error::WrongStatus { .. } => rpc_error(Code::NOT_FOUND, e.to_string()),
            e => internal(e),
        })?;
        Ok(api::Empty::default())
    }

    fn delete(&self, _ctx: &TtrpcContext, req: api::DeleteRequest) -> TtrpcResult<DeleteResponse> {
        if !req.exec_id.is_empty() {
            let mut tasks = self.tasks();
            let e = tasks.exec(&req.id, &req.exec_id)?;
            if e.phase == Phase::Running {
                return Err(rpc_error(
                    Code::FAILED_PRECONDITION,
                    format!("exec {} is running", req.exec_id),
                ));
            }
            let (pid, exit) = (e.pid, e.exit.clone());
            tasks.execs.remove(&(req.id.clone(), req.exec_id.clone()));
            let (code, ts) = exit.unwrap_or((0, now()));
            return Ok(DeleteResponse {
                pid,
                exit_status: code,
                exited_at: MessageField::some(ts),
                ..Default::default()
            });
        }
        let (rt, bundle, pid, phase) = {
            let tasks = self.tasks();
            let t = tasks.get(&req.id)?;
            (t.runtime.clone(), t.bundle.clone(), t.pid, t.phase)
        };
        if matches!(phase, Phase::Running | Phase::Paused) {
            return Err(rpc_error(
                Code::FAILED_PRECONDITION,
                format!("task {} is running: kill it first", req.id),
            ));
        }
        // A created task's sandbox is killed; a stopped one is only removed.
        rt.delete(&req.id, true).map_err(internal)?;
        if phase == Phase::Created {
            // Its exit arrives from the reaper; wait for it briefly so the
            // answer carries a status.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            let mut tasks = self.tasks();
            while tasks.by_id.get(&req.id).is_some_and(|t| t.exit.is_none())
                && std::time::Instant::now() < deadline
            {
                tasks = self
                    .inner
                    .changed
                    .wait_timeout(tasks, std::time::Duration::from_millis(100))
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
        }
        let rootfs = bundle.join("rootfs");
        if let Err(e) = shim::mount::umount_recursive(rootfs.to_str(), 0) {
            log::warn!("unmounting {}: {e}", rootfs.display());
        }
        let task = self.tasks().by_id.remove(&req.id);
        let (code, ts) = task
            .and_then(|t| t.exit)
            .unwrap_or((128 + libc::SIGKILL as u32, now()));
        self.publish(
            "/tasks/delete",
            Box::new(TaskDelete {
                container_id: req.id.clone(),
                id: req.id.clone(),
                pid,
                exit_status: code,
                exited_at: MessageField::some(ts.clone()),
                ..Default::default()
            }),
        );
        Ok(DeleteResponse {
            pid,
            exit_status: code,
            exited_at: MessageField::some(ts),
            ..Default::default()
        })
    }

    fn wait(&self, _ctx: &TtrpcContext, req: api::WaitRequest) -> TtrpcResult<api::WaitResponse> {
        if !req.exec_id.is_empty() {
            return self.wait_for(|t| Ok(t.exec(&req.id, &req.exec_id)?.exit.clone()));
        }
        self.wait_for(|t| Ok(t.get(&req.id)?.exit.clone()))
    }

    fn pids(&self, _ctx: &TtrpcContext, req: api::PidsRequest) -> TtrpcResult<api::PidsResponse> {
        let rt = {
            let tasks = self.tasks();
            let t = tasks.get(&req.id)?;
            t.runtime.clone()
        };
        let pids = rt.ps(&req.id).map_err(internal)?;
        Ok(api::PidsResponse {
            processes: pids
                .into_iter()
                .map(|pid| shim::protos::types::task::ProcessInfo {
                    pid: pid as u32,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
    }

    fn close_io(&self, _ctx: &TtrpcContext, req: api::CloseIORequest) -> TtrpcResult<api::Empty> {
        if !req.exec_id.is_empty() {
            let mut tasks = self.tasks();
            let e = tasks.exec(&req.id, &req.exec_id)?;
            e.stdin_pipe
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            return Ok(api::Empty::default());
        }
        let tasks = self.tasks();
        let t = tasks.get(&req.id)?;
        if req.stdin {
            // The sandbox reads end of file once the pipe's writer is gone.
            t.stdin_pipe
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
        }
        Ok(api::Empty::default())
    }

    fn connect(
        &self,
        _ctx: &TtrpcContext,
        req: api::ConnectRequest,
    ) -> TtrpcResult<api::ConnectResponse> {
        let tasks = self.tasks();
        let pid = tasks.by_id.get(&req.id).map_or(0, |t| t.pid);
        Ok(api::ConnectResponse {
            shim_pid: std::process::id(),
            task_pid: pid,
            version: env!("CARGO_PKG_VERSION").to_string(),
            ..Default::default()
        })
    }

    fn shutdown(&self, _ctx: &TtrpcContext, _req: api::ShutdownRequest) -> TtrpcResult<api::Empty> {
        // Like runc's shim: stay while a task remains.
        if self.tasks().by_id.is_empty() {
            self.inner.exit.signal();
        }
        Ok(api::Empty::default())
    }

    fn stats(
        &self,
        _ctx: &TtrpcContext,
        req: api::StatsRequest,
    ) -> TtrpcResult<api::StatsResponse> {
        // The sandbox cgroup's counters, in cgroup v1's metric types on
        // either host version (the Sentry and its helpers count with the
        // guest for memory and CPU: they are what the container costs the
        // host), with the guest's own task count (see
        // `Runtime::cgroup_stats`).
        let rt = {
            let tasks = self.tasks();
            let t = tasks.get(&req.id)?;
            t.runtime.clone()
        };
        let metrics = match rt.cgroup_stats(&req.id).map_err(internal)? {
            Some(s) => metrics_of(&s),
            // No cgroup of its own: the guest's tasks as the Sentry counts
            // them, else the host processes.
            None => {
                let record = rt.state.read(&req.id).ok().flatten();
                let current = match record.and_then(|r| rt.guest_stats(&req.id, &r)) {
                    Some(g) => g.tasks,
                    None => rt.ps(&req.id).map_err(internal)?.len() as u64,
                };
                cgroup_metrics::Metrics {
                    pids: MessageField::some(cgroup_metrics::PidsStat {
                        current,
                        ..Default::default()
                    }),
                    ..Default::default()
                }
            }
        };
        let any = shim::util::convert_to_any(Box::new(metrics)).map_err(internal)?;
        Ok(api::StatsResponse {
            stats: MessageField::some(any),
            ..Default::default()
        })
    }

    fn exec(&self, _ctx: &TtrpcContext, req: api::ExecProcessRequest) -> TtrpcResult<api::Empty> {
        let invalid = |e: &dyn std::fmt::Display| {
            rpc_error(
                Code::INVALID_ARGUMENT,
                format!("exec {}: process spec: {e}", req.exec_id),
            )
        };
        let value: serde_json::Value =
            serde_json::from_slice(&req.spec.value).map_err(|e| invalid(&e))?;
        let field = |e: crate::oci::Error| match e {
            crate::oci::Error::Field { field, reason } => {
                invalid(&format_args!("{field}: {reason}"))
            }
            other => invalid(&other),
        };
        crate::oci::check_process_names(&value, "").map_err(field)?;
        let process: oci_spec::runtime::Process =
            serde_json::from_value(value).map_err(|e| invalid(&e))?;
        let exec_req = crate::control::ExecRequest {
            args: process.args().clone().unwrap_or_default(),
            env: process.env().clone().unwrap_or_default(),
            cwd: process.cwd().to_string_lossy().into_owned(),
            uid: process.user().uid(),
            gid: process.user().gid(),
            privileges: crate::oci::privileges(&process, "").map_err(field)?,
            inherit_env: false,
            preserve_fds: 0,
            user: None,
            tty: false,
            size: None,
        };
        let mut tasks = self.tasks();
        if tasks.get(&req.id)?.phase != Phase::Running {
            return Err(rpc_error(
                Code::FAILED_PRECONDITION,
                format!("task {} is not running", req.id),
            ));
        }
        let key = (req.id.clone(), req.exec_id.clone());
        if tasks.execs.contains_key(&key) {
            return Err(rpc_error(
                Code::ALREADY_EXISTS,
                format!("exec {} already exists", req.exec_id),
            ));
        }
        tasks.execs.insert(
            key,
            ExecProc {
                req: exec_req,
                stdin: req.stdin.clone(),
                stdout: req.stdout.clone(),
                stderr: req.stderr.clone(),
                pid: 0,
                phase: Phase::Created,
                exit: None,
                stdin_pipe: Arc::default(),
                signaller: None,
                terminal: req.terminal,
                master: None,
            },
        );
        Ok(api::Empty::default())
    }

    fn resize_pty(
        &self,
        _ctx: &TtrpcContext,
        req: api::ResizePtyRequest,
    ) -> TtrpcResult<api::Empty> {
        let mut tasks = self.tasks();
        let master = if req.exec_id.is_empty() {
            tasks.get(&req.id)?.master.clone()
        } else {
            tasks.exec(&req.id, &req.exec_id)?.master.clone()
        };
        let master = master.ok_or_else(|| {
            rpc_error(
                Code::FAILED_PRECONDITION,
                format!("task {} {} has no terminal", req.id, req.exec_id),
            )
        })?;
        let clamp = |v: u32| u16::try_from(v).unwrap_or(u16::MAX);
        crate::sys::set_window_size(master.as_fd(), clamp(req.height), clamp(req.width))
            .map_err(internal)?;
        Ok(api::Empty::default())
    }
}

/// containerd's (cgroup v1) metrics for the counters `stats` read;
/// counters the host lacks are left out.
fn metrics_of(s: &crate::cgroup::Stats) -> cgroup_metrics::Metrics {
    let mut m = cgroup_metrics::Metrics::default();
    if let Some(usage) = s.memory_usage {
        m.memory = MessageField::some(cgroup_metrics::MemoryStat {
            usage: MessageField::some(cgroup_metrics::MemoryEntry {
                usage,
                limit: s.memory_limit.unwrap_or(u64::MAX),
                max: s.memory_max_usage.unwrap_or_default(),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    if let Some(total) = s.cpu_total_ns {
        m.cpu = MessageField::some(cgroup_metrics::CPUStat {
            usage: MessageField::some(cgroup_metrics::CPUUsage {
                total,
                user: s.cpu_user_ns.unwrap_or_default(),
                kernel: s.cpu_kernel_ns.unwrap_or_default(),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    if let Some(current) = s.pids_current {
        m.pids = MessageField::some(cgroup_metrics::PidsStat {
            current,
            limit: s.pids_limit.unwrap_or_default(),
            ..Default::default()
        });
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `runtimeoptions.v1.Options` as containerd encodes it.
    fn runtime_options(type_url: &str, config_path: &str, config_root: &str) -> Vec<u8> {
        let mut out = Vec::new();
        let mut os = shim::protos::protobuf::CodedOutputStream::vec(&mut out);
        for (field, v) in [(1, type_url), (2, config_path), (3, config_root)] {
            if !v.is_empty() {
                os.write_string(field, v).expect("encode");
            }
        }
        os.flush().expect("flush");
        drop(os);
        out
    }

    #[test]
    fn config_path_from_runtime_options() {
        let enc = runtime_options("io.containerd.ferrovisor.v1.options", "/etc/f.toml", "/x");
        let path = |enc: &[u8]| config_path_of(enc).expect("decodes");
        assert_eq!(path(&enc), Some(PathBuf::from("/etc/f.toml")));
        assert_eq!(path(&runtime_options("t", "", "/x")), None);
        assert_eq!(path(&[]), None);
        // A truncated message is an error, not an empty path.
        let e = config_path_of(&enc[..enc.len() - 3])
            .expect_err("truncated")
            .to_string();
        assert!(e.starts_with("runtime options:"), "{e}");
    }

    #[test]
    fn runtime_config_takes_network_and_allow_rules_only() {
        let host = RuntimeConfig {
            network: Network::Host,
            ..Default::default()
        };
        assert_eq!(
            RuntimeConfig::parse("network = \"host\"\n"),
            Ok(host.clone())
        );
        assert_eq!(
            RuntimeConfig::parse("# flags\nnetwork = 'none'"),
            Ok(RuntimeConfig::default())
        );
        assert_eq!(RuntimeConfig::parse(""), Ok(RuntimeConfig::default()));
        assert_eq!(
            RuntimeConfig::parse("overlay = true"),
            Ok(RuntimeConfig {
                overlay: true,
                ..Default::default()
            })
        );
        assert_eq!(
            RuntimeConfig::parse("platform = \"kvm\"\n"),
            Ok(RuntimeConfig {
                platform: crate::container::Platform::Kvm,
                ..Default::default()
            })
        );
        assert_eq!(
            RuntimeConfig::parse("nvproxy = true\nnvproxy_capabilities = \"compute\"\n"),
            Ok(RuntimeConfig {
                nvproxy: crate::container::NvproxyFlags {
                    on: true,
                    capabilities: Some("compute".into()),
                    ..Default::default()
                },
                ..Default::default()
            })
        );
        assert!(RuntimeConfig::parse("nvproxy = \"yes\"").is_err());
        assert_eq!(
            RuntimeConfig::parse("platform = \"vmx\"").map_err(|e| e.to_string()),
            Err("platform: must be \"seccomp\" or \"kvm\", not \"vmx\"".to_owned())
        );
        let rules = |cidr: &[&str], host: &[&str]| RuntimeConfig {
            network: Network::Sandbox(network::EgressRules {
                allow_cidr: cidr.iter().map(|s| s.to_string()).collect(),
                allow_host: host.iter().map(|s| s.to_string()).collect(),
                extras: Default::default(),
            }),
            ..Default::default()
        };
        assert_eq!(
            RuntimeConfig::parse(
                "network = \"sandbox\"\nallow_cidr = [\"192.0.2.0/24:443\", \"2001:db8::/32\"]\n\
                 allow_host = [\"*.example.com\"]\n"
            ),
            Ok(rules(
                &["192.0.2.0/24:443", "2001:db8::/32"],
                &["*.example.com"]
            ))
        );
        // As with the flags: rules alone mean `sandbox`, and `sandbox`
        // alone refuses every destination.
        assert_eq!(
            RuntimeConfig::parse("allow_host = [\"example.com\"]"),
            Ok(rules(&[], &["example.com"]))
        );
        assert_eq!(
            RuntimeConfig::parse("network = \"sandbox\""),
            Ok(rules(&[], &[]))
        );
        for (text, says) in [
            (
                "network = \"host\"\nplatform = \"ptrace\"",
                "platform: must be \"seccomp\" or \"kvm\", not \"ptrace\"",
            ),
            (
                "[runsc_config]\nnetwork = \"host\"",
                "unknown key `runsc_config`",
            ),
            ("network = \"bridge\"", "not \"bridge\""),
            ("network = true", "not boolean"),
            ("network = \"host\"\nnetwork = \"none\"", "line 2:"),
            ("network = ", "line 1:"),
            (
                "allow_cidr = \"10.0.0.0/8\"",
                "allow_cidr: must be an array of strings",
            ),
            (
                "allow_host = [1]",
                "allow_host: must be an array of strings",
            ),
            (
                "allow_cidr = [\"10.0.0.0/33\"]",
                "allow_cidr \"10.0.0.0/33\"",
            ),
            (
                "allow_host = [\"a b\"]",
                "allow_host \"a b\": not a domain name",
            ),
            (
                "network = \"host\"\nallow_cidr = [\"10.0.0.0/8\"]",
                "do not apply to network = \"host\"",
            ),
            (
                "network = \"none\"\nallow_host = [\"example.com\"]",
                "need network = \"sandbox\"",
            ),
            ("secret = [\"T=abc:a.test\"]", "never the command line"),
            ("allow_http = [\"a.test\"]", "--allow-http"),
            ("egress_log = 3", "egress_log: must be a string"),
            (
                "overlay = \"yes\"",
                "overlay: must be true or false, not \"yes\"",
            ),
            (
                "network = \"host\"\nallow_http = [\"a.test:GET\"]",
                "need --network sandbox",
            ),
        ] {
            let e = RuntimeConfig::parse(text).expect_err(text).to_string();
            assert!(e.contains(says), "{text:?}: {e}");
            assert!(!e.contains('\n'), "one line: {e:?}");
        }
        let dir = std::env::temp_dir().join(format!("ferrovisor-rtcfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let file = dir.join("ferrovisor.toml");
        std::fs::write(&file, "network = \"host\"\n").expect("write");
        assert_eq!(RuntimeConfig::load(&file).expect("loads"), host);
        // The egress flags mean `sandbox`, as the allow rules do.
        let c = RuntimeConfig::parse("allow_http = [\"a.test:GET\"]\negress_log = \"/x\"")
            .expect("egress keys");
        let rules = c.network.egress().expect("sandbox").clone();
        assert_eq!(rules.extras.allow_http, vec!["a.test:GET".to_string()]);
        assert_eq!(rules.extras.egress_log, Some("/x".into()));
        let e = RuntimeConfig::load(&dir.join("missing.toml"))
            .expect_err("missing")
            .to_string();
        assert!(e.contains("missing.toml"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn state_root_is_beside_containerds_task_state() {
        assert_eq!(
            state_root(
                Path::new("/run/containerd/io.containerd.runtime.v2.task/k8s.io/abc"),
                "k8s.io"
            ),
            Path::new("/run/containerd/ferrovisor/k8s.io")
        );
        assert_eq!(
            state_root(
                Path::new("/tmp/t/state/io.containerd.runtime.v2.task/default/c1"),
                "default"
            ),
            Path::new("/tmp/t/state/ferrovisor/default")
        );
        // A bundle elsewhere: runc's shim's default place.
        assert_eq!(
            state_root(Path::new("/srv/bundles/c1"), "default"),
            Path::new("/run/containerd/ferrovisor/default")
        );
    }

    fn service() -> Service {
        Service {
            inner: Arc::new(Inner {
                namespace: "default".into(),
                exit: Arc::new(ExitSignal::default()),
                tasks: Mutex::new(Tasks::default()),
                changed: Condvar::new(),
                publisher: Mutex::new(None),
            }),
        }
    }

    fn update_request(id: &str, resources: serde_json::Value) -> api::UpdateTaskRequest {
        api::UpdateTaskRequest {
            id: id.into(),
            resources: MessageField::some(shim::protos::protobuf::well_known_types::any::Any {
                type_url: "types.containerd.io/opencontainers/runtime-spec/1/LinuxResources".into(),
                value: serde_json::to_vec(&resources).expect("json"),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// `Update` of a running task writes its cgroup (v1 layout, here in a
    /// temp dir) and sends the Sentry its new guest limits over the control
    /// socket (a stand-in for the Sentry answers); checkpoints are refused.
    #[test]
    fn update_reaches_cgroup_and_sentry() {
        use std::io::{BufRead, BufReader};
        let base = std::env::temp_dir().join(format!("ferrovisor-shim-upd-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let cg_dir = base.join("cg");
        std::fs::create_dir_all(&cg_dir).expect("mkdir");
        for (f, v) in [
            ("memory.limit_in_bytes", "9223372036854771712"),
            ("memory.memsw.limit_in_bytes", "9223372036854771712"),
            ("cpu.shares", "1024"),
            ("pids.max", "max"),
        ] {
            std::fs::write(cg_dir.join(f), v).expect("write");
        }
        let rt = Runtime {
            state: StateDir::new(base.join("state")),
            exe: PathBuf::from("/nonexistent"),
            log: None,
            log_format: LogFormat::Text,
            debug: false,
            network: Network::None,
            overlay: false,
            platform: Default::default(),
            nvproxy: Default::default(),
        };
        let id = "shim-update-unit";
        // A "running" container whose sandbox is this test process.
        let me = std::process::id() as i32;
        let locked = rt.state.create(id).expect("state");
        locked
            .write(&crate::state::Record {
                oci_version: "1.1.0".into(),
                id: id.into(),
                status: crate::state::Status::Running,
                pid: me,
                pid_start_time: crate::state::process_start_time(me).expect("stat").1,
                bundle: base.clone(),
                rootfs: base.clone(),
                created: String::new(),
                owner: 0,
                annotations: Default::default(),
                root_writes: String::new(),
                exit_status: None,
                kill_signal: None,
                cgroup: Some(crate::cgroup::Cgroup {
                    dirs: vec![cg_dir.clone()],
                    ..Default::default()
                }),
                guest_limits: None,
                guest_limits_pending: false,
            })
            .expect("record");
        drop(locked);
        let listener =
            std::os::unix::net::UnixListener::bind(rt.state.dir(id).join(crate::control::SOCKET))
                .expect("bind");
        let sentry = std::thread::spawn(move || {
            let (conn, _) = listener.accept().expect("accept");
            let mut line = String::new();
            BufReader::new(&conn).read_line(&mut line).expect("read");
            (&conn).write_all(b"\"updated\"\n").expect("reply");
            line
        });
        let svc = service();
        svc.tasks().by_id.insert(
            id.into(),
            Task {
                bundle: base.clone(),
                runtime: rt.clone(),
                pid: me as u32,
                phase: Phase::Running,
                exit: None,
                stdin: String::new(),
                stdout: String::new(),
                stderr: String::new(),
                stdin_pipe: Arc::new(Mutex::new(None)),
                master: None,
            },
        );
        let req = update_request(
            id,
            serde_json::json!({
                "memory": {"limit": 67108864},
                "cpu": {"shares": 512},
                "pids": {"limit": 5},
            }),
        );
        svc.update_task(&req).expect("update");
        let read = |f: &str| std::fs::read_to_string(cg_dir.join(f)).expect(f);
        assert_eq!(read("memory.limit_in_bytes"), "67108864");
        assert_eq!(read("cpu.shares"), "512");
        let pids_max: i64 = read("pids.max").parse().expect("a number");
        assert!(pids_max >= 5, "host backstop {pids_max} below the limit");
        let sent: serde_json::Value =
            serde_json::from_str(&sentry.join().expect("sentry")).expect("json");
        assert_eq!(
            sent,
            serde_json::json!({"update": {"memory": 67108864, "pids": 5}})
        );
        let record = rt.state.read(id).expect("read").expect("record");
        assert_eq!(
            record.guest_limits,
            Some(crate::control::GuestLimits {
                memory: Some(67_108_864),
                pids: Some(5),
                ..Default::default()
            })
        );

        // Fields the sandbox cannot apply are refused by name, and nothing
        // is written.
        let bad = update_request(id, serde_json::json!({"blockIO": {"weight": 100}}));
        let e = svc.update_task(&bad).expect_err("blockIO");
        let text = format!("{e:?}");
        assert!(text.contains("linux.resources.blockIO"), "{text}");
        assert!(text.contains("INVALID_ARGUMENT"), "{text}");
        let e = svc
            .update_task(&update_request("no-such-task", serde_json::json!({})))
            .expect_err("unknown task");
        assert!(format!("{e:?}").contains("NOT_FOUND"), "{e:?}");

        // Incremental checkpoints: refused, with the one line people see.
        let e = svc
            .create_task(&api::CreateTaskRequest {
                id: "from-checkpoint".into(),
                checkpoint: "/tmp/cp".into(),
                parent_checkpoint: "/tmp/parent".into(),
                ..Default::default()
            })
            .expect_err("parent checkpoint");
        let text = format!("{e:?}");
        assert!(
            text.contains("a parent checkpoint is not supported"),
            "{text}"
        );
        assert!(text.contains("UNIMPLEMENTED"), "{text}");
        std::fs::remove_dir_all(&base).expect("cleanup");
    }
}
