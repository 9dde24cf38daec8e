//! The engine's front door: the calls the CLI and the language server make.
//!
//! Both front ends drive exactly these functions, so `trellis repair` in a
//! terminal and the Repair code action in an editor take the same decisions.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

use crate::apply::{self, ApplyOffer};
use crate::bundles::BundleStore;
use crate::cluster::ResidualClass;
use crate::config::Config;
use crate::digest::Digest;
use crate::error::EngineError;
use crate::failpoint;
use crate::ledger::event::PromotionRecovered;
use crate::ledger::{Ledger, LedgerEvent, PromotionRoute, RolledBack};
use crate::measure::{self, Measurement, MeasurementCache};
use crate::outside;
use crate::promote;
use crate::prompt_policy::{PromptPolicy, SessionPrompts, pin_prompt_bundles};
use crate::records;
use crate::repair::{Accepted, Ctx, Session, search};
use crate::report::{CheckReport, Promotion, RepairOptions, RepairOutcome, RepairStatus};
use crate::runtime::{Progress, blocking, in_idle_time};
use crate::sensor::Sensor;
use crate::slots::Slots;
use crate::snapshot::{
    CopyLimits, DirSource, Overlay, Snapshot, Snapshotter, View, diff, materialize,
};
use crate::stage_set;
use crate::statedir;

/// How many state roots' measurements an engine remembers: enough for a
/// check, its repair and the edits between them.
const MEASUREMENT_CACHE_ROOTS: usize = 32;

/// One workspace's engine: configuration, snapshot cache, ledger, branch slots.
/// `Send + Sync`; the language server shares it behind an `Arc`.
pub struct Engine {
    root: PathBuf,
    config: Config,
    ledger: Ledger,
    slots: Slots,
    snapshotter: Mutex<Snapshotter>,
    sensors: OnceCell<Vec<Box<dyn Sensor>>>,
    /// Serializes use of the view slot.
    view_lock: tokio::sync::Mutex<()>,
    /// One repair at a time owns the branch slots.
    repair_lock: tokio::sync::Mutex<()>,
    /// Recent measurements by state root (see [`MeasurementCache`]).
    measurements: Mutex<MeasurementCache>,
    /// The prompt policy and bundles pinned at start, recorded with the
    /// session; every model call compiles with them.
    prompts: SessionPrompts,
    /// The versioned prompt-bundle store, `.trellis/bundles.db`.
    bundles: BundleStore,
    /// The interrupted promotion this start finished or undid, if any.
    recovered: Option<PromotionRecovered>,
}

/// Takes a process-wide slot lock off the async runtime's threads.
async fn slot_lock(slots: &Slots, name: &'static str) -> Result<std::fs::File, EngineError> {
    let slots = slots.clone();
    let path = slots.lock_path(name);
    tokio::task::spawn_blocking(move || slots.lock(name))
        .await?
        .map_err(|source| EngineError::SlotLock { name, path, source })
}

impl Engine {
    /// Opens the workspace at `root`: loads the configuration layers, opens
    /// the ledger in `.trellis/`. `init_options` are LSP `initializationOptions`.
    pub fn open(
        root: &Path,
        init_options: Option<serde_json::Value>,
    ) -> Result<Engine, EngineError> {
        Engine::open_with(root, init_options, PromptPolicy::default())
    }

