//! Tests of task-block parsing (`personad::core::blocks`): each test states what it proves. The
//! parser is fed model text, which is adversarial, so besides the format itself these pin
//! down the guards (caps, gating, reply-id checks, splitting) and, with property tests, that no
//! input panics and that valid blocks survive noise.

use std::collections::HashSet;

use personad::core::blocks::{
    ParseOptions, ParsedReply, TELEGRAM_TEXT_LIMIT_UTF16, parse_reply, split_message, utf16_len,
};
use personad::core::intents::IntentWrite;
use personad::core::model::{MessageId, StickerChoice};
use personad::core::plan::Action;
use proptest::prelude::*;

fn parse(text: &str) -> ParsedReply {
    parse_reply(text, &ParseOptions::default())
}

fn send(text: &str) -> Action {
    Action::Send {
        text: text.to_owned(),
        reply_to: None,
    }
}

fn send_reply(text: &str, id: i64) -> Action {
    Action::Send {
        text: text.to_owned(),
        reply_to: Some(MessageId(id)),
    }
}

fn sticker(set: &str, name: &str, reply_to: Option<i64>) -> Action {
    Action::Sticker {
        sticker: StickerChoice {
            set: set.to_owned(),
            name: name.to_owned(),
        },
        reply_to: reply_to.map(MessageId),
    }
}

/// Asserts exactly one warning was produced and that it contains every fragment.
#[track_caller]
fn assert_one_warning(parsed: &ParsedReply, fragments: &[&str]) {
    assert_eq!(parsed.warnings.len(), 1, "warnings: {:?}", parsed.warnings);
    for fragment in fragments {
        assert!(
            parsed.warnings[0].contains(fragment),
            "{:?} lacks {fragment:?}",
            parsed.warnings[0]
        );
    }
}

fn known(ids: &[i64]) -> ParseOptions {
    ParseOptions {
        known_messages: Some(ids.iter().copied().map(MessageId).collect::<HashSet<_>>()),
        ..ParseOptions::default()
    }
}

