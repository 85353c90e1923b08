//! A design document's `rewrites` array: each rule's `from` is matched against the path after
//! `_rewrite` (in order, the first that matches wins), and its `to` and `query` give the new
//! request, as CouchDB's `chttpd_rewrite` builds it.
//!
//! ```text
//! {"from": "/welcome/:name", "to": "_show/welcome", "query": {"name": ":name"}}
//!   GET /db/_design/app/_rewrite/welcome/user
//!     -> /db/_design/app/_show/welcome?name=user
//! ```
//!
//! Bindings are, in this order of precedence: the `from` variables (`:name`; a `*` that is not
//! last binds one segment as `*`), then the request's query parameters (`key`, `startkey`,
//! `start_key`, `endkey`, `end_key` and `keys` read as JSON). A `query` value `":name"` or
//! `"*"` (or an array element `":name"`) is replaced by its binding, converted as `formats`
//! says (`int`, `bool`). The new query string holds every binding the rule's `query` does not
//! name, then the rule's `query`; `to`'s `:name` segments take their binding's value
//! (`undefined` without one) and a `*` the rest of the matched path.

use serde_json::{Map, Value};

use crate::path::{self, quote_literal, quote_plus, quote_segment};
use crate::{RewriteError, RewriteRequest, TARGET_BYTES_MAX};

/// Query parameters CouchDB reads as JSON: decoded when bound, encoded when written.
const JSON_PARAMETERS: &[&str] = &["key", "startkey", "start_key", "endkey", "end_key", "keys"];

/// The most `..` segments a rule's path may hold while `secure_rewrites` is on: enough to
/// leave the design document (`../..` is the database), not the database.
const PARENT_SEGMENTS_SECURE_MAX: usize = 2;

/// A design document's rules, parsed once per request.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone, PartialEq)]
struct Rule {
    /// `None`: any method (no `method`, or `"*"`).
    method: Option<MethodPattern>,
    from: Vec<Token>,
    to: Vec<Token>,
    /// The rule's `query` object, in its order.
    query: Vec<(String, Value)>,
    /// The rule's `formats` object: binding name -> `"int"` or `"bool"`.
    formats: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq)]
enum MethodPattern {
    Exactly(String),
    /// A `method` that is not a string matches nothing (CouchDB compares it with the method's
    /// name and never finds it equal).
    Never,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Literal(String),
    /// `:name`.
    Bind(String),
    /// `*` (or `:*`): the rest of the path when last, else one segment bound as `*`.
    All,
}

/// (name, value) in CouchDB's order; the first of a name is the one used.
type Bindings = Vec<(String, Value)>;

impl Rules {
    /// The rules of a `rewrites` array. Elements that are not objects are skipped (CouchDB
    /// ignores them); a rule without a string `to`, or with a `from` that is not a string, is
    /// [`RewriteError::InvalidTarget`]; with `secure` (`[chttpd] secure_rewrites`), a path with
    /// a third `..` is [`RewriteError::InsecureRule`]. Every rule is checked, as CouchDB checks
    /// them all before matching any.
    pub fn parse(rules: &[Value], secure: bool) -> Result<Rules, RewriteError> {
        let mut parsed = Vec::with_capacity(rules.len());
        for rule in rules {
            let Value::Object(rule) = rule else { continue };
            let method = match rule.get("method") {
                None => None,
                Some(Value::String(method)) if method == "*" => None,
                Some(Value::String(method)) => Some(MethodPattern::Exactly(method.clone())),
                Some(_) => Some(MethodPattern::Never),
            };
            let from = match rule.get("from") {
                None => vec![Token::All],
                Some(Value::String(from)) => parse_path(from, secure)?,
                Some(_) => return Err(RewriteError::InvalidTarget),
            };
            let to = match rule.get("to") {
                Some(Value::String(to)) => parse_path(to, secure)?,
                _ => return Err(RewriteError::InvalidTarget),
            };
            let query = match rule.get("query") {
                Some(Value::Object(query)) => query
                    .iter()
                    .map(|(name, value)| (name.clone(), value.clone()))
                    .collect(),
                _ => Vec::new(),
            };
            let formats = match rule.get("formats") {
                Some(Value::Object(formats)) => formats.clone(),
                _ => Map::new(),
            };
            parsed.push(Rule {
                method,
                from,
                to,
                query,
                formats,
            });
        }
        Ok(Rules { rules: parsed })
    }

