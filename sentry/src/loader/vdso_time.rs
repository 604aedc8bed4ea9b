//! The time page ("vvar") behind the vDSO's clocks: one page of the memory
//! file that the Sentry keeps current and every guest maps read-only just
//! below the vDSO image, so `clock_gettime`, `gettimeofday` and `time` read
//! the time from the TSC without trapping. Its layout is
//! `sentry/vdso/vvar.h`'s, mirrored by [`TimePage`].
//!
//! How the page is kept:
//!
//! * At start a background thread samples the host's `CLOCK_MONOTONIC` and
//!   `CLOCK_MONOTONIC_RAW` against the TSC twice, [`CALIBRATION`] apart, and
//!   publishes a base TSC value, each clock's time at that TSC and a
//!   nanoseconds-per-tick factor (`mult / 2^shift`). Until then, and for good
//!   on a host without an invariant TSC (CPUID 0x8000_0007 EDX bit 8), the
//!   page says "invalid" and the vDSO traps instead.
//! * The thread then refreshes the page, every [`REFRESH`] once settled. A
//!   refresh never moves a clock backwards: the new base is the old
//!   parameters' time at the new base TSC, and the difference from the host
//!   clock is slewed away over the next interval (at most [`MAX_SLEW`]), as
//!   NTP does, unless the host is so far ahead that it is stepped forward.
//!   The tick rate is measured over the last [`RATE_WINDOW`] samples, so it
//!   follows the host's own NTP frequency corrections.
//! * `CLOCK_REALTIME`, `CLOCK_BOOTTIME` and `CLOCK_TAI` are the monotonic
//!   clock plus offsets read from the host. In Linux those offsets move only
//!   when the clock is set, on resume and at leap seconds, so a change
//!   smaller than [`OFFSET_NOISE_NS`] is measurement noise and ignored; a
//!   larger one (the host's clock was set) reaches guests with the next
//!   refresh (forward only for `CLOCK_BOOTTIME`). `CLOCK_TAI`'s offset is
//!   the host's own, in whole seconds (0 unless its NTP daemon set it).
//!   `CLOCK_MONOTONIC_RAW` is slewed separately against the host's raw clock,
//!   so the vDSO and the Sentry's `clock_gettime(2)` (which asks the host)
//!   agree on every clock, to the tracking error (tens of nanoseconds). The `_COARSE` clocks get the full-resolution time.
//! * A reader that finds the page older than [`MAX_STALE`] (this thread
//!   stalled) traps, so a slew can never run on unchecked.
//!
//! The vDSO assumes the guest reads the same TSC as the Sentry: true of the
//! ptrace platform, where guests are host processes. A VM-based platform must
//! give its guests a TSC offset of zero, or keep the page invalid.

use std::collections::VecDeque;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use abi::{Errno, Timespec};

use crate::mm::memfile::MemoryFile;
use crate::mm::SharedRegion;
use crate::sync::Locked;

/// Size of the time page, and how far below the vDSO image it sits
/// (`VVAR_SIZE` in vvar.h, `vvar_page` in vdso.lds).
pub const VVAR_SIZE: u64 = 4096;

/// `clock_gettime(2)` clock ids `0..CLOCKS` have a slot each (`VVAR_CLOCKS`).
pub const CLOCKS: usize = 12;

/// Fixed-point shift of `mult`: 32 bits keep its relative rounding error
/// below 1e-9 (a millisecond in twelve days) for any TSC up to 8 GHz; the
/// vDSO's product is 128 bits wide, so nothing overflows.
pub const SHIFT: u32 = 32;

/// How long the first calibration measures the TSC against the host clock.
/// Short, because guests trap for the time until then (the first guest is
/// usually still being loaded); its error (sample jitter of ~20 ns over this
/// span, some 20 ppm) lasts only until the first refresh slews it away.
pub const CALIBRATION: Duration = Duration::from_millis(1);

/// The first refresh comes this soon after calibration; the interval then
/// doubles up to [`REFRESH`], so the early rate estimate is corrected fast.
const FIRST_REFRESH: Duration = Duration::from_millis(4);

