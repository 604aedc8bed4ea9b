//! The host's CPU topology and caches as /sys shows them
//! (`/sys/devices/system/cpu/cpuN/topology/*`, `cpuN/cache/indexM/*`), read
//! once when the sandbox starts, before the Sentry's seccomp filter goes on
//! (it cannot open host paths by name afterwards), and renumbered for the
//! sandbox's CPUs: its CPU `i` is the `i`-th CPU the Sentry may run on.
//! /proc/cpuinfo's topology lines are made from the same files, so the two
//! agree.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::Read as _;
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

/// The files of `cpuN/cache/indexM`; the last two only where the kernel
/// can show them.
const ALL_CACHE_FILES: &[&str] = &[
    "id",
    "level",
    "type",
    "size",
    "coherency_line_size",
    "ways_of_associativity",
    "number_of_sets",
    "physical_line_partition",
    "shared_cpu_map",
    "shared_cpu_list",
    "allocation_policy",
    "write_policy",
];
/// The cache files tried here. x86's caches never have
/// `allocation_policy` or `write_policy`: its cacheinfo sets no policy
/// attribute, and the kernel hides a file whose attribute is not set.
const CACHE_FILES: &[&str] = if cfg!(target_arch = "x86_64") {
    ALL_CACHE_FILES.split_at(ALL_CACHE_FILES.len() - 2).0
} else {
    ALL_CACHE_FILES
};

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
    ///
    /// The first CPU is read in full. The others read only what differs:
    /// a CPU that a CPU read before names in one of its sets (its core,
    /// cluster, die or package; a cache's sharers) has that level's files
    /// (ids and lists alike) or that cache's, and a mask is made from its
    /// list, once one the host wrote matched one made so.
    pub fn from_host(count: usize) -> CpuTopology {
        let map: Vec<usize> = allowed_cpus().into_iter().take(count).collect();
        if map.len() < count || count == 0 {
            return CpuTopology::synthetic(count);
        }
        match read_cpus(Path::new("/sys/devices/system/cpu"), &map) {
            Some(cpus) => CpuTopology::renumbered(cpus, &map),
            None => CpuTopology::synthetic(count),
        }
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

    /// What /proc/cpuinfo says of CPU `n`'s place, made from the files
    /// /sys shows so that the two agree: `physical id` is its
    /// `physical_package_id` and `core id` its `core_id`; `siblings` the
    /// CPUs of its package, and `cpu cores` the cores among them (as
    /// Linux's `show_cpuinfo` counts them: the package's online CPUs and
    /// its booted cores). A CPU whose files say nothing is a core of its
    /// own in package 0, as [`CpuTopology::synthetic`] makes it.
    pub fn cpuinfo(&self, n: usize) -> CpuInfoPlace {
        let count = self.cpus.len().max(1);
        let field = |cpu: usize, name: &str| -> Option<&str> {
            self.cpus.get(cpu).and_then(|c| {
                c.topology
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.as_str())
            })
        };
        let id = |cpu: usize, name: &str, default: usize| {
            field(cpu, name)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(default)
        };
        let set = |cpu: usize, names: &[&str]| {
            names
                .iter()
                .find_map(|name| field(cpu, name).and_then(parse_list))
        };
        let package = id(n, "physical_package_id", 0);
        // The package's CPUs as /sys lists them, else those with its id.
        let siblings = set(n, &["package_cpus_list", "core_siblings_list"])
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| {
                (0..count)
                    .filter(|&c| id(c, "physical_package_id", 0) == package)
                    .collect()
            });
        let cores: BTreeSet<usize> = siblings.iter().map(|&c| id(c, "core_id", c)).collect();
        CpuInfoPlace {
            physical_id: package,
            siblings: siblings.len().max(1),
            core_id: id(n, "core_id", n),
            cpu_cores: cores.len().max(1),
        }
    }
}

/// A CPU's topology lines in /proc/cpuinfo.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuInfoPlace {
    /// `physical id`: the package
    pub physical_id: usize,
    /// `siblings`: CPUs (hardware threads) in the package
    pub siblings: usize,
    /// `core id`
    pub core_id: usize,
    /// `cpu cores`: cores in the package
    pub cpu_cores: usize,
}

