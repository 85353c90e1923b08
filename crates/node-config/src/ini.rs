//! `local.ini` as docs/format/node-config.md specifies it: parsed into section → key →
//! value-or-deleted, and encoded back in a stable order.

use std::collections::BTreeMap;

use crate::ConfigError;

/// What `local.ini` says of each key: `Some(value)`, or `None` for a deletion (`key =`).
pub type Overrides = BTreeMap<String, BTreeMap<String, Option<String>>>;

const HEADER: &str = "; settee node configuration: _config writes (docs/format/node-config.md)\n";

/// Reads the file's text. Lines that are not a header, a setting, a comment or blank, and
/// settings before the first header, are ignored: an operator's typo must not stop the node.
pub fn parse(text: &str) -> Overrides {
    let mut overrides = Overrides::new();
    let mut section: Option<String> = None;
    for line in text.lines() {
        let line = line.trim_matches([' ', '\t', '\r']);
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
        {
            section = Some(name.trim_matches([' ', '\t']).to_string());
            continue;
        }
        let (Some(section), Some((key, value))) = (&section, line.split_once('=')) else {
            continue;
        };
        let key = key.trim_matches([' ', '\t']);
        let value = value.trim_matches([' ', '\t']);
        if key.is_empty() {
            continue;
        }
        let value = (!value.is_empty()).then(|| value.to_string());
        overrides
            .entry(section.clone())
            .or_default()
            .insert(key.to_string(), value);
    }
    overrides
}

/// The file's text for `overrides`, sections and keys in byte order.
pub fn encode(overrides: &Overrides) -> String {
    let mut text = String::from(HEADER);
    for (section, keys) in overrides {
        if keys.is_empty() {
            continue;
        }
        text.push('[');
        text.push_str(section);
        text.push_str("]\n");
        for (key, value) in keys {
            text.push_str(key);
            text.push_str(" =");
            if let Some(value) = value {
                text.push(' ');
                text.push_str(value);
            }
            text.push('\n');
        }
    }
    text
}

/// Refuses a section name, key or value the file could not hold as given (line breaks, a `]`
/// in a section, an `=` in a key, blanks at the ends that parsing would trim).
pub fn check_names(section: &str, key: &str, value: Option<&str>) -> Result<(), ConfigError> {
    let invalid = |what: &str| Err(ConfigError::Invalid(format!("invalid config {what}")));
    let line_break = |text: &str| text.contains(['\n', '\r']);
    let padded = |text: &str| text.trim_matches([' ', '\t']) != text;
    if section.is_empty() || section.contains(']') || line_break(section) || padded(section) {
        return invalid("section");
    }
    if key.is_empty()
        || key.contains('=')
        || key.starts_with(['[', ';', '#'])
        || line_break(key)
        || padded(key)
    {
        return invalid("key");
    }
    if value.is_some_and(|value| line_break(value) || padded(value)) {
        return invalid("value");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_overrides_parse_back_the_same() {
        let mut overrides = Overrides::new();
        overrides
            .entry("httpd".into())
            .or_default()
            .insert("allow_jsonp".into(), Some("true".into()));
        overrides
            .entry("httpd".into())
            .or_default()
            .insert("x_forwarded_host".into(), None);
        overrides
            .entry("uuids".into())
            .or_default()
            .insert("algorithm".into(), Some("a = b".into()));
        let text = encode(&overrides);
        assert_eq!(
            text,
            format!("{HEADER}[httpd]\nallow_jsonp = true\nx_forwarded_host =\n[uuids]\nalgorithm = a = b\n")
        );
        assert_eq!(parse(&text), overrides);
    }

    #[test]
    fn an_operators_file_is_read_leniently() {
        let parsed = parse("stray = 1\n[ couchdb ]\n# note\n max_document_size\t=  10 \nnonsense\n=x\n[couchdb]\nmax_document_size = 20\r\n");
        assert_eq!(parsed.len(), 1);
        assert_eq!(
            parsed["couchdb"]["max_document_size"].as_deref(),
            Some("20")
        );
    }

    #[test]
    fn names_the_file_cannot_hold_are_refused() {
        assert!(check_names("httpd", "allow_jsonp", Some("true")).is_ok());
        assert!(check_names("a]b", "k", None).is_err());
        assert!(check_names("s", "a=b", None).is_err());
        assert!(check_names("s", ";k", None).is_err());
        assert!(check_names("s", "k", Some("two\nlines")).is_err());
        assert!(check_names("s", "k", Some(" padded")).is_err());
        assert!(check_names("", "k", None).is_err());
    }
}
