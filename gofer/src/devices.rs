//! The device opener: a small process outside the Sentry that holds the
//! host's device directory and opens only the names it was started with,
//! each open a fresh descriptor donated to the Sentry (nvproxy's
//! `/dev/nvidia*`, whose driver keeps state per open file). The Sentry never
//! opens a host path itself.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::Mutex;

use abi::Errno;

use crate::seccomp::{ArgCheck, Policy, Rule};
use crate::sys;

/// The longest device name asked for.
const MAX_NAME: usize = 64;

/// The Sentry's end: asks for one device at a time.
#[derive(Debug)]
pub struct DeviceOpener {
    sock: Mutex<OwnedFd>,
}

impl DeviceOpener {
    /// Over a connected stream socket to [`serve`].
    pub fn new(sock: OwnedFd) -> DeviceOpener {
        DeviceOpener {
            sock: Mutex::new(sock),
        }
    }

    /// A fresh descriptor of device `name` (`nvidiactl`), or the opener's
    /// errno: ENOENT for a name it was not given or the host lacks.
    pub fn open(&self, name: &str) -> Result<OwnedFd, Errno> {
        if name.is_empty() || name.len() > MAX_NAME {
            return Err(Errno::ENOENT);
        }
        let sock = self.sock.lock().unwrap_or_else(|e| e.into_inner());
        let mut req = vec![name.len() as u8];
        req.extend_from_slice(name.as_bytes());
        sys::send_all(sock.as_fd(), &req, &[])?;
        let mut reply = [0u8; 4];
        let mut fds = Vec::new();
        if !sys::recv_exact(sock.as_fd(), &mut reply, &mut fds)? {
            return Err(Errno::EIO);
        }
        match i32::from_ne_bytes(reply) {
            0 => fds.pop().ok_or(Errno::EIO),
            e => Err(Errno(e)),
        }
    }
}

/// Serves [`DeviceOpener::open`] on `sock` until it closes: only names in
/// `allowed`, each opened under `dir` by [`sys::open_device`].
pub fn serve(dir: &OwnedFd, allowed: &[String], sock: &OwnedFd) -> Result<(), Errno> {
    loop {
        let mut len = [0u8; 1];
        let mut fds = Vec::new();
        if !sys::recv_exact(sock.as_fd(), &mut len, &mut fds)? {
            return Ok(());
        }
        let mut name = vec![0u8; usize::from(len[0])];
        sys::recv_exact(sock.as_fd(), &mut name, &mut fds)?;
        // Descriptors sent to the opener are not its business.
        drop(fds);
        let opened = match std::str::from_utf8(&name) {
            Ok(n) if allowed.iter().any(|a| a == n) => CString::new(n)
                .map_err(|_| Errno::ENOENT)
                .and_then(|c| sys::open_device(dir.as_fd(), &c)),
            _ => Err(Errno::ENOENT),
        };
        match opened {
            Ok(fd) => sys::send_all(sock.as_fd(), &0i32.to_ne_bytes(), &[fd.as_fd()])?,
            Err(e) => sys::send_all(sock.as_fd(), &e.0.to_ne_bytes(), &[])?,
        }
    }
}

/// The flags every device is opened with ([`sys::DEVICE_OPEN_FLAGS`]).
pub const OPEN_FLAGS: i32 = sys::DEVICE_OPEN_FLAGS;

/// What the opener may do: talk on its socket, open under the one
/// directory descriptor `dir` with [`sys::DEVICE_OPEN_FLAGS`] exactly,
/// look at what it opened, close, exit.
pub fn opener_policy(dir: RawFd) -> Policy {
    use libc::*;
    const EXEC: u64 = PROT_EXEC as u64;
    Policy {
        rules: vec![
            Rule::allow(SYS_recvmsg),
            Rule::allow(SYS_sendmsg),
            Rule::allow(SYS_close),
            Rule::allow(SYS_statx),
            Rule::allow_if(SYS_write, 0, u64::MAX, 2),
            Rule {
                nr: SYS_openat,
                checks: vec![
                    ArgCheck::int_eq(0, dir as u64),
                    ArgCheck::int_eq(2, sys::DEVICE_OPEN_FLAGS as u64),
                ],
                action: crate::seccomp::Action::Allow,
            },
            Rule::allow_if(SYS_mmap, 2, EXEC, 0),
            Rule::allow(SYS_munmap),
            Rule::allow(SYS_brk),
            Rule::allow(SYS_futex),
            Rule::allow(SYS_rt_sigreturn),
            Rule::allow(SYS_rt_sigprocmask),
            Rule::allow(SYS_sigaltstack),
            Rule::allow(SYS_exit),
            Rule::allow(SYS_exit_group),
        ],
        default: crate::seccomp::Action::KillProcess,
    }
}

/// The opener process: keeps only `socket`, opens `dir`, sets
/// `no_new_privs`, installs [`opener_policy`] and serves until the Sentry
/// closes its end. Exit status 0 after a clean end, 2 if it could not start.
pub fn run_opener_process(dir: &Path, allowed: Vec<String>, socket: OwnedFd) -> ! {
    let socket_fd = socket.as_raw_fd();
    sys::close_from(3, socket_fd);
    let started = (|| -> Result<OwnedFd, (&'static str, Errno)> {
        let path = CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str()))
            .map_err(|_| ("the device directory", Errno::EINVAL))?;
        let dir = sys::open_path(&path, libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
            .map_err(|e| ("open the device directory", e))?;
        sys::set_no_new_privs().map_err(|e| ("no_new_privs", e))?;
        opener_policy(dir.as_raw_fd())
            .install()
            .map_err(|e| ("the seccomp filter", e))?;
        Ok(dir)
    })();
    let dir = match started {
        Ok(d) => d,
        Err((step, e)) => {
            eprintln!("ferrovisor device opener: {step}: {e:?}");
            std::process::exit(2);
        }
    };
    let code = match serve(&dir, &allowed, &socket) {
        Ok(()) => 0,
        Err(_) => 1,
    };
    std::process::exit(code)
}
