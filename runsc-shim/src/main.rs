//! `ferrovisor`: the command-line front end. Today it has `do`, which runs a
//! host command inside a sandbox whose root is a read-only view of a host
//! directory.

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// A sandbox for untrusted code: a user-space kernel between the program and
/// the host.
#[derive(Debug, Parser)]
#[command(name = "ferrovisor", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run CMD in a sandbox whose root is a read-only view of a host directory.
    Do(DoArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum PlatformKind {
    /// every system call stops the guest under PTRACE_SYSEMU
    Ptrace,
}

#[derive(Debug, clap::Args)]
struct DoArgs {
    /// Host directory to use as the (read-only) root file system.
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// How guest code runs.
    #[arg(long, value_enum, default_value = "ptrace")]
    platform: PlatformKind,
    /// Write the Sentry's debug log (including unsupported system calls) to FILE.
    #[arg(long, value_name = "FILE")]
    debug_log: Option<PathBuf>,
    /// Host name the guest sees.
    #[arg(long, default_value = "ferrovisor")]
    hostname: String,
    /// The command (looked up in the guest's PATH) and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

fn fail(code: u8, msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("ferrovisor: {msg}");
    ExitCode::from(code)
}

fn init_logging(path: &std::path::Path) -> Result<(), String> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("--debug-log {}: {e}", path.display()))?;
    tracing_subscriber::fmt()
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .with_max_level(tracing::Level::DEBUG)
        .init();
    Ok(())
}

fn run_do(args: DoArgs) -> ExitCode {
    if let Some(log) = &args.debug_log {
        if let Err(e) = init_logging(log) {
            return fail(2, e);
        }
    }
    let root = match std::fs::File::open(&args.root) {
        Ok(f) => f,
        Err(e) => {
            return fail(
                2,
                format_args!(
                    "--root {}: {e} (give an existing directory to use as the sandbox's root)",
                    args.root.display()
                ),
            );
        }
    };
    match root.metadata() {
        Ok(m) if m.is_dir() => {}
        _ => {
            return fail(
                2,
                format_args!("--root {}: not a directory", args.root.display()),
            )
        }
    }
    // The working directory carries over when it exists inside the root.
    let cwd = std::env::current_dir()
        .ok()
        .and_then(|c| {
            if args.root == std::path::Path::new("/") {
                Some(c)
            } else {
                None
            }
        })
        .map(|c| c.as_os_str().as_bytes().to_vec())
        .unwrap_or_else(|| b"/".to_vec());
    let config = sentry::SandboxConfig {
        root: root.as_fd(),
        argv: args
            .command
            .into_iter()
            .map(OsStringExt::into_vec)
            .collect(),
        envp: std::env::vars_os()
            .map(|(k, v)| {
                let mut e = k.into_vec();
                e.push(b'=');
                e.extend(v.into_vec());
                e
            })
            .collect(),
        cwd,
        hostname: args.hostname,
    };
    let platform = args.platform;
    let result = sentry::run(config, |memfd| match platform {
        PlatformKind::Ptrace => platform_ptrace::PtracePlatform::new(memfd)
            .map(|p| Box::new(p) as Box<dyn platform::Platform>),
    });
    match result {
        Ok(status) => ExitCode::from(status.shell_code() as u8),
        Err(e) => {
            let code = e.exit_code() as u8;
            fail(code, e)
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            let text = e.to_string();
            let first = text
                .lines()
                .next()
                .unwrap_or("invalid arguments")
                .trim_start_matches("error: ");
            return fail(2, format_args!("{first} (see 'ferrovisor --help')"));
        }
    };
    match cli.command {
        Command::Do(args) => run_do(args),
    }
}
