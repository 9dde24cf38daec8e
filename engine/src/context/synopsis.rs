//! Synopsis pages from syntax: the outline of a source file (its items,
//! their signatures and line ranges), parsed with tree-sitter's Rust,
//! Python and TypeScript grammars.
//!
//! A file too large to stay resident reaches the model as its outline plus
//! the lines it asked for (`read_file` calls [`outline`]); the full text
//! stays readable range by range. The outline is a pure function of the
//! path's extension and the text, so the page it lands in is as
//! deterministic and content-addressed as any other. It never reads a file
//! and never guesses: a language without a grammar, or text that does not
//! parse to any item, has no outline.

use tree_sitter::{Language, Node, Parser};
use trellis_core::text;

/// Files larger than this are answered with an outline and a range.
pub const LARGE_FILE_BYTES: usize = 8 * 1024;

/// The lines a large file shows when no range is asked for.
pub const HEAD_LINES: u64 = 40;

/// Most items an outline lists; the rest are counted.
const MAX_ITEMS: usize = 200;

/// Longest signature shown, in bytes.
const MAX_SIGNATURE: usize = 120;

/// One item of an outline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The grammar's node kind, e.g. `function_item`.
    pub kind: &'static str,
    /// The item's first line, trimmed and bounded.
    pub signature: String,
    /// 1-based, inclusive.
    pub lines: (usize, usize),
    /// 0 for top-level items, 1 inside an impl, class or module.
    pub depth: usize,
}

/// The grammar for `path`'s extension and the node kinds that are items
/// and that contain items there.
fn grammar(path: &str) -> Option<(Language, &'static [&'static str], &'static [&'static str])> {
    const RUST: &[&str] = &[
        "function_item",
        "function_signature_item",
        "struct_item",
        "enum_item",
        "union_item",
        "trait_item",
        "impl_item",
        "mod_item",
        "const_item",
        "static_item",
        "type_item",
        "macro_definition",
    ];
    const RUST_CONTAINERS: &[&str] = &["impl_item", "trait_item", "mod_item"];
    const PYTHON: &[&str] = &["function_definition", "class_definition"];
    const PYTHON_CONTAINERS: &[&str] = &["class_definition"];
    const TS: &[&str] = &[
        "function_declaration",
        "generator_function_declaration",
        "class_declaration",
        "abstract_class_declaration",
        "interface_declaration",
        "type_alias_declaration",
        "enum_declaration",
        "method_definition",
        "lexical_declaration",
        "internal_module",
    ];
    const TS_CONTAINERS: &[&str] = &[
        "class_declaration",
        "abstract_class_declaration",
        "internal_module",
    ];
    let ext = path.rsplit_once('.').map(|(_, e)| e)?;
    Some(match ext {
        "rs" => (tree_sitter_rust::LANGUAGE.into(), RUST, RUST_CONTAINERS),
        "py" | "pyi" => (
            tree_sitter_python::LANGUAGE.into(),
            PYTHON,
            PYTHON_CONTAINERS,
        ),
        "ts" | "mts" | "cts" => (
            tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            TS,
            TS_CONTAINERS,
        ),
        "tsx" => (
            tree_sitter_typescript::LANGUAGE_TSX.into(),
            TS,
            TS_CONTAINERS,
        ),
        _ => return None,
    })
}

/// The items of `text`, a file at `path`, in source order; `None` without
/// a grammar for the path or without any item.
pub fn outline(path: &str, text: &str) -> Option<Vec<Item>> {
    let (language, items, containers) = grammar(path)?;
    let mut parser = Parser::new();
    parser.set_language(&language).ok()?;
    let tree = parser.parse(text, None)?;
    let mut out = Vec::new();
    collect(tree.root_node(), text, items, containers, 0, &mut out);
    (!out.is_empty()).then_some(out)
}

fn collect(
    node: Node<'_>,
    text: &str,
    items: &[&'static str],
    containers: &[&str],
    depth: usize,
    out: &mut Vec<Item>,
) {
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        match child.kind() {
            // `export ...`: the item inside, shown with its `export`.
            "export_statement" => {
                let mut inner = child.walk();
                for item in child.named_children(&mut inner) {
                    push(item, child, text, items, containers, depth, out);
                }
            }
            // Decorators: the definition, shown by its own first line.
            "decorated_definition" => {
                if let Some(item) = child.child_by_field_name("definition") {
                    push(item, item, text, items, containers, depth, out);
                }
            }
            _ => push(child, child, text, items, containers, depth, out),
        }
    }
}

