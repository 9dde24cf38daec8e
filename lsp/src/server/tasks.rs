//! The slow work, each piece in its own task so that no request waits on it:
//! sensing, repair searches, apply checks and previews. Each task returns
//! what it found as a value; the document-state actor spawns it and turns
//! that value into its own message. Tasks never touch the actor's state and
//! do not know its messages.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ropey::Rope;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio_util::sync::CancellationToken;
use tower_lsp_server::Client;
use tower_lsp_server::ls_types::notification::Progress as ProgressNotification;
use tower_lsp_server::ls_types::request::ApplyWorkspaceEdit;
use tower_lsp_server::ls_types::{
    ApplyWorkspaceEditParams, MessageType, ProgressParams, ProgressParamsValue, ProgressToken,
    ShowDocumentParams, Uri, WorkDoneProgress, WorkDoneProgressBegin, WorkDoneProgressEnd,
    WorkDoneProgressReport, WorkspaceEdit,
};
use trellis_engine::WorkspacePath;
use trellis_engine::{
    CheckReport, Engine, EngineError, NoProgress, Progress, RepairOptions, RepairOutcome,
    RepairStatus, View,
};

use super::capabilities::ClientFacts;
use super::diagnostics::{Publication, publication};
use super::document::Document;
use super::paths::WorkspacePaths;
use super::preview::{PREVIEW_DIR, preview_file_name, unified_diff};
use super::workspace_edit::{CurrentFile, EditShape, build_workspace_edit};

/// What every task may use; fixed at `initialize`.
pub struct Shared {
    pub engine: Arc<Engine>,
    pub client: Client,
    pub facts: ClientFacts,
    pub paths: WorkspacePaths,
}

/// How long a request may spend computing the view's root before it gives
/// up (and, failing closed, offers no Apply).
pub const ROOT_BUDGET: Duration = Duration::from_millis(400);

type Outgoing = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Sends the actor's notifications to the client in the order they were
/// produced, so the actor never waits on the client's pipe.
#[derive(Clone)]
pub struct Outbox {
    tx: UnboundedSender<Outgoing>,
}

impl Outbox {
    pub fn start() -> Outbox {
        let (tx, mut rx) = mpsc::unbounded_channel::<Outgoing>();
        tokio::spawn(async move {
            while let Some(send) = rx.recv().await {
                send.await;
            }
        });
        Outbox { tx }
    }

    pub fn send(&self, send: impl Future<Output = ()> + Send + 'static) {
        // The receiver lives as long as the runtime; after that nobody listens.
        let _ = self.tx.send(Box::pin(send));
    }
}

/// Runs the sensors on `view` and converts what they found for publication.
/// Before each later stage runs, `staged` gets what the stages so far found
/// (the build's diagnostics while the tests run), always before the result.
pub async fn sense(
    shared: Arc<Shared>,
    view: View,
    cancel: CancellationToken,
    staged: impl Fn(Sensed) + Send,
) -> Result<Sensed, String> {
    let (partial_tx, mut partial_rx) = mpsc::unbounded_channel();
    let check = {
        let (shared, view) = (shared.clone(), view.clone());
        // Owns the only sender: the forwarding below ends with the check.
        async move {
            let partial = move |report: CheckReport| {
                let _ = partial_tx.send(report);
            };
            shared
                .engine
                .check_staged(&view, &NoProgress, cancel, &partial)
                .await
        }
    };
    let forward = async {
        while let Some(report) = partial_rx.recv().await {
            // A conversion that failed fails the result's again, and says so.
            if let Ok(partial) = sensed(&shared, &view, report).await {
                staged(partial);
            }
        }
    };
    let (report, ()) = tokio::join!(check, forward);
    sensed(&shared, &view, report.map_err(|e| e.to_string())?).await
}

