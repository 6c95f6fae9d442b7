"""The supervisor of `cymongoose --workers N`: N worker processes serving one listening
socket, kept alive.

The supervisor binds the socket, then starts each worker as a fresh interpreter
(`python -m cymongoose ... --worker-socket FD --worker-status FD`): it never imports the app
and never holds a Manager, so nothing is ever forked from a process with a live loop. All
workers accept from the one shared socket, so the kernel's accept queue outlives any single
worker: a worker that dies or restarts loses no connection waiting there. With --reuse-port
each worker binds a socket of its own (SO_REUSEPORT) once its app is loaded, and the
supervisor's (there for the port check and the start-up responder) closes when the first
worker is ready.

- A worker that dies is started again (at once, then with back-off while it keeps dying).
- A worker that fails before it is ready (a broken app, a bad option: it reports an error or
  exits by itself) stops the whole server with its error. One killed by a signal before it
  was ready (kill -9, the OOM killer) is restarted like any dead worker, unless that keeps
  happening: then it is a start-up crash, and the server stops.
- SIGTERM/SIGINT: each worker stops accepting, finishes its requests in flight and closes
  idle connections within --graceful-timeout; the supervisor exits 0 when all are gone.
  With --drain-delay each worker first serves on for the delay, its health path failing; a
  second signal is passed on, so they drain at once.
- SIGHUP: workers are replaced one at a time, each only once its successor is ready.
- SIGTTIN/SIGTTOU: one worker more / one less.
- A worker that reached --max-requests says so and drains; its successor starts at once.
- --workers-max-rss: a worker whose resident memory passes the limit is replaced as on
  SIGHUP (its successor is ready before it drains).
- --metrics: each worker counts into a shared memory slot of its own (worker_metrics.py); the
  supervisor adds them up, with what the workers that are gone had counted, and serves the
  document on its metrics listener (metrics_listener.py), with the utilisation it samples
  once a second (metrics/utilisation.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from ..config import Config
from ..errors import ConfigError, StartupFailed
from ..log_config import configure_logging
from .listening_socket import close_listener, open_listener
from .metrics_listener import MetricsListener
from .starting import StartingResponder, starting_responder
from .worker_metrics import MetricsSlot

if TYPE_CHECKING:
    from ..metrics import Utilisation

__all__ = ["Supervisor"]

log = logging.getLogger("cymongoose.error")

_TICK_S = 0.05
_READY_TIMEOUT_S = 120.0
_MAX_BACKOFF_S = 5.0
_STABLE_S = 10.0  # a worker that lived this long resets the back-off
_MAX_EARLY_KILLS = 5  # deaths by signal before ready, in a row, that stop the server
_RSS_CHECK_S = 1.0  # how often --workers-max-rss looks at the workers' memory
_RESTART_REASONS = ("died", "max_requests", "max_rss", "reload")


class _Worker:
    __slots__ = ("proc", "status_fd", "buf", "ready", "retiring", "started", "error",
                 "metrics", "replaces", "replaced")

    def __init__(self, proc: subprocess.Popen[bytes], status_fd: int,
                 metrics: MetricsSlot | None, replaces: _Worker | None) -> None:
        self.proc = proc
        self.status_fd = status_fd
        self.buf = b""
        self.ready = False
        self.retiring = False  # asked to stop (or stopping by itself): its exit is expected
        self.started = time.monotonic()
        self.error: str | None = None
        self.metrics = metrics
        self.replaces = replaces  # the worker to retire once this one is ready
        self.replaced = False  # a successor is starting for this one (--workers-max-rss)


class Supervisor:
    """Runs the workers until SIGTERM/SIGINT; `run()` returns the exit status."""

    def __init__(self, config: Config, argv: list[str]) -> None:
        self.config = config
        self.argv = argv
        self.target = config.workers
        self.workers: list[_Worker] = []
        self.stopping = False
        self.crashes = 0  # consecutive deaths, for the back-off
        self.early_kills = 0  # consecutive deaths by signal before ready
        self.restart_at: list[float] = []  # when each pending restart may start
        self.rolling: list[_Worker] = []  # SIGHUP: old workers still to replace
        self.successor: _Worker | None = None
        self.interface = "wsgi"  # what the workers said they serve ("ready <interface>")
        self.restarts = dict.fromkeys(_RESTART_REASONS, 0)
        self.gone_metrics: dict[str, Any] | None = None  # counted by exited workers
        self.metrics: MetricsListener | None = None
        self.utilisation: Utilisation | None = None  # with --metrics
        self.rss_checked = time.monotonic()
        self.starting: StartingResponder | None = None  # answers until a worker is ready

    def _stop_starting(self, ready: bool = False) -> None:
        if self.starting is not None:
            self.starting.close(ready)
            self.starting = None

    def run(self) -> int:
        try:
            configure_logging(self.config.log_level, False, None, self.config.log_config)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        # With --reuse-port the workers listen on sockets of their own; the supervisor's
        # listens only for the start-up responder (--health-path), else a client that came
        # before the first worker would wait in a queue that nobody accepts from.
        self.sock = open_listener(self.config, listen=not self.config.reuse_port
                                  or bool(self.config.health_path))
        self.port = self.sock.getsockname()[1] if self.config.reuse_port else 0
        if self.config.reuse_port and _sysctl("net/ipv4/tcp_migrate_req") == "0":
            log.warning("--reuse-port: net.ipv4.tcp_migrate_req is 0, so a worker that stops "
                        "(SIGHUP, --max-requests, a rollout) resets the connections waiting "
                        "in its accept queue; set it to 1 to have the kernel hand them to "
                        "another worker")
        try:
            # --health-path: 503 from the moment the port listens until a worker is ready.
            self.starting = starting_responder(self.config, self.sock)
        except BaseException:
            close_listener(self.config, self.sock)
            raise
        if self.config.metrics:
            try:
                self.metrics = MetricsListener(self.config, self._metrics_document)
            except ConfigError:
                self._stop_starting()
                close_listener(self.config, self.sock)
                raise
            log.info("metrics of all the workers at %s", self.metrics.url)
            from ..metrics import Utilisation

            self.utilisation = Utilisation()
        sig_r, sig_w = os.pipe()
        os.set_blocking(sig_w, False)
        old_wakeup = signal.set_wakeup_fd(sig_w)
        handled = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGTTIN,
                   signal.SIGTTOU)
        previous = {s: signal.signal(s, lambda *_: None) for s in handled}
        try:
            for _ in range(self.target):
                self._spawn()
            return self._loop(sig_r)
        except ConfigError:
            self._kill_all()
            raise
        finally:
            signal.set_wakeup_fd(old_wakeup)
            for s, h in previous.items():
                signal.signal(s, h)
            os.close(sig_r)
            os.close(sig_w)
            self._stop_starting()
            close_listener(self.config, self.sock)
            if self.metrics is not None:
                self.metrics.close()
            for w in self.workers:
                os.close(w.status_fd)
                if w.metrics is not None:
                    w.metrics.close()

    def _spawn(self, replaces: _Worker | None = None) -> _Worker:
        # A socket pair, not a pipe: the worker's `ready` gets a `go` back (status_pipe.py).
        ours, theirs = socket.socketpair()
        status_r, status_w = ours.detach(), theirs.detach()
        cmd = [sys.executable, "-m", "cymongoose", *self.argv, "--worker-status", str(status_w)]
        passed = [status_w]
        if self.config.reuse_port:
            # The worker binds a socket of its own, on the port the supervisor got (--port
            # 0 picks one): the last --port of the command line wins.
            cmd += ["--port", str(self.port)]
        else:
            fd = self.sock.fileno()
            cmd += ["--worker-socket", str(fd)]
            passed.append(fd)
        slot = MetricsSlot(self.config.loop_threads) if self.config.metrics else None
        if slot is not None:
            cmd += ["--worker-metrics", str(slot.fd)]
            passed.append(slot.fd)
        try:
            proc = subprocess.Popen(cmd, pass_fds=passed)
        except BaseException:
            if slot is not None:
                slot.close()
            raise
        finally:
            os.close(status_w)
        worker = _Worker(proc, status_r, slot, replaces)
        self.workers.append(worker)
        return worker

    def _totals(self) -> dict[str, Any]:
        """Every worker's counts, live ones and gone ones, added up."""
        from ..metrics import combine

        live = [w.metrics.read() for w in self.workers if w.metrics is not None]
        gone = [self.gone_metrics] if self.gone_metrics is not None else []
        return combine(gone + live)

    def _metrics_document(self) -> str:
        """Every worker's counts as one document, with the utilisation where the server has
        a fixed capacity (metrics/utilisation.py)."""
        from ..metrics import render

        serving = sum(1 for w in self.workers if w.ready and not w.retiring)
        per_worker = process_capacity(self.config, self.interface)
        capacity = None if per_worker is None else per_worker * serving
        utilisation = (None if capacity is None or self.utilisation is None
                       else self.utilisation.value(capacity))
        return render(self._totals(), interface=self.interface, workers=serving,
                      restarts=self.restarts, capacity=capacity, utilisation=utilisation)

    def _sample_utilisation(self, now: float) -> None:
        if self.utilisation is not None and self.utilisation.due(now):
            self.utilisation.sample(now, float(self._totals()["duration_sum"]))

    def _loop(self, sig_r: int) -> int:
        deadline: float | None = None
        announced = False
        while True:
            if self.stopping:
                announced = True  # a stop before every worker was ready: nothing to announce
            elif not announced and self.workers and all(w.ready for w in self.workers):
                announced = True  # after start-up: a failed start prints only its error
                log.info("%s of %s ready (supervisor pid %d)", _workers(len(self.workers)),
                         self.config.app or "a reverse proxy", os.getpid())
            fds = [sig_r] + [w.status_fd for w in self.workers]
            if self.metrics is not None:
                fds.append(self.metrics.fileno())
            readable, _, _ = select.select(fds, [], [], _TICK_S)
            if sig_r in readable:
                for signum in os.read(sig_r, 64):
                    self._on_signal(signum)
                if self.stopping and deadline is None:
                    deadline = (time.monotonic() + self.config.drain_delay
                                + self.config.graceful_timeout + 5.0)
            for w in list(self.workers):
                if w.status_fd in readable:
                    self._read_status(w)
            self._reap()
            if self.metrics is not None:
                self._sample_utilisation(time.monotonic())
                self.metrics.poll()  # after the reaping: a gone worker's counts are kept
            if self.stopping:
                if not self.workers:
                    log.info("all workers stopped")
                    return 0
                if deadline is not None and time.monotonic() > deadline:
                    log.error("workers still running after --graceful-timeout: killed")
                    self._kill_all()
                continue
            self._advance_rolling()
            now = time.monotonic()
            if self.config.workers_max_rss and now - self.rss_checked >= _RSS_CHECK_S:
                self.rss_checked = now
                self._check_memory()
            while self.restart_at and self.restart_at[0] <= now:
                self.restart_at.pop(0)
                self.restarts["died"] += 1
                self._spawn()
            for w in self.workers:
                if not w.ready and now - w.started > _READY_TIMEOUT_S:
                    raise ConfigError(f"worker {w.proc.pid} was not ready after "
                                      f"{_READY_TIMEOUT_S:.0f} s")

    def _on_signal(self, signum: int) -> None:
        if signum in (signal.SIGTERM, signal.SIGINT):
            if not self.stopping:
                log.info("stopping: draining %s", _workers(len(self.workers)))
                self.stopping = True
                self.sock.close()  # the workers hold the socket until they stop accepting
                for w in self.workers:
                    self._retire(w)
            elif self.config.drain_delay:
                # The workers serve on for --drain-delay: a second signal, passed on, makes
                # them drain now.
                for w in self.workers:
                    if w.proc.poll() is None:
                        w.proc.send_signal(signal.SIGTERM)
        elif signum == signal.SIGHUP and not self.rolling:
            log.info("SIGHUP: replacing the workers one at a time")
            self.rolling = [w for w in self.workers if not w.retiring]
        elif signum == signal.SIGTTIN:
            self.target += 1
            log.info("SIGTTIN: %s", _workers(self.target))
            self._spawn()
        elif signum == signal.SIGTTOU and self.target > 1:
            self.target -= 1
            log.info("SIGTTOU: %s", _workers(self.target))
            live = [w for w in self.workers if not w.retiring]
            if live:
                self._retire(live[-1])

    def _retire(self, w: _Worker) -> None:
        w.retiring = True
        if w.proc.poll() is None:
            w.proc.send_signal(signal.SIGTERM)

    def _advance_rolling(self) -> None:
        """SIGHUP: start one successor; once it is ready, retire one old worker."""
        if self.successor is not None:
            if not self.successor.ready:
                return
            self.successor = None
            old = self.rolling.pop(0)
            self._retire(old)
        self.rolling = [w for w in self.rolling if w in self.workers and not w.retiring]
        if self.rolling:
            self.restarts["reload"] += 1
            self.successor = self._spawn()

    def _check_memory(self) -> None:
        """--workers-max-rss: start a successor for each worker past the limit; the worker
        is retired once its successor is ready (_read_status), so no request is refused."""
        limit = self.config.workers_max_rss
        assert limit is not None
        for w in list(self.workers):
            if not w.ready or w.retiring or w.replaced:
                continue
            rss = _rss_mib(w.proc.pid)
            if rss is not None and rss > limit:
                log.warning("worker %d uses %.0f MiB (--workers-max-rss %d): replacing it",
                            w.proc.pid, rss, limit)
                w.replaced = True
                self.restarts["max_rss"] += 1
                self._spawn(replaces=w)

    def _read_status(self, w: _Worker) -> None:
        try:
            data = os.read(w.status_fd, 4096)
        except OSError:
            data = b""
        w.buf += data
        while b"\n" in w.buf:
            line, w.buf = w.buf.split(b"\n", 1)
            text = line.decode("utf-8", "replace")
            if text == "ready" or text.startswith("ready "):
                w.ready = True
                # The worker waits for `go` before it accepts: the start-up responder stops
                # taking connections first, so no client gets its 503 after a worker's 200.
                if self.starting is not None:
                    self.starting.stop_accepting(ready=True)
                with contextlib.suppress(OSError):  # a worker already gone
                    os.write(w.status_fd, b"go\n")
                self._stop_starting(ready=True)  # answers what it accepted, then closes
                if self.config.reuse_port:
                    # The workers listen on sockets of their own: one that nobody accepts
                    # from would hold the connections the kernel hands it.
                    self.sock.close()
                self.early_kills = 0
                self.interface = text[6:] or self.interface
                old, w.replaces = w.replaces, None
                if old is not None and old in self.workers and not self.stopping:
                    self._retire(old)
            elif text == "recycle":
                if not w.retiring and not self.stopping:
                    w.retiring = True
                    log.info("worker %d reached --max-requests: replacing it", w.proc.pid)
                    self.restarts["max_requests"] += 1
                    self._spawn()
            elif text.startswith("error "):
                w.error = text[6:]

    def _reap(self) -> None:
        for w in list(self.workers):
            code = w.proc.poll()
            if code is None:
                continue
            self._read_status(w)  # a last line may still be in the pipe
            self.workers.remove(w)
            os.close(w.status_fd)
            self._keep_counts(w)
            if w.replaces is not None:
                # A successor died before it was ready: the worker it was to replace serves
                # on, and the next memory check tries again.
                w.replaces.replaced = False
                if not self.stopping:
                    log.error("worker %d, started to replace worker %d, exited before it was "
                              "ready", w.proc.pid, w.replaces.proc.pid)
                continue
            if w.retiring or self.stopping:
                continue
            how = f"signal {-code}" if code < 0 else f"status {code}"
            if not w.ready:
                # An error of its own (it reported one, or exited) repeats in every
                # successor; a signal came from outside, so a successor may well start.
                self.early_kills += 1
                if w.error or code >= 0 or self.early_kills >= _MAX_EARLY_KILLS:
                    self._kill_all()
                    # Status 3: the app's startup failed (serve.py), which the supervisor
                    # passes on, as a single server would exit.
                    failed = StartupFailed if code == StartupFailed.exit_status else ConfigError
                    raise failed(w.error or f"worker {w.proc.pid} exited with {how} "
                                 "before it was ready")
            if time.monotonic() - w.started > _STABLE_S:
                self.crashes = 0
            delay = 0.0 if self.crashes == 0 else min(_MAX_BACKOFF_S,
                                                      0.1 * 2 ** (self.crashes - 1))
            self.crashes += 1
            log.error("worker %d died (%s); restarting it in %.1f s", w.proc.pid, how, delay)
            self.restart_at.append(time.monotonic() + delay)
            self.restart_at.sort()

    def _keep_counts(self, w: _Worker) -> None:
        """A worker is gone: what it counted stays in the totals (its gauges do not)."""
        if w.metrics is None:
            return
        from ..metrics import combine, settled

        last = settled(w.metrics.read())
        self.gone_metrics = combine([self.gone_metrics, last] if self.gone_metrics else [last])
        w.metrics.close()
        w.metrics = None

    def _kill_all(self) -> None:
        for w in self.workers:
            if w.proc.poll() is None:
                w.proc.kill()
        for w in self.workers:
            try:
                w.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass


def process_capacity(config: Config, interface: str) -> int | None:
    """Requests one worker process can work on at once: its WSGI app threads (fewer under
    a smaller --limit-concurrency), else its --limit-concurrency, per loop thread; None
    where nothing bounds it (an ASGI app or raw handler without a limit, whose bound is the
    loop's CPU)."""
    limit = config.limit_concurrency
    if interface == "wsgi":
        per_loop = min(config.threads, limit) if limit else config.threads
    elif limit:
        per_loop = limit
    else:
        return None
    return per_loop * config.loop_threads


def _sysctl(name: str) -> str | None:
    """A kernel setting under /proc/sys (None where there is none: not Linux, or too old)."""
    try:
        with open(f"/proc/sys/{name}") as f:
            return f.read().strip()
    except OSError:
        return None


def _workers(n: int) -> str:
    return f"{n} worker" if n == 1 else f"{n} workers"


def _rss_mib(pid: int) -> float | None:
    """A process's resident memory in MiB (None: it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
