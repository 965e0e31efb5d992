#ifndef HARK_CFFMPEG_SHIM_H
#define HARK_CFFMPEG_SHIM_H
// FFmpeg's demuxers, decoders and resampler (Debian libavformat-dev, libavcodec-dev, libswresample-dev,
// libavutil-dev): what HarkMedia opens streams and files with.
#include <errno.h>
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libswresample/swresample.h>
#include <libavutil/avutil.h>
#include <libavutil/channel_layout.h>
#include <libavutil/dict.h>
#include <libavutil/error.h>
#include <libavutil/opt.h>

/// AVERROR_EOF (a macro over MKTAG that Swift does not import): the end of the input.
static inline int hark_averror_eof(void) { return AVERROR_EOF; }

/// AVERROR(EAGAIN): a decoder wants more input, or has no frame ready yet.
static inline int hark_averror_eagain(void) { return AVERROR(EAGAIN); }

/// AVERROR_EXIT: the interrupt callback asked libavformat to stop.
static inline int hark_averror_exit(void) { return AVERROR_EXIT; }

/// AVERROR_INVALIDDATA: the input is malformed.
static inline int hark_averror_invaliddata(void) { return AVERROR_INVALIDDATA; }

/// AVERROR_DECODER_NOT_FOUND: no decoder for the stream's codec.
static inline int hark_averror_decoder_not_found(void) { return AVERROR_DECODER_NOT_FOUND; }

/// AVERROR_PROTOCOL_NOT_FOUND: the URL's protocol is not built in, or not allowed.
static inline int hark_averror_protocol_not_found(void) { return AVERROR_PROTOCOL_NOT_FOUND; }

/// av_strerror into `buffer` (what the av_err2str macro does with a compound literal).
static inline const char *hark_av_strerror(int code, char *buffer, size_t size) {
    av_strerror(code, buffer, size);
    return buffer;
}

/// The mono channel layout (AV_CHANNEL_LAYOUT_MONO is a compound-literal macro).
static inline void hark_channel_layout_mono(AVChannelLayout *layout) {
    AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
    *layout = mono;
}

/// av_log_format_line2 over a callback's arguments: one line of FFmpeg's log into `line`.
static inline int hark_av_log_format(void *object, int level, const char *format, va_list arguments, char *line,
                                     int size) {
    int prefix = 1;
    return av_log_format_line2(object, level, format, arguments, line, size, &prefix);
}
#endif
