import Synchronization

/// When the agent hears a tool's result (services that run calls without blocking the conversation).
public enum ToolScheduling: String, Sendable, Hashable, CaseIterable {
    /// Only added to what the agent knows: no new turn (a mute needs no reply).
    case silent
    /// Spoken about once the agent is idle (a volume change confirmed after the sentence in progress).
    case whenIdle = "when_idle"
    /// Spoken about at once, interrupting what the agent is saying (an answer the user waits for).
    case interrupt
}

/// How the conversation waits for a tool.
public enum ToolBehavior: Sendable, Hashable {
    /// The agent waits for the result before it goes on (and every call is like this with services that know
    /// no other way).
    case blocking
    /// The agent goes on talking while the tool runs; the result is heard per its scheduling.
    case nonBlocking(ToolScheduling)

    /// The words of the configuration: `blocking`, `silent`, `when_idle`, `interrupt`.
    public static let names = ["blocking"] + ToolScheduling.allCases.map(\.rawValue)

    /// The behaviour named `name` (one of ``names``).
    public init?(name: String) {
        if name == "blocking" {
            self = .blocking
        } else if let scheduling = ToolScheduling(rawValue: name) {
            self = .nonBlocking(scheduling)
        } else {
            return nil
        }
    }

    /// Its word in the configuration.
    public var name: String {
        switch self {
        case .blocking: "blocking"
        case .nonBlocking(let scheduling): scheduling.rawValue
        }
    }
}

/// Where a long-running tool reports progress: each report reaches the agent as a partial result (on services
/// that take them; elsewhere only the final result is sent).
public struct ToolProgress: Sendable {
    private let sink: @Sendable (JSONValue) async -> Void

    public init(_ sink: @escaping @Sendable (JSONValue) async -> Void) {
        self.sink = sink
    }

    /// Reports a partial result; the call goes on.
    public func report(_ partial: JSONValue) async {
        await sink(partial)
    }

    /// Progress that goes nowhere.
    public static let ignored = ToolProgress { _ in }
}

/// A function the agent can call on the device.
public struct LocalTool: Sendable {
    /// The function's name, as declared to the service.
    public var name: String
    /// What it does, for the model.
    public var description: String
    /// A JSON schema (OpenAPI subset) of its arguments, or nil for none.
    public var parameters: JSONValue?
    /// A full JSON Schema of its arguments from elsewhere (an MCP server's `inputSchema`), declared as is where the
    /// service takes JSON Schema (Gemini's `parametersJsonSchema`); set instead of ``parameters``.
    public var parametersJSONSchema: JSONValue?
    /// Whether the conversation waits for it, and when its result is heard.
    public var behavior: ToolBehavior
    /// Runs the call with its arguments, reporting progress if it likes; returns the result object. Throwing
    /// reports `{"error": ...}`.
    public var handler: @Sendable (JSONValue, ToolProgress) async throws -> JSONValue

    /// A tool that answers once.
    public init(
        name: String,
        description: String,
        parameters: JSONValue? = nil,
        behavior: ToolBehavior = .blocking,
        handler: @escaping @Sendable (JSONValue) async throws -> JSONValue
    ) {
        self.init(name: name, description: description, parameters: parameters, behavior: behavior) {
            arguments,
            _ in try await handler(arguments)
        }
    }

    /// A tool that may report progress before its result.
    public init(
        name: String,
        description: String,
        parameters: JSONValue? = nil,
        behavior: ToolBehavior = .blocking,
        reportingProgress handler: @escaping @Sendable (JSONValue, ToolProgress) async throws -> JSONValue
    ) {
        self.name = name
        self.description = description
        self.parameters = parameters
        self.behavior = behavior
        self.handler = handler
    }

    /// What the service is told of it (name, description, schemas, behaviour), to see whether a declaration
    /// changed.
    public var declarationSignature: String {
        let schema = (parametersJSONSchema ?? parameters).map { "\($0)" } ?? ""
        return "\(name)\u{1F}\(description)\u{1F}\(schema)\u{1F}\(behavior.name)"
    }
}

