//! The parts of a `Cargo.toml` and of cargo's configuration that decide
//! which tests run, put back as they were at a repair's start
//! (`test_policy = "backward-compatible"`).
//!
//! A candidate can switch tests off without touching a test: `[lib]
//! test = false`, a `[[test]]` table removed or given `harness = false`,
//! `package.autotests = false`, a `[features]` default that no longer
//! enables the feature a `#[cfg(feature = "..")]` test needs, a member
//! dropped from `workspace.members`, a `[profile]` without debug
//! assertions, a `.cargo/config.toml` adding `--cfg` flags, another
//! toolchain, a build script printing `cargo:rustc-cfg`. So the run of the original tests gets the original's
//! test-deciding parts ([`TEST_DECIDING`], whole, their absence included)
//! inside the candidate's manifest, which keeps everything else it changed
//! (a dependency its fix needs, a version), and cargo's configuration
//! files ([`is_build_config`]) and the packages' build scripts
//! ([`build_script_manifest`]) whole as they were.
//!
//! Pure: text in, text out, edited with `toml_edit` so the rest of the
//! candidate's manifest keeps its formatting, compared with `toml` so a
//! reformatted table is no change. It never reads or writes a file
//! (`effects.rs` does, in the branch slot).

use toml_edit::{DocumentMut, Item, Table};

/// Where a manifest says which targets `cargo test --workspace` builds and
/// runs, and with what: each a key path from the manifest's root.
const TEST_DECIDING: &[&[&str]] = &[
    &["lib"],
    &["bin"],
    &["test"],
    &["bench"],
    &["example"],
    &["package", "autolib"],
    &["package", "autobins"],
    &["package", "autotests"],
    &["package", "autobenches"],
    &["package", "autoexamples"],
    &["package", "build"],
    &["features"],
    &["profile"],
    &["workspace", "members"],
    &["workspace", "exclude"],
];

/// The configuration files cargo and rustup read from the directory the
/// test stage runs in (the workspace root): a candidate that adds one is
/// measured without it.
pub(super) const ROOT_BUILD_CONFIGS: [&str; 4] = [
    ".cargo/config.toml",
    ".cargo/config",
    "rust-toolchain.toml",
    "rust-toolchain",
];

/// Whether `path` is a package manifest, put back part by part
/// ([`with_original_targets`]).
pub(super) fn is_manifest(path: &str) -> bool {
    file_name(path) == "Cargo.toml"
}

/// Whether `path` is cargo's or rustup's configuration, put back whole. At
/// any depth, like a test file: the test stage reads the root's, but which
/// one a later `cargo test` in a member reads is not this module's guess.
pub(super) fn is_build_config(path: &str) -> bool {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    matches!(name, "rust-toolchain" | "rust-toolchain.toml")
        || (file_name(dir) == ".cargo" && matches!(name, "config" | "config.toml"))
}

/// The manifest beside `path` when `path` is a `build.rs`: the package's
/// build script when that manifest is a package's (the caller knows), put
/// back whole, or absent when the start had none, since its
/// `cargo:rustc-cfg` lines decide which tests compile.
pub(super) fn build_script_manifest(path: &str) -> Option<String> {
    match path.rsplit_once('/') {
        Some((dir, "build.rs")) => Some(format!("{dir}/Cargo.toml")),
        None if path == "build.rs" => Some("Cargo.toml".to_owned()),
        _ => None,
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(_, name)| name)
}

/// `candidate`'s manifest with `original`'s [`TEST_DECIDING`] parts in
/// place of its own; `None` when they are the same (the candidate's own
/// run decides its tests as the original did), or when either does not
/// parse (an unparsable original ran no test; an unparsable candidate
/// fails its own build).
pub(super) fn with_original_targets(original: &str, candidate: &str) -> Option<String> {
    let was: toml::Table = original.parse().ok()?;
    let now: toml::Table = candidate.parse().ok()?;
    let source: DocumentMut = original.parse().ok()?;
    let mut out: DocumentMut = candidate.parse().ok()?;
    let mut changed = false;
    for path in TEST_DECIDING {
        if value_at(&was, path) == value_at(&now, path) {
            continue;
        }
        changed = true;
        let item = item_at(source.as_item(), path).cloned();
        put(&mut out, path, item);
    }
    changed.then(|| out.to_string())
}

fn value_at<'t>(table: &'t toml::Table, path: &[&str]) -> Option<&'t toml::Value> {
    let (last, parents) = path.split_last()?;
    let mut table = table;
    for key in parents {
        table = table.get(*key)?.as_table()?;
    }
    table.get(*last)
}

fn item_at<'d>(item: &'d Item, path: &[&str]) -> Option<&'d Item> {
    path.iter()
        .try_fold(item, |item, key| item.as_table_like()?.get(key))
}

