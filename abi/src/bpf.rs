//! Classic BPF as seccomp reads it: the instruction and `struct
//! seccomp_data` as ABI data, the opcodes and return values seccomp
//! programs use, the one assembler every filter of the project is written
//! with, the kernel's load-time checks (`bpf_check_classic` and
//! `seccomp_check_filter`), and an interpreter that runs a checked program
//! on one call: the Sentry runs guests' own filters with it, and the
//! project's filters are tested as data with it, without installing them.

use core::mem::{offset_of, size_of};

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// One classic BPF instruction (`struct sock_filter`, linux/filter.h).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct SockFilter {
    /// opcode
    pub code: u16,
    /// jump offset if true
    pub jt: u8,
    /// jump offset if false
    pub jf: u8,
    /// operand
    pub k: u32,
}

const _: () = assert!(size_of::<SockFilter>() == 8);

/// What a seccomp program reads (`struct seccomp_data`, linux/seccomp.h).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct SeccompData {
    /// system call number
    pub nr: i32,
    /// `AUDIT_ARCH_*` of the calling convention used
    pub arch: u32,
    /// the address right after the `syscall` instruction
    pub instruction_pointer: u64,
    /// the six argument registers, whole
    pub args: [u64; 6],
}

const _: () = assert!(size_of::<SeccompData>() == 64);

// Instruction classes, sizes, modes, operations and sources
// (linux/bpf_common.h, linux/filter.h).
/// class: load into the accumulator
pub const BPF_LD: u16 = 0x00;
/// class: load into the index register
pub const BPF_LDX: u16 = 0x01;
/// class: store the accumulator in scratch memory
pub const BPF_ST: u16 = 0x02;
/// class: store the index register in scratch memory
pub const BPF_STX: u16 = 0x03;
/// class: arithmetic on the accumulator
pub const BPF_ALU: u16 = 0x04;
/// class: jump
pub const BPF_JMP: u16 = 0x05;
/// class: return
pub const BPF_RET: u16 = 0x06;
/// class: register moves
pub const BPF_MISC: u16 = 0x07;
/// size: 32-bit word
pub const BPF_W: u16 = 0x00;
/// size: 16-bit half word
pub const BPF_H: u16 = 0x08;
/// size: byte
pub const BPF_B: u16 = 0x10;
/// mode: the constant `k`
pub const BPF_IMM: u16 = 0x00;
/// mode: at a constant offset in the data
pub const BPF_ABS: u16 = 0x20;
/// mode: at `X + k` in the data
pub const BPF_IND: u16 = 0x40;
/// mode: scratch memory word `k`
pub const BPF_MEM: u16 = 0x60;
/// mode: the length of the data
pub const BPF_LEN: u16 = 0x80;
/// mode: `4 * (data[k] & 0xf)` (an IP header's length)
pub const BPF_MSH: u16 = 0xa0;
/// operation: add
pub const BPF_ADD: u16 = 0x00;
/// operation: subtract
pub const BPF_SUB: u16 = 0x10;
/// operation: multiply
pub const BPF_MUL: u16 = 0x20;
/// operation: unsigned divide
pub const BPF_DIV: u16 = 0x30;
/// operation: bitwise or
pub const BPF_OR: u16 = 0x40;
/// operation: bitwise and
pub const BPF_AND: u16 = 0x50;
/// operation: shift left
pub const BPF_LSH: u16 = 0x60;
/// operation: logical shift right
pub const BPF_RSH: u16 = 0x70;
/// operation: negate
pub const BPF_NEG: u16 = 0x80;
/// operation: unsigned remainder
pub const BPF_MOD: u16 = 0x90;
/// operation: bitwise exclusive or
pub const BPF_XOR: u16 = 0xa0;
/// jump: always, by `k`
pub const BPF_JA: u16 = 0x00;
/// jump: equal
pub const BPF_JEQ: u16 = 0x10;
/// jump: unsigned greater
pub const BPF_JGT: u16 = 0x20;
/// jump: unsigned greater or equal
pub const BPF_JGE: u16 = 0x30;
/// jump: any bit in common
pub const BPF_JSET: u16 = 0x40;
/// source: the constant `k`
pub const BPF_K: u16 = 0x00;
/// source: the index register `X`
pub const BPF_X: u16 = 0x08;
/// return source: the accumulator
pub const BPF_A: u16 = 0x10;
/// misc: `X = A`
pub const BPF_TAX: u16 = 0x00;
/// misc: `A = X`
pub const BPF_TXA: u16 = 0x80;
/// Words of scratch memory, `M[0..16]` (`BPF_MEMWORDS`).
pub const BPF_MEMWORDS: usize = 16;
/// Where the kernel's "ancillary" loads of socket filters start
/// (`SKF_AD_OFF`); none is a seccomp load.
pub const SKF_AD_OFF: u32 = 0xffff_f000;
/// The kernel's limit on a program's length (`BPF_MAXINSNS`).
pub const BPF_MAXINSNS: usize = 4096;

// Return values (linux/seccomp.h). The kernel takes the most restrictive
// one over all the filters stacked on a thread: the lowest action, read as
// a signed number ([`action_rank`]).
/// kill the whole process with `SIGSYS`
pub const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
/// kill the calling thread with `SIGSYS` (`SECCOMP_RET_KILL`)
pub const SECCOMP_RET_KILL_THREAD: u32 = 0x0000_0000;
/// do not make the call; deliver `SIGSYS` to the thread
pub const SECCOMP_RET_TRAP: u32 = 0x0003_0000;
/// do not make the call; fail it with the errno in the low 16 bits
pub const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
/// ask the user-space listener of the filter
pub const SECCOMP_RET_USER_NOTIF: u32 = 0x7fc0_0000;
/// tell the tracer (`PTRACE_EVENT_SECCOMP`)
pub const SECCOMP_RET_TRACE: u32 = 0x7ff0_0000;
/// make the call and log it
pub const SECCOMP_RET_LOG: u32 = 0x7ffc_0000;
/// make the call
pub const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
/// the bits of a return value that name its action
pub const SECCOMP_RET_ACTION_FULL: u32 = 0xffff_0000;
/// the bits of a return value that carry its data (the errno)
pub const SECCOMP_RET_DATA: u32 = 0x0000_ffff;

/// Every action a filter may return, most restrictive first: what
/// `SECCOMP_GET_ACTION_AVAIL` and /proc/sys/kernel/seccomp/actions_avail
/// list.
pub const SECCOMP_ACTIONS: [u32; 8] = [
    SECCOMP_RET_KILL_PROCESS,
    SECCOMP_RET_KILL_THREAD,
    SECCOMP_RET_TRAP,
    SECCOMP_RET_ERRNO,
    SECCOMP_RET_USER_NOTIF,
    SECCOMP_RET_TRACE,
    SECCOMP_RET_LOG,
    SECCOMP_RET_ALLOW,
];

/// How restrictive a return value is: lower is stronger. The kernel's
/// `ACTION_ONLY()`: the action bits as a signed number, so that
/// `SECCOMP_RET_KILL_PROCESS` (the sign bit) beats everything and an
/// unknown action sorts by its value.
pub const fn action_rank(ret: u32) -> i32 {
    (ret & SECCOMP_RET_ACTION_FULL) as i32
}

// seccomp(2) operations, `prctl(PR_SET_SECCOMP)` modes and filter flags
// (linux/seccomp.h).
/// mode: no filtering
pub const SECCOMP_MODE_DISABLED: u32 = 0;
/// mode: only `read`, `write`, `exit` and `rt_sigreturn`
pub const SECCOMP_MODE_STRICT: u32 = 1;
/// mode: BPF filters
pub const SECCOMP_MODE_FILTER: u32 = 2;
/// operation: enter strict mode
pub const SECCOMP_SET_MODE_STRICT: u32 = 0;
/// operation: add a filter
pub const SECCOMP_SET_MODE_FILTER: u32 = 1;
/// operation: is an action known
pub const SECCOMP_GET_ACTION_AVAIL: u32 = 2;
/// operation: the sizes of the user-notification structures
pub const SECCOMP_GET_NOTIF_SIZES: u32 = 3;
/// flag: give the filter to every thread of the process
pub const SECCOMP_FILTER_FLAG_TSYNC: u32 = 1;
/// flag: log the filter's actions but `ALLOW`
pub const SECCOMP_FILTER_FLAG_LOG: u32 = 2;
/// flag: do not turn on speculative-store-bypass mitigation
pub const SECCOMP_FILTER_FLAG_SPEC_ALLOW: u32 = 4;
/// flag: return a user-notification listener descriptor
pub const SECCOMP_FILTER_FLAG_NEW_LISTENER: u32 = 8;
/// flag: a `TSYNC` that cannot sync fails with `ESRCH`, not a thread id
pub const SECCOMP_FILTER_FLAG_TSYNC_ESRCH: u32 = 16;
/// flag: a notified call waits killably once its notice is received
pub const SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV: u32 = 32;
/// every filter flag Linux knows
pub const SECCOMP_FILTER_FLAGS: u32 = 0x3f;
/// The most instructions all the filters of one thread may hold, each
/// filter after the first counting 4 more (`MAX_INSNS_PER_PATH`).
pub const MAX_INSNS_PER_PATH: usize = 32768;
/// What each filter beyond a thread's first costs on top of its length.
pub const FILTER_PENALTY_INSNS: usize = 4;

