//! The Sentry's host process in namespaces of its own (ARCHITECTURE.md,
//! "Processes on the host": the Sentry, like the gofer and the stubs, runs in
//! fresh user, mount, PID, IPC, UTS and network namespaces).
//!
//! The command-line process (`do`, or `boot` in OCI mode) splits in two once
//! its root, volumes and gofers are ready, and before the Sentry starts:
//!
//! * The child becomes the Sentry. It is PID 1 of a new PID namespace, so
//!   the only processes it can signal or trace are its own stubs. Under
//!   root, in a new user namespace (which maps every id to itself, so that
//!   the owners of host files read the same inside) it takes the host's
//!   `nobody` and `nogroup` ids: it owns no host process or file, and the
//!   caller's root privileges are gone for good, not only dropped. (A
//!   caller that is not root keeps its ids, in a user namespace that maps
//!   them alone, as the gofer's does.) Its mount, IPC and UTS
//!   namespaces are new, and so is its network namespace, unless the
//!   guest's sockets are host sockets (`--network host`, allow rules'
//!   relays).
//! * The parent stays where it was, with the pid the caller or the engine
//!   knows. It only waits: it hands the signals a process sends it to the
//!   Sentry, stops and continues the Sentry with itself (^Z, `fg`), reaps
//!   the gofers (its children), and exits with the Sentry's status. It
//!   keeps no capability but `CAP_KILL`, and a seccomp filter of its own
//!   ([`monitor_policy`]) allows only those calls.
//!
//! The Sentry stays in the parent's process group, so that it is in the
//! terminal's foreground when the parent is (it reads and writes the
//! terminal for the guest). A signal sent to the whole group (the
//! terminal's ^C, `kill -INT -PGID`) reaches both: the Sentry ignores the
//! forwarded signals themselves and takes them from the parent alone,
//! queued as one real-time signal each (`sentry::hostsig::from_monitor`),
//! so the guest sees each once.
//!
//! The guest still sees the caller's ids and groups (read before the split).
//!
//! With `--network host` under root the Sentry stays in root's user
//! namespace and ids: binding the host's ports below 1024 for the guest
//! takes `CAP_NET_BIND_SERVICE` in the namespace that owns the host's
//! network. It still gets the PID, mount, IPC and UTS namespaces.

use std::io::{Read, Write};
use std::os::fd::AsFd;

use gofer::seccomp::{Action, ArgCheck, Policy, Rule};

use crate::sys;

/// Why the Sentry's process could not be split off or set up, one line.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// the channel between the two halves
    #[error("a channel to the Sentry's process: {0}")]
    Channel(std::io::Error),
    /// `SIGCHLD` could not be blocked before the split
    #[error("blocking SIGCHLD: {0}")]
    BlockSigchld(std::io::Error),
    /// the fork into new namespaces failed
    #[error("creating the Sentry's namespaces: {0} (ferrovisor needs user namespaces, or root)")]
    Namespaces(std::io::Error),
    /// the child could not hear from the parent about its id maps
    #[error("waiting for the Sentry's id maps: {0}")]
    WaitMaps(std::io::Error),
    /// the parent could not write the id maps
    #[error("the Sentry's id maps could not be written")]
    MapsNotWritten,
    /// the change to `nobody`
    #[error("taking the Sentry's ids: {0}")]
    Ids(std::io::Error),
    /// `PR_SET_PDEATHSIG`
    #[error("parent-death signal: {0}")]
    ParentDeathSignal(std::io::Error),
    /// the parent ended before the Sentry was ready
    #[error("the process that started the Sentry has ended")]
    ParentEnded,
    /// other threads than the caller's
    #[error("internal error: {0} threads before the Sentry's namespaces (must be 1)")]
    Threads(usize),
    /// `/proc/self/task` could not be read
    #[error("counting this process's threads: {0}")]
    CountThreads(std::io::Error),
    /// one of the id map files
    #[error("{file}: {source}")]
    Map {
        /// `uid_map`, `gid_map` or `setgroups`
        file: &'static str,
        /// the host's answer
        source: std::io::Error,
    },
}

