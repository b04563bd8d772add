//! `sim replay`: blktrace and other formats through a scenario's stack.

#[path = "../common/mod.rs"]
mod common;
use common::{sim, temp_file};

#[test]
fn blktrace_through_nvme_prints_the_demerit() {
    let (out, err, code) = sim(&[
        "replay",
        "tests/data/traces/blktrace/sample.blktrace.0",
        "--stack",
        "scenarios/nvme.toml",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("issued rwts: total=963,0,0,0"), "{out}");
    assert!(out.contains("D2C: simulated vs traced (us)"), "{out}");
    let line = out
        .lines()
        .find(|l| l.contains("D2C demerit"))
        .expect("demerit line");
    assert!(line.contains("% of the traced mean"), "{line}");
    // Deterministic.
    let (again, _, _) = sim(&[
        "replay",
        "tests/data/traces/blktrace/sample.blktrace.0",
        "--stack",
        "scenarios/nvme.toml",
    ]);
    assert_eq!(out, again);
}

#[test]
fn closed_loop_and_speed_change_timing() {
    let base = [
        "replay",
        "tests/data/traces/blktrace/sample.blktrace.0",
        "--stack",
        "scenarios/nvme.toml",
    ];
    let run = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        let (out, err, code) = sim(&a);
        assert_eq!(code, 0, "{err}");
        let l = out
            .lines()
            .find(|l| l.trim_start().starts_with("read: IOPS="))
            .unwrap()
            .to_string();
        l
    };
    let open = run(&[]);
    let fast = run(&["--speed", "10"]);
    let closed = run(&["--timing", "closed", "--depth", "16"]);
    assert_ne!(open, fast);
    assert_ne!(open, closed);
}

#[test]
fn other_formats_replay() {
    for (f, extra) in [
        (
            "tests/data/traces/cache/cloudPhysicsIO.vscsi",
            "113872 requests issued",
        ),
        (
            "tests/data/traces/cache/cloudPhysicsIO.csv",
            "113872 requests issued",
        ),
        (
            "tests/data/traces/iolog/fio333_randrw.v3.iolog",
            "requests issued",
        ),
        (
            "tests/data/traces/iolog/t0038.iolog",
            "trim/flush requests skipped",
        ),
    ] {
        let (out, err, code) = sim(&[
            "replay",
            f,
            "--stack",
            "scenarios/nvme.toml",
            "--timing",
            "closed",
            "--depth",
            "8",
        ]);
        assert_eq!(code, 0, "{f}: {err}");
        assert!(out.contains(extra), "{f}: {out}");
    }
}

