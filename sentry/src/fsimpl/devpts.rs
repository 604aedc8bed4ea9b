//! Pseudo-terminals (pty(7)): opening `/dev/ptmx` allocates a master and a
//! slave (`/dev/pts/N`) that share one terminal: a line discipline (termios(3)
//! canonical and raw input, echo, output processing) and the job-control
//! state of a controlling terminal (session, foreground process group).
//!
//! Every queue is bounded as Linux bounds it: 4096 bytes in the line
//! discipline (`N_TTY_BUF_SIZE`), 64 KiB waiting in front of it and 64 KiB
//! of output, so a guest that never reads cannot make the Sentry grow.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use abi::signal::{SIGCONT, SIGHUP, SIGINT, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGWINCH};
use abi::tty::*;
use abi::{Errno, Termio, Termios, Termios2, Winsize};
use zerocopy::{FromBytes, IntoBytes};

use crate::kernel::task::Thread;
use crate::kernel::wait::WaitQueue;
use crate::kernel::Kernel;
use crate::mm::snapshot::{bad, Bad, Dec, Enc};
use crate::mm::GuestSlice;
use crate::sync::Locked;
use crate::vfs::file::{Blocker, Caller, FileDescription, FileImpl};

pub use abi::tty::UNIX98_PTY_SLAVE_MAJOR as PTS_MAJOR;
/// Most pairs open at once (Linux's `kernel.pty.max` is 4096; each pair
/// here may hold about 130 KiB of queued bytes, hence a smaller bound).
pub const MAX_PTYS: usize = 256;
/// The line discipline's buffer (`N_TTY_BUF_SIZE`): a canonical line holds
/// at most 4095 bytes plus its terminator.
const N_TTY_BUF_SIZE: usize = 4096;
/// Bytes written to the master that the line discipline has not taken yet
/// (Linux's tty buffer limit, `TTYB_DEFAULT_MEM_LIMIT`).
const INPUT_CAP: usize = 65536;
/// Bytes written to the slave that the master has not read yet.
const OUTPUT_CAP: usize = 65536;

/// The `/dev/pts` instance of a sandbox: the live pairs by index.
#[derive(Default)]
pub struct Devpts {
    ptys: Mutex<BTreeMap<u32, Arc<Pty>>>,
    kernel: OnceLock<Weak<Kernel>>,
}

impl fmt::Debug for Devpts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Devpts({:?})", self.indices())
    }
}

impl Devpts {
    /// Ties the instance to its sandbox (wake-ups, hang-up signals).
    pub fn attach(&self, kernel: &Arc<Kernel>) {
        let _ = self.kernel.set(Arc::downgrade(kernel));
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<u32, Arc<Pty>>> {
        self.ptys.locked()
    }

    /// Allocates a pair at the lowest free index (`ENOSPC` when full, as
    /// Linux answers past `kernel.pty.max`) and returns its master end.
    pub fn allocate(self: &Arc<Self>) -> Result<PtyEnd, Errno> {
        let kernel = self.kernel.get().cloned().ok_or(Errno::EIO)?;
        let mut map = self.lock();
        if map.len() >= MAX_PTYS {
            return Err(Errno::ENOSPC);
        }
        let index = (0u32..)
            .find(|i| !map.contains_key(i))
            .ok_or(Errno::ENOSPC)?;
        let pty = self.insert(&mut map, kernel, index, Inner::new());
        Ok(PtyEnd {
            pty,
            master: true,
            opened_at: 0,
        })
    }

    /// A new pair at `index` (free in `map`) with terminal state `inner`.
    fn insert(
        self: &Arc<Self>,
        map: &mut BTreeMap<u32, Arc<Pty>>,
        kernel: Weak<Kernel>,
        index: u32,
        inner: Inner,
    ) -> Arc<Pty> {
        let pty = Arc::new(Pty {
            index,
            devpts: Arc::downgrade(self),
            kernel,
            waiters: WaitQueue::new(),
            inner: Mutex::new(inner),
            fasync: Default::default(),
        });
        map.insert(index, pty.clone());
        pty
    }

    /// The pair with slave `/dev/pts/index`, while its master is open.
    pub fn get(&self, index: u32) -> Option<Arc<Pty>> {
        self.lock().get(&index).cloned()
    }

    /// Indices of the live pairs, for listing `/dev/pts`.
    pub fn indices(&self) -> Vec<u32> {
        self.lock().keys().copied().collect()
    }
}

/// One master/slave pair.
pub struct Pty {
    /// `N` of `/dev/pts/N`
    pub index: u32,
    devpts: Weak<Devpts>,
    kernel: Weak<Kernel>,
    /// readers and writers of both ends waiting for a change of the pair
    pub waiters: WaitQueue,
    inner: Mutex<Inner>,
    /// descriptions of the slave (0) and of the master (1) with `O_ASYNC`
    fasync: [crate::vfs::fasync::Fasync; 2],
}

impl fmt::Debug for Pty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pty({})", self.index)
    }
}

/// The shared terminal state.
struct Inner {
    termios: Termios,
    ispeed: u32,
    ospeed: u32,
    winsize: Winsize,
    /// `TIOCSPTLCK`: the slave cannot be opened while locked
    locked: bool,
    /// `TIOCEXCL` of the slave and of the master (each end has its own;
    /// recorded for `TIOCGEXCL`, not enforced, as for a privileged opener)
    exclusive: [bool; 2],
    /// the master is open (once closed, the slave is hung up for good)
    master_open: bool,
    /// `vhangup(2)`s so far: a slave description opened before the last
    /// one is hung up, later ones are not
    vhangups: u64,
    /// open slave descriptions
    slaves: usize,
    /// the slave was opened and every opening is closed again (Linux's
    /// `TTY_OTHER_CLOSED` on the master): master reads give `EIO`
    slave_closed: bool,
    /// session this is the controlling terminal of (0: none)
    session: i32,
    /// foreground process group (0: none)
    pgrp: i32,
    /// written to the master, not yet through the line discipline
    pending: VecDeque<u8>,
    /// what the slave may read: in canonical mode only complete lines
    ready: VecDeque<u8>,
    /// canonical mode: lengths of the complete lines in `ready` (a line
    /// ended by `VEOF` has no terminator and may be empty)
    lines: VecDeque<usize>,
    /// canonical mode: the line being edited
    edit: Vec<u8>,
    /// output column where the edited line began (tab erasure)
    edit_col: u32,
    /// the previous input byte was `VLNEXT`
    lnext: bool,
    /// output stopped by `VSTOP` (`IXON`) or `TCOOFF`
    stopped: bool,
    /// output stopped by `TCOOFF`: only `TCOON` restarts it
    tco_stopped: bool,
    /// the master's output (its writes) stopped by `TCOOFF` on it
    master_stopped: bool,
    /// output column (`ONOCR`, tab erasure)
    column: u32,
    /// written to the slave (and echoes), for the master to read
    output: VecDeque<u8>,
    /// `TIOCPKT`: master reads begin with a control byte
    packet: bool,
    /// packet mode's pending status (`TIOCPKT_FLUSHREAD`, ...): the
    /// master's next read returns it alone
    pktstatus: u8,
    /// what became readable since the last look (`WAKE_SLAVE`,
    /// `WAKE_MASTER`), for `O_ASYNC` signals
    wake: u8,
    /// a write of the slave (0) or master (1) ended with bytes left while
    /// that end had `O_ASYNC` descriptions (`TTY_DO_WRITE_WAKEUP`): the
    /// other end's reading its queue down signals `POLL_OUT`
    write_wakeup: [bool; 2],
}

/// A pty end that has read its queue down to this many bytes lets the
/// other end's blocked writer go on (`TTY_THRESHOLD_UNTHROTTLE`).
const UNTHROTTLE: usize = 128;

/// The slave got something to read (`wake`).
const WAKE_SLAVE: u8 = 1;
/// The master got something to read (`wake`).
const WAKE_MASTER: u8 = 2;

/// Packet mode's control bytes (ioctl_tty(2) `TIOCPKT`).
pub mod pkt {
    pub use abi::tty::{
        TIOCPKT_DATA as DATA, TIOCPKT_DOSTOP as DOSTOP, TIOCPKT_FLUSHREAD as FLUSHREAD,
        TIOCPKT_FLUSHWRITE as FLUSHWRITE, TIOCPKT_IOCTL as IOCTL, TIOCPKT_NOSTOP as NOSTOP,
        TIOCPKT_START as START, TIOCPKT_STOP as STOP,
    };
}

/// Signals the line discipline raised, for the foreground group, sent once
/// the terminal's lock is released.
type Raised = Vec<(i32, i32)>;

impl Inner {
    fn new() -> Self {
        let mut cc = [0u8; 19];
        for (i, v) in [
            (VINTR, 0x03),
            (VQUIT, 0x1c),
            (VERASE, 0x7f),
            (VKILL, 0x15),
            (VEOF, 0x04),
            (VMIN, 1),
            (VSTART, 0x11),
            (VSTOP, 0x13),
            (VSUSP, 0x1a),
            (VREPRINT, 0x12),
            (13, 0x0f), // VDISCARD
            (VWERASE, 0x17),
            (VLNEXT, 0x16),
        ] {
            cc[i] = v;
        }
        Inner {
            // Linux's `tty_std_termios` for a pty slave.
            termios: Termios {
                iflag: ICRNL | IXON,
                oflag: OPOST | ONLCR,
                cflag: B38400 | CS8 | CREAD,
                lflag: ISIG | ICANON | ECHO | ECHOE | ECHOK | ECHOCTL | ECHOKE | IEXTEN,
                line: 0,
                cc,
            },
            ispeed: 38400,
            ospeed: 38400,
            winsize: Winsize {
                row: 0,
                col: 0,
                xpixel: 0,
                ypixel: 0,
            },
            locked: true,
            exclusive: [false; 2],
            master_open: true,
            slaves: 0,
            slave_closed: false,
            vhangups: 0,
            session: 0,
            pgrp: 0,
            pending: VecDeque::new(),
            ready: VecDeque::new(),
            lines: VecDeque::new(),
            edit: Vec::new(),
            edit_col: 0,
            lnext: false,
            stopped: false,
            tco_stopped: false,
            master_stopped: false,
            column: 0,
            output: VecDeque::new(),
            packet: false,
            pktstatus: 0,
            wake: 0,
            write_wakeup: [false; 2],
        }
    }

