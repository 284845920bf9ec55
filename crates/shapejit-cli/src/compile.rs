//! `shapejit compile MODEL -o FILE.sjb`: lower once and write the bytecode image.

use anyhow::{Result, bail};
use std::path::PathBuf;

/// Arguments of `shapejit compile`.
#[derive(clap::Args)]
pub struct Args {
    /// the model: a .onnx or .sjir file, or builtin:NAME
    model: String,
    /// where to write the image
    #[arg(short, long, value_name = "FILE.sjb")]
    output: PathBuf,
}

/// Runs the command.
pub fn main(args: Args) -> Result<()> {
    // Load first, so a broken model is reported as such.
    crate::model::load(&args.model, shapejit::Options::interp())?;
    bail!(
        "writing bytecode images is not available yet (the .sjb writer has not landed); '{}' was not written",
        args.output.display()
    )
}
