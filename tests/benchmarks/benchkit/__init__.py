"""The benchmark runner's parts: contenders, /proc accounting, HTTP checks, wrk, reports."""
