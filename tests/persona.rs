//! Tests of persona file loading: each test states what it proves. Problems
//! are checked as rendered strings (`file:line: severity: message`), so the
//! exact wording and line numbers operators see are pinned down here.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use personad::adapters::persona_loader::{PersonaDirError, load_dir, parse_persona};
use personad::core::persona::{
    LoadReport, MAX_FILE_BYTES, PersonaEntry, Severity, StickerRef, apply_placeholders, mask_phone,
    redact_phones,
};

/// The three required fields, nothing else: 11 lines, the last being
/// `Be kind.`; a field appended as `\n# X\n\nvalue` has its heading on line
/// 13 and its value on line 15.
const MINIMAL: &str = "\
# Agent Name

Ada

# Agent Phone

+15550100001

# Agent Instructions

Be kind.
";

fn rendered(entry: &PersonaEntry) -> Vec<String> {
    entry.problems.iter().map(ToString::to_string).collect()
}

/// Parses `src` as `bad.md` with no prompt directories.
fn parse(src: &str) -> PersonaEntry {
    parse_persona(Path::new("bad.md"), src, &[])
}

fn write(dir: &Path, name: &str, content: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, content).expect("write test file");
    path
}

fn load(dir: &Path, prompts: &[PathBuf]) -> LoadReport {
    load_dir(dir, prompts).expect("agents dir is readable")
}

/// A file using every known field is usable, without problems, and every
/// value lands in its field.
#[test]
fn good_file_with_all_fields_is_usable() {
    let tmp = tempfile::tempdir().unwrap();
    let prompts = tmp.path().join("prompts");
    fs::create_dir(&prompts).unwrap();
    write(&prompts, "Person.md", "\nYou are a person.\n\n");
    let src = "\
# Agent Name

Ada

# Agent Phone

+15550100001

# Agent Instructions

You run a small bookshop.

# Role Prompt

Person

# Agent Sticker Sets

UtyaDuck
CutieMadeline

# Agent Stickers

UtyaDuck :: 👋
CutieMadeline::Wave

# Agent Timezone

Europe/Berlin

# Typing Speed

7.5

# Start Typing Delay

2

# LLM Model

gemini-2.5-flash

# Disabled

false
";
    let entry = parse_persona(Path::new("ada.md"), src, std::slice::from_ref(&prompts));
    assert_eq!(rendered(&entry), Vec::<String>::new());
    assert_eq!(entry.name.as_deref(), Some("Ada"));
    let p = entry.persona.expect("usable");
    assert_eq!(p.name, "Ada");
    assert_eq!(p.phone, "+15550100001");
    assert_eq!(p.masked_phone(), "+1555*****01");
    assert_eq!(p.instructions, "You run a small bookshop.");
    assert_eq!(p.role_prompts.len(), 1);
    assert_eq!(p.role_prompts[0].name, "Person");
    assert_eq!(p.role_prompts[0].path, prompts.join("Person.md"));
    assert_eq!(p.role_prompt_text(), "You are a person.");
    assert_eq!(p.sticker_sets, ["UtyaDuck", "CutieMadeline"]);
    assert_eq!(
        p.stickers,
        [
            StickerRef {
                set: "UtyaDuck".into(),
                name: "👋".into()
            },
            StickerRef {
                set: "CutieMadeline".into(),
                name: "Wave".into()
            },
        ]
    );
    assert_eq!(p.timezone_name.as_deref(), Some("Europe/Berlin"));
    assert_eq!(
        p.timezone.as_ref().and_then(|tz| tz.iana_name()),
        Some("Europe/Berlin")
    );
    assert_eq!(p.typing_speed, Some(7.5));
    assert_eq!(p.start_typing_delay, Some(2.0));
    assert_eq!(p.llm_model.as_deref(), Some("gemini-2.5-flash"));
    assert!(!p.disabled);
    assert!(p.extra.is_empty());
    assert_eq!(p.source, Path::new("ada.md"));
}

/// Optional fields are optional: the three required ones alone make a usable
/// persona with empty/none defaults.
#[test]
fn minimal_file_is_usable_with_defaults() {
    let entry = parse(MINIMAL);
    assert_eq!(rendered(&entry), Vec::<String>::new());
    let p = entry.persona.unwrap();
    assert!(p.role_prompts.is_empty() && p.sticker_sets.is_empty() && p.stickers.is_empty());
    assert_eq!(p.role_prompt_text(), "");
    assert!(p.timezone.is_none() && p.typing_speed.is_none() && p.llm_model.is_none());
    assert!(!p.disabled);
}

/// The value of a field is the raw Markdown source: sub-headings, lists,
/// emphasis, links, block quotes and code blocks survive byte for byte (only
/// the surrounding blank lines are trimmed).
#[test]
fn instructions_keep_markdown_verbatim() {
    let body = "\
Intro with *emphasis*, **strong**, `code` and a [link](http://example.com).

## Scenario

- first item
  - nested item
1. numbered

> # quoted heading stays text
> more quote

```python
print(\"hi\")  # comment
```

    indented code

### Deep
Setext sub-heading
------------------
Last line.";
    let src = format!("{MINIMAL}\n# Typing Speed\n\n3\n")
        .replace("Be kind.", body)
        .replace("# Agent Instructions\n\n", "# Agent Instructions\n\n\n");
    let entry = parse(&src);
    assert_eq!(rendered(&entry), Vec::<String>::new());
    let p = entry.persona.unwrap();
    assert_eq!(p.instructions, body);
    assert_eq!(p.typing_speed, Some(3.0));
}

