//! What the client can do, read once at `initialize`, and what we offer.
//!
//! Editors differ in ways that change what the server must send (Helix has
//! no change annotations and no `showDocument`; Neovim before 0.12 ignores
//! annotations; VS Code resolves code-action edits lazily). Every such choice
//! reads one field of [`ClientFacts`] instead of digging through the nested
//! capability structs at the call site.
//!
//! How a finished repair reaches the user is decided here too, and never by
//! a prompt that takes the keyboard: `window/showMessageRequest` is sent only
//! to clients that render it without blocking (VS Code's notification
//! toasts). Neovim's default handler is a modal `inputlist()`, so a client
//! that names itself Neovim never gets one, with or without the plugin; a
//! client whose plugin announces `trellis/searchStatus` itself says so with
//! the experimental capability [`ANNOUNCES_SEARCH_STATUS`] and gets neither
//! the prompt nor the announcement message.

use tower_lsp_server::ls_types::{
    ClientCapabilities, ClientInfo, CodeActionKind, CodeActionOptions,
    CodeActionProviderCapability, ExecuteCommandOptions, ResourceOperationKind, SaveOptions,
    ServerCapabilities, TextDocumentSyncCapability, TextDocumentSyncKind, TextDocumentSyncOptions,
    TextDocumentSyncSaveOptions, WorkDoneProgressOptions,
};

use super::encoding::PositionEncoding;
use super::protocol::Commands;

/// The client capabilities the server's behaviour depends on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientFacts {
    pub encoding: PositionEncoding,
    /// `window.workDoneProgress`: we may create progress tokens.
    pub work_done_progress: bool,
    /// `window.showDocument.support`.
    pub show_document: bool,
    /// `window.showMessage`: the client renders `showMessageRequest` actions.
    pub message_actions: bool,
    /// Code actions may be `CodeAction` literals, not only `Command`s.
    pub code_action_literals: bool,
    /// `codeAction/resolve` can fill in `edit` (and `data` round-trips).
    pub resolve_edit: bool,
    /// `WorkspaceEdit.documentChanges` with versioned document edits.
    pub document_changes: bool,
    /// `create` and `delete` resource operations in `documentChanges`.
    pub file_operations: bool,
    /// `workspace.workspaceEdit.changeAnnotationSupport`.
    pub change_annotations: bool,
    /// `publishDiagnostics.relatedInformation`.
    pub related_information: bool,
    /// The client tells the user about `trellis/searchStatus` itself
    /// (`experimental.trellis.announcesSearchStatus`): the server does not
    /// also announce the end of a search with `window/showMessage`.
    pub announces_itself: bool,
    /// Offer Preview/Apply buttons with `window/showMessageRequest` when a
    /// verified repair is ready: only where the buttons do not block.
    pub ready_prompt: bool,
}

/// `capabilities.experimental.trellis.<this>: true` — the client's plugin
/// renders the search's status and outcome itself.
pub const ANNOUNCES_SEARCH_STATUS: &str = "announcesSearchStatus";

/// Clients (by `clientInfo.name`) whose `showMessageRequest` rendering is
/// modal: Neovim's default handler waits in `inputlist()` and takes the
/// keys the user is typing as its answer.
const MODAL_PROMPT_CLIENTS: [&str; 2] = ["neovim", "nvim"];

fn renders_prompts_modally(client: Option<&ClientInfo>) -> bool {
    client.is_some_and(|c| {
        MODAL_PROMPT_CLIENTS
            .iter()
            .any(|name| c.name.eq_ignore_ascii_case(name))
    })
}

