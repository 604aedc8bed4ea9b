//! A guest's own seccomp state (seccomp(2)): the mode and the chain of
//! filters each thread carries, inherited by its children and kept across
//! `execve`, and what a call is answered under them. The Sentry enforces
//! them itself; nothing is installed on the host. The system calls that
//! change them, and the check made before each call, are in
//! `syscalls/seccomp.rs`.

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use abi::bpf::{self, Program, SeccompData};

use crate::kernel::task::{Task, Thread, ThreadState};

/// A thread's seccomp mode, numbered as `PR_GET_SECCOMP` and /proc's
/// `Seccomp:` line give it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// every call is made
    #[default]
    Disabled,
    /// `read`, `write`, `exit` and `rt_sigreturn` only
    Strict,
    /// the filters decide
    Filter,
}

impl Mode {
    /// `SECCOMP_MODE_*`.
    pub fn number(self) -> u32 {
        match self {
            Mode::Disabled => bpf::SECCOMP_MODE_DISABLED,
            Mode::Strict => bpf::SECCOMP_MODE_STRICT,
            Mode::Filter => bpf::SECCOMP_MODE_FILTER,
        }
    }
}

/// One installed filter and, through `prev`, those installed before it:
/// threads share the chain (a child's new filters go on its own head), as
/// Linux's `struct seccomp_filter` list is shared.
pub struct Filter {
    prog: Program,
    /// `SECCOMP_FILTER_FLAG_LOG`: log what it returns, but `ALLOW`
    pub log: bool,
    prev: Option<Arc<Filter>>,
    /// filters in the chain, this one included
    count: usize,
    /// what the chain weighs against `MAX_INSNS_PER_PATH`: each filter's
    /// length plus the per-filter penalty
    cost: usize,
}

impl fmt::Debug for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Filter({} insns, {} in chain)",
            self.prog.len(),
            self.count
        )
    }
}

impl Drop for Filter {
    /// Drops the chain one filter at a time: a chain of thousands of
    /// one-instruction filters (6,553 fit the limit) would otherwise drop
    /// recursively, a frame per filter, on a task's host thread stack.
    fn drop(&mut self) {
        let mut next = self.prev.take();
        while let Some(f) = next {
            next = match Arc::try_unwrap(f) {
                Ok(mut f) => f.prev.take(),
                Err(_) => None,
            };
        }
    }
}

/// Why a filter cannot join a chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooManyInsns;

impl Filter {
    /// `prog` on top of `prev`, unless the chain would then hold more than
    /// `MAX_INSNS_PER_PATH` instructions (counting each older filter's
    /// penalty, as Linux's `seccomp_attach_filter()` does).
    pub fn attach(
        prog: Program,
        log: bool,
        prev: Option<Arc<Filter>>,
    ) -> Result<Arc<Filter>, TooManyInsns> {
        let below = prev.as_ref().map_or(0, |p| p.cost);
        if prog.len() + below > bpf::MAX_INSNS_PER_PATH {
            return Err(TooManyInsns);
        }
        Ok(Arc::new(Filter {
            count: prev.as_ref().map_or(0, |p| p.count) + 1,
            cost: below + prog.len() + bpf::FILTER_PENALTY_INSNS,
            prog,
            log,
            prev,
        }))
    }

    /// Whether `older` is this filter or one below it (`None`, no filter,
    /// is below every chain): a thread whose chain is an ancestor of the
    /// caller's may be synced to the caller's (`TSYNC`).
    pub fn descends_from(self: &Arc<Filter>, older: Option<&Arc<Filter>>) -> bool {
        let Some(older) = older else {
            return true;
        };
        let mut f = Some(self);
        while let Some(cur) = f {
            if Arc::ptr_eq(cur, older) {
                return true;
            }
            f = cur.prev.as_ref();
        }
        false
    }

    /// Runs every filter of the chain, newest first, on one call; the
    /// most restrictive return value wins, and of equals the newest's
    /// (Linux's `seccomp_run_filters()`). The second value says whether
    /// the filter that gave it asked for logging.
    pub fn run(&self, data: &SeccompData) -> (u32, bool) {
        let words = bpf::data_words(data);
        let mut ret = bpf::SECCOMP_RET_ALLOW;
        let mut log = false;
        let mut f = Some(self);
        while let Some(cur) = f {
            let r = cur.prog.run_words(&words);
            if bpf::action_rank(r) < bpf::action_rank(ret) {
                ret = r;
                log = cur.log;
            }
            f = cur.prev.as_deref();
        }
        (ret, log)
    }
}

