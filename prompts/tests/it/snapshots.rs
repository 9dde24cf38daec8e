//! Every section rendered with fixture values, and every stage composed for
//! both dialects: a reviewed text change is always a visible snapshot diff.

use crate::common;

use trellis_prompts::fixtures::{default_composition, fixture_values};
use trellis_prompts::render::render_template;
use trellis_prompts::sections::ALL_SECTIONS;
use trellis_prompts::{ModelDialect, ModelFamily, PromptStage, compile};

#[test]
fn every_section_renders_with_fixture_values() {
    for schema in ALL_SECTIONS {
        for template in schema.templates() {
            let rendered = render_template(schema, template, &fixture_values(schema))
                .unwrap_or_else(|e| panic!("{}: {e}", template.file));
            let name = format!(
                "section__{}__{}",
                schema.id.replace('/', "__"),
                template.target
            );
            insta::assert_snapshot!(name, rendered.text);
        }
    }
}

#[test]
fn every_stage_composes_for_both_dialects() {
    let routes = [
        (
            &ModelDialect::NATIVE_TOOLS_V1,
            common::route(ModelFamily::Anthropic, Some("claude-x")),
        ),
        (
            &ModelDialect::JSON_SINGLE_SLOT_V1,
            common::route(ModelFamily::Other, None),
        ),
    ];
    for stage in PromptStage::ALL {
        for (dialect, route) in &routes {
            let composition = default_composition(*stage, dialect);
            let program = compile(
                &composition,
                &common::options(route, dialect, dialect.default_budget_tokens()),
            )
            .unwrap_or_else(|e| panic!("{stage} / {}: {e}", dialect.id));
            insta::assert_snapshot!(
                format!("stage__{stage}__{}", dialect.id),
                common::describe(&program)
            );
        }
    }
}
