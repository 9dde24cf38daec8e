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
    for e in sorted {
        out.push_str(&text[cursor..e.start]);
        out.push_str(&e.text);
        cursor = e.end;
    }
    out.push_str(&text[cursor..]);
    Ok(out)
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
