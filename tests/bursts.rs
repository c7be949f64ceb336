//! A burst bigger than one pass of the loop: the driver takes at most 1,024 queued events per
//! pass (so what a pass builds stays bounded), and the rest follow in the next passes, all of
//! them, in order, before the loop sleeps.

mod common;

use common::{Harness, TestResult, config, dm, reply_with};
use personad::core::model::ChatId;

#[tokio::test]
async fn a_burst_bigger_than_a_pass_is_applied_in_slices_then_the_loop_sleeps() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut h = Harness::start(dir.path(), reply_with("hi"), config(), &[dm(5)]);
    h.started().await;
    let before = h.handle.status();
    // Cheap events (nothing to cancel), pushed while the loop cannot run (one thread).
    for chat in 0..2_600 {
        h.handle
            .cancel_plan(common::AGENT, ChatId(1_000 + chat), "burst");
    }
    while h.handle.status().applied < before.applied + 2_600 {
        tokio::task::yield_now().await;
    }
    let after = h.handle.status();
    assert!(
        after.passes >= before.passes + 3,
        "2,600 events take three passes of at most 1,024: {} passes",
        after.passes - before.passes
    );
    // Nothing was left behind: a message after the burst is answered as usual.
    h.say(&dm(5), "bob", "hello").await;
    h.settle().await;
    assert_eq!(h.sends_to(ChatId(5)), ["hi"]);
    h.stop().await?;
    Ok(())
}
