//! Nothing a slot runs touches what is not the slot's (issue 34, items
//! 1–6): the shipped binary measures crates, Python and TypeScript
//! projects whose builds and tests try to write outside their slot (into
//! the user's files, their parent directory, their `target/`, virtualenv
//! and `node_modules`) and, for code a scripted model wrote, to reach the
//! network. Every attempt is a real file operation or connection, injected
//! as the code under measurement; every test checks what the user has
//! afterwards. Without the kernel's sandbox (`sandbox-probe` failpoint),
//! model-written code is refused unless `[sandbox] require = false`, and
//! slots copy what they would have linked.

use crate::support;
use crate::wrong_operator;
use trellis_test_support::openai_server;

use std::io::Read as _;
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use openai_server::{Answer, OpenAiServer};
use serde_json::json;
use support::model::models_toml;
use support::workspace::Workspace;
use wrong_operator::{finish, fix};

/// Whether this kernel sandboxes a slot as the binary's own probe finds
/// it; in CI it must, elsewhere a test says why it checks nothing.
fn sandboxed() -> bool {
    let support = trellis_engine::sensor::sandbox::support();
    let full = support.confines_files() && support.confines_network();
    // The suite's run on a kernel without a sandbox, simulated.
    let simulated =
        std::env::var("TRELLIS_FAILPOINT").is_ok_and(|f| f.starts_with("sandbox-probe"));
    assert!(
        full || simulated || std::env::var_os("CI").is_none(),
        "CI runs on a kernel that sandboxes: {}",
        support.describe()
    );
    if !full {
        eprintln!("skipped: {}", support.describe());
    }
    full
}

/// Every file below `dir` (relative to it) with its bytes, symlinks by
/// their target.
fn tree(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    support::files_under(dir, &[])
}

/// The inode of every regular file below `dir`, by its full path.
fn inodes(dir: &Path) -> Vec<(PathBuf, u64)> {
    tree(dir)
        .into_keys()
        .map(|rel| dir.join(rel))
        .filter_map(|path| {
            let meta = std::fs::symlink_metadata(&path).ok()?;
            meta.is_file().then(|| (path, meta.ino()))
        })
        .collect()
}

/// A listener on the machine's loopback that counts who connected.
struct Listener(TcpListener);

impl Listener {
    fn new() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        Self(listener)
    }

    fn port(&self) -> u16 {
        self.0.local_addr().unwrap().port()
    }

    /// How many connections arrived so far.
    fn connections(&self) -> usize {
        let mut seen = 0;
        while let Ok((mut stream, _)) = self.0.accept() {
            let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
            let _ = stream.read(&mut [0; 16]);
            seen += 1;
        }
        seen
    }
}

/// A scripted model on `ws` that makes the `first` calls, writes each
/// `(path, content)` of `files` into its branch, runs the tests and
/// finishes; `ws` is configured to use it, with `extra` configuration
/// after its `[[models]]` table.
fn model_writing(
    ws: &Workspace,
    first: Vec<Answer>,
    files: &[(&str, &str)],
    extra: &str,
) -> OpenAiServer {
    let writes = files.iter().map(|(path, content)| {
        Answer::tool_call("write_file", json!({ "path": path, "content": content }))
    });
    let script: Vec<Answer> = first
        .into_iter()
        .chain(writes)
        .chain([Answer::tool_call("run_tests", json!({})), finish("tried")])
        .collect();
    let server = OpenAiServer::start(script);
    std::fs::write(
        ws.path().join("trellis.toml"),
        format!("{}{extra}", models_toml(&[&server.base_url], 60)),
    )
    .unwrap();
    server
}

/// What the model was told its first `run_tests` call found: the tool
/// result in the request after it, where the escaping test reports.
fn run_tests_result(server: &OpenAiServer) -> Option<String> {
    server.bodies().iter().find_map(|body| {
        let request: serde_json::Value = serde_json::from_str(body).ok()?;
        request["messages"]
            .as_array()?
            .iter()
            .filter_map(|m| m["content"].as_str())
            .find(|c| c.starts_with("[trellis:tool-result run_tests"))
            .map(str::to_owned)
    })
}