fn strip_ws(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

// ------------------------------------------------------------------------------------------
// Kinds

/// A send's body is trimmed but its inner formatting and line breaks are kept verbatim.
#[test]
fn send_keeps_inner_formatting() {
    let parsed = parse("# «send»\n\n  **Hi** there,\n\n__friend__ `x`  \n\n");
    assert_eq!(parsed.actions, [send("**Hi** there,\n\n__friend__ `x`")]);
    assert!(parsed.warnings.is_empty());
}

/// Several blocks run in order; kinds are case-insensitive and may have inner spaces.
#[test]
fn blocks_run_in_order_and_kinds_ignore_case() {
    let parsed = parse("# «send»\nOne\n#«SEND»\nTwo\n   # « Send »\nThree");
    assert_eq!(parsed.actions, [send("One"), send("Two"), send("Three")]);
    assert!(parsed.warnings.is_empty());
}

/// The heading's id (`1234` or `#1234`) becomes the send's and the sticker's reply.
#[test]
fn heading_ids_become_replies() {
    let parsed = parse("# «send» 1234\nYes\n# «send» #77\nNo\n# «sticker» 5\nCats\nhappy");
    assert_eq!(
        parsed.actions,
        [
            send_reply("Yes", 1234),
            send_reply("No", 77),
            sticker("Cats", "happy", Some(5)),
        ]
    );
    assert!(parsed.warnings.is_empty());
}

/// An id too large for a message id is dropped with a warning; the text is still sent.
#[test]
fn out_of_range_ids_are_dropped() {
    let parsed = parse("# «send» 99999999999999999999999\nHi");
    assert_eq!(parsed.actions, [send("Hi")]);
    assert_one_warning(&parsed, &["block 1 («send»)", "out of range"]);
}

/// A sticker is a set and a name on two lines, or `SET :: NAME` on one.
#[test]
fn sticker_takes_a_set_and_a_name() {
    let parsed = parse("# «sticker»\n  Cats_2 \n\n  happy cat \n# «sticker»\nDogs :: 🐶");
    assert_eq!(
        parsed.actions,
        [
            sticker("Cats_2", "happy cat", None),
            sticker("Dogs", "🐶", None)
        ]
    );
    assert!(parsed.warnings.is_empty());
}

/// One line names a sticker in the persona's first set; without such a set it is skipped.
#[test]
fn sticker_with_only_a_name_uses_the_default_set() {
    let opts = ParseOptions {
        default_sticker_set: Some("Persona".into()),
        ..ParseOptions::default()
    };
    let parsed = parse_reply("# «sticker»\nwave", &opts);
    assert_eq!(parsed.actions, [sticker("Persona", "wave", None)]);
    assert!(parsed.warnings.is_empty());

    let parsed = parse("# «sticker»\nwave\n# «send»\nstill here");
    assert_eq!(parsed.actions, [send("still here")]);
    assert_one_warning(
        &parsed,
        &["block 1 («sticker»)", "no sticker set", "skipped"],
    );
}

/// Malformed stickers (empty body, a set name with spaces or punctuation) are skipped.
#[test]
fn malformed_stickers_are_skipped() {
    let parsed = parse("# «sticker»\n\n# «send»\nok");
    assert_eq!(parsed.actions, [send("ok")]);
    assert_one_warning(&parsed, &["block 1 («sticker»): needs a set and a name"]);

    let parsed = parse("# «sticker»\nHere is my sticker!\nhappy");
    assert!(parsed.actions.is_empty());
    assert_one_warning(&parsed, &["not a sticker set's short name"]);
}

/// Lines past the sticker's two are ignored with a warning; the sticker is still sent.
#[test]
fn sticker_extra_lines_are_ignored() {
    let parsed = parse("# «sticker»\nCats\nhappy\nand a message");
    assert_eq!(parsed.actions, [sticker("Cats", "happy", None)]);
    assert_one_warning(&parsed, &["1 extra line"]);
}

/// A wait accepts `delay: N`, a bare `N` and fractions.
#[test]
fn wait_accepts_its_forms() {
    let parsed = parse("# «wait»\ndelay: 5\n# «wait»\n2.5\n# «wait»\nDelay:0.25s");
    assert_eq!(
        parsed.actions,
        [
            Action::Wait { secs: 5.0 },
            Action::Wait { secs: 2.5 },
            Action::Wait { secs: 0.25 },
        ]
    );
    assert!(parsed.warnings.is_empty());
}

/// A wait over the maximum is clamped to it, with a warning.
#[test]
fn long_waits_are_clamped() {
    let parsed = parse("# «wait»\ndelay: 86400");
    assert_eq!(parsed.actions, [Action::Wait { secs: 3600.0 }]);
    assert_one_warning(&parsed, &["block 1 («wait»)", "clamped"]);

    let opts = ParseOptions {
        max_wait_secs: 10.0,
        ..ParseOptions::default()
    };
    let parsed = parse_reply("# «wait»\n11", &opts);
    assert_eq!(parsed.actions, [Action::Wait { secs: 10.0 }]);
}

/// Negative, NaN, infinite, empty and garbage delays are skipped; later blocks still run.
#[test]
fn malformed_waits_are_skipped() {
    for body in [
        "delay: -5",
        "NaN",
        "inf",
        "delay: soon",
        "",
        "1e9",
        "5 minutes",
    ] {
        let parsed = parse(&format!("# «wait»\n{body}\n# «send»\nafter"));
        assert_eq!(parsed.actions, [send("after")], "{body}");
        assert_eq!(parsed.warnings.len(), 1, "{body}: {:?}", parsed.warnings);
        assert!(parsed.warnings[0].starts_with("block 1 («wait»)"));
        assert!(parsed.warnings[0].contains("skipped"));
    }
}

/// A react needs the target id in its heading and one short emoji as its body.
#[test]
fn react_targets_the_heading_id() {
    let parsed = parse("# «react» 42\n  ❤️ \n# «react» #43\n👨‍👩‍👧‍👦");
    assert_eq!(
        parsed.actions,
        [
            Action::React {
                message: MessageId(42),
                emoji: "❤️".into(),
            },
            Action::React {
                message: MessageId(43),
                emoji: "👨‍👩‍👧‍👦".into(),
            },
        ]
    );
    assert!(parsed.warnings.is_empty());
}

/// Reacts without a target, with an empty body, with text instead of an emoji, or with more
/// than 16 chars are skipped.
#[test]
fn malformed_reacts_are_skipped() {
    for (reply, fragment) in [
        ("# «react»\n👍", "needs the target message id"),
        ("# «react» 5\n", "needs an emoji"),
        ("# «react» 5\nthumbs up", "not a single emoji"),
        (
            "# «react» 5\n👍👍👍👍👍👍👍👍👍👍👍👍👍👍👍👍👍",
            "not a single emoji",
        ),
    ] {
        let parsed = parse(&format!("{reply}\n# «send»\nafter"));
        assert_eq!(parsed.actions, [send("after")], "{reply}");
        assert_one_warning(&parsed, &["block 1 («react»)", fragment, "skipped"]);
    }
}

/// Block and unblock need no body; a body or an id is ignored with a warning.
#[test]
fn block_and_unblock_ignore_their_bodies() {
    let parsed = parse("# «block»\n# «wait»\n60\n# «unblock»");
    assert_eq!(
        parsed.actions,
        [Action::Block, Action::Wait { secs: 60.0 }, Action::Unblock]
    );
    assert!(parsed.warnings.is_empty());

    let parsed = parse("# «block» 12\nbye forever");
    assert_eq!(parsed.actions, [Action::Block]);
    assert_eq!(parsed.warnings.len(), 2, "{:?}", parsed.warnings);
}

/// The original prompt's `# unblock` (no guillemets) is a heading, not part of the wait's
/// body, so a timed block really ends; hashtags and ordinary `# ` lines stay text.
#[test]
fn bare_headings_of_known_kinds_are_accepted() {
    let parsed = parse("# «block»\n# «wait»\ndelay: 30\n# unblock");
    assert_eq!(
        parsed.actions,
        [Action::Block, Action::Wait { secs: 30.0 }, Action::Unblock]
    );
    assert_one_warning(&parsed, &["block 3 («unblock»)", "no guillemets"]);

    let parsed = parse("# «send»\n#block party\n# Send me a photo\n# wait for it");
    assert_eq!(
        parsed.actions,
        [send("#block party\n# Send me a photo\n# wait for it")]
    );
    assert!(parsed.warnings.is_empty());
}

/// clear-conversation is produced only when the persona enables it.
#[test]
fn clear_conversation_is_gated() {
    let reply = "# «clear-conversation»\n# «send»\nfresh start";
    let parsed = parse(reply);
    assert_eq!(parsed.actions, [send("fresh start")]);
    assert_one_warning(&parsed, &["block 1 («clear-conversation»)", "not enabled"]);

    let opts = ParseOptions {
        allow_clear_conversation: true,
        ..ParseOptions::default()
    };
    let parsed = parse_reply(reply, &opts);
    assert_eq!(
        parsed.actions,
        [Action::ClearConversation, send("fresh start")]
    );
    assert!(parsed.warnings.is_empty());
}

/// Unknown kinds (including the operator-only `shutdown`) are skipped with a warning that
/// names them, and every other block still runs: one bad block no longer discards the reply.
/// `think` (the original's private reasoning) is dropped without a warning.
#[test]
fn unknown_kinds_are_skipped_while_others_run() {
    let reply = "# «send»\nbefore\n# «shutdown»\nbye\n# «teleport»\nhttps://example.org\n\
                 # «think»\nhmm\n# «wait»\n1\n# «send»\nafter";
    let parsed = parse(reply);
    assert_eq!(
        parsed.actions,
        [send("before"), Action::Wait { secs: 1.0 }, send("after")]
    );
    assert_eq!(parsed.warnings.len(), 2, "{:?}", parsed.warnings);
    for (warning, name) in parsed.warnings.iter().zip(["shutdown", "teleport"]) {
        assert!(warning.contains(&format!("(«{name}»)")), "{warning}");
        assert!(warning.contains("unknown kind; skipped"), "{warning}");
    }
}

/// block and unblock are produced unless the persona turns them off (`# Allow Block` false).
#[test]
fn block_and_unblock_are_gated_by_allow_block() {
    let reply = "# «block»\n# «unblock»\n# «send»\nbye";
    let parsed = parse(reply);
    assert_eq!(
        parsed.actions,
        [Action::Block, Action::Unblock, send("bye")],
        "on by default"
    );
    let opts = ParseOptions {
        allow_block: false,
        ..ParseOptions::default()
    };
    let parsed = parse_reply(reply, &opts);
    assert_eq!(parsed.actions, [send("bye")]);
    assert_eq!(parsed.warnings.len(), 2, "{:?}", parsed.warnings);
}

/// `shutdown` never turns into an action, whatever its spelling or options.
#[test]
fn shutdown_is_never_produced() {
    let opts = ParseOptions {
        allow_clear_conversation: true,
        ..ParseOptions::default()
    };
    for reply in ["# «shutdown»", "# «SHUTDOWN» 1\nnow", "# shutdown"] {
        let parsed = parse_reply(reply, &opts);
        // The bare form is not a heading, so it is sent as text; nothing else is produced.
        assert!(
            parsed
                .actions
                .iter()
                .all(|a| matches!(a, Action::Send { .. })),
            "{reply}: {:?}",
            parsed.actions
        );
    }
}

// ------------------------------------------------------------------------------------------
// Fallbacks

/// An empty or whitespace-only reply is silence: no actions and no warnings.
#[test]
fn empty_reply_is_silence() {
    for reply in ["", "   ", "\n\n\t\n", "```\n```", "```markdown\n  \n```"] {
        assert_eq!(parse(reply), ParsedReply::default(), "{reply:?}");
    }
}

/// A reply with no heading is one send of the whole trimmed text.
#[test]
fn text_without_headings_is_one_send() {
    let parsed = parse("\n  Hello!\n\nHow are you?  \n");
    assert_eq!(parsed.actions, [send("Hello!\n\nHow are you?")]);
    assert!(parsed.warnings.is_empty());
}

/// Text before the first heading is sent first, as a send of its own.
#[test]
fn text_before_the_first_heading_is_sent() {
    let parsed = parse("Sure!\n\n# «send» 3\nHere it is");
    assert_eq!(parsed.actions, [send("Sure!"), send_reply("Here it is", 3)]);
    assert!(parsed.warnings.is_empty());
}

/// A reply wholly wrapped in a ```markdown, ```md or bare fence (with surrounding whitespace)
/// is unwrapped first; other languages are code the persona means to send.
#[test]
fn wrapping_fences_are_removed() {
    for reply in [
        "```markdown\n# «send»\nHi\n```",
        "  \n```MD\n# «send»\nHi\n```\n\n",
        "```\n# «send»\nHi\n```",
        "````markdown\n# «send»\nHi\n````",
    ] {
        let parsed = parse(reply);
        assert_eq!(parsed.actions, [send("Hi")], "{reply:?}");
        assert!(parsed.warnings.is_empty(), "{reply:?}");
    }
    let parsed = parse("```\nplain answer\n```");
    assert_eq!(parsed.actions, [send("plain answer")]);

    let code = "```python\nprint('hi')\n```";
    assert_eq!(parse(code).actions, [send(code)]);
}

/// A wrapper cut off before its closing fence (a token limit) is still removed.
#[test]
fn unclosed_wrapping_fence_is_removed() {
    let parsed = parse("```markdown\n# «send»\nHi\n# «send»\nthere");
    assert_eq!(parsed.actions, [send("Hi"), send("there")]);
}

/// A wrapper keeps the code blocks inside it: nested fences are paired, not mistaken for the
/// wrapper's end.
#[test]
fn wrapper_with_inner_code_block_is_unwrapped() {
    let parsed = parse("```markdown\n# «send»\nLook:\n```\nx = 1\n```\n# «send»\nok\n```");
    assert_eq!(parsed.actions, [send("Look:\n```\nx = 1\n```"), send("ok")]);
}

/// Heading-like lines inside a fenced code block in a send body are text, not blocks.
#[test]
fn headings_inside_code_fences_stay_text() {
    let body = "Write it like this:\n```\n# «block»\n# «send» 1\nhi\n```\n~~~md\n# «shutdown»\n~~~";
    let parsed = parse(&format!("# «send»\n{body}\n# «wait»\n1"));
    assert_eq!(parsed.actions, [send(body), Action::Wait { secs: 1.0 }]);
    assert!(parsed.warnings.is_empty());
}

/// A fence that is never closed hides nothing: later headings still count.
#[test]
fn unclosed_inner_fence_does_not_swallow_headings() {
    let parsed = parse("# «send»\n```\noops\n# «block»");
    assert_eq!(parsed.actions, [send("```\noops"), Action::Block]);
}

/// Windows line endings work like Unix ones.
#[test]
fn crlf_line_endings_are_handled() {
    let parsed = parse("# «send» 9\r\nHi\r\n# «wait»\r\ndelay: 2\r\n");
    assert_eq!(
        parsed.actions,
        [send_reply("Hi", 9), Action::Wait { secs: 2.0 }]
    );
}

// ------------------------------------------------------------------------------------------
// Guards

/// No more than `max_tasks` actions survive; the rest are dropped with one warning.
#[test]
fn max_tasks_caps_the_actions() {
    let reply: String = (0..15).map(|i| format!("# «send»\nm{i}\n")).collect();
    let parsed = parse(&reply);
    assert_eq!(parsed.actions.len(), 12);
    assert_eq!(parsed.actions[11], send("m11"));
    assert_one_warning(&parsed, &["15 actions", "first 12"]);

    let opts = ParseOptions {
        max_tasks: 2,
        ..ParseOptions::default()
    };
    assert_eq!(parse_reply(&reply, &opts).actions, [send("m0"), send("m1")]);
}

/// A cap that would cut between a block and its unblock drops the block too, so the cap can
/// never make a timed block permanent; a block with no unblock in the reply is kept.
#[test]
fn max_tasks_never_strands_a_block() {
    let opts = ParseOptions {
        max_tasks: 2,
        ..ParseOptions::default()
    };
    let parsed = parse_reply("# «send»\nbye\n# «block»\n# «wait»\n60\n# «unblock»", &opts);
    assert_eq!(parsed.actions, [send("bye")]);
    assert_eq!(parsed.warnings.len(), 2, "{:?}", parsed.warnings);
    assert!(parsed.warnings[1].contains("«block» was dropped"));

    let parsed = parse_reply("# «send»\nbye\n# «block»\n# «send»\nx", &opts);
    assert_eq!(parsed.actions, [send("bye"), Action::Block]);
}

/// Telegram counts UTF-16 units: 3000 emoji (6000 units, 3000 chars) are too long for one
/// message. Splitting keeps all the text, every part fits, and only the first part replies.
#[test]
fn long_sends_are_split_counting_utf16() {
    let paragraph = "😀".repeat(1500);
    let text = format!("{paragraph}\n\n{paragraph}");
    assert!(text.chars().count() < TELEGRAM_TEXT_LIMIT_UTF16 && utf16_len(&text) > 4096);
    let parsed = parse(&format!("# «send» 7\n{text}"));
    assert_eq!(
        parsed.actions,
        [send_reply(&paragraph, 7), send(&paragraph)],
        "split at the blank line"
    );
    assert_one_warning(&parsed, &["block 1 («send»)", "split into 2 messages"]);
}

/// Without blank lines the split falls on line breaks, then on spaces, then anywhere; all
/// text survives and every part is within the limit.
#[test]
fn split_message_prefers_paragraphs_then_lines_then_words() {
    assert_eq!(
        split_message("aaa\nbb\n\ncc dd", 8),
        ["aaa\nbb", "cc dd"],
        "paragraph"
    );
    assert_eq!(split_message("aaa\nbbb ccc", 8), ["aaa", "bbb ccc"], "line");
    assert_eq!(split_message("aaa bbb ccc", 8), ["aaa bbb", "ccc"], "word");
    assert_eq!(
        split_message("abcdefghij", 4),
        ["abcd", "efgh", "ij"],
        "hard"
    );
    assert_eq!(
        split_message("😀😀😀", 4),
        ["😀😀", "😀"],
        "never halves a pair"
    );
    assert_eq!(split_message("fits", 4), ["fits"]);
    assert!(split_message(" \n ", 4).is_empty());

    let text: String = (0..3000).map(|i| format!("line {i} ✨\n")).collect();
    let parts = split_message(&text, TELEGRAM_TEXT_LIMIT_UTF16);
    assert!(parts.len() > 1);
    assert!(
        parts
            .iter()
            .all(|p| utf16_len(p) <= TELEGRAM_TEXT_LIMIT_UTF16)
    );
    assert_eq!(strip_ws(&parts.concat()), strip_ws(&text));
}

/// With the chat's history known, a reply to an unknown message is sent without the reply
/// (with a warning) and a react on an unknown message is skipped.
#[test]
fn known_messages_filter_reply_ids() {
    let opts = known(&[10, 11]);
    let reply = "# «send» 10\na\n# «send» 99\nb\n# «sticker» 98\nCats\nhappy\n\
                 # «react» 11\n👍\n# «react» 97\n👍";
    let parsed = parse_reply(reply, &opts);
    assert_eq!(
        parsed.actions,
        [
            send_reply("a", 10),
            send("b"),
            sticker("Cats", "happy", None),
            Action::React {
                message: MessageId(11),
                emoji: "👍".into(),
            },
        ]
    );
    assert_eq!(parsed.warnings.len(), 3, "{:?}", parsed.warnings);
    assert!(parsed.warnings[0].starts_with("block 2 («send»): message 99 is not in"));
    assert!(parsed.warnings[1].starts_with("block 3 («sticker»): message 98"));
    assert!(parsed.warnings[2].starts_with("block 5 («react»): message 97"));
    assert!(parsed.warnings[2].ends_with("skipped"));
}

/// Warnings quote at most a short, escaped excerpt of model text, however much it wrote.
#[test]
fn warnings_quote_little_model_text() {
    let junk = "x\u{1b}[31m".repeat(1000);
    let reply = format!("# «{junk}»\n# «wait»\n{junk}\n# «react» 1\n{junk}\n# «block»\n{junk}");
    let parsed = parse(&reply);
    assert_eq!(parsed.actions, [Action::Block]);
    assert_eq!(parsed.warnings.len(), 4, "{:?}", parsed.warnings);
    for warning in &parsed.warnings {
        assert!(warning.chars().count() < 200, "{warning}");
        assert!(!warning.contains('\u{1b}'), "control chars are escaped");
    }
}

// ------------------------------------------------------------------------------------------
// Properties

/// Lines that are not headings, including near misses and a fenced quote of a heading.
fn noise_line() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 ,.!?'-]{0,40}",
        Just(String::new()),
        Just("#hashtag".to_owned()),
        Just("# not a heading".to_owned()),
        Just("## «send»".to_owned()),
        Just("«send» in quotes".to_owned()),
        Just("    # «send» indented four".to_owned()),
        Just("```\n# «send» quoted\n```".to_owned()),
    ]
}

