//! The tests a Rust source file had at a repair's start, put back into a
//! candidate's version of the file (`test_policy = "backward-compatible"`).
//!
//! A source file's test code is what the test stage compiles only to test:
//! items under `#[cfg(test)]` (a `mod tests { .. }` block), `#[test]`
//! functions, and doc comments holding a code block (doc tests). The
//! candidate keeps everything else — its fix — and gets the original's test
//! code in place of its own: its test items removed and the original's
//! appended to the same inline module, its doc tests replaced by the
//! original's on the same item. A model that weakened an assertion then
//! meets the assertion as it was.
//!
//! Files that are test code as a whole (under `tests/`, `benches/`,
//! `examples/`, and out-of-line test modules with their helpers) are not
//! mixed: [`files`] names them, and they go back whole. What decides which
//! tests run at all (a `Cargo.toml`'s target tables, `auto*` keys and
//! features; cargo's configuration files) goes back too: [`manifest`].
//!
//! Pure: text in, text out, parsed with `syn`. It never writes a file and
//! never guesses: an original test whose module or documented item the
//! candidate no longer has is an error naming it. [`swaps`] reads the start
//! and the branch slot to plan what goes back; `repair/effects.rs` puts it
//! there for one metered run of the Rust test stage, then restores the
//! candidate. This is Rust's own test policy, so it lives with the Rust
//! sensors.

mod files;
mod manifest;
mod swaps;

use std::collections::BTreeMap;
use std::ops::Range;

use syn::spanned::Spanned;
use syn::{Attribute, ImplItem, Item, TraitItem};

pub(crate) use swaps::{Plan, plan, rust_test_stage};

/// `candidate` with `original`'s test code in place of its own; `Ok(None)`
/// when both have the same test code (the candidate's own run is the run
/// of the original tests), or when either does not parse (an unparsable
/// original ran no test of its crate; an unparsable candidate fails its
/// own build).
fn with_original_tests(original: &str, candidate: &str) -> Result<Option<String>, String> {
    let (Ok(was), Ok(now)) = (TestCode::scan(original), TestCode::scan(candidate)) else {
        return Ok(None);
    };
    if was.texts(original) == now.texts(candidate) {
        return Ok(None);
    }
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    for (_, span) in &now.items {
        edits.push((span.clone(), String::new()));
    }
    let was_docs: BTreeMap<&str, &Range<usize>> = was
        .docs
        .iter()
        .map(|(k, span)| (k.as_str(), span))
        .collect();
    for (key, span) in &now.docs {
        let text = was_docs
            .get(key.as_str())
            .map_or("", |r| &original[(*r).clone()]);
        edits.push((span.clone(), text.to_owned()));
    }
    for (key, span) in &was.docs {
        if now.docs.iter().any(|(k, _)| k == key) {
            continue;
        }
        let at = *now
            .item_starts
            .get(key)
            .ok_or_else(|| format!("`{key}`, which has a doc test, is gone"))?;
        edits.push((at..at, format!("{}\n", &original[span.clone()])));
    }
    for (module, span) in &was.items {
        let at = *now
            .module_ends
            .get(module)
            .ok_or_else(|| format!("module `{}`, which holds tests, is gone", module.join("::")))?;
        edits.push((at..at, format!("\n{}\n", &original[span.clone()])));
    }
    // Back to front, so earlier offsets stay valid; spans never overlap
    // (test items are not documented items, docs precede their item).
    // Insertions at one offset go last first, so they keep their order.
    let mut edits: Vec<(usize, (Range<usize>, String))> = edits.into_iter().enumerate().collect();
    edits.sort_by_key(|(i, (span, _))| std::cmp::Reverse((span.start, span.end, *i)));
    let mut out = candidate.to_owned();
    for (_, (span, text)) in edits {
        out.replace_range(span, &text);
    }
    Ok(Some(out))
}

/// Where a file's test code is.
#[derive(Default)]
struct TestCode {
    /// Test items, by the inline module path they sit in (root: empty).
    items: Vec<(Vec<String>, Range<usize>)>,
    /// Doc comments holding a code block, by the item they document.
    docs: Vec<(String, Range<usize>)>,
    /// Where each documentable item starts, by the same keys.
    item_starts: BTreeMap<String, usize>,
    /// Where each inline module's body ends: before its closing brace (the
    /// root's is the end of the file).
    module_ends: BTreeMap<Vec<String>, usize>,
}