    /// Records a status change for a master in packet mode (the slave's
    /// `ctrl.pktstatus`, which only changes while the master asked).
    fn pkt_status(&mut self, set: u8, clear: u8) {
        if self.packet {
            self.pktstatus = (self.pktstatus & !clear) | set;
        }
    }

    /// `stop_tty()` of the slave: output stops (pty_stop()).
    fn stop(&mut self) {
        if !self.stopped {
            self.stopped = true;
            self.pkt_status(pkt::STOP, pkt::START);
        }
    }

    /// `start_tty()` of the slave: output restarts (pty_start()).
    fn start(&mut self) {
        if self.stopped && !self.tco_stopped {
            self.stopped = false;
            self.pkt_status(pkt::START, pkt::STOP);
        }
    }

    fn l(&self, f: u32) -> bool {
        self.termios.lflag & f != 0
    }

    fn i(&self, f: u32) -> bool {
        self.termios.iflag & f != 0
    }

    fn o(&self, f: u32) -> bool {
        self.termios.oflag & f != 0
    }

    /// Whether `c` is the (enabled) special character `idx`.
    fn is_cc(&self, c: u8, idx: usize) -> bool {
        let v = self.termios.cc[idx];
        v != 0 && v == c
    }

    fn canonical(&self) -> bool {
        self.l(ICANON)
    }

    /// Whether a read of the slave could return data now (poll's `amt`:
    /// in raw mode with `VTIME` 0, `VMIN` bytes).
    fn slave_readable(&self, for_poll: bool) -> bool {
        if self.canonical() {
            return !self.lines.is_empty();
        }
        let min = usize::from(self.termios.cc[VMIN]);
        let amt = if for_poll && self.termios.cc[VTIME] == 0 && min > 0 {
            min
        } else {
            1
        };
        self.ready.len() >= amt
    }

    /// Bytes the slave would count with `FIONREAD`: complete lines only in
    /// canonical mode.
    fn slave_inq(&self) -> usize {
        if self.canonical() {
            self.lines.iter().sum()
        } else {
            self.ready.len()
        }
    }

    fn used(&self) -> usize {
        self.ready.len() + self.edit.len()
    }

    /// Passes pending master writes through the line discipline while it
    /// has room; returns the signals to raise.
    fn feed(&mut self) -> Raised {
        let mut raised = Vec::new();
        while let Some(&c) = self.pending.front() {
            // Linux stops receiving when the buffer is full, except in
            // canonical mode with no complete line: there the last byte is
            // overwritten so that a line end can still get in.
            if self.used() >= N_TTY_BUF_SIZE - 1 && (!self.canonical() || !self.lines.is_empty()) {
                break;
            }
            self.pending.pop_front();
            if let Some(sig) = self.receive(c) {
                if self.pgrp != 0 {
                    raised.push((self.pgrp, sig));
                }
            }
        }
        raised
    }

    /// One input byte through the line discipline (n_tty's receive path).
    fn receive(&mut self, mut c: u8) -> Option<i32> {
        if self.i(ISTRIP) {
            c &= 0x7f;
        }
        if self.lnext {
            self.lnext = false;
            if self.l(ECHO) {
                // Over the "^" that VLNEXT left under the cursor.
                self.echo_char(c);
            }
            self.store(c);
            return None;
        }
        if self.i(IXON) {
            if self.is_cc(c, VSTART) {
                self.start();
                return None;
            }
            if self.is_cc(c, VSTOP) {
                self.stop();
                return None;
            }
            if self.stopped && !self.tco_stopped && self.i(IXANY) {
                self.start();
            }
        }
        if self.l(ISIG) {
            let sig = if self.is_cc(c, VINTR) {
                Some(SIGINT)
            } else if self.is_cc(c, VQUIT) {
                Some(SIGQUIT)
            } else if self.is_cc(c, VSUSP) {
                Some(SIGTSTP)
            } else {
                None
            };
            if let Some(sig) = sig {
                if !self.l(NOFLSH) {
                    // isig(): the slave's output and input are flushed,
                    // which a master in packet mode hears of.
                    self.reset_ldisc();
                    self.pkt_status(pkt::FLUSHREAD | pkt::FLUSHWRITE, 0);
                }
                if self.i(IXON) {
                    self.start();
                }
                if self.l(ECHO) {
                    self.echo_char(c);
                }
                return Some(sig);
            }
        }
        if c == b'\r' {
            if self.i(IGNCR) {
                return None;
            }
            if self.i(ICRNL) {
                c = b'\n';
            }
        } else if c == b'\n' && self.i(INLCR) {
            c = b'\r';
        }
        if self.canonical() {
            let iexten = self.l(IEXTEN);
            if self.is_cc(c, VERASE) {
                self.erase(EraseKind::Char);
                return None;
            }
            if self.is_cc(c, VKILL) {
                self.erase(EraseKind::Line);
                return None;
            }
            if iexten && self.is_cc(c, VWERASE) {
                self.erase(EraseKind::Word);
                return None;
            }
            if iexten && self.is_cc(c, VLNEXT) {
                self.lnext = true;
                if self.l(ECHO) && self.l(ECHOCTL) {
                    // A "^" with the cursor left on it.
                    self.put_raw(b"^\x08");
                }
                return None;
            }
            if iexten && self.l(ECHO) && self.is_cc(c, VREPRINT) {
                self.echo_char(c);
                self.echo_opost(b'\n');
                self.edit_col = self.column;
                for b in self.edit.clone() {
                    self.echo_char(b);
                }
                return None;
            }
            if c == b'\n' {
                if self.l(ECHO) || self.l(ECHONL) {
                    self.echo_opost(b'\n');
                }
                self.store(c);
                self.end_line();
                return None;
            }
            if self.is_cc(c, VEOF) {
                self.end_line();
                return None;
            }
            if self.is_cc(c, VEOL) || (iexten && self.is_cc(c, VEOL2)) {
                if self.l(ECHO) {
                    self.echo_char(c);
                }
                self.store(c);
                self.end_line();
                return None;
            }
        }
        if self.l(ECHO) {
            if c == b'\n' {
                self.echo_opost(b'\n');
            } else {
                if self.canonical() && self.edit.is_empty() {
                    self.edit_col = self.column;
                }
                self.echo_char(c);
            }
        }
        self.store(c);
        None
    }

    /// Keeps an input byte: on the edited line (canonical) or readable.
    fn store(&mut self, c: u8) {
        if self.canonical() {
            if self.used() >= N_TTY_BUF_SIZE - 1 && self.edit.pop().is_none() {
                return;
            }
            self.edit.push(c);
        } else if self.ready.len() < N_TTY_BUF_SIZE {
            self.ready.push_back(c);
            self.wake |= WAKE_SLAVE;
        }
    }

    /// Makes the edited line readable.
    fn end_line(&mut self) {
        let n = self.edit.len();
        self.ready.extend(self.edit.drain(..));
        self.lines.push_back(n);
        self.wake |= WAKE_SLAVE;
    }

    /// `VERASE`, `VWERASE`, `VKILL` with their echoes (n_tty's eraser()).
    fn erase(&mut self, kind: EraseKind) {
        if self.edit.is_empty() {
            return;
        }
        let echo = self.l(ECHO);
        if kind == EraseKind::Line && (!echo || !self.l(ECHOK) || !self.l(ECHOKE) || !self.l(ECHOE))
        {
            self.edit.clear();
            if echo {
                self.echo_char(self.termios.cc[VKILL]);
                if self.l(ECHOK) {
                    self.echo_opost(b'\n');
                }
            }
            return;
        }
        let utf8 = self.i(IUTF8);
        let mut seen_alnum = false;
        while let Some(&last) = self.edit.last() {
            if kind == EraseKind::Word {
                if last.is_ascii_alphanumeric() || last == b'_' {
                    seen_alnum = true;
                } else if seen_alnum {
                    break;
                }
            }
            // One possibly multi-byte character.
            let mut c = last;
            self.edit.pop();
            while utf8 && c & 0xc0 == 0x80 {
                match self.edit.pop() {
                    Some(b) => c = b,
                    None => break,
                }
            }
            if echo {
                if kind == EraseKind::Char && !self.l(ECHOE) {
                    self.echo_char(self.termios.cc[VERASE]);
                } else if c == b'\t' {
                    let col = self.edit_column();
                    let back = ((self.column.max(col)) - col).min(8);
                    for _ in 0..back {
                        self.put_raw(b"\x08");
                    }
                    self.column = self.column.saturating_sub(back);
                } else {
                    let ctl = c.is_ascii_control();
                    let n = if ctl && self.l(ECHOCTL) {
                        2
                    } else if ctl {
                        0
                    } else {
                        1
                    };
                    for _ in 0..n {
                        self.put_raw(b"\x08 \x08");
                    }
                    self.column = self.column.saturating_sub(n);
                }
            }
            if kind == EraseKind::Char {
                break;
            }
        }
    }

    /// The output column after echoing the edited line from its start.
    fn edit_column(&self) -> u32 {
        let mut col = self.edit_col;
        for &b in &self.edit {
            if b == b'\t' {
                col = (col | 7) + 1;
            } else if b.is_ascii_control() {
                if self.l(ECHOCTL) {
                    col += 2;
                }
            } else if !(self.i(IUTF8) && b & 0xc0 == 0x80) {
                col += 1;
            }
        }
        col
    }

    /// Echoes an input byte: a control character as `^X` under `ECHOCTL`
    /// (tab and newline as themselves).
    fn echo_char(&mut self, c: u8) {
        if self.l(ECHOCTL) && (c.is_ascii_control()) && c != b'\t' && c != b'\n' {
            self.put_raw(&[b'^', c ^ 0o100]);
            self.column += 2;
        } else {
            self.echo_opost(c);
        }
    }

    fn echo_opost(&mut self, c: u8) {
        self.opost(c);
    }

