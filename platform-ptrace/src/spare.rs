//! A spare stub, made ahead of time: creating an address space (a stub
//! process forked from the Sentry, set up under ptrace) costs about half a
//! millisecond of host work, on the critical path of every guest `fork`.
//! Once a guest has made a second address space (it forks), a background
//! thread keeps one stub ready, so the next `fork` takes it at once while
//! the making of its successor overlaps with what the guest does next (a
//! fork's child usually runs `execve` for far longer than that).
//!
//! A spare is an unused stub process and its control thread: no guest code,
//! no guest memory, the same filter and namespaces as any stub. The thread
//! keeps at most one and makes it again only after one was taken.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use platform::Result;

use crate::address_space::{Prepared, ALLOWED_CPUS};
use crate::stub::StubImage;
use crate::sys;

/// The spare of one platform and the thread that makes it.
#[derive(Debug)]
pub(crate) struct Spares {
    shared: Arc<Shared>,
    memfd: OwnedFd,
    image: Arc<StubImage>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// The stub ready to be taken.
    ready: Option<Prepared>,
    /// A spare was taken (or first wanted): make one.
    wanted: bool,
    /// The platform is going away: discard the spare and end.
    stop: bool,
    /// Address spaces made so far (spares start with the second).
    made: u64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Spares {
    pub(crate) fn new(memfd: OwnedFd, image: Arc<StubImage>) -> Self {
        Spares {
            shared: Arc::default(),
            memfd,
            image,
            thread: Mutex::new(None),
        }
    }

    /// A stub for a new address space: the spare if one is ready, else one
    /// made now. From the second address space on, the spare thread makes
    /// the next spare meanwhile.
    pub(crate) fn take(&self) -> Result<Prepared> {
        let spare = {
            let mut st = self.shared.lock();
            st.made += 1;
            if st.made >= 2 && !st.stop {
                st.wanted = true;
            }
            st.ready.take()
        };
        if self.shared.lock().wanted {
            self.start_thread();
            self.shared.changed.notify_all();
        }
        match spare {
            Some(p) => Ok(p),
            None => Prepared::new(self.memfd.as_fd(), &self.image, false),
        }
    }

    /// The stub pid of the spare, if one is ready (for tests).
    pub(crate) fn ready_pid(&self) -> Option<i32> {
        self.shared.lock().ready.as_ref().map(Prepared::pid)
    }

    fn start_thread(&self) {
        let mut thread = self.thread.lock().unwrap_or_else(PoisonError::into_inner);
        if thread.is_some() {
            return;
        }
        let (shared, image) = (self.shared.clone(), self.image.clone());
        let memfd = match sys::dup_cloexec(self.memfd.as_fd()) {
            Ok(fd) => fd,
            Err(e) => {
                tracing::debug!(error = %e, "no spare stubs");
                return;
            }
        };
        let spawned = std::thread::Builder::new()
            .name("ptrace-stub-spare".into())
            .stack_size(256 << 10)
            .spawn(move || make_spares(&shared, memfd, &image));
        match spawned {
            Ok(t) => *thread = Some(t),
            Err(e) => tracing::debug!(error = %e, "no spare stubs"),
        }
    }
}

/// The spare thread: makes a spare whenever one is wanted, until stopped.
fn make_spares(shared: &Shared, memfd: OwnedFd, image: &Arc<StubImage>) {
    // It may have been started by a pinned thread: a spare is made on
    // whichever CPU is free (its control thread inherits this mask, and
    // pins itself for each request that names a CPU).
    if let Some(cpus) = ALLOWED_CPUS.get().filter(|c| !c.is_empty()) {
        let _ = sys::set_affinity_to(0, cpus);
    }
    let mut st = shared.lock();
    loop {
        while !st.wanted && !st.stop {
            st = shared
                .changed
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if st.stop {
            break;
        }
        st.wanted = false;
        drop(st);
        let made = Prepared::new(memfd.as_fd(), image, true);
        st = shared.lock();
        match made {
            // Taken meanwhile by nobody (`wanted` is only set by a take):
            // keep it, unless the platform is going.
            Ok(p) if !st.stop && st.ready.is_none() => st.ready = Some(p),
            Ok(p) => {
                drop(st);
                p.discard();
                st = shared.lock();
            }
            // A host out of processes, say: the next take makes its own
            // and reports the error to the guest.
            Err(e) => tracing::debug!(error = %e, "cannot make a spare stub"),
        }
    }
    let spare = st.ready.take();
    drop(st);
    if let Some(p) = spare {
        p.discard();
    }
}

impl Drop for Spares {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.changed.notify_all();
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = thread {
            if t.join().is_err() {
                tracing::warn!("spare stub thread panicked");
            }
        }
    }
}
