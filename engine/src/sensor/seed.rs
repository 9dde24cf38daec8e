//! Warm slot target directories: a new slot's cargo target directory starts
//! with the registry dependencies someone already compiled, in the user's
//! `target/` or in another slot of the same workspace, and, for a slot
//! built at the user's paths (`mirror`), with the user's incremental state,
//! which rustc validates against the slot's sources.
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
//! This module never writes into a source directory, and shares a file only
//! where whoever rebuilds it replaces it instead of writing into it:
//! `.rlib` and `.rmeta` files, which rustc writes to a temporary file and
//! renames over the output, and rustc's own files in an incremental
//! session (its dependency graph and query cache), which rustc deletes
//! before saving again. Together they are most of the bytes. A shared file
//! is hard-linked from the user's `target/` into a store beside the slots
//! ([`Sharing::Store`]), which no sandbox may write, and the slot gets a
//! symbolic link to the store's name: a build in the slot that replaces it
//! replaces the link, and anything that opens it for writing is refused by
//! the slot's sandbox (`sensor/sandbox`), so no slot can write into the
//! user's artifacts or another slot's. Where no sandbox confines the slot,
//! nothing is shared ([`Sharing::Copy`]). A slot's own builds are never
//! shared: what another slot built is copied.
//! Everything else (fingerprints and cargo's dep-info in them,
//! build-script output and executables, proc-macro libraries written by
//! whatever linker is configured) is copied, because cargo, build scripts
//! and linkers may rewrite those in place; a file the source has under two
//! names (cargo links each build script) is copied once and linked under
//! the second. A file that cannot be linked (another file system) is
//! copied. A copy is always a new file, never an existing one opened for
//! writing, so a seeding cannot write through a link either.
//!
//! Creating files is most of a seeding's time, and a slot's first build
//! waits for it. So nothing a build never reads is seeded (the dep-info
//! rustc writes beside an artifact, a crate's older incremental sessions,
//! the parts of a fingerprint cargo reads only once the unit is dirty);
//! the sessions holding generated code a check does not run (all but
//! build scripts' and proc macros') wait for the first build that
//! generates code (a slot whose check fails never runs one); and the
//! entries are planned first, then seeded on a few threads, each file with
//! one open of its source and one of its copy.
//! Each entry appears whole or not at all (staged beside it, then renamed),
//! so a seeding cut short (by an error, a kill, or the cancelled run it
//! prepares, which stops it before its next entry) is finished by the next
//! one, never taken for done.
//!
//! # Architecture invariant
//!
//! No seeded unit is rebuilt, and a slot that rebuilds one never writes into
//! the user's `target/` (`slots_warm.rs`:
//! `a_seeded_slot_checks_and_tests_without_rebuilding_any_registry_dependency`,
//! `a_seeded_slot_never_writes_into_the_users_target_even_when_it_rebuilds_a_seeded_dependency`).
//! A seeding goes entry by entry, each whole, and shares only rustc's own files
//! (`seed::tests`: `incremental_sessions_share_only_rustcs_own_files`,
//! `only_the_session_rustc_goes_on_from_is_seeded`,
//! `sessions_with_generated_code_wait_for_the_first_build_that_generates_code`,
//! `a_file_with_two_names_is_copied_once`,
//! `a_copy_never_writes_through_a_file_already_there`,
//! `an_entry_that_fails_half_way_is_left_out_whole_and_seeded_again_later`,
//! `no_file_of_the_slot_is_a_hard_link_to_the_users`;
//! `slots_warm::a_seeding_killed_half_way_is_finished_by_the_next_run`,
//! failpoint `seed-entry`). The first branch's slot is seeded while the view is
//! measured, and a cancel stops a seeding before its next entry
//! (`slots_warm::a_repair_seeds_its_first_branchs_slot_while_the_view_is_measured`,
//! `cargo::tests::a_slot_prepared_before_the_stages_exist_is_seeded_where_its_first_check_reads`,
//! `seed::tests::a_stopped_seeding_begins_no_entry_and_the_next_one_seeds_them_all`,
//! `slots_warm::a_cancelled_repair_stops_seeding_its_first_branchs_slot_before_the_next_entry`,
//! `lsp_cancel_view::a_repair_cancelled_while_its_view_is_measured_ends_cancelled_and_leaves_nothing`).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, ErrorKind};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio_util::sync::CancellationToken;

use crate::snapshot::fsutil::remove_if_present;

/// Written once a target directory has been seeded with everything a build
/// without code generation (`cargo check`) reads, so that is seeded once:
/// afterwards cargo keeps it current itself.
const SEEDED: &str = ".trellis-seeded-2";

/// The marker of a target directory seeded by a Trellis that hard-linked
/// the user's files into it: such a directory is removed and seeded anew,
/// since a link there would be writable through the slot.
const SEEDED_BY_LINKS: &str = ".trellis-seeded";

/// Written once the rest of the incremental state has been seeded too,
/// before the first build that generates code (`cargo test`): the sessions
/// holding generated code (object files) of the crates a `cargo check`
/// only checks. A check never reads those, and a slot whose check fails
/// never runs a test.
const SEEDED_CODE: &str = ".trellis-seeded-code-2";

/// Cargo's cache of what rustc said about itself (its version, the
/// target's configuration), keyed by the rustc asked and the flags: seeded,
/// a slot's first cargo run does not ask rustc again (three runs of rustc).
/// Copied: cargo rewrites it in place, and asks again when a key differs.
const RUSTC_INFO: &str = ".rustc_info.json";

/// The profile directories seeded: those `cargo check` and `cargo test`
/// build into.
const PROFILES: &[&str] = &["debug"];

/// How a seeding gives a slot the files it may share with its sources.
#[derive(Clone, Copy, Debug)]
pub enum Sharing<'a> {
    /// The files of the source `from` (the user's `target/`; never another
    /// slot's, whose files that slot may write) hard-linked into `store`
    /// (a directory no sandbox may write) and given to the slot as
    /// symbolic links to the store's names; any other source's copied.
    Store { store: &'a Path, from: &'a Path },
    /// Copied: nothing keeps a shared file read-only to the slot.
    Copy,
}

