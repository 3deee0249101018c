# The Ragu image: one image, several roles (chonkit, kappi, worker, migrate) chosen by the command.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    OMP_NUM_THREADS=1 RAGU_HOST=0.0.0.0 RAGU_PORT=8000 RAGU_LOG_FORMAT=json RAGU_DATA_DIR=/data

WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY schemas ./schemas
COPY common ./common
COPY chonkit ./chonkit
COPY kappi ./kappi
COPY ragu ./ragu
COPY console ./console
COPY migrations ./migrations
# Editable, so `ragu migrate` finds migrations/ beside the packages.
RUN pip install -e ./schemas -e . \
    && useradd --system --uid 10001 --home /data ragu \
    && mkdir -p /data && chown ragu /data

USER ragu
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --retries=5 \
  CMD python -c "import urllib.request,os; urllib.request.urlopen(f'http://127.0.0.1:{os.environ[\"RAGU_PORT\"]}/health', timeout=2)"
CMD ["ragu", "serve", "all"]
