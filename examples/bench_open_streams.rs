//! Benchmark client for `ci/bench-mock.sh`: holds N concurrent streaming requests open and
//! checks that every token arrives on the mock's schedule.
//!
//! Raw HTTP/1.1 over tokio sockets keeps the client's own per-stream cost small, so the
//! numbers describe the server. Each token's lateness is its arrival minus
//! (headers + ttft + k × interval); the report is one JSON line. Loopback only.
//!
//! Usage: bench_open_streams ADDR STREAMS TTFT_MS INTERVAL_MS TOKENS
#![allow(clippy::print_stdout, reason = "a benchmark program reports on stdout")]

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

struct Outcome {
    tokens: u32,
    lateness_ms: Vec<f64>,
    ok: bool,
}

/// Connects from 127.0.0.(2 + i / 1000): with one source address, the kernel's ephemeral-port
/// search grows with every open connection and made this client, not the server, the bottleneck.
async fn connect(addr: SocketAddr, i: usize) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    let source = Ipv4Addr::new(127, 0, 0, 2 + u8::try_from(i / 1000).unwrap_or(200));
    socket.bind(SocketAddr::from((source, 0)))?;
    socket.connect(addr).await
}

async fn one_stream(addr: SocketAddr, i: usize, ttft: Duration, interval: Duration, deadline: Duration) -> Outcome {
    let mut out = Outcome { tokens: 0, lateness_ms: Vec::new(), ok: false };
    let Ok(Ok(mut sock)) = tokio::time::timeout(Duration::from_secs(10), connect(addr, i)).await else {
        return out;
    };
    let body = r#"{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hold"}]}"#;
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    if sock.write_all(req.as_bytes()).await.is_err() {
        return out;
    }
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 2048];
    let mut headers_at = None;
    let started = Instant::now();
    while started.elapsed() < deadline {
        let n = match tokio::time::timeout(deadline, sock.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => n,
            _ => break,
        };
        let now = Instant::now();
        buf.extend_from_slice(&chunk[..n]);
        if headers_at.is_none() {
            let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
            headers_at = Some(now);
            buf.drain(..end + 4);
        }
        let t0 = headers_at.unwrap_or(now);
        let text = String::from_utf8_lossy(&buf);
        for _ in 0..text.matches("\"delta\":{\"content\":\"").count() {
            let due = t0 + ttft + interval * out.tokens;
            out.lateness_ms.push(now.saturating_duration_since(due).as_secs_f64() * 1e3);
            out.tokens += 1;
        }
        let done = text.contains("data: [DONE]");
        // Keep only an unfinished tail (an event may straddle reads).
        let keep = text.rfind("\n\n").map_or(0, |i| i + 2);
        buf.drain(..keep);
        if done {
            out.ok = true;
            break;
        }
    }
    out
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 6 {
        eprintln!("usage: bench_open_streams ADDR STREAMS TTFT_MS INTERVAL_MS TOKENS");
        std::process::exit(2);
    }
    let addr: SocketAddr = args[1].parse().expect("ADDR");
    assert!(addr.ip().is_loopback(), "benchmarks only target loopback");
    let n: usize = args[2].parse().expect("STREAMS");
    let ttft = Duration::from_millis(args[3].parse().expect("TTFT_MS"));
    let interval = Duration::from_millis(args[4].parse().expect("INTERVAL_MS"));
    let tokens: u32 = args[5].parse().expect("TOKENS");
    let deadline = ttft + interval * tokens + Duration::from_secs(30);
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        tasks.push(tokio::spawn(one_stream(addr, i, ttft, interval, deadline)));
        // Ramp connects (1000 per 50 ms) so the test measures holding streams, not a SYN flood.
        if i % 1000 == 999 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let mut late = Vec::new();
    let (mut ok, mut got, mut late_50) = (0, 0u64, 0u64);
    for t in tasks {
        let o = t.await.expect("task");
        ok += usize::from(o.ok && o.tokens == tokens);
        got += u64::from(o.tokens);
        late_50 += o.lateness_ms.iter().filter(|l| **l > 50.0).count() as u64;
        late.extend(o.lateness_ms);
    }
    late.sort_by(f64::total_cmp);
    println!(
        "{{\"streams\":{n},\"complete\":{ok},\"tokens\":{got},\"expected_tokens\":{},\"late_over_50ms\":{late_50},\"lateness_p50_ms\":{:.1},\"lateness_p99_ms\":{:.1},\"lateness_max_ms\":{:.1}}}",
        n as u64 * u64::from(tokens),
        percentile(&late, 0.5),
        percentile(&late, 0.99),
        late.last().copied().unwrap_or(0.0)
    );
}
