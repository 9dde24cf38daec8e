//! The one task that owns all document state.
//!
//! Handlers turn each LSP message into a [`Msg`] and return; background
//! tasks (`tasks.rs`) return values, which the actor's spawn turns into a
//! [`Msg`] the same way. Because a single task applies every
//! message in arrival order, `didChange`s can never interleave, a code
//! action always sees the text the client last sent, and nothing needs a
//! lock. The actor itself never waits on I/O: notifications go through the
//! [`Outbox`], slow work into tasks.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tower_lsp_server::jsonrpc;
use tower_lsp_server::ls_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, CodeActionParams, Command, MessageActionItem,
    MessageType, ProgressToken, Range, TextDocumentContentChangeEvent, Uri, WorkspaceEdit,
};
use trellis_engine::WorkspacePath;
use trellis_engine::apply::{self, Finished};
use trellis_engine::digest::Digest;
use trellis_engine::{ApplyOffer, Engine, RepairOutcome, RepairStatus, View};

use super::diagnostics::SOURCE;
use super::document::Document;
use super::preview::repaired_file;
use super::protocol::{
    ApplyActionData, BranchChange, BranchFileParams, BranchFileResult, Commands, DiagnosticData,
    RepairRef, SearchState, SearchStatus, SearchStatusParams, ServerCommand, cluster_arguments,
    forest, repair_arguments,
};
use super::sensing::{Debouncer, FIRST_SENSING_DELAY, SENSING_DEBOUNCE};
use super::storage::{self, Collector};
use super::tasks::{
    self, ApplyEnd, ApplyRequest, Outbox, RepairJob, Sensed, Shared, describe_status,
};

pub type Reply<T> = oneshot::Sender<T>;

/// Everything the actor hears, from handlers and from its own tasks.
pub enum Msg {
    Open {
        uri: Uri,
        version: i32,
        text: String,
    },
    Change {
        uri: Uri,
        version: i32,
        changes: Vec<TextDocumentContentChangeEvent>,
    },
    Save {
        uri: Uri,
    },
    Close {
        uri: Uri,
    },
    CodeActions {
        params: Box<CodeActionParams>,
        reply: Reply<Vec<CodeActionOrCommand>>,
    },
    PrepareApply {
        repair_id: String,
        reply: Reply<Result<ApplyRequest, String>>,
    },
    Command(ServerCommand),
    CancelProgress(ProgressToken),
    BranchFile {
        params: BranchFileParams,
        reply: Reply<jsonrpc::Result<BranchText>>,
    },
    Shutdown {
        reply: Reply<()>,
    },
    // From the actor's own tasks.
    Sensed {
        generation: u64,
        outcome: Result<Sensed, String>,
    },
    /// What a sensing run's first stages found; the run goes on.
    SensedStages {
        generation: u64,
        sensed: Sensed,
    },
    RepairDone {
        job: String,
        outcome: Result<Box<RepairOutcome>, String>,
    },
    RootComputed(KnownRoot),
    /// A storage collection started by the actor ended.
    Collected(Result<trellis_engine::gc::GcReport, String>),
    /// The client answered a `workspace/applyEdit`; look at the view again
    /// even if no document notification follows (files it wrote directly).
    ViewMayHaveChanged,
    /// An Apply command ended without its edit reaching the editor (refused
    /// here, or declined by the client): it may be applied again.
    ApplyNotSent {
        repair_id: String,
    },
}

/// A branch file's text, or where to read it (the repair left it alone).
pub enum BranchText {
    Known(BranchFileResult),
    Unchanged(std::path::PathBuf),
}

/// A finished repair search.
struct FinishedRepair {
    /// The job that ran it (`trellis-repair-N`).
    job: String,
    outcome: Arc<RepairOutcome>,
    cluster: String,
    title: String,
    start_view: View,
    /// The editor's view reached the repair's final root (ledgered).
    promoted: bool,
    /// Its edit went to the editor (`workspace/applyEdit`): a second Apply
    /// is refused, since a client that cannot check document versions would
    /// apply the same edit twice.
    apply_sent: bool,
    /// The repair's end was told to the client. A verified repair is told
    /// once a root computation that knew of it finished, so that the code
    /// actions asked for right after offer its Apply.
    announced: bool,
    /// [`Actor::repair_epoch`] when it was kept.
    epoch: u64,
}

impl FinishedRepair {
    fn awaiting_apply(&self) -> bool {
        self.outcome.is_verified() && !self.promoted
    }

