# HTTP/2 (issue 36), driven by libnghttp2 in C (includes/cym_h2.h). This fragment holds what
# exists so far: whether the build has the library, and the prior-knowledge check the HTTP
# guard will make on a plain connection's first bytes. notes/i36-http2-plan.md has the rest.

# "1.52.0": the libnghttp2 this module runs with; None when built with CYMONGOOSE_HTTP2=OFF.
HTTP2_LIBRARY = (<bytes>mg.cym_h2_library_version()).decode("ascii") if mg.CYM_H2_BUILT else None


def _h2_preface_state(data):
    """Tests only: what bytes at the start of a plain connection say: 0 (not HTTP/2's
    preface: HTTP/1.1 decides), 1 (a prefix of it so far: wait) or 2 (the whole preface)."""
    cdef const unsigned char[:] view = data
    if view.shape[0] == 0:
        return mg.CYM_H2_PARTIAL
    return mg.cym_h2_preface_state(&view[0], view.shape[0])
