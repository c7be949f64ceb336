//! The local control socket: `<state>/ctl.sock`, a Unix stream socket with mode 0600 whose
//! connections are refused unless the peer runs as the socket's owner. One JSON request per
//! connection (`{"agent": ..., "op": ...}`), one JSON answer (`{"ok": ..., "text": ...}`).
//! The server side hands requests to [`Controller`]; the client side is `personad ctl`.
//! Owns the wire format and the socket file only.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinHandle;

use crate::adapters::store::{self, StateDir};
use crate::app::cli::{CtlArgs, CtlCommand, GlobalArgs};
use crate::app::commands::{CmdResult, CommandError};
use crate::app::lifecycle::Lifecycle;
use crate::app::ops::OpError;
use crate::app::ops::controls::{Controller, Op, parse_duration};

/// Largest request accepted.
const MAX_REQUEST: usize = 64 * 1024;

/// Control connections open at once, and how long one may take (a `say` or `stop` answers
/// in well under a second; an idle peer is closed).
const CTL_BUDGET: crate::app::ops::listen::Budget = crate::app::ops::listen::Budget {
    name: "ctl",
    max_connections: 32,
    deadline: std::time::Duration::from_secs(30),
};

/// One request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(flatten)]
    pub op: Op,
}

/// One answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Response {
    pub ok: bool,
    pub text: String,
}

/// Where the socket lives for a state directory (`label`: a shard's, see
/// `cli::socket_label`).
pub(crate) fn socket_path(state: &StateDir, label: Option<&str>) -> PathBuf {
    state.socket_path_for(label)
}

/// Binds the socket (0600) and serves it as a task of `life` until it stops; removes the file at the end.
/// Refuses to start when another daemon answers on it.
pub async fn serve(
    state: &StateDir,
    label: Option<&str>,
    controller: Arc<Controller>,
    life: &Lifecycle,
) -> Result<JoinHandle<()>, OpError> {
    let path = socket_path(state, label);
    store::ensure_private_dir(state.root())?;
    if path.exists() {
        if UnixStream::connect(&path).await.is_ok() {
            return Err(OpError::refused(format!(
                "another personad is running on this state directory (it answers on {})",
                path.display()
            )));
        }
        std::fs::remove_file(&path).map_err(OpError::io(format!(
            "cannot remove the stale socket {}",
            path.display()
        )))?;
    }
    let listener = UnixListener::bind(&path)
        .map_err(OpError::io(format!("cannot bind {}", path.display())))?;
    set_private(&path)?;
    let owner = owner_uid(&path)?;
    tracing::info!(event = "ctl_listening", socket = %path.display(), "control socket ready");
    let connections = life.clone();
    Ok(life.spawn(async move {
        crate::app::ops::listen::serve(listener, CTL_BUDGET, connections, move |stream| {
            handle(stream, Arc::clone(&controller), owner)
        })
        .await;
        let _ = std::fs::remove_file(&path);
    }))
}

fn set_private(path: &Path) -> Result<(), OpError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(OpError::io(
            format!("cannot make {} private", path.display()),
        ))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

fn owner_uid(path: &Path) -> Result<u32, OpError> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path)
        .map(|m| m.uid())
        .map_err(OpError::io(format!("cannot stat {}", path.display())))
}

async fn handle(stream: UnixStream, controller: Arc<Controller>, owner: u32) {
    let peer = stream.peer_cred().map(|c| c.uid());
    let (read, mut write) = stream.into_split();
    let response = match peer {
        Ok(uid) if uid == owner => match read_command(read).await {
            Ok(req) => {
                let agent = req.agent.clone();
                match controller.execute(agent.as_deref(), req.op).await {
                    Ok(text) => Response { ok: true, text },
                    Err(e) => Response {
                        ok: false,
                        text: e.to_string(),
                    },
                }
            }
            Err(e) => Response {
                ok: false,
                text: e.to_string(),
            },
        },
        Ok(uid) => {
            // Take the request off the socket first, so the peer reads the refusal.
            let _ = read_command(read).await;
            tracing::warn!(
                event = "ctl_refused",
                uid,
                "control connection from another user refused"
            );
            Response {
                ok: false,
                text: "refused: the control socket serves only its owner".into(),
            }
        }
        Err(e) => Response {
            ok: false,
            text: format!("cannot identify the peer: {e}"),
        },
    };
    let mut line = serde_json::to_string(&response).unwrap_or_default();
    line.push('\n');
    let _ = write.write_all(line.as_bytes()).await;
    let _ = write.shutdown().await;
}

/// How long a connected peer has to send its request (`personad ctl` sends it at once): an
/// idle connection is closed after this, freeing its slot.
const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

async fn read_command(read: tokio::net::unix::OwnedReadHalf) -> Result<Request, OpError> {
    let mut reader = BufReader::new(read).take(MAX_REQUEST as u64);
    let mut line = String::new();
    tokio::time::timeout(REQUEST_TIMEOUT, reader.read_line(&mut line))
        .await
        .map_err(|_| OpError::refused("no request within 3 s"))?
        .map_err(OpError::io("cannot read the request"))?;
    Ok(serde_json::from_str(&line)?)
}

