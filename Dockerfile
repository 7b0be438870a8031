# A Sleuth worker image: `sleuth worker` serving every Sleuth workflow and an App's activities.
#
#   docker build -t sleuth .
#   docker build -t sleuth --build-arg SLEUTH_EXTRAS=opensearch .   # optional extras
#
# The image talks to an external Temporal (TEMPORAL_ADDRESS) and a hosted model (SLEUTH_MODEL,
# e.g. openai:gpt-5.4-mini with OPENAI_API_KEY); see deploy/ and the README's "Scaling out".

FROM python:3.11-slim AS build
ARG SLEUTH_EXTRAS=""
WORKDIR /src
COPY pyproject.toml README.md ./
COPY sleuth ./sleuth
COPY workflows ./workflows
COPY activities ./activities
COPY workers ./workers
# Wheels for Sleuth and all its dependencies, so the final stage needs no compiler or cache.
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".${SLEUTH_EXTRAS:+[$SLEUTH_EXTRAS]}"

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 sleuth \
    && mkdir -p /data/artifacts \
    && chown sleuth:sleuth /data/artifacts
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index /wheels/*.whl && rm -rf /wheels
USER 10001
ENV PYTHONUNBUFFERED=1 \
    SLEUTH_HOME=/home/sleuth/.sleuth \
    SLEUTH_ARTIFACTS=/data/artifacts \
    SLEUTH_LOG_FORMAT=json \
    TEMPORAL_ADDRESS=temporal:7233 \
    SLEUTH_TASK_QUEUE=sleuth
# SIGTERM starts a graceful shutdown: no new tasks, running activities get
# SLEUTH_GRACEFUL_SHUTDOWN_SECONDS to finish. Give the container longer than that to stop.
STOPSIGNAL SIGTERM
ENTRYPOINT ["sleuth"]
CMD ["worker"]
