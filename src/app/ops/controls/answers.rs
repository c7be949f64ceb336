//! The owner's commands carried out and answered: the controller takes each command the gate
//! accepted, in order, runs it, and hands the answer to the runtime, which queues it as a
//! `send` task in the command's chat when that is Saved Messages or the persona's `# Admin
//! Chat`, else in the persona's admin chat or Saved Messages (durable once queued, paced and
//! retried like any send, sent once: its idempotency key derives from the command). Part of
//! [`Controller`].

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::app::ops::controls::commands::Op;
use crate::app::ops::controls::gate::{Command, Commands};
use crate::app::ops::controls::{Controller, STOPPING};
use crate::core::graph::{TaskSpec, TaskStatus};
use crate::core::model::{ChatId, MessageId};

/// Longest answer sent to Telegram (its limit is 4096 characters).
const MAX_ANSWER_CHARS: usize = 4000;
/// How long `/stop` waits for its answer to go out before the daemon stops.
const STOP_ANSWER_WAIT: Duration = Duration::from_secs(10);
/// How often it looks.
const STOP_ANSWER_POLL: Duration = Duration::from_millis(100);
/// How often the chats the personas have known are saved (when they changed).
const CHATS_SAVED_EVERY: Duration = Duration::from_secs(2);

impl Controller {
    /// Carries out the owner's commands until `stop` (or until every gate is gone); saves the
    /// chats the personas have known every [`CHATS_SAVED_EVERY`] and once more at the end.
    pub async fn serve(&self, mut commands: Commands, stop: CancellationToken) {
        loop {
            let command = tokio::select! {
                () = stop.cancelled() => break,
                () = crate::ports::clock::pause(self.clock.as_ref(), CHATS_SAVED_EVERY) => {
                    self.save_chats().await;
                    continue;
                }
                c = commands.recv() => c,
            };
            let Some(command) = command else { break };
            self.answer(command).await;
        }
        self.save_chats().await;
    }

    /// Writes the chat lists that changed (off the async threads).
    async fn save_chats(&self) {
        let index = std::sync::Arc::clone(self.roster.index());
        match tokio::task::spawn_blocking(move || index.flush()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(event = "chats_not_saved", error = %e, "the personas' chat lists were not saved");
            }
            Err(e) => {
                tracing::warn!(event = "chats_not_saved", error = %e, "the personas' chat lists were not saved");
            }
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
        if matches!(op, Ok(Op::Stop)) {
            // Once the runtime stops nothing new starts: the answer goes out first.
            let id = chat.id;
            self.runtime()
                .answer_owner(&agent, chat, message, answer_text(STOPPING));
            self.until_answered(&agent, id, message).await;
            let _ = self.execute(Some(&agent), Op::Stop).await;
            return;
        }
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

impl Controller {
    /// Waits (at most [`STOP_ANSWER_WAIT`]) until no unsent answer to `command` in `chat` is
    /// left in the agent's plans (wherever the runtime queued it).
    async fn until_answered(&self, agent: &str, chat: ChatId, command: MessageId) {
        let key = crate::core::scheduler::answer_key(chat, command);
        let mut waited = Duration::ZERO;
        while waited < STOP_ANSWER_WAIT {
            let pending = self.plans_in(agent, None).await.iter().any(|g| {
                g.tasks.iter().any(|t| {
                    t.status != TaskStatus::Done
                        && matches!(t.spec, TaskSpec::Send { idempotency_key, .. } if idempotency_key == key)
                })
            });
            if !pending {
                return;
            }
            crate::ports::clock::pause(self.clock.as_ref(), STOP_ANSWER_POLL).await;
            waited += STOP_ANSWER_POLL;
        }
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
