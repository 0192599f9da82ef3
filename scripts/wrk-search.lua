-- wrk script: POST the JSON-RPC bodies of $WRK_BODIES (one per line) to /mcp in rotation and print
-- calls/s, p50/p95 and non-2xx answers (tool errors are logged by the server). Used by scripts/http-load.
local bodies = {}
for line in io.lines(os.getenv("WRK_BODIES")) do
  bodies[#bodies + 1] = line
end
local headers = { ["Content-Type"] = "application/json", ["Accept"] = "application/json, text/event-stream" }
local n = 0

request = function()
  n = n + 1
  return wrk.format("POST", "/mcp", headers, bodies[(n % #bodies) + 1])
end

done = function(summary, latency, _requests)
  io.write(string.format("calls %d in %.1f s: %.1f calls/s, p50 %.1f ms, p95 %.1f ms, HTTP errors %d\n",
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, summary.errors.status))
end
