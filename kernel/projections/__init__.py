"""Projections: a session log as what other ecosystems read (docs/projections.md).

ACP `session/update` notifications that replay a session in an editor, and the
request bodies of OpenAI-compatible Chat Completions and Anthropic Messages. Pure
functions of an admitted log: they import the kernel core and the standard
library only, never a protocol or provider SDK.
"""

from kernel.projections.acp import AcpState, Notification, acp_content, acp_updates, tool_kind
from kernel.projections.blocks import ProjectionError
from kernel.projections.history import paired_history
from kernel.projections.providers import (
    DEFAULT_MAX_TOKENS,
    anthropic_request,
    anthropic_tool_ids,
    openai_request,
    openai_tool_ids,
)

__all__ = (
    "DEFAULT_MAX_TOKENS",
    "AcpState",
    "Notification",
    "ProjectionError",
    "acp_content",
    "acp_updates",
    "anthropic_request",
    "anthropic_tool_ids",
    "openai_request",
    "openai_tool_ids",
    "paired_history",
    "tool_kind",
)
