//! A container's `linux.seccomp` profile as the classic BPF program the
//! Sentry runs before each of the guest's calls: the rules runc hands
//! libseccomp for the host kernel, with the same meaning (names this
//! architecture lacks are skipped; rules whose conditions repeat an
//! argument are each a rule of their own; conditional rules of a call are
//! tried before its unconditional one).

use abi::bpf::{self, Assembler, Label, SockFilter, Target::Next};
use oci_spec::runtime::{LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArg, LinuxSeccompOperator};

/// The first x32 call number (`__X32_SYSCALL_BIT`).
const X32_BIT: u32 = 0x4000_0000;

/// Why a profile does not compile: one line naming the field at fault.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// a seccomp agent (`listenerPath`, or `SCMP_ACT_NOTIFY` as the
    /// default action), which the Sentry has none of to consult
    #[error("SCMP_ACT_NOTIFY (a seccomp agent) is not supported")]
    Agent,
    /// `SCMP_ACT_NOTIFY` as the action at `field`
    #[error("{field}: SCMP_ACT_NOTIFY (a seccomp agent) is not supported")]
    AgentAction {
        /// `defaultAction` or `syscalls[N].action`
        field: String,
    },
    /// a condition on an argument no system call has
    #[error("syscalls[{rule}].args: no argument {index}")]
    NoArgument {
        /// the rule's place in `syscalls`
        rule: usize,
        /// the argument's index (6 or more)
        index: usize,
    },
    /// a program past what classic BPF can hold or jump across
    #[error("{0} (the profile is too large)")]
    TooLarge(#[source] bpf::AsmError),
}

/// One call's rule: its number, the conditions that must all hold, and
/// the action.
struct Rule<'a> {
    nr: u32,
    args: Vec<&'a LinuxSeccompArg>,
    action: u32,
}

/// Compiles `profile`; the error names the field at fault.
pub fn compile(profile: &LinuxSeccomp) -> Result<Vec<SockFilter>, Error> {
    if profile.listener_path().is_some()
        || matches!(profile.default_action(), LinuxSeccompAction::ScmpActNotify)
    {
        return Err(Error::Agent);
    }
    let default =
        action(&profile.default_action(), profile.default_errno_ret()).ok_or_else(|| {
            Error::AgentAction {
                field: "defaultAction".into(),
            }
        })?;
    let mut rules = Vec::new();
    for (i, call) in profile.syscalls().iter().flatten().enumerate() {
        let act = action(&call.action(), call.errno_ret()).ok_or_else(|| Error::AgentAction {
            field: format!("syscalls[{i}].action"),
        })?;
        let args = call.args().as_deref().unwrap_or_default();
        if let Some(a) = args.iter().find(|a| a.index() >= 6) {
            return Err(Error::NoArgument {
                rule: i,
                index: a.index(),
            });
        }
        // As runc: conditions on one argument twice are alternatives.
        let repeats = args
            .iter()
            .enumerate()
            .any(|(j, a)| args[..j].iter().any(|b| b.index() == a.index()));
        let sets: Vec<Vec<&LinuxSeccompArg>> = if repeats {
            args.iter().map(|a| vec![a]).collect()
        } else {
            vec![args.iter().collect()]
        };
        for name in call.names() {
            // (a name of another architecture, or newer than this table)
            let Some(&(nr, _)) = abi::SYSCALLS.iter().find(|(_, n)| n == name) else {
                continue;
            };
            for set in &sets {
                rules.push(Rule {
                    nr: nr as u32,
                    args: set.clone(),
                    action: act,
                });
            }
        }
    }
    // A call's conditional rules first, each in the profile's order; a
    // stable sort keeps that order.
    rules.sort_by_key(|r| r.args.is_empty());
    let mut a = Assembler::new();
    let (arch_ok, native) = (a.label("x86-64"), a.label("native"));
    a.load_arch();
    a.jeq(bpf::AUDIT_ARCH_X86_64, arch_ok, Next);
    a.ret(bpf::SECCOMP_RET_KILL_PROCESS);
    a.bind(arch_ok);
    a.load_nr();
    a.jge(X32_BIT, Next, native);
    a.ret(bpf::SECCOMP_RET_KILL_PROCESS);
    a.bind(native);
    for rule in &rules {
        emit_rule(&mut a, rule);
    }
    a.ret(default);
    a.finish().map_err(Error::TooLarge)
}

