# shellcheck shell=bash
# Shared by scripts/setup, scripts/install and scripts/package (sourced, not run): the wake-word runtime.
# The TensorFlow Lite C library (libtensorflowlite_c.so) and the openWakeWord models come from one pinned
# PyPI wheel, pyopen-wakeword 1.1.0 (Apache-2.0, OHF-Voice), downloaded with pip (never installed), checked
# against its sha256 and unpacked into a folder outside git:
#   DIR/libtensorflowlite_c.so      the library (on a device: /usr/lib/hark/)
#   DIR/wake/*.tflite               melspectrogram, embedding_model and the built-in wake words
#                                   (on a device: /usr/share/hark/wake/)
#   DIR/wake/LICENSE                the wheel's licence (Apache-2.0)
#   DIR/SHA256SUMS                  the wheel's sha256 on its first line (a comment), then every file's
# Nothing here is needed to build Hark: without it every feature but the wake word works.

hark_wake_version="1.1.0"

# The wheel's platform tag and sha256 for an architecture (uname -m or dpkg's name); fails for others.
hark_wake_wheel() {
    case "$1" in
    x86_64 | amd64) echo "manylinux_2_35_x86_64 754347a59de2b3d378a0cbc404a8b41164036e74fa1c185f88056974e4bfb6b4" ;;
    aarch64 | arm64) echo "manylinux_2_35_aarch64 32a865123ebcc270ce6408b675456c3aecd8a6f0ddfe6311680616c9c01f990a" ;;
    *)
        echo "no wake-word runtime for the architecture $1 (pyopen-wakeword has x86_64 and aarch64 wheels)" >&2
        return 1
        ;;
    esac
}

# True when DIR holds the runtime unpacked from the pinned wheel for ARCH, every file unchanged.
hark_wake_verified() {
    local dir="$1" arch="$2" wheel sha
    wheel="$(hark_wake_wheel "$arch" 2>/dev/null)" || return 1
    sha="${wheel#* }"
    [ -f "$dir/SHA256SUMS" ] || return 1
    [ "$(head -n 1 "$dir/SHA256SUMS")" = "# pyopen-wakeword $hark_wake_version $sha" ] || return 1
    (cd "$dir" && grep -v '^#' SHA256SUMS | sha256sum --quiet --strict -c - >/dev/null 2>&1)
}

# Makes DIR hold the runtime for ARCH (default: this machine's): skipped when it already does (checked file
# by file); else the wheel is downloaded with pip into a temporary folder, its sha256 checked, and the
# library and the models extracted. Says what it did on standard error; fails (changing nothing in DIR)
# when the download or the check fails. Runs in a subshell, so its temporary folder goes with it.
hark_wake_fetch() (
    dir="$1"
    arch="${2:-$(uname -m)}"
    wheel="$(hark_wake_wheel "$arch")" || return 1
    tag="${wheel% *}"
    sha="${wheel#* }"
    if hark_wake_verified "$dir" "$arch"; then
        echo "wake-word runtime: already in $dir (pyopen-wakeword $hark_wake_version, checked)" >&2
        return 0
    fi
    command -v python3 >/dev/null 2>&1 || {
        echo "wake-word runtime: python3 not found (apt-get install python3-pip)" >&2
        return 1
    }
    if python3 -m pip --version >/dev/null 2>&1; then
        :
    else
        echo "wake-word runtime: pip not found (apt-get install python3-pip)" >&2
        return 1
    fi
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    echo "wake-word runtime: downloading pyopen-wakeword $hark_wake_version ($tag)" >&2
    if ! python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --platform "$tag" --dest "$tmp" "pyopen-wakeword==$hark_wake_version" >&2; then
        echo "wake-word runtime: the download failed" >&2
        return 1
    fi
    file="$(find "$tmp" -maxdepth 1 -name '*.whl' | head -n 1)"
    [ -n "$file" ] || { echo "wake-word runtime: pip saved no wheel" >&2; return 1; }
    actual="$(sha256sum "$file" | cut -d' ' -f1)"
    if [ "$actual" != "$sha" ]; then
        echo "wake-word runtime: $(basename "$file") has sha256 $actual, expected $sha: refused" >&2
        return 1
    fi
    # A wheel is a zip file; only the library, the models and the licence are taken, by fixed names.
    # (Called as `hark_wake_fetch ... || ...`, `set -e` is off in here: every step checks its own status.)
    python3 - "$file" "$tmp/unpacked" <<'EOF' || { echo "wake-word runtime: cannot unpack $(basename "$file")" >&2; return 1; }
import sys, zipfile, os
wheel, out = sys.argv[1], sys.argv[2]
wanted = {"pyopen_wakeword/lib/libtensorflowlite_c.so": "libtensorflowlite_c.so",
          "pyopen-wakeword-1.1.0.dist-info/licenses/LICENSE": "wake/LICENSE",
          "pyopen_wakeword-1.1.0.dist-info/licenses/LICENSE": "wake/LICENSE"}
for model in ("melspectrogram", "embedding_model", "alexa", "hey_jarvis", "hey_mycroft", "hey_rhasspy", "okay_nabu"):
    wanted[f"pyopen_wakeword/models/{model}.tflite"] = f"wake/{model}.tflite"
found = set()
with zipfile.ZipFile(wheel) as archive:
    for info in archive.infolist():
        target = wanted.get(info.filename)
        if target is None or info.file_size > 64 << 20:
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
    chmod 0644 "$tmp/unpacked/wake/"* "$tmp/unpacked/libtensorflowlite_c.so" || return 1
    (
        cd "$tmp/unpacked" || exit 1
        echo "# pyopen-wakeword $hark_wake_version $sha"
        find . -type f | sed 's|^\./||' | sort | xargs sha256sum
    ) >"$tmp/SHA256SUMS" || return 1
    # The checksum list goes last, so an interrupted copy is never taken for a complete one.
    if ! { mkdir -p "$dir/wake" && rm -f "$dir/SHA256SUMS" "$dir"/wake/*.tflite &&
        cp -f "$tmp/unpacked/libtensorflowlite_c.so" "$dir/" &&
        cp -f "$tmp/unpacked/wake/"* "$dir/wake/" &&
        cp -f "$tmp/SHA256SUMS" "$dir/"; }; then
        echo "wake-word runtime: cannot write $dir" >&2
        return 1
    fi
    echo "wake-word runtime: unpacked into $dir" >&2
)

# The folder that holds the runtime for this machine, fetching it when needed: the checkout's .hark-lib
# when it is already there and checked (scripts/setup puts it there), else a fresh download into WORK.
# Prints the folder; fails with the reason on standard error (the caller then goes on without it).
hark_wake_source() {
    local work="$1" arch="${2:-$(uname -m)}"
    : "${repo:?set repo to the checkout before sourcing scripts/lib/wake-runtime.sh}"
    if hark_wake_verified "$repo/.hark-lib" "$arch"; then
        printf '%s\n' "$repo/.hark-lib"
        return 0
    fi
    hark_wake_fetch "$work" "$arch" || return 1
    printf '%s\n' "$work"
}
