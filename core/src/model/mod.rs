//! The model: typed views of the weights, the operations, the matrix
//! products, the MoE feed-forward, the decoder forward pass and the vision
//! tower.

pub mod attend;
pub mod deltanet;
pub mod forward;
pub mod linear;
pub mod moe;
pub mod observe;
pub mod ops;
pub mod vision;
pub mod weights;
