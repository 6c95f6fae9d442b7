"""Contenders: discovered from servers/, prepared (environment, build), started, stopped.

Each file in servers/ declares one contender (``CONTENDER = {...}``) or several
(``CONTENDERS = [...]``) as a literal: a module-level assignment in a .py file, or the same
text inside the leading comment of a .c/.conf file. The runner never imports a server file (its
framework is not installed in the runner's environment); it reads the literal. Keys:

  name        unique id used on the command line and in the results
  label       how the table shows it
  kind        "hello" (GET / -> the JSON hello), "static" (GET /<file> from {static_dir}) or
              "proxy" (a reverse proxy in front of {backend}, the proxy phase's C server)
  env         "project" (our .venv), "system" (no Python), or the name of a venv under
              .envs/ made by uv from ``requires`` (contenders may share one env)
  requires    requirement strings for that venv
  packages    distribution names whose versions are reported (default: from requires)
  command     argv; {python} {file} {dir} {module} {port} {static_dir} {workdir} {config}
              {exe} {root} {workers} are substituted, and {backend} (host:port) for a proxy;
              {workers} is 1 but in the workers phase (a contender whose command or template
              has it takes part in that phase)
  template    True: the file itself is a config template; its substituted copy is {config}
  build       "mongoose-c": compile the file with our Mongoose flags; the binary is {exe}
  tools       executables the contender needs (a missing one skips it, naming it)
  version_cmd argv printing the tool's version (nginx -v)
  keepalive   False for servers that do not keep connections open (checked, and shown)
  quick       True: part of the bench-quick subset
  phases      the runner phases it takes part in (default: its kind's own, "hello" or
              "static"; for a hello server also "close", and as default_phases() says
              "pythons", "clients256" and "workers"); "connections" is the 1,000 and 10,000
              keep-alive clients phase
  app         the app it serves, for the in-process cost (app_cost.py) and the overhead per
              request: {"interface": "wsgi" or "asgi", "ref": "module:attr" (imported from
              servers/), "label": "Flask hello"}; servers of the same ref serve the same object
  notes       one line shown under the table (workers, threads, options)
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent.parent
SERVERS_DIR = BENCH_DIR / "servers"
ROOT = BENCH_DIR.parent.parent
# CYMONGOOSE_BENCH_ENVS: another place for them, for a runner that is not on this machine's
# own interpreters (bench.mk's bench-py314, inside make test's sid root).
ENVS_DIR = Path(os.environ.get("CYMONGOOSE_BENCH_ENVS") or BENCH_DIR / ".envs")
CACHE_DIR = BENCH_DIR / ".cache"

_KEYS = {"name", "label", "kind", "env", "requires", "packages", "command", "template",
         "build", "tools", "version_cmd", "keepalive", "quick", "notes", "startup_timeout",
         "app", "phases"}


# The apps whose servers the clients256 phase runs (many keep-alive clients, one worker each).
MANY_CLIENT_APPS = ("hello_apps:flask_app", "hello_apps:fastapi_app")


class Skip(Exception):
    """This contender cannot run here; the message says why (reported, never fatal)."""


@dataclass
class Contender:
    name: str
    label: str
    kind: str
    file: Path
    command: list[str]
    env: str = "project"
    requires: list[str] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)
    template: bool = False
    build: str | None = None
    tools: list[str] = field(default_factory=list)
    version_cmd: list[str] | None = None
    keepalive: bool = True
    quick: bool = False
    phases: list[str] = field(default_factory=list)
    notes: str = ""
    startup_timeout: float = 60.0
    app: dict[str, str] | None = None
    # Filled in by prepare():
    python: str | None = None
    exe: Path | None = None
    versions: dict[str, str] = field(default_factory=dict)


def _literal_from_text(text: str, path: Path) -> Any:
    # Strip comment markers (#, //, /* */, leading *) and find the declaration literal.
    lines = []
    for line in text.splitlines():
        s = line.strip()
        for prefix in ("/*", "*/", "//", "#", "*"):
            if s.startswith(prefix):
                s = s[len(prefix):]
                break
        lines.append(s.removesuffix("*/"))
    body = "\n".join(lines)
    m = re.search(r"\bCONTENDERS?\s*=\s*", body)
    if m is None:
        return None
    start = m.end()
    opener = body[start]
    closer = {"{": "}", "[": "]"}.get(opener)
    if closer is None:
        raise ValueError(f"{path.name}: CONTENDER must be a dict literal (or CONTENDERS a list)")
    depth = 0
    for i in range(start, len(body)):
        if body[i] == opener:
            depth += 1
        elif body[i] == closer:
            depth -= 1
            if depth == 0:
                return ast.literal_eval(body[start:i + 1])
    raise ValueError(f"{path.name}: unbalanced CONTENDER literal")


def _literal_from_python(text: str, path: Path) -> Any:
    for node in ast.parse(text, str(path)).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id in ("CONTENDER", "CONTENDERS"):
                try:
                    return ast.literal_eval(node.value)
                except ValueError:
                    raise ValueError(f"{path.name}: {target.id} must be a plain literal "
                                     "(the runner reads it without importing the file)") from None
    return None


def default_phases(entry: dict[str, Any], text: str) -> list[str]:
    """The phases of a contender that declares none: its kind's; a hello server also takes
    the connection-per-request phase ("close"), an app server the per-Python phase
    ("pythons"), a Flask or FastAPI server the many-clients phase ("clients256"), and one
    whose command or config template takes {workers} the multi-worker phase ("workers")."""
    phases = [entry["kind"]]
    if entry["kind"] != "hello":
        return phases
    phases.append("close")
    app = entry.get("app")
    if app is not None:
        phases.append("pythons")
        if app["ref"] in MANY_CLIENT_APPS:
            phases.append("clients256")
    if any("{workers}" in a for a in entry["command"]) or (entry.get("template")
                                                           and "{workers}" in text):
        phases.append("workers")
    return phases


def discover(servers_dir: Path = SERVERS_DIR) -> list[Contender]:
    found: dict[str, Contender] = {}
    for path in sorted(servers_dir.iterdir()):
        if path.name.startswith((".", "_")) or not path.is_file():
            continue
        text = path.read_text()
        decl = (_literal_from_python if path.suffix == ".py" else _literal_from_text)(text, path)
        if decl is None:
            continue
        for entry in decl if isinstance(decl, list) else [decl]:
            unknown = set(entry) - _KEYS
            if unknown:
                raise ValueError(f"{path.name}: unknown contender keys {sorted(unknown)}")
            for key in ("name", "kind", "command"):
                if key not in entry:
                    raise ValueError(f"{path.name}: contender without {key!r}")
            if entry["kind"] not in ("hello", "static", "proxy"):
                raise ValueError(f"{path.name}: kind must be 'hello', 'static' or 'proxy'")
            app = entry.get("app")
            if app is not None and (not isinstance(app, dict) or set(app) != {
                    "interface", "ref", "label"} or app["interface"] not in ("wsgi", "asgi")):
                raise ValueError(f"{path.name}: app must be {{'interface': 'wsgi'|'asgi', "
                                 "'ref': 'module:attr', 'label': ...}")
            if entry["name"] in found:
                raise ValueError(f"contender name {entry['name']!r} declared twice")
            entry.setdefault("label", entry["name"])
            if "phases" not in entry:
                entry["phases"] = default_phases(entry, text)
            if "packages" not in entry:
                entry["packages"] = [re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0]
                                     for r in entry.get("requires", [])]
            found[entry["name"]] = Contender(file=path, **entry)
    return list(found.values())


def _run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def _tail(text: str, n: int = 4) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:])


def uv_command() -> list[str]:
    # The Makefile passes the uv it bootstrapped (tools/bootstrap-uv.sh).
    uv = os.environ.get("UV")
    if uv:
        return uv.split()
    if shutil.which("uv"):
        return ["uv"]
    raise Skip("uv is needed to create the peers' environments: run through `make bench`, "
               "which installs it, or install uv")


def ensure_env(c: Contender, base_python: str, pip_args: list[str] | None = None) -> str:
    """The venv for c.env (created or refreshed when its requirements or `pip_args`, given
    to the install, change)."""
    pip_args = pip_args or []
    env_dir = ENVS_DIR / c.env
    python = env_dir / "bin" / "python"
    stamp = env_dir / ".requires"
    wanted = "\n".join(sorted(c.requires)) + "\n" + (
        f"{' '.join(pip_args)}\n" if pip_args else "")
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return str(python)
    uv = uv_command()
    env_dir.parent.mkdir(parents=True, exist_ok=True)
    r = _run(uv + ["venv", "--quiet", "--clear", "--python", base_python, str(env_dir)])
    if r.returncode != 0:
        raise Skip(f"could not create its venv: {_tail(r.stderr)}")
    r = _run(uv + ["pip", "install", "--quiet", "--python", str(python), *pip_args]
             + c.requires)
    if r.returncode != 0:
        raise Skip(f"could not install {' '.join(c.requires)}: {_tail(r.stderr)}")
    stamp.write_text(wanted)
    return str(python)


def package_versions(python: str, packages: list[str]) -> dict[str, str]:
    if not packages:
        return {}
    code = ("import importlib.metadata as m, json, sys\n"
            "out = {}\n"
            "for p in sys.argv[1:]:\n"
            "    try: out[p] = m.version(p)\n"
            "    except m.PackageNotFoundError: out[p] = 'missing'\n"
            "print(json.dumps(out))")
    r = _run([python, "-c", code] + packages)
    if r.returncode != 0:
        return {p: "unknown" for p in packages}
    import json
    return json.loads(r.stdout)


def freeze(python: str) -> list[str]:
    try:
        r = _run(uv_command() + ["pip", "freeze", "--python", python])
    except Skip:
        return []
    return r.stdout.split() if r.returncode == 0 else []


def mongoose_flags() -> dict[str, Any]:
    """The compile flags and defines our extension's Mongoose was built with.

    Read from the build tree scikit-build-core left (build.ninja), so the C ceiling is built
    exactly like the library we measure; CMakeLists.txt is the fallback on a fresh clone.
    """
    for ninja in sorted(ROOT.glob("build/*/build.ninja")):
        text = ninja.read_text()
        # The Mongoose target's object (not the Cython module's _mongoose.c.o).
        m = re.search(r"^build \S*(?<!_)mongoose\.c\.o: \S+ \S*(?<!_)mongoose\.c\b.*\n"
                      r"((?:  .*\n)+)", text, re.MULTILINE)
        if m:
            block = dict(re.findall(r"^  (\w+) = (.*)$", m.group(1), re.MULTILINE))
            if "-fsanitize" in block.get("FLAGS", ""):
                continue  # `make asan-test`'s tree (build/asan): never the measured build
            return {"source": str(ninja.relative_to(ROOT)),
                    "defines": block.get("DEFINES", "").split(),
                    "flags": [f for f in block.get("FLAGS", "").split()]}
    text = (ROOT / "CMakeLists.txt").read_text()
    m = re.search(r"target_compile_definitions\(mongoose PUBLIC(.*?)\)", text, re.DOTALL)
    defines = []
    if m:
        for line in m.group(1).splitlines():
            line = line.split("#")[0].strip()
            defines += [f"-D{d}" for d in line.split()]
    # scikit-build-core builds Release by default: CMake's Release flags.
    return {"source": "CMakeLists.txt", "defines": defines,
            "flags": ["-O3", "-DNDEBUG", "-fPIC", "-fvisibility=hidden"]}


def build_mongoose_c(c: Contender) -> tuple[Path, dict[str, Any]]:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        raise Skip("no C compiler (gcc) to build it: apt-get install gcc")
    mg = ROOT / "vendor" / "mongoose"
    if not (mg / "mongoose.c").exists():
        raise Skip("vendor/mongoose/mongoose.c is missing: run `make fetch` (or `make setup`)")
    info = mongoose_flags()
    exe = CACHE_DIR / "build" / c.file.stem
    exe.parent.mkdir(parents=True, exist_ok=True)
    # Our extension compiles the pinned mongoose.c with our build fixes applied
    # (vendor/mongoose/build_fixes.py, run by CMakeLists.txt): so does the ceiling.
    source = mg / "mongoose.c"
    fixes = mg / "build_fixes.py"
    if fixes.exists():
        source = exe.parent / "mongoose.c"
        r = _run([sys.executable, str(fixes), str(mg / "mongoose.c"), str(source)])
        if r.returncode != 0:
            raise Skip(f"applying {fixes.name} failed: {_tail(r.stdout + r.stderr)}")
    # Built like ours, TLS engine included: the OpenSSL engine needs its libraries linked
    # (a plain-HTTP hello never calls them).
    libs = ["-lssl", "-lcrypto"] if "-DMG_TLS=MG_TLS_OPENSSL" in info["defines"] else []
    libs.append("-lz")  # the WebSocket client's --deflate mode (ws/ws_echo_client.c)
    cmd = ([gcc] + info["flags"] + info["defines"] + ["-I", str(mg), str(c.file),
           str(source), "-o", str(exe)] + libs)
    digest = hashlib.sha256(" ".join(cmd).encode() + c.file.read_bytes()
                            + source.read_bytes()).hexdigest()
    stamp = exe.with_suffix(".sha256")
    if not (exe.exists() and stamp.exists() and stamp.read_text() == digest):
        r = _run(cmd)
        if r.returncode != 0:
            raise Skip(f"compiling {c.file.name} failed: {_tail(r.stderr)}")
        stamp.write_text(digest)
    cc_version = _run([gcc, "--version"]).stdout.splitlines()[0]
    info = dict(info, compiler=cc_version, command=" ".join(
        os.path.relpath(a, ROOT) if a.startswith(str(ROOT)) else a for a in cmd))
    return exe, info


def prepare(c: Contender, project_python: str, base_python: str,
            pip_args: list[str] | None = None) -> None:
    """Make c runnable (tools present, env built with `pip_args` given to its install,
    binary compiled); Skip if it cannot be."""
    for tool in c.tools:
        if shutil.which(tool) is None:
            raise Skip(f"{tool} is not installed (apt-get install {tool}, or `make bench`, "
                       "which installs the Debian packages in tools/debian-packages.txt)")
    if c.env == "project":
        c.python = project_python
    elif c.env != "system":
        c.python = ensure_env(c, base_python, pip_args)
    if c.build == "mongoose-c":
        c.exe, info = build_mongoose_c(c)
        c.versions["compiler"] = info["compiler"]
        c.versions["cflags"] = " ".join(info["flags"] + info["defines"])
    elif c.build is not None:
        raise Skip(f"unknown build kind {c.build!r}")
    if c.python and c.packages:
        c.versions.update(package_versions(c.python, c.packages))
    if c.version_cmd:
        r = _run(c.version_cmd)
        line = _tail(r.stdout + r.stderr, 1)
        c.versions[c.version_cmd[0]] = re.sub(r"^.*?version:?\s*", "", line)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _substitute(text: str, values: dict[str, str]) -> str:
    # Only known names are replaced, so nginx's own braces pass through untouched.
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), text)


@dataclass
class Running:
    contender: Contender
    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    workdir: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, n: int = 6) -> str:
        try:
            return _tail(self.log.read_text(errors="replace"), n)
        except OSError:
            return ""

    def stop(self, grace_s: float = 10.0) -> int | None:
        """SIGTERM the server's process group, SIGKILL it after the grace period.

        Returns the exit code (negative: killed by that signal)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        # Workers that outlived their parent are still in the group: end them too.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return self.proc.returncode