/// What the Sentry keeps of the caller's host.
#[derive(Clone, Copy, Debug, Default)]
pub struct Confinement {
    /// The guest's TCP and UDP go through host sockets the Sentry opens
    /// (`--network host`, or the relays of allow rules): the Sentry stays
    /// in the caller's network namespace.
    pub host_sockets: bool,
    /// `--network host`: see the module's documentation.
    pub host_network: bool,
    /// The caller's terminal, which the Sentry uses raw: the monitor puts
    /// it back when the Sentry ends or stops, and raw again when it
    /// continues.
    pub terminal: Option<Tty>,
}

/// A terminal's settings (descriptor 0) before and while the Sentry uses it.
#[derive(Clone, Copy)]
pub struct Tty {
    /// as the caller had it
    pub saved: libc::termios,
    /// raw, for the Sentry's relay
    pub raw: libc::termios,
}

impl Tty {
    /// Puts the terminal on descriptor 0 in raw mode.
    pub fn make_raw() -> std::io::Result<Tty> {
        let saved = sys::termios(sys::stdin())?;
        let raw = sys::raw(saved);
        sys::set_termios(sys::stdin(), &raw)?;
        Ok(Tty { saved, raw })
    }

    /// Puts it back as it was.
    pub fn restore(&self) {
        let _ = sys::set_termios(sys::stdin(), &self.saved);
    }
}

impl std::fmt::Debug for Tty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tty")
    }
}

/// The host uid and gid the Sentry of a root caller runs as: Debian's
/// `nobody` and `nogroup`, which own nothing.
pub const SENTRY_HOST_ID: u32 = 65534;

/// Splits the calling process (which must have no other thread) as the
/// module's documentation says. Returns in the child, the Sentry-to-be,
/// once its namespaces and ids are in place; the parent never returns.
///
/// An error means nothing was split: the caller is still the only process.
pub fn split(c: Confinement) -> Result<(), Error> {
    let (uid, gid) = sys::ids();
    single_threaded()?;
    // What the guest is shown, asked while they are still the caller's.
    sentry::remember_caller_ids();
    // Without root, the other namespaces need a user namespace.
    let user_ns = uid != 0 || !c.host_network;
    let mut flags =
        libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
    if user_ns {
        flags |= libc::CLONE_NEWUSER;
    }
    if !c.host_sockets {
        flags |= libc::CLONE_NEWNET;
    }
    let (mut parent_end, mut child_end) =
        std::os::unix::net::UnixStream::pair().map_err(Error::Channel)?;
    // Blocked before the split: a child that ended before the parent
    // blocked it would be a SIGCHLD lost (its default action discards it).
    let old_mask = sys::mask_signals(&[libc::SIGCHLD], true).map_err(Error::BlockSigchld)?;
    // SAFETY: checked above: this process has a single thread.
    let forked = unsafe { sys::fork_into(flags) };
    match forked {
        Err(e) => {
            let _ = sys::restore_mask(&old_mask);
            Err(Error::Namespaces(e))
        }
        Ok(None) => {
            drop(parent_end);
            let _ = sys::restore_mask(&old_mask);
            if let Err(e) = sentry::hostsig::from_monitor() {
                eprintln!("ferrovisor: the Sentry's signals: {e}");
                std::process::exit(125);
            }
            let ready = (|| -> Result<(), Error> {
                let mut b = [0u8; 1];
                child_end.read_exact(&mut b).map_err(Error::WaitMaps)?;
                if b[0] != b'm' {
                    return Err(Error::MapsNotWritten);
                }
                if user_ns && uid == 0 {
                    sys::become_unprivileged(SENTRY_HOST_ID, SENTRY_HOST_ID).map_err(Error::Ids)?;
                }
                // The parent is outside this PID namespace: if it dies, no
                // one outside would end this process. (Set after the change
                // of ids, which clears it.) A parent that died before is
                // seen as the end of its channel, which it holds for life.
                sys::set_parent_death_signal(libc::SIGKILL).map_err(Error::ParentDeathSignal)?;
                if sys::poll_readable(child_end.as_fd(), 0).unwrap_or(true) {
                    return Err(Error::ParentEnded);
                }
                Ok(())
            })();
            if let Err(e) = ready {
                eprintln!("ferrovisor: {e}");
                std::process::exit(125);
            }
            Ok(())
        }
        Ok(Some(pid)) => {
            drop(child_end);
            let mapped = if user_ns {
                write_maps(pid, uid, gid)
            } else {
                Ok(())
            };
            let _ = parent_end.write_all(if mapped.is_ok() { b"m" } else { b"x" });
            if let Err(e) = mapped {
                eprintln!("ferrovisor: the Sentry's user namespace: {e}");
            }
            monitor(pid, parent_end, c.terminal)
        }
    }
}

