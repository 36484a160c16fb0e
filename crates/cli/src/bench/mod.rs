//! `tokensieve bench`: MaskBench runs (direct and pack mode, the contract in
//! `../shared/bench/CONTRACT.md`), their report, and the
//! JSON-Schema-Test-Suite as mask walks.
//!
//! Every run here walks tokens with [`tokensieve::bench_protocol`], the one
//! implementation of the contract's protocol that the conformance test
//! `tests/maskbench_sample.rs` uses too.

mod inputs;
mod jsts;
mod maskbench;
mod packs;
mod plot;
mod progress;
mod record;
mod report;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Direct mode: run MaskBench files and write one JSON record per file.
    Maskbench(maskbench::MaskbenchArgs),
    /// Pack mode: speak the peerbench driver's protocol on stdout.
    Packs(packs::PacksArgs),
    /// Score MaskBench result files (ours or peerbench's) as markdown tables.
    Report(report::ReportArgs),
    /// Run the JSON-Schema-Test-Suite as mask walks and print pass rates.
    Jsts(jsts::JstsArgs),
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<u8> {
    match cmd {
        BenchCommand::Maskbench(args) => maskbench::run(&args),
        BenchCommand::Packs(args) => packs::run(&args),
        BenchCommand::Report(args) => report::run(&args),
        BenchCommand::Jsts(args) => jsts::run(&args),
    }
}
