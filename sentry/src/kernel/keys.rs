//! Kernel keyrings (keyrings(7)): keys of the `user`, `logon` and
//! `keyring` types, the caller's thread, process and session keyrings, and
//! each user's user and user-session keyrings, with Linux's permission
//! bits and possession rule. There is no upcall: `request_key` finds only
//! what the caller's keyrings hold. Keys live in the Sentry's memory,
//! bounded for the whole sandbox (`EDQUOT` past the bound).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use abi::Errno;

use abi::keys::{perm, spec};

use crate::sync::Locked;

/// Most keys the sandbox holds, and most payload bytes.
const MAX_KEYS: usize = 65_536;
const MAX_BYTES: usize = 64 << 20;
/// Longest `user`/`logon` payload (`user_preparse`).
const MAX_USER_PAYLOAD: usize = 32_767;
/// How deep a search follows nested keyrings (`KEYRING_SEARCH_MAX_DEPTH`).
const MAX_DEPTH: usize = 6;

/// The key types the Sentry has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    User,
    Logon,
    Keyring,
}

impl KeyType {
    /// By name; `ENODEV` as Linux for a type it does not have.
    pub fn by_name(name: &[u8]) -> Option<KeyType> {
        match name {
            b"user" => Some(KeyType::User),
            b"logon" => Some(KeyType::Logon),
            b"keyring" => Some(KeyType::Keyring),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            KeyType::User => "user",
            KeyType::Logon => "logon",
            KeyType::Keyring => "keyring",
        }
    }

    /// Checks a new key's description and payload (each type's
    /// `vet_description` and `preparse`).
    fn check(self, desc: &[u8], payload: &[u8]) -> Result<(), Errno> {
        match self {
            KeyType::Keyring if !payload.is_empty() => Err(Errno::EINVAL),
            KeyType::Keyring => Ok(()),
            KeyType::Logon if desc.first() == Some(&b':') || !desc.contains(&b':') => {
                Err(Errno::EINVAL)
            }
            _ if payload.is_empty() || payload.len() > MAX_USER_PAYLOAD => Err(Errno::EINVAL),
            _ => Ok(()),
        }
    }
}

#[derive(Debug)]
struct Key {
    ty: KeyType,
    desc: Vec<u8>,
    uid: u32,
    gid: u32,
    perm: u32,
    /// a `user` or `logon` key's payload
    payload: Vec<u8>,
    /// a keyring's keys, in the order they were linked
    links: Vec<i32>,
    revoked: bool,
}

/// Who is asking: ids for the permission check, and the keyrings that
/// make keys possessed.
#[derive(Clone, Debug)]
pub struct Asker {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    pub thread: Option<i32>,
    pub process: Option<i32>,
    pub session: Option<i32>,
}

/// A task's own keyrings: the session keyring is inherited by children,
/// the process keyring shared by the threads of a process, the thread
/// keyring its own; `execve` drops the last two.
#[derive(Clone, Debug, Default)]
pub struct TaskKeyrings {
    pub session: Option<i32>,
    pub process: Arc<Mutex<Option<i32>>>,
    pub thread: Option<i32>,
}

impl TaskKeyrings {
    /// A child's (`thread`: `CLONE_THREAD`).
    pub fn for_child(&self, thread: bool) -> TaskKeyrings {
        TaskKeyrings {
            session: self.session,
            process: if thread {
                self.process.clone()
            } else {
                Arc::default()
            },
            thread: None,
        }
    }

    /// After `execve`.
    pub fn on_exec(&mut self) {
        self.process = Arc::default();
        self.thread = None;
    }
}

#[derive(Debug, Default)]
struct State {
    keys: HashMap<i32, Key>,
    next: i32,
    bytes: usize,
    /// each user's (user keyring, user-session keyring)
    per_user: BTreeMap<u32, (i32, i32)>,
}

/// The sandbox's keys.
#[derive(Debug, Default)]
pub struct Keys(Mutex<State>);

