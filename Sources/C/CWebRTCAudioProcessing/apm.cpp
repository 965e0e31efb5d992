// The C interface of hark_webrtc_apm.h over webrtc::AudioProcessing (webrtc-audio-processing 0.3.x).
#include "hark_webrtc_apm.h"

#include <webrtc/common.h>
#include <webrtc/modules/audio_processing/include/audio_processing.h>

struct hark_webrtc_apm {
    webrtc::AudioProcessing *processing;
    webrtc::StreamConfig stream;
    int frame_size;
};

extern "C" hark_webrtc_apm *hark_webrtc_apm_create(const hark_webrtc_apm_options *options) {
    webrtc::Config config;
    config.Set<webrtc::ExtendedFilter>(new webrtc::ExtendedFilter(options->extended_filter != 0));
    config.Set<webrtc::DelayAgnostic>(new webrtc::DelayAgnostic(options->delay_agnostic != 0));
    webrtc::AudioProcessing *processing = webrtc::AudioProcessing::Create(config);
    if (processing == nullptr) return nullptr;
    webrtc::ProcessingConfig layout = {{
        webrtc::StreamConfig(options->sample_rate, 1),
        webrtc::StreamConfig(options->sample_rate, 1),
        webrtc::StreamConfig(options->sample_rate, 1),
        webrtc::StreamConfig(options->sample_rate, 1),
    }};
    bool ok = processing->Initialize(layout) == webrtc::AudioProcessing::kNoError;
    if (options->echo_cancellation) {
        webrtc::EchoCancellation::SuppressionLevel level =
            options->suppression_level <= 0   ? webrtc::EchoCancellation::kLowSuppression
            : options->suppression_level == 1 ? webrtc::EchoCancellation::kModerateSuppression
                                              : webrtc::EchoCancellation::kHighSuppression;
        ok = ok && processing->echo_cancellation()->enable_drift_compensation(false) == 0;
        ok = ok && processing->echo_cancellation()->set_suppression_level(level) == 0;
        ok = ok && processing->echo_cancellation()->Enable(true) == 0;
    }
    if (options->noise_suppression >= 0) {
        webrtc::NoiseSuppression::Level level =
            options->noise_suppression == 0   ? webrtc::NoiseSuppression::kLow
            : options->noise_suppression == 1 ? webrtc::NoiseSuppression::kModerate
            : options->noise_suppression == 2 ? webrtc::NoiseSuppression::kHigh
                                              : webrtc::NoiseSuppression::kVeryHigh;
        ok = ok && processing->noise_suppression()->set_level(level) == 0;
        ok = ok && processing->noise_suppression()->Enable(true) == 0;
    }
    if (options->high_pass_filter) ok = ok && processing->high_pass_filter()->Enable(true) == 0;
    if (!ok) {
        delete processing;
        return nullptr;
    }
    hark_webrtc_apm *apm = new hark_webrtc_apm;
    apm->processing = processing;
    apm->stream = webrtc::StreamConfig(options->sample_rate, 1);
    apm->frame_size = static_cast<int>(apm->stream.num_frames());
    return apm;
}

extern "C" int hark_webrtc_apm_frame_size(const hark_webrtc_apm *apm) { return apm->frame_size; }

extern "C" int hark_webrtc_apm_process_reverse(hark_webrtc_apm *apm, const float *samples) {
    // The reverse stream is only analysed: the output pointer gets an unchanged copy.
    float scratch[480];
    float *output[1] = {scratch};
    const float *input[1] = {samples};
    return apm->processing->ProcessReverseStream(input, apm->stream, apm->stream, output);
}

extern "C" int hark_webrtc_apm_process(hark_webrtc_apm *apm, float *samples, int delay_ms) {
    apm->processing->set_stream_delay_ms(delay_ms);
    const float *input[1] = {samples};
    float *output[1] = {samples};
    return apm->processing->ProcessStream(input, apm->stream, apm->stream, output);
}

extern "C" void hark_webrtc_apm_destroy(hark_webrtc_apm *apm) {
    if (apm == nullptr) return;
    delete apm->processing;
    delete apm;
}
