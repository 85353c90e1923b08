//! Hostile requests: oversize and over-deep documents on both doors, garbage bytes and
//! invalid JSON.

use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use rand::Rng;
use settee_kv_codec::{datatype, opcode, status};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;

/// PUTs a 9 MB document every two seconds, with the whole body sent.
pub(super) async fn oversize_http(raw: RawHttp, counters: Arc<Counters>) {
    const NAME: &str = "oversize http";
    let body = format!(r#"{{"pad":"{}"}}"#, "o".repeat(OVERSIZE_BYTES));
    let mut sequence = 0u64;
    loop {
        counters.add(NAME, Outcome::Attempt);
        let path = format!("{}/oversize-{sequence}", raw.db_path);
        sequence += 1;
        let mut request = raw.head("PUT", &path, &format!("Content-Length: {}\r\n", body.len()));
        request.extend_from_slice(body.as_bytes());
        let status = match TcpStream::connect(&raw.address).await {
            Ok(mut stream) => {
                // The server may answer 413 and close before the body is in; read either way.
                let _ = tokio::time::timeout(ANSWER_TIMEOUT, stream.write_all(&request)).await;
                read_status(&mut stream).await
            }
            Err(_) => None,
        };
        count_http_status(&counters, NAME, status);
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// SETs a 9 MB JSON value every two seconds.
pub(super) async fn oversize_kv(endpoints: Arc<Endpoints>, counters: Arc<Counters>) {
    const NAME: &str = "oversize kv";
    let body = format!(r#"{{"pad":"{}"}}"#, "o".repeat(OVERSIZE_BYTES));
    kv_bad_values(
        endpoints,
        counters,
        NAME,
        body.into_bytes(),
        Duration::from_secs(2),
    )
    .await;
}

/// SETs `value` (JSON) under new keys every `pause` on one connection, counting how the server
/// answered.
async fn kv_bad_values(
    endpoints: Arc<Endpoints>,
    counters: Arc<Counters>,
    name: &'static str,
    value: Vec<u8>,
    pause: Duration,
) {
    let mut client: Option<Client> = None;
    let mut sequence = 0u64;
    loop {
        counters.add(name, Outcome::Attempt);
        if client.is_none() {
            if let Ok(Ok((connected, _))) = tokio::time::timeout(
                ANSWER_TIMEOUT,
                Client::connect(&admin_handshake(&endpoints)),
            )
            .await
            {
                client = Some(connected);
            }
        }
        let key = format!("{name}-{sequence}").replace(' ', "-");
        sequence += 1;
        let reply = match client.as_mut() {
            Some(connected) => tokio::time::timeout(
                ANSWER_TIMEOUT,
                connected.call_with(opcode::SET, datatype::JSON, &[0; 8], key.as_bytes(), &value),
            )
            .await
            .ok()
            .and_then(Result::ok),
            None => None,
        };
        match reply {
            Some(reply) if reply.status == status::SUCCESS => counters.add(name, Outcome::Accepted),
            Some(_) => counters.add(name, Outcome::Refused),
            None => {
                counters.add(name, Outcome::Closed);
                client = None;
            }
        }
        tokio::time::sleep(pause).await;
    }
}

/// A JSON value nested [`OVER_DEEP_LEVELS`] deep.
fn over_deep_value() -> Vec<u8> {
    let mut value = Vec::with_capacity(OVER_DEEP_LEVELS * 2 + 16);
    value.extend_from_slice(br#"{"deep":"#);
    value.extend(std::iter::repeat_n(b'[', OVER_DEEP_LEVELS));
    value.extend(std::iter::repeat_n(b']', OVER_DEEP_LEVELS));
    value.push(b'}');
    value
}

/// PUTs (HTTP) and SETs (KV) an over-deep document, once a second each.
pub(super) async fn over_deep(endpoints: Arc<Endpoints>, counters: Arc<Counters>) {
    const NAME: &str = "over-deep http";
    let value = over_deep_value();
    let kv = tokio::spawn(kv_bad_values(
        endpoints.clone(),
        counters.clone(),
        "over-deep kv",
        value.clone(),
        Duration::from_secs(1),
    ));
    let _abort_kv = AbortOnDrop(kv);
    let mut connection: Option<Connection> = None;
    let mut sequence = 0u64;
    loop {
        counters.add(NAME, Outcome::Attempt);
        let path = format!("{}/deep-{sequence}", endpoints.http.db_path);
        sequence += 1;
        let status = admin_exchange(
            &endpoints,
            &mut connection,
            Method::PUT,
            &path,
            value.clone(),
        )
        .await;
        count_http_status(&counters, NAME, status);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Garbage on both doors and invalid JSON bodies, five times a second.
pub(super) async fn malformed(raw: RawHttp, kv_address: String, counters: Arc<Counters>) {
    let mut sequence = 0u64;
    loop {
        let garbage: Vec<u8> = {
            let mut rng = rand::rng();
            (0..rng.random_range(1..512))
                .map(|_| rng.random())
                .collect()
        };
        counters.add("malformed kv", Outcome::Attempt);
        match TcpStream::connect(&kv_address).await {
            Ok(mut stream) => {
                let _ = stream.write_all(&garbage).await;
                let mut buffer = [0u8; 1024];
                match tokio::time::timeout(ANSWER_TIMEOUT, stream.read(&mut buffer)).await {
                    Ok(Ok(0)) | Ok(Err(_)) => counters.add("malformed kv", Outcome::Closed),
                    Ok(Ok(_)) => counters.add("malformed kv", Outcome::Refused),
                    // Waiting for the rest of a frame whose header said more is coming.
                    Err(_) => counters.add("malformed kv", Outcome::Closed),
                }
            }
            Err(_) => counters.add("malformed kv", Outcome::Closed),
        }

        counters.add("malformed http", Outcome::Attempt);
        let mut request = b"GARBAGE / HTTP/9.9\r\n".to_vec();
        request.extend_from_slice(&garbage);
        request.extend_from_slice(b"\r\n\r\n");
        let status = match TcpStream::connect(&raw.address).await {
            Ok(mut stream) => {
                let _ = stream.write_all(&request).await;
                read_status(&mut stream).await
            }
            Err(_) => None,
        };
        count_http_status(&counters, "malformed http", status);

        counters.add("invalid json http", Outcome::Attempt);
        let body = b"{\"unterminated\": [1, 2";
        let mut request = raw.head(
            "PUT",
            &format!("{}/invalid-{sequence}", raw.db_path),
            &format!("Content-Length: {}\r\n", body.len()),
        );
        sequence += 1;
        request.extend_from_slice(body);
        let status = match TcpStream::connect(&raw.address).await {
            Ok(mut stream) => {
                let _ = stream.write_all(&request).await;
                read_status(&mut stream).await
            }
            Err(_) => None,
        };
        count_http_status(&counters, "invalid json http", status);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
