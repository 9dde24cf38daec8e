#!/usr/bin/env python3
"""Writes the sources of a library the size of a small real one into
ROOT/src: MODULES modules (16: about 2,100 lines), each an event-sourced
record store built on the dependencies of `bench/deps.sh`'s manifest
(anyhow, itertools, regex, serde, serde_json): two serde types, a store of
six methods, a parser and two unit tests. Every module starts with the line
`bench/deps.sh` removes, `use std::collections::BTreeMap;`, and uses the
map in its code and in its tests.

Usage: gen_library.py ROOT [MODULES]"""
import os
import sys

MODULE = '''use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use itertools::Itertools;
use regex::Regex;
use serde::{Deserialize, Serialize};

/// One named record, with its tags and weights.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct RecordN {
    pub name: String,
    pub tags: Vec<String>,
    pub weights: BTreeMap<String, f64>,
    pub enabled: bool,
}

/// A change to the store, one JSON object per line in its log.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventN {
    Added { record: RecordN },
    Removed { name: String },
    Renamed { from: String, to: String },
    Weighed { name: String, key: String, weight: f64 },
}

/// The records and the events that made them.
#[derive(Debug, Default)]
pub struct StoreN {
    records: BTreeMap<String, RecordN>,
    log: Vec<EventN>,
}

impl StoreN {
    pub fn apply(&mut self, event: EventN) -> Result<()> {
        match &event {
            EventN::Added { record } => {
                if self.records.contains_key(&record.name) {
                    bail!("{} exists", record.name);
                }
                self.records.insert(record.name.clone(), record.clone());
            }
            EventN::Removed { name } => {
                self.records.remove(name).with_context(|| format!("no {name}"))?;
            }
            EventN::Renamed { from, to } => {
                let mut record = self.records.remove(from).with_context(|| format!("no {from}"))?;
                record.name = to.clone();
                self.records.insert(to.clone(), record);
            }
            EventN::Weighed { name, key, weight } => {
                let record = self.records.get_mut(name).with_context(|| format!("no {name}"))?;
                record.weights.insert(key.clone(), *weight);
            }
        }
        self.log.push(event);
        Ok(())
    }

    pub fn replay(events: &str) -> Result<Self> {
        let mut store = Self::default();
        for line in events.lines().filter(|line| !line.trim().is_empty()) {
            let event: EventN = serde_json::from_str(line).context("bad event")?;
            store.apply(event)?;
        }
        Ok(store)
    }

    pub fn matching(&self, pattern: &str) -> Result<Vec<&RecordN>> {
        let re = Regex::new(pattern).context("bad pattern")?;
        Ok(self.records.values().filter(|r| re.is_match(&r.name)).collect())
    }

    pub fn tag_summary(&self) -> String {
        self.records
            .values()
            .flat_map(|r| r.tags.iter())
            .sorted()
            .dedup_with_count()
            .map(|(count, tag)| format!("{tag}={count}"))
            .join(",")
    }

    pub fn total_weight(&self, key: &str) -> f64 {
        self.records.values().filter_map(|r| r.weights.get(key)).sum()
    }

    pub fn export(&self) -> Result<String> {
        Ok(serde_json::to_string_pretty(&self.records)?)
    }
}

/// `key = number` pairs anywhere in `text`.
pub fn parse_pairs(text: &str) -> Result<BTreeMap<String, f64>> {
    let re = Regex::new(r"(\\w+)\\s*=\\s*(-?[0-9.]+)").expect("a valid pattern");
    let mut out = BTreeMap::new();
    for cap in re.captures_iter(text) {
        let value: f64 = cap[2].parse().with_context(|| format!("bad number {}", &cap[2]))?;
        out.insert(cap[1].to_string(), value);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str) -> RecordN {
        let tags = vec!["a".into(), "b".into()];
        RecordN { name: name.into(), tags, weights: BTreeMap::new(), enabled: true }
    }

    #[test]
    fn replays_its_log() {
        let mut store = StoreN::default();
        store.apply(EventN::Added { record: record("x") }).unwrap();
        store.apply(EventN::Renamed { from: "x".into(), to: "y".into() }).unwrap();
        let weighed = EventN::Weighed { name: "y".into(), key: "k".into(), weight: 2.0 };
        store.apply(weighed).unwrap();
        let log = store.log.iter().map(|e| serde_json::to_string(e).unwrap()).join("\\n");
        let again = StoreN::replay(&log).unwrap();
        assert_eq!(again.total_weight("k"), 2.0);
        assert_eq!(again.tag_summary(), "a=1,b=1");
    }

    #[test]
    fn rejects_duplicates_and_parses_pairs() {
        let mut store = StoreN::default();
        store.apply(EventN::Added { record: record("x") }).unwrap();
        assert!(store.apply(EventN::Added { record: record("x") }).is_err());
        assert_eq!(store.matching("^x$").unwrap().len(), 1);
        assert_eq!(parse_pairs("a = 1.5, b=2").unwrap()["b"], 2.0);
    }
}
'''


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    root = sys.argv[1]
    modules = int(sys.argv[2]) if len(sys.argv) == 3 else 16
    src = os.path.join(root, "src")
    os.makedirs(src, exist_ok=True)
    lib = ["//! A generated library of the size of a small real one.", ""]
    lib += [f"pub mod m{i};" for i in range(modules)]
    with open(os.path.join(src, "lib.rs"), "w") as out:
        out.write("\n".join(lib) + "\n")
    for i in range(modules):
        # `N` only ever appears as the suffix of the three type names.
        text = MODULE
        for name in ("RecordN", "EventN", "StoreN"):
            text = text.replace(name, name[:-1] + str(i))
        with open(os.path.join(src, f"m{i}.rs"), "w") as out:
            out.write(text)


main()
