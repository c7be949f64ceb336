//! Import cycles between files inside a layer, for `tests/layers.rs`. The layer rule sees only
//! top-level modules; this scan resolves every path a file names (`use` trees, `crate::`,
//! `super::`, `self::`, a child module's or an imported module's name) to the file that
//! defines the module the path names, and reports every circle as a chain of files. A file
//! naming one of its ancestors' files is not an edge (a child belongs to its parent); parent →
//! child and sibling edges are; a glob (`use super::*`) carries the globbed module's imports,
//! so a child using a name its parent imported depends on that name's file. `#[cfg(test)]`
//! items and `tests.rs` files are skipped. It reads source text only, like the rest of the
//! layer test (no parser dependency).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;

use super::{rust_files, src_dir};

/// A module path from the crate root, e.g. `["core", "graph", "spec"]`.
type ModPath = Vec<String>;

/// The module a file under `src/` defines: `core/graph/mod.rs` and `core/graph.rs` are both
/// `core::graph`; `lib.rs` is the crate root.
fn module_of(rel: &str) -> ModPath {
    let stem = rel.strip_suffix(".rs").unwrap_or(rel);
    let mut parts: Vec<String> = stem.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") || parts == ["lib"] {
        parts.pop();
    }
    parts
}

/// The text with comments and the insides of string and char literals blanked (newlines
/// kept, so lines still count), so a scan for paths and braces sees only code.
fn blank_non_code(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |ch: char| if ch == '\n' { '\n' } else { ' ' };
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                let pair = (c[i], c.get(i + 1).copied().unwrap_or(' '));
                if pair == ('/', '*') || pair == ('*', '/') {
                    depth += if pair.0 == '/' { 1 } else { -1 };
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (i == 0 || !ident(c[i - 1]) || (c[i - 1] == 'b' && (i < 2 || !ident(c[i - 2]))))
            && matches!(next, Some('"' | '#'))
        {
            // A raw string: r"…", r#"…"# (and br…); `r#ident` is left alone.
            let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
            if c.get(i + 1 + hashes) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            let close: String = std::iter::once('"')
                .chain("#".repeat(hashes).chars())
                .collect();
            let body = i + 2 + hashes;
            let end = text_find(&c, body, &close).map_or(c.len(), |at| at + close.len());
            out.extend(c[i..end].iter().map(|&ch| blank(ch)));
            i = end;
        } else if c[i] == '"' {
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(c.len());
            out.extend(c[i..end].iter().map(|&ch| blank(ch)));
            i = end;
        } else if c[i] == '\'' && (next == Some('\\') || c.get(i + 2) == Some(&'\'')) {
            // A char literal ('x', '\n', '\u{..}'); a lifetime ('a) has no closing quote.
            let mut j = i + 2;
            while j < c.len() && c[j] != '\'' {
                j += 1;
            }
            let end = (j + 1).min(c.len());
            out.extend(c[i..end].iter().map(|&ch| blank(ch)));
            i = end;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

fn text_find(c: &[char], from: usize, needle: &str) -> Option<usize> {
    let n: Vec<char> = needle.chars().collect();
    (from..c.len()).find(|&at| c[at..].starts_with(&n))
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Sep,
    Punct(char),
}

/// Code as tokens with their line numbers: identifiers (and numbers), `::`, single marks.
fn tokens(code: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < c.len() {
        if c[i] == '\n' {
            line += 1;
            i += 1;
        } else if c[i].is_whitespace() {
            i += 1;
        } else if c[i].is_alphanumeric() || c[i] == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(c[start..i].iter().collect()), line));
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            out.push((Tok::Sep, line));
            i += 2;
        } else {
            out.push((Tok::Punct(c[i]), line));
            i += 1;
        }
    }
    out
}

/// How a `use` binds what it names: under a name (the last segment or its `as`), or a glob.
#[derive(Debug, Clone, PartialEq)]
enum Bind {
    Name(String),
    Glob,
}

/// A path as written in a file: its segments (a `use` tree expanded), the module it is
/// written in (inline modules included), its line, and for a `use` what it binds.
#[derive(Debug, Clone)]
struct Written {
    segs: Vec<String>,
    scope: ModPath,
    line: usize,
    bind: Option<Bind>,
}

/// What one file says: the paths it writes, the names it uses, its inline modules, and the
/// modules it declares test-only (`#[cfg(test)] mod x;`).
#[derive(Default)]
struct FileScan {
    paths: Vec<Written>,
    /// Every identifier of its code outside `use` trees (names a glob may have brought in).
    idents: BTreeSet<String>,
    inline_mods: Vec<ModPath>,
    test_mods: Vec<ModPath>,
}

