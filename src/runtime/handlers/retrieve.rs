//! `retrieve`: the persona looks something up. For each target of the task (at most
//! `retrieve::MAX_URLS`): a URL already retrieved in this chat's window is not fetched again
//! (logged); an `http`/`https` URL is fetched through the retrieve port (its guards, caps and
//! the daily cap are the port's); a `file:` resource is read from the persona's own state
//! (`file:schedule.json`: its schedule today and tomorrow; `file:media.json`: no album yet).
//! The documents kept go to the chat's file through the document store, crash-safely, and
//! the outcome names them, so the scheduler plans this chat again with them. Each refusal is
//! a WARN line (`retrieve_refused`) and goes back in the outcome for the operator's events.
//! A persona without `# Allow Retrieve` (as it is now, not when the plan was made) retrieves
//! nothing. Never touches the graph.

use std::sync::Arc;

use tracing::{info, warn};

use crate::core::graph::{TaskKind, TaskSpec};
use crate::core::outcome::{Cause, Outcome, TaskError};
use crate::core::retrieve::{self, Document, Documents, FileResource, MAX_URLS, Refused, Target};
use crate::core::time::BoxFuture;
use crate::ports::retrieve::{Retrieval, RetrieveRequest};
use crate::runtime::handlers::{HandlerResult, TaskContext, TaskHandler};

pub(super) struct Retrieve;

impl TaskHandler for Retrieve {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            let TaskSpec::Retrieve { urls } = &ctx.task.spec else {
                return Err(ctx.spec_mismatch(TaskKind::Retrieve));
            };
            let mut run = Run {
                ctx,
                added: Vec::new(),
                refused: Vec::new(),
            };
            if !ctx.persona.allow_retrieve {
                run.refuse(&Refused::NotAllowed.to_string());
                return Ok(run.outcome());
            }
            let Some(retrieval) = ctx.retrieval.clone() else {
                run.refuse("this process has no retriever");
                return Ok(run.outcome());
            };
            let mut docs = read(&retrieval, ctx).await?;
            let before = docs.clone();
            for (i, url) in urls.iter().enumerate() {
                if i >= MAX_URLS {
                    run.refuse(&Refused::TooMany(retrieve::excerpt(url)).to_string());
                    continue;
                }
                run.one(&retrieval, &mut docs, url).await;
            }
            if docs != before {
                save(&retrieval, ctx, docs).await?;
            }
            Ok(run.outcome())
        })
    }
}

/// One retrieval's progress.
struct Run<'a> {
    ctx: &'a TaskContext,
    added: Vec<String>,
    refused: Vec<String>,
}

impl Run<'_> {
    fn outcome(self) -> Outcome {
        Outcome::Retrieved {
            added: self.added,
            refused: self.refused,
        }
    }

    fn refuse(&mut self, why: &str) {
        let ctx = self.ctx;
        warn!(event = "retrieve_refused", agent = %ctx.key.agent, chat = %ctx.key.chat, reason = %why, "retrieve refused: {why}");
        self.refused.push(why.to_owned());
    }

    /// Retrieves `url` into `docs`, unless it is there already.
    async fn one(&mut self, retrieval: &Retrieval, docs: &mut Documents, url: &str) {
        let ctx = self.ctx;
        let now = ctx.clock.now();
        if let Some(doc) = docs.find(url, now) {
            // A run again after a crash finds what its first run kept: still its own.
            if doc.task == ctx.task.id {
                self.added.push(url.to_owned());
            } else {
                info!(event = "retrieve_repeated", agent = %ctx.key.agent, chat = %ctx.key.chat, url = %retrieve::excerpt(url), "already retrieved in this conversation window: not fetched again, no other turn");
            }
            return;
        }
        let target = match retrieve::target(url) {
            Ok(t) => t,
            Err(why) => return self.refuse(&why.to_string()),
        };
        let mut doc = match target {
            Target::File(file) => Document::new(url, &ctx.task.id, &file_text(ctx, file), now),
            Target::Web(web) => {
                let req = RetrieveRequest {
                    agent: &ctx.key.agent,
                    chat: ctx.chat.id,
                    url: &web,
                    daily_cap: ctx.persona.retrieve_daily_cap,
                };
                match retrieval.fetcher.fetch(req).await {
                    Ok(page) => {
                        info!(event = "retrieved", agent = %ctx.key.agent, chat = %ctx.key.chat, url = %retrieve::excerpt(&web), bytes = page.bytes, content_type = %page.content_type, "page retrieved");
                        let mut doc = Document::new(&web, &ctx.task.id, &page.text, now);
                        doc.final_url = (page.final_url != web).then_some(page.final_url);
                        doc
                    }
                    Err(e) => {
                        let why = Refused::Fetch {
                            url: retrieve::excerpt(&web),
                            why: e.to_string(),
                        };
                        return self.refuse(&why.to_string());
                    }
                }
            }
        };
        doc.url = url.to_owned();
        docs.add(doc, now);
        self.added.push(url.to_owned());
    }
}

/// A `file:` resource's text, from the persona's own state.
fn file_text(ctx: &TaskContext, file: FileResource) -> String {
    match file {
        FileResource::Schedule => match ctx.presence.as_ref().and_then(|p| p.schedule.as_ref()) {
            Some(schedule) => retrieve::schedule_json(schedule, ctx.clock.now()),
            None => "[] (you have no daily schedule)".to_owned(),
        },
        FileResource::Media if ctx.persona.album.is_empty() => retrieve::NO_ALBUM.to_owned(),
        FileResource::Media => ctx.persona.album.media_json(),
    }
}

async fn read(retrieval: &Retrieval, ctx: &TaskContext) -> Result<Documents, TaskError> {
    let store = Arc::clone(&retrieval.documents);
    let (agent, chat) = (ctx.key.agent.clone(), ctx.chat.id);
    tokio::task::spawn_blocking(move || store.read(&agent, chat))
        .await
        .map_err(|e| TaskError::Transient(Cause::Documents(Arc::new(e))))?
        .map_err(|e| TaskError::Transient(Cause::Documents(Arc::new(e))))
}

async fn save(retrieval: &Retrieval, ctx: &TaskContext, docs: Documents) -> Result<(), TaskError> {
    let store = Arc::clone(&retrieval.documents);
    let (agent, chat) = (ctx.key.agent.clone(), ctx.chat.id);
    tokio::task::spawn_blocking(move || store.save(&agent, chat, &docs))
        .await
        .map_err(|e| TaskError::Transient(Cause::Documents(Arc::new(e))))?
        .map_err(|e| TaskError::Transient(Cause::Documents(Arc::new(e))))
}