impl TestCode {
    fn scan(source: &str) -> Result<TestCode, syn::Error> {
        let file = syn::parse_file(source)?;
        let mut code = TestCode::default();
        code.module_ends.insert(Vec::new(), source.len());
        code.doc_tests("//!".to_owned(), &file.attrs);
        code.walk(&file.items, &mut Vec::new());
        Ok(code)
    }

    /// What a candidate must keep equal: each test item's text with its
    /// module, each doc test's text with its item.
    fn texts<'s>(&self, source: &'s str) -> Vec<(String, &'s str)> {
        let items = self.items.iter().map(|(m, span)| {
            (
                format!("test item in {}", m.join("::")),
                &source[span.clone()],
            )
        });
        let docs = self
            .docs
            .iter()
            .map(|(k, span)| (format!("doc test of {k}"), &source[span.clone()]));
        items.chain(docs).collect()
    }

    fn walk(&mut self, items: &[Item], module: &mut Vec<String>) {
        let prefix = module.join("::");
        for item in items {
            let attrs = item_attrs(item);
            if attrs.iter().any(marks_test) {
                self.items.push((module.clone(), item.span().byte_range()));
                continue;
            }
            if let Some(name) = item_name(item) {
                let key = format!("{prefix}::{name}");
                self.item_starts
                    .insert(key.clone(), item.span().byte_range().start);
                self.doc_tests(key, attrs);
            }
            match item {
                Item::Mod(m) => {
                    if let Some((brace, inner)) = &m.content {
                        module.push(m.ident.to_string());
                        self.module_ends
                            .insert(module.clone(), brace.span.close().byte_range().start);
                        self.doc_tests(format!("{}::{}//!", prefix, m.ident), &m.attrs);
                        self.walk(inner, module);
                        module.pop();
                    }
                }
                Item::Impl(i) => {
                    let ty = quote_compact(&i.self_ty);
                    let of = i.trait_.as_ref().map(|(_, p, _)| quote_compact(p));
                    for member in &i.items {
                        let (name, attrs) = match member {
                            ImplItem::Fn(f) => (f.sig.ident.to_string(), &f.attrs),
                            ImplItem::Const(c) => (c.ident.to_string(), &c.attrs),
                            ImplItem::Type(t) => (t.ident.to_string(), &t.attrs),
                            _ => continue,
                        };
                        let key = format!(
                            "{prefix}::impl {} for {ty}::{name}",
                            of.as_deref().unwrap_or("")
                        );
                        self.item_starts
                            .insert(key.clone(), member.span().byte_range().start);
                        self.doc_tests(key, attrs);
                    }
                }
                Item::Trait(t) => {
                    for member in &t.items {
                        let (name, attrs) = match member {
                            TraitItem::Fn(f) => (f.sig.ident.to_string(), &f.attrs),
                            TraitItem::Const(c) => (c.ident.to_string(), &c.attrs),
                            TraitItem::Type(t) => (t.ident.to_string(), &t.attrs),
                            _ => continue,
                        };
                        let key = format!("{prefix}::trait {}::{name}", t.ident);
                        self.item_starts
                            .insert(key.clone(), member.span().byte_range().start);
                        self.doc_tests(key, attrs);
                    }
                }
                _ => {}
            }
        }
    }

    /// Records the doc comments among `attrs` (outer or inner, as `key`
    /// says) when they hold a code block, as one span from the first to
    /// the last.
    fn doc_tests(&mut self, key: String, attrs: &[Attribute]) {
        let inner = key.ends_with("//!");
        let docs: Vec<&Attribute> = attrs
            .iter()
            .filter(|a| a.path().is_ident("doc"))
            .filter(|a| matches!(a.style, syn::AttrStyle::Inner(_)) == inner)
            .collect();
        let text: String = docs.iter().filter_map(|a| doc_text(a)).collect();
        if let (Some(first), Some(last)) = (docs.first(), docs.last())
            && text.contains("```")
        {
            let span = first.span().byte_range().start..last.span().byte_range().end;
            self.docs.push((key, span));
        }
    }
}

