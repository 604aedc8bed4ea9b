//! Java's trust store for the guest: a JKS key store (the format Debian's
//! `ca-certificates-java` writes) that holds the sandbox's CA beside the
//! roots the guest already trusts, so Java clients accept intercepted
//! hosts as curl and Python do.
//!
//! The layout (big-endian): magic `FEEDFEED`, version 2, an entry count,
//! the entries, then a SHA-1 over the password's UTF-16 bytes, the words
//! "Mighty Aphrodite" and everything before it. A trusted-certificate
//! entry is tag 2, an alias, a date in milliseconds, the type `X.509` and
//! the DER bytes, each string a 16-bit length and its bytes.

const MAGIC: u32 = 0xfeed_feed;
const VERSION: u32 = 2;
const TAG_KEY: u32 = 1;
const TAG_TRUSTED: u32 = 2;
/// The password every JDK gives its `cacerts`; Java reads a trust store
/// without one unless told otherwise, so it only makes `keytool` happy.
const PASSWORD: &str = "changeit";
const DIGEST_LEN: usize = 20;

/// A store of `existing`'s entries when it is a JKS store, else of every
/// certificate in `bundle` (DER), with `ca` added as `alias`. `None` when
/// `existing` is not a JKS store and `bundle` is empty: the guest's store
/// is then better left as it is than made to trust the CA alone.
pub fn trust_store(
    existing: &[u8],
    bundle: &[&[u8]],
    ca: &[u8],
    alias: &str,
    millis: u64,
) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    let count = match entries(existing) {
        Some((n, raw)) => {
            body.extend_from_slice(raw);
            n
        }
        None if bundle.is_empty() => return None,
        None => {
            for (i, der) in bundle.iter().enumerate() {
                trusted(&mut body, &format!("root-{i:04}"), millis, der);
            }
            bundle.len() as u32
        }
    };
    trusted(&mut body, alias, millis, ca);
    let mut out = Vec::with_capacity(body.len() + 32);
    out.extend_from_slice(&MAGIC.to_be_bytes());
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&(count + 1).to_be_bytes());
    out.extend_from_slice(&body);
    let digest = digest(&out);
    out.extend_from_slice(digest.as_ref());
    Some(out)
}

fn trusted(out: &mut Vec<u8>, alias: &str, millis: u64, der: &[u8]) {
    out.extend_from_slice(&TAG_TRUSTED.to_be_bytes());
    utf(out, alias);
    out.extend_from_slice(&millis.to_be_bytes());
    utf(out, "X.509");
    out.extend_from_slice(&(der.len() as u32).to_be_bytes());
    out.extend_from_slice(der);
}

fn utf(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn digest(data: &[u8]) -> ring::digest::Digest {
    let mut d = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    for c in PASSWORD.encode_utf16() {
        d.update(&c.to_be_bytes());
    }
    d.update(b"Mighty Aphrodite");
    d.update(data);
    d.finish()
}

/// The entry count and the entries' bytes of a version-2 JKS store, or
/// `None` if `data` is not one. The bytes come from the guest's root, so
/// every length is checked; the digest is not (Java does not check it
/// for a trust store either).
fn entries(data: &[u8]) -> Option<(u32, &[u8])> {
    let mut r = Reader { data, pos: 0 };
    if r.u32()? != MAGIC || r.u32()? != VERSION {
        return None;
    }
    let count = r.u32()?;
    let start = r.pos;
    for _ in 0..count {
        match r.u32()? {
            TAG_TRUSTED => {
                r.string()?;
                r.take(8)?;
                r.certificate()?;
            }
            TAG_KEY => {
                r.string()?;
                r.take(8)?;
                r.bytes()?;
                for _ in 0..r.u32()? {
                    r.certificate()?;
                }
            }
            _ => return None,
        }
    }
    let end = r.pos;
    (data.len() - end == DIGEST_LEN).then_some((count, &data[start..end]))
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let b = self.data.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(b)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }

    fn string(&mut self) -> Option<&'a [u8]> {
        let n = u16::from_be_bytes(self.take(2)?.try_into().ok()?);
        self.take(n.into())
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()?;
        self.take(usize::try_from(n).ok()?)
    }

    fn certificate(&mut self) -> Option<()> {
        self.string()?;
        self.bytes().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_made_from_a_bundle_parses_and_grows_by_one_when_added_to() {
        let a: &[u8] = b"first certificate";
        let b: &[u8] = b"second";
        let one = trust_store(b"not a store", &[a, b], b"ca", "ca", 7).expect("made");
        let (n, _) = entries(&one).expect("a JKS store");
        assert_eq!(n, 3);
        let two = trust_store(&one, &[], b"another ca", "ca2", 7).expect("made");
        let (n, raw) = entries(&two).expect("a JKS store");
        assert_eq!(n, 4);
        assert!(raw.windows(10).any(|w| w == b"another ca"));
        assert!(raw.windows(17).any(|w| w == b"first certificate"));
    }

    #[test]
    fn nothing_to_trust_but_the_ca_leaves_the_store_alone() {
        assert_eq!(
            trust_store(b"\x30\x82 a PKCS#12 store", &[], b"ca", "ca", 0),
            None
        );
    }

    #[test]
    fn cut_or_mangled_stores_are_not_read() {
        let a: &[u8] = b"certificate";
        let good = trust_store(b"", &[a], b"ca", "ca", 0).expect("made");
        for n in 0..good.len() {
            assert!(entries(&good[..n]).is_none(), "cut at {n}");
        }
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..5_000 {
            let mut m = good.clone();
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let i = (rng as usize) % m.len();
            m[i] = (rng >> 32) as u8;
            // Either read or refused; never a panic or a read past the end.
            if let Some((_, raw)) = entries(&m) {
                assert!(raw.len() < m.len());
            }
        }
    }
}
