//! `tokensieve bench`: MaskBench runs (direct and pack mode, the contract in
//! `../shared/bench/CONTRACT.md`), their report, and the
//! JSON-Schema-Test-Suite as mask walks; `grammars`, code grammars over
//! texts in the same record format; `instances`, generated instances
//! judged by a validator; `e2e`, a real model with
//! constraints and jump-forward on and off.
//!
//! Every run here walks tokens with [`tokensieve::bench_protocol`], the one
//! implementation of the contract's protocol that the conformance test
//! `tests/maskbench_sample.rs` uses too.

#[cfg(feature = "generate")]
mod e2e;
mod grammars;
mod inputs;
mod instances;
mod jsts;
mod maskbench;
mod packs;
mod plot;
mod progress;
mod record;
mod report;
mod soak;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Direct mode: run MaskBench files and write one JSON record per file.
    Maskbench(maskbench::MaskbenchArgs),
    /// Pack mode: speak the peerbench driver's protocol on stdout.
    Packs(packs::PacksArgs),
    /// Grammars walked over texts they accept (code grammars), one
    /// MaskBench-format record per grammar.
    Grammars(grammars::GrammarsArgs),
    /// Score MaskBench result files (ours or peerbench's) as markdown tables.
    Report(report::ReportArgs),
    /// Run the JSON-Schema-Test-Suite as mask walks and print pass rates.
    Jsts(jsts::JstsArgs),
    /// The engine under load: threads sharing a grammar cache, batches,
    /// cancelled and timed-out compiles; tails, errors and memory.
    Soak(soak::SoakArgs),
    /// Generated valid and near-miss instances of each schema through the
    /// backends, judged by the `jsonschema` crate: counts per class.
    Instances(instances::InstancesArgs),
    /// A real model end to end: constraints off / on, jump-forward off / on.
    #[cfg(feature = "generate")]
    E2e(e2e::E2eArgs),
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<u8> {
    match cmd {
        BenchCommand::Maskbench(args) => maskbench::run(&args),
        BenchCommand::Packs(args) => packs::run(&args),
        BenchCommand::Grammars(args) => grammars::run(&args),
        BenchCommand::Report(args) => report::run(&args),
        BenchCommand::Jsts(args) => jsts::run(&args),
        BenchCommand::Soak(args) => soak::run(&args),
        BenchCommand::Instances(args) => instances::run(&args),
        #[cfg(feature = "generate")]
        BenchCommand::E2e(args) => e2e::run(&args),
    }
}
