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
    // an unknown SHAPEJIT_CPU is refused up front (the kernels would only warn)
    if let Err(e) = shapejit::cpu::env_cap() {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    let result = match cli.command {
        Command::Dump(args) => dump::main(args),
        Command::Run(args) => run::main(args),
        Command::Compile(args) => compile::main(args),
        Command::Bench(args) => bench::main(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line, `: `-separated. A cause whose text
/// its parent already shows (errors that print their source, as
/// `path:line:col: message` does) is not repeated.
fn one_line(e: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in e.chain() {
        let text = cause.to_string().replace('\n', " ");
        if message.contains(&text) {
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    message
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

#[cfg(test)]
mod tests {
    use super::one_line;

    /// An error that prints its source and also exposes it.
    #[derive(Debug)]
    struct Wraps(std::io::Error);

    impl std::fmt::Display for Wraps {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "m.sjir:{}", self.0)
        }
    }

    impl std::error::Error for Wraps {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn causes_join_once() {
        let io = std::io::Error::other("2:5: bad\nthing");
        let e = anyhow::Error::new(Wraps(io)).context("cannot load");
        assert_eq!(one_line(&e), "cannot load: m.sjir:2:5: bad thing");
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(one_line(&plain), "outer: inner");
    }
}
