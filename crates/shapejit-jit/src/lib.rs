//! Placeholder until this crate lands.
