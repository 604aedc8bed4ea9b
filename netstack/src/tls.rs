//! TLS interception for hosts with secrets or HTTP rules: the Sentry ends
//! the guest's TLS with a certificate of the sandbox's own CA (which the
//! guest trusts) and opens its own TLS connection to the real host,
//! verified against the host's trust store. Only those hosts: every other
//! connection stays end-to-end.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// The sandbox's CA and the configurations made from it.
pub struct Interceptor {
    ca_pem: String,
    /// The guest's trust store: its own, with the CA added.
    guest_bundle: Vec<u8>,
    /// Java's trust stores of the guest (path, contents), the CA added.
    java_stores: Vec<(String, Vec<u8>)>,
    ca_cert: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
    provider: Arc<rustls::crypto::CryptoProvider>,
    client: Arc<rustls::ClientConfig>,
    /// One server configuration per host name, made on first use.
    servers: Mutex<HashMap<String, Arc<rustls::ServerConfig>>>,
}

impl std::fmt::Debug for Interceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Interceptor")
    }
}

/// How many server configurations (host names) are kept.
const MAX_NAMES: usize = 1024;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Interceptor {
    /// A new CA for one sandbox; `roots_pem` is the host's trust store
    /// (PEM certificates) that real hosts are verified against.
    pub fn new(roots_pem: &[u8]) -> Result<Interceptor, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(roots_pem) {
            let c = c.map_err(|e| format!("the host's trust store: {e}"))?;
            // Certificates the verifier cannot use are skipped, as
            // OpenSSL skips them.
            let _ = roots.add(c);
        }
        if roots.is_empty() {
            return Err("the host's trust store holds no certificate".into());
        }
        let mut client = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        let ca_key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
        let mut params = rcgen::CertificateParams::default();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "ferrovisor sandbox CA");
        let now = SystemTime::now();
        params.not_before = (now - Duration::from_secs(86_400)).into();
        params.not_after = (now + Duration::from_secs(365 * 86_400)).into();
        let ca_cert = params.self_signed(&ca_key).map_err(|e| e.to_string())?;
        Ok(Interceptor {
            guest_bundle: ca_cert.pem().into_bytes(),
            java_stores: Vec::new(),
            ca_pem: ca_cert.pem(),
            ca_cert,
            ca_key,
            provider,
            client: Arc::new(client),
            servers: Mutex::default(),
        })
    }

    /// The CA's certificate, for the guest's trust store.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The interceptor, with the guest's trust store (`existing`, PEM)
    /// plus the CA as what the guest sees (see [`Interceptor::guest_bundle`]).
    pub fn with_guest_trust(mut self, existing: &[u8]) -> Interceptor {
        let mut b = existing.to_vec();
        if !b.is_empty() && !b.ends_with(b"\n") {
            b.push(b'\n');
        }
        b.extend_from_slice(self.ca_pem.as_bytes());
        self.guest_bundle = b;
        self
    }

    /// The trust store the guest sees.
    pub fn guest_bundle(&self) -> &[u8] {
        &self.guest_bundle
    }

    /// The interceptor, with the guest's Java trust stores (`found`: its
    /// path in the guest and what the guest's root holds there) made to
    /// trust the CA too: a JKS store is added to, any other made from the
    /// guest's PEM store (call [`Interceptor::with_guest_trust`] first).
    pub fn with_java_stores(mut self, found: Vec<(String, Vec<u8>)>) -> Interceptor {
        let bundle: Vec<CertificateDer> = CertificateDer::pem_slice_iter(&self.guest_bundle)
            .filter_map(Result::ok)
            .filter(|c| c.as_ref() != self.ca_cert.der().as_ref())
            .collect();
        let bundle: Vec<&[u8]> = bundle.iter().map(|c| c.as_ref()).collect();
        let millis = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.java_stores = found
            .into_iter()
            .filter_map(|(path, existing)| {
                let store = crate::jks::trust_store(
                    &existing,
                    &bundle,
                    self.ca_cert.der(),
                    "ferrovisor-sandbox-ca",
                    millis,
                )?;
                Some((path, store))
            })
            .collect();
        self
    }

    /// Java's trust stores the guest sees (path, contents).
    pub fn java_stores(&self) -> &[(String, Vec<u8>)] {
        &self.java_stores
    }

    /// The guest-facing configuration for `name`: a certificate for it,
    /// signed by the sandbox's CA, offering HTTP/1.1 only (the Sentry reads
    /// HTTP/1 requests).
    fn server(&self, name: &str) -> Result<Arc<rustls::ServerConfig>, String> {
        if let Some(c) = lock(&self.servers).get(name) {
            return Ok(c.clone());
        }
        let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
        let mut params =
            rcgen::CertificateParams::new(vec![name.to_string()]).map_err(|e| e.to_string())?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let now = SystemTime::now();
        params.not_before = (now - Duration::from_secs(86_400)).into();
        params.not_after = (now + Duration::from_secs(30 * 86_400)).into();
        let cert = params
            .signed_by(&key, &self.ca_cert, &self.ca_key)
            .map_err(|e| e.to_string())?;
        let chain = vec![cert.der().clone(), self.ca_cert.der().clone()];
        let key = PrivateKeyDer::try_from(key.serialize_der()).map_err(|e| e.to_string())?;
        let mut config = rustls::ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| e.to_string())?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        let mut servers = lock(&self.servers);
        if servers.len() >= MAX_NAMES {
            servers.clear();
        }
        servers.insert(name.to_string(), config.clone());
        Ok(config)
    }

    /// The guest's side of an intercepted connection to `name`.
    pub(crate) fn guest_side(&self, name: &str) -> Result<End, String> {
        let conn = rustls::ServerConnection::new(self.server(name)?).map_err(|e| e.to_string())?;
        Ok(End::new(rustls::Connection::Server(conn)))
    }

    /// The host's side: TLS to `name` over `stream`, handshake done
    /// (certificate verified) when this returns.
    pub(crate) fn host_side(&self, name: &str, stream: &mut impl ReadWrite) -> Result<End, String> {
        let server = ServerName::try_from(name.to_string()).map_err(|e| e.to_string())?;
        let mut conn = rustls::ClientConnection::new(self.client.clone(), server)
            .map_err(|e| e.to_string())?;
        // By hand rather than `complete_io`, which writes with writev (the
        // Sentry's filter has plain writes only).
        let mut buf = vec![0u8; PIECE + 512];
        loop {
            while conn.wants_write() {
                let mut out = Vec::new();
                conn.write_tls(&mut out).map_err(|e| e.to_string())?;
                stream.write_all(&out).map_err(|e| e.to_string())?;
            }
            if !conn.is_handshaking() {
                break;
            }
            let n = stream.read(&mut buf).map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("the host closed the connection during the handshake".into());
            }
            let mut data = &buf[..n];
            while !data.is_empty() {
                conn.read_tls(&mut data).map_err(|e| e.to_string())?;
                conn.process_new_packets().map_err(|e| e.to_string())?;
            }
        }
        Ok(End::new(rustls::Connection::Client(conn)))
    }
}

