"""Mount an inbox in an ASGI app that has no mount of its own (Django, for one).

Starlette and FastAPI mount it themselves (``app.mount("/hooks", inbox.app)``, with the
inbox's lifespan composed into the app's). Django's ASGI handler has no mounts and no
lifespan, so :func:`mount` puts the two side by side::

    # mysite/asgi.py
    from django.core.asgi import get_asgi_application
    from hookinbox import Inbox, load_config
    from hookinbox.asgi import mount

    inbox = Inbox(load_config("hookinbox.toml"), run_workers=False)
    application = mount(get_asgi_application(), inbox, prefix="/hooks")

Requests under ``prefix`` go to the inbox (``POST /hooks/webhooks/{source}``, as under a
Starlette ``Mount``: ``root_path`` gains the prefix, ``path`` is kept whole); everything
else goes to ``app``. The server's lifespan starts and stops the inbox and is not passed
on to ``app`` (Django refuses a lifespan scope); pass ``app_lifespan=True`` for an app
that has one of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Receive, Scope, Send

if TYPE_CHECKING:
    from hookinbox.app import Inbox

__all__ = ["mount"]


def mount(app: Any, inbox: Inbox, *, prefix: str = "/hooks", app_lifespan: bool = False) -> ASGIApp:
    """``app`` with ``inbox`` under ``prefix``, and the inbox started by the lifespan."""
    prefix = "/" + prefix.strip("/")
    if prefix == "/":
        raise ValueError("mount the inbox under a prefix, e.g. '/hooks'")

    async def mounted(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(inbox, app if app_lifespan else None, scope, receive, send)
            return
        root = scope.get("root_path", "")
        path: str = scope.get("path", "")
        relative = path[len(root) :] if root and path.startswith(root) else path
        if scope["type"] in ("http", "websocket") and (
            relative == prefix or relative.startswith(prefix + "/")
        ):
            await inbox.app(dict(scope, root_path=root + prefix), receive, send)
            return
        await app(scope, receive, send)

    return mounted


async def _lifespan(
    inbox: Inbox, app: Any | None, scope: Scope, receive: Receive, send: Send
) -> None:
    """Start the inbox on ``startup`` and stop it on ``shutdown`` (the ASGI lifespan
    protocol); with ``app``, its own lifespan runs inside the inbox's."""
    message = await receive()
    assert message["type"] == "lifespan.startup"
    try:
        await inbox.start()
    except Exception as exc:
        await send({"type": "lifespan.startup.failed", "message": type(exc).__name__})
        return
    if app is None:
        await send({"type": "lifespan.startup.complete"})
        message = await receive()
        await inbox.stop()
        await send({"type": "lifespan.shutdown.complete"})
        return
    try:
        await app(scope, receive, send)
    finally:
        await inbox.stop()
