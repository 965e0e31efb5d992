#ifndef HARK_CALSA_SHIM_H
#define HARK_CALSA_SHIM_H
// alsa-lib (Debian libasound2-dev): PCM, configuration and error API.
#include <alsa/asoundlib.h>

// snd_lib_error_set_handler takes a variadic handler, which Swift cannot write: a silent one lives here.

/// The snd_lib_error_handler_t that discards alsa-lib's diagnostics (they would go to stderr otherwise).
static void hark_alsa_quiet_error_handler(const char *file, int line, const char *function, int err,
                                          const char *fmt, ...) {
    (void)file;
    (void)line;
    (void)function;
    (void)err;
    (void)fmt;
}

/// snd_lib_error_set_handler(quiet) when `quiet` is non-zero, snd_lib_error_set_handler(NULL) (stderr) otherwise.
static inline int hark_alsa_set_quiet_errors(int quiet) {
    return snd_lib_error_set_handler(quiet ? hark_alsa_quiet_error_handler : NULL);
}
#endif
