"""Move the flat modules of ``app/core`` into its rooms (issue 20 item 1), as a replayable step.

    python scripts/core_rooms.py          # move, rewrite every reference, generate __init__s
    python scripts/core_rooms.py --check  # only say what it would refuse (exit 1) or do

``TABLE`` maps each flat module ``app/core/<name>.py`` to its place ``<room>.<module>``. The
script refuses to run (exit 1, naming them) while a flat module is not in the table, or a
table entry is found at neither place, so a module added on another branch is never left
behind. Then it

1. ``git mv``s every flat module the table maps (a module already moved is left alone);
2. rewrites every reference in the tracked files: Python imports of every form
   (``from app.core.X import``, ``from app.core import X``, ``import app.core.X``),
   ``app.core.X`` anywhere (monkeypatch targets, docstrings, JSON descriptions), the paths
   ``app/core/X.py`` (also in the viewer's sources; and ``core/X`` in Markdown and Python), the
   path segments ``"core" / "X.py"``, the compiled modules of scripts/compile_core.py
   (``MODULES``) and the Makefile's ``CORE_SOURCES``;
3. generates each room's ``__init__.py``: its docstring (``ROOMS``) and the re-export of every
   module's ``__all__`` (a name exported twice in one room, or named like one of the room's
   modules, stops the script: the table or the module must say which one wins);
4. re-wraps the comment and docstring lines the rewrite pushed past 100 columns, sorts the
   imports (ruff's ``I`` rules) and runs ``ruff format``.

Step 2 is idempotent: run again on a moved tree where newly merged files still use the old
names, it rewrites just those. ``from app.core.admission import X`` is the one ambiguous form
(``admission`` was a module and is now a room): X names a module of the room (new form, left
alone) or it does not (old form, rewritten to ``app.core.admission.decision``).
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "app" / "core"
ME = Path(__file__).resolve().relative_to(ROOT).as_posix()
WIDTH = 100  # pyproject.toml [tool.ruff] line-length
LONG_MODULE = 420  # tests/shell/test_sizes.py MODULE_LINES
LONG_INIT = "# long module: generated, one re-exported name a line (scripts/core_rooms.py)"

# Each flat module -> its room and its name there. A room imports only the rooms before it
# (common, runlog, admission, projection, http): tests/shell/test_layers.py checks it.
TABLE: dict[str, str] = {
    # common: values every room uses
    "pointer": "common.pointer",
    "examples": "common.examples",
    # runlog: the run log's records, keys and partitions, the run's state folded from it, and
    # who owns which partition
    "pmap": "runlog.pmap",
    "run_state": "runlog.run_state",
    "run_lifecycle": "runlog.run_lifecycle",
    "run_snapshot": "runlog.run_snapshot",
    "keys": "runlog.keys",
    "ownership": "runlog.ownership",
    "assignment": "runlog.assignment",
    "topic_plan": "runlog.topic_plan",
    # admission: the rule registry, intake, the decision and its steps, host commands, the
    # validator's step, dead letters
    "refusal": "admission.refusal",
    "rules": "admission.rules",
    "admission": "admission.decision",
    "intake": "admission.intake",
    "limits": "admission.limits",
    "payload_rules": "admission.payload_rules",
    "cross_field": "admission.cross_field",
    "children": "admission.children",
    "policy": "admission.policy",
    "redaction": "admission.redaction",
    "identifiers": "admission.identifiers",
    "fold": "admission.fold",
    "host_commands": "admission.host_commands",
    "command_seal": "admission.command_seal",
    "dead_letter": "admission.dead_letter",
    "validator": "admission.validator",
    "validator_batch": "admission.validator_batch",
    "validator_restore": "admission.validator_restore",
    "ops": "admission.ops",
    # projection: materialized surfaces, patches, frame planning, the subscriber
    "surfaces": "projection.surfaces",
    "patch": "projection.patch",
    "frame_reasons": "projection.frame_reasons",
    "frames": "projection.frames",
    "sse_frames": "projection.sse_frames",
    "subscriber": "projection.subscriber",
    "subscriptions": "projection.subscriptions",
    "projector_runs": "projection.projector_runs",
    "projector_batch": "projection.projector_batch",
    # http: OpenWOP HTTP values
    "http_errors": "http.errors",
    "http_admission": "http.admission",
    "http_guard": "http.guard",
    "http_snapshot": "http.snapshot",
    "wire_ids": "http.wire_ids",
    "routes": "http.routes",
    "openapi": "http.openapi",
    "discovery": "http.discovery",
    "principals": "http.principals",
    "stream_modes": "http.stream_modes",
    "run_list": "http.run_list",
    "envelope_accept": "http.envelope_accept",
    "actions": "http.actions",
    "viewer_index": "http.viewer_index",
}

# Each room's docstring (its __init__.py), in the rooms' import order.
ROOMS: dict[str, str] = {
    "common": (
        "Values every room of the core uses: RFC 6901 JSON Pointers, the specifications'"
        " reference payloads.\n\nMay import: the standard library only."
    ),
    "runlog": (
        "The run log: its records typed and parsed (the recorded event), record keys and the"
        " run partitioner, the topics as data, the run's state folded from its log (frozen values over a persistent map), its lifecycle and"
        " its changelog's wire form, and who owns which partition (the group assignment, the"
        " owners' map).\n\nMay import: the standard library, orjson and app/core/common/."
    ),
    "admission": (
        "Admission: the rule registry and refusals as values, intake, the admission decision"
        " and its steps (limits, payload rules, cross-field rules, the children graph, the"
        " fold's guard, SR-1 redaction), host commands and their seal, the validator's step,"
        " batch and restore, dead letters and the operators' pure commands.\n\nMay import:"
        " the standard library, orjson, jsonschema_rs, app/core/common/ and app/core/runlog/."
    ),
    "projection": (
        "Projection: the surfaces materialized from the log, RFC 6902 diff and apply, frame"
        " planning for the subscriber topics and for SSE (one frame-reason vocabulary), the"
        " subscription registry, the projector's batch step and run state, and the pure half"
        " of the subscriber client.\n\nMay import: the standard library, orjson,"
        " app/core/common/, app/core/runlog/ and app/core/admission/."
    ),
    "http": (
        "OpenWOP HTTP values: errors, request guards, the route table and its OpenAPI"
        " document, discovery, principals, admission over HTTP, run snapshots and listings,"
        " stream modes, the envelope accept seam, actions and the viewer's index.\n\nMay"
        " import: the standard library, orjson and every other room of app/core/."
    ),
}

TEXT_SUFFIXES = {".py", ".md", ".toml", ".json", ".yml", ".yaml", ".txt", ".cfg", ".ini", ".sh"}
TEXT_SUFFIXES |= {".js", ".mjs", ".css", ".html"}  # the viewer's sources cite core modules
TEXT_NAMES = {"Makefile", "Dockerfile", ".gitignore", ".dockerignore"}
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def room_of(place: str) -> str:
    """The room of a place ``room.module``."""
    return place.split(".")[0]


def modules_of(room: str) -> set[str]:
    """The module names of a room: from the table, and any module already in its folder."""
    names = {p.split(".")[1] for p in TABLE.values() if room_of(p) == room}
    folder = CORE / room
    if folder.is_dir():
        names |= {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    return names


def _new_path(place: str) -> Path:
    room, module = place.split(".")
    return CORE / room / f"{module}.py"


# --- 0. refuse what the table does not say ---------------------------------------------------


def problems() -> list[str]:
    """Why the script must not run here (empty: it may)."""
    found = []
    flat = sorted(p.stem for p in CORE.glob("*.py") if p.stem != "__init__")
    unmapped = [name for name in flat if name not in TABLE]
    if unmapped:
        found.append(
            "flat modules of app/core that TABLE does not map (add each to a room): "
            + ", ".join(unmapped)
        )
    for name, place in TABLE.items():
        old, new = CORE / f"{name}.py", _new_path(place)
        if old.exists() and new.exists():
            found.append(f"both app/core/{name}.py and {new.relative_to(ROOT)} exist")
        elif not old.exists() and not new.exists():
            found.append(f"TABLE maps {name} but neither app/core/{name}.py nor its place exists")
    for room in ROOMS:
        if (CORE / f"{room}.py").exists() and room not in TABLE:
            found.append(f"app/core/{room}.py would be shadowed by the room {room}/")
    for name in flat:
        tree = ast.parse((CORE / f"{name}.py").read_text(encoding="utf-8"))
        if any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(tree)):
            found.append(f"app/core/{name}.py has a relative import: make it absolute first")
    rooms = {room_of(p) for p in TABLE.values()}
    if rooms != set(ROOMS):
        found.append(f"rooms without a docstring in ROOMS, or unused: {sorted(rooms ^ set(ROOMS))}")
    return found


# --- 1. move ---------------------------------------------------------------------------------


def move() -> None:
    """``git mv`` each flat module the table maps to its place."""
    for name, place in TABLE.items():
        old, new = CORE / f"{name}.py", _new_path(place)
        if old.exists():
            new.parent.mkdir(exist_ok=True)
            subprocess.run(["git", "mv", str(old), str(new)], cwd=ROOT, check=True)


# --- 2. rewrite ------------------------------------------------------------------------------

_FROM_CORE = re.compile(
    r"^(?P<indent>[ \t]*)from app\.core import "
    r"(?P<names>\([^)]*\)|[^\n#]+?)(?P<tail>[ \t]*(#[^\n]*)?)$",
    re.M,
)
_FROM_ADMISSION = re.compile(
    r"^(?P<head>[ \t]*from )app\.core\.admission(?P<rest> import (?P<names>\([^)]*\)|[^\n#]+))",
    re.M,
)
_DOTTED = re.compile(rf"(?<![\w.])app\.core\.(?P<name>{_IDENT})(?P<after>\.{_IDENT})?")
_PATH = re.compile(rf"(?<![\w/])app/core/(?P<name>{_IDENT})\.py\b")
_SHORT = re.compile(rf"(?<![\w/.-])core/(?P<name>{_IDENT})(?![\w/-])(?!\.(?:js|ts|mjs|css|json)\b)")
_SEGMENT = re.compile(rf'"core"(?P<sep>\s*/\s*)"(?P<name>{_IDENT})\.py"')
_MODULES = re.compile(r"^MODULES = \((?P<body>[^)]*)\)", re.M)
_MAKE_SOURCES = re.compile(r"^CORE_SOURCES := \$\(addprefix app/core/,(?P<body>[^)]*)\)", re.M)


def _names(text: str) -> list[tuple[str, str | None]]:
    """The ``name [as alias]`` items of an import list (parentheses and newlines allowed)."""
    items = []
    for part in text.strip().strip("()").split(","):
        words = part.split()
        if not words:
            continue
        items.append((words[0], words[2] if len(words) == 3 and words[1] == "as" else None))
    return items


def _from_core(match: re.Match[str]) -> str:
    """``from app.core import X, Y``: one ``from app.core.<room> import`` per room."""
    indent, items = match["indent"], _names(match["names"])
    if all(name not in TABLE for name, _ in items):
        return match[0]  # rooms imported as such (new form)
    if any(name not in TABLE for name, _ in items):
        raise SystemExit(f"core_rooms: a mixed import, rewrite it by hand: {match[0].strip()}")
    by_room: dict[str, list[str]] = {}
    for name, alias in items:
        room, module = TABLE[name].split(".")
        bound = alias or name
        by_room.setdefault(room, []).append(module if bound == module else f"{module} as {bound}")
    lines = [
        f"{indent}from app.core.{room} import {', '.join(sorted(names))}"
        for room, names in by_room.items()
    ]
    lines[0] += match["tail"]
    return "\n".join(lines)


def _from_admission(match: re.Match[str]) -> str:
    """``from app.core.admission import X``: X a module of the room (new), or not (old)."""
    names = [name for name, _ in _names(match["names"])]
    room = modules_of("admission")
    if all(name in room for name in names):
        return match[0]
    if any(name in room for name in names):
        raise SystemExit(f"core_rooms: a mixed import, rewrite it by hand: {match[0].strip()}")
    return f"{match['head']}app.core.{TABLE['admission']}{match['rest']}"


def _dotted(match: re.Match[str]) -> str:
    name, after = match["name"], match["after"] or ""
    if name not in TABLE:
        return match[0]
    if name in ROOMS:  # a room now: ``app.core.admission.<module>`` is already the new form
        if after and after[1:] in modules_of(name):
            return match[0]
        if match.string.startswith(" import", match.end()):
            return match[0]  # a ``from ... import``: _from_admission decided it
    return f"app.core.{TABLE[name]}{after}"


def _path(match: re.Match[str]) -> str:
    name = match["name"]
    return f"app/core/{TABLE[name].replace('.', '/')}.py" if name in TABLE else match[0]


def _short(match: re.Match[str]) -> str:
    name = match["name"]
    if name not in TABLE or (name in ROOMS and match.string.startswith("/", match.end())):
        return match[0]
    return f"core/{TABLE[name].replace('.', '/')}"


def _segment(match: re.Match[str]) -> str:
    name, sep = match["name"], match["sep"]
    if name not in TABLE:
        return match[0]
    room, module = TABLE[name].split(".")
    return f'"core"{sep}"{room}"{sep}"{module}.py"'


def _modules(match: re.Match[str]) -> str:
    def one(m: re.Match[str]) -> str:
        return f'"{TABLE[m[1]]}"' if m[1] in TABLE else m[0]

    return "MODULES = (" + re.sub(r'"([\w.]+)"', one, match["body"]) + ")"


def _make_sources(match: re.Match[str]) -> str:
    """The Makefile's list of compiled sources, one word per module, re-wrapped."""
    words = [w for w in match["body"].replace("\\", " ").split()]
    words = [TABLE[w[:-3]].replace(".", "/") + ".py" if w[:-3] in TABLE else w for w in words]
    lines, line = [], "CORE_SOURCES := $(addprefix app/core/,"
    for word in words:
        if len(line) + 1 + len(word) > WIDTH - 2:
            lines.append(line + " \\")
            line = "\t" + word
        else:
            line += ("" if line.endswith(",") else " ") + word
    return "\n".join([*lines, line + ")"])


