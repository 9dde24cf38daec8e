//! `trellis lsp` publishes what each stage found as soon as it finishes:
//! the build's diagnostics while the tests still run, then everything once
//! they have. Driven through the shipped binary with real cargo on a crate
//! whose only test waits for a file that this test writes only after it has
//! seen the build's diagnostics, so the order is observed, not timed.

use crate::support;

use std::path::Path;

use serde_json::Value;
use support::{CARGO_TOML, Client, SENSING_TIMEOUT, vscode_capabilities, write_crate};

/// A warning for the build stage (`unused`), and a test that blocks until
/// `marker` exists, then fails on purpose, so the test stage's own finding
/// shows when that stage's publication arrives.
fn waiting_crate(root: &Path, marker: &Path) {
    let lib = format!(
        r#"pub fn unused_binding() {{
    let unused = 1;
}}

#[cfg(test)]
mod tests {{
    #[test]
    fn waits_for_the_marker() {{
        let marker = std::path::Path::new({marker:?});
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(900);
        while !marker.exists() {{
            assert!(std::time::Instant::now() < deadline, "no marker");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }}
        assert_eq!(std::fs::read_to_string(marker).unwrap(), "seen by the test stage");
    }}
}}
"#
    );
    write_crate(root, &[("Cargo.toml", CARGO_TOML), ("src/lib.rs", &lib)]);
}

fn messages(diagnostics: &[Value]) -> Vec<String> {
    diagnostics
        .iter()
        .map(|d| d["message"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn the_build_stages_diagnostics_are_published_before_the_test_stage_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let (root, marker) = (dir.path().join("app"), dir.path().join("marker"));
    waiting_crate(&root, &marker);
    let (mut client, init) = Client::start(&root, vscode_capabilities(), None);
    assert!(init.get("result").is_some(), "{init}");
    client.open("src/lib.rs");

    // The test stage cannot finish before the marker exists: whatever is
    // published now came from the build stage alone.
    let built = client.wait_for_diagnostics(0, "src/lib.rs", true);
    assert!(!marker.exists());
    let built_messages = messages(&built);
    assert!(
        built_messages.iter().any(|m| m.contains("unused")),
        "{built_messages:?}"
    );
    assert!(
        !built_messages.iter().any(|m| m.contains("failed")),
        "a test result before the tests ran: {built_messages:?}"
    );

    let from = client.notifications.len();
    std::fs::write(&marker, "written after the build's diagnostics").unwrap();
    let uri = client.uri("src/lib.rs");
    let tested = client.wait_for(from, SENSING_TIMEOUT, "the test stage's diagnostics", |n| {
        n["method"] == "textDocument/publishDiagnostics"
            && n["params"]["uri"] == uri.as_str()
            && messages(n["params"]["diagnostics"].as_array().unwrap())
                .iter()
                .any(|m| m.contains("waits_for_the_marker"))
    });
    let tested_messages = messages(tested["params"]["diagnostics"].as_array().unwrap());
    assert!(
        tested_messages.iter().any(|m| m.contains("unused")),
        "the build's diagnostics are kept: {tested_messages:?}"
    );
    client.shutdown();
}
