//! The source reader behind the crates' architecture tests: a crate's
//! `src/` read as text, and the import graphs between its modules and
//! between its files, with the circles in them.
//!
//! * [`code_only`] blanks comments and the contents of string and char
//!   literals, so a path quoted in a fixture or a doc is not an edge.
//! * [`module_graph`]: each top-level module (`repair` for
//!   `src/repair/step.rs`, `lib` for `src/lib.rs`) → the top-level modules
//!   its files name through `crate::`.
//! * [`file_graph`]: each product file (`repair::step`, `crate` for the
//!   root `lib.rs` or `main.rs`) → the files it imports, through `crate::`,
//!   `super::`, `self::` or a child module, following `pub use` re-exports
//!   to the file an item comes from; test-only files and items left out.
//! * [`find_cycle`] finds a cycle in a graph, [`circles`] one cycle through
//!   each set of files that import each other.
//!
//! It reads text, not syntax: enough for the code of this workspace, which
//! its own tests below pin down on synthetic input.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module or file → the modules or files it imports.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// The `.rs` files below `dir`, at any depth.
pub fn source_files(dir: &Path) -> Vec<PathBuf> {
    fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                collect(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    collect(dir, &mut out);
    out.sort();
    out
}

/// The file's code with comments and the contents of string and char
/// literals blanked out.
pub fn code_only(text: &str) -> String {
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

/// Each top-level module of `src` (a crate's `src/` directory; `lib` and
/// `main` for the root files) → the other top-level modules its files name
/// through `crate::`.
pub fn module_graph(src: &Path) -> Graph {
    let mut graph = Graph::new();
    for file in source_files(src) {
        let relative = file.strip_prefix(src).unwrap();
        let first = relative.components().next().unwrap().as_os_str();
        let module = Path::new(first)
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let code = code_only(&std::fs::read_to_string(&file).unwrap());
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
pub fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
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

/// A module path from the crate root: `["repair", "step"]`; the root is `[]`.
type ModulePath = Vec<String>;

/// The module a file of `src/` is: `repair/step.rs` is `repair::step`, and
/// `repair/mod.rs` (like `promote.rs` beside `promote/`) is `repair`. The
/// root is `lib.rs` or a binary's `main.rs` (a crate with both, like a
/// library and its command line, reads them as one root).
fn file_module(relative: &Path) -> ModulePath {
    let mut module: ModulePath = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(module.last().map(String::as_str), Some("mod" | "lib")) || module == ["main"] {
        module.pop();
    }
    module
}

/// A module as the graph and its failures name it: `repair::step`, and
/// `crate` for the root.
fn module_name(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_owned()
    } else {
        module.join("::")
    }
}

/// The child modules `text` (a whole file) declares `#[cfg(test)]`, as the
/// files they are: `#[cfg(test)] mod tests;` next to `runner.rs` is
/// `runner/tests.rs`, `#[cfg(test)] #[path = "tsc_fuzz.rs"] mod fuzz_tests;`
/// is `tsc_fuzz.rs` beside the file. Read from the raw text because
/// `code_only` blanks the `#[path]` literal.
fn test_children(file: &Path, text: &str) -> Vec<PathBuf> {
    let dir = file.parent().unwrap();
    let stem = file.file_stem().unwrap().to_string_lossy();
    let children_dir = if matches!(&*stem, "mod" | "lib" | "main") {
        dir.to_path_buf()
    } else {
        dir.join(&*stem)
    };
    let mut found = Vec::new();
    for (at, _) in text.match_indices("#[cfg(") {
        let Some(cfg) = test_only_cfg(&text[at..]) else {
            continue;
        };
        let mut rest = text[at + cfg..].trim_start();
        let mut path_attribute = None;
        while let Some(attribute) = rest.strip_prefix("#[") {
            let end = attribute.find(']').unwrap();
            if let Some(literal) = attribute[..end].strip_prefix("path = \"") {
                path_attribute = Some(dir.join(literal.trim_end_matches('"')));
            }
            rest = attribute[end + 1..].trim_start();
        }
        for visibility in ["pub(crate) ", "pub(super) ", "pub "] {
            rest = rest.strip_prefix(visibility).unwrap_or(rest);
        }
        let Some(declared) = rest.strip_prefix("mod ") else {
            continue;
        };
        let name = ident_at(declared);
        if !declared[name.len()..].trim_start().starts_with(';') {
            continue;
        }
        found.push(path_attribute.unwrap_or_else(|| {
            let single = children_dir.join(format!("{name}.rs"));
            if single.exists() {
                single
            } else {
                children_dir.join(name).join("mod.rs")
            }
        }));
    }
    found
}

/// The byte length of the `#[cfg(..)]` attribute at the start of `text`
/// when it compiles its item for tests only: `cfg(test)` or
/// `cfg(all(test, unix))`.
fn test_only_cfg(text: &str) -> Option<usize> {
    let predicate = text.strip_prefix("#[cfg(")?;
    let mut depth = 1;
    let end = predicate.char_indices().find_map(|(i, c)| {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        (depth == 0).then_some(i)
    })?;
    let predicate = &predicate[..end];
    let all = predicate
        .strip_prefix("all(")
        .and_then(|args| args.strip_suffix(')'));
    let for_tests =
        predicate == "test" || all.is_some_and(|args| args.split(',').any(|a| a.trim() == "test"));
    for_tests.then_some("#[cfg(".len() + end + ")]".len())
}

/// `code` with every `#[cfg(test)]` item (an inline test module, a
/// test-only `mod x;` or `use`) blanked, so test helpers are no edges.
fn without_test_items(code: &str) -> String {
    let mut out = code.to_owned();
    let mut from = 0;
    while let Some(found) = out[from..].find("#[cfg(") {
        let start = from + found;
        if test_only_cfg(&out[start..]).is_none() {
            from = start + 1;
            continue;
        }
        let mut depth = 0;
        let mut end = out.len();
        let mut inside_attribute = 0;
        for (i, c) in out[start..].char_indices() {
            match c {
                '[' => inside_attribute += 1,
                ']' => inside_attribute -= 1,
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = start + i + 1;
                        break;
                    }
                }
                ';' if depth == 0 && inside_attribute == 0 => {
                    end = start + i + 1;
                    break;
                }
                _ => {}
            }
        }
        let blank: String = out[start..end]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        out.replace_range(start..end, &blank);
        from = start + blank.len();
    }
    out
}

/// One path named in code, from the crate root, and the name it binds
/// (`a::B as C` binds `C`).
#[derive(Debug, PartialEq)]
struct NamedPath {
    segments: ModulePath,
    binds: String,
}

/// The paths written at the start of `code` (`b::C`, `{b, c::D as E}`),
/// each after `prefix`. `self` in a group names the group's module.
fn paths_at(code: &str, prefix: &[String]) -> Vec<NamedPath> {
    let mut segments = prefix.to_vec();
    let mut rest = code;
    loop {
        rest = rest.trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut start = 0;
            let mut found = Vec::new();
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' | ',' if depth == 1 => {
                        found.extend(paths_at(&group[start..i], &segments));
                        start = i + 1;
                        if c == '}' {
                            break;
                        }
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            found.retain(|p| p.segments.len() > segments.len() || p.binds != "*");
            return found;
        }
        let name = ident_at(rest);
        if name.is_empty() || name == "self" {
            let binds = if rest.starts_with('*') {
                "*".to_owned()
            } else {
                segments.last().cloned().unwrap_or_default()
            };
            return vec![NamedPath { segments, binds }];
        }
        rest = &rest[name.len()..];
        segments.push(name.to_owned());
        let after = rest.trim_start();
        if let Some(more) = after.strip_prefix("::") {
            rest = more;
            continue;
        }
        let binds = after
            .strip_prefix("as")
            .filter(|alias| alias.starts_with(char::is_whitespace))
            .map_or(name, |alias| ident_at(alias.trim_start()));
        return vec![NamedPath {
            segments,
            binds: binds.to_owned(),
        }];
    }
}

