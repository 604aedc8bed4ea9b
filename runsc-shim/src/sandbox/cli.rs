//! `ferrovisor sandbox ...`: the command line over [`Store`].

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::ExitCode;

use super::{CreateOptions, Error, ExecOptions, Store};

/// Long-lived sandboxes: make one, run programs in it, copy files, end it.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Make sandbox NAME and leave it running, for programs to come.
    Create {
        /// 1-63 letters, digits, '-', '_' or '.'
        name: String,
        #[command(flatten)]
        options: Box<CreateOptions>,
    },
    /// Run CMD in sandbox NAME, with this terminal's input and output; exit
    /// with its status.
    Exec {
        name: String,
        /// Working directory in the sandbox (default /).
        #[arg(long, value_name = "DIR")]
        cwd: Option<String>,
        /// NAME=VALUE over the sandbox's environment; repeatable.
        #[arg(long, short = 'e', value_name = "NAME=VALUE")]
        env: Vec<String>,
        /// USER[:GROUP] to run as, names or numbers from the sandbox's
        /// /etc/passwd and /etc/group (default 0:0).
        #[arg(long, short = 'u', value_name = "USER[:GROUP]")]
        user: Option<String>,
        /// Kill the program after SECONDS (status 137).
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<f64>,
        /// Give the program a terminal of the sandbox's own (job control,
        /// ^C, window size), relayed to this one, which must be a terminal.
        #[arg(long, short = 't')]
        tty: bool,
        /// The command and its arguments.
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "CMD"
        )]
        command: Vec<String>,
    },
    /// Copy a file or folder into or out of a sandbox: one side is
    /// NAME:PATH, and DST names the copy itself.
    Cp { src: String, dst: String },
    /// List sandboxes.
    Ls {
        /// Print JSON, one object per sandbox, in an array.
        #[arg(long)]
        json: bool,
    },
    /// Print the changes in directory PATH of sandbox NAME as they come,
    /// one line each (KIND NAME: create, write, remove, moved_from,
    /// moved_to, chmod; a folder's name ends in /), until the directory
    /// goes or the sandbox ends.
    Watch {
        name: String,
        path: String,
        /// Print JSON lines instead.
        #[arg(long)]
        json: bool,
        /// The folders below it too, each watched as it appears (its first
        /// entries told as made); names are paths from PATH.
        #[arg(long, short = 'r')]
        recursive: bool,
    },
    /// Print what the sandbox's host process said (errors, why it ended).
    Logs { name: String },
    /// End sandbox NAME (its programs killed); `ls` still shows it.
    Stop { name: String },
    /// End sandboxes and forget them.
    Rm {
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Reach the guest's 127.0.0.1:PORT at the host's 127.0.0.1:HOST_PORT
    /// (printed), until ^C or the sandbox ends.
    Port {
        name: String,
        port: u16,
        /// The host's port (default: any free one).
        #[arg(long = "host-port", value_name = "HOST_PORT", default_value_t = 0)]
        host_port: u16,
    },
    /// Save running sandbox NAME into folder IMAGE; it runs on (`create
    /// --from IMAGE` makes a sandbox from it).
    Snapshot { name: String, image: PathBuf },
    /// Make sandbox NEW as a copy of running sandbox NAME.
    Fork { name: String, new: String },
    /// Remove the unpacked images (`create --image`) that no sandbox uses;
    /// print each with the space it held.
    Prune,
}

fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("ferrovisor: {e}");
    ExitCode::from(1)
}

