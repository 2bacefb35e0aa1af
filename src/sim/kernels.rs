//! Inner kernels of the core, re-exported for the benches (`benches/kernels.rs`), which are
//! separate crates and can reach only public items.
//!
//! Exposed for the benches; **not a stable API**: these are building blocks of the step that a
//! user has no reason to call, and they may change or disappear without notice.

pub use super::volume_stretches::volume_preserving_stretches;