/// A thread's mode and filters.
#[derive(Clone, Debug, Default)]
pub struct Seccomp {
    /// the mode
    pub mode: Mode,
    /// the newest filter (filter mode)
    pub filter: Option<Arc<Filter>>,
}

impl Seccomp {
    /// How many filters the thread has (/proc's `Seccomp_filters:`).
    pub fn filters(&self) -> usize {
        self.filter.as_ref().map_or(0, |f| f.count)
    }
}

/// What a filter's return value asks for (linux/seccomp.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// make the call
    Allow,
    /// make the call and log it
    Log,
    /// fail the call with this errno (capped at 4095), or succeed with 0
    Errno(u32),
    /// skip the call; `SIGSYS` with this in `si_errno`
    Trap(u16),
    /// skip the call; tell the tracer, or fail with `ENOSYS` without one
    Trace(u16),
    /// ask the filter's user-space listener
    UserNotif,
    /// end the calling thread with `SIGSYS`
    KillThread,
    /// end the process with `SIGSYS` (also any action Linux does not know)
    KillProcess,
}

/// The largest errno a filter can make a call return (`MAX_ERRNO`).
const MAX_ERRNO: u32 = 4095;

impl Action {
    /// The action of return value `ret`.
    pub fn of(ret: u32) -> Action {
        let data = ret & bpf::SECCOMP_RET_DATA;
        match ret & bpf::SECCOMP_RET_ACTION_FULL {
            bpf::SECCOMP_RET_ALLOW => Action::Allow,
            bpf::SECCOMP_RET_LOG => Action::Log,
            bpf::SECCOMP_RET_ERRNO => Action::Errno(data.min(MAX_ERRNO)),
            bpf::SECCOMP_RET_TRAP => Action::Trap(data as u16),
            bpf::SECCOMP_RET_TRACE => Action::Trace(data as u16),
            bpf::SECCOMP_RET_USER_NOTIF => Action::UserNotif,
            bpf::SECCOMP_RET_KILL_THREAD => Action::KillThread,
            _ => Action::KillProcess,
        }
    }
}

/// Bits of [`SeccompFlags`].
const ACTIVE: u8 = 1;
const CHANGED: u8 = 2;

/// A thread's seccomp state as its own calls need to know it without a
/// lock: whether any check is due (the one test a thread without seccomp
/// pays per call) and whether its [`ThreadState::seccomp`] changed since
/// its task last copied it (another thread's `TSYNC`, or its own change).
#[derive(Debug, Default)]
pub struct SeccompFlags(AtomicU8);

impl SeccompFlags {
    /// Whether the thread's calls are checked.
    #[inline]
    pub fn active(&self) -> bool {
        self.0.load(Ordering::Acquire) != 0
    }

    fn changed(&self) -> bool {
        self.0.load(Ordering::Acquire) & CHANGED != 0
    }
}

impl Thread {
    /// Gives the thread seccomp state `s`; `st` is its locked state. The
    /// thread's task picks it up before its next call.
    pub fn set_seccomp(&self, st: &mut ThreadState, s: Seccomp) {
        let active = s.mode != Mode::Disabled;
        st.seccomp = s;
        if active {
            self.seccomp.0.fetch_or(ACTIVE | CHANGED, Ordering::Release);
        }
    }
}

impl Task {
    /// The task's seccomp state as of now: its copy, refreshed first when
    /// it changed (a `TSYNC` also hands over `no_new_privs`).
    pub fn seccomp(&mut self) -> &Seccomp {
        if self.thread.seccomp.changed() {
            let mut st = self.thread.state();
            // Cleared under the lock every setter holds: no change is lost.
            self.thread.seccomp.0.fetch_and(!CHANGED, Ordering::AcqRel);
            self.seccomp_copy = st.seccomp.clone();
            if std::mem::take(&mut st.seccomp_sets_no_new_privs) {
                self.no_new_privs = true;
                st.no_new_privs = true;
            }
        }
        &self.seccomp_copy
    }

