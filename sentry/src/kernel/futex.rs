//! Futexes. A futex is keyed by the memory-file offset of its word, so two
//! threads sharing an address space, or two processes sharing a
//! `MAP_SHARED` page, meet on the same key, while private copies made by
//! `fork` do not. Each key has its own queue of waiters; a wake marks the
//! ones it picks and wakes their threads' [`crate::kernel::wait::Waiter`]s.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use abi::Errno;

use crate::kernel::task::Task;
use crate::mm::GuestWord;
use crate::sync::Locked;

#[derive(Debug)]
struct Waiter {
    woken: AtomicBool,
    bitset: u32,
    /// the waiting thread, for PI futexes (ownership passes to it)
    tid: u32,
    /// where that thread sleeps
    thread: Arc<crate::kernel::wait::Waiter>,
}

impl Waiter {
    /// Marks the waiter woken and wakes its thread.
    fn wake(&self) {
        self.woken.store(true, Ordering::SeqCst);
        self.thread.wake();
    }
}

/// The sandbox's futex wait queues.
#[derive(Debug, Default)]
pub struct FutexTable {
    queues: Mutex<HashMap<u64, Vec<Arc<Waiter>>>>,
}

impl FutexTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Vec<Arc<Waiter>>>> {
        self.queues.locked()
    }
}

/// The key and word of the futex at `addr` (`EINVAL` when misaligned,
/// `EFAULT` when not mapped readable).
fn word(task: &Task, addr: u64) -> Result<(u64, GuestWord), Errno> {
    task.mm().futex_word(addr)
}

/// `FUTEX_WAIT(_BITSET)`: sleeps while the word equals `val`.
pub fn wait(
    task: &Task,
    addr: u64,
    val: u32,
    bitset: u32,
    deadline: Option<Instant>,
) -> Result<u64, Errno> {
    if bitset == 0 {
        return Err(Errno::EINVAL);
    }
    let (key, w) = word(task, addr)?;
    let table = &task.kernel.futexes;
    let me = Arc::new(Waiter {
        woken: AtomicBool::new(false),
        bitset,
        tid: 0,
        thread: task.thread.waiter.clone(),
    });
    {
        let mut q = table.lock();
        if w.load(Ordering::SeqCst) != val {
            return Err(Errno::EAGAIN);
        }
        q.entry(key).or_default().push(me.clone());
    }
    loop {
        me.thread.prepare();
        if me.woken.load(Ordering::SeqCst) {
            return Ok(0);
        }
        let timed_out = deadline.is_some_and(|d| Instant::now() >= d);
        if timed_out || task.thread.interrupted() {
            // Leave the queue, unless a wake got here first.
            let mut q = table.lock();
            if me.woken.load(Ordering::SeqCst) {
                return Ok(0);
            }
            for list in q.values_mut() {
                list.retain(|x| !Arc::ptr_eq(x, &me));
            }
            q.retain(|_, l| !l.is_empty());
            return Err(if timed_out {
                Errno::ETIMEDOUT
            } else {
                Errno::EINTR
            });
        }
        me.thread.sleep(deadline);
    }
}

