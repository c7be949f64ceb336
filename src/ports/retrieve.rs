//! The retrieve port: how a `retrieve` task reaches the web ([`Retriever`]) and where a chat's
//! retrieved documents are kept ([`DocumentStore`]). The real fetcher
//! (`adapters::retrieve::HttpRetriever`) resolves names itself and connects only to public
//! addresses, follows redirects by hand, reads text only and stops at its caps; the in-memory
//! twin (`adapters::retrieve::MemoryRetriever`) serves pages a test or the playground gives
//! it. Metering and the daily cap wrap either (`adapters::retrieve::MeteredRetriever`). The
//! file store is `adapters::store::retrieved`. This module holds the traits and their
//! vocabulary only; the `retrieve` handler calls them.

use std::net::IpAddr;
use std::sync::Arc;

use crate::core::model::ChatId;
use crate::core::retrieve::Documents;
use crate::core::time::BoxFuture;
use crate::ports::store::StoreError;

/// One page to fetch.
#[derive(Debug, Clone, Copy)]
pub struct RetrieveRequest<'a> {
    pub agent: &'a str,
    pub chat: ChatId,
    /// An `http` or `https` URL.
    pub url: &'a str,
    /// The persona's fetches per UTC day (`# Retrieve Daily Cap`).
    pub daily_cap: u32,
}

/// A fetched page as readable text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// Where the fetch ended (after redirects).
    pub final_url: String,
    /// The response's media type (`text/html`, …).
    pub content_type: String,
    /// The readable text (markup, scripts and styles removed), at most
    /// `retrieve::MAX_DOC_CHARS` characters.
    pub text: String,
    /// Body bytes read from the network.
    pub bytes: u64,
}

/// Why a page was not retrieved: each a guard that held, the cap, or a failed fetch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RetrieveError {
    #[error("not a usable http(s) URL: {0}")]
    BadUrl(String),
    #[error(
        "{host} resolves to {addr}, a private, loopback, link-local or otherwise non-public address"
    )]
    Address { host: String, addr: IpAddr },
    #[error("{0} has no address")]
    NoAddress(String),
    #[error("more than {0} redirects")]
    TooManyRedirects(usize),
    #[error("a redirect without a usable location")]
    BadRedirect,
    #[error("content type {0:?} is not text")]
    ContentType(String),
    #[error("the body is over the cap of {0} bytes")]
    TooLarge(u64),
    #[error("no answer within {0} s")]
    TimedOut(u64),
    #[error("HTTP status {0}")]
    Status(u16),
    #[error("the fetch failed: {0}")]
    Network(String),
    #[error("the daily cap of {0} retrievals is reached")]
    DailyCap(u32),
}

/// Fetches pages.
pub trait Retriever: Send + Sync + 'static {
    fn fetch<'a>(&'a self, req: RetrieveRequest<'a>) -> BoxFuture<'a, Result<Page, RetrieveError>>;
}

/// A chat's retrieved documents on disk. Calls block: async callers use `spawn_blocking`.
pub trait DocumentStore: Send + Sync + 'static {
    /// The chat's documents (none when it has no file).
    fn read(&self, agent: &str, chat: ChatId) -> Result<Documents, StoreError>;
    /// Replaces the chat's documents, crash-safely.
    fn save(&self, agent: &str, chat: ChatId, docs: &Documents) -> Result<(), StoreError>;
}

/// What the `retrieve` handler and planning use.
#[derive(Clone)]
pub struct Retrieval {
    pub fetcher: Arc<dyn Retriever>,
    pub documents: Arc<dyn DocumentStore>,
}

pub type SharedRetrieval = Arc<Retrieval>;
