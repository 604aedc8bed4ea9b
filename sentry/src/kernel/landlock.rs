//! Landlock (landlock(7)), ABI 7, held by the Sentry: a thread's domain of
//! stacked layers, checked at each file, TCP, signal and abstract-socket
//! operation; the host kernel is never asked.
//!
//! A rule holds at its file's place (the names from the sandbox's root)
//! while the file there is the same (`dev`, `ino`): a file moved away loses
//! it, one moved in does not gain it, another bind mount is not covered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use abi::landlock::access::*;
use abi::Errno;

use crate::sync::Locked;
use crate::vfs::file::FileImpl;
use crate::vfs::{Location, Node};

/// The ABI version this Sentry offers.
pub const ABI: u64 = 7;
/// Every scope of [`ABI`].
pub const ALL_SCOPES: u64 =
    abi::landlock::scope::ABSTRACT_UNIX_SOCKET | abi::landlock::scope::SIGNAL;
/// Every network right of [`ABI`].
pub const ALL_NET: u64 = abi::landlock::net::BIND_TCP | abi::landlock::net::CONNECT_TCP;
/// Every file-system right of [`ABI`].
pub const ALL_FS: u64 = (IOCTL_DEV << 1) - 1;
/// The rights a rule on a file that is not a directory may hold.
pub const FILE_RIGHTS: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
/// Layers one thread may stack (Linux's `LANDLOCK_MAX_NUM_LAYERS`).
const MAX_LAYERS: usize = 16;
/// Rules one ruleset may hold. Linux's bound is the memory its cgroup
/// allows; the Sentry's own memory is no guest's to fill, so a ruleset
/// past this many (far more than any policy names) gets `ENOMEM`.
const MAX_RULES: usize = 1 << 14;

/// Rules by place: each level is one name below its parent.
#[derive(Clone, Debug, Default)]
struct Tree {
    /// rules on the file at this place: its identity, the rights
    rules: Vec<((u64, u64), u64)>,
    children: HashMap<Vec<u8>, Tree>,
}

impl Tree {
    /// The rights the rules along `loc` grant.
    fn granted(&self, loc: &Location) -> u64 {
        let mut at = self;
        let mut got = 0;
        for (i, (name, node)) in loc.steps().enumerate() {
            if i > 0 {
                match at.children.get(name) {
                    Some(t) => at = t,
                    None => break,
                }
            }
            if !at.rules.is_empty() {
                if let Ok(id) = identity(node) {
                    got |= at
                        .rules
                        .iter()
                        .filter(|(rid, _)| *rid == id)
                        .fold(0, |a, (_, r)| a | r);
                }
            }
        }
        got
    }

    fn add(&mut self, loc: &Location, id: (u64, u64), rights: u64) {
        let mut at = self;
        for (name, _) in loc.steps().skip(1) {
            at = at.children.entry(name.to_vec()).or_default();
        }
        match at.rules.iter_mut().find(|(rid, _)| *rid == id) {
            Some((_, r)) => *r |= rights,
            None => at.rules.push((id, rights)),
        }
    }
}

fn identity(node: &Node) -> Result<(u64, u64), Errno> {
    let st = node.stat()?;
    Ok((st.dev, st.ino))
}

/// An open ruleset (`landlock_create_ruleset`), filled by
/// `landlock_add_rule`.
#[derive(Debug)]
pub struct Ruleset {
    handled: u64,
    handled_net: u64,
    scoped: u64,
    rules: Mutex<Tree>,
    ports: Mutex<HashMap<u16, u64>>,
    /// path rules added so far (see [`MAX_RULES`])
    count: std::sync::atomic::AtomicUsize,
}

impl FileImpl for Ruleset {
    /// A file without a `poll` of its own: always ready (Linux's
    /// `DEFAULT_POLLMASK`).
    fn poll(&self, _caller: &dyn crate::vfs::file::Caller, _events: i16, _depth: u32) -> i16 {
        use abi::poll::{POLLIN, POLLOUT, POLLRDNORM, POLLWRNORM};
        POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM
    }

    fn link_name(&self) -> Option<Vec<u8>> {
        Some(b"anon_inode:[landlock-ruleset]".to_vec())
    }
}

impl Ruleset {
    /// A ruleset handling file rights `handled` (within [`ALL_FS`]),
    /// network rights `handled_net` (within [`ALL_NET`]) and scopes
    /// `scoped` (within [`ALL_SCOPES`]), not all none.
    pub fn new(handled: u64, handled_net: u64, scoped: u64) -> Ruleset {
        Ruleset {
            handled,
            handled_net,
            scoped,
            rules: Mutex::default(),
            ports: Mutex::default(),
            count: Default::default(),
        }
    }

    /// The file rights it handles.
    pub fn handled(&self) -> u64 {
        self.handled
    }

    /// The network rights it handles.
    pub fn handled_net(&self) -> u64 {
        self.handled_net
    }

