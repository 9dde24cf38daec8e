//! The bundle store's projection: `trellis/bundles` lists the workspace's
//! prompt bundles and `trellis/bundleVersions` one id's retained versions
//! and default history. Read-only: writing stays with `trellis bundles`,
//! and attaching with `trellis.repair.start`'s `bundles`. Engine values are
//! converted here, field by field, so the wire changes only with this file.

use serde::{Deserialize, Serialize};
use trellis_engine::bundles::{BundleSummary, DefaultChange, VersionRow};

/// `trellis/bundles`, a request from the client.
pub enum ListBundles {}

impl tower_lsp_server::ls_types::request::Request for ListBundles {
    type Params = ListBundlesParams;
    type Result = ListBundlesResult;
    const METHOD: &'static str = "trellis/bundles";
}

/// `trellis/bundleVersions`, a request from the client.
pub enum BundleVersions {}

impl tower_lsp_server::ls_types::request::Request for BundleVersions {
    type Params = BundleVersionsParams;
    type Result = BundleVersionsResult;
    const METHOD: &'static str = "trellis/bundleVersions";
}

/// No fields today: `{}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListBundlesParams {}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListBundlesResult {
    pub bundles: Vec<BundleRow>,
}

/// One bundle id: what a bare ref resolves to, and how much is retained.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleRow {
    pub id: String,
    pub default_version: u32,
    pub latest_version: u32,
    pub versions_count: u32,
    /// The default version's checksum, `sha256:…`.
    pub checksum: String,
    pub description: String,
    /// The section ids the default version replaces.
    pub sections: Vec<String>,
}

impl From<BundleSummary> for BundleRow {
    fn from(s: BundleSummary) -> BundleRow {
        BundleRow {
            id: s.id,
            default_version: s.default_version,
            latest_version: s.latest_version,
            versions_count: s.versions_count,
            checksum: s.checksum,
            description: s.description,
            sections: s.sections,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleVersionsParams {
    pub id: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleVersionsResult {
    pub id: String,
    pub versions: Vec<BundleVersion>,
    pub defaults: Vec<BundleDefault>,
}

/// One retained version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleVersion {
    pub version: u32,
    pub checksum: String,
    pub parent: Option<u32>,
    pub reason: String,
    pub origin: String,
    /// Seconds since the Unix epoch.
    pub created_at: i64,
    pub kept: bool,
    pub is_default: bool,
}

impl From<VersionRow> for BundleVersion {
    fn from(v: VersionRow) -> BundleVersion {
        BundleVersion {
            version: v.version,
            checksum: v.checksum,
            parent: v.parent,
            reason: v.reason,
            origin: v.origin,
            created_at: v.created_at,
            kept: v.kept,
            is_default: v.is_default,
        }
    }
}

/// One change of the id's default.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleDefault {
    pub version: u32,
    pub previous: Option<u32>,
    pub reason: String,
    pub at: i64,
}

impl From<DefaultChange> for BundleDefault {
    fn from(c: DefaultChange) -> BundleDefault {
        BundleDefault {
            version: c.version,
            previous: c.previous,
            reason: c.reason,
            at: c.at,
        }
    }
}