/// The settled refresh interval. The TSC and the host clock drift apart by
/// parts per million at most, so this keeps the error around a microsecond.
pub const REFRESH: Duration = Duration::from_millis(250);

/// How old the page may get before readers stop trusting it (eight missed
/// refreshes); they trap to the Sentry instead.
pub const MAX_STALE: Duration = Duration::from_secs(2);

/// The largest rate correction a refresh applies to slew towards the host
/// clock: 500 ppm, the limit of Linux's own NTP slewing (adjtimex(2)).
pub const MAX_SLEW: f64 = 500e-6;

/// Samples the tick rate is measured over (about four seconds once
/// settled): long enough that sample jitter does not matter, short enough to
/// follow the host's NTP frequency changes.
const RATE_WINDOW: usize = 16;

/// Offset changes below this are jitter of reading two host clocks one
/// after the other, not a clock being set.
pub const OFFSET_NOISE_NS: i64 = 1000;

/// Host-clock readings bracketed by TSC reads; the narrowest bracket wins.
const SAMPLE_TRIES: usize = 5;

const NSEC_PER_SEC: i64 = 1_000_000_000;

/// One clock's slot (`struct vvar_clock`).
#[derive(Debug, Default)]
#[repr(C)]
pub struct ClockSlot {
    /// nanoseconds since the clock's epoch at [`TimePage::tsc_base`]
    pub base_ns: AtomicU64,
    /// nanoseconds per TSC tick, times `2^shift`; 0 if the vDSO must trap
    pub mult: AtomicU64,
}

/// The time page (`struct vvar_page`). Only the Sentry writes it, through
/// these atomics, under the seqlock `seq`; guests read it.
#[derive(Debug, Default)]
#[repr(C)]
pub struct TimePage {
    /// odd while an update is in progress; changes with every update
    pub seq: AtomicU64,
    /// 1 when the vDSO may compute times from the page
    pub valid: AtomicU64,
    /// the TSC value the slots' `base_ns` are for
    pub tsc_base: AtomicU64,
    /// ticks past `tsc_base` after which the page is stale
    pub max_delta: AtomicU64,
    /// the fixed-point shift of every `mult`
    pub shift: AtomicU64,
    /// zero; room to grow without moving `clock`
    pub reserved: AtomicU64,
    /// by clock id
    pub clock: [ClockSlot; CLOCKS],
}
const _: () = assert!(size_of::<TimePage>() == 6 * 8 + CLOCKS * 16);
const _: () = assert!(size_of::<TimePage>() as u64 <= VVAR_SIZE);
const _: () = assert!(VVAR_SIZE == crate::PAGE_SIZE);

impl TimePage {
    /// The time on `clock` in nanoseconds, computed exactly as the vDSO
    /// does; `None` where the vDSO traps.
    pub fn read_ns(&self, clock: i32) -> Option<u64> {
        let slot = self.clock.get(usize::try_from(clock).ok()?)?;
        loop {
            let seq = self.seq.load(Ordering::Acquire);
            if seq & 1 != 0 {
                std::hint::spin_loop();
                continue;
            }
            let valid = self.valid.load(Ordering::Relaxed);
            let base = slot.base_ns.load(Ordering::Relaxed);
            let mult = slot.mult.load(Ordering::Relaxed);
            let tsc_base = self.tsc_base.load(Ordering::Relaxed);
            let max_delta = self.max_delta.load(Ordering::Relaxed);
            let shift = self.shift.load(Ordering::Relaxed);
            let tsc = rdtsc();
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) != seq {
                continue;
            }
            if valid == 0 || mult == 0 || shift > 63 {
                return None;
            }
            let delta = tsc.saturating_sub(tsc_base);
            if delta > max_delta {
                return None;
            }
            return Some(base.wrapping_add(scale(delta, mult, shift as u32)));
        }
    }
}

/// `(delta * mult) >> shift` in 128 bits, as the vDSO computes it.
fn scale(delta: u64, mult: u64, shift: u32) -> u64 {
    ((u128::from(delta) * u128::from(mult)) >> shift) as u64
}

