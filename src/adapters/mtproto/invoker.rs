//! The one seam under the MTProto backend's raw calls: a serialized TL request in, the
//! serialized answer (or grammers' RPC / network error) out. In production it is the
//! account's current grammers `Client` (through its own `invoke`, so the library's flood
//! sleeping, DC routing and update forwarding stay as they are); tests put a scripted fake
//! here and run the real backend code (sends, peer learning, deleteHistory's loop, read
//! marks, reactions, typing, flood waits, history pages, downloads in parts from the file's
//! datacenter, dialog walks) against it. Every request of the backend goes through here;
//! only grammers' own update machinery (getState, getDifference, getChannelDifference) asks
//! its sender directly. It decides nothing and keeps no state besides the client slot the
//! connection supervisor swaps after a rebuild.

use std::sync::{Arc, PoisonError, RwLock};

use grammers_client::tl::{self, Cursor, Deserializable, RemoteCall, Serializable};
use grammers_client::{Client, InvocationError};

use crate::core::time::BoxFuture;

/// Sends one serialized TL request.
pub trait Invoker: Send + Sync + 'static {
    /// Sends a request to the account's home datacenter.
    fn invoke(&self, request: Vec<u8>) -> BoxFuture<'_, Result<Vec<u8>, InvocationError>>;

    /// Sends a request to datacenter `dc` (file parts live where the file is stored). A
    /// fake that models one datacenter may answer it as [`Invoker::invoke`].
    fn invoke_in_dc(
        &self,
        dc: i32,
        request: Vec<u8>,
    ) -> BoxFuture<'_, Result<Vec<u8>, InvocationError>> {
        let _ = dc;
        self.invoke(request)
    }
}

/// A TL request already serialized.
struct Raw(Vec<u8>);

impl Serializable for Raw {
    fn serialize(&self, buf: &mut impl Extend<u8>) {
        buf.extend(self.0.iter().copied());
    }
}

/// A TL answer left serialized.
struct RawAnswer(Vec<u8>);

impl Deserializable for RawAnswer {
    fn deserialize(buf: &mut Cursor<'_>) -> tl::deserialize::Result<Self> {
        let mut bytes = Vec::new();
        buf.read_to_end(&mut bytes)?;
        Ok(RawAnswer(bytes))
    }
}

impl RemoteCall for Raw {
    type Return = RawAnswer;
}

/// The account's client, shared with the backend (which swaps it after a pool rebuild).
pub(crate) type ClientSlot = Arc<RwLock<Client>>;

/// Production: requests go through the current client.
pub(crate) struct ClientInvoker(pub(crate) ClientSlot);

impl Invoker for ClientInvoker {
    fn invoke(&self, request: Vec<u8>) -> BoxFuture<'_, Result<Vec<u8>, InvocationError>> {
        let client = self
            .0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Box::pin(async move { client.invoke(&Raw(request)).await.map(|a| a.0) })
    }

    fn invoke_in_dc(
        &self,
        dc: i32,
        request: Vec<u8>,
    ) -> BoxFuture<'_, Result<Vec<u8>, InvocationError>> {
        let client = self
            .0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Box::pin(async move { client.invoke_in_dc(dc, &Raw(request)).await.map(|a| a.0) })
    }
}

/// Invokes a typed request through `invoker`.
pub(crate) async fn call<R: RemoteCall>(
    invoker: &dyn Invoker,
    request: &R,
) -> Result<R::Return, InvocationError> {
    let answer = invoker.invoke(request.to_bytes()).await?;
    R::Return::from_bytes(&answer).map_err(InvocationError::from)
}

/// Invokes a typed request in datacenter `dc` through `invoker`.
pub(crate) async fn call_in_dc<R: RemoteCall>(
    invoker: &dyn Invoker,
    dc: i32,
    request: &R,
) -> Result<R::Return, InvocationError> {
    let answer = invoker.invoke_in_dc(dc, request.to_bytes()).await?;
    R::Return::from_bytes(&answer).map_err(InvocationError::from)
}