/// Adds `node` when it is an item, shown as `shown` (itself, or the
/// `export` around it), and the items of its body when it contains some.
fn push(
    node: Node<'_>,
    shown: Node<'_>,
    text: &str,
    items: &[&'static str],
    containers: &[&str],
    depth: usize,
    out: &mut Vec<Item>,
) {
    let Some(kind) = items.iter().find(|k| **k == node.kind()) else {
        return;
    };
    out.push(Item {
        kind,
        signature: signature(&text[shown.byte_range()]),
        lines: (shown.start_position().row + 1, shown.end_position().row + 1),
        depth,
    });
    if depth == 0
        && containers.contains(kind)
        && let Some(body) = node.child_by_field_name("body")
    {
        collect(body, text, items, containers, depth + 1, out);
    }
}

/// The first line of an item, without its opening brace, bounded.
fn signature(item: &str) -> String {
    let line = item.lines().next().unwrap_or_default().trim();
    let line = line.strip_suffix('{').unwrap_or(line).trim_end();
    let bounded = text::head(line, MAX_SIGNATURE);
    if bounded.len() < line.len() {
        format!("{bounded}…")
    } else {
        line.to_owned()
    }
}

/// The outline as text: one item a line, indented by depth, with its lines.
pub fn render(items: &[Item]) -> String {
    let mut out = String::new();
    for item in items.iter().take(MAX_ITEMS) {
        out.push_str(&"  ".repeat(item.depth));
        out.push_str(&format!(
            "{}  [lines {}-{}]\n",
            item.signature, item.lines.0, item.lines.1
        ));
    }
    if items.len() > MAX_ITEMS {
        out.push_str(&format!("… and {} more items\n", items.len() - MAX_ITEMS));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signatures(path: &str, text: &str) -> Vec<(String, (usize, usize), usize)> {
        outline(path, text)
            .unwrap()
            .into_iter()
            .map(|i| (i.signature, i.lines, i.depth))
            .collect()
    }

    #[test]
    fn rust_items_with_their_impl_members() {
        let text = "use std::fmt;\n\npub struct Point {\n    x: i32,\n}\n\nimpl Point {\n    pub fn new(x: i32) -> Point {\n        Point { x }\n    }\n}\n\nfn main() {}\n";
        assert_eq!(
            signatures("src/lib.rs", text),
            [
                ("pub struct Point".to_owned(), (3, 5), 0),
                ("impl Point".to_owned(), (7, 11), 0),
                ("pub fn new(x: i32) -> Point".to_owned(), (8, 10), 1),
                ("fn main() {}".to_owned(), (13, 13), 0),
            ]
        );
    }

    #[test]
    fn python_classes_methods_and_decorated_functions() {
        let text = "import os\n\n@cache\ndef load(path):\n    return 1\n\nclass Store:\n    def get(self, key):\n        return key\n";
        assert_eq!(
            signatures("pkg/store.py", text),
            [
                ("def load(path):".to_owned(), (4, 5), 0),
                ("class Store:".to_owned(), (7, 9), 0),
                ("def get(self, key):".to_owned(), (8, 9), 1),
            ]
        );
    }

    #[test]
    fn typescript_exports_classes_and_interfaces() {
        let text = "export interface Shape {\n  area(): number;\n}\n\nexport class Square {\n  constructor(private side: number) {}\n  area(): number {\n    return this.side ** 2;\n  }\n}\n\nexport function total(shapes: Shape[]): number {\n  return 0;\n}\n";
        let got = signatures("src/shape.ts", text);
        assert_eq!(got[0], ("export interface Shape".to_owned(), (1, 3), 0));
        assert_eq!(got[1], ("export class Square".to_owned(), (5, 10), 0));
        assert!(
            got.iter()
                .any(|(s, l, d)| s == "area(): number" && *l == (7, 9) && *d == 1)
        );
        assert_eq!(
            got.last().unwrap(),
            &(
                "export function total(shapes: Shape[]): number".to_owned(),
                (12, 14),
                0
            )
        );
        assert!(outline("src/app.tsx", "export function App() { return <div/>; }\n").is_some());
    }

    #[test]
    fn no_grammar_or_no_item_is_no_outline_and_outlines_are_deterministic() {
        assert_eq!(outline("notes.txt", "fn main() {}"), None);
        assert_eq!(outline("src/lib.rs", "// only a comment\n"), None);
        let text = "fn a() {}\nfn b() {}\n";
        assert_eq!(outline("a.rs", text), outline("a.rs", text));
        assert_eq!(
            render(&outline("a.rs", text).unwrap()),
            "fn a() {}  [lines 1-1]\nfn b() {}  [lines 2-2]\n"
        );
    }
}
