//! Files of a running sandbox, read and written by small programs of its
//! root (`sh`, `cat`, `find`, `stat`, and `tar` for folders) run as root:
//! the Sentry's own checks apply as to any program, and the host's files
//! are not touched. A root without them gets an error that says so.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Error, ExecOptions, Outcome, Output, Store, Stream};

/// One file as `stat` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// its name (the last component)
    pub name: String,
    /// its path in the sandbox
    pub path: String,
    /// `file`, `dir`, `symlink` or `other`
    pub kind: String,
    pub size: u64,
    /// permission bits
    pub mode: u32,
    /// modification time, seconds since the epoch
    pub mtime: i64,
}

/// The exit status the scripts below give for a path that is not there.
const MISSING: i32 = 44;

/// `stat -c` with this format prints one [`Entry`] per line.
const STAT_FORMAT: &str = "%f %s %Y %n";

fn parse_entry(line: &str) -> Option<Entry> {
    let mut f = line.splitn(4, ' ');
    let raw = u32::from_str_radix(f.next()?, 16).ok()?;
    let size = f.next()?.parse().ok()?;
    let mtime = f.next()?.parse().ok()?;
    let path = f.next()?.to_string();
    let kind = match raw & 0o170000 {
        0o100000 => "file",
        0o040000 => "dir",
        0o120000 => "symlink",
        _ => "other",
    };
    Some(Entry {
        name: path.rsplit('/').next().unwrap_or(&path).to_string(),
        path,
        kind: kind.into(),
        size,
        mode: raw & 0o7777,
        mtime,
    })
}

fn absolute(path: &str) -> Result<&str, Error> {
    if path.starts_with('/') && !path.contains('\0') {
        Ok(path)
    } else {
        Err(Error::Usage(format!(
            "{path:?}: give an absolute path in the sandbox"
        )))
    }
}

