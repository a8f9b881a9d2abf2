"""Model responses in, tool results out (private; public through ``nous_tools``).

The calls of an OpenAI Chat Completions, Responses or Anthropic response read into
``ToolCall`` values (``_calls_in``), run as one batch (``execute_tool_calls``, in
``_tool_calls``), and rendered back as the messages each API expects
(``ToolCallResults``; ``format_tool_result`` lives below, in ``nous_tools._rendering``); the paused batch
(``_paused``) and its wire format (``_wire``), and what a web view needs around it
(``_web``). Above the registry and the executor; below the surfaces.
"""
