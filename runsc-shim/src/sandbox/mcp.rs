//! `ferrovisor mcp`: a Model Context Protocol server on stdio (JSON-RPC
//! 2.0, one message per line) over one sandbox, made from its flags when
//! it starts and ended when its input ends. Its tools run commands and
//! read, write and list files in that sandbox.

use std::io::{BufRead, Write};

use serde_json::{json, Value};

use super::{CreateOptions, Error, ExecOptions, Output, Store, Stream};

/// The handshake revisions this server speaks; a client asking for
/// another gets the newest.
const VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Output longer than this is cut (in the middle), so that one command
/// cannot flood the model's context.
const MAX_OUTPUT: usize = 100_000;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

fn tools() -> Value {
    let path = json!({"type": "string", "description": "an absolute path in the sandbox"});
    json!([
        {
            "name": "run_command",
            "title": "Run a command",
            "description": "Run a shell command (sh -c) in the sandbox and return its output and exit status. The sandbox keeps its files and background processes between calls.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "the command line, for sh -c"},
                    "cwd": {"type": "string", "description": "working directory (default /)"},
                    "timeout": {"type": "number", "description": "seconds before it is killed (default 600)"},
                    "stdin": {"type": "string", "description": "text for its standard input"}
                },
                "required": ["command"]
            },
            "outputSchema": {
                "type": "object",
                "properties": {
                    "status": {"type": "integer"},
                    "stdout": {"type": "string"},
                    "stderr": {"type": "string"},
                    "timed_out": {"type": "boolean"}
                },
                "required": ["status", "stdout", "stderr", "timed_out"]
            }
        },
        {
            "name": "read_file",
            "title": "Read a file",
            "description": "Return a file's contents from the sandbox, as text.",
            "inputSchema": {"type": "object", "properties": {"path": path}, "required": ["path"]}
        },
        {
            "name": "write_file",
            "title": "Write a file",
            "description": "Write text to a file in the sandbox, making the folders on its way.",
            "inputSchema": {
                "type": "object",
                "properties": {"path": path, "content": {"type": "string"}},
                "required": ["path", "content"]
            }
        },
        {
            "name": "list_directory",
            "title": "List a folder",
            "description": "List a folder of the sandbox: one line per entry, its kind, size and name.",
            "inputSchema": {"type": "object", "properties": {"path": path}, "required": ["path"]}
        },
        {
            "name": "snapshot",
            "title": "Snapshot the sandbox",
            "description": "Save the running sandbox into a host folder; it runs on. `ferrovisor sandbox create --from IMAGE` starts a copy where it stood.",
            "inputSchema": {
                "type": "object",
                "properties": {"image": {"type": "string", "description": "host folder for the image"}},
                "required": ["image"]
            }
        },
        {
            "name": "fork",
            "title": "Fork the sandbox",
            "description": "Make a sandbox of the given name as a copy of this one, for `ferrovisor sandbox exec` (ended with this session).",
            "inputSchema": {
                "type": "object",
                "properties": {"name": {"type": "string", "description": "the copy's name"}},
                "required": ["name"]
            }
        }
    ])
}

/// A tool's answer: text for the model, structured content when the tool
/// declares it, and whether it failed.
struct ToolResult {
    text: String,
    structured: Option<Value>,
    error: bool,
}

impl ToolResult {
    fn ok(text: String) -> ToolResult {
        ToolResult {
            text,
            structured: None,
            error: false,
        }
    }

    fn failed(e: impl std::fmt::Display) -> ToolResult {
        ToolResult {
            text: e.to_string(),
            structured: None,
            error: true,
        }
    }

    fn to_value(&self) -> Value {
        let mut v = json!({
            "content": [{"type": "text", "text": self.text}],
            "isError": self.error,
        });
        if let Some(s) = &self.structured {
            v["structuredContent"] = s.clone();
        }
        v
    }
}

fn cut(text: &[u8]) -> String {
    let t = String::from_utf8_lossy(text);
    if t.len() <= MAX_OUTPUT {
        return t.into_owned();
    }
    let mut head = MAX_OUTPUT / 2;
    while !t.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = t.len() - MAX_OUTPUT / 2;
    while !t.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}\n[... {} bytes left out ...]\n{}",
        &t[..head],
        tail - head,
        &t[tail..]
    )
}

