//! A small crate with two mistakes. `trellis repair examples/broken-crate`
//! fixes the missing import first, which reveals the missing `mut`, then
//! fixes that, and verifies both against the crate's own tests.

/// Counts how often each word occurs.
pub fn frequencies(words: &[&str]) -> HashMap<String, usize> {
    let counts = HashMap::new();
    for word in words {
        *counts.entry(word.to_lowercase()).or_insert(0) += 1;
    }
    counts
}

/// The most frequent word, ties broken alphabetically.
pub fn most_frequent(words: &[&str]) -> Option<String> {
    let counts = frequencies(words);
    let mut best: Vec<(&String, &usize)> = counts.iter().collect();
    best.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    best.first().map(|(word, _)| (*word).clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_case_insensitively() {
        let counts = frequencies(&["Rust", "rust", "cargo"]);
        assert_eq!(counts["rust"], 2);
        assert_eq!(counts["cargo"], 1);
    }

    #[test]
    fn picks_the_most_frequent_word() {
        assert_eq!(most_frequent(&["b", "a", "b"]), Some("b".to_string()));
        assert_eq!(most_frequent(&[]), None);
    }
}
