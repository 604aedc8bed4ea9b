//! `ferrovisor mcp` driven by the official MCP Python SDK (`mcp`, from
//! PyPI, in a venv of the test's own): initialize, tools/list and
//! tools/call for each tool, every message validated by the SDK's
//! protocol types; then malformed messages, answered with JSON-RPC's
//! error codes. See `mcp_client.py`.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{command, run, TempDir};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
/// The SDK release the test was written against.
const MCP_SDK: &str = "mcp==2.3.0";

/// A venv with the SDK, made once per target folder.
fn sdk_python() -> std::path::PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-venv-2.3.0");
    let python = venv.join("bin/python");
    if python.exists() && venv.join("ready").exists() {
        return python;
    }
    let script = format!(
        "rm -rf {v} && /usr/bin/python3 -m venv {v} && {v}/bin/pip install -q --disable-pip-version-check '{MCP_SDK}' && touch {v}/ready",
        v = venv.display()
    );
    let mut cmd = command("sh", &[]);
    cmd.args(["-c", &script]);
    let o = run(cmd, None, Duration::from_secs(600));
    assert_eq!(
        o.status,
        0,
        "installing the MCP SDK from PyPI (pip install {MCP_SDK}) failed: {}",
        common::show(&o)
    );
    python
}

#[test]
fn the_official_mcp_client_drives_every_tool() {
    let python = sdk_python();
    let root = TempDir::new("mcp");
    let mut cmd = command(
        python.to_str().expect("utf-8"),
        &[("PYTHONDONTWRITEBYTECODE", "1")],
    );
    cmd.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client.py"))
        .arg(FERROVISOR)
        .arg(root.path());
    let o = run(cmd, None, Duration::from_secs(300));
    assert_eq!(o.status, 0, "{}", common::show(&o));
    assert_eq!(
        o.stdout,
        "sdk session ok\nraw messages ok\nno sandbox left\n"
    );
}