/// A check's report, converted for publication off the async threads (it
/// reads the files it points into).
async fn sensed(shared: &Arc<Shared>, view: &View, report: CheckReport) -> Result<Sensed, String> {
    let (shared, view) = (shared.clone(), view.clone());
    tokio::task::spawn_blocking(move || {
        let mut text_of = |rel: &str| view_text(&shared.paths, &view, rel);
        let files = publication(
            &report,
            &shared.paths,
            shared.facts.encoding,
            shared.facts.related_information,
            &mut text_of,
        );
        let clusters = report
            .clusters
            .iter()
            .map(|c| (c.id.clone(), c.title.clone()))
            .collect();
        Sensed { clusters, files }
    })
    .await
    .map_err(|e| format!("converting diagnostics failed: {e}"))
}

/// One sensing run's results, ready to publish.
pub struct Sensed {
    /// Cluster id → title, dominant first.
    pub clusters: Vec<(String, String)>,
    pub files: Publication,
}

/// A file's text in `view`: the editor's buffer, else the disk.
pub fn view_text(paths: &WorkspacePaths, view: &View, rel: &str) -> Option<String> {
    match view.overlay.get(rel) {
        Some(text) => Some(text.clone()),
        None => std::fs::read_to_string(paths.absolute(rel)).ok(),
    }
}

/// A running repair search, as the actor tracks it.
#[derive(Clone)]
pub struct RepairJob {
    /// `trellis-repair-N`: the job's name and its progress token.
    pub id: String,
    pub cluster: String,
    pub title: String,
    pub cancel: CancellationToken,
    /// The view the search started from (kept for previews and branch files).
    pub view: View,
    /// The prompt-bundle refs `trellis.repair.start` named.
    pub bundles: Vec<String>,
}

/// How long a repair waits for the client to create its progress token
/// before it goes on without progress: a client that never answers
/// `window/workDoneProgress/create` must not hold the search.
const PROGRESS_CREATE_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs one repair search with work-done progress and returns its outcome.
pub async fn repair(shared: Arc<Shared>, job: RepairJob) -> Result<Box<RepairOutcome>, String> {
    let token = ProgressToken::String(job.id.clone());
    let progress = shared.facts.work_done_progress
        && progress_created(&shared.client, &token, &job.cancel).await;
    if progress {
        send_progress(
            &shared.client,
            &token,
            WorkDoneProgress::Begin(WorkDoneProgressBegin {
                title: format!("Trellis: repairing {}", job.title),
                cancellable: Some(true),
                message: None,
                percentage: Some(0),
            }),
        )
        .await;
    }

    let (report_tx, report_rx) = mpsc::unbounded_channel();
    let forward = tokio::spawn(forward_reports(
        shared.client.clone(),
        progress.then(|| token.clone()),
        report_rx,
    ));
    let options = RepairOptions {
        // The workspace's `exploration.max_branches`, as `trellis repair` uses.
        max_branches: shared.engine.config().exploration.max_branches,
        target_cluster: Some(job.cluster.clone()),
        bundles: job.bundles.clone(),
    };
    let result = {
        let sink = ChannelProgress(report_tx);
        shared
            .engine
            .repair(&job.view, &options, &sink, job.cancel.clone())
            .await
    };
    // The sink is gone, so the forwarder drains what is left and stops.
    let _ = forward.await;

    if progress {
        let message = match &result {
            Ok(outcome) => describe_status(outcome.status).to_owned(),
            Err(e) => format!("failed: {e}"),
        };
        send_progress(
            &shared.client,
            &token,
            WorkDoneProgress::End(WorkDoneProgressEnd {
                message: Some(message),
            }),
        )
        .await;
    }
    result.map(Box::new).map_err(|e| e.to_string())
}

/// Asks the client to create `token`. False when it refuses, when it has
/// not answered within [`PROGRESS_CREATE_TIMEOUT`], or when the repair is
/// cancelled meanwhile: the token is then never used.
async fn progress_created(
    client: &Client,
    token: &ProgressToken,
    cancel: &CancellationToken,
) -> bool {
    let create = tokio::time::timeout(
        PROGRESS_CREATE_TIMEOUT,
        client.create_work_done_progress(token.clone()),
    );
    tokio::select! {
        created = create => match created {
            Ok(answer) => answer.is_ok(),
            Err(_) => {
                tracing::warn!(
                    "the client did not answer window/workDoneProgress/create within {}s; \
                     the repair goes on without progress",
                    PROGRESS_CREATE_TIMEOUT.as_secs()
                );
                false
            }
        },
        () = cancel.cancelled() => false,
    }
}

