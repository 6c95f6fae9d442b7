"""The command line's processes: the listening socket, one serving process, the supervisor of
worker processes and the reloader. Each takes the options the command line parsed."""
