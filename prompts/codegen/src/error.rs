//! The one error type of the codegen: a message pinned to a file and line.

use std::fmt;
use std::path::{Path, PathBuf};

/// A validation failure in a section file, the stage list or the manifest.
///
/// Displayed as `path:line: message` so that cargo's build output and editors
/// can jump straight to the offending line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodegenError {
    pub file: PathBuf,
    /// 1-based line number; 0 when the problem concerns the whole file.
    pub line: usize,
    pub message: String,
}

impl CodegenError {
    pub fn new(file: &Path, line: usize, message: impl Into<String>) -> Self {
        CodegenError {
            file: file.to_path_buf(),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for CodegenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
    }
}

impl std::error::Error for CodegenError {}

/// Every failure found in one pass, so an author fixes them all at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodegenErrors(pub Vec<CodegenError>);

impl fmt::Display for CodegenErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for CodegenErrors {}

impl From<CodegenError> for CodegenErrors {
    fn from(error: CodegenError) -> Self {
        CodegenErrors(vec![error])
    }
}