/// Rust that tries every way out of its slot, then reports what worked:
/// appending to the user's file by its absolute path, writing beside the
/// workspace (`$CARGO_MANIFEST_DIR/..`, the user's real parent directory
/// when the slot is built at the workspace's path), writing an absolute
/// path outside every workspace, and connecting to `port` on 127.0.0.1.
fn escapes(user_file: &Path, outside: &Path, port: u16) -> String {
    format!(
        r#"
    let mut done = Vec::new();
    let appended = std::fs::OpenOptions::new().append(true).open({user:?})
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"// forged\n"));
    done.push(format!("user file: {{appended:?}}"));
    let beside = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../beside.txt");
    done.push(format!("beside: {{:?}}", std::fs::write(&beside, "x")));
    done.push(format!("outside: {{:?}}", std::fs::write({outside:?}, "x")));
    let connected = std::net::TcpStream::connect(("127.0.0.1", {port}));
    done.push(format!("network: {{:?}}", connected.map(|_| ())));
"#,
        user = user_file.display().to_string(),
        outside = outside.display().to_string(),
    )
}

/// A crate whose own test (the user's code, run in the view's slot) tries
/// every escape and passes.
fn escaping_crate(root: &Path, outside: &Path, port: u16) {
    let body = escapes(&root.join("src/lib.rs"), outside, port);
    support::write_crate(
        root,
        &[
            (
                "Cargo.toml",
                "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
            ),
            ("src/lib.rs", "pub fn one() -> u8 { 1 }\n"),
            (
                "tests/escape.rs",
                &format!(
                    "#[test]\nfn tries_to_escape() {{{body}    eprintln!(\"{{done:?}}\");\n}}\n"
                ),
            ),
        ],
    );
}

/// Items 1 and 6: the user's own tests, measured in the view's slot at the
/// workspace's path and at the slot's own, write nothing outside the slot.
#[test]
fn a_test_that_writes_outside_its_slot_leaves_everything_outside_as_it_was() {
    if !sandboxed() {
        return;
    }
    for at_workspace_path in [true, false] {
        let scratch = tempfile::tempdir().unwrap();
        let ws = Workspace::empty();
        let outside = scratch.path().join("outside.txt");
        let listener = Listener::new();
        escaping_crate(ws.path(), &outside, listener.port());
        std::fs::write(
            ws.path().join("trellis.toml"),
            format!("[build]\nat_workspace_path = {at_workspace_path}\n"),
        )
        .unwrap();
        let before = ws.tree();
        let beside = ws.path().parent().unwrap().join("beside.txt");
        assert!(!beside.exists());

        let (code, doc) = ws.json(&["check"]);
        assert_eq!(code, 0, "the test ran and passed: {doc:#}");
        assert_eq!(ws.tree(), before, "the user's files changed");
        assert!(!beside.exists(), "a file was written beside the workspace");
        let in_cache: Vec<PathBuf> = tree(ws.cache())
            .into_keys()
            .filter(|p| p.file_name().is_some_and(|n| n == "beside.txt"))
            .collect();
        assert!(in_cache.is_empty(), "beside a slot: {in_cache:?}");
        assert!(
            !outside.exists(),
            "a file was written outside every workspace"
        );
        // The user's own code keeps the machine's network, as the user's
        // own `cargo test` has.
        assert_eq!(
            listener.connections(),
            1,
            "at_workspace_path = {at_workspace_path}"
        );
    }
}