/// A program as `seccomp(2)` and `prctl(PR_SET_SECCOMP)` take it (`struct
/// sock_fprog`).
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct SockFprog {
    /// instructions in the program
    pub len: u16,
    /// (the padding before the pointer)
    pub pad: [u8; 6],
    /// the address of the first instruction
    pub filter: u64,
}

const _: () = assert!(size_of::<SockFprog>() == 16);

/// `SECCOMP_GET_NOTIF_SIZES`'s answer (`struct seccomp_notif_sizes`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct SeccompNotifSizes {
    /// `sizeof(struct seccomp_notif)`
    pub seccomp_notif: u16,
    /// `sizeof(struct seccomp_notif_resp)`
    pub seccomp_notif_resp: u16,
    /// `sizeof(struct seccomp_data)`
    pub seccomp_data: u16,
}

const _: () = assert!(size_of::<SeccompNotifSizes>() == 6);

/// A call waiting for the listener (`struct seccomp_notif`), as
/// `SECCOMP_IOCTL_NOTIF_RECV` hands it out.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct SeccompNotif {
    /// the notice's cookie, for the response
    pub id: u64,
    /// the calling thread's id
    pub pid: u32,
    /// none defined
    pub flags: u32,
    /// the call
    pub data: SeccompData,
}

const _: () = assert!(size_of::<SeccompNotif>() == 80);

/// The listener's answer (`struct seccomp_notif_resp`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct SeccompNotifResp {
    /// the notice answered
    pub id: u64,
    /// what the call returns, when `error` is 0
    pub val: i64,
    /// a negative errno, or 0
    pub error: i32,
    /// `SECCOMP_USER_NOTIF_FLAG_CONTINUE`: make the call after all
    pub flags: u32,
}

const _: () = assert!(size_of::<SeccompNotifResp>() == 24);

/// A descriptor the listener puts in the caller's table
/// (`struct seccomp_notif_addfd`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct SeccompNotifAddfd {
    /// the notice whose caller gets it
    pub id: u64,
    /// `SECCOMP_ADDFD_FLAG_*`
    pub flags: u32,
    /// the listener's descriptor to give
    pub srcfd: u32,
    /// the number it gets, with `SECCOMP_ADDFD_FLAG_SETFD`
    pub newfd: u32,
    /// `O_CLOEXEC` or 0
    pub newfd_flags: u32,
}

const _: () = assert!(size_of::<SeccompNotifAddfd>() == 24);

/// Linux's sizes: a notice is an id, a pid, flags and the call's data; a
/// response an id, a value, an error and flags.
pub const SECCOMP_NOTIF_SIZES: SeccompNotifSizes = SeccompNotifSizes {
    seccomp_notif: size_of::<SeccompNotif>() as u16,
    seccomp_notif_resp: size_of::<SeccompNotifResp>() as u16,
    seccomp_data: size_of::<SeccompData>() as u16,
};

// The listener's ioctls (`_IOWR('!', 0, struct seccomp_notif)`, ...).
/// take the next waiting call
pub const SECCOMP_IOCTL_NOTIF_RECV: u32 = 0xc050_2100;
/// answer one
pub const SECCOMP_IOCTL_NOTIF_SEND: u32 = 0xc018_2101;
/// is a notice still waiting for its answer
pub const SECCOMP_IOCTL_NOTIF_ID_VALID: u32 = 0x4008_2102;
/// (the same, with the direction bits Linux first gave it)
pub const SECCOMP_IOCTL_NOTIF_ID_VALID_WRONG_DIR: u32 = 0x8008_2102;
/// give the caller a descriptor
pub const SECCOMP_IOCTL_NOTIF_ADDFD: u32 = 0x4018_2103;
/// set listener flags
pub const SECCOMP_IOCTL_NOTIF_SET_FLAGS: u32 = 0x4008_2104;
/// response flag: make the call after all
pub const SECCOMP_USER_NOTIF_FLAG_CONTINUE: u32 = 1;
/// addfd flag: at `newfd` exactly
pub const SECCOMP_ADDFD_FLAG_SETFD: u32 = 1;
/// addfd flag: and answer the call with the new descriptor
pub const SECCOMP_ADDFD_FLAG_SEND: u32 = 2;
/// listener flag: wake the caller on the listener's CPU (a scheduling
/// hint)
pub const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;

/// `AUDIT_ARCH_X86_64`: a call made with the x86-64 `syscall` convention.
pub const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
/// `AUDIT_ARCH_I386`: a call made with `int 0x80` (i386 numbers).
pub const AUDIT_ARCH_I386: u32 = 0x4000_0003;
/// `__X32_SYSCALL_BIT`: numbers with it set are x32 calls, under
/// `AUDIT_ARCH_X86_64` too.
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// A place in a program that jumps go to, made by [`Assembler::label`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Label {
    id: usize,
    name: &'static str,
}

/// Where a conditional jump goes on one of its two outcomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// the next instruction
    Next,
    /// the instruction [`Assembler::bind`] put this label on
    Label(Label),
}

impl From<Label> for Target {
    fn from(l: Label) -> Target {
        Target::Label(l)
    }
}

