//! One connection's state and its handshake: HELLO, SASL (SCRAM-SHA512/256/1, PLAIN when
//! allowed), error map, SELECT_BUCKET, cluster config, collections. Data operations are in
//! `ops.rs`.

use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use settee_auth::scram::{Mechanism, ScramServer};
use settee_auth::{Account, LoginRefused, LOCKED_OUT, SCRAM_ITERATIONS};
use settee_engine::Bucket;
use settee_kv_codec::{encode_response, feature, opcode, status, Frame, FramingExtras};

use crate::access::BucketGrant;
use crate::ops::{self, OpCtx};
use crate::routing::ActiveBits;
use crate::{cluster, KvState};

/// HELLO features this connection negotiated.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Features {
    pub json: bool,
    pub xerror: bool,
    pub collections: bool,
    pub mutation_seqno: bool,
    pub unordered: bool,
    pub snappy: bool,
    pub select_bucket: bool,
    pub xattr: bool,
    /// AltRequestSupport: requests may use magic 0x08 and carry framing extras.
    pub alt_requests: bool,
    /// Duplex: the server may send requests (magic 0x82) on this connection.
    pub duplex: bool,
    /// Which cluster map pushes the client asked for (cluster nodes only, with Duplex).
    pub map_push: crate::map_push::MapPush,
}

/// What the connection loop does with a request.
pub(crate) enum Handled {
    /// Answered (or silently accepted) into the output buffer.
    Done,
    /// Answered later: the future yields the encoded reply bytes (empty for a quiet success).
    Later(BoxFuture<'static, Vec<u8>>),
    /// Flush the output and close the connection.
    Close,
    /// DCP_OPEN succeeded (its reply is in the output): the connection becomes a DCP producer
    /// once every earlier reply is written (`dcp::serve`).
    Dcp(crate::dcp::Opened),
}

pub(crate) struct Session {
    state: Arc<KvState>,
    pub features: Features,
    /// Who the connection authenticated as.
    account: Option<Account>,
    /// The client's address (failed logins are counted by it).
    peer: Option<IpAddr>,
    /// The client came through the TLS relay: SASL PLAIN is offered, as Couchbase Server
    /// offers it over TLS (the SDKs authenticate with PLAIN on `couchbases://`).
    tls: bool,
    /// The address the client connected to, as a cluster config names a host: `$HOST` in the
    /// configs served here is replaced by it, as kv_engine does (the Java DCP client takes
    /// hostnames literally).
    local_host: Option<String>,
    scram: Option<ScramServer>,
    bucket: Option<Arc<Bucket>>,
    /// What the user may do on `bucket`; set and cleared with it.
    grant: Option<Arc<BucketGrant>>,
    /// On a cluster node, which of `bucket`'s vbuckets are active here; set and cleared with
    /// it. `None` on a node without cluster flags: every vbucket is.
    route: Option<Arc<ActiveBits>>,
    /// The config revision last pushed to (or fetched by) the client, so a push is sent once.
    pub pushed_rev: u64,
    /// Admission to the heavy-request pool (one permit in order, more with
    /// UnorderedExecution); replaced when HELLO changes the mode.
    heavy_permits: Arc<tokio::sync::Semaphore>,
}

/// What a data operation needs of its connection, borrowed on the connection's own task.
#[derive(Clone, Copy)]
pub(crate) struct DataView<'a> {
    pub state: &'a Arc<KvState>,
    pub bucket: Option<&'a Arc<Bucket>>,
    pub grant: Option<&'a Arc<BucketGrant>>,
    pub route: Option<&'a Arc<ActiveBits>>,
    pub features: Features,
    pub heavy_permits: &'a Arc<tokio::sync::Semaphore>,
}

/// An owned [`DataView`], for data requests answered on another worker thread. Taken per batch
/// of data requests: only HELLO, SASL and SELECT_BUCKET change what it holds, and those are
/// never part of a batch.
#[derive(Clone)]
pub(crate) struct SharedView {
    state: Arc<KvState>,
    bucket: Option<Arc<Bucket>>,
    grant: Option<Arc<BucketGrant>>,
    route: Option<Arc<ActiveBits>>,
    features: Features,
    heavy_permits: Arc<tokio::sync::Semaphore>,
}

