//! Writes a synthetic blktrace v7 capture for benchmarks:
//! `synth_capture OUT RECORDS`. Two CPUs, each a realistic Q/G/P/U/I/D/C
//! life cycle (with A remaps and U payloads, as in the NVMe sample),
//! interleaved in chunks of 64 records as a piped `blktrace -o -` writes
//! them, so blkparse's batch sort has work to do. Deterministic.
use std::io::{BufWriter, Write};

use blocksim_traces::blktrace::{action_word, encode_record};
use blocksim_traces::{cat, Action};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: synth_capture OUT RECORDS");
        std::process::exit(2);
    }
    let records: u64 = args[2].parse().expect("RECORDS is an integer");
    let mut out = BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(&args[1]).expect("create OUT"),
    );
    let dev = 259u32 << 20; // device 259,0 as in the NVMe sample
    let life: [(Action, u16, usize); 8] = [
        (Action::Remap, cat::READ | cat::AHEAD | cat::QUEUE, 16),
        (Action::Queue, cat::READ | cat::AHEAD | cat::QUEUE, 0),
        (Action::GetRq, cat::READ | cat::AHEAD | cat::QUEUE, 0),
        (Action::Plug, cat::QUEUE, 0),
        (Action::Unplug, cat::QUEUE, 8),
        (Action::Insert, cat::READ | cat::AHEAD | cat::QUEUE, 0),
        (Action::Issue, cat::READ | cat::AHEAD | cat::ISSUE, 0),
        (Action::Complete, cat::READ | cat::AHEAD | cat::COMPLETE, 0),
    ];
    let mut rec = Vec::with_capacity(128);
    let mut chunks: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    let mut seq = [0u32; 2];
    let mut lcg: u64 = 0x2545_f491_4f6c_dd1d;
    let mut written = 0u64;
    let mut t: u64 = 1_000_000_000;
    while written < records {
        for cpu in 0..2usize {
            for _ in 0..64 {
                let step = (seq[cpu] as usize) % life.len();
                if step == 0 {
                    lcg = lcg
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                }
                let sector = (lcg >> 20) % (1 << 31);
                seq[cpu] += 1;
                t += 97 + (lcg >> 60);
                let (a, c, pdu_len) = life[step];
                let pdu: &[u8] = match pdu_len {
                    16 => &[
                        0x10, 0x30, 0, 3, 0x10, 0x30, 0, 0, 0, 0, 0, 0, 0x8b, 0xcd, 0xa7, 0x18,
                    ],
                    8 => &[0, 0, 0, 0, 0, 0, 0, 1],
                    _ => &[],
                };
                let bytes = if matches!(a, Action::Plug | Action::Unplug) {
                    0
                } else {
                    4096
                };
                let s = if bytes == 0 { 0 } else { sector };
                rec.clear();
                encode_record(
                    &mut rec,
                    false,
                    seq[cpu],
                    t + cpu as u64,
                    s,
                    bytes,
                    action_word(a, c),
                    1000 + cpu as u32,
                    dev,
                    cpu as u32,
                    pdu,
                );
                chunks[cpu].extend_from_slice(&rec);
                written += 1;
            }
        }
        for c in &mut chunks {
            out.write_all(c).expect("write");
            c.clear();
        }
    }
    out.flush().expect("flush");
    eprintln!("wrote {written} records");
}
