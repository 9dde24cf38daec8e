//! Two slots never share a workspace member's artifacts, even when they are
//! handed the same target directory. Cargo names a member's artifacts by its
//! path relative to the workspace root, the same in every copy, and judges
//! them by mtimes: in one shared target directory, a copy whose file is
//! older than the other copy's build is taken for fresh and measures the
//! other copy's code. The cargo stages keep one target directory per tree.

use std::path::Path;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;
use trellis_engine::sensor::cargo::{CargoStage, CargoToolchain};
use trellis_engine::sensor::sandbox::Policy;
use trellis_engine::sensor::{Sensor, SensorRun, StageStatus};

fn crate_at(root: &Path, value: u32) {
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"member\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        format!(
            "pub fn v() -> u32 {{ {value} }}\n#[test]\nfn v_is_one() {{ assert_eq!(v(), 1); }}\n"
        ),
    )
    .unwrap();
}

#[tokio::test]
async fn a_slot_never_measures_another_slots_build_of_a_same_named_member() {
    let dir = tempfile::tempdir().unwrap();
    let (passing, failing, shared) = (
        dir.path().join("slot-a"),
        dir.path().join("slot-b"),
        dir.path().join("targets"),
    );
    crate_at(&passing, 1);
    crate_at(&failing, 2);
    // The failing copy's sources predate the passing copy's build, as an
    // unchanged file in a synced slot does.
    let old = SystemTime::now() - Duration::from_secs(24 * 3600);
    for rel in ["Cargo.toml", "src/lib.rs"] {
        std::fs::File::options()
            .write(true)
            .open(failing.join(rel))
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    let toolchain = CargoToolchain::detect("cargo", &passing).await;
    let test = CargoStage::test(&toolchain);
    let run = |dir| SensorRun {
        dir,
        target_dir: &shared,
        deadline: Duration::from_secs(300),
        cancel: CancellationToken::new(),
        policy: Policy::USER_CODE,
    };
    let first = test.run(run(&passing)).await;
    assert_eq!(first.status, StageStatus::Passed, "{first:?}");
    let second = test.run(run(&failing)).await;
    assert_eq!(
        second.status,
        StageStatus::Failed,
        "slot-b measured slot-a's build: {second:?}"
    );
    assert_eq!(second.failures.len(), 1, "{second:?}");
}
