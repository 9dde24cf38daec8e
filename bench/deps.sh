#!/usr/bin/env bash
# First repair, first diagnostics and a warm repair on two crates with a
# realistic set of crates.io dependencies (36 packages in the lock) that the
# user has already built, each against the user's own in-place cargo after
# the same edit: a one-file crate of 53 lines, where the costs every repair
# has whatever the size of the code (a test binary's link, Trellis's own)
# weigh most, and a generated library of about 2,100 lines in 16 modules
# (`bench/gen_library.py`), the size of a small real one. Medians of
# --runs N (3), of wall time and of CPU time (the load-independent figure).
#   bash bench/deps.sh [--runs N] [--trellis PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=3
trellis=""
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --trellis) trellis="$2"; shift 2 ;;
    *) echo "bench/deps.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$trellis" ]; then
  cargo build --quiet --release -p trellis-lsp
  trellis="$(realpath "${CARGO_TARGET_DIR:-target}")/release/trellis"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/trellis-bench-deps.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# The user's crates: each with its own target/, built by them; no
# CARGO_TARGET_DIR.
unset CARGO_TARGET_DIR
manifest() {
  mkdir -p "$1/src"
  cat > "$1/Cargo.toml" <<TOML
[package]
name = "$2"
version = "0.1.0"
edition = "2021"

[dependencies]
anyhow = "1"
clap = { version = "4", features = ["derive"] }
itertools = "0.14"
regex = "1"
serde = { version = "1", features = ["derive"] }
serde_json = "1"
TOML
}
small="$work/small"
manifest "$small" depsbench
cat > "$small/src/lib.rs" <<'RS'
use std::collections::BTreeMap;

use anyhow::{Context, Result};
use clap::Parser;
use itertools::Itertools;
use regex::Regex;
use serde::{Deserialize, Serialize};

