//! Warm slot target directories: a new slot's cargo target directory starts
//! with the registry dependencies someone already compiled, in the user's
//! `target/` or in another slot of the same workspace, and, for a slot
//! built at the user's paths (`mirror`), with a copy of the user's
//! incremental state, which rustc validates against the slot's sources.
//!
//! Cargo names a registry (or git) package's artifacts by hashes of its
//! package id, features, profile and toolchain, none of which depends on
//! where the workspace lives, and judges them fresh by their fingerprints,
//! not by the workspace's files: copied with their mtimes, they are fresh in
//! the slot (a changed flag or toolchain changes the hashes, so stale ones
//! are never picked). Workspace members and other path packages are never
//! seeded: their hashes hash the path *relative to the workspace root*, so
//! a member built from the user's sources carries the same name as the
//! slot's, and cargo, which compares mtimes, could take it for fresh. They
//! are always built from the slot's own sources.
//!
//! This module never writes into a source directory. `.rlib` and `.rmeta`
//! files are hard-linked (they are most of the bytes): rustc writes those
//! to a temporary file and renames it over the output, so a rebuild in the
//! slot replaces the link and never writes through it. Everything else
//! (fingerprints, dep-info, build-script output and executables, proc-macro
//! libraries written by whatever linker is configured) is copied, because
//! cargo and linkers may rewrite those in place. A file that cannot be
//! linked (another file system) is copied.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};

/// Written once a target directory has been seeded, so it is seeded once:
/// afterwards cargo keeps it current itself.
const SEEDED: &str = ".trellis-seeded";

/// The profile directories seeded: those `cargo check` and `cargo test`
/// build into.
const PROFILES: &[&str] = &["debug"];

/// What one seeding did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SeedReport {
    pub linked: u64,
    pub copied: u64,
}

/// The registry and git packages of a `Cargo.lock`: those with a `source`.
/// A name that is also a path package (no `source`) is left out, so a
/// member never shares a seeded artifact's name. Unreadable text yields
/// nothing (nothing is seeded; cargo builds as before).
pub fn registry_packages(lock: &str) -> BTreeSet<String> {
    let (registry, local) = lock_packages(lock);
    &registry - &local
}

/// The path packages of a `Cargo.lock` (those without a `source`): the
/// workspace's members and the path dependencies, always built in the slot.
pub fn path_packages(lock: &str) -> BTreeSet<String> {
    lock_packages(lock).1
}

/// The registry (or git) and the path package names of a `Cargo.lock`.
fn lock_packages(lock: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let Ok(value) = lock.parse::<toml::Table>() else {
        return (BTreeSet::new(), BTreeSet::new());
    };
    let mut registry = BTreeSet::new();
    let mut local = BTreeSet::new();
    for package in value
        .get("package")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(name) = package.get("name").and_then(toml::Value::as_str) else {
            continue;
        };
        match package.get("source").and_then(toml::Value::as_str) {
            Some(source)
                if source.starts_with("registry+")
                    || source.starts_with("sparse+")
                    || source.starts_with("git+") =>
            {
                registry.insert(name.to_owned());
            }
            _ => {
                local.insert(name.to_owned());
            }
        }
    }
    (registry, local)
}

/// How an entry of a profile directory is seeded.
#[derive(Debug, PartialEq, Eq)]
enum Seed {
    /// Hard-linked: rustc replaces it by rename, never in place.
    Link,
    /// Copied (recursively for directories), with its mtimes.
    Copy,
}

/// `name-0123456789abcdef` → `name`, for cargo's hashed names.
fn strip_hash(stem: &str) -> Option<&str> {
    let (name, hash) = stem.rsplit_once('-')?;
    (hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit())).then_some(name)
}

