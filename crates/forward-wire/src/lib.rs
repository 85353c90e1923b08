//! The bodies of the cluster transport's forwarded HTTP document requests (kind 0x20
//! `ForwardHttp`), whole-bucket requests for one node's vbuckets (0x22 `ScatterHttp`),
//! requests for another member's node API (0x23 `NodeHttp`, a `ForwardHttp` body) and their
//! replies (0x21 `ForwardHttpReply`), as
//! docs/format/cluster-transport.md specifies them; and, in [`moves`], the bodies of a
//! rebalance's vbucket moves (0x40 ..= 0x47, docs/format/rebalance.md).
//!
//! Plain data and a pure codec, shared by the HTTP door (which builds a [`ForwardHttp`] and
//! turns a [`ForwardHttpReply`] back into a response), the cluster transport (which frames
//! them) and the fuzz target. Nothing here knows HTTP's semantics or the cluster map: a method,
//! a target, headers and a body are strings and bytes. Decoding never panics and refuses
//! anything past the bounds below.
#![deny(clippy::unwrap_used)]

pub mod moves;

pub const KIND_FORWARD_HTTP: u8 = 0x20;
pub const KIND_FORWARD_HTTP_REPLY: u8 = 0x21;
pub const KIND_SCATTER_HTTP: u8 = 0x22;
/// A `/_node/_local/...` request for the member its `bucket` names (a [`ForwardHttp`] body).
pub const KIND_NODE_HTTP: u8 = 0x23;

/// Vbuckets one ScatterHttp names at most (a bucket's most).
pub const SCATTER_VBUCKETS_MAX: usize = 1_024;

/// Bytes of a method name at most (`COPY`, `DELETE`; only `A-Z`).
pub const METHOD_BYTES_MAX: usize = 16;
/// Bytes of a request target (path and query) or of one header value at most.
pub const TARGET_BYTES_MAX: usize = 65_536;
pub const HEADER_VALUE_BYTES_MAX: usize = 65_536;
/// Headers of one request or reply at most.
pub const HEADERS_MAX: usize = 256;
/// Roles of the forwarded identity at most.
pub const ROLES_MAX: usize = 1_024;
/// Bytes of a bucket name at most (the cluster map's limit).
pub const BUCKET_BYTES_MAX: usize = 100;

/// How the front node knew who the user is (CouchDB's `authenticated` in `/_session`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthMethod {
    None,
    /// HTTP Basic (`"default"` in CouchDB's words).
    Basic,
    Cookie,
}

/// The user the front node authenticated: the active runs the request as this user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// `None`: anonymous.
    pub name: Option<String>,
    pub roles: Vec<String>,
    pub auth: AuthMethod,
}

/// A document request for the vbucket's active node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardHttp {
    /// The sender's map revision when it chose the target.
    pub revision: u64,
    /// The epoch of the vbucket's entry in that map.
    pub epoch: u64,
    pub bucket: String,
    pub vbucket: u16,
    pub method: String,
    /// Path and query as the client sent them (percent-encoding kept).
    pub target: String,
    pub identity: Identity,
    /// Names in lower case, as hyper keeps them; values as bytes.
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

/// A whole-bucket request for one node, answered for the vbuckets it names (each with the
/// epoch of its entry in the sender's map), which must be active there. The inner request's
/// `epoch` and `vbucket` are not sent (they read back as 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScatterHttp {
    /// `(vbucket, epoch)`, ascending, no repeats, 1 ..= [`SCATTER_VBUCKETS_MAX`].
    pub vbuckets: Vec<(u16, u64)>,
    /// The design document the request runs (a view query), as the front node read it: its
    /// JSON, `_id` and `_rev` included. Receivers use it in place of their own copy.
    pub design: Option<Vec<u8>>,
    pub request: ForwardHttp,
}