/// The paths `code`, the file of module `module`, names from `crate::`,
/// `super::`, `self::` or one of its own child modules, each with the byte
/// offset it starts at.
fn module_paths(code: &str, module: &[String]) -> Vec<(usize, NamedPath)> {
    let children = declared_children(code);
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while at < code.len() {
        let is_start = (bytes[at].is_ascii_alphabetic() || bytes[at] == b'_')
            && (at == 0
                || !(bytes[at - 1].is_ascii_alphanumeric()
                    || matches!(bytes[at - 1], b'_' | b'$' | b':' | b'.')));
        if !is_start {
            at += 1;
            continue;
        }
        let name = ident_at(&code[at..]);
        let mut end = at + name.len();
        // `pub(in crate::sensor)` is a visibility, not a use.
        let visibility = code[..at]
            .trim_end()
            .strip_suffix("in")
            .is_some_and(|before| before.trim_end().ends_with('('));
        let mut base = match name {
            _ if visibility => None,
            "crate" => Some(Vec::new()),
            "self" => Some(module.to_vec()),
            "super" => Some(module[..module.len().saturating_sub(1)].to_vec()),
            child if children.contains(child) => {
                let mut path = module.to_vec();
                path.push(child.to_owned());
                Some(path)
            }
            _ => None,
        };
        // `super::super::x` climbs once per `super`.
        while name == "super" && code[end..].starts_with("::super::") {
            if let Some(path) = base.as_mut() {
                path.pop();
            }
            end += "::super".len();
        }
        if let (Some(base), Some(rest)) = (base.take(), code[end..].strip_prefix("::")) {
            found.extend(paths_at(rest, &base).into_iter().map(|path| (at, path)));
        }
        at = end;
    }
    found
}

