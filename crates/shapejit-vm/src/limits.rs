//! Stopping a run from outside: [`RunOptions`] carries a deadline and a
//! [`CancelToken`] that another thread may trigger.
//!
//! The interpreter calls [`Watch::check`] before every instruction, so a loop
//! stops at its next back edge; one instruction (a large matmul, a compiled
//! region) always runs to its end. A cancelled token is one relaxed atomic load;
//! the clock is read only every [`CLOCK_EVERY`] instructions.
//!
//! **Invariant:** a run stopped by its limits returns [`RunError::Cancelled`] or
//! [`RunError::DeadlineExceeded`] and leaves the runtime usable for the next run.

use crate::error::RunError;
use shapejit_bytecode::Pc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How many instructions run between two reads of the clock.
pub const CLOCK_EVERY: u32 = 64;

/// A flag that stops the runs watching it; cheap to clone and share across
/// threads.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token not cancelled yet.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Stops every run watching this token (at its next instruction).
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// True once [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Limits of one [`crate::Runtime::run_with`] call.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// the run fails with [`RunError::DeadlineExceeded`] once this instant passes
    pub deadline: Option<Instant>,
    /// the run fails with [`RunError::Cancelled`] once this token is cancelled
    pub cancel: Option<CancelToken>,
}

impl RunOptions {
    /// A run that must end within `timeout` from now.
    pub fn timeout(timeout: Duration) -> RunOptions {
        RunOptions {
            deadline: Instant::now().checked_add(timeout),
            cancel: None,
        }
    }
}

/// One run's view of its limits.
pub(crate) struct Watch<'a> {
    options: &'a RunOptions,
    start: Instant,
    until_clock: u32,
}

impl<'a> Watch<'a> {
    pub(crate) fn new(options: &'a RunOptions) -> Watch<'a> {
        Watch {
            options,
            start: Instant::now(),
            until_clock: 0,
        }
    }

    /// Called before the instruction at `pc`.
    #[inline]
    pub(crate) fn check(&mut self, pc: usize) -> Result<(), RunError> {
        if let Some(token) = &self.options.cancel
            && token.is_cancelled()
        {
            return Err(RunError::Cancelled { pc: Pc(pc as u32) });
        }
        let Some(deadline) = self.options.deadline else {
            return Ok(());
        };
        if self.until_clock > 0 {
            self.until_clock -= 1;
            return Ok(());
        }
        self.until_clock = CLOCK_EVERY;
        if Instant::now() >= deadline {
            return Err(RunError::DeadlineExceeded {
                pc: Pc(pc as u32),
                after: self.start.elapsed(),
            });
        }
        Ok(())
    }
}
