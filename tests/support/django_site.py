"""A Django project configured in code: settings.configure() here, the URL patterns in this
module (ROOT_URLCONF points at it), views for a form post, a file upload, JSON and a
StreamingHttpResponse. `application` is Django's WSGI handler inside wsgiref's validator."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from wsgiref.validate import validator

import django
from django.conf import settings

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="tests-only-not-secret",
        ALLOWED_HOSTS=["127.0.0.1", "localhost"],
        ROOT_URLCONF=__name__,
        MIDDLEWARE=[],
        INSTALLED_APPS=[],
        DATABASES={},
        USE_TZ=True,
        # Keep every upload in memory-or-temp-file handling at Django's defaults.
        DATA_UPLOAD_MAX_MEMORY_SIZE=10 * 1024 * 1024,
    )
    django.setup()

from django.core.handlers.wsgi import WSGIHandler  # noqa: E402  (needs configured settings)
from django.http import (  # noqa: E402
    HttpRequest,
    HttpResponse,
    JsonResponse,
    StreamingHttpResponse,
)
from django.urls import path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402


def ping(request: HttpRequest) -> HttpResponse:
    return HttpResponse(b"pong", content_type="text/plain")


@csrf_exempt
def form(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"name": request.POST["name"], "tags": request.POST.getlist("tag"),
                         "method": request.method})


@csrf_exempt
def upload(request: HttpRequest) -> JsonResponse:
    f = request.FILES["file"]
    data = f.read()
    return JsonResponse({"filename": f.name, "size": len(data),
                         "sha256": hashlib.sha256(data).hexdigest(),
                         "note": request.POST.get("note")})


@csrf_exempt
def json_echo(request: HttpRequest) -> JsonResponse:
    payload = json.loads(request.body)
    return JsonResponse({"received": payload, "count": len(payload["items"])})


def stream(request: HttpRequest) -> StreamingHttpResponse:
    n = int(request.GET.get("n", "5"))

    def generate() -> Iterator[bytes]:
        for i in range(n):
            yield f"line {i}\n".encode()
    return StreamingHttpResponse(generate(), content_type="text/plain")


def whoami(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"path": request.path, "path_info": request.path_info,
                         "script_name": request.META.get("SCRIPT_NAME", "")})


urlpatterns = [
    path("_ctl/ping", ping),
    path("form", form),
    path("upload", upload),
    path("json", json_echo),
    path("stream", stream),
    path("whoami", whoami),
]

application = validator(WSGIHandler())
