// FFmpeg opened at run time (see hark_ffmpeg_load in CFFmpeg.h): each function HarkMedia uses is looked up once
// with dlsym and called through its pointer, its type taken from FFmpeg's own declaration.
#include "CFFmpeg.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define HARK_STRINGIFY2(x) #x
#define HARK_STRINGIFY(x) HARK_STRINGIFY2(x)

static const char *const library_names[] = {
    "libavutil.so." HARK_STRINGIFY(LIBAVUTIL_VERSION_MAJOR),
    "libswresample.so." HARK_STRINGIFY(LIBSWRESAMPLE_VERSION_MAJOR),
    "libavcodec.so." HARK_STRINGIFY(LIBAVCODEC_VERSION_MAJOR),
    "libavformat.so." HARK_STRINGIFY(LIBAVFORMAT_VERSION_MAJOR),
};
enum { lib_avutil, lib_swresample, lib_avcodec, lib_avformat, library_count };
static void *libraries[library_count];
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int outcome = -1;
static char reason[512];

static __typeof__(avformat_alloc_context) *p_avformat_alloc_context;
static __typeof__(avformat_open_input) *p_avformat_open_input;
static __typeof__(avformat_find_stream_info) *p_avformat_find_stream_info;
static __typeof__(avformat_close_input) *p_avformat_close_input;
static __typeof__(av_find_best_stream) *p_av_find_best_stream;
static __typeof__(av_read_frame) *p_av_read_frame;
static __typeof__(avcodec_alloc_context3) *p_avcodec_alloc_context3;
static __typeof__(avcodec_free_context) *p_avcodec_free_context;
static __typeof__(avcodec_parameters_to_context) *p_avcodec_parameters_to_context;
static __typeof__(avcodec_open2) *p_avcodec_open2;
static __typeof__(avcodec_send_packet) *p_avcodec_send_packet;
static __typeof__(avcodec_receive_frame) *p_avcodec_receive_frame;
static __typeof__(av_packet_alloc) *p_av_packet_alloc;
static __typeof__(av_packet_free) *p_av_packet_free;
static __typeof__(av_packet_unref) *p_av_packet_unref;
static __typeof__(av_frame_alloc) *p_av_frame_alloc;
static __typeof__(av_frame_free) *p_av_frame_free;
static __typeof__(av_frame_unref) *p_av_frame_unref;
static __typeof__(av_dict_set) *p_av_dict_set;
static __typeof__(av_dict_free) *p_av_dict_free;
static __typeof__(av_free) *p_av_free;
static __typeof__(av_log_set_callback) *p_av_log_set_callback;
static __typeof__(av_log_set_level) *p_av_log_set_level;
static __typeof__(av_opt_get) *p_av_opt_get;
static __typeof__(av_channel_layout_copy) *p_av_channel_layout_copy;
static __typeof__(av_channel_layout_default) *p_av_channel_layout_default;
static __typeof__(av_channel_layout_uninit) *p_av_channel_layout_uninit;
static __typeof__(swr_alloc_set_opts2) *p_swr_alloc_set_opts2;
static __typeof__(swr_init) *p_swr_init;
static __typeof__(swr_free) *p_swr_free;
static __typeof__(swr_convert) *p_swr_convert;
static __typeof__(av_strerror) *p_av_strerror;
static __typeof__(av_log_format_line2) *p_av_log_format_line2;

