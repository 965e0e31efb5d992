import Glibc
import HarkCore
import HarkPlatform

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Why the wake-word detector cannot run.
public struct WakeError: Error, CustomStringConvertible, Sendable, Equatable {
    private enum Code: Sendable, Equatable {
        case runtimeMissing, library, model, word
    }

    private let code: Code
    public let description: String
    /// The model file a model error is about (nil for other errors).
    public let model: String?

    private init(_ code: Code, _ description: String, model: String? = nil) {
        self.code = code
        self.description = description
        self.model = model
    }

    /// True when the TensorFlow Lite library or the models are not on this machine (install them; see
    /// ``WakeRuntime/locate(environment:executable:)``).
    public var isRuntimeMissing: Bool { code == .runtimeMissing }
    /// True when a wake word given (by name or path, with its threshold) is not one: a usage or configuration
    /// mistake, not a missing or damaged runtime.
    public var isWordError: Bool { code == .word }

    static func runtimeMissing(_ what: String) -> WakeError { WakeError(.runtimeMissing, what) }
    static func library(_ what: String) -> WakeError { WakeError(.library, what) }
    static func model(_ path: String, _ reason: String) -> WakeError {
        WakeError(.model, "\(path): \(reason)", model: path)
    }
    static func word(_ what: String) -> WakeError { WakeError(.word, what) }
}

/// The two families of wake-word models Hark runs, on the same TensorFlow Lite library.
public enum WakeWordFamily: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// microWakeWord (the models of ESPHome and Home Assistant Voice): one small streaming model per word, int8 in and
    /// uint8 out, over TensorFlow Lite Micro's audio front end (``MicroFrontEnd``), with a JSON manifest giving its
    /// probability cutoff and the sliding window its probabilities are averaged over.
    case micro = "microWakeWord"
    /// openWakeWord: shared melspectrogram and speech-embedding models, and one small float model per word on the
    /// embeddings.
    case open = "openWakeWord"

    public var description: String { rawValue }
}

/// A wake-word model's licence, as far as Hark knows it: a maker shipping a product must know whether they may.
public struct WakeModelLicence: Sendable, Hashable, CustomStringConvertible {
    /// Its name (`Apache-2.0`, `CC BY-NC-SA 4.0`), or what is known of it.
    public var name: String
    /// Whether it allows commercial use: nil when Hark cannot know (a model given by its path).
    public var commercialUse: Bool?

    /// microWakeWord's models, weights and manifests included (the ESPHome collection's NOTICE;
    /// pymicro-wakeword's wheel is Apache-2.0 as a whole).
    public static let apache2 = WakeModelLicence(name: "Apache-2.0", commercialUse: true)
    /// openWakeWord's pre-trained wake-word models: non-commercial, share-alike ("due to the inclusion of datasets
    /// with unknown or restrictive licensing", their model card).
    public static let nonCommercial = WakeModelLicence(name: "CC BY-NC-SA 4.0 (non-commercial)", commercialUse: false)
    /// A model given by its path: its licence is whatever its maker gave it.
    public static let maker = WakeModelLicence(name: "its maker's (a model given by its path)", commercialUse: nil)

    public var description: String { name }
}

/// A wake word that comes with Hark's runtime: its name in `wake.words` and `hark wake --word`, its family, its
/// model file in that family's folder and its licence.
public struct BuiltInWakeWord: Sendable, Hashable {
    /// The name configurations use.
    public var name: String
    /// Its model family.
    public var family: WakeWordFamily
    /// The model's file name (without `.tflite`) in the family's folder (``WakeRuntime/models`` or
    /// ``WakeRuntime/microModels``, where a microWakeWord model's manifest `FILE.json` is too).
    public var file: String
    /// What a person says.
    public var phrase: String

    /// Its licence: Apache-2.0 for microWakeWord's, non-commercial for openWakeWord's.
    public var licence: WakeModelLicence { family == .micro ? .apache2 : .nonCommercial }
}

