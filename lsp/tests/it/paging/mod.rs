//! The resident-context fixture shared by the CLI's and the editor's
//! paging tests: the wrong-operator crate beside two notes files, and a
//! route whose window is small enough that both cannot stay resident.

use serde_json::json;

use crate::support::workspace::Workspace;
use trellis_engine::context::ResidentPlan;
use trellis_engine::ledger::{DecodedRow, Ledger, LedgerEvent, SearchEvent};
use trellis_test_support::openai_server::{Answer, OpenAiServer};

/// The window of the paging tests' route: small enough that two long reads
/// cannot both stay resident, large enough for the instructions and tool
/// schemas at the accountant's token a byte.
pub const WINDOW: u64 = 16_384;

/// One `[[models]]` table with a `window`-token context.
fn config(server: &OpenAiServer, window: u64) -> String {
    format!(
        "[[models]]\nname = \"small\"\nadapter = \"openai-chat\"\nbase_url = \"{}\"\n\
         model = \"qwen2.5-coder:1.5b\"\ntimeout_secs = 60\n\
         context_window_tokens = {window}\nmax_output_tokens = 512\n",
        server.base_url
    )
}

/// `lines` numbered lines of notes, each naming its file, so a request
/// shows whether the file's page was resident.
fn notes(name: &str, lines: usize) -> String {
    (1..=lines)
        .map(|i| format!("{name} note {i:03}: keep the adder total\n"))
        .collect()
}

/// The fixture with two notes files of `lines` lines each.
pub fn workspace(server: &OpenAiServer, window: u64, lines: usize) -> Workspace {
    let ws = Workspace::of("wrong-operator");
    std::fs::write(ws.path().join("trellis.toml"), config(server, window)).unwrap();
    std::fs::create_dir_all(ws.path().join("data")).unwrap();
    for name in ["alpha", "beta"] {
        std::fs::write(
            ws.path().join(format!("data/{name}.txt")),
            notes(name, lines),
        )
        .unwrap();
    }
    ws
}

/// How many lines each notes file needs so that either fits beside the
/// instructions of a [`WINDOW`]-token request and both together do not: a
/// notes file of ~60% of the room the instructions leave. Measured from
/// one recorded request rather than assumed, so a change of the prompt
/// library's size moves the files, not the test's meaning.
pub fn long_lines() -> usize {
    let server = OpenAiServer::start(vec![Answer::tool_call(
        "finish",
        json!({ "summary": "nothing" }),
    )]);
    let ws = workspace(&server, WINDOW, 1);
    ws.trellis(&["repair"]);
    let plan = &plans(&ws)[0];
    let room = plan.allowance.input - plan.instruction_tokens;
    assert!(
        room > 300,
        "a {WINDOW}-token window leaves room for pages: {room}"
    );
    // A page costs its text at a token a byte plus ~100 tokens of call,
    // result header and framing; a line is 37 bytes.
    let page_tokens = room * 6 / 10 - 100;
    (page_tokens / 37) as usize
}

pub fn read(path: &str) -> Answer {
    Answer::tool_call("read_file", json!({ "path": path }))
}

/// The model both paging tests script: it reads both notes files, recalls
/// the first by path, reads the crate's library, fixes it and finishes.
pub fn script() -> Vec<Answer> {
    vec![
        read("data/alpha.txt"),
        read("data/beta.txt"),
        Answer::tool_call("context_recall", json!({ "path": "data/alpha.txt" })),
        read("src/lib.rs"),
        Answer::tool_call(
            "replace",
            json!({ "path": "src/lib.rs", "old": "a - b", "new": "a + b" }),
        ),
        Answer::tool_call("finish", json!({ "summary": "add adds" })),
    ]
}

/// The rows of the workspace's ledger.
pub fn rows(ws: &Workspace) -> Vec<trellis_engine::ledger::Row> {
    Ledger::open(&ws.path().join(".trellis"))
        .unwrap()
        .rows()
        .unwrap()
}

/// The id of the latest session the ledger recorded.
pub fn session_id(ws: &Workspace) -> String {
    rows(ws)
        .into_iter()
        .rev()
        .find_map(|row| match row.event {
            DecodedRow::Ledger(LedgerEvent::SessionStarted(s)) => Some(s.session_id),
            _ => None,
        })
        .expect("a session was recorded")
}

/// How many search events named `name` the ledger holds.
pub fn count(ws: &Workspace, name: &str) -> usize {
    rows(ws)
        .iter()
        .filter(
            |row| matches!(&row.event, DecodedRow::Search { event, .. } if event.name() == name),
        )
        .count()
}

/// Every recorded plan, in ledger order.
pub fn plans(ws: &Workspace) -> Vec<ResidentPlan> {
    rows(ws)
        .into_iter()
        .filter_map(|row| match row.event {
            DecodedRow::Search {
                event: SearchEvent::ContextPagesSelected { plan, .. },
                ..
            } => Some(serde_json::from_value(plan).unwrap()),
            _ => None,
        })
        .collect()
}