def start(c: Contender, *, cpu: int | str | None, static_dir: Path, run_dir: Path,
          port: int | None = None, values: dict[str, str] | None = None) -> Running:
    """`cpu`: the CPU to pin the server to, or a taskset list ("0-7") for several workers."""
    port = port or free_port()
    workdir = run_dir / c.name
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    values = {
        "python": c.python or "python3", "file": str(c.file), "dir": str(c.file.parent),
        "module": c.file.stem, "port": str(port), "static_dir": str(static_dir),
        "workdir": str(workdir), "exe": str(c.exe or ""), "root": str(ROOT),
        "bench": str(BENCH_DIR), "workers": "1",
    } | (values or {})
    if c.template:
        config = workdir / c.file.name
        config.write_text(_substitute(c.file.read_text(), values))
        values["config"] = str(config)
    argv = [_substitute(a, values) for a in c.command]
    if cpu is not None:
        argv = ["taskset", "-c", str(cpu)] + argv
    env = dict(os.environ)
    # Python servers: no .pyc writes racing, unbuffered logs, and nothing inherited from the
    # runner's own venv.
    env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    env.pop("VIRTUAL_ENV", None)
    if c.env != "project":
        env.pop("PYTHONPATH", None)
    log = workdir / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, cwd=c.file.parent, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    running = Running(c, proc, port, log, workdir)
    deadline = time.monotonic() + c.startup_timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Skip(f"exited with status {proc.returncode} at start-up: "
                       f"{running.log_tail()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return running
        except OSError:
            time.sleep(0.1)
    running.stop()
    raise Skip(f"not listening on port {port} after {c.startup_timeout:g} s: "
               f"{running.log_tail()}")
