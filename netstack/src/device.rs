//! The link under the smoltcp interface: a loopback queue in `Loopback`
//! mode. Every packet the interface transmits comes back as received.
//!
//! The device also implements the part of `listen(2)`'s backlog that smoltcp
//! lacks: smoltcp answers a SYN for which no socket is listening with a RST,
//! but Linux drops a SYN when the listener's queue is full, so the client
//! retries. A *SYN gate* per listening port says how many new SYNs may pass
//! in this poll round; a SYN over that budget is held for the next round
//! (when the stack has added listening sockets) or dropped when the backlog
//! is full.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};

use smoltcp::phy::{self, ChecksumCapabilities, DeviceCapabilities, Medium};
use smoltcp::time::Instant;

/// Largest IP packet on the loopback link. 65535 is the most an IPv4 total
/// length can say; Linux's `lo` uses 65536. Large packets mean few trips
/// through the TCP state machine per megabyte.
pub(crate) const LOOPBACK_MTU: usize = 65535;

/// Bytes of packets that may wait in the loopback queue. Each poll round
/// transmits at most one packet per socket, and the stack drains the queue
/// every round, so this only bounds a pathological round.
const MAX_QUEUED_BYTES: usize = 16 << 20;

/// Buffers kept for reuse.
const POOL_SIZE: usize = 64;

/// How many new connections may reach a listening port this round.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SynGate {
    /// SYNs that may pass before the next round.
    pub budget: usize,
    /// The backlog is full: SYNs over budget are dropped, not held.
    pub full: bool,
}

#[derive(Default)]
struct Queues {
    rx: VecDeque<Vec<u8>>,
    queued_bytes: usize,
    pool: Vec<Vec<u8>>,
}

impl Queues {
    fn recycle(&mut self, buf: Vec<u8>) {
        if self.pool.len() < POOL_SIZE {
            self.pool.push(buf);
        }
    }
}

/// The loopback link.
pub(crate) struct Loopback {
    queues: RefCell<Queues>,
    /// SYNs held back for the next round.
    deferred: VecDeque<Vec<u8>>,
    /// Packets that may still be received in this round: only those queued
    /// before it started, so replies wait for the next round and a round is
    /// bounded.
    rx_budget: usize,
    /// Packets handed to the interface in this round.
    pub delivered: usize,
    /// SYN gates by destination port, set by the stack before each round.
    pub gates: HashMap<u16, SynGate>,
}

impl Loopback {
    pub(crate) fn new() -> Loopback {
        Loopback {
            queues: RefCell::default(),
            deferred: VecDeque::new(),
            rx_budget: 0,
            delivered: 0,
            gates: HashMap::new(),
        }
    }

    /// Starts a poll round: held SYNs go first, then what is queued.
    pub(crate) fn start_round(&mut self) {
        let q = self.queues.get_mut();
        while let Some(p) = self.deferred.pop_back() {
            q.queued_bytes += p.len();
            q.rx.push_front(p);
        }
        self.rx_budget = q.rx.len();
        self.delivered = 0;
    }

    /// Queues `packet` as received from the link (a datagram the UDP relay
    /// brought back from outside). Dropped, as a full link drops it, when
    /// the queue is at its bound; returns whether it was queued.
    pub(crate) fn inject(&mut self, packet: Vec<u8>) -> bool {
        let q = self.queues.get_mut();
        if q.queued_bytes.saturating_add(packet.len()) > MAX_QUEUED_BYTES {
            return false;
        }
        q.queued_bytes += packet.len();
        q.rx.push_back(packet);
        true
    }

    /// Whether packets are waiting.
    pub(crate) fn has_pending(&self) -> bool {
        !self.queues.borrow().rx.is_empty() || !self.deferred.is_empty()
    }
}

