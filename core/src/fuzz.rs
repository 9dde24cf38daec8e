//! What every property test of a parser of outside bytes shares: the case
//! budget, mutations of real recorded inputs (bytes, lines, JSON structure),
//! meaning-preserving JSON rewrites, and the per-case time bound.
//!
//! The normal suite runs each property for a few dozen cases; `scripts/fuzz.sh`
//! raises the budget through [`CASES_VAR`]. [`bounded`] checks one parse's
//! time and, through [`CountingAllocator`] installed as the test binary's
//! global allocator, the bytes it allocates. Compiled only with the `fuzz`
//! feature, which only dev-dependencies enable, so no shipped build holds it.
//! It never does I/O beyond reading that variable.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::Value;

/// The number of cases each property runs (`scripts/fuzz.sh` sets it).
pub const CASES_VAR: &str = "TRELLIS_FUZZ_CASES";

/// The longest one case may take, debug build included. A parser that
/// needs longer on a few hundred KiB is a denial of service.
pub const CASE_TIME: Duration = Duration::from_secs(5);

/// The test configuration: `default_cases` unless [`CASES_VAR`] says more.
/// Failures persist as proptest regression files beside the test source.
pub fn config(default_cases: u32) -> ProptestConfig {
    let cases = std::env::var(CASES_VAR)
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(default_cases);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

/// Runs `parse`, failing the case when it took longer than [`CASE_TIME`] or
/// allocated more than `max_bytes` on this thread. Fails too when
/// [`CountingAllocator`] is not the global allocator, so a forgotten
/// declaration cannot pass vacuously.
pub fn bounded<T>(what: &str, max_bytes: u64, parse: impl FnOnce() -> T) -> T {
    assert!(
        counting(),
        "declare `#[global_allocator] static A: CountingAllocator = CountingAllocator;` in this test binary"
    );
    let before = allocated();
    let started = Instant::now();
    let result = parse();
    let took = started.elapsed();
    let bytes = allocated() - before;
    assert!(took < CASE_TIME, "{what} took {took:?}");
    assert!(
        bytes <= max_bytes,
        "{what} allocated {bytes} bytes, more than the bound of {max_bytes}"
    );
    result
}

/// The allocation bound for a parse of `input` bytes: a constant factor of
/// the input plus a few MiB of fixed overhead (tables, buffers).
pub fn budget(input: usize) -> u64 {
    64 * input as u64 + (4 << 20)
}

thread_local! {
    static ALLOCATED: Cell<u64> = const { Cell::new(0) };
}

/// Bytes allocated so far on this thread (growth by `realloc` included).
fn allocated() -> u64 {
    ALLOCATED.try_with(Cell::get).unwrap_or(0)
}

fn counting() -> bool {
    let before = allocated();
    drop(std::hint::black_box(Box::new([0u8; 64])));
    allocated() > before
}

fn count(bytes: usize) {
    let _ = ALLOCATED.try_with(|total| total.set(total.get().saturating_add(bytes as u64)));
}

/// The system allocator, counting the bytes each thread allocates for
/// [`bounded`].
pub struct CountingAllocator;

// SAFETY: every call is forwarded unchanged to `System`; the counter is a
// const-initialised thread-local `Cell` without a destructor, so touching
// it never allocates or re-enters the allocator.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size.saturating_sub(layout.size()));
        // SAFETY: `ptr` came from `System` with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Byte sequences parsers choke on: NULs, invalid UTF-8, numbers past every
/// integer type, deep nesting, an enormous string, stray syntax.
fn hostile_token() -> impl Strategy<Value = Vec<u8>> {
    let fixed: Vec<&'static [u8]> = vec![
        b"\0",
        b"\xff\xfe",
        b"\xc3",
        b"\xed\xa0\x80",
        b"18446744073709551616",
        b"-9223372036854775809",
        b"4294967296",
        b"-1",
        b"1e999999",
        b"NaN",
        b"\"",
        b"\\",
        b"{",
        b"}",
        b"[",
        b"]",
        b",",
        b":",
        b"=",
        b"\n",
        b"\r\n",
        b"\r",
        b"null",
        b"---",
        b"Content-Length: ",
        b"\"\\ud800\"",
    ];
    prop_oneof![
        4 => prop::sample::select(fixed).prop_map(<[u8]>::to_vec),
        2 => prop::collection::vec(any::<u8>(), 1..16),
        1 => Just(deep_nesting(b"[", b"]", 5_000)),
        1 => Just(deep_nesting(b"{\"a\":", b"}", 2_000)),
        1 => Just(enormous_string()),
    ]
}

