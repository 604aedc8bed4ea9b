//! `sandbox create --image`: an OCI image (an image layout folder, or a
//! tar of one, or `docker save`'s tar) unpacked once into a root folder
//! under `<state root>/.images`, shared read-only by the sandboxes made
//! from it. Blobs are checked against their digests; layers are applied
//! in order with their whiteouts; nothing is written outside the folder
//! (an entry whose path or link leads out is refused).

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;
use sha2::Digest;

use super::Error;

const READY: &str = "ready";

/// What an image gives a sandbox: its root, and its config's environment
/// and defaults for the programs `exec` runs.
#[derive(Debug, Clone)]
pub struct Image {
    /// its folder's name under `.images`
    pub key: String,
    pub rootfs: PathBuf,
    pub env: Vec<String>,
    pub defaults: ExecDefaults,
}

/// An image config's `WorkingDir` and `User`: where and as whom `exec`
/// runs a program that says neither, as `docker exec` does.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ExecDefaults {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// What [`unpack`] keeps of an image's config (`config.json` beside its
/// root).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Kept {
    env: Vec<String>,
    defaults: ExecDefaults,
}

fn bad(image: &Path, why: impl std::fmt::Display) -> Error {
    Error::Usage(format!(
        "--image {}: {why} (give an OCI image layout, or a tar from `docker save` or `skopeo copy ... oci-archive:`)",
        image.display()
    ))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A short key for `source` as it is now (path, size, modification time):
/// a changed image is unpacked anew.
fn key_of(source: &Path) -> Result<String, Error> {
    let canonical = std::fs::canonicalize(source).map_err(Error::io(source.display()))?;
    let m = std::fs::metadata(&canonical).map_err(Error::io(source.display()))?;
    let stamp = format!(
        "{}\0{}\0{:?}",
        canonical.display(),
        m.len(),
        m.modified().ok()
    );
    Ok(hex(&sha2::Sha256::digest(stamp.as_bytes()))[..16].to_string())
}

/// Unpacks `source` under `images` (once) and returns it.
pub fn prepare(images: &Path, source: &Path) -> Result<Image, Error> {
    let key = key_of(source)?;
    let dir = images.join(&key);
    let rootfs = dir.join("rootfs");
    let kept_file = dir.join("config.json");
    let kept = std::fs::read(&kept_file)
        .ok()
        .and_then(|t| serde_json::from_slice::<Kept>(&t).ok());
    if let (true, Some(k)) = (dir.join(READY).exists(), kept) {
        return Ok(Image {
            key,
            rootfs,
            env: k.env,
            defaults: k.defaults,
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&rootfs).map_err(Error::io(rootfs.display()))?;
    super::set_mode(images, 0o700)?;
    let made = unpack(source, &dir, &rootfs);
    match made {
        Ok(k) => {
            let text = serde_json::to_vec(&k).unwrap_or_default();
            std::fs::write(&kept_file, text).map_err(Error::io(kept_file.display()))?;
            std::fs::write(dir.join(READY), b"").map_err(Error::io(dir.display()))?;
            let _ = std::fs::remove_dir_all(dir.join("src"));
            Ok(Image {
                key,
                rootfs,
                env: k.env,
                defaults: k.defaults,
            })
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            Err(e)
        }
    }
}

/// An unpacked image [`prune`] removed, and the bytes it held.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Pruned {
    pub key: String,
    pub bytes: u64,
}

/// Removes every unpacked image under `images` whose key is not in
/// `used` (the sandboxes that exist, running or not), and what is left
/// of an unpack that failed half-way.
pub fn prune(images: &Path, used: &[String]) -> Result<Vec<Pruned>, Error> {
    let rd = match std::fs::read_dir(images) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(images.display())(e)),
    };
    let mut gone = Vec::new();
    for e in rd.flatten() {
        let Ok(key) = e.file_name().into_string() else {
            continue;
        };
        if used.contains(&key) {
            continue;
        }
        let dir = e.path();
        let bytes = disk_bytes(&dir);
        std::fs::remove_dir_all(&dir).map_err(Error::io(dir.display()))?;
        gone.push(Pruned { key, bytes });
    }
    gone.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(gone)
}

