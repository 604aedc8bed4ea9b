//! The namespaced sysctls a container may set (OCI `linux.sysctl`) that the
//! Sentry emulates: each value is checked as Linux's handler checks a write
//! to its /proc/sys file, shown in the guest's /proc/sys, and, for the POSIX
//! message queue limits, enforced. Which names a runtime may set at all
//! (runc's namespace rules) is the OCI layer's to decide.

use std::collections::BTreeMap;

use crate::sync::Locked;
use abi::Errno;

/// How the Sentry honours a sysctl.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// one integer in `min..=max`
    Int { min: i64, max: i64 },
    /// one unsigned long (`proc_doulongvec_minmax` without bounds)
    Ulong,
    /// `kernel.sem`: SEMMSL, SEMMNS, SEMOPM and SEMMNI, each a
    /// non-negative int, SEMMNI at most `IPCMNI`
    Sem,
    /// `net.ipv4.ip_local_port_range`: two ports, the first no higher
    PortRange,
}

/// Linux's `IPCMNI`: the most System V IPC identifiers of a kind.
const IPCMNI: i64 = crate::kernel::ipc::IPCMNI as i64;

/// Most a listen backlog may be in the sandbox, whatever `somaxconn` says
/// (Linux's default `somaxconn`): what the netstack and Unix sockets queue
/// is bounded by it.
pub const MAX_SOMAXCONN: i64 = 4096;

/// The sysctls the Sentry emulates, by their dotted names, with what the
/// sandbox does with them. The POSIX message queue limits (`fs.mqueue.*`)
/// are enforced by `mq_open`, the System V ones (`kernel.msg*`,
/// `kernel.sem`, `kernel.shm*` but `shm_rmid_forced`, which is only shown)
/// by `crate::kernel::ipc`, `net.core.somaxconn` by `listen`. The IPC
/// ones are the IPC namespace's, so the sandbox's root may also write
/// them ([`WRITABLE`]).
const SYSCTLS: &[(&str, Kind)] = &[
    (
        "fs.mqueue.msg_max",
        Kind::Int {
            min: 1,
            max: crate::kernel::ipc::mqueue::HARD_MSGMAX,
        },
    ),
    (
        "fs.mqueue.msgsize_max",
        Kind::Int {
            min: 128,
            max: crate::kernel::ipc::mqueue::HARD_MSGSIZEMAX,
        },
    ),
    (
        "fs.mqueue.msg_default",
        Kind::Int {
            min: 1,
            max: crate::kernel::ipc::mqueue::HARD_MSGMAX,
        },
    ),
    (
        "fs.mqueue.msgsize_default",
        Kind::Int {
            min: 128,
            max: crate::kernel::ipc::mqueue::HARD_MSGSIZEMAX,
        },
    ),
    (
        // (`proc_dointvec`: any int, a negative one leaving no room)
        "fs.mqueue.queues_max",
        Kind::Int {
            min: i32::MIN as i64,
            max: i32::MAX as i64,
        },
    ),
    (
        "kernel.msgmax",
        Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
    ),
    (
        "kernel.msgmnb",
        Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
    ),
    (
        "kernel.msgmni",
        Kind::Int {
            min: 0,
            max: IPCMNI,
        },
    ),
    ("kernel.sem", Kind::Sem),
    ("kernel.shmall", Kind::Ulong),
    ("kernel.shmmax", Kind::Ulong),
    (
        "kernel.shmmni",
        Kind::Int {
            min: 0,
            max: IPCMNI,
        },
    ),
    ("kernel.shm_rmid_forced", Kind::Int { min: 0, max: 1 }),
    (
        "net.core.somaxconn",
        Kind::Int {
            min: 0,
            max: MAX_SOMAXCONN,
        },
    ),
    ("net.ipv4.ip_local_port_range", Kind::PortRange),
    ("net.ipv4.tcp_keepalive_intvl", KEEPALIVE_SECONDS),
    (
        "net.ipv4.tcp_keepalive_probes",
        Kind::Int { min: 0, max: 255 },
    ),
    ("net.ipv4.tcp_keepalive_time", KEEPALIVE_SECONDS),
];

