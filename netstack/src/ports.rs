//! The port table: who is bound where, bind conflicts, ephemeral ports.
//!
//! Conflict rules follow Linux (`inet_csk_bind_conflict`, socket(7)): two
//! bindings of one protocol and port conflict when their addresses overlap,
//! unless both set `SO_REUSEPORT`, or both set `SO_REUSEADDR` and neither
//! is a TCP listener. A wildcard address overlaps every address of its
//! family, and an IPv6 wildcard without `IPV6_V6ONLY` overlaps IPv4 too.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use abi::Errno;

use crate::policy::canonical;
use crate::SocketId;

/// The ephemeral range, Linux's default `ip_local_port_range`.
pub(crate) const EPHEMERAL: std::ops::RangeInclusive<u16> = 32768..=60999;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Proto {
    Tcp,
    Udp,
}

/// What addresses a binding covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    AllV4,
    AllV6,
    All,
    V4(Ipv4Addr),
    V6(Ipv6Addr),
}

impl Scope {
    /// The scope of a socket of family `v6` bound to `ip`.
    pub(crate) fn of(v6_socket: bool, v6only: bool, ip: IpAddr) -> Scope {
        match canonical(ip) {
            IpAddr::V4(a) if a.is_unspecified() => Scope::AllV4,
            IpAddr::V4(a) => Scope::V4(a),
            IpAddr::V6(a) if a.is_unspecified() => {
                if v6_socket && !v6only {
                    Scope::All
                } else {
                    Scope::AllV6
                }
            }
            IpAddr::V6(a) => Scope::V6(a),
        }
    }

    fn overlaps(self, other: Scope) -> bool {
        use Scope::*;
        match (self, other) {
            (All, _) | (_, All) => true,
            (AllV4, AllV4 | V4(_)) | (V4(_), AllV4) => true,
            (AllV6, AllV6 | V6(_)) | (V6(_), AllV6) => true,
            (V4(a), V4(b)) => a == b,
            (V6(a), V6(b)) => a == b,
            _ => false,
        }
    }
}

/// Who holds a binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    Socket(SocketId),
    /// A closed TCP connection still finishing its FIN exchange.
    Orphan(smoltcp::iface::SocketHandle),
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Binding {
    pub owner: Owner,
    pub scope: Scope,
    pub reuse_addr: bool,
    pub reuse_port: bool,
    pub listening: bool,
}

impl Binding {
    /// Whether `other`, the binding being added or made a listener, conflicts
    /// with `self`, an existing one. As Linux's `inet_bind_conflict`, only
    /// the existing socket's listening state counts for `SO_REUSEADDR`.
    fn conflicts(&self, other: &Binding, proto: Proto) -> bool {
        if self.owner == other.owner || !self.scope.overlaps(other.scope) {
            return false;
        }
        if self.reuse_port && other.reuse_port {
            return false;
        }
        if self.reuse_addr && other.reuse_addr {
            return proto == Proto::Tcp && self.listening;
        }
        true
    }
}

#[derive(Default)]
pub(crate) struct PortTable {
    map: HashMap<(Proto, u16), Vec<Binding>>,
    next_ephemeral: u16,
    /// `ip_local_port_range`
    range: (u16, u16),
}

impl PortTable {
    pub(crate) fn new(seed: u64) -> PortTable {
        let span = u64::from(EPHEMERAL.end() - EPHEMERAL.start()) + 1;
        PortTable {
            map: HashMap::new(),
            next_ephemeral: EPHEMERAL.start() + (seed % span) as u16,
            range: (*EPHEMERAL.start(), *EPHEMERAL.end()),
        }
    }

    /// The ephemeral range, both ends included.
    pub(crate) fn range(&self) -> (u16, u16) {
        self.range
    }

    /// Sets the ephemeral range (`lo <= hi`, checked by the caller).
    pub(crate) fn set_range(&mut self, lo: u16, hi: u16) {
        self.range = (lo, hi);
        if !(lo..=hi).contains(&self.next_ephemeral) {
            self.next_ephemeral = lo;
        }
    }

    /// Whether `b` could be added on `port` without a conflict.
    pub(crate) fn can_bind(&self, proto: Proto, port: u16, b: &Binding) -> bool {
        self.map
            .get(&(proto, port))
            .is_none_or(|v| !v.iter().any(|o| o.conflicts(b, proto)))
    }

    /// Adds `b` on `port`, or on a free ephemeral port when `port` is 0.
    /// Returns the port. Errors: `EADDRINUSE` on a conflict or when no
    /// ephemeral port is left (as Linux's bind(2) does).
    pub(crate) fn bind(&mut self, proto: Proto, port: u16, b: Binding) -> Result<u16, Errno> {
        let port = if port == 0 {
            self.ephemeral(proto).ok_or(Errno::EADDRINUSE)?
        } else {
            if !self.can_bind(proto, port, &b) {
                return Err(Errno::EADDRINUSE);
            }
            port
        };
        self.map.entry((proto, port)).or_default().push(b);
        Ok(port)
    }

