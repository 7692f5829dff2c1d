"""Request headers (docs/format/folds.md §3) for the canonicalization and equality laws (P22, P23).

`request_headers` draws headers as `canonical_header` and `headers_equal` take them,
often not canonical (empty `system`, empty `tools`, marker-less `adapterDefaults`,
`false` markers, extra keys). `HEADER_CHANGES`
lists the edits P23 says must make two headers unequal. Internal to the kit:
`properties.strategies` re-exports `request_headers`, `properties.laws` `HEADER_CHANGES`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

__all__ = ("request_headers", "tool_schemas", "HEADER_CHANGES", "apply_change", "changes_for")


def tool_schemas() -> st.SearchStrategy[dict[str, Any]]:
    """Tool schemas `{name, description, parameters}` (member order varies)."""
    params = st.sampled_from(
        [
            {"type": "object"},
            {"type": "object", "properties": {"path": {"type": "string"}}},
            {"type": "object", "maximum": 1.0},
            {"type": "object", "2": 1, "10": 2},
        ]
    )
    return st.builds(
        lambda name, desc, p, flip: (
            {"parameters": copy.deepcopy(p), "name": name, "description": desc}
            if flip
            else {"name": name, "description": desc, "parameters": copy.deepcopy(p)}
        ),
        st.sampled_from(["ls", "read", "write", "grep"]),
        st.sampled_from(["List files", "Read a file", ""]),
        params,
        st.booleans(),
    )


def _config() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"provider": st.sampled_from(["deepseek", "p"]), "model": st.sampled_from(["chat", "m"])},
        optional={
            "reasoningEffort": st.sampled_from(["high", "low"]),
            "temperature": st.sampled_from([0, 0.5, 1, 1.0]),
            "maxTokens": st.sampled_from([1024, 4096.0]),
            "stop": st.lists(st.sampled_from(["\n", "END"]), max_size=2),
            "topP": st.just(0.9),
        },
    )


def _with_parts(
    config: dict[str, Any], parts: dict[str, Any], markers: dict[str, Any]
) -> dict[str, Any]:
    header: dict[str, Any] = {"config": config}
    ad = dict(markers)
    # a marker may only be true when its config field is present (R11c)
    for key in ("reasoningEffort", "maxTokens"):
        if ad.get(key) is True and key not in config:
            ad[key] = False
    if parts.pop("withAdapterDefaults", False):
        header["adapterDefaults"] = ad
    header.update(parts)
    return header


def request_headers() -> st.SearchStrategy[dict[str, Any]]:
    """Request headers as `canonical_header` and `headers_equal` take them
    (docs/format/folds.md §3), frequently non-canonical.

    Each passes R11 but for one thing: an adapter marker may be `false` (canonicalization
    drops such a marker; R11c refuses it in a logged `request/header`), so a header drawn
    here is not always one a log may hold.
    """
    parts = st.fixed_dictionaries(
        {},
        optional={
            "system": st.sampled_from(["", "You are terse.", "s"]),
            "tools": st.lists(tool_schemas(), max_size=3),
            "withAdapterDefaults": st.booleans(),
        },
    )
    markers = st.fixed_dictionaries(
        {}, optional={"reasoningEffort": st.booleans(), "maxTokens": st.booleans()}
    )
    return st.builds(_with_parts, _config(), parts, markers)


def _set_config(key: str, value: Any) -> Callable[[dict[str, Any]], bool]:
    def edit(h: dict[str, Any]) -> bool:
        old = h["config"].get(key, object())
        h["config"][key] = value if old != value else (value + "x" if isinstance(value, str) else 7)
        return True

    return edit


def _flip_marker(key: str) -> Callable[[dict[str, Any]], bool]:
    def edit(h: dict[str, Any]) -> bool:
        ad = h.setdefault("adapterDefaults", {})
        h["config"].setdefault(key, "high" if key == "reasoningEffort" else 100)
        ad[key] = ad.get(key) is not True
        return True

    return edit


def _swap_tools(h: dict[str, Any]) -> bool:
    tools = h.get("tools") or []
    if len(tools) < 2 or tools[0] == tools[1]:
        return False
    tools[0], tools[1] = tools[1], tools[0]
    return True


def _tool_byte(h: dict[str, Any]) -> bool:
    tools = h.get("tools") or []
    if not tools:
        return False
    tools[0]["description"] = tools[0]["description"] + "!"
    return True


def _tool_member_order(h: dict[str, Any]) -> bool:
    tools = h.get("tools") or []
    if not tools:
        return False
    tools[0] = dict(reversed(list(tools[0].items())))
    return True


def _system(h: dict[str, Any]) -> bool:
    h["system"] = (h.get("system") or "") + "!"
    return True


def _stop_presence(h: dict[str, Any]) -> bool:
    if "stop" in h["config"]:
        del h["config"]["stop"]
    else:
        h["config"]["stop"] = []
    return True


HEADER_CHANGES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "provider": _set_config("provider", "other"),
    "model": _set_config("model", "other"),
    "reasoningEffort": _set_config("reasoningEffort", "medium"),
    "temperature": _set_config("temperature", 0.25),
    "maxTokens": _set_config("maxTokens", 333),
    "stop presence": _stop_presence,
    "reasoningEffort marker": _flip_marker("reasoningEffort"),
    "maxTokens marker": _flip_marker("maxTokens"),
    "system text": _system,
    "swap two tools": _swap_tools,
    "tool byte": _tool_byte,
    "tool member order": _tool_member_order,
}
"""Edits of a canonical header after which `headers_equal` must be false (P23), by the label
`law_header_equality(change=...)` takes."""


def apply_change(header: dict[str, Any], change: str) -> dict[str, Any] | None:
    """A copy of `header` with `change` applied, or None when it does not apply."""
    edited = copy.deepcopy(header)
    return edited if HEADER_CHANGES[change](edited) else None


def changes_for(header: dict[str, Any]) -> list[str]:
    """The changes that apply to `header`."""
    return [c for c in HEADER_CHANGES if apply_change(header, c) is not None]
