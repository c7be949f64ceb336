//! The usage page (`/usage`, `?agent=` for one persona): an inline SVG chart of the last
//! fortnight's use per (UTC) day, each bar split by model, with its axis, a value over each
//! bar and the persona's daily cap as a line (in tokens, or in dollars when the cap is only
//! in dollars); then the use per day and model and the totals, with the estimated cost
//! (built-in prices). No script: the chart scales with the page.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{Frame, esc, page};
use crate::adapters::llm::usage::{PriceTable, UsageRow};
use crate::app::console::http::encode;
use crate::core::budget::DailyCap;

/// Days the chart shows.
const DAYS: usize = 14;
const PALETTE: [&str; 6] = [
    "#3b6ea5", "#c0504d", "#9bbb59", "#8064a2", "#f79646", "#4bacc6",
];

/// What the chart counts.
#[derive(Clone, Copy, PartialEq)]
enum Metric {
    Tokens,
    Dollars,
}

impl Metric {
    fn show(self, v: f64) -> String {
        match self {
            Metric::Tokens if v >= 10_000.0 => format!("{:.0}k", v / 1000.0),
            Metric::Tokens => format!("{v:.0}"),
            Metric::Dollars if v < 0.1 => format!("${v:.3}"),
            Metric::Dollars => format!("${v:.2}"),
        }
    }
}

/// The usage page: `rows` of every persona, `caps` each persona's daily cap, `agent` the
/// persona chosen (all when `None`).
pub(crate) fn render(
    f: &Frame<'_>,
    rows: &[UsageRow],
    caps: &[(String, DailyCap)],
    agent: Option<&str>,
) -> String {
    let prices = PriceTable::builtin();
    let mut agents: Vec<String> = rows.iter().map(|r| r.agent.clone()).collect();
    agents.extend(caps.iter().map(|(a, _)| a.clone()));
    agents.sort();
    agents.dedup();
    let rows: Vec<&UsageRow> = rows
        .iter()
        .filter(|r| agent.is_none_or(|a| r.agent == a))
        .collect();
    let mut body = String::from("<div class=\"filters\">");
    let _ = write!(
        body,
        "<a class=\"filter{}\" href=\"/usage\">All personas</a>",
        if agent.is_none() { " on" } else { "" }
    );
    for a in &agents {
        let _ = write!(
            body,
            "<a class=\"filter{}\" href=\"/usage?agent={}\">{}</a>",
            if agent == Some(a.as_str()) { " on" } else { "" },
            encode(a),
            esc(a)
        );
    }
    body.push_str("</div>");
    if rows.is_empty() {
        body.push_str("<p id=\"no-usage\">No LLM use recorded yet.</p>");
        return page(f, &body);
    }
    let cap = agent.and_then(|a| caps.iter().find(|(n, _)| n == a).map(|(_, c)| *c));
    let metric = match cap {
        Some(DailyCap {
            tokens: None,
            usd: Some(_),
        }) => Metric::Dollars,
        _ => Metric::Tokens,
    };
    // (day, model) → value
    let mut by: BTreeMap<(String, String), f64> = BTreeMap::new();
    for r in &rows {
        let v = match metric {
            Metric::Tokens => (r.prompt_tokens + r.output_tokens) as f64,
            Metric::Dollars => prices.cost(r).unwrap_or(0.0),
        };
        *by.entry((r.day.clone(), r.model.clone())).or_default() += v;
    }
    body.push_str(&chart(&by, cap, metric));
    body.push_str(&tables(&rows, &prices));
    page(f, &body)
}