/// The TSC, read between two `lfence`s so that it is ordered with the loads
/// and stores around it (Intel SDM vol. 2, RDTSC), as the vDSO reads it.
pub(crate) fn rdtsc() -> u64 {
    // SAFETY: LFENCE and RDTSC only read the counter and order the
    // instruction stream; x86-64 always has both (SSE2 is baseline). A
    // process whose RDTSC is disabled (PR_SET_TSC) would fault here, but
    // the Sentry never disables it for itself.
    unsafe {
        core::arch::x86_64::_mm_lfence();
        let t = core::arch::x86_64::_rdtsc();
        core::arch::x86_64::_mm_lfence();
        t
    }
}

/// Whether the TSC ticks at a constant rate in every power state (CPUID
/// 0x8000_0007 EDX bit 8, "invariant TSC"), which is what makes it a clock.
pub fn tsc_is_invariant() -> bool {
    let max_ext = core::arch::x86_64::__cpuid(0x8000_0000).eax;
    max_ext >= 0x8000_0007 && core::arch::x86_64::__cpuid(0x8000_0007).edx & (1 << 8) != 0
}

fn ns_of(ts: &Timespec) -> i64 {
    ts.tv_sec
        .saturating_mul(NSEC_PER_SEC)
        .saturating_add(ts.tv_nsec)
}

/// A host clock reading and the TSC at the same moment.
#[derive(Clone, Copy, Debug)]
struct Sample {
    tsc: u64,
    ns: i64,
}

/// Reads host clock `clock` between two TSC reads, keeping the reading with
/// the narrowest bracket and dating it at the bracket's middle.
fn sample(clock: libc::clockid_t) -> Option<Sample> {
    let mut best: Option<(u64, Sample)> = None;
    for _ in 0..SAMPLE_TRIES {
        let t0 = rdtsc();
        let ts = crate::host::clock_gettime(clock).ok()?;
        let t1 = rdtsc();
        let Some(width) = t1.checked_sub(t0) else {
            continue;
        };
        if best.is_none_or(|(w, _)| width < w) {
            let s = Sample {
                tsc: t0 + width / 2,
                ns: ns_of(&ts),
            };
            best = Some((width, s));
        }
    }
    best.map(|(_, s)| s)
}

/// `clock - reference` in nanoseconds, reading `clock` between two readings
/// of `reference` and keeping the narrowest bracket.
fn offset(clock: libc::clockid_t, reference: libc::clockid_t) -> Option<i64> {
    let mut best: Option<(i64, i64)> = None;
    for _ in 0..SAMPLE_TRIES {
        let r0 = ns_of(&crate::host::clock_gettime(reference).ok()?);
        let c = ns_of(&crate::host::clock_gettime(clock).ok()?);
        let r1 = ns_of(&crate::host::clock_gettime(reference).ok()?);
        let width = r1 - r0;
        if width >= 0 && best.is_none_or(|(w, _)| width < w) {
            best = Some((width, c - (r0 + width / 2)));
        }
    }
    best.map(|(_, off)| off)
}

/// One clock the page slews against a host clock: `CLOCK_MONOTONIC` (which
/// the realtime, boot-time and TAI clocks follow) or `CLOCK_MONOTONIC_RAW`.
#[derive(Debug)]
struct Timeline {
    host: libc::clockid_t,
    /// recent samples, oldest first, for the tick rate
    samples: VecDeque<Sample>,
    /// published: nanoseconds at the page's `tsc_base`
    base_ns: u64,
    /// published: nanoseconds per tick, times `2^SHIFT`
    mult: u64,
}

impl Timeline {
    fn new(host: libc::clockid_t) -> Self {
        Timeline {
            host,
            samples: VecDeque::with_capacity(RATE_WINDOW),
            base_ns: 0,
            mult: 0,
        }
    }

    /// Records `s`; `false` if the TSC or the host clock did not move
    /// forward since the last sample (then the TSC is no clock to trust).
    fn push(&mut self, s: Sample) -> bool {
        if let Some(last) = self.samples.back() {
            if s.tsc <= last.tsc || s.ns < last.ns {
                return false;
            }
        }
        if self.samples.len() == RATE_WINDOW {
            self.samples.pop_front();
        }
        self.samples.push_back(s);
        true
    }

