//! The one source of time. Every deadline in the daemon (debounce windows, waits, retry
//! delays, task timeouts, typing pauses) is computed from [`Clock::now`] and awaited with
//! [`Clock::sleep_until`], so the whole runtime can run on virtual time in tests and in the
//! playground's fast mode. This module must not know about graphs or Telegram; the scheduler,
//! the handlers and the playground driver call it.
//!
//! [`VirtualClock`] is a small discrete-event clock: time moves only when nothing holds it.
//! Anyone doing work that must finish "at the current instant" (the scheduler while it
//! dispatches, a task in flight, an event not yet consumed) keeps a [`Hold`]; when the last
//! hold is released the clock jumps straight to the earliest pending sleeper and wakes it,
//! handing that sleeper a fresh hold so the clock cannot run ahead before it has reacted.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::oneshot;

pub use crate::core::time::{BoxFuture, add};

/// Time as the daemon sees it.
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> Timestamp;
    /// Resolves at (or after) `deadline`. The returned [`Hold`] keeps a virtual clock from
    /// moving on until the caller drops it; on the real clock it is inert.
    fn sleep_until(&self, deadline: Timestamp) -> BoxFuture<'static, Hold>;
    /// Keeps a virtual clock at the current instant until the hold is dropped.
    fn hold(&self) -> Hold;
    /// True when waits cost no real time (virtual clock in auto-advance mode).
    fn is_virtual(&self) -> bool {
        false
    }
}

/// Keeps a [`VirtualClock`] from advancing while alive. Inert for the real clock.
#[must_use = "a hold only works while it is kept"]
pub struct Hold(Option<Arc<VirtualInner>>);

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Hold"
        } else {
            "Hold(none)"
        })
    }
}

impl Hold {
    /// A hold that holds nothing.
    pub fn none() -> Hold {
        Hold(None)
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(inner) = self.0.take() {
            let mut st = inner.lock();
            st.holds = st.holds.saturating_sub(1);
            inner.maybe_advance(&mut st);
        }
    }
}

/// Wall-clock time and tokio timers.
#[derive(Debug, Default, Clone)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }

    fn sleep_until(&self, deadline: Timestamp) -> BoxFuture<'static, Hold> {
        let wait = deadline.duration_since(Timestamp::now());
        let wait = Duration::try_from(wait).unwrap_or(Duration::ZERO);
        Box::pin(async move {
            tokio::time::sleep(wait).await;
            Hold::none()
        })
    }

    fn hold(&self) -> Hold {
        Hold::none()
    }
}

/// Virtual time for tests and the playground's `--fast` mode.
#[derive(Clone)]
pub struct VirtualClock {
    inner: Arc<VirtualInner>,
}

struct VirtualInner {
    state: Mutex<VirtualState>,
}

struct VirtualState {
    now: Timestamp,
    holds: usize,
    auto_advance: bool,
    next_id: u64,
    sleepers: BTreeMap<(Timestamp, u64), oneshot::Sender<Hold>>,
}

impl VirtualInner {
    fn lock(&self) -> MutexGuard<'_, VirtualState> {
        // The state stays consistent across a panic in another thread (every update is a
        // single assignment), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// With nobody holding the clock, jump to the earliest sleeper and wake every sleeper
    /// due at that instant, each with a hold of its own.
    fn maybe_advance(self: &Arc<Self>, st: &mut VirtualState) {
        if !st.auto_advance || st.holds > 0 {
            return;
        }
        while let Some((&key, tx)) = st.sleepers.iter().next() {
            if tx.is_closed() {
                // A cancelled sleeper (a timeout that lost its race) must not move time.
                st.sleepers.remove(&key);
                continue;
            }
            if key.0 > st.now {
                st.now = key.0;
            }
            if self.wake_due(st) > 0 {
                return;
            }
        }
    }