static void load(void) {
    for (int index = 0; index < library_count; index++) {
        libraries[index] = dlopen(library_names[index], RTLD_NOW | RTLD_LOCAL);
        if (libraries[index] == NULL) {
            const char *why = dlerror();
            snprintf(reason, sizeof reason, "%s cannot be opened (%s)", library_names[index], why ? why : "dlopen failed");
            return;
        }
    }
#define HARK_FIND(lib, name)                                                                                   \
    p_##name = (__typeof__(name) *)dlsym(libraries[lib_##lib], #name);                                       \
    if (p_##name == NULL) {                                                                                   \
        snprintf(reason, sizeof reason, "%s has no function %s", library_names[lib_##lib], #name);           \
        return;                                                                                               \
    }
    HARK_FIND(avformat, avformat_alloc_context)
    HARK_FIND(avformat, avformat_open_input)
    HARK_FIND(avformat, avformat_find_stream_info)
    HARK_FIND(avformat, avformat_close_input)
    HARK_FIND(avformat, av_find_best_stream)
    HARK_FIND(avformat, av_read_frame)
    HARK_FIND(avcodec, avcodec_alloc_context3)
    HARK_FIND(avcodec, avcodec_free_context)
    HARK_FIND(avcodec, avcodec_parameters_to_context)
    HARK_FIND(avcodec, avcodec_open2)
    HARK_FIND(avcodec, avcodec_send_packet)
    HARK_FIND(avcodec, avcodec_receive_frame)
    HARK_FIND(avcodec, av_packet_alloc)
    HARK_FIND(avcodec, av_packet_free)
    HARK_FIND(avcodec, av_packet_unref)
    HARK_FIND(avutil, av_frame_alloc)
    HARK_FIND(avutil, av_frame_free)
    HARK_FIND(avutil, av_frame_unref)
    HARK_FIND(avutil, av_dict_set)
    HARK_FIND(avutil, av_dict_free)
    HARK_FIND(avutil, av_free)
    HARK_FIND(avutil, av_log_set_callback)
    HARK_FIND(avutil, av_log_set_level)
    HARK_FIND(avutil, av_opt_get)
    HARK_FIND(avutil, av_channel_layout_copy)
    HARK_FIND(avutil, av_channel_layout_default)
    HARK_FIND(avutil, av_channel_layout_uninit)
    HARK_FIND(swresample, swr_alloc_set_opts2)
    HARK_FIND(swresample, swr_init)
    HARK_FIND(swresample, swr_free)
    HARK_FIND(swresample, swr_convert)
    HARK_FIND(avutil, av_strerror)
    HARK_FIND(avutil, av_log_format_line2)
#undef HARK_FIND
    outcome = 0;
}

int hark_ffmpeg_load(char *error, size_t size) {
    pthread_once(&once, load);
    if (outcome != 0 && error != NULL && size > 0) snprintf(error, size, "%s", reason);
    return outcome;
}

const char *hark_av_strerror(int code, char *buffer, size_t size) {
    if (p_av_strerror == NULL || p_av_strerror(code, buffer, size) < 0) snprintf(buffer, size, "error %d", code);
    return buffer;
}

int hark_av_log_format(void *object, int level, const char *format, va_list arguments, char *line, int size) {
    int prefix = 1;
    return p_av_log_format_line2(object, level, format, arguments, line, size, &prefix);
}

AVFormatContext *hark_avformat_alloc_context(void) { return p_avformat_alloc_context(); }
int hark_avformat_open_input(AVFormatContext **ps, const char *url, const AVInputFormat *fmt, AVDictionary **options) { return p_avformat_open_input(ps, url, fmt, options); }
int hark_avformat_find_stream_info(AVFormatContext *ic, AVDictionary **options) { return p_avformat_find_stream_info(ic, options); }
void hark_avformat_close_input(AVFormatContext **s) { p_avformat_close_input(s); }
int hark_av_find_best_stream(AVFormatContext *ic, enum AVMediaType type, int wanted_stream_nb, int related_stream, const AVCodec **decoder_ret, int flags) { return p_av_find_best_stream(ic, type, wanted_stream_nb, related_stream, decoder_ret, flags); }
int hark_av_read_frame(AVFormatContext *s, AVPacket *pkt) { return p_av_read_frame(s, pkt); }
AVCodecContext *hark_avcodec_alloc_context3(const AVCodec *codec) { return p_avcodec_alloc_context3(codec); }
void hark_avcodec_free_context(AVCodecContext **avctx) { p_avcodec_free_context(avctx); }
int hark_avcodec_parameters_to_context(AVCodecContext *codec, const AVCodecParameters *par) { return p_avcodec_parameters_to_context(codec, par); }
int hark_avcodec_open2(AVCodecContext *avctx, const AVCodec *codec, AVDictionary **options) { return p_avcodec_open2(avctx, codec, options); }
int hark_avcodec_send_packet(AVCodecContext *avctx, const AVPacket *avpkt) { return p_avcodec_send_packet(avctx, avpkt); }
int hark_avcodec_receive_frame(AVCodecContext *avctx, AVFrame *frame) { return p_avcodec_receive_frame(avctx, frame); }
AVPacket *hark_av_packet_alloc(void) { return p_av_packet_alloc(); }
void hark_av_packet_free(AVPacket **pkt) { p_av_packet_free(pkt); }
void hark_av_packet_unref(AVPacket *pkt) { p_av_packet_unref(pkt); }
AVFrame *hark_av_frame_alloc(void) { return p_av_frame_alloc(); }
void hark_av_frame_free(AVFrame **frame) { p_av_frame_free(frame); }
void hark_av_frame_unref(AVFrame *frame) { p_av_frame_unref(frame); }
int hark_av_dict_set(AVDictionary **pm, const char *key, const char *value, int flags) { return p_av_dict_set(pm, key, value, flags); }
void hark_av_dict_free(AVDictionary **m) { p_av_dict_free(m); }
void hark_av_free(void *ptr) { p_av_free(ptr); }
void hark_av_log_set_callback(void (*callback)(void *, int, const char *, va_list)) { p_av_log_set_callback(callback); }
void hark_av_log_set_level(int level) { p_av_log_set_level(level); }
int hark_av_opt_get(void *obj, const char *name, int search_flags, uint8_t **out_val) { return p_av_opt_get(obj, name, search_flags, out_val); }
int hark_av_channel_layout_copy(AVChannelLayout *dst, const AVChannelLayout *src) { return p_av_channel_layout_copy(dst, src); }
void hark_av_channel_layout_default(AVChannelLayout *ch_layout, int nb_channels) { p_av_channel_layout_default(ch_layout, nb_channels); }
void hark_av_channel_layout_uninit(AVChannelLayout *channel_layout) { p_av_channel_layout_uninit(channel_layout); }
int hark_swr_alloc_set_opts2(struct SwrContext **ps, AVChannelLayout *out_ch_layout, enum AVSampleFormat out_sample_fmt, int out_sample_rate, AVChannelLayout *in_ch_layout, enum AVSampleFormat in_sample_fmt, int in_sample_rate, int log_offset, void *log_ctx) { return p_swr_alloc_set_opts2(ps, out_ch_layout, out_sample_fmt, out_sample_rate, in_ch_layout, in_sample_fmt, in_sample_rate, log_offset, log_ctx); }
int hark_swr_init(struct SwrContext *s) { return p_swr_init(s); }
void hark_swr_free(struct SwrContext **s) { p_swr_free(s); }
int hark_swr_convert(struct SwrContext *s, uint8_t **out, int out_count, const uint8_t **in, int in_count) { return p_swr_convert(s, out, out_count, in, in_count); }
