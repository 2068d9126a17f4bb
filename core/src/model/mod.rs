//! The model: its configuration, the tensors it needs, and (next) the forward pass.

pub mod config;
pub mod tensors;
