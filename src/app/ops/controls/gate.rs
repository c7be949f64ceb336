//! The owner controls' step of the admission chain ([`OwnerGate`]): a command is accepted
//! only from the account itself (the owner, from any device), in its Saved Messages, in a
//! configured admin chat (`--admin-chat`) or in the one its persona names (`# Admin Chat`), and is never planned as conversation: it is handed to the
//! controller's command queue, which carries it out and answers through the runtime. A
//! command-looking message from anyone else is neither executed nor planned; in an admin chat
//! nobody else's text is answered at all; the owner's reply to a draft is the owner's word on
//! it; a paused chat (as the runtime holds its pauses) records its messages without planning.
//! Built with the controller (`Controller::build`); `ingress::Ingress` runs it.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::app::ops::controls::commands::{CommandUsage, Op, parse_command};
use crate::app::ops::controls::roster::Roster;
use crate::core::admission::Admission;
use crate::core::approval::Decision;
use crate::core::model::{Chat, Message, MessageId};
use crate::core::scheduler::DraftRef;
use crate::ingress::{Admit, InboundGate};
use crate::ports::clock::SharedClock;
use crate::runtime::RuntimeHandle;

/// An owner command accepted by the gate, waiting for the controller.
#[derive(Debug)]
pub struct Command {
    pub(crate) agent: String,
    /// Where it was written (Saved Messages or an admin chat): the runtime answers there
    /// when it is Saved Messages or the persona's `# Admin Chat`, else in one of those.
    pub(crate) chat: Chat,
    /// The command message (the answer replies to it).
    pub(crate) message: MessageId,
    pub(crate) op: Result<Op, CommandUsage>,
}

/// The queue between the gate and the controller (`Controller::serve`).
pub type Commands = mpsc::UnboundedReceiver<Command>;

/// The owner controls in front of the queue.
pub(crate) struct OwnerGate {
    pub(crate) roster: Arc<Roster>,
    pub(crate) runtime: RuntimeHandle,
    pub(crate) clock: SharedClock,
    pub(crate) admin_chats: Vec<i64>,
    pub(crate) commands: mpsc::UnboundedSender<Command>,
}

impl InboundGate for OwnerGate {
    fn admit(
        &self,
        agent: &str,
        chat: &Chat,
        message: &Message,
        trigger: bool,
        _callout: bool,
    ) -> Admit {
        self.roster.remember(agent, chat, message);
        let admin_chat = self.admin_chats.contains(&chat.id.0)
            || self
                .runtime
                .persona(agent)
                .is_some_and(|p| p.admin_chat == Some(chat.id));
        // Only the owner account (the agent's own account, from any device) commands, and
        // only in its Saved Messages or an admin chat: a member of an admin group is not
        // the owner.
        let place = Some(chat.id.0) == self.roster.self_id(agent) || admin_chat;
        if let Some(op) = parse_command(&message.text) {
            if message.outgoing && place {
                tracing::info!(
                    event = "owner_command",
                    agent,
                    chat = chat.id.0,
                    command = message.text.split_whitespace().next().unwrap_or(""),
                    "owner command"
                );
                let command = Command {
                    agent: agent.to_string(),
                    chat: chat.clone(),
                    message: message.id,
                    op,
                };
                if self.commands.send(command).is_err() {
                    tracing::warn!(
                        event = "owner_command_dropped",
                        agent,
                        chat = chat.id.0,
                        "the daemon is stopping: the command is not carried out"
                    );
                }
                return Admit::Consumed;
            }
            tracing::info!(
                event = "owner_command_ignored",
                agent,
                chat = chat.id.0,
                "a command from someone other than the owner: ignored and not planned"
            );
            return Admit::NoTrigger;
        }
        if message.outgoing
            && place
            && let Some(replied) = message.reply_to
            && !message.text.trim_start().starts_with("personad:")
            && let Some(decision) = Decision::from_reply(&message.text)
        {
            // The owner answering a draft (the runtime checks the message answered is one; a
            // reply to anything else changes nothing). The message itself stays history.
            tracing::info!(
                event = "owner_draft_reply",
                agent,
                chat = chat.id.0,
                reply_to = replied.0,
                "owner replied to a message: checked against the waiting drafts"
            );
            self.runtime.decide_draft(
                agent,
                DraftRef::Reply {
                    chat: chat.id,
                    message: replied,
                },
                decision,
            );
        }
        if admin_chat && !message.outgoing {
            tracing::debug!(
                event = "admin_chat_message_ignored",
                agent,
                chat = chat.id.0,
                "admin chat: text from someone other than the owner is recorded, not answered"
            );
            return Admit::NoTrigger;
        }
        if trigger && self.runtime.is_paused(agent, chat.id, self.clock.now()) {
            tracing::debug!(
                event = "paused_message",
                agent,
                chat = chat.id.0,
                "paused: the message is recorded, not answered (planned on resume)"
            );
            return Admit::As(Admission::Paused);
        }
        Admit::Pass
    }
}
