# The check that keeps the servers' Python subclasses to the contract of _mongoose.pxd: the
# C code calls up into Python only through cpdef hooks, and each base's hook raises
# NotImplementedError. A subclass whose hook is missing or misspelt would fail only when a
# request reaches that call; with this check its class statement fails instead, as soon as
# the server's module is imported. Cython refuses an __init_subclass__ method in a cdef
# class but takes one as a class attribute, which type() calls for each Python subclass.

cdef dict _SERVER_HOOKS = {}  # hook base -> the names of its hooks, filled after each class


def _check_server_hooks(cls, *, partial=False):
    """__init_subclass__ of the hook bases: `cls` must override every hook of every hook base
    it derives from (a C class between them counts, as ASGIHTTPExchange's receive() does for
    ASGICycle's). `partial=True` marks a mixin holding some of the hooks: the class that
    combines such mixins is checked."""
    if partial:
        return
    missing = []
    mro = cls.__mro__
    for base in mro:
        names = _SERVER_HOOKS.get(base)
        if names is None:
            continue
        for name in names:
            for owner in mro:
                if name in owner.__dict__:
                    break
            if owner is base:
                missing.append(f"{base.__name__}.{name}()")
    if missing:
        raise TypeError(f"{cls.__module__}.{cls.__qualname__} does not override the core's "
                        f"hook(s) {', '.join(missing)}; see cymongoose/_mongoose.pxd")
