//! `shapejit compile MODEL -o FILE.sjb`: lower once and write the mmap-able
//! bytecode image (`shapejit_bytecode::image`): a new file renamed over the
//! target, so a process running the old image keeps running on it.

use anyhow::{Context, Result};
use std::path::PathBuf;

/// Arguments of `shapejit compile`.
#[derive(clap::Args)]
pub struct Args {
    /// the model: a .onnx or .sjir file, or builtin:NAME
    model: String,
    /// where to write the image
    #[arg(short, long, value_name = "FILE.sjb")]
    output: PathBuf,
    /// store a checksum of the weights, checked on every load (reads every
    /// weight page once at load time)
    #[arg(long)]
    checksum_weights: bool,
}

/// Runs the command.
pub fn main(args: Args) -> Result<()> {
    let (module, _) = crate::model::load(&args.model, shapejit::Options::interp())?;
    let program = module.program();
    let options = shapejit::bytecode::image::WriteOptions {
        checksum_weights: args.checksum_weights,
    };
    shapejit::bytecode::image::write_with(program, &args.output, options)
        .context("cannot write the image")?;
    let bytes = std::fs::metadata(&args.output)
        .map(|m| m.len())
        .unwrap_or(0);
    crate::output::emit(&format!(
        "wrote {} ({} bytes: {} instructions, {} constants, {} slots)\n",
        args.output.display(),
        bytes,
        program.instrs.len(),
        program.constants.len(),
        program.slots.len()
    ))
}
