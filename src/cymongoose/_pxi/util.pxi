# Utility functions: event names, log level, URL parts, glob match, form vars, hashes (to be
# completed).


def event_name(int ev):
    for member in Event:
        if member.value == ev:
            return f"MG_EV_{member.name}"
    if ev > mg.MG_EV_USER:
        return f"MG_EV_USER+{ev - mg.MG_EV_USER}"
    return f"MG_EV_UNKNOWN({ev})"


def log_set(int level):
    mg.mg_log_level = level


def log_get():
    return mg.mg_log_level