/// `tcp_keepalive_time` and `_intvl`: seconds, as `proc_dointvec_jiffies`
/// takes them up to `INT_MAX / HZ` (with `HZ` 1000, the largest there is);
/// a negative time, which Linux stores, is refused.
const KEEPALIVE_SECONDS: Kind = Kind::Int {
    min: 0,
    max: i32::MAX as i64 / 1000,
};

/// What the container's sysctls make of the sandbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Values {
    /// the /proc/sys files they set, by path below /proc/sys, with the
    /// newline
    pub files: BTreeMap<String, String>,
    /// the POSIX message queue limits
    pub mqueue: crate::kernel::ipc::mqueue::Limits,
    /// the System V IPC limits
    pub sysv: crate::kernel::ipc::SysvLimits,
    /// `net.core.somaxconn`: `listen` holds every backlog to it
    pub somaxconn: u32,
    /// `net.ipv4.ip_local_port_range`, when set
    pub port_range: Option<(u16, u16)>,
    /// `net.ipv4.tcp_keepalive_*`: new TCP sockets' keepalive options
    pub keepalive: netstack::KeepaliveDefaults,
}

impl Default for Values {
    fn default() -> Self {
        Values {
            files: BTreeMap::new(),
            mqueue: crate::kernel::ipc::mqueue::Limits::default(),
            sysv: crate::kernel::ipc::SysvLimits::default(),
            somaxconn: MAX_SOMAXCONN as u32,
            port_range: None,
            keepalive: netstack::KeepaliveDefaults::default(),
        }
    }
}

/// Whether the Sentry emulates sysctl `name` (dotted, as OCI names it).
pub fn emulated(name: &str) -> bool {
    SYSCTLS.iter().any(|(n, _)| *n == name)
}

/// The names the Sentry emulates, for messages.
pub fn names() -> impl Iterator<Item = &'static str> {
    SYSCTLS.iter().map(|(n, _)| *n)
}

/// Checks `value` for sysctl `name` as Linux's handler would take a write
/// of it, and returns it as /proc/sys then shows it (without the newline).
/// `Err` says why, in words for a person.
pub fn check(name: &str, value: &str) -> Result<String, String> {
    let Some((_, kind)) = SYSCTLS.iter().find(|(n, _)| *n == name) else {
        return Err("not emulated by the Sentry".into());
    };
    let words: Vec<&str> = value.split_whitespace().collect();
    match *kind {
        Kind::Int { min, max } => match words[..] {
            [w] => match w.parse::<i64>() {
                Ok(n) if (min..=max).contains(&n) => Ok(n.to_string()),
                _ => Err(format!("\"{value}\" is not an integer from {min} to {max}")),
            },
            _ => Err(format!("\"{value}\" is not one integer")),
        },
        Kind::Ulong => match words[..] {
            [w] => w
                .parse::<u64>()
                .map(|n| n.to_string())
                .map_err(|_| format!("\"{value}\" is not an unsigned integer")),
            _ => Err(format!("\"{value}\" is not one unsigned integer")),
        },
        Kind::Sem => {
            let n: Vec<i64> = words
                .iter()
                .filter_map(|w| w.parse::<i64>().ok())
                .filter(|n| (0..=i64::from(i32::MAX)).contains(n))
                .collect();
            if n.len() != 4 || words.len() != 4 || n[3] > IPCMNI {
                return Err(format!(
                    "\"{value}\" is not four integers SEMMSL SEMMNS SEMOPM SEMMNI \
                     (SEMMNI at most {IPCMNI})"
                ));
            }
            Ok(format!("{}\t{}\t{}\t{}", n[0], n[1], n[2], n[3]))
        }
        Kind::PortRange => match words[..] {
            [a, b] => match (a.parse::<u16>(), b.parse::<u16>()) {
                (Ok(lo), Ok(hi)) if lo >= 1 && lo <= hi => Ok(format!("{lo}\t{hi}")),
                _ => Err(format!(
                    "\"{value}\" is not two ports from 1 to 65535, the first no higher"
                )),
            },
            _ => Err(format!("\"{value}\" is not two ports")),
        },
    }
}

