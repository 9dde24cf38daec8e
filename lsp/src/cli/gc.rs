//! `trellis gc`: remove what no live ledger fact or workspace needs, and
//! the same collection after every `trellis repair`.

use std::path::PathBuf;

use trellis_engine::gc::{GcReport, RemoveReason};
use trellis_engine::{Engine, PromptPolicy};

use super::Format;
use super::terminal::{self, eprintln_escaped};
use super::{EXIT_OK, fail, open};

pub fn run(path: Option<PathBuf>, dry_run: bool, format: Format, prompts: PromptPolicy) -> u8 {
    let engine = match open(path, prompts) {
        Ok(engine) => engine,
        Err(code) => return code,
    };
    let report = match engine.collect_garbage(dry_run) {
        Ok(report) => report,
        Err(e) => return fail(e),
    };
    match format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("serializable")
        ),
        Format::Human => terminal::print(&render(&report)),
    }
    EXIT_OK
}

/// The collection at the end of a repair: what it removed goes to stderr
/// (stdout may carry JSON), and a failure is a warning, never the repair's
/// verdict.
pub fn after_repair(engine: &Engine) {
    match engine.collect_garbage(false) {
        Ok(report) if report.bytes_freed > 0 || !report.slot_sets.is_empty() => {
            terminal::eprint(&render(&report));
        }
        Ok(_) => {}
        Err(e) => eprintln_escaped!("warning: collecting unused storage failed: {e}"),
    }
}

pub(crate) fn render(report: &GcReport) -> String {
    let verb = if report.dry_run {
        "would remove"
    } else {
        "removed"
    };
    let mut out = String::new();
    let objects = &report.objects;
    match &objects.skipped {
        Some(why) => out.push_str(&format!("objects: left alone: {why}\n")),
        None => out.push_str(&format!(
            "objects: {verb} {} unused blobs ({}), kept {} a resumable repair may read\n",
            objects.removed,
            bytes(objects.bytes),
            objects.kept
        )),
    }
    let seeds = &report.seeds;
    match &seeds.skipped {
        Some(why) => out.push_str(&format!("seed store: left alone: {why}\n")),
        None if seeds.removed + seeds.kept > 0 => out.push_str(&format!(
            "seed store: {verb} {} build artifacts your target/ no longer has ({}), kept {}\n",
            seeds.removed,
            bytes(seeds.bytes),
            seeds.kept
        )),
        None => {}
    }
    for set in &report.slot_sets {
        let why = match (set.reason, &set.workspace) {
            (RemoveReason::WorkspaceGone, Some(ws)) => {
                let ws = ws.to_string_lossy();
                format!("its workspace {} no longer exists", terminal::line(&ws))
            }
            (RemoveReason::WorkspaceGone, None) | (RemoveReason::NoOwner, _) => {
                "it records no workspace and was idle for an hour".to_owned()
            }
            (RemoveReason::OverLimit, _) => {
                "the cache is over its limit and it was idle longest".to_owned()
            }
        };
        out.push_str(&format!(
            "slots: {verb} {} ({}): {why}\n",
            terminal::line(&set.path.to_string_lossy()),
            bytes(set.bytes)
        ));
    }
    out.push_str(&format!(
        "{} {}\n",
        if report.dry_run {
            "would free"
        } else {
            "freed"
        },
        bytes(report.bytes_freed)
    ));
    out
}

fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} bytes"),
    }
}
