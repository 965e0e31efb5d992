import HarkCascade
import HarkCore
import HarkGemini
import Testing

/// The cascade's turn-taking as a value.
@Suite struct CascadeMachineTests {
    func chunk(_ text: String, thought: Bool = false, signature: String? = nil) -> GenerateContentChunk {
        GenerateContentChunk(candidates: [
            .init(
                content: Content(
                    role: "model",
                    parts: [Part(text: text, thought: thought ? true : nil, thoughtSignature: signature)]
                )
            )
        ])
    }

    func sent(_ actions: [CascadeMachine.Action]) -> [String] {
        actions.compactMap { if case .speak(let text) = $0 { text } else { nil } }
    }

    /// What goes to the services (the events left out).
    func commands(_ actions: [CascadeMachine.Action]) -> [CascadeMachine.Action] {
        actions.filter { if case .emit = $0 { false } else { true } }
    }

    func events(_ actions: [CascadeMachine.Action]) -> [SessionEvent] {
        actions.compactMap { if case .emit(let event) = $0 { event } else { nil } }
    }

    @Test func aTurnEndsOnEndOfSpeechAndItsTranscriptInEitherOrder() {
        for transcriptFirst in [true, false] {
            var machine = CascadeMachine()
            _ = machine.speechStarted()
            var actions: [CascadeMachine.Action] = []
            if transcriptFirst {
                actions += machine.transcribed("what is the time")
                #expect(machine.phase == .listening)
                actions += machine.speechEnded()
            } else {
                actions += machine.speechEnded()
                #expect(machine.phase == .listening)
                actions += machine.transcribed("what is the time")
            }
            #expect(machine.phase == .thinking)
            #expect(actions.contains(.requestReply([.text("what is the time", role: "user")])))
            #expect(
                events(actions).contains(
                    .transcript(Transcript(role: .user, segment: "user-1", text: "what is the time", isFinal: true))
                )
            )
        }
        var empty = CascadeMachine()
        _ = empty.speechEnded()
        #expect(!empty.transcribed("  ").contains { if case .requestReply = $0 { true } else { false } })
        #expect(empty.phase == .listening)
    }

    @Test func sentencesGoToTheSpeechSocketAsTheyStreamAndThoughtsNever() {
        var machine = CascadeMachine()
        _ = machine.userText("hello")
        #expect(sent(machine.replyChunk(chunk("let me think", thought: true))).isEmpty)
        #expect(sent(machine.replyChunk(chunk("Hi there. How"))) == ["Hi there."])
        let audio = machine.speechAudio([1, 2, 3], sampleRate: 24_000)
        #expect(
            events(audio) == [.conversation(.speaking), .audio(AudioChunk(samples: [1, 2, 3], sampleRate: 24_000))]
        )
        // The first sentence's flush is done; the reply is not.
        #expect(events(machine.speechFinished()).isEmpty)
        // A sentence that ends with its piece goes at once, not when the stream ends.
        #expect(sent(machine.replyChunk(chunk(" are you?", signature: "sig"))) == ["How are you?"])
        let done = machine.replyFinished()
        #expect(sent(done) == [])
        #expect(done.last == .flushSpeech)
        #expect(machine.phase == .answering)
        let end = events(machine.speechFinished())
        #expect(end.contains(.turnComplete) && end.last == .conversation(.listening))
        // The model turn went into the history as received: the thought, the text, the signature.
        let model = machine.history.last
        #expect(model?.role == "model")
        #expect(model?.parts.map(\.thought) == [true, nil, nil])
        #expect(model?.parts.last?.thoughtSignature == "sig")
    }

    @Test func aShortFirstSentenceIsFlushedAtOnceAndTheReplyEndsWithTheLastFlushsFinal() {
        var machine = CascadeMachine(speechBufferSize: 50)
        _ = machine.userText("hello")
        // The speech service would hold "Hello!" until it has 50 characters: it is flushed at once.
        #expect(commands(machine.replyChunk(chunk("Hello! How"))) == [.speak("Hello!"), .flushSpeech])
        // What follows fills the buffer as usual: no flush until the reply ends.
        let next = commands(machine.replyChunk(chunk(" are you today? I am glad you came. ")))
        #expect(next == [.speak("How are you today?"), .speak("I am glad you came.")])
        #expect(!next.contains(.flushSpeech))
        #expect(commands(machine.replyFinished()) == [.flushSpeech])
        _ = machine.speechAudio([1, 2, 3], sampleRate: 24_000)
        // The first flush's final does not end the reply; the last one does.
        #expect(!events(machine.speechFinished()).contains(.turnComplete))
        #expect(machine.phase == .answering)
        #expect(events(machine.speechFinished()).contains(.turnComplete))
        #expect(machine.phase == .listening)

        // A first sentence long enough to be synthesized unasked needs no flush of its own.
        let long = "This first sentence is long enough for the speech service to start on it."
        _ = machine.userText("again")
        #expect(commands(machine.replyChunk(chunk(long + " More"))) == [.speak(long)])

        // A reply that is one short sentence: its early flush is its only one, and its final ends the reply
        // whether it comes before or after the text's end.
        for finalFirst in [true, false] {
            var short = CascadeMachine(speechBufferSize: 50)
            _ = short.userText("hi")
            #expect(commands(short.replyChunk(chunk("Hi! "))) == [.speak("Hi!"), .flushSpeech])
            _ = short.speechAudio([1], sampleRate: 24_000)
            if finalFirst {
                #expect(events(short.speechFinished()).isEmpty)
                #expect(events(short.replyFinished()).contains(.turnComplete))
            } else {
                #expect(!short.replyFinished().contains(.flushSpeech))
                #expect(events(short.speechFinished()).contains(.turnComplete))
            }
            #expect(short.phase == .listening)
        }
    }

    @Test func bargeInAbandonsTheReplyAndKeepsOnlyWhatWasHeard() {
        var machine = CascadeMachine(samplesPerCharacter: 10)
        _ = machine.userText("tell me a story")
        _ = machine.replyChunk(chunk("Once upon a time there was a king. He had three daughters. "))
        _ = machine.speechAudio(Array(repeating: 1, count: 1000), sampleRate: 24_000)
        let actions = machine.localSpeechStarted(played: 250)  // 25 characters' worth
        #expect(actions.contains(.cancelReply) && actions.contains(.replaceSpeech))
        #expect(events(actions).contains(.interrupted))
        #expect(machine.phase == .listening)
        let heard = machine.history.last
        #expect(heard?.role == "model")
        let text = heard?.parts.first?.text ?? ""
        #expect(text.hasSuffix("…") && text.count < 50 && text.hasPrefix("Once upon a time"))
        // Late chunks of the abandoned reply are dropped.
        #expect(sent(machine.replyChunk(chunk("And then. "))).isEmpty)
        // Nothing played: nothing of the reply is kept.
        var quiet = CascadeMachine()
        _ = quiet.userText("hi")
        _ = quiet.replyChunk(chunk("Hello. "))
        _ = quiet.speechStarted(played: 0)
        #expect(quiet.history.map(\.role) == ["user"])
    }

    @Test func aToolCallIsRunAndTheModelAnswersAgainWithItsResult() throws {
        var machine = CascadeMachine()
        _ = machine.userText("what time is it")
        let call = GenerateContentChunk(candidates: [
            .init(
                content: Content(
                    role: "model",
                    parts: [Part(functionCall: FunctionCall(id: nil, name: "get_time", args: [:]))]
                )
            )
        ])
        let started = machine.replyChunk(call)
        let run = try #require(
            started.compactMap { if case .runTool(let call) = $0 { call } else { nil } }.first
        )
        #expect(run.id == "call-1" && run.name == "get_time")
        // The result before the stream's end: the model answers again only once both are in.
        #expect(
            !machine.toolFinished("call-1", name: "get_time", result: ["time": "12:00"]).contains {
                if case .requestReply = $0 { true } else { false }
            }
        )
        let again = machine.replyFinished()
        let request = try #require(
            again.compactMap { if case .requestReply(let contents) = $0 { contents } else { nil } }.first
        )
        #expect(request.map(\.role) == ["user", "model", "user"])
        #expect(request.last?.parts.first?.functionResponse?.response == ["time": "12:00"])
        #expect(machine.phase == .thinking)
    }

    @Test func aFailedReplyIsSaidAndTheTurnEnds() {
        var machine = CascadeMachine()
        _ = machine.userText("hi")
        let actions = machine.replyFailed("HTTP 503")
        #expect(actions.contains(.debug("the reply failed: HTTP 503")))
        #expect(events(actions).contains(.answerFailed("HTTP 503")))
        #expect(events(actions).contains(.turnComplete))
        #expect(machine.phase == .listening)
    }

    @Test func aRefusedKeyStopsTheReplyWithoutCompletingTheTurn() {
        var machine = CascadeMachine()
        _ = machine.userText("hi")
        let actions = machine.replyRefused("Gemini refused the API key (HTTP 401)")
        #expect(actions.contains(.cancelReply))
        #expect(events(actions).contains(.answerFailed("Gemini refused the API key (HTTP 401)")))
        #expect(!events(actions).contains(.turnComplete))
        #expect(events(actions).last == .conversation(.listening))
        #expect(machine.phase == .listening)
    }

    @Test func theHistoryIsBoundedAndStartsWithAUserTurn() {
        var machine = CascadeMachine(historyTurns: 4, historyCharacters: 1000)
        for number in 1...5 {
            _ = machine.userText("question \(number)")
            _ = machine.replyChunk(chunk("Answer \(number). "))
            _ = machine.replyFinished()
            _ = machine.speechFinished()
        }
        #expect(machine.history.count <= 4)
        #expect(machine.history.first?.role == "user")
        #expect(machine.history.first?.parts.first?.text == "question 4")
    }
}
