//! The `.sjir` text format: [`std::fmt::Display`] for [`Graph`](crate::Graph) prints it,
//! [`parse`] reads it.
//!
//! ```text
//! graph @mlp(%x: f32[batch, 4]) -> (%y) {
//!   %w = constant f32[4, 2] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
//!   %h = matmul %x, %w : f32[batch, 2]
//!   %y = softmax @out %h {axis = -1} : f32[batch, 2]
//! }
//! ```
//!
//! - Values are `%name`, graph and node names `@name`; names outside
//!   `[A-Za-z0-9_.]` are quoted: `%"/layer.0/Add_output_0"` (escapes `\\`,
//!   `\"`, `\n`, `\t`, `\u{7f}`). A node's name is printed (`@out`) only when it
//!   differs from its first output's name.
//! - A statement is `%outs = op [@node] %ins {attr = value, ...} : types`,
//!   with `then graph ...` / `else graph ...` (`if`) or `body graph ...`
//!   (`loop`) after the types. Every attribute is printed; when parsing, the
//!   ONNX defaults fill in the ones left out, and output types are optional
//!   (inference supplies them).
//! - Constants are `dtype[dims] [elements]` when they have at most
//!   [`print::MAX_LITERAL_ELEMS`] elements and no NaN, else the raw
//!   little-endian bytes as `hex"..."`, so every bit (NaN payloads included)
//!   round-trips.
//! - `//` starts a comment.
//!
//! **Invariant:** `print(parse(print(g))) == print(g)` for every graph `g`.

mod attrs;
mod lexer;
mod parse;
pub mod print;

pub use parse::parse;
pub use print::Elided;

use crate::verify::verify;

/// The property fuzzing checks on any text: parsing, verifying and printing
/// never panic, and a text that parses prints to a fixed point
/// (`print(parse(print(g))) == print(g)`).
///
/// Returns `Ok(None)` when `text` does not parse, `Ok(Some(printed))` when it
/// does and the round trip is stable, and `Err` describing the instability.
pub fn check_round_trip(text: &str) -> Result<Option<String>, String> {
    let Ok(graph) = parse(text) else {
        return Ok(None);
    };
    let _ = verify(&graph);
    let _ = graph.display_elided().to_string();
    let printed = graph.to_string();
    let again =
        parse(&printed).map_err(|e| format!("printed graph does not parse: {e}\n{printed}"))?;
    let reprinted = again.to_string();
    if reprinted != printed {
        return Err(format!(
            "print is not stable:\n{printed}\n---- became ----\n{reprinted}"
        ));
    }
    Ok(Some(printed))
}

#[cfg(test)]
mod tests;