/// Sets `path` in `doc` to `item`, or removes it for `None`. A restored
/// table takes the place of the candidate's (its tables are emitted where
/// the candidate's were) or, where the candidate has none, goes after the
/// tables before it. A parent the candidate made something other than a
/// table is left to fail its build.
fn put(doc: &mut DocumentMut, path: &[&str], item: Option<Item>) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut table = doc.as_table_mut() as &mut dyn toml_edit::TableLike;
    for key in parents {
        if item.is_none() && table.get(key).is_none() {
            return;
        }
        let Some(next) = table
            .entry(key)
            .or_insert_with(|| Item::Table(Table::new()))
            .as_table_like_mut()
        else {
            return;
        };
        table = next;
    }
    match item {
        None => {
            table.remove(last);
        }
        Some(mut item) => {
            let at = table.get(last).and_then(first_position);
            place(&mut item, at);
            table.insert(last, item);
        }
    }
}

/// Where the first table of `item` is emitted in its document.
fn first_position(item: &Item) -> Option<isize> {
    match item {
        Item::Table(t) => table_position(t),
        Item::ArrayOfTables(a) => a.iter().find_map(table_position),
        _ => None,
    }
}

fn table_position(table: &Table) -> Option<isize> {
    table
        .position()
        .or_else(|| table.iter().find_map(|(_, i)| first_position(i)))
}

