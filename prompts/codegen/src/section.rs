//! Parsing and validating one section file: typed front matter plus a body of
//! prose with `{{variable}}` placeholders and nothing else.
//!
//! The front matter is a deliberately tiny YAML subset (`key: value` lines and
//! one `vars:` block of inline maps) parsed by hand so that every error can
//! name its exact line.

use std::path::Path;

use crate::canonical::prompt_hasher;
use crate::error::{CodegenError, CodegenErrors};
use crate::schema::{ListStyle, VarKind, parse_type};

/// The message role a section renders into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SectionRole {
    System,
    User,
}

impl SectionRole {
    pub fn as_str(self) -> &'static str {
        match self {
            SectionRole::System => "system",
            SectionRole::User => "user",
        }
    }
}

/// One declared variable, with the front-matter line that declared it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarSpec {
    pub name: String,
    pub optional: bool,
    pub kind: VarKind,
    pub line: usize,
}

impl VarSpec {
    /// The declared type as written in the manifest and generated code.
    pub fn display_type(&self) -> String {
        display_type(self.optional, &self.kind)
    }
}

/// `Option<BoundedText<64>>`, `BoundedList<4, 16> bullet_list`, ...: the one
/// spelling of a variable type used in manifests and schema comparisons.
pub fn display_type(optional: bool, kind: &VarKind) -> String {
    let ty = kind.rust_type();
    let ty = if optional {
        format!("Option<{ty}>")
    } else {
        ty
    };
    match kind {
        VarKind::List { style, .. } => format!("{ty} {}", style.as_str()),
        _ => ty,
    }
}

/// The schema an override or replacement must share with its base.
pub fn schema_signature<'a>(
    role: SectionRole,
    required: bool,
    priority: u16,
    vars: impl Iterator<Item = (&'a str, String)>,
) -> String {
    let vars: Vec<String> = vars.map(|(name, ty)| format!("{name}: {ty}")).collect();
    format!(
        "role={} required={required} priority={priority} vars=[{}]",
        role.as_str(),
        vars.join(", ")
    )
}

/// A parsed, internally consistent section file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionSpec {
    pub id: String,
    pub version: u32,
    pub role: SectionRole,
    pub required: bool,
    pub priority: u16,
    pub max_bytes: usize,
    pub owner: String,
    pub rationale: String,
    pub review: String,
    pub vars: Vec<VarSpec>,
    /// The body with trailing whitespace removed.
    pub body: String,
    /// File line of the body's first line.
    pub body_line: usize,
    /// Line of each front-matter key, for later cross-file errors.
    pub id_line: usize,
    pub content_hash: String,
}

impl SectionSpec {
    /// Bytes of the body with every placeholder removed.
    pub fn static_bytes(&self) -> usize {
        static_bytes(&self.body)
    }

    /// Static bytes plus every placeholder occurrence's declared worst case.
    pub fn worst_case_bytes(&self) -> usize {
        let mut total = self.static_bytes();
        for line in self.body.lines() {
            if let Ok(segments) = parse_line(line) {
                for segment in segments {
                    if let Segment::Var(name) = segment
                        && let Some(var) = self.vars.iter().find(|v| v.name == name)
                    {
                        total += var.kind.max_rendered_bytes();
                    }
                }
            }
        }
        total
    }

    /// Same variables (names, order, types), role, required flag: what an
    /// override or a replacement bundle must share with its base.
    pub fn schema_signature(&self) -> String {
        schema_signature(
            self.role,
            self.required,
            self.priority,
            self.vars
                .iter()
                .map(|v| (v.name.as_str(), v.display_type())),
        )
    }
}

