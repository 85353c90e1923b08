//! Database names as CouchDB accepts them.

use crate::error::{ApiError, ApiResult};

const SYSTEM_DBS: [&str; 3] = ["_users", "_replicator", "_global_changes"];
/// CouchDB's longest database name.
const DB_NAME_MAX: usize = 238;

pub fn is_system_db(name: &str) -> bool {
    SYSTEM_DBS.contains(&name)
}

pub fn validate_db_name(name: &str) -> ApiResult<()> {
    let valid = is_system_db(name)
        || (name.len() <= DB_NAME_MAX
            && name.starts_with(|first: char| first.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_$()+-/".contains(c)));
    if valid {
        Ok(())
    } else {
        Err(ApiError::IllegalDatabaseName(format!(
            "Name: '{name}'. Only lowercase characters (a-z), digits (0-9), and any of the characters _, $, (, ), +, -, and / are allowed. Must begin with a letter."
        )))
    }
}
