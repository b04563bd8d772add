//! Minimal `sim trace dump` equivalent over this crate alone (used by the
//! benchmark script when the full CLI is not wanted):
//! `cargo run --release -p blocksim-traces --example trace_dump -- FILE...`
use std::io::Write;
use std::path::PathBuf;

fn main() {
    let files: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let opts = blocksim_traces::OpenOptions::default();
    let reader = match blocksim_traces::open_many(&files, &opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match blocksim_traces::dump::write_csv(reader, &mut out) {
        Ok(s) => eprintln!("{} events, {} lines", s.events, s.lines),
        Err(e) => {
            let _ = out.flush();
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
