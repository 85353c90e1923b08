//! Key-routed bulk requests (`_bulk_docs`, `_bulk_get`, `_revs_diff`): the front node splits
//! the body by the node of each document's vbucket, sends each node its share, and puts the
//! answers back in the order of the request. Documents travel as the client wrote them
//! (`RawValue`), apart from an `_id` the front node gives a `_bulk_docs` document without one.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::Malformed;

/// Gives every item of `{"<list>": [item...], ...}` that is an object without `id_member` the
/// id `new_id` makes, written as its first member (`_bulk_docs` documents without `_id`, so that
/// the front node can route them). `Err`: not an object with an array under `list`.
pub fn assign_ids(
    body: &[u8],
    list: &str,
    id_member: &str,
    mut new_id: impl FnMut() -> String,
) -> Result<Vec<u8>, Malformed> {
    let envelope = object_members(body)?;
    let items = list_items(&envelope, list)?;
    let items: Vec<String> = items
        .into_iter()
        .map(|item| {
            let text = item.get();
            match serde_json::from_str::<Map<String, Value>>(text) {
                Ok(object) if !object.contains_key(id_member) => {
                    with_first_member(text, id_member, &new_id())
                }
                _ => text.to_owned(),
            }
        })
        .collect();
    Ok(rebuild(&envelope, list, &items))
}

/// Each item's id in order (`Value::Null` for an item without a string id).
pub fn item_ids(body: &[u8], list: &str, id_member: &str) -> Result<Vec<Value>, Malformed> {
    let envelope = object_members(body)?;
    Ok(list_items(&envelope, list)?
        .into_iter()
        .map(|item| item_id(item, id_member))
        .collect())
}

/// One share of `{"<list>": [item...], other members}` per group: the items `group_of` puts
/// in it (by id, `Value::Null` for an item without a string id; `None`: in no group this
/// time), other members in every share; `None` for a group without items.
pub fn split_list(
    body: &[u8],
    list: &str,
    id_member: &str,
    groups: usize,
    group_of: impl Fn(&Value) -> Option<usize>,
) -> Result<Vec<Option<Vec<u8>>>, Malformed> {
    let envelope = object_members(body)?;
    let mut shares: Vec<Vec<String>> = vec![Vec::new(); groups];
    for item in list_items(&envelope, list)? {
        if let Some(share) = group_of(&item_id(item, id_member)).and_then(|g| shares.get_mut(g)) {
            share.push(item.get().to_owned());
        }
    }
    Ok(shares
        .into_iter()
        .map(|share| (!share.is_empty()).then(|| rebuild(&envelope, list, &share)))
        .collect())
}

/// The member names of an object body, in order (`_revs_diff`'s document ids).
pub fn object_keys(body: &[u8]) -> Result<Vec<Value>, Malformed> {
    Ok(object_members(body)?
        .into_iter()
        .map(|(name, _)| Value::String(name))
        .collect())
}

/// One share of an object `{key: value...}` per group, by each member's name.
pub fn split_object(
    body: &[u8],
    groups: usize,
    group_of: impl Fn(&Value) -> Option<usize>,
) -> Result<Vec<Option<Vec<u8>>>, Malformed> {
    let mut shares: Vec<Vec<(String, &RawValue)>> = vec![Vec::new(); groups];
    for (name, raw) in object_members(body)? {
        if let Some(share) =
            group_of(&Value::String(name.clone())).and_then(|group| shares.get_mut(group))
        {
            share.push((name, raw));
        }
    }
    Ok(shares
        .into_iter()
        .map(|share| {
            if share.is_empty() {
                return None;
            }
            let mut out = b"{".to_vec();
            for (index, (name, raw)) in share.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(Value::String(name.clone()).to_string().as_bytes());
                out.push(b':');
                out.extend_from_slice(raw.get().as_bytes());
            }
            out.push(b'}');
            Some(out)
        })
        .collect())
}

fn list_items<'a>(
    envelope: &[(String, &'a RawValue)],
    list: &str,
) -> Result<Vec<&'a RawValue>, Malformed> {
    let items = envelope
        .iter()
        .find(|(name, _)| name == list)
        .map(|(_, raw)| *raw)
        .ok_or_else(|| Malformed(format!("no `{list}` member")))?;
    serde_json::from_str(items.get()).map_err(|_| Malformed(format!("`{list}` is not an array")))
}

fn item_id(item: &RawValue, id_member: &str) -> Value {
    match serde_json::from_str::<Map<String, Value>>(item.get()) {
        Ok(object) => match object.get(id_member) {
            Some(Value::String(id)) => Value::String(id.clone()),
            _ => Value::Null,
        },
        Err(_) => Value::Null,
    }
}

/// `{other members..., "<list>": [items]}`.
fn rebuild(envelope: &[(String, &RawValue)], list: &str, items: &[String]) -> Vec<u8> {
    let mut out = b"{".to_vec();
    for (name, raw) in envelope.iter().filter(|(name, _)| name != list) {
        out.extend_from_slice(Value::String(name.clone()).to_string().as_bytes());
        out.push(b':');
        out.extend_from_slice(raw.get().as_bytes());
        out.push(b',');
    }
    out.extend_from_slice(Value::String(list.to_owned()).to_string().as_bytes());
    out.extend_from_slice(b":[");
    out.extend_from_slice(items.join(",").as_bytes());
    out.extend_from_slice(b"]}");
    out
}

