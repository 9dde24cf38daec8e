//! With sccache as the rustc wrapper, configured (`[build] rustc_wrapper`)
//! or inherited (`RUSTC_WRAPPER`), every slot build of a repair goes through
//! it: its server counts the compile requests, and a second cold repair of
//! the same state is served from its cache. Each test runs the shipped
//! binary and real cargo with its own sccache server (a private port) and
//! cache directory. Where sccache is not installed (see
//! `scripts/install-test-deps.sh`) the tests say so and pass, except in CI,
//! where they fail.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// A private sccache server, stopped when dropped.
struct Sccache {
    port: u16,
    dir: PathBuf,
}

impl Sccache {
    /// Starts one, or `None` (with the reason shown) where sccache is not
    /// installed outside CI.
    fn start(dir: &Path) -> Option<Sccache> {
        if Command::new("sccache").arg("--version").output().is_err() {
            assert!(
                std::env::var_os("CI").is_none(),
                "sccache is not installed: run scripts/install-test-deps.sh"
            );
            eprintln!("skipped: sccache is not on PATH (scripts/install-test-deps.sh installs it)");
            return None;
        }
        // A port nobody listens on now: the server binds it next.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = Sccache {
            port,
            dir: dir.to_path_buf(),
        };
        let started = server.command().arg("--start-server").output().unwrap();
        assert!(started.status.success(), "{}", shown(&started));
        Some(server)
    }

    /// `sccache` talking to this server, which keeps its cache in `dir`.
    fn command(&self) -> Command {
        let mut cmd = Command::new("sccache");
        self.env(&mut cmd);
        cmd
    }

    fn env(&self, cmd: &mut Command) {
        cmd.env("SCCACHE_DIR", &self.dir)
            .env("SCCACHE_SERVER_PORT", self.port.to_string())
            .env("SCCACHE_IDLE_TIMEOUT", "0")
            .env_remove("SCCACHE_LOG");
    }

    /// The server's counters (`--show-stats --stats-format json`).
    fn stats(&self) -> Value {
        let out = self
            .command()
            .args(["--show-stats", "--stats-format", "json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", shown(&out));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["stats"].clone()
    }

    fn compile_requests(&self) -> u64 {
        self.stats()["compile_requests"].as_u64().unwrap()
    }

    /// Cache hits over every language (`cache_hits.counts`).
    fn cache_hits(&self) -> u64 {
        let stats = self.stats();
        stats["cache_hits"]["counts"]
            .as_object()
            .map_or(0, |counts| counts.values().filter_map(Value::as_u64).sum())
    }
}

impl Drop for Sccache {
    fn drop(&mut self) {
        let _ = self.command().arg("--stop-server").output();
    }
}

fn shown(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A crate missing `use std::collections::HashMap;`, which the compiler's
/// suggestion repairs, with a test that passes once it does.
fn broken_crate(root: &Path) {
    write(
        &root.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(
        &root.join("src/lib.rs"),
        "pub fn totals() -> HashMap<&'static str, usize> {\n    \
         let mut m = HashMap::new();\n    m.insert(\"one\", 1);\n    m\n}\n\n\
         #[test]\nfn has_one() {\n    assert_eq!(totals()[\"one\"], 1);\n}\n",
    );
}

/// `trellis repair` on `root` with the private cache `cache`, sccache's
/// server reachable, and `wrapper` as `RUSTC_WRAPPER` (or none).
fn repair(root: &Path, cache: &Path, sccache: &Sccache, wrapper: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_trellis"));
    cmd.arg("repair")
        .arg(root)
        .env("TRELLIS_CACHE_DIR", cache)
        .env("XDG_CONFIG_HOME", cache.join("config"))
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTC_WRAPPER");
    if let Some(wrapper) = wrapper {
        cmd.env("RUSTC_WRAPPER", wrapper);
    }
    sccache.env(&mut cmd);
    cmd.output().expect("the trellis binary runs")
}

#[test]
fn a_configured_sccache_builds_every_slot_and_serves_a_second_cold_repair_from_its_cache() {
    let dir = tempfile::tempdir().unwrap();
    let Some(sccache) = Sccache::start(&dir.path().join("sccache")) else {
        return;
    };
    let (root, cache) = (dir.path().join("app"), dir.path().join("cache"));
    broken_crate(&root);
    write(
        &root.join("trellis.toml"),
        "[build]\nrustc_wrapper = \"sccache\"\n",
    );

    let first = repair(&root, &cache, &sccache, None);
    assert_eq!(first.status.code(), Some(0), "{}", shown(&first));
    let requests = sccache.compile_requests();
    assert!(requests > 0, "no slot build reached sccache");
    let hits = sccache.cache_hits();

    // The same repair from nothing: no slot, no target directory, no
    // ledger. Its successful compilations are the first one's.
    std::fs::remove_dir_all(&cache).unwrap();
    std::fs::remove_dir_all(root.join(".trellis")).unwrap();
    let second = repair(&root, &cache, &sccache, None);
    assert_eq!(second.status.code(), Some(0), "{}", shown(&second));
    assert!(sccache.compile_requests() > requests);
    assert!(
        sccache.cache_hits() > hits,
        "the second cold repair compiled everything again: {}",
        sccache.stats()
    );
}

#[test]
fn sccache_as_rustc_wrapper_in_the_environment_builds_every_slot() {
    let dir = tempfile::tempdir().unwrap();
    let Some(sccache) = Sccache::start(&dir.path().join("sccache")) else {
        return;
    };
    let (root, cache) = (dir.path().join("app"), dir.path().join("cache"));
    broken_crate(&root);

    let out = repair(&root, &cache, &sccache, Some("sccache"));
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    // The view's check and test, and the branch's: four cargo runs, each
    // compiling the crate at least once.
    assert!(sccache.compile_requests() >= 4, "{}", sccache.stats());
}
