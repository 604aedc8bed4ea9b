//! Wait queues: each object a thread can block on has a [`WaitQueue`], and
//! each thread a [`Waiter`] it sleeps on, in the spirit of Linux's
//! `wait_queue_head` and `wait_queue_entry`. A blocked thread is woken only
//! by the objects it waits for and by what is sent to it (signals).
//!
//! The protocol, which cannot lose a wake-up: the sleeper registers its
//! waiter on every queue it waits on ([`Registration`]), then, each time
//! round, calls [`Waiter::prepare`], checks its condition, and only then
//! [`Waiter::sleep`]s; whoever changes an object's state does so first and
//! then calls [`WaitQueue::notify`]. A notification that comes after the
//! check finds the waiter registered and makes the sleep return at once;
//! one that came before it left the state the check saw.
//!
//! This is a leaf of the kernel: it knows no task, file or object, so the
//! VFS may use it.

use crate::sync::Locked;
use std::sync::atomic::{fence, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// One thread's place to sleep. A guest thread has one for its whole life;
/// a host thread of the Sentry that waits for guest state makes its own.
#[derive(Debug, Default)]
pub struct Waiter {
    state: Mutex<WaiterState>,
    cv: Condvar,
}

#[derive(Debug, Default)]
struct WaiterState {
    /// woken since the last [`Waiter::prepare`]
    woken: bool,
    /// in [`Waiter::sleep`]: only then does a wake need the condition
    /// variable (and its system call)
    sleeping: bool,
    /// called before the first real sleep (see [`Waiter::on_first_sleep`])
    on_sleep: Option<OnSleep>,
}

/// A call made once, the first time a waiter sleeps.
struct OnSleep(Box<dyn FnOnce() + Send>);

impl std::fmt::Debug for OnSleep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnSleep")
    }
}

impl Waiter {
    /// A new waiter, not woken.
    pub fn new() -> Arc<Waiter> {
        Arc::new(Waiter::default())
    }

    /// Forgets earlier wake-ups; the caller checks its condition next.
    pub fn prepare(&self) {
        self.state.locked().woken = false;
    }

    /// Makes the current or next [`Waiter::sleep`] return.
    pub fn wake(&self) {
        let mut s = self.state.locked();
        s.woken = true;
        let sleeping = s.sleeping;
        drop(s);
        if sleeping {
            self.cv.notify_one();
        }
    }

    /// Calls `f` (on the sleeping thread, before it sleeps) the first time
    /// this waiter really sleeps: the sandbox's runtime learns that the
    /// first process is done starting and waits for something.
    pub fn on_first_sleep(&self, f: Box<dyn FnOnce() + Send>) {
        self.state.locked().on_sleep = Some(OnSleep(f));
    }

    /// Sleeps until woken (since the last [`Waiter::prepare`]) or until
    /// `deadline`; whether it was woken.
    pub fn sleep(&self, deadline: Option<Instant>) -> bool {
        let mut s = self.state.locked();
        if !s.woken {
            if let Some(OnSleep(f)) = s.on_sleep.take() {
                drop(s);
                f();
                s = self.state.locked();
            }
        }
        while !s.woken {
            s.sleeping = true;
            s = match deadline {
                None => self.cv.wait(s).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        break;
                    }
                    self.cv
                        .wait_timeout(s, d - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
        s.sleeping = false;
        s.woken
    }
}

/// The queue of one object's waiters. A handle: clones name the same
/// queue, so a wait may hold it without keeping its object alive (an
/// `epoll_wait` must not delay the last close of what it watches).
#[derive(Clone, Default)]
pub struct WaitQueue(Arc<QueueInner>);

#[derive(Default)]
struct QueueInner {
    waiters: Mutex<Vec<Arc<Waiter>>>,
    /// `waiters.len()`, read without the lock by [`WaitQueue::notify`]
    len: AtomicUsize,
}

impl std::fmt::Debug for WaitQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "WaitQueue({} waiting)",
            self.0.len.load(Ordering::Relaxed)
        )
    }
}

impl WaitQueue {
    /// A queue nobody waits on yet.
    pub fn new() -> WaitQueue {
        WaitQueue::default()
    }

    /// Wakes every waiter registered now. Call after the state change,
    /// with the object's own locks released.
    pub fn notify(&self) {
        // Pairs with the fence in `add`: either this load sees the waiter
        // registered, or the waiter's check after registering sees the
        // state this thread changed before calling (even through relaxed
        // atomics). An empty queue costs no lock, which keeps the many
        // notifications nobody waits for (each pipe read and write) cheap.
        fence(Ordering::SeqCst);
        if self.0.len.load(Ordering::Relaxed) == 0 {
            return;
        }
        for w in self.0.waiters.locked().iter() {
            w.wake();
        }
    }

    /// Whether anyone waits here now.
    pub fn is_empty(&self) -> bool {
        self.0.len.load(Ordering::Relaxed) == 0
    }

    /// Whether `a` and `b` are the same queue.
    pub fn same(a: &WaitQueue, b: &WaitQueue) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    fn add(&self, w: &Arc<Waiter>) {
        let mut l = self.0.waiters.locked();
        l.push(w.clone());
        self.0.len.store(l.len(), Ordering::Relaxed);
        drop(l);
        fence(Ordering::SeqCst);
    }