/// Tools that come and go while sessions are open (those of MCP servers): sets by source, each replaced as a
/// whole, and a generation that counts the changes. A session declares ``tools`` when it connects and hears of
/// each change from ``changes()`` (to tell the service mid-session where it can).
public final class ToolCatalog: Sendable {
    private let state = Mutex(State())

    private struct State {
        var sources: [(name: String, tools: [LocalTool])] = []
        var generation = 0
        var watchers: [Int: AsyncStream<Int>.Continuation] = [:]
        var nextWatcher = 0
    }

    public init() {}

    /// Every tool, source by source in the order the sources first appeared.
    public var tools: [LocalTool] { state.withLock { $0.sources.flatMap(\.tools) } }

    /// Changes so far.
    public var generation: Int { state.withLock { $0.generation } }

    /// Replaces the tools of `source`; a change of what the service is told bumps the generation and is announced.
    public func set(_ tools: [LocalTool], for source: String) {
        let watchers = state.withLock { state -> [AsyncStream<Int>.Continuation] in
            let index = state.sources.firstIndex { $0.name == source }
            let before = index.map { state.sources[$0].tools.map(\.declarationSignature) } ?? []
            if let index {
                state.sources[index].tools = tools
            } else {
                state.sources.append((source, tools))
            }
            guard before != tools.map(\.declarationSignature) else { return [] }
            state.generation += 1
            return Array(state.watchers.values)
        }
        let generation = self.generation
        for watcher in watchers { watcher.yield(generation) }
    }

    /// The generation after each change from now on (only the newest is kept while the reader is busy).
    public func changes() -> AsyncStream<Int> {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state in
            defer { state.nextWatcher += 1 }
            state.watchers[state.nextWatcher] = continuation
            return state.nextWatcher
        }
        continuation.onTermination = { [weak self] _ in _ = self?.state.withLock { $0.watchers.removeValue(forKey: id) }
        }
        return stream
    }
}

/// The tools a session declares and dispatches calls to.
public struct ToolRegistry: Sendable {
    /// The tools by name, in declaration order.
    public private(set) var tools: [LocalTool] = []
    /// Tools that change while a session is open (MCP servers'), declared after ``tools``.
    public var catalog: ToolCatalog?

    /// The tools to declare now: ``tools``, then the catalog's that do not share a name with one of them.
    public var current: [LocalTool] {
        guard let catalog else { return tools }
        let names = Set(tools.map(\.name))
        return tools + catalog.tools.filter { !names.contains($0.name) }
    }

    public init(_ tools: [LocalTool] = []) {
        for tool in tools { register(tool) }
    }

    /// Sets the behaviour of the tool called `name` (nothing when there is none).
    public mutating func setBehavior(_ behavior: ToolBehavior, of name: String) {
        guard let index = tools.firstIndex(where: { $0.name == name }) else { return }
        tools[index].behavior = behavior
    }

    /// Adds or replaces a tool.
    public mutating func register(_ tool: LocalTool) {
        if let index = tools.firstIndex(where: { $0.name == tool.name }) {
            tools[index] = tool
        } else {
            tools.append(tool)
        }
    }

    /// The tool called `name` (the device's first, then the catalog's).
    public func tool(named name: String) -> LocalTool? {
        tools.first { $0.name == name } ?? catalog?.tools.first { $0.name == name }
    }

    /// Runs the call; an unknown tool or a thrown error becomes an `{"error": ...}` result, as the
    /// model expects, and `succeeded` says which.
    public func call(name: String, arguments: JSONValue, progress: ToolProgress = .ignored) async -> (
        result: JSONValue, succeeded: Bool
    ) {
        guard let tool = tool(named: name) else {
            return (["error": .string("no tool named \(name) on this device")], false)
        }
        do {
            return (try await tool.handler(arguments, progress), true)
        } catch is CancellationError {
            return (["error": "cancelled"], false)
        } catch {
            return (["error": .string(String(describing: error))], false)
        }
    }
}