fn deep_nesting(open: &[u8], close: &[u8], depth: usize) -> Vec<u8> {
    let mut out = open.repeat(depth);
    out.extend(close.repeat(depth));
    out
}

fn enormous_string() -> Vec<u8> {
    let mut out = b"\"".to_vec();
    out.extend(std::iter::repeat_n(b'x', 256 << 10));
    out.push(b'"');
    out
}

/// One edit of a byte string, at positions relative to its length.
#[derive(Clone, Debug)]
pub enum ByteEdit {
    Truncate(Index),
    Delete(Index, u16),
    Duplicate(Index, u16),
    Insert(Index, Vec<u8>),
    Swap(Index, Index, u16),
}

/// A few byte edits.
pub fn byte_edits() -> impl Strategy<Value = Vec<ByteEdit>> {
    let edit = prop_oneof![
        1 => any::<Index>().prop_map(ByteEdit::Truncate),
        2 => (any::<Index>(), 1..512u16).prop_map(|(at, n)| ByteEdit::Delete(at, n)),
        2 => (any::<Index>(), 1..512u16).prop_map(|(at, n)| ByteEdit::Duplicate(at, n)),
        4 => (any::<Index>(), hostile_token()).prop_map(|(at, bytes)| ByteEdit::Insert(at, bytes)),
        1 => (any::<Index>(), any::<Index>(), 1..256u16).prop_map(|(a, b, n)| ByteEdit::Swap(a, b, n)),
    ];
    prop::collection::vec(edit, 1..5)
}

/// `seed` with `edits` applied in order.
pub fn apply_bytes(seed: &[u8], edits: &[ByteEdit]) -> Vec<u8> {
    let mut out = seed.to_vec();
    for edit in edits {
        let at = |index: &Index, out: &Vec<u8>| index.index(out.len() + 1);
        match edit {
            ByteEdit::Truncate(index) => out.truncate(at(index, &out)),
            ByteEdit::Delete(index, n) => {
                let from = at(index, &out);
                let to = (from + usize::from(*n)).min(out.len());
                out.drain(from..to);
            }
            ByteEdit::Duplicate(index, n) => {
                let from = at(index, &out);
                let to = (from + usize::from(*n)).min(out.len());
                let copy = out[from..to].to_vec();
                out.splice(to..to, copy);
            }
            ByteEdit::Insert(index, bytes) => {
                let from = at(index, &out);
                out.splice(from..from, bytes.iter().copied());
            }
            ByteEdit::Swap(a, b, n) => {
                let (a, b) = (at(a, &out), at(b, &out));
                let (a, b) = (a.min(b), a.max(b));
                let n = usize::from(*n).min(b - a).min(out.len() - b);
                let first = out[a..a + n].to_vec();
                let second = out[b..b + n].to_vec();
                out.splice(b..b + n, first);
                out.splice(a..a + n, second);
            }
        }
    }
    out
}

/// Mutations of `seed`: arbitrary bytes, or a few edits of it.
pub fn mutated(seed: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..2048),
        6 => byte_edits().prop_map(move |edits| apply_bytes(&seed, &edits)),
    ]
}

/// One edit of a text's lines: drop, duplicate, move or cut one.
#[derive(Clone, Debug)]
pub enum LineEdit {
    Drop(Index),
    Duplicate(Index),
    Move(Index, Index),
    Cut(Index, Index),
}

