"""The Django site and the inbox in one ASGI application; the workers run elsewhere.

    uvicorn asgi:application                                   (from examples/django)
    hookinbox worker --config examples/django/hookinbox.toml   (any number, any host)

Django has no mounts and no lifespan: ``hookinbox.asgi.mount`` sends ``/hooks/...`` to
the inbox, everything else to Django, and starts the inbox (its store) with the server.
The inbox only receives here (``run_workers=False``): handlers run in ``hookinbox
worker`` processes, which need no Django management command.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.asgi import get_asgi_application

from hookinbox import Inbox, load_config
from hookinbox.asgi import mount

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")

django_app = get_asgi_application()
inbox = Inbox(
    load_config(os.environ.get("HOOKINBOX_CONFIG", Path(__file__).with_name("hookinbox.toml"))),
    run_workers=False,
)
application = mount(django_app, inbox, prefix="/hooks")
