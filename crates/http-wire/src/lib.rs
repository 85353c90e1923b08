//! The HTTP details of settee's CouchDB door that need no database, each as CouchDB 3.5 does
//! it (docs/compatibility.md): percent-encoding the bytes of a request target hyper would
//! refuse ([`request_line`]), decoding `Content-Encoding: gzip` request bodies within a limit
//! ([`encoding`]), `Range` requests on attachments ([`range`]), cross-origin requests
//! ([`cors`]), MIME multipart bodies (`multipart/related` documents with attachments,
//! `multipart/form-data` uploads: [`multipart`]) and the `/_uuids` algorithms ([`uuids`]).
//! Each is a pure function or a small state machine over bytes and headers, tested and fuzzed
//! on its own; `settee-http` applies them to requests and answers.
#![deny(clippy::unwrap_used)]

pub mod attachment_gzip;
pub mod cors;
pub mod couch_seq;
pub mod encoding;
pub mod multipart;
pub mod range;
pub mod request_line;
pub mod uuids;
