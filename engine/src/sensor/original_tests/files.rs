//! Which files of a tree are test code as a whole, so that
//! `backward-compatible` puts each one back whole instead of item by item:
//!
//! - everything under a package's `tests/`, `benches/` and `examples/`
//!   (integration tests, bench targets and examples, with their helper
//!   modules and data; a package's `src/` below them is its own code). `cargo test` runs the first, and builds the others
//!   to check they compile (and runs those with `test = true`): as they
//!   were, they are the historical contract, helpers included;
//! - the out-of-line test modules: the file a `#[cfg(test)] mod name;` (or
//!   a `mod name;` inside a `#[cfg(test)]` module) resolves to, a file whose
//!   own attributes say `#![cfg(test)]`, and every module file declared
//!   below either. Only the test build compiles them, so a helper there
//!   (`fn expected() -> ..`) is test code like the `#[test]`s that use it.
//!
//! Pure: paths and texts in, paths out. It never reads a file and never
//! guesses a module's file: a declaration resolves to the first place
//! rustc would look that exists in the tree, or to nothing.

use std::collections::{BTreeMap, BTreeSet};

use syn::{Attribute, Item};

use super::marks_test;

/// Whether `path` is test code whole by where it sits: under a package's
/// `tests/`, `benches/` or `examples/` directory, and not below a `src/`:
/// `src/tests/` is a module directory (see [`test_module_files`]), and
/// `examples/app/src/` or `tests/fixtures/demo/src/` the code of a package
/// of its own.
pub(super) fn is_test_target(path: &str) -> bool {
    let dirs: Vec<&str> = path.split('/').collect();
    let dirs = &dirs[..dirs.len() - 1];
    dirs.iter()
        .any(|d| matches!(*d, "tests" | "benches" | "examples"))
        && !dirs.contains(&"src")
}

/// The out-of-line test module files among `sources` (workspace-relative
/// path → text, every Rust file of the tree). A file that does not parse
/// declares nothing (its own build fails).
pub(super) fn test_module_files(sources: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut declared: BTreeMap<&str, Vec<Declaration>> = BTreeMap::new();
    let mut tests: BTreeSet<String> = BTreeSet::new();
    for (path, text) in sources {
        let Ok(file) = syn::parse_file(text) else {
            continue;
        };
        if file.attrs.iter().any(marks_test) {
            tests.insert(path.clone());
        }
        let mut found = Vec::new();
        declarations(&file.items, &mut Vec::new(), false, &mut found);
        declared.insert(path, found);
    }
    let exists = |p: &str| sources.contains_key(p);
    let mut queue: Vec<String> = tests.iter().cloned().collect();
    for (file, found) in &declared {
        for module in found.iter().filter(|d| d.in_test) {
            if let Some(at) = module.resolve(file, exists)
                && tests.insert(at.clone())
            {
                queue.push(at);
            }
        }
    }
    // Below a test module everything is test code, `cfg` or not.
    while let Some(file) = queue.pop() {
        for module in declared.get(file.as_str()).into_iter().flatten() {
            if let Some(at) = module.resolve(&file, exists)
                && tests.insert(at.clone())
            {
                queue.push(at);
            }
        }
    }
    tests
}

/// A `mod name;` without a body, as its file declares it.
struct Declaration {
    /// The inline modules it sits in (`mod a { mod b { mod name; } }`).
    parents: Vec<String>,
    name: String,
    /// Its `#[path = ".."]`, when it has one.
    path: Option<String>,
    /// Itself or an inline module around it is `#[cfg(test)]`.
    in_test: bool,
}

fn declarations(
    items: &[Item],
    parents: &mut Vec<String>,
    in_test: bool,
    out: &mut Vec<Declaration>,
) {
    for item in items {
        let Item::Mod(m) = item else { continue };
        let in_test = in_test || m.attrs.iter().any(marks_test);
        match &m.content {
            None => out.push(Declaration {
                parents: parents.clone(),
                name: m.ident.to_string(),
                path: m.attrs.iter().find_map(path_attr),
                in_test,
            }),
            Some((_, inner)) => {
                parents.push(m.ident.to_string());
                declarations(inner, parents, in_test, out);
                parents.pop();
            }
        }
    }
}