    /// The request target (`/path?query`, encoded) the first matching rule makes of
    /// `request`, or [`RewriteError::NoMatchingRule`].
    pub fn rewrite(&self, request: &RewriteRequest<'_>) -> Result<String, RewriteError> {
        let query = request_bindings(request.query)?;
        for rule in &self.rules {
            let method_matches = match &rule.method {
                None => true,
                Some(MethodPattern::Exactly(method)) => method == request.method,
                Some(MethodPattern::Never) => false,
            };
            if !method_matches {
                continue;
            }
            let mut bindings = Vec::new();
            let Some(remaining) = bind_path(&rule.from, request.rest, &mut bindings) else {
                continue;
            };
            // CouchDB prepends each binding: the last bound comes first.
            bindings.reverse();
            bindings.extend(query.iter().cloned());
            let query_args = rule.query_args(&bindings);
            bindings.retain(|(name, _)| !query_args.iter().any(|(named, _)| named == name));
            bindings.extend(query_args);
            return target(request, &rule.to, &bindings, remaining);
        }
        Err(RewriteError::NoMatchingRule)
    }
}

impl Rule {
    /// The rule's `query` with its variables replaced, in CouchDB's (reversed) order.
    fn query_args(&self, bindings: &Bindings) -> Bindings {
        let mut args: Bindings = self
            .query
            .iter()
            .map(|(name, value)| (name.clone(), self.replace_variables(value, bindings)))
            .collect();
        args.reverse();
        args
    }

    fn replace_variables(&self, value: &Value, bindings: &Bindings) -> Value {
        match value {
            Value::String(text) if text == "*" => self.variable("*", bindings, value),
            Value::String(text) => match text.strip_prefix(':') {
                Some(name) => self.variable(name, bindings, value),
                None => value.clone(),
            },
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| match item {
                        Value::String(text) if text.starts_with(':') => {
                            self.variable(&text[1..], bindings, item)
                        }
                        other => other.clone(),
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// A binding's value (else `default`), converted as the rule's `formats` says.
    fn variable(&self, name: &str, bindings: &Bindings, default: &Value) -> Value {
        let value = lookup(bindings, name).unwrap_or(default).clone();
        match self.formats.get(name).and_then(Value::as_str) {
            Some("int") => match &value {
                Value::String(text) => text
                    .parse::<i64>()
                    .map(Value::from)
                    .unwrap_or(value.clone()),
                _ => value,
            },
            Some("bool") => match &value {
                Value::String(text) if text.eq_ignore_ascii_case("true") => Value::Bool(true),
                Value::String(text) if text.eq_ignore_ascii_case("false") => Value::Bool(false),
                _ => value,
            },
            _ => value,
        }
    }
}

fn lookup<'a>(bindings: &'a Bindings, name: &str) -> Option<&'a Value> {
    bindings
        .iter()
        .find(|(bound, _)| bound == name)
        .map(|(_, value)| value)
}

/// A `from` or `to` path: `/`-separated, empty segments dropped.
fn parse_path(text: &str, secure: bool) -> Result<Vec<Token>, RewriteError> {
    let mut tokens = Vec::new();
    let mut parents = 0usize;
    for segment in text.split('/').filter(|segment| !segment.is_empty()) {
        tokens.push(match segment {
            "*" | ":*" => Token::All,
            ".." => {
                if secure && parents >= PARENT_SEGMENTS_SECURE_MAX {
                    return Err(RewriteError::InsecureRule);
                }
                parents += 1;
                Token::Literal(segment.to_string())
            }
            _ => match segment.strip_prefix(':') {
                Some(name) => Token::Bind(name.to_string()),
                None => Token::Literal(segment.to_string()),
            },
        });
    }
    Ok(tokens)
}

/// The request's query parameters as bindings, the JSON ones decoded.
fn request_bindings(query: &[(String, String)]) -> Result<Bindings, RewriteError> {
    query
        .iter()
        .map(|(name, value)| {
            let value = if JSON_PARAMETERS.contains(&name.as_str()) {
                serde_json::from_str(value)
                    .map_err(|_| RewriteError::InvalidQueryJson(name.clone()))?
            } else {
                Value::String(value.clone())
            };
            Ok((name.clone(), value))
        })
        .collect()
}

/// Matches `from` against the path, binding its variables (in binding order); the segments a
/// final `*` matched are returned.
fn bind_path<'a>(
    from: &[Token],
    mut path: &'a [String],
    bindings: &mut Bindings,
) -> Option<&'a [String]> {
    let mut from = from;
    loop {
        match (from, path) {
            ([], []) => return Some(&[]),
            ([Token::All], rest) => return Some(rest),
            (_, []) | ([], _) => return None,
            ([token, from_rest @ ..], [segment, path_rest @ ..]) => {
                match token {
                    Token::Bind(name) => {
                        bindings.push((name.clone(), Value::String(segment.clone())));
                    }
                    Token::All => bindings.push(("*".into(), Value::String(segment.clone()))),
                    Token::Literal(literal) if literal == segment => {}
                    Token::Literal(_) => return None,
                }
                from = from_rest;
                path = path_rest;
            }
        }
    }
}

