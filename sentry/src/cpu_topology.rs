//! The host's CPU topology and caches as /sys shows them
//! (`/sys/devices/system/cpu/cpuN/topology/*`, `cpuN/cache/indexM/*`), read
//! once when the sandbox starts, before the Sentry's seccomp filter goes on
//! (it cannot open host paths by name afterwards), and renumbered for the
//! sandbox's CPUs: its CPU `i` is the `i`-th CPU the Sentry may run on.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

/// The files of `cpuN/topology` a program may read (lscpu, hwloc, the JVM,
/// libraries that size thread pools by cores); those the host has are kept.
const TOPOLOGY_FILES: &[&str] = &[
    "physical_package_id",
    "die_id",
    "cluster_id",
    "core_id",
    "book_id",
    "drawer_id",
    "core_cpus",
    "core_cpus_list",
    "thread_siblings",
    "thread_siblings_list",
    "core_siblings",
    "core_siblings_list",
    "die_cpus",
    "die_cpus_list",
    "cluster_cpus",
    "cluster_cpus_list",
    "package_cpus",
    "package_cpus_list",
];

/// The files of `cpuN/cache/indexM`.
const CACHE_FILES: &[&str] = &[
    "id",
    "level",
    "type",
    "size",
    "coherency_line_size",
    "ways_of_associativity",
    "number_of_sets",
    "physical_line_partition",
    "allocation_policy",
    "write_policy",
    "shared_cpu_map",
    "shared_cpu_list",
];

/// Most cache indices read per CPU (x86 CPUs have four or five).
const MAX_CACHES: usize = 16;
/// Longest host file kept (a CPU list of a very large machine fits).
const MAX_FILE: usize = 4096;

