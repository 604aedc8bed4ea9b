//! Signal-driven I/O (fcntl(2) `F_SETOWN`, `F_SETOWN_EX`, `F_SETSIG`,
//! `O_ASYNC`/`FIOASYNC`): an object that becomes readable or writable,
//! hangs up or fails signals the owner of every description that asked for
//! it (Linux's `fasync_helper()` / `kill_fasync()` / `send_sigio()`).
//!
//! A list keeps a weak reference to the kernel its descriptions were
//! registered in (as a [`SigioTarget`]), so that objects changed outside
//! any system call (a socket's last close, a packet the netstack received,
//! an inotify event raised by a file's release) can signal too.

use std::sync::{Arc, Mutex, Weak};

use abi::Errno;

use crate::sync::Locked;
use crate::vfs::file::FileDescription;

/// What delivers I/O signals to a description's owner (`send_sigio()`):
/// the kernel, which knows the threads and groups.
pub trait SigioTarget: Send + Sync {
    /// Signals `owner` that descriptor `fd` is ready for `reason`.
    fn send_sigio(&self, owner: Owner, fd: i32, reason: Reason);
}

/// `F_OWNER_TID`, `F_OWNER_PID`, `F_OWNER_PGRP` of `struct f_owner_ex`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OwnerKind {
    /// one thread (`F_OWNER_TID`; also the type of a description with no
    /// owner, as Linux reports it)
    #[default]
    Tid,
    /// a thread group (`F_OWNER_PID`)
    Pid,
    /// a process group (`F_OWNER_PGRP`)
    Pgrp,
}

impl OwnerKind {
    /// The `f_owner_ex.type` value.
    pub fn ex_type(self) -> i32 {
        match self {
            OwnerKind::Tid => 0,
            OwnerKind::Pid => 1,
            OwnerKind::Pgrp => 2,
        }
    }

    /// From an `f_owner_ex.type` value.
    pub fn from_ex_type(t: i32) -> Option<Self> {
        Some(match t {
            0 => OwnerKind::Tid,
            1 => OwnerKind::Pid,
            2 => OwnerKind::Pgrp,
            _ => return None,
        })
    }
}

/// A description's `struct fown_struct`: who gets its I/O signals, and
/// which signal (0: plain `SIGIO`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Owner {
    /// what `id` names
    pub kind: OwnerKind,
    /// the thread, process or group (0: no owner)
    pub id: i32,
    /// `F_SETSIG`
    pub signum: i32,
}

/// Why a description is signalled (`si_code` of `SIGPOLL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// `POLL_IN`: data to read
    In,
    /// `POLL_OUT`: room to write (again), or a connection made
    Out,
    /// `POLL_ERR`: an error is pending (`sk_error_report()`)
    Err,
    /// `POLL_HUP`: the peer hung up in both directions
    Hup,
}

impl Reason {
    /// `si_code`: `POLL_IN` 1, `POLL_OUT` 2, `POLL_ERR` 4, `POLL_HUP` 6.
    pub fn code(self) -> i32 {
        match self {
            Reason::In => 1,
            Reason::Out => 2,
            Reason::Err => 4,
            Reason::Hup => 6,
        }
    }

    /// `si_band`: the poll bits of the reason (Linux's `band_table`).
    pub fn band(self) -> u64 {
        match self {
            // POLLIN | POLLRDNORM
            Reason::In => 0x41,
            // POLLOUT | POLLWRNORM | POLLWRBAND
            Reason::Out => 0x304,
            // POLLERR
            Reason::Err => 0x8,
            // POLLHUP | POLLERR
            Reason::Hup => 0x18,
        }
    }
}

/// Most descriptions one object signals: one entry per description, so a
/// guest bounded by its descriptor limit cannot grow it further; dead
/// entries are dropped as new ones come.
const MAX_ENTRIES: usize = 4096;

/// The descriptions of one object (a pipe's readers, a terminal end) that
/// have `O_ASYNC` set, with the descriptor number each was set through
/// (reported as `si_fd`).
#[derive(Default)]
pub struct Fasync {
    entries: Mutex<Vec<(i32, Weak<FileDescription>)>>,
    /// the kernel whose tasks own the entries (one per sandbox)
    kernel: Mutex<Option<Weak<dyn SigioTarget>>>,
}

