//! Fitting a planning prompt to a model's context (`--context-tokens`): a small local model
//! answers HTTP 400 to a prompt longer than its context, and a chat whose history outgrew it
//! would never be answered again. Pure: it estimates tokens from UTF-8 bytes (a third of the
//! bytes, rounded up, plus a few per turn: an over-estimate for English and for the common
//! scripts with the tokenizers of small models) and trims, in this order, until the prompt fits
//! the budget left after the answer's reserve:
//!
//! 1. the oldest history turns (the newest message always stays);
//! 2. the memory section of the system instruction (facts, notes, summaries);
//! 3. the text of the turns left, the longest first, each cut with a note of what was cut.
//!
//! Called by `prompt::build_within`; the planner reports the estimate of each request.

use crate::core::llm::{Part, Turn};

/// Tokens estimated per turn for its role and framing.
const PER_TURN: usize = 8;

/// Estimated tokens of `text`.
pub fn estimate(text: &str) -> usize {
    text.len().div_ceil(3)
}

/// Estimated tokens of a turn.
pub fn turn_tokens(turn: &Turn) -> usize {
    PER_TURN
        + turn
            .parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => estimate(t),
                // An image or audio part: what a vision model charges for a small image.
                _ => 300,
            })
            .sum::<usize>()
}

/// Estimated tokens of a whole prompt.
pub fn prompt_tokens(system: &str, turns: &[Turn]) -> usize {
    estimate(system) + PER_TURN + turns.iter().map(turn_tokens).sum::<usize>()
}

/// What fitting did, for the log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fitted {
    /// History turns left out (oldest first).
    pub turns_dropped: usize,
    pub memory_dropped: bool,
    /// Turns whose text was cut.
    pub turns_cut: usize,
    /// The estimate of what is sent.
    pub tokens: usize,
}

/// Fits `system` (with its memory section `memory` appended) and `history` (oldest first)
/// plus the final `context` turn into `budget` tokens. Returns the system text, the turns
/// (history kept, then the context turn) and what was done.
pub fn fit(
    system: &str,
    memory: &str,
    mut history: Vec<Turn>,
    context: Turn,
    budget: usize,
) -> (String, Vec<Turn>, Fitted) {
    let mut fitted = Fitted::default();
    let fixed = estimate(system) + PER_TURN + turn_tokens(&context);
    let memory_cost = estimate(memory);
    let mut costs: Vec<usize> = history.iter().map(turn_tokens).collect();
    let mut total = fixed + memory_cost + costs.iter().sum::<usize>();
    // 1. The oldest turns, while more than the newest is left.
    let mut drop = 0;
    while drop + 1 < costs.len() && total > budget {
        total -= costs[drop];
        drop += 1;
    }
    history.drain(..drop);
    costs.drain(..drop);
    fitted.turns_dropped = drop;
    // 2. The memory section.
    if total > budget && memory_cost > 0 {
        total -= memory_cost;
        fitted.memory_dropped = true;
    }
    // 3. The longest texts, cut to what is left.
    while total > budget {
        let Some(i) = (0..costs.len())
            .max_by_key(|&i| costs[i])
            .filter(|&i| costs[i] > PER_TURN + 16)
        else {
            break;
        };
        if !cut_turn(&mut history[i], total - budget) {
            break;
        }
        let cost = turn_tokens(&history[i]);
        total = total - costs[i] + cost;
        costs[i] = cost;
        fitted.turns_cut += 1;
    }
    let mut system = system.to_owned();
    if !fitted.memory_dropped {
        system.push_str(memory);
    }
    history.push(context);
    fitted.tokens = prompt_tokens(&system, &history);
    (system, history, fitted)
}

/// Cuts the longest text part of `turn` by at least `over` tokens (its first lines, the
/// message's `[metadata]`, stay); `false` when nothing could be cut.
fn cut_turn(turn: &mut Turn, over: usize) -> bool {
    let Some(Part::Text(text)) = turn
        .parts
        .iter_mut()
        .filter(|p| matches!(p, Part::Text(_)))
        .max_by_key(|p| match p {
            Part::Text(t) => t.len(),
            _ => 0,
        })
    else {
        return false;
    };
    let note_room = 64;
    let keep_bytes = text.len().saturating_sub((over + note_room / 3 + 1) * 3);
    if keep_bytes >= text.len() || text.len() < 2 * note_room {
        return false;
    }
    let mut at = keep_bytes.min(text.len());
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    let cut = text.len() - at;
    text.truncate(at);
    text.push_str(&format!("\n[… {cut} bytes cut to fit the model's context]"));
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::llm::Role;

    fn turn(text: &str) -> Turn {
        Turn {
            role: Role::User,
            parts: vec![Part::Text(text.into())],
        }
    }

    /// However long the history, its pastes and the memory, what is sent fits the budget,
    /// and the newest message is in it.
    #[test]
    fn a_prompt_always_fits_its_budget_and_keeps_the_newest_message() {
        let history: Vec<Turn> = (0..60)
            .map(|i| {
                turn(&format!(
                    "[metadata] message_id={i}\n{}",
                    "paste ".repeat(3_500)
                ))
            })
            .collect();
        let memory = "\n# What you remember\n\n".to_owned() + &"a fact. ".repeat(2_000);
        for budget in [2_000, 7_168, 30_000] {
            let (system, turns, fitted) = fit(
                "You are Wren.",
                &memory,
                history.clone(),
                turn("[context]\nRespond to message 59."),
                budget,
            );
            assert!(fitted.tokens <= budget, "{fitted:?} over {budget}");
            assert_eq!(fitted.tokens, prompt_tokens(&system, &turns));
            let newest = turns.iter().rev().nth(1).and_then(|t| match &t.parts[0] {
                Part::Text(t) => Some(t.clone()),
                _ => None,
            });
            assert!(
                newest.is_some_and(|t| t.starts_with("[metadata] message_id=59")),
                "the newest message is gone at {budget}"
            );
        }
    }

    /// A prompt that fits is sent as it is.
    #[test]
    fn a_prompt_that_fits_is_untouched() {
        let history = vec![turn("hi"), turn("hello")];
        let (system, turns, fitted) = fit("sys", "\nmem", history, turn("ctx"), 10_000);
        assert_eq!(system, "sys\nmem");
        assert_eq!(turns.len(), 3);
        assert_eq!(
            (
                fitted.turns_dropped,
                fitted.memory_dropped,
                fitted.turns_cut
            ),
            (0, false, 0)
        );
    }
}
