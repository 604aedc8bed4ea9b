//! The namespaced sysctls a container may set (OCI `linux.sysctl`) that the
//! Sentry emulates: each value is checked as Linux's handler checks a write
//! to its /proc/sys file, shown in the guest's /proc/sys, and, for the POSIX
//! message queue limits, enforced. Which names a runtime may set at all
//! (runc's namespace rules) is the OCI layer's to decide.

use std::collections::BTreeMap;

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
}

/// Linux's `IPCMNI`: the most System V IPC identifiers of a kind.
const IPCMNI: i64 = 32768;

/// Most a listen backlog may be in the sandbox, whatever `somaxconn` says
/// (Linux's default `somaxconn`): what the netstack and Unix sockets queue
/// is bounded by it.
pub const MAX_SOMAXCONN: i64 = 4096;

/// The sysctls the Sentry emulates, by their dotted names, with what the
/// sandbox does with them. The POSIX message queue limits (`fs.mqueue.*`)
/// are enforced by `mq_open`, `net.core.somaxconn` by `listen`. The System
/// V IPC limits (`kernel.msg*`, `kernel.sem`, `kernel.shm*`) are only
/// shown: the sandbox's shared memory segments, semaphore sets and message
/// queues (`crate::kernel::ipc::shm`, `crate::kernel::ipc::sem`, `crate::kernel::ipc::msg`) keep
/// Linux's default limits whatever these say.
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
        "fs.mqueue.queues_max",
        Kind::Int {
            min: 0,
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
];

/// What the container's sysctls make of the sandbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Values {
    /// the /proc/sys files they set, by path below /proc/sys, with the
    /// newline
    pub files: BTreeMap<String, String>,
    /// the POSIX message queue limits
    pub mqueue: crate::kernel::ipc::mqueue::Limits,
    /// `net.core.somaxconn`: `listen` holds every backlog to it
    pub somaxconn: u32,
}

impl Default for Values {
    fn default() -> Self {
        Values {
            files: BTreeMap::new(),
            mqueue: crate::kernel::ipc::mqueue::Limits::default(),
            somaxconn: MAX_SOMAXCONN as u32,
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
        match name.as_str() {
            "fs.mqueue.msg_max" => mq.msg_max = n,
            "fs.mqueue.msgsize_max" => mq.msgsize_max = n,
            "fs.mqueue.msg_default" => mq.msg_default = n,
            "fs.mqueue.msgsize_default" => mq.msgsize_default = n,
            "fs.mqueue.queues_max" => mq.queues_max = n,
            "net.core.somaxconn" => out.somaxconn = u32::try_from(n).unwrap_or_default(),
            _ => {}
        }
        out.files.insert(name.replace('.', "/"), format!("{v}\n"));
    }
    Ok(out)
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
        assert!(check("net.ipv4.tcp_syncookies", "1").is_err());
        assert!(emulated("fs.mqueue.queues_max") && !emulated("vm.swappiness"));
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
