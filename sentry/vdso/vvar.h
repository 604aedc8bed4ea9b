/*
 * The time page ("vvar") the Sentry publishes and every guest maps read-only
 * one page below the vDSO image. src/vdso_time.rs writes it; its `TimePage`
 * has the same layout (a unit test there runs this code against it).
 *
 * Every field is a 64-bit word. The Sentry updates the page under a seqlock:
 * `seq` is odd while an update is in progress and changes with each update,
 * so a reader that sees the same even `seq` before and after reading the
 * other fields has a consistent snapshot.
 *
 * For a clock id c (clock_gettime(2)) with clock[c].mult != 0, the time in
 * nanoseconds since that clock's epoch at TSC value tsc is
 *
 *     clock[c].base_ns + (((tsc - tsc_base) * clock[c].mult) >> shift)
 *
 * with the product taken in 128 bits, as long as 0 <= tsc - tsc_base <=
 * max_delta. Past max_delta (the Sentry stopped refreshing) or with
 * valid == 0 (no usable TSC, or not yet calibrated) the vDSO asks the Sentry.
 */
#ifndef FERROVISOR_VVAR_H
#define FERROVISOR_VVAR_H

/* Bytes between the start of the time page and the vDSO's ELF header. */
#define VVAR_SIZE 4096

/* Clock ids 0..11 of clock_gettime(2) have a slot each. */
#define VVAR_CLOCKS 12

struct vvar_clock {
	unsigned long base_ns;
	unsigned long mult;
};

struct vvar_page {
	unsigned long seq;
	unsigned long valid;
	unsigned long tsc_base;
	unsigned long max_delta;
	unsigned long shift;
	unsigned long reserved;
	struct vvar_clock clock[VVAR_CLOCKS];
};

#endif
