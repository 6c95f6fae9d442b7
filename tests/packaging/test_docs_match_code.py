"""The docs name only what the code has: every `--option` of the `cymongoose` command line
they mention is one of its parser's, every `CYMONGOOSE_*` variable is an option's or one the
build or the tests read, every `cymongoose.xxx` module (and attribute) exists, every public
module is in the API reference, and the README's layout lists every module.

Which `--options` are the command line's: those in a `cymongoose ...` command (a line of a
code block, continued by a trailing backslash, or an inline code span) and inline code spans
that start with `--` (`--workers N` in a table or a sentence). Commands of other programs
(wrk, curl, pip, the benchmark runner) are never checked; the benchmark runner's options may
also appear as spans, since docs/performance.md documents it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

from cymongoose import cli

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "cymongoose"
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]

# Modules with an __all__ that users never import, so the API reference leaves them out: the
# command line's processes (users reach them through the options, docs/deployment.md), the
# servers only the command line picks (bare/: --interface raw, --proxy without an app), the
# parts the servers share, and the socket watches aio.LoopDriver keeps without epoll.
INTERNAL = {"bare", "log_config", "process", "serving", "socket_watches"}

OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
# The program with arguments: `cymongoose app:app`, `.../bin/cymongoose`, `"cymongoose", "...`
# (not cymongoose.wsgi, cymongoose-raw or src/cymongoose/).
COMMAND = re.compile(r"(?<![\w.-])cymongoose(?![\w./-])[\"']?,?\s+\S")
SPAN = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^\s*```")
VARIABLE = re.compile(r"\bCYMONGOOSE_[A-Z0-9_]*[A-Z0-9]\b")
MODULE_REF = re.compile(r"(?<![\w./-])cymongoose\.([a-z_][a-z0-9_]*)((?:\.[A-Za-z_]\w*)*)")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _parser_options() -> tuple[set[str], set[str]]:
    """The option strings people may use, and their CYMONGOOSE_* variables (cli.py's
    `_env_defaults`: each option's dest upper-cased, the app as CYMONGOOSE_APP; hidden options
    and --help/--version have none)."""
    options: set[str] = set()
    variables = {"CYMONGOOSE_APP"}
    for action in cli._parser()._actions:
        if action.help == argparse.SUPPRESS:
            continue  # set by the supervisor for its workers: not for people or docs
        options.update(action.option_strings)
        if action.option_strings and action.dest not in ("help", "version"):
            variables.add("CYMONGOOSE_" + action.dest.upper())
    return options, variables


def _runner_options() -> set[str]:
    """The benchmark runner's own options (docs/performance.md quotes them)."""
    source = _text(ROOT / "tests" / "benchmarks" / "run.py")
    return set(re.findall(r"add_argument\((?:\"-\w\", )?\"(--[a-z0-9-]+)\"", source))


def _build_and_test_variables() -> set[str]:
    """CYMONGOOSE_* variables that are not options: read by the build (CMake, the Makefile,
    pyproject.toml, the vendoring scripts) or by the tests (os.environ)."""
    found: set[str] = set()
    for path in [ROOT / "CMakeLists.txt", ROOT / "Makefile", ROOT / "pyproject.toml",
                 *sorted((ROOT / "vendor" / "mongoose").glob("*.py"))]:
        found.update(VARIABLE.findall(_text(path)))
    read = re.compile(r"environ(?:\.get\(|\[)\s*\"(CYMONGOOSE_\w+)\"")
    for path in sorted((ROOT / "tests").rglob("*.py")):
        found.update(read.findall(_text(path)))
    return found


def _mentioned_options(text: str) -> Iterator[tuple[int, str]]:
    """(line number, --option) of the command line's options the text mentions."""
    in_code = False
    continued = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_code = not in_code
            continued = False
            continue
        if in_code:
            command = continued or bool(COMMAND.search(line))
            if command:
                yield from ((number, opt) for opt in OPTION.findall(line))
            continued = command and line.rstrip().endswith("\\")
            continue
        for span in SPAN.findall(line):
            if span.startswith("--") or COMMAND.search(span):
                yield from ((number, opt) for opt in OPTION.findall(span))


def _example_docstrings() -> str:
    """The examples' docstrings as code blocks (they show the commands that serve them)."""
    blocks = []
    for path in sorted((ROOT / "examples").glob("*.py")):
        match = re.match(r'\s*"""(.*?)"""', _text(path), re.S)
        if match:
            blocks.append(f"```\n{match.group(1)}\n```")
    return "\n".join(blocks)


def test_every_option_mentioned_is_the_command_lines() -> None:
    options, _ = _parser_options()
    runner = _runner_options()
    wrong = []
    sources = [(p.relative_to(ROOT).as_posix(), _text(p)) for p in PAGES]
    sources.append(("examples/*.py docstrings", _example_docstrings()))
    for name, text in sources:
        for number, opt in _mentioned_options(text):
            if opt not in options and not (name == "docs/performance.md" and opt in runner):
                wrong.append(f"{name}:{number}: {opt}")
    assert not wrong, "not options of `cymongoose` (cli.py):\n" + "\n".join(wrong)


def test_the_check_sees_commands_and_spans_but_not_other_programs() -> None:
    sample = ("Run `cymongoose app:app --bogus-one` or use `--bogus-two N`.\n"
              "```sh\n/usr/bin/cymongoose app:app \\\n    --bogus-three\n"
              "wrk -t1 --latency http://x/\ncurl --data-binary @f http://x/\n"
              'CMD ["cymongoose", "app:app", "--bogus-four"]\n```\n'
              "Not `wrk --latency`, nor cymongoose-raw --only here.\n")
    assert [opt for _, opt in _mentioned_options(sample)] == [
        "--bogus-one", "--bogus-two", "--bogus-three", "--bogus-four"]


