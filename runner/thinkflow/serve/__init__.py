"""The HTTP service: agents as a REST/SSE API, an OpenAI-compatible endpoint, an MCP endpoint and a web page.

``thinkflow serve`` (:mod:`thinkflow.cli.serve_cmd`) loads a :class:`~thinkflow.serve.catalog.Catalog` of agents,
builds the Starlette app with :func:`thinkflow.serve.app.create_app` and runs it on uvicorn
(:func:`thinkflow.serve.server.serve`). Runs go through the run engine in worker threads
(:mod:`thinkflow.serve.manager`). Starlette, uvicorn and the ``mcp`` SDK are imported only by this layer (and only
when serving), so ``thinkflow --help`` stays light.

Modules: ``options`` (limits and switches), ``catalog`` (load, validate and build the agents), ``manager`` (runs,
limits, cancellation), ``http`` (JSON errors and request checks), ``events`` (run events as JSON for clients),
``routes`` (the REST API), ``openai_compat`` (``/v1``), ``mcp_endpoint`` (``/mcp``), ``guard`` (auth, body size),
``app`` (the ASGI app), ``server`` (uvicorn with graceful shutdown), ``static/`` (the web page).
"""
