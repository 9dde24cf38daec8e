//! Loading a whole section library: `stages.toml` declares every stage and
//! its base sections; `<library>/<stage>/NN_name[.family[@model]].md` files
//! supply them. The library is valid only if every declared stage has all of
//! its base sections, every file belongs to a declaration, and every override
//! shares its base's schema.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{CodegenError, CodegenErrors};
use crate::section::{SectionSpec, parse_section};

/// Model families that may carry an override file. `other` is a family too:
/// it composes from base sections like every family.
pub const KNOWN_FAMILIES: &[&str] = &[
    "anthropic",
    "openai",
    "google",
    "mistral",
    "qwen",
    "deepseek",
    "llama",
    "other",
];

/// File name of the stage declarations inside a library root.
pub const STAGES_FILE: &str = "stages.toml";

/// What a section file replaces on which routes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OverrideTarget {
    Base,
    Family(String),
    Model { family: String, model: String },
}

impl OverrideTarget {
    /// The file-name suffix spelling: empty, `family`, or `family@model`.
    pub fn suffix(&self) -> String {
        match self {
            OverrideTarget::Base => String::new(),
            OverrideTarget::Family(family) => family.clone(),
            OverrideTarget::Model { family, model } => format!("{family}@{model}"),
        }
    }
}

/// One section file with its location in the library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionFile {
    /// Path relative to the library root, with `/` separators.
    pub rel_path: String,
    pub path: PathBuf,
    pub library: String,
    pub stage: String,
    /// The `NN` file-name prefix: the section's position in its stage.
    pub order: u32,
    pub name: String,
    pub target: OverrideTarget,
    pub spec: SectionSpec,
}

/// One declared stage: its library and ordered base section names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageDecl {
    pub library: String,
    pub stage: String,
    pub sections: Vec<String>,
    pub line: usize,
}

/// A validated library.
#[derive(Debug, Clone)]
pub struct Library {
    pub root: PathBuf,
    pub stages: Vec<StageDecl>,
    /// Sorted by library, stage, order, then base before overrides.
    pub sections: Vec<SectionFile>,
}

impl Library {
    pub fn base(&self, id: &str) -> Option<&SectionFile> {
        self.sections
            .iter()
            .find(|s| s.spec.id == id && s.target == OverrideTarget::Base)
    }

    pub fn overrides<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a SectionFile> + 'a {
        self.sections
            .iter()
            .filter(move |s| s.spec.id == id && s.target != OverrideTarget::Base)
    }
}

/// Loads and validates the library rooted at `root`.
pub fn load_library(root: &Path) -> Result<Library, CodegenErrors> {
    let stages_path = root.join(STAGES_FILE);
    let stages_text = fs::read_to_string(&stages_path).map_err(|e| {
        CodegenError::new(
            &stages_path,
            0,
            format!("cannot read stage declarations: {e}"),
        )
    })?;
    let stages = parse_stages(&stages_path, &stages_text)?;

    let mut errors = Vec::new();
    let mut sections = Vec::new();
    // Files that exist but failed to parse: already reported, so their
    // stage is not also reported as lacking them.
    let mut unreadable: Vec<(String, String)> = Vec::new();
    let mut libraries: Vec<&str> = stages.iter().map(|s| s.library.as_str()).collect();
    libraries.dedup();
    for library in libraries {
        let library_dir = root.join(library);
        for stage_dir in sorted_entries(&library_dir, &mut errors) {
            let stage = file_name(&stage_dir);
            if !stage_dir.is_dir() {
                continue;
            }
            if !stages
                .iter()
                .any(|s| s.library == library && s.stage == stage)
            {
                errors.push(CodegenError::new(
                    &stage_dir,
                    0,
                    format!("stage directory `{library}/{stage}` is not declared in {STAGES_FILE}"),
                ));
                continue;
            }
            for file in sorted_entries(&stage_dir, &mut errors) {
                if file.extension().and_then(|e| e.to_str()) != Some("md") {
                    continue;
                }
                match load_file(root, library, &stage, &file) {
                    Ok(section) => sections.push(section),
                    Err(mut more) => {
                        errors.append(&mut more.0);
                        unreadable.push((stage.clone(), file_name(&file)));
                    }
                }
            }
        }
    }

    check_library(&stages_path, &stages, &sections, &unreadable, &mut errors);
    if !errors.is_empty() {
        return Err(CodegenErrors(errors));
    }
    sections.sort_by(|a, b| {
        (&a.library, &a.stage, a.order, &a.target).cmp(&(&b.library, &b.stage, b.order, &b.target))
    });
    Ok(Library {
        root: root.to_path_buf(),
        stages,
        sections,
    })
}