/// The server: its sandbox, and whether the client has said `initialize`.
pub struct Server {
    store: Store,
    name: String,
    /// sandboxes `fork` made, ended with the session
    forks: std::sync::Mutex<Vec<String>>,
}

impl Server {
    /// Makes the session's sandbox.
    pub fn start(store: Store, name: String, options: &CreateOptions) -> Result<Server, Error> {
        let (_, child) = store.create(&name, options)?;
        // The sandbox's host process is this one's child: reaped when it ends.
        std::thread::spawn(move || {
            let mut child = child;
            let _ = child.wait();
        });
        Ok(Server {
            store,
            name,
            forks: Default::default(),
        })
    }

    /// Ends the sandbox.
    pub fn end(&self) {
        let forks = std::mem::take(&mut *self.forks.lock().unwrap_or_else(|e| e.into_inner()));
        for name in std::iter::once(&self.name).chain(&forks) {
            if let Err(e) = self.store.remove(name) {
                eprintln!("ferrovisor: mcp: ending sandbox {name:?}: {e}");
            }
        }
    }

    /// Answers messages from `input` on `output` until `input` ends.
    pub fn run(&self, input: impl BufRead, mut output: impl Write) -> std::io::Result<()> {
        for line in input.lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            if let Some(answer) = self.message(&line) {
                let mut text = serde_json::to_vec(&answer).unwrap_or_default();
                text.push(b'\n');
                output.write_all(&text)?;
                output.flush()?;
            }
        }
        Ok(())
    }

    /// The answer to one message; none for a notification.
    fn message(&self, line: &str) -> Option<Value> {
        let msg: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => return Some(error(Value::Null, PARSE_ERROR, &format!("not JSON: {e}"))),
        };
        let id = msg.get("id").cloned();
        let method = msg.get("method").and_then(Value::as_str);
        let (Some(method), true) = (method, msg.get("jsonrpc") == Some(&json!("2.0"))) else {
            // A response to us (we send no requests), or garbage.
            return match (id, msg.get("result").or(msg.get("error"))) {
                (_, Some(_)) => None,
                (id, None) => Some(error(
                    id.unwrap_or(Value::Null),
                    INVALID_REQUEST,
                    "a JSON-RPC 2.0 request has \"jsonrpc\":\"2.0\" and a method",
                )),
            };
        };
        // Notifications (`notifications/initialized`, cancellations) get
        // no answer.
        let id = id?;
        let params = msg.get("params").cloned().unwrap_or(json!({}));
        let result = match method {
            "initialize" => Ok(self.initialize(&params)),
            "ping" => Ok(json!({})),
            "tools/list" => Ok(json!({"tools": tools()})),
            "tools/call" => self.call(&params),
            m => Err((METHOD_NOT_FOUND, format!("no method {m:?}"))),
        };
        Some(match result {
            Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
            Err((code, why)) => error(id, code, &why),
        })
    }

    fn initialize(&self, params: &Value) -> Value {
        let asked = params.get("protocolVersion").and_then(Value::as_str);
        let version = asked
            .filter(|v| VERSIONS.contains(v))
            .unwrap_or(VERSIONS[VERSIONS.len() - 1]);
        json!({
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": false}},
            "serverInfo": {"name": "ferrovisor", "title": "ferrovisor sandbox", "version": env!("CARGO_PKG_VERSION")},
            "instructions": format!(
                "Every tool acts in one ferrovisor sandbox ({:?}), a Linux machine of its own: files and background processes persist between calls; nothing outside it is reachable unless its rules allow.",
                self.name
            ),
        })
    }

    fn call(&self, params: &Value) -> Result<Value, (i64, String)> {
        let name = params.get("name").and_then(Value::as_str).ok_or((
            INVALID_PARAMS,
            "tools/call needs the tool's name".to_string(),
        ))?;
        let args = params.get("arguments").cloned().unwrap_or(json!({}));
        let text = |key: &str| -> Result<String, (i64, String)> {
            args.get(key)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or((INVALID_PARAMS, format!("{name} needs {key:?} (a string)")))
        };
        let r = match name {
            "run_command" => {
                let command = text("command")?;
                let opts = ExecOptions {
                    args: vec!["sh".into(), "-c".into(), command],
                    cwd: args.get("cwd").and_then(Value::as_str).map(str::to_string),
                    timeout: Some(args.get("timeout").and_then(Value::as_f64).unwrap_or(600.0)),
                    ..Default::default()
                };
                let stdin = args
                    .get("stdin")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .as_bytes()
                    .to_vec();
                self.run_command(&opts, stdin)
            }
            "read_file" => match self.store.read_file(&self.name, &text("path")?) {
                Ok(d) => ToolResult::ok(cut(&d)),
                Err(e) => ToolResult::failed(e),
            },
            "write_file" => {
                let (path, content) = (text("path")?, text("content")?);
                let n = content.len();
                match self
                    .store
                    .write_file(&self.name, &path, content.into_bytes(), None)
                {
                    Ok(()) => ToolResult::ok(format!("wrote {n} bytes to {path}")),
                    Err(e) => ToolResult::failed(e),
                }
            }
            "list_directory" => match self.store.list_dir(&self.name, &text("path")?) {
                Ok(entries) => ToolResult::ok(
                    entries
                        .iter()
                        .map(|e| format!("{:<7} {:>10}  {}\n", e.kind, e.size, e.name))
                        .collect(),
                ),
                Err(e) => ToolResult::failed(e),
            },
            "snapshot" => {
                let image = text("image")?;
                match self
                    .store
                    .snapshot(&self.name, std::path::Path::new(&image))
                {
                    Ok(_) => ToolResult::ok(format!("saved into {image}")),
                    Err(e) => ToolResult::failed(e),
                }
            }
            "fork" => {
                let new = text("name")?;
                match self.store.fork(&self.name, &new) {
                    Ok((_, mut child)) => {
                        std::thread::spawn(move || {
                            let _ = child.wait();
                        });
                        self.forks
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(new.clone());
                        ToolResult::ok(format!("made sandbox {new}"))
                    }
                    Err(e) => ToolResult::failed(e),
                }
            }
            other => return Err((INVALID_PARAMS, format!("no tool {other:?}"))),
        };
        Ok(r.to_value())
    }

    fn run_command(&self, opts: &ExecOptions, stdin: Vec<u8>) -> ToolResult {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let r = self
            .store
            .exec_streaming(&self.name, opts, stdin, |o| match o {
                Output::Data(Stream::Stdout, d) => out.extend_from_slice(d),
                Output::Data(Stream::Stderr, d) => err.extend_from_slice(d),
                Output::Started(..) => {}
            });
        match r {
            Ok(o) => {
                let (stdout, stderr) = (cut(&out), cut(&err));
                let mut text = stdout.clone();
                if !stderr.is_empty() {
                    text.push_str(&format!("\n[stderr]\n{stderr}"));
                }
                text.push_str(&if o.timed_out {
                    "\n[killed at its timeout]".to_string()
                } else {
                    format!("\n[exit status {}]", o.status)
                });
                ToolResult {
                    text,
                    structured: Some(json!({
                        "status": o.status,
                        "stdout": stdout,
                        "stderr": stderr,
                        "timed_out": o.timed_out,
                    })),
                    // (a command that fails is still an answer)
                    error: o.timed_out,
                }
            }
            Err(e) => ToolResult::failed(e),
        }
    }
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// `ferrovisor mcp`: makes sandbox `name`, serves stdin and stdout until
/// stdin ends or SIGINT or SIGTERM comes, then ends the sandbox.
pub fn serve_stdio(store: Store, name: String, options: &CreateOptions) -> Result<(), Error> {
    crate::sys::mask_signals(&[libc::SIGINT, libc::SIGTERM], true)
        .map_err(Error::io("blocking signals"))?;
    let server = std::sync::Arc::new(Server::start(store, name, options)?);
    let s = server.clone();
    std::thread::spawn(move || {
        if let Ok((sig, _)) = crate::sys::wait_signal(&[libc::SIGINT, libc::SIGTERM]) {
            s.end();
            crate::sys::exit_now(128 + sig);
        }
    });
    let r = server.run(std::io::stdin().lock(), std::io::stdout().lock());
    server.end();
    r.map_err(Error::io("the MCP connection"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_output_is_cut_in_the_middle_on_character_boundaries() {
        let long = "é".repeat(MAX_OUTPUT);
        let c = cut(long.as_bytes());
        assert!(c.len() < MAX_OUTPUT + 100);
        assert!(c.starts_with('é') && c.ends_with('é') && c.contains("bytes left out"));
        assert_eq!(cut(b"short"), "short");
    }
}