/// `#[cfg(test)]` (alone or among `any`/`all`), or a test attribute
/// (`#[test]`, `#[tokio::test]`, ...; `#[bench]`, which the test build
/// runs once as a test).
fn marks_test(attr: &Attribute) -> bool {
    let path = attr.path();
    if path
        .segments
        .last()
        .is_some_and(|s| s.ident == "test" || s.ident == "bench")
    {
        return true;
    }
    path.is_ident("cfg")
        && attr
            .meta
            .require_list()
            .is_ok_and(|list| list.tokens.clone().into_iter().any(|t| mentions_test(&t)))
}

fn mentions_test(token: &proc_macro2::TokenTree) -> bool {
    match token {
        proc_macro2::TokenTree::Ident(i) => i == "test",
        proc_macro2::TokenTree::Group(g) => g.stream().into_iter().any(|t| mentions_test(&t)),
        _ => false,
    }
}

fn doc_text(attr: &Attribute) -> Option<String> {
    match &attr.meta {
        syn::Meta::NameValue(nv) => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value() + "\n"),
            _ => None,
        },
        _ => None,
    }
}

fn item_attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// A documentable item's identity within its module: its kind and name.
fn item_name(item: &Item) -> Option<String> {
    let (kind, ident) = match item {
        Item::Const(i) => ("const", &i.ident),
        Item::Enum(i) => ("enum", &i.ident),
        Item::Fn(i) => ("fn", &i.sig.ident),
        Item::Macro(i) => ("macro", i.ident.as_ref()?),
        Item::Mod(i) => ("mod", &i.ident),
        Item::Static(i) => ("static", &i.ident),
        Item::Struct(i) => ("struct", &i.ident),
        Item::Trait(i) => ("trait", &i.ident),
        Item::TraitAlias(i) => ("trait", &i.ident),
        Item::Type(i) => ("type", &i.ident),
        Item::Union(i) => ("union", &i.ident),
        _ => return None,
    };
    Some(format!("{kind} {ident}"))
}

