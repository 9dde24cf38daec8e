//! The headless front end: `trellis check`, `repair`, `status`, `ledger`,
//! `context` and `gc`.

pub mod bundles;
pub mod check;
pub mod context;
pub mod doctor;
pub mod gc;
pub mod ledger;
pub mod prompts;
pub mod render;
pub mod repair;
pub mod status;
pub mod terminal;
pub mod why;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};
use tokio_util::sync::CancellationToken;
use trellis_engine::ledger::LedgerEvent;
use trellis_engine::sensor::StageStatus;
use trellis_engine::{CheckReport, Engine, Progress, PromptPolicy};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Readable text.
    Human,
    /// One JSON document on stdout (progress, if any, stays on stderr).
    Json,
}

/// Exit status: everything passes.
pub const EXIT_OK: u8 = 0;
/// Exit status: residuals remain.
pub const EXIT_RESIDUALS: u8 = 1;
/// Exit status: usage, configuration or infrastructure error.
pub const EXIT_ERROR: u8 = 2;
/// Exit status: something outside every branch changed while a repair ran
/// its branches' code (what could be was put back; nothing was written).
pub const EXIT_OUTSIDE_CHANGED: u8 = 3;

/// The exit status of a sensed state: 0 hard pass, 2 when a required stage
/// could not run (missing tool, timeout: infrastructure), else 1.
pub fn verdict_code(report: &CheckReport) -> u8 {
    let unavailable = report
        .stages
        .iter()
        .any(|s| s.required && matches!(s.status, StageStatus::Unavailable { .. }));
    if report.hard_pass {
        EXIT_OK
    } else if unavailable {
        EXIT_ERROR
    } else {
        EXIT_RESIDUALS
    }
}

/// Cancels `token` on Ctrl-C, so the sensors' process groups are killed.
pub fn cancel_on_interrupt(token: &CancellationToken) {
    let token = token.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            token.cancel();
        }
    });
}

/// Decimal places of every real number in a `--format json` report
/// (`check`, `repair`, `status`): energies are sums of weighted squares, and
/// their last binary digits are noise (`3.630000000000001`). The ledger
/// keeps the exact values; `trellis ledger replay --format json` prints
/// those, for a consumer that compares bit for bit.
pub const JSON_DECIMALS: i32 = 6;

/// Rounds every real number in `value` to [`JSON_DECIMALS`] places.
fn round_reals(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Number(n) if n.is_f64() => {
            let scale = 10f64.powi(JSON_DECIMALS);
            let rounded = (n.as_f64().expect("an f64") * scale).round() / scale;
            if let Some(r) = serde_json::Number::from_f64(rounded) {
                *n = r;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(round_reals),
        serde_json::Value::Object(fields) => fields.values_mut().for_each(round_reals),
        _ => {}
    }
}

/// Prints a report as one JSON document on stdout, its reals rounded.
pub fn print_json(mut doc: serde_json::Value) {
    round_reals(&mut doc);
    println!(
        "{}",
        serde_json::to_string_pretty(&doc).expect("serializable")
    );
}

/// Prints an error the way cargo does and returns the error exit status.
pub fn fail(message: impl std::fmt::Display) -> u8 {
    terminal::eprintln_escaped!("error: {message}");
    EXIT_ERROR
}

/// The workspace a command acts on: the project the given path (or the
/// current directory) is in, found the way cargo finds it. Errors are
/// printed here; the caller exits with the returned status.
pub fn workspace(path: Option<PathBuf>) -> Result<PathBuf, u8> {
    let start = path.unwrap_or_else(|| PathBuf::from("."));
    trellis_engine::workspace::discover(&start).map_err(fail)
}

/// Opens the engine of the workspace [`workspace`] finds from `path`; a
/// promotion a crash interrupted, which opening finished or undid, is
/// reported on stderr (it is also ledgered).
pub fn open(path: Option<PathBuf>, prompts: PromptPolicy) -> Result<Engine, u8> {
    let engine = Engine::open_with(&workspace(path)?, None, prompts).map_err(fail)?;
    if let Some(recovered) = engine.recovered() {
        terminal::eprintln_escaped!(
            "warning: {}",
            LedgerEvent::PromotionRecovered(recovered.clone())
        );
    }
    Ok(engine)
}

/// Progress on stderr: a spinner showing the running stage on a terminal
/// (human output only), plain lines elsewhere, so a CI log shows what a
/// long repair is doing. JSON on stdout is never mixed with it.
pub struct Spinner {
    sink: Mutex<Sink>,
}

enum Sink {
    Bar(ProgressBar),
    /// Not a terminal: one line per new message.
    Lines {
        last: String,
    },
    Silent,
}

impl Spinner {
    pub fn new(human: bool) -> Spinner {
        let sink = if !std::io::stderr().is_terminal() {
            Sink::Lines {
                last: String::new(),
            }
        } else if human {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner:.cyan} [{elapsed_precise}] {msg}")
                    .expect("valid template"),
            );
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
            Sink::Bar(bar)
        } else {
            Sink::Silent
        };
        Spinner {
            sink: Mutex::new(sink),
        }
    }

    pub fn finish(&self) {
        let mut sink = self.sink.lock().expect("spinner lock");
        if let Sink::Bar(bar) = &*sink {
            bar.finish_and_clear();
        }
        *sink = Sink::Silent;
    }
}

impl Progress for Spinner {
    fn report(&self, message: &str, _percent: Option<u32>) {
        // A message names files and quotes the compiler, so it is escaped.
        match &mut *self.sink.lock().expect("spinner lock") {
            Sink::Bar(bar) => bar.set_message(terminal::line(message).into_owned()),
            Sink::Lines { last } if last != message => {
                terminal::eprintln_escaped!("trellis: {}", terminal::line(message));
                message.clone_into(last);
            }
            Sink::Lines { .. } | Sink::Silent => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reals_are_rounded_and_integers_untouched() {
        let mut doc = serde_json::json!({
            "energy": 3.630000000000001,
            "steps": [{ "energy_before": 1.0000004999 }, { "n": 7 }],
            "seq": u64::MAX,
        });
        round_reals(&mut doc);
        assert_eq!(doc["energy"].to_string(), "3.63");
        assert_eq!(doc["steps"][0]["energy_before"].to_string(), "1.0");
        assert_eq!(doc["steps"][1]["n"], 7);
        assert_eq!(doc["seq"], u64::MAX);
    }
}
