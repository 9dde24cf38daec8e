//! Exact no-goods (PSP-10 system 21, errata 4 and 15, gate AB).
//!
//! A no-good suppresses one exact repeated attempt. Its key is a digest over
//! all nine components of [`NoGoodComponents`]; a lookup matches only when
//! every component is equal, so any changed root, domain, strategy, prompt,
//! proposal, grant, tool catalog, sensor or build permits a new attempt.
//! There is no pattern, prefix or wildcard anywhere in the key.
//!
//! A no-good also needs deterministic [`Support`]: a compiler code, a failed
//! test identity, a contract diagnostic, an unchanged state root, or a denied
//! capability. [`Support::from_evidence`] is the only way to build one from
//! measured evidence, and it refuses environmental trouble (a sensor that
//! could not run, a tool failure, a timeout, a provider outage, a budget
//! limit) and model text: recording those would wrongly suppress a valid
//! retry.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::cluster::{Assessment, Cluster, ResidualClass};
use crate::diagnostic::Rerun;
use crate::digest::{CanonicalHasher, Digest};

/// The git commit this engine was built from (empty when the build had no
/// git), stamped by `engine/build.rs`.
pub const BUILD_GIT_SHA: &str = env!("TRELLIS_BUILD_GIT_SHA");

/// The runtime-build digest b of the no-good key: the crate version and the
/// stamped commit. A build without git has the version-only identity.
pub fn build_digest() -> Digest {
    CanonicalHasher::new("trellis.runtime-build.v1")
        .str(env!("CARGO_PKG_VERSION"))
        .str(BUILD_GIT_SHA)
        .finish()
}

/// The nine components of K_ng. Each is an exact digest; `prompt_program`
/// is `None` for a deterministic proposer, which is itself an exact value
/// ("no program"), never a wildcard. Ledgered with every record and decoded
/// strictly: an unknown field is format drift, never ignored.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoGoodComponents {
    pub accepted_root: Digest,
    /// Residual schema, energy model, hard-gate policy, verifier suite.
    pub domain_manifest: Digest,
    pub strategy: Digest,
    pub prompt_program: Option<Digest>,
    /// The candidate's canonical proposal digest (`propose::Candidate::digest`).
    pub proposal: Digest,
    /// Capability grant, write scope and graph-revision binding.
    pub grant: Digest,
    pub tool_catalog: Digest,
    /// Digest of the required sensors' fingerprints.
    pub sensor_fingerprint: Digest,
    /// [`build_digest`].
    pub runtime_build: Digest,
}

/// K_ng. Computed only from a complete [`NoGoodComponents`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NoGoodKey(Digest);

impl NoGoodKey {
    pub fn of(c: &NoGoodComponents) -> NoGoodKey {
        let mut h = CanonicalHasher::new("trellis.no-good.v1");
        h.digest(&c.accepted_root)
            .digest(&c.domain_manifest)
            .digest(&c.strategy);
        match &c.prompt_program {
            Some(program) => h.digest(program),
            None => h.bytes(&[]),
        };
        h.digest(&c.proposal)
            .digest(&c.grant)
            .digest(&c.tool_catalog)
            .digest(&c.sensor_fingerprint)
            .digest(&c.runtime_build);
        NoGoodKey(h.finish())
    }

    pub fn digest(&self) -> Digest {
        self.0
    }
}

/// What a compiler diagnostic contributes: its structured codes, or, when
/// the sensor preserved none, a class-tagged hash of the residual's
/// identity. Never the message prose.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "form", rename_all = "snake_case", deny_unknown_fields)]
pub enum CompilerEvidence {
    /// Sorted, distinct codes of the clustered diagnostics.
    Codes { codes: Vec<String> },
    ClassHash {
        class: ResidualClass,
        digest: Digest,
    },
}

/// Deterministic support for a no-good (erratum 4's eligibility table).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "support_kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Support {
    CompilerCode {
        evidence: CompilerEvidence,
    },
    /// Sorted, distinct `binary::name` identities.
    FailedTest {
        tests: Vec<String>,
    },
    ContractDiagnostic {
        digest: Digest,
    },
    /// The candidate realized the state it started from.
    UnchangedState {
        root: Digest,
    },
    DeniedCapability {
        capability: String,
    },
}

