//! A verified repair's file changes as an LSP `WorkspaceEdit`.
//!
//! The engine describes a repair as byte-offset edits against the text the
//! repair started from. The editor needs positions in the negotiated
//! encoding, against the text it holds now, tagged with the version it holds
//! now (so it refuses the edit if the buffer moved on), plus create and
//! delete operations for whole files. The text each edit is converted
//! against must be the one the repair started from: its digest is checked,
//! and a mismatch refuses the whole edit rather than misplacing it.

use std::collections::HashMap;

use ropey::Rope;
use tower_lsp_server::ls_types::{
    AnnotatedTextEdit, ChangeAnnotation, CreateFile, CreateFileOptions, DeleteFile,
    DeleteFileOptions, DocumentChangeOperation, DocumentChanges, OneOf,
    OptionalVersionedTextDocumentIdentifier, Range, ResourceOp, TextDocumentEdit, TextEdit, Uri,
    WorkspaceEdit,
};
use trellis_engine::change::{self, FileChange};
use trellis_engine::digest::blob_digest;

use super::encoding::{PositionEncoding, byte_to_position};

/// The id of the one change annotation every repair edit carries.
pub const ANNOTATION_ID: &str = "trellis.verified-repair";

/// A file as the editor (or, for files it has not opened, the disk) has it now.
#[derive(Clone, Debug)]
pub struct CurrentFile {
    pub uri: Uri,
    /// The open document's version; `None` when the file is not open.
    pub version: Option<i32>,
    /// The current text; `None` when the file does not exist.
    pub text: Option<Rope>,
}

/// How the client wants edits shaped.
#[derive(Clone, Debug)]
pub struct EditShape {
    pub encoding: PositionEncoding,
    pub document_changes: bool,
    pub file_operations: bool,
    /// When set, every edit carries a change annotation with this label and
    /// description that asks the user to confirm.
    pub confirmation: Option<(String, String)>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum EditError {
    /// The file is not what the repair started from: applying would misplace edits.
    Stale { path: String },
    /// The client cannot express this change (say, a file creation without
    /// `documentChanges` support).
    Unsupported { path: String, reason: String },
    /// An edit lies outside its file or edits overlap: the repair is malformed.
    Malformed { path: String, reason: String },
}

impl std::fmt::Display for EditError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EditError::Stale { path } => write!(
                f,
                "{path} changed since the repair started; nothing was applied"
            ),
            EditError::Unsupported { path, reason } => write!(f, "{path}: {reason}"),
            EditError::Malformed { path, reason } => {
                write!(f, "{path}: the repair's edit is malformed: {reason}")
            }
        }
    }
}

