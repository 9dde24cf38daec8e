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
//! - [`storage`]: storage collection after repairs, at quiet moments.
//! - [`framing`]: the stdio framing layer; tower-lsp-server only ever sees
//!   frames it can decode, and stdout has one writer.
//! - [`dollar_requests`]: `$/` requests, which tower-lsp-server leaves
//!   unanswered, are answered MethodNotFound.
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
mod dollar_requests;
mod encoding;
mod framing;
#[cfg(test)]
mod fuzz_tests;
mod paths;
mod preview;
pub mod protocol;
mod sensing;
mod storage;
mod tasks;
mod workspace_edit;

use tower_lsp_server::{LspService, Server};
use trellis_engine::PromptPolicy;

use backend::Backend;

/// Bytes buffered in each in-memory pipe between [`framing`] and tower-lsp-server.
const PIPE_BYTES: usize = 64 * 1024;

/// Serves the language server on stdin/stdout until the client sends `exit`
/// (or closes stdin). Malformed input is answered by [`framing`] and never
/// reaches tower-lsp-server, which would end the session at the first one.
pub async fn serve_stdio(prompts: PromptPolicy) -> anyhow::Result<()> {
    let (service, socket) = LspService::build(move |client| Backend::new(client, prompts))
        .custom_method(
            <protocol::BranchFile as tower_lsp_server::ls_types::request::Request>::METHOD,
            Backend::branch_file,
        )
        .custom_method(
            <protocol::ListBundles as tower_lsp_server::ls_types::request::Request>::METHOD,
            Backend::list_bundles,
        )
        .custom_method(
            <protocol::BundleVersions as tower_lsp_server::ls_types::request::Request>::METHOD,
            Backend::bundle_versions,
        )
        .custom_method(
            <protocol::Status as tower_lsp_server::ls_types::request::Request>::METHOD,
            Backend::status,
        )
        .custom_method(
            "window/workDoneProgress/cancel",
            Backend::work_done_progress_cancel,
        )
        .finish();
    let (client_in, server_in) = tokio::io::duplex(PIPE_BYTES);
    let (server_out, client_out) = tokio::io::duplex(PIPE_BYTES);
    let (answers, answered) = tokio::sync::mpsc::unbounded_channel();
    let input = tokio::spawn(framing::pump_input(
        framing::stdin_chunks(),
        client_in,
        answers,
    ));
    let output = tokio::spawn(framing::pump_output(
        client_out,
        answered,
        tokio::io::stdout(),
    ));
    Server::new(server_in, server_out, socket)
        .serve(dollar_requests::AnswerDollarRequests(service))
        .await;
    // After `exit` the client may keep stdin open; nothing more is read
    // (the detached stdin thread ends with the process).
    input.abort();
    // The server's output ended with `serve`; write what is left of it.
    let _ = output.await;
    Ok(())
}
