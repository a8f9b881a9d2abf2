"""Leaves (private): small helpers that import nothing of nous_tools but ``errors``.

The clock, the safe logger, text and ISO-8601 helpers, canonical forms and tool
digests, approval tokens' mechanics (``_tokens``), a tool's limits as values
(``_rates``), Nous's wording of failures, and the cancellation primitive
(``_scope``: scopes and where a thread stands). Everything else may import these; they import
no layer above them.
"""