impl SharedView {
    pub fn heavy_permits(&self) -> &Arc<tokio::sync::Semaphore> {
        &self.heavy_permits
    }

    pub fn view(&self) -> DataView<'_> {
        DataView {
            state: &self.state,
            bucket: self.bucket.as_ref(),
            grant: self.grant.as_ref(),
            route: self.route.as_ref(),
            features: self.features,
            heavy_permits: &self.heavy_permits,
        }
    }

    pub fn state(&self) -> &Arc<KvState> {
        &self.state
    }
}

/// The only requests kv_engine runs on a connection that has not authenticated
/// (`Cookie::validateClientRequest`); every other one, known or not and whatever its shape, is
/// answered EACCESS: the cluster map names every node and port, and even NOOP or VERSION
/// would tell an unauthenticated client more than it needs.
const ALLOWED_BEFORE_AUTHENTICATION: [u8; 5] = [
    opcode::HELLO,
    opcode::SASL_LIST_MECHS,
    opcode::SASL_AUTH,
    opcode::SASL_STEP,
    opcode::GET_ERROR_MAP,
];

/// Whether `frame` is a data request: answered by [`handle_data`] from a [`DataView`] alone,
/// never reading or changing the connection's own state. (A connection batches them only once
/// authenticated: [`Session::handle`] refuses them before.)
pub(crate) fn is_data_request(frame: &Frame<'_>) -> bool {
    frame.magic.is_request()
        && frame.magic != settee_kv_codec::Magic::ServerRequest
        && ops::is_data_op(opcode::unquiet(frame.opcode).0)
}

/// The framing extras of a well-formed request, or `None` after answering why the request is
/// not acceptable: framing extras sent without HELLO's AltRequestSupport, a shape kv_engine
/// refuses (`settee_kv_codec::validate`), or framing extras that do not parse.
fn admit(features: &Features, frame: &Frame<'_>, out: &mut Vec<u8>) -> Option<FramingExtras> {
    let refused = if frame.magic.is_alt() && !features.alt_requests {
        Err("Framing extras (magic 0x08) need HELLO AltRequestSupport first")
    } else {
        settee_kv_codec::validate::request(frame)
    };
    if let Err(context) = refused {
        error_reply(
            out,
            features,
            frame.opcode,
            frame.opaque,
            status::EINVAL,
            context,
        );
        return None;
    }
    match FramingExtras::parse(frame.framing_extras) {
        Ok(framing) => Some(framing),
        Err(settee_kv_codec::FramingExtrasError::BadDurabilityLevel(_)) => {
            error_reply(
                out,
                features,
                frame.opcode,
                frame.opaque,
                status::DURABILITY_INVALID_LEVEL,
                "Invalid durability level",
            );
            None
        }
        Err(error) => {
            error_reply(
                out,
                features,
                frame.opcode,
                frame.opaque,
                status::UNKNOWN_FRAME_INFO,
                &error.to_string(),
            );
            None
        }
    }
}

/// Answers a data request (see [`is_data_request`]).
pub(crate) fn handle_data(
    view: DataView<'_>,
    frame: &Frame<'_>,
    bytes: &Bytes,
    out: &mut Vec<u8>,
) -> Handled {
    match admit(&view.features, frame, out) {
        Some(framing) => data_op(view, frame, bytes, framing, out),
        None => Handled::Done,
    }
}

/// Appends a reply to `frame`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reply(
    out: &mut Vec<u8>,
    frame_opcode: u8,
    opaque: u32,
    status: u16,
    cas: u64,
    datatype: u8,
    extras: &[u8],
    key: &[u8],
    value: &[u8],
) {
    encode_response(
        out,
        frame_opcode,
        status,
        opaque,
        cas,
        datatype,
        extras,
        key,
        &[value],
    );
}

/// An error reply; with Xerror negotiated it carries a JSON context, as Couchbase's do.
pub(crate) fn error_reply(
    out: &mut Vec<u8>,
    features: &Features,
    frame_opcode: u8,
    opaque: u32,
    code: u16,
    context: &str,
) {
    if features.xerror && !context.is_empty() {
        let body = serde_json::json!({"error": {"context": context}}).to_string();
        reply(
            out,
            frame_opcode,
            opaque,
            code,
            0,
            settee_kv_codec::datatype::JSON,
            &[],
            &[],
            body.as_bytes(),
        );
    } else {
        reply(out, frame_opcode, opaque, code, 0, 0, &[], &[], &[]);
    }
}