/// A valid block's heading and body.
fn valid_block() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z][a-zA-Z ]{0,30}".prop_map(|t| format!("# «send»\n{t}")),
        (1..1_000_000i64, "[a-z]{1,10}").prop_map(|(id, t)| format!("# «send» {id}\n{t}")),
        ("[A-Za-z_]{1,20}", "[a-z]{1,10}").prop_map(|(s, n)| format!("# «sticker»\n{s}\n{n}")),
        (0..100_000u32).prop_map(|ms| format!("# «wait»\ndelay: {}", f64::from(ms) / 1000.0)),
        (1..1_000_000i64).prop_map(|id| format!("# «react» {id}\n👍")),
        Just("# «block»".to_owned()),
        Just("# «Unblock»".to_owned()),
        Just("# «event»\ntime: 2026-11-27 09:00\nevery: 1 day\nRemind me.".to_owned()),
        Just("# «event» event-0123".to_owned()),
    ]
}

/// Fragments that exercise every branch of the parser when glued together at random.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        Just("# «send»".to_owned()),
        Just("# «react» 1".to_owned()),
        Just("# «sticker» #99999999999999999999".to_owned()),
        Just("# «wait»".to_owned()),
        Just("# unblock".to_owned()),
        Just("# «event» event-1 x".to_owned()),
        Just("times: 99999999999".to_owned()),
        Just("# «".to_owned()),
        Just("```".to_owned()),
        Just("````md".to_owned()),
        Just("~~~".to_owned()),
        Just("delay: -1e400".to_owned()),
        Just("🏳️‍🌈\u{200d}\u{fe0f}".to_owned()),
        Just("\r\n".to_owned()),
        "[😀a \n]{0,5000}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Arbitrary strings never make the parser panic.
    #[test]
    fn never_panics_on_arbitrary_text(text in any::<String>()) {
        let _ = parse(&text);
    }

    /// Random glue of heading-ish fragments never panics, with any options, and respects the
    /// action cap.
    #[test]
    fn never_panics_on_heading_soup(
        parts in prop::collection::vec(fragment(), 0..30),
        max_tasks in 0..20usize,
        max_wait_secs in prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(-1.0), 0.0..1e6],
        default_set in proptest::option::of("[a-z]{1,5}"),
    ) {
        let opts = ParseOptions {
            max_tasks,
            max_wait_secs,
            allow_clear_conversation: true,
            allow_voice: true,
            allow_block: true,
            allow_schedule: true,
            allow_retrieve: true,
            default_sticker_set: default_set,
            known_messages: Some([MessageId(1)].into_iter().collect()),
            default_person: Some(5),
            known_people: None,
            group: false,
            speakers: Some(personad::core::blocks::Speakers {
                persona: vec!["Wren".into()],
                others: vec!["Bob".into()],
            }),
        };
        let parsed = parse_reply(&parts.join("\n"), &opts);
        prop_assert!(parsed.actions.len() <= max_tasks);
        for action in &parsed.actions {
            if let Action::Wait { secs } = action {
                prop_assert!(secs.is_finite() && *secs >= 0.0);
            }
        }
    }

    /// k valid blocks, each followed by noise lines and the whole optionally fenced, yield
    /// exactly k actions.
    #[test]
    fn valid_blocks_survive_noise(
        blocks in prop::collection::vec(
            (valid_block(), prop::collection::vec(noise_line(), 0..4)),
            1..=12,
        ),
        fenced in any::<bool>(),
    ) {
        let mut reply = String::new();
        for (block, noise) in &blocks {
            reply.push_str(block);
            reply.push('\n');
            for line in noise {
                reply.push_str(line);
                reply.push('\n');
            }
        }
        if fenced {
            reply = format!("```markdown\n{reply}```\n");
        }
        let parsed = parse(&reply);
        prop_assert_eq!(parsed.actions.len(), blocks.len(), "{:?}", parsed);
    }

    /// Every send the parser produces has text that is not blank and fits Telegram's limit.
    #[test]
    fn sends_are_never_blank_or_too_long(
        parts in prop::collection::vec(
            prop_oneof![
                fragment(),
                ("[😀👍🏽é a\n]{1,3}", 1..3000usize).prop_map(|(s, n)| s.repeat(n)),
            ],
            0..6,
        ),
    ) {
        let opts = ParseOptions { max_tasks: usize::MAX, ..ParseOptions::default() };
        let parsed = parse_reply(&parts.join("\n"), &opts);
        for action in &parsed.actions {
            if let Action::Send { text, .. } = action {
                prop_assert!(!text.trim().is_empty());
                // Telegram's limit counts the text as shown (after Markdown).
                let shown = personad::core::markdown::rendered_text(text);
                prop_assert!(utf16_len(&shown) <= TELEGRAM_TEXT_LIMIT_UTF16);
            }
        }
    }

    /// The splitter keeps all text in order (modulo whitespace at the cuts), never yields a
    /// blank part, and keeps every part within the limit.
    #[test]
    fn split_message_keeps_all_text(
        text in prop_oneof![any::<String>(), "[😀👍🏽\u{200d}ab \n]{0,400}"],
        limit in 2..64usize,
    ) {
        let parts = split_message(&text, limit);
        let mut cursor = 0;
        for part in &parts {
            prop_assert!(!part.trim().is_empty());
            prop_assert!(utf16_len(part) <= limit);
            let found = text[cursor..].find(part.as_str());
            prop_assert!(found.is_some(), "{:?} not found in order", part);
            cursor += found.unwrap_or(0) + part.len();
        }
        prop_assert_eq!(strip_ws(&parts.concat()), strip_ws(&text));
    }
}