/// Trouble in the environment rather than in the candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Environmental {
    SensorUnavailable,
    ToolFailure,
    Timeout,
    ProviderUnavailable,
    Budget,
}

/// Evidence offered in support of a no-good.
#[derive(Clone, Debug)]
pub enum Evidence<'a> {
    /// A residual cluster of a measured state.
    Cluster {
        cluster: &'a Cluster,
        assessment: &'a Assessment,
    },
    UnchangedState {
        root: Digest,
    },
    ContractDiagnostic {
        digest: Digest,
    },
    DeniedCapability {
        capability: String,
    },
    Environmental(Environmental),
    /// A model's interpretation: an observation, never support.
    ModelText(&'a str),
}

/// Why evidence cannot support a no-good, or a record cannot be restored.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoGoodRefusal {
    #[error("environmental evidence ({0:?}) cannot support a no-good: a retry may succeed")]
    Environmental(Environmental),
    #[error("model text is an observation and cannot support a no-good")]
    ModelText,
    #[error("advisory residuals (warnings, lints) cannot support a no-good")]
    Advisory,
    #[error("the evidence is empty")]
    Empty,
    /// A failing test of a nondeterministic stage that did not fail again
    /// when re-run (flaky) or could not be re-run (unconfirmed).
    #[error(
        "test {} did not fail again when re-run (declared nondeterministic): a flaky or \
         unconfirmed failure cannot support a no-good",
        tests.join(", ")
    )]
    Unconfirmed { tests: Vec<String> },
    #[error("recorded no-good key {recorded} does not match its components ({derived})")]
    KeyMismatch { recorded: Digest, derived: Digest },
    #[error("recorded evidence digest {recorded} does not match its support ({derived})")]
    EvidenceMismatch { recorded: Digest, derived: Digest },
}

