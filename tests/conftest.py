"""Test configuration: register the kit's Hypothesis profiles and load `ci`.

`HYPOTHESIS_PROFILE=deep` (or `--hypothesis-profile=deep`, or the kit's own
`--session-kernel-profile=deep`) selects the long profile instead.
"""

import os
import sys
from pathlib import Path

from hypothesis import settings

from properties.profiles import register_profiles

register_profiles()
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# The corpus and fuzz tests build their logs with `test_cli`'s builders; pytest puts a
# test file's own folder on the path only once it collects it, so `pytest tests/corpus`
# alone would not find them.
sys.path.insert(0, str(Path(__file__).resolve().parent / "cli"))