#[derive(Parser, Debug)]
pub struct Args {
    #[arg(long, default_value = "word")]
    pub pattern: String,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
pub struct Report {
    pub counts: BTreeMap<String, usize>,
    pub label: String,
}

pub fn count(pattern: &str, text: &str) -> Result<Report> {
    let re = Regex::new(pattern).context("bad pattern")?;
    let mut counts = BTreeMap::new();
    for found in re.find_iter(text) {
        *counts.entry(found.as_str().to_lowercase()).or_insert(0) += 1;
    }
    let label = counts.keys().join(",");
    Ok(Report { counts, label })
}

pub fn to_json(report: &Report) -> Result<String> {
    Ok(serde_json::to_string(report)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_round_trips() {
        let report = count(r"\w+", "a b a").unwrap();
        assert_eq!(report.counts["a"], 2);
        assert_eq!(report.label, "a,b");
        let back: Report = serde_json::from_str(&to_json(&report).unwrap()).unwrap();
        assert_eq!(back, report);
    }

    #[test]
    fn parses_arguments() {
        let args = Args::parse_from(["bench", "--pattern", "x"]);
        assert_eq!(args.pattern, "x");
    }
}
RS
library="$work/library"
manifest "$library" librarybench
python3 bench/gen_library.py "$library" 16

# Runs a command (output discarded); prints its wall and CPU milliseconds
# (user + system of it and every child it waited for: load-independent,
# unlike wall time on a shared machine) and its exit status.
timed() {
  python3 -c '
import resource, subprocess, sys, time
start = time.monotonic()
status = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
wall = time.monotonic() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(int(wall * 1000), int((usage.ru_utime + usage.ru_stime) * 1000), status)
' "$@"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# Measures one crate: `bench_crate NAME DIR FILE FIX`, NAME as printed, DIR
# the crate. The edit removes the `BTreeMap` import from FILE; FIX is the
# sed script of the compiler's suggestion for it, the text the repair
# verifies.
bench_crate() {
  local name="$1" app="$2" file="$2/$3" fix="$4" out="$work/results-${2##*/}" i
  local wall cpu status check_wall check_cpu
  mkdir -p "$out"
  cp "$file" "$out/good"
  # The user's in-place check + test, each allowed to fail (the broken edit).
  inplace() { timed sh -c 'cd "$1" && { cargo check --quiet --all-targets; cargo test --quiet; }' _ "$app"; }
  user_build() { (cd "$app" && cargo check --quiet --all-targets >/dev/null 2>&1; cargo test --quiet >/dev/null 2>&1) || true; }

  # The user has built and tested the crate.
  user_build
  echo "$name: $(wc -l < "$file") of $(cat "$app"/src/*.rs | wc -l) lines in $(find "$app/src" -name '*.rs' | wc -l) files," \
    "$(grep -c '^name = ' "$app/Cargo.lock") packages in Cargo.lock, user target $(du -sh "$app/target" | cut -f1)"
  for i in $(seq 1 "$runs"); do
    # The floor no repair of this edit goes below: the check that finds
    # the error and a test of the fix, both the user's own, in place. A
    # pass of its own, before the user builds again: its test leaves
    # incremental state of the fix, which nothing measured below may
    # start from.
    cp "$out/good" "$file"
    user_build
    sed -i '/^use std::collections::BTreeMap;$/d' "$file"
    read -r check_wall check_cpu _ < <(timed sh -c 'cd "$1" && cargo check --quiet --all-targets' _ "$app")
    sed -i "$fix" "$file"
    read -r wall cpu status < <(timed sh -c 'cd "$1" && cargo test --quiet' _ "$app")
    [ "$status" = 0 ] || { echo "bench/deps.sh: $name: the fixed crate's tests failed in place" >&2; exit 1; }
    echo $((check_wall + wall)) >> "$out/floor"
    echo $((check_cpu + cpu)) >> "$out/floor_cpu"

    cp "$out/good" "$file"
    user_build
    # The broken edit: the `BTreeMap` import removed.
    sed -i '/^use std::collections::BTreeMap;$/d' "$file"
    read -r check_wall check_cpu _ < <(timed sh -c 'cd "$1" && cargo check --quiet --all-targets' _ "$app")
    echo "$check_wall" >> "$out/check"
    read -r wall cpu _ < <(timed sh -c 'cd "$1" && cargo test --quiet' _ "$app")
    echo $((check_wall + wall)) >> "$out/inplace"
    echo $((check_cpu + cpu)) >> "$out/inplace_cpu"
    # The same broken edit, seen by the user's check and test, then Trellis cold.
    rm -rf "$app/.trellis"
    export TRELLIS_CACHE_DIR="$out/cache-lsp-$i"
    python3 bench/lsp_first_diagnostics.py "$trellis" "$app" "${file#"$app/"}" >> "$out/lsp"
    # Each run's caches stay until the end: deleting one just before the
    # next measurement is nothing a user does, and on a file system
    # without a journal it slows the next run's file creation (ext4 then
    # passes over every inode freed in the last one to six minutes for
    # each new file), charging the harness's cleanup to Trellis.
    rm -rf "$app/.trellis"
    export TRELLIS_CACHE_DIR="$out/cache-$i"
    read -r wall cpu status < <(timed "$trellis" repair "$app")
    [ "$status" = 0 ] || { echo "bench/deps.sh: $name: trellis repair exited $status" >&2; exit 1; }
    echo "$wall" >> "$out/repair"
    echo "$cpu" >> "$out/repair_cpu"
    # Steady state: one more line edited (a string in a function body), warm.
    sed -i 's/"bad pattern"/"invalid pattern"/' "$file"
    read -r wall cpu _ < <(inplace)
    echo "$wall" >> "$out/inplace_warm"
    echo "$cpu" >> "$out/inplace_warm_cpu"
    read -r wall cpu _ < <(timed "$trellis" repair "$app")
    echo "$wall" >> "$out/warm"
    echo "$cpu" >> "$out/warm_cpu"
  done

  row() {
    local a b
    a=$(median < "$out/$2"); b=$(median < "$out/$3")
    printf '%-58s %8s / %8s ms  %5.2fx\n' "$1" "$a" "$b" "$(echo "$a / $b" | bc -l)"
  }
  echo "$name: medians of $runs (Trellis / baseline):"
  row "first repair, cold cache vs in-place check + test" repair inplace
  row "  the floor (check, then a test of the fix) vs the same" floor inplace
  row "  first repair vs the floor" repair floor
  row "lsp: initialize to first diagnostics vs in-place check" lsp check
  row "warm repair after a one-line edit vs in-place check + test" warm inplace_warm
  echo "$name: CPU time (user + system, every child included), medians of $runs:"
  row "first repair, cold cache vs in-place check + test" repair_cpu inplace_cpu
  row "  the floor (check, then a test of the fix) vs the same" floor_cpu inplace_cpu
  row "warm repair after a one-line edit vs in-place check + test" warm_cpu inplace_warm_cpu
  echo
}

# The compiler's suggestion puts the import above the first `use`; in the
# library, whose tests use the map too, also in each failing tests module.
bench_crate "small crate" "$small" src/lib.rs \
  's/^use anyhow::{Context, Result};$/use std::collections::BTreeMap;\n&/'
bench_crate "library" "$library" src/m7.rs \
  's/^use anyhow::{bail, Context, Result};$/use std::collections::BTreeMap;\n&/; s/^    use super::\*;$/    use std::collections::BTreeMap;\nuse super::*;/'
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