/// Checks that this process has one thread. A helper thread that was
/// joined (`sys::uts_nodename`) can stay listed for a moment after: the
/// kernel releases it just after waking its joiner.
fn single_threaded() -> Result<(), Error> {
    let mut tries = 0;
    loop {
        match sys::thread_count() {
            Ok(1) => return Ok(()),
            Ok(_) if tries < 200 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Ok(n) => return Err(Error::Threads(n)),
            Err(e) => return Err(Error::CountThreads(e)),
        }
    }
}

/// The id maps of the Sentry's user namespace: every id to itself under
/// root; the caller's own ids otherwise (all an unprivileged process may
/// map, after giving up `setgroups`, user_namespaces(7)).
fn write_maps(pid: i32, uid: u32, gid: u32) -> Result<(), Error> {
    let write = |file: &'static str, text: String| {
        std::fs::write(format!("/proc/{pid}/{file}"), text)
            .map_err(|source| Error::Map { file, source })
    };
    if uid == 0 {
        write("uid_map", "0 0 4294967295".into())?;
        write("gid_map", "0 0 4294967295".into())
    } else {
        write("setgroups", "deny".into())?;
        write("uid_map", format!("{uid} {uid} 1"))?;
        write("gid_map", format!("{gid} {gid} 1"))
    }
}

/// The parent's life after the split: hands signals on to the Sentry
/// (`pid`), reaps children, and exits as the Sentry did. It holds its end
/// of the channel to the Sentry until then (see `split`).
fn monitor(pid: i32, _channel: std::os::unix::net::UnixStream, terminal: Option<Tty>) -> ! {
    let me = std::process::id() as i32;
    let tty = |raw: bool| {
        if let Some(t) = &terminal {
            let _ = sys::set_termios(sys::stdin(), if raw { &t.raw } else { &t.saved });
        }
    };
    let exit = |code: i32| -> ! {
        tty(false);
        sys::exit_now(code)
    };
    // Only signalling the Sentry is left to do: CAP_KILL, because the
    // Sentry is another host user.
    let _ = sentry::drop_capabilities(&[CAP_KILL]);
    let _ = sys::no_new_privs();
    let mut waited: Vec<i32> = sentry::hostsig::FORWARDED.to_vec();
    waited.push(libc::SIGCHLD);
    waited.extend(JOB_CONTROL);
    waited.push(libc::SIGCONT);
    // Blocked here only: the Sentry keeps its own dispositions of these.
    let _ = sys::mask_signals(
        &[
            JOB_CONTROL[0],
            JOB_CONTROL[1],
            JOB_CONTROL[2],
            libc::SIGCONT,
        ],
        true,
    );
    // The forwarded signals are blocked by the caller (block_forwarded);
    // if not, a default action may end this process, and the pdeath
    // signal then ends the Sentry: still no orphan.
    if let Err(e) = monitor_policy(pid, me, terminal.is_some()).install() {
        eprintln!("ferrovisor: installing the monitor's seccomp filter: {e}");
        let _ = sys::kill(pid, libc::SIGKILL);
        exit(125);
    }
    loop {
        let (sig, _) = match sys::wait_signal(&waited) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("ferrovisor: waiting for the Sentry: {e}");
                let _ = sys::kill(pid, libc::SIGKILL);
                exit(125);
            }
        };
        if sig == libc::SIGCHLD {
            while let Some((child, ended)) = sys::reap_any() {
                if child == pid {
                    exit(exit_code(ended));
                }
            }
            continue;
        }
        if JOB_CONTROL.contains(&sig) {
            // The terminal's ^Z (or a background read or write): the
            // Sentry is its PID namespace's init, which only a stop from
            // outside the namespace reaches. It stops with this process,
            // as the program run natively would.
            let _ = sys::kill(pid, libc::SIGSTOP);
            tty(false);
            let _ = sys::kill(me, libc::SIGSTOP);
            continue;
        }
        if sig == libc::SIGCONT {
            // `fg`/`bg`, or `kill -CONT` of this pid.
            tty(true);
            let _ = sys::kill(pid, libc::SIGCONT);
            continue;
        }
        // The Sentry takes these from here only, the terminal's too (see
        // the module's documentation).
        let _ = sys::queue_signal(pid, sentry::hostsig::FROM_MONITOR, sig);
    }
}

