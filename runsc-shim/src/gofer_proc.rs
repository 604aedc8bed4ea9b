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
    let (ours, theirs) = UnixStream::pair().map_err(|e| format!("gofer socket: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| format!("finding the ferrovisor binary: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.arg("gofer")
        .arg("--root")
        .arg(root)
        .args(["--fd", "3", "--ro"]);
    // The gofer prints its server's pid on standard output, then closes it.
    cmd.stdin(Stdio::null()).stdout(Stdio::piped());
    crate::sys::prepare_child(&mut cmd, theirs.as_raw_fd(), 3, false, None);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("starting the gofer: {e}"))?;
    drop(theirs);
    let server_pid = child.stdout.take().and_then(|out| {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line).ok()?;
        line.trim().parse::<i32>().ok().filter(|&p| p > 0)
    });
    // The gofer exits when the Sentry's end of the socket closes; reap it
    // in the background so no zombie is left while the sandbox runs.
    std::thread::Builder::new()
        .name("gofer-reaper".into())
        .spawn(move || {
            let mut child = child;
            let _ = child.wait();
        })
        .map_err(|e| format!("gofer reaper: {e}"))?;
    let client = match server_pid {
        Some(pid) => gofer::client::Client::with_server_pid(ours, pid),
        None => gofer::client::Client::new(ours),
    };
    Ok(client)
}

/// The `ferrovisor gofer` role: serve `root` on inherited descriptor `fd`.
pub fn run(root: &Path, fd: i32, read_only: bool) -> ! {
    let socket = match gofer::jail::inherited_socket(fd) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ferrovisor gofer: {e}");
            std::process::exit(2);
        }
    };
    gofer::jail::run_gofer_process(root, socket, read_only)
}