/// Item 3: a build script that appends to every file of its target
/// directory's `deps/` and incremental state, where the slot's seeded
/// artifacts are, corrupts none of the user's: their `target/` is byte for
/// byte what it was and their own `cargo test` still passes. The script is
/// new in the view (code the user has not built), as a branch's would be.
#[test]
fn a_build_script_appending_to_its_targets_artifacts_leaves_the_users_target_intact() {
    if !sandboxed() {
        return;
    }
    let ws = Workspace::empty();
    let root = ws.path();
    itoa_crate(
        root,
        "pub fn shown() -> String { itoa::Buffer::new().format(1u8).to_owned() }\n\n\
                 #[test]\nfn shows_one() { assert_eq!(shown(), \"1\"); }\n",
    );
    let user_test = || {
        Command::new("cargo")
            .args(["test", "--offline", "--quiet"])
            .current_dir(root)
            .env_remove("CARGO_TARGET_DIR")
            .status()
            .unwrap()
            .success()
    };
    assert!(user_test(), "the user's own build passes first");
    let target = root.join("target");
    let before = tree(&target);
    assert!(
        before
            .keys()
            .any(|p| p.to_string_lossy().contains("libitoa-")),
        "the user's target has itoa to share"
    );
    std::fs::write(root.join("build.rs"), CORRUPTING_BUILD_SCRIPT).unwrap();

    // The script breaks the slot's own artifacts: that slot's build fails,
    // and it is the slot's.
    let (_, doc) = ws.json(&["check"]);
    assert!(doc["stages"].is_array(), "{doc:#}");
    let after = tree(&target);
    for (path, bytes) in &before {
        assert_eq!(after.get(path), Some(bytes), "{} changed", path.display());
    }
    // The user does not keep the script; their build is as it was.
    std::fs::remove_file(root.join("build.rs")).unwrap();
    assert!(user_test(), "the user's build broke (E0786?)");
}

/// A crate `app` at `root` depending on `itoa`, whose `src/lib.rs` is
/// `lib`.
fn itoa_crate(root: &Path, lib: &str) {
    support::write_crate(
        root,
        &[
            (
                "Cargo.toml",
                "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
                 [dependencies]\nitoa = \"1\"\n\n[workspace]\n",
            ),
            ("Cargo.lock", support::ITOA_LOCK),
            ("src/lib.rs", lib),
        ],
    );
}

/// Appends a byte to every file below the target directory's profile
/// (`OUT_DIR` is `<target>/debug/build/app-<hash>/out`), following links,
/// and never fails the build.
const CORRUPTING_BUILD_SCRIPT: &str = r#"
fn walk(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path);
        } else if let Ok(mut file) = std::fs::OpenOptions::new().append(true).open(&path) {
            let _ = std::io::Write::write_all(&mut file, b"!");
        }
    }
}

fn main() {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let profile = out.ancestors().nth(3).unwrap();
    for dir in ["deps", "incremental"] {
        walk(&profile.join(dir));
    }
    println!("cargo:rerun-if-changed=build.rs");
}
"#;

/// The `wrong-operator` crate, a file outside every workspace and a
/// listener on the machine's loopback, with the escapes aimed at them as a
/// test's body and as a whole test that reports what it found.
struct Escape {
    _scratch: tempfile::TempDir,
    outside: PathBuf,
    listener: Listener,
    ws: Workspace,
    body: String,
    test: String,
}

impl Escape {
    fn from_wrong_operator() -> Self {
        let scratch = tempfile::tempdir().unwrap();
        let outside = scratch.path().join("outside.txt");
        let listener = Listener::new();
        let ws = Workspace::of("wrong-operator");
        let body = escapes(&ws.path().join("src/lib.rs"), &outside, listener.port());
        let test =
            format!("#[test]\nfn escape() {{{body}    panic!(\"escapes: {{done:?}}\");\n}}\n");
        Self {
            _scratch: scratch,
            outside,
            listener,
            ws,
            body,
            test,
        }
    }
}

/// Items 5 and the network: code a scripted model wrote, a build script
/// and a test that try every escape, runs in its branch with nothing
/// outside the slot writable and no network but its own loopback; the
/// test's report to the model shows each attempt refused.
#[test]
fn model_written_code_cannot_write_outside_its_slot_nor_reach_the_machines_network() {
    if !sandboxed() {
        return;
    }
    let Escape {
        outside,
        listener,
        ws,
        body,
        test,
        _scratch,
    } = Escape::from_wrong_operator();
    let build_script =
        format!("fn main() {{{body}    println!(\"cargo:warning={{done:?}}\");\n}}\n");
    let server = model_writing(
        &ws,
        vec![fix()],
        &[("build.rs", &build_script), ("tests/escape.rs", &test)],
        "",
    );
    let before = ws.tree();

    let (_, doc) = ws.json(&["repair"]);
    assert_eq!(ws.tree(), before, "the user's files changed: {doc:#}");
    assert!(
        !outside.exists(),
        "model-written code wrote outside every workspace"
    );
    assert_eq!(
        listener.connections(),
        0,
        "model-written code reached 127.0.0.1"
    );
    // What the test reported back to the model: it ran, and each attempt
    // was refused.
    let report =
        run_tests_result(&server).unwrap_or_else(|| panic!("the model's test never ran: {doc:#}"));
    for refused in [
        "user file: Err",
        "beside: Err",
        "outside: Err",
        "network: Err",
    ] {
        assert!(report.contains(refused), "{refused} not seen in {report}");
    }
}

