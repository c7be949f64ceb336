//! The console's GET pages: each reads what its page shows through the controller (the
//! runtime's plans, pauses and states, the chats each persona has known, its Telegram for a
//! conversation, its schedule and memory through the readers `state schedule` and `state
//! memory` use), the usage meter, the incident log or the persona files, then hands it to its
//! renderer in `pages`. Part of the console's server; it changes nothing.

use std::collections::BTreeMap;

use crate::app::ops::controls::DraftView;
use crate::core::graph::TaskStatus;
use crate::core::model::ChatId;

use super::http::{Request, Response};
use super::pages::personas::FileView;
use super::pages::{self, Frame, chat, drafts, memory, persona, personas, schedule, usage};
use super::{Console, HISTORY_SHOWN, chat_name, not_found};

impl Console {
    /// The frame of a page about `persona` (or none); `refresh`: the page refreshes itself
    /// (unless `?refresh=off`).
    async fn frame<'a>(
        &self,
        r: &'a Request,
        title: &'a str,
        note: Option<&'a str>,
        persona: Option<&'a str>,
        refresh: bool,
    ) -> Frame<'a> {
        let c = &self.controller;
        let drafts = c.draft_views().await.iter().filter(|d| !d.decided).count();
        Frame {
            title,
            note,
            drafts,
            now: c.now(),
            persona: persona.map(|p| (p, c.zone(p))),
            refresh: refresh.then(|| {
                (
                    r.path.as_str(),
                    r.query.get("refresh").map(String::as_str) != Some("off"),
                )
            }),
        }
    }

    /// A GET page, by its path.
    pub(super) async fn page(&self, r: &Request, note: Option<&str>, csrf: &str) -> Response {
        let parts: Vec<&str> = r.path.split('/').filter(|p| !p.is_empty()).collect();
        let c = &self.controller;
        let known = |agent: &str| c.agents().iter().any(|a| a == agent);
        let html = match parts.as_slice() {
            [] => {
                let f = self.frame(r, "Personas", note, None, true).await;
                let files = self.persona_files().await;
                personas::render(&f, &c.agent_views().await, &files, csrf)
            }
            ["agent", agent] if known(agent) => {
                let f = self.frame(r, agent, note, Some(agent), false).await;
                let rows = self.chat_rows(agent).await;
                persona::render(
                    &f,
                    agent,
                    &c.zone(agent),
                    rows,
                    &persona::Query::of(&r.query),
                )
            }
            ["agent", agent, "schedule"] if known(agent) => {
                let title = format!("{agent}: schedule");
                let f = self.frame(r, &title, note, Some(agent), false).await;
                match c.schedule_view(agent).await {
                    Ok(view) => schedule::render(&f, agent, &c.zone(agent), &view),
                    Err(e) => pages::page(
                        &f,
                        &format!("<p class=\"warn\">{}</p>", pages::esc(&e.to_string())),
                    ),
                }
            }
            ["agent", agent, "memory"] if known(agent) => {
                let title = format!("{agent}: memory");
                let f = self.frame(r, &title, note, Some(agent), false).await;
                let names = c.chat_entries(agent);
                let name = |id: i64| names.get(&id).map(|e| e.title.clone());
                match c.memory_view(agent).await {
                    Ok(view) => memory::render(&f, agent, &view, &name, csrf),
                    Err(e) => pages::page(
                        &f,
                        &format!("<p class=\"warn\">{}</p>", pages::esc(&e.to_string())),
                    ),
                }
            }
            ["agent", agent, "chat", id] => {
                return self.conversation(r, agent, id, note, csrf).await;
            }
            ["agent", agent, "chat", id, "voice", msg] => {
                return self.voice_note(agent, id, msg).await;
            }
            ["drafts"] => {
                let f = self.frame(r, "Drafts", note, None, true).await;
                let mut waiting = c.draft_views().await;
                waiting.retain(|d| !d.decided);
                drafts::render(&f, &waiting, &|a| c.zone(a), csrf)
            }
            ["usage"] => {
                let f = self.frame(r, "Usage", note, None, false).await;
                let caps: Vec<(String, crate::core::budget::DailyCap)> = c
                    .agents()
                    .into_iter()
                    .filter_map(|a| c.daily_cap(&a).map(|cap| (a, cap)))
                    .collect();
                let agent = r.query.get("agent").map(String::as_str);
                usage::render(&f, &self.usage.totals(), &caps, agent)
            }
            ["incidents"] => {
                let f = self.frame(r, "Incidents", note, None, false).await;
                super::incidents::page(&f, &self.incidents.recent(), &|agent, chat| {
                    chat_name(c, agent, chat)
                })
            }
            _ => return not_found(),
        };
        Response::html(200, html)
    }

    /// A conversation page: the chat and its messages through the persona's Telegram.
    async fn conversation(
        &self,
        r: &Request,
        agent: &str,
        id: &str,
        note: Option<&str>,
        csrf: &str,
    ) -> Response {
        let c = &self.controller;
        let Ok(id) = id.parse::<i64>() else {
            return not_found();
        };
        let (chat, messages) = match c.history(agent, ChatId(id), HISTORY_SHOWN).await {
            Ok(read) => read,
            Err(e) => {
                return Response::html(
                    404,
                    pages::layout("No such chat", Some(&e.to_string()), ""),
                );
            }
        };
        let plans = c.plans_of(agent).await;
        let drafts: Vec<DraftView> = c
            .draft_views()
            .await
            .into_iter()
            .filter(|d| d.agent == agent && d.chat.0 == id && !d.decided)
            .collect();
        let state = chat::ChatState {
            plan: plans.iter().find(|g| g.chat.id.0 == id),
            drafts: &drafts,
            paused: c.is_paused(agent, ChatId(id)),
            mode: (!chat.kind.is_direct()).then(|| c.group_mode_of(agent, ChatId(id))),
        };
        let title = format!("{agent}: {}", chat.title);
        let f = self.frame(r, &title, note, Some(agent), false).await;
        let html = chat::render(&f, agent, &c.zone(agent), &chat, &messages, &state, csrf);
        Response::html(200, html)
    }

    /// Every chat the persona has known, and those with a plan under way, as the list shows
    /// them.
    async fn chat_rows(&self, agent: &str) -> Vec<persona::ChatRow> {
        let c = &self.controller;
        let plans = c.plans_of(agent).await;
        let drafts: Vec<DraftView> = c.draft_views().await;
        let mut entries = c.chat_entries(agent);
        for g in &plans {
            entries
                .entry(g.chat.id.0)
                .or_insert_with(|| crate::app::ops::controls::ChatEntry {
                    title: g.chat.title.clone(),
                    group: !g.chat.kind.is_direct(),
                    ..Default::default()
                });
        }
        let plan_of: BTreeMap<i64, String> = plans
            .iter()
            .map(|g| {
                let open: Vec<String> = g
                    .tasks
                    .iter()
                    .filter(|t| t.status != TaskStatus::Done)
                    .take(2)
                    .map(chat::step)
                    .collect();
                let text = if open.is_empty() {
                    "finished".to_string()
                } else {
                    open.join(", then ")
                };
                (g.chat.id.0, text)
            })
            .collect();
        entries
            .into_iter()
            .map(|(id, e)| persona::ChatRow {
                id,
                waits: e.waits(),
                draft: drafts
                    .iter()
                    .any(|d| d.agent == agent && d.chat.0 == id && !d.decided),
                plan: plan_of.get(&id).cloned(),
                paused: c.is_paused(agent, ChatId(id)),
                title: if e.title.is_empty() {
                    id.to_string()
                } else {
                    e.title
                },
                group: e.group,
                last: e.last.map(|l| (l.at, l.who, l.text)),
            })
            .collect()
    }

    /// The persona files that do not run: disabled, or with problems (each `file:line`).
    async fn persona_files(&self) -> Vec<FileView> {
        let Some(global) = &self.global else {
            return Vec::new();
        };
        let Ok(report) = crate::app::commands::load_personas_async(global).await else {
            return Vec::new();
        };
        report
            .entries
            .iter()
            .filter_map(|e| {
                let file = e
                    .path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let disabled = e.persona.as_ref().is_some_and(|p| p.disabled);
                let problems: Vec<String> = e
                    .problems
                    .iter()
                    .filter(|p| p.is_error())
                    .map(|p| {
                        let at = p
                            .file
                            .file_name()
                            .map(|n| n.to_string_lossy().into_owned())
                            .unwrap_or_default();
                        match p.line {
                            Some(line) => format!("{at}:{line}: {}", p.message),
                            None => format!("{at}: {}", p.message),
                        }
                    })
                    .collect();
                (disabled || !problems.is_empty()).then(|| FileView {
                    file,
                    name: e.name.clone(),
                    disabled,
                    problems,
                })
            })
            .collect()
    }
}
