"""RFC 6902 JSON Patch, applied STRICTLY: ``apply_patch`` and the ``PatchError`` it raises
(RFC 6902 §4/§5: the first operation that cannot apply fails the whole patch).

The applier copies on write (only the containers along the paths it touches), so its input
document and the patch stay intact. It raises ``PatchError`` (a ``ValueError``) for every
invalid patch: a pure function over untrusted input that signals "this frame is unusable"; the
subscriber turns it into a ``ResyncNeeded`` value (STYLE rule 3: the exception never crosses
the core's API as a crash). The diff (``app.core.projection.patch``) verifies every patch with
it before the patch is sent.

May import: the standard library and app.core.common.pointer (pure).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from app.core.common.pointer import PointerError, parse

__all__ = [
    "PatchError",
    "parse_pointer",
    "apply_patch",
]

_OPS = frozenset({"add", "remove", "replace", "move", "copy"})
_CONTAINERS = (dict, list)
_MISSING: Any = object()


class PatchError(ValueError):
    """The patch cannot be applied to this document (RFC 6902 §5: the whole patch fails).
    ``index`` is the failing operation (``None`` when the patch itself is malformed)."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message if index is None else f"op {index}: {message}")
        self.index = index


# --- RFC 6901 pointers (app.core.common.pointer) --------------------------------------------------


def parse_pointer(path: Any) -> list[str]:
    """``app.core.common.pointer.parse``, refusing as the applier does: a ``PatchError`` with the
    same message (RFC 6902 §5: a malformed pointer makes the whole patch fail)."""
    try:
        return parse(path)
    except PointerError as exc:
        raise PatchError(str(exc)) from None


def _index(token: str, length: int, *, allow_end: bool, path: str) -> int:
    """An array index token (RFC 6901 §4: ``0`` or digits without a leading zero; ``-`` is the
    position after the last element, legal only where RFC 6902 §4.1 ``add`` allows it)."""
    if token == "-":
        if allow_end:
            return length
        raise PatchError(f"path {path!r}: '-' names no existing element")
    if not token.isdigit() or not token.isascii() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f"path {path!r}: {token!r} is not an array index")
    index = int(token)
    limit = length if allow_end else length - 1
    if index > limit:
        raise PatchError(f"path {path!r}: index {index} is out of range (length {length})")
    return index


# --- apply --------------------------------------------------------------------------------------


