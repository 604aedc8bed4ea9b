//! Pipes: a bounded byte queue between a read end and a write end, with
//! Linux's capacity (64 KiB by default) and `PIPE_BUF` atomicity.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};

use abi::Errno;

use crate::kernel::wait::WaitQueue;
use crate::mm::GuestSlice;
use crate::sync::Locked;
use crate::vfs::file::{Blocker, Caller, FileDescription, FileImpl};

/// Default capacity (`/proc/sys/fs/pipe-max-size` bounds `F_SETPIPE_SZ`).
pub const DEFAULT_CAPACITY: usize = 65536;
/// Largest capacity `F_SETPIPE_SZ` may ask for (`pipe-max-size`).
pub const MAX_CAPACITY: usize = 1 << 20;
/// Writes up to this size are atomic.
pub const PIPE_BUF: usize = 4096;

/// The shared state of one pipe.
pub struct Pipe {
    inner: Mutex<Inner>,
    /// readers waiting for data or for the last writer to go (Linux's
    /// `rd_wait`)
    pub rd_wait: WaitQueue,
    /// writers waiting for room or for the last reader to go (`wr_wait`)
    pub wr_wait: WaitQueue,
    generation: std::sync::atomic::AtomicU64,
    drained: std::sync::atomic::AtomicU64,
    /// read-end descriptions with `O_ASYNC` (signalled by every write)
    pub readers_async: crate::vfs::fasync::Fasync,
    /// write-end descriptions with `O_ASYNC` (signalled by every read)
    pub writers_async: crate::vfs::fasync::Fasync,
}

struct Inner {
    buf: Ring,
    /// bytes in each page-sized buffer, oldest first (Linux's pipe slots:
    /// a slot frees only when read empty, and room is counted in slots)
    slots: VecDeque<usize>,
    capacity: usize,
    readers: usize,
    writers: usize,
    /// opens of each end so far (a FIFO's open waits for the other's)
    reader_opens: u64,
    writer_opens: u64,
}

/// Size of one pipe buffer (a page).
const SLOT: usize = 4096;

/// The queued bytes: a ring over a buffer that doubles when a write needs
/// more room and never shrinks (it holds at most the pipe's capacity), so
/// a write copies guest memory straight into its free space.
#[derive(Default)]
struct Ring {
    /// the storage; its length (0, or a power of two of at least a page)
    /// is the ring's size
    buf: Vec<u8>,
    /// where the oldest byte is
    head: usize,
    /// bytes queued
    len: usize,
}

