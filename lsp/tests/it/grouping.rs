//! Failures are shown by their likely common cause, as a person would
//! report them: one logic bug that fails twelve tests is one cluster, and
//! every call of a function with the wrong number of arguments is one.

use crate::support;

use support::workspace::Workspace;

fn clusters(doc: &serde_json::Value) -> &Vec<serde_json::Value> {
    doc["clusters"].as_array().expect("clusters")
}

#[test]
fn twelve_tests_failing_through_one_buggy_function_are_one_cluster() {
    let ws = Workspace::of("one-bug-many-tests");
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["failures"].as_array().unwrap().len(), 12);
    let clusters = clusters(&doc);
    assert_eq!(clusters.len(), 1, "{clusters:#?}");
    assert_eq!(clusters[0]["class"], "test_failure");
    assert_eq!(
        clusters[0]["title"],
        "12 tests fail calling `total_cents`, defined at src/lib.rs:6"
    );
    assert_eq!(clusters[0]["failures"].as_array().unwrap().len(), 12);

    let human = ws.trellis(&["check"]);
    let stdout = String::from_utf8(human.stdout).unwrap();
    assert!(
        stdout.contains("12 tests fail calling `total_cents`, defined at src/lib.rs:6"),
        "{stdout}"
    );
}

#[test]
fn wrong_arity_calls_of_one_function_are_one_cluster_at_its_definition() {
    let ws = Workspace::of("wrong-arity");
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 1, "{doc:#}");
    let arity: Vec<&serde_json::Value> = doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "E0061")
        .collect();
    assert_eq!(arity.len(), 3, "three call sites: {arity:#?}");
    let clusters = clusters(&doc);
    let type_clusters: Vec<_> = clusters.iter().filter(|c| c["class"] == "type").collect();
    assert_eq!(type_clusters.len(), 1, "{clusters:#?}");
    assert_eq!(
        type_clusters[0]["title"],
        "calls pass the wrong number of arguments to the function defined at src/lib.rs:3 (3 sites)"
    );
    assert_eq!(type_clusters[0]["sites"].as_array().unwrap().len(), 3);
}
