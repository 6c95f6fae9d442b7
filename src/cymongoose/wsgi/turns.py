"""The leader/followers turns of owning the Manager: which thread polls the loop and runs
the apps of the requests it delivered (_LoopTurns' docstring says how)."""

from __future__ import annotations

import collections
import threading
import time

from .._mongoose import WSGITurns
from .exchange import _Exchange
from .state import ServerState

# The loop's owner runs apps inline; one that runs longer than this hands the loop over: a
# standby thread takes it.
_STALL_S = 0.005
# Once an app stalled the loop, apps are taken to block (on a database, a remote service) for
# this long, renewed by every app that runs longer than _STALL_S: the owner then only polls,
# and the other threads run the queued apps, several at once.
_BLOCKING_S = 1.0
# The standby checks every stall_s only while apps run: once its checks have seen none for
# this long, it sleeps until the owner starts one, or for _DEEP_SLEEP_S at most. An idle
# server woke its standby 200 times a second (about 1% of a CPU); now about once. Time, not
# a count of checks: on free-threaded 3.13 each check's wait first spins through 40
# sched_yield() calls, and beside a CPU hog 200 checks took over 10 s.
_IDLE_S = 1.0
_DEEP_SLEEP_S = 1.0


class _LoopTurns(WSGITurns):
    """Threads that take turns owning the Manager (leader/followers).

    The owner polls, then runs the apps of the requests that polling delivered inline, one
    after another, and writes their responses once the batch is done: under load no request
    crosses a thread, so the GIL never changes hands per request. For the batch the owner
    lets go of `loop_lock`, the right to touch Mongoose. A standby thread checks every
    `stall_s`: when the same app has been running for longer (it blocks on I/O, or
    computes), the standby takes `loop_lock` and the loop over, and goes on with the rest of
    the batch; the stalled thread finishes its request on its own, its response reaching the
    loop through the outbox, then waits to take a turn again. An app that must wait for the
    loop itself (reading a body still arriving, a client slow to read) hands the loop over
    before it waits.

    Apps that block would start one per `stall_s` that way, each after a takeover (a 20 ms
    app on 8 threads served 80 requests a second), and apps that wait less than `stall_s`
    (a database round trip) would never run two at once. So the blocking mode
    (`blocking_until`): the owner stops running apps inline and wakes the other threads,
    which run the queued apps at once while the owner keeps polling. It starts when
    run_batch() sees the owner's thread wait off CPU during its inline apps (apps_wait()),
    or at a takeover; an app run so that takes longer than `stall_s` renews it; when it
    ends, the owner runs apps inline again and measures them again.

    Per request this costs deque operations only (atomic under the GIL); `lock` is taken
    once per batch, and by the standby once per `stall_s`. `owner`, `current` and
    `standby_asleep` are the C base's fields (WSGITurns), which WSGILoop.run_batch() reads
    and writes per app; `wake_standby()` is the hook it calls.
    """

    owner: threading.Thread | None  # the C fields, typed object there
    current: _Exchange | None  # the app the owner is running inline

    def __init__(self, state: ServerState, count: int, stall_s: float) -> None:
        self._state = state
        self._count = count
        self._stall_s = stall_s
        self.lock = threading.Lock()  # guards owner and _standby
        self._cond = threading.Condition(self.lock)
        self.loop_lock = threading.Lock()  # held by whoever touches Mongoose
        self.owner = None
        self.current = None
        self._standby_wake = threading.Event()  # set when the standby should look now
        # The standby sleeps until woken (idle): the owner calls wake_standby() when it
        # starts an inline app. Written by the standby, then `current` read; the owner
        # writes `current`, then reads this: under the GIL one of them sees the other.
        self.standby_asleep = False
        self.standby_looks = 0
        self._standby: threading.Thread | None = None
        self.pending: collections.deque[_Exchange] = collections.deque()
        # One token per app allowed to run at once (the loop owner is a thread more, so a
        # stalled app on every app thread still leaves one to serve the loop).
        self._slots: collections.deque[None] = collections.deque([None] * count)
        self.stopping = False
        self.blocking_until = 0.0  # time.monotonic() until which apps are taken to block
        self._threads: list[threading.Thread] = []
        self._made = 0  # threads made so far, for their names
        self._retiring = 0  # follower threads to end at their next turn

    def start(self) -> None:
        if self._threads:
            return
        for _ in range(self._count):
            self._new_thread()

    def _new_thread(self) -> None:
        t = threading.Thread(target=self._follow_forever, name=f"cymongoose-wsgi-{self._made}",
                             daemon=True)
        self._made += 1
        t.start()
        self._threads.append(t)

    # The request deadline (deadline.py) replaces an abandoned app's thread.
    def add_thread(self) -> None:
        """Loop side: an app's thread was abandoned: a thread and a slot more, so as many
        apps as before can run."""
        with self.lock:
            if self.stopping:
                return
            self._threads = [t for t in self._threads if t.is_alive()]
            self._new_thread()
        self._slots.append(None)

    def retire_thread(self) -> None:
        """App side: an abandoned app returned, its thread takes turns again: one follower
        ends at its next turn (the caller keeps the returned app's slot)."""
        with self._cond:
            self._retiring += 1
            self._cond.notify_all()

    def owns_loop(self) -> bool:
        return self.owner is threading.current_thread()

    def resume(self, ex: _Exchange) -> None:
        """Loop side: a parked response's client drained (wsgi/parking.py): queue it as a
        new request, for whichever thread runs the next app. The loop is woken, as this
        may be called after the owner looked at `pending` (from its outbox)."""
        self.pending.append(ex)
        self._state.interrupt_poll()

    # The owner.
    def run_pending(self) -> bool:
        """Owner: run the queued apps inline, then write their responses. False once this
        thread lost the loop."""
        me = threading.current_thread()
        state = self._state
        outbox = state.outbox
        self.loop_lock.release()
        try:
            state.run_batch(self, me, state.app, self._slots)
        finally:
            with self.lock:
                owner = self.owner is me
                if owner:
                    self.loop_lock.acquire()  # free: only a takeover holds it otherwise
        if not owner:
            state.wake_loop()  # for our responses, and for the requests waiting for a slot
            return False
        if outbox:
            state.drain_outbox()
        return True

    def hand_off(self) -> None:
        """Called from an app running inline that is about to wait for the loop: give the
        loop to another thread."""
        me = threading.current_thread()
        with self.lock:
            if self.owner is me:
                self.owner = None
                self.current = None
                self._cond.notify()
                self._standby_wake.set()
        self._state.wake_loop()  # what this app posted so far is the new owner's to write

    # The followers.
    def _follow_forever(self) -> None:
        while True:
            if not self.follow(retirable=True):
                return
            self.lead()

    def follow(self, retirable: bool = False) -> bool:
        """Wait for a turn. True: this thread now owns the loop (holding loop_lock); False:
        the server stops, or this `retirable` thread (not run()'s) is one too many. Apps
        that block are run from here meanwhile (the blocking mode)."""
        me = threading.current_thread()
        while True:
            with self._cond:
                while True:
                    if self.stopping:
                        return False
                    if retirable and self._retiring:
                        self._retiring -= 1
                        return False
                    if self.owner is None and self.loop_lock.acquire(False):
                        self.owner = me
                        return True
                    if self._app_waits():
                        break
                    if self._standby is None:
                        self._standby = me
                        break
                    self._cond.wait()
            if self._standby is not me:
                self._run_one()
                continue
            try:
                taken = self._stand_by(me)
            finally:
                with self._cond:
                    self._standby = None
                    self._cond.notify()  # another thread stands by now
            if taken:
                return True

    def _app_waits(self) -> bool:
        """In the blocking mode, whether a queued app and a free slot wait for a thread."""
        return (bool(self.pending) and bool(self._slots)
                and time.monotonic() < self.blocking_until)

    def _run_one(self) -> None:
        """Blocking mode, a thread that does not own the loop: run one queued app, renew
        the mode if it blocked too, and wake the loop for its response."""
        state = self._state
        started = time.monotonic()
        state.run_batch(self, threading.current_thread(), state.app, self._slots, True)
        now = time.monotonic()
        if now - started >= self._stall_s:
            self.blocking_until = now + _BLOCKING_S
        state.wake_loop()

    def apps_wait(self) -> None:
        """Owner, from run_batch(): the apps it just ran inline waited off CPU (a database
        round trip, however short): start the blocking mode, so the queued apps and the
        next ones run on the other threads at once. When the mode ends, the owner runs
        apps inline again, and measures again: apps that still wait renew it there."""
        self.blocking_until = time.monotonic() + _BLOCKING_S
        with self._cond:  # the rest of the batch: now, not after the next poll
            self._cond.notify(len(self.pending))

    def _wake_runners(self) -> None:
        """Owner, blocking mode, a free slot: wake as many threads as there are queued apps
        with a slot, and the standby (a follower told may still be on its way: the standby
        takes what it does not). With no free slot the caller wakes nobody: the thread
        whose app frees one takes the next queued app itself (follow()). Waking threads that
        find no slot cost a thread switch and a GIL hand-over per poll, about one per
        request under load."""
        with self._cond:
            self._cond.notify(min(len(self.pending), len(self._slots)))
        self._standby_wake.set()

    def wake_standby(self) -> None:
        """Owner, having set `current` while the standby sleeps: watch this app."""
        self.standby_asleep = False
        self._standby_wake.set()

    def _stand_by(self, me: threading.Thread) -> bool:
        """Check the owner every stall_s, without holding `lock` in between. True: the
        owner was stuck in an app and this thread took the loop over (apps block: the
        blocking mode starts); False: the loop is free, the server stops, or an app waits
        for a thread (blocking mode)."""
        wake = self._standby_wake
        seen: _Exchange | None = None
        idle_since: float | None = None  # when the checks last saw an app
        while True:
            wake.wait(_DEEP_SLEEP_S if self.standby_asleep else self._stall_s)
            wake.clear()  # the state is read after this: a wake-up set from now on counts
            self.standby_asleep = False
            # This thread took the GIL, maybe from the owner mid-app: the owner's wait for
            # it back is not its app waiting (run_batch discounts it).
            self.standby_looks += 1
            with self.lock:
                if self.owner is None:
                    return False
                cur = self.current
                if cur is not None and cur is seen and self.loop_lock.acquire(False):
                    # The same app ran for a whole stall_s, and its thread let go of
                    # loop_lock for its batch: take the loop (and the rest of the batch).
                    # Also when stopping: the drain must run (stop accepting, answer what
                    # can be answered) while that app is stuck, not after it returns.
                    self.owner = me
                    self.current = None
                    self.blocking_until = time.monotonic() + _BLOCKING_S
                    return True
                if (self.stopping and cur is None) or self._app_waits():
                    return False
                seen = cur
            now = time.monotonic()
            if cur is not None or idle_since is None:
                idle_since = now
            elif now - idle_since >= _IDLE_S:
                self.standby_asleep = True
                if self.current is not None:  # an app started meanwhile: watch it
                    self.standby_asleep = False
                    idle_since = now

    def lead(self) -> None:
        """Own the loop until another thread takes it over or the server stops."""
        state = self._state
        manager = state.manager
        poll_ms = state.poll_ms
        me = threading.current_thread()
        try:
            outbox = state.outbox
            while not self.stopping:
                manager.poll(poll_ms)
                if outbox:
                    state.drain_outbox()
                if self.pending:
                    if time.monotonic() < self.blocking_until:
                        if self._slots:  # apps block: the other threads run them
                            self._wake_runners()
                    elif not self.run_pending():
                        return
                if self.owner is not me:
                    return
            state.drain_in_flight()
        except BaseException:
            self.stopping = True
            raise
        finally:
            if self.owner is me:
                with self._cond:
                    self.owner = None
                    self.loop_lock.release()
                    self._cond.notify_all()
                    self._standby_wake.set()

    def stop(self, timeout: float) -> None:
        with self._cond:
            self.stopping = True
            self._cond.notify_all()
            self._standby_wake.set()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self._threads = [t for t in self._threads if t.is_alive()]
