//! Truth labels for grading group decisions: which messages of a chat were addressed to the
//! persona (`addressed`) and which were not (`not`), as a small text file, one message per
//! line; and the grade of a replay against them (precision, recall, classifier calls per
//! 100 messages). Pure: `app::replay` reads the file, derives labels from an export, and
//! feeds each decision in. Parse errors name the line.
//!
//! The file:
//!
//! ```text
//! # comments and blank lines are ignored
//! 1204 addressed
//! 1205 not
//! ```
//!
//! (`yes`/`no`, `true`/`false` and `1`/`0` are accepted too). Messages without a line are not
//! graded.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// Per-message labels, by message id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels {
    by_id: BTreeMap<i64, bool>,
}

/// A label file line that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct LabelError {
    pub line: usize,
    pub reason: String,
}

impl Labels {
    /// Reads a label file's text.
    pub fn parse(text: &str) -> Result<Labels, LabelError> {
        let mut by_id = BTreeMap::new();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |reason: String| LabelError {
                line: n + 1,
                reason,
            };
            let mut words = line.split_whitespace();
            let (Some(id), Some(label), None) = (words.next(), words.next(), words.next()) else {
                return Err(err(format!(
                    "expected `<message id> addressed` or `<message id> not`, found {line:?}"
                )));
            };
            let id: i64 = id
                .parse()
                .map_err(|_| err(format!("{id:?} is not a message id")))?;
            let addressed = match label.to_ascii_lowercase().as_str() {
                "addressed" | "yes" | "true" | "1" => true,
                "not" | "no" | "false" | "0" => false,
                other => {
                    return Err(err(format!(
                        "unknown label {other:?}: expected `addressed` or `not`"
                    )));
                }
            };
            if by_id.insert(id, addressed).is_some() {
                return Err(err(format!("message {id} is labelled twice")));
            }
        }
        Ok(Labels { by_id })
    }

    /// Labels from pairs (message id, addressed).
    pub fn from_pairs(pairs: impl IntoIterator<Item = (i64, bool)>) -> Labels {
        Labels {
            by_id: pairs.into_iter().collect(),
        }
    }

    /// The label of message `id`, if it has one.
    pub fn get(&self, id: i64) -> Option<bool> {
        self.by_id.get(&id).copied()
    }

    /// How many messages are labelled addressed.
    pub fn addressed(&self) -> usize {
        self.by_id.values().filter(|a| **a).count()
    }

    /// The file form, with `header` as comment lines on top.
    pub fn render(&self, header: &str) -> String {
        let mut out: String = header.lines().map(|l| format!("# {l}\n")).collect();
        for (id, addressed) in &self.by_id {
            out.push_str(&format!(
                "{id} {}\n",
                if *addressed { "addressed" } else { "not" }
            ));
        }
        out
    }
}

/// How a replay's decisions compare with the labels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Grade {
    /// Triggered and labelled addressed.
    pub true_positive: usize,
    /// Triggered but labelled not.
    pub false_positive: usize,
    /// Labelled addressed but not triggered.
    pub missed: usize,
    /// Neither.
    pub true_negative: usize,
    /// Decided messages without a label.
    pub unlabelled: usize,
}

impl Grade {
    /// Counts one decided message.
    pub fn record(&mut self, labels: &Labels, id: i64, triggered: bool) {
        match (labels.get(id), triggered) {
            (None, _) => self.unlabelled += 1,
            (Some(true), true) => self.true_positive += 1,
            (Some(false), true) => self.false_positive += 1,
            (Some(true), false) => self.missed += 1,
            (Some(false), false) => self.true_negative += 1,
        }
    }

    /// Of the triggered (labelled) messages, the share labelled addressed; `None` with none.
    pub fn precision(&self) -> Option<f64> {
        ratio(self.true_positive, self.true_positive + self.false_positive)
    }

    /// Of the messages labelled addressed, the share triggered; `None` with none.
    pub fn recall(&self) -> Option<f64> {
        ratio(self.true_positive, self.true_positive + self.missed)
    }

    /// The JSON of a summary line, with the classifier's calls per 100 messages decided.
    pub fn to_json(&self, calls: usize, messages: usize) -> Value {
        let round = |v: Option<f64>| v.map(|v| (v * 1000.0).round() / 1000.0);
        json!({
            "precision": round(self.precision()),
            "recall": round(self.recall()),
            "true_positive": self.true_positive,
            "false_positive": self.false_positive,
            "missed": self.missed,
            "true_negative": self.true_negative,
            "unlabelled": self.unlabelled,
            "calls_per_100_messages": round(ratio(calls * 100, messages)),
        })
    }
}

fn ratio(a: usize, b: usize) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_files_parse_and_bad_lines_are_named() {
        let labels = Labels::parse("# head\n\n3 addressed\n4 not  # why\n5 yes\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (labels.get(3), labels.get(4), labels.get(5), labels.get(6)),
            (Some(true), Some(false), Some(true), None)
        );
        assert_eq!(labels.addressed(), 2);
        let again = Labels::parse(&labels.render("derived")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(again, labels, "render and parse agree");
        for (bad, line, what) in [
            ("1 addressed\nx not\n", 2, "not a message id"),
            ("1 maybe\n", 1, "unknown label"),
            ("1\n", 1, "expected"),
            ("1 not\n1 addressed\n", 2, "twice"),
        ] {
            let e = Labels::parse(bad)
                .err()
                .unwrap_or_else(|| panic!("{bad:?} parsed"));
            assert_eq!(e.line, line, "{e}");
            assert!(e.reason.contains(what), "{e}");
        }
    }

    #[test]
    fn precision_and_recall_count_only_labelled_messages() {
        let labels = Labels::from_pairs([(1, true), (2, true), (3, false), (4, false)]);
        let mut g = Grade::default();
        for (id, triggered) in [(1, true), (2, false), (3, true), (4, false), (9, true)] {
            g.record(&labels, id, triggered);
        }
        assert_eq!(g.precision(), Some(0.5));
        assert_eq!(g.recall(), Some(0.5));
        assert_eq!(g.unlabelled, 1);
        let j = g.to_json(7, 50);
        assert_eq!(j["calls_per_100_messages"], 14.0);
        assert_eq!(Grade::default().recall(), None);
    }
}
