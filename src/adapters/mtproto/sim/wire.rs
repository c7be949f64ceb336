//! The server side of MTProto 2.0 for the simulated Telegram: the TCP listener, the full
//! transport's frames (grammers' own `transport::Full`, which is the same both ways), the
//! encryption of a server (AES-IGE with the keys of the server's side of the auth key), the
//! message layer (containers, gzip, acks, pings, `rpc_result`/`rpc_error`) and the pushes of
//! updates. It keeps no Telegram state: every request is answered by [`super::rpc`] on the
//! shared world, and every connection registers its push channel with the world under the
//! account its auth key names. It never makes an auth key (there is no DH exchange here): a
//! session must carry the key [`super::auth_key_for`] gives its account. Called by
//! [`super::SimServer`].

use std::io::Read as _;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use grammers_client::tl::{self, Cursor, Deserializable, Serializable};
use grammers_crypto::DequeBuffer;
use grammers_mtproto::transport::{Full, Transport};
use sha2::Digest as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Shared, key_id, rpc};

const CONTAINER: u32 = 0x73f1_f8dc;
const GZIP_PACKED: u32 = 0x3072_cfa1;
const RPC_RESULT: u32 = 0xf35c_6d01;
const RPC_ERROR: u32 = 0x2144_ca19;
const MSGS_ACK: u32 = 0x62d6_b459;
const PING: u32 = 0x7abe_77ec;
const PING_DELAY_DISCONNECT: u32 = 0xf342_7b8c;
const PONG: u32 = 0x3477_73c5;
const INVOKE_WITH_LAYER: u32 = 0xda9b_0d0d;
const INIT_CONNECTION: u32 = 0xc1cd_5ea9;
/// The largest frame a client may send (grammers' container limit, with room).
const MAX_FRAME: usize = 2 * 1024 * 1024;

