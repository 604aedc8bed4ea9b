//! A guest's own seccomp state (seccomp(2)): the mode and the chain of
//! filters each thread carries, inherited by its children and kept across
//! `execve`, what a call is answered under them, and the user-notification
//! state a filter with a listener shares with it (seccomp_unotify(2)). The
//! Sentry enforces them itself; nothing is installed on the host. The
//! system calls that change them, and the check made before each call, are
//! in `syscalls/seccomp.rs`.

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use abi::bpf::{self, Program, SeccompData, SeccompNotif};
use abi::Errno;

use crate::kernel::task::{Task, Thread, ThreadState};
use crate::kernel::wait::WaitQueue;
use crate::sync::Locked;
use crate::vfs::file::FdTable;

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
    /// where its `SECCOMP_RET_USER_NOTIF` calls go
    /// (`SECCOMP_FILTER_FLAG_NEW_LISTENER`)
    pub notifier: Option<Arc<Notifier>>,
    prev: Option<Arc<Filter>>,
    /// filters in the chain, this one included
    count: usize,
    /// what the chain weighs against `MAX_INSNS_PER_PATH`: each filter's
    /// length plus the per-filter penalty
    cost: usize,
    /// a bit per call number the whole chain allows whatever the
    /// arguments (Linux's action cache): those skip the programs
    allowed: Box<[u64]>,
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
    /// recursively, a frame per filter, on a task's host thread stack. A
    /// filter no thread has any more tells its listener (`POLLHUP`).
    fn drop(&mut self) {
        if let Some(n) = &self.notifier {
            n.orphan();
        }
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
        notifier: Option<Arc<Notifier>>,
        prev: Option<Arc<Filter>>,
    ) -> Result<Arc<Filter>, TooManyInsns> {
        let below = prev.as_ref().map_or(0, |p| p.cost);
        if prog.len() + below > bpf::MAX_INSNS_PER_PATH {
            return Err(TooManyInsns);
        }
        let mut allowed = vec![0u64; (abi::MAX_SYSCALL as usize).div_ceil(64)].into_boxed_slice();
        for nr in 0..abi::MAX_SYSCALL as u32 {
            let below = prev.as_ref().is_none_or(|p| p.always_allows(nr));
            if below
                && prog.result_for_number(nr, bpf::AUDIT_ARCH_X86_64)
                    == Some(bpf::SECCOMP_RET_ALLOW)
            {
                allowed[nr as usize / 64] |= 1 << (nr % 64);
            }
        }
        Ok(Arc::new(Filter {
            allowed,
            count: prev.as_ref().map_or(0, |p| p.count) + 1,
            cost: below + prog.len() + bpf::FILTER_PENALTY_INSNS,
            prog,
            log,
            notifier,
            prev,
        }))
    }

    /// Whether the chain allows every call `nr` of x86-64, whatever its
    /// arguments.
    fn always_allows(&self, nr: u32) -> bool {
        self.allowed
            .get(nr as usize / 64)
            .is_some_and(|w| w & (1 << (nr % 64)) != 0)
    }

    /// Whether the chain has a filter whose listener is still open: a
    /// thread may have one at a time (`EBUSY`).
    pub fn has_listener(&self) -> bool {
        let mut f = Some(self);
        while let Some(cur) = f {
            if cur.notifier.as_ref().is_some_and(|n| !n.state().detached) {
                return true;
            }
            f = cur.prev.as_deref();
        }
        false
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
    /// (Linux's `seccomp_run_filters()`). With it, the filter that gave it
    /// (none when every filter allowed the call): its log flag and
    /// listener apply.
    pub fn run(&self, data: &SeccompData) -> (u32, Option<&Filter>) {
        if data.arch == bpf::AUDIT_ARCH_X86_64 && self.always_allows(data.nr as u32) {
            return (bpf::SECCOMP_RET_ALLOW, None);
        }
        let words = bpf::data_words(data);
        let mut ret = bpf::SECCOMP_RET_ALLOW;
        let mut matched = None;
        let mut f = Some(self);
        while let Some(cur) = f {
            let r = cur.prog.run_words(&words);
            if bpf::action_rank(r) < bpf::action_rank(ret) {
                ret = r;
                matched = Some(cur);
            }
            f = cur.prev.as_deref();
        }
        (ret, matched)
    }
}

/// Where a notice is (Linux's `enum notify_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NoticeState {
    /// queued, not yet received
    Init,
    /// received by the listener, not yet answered
    Sent,
    /// answered: the caller takes the reply
    Replied,
}

