import HarkBoard

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The board a configuration selects: by name (`board: rpi5-respeaker-2mic`) or detected (`board: auto`).
public struct BoardSelection: Sendable, Hashable {
    /// The board profile; nil when `board: auto` recognised nothing.
    public var profile: BoardProfile?
    /// The board file it was read from.
    public var file: String?
    /// True when the board was detected rather than named.
    public var detected: Bool
    /// One line for people: what was chosen and why, or why nothing was.
    public var summary: String
}

extension LoadedConfiguration {
    /// Reads the board files in `board_dir` and picks the board: the one named by `board`, or for `auto`
    /// the one whose detection rule fits `facts` best (none fitting is not an error: `profile` is nil and
    /// `summary` says so). A missing folder or board file, or a board file with an error, throws an error
    /// that names it.
    public func selectBoard(facts: SystemFacts) throws(ConfigurationError) -> BoardSelection {
        let directory = configuration.boardDirectory
        let name = configuration.board
        let files: [String]
        do {
            files = try BoardLoader.files(in: directory)
        } catch {
            throw self.error(key: "board_dir", "cannot read the folder \(directory)")
        }
        let known = files.map { String($0.split(separator: "/").last!.dropLast(5)) }
        if name != "auto" {
            let path = directory + "/" + name + ".yaml"
            guard files.contains(path) else {
                let list = known.isEmpty ? "none" : known.joined(separator: ", ")
                // The folder may come from elsewhere than the name (HARK_BOARD_DIR, --board): say so.
                let folder =
                    switch (origin(of: "board_dir"), origin(of: "board")) {
                    case (.standard, _), (.file, .file): ""
                    default: " (board_dir from \(place(of: "board_dir")))"
                    }
                throw self.error(
                    key: "board",
                    "no board file \(name).yaml in \(directory)\(folder); allowed: auto, \(list)"
                )
            }
            let profile = try Self.board(path)
            return BoardSelection(profile: profile, file: path, detected: false, summary: "\(name) (\(path))")
        }
        var profiles: [BoardProfile] = []
        for file in files { profiles.append(try Self.board(file)) }
        let factText = Self.describe(facts)
        guard let found = BoardDetection.detect(profiles, facts: facts) else {
            return BoardSelection(
                profile: nil,
                file: nil,
                detected: true,
                summary: "no board detected (\(factText)); name one with board: NAME (\(known.joined(separator: ", ")))"
            )
        }
        return BoardSelection(
            profile: found,
            file: directory + "/" + found.name + ".yaml",
            detected: true,
            summary: "\(found.name), detected (\(factText))"
        )
    }

    private static func board(_ path: String) throws(ConfigurationError) -> BoardProfile {
        do {
            return try BoardLoader.load(path: path)
        } catch let error as BoardFileError {
            throw ConfigurationError(file: error.file, key: error.key, line: error.line, problem: error.problem)
        } catch {
            throw ConfigurationError(file: path, key: "", problem: "\(error)")
        }
    }

    private static func describe(_ facts: SystemFacts) -> String {
        var parts = ["model: \(facts.model ?? "unknown")"]
        if let hat = facts.hatProduct { parts.append("HAT: \(hat)") }
        parts.append("sound cards: \(facts.alsaCards.isEmpty ? "none" : facts.alsaCards.joined(separator: ", "))")
        return parts.joined(separator: "; ")
    }
}