    fn remove(&self, w: &Arc<Waiter>) {
        let mut l = self.0.waiters.locked();
        if let Some(i) = l.iter().position(|x| Arc::ptr_eq(x, w)) {
            l.swap_remove(i);
        }
        self.0.len.store(l.len(), Ordering::Relaxed);
    }
}

/// A waiter registered on some queues, until dropped.
#[derive(Debug)]
pub struct Registration<'a> {
    waiter: &'a Arc<Waiter>,
    queues: &'a [WaitQueue],
}

impl<'a> Registration<'a> {
    /// Registers `waiter` on every queue of `queues` (a queue named twice
    /// counts once for waking: a wake is a flag).
    pub fn new(waiter: &'a Arc<Waiter>, queues: &'a [WaitQueue]) -> Registration<'a> {
        for q in queues {
            q.add(waiter);
        }
        Registration { waiter, queues }
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        for q in self.queues {
            q.remove(self.waiter);
        }
    }
}

/// Who sleeps: a waiter, and whether something sent to the sleeper (a
/// signal, an exit) must end its wait. The kernel's threads implement it.
pub trait Sleeper {
    /// The waiter to register and sleep on; what is sent to the sleeper
    /// wakes it.
    fn waiter(&self) -> &Arc<Waiter>;
    /// Whether the wait must end now (the thread has a signal to take, or
    /// must exit).
    fn interrupted(&self) -> bool;
}

/// A sleeper nothing interrupts: a host thread of the Sentry waiting for
/// guest state (a process's end).
#[derive(Debug, Default)]
pub struct Uninterruptible(Arc<Waiter>);

impl Sleeper for Uninterruptible {
    fn waiter(&self) -> &Arc<Waiter> {
        &self.0
    }

    fn interrupted(&self) -> bool {
        false
    }
}

/// Why [`wait_until`] gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitError {
    /// the sleeper was interrupted
    Interrupted,
    /// the deadline passed
    TimedOut,
}

/// Sleeps on `queues` until `check` gives a value, the sleeper is
/// interrupted, or `deadline` passes. `check` runs first, before any
/// registration, so an answer already there costs nothing.
pub fn wait_until<T>(
    sleeper: &dyn Sleeper,
    queues: &[WaitQueue],
    deadline: Option<Instant>,
    mut check: impl FnMut() -> Option<T>,
) -> Result<T, WaitError> {
    if let Some(v) = check() {
        return Ok(v);
    }
    let w = sleeper.waiter();
    let _reg = Registration::new(w, queues);
    loop {
        w.prepare();
        if let Some(v) = check() {
            return Ok(v);
        }
        if sleeper.interrupted() {
            return Err(WaitError::Interrupted);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(WaitError::TimedOut);
        }
        w.sleep(deadline);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    struct Flag(Arc<Waiter>, AtomicBool);

    impl Sleeper for Flag {
        fn waiter(&self) -> &Arc<Waiter> {
            &self.0
        }
        fn interrupted(&self) -> bool {
            self.1.load(Ordering::SeqCst)
        }
    }

    #[test]
    fn a_notification_wakes_only_the_waiters_of_its_queue() {
        let (a, b) = (WaitQueue::new(), WaitQueue::new());
        let (wa, wb) = (Waiter::new(), Waiter::new());
        let qa = [a.clone()];
        let qb = [b.clone()];
        let _ra = Registration::new(&wa, &qa);
        let _rb = Registration::new(&wb, &qb);
        wa.prepare();
        wb.prepare();
        a.notify();
        let soon = Some(Instant::now() + Duration::from_millis(10));
        assert!(wa.sleep(soon));
        assert!(!wb.sleep(soon));
    }

    #[test]
    fn registration_ends_with_its_guard() {
        let q = WaitQueue::new();
        let w = Waiter::new();
        let qs = [q.clone(), q.clone()];
        {
            let _r = Registration::new(&w, &qs);
            assert!(!q.is_empty());
        }
        assert!(q.is_empty());
        w.prepare();
        q.notify();
        assert!(!w.sleep(Some(Instant::now())));
    }

    #[test]
    fn no_wake_up_is_lost_between_check_and_sleep() {
        // A notifier that changes the state right after each check.
        for _ in 0..200 {
            let q = WaitQueue::new();
            let state = Arc::new(AtomicBool::new(false));
            let sleeper = Flag(Waiter::new(), AtomicBool::new(false));
            let (q2, s2) = (q.clone(), state.clone());
            let t = std::thread::spawn(move || {
                s2.store(true, Ordering::Relaxed);
                q2.notify();
            });
            let r = wait_until(&sleeper, &[q], None, || {
                state.load(Ordering::Relaxed).then_some(())
            });
            assert_eq!(r, Ok(()));
            t.join().expect("notifier");
        }
    }

    #[test]
    fn a_wait_ends_at_its_deadline_or_when_interrupted() {
        let sleeper = Flag(Waiter::new(), AtomicBool::new(false));
        let q = WaitQueue::new();
        let r: Result<(), _> = wait_until(
            &sleeper,
            std::slice::from_ref(&q),
            Some(Instant::now() + Duration::from_millis(5)),
            || None,
        );
        assert_eq!(r, Err(WaitError::TimedOut));
        sleeper.1.store(true, Ordering::SeqCst);
        sleeper.0.wake();
        let r: Result<(), _> = wait_until(&sleeper, &[q], None, || None);
        assert_eq!(r, Err(WaitError::Interrupted));
    }
}
