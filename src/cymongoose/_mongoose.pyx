# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: binding=True, embedsignature=False
"""Cython core of cymongoose: one extension module owning mongoose.c (Mongoose keeps
process-wide state such as the log level, so two modules would each get a copy).

This file holds only directives, module-level cimports and the ordered include list; each
fragment under _pxi/ says in its first line what it holds. The typed public contract and the
user-facing docstrings live in _mongoose.pyi.
"""

from cpython.buffer cimport (PyBUF_SIMPLE, PyBuffer_FillInfo, PyBuffer_Release,
                             PyObject_CheckBuffer, PyObject_GetBuffer)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.pystate cimport PyThreadState
from cpython.unicode cimport (PyUnicode_1BYTE_DATA, PyUnicode_1BYTE_KIND, PyUnicode_GET_LENGTH,
                              PyUnicode_KIND)
from cpython.ref cimport Py_DECREF, Py_INCREF, PyObject
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.errno cimport EAGAIN, EINTR, errno
from libc.stdio cimport FILE, SEEK_SET, fseek, ftell
from libc.stdlib cimport calloc, free
from libc.string cimport memchr, memcmp, memcpy, memset, strlen

cimport cython

from .includes cimport mongoose as mg

include "_pxi/errors.pxi"
include "_pxi/constants.pxi"
include "_pxi/buffers.pxi"
include "_pxi/views.pxi"
include "_pxi/recv_views.pxi"
include "_pxi/dispatch.pxi"
include "_pxi/connection.pxi"
include "_pxi/manager.pxi"
include "_pxi/timer.pxi"
include "_pxi/loop_integration.pxi"
include "_pxi/http_limits.pxi"
include "_pxi/http_request_parser.pxi"
include "_pxi/http_guard.pxi"
include "_pxi/listen_fd.pxi"
include "_pxi/http.pxi"
include "_pxi/http_stream.pxi"
include "_pxi/http_response.pxi"
include "_pxi/wsgi_environ.pxi"
include "_pxi/wsgi_exchange.pxi"
include "_pxi/asgi_scope.pxi"
include "_pxi/asgi_exchange.pxi"
include "_pxi/ws.pxi"
include "_pxi/mqtt.pxi"
include "_pxi/tls.pxi"
include "_pxi/tls_files.pxi"
include "_pxi/dns_sntp.pxi"
include "_pxi/json_rpc.pxi"
include "_pxi/util.pxi"
include "_pxi/c_log.pxi"
include "_pxi/module_init.pxi"
