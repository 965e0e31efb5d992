import FoundationEssentials

/// What the running system says about its hardware, read from `/proc` (paths injectable for tests).
public struct SystemFacts: Sendable, Hashable {
    /// `/proc/device-tree/model`, without the trailing NUL; nil when absent.
    public var model: String?
    /// `/proc/device-tree/hat/product` (the HAT EEPROM), nil when absent.
    public var hatProduct: String?
    /// ALSA card ids (`/proc/asound/card*/id`).
    public var alsaCards: [String]

    public init(model: String? = nil, hatProduct: String? = nil, alsaCards: [String] = []) {
        self.model = model
        self.hatProduct = hatProduct
        self.alsaCards = alsaCards
    }

    /// Reads the facts under `root` (`/` on a device; a temp folder in tests).
    public static func read(root: String = "/") -> SystemFacts {
        let base = root.hasSuffix("/") ? String(root.dropLast()) : root
        func text(_ path: String) -> String? {
            guard let data = FileManager.default.contents(atPath: base + path) else { return nil }
            let trimmed = String(decoding: data, as: UTF8.self).filter { $0 != "\0" && $0 != "\n" }
            return trimmed.isEmpty ? nil : trimmed
        }
        let asound = base + "/proc/asound"
        let cards = ((try? FileManager.default.contentsOfDirectory(atPath: asound)) ?? [])
            .filter { $0.hasPrefix("card") && $0.dropFirst(4).allSatisfy(\.isNumber) && $0.count > 4 }
            .sorted { Int($0.dropFirst(4))! < Int($1.dropFirst(4))! }
            .compactMap { text("/proc/asound/\($0)/id") }
        return SystemFacts(
            model: text("/proc/device-tree/model"),
            hatProduct: text("/proc/device-tree/hat/product"),
            alsaCards: cards
        )
    }
}

/// Picks the board profile that fits the running system.
public enum BoardDetection {
    /// How well `rule` fits `facts`: nil if it does not, else the number of facts it matched
    /// (more specific rules win). A rule with no lists never matches (e.g. `host`: select it by name).
    public static func score(_ rule: DetectionRule, _ facts: SystemFacts) -> Int? {
        if rule.isEmpty { return nil }
        var score = 0
        if !rule.model.isEmpty {
            guard let model = facts.model, rule.model.contains(where: { model.contains($0) }) else { return nil }
            score += 1
        }
        if !rule.hatProduct.isEmpty || !rule.alsaCard.isEmpty {
            // A HAT is recognised by its EEPROM or by the sound card its driver creates (not every HAT
            // has an EEPROM, and an overlay loaded by hand leaves none).
            let hat = facts.hatProduct.map { product in rule.hatProduct.contains { product.contains($0) } } ?? false
            let card = facts.alsaCards.contains { rule.alsaCard.contains($0) }
            guard hat || card else { return nil }
            score += (hat ? 1 : 0) + (card ? 1 : 0)
        }
        return score
    }

    /// The best fitting profile, or nil; ties go to the first in `profiles` order.
    public static func detect(_ profiles: [BoardProfile], facts: SystemFacts) -> BoardProfile? {
        var best: (profile: BoardProfile, score: Int)?
        for profile in profiles {
            guard let score = score(profile.detect, facts) else { continue }
            if best == nil || score > best!.score { best = (profile, score) }
        }
        return best?.profile
    }
}
