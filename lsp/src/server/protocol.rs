//! Trellis's own vocabulary on top of LSP: command names and arguments, the
//! `trellis/searchStatus` notification and the `trellis/branchFile` request.
//!
//! The core flows need none of the custom messages (diagnostics, code
//! actions, commands and `workspace/applyEdit` are enough); they only let a
//! client that knows them render more.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tower_lsp_server::ls_types::notification::Notification;

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
    },
    /// `None` cancels every running repair.
    Cancel {
        cluster: Option<String>,
    },
    Preview(RepairRef),
    Apply(RepairRef),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterArg {
    cluster: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RepairArg {
    repair_id: String,
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
                let arg =
                    first.ok_or_else(|| format!("{command}: expected [{{ \"cluster\": id }}]"))?;
                let arg: ClusterArg =
                    serde_json::from_value(arg).map_err(|e| bad(e, "[{ \"cluster\": id }]"))?;
                Ok(ServerCommand::Start {
                    cluster: arg.cluster,
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
    /// `running`, `failed`, the engine's final status (`hard_pass`,
    /// `residuals_remain`, `no_eligible_candidate`, `bound_reached`,
    /// `already_clean`, `cancelled`), or `applied` once the editor's
    /// documents reached the verified repair's final state.
    pub status: String,
    /// Accepted steps so far.
    pub steps: usize,
    /// Branches opened across all steps.
    pub branches: usize,
    pub summary: String,
    /// The engine's step reports (the forest), for clients that draw it.
    pub forest: Value,
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
    /// `modify`, `create`, `delete`, or `unchanged`.
    pub change: String,
}

/// What a code action's `data` carries to `codeAction/resolve`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyActionData {
    pub trellis_apply: String,
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
                cluster: "c-1".into()
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