    /// A port in the ephemeral range that nobody holds.
    fn ephemeral(&mut self, proto: Proto) -> Option<u16> {
        let (lo, hi) = self.range;
        let span = u32::from(hi - lo) + 1;
        for _ in 0..span {
            let p = self.next_ephemeral;
            self.next_ephemeral = if p >= hi { lo } else { p + 1 };
            if !self.map.contains_key(&(proto, p)) {
                return Some(p);
            }
        }
        None
    }

    pub(crate) fn remove(&mut self, proto: Proto, port: u16, owner: Owner) {
        if let Some(v) = self.map.get_mut(&(proto, port)) {
            v.retain(|b| b.owner != owner);
            if v.is_empty() {
                self.map.remove(&(proto, port));
            }
        }
    }

    /// Hands a binding to a new owner (a socket's port to its orphan).
    pub(crate) fn transfer(&mut self, proto: Proto, port: u16, from: Owner, to: Owner) {
        if let Some(v) = self.map.get_mut(&(proto, port)) {
            for b in v.iter_mut().filter(|b| b.owner == from) {
                b.owner = to;
                b.listening = false;
                // A dying connection never blocks a bind that asks for
                // SO_REUSEADDR (TIME_WAIT reuse, socket(7)).
                b.reuse_addr = true;
                b.reuse_port = false;
            }
        }
    }

    /// Marks the binding as a listener, re-checking conflicts as Linux's
    /// listen(2) does (two `SO_REUSEADDR` sockets may bind one port, but only
    /// one may listen on it).
    pub(crate) fn set_listening(
        &mut self,
        proto: Proto,
        port: u16,
        owner: Owner,
    ) -> Result<(), Errno> {
        let Some(v) = self.map.get_mut(&(proto, port)) else {
            return Err(Errno::EINVAL);
        };
        let Some(i) = v.iter().position(|b| b.owner == owner) else {
            return Err(Errno::EINVAL);
        };
        let mut me = v[i];
        me.listening = true;
        if v.iter().any(|o| o.conflicts(&me, proto)) {
            return Err(Errno::EADDRINUSE);
        }
        v[i] = me;
        Ok(())
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(id: u64, scope: Scope, reuse_addr: bool) -> Binding {
        Binding {
            owner: Owner::Socket(SocketId(id)),
            scope,
            reuse_addr,
            reuse_port: false,
            listening: false,
        }
    }

    #[test]
    fn conflicts_follow_linux() {
        let mut t = PortTable::new(0);
        let lo = Scope::V4(Ipv4Addr::LOCALHOST);
        assert_eq!(t.bind(Proto::Tcp, 80, b(1, Scope::AllV4, false)), Ok(80));
        assert_eq!(
            t.bind(Proto::Tcp, 80, b(2, lo, false)),
            Err(Errno::EADDRINUSE)
        );
        // Other protocol, other family (v6only): fine.
        assert_eq!(t.bind(Proto::Udp, 80, b(3, lo, false)), Ok(80));
        assert_eq!(t.bind(Proto::Tcp, 80, b(4, Scope::AllV6, false)), Ok(80));
        // Dual-stack wildcard overlaps the IPv4 wildcard.
        assert_eq!(
            t.bind(Proto::Tcp, 80, b(5, Scope::All, false)),
            Err(Errno::EADDRINUSE)
        );
        // SO_REUSEADDR on both, neither listening: allowed; then only one
        // may listen, and nobody may bind beside a listener.
        assert_eq!(t.bind(Proto::Tcp, 81, b(6, lo, true)), Ok(81));
        assert_eq!(t.bind(Proto::Tcp, 81, b(7, lo, true)), Ok(81));
        assert_eq!(
            t.set_listening(Proto::Tcp, 81, Owner::Socket(SocketId(6))),
            Ok(())
        );
        assert_eq!(
            t.set_listening(Proto::Tcp, 81, Owner::Socket(SocketId(7))),
            Err(Errno::EADDRINUSE)
        );
        assert_eq!(
            t.bind(Proto::Tcp, 81, b(8, lo, true)),
            Err(Errno::EADDRINUSE)
        );
    }

    #[test]
    fn ephemeral_exhaustion() {
        let mut t = PortTable::new(12345);
        let n = usize::from(EPHEMERAL.end() - EPHEMERAL.start()) + 1;
        for i in 0..n {
            let p = t
                .bind(Proto::Udp, 0, b(i as u64, Scope::AllV4, false))
                .expect("free port");
            assert!(EPHEMERAL.contains(&p));
        }
        assert_eq!(
            t.bind(Proto::Udp, 0, b(u64::MAX, Scope::AllV4, false)),
            Err(Errno::EADDRINUSE)
        );
        assert_eq!(t.len(), n);
    }

    #[test]
    fn a_narrowed_range_gives_only_its_ports() {
        let mut t = PortTable::new(777);
        t.set_range(40000, 40002);
        let mut got: Vec<u16> = (0..3)
            .map(|i| {
                t.bind(Proto::Tcp, 0, b(i, Scope::AllV4, false))
                    .expect("free")
            })
            .collect();
        got.sort_unstable();
        assert_eq!(got, [40000, 40001, 40002]);
        assert_eq!(
            t.bind(Proto::Tcp, 0, b(9, Scope::AllV4, false)),
            Err(Errno::EADDRINUSE)
        );
    }
}