/// Why a program does not assemble into one the kernel would load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AsmError {
    /// a jump names a label never bound, or bound past the last instruction
    #[error("label {0} names no instruction")]
    UndefinedLabel(&'static str),
    /// a label is bound twice
    #[error("duplicate label {0}")]
    DuplicateLabel(&'static str),
    /// classic BPF jumps only forward, by at most 255 instructions
    #[error("jump to {0} is backwards or farther than 255 instructions")]
    JumpOutOfRange(&'static str),
    /// a system call has six arguments
    #[error("argument index {0} out of range")]
    BadArg(usize),
    /// the kernel loads only programs that end in a return
    #[error("the program does not end in a return")]
    NoFinalReturn,
    /// longer than `BPF_MAXINSNS`
    #[error("program of {0} instructions is too long")]
    TooLong(usize),
}

/// A jump waiting for its label's position.
#[derive(Clone, Copy, Debug)]
struct Fixup {
    at: usize,
    when_true: bool,
    /// a `BPF_JA`, whose offset is its 32-bit `k`
    always: bool,
    label: Label,
}

/// Builds a program instruction by instruction, with forward jumps to
/// labels resolved when it is finished.
///
/// ```
/// use abi::bpf::{Assembler, Target::Next, SECCOMP_RET_ALLOW, SECCOMP_RET_KILL_PROCESS};
/// let mut a = Assembler::new();
/// let kill = a.label("kill");
/// a.load_nr();
/// a.jeq(39, Next, kill); // getpid
/// a.ret(SECCOMP_RET_ALLOW);
/// a.bind(kill);
/// a.ret(SECCOMP_RET_KILL_PROCESS);
/// assert_eq!(a.finish().expect("assembles").len(), 4);
/// ```
#[derive(Debug, Default)]
pub struct Assembler {
    insns: Vec<SockFilter>,
    /// per label: the instruction it was bound to
    bound: Vec<Option<usize>>,
    fixups: Vec<Fixup>,
    /// the first mistake, reported by [`Assembler::finish`]
    error: Option<AsmError>,
}

impl Assembler {
    /// An empty program.
    pub fn new() -> Assembler {
        Assembler::default()
    }

    /// A new label, not yet bound; `name` is what errors call it.
    pub fn label(&mut self, name: &'static str) -> Label {
        self.bound.push(None);
        Label {
            id: self.bound.len() - 1,
            name,
        }
    }

    /// Puts `label` on the next instruction emitted.
    pub fn bind(&mut self, label: Label) {
        let slot = &mut self.bound[label.id];
        if slot.is_some() {
            self.fail(AsmError::DuplicateLabel(label.name));
        } else {
            *slot = Some(self.insns.len());
        }
    }

    fn fail(&mut self, e: AsmError) {
        self.error.get_or_insert(e);
    }

    fn emit(&mut self, code: u16, k: u32) {
        self.insns.push(SockFilter {
            code,
            jt: 0,
            jf: 0,
            k,
        });
    }

    /// `A = *(u32 *)(seccomp_data + offset)`.
    pub fn load(&mut self, offset: usize) {
        // Offsets in `struct seccomp_data`: 64 bytes at most.
        self.emit(BPF_LD | BPF_W | BPF_ABS, offset as u32);
    }

    /// `A = nr`.
    pub fn load_nr(&mut self) {
        self.load(offset_of!(SeccompData, nr));
    }

    /// `A = arch`.
    pub fn load_arch(&mut self) {
        self.load(offset_of!(SeccompData, arch));
    }

    /// `A =` the low 32 bits of the instruction pointer.
    pub fn load_ip_low(&mut self) {
        self.load(offset_of!(SeccompData, instruction_pointer));
    }

    /// `A =` the high 32 bits of the instruction pointer.
    pub fn load_ip_high(&mut self) {
        self.load(offset_of!(SeccompData, instruction_pointer) + 4);
    }

    fn arg_offset(&mut self, n: usize) -> usize {
        if n >= 6 {
            self.fail(AsmError::BadArg(n));
        }
        offset_of!(SeccompData, args) + 8 * n
    }

    /// `A =` the low 32 bits of argument `n` (0..6): all an `int` argument
    /// is. x86-64 is little-endian: the low word comes first.
    pub fn load_arg_low(&mut self, n: usize) {
        let off = self.arg_offset(n);
        self.load(off);
    }

    /// `A =` the high 32 bits of argument `n` (0..6).
    pub fn load_arg_high(&mut self, n: usize) {
        let off = self.arg_offset(n);
        self.load(off + 4);
    }

    /// `A &= k`.
    pub fn and(&mut self, k: u32) {
        self.emit(BPF_ALU | BPF_AND | BPF_K, k);
    }

    fn jump(&mut self, op: u16, k: u32, t: Target, f: Target) {
        let at = self.insns.len();
        self.emit(BPF_JMP | op | BPF_K, k);
        for (when_true, target) in [(true, t), (false, f)] {
            if let Target::Label(label) = target {
                self.fixups.push(Fixup {
                    at,
                    when_true,
                    always: false,
                    label,
                });
            }
        }
    }

    /// `if A == k goto t else goto f`.
    pub fn jeq(&mut self, k: u32, t: impl Into<Target>, f: impl Into<Target>) {
        self.jump(BPF_JEQ, k, t.into(), f.into());
    }

    /// `if A >= k goto t else goto f`, unsigned.
    pub fn jge(&mut self, k: u32, t: impl Into<Target>, f: impl Into<Target>) {
        self.jump(BPF_JGE, k, t.into(), f.into());
    }

    /// `if A > k goto t else goto f`, unsigned.
    pub fn jgt(&mut self, k: u32, t: impl Into<Target>, f: impl Into<Target>) {
        self.jump(BPF_JGT, k, t.into(), f.into());
    }

    /// `goto label`, however far (a conditional jump reaches 255
    /// instructions at most).
    pub fn ja(&mut self, label: Label) {
        self.fixups.push(Fixup {
            at: self.insns.len(),
            when_true: true,
            always: true,
            label,
        });
        self.emit(BPF_JMP | BPF_JA, 0);
    }

    /// `return action` (a `SECCOMP_RET_*` value).
    pub fn ret(&mut self, action: u32) {
        self.emit(BPF_RET | BPF_K, action);
    }

    /// The program, its jumps resolved, or the first reason the kernel
    /// would refuse it.
    pub fn finish(mut self) -> Result<Vec<SockFilter>, AsmError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let len = self.insns.len();
        if len > BPF_MAXINSNS {
            return Err(AsmError::TooLong(len));
        }
        if self.insns.last().map(|i| i.code) != Some(BPF_RET | BPF_K) {
            return Err(AsmError::NoFinalReturn);
        }
        for f in &self.fixups {
            let to = self.bound[f.label.id]
                .filter(|&to| to < len)
                .ok_or(AsmError::UndefinedLabel(f.label.name))?;
            // Offsets count from the instruction after the jump.
            let far = to
                .checked_sub(f.at + 1)
                .ok_or(AsmError::JumpOutOfRange(f.label.name))?;
            if f.always {
                self.insns[f.at].k = far as u32;
                continue;
            }
            let off = u8::try_from(far).map_err(|_| AsmError::JumpOutOfRange(f.label.name))?;
            let insn = &mut self.insns[f.at];
            if f.when_true {
                insn.jt = off;
            } else {
                insn.jf = off;
            }
        }
        Ok(self.insns)
    }
}

/// A program as the bytes the kernel reads (`sock_fprog.filter`).
pub fn program_bytes(prog: &[SockFilter]) -> &[u8] {
    prog.as_bytes()
}

/// Runs `prog` on one call as the kernel would, returning its `SECCOMP_RET_*`
/// value; `None` for a program the kernel would refuse to load (see
/// [`Program::check`]).
pub fn run(prog: &[SockFilter], data: &SeccompData) -> Option<u32> {
    Program::check(prog).ok().map(|p| p.run(data))
}

/// Why the kernel refuses to load a seccomp program (`EINVAL`, each of
/// them): `pc` is the instruction at fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// no instructions, or more than `BPF_MAXINSNS`
    #[error("a program of {0} instructions")]
    Length(usize),
    /// an opcode classic BPF does not have
    #[error("instruction {pc}: unknown opcode {code:#x}")]
    BadOpcode {
        /// where
        pc: usize,
        /// the opcode
        code: u16,
    },
    /// a division or remainder by the constant 0
    #[error("instruction {pc}: division by zero")]
    DivisionByZero {
        /// where
        pc: usize,
    },
    /// a shift by a constant of 32 or more
    #[error("instruction {pc}: shift by {k}")]
    BadShift {
        /// where
        pc: usize,
        /// the shift
        k: u32,
    },
    /// a scratch memory word past `M[15]`
    #[error("instruction {pc}: no scratch word {k}")]
    BadMemoryWord {
        /// where
        pc: usize,
        /// the word
        k: u32,
    },
    /// a jump past the last instruction (jumps only go forward)
    #[error("instruction {pc}: jump past the end")]
    JumpOutOfRange {
        /// where
        pc: usize,
    },
    /// the last instruction is not a return
    #[error("the program does not end in a return")]
    NoFinalReturn,
    /// a scratch word read before every path to it wrote it
    #[error("instruction {pc}: scratch word {k} read before it is written")]
    MemoryUnset {
        /// where
        pc: usize,
        /// the word
        k: u32,
    },
    /// a load of `seccomp_data` that is not a whole, aligned word in it
    #[error("instruction {pc}: load at offset {k} of seccomp_data")]
    BadLoad {
        /// where
        pc: usize,
        /// the offset
        k: u32,
    },
    /// classic BPF, but not for seccomp (packet loads, `BPF_MOD`)
    #[error("instruction {pc}: opcode {code:#x} is not allowed in seccomp programs")]
    NotForSeccomp {
        /// where
        pc: usize,
        /// the opcode
        code: u16,
    },
}

/// An operand: the constant or the index register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Src {
    K(u32),
    X,
}

/// An ALU operation on the accumulator (no remainder: seccomp refuses
/// `BPF_MOD`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AluOp {
    Add,
    Sub,
    Mul,
    Div,
    And,
    Or,
    Xor,
    Lsh,
    Rsh,
}

impl AluOp {
    /// `a op v`; `None` for a division by zero (which kills the thread).
    fn apply(self, a: u32, v: u32) -> Option<u32> {
        Some(match self {
            AluOp::Add => a.wrapping_add(v),
            AluOp::Sub => a.wrapping_sub(v),
            AluOp::Mul => a.wrapping_mul(v),
            AluOp::Div => a.checked_div(v)?,
            AluOp::And => a & v,
            AluOp::Or => a | v,
            AluOp::Xor => a ^ v,
            AluOp::Lsh => a.wrapping_shl(v),
            AluOp::Rsh => a.wrapping_shr(v),
        })
    }
}

/// A conditional jump's test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cond {
    Eq,
    Gt,
    Ge,
    Set,
}

impl Cond {
    fn holds(self, a: u32, v: u32) -> bool {
        match self {
            Cond::Eq => a == v,
            Cond::Gt => a > v,
            Cond::Ge => a >= v,
            Cond::Set => a & v != 0,
        }
    }
}

/// One instruction as the interpreter runs it: decoded once, at load, with
/// the word index of a `seccomp_data` load and the scratch index of a
/// memory access already checked (`BPF_LEN` becomes the constant 64, as
/// Linux rewrites it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Insn {
    /// `A = seccomp_data` word `n`
    LdWord(u8),
    /// `A = k`
    LdImm(u32),
    /// `X = k`
    LdxImm(u32),
    /// `A = M[n]`
    LdMem(u8),
    /// `X = M[n]`
    LdxMem(u8),
    /// `M[n] = A`
    St(u8),
    /// `M[n] = X`
    Stx(u8),
    /// `A = A op src`
    Alu(AluOp, Src),
    /// `A = -A`
    Neg,
    /// skip `k` instructions
    Ja(u32),
    /// skip `jt` instructions if `A cond src`, else `jf`
    Jump(Cond, Src, u8, u8),
    /// return `k`
    Ret(u32),
    /// return `A`
    RetA,
    /// `X = A`
    Tax,
    /// `A = X`
    Txa,
}

