//! Guest buffers moved through the Sentry in bounded pieces: whatever length
//! a guest passes to `write`, `sendmsg` or `read`, the Sentry stages at most
//! [`IO_CHUNK`] bytes of it at a time (ARCHITECTURE.md, "Limits that hold at
//! any size"), so a 1 GiB `write` of mapped memory costs the Sentry 64 KiB.

use crate::mm::guestmem::{copy_from_slices_at, copy_to_slices_at};
use crate::mm::GuestSlice;

/// Most bytes of one guest transfer the Sentry holds at once. 64 KiB is a
/// pipe's capacity and a loopback packet's size: large enough that the cost
/// per piece vanishes, small enough that many threads transferring at once
/// stay cheap.
pub const IO_CHUNK: usize = 64 << 10;

/// Largest datagram an Internet socket sends: IP's 16-bit length. Linux's
/// `udp_sendmsg`, `raw_sendmsg` and `ping_sendmsg` answer `EMSGSIZE` above
/// it before looking at anything else, so the message is refused before the
/// Sentry copies it.
pub const MAX_INET_DATAGRAM: usize = 0xffff;

/// How much of a send of `len` bytes an Internet socket takes at once: a
/// stream's in [`IO_CHUNK`] pieces, a datagram whole (`EMSGSIZE` above
/// [`MAX_INET_DATAGRAM`], checked before any byte is copied, as Linux's
/// `udp_sendmsg` does).
pub fn inet_send_piece(stream: bool, len: usize) -> Result<usize, abi::Errno> {
    if stream {
        Ok(IO_CHUNK)
    } else if len > MAX_INET_DATAGRAM {
        Err(abi::Errno::EMSGSIZE)
    } else {
        Ok(len)
    }
}

/// Bytes a write takes its data from: Sentry memory or guest buffers.
pub trait ByteSource {
    /// Total length.
    fn len(&self) -> usize;
    /// Whether there is nothing to copy.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies from `off` bytes in into `out`; returns the count copied
    /// (short at the end).
    fn copy_at(&self, off: usize, out: &mut [u8]) -> usize;
}

impl ByteSource for [u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }

    fn copy_at(&self, off: usize, out: &mut [u8]) -> usize {
        let src = self.get(off..).unwrap_or_default();
        let n = src.len().min(out.len());
        out[..n].copy_from_slice(&src[..n]);
        n
    }
}

/// Guest buffers (one range, or an iovec's) seen as one sequence of bytes.
#[derive(Clone, Copy, Debug)]
pub struct GuestBufs<'a> {
    bufs: &'a [GuestSlice],
    len: usize,
}

impl<'a> GuestBufs<'a> {
    /// The buffers, in order.
    pub fn new(bufs: &'a [GuestSlice]) -> Self {
        let len = bufs.iter().map(|b| b.len()).sum();
        GuestBufs { bufs, len }
    }

    /// The slices themselves.
    pub fn slices(&self) -> &'a [GuestSlice] {
        self.bufs
    }

    /// Copies `data` into the buffers from `off` bytes in; returns the count
    /// copied (short at the end).
    pub fn write_at(&self, off: usize, data: &[u8]) -> usize {
        copy_to_slices_at(self.bufs, off, data)
    }
}

impl ByteSource for GuestBufs<'_> {
    fn len(&self) -> usize {
        self.len
    }

    fn copy_at(&self, off: usize, out: &mut [u8]) -> usize {
        copy_from_slices_at(self.bufs, off, out)
    }
}

/// A Sentry buffer that a source is staged through, piece by piece; reused
/// so that a long transfer allocates once.
#[derive(Debug, Default)]
pub struct Stage {
    buf: Vec<u8>,
}

impl Stage {
    /// An empty stage (it allocates on first use).
    pub fn new() -> Self {
        Stage::default()
    }

    /// Bytes `[off, off + max)` of `src`, cut at its end. The caller bounds
    /// `max` ([`IO_CHUNK`], or a message size it has checked).
    pub fn load<S: ByteSource + ?Sized>(&mut self, src: &S, off: usize, max: usize) -> &[u8] {
        let n = max.min(src.len().saturating_sub(off));
        if self.buf.len() < n {
            self.buf.resize(n, 0);
        }
        let got = src.copy_at(off, &mut self.buf[..n]);
        &self.buf[..got]
    }

    /// A zeroed buffer of `n` bytes to receive into (`n` bounded by the
    /// caller, as for [`Stage::load`]).
    pub fn space(&mut self, n: usize) -> &mut [u8] {
        if self.buf.len() < n {
            self.buf.resize(n, 0);
        }
        &mut self.buf[..n]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slices(parts: &mut [Vec<u8>]) -> Vec<GuestSlice> {
        parts
            .iter_mut()
            // SAFETY: each test keeps `parts` alive, and leaves it alone,
            // while it uses the slices.
            .map(|p| unsafe { GuestSlice::new(p.as_mut_ptr(), p.len()) })
            .collect()
    }

    #[test]
    fn staging_walks_across_slices_in_bounded_pieces() {
        let mut parts = vec![vec![1u8; 3], vec![2u8; 5], vec![3u8; 4]];
        let s = slices(&mut parts);
        let src = GuestBufs::new(&s);
        assert_eq!(ByteSource::len(&src), 12);
        let mut st = Stage::new();
        let mut seen = Vec::new();
        let mut off = 0;
        while off < src.len() {
            let piece = st.load(&src, off, 5).to_vec();
            assert!(piece.len() <= 5 && !piece.is_empty());
            off += piece.len();
            seen.extend(piece);
        }
        assert_eq!(seen, [1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3]);
        assert!(st.load(&src, 12, 5).is_empty());
        assert!(st.load(&src, 99, 5).is_empty());
    }

    #[test]
    fn writing_at_an_offset_fills_the_right_slices() {
        let mut parts = vec![vec![0u8; 2], vec![0u8; 3]];
        let s = slices(&mut parts);
        let dst = GuestBufs::new(&s);
        assert_eq!(dst.write_at(1, &[7, 8, 9]), 3);
        assert_eq!(dst.write_at(4, &[5, 6]), 1);
        assert_eq!(dst.write_at(5, &[1]), 0);
        assert_eq!(parts, [vec![0, 7], vec![8, 9, 5]]);
    }

    #[test]
    fn a_byte_slice_is_a_source() {
        let data = [1u8, 2, 3, 4];
        let mut st = Stage::new();
        assert_eq!(st.load(&data[..], 1, 2), &[2, 3]);
        assert_eq!(st.load(&data[..], 3, 9), &[4]);
    }
}
