//! Promotion is fail-closed: only a hard pass, only onto the root the repair
//! started from. Real cargo on copies of the fixture crates.

use std::path::Path;

use tokio_util::sync::CancellationToken;
use trellis_engine::ledger::{DecodedRow, Ledger, LedgerEvent, RefusalReason};
use trellis_engine::{
    Engine, EngineError, NoProgress, RepairOptions, RepairStatus, View, WorkspacePath,
};

fn fixture_copy(name: &str) -> tempfile::TempDir {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name);
    let dir = tempfile::tempdir().unwrap();
    for rel in ["Cargo.toml", "src/lib.rs"] {
        let target = dir.path().join(rel);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(from.join(rel), target).unwrap();
    }
    dir
}

/// A repair with the default options, from the files on disk.
async fn repair_from_disk(engine: &Engine) -> trellis_engine::RepairOutcome {
    engine
        .repair(
            &View::default(),
            &RepairOptions::default(),
            &NoProgress,
            CancellationToken::new(),
        )
        .await
        .unwrap()
}

/// The refusals in the workspace's ledger, read as a second reader would.
fn refusals(engine: &Engine) -> Vec<RefusalReason> {
    Ledger::open(&engine.root().join(".trellis"))
        .unwrap()
        .rows()
        .unwrap()
        .into_iter()
        .filter_map(|row| match row.event {
            DecodedRow::Ledger(LedgerEvent::Refused(r)) => Some(r.reason),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_root_is_refused_ledgered_and_leaves_the_users_edit() {
    let ws = fixture_copy("missing-mut");
    let engine = Engine::open(ws.path(), None).unwrap();
    let outcome = repair_from_disk(&engine).await;
    assert_eq!(outcome.status, RepairStatus::HardPass);

    let lib = ws.path().join("src/lib.rs");
    let users_edit = std::fs::read_to_string(&lib)
        .unwrap()
        .replace("Sums the values.", "Sums them.");
    std::fs::write(&lib, &users_edit).unwrap();

    let err = engine.promote_to_disk(&outcome).unwrap_err();
    assert!(matches!(err, EngineError::StaleRoot { .. }), "{err}");
    assert_eq!(
        std::fs::read_to_string(&lib).unwrap(),
        users_edit,
        "the user's edit must survive"
    );
    assert!(
        refusals(&engine)
            .iter()
            .any(|r| matches!(r, RefusalReason::StaleRoot { .. }))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn only_a_hard_pass_is_promotable() {
    let ws = fixture_copy("trap");
    let before = std::fs::read(ws.path().join("src/lib.rs")).unwrap();
    let engine = Engine::open(ws.path(), None).unwrap();
    let outcome = repair_from_disk(&engine).await;
    assert_ne!(outcome.status, RepairStatus::HardPass);
    assert!(matches!(
        engine.promote_to_disk(&outcome),
        Err(EngineError::NotPromotable(_))
    ));
    assert_eq!(std::fs::read(ws.path().join("src/lib.rs")).unwrap(), before);
    assert!(
        refusals(&engine)
            .iter()
            .any(|r| matches!(r, RefusalReason::NotHardPass))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn unsaved_buffers_are_part_of_the_view() {
    let ws = fixture_copy("missing-mut");
    let engine = Engine::open(ws.path(), None).unwrap();
    let on_disk = std::fs::read_to_string(ws.path().join("src/lib.rs")).unwrap();
    let fixed_in_buffer = on_disk.replace("let sum = 0;", "let mut sum = 0;");
    let view = View {
        overlay: [(WorkspacePath::new("src/lib.rs").unwrap(), fixed_in_buffer)].into(),
    };
    let report = engine
        .check(&view, &NoProgress, CancellationToken::new())
        .await
        .unwrap();
    assert!(
        report.hard_pass,
        "the buffer's fix must be what is measured: {:?}",
        report.clusters
    );
    let disk = engine
        .check(&View::default(), &NoProgress, CancellationToken::new())
        .await
        .unwrap();
    assert!(!disk.hard_pass);
    assert_ne!(report.root, disk.root);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_engine_decides_an_editor_apply_and_ledgers_a_stale_view_once() {
    let ws = fixture_copy("missing-mut");
    let engine = Engine::open(ws.path(), None).unwrap();
    let outcome = repair_from_disk(&engine).await;
    assert_eq!(outcome.status, RepairStatus::HardPass);
    let stale = |engine: &Engine| {
        refusals(engine)
            .iter()
            .filter(|r| matches!(r, RefusalReason::StaleRoot { .. }))
            .count()
    };

    engine
        .decide_apply(&outcome, &View::default())
        .expect("the view is still at the repair's start root");
    assert_eq!(stale(&engine), 0, "an accepted apply ledgers no refusal");

    // An unsaved edit in the editor moves the view off the start root.
    let on_disk = std::fs::read_to_string(ws.path().join("src/lib.rs")).unwrap();
    let edited = View {
        overlay: [(
            WorkspacePath::new("src/lib.rs").unwrap(),
            on_disk.replace("Sums", "Adds"),
        )]
        .into(),
    };
    let err = engine.decide_apply(&outcome, &edited).unwrap_err();
    assert!(
        matches!(err, EngineError::StaleRoot { expected, .. } if expected == outcome.start_root),
        "{err}"
    );
    assert_eq!(
        stale(&engine),
        1,
        "the refusal is ledgered once, by the engine"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("src/lib.rs")).unwrap(),
        on_disk,
        "deciding writes nothing"
    );
}