    /// Host nanoseconds per TSC tick over the sample window, once it spans
    /// half a millisecond.
    fn rate(&self) -> Option<f64> {
        let (first, last) = (self.samples.front()?, self.samples.back()?);
        let ns = last.ns - first.ns;
        let ticks = last.tsc - first.tsc;
        (ns >= 500_000 && ticks > 0).then(|| ns as f64 / ticks as f64)
    }

    /// The published clock at `tsc`, for a page whose base is `tsc_base`.
    fn at(&self, tsc_base: u64, tsc: u64) -> u64 {
        let delta = tsc.saturating_sub(tsc_base);
        self.base_ns.saturating_add(scale(delta, self.mult, SHIFT))
    }

    /// Moves the base from `old_tsc_base` to `now` without a jump and aims
    /// the rate at the host clock (sampled at `s`, ticking at `rate`) one
    /// `interval` from now. The first call just starts at the host's time.
    fn advance(
        &mut self,
        published: bool,
        old_tsc_base: u64,
        now: u64,
        s: Sample,
        rate: f64,
        interval: Duration,
    ) {
        // The host clock extrapolated to `now`.
        let since_sample = now.saturating_sub(s.tsc) as f64 * rate;
        let host_now = u64::try_from(s.ns).unwrap_or(0) + since_sample as u64;
        if !published {
            self.base_ns = host_now;
            self.mult = to_mult(rate);
            return;
        }
        let ours_now = self.at(old_tsc_base, now);
        // Positive: the published clock is behind the host's.
        let err = i128::from(s.ns) - i128::from(self.at(old_tsc_base, s.tsc));
        let interval_ns = interval.as_nanos() as f64;
        if err as f64 > interval_ns * MAX_SLEW {
            // Too far behind to slew within an interval (the page went
            // stale, say): step forward, never back.
            self.base_ns = ours_now.max(host_now);
            self.mult = to_mult(rate);
        } else {
            self.base_ns = ours_now;
            let correction = (err as f64 / interval_ns).clamp(-MAX_SLEW, MAX_SLEW);
            self.mult = to_mult(rate * (1.0 + correction));
        }
    }
}

/// `ns_per_tick * 2^SHIFT`, rounded.
fn to_mult(ns_per_tick: f64) -> u64 {
    (ns_per_tick * (1u64 << SHIFT) as f64).round() as u64
}

/// What the refresh thread keeps between updates.
#[derive(Debug)]
struct State {
    /// whether the page has been published (its bases are meaningful)
    published: bool,
    /// set when the TSC misbehaved: the page stays invalid for good
    failed: bool,
    tsc_base: u64,
    monotonic: Timeline,
    raw: Timeline,
    /// `CLOCK_REALTIME - CLOCK_MONOTONIC`
    realtime_off: i64,
    /// `CLOCK_BOOTTIME - CLOCK_MONOTONIC`
    boottime_off: i64,
    /// `CLOCK_TAI - CLOCK_REALTIME`, whole seconds
    tai_off: i64,
}

/// The page and its state, shared with the refresh thread.
#[derive(Debug)]
struct Shared {
    region: Arc<SharedRegion>,
    state: Mutex<State>,
}

