# The a2ui-stream image used by docker-compose.yml (worker and the one-shot topics job).
FROM python:3.11-slim
WORKDIR /srv/a2ui-stream
COPY pyproject.toml README.md ./
COPY app ./app
COPY schemas ./schemas
COPY topics ./topics
RUN pip install --no-cache-dir .
ENV A2UI_STREAM_WEB_HOST=0.0.0.0 \
    A2UI_STREAM_DATA_DIR=/var/lib/a2ui-stream
ENTRYPOINT ["a2ui-stream"]
CMD ["worker"]
