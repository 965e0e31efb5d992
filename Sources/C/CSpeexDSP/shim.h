#ifndef HARK_CSPEEXDSP_SHIM_H
#define HARK_CSPEEXDSP_SHIM_H
// The speexdsp resampler, echo canceller and preprocessor (Debian libspeexdsp-dev).
#include <speex/speex_resampler.h>
#include <speex/speex_echo.h>
#include <speex/speex_preprocess.h>
#endif