impl Shared {
    fn page(&self) -> &TimePage {
        let ptr = self
            .region
            .memory_file()
            .ptr(self.region.offset(), VVAR_SIZE);
        // SAFETY: the region is `VVAR_SIZE` bytes of the memory file's
        // mapping, page-aligned (so aligned for `AtomicU64`), and lives as
        // long as `self`, which holds it. Any bit pattern is a valid
        // `TimePage`. Guests map it read-only and cannot make it writable
        // (`install` forbids it), and the Sentry writes it only through
        // these atomics, so `&TimePage` is never aliased by a `&mut`.
        unsafe { &*ptr.cast::<TimePage>() }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    /// Marks the page invalid for good (the vDSO traps from now on).
    fn fail(&self, st: &mut State, why: &str) {
        tracing::warn!("vDSO time page disabled: {why}; clock reads will trap");
        st.failed = true;
        // Only this thread writes, under the state lock, so `seq` is even.
        let page = self.page();
        let seq = page.seq.load(Ordering::Relaxed);
        page.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        page.valid.store(0, Ordering::Relaxed);
        page.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// Samples the host clocks and, once the rate is known, publishes new
    /// parameters aimed at the host clocks `interval` from now.
    fn refresh(&self, interval: Duration) {
        let mut st = self.state();
        if st.failed {
            return;
        }
        let (Some(mono), Some(raw)) = (sample(st.monotonic.host), sample(st.raw.host)) else {
            return self.fail(&mut st, "the host clock cannot be read");
        };
        if !st.monotonic.push(mono) || !st.raw.push(raw) {
            return self.fail(&mut st, "the TSC went backwards against the host clock");
        }
        let (Some(mono_rate), Some(raw_rate)) = (st.monotonic.rate(), st.raw.rate()) else {
            return; // calibrating: one sample so far
        };
        // Plausible TSCs tick between 1 MHz and 1 THz.
        if !(1e-3..=1e3).contains(&mono_rate) || !(1e-3..=1e3).contains(&raw_rate) {
            return self.fail(&mut st, "the TSC rate is implausible");
        }
        let offsets = (
            offset(libc::CLOCK_REALTIME, libc::CLOCK_MONOTONIC),
            offset(libc::CLOCK_BOOTTIME, libc::CLOCK_MONOTONIC),
            offset(libc::CLOCK_TAI, libc::CLOCK_REALTIME),
        );
        let (Some(realtime_off), Some(boottime_off), Some(tai_off)) = offsets else {
            return self.fail(&mut st, "the host clocks cannot be read");
        };
        let published = st.published;
        if !published || (realtime_off - st.realtime_off).abs() > OFFSET_NOISE_NS {
            st.realtime_off = realtime_off;
        }
        if !published || boottime_off - st.boottime_off > OFFSET_NOISE_NS {
            st.boottime_off = boottime_off;
        }
        // TAI - UTC is a whole number of seconds (0 unless the host's NTP
        // daemon set it; 37 since 2017 where it did).
        st.tai_off = (tai_off + NSEC_PER_SEC / 2).div_euclid(NSEC_PER_SEC) * NSEC_PER_SEC;

        let page = self.page();
        let seq = page.seq.load(Ordering::Relaxed);
        page.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        // A full fence: the odd `seq` must be visible to every reader before
        // the new base TSC is read, so that a reader still using the old
        // parameters read its TSC before `now` (see vdso.c's rdtsc_ordered)
        // and the old and new parameters meet at `now` without a step back.
        fence(Ordering::SeqCst);
        let now = rdtsc();
        let old_base = st.tsc_base;
        st.monotonic
            .advance(published, old_base, now, mono, mono_rate, interval);
        st.raw
            .advance(published, old_base, now, raw, raw_rate, interval);
        st.tsc_base = now;
        st.published = true;
        if !published {
            tracing::debug!("vDSO time page valid: TSC at {:.3} MHz", 1e3 / mono_rate);
        }

        let (mono_base, mono_mult) = (st.monotonic.base_ns, st.monotonic.mult);
        let realtime = mono_base.checked_add_signed(st.realtime_off);
        let boottime = mono_base.checked_add_signed(st.boottime_off);
        let tai = realtime.and_then(|r| r.checked_add_signed(st.tai_off));
        // By clock id; `None` for the clocks the vDSO leaves to the Sentry:
        // the CPU-time clocks, the alarm clocks (which fail without an RTC)
        // and CLOCK_SGI_CYCLE.
        let slots: [Option<(u64, u64)>; CLOCKS] = [
            realtime.map(|b| (b, mono_mult)),    // CLOCK_REALTIME
            Some((mono_base, mono_mult)),        // CLOCK_MONOTONIC
            None,                                // CLOCK_PROCESS_CPUTIME_ID
            None,                                // CLOCK_THREAD_CPUTIME_ID
            Some((st.raw.base_ns, st.raw.mult)), // CLOCK_MONOTONIC_RAW
            realtime.map(|b| (b, mono_mult)),    // CLOCK_REALTIME_COARSE
            Some((mono_base, mono_mult)),        // CLOCK_MONOTONIC_COARSE
            boottime.map(|b| (b, mono_mult)),    // CLOCK_BOOTTIME
            None,                                // CLOCK_REALTIME_ALARM
            None,                                // CLOCK_BOOTTIME_ALARM
            None,                                // CLOCK_SGI_CYCLE
            tai.map(|b| (b, mono_mult)),         // CLOCK_TAI
        ];
        for (slot, value) in page.clock.iter().zip(slots) {
            let (base, mult) = value.unwrap_or((0, 0));
            slot.base_ns.store(base, Ordering::Relaxed);
            slot.mult.store(mult, Ordering::Relaxed);
        }
        page.tsc_base.store(now, Ordering::Relaxed);
        let max_delta = MAX_STALE.as_nanos() as f64 / mono_rate.max(raw_rate);
        page.max_delta.store(max_delta as u64, Ordering::Relaxed);
        page.shift.store(u64::from(SHIFT), Ordering::Relaxed);
        page.valid.store(1, Ordering::Relaxed);
        page.seq.store(seq.wrapping_add(2), Ordering::Release);
    }
}

/// Keeps the time page current. Dropping it stops the refresh thread; the
/// page itself lives on while any guest maps it.
#[derive(Debug)]
pub struct TimeKeeper {
    shared: Arc<Shared>,
    /// dropped with the keeper, which tells the thread to stop
    _stop: mpsc::Sender<()>,
}

impl TimeKeeper {
    /// Allocates the page and starts calibrating; the page turns valid
    /// [`CALIBRATION`] later if the host's TSC is invariant.
    pub fn new(mf: &Arc<MemoryFile>) -> Result<Self, Errno> {
        let usable = tsc_is_invariant();
        if !usable {
            tracing::warn!("no invariant TSC: the vDSO's clocks will trap to the Sentry");
        }
        Self::with_tsc(mf, usable)
    }

    /// As [`TimeKeeper::new`], with the TSC's usability given: `false`
    /// leaves the page invalid for good.
    pub fn with_tsc(mf: &Arc<MemoryFile>, usable: bool) -> Result<Self, Errno> {
        let region = SharedRegion::new(mf, VVAR_SIZE)?;
        // Fresh memory-file pages read as zeros (an invalid page), but say
        // so rather than rely on it.
        mf.write(region.offset(), &[0; VVAR_SIZE as usize]);
        let shared = Arc::new(Shared {
            region,
            state: Mutex::new(State {
                published: false,
                failed: !usable,
                tsc_base: 0,
                monotonic: Timeline::new(libc::CLOCK_MONOTONIC),
                raw: Timeline::new(libc::CLOCK_MONOTONIC_RAW),
                realtime_off: 0,
                boottime_off: 0,
                tai_off: 0,
            }),
        });
        let (stop, stopped) = mpsc::channel();
        if usable {
            let thread_shared = shared.clone();
            std::thread::Builder::new()
                .name("ferrovisor-time".into())
                .spawn(move || refresh_loop(&thread_shared, &stopped))
                .map_err(|_| Errno::EAGAIN)?;
        }
        Ok(TimeKeeper {
            shared,
            _stop: stop,
        })
    }

    /// The page's memory-file region, for mapping into guests.
    pub fn region(&self) -> &Arc<SharedRegion> {
        &self.shared.region
    }

    /// The page as the Sentry sees it.
    pub fn page(&self) -> &TimePage {
        self.shared.page()
    }

    /// Whether the vDSO currently computes times itself.
    pub fn is_valid(&self) -> bool {
        self.page().valid.load(Ordering::Acquire) != 0
    }

    /// Waits up to `timeout` for the page to turn valid.
    pub fn wait_valid(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.is_valid() {
            if Instant::now() >= deadline || self.shared.state().failed {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// The time on `clock` as the vDSO computes it, or `None` where it
    /// would trap. A syscall handler that answers from here agrees with the
    /// vDSO to the nanosecond.
    pub fn now(&self, clock: i32) -> Option<Timespec> {
        let ns = self.page().read_ns(clock)?;
        let ns = i64::try_from(ns).ok()?;
        Some(Timespec {
            tv_sec: ns / NSEC_PER_SEC,
            tv_nsec: ns % NSEC_PER_SEC,
        })
    }

    /// Refreshes the page now, aiming at the host clocks `interval` ahead.
    pub fn refresh(&self, interval: Duration) {
        self.shared.refresh(interval);
    }

    /// Shifts the published monotonic clocks by `ns` (tests: a clock off
    /// the host's, to see a refresh bring it back).
    #[cfg(test)]
    fn skew(&self, ns: i64) {
        let mut st = self.shared.state();
        st.monotonic.base_ns = st.monotonic.base_ns.saturating_add_signed(ns);
    }
}

/// The refresh thread: calibrates, then refreshes until the keeper goes.
fn refresh_loop(shared: &Shared, stop: &mpsc::Receiver<()>) {
    let wait = |d: Duration| matches!(stop.recv_timeout(d), Err(mpsc::RecvTimeoutError::Timeout));
    // The first sample; the second, CALIBRATION later, gives the rate.
    shared.refresh(CALIBRATION);
    let mut interval = CALIBRATION;
    let mut next = FIRST_REFRESH;
    while wait(interval) {
        shared.refresh(next);
        interval = next;
        next = (next * 2).min(REFRESH);
        if shared.state().failed {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MONOTONIC: i32 = libc::CLOCK_MONOTONIC;
    const REALTIME: i32 = libc::CLOCK_REALTIME;

    fn keeper() -> TimeKeeper {
        let mf = Arc::new(MemoryFile::new().expect("memory file"));
        let tk = TimeKeeper::new(&mf).expect("time keeper");
        assert!(tsc_is_invariant(), "these tests need an invariant TSC");
        assert!(tk.wait_valid(Duration::from_secs(5)), "page never valid");
        tk
    }

    fn host_ns(clock: i32) -> i64 {
        ns_of(&crate::host::clock_gettime(clock).expect("host clock"))
    }

    fn ours_ns(tk: &TimeKeeper, clock: i32) -> i64 {
        ns_of(
            &tk.now(clock)
                .unwrap_or_else(|| panic!("clock {clock} traps")),
        )
    }

    /// How far `clock` read from the page lies outside the host readings
    /// around it (0 if inside), in nanoseconds.
    fn error_ns(tk: &TimeKeeper, clock: i32) -> i64 {
        let before = host_ns(clock);
        let ours = ours_ns(tk, clock);
        let after = host_ns(clock);
        if ours < before {
            ours - before
        } else if ours > after {
            ours - after
        } else {
            0
        }
    }

    #[test]
    fn page_tracks_the_host_clocks() {
        let tk = keeper();
        let clocks = [
            libc::CLOCK_REALTIME,
            libc::CLOCK_MONOTONIC,
            libc::CLOCK_MONOTONIC_RAW,
            libc::CLOCK_BOOTTIME,
            libc::CLOCK_TAI,
        ];
        // Across calibration, the quick early refreshes and a settled one.
        let (mut worst, mut worst_mid) = (0i64, 0i64);
        let start = Instant::now();
        while start.elapsed() < REFRESH * 3 {
            for clock in clocks {
                let e = error_ns(&tk, clock);
                worst = worst.max(e.abs());
                assert!(e.abs() < 20_000, "clock {clock} off by {e} ns");
                let before = host_ns(clock);
                let ours = ours_ns(&tk, clock);
                let after = host_ns(clock);
                worst_mid = worst_mid.max((ours - (before + (after - before) / 2)).abs());
            }
            std::thread::sleep(Duration::from_millis(3));
        }
        eprintln!(
            "against the host clocks: worst {worst} ns outside the readings around, \
             {worst_mid} ns from their midpoint"
        );
        // The coarse clocks read the same as the fine ones here.
        let coarse = ours_ns(&tk, libc::CLOCK_MONOTONIC_COARSE);
        let fine = ours_ns(&tk, MONOTONIC);
        assert!((0..1_000_000).contains(&(fine - coarse)));
    }

    #[test]
    fn unknown_and_cpu_time_clocks_trap() {
        let tk = keeper();
        for clock in [
            libc::CLOCK_PROCESS_CPUTIME_ID,
            libc::CLOCK_THREAD_CPUTIME_ID,
            libc::CLOCK_REALTIME_ALARM,
            12,
            -1,
            -6,
            i32::MAX,
        ] {
            assert_eq!(tk.now(clock), None, "clock {clock}");
        }
    }

    #[test]
    fn without_an_invariant_tsc_the_page_stays_invalid() {
        let mf = Arc::new(MemoryFile::new().expect("memory file"));
        let tk = TimeKeeper::with_tsc(&mf, false).expect("time keeper");
        assert!(!tk.wait_valid(CALIBRATION * 4));
        tk.refresh(REFRESH);
        assert!(!tk.is_valid());
        assert_eq!(tk.now(MONOTONIC), None);
        assert_eq!(tk.page().seq.load(Ordering::Relaxed), 0);
    }

    /// A reader thread checks that each reading is no earlier than the last
    /// while refreshes keep landing, some with the clock ahead of the host
    /// (and being slewed back).
    #[test]
    fn refreshes_never_move_clocks_back() {
        let tk = Arc::new(keeper());
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reads = Arc::new(AtomicU64::new(0));
        let reader = {
            let (tk, done, reads) = (tk.clone(), done.clone(), reads.clone());
            std::thread::spawn(move || {
                let mut last = [0i64; 2];
                while !done.load(Ordering::Relaxed) {
                    for (i, clock) in [MONOTONIC, libc::CLOCK_MONOTONIC_RAW]
                        .into_iter()
                        .enumerate()
                    {
                        let now = ours_ns(&tk, clock);
                        assert!(now >= last[i], "clock {clock}: {now} after {}", last[i]);
                        last[i] = now;
                    }
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        while reads.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
        let interval = Duration::from_millis(1);
        for skew in [0, 40_000, 0, 10_000_000] {
            tk.skew(skew);
            for _ in 0..200 {
                tk.refresh(interval);
                let before = ours_ns(&tk, MONOTONIC);
                tk.refresh(interval);
                assert!(ours_ns(&tk, MONOTONIC) >= before);
            }
        }
        done.store(true, Ordering::Relaxed);
        reader.join().expect("reader");
        eprintln!(
            "{} reads across the refreshes",
            reads.load(Ordering::Relaxed)
        );
    }

    #[test]
    fn a_clock_ahead_is_slewed_back_to_the_host() {
        let tk = keeper();
        tk.skew(100_000);
        tk.refresh(Duration::from_millis(10));
        let ahead = error_ns(&tk, MONOTONIC);
        assert!(ahead > 90_000, "{ahead}");
        // 100 µs at 500 ppm takes 200 ms of slewing.
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(400) {
            tk.refresh(Duration::from_millis(10));
            std::thread::sleep(Duration::from_millis(10));
        }
        let e = error_ns(&tk, MONOTONIC);
        assert!(e.abs() < 20_000, "still off by {e} ns");
        // Realtime follows monotonic.
        assert!(error_ns(&tk, REALTIME).abs() < 20_000);
    }

    #[test]
    fn a_clock_far_behind_is_stepped_forward() {
        let tk = keeper();
        let before = ours_ns(&tk, MONOTONIC);
        // As if the page had gone stale for 10 ms.
        tk.skew(-10_000_000);
        tk.refresh(REFRESH);
        let after = ours_ns(&tk, MONOTONIC);
        // The skew itself moved the clock back, so the step need only make
        // up for it, give or take the page's error from before the skew.
        assert!(after + 5_000 >= before, "{after} < {before}");
        assert!(error_ns(&tk, MONOTONIC).abs() < 20_000);
    }

    #[test]
    fn offsets_keep_their_meaning() {
        let tk = keeper();
        let mono = ours_ns(&tk, MONOTONIC);
        let boot = ours_ns(&tk, libc::CLOCK_BOOTTIME);
        let real = ours_ns(&tk, REALTIME);
        let tai = ours_ns(&tk, libc::CLOCK_TAI);
        assert!(boot >= mono);
        assert!(real > 1_600_000_000 * NSEC_PER_SEC, "realtime {real}");
        // TAI is realtime plus whole seconds (read a moment later here).
        let frac = (tai - real).rem_euclid(NSEC_PER_SEC);
        assert!(frac < 1_000_000, "TAI - realtime = {} ns", tai - real);
    }
}
