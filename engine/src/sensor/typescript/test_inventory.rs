//! The tests a test file of Node's runner (or jest, or vitest) defines,
//! read with tree-sitter's TypeScript grammar, for
//! [`crate::sensor::test_inventory`]: every `test(..)`/`it(..)` call whose
//! first argument is a literal name, named by the `describe`/`suite`
//! calls around it (`suite > test`, as the runner names it), with what
//! switches it off: `.skip`, `.todo`, `.skipIf`, `.runIf`, `.fails`,
//! `xit`/`xtest`/`xdescribe`, an options object with `skip`, `todo` (or
//! `only`), a `t.skip()`/`t.todo()` in its body, on it or a suite around
//! it. `.only`, `fit` and `fdescribe` focus a test: every other test of the
//! file is then skipped under jest and vitest (and under Node's runner with
//! `--test-only`).

use std::collections::BTreeSet;

use tree_sitter::{Node, Parser};

use crate::sensor::file_tests::{FOCUS, FileTests};

const TESTS: &[&str] = &["test", "it", "xit", "xtest", "fit"];
const SUITES: &[&str] = &["describe", "suite", "context", "xdescribe", "fdescribe"];

/// Whether `path` is a test file by the runners' usual names: `*.test.*`,
/// `*.spec.*`, `*-test.*`, `*_test.*`, `test-*`, `test.*`, or anything
/// under a `test/`, `tests/` or `__tests__/` directory, in TypeScript or
/// JavaScript.
pub fn is_test_file(path: &str) -> bool {
    const EXTENSIONS: &[&str] = &["ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs"];
    let mut components: Vec<&str> = path.split('/').collect();
    let name = components.pop().unwrap_or(path);
    let Some((stem, extension)) = name.rsplit_once('.') else {
        return false;
    };
    if !EXTENSIONS.contains(&extension) || components.contains(&"node_modules") {
        return false;
    }
    let named = [".test", ".spec", "-test", "_test"]
        .iter()
        .any(|suffix| stem.ends_with(suffix))
        || stem.starts_with("test-")
        || stem == "test";
    named
        || components
            .iter()
            .any(|dir| matches!(*dir, "test" | "tests" | "__tests__"))
}

/// The tests `text` (the file at `path`) defines; `None` when it does not
/// parse.
pub fn inventory(path: &str, text: &str) -> Option<FileTests> {
    let language = if path.ends_with(".tsx") || path.ends_with(".jsx") {
        tree_sitter_typescript::LANGUAGE_TSX
    } else {
        tree_sitter_typescript::LANGUAGE_TYPESCRIPT
    };
    let mut parser = Parser::new();
    parser.set_language(&language.into()).ok()?;
    let tree = parser.parse(text, None)?;
    if tree.root_node().has_error() {
        return None;
    }
    let mut tests = FileTests::default();
    visit(
        tree.root_node(),
        text.as_bytes(),
        &[],
        &BTreeSet::new(),
        &mut tests,
    );
    tests.focused = tests.tests.values().any(|marks| marks.contains(FOCUS));
    Some(tests)
}

fn visit(
    node: Node<'_>,
    source: &[u8],
    suites: &[String],
    around: &BTreeSet<String>,
    out: &mut FileTests,
) {
    if node.kind() == "call_expression"
        && let Some(call) = TestCall::read(node, source)
    {
        let mut marks = around.clone();
        marks.extend(call.marks);
        let mut path = suites.to_vec();
        path.push(call.name);
        if call.is_suite {
            if let Some(arguments) = node.child_by_field_name("arguments") {
                visit(arguments, source, &path, &marks, out);
            }
        } else {
            out.add(path.join(" > "), marks);
        }
        return;
    }
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        visit(child, source, suites, around, out);
    }
}

/// A `test(..)`, `it.skip(..)`, `describe(..)` call with a literal name.
struct TestCall {
    name: String,
    is_suite: bool,
    marks: BTreeSet<String>,
}

