//! How `run` plans and pays: the LLM stack (every provider the environment or systemd's
//! credentials configure, behind the router, in the one retry policy, metered), each active
//! persona's route checked against it, and the planner that follows (the LLM planner, or the
//! offline echo planner on the in-memory or simulated Telegram when no provider is usable). Called by
//! `daemon` before the services are built.

use std::sync::Arc;

use crate::adapters::llm::provider::Router;
use crate::adapters::llm::retry::RetryConfig;
use crate::adapters::llm_planner::{LlmPlanner, LlmPlannerConfig};
use crate::app::cli::{PlannerChoice, RunArgs};
use crate::app::commands::CommandError;
use crate::app::ops::metrics;
use crate::app::services::MakePlanner;
use crate::core::config::{ConfigError, RuntimeConfig};
use crate::core::persona::LoadReport;
use crate::ports::clock::SharedClock;
use crate::ports::llm::Llm;
use crate::ports::planner::{EchoPlanner, SharedPlanner};

/// The planner `run` uses, and the LLM behind it when it plans with one (which then also
/// describes media and classifies group messages).
pub(crate) struct Planning {
    pub(crate) planner: MakePlanner,
    pub(crate) llm: Option<Arc<dyn Llm>>,
    /// The group classifier's model: `--classifier-model`, unless that is the built-in default
    /// and its provider has no credentials while the planner's default route works (a
    /// local-only setup): then the planner's route.
    pub(crate) classifier_model: String,
}

/// The LLM stack of `run`. The router is returned too, to check each persona's provider.
fn llm_stack(retry: RetryConfig, clock: SharedClock) -> (Arc<dyn Llm>, Arc<Router>) {
    let lookup = crate::app::credentials::llm_lookup();
    let (llm, router) = crate::adapters::llm_planner::llm_from_lookup(lookup, retry, clock);
    (metrics::MeteredLlm::wrap(llm), router)
}

/// Chooses the planner and checks every active persona's LLM route: with some usable, each
/// unusable persona is reported; with none, the one error says why (on the in-memory or
/// simulated Telegram the echo planner answers instead, unless `--planner llm`).
pub(crate) fn planning(
    args: &RunArgs,
    config: &RuntimeConfig,
    clock: &SharedClock,
    report: &LoadReport,
    offline: bool,
) -> Result<Planning, CommandError> {
    let llm_error = |reason: String| {
        CommandError::Config(ConfigError {
            name: "llm",
            reason,
        })
    };
    let default_llm = args
        .llm
        .default_choice()
        .map_err(|e| llm_error(e.to_string()))?;
    let retry = RetryConfig::within_task_timeout(config.task_timeout, args.llm.llm_attempts);
    let (llm, router) = llm_stack(retry, Arc::clone(clock));
    let planner_config = LlmPlannerConfig {
        default_llm,
        temperature: args.llm.temperature,
        max_output_tokens: args.llm.max_output_tokens,
        max_tasks: args.llm.max_tasks,
        history_size: config.history_limit,
        context_tokens: args.llm.context_tokens,
        json_plans: args.llm.plan_format == crate::app::cli::PlanFormat::Json,
        json_providers: router.json_plan_providers(),
    };
    let routes = LlmPlanner::new(Arc::clone(&llm), planner_config.clone());
    let classifier_model =
        router.classifier_route(&args.classifier_model, &planner_config.default_llm.route());
    let mut problems = Vec::new();
    let mut usable = 0usize;
    for persona in report.active() {
        let route = routes.route(persona);
        match router.check_route(&route) {
            Ok(()) => usable += 1,
            Err(why) => problems.push((persona.name.clone(), route, why)),
        }
    }
    if usable > 0 && args.planner != PlannerChoice::Echo {
        for (agent, route, why) in &problems {
            tracing::error!(event = "llm_not_configured", agent = %agent, llm = %route, "the persona's LLM is not configured: {why}");
        }
    }
    let first_problem = problems.into_iter().next().map(|(_, _, why)| why);
    let use_llm = match args.planner {
        PlannerChoice::Echo => !offline,
        PlannerChoice::Llm => true,
        PlannerChoice::Auto => usable > 0 || !offline,
    };
    if use_llm
        && usable == 0
        && let Some(why) = first_problem
    {
        return Err(llm_error(why.to_string()));
    }
    if !use_llm {
        tracing::info!(
            event = "echo_planner",
            "no LLM: the offline echo planner answers"
        );
        return Ok(Planning {
            planner: Box::new(|_| Arc::new(EchoPlanner) as SharedPlanner),
            llm: None,
            classifier_model,
        });
    }
    let planner_llm = Arc::clone(&llm);
    Ok(Planning {
        planner: Box::new(move |parts| {
            Arc::new(
                LlmPlanner::new(planner_llm, planner_config)
                    .with_window_records(Arc::clone(&parts.windows))
                    .with_usage(Arc::clone(&parts.usage)),
            ) as SharedPlanner
        }),
        llm: Some(llm),
        classifier_model,
    })
}