/// `SECCOMP_RET_*` of an OCI action; `errno` is its `errnoRet` (EPERM
/// when absent, as the runtime spec says). `None` for `SCMP_ACT_NOTIFY`,
/// which has none: it hands the call to a seccomp agent.
fn action(act: &LinuxSeccompAction, errno: Option<u32>) -> Option<u32> {
    let data = errno.unwrap_or(libc::EPERM as u32) & bpf::SECCOMP_RET_DATA;
    Some(match act {
        LinuxSeccompAction::ScmpActKill | LinuxSeccompAction::ScmpActKillThread => {
            bpf::SECCOMP_RET_KILL_THREAD
        }
        LinuxSeccompAction::ScmpActKillProcess => bpf::SECCOMP_RET_KILL_PROCESS,
        LinuxSeccompAction::ScmpActTrap => bpf::SECCOMP_RET_TRAP,
        LinuxSeccompAction::ScmpActErrno => bpf::SECCOMP_RET_ERRNO | data,
        LinuxSeccompAction::ScmpActTrace => bpf::SECCOMP_RET_TRACE | data,
        LinuxSeccompAction::ScmpActLog => bpf::SECCOMP_RET_LOG,
        LinuxSeccompAction::ScmpActAllow => bpf::SECCOMP_RET_ALLOW,
        LinuxSeccompAction::ScmpActNotify => return None,
    })
}

/// `if nr == rule.nr && every condition holds: return rule.action`. Every
/// jump out of the rule is a long one, so no profile is too far apart.
fn emit_rule(a: &mut Assembler, rule: &Rule<'_>) {
    let (next, check) = (a.label("next rule"), a.label("conditions"));
    a.load_nr();
    a.jeq(rule.nr, check, Next);
    a.ja(next);
    a.bind(check);
    for cond in &rule.args {
        let (pass, fail) = (a.label("pass"), a.label("fail"));
        emit_condition(a, cond, pass, fail);
        a.bind(fail);
        a.ja(next);
        a.bind(pass);
    }
    a.ret(rule.action);
    a.bind(next);
}

