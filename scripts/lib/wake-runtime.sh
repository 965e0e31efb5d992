# shellcheck shell=bash
# Shared by scripts/setup, scripts/install and scripts/package (sourced, not run): the wake-word runtime.
# The TensorFlow Lite C library (libtensorflowlite_c.so) and the models of both families come from two pinned
# PyPI wheels by OHF-Voice, downloaded with pip (never installed), checked against their sha256 and unpacked into
# a folder outside git:
#   - pyopen-wakeword 1.1.0 (the wheel Apache-2.0; openWakeWord's pre-trained word models CC BY-NC-SA 4.0,
#     non-commercial): the library, melspectrogram, embedding_model and the openWakeWord words;
#   - pymicro-wakeword 2.5.0 (Apache-2.0, the models included): the microWakeWord words okay_nabu, hey_jarvis,
#     alexa and hey_mycroft with their JSON manifests, and the same library (byte for byte: checked).
# No wheel on PyPI carries microWakeWord's "stop" model (pymicro-wakeword 1.0.0 to 2.5.0 carry these four); a
# maker gives their own by path (wake.stop_word).
#   DIR/libtensorflowlite_c.so      the library (on a device: /usr/lib/hark/)
#   DIR/wake/*.tflite               openWakeWord: melspectrogram, embedding_model and the built-in wake words
#                                   (on a device: /usr/share/hark/wake/)
#   DIR/wake/LICENSE                pyopen-wakeword's licence (Apache-2.0)
#   DIR/wake/micro/*.tflite, *.json microWakeWord: the built-in wake words and their manifests
#                                   (on a device: /usr/share/hark/wake/micro/)
#   DIR/wake/micro/LICENSE          pymicro-wakeword's licence (Apache-2.0)
#   DIR/SHA256SUMS                  the wheels' sha256 on its first two lines (comments), then every file's
# Nothing here is needed to build Hark: without it every feature but the wake word works.

hark_wake_version="1.1.0"
hark_wake_micro_version="2.5.0"

# The openWakeWord wheel's platform tag and sha256 for an architecture (uname -m or dpkg's name); fails for others.
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

# The microWakeWord wheel's platform tag and sha256 for an architecture; fails for others.
hark_wake_micro_wheel() {
    case "$1" in
    x86_64 | amd64) echo "manylinux_2_35_x86_64 3869f536402b1254e3be3549d3a462ecd6ed21ce2c3e77ec8eb501c3c700417c" ;;
    aarch64 | arm64) echo "manylinux_2_35_aarch64 6c75b77c936efd19b8c35a094cb7e3fdbd4ebcd0f63635a0851ce591990829f2" ;;
    *)
        echo "no microWakeWord models for the architecture $1 (pymicro-wakeword has x86_64 and aarch64 wheels)" >&2
        return 1
        ;;
    esac
}

# The two header lines of DIR/SHA256SUMS for ARCH: the wheels and their sha256.
hark_wake_header() {
    local open micro
    open="$(hark_wake_wheel "$1" 2>/dev/null)" || return 1
    micro="$(hark_wake_micro_wheel "$1" 2>/dev/null)" || return 1
    printf '# pyopen-wakeword %s %s\n# pymicro-wakeword %s %s\n' "$hark_wake_version" "${open#* }" \
        "$hark_wake_micro_version" "${micro#* }"
}

# True when DIR holds the runtime unpacked from the pinned wheels for ARCH, every file unchanged.
hark_wake_verified() {
    local dir="$1" arch="$2" header
    header="$(hark_wake_header "$arch")" || return 1
    [ -f "$dir/SHA256SUMS" ] || return 1
    [ "$(head -n 2 "$dir/SHA256SUMS")" = "$header" ] || return 1
    (cd "$dir" && grep -v '^#' SHA256SUMS | sha256sum --quiet --strict -c - >/dev/null 2>&1)
}

