//! Criterion benchmarks comparing the sandbox with native runs.
