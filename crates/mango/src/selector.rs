//! Mango selectors, the JSON query language of `_find` and `_changes?filter=_selector`, matched
//! the way Apache CouchDB 3.5 matches them, and CouchDB's view collation, which the comparison
//! operators use.
//!
//! A selector is compiled once into a [`Selector`] by three steps that mirror CouchDB's
//! `mango_selector:normalize/1`: operators are checked and implicit `$and`/`$eq` made explicit,
//! field names are pushed down to the condition they constrain (`{"a": {"b": {"$gt": 1}}}`
//! becomes `a.b > 1`), and `$not`/`$nor` are pushed down to the conditions by De Morgan's laws
//! (`$not: {a: {$gt: 1}}` becomes `a <= 1`). [`Selector::matches`] then walks that tree over a
//! document. [`validate`] and [`matches`] are the one-shot forms; [`collate`], the view
//! collation order, comes from `settee-collate` (shared with the view indexer).
//!
//! CouchDB behaviours kept on purpose, all read in `src/mango/src/mango_selector.erl`,
//! `mango_doc.erl`, `mango_util.erl` and `mango_json.erl` at tag 3.5.2:
//! - Comparison operators collate across types: `{"age": {"$gt": 5}}` matches `"age": "old"`,
//!   `[]` and `{}`, because strings, arrays and objects sort after numbers; it never matches
//!   `null` or booleans. `$eq` therefore needs the same type (`1` never equals `"1"`), but
//!   `1` equals `1.0`, and strings equal by ICU (`"c"` equals `"c\u{200B}"`).
//! - Every condition requires its field to exist, except `$exists: false`: `$ne`, `$nin` and a
//!   pushed-down `$not` do not match a document without the field. A path that runs into a
//!   scalar, or an array index out of range, matches nothing (not even `$exists: false`).
//! - `_id` is compared in Erlang term order (bytes for strings), not by ICU.
//! - `$in` on an array field matches when any element equals any argument; `$all` uses exact
//!   term equality; empty `$and`, `$or` and `$nin` match, empty `$in` and `$all` do not.
//! - The argument of `$elemMatch`, `$allMatch` and `$keyMapMatch` is not negation-normalised,
//!   so a `$not` there is a plain negation and a `$nor` there makes the whole operator fail.
//! - `$text` (CouchDB's `$default`) is accepted at the top level and matches every document,
//!   as CouchDB's in-memory matcher trusts the text index to have filtered already.
//!
//! Deliberate differences, all errors where CouchDB would accept or crash: `$type` must name one
//! of the six JSON types (CouchDB accepts any string and matches nothing), `$mod` needs the
//! non-zero divisor CouchDB's documentation asks for (CouchDB itself fails the request with a
//! 500 when it meets a document), selectors nest at most [`SELECTOR_DEPTH_MAX`] levels, and
//! `$regex` uses the `regex` crate instead of PCRE: look-around and back-references are
//! rejected, and `.` matches a character where CouchDB's byte-mode PCRE matches a byte.

use regex::{Regex, RegexBuilder};
use serde_json::{Number, Value};

use crate::error::{MangoError, MangoResult};

/// Deepest nesting of arrays and objects a selector may have, operator arguments included.
/// Bounds every recursion over a selector.
pub const SELECTOR_DEPTH_MAX: usize = 64;

/// Largest compiled program a `$regex` may build, and the largest lazy DFA it may grow.
pub const REGEX_SIZE_LIMIT_BYTES: usize = 1 << 20;

/// Longest rendering of a bad argument quoted in an error reason; longer ones are cut.
pub const ERROR_ARGUMENT_CHARS_MAX: usize = 1024;

/// Checks a selector is well formed, with CouchDB's reason text on failure.
pub fn validate(selector: &Value) -> MangoResult<()> {
    Selector::parse(selector).map(|_| ())
}

/// True when `doc` (the full JSON document, with `_id` and `_rev`) matches. A selector that
/// does not validate matches nothing.
pub fn matches(selector: &Value, doc: &Value) -> bool {
    Selector::parse(selector).is_ok_and(|selector| selector.matches(doc))
}

/// A validated, normalised selector, ready to match many documents.
#[derive(Debug, Clone)]
pub struct Selector {
    /// `None` for the empty selector `{}`, which matches everything.
    root: Option<Node>,
}