/// A `#` line inside a fenced code block is code, not a field heading: the
/// block stays in the instructions and no unknown-heading warning appears.
#[test]
fn hash_in_fenced_code_block_is_not_a_heading() {
    let src = MINIMAL.replace(
        "Be kind.",
        "Example:\n\n```\n# Agent Name\n# Not A Field\n```\n\n~~~\n# Disabled\n~~~",
    );
    let entry = parse(&src);
    assert_eq!(rendered(&entry), Vec::<String>::new());
    let p = entry.persona.unwrap();
    assert_eq!(p.name, "Ada");
    assert!(!p.disabled);
    assert!(
        p.instructions
            .contains("```\n# Agent Name\n# Not A Field\n```")
    );
    assert!(p.instructions.ends_with("~~~\n# Disabled\n~~~"));
}

/// Setext level-1 headings (`Title` underlined with `===`) are field headings
/// too, and their line is the line of the title text. A `---` underline is a
/// level-2 heading and stays part of the value.
#[test]
fn setext_headings_are_fields() {
    let src = "\
Agent Name
==========

Ada

Agent   phone
===

+15550100001

AGENT INSTRUCTIONS
==================

Hello.

Part two
--------
More.

Mystery
=======
x
";
    let entry = parse(src);
    assert_eq!(
        rendered(&entry),
        ["bad.md:20: warning: unknown heading `# Mystery`: kept, but not used by this version"]
    );
    let p = entry.persona.unwrap();
    assert_eq!(p.phone, "+15550100001");
    assert_eq!(p.instructions, "Hello.\n\nPart two\n--------\nMore.");
    assert_eq!(p.extra.get("Mystery").map(String::as_str), Some("x"));
}

/// Heading names match after trimming, collapsing inner whitespace and
/// ignoring case; closing `#`s of ATX headings are not part of the name.
#[test]
fn heading_names_are_normalized() {
    let src =
        "#   agent    NAME  \nAda\n# Agent Phone ##\n+15550100001\n#\tAgent\tInstructions\nHi\n";
    let entry = parse(src);
    assert_eq!(rendered(&entry), Vec::<String>::new());
    assert_eq!(entry.persona.unwrap().instructions, "Hi");
}

/// A `# Agent Name` inside a block quote or list item is content, not a
/// field heading.
#[test]
fn nested_headings_are_not_fields() {
    let src = MINIMAL.replace("Be kind.", "> # Agent Name\n> Eve\n\n- # Disabled");
    let entry = parse(&src);
    assert_eq!(rendered(&entry), Vec::<String>::new());
    let p = entry.persona.unwrap();
    assert_eq!(p.name, "Ada");
    assert!(!p.disabled);
    assert_eq!(p.instructions, "> # Agent Name\n> Eve\n\n- # Disabled");
}

/// Each missing required heading is its own error, without a line, and the
/// file is unusable.
#[test]
fn missing_required_fields() {
    let entry = parse("# Agent Name\n\nAda\n");
    assert_eq!(
        rendered(&entry),
        [
            "bad.md: error: missing required `# Agent Phone` heading",
            "bad.md: error: missing required `# Agent Instructions` heading",
        ]
    );
    assert!(entry.persona.is_none());
    assert_eq!(entry.name.as_deref(), Some("Ada"));

    let empty = parse("");
    assert_eq!(empty.problems.len(), 3);
    assert!(empty.persona.is_none());
}

/// A field that needs a value but has none is an error on its heading line.
#[test]
fn empty_value_is_an_error_on_the_heading_line() {
    let src = "# Agent Name\n\nAda\n\n# Agent Phone\n\n# Agent Instructions\n\nHi\n\n# Agent Timezone\n\n\n# Typing Speed\n";
    let entry = parse(src);
    assert_eq!(
        rendered(&entry),
        [
            "bad.md:5: error: `# Agent Phone` is empty",
            "bad.md:11: error: `# Agent Timezone` is empty",
            "bad.md:14: error: `# Typing Speed` is empty",
        ]
    );
    assert!(entry.persona.is_none());
}

/// A role prompt missing from every prompt directory is an error on its line
/// naming every directory searched.
#[test]
fn role_prompt_not_found_lists_searched_dirs() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("prompts");
    let b = tmp.path().join("configprompts");
    fs::create_dir(&a).unwrap();
    write(&a, "Person.md", "p");
    let src = format!("{MINIMAL}\n# Role Prompt\n\nPerson\nNope\n");
    let entry = parse_persona(Path::new("bad.md"), &src, &[a.clone(), b.clone()]);
    assert_eq!(
        rendered(&entry),
        [format!(
            "bad.md:16: error: role prompt `Nope` not found (searched `{}`, `{}` for `Nope.md`)",
            a.display(),
            b.display()
        )]
    );
    assert!(entry.persona.is_none());

    let no_dirs = parse(&src);
    assert_eq!(
        rendered(&no_dirs)[0],
        "bad.md:15: error: role prompt `Person` not found: no prompt directories are configured"
    );
}

/// Several role prompts are loaded in the order listed, each from the first
/// directory of the search path that has it, and concatenated with a blank
/// line between them.
#[test]
fn role_prompts_concatenated_in_order_first_dir_wins() {
    let tmp = tempfile::tempdir().unwrap();
    let first = tmp.path().join("first");
    let second = tmp.path().join("second");
    fs::create_dir(&first).unwrap();
    fs::create_dir(&second).unwrap();
    write(&first, "Shared.md", "shared from first\n");
    write(&second, "Shared.md", "shared from second\n");
    write(&second, "Only.md", "\r\nonly in second\r\nline two\r\n");
    write(&first, "Last.md", "last\n");
    let src = format!("{MINIMAL}\n# Role Prompt\n\nOnly\n  Shared  \n\nLast\n");
    let entry = parse_persona(Path::new("ok.md"), &src, &[first.clone(), second.clone()]);
    assert_eq!(rendered(&entry), Vec::<String>::new());
    let p = entry.persona.unwrap();
    let names: Vec<&str> = p.role_prompts.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["Only", "Shared", "Last"]);
    assert_eq!(p.role_prompts[0].path, second.join("Only.md"));
    assert_eq!(p.role_prompts[1].path, first.join("Shared.md"));
    assert_eq!(
        p.role_prompt_text(),
        "only in second\nline two\n\nshared from first\n\nlast"
    );
}