/// A key found for a call: its serial, and whether the caller possesses
/// it.
#[derive(Clone, Copy, Debug)]
pub struct Found {
    pub id: i32,
    possessed: bool,
}

impl State {
    fn add(
        &mut self,
        ty: KeyType,
        desc: &[u8],
        payload: Vec<u8>,
        a: &Asker,
        perm: u32,
    ) -> Result<i32, Errno> {
        if self.keys.len() >= MAX_KEYS || self.bytes + payload.len() + desc.len() > MAX_BYTES {
            return Err(Errno::EDQUOT);
        }
        if self.next <= 0 {
            // Serials start somewhere unguessable, as Linux's are random.
            let mut b = [0u8; 4];
            crate::host::getrandom(&mut b);
            self.next = (u32::from_ne_bytes(b) % (1 << 29)) as i32 + (1 << 28);
        }
        let mut id = self.next;
        while self.keys.contains_key(&id) {
            id = id.checked_add(1).unwrap_or(3);
        }
        self.next = id.checked_add(1).unwrap_or(3);
        self.bytes += payload.len() + desc.len();
        self.keys.insert(
            id,
            Key {
                ty,
                desc: desc.to_vec(),
                uid: a.uid,
                gid: a.gid,
                perm,
                payload,
                links: Vec::new(),
                revoked: false,
            },
        );
        Ok(id)
    }

    /// The permission bits `a` has on `id` (`key_task_permission`).
    fn granted(&self, id: i32, a: &Asker, possessed: bool) -> u32 {
        let Some(k) = self.keys.get(&id) else {
            return 0;
        };
        let mut g = if k.uid == a.uid {
            k.perm >> perm::USR
        } else if k.gid == a.gid || a.groups.contains(&k.gid) {
            k.perm >> 8
        } else {
            k.perm
        } & perm::ALL;
        if possessed {
            g |= (k.perm >> perm::POS) & perm::ALL;
        }
        g
    }

    /// A keyring the caller may change: `ENOTDIR` for another key.
    fn writable_ring(&self, ring: Found, a: &Asker) -> Result<(), Errno> {
        if self.keys.get(&ring.id).ok_or(Errno::ENOKEY)?.ty != KeyType::Keyring {
            return Err(Errno::ENOTDIR);
        }
        self.check(ring, a, perm::WRITE)
    }

    fn check(&self, f: Found, a: &Asker, need: u32) -> Result<(), Errno> {
        if self.granted(f.id, a, f.possessed) & need == need {
            Ok(())
        } else {
            Err(Errno::EACCES)
        }
    }

    /// Searches the keyring `ring` (possessed or not) for a key of `ty`
    /// and `desc` the caller may search (`keyring_search_rcu`).
    fn search_in(
        &self,
        ring: i32,
        possessed: bool,
        ty: KeyType,
        desc: &[u8],
        a: &Asker,
    ) -> Option<Found> {
        self.search_below(ring, possessed, ty, desc, a, 0, &mut HashSet::new())
    }

    /// [`State::search_in`] at `depth`, each keyring once (`seen`): keyrings
    /// linked into many others are not searched again, so a search is
    /// bounded by the keys the sandbox holds.
    #[allow(clippy::too_many_arguments)]
    fn search_below(
        &self,
        ring: i32,
        possessed: bool,
        ty: KeyType,
        desc: &[u8],
        a: &Asker,
        depth: usize,
        seen: &mut HashSet<i32>,
    ) -> Option<Found> {
        if !seen.insert(ring) {
            return None;
        }
        let k = self.keys.get(&ring)?;
        if k.ty != KeyType::Keyring || k.revoked {
            return None;
        }
        for &id in &k.links {
            let Some(c) = self.keys.get(&id) else {
                continue;
            };
            if c.revoked || self.granted(id, a, possessed) & perm::SEARCH == 0 {
                continue;
            }
            if c.ty == ty && c.desc == desc {
                return Some(Found { id, possessed });
            }
        }
        if depth + 1 >= MAX_DEPTH {
            return None;
        }
        for &id in &k.links {
            let nested = self
                .keys
                .get(&id)
                .is_some_and(|c| c.ty == KeyType::Keyring && !c.revoked)
                && self.granted(id, a, possessed) & perm::SEARCH != 0;
            if nested {
                if let Some(f) = self.search_below(id, possessed, ty, desc, a, depth + 1, seen) {
                    return Some(f);
                }
            }
        }
        None
    }

