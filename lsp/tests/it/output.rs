//! The human output of `trellis check`, `repair` and `status`, pinned by
//! `insta` snapshots (`lsp/tests/it/snapshots/`), so every change of wording is
//! reviewed. What differs from run to run is redacted: stage durations, the
//! ledger head, the temporary workspace and cache paths, wall-clock budget.

use crate::support;

use support::workspace::{Workspace, branches};

/// Replaces `(0.4s` (a stage's duration) with `([time]`.
fn redact_durations(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('(') {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if digits > 0 && rest[digits..].starts_with('s') && rest[..digits].contains('.') {
            out.push_str("[time]");
            rest = &rest[digits + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// Redacts what differs between runs of the same fixture.
fn redact(ws: &Workspace, text: &str) -> String {
    let text = text
        .replace(ws.path().to_str().unwrap(), "[workspace]")
        .replace(ws.cache().to_str().unwrap(), "[cache]");
    let lines: Vec<String> = redact_durations(&text)
        .lines()
        .map(|line| {
            if line.starts_with("ledger head: ") {
                "ledger head: [head]".to_owned()
            } else if let Some(at) = line.find("elapsed_secs ") {
                let end = line[at..].find(',').map_or(line.len(), |e| at + e);
                format!("{}elapsed_secs [secs]{}", &line[..at], &line[end..])
            } else {
                line.to_owned()
            }
        })
        .collect();
    lines.join("\n") + "\n"
}

fn stdout(ws: &Workspace, args: &[&str], code: i32) -> String {
    let out = ws.trellis(args);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        out.status.code(),
        Some(code),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    redact(ws, &text)
}

#[test]
fn durations_are_redacted_and_nothing_else() {
    assert_eq!(
        redact_durations("build passed (0.4s), test failed (12.0s, advisory) (2 sites)"),
        "build passed ([time]), test failed ([time], advisory) (2 sites)"
    );
}

#[test]
fn check_says_problems_and_root_causes() {
    let ws = Workspace::of("one-bug-many-tests");
    insta::assert_snapshot!("check_one_bug", stdout(&ws, &["check"], 1));
    insta::assert_snapshot!(
        "check_one_bug_verbose",
        stdout(&ws, &["check", "--verbose"], 1)
    );
    let ws = Workspace::of("wrong-arity");
    insta::assert_snapshot!("check_wrong_arity", stdout(&ws, &["check"], 1));
}

#[test]
fn repair_names_the_candidate_fixes_tried_and_what_became_of_them() {
    let ws = Workspace::of("local-repair");
    insta::assert_snapshot!("repair_local", stdout(&ws, &["repair"], 0));
    insta::assert_snapshot!("status_local", stdout(&ws, &["status"], 0));
    insta::assert_snapshot!(
        "status_local_verbose",
        stdout(&ws, &["status", "--verbose"], 0)
    );
    insta::assert_snapshot!(
        "repair_local_verbose",
        stdout(&ws, &["repair", "--verbose"], 0)
    );
}

#[test]
fn a_repair_that_cannot_be_verified_says_so_plainly() {
    let ws = Workspace::of("trap");
    insta::assert_snapshot!("repair_trap", stdout(&ws, &["repair"], 1));
}

#[test]
fn default_output_and_help_avoid_the_engine_s_terms() {
    const JARGON: [&str; 7] = [
        "energy",
        "ρ",
        "forest",
        "partial checkpoint",
        "no-good",
        "residual",
        "promotable",
    ];
    let ws = Workspace::of("local-repair");
    let repair = stdout(&ws, &["repair"], 0);
    // The diff quotes the fixture, whose comments may say anything.
    let (before_diff, after_diff) = repair.split_once("verified diff:").unwrap();
    let after_diff: Vec<&str> = after_diff
        .lines()
        .filter(|line| line.starts_with("verified repair:") || line.starts_with("not written"))
        .collect();
    let mut texts = vec![
        ("check", stdout(&ws, &["check"], 1)),
        ("repair", format!("{before_diff}{}", after_diff.join("\n"))),
        ("status", stdout(&ws, &["status"], 0)),
    ];
    for command in ["check", "repair", "status"] {
        let help = ws.trellis(&[command, "--help"]);
        let text = String::from_utf8(help.stdout).unwrap();
        // `--verbose` itself is documented as showing them.
        let text: String = text
            .lines()
            .filter(|line| !line.contains("precise terms") && !line.contains("With --verbose"))
            .collect::<Vec<_>>()
            .join("\n");
        texts.push((command, text));
    }
    for (what, text) in &texts {
        for word in JARGON {
            assert!(!text.contains(word), "{what} says `{word}`:\n{text}");
        }
    }
}

#[test]
fn json_reports_carry_energies_rounded_to_six_decimals() {
    // Three sites: magnitude 1 + 0.1·log₂3, whose square has binary noise.
    let ws = Workspace::of("wrong-arity");
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 1, "{doc:#}");
    let exact = 2.0 * (1.0 + 0.1 * 3f64.log2()).powi(2);
    let shown = doc["clusters"][0]["energy"].as_f64().unwrap();
    assert_eq!(shown, (exact * 1e6).round() / 1e6);
    assert_ne!(shown, exact, "the exact value has more digits");
    for value in [&doc["energy"], &doc["clusters"][0]["magnitude"]] {
        let text = value.to_string();
        let decimals = text.split_once('.').map_or(0, |(_, d)| d.len());
        assert!(decimals <= 6, "{text}");
    }
}

/// The fixture `name` with `toml` as its `trellis.toml`.
fn configured(name: &str, toml: &str) -> Workspace {
    let ws = Workspace::of(name);
    std::fs::write(ws.path().join("trellis.toml"), toml).unwrap();
    ws
}

#[test]
fn status_says_whether_the_verified_repair_was_written() {
    let ws = Workspace::of("local-repair");
    stdout(&ws, &["repair"], 0);
    let dry = stdout(&ws, &["status"], 0);
    assert!(dry.contains("closed: verified, not written"), "{dry}");
    assert!(!dry.contains("committed"), "{dry}");
    let verbose = stdout(&ws, &["status", "--verbose"], 0);
    assert!(verbose.contains("committed (not written)"), "{verbose}");
    stdout(&ws, &["repair", "--commit"], 0);
    insta::assert_snapshot!("status_local_written", stdout(&ws, &["status"], 0));
}

#[test]
fn the_limits_say_whether_a_model_is_configured() {
    let ws = Workspace::of("local-repair");
    stdout(&ws, &["repair"], 0);
    let status = stdout(&ws, &["status"], 0);
    let limits = status
        .lines()
        .find(|l| l.trim_start().starts_with("limits left: "))
        .unwrap();
    assert!(
        !limits.contains("model_turns") && !limits.contains("tokens"),
        "{status}"
    );
    let model = status
        .lines()
        .find(|l| l.trim_start().starts_with("limits left for a model: "))
        .unwrap();
    assert!(
        model.contains("model_turns") && model.contains("no model configured"),
        "{status}"
    );
    std::fs::write(
        ws.path().join("trellis.toml"),
        "[[models]]\nname = \"local\"\nadapter = \"openai-chat\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"qwen2.5-coder:7b\"\n",
    )
    .unwrap();
    let status = stdout(&ws, &["status"], 0);
    assert!(
        status.contains("model `local` (qwen2.5-coder:7b); no model turn used here"),
        "{status}"
    );
}

#[test]
fn the_verified_summary_names_every_fix_in_the_diff_and_its_route() {
    // The import was kept as a partial state the `mut` fix continued: both
    // are in the diff, so both are in the summary.
    let ws = Workspace::of("local-repair");
    let (code, doc) = ws.json(&["repair"]);
    assert_eq!(code, 0, "{doc:#}");
    let diff: String = doc["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["new_text"].as_str().unwrap())
        .collect();
    assert!(diff.contains("use std::collections::HashSet;"), "{doc:#}");
    let summary = doc["summary"].as_str().unwrap();
    for fix in [
        "use std::collections::HashSet;",
        "consider making this binding mutable",
        "consider changing this to be mutable",
    ] {
        assert!(summary.contains(fix), "`{fix}` missing from: {summary}");
    }
    let human = stdout(&ws, &["repair"], 0);
    let verified = human
        .lines()
        .find(|l| l.starts_with("verified repair: "))
        .unwrap();
    assert!(
        verified.contains("HashSet") && verified.ends_with("(by a compiler suggestion)"),
        "{verified}"
    );
}

#[test]
fn repair_output_never_advises_running_repair() {
    let ws = Workspace::of("trap");
    let text = stdout(&ws, &["repair"], 1);
    assert!(!text.contains("`trellis repair`"), "{text}");
    assert!(
        stdout(&ws, &["check"], 1).contains("`trellis repair` searches"),
        "`check` still points to it"
    );
}

#[test]
fn a_refusal_says_why_and_what_would_help_per_reason() {
    // The step limit: the second problem is never reached.
    let ws = configured("local-repair", "[exploration]\nmax_steps = 1\n");
    insta::assert_snapshot!("repair_step_limit", stdout(&ws, &["repair"], 1));
    let (_, doc) = ws.json(&["repair"]);
    let unfixed = &doc["unfixed"][0];
    assert_eq!(unfixed["reason"]["kind"], "not_reached", "{doc:#}");
    assert_eq!(unfixed["help"]["kind"], "raise_limit", "{doc:#}");
    assert_eq!(unfixed["help"]["limit"], "max_steps", "{doc:#}");

    // A compiler suggestion that makes things worse: tried, not usable.
    let ws = Workspace::of("next-cluster");
    insta::assert_snapshot!("repair_next_cluster", stdout(&ws, &["repair"], 1));
    // Run again, the same fix is remembered as failed and not tried.
    let (_, doc) = ws.json(&["repair"]);
    let unfixed = &doc["unfixed"][0];
    assert_eq!(unfixed["reason"]["kind"], "none_usable", "{doc:#}");
    assert_eq!(
        unfixed["reason"]["reasons"],
        serde_json::json!([{ "kind": "tried_before" }]),
        "{doc:#}"
    );
    let branches: Vec<&serde_json::Value> = branches(&doc)
        .filter(|b| b["outcome"] == "ineligible")
        .collect();
    assert!(
        branches
            .iter()
            .all(|b| b["cause"]["kind"].is_string() && b["reason"].is_string()),
        "every unused fix carries a typed cause and the precise reason: {doc:#}"
    );

    // No suggestion at all, no model: a model could try.
    let ws = Workspace::of("trap");
    let (_, doc) = ws.json(&["repair"]);
    let unfixed = &doc["unfixed"][0];
    assert_eq!(unfixed["reason"]["kind"], "no_suggestion", "{doc:#}");
    assert_eq!(unfixed["help"]["kind"], "configure_model", "{doc:#}");
}

#[test]
fn long_branch_outcomes_wrap_inside_their_column() {
    let ws = Workspace::of("local-repair");
    let text = stdout(&ws, &["repair", "--verbose"], 0);
    // The partial's outcome is far longer than its column.
    let header = text.lines().find(|l| l.contains("outcome")).unwrap();
    let column = header.find("outcome").unwrap();
    let candidate = header.find("candidate").unwrap();
    let mut wrapped = 0;
    for line in text.lines() {
        if line.len() > column && line[..column].trim().is_empty() && !line.trim().is_empty() {
            wrapped += 1;
            assert!(
                line.chars().count() < candidate,
                "a continuation runs into the candidate column:\n{line}\n{text}"
            );
        }
    }
    assert!(wrapped > 0, "the long outcome wraps:\n{text}");
}

#[test]
fn a_limit_that_runs_out_is_named_with_the_key_to_raise() {
    // One verifier run: the partial state is kept, its continuation cannot
    // be checked.
    let ws = configured("local-repair", "[exploration.limits]\nverifier_runs = 1\n");
    insta::assert_snapshot!("repair_budget", stdout(&ws, &["repair"], 1));
    let (_, doc) = ws.json(&["repair"]);
    let unfixed = &doc["unfixed"][0];
    assert_eq!(
        unfixed["help"],
        serde_json::json!({ "kind": "raise_limit", "limit": "verifier_runs" }),
        "{doc:#}"
    );
}

/// The file holding the missing `mut`: a module named through `#[path]`
/// with a newline and a right-to-left override in its name.
const FORGING_FILE: &str = "src/odd\n\u{202e}name.rs";

/// A crate whose one error sits between a comment holding a carriage
/// return and a string holding escape sequences that would erase the line
/// above and move the cursor up, in a file whose name forges a line.
fn forging_crate() -> Workspace {
    let ws = Workspace::empty();
    support::write_crate(
        ws.path(),
        &[
            (
                "Cargo.toml",
                "[package]\nname = \"odd\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
            ),
            (
                "src/lib.rs",
                "#[path = \"odd\\n\\u{202e}name.rs\"]\nmod odd;\npub use odd::count;\n",
            ),
            (
                FORGING_FILE,
                "pub fn count(words: &[&str]) -> usize {\n    // a carriage return\r, then more\n    \
                 let _banner = \"\x1b[2K\x1b[1Aforged\";\n    let n = 0;\n    for _ in words {\n        \
                 n += 1;\n    }\n    n\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn counts() {\n        \
                 assert_eq!(super::count(&[\"a\", \"b\"]), 2);\n    }\n}\n",
            ),
        ],
    );
    ws
}

#[test]
fn file_names_and_contents_reach_the_terminal_escaped_and_json_stays_exact() {
    let ws = forging_crate();
    let (code, doc) = ws.json(&["repair"]);
    assert_eq!(code, 0, "{doc:#}");
    let change = &doc["changes"][0];
    assert_eq!(change["path"], FORGING_FILE, "JSON names the file exactly");
    assert!(
        change["new_text"]
            .as_str()
            .unwrap()
            .contains("\r, then more\n    let _banner = \"\x1b[2K"),
        "{change:#}"
    );

    let committed = ws.trellis(&["repair", "--commit"]);
    let replayed = ws.trellis(&["ledger", "replay"]);
    for out in [&committed, &replayed] {
        assert_eq!(out.status.code(), Some(0));
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for raw in ['\x1b', '\r', '\u{202e}'] {
            assert!(
                !printed.contains(raw),
                "{raw:?} reached the terminal:\n{printed}"
            );
        }
        assert!(
            !printed.lines().any(|line| line.starts_with("name.rs")),
            "the name's newline reached the terminal:\n{printed}"
        );
    }
    let stdout = String::from_utf8_lossy(&committed.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let escaped = r"src/odd\n\u{202e}name.rs";
    for expected in [
        format!("--- a/{escaped}"),
        format!("+++ b/{escaped}"),
        r"     // a carriage return\r".to_owned(),
        r#"     let _banner = "\x1b[2K\x1b[1Aforged";"#.to_owned(),
        "+    let mut n = 0;".to_owned(),
        format!("written: {escaped}"),
    ] {
        assert!(
            lines.contains(&expected.as_str()),
            "no line {expected:?} in:\n{stdout}"
        );
    }
    let replayed = String::from_utf8_lossy(&replayed.stdout);
    assert!(
        replayed
            .lines()
            .any(|line| line.starts_with("promoted ") && line.ends_with(escaped)),
        "{replayed}"
    );
    assert!(ws.read(FORGING_FILE).contains("    let mut n = 0;\n"));
}