impl ClientFacts {
    /// The facts of a client that sent `caps` and named itself `client`.
    pub fn from_capabilities(
        caps: &ClientCapabilities,
        client: Option<&ClientInfo>,
    ) -> ClientFacts {
        let general = caps.general.as_ref();
        let window = caps.window.as_ref();
        let text = caps.text_document.as_ref();
        let code_action = text.and_then(|t| t.code_action.as_ref());
        let workspace_edit = caps
            .workspace
            .as_ref()
            .and_then(|w| w.workspace_edit.as_ref());
        let resource_ops = workspace_edit
            .and_then(|e| e.resource_operations.as_deref())
            .unwrap_or_default();

        let message_actions = window.and_then(|w| w.show_message.as_ref()).is_some();
        let announces_itself = caps
            .experimental
            .as_ref()
            .and_then(|e| e.get("trellis"))
            .and_then(|t| t.get(ANNOUNCES_SEARCH_STATUS))
            .and_then(serde_json::Value::as_bool)
            == Some(true);

        ClientFacts {
            encoding: PositionEncoding::negotiate(
                general.and_then(|g| g.position_encodings.as_deref()),
            ),
            work_done_progress: window.and_then(|w| w.work_done_progress) == Some(true),
            show_document: window
                .and_then(|w| w.show_document.as_ref())
                .is_some_and(|d| d.support),
            message_actions,
            code_action_literals: code_action
                .and_then(|c| c.code_action_literal_support.as_ref())
                .is_some(),
            resolve_edit: code_action.is_some_and(|c| {
                c.data_support == Some(true)
                    && c.resolve_support
                        .as_ref()
                        .is_some_and(|r| r.properties.iter().any(|p| p == "edit"))
            }),
            document_changes: workspace_edit.and_then(|e| e.document_changes) == Some(true),
            file_operations: resource_ops.contains(&ResourceOperationKind::Create)
                && resource_ops.contains(&ResourceOperationKind::Delete),
            change_annotations: workspace_edit
                .and_then(|e| e.change_annotation_support.as_ref())
                .is_some(),
            related_information: text
                .and_then(|t| t.publish_diagnostics.as_ref())
                .and_then(|p| p.related_information)
                == Some(true),
            announces_itself,
            ready_prompt: message_actions && !announces_itself && !renders_prompts_modally(client),
        }
    }

    /// Code-action literals without `codeAction/resolve`: an Apply action
    /// must carry its edit when it is offered.
    pub fn inline_apply_edit(&self) -> bool {
        self.code_action_literals && !self.resolve_edit
    }
}