fn sorted_distinct(items: impl IntoIterator<Item = String>) -> Vec<String> {
    items
        .into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

impl Support {
    /// Derives support from measured evidence, refusing anything that is not
    /// deterministic. A cluster from a measurement in which any stage could
    /// not run is refused too: the measurement is incomplete.
    pub fn from_evidence(evidence: Evidence<'_>) -> Result<Support, NoGoodRefusal> {
        match evidence {
            Evidence::Environmental(cause) => Err(NoGoodRefusal::Environmental(cause)),
            Evidence::ModelText(_) => Err(NoGoodRefusal::ModelText),
            Evidence::UnchangedState { root } => Ok(Support::UnchangedState { root }),
            Evidence::ContractDiagnostic { digest } => Ok(Support::ContractDiagnostic { digest }),
            Evidence::DeniedCapability { capability } if capability.is_empty() => {
                Err(NoGoodRefusal::Empty)
            }
            Evidence::DeniedCapability { capability } => {
                Ok(Support::DeniedCapability { capability })
            }
            Evidence::Cluster {
                cluster,
                assessment,
            } => {
                // A measured state with one unconfirmed failure is not
                // deterministic evidence as a whole, like one with a stage
                // that could not run.
                let unconfirmed = sorted_distinct(
                    assessment
                        .failures
                        .iter()
                        .filter(|f| f.rerun.is_some_and(|r| r != Rerun::FailedAgain))
                        .map(|f| format!("{}::{}", f.binary, f.name)),
                );
                if !unconfirmed.is_empty() {
                    return Err(NoGoodRefusal::Unconfirmed { tests: unconfirmed });
                }
                if assessment
                    .clusters
                    .iter()
                    .any(|c| !c.class.is_deterministic())
                {
                    return Err(NoGoodRefusal::Environmental(
                        Environmental::SensorUnavailable,
                    ));
                }
                match cluster.class {
                    ResidualClass::SensorUnavailable => Err(NoGoodRefusal::Environmental(
                        Environmental::SensorUnavailable,
                    )),
                    ResidualClass::Warning => Err(NoGoodRefusal::Advisory),
                    ResidualClass::TestFailure => {
                        let tests = sorted_distinct(cluster.failures.iter().map(|&i| {
                            let f = &assessment.failures[i];
                            format!("{}::{}", f.binary, f.name)
                        }));
                        if tests.is_empty() {
                            return Err(NoGoodRefusal::Empty);
                        }
                        Ok(Support::FailedTest { tests })
                    }
                    ResidualClass::Syntax
                    | ResidualClass::UnresolvedName
                    | ResidualClass::Type
                    | ResidualClass::CompileError
                    | ResidualClass::Borrow => {
                        let codes: Option<Vec<String>> = cluster
                            .diagnostics
                            .iter()
                            .map(|&i| assessment.diagnostics[i].code.clone())
                            .collect();
                        let evidence = match codes {
                            Some(codes) if !codes.is_empty() => CompilerEvidence::Codes {
                                codes: sorted_distinct(codes),
                            },
                            _ => CompilerEvidence::ClassHash {
                                class: cluster.class,
                                digest: cluster.digest,
                            },
                        };
                        Ok(Support::CompilerCode { evidence })
                    }
                }
            }
        }
    }

    /// The `support_kind` ledgered with the record for replay verification.
    pub fn kind(&self) -> &'static str {
        match self {
            Support::CompilerCode { .. } => "compiler_code",
            Support::FailedTest { .. } => "failed_test",
            Support::ContractDiagnostic { .. } => "contract_diagnostic",
            Support::UnchangedState { .. } => "unchanged_state",
            Support::DeniedCapability { .. } => "denied_capability",
        }
    }

    /// The supporting-evidence hash, stored beside the key.
    pub fn evidence_digest(&self) -> Digest {
        let mut h = CanonicalHasher::new("trellis.no-good.evidence.v1");
        h.str(self.kind());
        match self {
            Support::CompilerCode {
                evidence: CompilerEvidence::Codes { codes },
            } => {
                h.str("codes").u64(codes.len() as u64);
                for code in codes {
                    h.str(code);
                }
            }
            Support::CompilerCode {
                evidence: CompilerEvidence::ClassHash { class, digest },
            } => {
                h.str("class_hash").str(class.as_str()).digest(digest);
            }
            Support::FailedTest { tests } => {
                h.u64(tests.len() as u64);
                for test in tests {
                    h.str(test);
                }
            }
            Support::ContractDiagnostic { digest } => {
                h.digest(digest);
            }
            Support::UnchangedState { root } => {
                h.digest(root);
            }
            Support::DeniedCapability { capability } => {
                h.str(capability);
            }
        }
        h.finish()
    }
}

/// One recorded no-good: the `no_good_recorded` payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoGood {
    pub key: NoGoodKey,
    pub components: NoGoodComponents,
    pub support: Support,
    pub evidence_digest: Digest,
}

impl NoGood {
    pub fn new(components: NoGoodComponents, support: Support) -> NoGood {
        NoGood {
            key: NoGoodKey::of(&components),
            evidence_digest: support.evidence_digest(),
            components,
            support,
        }
    }

    /// A record read back from the ledger: its recorded key and evidence
    /// digest must be the ones its components and support give.
    pub fn from_record(
        key: Digest,
        evidence_digest: Digest,
        components: NoGoodComponents,
        support: Support,
    ) -> Result<NoGood, NoGoodRefusal> {
        let nogood = NoGood {
            key: NoGoodKey(key),
            components,
            support,
            evidence_digest,
        };
        nogood.verify()?;
        Ok(nogood)
    }

    /// Re-derives the key and the evidence digest of a record read back from
    /// the ledger.
    pub fn verify(&self) -> Result<(), NoGoodRefusal> {
        let derived = NoGoodKey::of(&self.components);
        if derived != self.key {
            return Err(NoGoodRefusal::KeyMismatch {
                recorded: self.key.0,
                derived: derived.0,
            });
        }
        let derived = self.support.evidence_digest();
        if derived != self.evidence_digest {
            return Err(NoGoodRefusal::EvidenceMismatch {
                recorded: self.evidence_digest,
                derived,
            });
        }
        Ok(())
    }
}

/// The session's exact-key no-good store. It outlives any one forest: a
/// resumed session folds every recorded no-good back into it (erratum 35).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NoGoodStore {
    records: BTreeMap<NoGoodKey, NoGood>,
}

