-- wrk script for ci/bench-mock.sh: a small non-streaming chat completion, and a machine-readable
-- summary (latency in µs, including p99.9 which wrk's own --latency output lacks).
wrk.method = "POST"
wrk.body = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello there"}]}'
wrk.headers["Content-Type"] = "application/json"

done = function(summary, latency, requests)
  io.write(string.format("LAT p50=%d p99=%d p999=%d max=%d\n",
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max))
  io.write(string.format("ERR connect=%d read=%d write=%d timeout=%d status=%d\n",
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.timeout, summary.errors.status))
  io.write(string.format("REQ requests=%d duration_us=%d\n", summary.requests, summary.duration))
end
