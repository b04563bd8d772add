//! Reports that never pretend: a scenario that charges no CPU says "not
//! modelled" for usr/sys, slat and the profile (with a note) instead of
//! printing zeros as if measured; a scenario that charges CPU (the seeds)
//! keeps its figures. Design labels name the design, not pmem; NVMe queues
//! no I/O reached fold into one line.

#[path = "../common/mod.rs"]
mod common;
use common::sim;

/// `sim run` of `scenario` with `args`, stdout (exit 0 checked).
fn run(scenario: &str, args: &[&str]) -> String {
    let mut a = vec!["run", scenario];
    a.extend_from_slice(args);
    let (out, err, code) = sim(&a);
    assert_eq!(code, 0, "{err}");
    out
}

#[test]
fn no_cpu_costs_print_not_modelled() {
    let out = run(
        "scenarios/nvme.toml",
        &["--set", "job.io_size=8m", "--profile"],
    );
    assert!(
        out.contains("  cpu          : usr=not modelled, sys=not modelled, ctx="),
        "{out}"
    );
    assert!(out.contains("    slat        : not modelled\n"), "{out}");
    assert!(!out.contains("slat (nsec)"), "{out}");
    assert!(!out.contains("usr=0.00%"), "{out}");
    assert!(
        out.contains("# CPU profile: not modelled (the run charged no CPU time; see the note)"),
        "{out}"
    );
    assert!(!out.contains("# Overhead"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("note: CPU time is not modelled: the scenario charges no CPU")),
        "{out}"
    );
}

/// Seed 000's scenario charges CPU: measured figures, no note.
#[test]
fn cpu_costs_keep_their_figures() {
    let out = run(
        "scenarios/corsair_nova.toml",
        &["--set", "job.io_size=16m", "--profile"],
    );
    assert!(out.contains("  cpu          : usr=5."), "{out}");
    assert!(out.contains("    slat (nsec): min="), "{out}");
    assert!(out.contains("# Overhead  Command"), "{out}");
    assert!(!out.contains("not modelled"), "{out}");
}

/// The block layer's part0 designs on an NVMe drive are named by the
/// `accounting` value, not as pmem designs.
#[test]
fn design_labels_name_the_design() {
    let out = run(
        "scenarios/nvme.toml",
        &["--set", "job.io_size=8m", "--set", "ssd.accounting=percpu"],
    );
    let row = out
        .lines()
        .skip_while(|l| *l != "in-flight accounting lines")
        .nth(3)
        .unwrap_or_else(|| panic!("no accounting table:\n{out}"));
    assert!(row.starts_with("nvme0n1  percpu (part0)"), "{row}");
    assert!(!out.contains("pmem_"), "{out}");
}

/// Queues that saw no I/O fold into one line; queues with I/O keep theirs.
#[test]
fn idle_queues_fold_into_one_line() {
    let out = run("tests/data/queues/nvme_mq.toml", &[]);
    let table: Vec<&str> = out
        .lines()
        .skip_while(|l| *l != "nvme0n1 hardware queues")
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(table.len(), 3 + 4 + 1, "{table:#?}");
    assert_eq!(table[7], "queues 4-7: no I/O", "{table:#?}");
}

#[test]
fn the_variants_table_says_not_modelled_too() {
    // ssd_steady_state charges no CPU; its variants table has no 0.00.
    let out = run(
        "scenarios/ssd_steady_state.toml",
        &["--set", "job.runtime=20ms", "--set", "ssd.capacity=2g"],
    );
    let table: Vec<&str> = out
        .lines()
        .skip_while(|l| *l != "variants")
        .take(7)
        .collect();
    assert!(table.len() == 7, "{out}");
    assert!(table[1].contains("usr_pct") && table[1].contains("sys_pct"));
    for row in &table[3..] {
        assert_eq!(row.matches("not modelled").count(), 2, "{row}");
    }
    // dm_inflight's variants charge CPU: figures, not the words.
    let dm = run("scenarios/dm_inflight.toml", &["--set", "job.runtime=2ms"]);
    let v: Vec<&str> = dm.lines().skip_while(|l| *l != "variants").collect();
    assert!(
        v.len() > 3 && !v.iter().any(|l| l.contains("not modelled")),
        "{dm}"
    );
}
