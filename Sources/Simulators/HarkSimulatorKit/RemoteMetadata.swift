import HarkCore
import Logging

extension Logger.MetadataValue {
    /// What a client sent (a path, a close reason, a field name, an id), as a log line may show it: control
    /// characters escaped and the length bounded (``RemoteText/printable(_:limit:)``).
    package static func remote(_ text: some StringProtocol, limit: Int = RemoteText.defaultLimit) -> Self {
        .string(RemoteText.printable(text, limit: limit))
    }
}