/// Where the wake word's runtime is on this machine: the TensorFlow Lite C library (`libtensorflowlite_c.so`), the
/// folder of openWakeWord models (`melspectrogram.tflite`, `embedding_model.tflite` and its built-in words) and the
/// folder of microWakeWord models (`micro/`: each word's `.tflite` and `.json` manifest). They come from two pinned
/// wheels, pyopen-wakeword and pymicro-wakeword (the same library in both), that `scripts/setup` unpacks into the
/// checkout's `.hark-lib/` and the package installs as `/usr/lib/hark/` and `/usr/share/hark/wake/`.
public struct WakeRuntime: Sendable, Hashable {
    /// The library's file name.
    public static let libraryName = "libtensorflowlite_c.so"
    /// The environment variable naming the folder that holds the library (and, in `wake/`, the models).
    public static let libraryVariable = NativeLibraryFolders.variable
    /// The environment variable naming the folder of models, when it is not the library folder's `wake/`.
    public static let modelsVariable = "HARK_MODELS_DIR"
    /// The development folder `scripts/setup` fills, looked for above the executable and the working folder.
    public static let developmentFolder = NativeLibraryFolders.developmentFolder
    /// The library folder of an installed Hark.
    public static let installedLibraryFolder = NativeLibraryFolders.installedFolder
    /// The model folder of an installed Hark.
    public static let installedModelFolder = "/usr/share/hark/wake"
    /// The microWakeWord models' folder inside the model folder.
    public static let microFolder = "micro"

    /// The wake words that come with the runtime: microWakeWord's four (Apache-2.0, from pymicro-wakeword 2.5.0), then
    /// openWakeWord's five (non-commercial, from pyopen-wakeword 1.1.0), whose names begin with `oww_`.
    public static let builtIns: [BuiltInWakeWord] = [
        BuiltInWakeWord(name: "okay_nabu", family: .micro, file: "okay_nabu", phrase: "okay nabu"),
        BuiltInWakeWord(name: "hey_jarvis", family: .micro, file: "hey_jarvis", phrase: "hey jarvis"),
        BuiltInWakeWord(name: "alexa", family: .micro, file: "alexa", phrase: "alexa"),
        BuiltInWakeWord(name: "hey_mycroft", family: .micro, file: "hey_mycroft", phrase: "hey mycroft"),
        BuiltInWakeWord(name: "oww_hey_jarvis", family: .open, file: "hey_jarvis", phrase: "hey jarvis"),
        BuiltInWakeWord(name: "oww_okay_nabu", family: .open, file: "okay_nabu", phrase: "okay nabu"),
        BuiltInWakeWord(name: "oww_alexa", family: .open, file: "alexa", phrase: "alexa"),
        BuiltInWakeWord(name: "oww_hey_mycroft", family: .open, file: "hey_mycroft", phrase: "hey mycroft"),
        BuiltInWakeWord(name: "oww_hey_rhasspy", family: .open, file: "hey_rhasspy", phrase: "hey rhasspy"),
    ]
    /// The built-in words' names, microWakeWord's first.
    public static let builtInWords = builtIns.map(\.name)
    /// The wake word when none is configured: microWakeWord's `okay_nabu`, permissively licensed (Apache-2.0), trained
    /// on seven languages, the one Home Assistant Voice listens for.
    public static let defaultWord = "okay_nabu"

    /// The library file.
    public var library: String
    /// The folder of openWakeWord models.
    public var models: String
    /// The folder of microWakeWord models and their manifests.
    public var microModels: String

    /// A runtime at given paths (the microWakeWord models by default in `models`' `micro/`).
    public init(library: String, models: String, microModels: String? = nil) {
        self.library = library
        self.models = models
        self.microModels = microModels ?? join(models, Self.microFolder)
    }

    /// Finds the runtime, in this order: the folder `HARK_LIB_DIR` names (when set, only there); a
    /// `.hark-lib` folder above `executable` (default: this process's, from `/proc/self/exe`) or above the
    /// working folder (a development checkout); `/usr/lib/hark`. The models are in `HARK_MODELS_DIR` when set,
    /// else in the library folder's `wake/`, else in `/usr/share/hark/wake`. Throws an error that names what
    /// to install when the library or the models (of both families) are missing.
    public static func locate(environment: [String: String], executable: String? = nil) throws(WakeError) -> WakeRuntime
    {
        let candidates = NativeLibraryFolders.candidates(
            for: libraryName,
            environment: environment,
            executable: executable
        )
        guard let folder = candidates.first(where: { isReadable(join($0, libraryName)) }) else {
            throw WakeError.runtimeMissing(
                """
                the wake word's TensorFlow Lite library (\(libraryName)) is not installed: looked in \
                \(candidates.joined(separator: ", ")). Install the hark package (it puts it in \
                \(installedLibraryFolder)), or run scripts/setup in a checkout (it puts it in \
                \(developmentFolder)/), or set \(libraryVariable) to a folder that holds it
                """
            )
        }
        let models: String
        if let named = environment[modelsVariable], !named.isEmpty {
            models = named
        } else if Self(library: "", models: join(folder, "wake")).hasModels {
            models = join(folder, "wake")
        } else {
            models = installedModelFolder
        }
        let runtime = WakeRuntime(library: join(folder, libraryName), models: models)
        guard runtime.hasModels else {
            throw WakeError.runtimeMissing(
                """
                the wake word's models are not installed: no \(runtime.melspectrogram) and no \
                \(join(runtime.microModels, defaultWord + ".json")). Install the hark package \
                (\(installedModelFolder)), or run scripts/setup in a checkout, or set \(modelsVariable)
                """
            )
        }
        return runtime
    }