/// A piece of one body line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segment<'a> {
    Text(&'a str),
    Var(&'a str),
}

/// Splits one body line into literal text and `{{name}}` placeholders.
/// Any `{{` that does not open a well-formed placeholder is an error: the body
/// grammar has no other use for braces, so a stray one is a typo.
pub fn parse_line(line: &str) -> Result<Vec<Segment<'_>>, String> {
    let mut segments = Vec::new();
    let mut rest = line;
    while let Some(open) = rest.find("{{") {
        if open > 0 {
            segments.push(Segment::Text(&rest[..open]));
        }
        let after = &rest[open + 2..];
        let close = after
            .find("}}")
            .ok_or_else(|| "unclosed `{{` placeholder".to_owned())?;
        let name = &after[..close];
        if !is_identifier(name) {
            return Err(format!(
                "malformed placeholder `{{{{{name}}}}}`: the body admits only `{{{{variable}}}}` \
                 with a snake_case name (there is no template language)"
            ));
        }
        segments.push(Segment::Var(name));
        rest = &after[close + 2..];
    }
    if !rest.is_empty() {
        segments.push(Segment::Text(rest));
    }
    Ok(segments)
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn static_bytes(body: &str) -> usize {
    body.lines()
        .map(|line| {
            parse_line(line)
                .map(|segments| {
                    segments
                        .iter()
                        .map(|s| match s {
                            Segment::Text(t) => t.len(),
                            Segment::Var(_) => 0,
                        })
                        .sum::<usize>()
                })
                .unwrap_or(line.len())
        })
        .sum::<usize>()
        + body.lines().count().saturating_sub(1)
}

/// Parses and validates one section file's text. All problems are reported,
/// each naming `path` and its line.
pub fn parse_section(path: &Path, text: &str) -> Result<SectionSpec, CodegenErrors> {
    let mut errors = Vec::new();
    let err = |line: usize, message: String| CodegenError::new(path, line, message);

    let lines: Vec<&str> = text.lines().collect();
    if lines.first().map(|l| l.trim_end()) != Some("---") {
        return Err(err(1, "a section must open with `---` front matter".into()).into());
    }
    let Some(close) = lines
        .iter()
        .skip(1)
        .position(|l| l.trim_end() == "---")
        .map(|i| i + 1)
    else {
        return Err(err(1, "front matter opened with `---` is never closed".into()).into());
    };

    let mut fields = FrontMatter::default();
    let mut in_vars = false;
    let mut refused_vars: Vec<String> = Vec::new();
    for (index, raw) in lines[1..close].iter().enumerate() {
        let line_no = index + 2;
        let line = strip_comment(raw);
        if line.trim().is_empty() {
            continue;
        }
        let indented = line.starts_with(' ') || line.starts_with('\t');
        if indented {
            if !in_vars {
                errors.push(err(
                    line_no,
                    "unexpected indented line outside `vars:`".into(),
                ));
                continue;
            }
            match parse_var(line.trim(), line_no) {
                Ok(var) => {
                    if fields.vars.iter().any(|v| v.name == var.name) {
                        errors.push(err(
                            line_no,
                            format!("variable `{}` is declared twice", var.name),
                        ));
                    } else {
                        fields.vars.push(var);
                    }
                }
                Err(message) => {
                    // Remember the name so its placeholder is not reported
                    // again as undeclared: one mistake, one error.
                    if let Some((name, _)) = line.trim().split_once(':') {
                        refused_vars.push(name.trim().to_owned());
                    }
                    errors.push(err(line_no, message));
                }
            }
            continue;
        }
        in_vars = false;
        let Some((key, value)) = line.split_once(':') else {
            errors.push(err(
                line_no,
                format!("expected `key: value`, found `{}`", line.trim()),
            ));
            continue;
        };
        let (key, value) = (key.trim(), unquote(value.trim()));
        if fields.lines.iter().any(|(k, _)| *k == key) {
            errors.push(err(line_no, format!("key `{key}` appears twice")));
            continue;
        }
        match key {
            "vars" => {
                if value.is_empty() {
                    in_vars = true;
                } else if value != "{}" {
                    errors.push(err(
                        line_no,
                        "`vars:` takes an indented block, or `{}` for none".into(),
                    ));
                }
            }
            "id" | "version" | "role" | "required" | "priority" | "max_bytes" | "owner"
            | "rationale" | "review" => fields.values.push((key_name(key), value.to_owned())),
            _ => {
                errors.push(err(line_no, format!("unknown front-matter key `{key}`")));
                continue;
            }
        }
        fields.lines.push((key_name(key), line_no));
    }

    let get = |key: &str| -> Option<(&str, usize)> {
        let value = fields.values.iter().find(|(k, _)| *k == key)?;
        let line = fields.lines.iter().find(|(k, _)| *k == key)?.1;
        Some((value.1.as_str(), line))
    };
    let mut require = |key: &'static str| -> Option<(String, usize)> {
        match get(key) {
            Some((value, line)) if !value.is_empty() => Some((value.to_owned(), line)),
            Some((_, line)) => {
                errors.push(err(line, format!("`{key}` is empty")));
                None
            }
            None => {
                errors.push(err(1, format!("missing front-matter key `{key}`")));
                None
            }
        }
    };

    let id = require("id");
    let version = require("version");
    let role = require("role");
    let required = require("required");
    let priority = require("priority");
    let max_bytes = require("max_bytes");
    let owner = require("owner");
    let rationale = require("rationale");
    let review = require("review");

    let id = id.and_then(|(v, line)| {
        let ok = v.split_once('/').is_some_and(|(stage, name)| {
            is_identifier(stage) && is_identifier(name) && !name.contains('/')
        });
        if ok {
            Some((v, line))
        } else {
            errors.push(err(
                line,
                format!("malformed id `{v}`: expected `stage/section_name`"),
            ));
            None
        }
    });
    let version = version.and_then(|(v, line)| match v.parse::<u32>() {
        Ok(n) if n >= 1 => Some(n),
        _ => {
            errors.push(err(
                line,
                format!("malformed version `{v}`: expected an integer >= 1"),
            ));
            None
        }
    });
    let role = role.and_then(|(v, line)| match v.as_str() {
        "system" => Some(SectionRole::System),
        "user" => Some(SectionRole::User),
        _ => {
            errors.push(err(
                line,
                format!("malformed role `{v}`: expected `system` or `user`"),
            ));
            None
        }
    });
    let required = required.and_then(|(v, line)| match v.as_str() {
        "true" => Some(true),
        "false" => Some(false),
        _ => {
            errors.push(err(
                line,
                format!("malformed required `{v}`: expected `true` or `false`"),
            ));
            None
        }
    });
    let priority = priority.and_then(|(v, line)| match v.parse::<u16>() {
        Ok(n) => Some(n),
        Err(_) => {
            errors.push(err(
                line,
                format!("malformed priority `{v}`: expected an integer 0..=65535"),
            ));
            None
        }
    });
    let max_bytes = max_bytes.and_then(|(v, line)| match v.parse::<usize>() {
        Ok(n) if n >= 1 => Some((n, line)),
        _ => {
            errors.push(err(
                line,
                format!("malformed max_bytes `{v}`: expected an integer >= 1"),
            ));
            None
        }
    });
    let review = review.and_then(|(v, line)| {
        if is_iso_date(&v) {
            Some(v)
        } else {
            errors.push(err(
                line,
                format!("malformed review date `{v}`: expected YYYY-MM-DD"),
            ));
            None
        }
    });

    // The body: everything after the closing `---`, leading blank lines and
    // trailing whitespace removed.
    let mut body_start = close + 1;
    while body_start < lines.len() && lines[body_start].trim().is_empty() {
        body_start += 1;
    }
    let body = lines[body_start.min(lines.len())..].join("\n");
    let body = body.trim_end().to_owned();
    let body_line = body_start + 1;
    if body.is_empty() {
        errors.push(err(body_line, "the section body is empty".into()));
    }

    let mut used = Vec::new();
    for (offset, line) in body.lines().enumerate() {
        let line_no = body_line + offset;
        let segments = match parse_line(line) {
            Ok(segments) => segments,
            Err(message) => {
                errors.push(err(line_no, message));
                continue;
            }
        };
        let alone = segments.iter().all(|s| {
            matches!(s, Segment::Var(_)) || matches!(s, Segment::Text(t) if t.trim().is_empty())
        }) && segments
            .iter()
            .filter(|s| matches!(s, Segment::Var(_)))
            .count()
            == 1;
        for segment in &segments {
            let Segment::Var(name) = segment else {
                continue;
            };
            used.push(name.to_string());
            match fields.vars.iter().find(|v| v.name == *name) {
                None if refused_vars.iter().any(|r| r == name) => {}
                None => errors.push(err(
                    line_no,
                    format!("undeclared placeholder `{{{{{name}}}}}`: declare it under `vars:`"),
                )),
                Some(var) if (var.optional || var.kind.is_block()) && !alone => {
                    let why = if var.optional {
                        "an optional placeholder"
                    } else if matches!(var.kind, VarKind::List { .. }) {
                        "a list placeholder"
                    } else {
                        "an observation placeholder"
                    };
                    errors.push(err(
                        line_no,
                        format!(
                            "{why} `{{{{{name}}}}}` must be the only content on its line, \
                             because absence or block rendering replaces the whole line"
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
    }
    for var in &fields.vars {
        if !used.contains(&var.name) {
            errors.push(err(
                var.line,
                format!(
                    "orphan variable `{}` is declared but never used in the body",
                    var.name
                ),
            ));
        }
    }
    if let Some((limit, line)) = max_bytes {
        let size = static_bytes(&body);
        if size > limit {
            errors.push(err(
                line,
                format!("static body is {size} bytes, over max_bytes {limit}"),
            ));
        }
    }

    if !errors.is_empty() {
        errors.sort_by_key(|e| e.line);
        return Err(CodegenErrors(errors));
    }
    let (id, id_line) = id.expect("validated");
    let mut spec = SectionSpec {
        id,
        version: version.expect("validated"),
        role: role.expect("validated"),
        required: required.expect("validated"),
        priority: priority.expect("validated"),
        max_bytes: max_bytes.expect("validated").0,
        owner: owner.expect("validated").0,
        rationale: rationale.expect("validated").0,
        review: review.expect("validated"),
        vars: fields.vars,
        body,
        body_line,
        id_line,
        content_hash: String::new(),
    };
    spec.content_hash = content_hash(&spec);
    Ok(spec)
}

/// The identity of a section's reviewed content. Owner, rationale and review
/// date are bookkeeping and deliberately excluded: they change the manifest,
/// never a compiled program.
pub fn content_hash(spec: &SectionSpec) -> String {
    let mut hasher = prompt_hasher("section-content");
    hasher
        .str(&spec.id)
        .u64(u64::from(spec.version))
        .str(spec.role.as_str())
        .bool(spec.required)
        .u64(u64::from(spec.priority))
        .u64(spec.max_bytes as u64)
        .u64(spec.vars.len() as u64);
    for var in &spec.vars {
        hasher.str(&var.name).str(&var.display_type());
    }
    hasher.str(&spec.body);
    hasher.finish().to_prefixed()
}

#[derive(Default)]
struct FrontMatter {
    values: Vec<(&'static str, String)>,
    lines: Vec<(&'static str, usize)>,
    vars: Vec<VarSpec>,
}

fn key_name(key: &str) -> &'static str {
    match key {
        "id" => "id",
        "version" => "version",
        "role" => "role",
        "required" => "required",
        "priority" => "priority",
        "max_bytes" => "max_bytes",
        "owner" => "owner",
        "rationale" => "rationale",
        "review" => "review",
        _ => "vars",
    }
}

/// Removes a `#` comment that is not inside double quotes.
fn strip_comment(line: &str) -> &str {
    let mut in_quotes = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => in_quotes = !in_quotes,
            '#' if !in_quotes => return line[..i].trim_end(),
            _ => {}
        }
    }
    line.trim_end()
}

fn unquote(value: &str) -> &str {
    value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value)
}

fn is_iso_date(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

/// `name: { type: "BoundedList<64,128>", style: bullet_list }`
fn parse_var(line: &str, line_no: usize) -> Result<VarSpec, String> {
    let (name, map) = line
        .split_once(':')
        .ok_or_else(|| format!("expected `name: {{ type: \"...\" }}`, found `{line}`"))?;
    let name = name.trim();
    if !is_identifier(name) {
        return Err(format!("variable name `{name}` is not snake_case"));
    }
    let inner = map
        .trim()
        .strip_prefix('{')
        .and_then(|m| m.strip_suffix('}'))
        .ok_or_else(|| format!("variable `{name}` must be declared as `{{ type: \"...\" }}`"))?;
    let mut ty = None;
    let mut style = None;
    for entry in split_top_level(inner) {
        let (key, value) = entry
            .split_once(':')
            .ok_or_else(|| format!("variable `{name}`: expected `key: value`, found `{entry}`"))?;
        let value = unquote(value.trim()).to_owned();
        match key.trim() {
            "type" => ty = Some(value),
            "style" => style = Some(value),
            other => return Err(format!("variable `{name}`: unknown attribute `{other}`")),
        }
    }
    let ty = ty.ok_or_else(|| format!("variable `{name}` has no `type`"))?;
    let parsed_style = match &style {
        Some(s) => Some(ListStyle::parse(s).ok_or_else(|| {
            format!(
                "variable `{name}`: unknown list style `{s}`; \
                 expected bullet_list, comma_list or numbered_list"
            )
        })?),
        None => None,
    };
    let (optional, kind) = parse_type(&ty, parsed_style.unwrap_or(ListStyle::Bullet))
        .map_err(|e| format!("variable `{name}`: {e}"))?;
    match (kind, parsed_style) {
        (VarKind::List { .. }, None) => Err(format!(
            "variable `{name}`: a BoundedList needs `style: bullet_list|comma_list|numbered_list`"
        )),
        (VarKind::List { .. }, Some(_)) | (_, None) => Ok(VarSpec {
            name: name.to_owned(),
            optional,
            kind,
            line: line_no,
        }),
        (_, Some(_)) => Err(format!(
            "variable `{name}`: `style` applies only to BoundedList"
        )),
    }
}

/// Splits on commas outside quotes and angle brackets.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut in_quotes, mut start) = (0i32, false, 0);
    for (i, c) in text.char_indices() {
        match c {
            '"' => in_quotes = !in_quotes,
            '<' if !in_quotes => depth += 1,
            '>' if !in_quotes => depth -= 1,
            ',' if !in_quotes && depth == 0 => {
                parts.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = text[start..].trim();
    if !last.is_empty() {
        parts.push(last);
    }
    parts
}
