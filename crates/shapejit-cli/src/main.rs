//! The `shapejit` command-line tool: `dump`, `run`, `compile` and `bench`.
//!
//! **Invariant:** every failure — bad arguments, unreadable or malformed files, shape
//! errors — ends the process with a non-zero exit code and one line on stderr
//! (`error: ...`); no user input makes it panic.

mod bench;
mod bindings;
mod compile;
mod dump;
mod model;
mod npy;
mod output;
mod profile;
mod run;
mod workload;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// shapejit: run dynamic-shape neural networks fast on CPU.
///
/// MODEL is a `.onnx`, `.sjir` or `.sjb` file, or `builtin:NAME`
/// (transformer, mlp, elementwise).
#[derive(Parser)]
#[command(name = "shapejit", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the graph, the bytecode listing (slots, registers, regions) and the memory plan.
    Dump(dump::Args),
    /// Run a model on .npy or random inputs and summarize (or save) its outputs.
    Run(run::Args),
    /// Lower a model once and write the mmap-able bytecode image (.sjb).
    Compile(compile::Args),
    /// Compare the tiers on a dynamic-shape workload (default: the reference transformer).
    Bench(bench::Args),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_error(e),
    };
    let result = match cli.command {
        Command::Dump(args) => dump::main(args),
        Command::Run(args) => run::main(args),
        Command::Compile(args) => compile::main(args),
        Command::Bench(args) => bench::main(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let message = format!("{e:#}").replace('\n', " ");
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Prints help and version as clap does; reduces argument errors to one line.
fn clap_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        // Printing help to a closed pipe is not worth a failure exit.
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        eprintln!(
            "error: a command is needed: dump, run, compile or bench (see 'shapejit --help')"
        );
        return ExitCode::from(2);
    }
    // The message is everything before the usage block, joined into one line.
    let rendered = e.render().to_string();
    let parts: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        .collect();
    let joined = parts.join(" ").replace(" tip:", "; tip:");
    let first = joined.strip_prefix("error: ").unwrap_or(&joined);
    eprintln!("error: {first} (see 'shapejit --help')");
    ExitCode::from(2)
}
