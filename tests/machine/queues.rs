//! Hardware queues and interrupts: an NVMe drive with a queue pair per CPU
//! handles each libaio job's completions on that job's CPU; shared queues
//! interrupt the CPU their vector targets; interrupt coalescing lowers the
//! interrupts per I/O; AHCI keeps one queue and one interrupt.

#[path = "../common/mod.rs"]
mod common;

use common::sim;
use serde_json::Value;

const MQ: &str = "tests/data/queues/nvme_mq.toml";

/// One row of the "<dev> hardware queues" table.
#[derive(Debug)]
struct QueueRow {
    cpus: String,
    irq_cpu: Option<u64>,
    commands: u64,
    interrupts: u64,
    handler_ms: f64,
}

/// Runs `sim run` in JSON; returns the queue rows and the total read IOPS.
fn run_json(extra: &[&str]) -> (Vec<QueueRow>, f64) {
    let mut args = vec!["run", MQ, "--output-format", "json"];
    args.extend_from_slice(extra);
    let (out, err, code) = sim(&args);
    assert_eq!(code, 0, "sim failed: {err}");
    let doc: Value = serde_json::from_str(&out).expect("json report");
    let table = doc["blocksim"]["extra_tables"]
        .as_array()
        .expect("extra tables")
        .iter()
        .find(|t| t["title"] == "nvme0n1 hardware queues")
        .expect("a hardware queue table");
    let rows = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| QueueRow {
            cpus: r[1].as_str().unwrap().to_string(),
            irq_cpu: r[2].as_u64(),
            commands: r[3].as_u64().unwrap(),
            interrupts: r[4].as_u64().unwrap(),
            handler_ms: r[6].as_f64().unwrap(),
        })
        .collect();
    let iops = doc["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["read"]["iops"].as_f64().unwrap())
        .sum();
    (rows, iops)
}

fn per_interrupt(rows: &[QueueRow]) -> f64 {
    let c: u64 = rows.iter().map(|r| r.commands).sum();
    let i: u64 = rows.iter().map(|r| r.interrupts).sum();
    c as f64 / i as f64
}

#[test]
fn each_job_completes_on_its_own_cpu() {
    // Linux's default: 8 queues on 8 CPUs, queue q = CPU q, its vector on
    // CPU q. The four jobs run on CPUs 0-3.
    let (rows, _) = run_json(&[]);
    assert_eq!(rows.len(), 8);
    for (q, r) in rows.iter().enumerate() {
        assert_eq!(r.cpus, q.to_string());
        assert_eq!(r.irq_cpu, Some(q as u64));
        if q < 4 {
            assert_eq!(r.commands, 8192, "queue {q}: {r:?}");
            assert!(r.interrupts > 0 && r.handler_ms > 0.0, "queue {q}: {r:?}");
        } else {
            assert_eq!((r.commands, r.interrupts), (0, 0), "queue {q}: {r:?}");
        }
    }
    // The handler wakes only jobs on its own CPU: no remote wake-ups.
    let (out, _, code) = sim(&["run", MQ, "--profile"]);
    assert_eq!(code, 0);
    assert!(out.contains("nvme_irq") && out.contains("nvme_pci_complete_rq"));
    assert!(!out.contains("select_task_rq_fair"), "{out}");
}

#[test]
fn shared_queues_interrupt_the_cpu_their_vector_targets() {
    // 3 queues on 8 CPUs: group_cpus_evenly gives 3, 3, 2 CPUs; the vector
    // matrix puts each vector on the last least-loaded CPU of its group.
    let (rows, _) = run_json(&["--set", "ssd.nvme_queues=3"]);
    let got: Vec<(&str, Option<u64>, u64)> = rows
        .iter()
        .map(|r| (r.cpus.as_str(), r.irq_cpu, r.commands))
        .collect();
    assert_eq!(
        got,
        vec![
            ("0-2", Some(2), 3 * 8192),
            ("3-5", Some(5), 8192),
            ("6-7", Some(7), 0)
        ]
    );
    // Jobs on CPUs 0, 1 and 3 are woken from another CPU.
    let (out, _, code) = sim(&["run", MQ, "--profile", "--set", "ssd.nvme_queues=3"]);
    assert_eq!(code, 0);
    assert!(out.contains("select_task_rq_fair"), "{out}");
}

#[test]
fn coalescing_lowers_interrupts_per_io() {
    let (off, iops_off) = run_json(&[]);
    let (on, iops_on) = run_json(&[
        "--set",
        "ssd.irq_aggregation_time_100us=1",
        "--set",
        "ssd.irq_aggregation_threshold=3",
    ]);
    let (p_off, p_on) = (per_interrupt(&off), per_interrupt(&on));
    // Off: about one interrupt per command (iodepth 8 on a drive that
    // completes them one by one). On: up to 4 entries or 100 us per
    // interrupt.
    assert!(
        p_off < 1.2,
        "without coalescing {p_off} commands per interrupt"
    );
    assert!(p_on > 2.5, "with coalescing {p_on} commands per interrupt");
    let handler = |rows: &[QueueRow]| rows.iter().map(|r| r.handler_ms).sum::<f64>();
    assert!(handler(&on) < handler(&off));
    assert!(
        (iops_on / iops_off - 1.0).abs() < 0.1,
        "{iops_on} vs {iops_off}"
    );
}

#[test]
fn ahci_keeps_one_queue_and_rejects_nvme_keys() {
    let (out, err, code) = sim(&[
        "run",
        "scenarios/corsair_nova.toml",
        "--set",
        "job.size=256m",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("hardware queues"), "{out}");
    let (_, err, code) = sim(&[
        "run",
        "scenarios/corsair_nova.toml",
        "--set",
        "ssd.nvme_queues=2",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("interface = \"nvme\" only"), "{err}");
}
