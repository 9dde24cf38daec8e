//! The editor's repair loop as test steps on a [`Client`]: a diagnostic of
//! an open file → its Repair code action → the verified result → Apply →
//! save → the server's confirmation of the promotion.
//!
//! Each step checks the protocol facts every editor relies on (the Repair
//! action names the diagnostic's cluster, the search reports `running` and
//! ends for that cluster, the promotion is confirmed for that repair id), so
//! a test built from them asserts at least that much. What the repaired file
//! must contain, and everything particular to one editor profile, stays in
//! the test. These steps never edit a file themselves: edits arrive as the
//! server's (or the resolved action's) `WorkspaceEdit`, applied as an
//! editor would.

use serde_json::{Value, json};

use super::{Client, REPAIR_TIMEOUT, REQUEST_TIMEOUT};

/// How the editor applies a verified repair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApplyBy {
    /// Resolves the listed Apply code action and applies its edit itself
    /// (VS Code's way).
    Resolve,
    /// Runs `trellis.repair.apply`; the server sends `workspace/applyEdit`
    /// (the way of a client that runs the action's command).
    Command,
}

/// The first action of `actions` whose title starts with `prefix`.
pub fn titled<'a>(actions: &'a [Value], prefix: &str) -> Option<&'a Value> {
    actions.iter().find(|a| {
        a["title"]
            .as_str()
            .is_some_and(|title| title.starts_with(prefix))
    })
}

impl Client {
    /// Opens `rel`, waits for its diagnostics and returns the one with
    /// `code`, checked to be Trellis's and to name its cluster.
    pub fn open_for_diagnostic(&mut self, rel: &str, code: &str) -> Value {
        self.open(rel);
        let diagnostics = self.wait_for_diagnostics(0, rel, true);
        let diagnostic = diagnostics
            .iter()
            .find(|d| d["code"] == code)
            .unwrap_or_else(|| panic!("no {code} among {diagnostics:#?}"))
            .clone();
        assert_eq!(diagnostic["source"], "trellis", "{diagnostic}");
        assert!(diagnostic["data"]["cluster"].is_string(), "{diagnostic}");
        diagnostic
    }

    /// The code actions offered for `diagnostic` of `rel`, at its range.
    pub fn actions_on(&mut self, rel: &str, diagnostic: &Value) -> Vec<Value> {
        self.code_actions(rel, &diagnostic["range"], std::slice::from_ref(diagnostic))
    }

    /// Runs the Repair action offered for `diagnostic` (a quick fix running
    /// `trellis.repair.start` on its cluster) and waits until the search
    /// reports `running`; returns the index of the first notification after
    /// the start.
    pub fn start_repair_of(&mut self, rel: &str, diagnostic: &Value) -> usize {
        let cluster = diagnostic["data"]["cluster"].clone();
        let actions = self.actions_on(rel, diagnostic);
        let repair = titled(&actions, "Repair: ")
            .unwrap_or_else(|| panic!("no Repair action among {actions:#?}"));
        assert_eq!(repair["kind"], "quickfix", "{repair}");
        assert_eq!(
            repair["command"]["command"], "trellis.repair.start",
            "{repair}"
        );
        assert_eq!(
            repair["command"]["arguments"],
            json!([{ "cluster": cluster }]),
            "{repair}"
        );
        let from = self.notifications.len();
        let started = self.request(
            "workspace/executeCommand",
            json!({ "command": "trellis.repair.start", "arguments": repair["command"]["arguments"] }),
        );
        assert_eq!(started, Value::Null);
        let running = self.wait_for(from, REQUEST_TIMEOUT, "the search to start", |n| {
            n["method"] == "trellis/searchStatus" && n["params"]["status"] == "running"
        });
        assert_eq!(running["params"]["cluster"], cluster, "{running}");
        from
    }

    /// [`Client::start_repair_of`], then waits for the search of the
    /// diagnostic's cluster to end verified (`hard_pass`, at least one
    /// step); returns the repair id.
    pub fn verified_repair(&mut self, rel: &str, diagnostic: &Value) -> String {
        let cluster = diagnostic["data"]["cluster"].clone();
        let from = self.start_repair_of(rel, diagnostic);
        let ended = self.wait_for(from, REPAIR_TIMEOUT, "the search to end", |n| {
            n["method"] == "trellis/searchStatus"
                && n["params"]["cluster"] == cluster
                && !["running", "applied"]
                    .contains(&n["params"]["status"].as_str().unwrap_or_default())
        });
        assert_eq!(ended["params"]["status"], "hard_pass", "{ended}");
        assert!(ended["params"]["steps"].as_u64().unwrap() >= 1, "{ended}");
        ended["params"]["repair_id"].as_str().unwrap().to_owned()
    }

    /// Runs `trellis.repair.apply` for `repair_id` (its result is `null`)
    /// and returns the `workspace/applyEdit` the server then sent, which
    /// this client has applied as an editor does.
    pub fn apply_by_command(&mut self, repair_id: &str) -> Value {
        let requests_before = self.server_requests.len();
        let result = self.request(
            "workspace/executeCommand",
            json!({ "command": "trellis.repair.apply", "arguments": [{ "repair_id": repair_id }] }),
        );
        assert_eq!(result, Value::Null);
        self.wait_for_request(requests_before, REQUEST_TIMEOUT, "workspace/applyEdit")
    }

    /// Saves `rel` (`:w`) and waits until the server confirmed the
    /// promotion of `repair_id`: it saw the editor's documents reach the
    /// repair's final state and ledgered it.
    pub fn save_until_promoted(&mut self, rel: &str, repair_id: &str) {
        self.save(rel);
        // A repair is promoted once: its `applied` status can only follow
        // this apply, wherever it stands among the notifications.
        self.wait_for(0, REQUEST_TIMEOUT, "the promotion to be confirmed", |n| {
            n["method"] == "trellis/searchStatus"
                && n["params"]["status"] == "applied"
                && n["params"]["repair_id"] == repair_id
        });
    }

    /// The whole loop on `diagnostic` of `rel`: [`Client::verified_repair`],
    /// the Apply `by` resolve or command, then
    /// [`Client::save_until_promoted`]. Returns the repair id; the test
    /// checks the repaired file.
    pub fn repair_and_apply(&mut self, rel: &str, diagnostic: &Value, by: ApplyBy) -> String {
        let repair_id = self.verified_repair(rel, diagnostic);
        match by {
            ApplyBy::Resolve => {
                let actions = self.actions_on(rel, diagnostic);
                let apply = titled(&actions, "Apply verified repair: ")
                    .unwrap_or_else(|| panic!("no Apply among {actions:#?}"))
                    .clone();
                let resolved = self.request("codeAction/resolve", apply);
                self.apply_workspace_edit(&resolved["edit"]);
            }
            ApplyBy::Command => {
                self.apply_by_command(&repair_id);
            }
        }
        self.save_until_promoted(rel, &repair_id);
        repair_id
    }
}