/// The answer the active gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardHttpReply {
    pub status: u16,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("the body ends early")]
    Short,
    #[error("{0} bytes after the end of the body")]
    Trailing(usize),
    #[error("{0}")]
    Invalid(&'static str),
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError::Short);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        let bytes = self.take(2)?;
        Ok(u16::from_be_bytes([bytes[0], bytes[1]]))
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        let bytes = self.take(4)?;
        Ok(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(bytes))
    }

    /// `len u16 | UTF-8`.
    fn str(&mut self) -> Result<String, DecodeError> {
        let len = usize::from(self.u16()?);
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::Invalid("a string is not UTF-8"))
    }

    /// `len u32 | bytes`, refused past `max`.
    fn long(&mut self, max: usize) -> Result<&'a [u8], DecodeError> {
        let len = self.u32()? as usize;
        if len > max {
            return Err(DecodeError::Invalid("a field is longer than its limit"));
        }
        self.take(len)
    }

    fn headers(&mut self) -> Result<Vec<(String, Vec<u8>)>, DecodeError> {
        let count = usize::from(self.u16()?);
        if count > HEADERS_MAX {
            return Err(DecodeError::Invalid("too many headers"));
        }
        let mut headers = Vec::with_capacity(count);
        for _ in 0..count {
            let name = self.str()?;
            if name.is_empty() {
                return Err(DecodeError::Invalid("an empty header name"));
            }
            let value = self.long(HEADER_VALUE_BYTES_MAX)?.to_vec();
            headers.push((name, value));
        }
        Ok(headers)
    }

    fn end(&self) -> Result<(), DecodeError> {
        match self.0.len() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    /// Strings longer than a u16 are cut at the limit rather than announced with a wrong
    /// length; [`ForwardHttp::check`] refuses them before encoding.
    fn str(&mut self, text: &str) {
        let bytes = &text.as_bytes()[..text.len().min(usize::from(u16::MAX))];
        self.0
            .extend_from_slice(&(bytes.len() as u16).to_be_bytes());
        self.0.extend_from_slice(bytes);
    }

    fn long(&mut self, bytes: &[u8]) {
        let bytes = &bytes[..bytes.len().min(u32::MAX as usize)];
        self.0
            .extend_from_slice(&(bytes.len() as u32).to_be_bytes());
        self.0.extend_from_slice(bytes);
    }

    fn headers(&mut self, headers: &[(String, Vec<u8>)]) {
        let headers = &headers[..headers.len().min(HEADERS_MAX)];
        self.0
            .extend_from_slice(&(headers.len() as u16).to_be_bytes());
        for (name, value) in headers {
            self.str(name);
            self.long(value);
        }
    }
}

/// Why a request or reply cannot be sent as it is (checked before encoding).
fn check_headers(headers: &[(String, Vec<u8>)]) -> Result<(), DecodeError> {
    if headers.len() > HEADERS_MAX {
        return Err(DecodeError::Invalid("too many headers"));
    }
    let fits = |(name, value): &(String, Vec<u8>)| {
        !name.is_empty()
            && name.len() <= usize::from(u16::MAX)
            && value.len() <= HEADER_VALUE_BYTES_MAX
    };
    if !headers.iter().all(fits) {
        return Err(DecodeError::Invalid("a header is longer than its limit"));
    }
    Ok(())
}

fn headers_len(headers: &[(String, Vec<u8>)]) -> usize {
    2 + headers
        .iter()
        .map(|(name, value)| 2 + name.len() + 4 + value.len())
        .sum::<usize>()
}

fn check_method(method: &str) -> Result<(), DecodeError> {
    if method.is_empty()
        || method.len() > METHOD_BYTES_MAX
        || !method.bytes().all(|byte| byte.is_ascii_uppercase())
    {
        return Err(DecodeError::Invalid("a method is 1 to 16 capital letters"));
    }
    Ok(())
}

fn check_target(target: &str) -> Result<(), DecodeError> {
    if !target.starts_with('/') || target.len() > TARGET_BYTES_MAX {
        return Err(DecodeError::Invalid(
            "a target starts with / and is at most 65,536 bytes",
        ));
    }
    Ok(())
}

impl ForwardHttp {
    /// Whether this request can be encoded as it is (the decoder's bounds).
    pub fn check(&self) -> Result<(), DecodeError> {
        if self.bucket.is_empty() || self.bucket.len() > BUCKET_BYTES_MAX {
            return Err(DecodeError::Invalid("a bucket name is 1 to 100 bytes"));
        }
        check_method(&self.method)?;
        check_target(&self.target)?;
        let identity = &self.identity;
        if identity.roles.len() > ROLES_MAX
            || identity
                .roles
                .iter()
                .chain(identity.name.as_ref())
                .any(|text| text.len() > usize::from(u16::MAX))
        {
            return Err(DecodeError::Invalid("an identity past its limits"));
        }
        check_headers(&self.headers)?;
        if self.body.len() > u32::MAX as usize {
            return Err(DecodeError::Invalid("a body past 4 GiB"));
        }
        Ok(())
    }

