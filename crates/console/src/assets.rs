//! The console's files, embedded at compile time. A path is served only if it is in
//! [`ASSETS`]; adding a file under `assets/` means adding its line here (the unit tests check
//! every line is served with a known type).

/// One embedded file: its path under `/_utils/` and its bytes.
pub struct Asset {
    pub name: &'static str,
    pub bytes: &'static [u8],
}

macro_rules! asset {
    ($name:literal) => {
        Asset {
            name: $name,
            bytes: include_bytes!(concat!("../assets/", $name)),
        }
    };
}

pub const ASSETS: &[Asset] = &[
    asset!("index.html"),
    asset!("app.css"),
    asset!("js/main.js"),
    asset!("js/api.js"),
    asset!("js/ui.js"),
    asset!("js/charts.js"),
    asset!("js/pages/overview.js"),
    asset!("js/pages/databases.js"),
    asset!("js/pages/documents.js"),
    asset!("js/pages/document.js"),
    asset!("js/pages/queries.js"),
    asset!("js/pages/indexes.js"),
    asset!("js/pages/tasks.js"),
    // Vendored by scripts/vendor-console.sh (uPlot's LICENSE served beside it).
    asset!("vendor/uplot-1.6.32/uPlot.iife.min.js"),
    asset!("vendor/uplot-1.6.32/uPlot.min.css"),
    asset!("vendor/uplot-1.6.32/LICENSE"),
];