/// The disk space a folder's files take (links not followed).
fn disk_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => m.blocks() * 512 + disk_bytes(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

/// The layers (paths) and config of the image at `source`, then applied.
fn unpack(source: &Path, dir: &Path, rootfs: &Path) -> Result<Kept, Error> {
    let meta = std::fs::metadata(source).map_err(Error::io(source.display()))?;
    let layout = if meta.is_dir() {
        source.to_path_buf()
    } else {
        // A tar of either kind: its files first.
        let src = dir.join("src");
        std::fs::create_dir_all(&src).map_err(Error::io(src.display()))?;
        let f = std::fs::File::open(source).map_err(Error::io(source.display()))?;
        let mut a = tar::Archive::new(f);
        a.unpack(&src)
            .map_err(|e| bad(source, format_args!("not a tar it could read: {e}")))?;
        src
    };
    let (layers, config) = if layout.join("index.json").exists() {
        oci_layers(source, &layout)?
    } else if layout.join("manifest.json").exists() {
        docker_layers(source, &layout)?
    } else {
        return Err(bad(
            source,
            "no index.json (OCI layout) or manifest.json (docker save)",
        ));
    };
    for (path, digest) in &layers {
        if let Some(d) = digest {
            check_digest(source, path, d)?;
        }
        apply_layer(source, path, rootfs)?;
    }
    let env = config
        .as_ref()
        .and_then(|c| c.pointer("/config/Env"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let text = |key: &str| {
        let v = config
            .as_ref()?
            .pointer(&format!("/config/{key}"))?
            .as_str()?;
        (!v.is_empty()).then(|| v.to_string())
    };
    let defaults = ExecDefaults {
        cwd: text("WorkingDir"),
        user: text("User"),
    };
    Ok(Kept { env, defaults })
}

fn read_json(image: &Path, path: &Path) -> Result<Value, Error> {
    let text =
        std::fs::read(path).map_err(|e| bad(image, format_args!("{}: {e}", path.display())))?;
    serde_json::from_slice(&text).map_err(|e| bad(image, format_args!("{}: {e}", path.display())))
}

/// A blob of an OCI layout by digest (`sha256:HEX`), its path checked to
/// stay in the layout.
fn blob(image: &Path, layout: &Path, digest: &str) -> Result<PathBuf, Error> {
    let (alg, hex) = digest
        .split_once(':')
        .filter(|(a, h)| {
            *a == "sha256" && h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit())
        })
        .ok_or_else(|| bad(image, format_args!("digest {digest:?} is not sha256:HEX")))?;
    Ok(layout.join("blobs").join(alg).join(hex))
}

fn check_digest(image: &Path, path: &Path, digest: &str) -> Result<(), Error> {
    let mut f =
        std::fs::File::open(path).map_err(|e| bad(image, format_args!("blob {digest}: {e}")))?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(Error::io(path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    let got = format!("sha256:{}", hex(&h.finalize()));
    if got != digest {
        return Err(bad(
            image,
            format_args!("blob {digest} is corrupt: its contents hash to {got}"),
        ));
    }
    Ok(())
}

type Layers = (Vec<(PathBuf, Option<String>)>, Option<Value>);

fn oci_layers(image: &Path, layout: &Path) -> Result<Layers, Error> {
    let index = read_json(image, &layout.join("index.json"))?;
    let mut desc = index
        .pointer("/manifests/0")
        .cloned()
        .ok_or_else(|| bad(image, "index.json lists no manifest"))?;
    // An index of images per platform: linux/amd64's.
    for _ in 0..4 {
        let digest = desc["digest"].as_str().unwrap_or_default().to_string();
        let path = blob(image, layout, &digest)?;
        check_digest(image, &path, &digest)?;
        let m = read_json(image, &path)?;
        if let Some(list) = m["manifests"].as_array() {
            desc = list
                .iter()
                .find(|d| {
                    d.pointer("/platform/os").and_then(Value::as_str) == Some("linux")
                        && d.pointer("/platform/architecture").and_then(Value::as_str)
                            == Some("amd64")
                })
                .or(list.first())
                .cloned()
                .ok_or_else(|| bad(image, "an image index with no manifest"))?;
            continue;
        }
        let config = match m.pointer("/config/digest").and_then(Value::as_str) {
            Some(d) => {
                let p = blob(image, layout, d)?;
                check_digest(image, &p, d)?;
                Some(read_json(image, &p)?)
            }
            None => None,
        };
        let mut layers = Vec::new();
        for l in m["layers"].as_array().into_iter().flatten() {
            let digest = l["digest"].as_str().unwrap_or_default().to_string();
            layers.push((blob(image, layout, &digest)?, Some(digest)));
        }
        return Ok((layers, config));
    }
    Err(bad(image, "image indexes nested too deep"))
}

fn docker_layers(image: &Path, layout: &Path) -> Result<Layers, Error> {
    let m = read_json(image, &layout.join("manifest.json"))?;
    let first = m
        .pointer("/0")
        .ok_or_else(|| bad(image, "manifest.json lists no image"))?;
    let inside = |p: &str| -> Result<PathBuf, Error> {
        let rel = Path::new(p);
        if rel.components().all(|c| matches!(c, Component::Normal(_))) {
            Ok(layout.join(rel))
        } else {
            Err(bad(
                image,
                format_args!("manifest.json names {p:?}, outside the image"),
            ))
        }
    };
    let config = match first["Config"].as_str() {
        Some(c) => Some(read_json(image, &inside(c)?)?),
        None => None,
    };
    let mut layers = Vec::new();
    for l in first["Layers"].as_array().into_iter().flatten() {
        let p = l.as_str().unwrap_or_default();
        // (newer Docker names layers by digest: blobs/sha256/HEX)
        let digest = p
            .strip_prefix("blobs/sha256/")
            .map(|h| format!("sha256:{h}"));
        layers.push((inside(p)?, digest));
    }
    Ok((layers, config))
}

/// A layer's entries, through gzip or zstd when it is compressed (the
/// magic number says which, whatever the media type claims).
fn open_layer(image: &Path, path: &Path) -> Result<tar::Archive<Box<dyn Read>>, Error> {
    let mut f = std::fs::File::open(path)
        .map_err(|e| bad(image, format_args!("{}: {e}", path.display())))?;
    let mut magic = [0u8; 4];
    let n = f.read(&mut magic).map_err(Error::io(path.display()))?;
    let f = std::fs::File::open(path).map_err(Error::io(path.display()))?;
    let reader: Box<dyn Read> = match &magic[..n] {
        [0x1f, 0x8b, ..] => Box::new(flate2::read::GzDecoder::new(f)),
        [0x28, 0xb5, 0x2f, 0xfd] => Box::new(ZstdFrames {
            source: std::io::BufReader::new(f),
            frame: ruzstd::decoding::FrameDecoder::new(),
            open: false,
        }),
        _ => Box::new(f),
    };
    let mut a = tar::Archive::new(reader);
    a.set_preserve_permissions(true);
    a.set_preserve_ownerships(true);
    a.set_unpack_xattrs(false);
    Ok(a)
}

/// `rel` under `root`, or `None` when a component on the way is a
/// symlink or not a folder (a whiteout there removes nothing).
/// A zstd stream of any number of frames (zstd:chunked layers have many),
/// skippable frames skipped, as the `zstd` tool reads one.
struct ZstdFrames<R> {
    source: std::io::BufReader<R>,
    frame: ruzstd::decoding::FrameDecoder,
    /// a frame is being decoded
    open: bool,
}

impl<R: Read> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
        use std::io::BufRead;
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if !self.open {
                if self.source.fill_buf()?.is_empty() {
                    return Ok(0);
                }
                match self.frame.reset(&mut self.source) {
                    Ok(()) => self.open = true,
                    Err(FrameDecoderError::ReadFrameHeaderError(
                        ReadFrameHeaderError::SkipFrame { length, .. },
                    )) => {
                        let skipped = std::io::copy(
                            &mut (&mut self.source).take(length.into()),
                            &mut std::io::sink(),
                        )?;
                        if skipped < length.into() {
                            return Err(std::io::ErrorKind::UnexpectedEof.into());
                        }
                        continue;
                    }
                    Err(e) => return Err(std::io::Error::other(e)),
                }
            }
            while self.frame.can_collect() < buf.len() && !self.frame.is_finished() {
                let want = buf.len() - self.frame.can_collect();
                self.frame
                    .decode_blocks(
                        &mut self.source,
                        ruzstd::decoding::BlockDecodingStrategy::UptoBytes(want),
                    )
                    .map_err(std::io::Error::other)?;
            }
            let n = self.frame.read(buf)?;
            if n > 0 {
                return Ok(n);
            }
            // This frame is done: the next one, if there is one.
            self.open = false;
        }
    }
}

fn beneath(root: &Path, rel: &Path) -> Option<PathBuf> {
    let mut at = root.to_path_buf();
    let comps: Vec<Component> = rel.components().collect();
    for (i, c) in comps.iter().enumerate() {
        let Component::Normal(n) = c else {
            return None;
        };
        at.push(n);
        if i + 1 < comps.len() {
            let m = std::fs::symlink_metadata(&at).ok()?;
            if !m.is_dir() {
                return None;
            }
        }
    }
    Some(at)
}

fn remove(path: &Path) {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            let _ = std::fs::remove_dir_all(path);
        }
        Ok(_) => {
            let _ = std::fs::remove_file(path);
        }
        Err(_) => {}
    }
}