    /// [`Engine::open`] with the session's prompt policy: the workspace's
    /// prompt bundles are validated and pinned under it, or start-up fails.
    pub fn open_with(
        root: &Path,
        init_options: Option<serde_json::Value>,
        prompt_policy: PromptPolicy,
    ) -> Result<Engine, EngineError> {
        let root = root.canonicalize().map_err(|e| EngineError::Config {
            path: root.to_path_buf(),
            message: format!("cannot open the workspace: {e}"),
        })?;
        if !root.is_dir() {
            return Err(EngineError::Config {
                path: root,
                message: "the workspace is not a directory".into(),
            });
        }
        let config = Config::load(&root, Config::user_file().as_deref(), init_options.as_ref())
            .map_err(|e| EngineError::Config {
                path: PathBuf::from(&e.source_name),
                message: e.message,
            })?;
        // A linked `.trellis` is refused here, before anything is written.
        let state = statedir::open_state(&root)?;
        let prompts = pin_prompt_bundles(&root, &state, prompt_policy)?;
        let bundles = BundleStore::open_in(&state)?;
        let mut snapshotter = Snapshotter::new(&root, Some(state.join("index")));
        let limits = &config.exploration;
        snapshotter.bound(limits.workspace_files, limits.workspace_bytes);
        if let Some(oracle) = config.verification.oracle(&root) {
            // Never in a view, so never in a slot, a diff or a promotion.
            snapshotter.withhold(oracle.path());
        }
        let ledger = Ledger::open_in(state)?;
        let recovered = promote::journal::recover(&root, &ledger)?;
        if let Some(r) = &recovered {
            tracing::warn!("{}", LedgerEvent::PromotionRecovered(r.clone()));
        }
        Ok(Engine {
            recovered,
            slots: Slots::for_workspace(&root),
            root,
            config,
            ledger,
            snapshotter: Mutex::new(snapshotter),
            sensors: OnceCell::new(),
            view_lock: tokio::sync::Mutex::new(()),
            repair_lock: tokio::sync::Mutex::new(()),
            measurements: Mutex::new(MeasurementCache::new(MEASUREMENT_CACHE_ROOTS)),
            prompts,
            bundles,
        })
    }

