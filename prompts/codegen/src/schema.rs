//! The finite type vocabulary of section variables.
//!
//! These values are shared with the runtime crate: the generated code builds
//! `static` schemas out of them, and the runtime renders with them. Every type
//! has a declared worst-case rendered size, which is what makes the rendered
//! bound of a section computable before any value exists.

use std::fmt;

/// How a `BoundedList` renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListStyle {
    /// One `- item` per line.
    Bullet,
    /// `a, b, c` on one line.
    Comma,
    /// One `1. item` per line.
    Numbered,
}

impl ListStyle {
    pub fn parse(text: &str) -> Option<ListStyle> {
        match text {
            "bullet_list" => Some(ListStyle::Bullet),
            "comma_list" => Some(ListStyle::Comma),
            "numbered_list" => Some(ListStyle::Numbered),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ListStyle::Bullet => "bullet_list",
            ListStyle::Comma => "comma_list",
            ListStyle::Numbered => "numbered_list",
        }
    }
}

/// The integer types a section may declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IntKind {
    U32,
    U64,
    I64,
}

impl IntKind {
    pub fn as_str(self) -> &'static str {
        match self {
            IntKind::U32 => "u32",
            IntKind::U64 => "u64",
            IntKind::I64 => "i64",
        }
    }

    /// Longest canonical decimal form, sign included.
    pub fn max_rendered_bytes(self) -> usize {
        match self {
            IntKind::U32 => 10,
            IntKind::U64 => 20,
            IntKind::I64 => 20,
        }
    }
}

/// Floats render as fixed-point with six decimals and must satisfy
/// `|x| < FLOAT_MAGNITUDE_LIMIT`, so their rendered size is bounded.
pub const FLOAT_MAGNITUDE_LIMIT: f64 = 1e15;
/// `-` + 15 integer digits + `.` + 6 decimals.
pub const FLOAT_MAX_RENDERED_BYTES: usize = 23;
/// Fixed number of decimals in the canonical float form.
pub const FLOAT_DECIMALS: usize = 6;

/// The largest bound a text or list item may declare (1 MiB): anything larger
/// is not a prompt section variable but a context page.
pub const MAX_DECLARED_BOUND: usize = 1 << 20;

/// The shape of one variable, without optionality.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VarKind {
    /// Locally trusted text of at most `max` bytes.
    Text {
        max: usize,
    },
    /// Untrusted text of at most `max` bytes, rendered as an observation block.
    Observation {
        max: usize,
    },
    /// At most `count` items of at most `bytes` bytes each.
    List {
        count: usize,
        bytes: usize,
        style: ListStyle,
    },
    Integer(IntKind),
    Float,
}

impl VarKind {
    /// The Rust spelling used in front matter and in generated code.
    pub fn rust_type(&self) -> String {
        match self {
            VarKind::Text { max } => format!("BoundedText<{max}>"),
            VarKind::Observation { max } => format!("ObservationText<{max}>"),
            VarKind::List { count, bytes, .. } => format!("BoundedList<{count}, {bytes}>"),
            VarKind::Integer(kind) => kind.as_str().to_owned(),
            VarKind::Float => "f64".to_owned(),
        }
    }

    /// True when the placeholder must sit alone on its line: lists and
    /// observation blocks replace the whole line.
    pub fn is_block(&self) -> bool {
        matches!(self, VarKind::List { .. } | VarKind::Observation { .. })
    }

    /// Worst-case rendered bytes of one occurrence of this variable.
    pub fn max_rendered_bytes(&self) -> usize {
        match *self {
            VarKind::Text { max } => max,
            VarKind::Observation { max } => observation_overhead(max) + 2 * max,
            VarKind::List {
                count,
                bytes,
                style,
            } => match style {
                // "- " + item, newline-separated.
                ListStyle::Bullet => count * (bytes + 3),
                // item + ", " separators.
                ListStyle::Comma => count * (bytes + 2),
                // "N. " + item, newline-separated.
                ListStyle::Numbered => count * (bytes + decimal_len(count) + 3),
            },
            VarKind::Integer(kind) => kind.max_rendered_bytes(),
            VarKind::Float => FLOAT_MAX_RENDERED_BYTES,
        }
    }
}

/// Opening line of an observation block; see [`observation_overhead`].
pub const OBSERVATION_OPEN: &str = "[observation bytes=";
/// Closing line of an observation block.
pub const OBSERVATION_CLOSE: &str = "[/observation]";

/// Bytes an observation block adds around its escaped payload:
/// `[observation bytes=N]\n` + payload + `\n[/observation]`.
pub fn observation_overhead(max: usize) -> usize {
    OBSERVATION_OPEN.len() + decimal_len(max) + 2 + 1 + OBSERVATION_CLOSE.len()
}

pub fn decimal_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 10 {
        n /= 10;
        len += 1;
    }
    len
}

/// One declared variable of a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VarSchema {
    pub name: &'static str,
    /// `Option<T>`: absent omits the placeholder's line.
    pub optional: bool,
    pub kind: VarKind,
}

