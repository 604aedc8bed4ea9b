//! Confinement of the gofer process: fresh user, mount, PID, IPC, UTS and
//! network namespaces, the root directory as the only visible file tree,
//! `no_new_privs` and a seccomp allow-list of file calls.
//!
//! The gofer is the one ferrovisor process that touches host files by name,
//! so a bug in it must not reach anything else: after [`enter`] the process
//! sees only the root (no `/proc`, no `/dev`, no host network), and after
//! [`run_gofer_process`] installs the filter it cannot exec, connect, ptrace
//! or mount.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

use abi::Errno;

use crate::seccomp;
use crate::server::{self, ServerOptions};
use crate::sys::{self, Fork};

/// A step of entering the jail failed.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {errno:?}")]
pub struct JailError {
    /// what was being done
    pub step: &'static str,
    /// why it failed
    pub errno: Errno,
}

trait Step<T> {
    fn step(self, step: &'static str) -> Result<T, JailError>;
}

impl<T> Step<T> for Result<T, Errno> {
    fn step(self, step: &'static str) -> Result<T, JailError> {
        self.map_err(|errno| JailError { step, errno })
    }
}

impl<T> Step<T> for std::io::Result<T> {
    fn step(self, step: &'static str) -> Result<T, JailError> {
        self.map_err(|e| JailError {
            step,
            errno: Errno(e.raw_os_error().unwrap_or(libc::EIO)),
        })
    }
}

/// How to build the jail.
#[derive(Clone, Copy, Debug, Default)]
pub struct JailOptions {
    /// mount the root read-only as well (the server refuses writes anyway;
    /// this makes the kernel refuse them too)
    pub read_only: bool,
}

/// Enters the jail with default options. See [`enter_with`].
pub fn enter(root: &Path) -> Result<OwnedFd, JailError> {
    enter_with(root, &JailOptions::default())
}

/// Forks: the child unshares `flags` and continues; the parent, still in
/// the caller's user namespace, writes the child's identity uid/gid maps,
/// then waits for it and exits with its status (never returns).
fn identity_mapped_userns(flags: libc::c_int) -> Result<(), JailError> {
    use std::io::{Read, Write};
    let (mut parent_end, mut child_end) =
        std::os::unix::net::UnixStream::pair().step("create the mapping channel")?;
    // SAFETY: the caller is single-threaded (enter_with's contract).
    match unsafe { sys::fork() }.step("fork the mapping parent")? {
        Fork::Child => {
            drop(parent_end);
            sys::unshare(flags).step("unshare namespaces")?;
            child_end.write_all(b"u").step("report the new namespace")?;
            let mut b = [0u8; 1];
            child_end.read_exact(&mut b).step("wait for the id maps")?;
            if b[0] != b'm' {
                return Err(Errno::EPERM).step("write the id maps");
            }
            Ok(())
        }
        Fork::Parent(pid) => {
            drop(child_end);
            let mut b = [0u8; 1];
            let ok = parent_end.read_exact(&mut b).is_ok()
                && std::fs::write(format!("/proc/{pid}/uid_map"), "0 0 4294967295").is_ok()
                && std::fs::write(format!("/proc/{pid}/gid_map"), "0 0 4294967295").is_ok();
            let _ = parent_end.write_all(if ok { b"m" } else { b"x" });
            drop(parent_end);
            // From here on it only waits, in the host's namespaces: with no
            // descriptor, privilege or system call it does not need.
            sys::close_from(3, -1);
            let confined = sys::become_nobody()
                .and_then(|()| sys::set_no_new_privs())
                .and_then(|()| seccomp::waiter_policy().install());
            if let Err(e) = confined {
                tracing::error!(errno = e.0, "gofer: cannot confine the mapping parent");
            }
            let code = sys::wait_exit(pid).unwrap_or(2);
            sys::exit_now(code)
        }
    }
}

/// Moves the calling process into new user (the caller's uid and gid mapped
/// to themselves), mount, PID, IPC, UTS and network namespaces, makes every
/// mount private, binds `root` onto itself (`nosuid`, `nodev`, and
/// `ro` if asked) and pivots into it, detaching the old root. Returns an
/// `O_PATH` descriptor of the new root.
///
/// The process must be single-threaded (`unshare(CLONE_NEWUSER)` refuses
/// otherwise), and the PID namespace applies to its children only: fork
/// after this to run inside it. Host state outside the new namespaces is not
/// changed.
pub fn enter_with(root: &Path, opts: &JailOptions) -> Result<OwnedFd, JailError> {
    let root = std::fs::canonicalize(root).step("resolve the root")?;
    let croot = CString::new(root.as_os_str().as_bytes()).map_err(|_| JailError {
        step: "resolve the root",
        errno: Errno::EINVAL,
    })?;
    let (uid, gid) = sys::ids();
    let flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWNET;
    if uid == 0 && gid == 0 {
        // Run by root: map every id, so files owned by other users keep
        // their owners and root's access (the guest must see what a root
        // process sees). Only a process outside the new namespace may
        // write such a map, so a parent stays outside and writes it.
        identity_mapped_userns(flags)?;
    } else {
        sys::unshare(flags).step("unshare namespaces")?;
        // setgroups must be denied before an unprivileged gid_map is
        // written (user_namespaces(7)); it also stops dropping
        // supplementary groups, which could grant access that "deny" ACL
        // entries withhold.
        std::fs::write("/proc/self/setgroups", "deny").step("deny setgroups")?;
        std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1")).step("write uid_map")?;
        std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1")).step("write gid_map")?;
    }

    // Nothing done below may propagate back to the host's mounts.
    sys::mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE).step("make mounts private")?;
    // A plain bind hides whatever is mounted below the root; the kernel
    // refuses it (EINVAL) when that would uncover locked mounts, and then
    // the recursive bind keeps them.
    // Serving the whole host root: there is nothing outside it to hide, and
    // pivot_root cannot move "/" onto itself (EINVAL); only the mount
    // flags below are applied, to the existing root mount.
    let whole_root = croot.as_bytes() == b"/";
    if whole_root {
        // fall through to the remount
    } else if let Err(e) = sys::mount(Some(&croot), &croot, None, libc::MS_BIND) {
        if e != Errno::EINVAL {
            return Err(e).step("bind the root");
        }
        sys::mount(Some(&croot), &croot, None, libc::MS_BIND | libc::MS_REC)
            .step("bind the root")?;
    }
    // Keep the flags the kernel locked on the original mount (a remount in
    // a user namespace may add restrictions, never drop them), and add
    // nosuid/nodev: no device node below the root can be opened through
    // this mount even if one slipped past the server's checks.
    let kept = sys::mount_flags(&croot).step("read mount flags")?
        & (libc::MS_RDONLY
            | libc::MS_NOSUID
            | libc::MS_NODEV
            | libc::MS_NOEXEC
            | libc::MS_NOATIME
            | libc::MS_NODIRATIME
            | libc::MS_RELATIME);
    let ro = if opts.read_only { libc::MS_RDONLY } else { 0 };
    sys::mount(
        None,
        &croot,
        None,
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_NOSUID | libc::MS_NODEV | kept | ro,
    )
    .step("remount the root nosuid,nodev")?;

