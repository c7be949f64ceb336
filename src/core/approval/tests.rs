use super::*;

#[test]
fn modes_say_which_chats_wait() {
    use ApprovalMode::*;
    assert!(!Off.requires(true, false));
    assert!(NewContacts.requires(true, false));
    assert!(!NewContacts.requires(true, true), "a known contact");
    assert!(
        !NewContacts.requires(false, false),
        "groups are not contacts"
    );
    assert!(Groups.requires(false, true) && !Groups.requires(true, false));
    assert!(All.requires(true, true) && All.requires(false, true));
    assert_eq!(
        "New Contacts".parse::<ApprovalMode>().ok(),
        Some(NewContacts)
    );
    assert!("sometimes".parse::<ApprovalMode>().is_err());
}

#[test]
fn the_owners_reply_reads_as_a_decision() {
    assert_eq!(Decision::from_reply(" OK! "), Some(Decision::Send));
    assert_eq!(Decision::from_reply("👍"), Some(Decision::Send));
    assert_eq!(Decision::from_reply("👍\u{fe0f}"), Some(Decision::Send));
    assert_eq!(Decision::from_reply("no"), Some(Decision::Drop));
    assert_eq!(Decision::from_reply("👎"), Some(Decision::Drop));
    assert_eq!(Decision::from_reply("later"), Some(Decision::Later));
    assert_eq!(
        Decision::from_reply("Not tonight, sorry"),
        Some(Decision::Edit {
            text: "Not tonight, sorry".into()
        })
    );
    assert_eq!(Decision::from_reply("  "), None);
    // The usual ways of saying no never go out as text.
    for no in ["nope", "No thanks", "don't send", "Don’t send", "stop."] {
        assert_eq!(Decision::from_reply(no), Some(Decision::Drop), "{no}");
    }
    assert_eq!(Decision::from_reply("Ok 👍"), Some(Decision::Send));
    assert_eq!(
        Decision::from_reply("send: no"),
        Some(Decision::Edit { text: "no".into() })
    );
    assert_eq!(Decision::from_reply("edit:   "), None);
}

#[test]
fn timeouts_parse_with_what_happens_then() {
    assert_eq!(
        parse_timeout("30m").ok(),
        Some((Duration::from_secs(1800), OnTimeout::Drop))
    );
    assert_eq!(
        parse_timeout("2h, then send").ok(),
        Some((Duration::from_secs(7200), OnTimeout::Send))
    );
    assert!(parse_timeout("soon").is_err());
    assert!(parse_timeout("8d").is_err());
    assert!(parse_timeout("1h then shout").is_err());
}

#[test]
fn ids_match_whole_or_by_a_prefix_of_four_or_more() {
    let id = "draft-3f2a9c000001";
    assert!(matches_id(id, id));
    assert!(matches_id(id, "3f2a"));
    assert!(matches_id(id, "draft-3f2a9c"));
    assert!(!matches_id(id, "3f2"), "too short");
    assert!(!matches_id(id, "draft-"), "the prefix alone names no draft");
    assert!(!matches_id(id, "draft-3f2"));
    assert!(!matches_id(id, "3f2b"));
}
