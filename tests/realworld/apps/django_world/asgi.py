"""The project as an ASGI app."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realworld.apps.django_world.settings")

application = get_asgi_application()