/// Gives every table of `item` the position `at` (`None`: after the
/// table visited before it), keeping their order among themselves.
fn place(item: &mut Item, at: Option<isize>) {
    let place_table = |t: &mut Table| {
        t.set_position(at);
        for (_, inner) in t.iter_mut() {
            place(inner, at);
        }
    };
    match item {
        Item::Table(t) => place_table(t),
        Item::ArrayOfTables(a) => a.iter_mut().for_each(place_table),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const BASE: &str = r#"[package]
name = "calc"
version = "0.1.0"
edition = "2021"

# The library's own tests run.
[lib]
path = "src/lib.rs"

[features]
default = ["checks"]
checks = []

[dependencies]
serde = "1"

[[test]]
name = "adds"
path = "tests/adds.rs"

[workspace]
members = ["helper"]
"#;

    fn table(text: &str) -> toml::Table {
        text.parse().unwrap()
    }

    #[test]
    fn a_changed_dependency_or_version_needs_no_other_run() {
        let candidate = BASE
            .replace(
                "serde = \"1\"",
                "serde = \"1\"\nhelper = { path = \"helper\" }",
            )
            .replace("0.1.0", "0.2.0");
        assert_eq!(with_original_targets(BASE, &candidate), None);
        // The same table written another way is no change either.
        let lib = "[lib]\npath = \"src/lib.rs\"\n";
        for other in [
            "lib = { path = \"src/lib.rs\" }\n",
            "lib.path = \"src/lib.rs\"\n",
        ] {
            let moved =
                BASE.replace(lib, "")
                    .replacen("[package]", &format!("{other}\n[package]"), 1);
            assert_eq!(with_original_targets(BASE, &moved), None, "{moved}");
        }
    }

    #[test]
    fn tests_switched_off_in_lib_come_back_and_the_fix_s_dependency_stays() {
        let candidate = BASE
            .replace(
                "path = \"src/lib.rs\"",
                "path = \"src/lib.rs\"\ntest = false\ndoctest = false",
            )
            .replace(
                "serde = \"1\"",
                "serde = \"1\"\nhelper = { path = \"helper\" }",
            );
        let run = with_original_targets(BASE, &candidate).unwrap();
        let parsed = table(&run);
        assert_eq!(parsed["lib"], table(BASE)["lib"], "{run}");
        assert_eq!(
            parsed["dependencies"],
            table(&candidate)["dependencies"],
            "{run}"
        );
        // The restored table is where it was, with its comment; the rest
        // keeps the candidate's text.
        assert!(
            run.contains(
                "# The library's own tests run.\n[lib]\npath = \"src/lib.rs\"\n\n[features]"
            ),
            "{run}"
        );
        assert!(run.contains("helper = { path = \"helper\" }"), "{run}");
    }

    #[test]
    fn removed_and_added_targets_are_as_they_were() {
        let removed = BASE.replace("[[test]]\nname = \"adds\"\npath = \"tests/adds.rs\"\n", "");
        let run = with_original_targets(BASE, &removed).unwrap();
        assert_eq!(table(&run)["test"], table(BASE)["test"], "{run}");

        let added = format!("{BASE}\n[[bench]]\nname = \"speed\"\nharness = false\n");
        let run = with_original_targets(BASE, &added).unwrap();
        assert_eq!(table(&run), table(BASE), "{run}");

        let harness = BASE.replace(
            "path = \"tests/adds.rs\"",
            "path = \"tests/adds.rs\"\nharness = false",
        );
        let run = with_original_targets(BASE, &harness).unwrap();
        assert_eq!(table(&run), table(BASE), "{run}");
    }

    #[test]
    fn auto_discovery_features_and_members_are_put_back() {
        let candidate = BASE
            .replace(
                "edition = \"2021\"",
                "edition = \"2021\"\nautotests = false\nautoexamples = false",
            )
            .replace("default = [\"checks\"]", "default = []")
            .replace("members = [\"helper\"]", "members = []");
        let run = with_original_targets(BASE, &candidate).unwrap();
        assert_eq!(table(&run), table(BASE), "{run}");
        // A key the original set and the candidate dropped comes back.
        let original = BASE.replace("edition = \"2021\"", "edition = \"2021\"\nautobins = false");
        let run = with_original_targets(&original, BASE).unwrap();
        assert_eq!(table(&run), table(&original), "{run}");
    }

    #[test]
    fn unparsable_text_is_left_to_its_own_build() {
        assert_eq!(with_original_targets(BASE, "[lib\ntest = false"), None);
        assert_eq!(with_original_targets("[package", BASE), None);
    }

    #[test]
    fn build_configs_are_cargo_s_and_rustup_s_files() {
        for path in [
            ".cargo/config.toml",
            ".cargo/config",
            "crates/core/.cargo/config.toml",
            "rust-toolchain",
            "rust-toolchain.toml",
            "crates/core/rust-toolchain.toml",
        ] {
            assert!(is_build_config(path), "{path}");
        }
        for path in [
            "config.toml",
            ".cargo/credentials.toml",
            "cargo/config.toml",
            "Cargo.toml",
        ] {
            assert!(!is_build_config(path), "{path}");
        }
        assert!(is_manifest("Cargo.toml") && is_manifest("crates/core/Cargo.toml"));
        assert_eq!(
            build_script_manifest("build.rs").as_deref(),
            Some("Cargo.toml")
        );
        assert_eq!(
            build_script_manifest("crates/core/build.rs").as_deref(),
            Some("crates/core/Cargo.toml")
        );
        assert_eq!(build_script_manifest("src/build.rs.bak"), None);
        assert_eq!(build_script_manifest("src/rebuild.rs"), None);
        assert!(!is_manifest("Cargo.lock") && !is_manifest("src/Cargo.toml.rs"));
    }

    type Edit = fn(&mut DocumentMut);

    /// Edits that change which tests run, each on [`BASE`].
    const TEST_EDITS: &[Edit] = &[
        |d| d["lib"]["test"] = toml_edit::value(false),
        |d| d["lib"]["harness"] = toml_edit::value(false),
        |d| d["lib"]["doctest"] = toml_edit::value(false),
        |d| {
            d["test"][0]["required-features"] =
                toml_edit::value(toml_edit::Array::from_iter(["never"]))
        },
        |d| {
            d.remove("test");
        },
        |d| d["package"]["autotests"] = toml_edit::value(false),
        |d| d["package"]["autolib"] = toml_edit::value(false),
        |d| d["features"]["default"] = toml_edit::value(toml_edit::Array::new()),
        |d| {
            let mut bin = Table::new();
            bin["name"] = toml_edit::value("tool");
            bin["test"] = toml_edit::value(false);
            d["bin"] = Item::ArrayOfTables(toml_edit::ArrayOfTables::from_iter([bin]));
        },
        |d| d["profile"]["test"]["debug-assertions"] = toml_edit::value(false),
        |d| d["workspace"]["members"] = toml_edit::value(toml_edit::Array::new()),
    ];

    /// Edits a fix may make, none deciding a test.
    const OTHER_EDITS: &[Edit] = &[
        |d| d["dependencies"]["helper"]["path"] = toml_edit::value("helper"),
        |d| d["dependencies"]["serde"] = toml_edit::value("1.0.200"),
        |d| d["dev-dependencies"]["pretty"] = toml_edit::value("1"),
        |d| d["package"]["version"] = toml_edit::value("0.3.0"),
        |d| d["package"]["description"] = toml_edit::value("A calculator."),
        |d| d["workspace"]["resolver"] = toml_edit::value("2"),
    ];

    fn apply(edits: &[Edit], mask: &[bool], doc: &mut DocumentMut) {
        for (edit, on) in edits.iter().zip(mask) {
            if *on {
                edit(doc);
            }
        }
    }

    proptest! {
        #![proptest_config(trellis_core::fuzz::config(64))]

        /// Whatever subset of test-deciding and other edits a candidate
        /// made, the manifest that runs decides the tests as the original
        /// did and is the candidate's otherwise (putting the original's
        /// parts back again changes nothing).
        #[test]
        fn every_test_deciding_edit_is_undone_and_every_other_kept(
            tests in prop::collection::vec(any::<bool>(), TEST_EDITS.len()),
            others in prop::collection::vec(any::<bool>(), OTHER_EDITS.len()),
        ) {
            let mut doc: DocumentMut = BASE.parse().unwrap();
            apply(TEST_EDITS, &tests, &mut doc);
            apply(OTHER_EDITS, &others, &mut doc);
            let candidate = doc.to_string();
            let mut expected: DocumentMut = BASE.parse().unwrap();
            apply(OTHER_EDITS, &others, &mut expected);
            let expected = table(&expected.to_string());

            match with_original_targets(BASE, &candidate) {
                None => {
                    prop_assert!(!tests.contains(&true), "{}", candidate);
                    prop_assert_eq!(table(&candidate), expected);
                }
                Some(run) => {
                    prop_assert!(tests.contains(&true), "{}", run);
                    prop_assert_eq!(table(&run), expected, "{}", run);
                    prop_assert_eq!(with_original_targets(BASE, &run), None, "{}", run);
                }
            }
        }
    }
}
