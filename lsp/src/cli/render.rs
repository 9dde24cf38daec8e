//! Human renderings of engine results for the terminal. File names and
//! the values that may quote one go through [`terminal::line`]; the caller
//! prints the result through [`terminal::print`], which escapes the rest.

use std::fmt::Write as _;
use std::path::Path;

use trellis_engine::change::FileChange;
use trellis_engine::cluster::ResidualClass;
use trellis_engine::gate::Verdict;
use trellis_engine::sensor::StageStatus;
use trellis_engine::sensor::oracle::OracleVerdict;
use trellis_engine::sensor::sandbox::Support;
use trellis_engine::sensor::toolpath::ToolUse;
use trellis_engine::{BranchOutcome, CheckReport, RepairOutcome, StageSummary, StepReport};

use super::terminal;
use super::why::{counted, plain_reason};

/// How much of the machinery the text shows. The default speaks the user's
/// terms (problems, root causes, candidate fixes); `--verbose` adds the
/// precise ones the ledger and `docs/user-guide.md` use (energy, clusters,
/// strategies, partial checkpoints, no-goods).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    Plain,
    Verbose,
}

fn stage_line(stages: &[StageSummary]) -> String {
    let parts: Vec<String> = stages
        .iter()
        .map(|s| {
            let status = match &s.status {
                StageStatus::Passed => "passed".to_owned(),
                StageStatus::Failed => "failed".to_owned(),
                StageStatus::Unavailable { reason } => {
                    format!("could not run ({})", terminal::line(reason))
                }
            };
            let advisory = if s.required { "" } else { ", advisory" };
            // Still failing the stage, but not evidence against the fix.
            let flaky = if s.flaky.is_empty() {
                String::new()
            } else {
                format!("; flaky, passed when re-run: {}", names(&s.flaky))
            };
            match &s.not_run {
                Some(why) => format!(
                    "{} {status} (not run: {}{advisory})",
                    s.stage,
                    terminal::line(why)
                ),
                None => format!(
                    "{} {status} ({:.1}s{advisory}{flaky})",
                    s.stage,
                    s.duration_ms as f64 / 1000.0
                ),
            }
        })
        .collect();
    parts.join(", ")
}

/// A cluster's residual class as a user names it.
fn plain_class(class: ResidualClass) -> &'static str {
    match class {
        ResidualClass::Syntax => "syntax error",
        ResidualClass::UnresolvedName => "missing name",
        ResidualClass::Type => "type error",
        ResidualClass::CompileError => "compile error",
        ResidualClass::Borrow => "borrow error",
        ResidualClass::TestFailure => "failing test",
        ResidualClass::SensorUnavailable => "check not run",
        ResidualClass::Warning => "warning",
    }
}

/// Who asks for the check report: `trellis check`, or `trellis repair`
/// before its steps (which must not advise running itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    Check,
    Repair,
}

/// The clusters of a check, one line each, dominant first.
pub fn check_report(report: &CheckReport, detail: Detail, then: Then) -> String {
    let mut out = String::new();
    let checks = match detail {
        Detail::Plain => "checks",
        Detail::Verbose => "stages",
    };
    let _ = writeln!(out, "{checks}: {}", stage_line(&report.stages));
    if report.clusters.is_empty() {
        let _ = writeln!(out, "no problems found");
    } else {
        let problems: usize = report.clusters.iter().map(|c| c.sites.len()).sum();
        let causes = report.clusters.len();
        let _ = match detail {
            Detail::Plain => writeln!(
                out,
                "{}, {}:",
                counted(problems, "problem", "problems"),
                counted(causes, "root cause", "root causes")
            ),
            Detail::Verbose => writeln!(
                out,
                "{} in {}, energy {:.2}:",
                counted(problems, "site", "sites"),
                counted(causes, "cluster", "clusters"),
                report.energy
            ),
        };
        for c in &report.clusters {
            let at = c
                .sites
                .iter()
                .find_map(|s| s.span.as_ref())
                .map(|s| {
                    let path = terminal::line(s.path.as_str());
                    format!("  {path}:{}:{}", s.line_start, s.col_start)
                })
                .unwrap_or_default();
            let class = match detail {
                Detail::Plain => plain_class(c.class),
                Detail::Verbose => c.class.as_str(),
            };
            let _ = writeln!(
                out,
                "  {}  {class:<18} {}{at}",
                c.id,
                terminal::line(&c.title)
            );
        }
    }
    let verdict = match (report.hard_pass, then) {
        (true, _) => "every required check passes",
        (false, Then::Check) => "problems remain; `trellis repair` searches for a verified fix",
        (false, Then::Repair) => "problems remain; searching for a verified fix",
    };
    let _ = writeln!(out, "result: {verdict}");
    out
}

