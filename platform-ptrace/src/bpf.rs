//! The stub's seccomp filter, written as data: a tiny classic-BPF assembler
//! with symbolic jump targets, and the one program the stub installs.
//!
//! The filter is the isolation boundary if tracing ever fails: a system call
//! from anywhere but the trampoline's single `syscall` instruction kills the
//! stub, and from the trampoline only what syscall injection needs passes.

use std::collections::HashMap;

/// One classic BPF instruction (`struct sock_filter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

const _: () = assert!(std::mem::size_of::<SockFilter>() == 8);

// Opcodes (linux/bpf_common.h).
const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD (0) | BPF_W (0) | BPF_ABS (0x20)
const BPF_JEQ_K: u16 = 0x05 | 0x10; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K

/// `SECCOMP_RET_KILL_PROCESS`: the whole stub dies of SIGSYS.
pub const RET_KILL_PROCESS: u32 = 0x8000_0000;
/// `SECCOMP_RET_ALLOW`.
pub const RET_ALLOW: u32 = 0x7fff_0000;
/// `AUDIT_ARCH_X86_64`.
pub const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;

// Offsets in `struct seccomp_data` (linux/seccomp.h).
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const OFF_IP: u32 = 8;
const fn off_arg(i: u32) -> u32 {
    16 + 8 * i
}

