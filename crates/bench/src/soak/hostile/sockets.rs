//! Hostile clients that hold sockets: half-open, slowloris, stalled and endless bodies,
//! partial frames, and slow readers that pipeline requests and never read the answers.

use std::sync::Arc;

use settee_kv_codec::{datatype, encode_request, opcode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;

/// Opens a socket, sends `opening`, then drips `drip` every [`DRIP_INTERVAL`] (or nothing) and
/// never reads more than the server volunteers; when the server closes it, counts that and
/// opens another.
pub(super) async fn hold(
    address: String,
    opening: Vec<u8>,
    drip: Option<Vec<u8>>,
    name: &'static str,
    counters: Arc<Counters>,
) {
    loop {
        counters.add(name, Outcome::Attempt);
        if let Ok(mut stream) = TcpStream::connect(&address).await {
            if stream.write_all(&opening).await.is_ok() {
                let mut buffer = [0u8; 4096];
                loop {
                    tokio::select! {
                        read = stream.read(&mut buffer) => {
                            match read {
                                Ok(0) | Err(_) => break,
                                Ok(_) => {} // an error answer; wait for the close
                            }
                        }
                        _ = tokio::time::sleep(DRIP_INTERVAL) => {
                            if let Some(drip) = &drip {
                                if stream.write_all(drip).await.is_err() {
                                    break;
                                }
                            }
                        }
                    }
                }
            }
        }
        counters.add(name, Outcome::Closed);
        tokio::time::sleep(REOPEN_PAUSE).await;
    }
}

/// Pipelines GETs of the big document over keep-alive HTTP and never reads the answers.
pub(super) async fn http_slow_reader(raw: RawHttp, counters: Arc<Counters>) {
    const NAME: &str = "slow reader http";
    let request = raw.head("GET", &format!("{}/big", raw.db_path), "");
    let batch: Vec<u8> = request.repeat(16);
    loop {
        if let Ok(stream) = TcpStream::connect(&raw.address).await {
            never_read(stream, &batch, 16, NAME, &counters).await;
        }
        counters.add(NAME, Outcome::Closed);
        tokio::time::sleep(REOPEN_PAUSE).await;
    }
}

/// Pipelines KV GETs of the big document and never reads the replies.
pub(super) async fn kv_slow_reader(endpoints: Arc<Endpoints>, counters: Arc<Counters>) {
    const NAME: &str = "slow reader kv";
    let mut batch = Vec::new();
    for opaque in 0..64u32 {
        encode_request(
            &mut batch,
            opcode::GET,
            0,
            opaque,
            0,
            datatype::RAW,
            &[],
            &[],
            b"big",
            &[],
        );
    }
    loop {
        if let Ok(Ok((client, _))) = tokio::time::timeout(
            ANSWER_TIMEOUT,
            Client::connect(&admin_handshake(&endpoints)),
        )
        .await
        {
            never_read(client.stream, &batch, 64, NAME, &counters).await;
        }
        counters.add(NAME, Outcome::Closed);
        tokio::time::sleep(REOPEN_PAUSE).await;
    }
}

/// Writes `batch` (holding `requests` requests) again and again without reading; when the
/// server stops reading too, the write blocks and the client just waits.
async fn never_read(
    mut stream: TcpStream,
    batch: &[u8],
    requests: u64,
    name: &'static str,
    counters: &Counters,
) {
    loop {
        match tokio::time::timeout(ANSWER_TIMEOUT, stream.write_all(batch)).await {
            Ok(Ok(())) => {
                for _ in 0..requests {
                    counters.add(name, Outcome::Attempt);
                }
            }
            Ok(Err(_)) => return,
            // The server is not reading: what a bounded output queue should do. Keep holding.
            Err(_) => tokio::time::sleep(REOPEN_PAUSE).await,
        }
    }
}
