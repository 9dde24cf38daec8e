//! `explain_session`: the report of which programs a session compiled, as
//! the binary prints it for `trellis prompts explain-session` (whose argument
//! handling is tested through the binary in `lsp/tests/it/prompts_cli.rs`).

use crate::common;

use trellis_prompts::fixtures::default_composition;
use trellis_prompts::{
    ModelDialect, ModelFamily, ProgramRecord, PromptStage, compile, explain_session,
};

#[test]
fn explain_session_reports_recorded_programs() {
    let dialect = &ModelDialect::NATIVE_TOOLS_V1;
    let route = common::route(ModelFamily::Anthropic, Some("claude-x"));
    let composition = default_composition(PromptStage::BranchCorrect, dialect);
    let options = common::options(&route, dialect, 1_200);
    let program = compile(&composition, &options).unwrap();
    let record = ProgramRecord::new("s-42", &composition, &options, &program, None);

    let mut out = Vec::new();
    assert_eq!(
        explain_session(std::slice::from_ref(&record), &mut out).unwrap(),
        0
    );
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains(&program.program_digest));
    assert!(text.contains("branch_correct/role@1 [base]"));
    assert!(
        text.contains("dropped: branch_correct/repository_hints"),
        "{text}"
    );

    // A section this build cannot reconstruct, or a missing digest, fails.
    let mut foreign = record.clone();
    foreign.sections[0].content_hash = "sha256:elsewhere".into();
    foreign.program_digest.clear();
    let mut out = Vec::new();
    assert_eq!(explain_session(&[foreign], &mut out).unwrap(), 1);
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("program digest: MISSING") && text.contains("NOT in this build"));
    assert!(text.contains("reconstruction: FAILED"), "{text}");
}

#[test]
fn a_session_without_programs_is_a_negative_finding() {
    let mut out = Vec::new();
    assert_eq!(explain_session(&[], &mut out).unwrap(), 1);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "no compiled prompt programs recorded\n"
    );
}
