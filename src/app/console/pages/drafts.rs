//! The drafts page (`/drafts`): every draft waiting for the owner, with its conversation,
//! when it expires in the persona's time and what happens then, and Approve, Edit (a form
//! holding the draft's text) and Reject. It refreshes itself unless told not to.

use jiff::tz::TimeZone;

use super::chat::draft_box;
use super::{Frame, page};
use crate::app::ops::controls::DraftView;

/// The drafts page; `zone` gives a persona's time zone.
pub(crate) fn render(
    f: &Frame<'_>,
    list: &[DraftView],
    zone: &dyn Fn(&str) -> TimeZone,
    csrf: &str,
) -> String {
    let mut body = String::new();
    if list.is_empty() {
        body.push_str("<p id=\"no-drafts\">No draft waits.</p>");
    }
    for d in list {
        body.push_str(&draft_box(d, f.now, &zone(&d.agent), csrf, "/drafts", true));
    }
    page(f, &body)
}