/// What one seeding did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SeedReport {
    pub linked: u64,
    pub copied: u64,
}

/// The packages of a `Cargo.lock` a slot's seeding and build tell apart.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LockPackages {
    /// The registry and git packages: those with a `source`. A name that
    /// is also a path package is left out, so a member never shares a
    /// seeded artifact's name.
    pub registry: BTreeSet<String>,
    /// The path packages (no `source`): the workspace's members and the
    /// path dependencies, always built in the slot.
    pub path: BTreeSet<String>,
}

/// The [`LockPackages`] of `lock`, read once. Unreadable text yields none
/// (nothing is seeded; cargo builds as before).
pub fn lock_packages(lock: &str) -> LockPackages {
    let (registry, path) = package_names(lock);
    LockPackages {
        registry: &registry - &path,
        path,
    }
}

/// The registry (or git) and the path package names of a `Cargo.lock`.
fn package_names(lock: &str) -> (BTreeSet<String>, BTreeSet<String>) {
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seed {
    /// Hard-linked: rustc replaces it by rename, never in place.
    Link,
    /// Copied (recursively for directories), with its mtimes.
    Copy,
    /// A unit's fingerprint directory, copied without the files cargo
    /// reads only once the unit is dirty ([`fingerprint_file`]).
    Fingerprint,
}

/// How a file of a registry unit's fingerprint directory is seeded: the
/// hash cargo compares and the dep-info whose sources it checks are
/// copied; the fingerprint's JSON, which cargo reads only to say why a
/// unit whose hash differs is dirty, and `invoked.timestamp`, whose mtime
/// cargo gives the dep-info after a build, are left out. A unit that turns
/// out dirty is rebuilt all the same (without the JSON, cargo reports a
/// fingerprint error and rebuilds), and writes both anew. About half of a
/// fingerprint's files, on every seeding: creating files is most of its
/// time.
fn fingerprint_file(name: &OsStr) -> Option<Seed> {
    let name = name.as_encoded_bytes();
    (!name.ends_with(b".json") && name != b"invoked.timestamp").then_some(Seed::Copy)
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
        ".fingerprint" => packages
            .contains(strip_hash(file)?)
            .then_some(Seed::Fingerprint),
        "build" => packages.contains(strip_hash(file)?).then_some(Seed::Copy),
        // Files named by crate name (`-` becomes `_`): `libserde_json-<hash>.rlib`.
        "deps" => {
            let (stem, extension) = file.rsplit_once('.')?;
            let crate_name = strip_hash(stem.strip_prefix("lib").unwrap_or(stem))?;
            let known = packages.iter().any(|p| p.replace('-', "_") == crate_name);
            match extension {
                "rlib" | "rmeta" if known => Some(Seed::Link),
                // Not the dep-info rustc writes beside them (`.d`): cargo
                // judges freshness by its own copy in the fingerprint.
                "so" | "dylib" | "dll" if known => Some(Seed::Copy),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Seeds `target` (a slot's own target directory) from `sources` (the
/// user's target directory and other slots'), once, with what the build
/// about to run reads: the registry dependencies of `packages` that a
/// source has and `target` lacks, and `incremental`'s incremental state
/// (the user's target directory, for a slot built at the user's paths),
/// only the sessions holding generated code when the build generates code
/// (`generates_code`). A source that does not exist is skipped. Never
/// writes into a source. Stops early, as interrupted and unfinished, once
/// `stop` is cancelled (the run it prepares was).
pub fn seed_target(
    target: &Path,
    sources: &[PathBuf],
    packages: &BTreeSet<String>,
    incremental: Option<&Path>,
    generates_code: bool,
    sharing: Sharing<'_>,
    stop: &CancellationToken,
) -> io::Result<SeedReport> {
    if target.join(SEEDED_BY_LINKS).exists() {
        fs::remove_dir_all(target)?;
    }
    let checked = target.join(SEEDED).exists();
    if checked && (!generates_code || target.join(SEEDED_CODE).exists()) {
        return Ok(SeedReport::default());
    }
    fs::create_dir_all(target)?;
    if let Sharing::Store { store, .. } = sharing {
        fs::create_dir_all(store)?;
    }
    let mut plan = Plan {
        sharing,
        tasks: Vec::new(),
        planned: HashSet::new(),
    };
    if let Some(user) = incremental {
        let sessions = match (checked, generates_code) {
            (false, false) => Sessions::ForCheck,
            (false, true) => Sessions::All,
            // A check's were seeded with the dependencies.
            (true, _) => Sessions::Rest,
        };
        plan.incremental(user, target, sessions)?;
    }
    let dependencies = if checked { &[][..] } else { sources };
    for source in dependencies
        .iter()
        .filter(|source| source.as_path() != target)
    {
        let rustc_info = source.join(RUSTC_INFO);
        if rustc_info.is_file() {
            plan.add(rustc_info, target.join(RUSTC_INFO), Seed::Copy);
        }
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
                    if let Some(how) = name.to_str().and_then(|n| classify(dir, n, packages)) {
                        let how = match (how, sharing) {
                            (Seed::Link, Sharing::Store { from, .. }) if source != from => {
                                Seed::Copy
                            }
                            (how, _) => how,
                        };
                        plan.add(entry.path(), to.join(&name), how);
                    }
                }
            }
        }
    }
    let report = plan.run(stop)?;
    fs::write(target.join(SEEDED), b"")?;
    if generates_code {
        fs::write(target.join(SEEDED_CODE), b"")?;
    }
    Ok(report)
}

/// Which incremental sessions a seeding brings: those a `cargo check`
/// reads, the rest, or both. A check reads every session without
/// generated code (object files among its work products) and those of the
/// crates whose code it runs: build scripts and proc macros, which cargo
/// compiles with code generation even to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sessions {
    ForCheck,
    Rest,
    All,
}

impl Sessions {
    fn wants(self, session: &Path, check_runs_its_code: bool) -> io::Result<bool> {
        if self == Sessions::All {
            return Ok(true);
        }
        let read_by_check = check_runs_its_code
            || !fs::read_dir(session)?
                .filter_map(Result::ok)
                .any(|file| file.file_name().as_encoded_bytes().ends_with(b".o"));
        Ok(read_by_check == (self == Sessions::ForCheck))
    }
}

/// The crates whose code a `cargo check` runs, by crate name: the proc
/// macros among the artifacts of `deps` (a profile's `deps` directory:
/// `lib<name>-<hash>.so`) and, by their name, build scripts.
fn check_runs_code_of(deps: &Path) -> impl Fn(&str) -> bool + use<> {
    let proc_macros: HashSet<String> = fs::read_dir(deps)
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            let (stem, extension) = name.rsplit_once('.')?;
            matches!(extension, "so" | "dylib" | "dll")
                .then(|| strip_hash(stem.strip_prefix("lib").unwrap_or(stem)).map(str::to_owned))
                .flatten()
        })
        .collect();
    move |krate| krate.starts_with("build_script_") || proc_macros.contains(krate)
}

