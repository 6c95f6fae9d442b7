# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: binding=True, embedsignature=False, freethreading_compatible=True
"""Cython core of cymongoose: one extension module owning mongoose.c (Mongoose keeps
process-wide state such as the log level, so two modules would each get a copy).

This file holds only directives, module-level cimports and the ordered include list; each
fragment under _pxi/ says in its first line what it holds. The folders are the layers of the
core: core/ (the loop, connections, views, the C->Python bridge), http/ (the guard in front of
Mongoose's parser, requests and responses), servers/ (the per-request work of the WSGI and
ASGI servers, in C), proxy/ (the reverse proxy: routes, heads, the data path), protocols/
(WebSocket, MQTT, TLS, DNS/SNTP, JSON-RPC). The typed public
contract and the user-facing docstrings live in _mongoose.pyi.
"""

from cpython.buffer cimport (PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_FillInfo, PyBuffer_Release,
                             PyObject_CheckBuffer, PyObject_GetBuffer)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.pystate cimport PyThreadState
from cpython.unicode cimport (PyUnicode_1BYTE_DATA, PyUnicode_1BYTE_KIND, PyUnicode_AsUCS4Copy,
                              PyUnicode_GET_LENGTH, PyUnicode_KIND)
from cpython.ref cimport Py_DECREF, Py_INCREF, PyObject
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.errno cimport (EAGAIN, ECONNABORTED, ECONNRESET, EHOSTUNREACH, EINTR, ELOOP,
                         ENETUNREACH, ENOSYS, EPIPE, ETIMEDOUT, EXDEV, errno)
from libc.stdio cimport FILE, SEEK_SET, fseek, ftell
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport (memchr, memcmp, memcpy, memset, strcat, strcmp, strcpy, strlen,
                          strncat, strncpy)

cimport cython

from .includes cimport mongoose as mg
from .includes cimport zlib as z

include "_pxi/core/stdlib.pxi"
include "_pxi/core/errors.pxi"
include "_pxi/core/constants.pxi"
include "_pxi/core/log_escape.pxi"
include "_pxi/core/buffers.pxi"
include "_pxi/core/views.pxi"
include "_pxi/core/recv_views.pxi"
include "_pxi/core/dispatch.pxi"
include "_pxi/core/loop_caches.pxi"
include "_pxi/core/connection.pxi"
include "_pxi/core/manager.pxi"
include "_pxi/core/metrics.pxi"
include "_pxi/core/timer.pxi"
include "_pxi/core/loop_integration.pxi"
include "_pxi/core/loop_sockets.pxi"
include "_pxi/http/http_limits.pxi"
include "_pxi/http/http_date.pxi"
include "_pxi/http/http_accept_encoding.pxi"
include "_pxi/http/http_request_parser.pxi"
include "_pxi/http/http_guard.pxi"
include "_pxi/http/http_split.pxi"
include "_pxi/http/http_health.pxi"
include "_pxi/http/listen_fd.pxi"
include "_pxi/http/http.pxi"
include "_pxi/http/http_stream.pxi"
include "_pxi/http/http_response.pxi"
include "_pxi/http/http_compress.pxi"
include "_pxi/http/http_static.pxi"
include "_pxi/http/http_static_mounts.pxi"
include "_pxi/http/http2.pxi"
include "_pxi/proxy/proxy_table.pxi"
include "_pxi/proxy/proxy_heads.pxi"
include "_pxi/proxy/proxy_upgrade.pxi"
include "_pxi/proxy/proxy_exchange.pxi"
include "_pxi/proxy/proxy_pool.pxi"
include "_pxi/proxy/proxy_relay.pxi"
include "_pxi/servers/server_hooks.pxi"
include "_pxi/servers/wsgi_environ.pxi"
include "_pxi/servers/wsgi_exchange.pxi"
include "_pxi/servers/asgi_scope.pxi"
include "_pxi/servers/asgi_exchange.pxi"
include "_pxi/protocols/ws.pxi"
include "_pxi/protocols/ws_deflate.pxi"
include "_pxi/protocols/mqtt.pxi"
include "_pxi/protocols/tls.pxi"
include "_pxi/protocols/tls_files.pxi"
include "_pxi/protocols/tls_peer.pxi"
include "_pxi/protocols/dns_sntp.pxi"
include "_pxi/protocols/json_rpc.pxi"
include "_pxi/core/recv_growth.pxi"
include "_pxi/core/util.pxi"
include "_pxi/core/c_log.pxi"
include "_pxi/core/module_init.pxi"