def rewrite(text: str, path: str) -> str:
    """Every reference to a flat module in ``text`` (of the file ``path``), rewritten."""
    if path.endswith(".py") or path.endswith(".md"):
        text = _FROM_CORE.sub(_from_core, text)
        text = _FROM_ADMISSION.sub(_from_admission, text)
    text = _DOTTED.sub(_dotted, text)
    text = _PATH.sub(_path, text)
    if path.endswith((".md", ".py")):
        text = _SHORT.sub(_short, text)
    if path.endswith(".py"):
        text = _SEGMENT.sub(_segment, text)
    if path == "scripts/compile_core.py":
        text = _MODULES.sub(_modules, text)
    if path == "Makefile":
        text = _MAKE_SOURCES.sub(_make_sources, text)
    return text


def tracked() -> list[str]:
    """The tracked text files the rewrite reads (not this script, not the generated files)."""
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    generated = {f"app/core/{room}/__init__.py" for room in ROOMS}
    return [
        p
        for p in listed
        if (Path(p).suffix in TEXT_SUFFIXES or Path(p).name in TEXT_NAMES)
        and p != ME
        and p not in generated
        and (ROOT / p).is_file()
    ]


def rewrite_all(before: dict[str, str]) -> list[str]:
    """Rewrite every tracked text file; ``before`` gets the text of each one changed."""
    changed = []
    for path in tracked():
        file = ROOT / path
        text = file.read_text(encoding="utf-8")
        new = rewrite(text, path)
        if new != text:
            before[path] = text
            file.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


