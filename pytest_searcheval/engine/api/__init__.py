"""The HTTP service's routers and what they share; ``engine.app.create_app`` assembles them.

* :mod:`.context`: what every handler needs (the engine, the query cap, the admin token), kept
  on ``app.state.context`` and read with :func:`.context.of`;
* :mod:`.params`: query and path parameter checks, each refusal a :class:`.params.ClientError`;
* :mod:`.responses`: the JSON responses (orjson when installed) and the error body;
* :mod:`.errors`: the exception handlers that turn every failure into that body;
* :mod:`.search` (``/search``), :mod:`.discovery` (``/discovery/...``), :mod:`.health`
  (``/healthz``), :mod:`.admin` (``/admin/...``): one router each.
"""