/// UNKNOWN_COLLECTION or UNKNOWN_SCOPE as kv_engine sends them: no extras, a JSON value with
/// the manifest uid (hex) beside the error context, so the client refreshes its ids. Without
/// Collections or XERROR negotiated the client cannot know these statuses: EINVAL instead.
pub(crate) fn unknown_reply(
    out: &mut Vec<u8>,
    features: &Features,
    frame_opcode: u8,
    opaque: u32,
    code: u16,
    manifest_uid: u64,
) {
    if !features.collections && !features.xerror {
        reply(
            out,
            frame_opcode,
            opaque,
            status::EINVAL,
            0,
            0,
            &[],
            &[],
            &[],
        );
        return;
    }
    let body = serde_json::json!({
        "error": {"context": "Unknown scope or collection in operation"},
        "manifest_uid": format!("{manifest_uid:x}"),
    })
    .to_string();
    reply(
        out,
        frame_opcode,
        opaque,
        code,
        0,
        settee_kv_codec::datatype::JSON,
        &[],
        &[],
        body.as_bytes(),
    );
}

impl Session {
    pub fn new(
        state: Arc<KvState>,
        peer: Option<IpAddr>,
        local: Option<IpAddr>,
        tls: bool,
    ) -> Session {
        Session {
            peer,
            tls,
            local_host: local.map(|ip| match ip {
                IpAddr::V4(v4) => v4.to_string(),
                IpAddr::V6(v6) => format!("[{v6}]"),
            }),
            heavy_permits: state.heavy.permits(false),
            state,
            features: Features::default(),
            account: None,
            scram: None,
            bucket: None,
            grant: None,
            route: None,
            pushed_rev: 0,
        }
    }

    pub fn handle(&mut self, frame: &Frame<'_>, bytes: &Bytes, out: &mut Vec<u8>) -> Handled {
        let features = self.features;
        let err = |out: &mut Vec<u8>, code: u16, context: &str| {
            error_reply(out, &features, frame.opcode, frame.opaque, code, context)
        };
        if !frame.magic.is_request() || frame.magic == settee_kv_codec::Magic::ServerRequest {
            // Replies to server pushes (none are sent yet) and stray responses are dropped.
            return Handled::Done;
        }
        if self.account.is_none() && !ALLOWED_BEFORE_AUTHENTICATION.contains(&frame.opcode) {
            // Before the request's shape is looked at, as kv_engine.
            err(out, status::EACCESS, "Authenticate first");
            return Handled::Done;
        }
        let Some(framing) = admit(&features, frame, out) else {
            return Handled::Done;
        };
        match frame.opcode {
            opcode::HELLO => self.hello(frame, out),
            opcode::NOOP => reply(out, frame.opcode, frame.opaque, 0, 0, 0, &[], &[], &[]),
            opcode::VERSION => reply(
                out,
                frame.opcode,
                frame.opaque,
                0,
                0,
                0,
                &[],
                &[],
                concat!("7.6.0-settee-", env!("CARGO_PKG_VERSION")).as_bytes(),
            ),
            opcode::QUIT => {
                reply(out, frame.opcode, frame.opaque, 0, 0, 0, &[], &[], &[]);
                return Handled::Close;
            }
            opcode::QUITQ => return Handled::Close,
            opcode::GET_ERROR_MAP => {
                let version = match frame.value {
                    [high, low] => u16::from_be_bytes([*high, *low]),
                    _ => {
                        err(out, status::EINVAL, "GET_ERROR_MAP takes a 2-byte version");
                        return Handled::Done;
                    }
                };
                let map = cluster::error_map(version).to_string();
                reply(
                    out,
                    frame.opcode,
                    frame.opaque,
                    0,
                    0,
                    0,
                    &[],
                    &[],
                    map.as_bytes(),
                );
            }
            opcode::SASL_LIST_MECHS => {
                let mut mechs = "SCRAM-SHA512 SCRAM-SHA256 SCRAM-SHA1".to_string();
                if self.state.config.allow_plain || self.tls {
                    mechs.push_str(" PLAIN");
                }
                reply(
                    out,
                    frame.opcode,
                    frame.opaque,
                    0,
                    0,
                    0,
                    &[],
                    &[],
                    mechs.as_bytes(),
                );
            }
            opcode::SASL_AUTH => self.sasl_auth(frame, out),
            opcode::SASL_STEP => self.sasl_step(frame, out),
            opcode::SELECT_BUCKET => self.select_bucket(frame, out),
            opcode::GET_CLUSTER_CONFIG => {
                let config = match &self.bucket {
                    Some(bucket) => cluster::bucket_config(&self.state, bucket),
                    None => cluster::node_config(&self.state),
                };
                let (_, rev) = cluster::config_version(&self.state, self.bucket.as_deref());
                self.pushed_rev = self.pushed_rev.max(rev);
                let config = match &self.local_host {
                    Some(host) => config.to_string().replace("$HOST", host),
                    None => config.to_string(),
                };
                reply(
                    out,
                    frame.opcode,
                    frame.opaque,
                    0,
                    0,
                    if self.features.json {
                        settee_kv_codec::datatype::JSON
                    } else {
                        0
                    },
                    &[],
                    &[],
                    config.as_bytes(),
                );
            }
            opcode::GET_COLLECTIONS_MANIFEST => match &self.bucket {
                None => err(out, status::NO_BUCKET, "No bucket selected"),
                Some(bucket) => reply(
                    out,
                    frame.opcode,
                    frame.opaque,
                    0,
                    0,
                    if self.features.json {
                        settee_kv_codec::datatype::JSON
                    } else {
                        0
                    },
                    &[],
                    &[],
                    bucket.manifest().to_kv_json().as_bytes(),
                ),
            },
            opcode::GET_COLLECTION_ID | opcode::GET_SCOPE_ID => self.collection_id(frame, out),
            opcode::DCP_OPEN => return crate::dcp::open(self.view(), frame, out),
            opcode::GET_ALL_VB_SEQNOS | opcode::DCP_GET_FAILOVER_LOG => {
                crate::dcp::info_request(self.view(), frame, out)
            }
            code if crate::dcp::is_dcp_opcode(code) => {
                err(out, status::EINVAL, "Not a DCP connection")
            }
            _ => return data_op(self.view(), frame, bytes, framing, out),
        }
        Handled::Done
    }

