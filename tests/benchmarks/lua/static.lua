-- Requests the static files round-robin; the runner fills in the path list. The requests are
-- formatted once per thread so the client does no string work per request.
local paths = { @PATHS@ }
local reqs = {}
local i = 0

init = function(args)
  for k, p in ipairs(paths) do
    reqs[k] = wrk.format("GET", p)
  end
end

request = function()
  i = i % #reqs + 1
  return reqs[i]
end
