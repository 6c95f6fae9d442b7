"""The fixes cymongoose applies to the pinned mongoose.c: one entry per fix.

Each fix names its kind (bug: Mongoose misbehaves; perf: same behaviour, less work;
integration: a hook or an export the core needs), why it exists, its tests, and where
upstream stands (merged: upstream has it, drop ours at the next update;
patch-ready: a single-commit patch in upstream/ (`patch`) waits to be offered; cymongoose-only: it
serves cymongoose's own design and is not meant for upstream).

Its C is in fixes/<name>.c, one section per edit, each opened by a `// @hunk <label>` line
(the file's comment before the first section says why, at length). An edit puts a section
after, before or in place of an anchor: Mongoose's own text, which must occur exactly once
in mongoose.c, or the build stops naming the fix and the anchor (build_fixes.py).
"""

from __future__ import annotations

from dataclasses import dataclass

# Where the fixes' definitions go: after mongoose.c includes its header (and cym_fixes.h,
# which build_fixes.py inserts first), in the order of FIXES below.
TOP = '#include "mongoose.h"\n'


@dataclass(frozen=True)
class Edit:
    hunk: str  # the `// @hunk <label>` section of the fix's C file
    where: str  # "after", "before" or "replace" the anchor; "end": appended to the file
    anchor: str = ""  # Mongoose's text, exactly once in mongoose.c ("" for "end")


@dataclass(frozen=True)
class Fix:
    name: str
    kind: str  # bug, perf or integration
    upstream: str  # one of UPSTREAM
    why: str
    # pytest node ids: for a bug or integration fix they fail without it; for a perf fix they
    # fail if it breaks what Mongoose did, or (RECV_GROWTH) if the work it saves
    # comes back; the gains themselves are measured in docs/performance.md
    tests: tuple[str, ...]
    edits: tuple[Edit, ...]
    checks: tuple[str, ...] = ()  # Mongoose text the fix relies on without editing it
    patch: str = ""  # patch-ready or offered: the single-commit patch for upstream

    @property
    def source(self) -> str:
        return f"fixes/{self.name.lower()}.c"


KINDS = ("bug", "perf", "integration")
UPSTREAM = ("merged", "offered", "patch-ready", "cymongoose-only")

ACCEPT_CONN = "      if (c->is_readable) accept_conn(mgr, c);\n"
MG_ERROR_LINE = '  MG_ERROR(("%lu %ld %s", c->id, c->fd, buf));\n'