    fn hello(&mut self, frame: &Frame<'_>, out: &mut Vec<u8>) {
        let mut accepted: Vec<u16> = Vec::new();
        let mut features = Features::default();
        for pair in frame.value.chunks_exact(2) {
            let code = u16::from_be_bytes([pair[0], pair[1]]);
            let take = match code {
                feature::TCP_NODELAY | feature::SYNC_REPLICATION | feature::VATTR => true,
                feature::ALT_REQUEST_SUPPORT => {
                    features.alt_requests = true;
                    true
                }
                feature::XATTR => {
                    features.xattr = true;
                    true
                }
                feature::XERROR => {
                    features.xerror = true;
                    true
                }
                feature::SELECT_BUCKET => {
                    features.select_bucket = true;
                    true
                }
                feature::JSON => {
                    features.json = true;
                    true
                }
                feature::COLLECTIONS => {
                    features.collections = true;
                    true
                }
                feature::MUTATION_SEQNO => {
                    features.mutation_seqno = true;
                    true
                }
                feature::UNORDERED_EXECUTION => {
                    features.unordered = true;
                    true
                }
                feature::SNAPPY => {
                    features.snappy = true;
                    true
                }
                // Offered on cluster nodes only: a single node's map never changes.
                feature::DUPLEX
                | feature::CLUSTERMAP_CHANGE_NOTIFICATION
                | feature::CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF
                    if self.state.routing.is_clustered() =>
                {
                    true
                }
                _ => false,
            };
            if take && !accepted.contains(&code) {
                accepted.push(code);
            }
        }
        crate::map_push::negotiate(&mut accepted, &mut features);
        let accepted: Vec<u8> = accepted
            .iter()
            .flat_map(|code| code.to_be_bytes())
            .collect();
        // A HELLO replaces the whole feature set (kv_engine semantics).
        if features.unordered != self.features.unordered {
            self.heavy_permits = self.state.heavy.permits(features.unordered);
        }
        self.features = features;
        reply(
            out,
            frame.opcode,
            frame.opaque,
            0,
            0,
            0,
            &[],
            &[],
            &accepted,
        );
    }

