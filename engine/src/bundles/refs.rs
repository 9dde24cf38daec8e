//! Naming a bundle version: `id` (its default), `id@N` (version N) and
//! `id@sha256:…` (the version with exactly that content). Parsing only;
//! resolution is the store's. The `@` form is unambiguous because ids
//! never contain `@` ([`super::draft::check_id`]).

use std::fmt;
use std::str::FromStr;

use super::draft::check_id;
use super::error::BundleError;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BundleRef {
    /// The id's current default version.
    Default(String),
    /// One version, by number.
    Version(String, u32),
    /// The retained version whose content has this checksum; fails closed
    /// when none has.
    Checksum(String, String),
}

impl BundleRef {
    pub fn id(&self) -> &str {
        match self {
            BundleRef::Default(id) | BundleRef::Version(id, _) | BundleRef::Checksum(id, _) => id,
        }
    }
}

impl FromStr for BundleRef {
    type Err = BundleError;

    fn from_str(text: &str) -> Result<BundleRef, BundleError> {
        let usage = || {
            BundleError::Usage(format!(
                "`{text}` is not a bundle ref: use `ID`, `ID@N` or `ID@sha256:HEX`"
            ))
        };
        let Some((id, pin)) = text.split_once('@') else {
            check_id(text)?;
            return Ok(BundleRef::Default(text.to_owned()));
        };
        check_id(id)?;
        if let Some(hex) = pin.strip_prefix("sha256:") {
            if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(usage());
            }
            return Ok(BundleRef::Checksum(
                id.to_owned(),
                format!("sha256:{}", hex.to_ascii_lowercase()),
            ));
        }
        let version = pin.strip_prefix('v').unwrap_or(pin);
        match version.parse::<u32>() {
            Ok(n) if n >= 1 && !version.starts_with('+') => {
                Ok(BundleRef::Version(id.to_owned(), n))
            }
            _ => Err(usage()),
        }
    }
}

impl fmt::Display for BundleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BundleRef::Default(id) => write!(f, "{id}"),
            BundleRef::Version(id, n) => write!(f, "{id}@{n}"),
            BundleRef::Checksum(id, sum) => write!(f, "{id}@{sum}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_forms_parse_and_print_back() {
        let hex = "ab".repeat(32);
        for (text, parsed) in [
            ("terse", BundleRef::Default("terse".into())),
            ("terse@3", BundleRef::Version("terse".into(), 3)),
            (
                &format!("terse@sha256:{hex}"),
                BundleRef::Checksum("terse".into(), format!("sha256:{hex}")),
            ),
        ] {
            let got: BundleRef = text.parse().unwrap();
            assert_eq!(got, parsed);
            assert_eq!(got.to_string(), text);
        }
        assert_eq!(
            "terse@v2".parse::<BundleRef>().unwrap(),
            BundleRef::Version("terse".into(), 2)
        );
    }

    #[test]
    fn malformed_refs_are_refused() {
        for bad in [
            "terse@",
            "terse@0",
            "terse@-1",
            "terse@+1",
            "terse@x",
            "@1",
            "Terse@1",
            "terse@sha256:abc",
            "terse@1@2",
        ] {
            assert!(bad.parse::<BundleRef>().is_err(), "{bad}");
        }
    }
}
