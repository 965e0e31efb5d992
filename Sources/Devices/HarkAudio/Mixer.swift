import CALSA

/// A sound card's playback volume control (`snd_mixer_*` simple element), for boards whose codec has one
/// (e.g. "Speaker" on a WM8960 HAT). The software volume of ``AudioPlayback`` works everywhere; this sets the
/// hardware stage. One owner; closed in `deinit`.
public final class MixerControl {
    private let mixer: OpaquePointer
    private let element: OpaquePointer
    private let minimum: Int
    private let maximum: Int
    /// The control's name.
    public let name: String

    /// Opens control `name` (index `index`) on mixer device `card` (`default`, `hw:0`, `hw:CARD=wm8960soundca`).
    /// Stands for `snd_mixer_open`, `snd_mixer_attach`, `snd_mixer_selem_register`, `snd_mixer_load`,
    /// `snd_mixer_find_selem` and `snd_mixer_selem_get_playback_volume_range`.
    public init(card: String = "default", name: String, index: Int = 0) throws {
        _ = hark_alsa_set_quiet_errors(1)
        var handle: OpaquePointer?
        var result = snd_mixer_open(&handle, 0)
        guard result == 0, let handle else { throw AudioError.configure("cannot open a mixer", result) }
        func fail(_ what: String, _ code: Int32) -> AudioError {
            snd_mixer_close(handle)
            return AudioError.configure(what, code)
        }
        result = snd_mixer_attach(handle, card)
        guard result == 0 else { throw fail("cannot attach the mixer of \(card)", result) }
        result = snd_mixer_selem_register(handle, nil, nil)
        guard result == 0 else { throw fail("cannot register simple mixer elements on \(card)", result) }
        result = snd_mixer_load(handle)
        guard result == 0 else { throw fail("cannot load the mixer of \(card)", result) }
        var id: OpaquePointer?
        guard snd_mixer_selem_id_malloc(&id) == 0, let id else { throw fail("out of memory", -12) }
        defer { snd_mixer_selem_id_free(id) }
        snd_mixer_selem_id_set_index(id, UInt32(index))
        snd_mixer_selem_id_set_name(id, name)
        guard let element = snd_mixer_find_selem(handle, id), snd_mixer_selem_has_playback_volume(element) != 0 else {
            throw fail("\(card) has no playback volume control \"\(name)\"", 0)
        }
        var low = 0
        var high = 0
        snd_mixer_selem_get_playback_volume_range(element, &low, &high)
        guard high > low else { throw fail("control \"\(name)\" on \(card) has an empty range", 0) }
        mixer = handle
        self.element = element
        minimum = low
        maximum = high
        self.name = name
    }

    deinit { snd_mixer_close(mixer) }

    /// The control's level mapped linearly onto 0 … 1 (`snd_mixer_selem_get/set_playback_volume`).
    public var volume: Float {
        get {
            var value = 0
            snd_mixer_selem_get_playback_volume(element, SND_MIXER_SCHN_FRONT_LEFT, &value)
            return Float(value - minimum) / Float(maximum - minimum)
        }
        set {
            let clamped = max(0, min(1, newValue))
            let value = minimum + Int((clamped * Float(maximum - minimum)).rounded())
            snd_mixer_selem_set_playback_volume_all(element, value)
        }
    }
}
