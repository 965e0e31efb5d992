import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A resumption handle and when it was last confirmed, persisted so a restarted device resumes the
/// conversation it was in (Gemini keeps handles valid for 2 hours after a session ends).
public struct ResumptionRecord: Codable, Sendable, Hashable {
    /// The opaque handle from the last resumable update.
    public var handle: String
    /// Seconds since 1970 when it was received.
    public var savedAt: Double
    /// The model the handle belongs to (a handle cannot move to another model).
    public var model: String

    public init(handle: String, savedAt: Double, model: String) {
        self.handle = handle
        self.savedAt = savedAt
        self.model = model
    }
}

/// Saves and loads a ``ResumptionRecord`` atomically (write to a temporary file, then rename).
public struct ResumptionStore: Sendable {
    /// Where the record lives.
    public var path: String
    /// How long a handle stays usable.
    public var validity: Duration

    public init(path: String, validity: Duration = .seconds(2 * 3600)) {
        self.path = path
        self.validity = validity
    }

    /// The saved handle for `model`, if still valid at `now` (seconds since 1970).
    public func load(model: String, now: Double) -> String? {
        guard let data = try? Data(contentsOf: URL(filePath: path)),
            let record = try? JSONDecoder().decode(ResumptionRecord.self, from: data),
            record.model == model, now - record.savedAt < validity.seconds, now >= record.savedAt - 60
        else { return nil }
        return record.handle
    }

    /// Saves `handle` atomically; a failure is one line for a person (``SaveError``).
    public func save(handle: String, model: String, now: Double) throws(SaveError) {
        do {
            let data = try JSONEncoder().encode(ResumptionRecord(handle: handle, savedAt: now, model: model))
            try data.write(to: URL(filePath: path), options: .atomic)
        } catch {
            throw SaveError(path: path, reason: FileFailure.reason(error))
        }
    }

    /// The handle could not be saved: where, and why in a few words (`no such folder /var/lib/hark`).
    public struct SaveError: Error, CustomStringConvertible, Sendable, Hashable {
        /// The file the handle was to be saved in.
        public var path: String
        /// Why, in a few words (``FileFailure/reason(_:)``).
        public var reason: String

        /// `cannot save the resumption handle to PATH: REASON`.
        public var description: String {
            RemoteText.printable("cannot save the resumption handle to \(path): \(reason)", limit: 1000)
        }
    }

    /// Forgets the handle (a refused resume, or a deliberately fresh conversation).
    public func clear() {
        try? FileManager.default.removeItem(atPath: path)
    }
}
