"""Errors carry their rule: `KernelError.rule` names the rule broken (docs/format/admission.md).

Over the mutation catalogue (one rule broken per case, `properties._mutations`), the
error of `append`, of `restore` and of loading the written log names, in `rule`, the
rule the case breaks; the command's report reads the attribute.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel import SessionLog, load_jsonl
from kernel.cli import main
from kernel.errors import CorruptLog, KernelError
from properties import strategies as gen
from properties.laws._common import append_wire
from properties.profiles import share_of_examples
from properties.strategies import MUTATIONS, MutationCase

HEADER: dict[str, Any] = {"version": 0, "id": "s", "createdAt": 0, "delegationDepth": 0}


def _broken(label: str) -> str:
    """The rule a catalogue label breaks: its first word (`R7c`, `R12`)."""
    return label.split()[0]


def _matches(rule: str | None, broken: str) -> bool:
    """`rule` is the broken rule or one of its lettered parts (`R10a` for `R10`)."""
    return rule is not None and (
        rule == broken or (rule.startswith(broken) and rule[len(broken) :].isalpha())
    )


_CITED = re.compile(r"\((R[0-9]+[a-z]?|H[0-9]+|A\.[0-9])\)")


def rule_cited(message: str) -> str | None:
    """The first single rule id a message cites in parentheses (independent of the kernel's)."""
    match = _CITED.search(message)
    return None if match is None else match.group(1)


def _line(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.parametrize("label", sorted(MUTATIONS))
@share_of_examples(4, minimum=2)
@given(data=st.data())
def test_every_refusal_of_a_catalogued_mutation_names_its_rule(
    label: str, data: st.DataObject
) -> None:
    case: MutationCase = data.draw(gen.mutation_cases(labels=[label], shape="any"))
    broken = _broken(label)
    mutated = case.mutation.event
    log = SessionLog.restore(case.prefix)
    for build in (
        lambda: append_wire(log, mutated),
        lambda: SessionLog.seed([*case.prefix, mutated], now=1),
    ):
        with pytest.raises(KernelError) as refused:
            build()
        error = refused.value
        assert _matches(error.rule, broken), (label, error.rule, str(error))
    lines = [_line({"type": "session", **HEADER}), *map(_line, case.prefix), _line(mutated)]
    if case.valid_next is None:
        # A closed turn after the mutation puts it inside committed history (not a torn tail).
        return
    data_bytes = b"\n".join(lines) + b"\n"
    try:
        load_jsonl(data_bytes, now=0)
    except KernelError as exc:
        if isinstance(exc, CorruptLog) and exc.rule is None:
            # The record did not parse or continue the prefix: a torn tail, no rule broken.
            assert rule_cited(str(exc)) is None
        else:
            assert exc.rule == rule_cited(str(exc))


def test_a_rule_given_outranks_the_text_and_a_wrapper_keeps_its_causes() -> None:
    assert KernelError("x (R5)", rule="R9").rule == "R9"
    assert KernelError("nothing cited").rule is None
    assert KernelError("see (R2, R1)").rule is None  # a list is no single rule
    data = b"\n".join(
        [
            _line({"type": "session", **HEADER}),
            b'{"type":"turn/start","seq":0,"time":0,"data":{"turn":0}}',
        ]
    )
    with pytest.raises(CorruptLog) as caught:
        load_jsonl(data + b"\n", now=0)
    assert caught.value.rule == "R12" and caught.value.__cause__ is not None
    assert caught.value.rule == getattr(caught.value.__cause__, "rule", None)


def test_verify_reports_the_rule_of_an_admission_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "bad.jsonl"
    log.write_bytes(
        _line({"type": "session", **HEADER})
        + b'\n{"type":"turn/start","seq":0,"time":0,"data":{"turn":0}}\n'
        + b'{"type":"turn/end","seq":1,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}\n'
    )
    assert main(["verify", "--json", str(log)]) == 1
    problem = json.loads(capsys.readouterr().out)["logs"][0]["problems"][0]
    assert problem["rule"] == "R12"


_R7 = re.compile(r"\(R7[a-f]?\)")
# `Event(...)` turns an iterable of citations into a tuple as it is built; one that is
# not iterable is refused there, before any rule module sees it.
_R7_OUTSIDE_PROVENANCE = {"kernel/values/events.py"}


def _r7_raises(path: Path) -> int:
    """The `raise` statements of a module whose message literal cites an R7 rule."""
    found = 0
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Raise) and node.exc is not None:
            texts = [n.value for n in ast.walk(node.exc) if isinstance(n, ast.Constant)]
            found += any(isinstance(t, str) and _R7.search(t) for t in texts)
    return found


def test_every_r7_check_is_in_the_provenance_module() -> None:
    root = Path(__file__).resolve().parents[2]
    raising = {
        str(path.relative_to(root))
        for path in sorted((root / "kernel").rglob("*.py"))
        if _r7_raises(path)
    }
    assert "kernel/admission/provenance.py" in raising
    assert raising - {"kernel/admission/provenance.py"} == _R7_OUTSIDE_PROVENANCE