impl Ring {
    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The queued bytes, oldest first, in two parts (the second where the
    /// ring wraps).
    fn as_slices(&self) -> (&[u8], &[u8]) {
        let first = self.len.min(self.buf.len() - self.head);
        (
            &self.buf[self.head..self.head + first],
            &self.buf[..self.len - first],
        )
    }

    /// Copies the queued bytes from `skip` in into `out`; returns the count
    /// copied.
    fn peek(&self, mut skip: usize, out: &mut [u8]) -> usize {
        let (a, b) = self.as_slices();
        let mut done = 0;
        for part in [a, b] {
            if skip >= part.len() {
                skip -= part.len();
                continue;
            }
            let n = (part.len() - skip).min(out.len() - done);
            out[done..done + n].copy_from_slice(&part[skip..skip + n]);
            done += n;
            skip = 0;
        }
        done
    }

    /// Drops the `n` oldest bytes (all of them, if fewer are queued).
    fn discard(&mut self, n: usize) {
        let n = n.min(self.len);
        self.len -= n;
        self.head = if self.len == 0 {
            0
        } else {
            let h = self.head + n;
            h.checked_sub(self.buf.len()).unwrap_or(h)
        };
    }

    /// Appends `n` bytes, which `fill` writes into the two parts of free
    /// space it is given (together `n` bytes, in order).
    fn push_with(&mut self, n: usize, fill: impl FnOnce(&mut [u8], &mut [u8])) {
        if n == 0 {
            return;
        }
        self.reserve(n);
        let size = self.buf.len();
        let tail = self.head + self.len;
        let tail = tail.checked_sub(size).unwrap_or(tail);
        let first = n.min(size - tail);
        // The free space is `[tail, size)` then `[0, head)` when the queue
        // does not wrap, `[tail, head)` when it does: either way what does
        // not fit above `tail` goes at 0, below it.
        let (lo, hi) = self.buf.split_at_mut(tail);
        fill(&mut hi[..first], &mut lo[..n - first]);
        self.len += n;
    }

    /// Appends `data`.
    fn extend(&mut self, data: &[u8]) {
        self.push_with(data.len(), |a, b| {
            let (x, y) = data.split_at(a.len());
            a.copy_from_slice(x);
            b.copy_from_slice(y);
        });
    }

    /// Makes room for `n` more bytes.
    fn reserve(&mut self, n: usize) {
        let need = self.len + n;
        if need <= self.buf.len() {
            return;
        }
        let mut buf = vec![0u8; need.next_power_of_two().max(SLOT)];
        let (a, b) = self.as_slices();
        buf[..a.len()].copy_from_slice(a);
        buf[a.len()..self.len].copy_from_slice(b);
        self.buf = buf;
        self.head = 0;
    }
}

impl Inner {
    /// Takes room for a write the way Linux does and returns how many of
    /// the `remaining` bytes fit now: at the start of a write, its last
    /// partial page may join the newest buffer if it fits there; the rest
    /// goes into fresh page buffers while free slots last. A write of at
    /// most `PIPE_BUF` bytes thus goes in whole or not at all.
    fn fill(&mut self, total_len: usize, remaining: usize, first: bool) -> usize {
        let mut taken = 0;
        let tail = total_len % SLOT;
        if first && tail != 0 {
            if let Some(last) = self.slots.back_mut() {
                if *last + tail <= SLOT {
                    *last += tail;
                    taken = tail;
                }
            }
        }
        while taken < remaining && self.slots.len() < self.capacity / SLOT {
            let n = (remaining - taken).min(SLOT);
            self.slots.push_back(n);
            taken += n;
        }
        debug_assert!(total_len > PIPE_BUF || taken == 0 || taken == remaining);
        taken
    }

    /// Accounts for `n` bytes read from the front.
    fn consume(&mut self, mut n: usize) {
        while n > 0 {
            let Some(front) = self.slots.front_mut() else {
                return;
            };
            let k = n.min(*front);
            *front -= k;
            n -= k;
            if *front == 0 {
                self.slots.pop_front();
            }
        }
    }
}

impl fmt::Debug for Pipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = self.lock();
        write!(
            f,
            "Pipe({} bytes, {} readers, {} writers)",
            i.buf.len(),
            i.readers,
            i.writers
        )
    }
}

/// Outcome of a non-blocking attempt.
#[derive(Debug, PartialEq, Eq)]
pub enum Attempt {
    /// this many bytes moved
    Done(u64),
    /// nothing can move now; try again after the pipe changes
    WouldBlock,
}

impl Pipe {
    /// A new pipe with one reader and one writer.
    pub fn new() -> Arc<Pipe> {
        Arc::new(Pipe {
            inner: Mutex::new(Inner {
                buf: Ring::default(),
                slots: VecDeque::new(),
                capacity: DEFAULT_CAPACITY,
                readers: 1,
                writers: 1,
                reader_opens: 0,
                writer_opens: 0,
            }),
            rd_wait: WaitQueue::new(),
            wr_wait: WaitQueue::new(),
            generation: Default::default(),
            drained: Default::default(),
            readers_async: Default::default(),
            writers_async: Default::default(),
        })
    }

    /// A pipe holding `data` (a checkpoint's), with no ends open yet
    /// ([`Pipe::open_end`] opens them); `EINVAL` when it does not fit.
    pub fn with_contents(capacity: usize, data: &[u8]) -> Result<Arc<Pipe>, Errno> {
        let p = Pipe::new_fifo();
        p.set_capacity(capacity as u64)?;
        {
            let mut i = p.lock();
            if data.len() > i.capacity {
                return Err(Errno::EINVAL);
            }
            for chunk in data.chunks(SLOT) {
                i.slots.push_back(chunk.len());
                i.buf.extend(chunk);
            }
        }
        Ok(p)
    }

