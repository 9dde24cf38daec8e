//! `trellis context explain-turn`: the resident context of one model turn
//! as the ledger recorded it (Definition 6): the allowance, what the
//! instructions and the mandatory pages cost, and which optional pages
//! were resident, evicted or stale, and why. It reads the ledger and never
//! recomputes a selection.

use std::io::Write;
use std::path::PathBuf;

use trellis_engine::context::{Outcome, PagePlan, TurnContext};

use super::Format;
use super::prompts::open_session;
use super::{EXIT_OK, fail, print_json, terminal};

/// `trellis context` subcommands.
#[derive(Debug, Clone, PartialEq, clap::Subcommand)]
pub enum ContextCommand {
    /// Explain the context of one model turn of a session: the input
    /// allowance, the cost of the instructions and mandatory pages, and
    /// which optional pages were resident, evicted or stale, and why.
    ExplainTurn {
        /// The session id (`trellis prompts explain-session` names it).
        session: String,
        /// The turn, from 1.
        turn: u32,
        /// A directory of the project (default: the current directory); its root is found above it, as cargo finds it.
        path: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
}

pub fn run(command: ContextCommand) -> u8 {
    let ContextCommand::ExplainTurn {
        session,
        turn,
        format,
        path,
    } = command;
    let root = match super::workspace(path) {
        Ok(root) => root,
        Err(code) => return code,
    };
    let found = match open_session(&root, Some(&session)) {
        Ok(found) => found,
        Err(e) => return fail(e),
    };
    let attempts: Vec<TurnContext> = match found.context_turns() {
        Ok(all) => all.into_iter().filter(|c| c.turn == turn).collect(),
        Err(e) => return fail(e),
    };
    if attempts.is_empty() {
        return fail(format!(
            "session `{session}` has no model turn {turn} in {}",
            found.ledger().display()
        ));
    }
    match format {
        Format::Json => print_json(serde_json::json!({
            "session": session,
            "turn": turn,
            "attempts": attempts,
        })),
        Format::Human => {
            // Collected, so it is escaped whole: pages quote the workspace.
            let mut out = Vec::new();
            if let Err(e) = explain(&session, turn, &attempts, &mut out) {
                return fail(e);
            }
            terminal::print(&String::from_utf8_lossy(&out));
        }
    }
    EXIT_OK
}

fn explain(
    session: &str,
    turn: u32,
    attempts: &[TurnContext],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "session {session} turn {turn}: {} attempt(s)",
        attempts.len()
    )?;
    for a in attempts {
        let (allowance, sent) = match &a.outcome {
            Outcome::Sent { plan, .. } => (&plan.allowance, true),
            Outcome::Infeasible { figures } => (&figures.allowance, false),
        };
        writeln!(
            out,
            "\nat `{}` ({}/{}, ledger row {}): {}",
            a.endpoint,
            a.forest_id,
            a.branch_id,
            a.seq,
            if sent {
                "sent"
            } else {
                "not sent: the context does not fit"
            }
        )?;
        writeln!(
            out,
            "  allowance: {} tokens = {} window − {} output − {} tools ({} schemas) − {} guard \
             ({} v{})",
            allowance.input,
            allowance.window,
            allowance.output,
            allowance.tools,
            allowance.tool_form.as_str(),
            allowance.guard,
            allowance.accountant,
            allowance.accountant_version
        )?;
        if let Some(set) = &a.working_set {
            writeln!(
                out,
                "  working set: {} candidate {} (used in the last {} turns, named by the \
                 residual cluster, or recalled) {}",
                set.pages.len(),
                if set.pages.len() == 1 {
                    "page"
                } else {
                    "pages"
                },
                set.turns,
                set.digest()
            )?;
        }
        match &a.outcome {
            Outcome::Sent { plan, plan_digest } => {
                writeln!(
                    out,
                    "  instructions {} + mandatory pages {} + resident optional pages {} + \
                     tombstones {} = {} tokens",
                    plan.instruction_tokens,
                    plan.mandatory_tokens,
                    plan.optional_tokens,
                    plan.tombstone_tokens,
                    plan.request_tokens
                )?;
                writeln!(out, "  plan {plan_digest}")?;
                for page in &plan.pages {
                    page_line(page, out)?;
                }
            }
            Outcome::Infeasible { figures } => writeln!(
                out,
                "  instructions {} + mandatory pages {} + tombstones {} tokens exceed it",
                figures.instruction_tokens, figures.mandatory_tokens, figures.tombstone_tokens
            )?,
        }
        for id in &a.recalled {
            writeln!(out, "  recalled for the next turn: page {id}")?;
        }
        for reason in &a.misses {
            writeln!(out, "  recall missed: {reason}")?;
        }
    }
    Ok(())
}

fn page_line(page: &PagePlan, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "    {} turn {:<2} {:<8} {:>6} tokens  {}: {}",
        page.short_id(),
        page.turn,
        page.residency.as_str(),
        page.cost,
        if page.keys.tools.is_empty() {
            "no tool call".to_owned()
        } else {
            page.keys.tools.join(", ")
        },
        page.reason
    )
}