/// A role prompt listed twice is loaded once, with a warning; a name with a
/// `.md` suffix still works, with a warning.
#[test]
fn role_prompt_duplicates_and_md_suffix_warn() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "Person.md", "p");
    let src = format!("{MINIMAL}\n# Role Prompt\n\nPerson\nPerson.md\n");
    let entry = parse_persona(Path::new("w.md"), &src, &[tmp.path().to_path_buf()]);
    assert_eq!(
        rendered(&entry),
        [
            "w.md:16: warning: role prompt `Person.md`: write the name without `.md`",
            "w.md:16: warning: role prompt `Person` is already listed at line 15; ignoring this line",
        ]
    );
    assert_eq!(entry.persona.unwrap().role_prompts.len(), 1);
}

/// Role prompt names cannot walk out of the prompt directories.
#[test]
fn role_prompt_names_cannot_escape_prompt_dirs() {
    let tmp = tempfile::tempdir().unwrap();
    let prompts = tmp.path().join("prompts");
    fs::create_dir(&prompts).unwrap();
    write(tmp.path(), "secret.md", "do not read");
    let src = format!("{MINIMAL}\n# Role Prompt\n\n../secret\nsub/x\na\\b\n..\n");
    let entry = parse_persona(Path::new("bad.md"), &src, &[prompts]);
    let rule = "it must not be empty or contain `/`, `\\`, `..`, NUL or control characters";
    assert_eq!(
        rendered(&entry),
        [
            format!("bad.md:15: error: invalid role prompt name `../secret`: {rule}"),
            format!("bad.md:16: error: invalid role prompt name `sub/x`: {rule}"),
            format!("bad.md:17: error: invalid role prompt name `a\\b`: {rule}"),
            format!("bad.md:18: error: invalid role prompt name `..`: {rule}"),
        ]
    );
}

/// Role prompt files get the same checks as persona files: invalid UTF-8 is
/// reported on the persona line that names the prompt.
#[test]
fn role_prompt_invalid_utf8_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("Broken.md"), b"ok\n\xc3\x28\n").unwrap();
    let src = format!("{MINIMAL}\n# Role Prompt\n\nBroken\n");
    let entry = parse_persona(Path::new("bad.md"), &src, &[tmp.path().to_path_buf()]);
    assert_eq!(
        rendered(&entry),
        [format!(
            "bad.md:15: error: role prompt file `{}` is not valid UTF-8 (first invalid byte on line 2, byte offset 3)",
            tmp.path().join("Broken.md").display()
        )]
    );
}

/// A sticker line without `::`, or with an empty side, is an error on its
/// own line; the other lines are still checked.
#[test]
fn malformed_sticker_lines() {
    let src = format!(
        "{MINIMAL}\n# Agent Stickers\n\nUtyaDuck :: Hi\nUtyaDuck Hi\n :: Hi\nUtyaDuck ::\nBad-Set :: Hi\n"
    );
    let entry = parse(&src);
    assert_eq!(
        rendered(&entry),
        [
            "bad.md:16: error: malformed sticker line `UtyaDuck Hi`: expected `SET :: NAME`",
            "bad.md:17: error: malformed sticker line `:: Hi`: expected `SET :: NAME`",
            "bad.md:18: error: malformed sticker line `UtyaDuck ::`: expected `SET :: NAME`",
            "bad.md:19: error: invalid sticker set name `Bad-Set`: a set's short name (the part after `t.me/addstickers/`) has only letters, digits and `_`",
        ]
    );
    assert!(entry.persona.is_none());
}

/// The legacy singular `# Agent Sticker Set` heading still works: its set is
/// appended to the plural list, with a warning pointing to the new heading.
#[test]
fn legacy_sticker_set_heading_is_accepted_with_warning() {
    let src =
        format!("{MINIMAL}\n# Agent Sticker Sets\n\nOne\n\n# Agent Sticker Set\n\nTwo\nOne\n");
    let entry = parse(&src);
    assert_eq!(
        rendered(&entry),
        [
            "bad.md:17: warning: `# Agent Sticker Set` is the old spelling; use `# Agent Sticker Sets` (one set per line)",
            "bad.md:20: warning: sticker set `One` is listed more than once",
        ]
    );
    assert_eq!(entry.persona.unwrap().sticker_sets, ["One", "Two"]);
}

/// Two files declaring the same agent name (ignoring case): the later one by
/// file name is unusable, with an error on its name line naming the other
/// file; the earlier one is unaffected.
#[test]
fn duplicate_agent_name_across_files() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "a.md", MINIMAL);
    let b = write(tmp.path(), "b.md", MINIMAL);
    let c = write(tmp.path(), "c.md", &MINIMAL.replace("\nAda\n", "\nADA\n"));
    let report = load(tmp.path(), &[]);
    let all: Vec<String> = report.problems().map(ToString::to_string).collect();
    assert_eq!(
        all,
        [
            format!(
                "{}:3: error: agent name `Ada` is already used by `a.md`; this file is ignored",
                b.display()
            ),
            format!(
                "{}:3: error: agent name `ADA` is already used by `a.md`; this file is ignored (names are compared ignoring case; there it is `Ada`)",
                c.display()
            ),
        ]
    );
    assert!(report.entries[0].is_usable());
    assert!(!report.entries[1].is_usable());
    assert_eq!(report.usable().count(), 1);
    assert!(report.has_unusable());
    assert_eq!(report.error_count(), 2);
}

