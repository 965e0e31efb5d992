// A C interface to WebRTC's AudioProcessing module (webrtc-audio-processing 0.3.x, C++), for Swift: one
// mono stream in 10 ms frames of float samples in [-1, 1].
#ifndef HARK_WEBRTC_APM_H
#define HARK_WEBRTC_APM_H

#ifdef __cplusplus
extern "C" {
#endif

/// One webrtc::AudioProcessing instance with its configuration. One owner; not thread-safe.
typedef struct hark_webrtc_apm hark_webrtc_apm;

/// What to enable.
typedef struct hark_webrtc_apm_options {
    /// Sample rate of both streams: 8000, 16000, 32000 or 48000.
    int sample_rate;
    /// Echo cancellation (EchoCancellation, the full AEC, not the mobile AECM).
    int echo_cancellation;
    /// The AEC's suppression level: 0 low, 1 moderate, 2 high (EchoCancellation::set_suppression_level).
    int suppression_level;
    /// The extended filter (ExtendedFilter: a longer tail, 128 ms, and more robust delay handling).
    int extended_filter;
    /// Delay-agnostic AEC (DelayAgnostic: estimates the stream delay itself).
    int delay_agnostic;
    /// Noise suppression level, -1 off, 0 low … 3 very high (NoiseSuppression::set_level).
    int noise_suppression;
    /// The high-pass filter (HighPassFilter).
    int high_pass_filter;
} hark_webrtc_apm_options;

/// Creates and configures an instance (AudioProcessing::Create with a webrtc::Config); NULL on failure.
hark_webrtc_apm *hark_webrtc_apm_create(const hark_webrtc_apm_options *options);

/// Samples in one 10 ms frame at the instance's rate.
int hark_webrtc_apm_frame_size(const hark_webrtc_apm *apm);

/// Feeds one 10 ms frame of what the speaker played (AudioProcessing::ProcessReverseStream, float
/// StreamConfig form). Returns 0, or AudioProcessing's negative error code.
int hark_webrtc_apm_process_reverse(hark_webrtc_apm *apm, const float *samples);

/// Processes one 10 ms microphone frame in place (AudioProcessing::set_stream_delay_ms, then
/// ProcessStream, float StreamConfig form). `delay_ms` is the time from a sample's ProcessReverseStream
/// to its echo's ProcessStream beyond the acoustic path. Returns 0, or a negative error code.
int hark_webrtc_apm_process(hark_webrtc_apm *apm, float *samples, int delay_ms);

/// Destroys the instance (delete).
void hark_webrtc_apm_destroy(hark_webrtc_apm *apm);

#ifdef __cplusplus
}
#endif

#endif