    /// `LANDLOCK_RULE_NET_PORT`: `rights` (nonzero, handled) for `port`.
    pub fn add_port(&self, port: u16, rights: u64) {
        *self.ports.locked().entry(port).or_default() |= rights;
    }

    /// `LANDLOCK_RULE_PATH_BENEATH`: `rights` (nonzero, handled) beneath
    /// `loc`; a file that is not a directory takes only file rights.
    pub fn add_path(&self, loc: &Location, rights: u64) -> Result<(), Errno> {
        if !loc.node().is_dir() && rights & !FILE_RIGHTS != 0 {
            return Err(Errno::EINVAL);
        }
        let id = identity(loc.node())?;
        let n = self
            .count
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n >= MAX_RULES {
            self.count
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            return Err(Errno::ENOMEM);
        }
        self.rules.locked().add(loc, id, rights);
        Ok(())
    }
}

#[derive(Debug)]
struct Layer {
    /// rights this layer denies unless a rule allows them ([`REFER`]
    /// among them whenever it handles any file right: reparenting then
    /// needs a rule)
    handled: u64,
    rules: Tree,
    /// network rights it denies unless a port rule allows them
    handled_net: u64,
    ports: HashMap<u16, u64>,
    /// what it scopes to the domain (`abi::landlock::scope`)
    scoped: u64,
}

impl Layer {
    /// The handled rights granted at `loc`, with every unhandled one.
    fn allowed(&self, loc: &Location) -> u64 {
        self.rules.granted(loc) | !self.handled
    }
}

/// A thread's Landlock domain: the layers it enforced, oldest first.
#[derive(Debug)]
pub struct Domain {
    /// shared with the domains made from this one: a layer's identity
    /// says which domains descend from where it was enforced
    layers: Vec<Arc<Layer>>,
    /// the domain this one was made from (its threads' ancestors'), for
    /// ptrace's sub-domain check
    parent: Option<Arc<Domain>>,
}

/// The `MAKE_*` right for a file of mode `mode`; `None` for no file type.
pub fn make_right(mode: u32) -> Option<u64> {
    Some(match mode & abi::S_IFMT {
        0 | abi::S_IFREG => MAKE_REG,
        abi::S_IFDIR => MAKE_DIR,
        abi::S_IFLNK => MAKE_SYM,
        abi::S_IFCHR => MAKE_CHAR,
        abi::S_IFBLK => MAKE_BLOCK,
        abi::S_IFIFO => MAKE_FIFO,
        abi::S_IFSOCK => MAKE_SOCK,
        _ => return None,
    })
}

/// The `REMOVE_*` right for a file of mode `mode`.
pub fn remove_right(mode: u32) -> u64 {
    if mode & abi::S_IFMT == abi::S_IFDIR {
        REMOVE_DIR
    } else {
        REMOVE_FILE
    }
}

/// One side of a rename or link: the directory, and the mode of the file
/// that leaves it (rename), arrives in it, or is replaced in it.
pub struct Move<'a> {
    /// the directory the file leaves
    pub from: &'a Location,
    /// the directory it arrives in
    pub to: &'a Location,
    /// its mode
    pub mode: u32,
    /// a rename (the file leaves `from`), not a link
    pub rename: bool,
    /// the mode of the file at the destination, replaced or exchanged
    pub target: Option<u32>,
    /// `RENAME_EXCHANGE`: the target moves to `from`
    pub exchange: bool,
}

impl Domain {
    /// The domain of a thread in `parent` after it enforces `ruleset`;
    /// `E2BIG` past [`MAX_LAYERS`].
    pub fn restrict(parent: Option<&Arc<Domain>>, ruleset: &Ruleset) -> Result<Domain, Errno> {
        let mut layers = Vec::new();
        if let Some(p) = parent {
            if p.layers.len() >= MAX_LAYERS {
                return Err(Errno::E2BIG);
            }
            layers.extend(p.layers.iter().cloned());
        }
        // A layer of network rights alone leaves files alone, renames too.
        let handled = match ruleset.handled {
            0 => 0,
            fs => fs | REFER,
        };
        layers.push(Arc::new(Layer {
            handled,
            rules: ruleset.rules.locked().clone(),
            handled_net: ruleset.handled_net,
            ports: ruleset.ports.locked().clone(),
            scoped: ruleset.scoped,
        }));
        Ok(Domain {
            layers,
            parent: parent.cloned(),
        })
    }

    /// Whether every layer allows `want` at `loc`.
    pub fn allows(&self, loc: &Location, want: u64) -> bool {
        want == 0 || self.layers.iter().all(|l| l.allowed(loc) & want == want)
    }

    /// A TCP `bind` (`want` = `BIND_TCP`) or `connect` (`CONNECT_TCP`) to
    /// `port`: `EACCES` unless every layer handling it has a rule for it.
    pub fn check_port(&self, want: u64, port: u16) -> Result<(), Errno> {
        let denied = self.layers.iter().any(|l| {
            l.handled_net & want != 0 && l.ports.get(&port).copied().unwrap_or(0) & want == 0
        });
        if denied {
            Err(Errno::EACCES)
        } else {
            Ok(())
        }
    }

