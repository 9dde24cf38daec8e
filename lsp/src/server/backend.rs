//! The LSP handlers: each translates one message for the actor and returns.
//!
//! Requests that need an answer ask the actor (which answers from memory at
//! once); `textDocument/codeAction` never does anything else. Only the
//! answer to a chosen action (`codeAction/resolve`) does a bounded piece of
//! I/O itself. Nothing here waits on a sensor or a search.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio::sync::oneshot;
use tower_lsp_server::jsonrpc::{self, ErrorCode};
use tower_lsp_server::ls_types::{
    CodeAction, CodeActionParams, CodeActionResponse, DidChangeTextDocumentParams,
    DidCloseTextDocumentParams, DidOpenTextDocumentParams, DidSaveTextDocumentParams,
    ExecuteCommandParams, InitializeParams, InitializeResult, InitializedParams, LSPAny,
    MessageType, ServerInfo, WorkDoneProgressCancelParams,
};
use tower_lsp_server::{Client, LanguageServer};
use trellis_engine::{Engine, PromptPolicy};

use super::actor::{Actor, BranchText, Msg};
use super::capabilities::{ClientFacts, server_capabilities};
use super::paths::WorkspacePaths;
use super::protocol::{
    ApplyActionData, BranchChange, BranchFileParams, BranchFileResult, BundleVersionsParams,
    BundleVersionsResult, ListBundlesParams, ListBundlesResult, ServerCommand, StatusParams,
    StatusResult,
};
use super::tasks::{Shared, prepare_apply, report_refusal};

pub struct Backend {
    client: Client,
    /// The prompt policy from the command line, applied when the engine opens.
    prompts: PromptPolicy,
    running: OnceLock<Running>,
}

/// What exists once `initialize` succeeded.
struct Running {
    shared: Arc<Shared>,
    tx: UnboundedSender<Msg>,
}

impl Backend {
    pub fn new(client: Client, prompts: PromptPolicy) -> Backend {
        Backend {
            client,
            prompts,
            running: OnceLock::new(),
        }
    }

    fn running(&self) -> jsonrpc::Result<&Running> {
        self.running.get().ok_or_else(|| jsonrpc::Error {
            code: ErrorCode::ServerError(-32002),
            message: "the server is not initialized".into(),
            data: None,
        })
    }

    /// Hands a notification's content to the actor.
    fn tell(&self, msg: Msg) {
        if let Some(running) = self.running.get() {
            let _ = running.tx.send(msg);
        }
    }

