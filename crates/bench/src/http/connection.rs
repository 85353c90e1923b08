//! One keep-alive HTTP/1.1 connection, driven inside the task that uses it.

use std::pin::{pin, Pin};
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// How long a TCP connect may take before it counts as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

type Driver = http1::Connection<TokioIo<TcpStream>, Full<Bytes>>;

/// A client connection made with hyper's `client::conn::http1` handshake: no pool, no retries.
///
/// hyper splits a connection into a `SendRequest` handle and a `Connection` future that does the
/// actual I/O and is usually spawned as its own task. Here both are polled by the one task that
/// owns the connection (see [`Connection::exchange`]), which saves a task and a cross-task wakeup
/// per request: the load generator must stay cheaper than the server it measures.
pub(crate) struct Connection {
    sender: http1::SendRequest<Full<Bytes>>,
    /// `None` once the connection has ended (closed by the server or broken).
    driver: Option<Pin<Box<Driver>>>,
}

impl Connection {
    /// Connects to `address` (`host:port`) with `TCP_NODELAY` set.
    pub(crate) async fn open(address: &str) -> anyhow::Result<Self> {
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address))
            .await
            .with_context(|| format!("connecting to {address} timed out"))?
            .with_context(|| format!("connecting to {address}"))?;
        stream.set_nodelay(true).context("setting TCP_NODELAY")?;
        let (sender, driver) = http1::handshake(TokioIo::new(stream))
            .await
            .context("HTTP/1.1 handshake")?;
        Ok(Self {
            sender,
            driver: Some(Box::pin(driver)),
        })
    }

    /// True once the connection has ended; it cannot send again and should be replaced. A server
    /// may close after answering (`Connection: close`), so this can be true after a successful
    /// [`Connection::exchange`].
    pub(crate) fn is_closed(&self) -> bool {
        self.driver.is_none()
    }

    /// Sends `request` and reads its whole response, appending the body to `body_out` when given
    /// and discarding it otherwise (the body must be read before the connection can be reused).
    ///
    /// An `Err` means the request got no complete response; the connection is then closed.
    pub(crate) async fn exchange(
        &mut self,
        request: Request<Full<Bytes>>,
        mut body_out: Option<&mut Vec<u8>>,
    ) -> anyhow::Result<StatusCode> {
        let Some(driver) = self.driver.as_mut() else {
            bail!("the connection is closed");
        };
        let sender = &mut self.sender;
        let exchange = async move {
            sender.ready().await?;
            let response = sender.send_request(request).await?;
            let status = response.status();
            let mut body = response.into_body();
            while let Some(frame) = body.frame().await {
                if let (Ok(data), Some(out)) = (frame?.into_data(), body_out.as_deref_mut()) {
                    out.extend_from_slice(&data);
                }
            }
            Ok::<_, hyper::Error>(status)
        };
        let mut exchange = pin!(exchange);
        let ended = tokio::select! {
            biased;
            result = &mut exchange => {
                if result.is_err() {
                    self.driver = None;
                }
                return Ok(result?);
            }
            ended = driver.as_mut() => ended,
        };
        // The connection ended, possibly right after delivering this response in the same poll
        // (a server that closes after answering). Dropping the driver closes its channels, so the
        // exchange now finishes with whatever was received, or fails.
        self.driver = None;
        match exchange.await {
            Ok(status) => Ok(status),
            Err(error) => match ended {
                Ok(()) => Err(anyhow::Error::new(error).context("server closed the connection")),
                Err(ended) => Err(anyhow::Error::new(ended).context(error.to_string())),
            },
        }
    }
}