/// The files of host CPUs `map` under `root` (`/sys/devices/system/cpu`),
/// as the host wrote them; `None` if the first has no `core_id`.
fn read_cpus(root: &Path, map: &[usize]) -> Option<Vec<CpuFiles>> {
    let mut files = HostFiles::new(root);
    // `nr_cpu_ids`, the width of the kernel's masks.
    let mask_bits = files
        .read("possible")
        .and_then(|p| parse_list(&p))
        .and_then(|p| p.last().map(|&last| last + 1));
    let mut reader = Reader {
        files,
        mask_bits,
        masks_derived: None,
        first: None,
        read: Vec::new(),
    };
    for &host in map {
        let cpu = reader.cpu(host);
        if reader.read.is_empty() && !cpu.topology.iter().any(|(n, _)| *n == "core_id") {
            return None;
        }
        reader.read.push(cpu);
    }
    Some(
        reader
            .read
            .into_iter()
            .map(|c| CpuFiles {
                topology: c.topology,
                caches: c.caches.into_iter().map(|(files, _)| files).collect(),
            })
            .collect(),
    )
}

/// A level of the topology. The kernel makes each of its sets from CPUs
/// whose ids match, so every CPU in one CPU's set has the same id and the
/// same set.
struct Level {
    /// the level's id file
    id: &'static str,
    /// its sets' files, `(list, mask)`, the newer name first: a kernel that
    /// has it writes the same mask under the older one too
    sets: &'static [(&'static str, &'static str)],
}

const LEVELS: &[Level] = &[
    Level {
        id: "core_id",
        sets: &[
            ("core_cpus_list", "core_cpus"),
            ("thread_siblings_list", "thread_siblings"),
        ],
    },
    Level {
        id: "cluster_id",
        sets: &[("cluster_cpus_list", "cluster_cpus")],
    },
    Level {
        id: "die_id",
        sets: &[("die_cpus_list", "die_cpus")],
    },
    Level {
        id: "physical_package_id",
        sets: &[
            ("package_cpus_list", "package_cpus"),
            ("core_siblings_list", "core_siblings"),
        ],
    },
];

/// The ids of levels without sets (s390's books and drawers).
const OTHER_IDS: &[&str] = &["book_id", "drawer_id"];

/// The CPUs the calling thread may run on.
fn allowed_cpus() -> BTreeSet<usize> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if r == 0 {
        let bits = 8 * std::mem::size_of_val(&set);
        // SAFETY: every index is below the set's size in bits.
        return (0..bits)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect();
    }
    // More CPUs than a cpu_set_t holds (EINVAL): /proc says.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .and_then(|l| parse_list(l.trim()))
        })
        .unwrap_or_default()
}

/// Reads small host files: one `open`, reads into one buffer until the
/// end, one `close` (no size query: sysfs files say they hold a page).
struct HostFiles<'a> {
    root: &'a Path,
    buf: Vec<u8>,
}

impl<'a> HostFiles<'a> {
    fn new(root: &'a Path) -> Self {
        HostFiles {
            root,
            buf: vec![0; MAX_FILE + 1],
        }
    }

    /// `rel`'s text without its newline; `None` if it is missing,
    /// unreadable or longer than [`MAX_FILE`].
    fn read(&mut self, rel: &str) -> Option<String> {
        let mut f = std::fs::File::open(self.root.join(rel)).ok()?;
        let mut len = 0;
        loop {
            match f.read(&mut self.buf[len..]) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
            if len > MAX_FILE {
                return None;
            }
        }
        let text = std::str::from_utf8(&self.buf[..len]).ok()?;
        Some(text.trim_end_matches('\n').to_string())
    }
}

