//! The Sentry's own host signals: masks, dispositions and waits, for the
//! forwarding of host signals to the guest (`crate::kernel::hostsig`).

use std::io;

/// The set of `sigs`.
fn set_of(sigs: &[i32]) -> libc::sigset_t {
    // SAFETY: all-zero bytes are a valid `sigset_t`, which `sigemptyset`
    // then initialises.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable `sigset_t`; a bad signal number is
    // refused with `EINVAL`, leaving the set as it was.
    unsafe {
        libc::sigemptyset(&mut set);
        for &s in sigs {
            libc::sigaddset(&mut set, s);
        }
    }
    set
}

fn mask(how: i32, sigs: &[i32]) -> io::Result<()> {
    let set = set_of(sigs);
    // SAFETY: `set` is a valid `sigset_t`; a null old set is allowed (the
    // old mask is not wanted).
    let r = unsafe { libc::pthread_sigmask(how, &set, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// Blocks `sigs` in the calling thread (and so in every thread it starts
/// afterwards).
pub fn block(sigs: &[i32]) -> io::Result<()> {
    mask(libc::SIG_BLOCK, sigs)
}

/// Unblocks `sigs` in the calling thread.
pub fn unblock(sigs: &[i32]) -> io::Result<()> {
    mask(libc::SIG_UNBLOCK, sigs)
}

/// Sets `sig`'s disposition to `SIG_IGN`.
pub fn ignore(sig: i32) -> io::Result<()> {
    // SAFETY: `SIG_IGN` runs no code of ours, so no handler's constraints
    // apply.
    if unsafe { libc::signal(sig, libc::SIG_IGN) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the calling thread blocks every one of `sigs`.
pub fn all_blocked(sigs: &[i32]) -> bool {
    // SAFETY: all-zero bytes are a valid `sigset_t`, filled in below.
    let mut cur: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: a null new set only reads the mask, into `cur`, a valid
    // writable `sigset_t`.
    if unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut cur) } != 0 {
        return false;
    }
    sigs.iter()
        // SAFETY: `cur` is a valid `sigset_t`, which `sigismember` only
        // reads.
        .all(|&s| unsafe { libc::sigismember(&cur, s) } == 1)
}

/// Waits for one of `sigs` (blocked) and returns its number and the value
/// queued with it (`si_value`, meaningful for a signal sent with
/// `sigqueue`); `None` if waiting fails.
pub fn wait(sigs: &[i32]) -> Option<(i32, usize)> {
    let set = set_of(sigs);
    // SAFETY: all-zero bytes are a valid `siginfo_t`, which `sigwaitinfo`
    // fills in.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `set` is a valid `sigset_t` and `info` a valid, writable
        // `siginfo_t`.
        let sig = unsafe { libc::sigwaitinfo(&set, &mut info) };
        if sig > 0 {
            // SAFETY: `si_value` reads a union of the plain data the kernel
            // wrote; any bytes are a valid `sigval` (an integer or a pointer
            // that is never dereferenced).
            let value = unsafe { info.si_value().sival_ptr } as usize;
            return Some((sig, value));
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_signal_reads_as_blocked() {
        // Tests run on threads of their own: this changes only this one's
        // mask.
        assert!(!all_blocked(&[libc::SIGUSR2]));
        block(&[libc::SIGUSR2]).expect("block");
        assert!(all_blocked(&[libc::SIGUSR2]));
        assert!(!all_blocked(&[libc::SIGUSR2, libc::SIGWINCH]));
        unblock(&[libc::SIGUSR2]).expect("unblock");
        assert!(!all_blocked(&[libc::SIGUSR2]));
    }
}
