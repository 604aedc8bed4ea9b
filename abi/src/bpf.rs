//! Classic BPF as seccomp reads it: the instruction and `struct
//! seccomp_data` as ABI data, the opcodes and return values seccomp
//! programs use, the one assembler every filter of the project is written
//! with, and an interpreter that runs a program in user space so that
//! filters are tested as data, without installing them.

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

// Instruction classes, sizes, modes and operations (linux/bpf_common.h):
// only those seccomp programs here are made of.
/// class: load into the accumulator
pub const BPF_LD: u16 = 0x00;
/// class: arithmetic on the accumulator
pub const BPF_ALU: u16 = 0x04;
/// class: conditional jump
pub const BPF_JMP: u16 = 0x05;
/// class: return
pub const BPF_RET: u16 = 0x06;
/// size: 32-bit word
pub const BPF_W: u16 = 0x00;
/// mode: at a constant offset in the data
pub const BPF_ABS: u16 = 0x20;
/// operation: bitwise and
pub const BPF_AND: u16 = 0x50;
/// jump: equal
pub const BPF_JEQ: u16 = 0x10;
/// jump: unsigned greater or equal
pub const BPF_JGE: u16 = 0x30;
/// source: the constant `k`
pub const BPF_K: u16 = 0x00;
/// The kernel's limit on a program's length (`BPF_MAXINSNS`).
pub const BPF_MAXINSNS: usize = 4096;

// Return values (linux/seccomp.h). The kernel takes the most restrictive
// one over all the filters stacked on a thread.
/// kill the whole process with `SIGSYS`
pub const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
/// do not make the call; deliver `SIGSYS` to the thread
pub const SECCOMP_RET_TRAP: u32 = 0x0003_0000;
/// do not make the call; fail it with the errno in the low 16 bits
pub const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
/// make the call and log it
pub const SECCOMP_RET_LOG: u32 = 0x7ffc_0000;
/// make the call
pub const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
/// the bits of a return value that carry its data (the errno)
pub const SECCOMP_RET_DATA: u32 = 0x0000_ffff;

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
            let off = to
                .checked_sub(f.at + 1)
                .and_then(|d| u8::try_from(d).ok())
                .ok_or(AsmError::JumpOutOfRange(f.label.name))?;
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
/// value; `None` for a program the kernel would refuse to load (an opcode
/// outside those [`Assembler`] emits, a load outside `seccomp_data` or not
/// word-aligned, a jump or a fall past the end).
pub fn run(prog: &[SockFilter], data: &SeccompData) -> Option<u32> {
    let bytes = data.as_bytes();
    let mut a = 0u32;
    let mut pc = 0usize;
    loop {
        let i = prog.get(pc)?;
        pc += 1;
        let jump = |taken: bool| usize::from(if taken { i.jt } else { i.jf });
        match i.code {
            c if c == BPF_LD | BPF_W | BPF_ABS => {
                let o = i.k as usize;
                if !o.is_multiple_of(4) {
                    return None;
                }
                a = u32::from_ne_bytes(bytes.get(o..o + 4)?.try_into().ok()?);
            }
            c if c == BPF_ALU | BPF_AND | BPF_K => a &= i.k,
            c if c == BPF_JMP | BPF_JEQ | BPF_K => pc += jump(a == i.k),
            c if c == BPF_JMP | BPF_JGE | BPF_K => pc += jump(a >= i.k),
            c if c == BPF_RET | BPF_K => return Some(i.k),
            _ => return None,
        }
    }
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
        let ja = SockFilter {
            code: 0x05,
            jt: 0,
            jf: 0,
            k: 0,
        };
        assert_eq!(run(&[ja, ret], &call(0)), None);
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