fn ident_at(toks: &[(Tok, usize)], i: usize) -> Option<&str> {
    match toks.get(i) {
        Some((Tok::Ident(s), _)) => Some(s),
        _ => None,
    }
}

fn punct_at(toks: &[(Tok, usize)], i: usize, ch: char) -> bool {
    matches!(toks.get(i), Some((Tok::Punct(p), _)) if *p == ch)
}

/// `#[cfg(test)]` (or `#![cfg(test)]`) starting at `i`: the index after it.
fn cfg_test_at(toks: &[(Tok, usize)], i: usize) -> Option<usize> {
    let bang = usize::from(punct_at(toks, i + 1, '!'));
    let at = i + 1 + bang;
    (punct_at(toks, i, '#')
        && punct_at(toks, at, '[')
        && ident_at(toks, at + 1) == Some("cfg")
        && punct_at(toks, at + 2, '(')
        && ident_at(toks, at + 3) == Some("test")
        && punct_at(toks, at + 4, ')')
        && punct_at(toks, at + 5, ']'))
    .then_some(at + 6)
}

/// The index after the item starting at `i` (its attributes skipped): after its `;` or its
/// closing brace at nesting depth zero.
fn item_end(toks: &[(Tok, usize)], mut i: usize) -> usize {
    let mut depth = 0i32;
    while i < toks.len() {
        match &toks[i].0 {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']') => depth -= 1,
            Tok::Punct('}') => {
                depth -= 1;
                if depth <= 0 {
                    return i + 1;
                }
            }
            Tok::Punct(';') if depth <= 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// The index after the bracket opened at `open` closes.
fn after_close(toks: &[(Tok, usize)], open: usize) -> usize {
    let mut depth = 0i32;
    for (at, (tok, _)) in toks.iter().enumerate().skip(open) {
        match tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return at + 1;
                }
            }
            _ => {}
        }
    }
    toks.len()
}

/// The index of an item's keyword, past its attributes and visibility (`pub(crate)`).
fn skip_attributes(toks: &[(Tok, usize)], mut at: usize) -> usize {
    loop {
        if punct_at(toks, at, '#') && punct_at(toks, at + 1, '[') {
            at = after_close(toks, at + 1);
        } else if ident_at(toks, at) == Some("pub") {
            at += 1;
            if punct_at(toks, at, '(') {
                at = after_close(toks, at);
            }
        } else {
            return at;
        }
    }
}

/// The paths of the `use` tree starting at `i` under `prefix`, with what each binds; returns
/// the index of the token that ends the tree (`,`, `}` or `;`).
fn use_tree(
    toks: &[(Tok, usize)],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Bind)>,
) -> usize {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(i).map(|t| &t.0) {
            Some(Tok::Ident(s)) if s == "as" => {
                let alias = ident_at(toks, i + 1).unwrap_or("_").to_string();
                out.push((path, Bind::Name(alias)));
                return i + 2;
            }
            Some(Tok::Ident(s)) => path.push(s.clone()),
            Some(Tok::Sep) => {}
            Some(Tok::Punct('*')) => {
                out.push((path, Bind::Glob));
                return i + 1;
            }
            Some(Tok::Punct('{')) => {
                i += 1;
                while i < toks.len() && !punct_at(toks, i, '}') {
                    if punct_at(toks, i, ',') {
                        i += 1;
                    } else {
                        i = use_tree(toks, i, &path, out).max(i + 1);
                    }
                }
                return i + 1;
            }
            _ => break,
        }
        i += 1;
    }
    if path.last().is_some_and(|s| s == "self") {
        path.pop();
    }
    if let Some(name) = path.last().cloned() {
        out.push((path, Bind::Name(name)));
    }
    i
}