    /// Wakes the sleepers due at the current instant; returns how many were still waiting.
    fn wake_due(self: &Arc<Self>, st: &mut VirtualState) -> usize {
        let due: Vec<(Timestamp, u64)> = st
            .sleepers
            .range(..=(st.now, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        let mut woke = 0;
        for key in due {
            if let Some(tx) = st.sleepers.remove(&key) {
                st.holds += 1;
                match tx.send(Hold(Some(Arc::clone(self)))) {
                    Ok(()) => woke += 1,
                    Err(mut hold) => {
                        // The sleeper was cancelled: take the hold back without re-entering
                        // the lock we already own.
                        hold.0 = None;
                        st.holds -= 1;
                    }
                }
            }
        }
        woke
    }
}

impl VirtualClock {
    /// A clock standing at `start`. With `auto_advance`, time jumps to the next deadline
    /// whenever nothing holds it; without, only [`VirtualClock::advance`] moves it.
    pub fn new(start: Timestamp, auto_advance: bool) -> VirtualClock {
        VirtualClock {
            inner: Arc::new(VirtualInner {
                state: Mutex::new(VirtualState {
                    now: start,
                    holds: 0,
                    auto_advance,
                    next_id: 0,
                    sleepers: BTreeMap::new(),
                }),
            }),
        }
    }

    /// Moves time forward by `d`, waking every sleeper that becomes due.
    pub fn advance(&self, d: Duration) {
        let mut st = self.inner.lock();
        st.now = add(st.now, d);
        self.inner.wake_due(&mut st);
    }

    /// Number of sleepers waiting for a future instant (for tests).
    pub fn sleepers(&self) -> usize {
        self.inner.lock().sleepers.len()
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Timestamp {
        self.inner.lock().now
    }

    fn sleep_until(&self, deadline: Timestamp) -> BoxFuture<'static, Hold> {
        let inner = Arc::clone(&self.inner);
        let (tx, rx) = oneshot::channel();
        {
            let mut st = inner.lock();
            if deadline <= st.now {
                st.holds += 1;
                let hold = Hold(Some(Arc::clone(&inner)));
                return Box::pin(async move { hold });
            }
            st.next_id += 1;
            let id = st.next_id;
            st.sleepers.insert((deadline, id), tx);
            inner.maybe_advance(&mut st);
        }
        Box::pin(async move {
            match rx.await {
                Ok(hold) => hold,
                // The clock was dropped: nothing will ever wake us.
                Err(_) => std::future::pending().await,
            }
        })
    }

    fn hold(&self) -> Hold {
        let mut st = self.inner.lock();
        st.holds += 1;
        Hold(Some(Arc::clone(&self.inner)))
    }

    fn is_virtual(&self) -> bool {
        self.inner.lock().auto_advance
    }
}

/// Sleeps for `d` on `clock`.
pub fn sleep(clock: &dyn Clock, d: Duration) -> BoxFuture<'static, Hold> {
    clock.sleep_until(add(clock.now(), d))
}

/// Sleeps for `d`, giving up `hold` only once the sleeper is registered, so a virtual clock
/// cannot jump past this deadline in between. Returns the hold handed over at wake-up.
pub async fn sleep_releasing(clock: &dyn Clock, d: Duration, hold: Option<Hold>) -> Hold {
    let wake = sleep(clock, d);
    drop(hold);
    wake.await
}

tokio::task_local! {
    /// The hold a running task keeps on the clock (see [`with_task_hold`]).
    static TASK_HOLD: std::cell::RefCell<Option<Hold>>;
}

/// Runs `f` as a task that holds the clock, so virtual time stands still while it works
/// (an HTTP call in flight, say); [`pause`] inside it lets time move while it waits.
pub async fn with_task_hold<F: Future>(hold: Hold, f: F) -> F::Output {
    TASK_HOLD
        .scope(std::cell::RefCell::new(Some(hold)), f)
        .await
}

/// Like [`with_task_hold`], for work spawned off a task (its own tokio task): returns the
/// hold the work ends with, so the spawner can take it over.
pub(crate) async fn with_task_hold_returned<F: Future>(
    hold: Hold,
    f: F,
) -> (F::Output, Option<Hold>) {
    TASK_HOLD
        .scope(std::cell::RefCell::new(Some(hold)), async move {
            let out = f.await;
            let hold = TASK_HOLD
                .try_with(|cell| cell.borrow_mut().take())
                .ok()
                .flatten();
            (out, hold)
        })
        .await
}

/// Gives up the current task's hold (see [`with_task_hold`]), for a task about to wait on
/// work spawned with holds of their own. Give it back with [`resume_task_hold`].
pub(crate) fn release_task_hold() -> Option<Hold> {
    TASK_HOLD
        .try_with(|cell| cell.borrow_mut().take())
        .ok()
        .flatten()
}

/// Makes `hold` the current task's hold again (dropped outside [`with_task_hold`]).
pub(crate) fn resume_task_hold(hold: Hold) {
    let _ = TASK_HOLD.try_with(move |cell| *cell.borrow_mut() = Some(hold));
}

/// Waits `d` from inside a task run by [`with_task_hold`]: the task's hold is given up for
/// the wait (after the sleeper is registered) and taken back at wake-up. Outside such a task
/// it is a plain sleep. Use this for delays a task chooses itself, such as retry backoff.
pub async fn pause(clock: &dyn Clock, d: Duration) {
    let wake = sleep(clock, d);
    let released = TASK_HOLD
        .try_with(|cell| cell.borrow_mut().take())
        .ok()
        .flatten();
    drop(released);
    let hold = wake.await;
    let _ = TASK_HOLD.try_with(move |cell| *cell.borrow_mut() = Some(hold));
}

/// Shared handle to whichever clock the process runs on.
pub type SharedClock = Arc<dyn Clock>;

#[cfg(test)]
mod tests {
    use super::*;

