//! A private copy of a fixture crate and the shipped binary run on it, for
//! the CLI's end-to-end tests.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name)
}

/// A private copy of a fixture plus a private branch cache.
pub struct Workspace {
    dir: tempfile::TempDir,
    cache: tempfile::TempDir,
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            if entry.file_name() != "target" {
                copy_tree(&entry.path(), &target);
            }
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Every branch of every step of a `repair` JSON document, in order.
pub fn branches(doc: &Value) -> impl Iterator<Item = &Value> {
    doc["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|step| step["branches"].as_array().into_iter().flatten())
}

/// The paths a `repair` JSON document's changes touch, in order.
pub fn changed_paths(doc: &Value) -> Vec<&str> {
    doc["changes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["path"].as_str().unwrap_or_default())
        .collect()
}

/// The report of stage `name` in a `check` or `repair` JSON document.
pub fn stage<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == name)
        .unwrap_or_else(|| panic!("no stage {name} in {doc:#}"))
}

impl Workspace {
    /// A private copy of the TypeScript fixture `name` with the shared
    /// test `node_modules` linked in, as `npm install` would leave it.
    pub fn of_node_project(name: &str) -> Workspace {
        let ws = Workspace::of(name);
        let linked = Command::new("bash")
            .arg(fixture("ts-support/link-node-modules.sh"))
            .arg(ws.path())
            .status()
            .expect("bash runs");
        assert!(linked.success(), "linking node_modules into {name} failed");
        ws
    }

    pub fn of(name: &str) -> Workspace {
        let ws = Workspace::empty();
        copy_tree(&fixture(name), ws.path());
        ws
    }

    /// A private copy of the `src/` and `tests/` of the registry package
    /// `name` `version`, which this project's own lockfile holds, so cargo
    /// has unpacked it wherever the project builds: a published crate none
    /// of us wrote, read where cargo keeps it, never vendored. The caller
    /// writes its manifest.
    pub fn of_registry_package(name: &str, version: &str) -> Workspace {
        let cargo_home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cargo"));
        let unpacked = format!("{name}-{version}");
        let package = std::fs::read_dir(cargo_home.join("registry/src"))
            .unwrap()
            .map(|index| index.unwrap().path().join(&unpacked))
            .find(|dir| dir.join("Cargo.toml").is_file())
            .unwrap_or_else(|| {
                panic!(
                    "cargo has not unpacked {unpacked} in {}",
                    cargo_home.display()
                )
            });
        let ws = Workspace::empty();
        for dir in ["src", "tests"] {
            copy_tree(&package.join(dir), &ws.path().join(dir));
        }
        ws
    }

    /// An empty workspace, for a test that writes its own crate.
    pub fn empty() -> Workspace {
        Workspace {
            dir: tempfile::tempdir().unwrap(),
            cache: tempfile::tempdir().unwrap(),
        }
    }

    /// Points the workspace at scripted model servers: `trellis.toml` with
    /// one `[[models]]` table per base URL, in failover order.
    pub fn with_models(&self, base_urls: &[&str]) {
        let toml = super::model::models_toml(base_urls, 60);
        std::fs::write(self.path().join("trellis.toml"), toml).unwrap();
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The private cache directory (branch slots, and the user configuration
    /// under `config/`).
    pub fn cache(&self) -> &Path {
        self.cache.path()
    }

    /// The binary on this workspace, with a private cache and no user
    /// configuration (`XDG_CONFIG_HOME` points into the private cache).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_trellis"));
        command
            .args(args)
            .arg(self.path())
            .env("TRELLIS_CACHE_DIR", self.cache.path())
            .env("XDG_CONFIG_HOME", self.cache.path().join("config"));
        command
    }

    pub fn trellis(&self, args: &[&str]) -> Output {
        self.command(args)
            .output()
            .expect("the trellis binary runs")
    }

    /// `trellis <args> --format json`: its exit code and its report.
    pub fn json(&self, args: &[&str]) -> (i32, Value) {
        self.json_with(args, &[] as &[(&str, &Path)])
    }

    /// [`Workspace::json`] with extra environment (a failpoint, a marker
    /// a fixture's test reads).
    pub fn json_with(&self, args: &[&str], env: &[(&str, impl AsRef<OsStr>)]) -> (i32, Value) {
        let mut all = args.to_vec();
        all.extend(["--format", "json"]);
        let mut command = self.command(&all);
        for (key, value) in env {
            command.env(key, value);
        }
        let out = command.output().expect("the trellis binary runs");
        let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code().unwrap(), doc)
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap()
    }

