//! Signal-driven I/O (fcntl(2) `F_SETOWN`, `F_SETOWN_EX`, `F_SETSIG`,
//! `O_ASYNC`/`FIOASYNC`): an object that becomes readable or writable,
//! hangs up or fails signals the owner of every description that asked for
//! it (Linux's `fasync_helper()` / `kill_fasync()` / `send_sigio()`).
//!
//! A list keeps a weak reference to the kernel its descriptions were
//! registered in, so that objects changed outside any system call (a
//! socket's last close, a packet the netstack received, an inotify event
//! raised by a file's release) can signal too.

use std::sync::{Arc, Mutex, Weak};

use abi::signal::SIGIO;
use abi::{Errno, SigInfo};
use zerocopy::FromZeros;

use crate::kernel::Kernel;
use crate::vfs::file::FileDescription;

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
#[derive(Debug, Default)]
pub struct Fasync {
    entries: Mutex<Vec<(i32, Weak<FileDescription>)>>,
    /// the kernel whose tasks own the entries (one per sandbox)
    kernel: Mutex<Weak<Kernel>>,
}

impl Fasync {
    /// Adds or removes `file` (`fasync_helper()`): a description already
    /// present takes the new descriptor number.
    pub fn set(
        &self,
        kernel: &Weak<Kernel>,
        fd: i32,
        file: &Arc<FileDescription>,
        on: bool,
    ) -> Result<(), Errno> {
        if on {
            *self.kernel.lock().unwrap_or_else(|e| e.into_inner()) = kernel.clone();
        }
        let mut e = self.entries.lock().unwrap_or_else(|e| e.into_inner());
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
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// Signals the owner of every registered description (`kill_fasync()`).
    pub fn kill(&self, reason: Reason) {
        let Some(kernel) = self
            .kernel
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .upgrade()
        else {
            return;
        };
        let targets: Vec<(i32, Owner)> = {
            let e = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            if e.is_empty() {
                return;
            }
            e.iter()
                .filter_map(|(fd, w)| w.upgrade().map(|f| (*fd, f.owner())))
                .collect()
        };
        for (fd, owner) in targets {
            send_sigio(&kernel, owner, fd, reason);
        }
    }
}

/// `send_sigio()`: with no `F_SETSIG` signal, a plain `SIGIO` as from the
/// kernel; with one, that signal carrying `si_code` = the reason, `si_band`
/// and `si_fd` (`SI_SIGIO` replaces the code for signals whose codes mean
/// something else).
fn send_sigio(kernel: &Kernel, owner: Owner, fd: i32, reason: Reason) {
    if owner.id == 0 {
        return;
    }
    let (sig, info) = if owner.signum == 0 {
        (
            SIGIO,
            crate::kernel::task::user_info(SIGIO, 0, 0, crate::kernel::task::si::KERNEL),
        )
    } else {
        let sig = owner.signum;
        let mut i = SigInfo::new_zeroed();
        i.signo = sig;
        // SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV, SIGCHLD, SIGSYS have
        // codes of their own (sig_specific_sicodes()); SIGPOLL's are these.
        i.code = if matches!(sig, 4 | 5 | 7 | 8 | 11 | 17 | 31) {
            -5 // SI_SIGIO
        } else {
            reason.code()
        };
        i.fields[0] = reason.band();
        i.fields[1] = u64::from(fd as u32);
        (sig, i)
    };
    match owner.kind {
        OwnerKind::Tid => {
            let t = kernel.procs().threads.get(&owner.id).cloned();
            if let Some(t) = t {
                t.send_signal(kernel, sig, info);
            }
        }
        OwnerKind::Pid => {
            if let Some(p) = kernel.process(owner.id) {
                p.send_signal(kernel, sig, info);
            }
        }
        OwnerKind::Pgrp => {
            let members: Vec<_> = kernel
                .procs()
                .map
                .values()
                .filter(|p| {
                    let st = p.state();
                    st.exit.is_none() && st.pgid == owner.id
                })
                .cloned()
                .collect();
            for p in members {
                p.send_signal(kernel, sig, info);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::file::FileKind;

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
        list.set(&Weak::new(), 3, &a, true).expect("add");
        // The same description through another descriptor: renumbered.
        list.set(&Weak::new(), 5, &a, true).expect("renumber");
        assert_eq!(entries(&list), vec![5]);
        list.set(&Weak::new(), 4, &b, true).expect("add");
        drop(b);
        list.set(&Weak::new(), 5, &a, false).expect("remove");
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
        list.set(&Weak::new(), 3, &a, true).expect("add");
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
