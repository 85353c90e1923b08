//! A TCP connection that reads and writes whole frames.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::frame::{self, FrameError};
use crate::NetError;

/// Bytes asked of the socket per read; a frame larger than this arrives over several reads.
const READ_CHUNK_BYTES: usize = 64 << 10;

/// One frame as read: its body owned, the read buffer free for the next one.
#[derive(Debug)]
pub struct OwnedFrame {
    pub kind: u8,
    pub request_id: u64,
    pub body: Vec<u8>,
}

pub struct FrameStream {
    stream: TcpStream,
    /// Bytes read and not yet decoded (at most one frame and a read's worth past it).
    buffer: Vec<u8>,
}

impl FrameStream {
    pub fn new(stream: TcpStream) -> FrameStream {
        let _ = stream.set_nodelay(true);
        FrameStream {
            stream,
            buffer: Vec::new(),
        }
    }

    /// The next frame; [`NetError::Closed`] if the peer closed between frames.
    pub async fn read_frame(&mut self) -> Result<OwnedFrame, NetError> {
        self.read_frame_within(frame::FRAME_BYTES_MAX).await
    }

    /// The next frame, refused as soon as it announces more than `frame_bytes_max` bytes.
    pub async fn read_frame_within(
        &mut self,
        frame_bytes_max: usize,
    ) -> Result<OwnedFrame, NetError> {
        loop {
            let decoded = frame::decode_within(&self.buffer, frame_bytes_max);
            if let Some((frame, used)) = decoded.map_err(NetError::Frame)? {
                let owned = OwnedFrame {
                    kind: frame.kind,
                    request_id: frame.request_id,
                    body: frame.body.to_vec(),
                };
                self.buffer.drain(..used);
                // An idle pooled connection keeps no large frame's buffer: at most a read's
                // worth once what is left fits in it.
                if self.buffer.capacity() > 2 * READ_CHUNK_BYTES
                    && self.buffer.len() <= READ_CHUNK_BYTES
                {
                    self.buffer.shrink_to(READ_CHUNK_BYTES);
                }
                return Ok(owned);
            }
            self.buffer.reserve(READ_CHUNK_BYTES.min(frame_bytes_max));
            let read = self.stream.read_buf(&mut self.buffer).await?;
            if read == 0 {
                return Err(if self.buffer.is_empty() {
                    NetError::Closed
                } else {
                    NetError::Frame(FrameError::Length(self.buffer.len() as u64))
                });
            }
        }
    }

    pub async fn write_frame(
        &mut self,
        kind: u8,
        request_id: u64,
        body: &[u8],
    ) -> Result<(), NetError> {
        let mut out = Vec::with_capacity(14 + body.len());
        frame::encode(kind, request_id, body, &mut out);
        self.stream.write_all(&out).await?;
        Ok(())
    }
}