fn path_attr(attr: &Attribute) -> Option<String> {
    match &attr.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    }
}

impl Declaration {
    /// The file this declaration in `file` names: the first of rustc's
    /// places that `exists`.
    fn resolve(&self, file: &str, exists: impl Fn(&str) -> bool) -> Option<String> {
        let (dir, name) = file.rsplit_once('/').unwrap_or(("", file));
        let owns_dir = matches!(name, "lib.rs" | "main.rs" | "mod.rs");
        // `foo.rs`'s modules live in `foo/`; a crate root named like any
        // file (`src/bin/tool.rs`, `examples/demo.rs`) owns its directory.
        let stem = name.strip_suffix(".rs").unwrap_or(name);
        let mut bases = vec![if owns_dir {
            dir.to_owned()
        } else {
            join(dir, stem)
        }];
        if !owns_dir {
            bases.push(dir.to_owned());
        }
        let inline = self.parents.join("/");
        let places: Vec<String> = match &self.path {
            // `#[path]` is relative to the declaring file's directory, or
            // inside inline modules to theirs.
            Some(p) if self.parents.is_empty() => vec![join(dir, p)],
            Some(p) => vec![join(&join(&bases[0], &inline), p)],
            None => bases
                .iter()
                .flat_map(|base| {
                    let base = join(base, &inline);
                    [
                        join(&base, &format!("{}.rs", self.name)),
                        join(&base, &format!("{}/mod.rs", self.name)),
                    ]
                })
                .collect(),
        };
        places
            .iter()
            .filter_map(|p| normalize(p))
            .find(|p| exists(p))
    }
}

fn join(dir: &str, rest: &str) -> String {
    match (dir.is_empty(), rest.is_empty()) {
        (true, _) => rest.to_owned(),
        (_, true) => dir.to_owned(),
        _ => format!("{dir}/{rest}"),
    }
}

