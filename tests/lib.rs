//! Shared helpers for the workspace-level tests (golden-file runner, references).