    fn as_finished(&self) -> Finished<'_> {
        Finished {
            cluster: &self.cluster,
            outcome: &self.outcome,
            promoted: self.promoted,
        }
    }
}

/// The root of the view at one document revision, and the Apply edits built
/// against that revision's documents for the repairs it was the start root
/// of (only for clients that need the edit inside the code action).
pub struct KnownRoot {
    revision: u64,
    /// The repairs it was computed for (see [`Actor::repair_epoch`]).
    epoch: u64,
    root: Result<Digest, String>,
    edits: HashMap<String, WorkspaceEdit>,
}

#[derive(Default)]
struct RootTracker {
    known: Option<KnownRoot>,
    in_flight: bool,
}

pub struct Actor {
    shared: Arc<Shared>,
    tx: UnboundedSender<Msg>,
    outbox: Outbox,
    docs: BTreeMap<WorkspacePath, Document>,
    /// Bumped whenever the view may have changed.
    revision: u64,
    sensing: Debouncer,
    /// Cluster id → title, from the newest sensing run.
    clusters: HashMap<String, String>,
    /// Files with published diagnostics, and each diagnostic's range and cluster.
    published: BTreeMap<Uri, Vec<(Range, Option<String>)>>,
    last_sensing_error: Option<String>,
    jobs: Vec<RepairJob>,
    next_job: u64,
    repairs: Vec<FinishedRepair>,
    /// Bumped whenever a repair is kept: a known root computed before the
    /// bump has no edit for the newcomer.
    repair_epoch: u64,
    root: RootTracker,
    /// Open documents reached through a symlink inside the root: the
    /// snapshot never follows one, so their text is kept out of the view.
    ignored: BTreeSet<WorkspacePath>,
    /// Storage collection after repairs, at quiet moments.
    collector: Collector,
}

impl Actor {
    pub fn new(shared: Arc<Shared>, tx: UnboundedSender<Msg>) -> Actor {
        Actor {
            shared,
            tx,
            outbox: Outbox::start(),
            docs: BTreeMap::new(),
            revision: 0,
            sensing: Debouncer::new(FIRST_SENSING_DELAY, SENSING_DEBOUNCE),
            clusters: HashMap::new(),
            published: BTreeMap::new(),
            last_sensing_error: None,
            jobs: Vec::new(),
            next_job: 1,
            repairs: Vec::new(),
            repair_epoch: 0,
            root: RootTracker::default(),
            ignored: BTreeSet::new(),
            collector: Collector::default(),
        }
    }

