//! Starting the gofer: one process per sandbox root, jailed in its own
//! namespaces, serving the root over a socket to the Sentry. The Sentry
//! never sees a host path; all it gets is the client end of that socket.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Why a gofer or a volume could not be set up, one line.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// the volume's host path cannot be looked at
    #[error("{}: {source}", path.display())]
    Source {
        /// the host path
        path: PathBuf,
        /// the host's answer
        source: std::io::Error,
    },
    /// a device, FIFO or socket as a volume
    #[error(
        "{}: not a directory or regular file (devices, FIFOs and sockets cannot be mounted)",
        .0.display()
    )]
    NotMountable(PathBuf),
    /// a file path without a directory or a name
    #[error("{}: not a file", .0.display())]
    NotAFile(PathBuf),
    /// a guest path that is relative or climbs with `..`
    #[error("{0}: the path in the sandbox must be absolute, without \"..\"")]
    BadDest(String),
    /// `--volume` not as HOST:GUEST[:ro|:rw]
    #[error("--volume {0}: expected HOST:GUEST or HOST:GUEST:ro (e.g. --volume $PWD:/work)")]
    BadVolume(String),
    /// the socket pair to the gofer
    #[error("gofer socket: {0}")]
    Socket(std::io::Error),
    /// this program's own path, to run as the gofer
    #[error("finding the ferrovisor binary: {0}")]
    Exe(std::io::Error),
    /// the gofer did not start
    #[error("starting the gofer: {0}")]
    Start(std::io::Error),
}

/// Spawns `ferrovisor gofer --root ROOT --fd 3 --ro` with one end of a
/// socket pair and returns a client on the other end.
pub fn spawn(root: &Path) -> Result<gofer::client::Client, Error> {
    spawn_gofer(root, None, true)
}

/// [`spawn`], writable: a container's rootfs that the guest writes to.
pub fn spawn_writable(root: &Path) -> Result<gofer::client::Client, Error> {
    spawn_gofer(root, None, false)
}

/// Spawns a gofer for a volume: a host directory, or a single host file
/// (the gofer then serves that file and nothing else of its directory).
pub fn spawn_volume(source: &Path, read_only: bool) -> Result<gofer::client::Client, Error> {
    let looked = |source_err| Error::Source {
        path: source.to_path_buf(),
        source: source_err,
    };
    let meta = std::fs::metadata(source).map_err(looked)?;
    if meta.is_dir() {
        return spawn_gofer(source, None, read_only);
    }
    if !meta.is_file() {
        return Err(Error::NotMountable(source.to_path_buf()));
    }
    // The file's real name and directory: a symlink in the host path is
    // the user's choice, made before the sandbox exists.
    let real = std::fs::canonicalize(source).map_err(looked)?;
    let (Some(dir), Some(name)) = (real.parent(), real.file_name()) else {
        return Err(Error::NotAFile(source.to_path_buf()));
    };
    spawn_gofer(dir, Some(name), read_only)
}

/// A volume for the sandbox: `source` on the host at guest path `dest`,
/// served by a gofer of its own.
pub fn volume_mount(source: &Path, dest: &str, read_only: bool) -> Result<sentry::Mount, Error> {
    if !dest.starts_with('/') || dest.split('/').any(|c| c == "..") {
        return Err(Error::BadDest(dest.to_owned()));
    }
    let client = spawn_volume(source, read_only)?;
    Ok(sentry::Mount {
        dest: dest.as_bytes().to_vec(),
        source: sentry::MountSource::Volume { client, read_only },
    })
}

/// Parses `do`'s `--volume HOST:GUEST[:ro|:rw]`.
pub fn parse_volume(spec: &str) -> Result<(PathBuf, String, bool), Error> {
    let (rest, read_only) = if let Some(r) = spec.strip_suffix(":ro") {
        (r, true)
    } else if let Some(r) = spec.strip_suffix(":rw") {
        (r, false)
    } else {
        (spec, false)
    };
    match rest.split_once(':') {
        Some((host, guest)) if !host.is_empty() && !guest.is_empty() => {
            Ok((host.into(), guest.to_owned(), read_only))
        }
        _ => Err(Error::BadVolume(spec.to_owned())),
    }
}

fn spawn_gofer(
    root: &Path,
    file: Option<&std::ffi::OsStr>,
    read_only: bool,
) -> Result<gofer::client::Client, Error> {
    let (ours, theirs) = UnixStream::pair().map_err(Error::Socket)?;
    let exe = std::env::current_exe().map_err(Error::Exe)?;
    let mut cmd = Command::new(exe);
    cmd.arg("gofer").arg("--root").arg(root).args(["--fd", "3"]);
    if let Some(f) = file {
        cmd.arg("--file").arg(f);
    }
    if read_only {
        cmd.arg("--ro");
    }
    // The gofer says on standard output when its server runs.
    cmd.stdin(Stdio::null()).stdout(Stdio::piped());
    crate::sys::prepare_child(&mut cmd, theirs.as_raw_fd(), 3, false, None);
    let mut child = cmd.spawn().map_err(Error::Start)?;
    drop(theirs);
    if let Some(out) = child.stdout.take() {
        let mut line = String::new();
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line);
    }
    // The gofer exits when the Sentry's end of the socket closes. The
    // process that stays outside the Sentry's namespaces reaps it
    // (crate::confine).
    drop(child);
    let client = gofer::client::Client::following(ours);
    Ok(client)
}

/// The `ferrovisor gofer` role: serve `root` (or only `file` in it) on
/// inherited descriptor `fd`.
pub fn run(root: &Path, file: Option<&std::ffi::OsStr>, fd: i32, read_only: bool) -> ! {
    let socket = match gofer::jail::inherited_socket(fd) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ferrovisor gofer: {e}");
            std::process::exit(2);
        }
    };
    use std::os::unix::ffi::OsStrExt;
    let file = file.map(OsStrExt::as_bytes);
    gofer::jail::run_gofer_process_for(root, file, socket, read_only)
}
