#!/usr/bin/env bash
# Builds and runs voxlane's images with podman or docker; `make image` and `make image-cuda` call it.
#   container/image.sh cpu           build voxlane:latest and voxlane:VERSION
#   container/image.sh cuda          build voxlane:cuda (cuBLAS 12 for CTranslate2, --device auto)
#   container/image.sh ray           build voxlane:ray (Ray Serve, for KubeRay: deploy/kubernetes/rayservice.yaml)
#   container/image.sh run ARGS...   the engine's `run` with this host's flags (the tests use it)
#   container/image.sh engine        print the engine this script uses
# Settings, from the environment (docs/containers.md):
#   CONTAINER_ENGINE  podman or docker (default: podman if installed, else docker)
#   BASE              the base image (default python:3.12-slim-bookworm). If it can't be pulled (no registry
#                     reachable), the same Debian release is built from Debian's packages with mmdebstrap and
#                     imported as localhost/voxlane-base:bookworm, and that is used instead.
#   PODMAN_FLAGS      podman's flags for build and run (default: the facts of the hosts we test on, below)
#   IMAGE             the name to tag (default voxlane)
set -euo pipefail
cd "$(dirname "$0")/.."

kind=${1:-cpu}
engine=${CONTAINER_ENGINE:-$(command -v podman >/dev/null 2>&1 && echo podman || echo docker)}
base=${BASE:-python:3.12-slim-bookworm}
image=${IMAGE:-voxlane}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)

# Where podman runs inside a sandbox like our CI's: crun can't use hybrid cgroups (runc can), podman's default
# ulimits are refused, and pip inside the build needs the host's CA certificates and network. The docker
# format keeps the HEALTHCHECK (OCI has none).
default_podman_flags="--runtime runc --ulimit nofile=1024:1024 --ulimit nproc=4096:4096"
podman_flags=${PODMAN_FLAGS-$default_podman_flags}
build_flags=()
if [ "$engine" = podman ]; then
    read -r -a build_flags <<<"$podman_flags"
    build_flags+=(--network=host --format docker)
    [ -d /etc/ssl/certs ] && build_flags+=(-v /etc/ssl/certs:/etc/ssl/certs:ro)
fi

case "$kind" in
    engine) echo "$engine"; exit 0 ;;
    run)
        shift
        run_flags=()
        [ "$engine" = podman ] && read -r -a run_flags <<<"$podman_flags"
        exec "$engine" run "${run_flags[@]}" "$@" ;;
esac

have_image() { "$engine" image exists "$1" 2>/dev/null || "$engine" image inspect "$1" >/dev/null 2>&1; }

if ! have_image "$base" && ! timeout 120 "$engine" pull "$base" >/dev/null 2>&1; then
    local_base=localhost/voxlane-base:bookworm
    if ! have_image "$local_base"; then
        echo "image.sh: $base can't be pulled; building $local_base from Debian's packages (mmdebstrap)" >&2
        command -v mmdebstrap >/dev/null || { echo "image.sh: install mmdebstrap (apt-get install mmdebstrap)" >&2; exit 1; }
        tar=$(mktemp --suffix=.tar)
        trap 'rm -f "$tar"' EXIT
        mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates,netbase,tzdata \
            --dpkgopt='path-exclude=/usr/share/man/*' \
            --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
            --dpkgopt='path-include=/usr/share/doc/*/copyright' bookworm "$tar"
        "$engine" import --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' "$tar" "$local_base" >/dev/null
    fi
    base=$local_base
fi

case "$kind" in
    cpu) tags=(-t "$image:latest" -t "$image:$version"); extras=""; device=cpu; packages="" ;;
    cuda) tags=(-t "$image:cuda"); extras="[cuda]"; device=auto; packages="" ;;
    ray) tags=(-t "$image:ray"); extras="[ray]"; device=cpu; packages="wget" ;;
    *) echo "usage: container/image.sh cpu|cuda|ray|run ARGS...|engine" >&2; exit 2 ;;
esac
echo "image.sh: $engine build ($kind) on $base" >&2
"$engine" build "${build_flags[@]}" --build-arg "BASE=$base" --build-arg "EXTRAS=$extras" \
    --build-arg "DEVICE=$device" --build-arg "PACKAGES=$packages" --build-arg "VERSION=$version" "${tags[@]}" .
