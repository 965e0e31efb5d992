import Crypto
import NIOSSL
import SwiftASN1
import X509

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A CA and a server certificate issued by it, in PEM.
public struct SimulatorCertificates: Sendable, Hashable {
    /// The CA certificate clients trust.
    public var caPEM: String
    /// The server's leaf certificate.
    public var leafPEM: String
    /// The leaf's private key (PKCS#8).
    public var leafKeyPEM: String

    /// Generates a self-signed CA (P-256) and a leaf for `dnsNames` and `ipAddresses` (IPv4 dotted quads),
    /// valid from an hour ago for 30 days.
    public static func generate(
        dnsNames: [String] = ["localhost"],
        ipAddresses: [String] = ["127.0.0.1"]
    ) throws -> SimulatorCertificates {
        let now = Date()
        let notBefore = now.addingTimeInterval(-3600)
        let notAfter = now.addingTimeInterval(30 * 24 * 3600)

        let caKey = P256.Signing.PrivateKey()
        let caPrivateKey = Certificate.PrivateKey(caKey)
        let caName = try DistinguishedName {
            OrganizationName("Hark")
            CommonName("Hark Live Simulator CA")
        }
        let ca = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: caPrivateKey.publicKey,
            notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: caName,
            subject: caName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: caPrivateKey.publicKey)
            },
            issuerPrivateKey: caPrivateKey
        )

        let leafKey = P256.Signing.PrivateKey()
        let leafPrivateKey = Certificate.PrivateKey(leafKey)
        var names: [GeneralName] = dnsNames.map { .dnsName($0) }
        for address in ipAddresses {
            let octets = address.split(separator: ".").compactMap { UInt8($0) }
            guard octets.count == 4 else {
                throw SimulatorConfigurationError("not an IPv4 address: \(address)")
            }
            names.append(.ipAddress(ASN1OctetString(contentBytes: ArraySlice(octets))))
        }
        let leaf = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: leafPrivateKey.publicKey,
            notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: caName,
            subject: try DistinguishedName { CommonName(dnsNames.first ?? "localhost") },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(names)
                AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: caPrivateKey.publicKey).keyIdentifier)
            },
            issuerPrivateKey: caPrivateKey
        )
        return SimulatorCertificates(
            caPEM: try ca.serializeAsPEM().pemString,
            leafPEM: try leaf.serializeAsPEM().pemString,
            leafKeyPEM: leafKey.pemRepresentation
        )
    }

    /// A server TLS configuration serving the leaf, with the CA in the chain.
    public func serverConfiguration() throws -> TLSConfiguration {
        let leaf = try NIOSSLCertificate(bytes: Array(leafPEM.utf8), format: .pem)
        let ca = try NIOSSLCertificate(bytes: Array(caPEM.utf8), format: .pem)
        let key = try NIOSSLPrivateKey(bytes: Array(leafKeyPEM.utf8), format: .pem)
        return TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(leaf), .certificate(ca)],
            privateKey: .privateKey(key)
        )
    }
}
