"""The project as a WSGI app, with /_stats (realworld.apps.in_flight)."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

from realworld.apps.in_flight import InFlight

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realworld.apps.django_world.settings")

application = InFlight(get_wsgi_application())
