from __future__ import annotations

from django.urls import path

from realworld.apps.django_world import views

urlpatterns = [
    path("json", views.json),
    path("plaintext", views.plaintext),
    path("db", views.db),
    path("slowdb", views.slowdb),
    path("queries", views.queries),
    path("updates", views.updates),
    path("fortunes", views.fortunes),
]
