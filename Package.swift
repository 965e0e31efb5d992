// swift-tools-version: 6.2
import PackageDescription

// The targets are grouped by layer, and Sources/ holds one folder per layer, in the order of their dependencies:
// a target depends only on targets of its own layer or of an earlier one (scripts/check-layers checks it). The
// thin C boundary; the core (vocabulary and seams); the platform (threads, native libraries, YAML, the clock); the
// devices; the adapters (network, systemd, LiveKit's library); the backends; the appliance; the commands; then
// what only tests and tools use: the simulators, test doubles, tools (benchmarks, fuzz targets).

/// Every target of Hark builds in Swift 6 language mode with warnings treated as errors.
let strict: [SwiftSetting] = [
    .treatAllWarnings(as: .error),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let logging: Target.Dependency = .product(name: "Logging", package: "swift-log")
let numerics: Target.Dependency = .product(name: "RealModule", package: "swift-numerics")
let argumentParser: Target.Dependency = .product(name: "ArgumentParser", package: "swift-argument-parser")
let deque: Target.Dependency = .product(name: "DequeModule", package: "swift-collections")
let nio: [Target.Dependency] = [
    .product(name: "NIOCore", package: "swift-nio"),
    .product(name: "NIOPosix", package: "swift-nio"),
    .product(name: "NIOSSL", package: "swift-nio-ssl"),
]
let nioServer: [Target.Dependency] =
    nio + [
        .product(name: "NIOHTTP1", package: "swift-nio"),
        .product(name: "NIOWebSocket", package: "swift-nio"),
    ]

/// A Swift module of Hark in `Sources/LAYER/NAME`.
func module(_ name: String, _ layer: String, _ dependencies: [Target.Dependency] = []) -> Target {
    .target(name: name, dependencies: dependencies, path: "Sources/\(layer)/\(name)", swiftSettings: strict)
}

/// An executable of Hark in `Sources/LAYER/NAME`.
func executable(_ name: String, _ layer: String, _ dependencies: [Target.Dependency]) -> Target {
    .executableTarget(name: name, dependencies: dependencies, path: "Sources/\(layer)/\(name)", swiftSettings: strict)
}

/// A C library from Debian, found with pkg-config (`Sources/C/NAME` holds its module map).
func cLibrary(_ name: String, pkgConfig: String, apt: String) -> Target {
    .systemLibrary(name: name, path: "Sources/C/\(name)", pkgConfig: pkgConfig, providers: [.apt([apt])])
}

// MARK: Core: the backend-neutral session interface and value types; knows no hardware, no C, no NIO. Beside it the
// kit a backend is written with: the session runtime and its connection phases, the reconnect rule, the input
// queue, server-sent events, flexible decoding, the resumption store, transcripts and history.
let core: [Target] = [
    module("HarkCore", "Core", [logging, numerics, deque]),
    module("HarkBackendKit", "Core", ["HarkCore", logging]),
]

// MARK: Platform: what the devices and adapters stand on: named threads, where native libraries are, YAML, the one
// monotonic clock.
let platform: [Target] = [
    cLibrary("CYAML", pkgConfig: "yaml-0.1", apt: "libyaml-dev"),
    module("HarkPlatform", "Platform", ["HarkCore", "CYAML"]),
    // A helper program started with a socket pair (posix_spawn), its link served by a thread of its own.
    module("HarkHelperProcess", "Platform", ["HarkPlatform"]),
]

// MARK: Backends: one folder each, each a protocol and a session over the core's seam.
let backends: [Target] = [
    module("HarkGemini", "Backends", ["HarkCore", "HarkBackendKit", logging]),
    module("HarkDatagrid", "Backends", ["HarkCore", "HarkBackendKit", logging]),
    // Sarvam speech-to-text -> Gemini text -> Sarvam text-to-speech (its Gemini types come from HarkGemini).
    module("HarkCascade", "Backends", ["HarkCore", "HarkBackendKit", "HarkGemini", logging]),
    // A LiveKit room with a voice agent: the settings, the tokens and every decision here; the room's work in the
    // helper hark-livekit (LiveKit's Rust core, WebRTC and full Foundation stay out of hark), over a socket pair
    // speaking HarkLiveKitWire.
    module(
        "HarkLiveKitAgent",
        "Backends",
        ["HarkCore", "HarkBackendKit", "HarkLiveKitWire", "HarkHelperProcess", "HarkPlatform", logging]
    ),
    // The registry: the one list of backends that every command uses.
    module(
        "HarkBackends",
        "Backends",
        ["HarkCore", "HarkGemini", "HarkDatagrid", "HarkCascade", "HarkLiveKitAgent", argumentParser]
    ),
]

// MARK: Devices: audio (ALSA, DSP), the LED engine and gestures, board profiles, GPIO / evdev / terminal I/O.
let devices: [Target] = [
    cLibrary("CALSA", pkgConfig: "alsa", apt: "libasound2-dev"),
    cLibrary("CSpeexDSP", pkgConfig: "speexdsp", apt: "libspeexdsp-dev"),
    cLibrary("CGPIO", pkgConfig: "libgpiod", apt: "libgpiod-dev"),
    module("HarkDSP", "Devices", ["HarkCore", "CSpeexDSP"]),
    module("HarkAudio", "Devices", ["HarkCore", "HarkDSP", "HarkPlatform", "CALSA", "CSpeexDSP"]),
    module("HarkIndicators", "Devices", ["HarkCore"]),
    module("HarkBoard", "Devices", ["HarkCore", "HarkIndicators", "HarkPlatform"]),
    module("HarkBoardIO", "Devices", ["HarkBoard", "HarkCore", "HarkIndicators", "HarkPlatform", "CGPIO"]),
    // The wake word: microWakeWord and openWakeWord models through the TensorFlow Lite C library, opened with dlopen
    // (nothing links against it: scripts/setup or the package brings it, and without it every other part works);
    // CTensorFlowLite is a header of its types only.
    .systemLibrary(name: "CTensorFlowLite", path: "Sources/C/CTensorFlowLite"),
    module("HarkWake", "Devices", ["HarkCore", "HarkPlatform", "CTensorFlowLite"]),
    // Music and radio: FFmpeg's demuxers, decoders and resampler (Debian's libav* 5.1), decoding on a thread of its
    // own into a SampleRing the playback's media lane reads.
    // Its headers from Debian's -dev packages at build time; the libraries opened with dlopen at run time, so that
    // nothing links against FFmpeg (a device that never plays media never loads it).
    .target(name: "CFFmpeg", path: "Sources/C/CFFmpeg"),
    module("HarkMedia", "Devices", ["HarkCore", "HarkPlatform", "HarkAudio", "CFFmpeg", logging]),
]

// MARK: Adapters: WebSockets and HTTPS on SwiftNIO (one event loop), sd_notify.
let adapters: [Target] = [
    // The Swift runtime's global-job hook, so that Swift concurrency can run on the NIO event loop.
    .target(name: "CConcurrencyHooks", path: "Sources/C/CConcurrencyHooks"),
    module(
        "HarkNet",
        "Adapters",
        ["HarkCore", "CConcurrencyHooks", logging]
            + nio + [
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ]
    ),
    module(
        "HarkHTTP",
        "Adapters",
        ["HarkCore", "HarkNet", logging, .product(name: "NIOHTTP1", package: "swift-nio")] + nio
    ),
    // Model Context Protocol servers as the agent's tools: streamable HTTP over the core's HTTP client, stdio over a
    // child process.
    module("HarkMCP", "Adapters", ["HarkCore", "HarkBackendKit", "HarkHelperProcess", "HarkPlatform", logging]),
    // The daemon's control socket (a Unix socket on the one event loop) and the commands' client for it.
    module(
        "HarkControl",
        "Adapters",
        [
            "HarkCore", logging, .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]
    ),
    cLibrary("CSystemd", pkgConfig: "libsystemd", apt: "libsystemd-dev"),
    module("HarkSystemd", "Adapters", ["HarkCore", "HarkPlatform", "CSystemd"]),
    // LiveKit's FFI protocol as Swift types, generated by scripts/generate-livekit-protos from the pinned livekit
    // wheel's descriptors and committed (never generated at build time).
    module("HarkLiveKitProto", "Adapters", [.product(name: "SwiftProtobuf", package: "swift-protobuf")]),
    // LiveKit's Rust core (liblivekit_ffi.so, WebRTC inside), opened with dlopen only when the LiveKit backend is
    // used (nothing links against it: scripts/setup or the package brings it): the one owner of its lifecycle,
    // its events in a bounded queue, rooms, audio sources and streams, data streams.
    module(
        "HarkLiveKit",
        "Adapters",
        [
            "HarkCore", "HarkPlatform", "HarkLiveKitProto", logging,
            .product(name: "SwiftProtobuf", package: "swift-protobuf"),
        ]
    ),
    // The protocol between hark's LiveKit backend and its helper hark-livekit, as a value codec.
    module("HarkLiveKitWire", "Adapters", ["HarkCore", logging]),
    // The LiveKit helper's work (hark-livekit): joins the room hark asks for over the socket pair; mints development
    // tokens with HarkPlatform's HMAC-SHA256.
    module(
        "HarkLiveKitHelper",
        "Adapters",
        ["HarkCore", "HarkPlatform", "HarkLiveKit", "HarkLiveKitWire", "HarkHelperProcess", logging]
    ),
]

// MARK: The appliance: the configuration file, and the supervisor's pure logic (modes, states, watchdog).
let appliance: [Target] = [
    module(
        "HarkConfig",
        "Appliance",
        ["HarkCore", "HarkPlatform", "HarkBoard", "HarkBackends", "HarkWake", "HarkMCP", "HarkMedia"]
    ),
    module(
        "HarkAppliance",
        "Appliance",
        ["HarkCore", logging, numerics, .product(name: "Histogram", package: "hdrhistogram-swift")]
    ),
]

// MARK: The commands (run, converse, status, config, doctor) as a library, so tests drive them in-process too.
let commands: [Target] = [
    module(
        "HarkApp",
        "Commands",
        [
            "HarkCore", "HarkBackends", "HarkNet", "HarkHTTP", "HarkDSP", "HarkAudio", "HarkBoard", "HarkBoardIO",
            "HarkConfig", "HarkAppliance", "HarkSystemd", "HarkWake", "HarkPlatform", "HarkControl", "HarkMCP",
            "HarkGemini", "HarkMedia", argumentParser,
            logging,
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            .product(name: "Histogram", package: "hdrhistogram-swift"),
        ]
    ),
    executable("hark", "Commands", ["HarkApp"]),
    // The LiveKit backend's helper, started by hark (its own package: hark-livekit).
    executable("hark-livekit", "Commands", ["HarkLiveKitHelper", "HarkLiveKitWire", "HarkHelperProcess"]),
]

// MARK: Simulators: the services on loopback, faithfully, with their faults.
let simulators: [Target] = [
    // What every simulator is served by: the HTTP/WebSocket server on loopback (TLS with its own CA, made by the
    // openssl command), the connection recorder tests wait on, the process wrapper.
    module("HarkSimulatorKit", "Simulators", ["HarkCore", logging] + nioServer),
    module(
        "HarkLiveSimulator",
        "Simulators",
        ["HarkCore", "HarkBackendKit", "HarkGemini", "HarkSimulatorKit", logging] + nioServer
    ),
    module(
        "HarkDatagridSimulator",
        "Simulators",
        ["HarkCore", "HarkDatagrid", "HarkSimulatorKit", logging] + nioServer
    ),
    // Sarvam speech-to-text and text-to-speech, and Gemini's streamed text: the cascade's services.
    module(
        "HarkCascadeSimulator",
        "Simulators",
        ["HarkCore", "HarkBackendKit", "HarkCascade", "HarkGemini", "HarkSimulatorKit", logging] + nioServer
    ),
    executable("hark-live-sim", "Simulators", ["HarkLiveSimulator", "HarkSimulatorKit", argumentParser, logging]),
    executable(
        "hark-cascade-sim",
        "Simulators",
        ["HarkCascadeSimulator", "HarkSimulatorKit", "HarkCore", argumentParser, logging]
    ),
    executable(
        "hark-datagrid-sim",
        "Simulators",
        ["HarkDatagridSimulator", "HarkSimulatorKit", "HarkCore", argumentParser, logging]
    ),
]

// MARK: Test doubles, shipped as a module.
let testKit: [Target] = [
    module("HarkTestKit", "TestKit", ["HarkCore", "HarkAudio", logging, numerics])
]

// MARK: Tools: the benchmarks and the fuzz targets.
let tools: [Target] = [
    // webrtc-audio-processing (C++ only): the system library carries pkg-config's -I and the link (SwiftPM
    // drops its -D flags with a warning; the shim defines them); the shim gives it a C header. Only the
    // benchmark uses it, to compare with speexdsp's canceller.
    cLibrary(
        "CWebRTCAudioProcessingLibrary",
        pkgConfig: "webrtc-audio-processing",
        apt: "libwebrtc-audio-processing-dev"
    ),
    .target(
        name: "CWebRTCAudioProcessing",
        dependencies: ["CWebRTCAudioProcessingLibrary"],
        path: "Sources/C/CWebRTCAudioProcessing",
        cxxSettings: [.define("WEBRTC_POSIX"), .define("WEBRTC_AUDIO_PROCESSING_ONLY_BUILD")]
    ),
    executable("hark-audio-bench", "Tools", ["HarkAudio", "HarkCore", "HarkDSP", "CWebRTCAudioProcessing"]),
    // The cascade's latency split into the services' share and Hark's own, against its simulator in-process.
    executable(
        "hark-cascade-bench",
        "Tools",
        ["HarkCascade", "HarkCascadeSimulator", "HarkCore", "HarkNet", "HarkHTTP", argumentParser, logging] + nio
    ),
    // The latency an MCP tool call adds, the server's share and Hark's, against the MCP test server (scripts/bench-mcp).
    executable("hark-mcp-bench", "Tools", ["HarkMCP", "HarkGemini", "HarkCore", "HarkHTTP", argumentParser, logging]),
    // The CPU of decoding and mixing one stream per audio minute, and peak RSS (scripts/bench-media).
    executable("hark-media-bench", "Tools", ["HarkMedia", "HarkAudio", "HarkCore", logging]),
    // libFuzzer targets: scripts/fuzz builds them with -sanitize=fuzzer,address -D HARK_FUZZING; a plain build
    // makes each a runner that replays the input files named. Extern: @_extern(c) for libFuzzer's driver.
    .target(
        name: "HarkFuzzKit",
        path: "Sources/Tools/HarkFuzzKit",
        swiftSettings: strict + [.enableExperimentalFeature("Extern")]
    ),
    executable("fuzz-gemini-decoder", "Tools", ["HarkFuzzKit", "HarkCore", "HarkGemini"]),
    executable("fuzz-datagrid-decoder", "Tools", ["HarkFuzzKit", "HarkCore", "HarkDatagrid"]),
    executable("fuzz-config-parser", "Tools", ["HarkFuzzKit", "HarkConfig"]),
    executable("fuzz-board-parser", "Tools", ["HarkFuzzKit", "HarkBoard"]),
    executable("fuzz-sse-parser", "Tools", ["HarkFuzzKit", "HarkCore", "HarkBackendKit"]),
    executable("fuzz-resampler", "Tools", ["HarkFuzzKit", "HarkCore", "HarkDSP", "HarkAudio"]),
    executable("fuzz-wav-reader", "Tools", ["HarkFuzzKit", "HarkCore", "HarkAudio"]),
    executable("fuzz-device-tools", "Tools", ["HarkFuzzKit", "HarkCore", "HarkAppliance"]),
    executable("fuzz-command-line", "Tools", ["HarkFuzzKit", "HarkApp", argumentParser]),
    executable(
        "fuzz-remote-text",
        "Tools",
        ["HarkFuzzKit", "HarkCore", "HarkBackendKit", "HarkGemini", "HarkCascade"]
    ),
]

// MARK: Tests
func tests(_ name: String, _ dependencies: [Target.Dependency]) -> Target {
    .testTarget(name: name, dependencies: dependencies, swiftSettings: strict)
}

let testTargets: [Target] = [
    tests("HarkCoreTests", ["HarkCore", "HarkBackendKit", "HarkTestKit", "HarkDSP", "HarkAudio", "HarkHTTP", logging]),
    tests("HarkGeminiTests", ["HarkCore", "HarkBackendKit", "HarkGemini", "HarkTestKit"]),
    tests(
        "HarkCascadeTests",
        [
            "HarkCore", "HarkBackendKit", "HarkCascade", "HarkGemini", "HarkCascadeSimulator", "HarkNet", "HarkHTTP",
            "HarkTestKit",
            logging,
        ]
    ),
    tests(
        "HarkDatagridTests",
        [
            "HarkCore", "HarkBackendKit", "HarkDatagrid", "HarkDatagridSimulator", "HarkLiveSimulator",
            "HarkSimulatorKit", "HarkNet",
            "HarkHTTP",
            "HarkTestKit", "HarkApp", logging,
        ]
    ),
    tests("HarkAudioTests", ["HarkAudio", "HarkCore", "HarkDSP", "HarkPlatform"]),
    tests("HarkWakeTests", ["HarkWake", "HarkCore", "HarkAudio", "HarkTestKit"]),
    // The media player against real HTTP servers on loopback (ICY metadata, stalls, trickles) and hostile files.
    tests("HarkMediaTests", ["HarkMedia", "HarkCore", "HarkAudio", "HarkPlatform", "HarkTestKit", logging]),
    tests(
        "HarkLiveKitTests",
        [
            "HarkLiveKit", "HarkLiveKitProto", "HarkCore", "HarkTestKit", "HarkPlatform", logging,
            .product(name: "SwiftProtobuf", package: "swift-protobuf"),
        ]
    ),
    tests(
        "HarkLiveKitAgentTests",
        [
            "HarkLiveKitAgent", "HarkLiveKitWire", "HarkLiveKitHelper", "HarkHelperProcess", "HarkLiveKit", "HarkCore",
            "HarkBackendKit",
            "HarkApp", "HarkAudio", "HarkTestKit", "HarkPlatform", logging,
        ]
    ),
    tests("HarkIndicatorsTests", ["HarkIndicators", "HarkCore", "HarkTestKit"]),
    tests("HarkBoardTests", ["HarkBoard", "HarkIndicators", "HarkCore", "HarkPlatform", "HarkTestKit"]),
    tests(
        "HarkBoardIOTests",
        ["HarkBoardIO", "HarkBoard", "HarkIndicators", "HarkCore", "HarkTestKit", "HarkPlatform", "CGPIO"]
    ),
    tests("HarkSystemdTests", ["HarkCore", "HarkSystemd", "HarkTestKit"]),
    tests(
        "HarkConfigTests",
        [
            "HarkConfig", "HarkCore", "HarkApp", "HarkBoard", "HarkBackends", "HarkGemini", "HarkDatagrid", "HarkWake",
            "HarkMCP", "HarkTestKit", logging,
            argumentParser,
        ]
    ),
    tests("HarkApplianceTests", ["HarkAppliance", "HarkCore", "HarkIndicators", "HarkTestKit", "HarkPlatform"]),
    // The commands' parts as values, on the scripted devices and a manual clock.
    tests("HarkAppTests", ["HarkApp", "HarkCore", "HarkTestKit"]),
    tests(
        "HarkNetTests",
        [
            "HarkCore", "HarkNet", "HarkHTTP", "HarkGemini", "HarkDatagrid", "HarkTestKit", "HarkLiveSimulator",
            "HarkSimulatorKit", logging,
        ]
            + nioServer
    ),
    tests("HarkInstallTests", ["HarkTestKit"]),
    // The MCP client against the official Python SDK's server (scripts/lib/mcp-test-server.py in .venv-mcp).
    tests("HarkMCPTests", ["HarkMCP", "HarkCore", "HarkHTTP", "HarkTestKit", "HarkGemini", logging]),
    // The control socket against hostile clients, on real Unix sockets.
    tests("HarkControlTests", ["HarkControl", "HarkCore", "HarkTestKit", logging]),
    tests(
        "HarkIntegrationTests",
        [
            "HarkCore", "HarkBackendKit", "HarkGemini", "HarkNet", "HarkHTTP", "HarkLiveSimulator", "HarkTestKit",
            "HarkApp",
            "HarkAudio", "HarkConfig", "HarkAppliance", "HarkSystemd", "HarkBoard", "HarkBoardIO", "HarkIndicators",
            "HarkCascadeSimulator", "HarkSimulatorKit", "HarkWake", "HarkMCP", logging,
            .product(name: "WSClient", package: "swift-websocket"),
        ]
    ),
]

let package = Package(
    name: "hark",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "hark", targets: ["hark"]),
        .executable(name: "hark-livekit", targets: ["hark-livekit"]),
        .executable(name: "hark-live-sim", targets: ["hark-live-sim"]),
        .executable(name: "hark-cascade-sim", targets: ["hark-cascade-sim"]),
        .library(name: "HarkCore", targets: ["HarkCore"]),
        .library(name: "HarkGemini", targets: ["HarkGemini"]),
        .library(name: "HarkTestKit", targets: ["HarkTestKit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/hummingbird-project/swift-websocket.git", from: "1.6.2"),
        .package(url: "https://github.com/apple/swift-numerics.git", from: "1.1.1"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/apple/swift-protobuf.git", from: "1.39.0"),
    ],
    targets: core + platform + devices + adapters + backends + appliance + commands + simulators + testKit + tools
        + testTargets
)
