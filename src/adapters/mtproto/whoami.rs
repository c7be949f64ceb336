//! `personad doctor --telegram`: one connect with an agent's session and one `users.getUsers`
//! of itself (grammers' `get_me`), then a clean disconnect; nothing else is asked and no
//! update is handled. The session is opened as `run` opens it (private, not in use, logged
//! in) and locked for the moment it is used. Called by `app::doctor` only.

use std::time::Duration;

use super::{ConnectError, ConnectOptions, Credentials, classify, open_account, start_pool};
use crate::adapters::store::StateDir;
use crate::core::model::TelegramError;

/// Who Telegram says the account is.
#[derive(Debug, Clone)]
pub struct Whoami {
    pub id: i64,
    /// The account's first and last name.
    pub name: String,
    pub username: Option<String>,
}

/// Connects `agent` with its session and asks Telegram who it is, waiting at most `within`
/// for the answer (`Ok(None)`: no answer in time).
pub async fn whoami(
    state: &StateDir,
    agent: &str,
    creds: &Credentials,
    within: Duration,
) -> Result<Option<Whoami>, ConnectError> {
    let account = open_account(state, agent, creds.servers).await?;
    let (client, _updates, pool_task) =
        start_pool(&account.session, creds, ConnectOptions::default());
    let answer = tokio::time::timeout(within, client.get_me()).await;
    client.disconnect();
    let _ = pool_task.await;
    match answer {
        Err(_) => Ok(None),
        Ok(Ok(me)) => Ok(Some(Whoami {
            id: me.id().bare_id().unwrap_or_default(),
            name: me.full_name(),
            username: me.username().map(str::to_owned),
        })),
        Ok(Err(e)) => match classify(&e) {
            TelegramError::Unauthorized(_) => Err(ConnectError::NotAuthorized {
                agent: agent.to_string(),
                flag: creds.servers.flag(),
            }),
            other => Err(ConnectError::Telegram(other)),
        },
    }
}
