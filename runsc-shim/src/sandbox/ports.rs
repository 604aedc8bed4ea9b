//! Guest ports on the host's loopback (`sandbox port`, `POST .../ports`):
//! a host listener whose every connection becomes one from the Sentry to
//! `127.0.0.1:PORT` inside the sandbox, over its control socket. Nothing
//! else of the host's network is opened.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::{Error, Store};

/// A forwarded port, until dropped.
#[derive(Debug)]
pub struct Forward {
    /// where the host reaches it
    pub host: SocketAddr,
    pub guest_port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Forward {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Copies `from` to `to` until `from` ends (or `to` fails).
fn copy(from: &mut impl Read, to: &mut impl Write) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
}

impl Store {
    /// Forwards `127.0.0.1:host_port` (0: any free port) to the guest's
    /// `127.0.0.1:guest_port` in sandbox `name`.
    pub fn forward(&self, name: &str, guest_port: u16, host_port: u16) -> Result<Forward, Error> {
        if guest_port == 0 {
            return Err(Error::Usage("give the guest's port (1-65535)".into()));
        }
        let socket = self.running(name)?;
        let l = TcpListener::bind(("127.0.0.1", host_port))
            .map_err(Error::io(format_args!("127.0.0.1:{host_port}")))?;
        let host = l.local_addr().map_err(Error::io("the listener"))?;
        l.set_nonblocking(true).map_err(Error::io("the listener"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                let client = match l.accept() {
                    Ok((c, _)) => c,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        let _ = crate::sys::poll_readable(l.as_fd(), 200);
                        continue;
                    }
                    Err(_) => continue,
                };
                let socket = socket.clone();
                std::thread::spawn(move || splice(client, &socket, guest_port));
            }
        });
        Ok(Forward {
            host,
            guest_port,
            stop,
            thread: Some(thread),
        })
    }
}

fn splice(client: TcpStream, socket: &std::path::Path, port: u16) {
    let _ = client.set_nonblocking(false);
    let _ = client.set_nodelay(true);
    let Ok(guest) = crate::control::connect_port(socket, port) else {
        // Nothing listens inside: the client sees its connection closed.
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let (Ok(mut c2), Ok(mut g2)) = (client.try_clone(), guest.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        copy(&mut c2, &mut g2);
        let _ = g2.shutdown(Shutdown::Write);
    });
    let (mut guest, mut client) = (guest, client);
    copy(&mut guest, &mut client);
    let _ = client.shutdown(Shutdown::Write);
    let _ = up.join();
}
