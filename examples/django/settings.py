"""The smallest Django settings for an ASGI site with no database of its own."""

SECRET_KEY = "django-example-only-not-a-secret"  # a demo key, never deployed
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "urls"
INSTALLED_APPS: list[str] = []
MIDDLEWARE: list[str] = []
DATABASES: dict[str, dict[str, str]] = {}
USE_TZ = True
