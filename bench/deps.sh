#!/usr/bin/env bash
# First repair, first diagnostics and a warm repair on a crate with a realistic
# set of crates.io dependencies that the user has already built, each against
# the user's own in-place cargo after the same edit. Medians of --runs N (3),
# of wall time and of CPU time (the load-independent figure).
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
app="$work/app"
mkdir -p "$app/src"
# The user's crate: its own target/, built by them; no CARGO_TARGET_DIR.
unset CARGO_TARGET_DIR
cat > "$app/Cargo.toml" <<'TOML'
[package]
name = "depsbench"
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
cat > "$app/src/lib.rs" <<'RS'
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
good="$work/lib.rs.good"
cp "$app/src/lib.rs" "$good"
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
# The user's in-place check + test, each allowed to fail (the broken edit).
inplace() { timed sh -c 'cd "$1" && { cargo check --quiet --all-targets; cargo test --quiet; }' _ "$app"; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
user_build() { (cd "$app" && cargo check --quiet --all-targets >/dev/null 2>&1; cargo test --quiet >/dev/null 2>&1) || true; }

# The user has built and tested the crate.
user_build
packages=$(grep -c '^name = ' "$app/Cargo.lock")
echo "fixture: $packages packages in Cargo.lock, user target $(du -sh "$app/target" | cut -f1)"

: > "$work/inplace"; : > "$work/repair"; : > "$work/lsp"; : > "$work/check"
: > "$work/warm"; : > "$work/inplace_warm"; : > "$work/floor"
: > "$work/inplace_cpu"; : > "$work/repair_cpu"; : > "$work/warm_cpu"; : > "$work/inplace_warm_cpu"
: > "$work/floor_cpu"
for i in $(seq 1 "$runs"); do
  # The floor no repair of this edit goes below: the check that finds the
  # error and a test of the fix (the compiler's suggestion, the text the
  # repair verifies), both the user's own, in place. A pass of its own,
  # before the user builds again: its test leaves incremental state of
  # the fix, which nothing measured below may start from.
  cp "$good" "$app/src/lib.rs"
  user_build
  sed -i '/^use std::collections::BTreeMap;$/d' "$app/src/lib.rs"
  read -r check_wall check_cpu _ < <(timed sh -c 'cd "$1" && cargo check --quiet --all-targets' _ "$app")
  sed -i 's/^use anyhow::{Context, Result};$/use std::collections::BTreeMap;\n&/' "$app/src/lib.rs"
  read -r wall cpu status < <(timed sh -c 'cd "$1" && cargo test --quiet' _ "$app")
  [ "$status" = 0 ] || { echo "bench/deps.sh: the fixed crate's tests failed in place" >&2; exit 1; }
  echo $((check_wall + wall)) >> "$work/floor"
  echo $((check_cpu + cpu)) >> "$work/floor_cpu"

  cp "$good" "$app/src/lib.rs"
  user_build
  # The broken edit: the `BTreeMap` import removed.
  sed -i '/^use std::collections::BTreeMap;$/d' "$app/src/lib.rs"
  read -r check_wall check_cpu _ < <(timed sh -c 'cd "$1" && cargo check --quiet --all-targets' _ "$app")
  echo "$check_wall" >> "$work/check"
  read -r wall cpu _ < <(timed sh -c 'cd "$1" && cargo test --quiet' _ "$app")
  echo $((check_wall + wall)) >> "$work/inplace"
  echo $((check_cpu + cpu)) >> "$work/inplace_cpu"
  # The same broken edit, seen by the user's check and test, then Trellis cold.
  rm -rf "$app/.trellis"
  export TRELLIS_CACHE_DIR="$work/cache-lsp-$i"
  python3 bench/lsp_first_diagnostics.py "$trellis" "$app" src/lib.rs >> "$work/lsp"
  # Each run's caches stay until the end: deleting one just before the
  # next measurement is nothing a user does, and on a file system without
  # a journal it slows the next run's file creation (ext4 then passes over
  # every inode freed in the last one to six minutes for each new file),
  # charging the harness's cleanup to Trellis.
  rm -rf "$app/.trellis"
  export TRELLIS_CACHE_DIR="$work/cache-$i"
  read -r wall cpu status < <(timed "$trellis" repair "$app")
  [ "$status" = 0 ] || { echo "bench/deps.sh: trellis repair exited $status" >&2; exit 1; }
  echo "$wall" >> "$work/repair"
  echo "$cpu" >> "$work/repair_cpu"
  # Steady state: one more line edited (a string in a function body), warm.
  sed -i 's/"bad pattern"/"invalid pattern"/' "$app/src/lib.rs"
  read -r wall cpu _ < <(inplace)
  echo "$wall" >> "$work/inplace_warm"
  echo "$cpu" >> "$work/inplace_warm_cpu"
  read -r wall cpu _ < <(timed "$trellis" repair "$app")
  echo "$wall" >> "$work/warm"
  echo "$cpu" >> "$work/warm_cpu"
done

row() {
  local a b
  a=$(median < "$work/$2"); b=$(median < "$work/$3")
  printf '%-58s %8s / %8s ms  %5.2fx\n' "$1" "$a" "$b" "$(echo "$a / $b" | bc -l)"
}
echo "medians of $runs (Trellis / baseline):"
row "first repair, cold cache vs in-place check + test" repair inplace
row "  the floor (check, then a test of the fix) vs the same" floor inplace
row "  first repair vs the floor" repair floor
row "lsp: initialize to first diagnostics vs in-place check" lsp check
row "warm repair after a one-line edit vs in-place check + test" warm inplace_warm
echo "CPU time (user + system, every child included), medians of $runs:"
row "first repair, cold cache vs in-place check + test" repair_cpu inplace_cpu
row "  the floor (check, then a test of the fix) vs the same" floor_cpu inplace_cpu
row "warm repair after a one-line edit vs in-place check + test" warm_cpu inplace_warm_cpu
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
