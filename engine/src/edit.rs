//! Applying byte-range replacements to text.
//!
//! Candidates are sets of replacements, several per file, expressed against
//! the text the branch was seeded with. They are applied back to front so
//! earlier offsets stay valid. Insertions at one offset keep their given
//! order; any other overlap is a conflict, not a guess.

use crate::diagnostic::RelPath;

/// Replace `start..end` (bytes) of one file with `text`.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct ByteEdit {
    pub path: RelPath,
    pub start: usize,
    pub end: usize,
    pub text: String,
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

/// Applies `edits` (all for one file) to `text`. Identical duplicate edits
/// collapse to one, so 150 sites suggesting the same `use` line insert it once.
pub fn apply(path: &str, text: &str, edits: &[ByteEdit]) -> Result<String, EditError> {
    let mut sorted: Vec<&ByteEdit> = edits.iter().collect();
    // Stable sort: insertions at one offset keep their order.
    sorted.sort_by_key(|e| (e.start, e.end));
    let mut seen = std::collections::HashSet::new();
    sorted.retain(|e| seen.insert((e.start, e.end, e.text.as_str())));
    for e in &sorted {
        if e.start > e.end || e.end > text.len() {
            return Err(EditError::OutOfBounds {
                path: path.into(),
                start: e.start,
                end: e.end,
                len: text.len(),
            });
        }
        if !text.is_char_boundary(e.start) || !text.is_char_boundary(e.end) {
            return Err(EditError::NotCharBoundary {
                path: path.into(),
                start: e.start,
                end: e.end,
            });
        }
    }
    for pair in sorted.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if b.start < a.end {
            return Err(EditError::Overlap {
                path: path.into(),
                a_start: a.start,
                a_end: a.end,
                b_start: b.start,
                b_end: b.end,
            });
        }
    }
    let mut out =
        String::with_capacity(text.len() + sorted.iter().map(|e| e.text.len()).sum::<usize>());
    let mut cursor = 0;
    for (i, e) in sorted.iter().enumerate() {
        out.push_str(&text[cursor..e.start]);
        out.push_str(&e.text);
        cursor = e.end;
        if removes_leading_lines(text, e) {
            let next = sorted.get(i + 1).map_or(text.len(), |n| n.start);
            cursor += blank_lines_len(&text[cursor..next]);
        }
    }
    out.push_str(&text[cursor..]);
    Ok(out)
}

/// The edit deletes the first whole lines of the file (an unused `use` at
/// the top, say). A file never starts with a blank line, so the blank lines
/// that followed go with them.
fn removes_leading_lines(text: &str, e: &ByteEdit) -> bool {
    e.start == 0 && e.text.is_empty() && e.end > 0 && text[..e.end].ends_with('\n')
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

    fn e(start: usize, end: usize, text: &str) -> ByteEdit {
        ByteEdit {
            path: "f.rs".into(),
            start,
            end,
            text: text.into(),
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
        assert_eq!(
            apply("f.rs", text, &[e(0, 14, "")]).unwrap(),
            "/// Doc.\nfn f() {}\n"
        );
        // Not at the top of the file, or not whole lines: blank lines stay.
        assert_eq!(
            apply("f.rs", "a\nb\n\nc", &[e(2, 4, "")]).unwrap(),
            "a\n\nc"
        );
        assert_eq!(apply("f.rs", "ab\n\nc", &[e(0, 1, "")]).unwrap(), "b\n\nc");
        // The blank lines end where the next edit starts.
        assert_eq!(
            apply("f.rs", "a\n\n\nb", &[e(0, 2, ""), e(3, 3, "x")]).unwrap(),
            "x\nb"
        );
    }

    proptest! {
        #[test]
        fn disjoint_edits_apply_like_a_sequence(text in "[a-z]{0,40}", cuts in proptest::collection::btree_set(0usize..40, 0..6)) {
            let cuts: Vec<usize> = cuts.into_iter().filter(|c| *c <= text.len()).collect();
            // Replace each single byte after a cut point with "Z" (disjoint by construction).
            let edits: Vec<ByteEdit> = cuts.iter().filter(|c| **c < text.len()).map(|c| e(*c, *c + 1, "Z")).collect();
            let out = apply("f.rs", &text, &edits).unwrap();
            let mut expected: Vec<char> = text.chars().collect();
            for ed in &edits { expected[ed.start] = 'Z'; }
            prop_assert_eq!(out, expected.into_iter().collect::<String>());
        }
    }
}