/// Checks the sysctls a container sets and returns what they make of the
/// sandbox. A later setting of one name wins. `Err` names the first one
/// that cannot be applied.
pub fn plan(sysctls: &[(String, String)]) -> Result<Values, String> {
    let mut out = Values::default();
    for (name, value) in sysctls {
        let v = check(name, value).map_err(|why| format!("sysctl {name}: {why}"))?;
        // (`check` bounded the integers to an int)
        let n: i64 = v.parse().unwrap_or_default();
        let mq = &mut out.mqueue;
        let sysv = &mut out.sysv;
        // (`check` bounded the integers to an int, `shm*` to a u64)
        let int = n as i32;
        match name.as_str() {
            "kernel.shmmax" => sysv.shmmax = v.parse().unwrap_or_default(),
            "kernel.shmall" => sysv.shmall = v.parse().unwrap_or_default(),
            "kernel.shmmni" => sysv.shmmni = int,
            "kernel.msgmax" => sysv.msgmax = int,
            "kernel.msgmnb" => sysv.msgmnb = int,
            "kernel.msgmni" => sysv.msgmni = int,
            "kernel.sem" => {
                for (to, w) in sysv.sem.iter_mut().zip(v.split('\t')) {
                    *to = w.parse().unwrap_or_default();
                }
            }
            "fs.mqueue.msg_max" => mq.msg_max = n,
            "fs.mqueue.msgsize_max" => mq.msgsize_max = n,
            "fs.mqueue.msg_default" => mq.msg_default = n,
            "fs.mqueue.msgsize_default" => mq.msgsize_default = n,
            "fs.mqueue.queues_max" => mq.queues_max = n,
            "net.core.somaxconn" => out.somaxconn = u32::try_from(n).unwrap_or_default(),
            "net.ipv4.ip_local_port_range" => {
                let mut p = v.split('\t').map(|w| w.parse::<u16>().unwrap_or(1));
                out.port_range = p.next().zip(p.next());
            }
            k if k.starts_with("net.ipv4.tcp_keepalive_") => {
                set_keepalive(&mut out.keepalive, &k["net.ipv4.tcp_keepalive_".len()..], n);
            }
            _ => {}
        }
        out.files.insert(name.replace('.', "/"), format!("{v}\n"));
    }
    Ok(out)
}

/// The /proc/sys files (paths below /proc/sys) a guest may write, and who:
/// the IPC namespace's limits are owned by the namespace's root (mode 0644
/// for uid 0, 0444 for everyone else: ipc/ipc_sysctl.c's permissions,
/// mq_sysctl.c's likewise); `ns_last_pid` is 0666, its handler asking for
/// `CAP_SYS_ADMIN` or `CAP_CHECKPOINT_RESTORE` in the PID namespace.
pub const WRITABLE: &[&str] = &[
    "fs/mqueue/msg_default",
    "fs/mqueue/msg_max",
    "fs/mqueue/msgsize_default",
    "fs/mqueue/msgsize_max",
    "fs/mqueue/queues_max",
    "kernel/msgmax",
    "kernel/msgmnb",
    "kernel/msgmni",
    "kernel/ns_last_pid",
    "kernel/sem",
    "kernel/shmall",
    "kernel/shmmax",
    "kernel/shmmni",
    "net/ipv4/ip_local_port_range",
    "net/ipv4/tcp_keepalive_intvl",
    "net/ipv4/tcp_keepalive_probes",
    "net/ipv4/tcp_keepalive_time",
];