# --- 3. the rooms' __init__.py ---------------------------------------------------------------


# Names a room does not re-export, each with the reason: a name two modules of the room define
# (each keeps its own, imported from its module), or a module's name (as an attribute of the
# package it would hide the module: ``import app.core.admission.dead_letter as m`` would bind
# the function). Any other such clash stops the script.
UNEXPORTED: dict[str, str] = {
    "admission.source_of": "validator_batch (a record's source headers) and ops (a letter's)",
    "admission.dead_letter": "the module dead_letter's function of that name",
    "admission.identifiers": "the module identifiers' function of that name",
    "projection.answer_resync": "frames (one subscriber's frame) and projector_runs (a run's)",
    "http.snapshot": "the module snapshot's function of that name",
}


def exports(path: Path) -> tuple[list[str], set[str]]:
    """A module's ``__all__``, and those of its names it imports (another module's names,
    which the room takes from the module that defines them)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            names = list(ast.literal_eval(value))
            return names, imported & set(names)
    raise SystemExit(f"core_rooms: {path.relative_to(ROOT)} has no __all__")


def init_text(room: str) -> str:
    """The generated ``__init__.py`` of a room: docstring and the re-exports."""
    folder = CORE / room
    modules = sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")
    defined: dict[str, list[str]] = {}
    for module in modules:
        names, imported = exports(folder / f"{module}.py")
        for name in names:
            if name not in imported:
                defined.setdefault(name, []).append(module)
    left_out = []
    for name, owners in sorted(defined.items()):
        if len(owners) == 1 and name not in modules:
            continue
        if f"{room}.{name}" not in UNEXPORTED:
            why = f"defined by {' and '.join(owners)}" if len(owners) > 1 else "a module's name"
            raise SystemExit(
                f"core_rooms: {room}/: {name} ({why}): say in UNEXPORTED whether the room"
                " re-exports it, or rename it"
            )
        left_out.append(name)
    by_module: dict[str, list[str]] = {}
    for name, owners in defined.items():
        if name not in left_out:
            by_module.setdefault(owners[0], []).append(name)
    lines = [
        f"from app.core.{room}.{module} import {', '.join(sorted(by_module[module]))}"
        for module in modules
        if module in by_module
    ]
    note = ""
    if left_out:
        note = (
            " Not re-exported (import them from their module): "
            + "; ".join(f"{n}: {UNEXPORTED[f'{room}.{n}']}" for n in left_out)
            + "."
        )
    paragraphs = [
        *ROOMS[room].split("\n\n"),
        f"Modules: {', '.join(modules)}. Generated by scripts/core_rooms.py: the room re-exports"
        f" each module's ``__all__``.{note}",
    ]
    paragraphs[0] = '"""' + paragraphs[0]
    text = "\n\n".join("\n".join(_fill("", "", p)) for p in paragraphs) + '\n"""\n\n'
    names = sorted(n for ns in by_module.values() for n in ns)
    all_names = "".join(f'    "{n}",\n' for n in names)
    return text + "\n".join(lines) + f"\n\n__all__ = [\n{all_names}]\n"


