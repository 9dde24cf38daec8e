//! Trellis's own vocabulary on top of LSP, the wire's types: command names
//! and arguments, the `trellis/searchStatus` notification and its states,
//! the `trellis/branchFile` request, the `data` of our diagnostics and code
//! actions. Every shape here is documented in `docs/lsp-extensions.md`
//! (checked by `tests::every_extension_is_documented`).
//!
//! The core flows need none of the custom messages (diagnostics, code
//! actions, commands and `workspace/applyEdit` are enough); they only let a
//! client that knows them render more.
//!
//! These types are the server's own: engine values are converted into them
//! explicitly (`From`, [`forest`]), never serialized as they are, so the
//! wire changes only when this module does.

mod bundles;
mod forest;
mod status;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tower_lsp_server::ls_types::notification::Notification;
use trellis_engine::RepairStatus;

pub use bundles::{
    BundleVersions, BundleVersionsParams, BundleVersionsResult, ListBundles, ListBundlesParams,
    ListBundlesResult,
};
pub use forest::{ForestStep, forest};
pub use status::{Status, StatusParams, StatusResult};

/// The commands `workspace/executeCommand` accepts.
pub struct Commands;

impl Commands {
    /// `[{ "cluster": id }]`: start a repair of that cluster; returns at once.
    pub const START: &'static str = "trellis.repair.start";
    /// `[]` cancels every running repair; `[{ "cluster": id }]` that cluster's.
    pub const CANCEL: &'static str = "trellis.repair.cancel";
    /// `[{ "repair_id": id }]` (or `[]`: the latest verified repair): write the
    /// diff to `.trellis/previews/<id>.diff` and show it.
    pub const PREVIEW: &'static str = "trellis.repair.preview";
    /// `[{ "repair_id": id }]` (or `[]`: the latest): check the view is still
    /// the one the repair started from, then send `workspace/applyEdit`.
    pub const APPLY: &'static str = "trellis.repair.apply";

    pub const ALL: [&'static str; 4] = [
        Commands::START,
        Commands::CANCEL,
        Commands::PREVIEW,
        Commands::APPLY,
    ];
}

/// Which finished repair a command means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RepairRef {
    Id(String),
    /// The most recent repair that reached a hard pass.
    Latest,
}

/// A parsed `workspace/executeCommand`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerCommand {
    Start {
        cluster: String,
        /// Prompt-bundle refs, resolved once when the repair starts.
        bundles: Vec<String>,
    },
    /// `None` cancels every running repair.
    Cancel {
        cluster: Option<String>,
    },
    Preview(RepairRef),
    Apply(RepairRef),
}

/// The argument of `trellis.repair.start` and `trellis.repair.cancel`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterArg {
    pub cluster: String,
}

/// The argument of `trellis.repair.start`: the cluster, and optionally
/// the prompt bundles to attach (`id`, `id@N`, `id@sha256:…`).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartArg {
    pub cluster: String,
    #[serde(default)]
    pub bundles: Vec<String>,
}

/// The argument of `trellis.repair.preview` and `trellis.repair.apply`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepairArg {
    pub repair_id: String,
}

/// `[{ "cluster": id }]`, the arguments of a command about a cluster.
pub fn cluster_arguments(cluster: &str) -> Vec<Value> {
    vec![to_json(&ClusterArg {
        cluster: cluster.to_owned(),
    })]
}

/// `[{ "repair_id": id }]`, the arguments of a command about a repair.
pub fn repair_arguments(repair_id: &str) -> Vec<Value> {
    vec![to_json(&RepairArg {
        repair_id: repair_id.to_owned(),
    })]
}

/// Our wire types are plain structs of strings and numbers: serializing
/// them cannot fail.
fn to_json(value: &impl Serialize) -> Value {
    serde_json::to_value(value).expect("a wire type serializes")
}

impl ServerCommand {
    /// Parses a command and its arguments; the error says what was expected.
    pub fn parse(command: &str, arguments: &[Value]) -> Result<ServerCommand, String> {
        let first = match arguments {
            [] => None,
            [one] => Some(one.clone()),
            _ => {
                return Err(format!(
                    "{command}: expected at most one argument object, got {}",
                    arguments.len()
                ));
            }
        };
        let bad = |e: serde_json::Error, shape: &str| format!("{command}: expected {shape}: {e}");
        match command {
            Commands::START => {
                let shape = "[{ \"cluster\": id, \"bundles\"?: [ref] }]";
                let arg = first.ok_or_else(|| format!("{command}: expected {shape}"))?;
                let arg: StartArg = serde_json::from_value(arg).map_err(|e| bad(e, shape))?;
                Ok(ServerCommand::Start {
                    cluster: arg.cluster,
                    bundles: arg.bundles,
                })
            }
            Commands::CANCEL => {
                let cluster = first
                    .map(serde_json::from_value::<ClusterArg>)
                    .transpose()
                    .map_err(|e| bad(e, "[] or [{ \"cluster\": id }]"))?
                    .map(|a| a.cluster);
                Ok(ServerCommand::Cancel { cluster })
            }
            Commands::PREVIEW | Commands::APPLY => {
                let repair = match first {
                    None => RepairRef::Latest,
                    Some(arg) => RepairRef::Id(
                        serde_json::from_value::<RepairArg>(arg)
                            .map_err(|e| bad(e, "[] or [{ \"repair_id\": id }]"))?
                            .repair_id,
                    ),
                };
                Ok(if command == Commands::PREVIEW {
                    ServerCommand::Preview(repair)
                } else {
                    ServerCommand::Apply(repair)
                })
            }
            other => Err(format!(
                "unknown command `{other}`; trellis knows {}",
                Commands::ALL.join(", ")
            )),
        }
    }
}

