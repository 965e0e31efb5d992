/// One line of `hark doctor`: what was checked, the verdict, and what to do about a failure.
public struct DoctorItem: Sendable, Hashable, CustomStringConvertible {
    /// `ok`: works; `warning`: works with a caveat; `failed`: the appliance cannot use it.
    public enum Verdict: String, Sendable, Hashable { case ok, warning, failed }

    public var item: String
    public var verdict: Verdict
    public var detail: String
    /// What to do (empty when all is well).
    public var fix: String

    public init(_ item: String, _ verdict: Verdict, _ detail: String, fix: String = "") {
        self.item = item
        self.verdict = verdict
        self.detail = detail
        self.fix = fix
    }

    public var description: String {
        let mark =
            switch verdict {
            case .ok: "ok  "
            case .warning: "warn"
            case .failed: "FAIL"
            }
        let line = "[\(mark)] \(item): \(detail)"
        return fix.isEmpty ? line : line + " (fix: \(fix))"
    }
}