/// With `[sandbox] network = "allow"`, the same model-written code reaches
/// the machine's loopback (the setting has its effect) and still writes
/// nothing outside its slot.
#[test]
fn network_allow_lets_model_written_code_reach_the_machine_and_nothing_more() {
    if !sandboxed() {
        return;
    }
    let Escape {
        outside,
        listener,
        ws,
        test,
        _scratch,
        ..
    } = Escape::from_wrong_operator();
    let server = model_writing(
        &ws,
        Vec::new(),
        &[("tests/escape.rs", &test)],
        "[sandbox]\nnetwork = \"allow\"\n",
    );
    let before = ws.tree();

    ws.json(&["repair"]);
    assert_eq!(ws.tree(), before);
    assert!(!outside.exists());
    assert!(
        listener.connections() >= 1,
        "`network = \"allow\"` had no effect"
    );
    let report = run_tests_result(&server).expect("the model's test ran");
    assert!(report.contains("network: Ok"), "{report}");
    assert!(report.contains("outside: Err"), "{report}");
}

/// Item 2: a `conftest.py` a model wrote plants a `.pth` file in the
/// user's virtualenv (which every later `python` start of the user would
/// run) and a module in the user's tree; neither lands.
#[test]
fn a_conftest_a_model_wrote_cannot_poison_the_users_virtualenv() {
    if !sandboxed() {
        return;
    }
    let ws = Workspace::of("py-logic-bug");
    let venv = ws.make_venv();
    // The conftest tries; a test reports what it found.
    let conftest = format!(
        "import os, site\n\
         tried = []\n\
         for path in [os.path.join(site.getsitepackages()[0], 'x.pth'), {planted:?}]:\n\
         \x20   try:\n\
         \x20       open(path, 'w').write('import os\\n')\n\
         \x20       tried.append('written')\n\
         \x20   except OSError as e:\n\
         \x20       tried.append(e.strerror)\n\
         os.environ['ESCAPES'] = repr(tried)\n",
        planted = ws.path().join("planted.py").display().to_string(),
    );
    let report =
        "import os\n\ndef test_escape():\n    assert False, 'escapes: ' + os.environ['ESCAPES']\n";
    let server = model_writing(
        &ws,
        Vec::new(),
        &[("conftest.py", &conftest), ("tests/test_escape.py", report)],
        "",
    );
    let venv_before = tree(&venv);
    let before = ws.tree();

    let (_, doc) = ws.json(&["repair"]);
    assert_eq!(tree(&venv), venv_before, "the virtualenv changed: {doc:#}");
    assert_eq!(ws.tree(), before, "the user's tree changed");
    let report = run_tests_result(&server)
        .unwrap_or_else(|| panic!("the model's conftest never ran: {doc:#}"));
    assert!(!report.contains("written"), "{report}");
    assert_eq!(report.matches("Permission denied").count(), 2, "{report}");
}