// ------------------------------------------------------------------------------------------
// The original's JSON task arrays

/// A JSON array in the original's Task-* format becomes the same actions as blocks would:
/// `think` is dropped, ids given as numbers or strings work, `id`/`depends_on` are ignored.
#[test]
fn json_task_arrays_are_parsed_like_blocks() {
    let reply = r#"[
      {"kind": "think", "text": "be warm"},
      {"kind": "send", "id": "t1", "text": "Thanks for the invite!", "reply_to": 12},
      {"kind": "wait", "id": "t2", "depends_on": ["t1"], "delay": 5},
      {"kind": "react", "message_id": "12", "emoji": "🔥"},
      {"kind": "sticker", "sticker_set": "WendyDancer", "name": "👍"},
      {"kind": "block"}, {"kind": "unblock"}
    ]"#;
    let parsed = parse(reply);
    assert_eq!(
        parsed.actions,
        vec![
            send_reply("Thanks for the invite!", 12),
            Action::Wait { secs: 5.0 },
            Action::React {
                message: MessageId(12),
                emoji: "🔥".into()
            },
            sticker("WendyDancer", "👍", None),
            Action::Block,
            Action::Unblock,
        ]
    );
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
}

/// Inside a ```json fence (with chatter around it) the array is still read as tasks.
#[test]
fn json_task_arrays_inside_a_fence_are_parsed() {
    let reply = "Here is my plan:\n```json\n[{\"kind\": \"send\", \"text\": \"hi\"}]\n```\n";
    assert_eq!(parse(reply).actions, vec![send("hi")]);
    let bare = "```\n[{\"kind\": \"send\", \"text\": \"hey\"}]\n```";
    assert_eq!(parse(bare).actions, vec![send("hey")]);
}

