import Glibc
import HarkPlatform

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

/// Where the wake word's runtime is on this machine: the TensorFlow Lite C library (`libtensorflowlite_c.so`)
/// and the folder of openWakeWord models (`melspectrogram.tflite`, `embedding_model.tflite` and the built-in
/// words). Both come from the pinned pyopen-wakeword wheel that `scripts/setup` unpacks into the checkout's
/// `.hark-lib/` and the package installs as `/usr/lib/hark/` and `/usr/share/hark/wake/`.
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
    /// The wake words that come with the models, by name.
    public static let builtInWords = ["hey_jarvis", "okay_nabu", "alexa", "hey_mycroft", "hey_rhasspy"]

    /// The library file.
    public var library: String
    /// The folder of models.
    public var models: String

    /// A runtime at given paths.
    public init(library: String, models: String) {
        self.library = library
        self.models = models
    }

    /// Finds the runtime, in this order: the folder `HARK_LIB_DIR` names (when set, only there); a
    /// `.hark-lib` folder above `executable` (default: this process's, from `/proc/self/exe`) or above the
    /// working folder (a development checkout); `/usr/lib/hark`. The models are in `HARK_MODELS_DIR` when set,
    /// else in the library folder's `wake/`, else in `/usr/share/hark/wake`. Throws an error that names what
    /// to install when the library or the models are missing.
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
        } else if isReadable(join(join(folder, "wake"), "melspectrogram.tflite")) {
            models = join(folder, "wake")
        } else {
            models = installedModelFolder
        }
        for file in ["melspectrogram.tflite", "embedding_model.tflite"] where !isReadable(join(models, file)) {
            throw WakeError.runtimeMissing(
                """
                the wake word's models are not installed: no \(join(models, file)). Install the hark package \
                (\(installedModelFolder)), or run scripts/setup in a checkout, or set \(modelsVariable)
                """
            )
        }
        return WakeRuntime(library: join(folder, libraryName), models: models)
    }

    /// The wake word a name or a path stands for: one of ``builtInWords``, or the path of an openWakeWord-format
    /// `.tflite` model (anything with a `/` or ending in `.tflite`; its name is the file's, without `.tflite`);
    /// either may end in `:THRESHOLD`, the word's own threshold (`alexa:0.7`; see ``splitThreshold(_:)``).
    public func word(_ text: String) throws(WakeError) -> WakeWord {
        let (nameOrPath, threshold) = try Self.splitThreshold(text)
        if Self.isModelPath(nameOrPath) {
            guard isReadable(nameOrPath) else { throw WakeError.word("no readable wake-word model \(nameOrPath)") }
            var name = String(nameOrPath.split(separator: "/").last ?? Substring(nameOrPath))
            if name.hasSuffix(".tflite") { name.removeLast(".tflite".count) }
            return WakeWord(name: name.isEmpty ? nameOrPath : name, path: nameOrPath, threshold: threshold)
        }
        guard Self.builtInWords.contains(nameOrPath) else {
            throw WakeError.word(
                """
                unknown wake word "\(nameOrPath)": the built-in ones are \
                \(Self.builtInWords.joined(separator: ", ")); any other is the path of an openWakeWord .tflite model
                """
            )
        }
        let path = join(models, nameOrPath + ".tflite")
        guard isReadable(path) else {
            throw WakeError.runtimeMissing("the built-in wake word \(nameOrPath) is missing: no \(path)")
        }
        return WakeWord(
            name: nameOrPath,
            path: path,
            threshold: threshold,
            riseLead: Self.builtInRiseLeads[nameOrPath] ?? WakeWord.defaultRiseLead
        )
    }

    /// Built-in words whose scores begin to rise later after the word than the others' (``WakeWord/riseLead``),
    /// measured by scripts/bench-wake: okay_nabu's rises 110 to 400 ms after the question has begun, where the
    /// others' rise within 100 ms of the word's end.
    public static let builtInRiseLeads: [String: Duration] = ["okay_nabu": .milliseconds(400)]

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

    /// True for a model's path rather than a built-in name: anything with a `/` or ending in `.tflite`.
    public static func isModelPath(_ nameOrPath: String) -> Bool {
        nameOrPath.contains("/") || nameOrPath.hasSuffix(".tflite")
    }

    /// A configured word split into its name or path and its own threshold: `alexa:0.7` is alexa at 0.7;
    /// `alexa` and `models/my_word.tflite` have none (the detector's applies). A path never ends in a number
    /// (it ends in `.tflite`), so the last `:` followed by a number is always the threshold's. Throws for a
    /// threshold outside ``thresholdRange`` or an empty name.
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
}

/// One wake word: its name (what detections print), its openWakeWord model file and its own threshold, if any.
public struct WakeWord: Sendable, Hashable {
    /// The name detections carry.
    public var name: String
    /// The `.tflite` model.
    public var path: String
    /// A probability above this is a detection of this word; nil: the detector's ``WakeWordDetector/threshold``.
    /// Models differ in how sure they are: one that fires on near misses wants a higher threshold than the rest.
    public var threshold: Float?
    /// How long before its score begins to rise (``WakeScore/riseSample``) the word most likely ended: the
    /// scores climb as the word's last sound comes in, a little sooner or later per model.
    public var riseLead: Duration

    /// What ``riseLead`` is for a word not measured: 100 ms.
    public static let defaultRiseLead: Duration = .milliseconds(100)

    /// Where this word most likely ended when its score began to rise at sample `rise` (16 kHz,
    /// ``WakeScore/riseSample``): ``riseLead`` before it (at most a second).
    public func wordEndSample(risenAt rise: Int) -> Int {
        let (seconds, attoseconds) = riseLead.components
        let lead = seconds >= 1 ? 16_000 : Int(max(0, attoseconds) / 62_500_000_000_000)  // 62.5 µs a sample
        return rise - (seconds < 0 ? 0 : lead)
    }

    /// A wake word from a model file (``WakeRuntime/word(_:)`` resolves names).
    public init(name: String, path: String, threshold: Float? = nil, riseLead: Duration = defaultRiseLead) {
        self.name = name
        self.path = path
        self.threshold = threshold
        self.riseLead = riseLead
    }
}

private func isReadable(_ path: String) -> Bool { NativeLibraryFolders.isReadable(path) }

private func join(_ folder: String, _ name: String) -> String { NativeLibraryFolders.join(folder, name) }
