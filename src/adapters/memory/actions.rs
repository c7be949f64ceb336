//! The in-memory account's action log seen from outside: recording an action (kept in the
//! log, handed to the observer if it wants it) and who observes. Part of `memory`; the log
//! itself lives in its state.

use std::sync::PoisonError;

use tokio::sync::mpsc;

use super::{Action, MemoryTelegram, Recorded};

/// An observer's channel and the actions it wants.
pub(super) type Observer = (mpsc::UnboundedSender<Recorded>, fn(&Action) -> bool);

impl MemoryTelegram {
    /// Receives every recorded action as it happens.
    pub fn observe(&self) -> mpsc::UnboundedReceiver<Recorded> {
        self.observe_only(|_| true)
    }

    /// Like [`MemoryTelegram::observe`], for the actions `wanted` keeps only (the bench
    /// watches sends: a burst's inbound messages do not queue up in its channel).
    pub fn observe_only(&self, wanted: fn(&Action) -> bool) -> mpsc::UnboundedReceiver<Recorded> {
        let (tx, rx) = mpsc::unbounded_channel();
        *self.observer.lock().unwrap_or_else(PoisonError::into_inner) = Some((tx, wanted));
        rx
    }

    /// Stops sending actions to the observer (its channel closes).
    pub fn stop_observing(&self) {
        *self.observer.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    pub(super) fn record(&self, action: Action) {
        let rec = Recorded {
            at: self.clock.now(),
            action,
        };
        {
            let mut st = self.lock();
            if st.actions.len() >= st.actions_kept {
                st.actions.pop_front();
            }
            if st.actions_kept > 0 {
                st.actions.push_back(rec.clone());
            }
        }
        if let Some((tx, wanted)) = self
            .observer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            && wanted(&rec.action)
        {
            let _ = tx.send(rec);
        }
    }
}
