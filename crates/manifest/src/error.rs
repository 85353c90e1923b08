/// Why a manifest lookup or change is refused, or why a stored manifest does not decode. The
/// engine turns each into its own error of the same name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The stored record does not decode or breaks an invariant.
    #[error("corrupt record: {0}")]
    Corrupt(String),
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// A scope or collection name (or a `scope.collection` path) that is not well formed.
    #[error("invalid name: {0}")]
    InvalidName(String),
    /// A scope the manifest does not hold (Couchbase `UNKNOWN_SCOPE`).
    #[error("unknown scope (manifest uid {manifest_uid:x})")]
    UnknownScope { manifest_uid: u64 },
    /// A collection the manifest does not hold (Couchbase `UNKNOWN_COLLECTION`).
    #[error("unknown collection (manifest uid {manifest_uid:x})")]
    UnknownCollection { manifest_uid: u64 },
    #[error("scope {0} already exists")]
    ScopeExists(String),
    #[error("collection {0} already exists")]
    CollectionExists(String),
    /// A create beyond a per-bucket limit, or past the last id.
    #[error("limit reached: {0}")]
    LimitReached(String),
}

/// Makes the error of a variant that carries its text.
type FromText = fn(String) -> ManifestError;

impl ManifestError {
    /// The error whose text `reason` is (the inverse of `Display`): a change planned on the
    /// cluster leader's manifest comes back as its text only (`Applied::Rejected`), and the
    /// door answers it as a refusal of the same kind. Text of no variant is `Invalid`.
    pub fn from_reason(reason: &str) -> ManifestError {
        let uid = |rest: &str| {
            rest.strip_suffix(')')
                .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        };
        if let Some(rest) = reason.strip_prefix("unknown scope (manifest uid ") {
            if let Some(manifest_uid) = uid(rest) {
                return ManifestError::UnknownScope { manifest_uid };
            }
        }
        if let Some(rest) = reason.strip_prefix("unknown collection (manifest uid ") {
            if let Some(manifest_uid) = uid(rest) {
                return ManifestError::UnknownCollection { manifest_uid };
            }
        }
        let prefixed: [(&str, FromText); 4] = [
            ("corrupt record: ", ManifestError::Corrupt),
            ("invalid argument: ", ManifestError::Invalid),
            ("invalid name: ", ManifestError::InvalidName),
            ("limit reached: ", ManifestError::LimitReached),
        ];
        for (prefix, make) in prefixed {
            if let Some(rest) = reason.strip_prefix(prefix) {
                return make(rest.to_owned());
            }
        }
        let suffixed: [(&str, &str, FromText); 2] = [
            ("scope ", " already exists", ManifestError::ScopeExists),
            (
                "collection ",
                " already exists",
                ManifestError::CollectionExists,
            ),
        ];
        for (prefix, suffix, make) in suffixed {
            if let Some(name) = reason
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix(suffix))
            {
                return make(name.to_owned());
            }
        }
        ManifestError::Invalid(reason.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::ManifestError;

    #[test]
    fn every_error_reads_back_from_its_text() {
        for error in [
            ManifestError::Corrupt("bad tag 7".into()),
            ManifestError::Invalid("maxTTL -1".into()),
            ManifestError::InvalidName("_x".into()),
            ManifestError::UnknownScope { manifest_uid: 0x1f },
            ManifestError::UnknownCollection { manifest_uid: 0 },
            ManifestError::ScopeExists("inventory".into()),
            ManifestError::CollectionExists("inventory.airline".into()),
            ManifestError::LimitReached("collections (1000)".into()),
        ] {
            assert_eq!(ManifestError::from_reason(&error.to_string()), error);
        }
        assert_eq!(
            ManifestError::from_reason("no bucket db"),
            ManifestError::Invalid("no bucket db".into())
        );
    }
}
