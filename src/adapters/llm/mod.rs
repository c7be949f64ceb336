//! LLM provider clients (Gemini, OpenAI-compatible) over one HTTP helper, the router that
//! picks a client by route, the retry wrapper and usage metering: all implement or wrap
//! `ports::llm::Llm`.

pub mod gemini;
pub mod http;
pub mod openai;
pub mod provider;
pub mod retry;
pub mod usage;
pub(crate) mod usage_files;
pub(crate) mod usage_report;
pub(crate) mod wire_schema;
