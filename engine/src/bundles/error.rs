//! Why a bundle operation was refused. Every message names the bundle (and
//! the version, file or key) and says what to do; none is a partial
//! success: a refused write stored nothing, a refused attach started nothing.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The bundle does not compile: front matter, placeholders, unknown
    /// section ids, schema or ownership. One line per problem.
    #[error("bundle `{id}` does not compile; nothing was stored:\n  {}", problems.join("\n  "))]
    Compile { id: String, problems: Vec<String> },
    /// An id that is not a valid bundle id, or content that declares another.
    #[error("{0}")]
    Namespace(String),
    /// A write past one of the store's bounds.
    #[error("bundle `{id}`: {what} is {found}, over the bound of {limit}; nothing was stored")]
    Bound {
        id: String,
        what: &'static str,
        found: usize,
        limit: usize,
    },
    /// The write was based on a version that is no longer the latest.
    #[error(
        "bundle `{id}`: this write is based on {}, but the latest version is v{latest}; \
         compare with `trellis bundles diff {id}@{latest} DIR`, then write with `--base {latest}`, \
         or pass `--force` to write over it",
        match base { Some(v) => format!("v{v}"), None => "no version (no --base given)".to_owned() }
    )]
    StaleBase {
        id: String,
        base: Option<u32>,
        latest: u32,
    },
    #[error("no bundle `{0}` in the store (see `trellis bundles list`)")]
    UnknownId(String),
    #[error("bundle `{id}` has no version v{version} (retained: {retained})")]
    UnknownVersion {
        id: String,
        version: u32,
        retained: String,
    },
    /// A checksum pin that no retained version of the id matches.
    #[error(
        "bundle `{id}`: no version has content {checksum} (the default, v{default}, has {default_checksum})"
    )]
    ChecksumMismatch {
        id: String,
        checksum: String,
        default: u32,
        default_checksum: String,
    },
    /// Stored content that no longer hashes to its recorded checksum.
    #[error(
        "bundle `{id}@{version}`: the stored content hashes to {found}, not its recorded {expected}; \
         the store in {} was changed outside trellis", path.display()
    )]
    Corrupt {
        id: String,
        version: u32,
        expected: String,
        found: String,
        path: PathBuf,
    },
    /// The consuming run cannot meet what the bundle declares it needs, or
    /// its prompt policy does not admit the bundle.
    #[error("bundle `{id}@{version}` cannot be attached to this repair: {reason}")]
    Requirement {
        id: String,
        version: u32,
        reason: String,
    },
    #[error("{0}")]
    Usage(String),
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    State(#[from] crate::statedir::StateError),
    #[error("{}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// The store's database would not open (a link, SQLite, WAL, a newer
    /// schema); names the file.
    #[error(transparent)]
    Database(#[from] crate::statedir::DatabaseError),
}
