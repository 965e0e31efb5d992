#ifndef HARK_CCURL_SHIM_H
#define HARK_CCURL_SHIM_H
#include <curl/curl.h>

// curl_easy_setopt is variadic, which Swift cannot call: one typed wrapper per argument kind.

/// curl_easy_setopt(handle, option, long)
static inline CURLcode hark_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
/// curl_easy_setopt(handle, option, const char *)
static inline CURLcode hark_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}
/// curl_easy_setopt(handle, option, void *) for WRITEDATA, HTTPHEADER and other pointer options
static inline CURLcode hark_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}
/// curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback)
static inline CURLcode hark_curl_setopt_write_function(
    CURL *handle, size_t (*callback)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
}
/// curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &long)
static inline CURLcode hark_curl_response_code(CURL *handle, long *code) {
    return curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, code);
}
#endif