    /// Installs `s` as the task's own state (and what others see).
    pub fn assign_seccomp(&mut self, s: Seccomp) {
        {
            let mut st = self.thread.state();
            self.thread.set_seccomp(&mut st, s.clone());
        }
        self.seccomp_copy = s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi::bpf::*;

    fn ret(k: u32) -> Program {
        Program::check(&[SockFilter {
            code: BPF_RET | BPF_K,
            jt: 0,
            jf: 0,
            k,
        }])
        .expect("loads")
    }

    fn chain(rets: &[u32]) -> Arc<Filter> {
        let mut f = None;
        for &r in rets {
            f = Some(Filter::attach(ret(r), false, f).expect("fits"));
        }
        f.expect("one filter at least")
    }

    fn ran(rets: &[u32]) -> u32 {
        chain(rets).run(&SeccompData::default()).0
    }

    #[test]
    fn the_most_restrictive_action_wins() {
        let order = [
            SECCOMP_RET_KILL_PROCESS,
            SECCOMP_RET_KILL_THREAD,
            SECCOMP_RET_TRAP,
            SECCOMP_RET_ERRNO,
            SECCOMP_RET_USER_NOTIF,
            SECCOMP_RET_TRACE,
            SECCOMP_RET_LOG,
            SECCOMP_RET_ALLOW,
        ];
        for (i, &strong) in order.iter().enumerate() {
            for &weak in &order[i..] {
                assert_eq!(ran(&[strong, weak]), strong);
                assert_eq!(ran(&[weak, strong]), strong);
            }
        }
        // Of two equal actions, the newest filter's data.
        assert_eq!(
            ran(&[SECCOMP_RET_ERRNO | 1, SECCOMP_RET_ERRNO | 2]),
            SECCOMP_RET_ERRNO | 2
        );
        // An unknown action ranks by its value: 0x00010000 sits between
        // KILL_THREAD and TRAP.
        assert_eq!(ran(&[0x0001_0000, SECCOMP_RET_TRAP]), 0x0001_0000);
        assert_eq!(Action::of(0x0001_0000), Action::KillProcess);
    }

    #[test]
    fn actions_decode_with_their_data() {
        assert_eq!(Action::of(SECCOMP_RET_ERRNO | 5000), Action::Errno(4095));
        assert_eq!(Action::of(SECCOMP_RET_ERRNO), Action::Errno(0));
        assert_eq!(Action::of(SECCOMP_RET_TRAP | 77), Action::Trap(77));
        assert_eq!(Action::of(SECCOMP_RET_TRACE | 3), Action::Trace(3));
        assert_eq!(Action::of(SECCOMP_RET_ALLOW | 9), Action::Allow);
        assert_eq!(Action::of(SECCOMP_RET_LOG), Action::Log);
        assert_eq!(Action::of(SECCOMP_RET_KILL_THREAD | 1), Action::KillThread);
        assert_eq!(
            Action::of(SECCOMP_RET_KILL_PROCESS | 1),
            Action::KillProcess
        );
        assert_eq!(Action::of(SECCOMP_RET_USER_NOTIF), Action::UserNotif);
    }

    #[test]
    fn chains_weigh_their_filters_as_linux_does() {
        let long = || {
            let insns = vec![
                SockFilter {
                    code: BPF_RET | BPF_K,
                    jt: 0,
                    jf: 0,
                    k: SECCOMP_RET_ALLOW,
                };
                BPF_MAXINSNS
            ];
            Program::check(&insns).expect("loads")
        };
        // 4096 + 7 * (4096 + 4) = 32796 > 32768: the eighth does not fit
        // (the native kernel answers ENOMEM there too).
        let mut f = None;
        for _ in 0..7 {
            f = Some(Filter::attach(long(), false, f).expect("fits"));
        }
        assert_eq!(f.as_ref().map(|f| f.count), Some(7));
        assert_eq!(
            Filter::attach(long(), false, f.clone()).map(|_| ()),
            Err(TooManyInsns)
        );
        // A short one still fits.
        let f = Filter::attach(ret(SECCOMP_RET_ALLOW), false, f).expect("fits");
        assert_eq!(f.count, 8);
    }

    #[test]
    fn ancestry_decides_whether_a_thread_can_be_synced() {
        let base = chain(&[SECCOMP_RET_ALLOW]);
        let mine = Filter::attach(ret(SECCOMP_RET_LOG), false, Some(base.clone())).expect("fits");
        let theirs = Filter::attach(ret(SECCOMP_RET_LOG), false, Some(base.clone())).expect("fits");
        assert!(mine.descends_from(None));
        assert!(mine.descends_from(Some(&base)));
        assert!(mine.descends_from(Some(&mine)));
        assert!(!mine.descends_from(Some(&theirs)));
        assert!(!base.descends_from(Some(&mine)));
    }

    #[test]
    fn a_long_chain_drops_without_recursion() {
        let mut f = None;
        for _ in 0..6000 {
            f = Some(Filter::attach(ret(SECCOMP_RET_ALLOW), false, f).expect("fits"));
        }
        let f = f.expect("made");
        assert_eq!(f.count, 6000);
        // On a small stack: a recursive drop would overflow it.
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || drop(f))
            .expect("spawn")
            .join()
            .expect("dropped");
    }
}