/// Whether the entry `file` of the profile subdirectory `dir` (`deps`,
/// `build`, `.fingerprint`) belongs to one of `packages`, and how to seed it.
fn classify(dir: &str, file: &str, packages: &BTreeSet<String>) -> Option<Seed> {
    match dir {
        // Directories named by package name: `serde_json-<hash>`.
        ".fingerprint" | "build" => packages.contains(strip_hash(file)?).then_some(Seed::Copy),
        // Files named by crate name (`-` becomes `_`): `libserde_json-<hash>.rlib`.
        "deps" => {
            let (stem, extension) = file.rsplit_once('.')?;
            let crate_name = strip_hash(stem.strip_prefix("lib").unwrap_or(stem))?;
            let known = packages.iter().any(|p| p.replace('-', "_") == crate_name);
            match extension {
                "rlib" | "rmeta" if known => Some(Seed::Link),
                "so" | "dylib" | "dll" | "d" if known => Some(Seed::Copy),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Seeds `target` (a slot's own target directory) from `sources` (the
/// user's target directory and other slots'), once: the registry
/// dependencies of `packages` that a source has and `target` lacks, and a
/// copy of `incremental`'s incremental state (the user's target directory,
/// for a slot built at the user's paths). A source that does not exist is
/// skipped. Never writes into a source.
pub fn seed_target(
    target: &Path,
    sources: &[PathBuf],
    packages: &BTreeSet<String>,
    incremental: Option<&Path>,
) -> io::Result<SeedReport> {
    let mut report = SeedReport::default();
    if target.join(SEEDED).exists() {
        return Ok(report);
    }
    if let Some(user) = incremental {
        report.copied += copy_incremental(user, target)?;
    }
    for source in sources.iter().filter(|source| source.as_path() != target) {
        for profile in PROFILES {
            for dir in ["deps", "build", ".fingerprint"] {
                let from = source.join(profile).join(dir);
                let entries = match fs::read_dir(&from) {
                    Ok(entries) => entries,
                    Err(err) if err.kind() == ErrorKind::NotFound => continue,
                    Err(err) => return Err(err),
                };
                let to = target.join(profile).join(dir);
                fs::create_dir_all(&to)?;
                for entry in entries {
                    let entry = entry?;
                    let name = entry.file_name();
                    let Some(how) = name.to_str().and_then(|n| classify(dir, n, packages)) else {
                        continue;
                    };
                    let dest = to.join(&name);
                    if fs::symlink_metadata(&dest).is_ok() {
                        continue; // already there: from an earlier source
                    }
                    match how {
                        Seed::Link => match fs::hard_link(entry.path(), &dest) {
                            Ok(()) => report.linked += 1,
                            Err(_) => report.copied += copy_tree(&entry.path(), &dest)?,
                        },
                        Seed::Copy => report.copied += copy_tree(&entry.path(), &dest)?,
                    }
                }
            }
        }
    }
    fs::create_dir_all(target)?;
    fs::write(target.join(SEEDED), b"")?;
    Ok(report)
}

/// Copies the incremental state of every crate `from` (a target
/// directory) has and `to` lacks: each crate's finished sessions, never
/// one a running rustc is still writing (`-working`), and never by hard
/// link, since rustc may rewrite its work products in place. Only the
/// workspace's members are built incrementally, and rustc checks each
/// reused result against the slot's sources itself.
fn copy_incremental(from: &Path, to: &Path) -> io::Result<u64> {
    let mut copied = 0;
    for profile in PROFILES {
        let (from, to) = (
            from.join(profile).join("incremental"),
            to.join(profile).join("incremental"),
        );
        let crates = match fs::read_dir(&from) {
            Ok(crates) => crates,
            Err(err) if err.kind() == ErrorKind::NotFound => continue,
            Err(err) => return Err(err),
        };
        for krate in crates {
            let krate = krate?;
            let dest = to.join(krate.file_name());
            if !krate.file_type()?.is_dir() || fs::symlink_metadata(&dest).is_ok() {
                continue;
            }
            fs::create_dir_all(&dest)?;
            for session in fs::read_dir(krate.path())? {
                let session = session?;
                let name = session.file_name();
                if name.to_string_lossy().ends_with("-working") {
                    continue;
                }
                // A session rustc removes while it is copied is left out.
                match copy_tree(&session.path(), &dest.join(&name)) {
                    Ok(files) => copied += files,
                    Err(err) if err.kind() == ErrorKind::NotFound => {}
                    Err(err) => return Err(err),
                }
            }
        }
    }
    Ok(copied)
}

/// Copies a file or a directory tree, keeping every file's and directory's
/// mtime (cargo compares them), never following a symlink. The number of
/// files copied.
fn copy_tree(from: &Path, to: &Path) -> io::Result<u64> {
    let meta = fs::symlink_metadata(from)?;
    let copied = if meta.is_dir() {
        fs::create_dir(to)?;
        let mut copied = 0;
        for entry in fs::read_dir(from)? {
            let entry = entry?;
            copied += copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        copied
    } else if meta.is_symlink() {
        std::os::unix::fs::symlink(fs::read_link(from)?, to)?;
        return Ok(0);
    } else {
        fs::copy(from, to)?;
        1
    };
    let times = fs::FileTimes::new()
        .set_modified(meta.modified()?)
        .set_accessed(meta.accessed()?);
    fs::File::open(to)?.set_times(times)?;
    Ok(copied)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCK: &str = r#"
version = 4

[[package]]
name = "app"
version = "0.1.0"
dependencies = ["proc-macro2", "regex"]

[[package]]
name = "proc-macro2"
version = "1.0.0"
source = "registry+https://github.com/rust-lang/crates.io-index"

[[package]]
name = "regex"
version = "1.0.0"
source = "registry+https://github.com/rust-lang/crates.io-index"

[[package]]
name = "regex"
version = "0.1.0"
"#;

    #[test]
    fn only_registry_packages_that_no_path_package_shadows_are_seeded() {
        let packages = registry_packages(LOCK);
        assert_eq!(packages, BTreeSet::from(["proc-macro2".to_owned()]));
        assert!(registry_packages("not = [toml").is_empty());
        assert_eq!(
            path_packages(LOCK),
            BTreeSet::from(["app".to_owned(), "regex".to_owned()])
        );
    }

    #[test]
    fn artifacts_are_linked_only_where_rustc_replaces_them() {
        let packages = BTreeSet::from(["proc-macro2".to_owned(), "serde_derive".to_owned()]);
        let hash = "0123456789abcdef";
        let seed = |dir: &str, file: String| classify(dir, &file, &packages);
        assert_eq!(
            seed("deps", format!("libproc_macro2-{hash}.rlib")),
            Some(Seed::Link)
        );
        assert_eq!(
            seed("deps", format!("libproc_macro2-{hash}.rmeta")),
            Some(Seed::Link)
        );
        assert_eq!(
            seed("deps", format!("proc_macro2-{hash}.d")),
            Some(Seed::Copy)
        );
        assert_eq!(
            seed("deps", format!("libserde_derive-{hash}.so")),
            Some(Seed::Copy)
        );
        assert_eq!(
            seed(".fingerprint", format!("proc-macro2-{hash}")),
            Some(Seed::Copy)
        );
        assert_eq!(
            seed("build", format!("proc-macro2-{hash}")),
            Some(Seed::Copy)
        );
        // Members, test executables, unhashed names and other directories: never.
        assert_eq!(seed("deps", format!("libapp-{hash}.rlib")), None);
        assert_eq!(seed("deps", format!("proc_macro2-{hash}")), None);
        assert_eq!(seed("deps", "libproc_macro2.rlib".to_owned()), None);
        assert_eq!(seed(".fingerprint", format!("app-{hash}")), None);
        assert_eq!(seed("incremental", format!("proc_macro2-{hash}")), None);
    }

    #[test]
    fn incremental_state_is_copied_whole_sessions_only_and_never_linked() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let (user, slot) = (dir.path().join("user"), dir.path().join("slot"));
        let incremental = user.join("debug/incremental/app-1x2y");
        let done = incremental.join("s-abc-def");
        fs::create_dir_all(&done).unwrap();
        fs::write(done.join("dep-graph.bin"), b"graph").unwrap();
        fs::create_dir_all(incremental.join("s-ghi-jkl-working")).unwrap();
        fs::write(incremental.join("s-abc-def.lock"), b"").unwrap();

        let report = seed_target(&slot, &[], &BTreeSet::new(), Some(&user)).unwrap();
        assert_eq!(report.copied, 2, "the session's file and its lock file");
        let copy = slot.join("debug/incremental/app-1x2y/s-abc-def/dep-graph.bin");
        assert_eq!(fs::read(&copy).unwrap(), b"graph");
        let ino = |p: &Path| fs::metadata(p).unwrap().ino();
        assert_ne!(
            ino(&copy),
            ino(&done.join("dep-graph.bin")),
            "a copy, not a link"
        );
        assert!(
            !slot
                .join("debug/incremental/app-1x2y/s-ghi-jkl-working")
                .exists()
        );
        fs::write(&copy, b"rewritten by the slot's rustc").unwrap();
        assert_eq!(fs::read(done.join("dep-graph.bin")).unwrap(), b"graph");
    }

    #[test]
    fn seeding_links_copies_keeps_mtimes_and_happens_once() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user");
        let hash = "0123456789abcdef";
        let write = |rel: &str| {
            let path = user.join("debug").join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, rel).unwrap();
            let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1 << 30);
            fs::File::open(&path).unwrap().set_modified(old).unwrap();
        };
        write(&format!("deps/libregex-{hash}.rlib"));
        write(&format!(".fingerprint/regex-{hash}/lib-regex"));
        write(&format!("deps/libapp-{hash}.rlib"));
        let packages = BTreeSet::from(["regex".to_owned()]);
        let slot = dir.path().join("slot");

        let report = seed_target(&slot, std::slice::from_ref(&user), &packages, None).unwrap();
        assert_eq!(
            report,
            SeedReport {
                linked: 1,
                copied: 1
            }
        );
        let fingerprint = format!("debug/.fingerprint/regex-{hash}/lib-regex");
        assert_eq!(
            fs::metadata(slot.join(&fingerprint))
                .unwrap()
                .modified()
                .unwrap(),
            fs::metadata(user.join(&fingerprint))
                .unwrap()
                .modified()
                .unwrap(),
        );
        assert!(!slot.join(format!("debug/deps/libapp-{hash}.rlib")).exists());

        write(&format!("deps/libregex-{hash}.rmeta"));
        let again = seed_target(&slot, &[user], &packages, None).unwrap();
        assert_eq!(again, SeedReport::default(), "seeded once");
    }
}
