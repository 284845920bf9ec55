//! `shapejit compile MODEL -o FILE.sjb`: lower once and write the mmap-able
//! bytecode image (`shapejit_bytecode::image`).

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
}

/// Runs the command.
pub fn main(args: Args) -> Result<()> {
    let (module, _) = crate::model::load(&args.model, shapejit::Options::interp())?;
    let program = module.program();
    shapejit::bytecode::image::write(program, &args.output).context("cannot write the image")?;
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