    /// The bytes queued, oldest first, without taking them.
    pub fn contents(&self) -> Vec<u8> {
        let i = self.lock();
        let mut out = vec![0u8; i.buf.len()];
        i.buf.peek(0, &mut out);
        out
    }

    /// A FIFO's pipe: no ends open until someone opens it.
    pub fn new_fifo() -> Arc<Pipe> {
        let p = Pipe::new();
        {
            let mut i = p.lock();
            i.readers = 0;
            i.writers = 0;
        }
        p
    }

    /// Opens one more end of the pipe (FIFO `open`).
    pub fn open_end(self: &Arc<Self>, reader: bool) -> PipeEnd {
        {
            let mut i = self.lock();
            if reader {
                i.readers += 1;
                i.reader_opens += 1;
            } else {
                i.writers += 1;
                i.writer_opens += 1;
            }
        }
        self.bump();
        PipeEnd {
            pipe: self.clone(),
            reader,
        }
    }

    /// Opens of the end opposite to `reader` so far, and how many are open.
    pub fn peer(&self, reader: bool) -> (u64, usize) {
        let i = self.lock();
        if reader {
            (i.writer_opens, i.writers)
        } else {
            (i.reader_opens, i.readers)
        }
    }

    /// fifo(7): a blocking open of one end waits until the other end is
    /// open, or was opened after `before` (the [`Pipe::peer`] count when
    /// the open began); a signal ends the wait (`ERESTARTSYS`).
    pub fn wait_for_peer(
        &self,
        reader: bool,
        before: u64,
        s: &dyn crate::kernel::wait::Sleeper,
    ) -> Result<(), Errno> {
        let waiter = s.waiter();
        let q = if reader { &self.rd_wait } else { &self.wr_wait };
        let _reg = crate::kernel::wait::Registration::new(waiter, std::slice::from_ref(q));
        loop {
            waiter.prepare();
            let (opens, open) = self.peer(reader);
            if open > 0 || opens != before {
                return Ok(());
            }
            if s.interrupted() {
                return Err(Errno::ERESTARTSYS);
            }
            waiter.sleep(None);
        }
    }

    /// Edge-triggered epoll's view of the pipe from one end: for the read
    /// end it changes when data arrives (or an end closes), for the write
    /// end when room is made (or an end closes).
    pub fn generation(&self, reader: bool) -> u64 {
        let g = self.generation.load(std::sync::atomic::Ordering::Relaxed);
        let d = self.drained.load(std::sync::atomic::Ordering::Relaxed);
        if reader {
            g
        } else {
            d
        }
    }

    fn bump(&self) {
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.drained
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.rd_wait.notify();
        self.wr_wait.notify();
    }

    /// After a read: only writers see an edge.
    fn bump_drained(&self) {
        self.drained
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.wr_wait.notify();
    }

    /// After a write: only readers see an edge.
    fn bump_filled(&self) {
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.rd_wait.notify();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.locked()
    }

    /// Reads what is available into guest memory.
    pub fn try_read(&self, bufs: &[GuestSlice]) -> Result<Attempt, Errno> {
        let total = {
            let mut i = self.lock();
            if i.buf.is_empty() {
                return Ok(if i.writers == 0 {
                    Attempt::Done(0)
                } else {
                    Attempt::WouldBlock
                });
            }
            let mut total = 0usize;
            for b in bufs {
                let (front, back) = i.buf.as_slices();
                let a = b.write_at(0, front);
                let n = a + b.write_at(a, back);
                i.buf.discard(n);
                i.consume(n);
                total += n;
                if n < b.len() || i.buf.is_empty() {
                    break;
                }
            }
            total
        };
        self.bump_drained();
        Ok(Attempt::Done(total as u64))
    }

