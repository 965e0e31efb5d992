# shellcheck shell=bash
# Shared by scripts/setup, scripts/install, scripts/package and scripts/generate-livekit-protos (sourced, not
# run): the LiveKit runtime. LiveKit's Rust core, liblivekit_ffi.so (WebRTC, Opus and the room signalling
# linked in; it needs only glibc 2.28 or later), comes from one pinned PyPI wheel, livekit 1.2.1 (Apache-2.0,
# LiveKit, Inc.), downloaded with pip (never installed), checked against its sha256 and unpacked into the
# same folder as the wake-word runtime, outside git:
#   DIR/liblivekit_ffi.so           the library (on a device: /usr/lib/hark/)
#   DIR/livekit/LICENSE.md          the wheel's notices: LiveKit's and those of the libraries linked into it
#                                   (WebRTC, Opus, BoringSSL, ...; on a device: /usr/share/hark/livekit/)
#   DIR/livekit/SHA256SUMS          the wheel's sha256 on its first line (a comment), then every file's,
#                                   by its path inside DIR
# Nothing here is needed to build Hark: the binary opens the library only when the LiveKit backend is used,
# and without it every other backend works.

hark_livekit_version="1.2.1"

# The wheel's platform tag and sha256 for an architecture (uname -m or dpkg's name); fails for others.
hark_livekit_wheel() {
    case "$1" in
    x86_64 | amd64) echo "manylinux_2_28_x86_64 c9a0269cc23a889e20f716405a59fbae375a0248ea3d2d043da103cfb0b71711" ;;
    aarch64 | arm64) echo "manylinux_2_28_aarch64 8a3dd36574d5df73dba5baa8fbed97401e25b51ab38822fe2c4769fef994f09d" ;;
    *)
        echo "no LiveKit runtime for the architecture $1 (the livekit wheel has x86_64 and aarch64 builds for Linux)" >&2
        return 1
        ;;
    esac
}

# True when DIR holds the runtime unpacked from the pinned wheel for ARCH, every file unchanged.
hark_livekit_verified() {
    local dir="$1" arch="$2" wheel sha
    wheel="$(hark_livekit_wheel "$arch" 2>/dev/null)" || return 1
    sha="${wheel#* }"
    [ -f "$dir/livekit/SHA256SUMS" ] || return 1
    [ "$(head -n 1 "$dir/livekit/SHA256SUMS")" = "# livekit $hark_livekit_version $sha" ] || return 1
    (cd "$dir" && grep -v '^#' livekit/SHA256SUMS | sha256sum --quiet --strict -c - >/dev/null 2>&1)
}

# Downloads the pinned wheel for ARCH into the folder OUT with pip and checks its sha256; prints the wheel's
# path. Fails, saying why on standard error, when pip is missing, the download fails or the sha256 differs
# (the refused file is removed).
hark_livekit_download() {
    local out="$1" arch="${2:-$(uname -m)}" wheel tag sha file actual
    wheel="$(hark_livekit_wheel "$arch")" || return 1
    tag="${wheel% *}"
    sha="${wheel#* }"
    command -v python3 >/dev/null 2>&1 || {
        echo "LiveKit runtime: python3 not found (apt-get install python3-pip)" >&2
        return 1
    }
    python3 -m pip --version >/dev/null 2>&1 || {
        echo "LiveKit runtime: pip not found (apt-get install python3-pip)" >&2
        return 1
    }
    mkdir -p "$out" || return 1
    echo "LiveKit runtime: downloading livekit $hark_livekit_version ($tag)" >&2
    if ! python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --platform "$tag" --dest "$out" "livekit==$hark_livekit_version" >&2; then
        echo "LiveKit runtime: the download failed" >&2
        return 1
    fi
    file="$out/livekit-$hark_livekit_version-py3-none-$tag.whl"
    [ -f "$file" ] || { echo "LiveKit runtime: pip saved no $(basename "$file")" >&2; return 1; }
    actual="$(sha256sum "$file" | cut -d' ' -f1)"
    if [ "$actual" != "$sha" ]; then
        rm -f "$file"
        echo "LiveKit runtime: $(basename "$file") has sha256 $actual, expected $sha: refused" >&2
        return 1
    fi
    printf '%s\n' "$file"
}

