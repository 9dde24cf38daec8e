//! What one source file's tests are, as each language's reader fills it
//! in (`super::rust_tests`, `super::python::test_inventory`,
//! `super::typescript::test_inventory`) and [`super::test_inventory`]
//! compares: the shared vocabulary, apart from both.

use std::collections::{BTreeMap, BTreeSet};

/// The tests one source file defines: each test's id within the file and
/// the marks that switch it off or invert it (`#[ignore]`, a `cfg`,
/// `@pytest.mark.skip`, `.skip`, `{ todo: true }`), as the file reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileTests {
    pub tests: BTreeMap<String, BTreeSet<String>>,
    /// Some test of the file is focused (`.only`, `fit`): under jest and
    /// vitest every other test of the file is then skipped.
    pub focused: bool,
}

impl FileTests {
    /// Records `test` with `marks`; a name defined twice keeps both sets.
    pub fn add(&mut self, test: String, marks: BTreeSet<String>) {
        self.tests.entry(test).or_default().extend(marks);
    }
}

/// The mark a focused test carries itself (`.only`): not a weakening of
/// that test, but of every other test in its file.
pub const FOCUS: &str = "`.only`";
