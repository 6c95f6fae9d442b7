-- Stops the (single) wrk thread once it has seen @LIMIT@ responses: the RSS run needs a
-- request count, not a duration.
local limit = @LIMIT@
local seen = 0

response = function(status, headers, body)
  seen = seen + 1
  if seen >= limit then
    wrk.thread:stop()
  end
end
