//! Deterministic rendering of one section template with typed values.
//!
//! The body grammar is prose plus `{{name}}` placeholders. A line whose
//! placeholder is absent (an `Option` set to `None`, an empty list) is
//! omitted; a list or observation placeholder replaces its whole line; every
//! other placeholder is substituted in place. Substitution is single-pass, so
//! a value can never introduce a placeholder of its own.

use trellis_prompt_codegen::section::{Segment, parse_line};

use crate::bounded::{ValueError, VarValue};
use crate::schema::{SectionSchema, SectionTemplate, VarSchema};

/// The rendered text of one section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedSection {
    pub id: &'static str,
    pub text: String,
}

/// Why a section could not be rendered; rendering fails closed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RenderError {
    #[error("section `{id}`: expected {expected} values, got {got}")]
    Arity {
        id: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("section `{id}`: {source}")]
    Value {
        id: &'static str,
        #[source]
        source: ValueError,
    },
    #[error("section `{id}` ({file}) line {line}: {reason}")]
    Template {
        id: &'static str,
        file: String,
        line: usize,
        reason: String,
    },
    #[error("section `{id}` rendered {len} bytes, over its worst-case bound of {bound} bytes")]
    OverBound {
        id: &'static str,
        len: usize,
        bound: usize,
    },
}

/// Static body bytes plus every placeholder occurrence's worst case.
pub fn worst_case_bytes(vars: &[VarSchema], body: &str) -> usize {
    let mut total = body.lines().count().saturating_sub(1);
    for line in body.lines() {
        match parse_line(line) {
            Ok(segments) => {
                for segment in segments {
                    total += match segment {
                        Segment::Text(text) => text.len(),
                        Segment::Var(name) => vars
                            .iter()
                            .find(|v| v.name == name)
                            .map_or(0, |v| v.kind.max_rendered_bytes()),
                    };
                }
            }
            Err(_) => total += line.len(),
        }
    }
    total
}

/// Renders `template` of `schema` with `values` (declaration order).
pub fn render_template(
    schema: &'static SectionSchema,
    template: &SectionTemplate,
    values: &[VarValue],
) -> Result<RenderedSection, RenderError> {
    render_body(schema.id, template.file, schema.vars, template.body, values)
}

/// The template-independent core, also used for replacement bundles.
pub fn render_body(
    id: &'static str,
    file: &str,
    vars: &[VarSchema],
    body: &str,
    values: &[VarValue],
) -> Result<RenderedSection, RenderError> {
    if values.len() != vars.len() {
        return Err(RenderError::Arity {
            id,
            expected: vars.len(),
            got: values.len(),
        });
    }
    for (var, value) in vars.iter().zip(values) {
        value
            .check(var)
            .map_err(|source| RenderError::Value { id, source })?;
    }
    let lookup = |name: &str| -> Option<(&VarSchema, &VarValue)> {
        vars.iter().zip(values).find(|(v, _)| v.name == name)
    };

    let mut lines: Vec<String> = Vec::new();
    for (index, line) in body.lines().enumerate() {
        let template_error = |reason: String| RenderError::Template {
            id,
            file: file.to_owned(),
            line: index + 1,
            reason,
        };
        let segments = parse_line(line).map_err(template_error)?;
        let mut rendered = String::new();
        let mut omit = false;
        let mut block = false;
        for segment in &segments {
            match segment {
                // Block values own their line: surrounding whitespace goes.
                Segment::Text(_) if block => {}
                Segment::Text(text) => rendered.push_str(text),
                Segment::Var(name) => {
                    let (var, value) = lookup(name).ok_or_else(|| {
                        template_error(format!("undeclared placeholder `{name}`"))
                    })?;
                    if value.omits_line() {
                        omit = true;
                    } else if var.kind.is_block() {
                        block = true;
                        rendered.clear();
                        value.render(var.kind, &mut rendered);
                    } else {
                        value.render(var.kind, &mut rendered);
                    }
                }
            }
        }
        if !omit {
            lines.push(rendered);
        }
    }
    let text = lines.join("\n");
    let bound = worst_case_bytes(vars, body);
    if text.len() > bound {
        return Err(RenderError::OverBound {
            id,
            len: text.len(),
            bound,
        });
    }
    Ok(RenderedSection { id, text })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{ListStyle, VarKind};

    const VARS: &[VarSchema] = &[
        VarSchema {
            name: "steps",
            optional: false,
            kind: VarKind::List {
                count: 3,
                bytes: 8,
                style: ListStyle::Numbered,
            },
        },
        VarSchema {
            name: "names",
            optional: false,
            kind: VarKind::List {
                count: 3,
                bytes: 8,
                style: ListStyle::Comma,
            },
        },
        VarSchema {
            name: "note",
            optional: true,
            kind: VarKind::Text { max: 8 },
        },
        VarSchema {
            name: "n",
            optional: false,
            kind: VarKind::Integer(crate::schema::IntKind::U32),
        },
    ];

    fn render(values: &[VarValue]) -> String {
        render_body(
            "t/s",
            "t.md",
            VARS,
            "Steps:\n  {{steps}}  \n{{names}}\n{{note}}\nCount {{n}}.",
            values,
        )
        .unwrap()
        .text
    }

    #[test]
    fn lists_render_in_their_style_and_blocks_own_their_line() {
        let text = render(&[
            VarValue::List(vec!["a".into(), "b".into()]),
            VarValue::List(vec!["x".into(), "y".into()]),
            VarValue::Text("hi".into()),
            VarValue::Integer(4),
        ]);
        assert_eq!(text, "Steps:\n1. a\n2. b\nx, y\nhi\nCount 4.");
    }

    #[test]
    fn absent_and_empty_values_omit_their_line() {
        let text = render(&[
            VarValue::List(vec![]),
            VarValue::List(vec![]),
            VarValue::Absent,
            VarValue::Integer(0),
        ]);
        assert_eq!(text, "Steps:\nCount 0.");
    }

    #[test]
    fn substitution_is_single_pass() {
        let text = render(&[
            VarValue::List(vec!["{{n}}".into()]),
            VarValue::List(vec![]),
            VarValue::Text("{{n}}".into()),
            VarValue::Integer(1),
        ]);
        assert_eq!(text, "Steps:\n1. {{n}}\n{{n}}\nCount 1.");
    }
}