/// The same heading twice in one file is an error on the second occurrence,
/// naming the line of the first; the first value is the one used.
#[test]
fn duplicate_heading_in_one_file() {
    let src = format!("{MINIMAL}\n# agent name\n\nEve\n");
    let entry = parse(&src);
    assert_eq!(
        rendered(&entry),
        ["bad.md:13: error: duplicate `# agent name` heading (first at line 1)"]
    );
    assert_eq!(entry.name.as_deref(), Some("Ada"));
    assert!(entry.persona.is_none());
}

/// An unknown IANA time zone is an error on the value line.
#[test]
fn invalid_timezone() {
    let entry = parse(&format!(
        "{MINIMAL}\n# Agent Timezone\n\nMars/Olympus_Mons\n"
    ));
    assert_eq!(
        rendered(&entry),
        [
            "bad.md:15: error: unknown time zone `Mars/Olympus_Mons`: expected an IANA name such as `Europe/Berlin`"
        ]
    );
    let two_lines = parse(&format!(
        "{MINIMAL}\n# Agent Timezone\n\nUTC\nEurope/Paris\n"
    ));
    assert_eq!(
        rendered(&two_lines),
        ["bad.md:16: error: `# Agent Timezone` must be a single line"]
    );
}

/// Typing speed must be a finite number above 0; the start delay a finite
/// number from 0 to a day. Text, zero, negatives, `inf` and `NaN` are errors.
#[test]
fn bad_typing_numbers() {
    let speed = "expected a number of characters per second greater than 0, such as `5.0`";
    for bad in ["fast", "0", "-1", "inf", "NaN", "5 cps"] {
        let entry = parse(&format!("{MINIMAL}\n# Typing Speed\n\n{bad}\n"));
        assert_eq!(
            rendered(&entry),
            [format!(
                "bad.md:15: error: invalid `# Typing Speed` value `{bad}`: {speed}"
            )],
        );
        assert!(entry.persona.is_none());
    }
    let entry = parse(&format!("{MINIMAL}\n# Start Typing Delay\n\n-0.5\n"));
    assert_eq!(
        rendered(&entry),
        [
            "bad.md:15: error: invalid `# Start Typing Delay` value `-0.5`: expected a number of seconds from 0 to 86400 (a day), such as `2.5`"
        ]
    );
    // More than a saved plan's longest wait.
    let entry = parse(&format!("{MINIMAL}\n# Start Typing Delay\n\n86401\n"));
    assert!(entry.persona.is_none());
    let ok = parse(&format!(
        "{MINIMAL}\n# Start Typing Delay\n\n0\n\n# Typing Speed\n\n1e3\n"
    ));
    let p = ok.persona.unwrap();
    assert_eq!(p.start_typing_delay, Some(0.0));
    assert_eq!(p.typing_speed, Some(1000.0));
}

/// `# LLM Model` takes exactly one line.
#[test]
fn llm_model_must_be_one_line() {
    let entry = parse(&format!("{MINIMAL}\n# LLM Model\n\nmodel-a\nmodel-b\n"));
    assert_eq!(
        rendered(&entry),
        ["bad.md:16: error: `# LLM Model` must be a single line"]
    );
}

/// Agent names that cannot serve as identifiers are errors on the name line.
#[test]
fn unusable_agent_names() {
    let long = "x".repeat(65);
    let cases = [
        ("media", "`media` is reserved"),
        ("Media", "`media` is reserved"),
        ("a/b", "it must not contain `/` or `\\`"),
        ("a\\b", "it must not contain `/` or `\\`"),
        ("..", "it must not be `.` or `..`"),
        (long.as_str(), "it is longer than 64 characters"),
        (
            "Tab\there",
            "it must not contain NUL or other control characters",
        ),
    ];
    for (name, reason) in cases {
        let entry = parse(&MINIMAL.replace("\nAda\n", &format!("\n{name}\n")));
        let shown = name.replace('\t', "\\t");
        assert_eq!(
            rendered(&entry),
            [format!(
                "bad.md:3: error: agent name `{shown}` is not usable: {reason}"
            )],
            "name {name:?}"
        );
        assert!(entry.name.is_none() && entry.persona.is_none());
    }
    let two_lines = parse(&MINIMAL.replace("\nAda\n", "\nAda\nLovelace\n"));
    assert_eq!(
        rendered(&two_lines),
        ["bad.md:3: error: agent name `Ada\\nLovelace` is not usable: it must be a single line"]
    );
    let max = "y".repeat(64);
    assert!(parse(&MINIMAL.replace("\nAda\n", &format!("\n{max}\n"))).is_usable());
}

/// A file over 256 KiB is refused from its size alone; a file of exactly
/// 256 KiB is read normally.
#[test]
fn file_over_256_kib_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let limit = usize::try_from(MAX_FILE_BYTES).unwrap();
    assert_eq!(limit, 262_144);
    let mut exact = MINIMAL.to_owned();
    exact.push_str(&" ".repeat(limit - exact.len()));
    write(tmp.path(), "a_exact.md", &exact);
    let mut over = MINIMAL.replace("Ada", "Bob");
    over.push_str(&" ".repeat(limit + 1 - over.len()));
    let big = write(tmp.path(), "b_big.md", &over);
    let report = load(tmp.path(), &[]);
    assert!(report.entries[0].is_usable());
    assert_eq!(
        rendered(&report.entries[1]),
        [format!(
            "{}: error: file is 262145 bytes, over the 262144-byte (256 KiB) limit",
            big.display()
        )]
    );
    assert!(report.entries[1].name.is_none());
}

