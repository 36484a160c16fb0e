//! `tokensieve bench`: MaskBench runs (direct and pack mode), reports, and
//! the JSON-Schema-Test-Suite as mask walks.

use clap::Subcommand;

#[derive(Subcommand)]
pub enum BenchCommand {}

pub fn run(cmd: BenchCommand) -> anyhow::Result<u8> {
    match cmd {}
}