/// The chart: a bar per day split by model, the axis with its ticks, a value over each bar,
/// the cap as a dashed line.
fn chart(by: &BTreeMap<(String, String), f64>, cap: Option<DailyCap>, metric: Metric) -> String {
    let mut days: Vec<&String> = by.keys().map(|(d, _)| d).collect();
    days.dedup();
    let days: Vec<&String> = days.into_iter().rev().take(DAYS).rev().collect();
    let mut models: Vec<&String> = by.keys().map(|(_, m)| m).collect();
    models.sort();
    models.dedup();
    let total = |day: &String| -> f64 {
        by.iter()
            .filter(|((d, _), _)| d == day)
            .map(|(_, v)| *v)
            .sum()
    };
    let cap_value = cap.and_then(|c| match metric {
        Metric::Tokens => c.tokens.map(|t| t as f64),
        Metric::Dollars => c.usd,
    });
    let highest = days
        .iter()
        .map(|d| total(d))
        .fold(cap_value.unwrap_or(0.0), f64::max)
        .max(if metric == Metric::Tokens { 4.0 } else { 0.04 });
    // Round figures on the axis: a step of 1, 2, 2.5 or 5 times a power of ten.
    let step = nice(highest / 4.0);
    let ticks = (highest / step).ceil().max(1.0);
    let top = step * ticks;
    let (w, h, left, bottom, head) = (720.0_f64, 300.0_f64, 56.0_f64, 40.0_f64, 24.0_f64);
    let plot = h - bottom - head;
    let y = |v: f64| head + plot - v / top * plot;
    let mut svg = format!(
        "<svg id=\"usage-chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {}\" role=\"img\" aria-label=\"{} per day and model\">",
        h + 20.0 * models.len().div_ceil(3) as f64,
        if metric == Metric::Tokens {
            "Tokens"
        } else {
            "Dollars"
        }
    );
    // The axis and its ticks.
    for i in 0..=(ticks as u32) {
        let v = step * f64::from(i);
        let _ = write!(
            svg,
            "<line x1=\"{left}\" y1=\"{yy:.1}\" x2=\"{w}\" y2=\"{yy:.1}\" stroke=\"#8884\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{}</text>",
            left - 4.0,
            y(v) + 4.0,
            metric.show(v),
            yy = y(v)
        );
    }
    let _ = write!(
        svg,
        "<line x1=\"{left}\" y1=\"{head}\" x2=\"{left}\" y2=\"{:.1}\" stroke=\"#888\"/><text x=\"4\" y=\"14\" font-size=\"11\">{}</text>",
        head + plot,
        if metric == Metric::Tokens {
            "tokens"
        } else {
            "estimated $"
        }
    );
    let group = (w - left) / days.len().max(1) as f64;
    let bar = (group * 0.6).clamp(4.0, 60.0);
    for (i, day) in days.iter().enumerate() {
        let x = left + i as f64 * group + (group - bar) / 2.0;
        let mut base = 0.0;
        for (j, model) in models.iter().enumerate() {
            let v = by
                .get(&((*day).clone(), (*model).clone()))
                .copied()
                .unwrap_or(0.0);
            if v <= 0.0 {
                continue;
            }
            let _ = write!(
                svg,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{bar:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{} {}: {}</title></rect>",
                y(base + v),
                y(base) - y(base + v),
                PALETTE[j % PALETTE.len()],
                esc(day),
                esc(model),
                metric.show(v)
            );
            base += v;
        }
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\" class=\"value\">{}</text><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
            x + bar / 2.0,
            y(base) - 4.0,
            metric.show(base),
            x + bar / 2.0,
            head + plot + 16.0,
            esc(day.get(5..).unwrap_or(day))
        );
    }
    if let Some(c) = cap_value {
        let _ = write!(
            svg,
            "<line id=\"cap-line\" x1=\"{left}\" y1=\"{yy:.1}\" x2=\"{w}\" y2=\"{yy:.1}\" stroke=\"#c0504d\" stroke-width=\"2\" stroke-dasharray=\"6 4\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\" fill=\"#c0504d\">cap {}</text>",
            w - 4.0,
            y(c) - 4.0,
            metric.show(c),
            yy = y(c)
        );
    }
    for (j, model) in models.iter().enumerate() {
        let (lx, ly) = (
            left + (j % 3) as f64 * 220.0,
            h - 8.0 + (j / 3) as f64 * 20.0,
        );
        let _ = write!(
            svg,
            "<rect x=\"{lx}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{ly}\" font-size=\"11\">{}</text>",
            ly - 9.0,
            PALETTE[j % PALETTE.len()],
            lx + 14.0,
            esc(model)
        );
    }
    svg.push_str("</svg>");
    format!("<figure class=\"chart\">{svg}</figure>")
}

/// Requests, prompt tokens, output tokens, the estimated cost, and whether some model had no
/// price.
type Sums = (u64, u64, u64, f64, bool);

/// The smallest of 1, 2, 2.5, 5 and 10 times a power of ten that is at least `v`.
fn nice(v: f64) -> f64 {
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|n| *n >= v)
        .unwrap_or(10.0 * p)
}