/// Splits `NN_name[.family[@model]].md`.
pub fn parse_file_name(file: &str) -> Result<(u32, String, OverrideTarget), String> {
    let stem = file
        .strip_suffix(".md")
        .ok_or_else(|| "section files end in `.md`".to_owned())?;
    let (base, suffix) = match stem.split_once('.') {
        Some((base, suffix)) => (base, Some(suffix)),
        None => (stem, None),
    };
    let bad_name = || format!("section file name `{file}` is not `NN_name[.family[@model]].md`");
    let (order, name) = base.split_once('_').ok_or_else(bad_name)?;
    if order.len() != 2 || !order.bytes().all(|b| b.is_ascii_digit()) || name.is_empty() {
        return Err(bad_name());
    }
    let target = match suffix {
        None => OverrideTarget::Base,
        Some(suffix) => {
            let (family, model) = match suffix.split_once('@') {
                Some((family, model)) => (family, Some(model)),
                None => (suffix, None),
            };
            if !KNOWN_FAMILIES.contains(&family) {
                return Err(format!(
                    "unknown model family `{family}` in `{file}`; known: {}",
                    KNOWN_FAMILIES.join(", ")
                ));
            }
            match model {
                Some("") => return Err(bad_name()),
                Some(model) => OverrideTarget::Model {
                    family: family.to_owned(),
                    model: model.to_owned(),
                },
                None => OverrideTarget::Family(family.to_owned()),
            }
        }
    };
    Ok((
        order.parse().map_err(|_| bad_name())?,
        name.to_owned(),
        target,
    ))
}

fn load_file(
    root: &Path,
    library: &str,
    stage: &str,
    path: &Path,
) -> Result<SectionFile, CodegenErrors> {
    let file = file_name(path);
    let (order, name, target) =
        parse_file_name(&file).map_err(|message| CodegenError::new(path, 0, message))?;
    let text = fs::read_to_string(path)
        .map_err(|e| CodegenError::new(path, 0, format!("cannot read section: {e}")))?;
    let spec = parse_section(path, &text)?;
    let expected = format!("{stage}/{name}");
    if spec.id != expected {
        return Err(CodegenError::new(
            path,
            spec.id_line,
            format!(
                "id `{}` does not match its location; expected `{expected}`",
                spec.id
            ),
        )
        .into());
    }
    Ok(SectionFile {
        rel_path: format!("{library}/{stage}/{file}"),
        path: root.join(library).join(stage).join(&file),
        library: library.to_owned(),
        stage: stage.to_owned(),
        order,
        name,
        target,
        spec,
    })
}

