"""A PostgreSQL cluster of the tests' own, set up as TechEmpower runs its database.

`PostgresCluster(directory, port)` is a context manager: `start()` runs initdb the first time
(into `directory/data`, the directory created if missing) and then `pg_ctl start -w`, so it
returns once the server accepts connections; `stop()` is `pg_ctl stop -m fast` (sessions are
ended, not waited for) and may be followed by another `start()` on the same data; leaving the
`with` block stops the server and removes the directory if the cluster made it (also when
the block raised). `seed()` creates the database `hello_world` with TechEmpower's `world`
(10,000 rows of id, randomnumber 1..10000) and `fortune` (its 12 messages) tables.

Where it runs, and why:
- The binaries come from /usr/lib/postgresql/<highest version>/bin (Debian's layout), never
  from PATH: a CI machine has no initdb on PATH. Missing, they give PostgresNotInstalled,
  one line naming the Debian package.
- PostgreSQL refuses to run as root: under euid 0 initdb and pg_ctl run as the `postgres`
  user, who is given the directory (its parents must let that user through: a directory of
  its own under /tmp does, pytest's tmp_path, under a 0700 folder of root's, does not).
- Only 127.0.0.1 on `port`, the Unix socket inside the directory (never the system's socket
  directory nor port 5432: other clusters may run beside this one), trust authentication.
- fsync, synchronous_commit and full_page_writes off, as TechEmpower's database runs:
  nothing here must survive a crash. max_connections 256: several app pools at once.

`python -m realworld.postgres_cluster --dir D --port P` (from tests/) starts and seeds one,
prints its DSN, and stays in the foreground until SIGTERM or SIGINT, then stops and cleans
up.
"""

from __future__ import annotations

import argparse
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

from support.subprocess_env import child_env

PG_ROOT = Path("/usr/lib/postgresql")
DEBIAN_PACKAGE = "postgresql"
DATABASE = "hello_world"
SUPERUSER = "postgres"
# pg_ctl's own bound on start and stop (-t), and ours on the command around it.
PG_CTL_WAIT_S = 60
COMMAND_TIMEOUT_S = PG_CTL_WAIT_S + 30

SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "256",
    # Quiet: the log file is read only when something went wrong.
    "log_min_messages": "warning",
    "log_min_error_statement": "panic",
}

HBA = """\
# The tests' own cluster: the socket in its directory and 127.0.0.1, no password.
local all all trust
host all all 127.0.0.1/32 trust
"""

# TechEmpower's fortune table, id and message (its HTML-escaping case is id 11).
FORTUNES = [
    (1, "fortune: No such file or directory"),
    (2, "A computer scientist is someone who fixes things that aren't broken."),
    (3, "After enough decimal places, nobody gives a damn."),
    (4, "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1"),
    (5, "A computer program does what you tell it to do, not what you want it to do."),
    (6, "Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen"),
    (7, "Any program that runs right is obsolete."),
    (8, "A list is only as strong as its weakest link. — Donald Knuth"),
    (9, "Feature: A bug with seniority."),
    (10, "Computers make very fast, very accurate mistakes."),
    (11, '<script>alert("This should not be displayed in a browser alert box.");</script>'),
    (12, "フレームワークのベンチマーク"),
]
WORLD_ROWS = 10_000

SCHEMA = f"""
CREATE TABLE world (id integer NOT NULL PRIMARY KEY, randomnumber integer NOT NULL DEFAULT 0);
CREATE TABLE fortune (id integer NOT NULL PRIMARY KEY, message varchar(2048) NOT NULL);
INSERT INTO world (id, randomnumber)
    SELECT n, 1 + floor(random() * {WORLD_ROWS})::integer FROM generate_series(1, {WORLD_ROWS}) n;
"""


class PostgresNotInstalled(RuntimeError):
    pass


def server_binaries(root: Path = PG_ROOT) -> Path:
    """The bin/ folder of the highest PostgreSQL version installed the Debian way."""
    found = [p for p in root.glob("*/bin") if (p / "initdb").is_file()
             and (p / "pg_ctl").is_file() and re.fullmatch(r"\d+(\.\d+)?", p.parent.name)]
    if not found:
        raise PostgresNotInstalled(
            f"PostgreSQL not found ({root}/<version>/bin/initdb and pg_ctl): install the "
            f"Debian package `{DEBIAN_PACKAGE}` (make debian-packages does)")
    return max(found, key=lambda p: tuple(int(n) for n in p.parent.name.split(".")))