impl NoGoodStore {
    pub fn new() -> Self {
        NoGoodStore::default()
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &NoGood> {
        self.records.values()
    }

    /// Records a no-good; returns it when new, `None` when the exact key was
    /// already recorded (the first record stays).
    pub fn record(&mut self, components: NoGoodComponents, support: Support) -> Option<&NoGood> {
        let nogood = NoGood::new(components, support);
        self.insert(nogood)
    }

    /// Folds a ledgered record back in after verifying it.
    pub fn restore(&mut self, nogood: NoGood) -> Result<bool, NoGoodRefusal> {
        nogood.verify()?;
        Ok(self.insert(nogood).is_some())
    }

    fn insert(&mut self, nogood: NoGood) -> Option<&NoGood> {
        match self.records.entry(nogood.key) {
            std::collections::btree_map::Entry::Occupied(_) => None,
            std::collections::btree_map::Entry::Vacant(slot) => Some(slot.insert(nogood)),
        }
    }

    /// The no-good that suppresses exactly this attempt, if any. The stored
    /// components are compared too, so even a digest collision cannot make
    /// unequal components match.
    pub fn suppresses(&self, components: &NoGoodComponents) -> Option<&NoGood> {
        self.records
            .get(&NoGoodKey::of(components))
            .filter(|n| n.components == *components)
    }
}

/// Components for tests of exact matching: nine distinct digests from a
/// seed, and the same with one component replaced.
#[cfg(test)]
pub(crate) mod test_components {
    use super::NoGoodComponents;
    use crate::digest::{Digest, blob_digest};

    pub(crate) fn components(seed: &[u8; 9]) -> NoGoodComponents {
        let d = |i: usize| blob_digest(&[seed[i], i as u8]);
        NoGoodComponents {
            accepted_root: d(0),
            domain_manifest: d(1),
            strategy: d(2),
            prompt_program: Some(d(3)),
            proposal: d(4),
            grant: d(5),
            tool_catalog: d(6),
            sensor_fingerprint: d(7),
            runtime_build: d(8),
        }
    }

