import Foundation
import HarkBackendKit
import HarkCore
import Testing

@Suite struct ResumptionStoreErrorTests {
    @Test func aFailedSaveIsOneLineForAPerson() {
        let store = ResumptionStore(path: "/nonexistent-hark-state/resumption.json")
        let error = #expect(throws: ResumptionStore.SaveError.self) {
            try store.save(handle: "handle-1", model: "models/x", now: 1000)
        }
        #expect(
            error?.description
                == "cannot save the resumption handle to /nonexistent-hark-state/resumption.json: the folder does not exist"
        )
        let notAFolder = ResumptionStore(path: "/dev/null/resumption.json")
        let other = #expect(throws: ResumptionStore.SaveError.self) {
            try notAFolder.save(handle: "handle-1", model: "models/x", now: 1000)
        }
        #expect(other?.description.contains("Error") == false, "\(String(describing: other))")
        #expect(other?.description.contains("\n") == false)
        #expect(other?.description.contains("handle-1") == false)
    }
}
