//! [`NodeConfig`]: the base sections, the `_config` writes over them, their file, and the
//! published [`Settings`].

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::ini::{self, Overrides};
use crate::{ConfigError, Settings};

/// Section → key → value, as `GET /_node/{node}/_config` shows them.
pub type Sections = BTreeMap<String, BTreeMap<String, String>>;

pub struct NodeConfig {
    /// What settee's own settings (defaults, TOML file, environment, flags) say.
    base: Sections,
    /// `local.ini`; `None` keeps writes in memory only (tests).
    path: Option<PathBuf>,
    /// Held by a write for its whole check-save-publish step, so two writes never save out of
    /// order; requests that only read settings never take it.
    state: Mutex<State>,
    /// The settings requests read, once each. A read lock is one uncontended atomic on the
    /// request path, and writers (an administrator's `_config` request) hold it only to swap
    /// the `Arc`.
    settings: RwLock<Arc<Settings>>,
}

struct State {
    /// What `local.ini` holds.
    overrides: Overrides,
    /// Writes made with `X-Couch-Persist: false`, over the file's, until a reload or restart.
    volatile: Overrides,
    effective: Sections,
}

impl State {
    fn get(&self, section: &str, key: &str) -> Option<String> {
        self.effective
            .get(section)
            .and_then(|keys| keys.get(key))
            .cloned()
    }
}

/// Whether a write is saved to `local.ini` (CouchDB's `X-Couch-Persist`, true by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persist {
    Yes,
    No,
}

impl NodeConfig {
    /// The base values with `local.ini` at `path` applied over them. A value in the file that
    /// settee cannot use stops the node here, with the reason, rather than later.
    pub fn open(base: Sections, path: Option<PathBuf>) -> Result<NodeConfig, ConfigError> {
        let overrides = read_file(path.as_ref())?;
        let effective = overlay(&base, &overrides, &Overrides::new());
        let settings = Settings::from_sections(&effective)?;
        Ok(NodeConfig {
            base,
            path,
            state: Mutex::new(State {
                overrides,
                volatile: Overrides::new(),
                effective,
            }),
            settings: RwLock::new(Arc::new(settings)),
        })
    }

    /// The settings in effect now.
    pub fn settings(&self) -> Arc<Settings> {
        self.settings.read().clone()
    }

    pub fn all(&self) -> Sections {
        self.state.lock().effective.clone()
    }

    /// A section's keys; an unknown section is empty, as in CouchDB.
    pub fn section(&self, section: &str) -> BTreeMap<String, String> {
        self.state
            .lock()
            .effective
            .get(section)
            .cloned()
            .unwrap_or_default()
    }

    pub fn get(&self, section: &str, key: &str) -> Option<String> {
        self.state
            .lock()
            .effective
            .get(section)
            .and_then(|keys| keys.get(key))
            .cloned()
    }

    /// Sets `[section] key` and answers its previous value. Saved (unless `persist` says no)
    /// before it takes effect; an empty value deletes the key (it is what `local.ini` can
    /// say of it).
    pub fn set(
        &self,
        section: &str,
        key: &str,
        value: &str,
        persist: Persist,
    ) -> Result<Option<String>, ConfigError> {
        ini::check_names(section, key, Some(value))?;
        let mut state = self.state.lock();
        let previous = state.get(section, key);
        let value = (!value.is_empty()).then(|| value.to_string());
        self.write(&mut state, section, key, value, persist)?;
        Ok(previous)
    }

    /// Deletes `[section] key` and answers its value; `None` when it was not set, and nothing
    /// changes.
    pub fn delete(
        &self,
        section: &str,
        key: &str,
        persist: Persist,
    ) -> Result<Option<String>, ConfigError> {
        ini::check_names(section, key, None)?;
        let mut state = self.state.lock();
        let Some(previous) = state.get(section, key) else {
            return Ok(None);
        };
        self.write(&mut state, section, key, None, persist)?;
        Ok(Some(previous))
    }

