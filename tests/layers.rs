//! The layer rule, checked on the source tree: every `crate::<layer>` path a file under
//! `src/<layer>/` names must be one its layer may use, the top-level modules form no import
//! cycle, and neither do the files inside one layer (`file_cycles`). Also the size limits of
//! the house rules: no source file over 800 lines and no `Result<_, String>` in the library.
//! A failure names the file and line to fix.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

mod file_cycles;

/// Which top-level modules each layer may import (itself included).
const ALLOWED: &[(&str, &[&str])] = &[
    ("core", &["core"]),
    ("ports", &["core", "ports"]),
    ("adapters", &["core", "ports", "adapters"]),
    ("runtime", &["core", "ports", "runtime"]),
    ("ingress", &["core", "ports", "runtime", "ingress"]),
    (
        "app",
        &["core", "ports", "adapters", "runtime", "ingress", "app"],
    ),
    ("cmd", &["core", "ports", "app", "cmd"]),
    (
        "fuzz",
        &[
            "core", "ports", "adapters", "runtime", "ingress", "app", "fuzz",
        ],
    ),
];

const LAYERS: &[&str] = &[
    "core", "ports", "adapters", "runtime", "ingress", "app", "cmd", "fuzz",
];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The layer a source file belongs to: its first path component under `src/` (a file
/// `src/fuzz.rs` is layer `fuzz`); `None` for `lib.rs` and `main.rs`.
fn layer_of(file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src_dir()).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_string())
}

/// Code without comments: `//` to the end of the line is dropped (doc comments name paths
/// in prose and links, which import nothing). String literals are kept as they are.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let code = match line.find("//") {
                Some(at) if !line[..at].contains('"') => &line[..at],
                _ => line,
            };
            (i + 1, code.to_string())
        })
        .collect()
}

/// Every `crate::<top>` a line names, for the known top-level modules.
fn crate_refs(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        let before_ok = at == 0
            || !rest[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
        let after = &rest[at + "crate::".len()..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if before_ok && LAYERS.contains(&name.as_str()) {
            out.push(name);
        }
        rest = after;
    }
    out
}

struct Import {
    file: PathBuf,
    line: usize,
    from: String,
    to: String,
}

fn imports() -> Vec<Import> {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let Some(from) = layer_of(&file) else {
            continue;
        };
        let text = fs::read_to_string(&file).unwrap_or_default();
        for (line, code) in code_lines(&text) {
            for to in crate_refs(&code) {
                out.push(Import {
                    file: file.clone(),
                    line,
                    from: from.clone(),
                    to,
                });
            }
        }
    }
    out
}

fn rel(file: &Path) -> String {
    file.strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")))
        .unwrap_or(file)
        .display()
        .to_string()
}

/// The rule itself, as a function of the imports, so the test below can show it rejects a
/// core → adapters import without editing the tree.
fn violations(imports: &[Import]) -> Vec<String> {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    imports
        .iter()
        .filter(|i| {
            !allowed
                .get(i.from.as_str())
                .is_some_and(|ok| ok.contains(&i.to.as_str()))
        })
        .map(|i| {
            format!(
                "{}:{}: layer `{}` may not import `crate::{}`",
                rel(&i.file),
                i.line,
                i.from,
                i.to
            )
        })
        .collect()
}

#[test]
fn every_import_follows_the_layer_rule() {
    let all = imports();
    assert!(
        all.iter().any(|i| i.from == "runtime" && i.to == "core"),
        "the scan found no runtime → core import: it is not reading the tree"
    );
    let bad = violations(&all);
    assert!(
        bad.is_empty(),
        "imports against the layer rule:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_rule_rejects_an_adapter_import_in_the_core() {
    let planted = Import {
        file: src_dir().join("core/scheduler.rs"),
        line: 1,
        from: "core".into(),
        to: "adapters".into(),
    };
    let bad = violations(&[planted]);
    assert_eq!(
        bad,
        vec!["src/core/scheduler.rs:1: layer `core` may not import `crate::adapters`".to_string()]
    );
    // And the scan sees such a line when it is written in a file.
    assert_eq!(
        crate_refs("use crate::adapters::store::GraphStore;"),
        vec!["adapters".to_string()]
    );
    assert!(crate_refs("// see crate::adapters").len() == 1);
    assert!(code_lines("x // see crate::adapters")[0].1.trim() == "x");
}

#[test]
fn no_import_cycle_between_top_level_modules() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for i in imports() {
        if i.from != i.to {
            edges.entry(i.from).or_default().insert(i.to);
        }
    }
    // Depth-first search for a back edge; report the cycle found.
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, edges, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for node in edges.keys() {
        let cycle = visit(node, &edges, &mut Vec::new(), &mut done);
        assert!(
            cycle.is_none(),
            "import cycle between top-level modules: {}",
            cycle.unwrap_or_default().join(" → ")
        );
    }
}

