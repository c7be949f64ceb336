//! The owner's commands carried out and answered: the controller takes each command the gate
//! accepted, in order, runs it, and hands the answer to the runtime as a `send` task in the
//! chat the command came from (durable once queued there, paced and retried like any send,
//! sent once: its idempotency key derives from the command). Part of [`Controller`].

use tokio_util::sync::CancellationToken;

use crate::app::ops::controls::Controller;
use crate::app::ops::controls::gate::{Command, Commands};

/// Longest answer sent to Telegram (its limit is 4096 characters).
const MAX_ANSWER_CHARS: usize = 4000;

impl Controller {
    /// Carries out the owner's commands until `stop` (or until every gate is gone).
    pub async fn serve(&self, mut commands: Commands, stop: CancellationToken) {
        loop {
            let command = tokio::select! {
                () = stop.cancelled() => return,
                c = commands.recv() => c,
            };
            let Some(command) = command else { return };
            self.answer(command).await;
        }
    }

    /// Runs one command written in a chat and queues its answer there.
    async fn answer(&self, command: Command) {
        let Command {
            agent,
            chat,
            message,
            op,
        } = command;
        let result = match op {
            Ok(op) => self.execute(Some(&agent), op).await,
            Err(usage) => Err(usage.into()),
        };
        let body = match result {
            Ok(t) => t,
            Err(e) => format!("error: {e}"),
        };
        self.runtime()
            .answer_owner(&agent, chat, message, answer_text(&body));
    }
}

/// The answer as the owner reads it: marked as the daemon's, cut to Telegram's length.
fn answer_text(body: &str) -> String {
    let text = format!("personad: {}", body.trim_end());
    if text.chars().count() > MAX_ANSWER_CHARS {
        text.chars().take(MAX_ANSWER_CHARS).collect::<String>() + "…"
    } else {
        text
    }
}
