//! Differential syscall tests: guest programs run natively and in the sandbox.
//!
//! `build.rs` compiles every `guests/*.c` into a static binary and lays out
//! the fixture tree the guests inspect; the harness in `tests/` runs each
//! guest twice (natively and under `ferrovisor do`) and compares stdout and
//! exit status. This library only tells where those artifacts are.
#![forbid(unsafe_code)]

/// Directory holding the compiled guest programs, one binary per `guests/*.c`.
pub const GUEST_DIR: &str = env!("SYSCALL_TESTS_GUEST_DIR");

/// Directory holding the fixture tree (files, directories, symlink loops,
/// scripts) made by the build script; guests have it compiled in.
pub const FIXTURES: &str = env!("SYSCALL_TESTS_FIXTURES");

/// Names of all compiled guests, sorted.
pub fn guest_names() -> Vec<&'static str> {
    env!("SYSCALL_TESTS_GUESTS")
        .split(',')
        .filter(|s| !s.is_empty())
        .collect()
}
