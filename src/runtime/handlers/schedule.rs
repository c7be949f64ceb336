//! `schedule`: writes one local day of the persona's schedule, in the agent's own chat (so no
//! reply waits for it). One planner call with the `Daily Schedule` prose and the days before;
//! the answer is checked (`core::presence`). A failed, refused or unusable answer gives the
//! deterministic fallback, which counts the attempt and says when the next may go out (at
//! most two per day). Never fails its graph: the day it hands back is always usable.

use jiff::civil::Date;

use crate::core::graph::{TaskKind, TaskSpec};
use crate::core::outcome::Outcome;
use crate::core::presence::{self, CALLS_PER_DAY, DaySchedule, Source};
use crate::core::time::BoxFuture;
use crate::ports::planner::ScheduleRequest;
use crate::runtime::handlers::{HandlerResult, TaskContext, TaskHandler};

pub(super) struct Schedule;

/// Earlier days shown to the model (so it varies them).
const DAYS_SHOWN: i64 = 3;

impl TaskHandler for Schedule {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            let TaskSpec::Schedule { date } = &ctx.task.spec else {
                return Err(ctx.spec_mismatch(TaskKind::Schedule));
            };
            let Ok(date) = date.parse::<Date>() else {
                return Err(crate::core::outcome::TaskError::Permanent(
                    crate::core::outcome::Cause::NotADate(date.clone()),
                ));
            };
            let (Some(schedule), Some(prose)) = (
                ctx.presence.as_ref().and_then(|p| p.schedule.clone()),
                ctx.persona.daily_schedule.as_deref(),
            ) else {
                super::refused(ctx, "the persona has no Daily Schedule");
                return Ok(Outcome::Done);
            };
            let now = ctx.clock.now();
            if schedule.known(date).is_some_and(|d| !d.may_regenerate(now)) {
                return Ok(Outcome::Done);
            }
            let recent: Vec<DaySchedule> = (1..=DAYS_SHOWN)
                .rev()
                .filter_map(|n| date.checked_sub(jiff::Span::new().days(n)).ok())
                .filter_map(|d| schedule.known(d).cloned())
                .collect();
            let zone = ctx
                .persona
                .timezone_name
                .clone()
                .or_else(|| schedule.tz.iana_name().map(str::to_string))
                .unwrap_or_else(|| "UTC".into());
            let answer = ctx
                .planner
                .schedule(ScheduleRequest {
                    persona: &ctx.persona,
                    prose,
                    date,
                    zone: &zone,
                    recent: &recent,
                    now,
                })
                .await;
            let agent = &ctx.key.agent;
            let day = match answer {
                Ok(Some(text)) => match DaySchedule::parse(&text, date) {
                    Ok(mut day) => {
                        day.source = Source::Generated;
                        tracing::info!(event = "schedule_written", agent = %agent, date = %date, activities = day.activities.len(), "schedule written");
                        day
                    }
                    Err(problems) => {
                        let first = problems
                            .first()
                            .map(ToString::to_string)
                            .unwrap_or_default();
                        tracing::warn!(event = "schedule_fallback", agent = %agent, date = %date, problems = problems.len(), first = %first, "the model's schedule does not check out: using the fallback");
                        presence::failed(&schedule, date, now)
                    }
                },
                Ok(None) => {
                    // No model to ask (an offline planner): the fallback, and no retry.
                    let mut day = presence::failed(&schedule, date, now);
                    day.source = Source::Fallback {
                        attempts: CALLS_PER_DAY,
                        retry_at: None,
                    };
                    day
                }
                Err(e) => {
                    tracing::warn!(event = "schedule_fallback", agent = %agent, date = %date, error = %e, "schedule call failed: using the fallback");
                    presence::failed(&schedule, date, now)
                }
            };
            Ok(Outcome::Day(Box::new(day)))
        })
    }
}
