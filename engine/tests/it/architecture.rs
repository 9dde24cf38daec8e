//! The engine's module graph, read from its source: no import cycle
//! between top-level modules, only `lib.rs` imports the front door, and in
//! the repair runtime only the metered effects copy, measure or reserve.
//!
//! A module is the first path segment after `crate::` (`crate::repair::x`
//! is `repair`); a file belongs to the top-level module it sits in
//! (`src/repair/step.rs` is `repair`). Comments and string literals are
//! skipped, so a path quoted in a test fixture is not an edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level module → the top-level modules its files name through `crate::`.
type Graph = BTreeMap<String, BTreeSet<String>>;

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The file's code with comments and the contents of string and char
/// literals blanked out.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (next == Some('#') || next == Some('"')) && !ident_before(&chars, i) {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (0..hashes).all(|k| chars.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            i = j;
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A char literal ('x', '\n', '"'), or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push_str("' '");
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

fn ident_at(code: &str) -> &str {
    let end = code
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(code.len());
    &code[..end]
}

/// The first segments of the paths a `crate::{a, b::c}` group names.
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut start = true;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => start = true,
            c if start && depth == 0 && !c.is_whitespace() => {
                heads.push(ident_at(&group[i..]).to_owned());
                start = false;
            }
            _ => {}
        }
    }
    heads
}

/// The top-level modules `code` names through `crate::`.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut modules = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    depth == 0
                })
                .map_or(group.len(), |(i, _)| i);
            modules.extend(group_heads(&group[..end]));
        } else {
            modules.insert(ident_at(rest).to_owned());
        }
    }
    modules.retain(|m| !m.is_empty() && m != "self");
    modules
}

fn engine_graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    source_files(&src, &mut files);
    let mut graph = Graph::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let first = relative.components().next().unwrap().as_os_str();
        let module = Path::new(first)
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let code = code_only(&std::fs::read_to_string(file).unwrap());
        graph
            .entry(module.clone())
            .or_default()
            .extend(crate_paths(&code).into_iter().filter(|m| *m != module));
    }
    // Only edges between the crate's own modules (not `crate::SomeReexport`).
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for deps in graph.values_mut() {
        deps.retain(|m| modules.contains(m));
    }
    graph
}

/// A cycle in `graph`, as the modules along it, if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        graph: &Graph,
        node: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for dep in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(graph, dep, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(graph, node, &mut Vec::new(), &mut done))
}

#[test]
fn the_engine_modules_import_each_other_without_a_cycle() {
    let graph = engine_graph();
    assert!(graph.contains_key("repair") && graph["repair"].contains("search"));
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "import cycle between engine modules: {}",
            cycle.join(" -> ")
        );
    }
}

#[test]
fn only_lib_imports_the_front_door() {
    let graph = engine_graph();
    let importers: Vec<&String> = graph
        .iter()
        .filter(|(module, deps)| *module != "lib" && deps.contains("api"))
        .map(|(module, _)| module)
        .collect();
    assert!(
        importers.is_empty(),
        "only lib.rs may import `api`, the front door; imported by: {importers:?}"
    );
}

#[test]
fn the_reader_sees_paths_in_code_and_groups_not_in_comments_or_strings() {
    let code = code_only(
        "use crate::{a::X, b};\n// crate::c\nlet s = \"crate::d\"; let r = r#\"crate::e\"#;\n\
         fn f<'x>(c: char) -> bool { c == '\"' && crate::g::h() }\n/* crate::i */",
    );
    let found: Vec<String> = crate_paths(&code).into_iter().collect();
    assert_eq!(found, ["a", "b", "g"]);
    let cyclic = Graph::from([
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]);
    assert_eq!(find_cycle(&cyclic).unwrap(), ["a", "b", "a"]);
}

/// `repair/effects.rs` is the only runtime code that copies into a slot,
/// runs a sensor or moves the budget: no other file of `repair/` names the
/// copy, the sensor run, the measurement function or a reservation.
#[test]
fn only_the_metered_effects_copy_measure_or_reserve_in_the_runtime() {
    let repair = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/repair");
    let mut files = Vec::new();
    source_files(&repair, &mut files);
    assert!(files.iter().any(|f| f.ends_with("effects.rs")));
    let forbidden = [
        "materialize",
        "SensorRun",
        "Reservation",
        ".reserve(",
        ".settle(",
        "measure::measure",
    ];
    let mut offences = Vec::new();
    for file in files.iter().filter(|f| !f.ends_with("effects.rs")) {
        let code = code_only(&std::fs::read_to_string(file).unwrap());
        for token in forbidden {
            if code.contains(token) {
                offences.push(format!("{}: `{token}`", file.display()));
            }
        }
        // `use crate::measure::{Measurement, measure}` would bring the
        // unmetered measurement in under its short name.
        for import in code.split("use crate::measure::").skip(1) {
            let named = &import[..import.find(';').unwrap_or(import.len())];
            if named
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|name| name == "measure")
            {
                offences.push(format!("{}: imports `measure`", file.display()));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "only repair/effects.rs may copy, measure or reserve: {offences:?}"
    );
}