// The opcodes the checks single out.
const DIV_K: u16 = BPF_ALU | BPF_DIV | BPF_K;
const MOD_K: u16 = BPF_ALU | BPF_MOD | BPF_K;
const LSH_K: u16 = BPF_ALU | BPF_LSH | BPF_K;
const RSH_K: u16 = BPF_ALU | BPF_RSH | BPF_K;
const LD_MEM: u16 = BPF_LD | BPF_MEM;
const LDX_MEM: u16 = BPF_LDX | BPF_MEM;
const ST: u16 = BPF_ST;
const STX: u16 = BPF_STX;
const JA: u16 = BPF_JMP | BPF_JA;
const LD_W_ABS: u16 = BPF_LD | BPF_W | BPF_ABS;
const LD_H_ABS: u16 = BPF_LD | BPF_H | BPF_ABS;
const LD_B_ABS: u16 = BPF_LD | BPF_B | BPF_ABS;

/// Whether `code` is an opcode classic BPF has (the kernel's
/// `chk_code_allowed()`): the exact value, no stray bits.
fn classic_opcode(code: u16) -> bool {
    const ALU_OPS: [u16; 11] = [
        BPF_ADD, BPF_SUB, BPF_MUL, BPF_DIV, BPF_MOD, BPF_AND, BPF_OR, BPF_XOR, BPF_LSH, BPF_RSH,
        BPF_NEG,
    ];
    let class = code & 0x07;
    match class {
        BPF_ALU => {
            let op = code & 0xf0;
            let src = code & BPF_X;
            code & !0xf8 == BPF_ALU && ALU_OPS.contains(&op) && (op != BPF_NEG || src == BPF_K)
        }
        BPF_JMP => {
            let op = code & 0xf0;
            let src = code & BPF_X;
            code & !0xf8 == BPF_JMP
                && match op {
                    BPF_JA => src == BPF_K,
                    BPF_JEQ | BPF_JGT | BPF_JGE | BPF_JSET => true,
                    _ => false,
                }
        }
        _ => matches!(
            code,
            0x20 | 0x28 | 0x30 // LD W/H/B ABS
                | 0x40 | 0x48 | 0x50 // LD W/H/B IND
                | 0x80 // LD W LEN
                | 0x00 // LD IMM
                | 0x60 // LD MEM
                | 0x81 // LDX W LEN
                | 0xb1 // LDX B MSH
                | 0x01 // LDX IMM
                | 0x61 // LDX MEM
                | 0x02 // ST
                | 0x03 // STX
                | 0x07 // MISC TAX
                | 0x87 // MISC TXA
                | 0x06 // RET K
                | 0x16 // RET A
        ),
    }
}

/// Whether `code` is a conditional jump.
fn conditional(code: u16) -> bool {
    code & 0x07 == BPF_JMP && code & 0xf0 != BPF_JA
}

/// The kernel's `bpf_check_classic()`: every opcode known, no constant
/// division by zero or shift past 31, scratch words in range, jumps
/// forward and inside the program, a return at the end, and no scratch
/// word read on a path that has not written it.
fn check_classic(prog: &[SockFilter]) -> Result<(), CheckError> {
    let len = prog.len();
    if len == 0 || len > BPF_MAXINSNS {
        return Err(CheckError::Length(len));
    }
    for (pc, i) in prog.iter().enumerate() {
        if !classic_opcode(i.code) {
            return Err(CheckError::BadOpcode { pc, code: i.code });
        }
        // Offsets count from the next instruction; `left` is how many
        // follow this one.
        let left = len - pc - 1;
        match i.code {
            DIV_K | MOD_K if i.k == 0 => return Err(CheckError::DivisionByZero { pc }),
            LSH_K | RSH_K if i.k >= 32 => return Err(CheckError::BadShift { pc, k: i.k }),
            LD_MEM | LDX_MEM | ST | STX if i.k as usize >= BPF_MEMWORDS => {
                return Err(CheckError::BadMemoryWord { pc, k: i.k });
            }
            JA if i.k as usize >= left => return Err(CheckError::JumpOutOfRange { pc }),
            c if conditional(c) && (usize::from(i.jt) >= left || usize::from(i.jf) >= left) => {
                return Err(CheckError::JumpOutOfRange { pc });
            }
            // No ancillary load (protocol, interface, ...) means anything
            // to a seccomp program.
            LD_W_ABS | LD_H_ABS | LD_B_ABS if i.k >= SKF_AD_OFF => {
                return Err(CheckError::BadLoad { pc, k: i.k });
            }
            _ => {}
        }
    }
    let last = prog[len - 1].code;
    if last != BPF_RET | BPF_K && last != BPF_RET | BPF_A {
        return Err(CheckError::NoFinalReturn);
    }
    check_scratch_memory(prog)
}

/// The kernel's `check_load_and_stores()`: a forward pass keeping, per
/// instruction, the scratch words written on every path reaching it (one
/// bit per word). A jump hands its set to its targets and the instruction
/// after it starts from "everything" again, narrowed by the jumps to it;
/// after a return nothing is reset, as in Linux (only a jump target can
/// follow one usefully).
fn check_scratch_memory(prog: &[SockFilter]) -> Result<(), CheckError> {
    let mut masks = vec![u16::MAX; prog.len()];
    let mut valid = 0u16;
    let narrow = |masks: &mut Vec<u16>, to: usize, valid: u16| {
        if let Some(m) = masks.get_mut(to) {
            *m &= valid;
        }
    };
    for (pc, i) in prog.iter().enumerate() {
        valid &= masks[pc];
        let word = 1u16 << (i.k & 15);
        match i.code {
            ST | STX => valid |= word,
            LD_MEM | LDX_MEM if valid & word == 0 => {
                return Err(CheckError::MemoryUnset { pc, k: i.k });
            }
            JA => {
                narrow(&mut masks, pc + 1 + i.k as usize, valid);
                valid = u16::MAX;
            }
            c if conditional(c) => {
                narrow(&mut masks, pc + 1 + usize::from(i.jt), valid);
                narrow(&mut masks, pc + 1 + usize::from(i.jf), valid);
                valid = u16::MAX;
            }
            _ => {}
        }
    }
    Ok(())
}

/// The kernel's `seccomp_check_filter()` on one instruction that passed
/// [`check_classic`]: what a seccomp program may do, decoded. Loads read
/// whole aligned words of `seccomp_data` only; `BPF_LEN` is its size; no
/// packet loads and no `BPF_MOD` (which Linux's list leaves out).
fn decode_for_seccomp(pc: usize, i: &SockFilter) -> Result<Insn, CheckError> {
    let data_len = size_of::<SeccompData>() as u32;
    let src = || {
        if i.code & BPF_X != 0 {
            Src::X
        } else {
            Src::K(i.k)
        }
    };
    // Scratch indices are below 16 (checked by `check_classic`).
    let word = (i.k & 15) as u8;
    let insn = match i.code & 0x07 {
        BPF_LD => match i.code {
            c if c == BPF_LD | BPF_W | BPF_ABS => {
                if i.k >= data_len || !i.k.is_multiple_of(4) {
                    return Err(CheckError::BadLoad { pc, k: i.k });
                }
                Insn::LdWord((i.k / 4) as u8)
            }
            c if c == BPF_LD | BPF_W | BPF_LEN => Insn::LdImm(data_len),
            c if c == BPF_LD | BPF_IMM => Insn::LdImm(i.k),
            c if c == BPF_LD | BPF_MEM => Insn::LdMem(word),
            code => return Err(CheckError::NotForSeccomp { pc, code }),
        },
        BPF_LDX => match i.code {
            c if c == BPF_LDX | BPF_W | BPF_LEN => Insn::LdxImm(data_len),
            c if c == BPF_LDX | BPF_IMM => Insn::LdxImm(i.k),
            c if c == BPF_LDX | BPF_MEM => Insn::LdxMem(word),
            code => return Err(CheckError::NotForSeccomp { pc, code }),
        },
        BPF_ST => Insn::St(word),
        BPF_STX => Insn::Stx(word),
        BPF_ALU => {
            let op = match i.code & 0xf0 {
                BPF_NEG => return Ok(Insn::Neg),
                BPF_ADD => AluOp::Add,
                BPF_SUB => AluOp::Sub,
                BPF_MUL => AluOp::Mul,
                BPF_DIV => AluOp::Div,
                BPF_AND => AluOp::And,
                BPF_OR => AluOp::Or,
                BPF_XOR => AluOp::Xor,
                BPF_LSH => AluOp::Lsh,
                BPF_RSH => AluOp::Rsh,
                _ => return Err(CheckError::NotForSeccomp { pc, code: i.code }),
            };
            Insn::Alu(op, src())
        }
        BPF_JMP => {
            let cond = match i.code & 0xf0 {
                BPF_JA => return Ok(Insn::Ja(i.k)),
                BPF_JEQ => Cond::Eq,
                BPF_JGT => Cond::Gt,
                BPF_JGE => Cond::Ge,
                _ => Cond::Set,
            };
            Insn::Jump(cond, src(), i.jt, i.jf)
        }
        BPF_RET => {
            if i.code & BPF_A != 0 {
                Insn::RetA
            } else {
                Insn::Ret(i.k)
            }
        }
        _ => {
            if i.code & BPF_TXA != 0 {
                Insn::Txa
            } else {
                Insn::Tax
            }
        }
    };
    Ok(insn)
}