class _Applier:
    """Copy-on-write application: a container is copied (shallowly) the first time an op
    writes into it; ``owned`` holds the copies (kept alive, so their ids stay unique)."""

    __slots__ = ("root", "_owned", "_keep")

    def __init__(self, root: Any) -> None:
        self.root = root
        self._owned: set[int] = set()
        self._keep: list[Any] = []

    def _copy(self, container: Any) -> Any:
        copy = container.copy()
        self._owned.add(id(copy))
        self._keep.append(copy)
        return copy

    def _parent(self, tokens: list[str], path: str) -> Any:
        """The (writable) container holding the last token's target."""
        node, owned = self.root, self._owned
        if not isinstance(node, _CONTAINERS):
            raise PatchError(f"path {path!r}: the document is not a container")
        if id(node) not in owned:
            node = self.root = self._copy(node)
        for token in tokens[:-1]:
            if isinstance(node, dict):
                child = node.get(token, _MISSING)
                if child is _MISSING:
                    raise PatchError(f"path {path!r}: no member {token!r}")
                key: Any = token
            elif isinstance(node, list):
                key = _index(token, len(node), allow_end=False, path=path)
                child = node[key]
            else:
                raise PatchError(f"path {path!r}: {token!r} is inside a scalar")
            if not isinstance(child, _CONTAINERS):
                raise PatchError(f"path {path!r}: {token!r} is a scalar, not a container")
            if id(child) not in owned:  # copy on the first write below it
                child = node[key] = self._copy(child)
            node = child
        return node

    def get(self, tokens: list[str], path: str) -> Any:
        node = self.root
        for token in tokens:
            if isinstance(node, dict):
                node = node.get(token, _MISSING)
                if node is _MISSING:
                    raise PatchError(f"path {path!r}: no member {token!r}")
            elif isinstance(node, list):
                node = node[_index(token, len(node), allow_end=False, path=path)]
            else:
                raise PatchError(f"path {path!r}: {token!r} is inside a scalar")
        return node

    def add(self, tokens: list[str], value: Any, path: str) -> None:
        if not tokens:  # RFC 6902 §4.1: add at the root replaces the whole document
            self.root = value
            return
        parent = self._parent(tokens, path)
        last = tokens[-1]
        if isinstance(parent, dict):
            parent[last] = value  # an existing member is replaced (§4.1)
        elif isinstance(parent, list):
            parent.insert(_index(last, len(parent), allow_end=True, path=path), value)
        else:
            raise PatchError(f"path {path!r}: the parent is a scalar")

    def remove(self, tokens: list[str], path: str) -> Any:
        if not tokens:
            raise PatchError("remove of the whole document is not supported")
        parent = self._parent(tokens, path)
        last = tokens[-1]
        if isinstance(parent, dict):
            if last not in parent:  # §4.2: the target location MUST exist
                raise PatchError(f"path {path!r}: no member {last!r} to remove")
            return parent.pop(last)
        return parent.pop(_index(last, len(parent), allow_end=False, path=path))

    def replace(self, tokens: list[str], value: Any, path: str) -> None:
        if not tokens:
            self.root = value
            return
        parent = self._parent(tokens, path)
        last = tokens[-1]
        if isinstance(parent, dict):
            if last not in parent:  # §4.3: the target location MUST exist
                raise PatchError(f"path {path!r}: no member {last!r} to replace")
            parent[last] = value
        else:
            parent[_index(last, len(parent), allow_end=False, path=path)] = value


def _ops(patch: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    if not isinstance(patch, list):
        raise PatchError(f"a patch is an array of operations, not {type(patch).__name__}")
    for index, op in enumerate(patch):
        if not isinstance(op, dict):
            raise PatchError("an operation is an object", index)
        yield index, op


def apply_patch(doc: Any, patch: Any) -> Any:  # noqa: C901 - RFC 6902 §4's ops in one dispatch, one branch per op
    """Apply an RFC 6902 patch STRICTLY and return the new document; ``doc`` and ``patch`` are
    never mutated. Raises ``PatchError`` on the first operation that cannot apply (§5: then
    nothing applies): an unknown op or ``test`` (excluded from transport frames by RFC 0114),
    a missing ``value``/``from``, a malformed pointer, a missing target for remove/replace/move/
    copy, an add whose parent is missing or whose index is past the end, a move into its own
    child (§4.4)."""
    state = _Applier(doc)
    for index, op in _ops(patch):
        name = op.get("op")
        if name not in _OPS:
            raise PatchError(f"op {name!r} is not add/remove/replace/move/copy", index)
        path = op.get("path", _MISSING)
        if path is _MISSING:
            raise PatchError("an operation needs a path", index)
        try:
            tokens = parse_pointer(path)
            if name in ("add", "replace"):
                value = op.get("value", _MISSING)
                if value is _MISSING:
                    raise PatchError(f"{name} needs a value")
                (state.add if name == "add" else state.replace)(tokens, value, path)
            elif name == "remove":
                state.remove(tokens, path)
            else:
                source = op.get("from", _MISSING)
                if source is _MISSING:
                    raise PatchError(f"{name} needs a from")
                source_tokens = parse_pointer(source)
                if name == "move":
                    if source_tokens == tokens:  # §4.4: the from location MUST still exist
                        state.get(source_tokens, source)
                        continue
                    if tokens[: len(source_tokens)] == source_tokens:
                        raise PatchError(f"move from {source!r} into its own child {path!r}")
                    state.add(tokens, state.remove(source_tokens, source), path)
                else:
                    state.add(tokens, state.get(source_tokens, source), path)
        except PatchError as exc:
            if exc.index is not None:
                raise
            raise PatchError(str(exc), index) from None
    return state.root
