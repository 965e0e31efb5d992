import Foundation
import HarkBackendKit
import HarkCore
import HarkDatagrid
import Testing

/// Messages as the seed's iOS client and the protocol page show them, decoded and encoded exactly.
@Suite struct GoldenTests {
    let codec = DatagridCodec()

    func server(_ json: String) throws -> DatagridServerMessage {
        try codec.decodeServer(Data(json.utf8)).message
    }

    @Test func seedServerMessages() throws {
        #expect(
            try server(#"{"type":"started","payload":{"session_id":"s1","conversation_id":"c1"}}"#)
                == .started(DatagridStarted(sessionId: "s1", conversationId: "c1"))
        )
        #expect(try server(#"{"type":"ready"}"#) == .ready)
        let audio = try server(#"{"type":"audio","payload":{"data":"AAD/fw=="}}"#)
        guard case .audio(let chunk) = audio else {
            Issue.record("not audio: \(audio)")
            return
        }
        #expect(PCM16.samples(chunk.data.data) == [0, 32767])
        #expect(chunk.rate == nil)
        #expect(
            try server(#"{"type":"tool_call","payload":{"tool_name":"search","status":"started"}}"#)
                == .toolCall(DatagridToolCall(toolName: "search", status: "started"))
        )
        #expect(try server(#"{"type":"interrupted"}"#) == .interrupted)
        #expect(try server(#"{"type":"error","payload":{"message":"boom"}}"#) == .error(DatagridError(message: "boom")))
        #expect(
            try server(
                #"{"type":"ended","payload":{"transcript":[{"role":"user","text":"hi"},{"role":"agent","text":"hello"}]}}"#
            )
                == .ended(
                    DatagridEnded(
                        transcript: [
                            DatagridTranscriptLine(role: "user", text: "hi"),
                            DatagridTranscriptLine(role: "agent", text: "hello"),
                        ]
                    )
                )
        )
    }

