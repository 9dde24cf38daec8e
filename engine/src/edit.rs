//! Byte-range replacements of text: the one edit type of the engine, and
//! applying several of them to one file.
//!
//! A candidate's edits (several per file, against the text its branch was
//! seeded with) and a repair's reviewable changes ([`FileChange`]) are both
//! [`TextEdit`]s. They are applied in offset order, so earlier offsets stay
//! valid. Insertions at one offset keep their given order; any other
//! overlap is a conflict, not a guess.
//!
//! [`FileChange`]: crate::change::FileChange

/// Replace bytes `byte_start..byte_end` of a text with `new_text`.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct TextEdit {
    pub byte_start: usize,
    pub byte_end: usize,
    pub new_text: String,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("{path}: edit {start}..{end} is outside the file ({len} bytes)")]
    OutOfBounds {
        path: String,
        start: usize,
        end: usize,
        len: usize,
    },
    #[error("{path}: edit {start}..{end} does not fall on UTF-8 character boundaries")]
    NotCharBoundary {
        path: String,
        start: usize,
        end: usize,
    },
    #[error("{path}: edits {a_start}..{a_end} and {b_start}..{b_end} overlap")]
    Overlap {
        path: String,
        a_start: usize,
        a_end: usize,
        b_start: usize,
        b_end: usize,
    },
}

/// Applies `edits` (all for one file) to `text`, exactly. Identical
/// duplicate edits collapse to one, so 150 sites suggesting the same `use`
/// line insert it once.
pub fn apply(path: &str, text: &str, edits: &[TextEdit]) -> Result<String, EditError> {
    let mut sorted: Vec<&TextEdit> = edits.iter().collect();
    // Stable sort: insertions at one offset keep their order.
    sorted.sort_by_key(|e| (e.byte_start, e.byte_end));
    let mut seen = std::collections::HashSet::new();
    sorted.retain(|e| seen.insert((e.byte_start, e.byte_end, e.new_text.as_str())));
    for e in &sorted {
        if e.byte_start > e.byte_end || e.byte_end > text.len() {
            return Err(EditError::OutOfBounds {
                path: path.into(),
                start: e.byte_start,
                end: e.byte_end,
                len: text.len(),
            });
        }
        if !text.is_char_boundary(e.byte_start) || !text.is_char_boundary(e.byte_end) {
            return Err(EditError::NotCharBoundary {
                path: path.into(),
                start: e.byte_start,
                end: e.byte_end,
            });
        }
    }
    for pair in sorted.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if b.byte_start < a.byte_end {
            return Err(EditError::Overlap {
                path: path.into(),
                a_start: a.byte_start,
                a_end: a.byte_end,
                b_start: b.byte_start,
                b_end: b.byte_end,
            });
        }
    }
    let mut out =
        String::with_capacity(text.len() + sorted.iter().map(|e| e.new_text.len()).sum::<usize>());
    let mut cursor = 0;
    for e in sorted {
        out.push_str(&text[cursor..e.byte_start]);
        out.push_str(&e.new_text);
        cursor = e.byte_end;
    }
    out.push_str(&text[cursor..]);
    Ok(out)
}

/// Edits a tool suggested, laid out as a person would lay them out: a
/// deletion of the file's first lines (an unused `use` at the top) also
/// takes the blank lines after them, up to the next edit, so the file does
/// not start with a blank line. Edits that do not fit `text` are left for
/// [`apply`] to refuse.
pub fn tidy_suggestion(text: &str, edits: &[TextEdit]) -> Vec<TextEdit> {
    edits
        .iter()
        .map(|e| {
            let mut e = e.clone();
            if e.byte_end <= text.len()
                && text.is_char_boundary(e.byte_end)
                && removes_leading_lines(text, &e)
            {
                let next = edits
                    .iter()
                    .map(|n| n.byte_start)
                    .filter(|&start| start >= e.byte_end && start <= text.len())
                    .min()
                    .unwrap_or(text.len());
                if text.is_char_boundary(next) {
                    e.byte_end += blank_lines_len(&text[e.byte_end..next]);
                }
            }
            e
        })
        .collect()
}

/// The edit deletes the first whole lines of the file (an unused `use` at
/// the top, say). A file never starts with a blank line, so the blank lines
/// that followed go with them.
fn removes_leading_lines(text: &str, e: &TextEdit) -> bool {
    e.byte_start == 0
        && e.new_text.is_empty()
        && e.byte_end > 0
        && text[..e.byte_end].ends_with('\n')
}