    /// True when the models of at least one family are there (openWakeWord's shared models, or a microWakeWord
    /// manifest of a built-in word).
    var hasModels: Bool {
        hasOpenWakeWord || Self.builtIns.contains { $0.family == .micro && isReadable(microManifest($0.file)) }
    }

    /// True when openWakeWord's shared models (melspectrogram and embedding) are there.
    var hasOpenWakeWord: Bool { isReadable(melspectrogram) && isReadable(embedding) }

    /// The built-in word of that name, or nil.
    public static func builtIn(_ name: String) -> BuiltInWakeWord? { builtIns.first { $0.name == name } }

    /// The wake word a name or a path stands for: one of ``builtInWords``, or the path of a model: a microWakeWord
    /// model's `.json` manifest (the model it names beside it) or its `.tflite` with the manifest beside it (same
    /// name, `.json`), or an openWakeWord `.tflite` (with no manifest, or one of `"type": "openWakeWord"`). A path is
    /// anything with a `/` or ending in `.tflite` or `.json`; its name is the file's, without the extension. Either
    /// may end in `:THRESHOLD`, the word's own threshold (`alexa:0.7`; see ``splitThreshold(_:)``), which for a
    /// microWakeWord model replaces its manifest's probability cutoff.
    public func word(_ text: String) throws(WakeError) -> WakeWord {
        let (nameOrPath, threshold) = try Self.splitThreshold(text)
        if Self.isModelPath(nameOrPath) { return try modelWord(nameOrPath, threshold: threshold) }
        guard let builtIn = Self.builtIn(nameOrPath) else {
            throw WakeError.word(
                """
                unknown wake word "\(nameOrPath)": the built-in ones are \(Self.builtInWords.joined(separator: ", ")) \
                (those beginning with oww_ are openWakeWord's, for non-commercial use only); any other is the path of \
                a microWakeWord model's manifest (.json) or an openWakeWord .tflite model
                """
            )
        }
        switch builtIn.family {
        case .micro:
            let manifestPath = microManifest(builtIn.file)
            guard isReadable(manifestPath) else {
                throw WakeError.runtimeMissing("the built-in wake word \(builtIn.name) is missing: no \(manifestPath)")
            }
            var word = try Self.microWord(manifest: manifestPath, name: builtIn.name, threshold: threshold)
            guard isReadable(word.path) else {
                throw WakeError.runtimeMissing("the built-in wake word \(builtIn.name) is missing: no \(word.path)")
            }
            word.licence = builtIn.licence
            if let lead = Self.builtInRiseLeads[builtIn.name] { word.riseLead = lead }
            return word
        case .open:
            let path = join(models, builtIn.file + ".tflite")
            guard isReadable(path) else {
                throw WakeError.runtimeMissing("the built-in wake word \(builtIn.name) is missing: no \(path)")
            }
            guard hasOpenWakeWord else {
                throw WakeError.runtimeMissing(
                    "the openWakeWord models are not installed: no \(melspectrogram) or \(embedding)"
                )
            }
            return WakeWord(
                name: builtIn.name,
                path: path,
                threshold: threshold,
                riseLead: Self.builtInRiseLeads[builtIn.name] ?? WakeWord.defaultRiseLead,
                family: .open,
                licence: builtIn.licence,
                phrase: builtIn.phrase
            )
        }
    }

