import HarkApp
import HarkConfig
import HarkCore
import HarkMCP
import HarkTestKit
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `mcp.servers`: what is taken, what is refused and why, and the check that connects to each server.
@Suite struct MCPConfigurationTests {
    func parse(_ text: String, environment: [String: String] = [:]) throws -> LoadedConfiguration {
        try ConfigurationLoader.parse(text, file: "/srv/hark.yaml", folder: "/srv", environment: environment)
    }

    @Test func aServerOfEachKindIsReadWithItsBounds() throws {
        let loaded = try parse(
            """
            mcp:
              servers:
                - name: home
                  url: https://ha.example:8123/api/mcp
                  credential_file: tokens/ha
                  tools: ["HassTurn*", GetLiveContext]
                  allow_destructive: [HassDelete]
                  call_timeout: 12s
                  max_result_bytes: 65536
                  revision: auto
                - name: notes
                  command: [/usr/bin/notes-mcp, --stdio]
            """
        )
        let servers = loaded.configuration.mcpServers
        #expect(servers.map(\.name) == ["home", "notes"])
        #expect(servers[0].url == "https://ha.example:8123/api/mcp")
        #expect(servers[0].credentialFile == "/srv/tokens/ha")
        #expect(servers[0].tools == ["HassTurn*", "GetLiveContext"])
        #expect(servers[0].allowDestructive == ["HassDelete"])
        #expect(servers[0].callTimeout == .seconds(12))
        #expect(servers[0].maxResultBytes == 65536)
        #expect(servers[0].revision == .auto)
        #expect(servers[1].command == ["/usr/bin/notes-mcp", "--stdio"])
        #expect(servers[1].callTimeout == .seconds(30))
        // The rendered configuration shows them, and reads back the same.
        let again = try parse(loaded.rendered())
        #expect(again.configuration.mcpServers == servers)
    }

    @Test(
        "refused with the reason",
        arguments: [
            ("- name: x\n      url: http://ha.example/mcp", "plain http only to this machine"),
            ("- name: x\n      url: https://user:pw@ha.example/mcp", "must carry no credential"),
            ("- name: x\n      url: https://ha.example/mcp?token=abc", "must carry no credential"),
            ("- name: x\n      url: https://a/mcp\n      token: abc", "token"),
            ("- name: x\n      command: [a]\n      credential_env: TOKEN", "takes no credential"),
            ("- name: 9x\n      url: https://a/mcp", "starting with a letter"),
            ("- name: x\n    - name: x\n      url: https://a/mcp", "needs url"),
            ("- name: x\n      url: https://a/mcp\n    - name: x\n      url: https://b/mcp", "second server"),
            ("- name: x\n      url: https://a/mcp\n      call_timeout: 2h", "100ms to 600s"),
            ("- name: x\n      url: https://a/mcp\n      max_result_bytes: 99999999", "allowed"),
            ("- name: x\n      url: https://a/mcp\n      command: [b]", "both set"),
        ]
    )
    func refused(_ server: String, _ reason: String) throws {
        let error = try #require(failure("mcp:\n  servers:\n    \(server)\n"))
        #expect("\(error)".contains(reason), "\(error)")
        #expect("\(error)".contains("/tmp/x/hark.yaml:"), "\(error)")
    }

    @Test func theCredentialIsReadFromItsSourceNeverTheFile() throws {
        let loaded = try parse(
            "mcp:\n  servers:\n    - name: home\n      url: https://a/mcp\n      credential_env: HA_TOKEN\n"
        )
        let settings = try loaded.configuration.mcpServers[0].settings(environment: ["HA_TOKEN": "s3cret"])
        #expect(settings.credential?.reveal() == "s3cret")
        #expect(!loaded.rendered().contains("s3cret"))
    }

    @Test(.enabled(if: MCPTestServer.available, Comment(rawValue: MCPTestServer.missing)))
    func theCheckConnectsListsAndSaysWhatIsNotOfferedAndWhy() async throws {
        let server = try await MCPTestServer.startHTTP()
        defer { server.stop() }
        let loaded = try parse(
            """
            mcp:
              servers:
                - name: test
                  url: \(server.url)
                  tools: ["*"]
                - name: down
                  url: http://127.0.0.1:9/mcp
            """
        )
        let items = await MCPCheck.items(loaded.configuration.mcpServers, environment: [:])
        #expect(items.count == 2)
        #expect(items[0].verdict == .ok)
        #expect(items[0].detail.contains("2025-11-25"))
        #expect(items[0].detail.contains("test__add"))
        #expect(items[0].detail.contains("not offered: wipe: the server marks it destructive"))
        #expect(items[1].verdict == .warning)
        #expect(items[1].detail.contains("not reachable"))
    }
}