/// What one seeding recreates: each entry a file or a tree, seeded
/// independently of the others, so that several threads share the work
/// (creating files is most of a seeding's time, and a slot's first build
/// waits for it).
struct Plan<'a> {
    sharing: Sharing<'a>,
    tasks: Vec<Task>,
    /// Every destination planned: an entry two sources have is taken from
    /// the first.
    planned: HashSet<PathBuf>,
}

struct Task {
    from: PathBuf,
    to: PathBuf,
    /// How each file of the entry is seeded, by its name; `None` leaves
    /// it out.
    files: fn(&OsStr) -> Option<Seed>,
    /// An incremental session, which rustc may remove while it is seeded:
    /// then it is left out whole.
    session: bool,
}

impl Plan<'_> {
    /// Plans `from` (which exists) at `to`, unless `to` exists already.
    fn add(&mut self, from: PathBuf, to: PathBuf, how: Seed) {
        let files = match how {
            Seed::Link => |_: &OsStr| Some(Seed::Link),
            Seed::Copy => |_: &OsStr| Some(Seed::Copy),
            Seed::Fingerprint => fingerprint_file,
        };
        self.push(from, to, files, false);
    }

    /// Plans `from` at `to` as [`Plan::add`] does, each file seeded as
    /// `files` says.
    fn push(
        &mut self,
        from: PathBuf,
        to: PathBuf,
        files: fn(&OsStr) -> Option<Seed>,
        session: bool,
    ) {
        if self.planned.contains(&to) || fs::symlink_metadata(&to).is_ok() {
            return;
        }
        self.planned.insert(to.clone());
        self.tasks.push(Task {
            from,
            to,
            files,
            session,
        });
    }

    /// Plans the incremental state `from` (a target directory) has and
    /// `to` lacks: each crate's newest finished session, the one rustc
    /// goes on from ([`newest_session`]), never one a running rustc is
    /// still writing, when it is of the kind `sessions` names. The files
    /// only rustc reads ([`session_file`]) are linked: rustc starts each
    /// session by linking the previous one's files into a new directory
    /// and deletes one before saving it again, so a link shares the user's
    /// bytes without ever changing them. The
    /// work products (objects, the crate's metadata) are copied: rustc
    /// links those out as the build's outputs, where cargo sets the
    /// metadata's times and an interrupted build leaves objects that the
    /// next build's code generator writes into. So is the session's lock
    /// file: a lock held in the slot must not be the user's. Only the
    /// workspace's members are built incrementally, and rustc checks each
    /// reused result against the slot's sources itself.
    fn incremental(&mut self, from: &Path, to: &Path, sessions: Sessions) -> io::Result<()> {
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
            let check_runs_code = check_runs_code_of(&from.with_file_name("deps"));
            for krate in crates {
                let krate = krate?;
                if !krate.file_type()?.is_dir() {
                    continue;
                }
                let names: Vec<String> = fs::read_dir(krate.path())?
                    .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
                    .collect();
                let Some(newest) = newest_session(&names) else {
                    continue;
                };
                // `<crate name>-<id>`, the id rustc's.
                let crate_name = krate
                    .file_name()
                    .to_string_lossy()
                    .rsplit_once('-')
                    .map(|(name, _)| name.to_owned())
                    .unwrap_or_default();
                let wanted =
                    sessions.wants(&krate.path().join(newest), check_runs_code(&crate_name));
                // One removed by rustc meanwhile leaves nothing to go on from.
                if !wanted.unwrap_or(false) {
                    continue;
                }
                let dest = to.join(krate.file_name());
                fs::create_dir_all(&dest)?;
                let lock = session_lock(newest);
                if names.contains(&lock) {
                    self.push(
                        krate.path().join(&lock),
                        dest.join(&lock),
                        |_| Some(Seed::Copy),
                        true,
                    );
                }
                self.push(
                    krate.path().join(newest),
                    dest.join(newest),
                    session_file,
                    true,
                );
            }
        }
        Ok(())
    }

    /// Seeds every planned entry, on up to [`SEEDING_THREADS`] threads,
    /// until `stop` is cancelled: then each thread ends its entry and the
    /// seeding fails as interrupted, the entries not begun left to the
    /// next seeding.
    fn run(self, stop: &CancellationToken) -> io::Result<SeedReport> {
        let interrupted = || io::Error::new(ErrorKind::Interrupted, "the seeding was cancelled");
        if stop.is_cancelled() {
            return Err(interrupted());
        }
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, SEEDING_THREADS);
        let next = AtomicUsize::new(0);
        let worker = || -> io::Result<SeedReport> {
            let mut seeding = Seeding {
                sharing: self.sharing,
                report: SeedReport::default(),
                copies: HashMap::new(),
            };
            while let Some(task) = self.tasks.get(next.fetch_add(1, Ordering::Relaxed)) {
                if stop.is_cancelled() {
                    return Err(interrupted());
                }
                match seeding.entry(task) {
                    Ok(()) => {}
                    // A session rustc removed meanwhile is left out whole.
                    Err(err) if task.session && err.kind() == ErrorKind::NotFound => {}
                    Err(err) => {
                        next.store(self.tasks.len(), Ordering::Relaxed); // the others stop
                        return Err(err);
                    }
                }
            }
            Ok(seeding.report)
        };
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads).map(|_| scope.spawn(worker)).collect();
            let mut report = SeedReport::default();
            let mut failed: Option<io::Error> = None;
            for done in workers
                .into_iter()
                .map(|w| w.join().expect("a seeding thread"))
            {
                match done {
                    Ok(done) => {
                        report.linked += done.linked;
                        report.copied += done.copied;
                    }
                    // A real failure is reported over an interruption.
                    Err(err)
                        if failed
                            .as_ref()
                            .is_none_or(|f| f.kind() == ErrorKind::Interrupted) =>
                    {
                        failed = Some(err);
                    }
                    Err(_) => {}
                }
            }
            failed.map_or(Ok(report), Err)
        })
    }
}