    fn sasl_auth(&mut self, frame: &Frame<'_>, out: &mut Vec<u8>) {
        let features = self.features;
        self.scram = None;
        if frame.key == b"PLAIN" {
            if !self.state.config.allow_plain && !self.tls {
                error_reply(
                    out,
                    &features,
                    frame.opcode,
                    frame.opaque,
                    status::AUTH_ERROR,
                    "PLAIN is not enabled on this port",
                );
                return;
            }
            // authzid \0 authcid \0 password
            let mut parts = frame.value.splitn(3, |byte| *byte == 0);
            let (_, name, password) = (parts.next(), parts.next(), parts.next());
            let name = name.and_then(|name| std::str::from_utf8(name).ok());
            let password = password.and_then(|password| std::str::from_utf8(password).ok());
            let login = match (name, password) {
                (Some(name), Some(password)) => {
                    self.state
                        .users
                        .login(&self.state.engine, name, password, self.peer)
                }
                _ => Err(LoginRefused::Incorrect),
            };
            match login {
                Ok(account) => {
                    self.authenticated(account);
                    reply(
                        out,
                        frame.opcode,
                        frame.opaque,
                        0,
                        0,
                        0,
                        &[],
                        &[],
                        b"Authenticated",
                    );
                }
                Err(refused) => error_reply(
                    out,
                    &features,
                    frame.opcode,
                    frame.opaque,
                    status::AUTH_ERROR,
                    refusal_context(refused),
                ),
            }
            return;
        }
        let Some(mechanism) = Mechanism::from_name(frame.key) else {
            error_reply(
                out,
                &features,
                frame.opcode,
                frame.opaque,
                status::AUTH_ERROR,
                "Unsupported SASL mechanism",
            );
            return;
        };
        let engine = self.state.engine.clone();
        let users = self.state.users.clone();
        match ScramServer::start(
            mechanism,
            frame.value,
            |name| users.scram_secret(&engine, name, mechanism),
            SCRAM_ITERATIONS,
        ) {
            Ok((server, _)) if users.is_locked_out(&engine, server.username(), self.peer) => {
                // Refused before the proof, whatever it will be, as CouchDB refuses a locked
                // user's right password.
                error_reply(
                    out,
                    &features,
                    frame.opcode,
                    frame.opaque,
                    status::AUTH_ERROR,
                    LOCKED_OUT,
                )
            }
            Ok((server, server_first)) => {
                self.scram = Some(server);
                reply(
                    out,
                    frame.opcode,
                    frame.opaque,
                    status::AUTH_CONTINUE,
                    0,
                    0,
                    &[],
                    &[],
                    server_first.as_bytes(),
                );
            }
            Err(_) => error_reply(
                out,
                &features,
                frame.opcode,
                frame.opaque,
                status::AUTH_ERROR,
                "Malformed SCRAM message",
            ),
        }
    }

    fn sasl_step(&mut self, frame: &Frame<'_>, out: &mut Vec<u8>) {
        let features = self.features;
        let Some(server) = self.scram.take() else {
            error_reply(
                out,
                &features,
                frame.opcode,
                frame.opaque,
                status::AUTH_ERROR,
                "No SASL exchange in progress",
            );
            return;
        };
        if Mechanism::from_name(frame.key) != Some(server.mechanism()) {
            error_reply(
                out,
                &features,
                frame.opcode,
                frame.opaque,
                status::AUTH_ERROR,
                "SASL mechanism changed mid-exchange",
            );
            return;
        }
        let name = server.username().to_string();
        let finished = server.finish(frame.value).ok().and_then(|server_final| {
            // The account as it is now (it may have gone during the exchange).
            let account = self.state.users.account(&self.state.engine, &name)?;
            Some((server_final, account))
        });
        match finished {
            Some((server_final, account)) => {
                self.authenticated(account);
                reply(
                    out,
                    frame.opcode,
                    frame.opaque,
                    0,
                    0,
                    0,
                    &[],
                    &[],
                    server_final.as_bytes(),
                );
            }
            None => {
                self.state
                    .users
                    .login_failed(&self.state.engine, &name, self.peer);
                error_reply(
                    out,
                    &features,
                    frame.opcode,
                    frame.opaque,
                    status::AUTH_ERROR,
                    "Authentication failed",
                )
            }
        }
    }