/// The use per day and model, then the totals per persona and in all.
fn tables(rows: &[&UsageRow], prices: &PriceTable) -> String {
    // (day, agent, model) → (requests, prompt, output, cost, unpriced)
    let mut by: BTreeMap<(String, String, String), Sums> = BTreeMap::new();
    for r in rows {
        let e = by
            .entry((r.day.clone(), r.agent.clone(), r.model.clone()))
            .or_default();
        e.0 += r.requests;
        e.1 += r.prompt_tokens;
        e.2 += r.output_tokens;
        match prices.cost(r) {
            Some(c) => e.3 += c,
            None => e.4 = true,
        }
    }
    let cost = |c: f64, unpriced: bool| {
        if unpriced {
            format!("${c:.4} + unpriced")
        } else {
            format!("${c:.4}")
        }
    };
    let mut out = String::from(
        "<h2>Per day and model</h2><table class=\"stack\" id=\"usage-days\"><thead><tr><th>Day (UTC)</th><th>Persona</th><th>Model</th><th>Requests</th><th>Prompt tokens</th><th>Output tokens</th><th>Estimated cost</th></tr></thead><tbody>",
    );
    let mut totals: BTreeMap<String, Sums> = BTreeMap::new();
    for ((day, agent, model), v) in by.iter().rev() {
        let _ = write!(
            out,
            "<tr><td data-label=\"Day\">{}</td><td data-label=\"Persona\">{}</td><td data-label=\"Model\">{}</td><td data-label=\"Requests\">{}</td><td data-label=\"Prompt\">{}</td><td data-label=\"Output\">{}</td><td data-label=\"Cost\">{}</td></tr>",
            esc(day),
            esc(agent),
            esc(model),
            v.0,
            v.1,
            v.2,
            cost(v.3, v.4)
        );
        for key in [agent.clone(), String::new()] {
            let t = totals.entry(key).or_default();
            t.0 += v.0;
            t.1 += v.1;
            t.2 += v.2;
            t.3 += v.3;
            t.4 |= v.4;
        }
    }
    out.push_str("</tbody></table><h2>Totals</h2><table class=\"stack\" id=\"usage-totals\"><thead><tr><th>Persona</th><th>Requests</th><th>Prompt tokens</th><th>Output tokens</th><th>Estimated cost</th></tr></thead><tbody>");
    for (agent, v) in totals.iter().filter(|(a, _)| !a.is_empty()) {
        let _ = write!(
            out,
            "<tr><td data-label=\"Persona\">{}</td><td data-label=\"Requests\">{}</td><td data-label=\"Prompt\">{}</td><td data-label=\"Output\">{}</td><td data-label=\"Cost\">{}</td></tr>",
            esc(agent),
            v.0,
            v.1,
            v.2,
            cost(v.3, v.4)
        );
    }
    if let Some(v) = totals.get("") {
        let _ = write!(
            out,
            "<tr class=\"total\" id=\"grand-total\"><td data-label=\"\"><strong>All</strong></td><td data-label=\"Requests\">{}</td><td data-label=\"Prompt\">{}</td><td data-label=\"Output\">{}</td><td data-label=\"Cost\">{}</td></tr>",
            v.0,
            v.1,
            v.2,
            cost(v.3, v.4)
        );
    }
    out.push_str("</tbody></table>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(agent: &str, model: &str, day: &str, t: u64) -> UsageRow {
        UsageRow {
            agent: agent.into(),
            model: model.into(),
            kind: crate::core::call_kind::CallKind::Plan,
            day: day.into(),
            requests: 1,
            prompt_tokens: t,
            cached_tokens: 0,
            output_tokens: 0,
            discarded: 0,
            characters: 0,
            bytes: 0,
        }
    }

    fn frame() -> Frame<'static> {
        Frame {
            title: "Usage",
            note: None,
            drafts: 0,
            now: jiff::Timestamp::UNIX_EPOCH,
            persona: None,
            refresh: None,
        }
    }

    #[test]
    fn the_usage_chart_draws_a_bar_per_persona_and_day() {
        let rows = [
            row("Ann", "gemini-flash-latest", "2026-11-25", 1000),
            row("Bo", "gemini-flash-latest", "2026-11-25", 500),
            row("Ann", "gemini-flash-latest", "2026-11-26", 2000),
            row("Ann", "other-model", "2026-11-26", 3000),
        ];
        let cap = DailyCap {
            tokens: Some(4000),
            usd: None,
        };
        let page = render(&frame(), &rows, &[("Ann".into(), cap)], None);
        assert!(page.contains("<svg id=\"usage-chart\""));
        // Two days: one bar part on the 25th (a model), two on the 26th, two legend keys.
        assert_eq!(page.matches("<rect x=").count(), 3 + 2, "{page}");
        assert!(page.contains("2026-11-26 other-model: 3000"), "{page}");
        assert!(
            page.contains(">1500<") && page.contains(">5000<"),
            "values: {page}"
        );
        assert!(!page.contains("cap-line"), "no cap line for every persona");
        assert!(page.contains("id=\"grand-total\""), "{page}");
        let ann = render(&frame(), &rows, &[("Ann".into(), cap)], Some("Ann"));
        assert!(
            ann.contains("id=\"cap-line\"") && ann.contains("cap 4000"),
            "{ann}"
        );
        assert!(
            !ann.contains(">Bo<") || ann.contains("usage?agent=Bo"),
            "{ann}"
        );
        assert!(ann.contains("$0.0003"), "{ann}");
    }
}
