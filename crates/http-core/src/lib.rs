//! The plumbing of settee's CouchDB door that every handler shares, split out of `settee-http`
//! when it reached 10k lines: one request ([`request::Req`]: decoded path, query, headers,
//! body within limits, the authenticated user), one error table ([`error::ApiError`]: status
//! and CouchDB error body), responses and streamed bodies ([`response`], [`streamed`]), JSONP
//! ([`jsonp`]), `Location` headers ([`location`]), authentication (Basic, cookie sessions:
//! [`auth`]), connection timeouts and refusals ([`connection`]), the TLS hook
//! ([`handshake`]), the door's settings ([`config`]), database names ([`names`]) and view query
//! parameters as CouchDB reads them ([`view_params`], moved here when `settee-http` neared 10k again).
//! `settee-http` re-exports each module under its old path; the handlers and the router stay
//! there.
#![deny(clippy::unwrap_used)]

pub mod auth;
pub mod auth_db;
pub mod auth_handlers;
pub mod config;
pub mod connection;
pub mod document_route;
pub mod error;
pub mod handshake;
pub mod jsonp;
pub mod location;
pub mod names;
pub mod request;
pub mod response;
pub mod scattered;
pub mod streamed;
pub mod view_params;

pub use config::HttpConfig;
