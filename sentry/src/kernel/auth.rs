//! Credentials (credentials(7)) and capabilities (capabilities(7)): who a
//! task is and the permission checks that follow from it.

use abi::Errno;

/// A task's identity (credentials(7)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Creds {
    /// real, effective, saved, filesystem user ids
    pub uid: [u32; 4],
    /// real, effective, saved, filesystem group ids
    pub gid: [u32; 4],
    /// supplementary groups
    pub groups: Vec<u32>,
    /// capability sets
    pub caps: CapSets,
    /// the secure bits (`PR_SET_SECUREBITS`, capabilities(7)): see
    /// [`secbit`]
    pub securebits: u32,
}

/// The secure bits (capabilities(7)); each `*_LOCKED` bit is the one above
/// its bit.
pub mod secbit {
    /// root gets no capabilities at `execve`
    pub const NOROOT: u32 = 1 << 0;
    /// a change of user ids leaves the capability sets alone
    pub const NO_SETUID_FIXUP: u32 = 1 << 2;
    /// the permitted set survives leaving uid 0 (`PR_SET_KEEPCAPS`);
    /// cleared by `execve`
    pub const KEEP_CAPS: u32 = 1 << 4;
    /// `PR_CAP_AMBIENT_RAISE` is refused
    pub const NO_CAP_AMBIENT_RAISE: u32 = 1 << 6;
    /// Linux 6.14's `SECBIT_EXEC_RESTRICT_FILE` and
    /// `SECBIT_EXEC_DENY_INTERACTIVE`: advice to script interpreters,
    /// kept and shown only
    pub const EXEC_ADVICE: u32 = 1 << 8 | 1 << 10;
    /// every bit (not the locks)
    pub const ALL_BITS: u32 =
        NOROOT | NO_SETUID_FIXUP | KEEP_CAPS | NO_CAP_AMBIENT_RAISE | EXEC_ADVICE;
    /// every lock
    pub const ALL_LOCKS: u32 = ALL_BITS << 1;
}

/// The capabilities the Sentry's permission checks ask for, by number
/// (capabilities(7)).
pub mod cap {
    /// change any file's owner and group
    pub const CHOWN: u32 = 0;
    /// bypass file read, write and execute permission checks
    pub const DAC_OVERRIDE: u32 = 1;
    /// bypass file read and directory read and search checks
    pub const DAC_READ_SEARCH: u32 = 2;
    /// bypass the checks that the caller owns a file
    pub const FOWNER: u32 = 3;
    /// keep set-user-ID and set-group-ID bits
    pub const FSETID: u32 = 4;
    /// signal processes of other users
    pub const KILL: u32 = 5;
    /// take any group id
    pub const SETGID: u32 = 6;
    /// take any user id
    pub const SETUID: u32 = 7;
    /// bind ports below 1024
    pub const NET_BIND_SERVICE: u32 = 10;
    /// `chroot(2)`
    pub const SYS_CHROOT: u32 = 18;
    /// trace any process (`ptrace(2)`, `process_vm_readv`)
    pub const SYS_PTRACE: u32 = 19;
    /// `sethostname(2)`, trusted.* attributes, mounts
    pub const SYS_ADMIN: u32 = 21;
    /// raise scheduling priority
    pub const SYS_NICE: u32 = 23;
    /// raise hard resource limits, lower `oom_score_adj`, pass queue limits
    pub const SYS_RESOURCE: u32 = 24;
    /// `vhangup(2)`
    pub const SYS_TTY_CONFIG: u32 = 26;
    /// set `ns_last_pid` (as `SYS_ADMIN` does), for checkpointing tools
    pub const CHECKPOINT_RESTORE: u32 = 40;
}

/// `MAY_EXEC`, `MAY_WRITE`, `MAY_READ`: the access a permission check asks
/// for, as `access(2)`'s `X_OK`, `W_OK`, `R_OK`.
pub const MAY_EXEC: u32 = 1;
/// See [`MAY_EXEC`].
pub const MAY_WRITE: u32 = 2;
/// See [`MAY_EXEC`].
pub const MAY_READ: u32 = 4;

impl Creds {
    /// Whether `cap` is in the effective set.
    pub fn capable(&self, cap: u32) -> bool {
        self.caps.has(cap)
    }