    /// The length of [`ForwardHttp::encode`]'s bytes, without encoding (a request within
    /// [`ForwardHttp::check`]'s bounds).
    pub fn encoded_len(&self) -> usize {
        let identity = &self.identity;
        let roles: usize = identity.roles.iter().map(|role| 2 + role.len()).sum();
        let name = identity.name.as_ref().map_or(0, |name| 2 + name.len());
        let fixed = 8 + 8 + 2 + 2 + 2 + 4 + 1 + 1 + 2 + 4;
        fixed
            + self.bucket.len()
            + self.method.len()
            + self.target.len()
            + name
            + roles
            + headers_len(&self.headers)
            + self.body.len()
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(self.encoded_len()));
        w.0.extend_from_slice(&self.revision.to_be_bytes());
        w.0.extend_from_slice(&self.epoch.to_be_bytes());
        w.str(&self.bucket);
        w.0.extend_from_slice(&self.vbucket.to_be_bytes());
        w.str(&self.method);
        w.long(self.target.as_bytes());
        match &self.identity.name {
            Some(name) => {
                w.0.push(1);
                w.str(name);
            }
            None => w.0.push(0),
        }
        w.0.push(match self.identity.auth {
            AuthMethod::None => 0,
            AuthMethod::Basic => 1,
            AuthMethod::Cookie => 2,
        });
        let roles = &self.identity.roles[..self.identity.roles.len().min(ROLES_MAX)];
        w.0.extend_from_slice(&(roles.len() as u16).to_be_bytes());
        for role in roles {
            w.str(role);
        }
        w.headers(&self.headers);
        w.long(&self.body);
        w.0
    }

    pub fn decode(body: &[u8]) -> Result<ForwardHttp, DecodeError> {
        let mut r = Reader(body);
        let revision = r.u64()?;
        let epoch = r.u64()?;
        let bucket = r.str()?;
        if bucket.is_empty() || bucket.len() > BUCKET_BYTES_MAX {
            return Err(DecodeError::Invalid("a bucket name is 1 to 100 bytes"));
        }
        let vbucket = r.u16()?;
        let method = r.str()?;
        check_method(&method)?;
        let target = String::from_utf8(r.long(TARGET_BYTES_MAX)?.to_vec())
            .map_err(|_| DecodeError::Invalid("a target is not UTF-8"))?;
        check_target(&target)?;
        let name = match r.u8()? {
            0 => None,
            1 => Some(r.str()?),
            _ => return Err(DecodeError::Invalid("an identity's name flag is 0 or 1")),
        };
        let auth = match r.u8()? {
            0 => AuthMethod::None,
            1 => AuthMethod::Basic,
            2 => AuthMethod::Cookie,
            _ => return Err(DecodeError::Invalid("an unknown authentication method")),
        };
        let role_count = usize::from(r.u16()?);
        if role_count > ROLES_MAX {
            return Err(DecodeError::Invalid("too many roles"));
        }
        let mut roles = Vec::with_capacity(role_count);
        for _ in 0..role_count {
            roles.push(r.str()?);
        }
        let headers = r.headers()?;
        let body = r.long(u32::MAX as usize)?.to_vec();
        r.end()?;
        Ok(ForwardHttp {
            revision,
            epoch,
            bucket,
            vbucket,
            method,
            target,
            identity: Identity { name, roles, auth },
            headers,
            body,
        })
    }
}

fn check_vbuckets(vbuckets: &[(u16, u64)]) -> Result<(), DecodeError> {
    if vbuckets.is_empty() || vbuckets.len() > SCATTER_VBUCKETS_MAX {
        return Err(DecodeError::Invalid("a scatter names 1 to 1,024 vbuckets"));
    }
    if vbuckets.windows(2).any(|pair| pair[0].0 >= pair[1].0) {
        return Err(DecodeError::Invalid(
            "a scatter's vbuckets are ascending, without repeats",
        ));
    }
    Ok(())
}

impl ScatterHttp {
    pub fn check(&self) -> Result<(), DecodeError> {
        check_vbuckets(&self.vbuckets)?;
        if self.request.epoch != 0 || self.request.vbucket != 0 {
            return Err(DecodeError::Invalid(
                "a scatter's request names no vbucket of its own",
            ));
        }
        self.request.check()
    }

    pub fn encoded_len(&self) -> usize {
        let design = self.design.as_ref().map_or(0, |design| 4 + design.len());
        2 + self.vbuckets.len() * 10 + 1 + design + self.request.encoded_len()
    }

    pub fn encode(&self) -> Vec<u8> {
        let vbuckets = &self.vbuckets[..self.vbuckets.len().min(SCATTER_VBUCKETS_MAX)];
        let mut out = Vec::with_capacity(self.encoded_len());
        out.extend_from_slice(&(vbuckets.len() as u16).to_be_bytes());
        for (vbucket, epoch) in vbuckets {
            out.extend_from_slice(&vbucket.to_be_bytes());
            out.extend_from_slice(&epoch.to_be_bytes());
        }
        match &self.design {
            Some(design) => {
                out.push(1);
                out.extend_from_slice(&(design.len() as u32).to_be_bytes());
                out.extend_from_slice(design);
            }
            None => out.push(0),
        }
        out.extend_from_slice(&self.request.encode());
        out
    }

