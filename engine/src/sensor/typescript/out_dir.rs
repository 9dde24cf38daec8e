//! From a compiled file back to its source: a project that compiles before
//! it tests (`tsc -p . && jest dist`) runs the `.js` files tsc wrote to its
//! `outDir`, so its runner names those; a failure must name the `.ts` file
//! a repair edits.
//!
//! `compilerOptions.outDir` and `rootDir` of the workspace's `tsconfig.json`
//! are read once per session from the user's workspace (like the test
//! command). `<outDir>/<p>.js` is `<rootDir>/<p>.ts` (or `.tsx`; `.mjs` is
//! `.mts`, `.cjs` is `.cts`) when that file exists in the measured tree;
//! without a `rootDir`, tsc's usual ones are tried: the project directory,
//! then `src`. A `tsconfig.json` that is not plain JSON (comments, trailing
//! commas) or that only `extends` another gives no mapping: files are named
//! as the runner ran them. Only the file is mapped: a line of a compiled
//! file is no line of its source, so the sensor takes lines only from
//! frames the runner has already mapped through source maps.
//!
//! A measurement must leave its tree as it found it, but a script that
//! compiles first writes its `outDir` into the measured tree. Before a run,
//! an `outDir` the tree does not have yet is made and tagged as build
//! output ([`OutDir::mark_build_output`], a `CACHEDIR.TAG`, as cargo tags
//! `target/`), so every snapshot leaves what tsc compiled out, like
//! `target/`, and no compiled file is ever taken for a candidate's change
//! (`typescript_jest::a_model_fixes_the_logic_bug_a_jest_test_catches_and_npm_test_passes`).
//! An `outDir` already there (the user's own build, copied with the
//! workspace) is left as it is.

use std::io::Write as _;
use std::path::Path;

use crate::snapshot::scan::{CACHEDIR_SIGNATURE, CACHEDIR_TAG};

/// A project's `outDir` and the directories its sources may be under.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct OutDir {
    /// `dist`, relative to the project, without `./` or a trailing `/`.
    out: Option<String>,
    roots: Vec<String>,
}

fn plain(dir: &str) -> String {
    let dir = dir.trim_start_matches("./").trim_end_matches('/');
    if dir.is_empty() {
        ".".into()
    } else {
        dir.into()
    }
}

impl OutDir {
    /// The mapping of the project at `workspace`; none when its
    /// `tsconfig.json` names no `outDir` or cannot be read as JSON.
    pub(super) fn of(workspace: &Path) -> OutDir {
        let Ok(text) = std::fs::read_to_string(workspace.join("tsconfig.json")) else {
            return OutDir::default();
        };
        let Ok(config) = serde_json::from_str::<serde_json::Value>(&text) else {
            return OutDir::default();
        };
        let options = &config["compilerOptions"];
        let Some(out) = options["outDir"].as_str().map(plain) else {
            return OutDir::default();
        };
        let roots = match options["rootDir"].as_str() {
            Some(root) => vec![plain(root)],
            None => vec![".".into(), "src".into()],
        };
        OutDir {
            out: (out != ".").then_some(out),
            roots,
        }
    }

    /// Makes the `outDir` of the tree at `dir` and tags it as build output,
    /// when nothing is at its path yet; every component is made here, so a
    /// link in the tree is never followed.
    pub(super) fn mark_build_output(&self, dir: &Path) -> std::io::Result<()> {
        let Some(out) = self.out.as_deref() else {
            return Ok(());
        };
        if out.split('/').any(|part| part.is_empty() || part == "..") {
            return Ok(());
        }
        let parts: Vec<&str> = out.split('/').collect();
        let mut at = dir.to_path_buf();
        for (index, part) in parts.iter().enumerate() {
            at.push(part);
            match std::fs::symlink_metadata(&at) {
                // The last component is already there: not the measurement's.
                Ok(_) if index + 1 == parts.len() => return Ok(()),
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => return Ok(()),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    std::fs::create_dir(&at)?;
                }
                Err(error) => return Err(error),
            }
        }
        let mut tag = std::fs::File::options()
            .write(true)
            .create_new(true)
            .open(at.join(CACHEDIR_TAG))?;
        tag.write_all(CACHEDIR_SIGNATURE)?;
        tag.write_all(b"\n# The outDir a test script compiles into: build output, see Trellis's sensor/typescript/out_dir.rs.\n")
    }

    /// The source of `file` (absolute, in the tree at one of `prefixes`,
    /// each ending in `/`), if it is a compiled file below `outDir` whose
    /// source exists.
    pub(super) fn source(&self, file: &str, prefixes: &[String]) -> Option<String> {
        let out = self.out.as_deref()?;
        prefixes.iter().find_map(|prefix| {
            let rest = file
                .strip_prefix(prefix)?
                .strip_prefix(out)?
                .strip_prefix('/')?;
            let (stem, extension) = rest.rsplit_once('.')?;
            let sources: &[&str] = match extension {
                "js" => &["ts", "tsx"],
                "jsx" => &["tsx"],
                "mjs" => &["mts"],
                "cjs" => &["cts"],
                _ => return None,
            };
            self.roots.iter().find_map(|root| {
                sources.iter().find_map(|source| {
                    let candidate = if root == "." {
                        format!("{prefix}{stem}.{source}")
                    } else {
                        format!("{prefix}{root}/{stem}.{source}")
                    };
                    Path::new(&candidate).is_file().then_some(candidate)
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compiled_file_is_named_by_its_source_through_out_dir_and_root_dir() {
        let dir = tempfile::tempdir().unwrap();
        let root = format!("{}/", dir.path().display());
        std::fs::create_dir_all(dir.path().join("test")).unwrap();
        std::fs::create_dir_all(dir.path().join("src/lib")).unwrap();
        std::fs::write(dir.path().join("test/a.test.ts"), "").unwrap();
        std::fs::write(dir.path().join("src/lib/b.mts"), "").unwrap();
        let write = |config: &str| {
            std::fs::write(dir.path().join("tsconfig.json"), config).unwrap();
            OutDir::of(dir.path())
        };
        let prefixes = [root.clone()];
        let explicit = write(r#"{"compilerOptions": {"outDir": "./dist/", "rootDir": "."}}"#);
        assert_eq!(
            explicit.source(&format!("{root}dist/test/a.test.js"), &prefixes),
            Some(format!("{root}test/a.test.ts"))
        );
        assert_eq!(
            explicit.source(&format!("{root}test/a.test.ts"), &prefixes),
            None
        );
        assert_eq!(
            explicit.source(&format!("{root}dist/test/gone.test.js"), &prefixes),
            None
        );
        let defaulted = write(r#"{"compilerOptions": {"outDir": "out"}}"#);
        assert_eq!(
            defaulted.source(&format!("{root}out/lib/b.mjs"), &prefixes),
            Some(format!("{root}src/lib/b.mts"))
        );
        assert_eq!(
            write(r#"{"compilerOptions": {"noEmit": true}}"#),
            OutDir::default()
        );
        assert_eq!(write("{ // a comment\n}"), OutDir::default());
    }
}
