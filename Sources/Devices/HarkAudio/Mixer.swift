import CALSA
import Glibc

/// A sound card's playback volume control (`snd_mixer_*` simple element), for boards whose codec has one
/// (e.g. "Speaker" on a WM8960 HAT, "PCM" on a USB speaker). ``AudioPlayback`` sets it instead of scaling the
/// samples when its configuration names one (``AudioPlayback/Configuration/mixerControl``). One owner; closed
/// in `deinit`.
public final class MixerControl {
    private let mixer: OpaquePointer
    private let element: OpaquePointer
    private let tree: OpaquePointer?
    private let minimum: Int
    private let maximum: Int
    /// The control's decibel range in hundredths of a dB, when it publishes one.
    private let decibels: (minimum: Int, maximum: Int)?
    /// The control's name.
    public let name: String
    /// The control device it is on.
    public let card: String

    /// Opens control `name` (index `index`) on the control device `card` (`default`, `hw:0`,
    /// `hw:CARD=wm8960soundca`), resolved within `configuration` (an alsa-lib configuration text defining
    /// `ctl.<card>`) when given, else through the machine's configuration. Stands for `snd_mixer_open`,
    /// `snd_ctl_open_lconf` / `snd_hctl_open_ctl` / `snd_mixer_attach_hctl` (or `snd_mixer_attach`),
    /// `snd_mixer_selem_register`, `snd_mixer_load`, `snd_mixer_find_selem` and the playback volume and
    /// dB ranges.
    public init(card: String = "default", configuration: String? = nil, name: String, index: Int = 0) throws {
        _ = hark_alsa_set_quiet_errors(1)
        let what = "playback volume control \"\(name)\" on \(card)"
        var handle: OpaquePointer?
        var result = snd_mixer_open(&handle, 0)
        guard result == 0, let handle else { throw AudioError.configure("cannot open a mixer for the \(what)", result) }
        var top: OpaquePointer?
        func fail(_ problem: String, _ code: Int32) -> AudioError {
            snd_mixer_close(handle)
            if let top { snd_config_delete(top) }
            return AudioError.configure("\(what): \(problem)", code)
        }
        if let configuration {
            guard snd_config_top(&top) == 0, let tree = top else { throw fail("snd_config_top failed", 0) }
            var input: OpaquePointer?
            result = configuration.withCString { snd_input_buffer_open(&input, $0, strlen($0)) }
            if result == 0, let input {
                result = snd_config_load(tree, input)
                snd_input_close(input)
            }
            guard result == 0 else { throw fail("cannot parse the configuration", result) }
            var control: OpaquePointer?
            result = snd_ctl_open_lconf(&control, card, 0, tree)
            guard result == 0, let control else { throw fail("cannot open the control device", result) }
            var hctl: OpaquePointer?
            result = snd_hctl_open_ctl(&hctl, control)
            guard result == 0, let hctl else {
                snd_ctl_close(control)
                throw fail("cannot open the control device", result)
            }
            result = snd_mixer_attach_hctl(handle, hctl)
            if result == -ENOMEM { snd_hctl_close(hctl) }  // other failures close it themselves
        } else {
            result = snd_mixer_attach(handle, card)
        }
        guard result == 0 else { throw fail("cannot attach the mixer", result) }
        result = snd_mixer_selem_register(handle, nil, nil)
        guard result == 0 else { throw fail("cannot register simple mixer elements", result) }
        result = snd_mixer_load(handle)
        guard result == 0 else { throw fail("cannot load the mixer", result) }
        var id: OpaquePointer?
        guard snd_mixer_selem_id_malloc(&id) == 0, let id else { throw fail("out of memory", -ENOMEM) }
        defer { snd_mixer_selem_id_free(id) }
        snd_mixer_selem_id_set_index(id, UInt32(max(0, index)))
        snd_mixer_selem_id_set_name(id, name)
        guard let element = snd_mixer_find_selem(handle, id), snd_mixer_selem_has_playback_volume(element) != 0 else {
            throw fail("no such control", 0)
        }
        var low = 0
        var high = 0
        snd_mixer_selem_get_playback_volume_range(element, &low, &high)
        guard high > low else { throw fail("its range is empty", 0) }
        var lowDecibels = 0
        var highDecibels = 0
        if snd_mixer_selem_get_playback_dB_range(element, &lowDecibels, &highDecibels) == 0,
            highDecibels > lowDecibels
        {
            decibels = (lowDecibels, highDecibels)
        } else {
            decibels = nil
        }
        mixer = handle
        tree = top
        self.element = element
        minimum = low
        maximum = high
        self.name = name
        self.card = card
    }

    deinit {
        snd_mixer_close(mixer)
        if let tree { snd_config_delete(tree) }
    }

    /// The control's level as an amplitude, 0 … 1 of its maximum, the scale of ``AudioPlayback/volume``: on a
    /// control with a decibel scale, 0.5 is 6 dB below the maximum (its lowest step is the floor, and 0 the
    /// bottom of the range); on one without, the raw range mapped linearly. Stands for
    /// `snd_mixer_selem_get/set_playback_dB(_all)` or `snd_mixer_selem_get/set_playback_volume(_all)`.
    public var volume: Float {
        get {
            snd_mixer_handle_events(mixer)
            if let decibels {
                var value = 0
                snd_mixer_selem_get_playback_dB(element, SND_MIXER_SCHN_FRONT_LEFT, &value)
                if value <= decibels.minimum { return 0 }
                return Float(pow(10, Double(value - decibels.maximum) / 2000))
            }
            var value = 0
            snd_mixer_selem_get_playback_volume(element, SND_MIXER_SCHN_FRONT_LEFT, &value)
            return Float(value - minimum) / Float(maximum - minimum)
        }
        set { _ = set(newValue) }
    }

    /// Sets the level (see ``volume``); returns the negative errno alsa-lib gave, 0 on success.
    @discardableResult
    public func set(_ volume: Float) -> Int32 {
        let clamped = Double(max(0, min(1, volume.isNaN ? 0 : volume)))
        if let decibels {
            guard clamped > 0 else { return snd_mixer_selem_set_playback_volume_all(element, minimum) }
            let value = decibels.maximum + Int((2000 * log10(clamped)).rounded())
            return snd_mixer_selem_set_playback_dB_all(element, max(decibels.minimum, value), 1)
        }
        let value = minimum + Int((clamped * Double(maximum - minimum)).rounded())
        return snd_mixer_selem_set_playback_volume_all(element, value)
    }
}