/// Linux's `pid_max` as /proc/sys/kernel/pid_max shows it: the most
/// `ns_last_pid` may be set to.
pub const PID_MAX: i64 = 4_194_304;

/// The path of `path` in [`WRITABLE`], for a writable /proc/sys file.
pub fn writable(path: &str) -> Option<&'static str> {
    WRITABLE.iter().copied().find(|w| *w == path)
}

/// Whether a caller with effective uid `euid` may open writable file
/// `path` for writing: root of the namespace only, but for `ns_last_pid`,
/// whose write asks for a capability instead.
pub fn may_open_for_write(path: &str, euid: u32) -> bool {
    path == "kernel/ns_last_pid" || euid == 0
}

/// What writable file `path` shows now, with the newline: ints and longs
/// as `proc_dointvec` prints them (tab-separated).
pub fn show(kernel: &crate::kernel::Kernel, path: &str) -> Option<String> {
    let sysv = kernel.sysv_limits();
    let mq = kernel.mqueue.limits();
    let text = match path {
        "kernel/shmmax" => sysv.shmmax.to_string(),
        "kernel/shmall" => sysv.shmall.to_string(),
        "kernel/shmmni" => sysv.shmmni.to_string(),
        "kernel/msgmax" => sysv.msgmax.to_string(),
        "kernel/msgmnb" => sysv.msgmnb.to_string(),
        "kernel/msgmni" => sysv.msgmni.to_string(),
        "kernel/sem" => {
            let [a, b, c, d] = sysv.sem;
            format!("{a}\t{b}\t{c}\t{d}")
        }
        "fs/mqueue/msg_max" => mq.msg_max.to_string(),
        "fs/mqueue/msgsize_max" => mq.msgsize_max.to_string(),
        "fs/mqueue/msg_default" => mq.msg_default.to_string(),
        "fs/mqueue/msgsize_default" => mq.msgsize_default.to_string(),
        "fs/mqueue/queues_max" => mq.queues_max.to_string(),
        "kernel/ns_last_pid" => kernel.procs().next.to_string(),
        "net/ipv4/ip_local_port_range" => {
            let (lo, hi) = kernel.net.local_port_range();
            format!("{lo}\t{hi}")
        }
        "net/ipv4/tcp_keepalive_time" => kernel.net.keepalive_defaults().time.as_secs().to_string(),
        "net/ipv4/tcp_keepalive_intvl" => {
            kernel.net.keepalive_defaults().intvl.as_secs().to_string()
        }
        "net/ipv4/tcp_keepalive_probes" => kernel.net.keepalive_defaults().probes.to_string(),
        _ => return None,
    };
    Some(text + "\n")
}

