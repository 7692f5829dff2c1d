"""Admission: P11, P12 (rejections), P13, P18 (docs/format/properties.md §3, §4).

Each labelled mutation (the rule it breaks) gets its own examples, so every rule
is exercised on every run whatever the example budget.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from properties import laws
from properties import strategies as gen
from properties.profiles import share_of_examples
from properties.strategies import (
    LEGACY_EVENTS,
    MUTATIONS,
    REWRITE_FIELDS,
    LegacyInsertion,
    MutationCase,
    RewriteCase,
)

_HEADER = {"version": 0, "id": "legacy", "createdAt": 0}
_PER_LABEL = share_of_examples(8, minimum=4)


@pytest.mark.parametrize("label", sorted(MUTATIONS))
@_PER_LABEL
@given(data=st.data())
def test_p11_rejection_is_atomic(label: str, data: st.DataObject) -> None:
    case: MutationCase = data.draw(gen.mutation_cases(labels=[label], shape="any"))
    laws.law_rejection_is_atomic(case)


@pytest.mark.parametrize("label", sorted(MUTATIONS))
@_PER_LABEL
@given(data=st.data())
def test_p12_seed_rejects_like_append(label: str, data: st.DataObject) -> None:
    case: MutationCase = data.draw(gen.mutation_cases(labels=[label], shape="any"))
    laws.law_seed_rejects_like_append(case)


@pytest.mark.parametrize("label", sorted(LEGACY_EVENTS))
@_PER_LABEL
@given(data=st.data())
def test_p13_legacy_refused_on_seed_and_append(label: str, data: st.DataObject) -> None:
    case: LegacyInsertion = data.draw(gen.legacy_insertions(label, shape="any"))
    laws.law_legacy_refused(case)


@pytest.mark.parametrize("label", sorted(LEGACY_EVENTS))
@_PER_LABEL
@given(data=st.data())
def test_p13_legacy_refused_on_load(label: str, data: st.DataObject) -> None:
    case: LegacyInsertion = data.draw(gen.legacy_insertions(label, shape="any"))
    laws.law_legacy_refused_on_load(_HEADER, case)


@pytest.mark.slow
@pytest.mark.parametrize("change", [None, *sorted(REWRITE_FIELDS)])
@_PER_LABEL
@given(data=st.data())
def test_p18_rewrite_rule(change: str | None, data: st.DataObject) -> None:
    case: RewriteCase = data.draw(gen.rewrite_cases(change, shape="any"))
    laws.law_rewrite_rule(case)