/// `seed`'s lines edited (line structure first, then a few byte edits).
pub fn mutated_lines(seed: &str) -> impl Strategy<Value = Vec<u8>> + use<> {
    let lines: Vec<String> = seed.lines().map(str::to_owned).collect();
    let line_edit = prop_oneof![
        any::<Index>().prop_map(LineEdit::Drop),
        any::<Index>().prop_map(LineEdit::Duplicate),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| LineEdit::Move(a, b)),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| LineEdit::Cut(a, b)),
    ];
    (
        prop::collection::vec(line_edit, 0..6),
        prop::option::of(byte_edits()),
    )
        .prop_map(move |(line_edits, byte_edits)| {
            let mut lines = lines.clone();
            for edit in &line_edits {
                if lines.is_empty() {
                    break;
                }
                match edit {
                    LineEdit::Drop(at) => {
                        lines.remove(at.index(lines.len()));
                    }
                    LineEdit::Duplicate(at) => {
                        let at = at.index(lines.len());
                        lines.insert(at, lines[at].clone());
                    }
                    LineEdit::Move(from, to) => {
                        let line = lines.remove(from.index(lines.len()));
                        lines.insert(to.index(lines.len() + 1), line);
                    }
                    LineEdit::Cut(line, at) => {
                        let index = line.index(lines.len());
                        let line = &mut lines[index];
                        let cut = at.index(line.len() + 1);
                        line.truncate(crate::text::floor_char_boundary(line, cut));
                    }
                }
            }
            let text = lines.join("\n").into_bytes();
            match &byte_edits {
                Some(edits) => apply_bytes(&text, edits),
                None => text,
            }
        })
}

/// A value of the wrong type or out of every range, for [`JsonEdit::Replace`].
#[derive(Clone, Debug)]
pub enum Oddity {
    Null,
    Bool,
    NegativeOne,
    Fraction,
    BeyondU64,
    BeyondF64,
    EmptyString,
    NulString,
    LoneSurrogate,
    EnormousString,
    DeepArray,
    EmptyArray,
    EmptyObject,
}

impl Oddity {
    fn text(&self) -> String {
        match self {
            Oddity::Null => "null".into(),
            Oddity::Bool => "true".into(),
            Oddity::NegativeOne => "-1".into(),
            Oddity::Fraction => "0.5".into(),
            Oddity::BeyondU64 => "18446744073709551616".into(),
            Oddity::BeyondF64 => "1e400".into(),
            Oddity::EmptyString => "\"\"".into(),
            Oddity::NulString => "\"a\\u0000b\"".into(),
            Oddity::LoneSurrogate => "\"\\ud800\"".into(),
            Oddity::EnormousString => String::from_utf8(enormous_string()).expect("ASCII"),
            Oddity::DeepArray => String::from_utf8(deep_nesting(b"[", b"]", 5_000)).expect("ASCII"),
            Oddity::EmptyArray => "[]".into(),
            Oddity::EmptyObject => "{}".into(),
        }
    }
}

/// A structural edit of one JSON node, chosen by its pre-order position
/// (modulo the number of nodes).
#[derive(Clone, Debug)]
pub enum JsonEdit {
    /// The member or element leaves its object or array.
    Remove(usize),
    Replace(usize, Oddity),
    /// An object member is written twice (an array element too).
    Duplicate(usize),
    /// The node becomes the single element of an array.
    Wrap(usize),
}

/// Any [`JsonEdit`].
pub fn json_edit() -> impl Strategy<Value = JsonEdit> {
    let oddity = prop::sample::select(vec![
        Oddity::Null,
        Oddity::Bool,
        Oddity::NegativeOne,
        Oddity::Fraction,
        Oddity::BeyondU64,
        Oddity::BeyondF64,
        Oddity::EmptyString,
        Oddity::NulString,
        Oddity::LoneSurrogate,
        Oddity::EnormousString,
        Oddity::DeepArray,
        Oddity::EmptyArray,
        Oddity::EmptyObject,
    ]);
    prop_oneof![
        2 => any::<usize>().prop_map(JsonEdit::Remove),
        4 => (any::<usize>(), oddity).prop_map(|(at, odd)| JsonEdit::Replace(at, odd)),
        1 => any::<usize>().prop_map(JsonEdit::Duplicate),
        1 => any::<usize>().prop_map(JsonEdit::Wrap),
    ]
}

/// `value` written as JSON text with `edit` applied (its meaning changes).
pub fn apply_json(value: &Value, edit: &JsonEdit) -> String {
    let (JsonEdit::Remove(at)
    | JsonEdit::Replace(at, _)
    | JsonEdit::Duplicate(at)
    | JsonEdit::Wrap(at)) = edit;
    let target = at % count_nodes(value);
    let mut writer = Writer {
        edit: Some((target, edit)),
        order: None,
        counter: 0,
    };
    writer.value(value).unwrap_or_default()
}