    /// `c` with component `index` replaced by `value`.
    pub(crate) fn with_component(
        mut c: NoGoodComponents,
        index: usize,
        value: Digest,
    ) -> NoGoodComponents {
        match index {
            0 => c.accepted_root = value,
            1 => c.domain_manifest = value,
            2 => c.strategy = value,
            3 => c.prompt_program = Some(value),
            4 => c.proposal = value,
            5 => c.grant = value,
            6 => c.tool_catalog = value,
            7 => c.sensor_fingerprint = value,
            _ => c.runtime_build = value,
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::test_components::{components, with_component};
    use super::*;
    use crate::cluster::{EnergyModel, assess};
    use crate::diagnostic::{Diagnostic, Level, TestFailure};
    use crate::digest::blob_digest;
    use crate::sensor::test_report as report;
    use crate::sensor::{StageReport, StageStatus};
    use proptest::prelude::*;

    fn error(code: Option<&str>, message: &str) -> Diagnostic {
        Diagnostic {
            stage: "build".into(),
            code: code.map(str::to_owned),
            level: Level::Error,
            message: message.into(),
            primary: None,
            secondary: vec![],
            notes: vec![],
            suggestions: vec![],
            rendered: None,
        }
    }

    fn support_of(reports: &[StageReport]) -> Result<Support, NoGoodRefusal> {
        let a = assess(reports, &["build".into()], &EnergyModel::V1);
        Support::from_evidence(Evidence::Cluster {
            cluster: &a.clusters[0],
            assessment: &a,
        })
    }

    #[test]
    fn gate_ab_environmental_evidence_is_refused() {
        for cause in [
            Environmental::SensorUnavailable,
            Environmental::ToolFailure,
            Environmental::Timeout,
            Environmental::ProviderUnavailable,
            Environmental::Budget,
        ] {
            assert_eq!(
                Support::from_evidence(Evidence::Environmental(cause)),
                Err(NoGoodRefusal::Environmental(cause))
            );
        }
        assert_eq!(
            Support::from_evidence(Evidence::ModelText("this approach cannot work")),
            Err(NoGoodRefusal::ModelText)
        );
        // A stage that could not run makes even a coded error unusable.
        let reports = [
            report(
                "build",
                StageStatus::Failed,
                vec![error(Some("E0308"), "mismatched types")],
                vec![],
            ),
            report(
                "test",
                StageStatus::Unavailable {
                    reason: "timed out".into(),
                },
                vec![],
                vec![],
            ),
        ];
        assert_eq!(
            support_of(&reports),
            Err(NoGoodRefusal::Environmental(
                Environmental::SensorUnavailable
            ))
        );
    }

    #[test]
    fn compiler_evidence_is_codes_or_a_class_hash_never_prose() {
        let coded = [report(
            "build",
            StageStatus::Failed,
            vec![
                error(Some("E0432"), "unresolved import `a`"),
                error(Some("E0432"), "unresolved import `a`x"),
            ],
            vec![],
        )];
        let support = support_of(&coded).unwrap();
        assert_eq!(support.kind(), "compiler_code");
        let Support::CompilerCode {
            evidence: CompilerEvidence::Codes { codes },
        } = &support
        else {
            panic!("expected codes, got {support:?}");
        };
        assert!(codes.iter().all(|c| c == "E0432"));

        let uncoded = [report(
            "build",
            StageStatus::Failed,
            vec![error(None, "expected `;`, found `}`")],
            vec![],
        )];
        let support = support_of(&uncoded).unwrap();
        let Support::CompilerCode {
            evidence: CompilerEvidence::ClassHash { class, .. },
        } = &support
        else {
            panic!("expected a class hash, got {support:?}");
        };
        assert_eq!(*class, ResidualClass::Syntax);
        let recorded = serde_json::to_string(&support).unwrap();
        assert!(
            !recorded.contains("expected"),
            "prose leaked into support: {recorded}"
        );
    }

    #[test]
    fn failed_tests_support_by_identity() {
        let failure = |name: &str| TestFailure {
            binary: "lib".into(),
            name: name.into(),
            output: "assertion failed".into(),
            location: None,
            calls: vec![],
            rerun: None,
        };
        let reports = [
            report("build", StageStatus::Passed, vec![], vec![]),
            report(
                "test",
                StageStatus::Failed,
                vec![],
                vec![failure("tests::adds")],
            ),
        ];
        assert_eq!(
            support_of(&reports),
            Ok(Support::FailedTest {
                tests: vec!["lib::tests::adds".into()]
            })
        );
    }

    /// Item 12 / Gate AB: in a nondeterministic stage only a failure that
    /// failed again when re-run is deterministic evidence.
    #[test]
    fn gate_ab_only_a_failure_that_failed_again_supports_a_no_good() {
        let failure = |name: &str, rerun: Option<Rerun>| TestFailure {
            binary: "-p shop --lib".into(),
            name: name.into(),
            output: "assertion failed".into(),
            location: None,
            calls: vec![],
            rerun,
        };
        let measured = |failures: Vec<TestFailure>| {
            [
                report("build", StageStatus::Passed, vec![], vec![]),
                report("test", StageStatus::Failed, vec![], failures),
            ]
        };
        assert_eq!(
            support_of(&measured(vec![failure("a", Some(Rerun::FailedAgain))])),
            Ok(Support::FailedTest {
                tests: vec!["-p shop --lib::a".into()]
            })
        );
        for outcome in [Rerun::Passed, Rerun::NotRerun] {
            assert_eq!(
                support_of(&measured(vec![
                    failure("a", Some(Rerun::FailedAgain)),
                    failure("b", Some(outcome)),
                ])),
                Err(NoGoodRefusal::Unconfirmed {
                    tests: vec!["-p shop --lib::b".into()]
                }),
                "{outcome:?}"
            );
        }
    }

    #[test]
    fn warnings_and_empty_evidence_are_refused() {
        let mut warning = error(Some("unused_variables"), "unused variable `x`");
        warning.level = Level::Warning;
        let reports = [report("build", StageStatus::Passed, vec![warning], vec![])];
        assert_eq!(support_of(&reports), Err(NoGoodRefusal::Advisory));
        assert_eq!(
            Support::from_evidence(Evidence::DeniedCapability {
                capability: String::new()
            }),
            Err(NoGoodRefusal::Empty)
        );
    }

    #[test]
    fn store_matches_exactly_and_keeps_the_first_record() {
        let mut store = NoGoodStore::new();
        let c = components(&[1; 9]);
        let support = Support::UnchangedState {
            root: c.accepted_root,
        };
        assert!(store.record(c.clone(), support.clone()).is_some());
        assert!(store.record(c.clone(), support).is_none());
        assert_eq!(store.len(), 1);
        assert!(store.suppresses(&c).is_some());
        let mut no_program = c.clone();
        no_program.prompt_program = None;
        assert!(
            store.suppresses(&no_program).is_none(),
            "no program is a value, not a wildcard"
        );
    }

    #[test]
    fn restore_verifies_key_and_evidence() {
        let c = components(&[2; 9]);
        let good = NoGood::new(
            c.clone(),
            Support::DeniedCapability {
                capability: "net".into(),
            },
        );
        let mut store = NoGoodStore::new();
        assert_eq!(store.restore(good.clone()), Ok(true));
        let mut forged = good.clone();
        forged.components.grant = blob_digest(b"other grant");
        assert!(matches!(
            store.restore(forged),
            Err(NoGoodRefusal::KeyMismatch { .. })
        ));
        let mut swapped = good;
        swapped.support = Support::DeniedCapability {
            capability: "fs".into(),
        };
        assert!(matches!(
            store.restore(swapped),
            Err(NoGoodRefusal::EvidenceMismatch { .. })
        ));
    }

    #[test]
    fn gate_ab_every_component_is_part_of_the_key() {
        let base = components(&[7; 9]);
        let mut store = NoGoodStore::new();
        store.record(
            base.clone(),
            Support::UnchangedState {
                root: base.accepted_root,
            },
        );
        for index in 0..9 {
            let changed = with_component(base.clone(), index, blob_digest(b"changed"));
            assert_ne!(
                NoGoodKey::of(&changed),
                NoGoodKey::of(&base),
                "component {index}"
            );
            assert!(store.suppresses(&changed).is_none(), "component {index}");
        }
    }

    /// Gate AB: the all-zero digest, the nearest thing to a wildcard a
    /// caller could pass, is an ordinary exact value.
    #[test]
    fn gate_ab_no_wildcard_by_construction() {
        let zero = NoGoodComponents {
            accepted_root: Digest::ZERO,
            domain_manifest: Digest::ZERO,
            strategy: Digest::ZERO,
            prompt_program: None,
            proposal: Digest::ZERO,
            grant: Digest::ZERO,
            tool_catalog: Digest::ZERO,
            sensor_fingerprint: Digest::ZERO,
            runtime_build: Digest::ZERO,
        };
        let real = components(&[3; 9]);
        let mut store = NoGoodStore::new();
        store.record(zero.clone(), Support::UnchangedState { root: Digest::ZERO });
        assert!(store.suppresses(&real).is_none());
        let mut store = NoGoodStore::new();
        store.record(
            real.clone(),
            Support::UnchangedState {
                root: real.accepted_root,
            },
        );
        assert!(store.suppresses(&zero).is_none());
    }

    #[test]
    fn build_digest_is_stable_within_a_build() {
        assert_eq!(build_digest(), build_digest());
        assert!(BUILD_GIT_SHA.is_empty() || BUILD_GIT_SHA.len() >= 7);
    }

    proptest! {
        /// Gate AB: over random component vectors, a lookup whose components
        /// differ from a record in any one position never matches, and equal
        /// components always do.
        #[test]
        fn gate_ab_unequal_keys_never_match(
            seed in any::<[u8; 9]>(),
            index in 0usize..9,
            replacement in any::<[u8; 32]>(),
        ) {
            let recorded = components(&seed);
            let mut store = NoGoodStore::new();
            store.record(recorded.clone(), Support::UnchangedState { root: recorded.accepted_root });
            prop_assert!(store.suppresses(&recorded).is_some());
            let probe = with_component(recorded.clone(), index, Digest(replacement));
            if probe != recorded {
                prop_assert!(store.suppresses(&probe).is_none());
                prop_assert_ne!(NoGoodKey::of(&probe), NoGoodKey::of(&recorded));
            }
        }
    }
}