/// A classic BPF program the kernel's seccomp would load, decoded for
/// [`Program::run`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    insns: Box<[Insn]>,
}

impl Program {
    /// Checks `prog` as `seccomp(SECCOMP_SET_MODE_FILTER)` does (the
    /// kernel's `bpf_check_classic()`, then `seccomp_check_filter()`).
    pub fn check(prog: &[SockFilter]) -> Result<Program, CheckError> {
        check_classic(prog)?;
        let insns = prog
            .iter()
            .enumerate()
            .map(|(pc, i)| decode_for_seccomp(pc, i))
            .collect::<Result<Box<[Insn]>, CheckError>>()?;
        Ok(Program { insns })
    }

    /// Its length in instructions.
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    /// Never true: the kernel loads no empty program.
    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }

    /// Runs the program on one call; its `SECCOMP_RET_*` value.
    pub fn run(&self, data: &SeccompData) -> u32 {
        self.run_words(&data_words(data))
    }

    /// [`Program::run`] on `seccomp_data` as the 16 words loads read
    /// ([`data_words`]), made once for all the filters of a thread.
    ///
    /// A and X start at 0, as do the scratch words (which the check made
    /// sure are written before they are read). A division by zero ends the
    /// program with 0 (`SECCOMP_RET_KILL_THREAD`), as the kernel's
    /// translation of classic BPF does; a shift by `X` uses its low five
    /// bits, as x86's shift instructions do. Every step moves forward, so
    /// the run ends within `len` steps.
    pub fn run_words(&self, data: &[u32; 16]) -> u32 {
        let (mut a, mut x) = (0u32, 0u32);
        let mut mem = [0u32; BPF_MEMWORDS];
        let mut pc = 0usize;
        while let Some(&insn) = self.insns.get(pc) {
            pc += 1;
            match insn {
                Insn::LdWord(n) => a = data[usize::from(n) & 15],
                Insn::LdImm(k) => a = k,
                Insn::LdxImm(k) => x = k,
                Insn::LdMem(n) => a = mem[usize::from(n) & 15],
                Insn::LdxMem(n) => x = mem[usize::from(n) & 15],
                Insn::St(n) => mem[usize::from(n) & 15] = a,
                Insn::Stx(n) => mem[usize::from(n) & 15] = x,
                Insn::Alu(op, src) => {
                    let v = match src {
                        Src::K(k) => k,
                        Src::X => x,
                    };
                    match op.apply(a, v) {
                        Some(r) => a = r,
                        None => return SECCOMP_RET_KILL_THREAD,
                    }
                }
                Insn::Neg => a = a.wrapping_neg(),
                Insn::Ja(k) => pc = pc.saturating_add(k as usize),
                Insn::Jump(cond, src, jt, jf) => {
                    let v = match src {
                        Src::K(k) => k,
                        Src::X => x,
                    };
                    pc += usize::from(if cond.holds(a, v) { jt } else { jf });
                }
                Insn::Ret(k) => return k,
                Insn::RetA => return a,
                Insn::Tax => x = a,
                Insn::Txa => a = x,
            }
        }
        // (past the end: the check rules it out; the strictest answer)
        SECCOMP_RET_KILL_PROCESS
    }

    /// What the program returns for every call `nr` of `arch`, whatever
    /// its arguments and instruction pointer, or `None` if that depends on
    /// them (Linux's `seccomp_cache_prepare()`): [`Program::run_words`]
    /// with only words 0 and 1 known, giving up at any use of another.
    pub fn result_for_number(&self, nr: u32, arch: u32) -> Option<u32> {
        let (mut a, mut x) = (Some(0u32), Some(0u32));
        let mut mem = [Some(0u32); BPF_MEMWORDS];
        let mut pc = 0usize;
        while let Some(&insn) = self.insns.get(pc) {
            pc += 1;
            match insn {
                Insn::LdWord(0) => a = Some(nr),
                Insn::LdWord(1) => a = Some(arch),
                Insn::LdWord(_) => a = None,
                Insn::LdImm(k) => a = Some(k),
                Insn::LdxImm(k) => x = Some(k),
                Insn::LdMem(n) => a = mem[usize::from(n) & 15],
                Insn::LdxMem(n) => x = mem[usize::from(n) & 15],
                Insn::St(n) => mem[usize::from(n) & 15] = a,
                Insn::Stx(n) => mem[usize::from(n) & 15] = x,
                Insn::Alu(op, src) => {
                    let v = match src {
                        Src::K(k) => Some(k),
                        Src::X => x,
                    };
                    a = match (a, v) {
                        (Some(a), Some(v)) => match op.apply(a, v) {
                            Some(r) => Some(r),
                            None => return Some(SECCOMP_RET_KILL_THREAD),
                        },
                        _ => None,
                    };
                }
                Insn::Neg => a = a.map(u32::wrapping_neg),
                Insn::Ja(k) => pc = pc.saturating_add(k as usize),
                Insn::Jump(cond, src, jt, jf) => {
                    let v = match src {
                        Src::K(k) => k,
                        Src::X => x?,
                    };
                    pc += usize::from(if cond.holds(a?, v) { jt } else { jf });
                }
                Insn::Ret(k) => return Some(k),
                Insn::RetA => return a,
                Insn::Tax => x = a,
                Insn::Txa => a = x,
            }
        }
        Some(SECCOMP_RET_KILL_PROCESS)
    }
}