/// A type or path as compact text, to key impl members by.
fn quote_compact(tokens: &impl quote::ToTokens) -> String {
    tokens.to_token_stream().to_string().replace(' ', "")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const LIB: &str = "//! Adds.\n\npub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n\n\
        #[cfg(test)]\nmod tests {\n    use super::add;\n\n    #[test]\n    fn adds() {\n        \
        assert_eq!(add(2, 3), 5);\n    }\n}\n";

    #[test]
    fn a_fix_that_leaves_the_tests_alone_needs_no_other_run() {
        let fixed = LIB.replace("a - b", "a + b");
        assert_eq!(with_original_tests(LIB, &fixed).unwrap(), None);
    }

    #[test]
    fn a_weakened_assertion_is_replaced_by_the_original_and_the_fix_is_kept() {
        let weakened = LIB.replace("add(2, 3), 5", "add(2, 3), -1");
        let restored = with_original_tests(LIB, &weakened).unwrap().unwrap();
        assert!(restored.contains("add(2, 3), 5"), "{restored}");
        assert!(!restored.contains("-1"), "{restored}");
        assert!(restored.contains("a - b"), "the candidate's code stays");
        syn::parse_file(&restored).unwrap();
        // A fix plus a weakened test keeps the fix.
        let both = weakened.replace("a - b", "a * b");
        let restored = with_original_tests(LIB, &both).unwrap().unwrap();
        assert!(restored.contains("a * b") && restored.contains("add(2, 3), 5"));
    }

    #[test]
    fn a_deleted_test_module_comes_back_and_a_nested_one_stays_in_its_module() {
        let gone = LIB[..LIB.find("#[cfg(test)]").unwrap()].to_owned();
        let restored = with_original_tests(LIB, &gone).unwrap().unwrap();
        assert!(restored.contains("fn adds()"), "{restored}");

        let nested = "mod inner {\n    pub fn one() -> u8 { 1 }\n    #[test]\n    fn is_one() { assert_eq!(one(), 1); }\n}\n";
        let weakened = nested.replace("assert_eq!(one(), 1)", "");
        let restored = with_original_tests(nested, &weakened).unwrap().unwrap();
        let inner = &restored[restored.find("mod inner").unwrap()..restored.rfind('}').unwrap()];
        assert!(inner.contains("assert_eq!(one(), 1)"), "{restored}");
        let removed = "pub fn one() -> u8 { 1 }\n";
        let err = with_original_tests(nested, removed).unwrap_err();
        assert!(err.contains("module `inner`"), "{err}");
    }

    #[test]
    fn a_changed_doc_test_is_put_back_on_its_item() {
        let lib = "/// ```\n/// assert_eq!(doc::two(), 2);\n/// ```\npub fn two() -> i32 { 3 }\n";
        let weakened = lib.replace("assert_eq!(doc::two(), 2);", "let _ = doc::two();");
        let restored = with_original_tests(lib, &weakened).unwrap().unwrap();
        assert!(restored.contains("assert_eq!(doc::two(), 2)"), "{restored}");
        let undocumented = "pub fn two() -> i32 { 2 }\n";
        let restored = with_original_tests(lib, undocumented).unwrap().unwrap();
        assert!(
            restored.starts_with("/// ```") && restored.contains("{ 2 }"),
            "{restored}"
        );
        // Prose is not a test.
        assert_eq!(
            with_original_tests("/// Two.\npub fn two() {}\n", "/// 2.\npub fn two() {}\n")
                .unwrap(),
            None
        );
    }

    #[test]
    fn unparsable_text_is_left_to_its_own_build() {
        assert_eq!(with_original_tests(LIB, "fn (").unwrap(), None);
        assert_eq!(with_original_tests("fn (", LIB).unwrap(), None);
    }

    #[test]
    fn a_bench_function_is_test_code() {
        let lib = "pub fn one() -> u8 { 1 }
#[bench]
fn b(_: &mut Bencher) { assert_eq!(one(), 1); }
";
        let weakened = lib.replace("assert_eq!(one(), 1);", "");
        let restored = with_original_tests(lib, &weakened).unwrap().unwrap();
        assert!(restored.contains("assert_eq!(one(), 1)"), "{restored}");
    }

    /// A file of functions `f{i}` returning a value, a root-level `#[test]`
    /// after some, and a `#[cfg(test)] mod tests` asserting others.
    fn source(items: &[(i8, Option<i8>, Option<i8>)]) -> String {
        let mut out = String::new();
        let mut module = String::new();
        for (i, (value, root, inner)) in items.iter().enumerate() {
            out.push_str(&format!("pub fn f{i}() -> i32 {{\n    {value}\n}}\n"));
            if let Some(e) = root {
                out.push_str(&format!(
                    "#[test]\nfn r{i}() {{\n    assert_eq!(f{i}(), {e});\n}}\n"
                ));
            }
            if let Some(e) = inner {
                module.push_str(&format!(
                    "    #[test]\n    fn t{i}() {{ assert_eq!(f{i}(), {e}); }}\n"
                ));
            }
        }
        if !module.is_empty() {
            out.push_str(&format!(
                "#[cfg(test)]\nmod tests {{\n    use super::*;\n{module}}}\n"
            ));
        }
        out
    }

    fn items() -> impl Strategy<Value = Vec<(i8, Option<i8>, Option<i8>)>> {
        prop::collection::vec(
            (any::<i8>(), any::<Option<i8>>(), any::<Option<i8>>()),
            1..5,
        )
    }

    proptest! {
        #![proptest_config(trellis_core::fuzz::config(64))]

        /// Whatever a candidate did to the code and the tests, the file
        /// that runs has the original's test code exactly (putting the
        /// original's back again changes nothing) and the candidate's code.
        #[test]
        fn the_result_has_the_original_tests_and_the_candidate_code(
            was in items(),
            now in items(),
        ) {
            let (original, candidate) = (source(&was), source(&now));
            let Some(run) = with_original_tests(&original, &candidate).unwrap() else {
                let (a, b) = (TestCode::scan(&original).unwrap(), TestCode::scan(&candidate).unwrap());
                prop_assert_eq!(a.texts(&original), b.texts(&candidate));
                return Ok(());
            };
            prop_assert!(syn::parse_file(&run).is_ok(), "{}", run);
            prop_assert_eq!(with_original_tests(&original, &run).unwrap(), None, "{}", run);
            for (i, (value, _, _)) in now.iter().enumerate() {
                let code = format!("pub fn f{i}() -> i32 {{\n    {value}\n}}");
                prop_assert!(run.contains(&code), "{}", run);
            }
        }
    }
}
