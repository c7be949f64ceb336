//! Who may use the console: its token file, `<state>/console.token` (0600), kept across
//! restarts (reused when present, private and well-formed; a new one only when it is absent or
//! damaged, or others could read it) and replaced by `personad ctl console-token --rotate`; the
//! token as the running console holds it, re-read from the file at each check so a rotation
//! takes effect at the next request (the old token then stops working); the CSRF value derived
//! from the token (so open tabs survive a restart as the token does); the constant-time compare;
//! and the login page with the local path to return to. The token itself is never logged or
//! printed. Called by the console's server (`console::serve`) and by `ctl console-token`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Mutex, PoisonError};

use sha2::Digest as _;
use subtle::ConstantTimeEq as _;

use crate::adapters::store::{self, StateDir, Symlinks};
use crate::app::commands::{CmdResult, CommandError};
use crate::app::ops::OpError;

use super::pages::{esc, layout_with};

/// Hex digits of a token.
const TOKEN_LEN: usize = 32;

/// A fresh random secret: 16 bytes of the system's randomness as 32 hex digits.
pub(crate) fn secret() -> Result<String, OpError> {
    let mut bytes = [0u8; TOKEN_LEN / 2];
    getrandom::fill(&mut bytes).map_err(|e| {
        OpError::io("no randomness for the console's token")(std::io::Error::other(e.to_string()))
    })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `a` equals `b`, in time that does not depend on where they differ.
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// A token as the file holds it: 32 hex digits (and a line end).
fn well_formed(text: &str) -> Option<&str> {
    let t = text.trim_end_matches('\n');
    (t.len() == TOKEN_LEN && t.bytes().all(|b| b.is_ascii_hexdigit())).then_some(t)
}

/// The token in `<state>/console.token` if the file is a private regular file (no link, no
/// bits for group or others) holding a well-formed token. Blocking.
fn read_token(state: &StateDir) -> Option<String> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = state.console_token_path();
    let meta = std::fs::symlink_metadata(&path).ok()?;
    if !meta.is_file() || meta.permissions().mode() & 0o077 != 0 {
        return None;
    }
    let bytes = store::read_file(&path, 256, Symlinks::Refuse).ok()?;
    well_formed(std::str::from_utf8(&bytes).ok()?).map(str::to_string)
}

/// Writes a new token to `<state>/console.token` (0600) and returns it. Blocking.
fn write_new(state: &StateDir) -> Result<String, OpError> {
    let token = secret()?;
    store::write_atomic(&state.console_token_path(), format!("{token}\n").as_bytes())?;
    Ok(token)
}

/// The token of the file when it is usable, else a new one written (the flag says which).
/// Blocking.
pub(crate) fn keep_or_create(state: &StateDir) -> Result<(String, bool), OpError> {
    match read_token(state) {
        Some(token) => Ok((token, true)),
        None => {
            if state.console_token_path().exists() {
                tracing::warn!(event = "console_token_replaced", file = %state.console_token_path().display(), "the console's token file was damaged or readable by others: a new token replaces it");
            }
            Ok((write_new(state)?, false))
        }
    }
}