/// Erratum 37: a test a model wrote reads the verification oracle where
/// the user keeps it, by its absolute path, to show it to the model in the
/// test's failure; in the model's sandbox the oracle is not there.
#[test]
fn a_test_a_model_wrote_cannot_read_the_oracle_where_the_user_keeps_it() {
    if !sandboxed() {
        return;
    }
    const SECRET: &str = "oracle-only: the hidden expectation";
    let ws = Workspace::of("py-logic-bug");
    ws.make_venv();
    let oracle = ws.path().join("oracle/test_hidden.py");
    std::fs::create_dir_all(oracle.parent().unwrap()).unwrap();
    std::fs::write(
        &oracle,
        format!("# {SECRET}\ndef test_hidden():\n    pass\n"),
    )
    .unwrap();
    let peek = format!(
        "def test_peek():\n    try:\n        seen = open({path:?}).read()\n    \
         except OSError as e:\n        seen = e.strerror\n    \
         assert False, 'oracle read: ' + repr(seen)\n",
        path = oracle.display().to_string(),
    );
    let server = model_writing(
        &ws,
        Vec::new(),
        &[("tests/test_peek.py", &peek)],
        "[verification]\ntest_policy = \"external-oracle\"\n\
         oracle_path = \"oracle\"\noracle_command = [\"python3\", \"-m\", \"pytest\", \"oracle\"]\n",
    );
    let (_, doc) = ws.json(&["repair"]);
    let report =
        run_tests_result(&server).unwrap_or_else(|| panic!("the model's test never ran: {doc:#}"));
    assert!(oracle.exists(), "the user's oracle stays");
    // The oracle's directory is covered by an empty one.
    assert!(
        report.contains("oracle read: 'No such file or directory'"),
        "{report}"
    );
    assert!(
        server.bodies().iter().all(|b| !b.contains(SECRET)),
        "a request to the model holds the oracle"
    );
    assert!(!doc.to_string().contains(SECRET), "{doc:#}");
}

/// Items 1 and 4: a TypeScript test a model wrote appends to
/// `node_modules/../src/discount.ts` (the slot's `node_modules` is a link
/// to the user's, so `..` is the user's project) and deletes a file of the
/// user's `node_modules`; neither lands.
#[test]
fn a_typescript_test_a_model_wrote_cannot_reach_the_users_tree_through_node_modules() {
    if !sandboxed() {
        return;
    }
    let ws = Workspace::of_node_project("ts-failing-test");
    let test = "import test from \"node:test\";\n\
                import { appendFileSync, rmSync } from \"node:fs\";\n\
                const tried = [];\n\
                const attempt = (f) => { try { f(); tried.push(\"done\"); } catch (e) { tried.push(e.code); } };\n\
                test(\"escape\", () => {\n\
                \x20 attempt(() => appendFileSync(\"node_modules/../src/discount.ts\", \"// forged\\n\"));\n\
                \x20 attempt(() => rmSync(\"node_modules/.bin/tsc\"));\n\
                \x20 attempt(() => appendFileSync(\"node_modules/typescript/package.json\", \" \"));\n\
                \x20 throw new Error(\"escapes: \" + tried.join(\" \"));\n\
                });\n";
    let server = model_writing(&ws, Vec::new(), &[("test/escape.test.ts", test)], "");
    let modules = ws.path().join("node_modules");
    let listing = |dir: &Path| -> Vec<PathBuf> { tree(dir).into_keys().collect() };
    let (before, modules_before) = (ws.tree(), listing(&modules));
    let typescript = std::fs::read(modules.join("typescript/package.json")).unwrap();

    let (_, doc) = ws.json(&["repair"]);
    assert_eq!(ws.tree(), before, "the user's tree changed: {doc:#}");
    assert_eq!(listing(&modules), modules_before, "node_modules changed");
    assert_eq!(
        std::fs::read(modules.join("typescript/package.json")).unwrap(),
        typescript,
        "an installed package was written"
    );
    let report =
        run_tests_result(&server).unwrap_or_else(|| panic!("the model's test never ran: {doc:#}"));
    assert!(report.contains("escapes: EACCES EACCES EACCES"), "{report}");
}

