#!/usr/bin/env bash
# Regenerates every screenshot in this folder from the current code: each example is built in
# release, run headless under Xvfb with Mesa's software Vulkan (lavapipe) for a fixed number of
# frames (each advances the simulation clock by exactly 1/60 s, so a picture shows the same
# moment however slowly the machine renders), and saves its picture here.
#
# Usage: bash assets/screenshots/regenerate.sh [example ...]   (default: every pictured example)
# PROFILE=debug uses debug builds (slower frames, same pictures: the clock is fixed per frame).
# Needs: xvfb, xauth, mesa-vulkan-drivers (installed when missing; run as root or with sudo).
set -euo pipefail
cd "$(dirname "$0")/../.."

# example -> frames before the picture (the moment the README's caption describes).
declare -A frames=(
    [showcase]=115
    [jelly_drop]=200
    [bunny]=300
    [pile]=600
    [character]=200
    [rollback]=75
    [cloth]=300
)

if [ "$#" -gt 0 ]; then
    names=("$@")
else
    names=(showcase jelly_drop bunny pile character rollback cloth)
fi

if ! command -v xvfb-run >/dev/null || ! ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq xvfb xauth mesa-vulkan-drivers >/dev/null
fi

target_dir="${CARGO_TARGET_DIR:-target}"
profile="${PROFILE:-release}"
if [ "$profile" = release ]; then build_flag=--release; else build_flag=; fi
runtime_dir="$(mktemp -d)"
chmod 700 "$runtime_dir"
for name in "${names[@]}"; do
    n="${frames[$name]:-}"
    if [ -z "$n" ]; then
        echo "no frame count for '$name' in $0" >&2
        exit 1
    fi
    cargo build $build_flag --features avian --example "$name"
    echo "== $name: $n frames"
    # CARGO_MANIFEST_DIR lets the example find its assets when run outside `cargo run`.
    CARGO_MANIFEST_DIR="$PWD" XDG_RUNTIME_DIR="$runtime_dir" WGPU_BACKEND=vulkan \
        DEFORMABLE_FRAMES="$n" DEFORMABLE_SCREENSHOT="$PWD/assets/screenshots/$name.png" \
        xvfb-run -a -s "-screen 0 1280x720x24" "$target_dir/$profile/examples/$name"
done
