import CTensorFlowLite
import Glibc
import HarkPlatform
import Synchronization

/// The TensorFlow Lite C library (`libtensorflowlite_c.so`, `tensorflow/lite/c/c_api.h`), opened with `dlopen`
/// and used through the few functions a client of float and quantised models needs, looked up with `dlsym`. Nothing links
/// against it, so a machine without it still runs every other part of Hark. Loaded once per path for the
/// life of the process (never `dlclose`d: its worker threads may outlive any one interpreter).
final class TensorFlowLite: Sendable {
    // The C API's opaque handles are OpaquePointer here; TfLiteStatus and TfLiteType are C enums (int).
    typealias ModelCreateFromFile = @convention(c) (UnsafePointer<CChar>?) -> OpaquePointer?
    typealias ModelDelete = @convention(c) (OpaquePointer?) -> Void
    typealias OptionsCreate = @convention(c) () -> OpaquePointer?
    typealias OptionsSetNumThreads = @convention(c) (OpaquePointer?, Int32) -> Void
    typealias OptionsDelete = @convention(c) (OpaquePointer?) -> Void
    typealias InterpreterCreate = @convention(c) (OpaquePointer?, OpaquePointer?) -> OpaquePointer?
    typealias InterpreterDelete = @convention(c) (OpaquePointer?) -> Void
    typealias InterpreterResizeInputTensor =
        @convention(c) (
            OpaquePointer?, Int32, UnsafePointer<Int32>?, Int32
        ) -> Int32
    typealias InterpreterStatus = @convention(c) (OpaquePointer?) -> Int32
    typealias InterpreterTensorCount = @convention(c) (OpaquePointer?) -> Int32
    typealias InterpreterTensor = @convention(c) (OpaquePointer?, Int32) -> OpaquePointer?
    typealias TensorType = @convention(c) (OpaquePointer?) -> Int32
    typealias TensorNumDims = @convention(c) (OpaquePointer?) -> Int32
    typealias TensorDim = @convention(c) (OpaquePointer?, Int32) -> Int32
    typealias TensorByteSize = @convention(c) (OpaquePointer?) -> Int
    typealias TensorCopyFromBuffer = @convention(c) (OpaquePointer?, UnsafeRawPointer?, Int) -> Int32
    typealias TensorCopyToBuffer = @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, Int) -> Int32
    typealias OptionsAddDelegate = @convention(c) (OpaquePointer?, OpaquePointer?) -> Void
    typealias XNNPackDelegateCreate = @convention(c) (UnsafeRawPointer?) -> OpaquePointer?
    typealias XNNPackDelegateDelete = @convention(c) (OpaquePointer?) -> Void

    /// `kTfLiteOk`.
    static let ok: Int32 = 0
    /// `kTfLiteFloat32`.
    static let float32: Int32 = 1
    /// `kTfLiteUInt8`.
    static let uint8: Int32 = 3
    /// `kTfLiteInt8`.
    static let int8: Int32 = 9

    /// The bytes of one element of a tensor type this client knows (float32, uint8, int8), or nil.
    static func elementSize(_ type: Int32) -> Int? {
        switch type {
        case float32: 4
        case uint8, int8: 1
        default: nil
        }
    }

    /// Where the library was loaded from.
    let path: String
    let modelCreateFromFile: ModelCreateFromFile
    let modelDelete: ModelDelete
    let optionsCreate: OptionsCreate
    let optionsSetNumThreads: OptionsSetNumThreads
    let optionsDelete: OptionsDelete
    let interpreterCreate: InterpreterCreate
    let interpreterDelete: InterpreterDelete
    let interpreterResizeInputTensor: InterpreterResizeInputTensor
    let interpreterAllocateTensors: InterpreterStatus
    let interpreterInvoke: InterpreterStatus
    let interpreterInputTensorCount: InterpreterTensorCount
    let interpreterOutputTensorCount: InterpreterTensorCount
    let interpreterGetInputTensor: InterpreterTensor
    let interpreterGetOutputTensor: InterpreterTensor
    let tensorType: TensorType
    let tensorNumDims: TensorNumDims
    let tensorDim: TensorDim
    let tensorByteSize: TensorByteSize
    let tensorCopyFromBuffer: TensorCopyFromBuffer
    let tensorCopyToBuffer: TensorCopyToBuffer
    /// `TfLiteTensorQuantizationParams` (a struct returned by value: typed through CTensorFlowLite's header).
    let tensorQuantization: HarkTfLiteTensorQuantizationParams
    /// The XNNPACK delegate (optimised CPU kernels), when the library has it: `TfLiteXNNPackDelegateCreate` (with
    /// its default options), `TfLiteXNNPackDelegateDelete`, `TfLiteInterpreterOptionsAddDelegate`.
    let xnnpack: (create: XNNPackDelegateCreate, delete: XNNPackDelegateDelete, add: OptionsAddDelegate)?

    /// The libraries opened so far, by path.
    private static let opened = Mutex<[String: TensorFlowLite]>([:])

    /// The library at `path`, opened on first use (`dlopen(RTLD_NOW | RTLD_LOCAL)`); throws when it cannot be
    /// opened or lacks one of the functions.
    static func open(_ path: String) throws(WakeError) -> TensorFlowLite {
        if let library = opened.withLock({ $0[path] }) { return library }
        // A damaged file would crash the dynamic loader or the library's own code: checked first.
        do {
            try NativeLibraryCheck.verify(path)
        } catch {
            throw WakeError.library(error.description)
        }
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            let reason = dlerror().map { String(cString: $0) } ?? "dlopen failed"
            throw WakeError.library("cannot load \(path): \(reason)")
        }
        let library = try TensorFlowLite(path: path, handle: handle)
        return opened.withLock { opened in
            if let earlier = opened[path] { return earlier }
            opened[path] = library
            return library
        }
    }

    private init(path: String, handle: UnsafeMutableRawPointer) throws(WakeError) {
        self.path = path
        func symbol<F>(_ name: String, _: F.Type) throws(WakeError) -> F {
            guard let address = dlsym(handle, name) else {
                throw WakeError.library("\(path) has no \(name): not a TensorFlow Lite C library")
            }
            return unsafeBitCast(address, to: F.self)
        }
        modelCreateFromFile = try symbol("TfLiteModelCreateFromFile", ModelCreateFromFile.self)
        modelDelete = try symbol("TfLiteModelDelete", ModelDelete.self)
        optionsCreate = try symbol("TfLiteInterpreterOptionsCreate", OptionsCreate.self)
        optionsSetNumThreads = try symbol("TfLiteInterpreterOptionsSetNumThreads", OptionsSetNumThreads.self)
        optionsDelete = try symbol("TfLiteInterpreterOptionsDelete", OptionsDelete.self)
        interpreterCreate = try symbol("TfLiteInterpreterCreate", InterpreterCreate.self)
        interpreterDelete = try symbol("TfLiteInterpreterDelete", InterpreterDelete.self)
        interpreterResizeInputTensor = try symbol(
            "TfLiteInterpreterResizeInputTensor",
            InterpreterResizeInputTensor.self
        )
        interpreterAllocateTensors = try symbol("TfLiteInterpreterAllocateTensors", InterpreterStatus.self)
        interpreterInvoke = try symbol("TfLiteInterpreterInvoke", InterpreterStatus.self)
        interpreterInputTensorCount = try symbol("TfLiteInterpreterGetInputTensorCount", InterpreterTensorCount.self)
        interpreterOutputTensorCount = try symbol(
            "TfLiteInterpreterGetOutputTensorCount",
            InterpreterTensorCount.self
        )
        interpreterGetInputTensor = try symbol("TfLiteInterpreterGetInputTensor", InterpreterTensor.self)
        interpreterGetOutputTensor = try symbol("TfLiteInterpreterGetOutputTensor", InterpreterTensor.self)
        tensorType = try symbol("TfLiteTensorType", TensorType.self)
        tensorNumDims = try symbol("TfLiteTensorNumDims", TensorNumDims.self)
        tensorDim = try symbol("TfLiteTensorDim", TensorDim.self)
        tensorByteSize = try symbol("TfLiteTensorByteSize", TensorByteSize.self)
        tensorCopyFromBuffer = try symbol("TfLiteTensorCopyFromBuffer", TensorCopyFromBuffer.self)
        tensorCopyToBuffer = try symbol("TfLiteTensorCopyToBuffer", TensorCopyToBuffer.self)
        tensorQuantization = try symbol("TfLiteTensorQuantizationParams", HarkTfLiteTensorQuantizationParams.self)
        if let create = dlsym(handle, "TfLiteXNNPackDelegateCreate"),
            let delete = dlsym(handle, "TfLiteXNNPackDelegateDelete"),
            let add = dlsym(handle, "TfLiteInterpreterOptionsAddDelegate")
        {
            xnnpack = (
                unsafeBitCast(create, to: XNNPackDelegateCreate.self),
                unsafeBitCast(delete, to: XNNPackDelegateDelete.self),
                unsafeBitCast(add, to: OptionsAddDelegate.self)
            )
        } else {
            xnnpack = nil
        }
    }
}