    /// Whether `gid` is the file-system group id or a supplementary group
    /// (Linux's `in_group_p`).
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid[3] == gid || self.groups.contains(&gid)
    }

    /// Whether the caller counts as the owner of an object owned by
    /// `owner`: its file-system uid, or `CAP_FOWNER` (Linux's
    /// `inode_owner_or_capable`).
    pub fn owns(&self, owner: u32) -> bool {
        self.uid[3] == owner || self.capable(cap::FOWNER)
    }

    /// The file permission check (Linux's `generic_permission`): the
    /// owner's, group's or others' bits of `mode` by the file-system ids;
    /// failing them, `CAP_DAC_READ_SEARCH` reads any file and reads and
    /// searches any directory, and `CAP_DAC_OVERRIDE` allows everything but
    /// executing a file without any execute bit (capabilities(7)). `want`
    /// is a mask of `MAY_*`.
    pub fn may_access(&self, mode: u32, uid: u32, gid: u32, want: u32) -> Result<(), Errno> {
        let bits = if self.uid[3] == uid {
            mode >> 6
        } else if self.in_group(gid) {
            mode >> 3
        } else {
            mode
        } & 7;
        if want & !bits == 0 {
            return Ok(());
        }
        let is_dir = mode & abi::S_IFMT == abi::S_IFDIR;
        if is_dir {
            if want & MAY_WRITE == 0 && self.capable(cap::DAC_READ_SEARCH) {
                return Ok(());
            }
            if self.capable(cap::DAC_OVERRIDE) {
                return Ok(());
            }
            return Err(Errno::EACCES);
        }
        if (want & MAY_EXEC == 0 || mode & 0o111 != 0) && self.capable(cap::DAC_OVERRIDE) {
            return Ok(());
        }
        if want == MAY_READ && self.capable(cap::DAC_READ_SEARCH) {
            return Ok(());
        }
        Err(Errno::EACCES)
    }

    /// The credentials `access(2)` checks with (Linux's
    /// `access_override_creds`): the real ids as file-system ids, and all
    /// the permitted capabilities for a real root, none for others.
    pub fn for_access(&self) -> Creds {
        let mut c = self.clone();
        c.uid[3] = c.uid[0];
        c.gid[3] = c.gid[0];
        c.caps.effective = if c.uid[0] == 0 { c.caps.permitted } else { 0 };
        c
    }

    /// Everything `uid`/`gid`, with `groups`, and the capabilities a
    /// program run as `uid` gets from `execve` (all of them for root).
    pub fn new(uid: u32, gid: u32, mut groups: Vec<u32>) -> Self {
        // Kept sorted, as Linux keeps them.
        groups.sort_unstable();
        Creds {
            uid: [uid; 4],
            gid: [gid; 4],
            groups,
            caps: CapSets::for_uid(uid),
            securebits: 0,
        }
    }

    /// Whether secure bit `bit` is set.
    pub fn secure(&self, bit: u32) -> bool {
        self.securebits & bit != 0
    }

    /// What a change of user ids from `old` does to the capabilities
    /// (capabilities(7), "Effect of user ID changes on capabilities"):
    /// leaving uid 0 altogether clears the permitted and effective sets
    /// (unless `SECBIT_KEEP_CAPS`) and the ambient one; the effective set
    /// follows the effective uid, the file-system capabilities the
    /// file-system uid; nothing changes under `SECBIT_NO_SETUID_FIXUP`.
    pub fn fix_caps_after_uid_change(&mut self, old: [u32; 4]) {
        if self.secure(secbit::NO_SETUID_FIXUP) {
            return;
        }
        let new = self.uid;
        let keep = self.secure(secbit::KEEP_CAPS);
        let c = &mut self.caps;
        if old[..3].contains(&0) && !new[..3].contains(&0) {
            if !keep {
                c.permitted = 0;
                c.effective = 0;
            }
            c.ambient = 0;
        }
        if old[1] == 0 && new[1] != 0 {
            c.effective = 0;
        }
        if old[1] != 0 && new[1] == 0 {
            c.effective = c.permitted;
        }
        if old[3] == 0 && new[3] != 0 {
            c.effective &= !CAP_FS_MASK;
        }
        if old[3] != 0 && new[3] == 0 {
            c.effective |= c.permitted & CAP_FS_MASK;
        }
    }
}

/// What `execve` needs to know of the program it runs (the last one of a
/// `#!` chain, not its ELF interpreter) to honour its set-ID bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecFile {
    /// its `st_mode`
    pub mode: u32,
    /// its owner
    pub uid: u32,
    /// its group
    pub gid: u32,
    /// it lies on a mount whose set-ID bits do not count (`nosuid`)
    pub nosuid: bool,
}

impl ExecFile {
    /// A program without set-ID bits (the effective ids stay).
    pub const PLAIN: ExecFile = ExecFile {
        mode: abi::S_IFREG | 0o755,
        uid: 0,
        gid: 0,
        nosuid: false,
    };
}

