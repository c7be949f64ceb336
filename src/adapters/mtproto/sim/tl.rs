//! TL constructors of the simulated Telegram, each spelled out once (they are verbose and
//! change with every layer): users, basic groups, channels, messages, reply headers, notify
//! settings, the connection's config. Pure builders: no state, no decisions. Used by the
//! simulator's world and request handlers, and by the MTProto tests' fixtures.

use grammers_client::tl;

/// A user as an account sees it; `is_self` for the account's own user, `min` for a user seen
/// only in a group (its access hash is then unusable for requests).
pub fn user(
    id: i64,
    access_hash: i64,
    first: &str,
    username: Option<&str>,
    is_self: bool,
    min: bool,
) -> tl::enums::User {
    tl::types::User {
        is_self,
        contact: false,
        mutual_contact: false,
        deleted: false,
        bot: false,
        bot_chat_history: false,
        bot_nochats: false,
        verified: false,
        restricted: false,
        min,
        bot_inline_geo: false,
        support: id == 777_000,
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
        access_hash: Some(access_hash),
        first_name: Some(first.to_string()),
        last_name: None,
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

/// A basic group; `migrated_to` names the supergroup it became (id, access hash).
pub fn basic_group(
    id: i64,
    title: &str,
    members: i32,
    date: i32,
    migrated_to: Option<(i64, i64)>,
) -> tl::enums::Chat {
    tl::types::Chat {
        creator: false,
        left: false,
        deactivated: migrated_to.is_some(),
        call_active: false,
        call_not_empty: false,
        noforwards: false,
        id,
        title: title.to_string(),
        photo: tl::enums::ChatPhoto::Empty,
        participants_count: members,
        date,
        version: 1,
        migrated_to: migrated_to.map(|(channel_id, access_hash)| {
            tl::types::InputChannel {
                channel_id,
                access_hash,
            }
            .into()
        }),
        admin_rights: None,
        default_banned_rights: None,
    }
    .into()
}

/// What kind of channel [`channel`] builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelFlags {
    pub broadcast: bool,
    pub forum: bool,
    pub slow_mode: bool,
}

/// A channel: a supergroup (a forum with topics when `flags.forum`) or a broadcast channel.
pub fn channel(
    id: i64,
    access_hash: i64,
    title: &str,
    date: i32,
    flags: ChannelFlags,
) -> tl::enums::Chat {
    tl::types::Channel {
        creator: false,
        left: false,
        broadcast: flags.broadcast,
        verified: false,
        megagroup: !flags.broadcast,
        restricted: false,
        signatures: false,
        min: false,
        scam: false,
        has_link: false,
        has_geo: false,
        slowmode_enabled: flags.slow_mode,
        call_active: false,
        call_not_empty: false,
        fake: false,
        gigagroup: false,
        noforwards: false,
        join_to_send: false,
        join_request: false,
        forum: flags.forum,
        stories_hidden: false,
        stories_hidden_min: false,
        stories_unavailable: false,
        signature_profiles: false,
        autotranslation: false,
        broadcast_messages_allowed: false,
        monoforum: false,
        forum_tabs: false,
        id,
        access_hash: Some(access_hash),
        title: title.to_string(),
        username: None,
        photo: tl::enums::ChatPhoto::Empty,
        date,
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

pub fn peer_user(id: i64) -> tl::enums::Peer {
    tl::types::PeerUser { user_id: id }.into()
}
pub fn peer_chat(id: i64) -> tl::enums::Peer {
    tl::types::PeerChat { chat_id: id }.into()
}
pub fn peer_channel(id: i64) -> tl::enums::Peer {
    tl::types::PeerChannel { channel_id: id }.into()
}

/// A text message (no media, no flags but `out`).
pub fn message(
    id: i32,
    peer: tl::enums::Peer,
    from: Option<tl::enums::Peer>,
    text: &str,
    date: i32,
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
        date,
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

/// A reply header: to message `to` (none: a plain message in a forum topic), inside the forum
/// topic `top` when given.
pub fn reply_header(to: Option<i32>, top: Option<i32>) -> tl::enums::MessageReplyHeader {
    tl::types::MessageReplyHeader {
        reply_to_scheduled: false,
        forum_topic: top.is_some(),
        quote: false,
        reply_to_ephemeral: false,
        reply_to_msg_id: to.or(top),
        reply_to_peer_id: None,
        reply_from: None,
        reply_media: None,
        reply_to_top_id: to.and(top).filter(|t| Some(*t) != to),
        quote_text: None,
        quote_entities: None,
        quote_offset: None,
        todo_item_id: None,
        poll_option: None,
    }
    .into()
}

/// Notify settings muted until `mute_until` (0: not muted).
pub fn notify_settings(mute_until: i32) -> tl::enums::PeerNotifySettings {
    tl::types::PeerNotifySettings {
        show_previews: None,
        silent: None,
        mute_until: Some(mute_until),
        ios_sound: None,
        android_sound: None,
        other_sound: None,
        stories_muted: None,
        stories_hide_sender: None,
        stories_ios_sound: None,
        stories_android_sound: None,
        stories_other_sound: None,
    }
    .into()
}

/// The answer to `help.getConfig`: this one DC, where the client already is.
pub fn config(date: i32, ip: &str, port: u16) -> tl::enums::Config {
    tl::types::Config {
        default_p2p_contacts: false,
        preload_featured_stickers: false,
        revoke_pm_inbox: true,
        blocked_mode: false,
        force_try_ipv6: false,
        date,
        expires: date + 3600,
        test_mode: false,
        this_dc: super::HOME_DC,
        dc_options: vec![
            tl::types::DcOption {
                ipv6: false,
                media_only: false,
                tcpo_only: false,
                cdn: false,
                r#static: true,
                this_port_only: false,
                id: super::HOME_DC,
                ip_address: ip.to_string(),
                port: i32::from(port),
                secret: None,
            }
            .into(),
        ],
        dc_txt_domain_name: String::new(),
        chat_size_max: 200,
        megagroup_size_max: 200_000,
        forwarded_count_max: 100,
        online_update_period_ms: 210_000,
        offline_blur_timeout_ms: 5_000,
        offline_idle_timeout_ms: 30_000,
        online_cloud_timeout_ms: 300_000,
        notify_cloud_delay_ms: 30_000,
        notify_default_delay_ms: 1_500,
        push_chat_period_ms: 60_000,
        push_chat_limit: 2,
        edit_time_limit: 172_800,
        revoke_time_limit: i32::MAX,
        revoke_pm_time_limit: i32::MAX,
        rating_e_decay: 2_419_200,
        stickers_recent_limit: 200,
        channels_read_media_period: 604_800,
        tmp_sessions: None,
        call_receive_timeout_ms: 20_000,
        call_ring_timeout_ms: 90_000,
        call_connect_timeout_ms: 30_000,
        call_packet_timeout_ms: 10_000,
        me_url_prefix: "https://t.me/".into(),
        autoupdate_url_prefix: None,
        gif_search_username: None,
        venue_search_username: None,
        img_search_username: None,
        static_maps_provider: None,
        caption_length_max: super::CAPTION_LIMIT as i32,
        message_length_max: super::MESSAGE_LIMIT as i32,
        webfile_dc_id: super::HOME_DC,
        suggested_lang_code: None,
        lang_pack_version: None,
        base_lang_pack_version: None,
        reactions_default: None,
        autologin_token: None,
    }
    .into()
}

/// The reactions a chat allows: some emoji, or all.
fn chat_reactions(allowed: Option<&[String]>) -> tl::enums::ChatReactions {
    match allowed {
        Some(list) => tl::types::ChatReactionsSome {
            reactions: list
                .iter()
                .map(|e| {
                    tl::types::ReactionEmoji {
                        emoticon: e.clone(),
                    }
                    .into()
                })
                .collect(),
        }
        .into(),
        None => tl::types::ChatReactionsAll {
            allow_custom: false,
        }
        .into(),
    }
}

/// A basic group's full info (what the backend reads: its allowed reactions).
pub fn full_chat(id: i64, allowed: Option<&[String]>) -> tl::enums::ChatFull {
    tl::types::ChatFull {
        can_set_username: false,
        has_scheduled: false,
        translations_disabled: false,
        has_welcome_messages: false,
        id,
        about: String::new(),
        participants: tl::types::ChatParticipantsForbidden {
            chat_id: id,
            self_participant: None,
        }
        .into(),
        chat_photo: None,
        notify_settings: notify_settings(0),
        exported_invite: None,
        bot_info: None,
        pinned_msg_id: None,
        folder_id: None,
        call: None,
        ttl_period: None,
        groupcall_default_join_as: None,
        theme_emoticon: None,
        requests_pending: None,
        recent_requesters: None,
        available_reactions: Some(chat_reactions(allowed)),
        reactions_limit: None,
    }
    .into()
}

/// A supergroup's full info: its pts, slow mode and allowed reactions.
pub fn full_channel(
    id: i64,
    pts: i32,
    slow_mode: i32,
    allowed: Option<&[String]>,
) -> tl::enums::ChatFull {
    tl::types::ChannelFull {
        can_view_participants: false,
        can_set_username: false,
        can_set_stickers: false,
        hidden_prehistory: false,
        can_set_location: false,
        has_scheduled: false,
        can_view_stats: false,
        blocked: false,
        can_delete_channel: false,
        antispam: false,
        participants_hidden: false,
        translations_disabled: false,
        stories_pinned_available: false,
        view_forum_as_messages: false,
        restricted_sponsored: false,
        can_view_revenue: false,
        paid_media_allowed: false,
        can_view_stars_revenue: false,
        paid_reactions_available: false,
        stargifts_available: false,
        paid_messages_available: false,
        has_welcome_messages: false,
        id,
        about: String::new(),
        participants_count: None,
        admins_count: None,
        kicked_count: None,
        banned_count: None,
        online_count: None,
        read_inbox_max_id: 0,
        read_outbox_max_id: 0,
        unread_count: 0,
        chat_photo: tl::types::PhotoEmpty { id: 0 }.into(),
        notify_settings: notify_settings(0),
        exported_invite: None,
        bot_info: Vec::new(),
        migrated_from_chat_id: None,
        migrated_from_max_id: None,
        pinned_msg_id: None,
        stickerset: None,
        available_min_id: None,
        folder_id: None,
        linked_chat_id: None,
        location: None,
        slowmode_seconds: (slow_mode > 0).then_some(slow_mode),
        slowmode_next_send_date: None,
        stats_dc: None,
        pts,
        call: None,
        ttl_period: None,
        pending_suggestions: None,
        groupcall_default_join_as: None,
        theme_emoticon: None,
        requests_pending: None,
        recent_requesters: None,
        default_send_as: None,
        available_reactions: Some(chat_reactions(allowed)),
        reactions_limit: None,
        stories: None,
        wallpaper: None,
        boosts_applied: None,
        boosts_unrestrict: None,
        emojiset: None,
        bot_verification: None,
        stargifts_count: None,
        send_paid_messages_stars: None,
        main_tab: None,
        guard_bot_id: None,
    }
    .into()
}

/// A file as a message carries it: the document's id, access hash and current file
/// reference (references expire: see `World::expire_file_references`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Media {
    pub id: i64,
    pub access_hash: i64,
    pub file_reference: Vec<u8>,
    pub mime_type: String,
    pub name: String,
    pub size: i64,
    pub voice: bool,
    /// A voice note's length in seconds, and its waveform (Telegram's packed 5-bit form).
    pub duration: i32,
    pub waveform: Option<Vec<u8>>,
    /// A photo (a message carries it as `messageMediaPhoto`), not a document.
    pub photo: bool,
}

/// A message's document (or photo).
pub fn document(f: &Media, date: i32) -> tl::enums::MessageMedia {
    if f.photo {
        return tl::types::MessageMediaPhoto {
            spoiler: false,
            live_photo: false,
            photo: Some(
                tl::types::Photo {
                    has_stickers: false,
                    id: f.id,
                    access_hash: f.access_hash,
                    file_reference: f.file_reference.clone(),
                    date,
                    sizes: vec![
                        tl::types::PhotoSize {
                            r#type: "x".into(),
                            w: 800,
                            h: 600,
                            size: i32::try_from(f.size).unwrap_or(i32::MAX),
                        }
                        .into(),
                    ],
                    video_sizes: None,
                    dc_id: super::HOME_DC,
                }
                .into(),
            ),
            ttl_seconds: None,
            video: None,
        }
        .into();
    }
    let mut attributes: Vec<tl::enums::DocumentAttribute> = vec![
        tl::types::DocumentAttributeFilename {
            file_name: f.name.clone(),
        }
        .into(),
    ];
    if f.voice {
        attributes.push(
            tl::types::DocumentAttributeAudio {
                voice: true,
                duration: f.duration,
                title: None,
                performer: None,
                waveform: f.waveform.clone(),
            }
            .into(),
        );
    }
    tl::types::MessageMediaDocument {
        nopremium: false,
        spoiler: false,
        video: false,
        round: false,
        voice: f.voice,
        document: Some(
            tl::types::Document {
                id: f.id,
                access_hash: f.access_hash,
                file_reference: f.file_reference.clone(),
                date,
                mime_type: f.mime_type.clone(),
                size: f.size,
                thumbs: None,
                video_thumbs: None,
                dc_id: super::HOME_DC,
                attributes,
            }
            .into(),
        ),
        alt_documents: None,
        video_cover: None,
        video_timestamp: None,
        ttl_seconds: None,
    }
    .into()
}
