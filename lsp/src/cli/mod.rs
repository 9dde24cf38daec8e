//! The headless front end: `trellis check`, `repair`, `status` and `ledger`.

pub mod check;
pub mod ledger;
pub mod prompts;
pub mod render;
pub mod repair;
pub mod status;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};
use trellis_engine::api::{Engine, Progress, PromptPolicy};

/// Exit status: everything passes.
pub const EXIT_OK: u8 = 0;
/// Exit status: residuals remain.
pub const EXIT_RESIDUALS: u8 = 1;
/// Exit status: usage, configuration or infrastructure error.
pub const EXIT_ERROR: u8 = 2;

/// Prints an error the way cargo does and returns the error exit status.
pub fn fail(message: impl std::fmt::Display) -> u8 {
    eprintln!("error: {message}");
    EXIT_ERROR
}

/// The workspace a command acts on: the given path or the current directory.
pub fn workspace(path: Option<PathBuf>) -> PathBuf {
    path.unwrap_or_else(|| PathBuf::from("."))
}

pub fn open(path: &Path, prompts: PromptPolicy) -> Result<Engine, u8> {
    Engine::open_with(path, None, prompts).map_err(fail)
}

/// A spinner on stderr that shows the running stage; silent when stderr is
/// not a terminal or output is JSON.
pub struct Spinner {
    bar: Mutex<Option<ProgressBar>>,
}

impl Spinner {
    pub fn new(visible: bool) -> Spinner {
        let bar = visible.then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner:.cyan} [{elapsed_precise}] {msg}")
                    .expect("valid template"),
            );
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
            bar
        });
        Spinner {
            bar: Mutex::new(bar),
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = self.bar.lock().expect("spinner lock").take() {
            bar.finish_and_clear();
        }
    }
}

impl Progress for Spinner {
    fn report(&self, message: &str, _percent: Option<u32>) {
        if let Some(bar) = self.bar.lock().expect("spinner lock").as_ref() {
            bar.set_message(message.to_owned());
        }
    }
}
