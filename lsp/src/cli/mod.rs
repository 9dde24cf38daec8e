//! The headless front end: `trellis check`, `repair`, `status`, `ledger`
//! and `gc`.

pub mod check;
pub mod gc;
pub mod ledger;
pub mod prompts;
pub mod render;
pub mod repair;
pub mod status;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};
use tokio_util::sync::CancellationToken;
use trellis_engine::api::{CheckReport, Engine, Progress, PromptPolicy};
use trellis_engine::ledger::LedgerEvent;
use trellis_engine::sensor::StageStatus;

/// Exit status: everything passes.
pub const EXIT_OK: u8 = 0;
/// Exit status: residuals remain.
pub const EXIT_RESIDUALS: u8 = 1;
/// Exit status: usage, configuration or infrastructure error.
pub const EXIT_ERROR: u8 = 2;

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

/// Prints an error the way cargo does and returns the error exit status.
pub fn fail(message: impl std::fmt::Display) -> u8 {
    eprintln!("error: {message}");
    EXIT_ERROR
}

/// The workspace a command acts on: the project the given path (or the
/// current directory) is in, found the way cargo finds it. Errors are
/// printed here; the caller exits with the returned status.
pub fn workspace(path: Option<PathBuf>) -> Result<PathBuf, u8> {
    let start = path.unwrap_or_else(|| PathBuf::from("."));
    trellis_engine::workspace::discover(&start).map_err(fail)
}

/// Opens the engine; a promotion a crash interrupted, which opening
/// finished or undid, is reported on stderr (it is also ledgered).
pub fn open(path: &Path, prompts: PromptPolicy) -> Result<Engine, u8> {
    let engine = Engine::open_with(path, None, prompts).map_err(fail)?;
    if let Some(recovered) = engine.recovered() {
        eprintln!(
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
        match &mut *self.sink.lock().expect("spinner lock") {
            Sink::Bar(bar) => bar.set_message(message.to_owned()),
            Sink::Lines { last } if last != message => {
                eprintln!("trellis: {message}");
                message.clone_into(last);
            }
            Sink::Lines { .. } | Sink::Silent => {}
        }
    }
}
