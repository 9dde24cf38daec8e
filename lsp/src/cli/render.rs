//! Human renderings of engine results for the terminal.

use std::fmt::Write as _;
use std::path::Path;

use trellis_engine::BranchOutcome;
use trellis_engine::change::FileChange;
use trellis_engine::gate::Verdict;
use trellis_engine::sensor::StageStatus;
use trellis_engine::{CheckReport, RepairOutcome, StageSummary};

fn stage_line(stages: &[StageSummary]) -> String {
    let parts: Vec<String> = stages
        .iter()
        .map(|s| {
            let status = match &s.status {
                StageStatus::Passed => "passed".to_owned(),
                StageStatus::Failed => "failed".to_owned(),
                StageStatus::Unavailable { reason } => format!("could not run ({reason})"),
            };
            let advisory = if s.required { "" } else { ", advisory" };
            format!(
                "{} {status} ({:.1}s{advisory})",
                s.stage,
                s.duration_ms as f64 / 1000.0
            )
        })
        .collect();
    parts.join(", ")
}

/// The clusters of a check, one line each, dominant first.
pub fn check_report(report: &CheckReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "stages: {}", stage_line(&report.stages));
    if report.clusters.is_empty() {
        let _ = writeln!(out, "no problems found");
    } else {
        let _ = writeln!(
            out,
            "{} cluster(s), energy {:.2}:",
            report.clusters.len(),
            report.energy
        );
        for c in &report.clusters {
            let at = c
                .sites
                .iter()
                .find_map(|s| s.span.as_ref())
                .map(|s| format!("  {}:{}:{}", s.path, s.line_start, s.col_start))
                .unwrap_or_default();
            let _ = writeln!(out, "  {}  {:<18} {}{at}", c.id, c.class.as_str(), c.title);
        }
    }
    let verdict = if report.hard_pass {
        "every required stage passes"
    } else {
        "residuals remain; `trellis repair` searches for a verified fix"
    };
    let _ = writeln!(out, "result: {verdict}");
    out
}

fn verdict_text(v: Verdict) -> &'static str {
    match v {
        Verdict::AcceptedHardPass => "hard pass",
        Verdict::AcceptedDescent => "accepted descent",
        Verdict::RejectedNonDescending => "rejected",
    }
}

/// The steps of a repair: one table of branches per step.
pub fn repair_steps(outcome: &RepairOutcome) -> String {
    let mut out = String::new();
    for (n, step) in outcome.steps.iter().enumerate() {
        let _ = writeln!(
            out,
            "step {}: {} [{}], energy {:.2}",
            n + 1,
            step.cluster_title,
            step.cluster_id,
            step.energy_before
        );
        let _ = writeln!(
            out,
            "  {:<6} {:<8} {:<5} {:<17} {:<28} candidate",
            "branch", "energy", "hard", "strategy", "outcome"
        );
        for b in &step.branches {
            let energy = b
                .energy
                .map(|e| format!("{e:.2}"))
                .unwrap_or_else(|| "-".into());
            let outcome = match &b.outcome {
                BranchOutcome::Selected => match &step.decision {
                    Some(d) => format!("selected: {}", verdict_text(d.verdict)),
                    None => "selected".into(),
                },
                BranchOutcome::NotSelected => "not selected".into(),
                BranchOutcome::Ineligible { reason } => format!("ineligible: {reason}"),
                BranchOutcome::Partial { reason } => format!("partial: {reason}"),
            };
            let hard = if b.hard_pass { "yes" } else { "no" };
            // An attempt refused before it forked has no branch.
            let branch = if b.branch_id.is_empty() {
                "-"
            } else {
                &b.branch_id
            };
            let _ = writeln!(
                out,
                "  {:<6} {:<8} {:<5} {:<17} {:<28} {}",
                branch, energy, hard, b.strategy, outcome, b.label
            );
        }
    }
    out
}

/// A unified diff of `changes`, old text read from `root`.
pub fn unified_diff(root: &Path, changes: &[FileChange]) -> String {
    let mut out = String::new();
    for change in changes {
        let path = change.path();
        let old = std::fs::read_to_string(root.join(path)).unwrap_or_default();
        let new = change.new_text().unwrap_or_default();
        let diff = similar::TextDiff::from_lines(old.as_str(), new);
        let _ = write!(
            out,
            "{}",
            diff.unified_diff()
                .context_radius(3)
                .header(&format!("a/{path}"), &format!("b/{path}"))
        );
    }
    out
}