impl Creds {
    /// The credentials after `execve` of `file`, and whether the program
    /// runs with ids or capabilities its real user does not have (the
    /// auxiliary vector's `AT_SECURE`). Linux's `bprm_fill_uid` and
    /// `cap_bprm_creds_from_file` (execve(2), capabilities(7)), for
    /// programs without file capabilities:
    ///
    /// * set-user-ID makes the file's owner the effective id, set-group-ID
    ///   with group execute its group, unless the mount is `nosuid` or the
    ///   task has `no_new_privs`;
    /// * the permitted set becomes the bounding plus inheritable sets when
    ///   the real or the new effective uid is 0, effective too when the
    ///   latter is; otherwise the ambient set, which a change of ids
    ///   (new effective ids other than the old real ones) clears;
    /// * with `no_new_privs`, a change of ids or a gain of capabilities is
    ///   undone: the effective ids fall back to the real ones and nothing
    ///   beyond the old permitted set is kept;
    /// * the saved and file-system ids follow the effective ones.
    pub fn on_exec(&self, file: &ExecFile, no_new_privs: bool) -> (Creds, bool) {
        let mut new = self.clone();
        // (its lock stays)
        new.securebits &= !secbit::KEEP_CAPS;
        let (ruid, rgid) = (self.uid[0], self.gid[0]);
        let (mut euid, mut egid) = (self.uid[1], self.gid[1]);
        if !file.nosuid && !no_new_privs && file.mode & abi::S_IFMT == abi::S_IFREG {
            if file.mode & abi::S_ISUID != 0 {
                euid = file.uid;
            }
            if file.mode & (abi::S_ISGID | 0o010) == abi::S_ISGID | 0o010 {
                egid = file.gid;
            }
        }
        let old = &self.caps;
        let mut permitted = 0;
        let mut raise = false;
        // Root's privilege at execve, unless SECBIT_NOROOT.
        let root = !self.secure(secbit::NOROOT);
        if root && (ruid == 0 || euid == 0) {
            permitted = old.bounding | old.inheritable;
        }
        if root && euid == 0 {
            raise = true;
        }
        let setid = euid != ruid || egid != rgid;
        if (setid || permitted & !old.permitted != 0) && no_new_privs {
            // No ptrace and no `fs` shared past `execve` here (the Sentry
            // gives the new program its own), so `no_new_privs` is the
            // only reason Linux's `cap_bprm_creds_from_file` downgrades.
            euid = ruid;
            egid = rgid;
            permitted &= old.permitted;
        }
        let ambient = if setid { 0 } else { old.ambient };
        permitted |= ambient;
        new.uid = [ruid, euid, euid, euid];
        new.gid = [rgid, egid, egid, egid];
        new.caps = CapSets {
            effective: if raise { permitted } else { ambient },
            permitted,
            ambient,
            ..*old
        };
        let secure = setid || (ruid != 0 && (raise || permitted & !ambient != 0));
        (new, secure)
    }
}

/// The highest capability number (`CAP_CHECKPOINT_RESTORE`, Linux 5.9).
pub const CAP_LAST_CAP: u32 = 40;

/// Every capability, one bit per number.
pub const CAP_FULL_SET: u64 = (1 << (CAP_LAST_CAP + 1)) - 1;

/// `CAP_SETPCAP`: may change the bounding set and raise inheritable
/// capabilities beyond the permitted ones.
pub const CAP_SETPCAP: u32 = 8;

/// The capabilities a file-system user id of 0 brings (capabilities(7)):
/// CHOWN, DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER, FSETID, LINUX_IMMUTABLE,
/// MAC_OVERRIDE, MKNOD.
const CAP_FS_MASK: u64 = 0x1f | 1 << 9 | 1 << 27 | 1 << 32;

/// A task's capability sets (capabilities(7)), one bit per capability.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CapSets {
    /// what permission checks use
    pub effective: u64,
    /// what the task may make effective
    pub permitted: u64,
    /// what is kept across `execve` together with a file's inheritable set
    pub inheritable: u64,
    /// the most `execve` may grant
    pub bounding: u64,
    /// what is kept across `execve` of a program without file capabilities
    pub ambient: u64,
}

impl CapSets {
    /// What a program run as `uid` has after `execve` with a full
    /// bounding set and nothing inherited: all for root, none for others.
    pub fn for_uid(uid: u32) -> Self {
        let all = if uid == 0 { CAP_FULL_SET } else { 0 };
        CapSets {
            effective: all,
            permitted: all,
            inheritable: 0,
            bounding: CAP_FULL_SET,
            ambient: 0,
        }
    }