/// A few words for a repair's final status.
pub fn describe_status(status: RepairStatus) -> &'static str {
    match status {
        RepairStatus::AlreadyClean => "nothing to repair: the workspace already passes",
        RepairStatus::HardPass => "verified repair ready",
        RepairStatus::ResidualsRemain => "progress made, but residuals remain",
        RepairStatus::NoEligibleCandidate => "no candidate passed the gate",
        RepairStatus::BoundReached => "the decision bound was reached",
        RepairStatus::Cancelled => "cancelled",
    }
}

/// Branches opened across a repair's steps.
pub fn branch_count(outcome: &RepairOutcome) -> usize {
    outcome.steps.iter().map(|step| step.branches.len()).sum()
}

/// One engine report on its way to the client.
#[derive(Debug, Clone, PartialEq)]
struct Report {
    message: String,
    percent: Option<u32>,
    /// A milestone is never coalesced away (see [`Progress::milestone`]).
    milestone: bool,
}

/// The engine's progress callback is synchronous; it only enqueues.
struct ChannelProgress(UnboundedSender<Report>);

impl Progress for ChannelProgress {
    fn report(&self, message: &str, percent: Option<u32>) {
        let _ = self.0.send(Report {
            message: message.to_owned(),
            percent,
            milestone: false,
        });
    }

    fn milestone(&self, message: &str) {
        let _ = self.0.send(Report {
            message: message.to_owned(),
            percent: None,
            milestone: true,
        });
    }
}

/// What a burst of queued reports sends: its milestones in order, then
/// its newest report if that is not already one of them. A chatty search
/// cannot flood the client, and a refitted turn is never dropped because
/// a stage report followed it before the forwarder woke.
fn coalesce(burst: Vec<Report>) -> Vec<Report> {
    let last = burst.len().saturating_sub(1);
    burst
        .into_iter()
        .enumerate()
        .filter(|(i, report)| report.milestone || *i == last)
        .map(|(_, report)| report)
        .collect()
}

/// Forwards engine progress as `$/progress` reports, coalescing bursts
/// (see [`coalesce`]).
async fn forward_reports(
    client: Client,
    token: Option<ProgressToken>,
    mut reports: UnboundedReceiver<Report>,
) {
    while let Some(first) = reports.recv().await {
        let mut burst = vec![first];
        while let Ok(newer) = reports.try_recv() {
            burst.push(newer);
        }
        let Some(token) = &token else { continue };
        for report in coalesce(burst) {
            send_progress(
                &client,
                token,
                WorkDoneProgress::Report(WorkDoneProgressReport {
                    cancellable: Some(true),
                    message: Some(report.message),
                    percentage: report.percent.map(|p| p.min(100)),
                }),
            )
            .await;
        }
    }
}

async fn send_progress(client: &Client, token: &ProgressToken, value: WorkDoneProgress) {
    client
        .send_notification::<ProgressNotification>(ProgressParams {
            token: token.clone(),
            value: ProgressParamsValue::WorkDone(value),
        })
        .await;
}

/// An apply attempt, captured by the actor at one instant: the view, and
/// the open documents among the paths the repair changes.
pub struct ApplyRequest {
    pub outcome: Arc<RepairOutcome>,
    pub view: View,
    pub open: BTreeMap<WorkspacePath, Document>,
}

/// Why an apply cannot go ahead.
pub enum Refusal {
    /// The view's root is no longer the repair's start root (the engine
    /// decided, and ledgered the refusal).
    Stale,
    Failed(String),
}

/// Runs engine work that computes the view's root off the async threads,
/// within [`ROOT_BUDGET`]; the engine's stale-root verdict is a
/// [`Refusal::Stale`].
async fn within_root_budget<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, EngineError> + Send + 'static,
) -> Result<T, Refusal> {
    match tokio::time::timeout(ROOT_BUDGET, tokio::task::spawn_blocking(work)).await {
        Ok(Ok(Ok(done))) => Ok(done),
        Ok(Ok(Err(EngineError::StaleRoot { .. }))) => Err(Refusal::Stale),
        Ok(Ok(Err(e))) => Err(Refusal::Failed(e.to_string())),
        Ok(Err(join)) => Err(Refusal::Failed(format!(
            "computing the view's root failed: {join}"
        ))),
        Err(_) => Err(Refusal::Failed(format!(
            "computing the view's root took longer than {} ms",
            ROOT_BUDGET.as_millis()
        ))),
    }
}

