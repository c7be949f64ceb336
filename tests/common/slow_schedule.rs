//! A planner for presence tests: its schedule call takes two and a half (virtual) minutes,
//! giving up the clock while it waits as a slow HTTP call would on real time, then writes the
//! day it was given; plans answer at once with one text and record when they ran.

use std::sync::Mutex;
use std::time::Duration;

use jiff::Timestamp;
use personad::core::plan::{Action, PlanError, PlanRequest};
use personad::core::time::BoxFuture;
use personad::ports::clock::SharedClock;
use personad::ports::planner::{Planner, ScheduleRequest};

pub(crate) struct SlowScheduler {
    pub(crate) clock: SharedClock,
    /// When each plan ran.
    pub(crate) plans: Mutex<Vec<Timestamp>>,
    /// When the schedule call wrote its day.
    pub(crate) schedule_done: Mutex<Option<Timestamp>>,
    answer: &'static str,
    day: &'static str,
}

impl SlowScheduler {
    pub(crate) fn new(clock: SharedClock, answer: &'static str, day: &'static str) -> Self {
        SlowScheduler {
            clock,
            plans: Mutex::default(),
            schedule_done: Mutex::default(),
            answer,
            day,
        }
    }
}

impl Planner for SlowScheduler {
    fn plan<'a>(&'a self, req: PlanRequest<'a>) -> BoxFuture<'a, Result<Vec<Action>, PlanError>> {
        if let Ok(mut p) = self.plans.lock() {
            p.push(req.now);
        }
        Box::pin(async { Ok(vec![super::send(self.answer)]) })
    }

    fn schedule<'a>(
        &'a self,
        _req: ScheduleRequest<'a>,
    ) -> BoxFuture<'a, Result<Option<String>, PlanError>> {
        Box::pin(async move {
            personad::ports::clock::pause(self.clock.as_ref(), Duration::from_secs(150)).await;
            if let Ok(mut d) = self.schedule_done.lock() {
                *d = Some(self.clock.now());
            }
            Ok(Some(self.day.to_string()))
        })
    }
}
