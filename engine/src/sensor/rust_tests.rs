//! The tests a Rust source file defines, read with `syn`, for
//! [`super::test_inventory`]: every `#[test]` function (`#[tokio::test]`
//! and the like too, any attribute whose last segment is `test`, and
//! `#[rstest]`/`#[test_case]`), named by its module path in the file, with
//! the marks that switch it off or invert it: `#[ignore]`,
//! `#[should_panic]`, a `#[cfg(..)]` or `#[cfg_attr(..)]` on it or on a
//! module around it (`#[cfg(test)]` excepted: that is how tests are
//! compiled at all). A file that does not parse has no inventory.

use std::collections::BTreeSet;

use quote::ToTokens as _;

use super::file_tests::FileTests;

/// The tests `text` defines; `None` when it does not parse as Rust.
pub fn inventory(text: &str) -> Option<FileTests> {
    let file = syn::parse_file(text).ok()?;
    let mut tests = FileTests::default();
    // `#![cfg(..)]` or `#![ignore]`-like inner attributes mark the whole file.
    collect(&file.items, "", &marks_of(&file.attrs), &mut tests);
    Some(tests)
}

fn collect(items: &[syn::Item], module: &str, around: &BTreeSet<String>, out: &mut FileTests) {
    for item in items {
        match item {
            syn::Item::Fn(f) if is_test(&f.attrs) => {
                let mut marks = around.clone();
                marks.extend(marks_of(&f.attrs));
                out.add(format!("{module}{}", f.sig.ident), marks);
            }
            syn::Item::Mod(m) => {
                if let Some((_, items)) = &m.content {
                    let mut marks = around.clone();
                    marks.extend(marks_of(&m.attrs));
                    collect(items, &format!("{module}{}::", m.ident), &marks, out);
                }
            }
            _ => {}
        }
    }
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().segments.last().is_some_and(|s| {
            matches!(
                s.ident.to_string().as_str(),
                "test" | "rstest" | "test_case"
            )
        })
    })
}

/// The attributes that switch a test (or the module around it) off or
/// invert it, as written (whitespace folded).
fn marks_of(attrs: &[syn::Attribute]) -> BTreeSet<String> {
    attrs
        .iter()
        .filter(|attr| {
            let path = attr.path();
            if path.is_ident("ignore") || path.is_ident("should_panic") {
                return true;
            }
            if path.is_ident("cfg") {
                // `#[cfg(test)]` compiles the tests in; anything else may not.
                return !matches!(&attr.meta, syn::Meta::List(list) if list.tokens.to_string() == "test");
            }
            path.is_ident("cfg_attr")
        })
        .map(|attr| {
            let text: String = attr
                .to_token_stream()
                .to_string()
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect();
            format!("`{text}`")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TESTS: &str = r#"
pub fn add(a: i32, b: i32) -> i32 { a + b }

#[cfg(test)]
mod tests {
    #[test]
    fn adds() { assert_eq!(super::add(1, 1), 2); }

    #[tokio::test]
    async fn adds_later() {}

    mod more {
        #[test]
        #[ignore]
        fn slow() {}
    }
}
"#;

    #[test]
    fn tests_are_named_by_module_path_with_their_marks() {
        let tests = inventory(TESTS).unwrap().tests;
        let names: Vec<&str> = tests.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["tests::adds", "tests::adds_later", "tests::more::slow"]
        );
        assert!(tests["tests::adds"].is_empty(), "cfg(test) is no mark");
        assert_eq!(
            tests["tests::more::slow"],
            BTreeSet::from(["`#[ignore]`".to_owned()])
        );
    }

    #[test]
    fn cfg_on_a_test_or_its_module_is_a_mark_and_so_is_should_panic() {
        let off = TESTS.replace("mod tests {", "#[cfg(any())]\nmod tests {");
        let tests = inventory(&off).unwrap().tests;
        assert!(
            tests["tests::adds"].contains("`#[cfg(any())]`"),
            "{tests:?}"
        );
        let inverted = TESTS.replace("fn adds()", "#[should_panic]\n    fn adds()");
        let tests = inventory(&inverted).unwrap().tests;
        assert!(
            tests["tests::adds"].contains("`#[should_panic]`"),
            "{tests:?}"
        );
        let conditional = TESTS.replace("fn adds()", "#[cfg_attr(unix, ignore)]\n    fn adds()");
        let tests = inventory(&conditional).unwrap().tests;
        assert!(
            tests["tests::adds"].contains("`#[cfg_attr(unix,ignore)]`"),
            "{tests:?}"
        );
        let file_off = format!("#![cfg(any())]\n{TESTS}");
        let tests = inventory(&file_off).unwrap().tests;
        assert!(
            tests["tests::adds"].contains("`#![cfg(any())]`"),
            "{tests:?}"
        );
        assert!(inventory("fn broken( {").is_none());
    }
}
