//! Sub-document semantics over JSON bytes: every lookup path of a request resolved in one walk
//! of the document, and mutations spliced into the bytes.

use smallvec::SmallVec;

use super::index::Index;
use super::path::{self, Component};
use super::scan::{self, Span};
use super::Status;

/// One answer per path, in path order (a request has at most 16 paths: no allocation).
pub type Answers = SmallVec<[Result<Span, Status>; 16]>;

/// Deepest nesting a document or an inserted value may reach (Couchbase's limit).
pub const MAX_DEPTH: usize = 32;

/// Resolves every path in `paths` within `doc` in one walk; each answer is the value's span.
/// Paths are already parsed; the walk descends only into members and elements some path needs
/// and stops as soon as every path is answered.
pub fn resolve_all(doc: &[u8], paths: &[&[Component<'_>]]) -> Answers {
    resolve_all_indexed(doc, None, paths)
}

/// [`resolve_all`] with the body's structural index: indexed containers answer a name or a
/// position directly and are stepped over without scanning.
pub fn resolve_all_indexed(
    doc: &[u8],
    index: Option<&Index<'_>>,
    paths: &[&[Component<'_>]],
) -> Answers {
    let mut answers: SmallVec<[Option<Result<Span, Status>>; 16]> =
        SmallVec::from_elem(None, paths.len());
    if let Some((index, root)) =
        index.and_then(|index| indexed_root(doc, index).map(|r| (index, r)))
    {
        // With an index every path is a few probes of it, no scan and no allocation: resolve
        // each on its own (the walk exists to share one scan between paths), starting from
        // where the previous path's shared leading components led (`data.a`, `data.b`, ...).
        {
            let mut previous: &[Component<'_>] = &[];
            let mut reached: SmallVec<[Span; 8]> = SmallVec::new();
            return paths
                .iter()
                .map(|path| {
                    let shared = previous
                        .iter()
                        .zip(path.iter())
                        .take_while(|(a, b)| a == b)
                        .count();
                    reached.truncate(shared);
                    previous = path;
                    resolve_indexed(doc, index, root, path, &mut reached)
                })
                .collect();
        }
    }
    let start = scan::skip_ws(doc, 0);
    let end = match index {
        Some(index) => index.value_end(doc, start),
        None => scan::value_end(doc, start),
    };
    match end {
        Ok(end) => {
            let pending: Vec<(usize, usize)> = (0..paths.len()).map(|index| (index, 0)).collect();
            walk(doc, index, (start, end), paths, pending, 0, &mut answers);
        }
        Err(status) => answers
            .iter_mut()
            .for_each(|answer| *answer = Some(Err(status))),
    }
    answers
        .into_iter()
        .map(|answer| answer.unwrap_or(Err(Status::PathEnoent)))
        .collect()
}

/// The span of the whole document when its root is an indexed container (then every path can
/// be resolved through the index alone).
pub fn indexed_root(doc: &[u8], index: &Index<'_>) -> Option<Span> {
    let start = scan::skip_ws(doc, 0);
    if !index.is_indexed(start) {
        return None;
    }
    index.value_end(doc, start).ok().map(|end| (start, end))
}

/// One path through the index: indexed containers answer directly; small ones (under the
/// index's threshold) are scanned, which costs at most a kilobyte. `reached[d]` is where the
/// first `d + 1` components lead (from an earlier path with the same leading components); the
/// walk continues from the last of them and records the steps it takes.
pub fn resolve_indexed(
    doc: &[u8],
    index: &Index<'_>,
    root: Span,
    path: &[Component<'_>],
    reached: &mut SmallVec<[Span; 8]>,
) -> Result<Span, Status> {
    let mut current = reached.last().copied().unwrap_or(root);
    for (depth, component) in path.iter().enumerate().skip(reached.len()) {
        if depth >= MAX_DEPTH {
            return Err(Status::DocE2deep);
        }
        let first = doc.get(current.0).copied().ok_or(Status::DocNotJson)?;
        let fits = matches!(
            (component, first),
            (Component::Key(_), b'{') | (Component::Index(_), b'[')
        );
        if !fits {
            return Err(Status::PathMismatch);
        }
        let next = match index.child(doc, current.0, component) {
            Ok(found) => found,
            Err(_) => step_in(doc, Some(index), current, component)?,
        };
        match next {
            Some((child, _)) => {
                current = child;
                reached.push(child);
            }
            None => return Err(Status::PathEnoent),
        }
    }
    Ok(current)
}

/// (path index, components matched, the name wanted next, its fingerprint).
type WantedName<'a> = (usize, usize, &'a [u8], u64);

/// Length and the first and last (up to) 8 bytes of a name: equal names have equal
/// fingerprints, and names that differ anywhere near either end almost never do.
fn fingerprint(name: &[u8]) -> u64 {
    let word = |bytes: &[u8]| {
        let mut buffer = [0u8; 8];
        buffer[..bytes.len()].copy_from_slice(bytes);
        u64::from_le_bytes(buffer)
    };
    let head = word(&name[..name.len().min(8)]);
    let tail = word(&name[name.len().saturating_sub(8)..]);
    head ^ tail.rotate_left(29) ^ (name.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// `pending`: (path index, how many components are already matched) for the value at `span`.
fn walk(
    doc: &[u8],
    index: Option<&Index<'_>>,
    span: Span,
    paths: &[&[Component<'_>]],
    pending: Vec<(usize, usize)>,
    depth: usize,
    answers: &mut [Option<Result<Span, Status>>],
) {
    let mut deeper: Vec<(usize, usize)> = Vec::with_capacity(pending.len());
    for (index, matched) in pending {
        if matched == paths[index].len() {
            answers[index] = Some(Ok(span));
        } else if depth >= MAX_DEPTH {
            answers[index] = Some(Err(Status::DocE2deep));
        } else {
            deeper.push((index, matched));
        }
    }
    if deeper.is_empty() {
        return;
    }
    let first = doc[span.0];
    // Paths whose next component does not fit this value's type.
    deeper.retain(|(index, matched)| {
        let fits = matches!(
            (&paths[*index][*matched], first),
            (Component::Key(_), b'{') | (Component::Index(_), b'[')
        );
        if !fits {
            answers[*index] = Some(Err(Status::PathMismatch));
        }
        fits
    });
    if deeper.is_empty() {
        return;
    }
    let mut children: Vec<(Span, Vec<(usize, usize)>)> = Vec::new();
    // An indexed container answers each path's next step directly.
    if let Some(index) = index.filter(|index| index.is_indexed(span.0)) {
        let mut direct = true;
        for (path_index, matched) in &deeper {
            match index.child(doc, span.0, &paths[*path_index][*matched]) {
                Ok(Some((child, _))) => children.push((child, vec![(*path_index, matched + 1)])),
                Ok(None) => answers[*path_index] = Some(Err(Status::PathEnoent)),
                Err(_) => {
                    direct = false;
                    break;
                }
            }
        }
        if direct {
            for (child, hits) in children {
                walk(doc, Some(index), child, paths, hits, depth + 1, answers);
            }
            return;
        }
        children.clear();
    }
    let mut remaining = deeper.len();
    let walked = if first == b'{' {
        // Each member's name is compared with every wanted name: read it once, and let a
        // fingerprint turn most comparisons into one integer compare (16 paths over a 130-member
        // unindexed object spent half the lookup in `key_is` and memcmp).
        let wanted: SmallVec<[WantedName<'_>; 8]> = deeper
            .iter()
            .filter_map(|(index, matched)| match &paths[*index][*matched] {
                Component::Key(name) => Some((*index, *matched, name.as_ref(), fingerprint(name))),
                Component::Index(_) => None,
            })
            .collect();
        scan::for_each_member_in(doc, span.0, index, |member| {
            let mut hits = Vec::new();
            let Some(name) = scan::member_name(doc, member.key) else {
                return remaining > 0;
            };
            let print = fingerprint(&name);
            for (index, matched, want, want_print) in &wanted {
                if *want_print == print && *want == name.as_ref() {
                    hits.push((*index, matched + 1));
                }
            }
            if !hits.is_empty() {
                remaining -= hits.len();
                children.push((member.value, hits));
            }
            remaining > 0
        })
    } else {
        // Indexes: -1 needs the last element, so the walk may have to reach the end.
        let mut last: Option<Span> = None;
        let wants_last = deeper
            .iter()
            .any(|(index, matched)| paths[*index][*matched] == Component::Index(-1));
        let result = scan::for_each_element_in(doc, span.0, index, |position, element| {
            last = Some(element);
            let mut hits = Vec::new();
            for (index, matched) in &deeper {
                if paths[*index][*matched] == Component::Index(position as i64) {
                    hits.push((*index, matched + 1));
                }
            }
            if !hits.is_empty() {
                remaining -= hits.len();
                children.push((element, hits));
            }
            wants_last || remaining > 0
        });
        if let Some(last) = last {
            let hits: Vec<(usize, usize)> = deeper
                .iter()
                .filter(|(index, matched)| paths[*index][*matched] == Component::Index(-1))
                .map(|(index, matched)| (*index, matched + 1))
                .collect();
            if !hits.is_empty() {
                children.push((last, hits));
            }
        }
        result
    };
    if let Err(status) = walked {
        for (index, _) in &deeper {
            answers[*index] = Some(Err(status));
        }
        return;
    }
    for (child, hits) in children {
        walk(doc, index, child, paths, hits, depth + 1, answers);
    }
    // Whatever was not found here does not exist.
    for (index, _) in deeper {
        if answers[index].is_none() {
            answers[index] = Some(Err(Status::PathEnoent));
        }
    }
}

/// Number of members or elements of the container at `span`; `PathMismatch` for a primitive.
pub fn count(doc: &[u8], span: Span) -> Result<usize, Status> {
    let mut count = 0;
    match doc[span.0] {
        b'{' => scan::for_each_member(doc, span.0, |_| {
            count += 1;
            true
        })?,
        b'[' => scan::for_each_element(doc, span.0, |_, _| {
            count += 1;
            true
        })?,
        _ => return Err(Status::PathMismatch),
    };
    Ok(count)
}

/// How deep the value's nesting goes (a primitive is 0).
fn nesting(value: &[u8]) -> usize {
    let (mut depth, mut deepest, mut i) = (0usize, 0usize, 0);
    while i < value.len() {
        match value[i] {
            b'"' => {
                i = scan::string_end(value, i).unwrap_or(value.len());
                continue;
            }
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    deepest
}

/// One JSON value (for dict/replace ops).
fn check_value(value: &[u8], at_depth: usize) -> Result<(), Status> {
    if serde_json::from_slice::<serde::de::IgnoredAny>(value).is_err() {
        return Err(Status::ValueCantinsert);
    }
    if at_depth + nesting(value) > MAX_DEPTH {
        return Err(Status::ValueEtoodeep);
    }
    Ok(())
}

/// One or more comma-separated JSON values (for array pushes and inserts).
fn check_values(values: &[u8], at_depth: usize) -> Result<(), Status> {
    if values.iter().all(u8::is_ascii_whitespace) {
        // `[]` would parse, but splicing nothing in leaves a dangling comma (found by fuzzing).
        return Err(Status::ValueCantinsert);
    }
    let mut wrapped = Vec::with_capacity(values.len() + 2);
    wrapped.push(b'[');
    wrapped.extend_from_slice(values);
    wrapped.push(b']');
    if serde_json::from_slice::<Vec<serde::de::IgnoredAny>>(&wrapped).is_err() {
        return Err(Status::ValueCantinsert);
    }
    if at_depth + nesting(values) > MAX_DEPTH {
        return Err(Status::ValueEtoodeep);
    }
    Ok(())
}

/// Mutation kinds (the protocol-neutral form of Couchbase's spec opcodes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edit {
    DictAdd,
    DictUpsert,
    Delete,
    Replace,
    PushLast,
    PushFirst,
    Insert,
    AddUnique,
    Counter,
}

impl Edit {
    /// Every kind, for tests and fuzz targets that pick one.
    pub const ALL: [Edit; 9] = [
        Edit::DictAdd,
        Edit::DictUpsert,
        Edit::Delete,
        Edit::Replace,
        Edit::PushLast,
        Edit::PushFirst,
        Edit::Insert,
        Edit::AddUnique,
        Edit::Counter,
    ];
}

/// Applies one edit to `doc`; returns the new document and, for counters, the new value.
pub fn apply(
    doc: &[u8],
    edit: Edit,
    path_text: &[u8],
    value: &[u8],
    mkdir_p: bool,
) -> Result<(Vec<u8>, Option<Vec<u8>>), Status> {
    let components = path::parse(path_text)?;
    // What the path's shape allows, before looking at the document.
    let last = components.last();
    let shape_ok = match edit {
        Edit::DictAdd | Edit::DictUpsert => matches!(last, Some(Component::Key(_))),
        Edit::Insert => matches!(last, Some(Component::Index(position)) if *position >= 0),
        Edit::Replace | Edit::Delete | Edit::Counter => last.is_some(),
        Edit::PushLast | Edit::PushFirst | Edit::AddUnique => true,
    };
    if !shape_ok {
        return Err(Status::PathEinval);
    }
    let root = scan::skip_ws(doc, 0);
    let root_end = scan::value_end(doc, root)?;
    // Walk down as far as the path exists, remembering the containers passed.
    let mut containers: Vec<Span> = Vec::new();
    let mut current = (root, root_end);
    let mut found = 0;
    // For the last existing step: the member (key start .. value end) or element span.
    let mut entry: Option<Span> = None;
    for component in &components {
        containers.push(current);
        if containers.len() > MAX_DEPTH {
            return Err(Status::DocE2deep);
        }
        let next = step(doc, current, component)?;
        match next {
            Some((child, whole)) => {
                current = child;
                entry = Some(whole);
                found += 1;
            }
            None => break,
        }
    }
    let exists = found == components.len();
    match edit {
        Edit::Replace | Edit::Delete if !exists => Err(Status::PathEnoent),
        Edit::Replace => {
            if components.is_empty() {
                return Err(Status::PathEinval);
            }
            check_value(value, components.len())?;
            Ok((splice(doc, current, value), None))
        }
        Edit::Delete => {
            let (Some(whole), Some(parent)) = (entry, containers.last().copied()) else {
                return Err(Status::PathEinval);
            };
            Ok((remove_entry(doc, parent, whole), None))
        }
        Edit::DictAdd | Edit::DictUpsert => {
            let Some(Component::Key(_)) = components.last() else {
                return Err(Status::PathEinval);
            };
            check_value(value, components.len())?;
            if exists {
                if edit == Edit::DictAdd {
                    return Err(Status::PathEexists);
                }
                return Ok((splice(doc, current, value), None));
            }
            create(doc, &components, found, current, value, mkdir_p).map(|doc| (doc, None))
        }
        Edit::Counter => {
            let delta = std::str::from_utf8(value)
                .ok()
                .filter(|text| !text.starts_with('+'))
                .and_then(|text| text.parse::<i64>().ok())
                .filter(|delta| *delta != 0)
                .ok_or(Status::DeltaEinval)?;
            if components.is_empty() {
                return Err(Status::PathEinval);
            }
            if exists {
                let text = &doc[current.0..current.1];
                let is_integer = !text.is_empty()
                    && text
                        .iter()
                        .enumerate()
                        .all(|(i, byte)| byte.is_ascii_digit() || (i == 0 && *byte == b'-'));
                if !is_integer {
                    return Err(Status::PathMismatch);
                }
                let old: i64 = std::str::from_utf8(text)
                    .ok()
                    .and_then(|text| text.parse().ok())
                    .ok_or(Status::NumErange)?;
                let new = old.checked_add(delta).ok_or(Status::ValueCantinsert)?;
                let new = new.to_string().into_bytes();
                return Ok((splice(doc, current, &new), Some(new)));
            }
            if !matches!(components.last(), Some(Component::Key(_))) {
                return Err(Status::PathEnoent);
            }
            let new = delta.to_string().into_bytes();
            create(doc, &components, found, current, &new, mkdir_p).map(|doc| (doc, Some(new)))
        }
        Edit::PushLast | Edit::PushFirst | Edit::AddUnique => {
            if edit == Edit::AddUnique {
                check_value(value, components.len() + 1)?;
                let first = value.iter().find(|byte| !byte.is_ascii_whitespace());
                if matches!(first, Some(b'{' | b'[')) {
                    return Err(Status::ValueCantinsert);
                }
            } else {
                check_values(value, components.len() + 1)?;
            }
            if !exists {
                // A missing array is created only with mkdir_p (Couchbase's create_path).
                if !mkdir_p || !matches!(components.last(), Some(Component::Key(_))) {
                    return Err(Status::PathEnoent);
                }
                let mut array = Vec::with_capacity(value.len() + 2);
                array.push(b'[');
                array.extend_from_slice(value);
                array.push(b']');
                return create(doc, &components, found, current, &array, mkdir_p)
                    .map(|doc| (doc, None));
            }
            if doc[current.0] != b'[' {
                return Err(Status::PathMismatch);
            }
            if edit == Edit::AddUnique {
                let wanted: serde_json::Value =
                    serde_json::from_slice(value).map_err(|_| Status::ValueCantinsert)?;
                let mut clash = None;
                scan::for_each_element(doc, current.0, |_, element| {
                    let bytes = &doc[element.0..element.1];
                    if matches!(bytes.first(), Some(b'{' | b'[')) {
                        clash = Some(Status::PathMismatch);
                        return false;
                    }
                    if serde_json::from_slice::<serde_json::Value>(bytes)
                        .ok()
                        .as_ref()
                        == Some(&wanted)
                    {
                        clash = Some(Status::PathEexists);
                        return false;
                    }
                    true
                })?;
                if let Some(status) = clash {
                    return Err(status);
                }
            }
            Ok((
                insert_elements(doc, current, value, edit == Edit::PushFirst),
                None,
            ))
        }
        Edit::Insert => {
            let Some(Component::Index(position)) = components.last() else {
                return Err(Status::PathEinval);
            };
            if *position < 0 {
                return Err(Status::PathEinval);
            }
            check_values(value, components.len())?;
            if found < components.len() - 1 {
                return Err(Status::PathEnoent);
            }
            let array = containers[components.len() - 1];
            if doc[array.0] != b'[' {
                return Err(Status::PathMismatch);
            }
            if exists {
                // Before the element now at that position.
                let element = current;
                let mut out = Vec::with_capacity(doc.len() + value.len() + 1);
                out.extend_from_slice(&doc[..element.0]);
                out.extend_from_slice(value);
                out.push(b',');
                out.extend_from_slice(&doc[element.0..]);
                return Ok((out, None));
            }
            let length = count(doc, array)?;
            if *position as usize != length {
                return Err(Status::PathEnoent);
            }
            Ok((insert_elements(doc, array, value, false), None))
        }
    }
}

/// One step down: the child's value span and its whole entry (member from the key's first
/// byte, or the element); `None` when the member or element does not exist.
fn step(
    doc: &[u8],
    container: Span,
    component: &Component<'_>,
) -> Result<Option<(Span, Span)>, Status> {
    step_in(doc, None, container, component)
}

/// [`step`] that steps over indexed containers without scanning them.
fn step_in(
    doc: &[u8],
    index: Option<&Index<'_>>,
    container: Span,
    component: &Component<'_>,
) -> Result<Option<(Span, Span)>, Status> {
    match (component, doc.get(container.0).copied().unwrap_or(b' ')) {
        (Component::Key(name), b'{') => {
            let mut hit = None;
            scan::for_each_member_in(doc, container.0, index, |member| {
                if scan::key_is(doc, member.key, name) {
                    hit = Some((member.value, (member.key.0, member.value.1)));
                    return false;
                }
                true
            })?;
            Ok(hit)
        }
        (Component::Index(wanted), b'[') => {
            let mut hit = None;
            let mut last = None;
            scan::for_each_element_in(doc, container.0, index, |position, element| {
                last = Some(element);
                if *wanted >= 0 && position as i64 == *wanted {
                    hit = Some((element, element));
                    return false;
                }
                true
            })?;
            if *wanted == -1 {
                hit = last.map(|element| (element, element));
            }
            Ok(hit)
        }
        _ => Err(Status::PathMismatch),
    }
}

fn splice(doc: &[u8], span: Span, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(doc.len() - (span.1 - span.0) + value.len());
    out.extend_from_slice(&doc[..span.0]);
    out.extend_from_slice(value);
    out.extend_from_slice(&doc[span.1..]);
    out
}

/// Creates the missing tail of `components` (from `found` on) inside `container`, the deepest
/// existing value; intermediate objects only with `mkdir_p`.
fn create(
    doc: &[u8],
    components: &[Component<'_>],
    found: usize,
    container: Span,
    value: &[u8],
    mkdir_p: bool,
) -> Result<Vec<u8>, Status> {
    let missing = &components[found..];
    if missing.len() > 1 && !mkdir_p {
        return Err(Status::PathEnoent);
    }
    if doc[container.0] != b'{' {
        return Err(if doc[container.0] == b'[' {
            Status::PathEnoent
        } else {
            Status::PathMismatch
        });
    }
    // `"k1":{"k2":{..."kn":value}}`, every missing component must be a name.
    let mut member = Vec::with_capacity(value.len() + 32);
    for (i, component) in missing.iter().enumerate() {
        let Component::Key(name) = component else {
            return Err(Status::PathEnoent);
        };
        let name = std::str::from_utf8(name).map_err(|_| Status::PathEinval)?;
        member.extend_from_slice(
            serde_json::to_string(name)
                .map_err(|_| Status::PathEinval)?
                .as_bytes(),
        );
        member.push(b':');
        if i + 1 < missing.len() {
            member.push(b'{');
        }
    }
    member.extend_from_slice(value);
    member.extend(std::iter::repeat_n(b'}', missing.len() - 1));
    let close = container.1 - 1;
    let mut out = Vec::with_capacity(doc.len() + member.len() + 1);
    out.extend_from_slice(&doc[..close]);
    if !scan::is_empty_container(doc, container.0) {
        out.push(b',');
    }
    out.extend_from_slice(&member);
    out.extend_from_slice(&doc[close..]);
    Ok(out)
}

fn insert_elements(doc: &[u8], array: Span, values: &[u8], first: bool) -> Vec<u8> {
    let empty = scan::is_empty_container(doc, array.0);
    let mut out = Vec::with_capacity(doc.len() + values.len() + 1);
    if first {
        out.extend_from_slice(&doc[..array.0 + 1]);
        out.extend_from_slice(values);
        if !empty {
            out.push(b',');
        }
        out.extend_from_slice(&doc[array.0 + 1..]);
    } else {
        let close = array.1 - 1;
        out.extend_from_slice(&doc[..close]);
        if !empty {
            out.push(b',');
        }
        out.extend_from_slice(values);
        out.extend_from_slice(&doc[close..]);
    }
    out
}

/// Removes a member or element (`whole`) from `container` with one of its separating commas.
fn remove_entry(doc: &[u8], container: Span, whole: Span) -> Vec<u8> {
    let after = scan::skip_ws(doc, whole.1);
    let (from, to) = if doc.get(after) == Some(&b',') {
        (whole.0, scan::skip_ws(doc, after + 1))
    } else {
        // The last entry: take the comma before it, if any.
        let mut before = whole.0;
        while before > container.0 + 1 && doc[before - 1].is_ascii_whitespace() {
            before -= 1;
        }
        if doc[before - 1] == b',' {
            (before - 1, whole.1)
        } else {
            (whole.0, whole.1)
        }
    };
    let mut out = Vec::with_capacity(doc.len());
    out.extend_from_slice(&doc[..from]);
    out.extend_from_slice(&doc[to..]);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn lookup(doc: &str, paths: &[&str]) -> Vec<Result<String, Status>> {
        let parsed: Vec<Vec<Component<'_>>> = paths
            .iter()
            .map(|path| path::parse(path.as_bytes()).expect("path"))
            .collect();
        let refs: Vec<&[Component<'_>]> = parsed.iter().map(Vec::as_slice).collect();
        resolve_all(doc.as_bytes(), &refs)
            .into_iter()
            .map(|answer| answer.map(|span| doc[span.0..span.1].to_string()))
            .collect()
    }

    fn edit(
        doc: &str,
        edit: Edit,
        path: &str,
        value: &str,
        mkdir_p: bool,
    ) -> Result<String, Status> {
        apply(
            doc.as_bytes(),
            edit,
            path.as_bytes(),
            value.as_bytes(),
            mkdir_p,
        )
        .map(|(doc, _)| String::from_utf8(doc).expect("utf8"))
    }

    #[test]
    fn many_paths_in_one_walk() {
        let doc = r#"{"a": {"b": [10, {"c": "x"}, 30]}, "d.e": true, "f": 1}"#;
        assert_eq!(
            lookup(
                doc,
                &["a.b[1].c", "a.b[-1]", "`d.e`", "f", "a.b[3]", "a.z", "f.g", "a[0]", ""]
            ),
            vec![
                Ok(r#""x""#.to_string()),
                Ok("30".to_string()),
                Ok("true".to_string()),
                Ok("1".to_string()),
                Err(Status::PathEnoent),
                Err(Status::PathEnoent),
                Err(Status::PathMismatch),
                Err(Status::PathMismatch),
                Ok(doc.to_string()),
            ]
        );
        assert_eq!(lookup("{\"a\":", &["a"]), vec![Err(Status::DocNotJson)]);
    }

    #[test]
    fn dict_edits_keep_every_other_byte() {
        let doc = r#"{ "a" : 1,   "b":{} }"#;
        assert_eq!(
            edit(doc, Edit::DictUpsert, "a", "2", false),
            Ok(r#"{ "a" : 2,   "b":{} }"#.into())
        );
        assert_eq!(
            edit(doc, Edit::DictUpsert, "b.c", "[1]", false),
            Ok(r#"{ "a" : 1,   "b":{"c":[1]} }"#.into())
        );
        assert_eq!(
            edit(doc, Edit::DictAdd, "a", "3", false),
            Err(Status::PathEexists)
        );
        assert_eq!(
            edit(doc, Edit::DictUpsert, "x.y.z", "0", false),
            Err(Status::PathEnoent)
        );
        assert_eq!(
            edit(doc, Edit::DictUpsert, "x.y.z", "0", true),
            Ok(r#"{ "a" : 1,   "b":{} ,"x":{"y":{"z":0}}}"#.into())
        );
        assert_eq!(
            edit(doc, Edit::DictUpsert, "a.q", "0", true),
            Err(Status::PathMismatch)
        );
        assert_eq!(
            edit(doc, Edit::DictUpsert, "n", "{bad", false),
            Err(Status::ValueCantinsert)
        );
        assert_eq!(
            edit(doc, Edit::Replace, "a", "\"s\"", false),
            Ok(r#"{ "a" : "s",   "b":{} }"#.into())
        );
        assert_eq!(
            edit(doc, Edit::Replace, "zz", "1", false),
            Err(Status::PathEnoent)
        );
        assert_eq!(
            edit(doc, Edit::Delete, "a", "", false),
            Ok(r#"{ "b":{} }"#.into())
        );
        assert_eq!(
            edit(doc, Edit::Delete, "b", "", false),
            Ok(r#"{ "a" : 1 }"#.into())
        );
        assert_eq!(
            edit(doc, Edit::Delete, "zz", "", false),
            Err(Status::PathEnoent)
        );
        assert_eq!(
            edit(doc, Edit::DictUpsert, "a[0]", "1", false),
            Err(Status::PathEinval)
        );
    }

    #[test]
    fn array_edits() {
        let doc = r#"{"l":[1,2],"e":[],"o":{}}"#;
        assert_eq!(
            edit(doc, Edit::PushLast, "l", "3,4", false),
            Ok(r#"{"l":[1,2,3,4],"e":[],"o":{}}"#.into())
        );
        assert_eq!(
            edit(doc, Edit::PushFirst, "l", "0", false),
            Ok(r#"{"l":[0,1,2],"e":[],"o":{}}"#.into())
        );
        assert_eq!(
            edit(doc, Edit::PushLast, "e", "1", false),
            Ok(r#"{"l":[1,2],"e":[1],"o":{}}"#.into())
        );
        assert_eq!(
            edit(doc, Edit::PushFirst, "e", "1", false),
            Ok(r#"{"l":[1,2],"e":[1],"o":{}}"#.into())
        );
        assert_eq!(
            edit(doc, Edit::PushLast, "o", "1", false),
            Err(Status::PathMismatch)
        );
        assert_eq!(
            edit(doc, Edit::PushLast, "n", "1", true),
            Ok(r#"{"l":[1,2],"e":[],"o":{},"n":[1]}"#.into())
        );
        assert_eq!(
            edit(doc, Edit::PushLast, "n", "1", false),
            Err(Status::PathEnoent)
        );
        assert_eq!(
            edit(doc, Edit::Insert, "l[1]", "9", false),
            Ok(r#"{"l":[1,9,2],"e":[],"o":{}}"#.into())
        );
        assert_eq!(
            edit(doc, Edit::Insert, "l[2]", "9", false),
            Ok(r#"{"l":[1,2,9],"e":[],"o":{}}"#.into())
        );
        assert_eq!(
            edit(doc, Edit::Insert, "l[3]", "9", false),
            Err(Status::PathEnoent)
        );
        assert_eq!(
            edit(doc, Edit::Insert, "l[-1]", "9", false),
            Err(Status::PathEinval)
        );
        assert_eq!(
            edit(doc, Edit::AddUnique, "l", "2", false),
            Err(Status::PathEexists)
        );
        assert_eq!(
            edit(doc, Edit::AddUnique, "l", "3", false),
            Ok(r#"{"l":[1,2,3],"e":[],"o":{}}"#.into())
        );
        assert_eq!(
            edit(doc, Edit::AddUnique, "l", "[3]", false),
            Err(Status::ValueCantinsert)
        );
        assert_eq!(
            edit(doc, Edit::Delete, "l[0]", "", false),
            Ok(r#"{"l":[2],"e":[],"o":{}}"#.into())
        );
        assert_eq!(
            edit(doc, Edit::Delete, "l[-1]", "", false),
            Ok(r#"{"l":[1],"e":[],"o":{}}"#.into())
        );
    }

    #[test]
    fn counters() {
        let doc = r#"{"n":5,"f":1.5,"big":9223372036854775807}"#;
        let bump = |path: &str, delta: &str| {
            apply(
                doc.as_bytes(),
                Edit::Counter,
                path.as_bytes(),
                delta.as_bytes(),
                false,
            )
            .map(|(doc, value)| {
                (
                    String::from_utf8(doc).unwrap(),
                    String::from_utf8(value.unwrap()).unwrap(),
                )
            })
        };
        assert_eq!(
            bump("n", "-7"),
            Ok((
                r#"{"n":-2,"f":1.5,"big":9223372036854775807}"#.into(),
                "-2".into()
            ))
        );
        assert_eq!(bump("new", "3").map(|(_, value)| value), Ok("3".into()));
        assert_eq!(bump("f", "1"), Err(Status::PathMismatch));
        assert_eq!(bump("big", "1"), Err(Status::ValueCantinsert));
        assert_eq!(bump("n", "0"), Err(Status::DeltaEinval));
        assert_eq!(bump("n", "x"), Err(Status::DeltaEinval));
    }
}