impl Selector {
    pub fn parse(selector: &Value) -> MangoResult<Selector> {
        let Value::Object(members) = selector else {
            return Err(MangoError::bad_request(
                "invalid_selector_json",
                "Selector error: expected a JSON object",
            ));
        };
        if members.is_empty() {
            return Ok(Selector { root: None });
        }
        if deeper_than(selector, SELECTOR_DEPTH_MAX) {
            return Err(MangoError::bad_request(
                "invalid_selector",
                format!("Selector is nested more than {SELECTOR_DEPTH_MAX} levels deep"),
            ));
        }
        let root = normalize_negations(parse_node(selector, &[])?)?;
        if let Node::Field { path, .. } = &root {
            if path.is_empty() {
                return Err(missing_field_name());
            }
        }
        Ok(Selector { root: Some(root) })
    }

    pub fn matches(&self, doc: &Value) -> bool {
        match &self.root {
            None => true,
            Some(root) => eval(root, doc).unwrap_or(false),
        }
    }

    /// The conjunction of `nodes` (the empty selector when there are none).
    pub(crate) fn from_conjuncts(mut nodes: Vec<Node>) -> Selector {
        let root = match nodes.len() {
            0 => None,
            1 => nodes.pop(),
            _ => Some(Node::And(nodes)),
        };
        Selector { root }
    }

    /// True for the empty selector `{}`.
    pub fn is_empty(&self) -> bool {
        self.root.is_none()
    }

    /// The normalised tree, `None` for `{}`; read by the planner.
    pub(crate) fn root(&self) -> Option<&Node> {
        self.root.as_ref()
    }
}

/// The normalised selector tree. After normalisation `Nor` survives only inside the argument of
/// `$elemMatch`, `$allMatch` and `$keyMapMatch`, and `Not` only there too.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    And(Vec<Node>),
    Or(Vec<Node>),
    Nor(Vec<Node>),
    Not(Box<Node>),
    /// The value at `path` (the value itself when empty) satisfies `cond`.
    Field {
        path: Vec<String>,
        cond: Cond,
    },
    /// `$text`, kept as CouchDB's `$default` argument for error messages.
    Text(Value),
}