/// `futex_waitv(2)`: sleeps while every word `words[i].0` holds
/// `words[i].1`, until one of them is woken; returns the index of the
/// woken one (the highest, if several were, as Linux's
/// `futex_unqueue_multiple`). The addresses have been checked for
/// alignment. `EAGAIN` when a word differs and `EFAULT` when one is not
/// mapped, whichever comes first in order, as Linux reads them.
pub fn wait_multiple(
    task: &Task,
    words: &[(u64, u32)],
    deadline: Option<Instant>,
) -> Result<u64, Errno> {
    let mut found: Vec<(u64, GuestWord, u32)> = Vec::with_capacity(words.len());
    for &(addr, val) in words {
        match word(task, addr) {
            Ok((key, w)) => found.push((key, w, val)),
            Err(e) => {
                let differs = found.iter().any(|(_, w, v)| w.load(Ordering::SeqCst) != *v);
                return Err(if differs { Errno::EAGAIN } else { e });
            }
        }
    }
    let table = &task.kernel.futexes;
    let mine: Vec<(u64, Arc<Waiter>)> = found
        .iter()
        .map(|(key, _, _)| {
            let w = Arc::new(Waiter {
                woken: AtomicBool::new(false),
                bitset: u32::MAX,
                tid: 0,
                thread: task.thread.waiter.clone(),
            });
            (*key, w)
        })
        .collect();
    {
        let mut q = table.lock();
        if found.iter().any(|(_, w, v)| w.load(Ordering::SeqCst) != *v) {
            return Err(Errno::EAGAIN);
        }
        for (key, w) in &mine {
            q.entry(*key).or_default().push(w.clone());
        }
    }
    let woken = || {
        mine.iter()
            .rposition(|(_, w)| w.woken.load(Ordering::SeqCst))
    };
    // Leaves every queue the wait is still on; the woken index, if any.
    let leave = || {
        let mut q = table.lock();
        for (key, w) in &mine {
            if let Some(list) = q.get_mut(key) {
                list.retain(|x| !Arc::ptr_eq(x, w));
                if list.is_empty() {
                    q.remove(key);
                }
            }
        }
        woken()
    };
    let thread = &task.thread.waiter;
    loop {
        thread.prepare();
        let timed_out = deadline.is_some_and(|d| Instant::now() >= d);
        if woken().is_some() || timed_out || task.thread.interrupted() {
            if let Some(i) = leave() {
                return Ok(i as u64);
            }
            return Err(if timed_out {
                Errno::ETIMEDOUT
            } else {
                Errno::ERESTARTSYS
            });
        }
        thread.sleep(deadline);
    }
}

fn wake_key(q: &mut HashMap<u64, Vec<Arc<Waiter>>>, key: u64, n: u32, bitset: u32) -> u64 {
    let mut woken = 0u64;
    if let Some(list) = q.get_mut(&key) {
        list.retain(|w| {
            if woken < u64::from(n) && w.bitset & bitset != 0 {
                w.wake();
                woken += 1;
                false
            } else {
                true
            }
        });
        if list.is_empty() {
            q.remove(&key);
        }
    }
    woken
}

/// `FUTEX_WAKE(_BITSET)`: wakes up to `n` waiters.
pub fn wake(task: &Task, addr: u64, n: u32, bitset: u32) -> Result<u64, Errno> {
    if bitset == 0 {
        return Err(Errno::EINVAL);
    }
    let (key, _) = word(task, addr)?;
    let woken = wake_key(&mut task.kernel.futexes.lock(), key, n, bitset);
    Ok(woken)
}

/// `FUTEX_REQUEUE` / `FUTEX_CMP_REQUEUE`.
pub fn requeue(
    task: &Task,
    addr: u64,
    addr2: u64,
    n_wake: u32,
    n_move: u32,
    cmp: Option<u32>,
) -> Result<u64, Errno> {
    let (key, w) = word(task, addr)?;
    let (key2, _) = word(task, addr2)?;
    let mut q = task.kernel.futexes.lock();
    if let Some(c) = cmp {
        if w.load(Ordering::SeqCst) != c {
            return Err(Errno::EAGAIN);
        }
    }
    let woken = wake_key(&mut q, key, n_wake, u32::MAX);
    let mut moved = 0u64;
    if key != key2 {
        if let Some(mut list) = q.remove(&key) {
            let take = list.len().min(n_move as usize);
            let rest = list.split_off(take);
            moved = list.len() as u64;
            q.entry(key2).or_default().extend(list);
            if !rest.is_empty() {
                q.insert(key, rest);
            }
        }
    }
    drop(q);
    Ok(woken + moved)
}