/// Invalid UTF-8 makes the file unusable, with the line of the first invalid
/// byte.
#[test]
fn invalid_utf8_reports_its_line() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("bad.md");
    fs::write(&path, b"# Agent Name\n\nAda\r\n\xff\xfe\n").unwrap();
    let report = load(tmp.path(), &[]);
    assert_eq!(
        rendered(&report.entries[0]),
        [format!(
            "{}:4: error: file is not valid UTF-8 (first invalid byte at byte offset 19)",
            path.display()
        )]
    );
    assert!(!report.entries[0].is_usable());
}

/// An unknown heading is kept in `extra` (heading as written) with a
/// warning; warnings do not make the agent unusable.
#[test]
fn unknown_heading_is_kept_with_warning() {
    let src = format!("{MINIMAL}\n# Favourite Colour\n\nGreen, *mostly*.\n\n- teal\n");
    let entry = parse(&src);
    assert_eq!(
        rendered(&entry),
        [
            "bad.md:13: warning: unknown heading `# Favourite Colour`: kept, but not used by this version"
        ]
    );
    let p = entry.persona.expect("warnings keep the agent usable");
    assert_eq!(
        p.extra.get("Favourite Colour").map(String::as_str),
        Some("Green, *mostly*.\n\n- teal")
    );
}

/// The presence headings are read: the schedule's prose as written, the fresh-start flags
/// (whose body may be free prose, as in the original's files), `Start Of Conversation`.
#[test]
fn presence_headings_are_read_without_warnings() {
    use personad::core::persona::FreshStart;
    let src = format!(
        "{MINIMAL}\n# Daily Schedule\n\nUp at *seven*.\n\n- school\n\n# Reset Context On First Message\n\nForget everything each time.\n\n# Start Of Conversation\n\nSay hello like a stranger.\n"
    );
    let entry = parse(&src);
    assert!(rendered(&entry).is_empty(), "{:?}", rendered(&entry));
    let p = entry.persona.expect("usable");
    assert_eq!(
        p.daily_schedule.as_deref(),
        Some("Up at *seven*.\n\n- school")
    );
    assert_eq!(p.fresh_start, FreshStart::ResetContext);
    assert_eq!(
        p.start_of_conversation.as_deref(),
        Some("Say hello like a stranger.")
    );
    assert!(p.extra.is_empty());
    let off = parse(&format!(
        "{MINIMAL}\n# Clear Summaries On First Message\nno\n"
    ));
    assert_eq!(off.persona.map(|p| p.fresh_start), Some(FreshStart::Keep));
    let summaries = parse(&format!("{MINIMAL}\n# Clear Summaries On First Message\n"));
    assert_eq!(
        summaries.persona.map(|p| p.fresh_start),
        Some(FreshStart::ClearSummaries)
    );
}

/// Non-blank text before the first heading is a warning on its first line.
#[test]
fn text_before_first_heading_warns() {
    let entry = parse(&format!("\n\nNotes to self\n\n{MINIMAL}"));
    assert_eq!(
        rendered(&entry),
        ["bad.md:3: warning: text before the first `#` heading is ignored"]
    );
    assert!(entry.is_usable());
}

/// An empty `# Disabled` heading (as the original project writes it)
/// disables the agent; `false`/`no`/`0` keep it enabled; other text disables
/// it with a warning.
#[test]
fn disabled_heading() {
    let empty = parse(&format!("{MINIMAL}\n# Disabled\n"));
    assert_eq!(rendered(&empty), Vec::<String>::new());
    assert!(empty.persona.unwrap().disabled);
    for value in ["true", "Yes", "1"] {
        let e = parse(&format!("{MINIMAL}\n# Disabled\n\n{value}\n"));
        assert!(e.persona.unwrap().disabled, "{value}");
    }
    for value in ["false", "NO", "0"] {
        let e = parse(&format!("{MINIMAL}\n# Disabled\n\n{value}\n"));
        assert!(!e.persona.unwrap().disabled, "{value}");
    }
    let odd = parse(&format!("{MINIMAL}\n# Disabled\n\nfor now\n"));
    assert_eq!(
        rendered(&odd),
        [
            "bad.md:15: warning: `# Disabled` value `for now` is not one of `true`, `yes`, `1`, `false`, `no`, `0` (or empty); the agent is disabled"
        ]
    );
    assert!(odd.persona.unwrap().disabled);

    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "on.md", MINIMAL);
    write(
        tmp.path(),
        "off.md",
        &format!("{}\n# Disabled\n", MINIMAL.replace("Ada", "Off")),
    );
    let report = load(tmp.path(), &[]);
    assert_eq!(report.usable().count(), 2);
    let active: Vec<&str> = report.active().map(|p| p.name.as_str()).collect();
    assert_eq!(active, ["Ada"]);
}

/// All problems of a file are collected, not just the first, ordered by line
/// with line-less ones first.
#[test]
fn all_problems_of_a_file_are_collected() {
    let src = "\
# Agent Name

media

# Agent Timezone

Nowhere/Special

# Typing Speed

zero

# Agent Stickers

broken
";
    let entry = parse(src);
    assert_eq!(
        rendered(&entry),
        [
            "bad.md: error: missing required `# Agent Phone` heading",
            "bad.md: error: missing required `# Agent Instructions` heading",
            "bad.md:3: error: agent name `media` is not usable: `media` is reserved",
            "bad.md:7: error: unknown time zone `Nowhere/Special`: expected an IANA name such as `Europe/Berlin`",
            "bad.md:11: error: invalid `# Typing Speed` value `zero`: expected a number of characters per second greater than 0, such as `5.0`",
            "bad.md:15: error: malformed sticker line `broken`: expected `SET :: NAME`",
        ]
    );
    assert_eq!(entry.error_count(), 6);
}