/// A condition on one value.
#[derive(Debug, Clone)]
pub(crate) enum Cond {
    Eq(Value),
    Ne(Value),
    Lt(Value),
    Lte(Value),
    Gt(Value),
    Gte(Value),
    In(Vec<Value>),
    Nin(Vec<Value>),
    Exists(bool),
    Type(JsonType),
    Mod {
        divisor: i128,
        remainder: i128,
    },
    Regex(Regex),
    BeginsWith(String),
    Size(u64),
    All(Vec<Value>),
    ElemMatch(Box<Node>),
    AllMatch(Box<Node>),
    KeyMapMatch(Box<Node>),
    /// A negated condition that has no inverse operator (`$regex`, `$size`, ...).
    Not(Box<Cond>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JsonType {
    Null,
    Boolean,
    Number,
    String,
    Array,
    Object,
}

impl JsonType {
    fn of(value: &Value) -> JsonType {
        match value {
            Value::Null => JsonType::Null,
            Value::Bool(_) => JsonType::Boolean,
            Value::Number(_) => JsonType::Number,
            Value::String(_) => JsonType::String,
            Value::Array(_) => JsonType::Array,
            Value::Object(_) => JsonType::Object,
        }
    }

    fn named(name: &str) -> Option<JsonType> {
        Some(match name {
            "null" => JsonType::Null,
            "boolean" => JsonType::Boolean,
            "number" => JsonType::Number,
            "string" => JsonType::String,
            "array" => JsonType::Array,
            "object" => JsonType::Object,
            _ => return None,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing: CouchDB's norm_ops and norm_fields in one pass, carrying the field path down.

/// An object of two or more members is an implicit `$and`; anything that is not a one-member
/// object is an implicit `$eq` (so `{"a": {}}` means `a == {}`).
fn parse_node(value: &Value, path: &[String]) -> MangoResult<Node> {
    match value {
        Value::Object(members) if members.len() > 1 => members
            .iter()
            .map(|(key, arg)| parse_member(key, arg, path))
            .collect::<MangoResult<Vec<_>>>()
            .map(Node::And),
        Value::Object(members) => match members.iter().next() {
            Some((key, arg)) => parse_member(key, arg, path),
            None => Ok(field(path, Cond::Eq(value.clone()))),
        },
        _ => Ok(field(path, Cond::Eq(value.clone()))),
    }
}

fn parse_member(key: &str, arg: &Value, path: &[String]) -> MangoResult<Node> {
    match key {
        "$and" | "$or" | "$nor" => {
            let Value::Array(items) = arg else {
                return Err(bad_arg(key, arg));
            };
            let children = items
                .iter()
                .map(|item| parse_node(item, path))
                .collect::<MangoResult<Vec<_>>>()?;
            Ok(match key {
                "$and" => Node::And(children),
                "$or" => Node::Or(children),
                _ => Node::Nor(children),
            })
        }
        "$not" if arg.is_object() => Ok(Node::Not(Box::new(parse_node(arg, path)?))),
        "$elemMatch" | "$allMatch" | "$keyMapMatch" if arg.is_object() => {
            // The argument applies to each element (or key), so its paths start afresh.
            let inner = Box::new(parse_node(arg, &[])?);
            Ok(field(
                path,
                match key {
                    "$elemMatch" => Cond::ElemMatch(inner),
                    "$allMatch" => Cond::AllMatch(inner),
                    _ => Cond::KeyMapMatch(inner),
                },
            ))
        }
        "$not" | "$elemMatch" | "$allMatch" | "$keyMapMatch" => Err(bad_arg(key, arg)),
        "$text" => match arg {
            Value::String(_) | Value::Number(_) | Value::Bool(_) => {
                parse_default(&serde_json::json!({ "$text": arg }), path)
            }
            _ => Err(bad_arg(key, arg)),
        },
        "$default" => parse_default(arg, path),
        "$where" | "$geoWithin" | "$geoIntersects" | "$near" | "$nearSphere" => Err(
            MangoError::bad_request("not_supported", format!("Unsupported operator: {key}")),
        ),
        _ if key.starts_with('$') => Ok(field(path, parse_condition(key, arg)?)),
        _ => {
            let mut full = path.to_vec();
            full.extend(parse_field(key)?);
            parse_node(arg, &full)
        }
    }
}

/// `$text` becomes `{"$default": {"$text": arg}}`, which may only stand at the top level.
fn parse_default(arg: &Value, path: &[String]) -> MangoResult<Node> {
    let is_text = arg
        .as_object()
        .is_some_and(|members| members.len() == 1 && members.contains_key("$text"));
    if path.is_empty() && is_text {
        Ok(Node::Text(arg.clone()))
    } else {
        Err(MangoError::bad_request(
            "bad_field",
            format!(
                "Invalid field normalization on selector: {}",
                quoted_term(&serde_json::json!({ "$default": arg }))
            ),
        ))
    }
}

fn parse_condition(operator: &str, arg: &Value) -> MangoResult<Cond> {
    let bad = || bad_arg(operator, arg);
    Ok(match operator {
        "$eq" => Cond::Eq(arg.clone()),
        "$ne" => Cond::Ne(arg.clone()),
        "$lt" => Cond::Lt(arg.clone()),
        "$lte" => Cond::Lte(arg.clone()),
        "$gt" => Cond::Gt(arg.clone()),
        "$gte" => Cond::Gte(arg.clone()),
        "$in" | "$nin" | "$all" => {
            let items = arg.as_array().ok_or_else(bad)?.clone();
            match operator {
                "$in" => Cond::In(items),
                "$nin" => Cond::Nin(items),
                _ => Cond::All(items),
            }
        }
        "$exists" => Cond::Exists(arg.as_bool().ok_or_else(bad)?),
        "$type" => Cond::Type(arg.as_str().and_then(JsonType::named).ok_or_else(bad)?),
        "$mod" => match arg.as_array().map(Vec::as_slice) {
            Some([Value::Number(divisor), Value::Number(remainder)]) => {
                match (integer(divisor), integer(remainder)) {
                    (Some(divisor), Some(remainder)) if divisor != 0 => {
                        Cond::Mod { divisor, remainder }
                    }
                    _ => return Err(bad()),
                }
            }
            _ => return Err(bad()),
        },
        "$regex" => {
            let pattern = arg.as_str().ok_or_else(bad)?;
            let regex = RegexBuilder::new(pattern)
                .size_limit(REGEX_SIZE_LIMIT_BYTES)
                .dfa_size_limit(REGEX_SIZE_LIMIT_BYTES)
                .nest_limit(SELECTOR_DEPTH_MAX as u32)
                .build()
                .map_err(|_| bad())?;
            Cond::Regex(regex)
        }
        "$beginsWith" => Cond::BeginsWith(arg.as_str().ok_or_else(bad)?.to_string()),
        "$size" => Cond::Size(arg.as_u64().ok_or_else(bad)?),
        _ => {
            return Err(MangoError::bad_request(
                "invalid_operator",
                format!("Invalid operator: {operator}"),
            ))
        }
    })
}

fn field(path: &[String], cond: Cond) -> Node {
    Node::Field {
        path: path.to_vec(),
        cond,
    }
}

/// Splits a field name on the dots not escaped by a backslash, then drops every backslash, as
/// `mango_util:parse_field/1` does: `"a.b\\.c"` is `["a", "b.c"]`, `"\\$x"` is `["$x"]`.
pub(crate) fn parse_field(name: &str) -> MangoResult<Vec<String>> {
    if name.is_empty() {
        return Err(missing_field_name());
    }
    let invalid =
        || MangoError::bad_request("invalid_field_name", format!("Invalid field name: {name}"));
    let mut segments = Vec::new();
    let mut segment = String::new();
    let mut segment_is_empty = true;
    let mut escaped = false;
    for c in name.chars() {
        if c == '.' && !escaped {
            if segment_is_empty {
                return Err(invalid());
            }
            segments.push(std::mem::take(&mut segment));
            segment_is_empty = true;
        } else {
            segment_is_empty = false;
            if c != '\\' {
                segment.push(c);
            }
        }
        escaped = c == '\\';
    }
    if segment_is_empty {
        return Err(invalid());
    }
    segments.push(segment);
    Ok(segments)
}

fn deeper_than(value: &Value, levels: usize) -> bool {
    match value {
        Value::Array(items) => levels == 0 || items.iter().any(|v| deeper_than(v, levels - 1)),
        Value::Object(members) => {
            levels == 0 || members.values().any(|v| deeper_than(v, levels - 1))
        }
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Negations: CouchDB's norm_negations and negate. Negations are pushed down to the conditions so
// that `$not: {a: {$gt: 1}}` reads `a <= 1`, which (like every condition) needs `a` to exist.

fn normalize_negations(node: Node) -> MangoResult<Node> {
    Ok(match node {
        Node::Not(inner) => negate(*inner)?,
        Node::Nor(children) => Node::And(map_nodes(children, negate)?),
        Node::And(children) => Node::And(map_nodes(children, normalize_negations)?),
        Node::Or(children) => Node::Or(map_nodes(children, normalize_negations)?),
        // CouchDB does not look inside fields, so `$elemMatch` arguments keep their negations.
        other => other,
    })
}

fn negate(node: Node) -> MangoResult<Node> {
    Ok(match node {
        Node::Not(inner) => normalize_negations(*inner)?,
        Node::Nor(children) => Node::Or(map_nodes(children, normalize_negations)?),
        Node::And(children) => Node::Or(map_nodes(children, negate)?),
        Node::Or(children) => Node::And(map_nodes(children, negate)?),
        Node::Text(arg) => {
            return Err(bad_arg("$not", &serde_json::json!({ "$default": arg })));
        }
        Node::Field { path, cond } => Node::Field {
            path,
            cond: negate_cond(cond),
        },
    })
}

fn negate_cond(cond: Cond) -> Cond {
    match cond {
        Cond::Lt(arg) => Cond::Gte(arg),
        Cond::Lte(arg) => Cond::Gt(arg),
        Cond::Eq(arg) => Cond::Ne(arg),
        Cond::Ne(arg) => Cond::Eq(arg),
        Cond::Gte(arg) => Cond::Lt(arg),
        Cond::Gt(arg) => Cond::Lte(arg),
        Cond::In(args) => Cond::Nin(args),
        Cond::Nin(args) => Cond::In(args),
        Cond::Exists(exists) => Cond::Exists(!exists),
        Cond::Not(inner) => *inner,
        other => Cond::Not(Box::new(other)),
    }
}

fn map_nodes(nodes: Vec<Node>, f: fn(Node) -> MangoResult<Node>) -> MangoResult<Vec<Node>> {
    nodes.into_iter().map(f).collect()
}

// ---------------------------------------------------------------------------------------------
// Matching: CouchDB's match/3.

/// CouchDB's matcher throws when it meets a `$nor` (normalisation removes them everywhere but
/// inside `$elemMatch`, `$allMatch` and `$keyMapMatch`); those operators catch it and fail.
struct Unmatchable;

fn eval(node: &Node, value: &Value) -> Result<bool, Unmatchable> {
    match node {
        Node::And(children) => {
            for child in children {
                if !eval(child, value)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        Node::Or(children) => {
            for child in children {
                if eval(child, value)? {
                    return Ok(true);
                }
            }
            Ok(children.is_empty())
        }
        Node::Not(inner) => Ok(!eval(inner, value)?),
        Node::Nor(_) => Err(Unmatchable),
        Node::Text(_) => Ok(true),
        Node::Field { path, cond } => Ok(match lookup(value, path) {
            Lookup::Found(found) => {
                let order = if path.len() == 1 && path[0] == "_id" {
                    TermOrder::Erlang
                } else {
                    TermOrder::Collation
                };
                eval_cond(cond, found, order)
            }
            Lookup::Missing => matches!(cond, Cond::Exists(false)),
            Lookup::BadPath => false,
        }),
    }
}

fn eval_cond(cond: &Cond, value: &Value, order: TermOrder) -> bool {
    let compare = |arg: &Value| order.compare(value, arg);
    match cond {
        Cond::Eq(arg) => compare(arg).is_eq(),
        Cond::Ne(arg) => compare(arg).is_ne(),
        Cond::Lt(arg) => compare(arg).is_lt(),
        Cond::Lte(arg) => compare(arg).is_le(),
        Cond::Gt(arg) => compare(arg).is_gt(),
        Cond::Gte(arg) => compare(arg).is_ge(),
        Cond::In(args) => is_in(args, value, order),
        Cond::Nin(args) if args.is_empty() => true,
        Cond::Nin(args) => match value {
            Value::Array(_) => !is_in(args, value, order),
            _ => args.iter().all(|arg| compare(arg).is_ne()),
        },
        Cond::Exists(exists) => *exists,
        Cond::Type(json_type) => JsonType::of(value) == *json_type,
        Cond::Mod { divisor, remainder } => match value {
            // Erlang's `rem` truncates like Rust's `%`; i128 cannot overflow on JSON integers.
            Value::Number(n) => integer(n).is_some_and(|n| n % divisor == *remainder),
            _ => false,
        },
        Cond::Regex(regex) => value.as_str().is_some_and(|s| regex.is_match(s)),
        Cond::BeginsWith(prefix) => value.as_str().is_some_and(|s| s.starts_with(prefix)),
        Cond::Size(size) => value
            .as_array()
            .is_some_and(|items| items.len() as u64 == *size),
        Cond::All(args) => match value {
            Value::Array(items) if !args.is_empty() => {
                let has_all = args
                    .iter()
                    .all(|arg| items.iter().any(|item| erlang_equal(item, arg, true)));
                // `{"$all": [[1, 2]]}` also matches the array `[1, 2]` itself.
                let is_args = matches!(args.as_slice(), [only @ Value::Array(_)]
                    if erlang_equal(only, value, false));
                has_all || is_args
            }
            _ => false,
        },
        Cond::ElemMatch(node) => match value {
            Value::Array(items) => {
                for item in items {
                    match eval(node, item) {
                        Ok(true) => return true,
                        Ok(false) => {}
                        Err(Unmatchable) => return false,
                    }
                }
                false
            }
            _ => false,
        },
        Cond::AllMatch(node) => match value {
            Value::Array(items) if !items.is_empty() => items
                .iter()
                .all(|item| matches!(eval(node, item), Ok(true))),
            _ => false,
        },
        Cond::KeyMapMatch(node) => match value {
            Value::Object(members) => {
                for key in members.keys() {
                    match eval(node, &Value::String(key.clone())) {
                        Ok(true) => return true,
                        Ok(false) => {}
                        Err(Unmatchable) => return false,
                    }
                }
                false
            }
            _ => false,
        },
        Cond::Not(inner) => !eval_cond(inner, value, order),
    }
}

/// `$in`: an array field matches when any of its elements equals any argument.
fn is_in(args: &[Value], value: &Value, order: TermOrder) -> bool {
    match value {
        Value::Array(items) => args
            .iter()
            .any(|arg| items.iter().any(|item| order.compare(item, arg).is_eq())),
        _ => args.iter().any(|arg| order.compare(value, arg).is_eq()),
    }
}

pub(crate) enum Lookup<'a> {
    Found(&'a Value),
    Missing,
    /// The path runs into a scalar, or into an array with a name that is not an index in range.
    BadPath,
}

pub(crate) fn lookup<'a>(value: &'a Value, path: &[String]) -> Lookup<'a> {
    let mut current = value;
    for name in path {
        current = match current {
            Value::Object(members) => match members.get(name) {
                Some(next) => next,
                None => return Lookup::Missing,
            },
            Value::Array(items) => match array_index(name).and_then(|i| items.get(i)) {
                Some(next) => next,
                None => return Lookup::BadPath,
            },
            _ => return Lookup::BadPath,
        };
    }
    Lookup::Found(current)
}

/// An array index as Erlang's `binary_to_integer/1` reads it: an optional sign, then digits.
fn array_index(name: &str) -> Option<usize> {
    let digits = name
        .strip_prefix('+')
        .or_else(|| {
            name.strip_prefix('-')
                .filter(|d| d.bytes().all(|b| b == b'0'))
        })
        .unwrap_or(name);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A JSON integer (what Erlang's `is_integer/1` accepts after decoding), widened so that `rem`
/// and comparisons cannot overflow.
fn integer(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

/// Erlang's `=:=` (`exact`) or `==` on decoded JSON: the same, except that `==` equates an
/// integer with the float of the same value. Objects compare member by member, in order.
fn erlang_equal(a: &Value, b: &Value, exact: bool) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if exact => {
            (integer(x).is_some() == integer(y).is_some()) && compare_numbers(x, y).is_eq()
        }
        (Value::Number(x), Value::Number(y)) => compare_numbers(x, y).is_eq(),
        (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| erlang_equal(x, y, exact))
        }
        (Value::Object(xs), Value::Object(ys)) => {
            xs.len() == ys.len()
                && xs
                    .iter()
                    .zip(ys)
                    .all(|((kx, x), (ky, y))| kx == ky && erlang_equal(x, y, exact))
        }
        _ => a == b,
    }
}

// ---------------------------------------------------------------------------------------------
// Errors, with the reason text of `mango_error.erl`. Erlang prints arguments with `~w`.

fn bad_arg(operator: &str, arg: &Value) -> MangoError {
    MangoError::bad_request(
        "bad_arg",
        format!("Bad argument for operator {operator}: {}", quoted_term(arg)),
    )
}

/// `erlang_term`, cut to [`ERROR_ARGUMENT_CHARS_MAX`] characters.
pub(crate) fn quoted_term(value: &Value) -> String {
    let mut text = erlang_term(value);
    if let Some((cut, _)) = text.char_indices().nth(ERROR_ARGUMENT_CHARS_MAX) {
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

fn missing_field_name() -> MangoError {
    MangoError::bad_request(
        "invalid_selector",
        "One or more conditions is missing a field name.",
    )
}

/// A decoded JSON value as Erlang's `~w` prints it: strings as byte lists (`<<97,98>>`),
/// objects as `{[{Key,Value}]}`.
pub(crate) fn erlang_term(value: &Value) -> String {
    fn binary(s: &str) -> String {
        let bytes: Vec<String> = s.bytes().map(|b| b.to_string()).collect();
        format!("<<{}>>", bytes.join(","))
    }
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) if integer(n).is_some() => n.to_string(),
        Value::Number(n) => {
            let text = format!("{:?}", n.as_f64().unwrap_or(0.0));
            match text.split_once('e') {
                Some((mantissa, exponent)) if !mantissa.contains('.') => {
                    format!("{mantissa}.0e{exponent}")
                }
                _ => text,
            }
        }
        Value::String(s) => binary(s),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(erlang_term).collect();
            format!("[{}]", items.join(","))
        }
        Value::Object(members) => {
            let members: Vec<String> = members
                .iter()
                .map(|(k, v)| format!("{{{},{}}}", binary(k), erlang_term(v)))
                .collect();
            format!("{{[{}]}}", members.join(","))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Collation lives in `settee-collate`, shared with the view indexer.

use settee_collate::compare_numbers;
pub(crate) use settee_collate::TermOrder;
pub use settee_collate::{collate, compare_strings};

#[cfg(test)]
mod tests;
