//! Benchmark: measuring a branch against an in-place incremental `cargo check`.
//!
//! A generated crate (60 modules) is edited in one file, five times. The
//! baseline runs `cargo check` in place after each edit. Trellis re-roots the
//! workspace (warm stat cache), syncs the snapshot into a warm branch slot
//! (only the changed file is rewritten), and runs its `build` sensor there.
//! Prints the median of each and their ratio (target: within 1.5×).
//!
//! Run with `bash bench/run.sh` (or `cargo run --release -p trellis-engine
//! --example bench_branch`).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use trellis_engine::sensor::cargo::rust_sensors;
use trellis_engine::sensor::sandbox::Policy;
use trellis_engine::sensor::{SensorRun, StageStatus};
use trellis_engine::snapshot::{CopyLimits, DirSource, Overlay, Snapshotter, materialize};

const RUNS: usize = 5;

fn generate(root: &Path) {
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"bench_crate\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    let mut lib = String::new();
    for m in 0..60 {
        lib.push_str(&format!("pub mod m{m};\n"));
        let mut module = String::new();
        for f in 0..40 {
            module.push_str(&format!(
                "pub fn f{f}(values: &[u64]) -> u64 {{\n    values.iter().map(|v| v.wrapping_mul({f}) ^ {m}).fold(0, |a, b| a.wrapping_add(b))\n}}\n\n"
            ));
        }
        std::fs::write(root.join(format!("src/m{m}.rs")), module).unwrap();
    }
    std::fs::write(root.join("src/lib.rs"), lib).unwrap();
}

fn edit(root: &Path, n: usize) {
    let path = root.join("src/m7.rs");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&format!("pub fn edited_{n}() -> u64 {{ {n} }}\n"));
    std::fs::write(path, text).unwrap();
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn cargo_check(dir: &Path) {
    let status = Command::new("cargo")
        .args(["check", "--all-targets", "--message-format=json", "--quiet"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::main]
async fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let inplace = tmp.path().join("inplace");
    let user = tmp.path().join("user");
    let slot = tmp.path().join("slot");
    let slot_target = tmp.path().join("slot-target");
    generate(&inplace);
    generate(&user);

    // Baseline: in-place incremental cargo check after a one-file edit.
    cargo_check(&inplace);
    let mut baseline = Vec::new();
    for n in 0..RUNS {
        edit(&inplace, n);
        let t = Instant::now();
        cargo_check(&inplace);
        baseline.push(t.elapsed());
    }

    // Trellis: re-root, sync the branch slot, run the build sensor there.
    let sensors = rust_sensors(&user, None, true).await;
    let build = sensors
        .iter()
        .find(|s| s.stage() == "build")
        .expect("a build sensor");
    let mut snapshotter = Snapshotter::new(&user, Some(tmp.path().join("index")));
    let limits = CopyLimits {
        max_files: 100_000,
        max_bytes: 1 << 30,
    };
    let run = || SensorRun {
        dir: &slot,
        target_dir: &slot_target,
        deadline: Duration::from_secs(600),
        cancel: CancellationToken::new(),
        policy: Policy::USER_CODE,
    };
    let warm = snapshotter.snapshot(&Overlay::default()).unwrap();
    materialize(
        &warm,
        &DirSource::new(user.clone(), Overlay::default()),
        &slot,
        limits,
    )
    .unwrap();
    build.run(run()).await;
    let mut trellis = Vec::new();
    for n in 0..RUNS {
        edit(&user, n);
        let t = Instant::now();
        let snapshot = snapshotter.snapshot(&Overlay::default()).unwrap();
        materialize(
            &snapshot,
            &DirSource::new(user.clone(), Overlay::default()),
            &slot,
            limits,
        )
        .unwrap();
        let report = build.run(run()).await;
        trellis.push(t.elapsed());
        assert_eq!(report.status, StageStatus::Passed, "{:?}", report.notes);
    }

    let (b, t) = (median(baseline), median(trellis));
    println!("branch measurement vs in-place incremental cargo check ({RUNS} runs, median)");
    println!(
        "  in-place cargo check     {:>8.1} ms",
        b.as_secs_f64() * 1e3
    );
    println!(
        "  trellis branch measure   {:>8.1} ms",
        t.as_secs_f64() * 1e3
    );
    println!(
        "  ratio                    {:>8.2}x  (target <= 1.5x)",
        t.as_secs_f64() / b.as_secs_f64()
    );
}