    /// A model given by its path (see ``word(_:)``).
    private func modelWord(_ path: String, threshold: Float?) throws(WakeError) -> WakeWord {
        var name = String(path.split(separator: "/").last ?? Substring(path))
        for suffix in [".tflite", ".json"] where name.hasSuffix(suffix) { name.removeLast(suffix.count) }
        if name.isEmpty { name = path }
        if path.hasSuffix(".json") {
            guard isReadable(path) else { throw WakeError.word("no readable wake-word manifest \(path)") }
            let word = try Self.word(manifest: path, name: name, threshold: threshold)
            guard isReadable(word.path) else {
                throw WakeError.word("the wake-word manifest \(path) names \(word.path), which cannot be read")
            }
            if word.family == .open && !hasOpenWakeWord {
                throw WakeError.runtimeMissing("the openWakeWord models are not installed: no \(melspectrogram)")
            }
            return word
        }
        guard isReadable(path) else { throw WakeError.word("no readable wake-word model \(path)") }
        if path.hasSuffix(".tflite") {
            let manifest = String(path.dropLast(".tflite".count)) + ".json"
            if isReadable(manifest) {
                let word = try Self.word(manifest: manifest, name: name, threshold: threshold)
                guard word.path == path || Self.sameFile(word.path, path) else {
                    throw WakeError.word("the manifest \(manifest) beside \(path) names another model, \(word.path)")
                }
                return word
            }
        }
        guard hasOpenWakeWord else {
            throw WakeError.runtimeMissing(
                "\(path) is taken as an openWakeWord model (it has no manifest beside it), but the openWakeWord "
                    + "models are not installed: no \(melspectrogram)"
            )
        }
        return WakeWord(name: name, path: path, threshold: threshold, family: .open, licence: .maker)
    }

    /// The word a manifest describes: a microWakeWord one (`"type": "micro"`) or an openWakeWord one
    /// (`"type": "openWakeWord"`, as Home Assistant's satellites describe them).
    private static func word(manifest: String, name: String, threshold: Float?) throws(WakeError) -> WakeWord {
        let parsed = try WakeManifest.read(manifest)
        switch parsed.family {
        case .micro:
            var word = try microWord(manifest: manifest, name: name, threshold: threshold, parsed: parsed)
            word.licence = .maker
            return word
        case .open:
            return WakeWord(
                name: name,
                path: parsed.model,
                threshold: threshold,
                family: .open,
                licence: .maker,
                cutoff: parsed.cutoff,
                phrase: parsed.phrase,
                manifest: manifest
            )
        }
    }

    private static func microWord(
        manifest: String,
        name: String,
        threshold: Float?,
        parsed given: WakeManifest? = nil
    ) throws(WakeError) -> WakeWord {
        let parsed: WakeManifest
        if let given { parsed = given } else { parsed = try WakeManifest.read(manifest) }
        guard parsed.family == .micro else {
            throw WakeError.word("\(manifest) is not a microWakeWord manifest (its type is not \"micro\")")
        }
        return WakeWord(
            name: name,
            path: parsed.model,
            threshold: threshold,
            family: .micro,
            licence: .apache2,
            cutoff: parsed.cutoff,
            slidingWindow: parsed.slidingWindow,
            phrase: parsed.phrase,
            manifest: manifest
        )
    }

    private static func sameFile(_ a: String, _ b: String) -> Bool {
        var first = stat()
        var second = stat()
        return stat(a, &first) == 0 && stat(b, &second) == 0 && first.st_dev == second.st_dev
            && first.st_ino == second.st_ino
    }

    /// Built-in words whose scores begin to rise later after the word than the others' (``WakeWord/riseLead``),
    /// measured by scripts/bench-wake: openWakeWord's okay_nabu rises 110 to 400 ms after the question has begun,
    /// where the others' rise within 100 ms of the word's end.
    public static let builtInRiseLeads: [String: Duration] = ["oww_okay_nabu": .milliseconds(400)]

    /// `texts` (names or paths, each perhaps with its own threshold: ``splitThreshold(_:)``) without repeats, in
    /// order. Throws for a bad threshold, or for one word given twice with different thresholds.
    public static func distinctWords(_ texts: [String]) throws(WakeError) -> [String] {
        var distinct: [String] = []
        var thresholds: [String: Float?] = [:]
        for text in texts {
            let (word, threshold) = try splitThreshold(text)
            if let earlier = thresholds[word] {
                guard earlier == threshold else {
                    throw WakeError.word("a word is given twice, with different thresholds")
                }
                continue
            }
            thresholds[word] = threshold
            distinct.append(text)
        }
        return distinct
    }

    /// The range a threshold must be in, the word's own as the detector's.
    public static let thresholdRange: ClosedRange<Double> = 0.01...0.99

