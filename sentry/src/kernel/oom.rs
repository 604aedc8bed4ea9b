//! The sandbox's memory limit held by the Sentry itself (`do --memory`,
//! where no host cgroup holds it): a watcher reads how much of the memory
//! file the guest has filled and, past the limit, kills the process that
//! holds the most, as Linux's memory cgroup OOM killer does.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::task::{si, user_info, Process};
use super::Kernel;
use crate::sync::Locked;

/// Guest pages are filled by the host on faults, out of the Sentry's
/// sight, so the watcher looks again as soon as a guest filling memory at
/// this rate (bytes per second, about one core's `memset`) could reach the
/// limit: often near it, rarely far below it.
const FILL_RATE: u64 = 8 << 30;
/// The watcher's shortest and longest wait between looks.
const MIN_PERIOD: Duration = Duration::from_millis(1);
const MAX_PERIOD: Duration = Duration::from_millis(50);
/// How often it looks while a killed process's pages go back.
const PERIOD: Duration = Duration::from_millis(10);

/// How long the watcher waits for a killed process's memory to go back
/// before it may choose another.
const RELEASE_WAIT: Duration = Duration::from_secs(2);

/// Starts the watcher of `kernel`'s memory limit; it ends with the
/// sandbox. `say`: a kill is said on the Sentry's stderr too.
pub(crate) fn watch(kernel: &Arc<Kernel>, say: bool) -> std::io::Result<()> {
    let weak = Arc::downgrade(kernel);
    std::thread::Builder::new()
        .name("memory-limit".into())
        .spawn(move || run(&weak, say))
        .map(drop)
}

fn run(weak: &Weak<Kernel>, say: bool) {
    let mut wait = MIN_PERIOD;
    loop {
        std::thread::sleep(wait);
        let Some(k) = weak.upgrade() else {
            return;
        };
        let Some(limit) = k.memory_limit() else {
            wait = MAX_PERIOD;
            continue;
        };
        let now = k.memory.used_bytes();
        if now <= limit {
            let room = Duration::from_secs_f64((limit - now) as f64 / FILL_RATE as f64);
            wait = room.clamp(MIN_PERIOD, MAX_PERIOD);
            continue;
        }
        wait = MIN_PERIOD;
        let Some((victim, rss)) = largest(&k) else {
            continue;
        };
        let (pid, comm) = (victim.pid, victim.state().info.comm.clone());
        tracing::warn!(
            pid,
            comm,
            rss,
            limit,
            "memory limit reached: process killed"
        );
        // (the user's view, as the netstack's refusals are: the command's
        // stderr is the user's)
        let mib = |b: u64| b >> 20;
        if say {
            eprintln!(
                "ferrovisor: the sandbox's memory limit ({} MiB) was reached: killed process \
                 {pid} ({comm}), which held {} MiB",
                mib(limit),
                mib(rss)
            );
        }
        let info = user_info(abi::signal::SIGKILL, 0, 0, si::KERNEL);
        victim.send_signal_from_outside(&k, abi::signal::SIGKILL, info);
        drop(k);
        // Its pages go back as its address space is torn down, which
        // takes a while for a large one: until then no other is chosen.
        // (Seen done twice in a row: its last reference may have gone a
        // moment before the tear-down began.)
        let (since, mut done) = (Instant::now(), 0);
        while since.elapsed() < RELEASE_WAIT && done < 2 {
            std::thread::sleep(PERIOD);
            let Some(k) = weak.upgrade() else {
                return;
            };
            if k.memory.used_bytes() <= limit {
                break;
            }
            let gone = victim.state().info.mm.upgrade().is_none();
            done = if gone && !k.memory.tearing_down() {
                done + 1
            } else {
                0
            };
        }
    }
}

/// The live process whose address space holds the most of the memory
/// file, adjusted by its `oom_score_adj` as Linux's `oom_badness()` does
/// (-1000: never), with what it holds.
fn largest(k: &Kernel) -> Option<(Arc<Process>, u64)> {
    let procs: Vec<Arc<Process>> = k.procs().map.values().cloned().collect();
    let total = k.memory_limit().unwrap_or(u64::MAX);
    procs
        .into_iter()
        .filter_map(|p| {
            let (mm, adj) = {
                let st = p.state();
                if st.exit.is_some() || st.group_exit.is_some() {
                    return None;
                }
                (st.info.mm.upgrade()?, st.oom_score_adj)
            };
            if adj == -1000 {
                return None;
            }
            let rss: u64 = {
                let mm = mm.locked();
                mm.vmas().map(|v| mm.resident_bytes(v)).sum()
            };
            // (the adjustment is in thousandths of the limit)
            let score = rss as i128 + i128::from(adj) * i128::from(total / 1000);
            Some((p, rss, score))
        })
        .max_by_key(|(_, _, score)| *score)
        .map(|(p, rss, _)| (p, rss))
}