/// One TensorFlow Lite interpreter over one model file, with one input and one output tensor (float32, or for a
/// quantised model int8 or uint8): the owner of the `TfLiteModel`, its `TfLiteInterpreter` and their options, all
/// freed in `deinit` (`TfLiteInterpreterDelete`, `TfLiteInterpreterOptionsDelete`, `TfLiteModelDelete`). Not
/// thread-safe: one caller at a time (the detector that owns it).
final class TensorFlowLiteInterpreter {
    /// The most elements a tensor of these models may hold (the largest, the embedding model's input, has
    /// 76 × 32); shapes read from a model file are checked against it before anything is allocated.
    static let maximumElements = 1 << 16

    /// A quantised tensor's parameters: the value `q` stands for `scale · (q − zeroPoint)`.
    struct Quantization: Hashable {
        var scale: Float
        var zeroPoint: Int32
    }

    /// The C handles, freed together when the last reference goes (also when the initialiser throws); the
    /// delegate after the interpreter that uses it.
    private final class Handles {
        let library: TensorFlowLite
        let model: OpaquePointer
        let options: OpaquePointer
        let delegate: OpaquePointer?
        let interpreter: OpaquePointer

        init(library: TensorFlowLite, path: String, threads: Int, xnnpack: Bool) throws(WakeError) {
            guard let model = library.modelCreateFromFile(path) else {
                throw WakeError.model(path, "TensorFlow Lite cannot read it as a model")
            }
            guard let options = library.optionsCreate() else {
                library.modelDelete(model)
                throw WakeError.model(path, "TfLiteInterpreterOptionsCreate failed")
            }
            library.optionsSetNumThreads(options, Int32(max(1, min(threads, 8))))
            var delegate: OpaquePointer?
            if xnnpack, let calls = library.xnnpack {
                delegate = calls.create(nil)
                if let delegate { calls.add(options, delegate) }
            }
            guard let interpreter = library.interpreterCreate(model, options) else {
                if let delegate { library.xnnpack?.delete(delegate) }
                library.optionsDelete(options)
                library.modelDelete(model)
                throw WakeError.model(path, "TensorFlow Lite cannot make an interpreter for it")
            }
            self.library = library
            self.model = model
            self.options = options
            self.delegate = delegate
            self.interpreter = interpreter
        }