    /// Asks the actor and waits for its (immediate) answer.
    async fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Msg) -> jsonrpc::Result<T> {
        let running = self.running()?;
        let (reply, answer) = oneshot::channel();
        running
            .tx
            .send(make(reply))
            .map_err(|_| internal("the document state task has stopped"))?;
        answer
            .await
            .map_err(|_| internal("the document state task has stopped"))
    }

    /// `window/showMessage` while `initialize` runs: the client library
    /// drops notifications before the handshake completes, but the user must
    /// see why the server refused to start.
    async fn show_message_during_initialize(&self, message: &str) {
        use tower_service::Service as _;
        let notification = jsonrpc::Request::build("window/showMessage")
            .params(json!({ "type": 1, "message": message }))
            .finish();
        let _ = self.client.clone().call(notification).await;
    }

    /// `trellis/branchFile`: a file's text as the repair left it.
    pub async fn branch_file(&self, params: BranchFileParams) -> jsonrpc::Result<BranchFileResult> {
        match self
            .ask(|reply| Msg::BranchFile { params, reply })
            .await??
        {
            BranchText::Known(result) => Ok(result),
            BranchText::Unchanged(path) => {
                let text = tokio::fs::read_to_string(&path)
                    .await
                    .map_err(|e| internal(&format!("{}: {e}", path.display())))?;
                Ok(BranchFileResult {
                    text,
                    change: BranchChange::Unchanged,
                })
            }
        }
    }

    /// `trellis/bundles`: the workspace's prompt bundles, as the store has them now.
    pub async fn list_bundles(
        &self,
        _params: ListBundlesParams,
    ) -> jsonrpc::Result<ListBundlesResult> {
        let shared = self.running()?.shared.clone();
        let rows = tokio::task::spawn_blocking(move || shared.engine.bundle_store().list())
            .await
            .map_err(|e| internal(&e.to_string()))?
            .map_err(|e| invalid_params(e.to_string()))?;
        Ok(ListBundlesResult {
            bundles: rows.into_iter().map(Into::into).collect(),
        })
    }

    /// `trellis/bundleVersions`: one id's retained versions and default history.
    pub async fn bundle_versions(
        &self,
        params: BundleVersionsParams,
    ) -> jsonrpc::Result<BundleVersionsResult> {
        let shared = self.running()?.shared.clone();
        let id = params.id.clone();
        let (versions, defaults) = tokio::task::spawn_blocking(move || {
            let store = shared.engine.bundle_store();
            Ok::<_, trellis_engine::bundles::BundleError>((
                store.versions(&id)?,
                store.history(&id)?,
            ))
        })
        .await
        .map_err(|e| internal(&e.to_string()))?
        .map_err(|e| invalid_params(e.to_string()))?;
        Ok(BundleVersionsResult {
            id: params.id,
            versions: versions.into_iter().map(Into::into).collect(),
            defaults: defaults.into_iter().map(Into::into).collect(),
        })
    }

    /// `trellis/status`: the last search and an interrupted write, read
    /// from the ledger and the promotion journal as they are now.
    pub async fn status(&self, _params: StatusParams) -> jsonrpc::Result<StatusResult> {
        let shared = self.running()?.shared.clone();
        let status = tokio::task::spawn_blocking(move || shared.engine.status())
            .await
            .map_err(|e| internal(&e.to_string()))?
            .map_err(|e| internal(&e.to_string()))?;
        Ok(StatusResult::from(&status))
    }

    /// `window/workDoneProgress/cancel` (the trait has no slot for it).
    pub async fn work_done_progress_cancel(&self, params: WorkDoneProgressCancelParams) {
        self.tell(Msg::CancelProgress(params.token));
    }
}

fn internal(message: &str) -> jsonrpc::Error {
    jsonrpc::Error {
        code: ErrorCode::InternalError,
        message: message.to_owned().into(),
        data: None,
    }
}

fn invalid_params(message: String) -> jsonrpc::Error {
    jsonrpc::Error {
        code: ErrorCode::InvalidParams,
        message: message.into(),
        data: None,
    }
}

/// The workspace root: the first workspace folder, else the root URI.
fn workspace_root(params: &InitializeParams) -> Result<PathBuf, String> {
    let folder = params
        .workspace_folders
        .as_ref()
        .and_then(|folders| folders.first())
        .map(|folder| &folder.uri);
    #[allow(deprecated)] // Older clients (Neovim 0.7) send only `rootUri`.
    let uri = folder.or(params.root_uri.as_ref()).ok_or_else(|| {
        "trellis needs a workspace: the client sent neither `workspaceFolders` nor `rootUri`"
            .to_owned()
    })?;
    uri.to_file_path()
        .map(|p| p.into_owned())
        .ok_or_else(|| format!("the workspace `{}` is not a local folder", uri.as_str()))
}

impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> jsonrpc::Result<InitializeResult> {
        let root = workspace_root(&params).map_err(invalid_params)?;
        let facts =
            ClientFacts::from_capabilities(&params.capabilities, params.client_info.as_ref());
        let options = params.initialization_options.clone();
        let opened = {
            let root = root.clone();
            let prompts = self.prompts;
            tokio::task::spawn_blocking(move || {
                // The server re-roots on every save: watch the workspace.
                Engine::open_with(&root, options, prompts).inspect(Engine::watch_workspace)
            })
            .await
        };
        let engine = match opened {
            Ok(Ok(engine)) => Arc::new(engine),
            Ok(Err(e)) => {
                let message = format!("Trellis cannot start: {e}");
                self.show_message_during_initialize(&message).await;
                return Err(jsonrpc::Error {
                    code: ErrorCode::InvalidParams,
                    message: message.into(),
                    data: Some(json!({ "retry": false })),
                });
            }
            Err(e) => return Err(internal(&format!("opening the engine failed: {e}"))),
        };
        tracing::info!("workspace {} with {facts:?}", root.display());

        let shared = Arc::new(Shared {
            engine,
            client: self.client.clone(),
            facts: facts.clone(),
            paths: WorkspacePaths::new(root),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(Actor::new(shared.clone(), tx.clone()).run(rx));
        if self.running.set(Running { shared, tx }).is_err() {
            return Err(jsonrpc::Error::invalid_request());
        }
        Ok(InitializeResult {
            capabilities: server_capabilities(facts.encoding),
            server_info: Some(ServerInfo {
                name: "trellis".into(),
                version: Some(env!("CARGO_PKG_VERSION").into()),
            }),
            offset_encoding: None,
        })
    }

    async fn initialized(&self, _: InitializedParams) {
        self.client
            .log_message(MessageType::INFO, "trellis language server ready")
            .await;
    }

    async fn shutdown(&self) -> jsonrpc::Result<()> {
        if self.running.get().is_some() {
            self.ask(|reply| Msg::Shutdown { reply }).await?;
        }
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        let doc = params.text_document;
        self.tell(Msg::Open {
            uri: doc.uri,
            version: doc.version,
            text: doc.text,
        });
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        self.tell(Msg::Change {
            uri: params.text_document.uri,
            version: params.text_document.version,
            changes: params.content_changes,
        });
    }

    async fn did_save(&self, params: DidSaveTextDocumentParams) {
        self.tell(Msg::Save {
            uri: params.text_document.uri,
        });
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        self.tell(Msg::Close {
            uri: params.text_document.uri,
        });
    }

    async fn code_action(
        &self,
        params: CodeActionParams,
    ) -> jsonrpc::Result<Option<CodeActionResponse>> {
        // Answered from the actor's state alone: clients send this on every
        // cursor move and wait for it (see `Actor::code_actions`).
        let actions = self
            .ask(|reply| Msg::CodeActions {
                params: Box::new(params),
                reply,
            })
            .await?;
        Ok((!actions.is_empty()).then_some(actions))
    }

    async fn code_action_resolve(&self, mut action: CodeAction) -> jsonrpc::Result<CodeAction> {
        let Some(data) = action
            .data
            .clone()
            .and_then(|d| serde_json::from_value::<ApplyActionData>(d).ok())
        else {
            return Ok(action);
        };
        let shared = self.running()?.shared.clone();
        let request = match self
            .ask(|reply| Msg::PrepareApply {
                repair_id: data.trellis_apply,
                reply,
            })
            .await?
        {
            Ok(request) => request,
            Err(e) => {
                self.client
                    .show_message(MessageType::ERROR, format!("Trellis cannot apply: {e}."))
                    .await;
                return Ok(action);
            }
        };
        let outcome = request.outcome.clone();
        match prepare_apply(&shared, request).await {
            Ok(edit) => action.edit = Some(edit),
            Err(refusal) => report_refusal(&shared, &outcome, refusal).await,
        }
        Ok(action)
    }

    async fn execute_command(
        &self,
        params: ExecuteCommandParams,
    ) -> jsonrpc::Result<Option<LSPAny>> {
        self.running()?;
        let command =
            ServerCommand::parse(&params.command, &params.arguments).map_err(invalid_params)?;
        self.tell(Msg::Command(command));
        Ok(None::<Value>)
    }
}
