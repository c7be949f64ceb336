//! Watches the persona and role-prompt directories (the `notify` crate) and turns bursts of
//! file events into one reload request after a quiet period (editors write a file in several
//! steps). Only changes to `*.md` files count: merely opening or reading one (as every reload
//! does) does not, or each reload would set off the next. Owns the watcher; its debounce
//! task is a task of the entry's lifecycle; the one reloader (`ops::reload`) does the reload.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::app::lifecycle::Lifecycle;
use crate::app::ops::OpError;
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

/// A running watcher; dropping it stops watching (its debounce task then ends).
pub(crate) struct DirWatcher {
    _watcher: RecommendedWatcher,
}

/// Watches `dirs` (those that exist) and sends on `reload` once per burst of changes to
/// Markdown files, `quiet` after the last one.
pub(crate) fn watch(
    life: &Lifecycle,
    dirs: &[PathBuf],
    quiet: Duration,
    reload: mpsc::UnboundedSender<()>,
) -> Result<DirWatcher, OpError> {
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(event) = res
            && is_change(&event.kind)
            && event.paths.iter().any(|p| is_markdown(p))
        {
            let _ = tx.send(());
        }
    })
    .map_err(|source| OpError::Watch {
        doing: "cannot watch files".into(),
        source,
    })?;
    for dir in dirs.iter().filter(|d| d.is_dir()) {
        watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(|source| OpError::Watch {
                doing: format!("cannot watch {}", dir.display()),
                source,
            })?;
    }
    let stop = life.stop_token();
    life.spawn(async move {
        stop.run_until_cancelled(async move {
            while rx.recv().await.is_some() {
                loop {
                    tokio::select! {
                        more = rx.recv() => if more.is_none() { return },
                        () = tokio::time::sleep(quiet) => break,
                    }
                }
                tracing::info!(
                    event = "files_changed",
                    "persona or role-prompt files changed"
                );
                if reload.send(()).is_err() {
                    return;
                }
            }
        })
        .await;
    });
    Ok(DirWatcher { _watcher: watcher })
}

fn is_markdown(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("md"))
}

/// Whether a file event is a change worth a reload. inotify also reports opens and reads
/// (`Access`), and the reload itself opens every persona file; only a close after writing
/// counts among those.
fn is_change(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode, EventKind};
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{
        AccessKind, AccessMode, CreateKind, DataChange, EventKind, ModifyKind, RemoveKind,
    };

    #[test]
    fn opening_or_reading_a_persona_is_not_a_change_but_writing_it_is() {
        for kind in [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Read),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Access(AccessKind::Any),
        ] {
            assert!(!is_change(&kind), "{kind:?}");
        }
        for kind in [
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            EventKind::Create(CreateKind::File),
            EventKind::Remove(RemoveKind::File),
        ] {
            assert!(is_change(&kind), "{kind:?}");
        }
    }
}
