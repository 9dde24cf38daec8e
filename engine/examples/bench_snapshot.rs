//! Snapshot benchmark: Trellis's snapshot root and eager copy against git and
//! `cp -a` on a generated 10,000-file tree. Run through `bench/snapshot.sh`.
//!
//! Usage: `bench_snapshot [--files N] [--runs N]`
//!
//! Every measurement is the median of `--runs` runs after one unmeasured
//! warm-up, so all contenders read a tree that is already in the page cache.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use trellis_engine::snapshot::{
    CopyLimits, DirSource, Overlay, ReRoot, Snapshot, Snapshotter, materialize,
};

struct Options {
    files: usize,
    runs: usize,
}

fn parse_options() -> Options {
    let mut options = Options {
        files: 10_000,
        runs: 5,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().and_then(|v| v.parse().ok());
        match (flag.as_str(), value) {
            ("--files", Some(n)) => options.files = n,
            ("--runs", Some(n)) if n > 0 => options.runs = n,
            _ => {
                eprintln!("usage: bench_snapshot [--files N] [--runs N]");
                std::process::exit(2);
            }
        }
    }
    options
}

/// A small deterministic generator (xorshift64*), so every run benchmarks
/// the same tree.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Source-tree-like sizes: most files a few KiB, a tail of larger ones.
fn file_size(rng: &mut Rng) -> usize {
    match rng.below(100) {
        0..=59 => 200 + rng.below(4_000) as usize,
        60..=89 => 4_000 + rng.below(16_000) as usize,
        90..=98 => 20_000 + rng.below(80_000) as usize,
        _ => 100_000 + rng.below(400_000) as usize,
    }
}

fn text(rng: &mut Rng, size: usize) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "fn", "let", "mut", "impl", "struct", "self", "return", "match", "Some", "None", "value",
        "=>", "{", "}", "(", ");", "pub", "use", "crate::", "Result<", ">", "&str", "0", "1",
    ];
    let mut out = Vec::with_capacity(size + 16);
    while out.len() < size {
        for _ in 0..rng.below(10) {
            out.extend_from_slice(WORDS[rng.below(WORDS.len() as u64) as usize].as_bytes());
            out.push(b' ');
        }
        out.push(b'\n');
    }
    out.truncate(size);
    out
}