/// Read and Write, for the handshake.
pub(crate) trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// One TLS end of an intercepted connection, shared by the two relay
/// threads: records it makes leave in the order it made them (`out` is
/// held from making to writing), and no I/O happens under `conn`.
pub(crate) struct End {
    conn: Mutex<rustls::Connection>,
    out: Mutex<()>,
}

/// Largest piece of plaintext handed to rustls at once (one record).
const PIECE: usize = 16 << 10;

impl End {
    fn new(conn: rustls::Connection) -> End {
        End {
            conn: Mutex::new(conn),
            out: Mutex::new(()),
        }
    }

    /// Takes records from the peer; returns the plaintext in them, writing
    /// what TLS answers (handshake, alerts) with `sink`. `Ok` with `eof`
    /// set once the peer said close_notify.
    pub(crate) fn feed(
        &self,
        mut data: &[u8],
        sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<(Vec<u8>, bool)> {
        let mut plain = Vec::new();
        let mut eof = false;
        while !data.is_empty() {
            let mut c = lock(&self.conn);
            c.read_tls(&mut data)?;
            let state = c.process_new_packets().map_err(|e| {
                // The alert for the peer goes out before the error.
                let mut alert = Vec::new();
                let _ = c.write_tls(&mut alert);
                drop_then(&alert, sink);
                io::Error::new(io::ErrorKind::InvalidData, e)
            })?;
            let n = state.plaintext_bytes_to_read();
            if n > 0 {
                let at = plain.len();
                plain.resize(at + n, 0);
                c.reader().read_exact(&mut plain[at..])?;
            }
            eof |= state.peer_has_closed();
        }
        self.flush(sink)?;
        Ok((plain, eof))
    }

    /// Encrypts `plain` for the peer and writes the records with `sink`.
    pub(crate) fn send(
        &self,
        plain: &[u8],
        sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        let _o = lock(&self.out);
        for piece in plain.chunks(PIECE) {
            let mut records = Vec::new();
            {
                let mut c = lock(&self.conn);
                c.writer().write_all(piece)?;
                while c.wants_write() {
                    c.write_tls(&mut records)?;
                }
            }
            sink(&records)?;
        }
        Ok(())
    }

    /// close_notify for the peer.
    pub(crate) fn close(&self, sink: &mut dyn FnMut(&[u8]) -> io::Result<()>) {
        let _o = lock(&self.out);
        let mut records = Vec::new();
        {
            let mut c = lock(&self.conn);
            c.send_close_notify();
            while c.wants_write() {
                if c.write_tls(&mut records).is_err() {
                    break;
                }
            }
        }
        let _ = sink(&records);
    }

    /// Writes what TLS has to say, if anything.
    fn flush(&self, sink: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        if !lock(&self.conn).wants_write() {
            return Ok(());
        }
        let _o = lock(&self.out);
        let mut records = Vec::new();
        {
            let mut c = lock(&self.conn);
            while c.wants_write() {
                c.write_tls(&mut records)?;
            }
        }
        sink(&records)
    }
}

fn drop_then(alert: &[u8], sink: &mut dyn FnMut(&[u8]) -> io::Result<()>) {
    if !alert.is_empty() {
        let _ = sink(alert);
    }
}

/// A fatal TLS alert record (TLS 1.2 framing, as TLS 1.3 also sends it
/// before keys exist): the answer to a ClientHello the Sentry refuses.
pub(crate) fn alert(description: u8) -> [u8; 7] {
    [0x15, 3, 3, 0, 2, 2, description]
}

/// `unrecognized_name`: the name is not allowed here.
pub(crate) const UNRECOGNIZED_NAME: u8 = 112;
/// `handshake_failure`: the real host could not be reached over TLS.
pub(crate) const HANDSHAKE_FAILURE: u8 = 40;

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    /// A CA and a host certificate of a test's own, as a real host has.
    fn upstream() -> (String, Arc<rustls::ServerConfig>) {
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut p = rcgen::CertificateParams::default();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = p.self_signed(&ca_key).expect("ca");
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["api.test".into()])
            .expect("params")
            .signed_by(&key, &ca, &ca_key)
            .expect("cert");
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::try_from(key.serialize_der()).expect("key"),
        )
        .expect("config");
        (ca.pem(), Arc::new(config))
    }

    /// What Java's `keytool` lists of `store`: its entry count, and the
    /// type of the sandbox CA's entry if there is one.
    fn keytool_list(store: &[u8]) -> (usize, Option<String>) {
        assert!(
            std::path::Path::new("/usr/bin/keytool").exists(),
            "no /usr/bin/keytool: install openjdk-17-jre-headless (.ci/run does)"
        );
        let path = std::env::temp_dir().join(format!("ferrovisor-jks-{}", std::process::id()));
        std::fs::write(&path, store).expect("write the store");
        let out = std::process::Command::new("keytool")
            .args(["-list", "-storepass", "changeit", "-keystore"])
            .arg(&path)
            .output()
            .expect("keytool");
        let _ = std::fs::remove_file(&path);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "keytool: {text}");
        let count = text
            .lines()
            .find_map(|l| l.strip_prefix("Your keystore contains "))
            .and_then(|l| l.split(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no count in {text}"));
        let ca = text
            .lines()
            .find(|l| l.starts_with("ferrovisor-sandbox-ca,"))
            .and_then(|l| {
                Some(
                    l.trim_end()
                        .trim_end_matches(',')
                        .rsplit(", ")
                        .next()?
                        .into(),
                )
            });
        (count, ca)
    }

    #[test]
    fn java_reads_the_guests_trust_stores_with_the_sandbox_ca() {
        let (ca, _) = upstream();
        let (other, _) = upstream();
        let guest_pem = format!("{ca}{other}");
        let debian = "/etc/ssl/certs/java/cacerts";
        let existing = std::fs::read(debian).unwrap_or_else(|e| {
            panic!("{debian}: {e} (install openjdk-17-jre-headless, as .ci/run does)")
        });
        let ic = Interceptor::new(ca.as_bytes())
            .expect("interceptor")
            .with_guest_trust(guest_pem.as_bytes())
            .with_java_stores(vec![
                ("/made".into(), b"\x30\x82 not JKS".to_vec()),
                ("/added".into(), existing.clone()),
            ]);
        let stores = ic.java_stores();
        assert_eq!(stores.len(), 2);
        let trusted = Some("trustedCertEntry".to_string());
        // Made from the guest's PEM store: its two roots and the CA.
        assert_eq!(keytool_list(&stores[0].1), (3, trusted.clone()));
        // Debian's own store, with one entry more.
        let (before, none) = keytool_list(&existing);
        assert_eq!(none, None);
        assert_eq!(keytool_list(&stores[1].1), (before + 1, trusted));
    }

    #[test]
    fn the_host_is_verified_and_the_guest_trusts_the_sandbox_ca() {
        let (ca, server) = upstream();
        let ic = Interceptor::new(ca.as_bytes()).expect("interceptor");
        // The real host, over a socket pair.
        let (mut a, b) = UnixStream::pair().expect("pair");
        let t = std::thread::spawn(move || {
            let conn = rustls::ServerConnection::new(server).expect("conn");
            let mut s = rustls::StreamOwned::new(conn, b);
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).expect("read");
            s.write_all(b"pong!").expect("write");
            s.flush().expect("flush");
            buf
        });
        let host = ic.host_side("api.test", &mut a).expect("verified");
        let mut records = Vec::new();
        host.send(b"ping!", &mut |r| {
            records.extend_from_slice(r);
            Ok(())
        })
        .expect("send");
        a.write_all(&records).expect("write");
        assert_eq!(&t.join().expect("server"), b"ping!");
        let mut got = Vec::new();
        while got.len() < 5 {
            let mut buf = [0u8; 4096];
            let n = a.read(&mut buf).expect("read");
            assert!(n > 0);
            let (p, _) = host
                .feed(&buf[..n], &mut |r| {
                    a.try_clone().and_then(|mut w| w.write_all(r))
                })
                .expect("feed");
            got.extend(p);
        }
        assert_eq!(got, b"pong!");

        // A host whose certificate the trust store does not vouch for.
        let (_, other) = upstream();
        let (mut a, b) = UnixStream::pair().expect("pair");
        std::thread::spawn(move || {
            let conn = rustls::ServerConnection::new(other).expect("conn");
            let mut s = rustls::StreamOwned::new(conn, b);
            let _ = s.read(&mut [0u8; 1]);
        });
        assert!(ic.host_side("api.test", &mut a).is_err());

        // The guest's side: a client trusting only the sandbox CA accepts it.
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(ic.ca_pem().as_bytes()) {
            roots.add(c.expect("pem")).expect("add");
        }
        let client = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        let mut c = rustls::ClientConnection::new(
            Arc::new(client),
            ServerName::try_from("api.test").expect("name"),
        )
        .expect("client");
        let guest = ic.guest_side("api.test").expect("guest side");
        // Pump records between the two until the handshake is done.
        for _ in 0..10 {
            let mut to_server = Vec::new();
            while c.wants_write() {
                c.write_tls(&mut to_server).expect("write");
            }
            let mut to_client = Vec::new();
            guest
                .feed(&to_server, &mut |r| {
                    to_client.extend_from_slice(r);
                    Ok(())
                })
                .expect("server side");
            c.read_tls(&mut &to_client[..]).expect("read");
            c.process_new_packets()
                .expect("the guest accepts the certificate");
        }
        assert!(!c.is_handshaking());
    }
}
