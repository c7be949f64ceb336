//! The in-memory twin of the web fetcher: it serves the pages it was given (text, as the real
//! one would after conversion) and answers 404 for the rest, recording every URL asked for.
//! For tests and the playground, which reach no network.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::core::time::BoxFuture;
use crate::ports::retrieve::{Page, RetrieveError, RetrieveRequest, Retriever};

#[derive(Debug, Default)]
pub struct MemoryRetriever {
    pages: Mutex<HashMap<String, String>>,
    asked: Mutex<Vec<String>>,
}

impl MemoryRetriever {
    pub fn new() -> MemoryRetriever {
        MemoryRetriever::default()
    }

    /// Serves `text` at `url` from now on.
    pub fn with_page(self, url: &str, text: &str) -> MemoryRetriever {
        self.pages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(url.to_owned(), text.to_owned());
        self
    }

    /// Every URL fetched so far, in order.
    pub fn asked(&self) -> Vec<String> {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Retriever for MemoryRetriever {
    fn fetch<'a>(&'a self, req: RetrieveRequest<'a>) -> BoxFuture<'a, Result<Page, RetrieveError>> {
        Box::pin(async move {
            self.asked
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(req.url.to_owned());
            let pages = self.pages.lock().unwrap_or_else(PoisonError::into_inner);
            let text = pages.get(req.url).ok_or(RetrieveError::Status(404))?;
            Ok(Page {
                final_url: req.url.to_owned(),
                content_type: "text/plain".to_owned(),
                text: text.clone(),
                bytes: text.len() as u64,
            })
        })
    }
}
