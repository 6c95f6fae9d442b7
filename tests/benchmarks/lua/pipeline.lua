-- HTTP/1.1 pipelining: every write carries @DEPTH@ requests for the run's URL, back to back,
-- and wrk counts each response (TechEmpower's pipelined plaintext sends 16). The batch is
-- formatted once per thread, so the client does no string work per request.
local depth = @DEPTH@
local batch

init = function(args)
  local one = wrk.format()
  local parts = {}
  for k = 1, depth do
    parts[k] = one
  end
  batch = table.concat(parts)
end

request = function()
  return batch
end
