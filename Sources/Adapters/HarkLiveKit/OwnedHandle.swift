import HarkLiveKitProto
import Synchronization

/// One handle the LiveKit library gave out (a room, a participant, a track, a source, a stream, a buffer): its
/// one owner, which drops it (`livekit_ffi_drop_handle`) when the last reference goes. Handle 0 is the library's
/// invalid handle and is never dropped. Dropping after the client was disposed is harmless (the library only
/// forgets the id).
final class OwnedHandle: Sendable, CustomStringConvertible {
    /// The library's id for the handle.
    let id: UInt64
    private let library: LiveKitLibrary
    /// False once the library took the handle back (a request that consumes it, such as reading a stream).
    private let owned = Atomic(true)

    init(_ id: UInt64, library: LiveKitLibrary) {
        self.id = id
        self.library = library
    }

    convenience init(_ handle: Livekit_Proto_FfiOwnedHandle, library: LiveKitLibrary) {
        self.init(handle.id, library: library)
    }

    deinit {
        if id != 0, owned.load(ordering: .acquiring) { _ = library.dropHandle(id) }
    }

    /// The library took the handle back (a request consumed it): it is not dropped here.
    func relinquish() {
        owned.store(false, ordering: .releasing)
    }

    var description: String { "handle \(id)" }
}
