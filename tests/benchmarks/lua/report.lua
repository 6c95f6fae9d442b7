-- Appended to every wrk script: after wrk's own report, one machine-readable line that the
-- runner parses (wrk's text output is kept under results/raw/ as well).
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "BENCH_JSON {\"requests\":%d,\"duration_us\":%d,\"bytes\":%d,\"connect\":%d," ..
    "\"read\":%d,\"write\":%d,\"status\":%d,\"timeout\":%d,\"p50_us\":%d,\"p90_us\":%d," ..
    "\"p99_us\":%d,\"mean_us\":%.1f,\"max_us\":%d}\n",
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write,
    e.status, e.timeout, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.mean, latency.max))
end
