//! The bounded value types of section variables and their canonical rendering.
//!
//! A value is checked against its bound when it is constructed, so a typed
//! section struct can only hold values whose rendered size is known. The same
//! checks run again at render time on [`VarValue`]s, which also arrive from
//! untyped sources (`--vars` files, replacement bundles).

use trellis_prompt_codegen::schema::{
    FLOAT_DECIMALS, FLOAT_MAGNITUDE_LIMIT, IntKind, ListStyle, OBSERVATION_CLOSE, OBSERVATION_OPEN,
    VarKind, VarSchema,
};

/// A value that does not fit its declared bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BoundError {
    #[error("text of {len} bytes exceeds its bound of {max} bytes")]
    TextTooLong { len: usize, max: usize },
    #[error("list of {len} items exceeds its bound of {max} items")]
    TooManyItems { len: usize, max: usize },
    #[error("list item {index} is {len} bytes, over its bound of {max} bytes")]
    ItemTooLong {
        index: usize,
        len: usize,
        max: usize,
    },
    #[error("list item {index} contains a line break, which would change the list's structure")]
    ItemHasNewline { index: usize },
}

/// Locally trusted text of at most `N` bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BoundedText<const N: usize>(String);

impl<const N: usize> BoundedText<N> {
    pub fn new(text: impl Into<String>) -> Result<Self, BoundError> {
        let text = text.into();
        check_text(&text, N)?;
        Ok(BoundedText(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Untrusted text of at most `N` bytes; always rendered as an escaped,
/// length-prefixed observation block so it cannot change section structure.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObservationText<const N: usize>(String);

impl<const N: usize> ObservationText<N> {
    pub fn new(text: impl Into<String>) -> Result<Self, BoundError> {
        let text = text.into();
        check_text(&text, N)?;
        Ok(ObservationText(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// At most `COUNT` single-line items of at most `BYTES` bytes each.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BoundedList<const COUNT: usize, const BYTES: usize>(Vec<String>);

impl<const COUNT: usize, const BYTES: usize> BoundedList<COUNT, BYTES> {
    pub fn new<I, S>(items: I) -> Result<Self, BoundError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let items: Vec<String> = items.into_iter().map(Into::into).collect();
        check_list(&items, COUNT, BYTES)?;
        Ok(BoundedList(items))
    }

    pub fn empty() -> Self {
        BoundedList(Vec::new())
    }

    pub fn items(&self) -> &[String] {
        &self.0
    }
}

fn check_text(text: &str, max: usize) -> Result<(), BoundError> {
    if text.len() > max {
        return Err(BoundError::TextTooLong {
            len: text.len(),
            max,
        });
    }
    Ok(())
}

fn check_list(items: &[String], count: usize, bytes: usize) -> Result<(), BoundError> {
    if items.len() > count {
        return Err(BoundError::TooManyItems {
            len: items.len(),
            max: count,
        });
    }
    for (index, item) in items.iter().enumerate() {
        if item.len() > bytes {
            return Err(BoundError::ItemTooLong {
                index,
                len: item.len(),
                max: bytes,
            });
        }
        if item.contains(['\n', '\r']) {
            return Err(BoundError::ItemHasNewline { index });
        }
    }
    Ok(())
}

/// The untyped form of one variable's value, in declaration order.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum VarValue {
    /// `None` of an `Option<T>`: the placeholder's line is omitted.
    Absent,
    Text(String),
    Observation(String),
    List(Vec<String>),
    Integer(i128),
    Float(f64),
}

/// Conversion of a typed field into its [`VarValue`]; used by generated code.
pub trait IntoVarValue {
    fn to_var_value(&self) -> VarValue;
}

impl<const N: usize> IntoVarValue for BoundedText<N> {
    fn to_var_value(&self) -> VarValue {
        VarValue::Text(self.0.clone())
    }
}

impl<const N: usize> IntoVarValue for ObservationText<N> {
    fn to_var_value(&self) -> VarValue {
        VarValue::Observation(self.0.clone())
    }
}

impl<const C: usize, const B: usize> IntoVarValue for BoundedList<C, B> {
    fn to_var_value(&self) -> VarValue {
        VarValue::List(self.0.clone())
    }
}

impl IntoVarValue for u32 {
    fn to_var_value(&self) -> VarValue {
        VarValue::Integer(i128::from(*self))
    }
}

impl IntoVarValue for u64 {
    fn to_var_value(&self) -> VarValue {
        VarValue::Integer(i128::from(*self))
    }
}

impl IntoVarValue for i64 {
    fn to_var_value(&self) -> VarValue {
        VarValue::Integer(i128::from(*self))
    }
}

impl IntoVarValue for f64 {
    fn to_var_value(&self) -> VarValue {
        VarValue::Float(*self)
    }
}

impl<T: IntoVarValue> IntoVarValue for Option<T> {
    fn to_var_value(&self) -> VarValue {
        self.as_ref()
            .map_or(VarValue::Absent, IntoVarValue::to_var_value)
    }
}

/// A value that does not fit the variable it was given for.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("variable `{var}`: {reason}")]
pub struct ValueError {
    pub var: String,
    pub reason: String,
}

impl VarValue {
    /// Checks this value against its declared schema.
    pub fn check(&self, var: &VarSchema) -> Result<(), ValueError> {
        let fail = |reason: String| {
            Err(ValueError {
                var: var.name.to_owned(),
                reason,
            })
        };
        match (self, var.kind) {
            (VarValue::Absent, _) if var.optional => Ok(()),
            (VarValue::Absent, _) => fail("a required variable has no value".into()),
            (VarValue::Text(text), VarKind::Text { max })
            | (VarValue::Observation(text), VarKind::Observation { max }) => {
                check_text(text, max).or_else(|e| fail(e.to_string()))
            }
            (VarValue::List(items), VarKind::List { count, bytes, .. }) => {
                check_list(items, count, bytes).or_else(|e| fail(e.to_string()))
            }
            (VarValue::Integer(n), VarKind::Integer(kind)) => {
                let (lo, hi) = match kind {
                    IntKind::U32 => (0, i128::from(u32::MAX)),
                    IntKind::U64 => (0, i128::from(u64::MAX)),
                    IntKind::I64 => (i128::from(i64::MIN), i128::from(i64::MAX)),
                };
                if (lo..=hi).contains(n) {
                    Ok(())
                } else {
                    fail(format!("{n} is out of range for {}", kind.as_str()))
                }
            }
            (VarValue::Float(x), VarKind::Float) => {
                if x.is_finite() && x.abs() < FLOAT_MAGNITUDE_LIMIT {
                    Ok(())
                } else {
                    fail(format!(
                        "{x} is not a finite float below {FLOAT_MAGNITUDE_LIMIT:e} in magnitude"
                    ))
                }
            }
            (value, kind) => fail(format!(
                "a {} value was given for a `{}`",
                value.kind_name(),
                kind.rust_type()
            )),
        }
    }

    fn kind_name(&self) -> &'static str {
        match self {
            VarValue::Absent => "missing",
            VarValue::Text(_) => "text",
            VarValue::Observation(_) => "observation",
            VarValue::List(_) => "list",
            VarValue::Integer(_) => "integer",
            VarValue::Float(_) => "float",
        }
    }

    /// True when the placeholder's line must be omitted.
    pub fn omits_line(&self) -> bool {
        match self {
            VarValue::Absent => true,
            VarValue::List(items) => items.is_empty(),
            _ => false,
        }
    }

    /// Canonical rendering of a present value.
    pub fn render(&self, kind: VarKind, out: &mut String) {
        match self {
            VarValue::Absent => {}
            VarValue::Text(text) => out.push_str(text),
            VarValue::Observation(text) => render_observation(text, out),
            VarValue::List(items) => {
                let style = match kind {
                    VarKind::List { style, .. } => style,
                    _ => ListStyle::Bullet,
                };
                render_list(items, style, out);
            }
            VarValue::Integer(n) => out.push_str(&n.to_string()),
            VarValue::Float(x) => out.push_str(&canonical_float(*x)),
        }
    }
}

/// `[observation bytes=N]`, the escaped payload, `[/observation]`: the length
/// is of the raw text, and `\`, `[` and `]` are backslash-escaped so the
/// payload can never contain a delimiter.
pub fn render_observation(text: &str, out: &mut String) {
    out.push_str(OBSERVATION_OPEN);
    out.push_str(&text.len().to_string());
    out.push_str("]\n");
    for c in text.chars() {
        if matches!(c, '\\' | '[' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('\n');
    out.push_str(OBSERVATION_CLOSE);
}

fn render_list(items: &[String], style: ListStyle, out: &mut String) {
    for (index, item) in items.iter().enumerate() {
        match style {
            ListStyle::Bullet => {
                if index > 0 {
                    out.push('\n');
                }
                out.push_str("- ");
            }
            ListStyle::Numbered => {
                if index > 0 {
                    out.push('\n');
                }
                out.push_str(&format!("{}. ", index + 1));
            }
            ListStyle::Comma => {
                if index > 0 {
                    out.push_str(", ");
                }
            }
        }
        out.push_str(item);
    }
}

/// Fixed six-decimal form with no locale and no negative zero.
pub fn canonical_float(x: f64) -> String {
    let x = if x == 0.0 { 0.0 } else { x };
    format!("{x:.prec$}", prec = FLOAT_DECIMALS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn construction_enforces_bounds() {
        assert!(BoundedText::<3>::new("abc").is_ok());
        assert_eq!(
            BoundedText::<3>::new("abcd"),
            Err(BoundError::TextTooLong { len: 4, max: 3 })
        );
        assert_eq!(
            BoundedList::<1, 8>::new(["a", "b"]),
            Err(BoundError::TooManyItems { len: 2, max: 1 })
        );
        assert_eq!(
            BoundedList::<2, 8>::new(["a\nb"]),
            Err(BoundError::ItemHasNewline { index: 0 })
        );
    }

    #[test]
    fn observation_escapes_delimiters() {
        let mut out = String::new();
        render_observation("x[/observation]\\", &mut out);
        assert_eq!(
            out,
            "[observation bytes=16]\nx\\[/observation\\]\\\\\n[/observation]"
        );
        assert_eq!(out.matches(OBSERVATION_CLOSE).count(), 1);
    }

    #[test]
    fn floats_are_canonical() {
        assert_eq!(canonical_float(-0.0), "0.000000");
        assert_eq!(canonical_float(1.5), "1.500000");
    }
}