/// An object's members in order, values raw; a repeated name keeps its last value, as the
/// HTTP door's own parsing does.
fn object_members(body: &[u8]) -> Result<Vec<(String, &RawValue)>, Malformed> {
    let members: Vec<(String, &RawValue)> = serde_json::from_slice::<Ordered<'_>>(body)
        .map_err(|_| Malformed("not a JSON object".into()))?
        .0;
    let mut kept: Vec<(String, &RawValue)> = Vec::with_capacity(members.len());
    for (name, raw) in members {
        kept.retain(|(seen, _)| *seen != name);
        kept.push((name, raw));
    }
    Ok(kept)
}

/// An object's members in the order written (serde's map visitor, values left raw).
struct Ordered<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Ordered<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = Ordered<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut map: M,
            ) -> Result<Ordered<'a>, M::Error> {
                let mut members = Vec::new();
                while let Some((name, raw)) = map.next_entry::<String, &'de RawValue>()? {
                    members.push((name, raw));
                }
                Ok(Ordered(members))
            }
        }
        deserializer.deserialize_map(Visitor(std::marker::PhantomData))
    }
}

/// `object` (JSON object text) with `"member": value` as its first member.
fn with_first_member(object: &str, member: &str, value: &str) -> String {
    let open = object.find('{').unwrap_or(0);
    let rest = object[open + 1..].trim_start();
    let separator = if rest.starts_with('}') { "" } else { "," };
    format!(
        "{{{}:{}{separator}{rest}",
        Value::String(member.to_owned()),
        Value::String(value.to_owned())
    )
}

/// The answers' rows put back in the request's order: `order[i]` is the answer of item `i`,
/// whose rows are taken in turn; `member` names the answers' array (`None`: each answer is
/// the array). `Err` when an answer has fewer rows than items sent to it.
pub fn merge_in_order(
    answers: &[Option<&[u8]>],
    order: &[usize],
    member: Option<&str>,
) -> Result<Vec<u8>, Malformed> {
    let rows = answers
        .iter()
        .map(|answer| match answer {
            None => Ok(Vec::new()),
            Some(body) => rows_of(body, member),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut next = vec![0usize; rows.len()];
    let mut merged = Vec::with_capacity(order.len());
    for &group in order {
        let row = rows
            .get(group)
            .and_then(|rows| rows.get(next[group]))
            .ok_or_else(|| Malformed(format!("fewer rows than documents from answer {group}")))?;
        next[group] += 1;
        merged.push(row.get());
    }
    Ok(wrap(&merged, member))
}

/// Every answer's rows, one answer after the other (`_bulk_docs` with `new_edits=false`, which
/// answers only the documents that failed).
pub fn merge_concatenated(
    answers: &[Option<&[u8]>],
    member: Option<&str>,
) -> Result<Vec<u8>, Malformed> {
    let rows = answers
        .iter()
        .flatten()
        .map(|body| rows_of(body, member))
        .collect::<Result<Vec<_>, _>>()?;
    let merged: Vec<&str> = rows.iter().flatten().map(|row| row.get()).collect();
    Ok(wrap(&merged, member))
}

/// The members of every answer's object in one object: each answer is the object (`within`
/// `None`: `_revs_diff`), or holds it as its member `within` (`_missing_revs`'
/// `missing_revs`, `_purge`'s `purged`).
pub fn merge_objects(
    answers: &[Option<&[u8]>],
    within: Option<&str>,
) -> Result<Vec<u8>, Malformed> {
    let mut out = b"{".to_vec();
    let mut first = true;
    for body in answers.iter().flatten() {
        let object = match within {
            None => *body,
            Some(member) => object_members(body)?
                .into_iter()
                .find(|(name, _)| name == member)
                .map(|(_, raw)| raw.get().as_bytes())
                .ok_or_else(|| Malformed(format!("an answer without `{member}`")))?,
        };
        for (name, raw) in object_members(object)? {
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(Value::String(name).to_string().as_bytes());
            out.push(b':');
            out.extend_from_slice(raw.get().as_bytes());
        }
    }
    out.push(b'}');
    Ok(out)
}

fn rows_of<'a>(body: &'a [u8], member: Option<&str>) -> Result<Vec<&'a RawValue>, Malformed> {
    let array: &RawValue = match member {
        None => serde_json::from_slice(body).map_err(|error| Malformed(error.to_string()))?,
        Some(member) => object_members(body)?
            .into_iter()
            .find(|(name, _)| name == member)
            .map(|(_, raw)| raw)
            .ok_or_else(|| Malformed(format!("an answer without `{member}`")))?,
    };
    serde_json::from_str(array.get()).map_err(|error| Malformed(error.to_string()))
}

fn wrap(rows: &[&str], member: Option<&str>) -> Vec<u8> {
    let array = format!("[{}]", rows.join(","));
    match member {
        None => array.into_bytes(),
        Some(member) => format!("{{{}:{array}}}", Value::String(member.to_owned())).into_bytes(),
    }
}