/// The length of the whitespace-only lines `text` starts with.
fn blank_lines_len(text: &str) -> usize {
    text.split_inclusive('\n')
        .take_while(|line| line.ends_with('\n') && line.trim().is_empty())
        .map(str::len)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn e(start: usize, end: usize, text: &str) -> TextEdit {
        TextEdit {
            byte_start: start,
            byte_end: end,
            new_text: text.into(),
        }
    }

    #[test]
    fn applies_several_edits_in_one_file() {
        let out = apply(
            "f.rs",
            "let x = 1; x += 1;",
            &[e(4, 4, "mut "), e(8, 9, "2")],
        )
        .unwrap();
        assert_eq!(out, "let mut x = 2; x += 1;");
    }

    #[test]
    fn duplicate_edits_collapse() {
        let use_line = "use std::collections::HashMap;\n";
        let out = apply("f.rs", "fn f() {}", &[e(0, 0, use_line), e(0, 0, use_line)]).unwrap();
        assert_eq!(out, format!("{use_line}fn f() {{}}"));
    }

    #[test]
    fn duplicates_collapse_even_when_not_adjacent() {
        let out = apply("f.rs", "x", &[e(0, 0, "a"), e(0, 0, "b"), e(0, 0, "a")]).unwrap();
        assert_eq!(out, "abx");
    }

    #[test]
    fn insertions_at_one_point_keep_order() {
        let out = apply("f.rs", "x", &[e(0, 0, "a"), e(0, 0, "b")]).unwrap();
        assert_eq!(out, "abx");
    }

    #[test]
    fn overlaps_and_bad_ranges_are_refused() {
        assert!(matches!(
            apply("f.rs", "abcdef", &[e(0, 3, "x"), e(2, 4, "y")]),
            Err(EditError::Overlap { .. })
        ));
        assert!(matches!(
            apply("f.rs", "abc", &[e(2, 9, "x")]),
            Err(EditError::OutOfBounds { .. })
        ));
        assert!(matches!(
            apply("f.rs", "é", &[e(1, 1, "x")]),
            Err(EditError::NotCharBoundary { .. })
        ));
    }

    #[test]
    fn removing_the_first_lines_takes_the_blank_lines_after_them() {
        let text = "use std::fmt;\n\n  \n/// Doc.\nfn f() {}\n";
        let tidy =
            |text: &str, edits: &[TextEdit]| apply("f.rs", text, &tidy_suggestion(text, edits));
        assert_eq!(
            tidy(text, &[e(0, 14, "")]).unwrap(),
            "/// Doc.\nfn f() {}\n"
        );
        // Exact application keeps them: a diff's edits must round-trip.
        assert_eq!(
            apply("f.rs", text, &[e(0, 14, "")]).unwrap(),
            "\n  \n/// Doc.\nfn f() {}\n"
        );
        // Not at the top of the file, or not whole lines: blank lines stay.
        assert_eq!(tidy("a\nb\n\nc", &[e(2, 4, "")]).unwrap(), "a\n\nc");
        assert_eq!(tidy("ab\n\nc", &[e(0, 1, "")]).unwrap(), "b\n\nc");
        // The blank lines end where the next edit starts.
        assert_eq!(
            tidy("a\n\n\nb", &[e(0, 2, ""), e(3, 3, "x")]).unwrap(),
            "x\nb"
        );
    }

    proptest! {
        #[test]
        fn disjoint_edits_apply_like_a_sequence(text in "[a-z]{0,40}", cuts in proptest::collection::btree_set(0usize..40, 0..6)) {
            let cuts: Vec<usize> = cuts.into_iter().filter(|c| *c <= text.len()).collect();
            // Replace each single byte after a cut point with "Z" (disjoint by construction).
            let edits: Vec<TextEdit> = cuts.iter().filter(|c| **c < text.len()).map(|c| e(*c, *c + 1, "Z")).collect();
            let out = apply("f.rs", &text, &edits).unwrap();
            let mut expected: Vec<char> = text.chars().collect();
            for ed in &edits { expected[ed.byte_start] = 'Z'; }
            prop_assert_eq!(out, expected.into_iter().collect::<String>());
        }
    }
}