/// A binding as text, as CouchDB's `iolist_to_binary` makes it: a string as it is, an array
/// of strings joined; anything else as JSON (CouchDB fails on those).
fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Array(items) if items.iter().all(Value::is_string) => {
            items.iter().filter_map(Value::as_str).collect()
        }
        other => other.to_string(),
    }
}

fn checked(out: &str) -> Result<(), RewriteError> {
    if out.len() > TARGET_BYTES_MAX {
        return Err(RewriteError::TooLong);
    }
    Ok(())
}

/// The new target: `to` with its bindings (a `*` puts the rest of the matched path there
/// and ends it), resolved against the design document, then every binding but `*` as the
/// query string.
fn target(
    request: &RewriteRequest<'_>,
    to: &[Token],
    bindings: &Bindings,
    remaining: &[String],
) -> Result<String, RewriteError> {
    let mut relative = String::new();
    for token in to {
        match token {
            Token::All => {
                for segment in remaining {
                    relative.push('/');
                    quote_segment(segment, &mut relative);
                    checked(&relative)?;
                }
                break;
            }
            Token::Bind(name) => {
                relative.push('/');
                match lookup(bindings, name) {
                    Some(value) => quote_segment(&text_of(value), &mut relative),
                    None => relative.push_str("undefined"),
                }
            }
            Token::Literal(literal) => {
                relative.push('/');
                quote_literal(literal, &mut relative);
            }
        }
        checked(&relative)?;
    }
    let mut target = path::resolve(&path::prefix(request.db, request.ddoc), &relative)?;
    let mut separator = '?';
    for (name, value) in bindings.iter().filter(|(name, _)| name != "*") {
        target.push(separator);
        separator = '&';
        quote_plus(name, &mut target);
        target.push('=');
        let text = if JSON_PARAMETERS.contains(&name.as_str()) {
            value.to_string()
        } else {
            text_of(value)
        };
        quote_plus(&text, &mut target);
        checked(&target)?;
    }
    checked(&target)?;
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rewrite(rules: Value, method: &str, path: &str, query: &[(&str, &str)]) -> String {
        try_rewrite(rules, method, path, query).expect("rewrites")
    }

    fn try_rewrite(
        rules: Value,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
    ) -> Result<String, RewriteError> {
        let rules = Rules::parse(rules.as_array().expect("array"), true)?;
        let rest: Vec<String> = path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let query: Vec<(String, String)> = query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        rules.rewrite(&RewriteRequest {
            method,
            db: "db",
            ddoc: "app",
            rest: &rest,
            query: &query,
        })
    }

    #[test]
    fn literal_rules_and_methods() {
        let rules = json!([
            {"from": "foo", "to": "foo.txt"},
            {"from": "hello/:id", "to": "_update/hello/:id", "method": "PUT"},
            {"from": "hello/:id", "to": "_show/hello/:id", "method": "GET"},
            {"from": "/", "to": "_view/basicView"}
        ]);
        assert_eq!(
            rewrite(rules.clone(), "GET", "foo", &[]),
            "/db/_design/app/foo.txt"
        );
        assert_eq!(
            rewrite(rules.clone(), "PUT", "hello/x", &[]),
            "/db/_design/app/_update/hello/x?id=x"
        );
        assert_eq!(
            rewrite(rules.clone(), "GET", "hello/x", &[]),
            "/db/_design/app/_show/hello/x?id=x"
        );
        assert_eq!(
            rewrite(rules.clone(), "GET", "", &[]),
            "/db/_design/app/_view/basicView"
        );
        assert_eq!(
            try_rewrite(rules.clone(), "DELETE", "hello/x", &[]),
            Err(RewriteError::NoMatchingRule)
        );
        assert_eq!(
            try_rewrite(rules, "GET", "nothing/here", &[]),
            Err(RewriteError::NoMatchingRule)
        );
    }

    #[test]
    fn query_values_take_bindings_and_formats() {
        let rules = json!([
            {"from": "/welcome/:name", "to": "_show/welcome", "query": {"name": ":name"}},
            {"from": "/welcome2", "to": "_show/welcome", "query": {"name": "user"}},
            {"from": "fixed", "to": "_list/f/v", "query": {"startkey": 3, "endkey": 8}},
            {"from": "path/:start/:end", "to": "_list/f/v",
             "query": {"startkey": ":start", "endkey": ":end"},
             "formats": {"start": "int", "end": "int"}},
            {"from": "complex/:a/:b", "to": "_view/v", "query": {"key": [":a", ":b"]}},
            {"from": "flag/:d", "to": "_view/v", "query": {"include_docs": ":d"},
             "formats": {"d": "bool"}}
        ]);
        assert_eq!(
            rewrite(rules.clone(), "GET", "welcome/user", &[]),
            "/db/_design/app/_show/welcome?name=user"
        );
        // A request parameter the rule's query names is replaced by the rule's.
        assert_eq!(
            rewrite(
                rules.clone(),
                "GET",
                "welcome2",
                &[("name", "other"), ("x", "1")]
            ),
            "/db/_design/app/_show/welcome?x=1&name=user"
        );
        assert_eq!(
            rewrite(rules.clone(), "GET", "fixed", &[("startkey", "4")]),
            "/db/_design/app/_list/f/v?endkey=8&startkey=3"
        );
        assert_eq!(
            rewrite(rules.clone(), "GET", "path/3/8", &[]),
            "/db/_design/app/_list/f/v?end=8&start=3&endkey=8&startkey=3"
        );
        assert_eq!(
            rewrite(rules.clone(), "GET", "complex/test/essai", &[]),
            "/db/_design/app/_view/v?b=essai&a=test&key=%5B%22test%22%2C%22essai%22%5D"
        );
        // Bindings from the query string fill the rule's query too.
        assert_eq!(
            rewrite(rules.clone(), "GET", "flag/TRUE", &[]),
            "/db/_design/app/_view/v?d=TRUE&include_docs=true"
        );
        assert_eq!(
            try_rewrite(rules, "GET", "welcome/x", &[("key", "not json")]),
            Err(RewriteError::InvalidQueryJson("key".into()))
        );
    }

    #[test]
    fn stars_and_parent_paths() {
        let rules = json!([
            {"from": "/db/*", "to": "../../*"},
            {"from": "/w5/*", "to": "_show/*", "query": {"name": "*"}},
            {"from": "/mid/*/x", "to": "_show/:missing/*"}
        ]);
        assert_eq!(
            rewrite(rules.clone(), "GET", "db/_design/app", &[("meta", "true")]),
            "/db/_design/app?meta=true"
        );
        assert_eq!(
            rewrite(rules.clone(), "GET", "db/doc/a%20b", &[]),
            "/db/doc/a%2520b"
        );
        // A segment from the request that is `..` cannot climb.
        assert_eq!(
            rewrite(rules.clone(), "GET", "db/../../x", &[]),
            "/db/%2E%2E/%2E%2E/x"
        );
        assert_eq!(
            rewrite(rules.clone(), "GET", "w5/welcome3", &[]),
            "/db/_design/app/_show/welcome3?name=%2A"
        );
        assert_eq!(
            rewrite(rules, "GET", "mid/seg/x", &[]),
            "/db/_design/app/_show/undefined"
        );
    }

    #[test]
    fn secure_rewrites_allow_two_parent_segments() {
        let uuids = json!([{"from": "uuids", "to": "../../../_uuids"}]);
        assert_eq!(
            try_rewrite(uuids.clone(), "GET", "uuids", &[]),
            Err(RewriteError::InsecureRule)
        );
        let rules = Rules::parse(uuids.as_array().expect("array"), false).expect("parses");
        let rest = vec!["uuids".to_string()];
        let request = RewriteRequest {
            method: "GET",
            db: "a/b",
            ddoc: "app",
            rest: &rest,
            query: &[],
        };
        assert_eq!(rules.rewrite(&request), Ok("/_uuids".into()));
        let above = json!([{"to": "../../../../x"}]);
        let rules = Rules::parse(above.as_array().expect("array"), false).expect("parses");
        assert_eq!(rules.rewrite(&request), Err(RewriteError::AboveRoot));
    }

    #[test]
    fn malformed_rules() {
        assert_eq!(
            try_rewrite(json!([{"from": "a"}]), "GET", "a", &[]),
            Err(RewriteError::InvalidTarget)
        );
        assert_eq!(
            try_rewrite(json!([{"from": 1, "to": "x"}]), "GET", "a", &[]),
            Err(RewriteError::InvalidTarget)
        );
        // Elements that are not objects are skipped; a method that is not a string never
        // matches.
        assert_eq!(
            rewrite(
                json!([1, "x", {"to": "a", "method": 1}, {"to": "b"}]),
                "GET",
                "z",
                &[]
            ),
            "/db/_design/app/b"
        );
    }

    #[test]
    fn slashes_in_the_database_name_stay_encoded() {
        let rules = Rules::parse(&[json!({"from": "foo", "to": "foo.txt"})], true).expect("ok");
        let rest = vec!["foo".to_string()];
        let request = RewriteRequest {
            method: "GET",
            db: "suite_db/with_slashes",
            ddoc: "test",
            rest: &rest,
            query: &[],
        };
        assert_eq!(
            rules.rewrite(&request),
            Ok("/suite_db%2Fwith_slashes/_design/test/foo.txt".into())
        );
    }

    #[test]
    fn targets_are_bounded() {
        let to = ":a/".repeat(20_000);
        let rules = Rules::parse(&[json!({"from": ":a", "to": to})], true).expect("ok");
        let rest = vec!["x".repeat(100)];
        let request = RewriteRequest {
            method: "GET",
            db: "db",
            ddoc: "app",
            rest: &rest,
            query: &[],
        };
        assert_eq!(rules.rewrite(&request), Err(RewriteError::TooLong));
    }
}
