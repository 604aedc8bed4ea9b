//! `do --gpus`: the running driver's table, the devices asked for, and the
//! device opener process that opens them for the Sentry (docs/gpu.md).

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sentry::NvDevice;

/// Why a sandbox cannot have the GPUs it asked for.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// no supported driver
    #[error("{0}")]
    Driver(String),
    /// `--gpus` is not a list
    #[error("--gpus {0:?}: give all, or GPU indices such as 0,1")]
    BadList(String),
    /// an asked-for GPU is not on the host
    #[error("GPU {0} not found: {1} is missing")]
    Missing(u8, PathBuf),
    /// `--nvproxy-capabilities`
    #[error("--nvproxy-capabilities: {0}")]
    Caps(String),
    /// `--nvproxy-driver-version`
    #[error("--nvproxy-driver-version {0:?}: not a driver version such as 580.105.08")]
    BadVersion(String),
    /// `--nvproxy-log`
    #[error("--nvproxy-log {path}: {source}")]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    /// the opener could not start
    #[error("cannot start the GPU device opener: {0}")]
    Start(std::io::Error),
}

/// The GPU part of a sandbox's config for `--gpus WHICH`.
pub fn config(
    which: &str,
    caps: &str,
    version: Option<&str>,
    dir: &Path,
    log: Option<&Path>,
) -> Result<sentry::GpuConfig, Error> {
    let caps = nvproxy::Caps::parse(caps).map_err(Error::Caps)?;
    let abi = driver_abi(version)?;
    let devices = devices(which, dir)?;
    finish(abi, caps, devices, dir, log)
}

/// The GPU part of a container's config (the runtime's `--nvproxy`): the
/// devices `linux.devices` names, the capabilities of `caps` (the
/// runtime's `--nvproxy-capabilities`) or else of the container's
/// `NVIDIA_DRIVER_CAPABILITIES`, compute and utility when neither says.
pub fn oci_config(
    names: &[String],
    caps: Option<&str>,
    env: &[String],
    version: Option<&str>,
    dir: &Path,
) -> Result<sentry::GpuConfig, Error> {
    let from_env = env
        .iter()
        .find_map(|e| e.strip_prefix("NVIDIA_DRIVER_CAPABILITIES="))
        .filter(|v| !v.is_empty());
    let caps = caps.or(from_env).unwrap_or("compute,utility");
    let caps = nvproxy::Caps::parse(caps).map_err(Error::Caps)?;
    let abi = driver_abi(version)?;
    let mut named = Vec::new();
    for n in names {
        named.push(NvDevice::from_name(n).ok_or_else(|| Error::BadList(n.clone()))?);
    }
    let devices = present(dir, named, |_, path| {
        Error::Driver(format!(
            "config.json: linux.devices names {}, which this host lacks",
            path.display()
        ))
    })?;
    finish(abi, caps, devices, dir, None)
}

fn finish(
    abi: nvproxy::Abi,
    caps: nvproxy::Caps,
    devices: Vec<NvDevice>,
    dir: &Path,
    log: Option<&Path>,
) -> Result<sentry::GpuConfig, Error> {
    let log = match log {
        Some(p) => Some(std::fs::File::create(p).map_err(|source| Error::Log {
            path: p.to_path_buf(),
            source,
        })?),
        None => None,
    };
    let opener = spawn_opener(dir, &devices)?;
    Ok(sentry::GpuConfig {
        abi,
        caps,
        opener,
        devices,
        log,
    })
}

/// The table of driver `version`, or of the host's driver.
pub fn driver_abi(version: Option<&str>) -> Result<nvproxy::Abi, Error> {
    Ok(match version {
        Some(v) => {
            let parsed = nvproxy::Version::parse(v).ok_or_else(|| Error::BadVersion(v.into()))?;
            nvproxy::abi_for(parsed).ok_or_else(|| {
                Error::Driver(format!(
                    "NVIDIA driver {v} is not supported by nvproxy; supported: {}",
                    nvproxy::supported_list()
                ))
            })?
        }
        None => {
            let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok();
            nvproxy::host_abi(text.as_deref()).map_err(Error::Driver)?.1
        }
    })
}

/// The control device, UVM (when loaded) and the GPUs `which` names.
fn devices(which: &str, dir: &Path) -> Result<Vec<NvDevice>, Error> {
    let mut gpus: Vec<NvDevice> = Vec::new();
    if which == "all" {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let d = e.file_name().to_str().and_then(NvDevice::from_name);
            gpus.extend(d.filter(|d| matches!(d, NvDevice::Gpu(_))));
        }
        gpus.sort_unstable_by_key(|d| d.number());
    } else {
        for w in which.split(',') {
            let n: u8 = w.trim().parse().map_err(|_| Error::BadList(which.into()))?;
            gpus.push(NvDevice::Gpu(n));
        }
    }
    let uvm = dir.join("nvidia-uvm").exists().then_some(NvDevice::Uvm);
    present(dir, uvm.into_iter().chain(gpus), |d, path| match d {
        NvDevice::Gpu(n) => Error::Missing(n, path),
        _ => Error::Driver(format!("{} is missing", path.display())),
    })
}

/// The control device, then each of `others` once: each must be in `dir`
/// (`missing` says what to tell of one that is not).
fn present(
    dir: &Path,
    others: impl IntoIterator<Item = NvDevice>,
    missing: impl Fn(NvDevice, PathBuf) -> Error,
) -> Result<Vec<NvDevice>, Error> {
    let ctl = dir.join("nvidiactl");
    if !ctl.exists() {
        return Err(Error::Driver(format!(
            "no NVIDIA device on this host ({} is missing): load the nvidia kernel module first",
            ctl.display()
        )));
    }
    let mut v = vec![NvDevice::Ctl];
    for d in others {
        let path = dir.join(d.name());
        if !path.exists() {
            return Err(missing(d, path));
        }
        if !v.contains(&d) {
            v.push(d);
        }
    }
    Ok(v)
}

/// Starts `ferrovisor device-opener` over a socket pair; it ends when the
/// Sentry's end closes, and the process outside the Sentry reaps it.
fn spawn_opener(dir: &Path, devices: &[NvDevice]) -> Result<gofer::devices::DeviceOpener, Error> {
    let (ours, theirs) = UnixStream::pair().map_err(Error::Start)?;
    let exe = std::env::current_exe().map_err(Error::Start)?;
    let mut cmd = Command::new(exe);
    cmd.arg("device-opener")
        .arg("--dir")
        .arg(dir)
        .args(["--fd", "3"]);
    for d in devices {
        cmd.arg("--allow").arg(d.name());
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::null());
    crate::sys::prepare_child(&mut cmd, theirs.as_raw_fd(), 3, false, None);
    let child = cmd.spawn().map_err(Error::Start)?;
    drop(theirs);
    drop(child);
    Ok(gofer::devices::DeviceOpener::new(ours.into()))
}
