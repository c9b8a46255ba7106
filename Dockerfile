# ctxbus services image: `docker build -t ctxbus .`; the entrypoint is the ctxbus CLI
# (`docker run ctxbus run retriever`, `docker run ctxbus topics create`, ...).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    CTXBUS_DATA_DIR=/data \
    CTXBUS_SERVICE_METRICS_HOST=0.0.0.0

WORKDIR /app
COPY pyproject.toml README.md ./
# services/ctxbus/schemas is a symlink to ../../schemas: both are needed for the package data
COPY schemas ./schemas
COPY services ./services
RUN pip install . \
    && useradd --create-home --uid 10001 --user-group ctxbus \
    && mkdir -p /data && chown ctxbus:ctxbus /data

USER ctxbus
WORKDIR /home/ctxbus
# metrics, /healthz and /readyz of `ctxbus run`: retriever, injector, recorder, gateway (CTXBUS_SERVICE_METRICS_PORT + 0..3); the hook gateway
EXPOSE 9464 9465 9466 9467 9470
ENTRYPOINT ["ctxbus"]
CMD ["--help"]
