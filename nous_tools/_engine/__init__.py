"""The engine's mechanics (private), like Trio's ``_core``.

Worker threads and deadlines (``_pool`` and its parts ``_pool_*``), child processes
(``_process_pool`` and its parts ``_process_*``), the kinds of outcome a pool
reports (``_outcome``), what crosses a child's pipe (``_pipe``, ``_isolation``),
the books of remote backends (``_remote``), progress and log reports
(``_reporting``), limits and budgets (``_admission``) and the journal's step
around an attempt (``_journal``).
Above the values, ``signals``, the schema code, ``approval`` and the journal's
records; below the backends, the executor and everything else
(``docs/concepts/architecture.md``).
"""
