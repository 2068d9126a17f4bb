//! The model: its configuration, the tensors it needs, and (next) the forward pass.

pub mod config;
pub mod forward;
pub mod moe;
pub mod ops;
pub mod tensors;
pub mod vision;
pub mod weights;