/// `trellis/searchStatus`: the state of one repair search, sent when it
/// starts and when it ends.
pub enum SearchStatus {}

/// `trellis/branchFile`, a request from the client.
pub enum BranchFile {}

impl tower_lsp_server::ls_types::request::Request for BranchFile {
    type Params = BranchFileParams;
    type Result = BranchFileResult;
    const METHOD: &'static str = "trellis/branchFile";
}

impl Notification for SearchStatus {
    type Params = SearchStatusParams;
    const METHOD: &'static str = "trellis/searchStatus";
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchStatusParams {
    /// The engine's repair id, once the search has ended.
    pub repair_id: Option<String>,
    /// The server's handle for the search (also its progress token); absent
    /// for `applied`, which concerns the repair rather than the search.
    pub job: Option<String>,
    pub cluster: String,
    pub cluster_title: String,
    pub status: SearchState,
    /// Accepted steps so far.
    pub steps: usize,
    /// Branches opened across all steps.
    pub branches: usize,
    pub summary: String,
    /// The steps and their branches, for clients that draw them; `null`
    /// until the search has ended.
    pub forest: Option<Vec<ForestStep>>,
}

/// The `status` of `trellis/searchStatus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchState {
    /// The search started.
    Running,
    /// The search could not run (the engine returned an error).
    Failed,
    /// The view already hard-passes: nothing to do.
    AlreadyClean,
    /// A verified repair is ready to apply.
    HardPass,
    /// Steps were accepted but residuals remain.
    ResidualsRemain,
    NoEligibleCandidate,
    /// The decision bound was reached.
    BoundReached,
    Cancelled,
    /// The editor's documents reached the verified repair's final state.
    Applied,
}

impl SearchState {
    #[cfg(test)]
    pub const ALL: [SearchState; 9] = [
        SearchState::Running,
        SearchState::Failed,
        SearchState::AlreadyClean,
        SearchState::HardPass,
        SearchState::ResidualsRemain,
        SearchState::NoEligibleCandidate,
        SearchState::BoundReached,
        SearchState::Cancelled,
        SearchState::Applied,
    ];
}

impl From<RepairStatus> for SearchState {
    fn from(status: RepairStatus) -> SearchState {
        match status {
            RepairStatus::AlreadyClean => SearchState::AlreadyClean,
            RepairStatus::HardPass => SearchState::HardPass,
            RepairStatus::ResidualsRemain => SearchState::ResidualsRemain,
            RepairStatus::NoEligibleCandidate => SearchState::NoEligibleCandidate,
            RepairStatus::BoundReached => SearchState::BoundReached,
            RepairStatus::Cancelled => SearchState::Cancelled,
        }
    }
}

/// `trellis/branchFile`: a file's text as the repair left it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BranchFileParams {
    pub repair_id: String,
    /// Workspace-relative (`src/lib.rs`), or a `file://` URI inside the workspace.
    pub path: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BranchFileResult {
    /// The repaired text; empty when the repair deletes the file.
    pub text: String,
    pub change: BranchChange,
}

/// What the repair does to the file `trellis/branchFile` asked about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BranchChange {
    Modify,
    Create,
    Delete,
    Unchanged,
}

impl BranchChange {
    #[cfg(test)]
    pub const ALL: [BranchChange; 4] = [
        BranchChange::Modify,
        BranchChange::Create,
        BranchChange::Delete,
        BranchChange::Unchanged,
    ];
}

/// What our diagnostics carry in `data`: the cluster they belong to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiagnosticData {
    pub cluster: String,
}

impl DiagnosticData {
    pub fn value(cluster: &str) -> Value {
        to_json(&DiagnosticData {
            cluster: cluster.to_owned(),
        })
    }
}

/// What a code action's `data` carries to `codeAction/resolve`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyActionData {
    pub trellis_apply: String,
}