/// Every path a file writes outside `#[cfg(test)]` items, with the module it is written in.
fn scan_file(module: &ModPath, text: &str) -> FileScan {
    let toks = tokens(&blank_non_code(text));
    let mut scan = FileScan::default();
    let mut inline: Vec<(String, i32)> = Vec::new();
    let mut depth = 0i32;
    let mut i = 0;
    let after_sep = |i: usize| i > 0 && toks[i - 1].0 == Tok::Sep;
    while i < toks.len() {
        let scope: ModPath = module
            .iter()
            .cloned()
            .chain(inline.iter().map(|m| m.0.clone()))
            .collect();
        let line = toks[i].1;
        if let Some(after) = cfg_test_at(&toks, i) {
            if punct_at(&toks, i + 1, '!') {
                return FileScan::default();
            }
            let end = item_end(&toks, after);
            let at = skip_attributes(&toks, after);
            if ident_at(&toks, at) == Some("mod")
                && let Some(name) = ident_at(&toks, at + 1)
            {
                scan.test_mods
                    .push(scope.iter().cloned().chain([name.to_string()]).collect());
            }
            i = end;
            continue;
        }
        if let Tok::Ident(name) = &toks[i].0 {
            scan.idents.insert(name.clone());
        }
        match &toks[i].0 {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth -= 1;
                if inline.last().is_some_and(|m| m.1 > depth) {
                    inline.pop();
                }
            }
            Tok::Ident(w) if w == "mod" && punct_at(&toks, i + 2, '{') => {
                let name = ident_at(&toks, i + 1).unwrap_or("_").to_string();
                scan.inline_mods
                    .push(scope.iter().cloned().chain([name.clone()]).collect());
                depth += 1;
                inline.push((name, depth));
                i += 3;
                continue;
            }
            Tok::Ident(w) if w == "use" && !after_sep(i) => {
                let mut trees = Vec::new();
                let end = use_tree(&toks, i + 1, &[], &mut trees);
                for (segs, bind) in trees {
                    let bind = Some(bind);
                    scan.paths.push(Written {
                        segs,
                        scope: scope.clone(),
                        line,
                        bind,
                    });
                }
                i = end;
                continue;
            }
            Tok::Ident(w) if w == "in" && punct_at(&toks, i.wrapping_sub(1), '(') => {
                // `pub(in crate::x)` names a visibility, not an item.
                while i < toks.len() && !punct_at(&toks, i, ')') {
                    i += 1;
                }
                continue;
            }
            Tok::Ident(first)
                if !after_sep(i) && toks.get(i + 1).is_some_and(|t| t.0 == Tok::Sep) =>
            {
                let mut segs = vec![first.clone()];
                let mut j = i + 1;
                while toks.get(j).is_some_and(|t| t.0 == Tok::Sep) {
                    let Some(next) = ident_at(&toks, j + 1) else {
                        break;
                    };
                    segs.push(next.to_string());
                    j += 2;
                }
                scan.paths.push(Written {
                    segs,
                    scope,
                    line,
                    bind: None,
                });
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    scan
}

/// The module a path names, resolved from the module it is written in: the longest prefix
/// that is a known module, and whether the whole path is one. `None` for a path that does
/// not start in this crate (a type, an enum, another crate).
fn resolve(
    segs: &[String],
    scope: &ModPath,
    aliases: &BTreeMap<String, ModPath>,
    modules: &BTreeMap<ModPath, String>,
) -> Option<(ModPath, bool)> {
    let first = segs.first()?.as_str();
    let child = |base: &ModPath, name: &str| -> ModPath {
        base.iter().cloned().chain([name.to_string()]).collect()
    };
    let (mut base, rest) = match first {
        "crate" => (Vec::new(), &segs[1..]),
        "self" => (scope.clone(), &segs[1..]),
        "super" => {
            let ups = segs.iter().take_while(|s| *s == "super").count();
            let keep = scope.len().checked_sub(ups)?;
            (scope[..keep].to_vec(), &segs[ups..])
        }
        _ if modules.contains_key(&child(scope, first)) => (scope.clone(), segs),
        _ => (aliases.get(first)?.clone(), &segs[1..]),
    };
    let mut whole = true;
    for seg in rest {
        let next = child(&base, seg);
        if !modules.contains_key(&next) {
            whole = false;
            break;
        }
        base = next;
    }
    Some((base, whole))
}

/// Where one file names another: the first line, and what is written there.
type Edges = BTreeMap<(String, String), (usize, String)>;

/// Every module of the sources, with the file that defines it (inline modules are in the
/// file that holds them; test-only modules are left out).
fn module_map(scans: &[(String, ModPath, FileScan)]) -> BTreeMap<ModPath, String> {
    let mut modules: BTreeMap<ModPath, String> = BTreeMap::new();
    for (rel, module, scan) in scans {
        modules.insert(module.clone(), rel.clone());
        for inline in &scan.inline_mods {
            modules.insert(inline.clone(), rel.clone());
        }
    }
    for (_, _, scan) in scans {
        for test_mod in &scan.test_mods {
            modules.remove(test_mod);
        }
    }
    modules
}

/// What a file's `use`s bring into scope as module names (twice over: a `use` may start from
/// a name another `use` brought in).
fn aliases_of(scan: &FileScan, modules: &BTreeMap<ModPath, String>) -> BTreeMap<String, ModPath> {
    let mut aliases: BTreeMap<String, ModPath> = BTreeMap::new();
    for _ in 0..2 {
        for w in &scan.paths {
            let Some(bind) = &w.bind else { continue };
            let Some((target, true)) = resolve(&w.segs, &w.scope, &aliases, modules) else {
                continue;
            };
            match bind {
                Bind::Name(name) => {
                    aliases.insert(name.clone(), target);
                }
                Bind::Glob => {
                    for m in modules.keys() {
                        if m.len() == target.len() + 1 && m.starts_with(&target) {
                            aliases.insert(m[target.len()].clone(), m.clone());
                        }
                    }
                }
            }
        }
    }
    aliases
}

/// The file-level edges of a set of source files (paths relative to `src/`, text). A glob
/// (`use super::*`) also brings in what the globbed module's own `use`s name: a file that
/// uses such a name depends on the file it comes from.
fn file_edges(sources: &[(String, String)]) -> Edges {
    let scans: Vec<(String, ModPath, FileScan)> = sources
        .iter()
        .filter(|(rel, _)| rel != "main.rs" && !rel.ends_with("/tests.rs"))
        .map(|(rel, text)| {
            let module = module_of(rel);
            let scan = scan_file(&module, text);
            (rel.clone(), module, scan)
        })
        .collect();
    let modules = module_map(&scans);
    let aliases: Vec<_> = scans
        .iter()
        .map(|(_, _, scan)| aliases_of(scan, &modules))
        .collect();
    let index: BTreeMap<&str, usize> = scans
        .iter()
        .enumerate()
        .map(|(k, (rel, _, _))| (rel.as_str(), k))
        .collect();
    let mut edges = Edges::new();
    for (k, (rel, module, scan)) in scans.iter().enumerate() {
        if modules.get(module) != Some(rel) {
            continue; // a test-only file
        }
        let mut add = |to: &str, line: usize, what: String| {
            let to_module = index.get(to).map(|&j| &scans[j].1);
            if to != rel && !to_module.is_some_and(|m| module.starts_with(m)) {
                // (A file naming itself or an ancestor: a child belongs to its parent.)
                edges
                    .entry((rel.clone(), to.to_string()))
                    .or_insert((line, what));
            }
        };
        for w in &scan.paths {
            let Some((target, whole)) = resolve(&w.segs, &w.scope, &aliases[k], &modules) else {
                continue;
            };
            let Some(to) = modules.get(&target) else {
                continue;
            };
            let written = w.segs.join("::");
            add(to, w.line, format!("`{written}`"));
            let Some(&g) = index
                .get(to.as_str())
                .filter(|_| whole && w.bind == Some(Bind::Glob))
            else {
                continue;
            };
            for u in &scans[g].2.paths {
                let Some(Bind::Name(name)) = &u.bind else {
                    continue;
                };
                if u.scope != target || !scan.idents.contains(name) {
                    continue;
                }
                let found = resolve(&u.segs, &u.scope, &aliases[g], &modules);
                if let Some(from) = found.and_then(|(m, _)| modules.get(&m)) {
                    let what = format!("`{written}::*` (`{name}`: `{}`)", u.segs.join("::"));
                    add(from, w.line, what);
                }
            }
        }
    }
    edges
}

/// Every import cycle among the edges, each as a readable chain of files with the line that
/// makes each step: enough cycles that each edge on a cycle is in one, shortest first.
fn cycles(edges: &Edges) -> Vec<String> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        next.entry(from).or_default().push(to);
    }
    // Which files reach which: a cycle through an edge u → v needs a way back from v to u.
    let path_back = |from: &str, to: &str| -> Option<Vec<String>> {
        let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = VecDeque::from([from]);
        let mut seen = BTreeSet::from([from]);
        while let Some(at) = queue.pop_front() {
            if at == to {
                let mut chain = vec![to.to_string()];
                let mut cur = to;
                while let Some(p) = prev.get(cur) {
                    chain.push(p.to_string());
                    cur = p;
                }
                chain.reverse();
                return Some(chain);
            }
            for n in next.get(at).into_iter().flatten() {
                if seen.insert(n) {
                    prev.insert(n, at);
                    queue.push_back(n);
                }
            }
        }
        None
    };
    // The shortest cycle through each edge on one, shortest first; one is listed when it
    // has an edge no listed cycle has.
    let mut found: Vec<Vec<String>> = edges
        .keys()
        .filter_map(|(from, to)| {
            let back = path_back(to, from)?;
            Some(std::iter::once(from.clone()).chain(back).collect())
        })
        .collect();
    found.sort_by(|a, b| (a.len(), a).cmp(&(b.len(), b)));
    let mut covered: BTreeSet<(&str, &str)> = BTreeSet::new();
    let mut out = Vec::new();
    for chain in &found {
        let steps: Vec<(&str, &str)> = chain
            .windows(2)
            .map(|s| (s[0].as_str(), s[1].as_str()))
            .collect();
        if steps.iter().all(|s| covered.contains(s)) {
            continue;
        }
        let files: Vec<String> = chain.iter().map(|f| format!("src/{f}")).collect();
        let mut text = format!("  {}", files.join(" → "));
        for (from, to) in steps {
            let (line, what) = &edges[&(from.to_string(), to.to_string())];
            text.push_str(&format!("\n      src/{from}:{line} names {what}"));
            covered.insert((from, to));
        }
        out.push(text);
    }
    out
}

