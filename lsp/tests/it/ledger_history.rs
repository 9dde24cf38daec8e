//! The ledger's history beyond its own links: every repair prints the head,
//! `trellis ledger verify` checks the chain against the workspace's head
//! witness and against a head the user kept, and a ledger that lost events
//! (emptied, or its WAL removed after a crash) is not reported intact.
//! Each fault is made on disk, the way a crash or a tamperer would.

use std::fs;

use crate::support;

use support::workspace::Workspace;

/// The chain's hash domain, as a forger who read the source knows it.
const EVENT_HASH_DOMAIN: &str = "trellis.ledger.event.v1";

/// `ledger head: SEQ:HASH` from a repair's human output.
fn printed_head(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|line| line.strip_prefix("ledger head: "))
        .unwrap_or_else(|| panic!("no ledger head in:\n{stdout}"))
        .to_owned()
}

fn verify(ws: &Workspace, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["ledger", "verify"];
    args.extend(extra);
    let out = ws.trellis(&args);
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Removes the database's WAL and shared-memory files, as a crash and a
/// clean-up script together would.
fn remove_wal(ws: &Workspace) {
    for suffix in ["-wal", "-shm"] {
        let _ = fs::remove_file(ws.path().join(format!(".trellis/ledger.db{suffix}")));
    }
}

#[test]
fn a_repair_prints_the_head_that_verify_confirms() {
    let ws = Workspace::of("missing-mut");
    let out = ws.trellis(&["repair"]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let head = printed_head(&stdout);
    let (code, stdout, stderr) = verify(&ws, &["--expect-head", &head]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(&format!("head {head}")), "{stdout}");

    let (_, doc) = ws.json(&["repair"]);
    let json_head = doc["ledger_head"].as_str().expect("ledger_head in JSON");
    let (seq, _) = json_head.split_once(':').unwrap();
    let (old_seq, _) = head.split_once(':').unwrap();
    assert!(
        seq.parse::<u64>().unwrap() > old_seq.parse::<u64>().unwrap(),
        "a second repair appends: {json_head} after {head}"
    );
}

#[test]
fn an_emptied_ledger_is_not_intact() {
    let ws = Workspace::of("missing-mut");
    ws.trellis(&["check"]);
    fs::write(ws.path().join(".trellis/ledger.db"), b"").unwrap();
    remove_wal(&ws);
    let (code, stdout, stderr) = verify(&ws, &[]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stderr.contains("the ledger ends at event 0") && stderr.contains("are missing"),
        "{stderr}"
    );
    assert!(!stdout.contains("intact"), "{stdout}");
}

#[test]
fn an_emptied_ledger_without_a_witness_is_caught_by_the_stat_cache() {
    let ws = Workspace::of("missing-mut");
    ws.trellis(&["check"]);
    fs::write(ws.path().join(".trellis/ledger.db"), b"").unwrap();
    fs::remove_file(ws.path().join(".trellis/head")).unwrap();
    remove_wal(&ws);
    let (code, _, stderr) = verify(&ws, &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("the ledger is empty but") && stderr.contains(".trellis/index"),
        "{stderr}"
    );
}

#[test]
fn events_lost_with_the_wal_are_named() {
    let ws = Workspace::of("missing-mut");
    ws.trellis(&["check"]);
    // The database as it stood before the next run's events were checkpointed
    // into it: what a crash that took the WAL leaves behind.
    let before = fs::read(ws.path().join(".trellis/ledger.db")).unwrap();
    let out = ws.trellis(&["repair"]);
    let head = printed_head(&String::from_utf8(out.stdout).unwrap());
    fs::write(ws.path().join(".trellis/ledger.db"), before).unwrap();
    remove_wal(&ws);

    let (code, _, stderr) = verify(&ws, &[]);
    assert_eq!(code, 1, "{stderr}");
    let (seq, _) = head.split_once(':').unwrap();
    assert!(
        stderr.contains(&format!("records event {seq}")) && stderr.contains("are missing"),
        "{stderr}"
    );
    let replay = ws.trellis(&["ledger", "replay"]);
    assert_eq!(
        replay.status.code(),
        Some(1),
        "replay refuses a ledger that lost events"
    );
}

#[test]
fn a_rewritten_ledger_with_a_forged_witness_fails_against_the_kept_head() {
    let ws = Workspace::of("missing-mut");
    let out = ws.trellis(&["repair"]);
    let kept = printed_head(&String::from_utf8(out.stdout).unwrap());
    let (seq, _) = kept.split_once(':').unwrap();
    let seq: i64 = seq.parse().unwrap();

    // A forger who knows the scheme rewrites the last event, reseals it and
    // rewrites the witness: the workspace alone can no longer tell.
    let db = rusqlite::Connection::open(ws.path().join(".trellis/ledger.db")).unwrap();
    db.execute_batch("DROP TRIGGER events_are_never_updated")
        .unwrap();
    let (kind, payload, prev): (String, String, String) = db
        .query_row(
            "SELECT kind, payload, prev_hash FROM events WHERE seq = ?1",
            [seq],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    // Trailing white space: the event still decodes, its bytes differ.
    let forged_payload = payload + " ";
    let prev: trellis_engine::digest::Digest = prev.parse().unwrap();
    let forged = trellis_engine::digest::CanonicalHasher::new(EVENT_HASH_DOMAIN)
        .u64(seq as u64)
        .bytes(kind.as_bytes())
        .bytes(forged_payload.as_bytes())
        .digest(&prev)
        .finish();
    db.execute(
        "UPDATE events SET payload = ?1, hash = ?2 WHERE seq = ?3",
        rusqlite::params![forged_payload, forged.to_hex(), seq],
    )
    .unwrap();
    drop(db);
    fs::write(
        ws.path().join(".trellis/head"),
        format!("{seq}:{}\n", forged.to_hex()),
    )
    .unwrap();
    let (code, _, stderr) = verify(&ws, &[]);
    assert_eq!(code, 0, "the forged witness agrees: {stderr}");

    let (code, _, stderr) = verify(&ws, &["--expect-head", &kept]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("event {seq} ({kind})"))
            && stderr.contains("the expected head")
            && stderr.contains("rewritten"),
        "{stderr}"
    );
}

#[test]
fn a_malformed_expected_head_is_a_usage_error_naming_the_flag() {
    let ws = Workspace::of("missing-mut");
    let (code, _, stderr) = verify(&ws, &["--expect-head", "twelve"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--expect-head"), "{stderr}");
}
