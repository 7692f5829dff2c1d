"""Projections: a session log as what other ecosystems read (docs/projections.md).

ACP `session/update` notifications that replay a session in an editor, and the
request bodies of OpenAI-compatible Chat Completions and Anthropic Messages, and
back: a provider's response (or stream) as the events a runtime appends. Pure
functions: they import the kernel core and the standard library only, never a
protocol or provider SDK.
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
from kernel.projections.responses import (
    AnthropicStream,
    OpenAIStream,
    ResponseEvents,
    anthropic_response_events,
    anthropic_stream_events,
    openai_response_events,
    openai_stream_events,
)

__all__ = (
    "DEFAULT_MAX_TOKENS",
    "AcpState",
    "AnthropicStream",
    "Notification",
    "OpenAIStream",
    "ProjectionError",
    "ResponseEvents",
    "acp_content",
    "acp_updates",
    "anthropic_request",
    "anthropic_response_events",
    "anthropic_stream_events",
    "anthropic_tool_ids",
    "openai_request",
    "openai_response_events",
    "openai_stream_events",
    "openai_tool_ids",
    "paired_history",
    "tool_kind",
)