/// How the listener answered a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// the call returns this (a value, or a negative errno), unmade
    Return(i64),
    /// make the call after all (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`)
    Continue,
}

/// One call waiting for the listener.
#[derive(Debug)]
struct Notice {
    id: u64,
    tid: i32,
    data: SeccompData,
    state: NoticeState,
    reply: Reply,
    /// the caller's descriptors and `RLIMIT_NOFILE`: `ADDFD` puts one
    /// there
    fds: Arc<Mutex<FdTable>>,
    nofile: u64,
}

/// Received call `id` that waits for its answer: `ENOENT` for no such
/// call, `EINPROGRESS` for one not received or already answered.
fn sent(notices: &mut [Notice], id: u64) -> Result<&mut Notice, Errno> {
    let n = notices
        .iter_mut()
        .find(|n| n.id == id)
        .ok_or(Errno::ENOENT)?;
    if n.state != NoticeState::Sent {
        return Err(Errno::EINPROGRESS);
    }
    Ok(n)
}

#[derive(Debug, Default)]
struct NotifierState {
    next_id: u64,
    notices: Vec<Notice>,
    /// the listener is closed: calls fail with `ENOSYS`
    detached: bool,
    /// no thread has the filter any more (`POLLHUP`)
    orphaned: bool,
}

/// The user-notification state of a filter made with a listener: calls
/// its filter sends there wait, in order, for the listener's answer
/// (Linux's `struct notification`).
#[derive(Debug, Default)]
pub struct Notifier {
    /// `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`: a received call waits on
    /// through signals but fatal ones
    pub wait_killable: bool,
    state: Mutex<NotifierState>,
    /// woken at every change: a call queued, received, answered or
    /// withdrawn, the listener closed, the last thread gone
    pub queue: WaitQueue,
    generation: AtomicU64,
}

/// What [`Notifier::poll`] finds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Readiness {
    /// a call waits to be received
    pub queued: bool,
    /// a received call waits for its answer
    pub received: bool,
    /// no thread has the filter any more
    pub orphaned: bool,
}

impl Notifier {
    /// A notifier with no calls.
    pub fn new(wait_killable: bool) -> Arc<Notifier> {
        Arc::new(Notifier {
            wait_killable,
            ..Notifier::default()
        })
    }