    /// Runs until every sender is gone (the server has exited).
    pub async fn run(mut self, mut rx: UnboundedReceiver<Msg>) {
        loop {
            let deadline = self.sensing.deadline();
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(msg) => self.handle(msg),
                    None => break,
                },
                () = sleep_until(deadline) => self.start_sensing_if_due(),
            }
        }
        self.stop_everything();
    }

    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Open { uri, version, text } => {
                let Some(rel) = self.shared.paths.rel_of_uri(&uri) else {
                    return;
                };
                // An lstat per component, once per didOpen: cheap enough here.
                if let Some(link) = self.shared.paths.symlink_on_path(&rel) {
                    let message = format!(
                        "ignoring {}: it is reached through the symlink `{link}`, which Trellis never follows; the rest of the workspace is still checked",
                        uri.as_str()
                    );
                    tracing::warn!("{message}");
                    self.log(MessageType::WARNING, message);
                    self.ignored.insert(rel);
                    return;
                }
                self.docs.insert(rel, Document::new(uri, version, &text));
                self.view_changed();
                self.sensing.trigger(Instant::now());
            }
            Msg::Change {
                uri,
                version,
                changes,
            } => self.change(&uri, version, &changes),
            Msg::Save { uri } => {
                if self
                    .shared
                    .paths
                    .rel_of_uri(&uri)
                    .is_some_and(|rel| !self.ignored.contains(&rel))
                {
                    self.view_changed();
                    self.sensing.trigger(Instant::now());
                }
            }
            Msg::Close { uri } => {
                if let Some(rel) = self.shared.paths.rel_of_uri(&uri)
                    && !self.ignored.remove(&rel)
                {
                    self.docs.remove(&rel);
                    self.view_changed();
                }
            }
            Msg::CodeActions { params, reply } => {
                let _ = reply.send(self.code_actions(&params));
            }
            Msg::PrepareApply { repair_id, reply } => {
                let _ = reply.send(self.apply_request(&RepairRef::Id(repair_id)));
            }
            Msg::Command(command) => self.command(command),
            Msg::CancelProgress(token) => {
                for job in &self.jobs {
                    if token == ProgressToken::String(job.id.clone()) {
                        job.cancel.cancel();
                    }
                }
            }
            Msg::BranchFile { params, reply } => {
                let _ = reply.send(self.branch_file(&params));
            }
            Msg::Shutdown { reply } => {
                self.stop_everything();
                let _ = reply.send(());
            }
            Msg::Sensed {
                generation,
                outcome,
            } => {
                if self.sensing.finish(generation) {
                    self.sensed(outcome);
                }
            }
            Msg::SensedStages { generation, sensed } => {
                if self.sensing.partial(generation) {
                    self.sensed(Ok(sensed));
                }
            }
            Msg::RepairDone { job, outcome } => {
                self.repair_done(&job, outcome);
                self.collect_if_quiet();
            }
            Msg::Collected(result) => {
                if let Some((typ, message)) = storage::message(&result) {
                    self.log(typ, message);
                }
                for (cluster, bundles) in self.collector.finished() {
                    self.start_repair(cluster, bundles);
                }
            }
            Msg::RootComputed(known) => {
                self.root.in_flight = false;
                let current = match &known.root {
                    Ok(root) if known.revision == self.revision => Some(*root),
                    _ => None,
                };
                let epoch = known.epoch;
                self.root.known = Some(known);
                // Told before a promotion it may already confirm (the user
                // typed the same fix), so `hard_pass` precedes `applied`.
                self.announce_verified(epoch);
                if let Some(root) = current {
                    self.confirm_promotions(root);
                }
                self.track_root();
            }
            Msg::ViewMayHaveChanged => self.view_changed(),
            Msg::ApplyNotSent { repair_id } => {
                if let Some(repair) = self
                    .repairs
                    .iter_mut()
                    .find(|r| r.outcome.repair_id == repair_id)
                {
                    repair.apply_sent = false;
                }
            }
        }
    }

    fn change(&mut self, uri: &Uri, version: i32, changes: &[TextDocumentContentChangeEvent]) {
        let Some(rel) = self.shared.paths.rel_of_uri(uri) else {
            return;
        };
        if self.ignored.contains(&rel) {
            return;
        }
        let Some(doc) = self.docs.get_mut(&rel) else {
            tracing::warn!("didChange for {} which is not open", uri.as_str());
            return;
        };
        if let Err(e) = doc.apply_changes(version, changes, self.shared.facts.encoding) {
            self.log(MessageType::ERROR, format!("ignored a change: {}", e.0));
        }
        self.view_changed();
    }

    /// The user's view: files on disk overlaid with the open documents.
    fn view(&self) -> View {
        View {
            overlay: self
                .docs
                .iter()
                .map(|(rel, doc)| (rel.clone(), doc.text.to_string()))
                .collect(),
        }
    }

    fn view_changed(&mut self) {
        self.revision += 1;
        self.track_root();
    }

    /// Keeps the view's root known while a verified repair waits to be
    /// applied: it decides whether Apply is offered and confirms an apply
    /// once the editor's documents reach the repair's final root. One
    /// computation at a time; a burst of edits costs one more at most.
    ///
    /// Whatever a code action needs for an Apply offer is computed here, off
    /// the request: whether the view is fresh and, for clients that apply
    /// the action's edit without coming back, the edit itself.
    fn track_root(&mut self) {
        let current = self.root.known.as_ref().is_some_and(|known| {
            known.revision == self.revision && known.epoch == self.repair_epoch
        });
        if self.root.in_flight
            || current
            || !self.repairs.iter().any(FinishedRepair::awaiting_apply)
        {
            return;
        }
        self.root.in_flight = true;
        let awaiting: Vec<Arc<RepairOutcome>> = self
            .repairs
            .iter()
            .filter(|r| r.awaiting_apply())
            .map(|r| r.outcome.clone())
            .collect();
        let (shared, view, docs, revision, epoch, tx) = (
            self.shared.clone(),
            self.view(),
            self.docs.clone(),
            self.revision,
            self.repair_epoch,
            self.tx.clone(),
        );
        tokio::task::spawn_blocking(move || {
            let root = shared.engine.view_root(&view).map_err(|e| e.to_string());
            let mut edits = HashMap::new();
            if let Ok(root) = &root
                && shared.facts.inline_apply_edit()
            {
                let fresh = awaiting
                    .iter()
                    .filter(|o| Engine::apply_offer(o, *root) == ApplyOffer::Fresh);
                for outcome in fresh {
                    match tasks::build_edit(&shared, outcome, &docs) {
                        Ok(edit) => {
                            edits.insert(outcome.repair_id.clone(), edit);
                        }
                        Err(e) => tracing::warn!(
                            "no Apply offer for {}: building its edit failed: {e}",
                            outcome.repair_id
                        ),
                    }
                }
            }
            let _ = tx.send(Msg::RootComputed(KnownRoot {
                revision,
                epoch,
                root,
                edits,
            }));
        });
    }

    /// The root of the current documents, when it is known.
    fn current_root(&self) -> Option<&KnownRoot> {
        self.root
            .known
            .as_ref()
            .filter(|known| known.revision == self.revision)
    }

    /// The engine's verdict on offering `outcome`'s Apply on the current
    /// documents, when their root is known.
    fn offer(&self, outcome: &RepairOutcome) -> Option<ApplyOffer> {
        match &self.current_root()?.root {
            Ok(root) => Some(Engine::apply_offer(outcome, *root)),
            Err(_) => None,
        }
    }

    /// The editor's documents now have a verified repair's final root: the
    /// repair landed. The client's `applied` reply is not trusted for this.
    fn confirm_promotions(&mut self, root: Digest) {
        let mut statuses = Vec::new();
        for repair in &mut self.repairs {
            if !repair.awaiting_apply() || !Engine::editor_view_reached(&repair.outcome, root) {
                continue;
            }
            repair.promoted = true;
            let (engine, outcome) = (self.shared.engine.clone(), repair.outcome.clone());
            let shared = self.shared.clone();
            tokio::spawn(async move {
                let recorded = {
                    let outcome = outcome.clone();
                    tokio::task::spawn_blocking(move || {
                        engine.record_editor_promotion(&outcome, root)
                    })
                    .await
                };
                let message = match recorded {
                    Ok(Ok(())) => format!(
                        "verified repair {} is in the editor's view; promotion ledgered",
                        outcome.repair_id
                    ),
                    Ok(Err(e)) => {
                        format!("ledgering promotion of {} failed: {e}", outcome.repair_id)
                    }
                    Err(e) => format!("ledgering promotion of {} failed: {e}", outcome.repair_id),
                };
                shared.client.log_message(MessageType::INFO, message).await;
            });
            statuses.push(status_params(
                None,
                &repair.cluster,
                &repair.title,
                SearchState::Applied,
                Some(&repair.outcome),
            ));
        }
        for status in statuses {
            self.notify_status(status);
        }
    }

    fn start_sensing_if_due(&mut self) {
        let Some(run) = self.sensing.start_if_due(Instant::now()) else {
            return;
        };
        let (tx, generation) = (self.tx.clone(), run.generation);
        let staged = {
            let tx = tx.clone();
            move |sensed| {
                let _ = tx.send(Msg::SensedStages { generation, sensed });
            }
        };
        let sensing = tasks::sense(self.shared.clone(), self.view(), run.cancel, staged);
        tokio::spawn(async move {
            let outcome = sensing.await;
            let _ = tx.send(Msg::Sensed {
                generation,
                outcome,
            });
        });
    }

    fn sensed(&mut self, outcome: Result<Sensed, String>) {
        let sensed = match outcome {
            Ok(sensed) => sensed,
            Err(e) => {
                if self.last_sensing_error.as_ref() != Some(&e) {
                    self.show(
                        MessageType::WARNING,
                        format!("Trellis could not sense the workspace: {e}"),
                    );
                    self.last_sensing_error = Some(e);
                }
                return;
            }
        };
        self.last_sensing_error = None;
        self.clusters = sensed.clusters.into_iter().collect();

        let mut published = BTreeMap::new();
        for (uri, diagnostics) in sensed.files.files {
            let index = diagnostics
                .iter()
                .map(|d| (d.range, cluster_of(d)))
                .collect();
            published.insert(uri.clone(), index);
            self.publish(uri, diagnostics);
        }
        // Files whose diagnostics are gone get an empty list, or the editor
        // would keep showing the old ones.
        let cleared: Vec<Uri> = self
            .published
            .keys()
            .filter(|uri| !published.contains_key(*uri))
            .cloned()
            .collect();
        for uri in cleared {
            self.publish(uri, Vec::new());
        }
        self.published = published;
    }

    fn publish(&self, uri: Uri, diagnostics: Vec<tower_lsp_server::ls_types::Diagnostic>) {
        let client = self.shared.client.clone();
        self.outbox
            .send(async move { client.publish_diagnostics(uri, diagnostics, None).await });
    }

    /// The code actions for a request, from state already computed: this
    /// never waits on a root computation or builds an edit (clients ask on
    /// every cursor move and wait). Until the view's root is known for the
    /// current documents no Apply is offered (failing closed); it is known
    /// a root computation later (`track_root`).
    fn code_actions(&self, params: &CodeActionParams) -> Vec<CodeActionOrCommand> {
        let uri = &params.text_document.uri;
        let rel = self.shared.paths.rel_of_uri(uri);
        let clusters = self.clusters_in_request(params);
        let literals = self.shared.facts.code_action_literals;
        let mut applies = Vec::new();
        let mut actions = Vec::new();

        for repair in self.repairs.iter().rev() {
            let relevant = clusters.contains(&repair.cluster)
                || rel.as_ref().is_some_and(|rel| {
                    repair
                        .outcome
                        .changes
                        .iter()
                        .any(|c| c.path() == rel.as_str())
                });
            if !relevant || !repair.awaiting_apply() || !repair.announced {
                continue;
            }
            if self.offer(&repair.outcome) == Some(ApplyOffer::Fresh)
                && let Some(apply) = self.apply_action(&repair.outcome)
            {
                applies.push(apply);
            }
            actions.push(action(
                literals,
                format!("Preview verified repair: {}", repair.outcome.summary),
                Command {
                    title: "Preview verified repair".into(),
                    command: Commands::PREVIEW.into(),
                    arguments: Some(repair_arguments(&repair.outcome.repair_id)),
                },
                None,
            ));
        }

        for cluster in &clusters {
            let title = self
                .clusters
                .get(cluster)
                .cloned()
                .unwrap_or_else(|| format!("cluster {cluster}"));
            let matching: Vec<_> = params
                .context
                .diagnostics
                .iter()
                .filter(|d| cluster_of(d).as_ref() == Some(cluster))
                .cloned()
                .collect();
            let diagnostics = (!matching.is_empty()).then_some(matching);
            if self.jobs.iter().any(|job| &job.cluster == cluster) {
                actions.push(action(
                    literals,
                    format!("Cancel repair: {title}"),
                    Command {
                        title: "Cancel repair".into(),
                        command: Commands::CANCEL.into(),
                        arguments: Some(cluster_arguments(cluster)),
                    },
                    None,
                ));
            } else {
                actions.push(action(
                    literals,
                    format!("Repair: {title}"),
                    Command {
                        title: "Repair".into(),
                        command: Commands::START.into(),
                        arguments: Some(cluster_arguments(cluster)),
                    },
                    diagnostics,
                ));
            }
        }
        applies.extend(actions);
        applies
    }

    /// The Apply action of a fresh verified repair in the shape the client
    /// runs: a command, an action resolved later, or one carrying the edit
    /// built for the current documents (none when it is not built yet).
    fn apply_action(&self, outcome: &RepairOutcome) -> Option<CodeActionOrCommand> {
        let title = format!("Apply verified repair: {}", outcome.summary);
        let facts = &self.shared.facts;
        if !facts.code_action_literals {
            return Some(CodeActionOrCommand::Command(Command {
                title,
                command: Commands::APPLY.into(),
                arguments: Some(repair_arguments(&outcome.repair_id)),
            }));
        }
        let (edit, data) = if facts.inline_apply_edit() {
            let edit = self.current_root()?.edits.get(&outcome.repair_id)?;
            (Some(edit.clone()), None)
        } else {
            (None, Some(ApplyActionData::value(&outcome.repair_id)))
        };
        Some(CodeActionOrCommand::CodeAction(CodeAction {
            title,
            kind: Some(CodeActionKind::QUICKFIX),
            edit,
            data,
            ..CodeAction::default()
        }))
    }

    /// The clusters a code-action request is about: those named in the
    /// `data` of our diagnostics in its context, or, for clients that drop
    /// `data`, those of our published diagnostics overlapping its range.
    fn clusters_in_request(&self, params: &CodeActionParams) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let named = params
            .context
            .diagnostics
            .iter()
            .filter(|d| d.source.as_deref() == Some(SOURCE))
            .filter_map(cluster_of);
        for id in named {
            if !out.contains(&id) {
                out.push(id);
            }
        }
        if out.is_empty()
            && let Some(index) = self.published.get(&params.text_document.uri)
        {
            for (range, cluster) in index {
                if let Some(id) = cluster
                    && overlaps(range, &params.range)
                    && !out.contains(id)
                {
                    out.push(id.clone());
                }
            }
        }
        out
    }

    fn find_repair(&self, which: &RepairRef) -> Option<&FinishedRepair> {
        match which {
            RepairRef::Id(id) => self.repairs.iter().find(|r| &r.outcome.repair_id == id),
            RepairRef::Latest => self.repairs.iter().rev().find(|r| r.outcome.is_verified()),
        }
    }

    fn apply_request(&self, which: &RepairRef) -> Result<ApplyRequest, String> {
        let repair = self.find_repair(which).ok_or_else(|| match which {
            RepairRef::Id(id) => format!("there is no repair `{id}`"),
            RepairRef::Latest => "no repair has reached a verified result yet".to_owned(),
        })?;
        if !repair.outcome.is_verified() {
            return Err(format!(
                "repair {} did not reach a verified result ({})",
                repair.outcome.repair_id,
                describe_status(repair.outcome.status)
            ));
        }
        if repair.promoted || repair.apply_sent {
            return Err(format!(
                "verified repair {} is already applied (a repair is applied once)",
                repair.outcome.repair_id
            ));
        }
        let changed: BTreeSet<&str> = repair
            .outcome
            .changes
            .iter()
            .map(|c| c.path().as_str())
            .collect();
        Ok(ApplyRequest {
            outcome: repair.outcome.clone(),
            view: self.view(),
            open: self
                .docs
                .iter()
                .filter(|(rel, _)| changed.contains(rel.as_str()))
                .map(|(rel, doc)| (rel.clone(), doc.clone()))
                .collect(),
        })
    }

    fn command(&mut self, command: ServerCommand) {
        match command {
            ServerCommand::Start { cluster, bundles } => self.start_repair(cluster, bundles),
            ServerCommand::Cancel { cluster } => {
                let mut cancelled = 0;
                for job in &self.jobs {
                    if cluster.as_ref().is_none_or(|c| c == &job.cluster) {
                        job.cancel.cancel();
                        cancelled += 1;
                    }
                }
                if cancelled == 0 {
                    self.show(MessageType::INFO, "Trellis: no repair is running.".into());
                }
            }
            ServerCommand::Preview(which) => match self.find_repair(&which) {
                Some(repair) => {
                    tokio::spawn(tasks::preview(
                        self.shared.clone(),
                        repair.outcome.clone(),
                        repair.start_view.clone(),
                    ));
                }
                None => self.show(
                    MessageType::ERROR,
                    "Trellis: there is no such repair to preview.".into(),
                ),
            },
            ServerCommand::Apply(which) => match self.apply_request(&which) {
                Ok(request) => {
                    let id = &request.outcome.repair_id;
                    if let Some(repair) =
                        self.repairs.iter_mut().find(|r| &r.outcome.repair_id == id)
                    {
                        repair.apply_sent = true;
                    }
                    let repair_id = request.outcome.repair_id.clone();
                    let applying = tasks::apply(self.shared.clone(), request);
                    let tx = self.tx.clone();
                    tokio::spawn(async move {
                        let end = applying.await;
                        // Unless the edit may have reached the editor, it
                        // may be applied again.
                        if end != ApplyEnd::Sent {
                            let _ = tx.send(Msg::ApplyNotSent { repair_id });
                        }
                        if end != ApplyEnd::Refused {
                            let _ = tx.send(Msg::ViewMayHaveChanged);
                        }
                    });
                }
                Err(e) => self.show(MessageType::ERROR, format!("Trellis cannot apply: {e}.")),
            },
        }
    }

    /// After a repair, with none left running: collect unused storage on
    /// a blocking thread (the actor goes on serving requests).
    fn collect_if_quiet(&mut self) {
        let tx = self.tx.clone();
        self.collector.start_if_quiet(
            !self.jobs.is_empty(),
            self.shared.engine.clone(),
            move |result| {
                let _ = tx.send(Msg::Collected(result));
            },
        );
    }

    fn start_repair(&mut self, cluster: String, bundles: Vec<String>) {
        // Never during a collection: it starts when the collection ends.
        if self.collector.hold(&cluster, &bundles) {
            return;
        }
        let title = self
            .clusters
            .get(&cluster)
            .cloned()
            .unwrap_or_else(|| format!("cluster {cluster}"));
        if self.jobs.iter().any(|job| job.cluster == cluster) {
            self.show(
                MessageType::INFO,
                format!("Trellis is already repairing {title}."),
            );
            return;
        }
        let job = RepairJob {
            id: format!("trellis-repair-{}", self.next_job),
            cluster,
            title,
            cancel: CancellationToken::new(),
            view: self.view(),
            bundles,
        };
        self.next_job += 1;
        let status = status_params(
            Some(&job.id),
            &job.cluster,
            &job.title,
            SearchState::Running,
            None,
        );
        self.notify_status(status);
        self.jobs.push(job.clone());
        let job_id = job.id.clone();
        let (searching, tx) = (tasks::repair(self.shared.clone(), job), self.tx.clone());
        tokio::spawn(async move {
            let outcome = searching.await;
            let _ = tx.send(Msg::RepairDone {
                job: job_id,
                outcome,
            });
        });
    }

    fn repair_done(&mut self, job_id: &str, outcome: Result<Box<RepairOutcome>, String>) {
        let Some(position) = self.jobs.iter().position(|j| j.id == job_id) else {
            return;
        };
        let job = self.jobs.remove(position);
        let outcome = match outcome {
            Ok(outcome) => Arc::new(*outcome),
            Err(e) => {
                let status = status_params(
                    Some(&job.id),
                    &job.cluster,
                    &job.title,
                    SearchState::Failed,
                    None,
                );
                self.notify_status(status);
                self.show(
                    MessageType::ERROR,
                    format!("Trellis: the repair of {} failed: {e}", job.title),
                );
                return;
            }
        };
        let verified = outcome.is_verified();
        if !verified {
            self.announce(&job.id, &job.cluster, &job.title, &outcome);
        }
        self.repair_epoch += 1;
        let finished = FinishedRepair {
            job: job.id,
            outcome,
            cluster: job.cluster,
            title: job.title,
            start_view: job.view,
            promoted: false,
            apply_sent: false,
            // A verified repair is announced by `announce_verified`.
            announced: !verified,
            epoch: self.repair_epoch,
        };
        apply::keep_finished(&mut self.repairs, finished, FinishedRepair::as_finished);
        self.track_root();
    }

    /// Announces the verified repairs that a root computation of `epoch`
    /// knew of: their Apply is now offered (or known to be stale).
    fn announce_verified(&mut self, epoch: u64) {
        let due: Vec<usize> = (0..self.repairs.len())
            .filter(|&i| !self.repairs[i].announced && self.repairs[i].epoch <= epoch)
            .collect();
        for i in due {
            self.repairs[i].announced = true;
            let repair = &self.repairs[i];
            self.announce(&repair.job, &repair.cluster, &repair.title, &repair.outcome);
        }
    }

    /// Tells the client how a repair ended: `trellis/searchStatus`, and a
    /// message unless the client's plugin announces that itself. A verified
    /// repair is also offered as Preview/Apply buttons where the client
    /// shows them without blocking (see `capabilities`); the reply is
    /// awaited in a task, since the user may take minutes to click.
    fn announce(&self, job: &str, cluster: &str, title: &str, outcome: &Arc<RepairOutcome>) {
        self.notify_status(status_params(
            Some(job),
            cluster,
            title,
            SearchState::from(outcome.status),
            Some(outcome),
        ));
        if self.shared.facts.announces_itself {
            return;
        }
        let text = match outcome.status {
            RepairStatus::HardPass => format!(
                "Trellis: verified repair {} ready for {title}: {}. Use “Apply verified repair” to apply it.",
                outcome.repair_id, outcome.summary
            ),
            RepairStatus::AlreadyClean => {
                "Trellis: nothing to repair; the workspace already passes.".to_owned()
            }
            RepairStatus::Cancelled => format!("Trellis: the repair of {title} was cancelled."),
            status => format!(
                "Trellis: no verified repair for {title}: {}. Nothing will be applied.{}",
                describe_status(status),
                if outcome.summary.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", outcome.summary)
                }
            ),
        };
        let typ = match outcome.status {
            RepairStatus::HardPass | RepairStatus::AlreadyClean | RepairStatus::Cancelled => {
                MessageType::INFO
            }
            _ => MessageType::WARNING,
        };
        self.show(typ, text);
        if !outcome.is_verified() || !self.shared.facts.ready_prompt {
            return;
        }
        let question = format!(
            "Apply verified repair {} ({})?",
            outcome.repair_id, outcome.summary
        );
        let (client, tx, repair_id) = (
            self.shared.client.clone(),
            self.tx.clone(),
            outcome.repair_id.clone(),
        );
        tokio::spawn(async move {
            let choices = vec![
                MessageActionItem {
                    title: "Preview".into(),
                    properties: HashMap::new(),
                },
                MessageActionItem {
                    title: "Apply".into(),
                    properties: HashMap::new(),
                },
            ];
            let picked = client
                .show_message_request(MessageType::INFO, question, Some(choices))
                .await;
            let which = RepairRef::Id(repair_id);
            let command = match picked {
                Ok(Some(item)) if item.title == "Preview" => ServerCommand::Preview(which),
                Ok(Some(item)) if item.title == "Apply" => ServerCommand::Apply(which),
                _ => return,
            };
            let _ = tx.send(Msg::Command(command));
        });
    }

    fn branch_file(&self, params: &BranchFileParams) -> jsonrpc::Result<BranchText> {
        let invalid = |message: String| jsonrpc::Error {
            code: jsonrpc::ErrorCode::InvalidParams,
            message: message.into(),
            data: None,
        };
        let repair = self
            .find_repair(&RepairRef::Id(params.repair_id.clone()))
            .ok_or_else(|| invalid(format!("there is no repair `{}`", params.repair_id)))?;
        let rel =
            self.shared.paths.rel_of_any(&params.path).ok_or_else(|| {
                invalid(format!("`{}` is not a file in the workspace", params.path))
            })?;
        if let Some(result) = repaired_file(&repair.outcome.changes, &rel) {
            return Ok(BranchText::Known(result));
        }
        Ok(match repair.start_view.overlay.get(&rel) {
            Some(text) => BranchText::Known(BranchFileResult {
                text: text.clone(),
                change: BranchChange::Unchanged,
            }),
            None => BranchText::Unchanged(self.shared.paths.absolute(&rel)),
        })
    }

    fn notify_status(&self, params: SearchStatusParams) {
        let client = self.shared.client.clone();
        self.outbox
            .send(async move { client.send_notification::<SearchStatus>(params).await });
    }

    fn show(&self, typ: MessageType, message: String) {
        let client = self.shared.client.clone();
        self.outbox
            .send(async move { client.show_message(typ, message).await });
    }

    fn log(&self, typ: MessageType, message: String) {
        let client = self.shared.client.clone();
        self.outbox
            .send(async move { client.log_message(typ, message).await });
    }

    fn stop_everything(&mut self) {
        self.sensing.stop();
        for job in &self.jobs {
            job.cancel.cancel();
        }
    }
}

