use super::split::hard_cut;
use super::syntax::{Fence, code_mask, fence, parse_heading};
use super::*;

#[test]
fn headings_are_recognised_in_their_tolerated_forms() {
    for line in [
        "# «send»",
        "#«send»",
        "   # « Send » 12",
        "# «SEND» #12",
        "# send",
        "# send 12",
    ] {
        assert!(parse_heading(line).is_some(), "{line}");
    }
    for line in [
        "    # «send»",
        "## «send»",
        "#send",
        "# send now",
        "# Hello",
        "«send»",
        "# «send",
    ] {
        assert!(parse_heading(line).is_none(), "{line}");
    }
}

#[test]
fn unclosed_fences_open_nothing() {
    let fences: Vec<Option<Fence>> = ["```", "a", "~~~", "```", "b"]
        .iter()
        .map(|l| fence(l))
        .collect();
    assert_eq!(code_mask(&fences), [true, true, true, true, false]);
    let fences: Vec<Option<Fence>> = ["````", "```", "a"].iter().map(|l| fence(l)).collect();
    assert_eq!(code_mask(&fences), [false, false, false]);
}

#[test]
fn delays_parse_in_their_tolerated_forms() {
    assert_eq!(parse_delay("delay: 5"), Ok(5.0));
    assert_eq!(parse_delay("Delay = 1.5s"), Ok(1.5));
    assert_eq!(parse_delay("2 seconds"), Ok(2.0));
    assert_eq!(parse_delay("-0"), Ok(0.0));
    assert!(parse_delay("-3").is_err());
    assert!(parse_delay("NaN").is_err());
    assert!(parse_delay("inf").is_err());
    assert!(parse_delay("1e3").is_err());
    assert!(parse_delay("1.2.3").is_err());
    assert!(parse_delay("").is_err());
}

#[test]
fn hard_cuts_keep_emoji_sequences_together() {
    let text = "ab👍🏽c";
    // "ab" + 👍 is 4 units; cutting there would orphan the skin tone.
    let fit = fitting_prefix(text, 4);
    assert_eq!(hard_cut(text, fit), 2);
}
