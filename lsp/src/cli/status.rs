//! `trellis status`: the last search as the ledger records it.

use std::path::Path;

use trellis_engine::config::Config;
use trellis_engine::context::{Outcome, Residency, TurnContext};
use trellis_engine::ledger::event::RecoveryDirection;
use trellis_engine::{BranchState, ForestStatus, History, InterruptedPromotion, SearchStatus};

use super::Format;
use super::render::Detail;
use super::terminal::{self, println_escaped};
use super::{EXIT_OK, fail, print_json, workspace};

pub fn run(path: Option<std::path::PathBuf>, format: Format, detail: Detail) -> u8 {
    let root = match workspace(path) {
        Ok(root) => root,
        Err(code) => return code,
    };
    let (status, context) = match read(&root) {
        Ok(status) => status,
        Err(message) => return fail(message),
    };
    match format {
        Format::Json => {
            let mut doc = serde_json::to_value(&status).expect("serializable");
            if !context.is_empty() {
                doc["context"] =
                    serde_json::to_value(context_figures(&context)).expect("serializable");
            }
            print_json(doc)
        }
        Format::Human => {
            print_human(&status, &models(&root), detail);
            print_context(&context);
        }
    }
    EXIT_OK
}

/// The status of `root`'s ledger and the context of each model turn; a
/// workspace without one has no search yet.
fn read(root: &Path) -> Result<(SearchStatus, Vec<TurnContext>), String> {
    if !root.is_dir() {
        return Err(format!("{}: not a directory", root.display()));
    }
    match History::open(root).map_err(|e| e.to_string())? {
        Some(history) => history.status().map_err(|e| e.to_string()),
        None => Ok((SearchStatus::default(), Vec::new())),
    }
}

/// One model request's context, in figures.
#[derive(serde::Serialize)]
struct ContextFigures<'a> {
    forest_id: &'a str,
    branch_id: &'a str,
    turn: u32,
    endpoint: &'a str,
    sent: bool,
    allowance: u64,
    request_tokens: Option<u64>,
    pinned: usize,
    resident: usize,
    evicted: usize,
    stale: usize,
}

fn context_figures(turns: &[TurnContext]) -> Vec<ContextFigures<'_>> {
    turns
        .iter()
        .map(|t| {
            let (allowance, plan) = match &t.outcome {
                Outcome::Sent { plan, .. } => (plan.allowance.input, Some(plan)),
                Outcome::Infeasible { figures } => (figures.allowance.input, None),
            };
            let count = |r| plan.map_or(0, |p| p.count(r));
            ContextFigures {
                forest_id: &t.forest_id,
                branch_id: &t.branch_id,
                turn: t.turn,
                endpoint: &t.endpoint,
                sent: plan.is_some(),
                allowance,
                request_tokens: plan.map(|p| p.request_tokens),
                pinned: count(Residency::Pinned),
                resident: count(Residency::Resident),
                evicted: count(Residency::Evicted),
                stale: count(Residency::Stale),
            }
        })
        .collect()
}

/// The model turns' context: one line per request.
fn print_context(turns: &[TurnContext]) {
    if turns.is_empty() {
        return;
    }
    println_escaped!("model context, per turn:");
    for f in context_figures(turns) {
        let used = match f.request_tokens {
            Some(tokens) => format!("{tokens} of {} tokens", f.allowance),
            None => format!("did not fit {} tokens, not sent", f.allowance),
        };
        println_escaped!(
            "  {}/{} turn {} at `{}`: {used}; {} pinned, {} resident, {} evicted, {} stale",
            f.forest_id,
            f.branch_id,
            f.turn,
            f.endpoint,
            f.pinned,
            f.resident,
            f.evicted,
            f.stale
        );
    }
}

/// The counters only a model's turns spend (`[exploration.limits]`).
const MODEL_LIMITS: [&str; 5] = [
    "model_turns",
    "tokens",
    "tool_calls",
    "mutations",
    "result_bytes",
];

/// Whether and which models the workspace's configuration has, for the
/// model limits' line: `no model configured`, or each endpoint's name and
/// model.
fn models(root: &Path) -> String {
    match Config::load(root, Config::user_file().as_deref(), None) {
        Ok(config) if config.models.is_empty() => "no model configured".to_owned(),
        Ok(config) => {
            let names: Vec<String> = config
                .models
                .iter()
                .map(|m| format!("`{}` ({})", m.name, m.model))
                .collect();
            format!("model {}", names.join(", then "))
        }
        Err(e) => format!("models unknown: {e}"),
    }
}

/// The model limits left, with whether a model used them: the search's
/// own usage, and the configuration's models.
fn model_limits(forest: &ForestStatus, models: &str) -> String {
    let left: Vec<String> = forest
        .remaining
        .iter()
        .filter(|(k, _)| MODEL_LIMITS.contains(&k.as_str()))
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let turns = forest.usage.get("model_turns").copied().unwrap_or(0);
    let used = match turns {
        0 => "no model turn used".to_owned(),
        1 => "1 model turn used".to_owned(),
        n => format!("{n} model turns used"),
    };
    format!("{} ({models}; {used} here)", left.join(", "))
}

