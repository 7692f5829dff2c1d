"""The property catalog (docs/format/properties.md P1-P45) as plain functions.

Each law takes generated input (a log as wire dicts or kernel `Event`s, or the
input object its generator draws) and raises `LawViolation`, an
`AssertionError`, explaining the broken law and showing the log one event per
line. Any test suite can call them inside its own `@given` tests. A law that
checks a fold takes `implementation=` (an `Implementation`, the kernel's
`KERNEL` by default), so your own closer, fold or checker is what it checks.
The laws live in internal submodules, one per section of the catalog; import
them from here.
"""

from properties._headers import HEADER_CHANGES
from properties._report import LawViolation
from properties.laws._admission import (
    law_legacy_refused,
    law_rejection_is_atomic,
    law_rewrite_rule,
    law_seed_rejects_like_append,
)
from properties.laws._chunks import (
    ROW_CORRUPTIONS,
    law_chunk_row_round_trip,
    law_chunk_row_validation,
    law_packing_batch_local,
)
from properties.laws._common import as_events, as_wire
from properties.laws._header import (
    law_canonical_idempotent,
    law_context_writer,
    law_header_equality,
    law_header_fold_composes,
    law_request_reconstruction,
    law_writer_rules,
)
from properties.laws._history import (
    law_contiguous_sequence,
    law_derived_messages_are_safe,
    law_deterministic_derivation,
    law_loop_tool_pairing,
    law_message_cache,
    law_noise_never_changes_history,
    law_projection,
)
from properties.laws._implementation import KERNEL, Implementation
from properties.laws._invariants import (
    law_all_violations,
    law_loop_logs_well_formed,
    law_perturbations_caught,
)
from properties.laws._repair import (
    law_closer_emptiness,
    law_closers_deterministic,
    law_crash_prefix_repairs,
    law_repair_append_only,
    law_repair_cycle_writes_once,
    law_repair_idempotent,
    law_synthetic_results,
)
from properties.laws._seeds import (
    law_end_seed_position,
    law_fork_prefix,
    law_replay_from_seed,
    law_reseed_idempotent,
    law_seed_equals_append,
)
from properties.laws._storage import (
    BAD_LINES,
    Store,
    law_byte_exact_writer,
    law_committed_damage_fatal,
    law_crlf_lines,
    law_legacy_refused_on_load,
    law_repair_once,
    law_storage_round_trip,
    law_strict_record_parsing,
    law_truncation_tolerance,
    law_unknown_types,
    law_version_refusal,
    law_write_read_at_any_depth,
    law_zstd_damage_fatal,
    law_zstd_truncation_tolerance,
)
from properties.laws._surface import (
    law_incremental_surface,
    law_surface_node_count,
    law_surface_nodes_sane,
    law_windowed_fold,
)
from properties.laws._values import (
    law_deep_json_accepted,
    law_lossless_json_accepted,
    law_lossy_json_rejected,
    law_snapshot_isolation,
)