    /// Searches the caller's own keyrings (`search_process_keyrings`).
    fn search_process(&self, ty: KeyType, desc: &[u8], a: &Asker) -> Option<Found> {
        let session = a.session.or_else(|| self.per_user.get(&a.uid).map(|u| u.1));
        [a.thread, a.process, session]
            .into_iter()
            .flatten()
            .find_map(|r| self.search_in(r, true, ty, desc, a))
    }

    /// Whether the caller possesses `id`: one of its keyrings, or found
    /// from them by a search.
    fn possessed(&self, id: i32, a: &Asker) -> bool {
        if [a.thread, a.process, a.session].contains(&Some(id)) {
            return true;
        }
        let Some(k) = self.keys.get(&id) else {
            return false;
        };
        self.search_process(k.ty, &k.desc, a)
            .is_some_and(|f| f.id == id)
    }

    fn user_keyrings(&mut self, a: &Asker) -> Result<(i32, i32), Errno> {
        if let Some(&u) = self.per_user.get(&a.uid) {
            return Ok(u);
        }
        let p = (perm::ALL << perm::POS) | (perm::ALL << perm::USR);
        let user = self.add(
            KeyType::Keyring,
            format!("_uid.{}", a.uid).as_bytes(),
            Vec::new(),
            a,
            p,
        )?;
        let ses = self.add(
            KeyType::Keyring,
            format!("_uid_ses.{}", a.uid).as_bytes(),
            Vec::new(),
            a,
            p,
        )?;
        self.link(user, ses);
        self.per_user.insert(a.uid, (user, ses));
        Ok((user, ses))
    }

    fn link(&mut self, key: i32, ring: i32) {
        if let Some(r) = self.keys.get_mut(&ring) {
            if !r.links.contains(&key) {
                r.links.push(key);
            }
        }
    }

    fn remove(&mut self, id: i32) {
        if let Some(k) = self.keys.remove(&id) {
            self.bytes -= k.payload.len() + k.desc.len();
        }
        for k in self.keys.values_mut() {
            k.links.retain(|&l| l != id);
        }
    }
}

/// What [`Keys::resolve`] may do with a special id: make the keyring when
/// it does not exist yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Create {
    No,
    Yes,
}

impl Keys {
    /// Resolves a key id as `lookup_user_key`: a special id names one of
    /// the caller's keyrings (made when `create`, the thread, process and
    /// session keyrings being then installed in `own`), a serial a live
    /// key. `ENOKEY` when there is none.
    pub fn resolve(
        &self,
        id: i32,
        create: Create,
        a: &mut Asker,
        own: &mut TaskKeyrings,
    ) -> Result<Found, Errno> {
        let mut st = self.0.locked();
        let anon = (perm::ALL << perm::POS) | ((perm::VIEW) << perm::USR);
        let found = match id {
            spec::THREAD => match (a.thread, create) {
                (Some(t), _) => t,
                (None, Create::No) => return Err(Errno::ENOKEY),
                (None, Create::Yes) => {
                    let t = st.add(KeyType::Keyring, b"_tid", Vec::new(), a, anon)?;
                    own.thread = Some(t);
                    a.thread = Some(t);
                    t
                }
            },
            spec::PROCESS => match (a.process, create) {
                (Some(p), _) => p,
                (None, Create::No) => return Err(Errno::ENOKEY),
                (None, Create::Yes) => {
                    let p = st.add(KeyType::Keyring, b"_pid", Vec::new(), a, anon)?;
                    *own.process.locked() = Some(p);
                    a.process = Some(p);
                    p
                }
            },
            spec::SESSION => match a.session {
                Some(s) => s,
                None if create == Create::Yes => {
                    drop(st);
                    let s = self.join_session(None, a, own)?;
                    return Ok(Found {
                        id: s,
                        possessed: true,
                    });
                }
                // The user-session keyring stands in, and becomes the
                // session keyring (`install_session_keyring`).
                None => {
                    let (_, us) = st.user_keyrings(a)?;
                    own.session = Some(us);
                    a.session = Some(us);
                    us
                }
            },
            spec::USER => st.user_keyrings(a)?.0,
            spec::USER_SESSION => st.user_keyrings(a)?.1,
            spec::GROUP | spec::REQKEY_AUTH | spec::REQUESTOR => return Err(Errno::ENOKEY),
            id if id > 0 && st.keys.contains_key(&id) => {
                return Ok(Found {
                    id,
                    possessed: st.possessed(id, a),
                })
            }
            _ => return Err(Errno::ENOKEY),
        };
        Ok(Found {
            id: found,
            possessed: true,
        })
    }