/// `seccomp_data` as the 16 native-endian words a program's loads read.
pub fn data_words(data: &SeccompData) -> [u32; 16] {
    zerocopy::transmute!(*data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Target::Next;

    fn call(nr: i32) -> SeccompData {
        SeccompData {
            nr,
            arch: AUDIT_ARCH_X86_64,
            ..SeccompData::default()
        }
    }

    #[test]
    fn opcodes_are_linux_values() {
        assert_eq!(BPF_LD | BPF_W | BPF_ABS, 0x20);
        assert_eq!(BPF_ALU | BPF_AND | BPF_K, 0x54);
        assert_eq!(BPF_JMP | BPF_JEQ | BPF_K, 0x15);
        assert_eq!(BPF_JMP | BPF_JGE | BPF_K, 0x35);
        assert_eq!(BPF_RET | BPF_K, 0x06);
    }

    #[test]
    fn loads_name_the_fields_of_seccomp_data() {
        let mut a = Assembler::new();
        a.load_nr();
        a.load_arch();
        a.load_ip_low();
        a.load_ip_high();
        a.load_arg_low(0);
        a.load_arg_high(0);
        a.load_arg_low(5);
        a.load_arg_high(5);
        a.ret(0);
        let offsets: Vec<u32> = a.finish().expect("assembles")[..8]
            .iter()
            .map(|i| i.k)
            .collect();
        assert_eq!(offsets, [0, 4, 8, 12, 16, 20, 56, 60]);
    }

    #[test]
    fn a_long_jump_goes_past_what_a_conditional_one_reaches() {
        let mut a = Assembler::new();
        let (far, low) = (a.label("far"), a.label("low"));
        a.load_nr();
        a.jgt(5, Next, low);
        a.ja(far);
        a.bind(low);
        for _ in 0..300 {
            a.ret(1);
        }
        a.bind(far);
        a.ret(SECCOMP_RET_ALLOW);
        let p = a.finish().expect("assembles");
        assert_eq!(p[2].k, 300);
        assert_eq!(run(&p, &call(6)), Some(SECCOMP_RET_ALLOW));
        assert_eq!(run(&p, &call(5)), Some(1));
    }

    #[test]
    fn a_result_that_needs_no_argument_is_known_from_the_number() {
        let mut a = Assembler::new();
        let args = a.label("args");
        a.load_arch();
        a.jeq(AUDIT_ARCH_X86_64, Next, args);
        a.load_nr();
        a.jeq(39, args, Next);
        a.ret(SECCOMP_RET_ALLOW);
        a.bind(args);
        a.load_arg_low(0);
        a.jeq(0, Next, Next);
        a.ret(SECCOMP_RET_ERRNO | 1);
        let p = Program::check(&a.finish().expect("assembles")).expect("valid");
        assert_eq!(
            p.result_for_number(0, AUDIT_ARCH_X86_64),
            Some(SECCOMP_RET_ALLOW)
        );
        assert_eq!(p.result_for_number(39, AUDIT_ARCH_X86_64), None);
        assert_eq!(p.result_for_number(0, 0), None);
    }

    #[test]
    fn jump_offsets_count_from_the_next_instruction() {
        let mut a = Assembler::new();
        let b = a.label("b");
        a.load_nr();
        a.jeq(1, b, Next);
        a.ret(10);
        a.bind(b);
        a.ret(20);
        let p = a.finish().expect("assembles");
        assert_eq!((p[1].jt, p[1].jf), (1, 0));
        assert_eq!(run(&p, &call(1)), Some(20));
        assert_eq!(run(&p, &call(0)), Some(10));
    }

    #[test]
    fn arguments_load_in_halves() {
        let mut a = Assembler::new();
        let no = a.label("no");
        a.load_arg_low(2);
        a.jeq(0x89ab_cdef, Next, no);
        a.load_arg_high(2);
        a.and(0xff);
        a.jge(0x23, Next, no);
        a.ret(SECCOMP_RET_ALLOW);
        a.bind(no);
        a.ret(SECCOMP_RET_KILL_PROCESS);
        let p = a.finish().expect("assembles");
        let with = |arg: u64| {
            let mut d = call(0);
            d.args[2] = arg;
            run(&p, &d)
        };
        assert_eq!(with(0x1123_89ab_cdef), Some(SECCOMP_RET_ALLOW));
        assert_eq!(with(0x1122_89ab_cdef), Some(SECCOMP_RET_KILL_PROCESS));
        assert_eq!(with(0x1123_89ab_cdee), Some(SECCOMP_RET_KILL_PROCESS));
    }

    #[test]
    fn programs_the_kernel_refuses_do_not_assemble() {
        let mut a = Assembler::new();
        let x = a.label("x");
        a.load_nr();
        a.jeq(0, x, Next);
        a.ret(0);
        assert_eq!(a.finish(), Err(AsmError::UndefinedLabel("x")));

        let mut a = Assembler::new();
        let top = a.label("top");
        a.bind(top);
        a.load_nr();
        a.jeq(0, top, Next);
        a.ret(0);
        assert_eq!(a.finish(), Err(AsmError::JumpOutOfRange("top")));

        let mut a = Assembler::new();
        let far = a.label("far");
        a.load_nr();
        a.jeq(0, far, Next);
        for _ in 0..256 {
            a.ret(0);
        }
        a.bind(far);
        a.ret(1);
        assert_eq!(a.finish(), Err(AsmError::JumpOutOfRange("far")));

        let mut a = Assembler::new();
        let d = a.label("a");
        a.bind(d);
        a.bind(d);
        a.ret(0);
        assert_eq!(a.finish(), Err(AsmError::DuplicateLabel("a")));

        let mut a = Assembler::new();
        let end = a.label("end");
        a.load_nr();
        a.jeq(0, end, Next);
        a.ret(0);
        a.bind(end);
        assert_eq!(a.finish(), Err(AsmError::UndefinedLabel("end")));

        let mut a = Assembler::new();
        a.load_arg_low(6);
        a.ret(0);
        assert_eq!(a.finish(), Err(AsmError::BadArg(6)));

        let mut a = Assembler::new();
        a.load_nr();
        assert_eq!(a.finish(), Err(AsmError::NoFinalReturn));
        assert_eq!(Assembler::new().finish(), Err(AsmError::NoFinalReturn));

        let mut a = Assembler::new();
        for _ in 0..=BPF_MAXINSNS {
            a.ret(0);
        }
        assert_eq!(a.finish(), Err(AsmError::TooLong(BPF_MAXINSNS + 1)));
    }

    #[test]
    fn the_interpreter_refuses_what_the_kernel_would() {
        let ld = |k| SockFilter {
            code: BPF_LD | BPF_W | BPF_ABS,
            jt: 0,
            jf: 0,
            k,
        };
        let ret = SockFilter {
            code: BPF_RET | BPF_K,
            jt: 0,
            jf: 0,
            k: 7,
        };
        assert_eq!(run(&[ld(60), ret], &call(0)), Some(7));
        assert_eq!(run(&[ld(64), ret], &call(0)), None);
        assert_eq!(run(&[ld(2), ret], &call(0)), None);
        assert_eq!(run(&[ld(0)], &call(0)), None);
        // A jump by 0 is a no-op the kernel loads; by 1 it leaves the
        // program.
        assert_eq!(run(&[ja(0), ret], &call(0)), Some(7));
        assert_eq!(run(&[ja(1), ret], &call(0)), None);
    }

    fn stmt(code: u16, k: u32) -> SockFilter {
        SockFilter {
            code,
            jt: 0,
            jf: 0,
            k,
        }
    }

    fn jmp(code: u16, k: u32, jt: u8, jf: u8) -> SockFilter {
        SockFilter { code, jt, jf, k }
    }

    fn ja(k: u32) -> SockFilter {
        stmt(BPF_JMP | BPF_JA, k)
    }

    const RET_A: u16 = BPF_RET | BPF_A;
    const RET_K: u16 = BPF_RET | BPF_K;

    fn check(prog: &[SockFilter]) -> Result<usize, CheckError> {
        Program::check(prog).map(|p| p.len())
    }

    #[test]
    fn the_check_refuses_what_linux_refuses() {
        let allow = stmt(RET_K, SECCOMP_RET_ALLOW);
        // (each answer below is the native kernel's, probed with seccomp(2))
        assert_eq!(check(&[]), Err(CheckError::Length(0)));
        assert_eq!(
            check(&vec![allow; BPF_MAXINSNS + 1]),
            Err(CheckError::Length(BPF_MAXINSNS + 1))
        );
        assert_eq!(check(&vec![allow; BPF_MAXINSNS]), Ok(BPF_MAXINSNS));
        let alu = |op, k| [stmt(BPF_ALU | op | BPF_K, k), allow];
        assert_eq!(
            check(&alu(BPF_DIV, 0)),
            Err(CheckError::DivisionByZero { pc: 0 })
        );
        assert_eq!(
            check(&alu(BPF_MOD, 0)),
            Err(CheckError::DivisionByZero { pc: 0 })
        );
        // Linux's seccomp list leaves the remainder out, K or X.
        assert!(matches!(
            check(&alu(BPF_MOD, 3)),
            Err(CheckError::NotForSeccomp { pc: 0, .. })
        ));
        assert!(matches!(
            check(&[stmt(BPF_ALU | BPF_MOD | BPF_X, 0), allow]),
            Err(CheckError::NotForSeccomp { pc: 0, .. })
        ));
        assert_eq!(
            check(&alu(BPF_LSH, 32)),
            Err(CheckError::BadShift { pc: 0, k: 32 })
        );
        assert_eq!(
            check(&alu(BPF_RSH, 40)),
            Err(CheckError::BadShift { pc: 0, k: 40 })
        );
        assert_eq!(check(&alu(BPF_LSH, 31)), Ok(2));
        // Opcodes with stray bits, or none of classic BPF's.
        for code in [
            BPF_ALU | BPF_NEG | BPF_X,
            BPF_JMP | BPF_JA | BPF_X,
            BPF_RET | BPF_X,
            0xc4, // an eBPF ALU operation (ARSH)
            0x55, // an eBPF jump (JNE)
            0x0106,
            0xffff,
        ] {
            assert_eq!(
                check(&[stmt(code, 0), allow]),
                Err(CheckError::BadOpcode { pc: 0, code }),
                "{code:#x}"
            );
        }
        // Packet loads are classic BPF, not seccomp.
        for code in [
            BPF_LD | BPF_H | BPF_ABS,
            BPF_LD | BPF_B | BPF_ABS,
            BPF_LD | BPF_W | BPF_IND,
            BPF_LD | BPF_B | BPF_IND,
            BPF_LDX | BPF_B | BPF_MSH,
        ] {
            assert_eq!(
                check(&[stmt(code, 0), allow]),
                Err(CheckError::NotForSeccomp { pc: 0, code }),
                "{code:#x}"
            );
        }
        let ld = |k| [stmt(BPF_LD | BPF_W | BPF_ABS, k), allow];
        assert_eq!(check(&ld(60)), Ok(2));
        assert_eq!(check(&ld(64)), Err(CheckError::BadLoad { pc: 0, k: 64 }));
        assert_eq!(check(&ld(6)), Err(CheckError::BadLoad { pc: 0, k: 6 }));
        assert_eq!(
            check(&ld(SKF_AD_OFF)),
            Err(CheckError::BadLoad {
                pc: 0,
                k: SKF_AD_OFF
            })
        );
        // Scratch words: 16 of them, written before they are read.
        assert_eq!(
            check(&[stmt(BPF_ST, 16), allow]),
            Err(CheckError::BadMemoryWord { pc: 0, k: 16 })
        );
        assert_eq!(
            check(&[stmt(BPF_LD | BPF_MEM, 0), allow]),
            Err(CheckError::MemoryUnset { pc: 0, k: 0 })
        );
        assert_eq!(
            check(&[stmt(BPF_STX, 15), stmt(BPF_LDX | BPF_MEM, 15), allow]),
            Ok(3)
        );
        // ... Linux does not reset what is known after a return.
        assert_eq!(
            check(&[stmt(BPF_ST, 1), allow, stmt(BPF_LD | BPF_MEM, 1), allow]),
            Ok(4)
        );
        // Jumps: forward, inside the program.
        assert_eq!(
            check(&[ja(1), allow]),
            Err(CheckError::JumpOutOfRange { pc: 0 })
        );
        assert_eq!(
            check(&[jmp(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0), allow]),
            Err(CheckError::JumpOutOfRange { pc: 0 })
        );
        assert_eq!(
            check(&[jmp(BPF_JMP | BPF_JGT | BPF_X, 0, 0, 1), allow]),
            Err(CheckError::JumpOutOfRange { pc: 0 })
        );
        assert_eq!(
            check(&[jmp(BPF_JMP | BPF_JSET | BPF_K, 0, 1, 0), allow, allow]),
            Ok(3)
        );
        // A return last, K or A.
        assert_eq!(
            check(&[allow, stmt(BPF_LD | BPF_IMM, 0)]),
            Err(CheckError::NoFinalReturn)
        );
        assert_eq!(check(&[allow, ja(0), stmt(RET_A, 0)]), Ok(3));
    }

    #[test]
    fn a_word_read_on_one_path_only_is_refused() {
        // 0: jeq 0 ? 1 : 2    1: st M[3]    2: ld M[3]    3: ret A
        // From 0 to 2 directly, M[3] was never written.
        let prog = [
            jmp(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1),
            stmt(BPF_ST, 3),
            stmt(BPF_LD | BPF_MEM, 3),
            stmt(RET_A, 0),
        ];
        assert_eq!(check(&prog), Err(CheckError::MemoryUnset { pc: 2, k: 3 }));
        // Written before the branch, it is known on both paths.
        let prog = [
            stmt(BPF_ST, 3),
            jmp(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1),
            stmt(BPF_ST, 4),
            stmt(BPF_LD | BPF_MEM, 3),
            stmt(RET_A, 0),
        ];
        assert_eq!(check(&prog), Ok(5));
        // The same through an unconditional jump over the store.
        let prog = [
            ja(1),
            stmt(BPF_ST, 3),
            stmt(BPF_LD | BPF_MEM, 3),
            stmt(RET_A, 0),
        ];
        assert_eq!(check(&prog), Err(CheckError::MemoryUnset { pc: 2, k: 3 }));
    }

    fn eval(prog: &[SockFilter], data: &SeccompData) -> u32 {
        Program::check(prog)
            .unwrap_or_else(|e| panic!("{e}"))
            .run(data)
    }

    /// `A = a; X = x; <insn>; ret A`.
    fn alu(insn: SockFilter, a: u32, x: u32) -> u32 {
        eval(
            &[
                stmt(BPF_LDX | BPF_IMM, x),
                stmt(BPF_LD | BPF_IMM, a),
                insn,
                stmt(RET_A, 0),
            ],
            &call(0),
        )
    }

    #[test]
    fn every_operation_computes_as_classic_bpf() {
        let k = |op| stmt(BPF_ALU | op | BPF_K, 3);
        let x = |op| stmt(BPF_ALU | op | BPF_X, 0);
        assert_eq!(alu(k(BPF_ADD), u32::MAX, 0), 2);
        assert_eq!(alu(x(BPF_ADD), 5, 6), 11);
        assert_eq!(alu(k(BPF_SUB), 1, 0), u32::MAX - 1);
        assert_eq!(alu(x(BPF_SUB), 10, 4), 6);
        assert_eq!(alu(k(BPF_MUL), 0x8000_0001, 0), 0x8000_0003);
        assert_eq!(alu(x(BPF_MUL), 7, 6), 42);
        assert_eq!(alu(k(BPF_DIV), 10, 0), 3);
        assert_eq!(alu(x(BPF_DIV), 0xffff_fffe, 2), 0x7fff_ffff);
        assert_eq!(alu(k(BPF_AND), 0b1110, 0), 0b0010);
        assert_eq!(alu(x(BPF_AND), 0xff00, 0x0ff0), 0x0f00);
        assert_eq!(alu(k(BPF_OR), 0b100, 0), 0b111);
        assert_eq!(alu(x(BPF_OR), 0xf0, 0x0f), 0xff);
        assert_eq!(alu(k(BPF_XOR), 0b101, 0), 0b110);
        assert_eq!(alu(x(BPF_XOR), 0xff, 0x0f), 0xf0);
        assert_eq!(alu(k(BPF_LSH), 1, 0), 8);
        assert_eq!(alu(x(BPF_LSH), 1, 31), 0x8000_0000);
        assert_eq!(alu(k(BPF_RSH), 0x8000_0000, 0), 0x1000_0000);
        assert_eq!(alu(x(BPF_RSH), 0x8000_0000, 31), 1);
        // A shift by X takes its low five bits, as x86 does.
        assert_eq!(alu(x(BPF_LSH), 1, 33), 2);
        assert_eq!(alu(x(BPF_RSH), 4, 34), 1);
        assert_eq!(alu(stmt(BPF_ALU | BPF_NEG, 0), 1, 0), u32::MAX);
        assert_eq!(alu(stmt(BPF_MISC | BPF_TXA, 0), 1, 9), 9);
        assert_eq!(
            eval(
                &[
                    stmt(BPF_LD | BPF_IMM, 4),
                    stmt(BPF_MISC | BPF_TAX, 0),
                    stmt(BPF_LD | BPF_IMM, 0),
                    stmt(BPF_MISC | BPF_TXA, 0),
                    stmt(RET_A, 0)
                ],
                &call(0)
            ),
            4
        );
        // Dividing by an X of zero ends the program with 0 (kill), as the
        // kernel's translation does.
        assert_eq!(alu(x(BPF_DIV), 10, 0), SECCOMP_RET_KILL_THREAD);
        assert_eq!(alu(x(BPF_DIV), 0, 0), 0);
    }

    #[test]
    fn loads_stores_and_lengths() {
        let mut d = call(231);
        d.args[1] = 0x1111_2222_3333_4444;
        d.instruction_pointer = 0x7f00_dead_beef;
        let ld = |k| stmt(BPF_LD | BPF_W | BPF_ABS, k);
        assert_eq!(eval(&[ld(0), stmt(RET_A, 0)], &d), 231);
        assert_eq!(eval(&[ld(4), stmt(RET_A, 0)], &d), AUDIT_ARCH_X86_64);
        assert_eq!(eval(&[ld(8), stmt(RET_A, 0)], &d), 0xdead_beef);
        assert_eq!(eval(&[ld(12), stmt(RET_A, 0)], &d), 0x7f00);
        assert_eq!(eval(&[ld(24), stmt(RET_A, 0)], &d), 0x3333_4444);
        assert_eq!(eval(&[ld(28), stmt(RET_A, 0)], &d), 0x1111_2222);
        assert_eq!(
            eval(&[stmt(BPF_LD | BPF_W | BPF_LEN, 0), stmt(RET_A, 0)], &d),
            64
        );
        assert_eq!(
            eval(
                &[
                    stmt(BPF_LDX | BPF_W | BPF_LEN, 0),
                    stmt(BPF_MISC | BPF_TXA, 0),
                    stmt(RET_A, 0)
                ],
                &d
            ),
            64
        );
        // Through every scratch word and back.
        let mut prog = vec![ld(0)];
        for n in 0..16 {
            prog.push(stmt(BPF_ALU | BPF_ADD | BPF_K, 1));
            prog.push(stmt(BPF_ST, n));
        }
        prog.push(stmt(BPF_LDX | BPF_MEM, 0));
        prog.push(stmt(BPF_LD | BPF_MEM, 15));
        prog.push(stmt(BPF_ALU | BPF_SUB | BPF_X, 0));
        prog.push(stmt(RET_A, 0));
        assert_eq!(eval(&prog, &d), 15);
        assert_eq!(
            eval(
                &[
                    stmt(BPF_LD | BPF_IMM, 5),
                    stmt(BPF_STX, 2),
                    stmt(BPF_LD | BPF_MEM, 2),
                    stmt(RET_A, 0)
                ],
                &d
            ),
            0
        );
    }

    #[test]
    fn jumps_test_unsigned_and_skip_forward() {
        // ret (A cond src) ? 1 : 2, with A = a, X = x
        let jump = |code, k, a, x| {
            eval(
                &[
                    stmt(BPF_LDX | BPF_IMM, x),
                    stmt(BPF_LD | BPF_IMM, a),
                    jmp(code, k, 0, 1),
                    stmt(RET_K, 1),
                    stmt(RET_K, 2),
                ],
                &call(0),
            )
        };
        let (jeq, jgt, jge, jset) = (
            BPF_JMP | BPF_JEQ,
            BPF_JMP | BPF_JGT,
            BPF_JMP | BPF_JGE,
            BPF_JMP | BPF_JSET,
        );
        assert_eq!(jump(jeq | BPF_K, 5, 5, 0), 1);
        assert_eq!(jump(jeq | BPF_K, 5, 6, 0), 2);
        assert_eq!(jump(jeq | BPF_X, 0, 7, 7), 1);
        assert_eq!(jump(jgt | BPF_K, 5, 6, 0), 1);
        assert_eq!(jump(jgt | BPF_K, 5, 5, 0), 2);
        // unsigned: -1 is above everything
        assert_eq!(jump(jgt | BPF_K, 5, u32::MAX, 0), 1);
        assert_eq!(jump(jgt | BPF_X, 0, 3, 4), 2);
        assert_eq!(jump(jge | BPF_K, 5, 5, 0), 1);
        assert_eq!(jump(jge | BPF_X, 0, 4, 5), 2);
        assert_eq!(jump(jset | BPF_K, 0b100, 0b110, 0), 1);
        assert_eq!(jump(jset | BPF_K, 0b001, 0b110, 0), 2);
        assert_eq!(jump(jset | BPF_X, 0, 0b110, 0b010), 1);
        let skip = [ja(2), stmt(RET_K, 1), stmt(RET_K, 2), stmt(RET_K, 3)];
        assert_eq!(eval(&skip, &call(0)), 3);
    }

    /// Any instruction, with fields drawn to hit both valid and invalid
    /// cases often.
    fn any_insn() -> impl proptest::strategy::Strategy<Value = SockFilter> {
        use proptest::prelude::*;
        let code = prop_oneof![
            // the opcodes seccomp loads, and the rest of classic BPF
            proptest::sample::select(vec![
                0x00u16, 0x01, 0x02, 0x03, 0x04, 0x0c, 0x14, 0x1c, 0x24, 0x2c, 0x34, 0x3c, 0x44,
                0x4c, 0x54, 0x5c, 0x64, 0x6c, 0x74, 0x7c, 0x84, 0x94, 0x9c, 0xa4, 0xac, 0x05, 0x15,
                0x1d, 0x25, 0x2d, 0x35, 0x3d, 0x45, 0x4d, 0x06, 0x16, 0x07, 0x87, 0x20, 0x28, 0x30,
                0x40, 0x60, 0x61, 0x80, 0x81, 0xb1,
            ]),
            any::<u16>(),
        ];
        let k = prop_oneof![
            0u32..80,
            any::<u32>(),
            Just(SECCOMP_RET_ALLOW),
            Just(SECCOMP_RET_ERRNO | 1)
        ];
        (code, 0u8..8, 0u8..8, k).prop_map(|(code, jt, jf, k)| SockFilter { code, jt, jf, k })
    }

    fn any_data() -> impl proptest::strategy::Strategy<Value = SeccompData> {
        use proptest::prelude::*;
        (any::<i32>(), any::<u32>(), any::<u64>(), any::<[u64; 6]>()).prop_map(
            |(nr, arch, instruction_pointer, args)| SeccompData {
                nr,
                arch,
                instruction_pointer,
                args,
            },
        )
    }

    /// An instruction seccomp loads, its fields in range, so that most
    /// programs made of them pass the check (jumps and scratch reads may
    /// still fail it).
    fn seccomp_insn() -> impl proptest::strategy::Strategy<Value = SockFilter> {
        use proptest::prelude::*;
        let code = proptest::sample::select(vec![
            0x00u16, 0x01, 0x02, 0x03, 0x04, 0x0c, 0x14, 0x1c, 0x24, 0x2c, 0x34, 0x3c, 0x44, 0x4c,
            0x54, 0x5c, 0x64, 0x6c, 0x74, 0x7c, 0x84, 0xa4, 0xac, 0x05, 0x15, 0x1d, 0x25, 0x2d,
            0x35, 0x3d, 0x45, 0x4d, 0x06, 0x16, 0x07, 0x87, 0x20, 0x60, 0x61, 0x80, 0x81,
        ]);
        (code, 0u8..4, 0u8..4, any::<u32>()).prop_map(|(code, jt, jf, k)| {
            let k = match code {
                0x20 => (k % 16) * 4,
                0x02 | 0x03 | 0x60 | 0x61 => k % 16,
                0x34 | 0x64 | 0x74 => k % 31 + 1,
                0x05 => k % 3,
                _ => k,
            };
            SockFilter { code, jt, jf, k }
        })
    }

    /// Classic BPF run straight from the instructions, as the kernel's
    /// interpreter reads them: the model [`Program::run`] is held to.
    fn reference_run(prog: &[SockFilter], data: &SeccompData) -> u32 {
        let words = data_words(data);
        let (mut a, mut x, mut m) = (0u32, 0u32, [0u32; 16]);
        let mut pc = 0;
        loop {
            let i = prog[pc];
            pc += 1;
            let src = if i.code & BPF_X != 0 { x } else { i.k };
            match i.code & 0x07 {
                BPF_LD => {
                    a = match i.code & 0xe0 {
                        BPF_ABS => words[i.k as usize / 4],
                        BPF_LEN => 64,
                        BPF_MEM => m[i.k as usize],
                        _ => i.k,
                    }
                }
                BPF_LDX => {
                    x = match i.code & 0xe0 {
                        BPF_LEN => 64,
                        BPF_MEM => m[i.k as usize],
                        _ => i.k,
                    }
                }
                BPF_ST => m[i.k as usize] = a,
                BPF_STX => m[i.k as usize] = x,
                BPF_ALU => {
                    a = match i.code & 0xf0 {
                        BPF_ADD => a.wrapping_add(src),
                        BPF_SUB => a.wrapping_sub(src),
                        BPF_MUL => a.wrapping_mul(src),
                        BPF_DIV if src == 0 => return 0,
                        BPF_DIV => a / src,
                        BPF_AND => a & src,
                        BPF_OR => a | src,
                        BPF_XOR => a ^ src,
                        BPF_LSH => a << (src & 31),
                        BPF_RSH => a >> (src & 31),
                        _ => a.wrapping_neg(),
                    }
                }
                BPF_JMP => {
                    let taken = match i.code & 0xf0 {
                        BPF_JA => {
                            pc += i.k as usize;
                            continue;
                        }
                        BPF_JEQ => a == src,
                        BPF_JGT => a > src,
                        BPF_JGE => a >= src,
                        _ => a & src != 0,
                    };
                    pc += usize::from(if taken { i.jt } else { i.jf });
                }
                BPF_RET => return if i.code & BPF_A != 0 { a } else { i.k },
                _ => {
                    if i.code & BPF_TXA != 0 {
                        a = x
                    } else {
                        x = a
                    }
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Programs that load compute what classic BPF computes.
        #[test]
        fn the_interpreter_agrees_with_the_reference(
            mut prog in proptest::collection::vec(seccomp_insn(), 0..30),
            ret_a in proptest::bool::ANY,
            data in any_data(),
        ) {
            prog.push(SockFilter {
                code: if ret_a { RET_A } else { RET_K },
                jt: 0,
                jf: 0,
                k: SECCOMP_RET_ALLOW,
            });
            if let Ok(p) = Program::check(&prog) {
                proptest::prop_assert_eq!(p.run(&data), reference_run(&prog, &data));
            }
        }

        /// No program makes the check or the interpreter panic, and a
        /// program that loads ends in at most `len` steps with a value.
        #[test]
        fn random_programs_never_panic(
            prog in proptest::collection::vec(any_insn(), 0..40),
            data in any_data(),
        ) {
            if let Ok(p) = Program::check(&prog) {
                let _ = p.run(&data);
                proptest::prop_assert_eq!(p.len(), prog.len());
            }
        }

        /// Programs that load are those whose every jump stays inside,
        /// that end in a return and whose loads fit `seccomp_data`.
        #[test]
        fn loaded_programs_keep_the_kernels_rules(
            prog in proptest::collection::vec(any_insn(), 1..40),
        ) {
            if Program::check(&prog).is_ok() {
                let len = prog.len();
                let last = prog[len - 1].code;
                proptest::prop_assert!(last == RET_K || last == RET_A);
                for (pc, i) in prog.iter().enumerate() {
                    if i.code == BPF_JMP | BPF_JA {
                        proptest::prop_assert!(pc + 1 + (i.k as usize) < len);
                    } else if conditional(i.code) {
                        proptest::prop_assert!(pc + 1 + usize::from(i.jt.max(i.jf)) < len);
                    }
                    if i.code == BPF_LD | BPF_W | BPF_ABS {
                        proptest::prop_assert!(i.k < 64 && i.k % 4 == 0);
                    }
                }
            }
        }
    }

    #[test]
    fn a_program_is_its_instructions_bytes() {
        let p = [SockFilter {
            code: 0x15,
            jt: 1,
            jf: 2,
            k: 0xc000_003e,
        }];
        assert_eq!(program_bytes(&p), [0x15, 0, 1, 2, 0x3e, 0, 0, 0xc0]);
    }
}
