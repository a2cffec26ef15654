"""Two listeners, one app: which paths each port answers.

With ``[server] admin_port`` set, ``hookinbox serve`` binds two sockets and serves the
inbox's one ASGI app on both (so ``--processes N`` shares both sockets as it shares one).
:class:`SplitByPort` reads the local port of each request (``scope["server"]``) and
answers 404 to an operator path (``/metrics``, ``/admin``, ``/api``) that arrived on the
public port, and to a delivery (``/webhooks``) that arrived on the operator port. Health
checks answer on both. The webhook port can then face the internet while the operator
port stays on a private interface.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from hookinbox.errors import NotFound
from hookinbox.http.errors import error_response

#: What only the operator listener answers.
OPERATOR_PREFIXES = ("/metrics", "/admin", "/api")
#: What only the public listener answers.
PUBLIC_PREFIXES = ("/webhooks",)


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path == p or path.startswith(p + "/") for p in prefixes)


class SplitByPort:
    def __init__(self, app: ASGIApp, operator_port: int) -> None:
        self._app = app
        self._operator_port = operator_port

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            server = scope.get("server")
            on_operator_port = server is not None and server[1] == self._operator_port
            path: str = scope["path"]
            root: str = scope.get("root_path", "")
            if root and path.startswith(root):
                path = path[len(root) :]
            closed = PUBLIC_PREFIXES if on_operator_port else OPERATOR_PREFIXES
            if _under(path, closed):
                await error_response(NotFound())(scope, receive, send)
                return
        await self._app(scope, receive, send)
