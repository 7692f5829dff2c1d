"""Test configuration: Hypothesis profiles (`--hypothesis-profile=deep` for long runs)."""

from properties.profiles import register_profiles

register_profiles()
