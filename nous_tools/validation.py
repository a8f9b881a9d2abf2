"""JSON Schema checks with failures in Nous's words (the public path).

They live in ``nous_tools.schema``; ``check_schema`` checks a schema given by hand
as ``Tool(parameters=...)`` does at construction.
"""

from __future__ import annotations

from nous_tools.schema._validation import BACKTRACK_LIMIT as BACKTRACK_LIMIT
from nous_tools.schema._validation import CHECKED_FORMATS as CHECKED_FORMATS
from nous_tools.schema._validation import MAX_RECURSIVE_DEPTH as MAX_RECURSIVE_DEPTH
from nous_tools.schema._validation import ArgumentValidator as ArgumentValidator
from nous_tools.schema._validation import ValidationFailure as ValidationFailure
from nous_tools.schema._validation import check_registry as check_registry
from nous_tools.schema._validation import check_schema as check_schema
from nous_tools.schema._validation import compile_validator as compile_validator
from nous_tools.schema._validation import failure_message as failure_message
from nous_tools.schema._validation import shared_validator as shared_validator

__all__ = [
    "BACKTRACK_LIMIT",
    "CHECKED_FORMATS",
    "MAX_RECURSIVE_DEPTH",
    "ArgumentValidator",
    "ValidationFailure",
    "check_registry",
    "check_schema",
    "compile_validator",
    "failure_message",
    "shared_validator",
]