fn action(
    literals: bool,
    title: String,
    command: Command,
    diagnostics: Option<Vec<tower_lsp_server::ls_types::Diagnostic>>,
) -> CodeActionOrCommand {
    if !literals {
        return CodeActionOrCommand::Command(Command { title, ..command });
    }
    CodeActionOrCommand::CodeAction(CodeAction {
        title,
        kind: Some(CodeActionKind::QUICKFIX),
        diagnostics,
        command: Some(command),
        ..CodeAction::default()
    })
}

/// The cluster id in one of our diagnostics' `data`.
fn cluster_of(diagnostic: &tower_lsp_server::ls_types::Diagnostic) -> Option<String> {
    let data = diagnostic.data.clone()?;
    serde_json::from_value::<DiagnosticData>(data)
        .ok()
        .map(|d| d.cluster)
}

/// Ranges overlap or touch (a cursor at a diagnostic's edge counts).
fn overlaps(a: &Range, b: &Range) -> bool {
    a.start <= b.end && b.start <= a.end
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

/// The `trellis/searchStatus` payload for a job or a finished repair.
fn status_params(
    job: Option<&str>,
    cluster: &str,
    title: &str,
    status: SearchState,
    outcome: Option<&Arc<RepairOutcome>>,
) -> SearchStatusParams {
    SearchStatusParams {
        repair_id: outcome.map(|o| o.repair_id.clone()),
        job: job.map(str::to_owned),
        cluster: cluster.to_owned(),
        cluster_title: title.to_owned(),
        status,
        steps: outcome.map_or(0, |o| o.steps.len()),
        branches: outcome.map_or(0, |o| tasks::branch_count(o)),
        summary: outcome.map(|o| o.summary.clone()).unwrap_or_default(),
        forest: outcome.map(|o| forest(&o.steps)),
    }
}