/// At most this many threads seed one target directory: file creation
/// scales with cores up to the file system's journal.
const SEEDING_THREADS: usize = 4;

/// One thread's share of a seeding: what it did so far, and the copies it
/// made in the current entry of files that have other names in the source
/// (cargo links each build script under two, in one directory), so that a
/// later name becomes a link to the slot's copy instead of a second copy.
struct Seeding<'a> {
    sharing: Sharing<'a>,
    report: SeedReport,
    copies: HashMap<(u64, u64), PathBuf>,
}

impl Seeding<'_> {
    /// Seeds one planned entry whole or not at all: into a staging name
    /// beside it, renamed into place once complete, so a seeding that
    /// stops half-way (an error, the process killed) never leaves a part
    /// of an entry that a later seeding would take for all of it. A
    /// staging left by such a seeding is removed first.
    fn entry(&mut self, task: &Task) -> io::Result<()> {
        let mut name = OsString::from(".");
        name.push(task.to.file_name().unwrap_or_default());
        name.push(".trellis-seeding");
        let staging = task.to.with_file_name(name);
        remove_if_present(&staging)?;
        // The links between copies are kept within an entry (cargo's two
        // names of a build script share one directory).
        self.copies.clear();
        match self.tree(&task.from, &staging, task.files) {
            Ok(()) => {
                crate::failpoint::hit("seed-entry");
                fs::rename(&staging, &task.to)
            }
            Err(err) => {
                let _ = remove_if_present(&staging);
                Err(err)
            }
        }
    }

    /// Recreates `from` (a file or a directory tree) at `to`, each file as
    /// `files` says by its name: shared as [`Sharing`] says, copied, or
    /// left out. It keeps the links between the files it copies and every
    /// file's and directory's mtime (cargo compares them), never follows a
    /// symlink and never opens an existing file for writing.
    fn tree(
        &mut self,
        from: &Path,
        to: &Path,
        files: fn(&OsStr) -> Option<Seed>,
    ) -> io::Result<()> {
        let meta = fs::symlink_metadata(from)?;
        if meta.is_symlink() {
            return std::os::unix::fs::symlink(fs::read_link(from)?, to);
        }
        if meta.is_dir() {
            fs::create_dir(to)?;
            for entry in fs::read_dir(from)? {
                let entry = entry?;
                self.tree(&entry.path(), &to.join(entry.file_name()), files)?;
            }
            return fs::File::open(to)?.set_times(times(&meta)?);
        }
        // The policy is the file's: a directory is always recreated.
        let Some(how) = from.file_name().map_or(Some(Seed::Copy), files) else {
            return Ok(());
        };
        if let (Seed::Link, Sharing::Store { store, .. }) = (how, self.sharing)
            && let Some(stored) = stored(store, from, &meta)?
        {
            std::os::unix::fs::symlink(stored, to)?;
            self.report.linked += 1;
            return Ok(()); // the store's inode: its times are the source's
        }
        let inode = (meta.dev(), meta.ino());
        if let Some(copy) = self.copies.get(&inode).filter(|_| meta.nlink() > 1)
            && fs::hard_link(copy, to).is_ok()
        {
            self.report.linked += 1;
            return Ok(());
        }
        copy_file(from, to, &meta)?;
        self.report.copied += 1;
        if meta.nlink() > 1 {
            self.copies.insert(inode, to.to_owned());
        }
        Ok(())
    }
}

/// The name in `store` of the file `from` (whose metadata is `meta`):
/// a hard link to it, made unless the store has it already, named by its
/// device and inode, so a file the user rebuilt (a new inode) is a new
/// name, and by its size and modification time, so one written in place
/// since is found ([`written_in_place`]). `None` where it cannot be
/// linked (another file system): then it is copied into the slot instead.
fn stored(store: &Path, from: &Path, meta: &fs::Metadata) -> io::Result<Option<PathBuf>> {
    let mut name = OsString::from(store_stamp(meta));
    name.push("-");
    name.push(from.file_name().unwrap_or_default());
    let entry = store.join(name);
    let same = |entry: &Path| {
        fs::symlink_metadata(entry).is_ok_and(|m| (m.dev(), m.ino()) == (meta.dev(), meta.ino()))
    };
    if same(&entry) {
        return Ok(Some(entry));
    }
    // A name left by a file whose inode number was reused.
    remove_if_present(&entry)?;
    match fs::hard_link(from, &entry) {
        Ok(()) => Ok(Some(entry)),
        // Another seeding thread linked it first.
        Err(err) if err.kind() == ErrorKind::AlreadyExists && same(&entry) => Ok(Some(entry)),
        Err(err) if err.raw_os_error() == Some(libc::EXDEV) => Ok(None),
        Err(err) => Err(err),
    }
}