    /// True for a model's path rather than a built-in name: anything with a `/` or ending in `.tflite` or `.json`.
    public static func isModelPath(_ nameOrPath: String) -> Bool {
        nameOrPath.contains("/") || nameOrPath.hasSuffix(".tflite") || nameOrPath.hasSuffix(".json")
    }

    /// A configured word split into its name or path and its own threshold: `alexa:0.7` is alexa at 0.7;
    /// `alexa` and `models/my_word.tflite` have none (the manifest's cutoff or the detector's applies). A path never
    /// ends in a number (it ends in `.tflite` or `.json`), so the last `:` followed by a number is always the
    /// threshold's. Throws for a threshold outside ``thresholdRange`` or an empty name.
    public static func splitThreshold(_ text: String) throws(WakeError) -> (nameOrPath: String, threshold: Float?) {
        guard let colon = text.lastIndex(of: ":") else { return (text, nil) }
        let suffix = text[text.index(after: colon)...]
        guard let value = Double(suffix) else { return (text, nil) }
        let name = String(text[..<colon])
        guard !name.isEmpty else { throw WakeError.word("a threshold after ':' needs a wake word before it") }
        guard value.isFinite, thresholdRange.contains(value) else {
            throw WakeError.word(
                "a wake word's threshold (after ':') must be from \(thresholdRange.lowerBound) to "
                    + "\(thresholdRange.upperBound)"
            )
        }
        return (name, Float(value))
    }

    /// The melspectrogram model.
    var melspectrogram: String { join(models, "melspectrogram.tflite") }
    /// The speech embedding model.
    var embedding: String { join(models, "embedding_model.tflite") }
    /// A built-in microWakeWord model's manifest.
    func microManifest(_ file: String) -> String { join(microModels, file + ".json") }
}

/// A wake-word model's JSON manifest, as ESPHome and Home Assistant's satellites write them: `type` (`micro` or
/// `openWakeWord`), `wake_word` (the phrase), `model` (the `.tflite` file beside it) and, for a microWakeWord model,
/// `micro.probability_cutoff`, `micro.sliding_window_size` and `micro.feature_step_size` (10 ms: version 2 models;
/// version 1's 20 ms are not supported); for an openWakeWord one, `openWakeWord.probability_cutoff`.
struct WakeManifest: Sendable, Hashable {
    /// The largest manifest read (the real ones have a few hundred bytes).
    static let byteLimit = 64 * 1024
    /// The most probabilities a sliding window may average.
    static let windowLimit = 64

    var family: WakeWordFamily
    /// The model file (its folder the manifest's).
    var model: String
    var cutoff: Double?
    var slidingWindow: Int
    var phrase: String?

    private struct File: Decodable {
        struct Micro: Decodable {
            var probability_cutoff: Double
            var sliding_window_size: Int
            var feature_step_size: Int?
        }
        struct Open: Decodable {
            var probability_cutoff: Double?
        }
        var type: String
        var wake_word: String?
        var model: String
        var micro: Micro?
        var openWakeWord: Open?
    }

    /// Reads and checks the manifest at `path`; every error names the file and is a word error (the file is
    /// configured, not installed).
    static func read(_ path: String) throws(WakeError) -> WakeManifest {
        func fail(_ reason: String) -> WakeError { WakeError.word("the wake-word manifest \(path) \(reason)") }
        guard let text = NativeLibraryCheck.readSmallFile(path, limit: byteLimit) else {
            throw fail("cannot be read (or is larger than \(byteLimit / 1024) KiB)")
        }
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: Data(text.utf8))
        } catch {
            throw fail("is not a manifest: \(error)")
        }
        let model = file.model
        guard !model.isEmpty, model.utf8.count <= 255, !model.contains("/"), model.hasSuffix(".tflite") else {
            throw fail("names no model file beside it (\"model\" must be a .tflite file name in its folder)")
        }
        let folder = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let phrase = file.wake_word.map { RemoteText.printable($0, limit: 64) }
        switch file.type {
        case "micro":
            guard let micro = file.micro else { throw fail("has no \"micro\" settings") }
            guard micro.probability_cutoff.isFinite, micro.probability_cutoff > 0, micro.probability_cutoff < 1 else {
                throw fail("has a probability_cutoff that is not between 0 and 1")
            }
            guard (1...windowLimit).contains(micro.sliding_window_size) else {
                throw fail("has a sliding_window_size that is not from 1 to \(windowLimit)")
            }
            if let step = micro.feature_step_size, step != 10 {
                throw fail(
                    "has a feature_step_size of \(step) ms: only microWakeWord's version 2 models (10 ms) are supported"
                )
            }
            return WakeManifest(
                family: .micro,
                model: folder + "/" + model,
                cutoff: micro.probability_cutoff,
                slidingWindow: micro.sliding_window_size,
                phrase: phrase
            )
        case "openWakeWord":
            let cutoff = file.openWakeWord?.probability_cutoff
            if let cutoff, !(cutoff.isFinite && cutoff > 0 && cutoff < 1) {
                throw fail("has a probability_cutoff that is not between 0 and 1")
            }
            return WakeManifest(
                family: .open,
                model: folder + "/" + model,
                cutoff: cutoff,
                slidingWindow: 1,
                phrase: phrase
            )
        default:
            throw fail("has the type \"\(RemoteText.printable(file.type, limit: 32))\", not micro or openWakeWord")
        }
    }
}

