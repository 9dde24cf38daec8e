//! pytest's JUnit XML report (`-o junit_family=xunit1`, which keeps each
//! case's `file` and `line`), read into test cases keyed by pytest node id.
//!
//! A case with `<failure>` failed an assertion; one with `<error>` either
//! failed in setup or teardown or, with an empty `classname`, is a module
//! pytest could not collect (its `name` is the module's dotted path).
//! Skipped and passing cases carry no evidence beyond their count.

/// One `<testcase>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// `tests/test_calc.py::TestMore::test_neg`.
    pub node_id: String,
    /// The test file, relative to pytest's root directory.
    pub file: Option<String>,
    /// The 0-based line of the test's `def`, as pytest reports it.
    pub line: Option<u32>,
    pub outcome: Outcome,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Skipped,
    /// An assertion or exception in the test: a counterexample.
    Failed {
        message: String,
        text: String,
    },
    /// An error in setup or teardown.
    Errored {
        message: String,
        text: String,
    },
    /// The module could not be collected (import or syntax error).
    NotCollected {
        text: String,
    },
}

/// The cases of a report, in report order; an error when it is not one.
pub fn parse(xml: &str) -> Result<Vec<Case>, String> {
    let document = roxmltree::Document::parse(xml).map_err(|e| e.to_string())?;
    let root = document.root_element();
    if !matches!(root.tag_name().name(), "testsuites" | "testsuite") {
        return Err(format!("the root element is <{}>", root.tag_name().name()));
    }
    Ok(root
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .map(case)
        .collect())
}

fn case(node: roxmltree::Node<'_, '_>) -> Case {
    let classname = node.attribute("classname").unwrap_or_default();
    let name = node.attribute("name").unwrap_or_default();
    let file = node.attribute("file").map(str::to_owned);
    let line = node.attribute("line").and_then(|l| l.parse().ok());
    let child = |tag: &str| node.children().find(|c| c.has_tag_name(tag));
    let text_of = |c: roxmltree::Node<'_, '_>| {
        (
            c.attribute("message").unwrap_or_default().to_owned(),
            c.text().unwrap_or_default().to_owned(),
        )
    };
    let outcome = if let Some(failure) = child("failure") {
        let (message, text) = text_of(failure);
        Outcome::Failed { message, text }
    } else if let Some(error) = child("error") {
        let (message, text) = text_of(error);
        if classname.is_empty() {
            Outcome::NotCollected { text }
        } else {
            Outcome::Errored { message, text }
        }
    } else if child("skipped").is_some() {
        Outcome::Skipped
    } else {
        Outcome::Passed
    };
    let node_id = match (&outcome, &file) {
        (Outcome::NotCollected { .. }, Some(file)) => file.clone(),
        (_, Some(file)) => node_id(file, classname, name),
        (_, None) => [classname, name]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join("::"),
    };
    Case {
        node_id,
        file,
        line,
        outcome,
    }
}

/// pytest's node id from xunit1's parts: `classname` is the module's dotted
/// path followed by any enclosing classes.
fn node_id(file: &str, classname: &str, name: &str) -> String {
    let module = file.strip_suffix(".py").unwrap_or(file).replace('/', ".");
    let classes = classname
        .strip_prefix(&module)
        .and_then(|rest| rest.strip_prefix('.'))
        .unwrap_or_default();
    let mut id = file.to_owned();
    for class in classes.split('.').filter(|c| !c.is_empty()) {
        id.push_str("::");
        id.push_str(class);
    }
    id.push_str("::");
    id.push_str(name);
    id
}

/// pytest 9.2.0's report for a failing function test, a passing and a
/// failing method test, and a module that does not import.
#[cfg(test)]
pub(super) const RECORDED: &str = r#"<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="1" failures="2" skipped="0" tests="4" time="0.306" timestamp="2026-12-01T11:59:27.299687+00:00" hostname="vm"><testcase classname="" name="tests.test_broken" file="tests/test_broken.py" time="0.000"><error message="collection failure">ImportError while importing test module '/tmp/pyt/tests/test_broken.py'.
tests/test_broken.py:1: in &lt;module&gt;
import nonexistent_mod
E   ModuleNotFoundError: No module named 'nonexistent_mod'</error></testcase><testcase classname="tests.test_calc" name="test_add" file="tests/test_calc.py" line="3" time="0.001"><failure message="assert -1 == 5&#10; +  where -1 = add(2, 3)">def test_add():
&gt;       assert add(2, 3) == 5
E       assert -1 == 5

tests/test_calc.py:5: AssertionError</failure></testcase><testcase classname="tests.test_calc.TestMore" name="test_zero" file="tests/test_calc.py" line="8" time="0.000" /><testcase classname="tests.test_calc.TestMore" name="test_neg[a-b]" file="tests/test_calc.py" line="11" time="0.000"><failure message="assert 0 == -2">self = &lt;test_calc.TestMore object at 0x7f05a87bcb50&gt;

tests/test_calc.py:13: AssertionError</failure></testcase></testsuite></testsuites>"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_report_reads_as_pytest_said_it() {
        let cases = parse(RECORDED).unwrap();
        let ids: Vec<&str> = cases.iter().map(|c| c.node_id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "tests/test_broken.py",
                "tests/test_calc.py::test_add",
                "tests/test_calc.py::TestMore::test_zero",
                "tests/test_calc.py::TestMore::test_neg[a-b]",
            ]
        );
        assert!(
            matches!(&cases[0].outcome, Outcome::NotCollected { text } if text.contains("No module named 'nonexistent_mod'"))
        );
        assert!(
            matches!(&cases[1].outcome, Outcome::Failed { message, text } if message.starts_with("assert -1 == 5") && text.contains("tests/test_calc.py:5: AssertionError"))
        );
        assert_eq!(cases[2].outcome, Outcome::Passed);
        assert_eq!(cases[1].line, Some(3));
    }

    #[test]
    fn what_is_no_report_is_refused() {
        assert!(parse("").is_err());
        assert!(parse("<html/>").is_err());
        assert_eq!(parse("<testsuites/>").unwrap(), Vec::new());
    }
}
