//! Sub-document request bodies and replies (kv_engine `docs/SubDocument.md`, "Wire Protocol
//! Format"; byte layout in `docs/format/kv-frames.md`). This module only splits bytes: which
//! opcode may carry which flags, and what a path means, is the server's business.

/// Sub-document opcodes: the single-path commands, and the spec opcodes inside multi-path ones.
pub mod op {
    /// Inside a multi-lookup: the whole document.
    pub const GET_DOC: u8 = 0x00;
    /// Inside a multi-mutation: replace the whole document.
    pub const SET_DOC: u8 = 0x01;
    /// Inside a multi-mutation: delete the whole document.
    pub const DELETE_DOC: u8 = 0x04;
    pub const GET: u8 = 0xc5;
    pub const EXISTS: u8 = 0xc6;
    pub const DICT_ADD: u8 = 0xc7;
    pub const DICT_UPSERT: u8 = 0xc8;
    pub const DELETE: u8 = 0xc9;
    pub const REPLACE: u8 = 0xca;
    pub const ARRAY_PUSH_LAST: u8 = 0xcb;
    pub const ARRAY_PUSH_FIRST: u8 = 0xcc;
    pub const ARRAY_INSERT: u8 = 0xcd;
    pub const ARRAY_ADD_UNIQUE: u8 = 0xce;
    pub const COUNTER: u8 = 0xcf;
    pub const MULTI_LOOKUP: u8 = 0xd0;
    pub const MULTI_MUTATION: u8 = 0xd1;
    pub const GET_COUNT: u8 = 0xd2;
    pub const REPLACE_BODY_WITH_XATTR: u8 = 0xd3;
}

/// Per-path flags.
pub mod path_flag {
    pub const MKDIR_P: u8 = 0x01;
    pub const XATTR: u8 = 0x04;
    pub const EXPAND_MACROS: u8 = 0x10;
    pub const BINARY_VALUE: u8 = 0x20;
}

/// Per-document flags (last extras byte).
pub mod doc_flag {
    pub const MKDOC: u8 = 0x01;
    pub const ADD: u8 = 0x02;
    pub const ACCESS_DELETED: u8 = 0x04;
    pub const CREATE_AS_DELETED: u8 = 0x08;
    pub const REVIVE: u8 = 0x10;
    pub const REPLICA_READ: u8 = 0x20;
}

/// Most specs in one multi-path command (kv_engine's default `subdoc_multi_max_paths`).
pub const MAX_SPECS: usize = 16;
/// Longest path accepted (kv_engine `SUBDOC_PATH_MAX_LENGTH`).
pub const MAX_PATH_BYTES: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubdocError {
    /// Extras of a length the command does not define.
    BadExtras,
    /// A spec, path or value runs past the end of the body.
    Truncated,
    /// No spec at all, or more than [`MAX_SPECS`].
    SpecCount,
}

/// Extras of a single-path command: `pathlen u16, path flags u8, [expiry u32], [doc flags u8]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SingleExtras {
    pub path_len: u16,
    pub path_flags: u8,
    pub expiry: Option<u32>,
    pub doc_flags: u8,
}

impl SingleExtras {
    pub fn parse(extras: &[u8]) -> Result<SingleExtras, SubdocError> {
        let (expiry, doc_flags) = match extras.len() {
            3 => (None, 0),
            4 => (None, extras[3]),
            7 => (Some(be_u32(&extras[3..7])), 0),
            8 => (Some(be_u32(&extras[3..7])), extras[7]),
            _ => return Err(SubdocError::BadExtras),
        };
        Ok(SingleExtras {
            path_len: u16::from_be_bytes([extras[0], extras[1]]),
            path_flags: extras[2],
            expiry,
            doc_flags,
        })
    }

    /// Splits a single-path command's value into (path, value).
    pub fn split<'a>(&self, value: &'a [u8]) -> Result<(&'a [u8], &'a [u8]), SubdocError> {
        let path_len = self.path_len as usize;
        if path_len > value.len() {
            return Err(SubdocError::Truncated);
        }
        Ok(value.split_at(path_len))
    }
}

/// Extras of a multi-path command: `[expiry u32], [doc flags u8]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MultiExtras {
    pub expiry: Option<u32>,
    pub doc_flags: u8,
}