FIXES: tuple[Fix, ...] = (
    Fix("EPOLL_INTEREST", "bug", "patch-ready",
        "epoll asks for EPOLLIN even while c->is_full: a paused reader or listener spins the "
        "loop; the interest is also cached so an unchanged one costs no epoll_ctl()",
        ("tests/reliability/test_scale.py::"
         "test_out_of_descriptors_pauses_accepting_without_spinning",
         "tests/core/test_accepted_socket.py::"
         "test_a_paused_reader_with_bytes_waiting_lets_poll_sleep"),
        (Edit("definitions", "after", TOP),),
        patch="upstream/accept-pause-and-is-full.patch"),
    Fix("WRITE_FIRST", "perf", "cymongoose-only",
        "write before arming EPOLLOUT (two epoll_ctl() per response less) and answer in the "
        "iteration that read the request",
        ("tests/core/test_write_path.py::test_answer_leaves_in_the_iteration_that_read_the_request",
         "tests/core/test_write_path.py::"
         "test_reader_that_pauses_gets_the_whole_response_and_the_loop_waits_meanwhile",
         "tests/proxy/test_proxy_failures.py::"
         "test_no_connection_within_the_connect_timeout_is_a_504"),
        (Edit("before_wait", "replace", "    if (can_write(c)) MG_EPOLL_MOD(c, 1);\n"),
         Edit("after_events", "after", "      c->is_writable = can_write(c) && wr ? 1U : 0;\n"),
         Edit("after_read", "after", "      if (c->is_readable) read_conn(c);\n"),
         Edit("short_write", "after", "  iolog(c, buf, n, false);\n"))),
    Fix("ACCEPT_BURST", "perf", "cymongoose-only",
        "Mongoose accepts one connection per listener per iteration: a burst of clients "
        "waits for as many iterations",
        ("tests/reliability/test_scale.py::test_thousands_of_keep_alive_clients_all_answered",),
        (Edit("definitions", "after", TOP),
         Edit("burst", "before", "static bool can_read(const struct mg_connection *c) {\n"),
         Edit("call", "replace", ACCEPT_CONN))),
    Fix("ACCEPT_PAUSE", "bug", "patch-ready",
        "accept() failing with EMFILE leaves the listener readable: the loop spins at 100% "
        "CPU logging the error; ours pauses the listeners for 100 ms and says so once",
        ("tests/reliability/test_scale.py::"
         "test_out_of_descriptors_pauses_accepting_without_spinning",),
        (Edit("definitions", "after", TOP),
         Edit("failed", "after", "  MG_SOCKET_TYPE fd = raccept(FD(lsn), &usa, &sa_len);\n"),
         Edit("resume", "before", ACCEPT_CONN)),
        patch="upstream/accept-pause-and-is-full.patch"),
    Fix("PEER_EOF", "bug", "cymongoose-only",
        "Mongoose closes at the client's half-close (recv() == 0), losing the response still "
        "owed; cymongoose is asked first and finishes it",
        ("tests/reliability/test_slow_readers.py::test_nc_half_close",
         "tests/reliability/test_slow_readers.py::"
         "test_half_closed_client_gets_large_deferred_and_pipelined_responses"),
        (Edit("definitions", "after", TOP),
         Edit("recv", "after", "    n = recv(FD(c), (char *) buf, len, MSG_NONBLOCKING);\n"),
         Edit("read_conn", "before",
              "  } else if (n <= 0) {\n"
              "    c->is_closing = 1;  // Termination. Don't call mg_error(): #1529\n"))),
    Fix("QUIET_SKIP", "perf", "cymongoose-only",
        "MG_EV_POLL goes to every connection every iteration; an idle keep-alive one, and "
        "one whose response its app still owes with nothing buffered, is skipped until its "
        "deadline",
        ("tests/reliability/test_scale.py::"
         "test_idle_connections_skipped_by_the_loop_still_keep_their_rules",
         "tests/core/test_owed_skip.py::"
         "test_owed_responses_are_skipped_then_written_and_the_connections_serve_on"),
        (Edit("definitions", "after", TOP),
         Edit("skip", "after", "    bool is_resp = c->is_resp;\n    tmp = c->next;\n"))),
    Fix("PARKING", "perf", "cymongoose-only",
        "an idle connection leaves mgr->conns for a heap on its deadline, so 15,000 idle "
        "clients cost no work per iteration",
        ("tests/core/test_parking.py::"
         "test_idle_connections_are_parked_and_each_answers_its_next_request",
         "tests/core/test_parking.py::test_close_send_and_wakeup_reach_parked_connections",
         "tests/core/test_parking.py::test_manager_close_closes_parked_connections"),
        (Edit("definitions", "after", TOP),
         Edit("iotest", "replace",
              "#elif MG_ENABLE_EPOLL\n"
              "  size_t max = 1;\n"
              "  for (struct mg_connection *c = mgr->conns; c != NULL; c = c->next) {\n"
              "    c->is_readable = c->is_writable = 0;\n"),
         Edit("events", "before",
              "  struct epoll_event *evs = (struct epoll_event *) alloca(max * sizeof(evs[0]));\n"),
         Edit("unpark_on_event", "after",
              "    struct mg_connection *c = (struct mg_connection *) evs[i].data.ptr;\n"),
         Edit("unpark_due", "after",
              "  mg_iotest(mgr, ms);\n  now = mg_millis();\n  mg_timer_poll(&mgr->timers, now);\n"),
         Edit("wakeup", "replace",
              "      struct mg_connection *t;\n"
              "      for (t = c->mgr->conns; t != NULL; t = t->next) {\n"
              "        if (t->id == *id) {\n"
              "          struct mg_str data = mg_str_n((char *) c->recv.buf + sizeof(*id),\n"),
         Edit("free", "after",
              "  mgr->timers = NULL;  // Important. Next call to poll won't touch timers\n"))),
    Fix("HTTP_PARSE_HOOK", "perf", "cymongoose-only",
        "http_cb parses a head again that cymongoose's guard already parsed and validated",
        ("tests/core/test_http_split.py::test_the_split_gives_what_mg_http_parse_gives",),
        (Edit("definitions", "after", TOP),
         Edit("parse", "replace", "      int n = mg_http_parse(buf, c->recv.len - ofs, &hm);\n"))),
    Fix("ACCEPT4", "perf", "cymongoose-only",
        "accept4() makes the socket non-blocking and close-on-exec at once: 3 fcntl() calls "
        "of a one-request connection's 15.5 system calls less",
        ("tests/core/test_accepted_socket.py::"
         "test_an_accepted_socket_is_non_blocking_and_close_on_exec",),
        (Edit("definitions", "after", TOP),
         Edit("accept", "replace", "    fd = accept(sock, &usa->sa, len);\n"),
         Edit("accepted", "replace",
              "    MG_EPOLL_ADD(c);\n    mg_set_non_blocking_mode(FD(c));\n"
              "    setsockopts(c);\n    c->is_accepted = 1;\n"))),
    Fix("CONN_ERROR_HOOK", "integration", "cymongoose-only",
        "mg_error() and the OpenSSL glue log at ERROR lines that name no peer; cymongoose "
        "logs one line with the peer at a level that fits",
        ("tests/core/test_c_log.py::"
         "test_a_failed_outgoing_connection_is_one_error_line_with_its_peer",
         "tests/core/test_c_log.py::test_log_errors_false_leaves_the_report_to_the_handler"),
        (Edit("definitions", "after", TOP),
         Edit("errno", "after", "void mg_error(struct mg_connection *c, const char *fmt, ...) {\n"),
         Edit("hook", "replace", MG_ERROR_LINE),
         Edit("tls_reason", "replace",
              '  MG_ERROR(("%lu %.*s", ((struct mg_connection *) c)->id, n, s));\n'))),
    Fix("SOCKET_ERRNO", "bug", "cymongoose-only",
        "a failed socket is reported as \"socket error\" with a stale errno; ours reads "
        "SO_ERROR and names the reason",
        ("tests/core/test_c_log.py::test_a_refused_connection_names_the_real_errno",
         "tests/proxy/test_proxy_failures.py::"
         "test_a_refused_connection_is_a_502_with_its_reason_logged"),
        (Edit("definitions", "after", TOP),
         Edit("reason", "before", MG_ERROR_LINE))),
    Fix("DIRLIST", "integration", "cymongoose-only",
        "mg_http_serve_dir() lists every directory, dotfiles and version included; ours "
        "lists only when asked, never dotfiles, no version",
        ("tests/core/test_serve_dir_safety.py::test_directories_are_not_listed_unless_asked",
         "tests/core/test_serve_dir_safety.py::test_a_listing_has_no_dotfiles_and_no_version"),
        (Edit("definitions", "after", TOP),
         Edit("listdir", "replace", "#if MG_ENABLE_DIRLIST\n    listdir(c, hm, opts, path);\n"),
         Edit("dotfiles", "after", '  // MG_DEBUG(("[%s] [%s]", d->dir, name));\n'),
         Edit("footer", "replace",
              '            "</table><address>Mongoose v.%s</address></body></html>\\n",\n'
              "            MG_VERSION);\n"))),
    Fix("STATIC_SERVE", "integration", "cymongoose-only",
        "mg_http_serve_file() answers suffix and multiple ranges with the whole file, ignores "
        "If-Range, sends a .gz without Vary, answers POST like GET, sends no Date or "
        "Last-Modified, and its directory redirect drops the query; mg_http_serve_dir() "
        "records what it would answer and the core answers (http_static.pxi)",
        ("tests/core/test_static_http.py::test_raw_ranges_match_nginx",
         "tests/core/test_static_http.py::test_raw_directory_redirect_keeps_the_query"),
        (Edit("definitions", "after", TOP),
         Edit("slash", "before",
              "  while (n > 1 && path[n - 1] == '/') path[--n] = 0;  // Trim trailing slashes\n"),
         Edit("redirect", "replace",
              "    mg_printf(c,\n"
              '              "HTTP/1.1 301 Moved\\r\\n"\n'
              '              "Location: %.*s/\\r\\n"\n'
              '              "Content-Length: 0\\r\\n"\n'
              '              "\\r\\n",\n'
              "              (int) hm->uri.len, hm->uri.buf);\n"
              "    c->is_resp = 0;\n"
              "    flags = -1;\n"),
         Edit("index", "before",
              '    if (((mg_snprintf(path + n, path_size - n, "/" MG_HTTP_INDEX) > 0 &&\n'),
         Edit("file", "replace", "    mg_http_serve_file(c, hm, path, opts);\n  }\n}\n"),
         Edit("exports", "end"))),
    Fix("RECV_GROWTH", "perf", "cymongoose-only",
        "a full receive buffer grows by MG_IO_SIZE, copying all of it each time (quadratic: "
        "3-9 s of CPU for one 15 MiB message); ours doubles it up to the connection's cap",
        ("tests/protocols/test_receive_growth.py::"
         "test_one_large_websocket_message_costs_little_cpu_raw",
         "tests/protocols/test_receive_growth.py::test_one_large_tcp_send_costs_little_cpu"),
        (Edit("definitions", "after", TOP),
         Edit("grow", "replace", "             !mg_iobuf_resize(io, io->size + MG_IO_SIZE)) {\n"))),
    Fix("FAST_BZERO", "perf", "cymongoose-only",
        "mg_bzero() wipes byte by byte through a volatile pointer: 96% of the user-space "
        "instructions serving 100 KiB files; memset() plus a compiler barrier instead",
        ("tests/core/test_buffer_wipe.py::"
         "test_bytes_survive_partial_consumption_and_buffer_reuse",),
        (Edit("wipe", "after", "void mg_bzero(volatile unsigned char *buf, size_t len) {\n"),)),
    Fix("SENT_NO_WIPE", "perf", "cymongoose-only",
        "bytes a plain-TCP socket accepted are wiped from the send buffer as they leave: a "
        "second write of every byte sent (half the user-space instructions of an HTTP/2 "
        "download); TLS plaintext is still wiped",
        ("tests/core/test_buffer_wipe.py::"
         "test_bytes_survive_partial_consumption_and_buffer_reuse",
         "tests/http2/test_h2c_raw.py::test_large_bodies_arrive_whole_both_ways"),
        (Edit("take", "replace", "      mg_iobuf_del(&c->send, 0, (size_t) n);\n"),)),
    Fix("ECDSA_MINIMAL_DER", "bug", "patch-ready",
        "the builtin TLS 1.3 CertificateVerify encodes r and s with fixed 32-byte INTEGERs: "
        "about 1 handshake in 256 is rejected by OpenSSL clients (\"bad signature\")",
        ("tests/protocols/test_tls.py::test_many_handshakes_never_fail",),
        (Edit("minimal_der", "after", "    sigsz = (size_t) (70 + neg1 + neg2);\n"),),
        patch="upstream/ecdsa-minimal-der.patch"),
    Fix("INTERNALS", "integration", "cymongoose-only",
        "the static protocol handlers cymongoose runs behind its own and two private c->data "
        "layouts it reads, exported by name and checked at compile time",
        ("tests/packaging/test_build_fixes.py::test_renamed_static_handler_fails_to_compile",
         "tests/packaging/test_build_fixes.py::test_moved_data_layout_stops_the_build",
         "tests/protocols/test_dns_sntp.py::test_sntp_time_from_local_responder"),
        (Edit("exports", "end"),),
        checks=(
            # static_cb keeps the file bytes still to send here (cym_static_left)
            "    size_t *cl = (size_t *) &c->data[(sizeof(c->data) - sizeof(size_t)) /\n"
            "                                     sizeof(size_t) * sizeof(size_t)];\n",
            # sntp_cb keeps its expiry here (cym_sntp_flag uses the byte after it)
            "  uint64_t *expiration_time = (uint64_t *) c->data;\n",
        )),
)
