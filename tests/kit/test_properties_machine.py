"""The `SessionLog` state machine: incremental state equals complete folds after every rule."""

import pytest
from hypothesis import settings

from properties.machine import SessionLogMachine

SessionLogMachine.TestCase.settings = settings(settings(), stateful_step_count=30)
TestSessionLogMachine = SessionLogMachine.TestCase
TestSessionLogMachine.pytestmark = [pytest.mark.slow]  # type: ignore[attr-defined]
