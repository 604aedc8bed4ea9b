//! Pipes: a bounded byte queue between a read end and a write end, with
//! Linux's capacity (64 KiB by default) and `PIPE_BUF` atomicity.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};

use abi::Errno;

use crate::kernel::EventBus;
use crate::mm::GuestSlice;

/// Default capacity (`/proc/sys/fs/pipe-max-size` bounds `F_SETPIPE_SZ`).
pub const DEFAULT_CAPACITY: usize = 65536;
/// Largest capacity `F_SETPIPE_SZ` may ask for (`pipe-max-size`).
pub const MAX_CAPACITY: usize = 1 << 20;
/// Writes up to this size are atomic.
pub const PIPE_BUF: usize = 4096;

/// The shared state of one pipe.
pub struct Pipe {
    inner: Mutex<Inner>,
    bus: Arc<EventBus>,
    generation: std::sync::atomic::AtomicU64,
    drained: std::sync::atomic::AtomicU64,
    /// read-end descriptions with `O_ASYNC` (signalled by every write)
    pub readers_async: crate::kernel::fasync::Fasync,
    /// write-end descriptions with `O_ASYNC` (signalled by every read)
    pub writers_async: crate::kernel::fasync::Fasync,
}

struct Inner {
    buf: VecDeque<u8>,
    /// bytes in each page-sized buffer, oldest first (Linux's pipe slots:
    /// a slot frees only when read empty, and room is counted in slots)
    slots: VecDeque<usize>,
    capacity: usize,
    readers: usize,
    writers: usize,
}

/// Size of one pipe buffer (a page).
const SLOT: usize = 4096;

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
    pub fn new(bus: Arc<EventBus>) -> Arc<Pipe> {
        Arc::new(Pipe {
            inner: Mutex::new(Inner {
                buf: VecDeque::new(),
                slots: VecDeque::new(),
                capacity: DEFAULT_CAPACITY,
                readers: 1,
                writers: 1,
            }),
            bus,
            generation: Default::default(),
            drained: Default::default(),
            readers_async: Default::default(),
            writers_async: Default::default(),
        })
    }

    /// A FIFO's pipe: no ends open until someone opens it.
    pub fn new_fifo(bus: Arc<EventBus>) -> Arc<Pipe> {
        let p = Pipe::new(bus);
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
            } else {
                i.writers += 1;
            }
        }
        self.bump();
        PipeEnd {
            pipe: self.clone(),
            reader,
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
        self.bus.notify();
    }

    /// After a read: only writers see an edge.
    fn bump_drained(&self) {
        self.drained
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.bus.notify();
    }

    /// After a write: only readers see an edge.
    fn bump_filled(&self) {
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.bus.notify();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
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
                let n = b.len.min(i.buf.len());
                let (front, back) = i.buf.as_slices();
                let a = n.min(front.len());
                // SAFETY: guest slices are valid for `len` bytes of the
                // memory file mapping; the sources are the pipe's own buffer.
                unsafe {
                    std::ptr::copy_nonoverlapping(front.as_ptr(), b.ptr, a);
                    std::ptr::copy_nonoverlapping(back.as_ptr(), b.ptr.add(a), n - a);
                }
                i.buf.drain(..n);
                i.consume(n);
                total += n;
                if n < b.len || i.buf.is_empty() {
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
        let total_len: usize = bufs.iter().map(|b| b.len).sum();
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
                if skip >= b.len {
                    skip -= b.len;
                    continue;
                }
                let n = (b.len - skip).min(room - moved);
                // SAFETY: guest slices are valid for `len` bytes.
                let src = unsafe { std::slice::from_raw_parts(b.ptr.add(skip), n) };
                i.buf.extend(src);
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
        let i = self.lock();
        let avail = i.buf.len().saturating_sub(skip);
        let n = avail.min(out.len());
        for (o, b) in out[..n].iter_mut().zip(i.buf.range(skip..skip + n)) {
            *o = *b;
        }
        n
    }

    /// Drops `n` bytes from the front, once a splice has delivered them.
    pub fn discard(&self, n: usize) {
        {
            let mut i = self.lock();
            let n = n.min(i.buf.len());
            i.buf.drain(..n);
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
            self.readers_async.kill(crate::kernel::fasync::Reason::In);
            self.writers_async.kill(crate::kernel::fasync::Reason::Out);
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
    /// The `O_ASYNC` list this end's descriptions join.
    pub fn fasync_lists(&self) -> [Option<&crate::kernel::fasync::Fasync>; 2] {
        if self.reader {
            [Some(&self.pipe.readers_async), None]
        } else {
            [None, Some(&self.pipe.writers_async)]
        }
    }
}

impl Drop for PipeEnd {
    fn drop(&mut self) {
        self.pipe.close(self.reader);
    }
}