/// The monitor's seccomp allow-list, for the Sentry `sentry_pid` and the
/// monitor's own pid `me`: what its loop calls, found with a filter that
/// logged instead of refusing across the signal and job-control tests
/// (Rust's exit would unmap the main thread's signal stack as well: the
/// monitor ends with `_exit`), and nothing else. Anything more kills the
/// monitor, and with it (its parent-death signal) the Sentry.
pub fn monitor_policy(sentry_pid: i32, me: i32, terminal: bool) -> Policy {
    let int = |arg: u8, value: i32| ArgCheck::int_eq(arg, u64::from(value as u32));
    let allow = Rule::allow_when;
    let mut rules = vec![
        // waiting for signals, and reaping children (any: the gofers too)
        allow(libc::SYS_rt_sigtimedwait, vec![]),
        allow(libc::SYS_wait4, vec![int(0, -1), int(2, libc::WNOHANG)]),
        // passing signals on, to the Sentry alone
        allow(
            libc::SYS_rt_sigqueueinfo,
            vec![int(0, sentry_pid), int(1, sentry::hostsig::FROM_MONITOR)],
        ),
        // the one-line reports of an end, on standard error
        allow(libc::SYS_write, vec![int(0, 2)]),
        allow(libc::SYS_exit_group, vec![]),
        // a wait the host stopped and continued (^Z, `fg`)
        allow(libc::SYS_restart_syscall, vec![]),
        allow(libc::SYS_rt_sigreturn, vec![]),
    ];
    // Job control stops the Sentry and then this process, continues the
    // Sentry, and a failure kills it.
    for sig in [libc::SIGSTOP, libc::SIGCONT, libc::SIGKILL] {
        rules.push(allow(libc::SYS_kill, vec![int(0, sentry_pid), int(1, sig)]));
    }
    rules.push(allow(
        libc::SYS_kill,
        vec![int(0, me), int(1, libc::SIGSTOP)],
    ));
    if terminal {
        // Putting the caller's terminal back (tcsetattr on descriptor 0,
        // which reads the settings back to check them).
        for cmd in [libc::TCSETS, libc::TCGETS] {
            rules.push(allow(libc::SYS_ioctl, vec![int(0, 0), int(1, cmd as i32)]));
        }
    }
    Policy {
        rules,
        default: Action::KillProcess,
    }
}

/// The stop signals of job control, which stop both processes.
const JOB_CONTROL: [i32; 3] = [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU];

/// `CAP_KILL` (linux/capability.h).
const CAP_KILL: u32 = 5;

