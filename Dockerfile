# The a2ui-stream image used by docker-compose.yml (the worker and the one-shot topics job).
# It is what `make install` builds, in three stages (tests/shell/test_docker_compose.py checks
# the two against each other, since no Docker engine runs where the tests do):
#   viewer  Node builds the live viewer from the committed lockfile into app/viewer_dist
#           (make viewer: npm ci && npm run build in viewer/)
#   core    Python installs a2ui-stream into /opt/venv, editable from /srv/a2ui-stream like
#           make install, and compiles the admission core with mypyc (scripts/compile_core.py)
#   the image: both copied to the same paths, run as the unprivileged user a2ui
# The worker requires a bearer token: set A2UI_STREAM_HTTP_TOKENS in the environment (compose
# refuses to start the worker without it); it is never baked into the image.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG NODE_IMAGE=node:20.19.0-bookworm-slim

FROM ${NODE_IMAGE} AS viewer
WORKDIR /srv/a2ui-stream
COPY viewer/package.json viewer/package-lock.json viewer/
RUN cd viewer && npm ci --no-audit --no-fund
COPY viewer/build.mjs viewer/index.html viewer/
COPY viewer/src viewer/src
COPY schemas/a2ui-surface-v1.schema.json schemas/a2ui-surface-v2-profile.schema.json schemas/
RUN cd viewer && npm run build && test -f ../app/viewer_dist/index.html

FROM ${PYTHON_IMAGE} AS core
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /srv/a2ui-stream
COPY pyproject.toml README.md ./
COPY app ./app
COPY schemas ./schemas
COPY topics ./topics
COPY scripts/compile_core.py ./scripts/
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --upgrade pip \
    && /opt/venv/bin/pip install --no-cache-dir -e .
# mypy (the dev extra's pin) only to compile; the image does not keep it
RUN /opt/venv/bin/pip install --no-cache-dir 'mypy>=1.11,<3' \
    && /opt/venv/bin/python scripts/compile_core.py \
    && test -f app/core/compiled.json \
    && /opt/venv/bin/pip uninstall -y mypy \
    && /opt/venv/bin/python -c "from app.compiled_core import install; CORE_BUILD = install(); assert CORE_BUILD == 'compiled', CORE_BUILD"
COPY --from=viewer /srv/a2ui-stream/app/viewer_dist ./app/viewer_dist

FROM ${PYTHON_IMAGE}
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /var/lib/a2ui-stream a2ui
COPY --from=core /opt/venv /opt/venv
COPY --from=core /srv/a2ui-stream /srv/a2ui-stream
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    A2UI_STREAM_WEB_HOST=0.0.0.0 \
    A2UI_STREAM_DATA_DIR=/var/lib/a2ui-stream
USER a2ui
WORKDIR /var/lib/a2ui-stream
EXPOSE 6066
HEALTHCHECK --interval=10s --timeout=5s --retries=12 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:6066/health', timeout=3)"]
ENTRYPOINT ["a2ui-stream"]
CMD ["worker"]
