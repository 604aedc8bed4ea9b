//! Signals sent to the Sentry's own host process (by `ferrovisor kill`, a
//! container engine stopping the container, or the terminal's ^C) go to
//! the guest's first process, as if sent with `kill(2)` from outside the
//! sandbox (`si_code` `SI_USER`, sender pid 0), instead of ending the
//! Sentry under the guest's feet.
//! Under `do --save`, `SIGUSR2` saves the sandbox instead.
//!
//! The guest's first process is the init of the sandbox's PID namespace,
//! which gets only the signals it has a handler for. For a container that
//! is the contract (runc's `kill TERM` leaves a shell without a trap
//! running); for `ferrovisor do`, which stands for the program at the
//! user's terminal, see [`HostSignals::Terminate`].
//!
//! The caller blocks them ([`block_forwarded`]) before it starts any
//! thread, so that every thread of the process inherits the mask and a
//! process-directed signal stays pending until the forwarder takes it.
//!
//! A Sentry whose host parent passes signals on to it ([`from_monitor`],
//! the `runsc-shim` crate's `confine`) ignores the forwarded signals
//! themselves and takes them from that parent alone, as [`FROM_MONITOR`]
//! with the signal's number as its value: a signal sent to the process
//! group (a `kill -INT -PGID`, the terminal's ^C) reaches the parent too,
//! and the guest must see it once. (Taking the direct copy and dropping
//! the parent's would not do: two copies of a standard signal pending at
//! once are one, and which one stays is a race.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Weak;

use crate::host::sig;
use crate::kernel::Kernel;

/// What a forwarded host signal means to the guest's first process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HostSignals {
    /// `kill(2)` from outside the sandbox's PID namespace: init's handler
    /// runs if it has one, else the signal is dropped (the OCI runtime).
    #[default]
    FromOutside,
    /// As [`HostSignals::FromOutside`], except that a signal whose default
    /// action would end the program, and that init would drop only for
    /// being init, ends the sandbox with that signal (`ferrovisor do`:
    /// ^C or `kill` of the command must stop it, as they would stop the
    /// program run natively).
    Terminate,
}

/// The signals forwarded: the ones people and engines send to stop,
/// reload or poke a program.
pub const FORWARDED: [i32; 7] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGWINCH,
];

/// Blocks the forwarded signals in the calling thread (and so in every
/// thread it starts afterwards).
pub fn block_forwarded() -> std::io::Result<()> {
    sig::block(&FORWARDED)
}

/// Waits for one of the forwarded signals (blocked by
/// [`block_forwarded`]) and returns it; `None` if waiting fails.
pub fn wait_forwarded() -> Option<i32> {
    sig::wait(&FORWARDED).map(|(sig, _)| sig)
}

/// The real-time signal that carries a forwarded signal from the monitor
/// (`SIGRTMAX`, which neither glibc nor the Sentry uses otherwise).
/// Real-time signals queue, one per send.
pub const FROM_MONITOR: i32 = 64;

/// Set by [`from_monitor`].
static MONITORED: AtomicBool = AtomicBool::new(false);

/// Says that this process's host parent passes the forwarded signals on as
/// [`FROM_MONITOR`] (see the module's documentation): ignores them, and
/// blocks that one for the forwarder to wait for. Call it before any
/// thread starts.
pub fn from_monitor() -> std::io::Result<()> {
    for s in FORWARDED {
        sig::ignore(s)?;
    }
    sig::block(&[FROM_MONITOR])?;
    // Pending copies from before (they were blocked) are discarded once
    // ignored and unblocked.
    sig::unblock(&FORWARDED)?;
    MONITORED.store(true, Ordering::Relaxed);
    Ok(())
}

/// Waits for the monitor's next forwarded signal; `None` if waiting fails.
fn wait_from_monitor() -> Option<i32> {
    loop {
        let (_, value) = sig::wait(&[FROM_MONITOR])?;
        let s = value as i32;
        if FORWARDED.contains(&s) {
            return Some(s);
        }
    }
}

/// Starts the thread that hands the forwarded signals to the guest, if the
/// caller blocked them (else they keep their host meaning).
pub(crate) fn start_forwarder(kernel: Weak<Kernel>, mode: HostSignals) {
    let monitored = MONITORED.load(Ordering::Relaxed);
    let waited: &[i32] = if monitored {
        &[FROM_MONITOR]
    } else {
        &FORWARDED
    };
    if !sig::all_blocked(waited) {
        return;
    }
    let next = move || {
        if monitored {
            wait_from_monitor()
        } else {
            wait_forwarded()
        }
    };
    let spawned = std::thread::Builder::new()
        .name("ferrovisor-signals".into())
        .spawn(move || {
            while let Some(sig) = next() {
                let Some(k) = kernel.upgrade() else { return };
                // A terminal of the sandbox's own follows the host's size;
                // its foreground group gets SIGWINCH from it.
                if let (libc::SIGWINCH, Some(resize)) = (sig, k.on_winch.get()) {
                    resize();
                    continue;
                }
                // `do --save`: SIGUSR2 to the runtime saves the sandbox.
                if sig == libc::SIGUSR2 && k.checkpoint.target.is_some() {
                    tracing::info!("SIGUSR2: saving the sandbox");
                    k.ask_checkpoint();
                    continue;
                }
                let init = k.procs().map.get(&1).cloned();
                match init {
                    Some(p) if mode == HostSignals::Terminate && ends_unhandled(&p, sig) => {
                        tracing::info!(sig, "host signal ends the sandbox (no guest handler)");
                        p.group_exit(&k, crate::kernel::task::ExitStatus::Signal(sig));
                    }
                    Some(p) => {
                        tracing::info!(sig, "host signal forwarded to the guest's first process");
                        let info = crate::kernel::task::user_info(
                            sig,
                            0,
                            0,
                            crate::kernel::task::si::USER,
                        );
                        p.send_signal_from_outside(&k, sig, info);
                    }
                    None => tracing::info!(sig, "host signal dropped: the guest has ended"),
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the signal forwarder");
    }
}

/// Whether `sig` would end process `p` by its default action were `p` not
/// init: the disposition is the default, the default terminates, and no
/// thread blocks it (a blocked signal waits, as it would natively; init
/// then drops it at delivery).
fn ends_unhandled(p: &crate::kernel::task::Process, sig: i32) -> bool {
    let st = p.state();
    st.actions[sig as usize - 1].handler == abi::signal::SIG_DFL
        && !crate::kernel::task::ignored_by_default(sig)
        && !crate::kernel::task::is_stop(sig)
        && st
            .threads
            .iter()
            .any(|t| t.state().mask & (1u64 << (sig - 1)) == 0)
}
