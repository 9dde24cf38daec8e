//! Cutting text to a byte bound at a character boundary: the one way every
//! bounded excerpt (a tool's output, a failing test's log, a signature) is
//! made, so no cut ever splits a UTF-8 character.
//!
//! `str::floor_char_boundary` would do but is unstable; these are it.

/// The largest character boundary of `text` at or before `index` (`text`'s
/// length when `index` is past its end).
pub fn floor_char_boundary(text: &str, index: usize) -> usize {
    let mut at = index.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest character boundary of `text` at or after `index` (`text`'s
/// length when `index` is past its end).
pub fn ceil_char_boundary(text: &str, index: usize) -> usize {
    let mut at = index.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// The longest start of `text` of at most `max_bytes` bytes that ends at a
/// character boundary.
pub fn head(text: &str, max_bytes: usize) -> &str {
    &text[..floor_char_boundary(text, max_bytes)]
}

/// The longest end of `text` of at most `max_bytes` bytes that starts at a
/// character boundary.
pub fn tail(text: &str, max_bytes: usize) -> &str {
    &text[ceil_char_boundary(text, text.len().saturating_sub(max_bytes))..]
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_cut_inside_a_character_moves_to_its_edge() {
        let text = "aé€😀"; // 1, 2, 3 and 4 bytes: boundaries 0 1 3 6 10
        assert_eq!(floor_char_boundary(text, 2), 1);
        assert_eq!(ceil_char_boundary(text, 2), 3);
        assert_eq!(floor_char_boundary(text, 9), 6);
        assert_eq!(ceil_char_boundary(text, 7), 10);
        assert_eq!(floor_char_boundary(text, 99), 10);
        assert_eq!(ceil_char_boundary(text, 99), 10);
        assert_eq!(head(text, 5), "aé");
        assert_eq!(head(text, 0), "");
        assert_eq!(head(text, 10), text);
        assert_eq!(tail(text, 5), "😀");
        assert_eq!(tail(text, 7), "€😀");
        assert_eq!(tail(text, 0), "");
        assert_eq!(tail(text, 99), text);
    }

    proptest! {
        #[test]
        fn cuts_land_on_the_nearest_boundaries(text in "\\PC{0,40}", index in 0usize..200) {
            let (floor, ceil) = (floor_char_boundary(&text, index), ceil_char_boundary(&text, index));
            let index = index.min(text.len());
            prop_assert!(text.is_char_boundary(floor) && floor <= index);
            prop_assert!((floor + 1..=index).all(|i| !text.is_char_boundary(i)));
            prop_assert!(text.is_char_boundary(ceil) && ceil >= index);
            prop_assert!((index..ceil).all(|i| !text.is_char_boundary(i)));
        }

        #[test]
        fn head_and_tail_keep_the_most_that_fits(text in "\\PC{0,40}", max in 0usize..200) {
            let (start, end) = (head(&text, max), tail(&text, max));
            prop_assert!(start.len() <= max && end.len() <= max);
            prop_assert!(text.starts_with(start) && text.ends_with(end));
            // One more character would not fit.
            if let Some(next) = text[start.len()..].chars().next() {
                prop_assert!(start.len() + next.len_utf8() > max);
            }
            if let Some(before) = text[..text.len() - end.len()].chars().next_back() {
                prop_assert!(end.len() + before.len_utf8() > max);
            }
        }
    }
}
