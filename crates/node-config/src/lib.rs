//! The node's configuration as CouchDB's `/_node/{node}/_config` shows and changes it.
//!
//! [`NodeConfig`] holds CouchDB-style sections of string keys and values: the base values
//! settee's own settings give (flags, environment, TOML file: [`Sections`] built by the
//! binary), with the `_config` writes persisted in the data directory's `local.ini`
//! ([`ini`], docs/format/node-config.md) applied over them. Every write is validated, saved,
//! and then turns into a new [`Settings`] value: the typed settings that take effect at
//! runtime, which the HTTP door reads once per request ([`NodeConfig::settings`]).
//! Keys settee does not use are stored and returned as CouchDB stores any key.
//!
//! Start with [`NodeConfig::open`] and [`settings::Settings::from_sections`].
//!
//! This crate knows nothing of HTTP, the engine or storage keys.
#![deny(clippy::unwrap_used)]

pub mod auth;
pub mod ini;
pub mod settings;
mod store;

pub use auth::{AuthHandler, AuthSettings};
pub use settings::{
    Settings, UuidAlgorithm, COMPRESSIBLE_TYPES_DEFAULT, COMPRESSION_LEVEL_DEFAULT,
};
pub use store::{NodeConfig, Persist, Sections};

/// Why a configuration request could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A value settee uses is not one it can use (`[couchdb] max_document_size = abc`), or a
    /// name or value `local.ini` cannot hold. The text is the reason a client sees.
    #[error("{0}")]
    Invalid(String),
    /// `local.ini` could not be read or written; nothing changed.
    #[error("node configuration file: {0}")]
    Io(#[from] std::io::Error),
}

/// Sections from `(section, key, value)` triples, for the crate's tests.
#[cfg(test)]
pub(crate) fn test_sections(
    entries: &[(&str, &str, &str)],
) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>> {
    let mut sections: std::collections::BTreeMap<
        String,
        std::collections::BTreeMap<String, String>,
    > = Default::default();
    for (section, key, value) in entries {
        sections
            .entry(section.to_string())
            .or_default()
            .insert(key.to_string(), value.to_string());
    }
    sections
}
