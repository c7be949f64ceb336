//! Ingress: the one admission chain every inbound message passes before the queue (owner
//! controls → the source's filters → the group decision → queue), the group gates it holds,
//! and the runtime-facing sink the MTProto pump delivers to.

pub mod chain;
pub mod classifier;
pub mod gate;
pub mod sink;
