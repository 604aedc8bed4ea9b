//! Differential syscall tests: guest programs run natively and in the sandbox.
