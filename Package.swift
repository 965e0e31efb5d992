// swift-tools-version: 6.2
import PackageDescription

/// Every target of Hark builds in Swift 6 language mode with warnings treated as errors.
let strict: [SwiftSetting] = [
    .treatAllWarnings(as: .error),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "hark",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "hark", targets: ["hark"]),
        .executable(name: "hark-live-sim", targets: ["hark-live-sim"]),
        .library(name: "HarkCore", targets: ["HarkCore"]),
        .library(name: "HarkGemini", targets: ["HarkGemini"]),
        .library(name: "HarkTestKit", targets: ["HarkTestKit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/hummingbird-project/swift-websocket.git", from: "1.6.2"),
        .package(url: "https://github.com/apple/swift-numerics.git", from: "1.1.1"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
    ],
    targets: [
        // MARK: Core: knows no hardware, no C, no NIO.
        .target(
            name: "HarkCore",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "RealModule", package: "swift-numerics"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "HarkGemini",
            dependencies: ["HarkCore", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        .target(
            name: "HarkDatagrid",
            dependencies: ["HarkCore", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),

        // MARK: Adapters
        .target(
            name: "HarkNet",
            dependencies: [
                "HarkCore",
                .product(name: "WSClient", package: "swift-websocket"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                "CConcurrencyHooks",
            ],
            swiftSettings: strict
        ),
        // The Swift runtime's global-job hook, so that Swift concurrency can run on the NIO event loop.
        .target(name: "CConcurrencyHooks"),
        .target(
            name: "HarkHTTP",
            dependencies: [
                "HarkCore", "HarkNet",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        .systemLibrary(
            name: "CSpeexDSP",
            pkgConfig: "speexdsp",
            providers: [.apt(["libspeexdsp-dev"])]
        ),
        .target(
            name: "HarkDSP",
            dependencies: ["HarkCore", "CSpeexDSP"],
            swiftSettings: strict
        ),
        .systemLibrary(
            name: "CALSA",
            pkgConfig: "alsa",
            providers: [.apt(["libasound2-dev"])]
        ),
        .target(
            name: "HarkAudio",
            dependencies: ["HarkCore", "HarkDSP", "CALSA", "CSpeexDSP"],
            swiftSettings: strict
        ),
        // webrtc-audio-processing (C++ only): the system library carries pkg-config's -I and the link (SwiftPM
        // drops its -D flags with a warning; the shim defines them); the shim gives it a C header. Only the
        // benchmark uses it, to compare with speexdsp's canceller.
        .systemLibrary(
            name: "CWebRTCAudioProcessingLibrary",
            pkgConfig: "webrtc-audio-processing",
            providers: [.apt(["libwebrtc-audio-processing-dev"])]
        ),
        .target(
            name: "CWebRTCAudioProcessing",
            dependencies: ["CWebRTCAudioProcessingLibrary"],
            cxxSettings: [.define("WEBRTC_POSIX"), .define("WEBRTC_AUDIO_PROCESSING_ONLY_BUILD")]
        ),
        .executableTarget(
            name: "hark-audio-bench",
            dependencies: ["HarkAudio", "HarkCore", "HarkDSP", "CWebRTCAudioProcessing"],
            swiftSettings: strict
        ),

        // MARK: Board I/O: LED engine and gestures (pure), board profiles, button and LED backends
        .target(
            name: "HarkIndicators",
            dependencies: ["HarkCore"],
            swiftSettings: strict
        ),
        .systemLibrary(
            name: "CYAML",
            pkgConfig: "yaml-0.1",
            providers: [.apt(["libyaml-dev"])]
        ),
        .target(
            name: "HarkBoard",
            dependencies: ["HarkCore", "HarkIndicators", "CYAML"],
            swiftSettings: strict
        ),
        .systemLibrary(
            name: "CGPIO",
            pkgConfig: "libgpiod",
            providers: [.apt(["libgpiod-dev"])]
        ),
        .target(
            name: "HarkBoardIO",
            dependencies: ["HarkBoard", "HarkIndicators", "CGPIO"],
            swiftSettings: strict
        ),

        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        .target(
            name: "HarkSystemd",
            dependencies: ["HarkCore", "CSystemd"],
            swiftSettings: strict
        ),

        // MARK: The appliance: configuration file, and the supervisor's pure logic (modes, states, watchdog)
        .target(
            name: "HarkConfig",
            dependencies: ["HarkCore", "HarkBoard"],
            swiftSettings: strict
        ),
        .target(
            name: "HarkAppliance",
            dependencies: [
                "HarkCore", "HarkIndicators",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "RealModule", package: "swift-numerics"),
            ],
            swiftSettings: strict
        ),

        // MARK: The Live simulator
        .target(
            name: "HarkLiveSimulator",
            dependencies: [
                "HarkCore",
                "HarkGemini",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        // MARK: The Datagrid simulator
        .target(
            name: "HarkDatagridSimulator",
            dependencies: [
                "HarkCore",
                "HarkDatagrid",
                "HarkLiveSimulator",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        // MARK: Test doubles, shipped as a module
        .target(
            name: "HarkTestKit",
            dependencies: [
                "HarkCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "RealModule", package: "swift-numerics"),
            ],
            swiftSettings: strict
        ),

        // MARK: The commands (converse, run, ...) as a library, so tests drive them in-process too
        .target(
            name: "HarkApp",
            dependencies: [
                "HarkCore", "HarkGemini", "HarkDatagrid", "HarkNet", "HarkHTTP", "HarkDSP",
                "HarkAudio", "HarkBoard", "HarkBoardIO", "HarkConfig", "HarkAppliance", "HarkSystemd",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            swiftSettings: strict
        ),

        // MARK: Executables: thin wiring only
        .executableTarget(
            name: "hark",
            dependencies: ["HarkApp"],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "hark-live-sim",
            dependencies: [
                "HarkLiveSimulator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        .executableTarget(
            name: "hark-datagrid-sim",
            dependencies: [
                "HarkDatagridSimulator",
                "HarkCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        // MARK: Fuzz targets
        // libFuzzer targets: scripts/fuzz builds them with -sanitize=fuzzer,address -D HARK_FUZZING; a plain build
        // makes each a runner that replays the input files named. Extern: @_extern(c) for libFuzzer's driver.
        .target(
            name: "HarkFuzzKit",
            swiftSettings: strict + [.enableExperimentalFeature("Extern")]
        ),
        .executableTarget(
            name: "fuzz-gemini-decoder",
            dependencies: ["HarkFuzzKit", "HarkCore", "HarkGemini"],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "fuzz-datagrid-decoder",
            dependencies: ["HarkFuzzKit", "HarkCore", "HarkDatagrid"],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "fuzz-config-parser",
            dependencies: ["HarkFuzzKit", "HarkConfig"],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "fuzz-board-parser",
            dependencies: ["HarkFuzzKit", "HarkBoard"],
            swiftSettings: strict
        ),

        // MARK: Tests
        .testTarget(
            name: "HarkConfigTests",
            dependencies: ["HarkConfig", "HarkCore", "HarkApp"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HarkApplianceTests",
            dependencies: ["HarkAppliance", "HarkCore", "HarkIndicators", "HarkTestKit"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HarkInstallTests",
            dependencies: [],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HarkSystemdTests",
            dependencies: ["HarkCore", "HarkSystemd", "HarkTestKit"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HarkCoreTests",
            dependencies: ["HarkCore", "HarkTestKit", "HarkDSP", "HarkHTTP"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HarkGeminiTests",
            dependencies: ["HarkCore", "HarkGemini", "HarkTestKit"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HarkAudioTests",
            dependencies: ["HarkAudio", "HarkCore", "HarkDSP"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HarkDatagridTests",
            dependencies: [
                "HarkCore", "HarkDatagrid", "HarkDatagridSimulator", "HarkNet", "HarkHTTP", "HarkTestKit", "HarkApp",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HarkIndicatorsTests",
            dependencies: ["HarkIndicators", "HarkCore", "HarkTestKit"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HarkBoardTests",
            dependencies: ["HarkBoard", "HarkIndicators", "HarkCore", "HarkTestKit"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HarkBoardIOTests",
            dependencies: ["HarkBoardIO", "HarkBoard", "HarkIndicators", "HarkCore", "HarkTestKit", "CGPIO"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HarkIntegrationTests",
            dependencies: [
                "HarkCore", "HarkGemini", "HarkNet", "HarkHTTP", "HarkLiveSimulator", "HarkTestKit", "HarkApp",
                "HarkAudio", "HarkConfig", "HarkAppliance", "HarkSystemd", "HarkBoard", "HarkBoardIO", "HarkIndicators",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "WSClient", package: "swift-websocket"),
            ],
            swiftSettings: strict
        ),
    ]
)