    /// Writes guest memory into the pipe. `Err(EPIPE)` when no reader is
    /// left (the caller raises `SIGPIPE`).
    pub fn try_write(&self, bufs: &[GuestSlice], already: u64) -> Result<Attempt, Errno> {
        let total_len: usize = bufs.iter().map(GuestSlice::len).sum();
        let moved = {
            let mut i = self.lock();
            if i.readers == 0 {
                return Err(Errno::EPIPE);
            }
            let remaining = total_len - already as usize;
            let room = i.fill(total_len, remaining, already == 0);
            if room == 0 {
                return Ok(Attempt::WouldBlock);
            }
            let mut skip = already as usize;
            let mut moved = 0usize;
            for b in bufs {
                if skip >= b.len() {
                    skip -= b.len();
                    continue;
                }
                let n = (b.len() - skip).min(room - moved);
                i.buf.push_with(n, |x, y| {
                    b.read_at(skip, x);
                    b.read_at(skip + x.len(), y);
                });
                moved += n;
                skip = 0;
                if moved == room {
                    break;
                }
            }
            moved
        };
        self.bump_filled();
        Ok(Attempt::Done(moved as u64))
    }

    /// Bytes a splice may add now: whole free page buffers, since
    /// `splice`, `tee` and `vmsplice` fill fresh buffers and never join the
    /// newest partly filled one as `write` does. `EPIPE` with no reader.
    pub fn splice_room(&self) -> Result<usize, Errno> {
        let i = self.lock();
        if i.readers == 0 {
            return Err(Errno::EPIPE);
        }
        Ok((i.capacity / SLOT).saturating_sub(i.slots.len()) * SLOT)
    }

    /// Appends `data` in fresh page buffers while free ones last (the way
    /// splice fills a pipe); returns how much went in. `EPIPE` with no
    /// reader.
    pub fn push_pages(&self, data: &[u8]) -> Result<usize, Errno> {
        let moved = {
            let mut i = self.lock();
            if i.readers == 0 {
                return Err(Errno::EPIPE);
            }
            let mut moved = 0;
            while moved < data.len() && i.slots.len() < i.capacity / SLOT {
                let n = (data.len() - moved).min(SLOT);
                i.slots.push_back(n);
                i.buf.extend(&data[moved..moved + n]);
                moved += n;
            }
            moved
        };
        if moved > 0 {
            self.bump_filled();
        }
        Ok(moved)
    }

    /// Copies queued bytes from `skip` bytes in into `out` without taking
    /// them (`tee`, and splice's look before it knows how much the other
    /// side accepts); returns the count copied.
    pub fn peek(&self, skip: usize, out: &mut [u8]) -> usize {
        self.lock().buf.peek(skip, out)
    }

    /// Drops `n` bytes from the front, once a splice has delivered them.
    pub fn discard(&self, n: usize) {
        {
            let mut i = self.lock();
            let n = n.min(i.buf.len());
            i.buf.discard(n);
            i.consume(n);
        }
        self.bump_drained();
    }

    /// Bytes queued (`FIONREAD`).
    pub fn available(&self) -> usize {
        self.lock().buf.len()
    }

    /// `(readable, writable, hung_up)` for poll.
    pub fn poll_state(&self) -> (bool, bool, bool, bool) {
        let i = self.lock();
        (
            !i.buf.is_empty(),
            i.slots.len() < i.capacity / SLOT,
            i.writers == 0,
            i.readers == 0,
        )
    }

    /// `F_GETPIPE_SZ`.
    pub fn capacity(&self) -> usize {
        self.lock().capacity
    }

    /// `F_SETPIPE_SZ`: rounds up to a power of two of pages; `EBUSY` when
    /// the queued data would not fit.
    pub fn set_capacity(&self, want: u64) -> Result<usize, Errno> {
        if want > MAX_CAPACITY as u64 {
            return Err(Errno::EPERM);
        }
        let size = (want as usize).max(4096).next_power_of_two();
        let mut i = self.lock();
        if i.slots.len() > size / SLOT {
            return Err(Errno::EBUSY);
        }
        i.capacity = size;
        drop(i);
        // More room may let a writer go on (pipe_resize_ring()).
        self.wr_wait.notify();
        Ok(size)
    }