    /// `KEYCTL_JOIN_SESSION_KEYRING`: a new anonymous keyring, or the named
    /// one the caller may search (else a new one of that name).
    pub fn join_session(
        &self,
        name: Option<&[u8]>,
        a: &mut Asker,
        own: &mut TaskKeyrings,
    ) -> Result<i32, Errno> {
        let mut st = self.0.locked();
        let id = match name {
            None => st.add(
                KeyType::Keyring,
                b"_ses",
                Vec::new(),
                a,
                (perm::ALL << perm::POS) | ((perm::VIEW | perm::READ) << perm::USR),
            )?,
            Some(n) => {
                let existing = st
                    .keys
                    .iter()
                    .filter(|(_, k)| k.ty == KeyType::Keyring && !k.revoked && k.desc == n)
                    .map(|(&id, _)| id)
                    .filter(|&id| st.granted(id, a, false) & perm::SEARCH != 0)
                    .min();
                match existing {
                    Some(id) => id,
                    None => st.add(
                        KeyType::Keyring,
                        n,
                        Vec::new(),
                        a,
                        (perm::ALL << perm::POS)
                            | ((perm::VIEW | perm::READ | perm::LINK) << perm::USR),
                    )?,
                }
            }
        };
        own.session = Some(id);
        a.session = Some(id);
        Ok(id)
    }

    /// `add_key(2)` into `ring`: an existing key of the same type and
    /// description there is updated (a keyring replaced) instead.
    pub fn add_key(
        &self,
        ty: KeyType,
        desc: &[u8],
        payload: Vec<u8>,
        ring: Found,
        a: &Asker,
    ) -> Result<i32, Errno> {
        let mut st = self.0.locked();
        let r = st.keys.get(&ring.id).ok_or(Errno::ENOKEY)?;
        if r.ty != KeyType::Keyring {
            return Err(Errno::ENOTDIR);
        }
        if r.revoked {
            return Err(Errno::EKEYREVOKED);
        }
        st.check(ring, a, perm::WRITE)?;
        ty.check(desc, &payload)?;
        if desc.is_empty() {
            return Err(Errno::EINVAL);
        }
        let r = st.keys.get(&ring.id).ok_or(Errno::ENOKEY)?;
        let same = r.links.iter().copied().find(|id| {
            st.keys
                .get(id)
                .is_some_and(|k| k.ty == ty && k.desc == desc && !k.revoked)
        });
        if let (Some(id), true) = (same, ty != KeyType::Keyring) {
            st.check(
                Found {
                    id,
                    possessed: true,
                },
                a,
                perm::WRITE,
            )?;
            set_payload(&mut st, id, payload)?;
            return Ok(id);
        }
        let mut p =
            (perm::VIEW | perm::SEARCH | perm::LINK | perm::SETATTR | perm::WRITE) << perm::POS;
        if ty != KeyType::Logon {
            p |= perm::READ << perm::POS;
        }
        p |= perm::VIEW << perm::USR;
        let id = st.add(ty, desc, payload, a, p)?;
        if let Some(old) = same {
            if let Some(r) = st.keys.get_mut(&ring.id) {
                r.links.retain(|&l| l != old);
            }
        }
        st.link(id, ring.id);
        Ok(id)
    }