/// Builds the edit for `changes`; `current` describes each changed path now.
pub fn build_workspace_edit(
    changes: &[FileChange],
    current: &mut dyn FnMut(&str) -> Option<CurrentFile>,
    shape: &EditShape,
) -> Result<WorkspaceEdit, EditError> {
    let annotation = shape
        .confirmation
        .as_ref()
        .map(|_| ANNOTATION_ID.to_owned());
    let mut operations = Vec::new();
    let mut plain: HashMap<Uri, Vec<TextEdit>> = HashMap::new();

    for file_change in changes {
        let path = file_change.path().as_str();
        let file = current(path).ok_or_else(|| EditError::Unsupported {
            path: path.to_owned(),
            reason: "the path cannot be expressed as a file URI".into(),
        })?;
        let stale = || EditError::Stale {
            path: path.to_owned(),
        };
        let needs_operations = |what: &str| {
            if shape.document_changes && shape.file_operations {
                Ok(())
            } else {
                Err(EditError::Unsupported {
                    path: path.to_owned(),
                    reason: format!(
                        "the repair {what}s this file and the editor does not support file operations in edits"
                    ),
                })
            }
        };
        match file_change {
            FileChange::Modify { old, edits, .. } => {
                let text = file.text.as_ref().ok_or_else(stale)?;
                if blob_digest(text.to_string().as_bytes()) != *old {
                    return Err(stale());
                }
                let text_edits = convert_edits(path, text, edits, shape.encoding)?;
                if shape.document_changes {
                    operations.push(DocumentChangeOperation::Edit(document_edit(
                        file.uri,
                        file.version,
                        text_edits,
                        &annotation,
                    )));
                } else {
                    plain.entry(file.uri).or_default().extend(text_edits);
                }
            }
            FileChange::Create { text, .. } => {
                needs_operations("create")?;
                if file.text.is_some() {
                    return Err(stale());
                }
                operations.push(DocumentChangeOperation::Op(ResourceOp::Create(
                    CreateFile {
                        uri: file.uri.clone(),
                        options: Some(CreateFileOptions {
                            overwrite: Some(false),
                            ignore_if_exists: Some(false),
                        }),
                        annotation_id: annotation.clone(),
                    },
                )));
                if !text.is_empty() {
                    let insert = TextEdit::new(Range::default(), text.clone());
                    operations.push(DocumentChangeOperation::Edit(document_edit(
                        file.uri,
                        None,
                        vec![insert],
                        &annotation,
                    )));
                }
            }
            FileChange::Delete { old, .. } => {
                needs_operations("delete")?;
                let text = file.text.as_ref().ok_or_else(stale)?;
                if blob_digest(text.to_string().as_bytes()) != *old {
                    return Err(stale());
                }
                operations.push(DocumentChangeOperation::Op(ResourceOp::Delete(
                    DeleteFile {
                        uri: file.uri,
                        options: Some(DeleteFileOptions {
                            recursive: Some(false),
                            ignore_if_not_exists: Some(false),
                        }),
                        annotation_id: annotation.clone(),
                    },
                )));
            }
        }
    }

    let change_annotations = shape.confirmation.as_ref().map(|(label, description)| {
        HashMap::from([(
            ANNOTATION_ID.to_owned(),
            ChangeAnnotation {
                label: label.clone(),
                needs_confirmation: Some(true),
                description: Some(description.clone()),
            },
        )])
    });
    Ok(if shape.document_changes {
        WorkspaceEdit {
            changes: None,
            document_changes: Some(DocumentChanges::Operations(operations)),
            change_annotations,
        }
    } else {
        WorkspaceEdit {
            changes: Some(plain),
            document_changes: None,
            change_annotations: None,
        }
    })
}

fn document_edit(
    uri: Uri,
    version: Option<i32>,
    edits: Vec<TextEdit>,
    annotation: &Option<String>,
) -> TextDocumentEdit {
    TextDocumentEdit {
        text_document: OptionalVersionedTextDocumentIdentifier { uri, version },
        edits: edits
            .into_iter()
            .map(|text_edit| match annotation {
                Some(id) => OneOf::Right(AnnotatedTextEdit {
                    text_edit,
                    annotation_id: id.clone(),
                }),
                None => OneOf::Left(text_edit),
            })
            .collect(),
    }
}

/// Byte-offset edits against `text` as ranges in `encoding`. Edits must be
/// ordered, non-overlapping, inside the text and on character boundaries.
fn convert_edits(
    path: &str,
    text: &Rope,
    edits: &[change::TextEdit],
    encoding: PositionEncoding,
) -> Result<Vec<TextEdit>, EditError> {
    let malformed = |reason: String| EditError::Malformed {
        path: path.to_owned(),
        reason,
    };
    let mut previous_end = 0;
    let mut out = Vec::with_capacity(edits.len());
    for edit in edits {
        let (start, end) = (edit.byte_start, edit.byte_end);
        if start > end || end > text.len_bytes() || start < previous_end {
            return Err(malformed(format!(
                "bytes {start}..{end} are out of order or outside the file ({} bytes)",
                text.len_bytes()
            )));
        }
        if !is_char_boundary(text, start) || !is_char_boundary(text, end) {
            return Err(malformed(format!("bytes {start}..{end} split a character")));
        }
        previous_end = end;
        out.push(TextEdit::new(
            Range::new(
                byte_to_position(text, start, encoding),
                byte_to_position(text, end, encoding),
            ),
            edit.new_text.clone(),
        ));
    }
    Ok(out)
}

