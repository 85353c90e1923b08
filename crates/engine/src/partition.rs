//! CouchDB partitioned databases' document ids (docs/format/partitions.md): one definition of
//! a partition for the HTTP door, the view indexer and Mango.

/// The partition of a document id: the part before its first `:`.
pub fn partition_of(id: &str) -> Option<&str> {
    id.split_once(':').map(|(partition, _)| partition)
}

/// The id range `[p:, p;)` that holds partition `p`'s documents (`;` follows `:`).
pub fn id_bounds(partition: &str) -> (String, String) {
    (format!("{partition}:"), format!("{partition};"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_is_the_id_before_its_first_colon() {
        assert_eq!(partition_of("foo:bar:baz"), Some("foo"));
        assert_eq!(partition_of("nopartition"), None);
        let (low, high) = id_bounds("foo");
        assert!(low.as_str() <= "foo:" && "foo:zzz" < high.as_str());
        assert!("foo;" >= high.as_str() && "foo" < low.as_str());
    }
}
