-- wrk script: cycle through pre-signed raw HTTP requests and classify the answers.
--
-- Usage: wrk -s bench/cycle.lua URL -- REQUEST_FILE NTHREADS
-- REQUEST_FILE holds complete raw HTTP/1.1 requests separated by NUL bytes (written by
-- bench/run.py). Thread k sends requests k, k+n, k+2n, ... and wraps around at the end
-- (counted in "wraps": in a unique-ids run a wrap means ids were re-sent).
-- done() prints one line "BENCHJSON {...}" with counts and latency percentiles (us).

local threads = {}
local counter = 0

function setup(thread)
   thread:set("tid", counter)
   counter = counter + 1
   table.insert(threads, thread)
end

local reqs = {}
local n = 0
local i = 0
wraps = 0
n_accepted = 0
n_duplicate = 0
n_ok_other = 0
n_bad = 0
bad_codes = ""
local bad = {}

function init(args)
   local path = args[1]
   local nthreads = tonumber(args[2] or "1")
   local f = assert(io.open(path, "rb"))
   local data = f:read("*a")
   f:close()
   local k = 0
   for req in string.gmatch(data, "([^%z]+)") do
      if k % nthreads == tid then
         n = n + 1
         reqs[n] = req
      end
      k = k + 1
   end
   data = nil
   assert(n > 0, "no requests for this thread")
end

function request()
   i = i + 1
   if i > n then
      i = 1
      wraps = wraps + 1
   end
   return reqs[i]
end

function response(status, headers, body)
   if status == 200 then
      if body and string.find(body, '"accepted"', 1, true) then
         n_accepted = n_accepted + 1
      elseif body and string.find(body, '"duplicate"', 1, true) then
         n_duplicate = n_duplicate + 1
      else
         n_ok_other = n_ok_other + 1
      end
   else
      n_bad = n_bad + 1
      bad[status] = (bad[status] or 0) + 1
      local parts = {}
      for code, cnt in pairs(bad) do
         table.insert(parts, string.format('"%d":%d', code, cnt))
      end
      bad_codes = table.concat(parts, ",")
   end
end

function done(summary, latency, requests)
   local acc, dup, other, nbad, nwraps, avail = 0, 0, 0, 0, 0, 0
   local codes = {}
   for _, t in ipairs(threads) do
      acc = acc + t:get("n_accepted")
      dup = dup + t:get("n_duplicate")
      other = other + t:get("n_ok_other")
      nbad = nbad + t:get("n_bad")
      nwraps = nwraps + t:get("wraps")
      local bc = t:get("bad_codes")
      if bc ~= "" then table.insert(codes, "{" .. bc .. "}") end
   end
   local e = summary.errors
   io.write(string.format(
      'BENCHJSON {"duration_us":%d,"requests":%d,"bytes":%d,' ..
      '"accepted":%d,"duplicate":%d,"ok_other":%d,"non200":%d,"non200_codes":[%s],' ..
      '"wraps":%d,"err_connect":%d,"err_read":%d,"err_write":%d,"err_timeout":%d,' ..
      '"err_status":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d}\n',
      summary.duration, summary.requests, summary.bytes,
      acc, dup, other, nbad, table.concat(codes, ","),
      nwraps, e.connect, e.read, e.write, e.timeout, e.status,
      latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
