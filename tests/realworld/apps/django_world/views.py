"""Plain (sync) views: under ASGI Django runs them on its thread for sync code."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from realworld.apps import techempower as te
from realworld.apps.django_world.models import Fortune, World

SELECT_WORLD_SLOWLY = te.SELECT_WORLD_SLOWLY.format("%s")


def _world(world: World) -> dict[str, int]:
    return {"id": world.id, "randomNumber": world.randomnumber}


def json(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"message": te.HELLO})


def plaintext(request: HttpRequest) -> HttpResponse:
    return HttpResponse(te.HELLO, content_type=te.PLAIN)


def db(request: HttpRequest) -> JsonResponse:
    return JsonResponse(_world(World.objects.get(id=te.random_id())))


def slowdb(request: HttpRequest) -> JsonResponse:
    return JsonResponse(_world(World.objects.raw(SELECT_WORLD_SLOWLY, [te.random_id()])[0]))


def queries(request: HttpRequest) -> JsonResponse:
    ids = te.random_ids(te.query_count(request.GET.get("queries")))
    return JsonResponse([_world(World.objects.get(id=i)) for i in ids], safe=False)


def updates(request: HttpRequest) -> JsonResponse:
    ids = te.distinct_random_ids(te.query_count(request.GET.get("queries")))
    worlds = [World.objects.get(id=i) for i in ids]
    for world in worlds:
        world.randomnumber = te.new_number()
    # One UPDATE for the batch (a CASE over the ids).
    World.objects.bulk_update(worlds, ["randomnumber"])
    return JsonResponse([_world(w) for w in worlds], safe=False)


def fortunes(request: HttpRequest) -> HttpResponse:
    rows = list(Fortune.objects.values_list("id", "message"))
    return render(request, te.FORTUNES_TEMPLATE, {"fortunes": te.sorted_fortunes(rows)},
                  content_type=te.HTML)
