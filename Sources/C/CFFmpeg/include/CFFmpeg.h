#ifndef HARK_CFFMPEG_SHIM_H
#define HARK_CFFMPEG_SHIM_H
// FFmpeg's demuxers, decoders and resampler (Debian libavformat-dev, libavcodec-dev, libswresample-dev,
// libavutil-dev at build time; libavformat59, libavcodec59, libswresample4, libavutil57 at run time, opened with
// dlopen by hark_ffmpeg_load): what HarkMedia opens streams and files with.
#include <stddef.h>
#include <stdarg.h>
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

/// Opens FFmpeg's four libraries (libavformat, libavcodec, libswresample, libavutil of the major versions these
/// headers describe) with dlopen and looks up every function below; 0 when all are there, else -1 with the reason in
/// `error`. Once per process (later calls return the first outcome). Nothing links against FFmpeg: a device that
/// never plays media never loads it (a quarter of the process's libraries and 25 MB of RSS otherwise).
int hark_ffmpeg_load(char *error, size_t size);

/// av_strerror into `buffer` (what the av_err2str macro does with a compound literal).
const char *hark_av_strerror(int code, char *buffer, size_t size);

/// av_log_format_line2 over a callback's arguments: one line of FFmpeg's log into `line`.
int hark_av_log_format(void *object, int level, const char *format, va_list arguments, char *line, int size);

/// The mono channel layout (AV_CHANNEL_LAYOUT_MONO is a compound-literal macro).
static inline void hark_channel_layout_mono(AVChannelLayout *layout) {
    AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
    *layout = mono;
}

// FFmpeg's functions as HarkMedia uses them, each calling the one hark_ffmpeg_load found (call that first).

AVFormatContext *hark_avformat_alloc_context(void);
int hark_avformat_open_input(AVFormatContext **ps, const char *url, const AVInputFormat *fmt, AVDictionary **options);
int hark_avformat_find_stream_info(AVFormatContext *ic, AVDictionary **options);
void hark_avformat_close_input(AVFormatContext **s);
int hark_av_find_best_stream(AVFormatContext *ic, enum AVMediaType type, int wanted_stream_nb, int related_stream, const AVCodec **decoder_ret, int flags);
int hark_av_read_frame(AVFormatContext *s, AVPacket *pkt);
AVCodecContext *hark_avcodec_alloc_context3(const AVCodec *codec);
void hark_avcodec_free_context(AVCodecContext **avctx);
int hark_avcodec_parameters_to_context(AVCodecContext *codec, const AVCodecParameters *par);
int hark_avcodec_open2(AVCodecContext *avctx, const AVCodec *codec, AVDictionary **options);
int hark_avcodec_send_packet(AVCodecContext *avctx, const AVPacket *avpkt);
int hark_avcodec_receive_frame(AVCodecContext *avctx, AVFrame *frame);
AVPacket *hark_av_packet_alloc(void);
void hark_av_packet_free(AVPacket **pkt);
void hark_av_packet_unref(AVPacket *pkt);
AVFrame *hark_av_frame_alloc(void);
void hark_av_frame_free(AVFrame **frame);
void hark_av_frame_unref(AVFrame *frame);
int hark_av_dict_set(AVDictionary **pm, const char *key, const char *value, int flags);
void hark_av_dict_free(AVDictionary **m);
void hark_av_free(void *ptr);
void hark_av_log_set_callback(void (*callback)(void *, int, const char *, va_list));
void hark_av_log_set_level(int level);
int hark_av_opt_get(void *obj, const char *name, int search_flags, uint8_t **out_val);
int hark_av_channel_layout_copy(AVChannelLayout *dst, const AVChannelLayout *src);
void hark_av_channel_layout_default(AVChannelLayout *ch_layout, int nb_channels);
void hark_av_channel_layout_uninit(AVChannelLayout *channel_layout);
int hark_swr_alloc_set_opts2(struct SwrContext **ps, AVChannelLayout *out_ch_layout, enum AVSampleFormat out_sample_fmt, int out_sample_rate, AVChannelLayout *in_ch_layout, enum AVSampleFormat in_sample_fmt, int in_sample_rate, int log_offset, void *log_ctx);
int hark_swr_init(struct SwrContext *s);
void hark_swr_free(struct SwrContext **s);
int hark_swr_convert(struct SwrContext *s, uint8_t **out, int out_count, const uint8_t **in, int in_count);
#endif