impl TestCall {
    fn read(call: Node<'_>, source: &[u8]) -> Option<TestCall> {
        let (base, chain) = callee(call.child_by_field_name("function")?, source)?;
        let is_suite = SUITES.contains(&base);
        if !is_suite && !TESTS.contains(&base) {
            return None;
        }
        let arguments = call.child_by_field_name("arguments")?;
        let mut cursor = arguments.walk();
        let arguments: Vec<Node<'_>> = arguments.named_children(&mut cursor).collect();
        let name = literal(*arguments.first()?, source)?;
        let mut marks = BTreeSet::new();
        match base {
            "xit" | "xtest" | "xdescribe" => {
                marks.insert(format!("`{base}`"));
            }
            "fit" | "fdescribe" => {
                marks.insert(FOCUS.to_owned());
            }
            _ => {}
        }
        for member in chain {
            match member {
                "only" => {
                    marks.insert(FOCUS.to_owned());
                }
                "skip" | "todo" | "skipIf" | "runIf" | "fails" | "failing" => {
                    marks.insert(format!("`.{member}`"));
                }
                _ => {}
            }
        }
        for argument in &arguments[1..] {
            match argument.kind() {
                "object" => marks.extend(options(*argument, source)),
                "arrow_function" | "function_expression" | "function" => {
                    marks.extend(skips_in_body(*argument, source));
                }
                _ => {}
            }
        }
        Some(TestCall {
            name,
            is_suite,
            marks,
        })
    }
}

/// `test` → (`test`, []); `it.skip` → (`it`, [`skip`]); `test.each(..)`
/// (the callee of `test.each(rows)('name', fn)`) → (`test`, [`each`]).
fn callee<'s>(function: Node<'_>, source: &'s [u8]) -> Option<(&'s str, Vec<&'s str>)> {
    match function.kind() {
        "identifier" => Some((text(function, source), Vec::new())),
        "member_expression" => {
            let (base, mut chain) = callee(function.child_by_field_name("object")?, source)?;
            chain.push(text(function.child_by_field_name("property")?, source));
            Some((base, chain))
        }
        "call_expression" => callee(function.child_by_field_name("function")?, source),
        _ => None,
    }
}

/// A string or template literal without substitutions, unquoted.
fn literal(node: Node<'_>, source: &[u8]) -> Option<String> {
    match node.kind() {
        "string" => {
            let quoted = text(node, source);
            Some(quoted.get(1..quoted.len().saturating_sub(1))?.to_owned())
        }
        "template_string" if node.named_child_count() == 0 => {
            let quoted = text(node, source);
            Some(quoted.get(1..quoted.len().saturating_sub(1))?.to_owned())
        }
        _ => None,
    }
}

/// `{ skip: true }`, `{ todo: "later" }`, `{ only: true }` (a `false`
/// value switches nothing).
fn options(object: Node<'_>, source: &[u8]) -> BTreeSet<String> {
    let mut marks = BTreeSet::new();
    let mut cursor = object.walk();
    for pair in object.named_children(&mut cursor) {
        if pair.kind() != "pair" {
            continue;
        }
        let (Some(key), Some(value)) = (
            pair.child_by_field_name("key"),
            pair.child_by_field_name("value"),
        ) else {
            continue;
        };
        let key = text(key, source).trim_matches(['"', '\'']);
        if value.kind() == "false" {
            continue;
        }
        match key {
            "only" => {
                marks.insert(FOCUS.to_owned());
            }
            "skip" | "todo" => {
                marks.insert(format!("`{{ {key}: {} }}`", text(value, source)));
            }
            _ => {}
        }
    }
    marks
}