    fn authenticated(&mut self, account: Account) {
        self.account = Some(account);
        // A new identity starts without a bucket, as on Couchbase Server.
        self.bucket = None;
        self.grant = None;
        self.route = None;
    }

    fn select_bucket(&mut self, frame: &Frame<'_>, out: &mut Vec<u8>) {
        let features = self.features;
        let allowed = std::str::from_utf8(frame.key)
            .ok()
            .and_then(|name| self.state.engine.bucket(name))
            .and_then(|bucket| {
                let account = self.account.as_ref()?;
                BucketGrant::new(&self.state, &account.name, &account.salt, bucket)
            });
        match allowed {
            Some(grant) => {
                self.route = self.state.routing.bits_for(grant.bucket().name());
                self.bucket = Some(grant.bucket().clone());
                self.grant = Some(Arc::new(grant));
                self.pushed_rev = 0;
                reply(out, frame.opcode, frame.opaque, 0, 0, 0, &[], &[], &[]);
            }
            None => {
                // Unknown and forbidden look the same, so bucket names do not leak.
                error_reply(
                    out,
                    &features,
                    frame.opcode,
                    frame.opaque,
                    status::EACCESS,
                    "No access to bucket",
                );
            }
        }
    }

    /// GET_COLLECTION_ID (`scope.collection`) and GET_SCOPE_ID (`scope`): the path in the key
    /// or the value; the reply's extras are the manifest uid (u64) and the id (u32).
    fn collection_id(&mut self, frame: &Frame<'_>, out: &mut Vec<u8>) {
        let features = self.features;
        let Some(bucket) = &self.bucket else {
            error_reply(
                out,
                &features,
                frame.opcode,
                frame.opaque,
                status::NO_BUCKET,
                "No bucket selected",
            );
            return;
        };
        let path = if frame.key.is_empty() {
            frame.value
        } else {
            frame.key
        };
        let manifest = bucket.manifest();
        let found = match std::str::from_utf8(path) {
            Err(_) => Err(settee_engine::EngineError::InvalidName(
                "a path is UTF-8".into(),
            )),
            Ok(path) if frame.opcode == opcode::GET_SCOPE_ID => {
                manifest.scope_id(path).map_err(Into::into)
            }
            Ok(path) => manifest.collection_id(path).map_err(Into::into),
        };
        match found {
            Ok(id) => {
                let mut extras = [0u8; 12];
                extras[..8].copy_from_slice(&manifest.uid().to_be_bytes());
                extras[8..].copy_from_slice(&id.to_be_bytes());
                reply(out, frame.opcode, frame.opaque, 0, 0, 0, &extras, &[], &[]);
            }
            Err(settee_engine::EngineError::UnknownScope { manifest_uid }) => unknown_reply(
                out,
                &features,
                frame.opcode,
                frame.opaque,
                status::UNKNOWN_SCOPE,
                manifest_uid,
            ),
            Err(settee_engine::EngineError::UnknownCollection { manifest_uid }) => unknown_reply(
                out,
                &features,
                frame.opcode,
                frame.opaque,
                status::UNKNOWN_COLLECTION,
                manifest_uid,
            ),
            Err(error) => error_reply(
                out,
                &features,
                frame.opcode,
                frame.opaque,
                status::EINVAL,
                &error.to_string(),
            ),
        }
    }

