//! Compile-on-write: a bundle's content as a value, its canonical bytes and
//! checksum, and every validation a write must pass before anything is
//! stored.
//!
//! A bundle directory holds `bundle.toml` (its id, a description, what it
//! requires of the run that attaches it) and `*.md` sections in the
//! library's own format. [`Draft::compile`] applies the build-time codegen's
//! checks at run time (front matter, placeholders, a compiled section id,
//! the compiled schema, the owning library) plus the store's bounds. This
//! module is pure apart from [`Draft::read_dir`]; it never writes, and it
//! never accepts a key that would give a bundle authority over anything but
//! prompt text.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use trellis_prompts::SectionSchema;
use trellis_prompts::bundles::{SectionSpec, validate_sections};

use super::error::BundleError;
use crate::digest::CanonicalHasher;

/// The manifest file of a bundle directory.
pub const MANIFEST_FILE: &str = "bundle.toml";
/// At most this many sections in one bundle (the library has fewer).
pub const MAX_SECTIONS: usize = 64;
/// At most this many bytes of section text in one bundle.
pub const MAX_BUNDLE_BYTES: usize = 256 << 10;
/// At most this many bytes of description, or of a write's reason.
pub const MAX_NOTE_BYTES: usize = 1024;
/// At most this many bytes of a bundle id.
pub const MAX_ID_BYTES: usize = 64;

/// Manifest keys that name a workspace setting: a bundle replaces text and
/// can never change them, so each gets its own refusal, not "unknown key".
const AUTHORITY_KEYS: &[&str] = &[
    "stages",
    "gate",
    "budget",
    "budgets",
    "tools",
    "models",
    "verification",
    "exploration",
    "build",
    "prompts",
    "policy",
];

/// What a bundle says about itself.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub id: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub requires: Requires,
}

/// What the consuming run must already have for the bundle's text to make
/// sense. Checked when a repair attaches the bundle; never granted by it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requires {
    /// Governed tools the text tells the model to use.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Stages the text assumes are required (e.g. `test`).
    #[serde(default)]
    pub stages: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SectionText {
    /// The file name inside the bundle directory.
    file: String,
    text: String,
}

/// A bundle's whole content, as written and as stored: the manifest and
/// the section texts sorted by file name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Draft {
    pub manifest: Manifest,
    sections: Vec<SectionText>,
}

/// A draft that compiled: each section with the compiled section it replaces.
#[derive(Debug)]
pub struct Compiled {
    pub sections: Vec<(&'static SectionSchema, SectionSpec)>,
}

impl Draft {
    /// Reads a bundle directory: `bundle.toml` and every `*.md` beside it.
    /// The directory is flat; a subdirectory or a link is refused, and no
    /// file is read past the section bound.
    pub fn read_dir(dir: &Path) -> Result<Draft, BundleError> {
        let read_error = |path: &Path, source| BundleError::Read {
            path: path.to_path_buf(),
            source,
        };
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| read_error(dir, e))? {
            let entry = entry.map_err(|e| read_error(dir, e))?;
            let kind = entry
                .file_type()
                .map_err(|e| read_error(&entry.path(), e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if kind.is_symlink() || kind.is_dir() {
                return Err(BundleError::Usage(format!(
                    "{}: a bundle directory holds only `{MANIFEST_FILE}` and `*.md` files, \
                     not a {}",
                    entry.path().display(),
                    if kind.is_dir() { "directory" } else { "link" }
                )));
            }
            if name == MANIFEST_FILE || name.ends_with(".md") {
                names.push(name);
            }
        }
        names.sort();
        let read = |name: &str| -> Result<Option<String>, BundleError> {
            let path = dir.join(name);
            trellis_prompts::files::read_regular(&path, MAX_BUNDLE_BYTES as u64 + 1)
                .map_err(|reason| read_error(&path, std::io::Error::other(reason)))
        };
        let manifest_text = read(MANIFEST_FILE)?.ok_or_else(|| {
            BundleError::Usage(format!(
                "{}: no `{MANIFEST_FILE}`; a bundle names its id there (`id = \"terse\"`)",
                dir.display()
            ))
        })?;
        let manifest = parse_manifest(&manifest_text).map_err(|e| {
            BundleError::Usage(format!("{}: {e}", dir.join(MANIFEST_FILE).display()))
        })?;
        let mut sections = Vec::new();
        for name in names.into_iter().filter(|n| n != MANIFEST_FILE) {
            let text = read(&name)?.unwrap_or_default();
            sections.push(SectionText { file: name, text });
        }
        Ok(Draft { manifest, sections })
    }

    /// The canonical bytes stored and hashed: JSON with the sections sorted.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a draft serializes")
    }