    fn state(&self) -> MutexGuard<'_, NotifierState> {
        self.state.locked()
    }

    /// Wakes everyone waiting on the notifier, after a change.
    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::Relaxed);
        self.queue.notify();
    }

    /// A number that changes with every change (edge-triggered epoll).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// Queues thread `tid`'s call `data`; its id, or `None` once the
    /// listener is closed.
    pub fn queue_call(
        &self,
        tid: i32,
        data: SeccompData,
        fds: Arc<Mutex<FdTable>>,
        nofile: u64,
    ) -> Option<u64> {
        let id = {
            let mut st = self.state();
            if st.detached {
                return None;
            }
            // Ids are not guessable from outside in Linux (a random start);
            // here they only need to be unique.
            st.next_id += 1;
            let id = st.next_id;
            st.notices.push(Notice {
                id,
                tid,
                data,
                state: NoticeState::Init,
                reply: Reply::Return(0),
                fds,
                nofile,
            });
            id
        };
        self.changed();
        Some(id)
    }

    /// The answer to call `id`, once there is one; the call is then gone.
    pub fn take_reply(&self, id: u64) -> Option<Reply> {
        let reply = {
            let mut st = self.state();
            let i = st
                .notices
                .iter()
                .position(|n| n.id == id && n.state == NoticeState::Replied)?;
            st.notices.remove(i).reply
        };
        self.changed();
        Some(reply)
    }

    /// Takes call `id` back, unanswered (its caller was interrupted).
    pub fn withdraw(&self, id: u64) {
        self.state().notices.retain(|n| n.id != id);
        self.changed();
    }

    /// Hands the oldest queued call to the listener.
    pub fn receive(&self) -> Option<SeccompNotif> {
        let notif = {
            let mut st = self.state();
            let n = st
                .notices
                .iter_mut()
                .find(|n| n.state == NoticeState::Init)?;
            n.state = NoticeState::Sent;
            SeccompNotif {
                id: n.id,
                pid: n.tid as u32,
                flags: 0,
                data: n.data,
            }
        };
        self.changed();
        Some(notif)
    }

    /// Puts a received call back in the queue (the listener's buffer was
    /// bad).
    pub fn unreceive(&self, id: u64) {
        if let Some(n) = self.state().notices.iter_mut().find(|n| n.id == id) {
            if n.state == NoticeState::Sent {
                n.state = NoticeState::Init;
            }
        }
        self.changed();
    }

    /// Answers received call `id`: `ENOENT` for no such call,
    /// `EINPROGRESS` for one not received or already answered.
    pub fn answer(&self, id: u64, reply: Reply) -> Result<(), Errno> {
        {
            let mut st = self.state();
            let n = sent(&mut st.notices, id)?;
            n.state = NoticeState::Replied;
            n.reply = reply;
        }
        self.changed();
        Ok(())
    }

    /// Whether call `id` has been received (and may be answered, or is).
    pub fn is_received(&self, id: u64) -> bool {
        self.state()
            .notices
            .iter()
            .any(|n| n.id == id && n.state != NoticeState::Init)
    }

    /// Whether call `id` is received and waits for its answer.
    pub fn is_waiting(&self, id: u64) -> bool {
        self.state()
            .notices
            .iter()
            .any(|n| n.id == id && n.state == NoticeState::Sent)
    }

    /// Runs `install` on received call `id`'s descriptor table and
    /// `RLIMIT_NOFILE` (`SECCOMP_IOCTL_NOTIF_ADDFD`); with `send`, its
    /// result answers the call as well. The same errors as
    /// [`Notifier::answer`].
    pub fn add_fd(
        &self,
        id: u64,
        send: bool,
        install: impl FnOnce(&Mutex<FdTable>, u64) -> Result<i64, Errno>,
    ) -> Result<i64, Errno> {
        let fd = {
            let mut st = self.state();
            let n = sent(&mut st.notices, id)?;
            let fd = install(&n.fds, n.nofile)?;
            if send {
                n.state = NoticeState::Replied;
                n.reply = Reply::Return(fd);
            }
            fd
        };
        self.changed();
        Ok(fd)
    }

    /// What a poll of the listener sees.
    pub fn poll(&self) -> Readiness {
        let st = self.state();
        Readiness {
            queued: st.notices.iter().any(|n| n.state == NoticeState::Init),
            received: st.notices.iter().any(|n| n.state == NoticeState::Sent),
            orphaned: st.orphaned,
        }
    }

    /// The listener's last close: every waiting call fails with `ENOSYS`,
    /// and so do later ones (Linux's `seccomp_notify_detach()`).
    pub fn detach(&self) {
        {
            let mut st = self.state();
            st.detached = true;
            for n in &mut st.notices {
                n.state = NoticeState::Replied;
                n.reply = Reply::Return(Errno::ENOSYS.as_return() as i64);
            }
        }
        self.changed();
    }

    fn orphan(&self) {
        self.state().orphaned = true;
        self.changed();
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
            f = Some(Filter::attach(ret(r), false, None, f).expect("fits"));
        }
        f.expect("one filter at least")
    }

    fn ran(rets: &[u32]) -> u32 {
        chain(rets).run(&SeccompData::default()).0
    }

    #[test]
    fn the_most_restrictive_action_wins() {
        let order = abi::bpf::SECCOMP_ACTIONS;
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
            f = Some(Filter::attach(long(), false, None, f).expect("fits"));
        }
        assert_eq!(f.as_ref().map(|f| f.count), Some(7));
        assert_eq!(
            Filter::attach(long(), false, None, f.clone()).map(|_| ()),
            Err(TooManyInsns)
        );
        // A short one still fits.
        let f = Filter::attach(ret(SECCOMP_RET_ALLOW), false, None, f).expect("fits");
        assert_eq!(f.count, 8);
    }

    #[test]
    fn ancestry_decides_whether_a_thread_can_be_synced() {
        let base = chain(&[SECCOMP_RET_ALLOW]);
        let mine =
            Filter::attach(ret(SECCOMP_RET_LOG), false, None, Some(base.clone())).expect("fits");
        let theirs =
            Filter::attach(ret(SECCOMP_RET_LOG), false, None, Some(base.clone())).expect("fits");
        assert!(mine.descends_from(None));
        assert!(mine.descends_from(Some(&base)));
        assert!(mine.descends_from(Some(&mine)));
        assert!(!mine.descends_from(Some(&theirs)));
        assert!(!base.descends_from(Some(&mine)));
    }

    fn table() -> Arc<Mutex<FdTable>> {
        Arc::new(Mutex::new(FdTable::default()))
    }

    fn call(nr: i32) -> SeccompData {
        SeccompData {
            nr,
            ..SeccompData::default()
        }
    }

    #[test]
    fn a_notice_is_queued_received_answered_and_taken() {
        let n = Notifier::new(false);
        assert_eq!(n.poll(), Readiness::default());
        let a = n
            .queue_call(7, call(110), table(), 1024)
            .expect("listening");
        let b = n.queue_call(8, call(39), table(), 1024).expect("listening");
        assert!(n.poll().queued && !n.poll().received);
        // Not received yet: no answer, not "waiting".
        assert_eq!(n.answer(a, Reply::Return(1)), Err(Errno::EINPROGRESS));
        assert!(!n.is_waiting(a));
        // Received in order.
        let got = n.receive().expect("queued");
        assert_eq!((got.id, got.pid, got.data.nr), (a, 7, 110));
        assert!(n.poll().queued && n.poll().received);
        assert!(n.is_waiting(a) && n.is_received(a));
        assert_eq!(n.take_reply(a), None);
        assert_eq!(n.answer(a + 100, Reply::Continue), Err(Errno::ENOENT));
        assert_eq!(n.answer(a, Reply::Return(42)), Ok(()));
        // One answer only.
        assert_eq!(n.answer(a, Reply::Return(43)), Err(Errno::EINPROGRESS));
        assert!(!n.is_waiting(a));
        assert_eq!(n.take_reply(a), Some(Reply::Return(42)));
        assert_eq!(n.take_reply(a), None);
        assert_eq!(n.answer(a, Reply::Return(43)), Err(Errno::ENOENT));
        // A bad buffer puts the call back; a withdrawn one is gone.
        assert_eq!(n.receive().map(|r| r.id), Some(b));
        n.unreceive(b);
        assert!(n.poll().queued);
        n.withdraw(b);
        assert_eq!(n.poll(), Readiness::default());
        assert_eq!(n.receive(), None);
    }

    #[test]
    fn add_fd_needs_a_received_call_and_may_answer_it() {
        let n = Notifier::new(false);
        let id = n
            .queue_call(1, call(110), table(), 1024)
            .expect("listening");
        let seven = |_: &Mutex<FdTable>, _: u64| Ok(7);
        assert_eq!(n.add_fd(id, true, seven), Err(Errno::EINPROGRESS));
        n.receive().expect("queued");
        // A failed install answers nothing.
        assert_eq!(
            n.add_fd(id, true, |_, _| Err(Errno::EMFILE)),
            Err(Errno::EMFILE)
        );
        assert!(n.is_waiting(id));
        assert_eq!(n.add_fd(id, false, |_, limit| Ok(limit as i64)), Ok(1024));
        assert!(n.is_waiting(id));
        assert_eq!(n.add_fd(id, true, seven), Ok(7));
        assert_eq!(n.take_reply(id), Some(Reply::Return(7)));
    }

    #[test]
    fn closing_the_listener_fails_calls_with_enosys() {
        let n = Notifier::new(false);
        let waiting = n
            .queue_call(1, call(110), table(), 1024)
            .expect("listening");
        let received = n
            .queue_call(2, call(110), table(), 1024)
            .expect("listening");
        let _ = n.receive();
        n.detach();
        let enosys = Reply::Return(-i64::from(Errno::ENOSYS.0));
        assert_eq!(n.take_reply(waiting), Some(enosys));
        assert_eq!(n.take_reply(received), Some(enosys));
        assert_eq!(n.queue_call(3, call(110), table(), 1024), None);
        // A chain whose listener closed may take another.
        let f = Filter::attach(ret(SECCOMP_RET_USER_NOTIF), false, Some(n), None).expect("fits");
        assert!(!f.has_listener());
        let live = Filter::attach(
            ret(SECCOMP_RET_ALLOW),
            false,
            Some(Notifier::new(false)),
            None,
        )
        .expect("fits");
        assert!(live.has_listener());
    }

    #[test]
    fn the_listener_hangs_up_when_no_thread_has_the_filter() {
        let n = Notifier::new(false);
        let f = Filter::attach(ret(SECCOMP_RET_USER_NOTIF), false, Some(n.clone()), None)
            .expect("fits");
        let child =
            Filter::attach(ret(SECCOMP_RET_ALLOW), false, None, Some(f.clone())).expect("fits");
        // The matching filter is the one with the listener.
        let (r, m) = child.run(&call(0));
        assert_eq!(r, SECCOMP_RET_USER_NOTIF);
        assert!(m.is_some_and(|m| m.notifier.is_some()));
        drop(f);
        assert!(!n.poll().orphaned, "a newer filter still holds it");
        drop(child);
        assert!(n.poll().orphaned);
    }

    #[test]
    fn a_long_chain_drops_without_recursion() {
        let mut f = None;
        for _ in 0..6000 {
            f = Some(Filter::attach(ret(SECCOMP_RET_ALLOW), false, None, f).expect("fits"));
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