impl Store {
    /// Runs `args` in sandbox `name` as root, with `stdin`, and returns
    /// how it ended with its output.
    pub fn capture(
        &self,
        name: &str,
        args: &[&str],
        stdin: Vec<u8>,
    ) -> Result<(Outcome, Vec<u8>, Vec<u8>), Error> {
        let opts = ExecOptions {
            args: args.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let outcome = self.exec_streaming(name, &opts, stdin, |o| match o {
            Output::Data(Stream::Stdout, d) => out.extend_from_slice(d),
            Output::Data(Stream::Stderr, d) => err.extend_from_slice(d),
            Output::Started(..) => {}
        })?;
        Ok((outcome, out, err))
    }

    /// A script of `sh -c`, with `path` as `$1`; a missing path is
    /// [`Error::NoSuchFile`], any other failure the script's own words.
    fn script(
        &self,
        name: &str,
        script: &str,
        path: &str,
        stdin: Vec<u8>,
    ) -> Result<Vec<u8>, Error> {
        let (outcome, out, err) = match self.capture(name, &["sh", "-c", script, "sh", path], stdin)
        {
            Err(Error::Guest(why)) if why.contains("not found") || why.contains("no such") => {
                return Err(Error::NotSupported(format!(
                    "file operations run `sh` of the sandbox's root, which has none ({why})"
                )))
            }
            r => r?,
        };
        match outcome.status {
            0 => Ok(out),
            MISSING => Err(Error::NoSuchFile(path.into())),
            127 => Err(Error::NotSupported(format!(
                "file operations run `cat`, `find`, `stat` and `tar` of the sandbox's root: {}",
                String::from_utf8_lossy(&err).trim()
            ))),
            s => Err(Error::Guest(format!(
                "{path}: {} (exit status {s})",
                String::from_utf8_lossy(&err).trim()
            ))),
        }
    }

    /// The contents of file `path`.
    pub fn read_file(&self, name: &str, path: &str) -> Result<Vec<u8>, Error> {
        let path = absolute(path)?;
        self.script(
            name,
            r#"[ -e "$1" ] || [ -L "$1" ] || exit 44; exec cat -- "$1""#,
            path,
            Vec::new(),
        )
    }

    /// Writes `data` to file `path` (made, with the folders on its way,
    /// if need be), then gives it permissions `mode` when given.
    pub fn write_file(
        &self,
        name: &str,
        path: &str,
        data: Vec<u8>,
        mode: Option<u32>,
    ) -> Result<(), Error> {
        let path = absolute(path)?;
        let chmod = match mode {
            Some(m) if m <= 0o7777 => format!(" && chmod {m:o} -- \"$1\""),
            Some(m) => return Err(Error::Usage(format!("mode {m:o}: give permission bits"))),
            None => String::new(),
        };
        let script =
            format!(r#"d="${{1%/*}}"; [ -z "$d" ] || mkdir -p -- "$d" && cat > "$1"{chmod}"#);
        self.script(name, &script, path, data).map(drop)
    }

    /// What folder `path` holds, by name.
    pub fn list_dir(&self, name: &str, path: &str) -> Result<Vec<Entry>, Error> {
        let path = absolute(path)?;
        let out = self.script(
            name,
            &format!(
                r#"[ -e "$1" ] || exit 44; [ -d "$1" ] || {{ echo "not a folder" >&2; exit 20; }}; find "$1" -mindepth 1 -maxdepth 1 -exec stat -c '{STAT_FORMAT}' -- {{}} +"#
            ),
            path,
            Vec::new(),
        )?;
        let mut entries: Vec<Entry> = String::from_utf8_lossy(&out)
            .lines()
            .filter_map(parse_entry)
            .collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// What `path` is (a symlink itself, not what it names).
    pub fn stat(&self, name: &str, path: &str) -> Result<Entry, Error> {
        let path = absolute(path)?;
        let out = self.script(
            name,
            &format!(
                r#"[ -e "$1" ] || [ -L "$1" ] || exit 44; exec stat -c '{STAT_FORMAT}' -- "$1""#
            ),
            path,
            Vec::new(),
        )?;
        parse_entry(String::from_utf8_lossy(&out).trim_end_matches('\n'))
            .ok_or_else(|| Error::Guest(format!("{path}: `stat` gave no answer it could read")))
    }

    /// Copies host file or folder `host` to `guest` in sandbox `name`
    /// (`guest` names the copy itself).
    pub fn copy_in(&self, host: &Path, name: &str, guest: &str) -> Result<(), Error> {
        let guest = absolute(guest)?;
        let meta = std::fs::metadata(host).map_err(Error::io(host.display()))?;
        if !meta.is_dir() {
            let data = std::fs::read(host).map_err(Error::io(host.display()))?;
            use std::os::unix::fs::PermissionsExt;
            return self.write_file(name, guest, data, Some(meta.permissions().mode() & 0o7777));
        }
        let tar = std::process::Command::new("tar")
            .arg("-C")
            .arg(host)
            .args(["-cf", "-", "."])
            .output()
            .map_err(Error::io("running the host's tar"))?;
        if !tar.status.success() {
            return Err(Error::Guest(format!(
                "tar of {}: {}",
                host.display(),
                String::from_utf8_lossy(&tar.stderr).trim()
            )));
        }
        self.script(
            name,
            r#"mkdir -p -- "$1" && exec tar -C "$1" -xf -"#,
            guest,
            tar.stdout,
        )
        .map(drop)
    }

    /// Copies file or folder `guest` of sandbox `name` to host path `host`
    /// (which names the copy itself).
    pub fn copy_out(&self, name: &str, guest: &str, host: &Path) -> Result<(), Error> {
        let entry = self.stat(name, guest)?;
        if entry.kind != "dir" {
            let data = self.read_file(name, guest)?;
            let mut f = std::fs::File::create(host).map_err(Error::io(host.display()))?;
            return f.write_all(&data).map_err(Error::io(host.display()));
        }
        let data = self.script(name, r#"exec tar -C "$1" -cf - ."#, guest, Vec::new())?;
        unpack_untrusted(&data, host)
    }
}

/// Unpacks a tar the guest made (so, hostile) into host folder `host`:
/// no entry lands outside it (paths with `..`, absolute ones, and writes
/// through symlinks the archive made are refused), no device is made,
/// owners are not kept and modes lose set-id bits.
fn unpack_untrusted(data: &[u8], host: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(host).map_err(Error::io(host.display()))?;
    let mut a = tar::Archive::new(data);
    a.set_preserve_permissions(false);
    a.set_preserve_ownerships(false);
    a.set_unpack_xattrs(false);
    let bad = |e: std::io::Error| Error::Guest(format!("the sandbox's tar stream: {e}"));
    for entry in a.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        if matches!(
            entry.header().entry_type(),
            tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::Fifo
        ) {
            continue;
        }
        let path = entry.path().map_err(bad)?.into_owned();
        match entry.unpack_in(host) {
            Ok(true) => {}
            Ok(false) => {
                return Err(Error::Guest(format!(
                    "the sandbox's tar stream names {}, outside {}: refused",
                    path.display(),
                    host.display()
                )))
            }
            Err(e) => return Err(Error::Guest(format!("{}: {e}", path.display()))),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_become_entries() {
        let e = parse_entry("81a4 12 1700000000 /work/a file.txt").expect("valid");
        assert_eq!(
            (e.kind.as_str(), e.size, e.mode, e.mtime),
            ("file", 12, 0o644, 1_700_000_000)
        );
        assert_eq!(
            (e.name.as_str(), e.path.as_str()),
            ("a file.txt", "/work/a file.txt")
        );
        assert_eq!(parse_entry("41ed 4096 1 /tmp").expect("valid").kind, "dir");
        assert_eq!(parse_entry("a1ff 7 1 /bin").expect("valid").kind, "symlink");
        assert!(parse_entry("garbage").is_none());
    }

    /// A tar as a hostile guest's `tar` could write it.
    fn hostile(entries: &[(&str, tar::EntryType, &str)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for &(name, kind, data) in entries {
            let mut h = tar::Header::new_old();
            h.set_entry_type(kind);
            h.set_mode(0o4755);
            h.set_size(if kind == tar::EntryType::Regular {
                data.len() as u64
            } else {
                0
            });
            // (set_path refuses `..`: the name goes into the header as is)
            let raw = &mut h.as_old_mut().name;
            raw[..name.len()].copy_from_slice(name.as_bytes());
            if kind == tar::EntryType::Symlink {
                h.set_link_name(data).expect("link name");
            }
            h.set_cksum();
            let body = if kind == tar::EntryType::Regular {
                data.as_bytes()
            } else {
                &[][..]
            };
            b.append(&h, body).expect("append");
        }
        b.into_inner().expect("tar")
    }

    #[test]
    fn a_hostile_guest_tar_stays_in_its_folder() {
        let base =
            std::env::temp_dir().join(format!("ferrovisor-untrusted-{}", std::process::id()));
        let (dest, outside) = (base.join("dest"), base.join("outside"));
        std::fs::create_dir_all(&outside).expect("mkdir");
        let escape = hostile(&[("../outside/dotdot", tar::EntryType::Regular, "x")]);
        assert!(unpack_untrusted(&escape, &dest).is_err());
        let link = hostile(&[
            (
                "link",
                tar::EntryType::Symlink,
                outside.to_str().expect("utf-8"),
            ),
            ("link/through", tar::EntryType::Regular, "x"),
        ]);
        assert!(unpack_untrusted(&link, &dest).is_err());
        assert_eq!(std::fs::read_dir(&outside).expect("outside").count(), 0);
        let fine = hostile(&[
            ("ok", tar::EntryType::Regular, "fine"),
            ("null", tar::EntryType::Char, ""),
        ]);
        unpack_untrusted(&fine, &dest).expect("a plain file");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dest.join("ok"))
            .expect("ok")
            .permissions()
            .mode();
        assert_eq!(mode & 0o7000, 0, "set-id bits kept: {mode:o}");
        assert!(!dest.join("null").exists());
        let _ = std::fs::remove_dir_all(&base);
    }
}
