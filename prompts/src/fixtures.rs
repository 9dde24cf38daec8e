//! Fixture values and default compositions: what `trellis prompts render`
//! shows and what the snapshot tests pin. Fixture values are derived from the
//! schema alone, so every section — present and future — has one.

use serde_json::Value;

use crate::bounded::{BoundedList, BoundedText, VarValue};
use crate::compose::StageComposition;
use crate::composers::{BootstrapState, session_bootstrap};
use crate::dialect::ModelDialect;
use crate::plan::stage_schema;
use crate::schema::{IntKind, PromptStage, SectionSchema, VarKind, VarSchema};

/// A deterministic, readable value for one variable (always present).
pub fn fixture_value(var: &VarSchema) -> VarValue {
    let clip = |text: String, max: usize| -> String {
        let mut text = text;
        while text.len() > max {
            text.pop();
        }
        text
    };
    match var.kind {
        VarKind::Text { max } => VarValue::Text(clip(format!("<{}>", var.name), max)),
        VarKind::Observation { max } => VarValue::Observation(clip(
            format!("observed {} with [brackets] and a \\ backslash", var.name),
            max,
        )),
        VarKind::List { count, bytes, .. } => VarValue::List(
            (1..=count.min(3))
                .map(|i| clip(format!("{} item {i}", var.name), bytes))
                .collect(),
        ),
        VarKind::Integer(IntKind::I64) => VarValue::Integer(-7),
        VarKind::Integer(_) => VarValue::Integer(3),
        VarKind::Float => VarValue::Float(0.25),
    }
}

/// Fixture values for every variable of `schema`, in declaration order.
pub fn fixture_values(schema: &SectionSchema) -> Vec<VarValue> {
    schema.vars.iter().map(fixture_value).collect()
}

/// The composition `render` shows for a stage: the typed composer where a
/// stage has dynamic predicates, otherwise every declared section, all with
/// fixture values.
pub fn default_composition(stage: PromptStage, dialect: &ModelDialect) -> StageComposition {
    match stage {
        PromptStage::SessionBootstrap => {
            let state = BootstrapState {
                workspace_name: BoundedText::new("<workspace_name>").expect("fixture fits"),
                session_id: BoundedText::new("<session_id>").expect("fixture fits"),
                granted_capabilities: BoundedList::new([
                    "read workspace",
                    "edit branch",
                    "run cargo check",
                ])
                .expect("fixture fits"),
                write_ahead_note: BoundedText::new("<write_ahead_note>").ok(),
            };
            session_bootstrap(&state, dialect)
        }
        _ => stage_schema(stage)
            .map(|decl| {
                decl.sections
                    .iter()
                    .fold(StageComposition::new(stage), |comp, schema| {
                        comp.section_values(schema, fixture_values(schema))
                    })
            })
            .unwrap_or_else(|| StageComposition::new(stage)),
    }
}

/// Converts a JSON value for `var`: `null` is absent, strings are text or
/// observations, arrays of strings are lists, numbers are numbers.
pub fn value_from_json(var: &VarSchema, json: &Value) -> Result<VarValue, String> {
    let value = match (var.kind, json) {
        (_, Value::Null) => VarValue::Absent,
        (VarKind::Text { .. }, Value::String(s)) => VarValue::Text(s.clone()),
        (VarKind::Observation { .. }, Value::String(s)) => VarValue::Observation(s.clone()),
        (VarKind::List { .. }, Value::Array(items)) => VarValue::List(
            items
                .iter()
                .map(|i| {
                    i.as_str()
                        .map(str::to_owned)
                        .ok_or("list items must be strings")
                })
                .collect::<Result<_, _>>()?,
        ),
        (VarKind::Integer(_), Value::Number(n)) => VarValue::Integer(
            n.as_i64()
                .map(i128::from)
                .or_else(|| n.as_u64().map(i128::from))
                .ok_or("expected an integer")?,
        ),
        (VarKind::Float, Value::Number(n)) => {
            VarValue::Float(n.as_f64().ok_or("expected a number")?)
        }
        (kind, other) => {
            return Err(format!(
                "a `{}` cannot be read from JSON `{other}`",
                kind.rust_type()
            ));
        }
    };
    let checked = value.check(var).map(|()| value).map_err(|e| e.reason)?;
    Ok(checked)
}

/// Reads `{ "<section id>": { "<var>": value, ... }, ... }` into per-section
/// value lists. A section's unspecified variables keep their fixture values.
pub fn values_from_json(
    json: &Value,
) -> Result<Vec<(&'static SectionSchema, Vec<VarValue>)>, String> {
    let object = json
        .as_object()
        .ok_or("the vars file must be a JSON object keyed by section id")?;
    let mut out = Vec::new();
    for (id, vars) in object {
        let schema = crate::sections::ALL_SECTIONS
            .iter()
            .find(|s| s.id == id)
            .ok_or_else(|| format!("unknown section `{id}`"))?;
        let vars = vars
            .as_object()
            .ok_or_else(|| format!("section `{id}`: expected an object of variables"))?;
        for name in vars.keys() {
            if !schema.vars.iter().any(|v| v.name == name) {
                return Err(format!("section `{id}` has no variable `{name}`"));
            }
        }
        let mut values = Vec::new();
        for var in schema.vars {
            values.push(match vars.get(var.name) {
                Some(json) => {
                    value_from_json(var, json).map_err(|e| format!("`{id}`.`{}`: {e}", var.name))?
                }
                None => fixture_value(var),
            });
        }
        out.push((*schema, values));
    }
    Ok(out)
}
