//! Property tests of the section parser (front matter and body) on
//! mutations of the library's own sections, which bundles replace with
//! files from the workspace: any text parses or is refused, and every
//! refusal names the file and a line of it.
//!
//! Its properties:
//! `a_damaged_section_parses_or_each_error_names_the_file_and_a_line`,
//! `any_text_parses_or_is_refused`.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use trellis_core::fuzz::{self, CountingAllocator};
use trellis_prompt_codegen::section::parse_section;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Every section of the shipped library.
fn sections() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path, text));
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = Vec::new();
    walk(&root.join("coding"), &mut out);
    walk(&root.join("platform"), &mut out);
    out.sort();
    out
}

fn damaged() -> impl Strategy<Value = (PathBuf, String)> {
    prop::sample::select(sections()).prop_flat_map(|(path, text)| {
        let mutated = fuzz::mutated_lines(&text)
            .prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
        (Just(path), mutated)
    })
}

proptest! {
    #![proptest_config(fuzz::config(192))]

    #[test]
    fn a_damaged_section_parses_or_each_error_names_the_file_and_a_line(
        (path, text) in damaged(),
    ) {
        let parsed = fuzz::bounded("parse_section", fuzz::budget(text.len()), || {
            parse_section(&path, &text)
        });
        if let Err(errors) = parsed {
            prop_assert!(!errors.0.is_empty());
            for error in &errors.0 {
                prop_assert_eq!(&error.file, &path);
                prop_assert!(error.line <= text.lines().count() + 1, "{error:?}");
                prop_assert!(!error.message.is_empty());
            }
        }
    }

    #[test]
    fn any_text_parses_or_is_refused(text in any::<String>()) {
        let path = Path::new("bundle/any.md");
        let _ = fuzz::bounded("parse_section", fuzz::budget(text.len()), || parse_section(path, &text));
    }
}

#[test]
fn every_shipped_section_parses() {
    let sections = sections();
    assert!(sections.len() > 20, "{}", sections.len());
    for (path, text) in sections {
        parse_section(&path, &text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}