/// Which program each stage runs and why, one line each under `tools:`
/// (`trellis check --verbose`); nothing when no stage names its programs
/// (the Rust stages run the `cargo` on `PATH`).
pub fn tools(tools: &[ToolUse]) -> String {
    let mut out = String::new();
    if tools.is_empty() {
        return out;
    }
    let _ = writeln!(out, "tools:");
    let width = tools.iter().map(|t| t.stage.len()).max().unwrap_or(0);
    for tool in tools {
        let _ = writeln!(
            out,
            "  {:<width$}  {}",
            tool.stage,
            terminal::line(&tool.to_string())
        );
    }
    out
}

/// What `--format json` says of the sandbox: whether a slot's writes and
/// its network are confined, why not, and the line `--verbose` prints.
pub fn sandbox_json(support: &Support) -> serde_json::Value {
    let unavailable: Vec<&String> = [&support.files, &support.namespaces]
        .into_iter()
        .filter_map(|found| found.as_ref().err())
        .collect();
    serde_json::json!({
        "files": support.confines_files(),
        "network": support.confines_network(),
        "unavailable": unavailable,
        "summary": support.describe(),
    })
}

fn verdict_text(v: Verdict, detail: Detail) -> &'static str {
    match (v, detail) {
        (Verdict::AcceptedHardPass, Detail::Plain) => "every check passes",
        (Verdict::AcceptedDescent, Detail::Plain) => "fewer problems, kept",
        (Verdict::RejectedNonDescending, Detail::Plain) => "no better, dropped",
        (Verdict::AcceptedHardPass, Detail::Verbose) => "hard pass",
        (Verdict::AcceptedDescent, Detail::Verbose) => "accepted descent",
        (Verdict::RejectedNonDescending, Detail::Verbose) => "rejected",
    }
}

/// Width of the outcome column of `repair --verbose`.
const OUTCOME_WIDTH: usize = 28;
/// Where that column starts: the indent and the columns before it, each
/// with its separating space.
const OUTCOME_COLUMN: usize = 2 + 7 + 9 + 6 + 18;