#[test]
fn bad_replay_input_exits_2() {
    let (_, err, code) = sim(&["replay", "Cargo.toml", "--stack", "scenarios/nvme.toml"]);
    assert_eq!(code, 2, "{err}");
    let (_, err, code) = sim(&[
        "replay",
        "tests/data/traces/blktrace/sample.blktrace.0",
        "--stack",
        "scenarios/nvme.toml",
        "--map",
        "259,0=sdz",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("not a stack device"), "{err}");
}

/// An iolog v2 trace: `inside` reads at the start of the device, then
/// `beyond` reads past the 2 TiB of scenarios/nvme.toml.
fn iolog(inside: u32, beyond: u32) -> String {
    let mut t = String::from("fio version 2 iolog\n/dev/sda add\n/dev/sda open\n");
    for i in 0..inside {
        t.push_str(&format!("/dev/sda read {} 4096\n", u64::from(i) * 4096));
    }
    for i in 0..beyond {
        t.push_str(&format!(
            "/dev/sda read {} 4096\n",
            (3u64 << 40) + u64::from(i) * 4096
        ));
    }
    t.push_str("/dev/sda close\n");
    t
}

#[test]
fn a_replay_that_replays_nothing_fails() {
    // The sample addresses 1.2 TB; corsair_nova's bcache0 is smaller.
    let (out, err, code) = sim(&[
        "replay",
        "tests/data/traces/blktrace/sample.blktrace.0",
        "--stack",
        "scenarios/corsair_nova.toml",
    ]);
    assert_eq!(code, 2, "{out}\n{err}");
    for needle in [
        "nothing replayed",
        "963 requests beyond the end of the target device",
        "capacity",
        "--map",
    ] {
        assert!(err.contains(needle), "lacks {needle:?}: {err}");
    }
    // Empty trace: "empty", not `starts with ""`.
    let empty = temp_file("replay", "empty.iolog", "");
    let (_, err, code) = sim(&[
        "replay",
        empty.to_str().unwrap(),
        "--stack",
        "scenarios/nvme.toml",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("empty") && !err.contains("starts with"),
        "{err}"
    );
}

#[test]
fn a_replay_that_skips_most_of_the_trace_needs_lenient() {
    let run = |name: &str, text: &str, extra: &[&str]| {
        let p = temp_file("replay", name, text);
        let mut a = vec![
            "replay",
            p.to_str().unwrap(),
            "--stack",
            "scenarios/nvme.toml",
            "--timing",
            "closed",
        ];
        a.extend_from_slice(extra);
        let (out, err, code) = sim(&a);
        (out, err, code)
    };
    let (_, err, code) = run("most.iolog", &iolog(1, 2), &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("2 of 3 skipped (66.7%), more than 50%") && err.contains("--lenient"),
        "{err}"
    );
    let (out, err, code) = run("most.iolog", &iolog(1, 2), &["--lenient"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(
            "1 requests issued, 0 skipped (zero length), 2 skipped (beyond the target device)"
        ),
        "{out}"
    );
    // Half or less skipped: a normal replay.
    let (out, err, code) = run("half.iolog", &iolog(2, 2), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("2 requests issued"), "{out}");
}

#[test]
fn the_stack_may_be_a_variant() {
    let base = std::fs::read_to_string("scenarios/nvme.toml").unwrap();
    let text = format!(
        "{base}\n[[variant]]\nname = \"slow\"\nset = {{ \"ssd.page_read\" = \"200us\" }}\n"
    );
    let p = temp_file("replay", "nvme_variants.toml", &text);
    let spec = format!("{}:slow", p.display());
    let trace = "tests/data/traces/blktrace/sample.blktrace.0";
    let (variant, err, code) = sim(&["replay", trace, "--stack", &spec]);
    assert_eq!(code, 0, "{err}");
    let (set, err, code) = sim(&[
        "replay",
        trace,
        "--stack",
        "scenarios/nvme.toml",
        "--set",
        "ssd.page_read=200us",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        variant, set,
        "--stack FILE:VARIANT replays onto that variant"
    );
    let (base, _, _) = sim(&["replay", trace, "--stack", "scenarios/nvme.toml"]);
    assert_ne!(variant, base, "the variant changes the replay");
}

/// A replay onto a device that returns I/O errors counts them (the replay
/// goes on, as a trace replayer does) and reports `err= 5`.
#[test]
fn replay_counts_failed_requests() {
    let (out, err, code) = sim(&[
        "replay",
        "tests/data/traces/blktrace/sample.blktrace.0",
        "--stack",
        "scenarios/nvme.toml",
        "--inject-fault",
        "seed:1+fail:0.05",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("err= 5:"), "{out}");
    let failed: u64 = out
        .lines()
        .filter_map(|l| l.strip_prefix("note: replay: "))
        .find(|l| l.contains("completed with an I/O error"))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the failed-request note");
    // About 5% of 963.
    assert!((20..=100).contains(&failed), "{failed}: {out}");
    let (clean, _, _) = sim(&[
        "replay",
        "tests/data/traces/blktrace/sample.blktrace.0",
        "--stack",
        "scenarios/nvme.toml",
    ]);
    assert!(clean.contains("err= 0:"), "{clean}");
    assert!(!clean.contains("I/O error"), "{clean}");
}

/// Without --map the report names the stack device the trace went to (and
/// the traced devices); with --map it lists each mapping.
#[test]
fn replay_names_the_device_requests_land_on() {
    let trace = "tests/data/traces/blktrace/sample.blktrace.0";
    let (out, err, code) = sim(&["replay", trace, "--stack", "scenarios/nvme.toml"]);
    assert_eq!(code, 0, "{err}");
    let note = out
        .lines()
        .find(|l| l.starts_with("note: replay: no --map"))
        .unwrap_or_else(|| panic!("no routing note:\n{out}"));
    assert!(
        note.contains("go to nvme0n1, the top of the stack")
            && note.contains("259,0 (963 requests)"),
        "{note}"
    );
    let (out, err, code) = sim(&[
        "replay",
        trace,
        "--stack",
        "scenarios/nvme.toml",
        "--map",
        "259,0=nvme0n1",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("note: replay: devices by --map: 259,0 -> nvme0n1 (963 requests)"),
        "{out}"
    );
}

/// A trace file that does not exist: one error line, the OS reason once.
#[test]
fn missing_trace_errors_once() {
    let (_, err, code) = sim(&[
        "replay",
        "tests/data/traces/no-such-trace.blktrace",
        "--stack",
        "scenarios/nvme.toml",
    ]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no-such-trace.blktrace"), "{err}");
}

/// Binary bytes of an unrecognised file are escaped in the error, never
/// written to the terminal raw (no control characters, no U+FFFD from
/// invalid UTF-8).
#[test]
fn garbage_trace_is_escaped_in_errors() {
    let p = temp_file("replay-garbage", "garbage.bin", "");
    std::fs::write(
        &p,
        b"\xff\xfe\x1b[2J\x07bin\x80\x81\xc3(\x00\x01junk\nmore\n",
    )
    .unwrap();
    let (_, err, code) = sim(&[
        "replay",
        p.to_str().unwrap(),
        "--stack",
        "scenarios/nvme.toml",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot detect the trace format"), "{err}");
    assert!(
        err.contains(r"\xff\xfe\u{1b}[2J\u{7}bin\x80\x81\xc3("),
        "{err}"
    );
    let raw: Vec<char> = err
        .chars()
        .filter(|&c| (c.is_control() && c != '\n') || c == '\u{fffd}')
        .collect();
    assert!(raw.is_empty(), "raw bytes {raw:?} in {err:?}");
}

/// blkparse's `[fio]` process names reach `trace stats`' per-process table.
#[test]
fn blkparse_process_names_are_kept() {
    let text = std::fs::read_to_string("tests/data/traces/blktrace/sample.blkparse.txt").unwrap();
    let p = temp_file(
        "replay-comm",
        "fio.blkparse.txt",
        &text.replace("[(null)]", "[fio]"),
    );
    let (out, err, code) = sim(&["trace", "stats", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let row = out
        .lines()
        .skip_while(|l| !l.starts_with("per process"))
        .nth(1)
        .unwrap_or_else(|| panic!("no per-process table:\n{out}"));
    assert!(row.starts_with("fio "), "{row}");
}
