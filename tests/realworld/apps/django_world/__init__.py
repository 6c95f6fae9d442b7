"""A minimal Django project with TechEmpower's test types on the ORM (World, Fortune):
`realworld.apps.django_world.wsgi:application` and `...asgi:application`. Its settings read
REALWORLD_DSN and REALWORLD_POOL (Django's own psycopg pool)."""