/// The CSRF value of the forms for a token: derived from it (a hash, so the token cannot be
/// recovered from a page), so it lasts as long as the token does.
pub(crate) fn csrf_for(token: &str) -> String {
    let digest = sha2::Sha256::new()
        .chain_update(b"personad console csrf\n")
        .chain_update(token.as_bytes())
        .finalize();
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The token the running console accepts: the file's, re-read at each check (a rotation by
/// `ctl console-token --rotate` takes effect at the next request), the last good one while
/// the file is unusable.
pub(crate) struct Keys {
    state: StateDir,
    current: Mutex<String>,
}

impl Keys {
    pub(crate) fn new(state: StateDir, token: String) -> Keys {
        Keys {
            state,
            current: Mutex::new(token),
        }
    }

    /// The token in force (reads the file off the async threads).
    pub(crate) async fn token(&self) -> String {
        let state = self.state.clone();
        let read = tokio::task::spawn_blocking(move || read_token(&state))
            .await
            .ok()
            .flatten();
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(token) = read
            && !same(&token, &current)
        {
            tracing::info!(
                event = "console_token_rotated",
                "the console's token file changed: the new token is in force"
            );
            *current = token;
        }
        current.clone()
    }
}

/// A local path to come back to: `/` then letters, digits and `/ _ . ~ % - ? = & +` only (no
/// `//`, no `\`, no scheme, no control characters, no quotes).
pub(crate) fn safe_path(p: &str) -> bool {
    p.starts_with('/')
        && !p.starts_with("//")
        && p.len() <= 512
        && p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/_.~%-?=&+".contains(&b))
}

/// The login form, returning to `next` (a local path) once the token is right.
fn login_form(next: &str) -> String {
    let next = if safe_path(next) { next } else { "/" };
    format!(
        "<form method=\"post\" action=\"/login\"><input type=\"hidden\" name=\"next\" value=\"{}\"><label>Console token <input type=\"password\" name=\"token\" id=\"token\" autocomplete=\"off\" autofocus></label> <button type=\"submit\" id=\"login\">Log in</button></form><p>The token is in <code>console.token</code> in the daemon's state directory (<code>personad ctl console-token</code> says where; <code>--rotate</code> makes a new one).</p>",
        esc(next)
    )
}

/// The login page (`failed`: a wrong token was given; `note`: a fixed banner).
pub(crate) fn login_page(failed: bool, next: &str, note: Option<&str>) -> String {
    let note = if failed {
        Some("That token is not the console's. It is in <state>/console.token.")
    } else {
        note
    };
    layout_with("Log in", note, &login_form(next), false)
}

/// What a page asked for without the token shows: the login form, returning there.
pub(crate) fn log_in_first(next: &str) -> String {
    layout_with(
        "Log in first",
        None,
        &format!("<p>This console needs its token.</p>{}", login_form(next)),
        false,
    )
}

/// `personad ctl console-token [--rotate]`: says where the console's token file is; with
/// `rotate`, writes a new token there first (a running console takes it at its next request,
/// and the old token stops working). Never prints the token. Needs no running daemon.
pub(crate) fn command(state_dir: PathBuf, rotate: bool) -> CmdResult {
    let state = StateDir::new(state_dir);
    let path = state.console_token_path();
    let line = if rotate {
        write_new(&state).map_err(|e| CommandError::Internal(e.to_string()))?;
        format!(
            "a new console token is in {} (the old one no longer works; log in again)",
            path.display()
        )
    } else if read_token(&state).is_some() {
        format!("the console token is in {}", path.display())
    } else {
        format!(
            "no usable console token in {} yet: `personad run --console-addr ...` writes one, or `--rotate` now",
            path.display()
        )
    };
    crate::app::stdout::line(line)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_followed_back() {
        assert!(safe_path("/agent/Tess/chat/-42") && safe_path("/"));
        assert!(safe_path("/agent/Tess?q=ann&page=2"));
        for bad in [
            "//evil.example",
            "/\\evil.example",
            "https://x",
            "/a\r\nSet-Cookie: x",
            "/a\"><script>",
            "x",
        ] {
            assert!(!safe_path(bad), "{bad:?}");
        }
        let form = login_form("//evil.example");
        assert!(form.contains("name=\"next\" value=\"/\""), "{form}");
    }

    #[test]
    fn secrets_are_fresh_and_compared_whole() {
        let (a, b) = (secret().unwrap_or_default(), secret().unwrap_or_default());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
        assert!(same(&a, &a.clone()));
        assert!(!same(&a, &b) && !same(&a, &a[..31]));
        assert_eq!(csrf_for(&a), csrf_for(&a.clone()));
        assert_ne!(csrf_for(&a), csrf_for(&b));
        assert!(!csrf_for(&a).contains(&a));
    }

    #[test]
    fn a_token_file_is_kept_while_usable_and_replaced_when_not() -> Result<(), OpError> {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().map_err(OpError::io("tempdir"))?;
        let state = StateDir::new(dir.path());
        let (first, kept) = keep_or_create(&state)?;
        assert!(!kept);
        let path = state.console_token_path();
        let mode = std::fs::metadata(&path)
            .map_err(OpError::io("stat"))?
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(keep_or_create(&state)?, (first.clone(), true));
        // Readable by others: replaced.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
            .map_err(OpError::io("chmod"))?;
        let (second, kept) = keep_or_create(&state)?;
        assert!(!kept && second != first);
        // Damaged: replaced.
        std::fs::write(&path, "not a token\n").map_err(OpError::io("write"))?;
        let (third, kept) = keep_or_create(&state)?;
        assert!(!kept && third != second && well_formed(&third).is_some());
        Ok(())
    }
}