    /// Queues bytes for the master as they are.
    fn put_raw(&mut self, b: &[u8]) {
        if self.output.len() + b.len() <= OUTPUT_CAP {
            self.output.extend(b);
            self.wake |= WAKE_MASTER;
        }
    }

    /// Output processing of one byte (`OPOST` and friends); `false` when
    /// the output queue has no room.
    fn opost(&mut self, c: u8) -> bool {
        if self.output.len() + 2 > OUTPUT_CAP {
            return false;
        }
        self.wake |= WAKE_MASTER;
        if !self.o(OPOST) {
            self.output.push_back(c);
            return true;
        }
        match c {
            b'\n' => {
                if self.o(ONLRET) {
                    self.column = 0;
                }
                if self.o(ONLCR) {
                    self.column = 0;
                    self.output.extend(b"\r\n");
                    return true;
                }
                self.output.push_back(c);
            }
            b'\r' => {
                if self.o(ONOCR) && self.column == 0 {
                    return true;
                }
                if self.o(OCRNL) {
                    if self.o(ONLRET) {
                        self.column = 0;
                    }
                    self.output.push_back(b'\n');
                    return true;
                }
                self.column = 0;
                self.output.push_back(c);
            }
            b'\t' => {
                let spaces = 8 - (self.column & 7);
                if self.termios.oflag & TABDLY == XTABS {
                    if self.output.len() + spaces as usize > OUTPUT_CAP {
                        return false;
                    }
                    for _ in 0..spaces {
                        self.output.push_back(b' ');
                    }
                } else {
                    self.output.push_back(c);
                }
                self.column += spaces;
            }
            0x08 => {
                self.column = self.column.saturating_sub(1);
                self.output.push_back(c);
            }
            _ => {
                if !c.is_ascii_control() {
                    self.column += 1;
                }
                self.output.push_back(c);
            }
        }
        true
    }

    /// `TCIFLUSH`: everything typed and not read yet.
    fn flush_input(&mut self) {
        self.pending.clear();
        self.reset_ldisc();
    }

    /// Empties the line discipline (what `ISIG` characters flush; bytes
    /// written after them still arrive).
    fn reset_ldisc(&mut self) {
        self.ready.clear();
        self.lines.clear();
        self.edit.clear();
        self.lnext = false;
    }

    /// New termios: switching between canonical and raw mode keeps what
    /// was typed (a partial line becomes readable in raw mode; what raw
    /// mode had queued becomes one readable line in canonical mode).
    fn set_termios(&mut self, t: Termios) {
        let was_canon = self.canonical();
        let old = self.termios;
        self.termios = Termios {
            line: self.termios.line,
            ..t
        };
        // pty_set_termios(): a master in packet mode learns whether ^S/^Q
        // flow control is in force, and of any change under EXTPROC.
        let flow = |t: &Termios| t.iflag & IXON != 0 && t.cc[VSTOP] == 0x13 && t.cc[VSTART] == 0x11;
        let (old_flow, new_flow) = (flow(&old), flow(&self.termios));
        if old_flow != new_flow {
            let set = if new_flow { pkt::DOSTOP } else { pkt::NOSTOP };
            self.pkt_status(set, pkt::DOSTOP | pkt::NOSTOP);
        }
        if (old.lflag | self.termios.lflag) & EXTPROC != 0 {
            self.pkt_status(pkt::IOCTL, 0);
        }
        // A pty's "line" always has 8 data bits, no parity, a receiver.
        self.termios.cflag = (self.termios.cflag & !(CSIZE | PARENB)) | CS8 | CREAD;
        let canon = self.canonical();
        if was_canon && !canon {
            self.ready.extend(self.edit.drain(..));
            self.lines.clear();
        } else if !was_canon && canon {
            self.lines.clear();
            if !self.ready.is_empty() {
                self.lines.push_back(self.ready.len());
            }
        }
        if !self.i(IXON) && old.iflag & IXON != 0 {
            self.start();
        }
    }