/// The modules `code` declares with `mod x;` or `mod x { .. }`.
fn declared_children(code: &str) -> BTreeSet<String> {
    code.match_indices("mod ")
        .filter(|&(at, _)| {
            !code[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
        .map(|(at, _)| ident_at(code[at + "mod ".len()..].trim_start()).to_owned())
        .filter(|name| !name.is_empty())
        .collect()
}

/// Whether the path starting at `at` is what a `pub use` re-exports: the
/// module's surface, not something the module itself uses.
fn is_reexport(code: &str, at: usize) -> bool {
    let Some(before) = code[..at].trim_end().strip_suffix("use") else {
        return false;
    };
    let statement = &before[before.rfind([';', '{', '}', ']']).map_or(0, |i| i + 1)..];
    statement.trim_start().starts_with("pub")
}

/// How often `code` names the item `word`: the word on its own, not a
/// module of that name (`mod word`), a definition (`fn word`) or another
/// type's member (`.word`, `Type::word`).
fn word_count(code: &str, word: &str) -> usize {
    code.match_indices(word)
        .filter(|&(at, _)| {
            let is_ident = |c: char| c.is_alphanumeric() || c == '_';
            let (before, after) = (&code[..at], &code[at + word.len()..]);
            !before.chars().next_back().is_some_and(is_ident)
                && !after.chars().next().is_some_and(is_ident)
                && ![".", "::", "mod ", "fn "]
                    .iter()
                    .any(|prefix| before.ends_with(prefix))
        })
        .count()
}

/// The file `path` leads to: the longest prefix of it that is a file's
/// module, following a `pub use` re-export to the file it re-exports from
/// (`reexports` maps `repair::Session` to `repair::session::Session`).
fn resolve(
    path: &[String],
    files: &BTreeSet<ModulePath>,
    reexports: &BTreeMap<ModulePath, ModulePath>,
) -> ModulePath {
    let mut path = path.to_vec();
    // A bound on re-exports of re-exports (and on `pub use x::{self}`).
    for _ in 0..8 {
        let file = (0..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|prefix| files.contains(prefix))
            .unwrap_or_default();
        let Some(target) = path.get(file.len()).and_then(|name| {
            reexports.get(&[file.as_slice(), std::slice::from_ref(name)].concat())
        }) else {
            return file;
        };
        path = [target.as_slice(), &path[file.len() + 1..]].concat();
    }
    path
}

/// Each product file of `src` (as its module, `crate` for the root) → the
/// files it names through a `use` or a path in its code. A `mod x;`
/// declaration and a `pub use x::Y;` re-export are the module's surface,
/// not imports; a path that lands on a re-export leads on to the file the
/// item comes from. Files compiled only for tests, and `#[cfg(test)]`
/// items, are left out.
pub fn file_graph(src: &Path) -> Graph {
    let texts: BTreeMap<PathBuf, String> = source_files(src)
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).unwrap();
            (file, text)
        })
        .collect();
    let test_files: Vec<PathBuf> = texts
        .iter()
        .flat_map(|(file, text)| test_children(file, text))
        .collect();
    let is_test = |file: &Path| {
        test_files.iter().any(|test| {
            file == test
                || file.starts_with(test.with_extension(""))
                || (test.ends_with("mod.rs") && file.starts_with(test.parent().unwrap()))
        })
    };
    let mut reexports = BTreeMap::new();
    let mut uses = Vec::new();
    for (file, text) in texts.iter().filter(|(file, _)| !is_test(file)) {
        let module = file_module(file.strip_prefix(src).unwrap());
        let code = without_test_items(&code_only(text));
        for (at, path) in module_paths(&code, &module) {
            if !is_reexport(&code, at) {
                uses.push((module.clone(), path.segments));
                continue;
            }
            // A module that also uses what it re-exports imports it.
            let statement = &code[code[..at].rfind(';').map_or(0, |i| i + 1)
                ..code[at..].find(';').map_or(code.len(), |i| at + i)];
            if word_count(&code, &path.binds) > word_count(statement, &path.binds) {
                uses.push((module.clone(), path.segments.clone()));
            }
            let name = [module.as_slice(), std::slice::from_ref(&path.binds)].concat();
            reexports.insert(name, path.segments);
        }
    }
    let files: BTreeSet<ModulePath> = texts
        .keys()
        .filter(|file| !is_test(file))
        .map(|file| file_module(file.strip_prefix(src).unwrap()))
        .collect();
    let mut graph: Graph = files
        .iter()
        .map(|module| (module_name(module), BTreeSet::new()))
        .collect();
    for (module, path) in uses {
        let target = resolve(&path, &files, &reexports);
        if target != module && files.contains(&target) {
            graph
                .get_mut(&module_name(&module))
                .unwrap()
                .insert(module_name(&target));
        }
    }
    graph
}

