# ctxbus services image: `docker build -t ctxbus .`; the entrypoint is the ctxbus CLI
# (e.g. `docker run ctxbus run retriever`).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    CTXBUS_DATA_DIR=/data \
    CTXBUS_SERVICE_METRICS_HOST=0.0.0.0

WORKDIR /app
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY services ./services
RUN pip install . \
    && useradd --create-home --uid 10001 ctxbus \
    && mkdir -p /data && chown ctxbus /data

USER ctxbus
VOLUME ["/data"]
EXPOSE 9464 9465 9466
ENTRYPOINT ["ctxbus"]
CMD ["--help"]