/// What a store entry's name begins with: the device, inode, size and
/// modification time (in nanoseconds) of the file it links.
fn store_stamp(meta: &fs::Metadata) -> String {
    format!(
        "{:x}-{:x}-{:x}-{:x}",
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime() as i128 * 1_000_000_000 + i128::from(meta.mtime_nsec())
    )
}

/// A store entry whose file is no longer what it was when it was linked:
/// the user's build artifact itself, written in place through a link
/// (nothing that rebuilds one does so: cargo and rustc replace files).
#[derive(Debug, PartialEq, Eq)]
pub struct WrittenInPlace {
    /// The store's name for it.
    pub entry: PathBuf,
    /// Its device and inode: the user's file of the same.
    pub inode: (u64, u64),
}

/// The entries of `store` whose size or modification time no longer
/// matches their name: each a file of the user's written in place.
pub fn written_in_place(store: &Path) -> io::Result<Vec<WrittenInPlace>> {
    let entries = match fs::read_dir(store) {
        Ok(entries) => entries,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if !name
            .as_encoded_bytes()
            .starts_with(store_stamp(&meta).as_bytes())
        {
            found.push(WrittenInPlace {
                entry: entry.path(),
                inode: (meta.dev(), meta.ino()),
            });
        }
    }
    found.sort_by(|a, b| a.entry.cmp(&b.entry));
    Ok(found)
}

/// Copies the file `from` (whose metadata is `meta`) to a new file `to`,
/// with its permissions and times: one open of each.
fn copy_file(from: &Path, to: &Path, meta: &fs::Metadata) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut source = fs::File::open(from)?;
    let mut copy = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(meta.mode() & 0o7777)
        .open(to)?;
    io::copy(&mut source, &mut copy)?;
    copy.set_times(times(meta)?)
}

/// The access and modification times of `meta`, to set on a copy.
fn times(meta: &fs::Metadata) -> io::Result<fs::FileTimes> {
    Ok(fs::FileTimes::new()
        .set_modified(meta.modified()?)
        .set_accessed(meta.accessed()?))
}

/// The session rustc starts a crate's next one from: of the finished ones
/// (`s-<timestamp>-<random>-<hash>`; `-working` while rustc writes it), the
/// one with the latest timestamp (base 36). The older ones are rustc's
/// garbage, left to be collected.
fn newest_session(names: &[String]) -> Option<&str> {
    names
        .iter()
        .filter_map(|name| {
            let mut parts = name.strip_prefix("s-")?.split('-');
            let timestamp = u128::from_str_radix(parts.next()?, 36).ok()?;
            let (_random, hash) = (parts.next()?, parts.next()?);
            (hash != "working" && parts.next().is_none()).then_some((timestamp, name.as_str()))
        })
        .max()
        .map(|(_, name)| name)
}

/// The lock file of the session `name` (`s-<timestamp>-<random>.lock`),
/// without which rustc deletes the session.
fn session_lock(name: &str) -> String {
    let unhashed = name.rsplit_once('-').map_or(name, |(unhashed, _)| unhashed);
    format!("{unhashed}.lock")
}