/// Runs `cmd` over the sandboxes of `store`.
pub fn run(store: &Store, cmd: Command) -> ExitCode {
    match cmd {
        Command::Create { name, options } => match store.create(&name, &options) {
            Ok(_) => {
                println!("{name}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        Command::Exec {
            name,
            cwd,
            env,
            user,
            timeout,
            tty,
            command,
        } => {
            let opts = ExecOptions {
                args: command,
                env,
                cwd,
                user,
                timeout,
                stdin: None,
                tty,
                size: None,
            };
            let (stdin, stdout, stderr) = (std::io::stdin(), std::io::stdout(), std::io::stderr());
            // Raw while the program runs: its terminal's line discipline
            // is the sandbox's (put back when this ends).
            if tty && !std::io::IsTerminal::is_terminal(&stdin) {
                eprintln!(
                    "ferrovisor: sandbox exec --tty: standard input is not a terminal (leave out \
                     --tty)"
                );
                return ExitCode::from(2);
            }
            let _cooked = match tty.then(crate::confine::Tty::make_raw).transpose() {
                Ok(t) => t.map(Cooked),
                Err(e) => {
                    eprintln!(
                        "ferrovisor: sandbox exec --tty: putting the terminal in raw mode: {e}"
                    );
                    return ExitCode::from(2);
                }
            };
            let running = match store.exec(
                &name,
                &opts,
                [stdin.as_fd(), stdout.as_fd(), stderr.as_fd()],
            ) {
                Ok(r) => r,
                Err(e) => return fail(e),
            };
            if let Err(e) = running.forward_host_signals() {
                return fail(e);
            }
            match running.wait() {
                Ok(o) => {
                    if o.timed_out {
                        eprintln!("ferrovisor: killed at its --timeout");
                    }
                    ExitCode::from(o.status.clamp(0, 255) as u8)
                }
                Err(e) => fail(e),
            }
        }
        Command::Cp { src, dst } => {
            let side = |s: &str| -> Option<(String, String)> {
                let (n, p) = s.split_once(':')?;
                (super::check_name(n).is_ok() && p.starts_with('/')).then(|| (n.into(), p.into()))
            };
            let r = match (side(&src), side(&dst)) {
                (None, Some((n, p))) => store.copy_in(std::path::Path::new(&src), &n, &p),
                (Some((n, p)), None) => store.copy_out(&n, &p, std::path::Path::new(&dst)),
                _ => Err(Error::Usage(
                    "cp: give one side as NAME:/PATH and the other as a host path".into(),
                )),
            };
            r.map_or_else(fail, |()| ExitCode::SUCCESS)
        }
        Command::Ls { json } => {
            let list = match store.list() {
                Ok(l) => l,
                Err(e) => return fail(e),
            };
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&list).unwrap_or_default()
                );
                return ExitCode::SUCCESS;
            }
            println!(
                "{:<24} {:<8} {:<21} {:>5}  NOTE",
                "NAME", "STATE", "CREATED", "TASKS"
            );
            for i in list {
                let tasks = i.tasks.map(|t| t.to_string()).unwrap_or_else(|| "-".into());
                println!(
                    "{:<24} {:<8} {:<21} {:>5}  {}",
                    i.name,
                    i.state,
                    i.created,
                    tasks,
                    i.ended.unwrap_or_default()
                );
            }
            ExitCode::SUCCESS
        }
        Command::Watch {
            name,
            path,
            json,
            recursive,
        } => {
            use std::io::Write;
            let changes = match store.watch(&name, &path, recursive) {
                Ok(w) => w,
                Err(e) => return fail(e),
            };
            let mut out = std::io::stdout();
            for c in changes {
                let line = if json {
                    serde_json::to_string(&c).unwrap_or_default()
                } else {
                    let slash = if c.dir { "/" } else { "" };
                    format!("{} {}{slash}", c.kind, c.name)
                        .trim_end()
                        .to_string()
                };
                if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                    break;
                }
            }
            ExitCode::SUCCESS
        }
        Command::Logs { name } => match store.logs(&name) {
            Ok(l) => {
                use std::io::Write;
                let _ = std::io::stdout().write_all(&l);
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        Command::Stop { name } => store.stop(&name).map_or_else(fail, |()| ExitCode::SUCCESS),
        Command::Rm { names } => {
            let mut code = ExitCode::SUCCESS;
            for n in names {
                if let Err(e) = store.remove(&n) {
                    code = fail(e);
                }
            }
            code
        }
        Command::Port {
            name,
            port,
            host_port,
        } => {
            let f = match store.forward(&name, port, host_port) {
                Ok(f) => f,
                Err(e) => return fail(e),
            };
            println!("{}", f.host);
            use std::io::Write;
            let _ = std::io::stdout().flush();
            while store.info(&name).is_ok_and(|i| i.state == "running") {
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            drop(f);
            fail(format_args!("the sandbox {name:?} has ended"))
        }
        Command::Snapshot { name, image } => match store.snapshot(&name, &image) {
            Ok(_) => {
                println!("{}", image.display());
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        Command::Fork { name, new } => match store.fork(&name, &new) {
            Ok(_) => {
                println!("{new}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        Command::Prune => match store.prune_images() {
            Ok(gone) => {
                for p in &gone {
                    println!(
                        "removed image {} ({:.1} MiB)",
                        p.key,
                        p.bytes as f64 / 1048576.0
                    );
                }
                let total: u64 = gone.iter().map(|p| p.bytes).sum();
                println!("{} images, {:.1} MiB", gone.len(), total as f64 / 1048576.0);
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
    }
}

/// The terminal, put back as it was when dropped.
struct Cooked(crate::confine::Tty);

impl Drop for Cooked {
    fn drop(&mut self) {
        self.0.restore();
    }
}
