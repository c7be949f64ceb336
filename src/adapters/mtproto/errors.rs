//! Error classification: the one place where a grammers [`InvocationError`] becomes a
//! [`TelegramError`]. It owns the table of Telegram error names (flood and slow-mode waits,
//! account limits, forbidden chats, dead sessions, missing peers, invalid requests, a text
//! too long for one message, network faults). It must not retry, sleep or log, and its messages carry only error names, codes
//! and numbers, never request contents, paths or keys. Every MTProto backend call that can
//! fail maps its error through [`classify`].

use grammers_client::InvocationError;
use grammers_client::sender::RpcError;
use grammers_mtproto::transport;

use crate::core::model::TelegramError;

/// Used when Telegram asks to wait but gives no number (should not happen).
const DEFAULT_WAIT_SECS: u64 = 60;

/// Maps any grammers invocation error to the daemon's typed error.
pub fn classify(err: &InvocationError) -> TelegramError {
    match err {
        InvocationError::Rpc(rpc) => classify_rpc(rpc),
        InvocationError::Io(io) => TelegramError::Network(format!("i/o error ({:?})", io.kind())),
        InvocationError::Transport(transport::Error::BadStatus { status: 404 }) => {
            TelegramError::Unauthorized("transport status 404: auth key unknown".into())
        }
        InvocationError::Transport(t) => TelegramError::Network(transport_name(t)),
        InvocationError::Dropped(reason) => {
            // grammers also uses `Dropped` when a high-level call has no cached peer ref:
            // that is not transient and retrying it would fail the same way.
            if reason.contains("peer ref") {
                TelegramError::NotFound("peer not in the session cache".into())
            } else {
                TelegramError::Network("request dropped (sender pool stopped)".into())
            }
        }
        InvocationError::Authentication(_) => {
            TelegramError::Network("auth key generation with a datacenter failed".into())
        }
        InvocationError::Deserialize(_) => {
            TelegramError::Other("could not deserialize Telegram's response".into())
        }
        InvocationError::Session(_) => TelegramError::Other("session storage error".into()),
        InvocationError::InvalidDc => TelegramError::Other("invalid datacenter".into()),
    }
}

/// Classifies an error for the send path's recovery rules: an unknown peer (learn it and
/// retry), rejected entities (send without them), a rejected reaction (try its other
/// spelling), or anything else.
pub fn call_error(e: &InvocationError) -> crate::adapters::mtproto::recover::CallError {
    use crate::adapters::mtproto::recover::{self, CallError};
    match e {
        InvocationError::Rpc(rpc) if recover::is_unknown_peer(&rpc.name) => {
            CallError::UnknownPeer(classify(e))
        }
        InvocationError::Dropped(reason) if reason.contains("peer ref") => {
            CallError::UnknownPeer(classify(e))
        }
        InvocationError::Rpc(rpc) if recover::is_entity_error(&rpc.name) => {
            CallError::BadEntities(classify(e))
        }
        InvocationError::Rpc(rpc) if rpc.name.starts_with("REACTION_INVALID") => {
            CallError::BadReaction(classify(e))
        }
        _ => CallError::Other(classify(e)),
    }
}

fn transport_name(t: &transport::Error) -> String {
    match t {
        transport::Error::MissingBytes => "transport: missing bytes".into(),
        transport::Error::BadLen { got } => format!("transport: bad length {got}"),
        transport::Error::BadSeq { .. } => "transport: bad sequence number".into(),
        transport::Error::BadCrc { .. } => "transport: bad checksum".into(),
        transport::Error::BadStatus { status } => format!("transport status {status}"),
    }
}

/// Keeps only the characters an RPC error name is made of, capped, so a message can never
/// smuggle anything else into logs.
fn clean_name(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(64)
        .collect()
}