def write_inits() -> list[str]:
    """Write (and stage) each room's ``__init__.py``."""
    written = []
    for room in ROOMS:
        path = CORE / room / "__init__.py"
        path.write_text(init_text(room), encoding="utf-8")
        subprocess.run(["git", "add", str(path)], cwd=ROOT, check=True)
        written.append(path.relative_to(ROOT).as_posix())
    return written


# --- 4. wrap, sort, format -------------------------------------------------------------------


def _prose_columns(source: str) -> dict[int, tuple[str, int]]:
    """Line -> (kind, first column of prose) for comment lines and the lines of docstrings
    (where a line break changes no code; a string that holds code is neither)."""
    found: dict[int, tuple[str, int]] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            found[tok.start[0]] = ("comment", tok.start[1])
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        kinds = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
        if not isinstance(node, kinds) or not body:
            continue
        first = body[0]
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            for row in range(first.lineno, (first.end_lineno or first.lineno) + 1):
                column = first.col_offset + 4 if row == first.lineno else 0
                found[row] = ("string", column)
    return found


_RULE = re.compile(r"^(?P<head>\s*# .*?) (?P<dashes>-{3,})$")  # a section rule: ``# --- x ----``
_ITEM = re.compile(r"^(- |\* |\d+\. |[A-Za-z_]+:$)")  # a list item begins its own line