    /// Re-roots from directory watches instead of a stat of every file: for
    /// the language server, which re-roots on every save. The CLI, a new
    /// process each run, keeps the stat cache. [`Snapshotter::watch`] says
    /// what watches do not see.
    pub fn watch_workspace(&self) {
        self.snapshotter.lock().expect("snapshotter lock").watch();
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What this system lets a slot's processes be confined by (probed
    /// once per process; blocks the first time).
    pub fn sandbox(&self) -> &'static crate::sensor::sandbox::Support {
        crate::sensor::sandbox::support()
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The ledger's last event, which `trellis ledger verify --expect-head`
    /// takes back; `None` before the first.
    pub fn ledger_head(&self) -> Result<Option<crate::ledger::Head>, EngineError> {
        Ok(self.ledger.head()?)
    }

    /// What the last search did and any promotion a crash interrupted, as
    /// the ledger and the promotion journal have them now.
    pub fn status(&self) -> Result<crate::SearchStatus, EngineError> {
        let rows = self.ledger.rows()?;
        Ok(crate::history::search_status(
            &self.root,
            &self.ledger,
            &rows,
        )?)
    }

    /// The workspace's prompt-bundle store (reads, defaults, history).
    pub fn bundle_store(&self) -> &BundleStore {
        &self.bundles
    }

    /// Writes a bundle version (compiled first; nothing is stored on any
    /// refusal), then prunes that id within its retention bound, keeping
    /// every version a ledger session names.
    pub fn write_bundle(
        &self,
        id: &str,
        draft: &crate::bundles::Draft,
        options: &crate::bundles::WriteOptions,
    ) -> Result<crate::bundles::WriteResult, EngineError> {
        let written = self.bundles.write(id, draft, options)?;
        self.bundles
            .prune(&self.ledgered_bundle_versions()?, Some(id), false)?;
        Ok(written)
    }

    /// Removes the bundle versions retention allows (see `bundles`), never
    /// one a ledger session names; `only` limits it to one id.
    pub fn prune_bundles(
        &self,
        only: Option<&str>,
        dry_run: bool,
    ) -> Result<crate::bundles::PruneReport, EngineError> {
        let named = self.ledgered_bundle_versions()?;
        Ok(self.bundles.prune(&named, only, dry_run)?)
    }

    /// Every bundle version a ledgered repair attached, by id.
    fn ledgered_bundle_versions(
        &self,
    ) -> Result<std::collections::BTreeMap<String, std::collections::BTreeSet<u32>>, EngineError>
    {
        let mut named: std::collections::BTreeMap<_, std::collections::BTreeSet<u32>> =
            Default::default();
        for row in self.ledger.rows()? {
            if let crate::ledger::DecodedRow::Ledger(LedgerEvent::BundlesAttached(e)) = row.event {
                for c in e.components {
                    named.entry(c.id).or_default().insert(c.version);
                }
            }
        }
        Ok(named)
    }

    /// Removes what no live ledger fact or workspace needs (see
    /// [`crate::gc`]); with `dry_run`, only reports it.
    pub fn collect_garbage(&self, dry_run: bool) -> Result<crate::gc::GcReport, EngineError> {
        let rows = self.ledger.rows()?;
        crate::gc::collect(self.ledger.state_dir(), &rows, &self.slots, dry_run).map_err(|source| {
            EngineError::Collect {
                state: self.ledger.state_dir().path().to_path_buf(),
                cache: self.slots.dir().to_path_buf(),
                source,
            }
        })
    }

    /// The promotion a crash interrupted that opening this engine finished
    /// or undid (and ledgered).
    pub fn recovered(&self) -> Option<&PromotionRecovered> {
        self.recovered.as_ref()
    }

    /// The program each stage runs and why that one, in stage order: what
    /// `trellis check --verbose` names. Identifies the sensors if no check
    /// has yet.
    pub async fn tools(&self) -> Result<Vec<crate::sensor::toolpath::ToolUse>, EngineError> {
        let sensors = self.sensors().await?;
        Ok(sensors.iter().flat_map(|sensor| sensor.tools()).collect())
    }

    /// The sensors, fingerprinted once per session; the first call ledgers
    /// the session start with them.
    async fn sensors(&self) -> Result<&[Box<dyn Sensor>], EngineError> {
        let sensors = self
            .sensors
            .get_or_try_init(|| async {
                let sensors = stage_set::sensors(&self.root, &self.config).await;
                self.ledger.append(&records::session_started(
                    &self.root,
                    &self.config,
                    (self.prompts.policy, &self.prompts.pinned),
                    &sensors,
                ))?;
                Ok::<_, EngineError>(sensors)
            })
            .await?;
        Ok(sensors)
    }

    fn snapshot(&self, overlay: &Overlay) -> Result<Snapshot, EngineError> {
        blocking(|| {
            let mut snapshotter = self.snapshotter.lock().expect("snapshotter lock");
            snapshotter.snapshot(overlay).map_err(EngineError::from)
        })
    }

    /// The state root of the view, computed without running anything.
    pub fn view_root(&self, view: &View) -> Result<Digest, EngineError> {
        Ok(self.snapshot(&Overlay::from(view))?.root)
    }

    /// Snapshots and measures the view (or reuses the measurement of an
    /// identical root), showing `staged` the measurement of every stage
    /// prefix before the last stage runs (none for a cached root).
    /// A repair names the slot of its first branch (`first_branch`): that
    /// slot's build output is prepared while the view's stages run, which
    /// leave a core idle much of the time (cargo's start, the slower of two
    /// compilations), instead of after them, when the branch waits for it.
    async fn measure_view_staged(
        &self,
        view: &View,
        progress: &dyn Progress,
        cancel: &CancellationToken,
        staged: &(dyn Fn(&Measurement) + Sync),
        first_branch: Option<PathBuf>,
    ) -> Result<(Snapshot, Overlay, Measurement), EngineError> {
        let overlay = Overlay::from(view);
        let snapshot = self.snapshot(&overlay)?;
        self.ledger
            .append(&records::snapshot_taken(&snapshot, &overlay))?;
        let cached = |root: &Digest| {
            self.measurements
                .lock()
                .expect("measurement cache")
                .get(root)
                .cloned()
        };
        if let Some(m) = cached(&snapshot.root) {
            return Ok((snapshot, overlay, m));
        }
        let (dir, target_dir) = (self.slots.view(), self.slots.view_target());
        let copied = async {
            let view = self.view_lock.lock().await;
            // Rooted again under the lock: a file that changed since the
            // first snapshot (while this run waited for another) is measured
            // as it is now, never served the old root's measurement nor
            // copied under it. A re-root costs little next to the stages it
            // precedes.
            let now = self.snapshot(&overlay)?;
            if now.root != snapshot.root {
                self.ledger
                    .append(&records::snapshot_taken(&now, &overlay))?;
            }
            // The run this one waited for may have measured the same root:
            // a repair asked for once the build's diagnostics were shown,
            // while their run still tests.
            if let Some(m) = cached(&now.root) {
                return Ok(Err((now, m)));
            }
            let view_slot = slot_lock(&self.slots, "view").await?;
            let source = DirSource::new(self.root.clone(), overlay.clone());
            let limits = CopyLimits {
                max_files: self.config.exploration.workspace_files,
                max_bytes: self.config.exploration.workspace_bytes,
            };
            progress.report("copying the workspace", None);
            blocking(|| self.slots.link_outside_paths(&now, &source)).map_err(|source| {
                EngineError::SlotSetup {
                    path: self.slots.dir().to_path_buf(),
                    source,
                }
            })?;
            blocking(|| materialize(&now, &source, &dir, limits))?;
            blocking(|| failpoint::hit("view-measure"));
            // Only while the sensors are still being built: afterwards the
            // first stage's own run prepares the slot, with nothing to hide.
            if self.sensors.get().is_none() {
                blocking(|| {
                    stage_set::prepare_slot(
                        &self.root,
                        &self.config,
                        &target_dir,
                        &dir,
                        false,
                        cancel,
                    )
                });
            }
            Ok::<_, EngineError>(Ok((now, view, view_slot)))
        };
        // Polled first, the sensors start identifying the toolchain (the
        // first time: a few process starts) before the view is copied and
        // its slot prepared, so a first measurement waits for the slower of
        // the two instead of both.
        let (sensors, copied) = tokio::join!(biased; self.sensors(), copied);
        let (snapshot, _view, _view_slot) = match copied? {
            Ok(copied) => copied,
            Err((snapshot, m)) => return Ok((snapshot, overlay, m)),
        };
        let sensors = sensors?;
        let run = measure::Run {
            dir: &dir,
            target_dir: &target_dir,
            config: &self.config,
            label: "workspace",
            progress,
            cancel,
            policy: self.config.sandbox.for_user_code(),
        };
        // Stopped with the repair: a cancelled repair waits only for the
        // entries already begun.
        let first_branch_seeded = async {
            if let Some(branch) = first_branch {
                let (root, config, base, stop) = (
                    self.root.clone(),
                    self.config.clone(),
                    target_dir.clone(),
                    cancel.clone(),
                );
                in_idle_time(move || {
                    stage_set::prepare_slot(&root, &config, &base, &branch, true, &stop)
                })
                .await;
            }
        };
        let measured = measure::measure_staged(snapshot.root, sensors, run, staged);
        let (m, ()) = tokio::join!(measured, first_branch_seeded);
        if !cancel.is_cancelled() && m.unavailable().is_empty() {
            self.measurements
                .lock()
                .expect("measurement cache")
                .insert(snapshot.root, m.clone());
        }
        Ok((snapshot, overlay, m))
    }

    fn check_report(&self, m: &Measurement) -> CheckReport {
        CheckReport::of(m, &self.config)
    }

    /// Snapshots the view and runs every configured stage on it.
    pub async fn check(
        &self,
        view: &View,
        progress: &dyn Progress,
        cancel: CancellationToken,
    ) -> Result<CheckReport, EngineError> {
        self.check_staged(view, progress, cancel, &|_| {}).await
    }

    /// [`Engine::check`], handing `staged` the report of the stages run so
    /// far before each later stage starts (the build's diagnostics while
    /// the tests still run); the result is the report of every stage. A
    /// root measured before reports once, as the result.
    pub async fn check_staged(
        &self,
        view: &View,
        progress: &dyn Progress,
        cancel: CancellationToken,
        staged: &(dyn Fn(CheckReport) + Sync),
    ) -> Result<CheckReport, EngineError> {
        let partial = |m: &Measurement| staged(self.check_report(m));
        let (_, _, m) = self
            .measure_view_staged(view, progress, &cancel, &partial, None)
            .await?;
        Ok(self.check_report(&m))
    }

    /// Runs the bounded repair search from the view. Never writes the user's files.
    pub async fn repair(
        &self,
        view: &View,
        options: &RepairOptions,
        progress: &dyn Progress,
        cancel: CancellationToken,
    ) -> Result<RepairOutcome, EngineError> {
        let _repair = self.repair_lock.lock().await;
        if let Some(oracle) = self.config.verification.oracle(&self.root) {
            // Fails closed before anything is measured or spent.
            blocking(|| oracle.check()).map_err(|message| EngineError::Config {
                path: self.root.join(crate::config::WORKSPACE_FILE),
                message,
            })?;
        }
        let _branch_slots = slot_lock(&self.slots, "branches").await?;
        // Resolved once, here: nothing the store does later reaches this repair.
        let bundles = crate::prompt_policy::session_bundles(
            &self.bundles,
            &options.bundles,
            &self.config,
            (self.prompts.policy, &crate::actor::tools::TOOL_NAMES),
        )?;
        failpoint::hit("bundles-attached");
        let (snapshot, overlay, m0) = self
            .measure_view_staged(view, progress, &cancel, &|_| {}, Some(self.slots.branch(0)))
            .await?;
        let repair_id = records::repair_id(&snapshot.root);
        if cancel.is_cancelled() {
            // Cancelled while the view was measured (or waited for the
            // sensing run measuring it): its measurement is incomplete,
            // so nothing is recorded or searched from it.
            return Ok(RepairOutcome {
                repair_id,
                status: RepairStatus::Cancelled,
                start_root: snapshot.root,
                final_root: snapshot.root,
                initial: self.check_report(&m0),
                steps: Vec::new(),
                changes: Vec::new(),
                summary: "cancelled while the workspace was measured".into(),
                model_would_help: false,
                unfixed: Vec::new(),
            });
        }
        // Folds the ledger first: an ambiguous interrupted search refuses
        // the repair before anything is recorded for it.
        let mut session = Session::begin(&self.ledger, snapshot.root)?;
        if !bundles.components.is_empty() {
            self.ledger.append(&LedgerEvent::BundlesAttached(
                crate::ledger::BundlesAttached {
                    repair_id: repair_id.clone(),
                    node: session.node.clone(),
                    generation: session.generation,
                    components: bundles.components.clone(),
                },
            ))?;
        }
        if !session.x0_recorded {
            self.ledger.append(&records::candidate_measured(
                &session.node,
                session.generation,
                &session.x0_id(),
                &m0,
            ))?;
        }
        let initial = self.check_report(&m0);
        if let Some(target) = &options.target_cluster
            && !initial
                .clusters
                .iter()
                .any(|c| &c.id == target && c.class != ResidualClass::Warning)
        {
            let known: Vec<&str> = initial
                .clusters
                .iter()
                .filter(|c| c.class != ResidualClass::Warning)
                .map(|c| c.id.as_str())
                .collect();
            return Err(EngineError::Usage(format!(
                "no repairable cluster `{target}` in the current view (clusters: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )));
        }
        let start_root = snapshot.root;
        if m0.hard_pass() {
            return Ok(RepairOutcome {
                repair_id,
                status: RepairStatus::AlreadyClean,
                start_root,
                final_root: start_root,
                initial,
                steps: Vec::new(),
                changes: Vec::new(),
                summary: "nothing to repair: every required stage passes".into(),
                model_would_help: false,
                unfixed: Vec::new(),
            });
        }
        let sensors = self.sensors().await?;
        let ctx = Ctx {
            root: &self.root,
            config: &self.config,
            sensors,
            ledger: &self.ledger,
            slots: &self.slots,
            prompts: &self.prompts,
            progress,
            cancel: &cancel,
            bundles: &bundles.replacements,
            // A continued generation's accepted state may hold what a model
            // wrote before the interruption.
            model_code: AtomicBool::new(
                !self.config.models.is_empty() && session.continues_a_generation(),
            ),
        };
        // Where model-written code may run unconfined, what it could change
        // outside the slots is listed first (`outside.rs`).
        let unconfined = !self.config.models.is_empty() && !self.sandbox().confines_files();
        let watch = unconfined.then(|| {
            let mut dirs = crate::sensor::python::site_packages(
                &self.root,
                self.config.python.interpreter.as_deref(),
            );
            dirs.extend(self.slots.linked_node_modules());
            outside::Watch::begin(dirs)
        });
        let start_source = DirSource::new(self.root.clone(), overlay.clone());
        let start = Accepted {
            snapshot: snapshot.clone(),
            overlay,
            measurement: m0,
        };
        let result = search(&ctx, &mut session, &repair_id, start, options).await;
        let model_code_ran = ctx.model_code.load(std::sync::atomic::Ordering::SeqCst);
        self.check_outside(&repair_id, watch.filter(|_| model_code_ran))?;
        let result = result?;
        let final_root = result.last.snapshot.root;
        let changes = if final_root == start_root {
            Vec::new()
        } else {
            let last_source = DirSource::new(self.root.clone(), result.last.overlay.clone());
            diff(
                &snapshot,
                &start_source,
                &result.last.snapshot,
                &last_source,
            )?
        };
        let summary = match (result.status, result.labels.is_empty()) {
            (RepairStatus::HardPass, _) => result.labels.join("; "),
            (_, true) => format!("no repair found for {} cluster(s)", initial.clusters.len()),
            (_, false) => format!("partial: {} (residuals remain)", result.labels.join("; ")),
        };
        Ok(RepairOutcome {
            repair_id,
            status: result.status,
            start_root,
            final_root,
            initial,
            steps: result.steps,
            changes,
            summary,
            model_would_help: result.model_would_help,
            unfixed: result.unfixed,
        })
    }

    /// Fails the repair `repair_id`, ledgering the refusal, when something
    /// outside every slot changed while it ran (`outside.rs`): the seed
    /// store always, and what `watch` listed. What can be is put back first.
    fn check_outside(
        &self,
        repair_id: &str,
        watch: Option<outside::Watch>,
    ) -> Result<(), EngineError> {
        let store = crate::sensor::cargo::seed_store(&self.slots.branch_target());
        let user_target = crate::sensor::cargo::user_target(&self.root);
        let breach = outside::check_seed_store(&store, &user_target).map_err(|e| {
            EngineError::Invariant(format!(
                "{}: cannot check the seed store: {e}",
                store.display()
            ))
        })?;
        let breach = match watch {
            Some(watch) => breach.and(watch.end()),
            None => breach,
        };
        if breach.is_empty() {
            return Ok(());
        }
        tracing::error!(changed = ?breach.changed, restored = ?breach.restored, "outside every slot changed");
        self.ledger
            .append(&records::refused_outside_changed(repair_id, &breach))?;
        Err(EngineError::OutsideChanged {
            changed: breach.changed,
            restored: breach.restored,
        })
    }

    /// Only a hard pass is promoted, whichever front end asks; a refusal is ledgered.
    fn require_hard_pass(&self, outcome: &RepairOutcome) -> Result<(), EngineError> {
        if outcome.status == RepairStatus::HardPass {
            return Ok(());
        }
        self.ledger.append(&records::refused_not_hard_pass(
            &outcome.repair_id,
            outcome.status,
        ))?;
        Err(EngineError::NotPromotable(outcome.status))
    }

    /// CLI promotion: checks the ledger is still the one at
    /// `.trellis/ledger.db` and the disk still has `outcome.start_root`, then
    /// writes every change as one journalled promotion ([`promote`]), and
    /// ledgers it (or undoes it when the ledger moved meanwhile). A user edit seen
    /// on the way is a ledgered stale refusal with everything put back.
    pub fn promote_to_disk(&self, outcome: &RepairOutcome) -> Result<Promotion, EngineError> {
        self.require_hard_pass(outcome)?;
        failpoint::hit("promote-start");
        self.ledger.check_in_place()?;
        let current = self.snapshot(&Overlay::default())?;
        if current.root != outcome.start_root {
            return Err(self.stale(outcome, current.root)?);
        }
        let targets: Vec<promote::Target<'_>> = outcome
            .changes
            .iter()
            .map(|c| promote::Target {
                path: c.path(),
                old: current.entries.get(c.path().as_str()).map(|e| e.blob),
                new: c.new_text().map(str::as_bytes),
            })
            .collect();
        let promoted = match promote::promote(
            &self.root,
            self.ledger.state_dir(),
            &outcome.repair_id,
            &targets,
        ) {
            Ok(promoted) => promoted,
            Err(promote::PromoteError::Stale { rolled_back, .. }) => {
                let found = self.snapshot(&Overlay::default())?.root;
                return Err(match rolled_back {
                    None => self.stale(outcome, found)?,
                    Some(rolled_back) => self.rolled_back(outcome, found, rolled_back)?,
                });
            }
            Err(e) => return Err(e.into()),
        };
        let after = self.snapshot(&Overlay::default())?;
        match self.ledger_promotion(outcome, current.root, after.root, PromotionRoute::Cli) {
            Ok(promotion) => {
                promoted.finish()?;
                Ok(promotion)
            }
            // Never leave files written that the ledger does not record.
            Err(e) => Err(promoted.roll_back(e.to_string()).into()),
        }
    }

    /// Ledgers a stale-root refusal of `outcome` and returns the error for it.
    fn stale(&self, outcome: &RepairOutcome, found: Digest) -> Result<EngineError, EngineError> {
        self.record_stale_refusal(outcome, found)?;
        Ok(EngineError::StaleRoot {
            expected: outcome.start_root,
            found,
        })
    }

    /// Ledgers the stale-root refusal of a promotion of `outcome` that the
    /// user's edit stopped after its first rename, undone as `rolled_back`
    /// says, and returns the error for it.
    fn rolled_back(
        &self,
        outcome: &RepairOutcome,
        found: Digest,
        rolled_back: RolledBack,
    ) -> Result<EngineError, EngineError> {
        self.ledger.append(&records::refused_stale(
            &outcome.repair_id,
            outcome.start_root,
            found,
            Some(rolled_back.clone()),
        ))?;
        Ok(EngineError::PromotionRolledBack {
            expected: outcome.start_root,
            found,
            rolled_back,
        })
    }

    /// Ledgers (durably) that `outcome` moved the user's files from `before`
    /// to `after`; refused when `.trellis/ledger.db` is no longer the
    /// database this engine has open (the record would be lost).
    fn ledger_promotion(
        &self,
        outcome: &RepairOutcome,
        before: Digest,
        after: Digest,
        via: PromotionRoute,
    ) -> Result<Promotion, EngineError> {
        let promotion = Promotion {
            root_before: before,
            root_after: after,
            files: outcome
                .changes
                .iter()
                .map(|c| c.path().to_owned())
                .collect(),
        };
        self.ledger.check_in_place()?;
        self.ledger
            .append(&records::promoted(&outcome.repair_id, &promotion, via))?;
        Ok(promotion)
    }

    /// Writes `bytes` to `.trellis/<dir>/<name>` (e.g. a preview) without
    /// following a link, and returns its path.
    pub fn write_state_file(
        &self,
        dir: &str,
        name: &str,
        bytes: &[u8],
    ) -> Result<PathBuf, EngineError> {
        let dir = self.ledger.state_dir().child(dir, true)?;
        dir.write_atomic(name, bytes, 0o644)?;
        Ok(dir.join(name))
    }

    /// Editor promotion: the editor applied `outcome.changes` and its view
    /// now has `observed_root`, which must be the repair's final root.
    pub fn record_editor_promotion(
        &self,
        outcome: &RepairOutcome,
        observed_root: Digest,
    ) -> Result<(), EngineError> {
        self.require_hard_pass(outcome)?;
        if !apply::reached(outcome, observed_root) {
            return Err(EngineError::StaleRoot {
                expected: outcome.final_root,
                found: observed_root,
            });
        }
        self.ledger_promotion(
            outcome,
            outcome.start_root,
            observed_root,
            PromotionRoute::Editor,
        )?;
        Ok(())
    }

    /// Decides whether `outcome` may be applied to the editor's `view`: it
    /// must hard-pass and the view must still have its start root. A
    /// refusal is ledgered before it is returned (`NotPromotable`, or
    /// `StaleRoot` naming the root found), so the front end only shows it.
    pub fn decide_apply(&self, outcome: &RepairOutcome, view: &View) -> Result<(), EngineError> {
        self.require_hard_pass(outcome)?;
        let found = self.view_root(view)?;
        // A hard pass is established above, so anything but fresh is stale.
        if apply::offer(outcome, found) != ApplyOffer::Fresh {
            return Err(self.stale(outcome, found)?);
        }
        Ok(())
    }

    /// Whether `outcome`'s Apply may be offered on a view whose root is
    /// `view_root`, decided from values alone (no I/O, nothing ledgered):
    /// what the editor's code actions show. Applying still goes through
    /// [`Engine::decide_apply`], which ledgers a refusal.
    pub fn apply_offer(outcome: &RepairOutcome, view_root: Digest) -> ApplyOffer {
        apply::offer(outcome, view_root)
    }

    /// Whether a view with `observed_root` holds what `outcome` verified,
    /// so [`Engine::record_editor_promotion`] will record it.
    pub fn editor_view_reached(outcome: &RepairOutcome, observed_root: Digest) -> bool {
        apply::reached(outcome, observed_root)
    }

    /// Ledgers a refused apply: the view moved away from `outcome.start_root`.
    fn record_stale_refusal(
        &self,
        outcome: &RepairOutcome,
        found: Digest,
    ) -> Result<(), EngineError> {
        self.ledger.append(&records::refused_stale(
            &outcome.repair_id,
            outcome.start_root,
            found,
            None,
        ))?;
        Ok(())
    }
}
