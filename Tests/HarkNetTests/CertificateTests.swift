import Foundation
import HarkSimulatorKit
import HarkTestKit
import Testing

/// The simulators' certificates carry what a CA and a server certificate need, as `openssl x509` reads them back
/// (the TLS tests prove that clients accept them for the names and addresses they carry, and refuse them otherwise).
@Suite struct CertificateTests {
    /// `openssl x509 -noout -text -dates` of `pem`.
    private func text(_ pem: String) async throws -> String {
        let path = FileManager.default.temporaryDirectory.path + "/hark-certificate-\(UUID().uuidString).pem"
        try pem.write(toFile: path, atomically: true, encoding: .utf8)
        defer { unlink(path) }
        let child = try await ChildProcess.run("/bin/sh", ["-c", #"exec openssl x509 -noout -text -in "$0""#, path])
        #expect(child.status == 0, "\(child.text)")
        return child.text
    }

    @Test func aCAAndALeafForTheNamesAndAddressesValidForThirtyDays() async throws {
        let certificates = try SimulatorCertificates.generate(
            dnsNames: ["localhost", "sim.example"],
            ipAddresses: ["127.0.0.1", "10.0.0.2"]
        )
        let ca = try await text(certificates.caPEM)
        #expect(ca.contains("Subject: O = Hark, CN = Hark Live Simulator CA"), "\(ca)")
        #expect(ca.contains("X509v3 Basic Constraints: critical\n                CA:TRUE, pathlen:0"), "\(ca)")
        #expect(ca.contains("X509v3 Key Usage: critical\n                Certificate Sign, CRL Sign"), "\(ca)")
        #expect(ca.contains("ASN1 OID: prime256v1"), "\(ca)")
        let leaf = try await text(certificates.leafPEM)
        #expect(leaf.contains("Issuer: O = Hark, CN = Hark Live Simulator CA"), "\(leaf)")
        #expect(leaf.contains("Subject: CN = localhost"), "\(leaf)")
        #expect(leaf.contains("X509v3 Basic Constraints: critical\n                CA:FALSE"), "\(leaf)")
        #expect(leaf.contains("X509v3 Key Usage: critical\n                Digital Signature"), "\(leaf)")
        #expect(leaf.contains("X509v3 Extended Key Usage: \n                TLS Web Server Authentication"), "\(leaf)")
        #expect(
            leaf.contains("DNS:localhost, DNS:sim.example, IP Address:127.0.0.1, IP Address:10.0.0.2"),
            "\(leaf)"
        )
        #expect(leaf.contains("X509v3 Authority Key Identifier"), "\(leaf)")
        // Valid from an hour ago for 30 days: the two dates, read as openssl prints them, 30 days and an hour apart.
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "MMM d HH:mm:ss yyyy 'GMT'"
        func date(_ label: String) -> Date? {
            leaf.split(separator: "\n").first { $0.contains(label) }
                .flatMap { $0.components(separatedBy: label).last }
                .flatMap { formatter.date(from: $0.trimmingCharacters(in: .whitespaces).replacing("  ", with: " ")) }
        }
        let notBefore = try #require(date("Not Before:"), "\(leaf)")
        let notAfter = try #require(date("Not After :"), "\(leaf)")
        #expect(abs(notBefore.timeIntervalSinceNow + 3600) < 120)
        #expect(abs(notAfter.timeIntervalSince(notBefore) - (30 * 24 + 1) * 3600) < 2)
    }

    @Test func namesThatAreNotNamesAreRefused() {
        #expect(throws: SimulatorConfigurationError.self) {
            try SimulatorCertificates.generate(dnsNames: ["a, DNS:evil"], ipAddresses: [])
        }
        #expect(throws: SimulatorConfigurationError.self) {
            try SimulatorCertificates.generate(dnsNames: [], ipAddresses: ["300.1.1.1"])
        }
    }
}