    fn t0() -> Timestamp {
        Timestamp::from_second(1_700_000_000).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    #[tokio::test]
    async fn auto_advance_jumps_to_the_earliest_sleeper_only_when_unheld() {
        let clock = VirtualClock::new(t0(), true);
        let held = clock.hold();
        let late = clock.sleep_until(add(t0(), Duration::from_secs(60)));
        let early = clock.sleep_until(add(t0(), Duration::from_secs(5)));
        assert_eq!(clock.now(), t0(), "time must not move while held");
        drop(held);
        let h = early.await;
        assert_eq!(clock.now(), add(t0(), Duration::from_secs(5)));
        // The woken sleeper's hold keeps the clock at 5 s.
        assert_eq!(clock.sleepers(), 1);
        drop(h);
        let _h = late.await;
        assert_eq!(clock.now(), add(t0(), Duration::from_secs(60)));
    }

    #[tokio::test]
    async fn cancelled_sleeper_does_not_stall_the_clock() {
        let clock = VirtualClock::new(t0(), true);
        let held = clock.hold();
        let gone = clock.sleep_until(add(t0(), Duration::from_secs(1)));
        drop(gone);
        let later = clock.sleep_until(add(t0(), Duration::from_secs(2)));
        drop(held);
        let _h = later.await;
        assert_eq!(clock.now(), add(t0(), Duration::from_secs(2)));
    }

    #[tokio::test]
    async fn a_cancelled_timeout_does_not_move_time() {
        let clock = VirtualClock::new(t0(), true);
        let held = clock.hold();
        drop(clock.sleep_until(add(t0(), Duration::from_secs(180))));
        drop(held);
        assert_eq!(clock.now(), t0());
    }

    #[tokio::test]
    async fn a_pause_inside_a_holding_task_lets_time_move() {
        let clock = VirtualClock::new(t0(), true);
        let shared: SharedClock = Arc::new(clock.clone());
        let hold = shared.hold();
        let c = Arc::clone(&shared);
        with_task_hold(hold, async move {
            pause(c.as_ref(), Duration::from_secs(7)).await;
        })
        .await;
        assert_eq!(clock.now(), add(t0(), Duration::from_secs(7)));
    }

    #[tokio::test]
    async fn manual_clock_moves_only_on_advance() {
        let clock = VirtualClock::new(t0(), false);
        let s = clock.sleep_until(add(t0(), Duration::from_secs(3)));
        clock.advance(Duration::from_secs(2));
        assert_eq!(clock.sleepers(), 1);
        clock.advance(Duration::from_secs(1));
        let _h = s.await;
        assert_eq!(clock.now(), add(t0(), Duration::from_secs(3)));
    }
}