/// The server's half of the handshake.
pub fn server_capabilities(encoding: PositionEncoding) -> ServerCapabilities {
    ServerCapabilities {
        position_encoding: Some(encoding.kind()),
        text_document_sync: Some(TextDocumentSyncCapability::Options(
            TextDocumentSyncOptions {
                open_close: Some(true),
                change: Some(TextDocumentSyncKind::INCREMENTAL),
                will_save: None,
                will_save_wait_until: None,
                save: Some(TextDocumentSyncSaveOptions::SaveOptions(SaveOptions {
                    include_text: Some(false),
                })),
            },
        )),
        code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
            code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
            work_done_progress_options: WorkDoneProgressOptions::default(),
            resolve_provider: Some(true),
        })),
        execute_command_provider: Some(ExecuteCommandOptions {
            commands: Commands::ALL.iter().map(|c| (*c).to_owned()).collect(),
            work_done_progress_options: WorkDoneProgressOptions::default(),
        }),
        ..ServerCapabilities::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts(caps: serde_json::Value) -> ClientFacts {
        ClientFacts::from_capabilities(&serde_json::from_value(caps).unwrap(), None)
    }

    fn named(name: &str) -> ClientInfo {
        ClientInfo {
            name: name.into(),
            version: None,
        }
    }

    fn with_message_buttons() -> ClientCapabilities {
        serde_json::from_value(json!({ "window": { "showMessage": {
            "messageActionItem": { "additionalPropertiesSupport": false }
        } } }))
        .unwrap()
    }

    #[test]
    fn an_empty_capability_object_gets_the_most_conservative_behaviour() {
        let f = facts(json!({}));
        assert_eq!(f.encoding, PositionEncoding::Utf16);
        assert!(!f.work_done_progress);
        assert!(!f.show_document);
        assert!(!f.message_actions);
        assert!(!f.code_action_literals);
        assert!(!f.resolve_edit);
        assert!(!f.document_changes);
        assert!(!f.file_operations);
        assert!(!f.change_annotations);
        assert!(!f.related_information);
        assert!(!f.announces_itself && !f.ready_prompt);
    }

    #[test]
    fn message_buttons_are_offered_where_they_do_not_block() {
        let caps = with_message_buttons();
        let vscode = ClientFacts::from_capabilities(&caps, Some(&named("Visual Studio Code")));
        assert!(vscode.ready_prompt && !vscode.announces_itself);
        assert!(ClientFacts::from_capabilities(&caps, None).ready_prompt);
    }

    #[test]
    fn neovim_never_gets_a_prompt_even_without_the_plugin() {
        let caps = with_message_buttons();
        for name in ["Neovim", "nvim"] {
            let f = ClientFacts::from_capabilities(&caps, Some(&named(name)));
            assert!(f.message_actions, "{name} still renders showMessage");
            assert!(!f.ready_prompt, "{name} renders showMessageRequest modally");
            assert!(
                !f.announces_itself,
                "without the plugin the server announces"
            );
        }
    }

    #[test]
    fn a_plugin_that_announces_itself_gets_neither_prompt_nor_announcement() {
        let mut caps = with_message_buttons();
        caps.experimental = Some(json!({ "trellis": { "announcesSearchStatus": true } }));
        let f = ClientFacts::from_capabilities(&caps, Some(&named("Visual Studio Code")));
        assert!(f.announces_itself && !f.ready_prompt);
        caps.experimental = Some(json!({ "trellis": { "announcesSearchStatus": "yes" } }));
        let f = ClientFacts::from_capabilities(&caps, None);
        assert!(!f.announces_itself, "only `true` counts");
    }

    #[test]
    fn a_vs_code_like_client_gets_resolve_annotations_and_utf16() {
        let f = facts(json!({
            "general": { "positionEncodings": ["utf-16"] },
            "window": {
                "workDoneProgress": true,
                "showDocument": { "support": true },
                "showMessage": { "messageActionItem": { "additionalPropertiesSupport": true } }
            },
            "textDocument": {
                "codeAction": {
                    "codeActionLiteralSupport": { "codeActionKind": { "valueSet": ["quickfix"] } },
                    "dataSupport": true,
                    "resolveSupport": { "properties": ["edit"] }
                },
                "publishDiagnostics": { "relatedInformation": true }
            },
            "workspace": { "workspaceEdit": {
                "documentChanges": true,
                "resourceOperations": ["create", "rename", "delete"],
                "changeAnnotationSupport": { "groupsOnLabel": true }
            } }
        }));
        assert_eq!(f.encoding, PositionEncoding::Utf16);
        assert!(f.work_done_progress && f.show_document && f.message_actions);
        assert!(f.code_action_literals && f.resolve_edit);
        assert!(f.document_changes && f.file_operations && f.change_annotations);
        assert!(f.related_information);
    }

    #[test]
    fn resolve_without_data_support_is_not_relied_on() {
        let f = facts(json!({ "textDocument": { "codeAction": {
            "resolveSupport": { "properties": ["edit"] }
        } } }));
        assert!(!f.resolve_edit);
    }

    #[test]
    fn a_helix_like_client_offering_utf8_gets_utf8_and_inline_edits() {
        let f = facts(json!({
            "general": { "positionEncodings": ["utf-8", "utf-32", "utf-16"] },
            "window": { "workDoneProgress": true },
            "textDocument": { "codeAction": {
                "codeActionLiteralSupport": { "codeActionKind": { "valueSet": ["quickfix"] } },
                "dataSupport": true
            } },
            "workspace": { "workspaceEdit": {
                "documentChanges": true,
                "resourceOperations": ["create", "rename", "delete"]
            } }
        }));
        assert_eq!(f.encoding, PositionEncoding::Utf8);
        assert!(!f.resolve_edit && !f.change_annotations && !f.show_document);
    }

    #[test]
    fn server_capabilities_announce_the_encoding_and_every_command() {
        let caps = serde_json::to_value(server_capabilities(PositionEncoding::Utf8)).unwrap();
        assert_eq!(caps["positionEncoding"], "utf-8");
        assert_eq!(caps["textDocumentSync"]["change"], 2);
        assert_eq!(caps["codeActionProvider"]["resolveProvider"], true);
        let commands = caps["executeCommandProvider"]["commands"]
            .as_array()
            .unwrap();
        assert_eq!(commands.len(), Commands::ALL.len());
    }
}