/// Applies one layer: its whiteouts first (to what the layers below
/// left), then its entries.
fn apply_layer(image: &Path, path: &Path, rootfs: &Path) -> Result<(), Error> {
    let broken = |e: std::io::Error| bad(image, format_args!("layer {}: {e}", path.display()));
    let mut a = open_layer(image, path)?;
    for entry in a.entries().map_err(broken)? {
        let entry = entry.map_err(broken)?;
        let p = entry.path().map_err(broken)?.into_owned();
        let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let parent = p.parent().unwrap_or(Path::new(""));
        if name == ".wh..wh..opq" {
            // An opaque folder: nothing from below shows through.
            let real_dir = |d: &PathBuf| std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir());
            if let Some(d) = beneath(rootfs, parent).filter(real_dir) {
                if let Ok(rd) = std::fs::read_dir(&d) {
                    for e in rd.flatten() {
                        remove(&e.path());
                    }
                }
            }
        } else if let Some(hidden) = name.strip_prefix(".wh.") {
            if let Some(t) = beneath(rootfs, &parent.join(hidden)) {
                remove(&t);
            }
        }
    }
    let mut a = open_layer(image, path)?;
    for entry in a.entries().map_err(broken)? {
        let mut entry = entry.map_err(broken)?;
        let p = entry.path().map_err(broken)?.into_owned();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with(".wh.") {
            continue;
        }
        // The Sentry's own /dev serves devices: none are made on the host.
        if matches!(
            entry.header().entry_type(),
            tar::EntryType::Char | tar::EntryType::Block
        ) {
            continue;
        }
        // A file replaces a folder of the layers below, and the reverse.
        if let Some(t) = beneath(rootfs, &p) {
            if let Ok(m) = std::fs::symlink_metadata(&t) {
                let is_dir = entry.header().entry_type() == tar::EntryType::Directory;
                if m.is_dir() != is_dir || (!is_dir && m.file_type().is_symlink()) {
                    remove(&t);
                }
            }
        }
        match entry.unpack_in(rootfs) {
            Ok(true) => {}
            Ok(false) => {
                return Err(bad(
                    image,
                    format_args!(
                        "layer {}: {} leads outside the image's root",
                        path.display(),
                        p.display()
                    ),
                ))
            }
            Err(e) => {
                return Err(bad(
                    image,
                    format_args!("layer {}: {}: {e}", path.display(), p.display()),
                ))
            }
        }
    }
    Ok(())
}