    /// One key set (`Some`) or deleted (`None`), in the file or in memory only.
    fn write(
        &self,
        state: &mut State,
        section: &str,
        key: &str,
        value: Option<String>,
        persist: Persist,
    ) -> Result<(), ConfigError> {
        let mut overrides = state.overrides.clone();
        let mut volatile = state.volatile.clone();
        let layer = match persist {
            Persist::Yes => {
                // A saved write replaces an unsaved one of the same key.
                if let Some(keys) = volatile.get_mut(section) {
                    keys.remove(key);
                }
                &mut overrides
            }
            Persist::No => &mut volatile,
        };
        let keys = layer.entry(section.to_string()).or_default();
        let in_base = self
            .base
            .get(section)
            .is_some_and(|keys| keys.contains_key(key));
        match value {
            // Nothing under the file would give this key back: no line is needed for it.
            None if !in_base && persist == Persist::Yes => {
                keys.remove(key);
            }
            value => {
                keys.insert(key.to_string(), value);
            }
        }
        self.replace(state, overrides, volatile, persist)
    }

    /// Reads `local.ini` again (`POST /_node/_local/_config/_reload`).
    pub fn reload(&self) -> Result<(), ConfigError> {
        let mut state = self.state.lock();
        let overrides = read_file(self.path.as_ref())?;
        let volatile = Overrides::new();
        let effective = overlay(&self.base, &overrides, &volatile);
        let settings = Settings::from_sections(&effective)?;
        *state = State {
            overrides,
            volatile,
            effective,
        };
        *self.settings.write() = Arc::new(settings);
        Ok(())
    }

    /// Checks, saves and publishes `overrides`; on any failure nothing changes.
    fn replace(
        &self,
        state: &mut State,
        overrides: Overrides,
        volatile: Overrides,
        persist: Persist,
    ) -> Result<(), ConfigError> {
        let effective = overlay(&self.base, &overrides, &volatile);
        let settings = Settings::from_sections(&effective)?;
        if let (Some(path), Persist::Yes) = (&self.path, persist) {
            write_file(path, &ini::encode(&overrides))?;
        }
        *state = State {
            overrides,
            volatile,
            effective,
        };
        *self.settings.write() = Arc::new(settings);
        Ok(())
    }
}

fn overlay(base: &Sections, overrides: &Overrides, volatile: &Overrides) -> Sections {
    let mut effective = base.clone();
    for (section, keys) in overrides.iter().chain(volatile) {
        for (key, value) in keys {
            match value {
                Some(value) => {
                    effective
                        .entry(section.clone())
                        .or_default()
                        .insert(key.clone(), value.clone());
                }
                None => {
                    if let Some(keys) = effective.get_mut(section) {
                        keys.remove(key);
                    }
                }
            }
        }
    }
    effective.retain(|_, keys| !keys.is_empty());
    effective
}

fn read_file(path: Option<&PathBuf>) -> Result<Overrides, ConfigError> {
    let Some(path) = path else {
        return Ok(Overrides::new());
    };
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(ini::parse(&text)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Overrides::new()),
        Err(error) => Err(error.into()),
    }
}

