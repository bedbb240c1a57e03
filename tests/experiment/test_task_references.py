"""Every asyncio task expmgr creates is held until done: the event loop keeps only weak
references, so a task whose result is dropped can be garbage-collected mid-flight
(issue 12, item 7)."""
from __future__ import annotations

import ast
from pathlib import Path

import expmgr

_TASK_FACTORIES = {"create_task", "ensure_future"}


def dropped_tasks(source: str, filename: str) -> list[str]:
    """``file:line`` of each task-creating call used as a bare statement (its task unheld)."""
    return [f"{filename}:{node.lineno}" for node in ast.walk(ast.parse(source, filename))
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "attr", getattr(node.value.func, "id", None)) in _TASK_FACTORIES]


def test_the_check_finds_a_dropped_task():
    assert dropped_tasks("loop.create_task(work())\nkept = loop.create_task(work())\n", "x.py") == ["x.py:1"]


def test_no_task_in_expmgr_is_created_without_keeping_a_reference():
    package = Path(expmgr.__file__).parent
    found = [spot for path in sorted(package.rglob("*.py"))
             for spot in dropped_tasks(path.read_text(encoding="utf-8"), str(path.relative_to(package)))]
    assert found == [], "tasks created without a reference (keep them in a set until done)"
