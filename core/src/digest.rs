//! The one canonical, domain-tagged SHA-256 encoding of Trellis.
//!
//! Every identity in Trellis is computed through [`CanonicalHasher`]: the
//! engine's blobs, state roots, cluster ids, candidate proposals and ledger
//! links, and the prompt plane's section content hashes, manifests, program
//! and change-record digests. The encoding is explicit, never serde output: a
//! domain tag first, then each field as a little-endian `u64` length followed
//! by its bytes. Two different field sequences can therefore never produce the
//! same byte stream, and a change of encoding is a change of tag.
//!
//! This module owns the encoding and nothing else: it never decides what a
//! digest covers (each owner lists its fields under its own tag), and no
//! other module in the workspace may feed SHA-256 by hand (checked by
//! `core/tests/layering.rs`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest as _, Sha256};

/// A 32-byte SHA-256 digest, shown and serialized as lowercase hex.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// The all-zero digest, used as the predecessor of the first ledger event.
    pub const ZERO: Digest = Digest([0; 32]);

    pub fn to_hex(&self) -> String {
        let mut out = String::with_capacity(64);
        for byte in self.0 {
            out.push(char::from_digit(u32::from(byte >> 4), 16).unwrap());
            out.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap());
        }
        out
    }

    /// The first `n` hex characters: enough for a human-facing id.
    pub fn short(&self, n: usize) -> String {
        let mut hex = self.to_hex();
        hex.truncate(n);
        hex
    }

    /// `sha256:` followed by the 64 hex digits: the self-describing form the
    /// prompt plane records in manifests, programs and change records.
    pub fn to_prefixed(&self) -> String {
        format!("sha256:{}", self.to_hex())
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", self.short(12))
    }
}

/// Error for a string that is not 64 lowercase or uppercase hex characters.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a 64-character hex digest")]
pub struct ParseDigestError(String);

impl FromStr for Digest {
    type Err = ParseDigestError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bytes = s.as_bytes();
        if bytes.len() != 64 {
            return Err(ParseDigestError(s.to_owned()));
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks(2).enumerate() {
            let hi = (pair[0] as char).to_digit(16);
            let lo = (pair[1] as char).to_digit(16);
            match (hi, lo) {
                (Some(hi), Some(lo)) => out[i] = (hi * 16 + lo) as u8,
                _ => return Err(ParseDigestError(s.to_owned())),
            }
        }
        Ok(Digest(out))
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Builds a [`Digest`] over a length-prefixed field sequence under a domain tag.
#[derive(Clone)]
pub struct CanonicalHasher {
    sha: Sha256,
}

impl CanonicalHasher {
    /// Starts a digest in `domain`, e.g. `"trellis.state-root.v1"`.
    pub fn new(domain: &str) -> Self {
        let mut hasher = CanonicalHasher { sha: Sha256::new() };
        hasher.bytes(domain.as_bytes());
        hasher
    }

    pub fn bytes(&mut self, bytes: &[u8]) -> &mut Self {
        self.sha.update((bytes.len() as u64).to_le_bytes());
        self.sha.update(bytes);
        self
    }

    pub fn str(&mut self, s: &str) -> &mut Self {
        self.bytes(s.as_bytes())
    }

    pub fn u64(&mut self, value: u64) -> &mut Self {
        self.bytes(&value.to_le_bytes())
    }

    pub fn digest(&mut self, digest: &Digest) -> &mut Self {
        self.bytes(&digest.0)
    }

    /// A flag as one byte, `0` or `1`.
    pub fn bool(&mut self, value: bool) -> &mut Self {
        self.bytes(&[u8::from(value)])
    }

    /// An optional field: a presence flag, then the value when present.
    pub fn opt_str(&mut self, value: Option<&str>) -> &mut Self {
        match value {
            Some(text) => self.bool(true).str(text),
            None => self.bool(false),
        }
    }

    /// A float in canonical form: its IEEE-754 bits, with `-0.0` folded to `0.0`.
    pub fn f64(&mut self, value: f64) -> &mut Self {
        let value = if value == 0.0 { 0.0 } else { value };
        self.u64(value.to_bits())
    }

    pub fn finish(&self) -> Digest {
        Digest(self.sha.clone().finalize().into())
    }
}

/// The content address of a blob.
pub fn blob_digest(bytes: &[u8]) -> Digest {
    CanonicalHasher::new("trellis.blob.v1")
        .bytes(bytes)
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips() {
        let d = blob_digest(b"hello");
        let parsed: Digest = d.to_hex().parse().unwrap();
        assert_eq!(d, parsed);
        assert!("xyz".parse::<Digest>().is_err());
    }

    #[test]
    fn length_prefix_separates_field_boundaries() {
        let a = CanonicalHasher::new("t").str("ab").str("c").finish();
        let b = CanonicalHasher::new("t").str("a").str("bc").finish();
        assert_ne!(a, b);
    }

    #[test]
    fn absent_and_present_optionals_differ() {
        let none = CanonicalHasher::new("t").opt_str(None).finish();
        let empty = CanonicalHasher::new("t").opt_str(Some("")).finish();
        assert_ne!(none, empty);
    }

    #[test]
    fn prefixed_form_is_the_hex_behind_sha256() {
        let d = blob_digest(b"x");
        assert_eq!(d.to_prefixed(), format!("sha256:{}", d.to_hex()));
    }

    #[test]
    fn domain_tag_separates_identities() {
        let a = CanonicalHasher::new("one").str("x").finish();
        let b = CanonicalHasher::new("two").str("x").finish();
        assert_ne!(a, b);
    }

    #[test]
    fn golden_blob_digest_is_stable() {
        // Guards the encoding: changing it silently would orphan every ledger.
        // Computed independently: sha256(le64(15) "trellis.blob.v1" le64(7) "trellis").
        assert_eq!(
            blob_digest(b"trellis").to_hex(),
            "ba4ac2cdddeab8259a96863076c1f14e126c563c19cb962f9a726df30db1a6ca"
        );
    }
}
