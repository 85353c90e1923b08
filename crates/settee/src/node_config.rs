//! The node's settings under CouchDB's section and key names: the base values of
//! `/_node/{node}/_config`, over which `local.ini` (the `_config` writes) is applied
//! (docs/format/node-config.md).

use std::net::SocketAddr;
use std::path::Path;

use settee_node_config::{NodeConfig, Sections};

use crate::config::Settings;

/// File in the data directory that keeps the `_config` writes.
pub const LOCAL_INI: &str = "local.ini";

/// Opens the node's configuration: settee's settings as CouchDB names them, with the saved
/// `_config` writes over them.
pub fn open(
    settings: &Settings,
    server_uuid: &str,
    http_addr: SocketAddr,
) -> anyhow::Result<NodeConfig> {
    let path = settings.data_dir.join(LOCAL_INI);
    NodeConfig::open(base(settings, server_uuid, http_addr), Some(path)).map_err(|error| {
        anyhow::anyhow!("{}: {error}", settings.data_dir.join(LOCAL_INI).display())
    })
}

/// Each setting settee has that CouchDB has a key for, with its value now. Keys CouchDB
/// leaves unset by default (`allow_jsonp`, `[uuids]`) are left out, as CouchDB shows them.
fn base(settings: &Settings, server_uuid: &str, http_addr: SocketAddr) -> Sections {
    let mut sections = Sections::new();
    let mut set = |section: &str, key: &str, value: String| {
        sections
            .entry(section.to_string())
            .or_default()
            .insert(key.to_string(), value);
    };
    let data_dir = display(&settings.data_dir);
    set("couchdb", "database_dir", data_dir.clone());
    set("couchdb", "view_index_dir", data_dir);
    set("couchdb", "uuid", server_uuid.to_string());
    set("couchdb", "single_node", "true".into());
    set(
        "couchdb",
        "max_document_size",
        settings.max_document_size.to_string(),
    );
    set("chttpd", "bind_address", http_addr.ip().to_string());
    set("chttpd", "port", http_addr.port().to_string());
    set(
        "chttpd",
        "max_http_request_size",
        settings.max_request_size.to_string(),
    );
    set("cluster", "n", "1".into());
    // CouchDB's `[ssl]`: shown as configured (the HTTPS port is the configured one, also when
    // it is 0 and the system picks).
    if let Some(tls) = &settings.tls {
        set("ssl", "enable", "true".into());
        set("ssl", "cert_file", display(&tls.files.cert));
        set("ssl", "key_file", display(&tls.files.key));
        set("ssl", "port", tls.https_addr.port().to_string());
    }
    let cors = &settings.cors;
    set("chttpd", "enable_cors", cors.enabled.to_string());
    if !cors.origins.is_empty() {
        set("cors", "origins", cors.origins.join(", "));
    }
    set("cors", "credentials", cors.credentials.to_string());
    set("cors", "methods", cors.methods.join(", "));
    set("cors", "headers", cors.headers.join(", "));
    set("cors", "max_age", cors.max_age_secs.to_string());
    let lockout = &settings.auth_lockout;
    set(
        "chttpd_auth_lockout",
        "mode",
        format!("{:?}", lockout.mode).to_lowercase(),
    );
    set(
        "chttpd_auth_lockout",
        "threshold",
        lockout.threshold.to_string(),
    );
    set(
        "chttpd_auth_lockout",
        "max_lifetime",
        lockout.max_lifetime.as_millis().to_string(),
    );
    set(
        "chttpd_auth_lockout",
        "max_objects",
        lockout.max_objects.to_string(),
    );
    set(
        "chttpd_auth",
        "iterations",
        settings.pbkdf2_iterations.to_string(),
    );
    set(
        "couchdb",
        "os_process_timeout",
        settings.js_timeout_ms.to_string(),
    );
    sections
}

fn display(path: &Path) -> String {
    path.display().to_string()
}