# Makes DIR hold the runtime for ARCH (default: this machine's): skipped when it already does (checked file
# by file); else the wheel is downloaded with pip into a temporary folder, its sha256 checked, and the
# library and its notices extracted. Says what it did on standard error; fails (changing nothing in DIR)
# when the download or the check fails. Runs in a subshell, so its temporary folder goes with it.
hark_livekit_fetch() (
    dir="$1"
    arch="${2:-$(uname -m)}"
    wheel="$(hark_livekit_wheel "$arch")" || return 1
    sha="${wheel#* }"
    if hark_livekit_verified "$dir" "$arch"; then
        echo "LiveKit runtime: already in $dir (livekit $hark_livekit_version, checked)" >&2
        return 0
    fi
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    file="$(hark_livekit_download "$tmp/wheel" "$arch")" || return 1
    # A wheel is a zip file; only the library and the notices are taken, by fixed names, each bounded in size.
    # (Called as `hark_livekit_fetch ... || ...`, `set -e` is off in here: every step checks its own status.)
    python3 - "$file" "$tmp/unpacked" <<'EOF' || { echo "LiveKit runtime: cannot unpack $(basename "$file")" >&2; return 1; }
import sys, zipfile, os
wheel, out = sys.argv[1], sys.argv[2]
wanted = {"livekit/rtc/resources/liblivekit_ffi.so": "liblivekit_ffi.so",
          "livekit/rtc/resources/LICENSE.md": "livekit/LICENSE.md"}
found = set()
with zipfile.ZipFile(wheel) as archive:
    for info in archive.infolist():
        target = wanted.get(info.filename)
        if target is None or info.file_size > 128 << 20:
            continue
        path = os.path.join(out, target)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with archive.open(info) as source, open(path, "wb") as sink:
            sink.write(source.read())
        found.add(target)
missing = sorted(set(wanted.values()) - found)
if missing:
    sys.exit("the wheel lacks " + ", ".join(missing))
EOF
    chmod 0644 "$tmp/unpacked/liblivekit_ffi.so" "$tmp/unpacked/livekit/LICENSE.md" || return 1
    (
        cd "$tmp/unpacked" || exit 1
        echo "# livekit $hark_livekit_version $sha"
        find . -type f | sed 's|^\./||' | sort | xargs sha256sum
    ) >"$tmp/SHA256SUMS" || return 1
    # The checksum list goes last, so an interrupted copy is never taken for a complete one.
    if ! { mkdir -p "$dir/livekit" && rm -f "$dir/livekit/SHA256SUMS" &&
        cp -f "$tmp/unpacked/liblivekit_ffi.so" "$dir/" &&
        cp -f "$tmp/unpacked/livekit/LICENSE.md" "$dir/livekit/" &&
        cp -f "$tmp/SHA256SUMS" "$dir/livekit/"; }; then
        echo "LiveKit runtime: cannot write $dir" >&2
        return 1
    fi
    echo "LiveKit runtime: unpacked into $dir" >&2
)

# The folder that holds the runtime for this machine, fetching it when needed: the checkout's .hark-lib
# when it is already there and checked (scripts/setup puts it there), else a fresh download into WORK.
# Prints the folder; fails with the reason on standard error (the caller then goes on without it).
hark_livekit_source() {
    local work="$1" arch="${2:-$(uname -m)}"
    : "${repo:?set repo to the checkout before sourcing scripts/lib/livekit-runtime.sh}"
    if hark_livekit_verified "$repo/.hark-lib" "$arch"; then
        printf '%s\n' "$repo/.hark-lib"
        return 0
    fi
    hark_livekit_fetch "$work" "$arch" || return 1
    printf '%s\n' "$work"
}