/// Jumps to `pass` or `fail` on the 64-bit comparison `cond`, high word
/// first; both labels come right after it, so every jump is short.
fn emit_condition(a: &mut Assembler, cond: &LinuxSeccompArg, pass: Label, fail: Label) {
    let n = cond.index();
    let v = cond.value();
    let (hi, lo) = ((v >> 32) as u32, v as u32);
    // The low word is compared only where the high words are equal.
    let low_check = a.label("low word");
    match cond.op() {
        LinuxSeccompOperator::ScmpCmpMaskedEq => {
            // OCI's `value` is the mask, `valueTwo` the datum.
            let d = cond.value_two().unwrap_or(0);
            a.load_arg_high(n);
            a.and(hi);
            a.jeq((d >> 32) as u32, Next, fail);
            a.load_arg_low(n);
            a.and(lo);
            a.jeq(d as u32, pass, fail);
        }
        LinuxSeccompOperator::ScmpCmpEq | LinuxSeccompOperator::ScmpCmpNe => {
            let (t, f) = if cond.op() == LinuxSeccompOperator::ScmpCmpEq {
                (pass, fail)
            } else {
                (fail, pass)
            };
            a.load_arg_high(n);
            a.jeq(hi, low_check, f);
            a.bind(low_check);
            a.load_arg_low(n);
            a.jeq(lo, t, f);
        }
        // arg > v: a higher high word, or an equal one and a higher low;
        // arg < v is !(arg >= v), arg <= v is !(arg > v).
        op => {
            let (strict, t, f) = match op {
                LinuxSeccompOperator::ScmpCmpGt => (true, pass, fail),
                LinuxSeccompOperator::ScmpCmpGe => (false, pass, fail),
                LinuxSeccompOperator::ScmpCmpLt => (false, fail, pass),
                _ => (true, fail, pass),
            };
            a.load_arg_high(n);
            a.jgt(hi, t, Next);
            a.jeq(hi, low_check, f);
            a.bind(low_check);
            a.load_arg_low(n);
            if strict {
                a.jgt(lo, t, f);
            } else {
                a.jge(lo, t, f);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi::bpf::{SeccompData, AUDIT_ARCH_X86_64};

    fn profile(json: serde_json::Value) -> LinuxSeccomp {
        serde_json::from_value(json).expect("a profile")
    }

    fn run(prog: &[SockFilter], nr: u64, args: [u64; 6]) -> u32 {
        let data = SeccompData {
            nr: nr as i32,
            arch: AUDIT_ARCH_X86_64,
            instruction_pointer: 0,
            args,
        };
        bpf::run(prog, &data).expect("the kernel would load it")
    }

    #[test]
    fn unconditional_rules_and_the_default() {
        let p = compile(&profile(serde_json::json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "syscalls": [
                {"names": ["getpid", "no_such_call"], "action": "SCMP_ACT_ALLOW"},
                {"names": ["getppid"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
                {"names": ["kill"], "action": "SCMP_ACT_KILL_PROCESS"}
            ]
        })))
        .expect("compiles");
        assert_eq!(run(&p, abi::nr::GETPID, [0; 6]), bpf::SECCOMP_RET_ALLOW);
        assert_eq!(
            run(&p, abi::nr::GETPPID, [0; 6]),
            bpf::SECCOMP_RET_ERRNO | 38
        );
        assert_eq!(
            run(&p, abi::nr::KILL, [0; 6]),
            bpf::SECCOMP_RET_KILL_PROCESS
        );
        assert_eq!(run(&p, abi::nr::READ, [0; 6]), bpf::SECCOMP_RET_ERRNO | 1);
        // x32 numbers: the bad-architecture answer, as libseccomp's.
        assert_eq!(
            run(&p, u64::from(X32_BIT) | abi::nr::GETPID, [0; 6]),
            bpf::SECCOMP_RET_KILL_PROCESS
        );
    }

    #[test]
    fn conditions_compare_all_64_bits() {
        let cond = |op: &str, value: u64| {
            compile(&profile(serde_json::json!({
                "defaultAction": "SCMP_ACT_ERRNO",
                "syscalls": [{"names": ["personality"], "action": "SCMP_ACT_ALLOW",
                              "args": [{"index": 1, "value": value, "op": op}]}]
            })))
            .expect("compiles")
        };
        let v = 0x1_0000_0005u64;
        let cases = [
            ("SCMP_CMP_EQ", [false, true, false, false, false]),
            ("SCMP_CMP_NE", [true, false, true, true, true]),
            ("SCMP_CMP_LT", [true, false, false, true, false]),
            ("SCMP_CMP_LE", [true, true, false, true, false]),
            ("SCMP_CMP_GT", [false, false, true, false, true]),
            ("SCMP_CMP_GE", [false, true, true, false, true]),
        ];
        // Below, equal, above by the low word, below by the high word
        // (a larger low word), above by the high word.
        let args = [v - 1, v, v + 1, 5 | 0xffff_0000, (2 << 32) | 1];
        for (op, want) in cases {
            let p = cond(op, v);
            for (arg, want) in args.iter().zip(want) {
                let got = run(&p, abi::nr::PERSONALITY, [0, *arg, 0, 0, 0, 0]);
                assert_eq!(got == bpf::SECCOMP_RET_ALLOW, want, "{op} {arg:#x}");
            }
        }
    }

    #[test]
    fn masked_equality_and_repeated_arguments_are_alternatives() {
        let p = compile(&profile(serde_json::json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [
                {"names": ["clone"], "action": "SCMP_ACT_ERRNO",
                 "args": [{"index": 0, "value": 0x7e02_0000u64, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]},
                {"names": ["socket"], "action": "SCMP_ACT_ERRNO",
                 "args": [{"index": 0, "value": 40, "op": "SCMP_CMP_EQ"},
                          {"index": 0, "value": 16, "op": "SCMP_CMP_EQ"}]},
                {"names": ["clone"], "action": "SCMP_ACT_TRAP"}
            ]
        })))
        .expect("compiles");
        let eperm = bpf::SECCOMP_RET_ERRNO | 1;
        // No namespace flag: the conditional rule; one: the unconditional.
        assert_eq!(run(&p, abi::nr::CLONE, [0x11, 0, 0, 0, 0, 0]), eperm);
        assert_eq!(
            run(&p, abi::nr::CLONE, [0x2000_0000, 0, 0, 0, 0, 0]),
            bpf::SECCOMP_RET_TRAP
        );
        assert_eq!(run(&p, abi::nr::SOCKET, [40, 0, 0, 0, 0, 0]), eperm);
        assert_eq!(run(&p, abi::nr::SOCKET, [16, 0, 0, 0, 0, 0]), eperm);
        assert_eq!(
            run(&p, abi::nr::SOCKET, [2, 0, 0, 0, 0, 0]),
            bpf::SECCOMP_RET_ALLOW
        );
    }

    #[test]
    fn an_agent_is_refused() {
        let e = compile(&profile(serde_json::json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [{"names": ["mount"], "action": "SCMP_ACT_NOTIFY"}]
        })))
        .expect_err("refused")
        .to_string();
        assert!(e.contains("SCMP_ACT_NOTIFY"), "{e}");
    }
}