/// One CPU's files: `(name, contents without the newline)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuFiles {
    /// `topology/*`
    pub topology: Vec<(&'static str, String)>,
    /// `cache/indexM/*`, by `M`
    pub caches: Vec<Vec<(&'static str, String)>>,
}

/// The topology of every CPU of the sandbox.
#[derive(Clone, Debug, Default)]
pub struct CpuTopology {
    cpus: Vec<CpuFiles>,
}

impl CpuTopology {
    /// Reads the host's files for the sandbox's `count` CPUs: the first
    /// `count` of those the Sentry may run on. Where the host has no such
    /// files (no /sys), each CPU is a core of its own in one package, as
    /// /proc/cpuinfo says.
    pub fn from_host(count: usize) -> CpuTopology {
        let allowed = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                    .and_then(|l| parse_list(l.trim()))
            })
            .unwrap_or_default();
        let map: Vec<usize> = allowed.into_iter().take(count).collect();
        let root = Path::new("/sys/devices/system/cpu");
        let read = |rel: String| -> Option<String> {
            let text = std::fs::read_to_string(root.join(rel)).ok()?;
            (text.len() <= MAX_FILE).then(|| text.trim_end_matches('\n').to_string())
        };
        if map.len() < count || read(format!("cpu{}/topology/core_id", map[0])).is_none() {
            return CpuTopology::synthetic(count);
        }
        let cpus = map
            .iter()
            .map(|&host| {
                let topology = TOPOLOGY_FILES
                    .iter()
                    .filter_map(|&f| Some((f, read(format!("cpu{host}/topology/{f}"))?)))
                    .collect();
                let caches = (0..MAX_CACHES)
                    .map_while(|m| {
                        let dir = format!("cpu{host}/cache/index{m}");
                        read(format!("{dir}/level"))?;
                        Some(
                            CACHE_FILES
                                .iter()
                                .filter_map(|&f| Some((f, read(format!("{dir}/{f}"))?)))
                                .collect(),
                        )
                    })
                    .collect();
                CpuFiles { topology, caches }
            })
            .collect();
        CpuTopology::renumbered(cpus, &map)
    }

    /// Each CPU a core of its own, one package, no cache files.
    pub fn synthetic(count: usize) -> CpuTopology {
        let all = format_list(&(0..count).collect());
        let all_mask = format_mask(&(0..count).collect(), count);
        let cpus = (0..count)
            .map(|i| {
                let me = i.to_string();
                let me_mask = format_mask(&BTreeSet::from([i]), count);
                let topology = vec![
                    ("physical_package_id", "0".to_string()),
                    ("die_id", "0".to_string()),
                    ("core_id", me.clone()),
                    ("core_cpus", me_mask.clone()),
                    ("core_cpus_list", me.clone()),
                    ("thread_siblings", me_mask),
                    ("thread_siblings_list", me),
                    ("core_siblings", all_mask.clone()),
                    ("core_siblings_list", all.clone()),
                    ("die_cpus", all_mask.clone()),
                    ("die_cpus_list", all.clone()),
                    ("package_cpus", all_mask.clone()),
                    ("package_cpus_list", all.clone()),
                ];
                CpuFiles {
                    topology,
                    caches: Vec::new(),
                }
            })
            .collect();
        CpuTopology { cpus }
    }

    /// The host's files with host CPU numbers turned into the sandbox's
    /// (`map[i]` is the host CPU of the sandbox's CPU `i`). CPUs outside
    /// the sandbox leave the lists; a list or mask that loses none and
    /// needs no renumbering stays exactly as the host wrote it.
    fn renumbered(mut cpus: Vec<CpuFiles>, map: &[usize]) -> CpuTopology {
        let count = map.len();
        let translate = |name: &str, value: &mut String| {
            let is_list = name.ends_with("_list");
            let is_mask = !is_list
                && (name.ends_with("_cpus")
                    || name.ends_with("siblings")
                    || name.ends_with("_map"));
            let host: Option<BTreeSet<usize>> = if is_list {
                parse_list(value)
            } else if is_mask {
                parse_mask(value)
            } else {
                return;
            };
            let Some(host) = host else {
                return;
            };
            let mine: BTreeSet<usize> = map
                .iter()
                .enumerate()
                .filter(|(_, h)| host.contains(h))
                .map(|(i, _)| i)
                .collect();
            let identity = mine.len() == host.len() && mine.iter().all(|&i| map[i] == i);
            if !identity {
                *value = if is_list {
                    format_list(&mine)
                } else {
                    format_mask(&mine, count)
                };
            }
        };
        for cpu in &mut cpus {
            for (name, value) in &mut cpu.topology {
                translate(name, value);
            }
            for cache in &mut cpu.caches {
                for (name, value) in cache {
                    translate(name, value);
                }
            }
        }
        CpuTopology { cpus }
    }

    /// CPU `n`'s files.
    pub fn cpu(&self, n: usize) -> Option<&CpuFiles> {
        self.cpus.get(n)
    }
}

/// Parses a CPU list (`0-3,8,10-11`).
pub fn parse_list(s: &str) -> Option<BTreeSet<usize>> {
    let mut out = BTreeSet::new();
    let s = s.trim();
    if s.is_empty() {
        return Some(out);
    }
    for part in s.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
            None => {
                let v: usize = part.trim().parse().ok()?;
                (v, v)
            }
        };
        // A CPU number beyond any machine's is not a list of ours.
        if a > b || b >= 1 << 16 {
            return None;
        }
        out.extend(a..=b);
    }
    Some(out)
}

/// Parses a CPU mask (`ff,00000003`: 32-bit hex words, most significant
/// first).
pub fn parse_mask(s: &str) -> Option<BTreeSet<usize>> {
    let words: Vec<&str> = s.trim().split(',').collect();
    if words.len() > 1 << 11 {
        return None;
    }
    let mut out = BTreeSet::new();
    for (i, w) in words.iter().rev().enumerate() {
        let v = u32::from_str_radix(w, 16).ok()?;
        out.extend((0..32).filter(|b| v & (1 << b) != 0).map(|b| i * 32 + b));
    }
    Some(out)
}

