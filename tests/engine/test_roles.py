"""The turn modules' role protocols (engine/turn/context.py) hold exactly what their consumers use,
and the call loop of turns (a turn ended → its slot freed → the next queued wake launched) runs in
the residency alone.

Read from the source (``ast``): every function whose parameter ``rt`` is annotated with a role
uses the members it reads (``rt.x``, and ``rt.deps.x`` of the outside world) and the members of
the roles of the functions it passes ``rt`` to. A role's members must be exactly the union of
what its functions use: a member no function of the role uses is a dependency the module does
not have."""

from __future__ import annotations

import ast
import typing
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from toolnexus_daemon.engine.turn import context
from toolnexus_daemon.engine.verbs import residency

ENGINE = Path(context.__file__).resolve().parents[1]
ROOT = ENGINE.parents[1]
PACKAGE = "toolnexus_daemon.engine"
# the consumers of the roles: every module with a function over ``rt``
CONSUMERS = [*sorted((ENGINE / "turn").glob("*.py")), ENGINE / "verbs" / "resume.py",
             ENGINE / "verbs" / "event_stream.py"]
ROLES = {name: obj for name, obj in vars(context).items()
         if isinstance(obj, type) and getattr(obj, "_is_protocol", False)
         and obj.__module__ == context.__name__ and name != "ActGuard" and not name.endswith("Deps")}


def _attrs(protocol: type) -> set[str]:
    return set(typing._get_protocol_attrs(protocol))  # type: ignore[attr-defined]


def members(role: type) -> set[str]:
    """The role's members, its ``deps`` spelled out as the parts of the outside world it names."""
    out = _attrs(role)
    if "deps" in out:
        deps = typing.get_type_hints(role.deps.fget)["return"]  # type: ignore[attr-defined]
        out = (out - {"deps"}) | {f"deps.{name}" for name in _attrs(deps)}
    return out


@dataclass
class Fn:
    module: str
    name: str
    role: str
    reads: set[str] = field(default_factory=set)
    # the functions ``rt`` is passed to: (module the name is looked up in, name)
    passes: set[tuple[str, str]] = field(default_factory=set)


def _module_name(path: Path) -> str:
    return f"{PACKAGE}.{path.parent.name}.{path.stem}"


def _imports(tree: ast.Module, module: str) -> dict[str, str]:
    """Local name → the module (for ``from . import x``) or ``module:function`` it stands for."""
    pkg = module.rsplit(".", 1)[0]
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = pkg.rsplit(".", node.level - 1)[0] if node.level > 1 else pkg
            source = f"{base}.{node.module}" if node.module else base
            for alias in node.names:
                dotted = f"{source}.{alias.name}"
                is_module = (ROOT / (dotted.replace(".", "/") + ".py")).exists()
                out[alias.asname or alias.name] = dotted if is_module else f"{source}:{alias.name}"
    return out


def _functions() -> dict[tuple[str, str], Fn]:
    found: dict[tuple[str, str], Fn] = {}
    for path in CONSUMERS:
        module = _module_name(path)
        tree = ast.parse(path.read_text())
        names = _imports(tree, module)
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            arg = next((a for a in node.args.args if a.arg == "rt"), None)
            if arg is None or not isinstance(arg.annotation, ast.Name | ast.Constant):
                continue
            role = arg.annotation.id if isinstance(arg.annotation, ast.Name) else str(arg.annotation.value)
            fn = found[(module, node.name)] = Fn(module, node.name, role)
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute) and _is_rt(sub.value) and sub.attr != "deps":
                    fn.reads.add(sub.attr)
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Attribute) \
                        and _is_rt(sub.value.value) and sub.value.attr == "deps":
                    fn.reads.add(f"deps.{sub.attr}")
                if isinstance(sub, ast.Call) and any(_is_rt(a) for a in sub.args):
                    fn.passes.add(_callee(sub.func, module, names))
    return found


def _is_rt(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "rt"


def _callee(func: ast.expr, module: str, names: dict[str, str]) -> tuple[str, str]:
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        if func.value.id not in names:  # a method of the role (already counted as read), or
            return ("", "")  # outside the engine (``asyncio.to_thread``: its target names a role)
        return (names[func.value.id], func.attr)
    assert isinstance(func, ast.Name), ast.dump(func)
    imported = names.get(func.id)
    if imported is not None and ":" in imported:
        source, name = imported.split(":")
        return (source, name)
    return (module, func.id)


def _needs(functions: dict[tuple[str, str], Fn]) -> dict[tuple[str, str], set[str]]:
    """What each function needs of ``rt``: what it reads, what the functions it passes ``rt`` to
    of its own role need (followed to a fixed point, so a role is not its own evidence), and the
    members of the other roles it passes ``rt`` to (a value of its role must satisfy them)."""
    needs = {key: set(fn.reads) for key, fn in functions.items()}
    changed = True
    while changed:
        changed = False
        for key, fn in functions.items():
            for callee_key in fn.passes - {("", "")}:
                callee = functions.get(callee_key)
                assert callee is not None, f"{fn.module}.{fn.name} passes rt to {callee_key}: no role"
                more = needs[callee_key] if callee.role == fn.role else members(ROLES[callee.role])
                if not more <= needs[key]:
                    needs[key] |= more
                    changed = True
    return needs


def test_every_function_over_rt_names_a_role() -> None:
    functions = _functions()
    assert len(functions) > 50, "the source was not read"
    unknown = sorted(f"{f.module}.{f.name}: {f.role}" for f in functions.values() if f.role not in ROLES)
    assert not unknown, unknown


@pytest.mark.parametrize("role", sorted(ROLES))
def test_a_role_holds_what_its_functions_use_and_nothing_more(role: str) -> None:
    """In every module written against ``role``, its functions together use all of its members."""
    functions = _functions()
    needs = _needs(functions)
    used: dict[str, set[str]] = {}
    for key, fn in functions.items():
        if fn.role == role:
            used.setdefault(fn.module, set()).update(needs[key])
    assert used, f"no function is written against {role}"
    for module, there in used.items():
        declared = members(ROLES[role])
        assert declared == there, (f"{role} in {module}: unused {sorted(declared - there)}, "
                                   f"missing {sorted(there - declared)}")


def test_only_the_residency_launches_turns() -> None:
    """No turn module starts a task to run a turn, nor asks the runtime to (the call loop turn →
    slot freed → launch → turn is the residency's, in one path)."""
    for path in sorted((ENGINE / "turn").glob("*.py")):
        text = path.read_text()
        assert "run_turn(" not in text or path.stem == "loop", path
        assert "rt.launch" not in text and "create_task" not in text, path
    for role in ROLES.values():
        assert not members(role) & {"launch", "store_unreachable", "run_task"}, role
    assert "_slot_freed" in vars(residency.Residency) and "_run" in vars(residency.Residency)


def test_the_runtime_reaches_handles_only_through_the_table() -> None:
    """The handle table is the only owner of its cache: no alias of it on the runtime."""
    source = (ENGINE / "verbs" / "runtime.py").read_text()
    assert "self.handles" not in source and ".cache" not in source
    assert "self.cache" not in (ENGINE / "state" / "handle_table.py").read_text(), "the cache is private"
    for role in [*ROLES.values(), residency.Resident]:
        assert "handles" not in members(role), role
