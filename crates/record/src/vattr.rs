//! Virtual extended attributes: document metadata presented as if it were an xattr, read with
//! a sub-document lookup of `$document` (or a path inside it). Field names, encodings (hex
//! strings for 64-bit values, seconds as strings) and meanings follow Couchbase Server's.

/// What `$document` is made of.
#[derive(Clone, Copy, Debug)]
pub struct DocumentMeta<'a> {
    pub cas: u64,
    pub vbucket_uuid: u64,
    pub seqno: u64,
    /// Revision generation (how many times the document was written).
    pub rev_generation: u64,
    /// Absolute Unix seconds, 0 = never.
    pub expiry: u32,
    pub item_flags: u32,
    pub body: &'a [u8],
    pub json: bool,
    pub has_xattrs: bool,
    pub deleted: bool,
}

fn hex64(value: u64) -> String {
    format!("0x{value:016x}")
}

/// `{"CAS":"0x…","vbucket_uuid":"0x…","seqno":"0x…","revid":"N","exptime":…,"flags":…,
/// "value_bytes":…,"datatype":[…],"deleted":…,"last_modified":"secs","value_crc32c":"0x…"}`.
pub fn document(meta: &DocumentMeta<'_>) -> serde_json::Value {
    let mut datatype = vec![if meta.json { "json" } else { "raw" }];
    if meta.has_xattrs {
        datatype.push("xattr");
    }
    serde_json::json!({
        "CAS": hex64(meta.cas),
        "vbucket_uuid": hex64(meta.vbucket_uuid),
        "seqno": hex64(meta.seqno),
        "revid": meta.rev_generation.to_string(),
        "exptime": meta.expiry,
        "flags": meta.item_flags,
        "value_bytes": meta.body.len(),
        "datatype": datatype,
        "deleted": meta.deleted,
        // The CAS is a hybrid logical clock in nanoseconds.
        "last_modified": (meta.cas / 1_000_000_000).to_string(),
        "value_crc32c": format!("0x{:08x}", crc32c::crc32c(meta.body)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_fields_as_couchbase_shows_them() {
        let body = br#"{"a":1}"#;
        let value = document(&DocumentMeta {
            cas: 1_700_000_000_123_456_789,
            vbucket_uuid: 0xabcdef,
            seqno: 4,
            rev_generation: 3,
            expiry: 0,
            item_flags: 0x0200_0000,
            body,
            json: true,
            has_xattrs: true,
            deleted: false,
        });
        assert_eq!(value["CAS"], "0x17979cfe3d85cd15");
        assert_eq!(value["vbucket_uuid"], "0x0000000000abcdef");
        assert_eq!(value["seqno"], "0x0000000000000004");
        assert_eq!(value["revid"], "3");
        assert_eq!(value["value_bytes"], 7);
        assert_eq!(value["datatype"], serde_json::json!(["json", "xattr"]));
        assert_eq!(value["last_modified"], "1700000000");
        assert_eq!(value["flags"], 0x0200_0000);
        // CRC-32C (Castagnoli) of the body, not CRC-32.
        assert_eq!(
            value["value_crc32c"],
            format!("0x{:08x}", crc32c::crc32c(body)).as_str()
        );
        assert_ne!(crc32c::crc32c(body), crc32fast::hash(body));
    }
}
