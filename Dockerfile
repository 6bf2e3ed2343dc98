# voxlane's container image: `make image` (CPU) and `make image-cuda` build it; docs/containers.md.
# The build stage makes a virtualenv with voxlane, its bundled models and the speaker encoders' weights; the
# runtime stage copies only that virtualenv onto the same base, so no compiler or pip cache ships.
ARG BASE=python:3.12-slim-bookworm

FROM ${BASE} AS build
# "" for the CPU image, "[cuda]" for cuBLAS 12 (the CUDA image), "[ray]" for Ray Serve (KubeRay).
ARG EXTRAS=""
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
RUN python3 -m venv /opt/voxlane
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY voxlane ./voxlane
RUN /opt/voxlane/bin/pip install --quiet ".${EXTRAS}" \
    && /opt/voxlane/bin/python -m voxlane.speakers.weights \
    && /opt/voxlane/bin/pip uninstall --quiet --yes pip \
    && find /opt/voxlane -name __pycache__ -prune -exec rm -rf {} +

FROM ${BASE}
ARG VERSION=0.0.0
ARG DEVICE=cpu
# Debian packages the runtime needs beyond the base: KubeRay's probes call wget in the Ray image.
ARG PACKAGES=""
LABEL org.opencontainers.image.title="voxlane" \
      org.opencontainers.image.description="OpenAI-compatible speech-to-text and text-to-speech server" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/voxlane/voxlane" \
      org.opencontainers.image.licenses="MIT"
# A fixed non-root uid, so that a volume's owner is the same in every container made from this image.
RUN if [ -n "$PACKAGES" ]; then \
        apt-get update && apt-get install -y --no-install-recommends $PACKAGES && rm -rf /var/lib/apt/lists/*; \
    fi \
    && groupadd --system --gid 10001 voxlane \
    && useradd --system --uid 10001 --gid voxlane --home-dir /data --no-create-home --shell /usr/sbin/nologin voxlane \
    && mkdir -p /data \
    && chown voxlane:voxlane /data
COPY --from=build /opt/voxlane /opt/voxlane
# Every setting is a VOXLANE_* variable (voxlane serve --help); these are the image's defaults.
ENV PATH=/opt/voxlane/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    VOXLANE_HOST=0.0.0.0 \
    VOXLANE_PORT=8000 \
    VOXLANE_DEVICE=${DEVICE} \
    VOXLANE_DATA_DIR=/data \
    HF_HOME=/data/hf
VOLUME /data
WORKDIR /data
USER voxlane
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('VOXLANE_PORT', '8000'), timeout=2)"]
# Exec form: the server is PID 1 and gets SIGTERM itself; it drains (--drain-timeout-s) and exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["voxlane", "serve"]
