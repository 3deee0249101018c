-- wrk script for bench/kappi_bench.py: POST /agents/{id}/query with a different body per request.
--
-- Arguments (after `--`): BODIES TOKEN ALLOWED SAMPLE_EVERY
--   BODIES        file with one JSON request body per line, sent in order and cycled
--   TOKEN         bearer token of the benchmark user
--   ALLOWED       comma-separated collections the user may read
--   SAMPLE_EVERY  check every Nth response: citations only from ALLOWED, a non-empty answer
-- KAPPI_BENCH_DELAY_MS (environment), when set, paces each connection: it waits that many ms after a response
-- before its next request, so 16 connections offer a steady rate instead of as many requests as they can.
-- done() prints one line "KAPPI_BENCH_JSON {...}" that the benchmark parses.

local pace_ms = tonumber(os.getenv("KAPPI_BENCH_DELAY_MS") or "") or 0
if pace_ms > 0 then
   function delay()
      return pace_ms
   end
end

local bodies = {}
local next_body = 1
local allowed = {}
local sample_every = 10
local seen = 0

-- per-thread counters, read by done() through thread:get
non2xx = 0
sampled = 0
citations = 0
outside = 0
uncited = 0
empty_answers = 0
embed_ms = 0
search_ms = 0
llm_ms = 0
total_ms = 0

local threads = {}

function setup(thread)
   table.insert(threads, thread)
end

function init(args)
   for line in io.lines(args[1]) do
      if #line > 0 then
         table.insert(bodies, line)
      end
   end
   wrk.method = "POST"
   wrk.headers["Content-Type"] = "application/json"
   wrk.headers["Authorization"] = "Bearer " .. args[2]
   for name in string.gmatch(args[3], "[^,]+") do
      allowed[name] = true
   end
   sample_every = tonumber(args[4])
end

function request()
   local body = bodies[next_body]
   next_body = next_body % #bodies + 1
   return wrk.format(nil, nil, nil, body)
end

local function timing(body, name)
   return tonumber(string.match(body, '"' .. name .. '":([%d%.eE+-]+)')) or 0
end

function response(status, headers, body)
   seen = seen + 1
   if status < 200 or status > 299 then
      non2xx = non2xx + 1
      return
   end
   if seen % sample_every ~= 0 then
      return
   end
   sampled = sampled + 1
   local cited = 0
   for name in string.gmatch(body, '"collection":"([^"]*)"') do
      cited = cited + 1
      if not allowed[name] then
         outside = outside + 1
      end
   end
   citations = citations + cited
   if cited == 0 then
      uncited = uncited + 1
   end
   if string.find(body, '"answer":""', 1, true) then
      empty_answers = empty_answers + 1
   end
   embed_ms = embed_ms + timing(body, "embed_ms")
   search_ms = search_ms + timing(body, "search_ms")
   llm_ms = llm_ms + timing(body, "llm_ms")
   total_ms = total_ms + timing(body, "total_ms")
end

local counters = {
   "non2xx", "sampled", "citations", "outside", "uncited", "empty_answers",
   "embed_ms", "search_ms", "llm_ms", "total_ms",
}

function done(summary, latency, requests)
   local totals = {}
   for _, name in ipairs(counters) do
      totals[name] = 0
      for _, thread in ipairs(threads) do
         totals[name] = totals[name] + (thread:get(name) or 0)
      end
   end
   local e = summary.errors
   local parts = {
      string.format('"requests":%d,"duration_us":%d,"bytes":%d', summary.requests, summary.duration, summary.bytes),
      string.format('"socket_errors":{"connect":%d,"read":%d,"write":%d,"timeout":%d},"status_errors":%d',
         e.connect, e.read, e.write, e.timeout, e.status),
      string.format('"latency_us":{"mean":%.1f,"stdev":%.1f,"max":%d,"p50":%d,"p75":%d,"p90":%d,"p99":%d,"p999":%d}',
         latency.mean, latency.stdev, latency.max, latency:percentile(50), latency:percentile(75),
         latency:percentile(90), latency:percentile(99), latency:percentile(99.9)),
   }
   for _, name in ipairs(counters) do
      table.insert(parts, string.format('"%s":%.3f', name, totals[name]))
   end
   io.write("KAPPI_BENCH_JSON {" .. table.concat(parts, ",") .. "}\n")
end
