"""``GET /metrics`` of ``serve --http``: the Prometheus text exposition.

The route sits behind the same bearer authentication as ``/mcp`` (any configured token may scrape;
with no tokens, which is only allowed on loopback, anyone on the machine may), unlike the
``/health`` liveness probe, which is open.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.server import MCPServer
from starlette.requests import Request
from starlette.responses import Response

from memory_orchestrator.entrypoints.telemetry.metrics import Metrics

METRICS_PATH = "/metrics"


def mount_metrics(server: MCPServer[Any], metrics: Metrics) -> None:
    """Serve ``metrics`` at ``/metrics`` on ``server``'s HTTP app."""

    async def scrape(_request: Request) -> Response:
        # Reading the multiprocess files is file I/O: off the event loop.
        body, content_type = await asyncio.to_thread(metrics.render)
        return Response(body, media_type=content_type)

    server.custom_route(METRICS_PATH, methods=["GET"])(scrape)
