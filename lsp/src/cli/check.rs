//! `trellis check`: sense the workspace and print its clusters.

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;
use trellis_engine::{PromptPolicy, View};

use super::Format;
use super::render::Detail;
use super::{Spinner, cancel_on_interrupt, fail, open, print_json, render, terminal, verdict_code};

pub async fn run(
    path: Option<PathBuf>,
    format: Format,
    detail: Detail,
    prompts: PromptPolicy,
) -> u8 {
    let engine = match open(path, prompts) {
        Ok(engine) => engine,
        Err(code) => return code,
    };
    let cancel = CancellationToken::new();
    cancel_on_interrupt(&cancel);
    let spinner = Spinner::new(format == Format::Human);
    let report = engine.check(&View::default(), &spinner, cancel).await;
    spinner.finish();
    let report = match report {
        Ok(report) => report,
        Err(e) => return fail(e),
    };
    // Identified by the check: asking again runs nothing.
    let tools = match engine.tools().await {
        Ok(tools) => tools,
        Err(e) => return fail(e),
    };
    match format {
        Format::Json => {
            let doc = serde_json::json!({
                "workspace": engine.root(),
                "root": report.root,
                "hard_pass": report.hard_pass,
                "energy": report.energy,
                "stages": report.stages,
                "clusters": report.clusters,
                "diagnostics": report.diagnostics,
                "failures": report.failures,
                "sandbox": render::sandbox_json(engine.sandbox()),
                "tools": tools,
            });
            print_json(doc);
        }
        Format::Human => {
            terminal::print(&render::check_report(&report, detail, render::Then::Check));
            if detail == Detail::Verbose {
                terminal::print(&render::tools(&tools));
                terminal::print(&format!("sandbox: {}\n", engine.sandbox().describe()));
            }
        }
    }
    verdict_code(&report)
}