/// `FUTEX_WAKE_OP`: changes the word at `addr2`, wakes waiters at `addr`,
/// and at `addr2` too if the old value passes the comparison.
pub fn wake_op(task: &Task, addr: u64, addr2: u64, n: u32, n2: u32, op: u32) -> Result<u64, Errno> {
    let (key, _) = word(task, addr)?;
    let (key2, w2) = word(task, addr2)?;
    let kind = (op >> 28) & 7;
    let shift = op & (8 << 28) != 0;
    let cmp = (op >> 24) & 15;
    let mut oparg = (op >> 12) & 0xfff;
    let cmparg = op & 0xfff;
    if shift {
        if oparg > 31 {
            return Err(Errno::EINVAL);
        }
        oparg = 1 << oparg;
    }
    let mut q = task.kernel.futexes.lock();
    let old = match kind {
        0 => w2.swap(oparg, Ordering::SeqCst),
        1 => w2.fetch_add(oparg, Ordering::SeqCst),
        2 => w2.fetch_or(oparg, Ordering::SeqCst),
        3 => w2.fetch_and(!oparg, Ordering::SeqCst),
        4 => w2.fetch_xor(oparg, Ordering::SeqCst),
        _ => return Err(Errno::ENOSYS),
    };
    let (o, c) = (old as i32, cmparg as i32);
    let pass = match cmp {
        0 => o == c,
        1 => o != c,
        2 => o < c,
        3 => o <= c,
        4 => o > c,
        5 => o >= c,
        _ => return Err(Errno::ENOSYS),
    };
    let mut woken = wake_key(&mut q, key, n, u32::MAX);
    if pass {
        woken += wake_key(&mut q, key2, n2, u32::MAX);
    }
    drop(q);
    Ok(woken)
}

const FUTEX_WAITERS: u32 = 0x8000_0000;
const FUTEX_OWNER_DIED: u32 = 0x4000_0000;
const FUTEX_TID_MASK: u32 = 0x3fff_ffff;
/// Linux's `ROBUST_LIST_LIMIT`: a guest's endless list cannot stall exit.
const ROBUST_LIST_LIMIT: usize = 2048;

/// Marks the robust futexes a dying thread still holds as owner-died and
/// wakes one waiter of each (set_robust_list(2)).
pub fn exit_robust_list(task: &Task) {
    let (head, len) = task.robust_list;
    if head == 0 || len != 24 {
        return;
    }
    let read = |a: u64| -> Option<u64> { task.mm().read_obj::<u64>(a).ok() };
    let Some(offset) = read(head + 8).map(|v| v as i64) else {
        return;
    };
    let pending = read(head + 16).unwrap_or(0);
    let handle = |entry: u64| {
        let Some(addr) = entry.checked_add_signed(offset) else {
            return;
        };
        let Ok((_, w)) = word(task, addr) else { return };
        let tid = task.tid() as u32;
        let mut cur = w.load(Ordering::SeqCst);
        loop {
            if cur & FUTEX_TID_MASK != tid {
                return;
            }
            let new = (cur & FUTEX_WAITERS) | FUTEX_OWNER_DIED;
            match w.compare_exchange(cur, new, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => break,
                Err(v) => cur = v,
            }
        }
        if cur & FUTEX_WAITERS != 0 {
            let _ = wake(task, addr, 1, u32::MAX);
            // A PI waiter finds the word free (owner died) and takes it.
            if let Ok((key, _)) = word(task, addr) {
                wake_key(&mut task.kernel.futexes.lock(), key | PI_KEY, 1, u32::MAX);
            }
        }
    };
    let mut entry = read(head).unwrap_or(head);
    let mut n = 0;
    while entry != head && entry != 0 && n < ROBUST_LIST_LIMIT {
        let next = read(entry).unwrap_or(head);
        if entry != pending {
            handle(entry);
        }
        entry = next;
        n += 1;
    }
    if pending != 0 {
        handle(pending);
    }
}

/// PI futex waiters queue apart from plain ones on the same word (memory
/// file offsets never reach this bit).
const PI_KEY: u64 = 1 << 63;

