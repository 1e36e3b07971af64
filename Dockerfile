# The shop's image: web (gunicorn), Celery worker and beat all run from it.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=config.settings.production
RUN apt-get update && apt-get install -y --no-install-recommends gettext && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml ./
COPY config ./config
COPY shop ./shop
COPY payments ./payments
COPY provisioning ./provisioning
RUN pip install --no-cache-dir .
COPY . .
RUN python manage.py compilemessages --ignore=.venv -v0 \
 && DJANGO_DEBUG=1 python manage.py collectstatic --noinput -v0
RUN useradd --system --home /app shop && chown -R shop /app
USER shop
EXPOSE 8000
CMD ["gunicorn", "config.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
