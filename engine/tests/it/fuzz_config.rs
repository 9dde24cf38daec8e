//! Property tests of the configuration reader (`trellis.toml`, the user
//! file's format, `initializationOptions`): any bytes load or are refused
//! naming the source; comments and spacing never change what loads. The
//! seed is the configuration `docs/configuration.md` documents.
//!
//! Its properties: `a_damaged_trellis_toml_loads_or_is_refused_naming_it`,
//! `comments_and_spacing_load_the_same_configuration`,
//! `edited_initialization_options_load_or_are_refused_naming_them`.

use proptest::prelude::*;
use trellis_core::fuzz::{self, CountingAllocator};
use trellis_engine::config::{Config, ConfigError};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// The ```toml block of `docs/configuration.md`: every key, with its
/// documented value.
fn documented() -> String {
    let reference = include_str!("../../../docs/configuration.md");
    let start = reference
        .find("```toml\n")
        .expect("docs/configuration.md shows trellis.toml")
        + 8;
    let end = start + reference[start..].find("```").unwrap();
    reference[start..end].to_owned()
}

fn load(text: &[u8]) -> Result<Config, ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("trellis.toml"), text).unwrap();
    fuzz::bounded("Config::load", fuzz::budget(text.len()), || {
        Config::load(dir.path(), None, None)
    })
}

/// `text` with comment lines and spaces added where TOML ignores them.
fn respaced(text: &str, noise: &[bool]) -> String {
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        let noisy = noise.get(i % noise.len().max(1)).copied().unwrap_or(false);
        if noisy {
            out.push_str("  # a comment = [\"not a value\"]\n\n");
        }
        match (noisy, line.split_once(" = ")) {
            (true, Some((key, value))) if !line.trim_start().starts_with('#') => {
                out.push_str(&format!("\t{key}   =\t{value}  \n"));
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(fuzz::config(128))]

    /// Damaged text: a configuration or an error naming `trellis.toml`.
    #[test]
    fn a_damaged_trellis_toml_loads_or_is_refused_naming_it(
        text in fuzz::mutated_lines(&documented()),
    ) {
        if let Err(error) = load(&text) {
            prop_assert!(error.source_name.ends_with("trellis.toml"), "{error:?}");
            prop_assert!(!error.message.is_empty());
        }
    }

    /// Comments, blank lines, tabs and spaces around `=` load the same.
    #[test]
    fn comments_and_spacing_load_the_same_configuration(
        noise in prop::collection::vec(any::<bool>(), 1..8),
    ) {
        let text = documented();
        prop_assert_eq!(load(respaced(&text, &noise).as_bytes()), load(text.as_bytes()));
    }

    /// The editor's options, structurally edited: loaded or refused naming them.
    #[test]
    fn edited_initialization_options_load_or_are_refused_naming_them(
        edit in fuzz::json_edit(),
    ) {
        let documented: toml::Value = toml::from_str(&documented()).unwrap();
        let mut options = serde_json::to_value(documented).unwrap();
        options.as_object_mut().unwrap().remove("prompts");
        let edited = fuzz::apply_json(&options, &edit);
        let Ok(options) = serde_json::from_str::<serde_json::Value>(&edited) else {
            return Ok(());
        };
        let dir = tempfile::tempdir().unwrap();
        let loaded = fuzz::bounded("Config::load", fuzz::budget(edited.len()), || {
            Config::load(dir.path(), None, Some(&options))
        });
        if let Err(error) = loaded {
            prop_assert_eq!(error.source_name, "LSP initializationOptions");
        }
    }
}

#[test]
fn the_documented_configuration_loads() {
    load(documented().as_bytes()).unwrap();
}
