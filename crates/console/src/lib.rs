//! settee's web console: a small single-page application in plain JavaScript modules, with
//! uPlot (vendored from npm by `scripts/vendor-console.sh`) drawing the live charts, served by
//! the CouchDB door at `/_utils/` where CouchDB users look for Fauxton.
//!
//! The console is only a client of the node's public HTTP APIs (`_session`, `_all_dbs`,
//! `_all_docs`, `_find`, `_active_tasks`, `_node/_local/_system`, `_prometheus`, ...); this
//! crate holds nothing but its files, embedded at compile time ([`assets`]), and answers one
//! question: for a request path and its `If-None-Match`, what to send ([`serve`]). It knows no
//! HTTP framework, no database, no storage: `settee-http`'s router turns a [`Reply`] into a
//! response.
//!
//! Start reading at `assets/index.html` and `assets/js/main.js` for the application, and at
//! [`serve`] for the server side.
#![deny(clippy::unwrap_used)]

pub mod assets;

use std::sync::OnceLock;

use sha2::{Digest, Sha256};

/// Where the console lives on the CouchDB door.
pub const PREFIX: &str = "/_utils";

/// Longest request path looked up; a longer one names no asset (the table's names are short).
const PATH_BYTES_MAX: usize = 256;

/// What to answer for a console path: `status` 200 with the asset, 304 when the client's copy
/// is current, 301 from `/_utils` to `/_utils/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: &'static [u8],
}

/// The answer for `path` (the request target's path as sent, percent-encoding and all, without
/// the query), `None` when it names no asset. Paths are matched exactly against the embedded
/// table, never joined onto a directory, so `..`, encoded slashes or very long paths simply
/// name nothing.
pub fn serve(path: &str, if_none_match: Option<&str>) -> Option<Reply> {
    if path == PREFIX {
        return Some(Reply {
            status: 301,
            headers: vec![("location", format!("{PREFIX}/"))],
            body: b"",
        });
    }
    if path.len() > PATH_BYTES_MAX {
        return None;
    }
    let name = path.strip_prefix(PREFIX)?.strip_prefix('/')?;
    let name = if name.is_empty() { "index.html" } else { name };
    let index = assets::ASSETS.iter().position(|asset| asset.name == name)?;
    let asset = &assets::ASSETS[index];
    let etag = &etags()[index];
    let mut headers = vec![
        ("etag", etag.clone()),
        ("cache-control", cache_control(asset.name).to_string()),
        ("x-content-type-options", "nosniff".to_string()),
    ];
    if if_none_match.is_some_and(|header| matches_etag(header, etag)) {
        return Some(Reply {
            status: 304,
            headers,
            body: b"",
        });
    }
    headers.push(("content-type", content_type(asset.name).to_string()));
    if asset.name.ends_with(".html") {
        headers.push((
            "content-security-policy",
            CONTENT_SECURITY_POLICY.to_string(),
        ));
        headers.push(("x-frame-options", "DENY".to_string()));
    }
    Some(Reply {
        status: 200,
        headers,
        body: asset.bytes,
    })
}

/// The browser itself refuses any request to another origin (scripts, styles, fetches), so
/// the console works on an offline network and cannot leak to one; uPlot sets inline styles,
/// hence `'unsafe-inline'` for styles only.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; \
     object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Vendored files live under a directory named with their version, so a new version is a new
/// URL and browsers may keep them; the console's own files change with the binary under the
/// same names, so browsers revalidate them (a 304 when unchanged).
fn cache_control(name: &str) -> &'static str {
    if name.starts_with("vendor/") {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    }
}

fn content_type(name: &str) -> &'static str {
    let extension = name.rsplit_once('.').map_or("", |(_, extension)| extension);
    match extension {
        "html" => "text/html; charset=utf-8",
        "js" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "png" => "image/png",
        _ => "text/plain; charset=utf-8",
    }
}

/// A strong ETag per asset: the first 128 bits of its SHA-256, computed on first use.
fn etags() -> &'static [String] {
    static ETAGS: OnceLock<Vec<String>> = OnceLock::new();
    ETAGS.get_or_init(|| {
        assets::ASSETS
            .iter()
            .map(|asset| {
                let digest = Sha256::digest(asset.bytes);
                let hex: String = digest[..16]
                    .iter()
                    .map(|byte| format!("{byte:02x}"))
                    .collect();
                format!("\"{hex}\"")
            })
            .collect()
    })
}