/// One cycle through each set of files (or modules) of `graph` that all
/// reach each other, as the files along it: empty when `graph` has no
/// cycle.
pub fn circles(graph: &Graph) -> Vec<Vec<String>> {
    circle_sets(graph)
        .iter()
        .map(|files| {
            let within: Graph = files
                .iter()
                .map(|file| (file.clone(), &graph[file] & files))
                .collect();
            find_cycle(&within).expect("a set that reaches itself has a cycle")
        })
        .collect()
}

/// The sets of nodes of `graph` that each reach all the others: every set
/// holds one circle or more.
fn circle_sets(graph: &Graph) -> BTreeSet<BTreeSet<String>> {
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut next: Vec<&String> = graph[from].iter().collect();
        while let Some(node) = next.pop() {
            if seen.insert(node.clone()) {
                next.extend(graph.get(node).into_iter().flatten());
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|node| (node, reach(node))).collect();
    graph
        .keys()
        .map(|node| {
            reaches[node]
                .iter()
                .filter(|other| reaches.get(other).is_some_and(|r| r.contains(node)))
                .cloned()
                .collect::<BTreeSet<String>>()
        })
        .filter(|circle| circle.len() > 1)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_reader_resolves_paths_to_files_through_reexports() {
        let module = |path: &str| -> ModulePath {
            path.split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let code = "mod c;\nuse super::{X, b::{self, Y as Z}};\npub use c::W;\n\
                    pub(in crate::a) fn f() { crate::d::e::g(); self::h(); super::super::k::L; }";
        let found: Vec<(ModulePath, String)> = module_paths(code, &module("a::b"))
            .into_iter()
            .map(|(_, p)| (p.segments, p.binds))
            .collect();
        let expected = [
            ("a::X", "X"),
            ("a::b", "b"),
            ("a::b::Y", "Z"),
            ("a::b::c::W", "W"),
            ("d::e::g", "g"),
            ("a::b::h", "h"),
            ("k::L", "L"),
        ]
        .map(|(path, binds)| (module(path), binds.to_owned()));
        assert_eq!(found, expected);
        let reexport_at = code.find("c::W").unwrap();
        assert!(is_reexport(code, reexport_at));
        assert!(!is_reexport(code, code.find("super::{").unwrap()));

        let files = BTreeSet::from(["", "a", "a::b", "a::b::c", "d"].map(module));
        let reexports = BTreeMap::from([
            (module("a::W"), module("a::b::W")),
            (module("a::b::W"), module("a::b::c::W")),
        ]);
        let at = |path: &str| module_name(&resolve(&module(path), &files, &reexports));
        assert_eq!(at("a::b::c::f"), "a::b::c");
        assert_eq!(at("a::V"), "a");
        assert_eq!(at("a::W"), "a::b::c");
        assert_eq!(at("d::e::g"), "d");
        assert_eq!(at("Error"), "crate");
    }

    /// A parent that declares its children and re-exports one of their items
    /// is no cycle with them; a child that uses an item the parent defines
    /// while the parent uses the child is one.
    #[test]
    fn a_parent_is_in_a_cycle_with_a_child_only_when_each_uses_the_other() {
        let write = |files: &[(&str, &str)]| {
            let dir = tempfile::tempdir().unwrap();
            let src = dir.path();
            for (path, text) in files {
                let path = src.join(path);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, text).unwrap();
            }
            file_graph(src)
        };
        let declared = write(&[
            ("lib.rs", "mod p;\npub use p::X;\n"),
            (
                "p/mod.rs",
                "mod x;\nmod y;\n#[cfg(test)]\nmod tests;\npub use x::X;\n\
                 #[cfg(all(unix, test))]\nmod unix_tests { use super::y::*; }\n",
            ),
            ("p/x.rs", "pub struct X;\n"),
            ("p/y.rs", "use super::X;\nuse crate::X as Again;\n"),
            ("p/tests.rs", "use super::y::*;\nuse crate::p::x;\n"),
        ]);
        assert_eq!(find_cycle(&declared), None, "{declared:?}");
        assert_eq!(declared["p::y"], BTreeSet::from(["p::x".to_owned()]));
        assert!(!declared.contains_key("p::tests"));

        let cyclic = write(&[
            ("lib.rs", "mod p;\n"),
            ("p/mod.rs", "mod x;\nfn helper() {}\nfn f() { x::X; }\n"),
            ("p/x.rs", "use super::helper;\npub struct X;\n"),
        ]);
        assert_eq!(find_cycle(&cyclic).unwrap(), ["p", "p::x", "p"]);
        assert_eq!(circles(&cyclic), [["p", "p::x", "p"]]);

        let binary = write(&[
            (
                "main.rs",
                "mod a;\nfn helper() {}\nfn main() { a::run(); }\n",
            ),
            ("a.rs", "pub fn run() { crate::helper(); }\n"),
        ]);
        assert_eq!(circles(&binary), [["a", "crate", "a"]]);
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
}