    fn close(&self, reader: bool) {
        let one_side_left = {
            let mut i = self.lock();
            if reader {
                i.readers -= 1;
            } else {
                i.writers -= 1;
            }
            (i.readers == 0) != (i.writers == 0)
        };
        self.bump();
        // pipe_release(): the last reader or writer gone while the other
        // side stays signals both lists (POLL_IN and POLL_OUT, not
        // POLL_HUP: a reader then sees end of file, a writer EPIPE).
        if one_side_left {
            self.readers_async.kill(crate::vfs::fasync::Reason::In);
            self.writers_async.kill(crate::vfs::fasync::Reason::Out);
        }
    }
}

/// One end of a pipe, held by an open file description; dropping the last
/// description of an end closes that end.
#[derive(Debug)]
pub struct PipeEnd {
    /// the pipe
    pub pipe: Arc<Pipe>,
    /// read end (else write end)
    pub reader: bool,
}

impl PipeEnd {
    /// The queue this end's blocked callers (and pollers) wait on.
    /// The pipe's number, as `fstat` and `/proc/PID/fd` show it.
    pub fn id(&self) -> u64 {
        Arc::as_ptr(&self.pipe) as u64 >> 4
    }

    pub fn waiters(&self) -> &WaitQueue {
        if self.reader {
            &self.pipe.rd_wait
        } else {
            &self.pipe.wr_wait
        }
    }

    /// The `O_ASYNC` list this end's descriptions join.
    pub fn fasync_lists(&self) -> [Option<&crate::vfs::fasync::Fasync>; 2] {
        if self.reader {
            [Some(&self.pipe.readers_async), None]
        } else {
            [None, Some(&self.pipe.writers_async)]
        }
    }
}

impl FileImpl for PipeEnd {
    fn read(
        &self,
        file: &FileDescription,
        blk: Blocker<'_>,
        bufs: &[GuestSlice],
        at: Option<u64>,
    ) -> Result<u64, Errno> {
        if at.is_some() {
            return Err(Errno::ESPIPE);
        }
        if !self.reader {
            return Err(Errno::EBADF);
        }
        let nonblock = file.nonblocking();
        if bufs.iter().all(GuestSlice::is_empty) {
            return Ok(0);
        }
        // Linux signals the writers' owners (O_ASYNC) before each
        // sleep and once when the read ends, whatever its outcome.
        let writers = &self.pipe.writers_async;
        let r = blk.block_on(
            std::slice::from_ref(&self.pipe.rd_wait),
            nonblock,
            || match self.pipe.try_read(bufs)? {
                Attempt::Done(n) => Ok(Some(n)),
                Attempt::WouldBlock => {
                    if !nonblock {
                        writers.kill(crate::vfs::fasync::Reason::Out);
                    }
                    Ok(None)
                }
            },
            || {
                let (readable, _, hup, _) = self.pipe.poll_state();
                readable || hup
            },
        );
        writers.kill(crate::vfs::fasync::Reason::Out);
        r
    }

