//! Ingress: the one admission chain every inbound message passes (owner controls, filters,
//! group decision, queue), whatever its source.

pub mod gate;
