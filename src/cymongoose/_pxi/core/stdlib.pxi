# Every standard-library name the core uses, bound once here (uvloop's includes/stdlib.pxi is
# the model): `<module>_<name>` is that module's attribute, as a C global that no other
# fragment rebinds and Python cannot see. Fragments use these names, never an import of
# their own.
#
# The first group is imported with the core. The modules of the second cost more at import
# than some programs ever use them (asyncio alone was more than half of `import cymongoose`):
# each is imported by its import_<module>() on first use, which a caller runs just before
# reaching for a name of that module (its names are None until then).
#
# Loops on several threads (free threading) may race to the first use: each loader fills its
# names under _lazy_import_lock and then sets its ready flag with a seq_cst store, and the
# fast path reads only that flag (a seq_cst load, a plain load on x86-64), so a thread that
# sees the flag set sees every name it guards.

import binascii
import collections
import enum
import io
import logging
import math
import os
import re
import signal
import sys
import threading
import time
import warnings

cdef object binascii_Error = binascii.Error
cdef object binascii_a2b_base64 = binascii.a2b_base64
cdef object binascii_b2a_base64 = binascii.b2a_base64
cdef object collections_deque = collections.deque
cdef object enum_IntEnum = enum.IntEnum
cdef object io_BytesIO = io.BytesIO
cdef object logging_DEBUG = logging.DEBUG
cdef object logging_ERROR = logging.ERROR
cdef object logging_INFO = logging.INFO
cdef object logging_getLogger = logging.getLogger
cdef object math_isfinite = math.isfinite
cdef object os_close = os.close
cdef object os_dup = os.dup
cdef object os_fspath = os.fspath
cdef object os_fstat = os.fstat
cdef object os_open = os.open
cdef int os_O_RDONLY_CLOEXEC = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
cdef object os_path_realpath = os.path.realpath
cdef str os_sep = os.sep
cdef object os_stat = os.stat
cdef object os_set_blocking = os.set_blocking
cdef object os_strerror = os.strerror
cdef object re_DOTALL = re.DOTALL
cdef object re_compile = re.compile
cdef object signal_SIGINT = signal.SIGINT
cdef object signal_SIGTERM = signal.SIGTERM
cdef object signal_signal = signal.signal
cdef object sys_intern = sys.intern
# Python 3.13+; before, the GIL is always on.
cdef object sys_is_gil_enabled = getattr(sys, "_is_gil_enabled", lambda: True)
cdef object sys_version_info = sys.version_info
cdef object threading_current_thread = threading.current_thread
cdef object threading_main_thread = threading.main_thread
cdef object time_monotonic = time.monotonic
cdef object time_perf_counter = time.perf_counter
cdef object time_time = time.time
cdef object warnings_warn = warnings.warn


cdef cython.pymutex _lazy_import_lock


# asyncio: the ASGI server's loop (ASGILoop), which imports it itself long before.
cdef object asyncio_CancelledError = None
cdef object asyncio_Task = None
cdef int _asyncio_ready = 0  # the names above are filled


cdef int import_asyncio() except -1:
    global asyncio_CancelledError, asyncio_Task
    if mg.cym_load_int_sc(&_asyncio_ready):
        return 0
    with _lazy_import_lock:
        if not _asyncio_ready:
            import asyncio
            asyncio_CancelledError = asyncio.CancelledError
            asyncio_Task = asyncio.Task
            mg.cym_store_int_sc(&_asyncio_ready, 1)
    return 0


# calendar and datetime: TlsOpts.from_files(), which checks certificates' validity dates.
cdef object calendar_timegm = None
cdef object datetime_datetime = None
cdef object datetime_timezone = None
cdef int _calendar_datetime_ready = 0  # the names above are filled


cdef int import_calendar_datetime() except -1:
    global calendar_timegm, datetime_datetime, datetime_timezone
    if mg.cym_load_int_sc(&_calendar_datetime_ready):
        return 0
    with _lazy_import_lock:
        if not _calendar_datetime_ready:
            import calendar
            import datetime
            calendar_timegm = calendar.timegm
            datetime_datetime = datetime.datetime
            datetime_timezone = datetime.timezone
            mg.cym_store_int_sc(&_calendar_datetime_ready, 1)
    return 0


# json: Connection.reply_json(), Rpc and json_get_str() of a non-string.
cdef object json_dumps = None
cdef object json_loads = None
cdef int _json_ready = 0  # the names above are filled


cdef int import_json() except -1:
    global json_dumps, json_loads
    if mg.cym_load_int_sc(&_json_ready):
        return 0
    with _lazy_import_lock:
        if not _json_ready:
            import json
            json_dumps = json.dumps
            json_loads = json.loads
            mg.cym_store_int_sc(&_json_ready, 1)
    return 0


# resource: the open-file limit, raised when the first listener opens (ImportError where
# the platform has no resource module).
cdef object resource_RLIMIT_NOFILE = None
cdef object resource_RLIM_INFINITY = None
cdef object resource_getrlimit = None
cdef object resource_setrlimit = None
cdef int _resource_ready = 0  # the names above are filled


cdef int import_resource() except -1:
    global resource_RLIMIT_NOFILE, resource_RLIM_INFINITY, resource_getrlimit
    global resource_setrlimit
    if mg.cym_load_int_sc(&_resource_ready):
        return 0
    with _lazy_import_lock:
        if not _resource_ready:
            import resource
            resource_RLIMIT_NOFILE = resource.RLIMIT_NOFILE
            resource_RLIM_INFINITY = resource.RLIM_INFINITY
            resource_getrlimit = resource.getrlimit
            resource_setrlimit = resource.setrlimit
            mg.cym_store_int_sc(&_resource_ready, 1)
    return 0


# socket: listen_fd(), which checks and inspects a socket opened outside Mongoose.
cdef object socket_AF_INET = None
cdef object socket_AF_INET6 = None
cdef object socket_SOCK_STREAM = None
cdef object socket_SOL_SOCKET = None
cdef object socket_SO_ACCEPTCONN = None
cdef object socket_inet_pton = None
cdef object socket_socket = None
cdef int _socket_ready = 0  # the names above are filled


cdef int import_socket() except -1:
    global socket_AF_INET, socket_AF_INET6, socket_SOCK_STREAM, socket_SOL_SOCKET
    global socket_SO_ACCEPTCONN, socket_inet_pton, socket_socket
    if mg.cym_load_int_sc(&_socket_ready):
        return 0
    with _lazy_import_lock:
        if not _socket_ready:
            import socket
            socket_AF_INET = socket.AF_INET
            socket_AF_INET6 = socket.AF_INET6
            socket_SOCK_STREAM = socket.SOCK_STREAM
            socket_SOL_SOCKET = socket.SOL_SOCKET
            socket_SO_ACCEPTCONN = socket.SO_ACCEPTCONN
            socket_inet_pton = socket.inet_pton
            socket_socket = socket.socket
            mg.cym_store_int_sc(&_socket_ready, 1)
    return 0
