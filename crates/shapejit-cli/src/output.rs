//! Writing results to stdout without panicking on a closed pipe
//! (`shapejit dump ... | head` must end quietly, not with a panic).

use anyhow::{Context, Result};
use std::io::Write;

/// Writes `text` to stdout; a reader that went away (broken pipe) is not an error.
pub fn emit(text: &str) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("cannot write to stdout"),
    }
}