impl MultiExtras {
    pub fn parse(extras: &[u8]) -> Result<MultiExtras, SubdocError> {
        Ok(match extras.len() {
            0 => MultiExtras::default(),
            1 => MultiExtras {
                expiry: None,
                doc_flags: extras[0],
            },
            4 => MultiExtras {
                expiry: Some(be_u32(extras)),
                doc_flags: 0,
            },
            5 => MultiExtras {
                expiry: Some(be_u32(&extras[..4])),
                doc_flags: extras[4],
            },
            _ => return Err(SubdocError::BadExtras),
        })
    }
}

/// One spec of a multi-path command, borrowed from the request. Lookup specs have no value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spec<'a> {
    pub op: u8,
    pub flags: u8,
    pub path: &'a [u8],
    pub value: &'a [u8],
}

/// The specs of one multi-path command, without allocating.
#[derive(Clone, Copy, Debug)]
pub struct Specs<'a> {
    items: [Spec<'a>; MAX_SPECS],
    len: usize,
}

impl<'a> Specs<'a> {
    /// Lookup specs: `op u8, flags u8, pathlen u16, path`.
    pub fn lookups(body: &'a [u8]) -> Result<Specs<'a>, SubdocError> {
        Specs::parse(body, false)
    }

    /// Mutation specs: `op u8, flags u8, pathlen u16, valuelen u32, path, value`.
    pub fn mutations(body: &'a [u8]) -> Result<Specs<'a>, SubdocError> {
        Specs::parse(body, true)
    }

    /// The one spec of a single-path command.
    pub fn single(spec: Spec<'a>) -> Specs<'a> {
        let mut items = [Spec::default(); MAX_SPECS];
        items[0] = spec;
        Specs { items, len: 1 }
    }

    fn parse(mut body: &'a [u8], mutation: bool) -> Result<Specs<'a>, SubdocError> {
        let header = if mutation { 8 } else { 4 };
        let mut specs = Specs {
            items: [Spec::default(); MAX_SPECS],
            len: 0,
        };
        while !body.is_empty() {
            if specs.len == MAX_SPECS {
                return Err(SubdocError::SpecCount);
            }
            if body.len() < header {
                return Err(SubdocError::Truncated);
            }
            let path_len = u16::from_be_bytes([body[2], body[3]]) as usize;
            let value_len = if mutation {
                be_u32(&body[4..8]) as usize
            } else {
                0
            };
            let end = header
                .checked_add(path_len)
                .and_then(|end| end.checked_add(value_len))
                .filter(|end| *end <= body.len())
                .ok_or(SubdocError::Truncated)?;
            specs.items[specs.len] = Spec {
                op: body[0],
                flags: body[1],
                path: &body[header..header + path_len],
                value: &body[header + path_len..end],
            };
            specs.len += 1;
            body = &body[end..];
        }
        if specs.len == 0 {
            return Err(SubdocError::SpecCount);
        }
        Ok(specs)
    }

    pub fn as_slice(&self) -> &[Spec<'a>] {
        &self.items[..self.len]
    }
}

/// Appends one multi-lookup result: `status u16, vlen u32, value`.
pub fn put_lookup_result(out: &mut Vec<u8>, status: u16, value: &[u8]) {
    out.extend_from_slice(&status.to_be_bytes());
    out.extend_from_slice(&(value.len() as u32).to_be_bytes());
    out.extend_from_slice(value);
}

/// Appends one multi-mutation result: `index u8, status u16`, then `vlen u32, value` on
/// success (successful specs are listed only when they return a value).
pub fn put_mutation_result(out: &mut Vec<u8>, index: u8, status: u16, value: Option<&[u8]>) {
    out.push(index);
    out.extend_from_slice(&status.to_be_bytes());
    if let Some(value) = value {
        out.extend_from_slice(&(value.len() as u32).to_be_bytes());
        out.extend_from_slice(value);
    }
}

/// Appends a lookup spec as a client sends it (for `settee bench` and tests).
pub fn put_lookup_spec(out: &mut Vec<u8>, op: u8, flags: u8, path: &[u8]) {
    out.push(op);
    out.push(flags);
    out.extend_from_slice(&(path.len() as u16).to_be_bytes());
    out.extend_from_slice(path);
}

/// Appends a mutation spec as a client sends it (for `settee bench` and tests).
pub fn put_mutation_spec(out: &mut Vec<u8>, op: u8, flags: u8, path: &[u8], value: &[u8]) {
    out.push(op);
    out.push(flags);
    out.extend_from_slice(&(path.len() as u16).to_be_bytes());
    out.extend_from_slice(&(value.len() as u32).to_be_bytes());
    out.extend_from_slice(path);
    out.extend_from_slice(value);
}

fn be_u32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extras_of_every_defined_length() {
        assert_eq!(
            SingleExtras::parse(&[0, 5, path_flag::MKDIR_P]),
            Ok(SingleExtras {
                path_len: 5,
                path_flags: 1,
                expiry: None,
                doc_flags: 0
            })
        );
        let full = SingleExtras::parse(&[0, 5, 0, 0, 0, 0, 9, doc_flag::MKDOC]).unwrap();
        assert_eq!((full.expiry, full.doc_flags), (Some(9), doc_flag::MKDOC));
        assert_eq!(SingleExtras::parse(&[0, 5]), Err(SubdocError::BadExtras));
        assert_eq!(
            SingleExtras::parse(&[0, 5, 0]).unwrap().split(b"abc"),
            Err(SubdocError::Truncated)
        );
        assert_eq!(
            SingleExtras::parse(&[0, 2, 0]).unwrap().split(b"abc"),
            Ok((&b"ab"[..], &b"c"[..]))
        );
        assert_eq!(MultiExtras::parse(&[doc_flag::ADD]).unwrap().doc_flags, 2);
        assert_eq!(
            MultiExtras::parse(&[0, 0, 1, 0, 4]),
            Ok(MultiExtras {
                expiry: Some(256),
                doc_flags: 4
            })
        );
        assert_eq!(MultiExtras::parse(&[0, 0]), Err(SubdocError::BadExtras));
    }

    #[test]
    fn specs_round_trip_and_bad_bodies_are_refused() {
        let mut body = Vec::new();
        put_lookup_spec(&mut body, op::GET, path_flag::XATTR, b"_sync.rev");
        put_lookup_spec(&mut body, op::GET_DOC, 0, b"");
        let specs = Specs::lookups(&body).unwrap();
        assert_eq!(specs.as_slice().len(), 2);
        assert_eq!(specs.as_slice()[0].path, b"_sync.rev");
        assert_eq!(specs.as_slice()[0].flags, path_flag::XATTR);
        assert_eq!(specs.as_slice()[1].op, op::GET_DOC);

        let mut body = Vec::new();
        put_mutation_spec(&mut body, op::DICT_UPSERT, 0, b"a.b", b"[1,2]");
        put_mutation_spec(&mut body, op::DELETE, 0, b"c", b"");
        let specs = Specs::mutations(&body).unwrap();
        assert_eq!(specs.as_slice()[0].value, b"[1,2]");
        assert_eq!(specs.as_slice()[1].path, b"c");

        assert_eq!(
            Specs::mutations(&body[..body.len() - 1]).err(),
            Some(SubdocError::Truncated)
        );
        assert_eq!(Specs::lookups(b"").err(), Some(SubdocError::SpecCount));
        assert_eq!(
            Specs::lookups(&[0xc5, 0]).err(),
            Some(SubdocError::Truncated)
        );
        let mut many = Vec::new();
        for _ in 0..=MAX_SPECS {
            put_lookup_spec(&mut many, op::EXISTS, 0, b"x");
        }
        assert_eq!(Specs::lookups(&many).err(), Some(SubdocError::SpecCount));
        assert_eq!(
            Specs::lookups(&many[..many.len() - 5])
                .unwrap()
                .as_slice()
                .len(),
            MAX_SPECS
        );
    }

    #[test]
    fn results_encode_as_documented() {
        let mut out = Vec::new();
        put_lookup_result(&mut out, 0xc0, b"");
        put_lookup_result(&mut out, 0, b"42");
        assert_eq!(out, [0, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, b'4', b'2']);
        let mut out = Vec::new();
        put_mutation_result(&mut out, 3, 0xc9, None);
        put_mutation_result(&mut out, 1, 0, Some(b"7"));
        assert_eq!(out, [3, 0, 0xc9, 1, 0, 0, 0, 0, 0, 1, b'7']);
    }
}