impl std::fmt::Debug for Fasync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fasync")
            .field("entries", &self.entries)
            .finish_non_exhaustive()
    }
}

impl Fasync {
    /// Adds or removes `file` (`fasync_helper()`): a description already
    /// present takes the new descriptor number.
    pub fn set(
        &self,
        kernel: Weak<dyn SigioTarget>,
        fd: i32,
        file: &Arc<FileDescription>,
        on: bool,
    ) -> Result<(), Errno> {
        if on {
            *self.kernel.locked() = Some(kernel);
        }
        let mut e = self.entries.locked();
        e.retain(|(_, w)| w.strong_count() > 0);
        let pos = e
            .iter()
            .position(|(_, w)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(file)));
        match (pos, on) {
            (Some(i), true) => e[i].0 = fd,
            (Some(i), false) => {
                e.swap_remove(i);
            }
            (None, true) => {
                if e.len() >= MAX_ENTRIES {
                    return Err(Errno::ENOMEM);
                }
                e.push((fd, Arc::downgrade(file)));
            }
            (None, false) => {}
        }
        Ok(())
    }

    /// Whether no description waits for signals (the common case: skip).
    pub fn is_empty(&self) -> bool {
        self.entries.locked().is_empty()
    }

    /// Signals the owner of every registered description (`kill_fasync()`).
    pub fn kill(&self, reason: Reason) {
        let Some(kernel) = self.kernel.locked().as_ref().and_then(Weak::upgrade) else {
            return;
        };
        let targets: Vec<(i32, Owner)> = {
            let e = self.entries.locked();
            if e.is_empty() {
                return;
            }
            e.iter()
                .filter_map(|(fd, w)| w.upgrade().map(|f| (*fd, f.owner())))
                .collect()
        };
        for (fd, owner) in targets {
            kernel.send_sigio(owner, fd, reason);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::file::FileKind;

    /// A kernel that is gone.
    struct Gone;

    impl SigioTarget for Gone {
        fn send_sigio(&self, _: Owner, _: i32, _: Reason) {}
    }

    fn gone() -> Weak<dyn SigioTarget> {
        Weak::<Gone>::new()
    }

    fn entries(f: &Fasync) -> Vec<i32> {
        f.entries
            .lock()
            .expect("lock")
            .iter()
            .map(|(fd, _)| *fd)
            .collect()
    }

    #[test]
    fn one_entry_per_description_and_dead_ones_go() {
        let list = Fasync::default();
        let a = FileDescription::new(FileKind::SynthDir, None, 0);
        let b = FileDescription::new(FileKind::SynthDir, None, 0);
        list.set(gone(), 3, &a, true).expect("add");
        // The same description through another descriptor: renumbered.
        list.set(gone(), 5, &a, true).expect("renumber");
        assert_eq!(entries(&list), vec![5]);
        list.set(gone(), 4, &b, true).expect("add");
        drop(b);
        list.set(gone(), 5, &a, false).expect("remove");
        // b's entry went with b.
        assert!(list.is_empty());
    }

    #[test]
    fn codes_and_bands_are_linuxs() {
        // si_code POLL_*, si_band from band_table.
        let got: Vec<(i32, u64)> = [Reason::In, Reason::Out, Reason::Err, Reason::Hup]
            .iter()
            .map(|r| (r.code(), r.band()))
            .collect();
        assert_eq!(got, vec![(1, 0x41), (2, 0x304), (4, 0x8), (6, 0x18)]);
    }

    #[test]
    fn no_kernel_no_signal() {
        // A list nobody registered in (or whose sandbox is gone) signals
        // no one and does not fail.
        let list = Fasync::default();
        let a = FileDescription::new(FileKind::SynthDir, None, 0);
        list.set(gone(), 3, &a, true).expect("add");
        list.kill(Reason::Hup);
        assert!(!list.is_empty());
    }

    #[test]
    fn owner_kinds_round_trip() {
        for k in [OwnerKind::Tid, OwnerKind::Pid, OwnerKind::Pgrp] {
            assert_eq!(OwnerKind::from_ex_type(k.ex_type()), Some(k));
        }
        assert_eq!(OwnerKind::from_ex_type(3), None);
    }
}
