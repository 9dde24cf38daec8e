//! `trellis doctor`: what this machine gives Trellis, before any
//! workspace is opened: whether a branch's builds and tests can be
//! sandboxed, and why not.

use trellis_engine::sensor::sandbox;

use super::Format;
use super::{print_json, render, terminal};

pub fn run(format: Format) -> u8 {
    let support = sandbox::support();
    match format {
        Format::Json => print_json(serde_json::json!({
            "sandbox": render::sandbox_json(support),
        })),
        Format::Human => terminal::print(&format!("sandbox: {}\n", support.describe())),
    }
    super::EXIT_OK
}
