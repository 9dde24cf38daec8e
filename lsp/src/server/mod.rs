//! `trellis lsp`: the language server over stdio.
//!
//! The server translates; the engine decides. Documents become a
//! [`View`](trellis_engine::View), sensing reports become
//! `publishDiagnostics`, clusters become Repair code actions, a hard-passing
//! repair becomes an Apply code action carrying a `WorkspaceEdit`, and the
//! document state that follows confirms the promotion.
//!
//! Map of the module:
//! - [`backend`]: LSP handlers; each enqueues for the actor and returns.
//! - [`actor`]: the single task owning documents, diagnostics and repairs.
//! - [`tasks`]: sensing, repair searches, apply checks and previews.
//! - pure cores, unit-tested without a client: [`encoding`] (positions ↔
//!   bytes), [`document`] (incremental sync), [`capabilities`],
//!   [`diagnostics`], [`workspace_edit`], [`preview`], [`sensing`]
//!   (debounce and cancellation), [`paths`], [`protocol`] (commands and
//!   custom messages).
//!
//! Logs go to stderr only: stdout carries the protocol.

mod actor;
mod backend;
mod capabilities;
mod diagnostics;
mod document;
mod encoding;
mod paths;
mod preview;
pub mod protocol;
mod sensing;
mod tasks;
mod workspace_edit;

use tower_lsp_server::{LspService, Server};
use trellis_engine::PromptPolicy;

use backend::Backend;

/// Serves the language server on stdin/stdout until the client sends `exit`.
pub async fn serve_stdio(prompts: PromptPolicy) -> anyhow::Result<()> {
    let (service, socket) = LspService::build(move |client| Backend::new(client, prompts))
        .custom_method("trellis/branchFile", Backend::branch_file)
        .custom_method(
            "window/workDoneProgress/cancel",
            Backend::work_done_progress_cancel,
        )
        .finish();
    Server::new(tokio::io::stdin(), tokio::io::stdout(), socket)
        .serve(service)
        .await;
    Ok(())
}