/// `value` written with its object members in another order and other
/// whitespace: the same JSON value, other bytes.
pub fn rewrite_json(value: &Value, seed: u64) -> String {
    let mut writer = Writer {
        edit: None,
        order: Some(seed | 1),
        counter: 0,
    };
    writer.value(value).expect("no edit removes the root")
}

fn count_nodes(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(count_nodes).sum(),
        Value::Object(members) => members.values().map(count_nodes).sum(),
        _ => 0,
    }
}

struct Writer<'e> {
    edit: Option<(usize, &'e JsonEdit)>,
    /// xorshift state for member order and whitespace; `None`: canonical.
    order: Option<u64>,
    counter: usize,
}

impl Writer<'_> {
    fn next(&mut self) -> u64 {
        let Some(state) = &mut self.order else {
            return 0;
        };
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    fn space(&mut self) -> &'static str {
        const SPACES: [&str; 5] = ["", " ", "\n", "\t", "\r\n  "];
        SPACES[(self.next() % SPACES.len() as u64) as usize]
    }

    /// The node's text, written several times for a duplicate; `None` when removed.
    fn value(&mut self, value: &Value) -> Option<String> {
        let here = self.counter;
        self.counter += 1;
        let edit = self
            .edit
            .filter(|(at, _)| *at == here)
            .map(|(_, edit)| edit);
        let written = match value {
            Value::Array(items) => {
                let parts: Vec<String> =
                    items.iter().flat_map(|item| self.repeated(item)).collect();
                let (a, b) = (self.space(), self.space());
                format!("[{a}{}{b}]", parts.join(","))
            }
            Value::Object(members) => {
                let mut entries: Vec<(&String, &Value)> = members.iter().collect();
                for i in (1..entries.len()).rev() {
                    let j = (self.next() % (i as u64 + 1)) as usize;
                    entries.swap(i, j);
                }
                let mut parts = Vec::new();
                for (key, member) in entries {
                    let key = serde_json::to_string(key).expect("a string serializes");
                    for text in self.repeated(member) {
                        let (a, b) = (self.space(), self.space());
                        parts.push(format!("{a}{key}{b}:{text}"));
                    }
                }
                let space = self.space();
                format!("{{{}{space}}}", parts.join(","))
            }
            scalar => serde_json::to_string(scalar).expect("a scalar serializes"),
        };
        Some(match edit {
            None => written,
            Some(JsonEdit::Remove(_)) => return None,
            Some(JsonEdit::Replace(_, oddity)) => oddity.text(),
            Some(JsonEdit::Duplicate(_)) => written,
            Some(JsonEdit::Wrap(_)) => format!("[{written}]"),
        })
    }

    /// A child's text, twice when the edit duplicates it.
    fn repeated(&mut self, child: &Value) -> Vec<String> {
        let duplicated =
            matches!(self.edit, Some((at, JsonEdit::Duplicate(_))) if at == self.counter);
        let Some(text) = self.value(child) else {
            return Vec::new();
        };
        if duplicated {
            vec![text.clone(), text]
        } else {
            vec![text]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewrite_is_the_same_value_in_other_bytes() {
        let value: Value =
            serde_json::json!({"b": [1, {"c": null, "a": "x"}], "a": 2.5, "z": true});
        let canonical = serde_json::to_string(&value).unwrap();
        let rewrites: Vec<String> = (0..8).map(|seed| rewrite_json(&value, seed)).collect();
        assert!(rewrites.iter().any(|text| *text != canonical));
        for text in rewrites {
            assert_eq!(
                serde_json::from_str::<Value>(&text).unwrap(),
                value,
                "{text}"
            );
        }
    }

    #[test]
    fn edits_change_the_value_at_the_chosen_node() {
        let value: Value = serde_json::json!({"a": [1, 2]});
        assert_eq!(apply_json(&value, &JsonEdit::Remove(2)), r#"{"a":[2]}"#);
        assert_eq!(
            apply_json(&value, &JsonEdit::Duplicate(1)),
            r#"{"a":[1,2],"a":[1,2]}"#
        );
        assert_eq!(
            apply_json(&value, &JsonEdit::Replace(7, Oddity::BeyondU64)),
            r#"{"a":[1,18446744073709551616]}"#
        );
        assert_eq!(apply_json(&value, &JsonEdit::Wrap(0)), r#"[{"a":[1,2]}]"#);
    }
}