/// `a/./b/../c` as `a/c`; `None` for an absolute path or one leaving the
/// tree.
fn normalize(path: &str) -> Option<String> {
    if path.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn tree(files: &[(&str, &str)]) -> BTreeMap<String, String> {
        files
            .iter()
            .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
            .collect()
    }

    fn found(files: &[(&str, &str)]) -> Vec<String> {
        test_module_files(&tree(files)).into_iter().collect()
    }

    #[test]
    fn test_targets_are_the_package_test_bench_and_example_directories() {
        for path in [
            "tests/adds.rs",
            "tests/common/mod.rs",
            "tests/data/expected.txt",
            "benches/speed.rs",
            "examples/demo.rs",
            "examples/demo/main.rs",
            "crates/core/benches/b.rs",
            "tests/fixtures/demo/tests/it.rs",
        ] {
            assert!(is_test_target(path), "{path}");
        }
        for path in [
            "src/lib.rs",
            "src/tests/mod.rs",
            "src/tests.rs",
            "crates/core/src/examples/x.rs",
            "examples/app/src/main.rs",
            "tests/fixtures/demo/src/lib.rs",
            "tests",
            "build.rs",
        ] {
            assert!(!is_test_target(path), "{path}");
        }
    }

    #[test]
    fn a_cfg_test_declaration_names_its_file_and_everything_below_it() {
        let lib = "pub mod util;\n#[cfg(test)]\nmod tests;\n";
        assert_eq!(
            found(&[
                ("src/lib.rs", lib),
                ("src/util.rs", "pub fn u() {}\n"),
                ("src/tests.rs", "fn expected() -> i32 { 5 }\n"),
            ]),
            ["src/tests.rs"]
        );
        assert_eq!(
            found(&[
                ("src/lib.rs", lib),
                ("src/util.rs", "#[cfg(test)]\nmod tests;\n"),
                ("src/util/tests.rs", ""),
                ("src/tests/mod.rs", "mod helpers;\n"),
                ("src/tests/helpers.rs", "mod deeper;\n"),
                ("src/tests/helpers/deeper.rs", ""),
            ]),
            [
                "src/tests/helpers.rs",
                "src/tests/helpers/deeper.rs",
                "src/tests/mod.rs",
                "src/util/tests.rs",
            ]
        );
    }

    #[test]
    fn path_attributes_inline_modules_and_inner_cfg_resolve_as_rustc_does() {
        assert_eq!(
            found(&[
                (
                    "src/parser.rs",
                    "#[cfg(test)]\n#[path = \"parser_tests.rs\"]\nmod tests;\n"
                ),
                ("src/parser_tests.rs", ""),
            ]),
            ["src/parser_tests.rs"]
        );
        assert_eq!(
            found(&[
                (
                    "src/lib.rs",
                    "#[cfg(test)]\nmod tests {\n    mod data;\n}\n"
                ),
                ("src/tests/data.rs", ""),
            ]),
            ["src/tests/data.rs"]
        );
        assert_eq!(
            found(&[
                ("src/lib.rs", "mod checks;\n"),
                ("src/checks.rs", "#![cfg(test)]\nmod more;\n"),
                ("src/checks/more.rs", ""),
            ]),
            ["src/checks.rs", "src/checks/more.rs"]
        );
        // A crate root named like any file owns its directory.
        assert_eq!(
            found(&[
                (
                    "src/bin/tool.rs",
                    "#[cfg(test)]\nmod tests;\nfn main() {}\n"
                ),
                ("src/bin/tests.rs", ""),
            ]),
            ["src/bin/tests.rs"]
        );
    }

    #[test]
    fn what_does_not_resolve_or_parse_names_nothing() {
        assert!(found(&[("src/lib.rs", "#[cfg(test)]\nmod tests;\n")]).is_empty());
        assert!(
            found(&[
                (
                    "src/lib.rs",
                    "#[cfg(test)]\n#[path = \"../../x.rs\"]\nmod tests;\n"
                ),
                ("x.rs", ""),
            ])
            .is_empty(),
            "a path leaving the tree"
        );
        assert!(
            found(&[
                ("src/lib.rs", "#[cfg(test)] mod tests; fn ("),
                ("src/tests.rs", "")
            ])
            .is_empty()
        );
    }

    /// A module tree: each node is `#[cfg(test)]` or not, and lives in
    /// `name.rs` or `name/mod.rs`.
    #[derive(Clone, Debug)]
    struct Module {
        test: bool,
        mod_rs: bool,
        children: Vec<Module>,
    }

    fn module() -> impl Strategy<Value = Module> {
        let leaf = (any::<bool>(), any::<bool>()).prop_map(|(test, mod_rs)| Module {
            test,
            mod_rs,
            children: Vec::new(),
        });
        leaf.prop_recursive(4, 24, 4, |inner| {
            (
                any::<bool>(),
                any::<bool>(),
                prop::collection::vec(inner, 0..4),
            )
                .prop_map(|(test, mod_rs, children)| Module {
                    test,
                    mod_rs,
                    children,
                })
        })
    }

    /// Writes `children` as declarations into `file` (whose modules live
    /// in `dir`), their files below, and the files that are test code.
    fn render(
        children: &[Module],
        file: &str,
        dir: &str,
        in_test: bool,
        sources: &mut BTreeMap<String, String>,
        expected: &mut BTreeSet<String>,
    ) {
        let mut text = String::new();
        for (i, child) in children.iter().enumerate() {
            let name = format!("m{i}");
            if child.test {
                text.push_str("#[cfg(test)]\n");
            }
            text.push_str(&format!("mod {name};\n"));
            // Either way its own modules live in `{dir}/{name}/`.
            let below = format!("{dir}/{name}");
            let path = if child.mod_rs {
                format!("{below}/mod.rs")
            } else {
                format!("{below}.rs")
            };
            let test = in_test || child.test;
            if test {
                expected.insert(path.clone());
            }
            render(&child.children, &path, &below, test, sources, expected);
        }
        sources.insert(file.to_owned(), text);
    }

    proptest! {
        #![proptest_config(trellis_core::fuzz::config(64))]

        /// Exactly the files of modules that are, or sit below, a
        /// `#[cfg(test)]` module are named.
        #[test]
        fn exactly_the_modules_at_or_below_a_test_module_are_named(root in module()) {
            let (mut sources, mut expected) = (BTreeMap::new(), BTreeSet::new());
            render(&root.children, "src/lib.rs", "src", false, &mut sources, &mut expected);
            prop_assert_eq!(test_module_files(&sources), expected);
        }
    }
}