    /// Decodes stored bytes (strictly: an unknown field is an error).
    pub fn decode(bytes: &[u8]) -> Result<Draft, String> {
        serde_json::from_slice(bytes).map_err(|e| e.to_string())
    }

    /// The content address of the canonical bytes, `sha256:…`.
    pub fn checksum(&self) -> String {
        checksum_of(&self.encode())
    }

    /// The section files and texts, sorted by file name.
    pub fn sections(&self) -> impl Iterator<Item = (&str, &str)> {
        self.sections
            .iter()
            .map(|s| (s.file.as_str(), s.text.as_str()))
    }

    /// Every check a write must pass, with `id` the id it is written under.
    /// All problems are reported together.
    pub fn compile(&self, id: &str) -> Result<Compiled, BundleError> {
        check_id(id)?;
        if self.manifest.id != id {
            return Err(BundleError::Namespace(format!(
                "the bundle declares id `{}` but is written as `{id}`; one bundle is one id",
                self.manifest.id
            )));
        }
        let bound = |what, found, limit| {
            if found > limit {
                Err(BundleError::Bound {
                    id: id.to_owned(),
                    what,
                    found,
                    limit,
                })
            } else {
                Ok(())
            }
        };
        bound("the section count", self.sections.len(), MAX_SECTIONS)?;
        let bytes = self.sections.iter().map(|s| s.text.len()).sum();
        bound("the section text (bytes)", bytes, MAX_BUNDLE_BYTES)?;
        bound(
            "the description (bytes)",
            self.manifest.description.len(),
            MAX_NOTE_BYTES,
        )?;
        let mut problems = Vec::new();
        if self.sections.is_empty() {
            problems.push("it has no `*.md` section; a bundle replaces at least one".to_owned());
        }
        for tool in &self.manifest.requires.tools {
            if !trellis_core::vocabulary::GOVERNED_TOOLS.contains(&tool.as_str()) {
                problems.push(format!(
                    "{MANIFEST_FILE}: requires unknown tool `{tool}` (known: {})",
                    trellis_core::vocabulary::GOVERNED_TOOLS.join(", ")
                ));
            }
        }
        let files = self
            .sections
            .iter()
            .map(|s| (PathBuf::from(&s.file), s.text.clone()))
            .collect();
        let accepted = match validate_sections(files) {
            Ok(accepted) => accepted,
            Err(errors) => {
                problems.extend(errors.iter().map(|e| e.to_string()));
                Vec::new()
            }
        };
        let mut sections = Vec::new();
        for (file, schema, spec) in accepted {
            // The section's stage belongs to one library; a bundle cannot
            // claim another owner for it.
            if spec.owner != schema.owner {
                problems.push(format!(
                    "{}:{}: section `{}` is owned by `{}`, not `{}`",
                    file.display(),
                    spec.id_line,
                    schema.id,
                    schema.owner,
                    spec.owner
                ));
                continue;
            }
            sections.push((schema, spec));
        }
        if problems.is_empty() {
            Ok(Compiled { sections })
        } else {
            Err(BundleError::Compile {
                id: id.to_owned(),
                problems,
            })
        }
    }
}

/// The content address of stored bytes.
pub fn checksum_of(bytes: &[u8]) -> String {
    CanonicalHasher::new("trellis.bundle.v1")
        .bytes(bytes)
        .finish()
        .to_prefixed()
}

/// A bundle id: a lowercase letter, then lowercase letters, digits, `-` or
/// `_`. Never `@` (refs use it) and never a path.
pub fn check_id(id: &str) -> Result<(), BundleError> {
    let valid = id.len() <= MAX_ID_BYTES
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if valid {
        Ok(())
    } else {
        Err(BundleError::Namespace(format!(
            "`{id}` is not a bundle id: a lowercase letter, then up to {} lowercase letters, \
             digits, `-` or `_`",
            MAX_ID_BYTES - 1
        )))
    }
}

/// Parses `bundle.toml`, refusing by name any key that would be authority.
fn parse_manifest(text: &str) -> Result<Manifest, String> {
    let table: toml::Table = toml::from_str(text).map_err(|e| e.message().to_owned())?;
    for key in table.keys() {
        if AUTHORITY_KEYS.contains(&key.as_str()) {
            return Err(format!(
                "`{key}` is a workspace setting (trellis.toml); a bundle only replaces prompt \
                 text and cannot grant a tool or change a gate, budget or stage"
            ));
        }
    }
    if let Some(toml::Value::Table(requires)) = table.get("requires") {
        for key in requires.keys() {
            if key != "tools" && key != "stages" {
                return Err(format!(
                    "`requires.{key}` is not a requirement a bundle can declare (only \
                     `requires.tools` and `requires.stages`)"
                ));
            }
        }
    }
    toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| e.message().to_owned())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A valid replacement of `branch_correct/role` saying `line`.
    pub(crate) fn role_section(line: &str) -> String {
        format!(
            "---\nid: branch_correct/role\nversion: 1\nrole: system\nrequired: true\n\
             priority: 100\nmax_bytes: 1024\nowner: coding\nrationale: \"test\"\n\
             review: 2026-11-30\nvars: {{}}\n---\n{line}\n"
        )
    }

