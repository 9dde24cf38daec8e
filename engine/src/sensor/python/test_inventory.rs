//! The tests a pytest file defines, read with tree-sitter's Python
//! grammar, for [`crate::sensor::test_inventory`]: in a file pytest
//! collects by default (`test_*.py`, `*_test.py`), every `test*` function
//! at module level and every `test*` method of a `Test*` class, named as
//! pytest's node id is below its file (`TestMore::test_neg`), with what
//! switches it off: a decorator naming `skip`, `xfail` or
//! `expectedFailure` (`@pytest.mark.skip`, `@pytest.mark.skipif(..)`,
//! `@pytest.mark.xfail`, `@unittest.skip(..)`), on it or its class; a call
//! in its body that skips it (`pytest.skip(..)`, `pytest.xfail(..)`,
//! `pytest.importorskip(..)`, `self.skipTest(..)`); and, for every test of
//! the file, a module-level `pytestmark`, `__test__` or
//! `pytest.skip(.., allow_module_level=True)`.

use std::collections::BTreeSet;

use tree_sitter::{Node, Parser};

use crate::sensor::file_tests::FileTests;

/// Whether pytest collects `path` by its default rules.
pub fn is_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.ends_with(".py") && (name.starts_with("test_") || name.ends_with("_test.py"))
}

/// The tests `text` defines; `None` when it does not parse.
pub fn inventory(text: &str) -> Option<FileTests> {
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_python::LANGUAGE.into())
        .ok()?;
    let tree = parser.parse(text, None)?;
    let root = tree.root_node();
    if root.has_error() {
        return None;
    }
    let source = text.as_bytes();
    let mut file_marks = BTreeSet::new();
    let mut cursor = root.walk();
    for statement in root.named_children(&mut cursor) {
        if matches!(statement.kind(), "expression_statement") {
            let said = node_text(statement, source);
            let module_level = ["pytestmark", "__test__", "allow_module_level"];
            if module_level.iter().any(|word| said.contains(word)) {
                file_marks.insert(format!("`{}`", fold(said)));
            }
        }
    }
    let mut tests = FileTests::default();
    let mut cursor = root.walk();
    for statement in root.named_children(&mut cursor) {
        let (definition, decorators) = unwrap_decorated(statement, source);
        let Some(name) = definition
            .child_by_field_name("name")
            .map(|n| node_text(n, source))
        else {
            continue;
        };
        match definition.kind() {
            "function_definition" if name.starts_with("test") => {
                let mut marks = file_marks.clone();
                marks.extend(decorators);
                marks.extend(skips_in_body(definition, source));
                tests.add(name.to_owned(), marks);
            }
            "class_definition" if name.starts_with("Test") => {
                let Some(body) = definition.child_by_field_name("body") else {
                    continue;
                };
                let mut inner = body.walk();
                for member in body.named_children(&mut inner) {
                    let (method, own) = unwrap_decorated(member, source);
                    let Some(method_name) = method
                        .child_by_field_name("name")
                        .map(|n| node_text(n, source))
                    else {
                        continue;
                    };
                    if method.kind() != "function_definition" || !method_name.starts_with("test") {
                        continue;
                    }
                    let mut marks = file_marks.clone();
                    marks.extend(decorators.iter().cloned());
                    marks.extend(own);
                    marks.extend(skips_in_body(method, source));
                    tests.add(format!("{name}::{method_name}"), marks);
                }
            }
            _ => {}
        }
    }
    Some(tests)
}

/// The definition inside a decorated one, and its decorators that switch
/// a test off.
fn unwrap_decorated<'t>(node: Node<'t>, source: &[u8]) -> (Node<'t>, BTreeSet<String>) {
    if node.kind() != "decorated_definition" {
        return (node, BTreeSet::new());
    }
    let mut marks = BTreeSet::new();
    let mut cursor = node.walk();
    for decorator in node.named_children(&mut cursor) {
        if decorator.kind() == "decorator" {
            let said = node_text(decorator, source);
            if ["skip", "xfail", "expectedFailure"]
                .iter()
                .any(|word| said.contains(word))
            {
                marks.insert(format!("`{}`", fold(said)));
            }
        }
    }
    let definition = node.child_by_field_name("definition").unwrap_or(node);
    (definition, marks)
}

/// The calls in a test's body that skip or expect it to fail.
fn skips_in_body(definition: Node<'_>, source: &[u8]) -> BTreeSet<String> {
    let mut marks = BTreeSet::new();
    let Some(body) = definition.child_by_field_name("body") else {
        return marks;
    };
    let mut stack = vec![body];
    while let Some(node) = stack.pop() {
        if node.kind() == "call"
            && let Some(function) = node.child_by_field_name("function")
        {
            let callee = node_text(function, source);
            let last = callee.rsplit('.').next().unwrap_or(callee);
            if matches!(last, "skip" | "xfail" | "importorskip" | "skipTest") {
                marks.insert(format!("`{}(..)`", fold(callee)));
            }
        }
        let mut cursor = node.walk();
        stack.extend(node.named_children(&mut cursor));
    }
    marks
}

fn node_text<'s>(node: Node<'_>, source: &'s [u8]) -> &'s str {
    std::str::from_utf8(&source[node.byte_range()]).unwrap_or_default()
}

/// Whitespace folded, so a reformatted mark is the same mark.
fn fold(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TESTS: &str = "import pytest\n\
        \n\
        def test_adds():\n    assert 1 + 1 == 2\n\
        \n\
        class TestMore:\n    def test_neg(self):\n        assert -1 < 0\n\n    def helper(self):\n        pass\n\
        \n\
        def helper():\n    pass\n";

    #[test]
    fn functions_and_class_methods_are_named_as_below_their_node_id() {
        let tests = inventory(TESTS).unwrap().tests;
        let names: Vec<&str> = tests.keys().map(String::as_str).collect();
        assert_eq!(names, ["TestMore::test_neg", "test_adds"]);
        assert!(tests.values().all(BTreeSet::is_empty));
        assert!(is_test_file("tests/test_calc.py") && is_test_file("calc_test.py"));
        assert!(!is_test_file("calc/__init__.py") && !is_test_file("tests/conftest.py"));
    }

    #[test]
    fn skip_and_xfail_marks_calls_and_module_marks_switch_tests_off() {
        let marked = TESTS.replace(
            "def test_adds",
            "@pytest.mark.xfail(reason=\"later\")\ndef test_adds",
        );
        let tests = inventory(&marked).unwrap().tests;
        assert!(
            tests["test_adds"].contains("`@pytest.mark.xfail(reason=\"later\")`"),
            "{tests:?}"
        );
        let class_marked = TESTS.replace("class TestMore", "@pytest.mark.skip\nclass TestMore");
        let tests = inventory(&class_marked).unwrap().tests;
        assert!(!tests["TestMore::test_neg"].is_empty(), "{tests:?}");
        let called = TESTS.replace("assert -1 < 0", "pytest.skip(\"not now\")");
        let tests = inventory(&called).unwrap().tests;
        assert!(
            tests["TestMore::test_neg"].contains("`pytest.skip(..)`"),
            "{tests:?}"
        );
        let module = format!("{TESTS}\npytestmark = pytest.mark.skip\n");
        let tests = inventory(&module).unwrap().tests;
        assert!(tests.values().all(|marks| !marks.is_empty()), "{tests:?}");
        assert!(inventory("def test_(:\n").is_none());
    }
}