/// A kernel without the sandbox, simulated: `trellis check --verbose` says
/// so; a model's code is refused by default, with the key that allows it,
/// before any model call; slots copy the user's artifacts instead of
/// linking them; and `[sandbox] require = false` lets the model run.
#[test]
fn without_a_sandbox_model_code_is_refused_and_nothing_is_shared() {
    const NO_SANDBOX: (&str, &str) = ("TRELLIS_FAILPOINT", "sandbox-probe:1:fail");
    let ws = Workspace::of("wrong-operator");
    let server = OpenAiServer::start(vec![fix(), finish("add adds")]);
    ws.with_models(&[&server.base_url]);

    let out = ws
        .command(&["check", "--verbose"])
        .env(NO_SANDBOX.0, NO_SANDBOX.1)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("sandbox: off ("), "{said}");
    assert!(said.contains("[sandbox] require = false"), "{said}");

    let before = ws.tree();
    let (code, doc) = ws.json_with(&["repair", "--commit"], &[NO_SANDBOX]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(ws.tree(), before);
    assert!(server.received().is_empty(), "the model was called");
    let refusal = doc.to_string();
    assert!(
        refusal.contains("refused to run model-written code without a sandbox")
            && refusal.contains("[sandbox] require = false"),
        "{doc:#}"
    );

    std::fs::write(
        ws.path().join("trellis.toml"),
        format!(
            "{}[sandbox]\nrequire = false\n",
            models_toml(&[&server.base_url], 60)
        ),
    )
    .unwrap();
    let (code, doc) = ws.json_with(&["repair", "--commit"], &[NO_SANDBOX]);
    assert_eq!(code, 0, "the opt-in runs the model: {doc:#}");
    assert!(ws.read("src/lib.rs").contains("a + b"));
}

/// Without the sandbox, a slot cannot be kept from writing a file it shares
/// with the user, so it shares none: the user's artifacts are copied, and
/// no seed store is made.
#[test]
fn without_a_sandbox_slots_copy_the_users_artifacts_instead_of_linking_them() {
    let ws = Workspace::empty();
    itoa_crate(
        ws.path(),
        "pub fn shown() -> String { itoa::Buffer::new().format(1u8).to_owned() }\n",
    );
    let built = Command::new("cargo")
        .args(["test", "--offline", "--quiet"])
        .current_dir(ws.path())
        .env_remove("CARGO_TARGET_DIR")
        .status()
        .unwrap();
    assert!(built.success());
    let (code, doc) = ws.json_with(&["check"], &[("TRELLIS_FAILPOINT", "sandbox-probe:1:fail")]);
    assert_eq!(code, 0, "{doc:#}");
    let copied = tree(ws.cache())
        .into_keys()
        .any(|p| p.to_string_lossy().contains("libitoa-"));
    assert!(copied, "itoa was not seeded at all: nothing was checked");
    no_slot_file_is_the_users(&ws);
}

/// No regular file in the cache shares an inode with one in the user's
/// `target/`, and no slot holds a link into a seed store.
fn no_slot_file_is_the_users(ws: &Workspace) {
    let users: Vec<u64> = inodes(&ws.path().join("target"))
        .into_iter()
        .map(|(_, ino)| ino)
        .collect();
    assert!(
        !users.is_empty(),
        "the user's target holds nothing to share"
    );
    for (path, ino) in inodes(ws.cache()) {
        assert!(
            !users.contains(&ino),
            "{} is the user's file",
            path.display()
        );
    }
    for path in tree(ws.cache()).into_keys() {
        assert!(
            !path.components().any(|c| c.as_os_str() == "seeds"),
            "a seed store without a sandbox: {}",
            path.display()
        );
    }
}