/// CRLF line endings and a byte-order mark are accepted; values come out
/// with `\n` and line numbers are unchanged.
#[test]
fn crlf_and_bom_are_accepted() {
    let src = format!(
        "\u{feff}{}# Typing Speed\r\n\r\nslow\r\n",
        MINIMAL
            .replace("Be kind.", "Line one.\nLine two.")
            .replace('\n', "\r\n")
    );
    let entry = parse(&src);
    assert_eq!(
        rendered(&entry),
        [
            "bad.md:15: error: invalid `# Typing Speed` value `slow`: expected a number of characters per second greater than 0, such as `5.0`"
        ]
    );
    let fixed = parse(&src.replace("slow", "4"));
    assert_eq!(fixed.persona.unwrap().instructions, "Line one.\nLine two.");
}

/// Phone numbers are masked wherever this module prints them: the masking
/// helper, and `Debug` of a persona.
#[test]
fn phone_numbers_are_masked() {
    assert_eq!(mask_phone("+12345678901"), "+1234*****01");
    assert_eq!(mask_phone("+1 (555) 010-0001"), "+1555*****01");
    assert_eq!(mask_phone("1234567"), "1234*67");
    assert_eq!(mask_phone("+123456"), "+******");
    let p = parse(MINIMAL).persona.unwrap();
    let debug = format!("{p:?}");
    assert!(!debug.contains("15550100001"), "{debug}");
    assert!(debug.contains("+1555*****01"), "{debug}");
    let odd = parse(&MINIMAL.replace("+15550100001", "call me"));
    assert_eq!(
        rendered(&odd),
        [
            "bad.md:7: warning: `# Agent Phone` does not look like an international phone number (`+` and 7 to 15 digits, e.g. `+1 555 010 0001`)"
        ]
    );
}

/// A phone number in file text that a problem quotes (a heading written with the number on
/// its line, a role prompt named after it) is masked too, so it never reaches the logs in
/// full (found by the `persona` fuzz target).
#[test]
fn a_phone_quoted_by_a_problem_is_masked() {
    let src = MINIMAL
        .replace(
            "# Agent Phone\n\n+15550100001",
            "# Agent Phone +1 555 010-0001",
        )
        .replace("Be kind.", "Be kind.\n\n# Role Prompt\n\nCall +15550100001");
    let entry = parse(&src);
    let all = rendered(&entry).join("\n");
    assert!(
        !all.contains("0100001") && !all.contains("010-0001"),
        "{all}"
    );
    assert!(
        all.contains("unknown heading `# Agent Phone +1555*****01`"),
        "{all}"
    );
    assert!(
        all.contains("role prompt `Call +1555*****01` not found"),
        "{all}"
    );
    assert_eq!(
        redact_phones("line 12: 300 bytes, +44 20 7946 0958 or 5550100"),
        "line 12: 300 bytes, +4420******58 or 5550*00"
    );
}

/// Only `*.md` files directly in the agents directory are read, in file
/// name order; dot-files, other extensions and sub-directories are ignored
/// (a directory *named* `*.md` is reported: see
/// `non_regular_md_entries_are_reported_without_blocking`).
#[test]
fn load_dir_reads_only_md_files_sorted() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "b.md", &MINIMAL.replace("Ada", "Bea"));
    write(tmp.path(), "a.md", MINIMAL);
    write(tmp.path(), ".hidden.md", "garbage");
    write(tmp.path(), "notes.txt", "garbage");
    write(tmp.path(), "README.markdown", "garbage");
    fs::create_dir(tmp.path().join("media")).unwrap();
    write(&tmp.path().join("media"), "c.md", "garbage");
    let report = load(tmp.path(), &[]);
    let names: Vec<&str> = report.usable().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["Ada", "Bea"]);
    assert_eq!(report.entries.len(), 2);
    assert_eq!(report.error_count() + report.warning_count(), 0);
    assert!(!report.has_unusable());
    let owned = report.into_usable();
    assert_eq!(owned[1].source, tmp.path().join("b.md"));
}

/// A missing agents directory, or a file given instead of a directory, is a
/// `PersonaDirError` naming the path.
#[test]
fn load_dir_errors_name_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope");
    let err = load_dir(&missing, &[]).unwrap_err();
    assert!(matches!(err, PersonaDirError::Missing { .. }));
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "agents directory `{}` does not exist: ",
            missing.display()
        )),
        "{msg}"
    );
    let file = write(tmp.path(), "file.md", MINIMAL);
    let err = load_dir(&file, &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("agents directory `{}` is not a directory", file.display())
    );
}

/// Problems render as `file:line: severity: message`, or without the line.
#[test]
fn problem_display_format() {
    let entry = parse("# Agent Name\nAda\n# Weird\n");
    assert_eq!(entry.problems[0].severity, Severity::Error);
    assert_eq!(entry.problems[0].line, None);
    assert_eq!(
        entry.problems[0].to_string(),
        "bad.md: error: missing required `# Agent Phone` heading"
    );
    let warning = entry
        .problems
        .iter()
        .find(|p| p.severity == Severity::Warning)
        .unwrap();
    assert_eq!(
        warning.to_string(),
        "bad.md:3: warning: unknown heading `# Weird`: kept, but not used by this version"
    );
}