    /// `request_key(2)` without an upcall: the caller's keyrings' key of
    /// `ty` and `desc`, linked into `dest` when given.
    pub fn request(
        &self,
        ty: KeyType,
        desc: &[u8],
        dest: Option<Found>,
        a: &Asker,
    ) -> Result<i32, Errno> {
        let mut st = self.0.locked();
        let f = st.search_process(ty, desc, a).ok_or(Errno::ENOKEY)?;
        if let Some(d) = dest {
            st.check(d, a, perm::WRITE)?;
            st.link(f.id, d.id);
        }
        Ok(f.id)
    }

    /// `KEYCTL_SEARCH`: a key of `ty` and `desc` below `ring`, linked into
    /// `dest` when given.
    pub fn search(
        &self,
        ring: Found,
        ty: KeyType,
        desc: &[u8],
        dest: Option<Found>,
        a: &Asker,
    ) -> Result<i32, Errno> {
        let mut st = self.0.locked();
        if st
            .keys
            .get(&ring.id)
            .is_none_or(|k| k.ty != KeyType::Keyring)
        {
            return Err(Errno::ENOTDIR);
        }
        st.check(ring, a, perm::SEARCH)?;
        let f = st
            .search_in(ring.id, ring.possessed, ty, desc, a)
            .ok_or(Errno::ENOKEY)?;
        if let Some(d) = dest {
            if st.keys.get(&d.id).is_none_or(|k| k.ty != KeyType::Keyring) {
                return Err(Errno::ENOTDIR);
            }
            st.check(d, a, perm::WRITE)?;
            st.check(f, a, perm::LINK)?;
            st.link(f.id, d.id);
        }
        Ok(f.id)
    }

    /// `KEYCTL_DESCRIBE`: "type;uid;gid;perm;description".
    pub fn describe(&self, f: Found, a: &Asker) -> Result<Vec<u8>, Errno> {
        let st = self.0.locked();
        st.check(f, a, perm::VIEW)?;
        let k = st.keys.get(&f.id).ok_or(Errno::ENOKEY)?;
        let mut out = format!("{};{};{};{:08x};", k.ty.name(), k.uid, k.gid, k.perm).into_bytes();
        out.extend_from_slice(&k.desc);
        Ok(out)
    }

    /// `KEYCTL_READ`: a key's payload, or a keyring's serials.
    pub fn read(&self, f: Found, a: &Asker) -> Result<Vec<u8>, Errno> {
        let st = self.0.locked();
        let k = st.keys.get(&f.id).ok_or(Errno::ENOKEY)?;
        if k.revoked {
            return Err(Errno::EKEYREVOKED);
        }
        // A key the caller possesses may be read without the read bit
        // (`keyctl_read_key`).
        if !f.possessed {
            st.check(f, a, perm::READ)?;
        }
        match k.ty {
            KeyType::Logon => Err(Errno::EOPNOTSUPP),
            KeyType::User => Ok(k.payload.clone()),
            KeyType::Keyring => Ok(k.links.iter().flat_map(|id| id.to_ne_bytes()).collect()),
        }
    }

    /// `KEYCTL_UPDATE`.
    pub fn update(&self, f: Found, payload: Vec<u8>, a: &Asker) -> Result<(), Errno> {
        let mut st = self.0.locked();
        let k = st.keys.get(&f.id).ok_or(Errno::ENOKEY)?;
        if k.revoked {
            return Err(Errno::EKEYREVOKED);
        }
        st.check(f, a, perm::WRITE)?;
        let ty = k.ty;
        if ty == KeyType::Keyring {
            return Err(Errno::EOPNOTSUPP);
        }
        ty.check(b"x:x", &payload)?;
        set_payload(&mut st, f.id, payload)
    }