    /// Whether `cap` is effective.
    pub fn has(&self, cap: u32) -> bool {
        self.effective & (1 << cap) != 0
    }

    /// Drops from the ambient set what is not both permitted and
    /// inheritable, as Linux keeps it (capabilities(7)).
    pub fn trim_ambient(mut self) -> Self {
        self.ambient &= self.permitted & self.inheritable;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHOWN: u64 = 1;
    const KILL: u64 = 1 << 5;
    const SETUID: u64 = 1 << 7;

    /// Credentials with the ids `uid` (real, effective) and `gid`, and the
    /// capability sets `caps`.
    fn creds(uid: [u32; 2], gid: [u32; 2], caps: CapSets) -> Creds {
        let mut c = Creds::new(0, 0, Vec::new());
        c.uid = [uid[0], uid[1], uid[1], uid[1]];
        c.gid = [gid[0], gid[1], gid[1], gid[1]];
        c.caps = caps;
        c
    }

    fn file(mode: u32, uid: u32, gid: u32) -> ExecFile {
        ExecFile {
            mode: abi::S_IFREG | mode,
            uid,
            gid,
            nosuid: false,
        }
    }

    #[test]
    fn execve_gives_root_its_bounding_set_and_others_their_ambient_one() {
        let before = CapSets {
            effective: CHOWN,
            permitted: CHOWN | KILL,
            inheritable: KILL,
            bounding: CHOWN | SETUID,
            ambient: KILL,
        };
        let on_exec = |uid: [u32; 2], nnp| {
            let (c, secure) = creds(uid, [0, 0], before).on_exec(&ExecFile::PLAIN, nnp);
            (c.caps, secure)
        };
        let (root, secure) = on_exec([0, 0], false);
        assert_eq!(root.permitted, CHOWN | SETUID | KILL);
        assert_eq!(root.effective, root.permitted);
        assert_eq!(
            (root.inheritable, root.bounding, root.ambient),
            (KILL, CHOWN | SETUID, KILL)
        );
        assert!(!secure);
        // Real root only: permitted, not effective; the ids differ, so
        // the ambient set goes and the program runs "secure".
        let (real_root, secure) = on_exec([0, 1000], false);
        assert_eq!(real_root.permitted, CHOWN | SETUID | KILL);
        assert_eq!((real_root.effective, real_root.ambient), (0, 0));
        assert!(secure);
        let (user, secure) = on_exec([1000, 1000], false);
        assert_eq!((user.permitted, user.effective), (KILL, KILL));
        assert!(!secure);
        // no_new_privs: nothing beyond the old permitted set.
        let (nnp, _) = on_exec([0, 0], true);
        assert_eq!(nnp.permitted, CHOWN | KILL);
        let root = Creds::new(0, 0, Vec::new());
        assert_eq!(root.on_exec(&ExecFile::PLAIN, true).0.caps, root.caps);
    }

    #[test]
    fn set_user_id_root_gives_a_user_the_bounding_set() {
        let user = Creds::new(1000, 1000, vec![1000]);
        let (c, secure) = user.on_exec(&file(0o4755, 0, 0), false);
        assert_eq!((c.uid, c.gid), ([1000, 0, 0, 0], [1000; 4]));
        assert_eq!(
            (c.caps.permitted, c.caps.effective),
            (CAP_FULL_SET, CAP_FULL_SET)
        );
        assert!(secure);
        // Set-group-ID counts only with group execute.
        let (c, secure) = user.on_exec(&file(0o2755, 5, 7), false);
        assert_eq!((c.uid, c.gid), ([1000; 4], [1000, 7, 7, 7]));
        assert_eq!(c.caps.permitted, 0);
        assert!(secure);
        let (c, secure) = user.on_exec(&file(0o2745, 5, 7), false);
        assert_eq!(c.gid, [1000; 4]);
        assert!(!secure);
        // Neither on a nosuid mount nor with no_new_privs.
        let nosuid = ExecFile {
            nosuid: true,
            ..file(0o6755, 0, 0)
        };
        assert_eq!(user.on_exec(&nosuid, false), (user.clone(), false));
        assert_eq!(
            user.on_exec(&file(0o6755, 0, 0), true),
            (user.clone(), false)
        );
        // Not for a directory's mode either (only regular files run).
        let dir = ExecFile {
            mode: abi::S_IFDIR | 0o4755,
            ..ExecFile::PLAIN
        };
        assert_eq!(user.on_exec(&dir, false).0.uid, [1000; 4]);
    }

    #[test]
    fn root_running_a_set_user_id_program_of_a_user_keeps_permitted_only() {
        let root = Creds::new(0, 0, Vec::new());
        let (c, secure) = root.on_exec(&file(0o4755, 1000, 0), false);
        assert_eq!(c.uid, [0, 1000, 1000, 1000]);
        assert_eq!((c.caps.permitted, c.caps.effective), (CAP_FULL_SET, 0));
        assert!(secure);
    }

    #[test]
    fn no_new_privs_drops_ids_that_differ_from_the_real_ones() {
        // A set-user-ID root process (real 1000) with no_new_privs runs a
        // plain program: back to uid 1000, nothing permitted it lacked.
        let c = creds([1000, 0], [1000, 1000], CapSets::for_uid(1000));
        let (n, secure) = c.on_exec(&ExecFile::PLAIN, true);
        assert_eq!(n.uid, [1000; 4]);
        assert_eq!(n.caps.permitted, 0);
        assert!(secure);
    }

    #[test]
    fn leaving_root_drops_capabilities() {
        let mut c = Creds::new(0, 0, Vec::new());
        c.uid = [0, 1000, 0, 1000];
        c.fix_caps_after_uid_change([0; 4]);
        assert_eq!(c.caps.effective, 0);
        assert_eq!(c.caps.permitted, CAP_FULL_SET);
        let old = c.uid;
        c.uid = [0; 4];
        c.fix_caps_after_uid_change(old);
        assert_eq!(c.caps.effective, CAP_FULL_SET);
        c.uid = [0, 0, 0, 1000];
        c.fix_caps_after_uid_change([0; 4]);
        assert_eq!(c.caps.effective, CAP_FULL_SET & !CAP_FS_MASK);
        c.uid = [1000; 4];
        c.fix_caps_after_uid_change([0, 0, 0, 1000]);
        assert_eq!((c.caps.permitted, c.caps.effective), (0, 0));
        assert_eq!(c.caps.bounding, CAP_FULL_SET);
        assert_eq!(Creds::new(1000, 1000, Vec::new()).caps.permitted, 0);
    }

    #[test]
    fn keep_caps_keeps_the_permitted_set_when_leaving_root() {
        let mut c = Creds::new(0, 0, Vec::new());
        c.securebits = secbit::KEEP_CAPS;
        c.uid = [1000; 4];
        c.fix_caps_after_uid_change([0; 4]);
        assert_eq!((c.caps.permitted, c.caps.effective), (CAP_FULL_SET, 0));
    }

    #[test]
    fn permission_goes_by_the_effective_capabilities() {
        let reg = |perm: u32| abi::S_IFREG | perm;
        let dir = abi::S_IFDIR;
        let mut c = Creds::new(0, 0, Vec::new());
        // Root with everything: all but executing without an x bit.
        assert_eq!(c.may_access(reg(0), 5, 5, MAY_READ | MAY_WRITE), Ok(()));
        assert_eq!(c.may_access(reg(0), 5, 5, MAY_EXEC), Err(Errno::EACCES));
        assert_eq!(c.may_access(reg(0o100), 5, 5, MAY_EXEC), Ok(()));
        // Without DAC_OVERRIDE: reading and searching only.
        c.caps.effective &= !(1 << cap::DAC_OVERRIDE);
        assert_eq!(c.may_access(reg(0), 5, 5, MAY_READ), Ok(()));
        assert_eq!(c.may_access(reg(0), 5, 5, MAY_WRITE), Err(Errno::EACCES));
        assert_eq!(c.may_access(dir, 5, 5, MAY_READ | MAY_EXEC), Ok(()));
        assert_eq!(c.may_access(dir, 5, 5, MAY_WRITE), Err(Errno::EACCES));
        // Without either: the mode bits, by owner, group (supplementary
        // too), others.
        c.caps.effective &= !(1 << cap::DAC_READ_SEARCH);
        assert_eq!(c.may_access(reg(0), 5, 5, MAY_READ), Err(Errno::EACCES));
        assert_eq!(c.may_access(reg(0o600), 0, 5, MAY_WRITE), Ok(()));
        assert_eq!(
            c.may_access(reg(0o060), 0, 5, MAY_WRITE),
            Err(Errno::EACCES)
        );
        c.groups = vec![5];
        assert_eq!(c.may_access(reg(0o060), 1, 5, MAY_WRITE), Ok(()));
        assert_eq!(c.may_access(reg(0o004), 1, 6, MAY_READ), Ok(()));
        // access(2) asks as a real root with its permitted set.
        assert_eq!(c.for_access().may_access(reg(0), 5, 5, MAY_WRITE), Ok(()));
    }
}
