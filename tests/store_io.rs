//! The store's system calls on the per-message path, counted with `io_stats` (process-wide,
//! so this binary holds one test and nothing else runs beside it): whole-file writes into a
//! known directory make no `mkdir`, and the plans of a chat after its first open no absent
//! memory file.

use std::sync::Arc;

use personad::adapters::store::facts::FileFacts;
use personad::adapters::store::{StateDir, io_stats, write_atomic};
use personad::core::facts::FactScope;
use personad::core::model::ChatId;
use personad::ports::clock::VirtualClock;
use personad::ports::facts::FactStore;

#[test]
fn the_per_message_path_makes_no_failing_mkdir_or_open_of_memory_files()
-> Result<(), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("Tess/telegram-memory");
    write_atomic(&dir.join("1.json"), b"{}")?;
    let before = io_stats::snapshot();
    for i in 0..20 {
        write_atomic(&dir.join(format!("{i}.json")), b"{}")?;
    }
    assert_eq!(
        io_stats::snapshot().since(&before).mkdir,
        0,
        "mkdir per write"
    );

    let clock = VirtualClock::new(jiff::Timestamp::UNIX_EPOCH, false);
    let facts =
        FileFacts::new(StateDir::new(tmp.path())).with_absent_cache(Arc::new(clock.clone()));
    let chat = ChatId(42);
    let plan = || -> Result<(), Box<dyn std::error::Error>> {
        facts.summaries("Tess", chat)?;
        for scope in [
            FactScope::Chat(chat),
            FactScope::Intentions,
            FactScope::Plans(chat),
            FactScope::Person(42),
        ] {
            facts.read("Tess", scope)?;
        }
        facts.persona_text("Tess")?;
        Ok(())
    };
    plan()?;
    let before = io_stats::snapshot();
    for _ in 0..100 {
        clock.advance(std::time::Duration::from_millis(100));
        plan()?;
    }
    let after = io_stats::snapshot().since(&before);
    assert_eq!(
        after.open_absent, 0,
        "absent memory files opened again: {after:?}"
    );
    assert_eq!(after.mkdir, 0, "{after:?}");
    Ok(())
}
