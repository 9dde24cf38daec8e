//! Prompt identities in the shared canonical encoding.
//!
//! Section content hashes, manifest digests, program digests and change-record
//! digests are computed with [`trellis_core::digest::CanonicalHasher`], the
//! engine's encoding, under one domain tag for the whole prompt plane: the tag
//! first, then the kind of object, then its fields. Prompt digests are written
//! in their self-describing form, `sha256:` and 64 hex digits. This module
//! fixes the tag and the kind prefix; it never encodes bytes itself.

use trellis_core::digest::CanonicalHasher;

/// The domain tag of every prompt-plane digest.
pub const PROMPT_DOMAIN: &str = "trellis-prompt-v1";

/// A hasher for one kind of prompt object. `kind` separates, e.g., section
/// content hashes from program digests under the same domain tag.
pub fn prompt_hasher(kind: &str) -> CanonicalHasher {
    let mut hasher = CanonicalHasher::new(PROMPT_DOMAIN);
    hasher.str(kind);
    hasher
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_separates_digests() {
        let a = prompt_hasher("section").str("x").finish();
        let b = prompt_hasher("program").str("x").finish();
        assert_ne!(a, b);
    }

    #[test]
    fn golden_prompt_digest_is_the_documented_byte_stream() {
        // Guards the encoding every committed manifest hash depends on.
        // Computed independently: sha256(le64(17) "trellis-prompt-v1"
        // le64(8) "manifest" le64(7) "trellis").
        assert_eq!(
            prompt_hasher("manifest")
                .str("trellis")
                .finish()
                .to_prefixed(),
            "sha256:dbd0fa57503c12947e479e9a90e28552f211957b28fa71c63279222128458495"
        );
    }
}