/// One wake word: its name (what detections print), its model family and file, its manifest's settings and its own
/// threshold, if any.
public struct WakeWord: Sendable, Hashable {
    /// The name detections carry.
    public var name: String
    /// The `.tflite` model.
    public var path: String
    /// A probability above this is a detection of this word, whatever its manifest says; nil: its manifest's
    /// probability cutoff (``cutoff``), else the detector's ``WakeWordDetector/threshold``. Models differ in how sure
    /// they are: one that fires on near misses wants a higher threshold than the rest.
    public var threshold: Float?
    /// How long before its score begins to rise (``WakeScore/riseSample``) the word most likely ended: the
    /// scores climb as the word's last sound comes in, a little sooner or later per model.
    public var riseLead: Duration
    /// Its model family.
    public var family: WakeWordFamily
    /// Its licence, as far as Hark knows it.
    public var licence: WakeModelLicence
    /// The probability cutoff its manifest gives (a mean over ``slidingWindow`` probabilities above it is a
    /// detection), or nil.
    public var cutoff: Double?
    /// How many of its latest probabilities are averaged before the cutoff is applied (1 for openWakeWord).
    public var slidingWindow: Int
    /// What a person says, from its manifest, or nil.
    public var phrase: String?
    /// Its manifest, or nil.
    public var manifest: String?

    /// What ``riseLead`` is for an openWakeWord word not measured: 100 ms.
    public static let defaultRiseLead: Duration = .milliseconds(100)
    /// What ``riseLead`` is for a microWakeWord word: none (its rise is where its mean passes half its threshold,
    /// as the word's last sound comes in).
    public static let microRiseLead: Duration = .zero

    /// Where this word most likely ended when its score began to rise at sample `rise` (16 kHz,
    /// ``WakeScore/riseSample``): ``riseLead`` before it (at most a second).
    public func wordEndSample(risenAt rise: Int) -> Int {
        let (seconds, attoseconds) = riseLead.components
        let lead = seconds >= 1 ? 16_000 : Int(max(0, attoseconds) / 62_500_000_000_000)  // 62.5 µs a sample
        return rise - (seconds < 0 ? 0 : lead)
    }

    /// The threshold its detections are judged by: its own, else its manifest's cutoff, else `detector`'s.
    public func effectiveThreshold(detector: Float) -> Double {
        if let threshold { return Double(threshold) }
        return cutoff ?? Double(detector)
    }

    /// A wake word from a model file (``WakeRuntime/word(_:)`` resolves names and manifests).
    public init(
        name: String,
        path: String,
        threshold: Float? = nil,
        riseLead: Duration? = nil,
        family: WakeWordFamily = .open,
        licence: WakeModelLicence = .maker,
        cutoff: Double? = nil,
        slidingWindow: Int = 1,
        phrase: String? = nil,
        manifest: String? = nil
    ) {
        self.name = name
        self.path = path
        self.threshold = threshold
        self.riseLead = riseLead ?? (family == .micro ? Self.microRiseLead : Self.defaultRiseLead)
        self.family = family
        self.licence = licence
        self.cutoff = cutoff
        self.slidingWindow = slidingWindow
        self.phrase = phrase
        self.manifest = manifest
    }
}

private func isReadable(_ path: String) -> Bool { NativeLibraryFolders.isReadable(path) }

private func join(_ folder: String, _ name: String) -> String { NativeLibraryFolders.join(folder, name) }