# Makes DIR hold the runtime for ARCH (default: this machine's): skipped when it already does (checked file
# by file); else both wheels are downloaded with pip into a temporary folder, their sha256 checked, and the
# library, the models and the manifests extracted. Says what it did on standard error; fails (changing nothing in
# DIR) when a download or a check fails. Runs in a subshell, so its temporary folder goes with it.
hark_wake_fetch() (
    dir="$1"
    arch="${2:-$(uname -m)}"
    [ -n "$dir" ] || { echo "wake-word runtime: no folder given" >&2; return 1; }
    open="$(hark_wake_wheel "$arch")" || return 1
    micro="$(hark_wake_micro_wheel "$arch")" || return 1
    if hark_wake_verified "$dir" "$arch"; then
        echo "wake-word runtime: already in $dir (pyopen-wakeword $hark_wake_version," \
            "pymicro-wakeword $hark_wake_micro_version, checked)" >&2
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
    # Each wheel downloaded alone into a folder of its own, and its sha256 checked.
    for pin in "pyopen-wakeword==$hark_wake_version $open open" \
        "pymicro-wakeword==$hark_wake_micro_version $micro micro"; do
        read -r requirement tag sha name <<<"$pin"
        echo "wake-word runtime: downloading $requirement ($tag)" >&2
        mkdir -p "$tmp/$name" || return 1
        if ! python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
            --platform "$tag" --dest "$tmp/$name" "$requirement" >&2; then
            echo "wake-word runtime: the download of $requirement failed" >&2
            return 1
        fi
        file="$(find "$tmp/$name" -maxdepth 1 -name '*.whl' | head -n 1)"
        [ -n "$file" ] || { echo "wake-word runtime: pip saved no wheel for $requirement" >&2; return 1; }
        actual="$(sha256sum "$file" | cut -d' ' -f1)"
        if [ "$actual" != "$sha" ]; then
            echo "wake-word runtime: $(basename "$file") has sha256 $actual, expected $sha: refused" >&2
            return 1
        fi
        mv "$file" "$tmp/$name.whl" || return 1
    done
    # A wheel is a zip file; only the library, the models, the manifests and the licences are taken, by fixed
    # names. (Called as `hark_wake_fetch ... || ...`, `set -e` is off in here: every step checks its own status.)
    python3 - "$tmp/open.whl" "$tmp/micro.whl" "$tmp/unpacked" "$hark_wake_version" "$hark_wake_micro_version" \
        <<'PYTHON' || { echo "wake-word runtime: cannot unpack the wheels" >&2; return 1; }
import os, sys, zipfile
open_wheel, micro_wheel, out, open_version, micro_version = sys.argv[1:6]
wanted = {
    open_wheel: {"pyopen_wakeword/lib/libtensorflowlite_c.so": "libtensorflowlite_c.so",
                 f"pyopen_wakeword-{open_version}.dist-info/licenses/LICENSE": "wake/LICENSE"},
    micro_wheel: {"pymicro_wakeword/lib/libtensorflowlite_c.so": "micro-libtensorflowlite_c.so",
                  f"pymicro_wakeword-{micro_version}.dist-info/licenses/LICENSE": "wake/micro/LICENSE"},
}
for model in ("melspectrogram", "embedding_model", "alexa", "hey_jarvis", "hey_mycroft", "hey_rhasspy", "okay_nabu"):
    wanted[open_wheel][f"pyopen_wakeword/models/{model}.tflite"] = f"wake/{model}.tflite"
for model in ("okay_nabu", "hey_jarvis", "alexa", "hey_mycroft"):
    for extension in ("tflite", "json"):
        wanted[micro_wheel][f"pymicro_wakeword/models/{model}.{extension}"] = f"wake/micro/{model}.{extension}"
for wheel, names in wanted.items():
    found = set()
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            target = names.get(info.filename)
            if target is None or info.file_size > 64 << 20:
                continue
            path = os.path.join(out, target)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with archive.open(info) as source, open(path, "wb") as sink:
                sink.write(source.read())
            found.add(target)
    missing = sorted(set(names.values()) - found)
    if missing:
        sys.exit(os.path.basename(wheel) + " lacks " + ", ".join(missing))
# One library for both families: the two wheels carry the same build.
with open(os.path.join(out, "libtensorflowlite_c.so"), "rb") as a:
    with open(os.path.join(out, "micro-libtensorflowlite_c.so"), "rb") as b:
        if a.read() != b.read():
            sys.exit("the two wheels carry different TensorFlow Lite libraries")
os.remove(os.path.join(out, "micro-libtensorflowlite_c.so"))
PYTHON
    chmod 0644 "$tmp/unpacked/wake/"*.tflite "$tmp/unpacked/wake/LICENSE" "$tmp/unpacked/wake/micro/"* \
        "$tmp/unpacked/libtensorflowlite_c.so" || return 1
    (
        cd "$tmp/unpacked" || exit 1
        hark_wake_header "$arch"
        find . -type f | sed 's|^\./||' | sort | xargs sha256sum
    ) >"$tmp/SHA256SUMS" || return 1
    # The checksum list goes last, so an interrupted copy is never taken for a complete one.
    if ! { mkdir -p "$dir/wake/micro" && rm -f "$dir/SHA256SUMS" "$dir"/wake/*.tflite "$dir"/wake/micro/* &&
        cp -f "$tmp/unpacked/libtensorflowlite_c.so" "$dir/" &&
        cp -f "$tmp/unpacked/wake/"*.tflite "$tmp/unpacked/wake/LICENSE" "$dir/wake/" &&
        cp -f "$tmp/unpacked/wake/micro/"* "$dir/wake/micro/" &&
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
