# shellcheck shell=bash
# Shared by scripts/install and scripts/package (sourced, not run): building the release binary and
# compiling the device-tree overlays. Expects the caller's `set -euo pipefail` and `repo` (the checkout).
: "${repo:?set repo to the checkout before sourcing scripts/lib/common.sh}"

# Prints the path of a freshly built release PRODUCT (default: hark; hark-livekit is the LiveKit backend's helper),
# with the static Swift standard library where the toolchain has one, so the board needs no Swift runtime; or fails
# naming what is missing.
hark_build_release() {
    local product="${1:-hark}"
    if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
        export PATH="/opt/swift/usr/bin:$PATH"
    fi
    if ! command -v swift >/dev/null 2>&1; then
        echo "no Swift toolchain on PATH: build on a machine with one, or pass --binary PATH" >&2
        return 1
    fi
    local static=()
    # The static standard library lives next to the toolchain's swift_static resources.
    if [ -d "$(dirname "$(command -v swift)")/../lib/swift_static" ]; then
        static=(--static-swift-stdlib)
    fi
    (cd "$repo" && swift build -c release --product "$product" "${static[@]}" >&2)
    local bin
    bin="$(cd "$repo" && swift build -c release --show-bin-path)/$product"
    [ -x "$bin" ] || { echo "the build produced no $bin" >&2; return 1; }
    printf '%s\n' "$bin"
}

# Compiles every overlays/*.dts into OUT/NAME.dtbo with dtc (Debian device-tree-compiler).
hark_compile_overlays() {
    local out="$1" dts name
    command -v dtc >/dev/null 2>&1 || {
        echo "dtc not found: apt-get install device-tree-compiler" >&2
        return 1
    }
    mkdir -p "$out"
    for dts in "$repo"/overlays/*.dts; do
        [ -e "$dts" ] || continue
        name="$(basename "$dts" .dts)"
        dtc -@ -q -I dts -O dtb -o "$out/$name.dtbo" "$dts"
    done
}

# The folder of example configurations: --examples DIR if given, else the checkout's config/.
hark_examples_dir() {
    if [ -n "${1:-}" ]; then printf '%s\n' "$1"; else printf '%s\n' "$repo/config"; fi
}

# The architecture an ELF executable is built for (uname -m's name), from its header's e_machine field;
# fails for anything else.
hark_elf_arch() {
    local machine
    machine="$(od -An -tu2 -j18 -N2 "$1" 2>/dev/null | tr -d ' ')" || return 1
    case "$machine" in
    62) echo x86_64 ;;
    183) echo aarch64 ;;
    *) return 1 ;;
    esac
}

# Prints the deb822 apt source of a Hark repository at URL (suite SUITE, component main), verified with the maker's
# key at /usr/share/keyrings/hark-archive-keyring.gpg: /etc/apt/sources.list.d/hark.sources, written by
# scripts/install --apt-source and by a package built with scripts/release --url.
hark_apt_source() {
    local url="$1" suite="${2:-stable}"
    case "$url" in
    https://* | http://*) ;;
    *) echo "the repository's URL must be http(s)://...: $url" >&2; return 1 ;;
    esac
    case "$url$suite" in *[[:space:]]*) echo "no spaces in the repository's URL or suite" >&2; return 1 ;; esac
    cat <<EOT
# Hark's releases (hark-update installs them in update.window, with a health gate and a rollback).
Types: deb
URIs: $url
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/hark-archive-keyring.gpg
EOT
}
