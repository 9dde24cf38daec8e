//! Length-prefixed, domain-tagged SHA-256 digests for prompt identities.
//!
//! Section content hashes, manifest digests, program digests and change-record
//! digests are all computed here. The encoding is explicit and never serde
//! output: the domain tag first, then every field as a little-endian `u64`
//! length followed by its bytes, so two different field sequences can never
//! produce the same byte stream. Changing the encoding means changing the tag.

use sha2::{Digest as _, Sha256};

/// The domain tag of every prompt-plane digest.
pub const PROMPT_DOMAIN: &str = "trellis-prompt-v1";

/// Incremental canonical hasher; finish with [`CanonicalHasher::finish`].
#[derive(Clone)]
pub struct CanonicalHasher(Sha256);

impl CanonicalHasher {
    /// A hasher for one kind of object. `kind` separates, e.g., section
    /// content hashes from program digests under the same domain tag.
    pub fn new(kind: &str) -> Self {
        let mut hasher = CanonicalHasher(Sha256::new());
        hasher.bytes(PROMPT_DOMAIN.as_bytes());
        hasher.bytes(kind.as_bytes());
        hasher
    }

    pub fn bytes(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.update((bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
        self
    }

    pub fn str(&mut self, text: &str) -> &mut Self {
        self.bytes(text.as_bytes())
    }

    pub fn u64(&mut self, value: u64) -> &mut Self {
        self.bytes(&value.to_le_bytes())
    }

    pub fn bool(&mut self, value: bool) -> &mut Self {
        self.bytes(&[u8::from(value)])
    }

    /// An optional field: a presence byte, then the value when present.
    pub fn opt_str(&mut self, value: Option<&str>) -> &mut Self {
        match value {
            Some(text) => self.bool(true).str(text),
            None => self.bool(false),
        }
    }

    /// `sha256:` followed by 64 lowercase hex digits.
    pub fn finish(self) -> String {
        let digest = self.0.finalize();
        let mut out = String::with_capacity(7 + 64);
        out.push_str("sha256:");
        for byte in digest {
            out.push(char::from_digit(u32::from(byte >> 4), 16).expect("nibble"));
            out.push(char::from_digit(u32::from(byte & 0xf), 16).expect("nibble"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_boundaries_change_the_digest() {
        let mut a = CanonicalHasher::new("t");
        a.str("ab").str("c");
        let mut b = CanonicalHasher::new("t");
        b.str("a").str("bc");
        assert_ne!(a.finish(), b.finish());
    }

    #[test]
    fn kind_separates_digests() {
        let mut a = CanonicalHasher::new("section");
        a.str("x");
        let mut b = CanonicalHasher::new("program");
        b.str("x");
        assert_ne!(a.finish(), b.finish());
    }
}