def _split(line: str, kind: str, start: int) -> tuple[str, str, str]:
    """(indent, marker, text) of a prose line: ``marker`` is ``# `` for a comment."""
    indent = line[: len(line) - len(line.lstrip())]
    if kind == "comment" and line.lstrip().startswith("#"):
        return indent, "# ", line.lstrip()[1:].lstrip()
    if start > len(indent):  # the first line of a docstring: keep the opening quotes
        return line[:start], "", line[start:]
    return indent, "", line.lstrip()


def _fill(indent: str, marker: str, text: str) -> list[str]:
    """``text`` as lines of at most WIDTH (a word longer than that keeps its own line), the
    last two balanced when the last would be a stub of a few characters."""
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(indent) + len(marker) + len(line) + 1 + len(word) > WIDTH:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    if len(lines) > 1 and len(lines[-1]) < 20:
        both = f"{lines[-2]} {lines[-1]}"
        middle = len(both) // 2
        cut = min((i for i, c in enumerate(both) if c == " "), key=lambda i: abs(i - middle))
        lines[-2:] = [both[:cut], both[cut + 1 :]]
    return [f"{indent}{marker}{line}" for line in lines]


def wrap(source: str, before: str) -> str:
    """Re-wrap the comment and docstring lines the rewrite made longer than WIDTH: the words
    past the limit move to the start of the paragraph's next line (a new line where the
    paragraph ends); a section rule ``# --- x ---`` loses dashes instead. Lines that were
    already there are left as they were."""
    prose = _prose_columns(source)
    kept = set(before.split("\n"))
    lines = source.split("\n")
    out: list[str] = []
    carry = ""  # words moved down from the line before
    carried: tuple[str, str] = ("", "")  # that line's (indent, marker)
    for number, line in enumerate(lines, start=1):
        kind, start = prose.get(number, ("", 0))
        is_comment_line = kind == "comment" and line.lstrip().startswith("#")
        if carry:
            indent, marker, text = _split(line, kind, start) if kind else ("", "", "")
            if (
                kind
                and (kind != "comment" or is_comment_line)
                and (indent, marker) == carried
                and text.strip()
                and not text.startswith('"""')
                and not _ITEM.match(text)
            ):
                line, start = f"{indent}{marker}{carry} {text}", 0
            else:
                # the paragraph ends: its last words, balanced with the line above
                last = out.pop()[len(carried[0]) + len(carried[1]) :]
                out += _fill(*carried, f"{last} {carry}")
            carry = ""
        elif not kind or line in kept:
            out.append(line)
            continue
        rule = _RULE.match(line) if kind == "comment" else None
        if rule and len(line) > WIDTH:
            keep = max(3, WIDTH - len(rule["head"]) - 1)
            line = f"{rule['head']} {'-' * keep}"
        if len(line) > WIDTH and (kind != "comment" or is_comment_line):
            indent, marker, text = _split(line, kind, start)
            head = len(indent) + len(marker)
            cut = line.rfind(" ", head + 1, WIDTH + 1)
            if cut > head:
                # the paragraph's next lines start at the line's own indentation
                carry = line[cut + 1 :]
                carried = (line[: len(line) - len(line.lstrip())], marker)
                line = line[:cut].rstrip()
        out.append(line)
    if carry:
        last = out.pop()[len(carried[0]) + len(carried[1]) :]
        out += _fill(*carried, f"{last} {carry}")
    return "\n".join(out)


