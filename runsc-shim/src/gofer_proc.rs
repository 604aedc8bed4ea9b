//! Starting the gofer: one process per sandbox root, jailed in its own
//! namespaces, serving the root over a socket to the Sentry. The Sentry
//! never sees a host path; all it gets is the client end of that socket.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};

/// Spawns `ferrovisor gofer --root ROOT --fd 3 --ro` with one end of a
/// socket pair and returns a client on the other end.
pub fn spawn(root: &Path) -> Result<gofer::client::Client, String> {
    spawn_gofer(root, None, true)
}

/// Spawns a gofer for a volume: a host directory, or a single host file
/// (the gofer then serves that file and nothing else of its directory).
pub fn spawn_volume(source: &Path, read_only: bool) -> Result<gofer::client::Client, String> {
    let meta = std::fs::metadata(source).map_err(|e| format!("{}: {e}", source.display()))?;
    if meta.is_dir() {
        return spawn_gofer(source, None, read_only);
    }
    if !meta.is_file() {
        return Err(format!(
            "{}: not a directory or regular file (devices, FIFOs and sockets cannot be mounted)",
            source.display()
        ));
    }
    // The file's real name and directory: a symlink in the host path is
    // the user's choice, made before the sandbox exists.
    let real = std::fs::canonicalize(source).map_err(|e| format!("{}: {e}", source.display()))?;
    let (Some(dir), Some(name)) = (real.parent(), real.file_name()) else {
        return Err(format!("{}: not a file", source.display()));
    };
    spawn_gofer(dir, Some(name), read_only)
}

/// A volume for the sandbox: `source` on the host at guest path `dest`,
/// served by a gofer of its own.
pub fn volume_mount(source: &Path, dest: &str, read_only: bool) -> Result<sentry::Mount, String> {
    if !dest.starts_with('/') || dest.split('/').any(|c| c == "..") {
        return Err(format!(
            "{dest}: the path in the sandbox must be absolute, without \"..\""
        ));
    }
    let client = spawn_volume(source, read_only)?;
    Ok(sentry::Mount {
        dest: dest.as_bytes().to_vec(),
        source: sentry::MountSource::Volume { client, read_only },
    })
}

/// Parses `do`'s `--volume HOST:GUEST[:ro|:rw]`.
pub fn parse_volume(spec: &str) -> Result<(std::path::PathBuf, String, bool), String> {
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
        _ => Err(format!(
            "--volume {spec}: expected HOST:GUEST or HOST:GUEST:ro (e.g. --volume $PWD:/work)"
        )),
    }
}

fn spawn_gofer(
    root: &Path,
    file: Option<&std::ffi::OsStr>,
    read_only: bool,
) -> Result<gofer::client::Client, String> {
    let (ours, theirs) = UnixStream::pair().map_err(|e| format!("gofer socket: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| format!("finding the ferrovisor binary: {e}"))?;
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
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("starting the gofer: {e}"))?;
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