/// A promotion a crash cut off: which repair, how far it got, and what
/// finishes it. The user's files are then neither the old tree nor the
/// verified one, so this is said before anything else about them.
fn print_interrupted(interrupted: &InterruptedPromotion) {
    if interrupted.in_progress {
        println!(
            "repair {} is being written to your files right now by another trellis process \
             ({} of {} files written so far)",
            interrupted.repair_id,
            interrupted.written.len(),
            interrupted.files.len()
        );
        return;
    }
    println!(
        "interrupted write: repair {} was being written to your files when it stopped; \
         {} of {} files hold the verified content ({}), and `.trellis/promotion.journal` \
         records the rest",
        interrupted.repair_id,
        interrupted.written.len(),
        interrupted.files.len(),
        interrupted.files.join(", ")
    );
    let how = match interrupted.next_start {
        RecoveryDirection::RolledForward => "roll it forward: every file gets the verified content",
        RecoveryDirection::RolledBack => {
            "roll it back: every file gets its content from before the repair, and a file \
             you changed since stays as you left it"
        }
    };
    println!(
        "  the next `trellis check`, `trellis repair` or language-server start finishes it: \
         it will {how}"
    );
}

/// A branch state as a user names it: a candidate fix and what became of it.
fn plain_state(state: BranchState) -> &'static str {
    match state {
        BranchState::Opened => "started",
        BranchState::Measured => "checked",
        BranchState::PartialCheckpointed => "kept to build on",
        BranchState::Ineligible => "not used",
        BranchState::NotSelected => "not chosen",
        BranchState::Abandoned => "stopped",
        BranchState::Selected => "chosen",
        BranchState::Committed => "verified",
    }
}

fn print_human(status: &SearchStatus, models: &str, detail: Detail) {
    let verbose = detail == Detail::Verbose;
    if status.forests.is_empty() {
        println_escaped!("no search recorded yet");
    }
    for forest in &status.forests {
        // A forest commits into the repair's private staging; only a
        // promotion writes the user's files.
        let state = match (&forest.closed, status.written, verbose) {
            (Some(reason), _, _)
                if reason == "committed" && status.interrupted_promotion.is_some() =>
            {
                "closed: verified, its writing was interrupted (see below)".to_owned()
            }
            (Some(reason), false, true) if reason == "committed" => {
                "closed: committed (not written)".to_owned()
            }
            (Some(reason), false, false) if reason == "committed" => {
                "closed: verified, not written".to_owned()
            }
            (Some(reason), true, false) if reason == "committed" => {
                "closed: verified and written".to_owned()
            }
            (Some(reason), _, _) => format!("closed: {reason}"),
            (None, _, _) => "open (interrupted?)".to_owned(),
        };
        if verbose {
            println_escaped!(
                "forest {}  root {}  {state}",
                forest.forest_id,
                forest.accepted_root.short(12)
            );
        } else {
            println_escaped!("search {}  {state}", forest.forest_id);
        }
        if let Some(from) = &forest.resumed_from {
            println_escaped!("  resumed from {from}");
        }
        let name = |s: BranchState| {
            if verbose {
                s.name().replace('_', " ")
            } else {
                plain_state(s).to_owned()
            }
        };
        let counts: Vec<String> = BranchState::ALL
            .iter()
            .skip(1)
            .filter(|&&s| verbose || forest.count(s) > 0)
            .map(|&s| format!("{} {}", forest.count(s), name(s)))
            .collect();
        if verbose {
            println_escaped!(
                "  branches: {} opened; {}",
                forest.branches.len(),
                counts.join(", ")
            );
        } else {
            println_escaped!(
                "  candidate fixes tried: {}; {}",
                forest.branches.len(),
                counts.join(", ")
            );
        }
        for b in &forest.branches {
            let state = if verbose {
                b.state.name()
            } else {
                plain_state(b.state)
            };
            match &b.reason {
                Some(reason) => println_escaped!(
                    "    {:<4} {state:<16} {}",
                    b.branch_id,
                    terminal::line(reason)
                ),
                None => println_escaped!("    {:<4} {state}", b.branch_id),
            }
        }
        let remaining: Vec<String> = forest
            .remaining
            .iter()
            .filter(|(k, _)| !MODEL_LIMITS.contains(&k.as_str()))
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let model = model_limits(forest, models);
        if verbose {
            println_escaped!("  remaining: {}", remaining.join(", "));
            println_escaped!("  remaining for a model: {model}");
            println_escaped!("  no-goods recorded here: {}", forest.no_goods);
        } else {
            println_escaped!("  limits left: {}", remaining.join(", "));
            println_escaped!("  limits left for a model: {model}");
        }
    }
    if let Some(interrupted) = &status.interrupted_promotion {
        print_interrupted(interrupted);
    }
    if verbose {
        println_escaped!("no-goods in the ledger: {}", status.no_goods);
    } else if status.no_goods > 0 {
        println_escaped!(
            "{}: the same fix on the same files is not tried again",
            match status.no_goods {
                1 => "1 failed attempt remembered".to_owned(),
                n => format!("{n} failed attempts remembered"),
            }
        );
    }
    if status.unreadable_rows > 0 {
        println_escaped!(
            "{} search row(s) from a newer trellis were not interpreted",
            status.unreadable_rows
        );
    }
}
