//! The model actor (PSP-10 system 27).
//!
//! This module owns everything between a branch directory and a model
//! endpoint. So far: [`config`], the `[[models]]` and `[verification]`
//! tables ([`ModelEndpoint`], [`VerificationConfig`] / [`TestPolicy`],
//! [`family_of_model`]), loaded through `Config::models` and
//! `Config::verification`. It never holds an API key.

pub mod config;

pub use config::{AdapterKind, ModelEndpoint, TestPolicy, VerificationConfig, family_of_model};