/// Unknown kinds (a kind neither personad nor the original has) are skipped with a warning, and
/// nothing of the array is ever sent as text, even when the array is cut off: a plan cut off
/// mid-task (the answer's cap, a raw newline in a string) keeps the whole tasks before the
/// break, in either form.
#[test]
fn json_task_arrays_are_never_sent_raw() {
    let parsed = parse(
        r#"[{"kind": "teleport", "urls": ["https://example.org"]}, {"kind": "send", "text": "ok"}]"#,
    );
    assert_eq!(parsed.actions, vec![send("ok")]);
    assert_one_warning(&parsed, &["teleport", "unknown kind"]);

    let cut = parse(r#"[{"kind": "send", "text": "half a"#);
    assert!(cut.actions.is_empty(), "{:?}", cut.actions);
    assert_one_warning(&cut, &["not valid JSON", "nothing sent"]);

    let kept =
        parse(r#"[{"kind": "send", "text": "first {[\"]} one"}, {"kind": "send", "text": "half a"#);
    assert_eq!(kept.actions, vec![send("first {[\"]} one")]);
    assert_one_warning(
        &kept,
        &["not valid JSON", "the 1 whole task(s) before the break"],
    );
    let structured = parse(
        "{\"tasks\": [{\"kind\": \"send\", \"text\": \"hello\"}, {\"kind\": \"react\", \"emoji\": \"x\ny\", \"message_id\": 1}]}",
    );
    assert_eq!(structured.actions, vec![send("hello")]);

    let odd = parse(r#"[{"kind": "send"}, 7, {"text": "no kind"}]"#);
    assert!(odd.actions.is_empty());
    assert_eq!(odd.warnings.len(), 3, "{:?}", odd.warnings);
    let remember = parse(r#"[{"kind": "remember", "content": "x"}]"#);
    assert!(remember.actions.is_empty(), "{:?}", remember.actions);
}

/// A task-block reply quoting a JSON task array in a code fence sends it as text, as written.
#[test]
fn a_json_array_quoted_inside_a_send_block_stays_text() {
    let reply = "# «send»\nThe old format looked like:\n```json\n[{\"kind\": \"send\"}]\n```";
    let parsed = parse(reply);
    assert_eq!(parsed.actions.len(), 1);
    assert!(matches!(&parsed.actions[0], Action::Send { text, .. } if text.contains("\"kind\"")));
}

/// Text that merely starts with a bracket is an ordinary message, not a task array.
#[test]
fn a_bracketed_message_is_still_text() {
    assert_eq!(
        parse("[laughs] fair point").actions,
        vec![send("[laughs] fair point")]
    );
}

/// A `[metadata]` line the model copied from the history is bookkeeping and is not sent.
#[test]
fn echoed_metadata_lines_are_dropped() {
    let parsed = parse("[metadata] sender=\"Wren\" message_id=9\n# «send»\nhello");
    assert_eq!(parsed.actions, vec![send("hello")]);
    assert_one_warning(&parsed, &["metadata"]);
}

// ------------------------------------------------------------------------------------------
// Scheduled intents (`event`)

fn event(write: IntentWrite) -> Action {
    Action::Event { write }
}

/// An `event` block's leading `key: value` lines and its text become one intent write, with
/// the raw strings (the zone and the interval are checked when it is applied).
#[test]
fn event_blocks_become_intent_writes() {
    let parsed = parse(
        "# «event»\ntime: 2026-11-27 09:00\nevery: 1 day\ntimes: 3\nRemind Alice about the dentist.\n\
         # «Event» event-abc123\nTimezone: Europe/London\ninterval: 2 hours\nurgent: yes\n\
         occurrences: 5\nCheck in: how is the project?\nSecond line.",
    );
    assert_eq!(
        parsed.actions,
        [
            event(IntentWrite {
                text: "Remind Alice about the dentist.".into(),
                time: Some("2026-11-27 09:00".into()),
                interval: Some("1 day".into()),
                occurrences: Some(3),
                ..IntentWrite::default()
            }),
            event(IntentWrite {
                id: Some("event-abc123".into()),
                text: "Check in: how is the project?\nSecond line.".into(),
                timezone: Some("Europe/London".into()),
                interval: Some("2 hours".into()),
                occurrences: Some(5),
                urgent: true,
                ..IntentWrite::default()
            }),
        ]
    );
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
}

/// `# «event» ID` with an empty body deletes that intent; an `id:` line works too; an event
/// with neither text nor id is skipped.
#[test]
fn event_blocks_with_an_id_and_no_text_delete() {
    let delete = |id: &str| {
        event(IntentWrite {
            id: Some(id.into()),
            ..IntentWrite::default()
        })
    };
    let parsed = parse("# «event» event-abc123\n# «event»\nid: event-def456\n# «send»\nok");
    assert_eq!(
        parsed.actions,
        [delete("event-abc123"), delete("event-def456"), send("ok")]
    );
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    let empty = parse("# «event»\n# «send»\nok");
    assert_eq!(empty.actions, [send("ok")]);
    assert_one_warning(&empty, &["block 1 («event»)", "no text and no id"]);
}

/// A count or an `urgent` that does not read skips the block with a warning; the rest of the
/// reply still runs.
#[test]
fn malformed_event_fields_warn_and_skip() {
    let parsed = parse("# «event»\ntime: 2026-11-27 09:00\ntimes: abc\nRemind me.\n# «send»\nok");
    assert_eq!(parsed.actions, [send("ok")]);
    assert_one_warning(
        &parsed,
        &["block 1 («event»)", "`times`", "\"abc\"", "skipped"],
    );
    let urgent = parse("# «event»\nurgent: very\ntime: 2026-11-27 09:00\nRemind me.");
    assert!(urgent.actions.is_empty());
    assert_one_warning(&urgent, &["`urgent`", "skipped"]);
    let two_ids = parse("# «event» event-a\nid: event-b\nRemind me.");
    assert!(two_ids.actions.is_empty());
    assert_one_warning(&two_ids, &["two different ids"]);
}

/// The original's JSON `event` task (`intent` for the text) becomes the same write; an empty
/// `intent` with an id deletes; a malformed `occurrences` skips only that task.
#[test]
fn json_event_tasks_become_intent_writes() {
    let parsed = parse(
        r#"[
      {"kind": "event", "intent": "Check in on the project.", "time": "2026-03-01T09:00:00",
       "timezone": "Europe/Berlin", "interval": "2 hours", "occurrences": 5, "urgent": true},
      {"kind": "event", "id": "event-abc123", "intent": ""},
      {"kind": "event", "id": "event-def", "text": "Updated.", "time": "2026-03-01T15:00:00", "occurrences": "2"},
      {"kind": "event", "intent": "x", "time": "2026-03-01T09:00:00", "occurrences": "five"},
      {"kind": "event", "intent": "x", "time": "2026-03-01T09:00:00", "occurrences": -1},
      {"kind": "event"}
    ]"#,
    );
    assert_eq!(
        parsed.actions,
        [
            event(IntentWrite {
                text: "Check in on the project.".into(),
                time: Some("2026-03-01T09:00:00".into()),
                timezone: Some("Europe/Berlin".into()),
                interval: Some("2 hours".into()),
                occurrences: Some(5),
                urgent: true,
                ..IntentWrite::default()
            }),
            event(IntentWrite {
                id: Some("event-abc123".into()),
                ..IntentWrite::default()
            }),
            event(IntentWrite {
                id: Some("event-def".into()),
                text: "Updated.".into(),
                time: Some("2026-03-01T15:00:00".into()),
                occurrences: Some(2),
                ..IntentWrite::default()
            }),
        ]
    );
    assert_eq!(parsed.warnings.len(), 3, "{:?}", parsed.warnings);
    assert!(parsed.warnings[0].starts_with("task 4 («event»): `occurrences` \"five\""));
    assert!(parsed.warnings[1].starts_with("task 5 («event»): `occurrences` \"-1\""));
    assert!(parsed.warnings[2].starts_with("task 6 («event»): no text and no id"));
}

/// A `voice` block is a voice note only where the persona's `# Voice` allows one (the caller
/// says so in `allow_voice`); elsewhere, or when too long to say in one note, its words go as
/// text with a warning, never lost; the JSON form reads the same.
#[test]
fn voice_blocks_are_voice_notes_only_where_allowed_and_otherwise_text() {
    let allowed = ParseOptions {
        allow_voice: true,
        ..ParseOptions::default()
    };
    let reply = parse_reply("# «voice» 3\nHey, just got your message!", &allowed);
    assert_eq!(
        reply.actions,
        vec![Action::Voice {
            text: "Hey, just got your message!".into(),
            reply_to: Some(MessageId(3)),
        }]
    );
    assert!(reply.warnings.is_empty(), "{:?}", reply.warnings);
    let json = parse_reply(
        r#"{"tasks": [{"kind": "voice", "text": "hi there", "reply_to": null}]}"#,
        &allowed,
    );
    assert_eq!(
        json.actions,
        vec![Action::Voice {
            text: "hi there".into(),
            reply_to: None
        }]
    );
    // Not allowed (a persona without `# Voice`): the same words, as text.
    let refused = parse("# «voice»\nHey!");
    assert_eq!(refused.actions, vec![send("Hey!")]);
    assert!(
        refused.warnings[0].contains("not enabled"),
        "{:?}",
        refused.warnings
    );
    // Longer than a voice note says: text.
    let long = "word ".repeat(200);
    let too_long = parse_reply(&format!("# «voice»\n{long}"), &allowed);
    assert!(matches!(too_long.actions.as_slice(), [Action::Send { .. }]));
    assert!(too_long.warnings[0].contains("too long for a voice note"));
}