#[test]
fn no_source_file_is_over_800_lines() {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    let mut long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = fs::read_to_string(f).unwrap_or_default().lines().count();
            (n > 800).then(|| format!("{}: {n} lines", rel(f)))
        })
        .collect();
    long.sort();
    assert!(
        long.is_empty(),
        "files over 800 lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn no_string_errors_in_the_library() {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    files.sort();
    let mut found = Vec::new();
    for f in &files {
        let text = fs::read_to_string(f).unwrap_or_default();
        for (line, code) in code_lines(&text) {
            let squashed: String = code.chars().filter(|c| !c.is_whitespace()).collect();
            if (squashed.contains("Result<") && squashed.contains(",String>"))
                || squashed.contains("map_err(|e|e.to_string())")
            {
                found.push(format!("{}:{line}: {}", rel(f), code.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "string errors (use a typed error):\n{}",
        found.join("\n")
    );
}

/// Files that build text for a person (the console's pages, the reports `state` prints, the
/// owner's answers): turning an error into its words is their job.
const RENDERING: &[&str] = &[
    "src/app/console/",
    "src/app/memory_report.rs",
    "src/app/presence_report.rs",
];

/// Whether `code` turns an error into its text inside a variant or constructor
/// (`Variant(e.to_string())`, `Type::Variant(err.to_string())`,
/// `.map_err(|x| X(x.to_string()))`): the error should be kept as a source instead.
/// `Some(..)` and `Ok(..)` hold text on purpose (a field, an answer), not an error.
fn converts_an_error_to_text(code: &str) -> bool {
    let squashed: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    let closure_var = squashed.find("map_err(|").map(|at| {
        squashed[at + "map_err(|".len()..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect::<String>()
    });
    let mut rest = squashed.as_str();
    while let Some(at) = rest.find(".to_string())") {
        let before = &rest[..at];
        let var_start = before
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(0, |i| i + 1);
        let var = &before[var_start..];
        let opens = before[..var_start].ends_with('(');
        let path_end = var_start.saturating_sub(1);
        let path_start = before[..path_end]
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .map_or(0, |i| i + 1);
        let name = before[path_start..path_end]
            .rsplit("::")
            .next()
            .unwrap_or("");
        let is_error_var = matches!(var, "e" | "err" | "error")
            || closure_var
                .as_deref()
                .is_some_and(|v| !v.is_empty() && v == var);
        if opens
            && is_error_var
            && name.starts_with(|c: char| c.is_ascii_uppercase())
            && !matches!(name, "Some" | "Ok")
        {
            return true;
        }
        rest = &rest[at + ".to_string())".len()..];
    }
    false
}

/// Every `X(e.to_string())` in library code outside the rendering files (and, for now, the
/// files under restructuring), as `file:line: code`.
fn error_text_conversions() -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    files.sort();
    let mut found = Vec::new();
    for f in &files {
        let name = rel(f);
        if RENDERING.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let text = fs::read_to_string(f).unwrap_or_default();
        for (line, code) in code_lines(&text) {
            if converts_an_error_to_text(&code) {
                found.push(format!("{name}:{line}: {}", code.trim()));
            }
        }
    }
    found
}

#[test]
fn errors_keep_their_source_not_its_text() {
    let found = error_text_conversions();
    assert!(
        found.is_empty(),
        "an error turned into text inside another error (keep it as `#[source]`/`#[from]`; \
         only rendering code listed in RENDERING may do this):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_conversion_check_sees_each_spelling() {
    for caught in [
        ".map_err(|e| CommandError::Io(e.to_string()))?;",
        "Err(e) => Err(ClassifierError::Llm(e.to_string())),",
        "Err(err) => Failed(err.to_string()),",
        ".map_err(|why| LoginError::Failed(why.to_string()))",
        "OpError(e.to_string())",
    ] {
        assert!(converts_an_error_to_text(caught), "{caught}");
    }
    for fine in [
        "task.last_error = Some(error.to_string());",
        "Ok(e.to_string())",
        "CommandError::Usage(format!(\"bad {e}\"))",
        "let name = agent.to_string();",
        "Effect::SaveAgentState(agent.to_string())",
        ".map_err(CommandError::Io)?;",
    ] {
        assert!(!converts_an_error_to_text(fine), "{fine}");
    }
}