impl ApplyActionData {
    pub fn value(repair_id: &str) -> Value {
        to_json(&ApplyActionData {
            trellis_apply: repair_id.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn commands_parse_their_documented_arguments() {
        assert_eq!(
            ServerCommand::parse(Commands::START, &[json!({ "cluster": "c-1" })]),
            Ok(ServerCommand::Start {
                cluster: "c-1".into(),
                bundles: Vec::new(),
            })
        );
        assert_eq!(
            ServerCommand::parse(
                Commands::START,
                &[json!({ "cluster": "c-1", "bundles": ["terse@2"] })]
            ),
            Ok(ServerCommand::Start {
                cluster: "c-1".into(),
                bundles: vec!["terse@2".into()],
            })
        );
        assert_eq!(
            ServerCommand::parse(Commands::CANCEL, &[]),
            Ok(ServerCommand::Cancel { cluster: None })
        );
        assert_eq!(
            ServerCommand::parse(Commands::APPLY, &[json!({ "repair_id": "r-9" })]),
            Ok(ServerCommand::Apply(RepairRef::Id("r-9".into())))
        );
        assert_eq!(
            ServerCommand::parse(Commands::PREVIEW, &[]),
            Ok(ServerCommand::Preview(RepairRef::Latest))
        );
    }

    /// rust-analyzer's check, ours: every method, command, state, data field
    /// and capability the server defines is named in the document clients
    /// are written against.
    #[test]
    fn every_extension_is_documented() {
        let doc = include_str!("../../../docs/lsp-extensions.md");
        let mut names: Vec<String> = vec![
            SearchStatus::METHOD.to_owned(),
            <BranchFile as tower_lsp_server::ls_types::request::Request>::METHOD.to_owned(),
            <ListBundles as tower_lsp_server::ls_types::request::Request>::METHOD.to_owned(),
            <BundleVersions as tower_lsp_server::ls_types::request::Request>::METHOD.to_owned(),
            <Status as tower_lsp_server::ls_types::request::Request>::METHOD.to_owned(),
            "interrupted_promotion".to_owned(),
            "bundles".to_owned(),
            format!(
                "experimental.trellis.{}",
                super::super::capabilities::ANNOUNCES_SEARCH_STATUS
            ),
            "trellis_apply".to_owned(),
            "repair_id".to_owned(),
            "cluster".to_owned(),
        ];
        names.extend(Commands::ALL.iter().map(|c| (*c).to_owned()));
        names.extend(SearchState::ALL.iter().map(wire_name));
        names.extend(BranchChange::ALL.iter().map(wire_name));
        names.extend(status::WriteState::ALL.iter().map(wire_name));
        names.extend(status::NextStart::ALL.iter().map(wire_name));
        for name in names {
            assert!(
                doc.contains(&format!("`{name}`")),
                "docs/lsp-extensions.md does not document `{name}`"
            );
        }
    }

    /// `ALL` lists every variant: this match stops compiling when one is added.
    #[test]
    fn the_state_lists_are_complete() {
        for (i, state) in SearchState::ALL.iter().enumerate() {
            let position = match state {
                SearchState::Running => 0,
                SearchState::Failed => 1,
                SearchState::AlreadyClean => 2,
                SearchState::HardPass => 3,
                SearchState::ResidualsRemain => 4,
                SearchState::NoEligibleCandidate => 5,
                SearchState::BoundReached => 6,
                SearchState::Cancelled => 7,
                SearchState::Applied => 8,
            };
            assert_eq!(position, i);
        }
        for (i, change) in BranchChange::ALL.iter().enumerate() {
            let position = match change {
                BranchChange::Modify => 0,
                BranchChange::Create => 1,
                BranchChange::Delete => 2,
                BranchChange::Unchanged => 3,
            };
            assert_eq!(position, i);
        }
    }

    fn wire_name(value: &impl Serialize) -> String {
        serde_json::to_value(value)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .expect("a unit variant serializes as a string")
    }

    /// A search that has not ended has no repair and no forest: both `null`.
    #[test]
    fn a_running_search_status_has_the_documented_shape() {
        let params = SearchStatusParams {
            repair_id: None,
            job: Some("trellis-repair-1".into()),
            cluster: "c-1".into(),
            cluster_title: "cannot find `HashMap`".into(),
            status: SearchState::Running,
            steps: 0,
            branches: 0,
            summary: String::new(),
            forest: None,
        };
        assert_eq!(
            serde_json::to_value(params).unwrap(),
            json!({
                "repair_id": null, "job": "trellis-repair-1", "cluster": "c-1",
                "cluster_title": "cannot find `HashMap`", "status": "running",
                "steps": 0, "branches": 0, "summary": "", "forest": null
            })
        );
    }

    /// The engine's final statuses keep the names clients already match on.
    #[test]
    fn final_states_keep_the_engine_status_names() {
        for status in [
            RepairStatus::AlreadyClean,
            RepairStatus::HardPass,
            RepairStatus::ResidualsRemain,
            RepairStatus::NoEligibleCandidate,
            RepairStatus::BoundReached,
            RepairStatus::Cancelled,
        ] {
            assert_eq!(wire_name(&SearchState::from(status)), wire_name(&status));
        }
    }

    #[test]
    fn bad_arguments_name_the_command_and_the_expected_shape() {
        let err = ServerCommand::parse(Commands::START, &[]).unwrap_err();
        assert!(
            err.contains("trellis.repair.start") && err.contains("cluster"),
            "{err}"
        );
        let err = ServerCommand::parse(Commands::APPLY, &[json!({ "repair": 1 })]).unwrap_err();
        assert!(err.contains("repair_id"), "{err}");
        let err = ServerCommand::parse("trellis.nope", &[]).unwrap_err();
        assert!(
            err.contains("trellis.nope") && err.contains(Commands::APPLY),
            "{err}"
        );
    }
}
