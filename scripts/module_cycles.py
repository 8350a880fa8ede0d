#!/usr/bin/env python3
"""Lists import cycles among a crate's source files and among its top-level modules.

Usage: scripts/module_cycles.py [SRC_DIR ...]   (default: engine/src)

An edge A -> B means a `crate::` or `super::` path written in A (in a `use` or inline,
comments excluded) names the module file B or an item in it. A parent's `mod child;`
is containment, not an edge, and unit tests (`#[cfg(test)] mod tests`) are left
out. Exits 1 when a top-level cycle exists (two top-level
modules, like `store` and `read`, that import each other, directly or through others);
file-level cycles inside one top-level module (a child naming its parent's items via
`super::`) are listed for information.
"""

import re
import sys
from pathlib import Path

PATH = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+|::\{)")


def module_of(src: Path, f: Path) -> tuple:
    rel = f.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib"):
        parts.pop()
    return tuple(parts)


def strip_comments(text: str) -> str:
    # A file's unit tests (a trailing `#[cfg(test)] mod tests`) may use the whole
    # crate, as its users do; they are not part of the module's dependencies.
    text = re.split(r"#\[cfg\(test\)\]\s*mod\s+tests\b", text)[0]
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def use_paths(text: str):
    """Yields each path as a tuple of segments, expanding `use a::{b, c::d}` groups."""
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        yield from expand(re.sub(r"\s+", "", m.group(1)))
    for m in PATH.finditer(re.sub(r"\buse\s+[^;]+;", "", text)):
        if m.group(2) != "::{":
            yield tuple([m.group(1)] + m.group(2).split("::")[1:])


def expand(s: str):
    brace = s.find("{")
    if brace < 0:
        yield tuple(p for p in s.split(" as ")[0].split("::") if p)
        return
    prefix = [p for p in s[:brace].split("::") if p]
    inner = s[brace + 1 : s.rfind("}")]
    depth, start = 0, 0
    for i, c in enumerate(inner + ","):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            part = inner[start:i]
            start = i + 1
            if part:
                for sub in expand(part):
                    yield tuple(prefix) + sub


def root_exports(src: Path, modules: set) -> dict:
    """Item name -> the module the crate root re-exports it from (`pub use m::{X}`)."""
    lib = src / "lib.rs"
    out = {}
    if lib.exists():
        text = strip_comments(lib.read_text())
        for m in re.finditer(r"\bpub\s+use\s+([^;]+);", text):
            for p in expand(re.sub(r"\s+", "", m.group(1))):
                p = tuple(x for x in p if x != "crate")
                for n in range(len(p) - 1, 0, -1):
                    if p[:n] in modules:
                        out[p[-1]] = p[:n]
                        break
    return out


def resolve(path, here: tuple, modules: set, exports: dict):
    if not path or path[0] not in ("crate", "super"):
        return None
    if path[0] == "crate":
        base, rest = (), list(path[1:])
    else:
        base, rest = here, list(path)
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    if base == () and rest and rest[0] in exports:
        return exports[rest[0]]
    best = None
    cur = base
    if cur in modules:
        best = cur
    for seg in rest:
        if seg == "self":
            continue
        cur = cur + (seg,)
        if cur in modules:
            best = cur
        else:
            break
    return best


def cycles(graph: dict):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def name(m: tuple) -> str:
    return "::".join(m) or "lib"


def check(src: Path) -> bool:
    files = {module_of(src, f): f for f in src.rglob("*.rs")}
    modules = set(files)
    exports = root_exports(src, modules)
    graph, top = {}, {}
    for here, f in files.items():
        text = strip_comments(f.read_text())
        edges = set()
        for p in use_paths(text):
            target = resolve(p, here, modules, exports)
            if target is not None and target != here and target != ():
                edges.add(target)
        graph[here] = edges
        if here:
            t = top.setdefault(here[0], set())
            t.update(e[0] for e in edges if e and e[0] != here[0])
    ok = True
    for comp in cycles(top):
        ok = False
        print(f"{src}: top-level modules import each other: {', '.join(comp)}")
    for comp in cycles(graph):
        tops = {c[0] for c in comp if c}
        kind = "inside one module" if len(tops) == 1 else "across modules"
        print(f"{src}: file cycle ({kind}): {', '.join(name(c) for c in comp)}")
    if ok:
        print(f"{src}: no import cycles between top-level modules")
    return ok


def main() -> int:
    dirs = [Path(a) for a in sys.argv[1:]] or [Path("engine/src")]
    return 0 if all([check(d) for d in dirs]) else 1


if __name__ == "__main__":
    sys.exit(main())
