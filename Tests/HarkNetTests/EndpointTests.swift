import HarkCore
import HarkDatagrid
import HarkGemini
import HarkHTTP
import Testing

/// The URL parser, the redactor, the join of a path onto an endpoint and the clear-text rule, on hostile input.
@Suite struct EndpointTests {
    @Test func userInfoIsNeverTakenForTheHost() throws {
        let url = try #require(EndpointURL("ws://u:PW@host.example:8080/p?key=Q"))
        #expect(url.host == "host.example")
        #expect(url.port == 8080)
        #expect(url.hasUserInfo)
        #expect(url.requestTarget == "/p?key=Q")
        #expect(url.origin == "ws://host.example:8080")
        let bare = try #require(EndpointURL("wss://u@h/"))
        #expect(bare.host == "h" && bare.hasUserInfo && bare.effectivePort == 443)
        #expect(EndpointURL("wss://h/")?.hasUserInfo == false)
    }

    @Test func hostsPortsAndIPLiterals() throws {
        let v6 = try #require(EndpointURL("wss://[::1]:8443/ws"))
        #expect(v6.host == "::1" && v6.port == 8443 && v6.hostIsAddress && v6.isLoopback)
        #expect(v6.authority == "[::1]:8443" && v6.hostAndPort == "[::1]:8443")
        let v4 = try #require(EndpointURL("wss://192.168.1.10:8443"))
        #expect(v4.hostIsAddress && !v4.isLoopback && v4.requestTarget == "/")
        #expect(EndpointURL("ws://LOCALHOST/x")?.host == "localhost")
        #expect(EndpointURL("http://h")?.effectivePort == 80)
        #expect(EndpointURL("https://h")?.effectivePort == 443)
        #expect(EndpointURL("http://h:0/") == nil)
        #expect(EndpointURL("http://h:65536/") == nil)
        #expect(EndpointURL("http://h:-1/") == nil)
        #expect(EndpointURL("http://[::1/") == nil)
        #expect(EndpointURL("http://a b/") == nil)
    }

    @Test func aURLWithoutSchemeOrHostIsNotAnEndpoint() {
        for text in ["host.example/p", "host:443/p", "//host/p", "/just/a/path", "", "wss://", "wss:///p", "?key=K"] {
            #expect(EndpointURL(text) == nil, "\(text)")
        }
    }

    @Test func fragmentsAndPercentEncodingStayAsWritten() throws {
        let url = try #require(EndpointURL("https://h/a%20b/c?x=%2F%3D&y#frag"))
        #expect(url.requestTarget == "/a%20b/c?x=%2F%3D&y")
        #expect(url.percentEncodedQuery == "x=%2F%3D&y")
    }

    @Test func loopbackIsThisMachineOnly() {
        for host in ["localhost", "127.0.0.1", "127.255.0.9", "[::1]", "[0:0:0:0:0:0:0:1]", "[::ffff:127.0.0.1]"] {
            #expect(EndpointURL("ws://\(host):1/")?.isLoopback == true, "\(host)")
        }
        for host in [
            "localhost.example", "127.0.0.1.nip.io", "128.0.0.1", "10.0.0.1", "[::2]", "[::ffff:10.0.0.1]", "0.0.0.0",
            "2130706433", "127.1", "0x7f.0.0.1", "127.000.000.001",
        ] {
            #expect(EndpointURL("ws://\(host):1/")?.isLoopback != true, "\(host)")
        }
    }

    @Test func redactionHidesUserInfoEveryQueryValueAndTheFragment() {
        let cases: [(String, String)] = [
            ("ws://u:PW@host/p?key=Q", "ws://REDACTED@host/p?key=REDACTED"),
            ("wss://h/ws/voice?token=abc&x=1", "wss://h/ws/voice?token=REDACTED&x=REDACTED"),
            ("https://h/p?alt=sse&key=K#access_token=T", "https://h/p?alt=REDACTED&key=REDACTED#REDACTED"),
            ("wss://h/p", "wss://h/p"),
            ("wss://[::1]:8443/p?k=v", "wss://[::1]:8443/p?k=REDACTED"),
            ("wss://a@b@host/p", "wss://REDACTED@host/p"),
            ("u:pw@host/p?x=1", "REDACTED@host/p?x=REDACTED"),
            ("//u:pw@host/p", "//REDACTED@host/p"),
            ("https://h/p?SECRETVALUE", "https://h/p?REDACTED"),
            ("https://h/p?a=&b", "https://h/p?a=&REDACTED"),
            ("https://h/p?ke%79=V%41L", "https://h/p?ke%79=REDACTED"),
            ("not a url ?key=K", "not a url ?key=REDACTED"),
        ]
        for (url, redacted) in cases {
            #expect(URLRedaction.redact(url) == redacted, "\(url)")
            #expect(URLRedaction.redact(redacted) == redacted, "idempotent: \(redacted)")
        }
    }

