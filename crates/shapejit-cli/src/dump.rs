//! `shapejit dump MODEL [--json]`: the graph (large constants elided), the bytecode
//! listing with slots, registers and regions, and the memory plan.

use anyhow::Result;
use serde_json::json;
use shapejit::{IoSpec, Options};

/// Arguments of `shapejit dump`.
#[derive(clap::Args)]
pub struct Args {
    /// the model: a .onnx, .sjir or .sjb file, or builtin:NAME
    model: String,
    /// print one JSON document instead of text
    #[arg(long)]
    json: bool,
}

fn io_json(specs: &[IoSpec]) -> serde_json::Value {
    specs
        .iter()
        .map(|s| json!({ "name": s.name, "type": s.ty.to_string() }))
        .collect()
}

/// Runs the command.
pub fn main(args: Args) -> Result<()> {
    let (module, _) = crate::model::load(&args.model, Options::interp())?;
    let graph = match module.graph() {
        Some(graph) => graph.display_elided().to_string(),
        None => "(a .sjb image holds bytecode only; dump the source model for its graph)\n".into(),
    };
    let program = module.program();
    if args.json {
        let slots: Vec<_> = module
            .stats()
            .slots
            .into_iter()
            .map(|s| json!({ "slot": s.slot, "kind": s.kind, "node": s.node }))
            .collect();
        let groups: Vec<_> = program
            .memory
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| json!({ "group": i, "values": g.values }))
            .collect();
        let doc = json!({
            "model": args.model,
            "inputs": io_json(module.inputs()),
            "outputs": io_json(module.outputs()),
            "graph": graph,
            "bytecode": program.to_string(),
            "instructions": program.instrs.len(),
            "registers": program.n_regs,
            "regions": program.regions.len(),
            "slots": slots,
            "memory_plan": groups,
        });
        crate::output::emit(&format!("{}\n", serde_json::to_string_pretty(&doc)?))
    } else {
        crate::output::emit(&format!("== graph\n{graph}\n== bytecode\n{program}"))
    }
}
