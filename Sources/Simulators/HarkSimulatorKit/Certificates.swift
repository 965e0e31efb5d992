import HarkCore
import NIOSSL

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A CA and a server certificate issued by it, in PEM.
public struct SimulatorCertificates: Sendable, Hashable {
    /// The CA certificate clients trust.
    public var caPEM: String
    /// The server's leaf certificate.
    public var leafPEM: String
    /// The leaf's private key (PKCS#8).
    public var leafKeyPEM: String

    /// Generates a self-signed CA (P-256; basic constraints CA with a path length of 0, key usage certificate and CRL
    /// signing, both critical) and a leaf it signs for `dnsNames` and `ipAddresses` (IPv4 dotted quads; not a CA,
    /// digital signature, server authentication, the names as subject alternative names), both valid from an hour ago
    /// for 30 days. The `openssl` command makes them (Debian's `openssl` package), in a temporary folder removed after.
    public static func generate(
        dnsNames: [String] = ["localhost"],
        ipAddresses: [String] = ["127.0.0.1"]
    ) throws -> SimulatorCertificates {
        var alternativeNames: [String] = []
        for name in dnsNames {
            guard !name.isEmpty, name.utf8.count <= 253,
                name.allSatisfy({ ($0.isASCII && ($0.isLetter || $0.isNumber)) || $0 == "-" || $0 == "." })
            else { throw SimulatorConfigurationError("not a DNS name: \(RemoteText.printable(name, limit: 80))") }
            alternativeNames.append("DNS:" + name)
        }
        for address in ipAddresses {
            let octets = address.split(separator: ".", omittingEmptySubsequences: false).compactMap { UInt8($0) }
            guard octets.count == 4 else {
                throw SimulatorConfigurationError("not an IPv4 address: \(RemoteText.printable(address, limit: 80))")
            }
            alternativeNames.append("IP:" + octets.map(String.init).joined(separator: "."))
        }
        guard !alternativeNames.isEmpty else {
            throw SimulatorConfigurationError("a server certificate needs a DNS name or an address")
        }

        let folder = try OpenSSLFolder()
        defer { folder.remove() }
        try folder.write("openssl.cnf", configuration(alternativeNames: alternativeNames))
        try folder.write("index.txt", "")
        let now = time(nil)
        let (start, end) = (timestamp(now - 3600), timestamp(now + 30 * 24 * 3600))
        let newKey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]

