import CCurl
import Dispatch
import HarkCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// HTTPS requests through libcurl (token minting, REST hand-offs). Each request runs its blocking
/// `curl_easy_perform` on a Dispatch queue, never on the Swift cooperative pool.
public struct CurlHTTPClient: HTTPClient {
    /// A PEM file of extra CA certificates to trust instead of the system's, or nil.
    public var caFile: String?
    /// Largest response body accepted.
    public var maxResponseBytes: Int

    private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()
    private static let queue = DispatchQueue(label: "hark.http", attributes: .concurrent)

    public init(caFile: String? = nil, maxResponseBytes: Int = 4 << 20) {
        self.caFile = caFile
        self.maxResponseBytes = maxResponseBytes
        _ = Self.globalInit
    }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let caFile = self.caFile
        let limit = maxResponseBytes
        return try await withCheckedThrowingContinuation { continuation in
            Self.queue.async {
                continuation.resume(with: Result { try Self.perform(request, caFile: caFile, limit: limit) })
            }
        }
    }

    /// Collects the response body; stops the transfer past `limit`.
    private final class Sink {
        var body = Data()
        let limit: Int
        init(limit: Int) { self.limit = limit }
    }

    private static func perform(_ request: HTTPRequest, caFile: String?, limit: Int) throws -> HTTPResponse {
        guard let handle = curl_easy_init() else { throw HTTPClientError("libcurl could not start a request") }
        defer { curl_easy_cleanup(handle) }
        var headerList: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headerList) }
        for header in request.headers {
            headerList = curl_slist_append(headerList, "\(header.name): \(header.value)")
        }
        if request.body != nil, !request.headers.contains(where: { $0.name.lowercased() == "content-type" }) {
            headerList = curl_slist_append(headerList, "Content-Type: application/json")
        }
        let sink = Sink(limit: limit)
        let unmanaged = Unmanaged.passRetained(sink)
        defer { unmanaged.release() }

        var code = hark_curl_setopt_string(handle, CURLOPT_URL, request.url)
        code = code == CURLE_OK ? hark_curl_setopt_pointer(handle, CURLOPT_HTTPHEADER, headerList) : code
        code = code == CURLE_OK ? hark_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1) : code
        code =
            code == CURLE_OK
            ? hark_curl_setopt_long(handle, CURLOPT_TIMEOUT_MS, Int(request.timeout.milliseconds)) : code
        code = code == CURLE_OK ? hark_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, 10_000) : code
        code = code == CURLE_OK ? hark_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0) : code
        if let caFile, code == CURLE_OK { code = hark_curl_setopt_string(handle, CURLOPT_CAINFO, caFile) }
        code = code == CURLE_OK ? hark_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, request.method) : code
        code =
            code == CURLE_OK
            ? hark_curl_setopt_write_function(
                handle,
                { pointer, size, count, context in
                    guard let pointer, let context else { return 0 }
                    let sink = Unmanaged<Sink>.fromOpaque(context).takeUnretainedValue()
                    let bytes = size * count
                    if sink.body.count + bytes > sink.limit { return 0 }
                    sink.body.append(UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: bytes)
                    return bytes
                }
            ) : code
        code = code == CURLE_OK ? hark_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, unmanaged.toOpaque()) : code
        guard code == CURLE_OK else { throw HTTPClientError("libcurl rejected an option: \(describe(code))") }

        let body = request.body ?? Data()
        let result: CURLcode = body.withUnsafeBytes { raw in
            if request.body != nil {
                _ = hark_curl_setopt_long(handle, CURLOPT_POSTFIELDSIZE, raw.count)
                _ = hark_curl_setopt_pointer(
                    handle,
                    CURLOPT_POSTFIELDS,
                    UnsafeMutableRawPointer(mutating: raw.baseAddress)
                )
            }
            return curl_easy_perform(handle)
        }
        guard result == CURLE_OK else {
            // A certificate that fails verification while the clock is set will not pass on a retry.
            let untrusted = result == CURLE_PEER_FAILED_VERIFICATION && !SystemClock.isUnset()
            throw HTTPClientError("\(redactedHost(request.url)): \(describe(result))", untrusted: untrusted)
        }
        var status = 0
        _ = hark_curl_response_code(handle, &status)
        return HTTPResponse(status: status, body: sink.body)
    }

    private static func describe(_ code: CURLcode) -> String {
        String(cString: curl_easy_strerror(code))
    }

    /// Scheme, host and port only: a URL's path or query may carry a credential.
    static func redactedHost(_ url: String) -> String {
        guard let schemeEnd = url.firstRange(of: "://") else { return "request" }
        let rest = url[schemeEnd.upperBound...]
        let host = rest.prefix { $0 != "/" && $0 != "?" }
        return String(url[..<schemeEnd.upperBound]) + host
    }
}
