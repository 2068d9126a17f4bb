//! Layouts written whole, one module each: a layout's geometry and byte
//! order, its repacker (and the inverse the tests use), its scalar
//! specification (`generic`) and each architecture's kernels (`aarch64`,
//! `x86_64`, the one of the build also named `arch`), which instantiate the
//! block families' shared texts of the architecture modules. Adding a
//! layout is a module here and its row in the core's layout table
//! (docs/architecture.md, "Adding a layout").

pub mod iq4nl;
pub mod iq4xs;
pub mod q2k;
pub mod q3k;