/// Asks the engine whether the request's view may take the repair (it
/// decides, and ledgers a refusal), then builds the edit against the
/// editor's current documents.
pub async fn prepare_apply(
    shared: &Arc<Shared>,
    request: ApplyRequest,
) -> Result<WorkspaceEdit, Refusal> {
    let (engine, outcome, view) = (
        shared.engine.clone(),
        request.outcome.clone(),
        request.view.clone(),
    );
    within_root_budget(move || engine.decide_apply(&outcome, &view)).await?;
    let shared = shared.clone();
    tokio::task::spawn_blocking(move || build_edit(&shared, &request.outcome, &request.open))
        .await
        .map_err(|e| Refusal::Failed(format!("building the edit failed: {e}")))?
        .map_err(Refusal::Failed)
}

/// A verified repair as the `WorkspaceEdit` this client can apply, against
/// the open documents `open` (other files are read from disk). Blocking.
pub fn build_edit(
    shared: &Shared,
    outcome: &RepairOutcome,
    open: &BTreeMap<WorkspacePath, Document>,
) -> Result<WorkspaceEdit, String> {
    let shape = EditShape {
        encoding: shared.facts.encoding,
        document_changes: shared.facts.document_changes,
        file_operations: shared.facts.file_operations,
        confirmation: shared.facts.change_annotations.then(|| {
            (
                "Trellis verified repair".to_owned(),
                format!("{} (repair {})", outcome.summary, outcome.repair_id),
            )
        }),
    };
    let mut current = |rel: &str| current_file(&shared.paths, open, rel);
    build_workspace_edit(&outcome.changes, &mut current, &shape).map_err(|e| e.to_string())
}

fn current_file(
    paths: &WorkspacePaths,
    open: &BTreeMap<WorkspacePath, Document>,
    rel: &str,
) -> Option<CurrentFile> {
    if let Some(doc) = open.get(rel) {
        return Some(CurrentFile {
            uri: doc.uri.clone(),
            version: Some(doc.version),
            text: Some(doc.text.clone()),
        });
    }
    Some(CurrentFile {
        uri: paths.uri_of(rel)?,
        version: None,
        text: std::fs::read_to_string(paths.absolute(rel))
            .ok()
            .map(|t| Rope::from_str(&t)),
    })
}

/// Tells the user why an apply was refused; the engine ledgered a stale
/// refusal already.
pub async fn report_refusal(shared: &Shared, outcome: &RepairOutcome, refusal: Refusal) {
    let message = match refusal {
        Refusal::Stale => format!(
            "Trellis refused to apply verified repair {}: the workspace changed since the repair started. Nothing was applied; run Repair again.",
            outcome.repair_id
        ),
        Refusal::Failed(message) => format!(
            "Trellis could not apply verified repair {}: {message}",
            outcome.repair_id
        ),
    };
    shared
        .client
        .show_message(MessageType::ERROR, message)
        .await;
}

/// How a `trellis.repair.apply` ended, for the actor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApplyEnd {
    /// Refused before anything was sent: the repair may be applied again.
    Refused,
    /// The editor declined the edit: it may be applied again, and the
    /// documents may have moved meanwhile.
    Declined,
    /// The edit may have reached the editor (applied, or the reply was
    /// lost): the document state that follows decides.
    Sent,
}