/// Every placeholder spelling expands to the agent or user name, double-brace
/// forms without leaving stray braces.
#[test]
fn placeholders_expand() {
    let text =
        "{{AGENT_NAME}} {AGENT_NAME} {{char}} {char} {{character}} {character} / {{user}} {user}";
    assert_eq!(
        apply_placeholders(text, "Ada", "Bob"),
        "Ada Ada Ada Ada Ada Ada / Bob Bob"
    );
    assert_eq!(apply_placeholders("{{{char}}}", "Ada", "Bob"), "{Ada}");
    assert_eq!(
        apply_placeholders("{Boo} {{USER}} {random} {", "Ada", "Bob"),
        "{Boo} {{USER}} {random} {"
    );
    assert_eq!(
        apply_placeholders("héllo {char}ü", "Ädä", "x"),
        "héllo Ädäü"
    );
}

/// Substitution is a single pass: text inserted for a placeholder is never
/// scanned again.
#[test]
fn placeholders_are_not_recursive() {
    assert_eq!(
        apply_placeholders("Hi {user}, I am {{char}}.", "{{user}}", "{char}"),
        "Hi {char}, I am {{user}}."
    );
}

// ---------------------------------------------------------------------------
// Compatibility with the persona files of the original Python project
// ---------------------------------------------------------------------------

/// Where the original project's files live, if present on this machine.
fn original_data() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/cw-telegram-agent");
    if dir.is_dir() {
        Some(dir)
    } else {
        // Straight to the stderr stream, not `eprintln!`: the test harness would swallow
        // that, and a skip must be seen. PERSONAD_REQUIRE_SHARED_DATA=1 makes it a failure.
        let msg = format!("SKIPPED compatibility test: {} is absent", dir.display());
        assert!(
            std::env::var_os("PERSONAD_REQUIRE_SHARED_DATA").is_none(),
            "{msg}"
        );
        let _ = writeln!(std::io::stderr(), "\n*** {msg} ***");
        None
    }
}

fn assert_no_errors(report: &LoadReport) {
    let errors: Vec<String> = report
        .problems()
        .filter(|p| p.is_error())
        .map(ToString::to_string)
        .collect();
    assert_eq!(errors, Vec::<String>::new());
    assert!(!report.has_unusable());
}

/// The personas of the original project at commit 27bdb37 all load without
/// errors, with their Markdown sub-headings kept.
#[test]
fn compat_original_v27bdb37() {
    let Some(data) = original_data() else { return };
    let base = data.join("v27bdb37");
    let report = load(&base.join("agents"), &[base.join("prompts")]);
    assert_no_errors(&report);
    let names: Vec<&str> = report.usable().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "DungeonMaster",
            "Heidi",
            "Jackie",
            "Kalea",
            "Katy",
            "Mary",
            "Olivia"
        ]
    );
    let heidi = report.usable().find(|p| p.name == "Heidi").unwrap();
    assert_eq!(heidi.sticker_sets, ["UtyaDuck"]);
    assert_eq!(heidi.role_prompts.len(), 1);
    assert_eq!(heidi.role_prompts[0].name, "Chatbot");
    assert!(!heidi.disabled);
    assert!(heidi.masked_phone().contains('*'));
    let katy = report.usable().find(|p| p.name == "Katy").unwrap();
    assert!(katy.instructions.contains("\n## Personality\n"));
    assert!(katy.instructions.contains("\n### Samantha\n"));
    let dm = report.usable().find(|p| p.name == "DungeonMaster").unwrap();
    assert_eq!(dm.role_prompts[0].name, "Adventure");
    assert!(dm.instructions.contains("## First Message"));
}

/// The personas of the original project at its newest stored commit load
/// without errors using both of its prompt directories; the fields the original
/// added later (`Daily Schedule`, `Reset Context On First Message`) are read,
/// with no "unknown heading" warning.
#[test]
fn compat_original_head() {
    let Some(data) = original_data() else { return };
    let base = data.join("head");
    let report = load(
        &base.join("agents"),
        &[base.join("prompts"), base.join("configprompts")],
    );
    assert_no_errors(&report);
    let names: Vec<&str> = report.usable().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["DungeonMaster", "Heidi", "Mary"]);
    let heidi = report.usable().find(|p| p.name == "Heidi").unwrap();
    assert_eq!(heidi.timezone_name.as_deref(), Some("America/Los_Angeles"));
    assert_eq!(
        heidi.timezone.as_ref().and_then(|tz| tz.iana_name()),
        Some("America/Los_Angeles")
    );
    let prompt_names: Vec<&str> = heidi.role_prompts.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        prompt_names,
        [
            "Task-Memory",
            "Task-Retrieve",
            "Task-XSend",
            "Task-Photo",
            "Task-Plan",
            "Person",
            "Chatbot"
        ]
    );
    assert!(
        heidi.role_prompts[0]
            .path
            .ends_with("configprompts/Task-Memory.md")
    );
    assert!(heidi.role_prompts[5].path.ends_with("prompts/Person.md"));
    assert_eq!(heidi.typing_speed, Some(5.0));
    assert_eq!(heidi.start_typing_delay, Some(8.0));
    assert!(heidi.disabled);
    assert!(
        heidi
            .daily_schedule
            .as_deref()
            .is_some_and(|s| s.contains("When I'm asleep, I'm completely unavailable"))
    );
    assert!(heidi.extra.is_empty(), "{:?}", heidi.extra.keys());
    let mary = report.usable().find(|p| p.name == "Mary").unwrap();
    assert_eq!(mary.typing_speed, Some(1000.0));
    assert!(mary.disabled);
    assert_eq!(
        mary.fresh_start,
        personad::core::persona::FreshStart::ResetContext
    );
    assert!(mary.extra.is_empty(), "{:?}", mary.extra.keys());
    let dm = report.usable().find(|p| p.name == "DungeonMaster").unwrap();
    assert_eq!(
        dm.fresh_start,
        personad::core::persona::FreshStart::ResetContext
    );
    let unknown: Vec<String> = report
        .problems()
        .map(ToString::to_string)
        .filter(|p| p.contains("unknown heading"))
        .collect();
    assert!(unknown.is_empty(), "{unknown:?}");
    assert_eq!(report.active().count(), 0, "all three are disabled");
}