/// `FUTEX_LOCK_PI` / `FUTEX_TRYLOCK_PI`: takes the lock word for the
/// caller (its TID), or queues until the owner hands it over. Ownership
/// follows Linux (TID, `FUTEX_WAITERS`, `FUTEX_OWNER_DIED`); the Sentry does
/// not boost priorities, which it does not model.
pub fn lock_pi(
    task: &Task,
    addr: u64,
    deadline: Option<Instant>,
    try_only: bool,
) -> Result<u64, Errno> {
    let (key, w) = word(task, addr)?;
    let key = key | PI_KEY;
    let tid = task.tid() as u32;
    let table = &task.kernel.futexes;
    let me = Arc::new(Waiter {
        woken: AtomicBool::new(false),
        bitset: u32::MAX,
        tid,
        thread: task.thread.waiter.clone(),
    });
    loop {
        {
            let mut q = table.lock();
            let cur = w.load(Ordering::SeqCst);
            let owner = cur & FUTEX_TID_MASK;
            if owner == tid {
                return Err(Errno::EDEADLK);
            }
            if owner == 0 {
                let others = q.get(&key).is_some_and(|l| !l.is_empty());
                let new = tid | (cur & FUTEX_OWNER_DIED) | if others { FUTEX_WAITERS } else { 0 };
                if w.compare_exchange(cur, new, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    return Ok(0);
                }
                continue;
            }
            if try_only {
                return Err(Errno::EAGAIN);
            }
            if !task.kernel.procs().threads.contains_key(&(owner as i32)) {
                // The owner is gone without marking the lock.
                return Err(Errno::ESRCH);
            }
            if cur & FUTEX_WAITERS == 0
                && w.compare_exchange(cur, cur | FUTEX_WAITERS, Ordering::SeqCst, Ordering::SeqCst)
                    .is_err()
            {
                continue;
            }
            me.woken.store(false, Ordering::SeqCst);
            q.entry(key).or_default().push(me.clone());
        }
        loop {
            me.thread.prepare();
            if me.woken.load(Ordering::SeqCst) {
                break;
            }
            let timed_out = deadline.is_some_and(|d| Instant::now() >= d);
            if timed_out || task.thread.interrupted() {
                let mut q = table.lock();
                if me.woken.load(Ordering::SeqCst) {
                    break;
                }
                if let Some(l) = q.get_mut(&key) {
                    l.retain(|x| !Arc::ptr_eq(x, &me));
                    if l.is_empty() {
                        q.remove(&key);
                    }
                }
                // Linux restarts an interrupted FUTEX_LOCK_PI.
                return Err(if timed_out {
                    Errno::ETIMEDOUT
                } else {
                    Errno::ERESTARTNOINTR
                });
            }
            me.thread.sleep(deadline);
        }
        if w.load(Ordering::SeqCst) & FUTEX_TID_MASK == tid {
            return Ok(0);
        }
        // Woken without a hand-over (the owner died): try again.
    }
}

/// `FUTEX_UNLOCK_PI`: the caller gives the lock to its first waiter, or
/// frees it.
pub fn unlock_pi(task: &Task, addr: u64) -> Result<u64, Errno> {
    let (key, w) = word(task, addr)?;
    let key = key | PI_KEY;
    let tid = task.tid() as u32;
    let mut q = task.kernel.futexes.lock();
    let cur = w.load(Ordering::SeqCst);
    if cur & FUTEX_TID_MASK != tid {
        return Err(Errno::EPERM);
    }
    let next = q.get_mut(&key).and_then(|l| {
        let first = (!l.is_empty()).then(|| l.remove(0));
        first.map(|f| (f, !l.is_empty()))
    });
    if q.get(&key).is_some_and(|l| l.is_empty()) {
        q.remove(&key);
    }
    match next {
        Some((waiter, more)) => {
            w.store(
                waiter.tid | if more { FUTEX_WAITERS } else { 0 },
                Ordering::SeqCst,
            );
            waiter.wake();
            drop(q);
        }
        None => w.store(0, Ordering::SeqCst),
    }
    Ok(0)
}