        try folder.openssl(
            ["req", "-new", "-config", folder.path("openssl.cnf")] + newKey
                + [
                    "-keyout", folder.path("ca.key"), "-subj", "/O=Hark/CN=Hark Live Simulator CA", "-out",
                    folder.path("ca.csr"),
                ]
        )
        try folder.openssl(
            [
                "ca", "-batch", "-notext", "-rand_serial", "-preserveDN", "-config", folder.path("openssl.cnf"),
                "-selfsign",
            ]
                + ["-keyfile", folder.path("ca.key"), "-in", folder.path("ca.csr"), "-out", folder.path("ca.pem")]
                + ["-startdate", start, "-enddate", end, "-extensions", "ca_extensions"]
        )
        let subject = "/CN=" + (dnsNames.first ?? ipAddresses.first ?? "localhost")
        try folder.openssl(
            ["req", "-new", "-config", folder.path("openssl.cnf")] + newKey
                + ["-keyout", folder.path("leaf.key"), "-subj", subject, "-out", folder.path("leaf.csr")]
        )
        try folder.openssl(
            ["ca", "-batch", "-notext", "-rand_serial", "-preserveDN", "-config", folder.path("openssl.cnf")]
                + ["-cert", folder.path("ca.pem"), "-keyfile", folder.path("ca.key")]
                + ["-in", folder.path("leaf.csr"), "-out", folder.path("leaf.pem")]
                + ["-startdate", start, "-enddate", end, "-extensions", "leaf_extensions"]
        )
        return SimulatorCertificates(
            caPEM: try folder.read("ca.pem"),
            leafPEM: try folder.read("leaf.pem"),
            leafKeyPEM: try folder.read("leaf.key")
        )
    }

    /// The configuration `openssl req` and `openssl ca` read: a CA database in the folder (random serial numbers:
    /// `-rand_serial`; the serial file is named but never read), any subject, and the two certificates' extensions.
    private static func configuration(alternativeNames: [String]) -> String {
        """
        [req]
        distinguished_name = subject
        prompt = no
        [subject]
        [ca]
        default_ca = simulator_ca
        [simulator_ca]
        database = index.txt
        serial = serial.txt
        new_certs_dir = .
        default_md = sha256
        policy = any_subject
        unique_subject = no
        email_in_dn = no
        [any_subject]
        organizationName = optional
        commonName = supplied
        [ca_extensions]
        basicConstraints = critical, CA:true, pathlen:0
        keyUsage = critical, keyCertSign, cRLSign
        subjectKeyIdentifier = hash
        [leaf_extensions]
        basicConstraints = critical, CA:false
        keyUsage = critical, digitalSignature
        extendedKeyUsage = serverAuth
        subjectAltName = \(alternativeNames.joined(separator: ", "))
        subjectKeyIdentifier = hash
        authorityKeyIdentifier = keyid:always

        """
    }

    /// `seconds` since the epoch as `openssl ca` takes a date: `YYYYMMDDHHMMSSZ`, in UTC.
    private static func timestamp(_ seconds: time_t) -> String {
        var clock = seconds
        var parts = tm()
        gmtime_r(&clock, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)"
            + [parts.tm_mon + 1, parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec]
            .map(two).joined() + "Z"
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

/// A private temporary folder (`mkdtemp`, mode 0700) where the `openssl` command makes the certificates and their
/// keys; its owner removes it.
private struct OpenSSLFolder {
    /// The folder's absolute path.
    let root: String

    /// Makes the folder under `TMPDIR` (else `/tmp`).
    init() throws {
        let base = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array((base + "/hark-certificates-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw SimulatorConfigurationError("cannot make a temporary folder under \(base): errno \(errno)")
        }
        root = String(cString: made)
    }

    /// The path of `name` in the folder.
    func path(_ name: String) -> String { root + "/" + name }

    /// Writes `text` to `name` in the folder.
    func write(_ name: String, _ text: String) throws {
        do {
            try Data(text.utf8).write(to: URL(filePath: path(name)))
        } catch {
            throw SimulatorConfigurationError("cannot write \(path(name)): \(error)")
        }
    }

    /// The text of `name` in the folder (at most 64 KiB: a certificate or a key).
    func read(_ name: String) throws -> String {
        guard let data = try? Data(contentsOf: URL(filePath: path(name))), data.count <= 65_536 else {
            throw SimulatorConfigurationError("openssl wrote no readable \(name)")
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// Runs `openssl` (found on `PATH`) with `arguments` in the folder, its output in a log there; throws with the
    /// log's end when it fails or cannot be started.
    func openssl(_ arguments: [String]) throws {
        let log = path("openssl.log")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // openssl ca names its database and new_certs_dir relative to the working folder: run it in ours.
        let command = ["/bin/sh", "-c", #"cd "$0" && exec openssl "$@""#, root] + arguments
        let argv = command.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/sh", &actions, nil, argv, environ)
        guard spawned == 0 else {
            throw SimulatorConfigurationError("cannot start /bin/sh for openssl: \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw SimulatorConfigurationError("waitpid for openssl: errno \(errno)") }
        }
        guard status == 0 else {
            let output = (try? Data(contentsOf: URL(filePath: log))).map {
                String(decoding: $0.suffix(600), as: UTF8.self)
            }
            let missing = (status >> 8) & 0xFF == 127 ? " (is the openssl command installed? Debian: openssl)" : ""
            throw SimulatorConfigurationError(
                "openssl \(arguments.first ?? "") failed with status \(status)\(missing): "
                    + RemoteText.printable(output ?? "", limit: 600)
            )
        }
    }

    /// Removes the folder and what is in it.
    func remove() {
        // Its files: the configuration, keys, requests, certificates, the CA database and the copies of the
        // certificates openssl ca names by their serial numbers (no folders).
        if let directory = opendir(root) {
            while let entry = readdir(directory) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) {
                    String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
                }
                if name != "." && name != ".." { unlink(path(name)) }
            }
            closedir(directory)
        }
        rmdir(root)
    }
}