/// The status to exit with for the Sentry's end.
fn exit_code(ended: sys::Ended) -> i32 {
    match ended {
        sys::Ended::Exited(code) => code,
        sys::Ended::Signaled(sig) => {
            if sig != libc::SIGKILL {
                // SIGKILL is an engine's or the OOM killer's; anything else
                // is the Sentry failing.
                eprintln!("ferrovisor: the Sentry was killed by signal {sig}");
            }
            128 + sig
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALLOW: u32 = 0x7fff_0000;
    const KILL: u32 = 0x8000_0000;

    fn decide(nr: i64, args: [u64; 6]) -> u32 {
        monitor_policy(100, 7, false)
            .decide(nr, args)
            .expect("compile")
    }

    #[test]
    fn the_monitor_signals_only_the_sentry_and_stops_only_itself() {
        let sig = |s: i32| s as u64;
        for s in [libc::SIGSTOP, libc::SIGCONT, libc::SIGKILL] {
            assert_eq!(decide(libc::SYS_kill, [100, sig(s), 0, 0, 0, 0]), ALLOW);
        }
        assert_eq!(
            decide(libc::SYS_kill, [7, sig(libc::SIGSTOP), 0, 0, 0, 0]),
            ALLOW
        );
        // Not a gofer, a process group, every process, or another signal.
        assert_eq!(
            decide(libc::SYS_kill, [101, sig(libc::SIGKILL), 0, 0, 0, 0]),
            KILL
        );
        assert_eq!(
            decide(libc::SYS_kill, [(-100i64) as u64, 9, 0, 0, 0, 0]),
            KILL
        );
        assert_eq!(
            decide(libc::SYS_kill, [(-1i64) as u64, 9, 0, 0, 0, 0]),
            KILL
        );
        assert_eq!(
            decide(libc::SYS_kill, [100, sig(libc::SIGTERM), 0, 0, 0, 0]),
            KILL
        );
        assert_eq!(
            decide(libc::SYS_kill, [7, sig(libc::SIGKILL), 0, 0, 0, 0]),
            KILL
        );
        let fwd = sentry::hostsig::FROM_MONITOR as u64;
        assert_eq!(
            decide(libc::SYS_rt_sigqueueinfo, [100, fwd, 0, 0, 0, 0]),
            ALLOW
        );
        assert_eq!(
            decide(libc::SYS_rt_sigqueueinfo, [101, fwd, 0, 0, 0, 0]),
            KILL
        );
        assert_eq!(
            decide(libc::SYS_rt_sigqueueinfo, [100, 2, 0, 0, 0, 0]),
            KILL
        );
    }

    #[test]
    fn the_monitor_waits_reaps_and_reports_and_does_nothing_else() {
        let wnohang = libc::WNOHANG as u64;
        let any = u64::from(u32::MAX);
        assert_eq!(decide(libc::SYS_rt_sigtimedwait, [0; 6]), ALLOW);
        assert_eq!(decide(libc::SYS_wait4, [any, 0, wnohang, 0, 0, 0]), ALLOW);
        assert_eq!(decide(libc::SYS_wait4, [any, 0, 0, 0, 0, 0]), KILL);
        assert_eq!(decide(libc::SYS_write, [2, 0, 10, 0, 0, 0]), ALLOW);
        assert_eq!(decide(libc::SYS_write, [1, 0, 10, 0, 0, 0]), KILL);
        assert_eq!(decide(libc::SYS_exit_group, [0; 6]), ALLOW);
        for nr in [
            libc::SYS_openat,
            libc::SYS_read,
            libc::SYS_execve,
            libc::SYS_ptrace,
            libc::SYS_clone,
            libc::SYS_socket,
            libc::SYS_mmap,
            libc::SYS_tgkill,
            libc::SYS_pidfd_send_signal,
            libc::SYS_setuid,
        ] {
            assert_eq!(decide(nr, [0; 6]), KILL, "syscall {nr}");
        }
    }
}