impl fmt::Display for VarSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ty = self.kind.rust_type();
        if self.optional {
            write!(f, "Option<{ty}>")?;
        } else {
            f.write_str(&ty)?;
        }
        if let VarKind::List { style, .. } = self.kind {
            write!(f, " ({})", style.as_str())?;
        }
        Ok(())
    }
}

/// Why a declared type was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeError {
    Unbounded(String),
    Unsupported(String),
    BadBound(String),
}

impl fmt::Display for TypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TypeError::Unbounded(ty) => write!(
                f,
                "unbounded type `{ty}` is not a section variable; use BoundedText<N>, \
                 ObservationText<N> or BoundedList<COUNT, BYTES>"
            ),
            TypeError::Unsupported(ty) => write!(
                f,
                "unsupported type `{ty}`; supported: BoundedText<N>, ObservationText<N>, \
                 BoundedList<COUNT, BYTES>, Option<T>, u32, u64, i64, f64"
            ),
            TypeError::BadBound(ty) => write!(
                f,
                "type `{ty}` needs bounds that are integers in 1..={MAX_DECLARED_BOUND}"
            ),
        }
    }
}

/// Parses a declared type (without its list style) into `(optional, kind)`.
/// `style` is attached by the caller, which knows whether one was declared.
pub fn parse_type(declared: &str, style: ListStyle) -> Result<(bool, VarKind), TypeError> {
    let compact: String = declared.chars().filter(|c| !c.is_whitespace()).collect();
    if let Some(inner) = strip_generic(&compact, "Option") {
        let (nested_optional, kind) = parse_type(inner, style)?;
        if nested_optional || matches!(kind, VarKind::List { .. }) {
            // An empty list already omits its line; nesting adds nothing.
            return Err(TypeError::Unsupported(declared.to_owned()));
        }
        return Ok((true, kind));
    }
    let kind = match compact.as_str() {
        "String" | "str" | "&str" | "Vec<String>" | "Vec<&str>" => {
            return Err(TypeError::Unbounded(declared.to_owned()));
        }
        "u32" => VarKind::Integer(IntKind::U32),
        "u64" => VarKind::Integer(IntKind::U64),
        "i64" => VarKind::Integer(IntKind::I64),
        "f64" => VarKind::Float,
        _ => {
            if let Some(args) = strip_generic(&compact, "BoundedText") {
                VarKind::Text {
                    max: bound(args, declared)?,
                }
            } else if let Some(args) = strip_generic(&compact, "ObservationText") {
                VarKind::Observation {
                    max: bound(args, declared)?,
                }
            } else if let Some(args) = strip_generic(&compact, "BoundedList") {
                let (count, bytes) = args
                    .split_once(',')
                    .ok_or_else(|| TypeError::BadBound(declared.to_owned()))?;
                VarKind::List {
                    count: bound(count, declared)?,
                    bytes: bound(bytes, declared)?,
                    style,
                }
            } else if compact.starts_with("Vec<") || compact.starts_with("HashMap<") {
                return Err(TypeError::Unbounded(declared.to_owned()));
            } else {
                return Err(TypeError::Unsupported(declared.to_owned()));
            }
        }
    };
    Ok((false, kind))
}

fn strip_generic<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.strip_prefix(name)?
        .strip_prefix('<')?
        .strip_suffix('>')
}

fn bound(text: &str, declared: &str) -> Result<usize, TypeError> {
    match text.parse::<usize>() {
        Ok(n) if (1..=MAX_DECLARED_BOUND).contains(&n) => Ok(n),
        _ => Err(TypeError::BadBound(declared.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_supported_vocabulary() {
        let s = ListStyle::Bullet;
        assert_eq!(
            parse_type("BoundedText<512>", s),
            Ok((false, VarKind::Text { max: 512 }))
        );
        assert_eq!(
            parse_type("Option<ObservationText<64>>", s),
            Ok((true, VarKind::Observation { max: 64 }))
        );
        assert_eq!(
            parse_type("BoundedList<64, 128>", ListStyle::Comma),
            Ok((
                false,
                VarKind::List {
                    count: 64,
                    bytes: 128,
                    style: ListStyle::Comma
                }
            ))
        );
        assert_eq!(
            parse_type("u64", s),
            Ok((false, VarKind::Integer(IntKind::U64)))
        );
    }

    #[test]
    fn refuses_unbounded_and_unknown_types() {
        let s = ListStyle::Bullet;
        assert!(matches!(
            parse_type("String", s),
            Err(TypeError::Unbounded(_))
        ));
        assert!(matches!(
            parse_type("Vec<String>", s),
            Err(TypeError::Unbounded(_))
        ));
        assert!(matches!(
            parse_type("BoundedText<0>", s),
            Err(TypeError::BadBound(_))
        ));
        assert!(matches!(
            parse_type("Option<Option<u32>>", s),
            Err(TypeError::Unsupported(_))
        ));
        assert!(matches!(
            parse_type("bool", s),
            Err(TypeError::Unsupported(_))
        ));
    }

    #[test]
    fn observation_worst_case_counts_escaping_and_frame() {
        let kind = VarKind::Observation { max: 10 };
        // "[observation bytes=10]\n" (23) + 20 escaped bytes + "\n[/observation]" (15)
        assert_eq!(kind.max_rendered_bytes(), 23 + 20 + 15);
    }
}