def test_every_variable_mentioned_exists() -> None:
    _, variables = _parser_options()
    known = variables | _build_and_test_variables()
    wrong = sorted({f"{p.relative_to(ROOT).as_posix()}: {v}" for p in PAGES
                    for v in VARIABLE.findall(_text(p)) if v not in known})
    assert not wrong, ("neither an option's variable (CYMONGOOSE_<OPTION>) nor one the "
                       "build or tests read:\n" + "\n".join(wrong))


def _logger_names() -> set[str]:
    found: set[str] = set()
    for path in sorted(SRC.rglob("*.py")) + sorted(SRC.rglob("*.pxi")):
        found.update(re.findall(r"getLogger\(\"(cymongoose\.[\w.]+)\"\)", _text(path)))
    return found


def test_every_module_and_name_mentioned_exists() -> None:
    loggers = _logger_names()
    assert {"cymongoose.error", "cymongoose.access", "cymongoose.mongoose"} <= loggers
    wrong = []
    for page in PAGES:
        for module, attrs in MODULE_REF.findall(_text(page)):
            name = f"cymongoose.{module}"
            if name in loggers:
                continue
            if importlib.util.find_spec(name) is None:
                wrong.append(f"{page.name}: {name}{attrs} (no such module)")
                continue
            obj: object = importlib.import_module(name)
            for attr in filter(None, attrs.split(".")):
                if not hasattr(obj, attr):
                    wrong.append(f"{page.name}: {name}{attrs} (no {attr})")
                    break
                obj = getattr(obj, attr)
    assert not wrong, "\n".join(sorted(set(wrong)))


def _modules() -> list[str]:
    """The package's modules and subpackages, by their name under `cymongoose.`."""
    names = [p.stem for p in SRC.glob("*.py")]
    names += [p.parent.name for p in SRC.glob("*/__init__.py")]
    return sorted(n for n in names if not n.startswith("_"))


def _module_file(name: str) -> Path:
    package = SRC / name / "__init__.py"
    return package if package.exists() else SRC / f"{name}.py"


def _public_modules() -> set[str]:
    """Modules with an __all__ (but the command line's machinery), and any module the docs,
    the README or the examples tell users to import from."""
    public = {m for m in _modules() if m not in INTERNAL
              and re.search(r"^__all__\s*=", _text(_module_file(m)), re.M)}
    told = re.compile(r"\b(?:from|import) cymongoose\.([a-z]\w*)")
    for path in [*PAGES, *sorted((ROOT / "examples").glob("*.py"))]:
        public.update(told.findall(_text(path)))
    return public


def test_every_public_module_is_in_the_api_reference() -> None:
    assert INTERNAL <= set(_modules()), "INTERNAL names a module that is gone"
    rendered = {ref.split(".")[1] for ref in
                re.findall(r"^::: (cymongoose\.\w+)", _text(ROOT / "docs" / "api.md"), re.M)}
    missing = sorted(_public_modules() - rendered)
    assert not missing, (f"public modules missing from docs/api.md: {missing} (render them "
                         "there, or add them to INTERNAL here if users never import them)")
    internal = sorted(rendered & INTERNAL)
    assert not internal, f"docs/api.md renders internal modules: {internal}"


def test_the_readme_layout_lists_every_module() -> None:
    readme = _text(ROOT / "README.md")
    layout = readme[readme.index("## Layout"):readme.index("## License")]
    names = [p.name for p in SRC.iterdir()
             if p.suffix in (".py", ".pyx", ".pxd", ".pyi")]
    names += [f"{p.name}/" for p in SRC.iterdir() if p.is_dir() and p.name != "__pycache__"]
    missing = sorted(n for n in names if not re.search(rf"(?<![\w.]){re.escape(n)}", layout))
    # Inside each layer's folder, every module too, on a line indented under the folder's.
    missing += sorted(f"{p.parent.name}/{p.name}" for p in SRC.glob("*/*.py")
                      if p.name != "__init__.py"
                      and not _listed_under(layout, p.parent.name, p.name))
    assert not missing, f"README.md's Layout does not list: {missing}"


def _listed_under(layout: str, folder: str, name: str) -> bool:
    """Whether `name` stands on a line of the block indented under the line naming
    `folder/`."""
    lines = layout.splitlines()
    for i, line in enumerate(lines):
        if not re.search(rf"(?<![\w.]){re.escape(folder)}/", line):
            continue
        indent = len(line) - len(line.lstrip())
        for below in lines[i + 1:]:
            if below.strip() and len(below) - len(below.lstrip()) <= indent:
                break
            if re.search(rf"(?<![\w.]){re.escape(name)}", below):
                return True
    return False


def test_the_options_table_is_the_settings_table() -> None:
    """docs/deployment.md's options table is config.py's, as `python -m cymongoose.config
    --markdown` writes it: paste its output between the two markers when an option changes."""
    from cymongoose.config import markdown_table

    page = _text(ROOT / "docs" / "deployment.md")
    start = page.index("<!-- options: generated")
    block = page[page.index("\n", start) + 1:page.index("<!-- options: end -->")]
    assert block == markdown_table(), ("docs/deployment.md's options table differs from "
                                       "`python -m cymongoose.config --markdown`")