    /// Whether `scope` keeps this domain's threads from reaching a thread
    /// (or socket maker) in `other`: the youngest layer scoping it must be
    /// one of `other`'s too, so `other` is this domain or nested in it
    /// from that layer on (Linux's domain_is_scoped()).
    pub fn scoped_out(&self, scope: u64, other: Option<&Arc<Domain>>) -> bool {
        let Some(mine) = self.layers.iter().rev().find(|l| l.scoped & scope != 0) else {
            return false;
        };
        !other.is_some_and(|o| o.layers.iter().any(|l| Arc::ptr_eq(l, mine)))
    }

    /// The rights among `asked` that some layer denies at `loc`.
    pub fn denied(&self, loc: &Location, asked: u64) -> u64 {
        self.layers
            .iter()
            .fold(0, |d, l| d | (asked & !l.allowed(loc)))
    }

    /// [`Domain::allows`], as `EACCES`.
    pub fn check(&self, loc: &Location, want: u64) -> Result<(), Errno> {
        if self.allows(loc, want) {
            Ok(())
        } else {
            Err(Errno::EACCES)
        }
    }

    /// A rename or link (landlock(7), `LANDLOCK_ACCESS_FS_REFER`): the
    /// directories' `MAKE_*` and `REMOVE_*` rights (`EACCES`), then, when
    /// the file changes directory, `REFER` on both sides and no right
    /// gained by the move (`EXDEV`).
    pub fn check_move(&self, m: &Move<'_>) -> Result<(), Errno> {
        let make = make_right(m.mode).ok_or(Errno::EACCES)?;
        let mut to_want = make;
        let mut from_want = if m.rename { remove_right(m.mode) } else { 0 };
        if let Some(t) = m.target {
            to_want |= remove_right(t);
            if m.exchange {
                from_want |= make_right(t).ok_or(Errno::EACCES)?;
            }
        }
        self.check(m.to, to_want)?;
        self.check(m.from, from_want)?;
        if m.from.same_place(m.to) {
            return Ok(());
        }
        let covers = |mode: u32| {
            if mode & abi::S_IFMT == abi::S_IFDIR {
                ALL_FS
            } else {
                FILE_RIGHTS
            }
        };
        for l in &self.layers {
            let (at_from, at_to) = (l.allowed(m.from), l.allowed(m.to));
            if at_from & at_to & REFER == 0 {
                return Err(Errno::EXDEV);
            }
            // The file may not get more in its new place than it had.
            let gained = |from: u64, to: u64, mode: u32| to & !from & l.handled & covers(mode) != 0;
            if gained(at_from, at_to, m.mode) {
                return Err(Errno::EXDEV);
            }
            if let (Some(t), true) = (m.target, m.exchange) {
                if gained(at_to, at_from, t) {
                    return Err(Errno::EXDEV);
                }
            }
        }
        Ok(())
    }

    /// Whether `self` is `other` or one of its ancestors: a tracer in
    /// `self` may trace a thread in `other`.
    pub fn is_ancestor_of(self: &Arc<Domain>, other: Option<&Arc<Domain>>) -> bool {
        let mut at = other;
        while let Some(d) = at {
            if Arc::ptr_eq(self, d) {
                return true;
            }
            at = d.parent.as_ref();
        }
        false
    }

    /// Layers enforced.
    pub fn depth(&self) -> usize {
        self.layers.len()
    }
}

/// The `ioctl`s `IOCTL_DEV` never denies: those about the descriptor or
/// the file system rather than the device (is_masked_device_ioctl()).
pub fn ioctl_always_allowed(cmd: u32) -> bool {
    matches!(
        cmd,
        0x5451 // FIOCLEX
            | 0x5450 // FIONCLEX
            | 0x5421 // FIONBIO
            | 0x5452 // FIOASYNC
            | 0x5460 // FIOQSIZE
            | 0xc004_5877 // FIFREEZE
            | 0xc004_5878 // FITHAW
            | 0xc020_660b // FS_IOC_FIEMAP
            | 2 // FIGETBSZ
            | 0x4004_9409 // FICLONE
            | 0x4020_940d // FICLONERANGE
            | 0xc018_9436 // FIDEDUPERANGE
            | 0x8011_1500 // FS_IOC_GETFSUUID
            | 0x8081_1501 // FS_IOC_GETFSSYSFSPATH
    )
}

/// The rights an `open` with access mode `acc` (0, 1, 2) and `O_TRUNC`
/// (`trunc`, of a file that existed) needs of a file or directory.
pub fn open_rights(is_dir: bool, acc: u32, trunc: bool) -> u64 {
    if is_dir {
        return READ_DIR;
    }
    let mut want = match acc {
        0 => READ_FILE,
        1 => WRITE_FILE,
        _ => READ_FILE | WRITE_FILE,
    };
    if trunc {
        want |= TRUNCATE;
    }
    want
}