__all__ = (
    "LawViolation",
    "CATALOG",
    "Implementation",
    "KERNEL",
    "as_events",
    "as_wire",
    "Store",
    "HEADER_CHANGES",
    "ROW_CORRUPTIONS",
    "BAD_LINES",
    "law_deterministic_derivation",
    "law_contiguous_sequence",
    "law_replay_from_seed",
    "law_reseed_idempotent",
    "law_noise_never_changes_history",
    "law_derived_messages_are_safe",
    "law_chunk_row_round_trip",
    "law_lossless_json_accepted",
    "law_deep_json_accepted",
    "law_lossy_json_rejected",
    "law_snapshot_isolation",
    "law_rejection_is_atomic",
    "law_seed_equals_append",
    "law_seed_rejects_like_append",
    "law_legacy_refused",
    "law_legacy_refused_on_load",
    "law_incremental_surface",
    "law_surface_nodes_sane",
    "law_surface_node_count",
    "law_windowed_fold",
    "law_rewrite_rule",
    "law_projection",
    "law_message_cache",
    "law_loop_tool_pairing",
    "law_canonical_idempotent",
    "law_header_equality",
    "law_header_fold_composes",
    "law_writer_rules",
    "law_request_reconstruction",
    "law_context_writer",
    "law_loop_logs_well_formed",
    "law_all_violations",
    "law_perturbations_caught",
    "law_crash_prefix_repairs",
    "law_repair_idempotent",
    "law_repair_cycle_writes_once",
    "law_repair_append_only",
    "law_closer_emptiness",
    "law_synthetic_results",
    "law_closers_deterministic",
    "law_storage_round_trip",
    "law_write_read_at_any_depth",
    "law_truncation_tolerance",
    "law_zstd_truncation_tolerance",
    "law_committed_damage_fatal",
    "law_zstd_damage_fatal",
    "law_repair_once",
    "law_version_refusal",
    "law_unknown_types",
    "law_packing_batch_local",
    "law_chunk_row_validation",
    "law_byte_exact_writer",
    "law_strict_record_parsing",
    "law_crlf_lines",
    "law_end_seed_position",
    "law_fork_prefix",
)

CATALOG: dict[str, tuple[str, ...]] = {
    "P1": ("law_deterministic_derivation",),
    "P2": ("law_contiguous_sequence",),
    "P3": ("law_replay_from_seed",),
    "P4": ("law_reseed_idempotent",),
    "P5": ("law_noise_never_changes_history",),
    "P6": ("law_derived_messages_are_safe",),
    "P7": ("law_chunk_row_round_trip",),
    "P8": ("law_lossless_json_accepted", "law_deep_json_accepted"),
    "P9": ("law_lossy_json_rejected",),
    "P10": ("law_snapshot_isolation",),
    "P11": ("law_rejection_is_atomic",),
    "P12": ("law_seed_equals_append", "law_seed_rejects_like_append"),
    "P13": ("law_legacy_refused", "law_legacy_refused_on_load"),
    "P14": ("law_incremental_surface",),
    "P15": ("law_surface_nodes_sane",),
    "P16": ("law_surface_node_count",),
    "P17": ("law_windowed_fold",),
    "P18": ("law_rewrite_rule",),
    "P19": ("law_projection",),
    "P20": ("law_message_cache",),
    "P21": ("law_loop_tool_pairing",),
    "P22": ("law_canonical_idempotent",),
    "P23": ("law_header_equality",),
    "P24": ("law_header_fold_composes",),
    "P25": ("law_writer_rules",),
    "P26": ("law_request_reconstruction",),
    "P27": ("law_context_writer",),
    "P28": ("law_loop_logs_well_formed",),
    "P28a": ("law_all_violations",),
    "P29": ("law_perturbations_caught",),
    "P30": ("law_crash_prefix_repairs",),
    "P31": ("law_repair_idempotent", "law_repair_cycle_writes_once"),
    "P32": ("law_repair_append_only",),
    "P33": ("law_closer_emptiness",),
    "P34": ("law_synthetic_results",),
    "P35": ("law_closers_deterministic",),
    "P36": ("law_storage_round_trip",),
    "P37": ("law_truncation_tolerance", "law_zstd_truncation_tolerance"),
    "P38": ("law_committed_damage_fatal", "law_zstd_damage_fatal"),
    "P39": ("law_repair_once",),
    "P40": ("law_version_refusal",),
    "P41": ("law_unknown_types",),
    "P42": ("law_packing_batch_local",),
    "P43": ("law_chunk_row_validation",),
    "P43a": ("law_byte_exact_writer",),
    "P43b": ("law_strict_record_parsing", "law_crlf_lines"),
    "P44": ("law_end_seed_position",),
    "P45": ("law_fork_prefix",),
}
"""Every property of the catalog and the law functions that check it."""