    pub fn view(&self) -> DataView<'_> {
        DataView {
            state: &self.state,
            bucket: self.bucket.as_ref(),
            grant: self.grant.as_ref(),
            route: self.route.as_ref(),
            features: self.features,
            heavy_permits: &self.heavy_permits,
        }
    }

    pub fn state(&self) -> &Arc<KvState> {
        &self.state
    }

    pub fn bucket(&self) -> Option<&Arc<Bucket>> {
        self.bucket.as_ref()
    }

    /// The host the client reached this node at (`$HOST` in configs), if known.
    pub fn local_host(&self) -> Option<&str> {
        self.local_host.as_deref()
    }

    /// Whether SASL succeeded on this connection.
    pub fn is_authenticated(&self) -> bool {
        self.account.is_some()
    }

    /// Whether the connection logged in as another node of the cluster (replica.md).
    pub fn is_node(&self) -> bool {
        self.account
            .as_ref()
            .is_some_and(|account| account.name == settee_auth::NODE_USER)
    }

    /// Whether `frame` may join a batch of data requests answered from a [`SharedView`]: a
    /// data request on an authenticated connection (before that, [`Session::handle`] refuses
    /// it).
    pub fn batches(&self, frame: &Frame<'_>) -> bool {
        self.is_authenticated() && is_data_request(frame)
    }

    /// A snapshot of what data requests need, for answering them on other threads.
    pub fn shared_view(&self) -> SharedView {
        SharedView {
            state: self.state.clone(),
            bucket: self.bucket.clone(),
            grant: self.grant.clone(),
            route: self.route.clone(),
            features: self.features,
            heavy_permits: self.heavy_permits.clone(),
        }
    }
}

/// The context of an AUTH_ERROR for a refused password login.
fn refusal_context(refused: LoginRefused) -> &'static str {
    match refused {
        LoginRefused::Incorrect => "Authentication failed",
        LoginRefused::LockedOut => LOCKED_OUT,
        LoginRefused::Conflicted => settee_auth::CONFLICTED_ACCOUNT,
    }
}

fn data_op(
    view: DataView<'_>,
    frame: &Frame<'_>,
    bytes: &Bytes,
    framing: FramingExtras,
    out: &mut Vec<u8>,
) -> Handled {
    let features = view.features;
    let (base, quiet) = opcode::unquiet(frame.opcode);
    if !ops::is_data_op(base) {
        error_reply(
            out,
            &features,
            frame.opcode,
            frame.opaque,
            status::UNKNOWN_COMMAND,
            "Unknown command",
        );
        return Handled::Done;
    }
    let Some(bucket) = view.bucket.cloned() else {
        error_reply(
            out,
            &features,
            frame.opcode,
            frame.opaque,
            status::NO_BUCKET,
            "No bucket selected",
        );
        return Handled::Done;
    };
    // On a cluster node, a vbucket whose active is another node (one atomic load), or any
    // while the node holds no serving lease (a failover may have moved it; lease.rs).
    let vbucket = frame.vbucket();
    if (vbucket >= bucket.vbuckets()
        || view.route.is_some_and(|route| !route.is_active(vbucket))
        || !view.state.engine.lease().holds())
        && base != opcode::STAT
    {
        crate::map_push::not_my_vbucket(view.state, &bucket, frame.opcode, frame.opaque, out);
        return Handled::Done;
    }
    let (collection, key) = if features.collections && !ops::is_keyless(base) {
        match settee_kv_codec::validate::collection_key(frame.key) {
            Ok((cid, key)) => (cid, key),
            Err(context) => {
                error_reply(
                    out,
                    &features,
                    frame.opcode,
                    frame.opaque,
                    status::EINVAL,
                    context,
                );
                return Handled::Done;
            }
        }
    } else {
        (0, frame.key)
    };
    if !bucket.is_collection_live(collection) {
        unknown_reply(
            out,
            &features,
            frame.opcode,
            frame.opaque,
            status::UNKNOWN_COLLECTION,
            bucket.manifest().uid(),
        );
        return Handled::Done;
    }
    // Every data request asks the node's one authorisation decision (access.rs).
    let operation = crate::access::operation_of(base, key);
    let writes = matches!(operation, settee_auth::Operation::WriteDocRaw(_));
    let allowed = view.grant.map_or(Err("No access to bucket"), |grant| {
        grant.check(view.state, operation)
    });
    if let Err(reason) = allowed {
        error_reply(
            out,
            &features,
            frame.opcode,
            frame.opaque,
            status::EACCESS,
            reason,
        );
        return Handled::Done;
    }
    let ctx = OpCtx {
        state: view.state.clone(),
        bucket,
        features,
        opcode: frame.opcode,
        base,
        quiet,
        opaque: frame.opaque,
        framing,
        heavy_permits: view.heavy_permits.clone(),
        collection,
        // Who writes, for validation functions: looked up for writes only.
        writer: match view.grant {
            Some(grant) if writes => grant.writer(view.state),
            _ => settee_engine::Writer::default(),
        },
    };
    ops::run(ctx, frame, key, bytes, out)
}