    /// `KEYCTL_REVOKE`: write or set-attribute permission.
    pub fn revoke(&self, f: Found, a: &Asker) -> Result<(), Errno> {
        let mut st = self.0.locked();
        st.check(f, a, perm::WRITE)
            .or_else(|_| st.check(f, a, perm::SETATTR))?;
        if let Some(k) = st.keys.get_mut(&f.id) {
            k.revoked = true;
        }
        Ok(())
    }

    /// `KEYCTL_INVALIDATE`: gone at once from every keyring.
    pub fn invalidate(&self, f: Found, a: &Asker) -> Result<(), Errno> {
        let mut st = self.0.locked();
        st.check(f, a, perm::SEARCH)?;
        st.remove(f.id);
        st.per_user.retain(|_, u| u.0 != f.id && u.1 != f.id);
        Ok(())
    }

    /// `KEYCTL_CLEAR`.
    pub fn clear(&self, ring: Found, a: &Asker) -> Result<(), Errno> {
        let mut st = self.0.locked();
        st.writable_ring(ring, a)?;
        if let Some(k) = st.keys.get_mut(&ring.id) {
            k.links.clear();
        }
        Ok(())
    }

    /// `KEYCTL_LINK`.
    pub fn link(&self, key: Found, ring: Found, a: &Asker) -> Result<(), Errno> {
        let mut st = self.0.locked();
        st.writable_ring(ring, a)?;
        st.check(key, a, perm::LINK)?;
        // A keyring may not end up inside itself (`EDEADLK`).
        if key.id == ring.id || contains(&st, key.id, ring.id, 0, &mut HashSet::new()) {
            return Err(Errno::EDEADLK);
        }
        st.link(key.id, ring.id);
        Ok(())
    }

    /// `KEYCTL_UNLINK`.
    pub fn unlink(&self, key: Found, ring: Found, a: &Asker) -> Result<(), Errno> {
        let mut st = self.0.locked();
        st.writable_ring(ring, a)?;
        let r = st.keys.get_mut(&ring.id).ok_or(Errno::ENOKEY)?;
        let before = r.links.len();
        r.links.retain(|&l| l != key.id);
        if r.links.len() == before {
            return Err(Errno::ENOENT);
        }
        Ok(())
    }

    /// `KEYCTL_SETPERM`.
    pub fn set_perm(&self, f: Found, p: u32, a: &Asker) -> Result<(), Errno> {
        let mut st = self.0.locked();
        if p & !0x3f3f_3f3f != 0 {
            return Err(Errno::EINVAL);
        }
        st.check(f, a, perm::SETATTR)?;
        if let Some(k) = st.keys.get_mut(&f.id) {
            k.perm = p;
        }
        Ok(())
    }
}

fn set_payload(st: &mut State, id: i32, payload: Vec<u8>) -> Result<(), Errno> {
    let old = st.keys.get(&id).map_or(0, |k| k.payload.len());
    if st.bytes - old + payload.len() > MAX_BYTES {
        return Err(Errno::EDQUOT);
    }
    st.bytes = st.bytes - old + payload.len();
    if let Some(k) = st.keys.get_mut(&id) {
        k.payload = payload;
    }
    Ok(())
}

/// Whether keyring `ring` is reachable from keyring `from`, each keyring
/// looked into once (`seen`).
fn contains(st: &State, from: i32, ring: i32, depth: usize, seen: &mut HashSet<i32>) -> bool {
    if depth >= MAX_DEPTH || !seen.insert(from) {
        return false;
    }
    let Some(k) = st.keys.get(&from).filter(|k| k.ty == KeyType::Keyring) else {
        return false;
    };
    k.links
        .iter()
        .any(|&l| l == ring || contains(st, l, ring, depth + 1, seen))
}
