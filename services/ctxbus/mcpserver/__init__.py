"""``ctxbus mcp``: ctxbus as a Model Context Protocol server (the official ``mcp`` SDK), for Claude Code and any
MCP client.

- :mod:`~ctxbus.mcpserver.stack`: the calls a tool makes, on the running stack (``runtime.py`` finds it), through the
  bus as a hook's are: a retrieval request for priming, searching and pre-context, ``memory.upserted`` and
  ``memory.curated`` for remembering and forgetting, ``context.outcome.recorded`` for outcomes; reads for the
  resources through the gateway.
- :mod:`~ctxbus.mcpserver.tools`: the server: its tools and resources over those calls.
- :mod:`~ctxbus.mcpserver.http`: streamable HTTP behind the gateway's secret, Origin and Host checks.
- :mod:`~ctxbus.mcpserver.config_file`: ctxbus's entry in a project's ``.mcp.json`` (pure text work).
"""
