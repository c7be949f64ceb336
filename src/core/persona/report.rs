//! The problems of one persona file as they are found: each with its severity and, where it
//! has one, its line. Every validation step writes to it; `validate` hands the problems on.

use std::path::PathBuf;

use super::{Problem, Severity};

/// Collects problems for one file.
pub(super) struct Report {
    pub(super) file: PathBuf,
    pub(super) problems: Vec<Problem>,
}

impl Report {
    pub(super) fn push(&mut self, severity: Severity, line: Option<usize>, message: String) {
        self.problems.push(Problem {
            file: self.file.clone(),
            line,
            severity,
            message,
        });
    }

    pub(super) fn error(&mut self, line: usize, message: String) {
        self.push(Severity::Error, Some(line), message);
    }

    pub(super) fn warning(&mut self, line: usize, message: String) {
        self.push(Severity::Warning, Some(line), message);
    }

    pub(super) fn has_errors(&self) -> bool {
        self.problems.iter().any(Problem::is_error)
    }
}