/// A CPU list as Linux prints one (`%*pbl`): runs of two or more as
/// ranges.
pub fn format_list(cpus: &BTreeSet<usize>) -> String {
    let mut out = String::new();
    let mut it = cpus.iter().copied().peekable();
    while let Some(start) = it.next() {
        let mut end = start;
        while it.peek() == Some(&(end + 1)) {
            end += 1;
            it.next();
        }
        if !out.is_empty() {
            out.push(',');
        }
        if end > start {
            let _ = write!(out, "{start}-{end}");
        } else {
            let _ = write!(out, "{start}");
        }
    }
    out
}

/// A CPU mask of `nbits` CPUs as Linux prints one (`%*pb`): 32-bit words in
/// hex, most significant first, the first only as wide as its bits need.
pub fn format_mask(cpus: &BTreeSet<usize>, nbits: usize) -> String {
    let nbits = nbits.max(1);
    let words = nbits.div_ceil(32);
    let mut out = String::new();
    for w in (0..words).rev() {
        let mut v = 0u32;
        for b in 0..32 {
            if cpus.contains(&(w * 32 + b)) {
                v |= 1 << b;
            }
        }
        if w + 1 == words {
            let width = (nbits - w * 32).min(32).div_ceil(4);
            let _ = write!(out, "{v:0width$x}");
        } else {
            let _ = write!(out, ",{v:08x}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_masks_round_trip() {
        let set: BTreeSet<usize> = [0, 1, 2, 3, 8, 10, 11].into();
        assert_eq!(format_list(&set), "0-3,8,10-11");
        assert_eq!(parse_list("0-3,8,10-11"), Some(set.clone()));
        assert_eq!(format_list(&[0, 1].into()), "0-1");
        assert_eq!(format_mask(&set, 12), "d0f");
        assert_eq!(format_mask(&[0, 33].into(), 40), "02,00000001");
        assert_eq!(parse_mask("02,00000001"), Some([0, 33].into()));
        assert_eq!(parse_mask(&format_mask(&set, 64)), Some(set));
        assert_eq!(parse_list("3-1"), None);
        assert_eq!(parse_list("x"), None);
    }

    #[test]
    fn host_numbers_become_the_sandboxs() {
        // The sandbox runs on host CPUs 2 and 3 of a 4-CPU host whose
        // CPUs 2 and 3 are the two threads of one core.
        let cpu = |core: &str| CpuFiles {
            topology: vec![
                ("core_id", core.to_string()),
                ("thread_siblings_list", "2-3".to_string()),
                ("thread_siblings", "c".to_string()),
                ("core_siblings_list", "0-3".to_string()),
            ],
            caches: vec![vec![
                ("level", "1".to_string()),
                ("shared_cpu_list", "2-3".to_string()),
                ("shared_cpu_map", "c".to_string()),
            ]],
        };
        let t = CpuTopology::renumbered(vec![cpu("1"), cpu("1")], &[2, 3]);
        let c = t.cpu(1).expect("cpu1");
        assert_eq!(
            c.topology,
            vec![
                ("core_id", "1".to_string()),
                ("thread_siblings_list", "0-1".to_string()),
                ("thread_siblings", "3".to_string()),
                ("core_siblings_list", "0-1".to_string()),
            ]
        );
        assert_eq!(c.caches[0][1].1, "0-1");
        assert_eq!(c.caches[0][2].1, "3");
        assert!(t.cpu(2).is_none());
    }

    #[test]
    fn identity_keeps_the_hosts_text() {
        let cpu = CpuFiles {
            topology: vec![("core_siblings", "00000003".to_string())],
            caches: Vec::new(),
        };
        let t = CpuTopology::renumbered(vec![cpu.clone(), cpu.clone()], &[0, 1]);
        assert_eq!(t.cpu(0), Some(&cpu));
    }

    #[test]
    fn synthetic_cores_are_one_package() {
        let t = CpuTopology::synthetic(3);
        let c = t.cpu(2).expect("cpu2");
        let get = |n: &str| {
            c.topology
                .iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("core_id"), Some("2"));
        assert_eq!(get("thread_siblings_list"), Some("2"));
        assert_eq!(get("core_siblings_list"), Some("0-2"));
        assert_eq!(get("core_siblings"), Some("7"));
    }
}