/// A write of `data` (of `len` bytes in all) at file position `pos` to
/// writable file `path`, as its Linux handler takes it: the bytes used,
/// `EINVAL` for what the handler refuses (values before the refused one
/// are kept, as Linux stores each in turn), `ERANGE` for a SEMMNI out of
/// range (which alone goes back), `EPERM` for `ns_last_pid` without
/// `privileged` (`CAP_SYS_ADMIN` or `CAP_CHECKPOINT_RESTORE`). A write
/// past position 0 is taken whole and does nothing
/// (`kernel.sysctl_writes_strict`'s default).
pub fn write(
    kernel: &crate::kernel::Kernel,
    path: &str,
    data: &[u8],
    len: usize,
    pos: u64,
    privileged: bool,
) -> Result<usize, Errno> {
    if path == "kernel/ns_last_pid" && !privileged {
        return Err(Errno::EPERM);
    }
    if pos != 0 {
        return Ok(len);
    }
    if data.is_empty() {
        return Ok(0);
    }
    let dotted = path.replace('/', ".");
    let kind = match path {
        "kernel/ns_last_pid" => Kind::Int {
            min: 0,
            max: PID_MAX,
        },
        _ => SYSCTLS
            .iter()
            .find(|(n, _)| *n == dotted)
            .map(|(_, k)| *k)
            .ok_or(Errno::EACCES)?,
    };
    let most = match kind {
        Kind::Sem => 4,
        Kind::PortRange => 2,
        _ => 1,
    };
    let (numbers, used, malformed) = parse_write(data, most);
    let failed = malformed.map_or(Ok(()), Err);
    if numbers.is_empty() {
        return Err(malformed.unwrap_or(Errno::EINVAL));
    }
    // `proc_dointvec`'s conversion: an int, `-` allowed.
    let int = |(neg, v): (bool, u64)| -> Result<i64, Errno> {
        let v = i64::try_from(v).map_err(|_| Errno::EINVAL)?;
        let v = if neg { -v } else { v };
        if (i64::from(i32::MIN)..=i64::from(i32::MAX)).contains(&v) {
            Ok(v)
        } else {
            Err(Errno::EINVAL)
        }
    };
    match kind {
        Kind::Int { min, max } => {
            let v = int(numbers[0])?;
            if !(min..=max).contains(&v) {
                return Err(Errno::EINVAL);
            }
            set_int(kernel, path, v);
            failed?;
        }
        Kind::Ulong => {
            let (neg, v) = numbers[0];
            if neg {
                return Err(Errno::EINVAL);
            }
            let mut l = kernel.sysv_limits.locked();
            if path == "kernel/shmmax" {
                l.shmmax = v;
            } else {
                l.shmall = v;
            }
            failed?;
        }
        Kind::Sem => {
            // As many of SEMMSL, SEMMNS, SEMOPM and SEMMNI as are given;
            // SEMMNI at most IPCMNI (sem_check_semmni()).
            // proc_ipc_sem_dointvec(): SEMMNI goes back when the write
            // fails, the others stay as far as they were written.
            let mut l = kernel.sysv_limits.locked();
            let semmni = l.sem[3];
            let mut result = failed;
            for (to, &n) in l.sem.iter_mut().zip(&numbers) {
                match int(n) {
                    Ok(v) => *to = v as i32,
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            if result.is_ok() && !(0..=IPCMNI).contains(&i64::from(l.sem[3])) {
                result = Err(Errno::ERANGE);
            }
            if result.is_err() {
                l.sem[3] = semmni;
            }
            result?;
        }
        Kind::PortRange => {
            // ipv4_local_port_range(): the ports not given stay, the pair
            // must hold together, and no port below
            // ip_unprivileged_port_start (1024 here) is ephemeral.
            let (mut lo, mut hi) = kernel.net.local_port_range();
            for (i, &(neg, v)) in numbers.iter().enumerate() {
                let port = u16::try_from(v).ok().filter(|_| !neg);
                let port = port.ok_or(Errno::EINVAL)?;
                if i == 0 {
                    lo = port;
                } else {
                    hi = port;
                }
            }
            if lo < 1024 {
                return Err(Errno::EINVAL);
            }
            kernel.net.set_local_port_range(lo, hi)?;
            failed?;
        }
    }
    Ok(used)
}

/// Sets `tcp_keepalive_NAME` (`time`, `intvl` or `probes`, checked) of
/// `k` to `v`.
fn set_keepalive(k: &mut netstack::KeepaliveDefaults, name: &str, v: i64) {
    let secs = std::time::Duration::from_secs(v.unsigned_abs());
    match name {
        "time" => k.time = secs,
        "intvl" => k.intvl = secs,
        _ => k.probes = u8::try_from(v).unwrap_or(u8::MAX),
    }
}

/// Sets int sysctl `path` (checked) to `v`.
fn set_int(kernel: &crate::kernel::Kernel, path: &str, v: i64) {
    let int = v as i32;
    if let Some(name) = path.strip_prefix("net/ipv4/tcp_keepalive_") {
        let mut k = kernel.net.keepalive_defaults();
        set_keepalive(&mut k, name, v);
        kernel.net.set_keepalive_defaults(k);
        return;
    }
    if let Some(name) = path.strip_prefix("fs/mqueue/") {
        let mut mq = kernel.mqueue.limits();
        match name {
            "msg_max" => mq.msg_max = v,
            "msgsize_max" => mq.msgsize_max = v,
            "msg_default" => mq.msg_default = v,
            "msgsize_default" => mq.msgsize_default = v,
            _ => mq.queues_max = v,
        }
        kernel.mqueue.set_limits(mq);
        return;
    }
    if path == "kernel/ns_last_pid" {
        // The next process or thread gets the first free PID above it.
        kernel.procs().next = int;
        return;
    }
    let mut l = kernel.sysv_limits.locked();
    match path {
        "kernel/shmmni" => l.shmmni = int,
        "kernel/msgmax" => l.msgmax = int,
        "kernel/msgmnb" => l.msgmnb = int,
        _ => l.msgmni = int,
    }
}

/// The numbers of a write as Linux's `__do_proc_dointvec()` reads them:
/// blanks, then up to `most` numbers, each an optional `-` and digits in
/// C's notation (`0x` hex, a leading `0` octal) of at most 21 characters,
/// ended by a space, tab or newline or the end of the write, with blanks
/// between; then blanks. Returns the numbers (sign, magnitude) before the
/// first malformed one, the bytes used, and `EINVAL` if there was a
/// malformed one.
fn parse_write(data: &[u8], most: usize) -> (Vec<(bool, u64)>, usize, Option<Errno>) {
    let blanks = |from: usize| {
        data[from..]
            .iter()
            .take_while(|c| c.is_ascii_whitespace() || **c == 0x0b)
            .count()
    };
    let mut out = Vec::new();
    let mut at = 0;
    while at < data.len() && out.len() < most {
        at += blanks(at);
        if at == data.len() {
            break;
        }
        let Some((n, len)) = parse_number(&data[at..]) else {
            return (out, at, Some(Errno::EINVAL));
        };
        out.push(n);
        at += len;
    }
    (out, at + blanks(at), None)
}

/// One number at the start of `text` (see [`parse_write`]) and its
/// length.
fn parse_number(text: &[u8]) -> Option<((bool, u64), usize)> {
    // proc_get_long() copies at most TMPBUFLEN - 1 = 21 bytes.
    let tmp = &text[..text.len().min(21)];
    let neg = tmp.first() == Some(&b'-') && text.len() > 1;
    let mut at = usize::from(neg);
    if !tmp.get(at).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    let hex = tmp[at] == b'0'
        && matches!(tmp.get(at + 1), Some(b'x' | b'X'))
        && tmp.get(at + 2).is_some_and(u8::is_ascii_hexdigit);
    let radix = if hex {
        at += 2;
        16
    } else if tmp[at] == b'0' {
        8
    } else {
        10
    };
    let mut v: u64 = 0;
    while let Some(d) = tmp.get(at).and_then(|&c| (c as char).to_digit(radix)) {
        v = v.checked_mul(u64::from(radix))?.checked_add(u64::from(d))?;
        at += 1;
    }
    if at == 21 || (at < text.len() && !matches!(text[at], b' ' | b'\t' | b'\n')) {
        return None;
    }
    Some(((neg, v), at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_as_linux_takes_a_write() {
        assert_eq!(
            check("kernel.shmmax", " 68719476736\n"),
            Ok("68719476736".into())
        );
        assert_eq!(check("fs.mqueue.msg_max", "100"), Ok("100".into()));
        assert!(check("fs.mqueue.msg_max", "0").is_err());
        assert!(check("fs.mqueue.msg_max", "65537").is_err());
        assert!(check("fs.mqueue.msgsize_max", "127").is_err());
        assert!(check("kernel.shm_rmid_forced", "2").is_err());
        assert!(check("kernel.shmall", "-1").is_err());
        assert!(check("kernel.msgmni", "1 2").is_err());
        assert_eq!(
            check("kernel.sem", "250 32000 100 128"),
            Ok("250\t32000\t100\t128".into())
        );
        assert!(check("kernel.sem", "250 32000 100").is_err());
        assert!(check("kernel.sem", "250 32000 100 40000").is_err());
        assert_eq!(check("net.core.somaxconn", "128"), Ok("128".into()));
        assert!(check("net.core.somaxconn", "4097").is_err());
        let range = "net.ipv4.ip_local_port_range";
        assert_eq!(check(range, "40000  40010"), Ok("40000\t40010".into()));
        assert_eq!(check(range, "7 7"), Ok("7\t7".into()));
        for bad in ["40010 40000", "0 10", "1 65536", "40000", "-1 5"] {
            assert!(check(range, bad).is_err(), "{bad}");
        }
        assert!(check("net.ipv4.tcp_syncookies", "1").is_err());
        assert!(emulated("fs.mqueue.queues_max") && !emulated("vm.swappiness"));
    }

    #[test]
    fn writes_are_parsed_as_proc_dointvec_reads_them() {
        assert_eq!(parse_write(b"42\n", 1), (vec![(false, 42)], 3, None));
        assert_eq!(parse_write(b"  -7", 1), (vec![(true, 7)], 4, None));
        assert_eq!(
            parse_write(b"0x10 010", 4),
            (vec![(false, 16), (false, 8)], 8, None)
        );
        assert_eq!(
            parse_write(b"1\t2 3\n", 4),
            (vec![(false, 1), (false, 2), (false, 3)], 6, None)
        );
        // one number for an int file: the rest is left
        assert_eq!(parse_write(b"5 6", 1), (vec![(false, 5)], 2, None));
        assert_eq!(
            parse_write(b"5 x", 4),
            (vec![(false, 5)], 2, Some(Errno::EINVAL))
        );
        for bad in [&b"x"[..], b"12x", b"-", b"08", b"99999999999999999999999"] {
            assert_eq!(parse_write(bad, 1).2, Some(Errno::EINVAL), "{bad:?}");
        }
        for none in [&b""[..], b" \n"] {
            assert_eq!(parse_write(none, 1), (vec![], none.len(), None));
        }
        assert!(writable("kernel/shmmni").is_some() && writable("kernel/version").is_none());
        assert!(may_open_for_write("kernel/ns_last_pid", 1000));
        assert!(
            !may_open_for_write("kernel/shmmax", 1000) && may_open_for_write("kernel/shmmax", 0)
        );
    }

    #[test]
    fn plan_gives_the_files_and_the_queue_limits() {
        let v = plan(&[
            ("fs.mqueue.msg_max".into(), "20".into()),
            ("fs.mqueue.queues_max".into(), "1".into()),
            ("fs.mqueue.queues_max".into(), "2".into()),
            ("kernel.shmmni".into(), "100".into()),
            ("net.core.somaxconn".into(), "16".into()),
        ])
        .expect("plan");
        assert_eq!(v.files["fs/mqueue/msg_max"], "20\n");
        assert_eq!(v.files["fs/mqueue/queues_max"], "2\n");
        assert_eq!(v.files["kernel/shmmni"], "100\n");
        assert_eq!(v.files["net/core/somaxconn"], "16\n");
        let mq = v.mqueue;
        assert_eq!((mq.msg_max, mq.queues_max, mq.msgsize_max), (20, 2, 8192));
        assert_eq!(v.somaxconn, 16);
        assert_eq!(plan(&[]).expect("none").somaxconn, 4096);
        let e = plan(&[("kernel.shmmni".into(), "x".into())]).expect_err("refused");
        assert!(e.starts_with("sysctl kernel.shmmni: "), "{e}");
    }
}