        deinit {
            library.interpreterDelete(interpreter)
            if let delegate { library.xnnpack?.delete(delegate) }
            library.optionsDelete(options)
            library.modelDelete(model)
        }
    }

    /// The model file.
    let path: String
    private let library: TensorFlowLite
    private let settings: (resize: [Int]?, threads: Int, xnnpack: Bool)
    private var handles: Handles
    private var input: OpaquePointer
    private var output: OpaquePointer
    /// The input's shape after any resize.
    let inputShape: [Int]
    /// The output's shape.
    let outputShape: [Int]
    /// Elements in the input tensor.
    let inputCount: Int
    /// Elements in the output tensor.
    let outputCount: Int
    /// The input's and the output's element types (`TfLiteType`: ``TensorFlowLite/float32``, ``TensorFlowLite/int8``,
    /// ``TensorFlowLite/uint8``).
    let inputType: Int32
    let outputType: Int32
    /// The quantisation of the input and of the output (scale 0 for a float tensor).
    let inputQuantization: Quantization
    let outputQuantization: Quantization

    /// Loads the model at `path` and prepares an interpreter on `threads` threads (`TfLiteModelCreateFromFile`,
    /// `TfLiteInterpreterCreate`, `TfLiteInterpreterAllocateTensors`), resizing input 0 to `inputShape` first
    /// when one is given (`TfLiteInterpreterResizeInputTensor`); with `xnnpack`, on the XNNPACK delegate's
    /// kernels when the library has them. `types` are the input's and output's element types allowed (default:
    /// float32 only). Throws when the file is not a model, or when its input or output is not a single tensor of an
    /// allowed type and a bounded size.
    init(
        library: TensorFlowLite,
        path: String,
        inputShape resize: [Int]? = nil,
        threads: Int = 1,
        xnnpack: Bool = true,
        types: Set<Int32> = [TensorFlowLite.float32]
    ) throws(WakeError) {
        let handles = try Handles(library: library, path: path, threads: threads, xnnpack: xnnpack)
        let (input, output) = try Self.prepare(handles, path: path, resize: resize)
        func fail(_ reason: String) -> WakeError { WakeError.model(path, reason) }
        guard let inputShape = Self.shape(of: input, library: library) else {
            throw fail("its input has an unusable shape")
        }
        guard let outputShape = Self.shape(of: output, library: library) else {
            throw fail("its output has an unusable shape")
        }
        let inputCount = inputShape.reduce(1, *)
        let outputCount = outputShape.reduce(1, *)
        let inputType = library.tensorType(input)
        let outputType = library.tensorType(output)
        guard types.contains(inputType), types.contains(outputType),
            let inputSize = TensorFlowLite.elementSize(inputType),
            let outputSize = TensorFlowLite.elementSize(outputType)
        else {
            throw fail(
                types == [TensorFlowLite.float32]
                    ? "its input or output is not float32 (a quantised model?)"
                    : "its input or output is not int8 or uint8 (a float model: not a microWakeWord model)"
            )
        }
        guard library.tensorByteSize(input) == inputCount * inputSize,
            library.tensorByteSize(output) == outputCount * outputSize
        else {
            throw fail("its tensors' sizes do not match their shapes \(inputShape) and \(outputShape)")
        }
        func quantization(_ tensor: OpaquePointer, _ type: Int32) throws(WakeError) -> Quantization {
            guard type != TensorFlowLite.float32 else { return Quantization(scale: 0, zeroPoint: 0) }
            let parameters = library.tensorQuantization(UnsafeRawPointer(tensor))
            // A scale read from the file: a number a quantised value can be multiplied by, and a zero point in range.
            guard parameters.scale.isFinite, parameters.scale > 0, (-128...255).contains(parameters.zero_point) else {
                throw fail(
                    "its quantisation (scale \(parameters.scale), zero point \(parameters.zero_point)) is unusable"
                )
            }
            return Quantization(scale: parameters.scale, zeroPoint: parameters.zero_point)
        }
        self.path = path
        self.library = library
        settings = (resize, threads, xnnpack)
        self.handles = handles
        self.input = input
        self.output = output
        self.inputShape = inputShape
        self.outputShape = outputShape
        self.inputCount = inputCount
        self.outputCount = outputCount
        self.inputType = inputType
        self.outputType = outputType
        inputQuantization = try quantization(input, inputType)
        outputQuantization = try quantization(output, outputType)
    }