/// `t.skip(..)` or `t.todo(..)` on the test's own context `t`.
fn skips_in_body(function: Node<'_>, source: &[u8]) -> BTreeSet<String> {
    let mut marks = BTreeSet::new();
    let context = function
        .child_by_field_name("parameters")
        .and_then(|parameters| parameters.named_child(0))
        .or_else(|| function.child_by_field_name("parameter"))
        .map(|parameter| {
            let name = parameter
                .child_by_field_name("pattern")
                .unwrap_or(parameter);
            text(name, source)
        });
    let (Some(context), Some(body)) = (context, function.child_by_field_name("body")) else {
        return marks;
    };
    let mut stack = vec![body];
    while let Some(node) = stack.pop() {
        if node.kind() == "call_expression"
            && let Some((base, chain)) = node
                .child_by_field_name("function")
                .and_then(|f| callee(f, source))
            && base == context
            && let [member @ ("skip" | "todo")] = chain.as_slice()
        {
            marks.insert(format!("`{context}.{member}()`"));
        }
        let mut cursor = node.walk();
        stack.extend(node.named_children(&mut cursor));
    }
    marks
}

fn text<'s>(node: Node<'_>, source: &'s [u8]) -> &'s str {
    std::str::from_utf8(&source[node.byte_range()]).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TESTS: &str = r#"import test, { describe } from "node:test";

test("a quarter off 200 is 150", () => {});

describe("rounding", () => {
  it("rounds down", (t) => {});
  test.each([1, 2])("row %d", (n) => {});
});
"#;

    fn marks(text: &str, test: &str) -> BTreeSet<String> {
        inventory("test/d.test.ts", text).unwrap().tests[test].clone()
    }

    #[test]
    fn tests_are_named_by_their_suites_and_plain_ones_carry_no_mark() {
        let tests = inventory("test/d.test.ts", TESTS).unwrap();
        let names: Vec<&str> = tests.tests.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "a quarter off 200 is 150",
                "rounding > rounds down",
                "rounding > row %d"
            ]
        );
        assert!(tests.tests.values().all(BTreeSet::is_empty), "{tests:?}");
        assert!(!tests.focused);
        assert!(is_test_file("test/discount.test.ts") && is_test_file("src/a.spec.js"));
        assert!(is_test_file("__tests__/a.ts") && !is_test_file("src/discount.ts"));
        assert!(!is_test_file("node_modules/x/test/a.js"));
    }

    #[test]
    fn every_spelling_of_skip_todo_and_only_is_read() {
        let skip = TESTS.replace("test(\"a quarter", "test.skip(\"a quarter");
        assert!(marks(&skip, "a quarter off 200 is 150").contains("`.skip`"));
        let option = TESTS.replace("150\", () =>", "150\", { skip: true }, () =>");
        assert!(marks(&option, "a quarter off 200 is 150").contains("`{ skip: true }`"));
        let todo = TESTS.replace("150\", () =>", "150\", { todo: \"later\" }, () =>");
        assert!(!marks(&todo, "a quarter off 200 is 150").is_empty());
        let unskipped = TESTS.replace("150\", () =>", "150\", { skip: false }, () =>");
        assert!(marks(&unskipped, "a quarter off 200 is 150").is_empty());
        let in_body = TESTS.replace("(t) => {}", "(t) => { t.skip(\"no\"); }");
        assert!(marks(&in_body, "rounding > rounds down").contains("`t.skip()`"));
        let suite = TESTS.replace("describe(\"rounding\"", "describe.skip(\"rounding\"");
        assert!(marks(&suite, "rounding > rounds down").contains("`.skip`"));
        let x = TESTS.replace("  it(", "  xit(");
        assert!(marks(&x, "rounding > rounds down").contains("`xit`"));
        let only = TESTS.replace("  it(", "  it.only(");
        let tests = inventory("test/d.test.ts", &only).unwrap();
        assert!(tests.focused);
        assert!(tests.tests["rounding > rounds down"].contains(FOCUS));
        assert!(inventory("test/d.test.ts", "test(\"x\", () => {").is_none());
    }
}