    @Test func protocolPageServerMessages() throws {
        #expect(
            try server(#"{"type":"started","payload":{"session_id":"s","conversation_id":"c","message_id":"m"}}"#)
                == .started(DatagridStarted(sessionId: "s", conversationId: "c", messageId: "m"))
        )
        let audio = try server(#"{"type":"audio","payload":{"data":"AQA=","mime_type":"audio/pcm;rate=24000"}}"#)
        guard case .audio(let chunk) = audio else {
            Issue.record("not audio")
            return
        }
        #expect(chunk.rate == 24_000)
        #expect(
            try server(#"{"type":"transcript","payload":{"role":"agent","text":"Hi there"}}"#)
                == .transcript(DatagridTranscriptLine(role: "agent", text: "Hi there"))
        )
        #expect(
            try server(#"{"type":"tool_call","payload":{"tool_name":"kb","status":"failed"}}"#)
                == .toolCall(DatagridToolCall(toolName: "kb", status: "failed"))
        )
        #expect(
            try server(#"{"type":"citation","payload":{"citations":[{"title":"A"}],"timestamp_ms":1200}}"#)
                == .citation(DatagridCitation(citations: [["title": "A"]], timestampMs: 1200))
        )
        #expect(
            try server(#"{"type":"error","payload":{"message":"silence","code":"client_silence_timeout"}}"#)
                == .error(DatagridError(message: "silence", code: "client_silence_timeout"))
        )
        #expect(
            try server(#"{"type":"ended","payload":{"credits_consumed":1.5,"transcript":[]}}"#)
                == .ended(DatagridEnded(creditsConsumed: 1.5, transcript: []))
        )
    }

    @Test func clientMessagesEncodeAsThePageShows() throws {
        let start = DatagridStart(
            agentId: "agent_abc123",
            conversationId: "c1",
            voiceMode: .directAgent,
            config: .init(systemPrompt: "Be brief."),
            initialMessage: "Hello",
            voiceConfig: .init(
                inputTranscription: true,
                outputTranscription: false,
                silenceTimeout: 60,
                silentStart: true,
                voicePreset: "warm",
                segmentMaxDurationMs: 15000,
                silenceCommitMs: 700,
                silenceDiscardRatio: 0.9
            ),
            user: ["name": "kiosk"],
            fileIds: ["f1"],
            knowledgeIds: ["k1"]
        )
        #expect(
            try codec.encode(.start(start))
                == #"{"payload":{"agent_id":"agent_abc123","config":{"system_prompt":"Be brief."},"conversation_id":"c1","file_ids":["f1"],"initial_message":"Hello","knowledge_ids":["k1"],"user":{"name":"kiosk"},"voice_config":{"input_transcription":true,"output_transcription":false,"segment_max_duration_ms":15000,"silence_commit_ms":700,"silence_discard_ratio":0.9,"silence_timeout":60,"silent_start":true,"voice_preset":"warm"},"voice_mode":"direct_agent"},"type":"start"}"#
        )
        #expect(try codec.encode(.start(DatagridStart())) == #"{"payload":{},"type":"start"}"#)
        #expect(
            try codec.encode(.audio(DatagridAudio(data: PCM16.bytes([0, 32767]), mimeType: "audio/pcm;rate=16000")))
                == #"{"payload":{"data":"AAD/fw==","mime_type":"audio/pcm;rate=16000"},"type":"audio"}"#
        )
        #expect(try codec.encode(.text("hi")) == #"{"payload":{"text":"hi"},"type":"text"}"#)
        #expect(try codec.encode(.interrupt) == #"{"type":"interrupt"}"#)
        #expect(try codec.encode(.stop) == #"{"type":"stop"}"#)
        // And back, as the simulator reads them.
        let decoded = try codec.decodeClient(Data(try codec.encode(.start(start)).utf8))
        #expect(decoded.message == .start(start))
        #expect(decoded.unknownFields.isEmpty)
    }

    @Test func handoffAnswer() throws {
        let json = #"""
            {"object":"voice.session","url":"wss://api.datagrid.com/ws/voice?token=tok_1","agent_id":"agent_abc123",
             "start_message":{"type":"start","payload":{"agent_id":"agent_abc123"}},"expires_at":123}
            """#
        let handoff = try JSONDecoder().decode(DatagridHandoff.self, from: Data(json.utf8))
        #expect(handoff.url == "wss://api.datagrid.com/ws/voice?token=tok_1")
        #expect(handoff.agentId == "agent_abc123")
        #expect(
            try codec.encode(raw: handoff.startMessage!) == #"{"payload":{"agent_id":"agent_abc123"},"type":"start"}"#
        )
        #expect(URLRedaction.redact(handoff.url) == "wss://api.datagrid.com/ws/voice?token=REDACTED")
    }

    @Test func unknownTypesAndFieldsAreSkipped() throws {
        let unknown = try codec.decodeServer(Data(#"{"type":"viseme","payload":{"shape":"O"}}"#.utf8))
        #expect(unknown.message == .unknown(type: "viseme"))
        let extra = try codec.decodeServer(
            Data(#"{"type":"transcript","trace":"x","payload":{"role":"user","text":"a","confidence":0.9}}"#.utf8)
        )
        #expect(extra.message == .transcript(DatagridTranscriptLine(role: "user", text: "a")))
        #expect(Set(extra.unknownFields) == ["trace", "payload.confidence"])
        // A known type without its payload is still understood.
        #expect(try server(#"{"type":"ended"}"#) == .ended(DatagridEnded()))
        #expect(throws: (any Error).self) { try codec.decodeServer(Data("{not json".utf8)) }
        #expect(throws: (any Error).self) { try codec.decodeServer(Data(#"{"payload":{}}"#.utf8)) }
    }

    @Test func directURLCarriesTheKeyOnlyRedactedInLogs() {
        let configuration = DatagridConfiguration(apiKey: Secret("k+y/1"), mode: .direct)
        #expect(configuration.directURL == "wss://api.datagrid.com/ws/voice?token=k%2By%2F1")
        #expect(!URLRedaction.redact(configuration.directURL).contains("k%2By"))
        #expect(configuration.handoffURL == "https://api.datagrid.com/v1/voice")
    }
}