def _size_findings(path: str, text: str) -> set[str]:
    """tests/shell/test_sizes.py's findings for ``text`` as ``path``, without line numbers."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    try:
        from tests.shell.test_sizes import long_functions, long_modules
    except ImportError:  # no size rule on this branch
        return set()
    found = long_modules(ROOT / path, text.splitlines()) + long_functions(ROOT / path, text)
    return {re.sub(r":\d+ |: \d+ lines", " ", f) for f in found}


def grown(changed: list[str], before: dict[str, str]) -> list[str]:
    """The size findings the rewrite itself added (a wrapped comment can push a function past
    the size rule's limit): the lead rewords those lines by hand."""
    found = []
    for path in changed:
        if path.startswith("app/") and path.endswith(".py") and path in before:
            text = (ROOT / path).read_text(encoding="utf-8")
            found += sorted(_size_findings(path, text) - _size_findings(path, before[path]))
    return found


def finish(changed: list[str], before: dict[str, str]) -> None:
    """Wrap the prose lines the rewrite made too long, sort the imports, format."""
    python = [p for p in changed if p.endswith(".py")]
    for path in python:
        file = ROOT / path
        text = file.read_text(encoding="utf-8")
        wrapped = wrap(text, before.get(path, ""))
        if wrapped != text:
            file.write_text(wrapped, encoding="utf-8")
    ruff = [str(Path(sys.executable).parent / "ruff")]
    in_scope = [p for p in python if p.startswith(("app/", "tests/"))]
    if in_scope:
        subprocess.run([*ruff, "check", "--select", "I", "--fix", "-q", *in_scope], cwd=ROOT)
        subprocess.run([*ruff, "format", "-q", *in_scope], cwd=ROOT, check=True)
    long = subprocess.run(
        [*ruff, "check", "--select", "E501", "-q", *in_scope], cwd=ROOT, capture_output=True
    )
    if long.returncode:
        print("core_rooms: lines still over the limit (fix by hand):", file=sys.stderr)
        print(long.stdout.decode(), file=sys.stderr)
    for room in ROOMS:  # a room of many names is long: say why (tests/shell/test_sizes.py)
        init = CORE / room / "__init__.py"
        text = init.read_text(encoding="utf-8")
        if text.count("\n") > LONG_MODULE and LONG_INIT not in text:
            close = text.index('"""', 3) + 3
            init.write_text(f"{text[:close]}\n\n{LONG_INIT}{text[close:]}", encoding="utf-8")
    for finding in grown(changed, before):
        print(f"core_rooms: longer after the rewrite (fix by hand): {finding}", file=sys.stderr)


def main(argv: list[str]) -> int:
    """Refuse, or move, rewrite, generate and format."""
    found = problems()
    if found:
        print("core_rooms: refusing to run:\n  " + "\n  ".join(found), file=sys.stderr)
        return 1
    if argv[1:] == ["--check"]:
        print("core_rooms: the table covers every module of app/core")
        return 0
    if argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    move()
    before: dict[str, str] = {}
    changed = rewrite_all(before)
    changed += write_inits()
    finish(changed, before)
    subprocess.run(["git", "add", "-u"], cwd=ROOT, check=True)
    print(f"core_rooms: {len(TABLE)} modules in {len(ROOMS)} rooms; {len(changed)} files written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