/// A jump target: fall through to the next instruction or go to a label.
#[derive(Clone, Copy, Debug)]
pub enum Target {
    /// the next instruction
    Next,
    /// the instruction after [`Op::Label`] with this name
    Label(&'static str),
}

/// Assembler input.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    /// `A = seccomp_data[off]` (32-bit load)
    Load(u32),
    /// `if A == k goto t else goto f`
    JumpEq {
        /// compared value
        k: u32,
        /// if equal
        t: Target,
        /// if not
        f: Target,
    },
    /// return this action
    Ret(u32),
    /// names the position of the next instruction
    Label(&'static str),
}

/// Why a program does not assemble.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum AsmError {
    /// a jump names a label that is not defined
    #[error("undefined label {0}")]
    UndefinedLabel(&'static str),
    /// a label is defined twice
    #[error("duplicate label {0}")]
    DuplicateLabel(&'static str),
    /// classic BPF jumps only forward, by at most 255 instructions
    #[error("jump to {0} is backwards or farther than 255 instructions")]
    JumpOutOfRange(&'static str),
}

/// Assembles `ops` into BPF instructions, resolving labels.
pub fn assemble(ops: &[Op]) -> Result<Vec<SockFilter>, AsmError> {
    let mut labels = HashMap::new();
    let mut pc = 0usize;
    for op in ops {
        match op {
            Op::Label(name) => {
                if labels.insert(*name, pc).is_some() {
                    return Err(AsmError::DuplicateLabel(name));
                }
            }
            _ => pc += 1,
        }
    }
    let resolve = |from: usize, t: Target| -> Result<u8, AsmError> {
        match t {
            Target::Next => Ok(0),
            Target::Label(name) => {
                let to = *labels.get(name).ok_or(AsmError::UndefinedLabel(name))?;
                // Offsets count from the instruction after the jump.
                to.checked_sub(from + 1)
                    .and_then(|d| u8::try_from(d).ok())
                    .ok_or(AsmError::JumpOutOfRange(name))
            }
        }
    };
    let mut out = Vec::with_capacity(pc);
    for op in ops {
        let pc = out.len();
        let insn = match *op {
            Op::Label(_) => continue,
            Op::Load(off) => SockFilter {
                code: BPF_LD_W_ABS,
                jt: 0,
                jf: 0,
                k: off,
            },
            Op::JumpEq { k, t, f } => SockFilter {
                code: BPF_JEQ_K,
                jt: resolve(pc, t)?,
                jf: resolve(pc, f)?,
                k,
            },
            Op::Ret(k) => SockFilter {
                code: BPF_RET_K,
                jt: 0,
                jf: 0,
                k,
            },
        };
        out.push(insn);
    }
    Ok(out)
}

/// `MAP_SHARED | MAP_FIXED`: the only mmap flags injection uses.
pub const INJECTED_MMAP_FLAGS: u32 = (libc::MAP_SHARED | libc::MAP_FIXED) as u32;

/// Where the stub's `syscall` instructions are, as the kernel reports them
/// to seccomp (`instruction_pointer`: the address right after each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StubIps {
    /// the trampoline used for injected memory calls and thread exit
    pub trampoline: u64,
    /// the clone trampoline
    pub clone: u64,
    /// the park loop's `pause`
    pub park: u64,
}

/// The stub's filter; `memfd` is the stub's memory-file descriptor.
///
/// Allowed, each only from its own `syscall` instruction:
/// * trampoline: `mmap` with exactly `MAP_SHARED|MAP_FIXED` on the memory
///   file (so no anonymous memory, no other descriptor — there are none
///   anyway); `munmap`, `mprotect`; `exit` (one thread, never the group);
/// * clone trampoline: `clone` with exactly
///   [`crate::stub::STUB_THREAD_CLONE_FLAGS`] (a plain thread: no new
///   namespaces, no TLS or tid pointers, no exit signal, not traced);
/// * park loop: `pause`.
///
/// Everything else, including x32 numbers and foreign architectures, kills
/// the process. A hostile guest can jump to any of these instructions with
/// registers of its choosing, so what passes here is what it could reach;
/// none of it names a host object other than the memory file.
pub fn stub_filter(ips: &StubIps, memfd: u32) -> Vec<SockFilter> {
    use Op::*;
    use Target::{Label as L, Next};
    let high = (ips.trampoline >> 32) as u32;
    assert!(
        (ips.clone >> 32) as u32 == high && (ips.park >> 32) as u32 == high,
        "stub syscalls must share the upper half of their address"
    );
    let flags = crate::stub::STUB_THREAD_CLONE_FLAGS;
    let ops = [
        Load(OFF_ARCH),
        JumpEq {
            k: AUDIT_ARCH_X86_64,
            t: Next,
            f: L("kill"),
        },
        Load(OFF_IP + 4),
        JumpEq {
            k: high,
            t: Next,
            f: L("kill"),
        },
        Load(OFF_IP),
        JumpEq {
            k: ips.trampoline as u32,
            t: L("trampoline"),
            f: Next,
        },
        JumpEq {
            k: ips.clone as u32,
            t: L("clone"),
            f: Next,
        },
        JumpEq {
            k: ips.park as u32,
            t: L("park"),
            f: L("kill"),
        },
        Label("trampoline"),
        Load(OFF_NR),
        JumpEq {
            k: libc::SYS_munmap as u32,
            t: L("allow"),
            f: Next,
        },
        JumpEq {
            k: libc::SYS_mprotect as u32,
            t: L("allow"),
            f: Next,
        },
        JumpEq {
            k: libc::SYS_exit as u32,
            t: L("allow"),
            f: Next,
        },
        JumpEq {
            k: libc::SYS_mmap as u32,
            t: Next,
            f: L("kill"),
        },
        // mmap(addr, len, prot, flags, fd, off): flags is a full 64-bit
        // argument, fd is truncated to int by the kernel.
        Load(off_arg(3)),
        JumpEq {
            k: INJECTED_MMAP_FLAGS,
            t: Next,
            f: L("kill"),
        },
        Load(off_arg(3) + 4),
        JumpEq {
            k: 0,
            t: Next,
            f: L("kill"),
        },
        Load(off_arg(4)),
        JumpEq {
            k: memfd,
            t: L("allow"),
            f: L("kill"),
        },
        Label("clone"),
        Load(OFF_NR),
        JumpEq {
            k: libc::SYS_clone as u32,
            t: Next,
            f: L("kill"),
        },
        // The kernel reads only the low half of clone's flags; both halves
        // are checked anyway.
        Load(off_arg(0)),
        JumpEq {
            k: flags as u32,
            t: Next,
            f: L("kill"),
        },
        Load(off_arg(0) + 4),
        JumpEq {
            k: (flags >> 32) as u32,
            t: L("allow"),
            f: L("kill"),
        },
        Label("park"),
        Load(OFF_NR),
        JumpEq {
            k: libc::SYS_pause as u32,
            t: L("allow"),
            f: L("kill"),
        },
        Label("kill"),
        Ret(RET_KILL_PROCESS),
        Label("allow"),
        Ret(RET_ALLOW),
    ];
    // The program is fixed; it assembles or this crate is broken (tested).
    assemble(&ops).unwrap_or_else(|e| panic!("stub filter does not assemble: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Minimal interpreter for the opcodes the assembler emits, over a
    /// `struct seccomp_data` image.
    fn run(prog: &[SockFilter], nr: u32, arch: u32, ip: u64, args: [u64; 6]) -> u32 {
        let mut data = Vec::new();
        data.extend_from_slice(&nr.to_le_bytes());
        data.extend_from_slice(&arch.to_le_bytes());
        data.extend_from_slice(&ip.to_le_bytes());
        for a in args {
            data.extend_from_slice(&a.to_le_bytes());
        }
        let mut acc = 0u32;
        let mut pc = 0usize;
        loop {
            let i = prog[pc];
            pc += 1;
            match i.code {
                BPF_LD_W_ABS => {
                    let o = i.k as usize;
                    acc = u32::from_le_bytes(data[o..o + 4].try_into().expect("4 bytes"));
                }
                BPF_JEQ_K => pc += usize::from(if acc == i.k { i.jt } else { i.jf }),
                BPF_RET_K => return i.k,
                c => panic!("unexpected opcode {c:#x}"),
            }
        }
    }

    const IP: u64 = 0x7fff_ffe0_0002;
    const CLONE_IP: u64 = 0x7fff_ffe0_0005;
    const PARK_IP: u64 = 0x7fff_ffe0_0012;
    const IPS: StubIps = StubIps {
        trampoline: IP,
        clone: CLONE_IP,
        park: PARK_IP,
    };
    const X86: u32 = AUDIT_ARCH_X86_64;
    const THREAD: u64 = crate::stub::STUB_THREAD_CLONE_FLAGS;

    fn mmap_args(flags: u64, fd: u64) -> [u64; 6] {
        [0x10000, 0x1000, 3, flags, fd, 0]
    }

    #[test]
    fn trampoline_mm_calls_pass() {
        let p = stub_filter(&IPS, 3);
        let ok = mmap_args(INJECTED_MMAP_FLAGS.into(), 3);
        assert_eq!(run(&p, 9, X86, IP, ok), RET_ALLOW);
        assert_eq!(run(&p, 11, X86, IP, [0; 6]), RET_ALLOW);
        assert_eq!(run(&p, 10, X86, IP, [0; 6]), RET_ALLOW);
    }

    #[test]
    fn calls_outside_the_trampoline_die() {
        let p = stub_filter(&IPS, 3);
        for ip in [IP - 2, IP + 1, IP + 0x1_0000_0000, 0x401000] {
            assert_eq!(run(&p, 11, X86, ip, [0; 6]), RET_KILL_PROCESS, "{ip:#x}");
        }
    }

    #[test]
    fn other_calls_and_arches_die() {
        let p = stub_filter(&IPS, 3);
        for nr in [0, 1, 34, 39, 56, 57, 59, 62, 231, 257, 317, 9 | 0x4000_0000] {
            assert_eq!(run(&p, nr, X86, IP, [0; 6]), RET_KILL_PROCESS, "nr {nr}");
        }
        // i386 (AUDIT_ARCH_I386): number 90 is old_mmap there.
        assert_eq!(run(&p, 11, 0x4000_0003, IP, [0; 6]), RET_KILL_PROCESS);
    }

    #[test]
    fn exit_passes_only_from_the_trampoline() {
        let p = stub_filter(&IPS, 3);
        assert_eq!(run(&p, 60, X86, IP, [0; 6]), RET_ALLOW);
        for ip in [CLONE_IP, PARK_IP, 0x401000] {
            assert_eq!(run(&p, 60, X86, ip, [0; 6]), RET_KILL_PROCESS, "{ip:#x}");
        }
    }

    #[test]
    fn clone_passes_only_as_a_plain_thread_from_its_trampoline() {
        let p = stub_filter(&IPS, 3);
        let args = |flags: u64| [flags, 0, 0, 0, 0, 0];
        assert_eq!(run(&p, 56, X86, CLONE_IP, args(THREAD)), RET_ALLOW);
        // From the ordinary trampoline or the park loop: no.
        assert_eq!(run(&p, 56, X86, IP, args(THREAD)), RET_KILL_PROCESS);
        assert_eq!(run(&p, 56, X86, PARK_IP, args(THREAD)), RET_KILL_PROCESS);
        for extra in [
            libc::CLONE_NEWUSER as u64,
            libc::CLONE_SETTLS as u64,
            libc::CLONE_PTRACE as u64,
            libc::CLONE_CHILD_CLEARTID as u64,
            libc::SIGCHLD as u64,
            1 << 40,
        ] {
            let a = args(THREAD | extra);
            assert_eq!(
                run(&p, 56, X86, CLONE_IP, a),
                RET_KILL_PROCESS,
                "{extra:#x}"
            );
        }
        // A fork (no CLONE_VM etc.) and clone3/fork/vfork numbers die.
        assert_eq!(run(&p, 56, X86, CLONE_IP, args(0)), RET_KILL_PROCESS);
        for nr in [57, 58, 435] {
            assert_eq!(run(&p, nr, X86, CLONE_IP, args(THREAD)), RET_KILL_PROCESS);
        }
        // Anything else from the clone trampoline dies too.
        assert_eq!(run(&p, 11, X86, CLONE_IP, [0; 6]), RET_KILL_PROCESS);
    }

    #[test]
    fn park_allows_only_pause() {
        let p = stub_filter(&IPS, 3);
        assert_eq!(run(&p, 34, X86, PARK_IP, [0; 6]), RET_ALLOW);
        for nr in [9, 10, 11, 56, 60, 231] {
            assert_eq!(run(&p, nr, X86, PARK_IP, [0; 6]), RET_KILL_PROCESS, "{nr}");
        }
    }

    #[test]
    fn mmap_arguments_are_checked() {
        let p = stub_filter(&IPS, 3);
        let anon = u64::from(INJECTED_MMAP_FLAGS) | libc::MAP_ANONYMOUS as u64;
        assert_eq!(run(&p, 9, X86, IP, mmap_args(anon, 3)), RET_KILL_PROCESS);
        let private = (libc::MAP_PRIVATE | libc::MAP_FIXED) as u64;
        assert_eq!(run(&p, 9, X86, IP, mmap_args(private, 3)), RET_KILL_PROCESS);
        let high = u64::from(INJECTED_MMAP_FLAGS) | 1 << 40;
        assert_eq!(run(&p, 9, X86, IP, mmap_args(high, 3)), RET_KILL_PROCESS);
        let flags = u64::from(INJECTED_MMAP_FLAGS);
        assert_eq!(run(&p, 9, X86, IP, mmap_args(flags, 4)), RET_KILL_PROCESS);
    }

    #[test]
    fn assembler_rejects_bad_labels() {
        let undefined = [Op::JumpEq {
            k: 0,
            t: Target::Label("x"),
            f: Target::Next,
        }];
        assert_eq!(assemble(&undefined), Err(AsmError::UndefinedLabel("x")));
        let backwards = [
            Op::Label("top"),
            Op::JumpEq {
                k: 0,
                t: Target::Label("top"),
                f: Target::Next,
            },
        ];
        assert_eq!(assemble(&backwards), Err(AsmError::JumpOutOfRange("top")));
        let dup = [Op::Label("a"), Op::Label("a"), Op::Ret(0)];
        assert_eq!(assemble(&dup), Err(AsmError::DuplicateLabel("a")));
    }

    #[test]
    fn jump_offsets_count_from_the_next_instruction() {
        let p = assemble(&[
            Op::Load(OFF_NR),
            Op::JumpEq {
                k: 1,
                t: Target::Label("b"),
                f: Target::Next,
            },
            Op::Ret(10),
            Op::Label("b"),
            Op::Ret(20),
        ])
        .expect("assembles");
        assert_eq!((p[1].jt, p[1].jf), (1, 0));
        assert_eq!(run(&p, 1, 0, 0, [0; 6]), 20);
        assert_eq!(run(&p, 0, 0, 0, [0; 6]), 10);
    }
}
