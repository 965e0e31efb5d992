import Glibc
import HarkPlatform
import Synchronization

/// LiveKit's Rust core, `liblivekit_ffi.so` (from the pinned `livekit` wheel: WebRTC, Opus and the room's
/// signalling linked in), opened with `dlopen` and used through its four C functions, looked up with `dlsym`.
/// Nothing links against it, so the other backends pay nothing for its ~28 MB, and a machine without it runs
/// every other part of Hark. Loaded once per path for the life of the process (never `dlclose`d: its Rust
/// runtime's threads outlive any one client). ``LiveKitClient`` is the only user of the functions.
public final class LiveKitLibrary: Sendable {
    /// The event callback the library calls on its own threads: the bytes of one encoded `FfiEvent`, valid only
    /// during the call (`void (*)(const uint8_t *, size_t)`).
    typealias Callback = @convention(c) (UnsafePointer<UInt8>?, Int) -> Void
    /// `void livekit_ffi_initialize(FfiCallbackFn cb, bool capture_logs, const char *sdk, const char *sdk_version)`
    /// (not in the wheel's `livekit_ffi.h`; the signature is the library's `cabi.rs`).
    typealias Initialize = @convention(c) (Callback, Bool, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Void
    /// `FfiHandleId livekit_ffi_request(const uint8_t *data, size_t len, const uint8_t **res_ptr, size_t *res_len)`:
    /// the response's bytes stay valid until the returned handle is dropped; 0 is the invalid handle (the request
    /// could not be decoded or handled).
    typealias Request =
        @convention(c) (
            UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<UnsafePointer<UInt8>?>?, UnsafeMutablePointer<Int>?
        ) -> UInt64
    /// `bool livekit_ffi_drop_handle(FfiHandleId handle_id)`: false when no such handle exists.
    typealias DropHandle = @convention(c) (UInt64) -> Bool
    /// `void livekit_ffi_dispose(void)`: closes every room (blocking while it does: ~15 s for a room still
    /// connected, so rooms are disconnected first) and stops event delivery.
    typealias Dispose = @convention(c) () -> Void

    /// The library's file name.
    public static let fileName = "liblivekit_ffi.so"
    /// The version of the `livekit` wheel the library and HarkLiveKitProto's types come from.
    public static let wheelVersion = "1.2.1"

    /// Where the library was loaded from.
    public let path: String
    let initialize: Initialize
    let request: Request
    let dropHandle: DropHandle
    let dispose: Dispose

    /// The libraries opened so far, by path.
    private static let opened = Mutex<[String: LiveKitLibrary]>([:])

    /// The library at `path`, opened on first use (`dlopen(RTLD_NOW | RTLD_LOCAL)`); throws when it cannot be
    /// opened or lacks one of the four functions.
    public static func open(_ path: String) throws(LiveKitError) -> LiveKitLibrary {
        if let library = opened.withLock({ $0[path] }) { return library }
        // A damaged file would crash the dynamic loader or the library's own code: checked first (its structure
        // here; hark checked its checksum too before it started this helper).
        do {
            try NativeLibraryCheck.verify(path, checksum: false)
        } catch {
            throw LiveKitError.library(error.description)
        }
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            let reason = dlerror().map { String(cString: $0) } ?? "dlopen failed"
            throw LiveKitError.library("cannot load \(path): \(reason)")
        }
        let library = try LiveKitLibrary(path: path, handle: handle)
        return opened.withLock { opened in
            if let earlier = opened[path] { return earlier }
            opened[path] = library
            return library
        }
    }

    /// The library found by ``locate(environment:executable:)``, opened.
    public static func load(environment: [String: String]) throws(LiveKitError) -> LiveKitLibrary {
        try open(locate(environment: environment))
    }

    private init(path: String, handle: UnsafeMutableRawPointer) throws(LiveKitError) {
        self.path = path
        func symbol<F>(_ name: String, _: F.Type) throws(LiveKitError) -> F {
            guard let address = dlsym(handle, name) else {
                throw LiveKitError.library("\(path) has no \(name): not LiveKit's FFI library")
            }
            return unsafeBitCast(address, to: F.self)
        }
        initialize = try symbol("livekit_ffi_initialize", Initialize.self)
        request = try symbol("livekit_ffi_request", Request.self)
        dropHandle = try symbol("livekit_ffi_drop_handle", DropHandle.self)
        dispose = try symbol("livekit_ffi_dispose", Dispose.self)
    }

    /// The environment variable naming the folder that holds the library (shared with the wake word's runtime,
    /// which `scripts/setup` and the package put in the same folder).
    public static let libraryVariable = NativeLibraryFolders.variable
    /// The development folder `scripts/setup` fills, looked for above the executable and the working folder.
    public static let developmentFolder = NativeLibraryFolders.developmentFolder
    /// The library folder of an installed Hark.
    public static let installedFolder = NativeLibraryFolders.installedFolder

    /// Finds the library, in this order: the folder `HARK_LIB_DIR` names (when set, only there); a `.hark-lib`
    /// folder above `executable` (default: this process's, from `/proc/self/exe`) or above the working folder
    /// (a development checkout); `/usr/lib/hark`. Throws an error that names what to install when it is nowhere.
    public static func locate(environment: [String: String], executable: String? = nil) throws(LiveKitError) -> String {
        let candidates = NativeLibraryFolders.candidates(
            for: fileName,
            environment: environment,
            executable: executable
        )
        guard let folder = candidates.first(where: { isReadable(join($0, fileName)) }) else {
            throw LiveKitError.libraryMissing(
                """
                the LiveKit backend's library (\(fileName), from the livekit \(wheelVersion) wheel) is not \
                installed: looked in \(candidates.joined(separator: ", ")). Install the hark package (it puts it \
                in \(installedFolder)), or run scripts/setup in a checkout (it puts it in \(developmentFolder)/), \
                or set \(libraryVariable) to a folder that holds it
                """
            )
        }
        return join(folder, fileName)
    }
}

private func isReadable(_ path: String) -> Bool { NativeLibraryFolders.isReadable(path) }

private func join(_ folder: String, _ name: String) -> String { NativeLibraryFolders.join(folder, name) }