/// `If-None-Match` against our ETag: `*`, or any listed tag equal to it under the weak
/// comparison RFC 9110 prescribes for this header (a `W/` prefix is ignored).
fn matches_etag(header: &str, etag: &str) -> bool {
    header.split(',').map(str::trim).any(|candidate| {
        candidate == "*" || candidate.strip_prefix("W/").unwrap_or(candidate) == etag
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header<'a>(reply: &'a Reply, name: &str) -> Option<&'a str> {
        reply
            .headers
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_str())
    }

    #[test]
    fn the_index_is_served_at_the_root_with_its_type_and_a_strong_etag() {
        let reply = serve("/_utils/", None).expect("the index");
        assert_eq!(reply.status, 200);
        assert_eq!(
            header(&reply, "content-type"),
            Some("text/html; charset=utf-8")
        );
        let etag = header(&reply, "etag").expect("an etag");
        assert!(etag.starts_with('"') && etag.ends_with('"') && etag.len() == 34);
        assert_eq!(serve("/_utils/index.html", None), Some(reply));
    }

    #[test]
    fn a_current_copy_gets_a_304_and_a_stale_one_the_asset() {
        let first = serve("/_utils/js/main.js", None).expect("main.js");
        let etag = header(&first, "etag").expect("an etag").to_string();
        let again = serve("/_utils/js/main.js", Some(&etag)).expect("main.js");
        assert_eq!((again.status, again.body.len()), (304, 0));
        let listed = format!("\"other\", W/{etag}");
        assert_eq!(
            serve("/_utils/js/main.js", Some(&listed)).map(|r| r.status),
            Some(304)
        );
        assert_eq!(
            serve("/_utils/js/main.js", Some("\"other\"")).map(|r| r.status),
            Some(200)
        );
    }

    #[test]
    fn the_bare_prefix_redirects_and_other_paths_name_nothing() {
        let reply = serve("/_utils", None).expect("a redirect");
        assert_eq!(
            (reply.status, header(&reply, "location")),
            (301, Some("/_utils/"))
        );
        for path in [
            "/_utils/../lib.rs",
            "/_utils/js/../index.html",
            "/_utils/js%2Fmain.js",
            "/_utils//index.html",
            "/_utilsindex.html",
            "/_utils/missing.js",
            "/_utils/index.html/",
            "/other/index.html",
        ] {
            assert_eq!(serve(path, None), None, "{path}");
        }
        let long = format!("/_utils/{}", "a/".repeat(100_000));
        assert_eq!(serve(&long, None), None);
    }

    #[test]
    fn every_file_under_assets_is_embedded() {
        fn walk(dir: &std::path::Path, root: &std::path::Path, found: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).expect("assets directory") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    walk(&path, root, found);
                } else if let Ok(relative) = path.strip_prefix(root) {
                    found.push(relative.to_string_lossy().replace('\\', "/"));
                }
            }
        }
        // The runtime value: cargo sets it for the test process, while the compile-time one
        // stays that of wherever the binary was built (a clone sharing the target directory
        // that is gone since: cargo does not rebuild an unchanged crate for a new path).
        let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(
            || env!("CARGO_MANIFEST_DIR").into(),
            std::path::PathBuf::from,
        );
        let root = manifest_dir.join("assets");
        let mut found = Vec::new();
        walk(&root, &root, &mut found);
        for name in found {
            assert!(
                assets::ASSETS.iter().any(|asset| asset.name == name),
                "{name} is under assets/ but not in assets.rs"
            );
        }
    }

    #[test]
    fn every_asset_has_a_known_type_and_a_distinct_name() {
        let mut names = std::collections::BTreeSet::new();
        for asset in assets::ASSETS {
            assert!(names.insert(asset.name), "{} twice", asset.name);
            let reply = serve(&format!("/_utils/{}", asset.name), None).expect("served");
            let kind = header(&reply, "content-type").unwrap_or("");
            assert!(
                asset.name.ends_with("LICENSE") || !kind.starts_with("text/plain"),
                "{}: {kind}",
                asset.name
            );
        }
    }
}
