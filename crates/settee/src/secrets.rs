//! The data directory and the secrets in it (docs/format/data-dir.md): the directory is the
//! node's owner's alone (0700), secret files are 0600 and written whole (temporary file, fsync,
//! rename), and a generated admin password is kept only hashed. Modes left wider by older
//! versions are tightened at start, with a log line.

use std::fs::{self, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use anyhow::Context;
use rand::RngCore;
use settee_auth::{ServerAdmin, Users};

/// Only the node's owner may enter the data directory.
const DATA_DIR_MODE: u32 = 0o700;
/// Only the node's owner may read a secret file.
const SECRET_FILE_MODE: u32 = 0o600;
/// Files that are not secret (the server uuid).
pub(crate) const PUBLIC_FILE_MODE: u32 = 0o644;
/// The name of the admin a node makes up when none is configured.
const GENERATED_ADMIN: &str = "admin";
/// Random bytes of a generated admin password (printed as hex).
const GENERATED_PASSWORD_BYTES: usize = 12;

/// Creates the data directory (0700), or tightens the mode of an existing one.
pub fn prepare_data_dir(dir: &Path) -> anyhow::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(DATA_DIR_MODE)
        .create(dir)
        .with_context(|| format!("creating data directory {}", dir.display()))?;
    tighten(dir, DATA_DIR_MODE)
}

/// Removes permission bits beyond `mode` from `path`, saying so.
fn tighten(path: &Path, mode: u32) -> anyhow::Result<()> {
    let current = fs::metadata(path)
        .with_context(|| format!("reading the mode of {}", path.display()))?
        .permissions()
        .mode()
        & 0o777;
    if current & !mode != 0 {
        fs::set_permissions(path, Permissions::from_mode(current & mode))
            .with_context(|| format!("setting the mode of {}", path.display()))?;
        tracing::warn!(
            path = %path.display(),
            "tightened permissions from {current:04o} to {:04o}: only the node's owner may read it",
            current & mode
        );
    }
    Ok(())
}

/// Writes `bytes` to `path` whole, created with `mode`: a temporary file beside it, fsynced,
/// renamed over it.
pub(crate) fn write_whole(path: &Path, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    let temporary = path.with_extension("tmp");
    let _ = fs::remove_file(&temporary);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&temporary)
        .with_context(|| format!("creating {}", temporary.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", temporary.display()))?;
    fs::rename(&temporary, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// `len` random bytes kept in `path` (created on first start), readable by the owner only.
pub fn secret_file(path: &Path, len: usize) -> anyhow::Result<Vec<u8>> {
    random_file(path, len, SECRET_FILE_MODE)
}

/// `len` random bytes kept in `path`, readable by anyone who may enter the data directory.
pub fn public_file(path: &Path, len: usize) -> anyhow::Result<Vec<u8>> {
    random_file(path, len, PUBLIC_FILE_MODE)
}

fn random_file(path: &Path, len: usize, mode: u32) -> anyhow::Result<Vec<u8>> {
    if let Ok(existing) = fs::read(path) {
        if existing.len() == len {
            tighten(path, mode)?;
            return Ok(existing);
        }
    }
    let mut bytes = vec![0u8; len];
    rand::rng().fill_bytes(&mut bytes);
    write_whole(path, &bytes, mode)?;
    Ok(bytes)
}

/// Without a configured admin, a node makes one up once (CouchDB 3 has no admin party, and
/// neither does settee): the password is printed once on standard error and only its hash is
/// kept, in `DATA_DIR/admin_password`. A clear-text file of an older version is migrated.
pub fn generated_admin(data_dir: &Path, users: &Users) -> anyhow::Result<ServerAdmin> {
    let path = data_dir.join("admin_password");
    let existing = match fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => {
            return Err(error).with_context(|| format!("reading {}", path.display()));
        }
    };
    if let Some(text) = &existing {
        tighten(&path, SECRET_FILE_MODE)?;
        if let Ok(stored) = serde_json::from_str::<serde_json::Value>(text) {
            if let Some(admin) = ServerAdmin::from_hashed(GENERATED_ADMIN, stored) {
                return Ok(admin);
            }
        }
    }
    let (password, how) = match existing.as_deref().map(str::trim) {
        Some(old) if !old.is_empty() && !old.starts_with('{') => (
            old.to_string(),
            "migrated from clear text to a hash; this is the last time it is shown",
        ),
        _ => {
            let mut bytes = [0u8; GENERATED_PASSWORD_BYTES];
            rand::rng().fill_bytes(&mut bytes);
            (
                settee_engine::hex(&bytes),
                "generated; it is shown only this once",
            )
        }
    };
    let stored = users.hashed_credentials(GENERATED_ADMIN, &password);
    write_whole(&path, stored.to_string().as_bytes(), SECRET_FILE_MODE)?;
    eprintln!(
        "no --admin given: server admin is {GENERATED_ADMIN}:{password} ({how}; only its hash is kept in {})",
        path.display()
    );
    ServerAdmin::from_hashed(GENERATED_ADMIN, stored)
        .context("hashing the generated admin password")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn secrets_are_private_and_wide_modes_are_tightened() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        prepare_data_dir(&data).unwrap();
        assert_eq!(mode(&data), DATA_DIR_MODE);
        fs::set_permissions(&data, Permissions::from_mode(0o755)).unwrap();
        prepare_data_dir(&data).unwrap();
        assert_eq!(mode(&data), DATA_DIR_MODE);

        let secret = data.join("cookie_secret");
        let bytes = secret_file(&secret, 32).unwrap();
        assert_eq!(mode(&secret), SECRET_FILE_MODE);
        fs::set_permissions(&secret, Permissions::from_mode(0o644)).unwrap();
        assert_eq!(secret_file(&secret, 32).unwrap(), bytes);
        assert_eq!(mode(&secret), SECRET_FILE_MODE);
    }

    #[test]
    fn a_clear_text_admin_password_is_migrated_to_its_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("admin_password");
        fs::write(&path, "0123456789abcdef01234567").unwrap();
        fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();
        let users = Users::new(Vec::new(), 10);
        let admin = generated_admin(dir.path(), &users).unwrap();
        assert_eq!(admin.name(), GENERATED_ADMIN);
        let stored = fs::read_to_string(&path).unwrap();
        assert!(!stored.contains("0123456789abcdef01234567"));
        assert_eq!(mode(&path), SECRET_FILE_MODE);
        let users = Users::new(vec![admin], 10);
        let engine_dir = dir.path().join("db");
        let engine = settee_engine::Engine::open(&engine_dir, Default::default()).unwrap();
        assert!(users
            .verify_password(&engine, GENERATED_ADMIN, "0123456789abcdef01234567")
            .is_some());
        // Read again as stored: the same admin, no new password.
        let again = generated_admin(dir.path(), &Users::new(Vec::new(), 10)).unwrap();
        let users = Users::new(vec![again], 10);
        assert!(users
            .verify_password(&engine, GENERATED_ADMIN, "0123456789abcdef01234567")
            .is_some());
        assert_eq!(fs::read_to_string(&path).unwrap(), stored);
    }
}
