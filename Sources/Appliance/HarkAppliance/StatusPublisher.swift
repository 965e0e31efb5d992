import HarkCore
import Logging

/// Shows the appliance's state everywhere it is shown, the same way: the LEDs, the `STATUS=` line (and a log
/// line when it changes), and the status file `hark status` reads (when it changes, else every few seconds).
struct StatusPublisher {
    let indicator: (any Indicator)?
    let notifier: any ServiceNotifier
    let statusFile: String?
    let logger: Logger
    /// Sees each change of what the LEDs show (tests record the sequence).
    let onShown: @Sendable (ShownState) -> Void
    /// The status as last written.
    var status: ApplianceStatus
    private var lastShown: ShownState?
    /// What was shown when the file was last written.
    private var writtenShown: ShownState?
    private var lastWritten: Duration?
    private var writeFailing = false

    init(
        indicator: (any Indicator)?,
        notifier: any ServiceNotifier,
        statusFile: String?,
        logger: Logger,
        status: ApplianceStatus,
        onShown: @escaping @Sendable (ShownState) -> Void
    ) {
        self.indicator = indicator
        self.notifier = notifier
        self.statusFile = statusFile
        self.logger = logger
        self.status = status
        self.onShown = onShown
    }

    /// True when `input` shows another state than the LEDs show now: then the status line and file are due too
    /// (``publish(_:line:now:force:fill:)``), not only the LEDs (``show(_:)``).
    func changes(_ input: IndicatorInput) -> Bool { input.shown != lastShown }

    /// Shows `input` on the LEDs only: what each microphone frame updates (their level follows the voice).
    mutating func show(_ input: IndicatorInput) {
        indicator?.update(input)
        let shown = input.shown
        guard shown != lastShown else { return }
        lastShown = shown
        onShown(shown)
    }

    /// Shows `input` everywhere, with the status line `line` (on a change of state and on each tick, not each
    /// frame). The file is written when what is shown changed since it was last written, when `force`d, or when
    /// five seconds passed since the last write; `fill` then sets its counters.
    mutating func publish(
        _ input: IndicatorInput,
        line: String,
        now: Duration,
        force: Bool,
        fill: (inout ApplianceStatus) -> Void
    ) {
        show(input)
        if line != status.line {
            status.line = line
            notifier.status(line)
            logger.info("state: \(line)")
        }
        let shown = input.shown
        guard force || shown != writtenShown || lastWritten.map({ now - $0 >= .seconds(5) }) ?? true else { return }
        lastWritten = now
        writtenShown = shown
        status.state = shown.name
        status.conversation = input.conversation.rawValue
        status.overlays = input.overlays.sorted().map(\.rawValue)
        fill(&status)
        write()
    }

    /// Writes the final status: stopped.
    mutating func stopped(fill: (inout ApplianceStatus) -> Void) {
        status.line = "stopped"
        status.state = "stopped"
        fill(&status)
        write()
    }

    private mutating func write() {
        guard let statusFile else { return }
        do {
            try status.write(to: statusFile)
            if writeFailing { logger.notice("the status file \(statusFile) is written again") }
            writeFailing = false
        } catch {
            // Once, and again only after it worked in between: `hark status` cannot show this appliance.
            if !writeFailing { logger.warning("\(error); hark status will not show this daemon") }
            writeFailing = true
        }
    }
}