/// What to build, item 4, on the seed store: a shared artifact written in
/// place (the fault, injected between two runs as an escape would leave
/// it) fails the next repair with exit 3, is refused in the ledger, and is
/// restored: the user's corrupted file is removed, so their own build
/// makes it again and passes.
#[test]
fn a_shared_artifact_written_in_place_fails_the_repair_and_is_restored() {
    if !sandboxed() {
        return;
    }
    let ws = Workspace::empty();
    itoa_crate(
        ws.path(),
        "pub fn shown() -> String { itoa::Buffer::new().format(1u8).to_owned() }\n\n\
                 #[test]\nfn shows_one() { assert_eq!(shown(), \"2\"); }\n",
    );
    let user_test = || {
        Command::new("cargo")
            .args(["test", "--offline", "--quiet", "--no-run"])
            .current_dir(ws.path())
            .env_remove("CARGO_TARGET_DIR")
            .status()
            .unwrap()
            .success()
    };
    assert!(user_test());
    let (code, _) = ws.json(&["check"]);
    assert_eq!(code, 1, "the test fails: a problem to repair");
    // The fault: an itoa artifact the slots share, written in place.
    let rlib = inodes(&ws.path().join("target"))
        .into_iter()
        .find(|(path, _)| {
            let name = path.file_name().unwrap().to_string_lossy();
            name.starts_with("libitoa-") && name.ends_with(".rlib")
        })
        .expect("the user's itoa rlib")
        .0;
    let shared = inodes(ws.cache()).into_iter().any(|(path, ino)| {
        ino == std::fs::metadata(&rlib).unwrap().ino() && path.to_string_lossy().contains("seeds")
    });
    assert!(shared, "the store shares the user's rlib");
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&rlib)
        .unwrap();
    std::io::Write::write_all(&mut file, b"!").unwrap();
    drop(file);

    let out = ws.trellis(&["repair", "--commit"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("something outside every branch changed") && stderr.contains("libitoa-"),
        "{stderr}"
    );
    assert!(
        !rlib.exists(),
        "the corrupted artifact was left for the user's build"
    );
    let refused = ws.ledger_refusals();
    assert!(
        refused
            .iter()
            .any(|r| r.contains("changed outside every branch")),
        "{refused:?}"
    );
    assert!(user_test(), "the user's build makes it again");
}

/// What to build, item 4, without a sandbox: model-written code the user
/// let run unconfined (`[sandbox] require = false`) plants a `.pth` file in
/// the user's virtualenv; the repair fails with exit 3, says what changed,
/// removes the planted file and ledgers the refusal.
#[test]
fn unconfined_model_code_that_plants_a_file_in_the_venv_fails_the_repair_and_it_is_removed() {
    let ws = Workspace::of("py-logic-bug");
    let venv = ws.make_venv();
    let conftest = "import os, site\n\
                    open(os.path.join(site.getsitepackages()[0], 'x.pth'), 'w').write('import os\\n')\n";
    let server = model_writing(
        &ws,
        Vec::new(),
        &[("conftest.py", conftest)],
        "[sandbox]\nrequire = false\n",
    );
    let venv_before = tree(&venv);
    let out = ws
        .command(&["repair", "--commit"])
        .env("TRELLIS_FAILPOINT", "sandbox-probe:1:fail")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!server.received().is_empty(), "the model ran: {stderr}");
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("x.pth (appeared)"), "{stderr}");
    assert!(stderr.contains("x.pth (removed)"), "{stderr}");
    assert_eq!(tree(&venv), venv_before, "the planted file is gone");
    assert!(
        ws.ledger_refusals()
            .iter()
            .any(|r| r.contains("changed outside every branch")),
    );
}

/// `trellis doctor` says what the machine gives, before any workspace:
/// here a sandbox (in CI it must), and, on a kernel without one
/// (simulated), why not and what that means.
#[test]
fn doctor_says_whether_branches_are_sandboxed_and_why_not() {
    let doctor = |env: &[(&str, &str)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_trellis"));
        command.args(["doctor", "--format", "json"]);
        for (key, value) in env {
            command.env(key, value);
        }
        let out = command.output().unwrap();
        assert!(out.status.success());
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["sandbox"].clone()
    };
    if sandboxed() {
        let here = doctor(&[]);
        assert_eq!(
            (here["files"].as_bool(), here["network"].as_bool()),
            (Some(true), Some(true)),
            "{here}"
        );
        assert!(
            here["summary"].as_str().unwrap().starts_with("on: "),
            "{here}"
        );
    }
    let without = doctor(&[("TRELLIS_FAILPOINT", "sandbox-probe:1:fail")]);
    assert_eq!(without["files"], false, "{without}");
    assert_eq!(
        without["unavailable"][0],
        "the sandbox probe was made to fail"
    );
    assert!(
        without["summary"]
            .as_str()
            .unwrap()
            .contains("[sandbox] require = false"),
        "{without}"
    );
}
