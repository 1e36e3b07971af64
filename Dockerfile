# The shop's image: web (gunicorn), Celery worker and beat all run from it (docker-compose.yml).
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=config.settings.production
# /metrics adds up every gunicorn worker's request histograms from here (config/gunicorn.py empties it at start).
ENV PROMETHEUS_MULTIPROC_DIR=/tmp/prometheus-multiproc
RUN apt-get update && apt-get install -y --no-install-recommends gettext && rm -rf /var/lib/apt/lists/*
WORKDIR /app
# Dependencies first: a change to the code alone does not reinstall them.
COPY pyproject.toml ./
COPY config ./config
COPY shop ./shop
COPY payments ./payments
COPY provisioning ./provisioning
RUN pip install --no-cache-dir .
COPY . .
# Build steps need no secret: DEBUG on lets the production settings load without them. The static
# files get hashed names and compressed copies (whitenoise serves them with far-future caching).
RUN DJANGO_DEBUG=1 python manage.py compilemessages -v0 \
 && DJANGO_DEBUG=1 python manage.py collectstatic --noinput -v0
# A fixed uid, so that the operator can give it the SSH key secret (docs/production.md).
RUN useradd --system --uid 10001 --home /app shop && chown -R shop /app
USER shop
EXPOSE 8000
CMD ["gunicorn", "config.wsgi", "-c", "python:config.gunicorn", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-", "--logger-class", "core.logs.GunicornLogger"]
