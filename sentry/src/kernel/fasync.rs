//! Signal-driven I/O's delivery: the kernel as the [`SigioTarget`] of
//! `vfs::fasync`'s lists.

use abi::signal::SIGIO;
use abi::SigInfo;
use zerocopy::FromZeros;

use crate::vfs::fasync::{Owner, OwnerKind, Reason, SigioTarget};

use crate::kernel::Kernel;

impl SigioTarget for Kernel {
    fn send_sigio(&self, owner: Owner, fd: i32, reason: Reason) {
        send_sigio(self, owner, fd, reason);
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