fn sources() -> Vec<(String, String)> {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    files.sort();
    files
        .iter()
        .map(|f| {
            let rel = f
                .strip_prefix(src_dir())
                .unwrap_or(f)
                .to_string_lossy()
                .replace('\\', "/");
            (rel, fs::read_to_string(f).unwrap_or_default())
        })
        .collect()
}

#[test]
fn no_import_cycle_between_files_inside_a_layer() {
    let edges = file_edges(&sources());
    assert!(
        edges
            .keys()
            .any(|(a, b)| a == "core/scheduler.rs" && b == "core/graph/mod.rs"),
        "the scan found no core/scheduler.rs → core/graph/mod.rs edge: it is not reading the tree"
    );
    let found = cycles(&edges);
    assert!(
        found.is_empty(),
        "import cycles between files inside a layer ({}):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn the_scan_reports_a_planted_cycle_and_spares_a_child_naming_its_parent() {
    let src = |rel: &str, text: &str| (rel.to_string(), text.to_string());
    let planted = [
        src("core/mod.rs", "pub mod graph;\npub mod model;\n"),
        src(
            "core/model.rs",
            "// use crate::core::graph::Spec;\nconst S: &str = \"crate::core::graph\";\n\
             pub fn f(c: char) -> bool { c == '{' }\nuse crate::core::graph::{self, Graph};\n",
        ),
        src(
            "core/graph/mod.rs",
            "mod spec;\npub use spec::TaskSpec;\nfn g() { super::model::f('x'); }\n",
        ),
        src(
            "core/graph/spec.rs",
            "use super::Graph;\n#[cfg(test)]\nmod tests {\n    use crate::core::model::f;\n}\n",
        ),
        src("core/graph/tests.rs", "use crate::core::model::f;\n"),
    ];
    let edges = file_edges(&planted);
    let pairs: Vec<(&str, &str)> = edges
        .keys()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    assert_eq!(
        pairs,
        vec![
            ("core/graph/mod.rs", "core/graph/spec.rs"),
            ("core/graph/mod.rs", "core/model.rs"),
            ("core/model.rs", "core/graph/mod.rs"),
        ]
    );
    assert_eq!(
        cycles(&edges),
        vec![
            "  src/core/graph/mod.rs → src/core/model.rs → src/core/graph/mod.rs\n      \
             src/core/graph/mod.rs:3 names `super::model::f`\n      \
             src/core/model.rs:4 names `crate::core::graph`"
                .to_string()
        ]
    );
}

/// A child that reaches a file only through its parent's imports (`use super::*`) depends on
/// that file all the same; a visibility path (`pub(in …)`) names nothing.
#[test]
fn a_glob_of_the_parent_carries_the_parents_imports() {
    let src = |rel: &str, text: &str| (rel.to_string(), text.to_string());
    let planted = [
        src(
            "core/mod.rs",
            "pub mod model;\npub mod scheduler;\npub mod time;\n",
        ),
        src("core/model.rs", "pub struct Chat;\npub struct ChatId;\n"),
        src("core/time.rs", "pub fn now() {}\n"),
        src(
            "core/scheduler.rs",
            "mod finish;\nuse crate::core::model::{Chat, ChatId};\n\
             pub(in crate::core::time) fn s() {}\n",
        ),
        src(
            "core/scheduler/finish.rs",
            "use super::*;\nfn f(c: ChatId) {}\n",
        ),
    ];
    let edges = file_edges(&planted);
    let found: Vec<String> = edges
        .iter()
        .map(|((a, b), (line, what))| format!("{a}:{line} → {b}: {what}"))
        .collect();
    assert_eq!(
        found,
        vec![
            "core/scheduler.rs:2 → core/model.rs: `crate::core::model::Chat`",
            "core/scheduler/finish.rs:1 → core/model.rs: `super::*` (`ChatId`: \
             `crate::core::model::ChatId`)",
        ]
    );
}
