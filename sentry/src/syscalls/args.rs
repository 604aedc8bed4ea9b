//! Typed access to a system call's six argument registers, so that a
//! handler says what each argument is instead of casting raw registers.
//!
//! The narrowing is Linux's: its `SYSCALL_DEFINE` wrappers hand an `int`
//! argument the low 32 bits of its register, whatever the upper ones hold.

/// The argument registers of one system call, in ABI order (`rdi`, `rsi`,
/// `rdx`, `r10`, `r8`, `r9`).
pub type Args = [u64; 6];

/// What a register's bits become as a flags type's bits.
pub trait ArgBits: bitflags::Bits {
    /// `v` narrowed as C narrows it.
    fn from_arg(v: u64) -> Self;
}

impl ArgBits for u64 {
    #[inline]
    fn from_arg(v: u64) -> Self {
        v
    }
}

impl ArgBits for u32 {
    #[inline]
    fn from_arg(v: u64) -> Self {
        v as u32
    }
}

/// Argument `i` read as the C type the system call declares.
pub trait SyscallArgs {
    /// A file descriptor (`int`).
    fn fd(&self, i: usize) -> i32;
    /// A guest address (a pointer).
    fn ptr(&self, i: usize) -> u64;
    /// An `unsigned long` (or `u64`) value.
    fn u64(&self, i: usize) -> u64;
    /// A `long` (or `loff_t`) value.
    fn i64(&self, i: usize) -> i64;
    /// A `size_t`.
    fn usize(&self, i: usize) -> usize;
    /// An `int` (also `pid_t`, `key_t`, `clockid_t`).
    fn i32(&self, i: usize) -> i32;
    /// An `unsigned int` (also `uid_t`, `gid_t`, `mode_t`).
    fn u32(&self, i: usize) -> u32;
    /// Flags of type `T`, unknown bits kept (the handler decides whether
    /// they are `EINVAL`).
    fn flags<T: bitflags::Flags>(&self, i: usize) -> T
    where
        T::Bits: ArgBits;
}

impl SyscallArgs for Args {
    #[inline]
    fn fd(&self, i: usize) -> i32 {
        self[i] as i32
    }
    #[inline]
    fn ptr(&self, i: usize) -> u64 {
        self[i]
    }
    #[inline]
    fn u64(&self, i: usize) -> u64 {
        self[i]
    }
    #[inline]
    fn i64(&self, i: usize) -> i64 {
        self[i] as i64
    }
    #[inline]
    fn usize(&self, i: usize) -> usize {
        self[i] as usize
    }
    #[inline]
    fn i32(&self, i: usize) -> i32 {
        self[i] as i32
    }
    #[inline]
    fn u32(&self, i: usize) -> u32 {
        self[i] as u32
    }
    #[inline]
    fn flags<T: bitflags::Flags>(&self, i: usize) -> T
    where
        T::Bits: ArgBits,
    {
        T::from_bits_retain(T::Bits::from_arg(self[i]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrowing_keeps_the_low_bits_as_linux_does() {
        let a: Args = [0xffff_ffff_0000_0003, u64::MAX, 0x1_0000_0002, 7, 0, 0];
        assert_eq!(a.fd(0), 3);
        assert_eq!(a.i32(1), -1);
        assert_eq!(a.u32(2), 2);
        assert_eq!(a.i64(1), -1);
        assert_eq!(a.ptr(2), 0x1_0000_0002);
        assert_eq!(a.usize(3), 7);
        let f: abi::MapFlags = a.flags(2);
        assert_eq!(f.bits(), 0x1_0000_0002);
        let o: abi::OpenFlags = a.flags(2);
        assert_eq!(o.bits(), 2);
    }
}