/// Writes `files` files into nested directories (1–4 levels, ~40 files per
/// directory) under `root`, with a `.gitignore` and a few executables.
fn generate(root: &Path, files: usize) -> u64 {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    std::fs::write(root.join(".gitignore"), "*.log\n/scratch/\n").unwrap();
    let mut bytes = 0;
    for i in 0..files {
        let dir_id = i / 40;
        let depth = 1 + dir_id % 4;
        let mut dir = root.to_path_buf();
        for level in 0..depth {
            dir.push(format!(
                "m{}_{}",
                level,
                (dir_id >> (level * 2)) % 7 + dir_id % 5
            ));
        }
        std::fs::create_dir_all(&dir).unwrap();
        let size = file_size(&mut rng);
        let path = dir.join(format!("f{i}.rs"));
        std::fs::write(&path, text(&mut rng, size)).unwrap();
        if i % 97 == 0 {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        bytes += size as u64;
    }
    bytes
}

/// Median wall time of `runs` runs of `run` (after one warm-up); `setup`
/// runs untimed before each.
fn median(runs: usize, mut setup: impl FnMut(), mut run: impl FnMut()) -> Duration {
    setup();
    run();
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            setup();
            let start = Instant::now();
            run();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn run_checked(command: &mut Command) {
    let status = command
        .status()
        .unwrap_or_else(|err| panic!("{command:?}: {err}"));
    assert!(status.success(), "{command:?} failed: {status}");
}

fn git_write_tree(tree: &Path, git_dir: &Path) {
    let git = |args: &[&str]| {
        let mut command = Command::new("git");
        command
            .args(args)
            .env("GIT_DIR", git_dir)
            .env("GIT_WORK_TREE", tree)
            .current_dir(tree)
            .stdout(std::process::Stdio::null());
        run_checked(&mut command);
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["write-tree"]);
}

fn snapshot(tree: &Path, cache: PathBuf) -> Snapshot {
    Snapshotter::new(tree, Some(cache))
        .snapshot(&Overlay::default())
        .unwrap()
}

fn remove(path: &Path) {
    match std::fs::remove_dir_all(path) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => panic!("{}: {err}", path.display()),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let options = parse_options();
    let work = tempfile::tempdir().unwrap();
    let tree = work.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    let bytes = generate(&tree, options.files);
    eprintln!(
        "generated {} files, {:.1} MiB in {}",
        options.files,
        bytes as f64 / (1 << 20) as f64,
        tree.display()
    );
    // A real tree's files were not written a moment ago; let these settle
    // past the stat cache's racy window so warm runs measure the cache.
    std::thread::sleep(Duration::from_millis(2_200));

    let cold_cache = work.path().join("cold-index");
    let cold = median(
        options.runs,
        || {
            let _ = std::fs::remove_file(&cold_cache);
        },
        || {
            snapshot(&tree, cold_cache.clone());
        },
    );

    let git_dir = work.path().join("git");
    let git = median(
        options.runs,
        || remove(&git_dir),
        || git_write_tree(&tree, &git_dir),
    );

    let warm_cache = work.path().join("warm-index");
    let reference = snapshot(&tree, warm_cache.clone());
    // A fresh Snapshotter each run: the cache is loaded from disk, as in a
    // new `trellis` process.
    let warm = median(
        options.runs,
        || {},
        || assert_eq!(snapshot(&tree, warm_cache.clone()).root, reference.root),
    );

    // One long-lived watched Snapshotter, as in the language server: after
    // its first (full) scan, a re-root lists only directories with events.
    let mut server = Snapshotter::new(&tree, Some(warm_cache.clone()));
    server.watch();
    server.snapshot(&Overlay::default()).unwrap();
    let watched = median(
        options.runs,
        || {},
        || {
            let root = server.snapshot(&Overlay::default()).unwrap().root;
            assert_eq!(root, reference.root);
            assert!(
                matches!(server.last_reroot(), ReRoot::Incremental { .. }),
                "{:?}",
                server.last_reroot()
            );
        },
    );

    let dest = work.path().join("copy");
    let limits = CopyLimits {
        max_files: u64::MAX,
        max_bytes: u64::MAX,
    };
    let source = DirSource::new(&tree, Overlay::default());
    let copy = median(
        options.runs,
        || remove(&dest),
        || {
            materialize(&reference, &source, &dest, limits).unwrap();
        },
    );
    let cp = median(
        options.runs,
        || remove(&dest),
        || run_checked(Command::new("cp").arg("-a").arg(&tree).arg(&dest)),
    );

    // What the server pays per save: one file edited, its directory listed
    // again, the file re-read and the persisted cache rewritten. (Last, as
    // it changes the tree the copies above were checked against.)
    let edited = reference
        .entries
        .keys()
        .find(|path| path.ends_with(".rs"))
        .expect("the generated tree has .rs files");
    let mut edits = 0;
    let watched_edit = median(
        options.runs,
        || {
            edits += 1;
            std::fs::write(tree.join(edited), format!("// edit {edits}\n")).unwrap();
        },
        || {
            server.snapshot(&Overlay::default()).unwrap();
            assert!(
                matches!(
                    server.last_reroot(),
                    ReRoot::Incremental {
                        relisted: 1,
                        walked: 0
                    }
                ),
                "{:?}",
                server.last_reroot()
            );
        },
    );

    println!(
        "snapshot benchmark: {} files, {:.1} MiB, median of {} runs",
        options.files,
        bytes as f64 / (1 << 20) as f64,
        options.runs
    );
    println!(
        "{:<46} {:>10} {:>12} {:>8}  target",
        "measurement", "trellis ms", "baseline ms", "ratio"
    );
    // (name, ours, baseline, ratio, target and whether it is met)
    let rows = [
        (
            "cold root vs git add+write-tree",
            cold,
            git,
            ms(cold) / ms(git),
            Some(("<= 1.50", ms(cold) / ms(git) <= 1.5)),
        ),
        (
            "warm re-root, watched (server) vs cold",
            watched,
            cold,
            ms(cold) / ms(watched),
            Some((">= 10.0", ms(cold) / ms(watched) >= 10.0)),
        ),
        (
            "warm re-root, new process, stat cache vs cold",
            warm,
            cold,
            ms(cold) / ms(warm),
            None,
        ),
        (
            "watched re-root after a one-file edit vs cold",
            watched_edit,
            cold,
            ms(cold) / ms(watched_edit),
            None,
        ),
        (
            "eager copy vs cp -a",
            copy,
            cp,
            ms(copy) / ms(cp),
            Some(("<= 1.20", ms(copy) / ms(cp) <= 1.2)),
        ),
    ];
    for (name, ours, baseline, ratio, target) in rows {
        let target = match target {
            Some((target, true)) => format!("{target} met"),
            Some((target, false)) => format!("{target} MISSED"),
            None => "(information)".to_owned(),
        };
        println!(
            "{name:<46} {:>10.1} {:>12.1} {ratio:>8.2}  {target}",
            ms(ours),
            ms(baseline),
        );
    }
}