/// The `trellis.repair.apply` command: check, then `workspace/applyEdit`.
pub async fn apply(shared: Arc<Shared>, request: ApplyRequest) -> ApplyEnd {
    let outcome = request.outcome.clone();
    match prepare_apply(&shared, request).await {
        Ok(edit) => {
            let params = ApplyWorkspaceEditParams {
                label: Some(format!("Trellis: {}", outcome.summary)),
                edit,
            };
            match shared
                .client
                .send_request::<ApplyWorkspaceEdit>(params)
                .await
            {
                // Whatever the editor says, the document state that follows
                // decides whether the repair landed (the actor looks again).
                Ok(response) if response.applied => {
                    tracing::info!(
                        "the editor reports verified repair {} applied",
                        outcome.repair_id
                    );
                    ApplyEnd::Sent
                }
                Ok(response) => {
                    let reason = response.failure_reason.unwrap_or_default();
                    shared
                        .client
                        .show_message(
                            MessageType::WARNING,
                            format!(
                                "The editor did not apply verified repair {}. {reason}",
                                outcome.repair_id
                            ),
                        )
                        .await;
                    ApplyEnd::Declined
                }
                Err(e) => {
                    shared
                        .client
                        .show_message(
                            MessageType::ERROR,
                            format!("Sending verified repair {} failed: {e}", outcome.repair_id),
                        )
                        .await;
                    ApplyEnd::Sent
                }
            }
        }
        Err(refusal) => {
            report_refusal(&shared, &outcome, refusal).await;
            ApplyEnd::Refused
        }
    }
}

/// The `trellis.repair.preview` command: write the diff, then show it.
pub async fn preview(shared: Arc<Shared>, outcome: Arc<RepairOutcome>, start_view: View) {
    let written = {
        let paths = shared.paths.clone();
        let engine = shared.engine.clone();
        let outcome = outcome.clone();
        tokio::task::spawn_blocking(move || {
            let mut old_text = |rel: &str| view_text(&paths, &start_view, rel);
            let diff = unified_diff(
                &outcome.repair_id,
                // The Preview names the route that produced the fix.
                &format!("{} (by {})", outcome.summary, outcome.routes()),
                &outcome.changes,
                &mut old_text,
            );
            // Through the engine's checked `.trellis/`, never through a link.
            engine
                .write_state_file(
                    PREVIEW_DIR,
                    &preview_file_name(&outcome.repair_id),
                    diff.as_bytes(),
                )
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r)
    };
    let file = match written {
        Ok(file) => file,
        Err(e) => {
            shared
                .client
                .show_message(
                    MessageType::ERROR,
                    format!("Trellis could not write the preview: {e}"),
                )
                .await;
            return;
        }
    };
    let uri = Uri::from_file_path(&file);
    if shared.facts.show_document
        && let Some(uri) = uri
    {
        let shown = shared
            .client
            .show_document(ShowDocumentParams {
                uri,
                external: Some(false),
                take_focus: Some(true),
                selection: None,
            })
            .await;
        if shown == Ok(true) {
            return;
        }
    }
    let shown_path = shared
        .paths
        .rel_of_path(&file)
        .map_or_else(|| file.display().to_string(), String::from);
    shared
        .client
        .show_message(
            MessageType::INFO,
            format!(
                "Trellis: the preview of verified repair {} ({}) is in {shown_path}",
                outcome.repair_id, outcome.summary
            ),
        )
        .await;
}

#[cfg(test)]
mod tests {
    use super::{Report, coalesce};

    fn report(message: &str, milestone: bool) -> Report {
        Report {
            message: message.to_owned(),
            percent: None,
            milestone,
        }
    }

    #[test]
    fn a_burst_keeps_its_milestones_in_order_and_its_newest_report() {
        let burst = vec![
            report("branch b1: model", false),
            report("turn 3: context refitted to 900 of 1000 tokens", true),
            report("branch b1: build", false),
            report("turn 3: read_file src/lib.rs", true),
            report("branch b1: test", false),
        ];
        let sent: Vec<String> = coalesce(burst).into_iter().map(|r| r.message).collect();
        assert_eq!(
            sent,
            [
                "turn 3: context refitted to 900 of 1000 tokens",
                "turn 3: read_file src/lib.rs",
                "branch b1: test",
            ]
        );
    }

    #[test]
    fn a_burst_ending_in_a_milestone_sends_it_once() {
        let burst = vec![
            report("branch b1: build", false),
            report("turn 1: finish", true),
        ];
        assert_eq!(coalesce(burst), [report("turn 1: finish", true)]);
    }
}