/// Replaces the file whole: a temporary file, fsynced, renamed over it, the directory fsynced.
fn write_file(path: &std::path::Path, text: &str) -> Result<(), ConfigError> {
    use std::os::unix::fs::OpenOptionsExt;
    let temporary = path.with_extension("ini.tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)?;
    if let Some(directory) = path.parent() {
        std::fs::File::open(directory)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Sections {
        let mut base = Sections::new();
        base.entry("couchdb".into())
            .or_default()
            .insert("max_document_size".into(), "1000".into());
        base
    }

    #[test]
    fn writes_take_effect_and_survive_a_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("local.ini");
        let config = NodeConfig::open(base(), Some(path.clone())).expect("open");
        assert_eq!(config.settings().max_document_size_bytes, 1000);
        assert_eq!(
            config
                .set("couchdb", "max_document_size", "64", Persist::Yes)
                .expect("set")
                .as_deref(),
            Some("1000")
        );
        assert_eq!(config.settings().max_document_size_bytes, 64);
        assert_eq!(
            config
                .set("httpd", "allow_jsonp", "true", Persist::Yes)
                .expect("set"),
            None
        );
        assert_eq!(
            config
                .set("custom", "key", "any thing", Persist::Yes)
                .expect("set"),
            None
        );
        assert!(config.settings().allow_jsonp);
        drop(config);

        let config = NodeConfig::open(base(), Some(path.clone())).expect("reopen");
        assert_eq!(config.settings().max_document_size_bytes, 64);
        assert!(config.settings().allow_jsonp);
        assert_eq!(config.get("custom", "key").as_deref(), Some("any thing"));
    }

    #[test]
    fn a_deleted_base_key_stays_deleted_and_unset_keys_are_not_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("local.ini");
        let config = NodeConfig::open(base(), Some(path.clone())).expect("open");
        assert_eq!(
            config
                .delete("couchdb", "max_document_size", Persist::Yes)
                .expect("delete")
                .as_deref(),
            Some("1000")
        );
        assert_eq!(
            config
                .delete("couchdb", "max_document_size", Persist::Yes)
                .expect("delete"),
            None
        );
        assert_eq!(
            config.settings().max_document_size_bytes,
            crate::settings::MAX_DOCUMENT_SIZE_DEFAULT
        );
        assert!(config.section("couchdb").is_empty());
        drop(config);
        let config = NodeConfig::open(base(), Some(path)).expect("reopen");
        assert_eq!(config.get("couchdb", "max_document_size"), None);
        assert_eq!(
            config
                .set("couchdb", "max_document_size", "5", Persist::Yes)
                .expect("set"),
            None
        );
        assert_eq!(
            config.get("couchdb", "max_document_size").as_deref(),
            Some("5")
        );
    }

    #[test]
    fn a_refused_value_changes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("local.ini");
        let config = NodeConfig::open(base(), Some(path.clone())).expect("open");
        assert!(config
            .set("couchdb", "max_document_size", "lots", Persist::Yes)
            .is_err());
        assert!(config
            .set("uuids", "algorithm", "bogus", Persist::Yes)
            .is_err());
        assert_eq!(
            config.get("couchdb", "max_document_size").as_deref(),
            Some("1000")
        );
        assert!(!path.exists());
    }

    #[test]
    fn unsaved_writes_last_until_a_reopen_or_reload() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("local.ini");
        let config = NodeConfig::open(base(), Some(path.clone())).expect("open");
        config
            .set("httpd", "allow_jsonp", "true", Persist::No)
            .expect("set");
        config
            .set("uuids", "algorithm", "random", Persist::Yes)
            .expect("set");
        config
            .delete("couchdb", "max_document_size", Persist::No)
            .expect("delete");
        assert!(config.settings().allow_jsonp);
        assert_eq!(config.get("couchdb", "max_document_size"), None);
        drop(config);
        let config = NodeConfig::open(base(), Some(path.clone())).expect("reopen");
        assert!(!config.settings().allow_jsonp);
        assert_eq!(
            config.settings().uuid_algorithm,
            crate::UuidAlgorithm::Random
        );
        assert_eq!(
            config.get("couchdb", "max_document_size").as_deref(),
            Some("1000")
        );
        config
            .set("httpd", "allow_jsonp", "true", Persist::No)
            .expect("set");
        config.reload().expect("reload");
        assert!(!config.settings().allow_jsonp);
    }

    #[test]
    fn reload_reads_an_edited_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("local.ini");
        let config = NodeConfig::open(base(), Some(path.clone())).expect("open");
        std::fs::write(&path, "[uuids]\nalgorithm = random\n").expect("write");
        config.reload().expect("reload");
        assert_eq!(
            config.settings().uuid_algorithm,
            crate::UuidAlgorithm::Random
        );
        std::fs::write(&path, "[uuids]\nalgorithm = nonsense\n").expect("write");
        assert!(config.reload().is_err());
        assert_eq!(
            config.settings().uuid_algorithm,
            crate::UuidAlgorithm::Random
        );
    }
}