    /// One input and one output, the input resized when asked, the tensors allocated.
    private static func prepare(
        _ handles: Handles,
        path: String,
        resize: [Int]?
    ) throws(WakeError) -> (input: OpaquePointer, output: OpaquePointer) {
        let library = handles.library
        let interpreter = handles.interpreter
        func fail(_ reason: String) -> WakeError { WakeError.model(path, reason) }
        guard library.interpreterInputTensorCount(interpreter) == 1,
            library.interpreterOutputTensorCount(interpreter) == 1
        else { throw fail("it has not one input and one output tensor") }
        if let resize {
            let dims = resize.map { Int32(clamping: $0) }
            let status = dims.withUnsafeBufferPointer {
                library.interpreterResizeInputTensor(interpreter, 0, $0.baseAddress, Int32($0.count))
            }
            guard status == TensorFlowLite.ok else { throw fail("its input cannot take the shape \(resize)") }
        }
        guard library.interpreterAllocateTensors(interpreter) == TensorFlowLite.ok,
            let input = library.interpreterGetInputTensor(interpreter, 0),
            let output = library.interpreterGetOutputTensor(interpreter, 0)
        else { throw fail("TensorFlow Lite cannot allocate its tensors") }
        return (input, output)
    }

    /// A new interpreter over the same model, as when it was made: what a streaming model (one that keeps state in
    /// variables between runs, as microWakeWord's do) needs to start over. Allocates; not for every frame.
    func restart() throws(WakeError) {
        let fresh = try Handles(library: library, path: path, threads: settings.threads, xnnpack: settings.xnnpack)
        let (input, output) = try Self.prepare(fresh, path: path, resize: settings.resize)
        guard Self.shape(of: input, library: library) == inputShape,
            Self.shape(of: output, library: library) == outputShape,
            library.tensorType(input) == inputType, library.tensorType(output) == outputType
        else { throw WakeError.model(path, "it changed since it was loaded") }
        handles = fresh
        self.input = input
        self.output = output
    }

