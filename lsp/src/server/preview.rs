//! What a verified repair would do, for a person to read before applying.
//!
//! Two views of the same `FileChange`s: a unified diff over every changed
//! file (the Preview command writes it to `.trellis/previews/<id>.diff`),
//! and one file's repaired text (the `trellis/branchFile` request, which the
//! VS Code client shows side by side with the current file).

use std::fmt::Write as _;

use similar::TextDiff;
use trellis_engine::change::FileChange;

use super::protocol::{BranchChange, BranchFileResult};

/// Where previews live, inside `.trellis/`.
pub const PREVIEW_DIR: &str = "previews";

/// A unified diff of `changes`; `old_text` gives each changed path's text
/// as the repair started from it.
pub fn unified_diff(
    repair_id: &str,
    summary: &str,
    changes: &[FileChange],
    old_text: &mut dyn FnMut(&str) -> Option<String>,
) -> String {
    let mut out = String::new();
    // `writeln!` into a String cannot fail.
    let _ = writeln!(out, "# Trellis verified repair {repair_id}: {summary}");
    for change in changes {
        let path = change.path();
        let (old, new, from, to) = match change {
            FileChange::Modify { new_text, .. } => (
                old_text(path).unwrap_or_default(),
                new_text.clone(),
                format!("a/{path}"),
                format!("b/{path}"),
            ),
            FileChange::Create { text, .. } => (
                String::new(),
                text.clone(),
                "/dev/null".to_owned(),
                format!("b/{path}"),
            ),
            FileChange::Delete { .. } => (
                old_text(path).unwrap_or_default(),
                String::new(),
                format!("a/{path}"),
                "/dev/null".to_owned(),
            ),
        };
        let _ = writeln!(out, "diff --git a/{path} b/{path}");
        let diff = TextDiff::from_lines(&old, &new);
        let _ = write!(
            out,
            "{}",
            diff.unified_diff().context_radius(3).header(&from, &to)
        );
    }
    out
}

/// The file name of a repair's preview inside [`PREVIEW_DIR`].
pub fn preview_file_name(repair_id: &str) -> String {
    let safe: String = repair_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.diff")
}

/// `path`'s text after the repair, when the repair changed it; `None` when
/// the repair left it alone (its text is then whatever the view holds).
pub fn repaired_file(changes: &[FileChange], path: &str) -> Option<BranchFileResult> {
    let change = changes.iter().find(|c| c.path() == path)?;
    Some(match change {
        FileChange::Modify { new_text, .. } => BranchFileResult {
            text: new_text.clone(),
            change: BranchChange::Modify,
        },
        FileChange::Create { text, .. } => BranchFileResult {
            text: text.clone(),
            change: BranchChange::Create,
        },
        FileChange::Delete { .. } => BranchFileResult {
            text: String::new(),
            change: BranchChange::Delete,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use trellis_engine::change::TextEdit;
    use trellis_engine::digest::Digest;

    fn changes() -> Vec<FileChange> {
        vec![
            FileChange::Modify {
                path: trellis_engine::WorkspacePath::new("src/main.rs").unwrap(),
                old: Digest::ZERO,
                new: Digest::ZERO,
                edits: vec![TextEdit {
                    byte_start: 4,
                    byte_end: 4,
                    new_text: "mut ".into(),
                }],
                new_text: "let mut x = 1;\nx = 2;\n".into(),
            },
            FileChange::Create {
                path: trellis_engine::WorkspacePath::new("src/new.rs").unwrap(),
                new: Digest::ZERO,
                text: "pub fn f() {}\n".into(),
            },
        ]
    }

    #[test]
    fn the_diff_shows_every_changed_file_with_git_style_headers() {
        let mut old =
            |path: &str| (path == "src/main.rs").then(|| "let x = 1;\nx = 2;\n".to_owned());
        let diff = unified_diff("r-1", "made `x` mutable", &changes(), &mut old);
        assert!(diff.starts_with("# Trellis verified repair r-1: made `x` mutable\n"));
        assert!(
            diff.contains("--- a/src/main.rs\n+++ b/src/main.rs\n"),
            "{diff}"
        );
        assert!(diff.contains("-let x = 1;\n+let mut x = 1;\n"), "{diff}");
        assert!(diff.contains("--- /dev/null\n+++ b/src/new.rs\n"), "{diff}");
        assert!(diff.contains("+pub fn f() {}\n"), "{diff}");
    }

    #[test]
    fn branch_files_report_the_repaired_text_or_nothing_for_untouched_files() {
        let main = repaired_file(&changes(), "src/main.rs").unwrap();
        assert_eq!(main.change, BranchChange::Modify);
        assert!(main.text.starts_with("let mut x"));
        assert_eq!(
            repaired_file(&changes(), "src/new.rs").unwrap().change,
            BranchChange::Create
        );
        assert_eq!(repaired_file(&changes(), "Cargo.toml"), None);
    }

    #[test]
    fn preview_names_cannot_escape_the_preview_directory() {
        assert_eq!(preview_file_name("r-12ab"), "r-12ab.diff");
        assert_eq!(preview_file_name("../../etc/x"), "______etc_x.diff");
    }
}