fn classify_rpc(rpc: &RpcError) -> TelegramError {
    let name = clean_name(&rpc.name);
    let code = rpc.code;
    let label = match rpc.value {
        Some(v) => format!("{name} ({code}, value {v})"),
        None => format!("{name} ({code})"),
    };
    let secs = u64::from(rpc.value.unwrap_or(0));
    let wait = if secs == 0 { DEFAULT_WAIT_SECS } else { secs };
    let n = name.as_str();

    if n.starts_with("SLOWMODE_WAIT") {
        return TelegramError::SlowmodeWait { secs: wait };
    }
    if n.starts_with("FROZEN_") {
        return TelegramError::AccountLimited(label);
    }
    if n == "FLOOD_WAIT" || n == "FLOOD_PREMIUM_WAIT" || n == "FLOOD_TEST_PHONE_WAIT" {
        return TelegramError::FloodWait { secs: wait };
    }
    // USER_BANNED_IN_CHANNEL is how Telegram reports the spam restriction on writing in
    // public groups: an account-level limit, not one chat's ban.
    if matches!(
        n,
        "PEER_FLOOD" | "USER_RESTRICTED" | "USER_BANNED_IN_CHANNEL"
    ) {
        return TelegramError::AccountLimited(label);
    }
    // The chat refuses one kind of content (stickers, media, GIFs, voice notes, ...), or the
    // item needs Premium (VOICE_MESSAGES_FORBIDDEN: the user takes voice notes from Premium
    // accounts only): skip or replace that item, the chat stays usable.
    if (n.starts_with("CHAT_SEND_")
        && n.ends_with("_FORBIDDEN")
        && n != "CHAT_SEND_PLAIN_FORBIDDEN")
        || matches!(
            n,
            "PREMIUM_ACCOUNT_REQUIRED" | "STICKER_PREMIUM_REQUIRED" | "VOICE_MESSAGES_FORBIDDEN"
        )
    {
        return TelegramError::ContentRefused(label);
    }
    if code == 401
        || n.starts_with("AUTH_KEY_")
        || n.starts_with("SESSION_")
        || n.starts_with("USER_DEACTIVATED")
    {
        return TelegramError::Unauthorized(label);
    }
    if code == 420 {
        return TelegramError::FloodWait { secs: wait };
    }
    if code == 403
        || n.ends_with("_FORBIDDEN")
        || matches!(
            n,
            "CHANNEL_PRIVATE"
                | "CHANNEL_PUBLIC_GROUP_NA"
                | "USER_IS_BLOCKED"
                | "YOU_BLOCKED_USER"
                | "CHAT_RESTRICTED"
                | "CHAT_ADMIN_REQUIRED"
                | "CHAT_GUEST_SEND_FORBIDDEN"
                | "USER_NOT_PARTICIPANT"
                | "USER_KICKED"
                | "USER_PRIVACY_RESTRICTED"
                | "PRIVACY_PREMIUM_REQUIRED"
                | "INPUT_USER_DEACTIVATED"
                | "CHAT_SEND_PLAIN_FORBIDDEN"
                | "ALLOW_PAYMENT_REQUIRED"
        )
    {
        return TelegramError::Forbidden(label);
    }
    if code == 404
        || matches!(
            n,
            "PEER_ID_INVALID"
                | "MESSAGE_ID_INVALID"
                | "MSG_ID_INVALID"
                | "CHAT_ID_INVALID"
                | "CHANNEL_INVALID"
                | "USER_ID_INVALID"
                | "USERNAME_NOT_OCCUPIED"
                | "STICKERSET_INVALID"
        )
    {
        return TelegramError::NotFound(label);
    }
    if n == "MESSAGE_TOO_LONG" {
        // Our split counts as Telegram does, so this should not come back; if it does, the
        // send path splits the text further (see `core::blocks::text_parts`).
        return TelegramError::TooLong(label);
    }
    if code == 400 || code == 406 {
        return TelegramError::Invalid(label);
    }
    TelegramError::Other(label)
}

/// Maps an error of grammers' update stream for the pump. grammers' error names no channel,
/// but its `caused_by` names the request that failed: only a failed `getChannelDifference`
/// is attributed to a channel, the one `pending_channel` reports (the difference grammers
/// prepared last, see `guarded`). A flood wait carries its seconds; a refusal (403, 400,
/// 404: CHANNEL_INVALID, ...) of a channel's difference is permanent.
pub fn stream_error(
    err: &InvocationError,
    pending_channel: impl FnOnce() -> Option<i64>,
) -> crate::adapters::mtproto::pump::SourceError {
    use crate::adapters::mtproto::pump::SourceError;
    use grammers_client::tl::Identifiable;
    if let InvocationError::Dropped(_) = err {
        return SourceError::Closed;
    }
    let classified = classify(err);
    if let TelegramError::Unauthorized(reason) = classified {
        return SourceError::Unauthorized(reason);
    }
    let channel_diff = matches!(err, InvocationError::Rpc(rpc)
        if rpc.caused_by == Some(grammers_client::tl::functions::updates::GetChannelDifference::CONSTRUCTOR_ID));
    let channel = if channel_diff {
        pending_channel()
    } else {
        None
    };
    let retry_after = match classified {
        TelegramError::FloodWait { secs } | TelegramError::SlowmodeWait { secs } => {
            Some(std::time::Duration::from_secs(secs))
        }
        _ => None,
    };
    let permanent = channel.is_some()
        && matches!(
            classified,
            TelegramError::Forbidden(_) | TelegramError::NotFound(_) | TelegramError::Invalid(_)
        );
    SourceError::Transient {
        reason: classified.to_string(),
        channel,
        retry_after,
        permanent,
    }
}