/// A cache's files, and the host CPUs that share it.
type SharedCache = (Vec<(&'static str, String)>, Option<BTreeSet<usize>>);

/// One host CPU's files as read, with the host CPUs its sets name.
struct HostCpu {
    topology: Vec<(&'static str, String)>,
    /// by [`LEVELS`]
    sets: Vec<Option<BTreeSet<usize>>>,
    /// each cache's files and the CPUs that share it
    caches: Vec<SharedCache>,
}

/// What the first CPU read tells of the host's files.
#[derive(Clone)]
struct FirstCpu {
    /// the topology files it has: every CPU has the same (one attribute
    /// group)
    present: Vec<&'static str>,
    /// its lists under older names say what the newer names say
    aliases_agree: bool,
}

/// Reads the CPUs' files, each CPU knowing what the CPUs before it read.
struct Reader<'a> {
    files: HostFiles<'a>,
    /// `nr_cpu_ids`, the width of the host's masks
    mask_bits: Option<usize>,
    /// whether a mask made from its list is the host's text: unknown until
    /// one is compared
    masks_derived: Option<bool>,
    first: Option<FirstCpu>,
    read: Vec<HostCpu>,
}

impl Reader<'_> {
    fn cpu(&mut self, host: usize) -> HostCpu {
        let first = self.first.clone();
        // Whether the first CPU has a file: unknown (so read) for the first.
        let has = |name: &str| first.as_ref().is_none_or(|f| f.present.contains(&name));
        let mut got: Vec<(&'static str, String)> = Vec::new();
        let mut sets: Vec<Option<BTreeSet<usize>>> = vec![None; LEVELS.len()];
        let mut aliases_agree = true;
        for (i, level) in LEVELS.iter().enumerate() {
            let known = self
                .read
                .iter()
                .find(|c| c.sets[i].as_ref().is_some_and(|s| s.contains(&host)));
            if let Some(src) = known {
                let names =
                    std::iter::once(level.id).chain(level.sets.iter().flat_map(|&(l, m)| [l, m]));
                for name in names {
                    if let Some((n, v)) = src.topology.iter().find(|(n, _)| *n == name) {
                        got.push((n, v.clone()));
                    }
                }
                sets[i] = src.sets[i].clone();
                continue;
            }
            if has(level.id) {
                if let Some(v) = self.files.read(&format!("cpu{host}/topology/{}", level.id)) {
                    got.push((level.id, v));
                }
            }
            let mut text: Option<String> = None;
            for &(list, _) in level.sets {
                if !has(list) {
                    continue;
                }
                let v = match (&first, &text) {
                    (Some(f), Some(t)) if f.aliases_agree => Some(t.clone()),
                    _ => self.files.read(&format!("cpu{host}/topology/{list}")),
                };
                let Some(v) = v else { continue };
                match &text {
                    None => {
                        sets[i] = parse_list(&v);
                        text = Some(v.clone());
                    }
                    Some(t) if *t != v => aliases_agree = false,
                    Some(_) => {}
                }
                got.push((list, v));
            }
        }
        for &id in OTHER_IDS {
            if has(id) {
                if let Some(v) = self.files.read(&format!("cpu{host}/topology/{id}")) {
                    got.push((id, v));
                }
            }
        }
        // The masks of the lists read here (copied levels brought theirs).
        let lists: Vec<(&'static str, String)> = LEVELS
            .iter()
            .flat_map(|l| l.sets)
            .filter(|(_, mask)| !got.iter().any(|(n, _)| n == mask))
            .filter_map(|&(list, mask)| {
                let (_, v) = got.iter().find(|(n, _)| *n == list)?;
                Some((mask, v.clone()))
            })
            .collect();
        // The widest set checks the first mask made.
        let mut order: Vec<usize> = (0..lists.len()).collect();
        order.sort_by_key(|&k| std::cmp::Reverse(parse_list(&lists[k].1).map_or(0, |s| s.len())));
        for k in order {
            let (mask, list) = &lists[k];
            let path = format!("cpu{host}/topology/{mask}");
            if let Some(v) = self.mask(&path, list) {
                got.push((mask, v));
            }
        }
        let topology: Vec<(&'static str, String)> = TOPOLOGY_FILES
            .iter()
            .filter_map(|&n| got.iter().find(|(g, _)| *g == n).cloned())
            .collect();
        if first.is_none() {
            self.first = Some(FirstCpu {
                present: topology.iter().map(|(n, _)| *n).collect(),
                aliases_agree,
            });
        }
        let caches = self.caches(host);
        HostCpu {
            topology,
            sets,
            caches,
        }
    }

    /// The mask at `path` whose list is `list`: made from the list where
    /// that is known to give the host's text, else read (and compared,
    /// the first time).
    fn mask(&mut self, path: &str, list: &str) -> Option<String> {
        let made = self
            .mask_bits
            .zip(parse_list(list))
            .map(|(bits, set)| format_mask(&set, bits));
        match (self.masks_derived, made) {
            (Some(true), Some(m)) => Some(m),
            (None, Some(m)) => {
                let host = self.files.read(path)?;
                self.masks_derived = Some(host == m);
                Some(host)
            }
            _ => self.files.read(path),
        }
    }

    /// CPU `host`'s caches: those a CPU read before shares with it are
    /// copied; the count ends at the first index without a `level`.
    fn caches(&mut self, host: usize) -> Vec<SharedCache> {
        let mut caches = Vec::new();
        for m in 0..MAX_CACHES {
            let shared = self.read.iter().find_map(|c| {
                c.caches
                    .get(m)
                    .filter(|(_, s)| s.as_ref().is_some_and(|s| s.contains(&host)))
            });
            if let Some(cache) = shared {
                caches.push(cache.clone());
                continue;
            }
            let dir = format!("cpu{host}/cache/index{m}");
            let Some(level) = self.files.read(&format!("{dir}/level")) else {
                break;
            };
            let list = self.files.read(&format!("{dir}/shared_cpu_list"));
            let mut files = Vec::new();
            for &f in CACHE_FILES {
                let v = match f {
                    "level" => Some(level.clone()),
                    "shared_cpu_list" => list.clone(),
                    "shared_cpu_map" => match &list {
                        Some(l) => self.mask(&format!("{dir}/{f}"), l),
                        None => self.files.read(&format!("{dir}/{f}")),
                    },
                    _ => self.files.read(&format!("{dir}/{f}")),
                };
                if let Some(v) = v {
                    files.push((f, v));
                }
            }
            caches.push((files, list.as_deref().and_then(parse_list)));
        }
        caches
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

    /// A 4-CPU host under `root`: two cores of two threads, each core's
    /// L1 and L2 its own, one L3.
    fn fake_host(root: &Path) {
        let put = |rel: String, text: &str| {
            let path = root.join(rel);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, format!("{text}\n")).expect("write");
        };
        put("possible".into(), "0-3");
        for cpu in 0..4usize {
            let core = cpu / 2;
            let (sib, sib_mask) = if core == 0 {
                ("0-1", "3")
            } else {
                ("2-3", "c")
            };
            let t = |f: &str, v: &str| put(format!("cpu{cpu}/topology/{f}"), v);
            t("physical_package_id", "0");
            t("die_id", "0");
            t("cluster_id", &(core * 8).to_string());
            t("core_id", &core.to_string());
            for (list, mask) in [("core_cpus", sib_mask), ("thread_siblings", sib_mask)] {
                t(&format!("{list}_list"), sib);
                t(list, mask);
            }
            t("cluster_cpus_list", sib);
            t("cluster_cpus", sib_mask);
            for name in ["core_siblings", "die_cpus", "package_cpus"] {
                t(&format!("{name}_list"), "0-3");
                t(name, "f");
            }
            for (m, level, kind, size) in [
                (0, "1", "Data", "48K"),
                (1, "1", "Instruction", "32K"),
                (2, "2", "Unified", "1280K"),
                (3, "3", "Unified", "30720K"),
            ] {
                let c = |f: &str, v: &str| put(format!("cpu{cpu}/cache/index{m}/{f}"), v);
                let (list, mask, id) = if m == 3 {
                    ("0-3", "f", "0".to_string())
                } else {
                    (sib, sib_mask, core.to_string())
                };
                c("id", &id);
                c("level", level);
                c("type", kind);
                c("size", size);
                c("coherency_line_size", "64");
                c("ways_of_associativity", "12");
                c("number_of_sets", "64");
                c("physical_line_partition", "1");
                c("shared_cpu_list", list);
                c("shared_cpu_map", mask);
            }
        }
    }

    /// Every file of every CPU, read one by one.
    fn read_everything(root: &Path, map: &[usize]) -> Vec<CpuFiles> {
        let read = |rel: String| {
            std::fs::read_to_string(root.join(rel))
                .ok()
                .map(|t| t.trim_end_matches('\n').to_string())
        };
        map.iter()
            .map(|&host| CpuFiles {
                topology: TOPOLOGY_FILES
                    .iter()
                    .filter_map(|&f| Some((f, read(format!("cpu{host}/topology/{f}"))?)))
                    .collect(),
                caches: (0..MAX_CACHES)
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
                    .collect(),
            })
            .collect()
    }

    #[test]
    fn shared_reads_give_what_reading_everything_gives() {
        let root = std::env::temp_dir().join(format!("cpu-topology-{}", std::process::id()));
        fake_host(&root);
        for map in [&[0, 1, 2, 3][..], &[1, 2], &[3, 0]] {
            assert_eq!(
                read_cpus(&root, map),
                Some(read_everything(&root, map)),
                "{map:?}"
            );
        }
        // Masks the host writes otherwise than those made from their
        // lists (here: narrower than `possible` says) are read, not made.
        std::fs::write(root.join("possible"), "0-39\n").expect("write");
        assert_eq!(
            read_cpus(&root, &[0, 1, 2, 3]),
            Some(read_everything(&root, &[0, 1, 2, 3]))
        );
        std::fs::remove_dir_all(&root).expect("clean up");
    }

    #[test]
    fn cpuinfo_places_come_from_the_sys_files() {
        // Two cores of two threads (CPUs 0-1 and 2-3), one package.
        let root = std::env::temp_dir().join(format!("cpu-cpuinfo-{}", std::process::id()));
        fake_host(&root);
        let place = |map: &[usize], n: usize| {
            let cpus = read_cpus(&root, map).expect("files");
            CpuTopology::renumbered(cpus, map).cpuinfo(n)
        };
        let all = [0, 1, 2, 3];
        for (n, core) in [(0, 0), (1, 0), (2, 1), (3, 1)] {
            assert_eq!(
                place(&all, n),
                CpuInfoPlace {
                    physical_id: 0,
                    siblings: 4,
                    core_id: core,
                    cpu_cores: 2,
                },
                "cpu{n}"
            );
        }
        // One thread of each core: two CPUs, two cores.
        assert_eq!(
            place(&[1, 2], 1),
            CpuInfoPlace {
                physical_id: 0,
                siblings: 2,
                core_id: 1,
                cpu_cores: 2,
            }
        );
        // Both threads of one core: two CPUs, one core.
        assert_eq!(
            place(&[2, 3], 0),
            CpuInfoPlace {
                physical_id: 0,
                siblings: 2,
                core_id: 1,
                cpu_cores: 1,
            }
        );
        std::fs::remove_dir_all(&root).expect("clean up");
    }

    #[test]
    fn cpuinfo_places_without_package_lists_count_by_ids() {
        // Two packages of one core with two threads each, where /sys has
        // ids and thread lists but no package lists.
        let cpu = |package: &str, core: &str, threads: &str| CpuFiles {
            topology: vec![
                ("physical_package_id", package.to_string()),
                ("core_id", core.to_string()),
                ("thread_siblings_list", threads.to_string()),
            ],
            caches: Vec::new(),
        };
        let t = CpuTopology {
            cpus: vec![
                cpu("0", "0", "0-1"),
                cpu("0", "0", "0-1"),
                cpu("1", "0", "2-3"),
                cpu("1", "0", "2-3"),
            ],
        };
        assert_eq!(
            t.cpuinfo(3),
            CpuInfoPlace {
                physical_id: 1,
                siblings: 2,
                core_id: 0,
                cpu_cores: 1,
            }
        );
    }

    #[test]
    fn synthetic_cpuinfo_is_a_core_per_cpu() {
        let t = CpuTopology::synthetic(3);
        assert_eq!(
            t.cpuinfo(2),
            CpuInfoPlace {
                physical_id: 0,
                siblings: 3,
                core_id: 2,
                cpu_cores: 3,
            }
        );
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
