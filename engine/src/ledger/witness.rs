//! The head witness: the last head the ledger reached, kept outside it.
//!
//! A hash chain proves that its rows agree with each other, not that none
//! are missing: a database whose WAL was deleted after a crash, one
//! truncated to zero bytes, or one rewritten with every later hash
//! recomputed all verify in themselves. So every append also leaves its
//! [`Head`] (`SEQ:HASH`) in `.trellis/head`, and verification checks the
//! chain against it: the chain must reach that seq with that hash. A head
//! kept somewhere the workspace cannot touch (printed by `trellis repair`,
//! passed back as `trellis ledger verify --expect-head`) checks the same
//! way against a tamperer who also rewrote the witness.
//!
//! The witness is written without fsync, after the append commits: after a
//! crash it may lag behind the chain (harmless: an older head is still in
//! an append-only chain) but never names an event that was not committed.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::digest::Digest;
use crate::statedir::{Dir, StateError};

/// The witness file inside `.trellis/`.
pub const WITNESS_FILE: &str = "head";

/// A ledger head: the seq of the last event and its hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub seq: u64,
    pub hash: Digest,
}

impl fmt::Display for Head {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.seq, self.hash.to_hex())
    }
}

impl FromStr for Head {
    type Err = String;

    /// `SEQ:HASH`, the hash in full (64 lowercase hex digits).
    fn from_str(text: &str) -> Result<Head, String> {
        let (seq, hash) = text
            .trim()
            .split_once(':')
            .ok_or_else(|| format!("`{text}` is not SEQ:HASH"))?;
        let seq = seq
            .parse()
            .map_err(|_| format!("`{seq}` in `{text}` is not an event number"))?;
        let hash = hash
            .parse()
            .map_err(|e| format!("`{hash}` in `{text}` is not a hash: {e}"))?;
        Ok(Head { seq, hash })
    }
}

/// Where an expected head came from, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeadSource {
    /// The workspace's `.trellis/head`.
    Witness(PathBuf),
    /// A head the user kept and passed back (`--expect-head`).
    Expected,
}

impl fmt::Display for HeadSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeadSource::Witness(path) => write!(f, "the head witness {}", path.display()),
            HeadSource::Expected => f.write_str("the expected head"),
        }
    }
}

/// Leaves `head` as the witness in the checked `.trellis/` directory.
pub(super) fn record(state: &Dir, head: Head) -> Result<(), StateError> {
    state.write_atomic_lagging(WITNESS_FILE, format!("{head}\n").as_bytes())
}

/// The witness in `.trellis/`, if one was ever written.
pub(super) fn read(state: &Dir) -> Result<Option<Head>, String> {
    let path = state.join(WITNESS_FILE);
    // `SEQ:HASH\n` is under 100 bytes; anything much larger is not a witness.
    let read = state.read_at_most(WITNESS_FILE, 4 << 10);
    let Some(bytes) = read.map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    String::from_utf8_lossy(&bytes)
        .parse()
        .map(Some)
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_reads_back_from_its_display() {
        let head = Head {
            seq: 42,
            hash: crate::digest::CanonicalHasher::new("test")
                .str("x")
                .finish(),
        };
        assert_eq!(head.to_string().parse::<Head>(), Ok(head));
    }

    #[test]
    fn malformed_heads_are_refused_naming_the_part() {
        assert!("42".parse::<Head>().unwrap_err().contains("SEQ:HASH"));
        let err = format!("x:{}", Digest::ZERO.to_hex())
            .parse::<Head>()
            .unwrap_err();
        assert!(err.contains("`x`"), "{err}");
        assert!("3:abc".parse::<Head>().unwrap_err().contains("`abc`"));
    }

    #[test]
    fn a_link_planted_at_the_witness_is_refused_and_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let state = crate::statedir::open_state(dir.path()).unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, state.join(WITNESS_FILE)).unwrap();
        let head = Head {
            seq: 1,
            hash: Digest::ZERO,
        };
        assert!(matches!(record(&state, head), Err(StateError::Symlink(_))));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(read(&state).is_err(), "reading does not follow it either");
    }
}