    /// Every file outside `.trellis/` and `target/`, with its bytes
    /// (a symlink by its target, so a planted link is seen, not followed).
    pub fn tree(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        super::files_under(self.path(), &[".trellis", "target"])
    }

    /// Writes `toml` as the user configuration
    /// (`$XDG_CONFIG_HOME/trellis/config.toml` in the private cache): unlike
    /// `trellis.toml` it is no file of the workspace, so a later run can be
    /// pointed elsewhere (another model server) on the same workspace state.
    pub fn write_user_config(&self, toml: &str) {
        let file = self.cache.path().join("config/trellis/config.toml");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, toml).unwrap();
    }

    /// The file a fixture's flaky test (`FLAKY_TEST_MARKER`) writes to
    /// remember that it failed once: outside every slot, in a directory
    /// the user configuration lets a slot's processes write (`[sandbox]
    /// writable`), as a user whose tests keep state outside their tree
    /// must configure it.
    pub fn flaky_marker(&self) -> PathBuf {
        let dir = self.cache.path().join("markers");
        std::fs::create_dir_all(&dir).unwrap();
        self.write_user_config(&format!("[sandbox]\nwritable = [\"{}\"]\n", dir.display()));
        dir.join("flaky-marker")
    }

    /// Makes `.venv` in the workspace, a virtualenv whose packages are the
    /// tests' interpreter's (pytest is there), and returns its path.
    pub fn make_venv(&self) -> PathBuf {
        let made = Command::new("python3")
            .args([
                "-m",
                "venv",
                "--system-site-packages",
                "--without-pip",
                ".venv",
            ])
            .current_dir(self.path())
            .status()
            .unwrap();
        assert!(made.success());
        self.path().join(".venv")
    }

    /// Every row of the workspace's ledger, in order.
    fn ledger_rows(&self) -> Vec<trellis_engine::ledger::Row> {
        trellis_engine::ledger::Ledger::open(&self.path().join(".trellis"))
            .unwrap()
            .rows()
            .unwrap()
    }

    /// Every refusal in the workspace's ledger, as the ledger shows it.
    pub fn ledger_refusals(&self) -> Vec<String> {
        use trellis_engine::ledger::{DecodedRow, LedgerEvent};
        self.ledger_rows()
            .into_iter()
            .filter_map(|row| match row.event {
                DecodedRow::Ledger(event @ LedgerEvent::Refused(_)) => Some(event.to_string()),
                _ => None,
            })
            .collect()
    }

    /// Every search event of the workspace's ledger, in order.
    pub fn search_events(&self) -> Vec<trellis_engine::ledger::SearchEvent> {
        self.ledger_rows()
            .into_iter()
            .filter_map(|row| match row.event {
                trellis_engine::ledger::DecodedRow::Search { event, .. } => Some(event),
                _ => None,
            })
            .collect()
    }

    /// The search events named `name` (`SearchEvent::name`), in order.
    pub fn search_events_named(&self, name: &str) -> Vec<trellis_engine::ledger::SearchEvent> {
        let mut events = self.search_events();
        events.retain(|event| event.name() == name);
        events
    }

    /// `cargo test` in the workspace itself passes.
    pub fn cargo_test_passes(&self) -> bool {
        Command::new("cargo")
            .args(["test", "--quiet"])
            .current_dir(self.path())
            .env("CARGO_TARGET_DIR", self.cache.path().join("verify-target"))
            .output()
            .unwrap()
            .status
            .success()
    }
}