    pub(crate) fn draft(id: &str, text: &str) -> Draft {
        Draft {
            manifest: Manifest {
                id: id.to_owned(),
                ..Manifest::default()
            },
            sections: vec![SectionText {
                file: "10_role.md".into(),
                text: text.to_owned(),
            }],
        }
    }

    #[test]
    fn a_valid_draft_compiles_and_its_checksum_follows_its_content() {
        let a = draft("terse", &role_section("Be brief."));
        let compiled = a.compile("terse").unwrap();
        assert_eq!(compiled.sections[0].0.id, "branch_correct/role");
        let b = draft("terse", &role_section("Be briefer."));
        assert_ne!(a.checksum(), b.checksum());
        assert_eq!(Draft::decode(&a.encode()).unwrap(), a);
    }

    #[test]
    fn unknown_sections_broken_schemas_and_foreign_owners_do_not_compile() {
        let unknown = role_section("x").replace("branch_correct/role", "branch_correct/nope");
        let schema = role_section("x").replace("priority: 100", "priority: 1");
        let owner = role_section("x").replace("owner: coding", "owner: platform");
        let placeholder = role_section("{{not_a_var}}");
        for text in [unknown, schema, owner, placeholder] {
            let error = draft("terse", &text).compile("terse").unwrap_err();
            assert!(matches!(error, BundleError::Compile { .. }), "{error}");
        }
    }

    #[test]
    fn a_draft_declaring_another_id_or_an_invalid_id_is_refused() {
        let d = draft("other", &role_section("x"));
        assert!(matches!(d.compile("terse"), Err(BundleError::Namespace(_))));
        for bad in ["Terse", "a@1", "../x", "", "9lives"] {
            let d = draft(bad, &role_section("x"));
            assert!(
                matches!(d.compile(bad), Err(BundleError::Namespace(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_manifest_naming_a_gate_or_stage_setting_is_refused_by_name() {
        for (text, key) in [
            ("id = \"t\"\n[stages]\nrequired = []\n", "stages"),
            ("id = \"t\"\ngate = { rho = 0 }\n", "gate"),
            ("id = \"t\"\ntools = [\"write_file\"]\n", "tools"),
        ] {
            let error = parse_manifest(text).unwrap_err();
            assert!(
                error.contains(&format!("`{key}` is a workspace setting")),
                "{error}"
            );
        }
        let error = parse_manifest("id = \"t\"\n[requires]\nbudget = 9\n").unwrap_err();
        assert!(error.contains("requires.budget"), "{error}");
        let ok = parse_manifest("id = \"t\"\n[requires]\ntools = [\"run_tests\"]\n").unwrap();
        assert_eq!(ok.requires.tools, ["run_tests"]);
    }

    #[test]
    fn bounds_refuse_before_anything_else() {
        let big = role_section(&"x".repeat(MAX_BUNDLE_BYTES));
        let error = draft("terse", &big).compile("terse").unwrap_err();
        assert!(matches!(error, BundleError::Bound { .. }), "{error}");
    }
}
