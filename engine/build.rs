//! Stamps the git commit into the build as `TRELLIS_BUILD_GIT_SHA`, the
//! runtime-build component of exact no-good keys (PSP-10 erratum 15).
//!
//! An externally supplied `TRELLIS_GIT_SHA` wins (release pipelines, source
//! tarballs); otherwise `git rev-parse HEAD` is asked; a build without git
//! stamps the empty string, leaving the version-only identity. The script
//! reruns only when that answer can change: the variable, `HEAD`, the branch
//! ref `HEAD` points to, and `packed-refs`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// Files whose change moves `HEAD`, resolved through `git rev-parse
/// --git-path` so linked worktrees point at their own `HEAD` and the shared
/// refs.
fn head_files(dir: &Path) -> Vec<PathBuf> {
    let mut names = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    if let Some(reference) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        names.push(reference);
    }
    names
        .iter()
        .filter_map(|name| git(dir, &["rev-parse", "--git-path", name]))
        .map(|path| dir.join(path))
        .filter(|path| path.exists())
        .collect()
}

fn main() {
    println!("cargo:rerun-if-env-changed=TRELLIS_GIT_SHA");
    println!("cargo:rerun-if-changed=build.rs");
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let sha = match std::env::var("TRELLIS_GIT_SHA") {
        Ok(sha) if !sha.trim().is_empty() => sha.trim().to_owned(),
        _ => {
            for path in head_files(&manifest_dir) {
                println!("cargo:rerun-if-changed={}", path.display());
            }
            git(&manifest_dir, &["rev-parse", "HEAD"]).unwrap_or_default()
        }
    };
    println!("cargo:rustc-env=TRELLIS_BUILD_GIT_SHA={sha}");
}