    @Test func redactionLeavesNoControlCharactersAndIsBounded() {
        let hostile = "wss://h/p\r\nInjected: yes\u{1B}[31m" + String(repeating: "a", count: 2000)
        let redacted = URLRedaction.redact(hostile)
        #expect(!redacted.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F })
        #expect(redacted.count <= 513)
    }

    @Test func theHTTPClientShowsOnlySchemeHostAndPort() {
        #expect(NIOHTTPClient.redactedHost("https://h.example:8443/p/a?key=s") == "https://h.example:8443")
        #expect(NIOHTTPClient.redactedHost("https://user:pw@h.example/p?key=s") == "https://h.example")
        #expect(!NIOHTTPClient.redactedHost("https://user:pw@/p?key=s").contains("pw"))
    }

    @Test func aPathJoinsBeforeTheEndpointsQuery() {
        #expect(EndpointURL.join("wss://h/v1?key=K", path: "/ws/x") == "wss://h/v1/ws/x?key=K")
        #expect(EndpointURL.join("wss://h/", path: "/ws/x") == "wss://h/ws/x")
        #expect(EndpointURL.join("wss://h", path: "ws/x") == "wss://h/ws/x")
        #expect(EndpointURL.join("wss://h/?a=1", path: "/ws", query: "token=T") == "wss://h/ws?a=1&token=T")
        #expect(EndpointURL.join("wss://h", path: "/ws", query: "token=T") == "wss://h/ws?token=T")
        #expect(EndpointURL.join("wss://h/p#f", path: "/q") == "wss://h/p/q#f")
    }

    @Test func theBackendsKeepAnEndpointsQueryAfterTheirPaths() {
        let gemini = GeminiLiveConfiguration(
            endpoint: "wss://proxy.example/live/?tenant=t",
            authentication: .apiKey(Secret("k")),
            setup: Setup(model: "models/m")
        )
        #expect(
            gemini.webSocketURL(constrained: false)
                == "wss://proxy.example/live/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
                + "?tenant=t"
        )
        let datagrid = DatagridConfiguration(apiKey: Secret("k+y"), baseURL: "https://proxy.example/dg?tenant=t")
        #expect(datagrid.handoffURL == "https://proxy.example/dg/v1/voice?tenant=t")
        #expect(datagrid.directURL == "wss://proxy.example/dg/ws/voice?tenant=t&token=k%2By")
    }

    @Test func clearTextGoesOnlyToThisMachineUnlessAllowed() throws {
        #expect(EndpointPolicy.check(url: "ws://127.0.0.1:9/ws") == nil)
        #expect(EndpointPolicy.check(url: "ws://localhost:9/ws") == nil)
        #expect(EndpointPolicy.check(url: "http://[::1]:9/") == nil)
        #expect(EndpointPolicy.check(url: "wss://192.168.1.10:8443/ws") == nil)
        #expect(EndpointPolicy.check(url: "https://example.com/") == nil)
        let refused = try #require(EndpointPolicy.check(url: "ws://192.168.1.10:8080/ws?key=SECRET"))
        #expect(refused.contains("clear text") && refused.contains("192.168.1.10:8080"), "\(refused)")
        #expect(!refused.contains("SECRET"))
        #expect(EndpointPolicy.check(url: "http://example.com/t") != nil)
        #expect(EndpointPolicy.check(url: "ws://192.168.1.10:8080/ws", allowInsecure: true) == nil)
    }

    @Test func userInfoOtherSchemesAndGarbageAreRefused() throws {
        let withUser = try #require(EndpointPolicy.check(url: "wss://u:PW@h/p?key=Q"))
        #expect(withUser.contains("user name or password") && !withUser.contains("PW") && !withUser.contains("Q"))
        #expect(EndpointPolicy.check(url: "ftp://h/x")?.contains("not a ws://") == true)
        let garbage = try #require(EndpointPolicy.check(url: "wss://h:99999/x?token=T"))
        #expect(garbage.contains("not a valid URL") && !garbage.contains("=T"), "\(garbage)")
    }

    @Test func aDeclinedUpgradeIsClassifiedByItsStatus() {
        let kinds: [(Int?, SessionFailure.Kind)] = [
            (401, .authentication), (403, .authentication), (400, .configuration), (404, .configuration),
            (429, .transient), (500, .transient), (503, .transient), (nil, .transient),
        ]
        for (status, kind) in kinds {
            let error = WebSocketConnectError(.upgradeDeclined, "declined", httpStatus: status)
            #expect(SessionFailure.fromConnect(error).kind == kind, "\(String(describing: status))")
        }
    }
}