/// `text` in lines of at most `width` chars, broken at spaces (a word
/// longer than `width` is cut), so a long outcome stays in its column.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        while word.len() > width {
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            lines.push(word.drain(..width).collect());
        }
        let word: String = word.into_iter().collect();
        let fits = line.chars().count() + 1 + word.chars().count() <= width;
        if line.is_empty() {
            line = word;
        } else if fits {
            line.push(' ');
            line.push_str(&word);
        } else {
            lines.push(std::mem::replace(&mut line, word));
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// What became of one candidate fix.
fn branch_outcome(outcome: &BranchOutcome, step: &StepReport, detail: Detail) -> String {
    match (outcome, detail) {
        (BranchOutcome::Selected, _) => match &step.decision {
            Some(d) => format!("chosen: {}", verdict_text(d.verdict, detail)),
            None => "chosen".into(),
        },
        (BranchOutcome::NotSelected, Detail::Plain) => "not chosen".into(),
        (BranchOutcome::Ineligible { cause, .. }, Detail::Plain) => {
            format!("not used: {}", plain_reason(cause))
        }
        // A partial checkpoint, said without the machinery: the reason names
        // energies and ρ, which `--verbose` shows.
        (BranchOutcome::Partial { revealed, .. }, Detail::Plain) if !revealed.is_empty() => {
            format!(
                "kept to build on: it lets `{}` be checked, which could not be before, and the \
                 compiler can fix what that revealed",
                revealed.join("`, `")
            )
        }
        (BranchOutcome::Partial { .. }, Detail::Plain) => {
            "kept to build on: no better yet, but the compiler can fix what it revealed".into()
        }
        (BranchOutcome::NotSelected, Detail::Verbose) => "not selected".into(),
        (BranchOutcome::Ineligible { reason, .. }, Detail::Verbose) => {
            format!("ineligible: {reason}")
        }
        (BranchOutcome::Partial { reason, .. }, Detail::Verbose) => format!("partial: {reason}"),
    }
}

/// The steps of a repair: the candidate fixes tried at each step, one line
/// each, with the energy and strategy columns under `--verbose`.
pub fn repair_steps(outcome: &RepairOutcome, detail: Detail) -> String {
    let mut out = String::new();
    for (n, step) in outcome.steps.iter().enumerate() {
        let _ = match detail {
            Detail::Plain => writeln!(
                out,
                "step {}: {} [{}]",
                n + 1,
                terminal::line(&step.cluster_title),
                step.cluster_id
            ),
            Detail::Verbose => writeln!(
                out,
                "step {}: {} [{}], energy {:.2}",
                n + 1,
                terminal::line(&step.cluster_title),
                step.cluster_id,
                step.energy_before
            ),
        };
        match detail {
            Detail::Plain => {
                let _ = writeln!(out, "  candidate fixes tried: {}", step.branches.len());
            }
            Detail::Verbose => {
                let _ = writeln!(
                    out,
                    "  {:<6} {:<8} {:<5} {:<17} {:<OUTCOME_WIDTH$} candidate",
                    "branch", "energy", "hard", "strategy", "outcome"
                );
            }
        }
        for b in &step.branches {
            // An attempt refused before it forked has no branch.
            let branch = if b.branch_id.is_empty() {
                "-"
            } else {
                &b.branch_id
            };
            let outcome = terminal::line(&branch_outcome(&b.outcome, step, detail)).into_owned();
            let label = terminal::line(&b.label);
            match detail {
                Detail::Plain => {
                    let _ = writeln!(out, "  {branch:<4} {label}");
                    let _ = writeln!(out, "       {outcome}");
                }
                Detail::Verbose => {
                    let energy = b
                        .energy
                        .map(|e| format!("{e:.2}"))
                        .unwrap_or_else(|| "-".into());
                    let hard = if b.hard_pass { "yes" } else { "no" };
                    // The outcome wraps inside its column; the candidate
                    // stays on the first line.
                    let outcome = wrap(&outcome, OUTCOME_WIDTH);
                    let _ = writeln!(
                        out,
                        "  {:<6} {:<8} {:<5} {:<17} {:<OUTCOME_WIDTH$} {label}",
                        branch, energy, hard, b.strategy, outcome[0]
                    );
                    for more in &outcome[1..] {
                        let _ = writeln!(out, "{:OUTCOME_COLUMN$}{more}", "");
                    }
                }
            }
            if let Some(oracle) = &b.oracle {
                let said = match oracle {
                    OracleVerdict::Passed { .. } => "passed".to_owned(),
                    OracleVerdict::Failed { reason, .. } => {
                        format!("failed, so this is no verified fix: {reason}")
                    }
                    OracleVerdict::NotRun { reason } => format!("not run: {reason}"),
                };
                let _ = writeln!(out, "       oracle: {said}");
            }
            let flaky: Vec<&str> = b
                .stages
                .iter()
                .flat_map(|s| &s.flaky)
                .map(String::as_str)
                .collect();
            if !flaky.is_empty() {
                let _ = writeln!(
                    out,
                    "       flaky: {} failed, then passed when re-run (not held against this fix)",
                    names(&flaky)
                );
            }
        }
    }
    out
}

/// `names` joined with commas, each escaped as a file name.
pub(super) fn names(names: &[impl AsRef<str>]) -> String {
    let escaped: Vec<_> = names.iter().map(|n| terminal::line(n.as_ref())).collect();
    escaped.join(", ")
}

/// A unified diff of `changes`, old text read from `root`, safe to print:
/// names escaped whole, each line's content escaped up to its line end
/// (a carriage return, which the diff also ends a line at, shows as `\r`).
pub fn unified_diff(root: &Path, changes: &[FileChange]) -> String {
    let mut out = String::new();
    for change in changes {
        let path = terminal::line(change.path().as_str());
        let old = std::fs::read_to_string(root.join(change.path())).unwrap_or_default();
        let new = change.new_text().unwrap_or_default();
        let diff = similar::TextDiff::from_lines(old.as_str(), new);
        for (n, hunk) in diff
            .unified_diff()
            .context_radius(3)
            .iter_hunks()
            .enumerate()
        {
            if n == 0 {
                let _ = writeln!(out, "--- a/{path}\n+++ b/{path}");
            }
            let _ = writeln!(out, "{}", hunk.header());
            for line in hunk.iter_changes() {
                let value = line.value();
                let content = value.strip_suffix('\n').unwrap_or(value);
                let _ = writeln!(out, "{}{}", line.tag(), terminal::text(content));
                if !value.ends_with(['\n', '\r']) {
                    let _ = writeln!(out, "\\ No newline at end of file");
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_every_word_within_the_width_and_in_order() {
        let text = "partial: no descent: energy 3.63 is not below 2.00 − ρ; kept as \
                    partial checkpoint 0123456789abcdef0123456789abcdef";
        let lines = wrap(text, OUTCOME_WIDTH);
        assert!(lines.len() > 2, "{lines:?}");
        assert!(
            lines.iter().all(|l| l.chars().count() <= OUTCOME_WIDTH),
            "{lines:?}"
        );
        assert_eq!(lines.concat().replace(' ', ""), text.replace(' ', ""));
        assert_eq!(wrap("chosen", OUTCOME_WIDTH), ["chosen"]);
        assert_eq!(wrap("", OUTCOME_WIDTH), [""]);
    }
}
