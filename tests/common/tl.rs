//! Raw TL fixtures for the MTProto tests: every constructor spelled out once, here (they are
//! verbose and change with each layer).

use grammers_client::tl;

/// The account's own user id in these fixtures.
pub(crate) const SELF_ID: i64 = 1000;
/// The date every fixture message carries (unix seconds).
pub(crate) const DATE: i32 = 1_700_000_000;

pub(crate) fn user(
    id: i64,
    first: &str,
    last: Option<&str>,
    username: Option<&str>,
    bot: bool,
) -> tl::enums::User {
    tl::types::User {
        is_self: id == SELF_ID,
        contact: false,
        mutual_contact: false,
        deleted: false,
        bot,
        bot_chat_history: false,
        bot_nochats: false,
        verified: false,
        restricted: false,
        min: false,
        bot_inline_geo: false,
        support: false,
        scam: false,
        apply_min_photo: false,
        fake: false,
        bot_attach_menu: false,
        premium: false,
        attach_menu_enabled: false,
        bot_can_edit: false,
        close_friend: false,
        stories_hidden: false,
        stories_unavailable: false,
        contact_require_premium: false,
        bot_business: false,
        bot_has_main_app: false,
        bot_forum_view: false,
        bot_forum_can_manage_topics: false,
        bot_can_manage_bots: false,
        bot_guestchat: false,
        bot_guard: false,
        id,
        access_hash: Some(42),
        first_name: Some(first.to_string()),
        last_name: last.map(str::to_string),
        username: username.map(str::to_string),
        phone: None,
        photo: None,
        status: None,
        bot_info_version: None,
        restriction_reason: None,
        bot_inline_placeholder: None,
        lang_code: None,
        emoji_status: None,
        usernames: None,
        stories_max_id: None,
        color: None,
        profile_color: None,
        bot_active_users: None,
        bot_verification_icon: None,
        send_paid_messages_stars: None,
        linked_community_id: None,
    }
    .into()
}

pub(crate) fn basic_group(id: i64, title: &str) -> tl::enums::Chat {
    tl::types::Chat {
        creator: false,
        left: false,
        deactivated: false,
        call_active: false,
        call_not_empty: false,
        noforwards: false,
        id,
        title: title.to_string(),
        photo: tl::enums::ChatPhoto::Empty,
        participants_count: 3,
        date: DATE,
        version: 1,
        migrated_to: None,
        admin_rights: None,
        default_banned_rights: None,
    }
    .into()
}

pub(crate) fn channel(id: i64, title: &str, broadcast: bool) -> tl::enums::Chat {
    tl::types::Channel {
        creator: false,
        left: false,
        broadcast,
        verified: false,
        megagroup: !broadcast,
        restricted: false,
        signatures: false,
        min: false,
        scam: false,
        has_link: false,
        has_geo: false,
        slowmode_enabled: false,
        call_active: false,
        call_not_empty: false,
        fake: false,
        gigagroup: false,
        noforwards: false,
        join_to_send: false,
        join_request: false,
        forum: false,
        stories_hidden: false,
        stories_hidden_min: false,
        stories_unavailable: false,
        signature_profiles: false,
        autotranslation: false,
        broadcast_messages_allowed: false,
        monoforum: false,
        forum_tabs: false,
        id,
        access_hash: Some(7),
        title: title.to_string(),
        username: None,
        photo: tl::enums::ChatPhoto::Empty,
        date: DATE,
        restriction_reason: None,
        admin_rights: None,
        banned_rights: None,
        default_banned_rights: None,
        participants_count: None,
        usernames: None,
        stories_max_id: None,
        color: None,
        profile_color: None,
        emoji_status: None,
        level: None,
        subscription_until_date: None,
        bot_verification_icon: None,
        send_paid_messages_stars: None,
        linked_monoforum_id: None,
        linked_community_id: None,
    }
    .into()
}

pub(crate) fn peer_user(id: i64) -> tl::enums::Peer {
    tl::types::PeerUser { user_id: id }.into()
}
pub(crate) fn peer_chat(id: i64) -> tl::enums::Peer {
    tl::types::PeerChat { chat_id: id }.into()
}
pub(crate) fn peer_channel(id: i64) -> tl::enums::Peer {
    tl::types::PeerChannel { channel_id: id }.into()
}

pub(crate) fn message(
    id: i32,
    peer: tl::enums::Peer,
    from: Option<tl::enums::Peer>,
    text: &str,
) -> tl::types::Message {
    tl::types::Message {
        out: false,
        mentioned: false,
        media_unread: false,
        silent: false,
        post: false,
        from_scheduled: false,
        legacy: false,
        edit_hide: false,
        pinned: false,
        noforwards: false,
        invert_media: false,
        offline: false,
        video_processing_pending: false,
        paid_suggested_post_stars: false,
        paid_suggested_post_ton: false,
        id,
        from_id: from,
        from_boosts_applied: None,
        from_rank: None,
        peer_id: peer,
        saved_peer_id: None,
        fwd_from: None,
        via_bot_id: None,
        via_business_bot_id: None,
        guestchat_via_from: None,
        reply_to: None,
        date: DATE,
        message: text.to_string(),
        media: None,
        reply_markup: None,
        entities: None,
        views: None,
        forwards: None,
        replies: None,
        edit_date: None,
        post_author: None,
        grouped_id: None,
        reactions: None,
        restriction_reason: None,
        ttl_period: None,
        quick_reply_shortcut_id: None,
        effect: None,
        factcheck: None,
        report_delivery_until_date: None,
        paid_message_stars: None,
        suggested_post: None,
        schedule_repeat_period: None,
        summary_from_language: None,
        rich_message: None,
    }
}

/// A grammers message built offline (grammers' own workaround: a short "sent" answer whose raw
/// message is then replaced); `peer` must be the ref of the raw message's chat.
pub(crate) fn grammers_message(
    client: &grammers_client::Client,
    raw: tl::types::Message,
    peer: grammers_client::session::types::PeerRef,
) -> grammers_client::message::Message {
    let mut m = grammers_client::message::Message::from_raw_short_updates(
        client,
        tl::types::UpdateShortSentMessage {
            out: false,
            id: raw.id,
            pts: 1,
            pts_count: 1,
            date: DATE,
            media: None,
            entities: None,
            ttl_period: None,
        },
        grammers_client::message::InputMessage::new(),
        peer,
    );
    m.raw = tl::enums::Message::Message(raw);
    m
}

/// A first page of dialogs that only introduces `users`.
pub(crate) fn dialogs_page(users: Vec<tl::enums::User>) -> tl::enums::messages::Dialogs {
    tl::enums::messages::Dialogs::Dialogs(tl::types::messages::Dialogs {
        dialogs: Vec::new(),
        messages: Vec::new(),
        chats: Vec::new(),
        users,
    })
}

/// A plain reply header pointing at message `to`.
pub(crate) fn reply_header(to: i32) -> tl::enums::MessageReplyHeader {
    tl::types::MessageReplyHeader {
        reply_to_scheduled: false,
        forum_topic: false,
        quote: false,
        reply_to_ephemeral: false,
        reply_to_msg_id: Some(to),
        reply_to_peer_id: None,
        reply_from: None,
        reply_media: None,
        reply_to_top_id: None,
        quote_text: None,
        quote_entities: None,
        quote_offset: None,
        todo_item_id: None,
        poll_option: None,
    }
    .into()
}
