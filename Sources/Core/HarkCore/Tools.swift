/// A function the agent can call on the device.
public struct LocalTool: Sendable {
    /// The function's name, as declared to the service.
    public var name: String
    /// What it does, for the model.
    public var description: String
    /// A JSON schema (OpenAPI subset) of its arguments, or nil for none.
    public var parameters: JSONValue?
    /// Runs the call with its arguments; returns the result object. Throwing reports `{"error": ...}`.
    public var handler: @Sendable (JSONValue) async throws -> JSONValue

    public init(
        name: String,
        description: String,
        parameters: JSONValue? = nil,
        handler: @escaping @Sendable (JSONValue) async throws -> JSONValue
    ) {
        self.name = name
        self.description = description
        self.parameters = parameters
        self.handler = handler
    }
}

/// The tools a session declares and dispatches calls to.
public struct ToolRegistry: Sendable {
    /// The tools by name, in declaration order.
    public private(set) var tools: [LocalTool] = []

    public init(_ tools: [LocalTool] = []) {
        for tool in tools { register(tool) }
    }

    /// Adds or replaces a tool.
    public mutating func register(_ tool: LocalTool) {
        if let index = tools.firstIndex(where: { $0.name == tool.name }) {
            tools[index] = tool
        } else {
            tools.append(tool)
        }
    }

    /// The tool called `name`.
    public func tool(named name: String) -> LocalTool? {
        tools.first { $0.name == name }
    }

    /// Runs the call; an unknown tool or a thrown error becomes an `{"error": ...}` result, as the
    /// model expects, and `succeeded` says which.
    public func call(name: String, arguments: JSONValue) async -> (result: JSONValue, succeeded: Bool) {
        guard let tool = tool(named: name) else {
            return (["error": .string("no tool named \(name) on this device")], false)
        }
        do {
            return (try await tool.handler(arguments), true)
        } catch is CancellationError {
            return (["error": "cancelled"], false)
        } catch {
            return (["error": .string(String(describing: error))], false)
        }
    }
}