    fn write(
        &self,
        file: &FileDescription,
        blk: Blocker<'_>,
        bufs: &[GuestSlice],
        at: Option<u64>,
    ) -> Result<u64, Errno> {
        if at.is_some() {
            return Err(Errno::ESPIPE);
        }
        let total_len: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        let nonblock = file.nonblocking();
        let mut done = 0u64;
        // Linux signals the readers' owners (O_ASYNC) before each
        // sleep and once when the write ends, whatever its outcome.
        let readers = &self.pipe.readers_async;
        let mut result = Ok(0);
        // Linux writes as much as fits, sleeping until everything is
        // written; a signal after partial progress returns the count.
        while done < total_len {
            let r = blk.block_on(
                std::slice::from_ref(&self.pipe.wr_wait),
                nonblock,
                || match self.pipe.try_write(bufs, done)? {
                    Attempt::Done(n) => Ok(Some(n)),
                    Attempt::WouldBlock => {
                        if !nonblock {
                            readers.kill(crate::vfs::fasync::Reason::In);
                        }
                        Ok(None)
                    }
                },
                || {
                    let (_, writable, _, no_readers) = self.pipe.poll_state();
                    writable || no_readers
                },
            );
            match r {
                Ok(n) => done += n,
                Err(e) if done > 0 && (e == Errno::EAGAIN || e.is_restart()) => break,
                // pipe_write(): the count of what went in, and SIGPIPE.
                Err(Errno::EPIPE) if done > 0 => {
                    blk.caller.raise_sigpipe();
                    break;
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if total_len > 0 {
            readers.kill(crate::vfs::fasync::Reason::In);
        }
        result.map(|_: u64| done)
    }

    fn poll(&self, _caller: &dyn Caller, _events: i16, _depth: u32) -> i16 {
        use abi::poll::*;
        let (readable, writable, no_writers, no_readers) = self.pipe.poll_state();
        if self.reader {
            (if readable { POLLIN | POLLRDNORM } else { 0 }) | if no_writers { POLLHUP } else { 0 }
        } else {
            (if writable { POLLOUT | POLLWRNORM } else { 0 }) | if no_readers { POLLERR } else { 0 }
        }
    }

    fn generation(&self) -> u64 {
        self.pipe.generation(self.reader)
    }

    // A FIFO owned by the caller.
    fn stat(&self, _file: &FileDescription) -> Result<abi::Stat, Errno> {
        let mut st = crate::vfs::pipe_stat_like(abi::S_IFIFO | 0o600);
        st.ino = self.id();
        Ok(st)
    }

    fn fasync_lists(&self) -> Option<[Option<&crate::vfs::fasync::Fasync>; 2]> {
        Some(PipeEnd::fasync_lists(self))
    }

    fn link_name(&self) -> Option<Vec<u8>> {
        Some(format!("pipe:[{}]", self.id()).into_bytes())
    }

    fn bytes_readable(&self) -> Option<Result<i32, Errno>> {
        Some(Ok(self.pipe.available() as i32))
    }

    fn wait_queues(&self, out: &mut Vec<WaitQueue>, _depth: u32) -> bool {
        out.push(self.waiters().clone());
        false
    }
}

impl Drop for PipeEnd {
    fn drop(&mut self) {
        self.pipe.close(self.reader);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(r: &Ring) -> Vec<u8> {
        let (a, b) = r.as_slices();
        [a, b].concat()
    }

    #[test]
    fn the_ring_wraps_and_grows_keeping_order() {
        let mut r = Ring::default();
        let page: Vec<u8> = (0..SLOT).map(|i| i as u8).collect();
        r.extend(&page[..3000]);
        r.discard(2000);
        // 1000 queued at 2000..3000; 2500 more wrap around the end.
        r.extend(&page[..2500]);
        assert_eq!(r.buf.len(), SLOT, "no growth while it fits");
        assert!(!r.as_slices().1.is_empty(), "wrapped");
        let want: Vec<u8> = page[2000..3000]
            .iter()
            .chain(&page[..2500])
            .copied()
            .collect();
        assert_eq!(queued(&r), want);
        let mut out = [0u8; 10];
        assert_eq!(r.peek(995, &mut out), 10);
        assert_eq!(out[..], want[995..1005]);
        assert_eq!(r.peek(3495, &mut out), 5);
        assert_eq!(r.peek(9999, &mut out), 0);
        // Growing unwraps the queue into a larger buffer.
        r.extend(&page);
        assert_eq!(r.buf.len(), 2 * SLOT);
        let want: Vec<u8> = want.iter().chain(&page).copied().collect();
        assert_eq!(queued(&r), want);
        r.discard(usize::MAX);
        assert!(r.is_empty());
        assert_eq!(r.len(), 0);
    }

    #[test]
    fn filling_gets_the_free_space_in_order() {
        let mut r = Ring::default();
        r.extend(&[0; SLOT - 2]);
        r.discard(SLOT - 3);
        r.push_with(5, |a, b| {
            assert_eq!((a.len(), b.len()), (2, 3));
            a.copy_from_slice(&[1, 2]);
            b.copy_from_slice(&[3, 4, 5]);
        });
        assert_eq!(queued(&r), [0, 1, 2, 3, 4, 5]);
    }
}