    // pivot_root(".", ".") stacks the old root on the new one; detaching it
    // leaves the new root alone (pivot_root(2), NOTES).
    sys::chdir(&croot).step("enter the root")?;
    if !whole_root {
        sys::pivot_root(c".", c".").step("pivot_root")?;
        sys::umount2(c".", libc::MNT_DETACH).step("detach the old root")?;
    }
    sys::chdir(c"/").step("chdir to the new root")?;
    sys::open_path(c"/", libc::O_PATH | libc::O_DIRECTORY).step("open the new root")
}

/// Names of the network interfaces the process sees: inside the jail, only
/// `lo`. For tests and diagnostics.
pub fn interface_names() -> Result<Vec<String>, Errno> {
    sys::interface_names()
}

/// Takes ownership of a socket descriptor inherited from the parent process
/// (`ferrovisor gofer --fd N`), checking that it is an open socket.
///
/// The descriptor number must come from the process's arguments: nothing
/// else in the process may own it.
pub fn inherited_socket(fd: RawFd) -> Result<OwnedFd, JailError> {
    if fd < 3 {
        return Err(Errno::EBADF).step("check the socket descriptor");
    }
    sys::adopt_socket(fd).step("check the socket descriptor")
}

/// The gofer process: closes every descriptor but the standard ones and
/// `socket`, enters the jail, forks so that the server runs as PID 1 of the
/// new PID namespace (the parent waits and exits with its status), installs
/// [`seccomp::gofer_policy`] and serves the connection until the Sentry
/// closes it. Exit status: 0 after a clean end of stream, 1 on a protocol
/// error, 2 if the jail could not be built.
pub fn run_gofer_process(root: &Path, socket: OwnedFd, read_only: bool) -> ! {
    run_gofer_process_for(root, None, socket, read_only)
}

/// [`run_gofer_process`] serving only the regular file `file` in `root`
/// when it is given (see [`server::serve_file`]).
pub fn run_gofer_process_for(
    root: &Path,
    file: Option<&[u8]>,
    socket: OwnedFd,
    read_only: bool,
) -> ! {
    sys::close_from(3, socket.as_raw_fd());
    sys::raise_nofile();
    let root_fd = match enter_with(root, &JailOptions { read_only }) {
        Ok(fd) => fd,
        Err(e) => {
            tracing::error!(error = %e, "gofer: cannot enter the jail");
            sys::exit_now(2);
        }
    };
    // SAFETY: the process is single-threaded here (the jail's unshare of the
    // user namespace just succeeded, which the kernel allows only then).
    match unsafe { sys::fork() } {
        Err(e) => {
            tracing::error!(errno = e.0, "gofer: fork failed");
            sys::exit_now(2);
        }
        Ok(Fork::Parent(pid)) => {
            sys::announce_and_release_stdout(true);
            // The server holds the only copies the connection needs: the
            // Sentry must see end of stream when the server exits.
            drop(root_fd);
            drop(socket);
            if let Err(e) = seccomp::waiter_policy().install() {
                tracing::error!(errno = e.0, "gofer: cannot install the waiter's filter");
            }
            let code = sys::wait_exit(pid).unwrap_or(2);
            sys::exit_now(code);
        }
        Ok(Fork::Child) => {
            sys::announce_and_release_stdout(false);
            // Do not outlive the waiter (and with it the jail's owner).
            let _ = sys::set_parent_death_signal(libc::SIGKILL);
            // Modes of created files are exactly those the Sentry asks for;
            // it applies the guest's umask itself.
            sys::umask(0);
            if let Err(e) = seccomp::gofer_policy(read_only).install() {
                tracing::error!(errno = e.0, "gofer: cannot install the seccomp filter");
                sys::exit_now(2);
            }
            let opts = ServerOptions {
                read_only,
                ..ServerOptions::default()
            };
            let conn = UnixStream::from(socket);
            let served = match file {
                Some(name) => server::serve_file(root_fd, name, conn, opts),
                None => server::serve(root_fd, conn, opts),
            };
            match served {
                Ok(()) => sys::exit_now(0),
                Err(e) => {
                    tracing::error!(error = %e, "gofer: connection failed");
                    sys::exit_now(1);
                }
            }
        }
    }
}