/// Accepts connections until `stop`.
pub(super) async fn serve(listener: TcpListener, world: Shared, stop: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                let (world, stop) = (Arc::clone(&world), stop.clone());
                tokio::spawn(async move {
                    if let Err(e) = connection(stream, world, stop).await {
                        tracing::debug!(event = "sim_connection_closed", error = %e, "a simulated Telegram connection ended");
                    }
                });
            }
            Err(e) => {
                tracing::warn!(event = "sim_accept_failed", error = %e, "the simulated Telegram could not accept a connection");
                tokio::task::yield_now().await;
            }
        }
    }
}

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
pub(super) enum WireError {
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    #[error("transport: {0}")]
    Transport(#[from] grammers_mtproto::transport::Error),
    #[error("a frame of {0} bytes is too large")]
    TooLarge(usize),
    #[error("the message does not decrypt with any known auth key")]
    UnknownKey,
    #[error("the message does not decode: {0}")]
    Decode(#[from] tl::deserialize::Error),
    #[error("a compressed message does not inflate: {0}")]
    Gzip(#[source] std::io::Error),
    #[error("the message is malformed: {0}")]
    Malformed(&'static str),
}

/// One client connection: frames in, answers and pushes out (one writer task).
async fn connection(
    stream: TcpStream,
    world: Shared,
    stop: CancellationToken,
) -> Result<(), WireError> {
    stream.set_nodelay(true)?;
    let (mut read, mut write) = stream.into_split();
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(async move {
        while let Some(frame) = out_rx.recv().await {
            if write.write_all(&frame).await.is_err() {
                break;
            }
        }
    });
    let mut inbound = Full::new();
    let outbound = Arc::new(std::sync::Mutex::new(Outbound::new(out_tx)));
    let mut session: Option<Session> = None;
    let result = loop {
        let frame = tokio::select! {
            () = stop.cancelled() => break Ok(()),
            frame = read_frame(&mut read, &mut inbound) => frame,
        };
        let payload = match frame {
            Ok(Some(p)) => p,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        };
        match handle_frame(&world, &outbound, &mut session, payload) {
            Ok(()) => {}
            Err(WireError::UnknownKey) => {
                // Telegram's answer to a key it does not know: a bare -404.
                let mut out = outbound
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                out.raw((-404i32).to_le_bytes().to_vec());
                break Err(WireError::UnknownKey);
            }
            Err(e) => break Err(e),
        }
    };
    if let Some(s) = session {
        world
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .disconnect(s.account, s.push_id);
    }
    drop(outbound);
    let _ = writer.await;
    result
}

/// Reads one transport frame; `None` at a clean end of stream.
async fn read_frame(
    read: &mut tokio::net::tcp::OwnedReadHalf,
    transport: &mut Full,
) -> Result<Option<Vec<u8>>, WireError> {
    let mut head = [0u8; 4];
    match read.read_exact(&mut head).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = usize::try_from(i32::from_le_bytes(head)).unwrap_or(0);
    if len > MAX_FRAME {
        return Err(WireError::TooLarge(len));
    }
    let mut frame = vec![0u8; len.max(4)];
    frame[..4].copy_from_slice(&head);
    read.read_exact(&mut frame[4..]).await?;
    let range = transport.unpack(&mut frame)?.data_range;
    Ok(Some(frame[range].to_vec()))
}

/// The MTProto session of a connection: whose key, which client session, and the world's
/// handle for pushes.
struct Session {
    account: i64,
    key: [u8; 256],
    session_id: i64,
    salt: i64,
    push_id: u64,
}

/// The connection's sending side: frames, server message ids and sequence numbers.
struct Outbound {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    transport: Full,
    last_msg_id: i64,
    seq: i32,
}

impl Outbound {
    fn new(tx: mpsc::UnboundedSender<Vec<u8>>) -> Outbound {
        Outbound {
            tx,
            transport: Full::new(),
            last_msg_id: 0,
            seq: 0,
        }
    }

    /// A frame as is (a transport error code).
    fn raw(&mut self, bytes: Vec<u8>) {
        let _ = self.tx.send(bytes);
    }

    /// A server message id: time based, increasing, 1 mod 4 for answers and 3 mod 4 else.
    fn msg_id(&mut self, answer: bool) -> i64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let base = ((now.as_secs() as i64) << 32) | (i64::from(now.subsec_nanos()) << 2);
        let mut id = (base & !3) | if answer { 1 } else { 3 };
        while id <= self.last_msg_id {
            id += 4;
        }
        self.last_msg_id = id;
        id
    }

    /// Encrypts one message of `body` for the client and queues its frame.
    fn send(&mut self, session: &Session, body: &[u8], answer: bool) {
        let msg_id = self.msg_id(answer);
        self.seq += 1;
        let seq_no = self.seq * 2 - 1;
        let mut plain = Vec::with_capacity(body.len() + 64);
        session.salt.serialize(&mut plain);
        session.session_id.serialize(&mut plain);
        msg_id.serialize(&mut plain);
        seq_no.serialize(&mut plain);
        (body.len() as i32).serialize(&mut plain);
        plain.extend_from_slice(body);
        let padding = 16 + (16 - plain.len() % 16);
        plain.extend(std::iter::repeat_with(|| fastrand::u8(..)).take(padding));
        let encrypted = encrypt(&session.key, plain);
        let mut buffer = DequeBuffer::with_capacity(encrypted.len(), 8);
        buffer.extend(encrypted);
        self.transport.pack(&mut buffer);
        let _ = self.tx.send(buffer.as_ref().to_vec());
    }
}

/// The AES key and IV of a message (MTProto 2.0; `x` is 0 from the client, 8 from the server).
fn aes_key_iv(key: &[u8; 256], msg_key: &[u8], x: usize) -> ([u8; 32], [u8; 32]) {
    let a: [u8; 32] = sha2::Sha256::new()
        .chain_update(msg_key)
        .chain_update(&key[x..x + 36])
        .finalize()
        .into();
    let b: [u8; 32] = sha2::Sha256::new()
        .chain_update(&key[40 + x..40 + x + 36])
        .chain_update(msg_key)
        .finalize()
        .into();
    let mut aes_key = [0; 32];
    aes_key[..8].copy_from_slice(&a[..8]);
    aes_key[8..24].copy_from_slice(&b[8..24]);
    aes_key[24..].copy_from_slice(&a[24..]);
    let mut iv = [0; 32];
    iv[..8].copy_from_slice(&b[..8]);
    iv[8..24].copy_from_slice(&a[8..24]);
    iv[24..].copy_from_slice(&b[24..]);
    (aes_key, iv)
}

/// The message key of a plaintext (padding included) sent by side `x`.
fn msg_key(key: &[u8; 256], plain: &[u8], x: usize) -> [u8; 16] {
    let large: [u8; 32] = sha2::Sha256::new()
        .chain_update(&key[88 + x..88 + x + 32])
        .chain_update(plain)
        .finalize()
        .into();
    let mut k = [0; 16];
    k.copy_from_slice(&large[8..24]);
    k
}

/// A server message, encrypted: key id, message key, ciphertext.
fn encrypt(key: &[u8; 256], mut plain: Vec<u8>) -> Vec<u8> {
    let mk = msg_key(key, &plain, 8);
    let (aes, iv) = aes_key_iv(key, &mk, 8);
    grammers_crypto::aes::ige_encrypt(&mut plain, &aes, &iv);
    let mut out = Vec::with_capacity(plain.len() + 24);
    out.extend_from_slice(&key_id(key));
    out.extend_from_slice(&mk);
    out.extend_from_slice(&plain);
    out
}

/// A client message, decrypted with `key` (checked against its message key).
fn decrypt(key: &[u8; 256], payload: &[u8]) -> Option<Vec<u8>> {
    if payload.len() < 24 || !(payload.len() - 24).is_multiple_of(16) {
        return None;
    }
    let mk = &payload[8..24];
    let (aes, iv) = aes_key_iv(key, mk, 0);
    let mut plain = payload[24..].to_vec();
    grammers_crypto::aes::ige_decrypt(&mut plain, &aes, &iv);
    (msg_key(key, &plain, 0) == mk).then_some(plain)
}

/// Decrypts a frame, learns the session from its first message, and handles its messages.
fn handle_frame(
    world: &Shared,
    outbound: &Arc<std::sync::Mutex<Outbound>>,
    session: &mut Option<Session>,
    payload: Vec<u8>,
) -> Result<(), WireError> {
    if payload.len() < 8 {
        return Err(WireError::Malformed("a frame shorter than a key id"));
    }
    let mut id = [0u8; 8];
    id.copy_from_slice(&payload[..8]);
    let (account, key) = match session {
        Some(s) => (s.account, s.key),
        None => {
            let found = world
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .key(id);
            found.ok_or(WireError::UnknownKey)?
        }
    };
    let plain = decrypt(&key, &payload).ok_or(WireError::UnknownKey)?;
    let mut cur = Cursor::from_slice(&plain);
    let salt = i64::deserialize(&mut cur).map_err(decode)?;
    let session_id = i64::deserialize(&mut cur).map_err(decode)?;
    let msg_id = i64::deserialize(&mut cur).map_err(decode)?;
    let _seq_no = i32::deserialize(&mut cur).map_err(decode)?;
    let len = usize::try_from(i32::deserialize(&mut cur).map_err(decode)?).unwrap_or(0);
    let start = 32;
    let body = plain
        .get(start..start + len)
        .ok_or(WireError::Malformed("a message longer than its frame"))?;
    if session.as_ref().is_none_or(|s| s.session_id != session_id) {
        if let Some(old) = session.take() {
            world
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .disconnect(old.account, old.push_id);
        }
        let push = pusher(Arc::clone(outbound), account, key, session_id, salt);
        let push_id = world
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .connect(account, push);
        *session = Some(Session {
            account,
            key,
            session_id,
            salt,
            push_id,
        });
    }
    let Some(s) = session.as_ref() else {
        return Ok(());
    };
    message(world, outbound, s, msg_id, body)
}

/// How the world pushes updates to this connection.
fn pusher(
    outbound: Arc<std::sync::Mutex<Outbound>>,
    account: i64,
    key: [u8; 256],
    session_id: i64,
    salt: i64,
) -> super::world::Push {
    let session = Session {
        account,
        key,
        session_id,
        salt,
        push_id: 0,
    };
    Box::new(move |body: &[u8]| {
        outbound
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .send(&session, body, false);
    })
}

fn decode(e: tl::deserialize::Error) -> WireError {
    WireError::Decode(e)
}

fn constructor(body: &[u8]) -> u32 {
    body.get(..4)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// A TL object left serialized (the rest of the buffer).
struct Rest(Vec<u8>);

impl Deserializable for Rest {
    fn deserialize(buf: &mut Cursor<'_>) -> tl::deserialize::Result<Self> {
        let mut bytes = Vec::new();
        buf.read_to_end(&mut bytes)?;
        Ok(Rest(bytes))
    }
}

/// Handles one client message (maybe a container or compressed).
fn message(
    world: &Shared,
    outbound: &Arc<std::sync::Mutex<Outbound>>,
    s: &Session,
    msg_id: i64,
    body: &[u8],
) -> Result<(), WireError> {
    let send = |bytes: &[u8], answer: bool| {
        outbound
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .send(s, bytes, answer);
    };
    match constructor(body) {
        CONTAINER => {
            let mut cur = Cursor::from_slice(&body[4..]);
            let count = i32::deserialize(&mut cur).map_err(decode)?;
            let mut pos = 8;
            for _ in 0..count {
                let head = body
                    .get(pos..pos + 16)
                    .ok_or(WireError::Malformed("a short container"))?;
                let inner_id = i64::from_le_bytes(head[..8].try_into().unwrap_or_default());
                let len = u32::from_le_bytes(head[12..16].try_into().unwrap_or_default()) as usize;
                let inner = body
                    .get(pos + 16..pos + 16 + len)
                    .ok_or(WireError::Malformed("a short container message"))?;
                message(world, outbound, s, inner_id, inner)?;
                pos += 16 + len;
            }
            Ok(())
        }
        GZIP_PACKED => {
            let packed = Vec::<u8>::from_bytes(&body[4..]).map_err(decode)?;
            let mut unpacked = Vec::new();
            flate2::read::GzDecoder::new(&packed[..])
                .read_to_end(&mut unpacked)
                .map_err(WireError::Gzip)?;
            message(world, outbound, s, msg_id, &unpacked)
        }
        MSGS_ACK => Ok(()),
        PING | PING_DELAY_DISCONNECT => {
            let ping_id = i64::from_bytes(&body[4..12.min(body.len())]).map_err(decode)?;
            let mut pong = Vec::new();
            PONG.serialize(&mut pong);
            msg_id.serialize(&mut pong);
            ping_id.serialize(&mut pong);
            send(&pong, true);
            Ok(())
        }
        _ => {
            let query = unwrap_query(body)?;
            let answer = {
                let mut w = world
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                rpc::answer(&mut w, s.account, &query)
            };
            let mut out = Vec::new();
            RPC_RESULT.serialize(&mut out);
            msg_id.serialize(&mut out);
            match answer {
                Ok(bytes) => out.extend_from_slice(&bytes),
                Err(e) => {
                    RPC_ERROR.serialize(&mut out);
                    e.code.serialize(&mut out);
                    e.message().serialize(&mut out);
                }
            }
            send(&out, true);
            Ok(())
        }
    }
}

/// The query inside `invokeWithLayer` and `initConnection` (the first request of a
/// connection wraps `help.getConfig` in both).
fn unwrap_query(body: &[u8]) -> Result<Vec<u8>, WireError> {
    match constructor(body) {
        INVOKE_WITH_LAYER => {
            let inner =
                tl::functions::InvokeWithLayer::<Rest>::from_bytes(&body[4..]).map_err(decode)?;
            unwrap_query(&inner.query.0)
        }
        INIT_CONNECTION => {
            let inner =
                tl::functions::InitConnection::<Rest>::from_bytes(&body[4..]).map_err(decode)?;
            unwrap_query(&inner.query.0)
        }
        _ => Ok(body.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use grammers_client::tl::Identifiable;

    #[test]
    fn the_server_side_encryption_is_what_grammers_decrypts() {
        let key = [7u8; 256];
        let auth = grammers_crypto::AuthKey::from_bytes(key);
        assert_eq!(key_id(&key), {
            let mut b = grammers_crypto::DequeBuffer::with_capacity(16, 0);
            b.extend([0u8; 16]);
            grammers_crypto::encrypt_data_v2(&mut b, &auth);
            let mut id = [0; 8];
            id.copy_from_slice(&b.as_ref()[..8]);
            id
        });
        let mut plain = vec![1u8; 32];
        plain.extend([0u8; 32]);
        let mut sealed = encrypt(&key, plain.clone());
        let opened = grammers_crypto::decrypt_data_v2(&mut sealed, &auth).map(|p| p.to_vec());
        assert_eq!(opened.ok(), Some(plain));
        // And what a client seals, the server opens.
        let mut b = grammers_crypto::DequeBuffer::with_capacity(48, 32);
        b.extend([5u8; 48]);
        grammers_crypto::encrypt_data_v2(&mut b, &auth);
        let opened = decrypt(&key, b.as_ref()).map(|p| p[..48].to_vec());
        assert_eq!(opened, Some(vec![5u8; 48]));
    }

    #[test]
    fn a_query_is_found_inside_the_connection_wrappers() {
        let wrapped = tl::functions::InvokeWithLayer {
            layer: tl::LAYER,
            query: tl::functions::InitConnection {
                api_id: 1,
                device_model: "d".into(),
                system_version: "s".into(),
                app_version: "a".into(),
                system_lang_code: "en".into(),
                lang_pack: String::new(),
                lang_code: "en".into(),
                proxy: None,
                params: None,
                query: tl::functions::help::GetConfig {},
            },
        };
        let inner = unwrap_query(&wrapped.to_bytes()).unwrap_or_default();
        assert_eq!(
            constructor(&inner),
            tl::functions::help::GetConfig::CONSTRUCTOR_ID
        );
    }
}
