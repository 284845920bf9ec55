//! `shapejit bench`: a short run exercising every tier, its JSON and SVG outputs,
//! and `--compare`.

use std::process::Command;

fn bench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_shapejit"))
        .arg("bench")
        .args(args)
        .env_remove("SHAPEJIT_JIT")
        .output()
        .unwrap()
}

#[test]
fn short_bench_runs_every_tier_and_writes_json_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let svg = dir.path().join("bench.svg");
    let (iters, warmup) = (14, 4);
    let out = bench(&[
        "builtin:mlp",
        "--iters",
        &iters.to_string(),
        "--warmup",
        &warmup.to_string(),
        "--tiers",
        "interp,jit,jit-sync,jit-fixed",
        "--json",
        json.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    for tier in ["interp", "jit", "jit-sync", "jit-fixed"] {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{tier} "))),
            "no row for {tier}:\n{text}"
        );
    }

    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let records = doc["iterations"].as_array().unwrap();
    assert_eq!(records.len(), 4 * iters, "every iteration of every tier");
    for tier in ["interp", "jit", "jit-sync", "jit-fixed"] {
        let iters_of: Vec<u64> = records
            .iter()
            .filter(|r| r["tier"] == tier)
            .map(|r| r["iter"].as_u64().unwrap())
            .collect();
        assert_eq!(iters_of, (0..iters as u64).collect::<Vec<_>>(), "{tier}");
    }
    for r in records {
        assert!(r["latency_us"].as_f64().unwrap() > 0.0);
        assert!(
            ["interp", "exact", "family"].contains(&r["served_by"].as_str().unwrap()),
            "{r}"
        );
        assert!(r["batch"].as_u64().is_some());
    }
    // The default walk (seed 7) starts at 1, 1, 1, ...: the interp records follow it.
    assert_eq!(records[0]["batch"], 1);
    let tiers = doc["tiers"].as_array().unwrap();
    assert_eq!(tiers.len(), 4);
    for t in tiers {
        for field in [
            "mean_us",
            "compile_count",
            "compile_ms_total",
            "cache_hit_rate",
            "first_call_after_new_shape_us",
        ] {
            assert!(t[field].is_number(), "{field} in {}", t["tier"]);
        }
        let per_batch = t["per_batch"].as_object().unwrap();
        let counted: u64 = per_batch
            .values()
            .map(|b| b["count"].as_u64().unwrap())
            .sum();
        assert_eq!(
            counted,
            (iters - warmup) as u64,
            "measured iterations of {}",
            t["tier"]
        );
        for b in per_batch.values() {
            let (median, p99) = (
                b["median_us"].as_f64().unwrap(),
                b["p99_us"].as_f64().unwrap(),
            );
            assert!(median > 0.0 && p99 >= median);
        }
        assert!(t["profile"]["by_op"].is_array());
    }
    let fixed = tiers.iter().find(|t| t["tier"] == "jit-fixed").unwrap();
    assert_eq!(
        fixed["per_batch"].as_object().unwrap().len(),
        1,
        "jit-fixed runs one batch size"
    );

    let svg_text = std::fs::read_to_string(&svg).unwrap();
    let mut reader = quick_xml::Reader::from_str(&svg_text);
    let (mut depth, mut circles, mut root) = (0i64, 0usize, None);
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Start(e)) => {
                root.get_or_insert_with(|| String::from_utf8_lossy(e.name().as_ref()).into_owned());
                circles += usize::from(e.name().as_ref() == b"circle");
                depth += 1;
            }
            Ok(quick_xml::events::Event::End(_)) => depth -= 1,
            Ok(quick_xml::events::Event::Empty(e)) if e.name().as_ref() == b"circle" => {
                circles += 1
            }
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("invalid SVG at {}: {e}", reader.buffer_position()),
        }
    }
    assert_eq!(depth, 0, "balanced tags");
    assert_eq!(root.as_deref(), Some("svg"));
    assert!(circles >= 4 * iters - 10, "points are drawn ({circles})");
    assert!(!svg_text.contains("<script"));

    // The report reads back as a peer result.
    let out = bench(&[
        "builtin:mlp",
        "--iters",
        "4",
        "--warmup",
        "1",
        "--tiers",
        "interp",
        "--compare",
        json.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("jit-fixed ms"), "compare columns:\n{text}");
}

#[test]
fn trace_workloads_drive_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.txt");
    std::fs::write(&trace, "# batch sizes\n2\n3\nbatch=5\n").unwrap();
    let json = dir.path().join("b.json");
    let out = bench(&[
        "builtin:elementwise",
        "--workload",
        &format!("trace:{}", trace.display()),
        "--iters",
        "6",
        "--warmup",
        "0",
        "--tiers",
        "interp",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let labels: Vec<String> = doc["iterations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| match r["batch"].as_u64() {
            Some(b) => b.to_string(),
            None => format!("batch={}", r["dims"]["batch"]),
        })
        .collect();
    assert_eq!(labels, ["2", "3", "batch=5", "2", "3", "batch=5"]);
}