/// The request a `personad ctl` command line stands for.
pub(crate) fn request_for(cmd: CtlCommand) -> Result<Request, CommandError> {
    let (agent, op) = match cmd {
        CtlCommand::Status => (None, Op::Status),
        CtlCommand::ConsoleToken { .. } => {
            return Err(CommandError::Usage(
                "console-token is carried out here, not by the daemon".into(),
            ));
        }
        CtlCommand::Reload => (None, Op::Reload),
        CtlCommand::Stop => (None, Op::Stop),
        CtlCommand::WaitQuiet { timeout, horizon } => (
            None,
            Op::WaitQuiet {
                wait_secs: timeout,
                horizon_secs: horizon,
            },
        ),
        CtlCommand::Pause {
            agent,
            chat,
            duration,
        } => {
            let secs = match duration {
                Some(d) => Some(parse_duration(&d).ok_or_else(|| {
                    CommandError::Usage(format!("--for {d:?}: use e.g. 90s, 30m, 2h or 1d"))
                })?),
                None => None,
            };
            (agent, Op::Pause { chat, secs })
        }
        CtlCommand::Resume { agent, chat } => (agent, Op::Resume { chat }),
        CtlCommand::Forget { agent, chat } => (agent, Op::Forget { chat }),
        CtlCommand::Plans { agent, chat } => (agent, Op::Plans { chat }),
        CtlCommand::Memory { agent, who } => (agent, Op::Memory { who }),
        CtlCommand::Schedule { agent, day } => (agent, Op::Schedule { day }),
        CtlCommand::ForgetFact { agent, id } => (agent, Op::ForgetFact { id }),
        CtlCommand::Mode { agent, chat, mode } => (agent, Op::Mode { chat, mode }),
        CtlCommand::Drafts { agent } => (agent, Op::Drafts),
        CtlCommand::Approve { agent, id, text } => (agent, Op::Approve { id, text }),
        CtlCommand::Reject { agent, id } => (agent, Op::Reject { id }),
        CtlCommand::ApproveMode { agent, chat, mode } => (agent, Op::ApprovalMode { chat, mode }),
        CtlCommand::Say {
            agent,
            chat,
            from,
            group,
            reply_to,
            text,
            no_wait,
            wait,
        } => (
            agent,
            Op::Say {
                chat,
                from,
                group,
                reply_to,
                text: text.join(" "),
                wait_secs: if no_wait { Some(0) } else { wait },
            },
        ),
    };
    Ok(Request { agent, op })
}

/// How long `personad ctl` waits for the daemon's answer: a minute, or for `say` (which may
/// wait for a slow model) its longest wait and half a minute more.
fn client_timeout(op: &Op) -> std::time::Duration {
    let secs = match op {
        Op::Say { .. } => crate::app::ops::controls::SAY_MAX_WAIT_SECS + 30,
        _ => 60,
    };
    std::time::Duration::from_secs(secs)
}

/// `personad ctl ...`: sends one request and prints the answer.
pub async fn client(global: GlobalArgs, args: CtlArgs) -> CmdResult {
    let label = args.which.socket_label().map_err(CommandError::Selection)?;
    let cmd = args.command;
    if let CtlCommand::ConsoleToken { rotate } = cmd {
        let dir = global.state_dir.clone();
        return tokio::task::spawn_blocking(move || {
            crate::app::console::console_token_command(dir, rotate)
        })
        .await
        .map_err(CommandError::Join)?;
    }
    let request = request_for(cmd)?;
    let path = socket_path(&StateDir::new(&global.state_dir), label.as_deref());
    let text = ask_ok(&path, &request).await?;
    crate::app::stdout::line(text.trim_end())?;
    Ok(ExitCode::SUCCESS)
}

/// [`ask`], with a refusal as [`CommandError::Refused`]: the answer's text when it is ok.
pub(crate) async fn ask_ok(path: &Path, request: &Request) -> Result<String, CommandError> {
    let response = ask(path, request).await?;
    if response.ok {
        Ok(response.text)
    } else {
        Err(CommandError::Refused(response.text))
    }
}

/// Sends one request to the daemon answering on `path` and returns its answer (a refusal
/// too: `ok` false). Used by `personad ctl` and the daemon bench.
pub(crate) async fn ask(path: &Path, request: &Request) -> Result<Response, CommandError> {
    let timeout = client_timeout(&request.op);
    let stream = UnixStream::connect(path).await.map_err(|e| {
        CommandError::Unavailable(format!(
            "no daemon answers on {} ({e}); is `personad run` running with this --state?",
            path.display()
        ))
    })?;
    let (read, mut write) = stream.into_split();
    let mut line = serde_json::to_string(request).map_err(CommandError::Json)?;
    line.push('\n');
    // A daemon that refuses the connection answers before reading: read its answer even
    // when the request could not be written.
    let sent = write.write_all(line.as_bytes()).await;
    let mut answer = String::new();
    let mut reader = BufReader::new(read).take(16 * 1024 * 1024);
    let read = tokio::time::timeout(timeout, reader.read_line(&mut answer))
        .await
        .map_err(|_| {
            CommandError::Unavailable(format!(
                "the daemon on {} did not answer within {} s",
                path.display(),
                timeout.as_secs()
            ))
        })?;
    if answer.trim().is_empty() {
        return Err(match (sent, read) {
            (Err(e), _) => CommandError::Io(e).doing("cannot send the request"),
            (_, Err(e)) => CommandError::Io(e).doing("cannot read the answer"),
            _ => CommandError::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the daemon closed the connection without an answer",
            )),
        });
    }
    serde_json::from_str(&answer)
        .map_err(|e| CommandError::Json(e).doing("bad answer from the daemon"))
}