fn check_library(
    stages_path: &Path,
    stages: &[StageDecl],
    sections: &[SectionFile],
    unreadable: &[(String, String)],
    errors: &mut Vec<CodegenError>,
) {
    for decl in stages {
        for name in &decl.sections {
            let failed_to_parse = unreadable.iter().any(|(stage, file)| {
                *stage == decl.stage
                    && parse_file_name(file)
                        .is_ok_and(|(_, n, t)| n == *name && t == OverrideTarget::Base)
            });
            if failed_to_parse {
                continue;
            }
            let bases = sections
                .iter()
                .filter(|s| {
                    s.stage == decl.stage && s.name == *name && s.target == OverrideTarget::Base
                })
                .count();
            if bases == 0 {
                errors.push(CodegenError::new(
                    stages_path,
                    decl.line,
                    format!(
                        "stage `{}` declares section `{name}` but has no base section file \
                         `{}/{}/NN_{name}.md`",
                        decl.stage, decl.library, decl.stage
                    ),
                ));
            }
        }
    }
    for section in sections {
        let declared = stages
            .iter()
            .any(|d| d.stage == section.stage && d.sections.contains(&section.name));
        if !declared {
            errors.push(CodegenError::new(
                &section.path,
                0,
                format!(
                    "section `{}` is not declared for stage `{}` in {STAGES_FILE}",
                    section.name, section.stage
                ),
            ));
            continue;
        }
        let same: Vec<&SectionFile> = sections
            .iter()
            .filter(|s| s.spec.id == section.spec.id && s.target == section.target)
            .collect();
        if same.len() > 1 && same[0].path != section.path {
            errors.push(CodegenError::new(
                &section.path,
                0,
                format!(
                    "duplicate section `{}` (also {})",
                    section.spec.id, same[0].rel_path
                ),
            ));
        }
        if section.target == OverrideTarget::Base {
            continue;
        }
        let Some(base) = sections
            .iter()
            .find(|s| s.spec.id == section.spec.id && s.target == OverrideTarget::Base)
        else {
            // Reported as a missing base of the declared stage above.
            continue;
        };
        if base.order != section.order {
            errors.push(CodegenError::new(
                &section.path,
                0,
                format!(
                    "override position {:02} differs from its base {}",
                    section.order, base.rel_path
                ),
            ));
        }
        if base.spec.schema_signature() != section.spec.schema_signature() {
            errors.push(CodegenError::new(
                &section.path,
                section.spec.id_line,
                format!(
                    "override must keep its base's schema: base has `{}`, override has `{}`",
                    base.spec.schema_signature(),
                    section.spec.schema_signature()
                ),
            ));
        }
    }
}

/// `[library]` tables of `stage = ["section", ...]` arrays.
fn parse_stages(path: &Path, text: &str) -> Result<Vec<StageDecl>, CodegenErrors> {
    let table: BTreeMap<String, BTreeMap<String, Vec<String>>> = toml::from_str(text)
        .map_err(|e| CodegenError::new(path, 0, format!("malformed stage declarations: {e}")))?;
    let mut stages = Vec::new();
    let mut errors = Vec::new();
    for (library, declared) in table {
        for (stage, sections) in declared {
            let line = declaration_line(text, &library, &stage);
            if sections.is_empty() {
                errors.push(CodegenError::new(
                    path,
                    line,
                    format!("stage `{stage}` declares no sections"),
                ));
            }
            if stages.iter().any(|s: &StageDecl| s.stage == stage) {
                errors.push(CodegenError::new(
                    path,
                    line,
                    format!("stage `{stage}` is declared twice"),
                ));
            }
            stages.push(StageDecl {
                library: library.clone(),
                stage,
                sections,
                line,
            });
        }
    }
    if errors.is_empty() {
        Ok(stages)
    } else {
        Err(CodegenErrors(errors))
    }
}

fn declaration_line(text: &str, library: &str, stage: &str) -> usize {
    let mut in_library = false;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with('[') {
            in_library = line == format!("[{library}]");
        } else if in_library
            && line
                .strip_prefix(stage)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        {
            return i + 1;
        }
    }
    0
}

fn sorted_entries(dir: &Path, errors: &mut Vec<CodegenError>) -> Vec<PathBuf> {
    match fs::read_dir(dir) {
        Ok(entries) => {
            let mut paths: Vec<PathBuf> =
                entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            paths.sort();
            paths
        }
        Err(e) => {
            errors.push(CodegenError::new(
                dir,
                0,
                format!("cannot read directory: {e}"),
            ));
            Vec::new()
        }
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
