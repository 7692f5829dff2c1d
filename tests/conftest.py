"""Test configuration: register the kit's Hypothesis profiles and load `ci`.

`HYPOTHESIS_PROFILE=deep` (or `--hypothesis-profile=deep`, or the kit's own
`--session-kernel-profile=deep`) selects the long profile instead.
"""

import os

from hypothesis import settings

from properties.profiles import register_profiles

register_profiles()
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