    /// A tensor's dimensions (`TfLiteTensorNumDims`, `TfLiteTensorDim`), or nil when they are not 1 to 6
    /// dimensions of 1 or more with at most ``maximumElements`` elements in all.
    private static func shape(of tensor: OpaquePointer, library: TensorFlowLite) -> [Int]? {
        let count = library.tensorNumDims(tensor)
        guard (1...6).contains(count) else { return nil }
        var shape: [Int] = []
        var elements = 1
        for index in 0..<count {
            let dimension = Int(library.tensorDim(tensor, index))
            guard (1...maximumElements).contains(dimension) else { return nil }
            elements *= dimension
            guard elements <= maximumElements else { return nil }
            shape.append(dimension)
        }
        return shape
    }

    /// Copies `inputCount` floats from `values` in, runs the model and copies `outputCount` floats out to
    /// `result` (`TfLiteTensorCopyFromBuffer`, `TfLiteInterpreterInvoke`, `TfLiteTensorCopyToBuffer`).
    /// Allocates nothing. For a float32 model.
    func run(_ values: UnsafePointer<Float>, into result: UnsafeMutablePointer<Float>) throws(WakeError) {
        try run(bytes: UnsafeRawPointer(values), into: UnsafeMutableRawPointer(result))
    }

    /// Copies the input tensor's bytes from `values` in, runs the model and copies the output tensor's bytes out
    /// to `result` (whose sizes are the tensors': elements times their type's size). Allocates nothing.
    func run(bytes values: UnsafeRawPointer, into result: UnsafeMutableRawPointer) throws(WakeError) {
        let inputBytes = inputCount * (TensorFlowLite.elementSize(inputType) ?? 4)
        let outputBytes = outputCount * (TensorFlowLite.elementSize(outputType) ?? 4)
        guard library.tensorCopyFromBuffer(input, values, inputBytes) == TensorFlowLite.ok,
            library.interpreterInvoke(handles.interpreter) == TensorFlowLite.ok,
            library.tensorCopyToBuffer(output, result, outputBytes) == TensorFlowLite.ok
        else { throw WakeError.model(path, "TensorFlow Lite failed to run it") }
    }
}
