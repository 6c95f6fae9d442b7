# JSON path getters and the JSON-RPC dispatcher (to be completed).


@cython.final
cdef class RpcReq:
    pass


@cython.final
cdef class Rpc:
    pass