    pub fn decode(body: &[u8]) -> Result<ScatterHttp, DecodeError> {
        let mut r = Reader(body);
        let count = usize::from(r.u16()?);
        if count == 0 || count > SCATTER_VBUCKETS_MAX {
            return Err(DecodeError::Invalid("a scatter names 1 to 1,024 vbuckets"));
        }
        let mut vbuckets = Vec::with_capacity(count);
        for _ in 0..count {
            vbuckets.push((r.u16()?, r.u64()?));
        }
        check_vbuckets(&vbuckets)?;
        let design = match r.u8()? {
            0 => None,
            1 => Some(r.long(usize::MAX)?.to_vec()),
            _ => return Err(DecodeError::Invalid("has_design is 0 or 1")),
        };
        let request = ForwardHttp::decode(r.0)?;
        if request.epoch != 0 || request.vbucket != 0 {
            return Err(DecodeError::Invalid(
                "a scatter's request names no vbucket of its own",
            ));
        }
        Ok(ScatterHttp {
            vbuckets,
            design,
            request,
        })
    }
}

impl ForwardHttpReply {
    pub fn check(&self) -> Result<(), DecodeError> {
        if !(100..=599).contains(&self.status) {
            return Err(DecodeError::Invalid("a status is 100 to 599"));
        }
        check_headers(&self.headers)?;
        if self.body.len() > u32::MAX as usize {
            return Err(DecodeError::Invalid("a body past 4 GiB"));
        }
        Ok(())
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(64 + self.body.len()));
        w.0.extend_from_slice(&self.status.to_be_bytes());
        w.headers(&self.headers);
        w.long(&self.body);
        w.0
    }

    pub fn decode(body: &[u8]) -> Result<ForwardHttpReply, DecodeError> {
        let mut r = Reader(body);
        let status = r.u16()?;
        if !(100..=599).contains(&status) {
            return Err(DecodeError::Invalid("a status is 100 to 599"));
        }
        let headers = r.headers()?;
        let body = r.long(u32::MAX as usize)?.to_vec();
        r.end()?;
        Ok(ForwardHttpReply {
            status,
            headers,
            body,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ForwardHttp {
        ForwardHttp {
            revision: 42,
            epoch: 17,
            bucket: "db".into(),
            vbucket: 528,
            method: "PUT".into(),
            target: "/db/hello?new_edits=true".into(),
            identity: Identity {
                name: Some("alice".into()),
                roles: vec!["reader".into(), "_admin".into()],
                auth: AuthMethod::Cookie,
            },
            headers: vec![
                ("content-type".into(), b"application/json".to_vec()),
                ("if-match".into(), b"1-abc".to_vec()),
            ],
            body: br#"{"a":1}"#.to_vec(),
        }
    }

    #[test]
    fn a_request_and_a_reply_round_trip() {
        let request = request();
        request.check().expect("within bounds");
        assert_eq!(request.encoded_len(), request.encode().len());
        assert_eq!(ForwardHttp::decode(&request.encode()), Ok(request));
        let anonymous = ForwardHttp {
            identity: Identity {
                name: None,
                roles: vec![],
                auth: AuthMethod::None,
            },
            body: vec![],
            headers: vec![],
            ..self::tests::request()
        };
        assert_eq!(anonymous.encoded_len(), anonymous.encode().len());
        assert_eq!(ForwardHttp::decode(&anonymous.encode()), Ok(anonymous));
        let reply = ForwardHttpReply {
            status: 409,
            headers: vec![("content-type".into(), b"application/json".to_vec())],
            body: br#"{"error":"conflict"}"#.to_vec(),
        };
        reply.check().expect("within bounds");
        assert_eq!(ForwardHttpReply::decode(&reply.encode()), Ok(reply));
    }

    fn scatter() -> ScatterHttp {
        ScatterHttp {
            vbuckets: vec![(0, 3), (5, 9), (1023, 1)],
            design: None,
            request: ForwardHttp {
                epoch: 0,
                vbucket: 0,
                method: "GET".into(),
                target: "/db/_all_docs?limit=10".into(),
                ..request()
            },
        }
    }

    #[test]
    fn a_scatter_round_trips_and_its_vbuckets_are_checked() {
        let scatter = scatter();
        scatter.check().expect("within bounds");
        assert_eq!(scatter.encoded_len(), scatter.encode().len());
        assert_eq!(ScatterHttp::decode(&scatter.encode()), Ok(scatter.clone()));
        let bytes = scatter.encode();
        for cut in 0..bytes.len() {
            assert!(ScatterHttp::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for vbuckets in [vec![], vec![(4, 1), (4, 2)], vec![(5, 1), (4, 1)]] {
            let bad = ScatterHttp {
                vbuckets,
                ..self::tests::scatter()
            };
            assert!(bad.check().is_err());
            assert!(ScatterHttp::decode(&bad.encode()).is_err());
        }
        let own_vbucket = ScatterHttp {
            request: request(),
            ..self::tests::scatter()
        };
        assert!(own_vbucket.check().is_err());
        assert!(ScatterHttp::decode(&own_vbucket.encode()).is_err());
        let with_design = ScatterHttp {
            design: Some(br#"{"_id":"_design/d","_rev":"1-a","views":{}}"#.to_vec()),
            ..self::tests::scatter()
        };
        let bytes = with_design.encode();
        assert_eq!(with_design.encoded_len(), bytes.len());
        assert_eq!(ScatterHttp::decode(&bytes), Ok(with_design));
        for cut in 0..bytes.len() {
            assert!(ScatterHttp::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn every_cut_of_a_request_is_refused_and_so_are_trailing_bytes() {
        let bytes = request().encode();
        for cut in 0..bytes.len() {
            assert!(ForwardHttp::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(ForwardHttp::decode(&longer), Err(DecodeError::Trailing(1)));
    }

    /// What the fuzz target `forward_frames` checks, on stable: every byte of a valid request
    /// and reply flipped; whatever still decodes is within bounds and re-encodes to itself.
    #[test]
    fn flipped_bytes_never_panic_and_what_decodes_re_encodes() {
        let reply = ForwardHttpReply {
            status: 201,
            headers: vec![("etag".into(), b"\"1-a\"".to_vec())],
            body: b"{}".to_vec(),
        };
        let with_design = ScatterHttp {
            design: Some(b"{}".to_vec()),
            ..scatter()
        };
        for valid in [
            request().encode(),
            reply.encode(),
            scatter().encode(),
            with_design.encode(),
        ] {
            for index in 0..valid.len() {
                for flip in [0x01, 0x80, 0xff] {
                    let mut bytes = valid.clone();
                    bytes[index] ^= flip;
                    if let Ok(request) = ForwardHttp::decode(&bytes) {
                        assert_eq!(request.check(), Ok(()));
                        assert_eq!(request.encode(), bytes);
                    }
                    if let Ok(reply) = ForwardHttpReply::decode(&bytes) {
                        assert_eq!(reply.check(), Ok(()));
                        assert_eq!(reply.encode(), bytes);
                    }
                    if let Ok(scatter) = ScatterHttp::decode(&bytes) {
                        assert_eq!(scatter.check(), Ok(()));
                        assert_eq!(scatter.encode(), bytes);
                    }
                }
            }
        }
    }

    #[test]
    fn values_past_their_bounds_are_refused_both_ways() {
        let lower_case = ForwardHttp {
            method: "get".into(),
            ..request()
        };
        assert!(lower_case.check().is_err());
        assert!(ForwardHttp::decode(&lower_case.encode()).is_err());
        let relative = ForwardHttp {
            target: "db/x".into(),
            ..request()
        };
        assert!(relative.check().is_err());
        assert!(ForwardHttp::decode(&relative.encode()).is_err());
        let no_bucket = ForwardHttp {
            bucket: String::new(),
            ..request()
        };
        assert!(ForwardHttp::decode(&no_bucket.encode()).is_err());
        let many_headers = ForwardHttpReply {
            status: 200,
            headers: vec![("x".into(), vec![]); HEADERS_MAX + 1],
            body: vec![],
        };
        assert!(many_headers.check().is_err());
        // A count past the limit, written by hand: refused before anything is allocated.
        let mut bytes = 200u16.to_be_bytes().to_vec();
        bytes.extend_from_slice(&u16::MAX.to_be_bytes());
        assert_eq!(
            ForwardHttpReply::decode(&bytes),
            Err(DecodeError::Invalid("too many headers"))
        );
        let mut bad_status = ForwardHttpReply {
            status: 200,
            headers: vec![],
            body: vec![],
        }
        .encode();
        bad_status[..2].copy_from_slice(&700u16.to_be_bytes());
        assert!(ForwardHttpReply::decode(&bad_status).is_err());
    }
}
