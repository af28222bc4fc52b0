use super::*;

const AZURE: &str = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
2023-11-16 18:17:03.9799600,4808,10\n\
2023-11-16 18:17:04.0319600,3180,8\n\
2023-11-16 18:17:04.0319600,110,27\n\
2023-11-16 18:17:05.9799600,7433,14\n";

fn jsonl(rows: &[(u64, u32, u32)]) -> Trace {
    let text: String = rows
        .iter()
        .map(|(t, i, o)| format!("{{\"timestamp\": {t}, \"input_length\": {i}, \"output_length\": {o}}}\n"))
        .collect();
    Trace {
        file: "t.jsonl".into(),
        format: TraceFormat::Jsonl,
        rows: Arc::new(parse(&text, TraceFormat::Jsonl).unwrap()),
    }
}

fn play(speed: f64, rate: Option<f64>, from_s: u64, span_s: u64) -> TracePlay {
    TracePlay { trace: 0, speed, from_us: from_s * 1_000_000, span_us: span_s * 1_000_000, rate }
}

#[test]
fn azure_wall_times_become_offsets_from_the_first_row_and_ties_keep_file_order() {
    let rows = parse(AZURE, TraceFormat::Azure).unwrap();
    let got: Vec<(u64, u32, u32)> = rows.iter().map(|r| (r.offset_us, r.input, r.output)).collect();
    assert_eq!(got, [(0, 4808, 10), (52_000, 3180, 8), (52_000, 110, 27), (2_000_000, 7433, 14)]);
}

#[test]
fn mooncake_rows_keep_their_prefix_blocks_and_need_them() {
    let text = "{\"timestamp\": 0, \"input_length\": 6758, \"output_length\": 500, \"hash_ids\": [0, 1, 2]}\n\
                {\"timestamp\": 1500, \"input_length\": 700, \"output_length\": 5, \"hash_ids\": [0, 3]}\n";
    let rows = parse(text, TraceFormat::Mooncake).unwrap();
    assert_eq!(rows[1], TraceRow { offset_us: 1_500_000, input: 700, output: 5, blocks: vec![0, 3].into() });
    let bare = "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n";
    assert!(parse(bare, TraceFormat::Mooncake).unwrap_err().contains("line 1: no hash_ids"));
    assert_eq!(parse(bare, TraceFormat::Jsonl).unwrap().len(), 1);
}

#[test]
fn a_damaged_trace_names_its_line() {
    let cases = [
        (
            TraceFormat::Azure,
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,12,x\n",
            "line 2: GeneratedTokens \"x\"",
        ),
        (TraceFormat::Azure, "time,a,b\n", "line 1: header"),
        (
            TraceFormat::Azure,
            "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,2\n",
            "line 2: timestamp \"yesterday\"",
        ),
        (
            TraceFormat::Jsonl,
            "{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 1}\n{\"timestamp\": 4, \"input_length\": 1, \"output_length\": 1}\n",
            "line 2: a timestamp earlier",
        ),
        (TraceFormat::Jsonl, "{\"timestamp\": 5, \"input_length\": -1, \"output_length\": 1}\n", "line 1:"),
        (
            TraceFormat::Jsonl,
            "{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 1, \"cmd\": \"rm\"}\n",
            "unknown field",
        ),
    ];
    for (format, text, want) in cases {
        let e = parse(text, format).unwrap_err();
        assert!(e.contains(want), "{e:?} should contain {want:?}");
    }
}

#[test]
fn a_trace_of_k_rows_plans_exactly_k_at_their_offsets_and_half_speed_doubles_them() {
    let t = jsonl(&[(0, 10, 1), (250, 10, 2), (250, 10, 3), (1000, 10, 4), (3999, 10, 5)]);
    let whole = play(1.0, None, 0, 10).plan(&t, u64::MAX, 1);
    assert_eq!(
        whole.iter().map(|p| (p.at_us, p.row)).collect::<Vec<_>>(),
        [(0, 0), (250_000, 1), (250_000, 2), (1_000_000, 3), (3_999_000, 4)]
    );
    let slow = play(0.5, None, 0, 10).plan(&t, u64::MAX, 1);
    assert!(whole.iter().zip(&slow).all(|(a, b)| b.at_us == 2 * a.at_us && a.row == b.row));
    let fast = play(2.0, None, 0, 10).plan(&t, u64::MAX, 1);
    assert_eq!(fast[4].at_us, 1_999_500);
    assert_eq!(play(1.0, None, 0, 10).plan(&t, 1_000_000, 1).len(), 3, "a stage shorter than the trace cuts it");
}

#[test]
fn a_window_gives_exactly_its_rows_from_its_start() {
    let t = jsonl(&(0..100).map(|i| (i * 100, 1, 1)).collect::<Vec<_>>());
    let p = TracePlay { trace: 0, speed: 1.0, from_us: 2_050_000, span_us: 1_000_000, rate: None };
    let plan = p.plan(&t, u64::MAX, 1);
    assert_eq!(plan.len(), 10, "rows at 2.1 s … 3.0 s");
    assert_eq!((plan[0].row, plan[0].at_us), (21, 50_000), "offsets from the window's start");
    assert_eq!(plan[9].row, 30);
}

#[test]
fn a_target_rate_thins_or_superposes_to_that_mean_exactly_and_by_seed() {
    // 1,000 bursty rows over 100 s: 10 req/s on average.
    let rows: Vec<(u64, u32, u32)> = (0..1000u64).map(|i| ((i / 50) * 5000 + (i % 50), 1, 1)).collect();
    let t = jsonl(&rows);
    for target in [2.5, 10.0, 37.0] {
        let plan = play(1.0, Some(target), 0, 100).plan(&t, 100_000_000, 7);
        let rate = plan.len() as f64 / 100.0;
        assert!((rate - target).abs() <= 0.05 * target, "{target}: {rate}");
        assert!(plan.windows(2).all(|w| w[0].at_us <= w[1].at_us), "in time order");
        assert_eq!(plan, play(1.0, Some(target), 0, 100).plan(&t, 100_000_000, 7), "the same seed, the same plan");
    }
    assert_ne!(play(1.0, Some(2.5), 0, 100).plan(&t, u64::MAX, 7), play(1.0, Some(2.5), 0, 100).plan(&t, u64::MAX, 8));
    let mean = play(2.0, None, 0, 100).mean_rate(&t, 50_000_000, 1);
    assert!((mean - 20.0).abs() < 0.5, "twice as fast, twice the rate: {mean}");
}

#[test]
fn the_shipped_traces_read_whole() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("traces");
    let azure = Trace::read(&root.join("azure-llm-2023-code.csv"), TraceFormat::Azure).unwrap();
    // 8,819 rows (the traces' README says 8,818), with CRLF line ends.
    assert_eq!(azure.rows.len(), 8819);
    assert!((3_300..3_500).contains(&(azure.span_us() / 1_000_000)), "about 57 minutes");
    let moon = Trace::read(&root.join("mooncake-fast25-conversation.jsonl"), TraceFormat::Mooncake).unwrap();
    assert_eq!(moon.rows.len(), 12_031);
    assert!(moon.rows.iter().all(|r| !r.blocks.is_empty()));
}