fn is_char_boundary(text: &Rope, byte: usize) -> bool {
    text.char_to_byte(text.byte_to_char(byte)) == byte
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use trellis_engine::digest::Digest;

    const OLD: &str = "// é𝕏\nfn main() {\n    let x = 1;\n}\n";

    fn uri(path: &str) -> Uri {
        format!("file:///ws/{path}").parse().unwrap()
    }

    fn modify() -> FileChange {
        let at = OLD.find("x = 1").unwrap();
        FileChange::Modify {
            path: trellis_engine::WorkspacePath::new("src/main.rs").unwrap(),
            old: blob_digest(OLD.as_bytes()),
            new: Digest::ZERO,
            edits: vec![change::TextEdit {
                byte_start: at,
                byte_end: at,
                new_text: "mut ".into(),
            }],
            new_text: OLD.replace("let x", "let mut x"),
        }
    }

    fn shape(encoding: PositionEncoding, confirm: bool) -> EditShape {
        EditShape {
            encoding,
            document_changes: true,
            file_operations: true,
            confirmation: confirm.then(|| ("Verified repair".into(), "made `x` mutable".into())),
        }
    }

    fn open_main(path: &str) -> Option<CurrentFile> {
        Some(CurrentFile {
            uri: uri(path),
            version: (path == "src/main.rs").then_some(7),
            text: (path == "src/main.rs").then(|| Rope::from_str(OLD)),
        })
    }

    #[test]
    fn a_modification_becomes_a_versioned_document_edit() {
        let edit = build_workspace_edit(
            &[modify()],
            &mut open_main,
            &shape(PositionEncoding::Utf16, false),
        )
        .unwrap();
        let value = serde_json::to_value(&edit).unwrap();
        assert_eq!(
            value,
            json!({ "documentChanges": [{
                "textDocument": { "uri": "file:///ws/src/main.rs", "version": 7 },
                "edits": [{
                    "range": { "start": { "line": 2, "character": 8 }, "end": { "line": 2, "character": 8 } },
                    "newText": "mut "
                }]
            }] })
        );
    }

    #[test]
    fn annotations_ask_for_confirmation_when_the_client_supports_them() {
        let edit = build_workspace_edit(
            &[modify()],
            &mut open_main,
            &shape(PositionEncoding::Utf8, true),
        )
        .unwrap();
        let value = serde_json::to_value(&edit).unwrap();
        assert_eq!(
            value["documentChanges"][0]["edits"][0]["annotationId"],
            ANNOTATION_ID
        );
        let annotation = &value["changeAnnotations"][ANNOTATION_ID];
        assert_eq!(annotation["needsConfirmation"], true);
        assert_eq!(annotation["label"], "Verified repair");
    }

    #[test]
    fn positions_after_non_ascii_text_use_the_negotiated_encoding() {
        let at = OLD.find('𝕏').unwrap();
        let mut change = modify();
        if let FileChange::Modify { edits, .. } = &mut change {
            edits[0] = change::TextEdit {
                byte_start: at,
                byte_end: at + '𝕏'.len_utf8(),
                new_text: "X".into(),
            };
        }
        for (encoding, start, end) in [
            (PositionEncoding::Utf16, 4, 6),
            (PositionEncoding::Utf8, 5, 9),
        ] {
            let edit = build_workspace_edit(
                std::slice::from_ref(&change),
                &mut open_main,
                &shape(encoding, false),
            )
            .unwrap();
            let value = serde_json::to_value(&edit).unwrap();
            let range = &value["documentChanges"][0]["edits"][0]["range"];
            assert_eq!(
                range["start"],
                json!({ "line": 0, "character": start }),
                "{encoding:?}"
            );
            assert_eq!(
                range["end"],
                json!({ "line": 0, "character": end }),
                "{encoding:?}"
            );
        }
    }

    #[test]
    fn created_and_deleted_files_become_resource_operations_with_null_versions() {
        let changes = [
            FileChange::Create {
                path: trellis_engine::WorkspacePath::new("src/new.rs").unwrap(),
                new: Digest::ZERO,
                text: "pub fn f() {}\n".into(),
            },
            FileChange::Delete {
                path: trellis_engine::WorkspacePath::new("src/old.rs").unwrap(),
                old: blob_digest(b"gone"),
            },
        ];
        let mut current = |path: &str| {
            Some(CurrentFile {
                uri: uri(path),
                version: None,
                text: (path == "src/old.rs").then(|| Rope::from_str("gone")),
            })
        };
        let edit = build_workspace_edit(
            &changes,
            &mut current,
            &shape(PositionEncoding::Utf16, false),
        )
        .unwrap();
        let value = serde_json::to_value(&edit).unwrap();
        let ops = value["documentChanges"].as_array().unwrap();
        assert_eq!(ops[0]["kind"], "create");
        assert_eq!(
            ops[1]["textDocument"],
            json!({ "uri": "file:///ws/src/new.rs", "version": null })
        );
        assert_eq!(ops[1]["edits"][0]["newText"], "pub fn f() {}\n");
        assert_eq!(ops[2]["kind"], "delete");
        assert_eq!(ops[2]["uri"], "file:///ws/src/old.rs");
    }

    #[test]
    fn a_file_that_is_not_the_repair_start_text_refuses_the_whole_edit() {
        let mut edited = |path: &str| {
            Some(CurrentFile {
                uri: uri(path),
                version: Some(8),
                text: Some(Rope::from_str(&OLD.replace("1", "2"))),
            })
        };
        let err = build_workspace_edit(
            &[modify()],
            &mut edited,
            &shape(PositionEncoding::Utf16, false),
        )
        .unwrap_err();
        assert_eq!(
            err,
            EditError::Stale {
                path: "src/main.rs".into()
            }
        );
    }

    #[test]
    fn clients_without_document_changes_get_plain_edits_and_no_file_operations() {
        let mut plain = shape(PositionEncoding::Utf16, true);
        plain.document_changes = false;
        let edit = build_workspace_edit(&[modify()], &mut open_main, &plain).unwrap();
        let value = serde_json::to_value(&edit).unwrap();
        assert_eq!(
            value["changes"]["file:///ws/src/main.rs"][0]["newText"],
            "mut "
        );
        assert!(value.get("changeAnnotations").is_none());

        let create = FileChange::Create {
            path: trellis_engine::WorkspacePath::new("src/new.rs").unwrap(),
            new: Digest::ZERO,
            text: String::new(),
        };
        let err = build_workspace_edit(&[create], &mut open_main, &plain).unwrap_err();
        assert!(matches!(err, EditError::Unsupported { .. }), "{err:?}");
    }

    #[test]
    fn edits_outside_the_file_or_splitting_a_character_are_malformed() {
        let at = OLD.find('é').unwrap();
        for (start, end) in [(at + 1, at + 1), (0, OLD.len() + 1)] {
            let mut change = modify();
            if let FileChange::Modify { edits, .. } = &mut change {
                edits[0].byte_start = start;
                edits[0].byte_end = end;
            }
            let err = build_workspace_edit(
                &[change],
                &mut open_main,
                &shape(PositionEncoding::Utf8, false),
            )
            .unwrap_err();
            assert!(matches!(err, EditError::Malformed { .. }), "{err:?}");
        }
    }
}
