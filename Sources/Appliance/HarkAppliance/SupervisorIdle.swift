import HarkCore

/// How often the loop is woken for the microphone. An idle appliance — no session, nothing playing or ringing, no
/// button held — hears the microphone only for the wake word and the voice detector, and spends much of its time
/// being woken for each 20 ms frame (the loop, then the detector's thread). While idle the microphone gathers three
/// frames before it wakes the loop: a fifth less CPU in a quiet room, every frame still delivered in order, the
/// wake word heard up to 40 ms later. Anything that happens ends the idle pace before the next frame.
extension Supervisor {
    /// Frames gathered per wake-up while idle.
    static let idleDeliveryBatch = 3

    /// True while nothing but the wake word and the voice detector listens.
    var isIdle: Bool {
        slot.session == nil && slot.running.isEmpty && !machine.playing && !machine.microphoneLive && !isRinging
    }

    /// Sets the microphone's pace for what happens now (after each input the loop handled).
    func paceMicrophone() {
        let batch = isIdle ? Self.idleDeliveryBatch : 1
        if devices.microphone.deliveryBatch != batch { devices.microphone.deliveryBatch = batch }
    }
}