/// The destination port of a TCP segment that opens a connection (SYN
/// without ACK), if `packet` is one.
pub(crate) fn syn_dst_port(packet: &[u8]) -> Option<u16> {
    let version = packet.first()? >> 4;
    let tcp = match version {
        4 => {
            let ihl = usize::from(packet.first()? & 0x0f) * 4;
            let proto = *packet.get(9)?;
            // Only the first fragment carries the TCP header.
            let frag = u16::from_be_bytes([*packet.get(6)?, *packet.get(7)?]) & 0x1fff;
            if proto != 6 || frag != 0 || ihl < 20 {
                return None;
            }
            packet.get(ihl..)?
        }
        6 => {
            if *packet.get(6)? != 6 {
                return None;
            }
            packet.get(40..)?
        }
        _ => return None,
    };
    let flags = *tcp.get(13)?;
    const SYN: u8 = 0x02;
    const ACK: u8 = 0x10;
    if flags & SYN != 0 && flags & ACK == 0 {
        Some(u16::from_be_bytes([*tcp.get(2)?, *tcp.get(3)?]))
    } else {
        None
    }
}

pub(crate) struct RxToken<'a> {
    buf: Vec<u8>,
    queues: &'a RefCell<Queues>,
}

pub(crate) struct TxToken<'a> {
    queues: &'a RefCell<Queues>,
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        let r = f(&self.buf);
        self.queues.borrow_mut().recycle(self.buf);
        r
    }
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        let mut buf = self.queues.borrow_mut().pool.pop().unwrap_or_default();
        // Only the grown part is zeroed; pooled buffers keep their length.
        buf.resize(len, 0);
        let r = f(&mut buf);
        let mut q = self.queues.borrow_mut();
        q.queued_bytes += buf.len();
        q.rx.push_back(buf);
        r
    }
}

impl phy::Device for Loopback {
    type RxToken<'a> = RxToken<'a>;
    type TxToken<'a> = TxToken<'a>;

    fn receive(&mut self, _now: Instant) -> Option<(RxToken<'_>, TxToken<'_>)> {
        loop {
            if self.rx_budget == 0 {
                return None;
            }
            self.rx_budget -= 1;
            let q = self.queues.get_mut();
            let buf = q.rx.pop_front()?;
            q.queued_bytes -= buf.len();
            if let Some(port) = syn_dst_port(&buf) {
                if let Some(gate) = self.gates.get_mut(&port) {
                    if gate.budget == 0 {
                        if gate.full {
                            tracing::trace!(port, "backlog full: SYN dropped");
                            q.recycle(buf);
                        } else {
                            self.deferred.push_back(buf);
                        }
                        continue;
                    }
                    gate.budget -= 1;
                }
            }
            self.delivered += 1;
            return Some((
                RxToken {
                    buf,
                    queues: &self.queues,
                },
                TxToken {
                    queues: &self.queues,
                },
            ));
        }
    }

    fn transmit(&mut self, _now: Instant) -> Option<TxToken<'_>> {
        if self.queues.get_mut().queued_bytes >= MAX_QUEUED_BYTES {
            return None;
        }
        Some(TxToken {
            queues: &self.queues,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ip;
        caps.max_transmission_unit = LOOPBACK_MTU;
        // Packets never leave memory: checksums would only cost time. (A
        // TAP link will keep smoltcp's defaults.)
        caps.checksum = ChecksumCapabilities::ignored();
        caps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syn_detection() {
        let mut v4 = vec![0u8; 40];
        v4[0] = 0x45;
        v4[9] = 6;
        v4[22] = 0x1f;
        v4[23] = 0x90; // port 8080
        v4[33] = 0x02; // SYN
        assert_eq!(syn_dst_port(&v4), Some(8080));
        v4[33] = 0x12; // SYN|ACK
        assert_eq!(syn_dst_port(&v4), None);
        let mut v6 = vec![0u8; 60];
        v6[0] = 0x60;
        v6[6] = 6;
        v6[42] = 0;
        v6[43] = 80;
        v6[53] = 0x02;
        assert_eq!(syn_dst_port(&v6), Some(80));
        // Truncated and garbage input never panics.
        for n in 0..v6.len() {
            let _ = syn_dst_port(&v6[..n]);
            let _ = syn_dst_port(&v4[..n.min(v4.len())]);
        }
        assert_eq!(syn_dst_port(&[0x4f; 3]), None);
    }
}
