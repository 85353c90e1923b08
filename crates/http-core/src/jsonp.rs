//! JSONP as CouchDB answers it when `[chttpd] allow_jsonp` is true: a request with
//! `?callback=name` gets its JSON answer (errors and streamed answers too) as
//! `/* CouchDB */name(...);` with `Content-Type: application/javascript`. A callback name
//! other than letters, digits, `.`, `_`, `[` and `]` is 400 `invalid_callback`. Off, the
//! parameter is ignored.

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};

use crate::error::ApiError;
use crate::response::{self, HttpResponse};

/// What the request's `callback` asks for, when JSONP is on and the callback is not empty.
pub enum Callback {
    Valid(String),
    Invalid,
}

pub fn callback(settings: &settee_node_config::Settings, query: Option<&str>) -> Option<Callback> {
    if !settings.allow_jsonp {
        return None;
    }
    let name = form_urlencoded::parse(query?.as_bytes())
        .filter(|(key, _)| key == "callback")
        .last()?
        .1
        .into_owned();
    if name.is_empty() {
        return None;
    }
    let allowed = |byte: u8| byte.is_ascii_alphanumeric() || b"._[]".contains(&byte);
    Some(if name.bytes().all(allowed) {
        Callback::Valid(name)
    } else {
        Callback::Invalid
    })
}

/// The answer wrapped in the callback; answers that are not JSON (attachments) stay as they
/// are, as in CouchDB, whose JSONP lives in its JSON senders.
pub fn wrap(response: HttpResponse, callback: &Callback) -> HttpResponse {
    let name = match callback {
        Callback::Invalid => {
            return response::error(&ApiError::BadRequest("invalid_callback".into()))
        }
        Callback::Valid(name) => name,
    };
    let is_json = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if !is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    parts.headers.remove(CONTENT_LENGTH);
    parts.headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/javascript"),
    );
    let prefix = Bytes::from(format!("/* CouchDB */{name}("));
    let chunks = futures_util::stream::once(async move { Ok(prefix) })
        .chain(body.into_data_stream())
        .chain(futures_util::stream::once(async {
            Ok(Bytes::from_static(b");\n"))
        }))
        .map(|chunk| chunk.map(hyper::body::Frame::data));
    hyper::Response::from_parts(parts, StreamBody::new(chunks).boxed_unsync())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on() -> settee_node_config::Settings {
        settee_node_config::Settings {
            allow_jsonp: true,
            ..Default::default()
        }
    }

    #[test]
    fn a_callback_counts_only_when_jsonp_is_on() {
        let off = settee_node_config::Settings::default();
        assert!(callback(&off, Some("callback=f")).is_none());
        assert!(
            matches!(callback(&on(), Some("callback=a.b_c%5B0%5D")), Some(Callback::Valid(name)) if name == "a.b_c[0]")
        );
        assert!(matches!(
            callback(&on(), Some("callback=f%22")),
            Some(Callback::Invalid)
        ));
        assert!(callback(&on(), Some("callback=")).is_none());
        assert!(callback(&on(), None).is_none());
    }

    #[tokio::test]
    async fn json_answers_are_wrapped() {
        let response = response::json(hyper::StatusCode::NOT_FOUND, &serde_json::json!({"a": 1}));
        let wrapped = wrap(response, &Callback::Valid("f".into()));
        assert_eq!(wrapped.status(), hyper::StatusCode::NOT_FOUND);
        assert_eq!(wrapped.headers()[CONTENT_TYPE], "application/javascript");
        let body = wrapped
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        assert_eq!(&body[..], b"/* CouchDB */f({\"a\":1}\n);\n");
    }
}