class PostgresCluster:
    def __init__(self, directory: Path, port: int) -> None:
        self.directory = Path(directory).resolve()
        self.port = port
        self.data = self.directory / "data"
        self.log_file = self.directory / "postgres.log"
        self.bin = server_binaries()
        self._made_directory = False
        self._running = False
        # Under root, every command runs as this user (uid, gid); None: as ourselves.
        self._as: tuple[int, int] | None = None
        if os.geteuid() == 0:
            entry = pwd.getpwnam(SUPERUSER)
            self._as = (entry.pw_uid, entry.pw_gid)

    @property
    def dsn(self) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{DATABASE}"

    @property
    def postmaster_pid(self) -> int:
        """The server's process id, from postmaster.pid (first line)."""
        return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])

    def start(self) -> None:
        if not (self.data / "PG_VERSION").exists():
            self._init()
        self._pg_ctl("start", "-l", str(self.log_file))
        self._running = True

    def stop(self) -> None:
        """`pg_ctl stop -m fast`; if that does not end it in time, SIGKILL the postmaster
        (its children then exit on their own, seeing it gone)."""
        if not self._running:
            return
        self._running = False
        try:
            self._pg_ctl("stop", "-m", "fast")
        except (subprocess.SubprocessError, RuntimeError):
            try:
                os.kill(self.postmaster_pid, signal.SIGKILL)
            except (OSError, ValueError):
                pass
            raise

    def seed(self) -> None:
        """The database `hello_world` with TechEmpower's tables and rows, made anew."""
        import psycopg

        admin = f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres"
        with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
            conn.execute(f"CREATE DATABASE {DATABASE} ENCODING 'UTF8' TEMPLATE template0")
        with psycopg.connect(self.dsn, connect_timeout=10) as conn:
            conn.execute(SCHEMA)
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO fortune (id, message) VALUES (%s, %s)", FORTUNES)
            conn.execute("ANALYZE")

    def log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except OSError:
            return ""

    def __enter__(self) -> PostgresCluster:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self.stop()
        finally:
            if self._made_directory:
                shutil.rmtree(self.directory, ignore_errors=True)

    def _init(self) -> None:
        if not self.directory.exists():
            self.directory.mkdir(parents=True)
            self._made_directory = True
        elif not any(self.directory.iterdir()):
            self._made_directory = True
        if self._as is not None:
            os.chown(self.directory, *self._as)
            probe = subprocess.run(["test", "-w", str(self.directory)],
                                   **self._as_user(cwd=Path("/")))
            if probe.returncode != 0:
                raise RuntimeError(f"user {SUPERUSER} cannot reach {self.directory} (a "
                                   "parent folder shuts it out): use a folder under /tmp")
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", SUPERUSER,
                   "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"])
        settings = dict(SETTINGS, port=str(self.port),
                        unix_socket_directories=f"'{self.directory}'")
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("\n# The tests' own cluster (tests/realworld/postgres_cluster.py)\n")
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())
        (self.data / "pg_hba.conf").write_text(HBA)

    def _pg_ctl(self, action: str, *args: str) -> None:
        self._run([str(self.bin / "pg_ctl"), action, "-D", str(self.data), "-w",
                   "-t", str(PG_CTL_WAIT_S), *args])

    def _run(self, argv: list[str]) -> None:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                              **self._as_user())
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): "
                               f"{done.stdout}{done.stderr}\n{self.log()[-3000:]}")

    def _as_user(self, cwd: Path | None = None) -> dict[str, Any]:
        """subprocess keywords: as the postgres user under root, in the cluster's directory
        (the caller's may be shut to that user), without the AddressSanitizer preload."""
        kw: dict[str, Any] = {"env": child_env(), "cwd": cwd or self.directory}
        if self._as is not None:
            kw.update(user=self._as[0], group=self._as[1], extra_groups=[])
        return kw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="the cluster's directory")
    parser.add_argument("--port", type=int, required=True, help="its port on 127.0.0.1")
    args = parser.parse_args()
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    try:
        with PostgresCluster(args.dir, args.port) as cluster:
            cluster.start()
            cluster.seed()
            print(f"ready {cluster.dsn} pid {cluster.postmaster_pid}", flush=True)
            stopping.wait()
    except PostgresNotInstalled as exc:
        sys.exit(str(exc))


if __name__ == "__main__":
    main()