    /// Copies up to `max` readable bytes for the slave (one line at most in
    /// canonical mode). `None` when nothing is readable.
    fn take_input(&mut self, max: usize) -> Option<Vec<u8>> {
        if self.canonical() {
            let line = *self.lines.front()?;
            let n = line.min(max).min(self.ready.len());
            let out: Vec<u8> = self.ready.drain(..n).collect();
            if n == line {
                self.lines.pop_front();
            } else if let Some(l) = self.lines.front_mut() {
                *l -= n;
            }
            Some(out)
        } else {
            if self.ready.is_empty() {
                return None;
            }
            let n = self.ready.len().min(max);
            Some(self.ready.drain(..n).collect())
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum EraseKind {
    Char,
    Word,
    Line,
}

/// One end of a pair, held by an open file description; dropping the last
/// description of an end closes it.
#[derive(Debug)]
pub struct PtyEnd {
    /// the pair
    pub pty: Arc<Pty>,
    /// the master (`/dev/ptmx`), else the slave
    pub master: bool,
    /// the pair's `vhangups` when this slave description was opened
    opened_at: u64,
}

impl PtyEnd {
    /// Whether this description reads end of file and fails writes: the
    /// master closed, or a `vhangup` since this slave was opened
    /// (hung_up_tty_fops).
    fn hung(&self, i: &Inner) -> bool {
        !i.master_open || (!self.master && i.vhangups != self.opened_at)
    }

    /// [`PtyEnd::hung`], for a slave, taking the lock.
    fn slave_hung(&self) -> bool {
        !self.master && self.hung(&self.pty.lock())
    }

    /// The `O_ASYNC` list of this end.
    pub fn fasync(&self) -> &crate::vfs::fasync::Fasync {
        &self.pty.fasync[usize::from(self.master)]
    }

    /// A write of this end ends with bytes left: with `O_ASYNC`
    /// descriptions on it, the other end's reading will signal it
    /// (n_tty_write()'s `TTY_DO_WRITE_WAKEUP`).
    fn note_write_left(&self) {
        if !self.fasync().is_empty() {
            self.pty.lock().write_wakeup[usize::from(self.master)] = true;
        }
    }
}

impl FileImpl for PtyEnd {
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
        read(blk, self, bufs, file.nonblocking())
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
        write(blk, self, bufs, file.nonblocking())
    }

    fn poll(&self, _caller: &dyn Caller, _events: i16, _depth: u32) -> i16 {
        poll_events(self)
    }

    fn generation(&self) -> u64 {
        // (the top bit is free: queue lengths never reach it)
        self.pty.generation(self.master) | u64::from(self.slave_hung()) << 63
    }

    // The device node it was opened at.
    fn stat(&self, file: &FileDescription) -> Result<abi::Stat, Errno> {
        file.location.as_ref().ok_or(Errno::EBADF)?.node().stat()
    }

    fn fasync_lists(&self) -> Option<[Option<&crate::vfs::fasync::Fasync>; 2]> {
        Some([Some(self.fasync()), None])
    }

    fn wait_queues(&self, out: &mut Vec<WaitQueue>, _depth: u32) -> bool {
        out.push(self.pty.waiters.clone());
        false
    }
}

impl Drop for PtyEnd {
    fn drop(&mut self) {
        if self.master {
            self.pty.hang_up();
        } else {
            let mut i = self.pty.lock();
            i.slaves = i.slaves.saturating_sub(1);
            if i.slaves == 0 {
                i.slave_closed = true;
            }
            drop(i);
            self.pty.waiters.notify();
        }
    }
}

/// The terminal of a sandbox run at the user's terminal (`ferrovisor do`
/// on a tty), or of a program `exec --tty` brings in: a pty of the
/// Sentry's own, whose slave is the process's standard descriptors and
/// controlling terminal, and whose master the Sentry relays to host
/// descriptors (its own 0 and 1, or the caller's terminal an `exec`
/// passed in; the caller put it in raw mode). So the guest's line
/// discipline, job control and `SIGWINCH` are the Sentry's, and the host
/// terminal sees only bytes.
#[derive(Debug)]
pub struct Console {
    master: PtyEnd,
    /// held while output is taken from the pty and written to the host,
    /// so that [`Console::flush`] at the end loses and reorders nothing
    out: Mutex<()>,
    /// the host descriptors typed input comes from and output goes to
    host: [i32; 2],
    /// those descriptors, when they are not the Sentry's own 0 and 1
    owned: Option<[std::os::fd::OwnedFd; 2]>,
    /// set by [`Console::end`]: the relays stop
    ended: std::sync::atomic::AtomicBool,
}

/// How long the input relay waits for input before it looks whether its
/// console has ended.
const INPUT_POLL_MS: i32 = 200;

impl Console {
    /// A new pty, unlocked, at the host terminal's size, relayed to the
    /// Sentry's descriptors 0 and 1.
    pub fn new(devpts: &Arc<Devpts>) -> Result<Arc<Console>, Errno> {
        Self::relayed(devpts, [0, 1], None)
    }

    /// A new pty relayed to host descriptors `input` and `output` (an
    /// `exec`'s terminal), at their terminal's size.
    pub fn on(
        devpts: &Arc<Devpts>,
        input: std::os::fd::OwnedFd,
        output: std::os::fd::OwnedFd,
    ) -> Result<Arc<Console>, Errno> {
        use std::os::fd::AsRawFd;
        let host = [input.as_raw_fd(), output.as_raw_fd()];
        Self::relayed(devpts, host, Some([input, output]))
    }

    fn relayed(
        devpts: &Arc<Devpts>,
        host: [i32; 2],
        owned: Option<[std::os::fd::OwnedFd; 2]>,
    ) -> Result<Arc<Console>, Errno> {
        let master = devpts.allocate()?;
        master.pty.lock().locked = false;
        let c = Arc::new(Console {
            master,
            out: Mutex::new(()),
            host,
            owned,
            ended: Default::default(),
        });
        c.resize();
        Ok(c)
    }

    /// Stops the relays once the program is done: what it wrote is
    /// written out first; later output is dropped, later input not read.
    pub fn end(&self) {
        self.flush();
        self.ended.store(true, std::sync::atomic::Ordering::Release);
        self.pty().waiters.notify();
    }

    fn ended(&self) -> bool {
        self.ended.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The pty.
    pub fn pty(&self) -> &Arc<Pty> {
        &self.master.pty
    }

    /// Takes the host terminal's size again (its `SIGWINCH`); the
    /// foreground group gets `SIGWINCH` when it changed.
    pub fn resize(&self) {
        let host =
            |fd| crate::host::get_winsize(crate::vfs::file::FileDescription::stdio_borrow(fd));
        if let Ok(w) = host(self.host[1]).or_else(|_| host(self.host[0])) {
            self.take_size(w);
        }
    }

    /// Sets the size to `rows` by `cols` (a size an API client gives, its
    /// output being no terminal); `SIGWINCH` as for [`Console::resize`].
    pub fn set_size(&self, rows: u16, cols: u16) {
        self.take_size(Winsize {
            row: rows,
            col: cols,
            xpixel: 0,
            ypixel: 0,
        });
    }

    fn take_size(&self, w: Winsize) {
        let pgrp = {
            let mut i = self.pty().lock();
            if i.winsize == w {
                return;
            }
            i.winsize = w;
            i.pgrp
        };
        if let (Some(k), true) = (self.pty().kernel(), pgrp != 0) {
            k.signal_pgrp(pgrp, SIGWINCH);
        }
    }

    /// Starts the two relays: host input to the master, its output to
    /// the host.
    pub fn start(self: &Arc<Self>) -> std::io::Result<()> {
        let c = self.clone();
        std::thread::Builder::new()
            .name("console-in".into())
            .spawn(move || c.relay_in())?;
        let c = self.clone();
        std::thread::Builder::new()
            .name("console-out".into())
            .spawn(move || while c.relay_out(true) {})?;
        Ok(())
    }

    /// Host input, as typed, into the line discipline (as a write of the
    /// master); ends with the host's input.
    fn relay_in(&self) {
        let stdin = crate::vfs::file::FileDescription::stdio_borrow(self.host[0]);
        let mut buf = [0u8; 4096];
        let waiter = crate::kernel::wait::Waiter::new();
        let queues = [self.pty().waiters.clone()];
        loop {
            // (a blocking read would outlive an exec's program; the
            // Sentry's own terminal lasts as long as the sandbox)
            let wait = if self.owned.is_some() {
                INPUT_POLL_MS
            } else {
                -1
            };
            while crate::host::poll_for(stdin, libc::POLLIN, wait) == 0 {
                if self.ended() {
                    return;
                }
            }
            if self.ended() {
                return;
            }
            let n = match crate::host::read(stdin, &mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let mut done = 0;
            while done < n {
                let _reg = crate::kernel::wait::Registration::new(&waiter, &queues);
                waiter.prepare();
                let (took, raised) = {
                    let mut i = self.pty().lock();
                    if !i.master_open {
                        return;
                    }
                    let room = if i.master_stopped {
                        0
                    } else {
                        INPUT_CAP - i.pending.len()
                    };
                    let take = room.min(n - done);
                    i.pending.extend(&buf[done..done + take]);
                    (take, i.feed())
                };
                done += took;
                self.pty().raise(raised);
                self.pty().wake_up();
                if took == 0 {
                    if self.ended() {
                        return;
                    }
                    waiter.sleep(None);
                }
            }
        }
    }

    /// Writes what the pty has for the master to host descriptor 1;
    /// `wait`: first sleeps until there is some. False once the host
    /// cannot take it.
    fn relay_out(&self, wait: bool) -> bool {
        let waiter = crate::kernel::wait::Waiter::new();
        let queues = [self.pty().waiters.clone()];
        let _reg = crate::kernel::wait::Registration::new(&waiter, &queues);
        loop {
            waiter.prepare();
            let guard = self.out.locked();
            let data: Vec<u8> = {
                let mut i = self.pty().lock();
                let n = i.output.len();
                i.output.drain(..n).collect()
            };
            if data.is_empty() {
                drop(guard);
                if !wait {
                    return true;
                }
                if self.ended() {
                    return false;
                }
                waiter.sleep(None);
                continue;
            }
            self.pty().waiters.notify();
            self.pty().unthrottled(true);
            let stdout = crate::vfs::file::FileDescription::stdio_borrow(self.host[1]);
            let mut at = 0;
            while at < data.len() {
                match crate::host::write(stdout, &data[at..]) {
                    Ok(0) | Err(_) => return false,
                    Ok(n) => at += n,
                }
            }
            return true;
        }
    }

    /// Writes out what is left (the sandbox ends).
    pub fn flush(&self) {
        self.relay_out(false);
    }
}

fn copy_out(bufs: &[GuestSlice], data: &[u8]) -> u64 {
    crate::vfs::file::copy_to_slices(bufs, data)
}

impl crate::kernel::task::Terminal for Pty {
    fn leader_exit(&self, kernel: &Kernel) {
        Pty::leader_exit(self, kernel);
    }

    fn rdev_minor(&self) -> u64 {
        Pty::rdev_minor(self)
    }

    fn fg_pgrp(&self) -> Option<i32> {
        Pty::fg_pgrp(self)
    }

    fn attach(&self, sid: i32, pgrp: i32) -> bool {
        self.set_controlling(sid, pgrp)
    }
}

impl Pty {
    /// The pair behind a controlling terminal (every one is a pty here).
    pub fn of(t: &Arc<dyn crate::kernel::task::Terminal>) -> Option<Arc<Pty>> {
        (t.clone() as Arc<dyn std::any::Any + Send + Sync>)
            .downcast::<Pty>()
            .ok()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.locked()
    }

    fn kernel(&self) -> Option<Arc<Kernel>> {
        self.kernel.upgrade()
    }

    /// Opens the slave (`EIO` while locked or once the master is gone).
    pub fn open_slave(self: &Arc<Self>) -> Result<PtyEnd, Errno> {
        let mut i = self.lock();
        if i.locked || !i.master_open {
            return Err(Errno::EIO);
        }
        i.slaves += 1;
        i.slave_closed = false;
        let opened_at = i.vhangups;
        drop(i);
        self.waiters.notify();
        Ok(PtyEnd {
            pty: self.clone(),
            master: false,
            opened_at,
        })
    }

    /// Whether the slave is hung up (its master closed).
    pub fn hung_up(&self) -> bool {
        !self.lock().master_open
    }

    /// The session this is the controlling terminal of (0: none).
    pub fn session(&self) -> i32 {
        self.lock().session
    }

    /// The foreground process group, if there is one.
    pub fn fg_pgrp(&self) -> Option<i32> {
        Some(self.lock().pgrp).filter(|&p| p != 0)
    }

    /// Makes this the controlling terminal of session `sid` with
    /// foreground group `pgrp`, unless it already belongs to a session.
    pub fn set_controlling(&self, sid: i32, pgrp: i32) -> bool {
        let mut i = self.lock();
        if i.session != 0 || !i.master_open {
            return false;
        }
        i.session = sid;
        i.pgrp = pgrp;
        true
    }

    /// The master's last close: the slave hangs up, its node leaves
    /// `/dev/pts`, and the session leader gets `SIGHUP` and `SIGCONT`
    /// (tty_vhangup()).
    fn hang_up(&self) {
        let (sid, pgrp) = {
            let mut i = self.lock();
            i.master_open = false;
            i.flush_input();
            i.output.clear();
            let r = (i.session, i.pgrp);
            i.session = 0;
            i.pgrp = 0;
            r
        };
        if let Some(d) = self.devpts.upgrade() {
            d.lock().remove(&self.index);
        }
        self.hung_up_session(sid, pgrp);
    }

    /// `vhangup(2)` of the terminal: every slave description open now is
    /// hung up (later opens are not), pending input is dropped, and the
    /// session loses it as for a master's close.
    pub fn vhangup(&self) {
        let (sid, pgrp) = {
            let mut i = self.lock();
            i.vhangups += 1;
            i.flush_input();
            let r = (i.session, i.pgrp);
            i.session = 0;
            i.pgrp = 0;
            r
        };
        self.hung_up_session(sid, pgrp);
    }

    /// After a hang-up: wakes every waiter; session `sid` (foreground group
    /// `pgrp`) loses its controlling terminal and its leader gets `SIGHUP`
    /// and `SIGCONT`.
    fn hung_up_session(&self, sid: i32, pgrp: i32) {
        self.waiters.notify();
        if let Some(k) = self.kernel() {
            if sid != 0 {
                k.clear_ctty(self);
                if let Some(leader) = k.process(sid) {
                    leader.state().tty_old_pgrp = pgrp;
                    for sig in [SIGHUP, SIGCONT] {
                        leader.send_signal(&k, sig, kernel_info(sig));
                    }
                }
            }
        }
    }

    /// Detaches the terminal from its session; returns the foreground group
    /// it had (0 for none).
    fn forget_session(&self) -> i32 {
        let mut i = self.lock();
        let p = i.pgrp;
        i.session = 0;
        i.pgrp = 0;
        p
    }

    /// The controlling process (session leader) exits: the foreground group
    /// gets `SIGHUP` and the session loses its terminal (disassociate_ctty()
    /// for a pty).
    pub fn leader_exit(&self, kernel: &Kernel) {
        let pgrp = self.forget_session();
        if pgrp != 0 {
            kernel.signal_pgrp(pgrp, SIGHUP);
        }
        kernel.clear_ctty(self);
    }

    /// Forgets the session (`TIOCNOTTY` by the session leader), after
    /// `SIGHUP` and `SIGCONT` to the foreground group.
    fn disassociate(&self, kernel: &Kernel) {
        let pgrp = self.forget_session();
        if pgrp != 0 {
            kernel.signal_pgrp(pgrp, SIGHUP);
            kernel.signal_pgrp(pgrp, SIGCONT);
        }
        kernel.clear_ctty(self);
    }

    fn raise(&self, raised: Raised) {
        if raised.is_empty() {
            return;
        }
        if let Some(k) = self.kernel() {
            for (pgrp, sig) in raised {
                k.signal_pgrp(pgrp, sig);
            }
        }
    }

    /// `(readable, writable, hung_up)` of one end, for poll.
    pub fn poll_state(&self, master: bool) -> (bool, bool, bool) {
        let i = self.lock();
        if master {
            (
                !i.output.is_empty() || (i.packet && i.pktstatus != 0),
                i.pending.len() < INPUT_CAP && !i.master_stopped,
                i.slave_closed,
            )
        } else if !i.master_open {
            (true, true, true)
        } else {
            (
                i.slave_readable(true),
                i.output.len() + 2 <= OUTPUT_CAP && !i.stopped,
                false,
            )
        }
    }

    /// A number that changes whenever readiness may have changed
    /// (edge-triggered epoll).
    pub fn generation(&self, master: bool) -> u64 {
        let i = self.lock();
        let (a, b) = if master {
            (i.output.len(), i.pending.len())
        } else {
            (i.ready.len() + i.lines.len(), i.output.len())
        };
        (a as u64) << 32
            | u64::from(if master { i.pktstatus } else { 0 }) << 24
            | (b as u64) << 1
            | u64::from(!i.master_open || i.slave_closed)
    }

    /// Whether a master in packet mode has a status byte to read.
    fn packet_status_pending(&self) -> bool {
        let i = self.lock();
        i.packet && i.pktstatus != 0
    }

    /// After a change: wakes sleepers and signals the `O_ASYNC` owners of
    /// the ends that got something to read (n_tty's `kill_fasync(POLL_IN)`
    /// when input arrives: in canonical mode once a line is complete).
    fn wake_up(&self) {
        let wake = std::mem::take(&mut self.lock().wake);
        self.waiters.notify();
        if wake & WAKE_SLAVE != 0 {
            self.fasync[0].kill(crate::vfs::fasync::Reason::In);
        }
        if wake & WAKE_MASTER != 0 {
            self.fasync[1].kill(crate::vfs::fasync::Reason::In);
        }
    }

    /// After a read of the slave's (`master` false) or the master's queue:
    /// once it is down to `UNTHROTTLE` bytes, the other end's writer that
    /// was left with bytes to write is signalled `POLL_OUT`
    /// (n_tty_check_unthrottle() → tty_wakeup() → n_tty_write_wakeup()).
    fn unthrottled(&self, master: bool) {
        let writer = usize::from(!master);
        let signal = {
            let mut i = self.lock();
            let left = if master {
                i.output.len()
            } else {
                i.ready.len() + i.pending.len()
            };
            left <= UNTHROTTLE && std::mem::take(&mut i.write_wakeup[writer])
        };
        if signal {
            self.fasync[writer].kill(crate::vfs::fasync::Reason::Out);
        }
    }

    /// `fstat` minor number and `TIOCGPTN`.
    pub fn rdev_minor(&self) -> u64 {
        u64::from(self.index)
    }
}

/// A checkpoint of a pair (`do --save`): the terminal's settings, window
/// size, job-control state and every queued byte of its line discipline.
/// Who waits on it is not saved: a blocked reader makes its call again.
impl Pty {
    /// Appends the pair's state to a sandbox image.
    pub fn save(&self, e: &mut Enc) -> Result<(), String> {
        let i = self.lock();
        if !i.master_open {
            return Err(format!(
                "/dev/pts/{}: a pty whose master is closed is not saved yet",
                self.index
            ));
        }
        if self.fasync.iter().any(|f| !f.is_empty()) {
            return Err(format!(
                "/dev/pts/{}: a pty with O_ASYNC descriptions is not saved yet",
                self.index
            ));
        }
        e.u32(self.index);
        i.save(e);
        Ok(())
    }

    /// An end of a restored pair, for an open file description of the
    /// image (a slave end counts as an opening of the slave).
    pub fn restored_end(self: &Arc<Self>, master: bool) -> PtyEnd {
        let mut i = self.lock();
        if !master {
            i.slaves += 1;
            i.slave_closed = false;
        }
        PtyEnd {
            pty: self.clone(),
            master,
            opened_at: i.vhangups,
        }
    }
}

impl Devpts {
    /// A pair [`Pty::save`] wrote, at its saved index: a restored sandbox's
    /// programs find it at the same `/dev/pts/N`.
    pub fn restore(self: &Arc<Self>, d: &mut Dec<'_>) -> Result<Arc<Pty>, Bad> {
        let index = d.u32()?;
        let inner = Inner::restore(d)?;
        if index as usize >= MAX_PTYS {
            return bad("a pty of the image has an index out of range");
        }
        let kernel = self
            .kernel
            .get()
            .cloned()
            .ok_or(Bad("the sandbox's /dev/pts is not ready".into()))?;
        let mut map = self.lock();
        if map.contains_key(&index) {
            return bad(format!(
                "the image's /dev/pts/{index} is this sandbox's own terminal: restore it \
                 without a terminal (stdin not a tty)"
            ));
        }
        Ok(self.insert(&mut map, kernel, index, inner))
    }
}

impl Inner {
    fn save(&self, e: &mut Enc) {
        e.bytes(self.termios.as_bytes());
        e.u32(self.ispeed);
        e.u32(self.ospeed);
        e.bytes(self.winsize.as_bytes());
        let flags = [
            self.locked,
            self.exclusive[0],
            self.exclusive[1],
            self.slave_closed,
            self.lnext,
            self.stopped,
            self.tco_stopped,
            self.master_stopped,
            self.packet,
            self.write_wakeup[0],
            self.write_wakeup[1],
        ];
        e.u32(flags.iter().rev().fold(0, |w, &f| (w << 1) | u32::from(f)));
        e.u32(self.session as u32);
        e.u32(self.pgrp as u32);
        let queue = |e: &mut Enc, q: &VecDeque<u8>| {
            let (a, b) = q.as_slices();
            e.bytes(&[a, b].concat());
        };
        queue(e, &self.pending);
        queue(e, &self.ready);
        e.u64(self.lines.len() as u64);
        for &n in &self.lines {
            e.u32(n as u32);
        }
        e.bytes(&self.edit);
        e.u32(self.edit_col);
        e.u32(self.column);
        queue(e, &self.output);
        e.u8(self.pktstatus);
        e.u8(self.wake);
    }

    /// What [`Inner::save`] wrote, refused where it does not fit the line
    /// discipline's bounds (which its code relies on). Open ends are
    /// counted again as they are restored.
    fn restore(d: &mut Dec<'_>) -> Result<Inner, Bad> {
        let termios = Termios::read_from_bytes(d.bytes()?)
            .or_else(|_| bad("a pty's termios in the image is malformed"))?;
        let (ispeed, ospeed) = (d.u32()?, d.u32()?);
        let winsize = Winsize::read_from_bytes(d.bytes()?)
            .or_else(|_| bad("a pty's window size in the image is malformed"))?;
        let flags = d.u32()?;
        let bit = |n: u32| flags & (1 << n) != 0;
        let (session, pgrp) = (d.u32()? as i32, d.u32()? as i32);
        let pending: VecDeque<u8> = d.bytes()?.iter().copied().collect();
        let ready: VecDeque<u8> = d.bytes()?.iter().copied().collect();
        let n = d.count(4)?;
        let mut lines = VecDeque::with_capacity(n.min(N_TTY_BUF_SIZE));
        for _ in 0..n {
            lines.push_back(d.u32()? as usize);
        }
        let edit = d.bytes()?.to_vec();
        let (edit_col, column) = (d.u32()?, d.u32()?);
        let output: VecDeque<u8> = d.bytes()?.iter().copied().collect();
        let (pktstatus, wake) = (d.u8()?, d.u8()?);
        let fits = session >= 0
            && pgrp >= 0
            && pending.len() <= INPUT_CAP
            && output.len() <= OUTPUT_CAP
            && ready.len() + edit.len() <= N_TTY_BUF_SIZE
            && lines.len() <= N_TTY_BUF_SIZE
            && lines.iter().sum::<usize>() <= ready.len()
            && edit_col < 1 << 30
            && column < 1 << 30;
        if !fits {
            return bad("a pty of the image holds more than a terminal can");
        }
        Ok(Inner {
            termios,
            ispeed,
            ospeed,
            winsize,
            locked: bit(0),
            exclusive: [bit(1), bit(2)],
            master_open: true,
            slaves: 0,
            slave_closed: bit(3),
            vhangups: 0,
            session,
            pgrp,
            pending,
            ready,
            lines,
            edit,
            edit_col,
            lnext: bit(4),
            stopped: bit(5),
            tco_stopped: bit(6),
            master_stopped: bit(7),
            column,
            output,
            packet: bit(8),
            pktstatus,
            wake,
            write_wakeup: [bit(9), bit(10)],
        })
    }
}

fn kernel_info(sig: i32) -> abi::SigInfo {
    crate::kernel::task::user_info(sig, 0, 0, crate::kernel::task::si::KERNEL)
}

/// Linux's job-control check (`__tty_check_change`): a process of a
/// background group touching its controlling terminal gets `sig` sent to
/// its group and the call restarts once it is continued; `EIO` when that
/// signal is ignored or blocked (for `SIGTTIN`) or the group is orphaned.
fn job_check(kernel: &Kernel, thread: &Thread, pty: &Arc<Pty>, sig: i32) -> Result<(), Errno> {
    let (mine, pgid, ignored) = {
        let p = thread.process.state();
        let mine = p
            .ctty
            .as_ref()
            .is_some_and(|c| crate::kernel::task::is_terminal(c, &**pty));
        let h = p.actions[sig as usize - 1].handler;
        let blocked = thread.state().mask & (1u64 << (sig - 1)) != 0;
        (mine, p.pgid, blocked || h == abi::signal::SIG_IGN)
    };
    if !mine {
        return Ok(());
    }
    let fg = pty.lock().pgrp;
    if fg == 0 || fg == pgid {
        return Ok(());
    }
    if ignored {
        return if sig == SIGTTIN {
            Err(Errno::EIO)
        } else {
            Ok(())
        };
    }
    if kernel.pgrp_orphaned(pgid) {
        return Err(Errno::EIO);
    }
    kernel.signal_pgrp(pgid, sig);
    Err(Errno::ERESTARTSYS)
}

/// Waits once for a change of `pty`: `Err(ERESTARTSYS)` on a signal;
/// `Ok(false)` once `deadline` has passed.
fn wait(
    blk: Blocker<'_>,
    pty: &Pty,
    deadline: Option<Instant>,
    ready: impl Fn() -> bool,
) -> Result<bool, Errno> {
    blk.wait_once(
        std::slice::from_ref(&pty.waiters),
        deadline,
        Errno::ERESTARTSYS,
        ready,
    )
}

/// [`job_check`] for the caller of a read or write: a guest thread (the
/// only kind of caller there is).
fn caller_job_check(blk: Blocker<'_>, pty: &Arc<Pty>, sig: i32) -> Result<(), Errno> {
    let (Some(kernel), Some(thread)) = (pty.kernel(), blk.caller.as_any().downcast_ref::<Thread>())
    else {
        return Ok(());
    };
    job_check(&kernel, thread, pty, sig)
}

/// `read(2)` of either end.
pub fn read(
    blk: Blocker<'_>,
    end: &PtyEnd,
    bufs: &[GuestSlice],
    nonblock: bool,
) -> Result<u64, Errno> {
    let want: usize = bufs.iter().map(|b| b.len()).sum();
    if want == 0 {
        return Ok(0);
    }
    let pty = &end.pty;
    if end.master {
        loop {
            let r = {
                let mut i = pty.lock();
                if i.packet && i.pktstatus != 0 {
                    // A status byte comes alone, before any data.
                    let status = std::mem::take(&mut i.pktstatus);
                    Some(copy_out(bufs, &[status]))
                } else if i.output.is_empty() {
                    if i.slave_closed {
                        return Err(Errno::EIO);
                    }
                    None
                } else if i.packet {
                    // TIOCPKT_DATA, then as much data as fits after it.
                    let n = i.output.len().min(want - 1);
                    let mut data = Vec::with_capacity(n + 1);
                    data.push(pkt::DATA);
                    data.extend(i.output.drain(..n));
                    Some(copy_out(bufs, &data))
                } else {
                    let n = i.output.len().min(want);
                    let data: Vec<u8> = i.output.drain(..n).collect();
                    Some(copy_out(bufs, &data))
                }
            };
            if let Some(n) = r {
                pty.waiters.notify();
                pty.unthrottled(true);
                return Ok(n);
            }
            if nonblock {
                return Err(Errno::EAGAIN);
            }
            wait(blk, pty, None, || {
                let i = pty.lock();
                !i.output.is_empty() || i.slave_closed || (i.packet && i.pktstatus != 0)
            })?;
        }
    }
    // The slave: n_tty_read().
    let mut got: Vec<u8> = Vec::new();
    let mut deadline: Option<Instant> = None;
    let mut first = true;
    loop {
        if got.is_empty() {
            caller_job_check(blk, pty, SIGTTIN)?;
        }
        let (done, raised) = {
            let mut i = pty.lock();
            if end.hung(&i) {
                // Hung up: end of file, whatever was queued.
                drop(i);
                return Ok(copy_out(bufs, &got));
            }
            let canon = i.canonical();
            let (min, time) = (
                usize::from(i.termios.cc[VMIN]),
                u64::from(i.termios.cc[VTIME]),
            );
            let taken = i.take_input(want - got.len());
            let raised = i.feed();
            let progressed = taken.is_some();
            if let Some(t) = taken {
                got.extend(t);
            }
            let tick = Duration::from_millis(100 * time);
            if first && !canon && min == 0 && time > 0 {
                deadline = Some(Instant::now() + tick);
            }
            if progressed && !canon && min > 0 && time > 0 {
                // Inter-byte timer: restarted by every byte.
                deadline = Some(Instant::now() + tick);
            }
            let done = if canon {
                progressed
            } else if got.len() >= want {
                true
            } else if min == 0 {
                !got.is_empty() || time == 0
            } else {
                got.len() >= min
            };
            (done, raised)
        };
        first = false;
        pty.raise(raised);
        pty.wake_up();
        if !got.is_empty() {
            pty.unthrottled(false);
        }
        if done {
            return Ok(copy_out(bufs, &got));
        }
        if nonblock {
            if got.is_empty() {
                return Err(Errno::EAGAIN);
            }
            return Ok(copy_out(bufs, &got));
        }
        match wait(blk, pty, deadline, || {
            let i = pty.lock();
            end.hung(&i) || i.slave_readable(false)
        }) {
            Ok(true) => {}
            Ok(false) => return Ok(copy_out(bufs, &got)),
            Err(e) if got.is_empty() => return Err(e),
            Err(_) => return Ok(copy_out(bufs, &got)),
        }
    }
}

/// `write(2)` of either end.
pub fn write(
    blk: Blocker<'_>,
    end: &PtyEnd,
    bufs: &[GuestSlice],
    nonblock: bool,
) -> Result<u64, Errno> {
    let total: usize = bufs.iter().map(|b| b.len()).sum();
    let pty = &end.pty;
    if !end.master {
        let tostop = pty.lock().l(TOSTOP);
        if tostop {
            caller_job_check(blk, pty, SIGTTOU)?;
        }
    }
    let mut done = 0usize;
    loop {
        let (n, raised) = {
            let mut i = pty.lock();
            // Only what fits is copied from the guest: a huge write never
            // makes the Sentry hold more than one queue's worth.
            if end.master {
                let room = if i.master_stopped {
                    0
                } else {
                    INPUT_CAP - i.pending.len()
                };
                let mut chunk = vec![0u8; room.min(total - done)];
                let n = crate::vfs::file::copy_from_slices_at(bufs, done, &mut chunk);
                i.pending.extend(&chunk[..n]);
                (n, i.feed())
            } else {
                if end.hung(&i) {
                    return if done > 0 {
                        Ok(done as u64)
                    } else {
                        Err(Errno::EIO)
                    };
                }
                let room = OUTPUT_CAP.saturating_sub(i.output.len());
                let mut chunk = vec![0u8; room.min(total - done)];
                let len = crate::vfs::file::copy_from_slices_at(bufs, done, &mut chunk);
                let mut n = 0;
                while n < len && !i.stopped && i.opost(chunk[n]) {
                    n += 1;
                }
                (n, Vec::new())
            }
        };
        done += n;
        pty.raise(raised);
        if n > 0 {
            pty.wake_up();
        }
        if done == total {
            return Ok(done as u64);
        }
        if nonblock {
            end.note_write_left();
            return if done > 0 {
                Ok(done as u64)
            } else {
                Err(Errno::EAGAIN)
            };
        }
        let r = wait(blk, pty, None, || {
            let (_, writable, hup) = pty.poll_state(end.master);
            writable || (hup && !end.master)
        });
        if let Err(e) = r {
            end.note_write_left();
            return if done > 0 { Ok(done as u64) } else { Err(e) };
        }
    }
}

/// What an ioctl on a terminal needs from its caller.
pub struct IoctlCtx<'a> {
    /// the sandbox
    pub kernel: &'a Kernel,
    /// the calling thread
    pub thread: &'a Thread,
    /// whether the description was opened for reading (`TIOCSCTTY`)
    pub readable: bool,
}

/// What an ioctl asks its caller to do with guest memory or descriptors.
pub enum IoctlOut {
    /// return this value
    Ret(u64),
    /// write this `int` to the argument, return 0
    Int(i32),
    /// write this termios to the argument, return 0
    Termios(Termios),
    /// write this termios2 to the argument, return 0
    Termios2(Termios2),
    /// write this termio to the argument, return 0
    Termio(Termio),
    /// write this winsize to the argument, return 0
    Winsize(Winsize),
    /// open the slave as a new descriptor with these flags (`TIOCGPTPEER`)
    OpenPeer(Arc<Pty>, u32),
}

/// What an ioctl reads from guest memory, read by the caller beforehand
/// (`EFAULT` surfaces there).
pub enum IoctlIn {
    /// nothing
    None,
    /// an `int`
    Int(i32),
    /// a termios
    Termios(Termios),
    /// a termios2
    Termios2(Termios2),
    /// an old termio
    Termio(Termio),
    /// a winsize
    Winsize(Winsize),
}

/// Reads an ioctl's argument from guest memory.
pub type ArgReader = fn(&crate::mm::MemoryManager, u64) -> Result<IoctlIn, Errno>;

/// What the argument of `cmd` points to, so the caller can read it first.
pub fn ioctl_input(cmd: u32) -> Option<ArgReader> {
    Some(match cmd {
        TCSETS | TCSETSW | TCSETSF => |mm, a| mm.read_obj(a).map(IoctlIn::Termios),
        TCSETS2 | TCSETSW2 | TCSETSF2 => |mm, a| mm.read_obj(a).map(IoctlIn::Termios2),
        TCSETA | TCSETAW | TCSETAF => |mm, a| mm.read_obj(a).map(IoctlIn::Termio),
        TIOCSWINSZ => |mm, a| mm.read_obj(a).map(IoctlIn::Winsize),
        TIOCSPGRP | TIOCSPTLCK | TIOCSETD | TIOCPKT => |mm, a| mm.read_obj(a).map(IoctlIn::Int),
        _ => return None,
    })
}

/// The terminal ioctls of tty_ioctl(4) and pty(7) on either end.
pub fn ioctl(
    ctx: &IoctlCtx<'_>,
    end: &PtyEnd,
    cmd: u32,
    arg: u64,
    input: IoctlIn,
) -> Result<IoctlOut, Errno> {
    let pty = &end.pty;
    let (my_ctty, my_sid, my_pgid, leader) = {
        let p = ctx.thread.process.state();
        (
            p.ctty
                .as_ref()
                .is_some_and(|c| crate::kernel::task::is_terminal(c, &**pty)),
            p.sid,
            p.pgid,
            p.sid == ctx.thread.process.pid,
        )
    };
    let has_ctty = ctx.thread.process.state().ctty.is_some();
    if end.slave_hung() {
        // hung_up_tty_ioctl()
        return Err(if cmd == TIOCSPGRP {
            Errno::ENOTTY
        } else {
            Errno::EIO
        });
    }
    // Changing the terminal from a background group is job control's
    // business (tty_check_change()).
    let check_change = || job_check(ctx.kernel, ctx.thread, pty, SIGTTOU);
    match cmd {
        TCGETS => Ok(IoctlOut::Termios(pty.lock().termios)),
        // The old termio: the low 16 bits of each flag word and the first
        // NCC control characters (kernel_termios_to_user_termio()).
        TCGETA => {
            let t = pty.lock().termios;
            let mut cc = [0u8; 8];
            cc.copy_from_slice(&t.cc[..8]);
            Ok(IoctlOut::Termio(Termio {
                iflag: t.iflag as u16,
                oflag: t.oflag as u16,
                cflag: t.cflag as u16,
                lflag: t.lflag as u16,
                line: t.line,
                cc,
                pad: 0,
            }))
        }
        TCGETS2 => {
            let i = pty.lock();
            let t = i.termios;
            Ok(IoctlOut::Termios2(Termios2 {
                iflag: t.iflag,
                oflag: t.oflag,
                cflag: t.cflag,
                lflag: t.lflag,
                line: t.line,
                cc: t.cc,
                ispeed: i.ispeed,
                ospeed: i.ospeed,
            }))
        }
        TCSETS | TCSETSW | TCSETSF | TCSETS2 | TCSETSW2 | TCSETSF2 | TCSETA | TCSETAW | TCSETAF => {
            check_change()?;
            let raised = {
                let mut i = pty.lock();
                if matches!(cmd, TCSETSF | TCSETSF2 | TCSETAF) {
                    // The slave's line discipline is flushed, whichever end
                    // asked (n_tty_flush_buffer()).
                    i.flush_input();
                    i.pkt_status(pkt::FLUSHREAD, 0);
                }
                match input {
                    IoctlIn::Termios(t) => i.set_termios(t),
                    // user_termio_to_kernel_termios(): the upper halves of
                    // the flag words stay as they were.
                    IoctlIn::Termio(t) => {
                        let mut new = i.termios;
                        let low = |old: u32, v: u16| (old & 0xffff_0000) | u32::from(v);
                        new.iflag = low(new.iflag, t.iflag);
                        new.oflag = low(new.oflag, t.oflag);
                        new.cflag = low(new.cflag, t.cflag);
                        new.lflag = low(new.lflag, t.lflag);
                        new.cc[..8].copy_from_slice(&t.cc);
                        i.set_termios(new);
                    }
                    IoctlIn::Termios2(t) => {
                        i.set_termios(Termios {
                            iflag: t.iflag,
                            oflag: t.oflag,
                            cflag: t.cflag,
                            lflag: t.lflag,
                            line: t.line,
                            cc: t.cc,
                        });
                        i.ispeed = t.ispeed;
                        i.ospeed = t.ospeed;
                    }
                    _ => return Err(Errno::EFAULT),
                }
                i.feed()
            };
            pty.raise(raised);
            pty.wake_up();
            Ok(IoctlOut::Ret(0))
        }
        // A pty sends everything at once: draining and breaks are instant.
        TCSBRK | TCSBRKP | TIOCSBRK | TIOCCBRK => Ok(IoctlOut::Ret(0)),
        TCXONC => {
            check_change()?;
            let mut i = pty.lock();
            match arg {
                // TCOOFF, TCOON: the slave's output (pty_stop(), which a
                // master in packet mode hears of) ...
                0 if !end.master => {
                    if !i.tco_stopped {
                        i.tco_stopped = true;
                        i.stop();
                    }
                }
                1 if !end.master => {
                    if i.tco_stopped {
                        i.tco_stopped = false;
                        i.start();
                    }
                }
                // ... or, on the master, the master's own: its writes wait
                // (pty_write() of a stopped tty takes nothing).
                0 | 1 => i.master_stopped = arg == 0,
                2 | 3 => {}
                _ => return Err(Errno::EINVAL),
            }
            drop(i);
            pty.waiters.notify();
            Ok(IoctlOut::Ret(0))
        }
        TCFLSH => {
            check_change()?;
            let (input, output) = match arg {
                0 => (true, false),
                1 => (false, true),
                2 => (true, true),
                _ => return Err(Errno::EINVAL),
            };
            {
                let mut i = pty.lock();
                // The master's input is what the slave wrote; its output
                // is what the line discipline has not taken yet.
                if end.master {
                    if input {
                        i.output.clear();
                    }
                    if output {
                        i.pending.clear();
                    }
                } else {
                    if input {
                        i.flush_input();
                        i.pkt_status(pkt::FLUSHREAD, 0);
                    }
                    if output {
                        i.output.clear();
                        i.pkt_status(pkt::FLUSHWRITE, 0);
                    }
                }
            }
            pty.waiters.notify();
            Ok(IoctlOut::Ret(0))
        }
        FIONREAD => {
            let i = pty.lock();
            let n = if end.master {
                i.output.len()
            } else {
                i.slave_inq()
            };
            Ok(IoctlOut::Int(n as i32))
        }
        // Nothing stays in a pty's driver once written.
        TIOCOUTQ => Ok(IoctlOut::Int(0)),
        TIOCGWINSZ => Ok(IoctlOut::Winsize(pty.lock().winsize)),
        TIOCSWINSZ => {
            let IoctlIn::Winsize(w) = input else {
                return Err(Errno::EFAULT);
            };
            let pgrp = {
                let mut i = pty.lock();
                if i.winsize == w {
                    return Ok(IoctlOut::Ret(0));
                }
                i.winsize = w;
                i.pgrp
            };
            if pgrp != 0 {
                ctx.kernel.signal_pgrp(pgrp, SIGWINCH);
            }
            Ok(IoctlOut::Ret(0))
        }
        TIOCGETD => Ok(IoctlOut::Int(0)),
        TIOCSETD => match input {
            IoctlIn::Int(0) => Ok(IoctlOut::Ret(0)),
            IoctlIn::Int(_) => Err(Errno::EINVAL),
            _ => Err(Errno::EFAULT),
        },
        TIOCEXCL | TIOCNXCL => {
            pty.lock().exclusive[usize::from(end.master)] = cmd == TIOCEXCL;
            Ok(IoctlOut::Ret(0))
        }
        TIOCGEXCL => Ok(IoctlOut::Int(i32::from(
            pty.lock().exclusive[usize::from(end.master)],
        ))),
        TIOCSCTTY => {
            if leader && pty.session() == my_sid {
                return Ok(IoctlOut::Ret(0));
            }
            if !leader || has_ctty {
                return Err(Errno::EPERM);
            }
            // Stealing a terminal from another session (arg 1) needs
            // CAP_SYS_ADMIN, which the guest does not have here.
            if pty.session() != 0 || !ctx.readable {
                return Err(Errno::EPERM);
            }
            if !pty.set_controlling(my_sid, my_pgid) {
                return Err(Errno::EPERM);
            }
            ctx.thread.process.state().ctty = Some(pty.clone());
            Ok(IoctlOut::Ret(0))
        }
        TIOCNOTTY => {
            if !my_ctty {
                return Err(Errno::ENOTTY);
            }
            if leader {
                pty.disassociate(ctx.kernel);
            } else {
                ctx.thread.process.state().ctty = None;
            }
            Ok(IoctlOut::Ret(0))
        }
        TIOCGPGRP => {
            if !end.master && !my_ctty {
                return Err(Errno::ENOTTY);
            }
            Ok(IoctlOut::Int(pty.lock().pgrp))
        }
        TIOCGSID => {
            if !end.master && !my_ctty {
                return Err(Errno::ENOTTY);
            }
            match pty.session() {
                0 => Err(Errno::ENOTTY),
                s => Ok(IoctlOut::Int(s)),
            }
        }
        TIOCSPGRP => {
            match check_change() {
                Err(Errno::EIO) => return Err(Errno::ENOTTY),
                Err(e) => return Err(e),
                Ok(()) => {}
            }
            let IoctlIn::Int(pgrp) = input else {
                return Err(Errno::EFAULT);
            };
            if pgrp < 0 {
                return Err(Errno::EINVAL);
            }
            if !my_ctty || pty.session() != my_sid {
                return Err(Errno::ENOTTY);
            }
            match ctx.kernel.session_of_pgrp(pgrp) {
                None => return Err(Errno::ESRCH),
                Some(s) if s != my_sid => return Err(Errno::EPERM),
                Some(_) => {}
            }
            pty.lock().pgrp = pgrp;
            Ok(IoctlOut::Ret(0))
        }
        TIOCGPTN if end.master => Ok(IoctlOut::Int(pty.index as i32)),
        TIOCSPTLCK if end.master => {
            let IoctlIn::Int(v) = input else {
                return Err(Errno::EFAULT);
            };
            pty.lock().locked = v != 0;
            Ok(IoctlOut::Ret(0))
        }
        // The master raises a terminal signal as if its character had
        // been typed (pty_signal()).
        TIOCSIG if end.master => {
            let sig = arg as i32;
            if !matches!(sig, SIGINT | SIGQUIT | SIGTSTP) || arg > i32::MAX as u64 {
                return Err(Errno::EINVAL);
            }
            if let Some(pgrp) = pty.fg_pgrp() {
                ctx.kernel.signal_pgrp(pgrp, sig);
            }
            Ok(IoctlOut::Ret(0))
        }
        TIOCGPTLCK if end.master => Ok(IoctlOut::Int(i32::from(pty.lock().locked))),
        // pty_set_pktmode(): turning packet mode on forgets old status.
        TIOCPKT if end.master => {
            let IoctlIn::Int(v) = input else {
                return Err(Errno::EFAULT);
            };
            let mut i = pty.lock();
            if v != 0 {
                if !i.packet {
                    i.pktstatus = 0;
                    i.packet = true;
                }
            } else {
                i.packet = false;
            }
            Ok(IoctlOut::Ret(0))
        }
        TIOCGPKT if end.master => Ok(IoctlOut::Int(i32::from(pty.lock().packet))),
        // Faking input needs CAP_SYS_ADMIN unless the sysctl
        // dev.tty.legacy_tiocsti is 1 (Linux 6.2+); the guest never has
        // that capability and the sandbox's sysctl is 0, so a guest can
        // never type into a terminal it shares with another program.
        TIOCSTI => Err(Errno::EIO),
        TIOCGPTPEER => {
            if !end.master {
                return Err(Errno::EIO);
            }
            Ok(IoctlOut::OpenPeer(pty.clone(), arg as u32))
        }
        TIOCGDEV => Ok(IoctlOut::Int(if end.master {
            // /dev/ptmx's own number, c 5:2
            (5 << 8) | 2
        } else {
            ((PTS_MAJOR as i32) << 8) | pty.index as i32
        })),
        _ => Err(Errno::ENOTTY),
    }
}

/// Readiness of one end for `poll`/`epoll`.
pub fn poll_events(end: &PtyEnd) -> i16 {
    use crate::fsimpl::events::poll::*;
    if end.slave_hung() {
        // hung_up_tty_poll()
        return POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDNORM | POLLWRNORM;
    }
    let (r, w, hup) = end.pty.poll_state(end.master);
    let mut ev = 0;
    let status = end.master && end.pty.packet_status_pending();
    if status {
        // n_tty_poll(): pending packet status is urgent data.
        ev |= POLLIN | POLLPRI;
    }
    if r && !(status && end.pty.lock().output.is_empty()) {
        ev |= POLLIN | POLLRDNORM;
    }
    if w {
        ev |= POLLOUT | POLLWRNORM;
    }
    if hup {
        ev |= POLLHUP;
        if !end.master {
            ev |= POLLERR;
        }
    }
    ev
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(i: &mut Inner, s: &[u8]) -> Raised {
        i.pending.extend(s);
        i.feed()
    }

    fn out(i: &mut Inner) -> Vec<u8> {
        i.output.drain(..).collect()
    }

    /// Saved and restored, a terminal has the same settings and queues;
    /// mangled bytes are refused or give a terminal that still works.
    #[test]
    fn the_state_round_trips_and_mangled_bytes_are_refused() {
        let mut i = Inner::new();
        i.termios.lflag &= !ECHO;
        i.winsize.col = 80;
        i.pgrp = 7;
        feed(&mut i, b"one\ntw");
        i.output.extend(b"queued output");
        let mut e = Enc::default();
        i.save(&mut e);
        let mut back = Inner::restore(&mut Dec::new(&e.buf)).expect("restored");
        assert_eq!(back.termios, i.termios);
        assert_eq!((back.winsize.col, back.pgrp), (80, 7));
        assert_eq!(out(&mut back), b"queued output");
        feed(&mut back, b"o\n");
        assert_eq!(back.take_input(100).expect("line"), b"one\n");
        assert_eq!(back.take_input(100).expect("line"), b"two\n");
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for round in 0..2000 {
            let mut bytes = e.buf.clone();
            for _ in 0..1 + round % 3 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let at = seed as usize % bytes.len();
                bytes[at] = (seed >> 32) as u8;
            }
            if let Ok(mut t) = Inner::restore(&mut Dec::new(&bytes)) {
                feed(&mut t, b"more input\n\x7f\x17\x04");
                while t.take_input(3).is_some() {}
                t.set_termios(Termios {
                    lflag: 0,
                    ..t.termios
                });
                out(&mut t);
            }
        }
    }

    #[test]
    fn canonical_line_with_echo_and_erase() {
        let mut i = Inner::new();
        feed(&mut i, b"helo\x7flo\r");
        assert_eq!(i.take_input(100).expect("readable"), b"hello\n");
        assert_eq!(out(&mut i), b"helo\x08 \x08lo\r\n");
        assert!(i.take_input(100).is_none());
    }

    #[test]
    fn kill_and_word_erase() {
        let mut i = Inner::new();
        feed(&mut i, b"abc\x15xy foo\x17bar\n");
        assert_eq!(i.take_input(100).expect("readable"), b"xy bar\n");
    }

    #[test]
    fn eof_ends_a_line_and_reads_zero_at_line_start() {
        let mut i = Inner::new();
        feed(&mut i, b"ab\x04\x04");
        assert_eq!(i.take_input(100).expect("readable"), b"ab");
        assert_eq!(i.take_input(100).expect("readable"), b"");
        assert!(i.take_input(100).is_none());
    }

    #[test]
    fn isig_raises_for_the_foreground_group_only() {
        let mut i = Inner::new();
        assert!(feed(&mut i, b"\x03").is_empty());
        i.pgrp = 7;
        assert_eq!(
            feed(&mut i, b"x\x03\x1a\x1c"),
            vec![(7, SIGINT), (7, SIGTSTP), (7, SIGQUIT)]
        );
        assert!(i.edit.is_empty());
    }

    #[test]
    fn canonical_line_is_bounded() {
        let mut i = Inner::new();
        i.termios.lflag &= !ECHO;
        feed(&mut i, &[b'a'; 10000]);
        assert!(i.used() < N_TTY_BUF_SIZE);
        feed(&mut i, b"\n");
        let line = i.take_input(100_000).expect("readable");
        assert_eq!(line.len(), N_TTY_BUF_SIZE - 1);
        assert_eq!(line.last(), Some(&b'\n'));
    }

    #[test]
    fn raw_mode_stops_taking_input_when_full() {
        let mut i = Inner::new();
        i.termios.lflag = 0;
        i.pending
            .extend(std::iter::repeat_n(b'x', 70000).take(INPUT_CAP));
        i.feed();
        assert!(i.ready.len() < N_TTY_BUF_SIZE);
        assert!(!i.pending.is_empty());
    }

    #[test]
    fn switching_to_raw_releases_the_partial_line() {
        let mut i = Inner::new();
        feed(&mut i, b"part");
        let mut t = i.termios;
        t.lflag &= !ICANON;
        i.set_termios(t);
        assert_eq!(i.take_input(100).expect("readable"), b"part");
    }

    #[test]
    fn output_processing() {
        let mut i = Inner::new();
        for &c in b"a\nb" {
            assert!(i.opost(c));
        }
        assert_eq!(out(&mut i), b"a\r\nb");
        i.termios.oflag = OPOST | OCRNL | ONOCR | XTABS;
        i.column = 0;
        for &c in b"\r\tx\rz" {
            assert!(i.opost(c));
        }
        // ONOCR drops a CR at column 0; OCRNL makes the other one a NL.
        assert_eq!(out(&mut i), b"        x\nz");
        i.termios.oflag = 0;
        assert!(i.opost(b'\n'));
        assert_eq!(out(&mut i), b"\n");
    }

    #[test]
    fn output_is_bounded() {
        let mut i = Inner::new();
        let mut n = 0;
        while i.opost(b'x') {
            n += 1;
            assert!(n <= OUTPUT_CAP);
        }
        assert!(i.output.len() <= OUTPUT_CAP);
        // Echoes are dropped rather than grow the queue.
        feed(&mut i, b"abc");
        assert!(i.output.len() <= OUTPUT_CAP);
    }

    #[test]
    fn utf8_and_tab_erase() {
        let mut i = Inner::new();
        i.termios.iflag |= IUTF8;
        feed(&mut i, "x\u{e9}\x7f\ty\x7f\x7f\n".as_bytes());
        assert_eq!(i.take_input(100).expect("readable"), b"x\n");
        // "x" echoed, "é" echoed and erased as one character, the tab
        // erased back to column 1.
        let echo = out(&mut i);
        assert!(
            echo.starts_with("x\u{e9}\x08 \x08\ty\x08 \x08".as_bytes()),
            "{echo:?}"
        );
        assert!(
            echo.ends_with(b"\x08\x08\x08\x08\x08\x08\x08\r\n"),
            "{echo:?}"
        );
    }

    #[test]
    fn packet_status_follows_flow_control_and_flushes() {
        let mut i = Inner::new();
        // Without packet mode nothing is recorded.
        feed(&mut i, b"\x13");
        assert_eq!(i.pktstatus, 0);
        feed(&mut i, b"\x11");
        i.packet = true;
        feed(&mut i, b"\x13");
        assert_eq!(i.pktstatus, pkt::STOP);
        // START replaces STOP.
        feed(&mut i, b"\x11");
        assert_eq!(i.pktstatus, pkt::START);
        i.pktstatus = 0;
        // IXON off while stopped: flow control gone, output restarted.
        feed(&mut i, b"\x13");
        let mut t = i.termios;
        t.iflag &= !IXON;
        i.set_termios(t);
        assert_eq!(i.pktstatus, pkt::NOSTOP | pkt::START);
        t.iflag |= IXON;
        i.set_termios(t);
        assert_eq!(i.pktstatus, pkt::DOSTOP | pkt::START);
        i.pktstatus = 0;
        // An ISIG character flushes both queues.
        feed(&mut i, b"ab\x03");
        assert_eq!(i.pktstatus, pkt::FLUSHREAD | pkt::FLUSHWRITE);
        i.pktstatus = 0;
        i.termios.lflag |= NOFLSH;
        feed(&mut i, b"\x03");
        assert_eq!(i.pktstatus, 0);
    }

    #[test]
    fn tco_stopped_output_ignores_vstart() {
        let mut i = Inner::new();
        i.tco_stopped = true;
        i.stop();
        feed(&mut i, b"\x11");
        assert!(i.stopped);
    }

    #[test]
    fn wake_flags_mark_complete_lines_only() {
        let mut i = Inner::new();
        i.termios.lflag &= !ECHO;
        feed(&mut i, b"ab");
        assert_eq!(i.wake, 0);
        feed(&mut i, b"\n");
        assert_eq!(i.wake, WAKE_SLAVE);
        i.wake = 0;
        i.termios.lflag &= !ICANON;
        feed(&mut i, b"x");
        assert_eq!(i.wake, WAKE_SLAVE);
    }

    #[test]
    fn ixon_stops_and_starts_output() {
        let mut i = Inner::new();
        feed(&mut i, b"\x13");
        assert!(i.stopped);
        assert!(i.edit.is_empty());
        feed(&mut i, b"\x11");
        assert!(!i.stopped);
        i.termios.iflag &= !IXON;
        feed(&mut i, b"\x13\n");
        assert!(!i.stopped);
        assert_eq!(i.take_input(100).expect("readable"), b"\x13\n");
    }
}
