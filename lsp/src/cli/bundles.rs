//! `trellis bundles`: the workspace's versioned prompt-bundle store.
//!
//! Each subcommand is one engine call rendered as text or JSON; the store
//! decides everything (compile-on-write, versions, stale bases, defaults,
//! retention). Exit codes are the CLI's: 0 done, 2 refused or broken
//! (the message names the bundle and what to do).

use std::path::PathBuf;

use clap::Subcommand;
use similar::TextDiff;
use trellis_engine::bundles::{BundleRef, Draft, WriteOptions};
use trellis_engine::{Engine, PromptPolicy};

use super::Format;
use super::{EXIT_OK, fail, open, print_json, terminal};

/// What the subcommands share: the workspace and the output format.
#[derive(clap::Args)]
pub struct Common {
    /// A directory of the project (default: the current directory).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

#[derive(Subcommand)]
pub enum BundlesCommand {
    /// Compile a bundle directory and store it as the id's next version.
    ///
    /// DIR holds `bundle.toml` (`id = "ID"`, an optional `description`, and
    /// `[requires] tools = [...]`, `stages = [...]` the attaching repair must
    /// already have) and `*.md` sections in the library's format, each
    /// replacing the compiled section of the same id with the same schema.
    /// The whole bundle is validated first; on any error nothing is stored.
    /// Once the id exists, name the version you started from with --base:
    /// a write based on an older version is refused unless --force. A write
    /// never changes the default (see `trellis bundles default`).
    Write {
        /// The bundle id (a lowercase letter, then lowercase letters, digits, `-`, `_`); `bundle.toml` must declare the same.
        id: String,
        /// The bundle directory: `bundle.toml` and `*.md` sections.
        dir: PathBuf,
        /// The version this content was based on (required once ID exists).
        #[arg(long, value_name = "N")]
        base: Option<u32>,
        /// Write even though --base is not the latest version.
        #[arg(long)]
        force: bool,
        /// Why (shown by `show` and `history`).
        #[arg(long, default_value = "")]
        reason: String,
        /// Retain this version past the window of the latest versions.
        #[arg(long)]
        keep: bool,
        #[command(flatten)]
        common: Common,
    },
    /// List every bundle id: its default, latest and retained versions.
    List {
        #[command(flatten)]
        common: Common,
    },
    /// Show one version: `ID` (its default), `ID@N` or `ID@sha256:HEX`.
    Show {
        /// `ID`, `ID@N` or `ID@sha256:HEX`.
        reference: String,
        #[command(flatten)]
        common: Common,
    },
    /// Compare two versions, or a version with a bundle directory.
    ///
    /// `trellis bundles diff terse@2 terse@3`, or `trellis bundles diff
    /// terse ./my-bundle` before writing it.
    Diff {
        /// A ref: `ID`, `ID@N` or `ID@sha256:HEX`.
        from: String,
        /// A ref, or a bundle directory (anything containing `/`, or an existing directory).
        to: String,
        #[command(flatten)]
        common: Common,
    },
    /// Make version N the default of ID (what a bare `ID` resolves to).
    ///
    /// The change is recorded; `trellis bundles history ID` shows every one.
    /// Running repairs keep the version they started with.
    Default {
        id: String,
        /// A retained version (see `trellis bundles show ID@N`).
        version: u32,
        /// Why (shown by `history`).
        #[arg(long, default_value = "")]
        reason: String,
        #[command(flatten)]
        common: Common,
    },
    /// Show every change of ID's default, oldest first.
    History {
        id: String,
        #[command(flatten)]
        common: Common,
    },
    /// Remove versions outside the retention window.
    ///
    /// Retained: the latest 8 versions of each id, versions written with
    /// --keep, the default, and every version a repair in the ledger
    /// attached (replay reads it back). Writes prune their id the same way.
    Prune {
        /// Only this id.
        id: Option<String>,
        /// Report what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        common: Common,
    },
}

impl BundlesCommand {
    fn common(&self) -> &Common {
        match self {
            BundlesCommand::Write { common, .. }
            | BundlesCommand::List { common }
            | BundlesCommand::Show { common, .. }
            | BundlesCommand::Diff { common, .. }
            | BundlesCommand::Default { common, .. }
            | BundlesCommand::History { common, .. }
            | BundlesCommand::Prune { common, .. } => common,
        }
    }
}

pub fn run(command: BundlesCommand, prompts: PromptPolicy) -> u8 {
    let common = command.common();
    let format = common.format;
    let engine = match open(common.workspace.clone(), prompts) {
        Ok(engine) => engine,
        Err(code) => return code,
    };
    match execute(&engine, command) {
        Ok(out) => {
            match format {
                Format::Json => print_json(out.json),
                Format::Human => terminal::print(&out.human),
            }
            EXIT_OK
        }
        Err(message) => fail(message),
    }
}

/// One command's output in both forms.
struct Output {
    human: String,
    json: serde_json::Value,
}

fn to_json(value: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(value).expect("serializable")
}

fn execute(engine: &Engine, command: BundlesCommand) -> Result<Output, String> {
    let store = engine.bundle_store();
    let err = |e: &dyn std::fmt::Display| e.to_string();
    Ok(match command {
        BundlesCommand::Write {
            id,
            dir,
            base,
            force,
            reason,
            keep,
            ..
        } => {
            let draft = Draft::read_dir(&dir).map_err(|e| err(&e))?;
            let origin = dir.canonicalize().unwrap_or(dir);
            let options = WriteOptions {
                base,
                force,
                reason,
                keep,
                origin: format!("file:{}", origin.display()),
            };
            let written = engine
                .write_bundle(&id, &draft, &options)
                .map_err(|e| err(&e))?;
            Output {
                human: format!(
                    "wrote {}@{} ({}), replacing {}; the default is v{}\n",
                    written.id,
                    written.version,
                    written.checksum,
                    written.sections.join(", "),
                    written.default_version
                ),
                json: to_json(&written),
            }
        }
        BundlesCommand::List { .. } => {
            let rows = store.list().map_err(|e| err(&e))?;
            let mut human = String::new();
            if rows.is_empty() {
                human.push_str("no bundles (write one with `trellis bundles write ID DIR`)\n");
            }
            for r in &rows {
                human.push_str(&format!(
                    "{}  default v{}, latest v{}, {} retained  {}  {}\n",
                    r.id,
                    r.default_version,
                    r.latest_version,
                    r.versions_count,
                    r.sections.join(", "),
                    r.description
                ));
            }
            Output {
                human,
                json: serde_json::json!({ "bundles": rows }),
            }
        }
        BundlesCommand::Show { reference, .. } => {
            let r: BundleRef = reference.parse().map_err(|e| err(&e))?;
            let (row, draft) = store.resolve(&r).map_err(|e| err(&e))?;
            let mut human = format!(
                "{}@{}{}  {}\nwritten: {}\norigin: {}\nbased on: {}\nreason: {}\n",
                row.id,
                row.version,
                if row.is_default { " (default)" } else { "" },
                row.checksum,
                utc(row.created_at),
                terminal::line(&row.origin),
                row.parent.map_or("nothing".to_owned(), |p| format!("v{p}")),
                row.reason
            );
            let requires = &draft.manifest.requires;
            if !requires.tools.is_empty() || !requires.stages.is_empty() {
                human.push_str(&format!(
                    "requires: tools [{}], stages [{}]\n",
                    requires.tools.join(", "),
                    requires.stages.join(", ")
                ));
            }
            let sections: Vec<_> = draft
                .sections()
                .map(|(file, text)| {
                    human.push_str(&format!("\n== {}\n{text}", terminal::line(file)));
                    serde_json::json!({ "file": file, "text": text })
                })
                .collect();
            Output {
                human,
                json: serde_json::json!({
                    "version": row,
                    "manifest": draft.manifest,
                    "sections": sections,
                }),
            }
        }
        BundlesCommand::Diff { from, to, .. } => {
            let (from_name, a) = named_draft(engine, &from)?;
            let path = PathBuf::from(&to);
            let (to_name, b) = if to.contains('/') || path.is_dir() {
                let draft = Draft::read_dir(&path).map_err(|e| err(&e))?;
                (to.clone(), draft)
            } else {
                named_draft(engine, &to)?
            };
            let (ta, tb) = (render(&a), render(&b));
            let diff = TextDiff::from_lines(&ta, &tb)
                .unified_diff()
                .header(&from_name, &to_name)
                .to_string();
            Output {
                human: if diff.is_empty() {
                    format!("{from_name} and {to_name} have the same content\n")
                } else {
                    diff.clone()
                },
                json: serde_json::json!({
                    "from": from_name,
                    "to": to_name,
                    "same": diff.is_empty(),
                    "diff": diff,
                }),
            }
        }
        BundlesCommand::Default {
            id,
            version,
            reason,
            ..
        } => {
            let change = store
                .set_default(&id, version, &reason)
                .map_err(|e| err(&e))?;
            Output {
                human: format!(
                    "the default of {} is now v{}{}\n",
                    change.id,
                    change.version,
                    change
                        .previous
                        .map_or(String::new(), |p| format!(" (was v{p})"))
                ),
                json: to_json(&change),
            }
        }
        BundlesCommand::History { id, .. } => {
            let changes = store.history(&id).map_err(|e| err(&e))?;
            let human = changes
                .iter()
                .map(|c| {
                    format!(
                        "{}  v{}{}  {}\n",
                        utc(c.at),
                        c.version,
                        c.previous.map_or(String::new(), |p| format!(" (was v{p})")),
                        c.reason
                    )
                })
                .collect();
            Output {
                human,
                json: serde_json::json!({ "id": id, "defaults": changes }),
            }
        }
        BundlesCommand::Prune { id, dry_run, .. } => {
            let report = engine
                .prune_bundles(id.as_deref(), dry_run)
                .map_err(|e| err(&e))?;
            let verb = if dry_run { "would remove" } else { "removed" };
            let mut human = format!(
                "{verb} {} version(s){}{}\n",
                report.removed.len(),
                if report.removed.is_empty() { "" } else { ": " },
                report.removed.join(", ")
            );
            if report.kept_for_sessions > 0 {
                human.push_str(&format!(
                    "kept {} version(s) only because a ledgered repair attached them\n",
                    report.kept_for_sessions
                ));
            }
            Output {
                human,
                json: to_json(&report),
            }
        }
    })
}

fn named_draft(engine: &Engine, reference: &str) -> Result<(String, Draft), String> {
    let r: BundleRef = reference
        .parse()
        .map_err(|e: trellis_engine::bundles::BundleError| e.to_string())?;
    let (row, draft) = engine
        .bundle_store()
        .resolve(&r)
        .map_err(|e| e.to_string())?;
    Ok((format!("{}@{}", row.id, row.version), draft))
}

/// A bundle as one text for diffing: the manifest's fields, then each file.
fn render(draft: &Draft) -> String {
    let m = &draft.manifest;
    let mut out = format!(
        "== bundle.toml\nid = {:?}\ndescription = {:?}\nrequires.tools = {:?}\nrequires.stages = {:?}\n",
        m.id, m.description, m.requires.tools, m.requires.stages
    );
    for (file, text) in draft.sections() {
        out.push_str(&format!("== {}\n{text}", terminal::line(file)));
        if !text.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SS UTC` (days to a civil
/// date by the proleptic Gregorian calendar; the JSON keeps the seconds).
fn utc(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn epoch_seconds_render_as_utc_dates() {
        assert_eq!(super::utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(super::utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(super::utc(1_796_128_119), "2026-12-01 12:28:39 UTC");
    }
}
