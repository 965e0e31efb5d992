import Synchronization

/// What the speaker's lanes should play, as other threads last asked: the alert's sound and the media lane's ring.
/// It does not change once made.
final class MixerOrders: Sendable {
    /// Counts the orders made, from 0.
    let generation: Int
    /// The alert to loop; nil for none.
    let alert: MixerSound?
    /// Counts the alerts asked (a new one starts again from its beginning).
    let alertSerial: Int
    /// The media lane's ring; nil for none.
    let media: SampleRing?

    init(generation: Int, alert: MixerSound?, alertSerial: Int, media: SampleRing?) {
        self.generation = generation
        self.alert = alert
        self.alertSerial = alertSerial
        self.media = media
    }
}

/// Hands the lanes' orders from other threads to the playback thread, which never locks for them: writers make a new
/// ``MixerOrders`` (under a lock among themselves) and publish it in one atomic store; the playback thread loads the
/// latest at the start of a block. Writers keep every orders object the playback thread may still hold something
/// of, so the last reference to a sound or a ring is never dropped on the playback thread (no free there): that
/// thread says, in ``hold(from:)``, the oldest generation it still holds something of, and writers let go of older
/// ones on their next post.
final class MixerHandOff: Sendable {
    private let latest: Atomic<Unmanaged<MixerOrders>?>
    private let holding = Atomic(0)
    private let kept: Mutex<[MixerOrders]>

    init() {
        let first = MixerOrders(generation: 0, alert: nil, alertSerial: 0, media: nil)
        kept = Mutex([first])
        latest = Atomic(Unmanaged.passUnretained(first))
    }

    /// Publishes new orders (writers' side): the alert when `alert` is given (`.some(nil)` stops it), the media ring
    /// when `media` is given (`.some(nil)` detaches it).
    func post(alert: MixerSound?? = nil, media: SampleRing?? = nil) {
        kept.withLock { kept in
            let previous = kept[kept.count - 1]
            let next = MixerOrders(
                generation: previous.generation + 1,
                alert: alert ?? previous.alert,
                alertSerial: alert == nil ? previous.alertSerial : previous.alertSerial + 1,
                media: media ?? previous.media
            )
            kept.append(next)
            latest.store(Unmanaged.passUnretained(next), ordering: .releasing)
            let oldest = holding.load(ordering: .acquiring)
            kept.removeAll { $0.generation < oldest && $0 !== next }
        }
    }

    /// The latest orders when they are not `generation` (the playback thread's side).
    func take(newerThan generation: Int) -> MixerOrders? {
        guard let orders = latest.load(ordering: .acquiring)?.takeUnretainedValue() else { return nil }
        return orders.generation == generation ? nil : orders
    }

    /// The playback thread holds nothing from orders older than `generation`.
    func hold(from generation: Int) {
        holding.store(generation, ordering: .releasing)
    }

    /// Orders kept for the playback thread (for tests).
    var keptCount: Int { kept.withLock { $0.count } }
}
