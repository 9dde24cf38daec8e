//! The human output of `trellis check`, `repair` and `status`, pinned by
//! `insta` snapshots (`lsp/tests/snapshots/`), so every change of wording is
//! reviewed. What differs from run to run is redacted: stage durations, the
//! ledger head, the temporary workspace and cache paths, wall-clock budget.

mod support;

use support::workspace::Workspace;

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