/// The sample personas and role prompts shipped with the project load
/// without any problem (skipped when the folders are absent).
#[test]
fn shipped_samples_load_cleanly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (agents, prompts) = (root.join("agents"), root.join("prompts"));
    if !agents.is_dir() || !prompts.is_dir() {
        eprintln!("note: no sample agents/prompts folders; skipping");
        return;
    }
    let report = load(&agents, &[prompts]);
    let all: Vec<String> = report.problems().map(ToString::to_string).collect();
    assert_eq!(all, Vec::<String>::new());
    assert!(!report.entries.is_empty() && !report.has_unusable());
    for p in report.usable() {
        assert!(
            p.phone.starts_with("+1555010000"),
            "samples use fictional numbers"
        );
        assert!(!p.role_prompt_text().is_empty());
    }
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

/// Runs `f` on a thread and fails the test (instead of hanging the suite) if it
/// has not returned within 30 s: a reader blocked on a FIFO must fail here.
fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(30))
        .expect("loading hung (blocked on a FIFO or reading a device?)")
}

/// A FIFO, a device (through a link), a directory and a 1 GiB sparse file,
/// each named `*.md` in the agents directory, are each reported as an
/// unusable entry naming the file and saying what it is, without blocking or
/// reading the big file; a symlink to a good persona is followed and loads,
/// as does the plain good persona next to them.
#[test]
fn non_regular_md_entries_are_reported_without_blocking() {
    let tmp = tempfile::tempdir().unwrap();
    let agents = tmp.path().join("agents");
    fs::create_dir(&agents).unwrap();
    write(&agents, "a_good.md", MINIMAL);
    let elsewhere = write(tmp.path(), "bea.md", &MINIMAL.replace("Ada", "Bea"));
    std::os::unix::fs::symlink(&elsewhere, agents.join("b_link.md")).unwrap();
    mkfifo(&agents.join("x.md"));
    std::os::unix::fs::symlink("/dev/zero", agents.join("y.md")).unwrap();
    fs::create_dir(agents.join("z.md")).unwrap();
    fs::File::create(agents.join("zz.md"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let dir = agents.clone();
    let report = bounded(move || load(&dir, &[]));
    let names: Vec<&str> = report.usable().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["Ada", "Bea"]);
    let problems: Vec<String> = report.entries[2..].iter().flat_map(rendered).collect();
    let file = |n: &str| agents.join(n).display().to_string();
    assert_eq!(
        problems,
        [
            format!(
                "{}: error: cannot read file: is a FIFO, not a regular file",
                file("x.md")
            ),
            format!(
                "{}: error: cannot read file: is a device, not a regular file",
                file("y.md")
            ),
            format!(
                "{}: error: cannot read file: is a directory, not a regular file",
                file("z.md")
            ),
            format!(
                "{}: error: file is 1073741824 bytes, over the 262144-byte (256 KiB) limit",
                file("zz.md")
            ),
        ]
    );
}

/// A role prompt that is a FIFO is an error on the persona line naming it, not
/// a hang; the persona is unusable, and another persona still loads.
#[test]
fn a_fifo_role_prompt_is_reported_without_blocking() {
    let tmp = tempfile::tempdir().unwrap();
    let agents = tmp.path().join("agents");
    let prompts = tmp.path().join("prompts");
    fs::create_dir(&agents).unwrap();
    fs::create_dir(&prompts).unwrap();
    mkfifo(&prompts.join("Pipe.md"));
    write(&agents, "a.md", MINIMAL);
    write(
        &agents,
        "b.md",
        &format!("{}\n# Role Prompt\n\nPipe\n", MINIMAL.replace("Ada", "Bea")),
    );
    let (dir, search) = (agents.clone(), vec![prompts.clone()]);
    let report = bounded(move || load(&dir, &search));
    let names: Vec<&str> = report.usable().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["Ada"]);
    assert_eq!(
        rendered(&report.entries[1]),
        [format!(
            "{}:15: error: cannot read role prompt file `{}`: is a FIFO, not a regular file",
            agents.join("b.md").display(),
            prompts.join("Pipe.md").display()
        )]
    );
}

/// `# Admin Chat` names the one chat besides Saved Messages where drafts and command answers
/// go; without it there is none; a value that is not a chat id is an error on its line.
#[test]
fn an_admin_chat_heading_names_one_chat_id() {
    let named = parse(&format!("{MINIMAL}\n# Admin Chat\n\n-1001234567890\n"));
    assert_eq!(
        named.persona.as_ref().and_then(|p| p.admin_chat),
        Some(personad::core::model::ChatId(-1_001_234_567_890)),
        "{:?}",
        rendered(&named)
    );
    let none = parse(MINIMAL);
    assert_eq!(none.persona.and_then(|p| p.admin_chat), None);
    let bad = parse(&format!("{MINIMAL}\n# Admin Chat\n\nops group\n"));
    assert!(bad.persona.is_none());
    let problems = rendered(&bad);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("Admin Chat") && p.contains("is not a chat id")),
        "{problems:?}"
    );
}