/// How a file of an incremental session is seeded: linked when only rustc
/// reads it (its dependency graph, query cache and index of work
/// products, never a build's output), copied otherwise.
fn session_file(name: &OsStr) -> Option<Seed> {
    let private = ["dep-graph.bin", "query-cache.bin", "work-products.bin"]
        .iter()
        .any(|private| name == *private);
    Some(if private { Seed::Link } else { Seed::Copy })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`seed_target`] with a stop that is never cancelled, sharing the
    /// files of the user's target directory (the first source, or the
    /// incremental state's) through a store beside `target`.
    fn seed(
        target: &Path,
        sources: &[PathBuf],
        packages: &BTreeSet<String>,
        incremental: Option<&Path>,
        generates_code: bool,
    ) -> io::Result<SeedReport> {
        let store = store_of(target);
        let from = sources.first().map(PathBuf::as_path).or(incremental);
        let sharing = from.map_or(Sharing::Copy, |from| Sharing::Store {
            store: &store,
            from,
        });
        seed_target(
            target,
            sources,
            packages,
            incremental,
            generates_code,
            sharing,
            &CancellationToken::new(),
        )
    }

    fn store_of(target: &Path) -> PathBuf {
        target.with_file_name("store")
    }

    /// Whether `slot_file` shares `user_file`'s bytes: a symbolic link to
    /// the store's hard link of it, never a hard link in the slot.
    fn shared(slot_file: &Path, user_file: &Path, store: &Path) -> bool {
        let link = fs::symlink_metadata(slot_file).unwrap();
        link.is_symlink()
            && fs::read_link(slot_file).unwrap().starts_with(store)
            && ino(slot_file) == ino(user_file)
    }

    fn ino(path: &Path) -> u64 {
        fs::metadata(path).unwrap().ino()
    }

    fn seeded(linked: u64, copied: u64) -> SeedReport {
        SeedReport { linked, copied }
    }

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
        let packages = lock_packages(LOCK);
        assert_eq!(
            packages.registry,
            BTreeSet::from(["proc-macro2".to_owned()])
        );
        assert_eq!(
            packages.path,
            BTreeSet::from(["app".to_owned(), "regex".to_owned()])
        );
        assert_eq!(lock_packages("not = [toml"), LockPackages::default());
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
        assert_eq!(seed("deps", format!("proc_macro2-{hash}.d")), None);
        assert_eq!(
            seed("deps", format!("libserde_derive-{hash}.so")),
            Some(Seed::Copy)
        );
        assert_eq!(
            seed(".fingerprint", format!("proc-macro2-{hash}")),
            Some(Seed::Fingerprint)
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

    /// A finished session of `crate_dir` at `timestamp` (base 36), with its
    /// lock file and one file of rustc's own and one work product.
    fn session(crate_dir: &Path, timestamp: &str) -> PathBuf {
        let session = crate_dir.join(format!("s-{timestamp}-0c853im-6bsk66ekykmel"));
        fs::create_dir_all(&session).unwrap();
        fs::write(session.join("dep-graph.bin"), b"graph").unwrap();
        fs::write(session.join("metadata.rmeta"), b"work product").unwrap();
        fs::write(crate_dir.join(format!("s-{timestamp}-0c853im.lock")), b"").unwrap();
        session
    }

    #[test]
    fn incremental_sessions_share_only_rustcs_own_files() {
        let dir = tempfile::tempdir().unwrap();
        let (user, slot) = (dir.path().join("user"), dir.path().join("slot"));
        let incremental = user.join("debug/incremental/app-1x2y");
        let done = session(&incremental, "hooqxktvt0");
        fs::create_dir_all(incremental.join("s-hooqxzzzzz-1v68f3b-working")).unwrap();

        let report = seed(&slot, &[], &BTreeSet::new(), Some(&user), true).unwrap();
        assert_eq!(report, seeded(1, 2));
        let crate_dir = slot.join("debug/incremental/app-1x2y");
        let seeded = crate_dir.join(done.file_name().unwrap());
        assert!(
            shared(
                &seeded.join("dep-graph.bin"),
                &done.join("dep-graph.bin"),
                &store_of(&slot)
            ),
            "rustc's own file is shared through the store"
        );
        assert_ne!(
            ino(&seeded.join("metadata.rmeta")),
            ino(&done.join("metadata.rmeta")),
            "a work product, linked out as a build output, is the slot's own"
        );
        let lock = "s-hooqxktvt0-0c853im.lock";
        assert_ne!(
            ino(&crate_dir.join(lock)),
            ino(&incremental.join(lock)),
            "the lock is the slot's own"
        );
        assert!(!crate_dir.join("s-hooqxzzzzz-1v68f3b-working").exists());
    }

    #[test]
    fn sessions_with_generated_code_wait_for_the_first_build_that_generates_code() {
        let dir = tempfile::tempdir().unwrap();
        let (user, slot) = (dir.path().join("user"), dir.path().join("slot"));
        let incremental = user.join("debug/incremental");
        let with_code = |krate: &str| {
            let session = session(&incremental.join(krate), "hooqxktvt0");
            fs::write(session.join("4ejx9v.o"), b"object").unwrap();
            session
        };
        let checked = session(&incremental.join("app-check"), "hooqxktvt0");
        let built = with_code("app-build");
        // Code a check runs: a build script's and a proc macro's (a member,
        // known by its library in `deps`).
        let build_script = with_code("build_script_build-2xk3q");
        let proc_macro = with_code("app_derive-1hyiz6");
        let rlib = "debug/deps/libregex-0123456789abcdef.rlib";
        fs::create_dir_all(user.join("debug/deps")).unwrap();
        fs::write(user.join(rlib), b"rlib").unwrap();
        fs::write(
            user.join("debug/deps/libapp_derive-0123456789abcdef.so"),
            b"",
        )
        .unwrap();
        let packages = BTreeSet::from(["regex".to_owned()]);
        let sources = std::slice::from_ref(&user);
        let in_slot = |session: &Path| {
            let krate = session.parent().unwrap().file_name().unwrap();
            slot.join("debug/incremental")
                .join(krate)
                .join(session.file_name().unwrap())
        };

        // A check: the dependencies and the session of a check.
        let check = seed(&slot, sources, &packages, Some(&user), false).unwrap();
        assert_eq!(
            check,
            seeded(4, 8),
            "rlib and three graphs linked; three sessions' metadata and locks, two objects copied"
        );
        assert!(in_slot(&checked).is_dir());
        assert!(in_slot(&build_script).join("4ejx9v.o").is_file());
        assert!(in_slot(&proc_macro).join("4ejx9v.o").is_file());
        assert!(
            !in_slot(&built).exists(),
            "code a check never reads was seeded"
        );
        assert_eq!(
            seed(&slot, sources, &packages, Some(&user), false).unwrap(),
            SeedReport::default()
        );

        // The first build that generates code: only the session with code.
        let test = seed(&slot, sources, &packages, Some(&user), true).unwrap();
        assert_eq!(
            test,
            seeded(1, 3),
            "graph linked; metadata, object and lock copied"
        );
        assert_eq!(
            fs::read(in_slot(&built).join("4ejx9v.o")).unwrap(),
            b"object"
        );
        assert_eq!(
            seed(&slot, sources, &packages, Some(&user), true).unwrap(),
            SeedReport::default(),
            "seeded once"
        );
    }

    #[test]
    fn only_the_session_rustc_goes_on_from_is_seeded() {
        let dir = tempfile::tempdir().unwrap();
        let (user, slot) = (dir.path().join("user"), dir.path().join("slot"));
        let incremental = user.join("debug/incremental/app-1x2y");
        // Base 36: `hooqxktvt0` is later than `hooqwouz9n`, and than the
        // shorter `zzzzzzzzz` a lexical comparison would take.
        let newest = session(&incremental, "hooqxktvt0");
        for older in ["hooqwouz9n", "zzzzzzzzz"] {
            session(&incremental, older);
        }

        seed(&slot, &[], &BTreeSet::new(), Some(&user), true).unwrap();
        let mut seeded: Vec<_> = fs::read_dir(slot.join("debug/incremental/app-1x2y"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        seeded.sort();
        assert_eq!(
            seeded,
            [
                newest.file_name().unwrap().to_owned(),
                OsString::from("s-hooqxktvt0-0c853im.lock")
            ]
        );
    }

    #[test]
    fn an_entry_two_sources_have_is_taken_from_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let hash = "0123456789abcdef";
        let sources: Vec<PathBuf> = ["user", "other-slot"]
            .iter()
            .map(|name| {
                let source = dir.path().join(name);
                let fingerprint = source.join(format!("debug/.fingerprint/regex-{hash}"));
                fs::create_dir_all(&fingerprint).unwrap();
                fs::write(fingerprint.join("lib-regex"), name).unwrap();
                source
            })
            .collect();
        let slot = dir.path().join("slot");
        let packages = BTreeSet::from(["regex".to_owned()]);

        let report = seed(&slot, &sources, &packages, None, false).unwrap();
        assert_eq!(report.copied, 1);
        let seeded = slot.join(format!("debug/.fingerprint/regex-{hash}/lib-regex"));
        assert_eq!(fs::read(seeded).unwrap(), b"user");
    }

    #[test]
    fn a_copy_never_writes_through_a_file_already_there() {
        let dir = tempfile::tempdir().unwrap();
        let (user, slot) = (dir.path().join("user"), dir.path().join("slot"));
        fs::write(&user, b"the user's").unwrap();
        // The fault: the destination is already a link to the user's file.
        fs::hard_link(&user, &slot).unwrap();
        let source = dir.path().join("source");
        fs::write(&source, b"new bytes").unwrap();

        let err = copy_file(&source, &slot, &fs::metadata(&source).unwrap()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&user).unwrap(), b"the user's");
    }

    #[test]
    fn an_entry_that_fails_half_way_is_left_out_whole_and_seeded_again_later() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user");
        let hash = "0123456789abcdef";
        let fingerprint = user.join(format!("debug/.fingerprint/regex-{hash}"));
        fs::create_dir_all(&fingerprint).unwrap();
        fs::write(fingerprint.join("a-lib-regex"), b"first").unwrap();
        // The fault: a file that cannot be opened (a socket), met after
        // the entry's first file was copied.
        let socket = fingerprint.join("b-socket");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let (slot, packages) = (
            dir.path().join("slot"),
            BTreeSet::from(["regex".to_owned()]),
        );
        let seeded = slot.join(format!("debug/.fingerprint/regex-{hash}"));

        assert!(seed(&slot, std::slice::from_ref(&user), &packages, None, false).is_err());
        let left: Vec<_> = fs::read_dir(seeded.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "a part of the entry was left: {left:?}");

        drop(listener);
        fs::remove_file(&socket).unwrap();
        // An interrupted seeding's staging, as a killed process leaves it.
        let staging = seeded.with_file_name(format!(".regex-{hash}.trellis-seeding"));
        fs::create_dir_all(&staging).unwrap();
        seed(&slot, std::slice::from_ref(&user), &packages, None, false).unwrap();
        assert_eq!(fs::read(seeded.join("a-lib-regex")).unwrap(), b"first");
        assert!(!staging.exists());
    }

    #[test]
    fn a_stopped_seeding_begins_no_entry_and_the_next_one_seeds_them_all() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user");
        let hash = "0123456789abcdef";
        fs::create_dir_all(user.join("debug/deps")).unwrap();
        fs::write(
            user.join(format!("debug/deps/libregex-{hash}.rlib")),
            b"rlib",
        )
        .unwrap();
        let fingerprint = user.join(format!("debug/.fingerprint/regex-{hash}"));
        fs::create_dir_all(&fingerprint).unwrap();
        fs::write(fingerprint.join("lib-regex"), b"hash").unwrap();
        let (slot, packages) = (
            dir.path().join("slot"),
            BTreeSet::from(["regex".to_owned()]),
        );
        let stop = CancellationToken::new();
        stop.cancel();

        let err = seed_target(
            &slot,
            std::slice::from_ref(&user),
            &packages,
            None,
            false,
            Sharing::Copy,
            &stop,
        )
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Interrupted);
        assert!(
            !slot.join(SEEDED).exists(),
            "an unfinished seeding is not done"
        );
        assert!(
            !slot
                .join(format!("debug/deps/libregex-{hash}.rlib"))
                .exists()
        );
        assert!(
            !slot
                .join(format!("debug/.fingerprint/regex-{hash}"))
                .exists()
        );

        let report = seed(&slot, std::slice::from_ref(&user), &packages, None, false).unwrap();
        assert_eq!(report, seeded(1, 1));
        assert!(slot.join(SEEDED).exists());
    }

    #[test]
    fn a_file_with_two_names_is_copied_once() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user");
        let build = user.join("debug/build/serde-0123456789abcdef");
        fs::create_dir_all(&build).unwrap();
        fs::write(build.join("build-script-build"), b"executable").unwrap();
        fs::hard_link(
            build.join("build-script-build"),
            build.join("build_script_build-0123456789abcdef"),
        )
        .unwrap();
        let packages = BTreeSet::from(["serde".to_owned()]);
        let slot = dir.path().join("slot");

        let report = seed(&slot, std::slice::from_ref(&user), &packages, None, false).unwrap();
        assert_eq!(report, seeded(1, 1));
        let copied = slot.join("debug/build/serde-0123456789abcdef");
        let names = [
            copied.join("build-script-build"),
            copied.join("build_script_build-0123456789abcdef"),
        ];
        assert_eq!(ino(&names[0]), ino(&names[1]), "one copy under both names");
        assert_ne!(ino(&names[0]), ino(&build.join("build-script-build")));
        fs::write(&names[1], b"rebuilt in the slot").unwrap();
        assert_eq!(
            fs::read(build.join("build-script-build")).unwrap(),
            b"executable"
        );
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
        write(&format!(".fingerprint/regex-{hash}/dep-lib-regex"));
        write(&format!(".fingerprint/regex-{hash}/lib-regex.json"));
        write(&format!(".fingerprint/regex-{hash}/invoked.timestamp"));
        write(&format!("deps/libapp-{hash}.rlib"));
        fs::write(user.join(RUSTC_INFO), b"{}").unwrap();
        let packages = BTreeSet::from(["regex".to_owned()]);
        let slot = dir.path().join("slot");

        let report = seed(&slot, std::slice::from_ref(&user), &packages, None, false).unwrap();
        assert_eq!(report, seeded(1, 3));
        let mut fingerprints: Vec<_> =
            fs::read_dir(slot.join(format!("debug/.fingerprint/regex-{hash}")))
                .unwrap()
                .map(|entry| entry.unwrap().file_name())
                .collect();
        fingerprints.sort();
        assert_eq!(
            fingerprints,
            ["dep-lib-regex", "lib-regex"],
            "the hash and the dep-info, not what cargo reads once the unit is dirty"
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
        assert_eq!(
            fs::read(slot.join(RUSTC_INFO)).unwrap(),
            b"{}",
            "cargo's rustc cache"
        );

        write(&format!("deps/libregex-{hash}.rmeta"));
        let again = seed(&slot, &[user], &packages, None, false).unwrap();
        assert_eq!(again, SeedReport::default(), "seeded once");
    }

    /// Every regular file of `dir`'s tree, with its inode.
    fn inodes(dir: &Path) -> Vec<(PathBuf, u64)> {
        let mut found = Vec::new();
        for entry in fs::read_dir(dir).into_iter().flatten() {
            let entry = entry.unwrap();
            let meta = fs::symlink_metadata(entry.path()).unwrap();
            if meta.is_dir() {
                found.extend(inodes(&entry.path()));
            } else if meta.is_file() {
                found.push((entry.path(), meta.ino()));
            }
        }
        found
    }

    /// A user target directory with one registry rlib and one incremental
    /// session, as a slot built at the user's paths seeds them.
    fn user_target(dir: &Path) -> (PathBuf, PathBuf) {
        let user = dir.join("user");
        let rlib = user.join("debug/deps/libregex-0123456789abcdef.rlib");
        fs::create_dir_all(rlib.parent().unwrap()).unwrap();
        fs::write(&rlib, b"rlib").unwrap();
        session(&user.join("debug/incremental/app-1x2y"), "hooqxktvt0");
        (user, rlib)
    }

    #[test]
    fn no_file_of_the_slot_is_a_hard_link_to_the_users() {
        let dir = tempfile::tempdir().unwrap();
        let (user, rlib) = user_target(dir.path());
        let slot = dir.path().join("slot");
        let packages = BTreeSet::from(["regex".to_owned()]);

        let report = seed(
            &slot,
            std::slice::from_ref(&user),
            &packages,
            Some(&user),
            true,
        )
        .unwrap();
        assert_eq!(report.linked, 2, "the rlib and the dependency graph");
        let users: Vec<u64> = inodes(&user).into_iter().map(|(_, ino)| ino).collect();
        for (file, ino) in inodes(&slot) {
            assert!(
                !users.contains(&ino),
                "{} is the user's file",
                file.display()
            );
        }
        let seeded = slot.join("debug/deps/libregex-0123456789abcdef.rlib");
        assert!(shared(&seeded, &rlib, &store_of(&slot)));
        // A rebuild in the slot replaces the link, never the user's bytes.
        fs::remove_file(&seeded).unwrap();
        fs::write(&seeded, b"rebuilt").unwrap();
        assert_eq!(fs::read(&rlib).unwrap(), b"rlib");
    }

    #[test]
    fn without_a_sandbox_nothing_is_shared() {
        let dir = tempfile::tempdir().unwrap();
        let (user, _) = user_target(dir.path());
        let slot = dir.path().join("slot");
        let packages = BTreeSet::from(["regex".to_owned()]);

        let report = seed_target(
            &slot,
            std::slice::from_ref(&user),
            &packages,
            Some(&user),
            true,
            Sharing::Copy,
            &CancellationToken::new(),
        )
        .unwrap();
        assert_eq!(report.linked, 0);
        let users: Vec<u64> = inodes(&user).into_iter().map(|(_, ino)| ino).collect();
        assert!(inodes(&slot).iter().all(|(_, ino)| !users.contains(ino)));
        assert!(!store_of(&slot).exists(), "no store without sharing");
        let seeded = slot.join("debug/deps/libregex-0123456789abcdef.rlib");
        assert!(fs::symlink_metadata(&seeded).unwrap().is_file());
    }

    #[test]
    fn what_another_slot_built_is_copied_never_shared() {
        let dir = tempfile::tempdir().unwrap();
        let (user, other) = (dir.path().join("user"), dir.path().join("other-slot"));
        fs::create_dir_all(&user).unwrap();
        let built = other.join("debug/deps/libregex-0123456789abcdef.rlib");
        fs::create_dir_all(built.parent().unwrap()).unwrap();
        fs::write(&built, b"built in the other slot").unwrap();
        let slot = dir.path().join("slot");
        let packages = BTreeSet::from(["regex".to_owned()]);

        let report = seed(&slot, &[user, other], &packages, None, false).unwrap();
        assert_eq!((report.linked, report.copied), (0, 1));
        let seeded = slot.join("debug/deps/libregex-0123456789abcdef.rlib");
        assert!(fs::symlink_metadata(&seeded).unwrap().is_file());
        assert_ne!(ino(&seeded), ino(&built));
    }

    #[test]
    fn a_target_an_older_trellis_seeded_with_hard_links_is_seeded_anew() {
        let dir = tempfile::tempdir().unwrap();
        let (user, rlib) = user_target(dir.path());
        let slot = dir.path().join("slot");
        let old = slot.join("debug/deps/libregex-0123456789abcdef.rlib");
        fs::create_dir_all(old.parent().unwrap()).unwrap();
        fs::hard_link(&rlib, &old).unwrap();
        fs::write(slot.join(SEEDED_BY_LINKS), b"").unwrap();
        let packages = BTreeSet::from(["regex".to_owned()]);

        seed(&slot, std::slice::from_ref(&user), &packages, None, false).unwrap();
        assert!(!slot.join(SEEDED_BY_LINKS).exists());
        assert!(
            shared(&old, &rlib, &store_of(&slot)),
            "relinked through the store"
        );
    }
}
